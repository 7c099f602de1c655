//! `fastpath esp`: run, model-check and inspect ESP programs (the *Fast
//! Paths in Concurrent Programs* paper's language; see docs/esp.md).
//!
//! - `run FILE [--fastpath SPEC] [--backend interp|native|automata]` runs a
//!   program until it is idle. External channels bind to the command line:
//!   `--in CHAN=PATH` feeds a file of tuples (one message a line, fields
//!   separated by spaces or commas, `#` comments; `-` is stdin). Without
//!   `--in`, a program with a single external in channel reads its tuples
//!   from stdin, and one with several reads lines `CHAN v1 v2 ...` that name
//!   the channel first; every
//!   external out message is printed as `CHAN v1 v2 ...` (or written to
//!   `--out CHAN=PATH`). Host functions are defined as ESP expressions:
//!   `--extern 'translate(a)=a + 0x100000'`. Flags that would be ignored
//!   are refused: `--fastpath` with `--backend automata` (the library's
//!   `Error::SpecWithAutomata`), a second `--in`, `--out` or `--extern`
//!   for one channel or function, `--in` on a channel that is not
//!   `external in`. A process that runs more than `--max-local-iterations`
//!   loop iterations without a channel operation (a loop that never
//!   yields) stops the run with an error at the loop, exit status 1.
//! - `check FILE` explores the program's states and reports deadlocks and
//!   failed assertions with a shortest trace, within a state bound, a
//!   memory budget and a step limit for local code, printing progress on
//!   stderr after 2 s (`--json`: the report as JSON).
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
        /// Without `--in`, stdin feeds the program's external in channel, or,
        /// when it has several, each line of stdin is `CHAN v1 v2 ...`.
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
        /// How many loop iterations (backward jumps on loops through no
        /// channel operation) a process may run between two of its channel
        /// operations; one more stops the run with an error that names the
        /// process and the loop: a loop that never yields. Fast paths and
        /// the automaton abort to the process-based code past it.
        #[arg(long, value_name = "N", default_value_t = esp::ir::DEFAULT_MAX_LOCAL_ITERATIONS)]
        max_local_iterations: u64,
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
        /// The memory the explored states may take, in MiB (estimated);
        /// beyond it the report says how deep the search is complete.
        #[arg(long, value_name = "MIB", default_value_t = 1024)]
        max_memory: usize,
        /// How many nodes a process may run between two channel operations
        /// before the check reports it as a loop that never yields.
        #[arg(long, default_value_t = 1_000_000)]
        max_local_steps: u64,
        /// Print the report as one JSON object (for scripts).
        #[arg(long)]
        json: bool,
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

/// Runs an `esp` subcommand. With `check --json`, a failure (not a
/// violation, which is the report's) also prints the CLI's JSON error
/// object on standard output ([`crate::print_json_error`]).
pub fn main(cmd: EspCmd) -> ExitCode {
    let json = matches!(cmd, EspCmd::Check { json: true, .. });
    let result = match cmd {
        EspCmd::Run {
            file,
            spec,
            backend,
            inputs,
            outputs,
            externs,
            stats,
            max_local_iterations,
        } => run(
            &file,
            spec.as_deref(),
            backend,
            &Io {
                inputs: &inputs,
                outputs: &outputs,
                externs: &externs,
            },
            stats,
            max_local_iterations,
        ),
        EspCmd::Check {
            file,
            domain,
            max_inputs,
            max_states,
            max_memory,
            max_local_steps,
            json,
        } => check(
            &file,
            esp::mc::CheckOptions {
                domain,
                max_inputs,
                max_states,
                max_memory: max_memory.saturating_mul(1 << 20),
                max_local_steps,
                ..esp::mc::CheckOptions::default()
            },
            json,
        ),
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
            if json {
                crate::print_json_error("esp check", &e);
            }
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
        | DivisionByZero { .. }
        | Diverges { .. } => {
            format!("{}:{e}", file.display())
        }
        _ => format!("{}: {e}", file.display()),
    }
}

/// Text that must be UTF-8: an error names `what`, the line and column
/// (in characters) and the byte offset of the first invalid byte.
fn utf8(bytes: Vec<u8>, what: &str) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| {
        let good = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        // The valid prefix is UTF-8 by definition.
        let before = std::str::from_utf8(&bytes[..good]).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        format!(
            "{what}:{line}:{col}: invalid UTF-8 (byte 0x{:02x} at byte offset {good}): the file must be UTF-8 text",
            bytes[good]
        )
    })
}

/// Reads a UTF-8 text file; errors name the file.
fn read_text(file: &Path) -> Result<String, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    utf8(bytes, &file.display().to_string())
}

/// Reads all of stdin as UTF-8 text.
fn read_stdin() -> Result<String, String> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
        .map_err(|e| format!("stdin: {e}"))?;
    utf8(bytes, "stdin")
}

/// Reads and compiles a program; errors name the file. A program without
/// processes (an empty file, say) does nothing and is refused.
fn load(file: &Path) -> Result<esp::ir::Program, String> {
    let src = read_text(file)?;
    let program = esp::compile(&src).map_err(|e| at(file, &e))?;
    if program.processes.is_empty() {
        return Err(format!(
            "{}: the program declares no process, so there is nothing to run or check{}",
            file.display(),
            if src.trim().is_empty() {
                " (the file is empty)"
            } else {
                ""
            }
        ));
    }
    Ok(program)
}

/// Reads and resolves a specification; errors name the file.
fn load_spec(file: &Path, program: &esp::ir::Program) -> Result<esp::spec::Spec, String> {
    let src = read_text(file)?;
    esp::spec::parse(&src, program).map_err(|e| at(file, &e))
}

/// Splits `CHAN=VALUE`.
fn pair<'a>(arg: &'a str, flag: &str) -> Result<(&'a str, &'a str), String> {
    arg.split_once('=')
        .map(|(a, b)| (a.trim(), b.trim()))
        .ok_or_else(|| format!("{flag} {arg:?}: expected CHAN=PATH"))
}

/// The fields of one line of a tuple file, each with its 1-based column:
/// separated by whitespace or commas, a `#` starts a comment.
fn fields(line: &str) -> Vec<(usize, &str)> {
    let line = line.split('#').next().unwrap_or("");
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices().chain([(line.len(), ' ')]) {
        let sep = c == ',' || c.is_whitespace();
        match (start, sep) {
            (None, false) => start = Some(i),
            (Some(s), true) => {
                out.push((line[..s].chars().count() + 1, &line[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// One field of a tuple file; errors give `what:line:column`.
fn field(f: &str, what: &str, line: usize, col: usize) -> Result<i64, String> {
    parse_int(f).map_err(|e| format!("{what}:{line}:{col}: `{f}` {e}"))
}

/// Parses a file of tuples: one message a line, fields separated by
/// whitespace or commas, `#` comments. Each message must have `arity`
/// fields.
fn tuples(text: &str, what: &str, arity: usize) -> Result<Vec<i64>, String> {
    let mut flat = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let fields = fields(line);
        if fields.is_empty() {
            continue;
        }
        if fields.len() != arity {
            return Err(format!(
                "{what}:{}: {} fields, but the channel carries {arity}",
                i + 1,
                fields.len()
            ));
        }
        for (col, f) in fields {
            flat.push(field(f, what, i + 1, col)?);
        }
    }
    Ok(flat)
}

/// Parses stdin for a program with several external in channels: each line
/// is `CHAN v1 v2 ...`, the channel's name and then its fields. Returns the
/// flat fields per channel, in the order of `channels`.
fn tagged_tuples(
    text: &str,
    what: &str,
    channels: &[esp::ir::Channel],
) -> Result<Vec<Vec<i64>>, String> {
    let mut flat = vec![Vec::new(); channels.len()];
    let names = || {
        channels
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (i, line) in text.lines().enumerate() {
        let fields = fields(line);
        let Some(&(col, name)) = fields.first() else {
            continue;
        };
        let Some(k) = channels.iter().position(|c| c.name == name) else {
            return Err(format!(
                "{what}:{}:{col}: `{name}` is not an external in channel: with several ({}), each line of stdin starts with the channel's name, then the message's fields (or use --in CHAN=PATH for each)",
                i + 1,
                names()
            ));
        };
        let arity = channels[k].arity as usize;
        if fields.len() - 1 != arity {
            return Err(format!(
                "{what}:{}: {} fields, but channel {name} carries {arity}",
                i + 1,
                fields.len() - 1
            ));
        }
        for &(col, f) in &fields[1..] {
            flat[k].push(field(f, what, i + 1, col)?);
        }
    }
    Ok(flat)
}

/// A decimal or `0x` hexadecimal integer, optionally negative, anywhere in
/// the i64 range (so `-9223372036854775808` and `-0x8000000000000000` are
/// integers).
fn parse_int(s: &str) -> Result<i64, String> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let (radix, digits) = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => (16, hex),
        None => (10, digits),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err("is not an integer".into());
    }
    let range = || {
        format!(
            "is out of range: integers are 64-bit, {} to {}",
            i64::MIN,
            i64::MAX
        )
    };
    let magnitude = u128::from_str_radix(digits, radix).map_err(|_| range())?;
    let v = if neg {
        -i128::try_from(magnitude).map_err(|_| range())?
    } else {
        i128::try_from(magnitude).map_err(|_| range())?
    };
    i64::try_from(v).map_err(|_| range())
}

/// `run`'s bindings of external channels and host functions, as given.
struct Io<'a> {
    inputs: &'a [String],
    outputs: &'a [String],
    externs: &'a [String],
}

fn run(
    file: &Path,
    spec: Option<&Path>,
    backend: BackendArg,
    io: &Io<'_>,
    stats: bool,
    max_local_iterations: u64,
) -> Result<ExitCode, String> {
    let Io {
        inputs,
        outputs,
        externs,
    } = *io;
    let program = load(file)?;
    let spec_file = spec;
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
    let mut host_fns: Vec<esp::hostfn::HostFn> = Vec::new();
    for def in externs {
        let f = esp::hostfn::HostFn::parse(def).map_err(|e| format!("--extern {def:?}: {e}"))?;
        if host_fns.iter().any(|g| g.name() == f.name()) {
            return Err(format!("--extern {def:?}: {} is defined twice", f.name()));
        }
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
            max_local_iterations,
            ..Options::default()
        },
    )
    .map_err(|e| match (&e, spec_file) {
        // Extraction checks the specification against the program: its
        // positions are in the specification's file. The library refuses a
        // specification with the automaton (the whole program, with no fast
        // paths), before any input is read: that names the file too.
        (esp::Error::Spec { .. } | esp::Error::SpecWithAutomata { .. }, Some(spec)) => at(spec, &e),
        _ => at(file, &e),
    })?;
    for f in host_fns {
        let name = f.name().to_string();
        machine
            .bind_extern_fallible(&name, move |args| f.call(args))
            .map_err(|e| e.to_string())?;
    }
    // Inputs: the named files, or stdin for a lone external in channel.
    let mut fed: Vec<&str> = Vec::new();
    for arg in inputs {
        let (chan, path) = pair(arg, "--in")?;
        let Some(&n) = arity.get(chan) else {
            return Err(format!("--in {arg:?}: the program has no channel {chan:?}"));
        };
        // The direction before the file, whose fields would not fit anyway.
        if !ext_in.iter().any(|c| c.name == chan) {
            return Err(format!(
                "--in {arg:?}: channel {chan} is not an external in channel"
            ));
        }
        if fed.contains(&chan) {
            return Err(format!(
                "--in {arg:?}: channel {chan} is given twice (one --in a channel)"
            ));
        }
        fed.push(chan);
        let text = if path == "-" {
            read_stdin()?
        } else {
            read_text(Path::new(path))?
        };
        let flat = tuples(&text, path, n)?;
        machine.push(chan, &flat).map_err(|e| e.to_string())?;
    }
    if inputs.is_empty() && ext_in.len() == 1 {
        let c = &ext_in[0];
        let flat = tuples(&read_stdin()?, "stdin", c.arity as usize)?;
        machine.push(&c.name, &flat).map_err(|e| e.to_string())?;
    } else if inputs.is_empty() && ext_in.len() > 1 {
        // Several channels: each line of stdin names its channel.
        let flat = tagged_tuples(&read_stdin()?, "stdin", &ext_in)?;
        for (c, flat) in ext_in.iter().zip(flat) {
            machine.push(&c.name, &flat).map_err(|e| e.to_string())?;
        }
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
        if files
            .insert(chan.to_string(), PathBuf::from(path))
            .is_some()
        {
            return Err(format!(
                "--out {arg:?}: channel {chan} is given twice (one --out a channel)"
            ));
        }
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
                if let Some(node) = p.nodes.get(pc as usize)
                    && !matches!(node.kind, esp::ir::NodeKind::Halt)
                {
                    eprintln!("  {} at {}", p.name, node.pos);
                }
            }
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn check(file: &Path, mut options: esp::mc::CheckOptions, json: bool) -> Result<ExitCode, String> {
    let program = load(file)?;
    // Progress lines on stderr once the check has run for 2 s, then at most
    // one a second.
    let start = std::time::Instant::now();
    let last = std::sync::Mutex::new(None::<std::time::Instant>);
    options.progress = Some(esp::mc::ProgressFn(std::sync::Arc::new(
        move |p: esp::mc::Progress| {
            let now = std::time::Instant::now();
            let Ok(mut last) = last.lock() else { return };
            let due = match *last {
                None => now.duration_since(start).as_secs_f64() >= 2.0,
                Some(t) => now.duration_since(t).as_secs_f64() >= 1.0,
            };
            if due {
                *last = Some(now);
                eprintln!(
                    "esp check: {} states ({} explored), {} transitions, about {} MiB, {:.0} s",
                    p.states,
                    p.explored,
                    p.transitions,
                    p.bytes >> 20,
                    now.duration_since(start).as_secs_f64()
                );
            }
        },
    )));
    let report = esp::mc::check(&program, &options).map_err(|e| at(file, &e))?;
    if json {
        say!("{}", report_json(&report));
    } else {
        say!("{report}");
    }
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The report as JSON: `ok`, `exhaustive`, `states`, `transitions`,
/// `stopped_by` (`null`, `"states"`, `"memory"` or `"violation"`: the
/// search stops at the first violation, so a report with one is not
/// exhaustive), `complete_depth`,
/// `violation` (`null`, or `kind`, `message` and, where it applies,
/// `process`, `line`, `column`, `limit`, `stuck`) and `trace` (one string a
/// step).
fn report_json(r: &esp::mc::Report) -> serde_json::Value {
    use esp::mc::{Bound, Violation};
    use serde_json::json;
    let violation = r.violation.as_ref().map(|v| {
        let mut o = match v {
            Violation::Deadlock { stuck } => json!({
                "kind": "deadlock",
                "stuck": stuck.iter().map(|b| json!({
                    "process": b.process,
                    "line": b.pos.line,
                    "column": b.pos.col,
                    "waits": b.waits,
                })).collect::<Vec<_>>(),
            }),
            Violation::AssertionFailed { process, pos } => json!({
                "kind": "assertion_failed", "process": process, "line": pos.line, "column": pos.col,
            }),
            Violation::DivisionByZero { process, pos } => json!({
                "kind": "division_by_zero", "process": process, "line": pos.line, "column": pos.col,
            }),
            Violation::Diverges {
                process,
                pos,
                limit,
            } => json!({
                "kind": "loop_without_channel_operation", "process": process,
                "line": pos.line, "column": pos.col, "limit": limit,
            }),
        };
        o["message"] = json!(v.to_string());
        o
    });
    json!({
        "ok": r.is_ok(),
        "exhaustive": r.exhaustive,
        "states": r.states,
        "transitions": r.transitions,
        "stopped_by": match (r.stopped, &r.violation) {
            (Some(Bound::States(_)), _) => Some("states"),
            (Some(Bound::Memory(_)), _) => Some("memory"),
            (None, Some(_)) => Some("violation"),
            (None, None) => None,
        },
        "complete_depth": if r.exhaustive { None } else { Some(r.complete_depth) },
        "violation": violation,
        "trace": r.trace.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

fn dump(file: &Path, spec: Option<&Path>, automaton: bool) -> Result<ExitCode, String> {
    let program = load(file)?;
    let options = esp::explore::ExploreOptions::default();
    let mut graphs = Vec::new();
    if automaton {
        graphs.push(esp::automata::automaton(&program, &options).map_err(|e| e.to_string())?);
    } else if let Some(spec_file) = spec {
        let spec = load_spec(spec_file, &program)?;
        for fp in &spec.fastpaths {
            graphs.push(
                esp::explore::fast_path(&program, fp, &options).map_err(|e| match e {
                    esp::Error::Spec { .. } => at(spec_file, &e),
                    _ => format!("fast path {}: {e}", fp.name),
                })?,
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
