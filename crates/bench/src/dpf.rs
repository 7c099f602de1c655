//! The dpf suite: the paper's §4.2 experiment (TCP/IP packets destined for
//! one of N filters, N = 10 as in the paper, then 100, 1,000 and 10,000),
//! dpf's merged native classifier against the filters run one after
//! another by libpcap's BPF interpreter (the role MPF and PATHFINDER play
//! in the paper) and by rbpf's JIT, plus the cost of installing one filter
//! into a table of 1,000.
//!
//! The eBPF programs for rbpf are translated here from the same lowered
//! filter programs dpf compiles, with an explicit bounds check before
//! every load (rbpf's JIT checks nothing), so all three run the same
//! tests with the same abort-on-short-load semantics.

use dpf::Table;
use dpf::ir::{ACCEPT, Base, Cmp, Node, Program, REJECT, Size};
use dpf::pcap::Libpcap;
use rbpf::ebpf;
use std::hint::black_box;
use std::time::Instant;

/// The filter of endpoint `i` of `n`: one TCP port on one host.
pub fn filter(i: usize) -> String {
    format!("tcp dst port {} and dst host 10.0.0.1", 1000 + i)
}

/// A TCP/IP frame to 10.0.0.1, destination port `port`.
pub fn packet(port: u16) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    p[14] = 0x45;
    p[16..18].copy_from_slice(&50u16.to_be_bytes());
    p[22] = 64;
    p[23] = 6;
    p[26..30].copy_from_slice(&[10, 0, 0, 9]);
    p[30..34].copy_from_slice(&[10, 0, 0, 1]);
    p[34..36].copy_from_slice(&40000u16.to_be_bytes());
    p[36..38].copy_from_slice(&port.to_be_bytes());
    p[46] = 0x50;
    p
}

/// A table of the first `n` benchmark filters, filter `i` owned by `i`.
pub fn table(n: usize) -> Table {
    let filters: Vec<String> = (0..n).map(filter).collect();
    let mut table = Table::new();
    table
        .install_many(
            filters
                .iter()
                .enumerate()
                .map(|(i, f)| (f.as_str(), i as u32, 0)),
        )
        .expect("the benchmark filters compile");
    table
}

/// `count` packets, each destined for one of the first `n` filters, in a
/// fixed pseudo-random order.
pub fn packets(n: usize, count: usize) -> Vec<Vec<u8>> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..count)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            packet(1000 + (x % n as u64) as u16)
        })
        .collect()
}

/// One eBPF instruction.
fn insn(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = op;
    b[1] = dst | src << 4;
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    b
}

/// Translates a filter program to eBPF for rbpf's `EbpfVmFixedMbuff`
/// with the packet's start at mbuff offset 0 and its end at 8. Returns 1
/// for a match and 0 otherwise. Tests of computed values (`len`,
/// arithmetic: `Base::Value`) are not translated and reject; the
/// benchmark's filters have none.
///
/// Registers: r2 = packet start, r3 = packet end, r4 = base of a load,
/// r5 = scratch for bounds, r0 = the loaded field, r6 = a large constant.
pub fn to_ebpf(p: &Program) -> Vec<u8> {
    let mut code: Vec<[u8; 8]> = vec![
        insn(ebpf::LD_DW_REG, 2, 1, 0, 0),
        insn(ebpf::LD_DW_REG, 3, 1, 8, 0),
    ];
    // (instruction index, target node): jumps patched once blocks are placed.
    let mut jumps: Vec<(usize, u32)> = Vec::new();
    let mut start = vec![0usize; p.nodes.len()];
    let mut jump = |code: &mut Vec<[u8; 8]>, op: u8, dst: u8, src: u8, imm: i32, to: u32| {
        jumps.push((code.len(), to));
        code.push(insn(op, dst, src, 0, imm));
    };
    if p.root != 2 {
        jump(&mut code, ebpf::JA, 0, 0, 0, p.root);
    }
    for (i, node) in p.nodes.iter().enumerate().skip(2) {
        let Node::Test { test, then, els } = *node else {
            continue;
        };
        start[i] = code.len();
        let f = test.field;
        match f.base {
            // Not translated: the test rejects (see the function's docs).
            Base::Value(_) => {
                jump(&mut code, ebpf::JA, 0, 0, 0, REJECT);
                continue;
            }
            Base::Link => code.push(insn(ebpf::MOV64_REG, 4, 2, 0, 0)),
            Base::Transport => {
                code.push(insn(ebpf::MOV64_REG, 5, 2, 0, 0));
                code.push(insn(ebpf::ADD64_IMM, 5, 0, 0, 15));
                jump(&mut code, ebpf::JGT_REG, 5, 3, 0, REJECT);
                code.push(insn(ebpf::LD_B_REG, 4, 2, 14, 0));
                code.push(insn(ebpf::AND64_IMM, 4, 0, 0, 0x0f));
                code.push(insn(ebpf::LSH64_IMM, 4, 0, 0, 2));
                code.push(insn(ebpf::ADD64_REG, 4, 2, 0, 0));
                code.push(insn(ebpf::ADD64_IMM, 4, 0, 0, 14));
            }
        }
        let end = f.offset as i64 + f.size as i64;
        code.push(insn(ebpf::MOV64_REG, 5, 4, 0, 0));
        code.push(insn(ebpf::ADD64_IMM, 5, 0, 0, end as i32));
        jump(&mut code, ebpf::JGT_REG, 5, 3, 0, REJECT);
        let (ld, swap) = match f.size {
            Size::B => (ebpf::LD_B_REG, 0),
            Size::H => (ebpf::LD_H_REG, 16),
            Size::W => (ebpf::LD_W_REG, 32),
        };
        code.push(insn(ld, 0, 4, f.offset as i16, 0));
        if swap != 0 {
            code.push(insn(ebpf::BE, 0, 0, 0, swap));
        }
        if test.mask != u32::MAX {
            code.push(insn(ebpf::AND64_IMM, 0, 0, 0, test.mask as i32));
        }
        // Immediates are sign-extended: constants of 2^31 and up go
        // through r6 (two-slot lddw).
        let big = test.value >= 1 << 31 && test.cmp != Cmp::Set;
        if big {
            code.push(insn(ebpf::LD_DW_IMM, 6, 0, 0, test.value as i32));
            code.push(insn(0, 0, 0, 0, 0));
        }
        let op = match (test.cmp, big) {
            (Cmp::Eq, false) => ebpf::JEQ_IMM,
            (Cmp::Eq, true) => ebpf::JEQ_REG,
            (Cmp::Gt, false) => ebpf::JGT_IMM,
            (Cmp::Gt, true) => ebpf::JGT_REG,
            (Cmp::Ge, false) => ebpf::JGE_IMM,
            (Cmp::Ge, true) => ebpf::JGE_REG,
            (Cmp::Set, _) => ebpf::JSET_IMM,
        };
        jump(&mut code, op, 0, 6 * big as u8, test.value as i32, then);
        if els as usize != i + 1 {
            jump(&mut code, ebpf::JA, 0, 0, 0, els);
        }
    }
    start[REJECT as usize] = code.len();
    code.push(insn(ebpf::MOV64_IMM, 0, 0, 0, 0));
    code.push(insn(ebpf::EXIT, 0, 0, 0, 0));
    start[ACCEPT as usize] = code.len();
    code.push(insn(ebpf::MOV64_IMM, 0, 0, 0, 1));
    code.push(insn(ebpf::EXIT, 0, 0, 0, 0));
    for (at, to) in jumps {
        let off = start[to as usize] as i64 - at as i64 - 1;
        code[at][2..4].copy_from_slice(&(off as i16).to_le_bytes());
    }
    code.concat()
}

/// The metadata buffer `to_ebpf`'s programs read: the packet's start at
/// offset 0 and its end at offset 8.
pub fn mbuff(p: &[u8]) -> [u8; 16] {
    let range = p.as_ptr_range();
    let mut m = [0u8; 16];
    m[..8].copy_from_slice(&(range.start as u64).to_le_bytes());
    m[8..].copy_from_slice(&(range.end as u64).to_le_bytes());
    m
}

/// Runs a `to_ebpf` program with rbpf's JIT on `p`, whose `mbuff` is
/// `mbuff(p)`.
pub fn run_jit(vm: &rbpf::EbpfVmMbuff<'_>, p: &mut [u8], mbuff: &mut [u8; 16]) -> u64 {
    // SAFETY: `to_ebpf` programs read only the mbuff's two pointers and
    // packet bytes in [start, end) of those pointers, each load preceded by
    // a bounds check against the end; `mbuff` describes `p`.
    unsafe { vm.execute_program_jit(p, mbuff) }.expect("rbpf runs")
}

/// How much a run measures.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// The table sizes (filters installed), one row each.
    pub sizes: &'static [usize],
    /// Classifications timed per peer cell, over all rounds (at N = 10,000,
    /// a tenth of it: the peers run 10,000 filters per packet).
    pub trials: usize,
    /// Classifications timed per dpf cell, over all rounds.
    pub dpf_trials: usize,
    /// Interleaved rounds per cell; a cell's figure is their median.
    pub rounds: usize,
    /// Install-and-remove rounds of the install cost.
    pub installs: usize,
}

impl Budget {
    /// The paper's 100,000 trials per peer cell (rounded to whole rounds),
    /// ten times as many for dpf, so that a round lasts most of a
    /// millisecond: in the 60 to 130 µs a round of 15,000 took, re-warming
    /// the classifier's value table after the peers' columns had evicted it
    /// (and any interrupt on this shared machine) weighed as much as the
    /// classifications.
    pub const DEFAULT: Budget = Budget {
        sizes: &[10, 100, 1000, 10_000],
        trials: 105_000,
        dpf_trials: 1_050_000,
        rounds: 7,
        installs: 21,
    };
    /// A smoke run of the same rows in a second or two: a tenth of the
    /// trials, 5 rounds.
    pub const QUICK: Budget = Budget {
        sizes: &[10, 100, 1000, 10_000],
        trials: 10_500,
        dpf_trials: 105_000,
        rounds: 5,
        installs: 5,
    };

    /// Peer classifications timed per round at `n` filters.
    pub fn peer_trials(&self, n: usize) -> usize {
        let t = self.trials / self.rounds;
        if n >= 10_000 { t / 10 } else { t }
    }
}

/// Nanoseconds per call of `f` over `trials` calls, `f` taking the trial
/// number.
fn time(trials: usize, mut f: impl FnMut(usize)) -> f64 {
    let t = Instant::now();
    for i in 0..trials {
        f(i);
    }
    t.elapsed().as_nanos() as f64 / trials as f64
}

/// One row of the report: ns per packet of each column, one sample per
/// round.
#[derive(Debug, Clone)]
pub struct Row {
    /// Filters installed.
    pub n: usize,
    /// dpf, many packets per code-cache scope.
    pub dpf: Vec<f64>,
    /// dpf, one scope (enter, lookup, leave) per packet.
    pub dpf_single: Vec<f64>,
    /// libpcap's BPF interpreter running the filters in turn (empty
    /// without libpcap).
    pub pcap: Vec<f64>,
    /// rbpf's JIT running the filters in turn.
    pub rbpf: Vec<f64>,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Why libpcap's column is empty, if it is.
    pub pcap_missing: Option<String>,
    /// One row per table size of the budget.
    pub rows: Vec<Row>,
    /// µs to install one filter into a table of 1,000 (parse, merge,
    /// generate, publish), one sample per install-and-remove round.
    pub install_us: Vec<f64>,
    /// The classifier's code size in bytes at 1,000 filters.
    pub code_bytes: usize,
}

/// Runs the suite; `progress` hears about each step.
pub fn measure_all(budget: Budget, mut progress: impl FnMut(&str)) -> Measured {
    let pcap = Libpcap::load();
    // One untimed pass first: the first cell of a fresh process measured
    // up to half again as slow as the same cell later in the run (clock
    // ramp, first touches), which made N = 10 look slower than N = 10,000.
    progress("warming up");
    let warm = Budget {
        rounds: 1,
        ..budget
    };
    measure(10, pcap.as_ref().ok(), warm);
    let mut rows = Vec::new();
    for &n in budget.sizes {
        progress(&format!("N = {n}"));
        rows.push(measure(n, pcap.as_ref().ok(), budget));
    }
    progress("install cost");
    let (install_us, code_bytes) = install_cost(budget.installs);
    Measured {
        pcap_missing: pcap.err().map(|e| e.to_string()),
        rows,
        install_us,
        code_bytes,
    }
}

fn measure(n: usize, pcap: Option<&Libpcap>, budget: Budget) -> Row {
    let filters: Vec<String> = (0..n).map(filter).collect();
    let table = table(n);
    let pkts = packets(n, 4096);
    let mut reader = table.reader();
    for (i, p) in pkts.iter().enumerate().take(64) {
        let want = (u16::from_be_bytes([p[36], p[37]]) - 1000) as u32;
        assert_eq!(reader.classify(p), Some(want), "packet {i}");
    }
    let pcap_progs: Option<Vec<_>> = pcap.map(|lib| {
        filters
            .iter()
            .map(|f| {
                lib.compile(f)
                    .expect("libpcap compiles the benchmark filters")
            })
            .collect()
    });
    let bytecode: Vec<Vec<u8>> = filters
        .iter()
        .map(|f| to_ebpf(&dpf::compile(f).expect("dpf compiles the benchmark filters")))
        .collect();
    let vms: Vec<rbpf::EbpfVmMbuff<'_>> = bytecode
        .iter()
        .map(|b| {
            let mut vm = rbpf::EbpfVmMbuff::new(Some(b)).expect("rbpf verifies");
            vm.jit_compile().expect("rbpf JIT-compiles");
            vm
        })
        .collect();
    let mut rbpf_pkts = pkts.clone();
    let first = |p: &mut [u8]| {
        let mut mbuff = mbuff(p);
        vms.iter().position(|vm| run_jit(vm, p, &mut mbuff) != 0)
    };
    for p in rbpf_pkts.iter_mut().take(64) {
        let want = (u16::from_be_bytes([p[36], p[37]]) - 1000) as usize;
        assert_eq!(first(p), Some(want));
    }
    // Rounds, each timing every column in turn (so that a burst of load on
    // this shared machine hits one round, not one column).
    let dpf_trials = budget.dpf_trials / budget.rounds;
    let peer_trials = budget.peer_trials(n);
    let mut cols: [Vec<f64>; 4] = Default::default();
    for _ in 0..budget.rounds {
        // Many packets per code-cache scope, as a receive loop takes them.
        cols[0].push(reader.batch(|b| {
            time(dpf_trials, |i| {
                black_box(b.classify(black_box(&pkts[i & 4095])));
            })
        }));
        // One scope (enter, lookup, leave) per packet.
        cols[1].push(time(dpf_trials, |i| {
            black_box(reader.classify(black_box(&pkts[i & 4095])));
        }));
        if let Some(progs) = &pcap_progs {
            cols[2].push(time(peer_trials, |i| {
                let p = &pkts[i & 4095];
                black_box(progs.iter().position(|b| b.run(p, p.len() as u32) != 0));
            }));
        }
        cols[3].push(time(peer_trials, |i| {
            black_box(first(&mut rbpf_pkts[i & 4095]));
        }));
    }
    let [dpf, dpf_single, pcap, rbpf] = cols;
    Row {
        n,
        dpf,
        dpf_single,
        pcap,
        rbpf,
    }
}

/// Microseconds to install one filter into a table of 1,000, one sample
/// per install-and-remove round, and the table's code size.
fn install_cost(rounds: usize) -> (Vec<f64>, usize) {
    let mut table = table(1000);
    let mut times = Vec::new();
    for round in 0..rounds {
        let f = filter(5000 + round);
        let t = Instant::now();
        let id = table.install(&f, 9999, 0).expect("installs");
        times.push(t.elapsed().as_secs_f64() * 1e6);
        table.remove(id).expect("removes");
    }
    let size = table.code_listing().map_or(0, |c| c.0);
    (times, size)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The eBPF translation agrees with the reference semantics, on the
    /// benchmark's filters and on truncated packets.
    #[test]
    fn ebpf_translation_agrees_with_the_program() {
        for src in [
            filter(3),
            "tcp[13] & 0x12 != 0".into(),
            "ip[16:4] > 0x80000000 or not udp".into(),
            "portrange 1000-1005".into(),
        ] {
            let p = dpf::compile(&src).unwrap();
            let code = to_ebpf(&p);
            let mut vm = rbpf::EbpfVmMbuff::new(Some(&code)).unwrap();
            vm.jit_compile().unwrap();
            for port in [1000u16, 1003, 1004, 80] {
                let full = packet(port);
                for cut in [64, 38, 37, 36, 30, 15, 14, 13] {
                    let mut pkt = full[..cut].to_vec();
                    let want = p.matches(&pkt);
                    let mut m = mbuff(&pkt);
                    let jit = run_jit(&vm, &mut pkt, &mut m) != 0;
                    assert_eq!(jit, want, "{src} port {port} cut {cut}");
                }
            }
        }
    }
}
