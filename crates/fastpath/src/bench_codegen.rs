//! `fastpath bench codegen`: the three costs that make a dynamic code
//! generator fast or slow (VCODE, Engler PLDI 1996), measured side by side
//! in one process by `fastpath_bench`:
//!
//! 1. host instructions per generated instruction, counted exactly by
//!    callgrind (this binary re-runs itself under valgrind);
//! 2. generation speed of vcode against dynasm-rs, iced-x86 and cranelift,
//!    best of interleaved rounds;
//! 3. the generated code's quality: scalar kernels by vcode against the same
//!    kernels compiled by rustc -O, best of interleaved runs.
//!
//! A time at or below what its clock resolves, or a best over fewer rounds
//! than stated, is n/a with the reason (see [`crate::bench_figures`]), and
//! so is a ratio over it; an instruction count per body instruction that
//! would be negative (the empty function costing more than a full one) is
//! n/a too. `--quick` runs 3 rounds of the peers and the kernels at their
//! test sizes (the callgrind counts are exact and take seconds: counted as
//! in a full run).

use std::process::ExitCode;

use fastpath_bench::kernels::{self, KernelTime, Sizes};
use fastpath_bench::{InstructionCounts, PeerTimes, callgrind, peers};

use crate::bench_figures::{Figure, MIN_NS_PER_OP, NotMeasured, best_figure, ratio};
use crate::bench_report::{Cell, Fmt, Report, Section, Target, col, judge, verdict};

/// Host instructions per generated instruction, all in (at most): with
/// `getreg`, with fixed register names.
const TARGET_IR_VIRTUAL: f64 = 6.0;
const TARGET_IR_FIXED: f64 = 4.0;
/// vcode's generation time over dynasm-rs's (at most) and cranelift's over
/// vcode's (at least).
const TARGET_VS_DYNASM: f64 = 1.0;
const TARGET_CRANELIFT_OVER_VCODE: f64 = 50.0;
/// vcode kernels' speed over rustc's, percent (at least; vectorized kernels
/// are context only).
const TARGET_KERNEL_PERCENT: f64 = 67.0;
/// The least kernel time taken as measured, ns: a few reads of the clock.
const KERNEL_RESOLUTION_NS: f64 = 100.0;

/// What a run measured, each part or why it was not.
pub struct Measured {
    pub instructions: Result<InstructionCounts, String>,
    pub peers: Result<PeerTimes, String>,
    pub peer_rounds: usize,
    pub kernels: Result<Vec<KernelTime>, String>,
    pub kernel_rounds: usize,
}

/// Runs the suite and prints the report.
pub fn run(json: bool, quick: bool) -> ExitCode {
    // The callgrind child does its counted work and exits here.
    fastpath_bench::codegen_child_dispatch();
    let rounds = if quick { 3 } else { 7 };
    // Exact and a few seconds even under valgrind: counted in --quick too.
    eprintln!("codegen: counting instructions under callgrind");
    let instructions = fastpath_bench::measure_instructions();
    eprintln!("codegen: generation speed against the peers");
    let peers = fastpath_bench::measure_peers(rounds);
    eprintln!("codegen: kernels");
    let sizes = if quick { Sizes::TEST } else { Sizes::REPORT };
    let m = Measured {
        instructions,
        peers,
        peer_rounds: rounds,
        kernels: kernels::run_kernels(sizes, rounds),
        kernel_rounds: rounds,
    };
    if let Err(e) = report(&m, quick).print(json) {
        eprintln!("fastpath bench codegen: {e}");
        if json {
            crate::print_json_error("bench codegen", &e);
        }
        return ExitCode::FAILURE;
    }
    if m.peers.is_err() || m.kernels.is_err() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The report of a run.
pub fn report(m: &Measured, quick: bool) -> Report {
    let mut r = Report::new("codegen", quick, "vcode codegen benchmarks");
    instructions(&mut r, &m.instructions);
    generation(&mut r, &m.peers, m.peer_rounds);
    kernels_section(&mut r, &m.kernels, m.kernel_rounds);
    r
}

fn na(why: impl Into<String>) -> Figure {
    Figure::NotMeasured(NotMeasured::Unavailable(why.into()))
}

/// Section 1: callgrind counts.
fn instructions(r: &mut Report, m: &Result<InstructionCounts, String>) {
    let mut s = Section::new(
        "instructions",
        "1. Host instructions per generated instruction (callgrind)",
        "registers",
        vec![
            col("ir_total", "Ir total", Fmt::Dec(0)),
            col("ir_per_function", "Ir per function", Fmt::Dec(0)),
            col(
                "ir_per_instruction",
                "Ir per instruction (all in)",
                Fmt::Dec(2),
            ),
            col(
                "ir_per_body_instruction",
                "Ir per body instruction (minus empty function)",
                Fmt::Dec(2),
            ),
            col("target_ir_per_instruction_at_most", "target", Fmt::Dec(0)),
            col("verdict", "verdict", Fmt::Dec(0)),
        ],
    );
    let c = match m {
        Ok(c) => c,
        Err(why) => {
            s.lines.push(format!("skipped: {why}"));
            r.sections.push(s);
            r.targets.push(Target {
                what: format!(
                    "Ir per instruction at most {TARGET_IR_VIRTUAL} (getreg) and {TARGET_IR_FIXED} (fixed names)"
                ),
                verdict: None,
                detail: format!("not counted: {why}"),
            });
            return;
        }
    };
    let n = callgrind::FUNCS as f64;
    let [nv, nf, ne] = c.insns;
    s.about = format!(
        "{} functions of {nv} vcode instructions each (labels included); the empty function (`lambda`, `ret`, `end`) has {ne}. \
         Counted: everything inside the generation function (`lambda`, `getreg`, the instructions, `end` with linking into executable memory).",
        callgrind::FUNCS
    );
    let exact = |x: f64| Figure::Value {
        value: x,
        spread: 0.0,
    };
    let empty = c.ir("empty");
    let mut judged = Vec::new();
    for (mode, name, insns, target) in [
        ("virtual", "virtual (`getreg`)", nv, TARGET_IR_VIRTUAL),
        (
            "fixed",
            "fixed names (`Reg::t`/`Reg::s`)",
            nf,
            TARGET_IR_FIXED,
        ),
    ] {
        let Some(t) = c.ir(mode) else {
            s.row(
                name,
                vec![
                    Cell::Fig(na("not counted")),
                    Cell::Fig(na("not counted")),
                    Cell::Fig(na("not counted")),
                    Cell::Fig(na("not counted")),
                    Cell::Fig(exact(target)),
                    Cell::Verdict(None),
                ],
            );
            judged.push((name.to_string(), None));
            continue;
        };
        let all = exact(t as f64 / (n * insns as f64));
        let body = match empty {
            Some(e) if t >= e && insns > ne => exact((t - e) as f64 / (n * (insns - ne) as f64)),
            Some(e) if t < e => Figure::NotMeasured(NotMeasured::Negative {
                value: (t as f64 - e as f64) / n,
            }),
            _ => na("the empty function was not counted"),
        };
        let v = verdict(&all, |x| x <= target);
        judged.push((name.to_string(), v));
        s.row(
            name,
            vec![
                Cell::Int(t as i64),
                Cell::Fig(exact(t as f64 / n)),
                Cell::Fig(all),
                Cell::Fig(body),
                Cell::Fig(exact(target)),
                Cell::Verdict(v),
            ],
        );
    }
    match empty {
        Some(e) => s.row(
            "empty function",
            vec![
                Cell::Int(e as i64),
                Cell::Fig(exact(e as f64 / n)),
                Cell::Fig(na("the baseline")),
                Cell::Fig(na("the baseline")),
                Cell::Fig(na("the baseline")),
                Cell::Verdict(None),
            ],
        ),
        None => s.lines.push("the empty function was not counted".into()),
    }
    r.sections.push(s);
    r.targets.push(judge(
        format!(
            "Ir per instruction (all in) at most {TARGET_IR_VIRTUAL} with getreg, {TARGET_IR_FIXED} with fixed names"
        ),
        &judged,
        String::new(),
    ));
}

/// Section 2: generation speed.
fn generation(r: &mut Report, m: &Result<PeerTimes, String>, rounds: usize) {
    let mut s = Section::new(
        "generation",
        "2. Generation speed against peers (one run)",
        "generator",
        vec![
            col("ns_per_function", "ns per function", Fmt::Dec(0)),
            col("ns_per_instruction", "ns per instruction", Fmt::Dec(1)),
            col("time_over_vcode", "time / vcode (getreg)", Fmt::Times),
        ],
    );
    s.samples = Some(rounds);
    let p = match m {
        Ok(p) => p,
        Err(why) => {
            s.lines.push(format!("FAILED: {why}"));
            r.sections.push(s);
            r.targets.push(Target {
                what: "generation speed against dynasm-rs and cranelift-jit".into(),
                verdict: None,
                detail: format!("not measured: {why}"),
            });
            return;
        }
    };
    s.about = format!(
        "Function `mix` ({} vcode instructions, labels included; every generated function was run and checked \
         against Rust first). Time includes producing runnable code; best of {rounds} interleaved batches.",
        p.insns
    );
    let figs: Vec<Figure> = p
        .ns_per_function
        .iter()
        .map(|v| best_figure(v, rounds, MIN_NS_PER_OP))
        .collect();
    for (i, name) in peers::PEERS.iter().enumerate() {
        s.row(
            *name,
            vec![
                Cell::Fig(figs[i].clone()),
                Cell::Fig(figs[i].scaled(1.0 / p.insns as f64)),
                Cell::Fig(ratio(&figs[i], &figs[0])),
            ],
        );
    }
    r.sections.push(s);
    let vs_dynasm = ratio(&figs[0], &figs[2]);
    let cranelift = ratio(&figs[5], &figs[0]);
    r.targets.push(Target {
        what: "vcode (getreg) at least as fast as dynasm-rs".into(),
        verdict: verdict(&vs_dynasm, |x| x <= TARGET_VS_DYNASM),
        detail: ratio(&figs[2], &figs[0]).cell(|x| format!("{x:.2}x dynasm-rs's speed")),
    });
    r.targets.push(Target {
        what: format!(
            "vcode (getreg) >= {TARGET_CRANELIFT_OVER_VCODE:.0}x faster than cranelift-jit"
        ),
        verdict: verdict(&cranelift, |x| x >= TARGET_CRANELIFT_OVER_VCODE),
        detail: cranelift.cell(|x| format!("{x:.0}x")),
    });
}

/// Section 3: the kernels.
fn kernels_section(r: &mut Report, m: &Result<Vec<KernelTime>, String>, rounds: usize) {
    let mut s = Section::new(
        "kernels",
        "3. Generated-code quality: kernels, vcode against rustc -O (one run)",
        "kernel",
        vec![
            col("result", "result", Fmt::Dec(0)),
            col("vcode_us", "vcode µs", Fmt::Dec(1)),
            col("rustc_us", "rustc µs", Fmt::Dec(1)),
            col(
                "vcode_speed_over_rustc_percent",
                "vcode speed / rustc",
                Fmt::Percent(0),
            ),
            col("target", "target", Fmt::Dec(0)),
            col("verdict", "verdict", Fmt::Dec(0)),
        ],
    );
    s.samples = Some(rounds);
    let ks = match m {
        Ok(k) => k,
        Err(why) => {
            s.lines.push(format!("FAILED: {why}"));
            r.sections.push(s);
            r.targets.push(Target {
                what: format!(
                    "vcode kernels at least {TARGET_KERNEL_PERCENT:.0}% of rustc's speed"
                ),
                verdict: None,
                detail: format!("not measured: {why}"),
            });
            return;
        }
    };
    s.about = format!(
        "Best of {rounds} interleaved runs (every run valid: vcode and Rust results checked equal on each)."
    );
    let mut judged = Vec::new();
    for k in ks {
        // `run_kernels` keeps the best of `rounds` runs, each checked; a
        // failed run fails the whole measurement, so every best is over
        // all of them.
        let v = best_figure(&[k.vcode_ns], 1, KERNEL_RESOLUTION_NS).scaled(1e-3);
        let rs = best_figure(&[k.rust_ns], 1, KERNEL_RESOLUTION_NS).scaled(1e-3);
        let speed = ratio(&rs, &v).scaled(100.0);
        let (target, ver) = if k.vectorized {
            ("context only (rustc vectorizes)".to_string(), None)
        } else {
            let ver = verdict(&speed, |x| x >= TARGET_KERNEL_PERCENT);
            judged.push((k.name.to_string(), ver));
            (format!(">= {TARGET_KERNEL_PERCENT:.0}%"), ver)
        };
        s.row(
            k.name,
            vec![
                Cell::Text(k.result.clone()),
                Cell::Fig(v),
                Cell::Fig(rs),
                Cell::Fig(speed),
                Cell::Text(target),
                Cell::Verdict(ver),
            ],
        );
    }
    r.sections.push(s);
    r.targets.push(judge(
        format!(
            "vcode kernels at least {TARGET_KERNEL_PERCENT:.0}% of rustc's speed (scalar kernels)"
        ),
        &judged,
        String::new(),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_body_count_a_short_round_and_failed_kernels_render_alike() {
        let mut ns = vec![vec![1000.0, 1100.0, 1200.0]; peers::PEERS.len()];
        ns[5] = vec![80_000.0, 90_000.0, 85_000.0];
        // A lost round of iced: not a best of 3.
        ns[4] = vec![2000.0, f64::NAN, 2100.0];
        let m = Measured {
            instructions: Ok(InstructionCounts {
                insns: [100, 100, 3],
                counts: vec![
                    callgrind::Count {
                        mode: "virtual",
                        ir: 500_000,
                    },
                    callgrind::Count {
                        mode: "fixed",
                        ir: 350_000,
                    },
                    callgrind::Count {
                        mode: "empty",
                        ir: 600_000,
                    },
                ],
            }),
            peers: Ok(PeerTimes {
                insns: 50,
                ns_per_function: ns,
            }),
            peer_rounds: 3,
            kernels: Err("sieve: differs".into()),
            kernel_rounds: 3,
        };
        let r = report(&m, false);
        let v: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        let ins = &v["sections"]["instructions"]["rows"];
        assert_eq!(ins[0]["ir_per_instruction"]["value"], 5.0);
        assert_eq!(ins[0]["verdict"], "PASS");
        // The empty function costing more than a full one: n/a, not negative.
        assert!(ins[0]["ir_per_body_instruction"]["value"].is_null());
        let g = &v["sections"]["generation"]["rows"];
        assert_eq!(g[0]["ns_per_function"]["value"], 1000.0);
        assert_eq!(g[0]["ns_per_instruction"]["value"], 20.0);
        assert!(g[4]["time_over_vcode"]["value"].is_null());
        assert_eq!(g[5]["time_over_vcode"]["value"], 80.0);
        assert_eq!(
            v["sections"]["kernels"]["lines"][0],
            "FAILED: sieve: differs"
        );
        let text = r.text();
        assert!(
            text.contains("| virtual (`getreg`) | 500000 | 500 | 5.00 | n/a[1] | 6 | PASS |"),
            "{text}"
        );
        assert!(
            text.contains("| cranelift-jit (opt none) | 80000 | 1600.0 | 80.00x |"),
            "{text}"
        );
    }
}
