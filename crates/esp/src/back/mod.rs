//! The back ends: the ways a checked program runs.
//!
//! * process-based (§4.1): [`interp`] interprets a process's IR and
//!   [`native`] compiles each process through vcode;
//! * fast paths: [`fpgen`] compiles the extraction's graphs through vcode;
//! * automata-based (§4.1): [`automata`] builds the whole program's product
//!   machine, which [`fpgen`] compiles too;
//! * [`runtime`] loads a program on one of them and schedules it, entering
//!   fast paths where their start statements are reached; [`abi`] is the
//!   memory interface between the runtime and generated code.

pub mod abi;
pub mod automata;
mod counted;
pub mod fpgen;
pub mod interp;
pub mod native;
pub mod runtime;
