//! Typed errors. Every client mistake is reported with what went wrong
//! and where: the index of the vcode instruction (counting from 0 at
//! `lambda`) and the name of the method that was called.

use crate::ty::{I, Reg, Ty};
use std::fmt;
use thiserror::Error;

/// A code generation error: what, at which instruction, in which method.
///
/// One pointer wide: the details live in a box, so a `Result<Reg<T>>`
/// is two machine words instead of 72 bytes (`ErrorKind` carries
/// `String`s). A recursive client that passes `getreg`'s result up with
/// `?` at every level moves that `Result` at every return, error or not;
/// the box makes each move two words. (rustc still returns it through
/// memory: a byte in one variant and a pointer in the other do not form
/// a register pair. A four-byte handle to details in a side table does
/// come back in a register, but measured no fewer instructions on the
/// recursive client of `fastpath-bench` and needs a global lock; see
/// `docs/benchmarks.md`, vcode section 6.) Errors are rare, so the
/// allocation is paid only when one is made ([`Error::new`] is
/// `#[cold]`).
///
/// The details are read through [`index`](Error::index),
/// [`method`](Error::method), [`kind`](Error::kind) and
/// [`into_kind`](Error::into_kind). `Error` does not `Deref` to its
/// details: it is not a smart pointer, the box is a representation
/// choice a later version may change (a pointer into a per-function
/// record, a tagged word for the common kinds), and accessors keep that
/// change private, where `Deref` would make the boxed type part of the
/// API and let its methods and fields leak into `Error`'s.
///
/// ```
/// use vcode::{Error, ErrorKind};
/// let e = Error::new(17, "blt", ErrorKind::UnplacedLabel { label: 3 });
/// assert_eq!(e.index(), 17);
/// assert_eq!(e.method(), "blt");
/// assert!(matches!(e.kind(), ErrorKind::UnplacedLabel { label: 3 }));
/// assert_eq!(
///     e.to_string(),
///     "vcode: label L3 is used but never placed (instruction 17, in `blt`)"
/// );
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Error(Box<Details>);

/// What [`Error`] keeps behind its pointer.
#[derive(Clone, PartialEq, Eq)]
struct Details {
    index: u32,
    method: &'static str,
    kind: ErrorKind,
}

// `getreg`'s result in two words (see `Error`): details added inline
// would make every `Result` in a client that large again.
const _: () = assert!(std::mem::size_of::<Error>() == std::mem::size_of::<usize>());
const _: () = assert!(std::mem::size_of::<Result<Reg<I>>>() <= 2 * std::mem::size_of::<usize>());

impl Error {
    /// An error of `kind` at instruction `index` (counting every
    /// instruction method called since `lambda` from 0) in the client's
    /// call of `method`.
    ///
    /// Cold and out of line: it is only on error paths, so callers keep
    /// their fast paths free of the allocation and the moves of `kind`.
    #[cold]
    #[inline(never)]
    pub fn new(index: u32, method: &'static str, kind: ErrorKind) -> Error {
        Error(Box::new(Details {
            index,
            method,
            kind,
        }))
    }

    /// The index of the instruction, counting every instruction method
    /// called since `lambda` from 0.
    pub fn index(&self) -> u32 {
        self.0.index
    }

    /// The method the client called.
    pub fn method(&self) -> &'static str {
        self.0.method
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// What went wrong, by value (for a client that wraps the kind in its
    /// own error type).
    pub fn into_kind(self) -> ErrorKind {
        self.0.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "vcode: {} (instruction {}, in `{}`)",
            self.0.kind, self.0.index, self.0.method
        )
    }
}

/// Written out so that it reads as the error's fields, without the box.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("index", &self.0.index)
            .field("method", &self.0.method)
            .field("kind", &self.0.kind)
            .finish()
    }
}

/// The kind is part of the message, not a cause: `source` is `None`.
impl std::error::Error for Error {}

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ErrorKind {
    /// A branch or jump names a label that was never placed.
    #[error("label L{label} is used but never placed")]
    UnplacedLabel {
        /// The label's number.
        label: u32,
    },
    /// A label was placed twice.
    #[error("label L{label} is placed twice")]
    LabelPlacedTwice {
        /// The label's number.
        label: u32,
    },
    /// A label that this function did not make.
    #[error("label L{label} does not belong to this function")]
    UnknownLabel {
        /// The label's number.
        label: u32,
    },
    /// Constant data that this function did not place.
    #[error("data D{data} does not belong to this function")]
    UnknownData {
        /// The data's number.
        data: u32,
    },
    /// `getreg` found no free register of the class.
    #[error("no free {class} {what} register")]
    RegistersExhausted {
        /// `temporary` or `persistent`.
        class: &'static str,
        /// `integer` or `float`.
        what: &'static str,
    },
    /// A register was released or reserved twice, or is not allocatable.
    #[error("register {reg} is {why}")]
    BadRegister {
        /// The register's name.
        reg: String,
        /// Why it cannot be used here.
        why: &'static str,
    },
    /// A call has more arguments than the backend supports.
    #[error("call has {count} arguments; at most {max} are supported")]
    TooManyArguments {
        /// Arguments given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A call to a generated function passes another number of arguments
    /// than its signature has.
    #[error("call passes {found} arguments to a function of {expected} parameters")]
    ArgumentCount {
        /// Parameters of the callee.
        expected: usize,
        /// Arguments passed.
        found: usize,
    },
    /// The code buffer would grow past its limit.
    #[error("generated code exceeds the limit of {limit} bytes")]
    CodeTooLarge {
        /// The configured limit in bytes.
        limit: usize,
    },
    /// A parameter type string could not be parsed.
    #[error(
        "bad parameter type string {sig:?} at byte {at}: each parameter is `%` and a type \
         letter: c, uc, s, us, i, u, l, ul, p, f or d"
    )]
    BadSignature {
        /// The string.
        sig: String,
        /// Byte offset of the problem.
        at: usize,
    },
    /// A parameter type string has more parameters than a function takes.
    #[error(
        "parameter type string {sig:?} has {count} parameters, more than the {max} a function takes"
    )]
    TooManyParams {
        /// The string.
        sig: String,
        /// Its parameters (counted up to the first one past `max`).
        count: usize,
        /// The most a function takes ([`crate::ty::MAX_PARAMS`]).
        max: usize,
    },
    /// `lambda` found no register for a parameter that arrives in a
    /// register the backend keeps for itself (a parameter arriving on the
    /// stack with no register free stays in its stack slot instead). Such
    /// parameters (x86-64's fourth integer, in `rcx`; aarch64's fourth and
    /// eighth, in `x3` and `x7`) get their registers before any stack
    /// parameter, so only a [`RegConfig`](crate::RegConfig) with almost no
    /// temporaries meets it.
    #[error(
        "parameter {index} ({ty}) arrives in a register the backend keeps for itself, and no \
         {what} register is free to move it to"
    )]
    NoRegisterForParam {
        /// The parameter's index, from 0.
        index: usize,
        /// Its type.
        ty: Ty,
        /// `integer` or `float`.
        what: &'static str,
    },
    /// A value of one type was used where another was required.
    #[error("type mismatch: expected {expected}, found {found}")]
    TypeMismatch {
        /// The type required.
        expected: Ty,
        /// The type given.
        found: Ty,
    },
    /// A function pointer type does not match the generated function.
    #[error("signature mismatch: the function is `{expected}`, the pointer type is `{found}`")]
    SignatureMismatch {
        /// The generated function's signature.
        expected: String,
        /// The signature asked for.
        found: String,
    },
    /// An instruction is not defined for a type.
    #[error("`{insn}` is not defined for type {ty}")]
    UnsupportedType {
        /// The instruction.
        insn: &'static str,
        /// The type.
        ty: Ty,
    },
    /// Division by an immediate zero.
    #[error("division by an immediate zero")]
    DivisionByZero,
    /// A local that this function did not allocate.
    #[error("local #{id} does not belong to this function")]
    UnknownLocal {
        /// The local's number.
        id: u32,
    },
    /// A call in a function declared a leaf.
    #[error("call in a function declared as a leaf")]
    CallInLeaf,
    /// Executable memory could not be obtained or protected.
    #[error("executable memory: {0}")]
    Memory(String),
    /// A parameter index past the signature.
    #[error("parameter {index} does not exist (the signature has {count})")]
    NoSuchParam {
        /// The index asked for.
        index: usize,
        /// The number of parameters.
        count: usize,
    },
    /// [`Params::get`](crate::Params::get) of a parameter that has no
    /// register: it stays in its incoming stack slot.
    #[error(
        "parameter {index} has no register: it stays in its incoming stack slot, read it \
         through Params::local"
    )]
    ParamInMemory {
        /// The parameter's index, from 0.
        index: usize,
    },
    /// [`Params::local`](crate::Params::local) of a parameter that lives
    /// in a register.
    #[error("parameter {index} lives in a register, not in memory: take it with Params::get")]
    ParamInRegister {
        /// The parameter's index, from 0.
        index: usize,
    },
    /// A call through a target kind this backend cannot execute.
    #[error("{0}")]
    Unsupported(&'static str),
}

/// The result type of vcode's fallible methods.
pub type Result<T> = std::result::Result<T, Error>;

/// Deepest nesting of calls between reference functions.
pub const MAX_DEPTH: u32 = 512;

/// Why the reference backend stopped a program.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("reference backend: {kind} (instruction {index}, `{method}`)")]
pub struct Fault {
    /// Instruction index.
    pub index: u32,
    /// The method that generated it.
    pub method: &'static str,
    /// What happened.
    pub kind: FaultKind,
}

/// What stopped the program.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum FaultKind {
    /// Integer division or `mod` by zero (natively: `SIGFPE`).
    #[error("integer division by zero")]
    DivisionByZero,
    /// `INT_MIN / -1` or `LONG_MIN / -1` (natively: `SIGFPE`).
    #[error("signed division overflow")]
    DivisionOverflow,
    /// A register read before anything was written to it.
    #[error("register {reg} read before it was written")]
    ReadBeforeWrite {
        /// The register.
        reg: String,
    },
    /// More instructions executed than the step limit.
    #[error("step limit of {0} instructions exceeded")]
    StepLimit(u64),
    /// Calls nested deeper than [`MAX_DEPTH`].
    #[error("calls nested deeper than {MAX_DEPTH}")]
    CallDepth,
    /// A jump-table index past the end of its table.
    #[error("jump_table index {index} is past the end of its {len} targets")]
    JumpTableIndex {
        /// The index.
        index: u64,
        /// The table's length.
        len: usize,
    },
    /// Something only native code can do.
    #[error("{0}")]
    Unsupported(&'static str),
    /// Execution ran past the last instruction without a return.
    #[error("fell off the end of the function")]
    FellOffEnd,
}
