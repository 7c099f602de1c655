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
