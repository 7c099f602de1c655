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
//! instructions reachable in its compiled function), and beside them the
//! instructions of the Rust scheduler that the process-based code returns
//! to at every channel operation (the paper's ESP code contained its
//! context switches; ours calls them), which both ESP variants use. The
//! size ratio is printed for the generated code alone and counting the
//! scheduler in both. The paper's claims,
//! as targets (automatic fast paths within 1.3x of the hand-fused Rust loop
//! and faster than the automata, fast-path code at most 1.5x the processes'
//! code counting the scheduler, fast paths at least 20x faster than Go and
//! ESP faster than Go), are
//! judged at the end, each PASS or MISS (or not judged, naming the programs
//! whose figures are n/a). A time is n/a with the reason when it failed,
//! when fewer rounds than stated were valid, or when it is at or below a
//! twentieth of a cycle (see [`crate::bench_figures`]); a ratio over it is
//! n/a too. `--quick` (or `FASTPATH_BENCH_QUICK=1`) runs two short rounds.

use std::process::ExitCode;

use fastpath_bench::esp::{self as bench, Budget, ProgramResult, Timed, Variant};

use crate::bench_figures::{Figure, MIN_NS_PER_OP, NotMeasured, best_figure, ratio};
use crate::bench_report::{Cell, Fmt, Report, Section, col, judge};

/// The targets: fast path time / hand-fused Rust time, fast-path code size /
/// ESP code size (both at most), Go time / fast path time (at least).
const FP_VS_RUST: f64 = 1.3;
const FP_SIZE_VS_ESP: f64 = 1.5;
const GO_VS_FP: f64 = 20.0;

/// Runs the suite and prints the tables (or the JSON object).
pub fn run(json: bool, quick: bool) -> ExitCode {
    let quick = quick || std::env::var_os("FASTPATH_BENCH_QUICK").is_some();
    let budget = if quick {
        Budget::QUICK
    } else {
        Budget::DEFAULT
    };
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
    let go_note = match &go {
        Ok(peer) => Ok(peer.version.clone()),
        Err(why) => Err(why.clone()),
    };
    if let Err(e) = report(&results, budget, &go_note, quick).print(json) {
        eprintln!("fastpath bench esp: {e}");
        if json {
            crate::print_json_error("bench esp", &e);
        }
        return ExitCode::FAILURE;
    }
    let failed = results.iter().flat_map(|r| &r.timed).any(|(v, t)| {
        matches!(v, Variant::Native | Variant::Fused | Variant::FastPath) && t.ns_per_byte.is_err()
    });
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn get(r: &ProgramResult, v: Variant) -> Option<&Timed> {
    r.timed.iter().find(|(w, _)| *w == v).map(|(_, t)| t)
}

/// Rounds a variant's figure is the best of.
fn rounds(v: Variant, b: Budget) -> usize {
    match v {
        Variant::Threads => b.peer_rounds as usize,
        // The Go process reports the best of its own rounds.
        Variant::Go => 1,
        _ => b.rounds as usize,
    }
}

/// The ns per byte of `v`, or why there is none.
fn time(r: &ProgramResult, v: Variant, b: Budget) -> Figure {
    match get(r, v) {
        None => Figure::NotMeasured(NotMeasured::Unavailable("not measured".into())),
        Some(t) => match &t.ns_per_byte {
            Err(e) => Figure::NotMeasured(NotMeasured::Unavailable(format!("not timed: {e}"))),
            Ok(_) => best_figure(&t.samples, rounds(v, b), MIN_NS_PER_OP),
        },
    }
}

/// The code size of `v` in machine instructions, as an exact figure.
fn size(r: &ProgramResult, v: Variant) -> Figure {
    match get(r, v) {
        Some(Timed {
            ns_per_byte: Ok(_),
            size: Some(s),
            ..
        }) => Figure::Value {
            value: *s as f64,
            spread: 0.0,
        },
        Some(Timed {
            ns_per_byte: Err(e),
            ..
        }) => Figure::NotMeasured(NotMeasured::Unavailable(format!("not built: {e}"))),
        _ => Figure::NotMeasured(NotMeasured::Unavailable("no size".into())),
    }
}

/// A target's test of a ratio.
type Pass = fn(f64) -> bool;

/// The report of a run; `go` is the Go peer's version or why it was skipped.
pub fn report(
    results: &[ProgramResult],
    budget: Budget,
    go: &Result<String, String>,
    quick: bool,
) -> Report {
    let mut rep = Report::new(
        "esp",
        quick,
        "fastpath bench esp: Table 1 (filter programs, §6.1)",
    );
    rep.notes.push(match go {
        Ok(v) => format!("Go peer: {v}"),
        Err(why) => format!("Go peer skipped: {why}"),
    });
    let mut t = Section::new(
        "times",
        "Time and code size",
        "program",
        vec![
            col("esp_ns_per_byte", "ESP ns/B", Fmt::Dec(2)),
            col("esp_instructions", "size", Fmt::Dec(0)),
            col("rust_ns_per_byte", "hand-fused Rust ns/B", Fmt::Dec(2)),
            col("rust_instructions", "size (+ ESP's)", Fmt::Dec(0)),
            col(
                "fast_path_ns_per_byte",
                "ESP + auto fast paths ns/B",
                Fmt::Dec(2),
            ),
            col("fast_path_instructions", "size", Fmt::Dec(0)),
            col("automata_ns_per_byte", "automata ns/B", Fmt::Dec(2)),
            col("automata_instructions", "size", Fmt::Dec(0)),
            col("scheduler_instructions", "scheduler size", Fmt::Dec(0)),
            col("threads_ns_per_byte", "crossbeam threads ns/B", Fmt::Dec(0)),
            col("go_ns_per_byte", "Go ns/B", Fmt::Dec(0)),
        ],
    );
    t.samples = Some(budget.rounds as usize);
    t.about = format!(
        "streams of {} bytes; ns per input byte, best of {} rounds (threads: {} rounds; Go: the best of its own {} rounds); \
         size: machine instructions (the hand-fused Rust loop's own; it comes with the ESP slow path, whose \
         size is ESP's); scheduler size: the Rust scheduler's functions that the process-based code returns to \
         (run loop, rendezvous, host channels; calls into the standard library not followed), shared by both ESP \
         variants",
        bench::STREAM_BYTES,
        budget.rounds,
        budget.peer_rounds,
        budget.peer_rounds
    );
    let mut ratios = Section::new(
        "ratios",
        "Ratios (time / time; size / size)",
        "program",
        vec![
            col("esp_over_fast_path", "ESP / fast path", Fmt::Times),
            col(
                "fast_path_over_rust",
                &format!("fast path / Rust (<= {FP_VS_RUST}x)"),
                Fmt::Times,
            ),
            col(
                "automata_over_fast_path",
                "automata / fast path (> 1)",
                Fmt::Times,
            ),
            col(
                "fast_path_size_over_esp_size",
                "fast-path size / ESP size (code only)",
                Fmt::Times,
            ),
            col(
                "fast_path_total_over_esp_total",
                &format!("the same, with the scheduler (<= {FP_SIZE_VS_ESP}x)"),
                Fmt::Times,
            ),
            col(
                "automata_size_over_esp_size",
                "automata size / ESP size",
                Fmt::Times,
            ),
            col("threads_over_fast_path", "threads / fast path", Fmt::Times),
            col(
                "go_over_fast_path",
                &format!("Go / fast path (>= {GO_VS_FP:.0}x)"),
                Fmt::Times,
            ),
            col("go_over_esp", "Go / ESP (> 1)", Fmt::Times),
        ],
    );
    let mut stats = Section::new(
        "fast_paths",
        "Fast paths per stream",
        "program",
        vec![
            col("entries_per_stream", "entries", Fmt::Dec(2)),
            col("exits_per_stream", "exits", Fmt::Dec(2)),
            col("aborts_per_stream", "aborts", Fmt::Dec(2)),
        ],
    );
    let mut judged: [Vec<(String, Option<bool>)>; 5] = Default::default();
    let mut extremes: [Vec<(String, f64)>; 5] = Default::default();
    for r in results {
        let ns = |v| time(r, v, budget);
        let (e, u, f, a, th, g) = (
            ns(Variant::Native),
            ns(Variant::Fused),
            ns(Variant::FastPath),
            ns(Variant::Automata),
            ns(Variant::Threads),
            ns(Variant::Go),
        );
        t.row(
            r.name,
            vec![
                Cell::Fig(e.clone()),
                Cell::Fig(size(r, Variant::Native)),
                Cell::Fig(u.clone()),
                Cell::Fig(size(r, Variant::Fused)),
                Cell::Fig(f.clone()),
                Cell::Fig(size(r, Variant::FastPath)),
                Cell::Fig(a.clone()),
                Cell::Fig(size(r, Variant::Automata)),
                Cell::Fig(Figure::Value {
                    value: r.scheduler_size as f64,
                    spread: 0.0,
                }),
                Cell::Fig(th.clone()),
                Cell::Fig(g.clone()),
            ],
        );
        t.lines.push(format!(
            "{}: {} ({} bytes out)",
            r.name, r.chain, r.output_bytes
        ));
        let fp_rust = ratio(&f, &u);
        let auto_fp = ratio(&a, &f);
        let code_ratio = ratio(&size(r, Variant::FastPath), &size(r, Variant::Native));
        let with_scheduler = |f: Figure| match f {
            Figure::Value { value, spread } => Figure::Value {
                value: value + r.scheduler_size as f64,
                spread,
            },
            na => na,
        };
        let size_ratio = ratio(
            &with_scheduler(size(r, Variant::FastPath)),
            &with_scheduler(size(r, Variant::Native)),
        );
        let go_fp = ratio(&g, &f);
        let go_esp = ratio(&g, &e);
        ratios.row(
            r.name,
            vec![
                Cell::Fig(ratio(&e, &f)),
                Cell::Fig(fp_rust.clone()),
                Cell::Fig(auto_fp.clone()),
                Cell::Fig(code_ratio),
                Cell::Fig(size_ratio.clone()),
                Cell::Fig(ratio(
                    &size(r, Variant::Automata),
                    &size(r, Variant::Native),
                )),
                Cell::Fig(ratio(&th, &f)),
                Cell::Fig(go_fp.clone()),
                Cell::Fig(go_esp.clone()),
            ],
        );
        let checks: [(&Figure, Pass); 5] = [
            (&fp_rust, |x| x <= FP_VS_RUST),
            (&auto_fp, |x| x > 1.0),
            (&size_ratio, |x| x <= FP_SIZE_VS_ESP),
            (&go_fp, |x| x >= GO_VS_FP),
            (&go_esp, |x| x > 1.0),
        ];
        for (k, (fig, pass)) in checks.iter().enumerate() {
            judged[k].push((r.name.to_string(), fig.value().map(pass)));
            if let Some(x) = fig.value() {
                extremes[k].push((r.name.to_string(), x));
            }
        }
        let st = get(r, Variant::FastPath).and_then(|t| t.fastpath_stats);
        let cell = |x: Option<f64>| {
            Cell::Fig(match x {
                Some(value) => Figure::Value { value, spread: 0.0 },
                None => Figure::NotMeasured(NotMeasured::Unavailable(
                    "the fast-path variant did not run".into(),
                )),
            })
        };
        stats.row(
            r.name,
            vec![
                cell(st.map(|s| s.0)),
                cell(st.map(|s| s.1)),
                cell(st.map(|s| s.2)),
            ],
        );
    }
    rep.sections = vec![t, ratios, stats];

    let extreme = |k: usize, high: bool, what: &str| {
        let best = extremes[k]
            .iter()
            .fold(None::<&(String, f64)>, |b, x| match b {
                Some(b) if (high && b.1 >= x.1) || (!high && b.1 <= x.1) => Some(b),
                _ => Some(x),
            });
        best.map_or("no program measured".into(), |(n, x)| {
            format!("{what}: {n} {x:.2}x")
        })
    };
    let mut targets = vec![
        judge(
            format!("automatic fast paths within {FP_VS_RUST}x of the hand-fused Rust"),
            &judged[0],
            extreme(0, true, "highest"),
        ),
        judge(
            "automatic fast paths faster than the automata-based code".into(),
            &judged[1],
            extreme(1, false, "automata / fast path, lowest"),
        ),
        judge(
            format!(
                "code size with fast paths at most {FP_SIZE_VS_ESP}x the process-based code, \
                 counting the scheduler it calls"
            ),
            &judged[2],
            extreme(2, true, "highest"),
        ),
    ];
    match go {
        Ok(_) => {
            targets.push(judge(
                format!("automatic fast paths at least {GO_VS_FP:.0}x faster per byte than Go"),
                &judged[3],
                extreme(3, false, "lowest"),
            ));
            targets.push(judge(
                "process-based native code faster than Go".into(),
                &judged[4],
                extreme(4, false, "Go / ESP, lowest"),
            ));
        }
        Err(why) => targets.push(crate::bench_report::Target {
            what: "the two targets against Go".into(),
            verdict: None,
            detail: format!("the Go peer was skipped: {why}"),
        }),
    }
    rep.targets = targets;
    rep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(samples: &[f64], size: Option<usize>) -> Timed {
        Timed {
            ns_per_byte: Ok(samples.iter().copied().fold(f64::INFINITY, f64::min)),
            samples: samples.to_vec(),
            size,
            fastpath_stats: None,
        }
    }

    #[test]
    fn a_failed_variant_and_a_short_sample_are_na_and_unjudged() {
        let b = Budget::QUICK;
        let r = ProgramResult {
            name: "program1",
            chain: "a -> b".into(),
            output_bytes: 10,
            timed: vec![
                (Variant::Native, timed(&[4.0, 5.0], Some(100))),
                (Variant::Fused, timed(&[1.0, 1.1], Some(20))),
                // One round of the two stated: not a best of two.
                (Variant::FastPath, timed(&[1.2], Some(120))),
                (Variant::Automata, timed(&[2.0, 2.0], Some(300))),
                (Variant::Threads, timed(&[400.0], None)),
                (
                    Variant::Go,
                    Timed {
                        ns_per_byte: Err("skipped: no go".into()),
                        samples: vec![],
                        size: None,
                        fastpath_stats: None,
                    },
                ),
            ],
            process_size: Some(100),
            scheduler_size: 1000,
        };
        let rep = report(&[r], b, &Err("no go".into()), true);
        let s = rep.section("times").unwrap();
        assert_eq!(
            s.cell("program1", "esp_ns_per_byte"),
            Some(&Cell::Fig(Figure::Value {
                value: 4.0,
                spread: 0.5
            }))
        );
        let Some(Cell::Fig(fp)) = s.cell("program1", "fast_path_ns_per_byte") else {
            panic!()
        };
        assert_eq!(
            fp,
            &Figure::NotMeasured(NotMeasured::TooFewSamples { got: 1, want: 2 })
        );
        let v: serde_json::Value = serde_json::from_str(&rep.json().unwrap()).unwrap();
        assert!(v["sections"]["ratios"]["rows"][0]["fast_path_over_rust"]["value"].is_null());
        assert_eq!(
            v["sections"]["times"]["rows"][0]["rust_instructions"]["value"],
            20.0
        );
        assert!(v["targets"][0]["verdict"].is_null());
        assert!(rep.text().contains("n/a["), "{}", rep.text());
    }
}
