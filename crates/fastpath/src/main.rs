//! The `fastpath` command-line program.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod applet;
mod bench_jive;

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
    /// Verify, run and list JIVE applet class files.
    Applet {
        #[command(subcommand)]
        cmd: applet::AppletCmd,
    },
    /// Run a benchmark suite side by side with its peers (suites: jive).
    Bench {
        /// The suite to run.
        suite: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Applet { cmd } => applet::main(cmd),
        Command::Bench { suite } => match suite.as_str() {
            "jive" => bench_jive::run(),
            other => {
                eprintln!("fastpath bench: unknown suite {other:?} (known: jive)");
                ExitCode::FAILURE
            }
        },
    }
}
