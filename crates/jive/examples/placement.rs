//! Does the interpreter's speed depend on where the host puts the applet?
//!
//! Loads the benchmark class (`applets/src/Bench.java`) once on the
//! interpreter with fuel metering on, then moves the same `Applet` to 256
//! stack depths in turn (one frame of 48 bytes deeper each time: together
//! every 16-byte position within a 4 KiB page) and times the empty loop
//! (`nullLoop`) and the loop with a field read (`fieldRead`) at each: ns per
//! iteration, the best of 3 calls of `n` iterations (wall time; run it on a
//! quiet machine). Only the applet's own address changes between positions;
//! its heap (frames, decoded ops) stays where it is.
//!
//! ```sh
//! cargo run --release -p jive --example placement [-- N]   # N iterations per call, default 300000
//! ```
//!
//! Prints one line per position and a summary: the median, the slowest
//! position, and how many positions ran 30% or more over the median. The
//! interpreter keeps its per-invocation state (frames, fuel counter) in one
//! heap block at fixed distances, so no position should stand out: see
//! docs/jive.md ("Where the loop's data lives").

use std::hint::black_box;
use std::time::Instant;

use jive::{Applet, Engine, Limits, Natives};

/// Calls `f` `depth` frames below the caller.
#[inline(never)]
fn at_depth(depth: usize, f: &mut dyn FnMut()) {
    let pad = [0u8; 16];
    black_box(&pad);
    if depth == 0 {
        f();
    } else {
        at_depth(depth - 1, f);
    }
    black_box(&pad);
}

/// ns per iteration of `method(n)`: the best of 3 calls after one warm-up.
fn ns_per_iteration(a: &mut Applet, method: &str, n: i32) -> Result<f64, String> {
    let m = a
        .method(method)
        .map_err(|e| format!("Bench.{method}: {e}"))?;
    let mut best = f64::INFINITY;
    for i in 0..4 {
        let t = Instant::now();
        a.call(&m, &[n], None)
            .map_err(|e| format!("Bench.{method}({n}): {e}"))?;
        if i > 0 {
            best = best.min(t.elapsed().as_nanos() as f64 / f64::from(n));
        }
    }
    Ok(best)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), String> {
    let n: i32 = match std::env::args().nth(1) {
        Some(s) => s.parse().ok().filter(|&n| n > 0).ok_or(format!(
            "N: expected a positive number of iterations, got {s}"
        ))?,
        None => 300_000,
    };
    let Some(dir) = jive::APPLET_CLASSES else {
        return Err("javac was not found when jive was built: no Bench.class".into());
    };
    let path = std::path::Path::new(dir).join("release8/Bench.class");
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let limits = Limits {
        fuel: Some(u64::MAX / 2),
        ..Limits::default()
    };
    let applet = Applet::load_with_engine(&bytes, &Natives::new(), limits, Engine::Interpreter)
        .map_err(|e| format!("Bench.class: {e}"))?;
    let mut parked = Some(applet);
    let (mut null, mut read) = (Vec::new(), Vec::new());
    let mut failed = None;
    println!("position  nullLoop (ns/iteration)  fieldRead (ns/iteration)");
    for depth in 0..256 {
        at_depth(depth, &mut || {
            let Some(moved) = parked.take() else {
                return;
            };
            // The applet now lives in this frame.
            let mut here = moved;
            black_box(&mut here);
            match (
                ns_per_iteration(&mut here, "nullLoop", n),
                ns_per_iteration(&mut here, "fieldRead", n),
            ) {
                (Ok(a), Ok(b)) => {
                    println!("{depth:8}  {a:23.2}  {b:24.2}");
                    null.push(a);
                    read.push(b);
                }
                (Err(e), _) | (_, Err(e)) => failed = Some(e),
            }
            parked = Some(here);
        });
        if let Some(e) = failed.take() {
            return Err(e);
        }
    }
    for (name, v) in [("nullLoop", &null), ("fieldRead", &read)] {
        let m = median(v);
        let worst = v.iter().copied().fold(0.0, f64::max);
        let slow = v.iter().filter(|&&x| x >= 1.3 * m).count();
        println!(
            "{name}: median {m:.2} ns/iteration, slowest {worst:.2}, {slow} of {} positions at 1.3x the median or more",
            v.len()
        );
    }
    Ok(())
}
