//! `fastpath bench dpf`: placeholder until the suite lands.

use std::process::ExitCode;

/// Runs the suite.
pub fn run() -> ExitCode {
    eprintln!("fastpath bench dpf: not built yet");
    ExitCode::FAILURE
}
