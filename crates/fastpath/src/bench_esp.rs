//! `fastpath bench esp`: Table 1 of Xu, Kumar and Li, "Fast Paths in
//! Concurrent Programs" (PACT 2004, §6.1), replicated: the four filter
//! programs on 10,000-byte streams as process-based native code ("ESP"),
//! with a hand-fused Rust loop as the manual fast path, with their
//! automatically extracted fast paths, and as automata; beside them the same
//! pipelines as OS threads over crossbeam rendezvous channels and as Go
//! goroutines (when `go` is installed). Every variant's output is checked
//! against the Rust reference before and while it is timed (see
//! `fastpath_bench::esp`).
//!
//! Times are nanoseconds per input byte, the best of several interleaved
//! rounds of wall time; sizes are generated machine instructions (for ESP:
//! the processes' code, plus the fast paths' for the fast-path column; the
//! automaton's code alone for the automata column; for the Rust loop, the
//! instructions reachable in its compiled function). The paper's claims,
//! as targets (automatic fast paths within 1.3x of the hand-fused Rust loop
//! and faster than the automata, fast-path code at most 1.5x the processes'
//! code, fast paths at least 20x faster than Go and ESP faster than Go), are
//! judged at the end, each PASS or MISS.

use std::process::ExitCode;

use fastpath_bench::esp::{self as bench, Budget, ProgramResult, Timed, VARIANTS, Variant};

/// The targets: fast path time / hand-fused Rust time, fast-path code size /
/// ESP code size (both at most), Go time / fast path time (at least).
const FP_VS_RUST: f64 = 1.3;
const FP_SIZE_VS_ESP: f64 = 1.5;
const GO_VS_FP: f64 = 20.0;

/// Runs the suite and prints the table. `FASTPATH_BENCH_QUICK=1` runs one
/// short round (a smoke test of the whole suite).
pub fn run() -> ExitCode {
    let budget = if std::env::var_os("FASTPATH_BENCH_QUICK").is_some() {
        Budget::QUICK
    } else {
        Budget::DEFAULT
    };
    println!("# fastpath bench esp: Table 1 (filter programs, §6.1)\n");
    println!("machine: {}", fastpath_bench::machine());
    if cfg!(debug_assertions) {
        println!(
            "\nWARNING: built without optimizations; the Rust loop and the peers are meaningless. Use --release."
        );
    }
    let go = bench::go::Peer::build();
    match &go {
        Ok(peer) => eprintln!("Go peer built ({})", peer.version),
        Err(why) => eprintln!("Go peer skipped: {why}"),
    }
    let mut results = Vec::new();
    for i in 0..esp::filters::PROGRAMS.len() {
        eprintln!("measuring {} ...", esp::filters::PROGRAMS[i].name);
        results.push(bench::measure(i, budget, &go));
    }
    print_tables(&results, budget, &go);
    let failed = results.iter().flat_map(|r| &r.timed).any(|(v, t)| {
        matches!(v, Variant::Native | Variant::Fused | Variant::FastPath) && t.ns_per_byte.is_err()
    });
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn get(r: &ProgramResult, v: Variant) -> &Timed {
    &r.timed
        .iter()
        .find(|(w, _)| *w == v)
        .expect("every variant is measured")
        .1
}

fn ns(r: &ProgramResult, v: Variant) -> Option<f64> {
    get(r, v).ns_per_byte.as_ref().ok().copied()
}

fn size(r: &ProgramResult, v: Variant) -> Option<usize> {
    get(r, v).ns_per_byte.as_ref().ok().and(get(r, v).size)
}

fn cell_ns(t: &Timed) -> String {
    match &t.ns_per_byte {
        Ok(ns) if *ns >= 100.0 => format!("{ns:.0}"),
        Ok(ns) => format!("{ns:.2}"),
        Err(_) => "failed".into(),
    }
}

fn cell_size(t: &Timed) -> String {
    match (&t.ns_per_byte, t.size) {
        (Ok(_), Some(s)) => s.to_string(),
        _ => "".into(),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a / b >= 100.0 => format!("{:.0}x", a / b),
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "n/a".into(),
    }
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

fn print_tables(results: &[ProgramResult], budget: Budget, go: &Result<bench::go::Peer, String>) {
    println!(
        "\nstreams of {} bytes; ns per input byte, best of {} rounds (threads, Go: {} rounds); size: machine instructions\n",
        bench::STREAM_BYTES,
        budget.rounds,
        budget.peer_rounds
    );
    println!(
        "| program | ESP ns/B | size | hand-fused Rust ns/B | size | ESP + auto fast paths ns/B | size | automata ns/B | size | crossbeam threads ns/B | Go ns/B |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in results {
        let mut row = format!("| {} ", r.name);
        for v in VARIANTS {
            let t = get(r, v);
            row += &format!("| {} ", cell_ns(t));
            if matches!(
                v,
                Variant::Native | Variant::Fused | Variant::FastPath | Variant::Automata
            ) {
                let mut s = cell_size(t);
                if v == Variant::Fused && !s.is_empty() {
                    // The manual fast path comes with the ESP slow path.
                    if let Some(p) = r.process_size {
                        s = format!("{} + {s}", p);
                    }
                }
                row += &format!("| {s} ");
            }
        }
        println!("{row}|");
    }
    println!();
    for r in results {
        println!("{}: {} ({} bytes out)", r.name, r.chain, r.output_bytes);
    }

    println!("\nratios (time / time; size / size):\n");
    println!(
        "| program | ESP / fast path | fast path / Rust (<= {FP_VS_RUST}x) | automata / fast path (> 1) | fast-path size / ESP size (<= {FP_SIZE_VS_ESP}x) | automata size / ESP size | threads / fast path | Go / fast path (>= {GO_VS_FP:.0}x) | Go / ESP (> 1) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let to_f = |s: Option<usize>| s.map(|s| s as f64);
    for r in results {
        let (e, f, a, u, t, g) = (
            ns(r, Variant::Native),
            ns(r, Variant::FastPath),
            ns(r, Variant::Automata),
            ns(r, Variant::Fused),
            ns(r, Variant::Threads),
            ns(r, Variant::Go),
        );
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            ratio(e, f),
            ratio(f, u),
            ratio(a, f),
            ratio(
                to_f(size(r, Variant::FastPath)),
                to_f(size(r, Variant::Native))
            ),
            ratio(
                to_f(size(r, Variant::Automata)),
                to_f(size(r, Variant::Native))
            ),
            ratio(t, f),
            ratio(g, f),
            ratio(g, e),
        );
    }

    println!("\nfast paths per stream (entries / exits / aborts):");
    for r in results {
        match get(r, Variant::FastPath).fastpath_stats {
            Some((n, x, a)) => println!("  {}: {n:.2} / {x:.2} / {a:.2}", r.name),
            None => println!("  {}: n/a", r.name),
        }
    }
    let mut failures = Vec::new();
    for r in results {
        for (v, t) in &r.timed {
            if let Err(e) = &t.ns_per_byte {
                failures.push(format!("  {} {v}: {e}", r.name));
            }
        }
    }
    if !failures.is_empty() {
        println!("\nnot timed:");
        for f in failures {
            println!("{f}");
        }
    }

    // The targets, each judged over every program.
    let all = |f: &dyn Fn(&ProgramResult) -> Option<bool>| -> (bool, bool) {
        let v: Vec<Option<bool>> = results.iter().map(f).collect();
        (
            v.iter().all(|x| *x == Some(true)),
            v.iter().all(Option::is_some),
        )
    };
    let worst = |f: &dyn Fn(&ProgramResult) -> Option<f64>, high: bool| -> String {
        let mut best: Option<(&str, f64)> = None;
        for r in results {
            if let Some(x) = f(r) {
                if best.is_none_or(|(_, b)| if high { x > b } else { x < b }) {
                    best = Some((r.name, x));
                }
            }
        }
        best.map_or("n/a".into(), |(n, x)| format!("{n} {x:.2}x"))
    };
    let div = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let fp_rust = |r: &ProgramResult| div(ns(r, Variant::FastPath), ns(r, Variant::Fused));
    let auto_fp = |r: &ProgramResult| div(ns(r, Variant::Automata), ns(r, Variant::FastPath));
    let size_ratio = |r: &ProgramResult| {
        div(
            to_f(size(r, Variant::FastPath)),
            to_f(size(r, Variant::Native)),
        )
    };
    let go_fp = |r: &ProgramResult| div(ns(r, Variant::Go), ns(r, Variant::FastPath));
    let go_esp = |r: &ProgramResult| div(ns(r, Variant::Go), ns(r, Variant::Native));

    println!(
        "\ntargets (the paper's claims: fast paths against hand-written Rust, automata and Go; their code size):"
    );
    let line = |what: &str, (pass, judged): (bool, bool), detail: String| {
        let why = if judged {
            detail
        } else {
            format!("not judged on every program; {detail}")
        };
        println!("  {:<4} {what} ({why})", verdict(pass && judged));
    };
    line(
        &format!("automatic fast paths within {FP_VS_RUST}x of the hand-fused Rust"),
        all(&|r| fp_rust(r).map(|x| x <= FP_VS_RUST)),
        format!("highest: {}", worst(&fp_rust, true)),
    );
    line(
        "automatic fast paths faster than the automata-based code",
        all(&|r| auto_fp(r).map(|x| x > 1.0)),
        format!("automata / fast path, lowest: {}", worst(&auto_fp, false)),
    );
    line(
        &format!("code size with fast paths at most {FP_SIZE_VS_ESP}x the process-based code"),
        all(&|r| size_ratio(r).map(|x| x <= FP_SIZE_VS_ESP)),
        format!("highest: {}", worst(&size_ratio, true)),
    );
    match go {
        Ok(_) => {
            line(
                &format!("automatic fast paths at least {GO_VS_FP:.0}x faster per byte than Go"),
                all(&|r| go_fp(r).map(|x| x >= GO_VS_FP)),
                format!("lowest: {}", worst(&go_fp, false)),
            );
            line(
                "process-based native code faster than Go",
                all(&|r| go_esp(r).map(|x| x > 1.0)),
                format!("Go / ESP, lowest: {}", worst(&go_esp, false)),
            );
        }
        Err(why) => {
            println!("  SKIP the two targets against Go: the Go peer was skipped: {why}");
        }
    }
}
