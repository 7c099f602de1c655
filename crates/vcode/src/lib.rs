//! # vcode: in-place dynamic code generation
//!
//! An implementation of VCODE (Dawson Engler, *VCODE: A Retargetable,
//! Extensible, Very Fast Dynamic Code Generation System*, PLDI 1996) for
//! x86-64. Clients generate code at run time through the interface of an
//! idealized load-store RISC machine; each instruction method writes its
//! machine code on the spot, with no intermediate representation and no
//! later pass, so that generating an instruction costs a handful of host
//! instructions.
//!
//! ## Entry points
//!
//! * [`Func`]: one function under construction: `lambda`, the
//!   instructions of the paper's Table 2 (composed with the types of
//!   Table 1 through typed registers), `end`.
//! * [`Reg`], [`Label`], [`Local`], [`Operand`]: what instructions take.
//!   [`Reg::t`] and [`Reg::s`] are the fixed register names of §5.3.
//! * [`x86_64::Code`]: a linked function: a typed function pointer
//!   ([`Code::as_fn`](x86_64::Code::as_fn)), its disassembly, its size.
//! * [`reference::Reference`]: the reference backend: the same client
//!   code, recorded and executed with every mistake reported as a typed
//!   error. It is the debugger the paper says VCODE lacked (§6.2) and the
//!   oracle for differential tests.
//! * [`ext`]: instruction extensions declared in one table (§5.4), and
//!   the shipped ones: `sqrt`, `bswap`, `popcount`, `select`, `min`/`max`,
//!   ones'-complement add, and the scheduling hooks.
//! * [`mem`]: executable memory, W^X, and the [`mem::ExecMemory`] trait a
//!   code cache implements to receive generated code directly.
//! * [`debug`]: disassembly and the perf map.
//!
//! ```
//! use vcode::{Func, Leaf, Class, I, P};
//! // int sum(int *a, int n): a loop, with registers from getreg.
//! let mut f = Func::new();
//! let p = f.lambda("%p%i", Leaf::Yes)?;
//! let (a, n) = (p.get::<P>(0)?, p.get::<I>(1)?);
//! let (s, x) = (f.getreg::<I>(Class::Temp)?, f.getreg::<I>(Class::Temp)?);
//! let end = f.getreg::<P>(Class::Temp)?;
//! f.set(s, 0);
//! let (top, done) = (f.genlabel(), f.genlabel());
//! f.ble(n, 0, done);
//! let n64 = f.getreg::<P>(Class::Temp)?;
//! f.cv(n64.cast::<vcode::L>(), n);
//! f.lsh(n64, n64, 2);
//! f.add(end, a, n64);
//! f.label(top);
//! f.ld(x, a, 0);
//! f.add(s, s, x);
//! f.add(a, a, 4);
//! f.blt(a, end, top);
//! f.label(done);
//! f.ret(s);
//! let code = f.end()?;
//! // SAFETY: reads `n` ints from the pointer it is given.
//! let sum = unsafe { code.as_fn::<extern "C" fn(*const i32, i32) -> i32>()? };
//! assert_eq!(sum([1, 2, 3, 4].as_ptr(), 4), 10);
//! # Ok::<(), vcode::Error>(())
//! ```
//!
//! ## Dependencies
//!
//! * `iced-x86`: disassembly of generated code (and encoding checks in tests).
//! * `libc`: `memfd_create`, `mmap`, `mprotect` for W^X executable memory.
//! * `thiserror`: the typed errors.

pub mod abi;
pub mod backend;
mod buf;
pub mod debug;
mod error;
pub mod ext;
mod func;
pub mod host;
pub mod mem;
pub mod reference;
mod regs;
mod ty;
pub mod x86_64;

pub use backend::{Arg, Backend, Callee, Target};
pub use error::{Error, ErrorKind, Result};
pub use func::{Func, Leaf, Params};
pub use reference::Reference;
pub use regs::{Class, RegAlloc, RegClass, RegConfig};
pub use ty::{
    AnyReg, D, Data, F, Float, I, Int, L, Label, Local, MAX_PARAMS, Operand, P, Reg, Signature, Ty,
    Type, U, UL, Value,
};
pub use x86_64::{Code, X64};

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
    Fault(#[from] reference::Fault),
}
