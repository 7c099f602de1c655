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
//! [`measure_instructions`], [`measure_peers`] and
//! [`kernels::run_kernels`] measure the three in one process;
//! `fastpath bench codegen` prints them as tables with ratios (or JSON) and
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
//! * `ebpf`: the dpf suite's kernel section ([`dpf_kernel`]) loads and
//!   test-runs dpf's XDP program and the classic filters it is compared
//!   with through bpf(2).
//! * `vcode-kernels`: the vcode generation workload and the kernels
//!   ([`workload`], [`kernel_code`]), shared with vcode's tests.
//! * `criterion` (dev): the `benches/codegen.rs` harness.

pub mod callgrind;
pub mod client;
pub mod dpf;
pub mod dpf_kernel;
pub mod esp;
pub mod idl;
pub mod kernels;
pub mod peers;
pub mod unet;

// The workload and the kernels live in `vcode-kernels`, which vcode's own
// tests share; re-exported under their old paths.
pub use vcode_kernels::{kernel_code, workload};

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

/// If the environment variable [`callgrind::CHILD_ENV`] is set, this
/// process is the counted child of the callgrind measurement: runs
/// [`callgrind::child_main`] and exits. A binary that runs the codegen
/// suite calls this first.
pub fn codegen_child_dispatch() {
    if let Ok(mode) = std::env::var(callgrind::CHILD_ENV) {
        match callgrind::child_main(&mode, callgrind::FUNCS) {
            Ok(()) => std::process::exit(0),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        }
    }
}

/// Section 1's measurement: callgrind's instruction totals of generating
/// [`callgrind::FUNCS`] functions in each mode.
#[derive(Debug, Clone)]
pub struct InstructionCounts {
    /// vcode instructions of the workload function with virtual registers
    /// (`getreg`), with fixed names, and of the empty function.
    pub insns: [usize; 3],
    /// The totals per mode ([`callgrind::MODES`]).
    pub counts: Vec<callgrind::Count>,
}

impl InstructionCounts {
    /// The total of `mode`, if counted.
    pub fn ir(&self, mode: &str) -> Option<u64> {
        self.counts.iter().find(|c| c.mode == mode).map(|c| c.ir)
    }
}

/// Counts the instructions of generation under callgrind, by re-running
/// this executable (with its arguments) as the counted child; or why not.
pub fn measure_instructions() -> Result<InstructionCounts, String> {
    let (nv, nf, ne) =
        workload::instruction_counts().map_err(|e| format!("workload failed: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let counts = callgrind::measure(&exe, &args).map_err(|callgrind::Skip(why)| why)?;
    Ok(InstructionCounts {
        insns: [nv, nf, ne],
        counts,
    })
}

/// Section 2's measurement: ns per generated function of `mix`, each peer
/// of [`peers::PEERS`] one sample per round.
#[derive(Debug, Clone)]
pub struct PeerTimes {
    /// vcode instructions of `mix`, labels included.
    pub insns: usize,
    /// Per peer, per round: ns per function over the round's batch.
    pub ns_per_function: Vec<Vec<f64>>,
}

/// Times `rounds` interleaved rounds of generating `mix` with vcode and
/// every peer, after checking that each peer's function runs and agrees
/// with Rust; or why not.
pub fn measure_peers(rounds: usize) -> Result<PeerTimes, String> {
    peers::verify_all().map_err(|e| format!("verification failed, not timed: {e}"))?;
    let insns = peers::mix_instruction_count().map_err(|e| e.to_string())?;
    let mut vf = vcode::Func::new();
    let mut cl = match (
        peers::Cranelift::new("none"),
        peers::Cranelift::new("speed"),
    ) {
        (Ok(a), Ok(b)) => [a, b],
        (Err(e), _) | (_, Err(e)) => return Err(format!("cranelift: {e}")),
    };
    let batch = |i: usize| if i >= 5 { 20 } else { 200 };
    let mut samples = vec![Vec::new(); peers::PEERS.len()];
    for _ in 0..rounds {
        for (i, s) in samples.iter_mut().enumerate() {
            let ns = peers::generate_batch(i, batch(i), &mut vf, &mut cl)
                .map_err(|e| format!("{}: {e}", peers::PEERS[i]))?;
            s.push(ns / batch(i) as f64);
        }
    }
    Ok(PeerTimes {
        insns,
        ns_per_function: samples,
    })
}
