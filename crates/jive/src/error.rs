//! Typed errors of every jive phase: reading the class file, the subset check,
//! verification, resource limits at load, native binding, JIT compilation, and
//! run-time traps.
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
    /// A lent parameter the host declared ([`crate::LentParam`]) is not a
    /// `byte[]` parameter of its descriptor.
    #[error("lent parameter {param} of {method}{descriptor} is refused: {reason}")]
    LentParam {
        /// The declared method name.
        method: String,
        /// The declared descriptor.
        descriptor: String,
        /// The declared parameter.
        param: u16,
        /// Why it is refused.
        reason: String,
    },
    /// `<clinit>` or the constructor trapped while instantiating the applet.
    #[error("instantiation failed: {0}")]
    Instantiate(#[from] Trap),
    /// [`crate::Engine::Jit`] was asked for and the JIT cannot compile the applet.
    #[error(transparent)]
    Jit(#[from] JitError),
}

/// Why the JIT could not compile an applet ([`crate::jit`]). Each variant
/// names the class and what refused it; a failure of vcode or of the code
/// cache keeps their typed error as its source.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum JitError {
    /// vcode has no native backend for this CPU.
    #[error("the JIT cannot run {class} on {arch}: vcode has no native backend for it")]
    NoBackend {
        /// The class.
        class: String,
        /// The CPU architecture (`std::env::consts::ARCH`).
        arch: &'static str,
    },
    /// A method's frame (locals and operand stack) exceeds the JIT's frame stack.
    #[error(
        "the JIT cannot run {method}: its frame takes {slots} slots, above the JIT's frame stack of {limit}"
    )]
    FrameTooLarge {
        /// The method (`name(descriptor)`).
        method: String,
        /// Its `max_locals + max_stack`.
        slots: usize,
        /// The frame stack's size in slots.
        limit: usize,
    },
    /// The applet's call-depth limit is above the deepest chain the JIT runs
    /// ([`crate::jit::MAX_CALL_DEPTH`]).
    #[error(
        "the JIT cannot run {class}: its max_call_depth {requested} is above the JIT's {limit}"
    )]
    CallDepth {
        /// The class.
        class: String,
        /// The applet's [`crate::Limits::max_call_depth`].
        requested: u32,
        /// The JIT's limit.
        limit: u32,
    },
    /// The target leaves fewer temporary registers than the compiler needs
    /// for its scratch registers and one slot home.
    #[error(
        "the JIT cannot compile {class}: the target has {available} temporary registers, the compiler needs {needed}"
    )]
    TooFewRegisters {
        /// The class.
        class: String,
        /// Temporary registers vcode gave.
        available: usize,
        /// Registers needed.
        needed: usize,
    },
    /// vcode refused the generated code (its error names the vcode
    /// instruction and method).
    #[error("generating code for {class}: {source}")]
    Codegen {
        /// The class.
        class: String,
        /// vcode's error.
        source: vcode::Error,
    },
    /// The code cache refused the code.
    #[error("publishing the code of {class} in the code cache (key {key:#018x}): {source}")]
    Cache {
        /// The class.
        class: String,
        /// The code's key (a hash of everything it depends on).
        key: u64,
        /// The code cache's error.
        source: codecache::Error,
    },
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
    /// The call depth limit was reached, or a call's frame would not fit
    /// in the frame stack (Java's `StackOverflowError`; see
    /// [`crate::Limits::max_call_depth`]).
    #[error(
        "stack overflow: a call past the call depth limit ({0}) or the frame stack's {slots} slots",
        slots = crate::interpreter::STACK_SLOTS
    )]
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
    /// [`crate::Applet::prepare_lending`]: the parameter is not a `byte[]`
    /// of the method, or the host did not declare it lent at load.
    #[error("parameter {param} of {method} is not a byte[] declared lent")]
    NotLent {
        /// The method (`name(descriptor)`).
        method: String,
        /// The parameter (counted from 0 among the declared ones).
        param: u16,
    },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each reason the JIT refuses an applet says what refused it and for
    /// which class or method, and keeps vcode's or the code cache's error
    /// typed, as its source, with that error's own where (instruction and
    /// vcode method; key).
    #[test]
    fn jit_errors_name_what_and_where_and_keep_their_typed_source() {
        use std::error::Error as _;
        let vcode_error =
            vcode::Error::new(17, "blt", vcode::ErrorKind::UnplacedLabel { label: 3 });
        let cases: Vec<(JitError, &str)> = vec![
            (
                JitError::NoBackend {
                    class: "RawUnet".into(),
                    arch: "riscv64",
                },
                "the JIT cannot run RawUnet on riscv64: vcode has no native backend for it",
            ),
            (
                JitError::FrameTooLarge {
                    method: "doRx(II)V".into(),
                    slots: 20_000,
                    limit: 16_384,
                },
                "the JIT cannot run doRx(II)V: its frame takes 20000 slots, above the JIT's frame stack of 16384",
            ),
            (
                JitError::CallDepth {
                    class: "Bench".into(),
                    requested: 20_000,
                    limit: 16_384,
                },
                "the JIT cannot run Bench: its max_call_depth 20000 is above the JIT's 16384",
            ),
            (
                JitError::TooFewRegisters {
                    class: "Bench".into(),
                    available: 3,
                    needed: 5,
                },
                "the JIT cannot compile Bench: the target has 3 temporary registers, the compiler needs 5",
            ),
            (
                JitError::Codegen {
                    class: "Bench".into(),
                    source: vcode_error.clone(),
                },
                "generating code for Bench: vcode: label L3 is used but never placed (instruction 17, in `blt`)",
            ),
            (
                JitError::Cache {
                    class: "Bench".into(),
                    key: 0xabc,
                    source: codecache::Error::Generate(vcode_error.clone()),
                },
                "publishing the code of Bench in the code cache (key 0x0000000000000abc): generating code: vcode: label L3 is used but never placed (instruction 17, in `blt`)",
            ),
        ];
        for (e, text) in &cases {
            assert_eq!(e.to_string(), *text);
            // Clone and Eq, as LoadError needs.
            assert_eq!(e.clone(), *e);
        }
        let codegen = &cases[4].0;
        let source = codegen.source().expect("Codegen has a source");
        assert_eq!(source.downcast_ref::<vcode::Error>(), Some(&vcode_error));
        let cache = &cases[5].0;
        let source = cache.source().expect("Cache has a source");
        assert!(matches!(
            source.downcast_ref::<codecache::Error>(),
            Some(codecache::Error::Generate(e)) if *e == vcode_error
        ));
        assert!(cases[0].0.source().is_none());
    }

    /// An applet whose call-depth limit is above the JIT's: the load on
    /// `Engine::Jit` fails with the typed reason, naming the class.
    #[test]
    fn a_call_depth_above_the_jits_is_a_typed_load_error() {
        let Some(dir) = crate::APPLET_CLASSES else {
            return;
        };
        let p = std::path::Path::new(dir).join("release8/Bench.class");
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let limits = crate::Limits {
            max_call_depth: crate::jit::MAX_CALL_DEPTH + 1,
            ..crate::Limits::default()
        };
        let r = crate::Applet::load_with_engine(
            &bytes,
            &crate::Natives::new(),
            limits,
            crate::Engine::Jit,
        );
        match r {
            Err(LoadError::Jit(JitError::CallDepth {
                class,
                requested,
                limit,
            })) => {
                assert_eq!(class, "Bench");
                assert_eq!(requested, crate::jit::MAX_CALL_DEPTH + 1);
                assert_eq!(limit, crate::jit::MAX_CALL_DEPTH);
            }
            Err(e) => panic!("expected the JIT's call-depth error, got: {e}"),
            Ok(_) => panic!("expected the JIT's call-depth error, the applet loaded"),
        }
    }
}
