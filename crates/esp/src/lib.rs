//! # esp: concurrent programs with compiled fast paths
//!
//! An implementation of ESP's fast paths (Wen Xu, Sanjeev Kumar, Kai Li,
//! *Fast Paths in Concurrent Programs*, PACT 2004): a small concurrent
//! language of processes that talk over unbuffered (rendezvous) channels,
//! compiled three ways:
//!
//! * **process-based** (§4.1): each process is a coroutine under a
//!   user-level scheduler ([`runtime`]), run by the reference interpreter
//!   ([`interp`]) or as native code generated through vcode ([`native`]).
//!   This is the complete implementation of the program.
//! * **fast paths** (§3-§4): a specification file ([`spec`]) names the
//!   common paths with path expressions; symbolic execution ([`explore`])
//!   turns them into straight-line code across process boundaries
//!   ([`fp`]), optimized ([`opt`]) and compiled through vcode ([`fpgen`]).
//!   The process-based code enters a fast path where its start statements
//!   are reached and takes over wherever the path aborts or exits, so a
//!   specification is only a hint: it never changes what a program does.
//! * **automata-based** (§4.1): the whole program's product state machine,
//!   for filter programs, from the same symbolic execution.
//!
//! Beyond the paper, [`mc`] explores a program's state space and reports
//! deadlocks and failed assertions with a shortest trace, as ESP's SPIN
//! translation did.
//!
//! ## Entry points
//!
//! * [`compile`]: source text to a checked [`ir::Program`].
//! * [`spec::parse`]: a specification file, resolved against a program.
//! * [`runtime::Machine`]: a program loaded on a backend, with its external
//!   channels and host functions bound; `run` it until it is idle.
//! * [`mc::check`]: the model checker.
//! * [`filters`]: the paper's four filter programs (Table 1) and their plain
//!   Rust reference chains.
//!
//! The language, the specification syntax, the extraction and the fairness
//! rules are described in `docs/esp.md`.
//!
//! ## Dependencies
//!
//! * `vcode`: the native code of processes, fast paths and automata.
//! * `thiserror`: the typed errors.
//! * `proptest` (tests only): the parser fuzzing.
//!
//! The parser, the symbolic execution and the code generation are written
//! here: they are what the paper is about.

pub mod abi;
pub mod ast;
pub mod error;
pub mod explore;
pub mod filters;
pub mod fp;
pub mod fpgen;
pub mod hostfn;

pub mod interp;
pub mod ir;
pub mod lex;
mod linear;
pub mod mc;
pub mod native;
pub mod opt;
pub mod parse;
pub mod path;
pub mod random;
pub mod runtime;
pub mod sema;
pub mod spec;

pub use error::{Error, Result};
pub use sema::compile;
