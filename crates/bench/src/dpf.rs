//! The dpf suite: the paper's §4.2 experiment (frames destined for one of
//! N filters, N = 10 as in the paper, then 100, 1,000 and 10,000; the
//! filters a mix of the paper's TCP/IP filter and libpcap's other
//! primitives, see [`filter`], plus the [`CATCH_ALL`] filters),
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

/// How many endpoint filters of the mix there are per cycle of classes
/// (see [`filter`]).
const CLASSES: usize = 8;

/// The catch-all filters installed after the `n` endpoint filters (so
/// ranked below every one of them), the same at every table size: what a
/// tcpdump user adds to take the rest of the traffic. `multicast` and the
/// port range have no equality every match needs, so the merged classifier
/// tests them for every frame.
pub const CATCH_ALL: [&str; 5] = [
    "broadcast",
    "multicast",
    "icmp6",
    "ether proto \\arp",
    "tcp dst portrange 6000-6063",
];

/// The port of endpoint filter `i`.
fn port(i: usize) -> u16 {
    1000 + i as u16
}

/// The two low bytes of endpoint filter `i`'s host or MAC address.
fn low(i: usize) -> (u8, u8) {
    let j = (i / CLASSES) as u16;
    ((j >> 8) as u8, j as u8)
}

/// The filter of endpoint `i`: a cycle of eight classes, as a tcpdump user
/// writes them for one endpoint each, every class a dispatch the merged
/// classifier must keep flat as the table grows. One in eight is the
/// paper's `tcp dst port P and dst host 10.0.0.1`; the others use the
/// primitives dpf took from libpcap later: a one-port `portrange`, a
/// partial network, `ip6 proto` with a protocol name, a MAC address, a
/// VLAN id, an EtherType name with an ARP host, a port name. (A range of
/// many ports is among the [`CATCH_ALL`] filters: it has no equality to
/// merge on, so many of them would be tested one after another.)
pub fn filter(i: usize) -> String {
    let (hi, lo) = low(i);
    let p = port(i);
    match i % CLASSES {
        0 => format!("tcp dst port {p} and dst host 10.0.0.1"),
        1 => format!("tcp dst portrange {p} and dst host 10.0.0.1"),
        2 => format!("udp dst port {p} and dst net 10.1"),
        3 => format!("ip6 proto \\tcp and dst port {p}"),
        4 => format!("ether dst 02:00:5e:00:{hi:02x}:{lo:02x}"),
        5 => format!("vlan {}", 1 + (i / CLASSES) % 4094),
        6 => format!("ether proto \\arp and arp dst host 10.2.{hi}.{lo}"),
        _ => format!("tcp dst port http and dst host 10.3.{hi}.{lo}"),
    }
}

/// The table's filters in rank order: the `n` endpoint filters, then
/// [`CATCH_ALL`]. Filter `k` is owned by `k`.
pub fn filters(n: usize) -> Vec<String> {
    (0..n)
        .map(filter)
        .chain(CATCH_ALL.iter().map(|s| s.to_string()))
        .collect()
}

/// An Ethernet frame of `len` bytes to `dst` with EtherType `ty`.
fn frame(dst: [u8; 6], ty: u16, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[..6].copy_from_slice(&dst);
    p[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x09]);
    p[12..14].copy_from_slice(&ty.to_be_bytes());
    p
}

/// A unicast MAC that no filter of the mix names.
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// An IPv4 frame (header without options at 14) to `dst`, protocol
/// `proto`, with the transport header's ports at 34.
fn ipv4(mac: [u8; 6], dst: [u8; 4], proto: u8, port: u16) -> Vec<u8> {
    let mut p = frame(mac, 0x0800, 64);
    p[14] = 0x45;
    p[16..18].copy_from_slice(&50u16.to_be_bytes());
    p[22] = 64;
    p[23] = proto;
    p[26..30].copy_from_slice(&[10, 0, 0, 9]);
    p[30..34].copy_from_slice(&dst);
    p[34..36].copy_from_slice(&40000u16.to_be_bytes());
    p[36..38].copy_from_slice(&port.to_be_bytes());
    p[46] = 0x50;
    p
}

/// A TCP/IP frame to 10.0.0.1, destination port `port`.
pub fn packet(port: u16) -> Vec<u8> {
    ipv4(HOST_MAC, [10, 0, 0, 1], 6, port)
}

/// An IPv6 frame, next header `nh`, destination port `port` (at 56).
fn ipv6(nh: u8, port: u16) -> Vec<u8> {
    let mut p = frame(HOST_MAC, 0x86dd, 78);
    p[14] = 0x60;
    p[18..20].copy_from_slice(&24u16.to_be_bytes());
    p[20] = nh;
    p[21] = 64;
    p[22..24].copy_from_slice(&[0xfd, 0]);
    p[38..40].copy_from_slice(&[0xfd, 0]);
    p[54..56].copy_from_slice(&40000u16.to_be_bytes());
    p[56..58].copy_from_slice(&port.to_be_bytes());
    p
}

/// An ARP request for `target` (sent to `mac`).
fn arp(mac: [u8; 6], target: [u8; 4]) -> Vec<u8> {
    let mut p = frame(mac, 0x0806, 60);
    p[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    p[22..28].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x09]);
    p[28..32].copy_from_slice(&[10, 0, 0, 9]);
    p[38..42].copy_from_slice(&target);
    p
}

/// A frame that endpoint filter `i` matches and no filter ranked before
/// it does.
pub fn frame_for(i: usize) -> Vec<u8> {
    let (hi, lo) = low(i);
    let p = port(i);
    match i % CLASSES {
        0 | 1 => packet(p),
        2 => ipv4(HOST_MAC, [10, 1, hi, lo], 17, p),
        3 => ipv6(6, p),
        4 => ipv4([0x02, 0, 0x5e, 0, hi, lo], [10, 9, 9, 9], 6, 9),
        5 => {
            let mut f = frame(HOST_MAC, 0x8100, 68);
            let vid = 1 + ((i / CLASSES) % 4094) as u16;
            f[14..16].copy_from_slice(&vid.to_be_bytes());
            f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
            f[18] = 0x45;
            f[27] = 17;
            f
        }
        6 => arp([0xff; 6], [10, 2, hi, lo]),
        _ => ipv4(HOST_MAC, [10, 3, hi, lo], 6, 80),
    }
}

/// A frame for catch-all filter `k` of [`CATCH_ALL`].
fn catch_all_frame(k: usize) -> Vec<u8> {
    match k {
        0 => ipv4([0xff; 6], [255, 255, 255, 255], 17, 67),
        1 => ipv4([0x01, 0, 0x5e, 0, 0, 0xfb], [224, 0, 0, 251], 17, 5353),
        2 => ipv6(58, 0x8000),
        3 => arp(HOST_MAC, [10, 9, 9, 9]),
        _ => ipv4(HOST_MAC, [10, 9, 9, 9], 6, 6010),
    }
}

/// A table of [`filters`]`(n)`, filter `k` owned by `k`.
pub fn table(n: usize) -> Table {
    let filters = filters(n);
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

/// `count` frames for the table of `n` endpoint filters, in a fixed
/// pseudo-random order: one in 16 for a catch-all filter (in turn), the
/// rest each for an endpoint filter drawn uniformly. The mix of classes
/// is thus the same at every `n`.
pub fn packets(n: usize, count: usize) -> Vec<Vec<u8>> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..count)
        .map(|k| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if k % 16 == 15 {
                catch_all_frame(k / 16 % CATCH_ALL.len())
            } else {
                frame_for((x % n as u64) as usize)
            }
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
    /// ten times as many for dpf, in 21 rounds: a dpf sample of 50,000
    /// classifications lasts a quarter of a millisecond (after its untimed
    /// warming pass), short enough that the scheduler's preemptions on this
    /// shared 2-core machine hit a minority of the rounds, which the median
    /// then ignores (7 rounds of 150,000 left N = 10 with 2 or more rounds
    /// preempted and a median no better than noise).
    pub const DEFAULT: Budget = Budget {
        sizes: &[10, 100, 1000, 10_000],
        trials: 105_000,
        dpf_trials: 1_050_000,
        rounds: 21,
        installs: 21,
    };
    /// A smoke run of the same rows in a few seconds: a tenth of the
    /// trials, 7 rounds.
    pub const QUICK: Budget = Budget {
        sizes: &[10, 100, 1000, 10_000],
        trials: 10_500,
        dpf_trials: 105_000,
        rounds: 7,
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

/// Everything one table size needs, built before any timing.
struct Setup<'a> {
    n: usize,
    table: Table,
    pkts: Vec<Vec<u8>>,
    pcap: Option<Vec<dpf::pcap::Bpf<'a>>>,
    vms: Vec<rbpf::EbpfVmMbuff<'a>>,
}

/// Runs the suite; `progress` hears about each step.
///
/// All table sizes are built first; then each round measures every size,
/// in turn (forwards in even rounds, backwards in odd ones, so that a
/// drift of the machine's speed during the run weighs on every size alike,
/// not on the size measured last). Each dpf sample follows one untimed
/// pass over the same 4,096 frames: the peers' columns, 10,000 programs
/// each at the largest size, evict the classifier's tables from the data
/// cache, and a sample should time classification, not re-warming.
pub fn measure_all(budget: Budget, mut progress: impl FnMut(&str)) -> Measured {
    let pcap = Libpcap::load();
    progress("building the tables");
    let filter_sets: Vec<Vec<String>> = budget.sizes.iter().map(|&n| filters(n)).collect();
    let bytecode: Vec<Vec<Vec<u8>>> = filter_sets
        .iter()
        .map(|fs| {
            fs.iter()
                .map(|f| to_ebpf(&dpf::compile(f).expect("dpf compiles the benchmark filters")))
                .collect()
        })
        .collect();
    let setups: Vec<Setup<'_>> = budget
        .sizes
        .iter()
        .zip(&filter_sets)
        .zip(&bytecode)
        .map(|((&n, fs), code)| setup(n, fs, code, pcap.as_ref().ok()))
        .collect();
    let mut rows: Vec<Row> = budget
        .sizes
        .iter()
        .map(|&n| Row {
            n,
            dpf: Vec::new(),
            dpf_single: Vec::new(),
            pcap: Vec::new(),
            rbpf: Vec::new(),
        })
        .collect();
    // One untimed round first: the first cell of a fresh process measured
    // up to half again as slow as the same cell later in the run (clock
    // ramp, first touches).
    progress("warming up");
    let warm = Budget {
        rounds: 1,
        ..budget
    };
    let mut scratch: Vec<Row> = rows.clone();
    for (s, row) in setups.iter().zip(scratch.iter_mut()) {
        round(s, warm, row);
    }
    for r in 0..budget.rounds {
        progress(&format!("round {} of {}", r + 1, budget.rounds));
        let order: Vec<usize> = if r % 2 == 0 {
            (0..setups.len()).collect()
        } else {
            (0..setups.len()).rev().collect()
        };
        for i in order {
            round(&setups[i], budget, &mut rows[i]);
        }
    }
    drop(setups);
    progress("install cost");
    let (install_us, code_bytes) = install_cost(budget.installs);
    Measured {
        pcap_missing: pcap.err().map(|e| e.to_string()),
        rows,
        install_us,
        code_bytes,
    }
}

/// The first filter of `programs` that `pkt` matches, by the reference
/// semantics: what every classifier of the benchmark must return.
fn first_match(programs: &[dpf::ir::Program], pkt: &[u8]) -> Option<usize> {
    programs.iter().position(|p| p.matches(pkt))
}

/// Builds table size `n` and checks that dpf, libpcap and rbpf all pick
/// the filter the reference semantics picks for its first frames.
fn setup<'a>(
    n: usize,
    filters: &[String],
    bytecode: &'a [Vec<u8>],
    pcap: Option<&'a Libpcap>,
) -> Setup<'a> {
    let table = table(n);
    let pkts = packets(n, 4096);
    let programs: Vec<dpf::ir::Program> = filters
        .iter()
        .map(|f| dpf::compile(f).expect("dpf compiles the benchmark filters"))
        .collect();
    let pcap_progs: Option<Vec<_>> = pcap.map(|lib| {
        filters
            .iter()
            .map(|f| {
                lib.compile(f)
                    .expect("libpcap compiles the benchmark filters")
            })
            .collect()
    });
    let vms: Vec<rbpf::EbpfVmMbuff<'_>> = bytecode
        .iter()
        .map(|b| {
            let mut vm = rbpf::EbpfVmMbuff::new(Some(b)).expect("rbpf verifies");
            vm.jit_compile().expect("rbpf JIT-compiles");
            vm
        })
        .collect();
    let mut reader = table.reader();
    for (i, p) in pkts.iter().enumerate().take(256) {
        let want = first_match(&programs, p);
        assert!(want.is_some(), "frame {i} of N = {n} matches a filter");
        assert_eq!(
            reader.classify(p).map(|o| o as usize),
            want,
            "dpf, frame {i} of N = {n}"
        );
        if let Some(progs) = &pcap_progs {
            let got = progs.iter().position(|b| b.run(p, p.len() as u32) != 0);
            assert_eq!(got, want, "libpcap, frame {i} of N = {n}");
        }
        let mut q = p.clone();
        let mut m = mbuff(&q);
        let got = vms.iter().position(|vm| run_jit(vm, &mut q, &mut m) != 0);
        assert_eq!(got, want, "rbpf, frame {i} of N = {n}");
    }
    Setup {
        n,
        table,
        pkts,
        pcap: pcap_progs,
        vms,
    }
}

/// One round of table size `s.n`: one sample of each column into `row`.
fn round(s: &Setup<'_>, budget: Budget, row: &mut Row) {
    let dpf_trials = budget.dpf_trials / budget.rounds;
    let peer_trials = budget.peer_trials(s.n);
    let pkts = &s.pkts;
    let mut reader = s.table.reader();
    let warm = |b: &dpf::Batch<'_>| {
        for p in pkts {
            black_box(b.classify(black_box(p)));
        }
    };
    // Many packets per code-cache scope, as a receive loop takes them.
    row.dpf.push(reader.batch(|b| {
        warm(b);
        time(dpf_trials, |i| {
            black_box(b.classify(black_box(&pkts[i & 4095])));
        })
    }));
    // One scope (enter, lookup, leave) per packet.
    reader.batch(warm);
    row.dpf_single.push(time(dpf_trials, |i| {
        black_box(reader.classify(black_box(&pkts[i & 4095])));
    }));
    if let Some(progs) = &s.pcap {
        row.pcap.push(time(peer_trials, |i| {
            let p = &pkts[i & 4095];
            black_box(progs.iter().position(|b| b.run(p, p.len() as u32) != 0));
        }));
    }
    let mut rbpf_pkts = pkts.clone();
    row.rbpf.push(time(peer_trials, |i| {
        let p = &mut rbpf_pkts[i & 4095];
        let mut m = mbuff(p);
        black_box(s.vms.iter().position(|vm| run_jit(vm, p, &mut m) != 0));
    }));
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
