//! The regression table (`common/regression.rs`, VCODE §5.1) on the
//! aarch64 backend, run under emulation (`vcode::emu`, feature `emu`),
//! against the reference backend parameterized by AAPCS64.
//!
//! Emulated code cannot call host (x86-64) functions, so the functions
//! the table calls outside generated code ([`Callees`]) are A64 functions
//! generated here, each computing what the x86-64 binary's Rust function
//! does. The typed-function-pointer check of `ret` is x86-64's alone
//! (`regression.rs`).
//!
//! Run: `cargo test -p vcode --features emu --test aarch64_regression`.

#![cfg(feature = "emu")]

#[macro_use]
mod common;

use std::sync::OnceLock;
use std::sync::atomic::AtomicU64;

use common::target::{Aarch64, a64_kept};
use vcode::{Class, D, F, I, L, P, Reg, Ty, UL};

/// The target the shared suite runs on.
type Arch = Aarch64;

#[path = "common/regression.rs"]
mod regression;

use regression::{Callees, JAL_COUNT};

impl Callees for Aarch64 {
    fn bump() -> usize {
        static STUB: OnceLock<usize> = OnceLock::new();
        *STUB.get_or_init(|| {
            a64_kept("", |f, _| {
                let (a, x) = (Reg::<P>::t(0), Reg::<UL>::t(1));
                f.set(a, &JAL_COUNT as *const AtomicU64 as usize);
                f.ld(x, a, 0);
                f.add(x, x, 1);
                f.st(x, a, 0);
                f.retv();
            })
        })
    }

    /// The address of an 8-byte local, which the frame places 8 mod 16
    /// below a 16-byte aligned frame, and 15, xor 8: 0 when the caller's
    /// stack was aligned.
    fn stack_misalignment() -> usize {
        static STUB: OnceLock<usize> = OnceLock::new();
        *STUB.get_or_init(|| {
            a64_kept("", |f, _| {
                let l = f.local::<D>();
                let a = Reg::<P>::t(0);
                f.addr_local(a, l);
                f.and(a, a, 15);
                f.xor(a, a, 8);
                f.ret(a.cast::<L>());
            })
        })
    }

    fn nine_args() -> usize {
        static STUB: OnceLock<usize> = OnceLock::new();
        *STUB.get_or_init(|| {
            a64_kept("%l%l%l%l%l%l%l%l%l", |f, p| {
                let s = f.getreg::<L>(Class::Temp).unwrap();
                f.set(s, 0);
                for k in 0..9 {
                    let x = p.get::<L>(k).unwrap();
                    f.mul(x, x, k as i64 + 1);
                    f.add(s, s, x);
                }
                f.ret(s);
            })
        })
    }

    fn floats_and_ints() -> usize {
        static STUB: OnceLock<usize> = OnceLock::new();
        *STUB.get_or_init(|| {
            a64_kept("%f%d%i%d%d%d%d%d%f%d%f", |f, p| {
                let [acc, t, k] = [(); 3].map(|_| f.getreg::<D>(Class::Temp).unwrap());
                let sig = [
                    Ty::F,
                    Ty::D,
                    Ty::I,
                    Ty::D,
                    Ty::D,
                    Ty::D,
                    Ty::D,
                    Ty::D,
                    Ty::F,
                    Ty::D,
                    Ty::F,
                ];
                for (n, ty) in sig.iter().enumerate() {
                    match ty {
                        Ty::F => f.cv(t, p.get::<F>(n).unwrap()),
                        Ty::I => f.cv(t, p.get::<I>(n).unwrap()),
                        _ => f.mov(t, p.get::<D>(n).unwrap()),
                    }
                    if n == 0 {
                        f.mov(acc, t);
                    } else {
                        f.set(k, (n + 1) as f64);
                        f.mul(t, k, t);
                        f.add(acc, acc, t);
                    }
                }
                f.ret(acc);
            })
        })
    }
    fn mixed32() -> Option<usize> {
        // Emulated code cannot call the host; the shared suite calls the
        // generated callee of the same signature instead.
        None
    }
}
