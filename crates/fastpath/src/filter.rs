//! `fastpath filter`: placeholder until dpf lands.

use clap::Subcommand;
use std::process::ExitCode;

/// The `filter` subcommands.
#[derive(Subcommand)]
pub enum FilterCmd {
    /// Parse a filter and print its decision structure.
    Check {
        /// The filter expression.
        expr: String,
    },
}

/// Runs a `filter` subcommand.
pub fn main(cmd: FilterCmd) -> ExitCode {
    match cmd {
        FilterCmd::Check { expr } => {
            eprintln!("fastpath filter check {expr:?}: not built yet");
            ExitCode::FAILURE
        }
    }
}
