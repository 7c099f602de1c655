//! Typed errors of every jive phase: reading the class file, the subset check,
//! verification, resource limits at load, native binding, and run-time traps.
//!
//! Every error says *what* went wrong and *where*: a byte offset into the class
//! file, or a method (`name(descriptor)`) and a bytecode index (bci). Nothing in
//! jive panics on input; every failure is one of these values.

use thiserror::Error;

/// A malformed class file (JVMS §4.1–§4.8): the structure cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("class format error at byte offset {offset}: {what}")]
pub struct ClassFormatError {
    /// Byte offset into the class file where the problem was found.
    pub offset: usize,
    /// What was wrong.
    pub what: String,
}

/// A well-formed class file that uses something outside the JIVE subset
/// (see `docs/jive.md`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("not in the JIVE subset: {}{}: {reason}", .method.as_deref().unwrap_or("class"), fmt_bci(*.bci))]
pub struct SubsetError {
    /// The method (`name(descriptor)`), or `None` for a class-level problem.
    pub method: Option<String>,
    /// The bytecode index, when the problem is an instruction.
    pub bci: Option<u32>,
    /// Why the class is rejected.
    pub reason: String,
}

/// A class that fails verification (JVMS §4.9 structural constraints and
/// §4.10.1 verification by type checking).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("verify error in {method}{}: {reason}", fmt_bci(*.bci))]
pub struct VerifyError {
    /// The method (`name(descriptor)`).
    pub method: String,
    /// The bytecode index of the offending instruction or frame, if any.
    pub bci: Option<u32>,
    /// Why verification failed.
    pub reason: String,
}

fn fmt_bci(bci: Option<u32>) -> String {
    match bci {
        Some(b) => format!(" at bci {b}"),
        None => String::new(),
    }
}

/// A class that exceeds a load-time resource limit (see [`crate::Limits`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("load limit exceeded{}: {what} is {actual}, the limit is {limit}", .method.as_ref().map(|m| format!(" in {m}")).unwrap_or_default())]
pub struct LimitError {
    /// The method concerned, if the limit is per method.
    pub method: Option<String>,
    /// Which limit (`"code size"`, `"method count"`, `"max_stack"`, ...).
    pub what: &'static str,
    /// The class file's value.
    pub actual: u64,
    /// The configured limit.
    pub limit: u64,
}

/// Any reason a class file cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LoadError {
    /// The bytes are not a readable class file.
    #[error(transparent)]
    ClassFormat(#[from] ClassFormatError),
    /// The class uses a feature outside the JIVE subset.
    #[error(transparent)]
    Subset(#[from] SubsetError),
    /// The class fails verification.
    #[error(transparent)]
    Verify(#[from] VerifyError),
    /// The class exceeds a load-time limit.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// A `static native` method has no binding in the host's [`crate::Natives`].
    #[error("unknown native method {name}{descriptor}: the host registered no binding for it")]
    UnknownNative {
        /// The method name.
        name: String,
        /// The method descriptor.
        descriptor: String,
    },
    /// `<clinit>` or the constructor trapped while instantiating the applet.
    #[error("instantiation failed: {0}")]
    Instantiate(#[from] Trap),
    /// [`crate::Engine::Jit`] was asked for and the JIT cannot compile the applet.
    #[error(transparent)]
    Jit(#[from] crate::jit::JitError),
}

/// What went wrong in a trapped invocation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TrapKind {
    /// An array index outside `0..length` (Java's `ArrayIndexOutOfBoundsException`).
    #[error("array index {index} out of bounds for length {length}")]
    ArrayIndexOutOfBounds {
        /// The index used.
        index: i32,
        /// The array's length.
        length: i32,
    },
    /// Use of a `null` reference (Java's `NullPointerException`).
    #[error("null pointer")]
    NullPointer,
    /// Integer division or remainder by zero (Java's `ArithmeticException`).
    #[error("division by zero")]
    DivisionByZero,
    /// `newarray` with a negative size (Java's `NegativeArraySizeException`).
    #[error("negative array size {0}")]
    NegativeArraySize(i32),
    /// The invocation used up its fuel (see [`crate::Limits::fuel`]).
    #[error("fuel exhausted (limit {0})")]
    FuelExhausted(u64),
    /// An allocation would exceed the applet's heap budget.
    #[error("heap limit exceeded: {requested} more bytes requested, {in_use} of {limit} in use")]
    HeapLimitExceeded {
        /// Bytes the failed allocation needed.
        requested: u64,
        /// Bytes in use before it.
        in_use: u64,
        /// The budget.
        limit: u64,
    },
    /// The call depth limit was reached (Java's `StackOverflowError`).
    #[error("call depth exceeded (limit {0})")]
    CallDepthExceeded(u32),
    /// A native method reported an error.
    #[error("native method failed: {0}")]
    Native(String),
}

/// A run-time error that ended an invocation. The applet stays loaded and
/// consistent and may be invoked again.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("trap in {method} at bci {bci}: {kind}")]
pub struct Trap {
    /// What happened.
    pub kind: TrapKind,
    /// The method executing when it happened (`name(descriptor)`).
    pub method: String,
    /// The bytecode index of the trapping instruction.
    pub bci: u32,
}

/// Why [`crate::Applet::invoke`] (or another host call) failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvokeError {
    /// No method of that name in the applet.
    #[error("no method named {0:?} in the applet")]
    NoSuchMethod(String),
    /// The method exists but takes a different number of arguments.
    #[error("{method} takes {expected} arguments, {given} given")]
    ArgumentCount {
        /// The method (`name(descriptor)`).
        method: String,
        /// Its parameter count.
        expected: usize,
        /// Arguments given.
        given: usize,
    },
    /// The method takes an array argument, which `invoke` cannot supply.
    #[error("{0} takes array arguments; invoke passes only ints")]
    NotIntArguments(String),
    /// The method is a native or a class/instance initializer.
    #[error("{0} cannot be invoked by the host")]
    NotInvocable(String),
    /// [`crate::Applet::call`] was given a method another applet resolved.
    #[error("the method was resolved on another applet")]
    ForeignMethod,
    /// No static field of that name, or not of the requested type.
    #[error("no static field {name:?} of type {expected}")]
    NoSuchField {
        /// The field name.
        name: String,
        /// The type the host asked for.
        expected: &'static str,
    },
    /// The invocation trapped.
    #[error(transparent)]
    Trap(#[from] Trap),
}
