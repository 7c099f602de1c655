//! Native code for fast paths and automata: an [`crate::fp::Graph`] compiled
//! through vcode into one x86-64 function
//! `extern "C" fn(ctx: *mut Ctx, entry: u32) -> u32`.
//!
//! # Shape of the code
//!
//! * **Registers.** The context pointer lives in `rbx`. Three caller-saved
//!   registers are scratch for expressions; the other seven are *homes*,
//!   given to the values the code touches most, weighted by loop nesting
//!   (8× per level): process variables (slots of the flat variable array),
//!   graph locals, repetition counters, the `next`/`end` pointers of
//!   the external ports, and constants read in loops that no instruction
//!   takes as an immediate (beyond 32 bits signed: a CRC polynomial), set
//!   once per entry and weighted a quarter of a variable's use, so they
//!   take only registers the variables leave. Callee-saved homes come first, so the hottest
//!   values survive host calls untouched. Other slots live in
//!   `ctx.vars`, locals and counters in the stack frame.
//! * **Entries.** The entry index is bounds-checked and dispatched through
//!   a jump table; each entry loads the register homes of the slots live
//!   there (graph liveness seeded by process-based liveness), the ports,
//!   and resets the counters.
//! * **Channels.** `Recv` and `Send` on external channels are inline:
//!   compare `next` with `end`, move the fields, bump `next`. Only an
//!   empty in-port or a full out-port calls `ctx.recv` / `ctx.send`, out of
//!   line. Host functions are called through `ctx.call` with their
//!   arguments in a frame buffer. Around every call, the ports' `next`
//!   pointers are written back (the host reads them) and reloaded with the
//!   ends after it; caller-saved homes are saved to their memory homes and
//!   reloaded.
//! * **Counters** count down from their bound: one `sub`/`jb` per `Count`
//!   when in a register. Past the bound, a stub resets the count-down so
//!   that a later `Count` borrows again; when no `Count` of that counter is
//!   reachable from the bound's target (an abort), the `jb` goes there
//!   directly and there is no stub.
//! * **Counted loops** (`back/counted.rs`): a loop of a graph that never
//!   yields, whose test is `i < m` or `i != m` (or counting down) with `i`
//!   stepped by one once a way round and `m` unchanged in it, is entered
//!   through a charge of its whole count, `c_T + K * N` for `N` ways round
//!   of `K` counts each: when what is left of the counter covers it, the
//!   counter is charged once and a copy of the loop without counts runs
//!   (an earlier exit that can count again gives back what was not run);
//!   otherwise the loop as it is, counting every way round, so that it
//!   aborts exactly where it did. `s = s + i; i = i + 1` runs as fast as
//!   with no bound at all. [`Options::charge_counted_loops`] turns it off.
//! * **Range tests**: a condition `x == c1 || x == c2 || ...` over a
//!   contiguous range of constants (or its negation with `!=` and `&&`) is
//!   one unsigned comparison of `x - lo` with the span, one branch.
//! * **Shared instructions.** An instruction of 24 or more expression
//!   nodes without host calls that occurs in more than one block (symbolic
//!   execution copies a process's step into every control state it runs
//!   in) is emitted once, after the blocks, as a subroutine that each
//!   occurrence enters with `jal` and that returns with `ret_link`.
//! * **Leaves** share one tail per set of moved processes: a `Leave` puts
//!   its row number in a register and jumps to the tail, which writes the
//!   ports back, stores the register homes of the slots live at some leave
//!   of the set, copies the row's program counters from a constant table
//!   into `ctx.pcs` and returns the row's code.
//! * **Layout.** Blocks that lie on or lead into a loop come first, in
//!   depth-first order preferring hot successors, so loops fall through;
//!   blocks that only lead to leaves, and every slow path, come after them.
//! * **Arithmetic** is 64-bit two's complement as in [`crate::ir::BinOp`]:
//!   shifts take the count modulo 64, and `/`, `%` never trap: `x / -1` is
//!   `-x` (so `i64::MIN / -1` wraps), `x % -1` is 0, and a zero divisor
//!   (which graphs guard against, so it never happens) gives 0.
//!   Conditional selections made by [`opt::select`] become conditional
//!   moves, and so does the mask idiom `base op (k & -bit)` (`op` one of
//!   `^`, `|`, `+`; `bit` always 0 or 1, as `x & 1` or a comparison):
//!   `bit ? base op k : base`. The bit-by-bit CRC step
//!   `crc = (crc >> 1) ^ (POLY & -(crc & 1))` is then a shift, an xor and
//!   a conditional move deep on `crc` rather than four instructions.
//!
//! The return code is 0 for `Leave::Exit`, 1 for `Leave::Abort` and
//! `2 + k` for `Leave::Suspend { resume: k }`.

use std::collections::HashMap;

use vcode::backend::Cond;
use vcode::ext::{Countdown, LocalCompare, Select};
use vcode::{Arg, Callee, Class, Code, Func, L, Label, Leaf, Local, Operand, P, Reg, Ty, U, UL};

use super::counted::{self, CountedLoop};
use crate::abi::{Ctx, PORT_SIZE};
use crate::error::{Error, Result};
use crate::fp::{BlockId, Graph, Inst, Leave, Term};
use crate::ir::{BinOp, ChanKind, Expr, Layout, Operand as IrOperand, ProcId, Program, UnOp};
use crate::opt::{self, Bits, Liveness};

/// A compiled graph.
pub struct NativeGraph {
    code: Code,
    entries: u32,
    marks: Vec<(usize, String)>,
    instructions: usize,
    charged_loops: usize,
}

impl std::fmt::Debug for NativeGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeGraph")
            .field("entries", &self.entries)
            .field("instructions", &self.instructions)
            .finish()
    }
}

type Entry = extern "C" fn(*mut Ctx, u32) -> u32;

impl NativeGraph {
    /// Runs the graph from `entries[entry]` until it leaves, and says why.
    /// An entry out of range returns `Leave::Abort` at once, storing
    /// nothing.
    ///
    /// # Safety
    /// `ctx` must point to a valid [`Ctx`] for the program the graph was
    /// compiled for: `vars` holds every slot of its [`Layout`], `pcs` one
    /// `u32` per process, `ins` and `outs` one port per channel, each
    /// port's `next..end` range valid to read (in) or write (out) whole
    /// messages, and `call`, `recv`, `send` callable with `host`; and none
    /// of the callbacks may unwind.
    pub unsafe fn run(&self, ctx: *mut Ctx, entry: u32) -> Leave {
        // SAFETY: the code was generated with exactly this signature
        // (`%p%u`, returning `u`), checked again by `as_fn`.
        let f: Entry = match unsafe { self.code.as_fn::<Entry>() } {
            Ok(f) => f,
            Err(_) => return Leave::Abort,
        };
        if entry >= self.entries {
            return Leave::Abort;
        }
        match f(ctx, entry) {
            0 => Leave::Exit,
            1 => Leave::Abort,
            k => Leave::Suspend { resume: k - 2 },
        }
    }

    /// The number of machine instructions of the function (prologue,
    /// dispatch, body, slow paths, leaves and epilogue).
    pub fn instructions(&self) -> usize {
        self.instructions
    }

    /// The loops whose count is charged once at their entry (see the
    /// module docs).
    pub fn charged_loops(&self) -> usize {
        self.charged_loops
    }

    /// Bytes of machine code.
    pub fn code_bytes(&self) -> usize {
        self.code.len()
    }

    /// The disassembly, with each block's beginning marked by its number
    /// and note.
    pub fn listing(&self) -> String {
        self.code.disassemble_marked(&self.marks)
    }
}

/// Counts the instruction lines of a vcode listing.
fn count_instructions(listing: &str) -> usize {
    listing
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            !t.starts_with(';') && !t.is_empty()
        })
        .count()
}

// -- Registers ----------------------------------------------------------------------------

mod gpr {
    pub const RDX: u8 = 2;
    pub const RBX: u8 = 3;
    pub const RSI: u8 = 6;
    pub const RDI: u8 = 7;
    pub const R8: u8 = 8;
    pub const R9: u8 = 9;
    pub const R10: u8 = 10;
    pub const R12: u8 = 12;
    pub const R13: u8 = 13;
    pub const R14: u8 = 14;
    pub const R15: u8 = 15;
}

/// Scratch registers, all caller-saved.
const SCRATCH: [u8; 3] = [gpr::R10, gpr::R9, gpr::R8];
/// Home registers, callee-saved first.
const HOMES: [u8; 7] = [
    gpr::R12,
    gpr::R13,
    gpr::R14,
    gpr::R15,
    gpr::RDX,
    gpr::RSI,
    gpr::RDI,
];

fn callee_saved(r: u8) -> bool {
    matches!(r, gpr::RBX | gpr::R12 | gpr::R13 | gpr::R14 | gpr::R15)
}

fn l(n: u8) -> Reg<L> {
    Reg::phys(n)
}
fn p(n: u8) -> Reg<P> {
    Reg::phys(n)
}
fn u(n: u8) -> Reg<U> {
    Reg::phys(n)
}
fn ul(n: u8) -> Reg<UL> {
    Reg::phys(n)
}

/// A value the code keeps somewhere: what gets a home.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Cand {
    /// A slot: a process variable (`< layout.slots`) or a graph local.
    Slot(u32),
    /// A repetition counter (counting down from its bound).
    Counter(u32),
    /// The `next` pointer of a channel's in port (`false`) or out port.
    Next(bool, u32),
    /// The `end` pointer of a channel's in port (`false`) or out port.
    End(bool, u32),
    /// A constant that no instruction takes as an immediate (beyond 32
    /// bits signed, such as a CRC polynomial), read inside a loop: in a
    /// register it is set once per entry instead of once per use.
    Const(i64),
}

// -- Analysis: loop depth and weights -----------------------------------------------------

/// Loop nesting depth of each block (0 outside loops), from nested
/// strongly connected components.
fn loop_depth(g: &Graph) -> Vec<u32> {
    let n = g.blocks.len();
    let succ: Vec<Vec<u32>> = g.blocks.iter().map(|b| opt::successors(&b.term)).collect();
    let mut depth = vec![0u32; n];
    let all: Vec<u32> = (0..n as u32).collect();
    nest(&succ, &all, &mut depth, 0);
    depth
}

fn nest(succ: &[Vec<u32>], nodes: &[u32], depth: &mut [u32], level: u32) {
    if level >= 4 {
        return;
    }
    let inside: HashMap<u32, usize> = nodes.iter().enumerate().map(|(i, &b)| (b, i)).collect();
    for comp in sccs(succ, nodes, &inside) {
        let cyclic = comp.len() > 1 || succ[comp[0] as usize].iter().any(|&s| s == comp[0]);
        if !cyclic {
            continue;
        }
        for &b in &comp {
            depth[b as usize] = level + 1;
        }
        if comp.len() > 1 {
            // Break the loop at its first block (the one with most edges
            // from outside would be better; the first found is a header in
            // reducible graphs) and look for inner loops.
            let header = comp[0];
            let rest: Vec<u32> = comp.iter().copied().filter(|&b| b != header).collect();
            nest(succ, &rest, depth, level + 1);
        }
    }
}

/// Strongly connected components of the subgraph on `nodes`, each with
/// its root first.
fn sccs(succ: &[Vec<u32>], nodes: &[u32], inside: &HashMap<u32, usize>) -> Vec<Vec<u32>> {
    let local: Vec<Vec<usize>> = nodes
        .iter()
        .map(|&b| {
            succ[b as usize]
                .iter()
                .filter_map(|w| inside.get(w).copied())
                .collect()
        })
        .collect();
    crate::fp::sccs(&local)
        .into_iter()
        .map(|c| c.into_iter().map(|v| nodes[v]).collect())
        .collect()
}

/// Blocks that lie on a loop or can reach one: the rest only lead to
/// leaves and are laid out after the hot code.
fn hot_blocks(g: &Graph, depth: &[u32]) -> Vec<bool> {
    let n = g.blocks.len();
    let mut hot: Vec<bool> = depth.iter().map(|&d| d > 0).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for b in 0..n {
            if !hot[b]
                && opt::successors(&g.blocks[b].term)
                    .iter()
                    .any(|&s| hot[s as usize])
            {
                hot[b] = true;
                changed = true;
            }
        }
    }
    hot
}

fn weigh(w: &mut HashMap<Cand, u64>, c: Cand, by: u64) {
    *w.entry(c).or_insert(0) += by;
}

fn weigh_expr(w: &mut HashMap<Cand, u64>, e: &Expr, by: u64) {
    e.for_each_var(&mut |v| weigh(w, Cand::Slot(v), by));
    if by > 1 {
        weigh_long_consts(w, e, by);
    }
}

/// Weighs the constants of `e` that need a register of their own, a
/// quarter of a variable's use each: a constant outside a register costs
/// one `mov` beside the computation, a variable outside one a load (and a
/// store, when written) in it.
fn weigh_long_consts(w: &mut HashMap<Cand, u64>, e: &Expr, by: u64) {
    match e {
        Expr::Const(c) => {
            if i32::try_from(*c).is_err() {
                weigh(w, Cand::Const(*c), by / 4);
            }
        }
        Expr::Var(_) => {}
        Expr::Unary(_, a) => weigh_long_consts(w, a, by),
        Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            weigh_long_consts(w, a, by);
            weigh_long_consts(w, b, by);
        }
        Expr::Call(_, args) => args.iter().for_each(|a| weigh_long_consts(w, a, by)),
    }
}

fn weights(g: &Graph, depth: &[u32]) -> HashMap<Cand, u64> {
    let mut w = HashMap::new();
    for (b, blk) in g.blocks.iter().enumerate() {
        let by = 8u64.pow(depth[b].min(5));
        for i in &blk.insts {
            match i {
                Inst::Assign { slot, value } => {
                    weigh(&mut w, Cand::Slot(*slot), by);
                    weigh_expr(&mut w, value, by);
                }
                Inst::Eval(e) => weigh_expr(&mut w, e, by),
            }
        }
        match &blk.term {
            Term::Branch { cond, .. } => weigh_expr(&mut w, cond, by),
            Term::Recv { chan, slots, .. } => {
                for s in slots {
                    weigh(&mut w, Cand::Slot(*s), by);
                }
                weigh(&mut w, Cand::Next(false, *chan), 3 * by);
                weigh(&mut w, Cand::End(false, *chan), by);
            }
            Term::Send { chan, args, .. } => {
                for a in args {
                    if let IrOperand::Var(s) = a {
                        weigh(&mut w, Cand::Slot(*s), by);
                    }
                }
                weigh(&mut w, Cand::Next(true, *chan), 3 * by);
                weigh(&mut w, Cand::End(true, *chan), by);
            }
            Term::Count { counter, .. } => weigh(&mut w, Cand::Counter(*counter), 2 * by),
            Term::Jump(_) | Term::Leave { .. } => {}
        }
    }
    w
}

// -- The compiler -------------------------------------------------------------------------

/// Compiles a graph of `program` to native code. The graph should be
/// optimized first ([`opt::optimize`]); any graph that satisfies its
/// invariants compiles. A graph naming slots, blocks, channels, counters,
/// host functions or processes that do not exist, or receiving on a
/// channel that is not `external in` (sending on one not `external out`),
/// is an [`Error::Codegen`].
pub fn compile(g: &Graph, program: &Program) -> Result<NativeGraph> {
    compile_with(g, program, &Options::default())
}

/// How [`compile_with`] compiles a graph.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Charge the count of a counted loop (see the module docs) once at
    /// the loop's entry, running a copy of the loop without counts when
    /// what is left of the counter covers it (default true). False counts
    /// every iteration, as the graph says: the same behaviour, for
    /// measuring and testing the charge against.
    pub charge_counted_loops: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            charge_counted_loops: true,
        }
    }
}

/// [`compile`] with options.
pub fn compile_with(g: &Graph, program: &Program, options: &Options) -> Result<NativeGraph> {
    if !opt::well_formed(program, g) {
        return Err(Error::Codegen(format!(
            "graph {}: names a block, slot, channel, counter, host function or process that does not exist",
            g.name
        )));
    }
    for b in &g.blocks {
        let bad = match &b.term {
            Term::Recv { chan, .. } => {
                program.channels[*chan as usize].kind != ChanKind::ExternalIn
            }
            Term::Send { chan, .. } => {
                program.channels[*chan as usize].kind != ChanKind::ExternalOut
            }
            _ => false,
        };
        if bad {
            return Err(Error::Codegen(format!(
                "graph {}: a receive or send on a channel of the wrong kind",
                g.name
            )));
        }
    }
    if g.entries.len() > u32::MAX as usize / 2 {
        return Err(Error::Codegen(format!(
            "graph {}: too many entries",
            g.name
        )));
    }
    let mut cg = Gen::new(g, program, options)?;
    cg.emit()?;
    if cg.out_of_scratch {
        return Err(Error::Codegen(format!(
            "graph {}: internal error: an expression needed more scratch registers than the generator keeps",
            g.name
        )));
    }
    let charged_loops = cg.loops.len();
    let Gen { mut f, marks, .. } = cg;
    let code = f.end()?;
    let instructions = count_instructions(&code.disassemble());
    Ok(NativeGraph {
        code,
        entries: g.entries.len() as u32,
        marks,
        instructions,
        charged_loops,
    })
}

/// Where a candidate lives.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Home {
    Reg(u8),
    Mem,
}

/// A row of a leave table: the code returned and the pcs stored.
struct LeaveGroup {
    procs: Vec<ProcId>,
    rows: Vec<(Vec<u32>, u32)>,
    label: Label,
    /// Slots live at some leave of the group.
    live: Bits,
}

/// Out-of-line code emitted after the blocks.
enum Cold {
    /// A counter went past its bound.
    Over {
        at: Label,
        counter: u32,
        over: Label,
    },
    /// An exit from the copy of counted loop `li` (from block `from`)
    /// gives back the counts charged for the iterations it did not run.
    Refund {
        at: Label,
        li: usize,
        from: BlockId,
        to: Label,
    },
    /// The slow path of a `Recv`.
    Recv {
        at: Label,
        chan: u32,
        slots: Vec<u32>,
        got: Label,
        empty: Label,
    },
    /// The slow path of a `Send`.
    Send {
        at: Label,
        chan: u32,
        args: Vec<IrOperand>,
        next: Label,
    },
}

struct Gen<'a> {
    f: Func,
    g: &'a Graph,
    program: &'a Program,
    layout: Layout,
    ctx: Reg<P>,
    free: Vec<u8>,
    homes: HashMap<Cand, Home>,
    vars_reg: Option<u8>,
    labels: Vec<Label>,
    locals: HashMap<u32, Local<L>>,
    counter_locals: HashMap<u32, Local<UL>>,
    end_locals: HashMap<(bool, u32), Local<L>>,
    spills: Vec<Local<L>>,
    spill_depth: usize,
    msg: Vec<Local<L>>,
    cold: Vec<Cold>,
    groups: Vec<LeaveGroup>,
    group_of: HashMap<Vec<ProcId>, usize>,
    marks: Vec<(usize, String)>,
    live_in: Vec<Bits>,
    leave_live: Vec<Bits>,
    ports: Vec<(bool, u32)>,
    out_of_scratch: bool,
    /// Instructions emitted once, as subroutines (see [`OUTLINE_NODES`]),
    /// by their debug text; each with its label.
    outlined: HashMap<String, Label>,
    /// The frame slot of a shared slow path's site index.
    site: Option<Local<L>>,
    /// Per counter: the blocks from which one of its `Count`s is reachable.
    reaches_count: HashMap<u32, Vec<bool>>,
    /// [`Options::charge_counted_loops`].
    charge: bool,
    /// The counted loops whose count is charged at their entry.
    loops: Vec<LoopCode>,
    /// A counted loop's head, and the loop's index in `loops`.
    head_loop: HashMap<BlockId, usize>,
    /// The loop whose copy without counts is being emitted.
    copying: Option<usize>,
}

/// A counted loop ([`counted`]) as compiled: the charge at its entry,
/// and a copy of its blocks without counts.
struct LoopCode {
    l: CountedLoop,
    /// Where every edge into the head from outside the loop goes: the
    /// charge.
    pre: Label,
    /// The copy's label of each block of the loop.
    copy: HashMap<BlockId, Label>,
    /// The exits from the copy that give back counts: (from, to) and the
    /// stub's label.
    refunds: HashMap<(BlockId, BlockId), Label>,
}

impl<'a> Gen<'a> {
    fn new(g: &'a Graph, program: &'a Program, options: &Options) -> Result<Gen<'a>> {
        let layout = Layout::of(program);
        let lv = Liveness::of(program);
        let (live_in, leave_live) = opt::graph_live(program, &layout, &lv, g);
        let mut f = Func::new();
        f.set_code_limit(16 << 20);
        f.name(format!("esp:{}", g.name));
        Ok(Gen {
            f,
            g,
            program,
            layout,
            ctx: p(gpr::RBX),
            free: Vec::new(),
            homes: HashMap::new(),
            vars_reg: None,
            labels: Vec::new(),
            locals: HashMap::new(),
            counter_locals: HashMap::new(),
            end_locals: HashMap::new(),
            spills: Vec::new(),
            spill_depth: 0,
            msg: Vec::new(),
            cold: Vec::new(),
            groups: Vec::new(),
            group_of: HashMap::new(),
            marks: Vec::new(),
            live_in,
            leave_live,
            ports: Vec::new(),
            out_of_scratch: false,
            outlined: HashMap::new(),
            site: None,
            reaches_count: HashMap::new(),
            charge: options.charge_counted_loops,
            loops: Vec::new(),
            head_loop: HashMap::new(),
            copying: None,
        })
    }

    fn emit(&mut self) -> Result<()> {
        let g = self.g;
        let params = self.f.lambda("%p%u", Leaf::No)?;
        let ctx_in = params.get::<P>(0)?;
        let entry_in = params.get::<U>(1)?;
        let ctx = self.f.getreg::<P>(Class::Persistent)?;
        if ctx.num() != gpr::RBX {
            return Err(Error::Codegen("rbx is not free for the context".into()));
        }
        self.f.mov(ctx, ctx_in);
        // Dispatch on the entry index.
        let idx = ul(gpr::R10);
        self.f.reserve(idx)?;
        self.f.cv::<U, UL>(idx, entry_in);
        let entry_labels: Vec<Label> = g.entries.iter().map(|_| self.f.genlabel()).collect();
        let bad = self.f.genlabel();
        self.f.bge(idx, g.entries.len() as i64, bad);
        if entry_labels.len() == 1 {
            self.f.jmp(entry_labels[0]);
        } else {
            self.f.jump_table(idx, &entry_labels);
        }
        self.f.putreg(idx);
        self.f.putreg(ctx_in);
        self.f.putreg(entry_in);
        for r in SCRATCH.iter().chain(HOMES.iter()) {
            self.f.reserve(l(*r))?;
        }
        self.free = SCRATCH.iter().rev().copied().collect();
        self.assign_homes();
        self.labels = g.blocks.iter().map(|_| self.f.genlabel()).collect();
        if self.charge {
            for l in counted::counted_loops(g) {
                let pre = self.f.genlabel();
                let copy = (0..g.blocks.len())
                    .filter(|&b| l.inside[b])
                    .map(|b| (b as BlockId, self.f.genlabel()))
                    .collect();
                self.head_loop.insert(l.head, self.loops.len());
                self.loops.push(LoopCode {
                    l,
                    pre,
                    copy,
                    refunds: HashMap::new(),
                });
            }
        }
        for _ in 0..max_arity(self.program, g) {
            let loc = self.f.local::<L>();
            self.msg.push(loc);
        }
        // Entries.
        for (k, &e) in g.entries.iter().enumerate() {
            self.f.label(entry_labels[k]);
            self.marks
                .push((self.f.code_offset(), format!("entry {k}")));
            self.load_homes(Some(e));
            let t = self.to_from_outside(e);
            self.f.jmp(t);
        }
        // Large instructions that occur more than once become subroutines.
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut first: Vec<(String, &Inst)> = Vec::new();
        for i in g.blocks.iter().flat_map(|b| &b.insts) {
            if outlinable(i) {
                let key = format!("{i:?}");
                let n = seen.entry(key.clone()).or_insert(0);
                *n += 1;
                if *n == 1 {
                    first.push((key, i));
                }
            }
        }
        let mut subs: Vec<(Label, &Inst)> = Vec::new();
        for (key, i) in first {
            if seen[&key] >= 2 {
                let label = self.f.genlabel();
                self.outlined.insert(key, label);
                subs.push((label, i));
            }
        }
        // Blocks, hot ones first. A counted loop's head is preceded by the
        // charge of the loop's count and the copy of the loop without it.
        let order = self.layout_order();
        for (pos, &b) in order.iter().enumerate() {
            let fall = order.get(pos + 1).map(|&x| self.to_from_outside(x));
            if let Some(&li) = self.head_loop.get(&b) {
                self.charged_loop(li, &order)?;
            }
            self.block(b, fall)?;
        }
        // Slow paths.
        // Slow paths of receives (sends) of the same channel into the same
        // slots (from the same operands) are one, shared by their sites.
        type RecvGroup = ((u32, Vec<u32>), Vec<(Label, Label, Label)>);
        type SendGroup = ((u32, Vec<IrOperand>), Vec<(Label, Label)>);
        let mut recvs: Vec<RecvGroup> = Vec::new();
        let mut sends: Vec<SendGroup> = Vec::new();
        for c in std::mem::take(&mut self.cold) {
            match c {
                Cold::Over { .. } | Cold::Refund { .. } => self.cold_path(c),
                Cold::Recv {
                    at,
                    chan,
                    slots,
                    got,
                    empty,
                } => {
                    let key = (chan, slots);
                    match recvs.iter_mut().find(|g| g.0 == key) {
                        Some(g) => g.1.push((at, got, empty)),
                        None => recvs.push((key, vec![(at, got, empty)])),
                    }
                }
                Cold::Send {
                    at,
                    chan,
                    args,
                    next,
                } => {
                    let key = (chan, args);
                    match sends.iter_mut().find(|g| g.0 == key) {
                        Some(g) => g.1.push((at, next)),
                        None => sends.push((key, vec![(at, next)])),
                    }
                }
            }
        }
        for ((chan, slots), sites) in recvs {
            self.recv_slow(chan, &slots, &sites);
        }
        for ((chan, args), sites) in sends {
            self.send_slow(chan, &args, &sites);
        }
        // Subroutines: the shared instructions, entered with `jal`.
        let outlined = std::mem::take(&mut self.outlined);
        for (label, i) in subs {
            self.f.label(label);
            self.marks
                .push((self.f.code_offset(), "shared instruction".to_string()));
            self.inst(i);
            self.f.ret_link();
        }
        self.outlined = outlined;
        // Leave tails.
        for gi in 0..self.groups.len() {
            self.leave_tail(gi);
        }
        self.f.label(bad);
        let r = u(gpr::R10);
        self.f.set(r, 1);
        self.f.ret(r);
        Ok(())
    }

    // -- homes ------------------------------------------------------------------------

    fn assign_homes(&mut self) {
        let g = self.g;
        let depth = loop_depth(g);
        let w = weights(g, &depth);
        let mut cands: Vec<(Cand, u64)> = w.into_iter().collect();
        cands.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut regs: Vec<u8> = HOMES.to_vec();
        regs.reverse();
        // A register for the variable array when a hot slot stays in memory.
        let slots = self.layout.slots;
        let in_mem_weight: u64 = cands
            .iter()
            .skip(HOMES.len())
            .filter(|(c, _)| matches!(c, Cand::Slot(s) if *s < slots))
            .map(|(_, w)| *w)
            .sum();
        let mut budget = HOMES.len();
        if in_mem_weight >= 8 {
            budget -= 1;
            // The least valuable home register holds the array pointer:
            // callee-saved ones go to the hottest values.
            self.vars_reg = regs.first().copied();
            regs.remove(0);
        }
        for (i, (c, _)) in cands.iter().enumerate() {
            let home = if i < budget {
                match regs.pop() {
                    Some(r) => Home::Reg(r),
                    None => Home::Mem,
                }
            } else {
                Home::Mem
            };
            self.homes.insert(*c, home);
        }
        // Memory homes that need frame space.
        for (c, h) in self.homes.clone() {
            match c {
                Cand::Slot(s) if s >= slots && h == Home::Mem => {
                    let loc = self.f.local::<L>();
                    self.locals.insert(s, loc);
                }
                Cand::Counter(k) if h == Home::Mem => {
                    let loc = self.f.local::<UL>();
                    self.counter_locals.insert(k, loc);
                }
                Cand::End(out, ch) if h == Home::Mem => {
                    let loc = self.f.local::<L>();
                    self.end_locals.insert((out, ch), loc);
                }
                _ => {}
            }
            if let Cand::Next(out, ch) = c {
                self.ports.push((out, ch));
            }
        }
        self.ports.sort_unstable();
    }

    fn home(&self, c: Cand) -> Home {
        self.homes.get(&c).copied().unwrap_or(Home::Mem)
    }

    fn slot_reg(&self, s: u32) -> Option<Reg<L>> {
        match self.home(Cand::Slot(s)) {
            Home::Reg(r) => Some(l(r)),
            Home::Mem => None,
        }
    }

    fn take(&mut self) -> Reg<L> {
        // Callers keep at least one scratch free (see `emit_expr`); if that
        // ever failed, the function is refused rather than miscompiled.
        match self.free.pop() {
            Some(r) => l(r),
            None => {
                self.out_of_scratch = true;
                l(SCRATCH[0])
            }
        }
    }

    fn give(&mut self, r: Reg<L>) {
        if SCRATCH.contains(&r.num()) && !self.free.contains(&r.num()) {
            self.free.push(r.num());
        }
    }

    fn spill_slot(&mut self) -> Local<L> {
        if self.spill_depth == self.spills.len() {
            let loc = self.f.local::<L>();
            self.spills.push(loc);
        }
        self.spill_depth += 1;
        self.spills[self.spill_depth - 1]
    }

    /// Loads the variable array pointer into `t` (or names the register
    /// that holds it).
    fn vars_base(&mut self, t: Reg<L>) -> Reg<P> {
        match self.vars_reg {
            Some(r) => p(r),
            None => {
                let tp = t.cast::<P>();
                self.f.ld(tp, self.ctx, Ctx::OFFSETS[0]);
                tp
            }
        }
    }

    /// `d = slot`.
    fn load_slot(&mut self, s: u32, d: Reg<L>) {
        if let Some(r) = self.slot_reg(s) {
            if r != d {
                self.f.mov(d, r);
            }
        } else {
            self.load_slot_mem(s, d);
        }
    }

    fn load_slot_mem(&mut self, s: u32, d: Reg<L>) {
        if s >= self.layout.slots {
            let loc = self.local_of(s);
            self.f.ld_local(d, loc);
        } else {
            let base = self.vars_base(d);
            self.f.ld(d, base, 8 * s as i64);
        }
    }

    fn local_of(&mut self, s: u32) -> Local<L> {
        if let Some(&loc) = self.locals.get(&s) {
            return loc;
        }
        let loc = self.f.local::<L>();
        self.locals.insert(s, loc);
        loc
    }

    /// Memory home of slot `s` = `v` (whatever its home is).
    fn store_slot_mem(&mut self, s: u32, v: Reg<L>) {
        if s >= self.layout.slots {
            let loc = self.local_of(s);
            self.f.st_local(v, loc);
        } else if let Some(r) = self.vars_reg {
            self.f.st(v, p(r), 8 * s as i64);
        } else {
            let t = self.take();
            let base = self.vars_base(t);
            self.f.st(v, base, 8 * s as i64);
            self.give(t);
        }
    }

    /// `slot = v`.
    fn store_slot(&mut self, s: u32, v: Reg<L>) {
        match self.slot_reg(s) {
            Some(r) => {
                if r != v {
                    self.f.mov(r, v);
                }
            }
            None => self.store_slot_mem(s, v),
        }
    }

    fn port_addr(&mut self, out: bool, chan: u32, t: Reg<L>) -> (Reg<P>, i64) {
        let tp = t.cast::<P>();
        self.f
            .ld(tp, self.ctx, Ctx::OFFSETS[if out { 3 } else { 2 }]);
        (tp, PORT_SIZE as i64 * chan as i64)
    }

    /// Loads the register homes of a port (and the frame copy of its end).
    fn load_port(&mut self, out: bool, chan: u32) {
        let t = self.take();
        let (base, off) = self.port_addr(out, chan, t);
        if let Home::Reg(r) = self.home(Cand::Next(out, chan)) {
            self.f.ld(l(r), base, off);
        }
        match self.home(Cand::End(out, chan)) {
            Home::Reg(r) => self.f.ld(l(r), base, off + 8),
            Home::Mem => {
                if let Some(&loc) = self.end_locals.get(&(out, chan)) {
                    let v = self.take();
                    self.f.ld(v, base, off + 8);
                    self.f.st_local(v, loc);
                    self.give(v);
                }
            }
        }
        self.give(t);
    }

    /// Writes a port's register `next` back to the port.
    fn store_port(&mut self, out: bool, chan: u32) {
        if let Home::Reg(r) = self.home(Cand::Next(out, chan)) {
            let t = self.take();
            let (base, off) = self.port_addr(out, chan, t);
            self.f.st(l(r), base, off);
            self.give(t);
        }
    }

    /// At an entry: load what lives in registers.
    fn load_homes(&mut self, entry: Option<BlockId>) {
        let homes: Vec<(Cand, Home)> = {
            let mut v: Vec<_> = self.homes.iter().map(|(c, h)| (*c, *h)).collect();
            v.sort_unstable_by_key(|x| x.0);
            v
        };
        if let Some(r) = self.vars_reg {
            self.f.ld(p(r), self.ctx, Ctx::OFFSETS[0]);
        }
        for (c, h) in &homes {
            match (c, h) {
                (Cand::Slot(s), Home::Reg(r)) => {
                    let live = entry.is_none_or(|e| self.live_in[e as usize].get(*s));
                    if live && *s < self.layout.slots {
                        self.load_slot_mem(*s, l(*r));
                    }
                }
                (Cand::Const(v), Home::Reg(r)) => self.f.set(l(*r), *v),
                (Cand::Counter(k), _) => {
                    let bound = self.g.counters[*k as usize] as i64;
                    match h {
                        Home::Reg(r) => self.f.set(l(*r), bound),
                        Home::Mem => {
                            let t = self.take();
                            self.f.set(t, bound);
                            let loc = self.counter_locals[k];
                            self.f.st_local(t.cast::<UL>(), loc);
                            self.give(t);
                        }
                    }
                }
                _ => {}
            }
        }
        for (out, ch) in self.ports.clone() {
            self.load_port(out, ch);
        }
    }

    /// Before a call: write the ports back and save caller-saved homes.
    fn before_call(&mut self) {
        for (out, ch) in self.ports.clone() {
            self.store_port(out, ch);
        }
        for (c, h) in self.sorted_homes() {
            if let (Cand::Slot(s), Home::Reg(r)) = (c, h)
                && !callee_saved(r)
            {
                self.store_slot_mem(s, l(r));
            }
            if let (Cand::Counter(k), Home::Reg(r)) = (c, h)
                && !callee_saved(r)
            {
                let loc = self.counter_local(k);
                self.f.st_local(ul(r), loc);
            }
        }
    }

    /// After a call: reload caller-saved homes and the ports.
    fn after_call(&mut self) {
        if let Some(r) = self.vars_reg
            && !callee_saved(r)
        {
            self.f.ld(p(r), self.ctx, Ctx::OFFSETS[0]);
        }
        for (c, h) in self.sorted_homes() {
            if let (Cand::Slot(s), Home::Reg(r)) = (c, h)
                && !callee_saved(r)
            {
                self.load_slot_mem(s, l(r));
            }
            if let (Cand::Const(v), Home::Reg(r)) = (c, h)
                && !callee_saved(r)
            {
                self.f.set(l(r), v);
            }
            if let (Cand::Counter(k), Home::Reg(r)) = (c, h)
                && !callee_saved(r)
            {
                let loc = self.counter_local(k);
                self.f.ld_local(ul(r), loc);
            }
        }
        for (out, ch) in self.ports.clone() {
            self.load_port(out, ch);
        }
    }

    fn counter_local(&mut self, k: u32) -> Local<UL> {
        if let Some(&loc) = self.counter_locals.get(&k) {
            return loc;
        }
        let loc = self.f.local::<UL>();
        self.counter_locals.insert(k, loc);
        loc
    }

    fn sorted_homes(&self) -> Vec<(Cand, Home)> {
        let mut v: Vec<_> = self.homes.iter().map(|(c, h)| (*c, *h)).collect();
        v.sort_unstable_by_key(|x| x.0);
        v
    }

    // -- layout -------------------------------------------------------------------------

    fn layout_order(&self) -> Vec<BlockId> {
        let g = self.g;
        let depth = loop_depth(g);
        let hot = hot_blocks(g, &depth);
        let n = g.blocks.len();
        let mut seen = vec![false; n];
        let mut order = Vec::with_capacity(n);
        for pass_hot in [true, false] {
            for &e in &g.entries {
                self.dfs(e, pass_hot, &hot, &mut seen, &mut order);
            }
            for b in 0..n as u32 {
                self.dfs(b, pass_hot, &hot, &mut seen, &mut order);
            }
        }
        order
    }

    fn dfs(
        &self,
        start: BlockId,
        pass_hot: bool,
        hot: &[bool],
        seen: &mut [bool],
        order: &mut Vec<BlockId>,
    ) {
        let mut stack = vec![start];
        while let Some(b) = stack.pop() {
            if seen[b as usize] || hot[b as usize] != pass_hot {
                continue;
            }
            seen[b as usize] = true;
            order.push(b);
            let succ = opt::successors(&self.g.blocks[b as usize].term);
            // Push so that the preferred successor (hot first, then in
            // order) is popped next.
            let mut s: Vec<BlockId> = succ.clone();
            s.sort_by_key(|&x| !hot[x as usize]);
            for &x in s.iter().rev() {
                stack.push(x);
            }
        }
    }

    // -- blocks ---------------------------------------------------------------------------

    fn block(&mut self, b: BlockId, fall: Option<Label>) -> Result<()> {
        let g = self.g;
        let blk = &g.blocks[b as usize];
        let copy = self.copying;
        let here = match copy {
            Some(li) => self.loops[li].copy[&b],
            None => self.labels[b as usize],
        };
        self.f.label(here);
        let mut note = if blk.note.is_empty() {
            format!("b{b}")
        } else {
            format!("b{b}: {}", blk.note)
        };
        if copy.is_some() {
            note.push_str(" (count charged at the loop's entry)");
        }
        self.marks.push((self.f.code_offset(), note));
        for i in &blk.insts {
            match self.outlined.get(&format!("{i:?}")) {
                Some(&sub) => self.f.jal(sub),
                None => self.inst(i),
            }
        }
        let lab = |s: &mut Self, x: BlockId| s.to(b, x);
        let jump_unless_fall = |s: &mut Self, x: BlockId| {
            let t = s.to(b, x);
            if Some(t) != fall {
                s.f.jmp(t);
            }
        };
        match &blk.term {
            Term::Jump(t) => jump_unless_fall(self, *t),
            // In the copy whose count was charged at the loop's entry, a
            // count only goes on.
            Term::Count { next, .. } if copy.is_some() => jump_unless_fall(self, *next),
            Term::Branch { cond, then, els } => {
                let (t, e) = (lab(self, *then), lab(self, *els));
                if Some(t) == fall {
                    self.branch(cond, e, false);
                } else {
                    self.branch(cond, t, true);
                    jump_unless_fall(self, *els);
                }
            }
            Term::Recv {
                chan,
                slots,
                got,
                empty,
            } => {
                let (gl, el) = (lab(self, *got), lab(self, *empty));
                self.recv(*chan, slots, gl, el);
                jump_unless_fall(self, *got);
            }
            Term::Send { chan, args, next } => {
                let nl = lab(self, *next);
                self.send(*chan, args, nl);
                jump_unless_fall(self, *next);
            }
            Term::Count {
                counter,
                next,
                over,
            } => {
                // Past its bound a counter stays past it: the stub resets
                // the count-down to 0, so the next `Count` borrows again.
                // When no `Count` of the counter can follow (the usual
                // `over`: an abort), the borrow goes to `over` directly.
                let over_l = lab(self, *over);
                let stub = if self.counts_again(*counter, *over) {
                    self.f.genlabel()
                } else {
                    over_l
                };
                match self.home(Cand::Counter(*counter)) {
                    Home::Reg(r) => self.f.dec_branch_borrow(ul(r), stub),
                    Home::Mem => {
                        let loc = self.counter_local(*counter);
                        self.f.dec_local_branch_borrow(loc, stub);
                    }
                }
                if stub != over_l {
                    self.cold.push(Cold::Over {
                        at: stub,
                        counter: *counter,
                        over: over_l,
                    });
                }
                jump_unless_fall(self, *next);
            }
            Term::Leave { pcs, why } => self.leave(b, pcs, *why),
        }
        Ok(())
    }

    /// The label of block `x` as a successor of block `from`: an edge into
    /// a counted loop's head from outside the loop goes to the loop's
    /// charge; inside the copy without counts, an edge stays in the copy,
    /// or leaves it through a refund when it can reach a count of the
    /// loop's counter again.
    fn to(&mut self, from: BlockId, x: BlockId) -> Label {
        let Some(li) = self.copying else {
            return match self.head_loop.get(&x) {
                Some(&li) if !self.loops[li].l.inside[from as usize] => self.loops[li].pre,
                _ => self.labels[x as usize],
            };
        };
        if let Some(&c) = self.loops[li].copy.get(&x) {
            return c;
        }
        let target = self.to_from_outside(x);
        // The test's exit is the loop's own: all that was charged was done.
        let (test, counter) = (self.loops[li].l.test, self.loops[li].l.counter);
        if from == test || !self.counts_again(counter, x) {
            return target;
        }
        if let Some(&at) = self.loops[li].refunds.get(&(from, x)) {
            return at;
        }
        let at = self.f.genlabel();
        self.loops[li].refunds.insert((from, x), at);
        self.cold.push(Cold::Refund {
            at,
            li,
            from,
            to: target,
        });
        at
    }

    /// The label of block `x` entered from outside any loop it belongs to.
    fn to_from_outside(&self, x: BlockId) -> Label {
        match self.head_loop.get(&x) {
            Some(&li) => self.loops[li].pre,
            None => self.labels[x as usize],
        }
    }

    /// The entry of counted loop `li`, placed just before its head: when
    /// the loop's count fits in what is left of its counter, it is charged
    /// at once and the copy of the loop without counts runs (emitted here;
    /// its edges go to the copy or out of the loop, never into the loop as
    /// it is, which follows); otherwise the loop as it is, which counts
    /// every way round.
    fn charged_loop(&mut self, li: usize, order: &[BlockId]) -> Result<()> {
        let l = self.loops[li].l.clone();
        let h = l.head;
        let slow = self.labels[h as usize];
        self.f.label(self.loops[li].pre);
        self.marks.push((
            self.f.code_offset(),
            format!("b{h}: the loop's count, charged at its entry"),
        ));
        // `c_T + K * N`, with `N` taken as 0 when a guarded loop's test
        // fails at first; `N` capped so that it cannot wrap.
        let (c_t, k) = (l.at_test.0, l.per_trip);
        let t = self.take();
        let tu = t.cast::<UL>();
        self.emit_expr(&l.trips(), t);
        if l.guarded {
            let runs = self.f.genlabel();
            self.branch(&l.runs(), runs, true);
            self.f.set(t, 0);
            self.f.label(runs);
        }
        if k > 1 || c_t > 0 {
            let cap = (self.g.counters[l.counter as usize] - c_t) / k;
            let t2 = self.take();
            self.f.set(t2, cap as i64);
            self.f.bgt(tu, t2.cast::<UL>(), slow);
            self.give(t2);
            if k > 1 {
                self.f.mul(t, t, k as i64);
            }
            if c_t > 0 {
                self.f.add(t, t, c_t as i64);
            }
        }
        match self.home(Cand::Counter(l.counter)) {
            Home::Reg(r) => {
                self.f.bgt(tu, ul(r), slow);
                self.f.sub(ul(r), ul(r), tu);
            }
            Home::Mem => {
                let loc = self.counter_local(l.counter);
                let t2 = self.take();
                let cu = t2.cast::<UL>();
                self.f.ld_local(cu, loc);
                self.f.bgt(tu, cu, slow);
                self.f.sub(cu, cu, tu);
                self.f.st_local(cu, loc);
                self.give(t2);
            }
        }
        self.give(t);
        let mut blocks = vec![h];
        blocks.extend(
            order
                .iter()
                .copied()
                .filter(|&b| b != h && l.inside[b as usize]),
        );
        self.copying = Some(li);
        for (pos, &b) in blocks.iter().enumerate() {
            let fall = match blocks.get(pos + 1) {
                Some(x) => self.loops[li].copy[x],
                None => slow,
            };
            self.block(b, Some(fall))?;
        }
        self.copying = None;
        Ok(())
    }

    /// Gives back to the counter of counted loop `li` what its charge
    /// counted for the counts the loop will not do, on an exit from block
    /// `from` of its copy: `K * (distance + d - d_T) + c_T - c` after `c`
    /// counts and `d` increments on the way from the head (see
    /// [`counted`]).
    fn refund(&mut self, li: usize, from: BlockId) {
        let l = self.loops[li].l.clone();
        let done = l.done[&from];
        let (c_t, d_t) = l.at_test;
        let t = self.take();
        let tu = t.cast::<UL>();
        self.emit_expr(&l.distance(), t);
        let steps = done.incrs as i64 - d_t as i64;
        if steps != 0 {
            self.f.add(t, t, steps);
        }
        if l.per_trip > 1 {
            self.f.mul(t, t, l.per_trip as i64);
        }
        let counts = c_t as i64 - done.counts as i64;
        if counts != 0 {
            self.f.add(t, t, counts);
        }
        match self.home(Cand::Counter(l.counter)) {
            Home::Reg(r) => self.f.add(ul(r), ul(r), tu),
            Home::Mem => {
                let loc = self.counter_local(l.counter);
                let t2 = self.take();
                let cu = t2.cast::<UL>();
                self.f.ld_local(cu, loc);
                self.f.add(cu, cu, tu);
                self.f.st_local(cu, loc);
                self.give(t2);
            }
        }
        self.give(t);
    }

    fn inst(&mut self, i: &Inst) {
        match i {
            Inst::Assign { slot, value } => self.assign(*slot, value),
            Inst::Eval(e) => {
                let t = self.take();
                self.emit_expr(e, t);
                self.give(t);
            }
        }
    }

    /// True when a `Count` of `counter` is reachable from block `from`
    /// (its count-down must then be reset past the bound). The blocks
    /// that reach one are found once per counter, backwards from its
    /// `Count`s.
    fn counts_again(&mut self, counter: u32, from: BlockId) -> bool {
        if !self.reaches_count.contains_key(&counter) {
            let g = self.g;
            let n = g.blocks.len();
            let mut preds: Vec<Vec<BlockId>> = vec![Vec::new(); n];
            for (b, blk) in g.blocks.iter().enumerate() {
                for s in opt::successors(&blk.term) {
                    preds[s as usize].push(b as BlockId);
                }
            }
            let mut reach = vec![false; n];
            let mut todo: Vec<BlockId> = (0..n as BlockId)
                .filter(|&b| {
                    matches!(g.blocks[b as usize].term,
                        Term::Count { counter: c, .. } if c == counter)
                })
                .collect();
            while let Some(b) = todo.pop() {
                if !std::mem::replace(&mut reach[b as usize], true) {
                    todo.extend(&preds[b as usize]);
                }
            }
            self.reaches_count.insert(counter, reach);
        }
        self.reaches_count[&counter][from as usize]
    }

    fn leave(&mut self, b: BlockId, pcs: &[(ProcId, u32)], why: Leave) {
        let procs: Vec<ProcId> = pcs.iter().map(|x| x.0).collect();
        let code = match why {
            Leave::Exit => 0,
            Leave::Abort => 1,
            Leave::Suspend { resume } => resume.saturating_add(2),
        };
        let gi = match self.group_of.get(&procs) {
            Some(&gi) => gi,
            None => {
                let label = self.f.genlabel();
                self.groups.push(LeaveGroup {
                    procs: procs.clone(),
                    rows: Vec::new(),
                    label,
                    live: Bits::new(0),
                });
                self.group_of.insert(procs, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        let live = self.leave_live[b as usize].clone();
        let grp = &mut self.groups[gi];
        grp.live.union_with(&live);
        let row = grp.rows.len();
        grp.rows.push((pcs.iter().map(|x| x.1).collect(), code));
        let label = grp.label;
        self.f.set(l(SCRATCH[0]), row as i64);
        self.f.jmp(label);
    }

    fn leave_tail(&mut self, gi: usize) {
        let label = self.groups[gi].label;
        self.f.label(label);
        self.marks
            .push((self.f.code_offset(), format!("leave tail {gi}")));
        for (out, ch) in self.ports.clone() {
            self.store_port_with(out, ch, l(SCRATCH[1]));
        }
        let live = self.groups[gi].live.clone();
        for (c, h) in self.sorted_homes() {
            if let (Cand::Slot(s), Home::Reg(r)) = (c, h)
                && s < self.layout.slots
                && live.get(s)
            {
                self.store_slot_mem_with(s, l(r), l(SCRATCH[1]));
            }
        }
        let grp = &self.groups[gi];
        let n = grp.procs.len();
        let stride = 4 * (n + 1);
        let mut table = Vec::with_capacity(stride * grp.rows.len());
        for (pcs, code) in &grp.rows {
            for pc in pcs {
                table.extend_from_slice(&pc.to_le_bytes());
            }
            table.extend_from_slice(&code.to_le_bytes());
        }
        let procs = grp.procs.clone();
        let single = grp.rows.len() == 1;
        let data = self.f.data(&table);
        let row = l(SCRATCH[0]);
        let at = p(SCRATCH[1]);
        let pcs_p = p(SCRATCH[2]);
        self.f.addr_data(at, data);
        if !single {
            self.f.mul(row, row, stride as i64);
            self.f.add(at, at, row.cast::<P>());
        }
        self.f.ld(pcs_p, self.ctx, Ctx::OFFSETS[1]);
        let v = u(SCRATCH[0]);
        for (j, proc_) in procs.iter().enumerate() {
            self.f.ld(v, at, 4 * j as i64);
            self.f.st(v, pcs_p, 4 * *proc_ as i64);
        }
        self.f.ld(v, at, 4 * n as i64);
        self.f.ret(v);
    }

    fn store_port_with(&mut self, out: bool, chan: u32, t: Reg<L>) {
        if let Home::Reg(r) = self.home(Cand::Next(out, chan)) {
            let (base, off) = self.port_addr(out, chan, t);
            self.f.st(l(r), base, off);
        }
    }

    fn store_slot_mem_with(&mut self, s: u32, v: Reg<L>, t: Reg<L>) {
        if let Some(r) = self.vars_reg {
            self.f.st(v, p(r), 8 * s as i64);
        } else {
            let base = self.vars_base(t);
            self.f.st(v, base, 8 * s as i64);
        }
    }

    // -- channels ---------------------------------------------------------------------------

    /// Loads a port pointer (`next` or `end`) into a register: its home or `t`.
    fn port_ptr(&mut self, c: Cand, t: Reg<L>) -> Reg<L> {
        match (c, self.home(c)) {
            (_, Home::Reg(r)) => l(r),
            (Cand::Next(out, ch), Home::Mem) => {
                let (base, off) = self.port_addr(out, ch, t);
                self.f.ld(t, base, off);
                t
            }
            (Cand::End(out, ch), Home::Mem) => match self.end_locals.get(&(out, ch)) {
                Some(&loc) => {
                    self.f.ld_local(t, loc);
                    t
                }
                None => {
                    let (base, off) = self.port_addr(out, ch, t);
                    self.f.ld(t, base, off + 8);
                    t
                }
            },
            _ => t,
        }
    }

    /// Branches to `slow` when port `next` has reached its end.
    fn port_full(&mut self, out: bool, chan: u32, next: Reg<L>, slow: Label) {
        let c = Cand::End(out, chan);
        if let (Home::Mem, Some(&loc)) = (self.home(c), self.end_locals.get(&(out, chan))) {
            self.f.bcmp_local(Cond::Eq, next, loc, slow);
            return;
        }
        let et = self.take();
        let end = self.port_ptr(c, et);
        self.f.beq(next, end, slow);
        self.give(et);
    }

    fn recv(&mut self, chan: u32, slots: &[u32], got: Label, empty: Label) {
        let slow = self.f.genlabel();
        let nt = self.take();
        let next = self.port_ptr(Cand::Next(false, chan), nt);
        self.port_full(false, chan, next, slow);
        let np = next.cast::<P>();
        let v = self.take();
        for (i, &s) in slots.iter().enumerate() {
            match self.slot_reg(s) {
                Some(r) if r != next => self.f.ld(r, np, 8 * i as i64),
                _ => {
                    self.f.ld(v, np, 8 * i as i64);
                    self.store_slot(s, v);
                }
            }
        }
        self.give(v);
        let k = 8 * slots.len() as i64;
        if next == nt {
            self.f.add(nt, nt, k);
            let t = self.take();
            let (base, off) = self.port_addr(false, chan, t);
            self.f.st(nt, base, off);
            self.give(t);
        } else {
            self.f.add(next, next, k);
        }
        self.give(nt);
        self.cold.push(Cold::Recv {
            at: slow,
            chan,
            slots: slots.to_vec(),
            got,
            empty,
        });
    }

    fn send(&mut self, chan: u32, args: &[IrOperand], next_l: Label) {
        let slow = self.f.genlabel();
        let nt = self.take();
        let next = self.port_ptr(Cand::Next(true, chan), nt);
        self.port_full(true, chan, next, slow);
        let np = next.cast::<P>();
        let v = self.take();
        for (i, a) in args.iter().enumerate() {
            let r = self.operand_reg(a, v);
            self.f.st(r, np, 8 * i as i64);
        }
        self.give(v);
        let k = 8 * args.len() as i64;
        if next == nt {
            self.f.add(nt, nt, k);
            let t = self.take();
            let (base, off) = self.port_addr(true, chan, t);
            self.f.st(nt, base, off);
            self.give(t);
        } else {
            self.f.add(next, next, k);
        }
        self.give(nt);
        self.cold.push(Cold::Send {
            at: slow,
            chan,
            args: args.to_vec(),
            next: next_l,
        });
    }

    fn operand_reg(&mut self, a: &IrOperand, t: Reg<L>) -> Reg<L> {
        match a {
            IrOperand::Const(c) => {
                self.f.set(t, *c);
                t
            }
            IrOperand::Var(s) => match self.slot_reg(*s) {
                Some(r) => r,
                None => {
                    self.load_slot_mem(*s, t);
                    t
                }
            },
        }
    }

    /// The address of the message buffer in `t`.
    fn msg_addr(&mut self, k: usize, t: Reg<L>) -> Reg<P> {
        let tp = t.cast::<P>();
        if k == 0 {
            // Any valid address: nothing is read or written.
            self.f.mov(tp, self.ctx);
        } else {
            self.f.addr_local(tp, self.msg[k - 1]);
        }
        tp
    }

    fn msg_slot(&self, k: usize, i: usize) -> Local<L> {
        // Locals grow downward: element i of a k-element buffer based at
        // the (k-1)-th local is the (k-1-i)-th.
        self.msg[k - 1 - i]
    }

    fn cold_path(&mut self, c: Cold) {
        match c {
            Cold::Over { at, counter, over } => {
                self.f.label(at);
                match self.home(Cand::Counter(counter)) {
                    Home::Reg(r) => self.f.set(l(r), 0),
                    Home::Mem => {
                        let t = self.take();
                        self.f.set(t, 0);
                        let loc = self.counter_local(counter);
                        self.f.st_local(t.cast::<UL>(), loc);
                        self.give(t);
                    }
                }
                self.f.jmp(over);
            }
            Cold::Refund { at, li, from, to } => {
                self.f.label(at);
                self.refund(li, from);
                self.f.jmp(to);
            }
            Cold::Recv { .. } | Cold::Send { .. } => {
                unreachable!("slow paths of channels are grouped by emit")
            }
        }
    }

    /// The slot that holds which site entered a shared slow path.
    fn site_local(&mut self) -> Local<L> {
        match self.site {
            Some(loc) => loc,
            None => {
                let loc = self.f.local::<L>();
                self.site = Some(loc);
                loc
            }
        }
    }

    /// The entry of a slow path shared by `sites` (their `at` labels):
    /// each site's stub puts its index in the first scratch register and
    /// jumps to it, and the shared code saves the index in the frame; a
    /// single site enters at its own label.
    fn slow_entry(&mut self, sites: &[Label], what: String) {
        let shared = self.f.genlabel();
        if sites.len() > 1 {
            for (k, &at) in sites.iter().enumerate() {
                self.f.label(at);
                self.f.set(l(SCRATCH[0]), k as i64);
                self.f.jmp(shared);
            }
        } else {
            self.f.label(sites[0]);
        }
        self.f.label(shared);
        self.marks.push((self.f.code_offset(), what));
        if sites.len() > 1 {
            let loc = self.site_local();
            self.f.st_local(l(SCRATCH[0]), loc);
        }
    }

    /// Goes on to the target of the site that entered the slow path.
    fn dispatch(&mut self, targets: &[Label]) {
        if let [only] = targets {
            self.f.jmp(*only);
            return;
        }
        let t = self.take();
        let loc = self.site_local();
        self.f.ld_local(t, loc);
        let (last, rest) = targets.split_last().expect("two or more sites");
        for (k, &target) in rest.iter().enumerate() {
            self.f.beq(t, k as i64, target);
        }
        self.f.jmp(*last);
        self.give(t);
    }

    /// The slow path of the receives at `sites` (`at`, `got`, `empty`):
    /// the host's `recv` into the message buffer, then the fields into the
    /// slots.
    fn recv_slow(&mut self, chan: u32, slots: &[u32], sites: &[(Label, Label, Label)]) {
        let at: Vec<Label> = sites.iter().map(|s| s.0).collect();
        self.slow_entry(&at, format!("recv slow path (channel {chan})"));
        self.before_call();
        let (host, func, dst) = (p(SCRATCH[0]), p(SCRATCH[1]), p(SCRATCH[2]));
        self.f.ld(host, self.ctx, Ctx::OFFSETS[4]);
        self.f.ld(func, self.ctx, Ctx::OFFSETS[6]);
        let dst = self.msg_addr(slots.len(), dst.cast::<L>());
        let res = u(SCRATCH[0]);
        self.f.call(
            res,
            Callee::Reg(func.num()),
            &[
                Arg::Reg(host.any()),
                Arg::Imm(Ty::U, chan as i64),
                Arg::Reg(dst.any()),
            ],
        );
        let keep = l(SCRATCH[0]);
        self.after_call_keeping(keep);
        let empties: Vec<Label> = sites.iter().map(|s| s.2).collect();
        let empty = if sites.len() > 1 {
            self.f.genlabel()
        } else {
            empties[0]
        };
        self.f.beq(res, 0, empty);
        let k = slots.len();
        let v = self.take();
        for (i, &s) in slots.iter().enumerate() {
            let loc = self.msg_slot(k, i);
            self.f.ld_local(v, loc);
            self.store_slot(s, v);
        }
        self.give(v);
        let gots: Vec<Label> = sites.iter().map(|s| s.1).collect();
        self.dispatch(&gots);
        if sites.len() > 1 {
            self.f.label(empty);
            self.dispatch(&empties);
        }
    }

    /// The slow path of the sends at `sites` (`at`, `next`): the fields
    /// into the message buffer, then the host's `send`.
    fn send_slow(&mut self, chan: u32, args: &[IrOperand], sites: &[(Label, Label)]) {
        let at: Vec<Label> = sites.iter().map(|s| s.0).collect();
        self.slow_entry(&at, format!("send slow path (channel {chan})"));
        let k = args.len();
        let v = l(SCRATCH[0]);
        for (i, a) in args.iter().enumerate() {
            let r = self.operand_reg(a, v);
            let loc = self.msg_slot(k, i);
            self.f.st_local(r, loc);
        }
        self.before_call();
        let (host, func, src) = (p(SCRATCH[0]), p(SCRATCH[1]), p(SCRATCH[2]));
        self.f.ld(host, self.ctx, Ctx::OFFSETS[4]);
        self.f.ld(func, self.ctx, Ctx::OFFSETS[7]);
        let src = self.msg_addr(k, src.cast::<L>());
        self.f.callv(
            Callee::Reg(func.num()),
            &[
                Arg::Reg(host.any()),
                Arg::Imm(Ty::U, chan as i64),
                Arg::Reg(src.any()),
            ],
        );
        self.after_call();
        let nexts: Vec<Label> = sites.iter().map(|s| s.1).collect();
        self.dispatch(&nexts);
    }

    /// [`after_call`](Self::after_call) with the free list arranged so that
    /// `keep` (holding the call's result) is not used.
    fn after_call_keeping(&mut self, keep: Reg<L>) {
        let saved = self.free.clone();
        self.free.retain(|&r| r != keep.num());
        self.after_call();
        self.free = saved;
    }

    // -- assignments and expressions ---------------------------------------------------------------

    fn assign(&mut self, s: u32, e: &Expr) {
        if let Some(r) = self.slot_reg(s) {
            // `s = base op (k & -bit)` in place: the bit is read before
            // `s`'s register is written, `base` may read `s` first.
            if let Some(m) = as_masked(e)
                && safe_target(m.base, s)
                && self.free.len() >= 2
                && !e.has_call()
                && let Some(k) = self.operand(m.k)
                && !matches!(k, Operand::Reg(x) if x == r)
            {
                return self.gen_masked(&m, k, r);
            }
            if safe_target(e, s) {
                self.emit_expr(e, r);
                return;
            }
            // `s = A op B` with both sides reading `s`: B first into a
            // scratch, then A in place (both pure, so the order is free).
            if let Expr::Binary(op, a, b) = e
                && matches!(
                    op,
                    BinOp::Add
                        | BinOp::Sub
                        | BinOp::Mul
                        | BinOp::BitAnd
                        | BinOp::BitOr
                        | BinOp::BitXor
                )
                && safe_target(a, s)
                && opt::pure(a)
                && opt::pure(b)
                && opt::as_select(e).is_none()
                && as_masked(e).is_none()
            {
                let t = self.take();
                self.emit_expr(b, t);
                self.emit_expr(a, r);
                match op {
                    BinOp::Add => self.f.add(r, r, t),
                    BinOp::Sub => self.f.sub(r, r, t),
                    BinOp::Mul => self.f.mul(r, r, t),
                    BinOp::BitAnd => self.f.and(r, r, t),
                    BinOp::BitOr => self.f.or(r, r, t),
                    _ => self.f.xor(r, r, t),
                }
                self.give(t);
                return;
            }
            let t = self.take();
            self.emit_expr(e, t);
            self.f.mov(r, t);
            self.give(t);
        } else if let Some(Operand::Reg(r)) = self.operand(e) {
            self.store_slot_mem(s, r);
        } else {
            let t = self.take();
            self.emit_expr(e, t);
            self.store_slot_mem(s, t);
            self.give(t);
        }
    }

    /// A simple operand: a constant (in its register when it has one) or
    /// a slot in a register.
    fn operand(&self, e: &Expr) -> Option<Operand<L>> {
        match e {
            Expr::Const(c) => Some(match self.home(Cand::Const(*c)) {
                Home::Reg(r) => Operand::Reg(l(r)),
                Home::Mem => Operand::Imm(*c),
            }),
            Expr::Var(s) => self.slot_reg(*s).map(Operand::Reg),
            _ => None,
        }
    }

    /// `d = e`. Invariant: at least one scratch register is free on entry
    /// (besides `d`), and every scratch taken is given back.
    fn emit_expr(&mut self, e: &Expr, d: Reg<L>) {
        if let Some((c, a, b)) = opt::as_select(e)
            && self.free.len() >= 3
            && !c.has_call()
            && !a.has_call()
            && !b.has_call()
            && !mentions_reg(self, a, d)
            && !mentions_reg(self, c, d)
        {
            return self.gen_select(c, a, b, d);
        }
        if let Some(m) = as_masked(e)
            && self.free.len() >= 2
            && !e.has_call()
            && let Some(k) = self.operand(m.k)
            && !matches!(k, Operand::Reg(r) if r == d)
        {
            return self.gen_masked(&m, k, d);
        }
        match e {
            Expr::Const(c) => match self.home(Cand::Const(*c)) {
                Home::Reg(r) => self.f.mov(d, l(r)),
                Home::Mem => self.f.set(d, *c),
            },
            Expr::Var(s) => self.load_slot(*s, d),
            Expr::Unary(op, a) => {
                self.emit_expr(a, d);
                match op {
                    UnOp::Neg => self.f.neg(d, d),
                    UnOp::BitNot => self.f.com(d, d),
                    UnOp::Not => self.f.not(d, d),
                }
            }
            Expr::Binary(op, a, b) => self.gen_binary(*op, a, b, d),
            Expr::And(a, b) | Expr::Or(a, b) => {
                let and = matches!(e, Expr::And(..));
                let (short, done) = (self.f.genlabel(), self.f.genlabel());
                self.emit_expr(a, d);
                if and {
                    self.f.beq(d, 0, short);
                } else {
                    self.f.bne(d, 0, short);
                }
                self.emit_expr(b, d);
                if and {
                    self.f.beq(d, 0, short);
                } else {
                    self.f.bne(d, 0, short);
                }
                self.f.set(d, and as i64);
                self.f.jmp(done);
                self.f.label(short);
                self.f.set(d, !and as i64);
                self.f.label(done);
            }
            Expr::Call(func, args) => self.gen_call(*func, args, d),
        }
    }

    /// Evaluates `a` and `b`, leaving `a` in `d` and returning `b`'s operand
    /// (a register, an immediate); the register is a scratch to give back
    /// when it is not `d`'s or a home.
    fn gen_pair(&mut self, a: &Expr, b: &Expr, d: Reg<L>) -> (Operand<L>, Option<Reg<L>>) {
        self.emit_expr(a, d);
        if let Some(o) = self.operand(b) {
            return (o, None);
        }
        if !b.has_call() && self.free.len() >= 2 {
            let t = self.take();
            self.emit_expr(b, t);
            return (Operand::Reg(t), Some(t));
        }
        // Spill `a`, evaluate `b` into `d`, swap through a scratch.
        let loc = self.spill_slot();
        self.f.st_local(d, loc);
        self.emit_expr(b, d);
        let t = self.take();
        self.f.mov(t, d);
        self.f.ld_local(d, loc);
        self.spill_depth -= 1;
        (Operand::Reg(t), Some(t))
    }

    fn gen_binary(&mut self, op: BinOp, a: &Expr, b: &Expr, d: Reg<L>) {
        if opt::is_compare(op) {
            let (o, t) = self.gen_pair(a, b, d);
            let (yes, done) = (self.f.genlabel(), self.f.genlabel());
            self.cmp_branch(op, d, o, yes);
            self.f.set(d, 0);
            self.f.jmp(done);
            self.f.label(yes);
            self.f.set(d, 1);
            self.f.label(done);
            if let Some(t) = t {
                self.give(t);
            }
            return;
        }
        if matches!(op, BinOp::Div | BinOp::Rem) {
            return self.gen_div(op, a, b, d);
        }
        let (o, t) = self.gen_pair(a, b, d);
        match op {
            BinOp::Add => self.f.add(d, d, o),
            BinOp::Sub => self.f.sub(d, d, o),
            BinOp::Mul => self.f.mul(d, d, o),
            BinOp::BitAnd => self.f.and(d, d, o),
            BinOp::BitOr => self.f.or(d, d, o),
            BinOp::BitXor => self.f.xor(d, d, o),
            BinOp::Shl => self.f.lsh(d, d, o),
            BinOp::Shr => self.f.rsh(d, d, o),
            _ => {}
        }
        if let Some(t) = t {
            self.give(t);
        }
    }

    fn gen_div(&mut self, op: BinOp, a: &Expr, b: &Expr, d: Reg<L>) {
        let div = op == BinOp::Div;
        if let Expr::Const(c) = b {
            self.emit_expr(a, d);
            match *c {
                0 => self.f.set(d, 0),
                -1 => {
                    if div {
                        self.f.neg(d, d)
                    } else {
                        self.f.set(d, 0)
                    }
                }
                1 if div => {}
                c => {
                    if div {
                        self.f.div(d, d, c)
                    } else {
                        self.f.rem(d, d, c)
                    }
                }
            }
            return;
        }
        let (o, t) = self.gen_pair(a, b, d);
        let rb = match o {
            Operand::Reg(r) => r,
            Operand::Imm(_) => d, // not reached: constants are handled above
        };
        let (minus1, zero, done) = (self.f.genlabel(), self.f.genlabel(), self.f.genlabel());
        self.f.beq(rb, -1, minus1);
        self.f.beq(rb, 0, zero);
        if div {
            self.f.div(d, d, rb);
        } else {
            self.f.rem(d, d, rb);
        }
        self.f.jmp(done);
        self.f.label(minus1);
        if div {
            self.f.neg(d, d);
            self.f.jmp(done);
        }
        // x % -1, and x / 0 or x % 0 (which graphs guard against): 0.
        self.f.label(zero);
        self.f.set(d, 0);
        self.f.label(done);
        if let Some(t) = t {
            self.give(t);
        }
    }

    fn gen_select(&mut self, c: &Expr, a: &Expr, b: &Expr, d: Reg<L>) {
        // d = b; t = a; d = cond ? t : d.
        self.emit_expr(b, d);
        let t = self.take();
        self.emit_expr(a, t);
        let cv = match c {
            Expr::Binary(BinOp::Ne, x, z) if **z == Expr::Const(0) => &**x,
            other => other,
        };
        let cr = self.take();
        self.emit_expr(cv, cr);
        self.f.select(d, cr, t, d);
        self.give(cr);
        self.give(t);
    }

    /// `d = base op (k & -bit)` with `bit` 0 or 1, as `bit ? base op k :
    /// base`: the bit first (it may read `d`'s slot), then `base` into `d`,
    /// `base op k` beside it and a conditional move. The bit no longer
    /// waits for `base`, so a chain of such steps (a bit-by-bit CRC) is
    /// three instructions deep per step instead of four.
    fn gen_masked(&mut self, m: &Masked<'_>, k: Operand<L>, d: Reg<L>) {
        let cr = self.take();
        self.emit_expr(m.bit, cr);
        self.emit_expr(m.base, d);
        let t = self.take();
        // `op` commutes: a long constant is set straight into `t` (one
        // `mov` rather than a copy of `d` and a `mov` to vcode's scratch).
        let k = match k {
            Operand::Imm(c) if i32::try_from(c).is_err() => {
                self.f.set(t, c);
                Operand::Reg(d)
            }
            k => {
                self.f.mov(t, d);
                k
            }
        };
        match m.op {
            BinOp::Add => self.f.add(t, t, k),
            BinOp::BitOr => self.f.or(t, t, k),
            _ => self.f.xor(t, t, k),
        }
        self.f.select(d, cr, t, d);
        self.give(t);
        self.give(cr);
    }

    fn gen_call(&mut self, func: u32, args: &[Expr], d: Reg<L>) {
        let k = args.len();
        let buf: Vec<Local<L>> = (0..k).map(|_| self.f.local::<L>()).collect();
        for (i, a) in args.iter().enumerate() {
            self.emit_expr(a, d);
            self.f.st_local(d, buf[k - 1 - i]);
        }
        self.before_call();
        let (host, fp_, argp) = (p(SCRATCH[0]), p(SCRATCH[1]), p(SCRATCH[2]));
        self.f.ld(host, self.ctx, Ctx::OFFSETS[4]);
        self.f.ld(fp_, self.ctx, Ctx::OFFSETS[5]);
        if k == 0 {
            self.f.mov(argp, self.ctx);
        } else {
            self.f.addr_local(argp, buf[k - 1]);
        }
        let res = l(SCRATCH[0]);
        self.f.call(
            res,
            Callee::Reg(fp_.num()),
            &[
                Arg::Reg(host.any()),
                Arg::Imm(Ty::U, func as i64),
                Arg::Reg(argp.any()),
            ],
        );
        self.after_call_keeping(res);
        if d != res {
            self.f.mov(d, res);
        }
    }

    /// Branches to `l` when `d op o`.
    fn cmp_branch(&mut self, op: BinOp, d: Reg<L>, o: Operand<L>, l: Label) {
        match op {
            BinOp::Eq => self.f.beq(d, o, l),
            BinOp::Ne => self.f.bne(d, o, l),
            BinOp::Lt => self.f.blt(d, o, l),
            BinOp::Le => self.f.ble(d, o, l),
            BinOp::Gt => self.f.bgt(d, o, l),
            BinOp::Ge => self.f.bge(d, o, l),
            _ => {}
        }
    }

    /// Branches to `target` when `cond` is nonzero (`when` true) or zero
    /// (`when` false); falls through otherwise.
    fn branch(&mut self, cond: &Expr, target: Label, when: bool) {
        match cond {
            Expr::Const(c) => {
                if (*c != 0) == when {
                    self.f.jmp(target);
                }
            }
            Expr::Unary(UnOp::Not, x) => self.branch(x, target, !when),
            Expr::Binary(op, a, b) if opt::is_compare(*op) => {
                let op = if when { *op } else { opt::negate_compare(*op) };
                // Compare a register directly when `a` is one.
                let t = self.take();
                let (ra, given) = match self.operand(a) {
                    Some(Operand::Reg(r)) => (r, None),
                    _ => (t, Some(())),
                };
                if given.is_some() {
                    let (o, t2) = self.gen_pair(a, b, t);
                    self.cmp_branch(op, t, o, target);
                    if let Some(t2) = t2 {
                        self.give(t2);
                    }
                } else if let Some(o) = self.operand(b) {
                    self.cmp_branch(op, ra, o, target);
                } else {
                    self.emit_expr(b, t);
                    self.cmp_branch(op, ra, Operand::Reg(t), target);
                }
                self.give(t);
            }
            Expr::And(..) | Expr::Or(..) if range_test(cond).is_some() => {
                // `x == lo || ... || x == hi` over a contiguous range (and
                // its negation `x != lo && ...`): one unsigned comparison
                // of `x - lo` with `hi - lo`, one branch.
                let (x, lo, span, inside) = range_test(cond).expect("matched");
                let t = self.take();
                self.emit_expr(x, t);
                if lo != 0 {
                    self.f.sub(t, t, Operand::Imm(lo));
                }
                let u = t.cast::<UL>();
                if inside == when {
                    self.f.ble(u, Operand::Imm(span), target);
                } else {
                    self.f.bgt(u, Operand::Imm(span), target);
                }
                self.give(t);
            }
            Expr::And(a, b) | Expr::Or(a, b) => {
                let and = matches!(cond, Expr::And(..));
                let skip = self.f.genlabel();
                // and, when: !a -> skip; b -> target.   and, !when: !a -> target; !b -> target.
                // or,  when:  a -> target; b -> target.  or, !when: a -> skip; !b -> target.
                if and == when {
                    self.branch(a, skip, !when);
                } else {
                    self.branch(a, target, when);
                }
                self.branch(b, target, when);
                self.f.label(skip);
            }
            _ => {
                let t = self.take();
                let r = match self.operand(cond) {
                    Some(Operand::Reg(r)) => r,
                    _ => {
                        self.emit_expr(cond, t);
                        t
                    }
                };
                if when {
                    self.f.bne(r, 0, target);
                } else {
                    self.f.beq(r, 0, target);
                }
                self.give(t);
            }
        }
    }
}

/// The expression nodes from which an instruction that occurs more than
/// once in a graph is emitted once, as a subroutine that each occurrence
/// enters with `jal` (a call and a return: two instructions and a
/// correctly predicted return, against a dozen or more instructions of
/// the copy). Symbolic execution puts a process's code into every control
/// state in which it runs; a large step (the CRC of a byte, after
/// the optimizer's strength reduction) is then shared instead of duplicated.
const OUTLINE_NODES: usize = 24;

/// True when `i` is large enough to share, and may run inside a
/// subroutine: no host call (a call needs the frame's stack alignment,
/// which the subroutine's return address breaks).
fn outlinable(i: &Inst) -> bool {
    let e = match i {
        Inst::Assign { value, .. } => value,
        Inst::Eval(e) => e,
    };
    fn nodes(e: &Expr) -> usize {
        match e {
            Expr::Const(_) | Expr::Var(_) => 1,
            Expr::Unary(_, a) => 1 + nodes(a),
            Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => 1 + nodes(a) + nodes(b),
            Expr::Call(_, args) => 1 + args.iter().map(nodes).sum::<usize>(),
        }
    }
    !e.has_call() && nodes(e) >= OUTLINE_NODES
}

/// `cond` as a test of one pure expression against a contiguous range of
/// at least two constants: `x == c1 || x == c2 || ...` (then `inside` is
/// true) or `x != c1 && x != c2 && ...` (false), the constants being
/// `lo..=lo + span` in any order, each once, all within 32-bit immediates.
fn range_test(cond: &Expr) -> Option<(&Expr, i64, i64, bool)> {
    fn leaves<'e>(e: &'e Expr, or: bool, out: &mut Vec<(&'e Expr, i64)>) -> bool {
        match (e, or) {
            (Expr::Or(a, b), true) | (Expr::And(a, b), false) => {
                leaves(a, or, out) && leaves(b, or, out)
            }
            (Expr::Binary(op, a, b), _) if *op == if or { BinOp::Eq } else { BinOp::Ne } => {
                match (&**a, &**b) {
                    (x, Expr::Const(c)) | (Expr::Const(c), x) if opt::pure(x) => {
                        out.push((x, *c));
                        true
                    }
                    _ => false,
                }
            }
            _ => false,
        }
    }
    let or = matches!(cond, Expr::Or(..));
    let mut tests = Vec::new();
    if !leaves(cond, or, &mut tests) || tests.len() < 2 {
        return None;
    }
    let x = tests[0].0;
    if tests.iter().any(|(y, _)| *y != x) {
        return None;
    }
    let mut cs: Vec<i64> = tests.iter().map(|t| t.1).collect();
    cs.sort_unstable();
    let (lo, hi) = (cs[0], *cs.last().expect("two or more"));
    let fits = |c: i64| i32::try_from(c).is_ok();
    let contiguous = cs.windows(2).all(|w| w[0].checked_add(1) == Some(w[1]));
    if !contiguous || !fits(lo) || !fits(hi - lo) || lo == i64::from(i32::MIN) {
        return None;
    }
    Some((x, lo, hi - lo, or))
}

/// The parts of `base op (k & -bit)` (either operand order at each level),
/// `op` one of `^`, `|`, `+` and `bit` an expression that is always 0 or 1
/// (a comparison, `!x`, `x & 1`), so that `-bit` is 0 or all ones: the
/// mask idiom of branch-free code such as the bit-by-bit CRC step
/// `(crc >> 1) ^ (POLY & -(crc & 1))`.
struct Masked<'e> {
    op: BinOp,
    base: &'e Expr,
    k: &'e Expr,
    bit: &'e Expr,
}

fn as_masked(e: &Expr) -> Option<Masked<'_>> {
    let Expr::Binary(op @ (BinOp::BitXor | BinOp::BitOr | BinOp::Add), x, y) = e else {
        return None;
    };
    let (base, (k, bit)) = match masked(y) {
        Some(kb) => (&**x, kb),
        None => (&**y, masked(x)?),
    };
    (opt::pure(base) && opt::pure(k) && opt::pure(bit)).then_some(Masked {
        op: *op,
        base,
        k,
        bit,
    })
}

/// `(k, bit)` of `k & -bit` or `-bit & k`, with `bit` 0 or 1.
fn masked(m: &Expr) -> Option<(&Expr, &Expr)> {
    let Expr::Binary(BinOp::BitAnd, p, q) = m else {
        return None;
    };
    neg_bit(q)
        .map(|b| (&**p, b))
        .or_else(|| neg_bit(p).map(|b| (&**q, b)))
}

/// `bit` of `-bit`, with `bit` 0 or 1.
fn neg_bit(n: &Expr) -> Option<&Expr> {
    match n {
        Expr::Unary(UnOp::Neg, b) if zero_or_one(b) => Some(b),
        _ => None,
    }
}

/// True when `e` is always 0 or 1.
fn zero_or_one(e: &Expr) -> bool {
    opt::is_boolean(e)
        || matches!(e, Expr::Binary(BinOp::BitAnd, _, one) if **one == Expr::Const(1))
}

/// True when evaluating `e` straight into the home register of slot `s`
/// never reads `s` after that register was first written: `s` is not read,
/// or only as the first operand evaluated.
fn safe_target(e: &Expr, s: u32) -> bool {
    if !mentions(e, s) {
        return true;
    }
    if opt::as_select(e).is_some() {
        return false;
    }
    match e {
        Expr::Var(v) => *v == s,
        Expr::Unary(_, a) => safe_target(a, s),
        Expr::Binary(_, a, b) => safe_target(a, s) && !mentions(b, s),
        _ => false,
    }
}

fn mentions(e: &Expr, s: u32) -> bool {
    let mut m = false;
    e.for_each_var(&mut |v| m |= v == s);
    m
}

/// True when `e` reads a slot whose home is register `d`.
fn mentions_reg(g: &Gen<'_>, e: &Expr, d: Reg<L>) -> bool {
    let mut m = false;
    e.for_each_var(&mut |v| m |= g.slot_reg(v) == Some(d));
    m
}

fn max_arity(program: &Program, g: &Graph) -> usize {
    g.blocks
        .iter()
        .map(|b| match &b.term {
            Term::Recv { chan, .. } | Term::Send { chan, .. } => {
                program.channels[*chan as usize].arity as usize
            }
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}
