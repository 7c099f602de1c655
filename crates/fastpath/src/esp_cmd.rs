//! `fastpath esp`: run, model-check and inspect ESP programs (the *Fast
//! Paths in Concurrent Programs* paper's language; see docs/esp.md).
//!
//! - `run FILE [--fastpath SPEC] [--backend interp|native|automata]` runs a
//!   program until it is idle. External channels bind to the command line:
//!   `--in CHAN=PATH` feeds a file of tuples (one message a line, fields
//!   separated by spaces or commas, `#` comments; `-` is stdin), and a
//!   program with a single external in channel reads stdin by default; every
//!   external out message is printed as `CHAN v1 v2 ...` (or written to
//!   `--out CHAN=PATH`). Host functions are defined as ESP expressions:
//!   `--extern 'translate(a)=a + 0x100000'`.
//! - `check FILE` explores the program's states and reports deadlocks and
//!   failed assertions with a shortest trace.
//! - `dump FILE --fastpath SPEC` (or `--automaton`) prints each extracted
//!   fast path as pseudo-code and as machine code.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use esp::runtime::{Backend, Machine, Options, Status};

/// `println!` that ends quietly when stdout is closed (e.g. piped into `head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// The `esp` subcommands.
#[derive(Subcommand)]
pub enum EspCmd {
    /// Run a program until no process can go on.
    Run {
        /// The ESP source file.
        file: PathBuf,
        /// A fast-path specification file.
        #[arg(long = "fastpath", value_name = "SPEC")]
        spec: Option<PathBuf>,
        /// How to run the processes.
        #[arg(long, value_enum, default_value_t = BackendArg::Native)]
        backend: BackendArg,
        /// Feed an external in channel from a file of tuples (`-`: stdin).
        #[arg(long = "in", value_name = "CHAN=PATH")]
        inputs: Vec<String>,
        /// Write an external out channel's messages to a file.
        #[arg(long = "out", value_name = "CHAN=PATH")]
        outputs: Vec<String>,
        /// Define a host function as an ESP expression of its parameters.
        #[arg(long = "extern", value_name = "NAME(A,..)=EXPR")]
        externs: Vec<String>,
        /// Print the run's statistics (fast-path entries, exits, aborts...).
        #[arg(long)]
        stats: bool,
    },
    /// Explore the program's states: deadlocks and assertion failures.
    Check {
        /// The ESP source file.
        file: PathBuf,
        /// Values the environment may send in each field of an external in
        /// channel.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "0,1,2",
            allow_hyphen_values = true
        )]
        domain: Vec<i64>,
        /// Messages the environment sends on each external in channel, at most.
        #[arg(long, default_value_t = 3)]
        max_inputs: u32,
        /// The bound on explored states.
        #[arg(long, default_value_t = 1_000_000)]
        max_states: usize,
    },
    /// Print the fast paths a specification extracts (pseudo-code and
    /// machine code), or the program's automaton.
    Dump {
        /// The ESP source file.
        file: PathBuf,
        /// The fast-path specification file.
        #[arg(
            long = "fastpath",
            value_name = "SPEC",
            required_unless_present = "automaton"
        )]
        spec: Option<PathBuf>,
        /// The whole program's product state machine instead.
        #[arg(long, conflicts_with = "spec")]
        automaton: bool,
    },
}

/// `--backend`.
#[derive(Copy, Clone, ValueEnum)]
pub enum BackendArg {
    /// The reference interpreter (fast paths through the graph interpreter).
    Interp,
    /// Native code through vcode (fast paths too).
    Native,
    /// The whole program as one native product state machine.
    Automata,
}

/// Runs an `esp` subcommand.
pub fn main(cmd: EspCmd) -> ExitCode {
    let result = match cmd {
        EspCmd::Run {
            file,
            spec,
            backend,
            inputs,
            outputs,
            externs,
            stats,
        } => run(
            &file,
            spec.as_deref(),
            backend,
            &inputs,
            &outputs,
            &externs,
            stats,
        ),
        EspCmd::Check {
            file,
            domain,
            max_inputs,
            max_states,
        } => check(&file, domain, max_inputs, max_states),
        EspCmd::Dump {
            file,
            spec,
            automaton,
        } => dump(&file, spec.as_deref(), automaton),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fastpath esp: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `file:line:col: ...` for an error with a position, `file: ...` otherwise.
fn at(file: &Path, e: &esp::Error) -> String {
    use esp::Error::*;
    match e {
        Syntax { .. }
        | Check { .. }
        | Spec { .. }
        | AssertionFailed { .. }
        | DivisionByZero { .. } => {
            format!("{}:{e}", file.display())
        }
        _ => format!("{}: {e}", file.display()),
    }
}

/// Reads and compiles a program; errors name the file.
fn load(file: &Path) -> Result<esp::ir::Program, String> {
    let src = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    esp::compile(&src).map_err(|e| at(file, &e))
}

/// Reads and resolves a specification; errors name the file.
fn load_spec(file: &Path, program: &esp::ir::Program) -> Result<esp::spec::Spec, String> {
    let src = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    esp::spec::parse(&src, program).map_err(|e| at(file, &e))
}

/// Splits `CHAN=VALUE`.
fn pair<'a>(arg: &'a str, flag: &str) -> Result<(&'a str, &'a str), String> {
    arg.split_once('=')
        .map(|(a, b)| (a.trim(), b.trim()))
        .ok_or_else(|| format!("{flag} {arg:?}: expected CHAN=PATH"))
}

/// Parses a file of tuples: one message a line, fields separated by
/// whitespace or commas, `#` comments. Each message must have `arity`
/// fields.
fn tuples(text: &str, what: &str, arity: usize) -> Result<Vec<i64>, String> {
    let mut flat = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let fields: Vec<&str> = line
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|f| !f.is_empty())
            .collect();
        if fields.len() != arity {
            return Err(format!(
                "{what}:{}: {} fields, but the channel carries {arity}",
                i + 1,
                fields.len()
            ));
        }
        for f in fields {
            flat.push(
                parse_int(f).ok_or_else(|| format!("{what}:{}: {f:?} is not an integer", i + 1))?,
            );
        }
    }
    Ok(flat)
}

/// A decimal or `0x` hexadecimal integer, optionally negative.
fn parse_int(s: &str) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let v = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => i64::from_str_radix(hex, 16).ok()?,
        None => digits.parse().ok()?,
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

fn run(
    file: &Path,
    spec: Option<&Path>,
    backend: BackendArg,
    inputs: &[String],
    outputs: &[String],
    externs: &[String],
    stats: bool,
) -> Result<ExitCode, String> {
    let program = load(file)?;
    let spec = spec.map(|s| load_spec(s, &program)).transpose()?;
    let backend = match backend {
        BackendArg::Interp => Backend::Interp,
        BackendArg::Native => Backend::Native,
        BackendArg::Automata => Backend::Automata,
    };
    let ext_in: Vec<esp::ir::Channel> = program
        .channels
        .iter()
        .filter(|c| c.kind == esp::ir::ChanKind::ExternalIn)
        .cloned()
        .collect();
    let ext_out: Vec<String> = program
        .channels
        .iter()
        .filter(|c| c.kind == esp::ir::ChanKind::ExternalOut)
        .map(|c| c.name.clone())
        .collect();
    let arity: HashMap<String, usize> = program
        .channels
        .iter()
        .map(|c| (c.name.clone(), c.arity as usize))
        .collect();
    // Host functions: parsed before the machine takes the program.
    let mut host_fns = Vec::new();
    for def in externs {
        let f = esp::hostfn::HostFn::parse(def).map_err(|e| format!("--extern {def:?}: {e}"))?;
        match program.extern_fn(f.name()) {
            None => {
                return Err(format!(
                    "--extern {def:?}: the program declares no host function {:?}",
                    f.name()
                ));
            }
            Some(id) if program.externs[id as usize].arity as usize != f.arity() => {
                return Err(format!(
                    "--extern {def:?}: {} takes {} arguments in the program",
                    f.name(),
                    program.externs[id as usize].arity
                ));
            }
            Some(_) => host_fns.push(f),
        }
    }
    let mut machine = Machine::new(
        program,
        Options {
            backend,
            spec,
            ..Options::default()
        },
    )
    .map_err(|e| at(file, &e))?;
    for f in host_fns {
        let name = f.name().to_string();
        machine
            .bind_extern_fallible(&name, move |args| f.call(args))
            .map_err(|e| e.to_string())?;
    }
    // Inputs: the named files, or stdin for a lone external in channel.
    for arg in inputs {
        let (chan, path) = pair(arg, "--in")?;
        let Some(&n) = arity.get(chan) else {
            return Err(format!("--in {arg:?}: the program has no channel {chan:?}"));
        };
        let text = if path == "-" {
            std::io::read_to_string(std::io::stdin()).map_err(|e| format!("stdin: {e}"))?
        } else {
            std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?
        };
        let flat = tuples(&text, path, n)?;
        machine.push(chan, &flat).map_err(|e| e.to_string())?;
    }
    if inputs.is_empty() && ext_in.len() == 1 {
        let c = &ext_in[0];
        let text = std::io::read_to_string(std::io::stdin()).map_err(|e| format!("stdin: {e}"))?;
        let flat = tuples(&text, "stdin", c.arity as usize)?;
        machine.push(&c.name, &flat).map_err(|e| e.to_string())?;
    }
    // Outputs: files, or stdout in the order the messages were sent.
    let mut files = HashMap::new();
    for arg in outputs {
        let (chan, path) = pair(arg, "--out")?;
        if !ext_out.iter().any(|c| c == chan) {
            return Err(format!(
                "--out {arg:?}: {chan:?} is not an external out channel"
            ));
        }
        files.insert(chan.to_string(), PathBuf::from(path));
    }
    for chan in &ext_out {
        if files.contains_key(chan) {
            continue;
        }
        let name = chan.clone();
        machine
            .bind_out(chan, move |fields| {
                let values: Vec<String> = fields.iter().map(i64::to_string).collect();
                say!("{name} {}", values.join(" "));
            })
            .map_err(|e| e.to_string())?;
    }
    let status = machine.run().map_err(|e| at(file, &e))?;
    for (chan, path) in &files {
        let flat = machine.take_output(chan).map_err(|e| e.to_string())?;
        let n = arity[chan].max(1);
        let mut text = String::new();
        for msg in flat.chunks(n) {
            let values: Vec<String> = msg.iter().map(i64::to_string).collect();
            text.push_str(&values.join(" "));
            text.push('\n');
        }
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if stats {
        let s = machine.stats();
        let size = machine.code_size();
        eprintln!(
            "fast paths: {} entered, {} exited, {} aborted, {} refused for fairness",
            s.entries, s.exits, s.aborts, s.refusals
        );
        eprintln!(
            "scheduler: {} switches, {} rendezvous, {} automaton suspensions",
            s.switches, s.rendezvous, s.suspends
        );
        eprintln!(
            "machine instructions: processes {}, fast paths {}, automaton {}",
            size.processes, size.fast_paths, size.automaton
        );
    }
    let (pcs, _) = machine.state();
    let program = machine.program();
    match status {
        Status::Halted => {
            if stats {
                eprintln!("every process halted");
            }
        }
        Status::Input => {
            if stats {
                eprintln!("idle: waiting for input");
            }
        }
        Status::Deadlock => {
            eprintln!("deadlock: no process waits for input, and these are blocked for good:");
            for (p, &pc) in program.processes.iter().zip(pcs) {
                if let Some(node) = p.nodes.get(pc as usize) {
                    if !matches!(node.kind, esp::ir::NodeKind::Halt) {
                        eprintln!("  {} at {}", p.name, node.pos);
                    }
                }
            }
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn check(
    file: &Path,
    domain: Vec<i64>,
    max_inputs: u32,
    max_states: usize,
) -> Result<ExitCode, String> {
    let program = load(file)?;
    let options = esp::mc::CheckOptions {
        domain,
        max_inputs,
        max_states,
        ..esp::mc::CheckOptions::default()
    };
    let report = esp::mc::check(&program, &options).map_err(|e| at(file, &e))?;
    say!("{report}");
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn dump(file: &Path, spec: Option<&Path>, automaton: bool) -> Result<ExitCode, String> {
    let program = load(file)?;
    let options = esp::explore::ExploreOptions::default();
    let mut graphs = Vec::new();
    if automaton {
        graphs.push(esp::explore::automaton(&program, &options).map_err(|e| e.to_string())?);
    } else if let Some(spec) = spec {
        let spec = load_spec(spec, &program)?;
        for fp in &spec.fastpaths {
            graphs.push(
                esp::explore::fast_path(&program, fp, &options)
                    .map_err(|e| format!("fast path {}: {e}", fp.name))?,
            );
        }
    }
    for mut g in graphs {
        let explored = g.blocks.len();
        esp::opt::optimize(&program, &mut g);
        say!(
            "== {} ({} control states, {} blocks before optimization, {} after)",
            g.name,
            g.states,
            explored,
            g.blocks.len()
        );
        say!("{}", g.display(&program));
        let native = esp::fpgen::compile(&g, &program).map_err(|e| e.to_string())?;
        say!("-- machine code: {} instructions", native.instructions());
        say!("{}", native.listing());
    }
    Ok(ExitCode::SUCCESS)
}
