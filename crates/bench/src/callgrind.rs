//! Host instructions per generated instruction, counted exactly by
//! `valgrind --tool=callgrind`.
//!
//! The measured program is this crate's own code run in a child process:
//! [`child_main`] generates [`FUNCS`] functions with one of the
//! `fastpath_bench_gen_*` functions below, each of which is *one whole
//! function's generation*: `lambda`, the `getreg`s (virtual variant),
//! every instruction method, and `end` (backpatching, prologue and
//! epilogue, allocation in the W^X arena and the copy into it). Callgrind
//! runs with `--toggle-collect=fastpath_bench_gen_<mode>`, which counts
//! exactly the instructions executed between entry to and return from
//! that function, including everything it calls, and nothing else: not
//! process start-up, not the harness loop, not dropping the code. The
//! harness's own instructions are therefore not in the count at all,
//! rather than subtracted.
//!
//! The `empty` mode generates the empty function (`lambda`, `ret`,
//! `end`): its count is the fixed per-function cost, and subtracting it
//! gives the cost of the body's instructions alone. The `empty_framed`
//! mode is the empty function with a frame (one callee-saved register
//! saved and restored): the fixed cost of every real function.

use std::path::Path;
use std::process::Command;

use vcode::{Code, Func};

use crate::{client, workload};

/// Functions generated per counted run (the workload: 1,000
/// functions of about 100 instructions).
pub const FUNCS: usize = 1000;

/// The environment variable that turns a binary calling
/// [`crate::codegen_report`] into the counted child.
pub const CHILD_ENV: &str = "FASTPATH_CODEGEN_COUNT";

/// The workload variants.
pub const MODES: [&str; 3] = ["virtual", "fixed", "empty"];

/// The branch-heavy variant, the framed empty function and the client
/// benchmark, counted by hand (see `docs/benchmarks.md`): `vcode-count MODE`.
pub const EXTRA_MODES: [&str; 5] = [
    "empty_framed",
    "branchy_virtual",
    "branchy_fixed",
    "client_getreg",
    "client_fixed",
];

/// Generates the workload with `getreg` registers. The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn fastpath_bench_gen_virtual(f: &mut Func) -> vcode::Result<Code> {
    workload::mixed_virtual(f)
}

/// Generates the workload with fixed register names. The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn fastpath_bench_gen_fixed(f: &mut Func) -> vcode::Result<Code> {
    workload::mixed_fixed(f)
}

/// Generates the empty function. The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn fastpath_bench_gen_empty(f: &mut Func) -> vcode::Result<Code> {
    workload::empty(f)
}

/// Generates the empty function with a frame (one callee-saved register).
/// The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn fastpath_bench_gen_empty_framed(f: &mut Func) -> vcode::Result<Code> {
    workload::empty_framed(f)
}

/// Generates the branch-heavy workload with `getreg` registers. The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn fastpath_bench_gen_branchy_virtual(f: &mut Func) -> vcode::Result<Code> {
    workload::branchy_virtual(f)
}

/// Generates the branch-heavy workload with fixed names. The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn fastpath_bench_gen_branchy_fixed(f: &mut Func) -> vcode::Result<Code> {
    workload::branchy_fixed(f)
}

/// Compiles the client benchmark's program with `getreg` temporaries.
/// The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn fastpath_bench_gen_client_getreg(f: &mut Func, p: &[client::S]) -> vcode::Result<Code> {
    client::gen_getreg(f, p)
}

/// Compiles the client benchmark's program with the template JIT (fixed
/// names, locals as an operand stack). The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn fastpath_bench_gen_client_fixed(f: &mut Func, p: &[client::S]) -> vcode::Result<Code> {
    client::gen_fixed(f, p)
}

/// A generator of the client benchmark.
type ClientGen = fn(&mut Func, &[client::S]) -> vcode::Result<Code>;

/// The counted child: generates `n` functions in `mode`, keeping none.
pub fn child_main(mode: &str, n: usize) -> Result<(), String> {
    let client: Option<ClientGen> = match mode {
        "client_getreg" => Some(fastpath_bench_gen_client_getreg),
        "client_fixed" => Some(fastpath_bench_gen_client_fixed),
        _ => None,
    };
    if let Some(generate) = client {
        let program = client::program();
        let mut f = Func::new();
        for _ in 0..n {
            let code = generate(&mut f, &program).map_err(|e| e.to_string())?;
            std::hint::black_box(&code);
        }
        return Ok(());
    }
    let generate: fn(&mut Func) -> vcode::Result<Code> = match mode {
        "virtual" => fastpath_bench_gen_virtual,
        "fixed" => fastpath_bench_gen_fixed,
        "empty" => fastpath_bench_gen_empty,
        "empty_framed" => fastpath_bench_gen_empty_framed,
        "branchy_virtual" => fastpath_bench_gen_branchy_virtual,
        "branchy_fixed" => fastpath_bench_gen_branchy_fixed,
        other => {
            return Err(format!(
                "{CHILD_ENV}={other:?}: expected one of {MODES:?} or {EXTRA_MODES:?}"
            ));
        }
    };
    let mut f = Func::new();
    for _ in 0..n {
        let code = generate(&mut f).map_err(|e| e.to_string())?;
        std::hint::black_box(&code);
    }
    Ok(())
}

/// The vcode instructions (labels included) of one function of every
/// mode, counted by the reference backend.
pub fn instruction_counts() -> vcode::Result<Vec<(&'static str, usize)>> {
    let (v, x, e) = workload::instruction_counts()?;
    let b = workload::branchy_count()?;
    let ef = workload::empty_framed(&mut Func::<vcode::Reference>::with_backend())?.len();
    let p = client::program();
    let mut r = Func::<vcode::Reference>::with_backend();
    let cg = client::gen_getreg(&mut r, &p)?.len();
    let cf = client::gen_fixed(&mut r, &p)?.len();
    Ok(vec![
        ("virtual", v),
        ("fixed", x),
        ("empty", e),
        ("empty_framed", ef),
        ("branchy_virtual", b),
        ("branchy_fixed", b),
        ("client_getreg", cg),
        ("client_fixed", cf),
    ])
}

/// One counted run.
#[derive(Clone, Debug)]
pub struct Count {
    /// The workload variant.
    pub mode: &'static str,
    /// Host instructions executed inside the generation function, over all functions.
    pub ir: u64,
}

/// Why the counts could not be taken (valgrind missing, a failed run).
#[derive(Debug)]
pub struct Skip(pub String);

/// Runs `exe args...` under callgrind once per mode, as the counted
/// child, and returns the totals.
pub fn measure(exe: &Path, args: &[std::ffi::OsString]) -> Result<Vec<Count>, Skip> {
    match Command::new("valgrind").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => {
            return Err(Skip(
                "valgrind is not installed (apt-get install valgrind); callgrind counts skipped"
                    .into(),
            ));
        }
    }
    let mut out = Vec::new();
    for mode in MODES {
        let file = std::env::temp_dir().join(format!(
            "fastpath-callgrind-{}-{mode}.out",
            std::process::id()
        ));
        let run = Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!("--toggle-collect=fastpath_bench_gen_{mode}"))
            .arg(format!("--callgrind-out-file={}", file.display()))
            .arg(exe)
            .args(args)
            .env(CHILD_ENV, mode)
            .output()
            .map_err(|e| Skip(format!("running valgrind: {e}")))?;
        if !run.status.success() {
            return Err(Skip(format!(
                "callgrind run of {mode} failed ({}): {}",
                run.status,
                String::from_utf8_lossy(&run.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            )));
        }
        let text = std::fs::read_to_string(&file)
            .map_err(|e| Skip(format!("reading {}: {e}", file.display())))?;
        let _ = std::fs::remove_file(&file);
        let ir = parse_total(&text)
            .ok_or_else(|| Skip(format!("no totals line in {}", file.display())))?;
        out.push(Count { mode, ir });
    }
    Ok(out)
}

/// The event total of a callgrind output file (`totals:` or `summary:`).
pub fn parse_total(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_totals() {
        assert_eq!(
            parse_total("events: Ir\nfn=x\n1 2\ntotals: 12345\n"),
            Some(12345)
        );
        assert_eq!(parse_total("summary: 77\n"), Some(77));
        assert_eq!(parse_total("events: Ir\n"), None);
    }

    #[test]
    fn the_child_generates() {
        for m in MODES.iter().chain(&EXTRA_MODES) {
            child_main(m, 3).unwrap();
        }
        assert!(child_main("nope", 1).is_err());
    }
}
