//! The dpf suite's kernel section: frames per second through dpf's table
//! lowered to an XDP program ([`dpf::ebpf`]) against the kernel's own
//! classic BPF, what `tcpdump` installs, on the same filters, both run in
//! the kernel by `BPF_PROG_TEST_RUN`.
//!
//! The classic side is libpcap's `pcap_compile` output for each filter
//! (DLT_EN10MB, optimized). bpf(2) loads only eBPF, and the kernel turns a
//! classic filter a socket attaches into eBPF itself (`bpf_convert_filter`):
//! [`classic_to_ebpf`] does the same instruction for instruction (A in
//! `r0`, X in `r7`, the scratch words on the stack, a zero divisor
//! returning 0, and a constant-offset packet load inlined as a direct load
//! when the bytes are in the packet's linear head, else the legacy
//! `LD_ABS`, whose helper call returns 0 from the filter when they are
//! missing; an indexed load is the legacy `LD_IND`). The kernel's
//! conversion reads the head's bounds from its `struct sk_buff`, which a
//! verified program cannot; this one reads `data` and `data_end` from the
//! `struct __sk_buff`, as direct packet access does. The program is
//! loaded as a tc classifier (`BPF_PROG_TYPE_SCHED_CLS`), not a socket
//! filter, because a socket filter's test run starts the packet at the
//! network header while a packet socket's filter sees the link header,
//! where libpcap's offsets count from; both types run the same legacy
//! loads on the same `struct __sk_buff`.
//!
//! With N filters, the classic side runs them one after another until one
//! accepts (as libpcap and rbpf do in the suite's main table; N packet
//! sockets would run all N for every frame), dpf runs one merged program.
//! A time is the kernel's own measure of one `BPF_PROG_TEST_RUN` call of
//! `repeat` runs: its timer around the loop, over `repeat`, in whole
//! nanoseconds (truncated: up to 1 ns low per program run), averaged over
//! the frames, one sample per round. Not the wall time of the call: an XDP
//! test run of more than one repetition switches the kernel's XDP
//! dispatcher to the program and back, which waits for an RCU grace period
//! (about 20 ms here), whatever the repeat count.

use crate::dpf::{filter, filters, packets};
use dpf::Table;
use dpf::ebpf::{OnAccept, XdpProgram};
use dpf::pcap::{BpfInsn, Libpcap};
use ebpf::{Alu, Asm, Cond, Insn, Label, ProgType, Reg, Src, TestRun, Width, xdp};

/// How much the kernel section measures.
#[derive(Debug, Clone, Copy)]
pub struct KernelBudget {
    /// The table sizes (endpoint filters; 1 is one filter alone, larger
    /// sizes add the suite's catch-all filters).
    pub sizes: &'static [usize],
    /// Frames per table size.
    pub frames: usize,
    /// Runs per `BPF_PROG_TEST_RUN` call.
    pub repeat: u32,
    /// Rounds; a cell's figure is their median.
    pub rounds: usize,
}

impl KernelBudget {
    /// About twenty seconds (most of it the XDP dispatcher's switches).
    pub const DEFAULT: KernelBudget = KernelBudget {
        sizes: &[1, 10, 100],
        frames: 32,
        repeat: 20_000,
        rounds: 7,
    };
    /// A smoke run of the same rows in a few seconds.
    pub const QUICK: KernelBudget = KernelBudget {
        sizes: &[1, 10, 100],
        frames: 8,
        repeat: 2_000,
        rounds: 3,
    };
}

/// One row: ns per frame of each side, one sample per round.
#[derive(Debug, Clone)]
pub struct KernelRow {
    /// Endpoint filters.
    pub n: usize,
    /// Filters in all (with the catch-alls).
    pub filters: usize,
    /// dpf's XDP program.
    pub xdp: Vec<f64>,
    /// The classic programs in turn.
    pub classic: Vec<f64>,
    /// The XDP program's length in instructions.
    pub xdp_insns: usize,
    /// The classic programs' total length in (classic) instructions.
    pub classic_insns: usize,
}

/// What the kernel section measured.
#[derive(Debug, Clone, Default)]
pub struct KernelMeasured {
    /// Why nothing was measured (no root, no bpf(2), no libpcap, or a
    /// disagreement between the two sides), if so.
    pub missing: Option<String>,
    /// One row per table size.
    pub rows: Vec<KernelRow>,
}

/// Translates a classic BPF program to eBPF as the kernel's
/// `bpf_convert_filter` does, for a program type with a `struct
/// __sk_buff` context and the legacy packet loads.
pub fn classic_to_ebpf(prog: &[BpfInsn]) -> Result<Vec<Insn>, String> {
    const A: Reg = Reg::R0;
    const X: Reg = Reg::R7;
    const TMP: Reg = Reg::R2;
    const D: Reg = Reg::R8;
    const E: Reg = Reg::R9;
    /// `offsetof(struct __sk_buff, data)`, `data_end`.
    const SKB_DATA: i16 = 76;
    const SKB_DATA_END: i16 = 80;
    // A = the big-endian field at k: inline from the head, else LD_ABS.
    let ld_abs = |a: &mut Asm, size: Width, k: u32| {
        let bytes = match size {
            Width::B => 1,
            Width::H => 2,
            _ => 4,
        };
        if k + bytes <= 0x7fff {
            let (slow, done) = (a.new_label(), a.new_label());
            a.mov64(TMP, Src::Reg(D));
            a.alu64(Alu::Add, TMP, Src::Imm((k + bytes) as i32));
            a.jmp(Cond::Gt, TMP, Src::Reg(E), slow);
            a.ldx(size, A, D, k as i16);
            if bytes > 1 {
                a.be(A, 8 * bytes as i32);
            }
            a.ja(done);
            a.bind(slow).expect("a fresh label");
            a.ld_abs(size, k as i32);
            a.bind(done).expect("a fresh label");
        } else {
            a.ld_abs(size, k as i32);
        }
    };
    let scratch = |k: u32| -> Result<i16, String> {
        if k < 16 {
            Ok(-64 + 4 * k as i16)
        } else {
            Err(format!("scratch word {k} out of range"))
        }
    };
    let mut a = Asm::new();
    let labels: Vec<Label> = (0..prog.len()).map(|_| a.new_label()).collect();
    // Only what is reachable is emitted (the verifier refuses the rest).
    let mut reach = vec![false; prog.len()];
    if !prog.is_empty() {
        reach[0] = true;
    }
    let target = |i: usize, d: u32| -> Result<usize, String> {
        let t = i + 1 + d as usize;
        if t < prog.len() {
            Ok(t)
        } else {
            Err(format!("instruction {i} jumps past the end"))
        }
    };
    for (i, insn) in prog.iter().enumerate() {
        if !reach[i] {
            continue;
        }
        let class = insn.code & 0x07;
        let op = insn.code & 0xf0;
        match class {
            0x06 => {}
            0x05 if op == 0x00 => reach[target(i, insn.k)?] = true,
            0x05 => {
                reach[target(i, u32::from(insn.jt))?] = true;
                reach[target(i, u32::from(insn.jf))?] = true;
            }
            _ if i + 1 < prog.len() => reach[i + 1] = true,
            _ => return Err(format!("instruction {i} falls off the end")),
        }
    }
    a.mov64(Reg::R6, Src::Reg(Reg::R1));
    a.mov32(A, Src::Imm(0));
    a.mov32(X, Src::Imm(0));
    a.ldx(Width::W, D, Reg::R6, SKB_DATA);
    a.ldx(Width::W, E, Reg::R6, SKB_DATA_END);
    for (i, insn) in prog.iter().enumerate() {
        if !reach[i] {
            continue;
        }
        a.bind(labels[i]).map_err(|e| e.to_string())?;
        let k = insn.k;
        let size = match insn.code & 0x18 {
            0x00 => Width::W,
            0x08 => Width::H,
            _ => Width::B,
        };
        let mode = insn.code & 0xe0;
        let src = if insn.code & 0x08 != 0 {
            Src::Reg(X)
        } else {
            Src::Imm(k as i32)
        };
        match insn.code & 0x07 {
            // LD
            0x00 => match mode {
                0x00 => a.mov32(A, Src::Imm(k as i32)),
                0x20 => ld_abs(&mut a, size, k),
                0x40 => a.ld_ind(size, X, k as i32),
                0x60 => a.ldx(Width::W, A, Reg::R10, scratch(k)?),
                0x80 => a.ldx(Width::W, A, Reg::R6, 0),
                _ => return Err(format!("instruction {i}: load mode {mode:#x}")),
            },
            // LDX
            0x01 => match mode {
                0x00 => a.mov32(X, Src::Imm(k as i32)),
                0x60 => a.ldx(Width::W, X, Reg::R10, scratch(k)?),
                0x80 => a.ldx(Width::W, X, Reg::R6, 0),
                0xa0 => {
                    // X = 4 * (pkt[k] & 0xf), A kept (in X meanwhile).
                    a.mov64(X, Src::Reg(A));
                    ld_abs(&mut a, Width::B, k);
                    a.alu32(Alu::And, A, Src::Imm(0xf));
                    a.alu32(Alu::Lsh, A, Src::Imm(2));
                    a.mov64(TMP, Src::Reg(X));
                    a.mov64(X, Src::Reg(A));
                    a.mov64(A, Src::Reg(TMP));
                }
                _ => return Err(format!("instruction {i}: ldx mode {mode:#x}")),
            },
            0x02 => a.stx(Width::W, Reg::R10, scratch(k)?, A),
            0x03 => a.stx(Width::W, Reg::R10, scratch(k)?, X),
            // ALU
            0x04 => {
                let alu = match insn.code & 0xf0 {
                    0x00 => Alu::Add,
                    0x10 => Alu::Sub,
                    0x20 => Alu::Mul,
                    0x30 => Alu::Div,
                    0x40 => Alu::Or,
                    0x50 => Alu::And,
                    0x60 => Alu::Lsh,
                    0x70 => Alu::Rsh,
                    0x80 => {
                        a.neg32(A);
                        continue;
                    }
                    0x90 => Alu::Mod,
                    0xa0 => Alu::Xor,
                    op => return Err(format!("instruction {i}: alu op {op:#x}")),
                };
                if matches!(alu, Alu::Div | Alu::Mod) && src == Src::Reg(X) {
                    // A zero divisor ends the filter with 0.
                    let ok = a.new_label();
                    a.jmp(Cond::Ne, X, Src::Imm(0), ok);
                    a.ret(0);
                    a.bind(ok).map_err(|e| e.to_string())?;
                }
                a.alu32(alu, A, src);
            }
            // JMP
            0x05 => {
                let op = insn.code & 0xf0;
                if op == 0x00 {
                    a.ja(labels[target(i, k)?]);
                    continue;
                }
                let cond = match op {
                    0x10 => Cond::Eq,
                    0x20 => Cond::Gt,
                    0x30 => Cond::Ge,
                    0x40 => Cond::Set,
                    _ => return Err(format!("instruction {i}: jump op {op:#x}")),
                };
                a.jmp32(cond, A, src, labels[target(i, u32::from(insn.jt))?]);
                a.ja(labels[target(i, u32::from(insn.jf))?]);
            }
            // RET
            0x06 => {
                if insn.code & 0x18 == 0x10 {
                    a.exit();
                } else {
                    a.ret(k as i32);
                }
            }
            // MISC: TAX, TXA
            _ => {
                if insn.code & 0xf8 == 0x00 {
                    a.mov32(X, Src::Reg(A));
                } else {
                    a.mov32(A, Src::Reg(X));
                }
            }
        }
    }
    // The labels of unreachable instructions stay unbound: no jump uses them.
    a.finish().map_err(|e| e.to_string())
}

/// One table size, loaded and checked.
struct Setup {
    n: usize,
    frames: Vec<Vec<u8>>,
    xdp: XdpProgram,
    classic: Vec<ebpf::Program>,
    /// Per frame, how many classic programs run (through the first that
    /// accepts, or all).
    runs: Vec<usize>,
    classic_insns: usize,
}

/// The programs of no filter on the frames of size `n`, the row `n = 0`:
/// dpf's empty table lowered (it loads the frame's bounds and passes) and
/// the classic `ret #0` converted; about the cost of a test run's loop
/// itself.
fn empty_setup(n: usize, frames: usize) -> Result<Setup, String> {
    let empty = Table::new();
    let xdp = XdpProgram::load(empty.classifier().merged(), &OnAccept::Return(xdp::TX))
        .map_err(|e| e.to_string())?;
    let ret0 = classic_to_ebpf(&[BpfInsn {
        code: 0x06,
        jt: 0,
        jf: 0,
        k: 0,
    }])?;
    let classic =
        vec![ebpf::Program::load(ProgType::SchedCls, &ret0, "classic").map_err(|e| e.to_string())?];
    let frames = packets(n, frames);
    let runs = vec![1; frames.len()];
    Ok(Setup {
        n: 0,
        frames,
        xdp,
        classic,
        runs,
        classic_insns: 1,
    })
}

fn setup(n: usize, frames: usize, pcap: &Libpcap) -> Result<Setup, String> {
    let sources: Vec<String> = if n == 1 { vec![filter(0)] } else { filters(n) };
    let mut table = Table::new();
    table
        .install_many(
            sources
                .iter()
                .enumerate()
                .map(|(i, f)| (f.as_str(), i as u32, 0)),
        )
        .map_err(|e| e.to_string())?;
    let xdp = XdpProgram::load(table.classifier().merged(), &OnAccept::Return(xdp::TX))
        .map_err(|e| e.to_string())?;
    if let Some(why) = xdp.fallback() {
        return Err(format!("{n} filters were not lowered: {why}"));
    }
    let mut compiled = Vec::new();
    let mut classic = Vec::new();
    let mut classic_insns = 0;
    for f in &sources {
        let bpf = pcap.compile(f).map_err(|e| format!("{f}: {e}"))?;
        classic_insns += bpf.insns().len();
        let insns = classic_to_ebpf(bpf.insns()).map_err(|e| format!("{f}: {e}"))?;
        classic.push(
            ebpf::Program::load(ProgType::SchedCls, &insns, "classic")
                .map_err(|e| format!("{f}: {e}"))?,
        );
        compiled.push(bpf);
    }
    let frames = packets(n, frames);
    let mut reader = table.reader();
    let mut runs = Vec::new();
    for f in &frames {
        let native = reader.classify(f).is_some();
        let kernel = xdp.test_accepts(f).map_err(|e| e.to_string())?;
        let mut first = None;
        for (i, p) in classic.iter().enumerate() {
            let v = p
                .test_run(&TestRun::new(f))
                .map_err(|e| e.to_string())?
                .verdict;
            if (v != 0) != compiled[i].matches(f) {
                return Err(format!(
                    "the classic program of «{}» disagrees with libpcap on a {}-byte frame",
                    sources[i],
                    f.len()
                ));
            }
            if v != 0 {
                first = Some(i);
                break;
            }
        }
        if kernel != native || first.is_some() != native {
            return Err(format!(
                "{n} filters: XDP {kernel}, native {native}, classic {} on a {}-byte frame",
                first.is_some(),
                f.len()
            ));
        }
        runs.push(first.map_or(classic.len(), |i| i + 1));
    }
    Ok(Setup {
        n,
        frames,
        xdp,
        classic,
        runs,
        classic_insns,
    })
}

/// ns per run of `p` on `frame`, by the kernel's timer over one call of
/// `repeat` runs.
fn time(p: &ebpf::Program, frame: &[u8], repeat: u32) -> Result<f64, ebpf::Error> {
    let out = p.test_run(&TestRun::new(frame).repeat(repeat))?;
    Ok(out.mean.as_nanos() as f64)
}

/// Measures the kernel section; `progress` hears about each step.
pub fn measure_kernel(budget: KernelBudget, mut progress: impl FnMut(&str)) -> KernelMeasured {
    let missing = |why: String| KernelMeasured {
        missing: Some(why),
        rows: Vec::new(),
    };
    if let Err(why) = ebpf::probe() {
        return missing(why);
    }
    let pcap = match Libpcap::load() {
        Ok(p) => p,
        Err(e) => return missing(format!("libpcap unavailable: {e}")),
    };
    progress("kernel: loading and checking the programs");
    let mut setups = Vec::new();
    match empty_setup(budget.sizes.first().copied().unwrap_or(1), budget.frames) {
        Ok(s) => setups.push(s),
        Err(why) => return missing(why),
    }
    for &n in budget.sizes {
        match setup(n, budget.frames, &pcap) {
            Ok(s) => setups.push(s),
            Err(why) => return missing(why),
        }
    }
    let mut rows: Vec<KernelRow> = setups
        .iter()
        .map(|s| KernelRow {
            n: s.n,
            filters: if s.n == 0 { 0 } else { s.classic.len() },
            xdp: Vec::new(),
            classic: Vec::new(),
            xdp_insns: s.xdp.program().len(),
            classic_insns: s.classic_insns,
        })
        .collect();
    for r in 0..budget.rounds {
        progress(&format!("kernel: round {} of {}", r + 1, budget.rounds));
        for (s, row) in setups.iter().zip(rows.iter_mut()) {
            let (mut xdp_ns, mut classic_ns) = (0.0, 0.0);
            for (f, &runs) in s.frames.iter().zip(&s.runs) {
                match time(s.xdp.program(), f, budget.repeat) {
                    Ok(t) => xdp_ns += t,
                    Err(e) => return missing(e.to_string()),
                }
                for p in &s.classic[..runs] {
                    match time(p, f, budget.repeat) {
                        Ok(t) => classic_ns += t,
                        Err(e) => return missing(e.to_string()),
                    }
                }
            }
            let frames = s.frames.len() as f64;
            row.xdp.push(xdp_ns / frames);
            row.classic.push(classic_ns / frames);
        }
    }
    KernelMeasured {
        missing: None,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The translation gives libpcap's verdicts, in the kernel, on the
    /// suite's filters and frames (root and libpcap needed; skipped with
    /// the reason otherwise, or failing under `UNET_REQUIRE_XDP=1`).
    #[test]
    fn classic_programs_translated_for_the_kernel_agree_with_libpcap() {
        let why = match (ebpf::probe(), Libpcap::load()) {
            (Ok(()), Ok(pcap)) => {
                let s = setup(10, 256, &pcap).unwrap();
                assert_eq!(s.frames.len(), 256);
                return;
            }
            (Err(why), _) => why,
            (_, Err(e)) => e.to_string(),
        };
        if std::env::var("UNET_REQUIRE_XDP").as_deref() == Ok("1") {
            panic!("UNET_REQUIRE_XDP=1 but {why}");
        }
        println!("skipped: {why}");
    }
}
