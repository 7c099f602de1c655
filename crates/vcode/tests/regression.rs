//! The regression table (`common/regression.rs`, VCODE §5.1) on the native
//! x86-64 backend, run directly, against the reference backend; plus the
//! one x86-64 check the shared table cannot make: returns through typed
//! function pointers (`Code::as_fn`, which only native code has).
//!
//! The functions the table calls outside generated code are Rust
//! functions here, so these tests also check calls into real `extern "C"`
//! code (its stack alignment, its stack arguments).
//!
//! Run: `cargo test -p vcode --test regression`.

#[macro_use]
mod common;

use common::target::X86_64;
use vcode::{D, F, I, L, P, Ty, U, UL, X64};

/// The target the shared suite runs on.
type Arch = X86_64;

#[path = "common/regression.rs"]
mod regression;

use regression::{ALLOC, CTL, Callees, FALLOC, JAL_COUNT, ret_fn};

extern "C" fn bump() {
    JAL_COUNT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

#[repr(align(16))]
struct Aligned16([u8; 16]);

/// How far from 16-byte alignment the caller left the stack: a local that
/// must be 16-byte aligned lands off by that much when rsp was wrong.
extern "C" fn stack_misalignment() -> i64 {
    let a = Aligned16([0; 16]);
    let a = std::hint::black_box(&a);
    (a as *const Aligned16 as usize % 16) as i64 + a.0[0] as i64
}

impl Callees for X86_64 {
    fn bump() -> usize {
        bump as *const () as usize
    }
    fn stack_misalignment() -> usize {
        stack_misalignment as *const () as usize
    }
    fn nine_args() -> usize {
        regression::nine_args_model as *const () as usize
    }
    fn floats_and_ints() -> usize {
        regression::floats_and_ints_model as *const () as usize
    }
    fn mixed32() -> Option<usize> {
        Some(regression::mixed32_model as *const () as usize)
    }
}

/// The `ret` row's functions, called through typed function pointers
/// (`Code::as_fn`): the value comes back in the register the Rust caller
/// reads for the type. x86-64 only: emulated code has no function pointer
/// the host could call.
#[test]
fn ret_through_typed_function_pointers() {
    for ty in [Ty::I, Ty::U, Ty::L, Ty::UL, Ty::P, Ty::F, Ty::D] {
        let n = if ty.is_float() { FALLOC[0] } else { ALLOC[0] };
        let code = any_ty!(ty, |T| ret_fn::<X64, T>(n, false)).unwrap();
        let mut ctl = [0u64; CTL];
        ctl[0] = 0x1234_5678_9abc_def0;
        let c = ctl.as_mut_ptr();
        // SAFETY: the function reads slot 0 of `ctl`, and its signature
        // is checked against the pointer type by `as_fn`.
        unsafe {
            match ty {
                Ty::I => assert_eq!(
                    code.as_fn::<extern "C" fn(*mut u64) -> i32>().unwrap()(c),
                    0x9abc_def0u32 as i32
                ),
                Ty::U => assert_eq!(
                    code.as_fn::<extern "C" fn(*mut u64) -> u32>().unwrap()(c),
                    0x9abc_def0
                ),
                Ty::L => assert_eq!(
                    code.as_fn::<extern "C" fn(*mut u64) -> i64>().unwrap()(c),
                    0x1234_5678_9abc_def0
                ),
                Ty::UL => assert_eq!(
                    code.as_fn::<extern "C" fn(*mut u64) -> u64>().unwrap()(c),
                    0x1234_5678_9abc_def0
                ),
                Ty::P => assert_eq!(
                    code.as_fn::<extern "C" fn(*mut u64) -> usize>().unwrap()(c),
                    0x1234_5678_9abc_def0
                ),
                Ty::F => assert_eq!(
                    code.as_fn::<extern "C" fn(*mut u64) -> f32>().unwrap()(c).to_bits(),
                    0x9abc_def0
                ),
                _ => assert_eq!(
                    code.as_fn::<extern "C" fn(*mut u64) -> f64>().unwrap()(c).to_bits(),
                    0x1234_5678_9abc_def0
                ),
            }
        }
    }
}
