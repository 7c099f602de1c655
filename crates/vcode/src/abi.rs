//! Crossing between Rust and generated or native code under the System V
//! x86-64 calling convention: typed function pointers whose signature is
//! checked against the generated code ([`FnSig`]), and calls whose
//! signature is known only at run time ([`call_native`]).
//!
//! This is one of the small modules that own `unsafe`.

use crate::InvokeError;
use crate::error::ErrorKind;
use crate::ty::{Ty, Value};
use crate::x86_64::{ArgLoc, abi_layout};

/// A Rust type that maps to a vcode type at the ABI boundary.
pub trait AbiType {
    /// The vcode type.
    const TY: Ty;
}

macro_rules! abi_types {
    ($($t:ty => $ty:ident),*) => {$( impl AbiType for $t { const TY: Ty = Ty::$ty; } )*};
}
abi_types!(i32 => I, u32 => U, i64 => L, u64 => UL, usize => P, isize => L, f32 => F, f64 => D, () => V);
impl<T> AbiType for *const T {
    const TY: Ty = Ty::P;
}
impl<T> AbiType for *mut T {
    const TY: Ty = Ty::P;
}

/// An `extern "C" fn` pointer type whose signature can be checked against
/// generated code.
pub trait FnSig: Copy {
    /// Checks the parameter and return types.
    fn check(params: &[Ty], ret: Ty) -> Result<(), ErrorKind>;
    /// Makes the pointer.
    ///
    /// # Safety
    /// `addr` must be the entry of code with this signature.
    unsafe fn from_addr(addr: usize) -> Self;
}

fn check_sig(want: &[Ty], want_ret: Ty, params: &[Ty], ret: Ty) -> Result<(), ErrorKind> {
    if want == params && want_ret == ret {
        return Ok(());
    }
    let show = |p: &[Ty], r: Ty| {
        p.iter().map(|t| format!("%{t}")).collect::<String>() + " -> " + r.letter()
    };
    Err(ErrorKind::SignatureMismatch {
        expected: show(params, ret),
        found: show(want, want_ret),
    })
}

/// `FnSig` for one function pointer type `$f` with parameters `$a`.
macro_rules! fn_sig {
    ($f:ty; $($a:ident),*) => {
        impl<R: AbiType, $($a: AbiType),*> FnSig for $f {
            fn check(params: &[Ty], ret: Ty) -> Result<(), ErrorKind> {
                check_sig(&[$($a::TY),*], R::TY, params, ret)
            }
            unsafe fn from_addr(addr: usize) -> Self {
                // SAFETY: the caller guarantees `addr` is code of this
                // signature; function pointers and usize have the same size.
                unsafe { std::mem::transmute::<usize, Self>(addr) }
            }
        }
    };
}

/// `FnSig` for safe and unsafe `extern "C" fn` pointers of each arity.
macro_rules! fn_sigs {
    ($( ($($a:ident),*) )*) => {$(
        fn_sig!(extern "C" fn($($a),*) -> R; $($a),*);
        fn_sig!(unsafe extern "C" fn($($a),*) -> R; $($a),*);
    )*};
}
fn_sigs! {
    ()
    (A1)
    (A1, A2)
    (A1, A2, A3)
    (A1, A2, A3, A4)
    (A1, A2, A3, A4, A5)
    (A1, A2, A3, A4, A5, A6)
    (A1, A2, A3, A4, A5, A6, A7)
    (A1, A2, A3, A4, A5, A6, A7, A8)
    (A1, A2, A3, A4, A5, A6, A7, A8, A9)
    (A1, A2, A3, A4, A5, A6, A7, A8, A9, A10)
}

/// Checks run-time arguments against a signature.
pub fn check_args(params: &[Ty], args: &[Value]) -> Result<(), InvokeError> {
    if params.len() != args.len() {
        return Err(InvokeError::Arity {
            expected: params.len(),
            found: args.len(),
        });
    }
    for (i, (&p, a)) in params.iter().zip(args).enumerate() {
        if p != a.ty() {
            return Err(InvokeError::ArgType {
                index: i,
                expected: p,
                found: a.ty(),
            });
        }
    }
    if args.iter().filter(|a| !a.ty().is_float()).count() > 6 + STACK_SLOTS
        || args.len() > 6 + 8 + STACK_SLOTS
    {
        return Err(InvokeError::Arity {
            expected: 6 + 8 + STACK_SLOTS,
            found: args.len(),
        });
    }
    Ok(())
}

/// Stack slots [`call_native`] can pass: enough for every call vcode
/// accepts ([`MAX_CALL_ARGS`](crate::backend::MAX_CALL_ARGS) arguments, at
/// least 6 of them in integer registers or at most 8 in float ones).
pub const STACK_SLOTS: usize = 26;
const _: () = assert!(STACK_SLOTS >= crate::backend::MAX_CALL_ARGS - 6);

type Wide<R> = extern "C" fn(
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    f64,
    f64,
    f64,
    f64,
    f64,
    f64,
    f64,
    f64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
) -> R;

/// Calls the code at `addr` with `args`, returning a value of type `ret`.
///
/// It calls through one wide signature: six integer registers, eight
/// float registers and 26 stack slots. Under System V, integer and
/// float arguments are assigned to their registers independently and the
/// rest go to the stack in order, so filling exactly the registers and
/// slots the real signature uses, and leaving the others unused, passes
/// the arguments as the callee expects; the caller owns and pops the
/// extra stack slots. `f` values travel in the low 32 bits of an xmm
/// register or stack slot, integers of 32 bits in the low half of theirs.
///
/// # Safety
/// `addr` must be a function whose parameter types are the types of
/// `args` (checked by [`check_args`]) and whose return type is `ret`, and
/// calling it must be sound.
pub unsafe fn call_native(addr: usize, args: &[Value], ret: Ty) -> Value {
    let mut tys = [Ty::V; crate::ty::MAX_PARAMS];
    for (t, a) in tys.iter_mut().zip(args) {
        *t = a.ty();
    }
    let mut g = [0u64; 6];
    let mut x = [0f64; 8];
    let mut s = [0u64; STACK_SLOTS];
    for (a, loc) in args.iter().zip(abi_layout(&tys[..args.len()])) {
        match loc {
            ArgLoc::Reg(n) if a.ty().is_float() => x[n as usize] = f64::from_bits(a.bits()),
            ArgLoc::Reg(n) => {
                let i = crate::host::INT_ARGS
                    .iter()
                    .position(|&r| r == n)
                    .unwrap_or(0);
                g[i] = a.bits();
            }
            // In range: at most MAX_CALL_ARGS - 6 arguments go on the stack.
            ArgLoc::Stack(k) => s[k] = a.bits(),
        }
    }
    macro_rules! go {
        ($r:ty) => {{
            // SAFETY: see the function documentation: the wide signature
            // passes exactly the registers and slots the callee reads.
            let f: Wide<$r> = unsafe { std::mem::transmute::<usize, Wide<$r>>(addr) };
            f(
                g[0], g[1], g[2], g[3], g[4], g[5], x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
                s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12],
                s[13], s[14], s[15], s[16], s[17], s[18], s[19], s[20], s[21], s[22], s[23], s[24],
                s[25],
            )
        }};
    }
    if ret.is_float() {
        let bits = go!(f64).to_bits();
        Value::from_bits(
            ret,
            if ret == Ty::F {
                bits & 0xffff_ffff
            } else {
                bits
            },
        )
    } else {
        let bits = go!(u64);
        let bits = match ret {
            Ty::I | Ty::U => bits & 0xffff_ffff,
            _ => bits,
        };
        Value::from_bits(ret, bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" fn mix(
        a: i32,
        b: f64,
        c: i64,
        d: f32,
        e: u32,
        f: usize,
        g: i32,
        h: i64,
        i: i32,
        j: f64,
    ) -> f64 {
        a as f64
            + b * 2.0
            + c as f64 * 3.0
            + d as f64 * 4.0
            + e as f64 * 5.0
            + f as f64 * 6.0
            + g as f64 * 7.0
            + h as f64 * 8.0
            + i as f64 * 9.0
            + j * 10.0
    }

    extern "C" fn nine(
        a: i64,
        b: i64,
        c: i64,
        d: i64,
        e: i64,
        f: i64,
        g: i64,
        h: i64,
        i: i64,
    ) -> i64 {
        a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i
    }

    #[test]
    fn calls_with_a_run_time_signature_reach_registers_and_stack() {
        let args = [
            Value::I(1),
            Value::D(0.5),
            Value::L(-2),
            Value::F(1.5),
            Value::U(3),
            Value::P(4),
            Value::I(5),
            Value::L(6),
            Value::I(7),
            Value::D(0.25),
        ];
        // SAFETY: `mix` has exactly these parameter types and returns f64.
        let got = unsafe { call_native(mix as *const () as usize, &args, Ty::D) };
        assert_eq!(got, Value::D(mix(1, 0.5, -2, 1.5, 3, 4, 5, 6, 7, 0.25)));
        let args: Vec<Value> = (1..=9).map(Value::L).collect();
        // SAFETY: `nine` takes nine i64 and returns i64.
        let got = unsafe { call_native(nine as *const () as usize, &args, Ty::L) };
        assert_eq!(got, Value::L(nine(1, 2, 3, 4, 5, 6, 7, 8, 9)));
    }

    #[test]
    fn signature_checks_name_the_mismatch() {
        type F = extern "C" fn(i32) -> i32;
        assert!(F::check(&[Ty::I], Ty::I).is_ok());
        assert_eq!(
            F::check(&[Ty::L], Ty::I),
            Err(ErrorKind::SignatureMismatch {
                expected: "%l -> i".into(),
                found: "%i -> i".into()
            })
        );
        assert!(F::check(&[Ty::I, Ty::I], Ty::I).is_err());
    }
}
