//! The `fastpath` command-line program.
//!
//! `fastpath bench <suite>` and the peers it measures against (cranelift,
//! dynasm-rs, iced-x86 and rbpf through `fastpath-bench`; dashmap and
//! crossbeam-epoch) sit behind the cargo feature `bench`, off by default, so
//! that the main command builds only what the data path uses. Without the
//! feature, `fastpath bench` says how to get it and exits non-zero.
//!
//! `serde_json` builds the `--json` output meant for scripts (`esp check`,
//! `filter check`, `compile`, `match`, and the other inspection and
//! benchmark commands that take `--json`).

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod applet;
#[cfg(feature = "bench")]
mod bench_codecache;
#[cfg(feature = "bench")]
mod bench_dpf;
#[cfg(feature = "bench")]
mod bench_esp;
#[cfg(feature = "bench")]
mod bench_idl;
#[cfg(feature = "bench")]
mod bench_ilp;
#[cfg(feature = "bench")]
mod bench_jive;
mod demo;
mod engine_cmd;
mod esp_cmd;
mod filter;
mod idl_cmd;
mod ilp_demo;
mod vcode_demo;

/// fastpath: fast paths for communication software.
#[derive(Parser)]
#[command(name = "fastpath", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The whole data path: endpoints, the engine, dpf demultiplexing and
    /// the U-Net/SLE paper's applets, with the paper's latency and
    /// bandwidth experiments and their peers measured in the same run.
    Demo(demo::DemoArgs),
    /// The unet engine as a daemon: applications in other processes
    /// connect to its Unix socket and receive their endpoints' shared
    /// memory; runs until SIGINT or SIGTERM.
    Engine(engine_cmd::EngineArgs),
    /// Dynamic code generation (vcode): the paper's examples.
    Vcode {
        #[command(subcommand)]
        cmd: VcodeCmd,
    },
    /// Verify, run and list JIVE applet class files.
    Applet {
        #[command(subcommand)]
        cmd: applet::AppletCmd,
    },
    /// Check, compile and run packet filters (dpf).
    Filter {
        #[command(subcommand)]
        cmd: filter::FilterCmd,
    },
    /// Run, model-check and inspect ESP programs: concurrent processes with
    /// compiled fast paths.
    Esp {
        #[command(subcommand)]
        cmd: esp_cmd::EspCmd,
    },
    /// Compile IDL files into stubs whose message layout is the argument
    /// layout, and show those layouts (idl).
    Idl {
        #[command(subcommand)]
        cmd: idl_cmd::IdlCmd,
    },
    /// Fused data-touching loops (ilp).
    Ilp {
        #[command(subcommand)]
        cmd: ilp_demo::IlpCmd,
    },
    /// Run a benchmark suite side by side with its peers
    /// (suites: codegen, jive, dpf, esp, idl, ilp, codecache, unet; needs the cargo feature
    /// `bench`).
    Bench {
        /// The suite to run.
        suite: String,
    },
}

#[derive(Subcommand)]
enum VcodeCmd {
    /// Generate the VCODE paper's examples, run them, print their
    /// disassembly and the cost of generating them.
    Demo {
        /// Parameter types of the run-time-signature example, 1 to 32 of
        /// them, each `%` and a letter: i (int), l (long), f (float), d
        /// (double), and c (char) and s (short), which are passed widened to
        /// int as C does. Parameters beyond the registers stay in their
        /// stack slots and the stub passes every argument straight from the
        /// message, so any 32 work on either target; a 33rd is an error
        /// (see docs/vcode.md).
        #[arg(long, default_value = "%i%d%l%f%i%i%i%i%d%l%f%i")]
        sig: String,
        /// The instruction set to generate for (aarch64 runs under
        /// emulation and needs the cargo feature `aarch64`).
        #[arg(long, value_enum, default_value = "x86-64")]
        target: vcode_demo::TargetArg,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Vcode {
            cmd: VcodeCmd::Demo { sig, target },
        } => vcode_demo::run(&sig, target),
        Command::Applet { cmd } => applet::main(cmd),
        Command::Filter { cmd } => filter::main(cmd),
        Command::Ilp { cmd } => ilp_demo::main(cmd),
        Command::Esp { cmd } => esp_cmd::main(cmd),
        Command::Idl { cmd } => idl_cmd::main(cmd),
        Command::Demo(args) => demo::run(&args),
        Command::Engine(args) => engine_cmd::run(&args),
        Command::Bench { suite } => bench(&suite),
    }
}

/// `fastpath bench <suite>`.
#[cfg(feature = "bench")]
fn bench(suite: &str) -> ExitCode {
    match suite {
        "jive" => bench_jive::run(),
        "dpf" => bench_dpf::run(),
        "esp" => bench_esp::run(),
        "idl" => bench_idl::run(),
        "ilp" => bench_ilp::run(),
        "codecache" => bench_codecache::run(),
        "unet" => {
            // The demo's experiments with ten times the rounds, on `loop`
            // between two threads and then on kernel UDP over loopback.
            let mut code = ExitCode::SUCCESS;
            for transport in [demo::TransportArg::Loop, demo::TransportArg::Udp] {
                let args = demo::DemoArgs {
                    transport,
                    rounds: 40_000,
                    messages: 200_000,
                    netns: false,
                };
                if demo::run(&args) != ExitCode::SUCCESS {
                    code = ExitCode::FAILURE;
                }
            }
            code
        }
        "codegen" => {
            println!("{}", fastpath_bench::codegen_report());
            ExitCode::SUCCESS
        }
        other => {
            eprintln!(
                "fastpath bench: unknown suite {other:?} (known: codegen, jive, dpf, esp, ilp, codecache, unet)"
            );
            ExitCode::FAILURE
        }
    }
}

/// `fastpath bench <suite>` in a build without the `bench` feature: the
/// suites and their peers are not compiled in, so say how to get them.
#[cfg(not(feature = "bench"))]
fn bench(suite: &str) -> ExitCode {
    eprintln!(
        "fastpath bench: this build has no benchmarks; they and their peers \
         (cranelift, dynasm-rs, rbpf, dashmap, ...) are behind the cargo feature `bench`.\n\
         Run: cargo run --release -p fastpath --features bench -- bench {suite}"
    );
    ExitCode::FAILURE
}
