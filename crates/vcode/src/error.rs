//! Typed errors. Every client mistake is reported with what went wrong
//! and where: the index of the vcode instruction (counting from 0 at
//! `lambda`) and the name of the method that was called.

use crate::ty::{I, Reg, Ty};
use std::fmt;
use std::num::NonZeroU32;
use thiserror::Error;

/// A code generation error: what, at which instruction, in which method.
///
/// Four bytes: a handle to details kept aside (in [`side`]), so that a
/// `Result<Reg<T>>`, or a client's `Result<(Reg<T>, bool)>`, is one
/// machine word and comes back in a register. A recursive client that
/// passes `getreg`'s result up with `?` at every level pays for the size
/// of the `Result` at every return, error or not: with the details
/// inline (80 bytes, `ErrorKind` carries `String`s) each went through
/// memory, and so would a boxed error (rustc returns a two-word `Result`
/// whose variants are a byte and a pointer through memory too). Errors
/// are rare, so the side table is touched only when one is made, read or
/// dropped ([`Error::new`] is `#[cold]`).
///
/// The details are read through [`index`](Error::index),
/// [`method`](Error::method), [`kind`](Error::kind) and
/// [`into_kind`](Error::into_kind). `Error` does not `Deref` to its
/// details: it is not a smart pointer, where the details live is a
/// representation choice, and accessors keep it private, where `Deref`
/// would make the details' type part of the API.
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
pub struct Error(NonZeroU32);

/// What an [`Error`] stands for.
#[derive(Clone, PartialEq, Eq)]
struct Details {
    index: u32,
    method: &'static str,
    kind: ErrorKind,
}

// `getreg`'s result in one register (see `Error`).
const _: () = assert!(std::mem::size_of::<Result<Reg<I>>>() <= std::mem::size_of::<usize>());
const _: () =
    assert!(std::mem::size_of::<Result<(Reg<I>, bool)>>() <= std::mem::size_of::<usize>());

/// The details of the live errors, each owned by one [`Error`].
mod side {
    use super::Details;
    use std::num::NonZeroU32;
    use std::sync::{Mutex, MutexGuard, PoisonError};

    /// Slot `k - 1` holds the details of the error whose handle is `k`.
    /// Each is boxed so that it stays in place when `slots` grows.
    struct Table {
        slots: Vec<Option<Box<Details>>>,
        free: Vec<u32>,
    }

    /// One table for all threads: an `Error` may be sent to another.
    static TABLE: Mutex<Table> = Mutex::new(Table {
        slots: Vec::new(),
        free: Vec::new(),
    });

    fn table() -> MutexGuard<'static, Table> {
        // Nothing panics while the lock is held, so the table is
        // consistent even if a panic elsewhere poisoned the mutex.
        TABLE.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `d` and returns its new handle.
    pub(super) fn insert(d: Details) -> NonZeroU32 {
        let d = Box::new(d);
        let mut t = table();
        let k = match t.free.pop() {
            Some(k) => {
                t.slots[k as usize] = Some(d);
                k
            }
            None => {
                t.slots.push(Some(d));
                u32::try_from(t.slots.len() - 1).expect("fewer than 2^32 live errors")
            }
        };
        NonZeroU32::new(k + 1).expect("k + 1 > 0")
    }

    /// The details behind handle `h`, for as long as `h`'s error is
    /// borrowed.
    pub(super) fn get(h: &NonZeroU32) -> &Details {
        let t = table();
        let d: *const Details = &**t.slots[h.get() as usize - 1]
            .as_ref()
            .expect("an error's details live until it is dropped");
        drop(t);
        // SAFETY: the slot belongs to the one `Error` holding `h` (handles
        // are made only by `insert`, for a slot it filled, and are never
        // copied); it is emptied only by `remove`, called by that error's
        // `drop` or `into_kind`, which take the error by value and so
        // cannot run while the `&NonZeroU32` borrowed from it is alive.
        // The details are boxed, so they do not move when `slots` grows,
        // and nothing writes them while they are in the table.
        unsafe { &*d }
    }

    /// Takes the details behind `h` out of the table; `h` is dead after.
    pub(super) fn remove(h: NonZeroU32) -> Box<Details> {
        let mut t = table();
        let k = h.get() - 1;
        let d = t.slots[k as usize].take();
        t.free.push(k);
        drop(t);
        d.expect("an error's details live until it is dropped")
    }
}

impl Error {
    /// An error of `kind` at instruction `index` (counting every
    /// instruction method called since `lambda` from 0) in the client's
    /// call of `method`.
    ///
    /// Cold and out of line: it is only on error paths, so callers keep
    /// their fast paths free of the table and the moves of `kind`.
    #[cold]
    #[inline(never)]
    pub fn new(index: u32, method: &'static str, kind: ErrorKind) -> Error {
        Error(side::insert(Details {
            index,
            method,
            kind,
        }))
    }

    fn details(&self) -> &Details {
        side::get(&self.0)
    }

    /// The index of the instruction, counting every instruction method
    /// called since `lambda` from 0.
    pub fn index(&self) -> u32 {
        self.details().index
    }

    /// The method the client called.
    pub fn method(&self) -> &'static str {
        self.details().method
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.details().kind
    }

    /// What went wrong, by value (for a client that wraps the kind in its
    /// own error type).
    pub fn into_kind(self) -> ErrorKind {
        let h = self.0;
        std::mem::forget(self);
        side::remove(h).kind
    }
}

impl Drop for Error {
    fn drop(&mut self) {
        side::remove(self.0);
    }
}

impl Clone for Error {
    fn clone(&self) -> Error {
        Error(side::insert(self.details().clone()))
    }
}

impl PartialEq for Error {
    fn eq(&self, other: &Error) -> bool {
        self.details() == other.details()
    }
}

impl Eq for Error {}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.details();
        write!(
            f,
            "vcode: {} (instruction {}, in `{}`)",
            d.kind, d.index, d.method
        )
    }
}

/// Written out so that it reads as the error's fields, not its handle.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.details();
        f.debug_struct("Error")
            .field("index", &d.index)
            .field("method", &d.method)
            .field("kind", &d.kind)
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
    #[error("bad parameter type string {sig:?} at byte {at}")]
    BadSignature {
        /// The string.
        sig: String,
        /// Byte offset of the problem.
        at: usize,
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
