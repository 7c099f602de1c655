//! The jive JIT's compile cost in host instructions per bytecode, counted
//! exactly by `valgrind --tool=callgrind`, so the figure repeats across runs.
//!
//! ```text
//! cargo build --release -p fastpath-bench --bin jive-compile-count
//! target/release/jive-compile-count                 # both classes under callgrind, then the table
//! target/release/jive-compile-count all 200         # the same, N compiles per class
//! # one class by hand (N defaults to 100):
//! valgrind --tool=callgrind --toggle-collect=jive_compile_loop target/release/jive-compile-count rawunet 100
//! valgrind --tool=callgrind --toggle-collect=jive_compile_loop target/release/jive-compile-count bench 100
//! ```
//!
//! Each counted process loads one class of `applets/` (RawUnet, the
//! paper's Figure 2 applet, or Bench, the benchmark suite's class) with
//! jive's default limits (fuel metering on), compiles it once outside the
//! count (first-use set-up of the code generator and executable memory),
//! then compiles it N times inside [`jive_compile_loop`], with
//! `jive::jit::compile_standalone`: the whole compile into executable
//! memory of its own, without the code cache (`jive::jit::compile` would
//! share the first compile's code with the other N). Callgrind's
//! `--toggle-collect` counts exactly the instructions executed between
//! entry to and return from that function, callees included: the N
//! compiles, and not process start-up, the class's load and verification,
//! or the freeing of the compiled code (each result is kept until the loop
//! returns). Instructions per bytecode = Ir / (N × bytecode instructions);
//! the program prints the class's bytecode instructions (JVM instructions
//! in the methods the JIT compiles), its bytes of bytecode, and the
//! decoded ops they became.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use fastpath_bench::callgrind::parse_total;
use jive::jit::JitError;
use jive::{Limits, Program};

/// Compiles per counted run, unless given.
const DEFAULT_N: usize = 100;

/// The classes that can be counted: (name on the command line, class file).
const CLASSES: &[(&str, &str)] = &[("rawunet", "RawUnet.class"), ("bench", "Bench.class")];

/// The callgrind toggle point: `n` compiles of `prog`, each kept in `out`
/// so that freeing the code is outside the count.
#[inline(never)]
#[unsafe(no_mangle)]
pub fn jive_compile_loop(
    prog: &Program,
    n: usize,
    out: &mut Vec<vcode::Code>,
) -> Result<(), JitError> {
    for _ in 0..n {
        out.push(jive::jit::compile_standalone(std::hint::black_box(prog))?);
    }
    Ok(())
}

/// The class's size: (JVM instructions, bytes of bytecode, decoded ops),
/// over the methods that have code.
fn size(bytes: &[u8], prog: &Program) -> Result<(usize, usize, usize), String> {
    let cf = jive::classfile::ClassFile::parse(bytes).map_err(|e| e.to_string())?;
    let mut insns = 0;
    for m in &cf.methods {
        if let Some(code) = &m.code {
            insns += jive::bytecode::instructions(&code.code)
                .map_err(|e| format!("bci {}: {}", e.bci, e.reason))?
                .len();
        }
    }
    let ops = prog.funcs.iter().flatten().map(|f| f.code.len()).sum();
    Ok((insns, prog.code_bytes, ops))
}

fn class_file(name: &str) -> Result<PathBuf, String> {
    let Some(file) = CLASSES.iter().find(|c| c.0 == name).map(|c| c.1) else {
        return Err(format!("unknown class {name:?}"));
    };
    let Some(dir) = jive::APPLET_CLASSES else {
        return Err(
            "the applets were not compiled because javac was missing when jive was \
                    built; install a JDK (e.g. apt-get install openjdk-17-jdk-headless) and rebuild"
                .into(),
        );
    };
    Ok(PathBuf::from(dir).join("default").join(file))
}

/// One counted run: load the class, compile once, then N times in the
/// toggled function.
fn count(name: &str, n: usize) -> Result<(), String> {
    let path = class_file(name)?;
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let prog =
        jive::check(&bytes, &Limits::default()).map_err(|e| format!("{}: {e}", path.display()))?;
    let (insns, code_bytes, ops) = size(&bytes, &prog).map_err(|e| format!("{name}: {e}"))?;
    let first = jive::jit::compile_standalone(&prog).map_err(|e| format!("{name}: {e}"))?;
    drop(first);
    let mut out = Vec::with_capacity(n);
    jive_compile_loop(&prog, n, &mut out).map_err(|e| format!("{name}: {e}"))?;
    println!(
        "{name}: {n} compiles; {insns} bytecode instructions ({code_bytes} bytes, {ops} decoded ops) per compile"
    );
    drop(out);
    Ok(())
}

/// Instructions counted in `jive_compile_loop` for one class.
fn callgrind(exe: &std::path::Path, name: &str, n: usize) -> Result<u64, String> {
    let file = std::env::temp_dir().join(format!(
        "jive-compile-count-{}-{name}.out",
        std::process::id()
    ));
    let run = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--toggle-collect=jive_compile_loop")
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(exe)
        .arg(name)
        .arg(n.to_string())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "valgrind is not installed (apt-get install valgrind)".to_string()
            }
            _ => format!("running valgrind: {e}"),
        })?;
    let text = std::fs::read_to_string(&file);
    let _ = std::fs::remove_file(&file);
    if !run.status.success() {
        return Err(format!(
            "callgrind run of {name} failed ({}): {}",
            run.status,
            String::from_utf8_lossy(&run.stderr)
                .lines()
                .rfind(|l| !l.starts_with("=="))
                .unwrap_or("")
        ));
    }
    let text = text.map_err(|e| format!("reading {}: {e}", file.display()))?;
    parse_total(&text).ok_or_else(|| format!("no totals line in {}", file.display()))
}

/// Every class under callgrind, then the table.
fn all(n: usize) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let mut rows = Vec::new();
    for &(name, _) in CLASSES {
        let path = class_file(name)?;
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let prog = jive::check(&bytes, &Limits::default())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let (insns, code_bytes, ops) = size(&bytes, &prog).map_err(|e| format!("{name}: {e}"))?;
        jive::jit::compile_standalone(&prog)
            .map_err(|e| format!("{name}: JIT unavailable: {e}"))?;
        eprint!("callgrind {name:<8} ");
        let ir = callgrind(&exe, name, n)?;
        eprintln!("{ir} instructions in jive_compile_loop");
        rows.push((name, insns, code_bytes, ops, ir));
    }
    println!(
        "jive JIT compile cost: host instructions (callgrind), N = {n} compiles per class after 1 uncounted\n"
    );
    println!(
        "{:<8} {:>9} {:>7} {:>6} {:>14} {:>12} {:>10} {:>10}",
        "class", "bytecodes", "bytes", "ops", "Ir total", "Ir/compile", "Ir/bytecode", "Ir/byte"
    );
    for (name, insns, code_bytes, ops, ir) in rows {
        let per = ir as f64 / n as f64;
        println!(
            "{name:<8} {insns:>9} {code_bytes:>7} {ops:>6} {ir:>14} {per:>12.0} {:>10.1} {:>10.1}",
            per / insns as f64,
            per / code_bytes as f64
        );
    }
    println!(
        "\nbytecodes: JVM instructions in the methods compiled; Ir/bytecode = Ir total / (N x bytecodes)"
    );
    Ok(())
}

fn usage() -> String {
    let names: Vec<&str> = CLASSES.iter().map(|c| c.0).collect();
    format!(
        "usage: jive-compile-count [all [N] | CLASS [N]]\n  CLASS: {}\n  N: counted compiles (default {DEFAULT_N})\n  \
         by hand: valgrind --tool=callgrind --toggle-collect=jive_compile_loop jive-compile-count CLASS N",
        names.join(", ")
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let what = args.first().map_or("all", String::as_str);
    let n = match args.get(1).map(|s| s.parse::<usize>()) {
        None => DEFAULT_N,
        Some(Ok(n)) if n > 0 => n,
        _ => {
            eprintln!("jive-compile-count: bad compile count\n{}", usage());
            return ExitCode::from(2);
        }
    };
    let result = match what {
        "-h" | "--help" | "help" => {
            println!("{}", usage());
            return ExitCode::SUCCESS;
        }
        "all" => all(n),
        name if CLASSES.iter().any(|c| c.0 == name) => count(name, n),
        name => {
            eprintln!("jive-compile-count: unknown class {name:?}\n{}", usage());
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jive-compile-count: {e}");
            ExitCode::FAILURE
        }
    }
}
