//! Helpers shared by the vcode integration tests.

#![allow(dead_code, unused_macros)]

pub mod target;

use vcode::{Reg, Type};

/// Runs `$e` with `$T` the static integer register type of the run-time `$ty`.
macro_rules! int_ty {
    ($ty:expr, |$T:ident| $e:expr) => {
        match $ty {
            Ty::I => {
                type $T = I;
                $e
            }
            Ty::U => {
                type $T = U;
                $e
            }
            Ty::L => {
                type $T = L;
                $e
            }
            Ty::UL => {
                type $T = UL;
                $e
            }
            Ty::P => {
                type $T = P;
                $e
            }
            t => panic!("not an integer register type: {t}"),
        }
    };
}

/// Runs `$e` with `$T` the static float register type of the run-time `$ty`.
macro_rules! float_ty {
    ($ty:expr, |$T:ident| $e:expr) => {
        match $ty {
            Ty::F => {
                type $T = F;
                $e
            }
            Ty::D => {
                type $T = D;
                $e
            }
            t => panic!("not a float type: {t}"),
        }
    };
}

/// Runs `$e` with `$T` the static register type of the run-time `$ty`.
macro_rules! any_ty {
    ($ty:expr, |$T:ident| $e:expr) => {
        match $ty {
            Ty::F | Ty::D => float_ty!($ty, |$T| $e),
            _ => int_ty!($ty, |$T| $e),
        }
    };
}

/// Physical register `n` as a `Reg<T>`.
pub fn r<T: Type>(n: u8) -> Reg<T> {
    Reg::phys(n)
}

/// The native code of a `"%p%ul"` function that tests a memory op on base
/// register number `k` (0 to 9 reach every one the encodings treat apart:
/// r12's SIB byte, r8 to r15's REX): `k` persistent registers are taken
/// and held, the pointer argument is moved into the next one (or stays
/// where it arrived once they run out), and `emit(f, base, value)` emits
/// the op and the return.
pub fn on_base_register(
    k: usize,
    emit: impl FnOnce(&mut vcode::Func, Reg<vcode::P>, Reg<vcode::UL>),
) -> vcode::Code {
    use vcode::{Class, Func, Leaf, P, UL};
    let mut f = Func::new();
    let a = f.lambda("%p%ul", Leaf::No).expect("lambda");
    let (p0, v0) = (a.get::<P>(0).expect("p"), a.get::<UL>(1).expect("v"));
    let mut held = Vec::new();
    for _ in 0..k {
        if let Ok(r) = f.getreg::<P>(Class::Persistent) {
            held.push(r);
        }
    }
    let base = f.getreg::<P>(Class::Persistent).unwrap_or(p0);
    f.mov(base, p0);
    emit(&mut f, base, v0);
    f.end().expect("end")
}
