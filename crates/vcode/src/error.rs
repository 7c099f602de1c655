//! Typed errors. Every client mistake is reported with what went wrong
//! and where: the index of the vcode instruction (counting from 0 at
//! `lambda`) and the name of the method that was called.

use crate::ty::Ty;
use thiserror::Error;

/// A code generation error: what, at which instruction, in which method.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("vcode: {kind} (instruction {index}, in `{method}`)")]
pub struct Error {
    /// The index of the instruction, counting every instruction method
    /// called since `lambda` from 0.
    pub index: u32,
    /// The method the client called.
    pub method: &'static str,
    /// What went wrong.
    pub kind: ErrorKind,
}

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
