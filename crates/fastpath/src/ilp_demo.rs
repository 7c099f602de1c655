//! `fastpath ilp`: placeholder until ilp lands.

use clap::Subcommand;
use std::process::ExitCode;

/// The `ilp` subcommands.
#[derive(Subcommand)]
pub enum IlpCmd {
    /// Run the pipelines and print their throughput.
    Demo,
}

/// Runs an `ilp` subcommand.
pub fn main(cmd: IlpCmd) -> ExitCode {
    match cmd {
        IlpCmd::Demo => {
            eprintln!("fastpath ilp demo: not built yet");
            ExitCode::FAILURE
        }
    }
}
