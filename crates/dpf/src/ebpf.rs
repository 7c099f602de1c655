//! The merged table lowered to eBPF: an XDP program that runs dpf's
//! classifier in the kernel's driver path, so that only frames some
//! installed filter accepts leave the kernel's stack for the engine.
//!
//! # What the program computes
//!
//! The XDP program answers one question per frame: does *any* filter of
//! the table match? Which one (priority, owner) is the engine's business,
//! decided again by the native classifier once the frame is in user
//! space, so the program needs no ranks and stops at the first match it
//! finds. On a match it runs [`OnAccept`]: `bpf_redirect_map(xsks,
//! ctx->rx_queue_index, XDP_PASS)` into an XSKMAP of AF_XDP sockets, or a
//! fixed return code (for tests and benchmarks); otherwise it returns
//! `XDP_PASS`.
//!
//! It walks the trie of [`Merged`] as [`Merged::classify`] does: at each
//! node the filters whose atoms all hold (one without a residual accepts
//! at once; one with a residual runs it, an abort or a rejection going on
//! to the next), then the dispatch (one load, then a binary tree of
//! 32-bit compares over the arms' constants, since eBPF has no indirect
//! jump), then the wild chain. Each trie node, and each residual node, is
//! emitted once; every jump goes forward, so the program has no loop.
//!
//! # The verifier's rules
//!
//! Every packet load is preceded on its path by a bounds check the
//! verifier understands: a packet pointer `data + offset + size` compared
//! with `data_end`. A transport-relative field is read through `data +
//! 4 * IHL` (a variable offset the verifier bounds to 0..=60 from the
//! `& 0xf` and the shift) after a check on the IHL byte itself. A computed
//! load's index (`ip[x]` in a computed value) is first compared with the
//! largest index that can be in a frame, which bounds it for the verifier.
//! The verifier refuses any packet offset beyond 65,535, and the linear
//! part of an XDP frame is at most a page, so a load that could only
//! succeed in a frame longer than 65,535 - 60 bytes is lowered to "out of
//! bounds" (the verdict dpf gives any frame too short for it).
//!
//! Computed values ([`crate::ir::Base::Value`]) are evaluated on the
//! program's stack (an eight-byte slot per postfix stack entry, at most
//! [`MAX_VALUE_DEPTH`]), with dpf's semantics: 32-bit wrapping arithmetic,
//! a zero divisor or an out-of-bounds load making the filter reject, a
//! shift by 32 or more giving 0, `len` read with `bpf_xdp_get_buff_len`.
//!
//! # When the table cannot be lowered
//!
//! A table whose program the lowering cannot build ([`Unlowerable`]) or
//! the verifier refuses (a table so large its paths exceed the verifier's
//! budget) falls back to a program that sends *every* frame to the engine
//! ([`Fallback`] says why): correct, since the engine classifies again,
//! only slower. [`XdpProgram::fallback`] reports it.
//!
//! # Keeping in step with the table
//!
//! [`XdpFilter`] attaches the program to an interface through a BPF link
//! and [`XdpFilter::sync`] rebuilds it from the table's published
//! classifier and swaps it in with `BPF_LINK_UPDATE`: every frame is
//! classified by the old program or the new one, never by neither. Call it
//! after each install or removal.

use crate::ir::{
    ACCEPT, Base, Cmp, Geneve, GeneveLayer, LoadBase, Node, Op, Program, REJECT, Size, Test,
};
use crate::merge::{Dispatch, MNodeId, Merged};
use crate::table::Table;
use ebpf::{Alu, Asm, Cond, Helper, Insn, Label, Reg, Src, Width, xdp, xdp_md};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use thiserror::Error;

/// The deepest evaluation stack of a computed value the lowering takes:
/// 64 eight-byte slots fill the 512-byte eBPF stack.
pub const MAX_VALUE_DEPTH: usize = 64;

/// The largest packet offset the verifier accepts (`MAX_PACKET_OFF`).
const MAX_PACKET_OFF: u32 = 0xffff;

/// `bpf_xdp_get_buff_len(ctx)`.
const XDP_GET_BUFF_LEN: Helper = Helper(188);

/// Registers: the frame's start and end (packet pointers), the context,
/// and a scratch packet pointer. `r0`-`r5` are scratch (a helper call
/// clobbers `r1`-`r5`).
const DATA: Reg = Reg::R6;
const DATA_END: Reg = Reg::R7;
const PTR: Reg = Reg::R8;
const CTX: Reg = Reg::R9;

/// What the program does with a frame some filter accepts.
#[derive(Clone, Debug)]
pub enum OnAccept {
    /// `bpf_redirect_map(map, ctx->rx_queue_index, XDP_PASS)`: to the
    /// AF_XDP socket of the frame's queue, or to the kernel's stack when
    /// that queue has none.
    Redirect(Arc<ebpf::Map>),
    /// Return this verdict (e.g. [`xdp::TX`] in tests, to tell accepted
    /// frames from passed ones).
    Return(u32),
}

/// Why a table could not be lowered.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Unlowerable {
    /// A computed value needs a deeper evaluation stack than eBPF's.
    #[error(
        "filter {rank} (rank order) computes a value {depth} entries deep; eBPF's stack holds {limit}"
    )]
    ValueTooDeep {
        /// The filter's rank.
        rank: u32,
        /// The depth it needs.
        depth: usize,
        /// [`MAX_VALUE_DEPTH`].
        limit: usize,
    },
    /// The program does not assemble (over the kernel's instruction limit).
    #[error("the program does not assemble: {0}")]
    Assembly(#[from] ebpf::AsmError),
}

/// Why a table runs on the every-frame-to-the-engine program.
#[derive(Debug, Error)]
pub enum Fallback {
    /// The lowering could not build the program.
    #[error("the table cannot be lowered to eBPF: {0}")]
    Lowering(#[from] Unlowerable),
    /// The kernel refused the lowered program (the verifier's log is in
    /// the error).
    #[error("the kernel refused the lowered table: {0}")]
    Kernel(ebpf::Error),
}

/// Lowers a merged table to XDP instructions (see the module docs).
pub fn lower(m: &Merged, on_accept: &OnAccept) -> Result<Vec<Insn>, Unlowerable> {
    let mut e = Emit::new();
    let accept = e.label();
    let pass = e.label();
    e.a.mov64(CTX, Src::Reg(Reg::R1));
    e.a.ldx(Width::W, DATA, Reg::R1, xdp_md::DATA);
    e.a.ldx(Width::W, DATA_END, Reg::R1, xdp_md::DATA_END);
    if let Some(root) = m.root {
        let mut l = Lower {
            e: &mut e,
            m,
            accept,
        };
        l.node(root)?;
    }
    e.bind(pass);
    e.ret(xdp::PASS);
    e.bind(accept);
    if e.live {
        emit_accept(&mut e.a, on_accept);
        e.live = false;
    }
    Ok(e.a.finish()?)
}

/// The program that sends every frame to the engine.
pub fn accept_all(on_accept: &OnAccept) -> Vec<Insn> {
    let mut a = Asm::new();
    a.mov64(CTX, Src::Reg(Reg::R1));
    emit_accept(&mut a, on_accept);
    a.finish()
        .expect("a straight-line program of a few instructions assembles")
}

fn emit_accept(a: &mut Asm, on_accept: &OnAccept) {
    match on_accept {
        OnAccept::Redirect(map) => {
            a.ldx(Width::W, Reg::R2, CTX, xdp_md::RX_QUEUE_INDEX);
            a.ld_map_fd(Reg::R1, map.fd().as_raw_fd());
            a.mov64(Reg::R3, Src::Imm(xdp::PASS as i32));
            a.call(Helper::REDIRECT_MAP);
            a.exit();
        }
        OnAccept::Return(v) => a.ret(*v as i32),
    }
}

/// A table's XDP program, loaded: the lowered classifier, or the
/// every-frame program with the reason.
#[derive(Debug)]
pub struct XdpProgram {
    program: ebpf::Program,
    fallback: Option<Fallback>,
}

impl XdpProgram {
    /// Lowers and loads the classifier of `m`; when that fails (see
    /// [`Fallback`]), loads [`accept_all`] instead. An error only when the
    /// kernel refuses even that (no privilege, no bpf(2)).
    pub fn load(m: &Merged, on_accept: &OnAccept) -> Result<XdpProgram, ebpf::Error> {
        XdpProgram::load_with(m, on_accept, false)
    }

    /// [`XdpProgram::load`], loaded with `BPF_F_XDP_HAS_FRAGS` when
    /// `frags` ([`ebpf::Program::load_xdp_frags`]). The lowered code is
    /// the same: its packet pointers then cover a multi-buffer frame's
    /// first buffer (a page less the driver's headroom), so a filter that
    /// tests a byte past it finds the frame too short there and does not
    /// accept it; headers, all the engine's filters read, always lie in
    /// the first buffer.
    pub fn load_with(
        m: &Merged,
        on_accept: &OnAccept,
        frags: bool,
    ) -> Result<XdpProgram, ebpf::Error> {
        let load = |insns: &[ebpf::Insn], name: &str| {
            if frags {
                ebpf::Program::load_xdp_frags(insns, name)
            } else {
                ebpf::Program::load_xdp(insns, name)
            }
        };
        let fallback = match lower(m, on_accept) {
            Ok(insns) => match load(&insns, "dpf_table") {
                Ok(program) => {
                    return Ok(XdpProgram {
                        program,
                        fallback: None,
                    });
                }
                Err(e) if e.is_unsupported() => return Err(e),
                Err(e) => Fallback::Kernel(e),
            },
            Err(e) => Fallback::Lowering(e),
        };
        let program = load(&accept_all(on_accept), "dpf_all")?;
        Ok(XdpProgram {
            program,
            fallback: Some(fallback),
        })
    }

    /// The loaded program.
    pub fn program(&self) -> &ebpf::Program {
        &self.program
    }

    /// Why the table runs on the every-frame program, or `None` when it
    /// runs on its own classifier.
    pub fn fallback(&self) -> Option<&Fallback> {
        self.fallback.as_ref()
    }

    /// Whether `frame` would be accepted (the program's verdict is not
    /// `XDP_PASS`), by a `BPF_PROG_TEST_RUN` in the kernel.
    pub fn test_accepts(&self, frame: &[u8]) -> Result<bool, ebpf::Error> {
        let out = self.program.test_run(&ebpf::TestRun::new(frame))?;
        Ok(out.verdict != xdp::PASS)
    }
}

/// A table's classifier attached to an interface, kept in step with the
/// table by [`XdpFilter::sync`]. Dropping it detaches the program.
#[derive(Debug)]
pub struct XdpFilter {
    link: ebpf::XdpLink,
    current: XdpProgram,
    on_accept: OnAccept,
    version: u64,
}

impl XdpFilter {
    /// Loads the classifier of `table` and attaches it to the interface
    /// `ifindex` in `mode`.
    pub fn attach(
        table: &Table,
        ifindex: u32,
        mode: ebpf::XdpMode,
        on_accept: OnAccept,
    ) -> Result<XdpFilter, ebpf::Error> {
        let classifier = table.classifier();
        let current = XdpProgram::load(classifier.merged(), &on_accept)?;
        let link = ebpf::XdpLink::attach(current.program(), ifindex, mode)?;
        Ok(XdpFilter {
            link,
            current,
            on_accept,
            version: classifier.version(),
        })
    }

    /// Rebuilds the program from the table's published classifier and
    /// replaces the attached one atomically (`BPF_LINK_UPDATE`), unless
    /// the table has not changed since the last build. On error the
    /// attached program is left as it was.
    pub fn sync(&mut self, table: &Table) -> Result<(), ebpf::Error> {
        let classifier = table.classifier();
        if classifier.version() == self.version {
            return Ok(());
        }
        let next = XdpProgram::load(classifier.merged(), &self.on_accept)?;
        self.link.update(next.program())?;
        self.current = next;
        self.version = classifier.version();
        Ok(())
    }

    /// The program attached now.
    pub fn current(&self) -> &XdpProgram {
        &self.current
    }

    /// The link.
    pub fn link(&self) -> &ebpf::XdpLink {
        &self.link
    }
}

/// An assembler that drops what cannot be reached: the verifier refuses
/// unreachable instructions, and whether code after an accepting leaf,
/// an always-failing load or an exhausted dispatch is reachable is known
/// only as it is emitted. All jumps go forward, so a label is reachable
/// exactly when some live jump to it was emitted before it is bound, or
/// code falls into it.
struct Emit {
    a: Asm,
    live: bool,
    used: Vec<bool>,
}

impl Emit {
    fn new() -> Self {
        Emit {
            a: Asm::new(),
            live: true,
            used: Vec::new(),
        }
    }

    fn label(&mut self) -> Label {
        self.used.push(false);
        self.a.new_label()
    }

    fn bind(&mut self, l: Label) {
        let i = l.index();
        self.live = self.live || self.used[i];
        if self.live {
            self.a
                .bind(l)
                .expect("each label of the lowering is bound once");
        }
    }

    fn jmp(&mut self, cond: Cond, dst: Reg, src: Src, l: Label) {
        if self.live {
            self.used[l.index()] = true;
            self.a.jmp(cond, dst, src, l);
        }
    }

    fn jmp32(&mut self, cond: Cond, dst: Reg, src: Src, l: Label) {
        if self.live {
            self.used[l.index()] = true;
            self.a.jmp32(cond, dst, src, l);
        }
    }

    fn ja(&mut self, l: Label) {
        if self.live {
            self.used[l.index()] = true;
            self.a.ja(l);
            self.live = false;
        }
    }

    fn ret(&mut self, v: u32) {
        if self.live {
            self.a.ret(v as i32);
            self.live = false;
        }
    }

    /// Runs `f` on the assembler if the point is reachable.
    fn op(&mut self, f: impl FnOnce(&mut Asm)) {
        if self.live {
            f(&mut self.a);
        }
    }
}

struct Lower<'a> {
    e: &'a mut Emit,
    m: &'a Merged,
    accept: Label,
}

impl Lower<'_> {
    /// The code of trie node `id` and its wild chain: jumps to `accept`
    /// on a match, falls through otherwise.
    fn node(&mut self, id: MNodeId) -> Result<(), Unlowerable> {
        let mut id = id;
        loop {
            if !self.e.live {
                return Ok(());
            }
            let n = &self.m.nodes[id as usize];
            let entries = &self.m.entries;
            if n.leaves
                .iter()
                .any(|&r| entries[r as usize].residual.is_none())
            {
                self.e.ja(self.accept);
                return Ok(());
            }
            for &r in &n.leaves {
                let p = entries[r as usize]
                    .residual
                    .as_ref()
                    .expect("leaves without a residual accepted above");
                let next = self.e.label();
                self.residual(r, p, next)?;
                self.e.bind(next);
            }
            if let Some(d) = &n.dispatch {
                self.dispatch(d)?;
            }
            match n.wild {
                Some(w) => id = w,
                None => return Ok(()),
            }
        }
    }

    /// A dispatch: the key loaded once, a compare tree to its arm, each
    /// arm's subtree; all fall through to what follows.
    fn dispatch(&mut self, d: &Dispatch) -> Result<(), Unlowerable> {
        let skip = self.e.label();
        let test = Test {
            field: d.key.field,
            mask: d.key.mask,
            cmp: Cmp::Eq,
            value: 0,
        };
        self.load(u32::MAX, &test, None, skip)?;
        self.mask(d.key.mask, d.key.field.size);
        let arms: Vec<(u32, Label)> = d.arms.iter().map(|a| (a.0, self.e.label())).collect();
        self.compare_tree(&arms, skip);
        for (&(_, sub), &(_, label)) in d.arms.iter().zip(&arms) {
            self.e.bind(label);
            self.node(sub)?;
            self.e.ja(skip);
        }
        self.e.bind(skip);
        Ok(())
    }

    /// Jumps to the label of the arm equal to `r0`, or to `miss`.
    fn compare_tree(&mut self, arms: &[(u32, Label)], miss: Label) {
        if arms.len() <= 4 {
            for &(v, l) in arms {
                self.e.jmp32(Cond::Eq, Reg::R0, Src::Imm(v as i32), l);
            }
            self.e.ja(miss);
            return;
        }
        let mid = arms.len() / 2;
        let left = self.e.label();
        self.e
            .jmp32(Cond::Lt, Reg::R0, Src::Imm(arms[mid].0 as i32), left);
        self.e
            .jmp32(Cond::Eq, Reg::R0, Src::Imm(arms[mid].0 as i32), arms[mid].1);
        self.compare_tree(&arms[mid + 1..], miss);
        self.e.bind(left);
        self.compare_tree(&arms[..mid], miss);
    }

    /// A residual program: to `accept` if it accepts, to `next` if it
    /// rejects or aborts.
    fn residual(&mut self, rank: u32, p: &Program, next: Label) -> Result<(), Unlowerable> {
        if p.root == REJECT {
            self.e.ja(next);
            return Ok(());
        }
        if p.root == ACCEPT {
            self.e.ja(self.accept);
            return Ok(());
        }
        // The reachable test nodes, emitted in index order: edges point
        // to higher indices, so every jump goes forward.
        let mut reach = vec![false; p.nodes.len()];
        reach[p.root as usize] = true;
        let mut labels: Vec<Option<Label>> = vec![None; p.nodes.len()];
        for i in 0..p.nodes.len() {
            if !reach[i] {
                continue;
            }
            if let Node::Test { then, els, .. } = p.nodes[i] {
                reach[then as usize] = true;
                reach[els as usize] = true;
                for t in [then, els] {
                    if t > ACCEPT && labels[t as usize].is_none() {
                        labels[t as usize] = Some(self.e.label());
                    }
                }
            }
        }
        let accept = self.accept;
        let target = |labels: &[Option<Label>], t: u32| match t {
            REJECT => next,
            ACCEPT => accept,
            _ => labels[t as usize].expect("every reachable test has a label"),
        };
        for i in 0..p.nodes.len() {
            let Node::Test { test, then, els } = p.nodes[i] else {
                continue;
            };
            if !reach[i] {
                continue;
            }
            if let Some(l) = labels[i] {
                self.e.bind(l);
            }
            self.load(rank, &test, Some(p), next)?;
            self.mask(test.mask, test.field.size);
            let (t, f) = (target(&labels, then), target(&labels, els));
            let cond = match test.cmp {
                Cmp::Eq => Cond::Eq,
                Cmp::Gt => Cond::Gt,
                Cmp::Ge => Cond::Ge,
                Cmp::Set => Cond::Set,
            };
            self.e.jmp32(cond, Reg::R0, Src::Imm(test.value as i32), t);
            self.e.ja(f);
        }
        Ok(())
    }

    /// `r0 &= mask` unless the mask keeps every bit of the field.
    fn mask(&mut self, mask: u32, size: Size) {
        let all = match size {
            Size::B => 0xff,
            Size::H => 0xffff,
            Size::W => u32::MAX,
        };
        if mask & all != all {
            self.e
                .op(|a| a.alu32(Alu::And, Reg::R0, Src::Imm(mask as i32)));
        }
    }

    /// Loads `test`'s field (or computed value) into `r0`, jumping to
    /// `fail` when it is out of bounds (or the value undefined).
    fn load(
        &mut self,
        rank: u32,
        test: &Test,
        prog: Option<&Program>,
        fail: Label,
    ) -> Result<(), Unlowerable> {
        let f = test.field;
        let size = f.size as u32;
        match f.base {
            Base::Link => {
                self.packet_load(None, 0, f.offset, size, fail);
            }
            Base::Transport => {
                self.ihl_times_4(0, Reg::R2, fail);
                self.packet_load(
                    Some(Reg::R2),
                    4 * 15,
                    14u32.saturating_add(f.offset),
                    size,
                    fail,
                );
            }
            Base::Value(i) => {
                let ops = prog.and_then(|p| p.values.get(i as usize));
                match ops {
                    Some(ops) => self.value(rank, ops, fail)?,
                    None => self.e.ja(fail),
                }
            }
        }
        Ok(())
    }

    /// `reg = 4 * (frame[14 + d] & 0xf)`, or to `fail` when that byte is
    /// missing.
    fn ihl_times_4(&mut self, d: u32, reg: Reg, fail: Label) {
        let at = 14u32.saturating_add(d);
        if at >= MAX_PACKET_OFF {
            self.e.ja(fail);
            return;
        }
        self.e.op(|a| {
            a.mov64(PTR, Src::Reg(DATA));
            a.alu64(Alu::Add, PTR, Src::Imm(at as i32 + 1));
        });
        self.e.jmp(Cond::Gt, PTR, Src::Reg(DATA_END), fail);
        self.e.op(|a| {
            a.mov64(PTR, Src::Reg(DATA));
            a.alu64(Alu::Add, PTR, Src::Imm(at as i32));
            a.ldx(Width::B, reg, PTR, 0);
            a.alu32(Alu::And, reg, Src::Imm(0xf));
            a.alu32(Alu::Lsh, reg, Src::Imm(2));
        });
    }

    /// `r3` = the base of a Geneve load ([`Geneve::base`]), with `r0`,
    /// `r1` and `r4` as scratch; to `fail` where a byte it reads is
    /// missing. Each step is bounded (an IHL's 60 bytes, the options' 252,
    /// the header's 8), and the bound is handed to the loads that use it.
    fn geneve_base(&mut self, g: &Geneve, fail: Label) {
        let net = g.net;
        self.packet_load(None, 0, g.v4_at, g.v4_size as u32, fail);
        let (v6, have_g) = (self.e.label(), self.e.label());
        self.e
            .op(|a| a.alu32(Alu::And, Reg::R0, Src::Imm(g.v4_mask as i32)));
        self.e
            .jmp(Cond::Ne, Reg::R0, Src::Imm(g.v4_value as i32), v6);
        self.ihl_times_4(net.saturating_sub(14), Reg::R3, fail);
        self.e
            .op(|a| a.alu64(Alu::Add, Reg::R3, Src::Imm(net.saturating_add(8) as i32)));
        self.e.ja(have_g);
        self.e.bind(v6);
        self.e
            .op(|a| a.mov64(Reg::R3, Src::Imm(net.saturating_add(48) as i32)));
        self.e.bind(have_g);
        // r3 = g, at most `g_max`.
        let g_max = net.saturating_add(68);
        // r4 = g + 8 + 4 * (frame[g] & 0x3f), at most `g_max` + 260.
        let options_end = |s: &mut Self| {
            s.packet_load(Some(Reg::R3), g_max, 0, 1, fail);
            s.e.op(|a| {
                a.alu32(Alu::And, Reg::R0, Src::Imm(0x3f));
                a.alu32(Alu::Lsh, Reg::R0, Src::Imm(2));
                a.alu32(Alu::Add, Reg::R0, Src::Imm(8));
                a.mov64(Reg::R4, Src::Reg(Reg::R3));
                a.alu64(Alu::Add, Reg::R4, Src::Reg(Reg::R0));
            });
        };
        let pl_max = g_max.saturating_add(260 + 14);
        match g.layer {
            GeneveLayer::Header => return,
            GeneveLayer::Link => {
                options_end(self);
                self.e.op(|a| a.mov64(Reg::R3, Src::Reg(Reg::R4)));
            }
            GeneveLayer::Type | GeneveLayer::Payload | GeneveLayer::Transport => {
                self.packet_load(Some(Reg::R3), g_max, 2, 2, fail);
                let (bare, done) = (self.e.label(), self.e.label());
                self.e.jmp(Cond::Ne, Reg::R0, Src::Imm(0x6558), bare);
                options_end(self);
                let past = if g.layer == GeneveLayer::Type { 12 } else { 14 };
                self.e.op(|a| {
                    a.mov64(Reg::R3, Src::Reg(Reg::R4));
                    a.alu64(Alu::Add, Reg::R3, Src::Imm(past));
                });
                self.e.ja(done);
                self.e.bind(bare);
                if g.layer == GeneveLayer::Type {
                    self.e.op(|a| a.alu64(Alu::Add, Reg::R3, Src::Imm(2)));
                } else {
                    options_end(self);
                    self.e.op(|a| a.mov64(Reg::R3, Src::Reg(Reg::R4)));
                }
                self.e.bind(done);
            }
        }
        if g.layer == GeneveLayer::Transport {
            // Behind the inner IPv4 header, whose IHL is `add` bytes in.
            self.packet_load(Some(Reg::R3), pl_max, g.add, 1, fail);
            self.e.op(|a| {
                a.alu32(Alu::And, Reg::R0, Src::Imm(0xf));
                a.alu32(Alu::Lsh, Reg::R0, Src::Imm(2));
                a.alu64(Alu::Add, Reg::R3, Src::Reg(Reg::R0));
            });
        }
    }

    /// `r0` = the big-endian field of `size` bytes at `frame[index +
    /// offset]`, where `index` (a register holding at most `index_max`)
    /// is a variable part; to `fail` when it is past the end.
    fn packet_load(
        &mut self,
        index: Option<Reg>,
        index_max: u32,
        offset: u32,
        size: u32,
        fail: Label,
    ) {
        let reach = u64::from(index_max) + u64::from(offset) + u64::from(size);
        if reach > u64::from(MAX_PACKET_OFF) {
            self.e.ja(fail);
            return;
        }
        self.e.op(|a| {
            a.mov64(PTR, Src::Reg(DATA));
            if let Some(index) = index {
                a.alu64(Alu::Add, PTR, Src::Reg(index));
            }
            a.alu64(Alu::Add, PTR, Src::Imm(offset as i32));
            a.mov64(Reg::R1, Src::Reg(PTR));
            a.alu64(Alu::Add, Reg::R1, Src::Imm(size as i32));
        });
        self.e.jmp(Cond::Gt, Reg::R1, Src::Reg(DATA_END), fail);
        self.e.op(|a| match size {
            1 => a.ldx(Width::B, Reg::R0, PTR, 0),
            2 => {
                a.ldx(Width::H, Reg::R0, PTR, 0);
                a.be(Reg::R0, 16);
            }
            _ => {
                a.ldx(Width::W, Reg::R0, PTR, 0);
                a.be(Reg::R0, 32);
            }
        });
    }

    /// Computes a value (postfix `ops`) into `r0` on the eBPF stack; to
    /// `fail` where dpf's evaluation gives `None`.
    fn value(&mut self, rank: u32, ops: &[Op], fail: Label) -> Result<(), Unlowerable> {
        // The depth each op leaves, checked first: a malformed sequence
        // (which dpf evaluates to `None`) fails without running.
        let mut depth = 0usize;
        let mut deepest = 0usize;
        for op in ops {
            let (pops, pushes) = match op {
                Op::Const(_) | Op::Len => (0, 1),
                Op::Load(..) | Op::Neg => (1, 1),
                _ => (2, 1),
            };
            if depth < pops {
                self.e.ja(fail);
                return Ok(());
            }
            depth = depth - pops + pushes;
            deepest = deepest.max(depth);
        }
        if depth != 1 {
            self.e.ja(fail);
            return Ok(());
        }
        if deepest > MAX_VALUE_DEPTH {
            return Err(Unlowerable::ValueTooDeep {
                rank,
                depth: deepest,
                limit: MAX_VALUE_DEPTH,
            });
        }
        let slot = |d: usize| -(8 * (d as i16 + 1));
        let mut d = 0usize;
        for op in ops {
            match *op {
                Op::Const(k) => self.e.op(|a| a.mov32(Reg::R0, Src::Imm(k as i32))),
                Op::Len => self.e.op(|a| {
                    a.mov64(Reg::R1, Src::Reg(CTX));
                    a.call(XDP_GET_BUFF_LEN);
                    a.mov32(Reg::R0, Src::Reg(Reg::R0));
                }),
                Op::Load(base, size) => {
                    d -= 1;
                    self.e.op(|a| a.ldx(Width::DW, Reg::R2, Reg::R10, slot(d)));
                    let size = size as u32;
                    let k = match base {
                        LoadBase::At(k) => k,
                        LoadBase::Transport(td) => {
                            self.ihl_times_4(td, Reg::R3, fail);
                            // The index wraps modulo 2^32 with the header length.
                            self.e.op(|a| a.alu32(Alu::Add, Reg::R2, Src::Reg(Reg::R3)));
                            14u32.saturating_add(td)
                        }
                        LoadBase::Geneve(g) => {
                            self.geneve_base(&g, fail);
                            // The index wraps modulo 2^32 with the base.
                            self.e.op(|a| a.alu32(Alu::Add, Reg::R2, Src::Reg(Reg::R3)));
                            g.add
                        }
                    };
                    let room = u64::from(MAX_PACKET_OFF) as i64 - i64::from(k) - i64::from(size);
                    if room < 0 {
                        self.e.ja(fail);
                    } else {
                        // Bounds the index for the verifier; a larger one
                        // is past the end of any frame.
                        self.e.jmp(Cond::Gt, Reg::R2, Src::Imm(room as i32), fail);
                        self.packet_load(Some(Reg::R2), room as u32, k, size, fail);
                    }
                }
                Op::Neg => {
                    d -= 1;
                    self.e.op(|a| {
                        a.ldx(Width::DW, Reg::R0, Reg::R10, slot(d));
                        a.neg32(Reg::R0);
                    });
                }
                bin => {
                    d -= 2;
                    self.e.op(|a| {
                        a.ldx(Width::DW, Reg::R0, Reg::R10, slot(d));
                        a.ldx(Width::DW, Reg::R3, Reg::R10, slot(d + 1));
                    });
                    self.binary(bin, fail);
                }
            }
            self.e.op(|a| a.stx(Width::DW, Reg::R10, slot(d), Reg::R0));
            d += 1;
        }
        self.e.op(|a| a.ldx(Width::DW, Reg::R0, Reg::R10, slot(0)));
        Ok(())
    }

    /// `r0 = r0 op r3` on 32 bits, with dpf's semantics.
    fn binary(&mut self, op: Op, fail: Label) {
        let alu = |e: &mut Emit, alu: Alu| e.op(|a| a.alu32(alu, Reg::R0, Src::Reg(Reg::R3)));
        match op {
            Op::Add => alu(self.e, Alu::Add),
            Op::Sub => alu(self.e, Alu::Sub),
            Op::Mul => alu(self.e, Alu::Mul),
            Op::And => alu(self.e, Alu::And),
            Op::Or => alu(self.e, Alu::Or),
            Op::Xor => alu(self.e, Alu::Xor),
            Op::Div | Op::Mod => {
                self.e.jmp(Cond::Eq, Reg::R3, Src::Imm(0), fail);
                alu(self.e, if op == Op::Div { Alu::Div } else { Alu::Mod });
            }
            Op::Shl | Op::Shr => {
                let (zero, done) = (self.e.label(), self.e.label());
                self.e.jmp(Cond::Ge, Reg::R3, Src::Imm(32), zero);
                alu(self.e, if op == Op::Shl { Alu::Lsh } else { Alu::Rsh });
                self.e.ja(done);
                self.e.bind(zero);
                self.e.op(|a| a.mov32(Reg::R0, Src::Imm(0)));
                self.e.bind(done);
            }
            Op::Gt | Op::Ge => {
                let yes = self.e.label();
                self.e.op(|a| a.mov32(Reg::R1, Src::Imm(1)));
                let cond = if op == Op::Gt { Cond::Gt } else { Cond::Ge };
                self.e.jmp(cond, Reg::R0, Src::Reg(Reg::R3), yes);
                self.e.op(|a| a.mov32(Reg::R1, Src::Imm(0)));
                self.e.bind(yes);
                self.e.op(|a| a.mov64(Reg::R0, Src::Reg(Reg::R1)));
            }
            Op::Const(_) | Op::Len | Op::Load(..) | Op::Neg => {
                unreachable!("leaf and unary operations are lowered by the caller")
            }
        }
    }
}
