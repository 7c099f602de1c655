//! # fastpath-bench: benchmark workloads and the peers they are compared with
//!
//! The home of fastpath's benchmark workloads. The `vcode` suite
//! measures the three costs that make a dynamic code generator fast or slow
//! (VCODE, Engler PLDI 1996):
//!
//! 1. host instructions per generated instruction, counted exactly with
//!    callgrind ([`callgrind`], workload in [`workload`]);
//! 2. generation speed against peers, in one run ([`peers`]);
//! 3. the quality of the generated code: scalar kernels against the same
//!    kernels compiled by rustc ([`kernels`]).
//!
//! [`codegen_report`] runs all three side by side in one process and
//! returns the tables with ratios; `fastpath bench codegen` prints it and
//! `cargo bench -p fastpath-bench --bench codegen` runs the criterion
//! version.
//!
//! ## Dependencies
//!
//! The peers are dependencies of this benchmark crate only, never of a
//! library crate:
//!
//! * `dynasmrt`, `dynasm`: dynasm-rs, the assembler-macro code generator
//!   (peer for generation speed; its `MutableBuffer` also supplies the
//!   executable memory for iced-x86's output).
//! * `iced-x86` (`code_asm`): the iced `CodeAssembler` (peer).
//! * `cranelift-codegen`, `cranelift-frontend`, `cranelift-module`,
//!   `cranelift-jit`, `cranelift-native`: Cranelift, an optimizing JIT
//!   back end (peer).
//! * `rbpf`: eBPF programs run by its JIT, the peer of `dpf` (with
//!   libpcap's BPF interpreter, loaded by `dpf::pcap`).
//! * `crossbeam-channel`: the thread pipelines of the esp suite ([`esp`]),
//!   each filter an OS thread over zero-capacity channels.
//! * `vcode`, `dpf`, `esp`: what is measured.
//! * `criterion` (dev): the `benches/codegen.rs` harness.

pub mod callgrind;
pub mod client;
pub mod dpf;
pub mod esp;
pub mod idl;
pub mod kernel_code;
pub mod kernels;
pub mod peers;
pub mod unet;
pub mod workload;
#[cfg(test)]
mod workload_tests;

use std::fmt::Write;

/// Machine description for the report header (CPU model, cores).
pub fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!("{model}, {cores} cores")
}

/// Runs the whole vcode codegen suite in this process and returns the
/// report (Markdown tables with ratios).
///
/// If the environment variable [`callgrind::CHILD_ENV`] is set, this
/// process is the counted child of the callgrind measurement: it runs
/// [`callgrind::child_main`] and exits.
pub fn codegen_report() -> String {
    if let Ok(mode) = std::env::var(callgrind::CHILD_ENV) {
        match callgrind::child_main(&mode, callgrind::FUNCS) {
            Ok(()) => std::process::exit(0),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        }
    }
    let mut out = String::new();
    let _ = writeln!(out, "# vcode codegen benchmarks\n\nmachine: {}", machine());
    if cfg!(debug_assertions) {
        let _ = writeln!(
            out,
            "\nWARNING: built without optimizations; the Rust kernels and all timings are meaningless. Use --release."
        );
    }
    out.push_str(&instructions_section());
    out.push_str(&peers_section(7));
    out.push_str(&kernels_section(kernels::Sizes::REPORT, 7));
    out
}

/// Section 1: callgrind counts, by re-running this executable as the child.
pub fn instructions_section() -> String {
    let mut out =
        String::from("\n## 1. Host instructions per generated instruction (callgrind)\n\n");
    let (nv, nf, ne) = match workload::instruction_counts() {
        Ok(c) => c,
        Err(e) => return out + &format!("workload failed: {e}\n"),
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => return out + &format!("skipped: cannot find this executable: {e}\n"),
    };
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let counts = match callgrind::measure(&exe, &args) {
        Ok(c) => c,
        Err(callgrind::Skip(why)) => return out + &format!("skipped: {why}\n"),
    };
    let ir = |m: &str| counts.iter().find(|c| c.mode == m).map_or(0, |c| c.ir);
    let n = callgrind::FUNCS as f64;
    let empty = ir("empty") as f64;
    let _ = writeln!(
        out,
        "{} functions of {nv} vcode instructions each (labels included); the empty function (`lambda`, `ret`, `end`) has {ne}.\n\
         Counted: everything inside the generation function (`lambda`, `getreg`, the instructions, `end` with linking into executable memory).\n",
        callgrind::FUNCS
    );
    let _ = writeln!(
        out,
        "| registers | Ir total | Ir per function | Ir per instruction (all in) | Ir per body instruction (minus empty function) | target |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
    for (mode, insns, target) in [("virtual", nv, 6.0), ("fixed", nf, 4.0)] {
        let t = ir(mode) as f64;
        let all = t / (n * insns as f64);
        let body = (t - empty) / (n * (insns - ne) as f64);
        let name = if mode == "virtual" {
            "virtual (`getreg`)"
        } else {
            "fixed names (`Reg::t`/`Reg::s`)"
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {:.0} | {all:.2} | {body:.2} | <= {target} ({}) |",
            ir(mode),
            t / n,
            if all <= target { "met" } else { "missed" }
        );
    }
    let _ = writeln!(
        out,
        "| empty function | {} | {:.0} | | | |",
        ir("empty"),
        empty / n
    );
    out
}

/// Section 2: generation speed of `mix` with vcode and the peers, `rounds`
/// interleaved rounds; the best per-function time of each is reported.
pub fn peers_section(rounds: usize) -> String {
    let mut out = String::from("\n## 2. Generation speed against peers (one run)\n\n");
    if let Err(e) = peers::verify_all() {
        return out + &format!("FAILED verification, not timed: {e}\n");
    }
    let insns = match peers::mix_instruction_count() {
        Ok(n) => n,
        Err(e) => return out + &format!("FAILED: {e}\n"),
    };
    let mut vf = vcode::Func::new();
    let mut cl = match (
        peers::Cranelift::new("none"),
        peers::Cranelift::new("speed"),
    ) {
        (Ok(a), Ok(b)) => [a, b],
        (Err(e), _) | (_, Err(e)) => return out + &format!("FAILED: cranelift: {e}\n"),
    };
    let batch = |i: usize| if i >= 5 { 20 } else { 200 };
    let mut best = [f64::MAX; peers::PEERS.len()];
    for _ in 0..rounds {
        for (i, b) in best.iter_mut().enumerate() {
            match peers::generate_batch(i, batch(i), &mut vf, &mut cl) {
                Ok(ns) => *b = b.min(ns / batch(i) as f64),
                Err(e) => return out + &format!("FAILED: {}: {e}\n", peers::PEERS[i]),
            }
        }
    }
    let _ = writeln!(
        out,
        "Function `mix` ({insns} vcode instructions, labels included; every generated function was run and checked against Rust first). \
         Time includes producing runnable code; best of {rounds} interleaved batches.\n"
    );
    let _ = writeln!(
        out,
        "| generator | ns per function | ns per instruction | time / vcode (getreg) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|");
    for (i, name) in peers::PEERS.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {name} | {:.0} | {:.1} | {:.2}x |",
            best[i],
            best[i] / insns as f64,
            best[i] / best[0]
        );
    }
    let (v, d, c) = (best[0], best[2], best[5]);
    let _ = writeln!(
        out,
        "\nTargets: vcode (getreg) at least as fast as dynasm-rs: {:.2}x dynasm-rs's speed ({}); >= 50x faster than cranelift-jit: {:.0}x ({}).",
        d / v,
        if v <= d { "met" } else { "missed" },
        c / v,
        if c / v >= 50.0 { "met" } else { "missed" }
    );
    out
}

/// Section 3: the kernels.
pub fn kernels_section(sizes: kernels::Sizes, rounds: usize) -> String {
    let mut out = String::from(
        "\n## 3. Generated-code quality: kernels, vcode against rustc -O (one run)\n\n",
    );
    let ks = match kernels::run_kernels(sizes, rounds) {
        Ok(k) => k,
        Err(e) => return out + &format!("FAILED: {e}\n"),
    };
    let _ = writeln!(
        out,
        "Best of {rounds} interleaved runs; vcode and Rust results checked equal on every run.\n"
    );
    let _ = writeln!(
        out,
        "| kernel | result | vcode µs | rustc µs | vcode speed / rustc | target |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---|");
    for k in &ks {
        let s = k.speed();
        let target = if k.vectorized {
            "context only".to_string()
        } else {
            format!(">= 67% ({})", if s >= 0.67 { "met" } else { "missed" })
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {:.1} | {:.0}% | {target} |",
            k.name,
            k.result,
            k.vcode_ns / 1e3,
            k.rust_ns / 1e3,
            100.0 * s
        );
    }
    out
}
