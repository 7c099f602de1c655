//! `fastpath bench jive`: the benchmark suite of the U-Net/SLE paper (§4),
//! run side by side by jive's interpreter, jive's JIT, HotSpot's interpreter
//! (`java -Xint`) and HotSpot with its default JIT (C2 once warm), on the
//! same class file (`applets/src/Bench.java`, compiled by jive's build
//! script).
//!
//! # How it measures
//!
//! All four engines run in one interleaved run: both JVMs stay up
//! (`applets/harness/BenchHarness.java --serve`, warmed, JVM startup
//! excluded) and time one benchmark per request, so each round takes one
//! sample of every benchmark on every engine moments apart, the engines'
//! order rotating from benchmark to benchmark. Both sides measure the CPU
//! time of the benchmarking thread. Each figure is the **median over the
//! stated number of rounds**, never the best, and the tables give the
//! spread (half the interquartile range) in the JSON output.
//!
//! Micro-benchmarks report nanoseconds per operation with the null loop
//! subtracted, as the paper does, but in pairs: every micro sample is taken
//! right beside a sample of the null loop on the same engine, and the figure
//! is the median of those paired differences, so a change of machine
//! conditions between rounds cancels instead of landing in the difference.
//! Macro-benchmarks report microseconds per execution.
//!
//! A figure that comes out impossible (a median over fewer valid samples
//! than stated, a negative time or difference, a cost below the timer's
//! resolution or below 0.01 ns per operation, a difference within the
//! spread of its samples, a ratio whose denominator is one of these or
//! noise) is remeasured up to [`MAX_REMEASURES`] times with fresh rounds,
//! and if still impossible printed as `n/a` with the reason
//! ([`crate::bench_figures`]), never as a value or a PASS/MISS.
//!
//! Jive runs each benchmark with fuel metering off and on, in alternating
//! order, so the tables also give each engine's cost of metering (the
//! median of the rounds' paired on/off ratios), and the load, verify and
//! compile time of the paper's Figure 2 applet and of the benchmark class.
//!
//! The paper's targets are judged at the end, each PASS, MISS or n/a (some
//! row could not be measured): the JIT at least 10x the interpreter on each
//! micro benchmark, within 1.5x of C2's time on each macro benchmark, fuel
//! metering on the JIT at most 5%, and load + verify + compile of RawUnet
//! at most 100 µs. Where the JIT cannot run (no native backend, or it
//! refuses the class), its column says why and the rest of the suite runs.
//!
//! `--quick` runs 5 rounds of shorter loops (a smoke test, seconds); `--json`
//! prints every row, figure, ratio and verdict (or `null` with the reason)
//! as one JSON object on standard output instead of the tables.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use jive::{Applet, Engine, Limits, LoadError, Method, Natives};
use serde_json::{Value, json};

use crate::bench_figures::{
    Figure, MIN_NS_PER_OP, NotMeasured, difference_figure, median_figure, ratio, times,
};

/// (row name, method) of the micro-benchmarks; the first is the null loop.
const MICRO: &[(&str, &str)] = &[
    ("null-loop", "nullLoop"),
    ("null-call", "nullCall"),
    ("field-read", "fieldRead"),
    ("field-write", "fieldWrite"),
    ("array-read", "arrayRead"),
    ("array-write", "arrayWrite"),
    ("math", "math"),
    ("math-field", "mathField"),
    ("math-array", "mathArray"),
];

/// (name, method, n, repetitions per sample).
const MACRO: &[(&str, &str, i32, u32)] = &[
    ("qsort (1000, reversed)", "qsortReverse", 1000, 200),
    ("rand (1000 numbers)", "rand", 1000, 200),
    ("fibonacci (first 40)", "fibonacci", 40, 20_000),
];

/// The JIT runs each benchmark this many times as often per sample as the
/// interpreter, so that its timed stretches are about as long (some ms, well
/// above the clock's and the scheduler's noise) rather than about as many
/// calls.
const JIT_REPS_FACTOR: u32 = 10;

/// How many times a figure that came out impossible is measured again.
pub const MAX_REMEASURES: u32 = 2;

/// The paper's targets: JIT speedup over the interpreter on micro rows (at
/// least), JIT time over C2's on macro rows (at most), fuel metering cost on
/// the JIT in percent (at most), RawUnet load+verify+compile in µs (at most).
const TARGET_MICRO_SPEEDUP: f64 = 10.0;
const TARGET_MACRO_VS_C2: f64 = 1.5;
const TARGET_FUEL_PERCENT: f64 = 5.0;
const TARGET_LOAD_US: f64 = 100.0;

/// What `fastpath bench jive` was asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// One JSON object on standard output instead of the tables.
    pub json: bool,
    /// Fewer rounds of shorter loops: a smoke test, not a measurement to quote.
    pub quick: bool,
}

/// The sizes of a run.
#[derive(Debug, Clone, Copy)]
struct Config {
    /// Samples per figure (rounds).
    rounds: usize,
    /// The micro-benchmarks' loop count.
    micro_n: i32,
    /// Calls per micro sample.
    micro_reps: u32,
    /// Divides the macro-benchmarks' calls per sample.
    macro_div: u32,
    /// Samples of each load time.
    load_samples: usize,
}

impl Config {
    fn new(quick: bool) -> Config {
        if quick {
            Config {
                rounds: 5,
                micro_n: 100_000,
                micro_reps: 2,
                macro_div: 10,
                load_samples: 51,
            }
        } else {
            Config {
                rounds: 15,
                micro_n: 1_000_000,
                micro_reps: 5,
                macro_div: 1,
                load_samples: 2001,
            }
        }
    }
}

/// (method, argument n, calls per sample).
type Spec = (String, i32, u32);

/// The engines, in column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    Int,
    Jit,
    Xint,
    C2,
}

const PEERS: [Peer; 4] = [Peer::Int, Peer::Jit, Peer::Xint, Peer::C2];

impl Peer {
    fn column(self) -> &'static str {
        match self {
            Peer::Int => "jive-int",
            Peer::Jit => "jive-JIT",
            Peer::Xint => "java-Xint",
            Peer::C2 => "java-C2",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Peer::Int => "jive_int",
            Peer::Jit => "jive_jit",
            Peer::Xint => "java_xint",
            Peer::C2 => "java_c2",
        }
    }
}

/// CPU time of the calling thread in ns. CPU time rather than wall time,
/// because this machine is shared: a preempted benchmark would otherwise be
/// charged for other processes' work. The HotSpot harness measures the same
/// (`ThreadMXBean.getCurrentThreadCpuTime`). NaN if the clock fails, which
/// makes the sample invalid.
fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call,
    // and CLOCK_THREAD_CPUTIME_ID is supported by Linux for the calling thread.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// The finest step the thread clock shows, in ns: the median over 31 tries of
/// the first change seen when reading it in a loop (which includes the cost
/// of a read).
fn timer_resolution_ns() -> f64 {
    let mut steps: Vec<f64> = (0..31)
        .map(|_| {
            let a = thread_cpu_ns();
            let started = Instant::now();
            loop {
                let b = thread_cpu_ns();
                if b != a || started.elapsed().as_millis() > 10 {
                    return b - a;
                }
            }
        })
        .filter(|s| s.is_finite() && *s > 0.0)
        .collect();
    steps.sort_by(f64::total_cmp);
    steps.get(steps.len() / 2).copied().unwrap_or(1000.0)
}

/// ns per call of `method(n)` in jive over `reps` calls (NaN if the call
/// fails, which makes the sample invalid; the warm-up has already run every
/// benchmark once, so it does not).
fn jive_once(applet: &mut Applet, method: &Method, n: i32, reps: u32) -> f64 {
    let t = thread_cpu_ns();
    for _ in 0..reps {
        if applet.call(method, &[n], None).is_err() {
            return f64::NAN;
        }
    }
    (thread_cpu_ns() - t) / f64::from(reps)
}

/// One engine's pair of applets: the benchmark class with metering off and
/// on, and each spec's method resolved in both.
struct Pair {
    off: Applet,
    on: Applet,
    methods: Vec<(Method, Method)>,
}

/// Loads the benchmark class twice (metering off and on) on `engine` and
/// resolves the specs' methods. A class the JIT refuses is `Ok(Err(reason))`.
fn load_pair(
    bench: &[u8],
    heap: Limits,
    engine: Engine,
    specs: &[Spec],
) -> Result<Result<Pair, String>, String> {
    let load =
        |limits: Limits| match Applet::load_with_engine(bench, &Natives::new(), limits, engine) {
            Ok(a) => Ok(Ok(a)),
            Err(LoadError::Jit(e)) => Ok(Err(e.to_string())),
            Err(e) => Err(format!("Bench.class: {e}")),
        };
    let off = match load(heap)? {
        Ok(a) => a,
        Err(why) => return Ok(Err(why)),
    };
    let on = match load(Limits {
        fuel: Some(u64::MAX / 2),
        ..heap
    })? {
        Ok(a) => a,
        Err(why) => return Ok(Err(why)),
    };
    if engine != Engine::Tiered && (off.engine() != engine || on.engine() != engine) {
        return Err(format!(
            "asked for the {} engine, the applet runs on the {}",
            engine_name(engine),
            engine_name(off.engine())
        ));
    }
    let mut methods = Vec::with_capacity(specs.len());
    for (m, ..) in specs {
        let resolve = |a: &Applet| a.method(m).map_err(|e| format!("Bench.{m}: {e}"));
        methods.push((resolve(&off)?, resolve(&on)?));
    }
    Ok(Ok(Pair { off, on, methods }))
}

fn engine_name(e: Engine) -> &'static str {
    match e {
        Engine::Interpreter => "interpreter",
        Engine::Jit => "JIT",
        Engine::Tiered => "tiered",
    }
}

/// A call's result as a person reads it.
fn shown(r: &Result<jive::Outcome, jive::InvokeError>) -> String {
    match r {
        Ok(o) => format!(
            "{} (fuel used {})",
            o.value.map_or("void".to_string(), |v| v.to_string()),
            o.fuel_used
        ),
        Err(e) => format!("error: {e}"),
    }
}

/// The warm-up: calls every spec once in both applets of the interpreter's
/// pair and, in lockstep (so that both have the same history: `fieldRead`
/// reads what `fieldWrite` left), of the JIT's, checking that the JIT's
/// results and fuel used are the interpreter's: a JIT that computes
/// something else is not benchmarked. An interpreter failure is the outer
/// error; the JIT's first disagreement or failure is the inner one.
fn warm_up(
    interp: &mut Pair,
    mut jit: Option<&mut Pair>,
    specs: &[Spec],
) -> Result<Result<(), String>, String> {
    let mut jit_ok = Ok(());
    for (i, (m, n, _)) in specs.iter().enumerate() {
        let (off, on) = interp.methods[i];
        let a = interp.off.call(&off, &[*n], None);
        let b = interp.on.call(&on, &[*n], None);
        if let (Some(j), Ok(())) = (jit.as_deref_mut(), &jit_ok) {
            let (j_off, j_on) = j.methods[i];
            let ja = j.off.call(&j_off, &[*n], None);
            let jb = j.on.call(&j_on, &[*n], None);
            if ja != a {
                jit_ok = Err(format!(
                    "disagrees with the interpreter on {m}({n}) unmetered: {} vs {}",
                    shown(&ja),
                    shown(&a)
                ));
            } else if jb != b {
                jit_ok = Err(format!(
                    "disagrees with the interpreter on {m}({n}) metered: {} vs {}",
                    shown(&jb),
                    shown(&b)
                ));
            }
        }
        a.map_err(|e| format!("Bench.{m}({n}): {e}"))?;
        b.map_err(|e| format!("Bench.{m}({n}) metered: {e}"))?;
    }
    Ok(jit_ok)
}

/// A running `BenchHarness --serve`: HotSpot with every spec warm, timing
/// one spec per request.
struct Jvm {
    what: &'static str,
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Jvm {
    fn start(
        java: &str,
        flags: &[&str],
        dir: &Path,
        specs: &[Spec],
        what: &'static str,
    ) -> Result<Jvm, String> {
        let mut cmd = Command::new(java);
        cmd.args(flags)
            .arg("-cp")
            .arg(dir)
            .arg("BenchHarness")
            .arg("--serve");
        for (m, n, reps) in specs {
            cmd.arg(format!("{m}:{n}:{reps}"));
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {java} ({what}): {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(format!("{java} ({what}): no pipe to the harness"));
        };
        Ok(Jvm {
            what,
            child,
            stdin,
            out: BufReader::new(stdout),
        })
    }

    /// One line of the harness's output.
    fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.out.read_line(&mut line) {
            Ok(0) => Err(format!(
                "the {} harness exited early ({})",
                self.what,
                self.child
                    .wait()
                    .map_or("status unknown".into(), |s| s.to_string())
            )),
            Ok(_) => Ok(line),
            Err(e) => Err(format!("reading the {} harness: {e}", self.what)),
        }
    }

    /// Waits for the warm-up to finish.
    fn ready(&mut self) -> Result<(), String> {
        let line = self.line()?;
        if line.trim() == "ready" {
            Ok(())
        } else {
            Err(format!(
                "the {} harness said {:?} instead of ready",
                self.what,
                line.trim()
            ))
        }
    }

    /// ns per call of spec `k`, one sample.
    fn time(&mut self, k: usize) -> Result<f64, String> {
        writeln!(self.stdin, "{k}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("writing to the {} harness: {e}", self.what))?;
        let line = self.line()?;
        line.split_whitespace()
            .next()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| {
                format!(
                    "the {} harness answered {:?}, not a time",
                    self.what,
                    line.trim()
                )
            })
    }
}

impl Drop for Jvm {
    fn drop(&mut self) {
        // A harness that does not read "quit" is killed.
        if writeln!(self.stdin, "quit")
            .and_then(|()| self.stdin.flush())
            .is_err()
        {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// The samples of one engine, by spec: ns per call with metering on (or
/// HotSpot's only mode), with metering off (jive only), and of the null loop
/// taken beside each micro sample.
#[derive(Clone, Default)]
struct Samples {
    on: Vec<Vec<f64>>,
    off: Vec<Vec<f64>>,
    null: Vec<Vec<f64>>,
}

impl Samples {
    fn new(specs: usize) -> Samples {
        Samples {
            on: vec![Vec::new(); specs],
            off: vec![Vec::new(); specs],
            null: vec![Vec::new(); specs],
        }
    }

    fn clear(&mut self, k: usize) {
        self.on[k].clear();
        self.off[k].clear();
        self.null[k].clear();
    }
}

/// Everything that takes samples: the jive pairs and the two JVMs.
struct Bench {
    specs: Vec<Spec>,
    interp: Pair,
    jit: Result<Pair, String>,
    xint: Jvm,
    c2: Jvm,
    samples: [Samples; 4],
    /// Samples taken so far, to alternate the order of paired runs.
    taken: u64,
}

impl Bench {
    fn is_micro(k: usize) -> bool {
        k < MICRO.len()
    }

    /// One sample of spec `k` on `peer` (and, for a micro spec after the null
    /// loop, one of the null loop right beside it; for jive, one with
    /// metering off beside the one with it on), order alternating.
    fn sample(&mut self, peer: Peer, k: usize) -> Result<(), String> {
        let flip = self.taken % 2 == 1;
        self.taken += 1;
        let with_null = Self::is_micro(k) && k > 0;
        let s = &mut self.samples[PEERS.iter().position(|p| *p == peer).unwrap_or(0)];
        match peer {
            Peer::Int | Peer::Jit => {
                let (pair, factor) = match peer {
                    Peer::Int => (&mut self.interp, 1),
                    _ => match &mut self.jit {
                        Ok(p) => (p, JIT_REPS_FACTOR),
                        Err(_) => return Ok(()),
                    },
                };
                let (_, n, reps) = self.specs[k];
                let reps = reps * factor;
                let (m_off, m_on) = pair.methods[k];
                let (null_n, null_reps) = (self.specs[0].1, self.specs[0].2 * factor);
                let m_null = pair.methods[0].1;
                let null = |on: &mut Applet| {
                    if with_null {
                        jive_once(on, &m_null, null_n, null_reps)
                    } else {
                        f64::NAN
                    }
                };
                let (t_off, t_on, t_null) = if flip {
                    let z = null(&mut pair.on);
                    let b = jive_once(&mut pair.on, &m_on, n, reps);
                    (jive_once(&mut pair.off, &m_off, n, reps), b, z)
                } else {
                    let a = jive_once(&mut pair.off, &m_off, n, reps);
                    let b = jive_once(&mut pair.on, &m_on, n, reps);
                    (a, b, null(&mut pair.on))
                };
                s.on[k].push(t_on);
                s.off[k].push(t_off);
                if with_null {
                    s.null[k].push(t_null);
                }
            }
            Peer::Xint | Peer::C2 => {
                let jvm = if peer == Peer::Xint {
                    &mut self.xint
                } else {
                    &mut self.c2
                };
                let (t, z) = if with_null && flip {
                    let z = jvm.time(0)?;
                    (jvm.time(k)?, z)
                } else if with_null {
                    let t = jvm.time(k)?;
                    (t, jvm.time(0)?)
                } else {
                    (jvm.time(k)?, f64::NAN)
                };
                s.on[k].push(t);
                if with_null {
                    s.null[k].push(z);
                }
            }
        }
        Ok(())
    }

    /// `rounds` samples of each `(peer, spec)` in `which`: round by round,
    /// each round one sample of each, the peers' order rotating.
    fn rounds(
        &mut self,
        which: &[(Peer, usize)],
        rounds: usize,
        progress: &Progress,
    ) -> Result<(), String> {
        for r in 0..rounds {
            for (i, &(peer, k)) in which.iter().enumerate() {
                // Rotate by round, so no engine always runs first on a spec.
                let (peer, k) = if which.len() > 1 {
                    let j = (i + r) % which.len();
                    which[j]
                } else {
                    (peer, k)
                };
                self.sample(peer, k)?;
                progress.tick();
            }
        }
        Ok(())
    }
}

/// Progress on standard error: a bar on a terminal, a line per step
/// otherwise (or nothing, for `--json` into a pipe, where a line per round
/// still goes out).
struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new() -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(0);
            if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} samples")
            {
                b.set_style(style.progress_chars("=> "));
            }
            b
        });
        Progress { bar }
    }

    /// A new step of `len` samples.
    fn step(&self, what: &str, len: u64) {
        match &self.bar {
            Some(b) => {
                b.set_message(what.to_string());
                b.set_length(len);
                b.set_position(0);
            }
            None => eprintln!("{what} ({len} samples) ..."),
        }
    }

    fn tick(&self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    fn note(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// A row's figures by engine (column order of [`PEERS`]).
type Row = [Figure; 4];

/// The figures of one engine's spec `k`: the micro cost (ns per operation,
/// null loop subtracted; ns per iteration for the null loop) or the macro
/// time (µs per execution).
fn figure(s: &Samples, k: usize, reps: u32, cfg: &Config, resolution: f64) -> Figure {
    let n = f64::from(cfg.micro_n);
    if k == 0 {
        // The clock's step over a sample's calls, per iteration.
        let res = (resolution / f64::from(reps) / n).max(MIN_NS_PER_OP);
        let per_iter: Vec<f64> = s.on[0].iter().map(|t| t / n).collect();
        median_figure(&per_iter, cfg.rounds, res)
    } else if Bench::is_micro(k) {
        let res = (resolution / f64::from(reps) / n).max(MIN_NS_PER_OP);
        difference_figure(&s.on[k], &s.null[k], cfg.rounds, n, res)
    } else {
        median_figure(&s.on[k], cfg.rounds, resolution / f64::from(reps)).scaled(1e-3)
    }
}

/// The cost of metering in percent: the median over rounds of each round's
/// on/off ratio, minus one. Not a value if fewer than `want` rounds have both
/// samples, if it is no larger than the spread of the rounds' ratios (noise
/// around zero: code placement can favour either form), or if it is
/// negative by more than that spread (metering cannot make code faster; such
/// a figure measured the machine, not the metering).
fn fuel_figure(s: &Samples, k: usize, want: usize) -> Figure {
    let r: Vec<f64> = s.on[k]
        .iter()
        .zip(&s.off[k])
        .filter(|(a, b)| a.is_finite() && b.is_finite() && **b > 0.0)
        .map(|(a, b)| (a / b - 1.0) * 100.0)
        .collect();
    difference_figure(&r, &vec![0.0; r.len()], want, 1.0, FUEL_RESOLUTION_PERCENT)
}

/// The least fuel cost, in percent, taken as measured: a CPU-time ratio
/// of stretches some ms long does not resolve less.
const FUEL_RESOLUTION_PERCENT: f64 = 0.01;

/// A row's verdict against a target: PASS, MISS, or none when the figure
/// is not a value.
fn verdict(f: &Figure, pass: impl Fn(f64) -> bool) -> Option<bool> {
    f.value().map(pass)
}

fn verdict_word(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "PASS",
        Some(false) => "MISS",
        None => "n/a",
    }
}

/// One of the paper's targets, judged over its rows: MISS if a judged row
/// misses, PASS if every row was judged and passed, n/a otherwise.
struct Target {
    what: String,
    verdict: Option<bool>,
    detail: String,
}

fn judge(what: String, rows: &[(&str, Option<bool>)], extreme: String) -> Target {
    let missed: Vec<&str> = rows
        .iter()
        .filter(|(_, v)| *v == Some(false))
        .map(|(n, _)| *n)
        .collect();
    let unjudged: Vec<&str> = rows
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| *n)
        .collect();
    let (verdict, detail) = if !missed.is_empty() {
        (
            Some(false),
            format!("missed on {}; {extreme}", missed.join(", ")),
        )
    } else if !unjudged.is_empty() {
        (
            None,
            format!("not measurable on {}; {extreme}", unjudged.join(", ")),
        )
    } else {
        (Some(true), extreme)
    };
    Target {
        what,
        verdict,
        detail,
    }
}

/// Footnotes for the `n/a` cells of the text tables.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    /// `format(value)` or `n/a[i]`, with note i giving `label` and the reason.
    fn cell(&mut self, f: &Figure, label: &str, format: impl Fn(f64) -> String) -> String {
        match f {
            Figure::Value { value, .. } => format(*value),
            Figure::NotMeasured(r) => {
                self.0.push(format!("{label}: {r}"));
                format!("n/a[{}]", self.0.len())
            }
        }
    }

    fn print(&mut self) {
        for (i, n) in self.0.iter().enumerate() {
            println!("  [{}] {n}", i + 1);
        }
        self.0.clear();
    }
}

/// A figure in the JSON output: its value and spread, or `null` and the
/// reason.
fn fig_json(f: &Figure) -> Value {
    match f {
        Figure::Value { value, spread } => json!({ "value": value, "spread": spread }),
        Figure::NotMeasured(r) => json!({ "value": null, "reason": r.to_string() }),
    }
}

fn verdict_json(v: Option<bool>) -> Value {
    match v {
        Some(p) => json!(if p { "PASS" } else { "MISS" }),
        None => Value::Null,
    }
}

/// Runs the suite and prints the tables (or the JSON object).
pub fn run(opts: Options) -> ExitCode {
    match run_inner(opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fastpath bench jive: {e}");
            if opts.json {
                crate::print_json_error("bench jive", &e);
            }
            ExitCode::FAILURE
        }
    }
}

fn run_inner(opts: Options) -> Result<(), String> {
    let Some(dir) = jive::APPLET_CLASSES else {
        return Err("the benchmark applets were not compiled because javac was missing when jive was built; \
                    install a JDK (e.g. apt-get install openjdk-17-jdk-headless) and rebuild"
            .into());
    };
    let cfg = Config::new(opts.quick);
    let dir = PathBuf::from(dir).join("harness");
    let java = std::env::var("JAVA").unwrap_or_else(|_| "java".into());
    let bench = std::fs::read(dir.join("Bench.class")).map_err(|e| format!("Bench.class: {e}"))?;
    let rawunet =
        std::fs::read(dir.join("RawUnet.class")).map_err(|e| format!("RawUnet.class: {e}"))?;

    let heap = Limits {
        heap_bytes: 16 << 20,
        ..Limits::unmetered()
    };
    let mut specs: Vec<Spec> = MICRO
        .iter()
        .map(|(_, m)| (m.to_string(), cfg.micro_n, cfg.micro_reps))
        .collect();
    specs.extend(
        MACRO
            .iter()
            .map(|&(_, m, n, reps)| (m.to_string(), n, (reps / cfg.macro_div).max(1))),
    );

    let progress = Progress::new();
    progress.note("starting java -Xint and java (C2) with the harness, loading jive ...");
    // Both JVMs warm up while jive loads and warms up.
    let mut xint = Jvm::start(&java, &["-Xint"], &dir, &specs, "java -Xint")?;
    let mut c2 = Jvm::start(&java, &[], &dir, &specs, "java (C2)")?;
    let mut interp = load_pair(&bench, heap, Engine::Interpreter, &specs)?
        .map_err(|e| format!("the interpreter refused Bench.class: {e}"))?;
    let mut jit = load_pair(&bench, heap, Engine::Jit, &specs)?;
    if let Err(why) = warm_up(&mut interp, jit.as_mut().ok(), &specs)? {
        jit = Err(why);
    }
    xint.ready()?;
    c2.ready()?;
    if let Err(why) = &jit {
        progress.note(&format!("jive JIT unavailable: {why}"));
    }
    let resolution = timer_resolution_ns();

    let mut b = Bench {
        specs: specs.clone(),
        interp,
        jit,
        xint,
        c2,
        samples: std::array::from_fn(|_| Samples::new(specs.len())),
        taken: 0,
    };
    let all: Vec<(Peer, usize)> = (0..specs.len())
        .flat_map(|k| PEERS.iter().map(move |p| (*p, k)))
        .collect();
    progress.step(
        &format!(
            "{} interleaved rounds of every benchmark on the four engines",
            cfg.rounds
        ),
        (all.len() * cfg.rounds) as u64,
    );
    b.rounds(&all, cfg.rounds, &progress)?;

    let reps_of = |p: Peer, k: usize| specs[k].2 * if p == Peer::Jit { JIT_REPS_FACTOR } else { 1 };
    let jit_err = b.jit.as_ref().err().cloned();
    let compute = |b: &Bench, p: usize, k: usize| -> Figure {
        let peer = PEERS[p];
        if let (Peer::Jit, Some(why)) = (peer, &jit_err) {
            return Figure::NotMeasured(NotMeasured::Unavailable(format!(
                "JIT unavailable: {why}"
            )));
        }
        figure(&b.samples[p], k, reps_of(peer, k), &cfg, resolution)
    };
    let mut figs: Vec<Row> = (0..specs.len())
        .map(|k| std::array::from_fn(|p| compute(&b, p, k)))
        .collect();

    // Remeasure what came out impossible, a bounded number of times.
    let mut remeasured: Vec<(Peer, usize, u32)> = Vec::new();
    for attempt in 1..=MAX_REMEASURES {
        let again: Vec<(Peer, usize)> = (0..specs.len())
            .flat_map(|k| (0..4).map(move |p| (PEERS[p], k)))
            .filter(|&(peer, k)| {
                let p = PEERS.iter().position(|q| *q == peer).unwrap_or(0);
                figs[k][p].reason().is_some_and(NotMeasured::remeasurable)
            })
            .collect();
        if again.is_empty() {
            break;
        }
        progress.step(
            &format!(
                "remeasuring {} figures that came out impossible (attempt {attempt} of {MAX_REMEASURES})",
                again.len()
            ),
            (again.len() * cfg.rounds) as u64,
        );
        for &(peer, k) in &again {
            let p = PEERS.iter().position(|q| *q == peer).unwrap_or(0);
            b.samples[p].clear(k);
            match remeasured
                .iter_mut()
                .find(|(q, j, _)| *q == peer && *j == k)
            {
                Some(r) => r.2 = attempt,
                None => remeasured.push((peer, k, attempt)),
            }
        }
        b.rounds(&again, cfg.rounds, &progress)?;
        for &(peer, k) in &again {
            let p = PEERS.iter().position(|q| *q == peer).unwrap_or(0);
            figs[k][p] = compute(&b, p, k);
        }
    }
    progress.finish();

    let fuel: Vec<[Figure; 2]> = (0..specs.len())
        .map(|k| {
            [
                fuel_figure(&b.samples[0], k, cfg.rounds),
                match &jit_err {
                    Some(why) => Figure::NotMeasured(NotMeasured::Unavailable(format!(
                        "JIT unavailable: {why}"
                    ))),
                    None => fuel_figure(&b.samples[1], k, cfg.rounds),
                },
            ]
        })
        .collect();
    let jit_load = match &jit_err {
        None => Ok(()),
        Some(why) => Err(why.clone()),
    };
    drop(b);

    let version = Command::new(&java)
        .arg("-version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let load = load_times(&rawunet, &bench, &cfg, resolution, &progress)?;
    let report = Report {
        cfg,
        version,
        jit: jit_load,
        resolution,
        figs,
        fuel,
        remeasured,
        load,
    };
    if opts.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.json())
                .map_err(|e| format!("writing the JSON output: {e}"))?
        );
    } else {
        report.print();
    }
    Ok(())
}

/// Everything a run measured, ready to print as tables or JSON.
struct Report {
    cfg: Config,
    version: String,
    jit: Result<(), String>,
    resolution: f64,
    figs: Vec<Row>,
    fuel: Vec<[Figure; 2]>,
    remeasured: Vec<(Peer, usize, u32)>,
    load: LoadTimes,
}

/// A micro or macro row's ratios and verdict.
struct Judged {
    int_xint: Figure,
    int_c2: Figure,
    /// int/JIT on micro rows, JIT/C2 on macro rows.
    target: Figure,
    verdict: Option<bool>,
}

impl Report {
    fn row_name(k: usize) -> &'static str {
        if k < MICRO.len() {
            MICRO[k].0
        } else {
            MACRO[k - MICRO.len()].0
        }
    }

    fn judged(&self, k: usize) -> Judged {
        let f = &self.figs[k];
        let (int_xint, int_c2) = (ratio(&f[0], &f[2]), ratio(&f[0], &f[3]));
        if k < MICRO.len() {
            let target = ratio(&f[0], &f[1]);
            let verdict = verdict(&target, |s| s >= TARGET_MICRO_SPEEDUP);
            Judged {
                int_xint,
                int_c2,
                target,
                verdict,
            }
        } else {
            let target = ratio(&f[1], &f[3]);
            let verdict = verdict(&target, |r| r <= TARGET_MACRO_VS_C2);
            Judged {
                int_xint,
                int_c2,
                target,
                verdict,
            }
        }
    }

    /// A cost within the noise passes if even the noise's far edge is
    /// within the target.
    fn fuel_verdict(&self, k: usize) -> Option<bool> {
        match &self.fuel[k][1] {
            Figure::NotMeasured(NotMeasured::WithinNoise { value, spread })
                if value.abs() + spread <= TARGET_FUEL_PERCENT =>
            {
                Some(true)
            }
            f => verdict(f, |c| c <= TARGET_FUEL_PERCENT),
        }
    }

    fn targets(&self) -> Vec<Target> {
        let micro: Vec<(&str, Option<bool>)> = (0..MICRO.len())
            .map(|k| (Self::row_name(k), self.judged(k).verdict))
            .collect();
        let lowest = (0..MICRO.len())
            .filter_map(|k| Some((Self::row_name(k), self.judged(k).target.value()?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map_or("no row measured".into(), |(n, v)| {
                format!("lowest: {n} {}", times(v))
            });
        let macro_rows: Vec<(&str, Option<bool>)> = (MICRO.len()..self.figs.len())
            .map(|k| (Self::row_name(k), self.judged(k).verdict))
            .collect();
        let highest = (MICRO.len()..self.figs.len())
            .filter_map(|k| Some((Self::row_name(k), self.judged(k).target.value()?)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or("no row measured".into(), |(n, v)| {
                format!("highest: {n} {} C2's time", times(v))
            });
        let fuel_rows: Vec<(&str, Option<bool>)> = (0..self.figs.len())
            .map(|k| (Self::row_name(k), self.fuel_verdict(k)))
            .collect();
        let fuel_highest = (0..self.figs.len())
            .filter_map(|k| Some((Self::row_name(k), self.fuel[k][1].value()?)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or("no row measured".into(), |(n, v)| {
                format!("highest: {n} {v:+.1}%")
            });
        let l = &self.load;
        let load_verdict = verdict(&l.fig2_jit, |ns| ns / 1e3 <= TARGET_LOAD_US);
        let load_detail = match (&l.fig2_jit, &l.compile) {
            (Figure::Value { value, .. }, c) => format!(
                "{:.1} us = {} load+verify + {} compile",
                value / 1e3,
                l.fig2.cell(|v| format!("{:.1} us", v / 1e3)),
                c.cell(|v| format!("{:.1} us", v / 1e3))
            ),
            (Figure::NotMeasured(r), _) => r.to_string(),
        };
        vec![
            judge(
                format!(
                    "JIT at least {TARGET_MICRO_SPEEDUP:.0}x the interpreter on each micro benchmark"
                ),
                &micro,
                lowest,
            ),
            judge(
                format!(
                    "JIT time at most {TARGET_MACRO_VS_C2:.1}x C2's (speed >= {:.2}x) on each macro benchmark",
                    1.0 / TARGET_MACRO_VS_C2
                ),
                &macro_rows,
                highest,
            ),
            judge(
                format!("fuel metering on the JIT costs at most {TARGET_FUEL_PERCENT:.0}%"),
                &fuel_rows,
                fuel_highest,
            ),
            Target {
                what: format!("RawUnet load+verify+compile at most {TARGET_LOAD_US:.0} us"),
                verdict: load_verdict,
                detail: load_detail,
            },
        ]
    }

    fn print(&self) {
        let c = &self.cfg;
        let mut notes = Notes::default();
        println!(
            "jive benchmark suite (U-Net/SLE section 4); HotSpot: {}",
            self.version
        );
        if let Err(why) = &self.jit {
            println!("jive-JIT: JIT unavailable: {why}");
        }
        if c.rounds < 15 {
            println!(
                "--quick: {} rounds of shorter loops; a smoke test, not figures to quote",
                c.rounds
            );
        }
        println!();
        println!(
            "micro: ns per operation, n = {}, median over {} rounds of (op - null loop) in pairs \
             (null-loop row: ns per iteration)",
            c.micro_n, c.rounds
        );
        println!(
            "{:<14} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>17}",
            "benchmark",
            "jive-int",
            "jive-JIT",
            "java-Xint",
            "java-C2",
            "int/Xint",
            "int/C2",
            format!("int/JIT (>={TARGET_MICRO_SPEEDUP:.0}x)")
        );
        for k in 0..MICRO.len() {
            let name = Self::row_name(k);
            let j = self.judged(k);
            let cells: Vec<String> = PEERS
                .iter()
                .zip(&self.figs[k])
                .map(|(p, f)| {
                    let what = if k == 0 { "ns/iteration" } else { "ns/op" };
                    notes.cell(f, &format!("{} {name} ({what})", p.column()), |v| {
                        format!("{v:.3}")
                    })
                })
                .collect();
            let r1 = notes.cell(&j.int_xint, &format!("int/Xint {name}"), times);
            let r2 = notes.cell(&j.int_c2, &format!("int/C2 {name}"), times);
            let r3 = notes.cell(&j.target, &format!("int/JIT {name}"), times);
            let r3 = match j.verdict {
                Some(_) => format!("{r3} {}", verdict_word(j.verdict)),
                None => r3,
            };
            println!(
                "{name:<14} {:>10} {:>10} {:>10} {:>10} {r1:>9} {r2:>9} {r3:>17}",
                cells[0], cells[1], cells[2], cells[3]
            );
        }
        notes.print();

        println!();
        println!("macro: us per execution, median over {} rounds", c.rounds);
        println!(
            "{:<24} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>17}",
            "benchmark",
            "jive-int",
            "jive-JIT",
            "java-Xint",
            "java-C2",
            "int/Xint",
            "int/C2",
            format!("JIT/C2 (<={TARGET_MACRO_VS_C2:.1}x)")
        );
        for k in MICRO.len()..self.figs.len() {
            let name = Self::row_name(k);
            let j = self.judged(k);
            let cells: Vec<String> = PEERS
                .iter()
                .zip(&self.figs[k])
                .map(|(p, f)| {
                    notes.cell(f, &format!("{} {name} (us)", p.column()), |v| {
                        format!("{v:.2}")
                    })
                })
                .collect();
            let r1 = notes.cell(&j.int_xint, &format!("int/Xint {name}"), times);
            let r2 = notes.cell(&j.int_c2, &format!("int/C2 {name}"), times);
            let r3 = notes.cell(&j.target, &format!("JIT/C2 {name}"), times);
            let r3 = match j.verdict {
                Some(_) => format!("{r3} {}", verdict_word(j.verdict)),
                None => r3,
            };
            println!(
                "{name:<24} {:>10} {:>10} {:>10} {:>10} {r1:>9} {r2:>9} {r3:>17}",
                cells[0], cells[1], cells[2], cells[3]
            );
        }
        notes.print();

        println!();
        println!(
            "fuel metering cost: metering on vs off, median over {} rounds of each round's paired on/off CPU-time ratio",
            c.rounds
        );
        println!(
            "{:<24} {:>12} {:>17}",
            "benchmark",
            "interpreter",
            format!("JIT (<={TARGET_FUEL_PERCENT:.0}%)")
        );
        for k in 0..self.figs.len() {
            let name = Self::row_name(k);
            // A cost within its own noise says so in its cell.
            let mut fuel_cell = |f: &Figure, label: String| match f {
                Figure::NotMeasured(NotMeasured::WithinNoise { .. }) => "within noise".to_string(),
                f => notes.cell(f, &label, |v| format!("{v:+.1}%")),
            };
            let i = fuel_cell(&self.fuel[k][0], format!("interpreter fuel {name} (%)"));
            let j = fuel_cell(&self.fuel[k][1], format!("JIT fuel {name} (%)"));
            let j = match self.fuel_verdict(k) {
                Some(p) => format!("{j} {}", verdict_word(Some(p))),
                None => j,
            };
            println!("{name:<24} {i:>12} {j:>17}");
        }
        notes.print();

        println!();
        println!(
            "times: CPU time of the benchmarking thread; every figure a median over {} rounds in which the",
            c.rounds
        );
        println!(
            "  four engines take turns, benchmark by benchmark (the JIT makes {JIT_REPS_FACTOR}x the calls per sample)"
        );
        println!("jive-int, jive-JIT: fuel metering on (a budget the benchmark never reaches)");
        println!("java-C2: HotSpot's default tiered JIT, C2 once warm");
        println!(
            "ratios: time / time (int/Xint, int/C2, JIT/C2: below 1.00x, jive is faster); \
             int/JIT: the JIT's speedup over the interpreter"
        );
        println!(
            "n/a: not measurable after {MAX_REMEASURES} remeasures (a cost below {MIN_NS_PER_OP} ns or within the noise of the\n  \
             null loop, a negative difference, too few valid samples, or a ratio over such a figure);\n  \
             thread clock resolution {:.0} ns",
            self.resolution
        );
        if !self.remeasured.is_empty() {
            let list: Vec<String> = self
                .remeasured
                .iter()
                .map(|(p, k, n)| format!("{} {} x{n}", p.column(), Self::row_name(*k)))
                .collect();
            println!("remeasured: {}", list.join(", "));
        }
        println!(
            "  (the fuel cost compares Limits::fuel = None, the same code with no charging, against\n  \
             metering on; CPU time of this run, noisy on a shared machine; docs/benchmarks.md records\n  \
             it beside the exact callgrind instruction counts)"
        );

        println!();
        self.load.print(&self.jit, c.load_samples);

        println!();
        println!(
            "targets (the paper's: JIT speedup over the interpreter, JIT against C2, cost of fuel metering, load time):"
        );
        for t in self.targets() {
            if t.detail.is_empty() {
                println!("  {:<4} {}", verdict_word(t.verdict), t.what);
            } else {
                println!("  {:<4} {} ({})", verdict_word(t.verdict), t.what, t.detail);
            }
        }
    }

    fn json(&self) -> Value {
        let c = &self.cfg;
        let row = |k: usize| {
            let j = self.judged(k);
            let mut o = json!({ "name": Self::row_name(k) });
            for (p, f) in PEERS.iter().zip(&self.figs[k]) {
                o[p.key()] = fig_json(f);
            }
            o["int_over_xint"] = fig_json(&j.int_xint);
            o["int_over_c2"] = fig_json(&j.int_c2);
            let key = if k < MICRO.len() {
                "int_over_jit"
            } else {
                "jit_over_c2"
            };
            o[key] = fig_json(&j.target);
            o["verdict"] = verdict_json(j.verdict);
            o
        };
        let l = &self.load;
        json!({
            "suite": "jive",
            "hotspot": self.version,
            "quick": c.rounds < 15,
            "rounds": c.rounds,
            "timer_resolution_ns": self.resolution,
            "jit": match &self.jit {
                Ok(()) => json!({ "available": true }),
                Err(why) => json!({ "available": false, "reason": why }),
            },
            "micro": {
                "unit": "ns per operation, null loop subtracted (null-loop: ns per iteration)",
                "n": c.micro_n,
                "target_int_over_jit_at_least": TARGET_MICRO_SPEEDUP,
                "rows": (0..MICRO.len()).map(row).collect::<Vec<_>>(),
            },
            "macro": {
                "unit": "us per execution",
                "target_jit_over_c2_at_most": TARGET_MACRO_VS_C2,
                "rows": (MICRO.len()..self.figs.len()).map(row).collect::<Vec<_>>(),
            },
            "fuel": {
                "unit": "percent, metering on against off",
                "target_jit_at_most": TARGET_FUEL_PERCENT,
                "rows": (0..self.figs.len()).map(|k| json!({
                    "name": Self::row_name(k),
                    "interpreter": fig_json(&self.fuel[k][0]),
                    "jit": fig_json(&self.fuel[k][1]),
                    "verdict": verdict_json(self.fuel_verdict(k)),
                })).collect::<Vec<_>>(),
            },
            "load": {
                "unit": "ns, median CPU time",
                "samples": c.load_samples,
                "rawunet_check": fig_json(&l.fig2_check),
                "rawunet_load": fig_json(&l.fig2),
                "rawunet_load_jit": fig_json(&l.fig2_jit),
                "rawunet_compile": fig_json(&l.compile),
                "rawunet_compile_standalone": fig_json(&l.fig2_compile),
                "bench_check": fig_json(&l.big),
                "bench_compile_standalone": fig_json(&l.big_compile),
            },
            "remeasured": self.remeasured.iter().map(|(p, k, n)| json!({
                "engine": p.column(), "row": Self::row_name(*k), "times": n,
            })).collect::<Vec<_>>(),
            "targets": self.targets().iter().map(|t| json!({
                "target": t.what,
                "verdict": verdict_json(t.verdict),
                "detail": t.detail,
            })).collect::<Vec<_>>(),
        })
    }
}

/// The load, verify and compile times, in ns.
struct LoadTimes {
    fig2_check: Figure,
    fig2: Figure,
    fig2_jit: Figure,
    /// JIT load minus interpreter load, in pairs.
    compile: Figure,
    fig2_compile: Figure,
    big: Figure,
    big_compile: Figure,
    raw_len: usize,
    raw_code: usize,
    bench_len: usize,
    bench_code: usize,
}

/// CPU time of each of `n` runs of `f`, in ns. What `f` returns is dropped
/// after the clock stops (unloading is not part of loading).
fn samples<T, F: FnMut() -> T>(n: usize, mut f: F) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let t = thread_cpu_ns();
            let r = f();
            let dt = thread_cpu_ns() - t;
            drop(r);
            dt
        })
        .collect()
}

/// Measures the load, verify and compile times of RawUnet and Bench.
fn load_times(
    rawunet: &[u8],
    bench: &[u8],
    cfg: &Config,
    resolution: f64,
    progress: &Progress,
) -> Result<LoadTimes, String> {
    let n = Natives::figure2_stubs();
    let limits = Limits::default();
    let load = |engine| Applet::load_with_engine(rawunet, &n, limits, engine);
    load(Engine::Interpreter).map_err(|e| format!("RawUnet.class: {e}"))?;
    let jit = match load(Engine::Jit) {
        Ok(_) => Ok(()),
        Err(LoadError::Jit(e)) => Err(format!("JIT unavailable: {e}")),
        Err(e) => return Err(format!("RawUnet.class: {e}")),
    };
    let code_bytes = |b: &[u8]| jive::check(b, &limits).map(|p| p.code_bytes);
    let raw_code = code_bytes(rawunet).map_err(|e| format!("RawUnet.class: {e}"))?;
    let bench_code = code_bytes(bench).map_err(|e| format!("Bench.class: {e}"))?;
    let m = cfg.load_samples;
    let fig = |s: &[f64]| median_figure(s, m, resolution);
    let unavailable = |why: &str| Figure::NotMeasured(NotMeasured::Unavailable(why.to_string()));
    progress.step("load, verify and compile times", 1);

    let fig2_check = fig(&samples(m, || jive::check(rawunet, &limits)));
    // Interpreter and JIT loads alternate, so that the compile time (their
    // difference) is taken in pairs.
    let mut interp_s = Vec::with_capacity(m);
    let mut jit_s = Vec::with_capacity(m);
    for _ in 0..m {
        interp_s.extend(samples(1, || load(Engine::Interpreter)));
        if jit.is_ok() {
            jit_s.extend(samples(1, || load(Engine::Jit)));
        }
    }
    let fig2 = fig(&interp_s);
    let (fig2_jit, compile, fig2_compile) = match &jit {
        Ok(()) => {
            let prog = jive::check(rawunet, &limits).map_err(|e| format!("RawUnet.class: {e}"))?;
            (
                fig(&jit_s),
                difference_figure(&jit_s, &interp_s, m, 1.0, resolution),
                fig(&samples(m, || jive::jit::compile_standalone(&prog))),
            )
        }
        Err(why) => (unavailable(why), unavailable(why), unavailable(why)),
    };
    let big_n = (m / 4).max(1) | 1;
    let big = median_figure(
        &samples(big_n, || jive::check(bench, &limits)),
        big_n,
        resolution,
    );
    let big_compile = match &jit {
        Err(why) => unavailable(why),
        Ok(()) => {
            let prog = jive::check(bench, &limits).map_err(|e| format!("Bench.class: {e}"))?;
            match jive::jit::compile_standalone(&prog) {
                Err(e) => unavailable(&format!("the JIT refused Bench.class: {e}")),
                Ok(_) => median_figure(
                    &samples(big_n, || jive::jit::compile_standalone(&prog)),
                    big_n,
                    resolution,
                ),
            }
        }
    };
    progress.tick();
    progress.finish();
    Ok(LoadTimes {
        fig2_check,
        fig2,
        fig2_jit,
        compile,
        fig2_compile,
        big,
        big_compile,
        raw_len: rawunet.len(),
        raw_code,
        bench_len: bench.len(),
        bench_code,
    })
}

impl LoadTimes {
    fn print(&self, jit: &Result<(), String>, m: usize) {
        let mut notes = Notes::default();
        let mut us =
            |f: &Figure, label: &str| notes.cell(f, label, |v| format!("{:.1} us", v / 1e3));
        println!(
            "load, verify and compile (median CPU time of {m} runs; Bench: {} runs):",
            (m / 4).max(1) | 1
        );
        println!(
            "  RawUnet (Figure 2, {} bytes, {} bytes of bytecode):",
            self.raw_len, self.raw_code
        );
        println!(
            "    parse+check+verify+decode              {:>10}",
            us(&self.fig2_check, "RawUnet check (ns)")
        );
        println!(
            "    load+verify (natives, constructor)     {:>10}   (Engine::Interpreter)",
            us(&self.fig2, "RawUnet load (ns)")
        );
        match jit {
            Ok(()) => {
                println!(
                    "    compile (JIT load - interpreter load)  {:>10}   (median of paired differences)",
                    us(&self.compile, "RawUnet compile (ns)")
                );
                println!(
                    "    compile alone (compile_standalone)     {:>10}",
                    us(&self.fig2_compile, "RawUnet compile_standalone (ns)")
                );
                let v = verdict(&self.fig2_jit, |ns| ns / 1e3 <= TARGET_LOAD_US);
                println!(
                    "    load+verify+compile                    {:>10}   (Engine::Jit) target <= {TARGET_LOAD_US:.0} us: {}",
                    us(&self.fig2_jit, "RawUnet load on the JIT (ns)"),
                    verdict_word(v)
                );
            }
            Err(why) => println!("    compile                                n/a ({why})"),
        }
        println!(
            "  Bench (largest benchmark class, {} bytes, {} bytes of bytecode):",
            self.bench_len, self.bench_code
        );
        println!(
            "    parse+check+verify+decode              {:>10}",
            us(&self.big, "Bench check (ns)")
        );
        println!(
            "    compile alone (compile_standalone)     {:>10}",
            us(&self.big_compile, "Bench compile_standalone (ns)")
        );
        notes.print();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fuel(on: &[f64], off: &[f64]) -> Figure {
        let s = Samples {
            on: vec![on.to_vec()],
            off: vec![off.to_vec()],
            null: vec![Vec::new()],
        };
        fuel_figure(&s, 0, on.len())
    }

    #[test]
    fn a_fuel_cost_within_its_own_spread_is_noise_not_a_negative_cost() {
        // Metering on 1% faster to 1% slower than off, round by round.
        let f = fuel(&[99.0, 101.0, 99.5, 100.5, 99.8], &[100.0; 5]);
        assert!(
            matches!(f, Figure::NotMeasured(NotMeasured::WithinNoise { .. })),
            "{f:?}"
        );
        assert!(f.cell(|v| format!("{v:+.1}%")).contains("within the noise"));
    }

    #[test]
    fn a_fuel_cost_below_zero_beyond_its_spread_is_not_a_cost() {
        let f = fuel(&[95.0, 95.1, 94.9], &[100.0; 3]);
        assert!(
            matches!(f, Figure::NotMeasured(NotMeasured::Negative { .. })),
            "{f:?}"
        );
    }

    #[test]
    fn a_fuel_cost_above_its_spread_is_a_value() {
        let f = fuel(&[103.0, 103.1, 102.9], &[100.0; 3]);
        let v = f.value().expect("a value");
        assert!((v - 3.0).abs() < 1e-9, "{v}");
    }
}
