//! `fastpath bench jive`: the benchmark suite of the U-Net/SLE paper (§4),
//! run side by side by jive's interpreter, HotSpot's interpreter
//! (`java -Xint`) and HotSpot with its default JIT, on the same class file
//! (`applets/src/Bench.java`, compiled by jive's build script).
//!
//! Micro-benchmarks report nanoseconds per operation with the null loop
//! subtracted, as the paper does; macro-benchmarks report microseconds per
//! execution. HotSpot is timed inside the JVM around the loop
//! (`applets/harness/BenchHarness.java`), so JVM startup is excluded. Both
//! sides measure the CPU time of the benchmarking thread, and each figure is
//! the best of 15 rounds (jive interleaves metering off and on round by
//! round). The table also gives jive's cost of fuel metering (the median of
//! the rounds' paired on/off ratios) and the load+verify time of the paper's Figure 2 applet and of
//! the benchmark class.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use jive::{Applet, Limits, Natives};

/// (method, argument n, operations per call, repetitions per round).
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
const MICRO_N: i32 = 1_000_000;
const MICRO_REPS: u32 = 5;
const ROUNDS: u32 = 15;

/// (name, method, n, repetitions per round).
const MACRO: &[(&str, &str, i32, u32)] = &[
    ("qsort (1000, reversed)", "qsortReverse", 1000, 200),
    ("rand (1000 numbers)", "rand", 1000, 200),
    ("fibonacci (first 40)", "fibonacci", 40, 20_000),
];

/// CPU time of the calling thread in ns. CPU time rather than wall time,
/// because this machine is shared: a preempted benchmark would otherwise be
/// charged for other processes' work. The HotSpot harness measures the same
/// (`ThreadMXBean.getCurrentThreadCpuTime`).
fn thread_cpu_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call,
    // and CLOCK_THREAD_CPUTIME_ID is supported by Linux for the calling thread.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        return START.get_or_init(Instant::now).elapsed().as_nanos() as f64;
    }
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// ns per call of `method(n)` in jive over `reps` calls.
fn jive_once(applet: &mut Applet, method: &str, n: i32, reps: u32) -> f64 {
    let t = thread_cpu_ns();
    for _ in 0..reps {
        applet.invoke(method, &[n]).expect("benchmark method runs");
    }
    (thread_cpu_ns() - t) / f64::from(reps)
}

/// Best ns per call of each spec in jive with metering on, and the cost of
/// metering: the median over rounds of the round's on/off
/// ratio, minus one. The two are interleaved round by round, so each ratio
/// compares runs made moments apart under the same machine conditions; the
/// median of those paired ratios is steadier than a ratio of two bests.
fn jive_times(
    off: &mut Applet,
    on: &mut Applet,
    specs: &[(String, i32, u32)],
) -> (Vec<f64>, Vec<f64>) {
    let mut best_on = vec![f64::INFINITY; specs.len()];
    let mut ratios = vec![Vec::new(); specs.len()];
    for (m, n, _) in specs {
        off.invoke(m, &[*n]).expect("benchmark method runs");
        on.invoke(m, &[*n]).expect("benchmark method runs");
    }
    for round in 0..ROUNDS {
        for (i, (m, n, reps)) in specs.iter().enumerate() {
            // Alternate which mode goes first, so neither always runs on
            // the caches the other warmed.
            let (t_off, t_on) = if round % 2 == 0 {
                let a = jive_once(off, m, *n, *reps);
                (a, jive_once(on, m, *n, *reps))
            } else {
                let b = jive_once(on, m, *n, *reps);
                (jive_once(off, m, *n, *reps), b)
            };
            best_on[i] = best_on[i].min(t_on);
            ratios[i].push(t_on / t_off);
        }
    }
    let cost = ratios
        .into_iter()
        .map(|mut r| {
            r.sort_by(f64::total_cmp);
            (r[r.len() / 2] - 1.0) * 100.0
        })
        .collect();
    (best_on, cost)
}

/// ns per call of each spec, measured inside HotSpot.
fn hotspot_times(
    java: &str,
    flags: &[&str],
    dir: &Path,
    specs: &[(String, i32, u32)],
) -> Result<Vec<f64>, String> {
    let mut cmd = Command::new(java);
    cmd.args(flags).arg("-cp").arg(dir).arg("BenchHarness");
    for (m, n, reps) in specs {
        cmd.arg(format!("{m}:{n}:{reps}"));
    }
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {java}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{java} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let times: Vec<f64> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    if times.len() != specs.len() {
        return Err(format!("unexpected harness output:\n{text}"));
    }
    Ok(times)
}

/// Median CPU time of `f` over `n` runs, in ns.
fn median<F: FnMut()>(n: usize, mut f: F) -> f64 {
    let mut v: Vec<f64> = (0..n)
        .map(|_| {
            let t = thread_cpu_ns();
            f();
            thread_cpu_ns() - t
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[n / 2]
}

/// Runs the suite and prints the table.
pub fn run() -> ExitCode {
    match run_inner() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fastpath bench jive: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_inner() -> Result<(), String> {
    let Some(dir) = jive::APPLET_CLASSES else {
        return Err("the benchmark applets were not compiled because javac was missing when jive was built; \
                    install a JDK (e.g. apt-get install openjdk-17-jdk-headless) and rebuild"
            .into());
    };
    let dir = PathBuf::from(dir).join("harness");
    let java = std::env::var("JAVA").unwrap_or_else(|_| "java".into());
    let bench = std::fs::read(dir.join("Bench.class")).map_err(|e| format!("Bench.class: {e}"))?;
    let rawunet =
        std::fs::read(dir.join("RawUnet.class")).map_err(|e| format!("RawUnet.class: {e}"))?;

    let heap = Limits {
        heap_bytes: 16 << 20,
        ..Limits::unmetered()
    };
    let mut plain = Applet::load(&bench, &Natives::new(), heap).map_err(|e| e.to_string())?;
    let mut metered = Applet::load(
        &bench,
        &Natives::new(),
        Limits {
            fuel: Some(u64::MAX / 2),
            ..heap
        },
    )
    .map_err(|e| e.to_string())?;

    let mut specs: Vec<(String, i32, u32)> = MICRO
        .iter()
        .map(|(_, m)| (m.to_string(), MICRO_N, MICRO_REPS))
        .collect();
    specs.extend(
        MACRO
            .iter()
            .map(|&(_, m, n, reps)| (m.to_string(), n, reps)),
    );

    eprintln!("running jive (metering off and on, interleaved) ...");
    let (jive_on, fuel_cost) = jive_times(&mut plain, &mut metered, &specs);
    eprintln!("running java -Xint ...");
    let xint = hotspot_times(&java, &["-Xint"], &dir, &specs)?;
    eprintln!("running java (default JIT) ...");
    let jit = hotspot_times(&java, &[], &dir, &specs)?;

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
    println!("jive benchmark suite (U-Net/SLE section 4); HotSpot: {version}");
    println!(
        "micro: ns per operation, n = {MICRO_N}, null loop subtracted (null-loop row: ns per iteration)"
    );
    println!(
        "{:<14} {:>10} {:>10} {:>10} {:>12} {:>12} {:>10}",
        "benchmark", "jive", "java-Xint", "java-JIT", "jive/Xint", "jive/JIT", "fuel cost"
    );
    let per_op = |v: &[f64], i: usize| {
        let n = f64::from(MICRO_N);
        if i == 0 { v[0] / n } else { (v[i] - v[0]) / n }
    };
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}x", a / b)
        } else {
            "n/a".into()
        }
    };
    for (i, (name, _)) in MICRO.iter().enumerate() {
        let (j, x, t) = (per_op(&jive_on, i), per_op(&xint, i), per_op(&jit, i));
        let fuel = fuel_cost[i];
        println!(
            "{name:<14} {j:>10.3} {x:>10.3} {t:>10.3} {:>12} {:>12} {fuel:>+9.1}%",
            ratio(j, x),
            ratio(j, t)
        );
    }
    println!();
    println!("macro: us per execution");
    println!(
        "{:<24} {:>10} {:>10} {:>10} {:>12} {:>12} {:>10}",
        "benchmark", "jive", "java-Xint", "java-JIT", "jive/Xint", "jive/JIT", "fuel cost"
    );
    for (k, (name, ..)) in MACRO.iter().enumerate() {
        let i = MICRO.len() + k;
        let (j, x, t) = (jive_on[i] / 1e3, xint[i] / 1e3, jit[i] / 1e3);
        let fuel = fuel_cost[i];
        println!(
            "{name:<24} {j:>10.2} {x:>10.2} {t:>10.2} {:>12} {:>12} {fuel:>+9.1}%",
            ratio(j, x),
            ratio(j, t)
        );
    }
    println!();
    println!("jive: fuel metering on (a budget the benchmark never reaches)");
    println!("ratios: jive time / HotSpot time (below 1.00x, jive is faster)");
    println!(
        "fuel cost: jive with metering on vs off (Limits::fuel = None: the same loop, with no charging op),\n  \
         the median over rounds of each round's on/off CPU-time ratio"
    );
    println!(
        "  (CPU time of this run, noisy on a shared machine; docs/benchmarks.md records it beside the \
         exact callgrind instruction counts)"
    );
    println!();
    let n = Natives::figure2_stubs();
    let fig2 = median(2001, || {
        Applet::load(&rawunet, &n, Limits::default()).expect("RawUnet loads");
    });
    let fig2_check = median(2001, || {
        jive::check(&rawunet, &Limits::default()).expect("RawUnet verifies");
    });
    let big = median(501, || {
        jive::check(&bench, &Limits::default()).expect("Bench verifies");
    });
    println!("load+verify (median CPU time):");
    println!(
        "  RawUnet (Figure 2, {} bytes): {:.1} us to parse+check+verify+decode, {:.1} us including natives and constructor",
        rawunet.len(),
        fig2_check / 1e3,
        fig2 / 1e3
    );
    println!(
        "  Bench (largest benchmark class, {} bytes): {:.1} us to parse+check+verify+decode",
        bench.len(),
        big / 1e3
    );
    Ok(())
}
