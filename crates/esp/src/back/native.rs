//! Process-based native code (§4.1): each process compiled through vcode
//! to one function that resumes the process at a program counter and runs
//! its local code until the scheduler must act.
//!
//! Each process becomes
//! `extern "C" fn(ctx: *mut abi::Ctx, resume: u32, budget: u64) -> u32`:
//! - its variables live in the runtime's flat array (`ctx.vars`, at the
//!   process's [`Layout`] base); the function keeps nothing between calls;
//! - `resume` is a pc: a jump table sends control to that node, which is
//!   *executed* (a fast-path start statement is not stopped at again: the
//!   runtime has already checked it);
//! - it returns `STOP | pc` before the first `Comm`, `Alt` or `Halt` node,
//!   and before a node marked as a stop (a fast-path start statement that is
//!   not a channel operation). The runtime performs every channel operation
//!   itself, in Rust, copying the tuple once between the two processes'
//!   variables, and resumes the process at the operation's successor;
//! - a failed `assert`, a division by zero and a failed host call return
//!   [`FAULT_ASSERT`], [`FAULT_DIV`] or [`FAULT_HOST`] with the node's pc,
//!   before the node has changed any variable;
//! - a backward jump on a local loop ([`LocalLoops`]) counts `budget` down
//!   in a register, one `sub` and a `jb` (and only those jumps: a loop
//!   through a channel operation returns on every iteration and costs
//!   nothing); with it spent the function returns [`FAULT_LOOP`] with the
//!   jump's target, which has not run. A process without local loops has
//!   no counter at all. At a stop the count left is written to a cell of
//!   the [`NativeProgram`], which [`NativeProgram::run`] hands back.
//!
//! This is exactly [`interp::run_local`](crate::interp::run_local)'s
//! stepping rule; the runtime's tests run both and compare.
//!
//! Code shape: expressions are evaluated into a small stack of caller-saved
//! registers (no callee-saved register is used, so entering and leaving a
//! process costs no saves); a variable is a load from, and an assignment a
//! store to, `[vars + 8 * v]`. `/` and `%` test the divisor for 0 (fault)
//! and -1 (`i64::MIN / -1` must not trap: the quotient is the negation, the
//! remainder 0). Host functions are called through the runtime's trampoline
//! with their arguments in a scratch area that the code addresses
//! absolutely: [`NativeProgram`] owns that area, and the runtime's
//! [`HostHooks`] must outlive the code.

use std::cell::Cell;
use std::ffi::c_void;

use vcode::ext::Countdown;
use vcode::{Arg, Callee, Class, Code, Func, L, Label, Leaf, P, Reg, Ty, U, UL};

use crate::abi::Ctx;
use crate::error::{Error, Result};
use crate::interp::LocalLoops;
use crate::ir::{BinOp, Expr, Layout, NodeKind, Pc, Process, Program, UnOp};

/// The kind bits of a return code: the process stopped before the node at
/// the pc (a channel operation, an `alt`, the end, or a stop).
pub const STOP: u32 = 0;
/// Return code kind: the `assert` at the pc failed.
pub const FAULT_ASSERT: u32 = 1 << 28;
/// Return code kind: the node at the pc divided by zero.
pub const FAULT_DIV: u32 = 2 << 28;
/// Return code kind: a host call of the node at the pc failed.
pub const FAULT_HOST: u32 = 3 << 28;
/// Return code kind: a backward jump on a local loop found the budget
/// spent; the pc is the jump's target, where the process resumes.
pub const FAULT_LOOP: u32 = 4 << 28;
/// Return code kind: the function was asked to resume at a pc it does not
/// have (a runtime bug; reported, never executed).
pub const BAD_RESUME: u32 = 15 << 28;
/// The mask of the pc in a return code.
pub const PC_MASK: u32 = (1 << 28) - 1;

/// The signature of a compiled process: the context, the resume pc and the
/// budget of backward jumps on local loops.
pub type Entry = extern "C" fn(*mut Ctx, u32, u64) -> u32;

/// What compiled process code calls for host functions.
#[derive(Copy, Clone, Debug)]
pub struct HostHooks {
    /// Passed as the first argument of `call`.
    pub host: *mut c_void,
    /// Calls host function `f` with its arguments at `args`; on failure it
    /// sets `*failed` to nonzero (and returns anything).
    pub call: unsafe extern "C" fn(host: *mut c_void, f: u32, args: *const i64) -> i64,
    /// The failure flag, read after every call.
    pub failed: *const i64,
}

/// One compiled process.
pub struct NativeProcess {
    code: Code,
    entry: Entry,
    instructions: usize,
    /// It has local loops, whose backward jumps count the budget down.
    counts: bool,
}

impl NativeProcess {
    /// The disassembly of its machine code.
    pub fn listing(&self) -> String {
        self.code.disassemble()
    }

    /// Machine instructions generated (excluding the dispatch table's data).
    pub fn instructions(&self) -> usize {
        self.instructions
    }
}

/// Every process of a program, compiled.
pub struct NativeProgram {
    procs: Vec<NativeProcess>,
    /// Host-call arguments, registers saved around host calls, and spilled
    /// expression values. Generated code addresses it absolutely: it never
    /// moves (a boxed slice) and lives as long as the code.
    _scratch: Box<[i64]>,
    /// The budget left when a process stopped before a node that is not a
    /// channel operation (written by the code, absolutely addressed too).
    left: Box<Cell<u64>>,
}

impl std::fmt::Debug for NativeProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeProgram")
            .field("processes", &self.procs.len())
            .field("instructions", &self.instructions())
            .finish()
    }
}

/// Registers of the expression stack. A fifth caller-saved register is the
/// scratch operand register; deeper values spill to the scratch area.
const K: usize = 4;

impl NativeProgram {
    /// Compiles every process of `program`. `stops[p][pc]` marks the nodes
    /// where process `p` must return to the runtime before executing them
    /// (fast-path start statements that are not channel operations); a
    /// missing entry means no stop.
    pub fn compile(
        program: &Program,
        stops: &[Vec<bool>],
        hooks: HostHooks,
    ) -> Result<NativeProgram> {
        let layout = Layout::of(program);
        // Size the scratch area first: its address is written into the code.
        let sizes: Vec<(usize, usize)> = program.processes.iter().map(scratch_need).collect();
        let total: usize = sizes.iter().map(|(s, c)| s + c).sum();
        let scratch: Box<[i64]> = vec![0; total.max(1)].into_boxed_slice();
        let left = Box::new(Cell::new(0u64));
        let mut at = scratch.as_ptr() as usize;
        let mut f = Func::new();
        let mut procs = Vec::with_capacity(program.processes.len());
        for (p, process) in program.processes.iter().enumerate() {
            if process.nodes.len() as u64 > u64::from(PC_MASK) {
                return Err(Error::Unsupported {
                    backend: "native",
                    msg: format!("process {} has more than {PC_MASK} nodes", process.name),
                });
            }
            let (spill, calls) = sizes[p];
            let no_stops = Vec::new();
            let stops = stops.get(p).unwrap_or(&no_stops);
            let mut g = Gen {
                f: &mut f,
                process,
                stops,
                hooks,
                loops: LocalLoops::of(process),
                ctr: None,
                left_at: left.as_ptr() as usize,
                back: Vec::new(),
                regs: [Reg::phys(0); K],
                s: Reg::phys(0),
                vb: Reg::phys(0),
                spill_at: at,
                spill_depth: 0,
                call_at: at + 8 * spill,
                exec: Vec::new(),
                check: Vec::new(),
                faults: Vec::new(),
                table: (0, 0),
            };
            let (code, table) = g.process(layout.base[p], &process.name)?;
            let counts = g.ctr.is_some();
            at += 8 * (spill + calls);
            let instructions = count_instructions(&code, table);
            // SAFETY: the function was generated by `Gen::process` with the
            // parameter types `%p%u%ul` and `u32` returns, which `as_fn` checks;
            // calling it is unsafe anyway and guarded by `NativeProgram::run`.
            let entry = unsafe { code.as_fn::<Entry>()? };
            procs.push(NativeProcess {
                code,
                entry,
                instructions,
                counts,
            });
        }
        Ok(NativeProgram {
            procs,
            _scratch: scratch,
            left,
        })
    }

    /// The compiled processes, in program order.
    pub fn processes(&self) -> &[NativeProcess] {
        &self.procs
    }

    /// Machine instructions of all processes.
    pub fn instructions(&self) -> usize {
        self.procs.iter().map(|p| p.instructions).sum()
    }

    /// Runs process `p` from `resume` and returns its code (a kind bit set
    /// and a pc, see [`STOP`] and the faults).
    ///
    /// `budget` is the number of backward jumps on local loops the process
    /// may still take (see the module docs). It holds what is left after a
    /// stop before a node that is not a `Comm`, `Alt` or `Halt` (a marked
    /// stop), and 0 after [`FAULT_LOOP`]; after any other return it is left
    /// as it was (the process completes a channel operation, or has failed,
    /// before it runs local code again, so the count starts afresh).
    ///
    /// # Safety
    /// `ctx.vars` must point to at least the program's [`Layout::slots`]
    /// writable `i64`s that nothing else accesses during the call, and the
    /// [`HostHooks`] given to [`compile`](NativeProgram::compile) must be
    /// valid: their `host` pointer usable by their `call` and their
    /// `failed` flag readable. `resume` may be any value (an unknown pc
    /// returns [`BAD_RESUME`]); `p` must be a process of the program.
    #[inline]
    pub unsafe fn run(&self, ctx: *mut Ctx, p: usize, resume: Pc, budget: &mut u64) -> u32 {
        let process = &self.procs[p];
        if !process.counts {
            // No local loop: nothing to count (the usual case, and the
            // cheapest: every channel operation comes back here).
            return (process.entry)(ctx, resume, 0);
        }
        self.left.set(*budget);
        let r = (process.entry)(ctx, resume, *budget);
        match r & !PC_MASK {
            FAULT_LOOP => *budget = 0,
            STOP => *budget = self.left.get(),
            _ => {}
        }
        r
    }
}

/// The scratch slots one process needs: (spill area, call areas).
fn scratch_need(process: &Process) -> (usize, usize) {
    fn walk(e: &Expr, calls: &mut usize) -> usize {
        match e {
            Expr::Const(_) | Expr::Var(_) => 1,
            Expr::Unary(_, a) => 1 + walk(a, calls),
            Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                1 + walk(a, calls) + walk(b, calls)
            }
            Expr::Call(_, args) => {
                *calls += K + 2 + args.len();
                1 + args.iter().map(|a| walk(a, calls)).sum::<usize>()
            }
        }
    }
    let (mut spill, mut calls) = (0, 0);
    for n in &process.nodes {
        let e = match &n.kind {
            NodeKind::Assign { value, .. } | NodeKind::Eval { value, .. } => value,
            NodeKind::Branch { cond, .. } | NodeKind::Assert { cond, .. } => cond,
            _ => continue,
        };
        spill = spill.max(walk(e, &mut calls));
    }
    (spill, calls)
}

/// Counts the machine instructions of `code` (without the `int3` padding
/// after returns), skipping the dispatch table's data (body offsets `table.0..table.1`), which a linear
/// disassembly would decode as instructions.
fn count_instructions(code: &Code, table: (usize, usize)) -> usize {
    let bytes = code.bytes();
    // The listing marks where the body begins; the line after the mark
    // gives the prologue's length.
    let listing = code.disassemble();
    let prologue = listing
        .lines()
        .skip_while(|l| l.trim() != "; body")
        .nth(1)
        .and_then(|l| l.split_whitespace().next())
        .and_then(|h| usize::from_str_radix(h, 16).ok())
        .unwrap_or(0);
    let (a, b) = (
        (prologue + table.0).min(bytes.len()),
        (prologue + table.1).min(bytes.len()),
    );
    let count = |s: &[u8]| {
        vcode::debug::disassemble(s, 0, &[])
            .lines()
            .filter(|l| {
                let t = l.trim_start();
                // Headings, and the padding after returns (never executed).
                !t.starts_with(';') && !t.is_empty() && !t.ends_with("int3")
            })
            .count()
    };
    count(&bytes[..a]) + count(&bytes[b..])
}

/// The code generator of one process.
struct Gen<'a> {
    f: &'a mut Func,
    process: &'a Process,
    stops: &'a [bool],
    hooks: HostHooks,
    /// The process's local loops, whose backward jumps count.
    loops: LocalLoops,
    /// The count-down of the budget (processes with local loops only).
    ctr: Option<Reg<UL>>,
    /// The address of [`NativeProgram::left`].
    left_at: usize,
    /// Out-of-line stubs counting a conditional backward jump: (target,
    /// label).
    back: Vec<(Pc, Label)>,
    /// The expression stack.
    regs: [Reg<L>; K],
    /// The scratch operand register.
    s: Reg<L>,
    /// The process's variables.
    vb: Reg<P>,
    /// Address of the spill area.
    spill_at: usize,
    spill_depth: usize,
    /// Address of the next unused call area.
    call_at: usize,
    /// The label executing each node.
    exec: Vec<Label>,
    /// The label that stops before each marked node.
    check: Vec<Option<Label>>,
    /// Fault stubs to emit at the end: (label, return code).
    faults: Vec<(Label, u32)>,
    /// Body offsets of the jump table's data.
    table: (usize, usize),
}

impl Gen<'_> {
    fn process(&mut self, base: u32, name: &str) -> Result<(Code, (usize, usize))> {
        let nodes = &self.process.nodes;
        let calls = nodes.iter().any(|n| match &n.kind {
            NodeKind::Assign { value, .. } | NodeKind::Eval { value, .. } => value.has_call(),
            NodeKind::Branch { cond, .. } | NodeKind::Assert { cond, .. } => cond.has_call(),
            _ => false,
        });
        let leaf = if calls { Leaf::No } else { Leaf::Yes };
        let params = self.f.lambda("%p%u%ul", leaf)?;
        self.f.name(format!("esp:{name}"));
        let ctx = params.get::<P>(0)?;
        let resume = params.get::<U>(1)?;
        let budget = params.get::<UL>(2)?;
        // The budget stays in its parameter register as the count-down.
        if self.loops.is_empty() {
            self.f.putreg(budget);
        } else {
            self.ctr = Some(budget);
        }
        self.vb = self.f.getreg::<P>(Class::Temp)?;
        let idx = self.f.getreg::<UL>(Class::Temp)?;
        self.exec = nodes.iter().map(|_| self.f.genlabel()).collect();
        self.check = (0..nodes.len())
            .map(|pc| {
                let marked = self.stops.get(pc).copied().unwrap_or(false);
                let channel = matches!(
                    nodes[pc].kind,
                    NodeKind::Comm { .. } | NodeKind::Alt { .. } | NodeKind::Halt
                );
                (marked && !channel).then(|| self.f.genlabel())
            })
            .collect();
        // Entry: the variables' base, then dispatch on the resume pc.
        self.f.ld(self.vb, ctx, 0);
        if base != 0 {
            self.f.add(self.vb, self.vb, 8 * i64::from(base));
        }
        let bad = self.f.genlabel();
        self.f.cv::<U, UL>(idx, resume);
        self.f.bge(idx, nodes.len() as u64, bad);
        let exec = self.exec.clone();
        self.f.jump_table(idx, &exec);
        let t1 = self.f.code_offset();
        // The table's data, 8 bytes a target, follows the indirect jump.
        self.table = (t1 - 8 * exec.len(), t1);
        self.f.putreg(idx);
        self.f.putreg(ctx);
        self.f.putreg(resume);
        let mut temps = Vec::new();
        while temps.len() < K + 1 {
            temps.push(self.f.getreg::<L>(Class::Temp)?);
        }
        self.regs.copy_from_slice(&temps[..K]);
        self.s = temps[K];
        for pc in 0..nodes.len() {
            self.node(pc as Pc);
        }
        let back = std::mem::take(&mut self.back);
        for (to, l) in back {
            self.f.label(l);
            self.count_back(to);
            let t = self.target(to);
            self.f.jmp(t);
        }
        self.f.label(bad);
        self.ret_code(BAD_RESUME);
        let faults = std::mem::take(&mut self.faults);
        for (l, code) in faults {
            self.f.label(l);
            self.ret_code(code);
        }
        let code = self.f.end()?;
        Ok((code, self.table))
    }

    fn ret_code(&mut self, code: u32) {
        // The same physical register, viewed as the 32-bit return value.
        let r: Reg<U> = Reg::phys(self.regs[0].num());
        self.f.set(r, code);
        self.f.ret(r);
    }

    /// Where control goes to reach node `pc`.
    fn target(&self, pc: Pc) -> Label {
        self.check[pc as usize].unwrap_or(self.exec[pc as usize])
    }

    fn goto(&mut self, from: Pc, to: Pc) {
        if self.loops.counts(from, to) {
            self.count_back(to);
        }
        if to != from + 1 {
            let l = self.target(to);
            self.f.jmp(l);
        }
    }

    /// Where a branch from `from` goes to reach `to`: the node, or a stub
    /// that counts the jump first when it is a backward jump on a local
    /// loop.
    fn edge(&mut self, from: Pc, to: Pc) -> Label {
        if !self.loops.counts(from, to) {
            return self.target(to);
        }
        if let Some(&(_, l)) = self.back.iter().find(|(t, _)| *t == to) {
            return l;
        }
        let l = self.f.genlabel();
        self.back.push((to, l));
        l
    }

    /// Counts one backward jump to `to`: with the budget spent, returns
    /// [`FAULT_LOOP`] at `to`.
    fn count_back(&mut self, to: Pc) {
        if let Some(ctr) = self.ctr {
            let l = self.fault(FAULT_LOOP | to);
            self.f.dec_branch_borrow(ctr, l);
        }
    }

    fn fault(&mut self, code: u32) -> Label {
        if let Some(&(l, _)) = self.faults.iter().find(|(_, c)| *c == code) {
            return l;
        }
        let l = self.f.genlabel();
        self.faults.push((l, code));
        l
    }

    fn node(&mut self, pc: Pc) {
        let process = self.process;
        let node = &process.nodes[pc as usize];
        if let Some(l) = self.check[pc as usize] {
            self.f.label(l);
            if let Some(ctr) = self.ctr {
                // What is left goes on after the stop (NativeProgram::run).
                let sp = self.s.cast::<P>();
                self.f.set(sp, self.left_at);
                self.f.st(ctr, sp, 0);
            }
            self.ret_code(STOP | pc);
        }
        let l = self.exec[pc as usize];
        self.f.label(l);
        match &node.kind {
            NodeKind::Comm { .. } | NodeKind::Alt { .. } | NodeKind::Halt => {
                self.ret_code(STOP | pc)
            }
            NodeKind::Assign { var, value, next } => {
                self.eval(value, 0, pc);
                let r = self.regs[0];
                self.f.st(r, self.vb, 8 * i64::from(*var));
                self.goto(pc, *next);
            }
            NodeKind::Eval { value, next } => {
                self.eval(value, 0, pc);
                self.goto(pc, *next);
            }
            NodeKind::Nop { next } => self.goto(pc, *next),
            NodeKind::Branch { cond, then, els } => {
                if then == els {
                    self.eval(cond, 0, pc);
                    self.goto(pc, *then);
                } else if *then == pc + 1 {
                    let l = self.edge(pc, *els);
                    self.branch(cond, l, false, 0, pc);
                } else {
                    let l = self.edge(pc, *then);
                    self.branch(cond, l, true, 0, pc);
                    self.goto(pc, *els);
                }
            }
            NodeKind::Assert { cond, next } => {
                let l = self.fault(FAULT_ASSERT | pc);
                self.branch(cond, l, false, 0, pc);
                self.goto(pc, *next);
            }
        }
    }

    /// Jumps to `target` when the truth of `e` is `when`; falls through
    /// otherwise.
    fn branch(&mut self, e: &Expr, target: Label, when: bool, d: usize, pc: Pc) {
        match e {
            Expr::Const(c) => {
                if (*c != 0) == when {
                    self.f.jmp(target);
                }
            }
            Expr::Unary(UnOp::Not, a) => self.branch(a, target, !when, d, pc),
            Expr::And(a, b) => {
                if when {
                    let skip = self.f.genlabel();
                    self.branch(a, skip, false, d, pc);
                    self.branch(b, target, true, d, pc);
                    self.f.label(skip);
                } else {
                    self.branch(a, target, false, d, pc);
                    self.branch(b, target, false, d, pc);
                }
            }
            Expr::Or(a, b) => {
                if when {
                    self.branch(a, target, true, d, pc);
                    self.branch(b, target, true, d, pc);
                } else {
                    let skip = self.f.genlabel();
                    self.branch(a, skip, true, d, pc);
                    self.branch(b, target, false, d, pc);
                    self.f.label(skip);
                }
            }
            Expr::Binary(op, a, b) if compare(*op).is_some() => {
                let (ra, ob) = self.pair(a, b, d, pc);
                let op = if when { *op } else { negate(*op) };
                self.cmp_branch(op, ra, ob, target);
            }
            _ => {
                self.eval(e, d, pc);
                let r = self.regs[d];
                if when {
                    self.f.bne(r, 0i64, target);
                } else {
                    self.f.beq(r, 0i64, target);
                }
            }
        }
    }

    fn cmp_branch(&mut self, op: BinOp, a: Reg<L>, b: Opnd, l: Label) {
        macro_rules! br {
            ($m:ident) => {
                match b {
                    Opnd::Reg(r) => self.f.$m(a, r, l),
                    Opnd::Imm(v) => self.f.$m(a, v, l),
                }
            };
        }
        match op {
            BinOp::Eq => br!(beq),
            BinOp::Ne => br!(bne),
            BinOp::Lt => br!(blt),
            BinOp::Le => br!(ble),
            BinOp::Gt => br!(bgt),
            BinOp::Ge => br!(bge),
            _ => {}
        }
    }

    /// Evaluates `a` into `regs[d]` and `b` into an operand (an immediate,
    /// the scratch register, or `regs[d + 1]`), left first.
    fn pair(&mut self, a: &Expr, b: &Expr, d: usize, pc: Pc) -> (Reg<L>, Opnd) {
        self.eval(a, d, pc);
        let ra = self.regs[d];
        let ob = match b {
            Expr::Const(c) => Opnd::Imm(*c),
            Expr::Var(v) => {
                self.f.ld(self.s, self.vb, 8 * i64::from(*v));
                Opnd::Reg(self.s)
            }
            _ if d + 1 < K => {
                self.eval(b, d + 1, pc);
                Opnd::Reg(self.regs[d + 1])
            }
            _ => {
                // Out of registers: park `a` in the spill area.
                let slot = self.spill_at + 8 * self.spill_depth;
                self.spill_depth += 1;
                let sp = self.s.cast::<P>();
                self.f.set(sp, slot);
                self.f.st(ra, sp, 0);
                self.eval(b, d, pc);
                self.f.mov(self.s, ra);
                // Reload `a`: `regs[d]` is free again once `b` is in `s`.
                let rp = ra.cast::<P>();
                self.f.set(rp, slot);
                self.f.ld(ra, rp, 0);
                self.spill_depth -= 1;
                Opnd::Reg(self.s)
            }
        };
        (ra, ob)
    }

    /// Evaluates `e` into `regs[d]`; may use `regs[d..]` and the scratch
    /// register.
    fn eval(&mut self, e: &Expr, d: usize, pc: Pc) {
        let rd = self.regs[d];
        match e {
            Expr::Const(c) => self.f.set(rd, *c),
            Expr::Var(v) => self.f.ld(rd, self.vb, 8 * i64::from(*v)),
            Expr::Unary(op, a) => {
                self.eval(a, d, pc);
                match op {
                    UnOp::Neg => self.f.neg(rd, rd),
                    UnOp::Not => self.f.not(rd, rd),
                    UnOp::BitNot => self.f.com(rd, rd),
                }
            }
            Expr::And(..) | Expr::Or(..) => self.truth(e, d, pc),
            Expr::Binary(op, _, _) if compare(*op).is_some() => self.truth(e, d, pc),
            Expr::Binary(op @ (BinOp::Div | BinOp::Rem), a, b) => {
                let div = *op == BinOp::Div;
                match **b {
                    Expr::Const(0) => {
                        self.eval(a, d, pc);
                        let l = self.fault(FAULT_DIV | pc);
                        self.f.jmp(l);
                    }
                    Expr::Const(-1) => {
                        self.eval(a, d, pc);
                        if div {
                            self.f.neg(rd, rd);
                        } else {
                            self.f.set(rd, 0i64);
                        }
                    }
                    Expr::Const(c) => {
                        self.eval(a, d, pc);
                        if div {
                            self.f.div(rd, rd, c);
                        } else {
                            self.f.rem(rd, rd, c);
                        }
                    }
                    _ => {
                        let (ra, ob) = self.pair(a, b, d, pc);
                        let rb = match ob {
                            Opnd::Reg(r) => r,
                            Opnd::Imm(v) => {
                                self.f.set(self.s, v);
                                self.s
                            }
                        };
                        let zero = self.fault(FAULT_DIV | pc);
                        self.f.beq(rb, 0i64, zero);
                        let (normal, done) = (self.f.genlabel(), self.f.genlabel());
                        self.f.bne(rb, -1i64, normal);
                        if div {
                            self.f.neg(ra, ra);
                        } else {
                            self.f.set(ra, 0i64);
                        }
                        self.f.jmp(done);
                        self.f.label(normal);
                        if div {
                            self.f.div(ra, ra, rb);
                        } else {
                            self.f.rem(ra, ra, rb);
                        }
                        self.f.label(done);
                    }
                }
            }
            Expr::Binary(op, a, b) => {
                let (ra, ob) = self.pair(a, b, d, pc);
                macro_rules! bin {
                    ($m:ident) => {
                        match ob {
                            Opnd::Reg(r) => self.f.$m(ra, ra, r),
                            Opnd::Imm(v) => self.f.$m(ra, ra, v),
                        }
                    };
                }
                match op {
                    BinOp::Add => bin!(add),
                    BinOp::Sub => bin!(sub),
                    BinOp::Mul => bin!(mul),
                    BinOp::Shl => bin!(lsh),
                    BinOp::Shr => bin!(rsh),
                    BinOp::BitAnd => bin!(and),
                    BinOp::BitOr => bin!(or),
                    BinOp::BitXor => bin!(xor),
                    _ => {}
                }
            }
            Expr::Call(func, args) => self.call(*func, args, d, pc),
        }
    }

    /// A truth value (0 or 1) into `regs[d]`.
    fn truth(&mut self, e: &Expr, d: usize, pc: Pc) {
        let (f, done) = (self.f.genlabel(), self.f.genlabel());
        self.branch(e, f, false, d, pc);
        let rd = self.regs[d];
        self.f.set(rd, 1i64);
        self.f.jmp(done);
        self.f.label(f);
        self.f.set(rd, 0i64);
        self.f.label(done);
    }

    /// A host call at depth `d`: the live registers below `d` (and the
    /// variables' base and the budget's count-down) are saved in this call
    /// site's area around it.
    fn call(&mut self, func: u32, args: &[Expr], d: usize, pc: Pc) {
        let area = self.call_at;
        self.call_at += 8 * (K + 2 + args.len());
        let args_at = area + 8 * (K + 2);
        let sp = self.s.cast::<P>();
        self.f.set(sp, area);
        for i in 0..d {
            self.f.st(self.regs[i], sp, 8 * i as i64);
        }
        self.f.st(self.vb, sp, 8 * K as i64);
        if let Some(ctr) = self.ctr {
            self.f.st(ctr, sp, 8 * (K + 1) as i64);
        }
        for (j, a) in args.iter().enumerate() {
            self.eval(a, d, pc);
            self.f.set(sp, args_at);
            self.f.st(self.regs[d], sp, 8 * j as i64);
        }
        let rd = self.regs[d];
        let ap = rd.cast::<P>();
        self.f.set(ap, args_at);
        self.f.call(
            rd,
            Callee::Native(self.hooks.call as usize),
            &[
                Arg::Imm(Ty::P, self.hooks.host as i64),
                Arg::Imm(Ty::U, i64::from(func)),
                Arg::Reg(ap.any()),
            ],
        );
        self.f.set(sp, area);
        for i in 0..d {
            self.f.ld(self.regs[i], sp, 8 * i as i64);
        }
        self.f.ld(self.vb, sp, 8 * K as i64);
        if let Some(ctr) = self.ctr {
            self.f.ld(ctr, sp, 8 * (K + 1) as i64);
        }
        self.f.set(sp, self.hooks.failed as usize);
        self.f.ld(self.s, sp, 0);
        let l = self.fault(FAULT_HOST | pc);
        self.f.bne(self.s, 0i64, l);
    }
}

/// A second operand.
#[derive(Copy, Clone)]
enum Opnd {
    Reg(Reg<L>),
    Imm(i64),
}

fn compare(op: BinOp) -> Option<()> {
    matches!(
        op,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
    )
    .then_some(())
}

fn negate(op: BinOp) -> BinOp {
    match op {
        BinOp::Eq => BinOp::Ne,
        BinOp::Ne => BinOp::Eq,
        BinOp::Lt => BinOp::Ge,
        BinOp::Le => BinOp::Gt,
        BinOp::Gt => BinOp::Le,
        BinOp::Ge => BinOp::Lt,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{self, Fault};

    struct NoHost;

    unsafe extern "C" fn host_call(_host: *mut c_void, f: u32, args: *const i64) -> i64 {
        // SAFETY: the test's host functions take one argument.
        let a = unsafe { *args };
        match f {
            0 => a.wrapping_mul(3) + 1,
            _ => {
                FAILED.with(|c| c.set(1));
                0
            }
        }
    }

    thread_local! {
        static FAILED: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
    }

    fn interp_call(f: u32, a: &[i64]) -> Option<i64> {
        match f {
            0 => Some(a[0].wrapping_mul(3) + 1),
            _ => None,
        }
    }

    const SRC: &str = "
channel i(int) external in;
channel o(int) external out;
extern h(int);
extern bad(int);
process P {
  var a, b, c, d;
  while (true) {
    in(i, a);
    b = a / (a - 3) + a % 5;
    #1
    if (a > 10 && !(b == 2) || a < -5) { c = h(a) + h(b + h(c)); } else { c = -a; }
    #2
    d = (a ^ b) << (c & 7) | ~(a >> 2);
    assert(d != 12345);
    if (a == 99) { d = bad(a); }
    out(o, d);
  }
}
";

    fn ctx(vars: &mut [i64]) -> Ctx {
        Ctx {
            vars: vars.as_mut_ptr(),
            pcs: std::ptr::null_mut(),
            ins: std::ptr::null_mut(),
            outs: std::ptr::null_mut(),
            host: std::ptr::null_mut(),
            call: host_call,
            recv: dummy_recv,
            send: dummy_send,
        }
    }

    /// Compiles `src` (one process of at least four variables, stops at its
    /// labels)
    /// and runs it from every pc, with every value of `a` and every budget,
    /// natively and on the interpreter: the same stop or fault, the same
    /// variables, and the same budget left where the native code reports
    /// it (a marked stop, a spent budget). Returns the kinds of end met.
    fn matches_the_interpreter(
        src: &str,
        values: &[i64],
        budgets: &[u64],
    ) -> std::collections::HashSet<&'static str> {
        let program = crate::compile(src).unwrap();
        let p = &program.processes[0];
        let loops = LocalLoops::of(p);
        let mut stops = vec![false; p.nodes.len()];
        for (pc, n) in p.nodes.iter().enumerate() {
            if n.label.is_some() {
                stops[pc] = true;
            }
        }
        let hooks = HostHooks {
            host: std::ptr::null_mut::<NoHost>().cast(),
            call: host_call,
            failed: FAILED.with(|c| c.as_ptr().cast_const()),
        };
        let code = NativeProgram::compile(&program, std::slice::from_ref(&stops), hooks).unwrap();
        assert!(code.instructions() > 20);
        let mut seen = std::collections::HashSet::new();
        for pc in 0..p.nodes.len() as Pc {
            for &a in values {
                for &c in &[0i64, 5] {
                    for &budget in budgets {
                        let mut start = vec![0i64; p.vars.len()];
                        start[..4].copy_from_slice(&[a, a.wrapping_add(1), c, 9]);
                        let mut want = start.clone();
                        let mut want_left = budget;
                        let expected = interp::run_local(
                            p,
                            pc,
                            &mut want,
                            &stops,
                            &loops,
                            &mut want_left,
                            &mut interp_call,
                        );
                        let mut vars = start.clone();
                        let mut ctx = ctx(&mut vars);
                        let mut left = budget;
                        FAILED.with(|f| f.set(0));
                        // SAFETY: `vars` holds the process's variables; the
                        // hooks are the test's, valid on this thread.
                        let r = unsafe { code.run(&mut ctx, 0, pc, &mut left) };
                        let got = match r & !PC_MASK {
                            STOP => Ok(r & PC_MASK),
                            FAULT_ASSERT => Err(Fault::Assert(r & PC_MASK)),
                            FAULT_DIV => Err(Fault::DivisionByZero(r & PC_MASK)),
                            FAULT_HOST => Err(Fault::Host(r & PC_MASK)),
                            FAULT_LOOP => Err(Fault::Diverges(r & PC_MASK)),
                            _ => panic!("bad code {r:#x}"),
                        };
                        let at = format!("pc {pc}, vars {start:?}, budget {budget}");
                        assert_eq!(got, expected, "{at}");
                        let kind = match got {
                            Ok(at) if stops[at as usize] => "stop",
                            Ok(_) => "channel",
                            Err(Fault::Assert(_)) => "assert",
                            Err(Fault::DivisionByZero(_)) => "div",
                            Err(Fault::Host(_)) => "host",
                            Err(Fault::Diverges(_)) => "loop",
                        };
                        seen.insert(kind);
                        if matches!(kind, "stop" | "loop") {
                            assert_eq!(left, want_left, "{at}");
                        }
                        if matches!(expected, Ok(_) | Err(Fault::Diverges(_))) {
                            assert_eq!(vars, want, "{at}");
                        }
                    }
                }
            }
        }
        // Resuming outside the process is refused, not executed.
        let mut vars = vec![0i64; p.vars.len()];
        let mut ctx = ctx(&mut vars);
        // SAFETY: as above.
        let r = unsafe { code.run(&mut ctx, 0, 1_000_000, &mut 0) };
        assert_eq!(r & !PC_MASK, BAD_RESUME);
        seen
    }

    /// Resuming at any pc runs exactly what the interpreter runs from
    /// there: the same stop, the same variables, the same fault.
    #[test]
    fn resuming_at_every_pc_matches_the_interpreter() {
        let values = [0i64, 3, 7, 11, 12, -6, 99, i64::MIN, i64::MAX, 1 << 40];
        let seen = matches_the_interpreter(SRC, &values, &[0, u64::MAX]);
        let want = ["stop", "channel", "div", "host"];
        assert!(
            want.iter().all(|k| seen.contains(k)) && !seen.contains("loop"),
            "{seen:?}: stops, channels, division and host faults all met, and no loop counted"
        );
    }

    /// Local loops, nested, through a stop, around host calls (which must
    /// not lose the count-down) and through a channel operation (which
    /// costs nothing): the budget runs out where the interpreter's does.
    #[test]
    fn local_loops_spend_the_budget_as_the_interpreter_does() {
        const LOOPS: &str = "
channel i(int) external in;
channel o(int) external out;
extern h(int);
process P {
  var a, b, c, d;
  while (true) {
    in(i, a);
    b = 0;
    while (b < a % 8) {
      c = 0;
      while (c < 3) { d = h(d) & 255; c = c + 1; }
      #1
      b = b + 1;
    }
    while (a > 20) { }
    out(o, b + d);
  }
}
";
        let values = [0i64, 1, 3, 7, 21, -6];
        let seen = matches_the_interpreter(LOOPS, &values, &[0, 1, 2, 5, 7, 100, 1_000]);
        for k in ["stop", "channel", "loop"] {
            assert!(seen.contains(k), "{seen:?}: {k} met");
        }
    }

    unsafe extern "C" fn dummy_recv(_: *mut c_void, _: u32, _: *mut i64) -> u32 {
        0
    }

    unsafe extern "C" fn dummy_send(_: *mut c_void, _: u32, _: *const i64) {}
}
