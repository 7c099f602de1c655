//! The errors of every stage, each saying what was wrong and where.

use crate::ir::Pos;

/// Everything that can go wrong, from parsing to running.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum Error {
    /// The program text does not lex or parse.
    #[error("{pos}: syntax error: {msg}")]
    Syntax {
        /// Where.
        pos: Pos,
        /// What.
        msg: String,
    },
    /// The program parses but breaks a static rule (undeclared name, arity
    /// mismatch, two readers of an external out, an unreachable process...).
    #[error("{pos}: {msg}")]
    Check {
        /// Where.
        pos: Pos,
        /// What.
        msg: String,
    },
    /// A fast-path specification does not parse or does not fit the program.
    #[error("{pos}: fast-path specification: {msg}")]
    Spec {
        /// Where in the specification file.
        pos: Pos,
        /// What.
        msg: String,
    },
    /// Symbolic execution visited more control states than allowed.
    #[error("{what}: more than {limit} control states; the {what} is too large to extract")]
    StateLimit {
        /// The fast path's name, or `automaton`.
        what: String,
        /// The limit.
        limit: usize,
    },
    /// A backend does not handle this program (e.g. the automaton of a
    /// program with `alt`).
    #[error("{backend}: {msg}")]
    Unsupported {
        /// The backend.
        backend: &'static str,
        /// What it cannot do.
        msg: String,
    },
    /// The host did not bind what the program needs, or bound it wrongly.
    #[error("binding: {0}")]
    Binding(String),
    /// An `assert` failed while running.
    #[error("{pos}: assertion failed in process {process}")]
    AssertionFailed {
        /// The process.
        process: String,
        /// The `assert` statement.
        pos: Pos,
    },
    /// A `/` or `%` by zero while running.
    #[error("{pos}: division by zero in process {process}")]
    DivisionByZero {
        /// The process.
        process: String,
        /// The statement.
        pos: Pos,
    },
    /// A process took more backward jumps on loops through no channel
    /// operation than the runtime allows between two of its channel
    /// operations
    /// ([`Options::max_local_iterations`](crate::runtime::Options::max_local_iterations)):
    /// a loop that never yields, or a finite one longer than the bound. The
    /// process stays at `pos`, the loop's head; running again continues
    /// the loop with a fresh count.
    #[error(
        "{pos}: process {process} ran more than {limit} loop iterations without a channel operation: a loop that never yields, or a finite one longer than the bound (raise it with --max-local-iterations, or Options::max_local_iterations)"
    )]
    Diverges {
        /// The process.
        process: String,
        /// The head of the loop: the statement the last backward jump went to.
        pos: Pos,
        /// The bound.
        limit: u64,
    },
    /// [`Backend::Automata`](crate::runtime::Backend::Automata) was given a
    /// fast-path specification: the automaton is the whole program as one
    /// state machine, with no fast paths to enter.
    #[error(
        "a fast-path specification ({}) cannot be used with the automata backend: the automaton compiles the whole program into one state machine and has no fast paths; run the specification on the native or interp backend, or the automaton without it",
        fast_paths.join(", ")
    )]
    SpecWithAutomata {
        /// The specification's fast paths, by name.
        fast_paths: Vec<String>,
    },
    /// A host function or callback failed (panicked or returned an error).
    #[error("host function {name}: {msg}")]
    Host {
        /// The function or channel.
        name: String,
        /// What happened.
        msg: String,
    },
    /// vcode refused the generated code.
    #[error("code generation: {0}")]
    Codegen(String),
    /// A fast-path or automaton graph breaks its own invariants (a block,
    /// entry, counter or process id out of range): a bug in the stage that
    /// built or transformed it, reported instead of a panic.
    #[error("invalid graph {graph}: {msg}")]
    InvalidGraph {
        /// The graph's name.
        graph: String,
        /// What is wrong.
        msg: String,
    },
}

impl From<vcode::Error> for Error {
    fn from(e: vcode::Error) -> Self {
        Error::Codegen(e.to_string())
    }
}

/// The result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;
