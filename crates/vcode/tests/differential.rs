//! The differential tests (`common/differential.rs`) on the native x86-64
//! backend, run directly: random programs against the reference backend,
//! with calls to the Rust `extern "C"` callbacks below among them, and the
//! typed errors of both backends; plus the x86-64 code-size limit.
//!
//! Run: `cargo test -p vcode --test differential`
//! (`VCODE_DIFF_CASES` programs, 10,000 by default).

#[macro_use]
mod common;

use common::target::X86_64;
use vcode::{ErrorKind, Func, Invoke, L, Leaf, Ty, Value};

/// The target the shared suite runs on.
type Arch = X86_64;

#[path = "common/differential.rs"]
mod differential;

use differential::{Callback, Callbacks};

extern "C" fn cb_ints(
    a: i32,
    b: i64,
    c: u32,
    d: u64,
    e: i32,
    f: i64,
    g: u32,
    h: i64,
    i: usize,
) -> i64 {
    (a as i64)
        .wrapping_mul(3)
        .wrapping_add(b.rotate_left(5))
        .wrapping_sub(c as i64 * 7)
        ^ (d as i64).wrapping_mul(11)
        ^ (e as i64) << 3
        ^ f.wrapping_mul(13)
        ^ (g as i64) << 17
        ^ h.rotate_right(9)
        ^ (i as i64).wrapping_mul(0x9e37)
}

#[allow(clippy::too_many_arguments)]
extern "C" fn cb_floats(
    a: f64,
    b: f32,
    c: f64,
    d: f64,
    e: f32,
    f: f64,
    g: f64,
    h: f64,
    i: f64,
    j: f32,
    k: i32,
) -> f64 {
    a + 2.0 * b as f64 - 3.0 * c + d * 0.5 + e as f64 * 5.0 - f + g * 7.0 + h - i * 9.0
        + j as f64 * 10.0
        + k as f64
}

extern "C" fn cb_mixed(a: f32, b: i64, c: f64, d: u32) -> f32 {
    a * 2.0 + (b % 1000) as f32 - c as f32 + d as f32
}

/// Stores `v` into the integer area of the buffer `p` at `off & 0xf8`.
extern "C" fn cb_store(p: *mut u8, off: u64, v: u64) {
    // SAFETY: `p` is the test buffer (BUF bytes) and `(off & 0xf8) + 8` <= 256.
    unsafe { (p.add((off & 0xf8) as usize) as *mut u64).write_unaligned(v) };
}

extern "C" fn cb_count() -> i32 {
    7
}

impl Callbacks for X86_64 {
    fn natives() -> Vec<Callback> {
        vec![
            Callback {
                addr: cb_ints as *const () as usize,
                params: &[
                    Ty::I,
                    Ty::L,
                    Ty::U,
                    Ty::UL,
                    Ty::I,
                    Ty::L,
                    Ty::U,
                    Ty::L,
                    Ty::P,
                ],
                ret: Ty::L,
            },
            Callback {
                addr: cb_floats as *const () as usize,
                params: &[
                    Ty::D,
                    Ty::F,
                    Ty::D,
                    Ty::D,
                    Ty::F,
                    Ty::D,
                    Ty::D,
                    Ty::D,
                    Ty::D,
                    Ty::F,
                    Ty::I,
                ],
                ret: Ty::D,
            },
            Callback {
                addr: cb_mixed as *const () as usize,
                params: &[Ty::F, Ty::L, Ty::D, Ty::U],
                ret: Ty::F,
            },
            Callback {
                addr: cb_store as *const () as usize,
                params: &[Ty::P, Ty::UL, Ty::UL],
                ret: Ty::V,
            },
            Callback {
                addr: cb_count as *const () as usize,
                params: &[],
                ret: Ty::I,
            },
        ]
    }

    fn count() -> usize {
        cb_count as *const () as usize
    }
}

/// A code buffer past its limit (`Func::<X64>::set_code_limit`) is a typed
/// error at the instruction that crossed it. x86-64 only: the limit is the
/// x86-64 builder's, and the instruction sizes counted here are x86-64's.
#[test]
fn native_end_reports_code_too_large() {
    let mut f = Func::new();
    f.set_code_limit(2048);
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    for _ in 0..300 {
        f.set(x, 0x1234_5678_9abc_def0); // 10 bytes each
    }
    f.ret(x);
    let e = f.end().expect_err("code too large");
    assert_eq!(
        (e.method(), e.kind()),
        ("set", &ErrorKind::CodeTooLarge { limit: 2048 }),
        "{e}"
    );
    // It is the instruction that crossed the limit, give or take the
    // buffer's slack of a few instructions.
    assert!((150..=205).contains(&e.index()), "{e}");
    // The same builder, same limit, makes a function that fits.
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    for _ in 0..100 {
        f.set(x, 0x1234_5678_9abc_def0);
    }
    f.ret(x);
    let code = f.end().expect("fits in 2048 bytes");
    assert!(code.len() <= 2048);
    // SAFETY: sets and returns its register.
    let got = unsafe { code.invoke(&[Value::L(0)]) };
    assert_eq!(got, Ok(Value::L(0x1234_5678_9abc_def0)));
}
