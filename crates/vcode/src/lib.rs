//! # vcode: in-place dynamic code generation
//!
//! An implementation of VCODE (Dawson Engler, *VCODE: A Retargetable,
//! Extensible, Very Fast Dynamic Code Generation System*, PLDI 1996) for
//! x86-64 and aarch64. Clients generate code at run time through the interface of an
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
//! * [`Backend`] and [`CallConv`]: what a target implements. Each target is
//!   one module of seven sections ([`x86_64`]: registers and classes,
//!   calling convention, encoders, instruction methods, branches and
//!   fixups, prologue/epilogue and `end`, extensions) holding only its
//!   encodings and its convention's tables ([`abi::ConvTables`]); what
//!   the targets share (argument layout, frame slots, register names,
//!   the order of a call, its argument placement and the entry's
//!   parameter moves, the per-function state with the frame's
//!   bookkeeping, the `Backend` methods every target writes alike, label
//!   errors, parallel moves, the return-type check, the generated
//!   function [`code::Code`] and how it runs) is in `common.rs`,
//!   `slots.rs`, `host.rs` and `code.rs`, and the rest of the
//!   crate, the reference backend included, names no target
//!   (`docs/vcode.md`, "The backend shape").
//! * [`aarch64`]: the second target, A64 code for AAPCS64
//!   ([`aarch64::A64`], `Func::<A64>::with_backend()`); on an x86-64
//!   host its code runs under emulation (feature `emu`: `vcode::emu`, the
//!   Unicorn emulator, and disassembly with yaxpeax-arm).
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

pub mod aarch64;
pub mod abi;
pub mod backend;
mod buf;
pub mod code;
mod common;
pub mod debug;
#[cfg(feature = "emu")]
pub mod emu;
mod error;
pub mod ext;
mod func;
pub mod host;
pub mod mem;
pub mod reference;
mod regs;
mod sig;
mod slots;
mod ty;
pub mod x86_64;

pub use abi::{ArgLoc, CallConv, Invoke, InvokeError};
pub use backend::{Arg, Backend, Callee, Target};
pub use error::{Error, ErrorKind, Result};
pub use func::{Func, Leaf, Params};
pub use regs::{Class, RegAlloc, RegClass, RegConfig};
pub use sig::Signature;
pub use ty::{
    AnyReg, D, Data, F, Float, I, Int, L, Label, Local, MAX_PARAMS, Operand, P, Reg, Ty, Type, U,
    UL, Value,
};
pub use x86_64::{Code, SysV, X64};

/// The reference backend, modelling the host's calling convention (the
/// System V x86-64 one, [`SysV`]) for the native functions it calls. The
/// backend itself ([`reference::Reference`]) is target-neutral and takes
/// the convention as a parameter; this is the one place that binds it.
pub type Reference = reference::Reference<SysV>;
