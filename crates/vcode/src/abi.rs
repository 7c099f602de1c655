//! Crossing between Rust and generated or native code, target-neutrally:
//! typed function pointers whose signature is checked against the
//! generated code ([`FnSig`]), running code with arguments known only at
//! run time ([`Invoke`]), and the [`CallConv`] trait by which each target
//! describes its calling convention and register file to the
//! target-neutral parts of vcode (the reference backend, the assignment of
//! parameters to registers). Each target implements it in its own module
//! (System V x86-64: [`SysV`](crate::x86_64::SysV) in `x86_64.rs`).

use crate::error::{ErrorKind, Fault};
use crate::ty::{Ty, Value};

/// Where an argument of a call (or a parameter of a function) lives at the
/// call: a target's calling convention says, through [`CallConv::arg_locs`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ArgLoc {
    /// In this register (integer or float register number by type).
    Reg(u8),
    /// In this 8-byte stack slot above the return address.
    Stack(usize),
}

/// A target's calling convention and register file, as the target-neutral
/// parts of vcode need them: the reference backend (which checks register
/// use and calls native functions) and `lambda` (which gives parameters
/// their registers). The native backend of the target uses its own
/// convention directly.
///
/// It is object-safe: the reference backend keeps it as
/// `&'static dyn CallConv`.
pub trait CallConv: Sync + std::fmt::Debug {
    /// The convention's instance.
    fn get() -> &'static Self
    where
        Self: Sized;

    /// The convention's tables: its name, argument registers, and the
    /// register file's reserved, callee-saved and named registers. The
    /// methods below read them; a target supplies only the tables.
    fn tables(&self) -> &'static ConvTables;

    /// The convention's name, e.g. `"System V x86-64"`.
    fn name(&self) -> &'static str {
        self.tables().name
    }

    /// Writes where each argument of a call with parameter types `params`
    /// arrives into `out[..params.len()]` (`out` is at least as long).
    fn arg_locs(&self, params: &[Ty], out: &mut [ArgLoc]) {
        for (o, loc) in out.iter_mut().zip(self.tables().layout(params)) {
            *o = loc;
        }
    }

    /// True if a parameter of type `ty` arriving at `loc` stays in that
    /// register; false if it arrives on the stack or in a register the
    /// backend keeps for itself, so that `lambda` gives it a register from
    /// `getreg` and the backend copies it there.
    fn keeps_param(&self, ty: Ty, loc: ArgLoc) -> bool {
        let t = self.tables();
        matches!(loc, ArgLoc::Reg(n) if t.reserved[ty.is_float() as usize] & (1 << n) == 0)
    }

    /// The assembler name of register `n` (integer or float).
    fn reg_name(&self, float: bool, n: u8) -> &'static str {
        let names = self.tables().names[float as usize];
        names.get(n as usize).copied().unwrap_or("?")
    }

    /// The registers (a mask per file) that the native backend keeps for
    /// its own sequences: never handed out, never named by a client.
    fn reserved(&self, float: bool) -> u16 {
        self.tables().reserved[float as usize]
    }

    /// The registers (a mask per file) that the convention makes
    /// callee-saved.
    fn callee_saved(&self, float: bool) -> u16 {
        self.tables().callee_saved[float as usize]
    }

    /// Checks that [`call`](CallConv::call) can pass `args` (beyond the
    /// signature check of [`check_args`]).
    fn check_call(&self, args: &[Value]) -> Result<(), InvokeError>;

    /// Calls the native code at `addr` with `args`, returning a value of
    /// type `ret`.
    ///
    /// # Safety
    /// `addr` must be a function whose parameter types are the types of
    /// `args` (checked by [`check_args`] and [`check_call`](CallConv::check_call))
    /// and whose return type is `ret`, and calling it must be sound.
    unsafe fn call(&self, addr: usize, args: &[Value], ret: Ty) -> Value;

    /// Runs generated code at `addr` for [`Invoke::invoke`]: refuses
    /// what [`check_call`](CallConv::check_call) refuses, then calls it.
    /// A target whose code can fault without stopping the process (code
    /// run under emulation) reports the fault here instead.
    ///
    /// # Safety
    /// As for [`call`](CallConv::call).
    unsafe fn run(&self, addr: usize, args: &[Value], ret: Ty) -> Result<Value, InvokeError> {
        self.check_call(args)?;
        // SAFETY: forwarded from the caller (this method's contract).
        Ok(unsafe { self.call(addr, args, ret) })
    }
}

/// A calling convention as data, what [`CallConv`]'s methods read:
/// integers and floats each in their own argument registers in order,
/// the rest in 8-byte stack slots in order (System V x86-64 and AAPCS64
/// alike), and the register file's roles, a mask per file (integer,
/// float).
#[derive(Debug)]
pub struct ConvTables {
    /// The convention's name, e.g. `"System V x86-64"`.
    pub name: &'static str,
    /// Integer argument registers, in order.
    pub int_args: &'static [u8],
    /// Float argument registers, in order.
    pub float_args: &'static [u8],
    /// The registers the native backend keeps for its own sequences.
    pub reserved: [u16; 2],
    /// The registers the convention makes callee-saved.
    pub callee_saved: [u16; 2],
    /// The assembler names of the registers, by number.
    pub names: [&'static [&'static str; 16]; 2],
}

impl ConvTables {
    /// Where each argument of types `tys` arrives, in order: integers
    /// and floats each in their own argument registers, each file
    /// independently, then 8-byte stack slots in order.
    #[inline]
    pub fn layout<'a>(&'static self, tys: &'a [Ty]) -> impl Iterator<Item = ArgLoc> + 'a {
        let (int_args, float_args) = (self.int_args, self.float_args);
        let (mut ni, mut nf, mut ns) = (0, 0, 0);
        tys.iter().map(move |t| {
            if t.is_float() {
                if nf < float_args.len() {
                    nf += 1;
                    return ArgLoc::Reg(float_args[nf - 1]);
                }
            } else if ni < int_args.len() {
                ni += 1;
                return ArgLoc::Reg(int_args[ni - 1]);
            }
            ns += 1;
            ArgLoc::Stack(ns - 1)
        })
    }
}

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

/// Checks run-time arguments against a signature (their number and
/// types; the target's [`CallConv::check_call`] checks what it can pass).
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
    Ok(())
}

/// Running a generated function with arguments known only at run time:
/// the common interface of native code and the reference backend, which
/// differential tests are written against.
pub trait Invoke {
    /// The parameter types.
    fn params(&self) -> &[Ty];
    /// The return type.
    fn ret_type(&self) -> Ty;
    /// Runs the function.
    ///
    /// # Safety
    /// Generated code does what its instructions say: the caller vouches
    /// that its loads, stores and calls are sound for these arguments.
    unsafe fn invoke(&self, args: &[Value]) -> std::result::Result<Value, InvokeError>;
}

/// Why [`Invoke::invoke`] did not return a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvokeError {
    /// Wrong number of arguments.
    #[error("expected {expected} arguments, found {found}")]
    Arity {
        /// Parameters of the function.
        expected: usize,
        /// Arguments given.
        found: usize,
    },
    /// An argument of the wrong type.
    #[error("argument {index}: expected {expected}, found {found}")]
    ArgType {
        /// Which argument.
        index: usize,
        /// The parameter type.
        expected: Ty,
        /// The argument's type.
        found: Ty,
    },
    /// The reference backend stopped on an error in the program.
    #[error(transparent)]
    Fault(#[from] Fault),
}

#[cfg(test)]
mod tests {
    use super::*;

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
