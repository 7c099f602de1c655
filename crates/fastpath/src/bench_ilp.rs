//! `fastpath bench ilp`: placeholder until the suite lands.

use std::process::ExitCode;

/// Runs the suite.
pub fn run() -> ExitCode {
    eprintln!("fastpath bench ilp: not built yet");
    ExitCode::FAILURE
}
