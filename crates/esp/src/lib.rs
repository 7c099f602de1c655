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
//! ## Source layout
//!
//! The modules are grouped in three directories by stage; each module is
//! public at the crate root (`esp::spec`, `esp::runtime`, ...), and the
//! dependencies run one way, front end → extraction → back ends:
//!
//! * `front/`, the front end: [`lex`], [`parse`] and [`ast`], [`sema`]
//!   (names, static checks, lowering to [`ir`]), [`spec`] (specification
//!   files, with the [`spec::Schedule`] they choose) and [`hostfn`] (host
//!   functions written as ESP expressions).
//! * `extract/`, the fast-path extraction: [`path`] (path expressions to
//!   automata), [`explore`] (symbolic execution), [`fp`] (the extracted
//!   graphs and their reference interpreter) and [`opt`].
//! * `back/`, the back ends: [`interp`] and [`native`] (process-based),
//!   [`fpgen`] (graphs to native code), [`automata`] (the whole program's
//!   product machine), [`abi`] (the context generated code receives) and
//!   [`runtime`] (the scheduler: its host trampolines, its static tables and
//!   the machine, one file each).
//!
//! [`ir`], [`error`], [`mc`], [`random`] and [`filters`] are shared by all
//! stages and stay at the top.
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

mod back;
mod extract;
mod front;

pub mod error;
pub mod filters;
pub mod ir;
pub mod mc;
pub mod random;

pub use back::{abi, automata, fpgen, interp, native, runtime};
pub use extract::{explore, fp, opt, path};
pub use front::{ast, hostfn, lex, parse, sema, spec};

pub use error::{Error, Result};
pub use sema::compile;
