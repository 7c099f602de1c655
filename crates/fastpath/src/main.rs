//! The `fastpath` command-line program.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// fastpath: fast paths for communication software.
#[derive(Parser)]
#[command(name = "fastpath", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    // Subcommands are added here, one per crate: `vcode`, `applet`, `bench`, ...
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {}
}
