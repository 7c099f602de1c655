//! `fastpath bench codecache`: placeholder until the suite lands.

use std::process::ExitCode;

/// Runs the suite.
pub fn run() -> ExitCode {
    eprintln!("fastpath bench codecache: not built yet");
    ExitCode::FAILURE
}
