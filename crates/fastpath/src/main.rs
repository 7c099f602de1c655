//! The `fastpath` command-line program.
//!
//! `fastpath bench <suite>` and the peers it measures against (cranelift,
//! dynasm-rs, iced-x86 and rbpf through `fastpath-bench`; dashmap and
//! crossbeam-epoch) sit behind the cargo feature `bench`, off by default, so
//! that the main command builds only what the data path uses. Without the
//! feature, `fastpath bench` says how to get it and exits non-zero (a suite
//! that does not exist is refused by name in both builds). `--json` on a
//! suite writes its report with `serde_json` (every suite has it; each
//! suite's tables and JSON render one report, see `bench_report`).
//! `--quick` runs a short smoke version, refused by the suites that have
//! none.
//!
//! `serde_json` builds the `--json` output meant for scripts (`esp check`,
//! `filter check`, `compile`, `match`, `ilp demo`, `idl check`, `applet`).
//!
//! With `--json`, standard output holds one JSON object whether the command
//! succeeds or fails, so that a script always has something to parse:
//!
//! - on success, the command's report;
//! - when the command fails before it has a report, the error object
//!   [`print_json_error`] prints, `{"error": {"command": "bench ilp",
//!   "message": "..."}}`: `command` the words after `fastpath` that name
//!   the subcommand (`demo`, `bench <suite>`, `filter check`, `filter
//!   compile`, `filter match`, `applet examples`, `applet verify`, `ilp
//!   demo`, `idl check`, `esp check`), `message` the text standard error gets after
//!   `fastpath ...: `;
//! - when the report itself records the failure, the report and no second
//!   object: `applet verify` on a rejected class (`"verified": false` and
//!   the reason), `filter match` on a capture that stops early
//!   (`"complete": false` and where it stopped), a benchmark suite with
//!   cells that could not be measured (`null` and the reason).
//!
//! The human message still goes to standard error, and the exit status is
//! the same non-zero one as without `--json`. Errors in the arguments
//! themselves that clap reports before the command runs (an unknown
//! subcommand or flag, a missing or malformed argument such as `--rounds
//! 0`) print clap's usage message on standard error and nothing on
//! standard output, with clap's exit status 2.

use clap::{Parser, Subcommand, ValueEnum};
use std::io::Write as _;
use std::process::ExitCode;

mod applet;
#[cfg(feature = "bench")]
mod bench_codecache;
#[cfg(feature = "bench")]
mod bench_codegen;
#[cfg(feature = "bench")]
mod bench_dpf;
#[cfg(feature = "bench")]
mod bench_esp;
#[cfg(feature = "bench")]
mod bench_figures;
#[cfg(feature = "bench")]
mod bench_idl;
#[cfg(feature = "bench")]
mod bench_ilp;
#[cfg(feature = "bench")]
mod bench_jive;
#[cfg(feature = "bench")]
mod bench_report;
mod demo;
mod engine_cmd;
mod esp_cmd;
mod figures;
mod filter;
mod idl_cmd;
mod ilp_demo;
mod preemption;
mod signals;
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
    /// Run a benchmark suite side by side with its peers (needs the cargo
    /// feature `bench`).
    Bench(BenchArgs),
}

/// `fastpath bench`'s arguments.
#[derive(clap::Args)]
struct BenchArgs {
    /// The suite to run.
    #[arg(value_enum)]
    suite: Suite,
    /// Print the results as one JSON object on standard output instead of
    /// tables: every row, each figure with its unit in its key, as
    /// {"value", "spread"} or {"value": null, "reason"} where the table
    /// prints n/a, ratios, verdicts, sample counts. Progress goes to
    /// standard error. Every suite; unet holds the demo's two reports, one
    /// per transport.
    #[arg(long)]
    json: bool,
    /// A short run of fewer rounds (a smoke test in seconds, not figures to
    /// quote). Suites: codegen, jive, dpf, esp, idl, ilp, codecache.
    #[arg(long)]
    quick: bool,
    /// One cell of a suite, alternated ten times in one run (as text, or
    /// one JSON object with --json). Suites: unet (`burst`: burst-25 at 4
    /// KiB on `loop`, plain U-Net and the standard applet, copied and lent
    /// `doRx`, and their ratios).
    #[arg(long, value_enum)]
    only: Option<Only>,
}

/// The cells `--only` can pick.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Only {
    /// burst-25 at 4 KiB on `loop`: plain U-Net against the standard applet
    /// (copied and lent `doRx`).
    Burst,
}

/// The benchmark suites.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Suite {
    /// vcode's code generation against cranelift, dynasm-rs and iced-x86.
    Codegen,
    /// The U-Net/SLE paper's applet benchmarks: jive against HotSpot.
    Jive,
    /// dpf's merged classifier against libpcap's BPF and rbpf.
    Dpf,
    /// The ESP paper's filter programs against threads and Go.
    Esp,
    /// IDL stubs against prost, capnp and flatbuffers.
    Idl,
    /// Fused data-touching loops (the VCODE paper's Table 4).
    /// `ILP_LLC_MULTIPLE=n` sizes the out-of-cache set; `ILP_VECTORS=ymm`
    /// or `xmm` caps the generated loops' vector registers.
    Ilp,
    /// The thread-shared code cache against private caches and maps.
    Codecache,
    /// The demo's latency and bandwidth experiments with ten times the rounds.
    Unet,
}

impl Suite {
    /// The suites that accept `--quick`.
    const QUICK: &[Suite] = &[
        Suite::Codegen,
        Suite::Jive,
        Suite::Dpf,
        Suite::Esp,
        Suite::Idl,
        Suite::Ilp,
        Suite::Codecache,
    ];

    fn name(self) -> &'static str {
        match self {
            Suite::Codegen => "codegen",
            Suite::Jive => "jive",
            Suite::Dpf => "dpf",
            Suite::Esp => "esp",
            Suite::Idl => "idl",
            Suite::Ilp => "ilp",
            Suite::Codecache => "codecache",
            Suite::Unet => "unet",
        }
    }
}

/// The names of `suites`, comma-separated.
fn names(suites: &[Suite]) -> String {
    suites
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses a flag that `args.suite` does not support (rather than ignoring
/// it), naming the suites that do.
fn check_bench_flags(args: &BenchArgs) -> Result<(), String> {
    let s = args.suite;
    if args.quick && !Suite::QUICK.contains(&s) {
        return Err(format!(
            "--quick is not supported by the {} suite (it runs `fastpath demo`, whose \
             shortest honest run is its own default: `fastpath demo --json`); \
             suites with --quick: {}",
            s.name(),
            names(Suite::QUICK)
        ));
    }
    if args.only.is_some() && (s != Suite::Unet || args.quick) {
        return Err("--only burst is a cell of the unet suite, without --quick".into());
    }
    Ok(())
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
        Command::Bench(args) => match check_bench_flags(&args) {
            Ok(()) => bench(&args),
            Err(e) => {
                eprintln!("fastpath bench: {e}");
                if args.json {
                    print_json_error(&format!("bench {}", args.suite.name()), &e);
                }
                ExitCode::FAILURE
            }
        },
    }
}

/// `--json`'s error object (see the module doc): `{"error": {"command",
/// "message"}}`.
fn json_error(command: &str, message: &str) -> serde_json::Value {
    serde_json::json!({ "error": { "command": command, "message": message } })
}

/// Prints `--json`'s error object for a failed `command` on standard
/// output, where a script expects the command's report; the caller still
/// prints the message on standard error and exits non-zero.
pub(crate) fn print_json_error(command: &str, message: &str) {
    let _ = writeln!(
        std::io::stdout().lock(),
        "{:#}",
        json_error(command, message)
    );
}

/// `fastpath bench <suite>`.
#[cfg(feature = "bench")]
fn bench(args: &BenchArgs) -> ExitCode {
    match args.suite {
        Suite::Jive => bench_jive::run(bench_jive::Options {
            json: args.json,
            quick: args.quick,
        }),
        Suite::Dpf => bench_dpf::run(args.json, args.quick),
        Suite::Esp => bench_esp::run(args.json, args.quick),
        Suite::Idl => bench_idl::run(args.json, args.quick),
        Suite::Ilp => bench_ilp::run(args.json, args.quick),
        Suite::Codecache => bench_codecache::run(args.json, args.quick),
        Suite::Unet if args.only == Some(Only::Burst) => demo::bench_unet_burst(args.json),
        Suite::Unet => demo::bench_unet(args.json),
        Suite::Codegen => bench_codegen::run(args.json, args.quick),
    }
}

/// `fastpath bench <suite>` in a build without the `bench` feature: the
/// suites and their peers are not compiled in, so say how to get them.
#[cfg(not(feature = "bench"))]
fn bench(args: &BenchArgs) -> ExitCode {
    let flags = match (args.json, args.quick) {
        (true, true) => " --json --quick",
        (true, false) => " --json",
        (false, true) => " --quick",
        (false, false) => "",
    };
    let message = format!(
        "this build has no benchmarks; they and their peers \
         (cranelift, dynasm-rs, rbpf, dashmap, ...) are behind the cargo feature `bench`.\n\
         Run: cargo run --release -p fastpath --features bench -- bench {}{flags}",
        args.suite.name()
    );
    eprintln!("fastpath bench: {message}");
    if args.json {
        print_json_error(&format!("bench {}", args.suite.name()), &message);
    }
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one shape every command's `--json` error has.
    #[test]
    fn the_json_error_object_names_the_command_and_the_message() {
        let v = json_error(
            "filter check",
            "column 5: expected a value\n  tcp x\n      ^",
        );
        assert_eq!(v["error"]["command"], "filter check");
        assert_eq!(
            v["error"]["message"],
            "column 5: expected a value\n  tcp x\n      ^"
        );
        assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{v}");
        assert_eq!(v["error"].as_object().map(|o| o.len()), Some(2), "{v}");
        let printed = format!("{v:#}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&printed).ok(),
            Some(v)
        );
    }
}
