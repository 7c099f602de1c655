//! The compiler: decoded methods to one vcode function per applet.

use super::*;

/// Where a slot lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Home {
    Reg(u8),
    /// Byte offset from `FP`.
    Mem(i32),
}

/// An operand-stack entry at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Val {
    Const(i32),
    /// The value in a slot's home: a local's, or the entry's own position.
    Slot(u16),
    /// The value in `W` (an entry whose home is memory).
    W,
}

pub(super) type R = Reg<I>;

pub(super) fn r(n: u8) -> R {
    Reg::phys(n)
}

pub(super) fn p(n: u8) -> Reg<P> {
    Reg::phys(n)
}

/// Where a run the host lends an inline native keeps its words, as
/// offsets in [`crate::HostWords`]: the next entry's address, one past the
/// last entry, the first entry, and how many entries are left in the run.
#[derive(Clone, Copy)]
struct LentRun {
    next: i64,
    limit: i64,
    base: i64,
    left: i64,
}

/// An int register as a 64-bit index. Every operation on an `i` register
/// writes its 32 bits and clears the upper half (x86-64 zero-extends every
/// 32-bit result), so the register is already the zero-extended value. An
/// index is used for addressing only after the unsigned bounds check, and a
/// handle is never negative.
pub(super) fn ix(r: R) -> Reg<UL> {
    Reg::phys(r.num())
}

/// Whether integer register `h` is one the host's calling convention makes
/// callee-saved (a function called from generated code keeps it).
pub(super) fn callee_saved(h: u8) -> bool {
    h < 16 && vcode::host::CALLEE_SAVED_GPR & (1 << h) != 0
}

/// The register classes of the generated code: the host's, with the
/// callee-saved registers that the host's call (`exec::call_entry`)
/// declares clobbered kept by the caller, so that the entry saves none of
/// them ([`vcode::RegConfig::keep_in_caller`]).
pub(super) fn entry_config() -> vcode::RegConfig {
    let mut cfg = vcode::RegConfig::default();
    for n in super::exec::CALLER_KEPT {
        // Each is callee-saved in the host's convention
        // (`exec::tests::the_caller_kept_registers_are_callee_saved_and_kept`).
        cfg.keep_in_caller(n)
            .expect("a register of CALLER_KEPT is callee-saved");
    }
    cfg
}

pub(super) struct Regs {
    pub(super) fp: Reg<P>,
    pub(super) fuel: Reg<UL>,
    pub(super) x: u8,
    pub(super) y: u8,
    pub(super) z: u8,
    pub(super) w: u8,
    pub(super) homes: Vec<u8>,
    /// The context, kept in a callee-saved register for the whole
    /// invocation when the program calls natives ([`Uses::natives`]);
    /// `None` keeps it in the native frame (`Locals::ctx`).
    pub(super) ctx: Option<Reg<P>>,
}

/// vcode locals of the one native frame: per invocation, shared by all
/// methods (calls between methods do not move the native frame pointer).
pub(super) struct Locals {
    pub(super) ctx: Local<P>,
    pub(super) dir: Local<P>,
    pub(super) statics: Local<P>,
    pub(super) fields: Local<P>,
    pub(super) frames_end: Local<P>,
    pub(super) depth: Local<L>,
    pub(super) trap: [Local<I>; 3],
    pub(super) tmp: [Local<I>; 4],
}

/// Which of the context's base pointers a program's code reads, so that
/// the entry copies into the native frame only those (a few instructions
/// of every invocation; none where the context is in a register,
/// [`Regs::ctx`], through which each base is read). A base the entry did
/// not copy is still read
/// correctly, through the context ([`Compiler::ld_base`]); `calls` also
/// decides whether the entry sets up the depth counter, which only method
/// calls use.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Uses {
    pub(super) dir: bool,
    pub(super) statics: bool,
    pub(super) fields: bool,
    pub(super) calls: bool,
    /// A native call (`CallNative`, `CallNativeUnmetered`): its code reads
    /// the context at every call (the call's argument, the host's words,
    /// the directory afterwards), so the compiler keeps the context in a
    /// register ([`Regs::ctx`]).
    pub(super) natives: bool,
}

impl Uses {
    /// What `prog`'s ops read, over every method and every op a fused op
    /// stands for.
    pub(super) fn of(prog: &Program) -> Uses {
        use Op::*;
        let mut u = Uses::default();
        for f in prog.funcs.iter().flatten() {
            for &op in f.code.iter() {
                let (parts, k) = expand(op);
                for &o in &parts[..k] {
                    match o {
                        IALoad | BALoad | SALoad | IAStore | BAStore | SAStore | ArrayLength => {
                            u.dir = true
                        }
                        GetStatic(_) | PutStatic(_) => u.statics = true,
                        GetField(_) | PutField(_) => u.fields = true,
                        Call(_) | CallUnmetered(_) => u.calls = true,
                        CallNative(_) | CallNativeUnmetered(_) => u.natives = true,
                        _ => {}
                    }
                }
            }
        }
        u
    }
}

/// The methods that no method calls (a `Call` or `CallUnmetered` of
/// them in no method's code, fused ops included): only the host enters
/// them, through the dispatch, so each is compiled at its dispatch target
/// and returns straight to the host, without a call stub. A method that
/// is called keeps its stub, since its returns go back to its caller.
pub(super) fn host_only(prog: &Program) -> Vec<bool> {
    let mut called = vec![false; prog.funcs.len()];
    for f in prog.funcs.iter().flatten() {
        for &op in f.code.iter() {
            let (parts, k) = expand(op);
            for &o in &parts[..k] {
                if let Op::Call(m) | Op::CallUnmetered(m) = o
                    && let Some(c) = called.get_mut(usize::from(m))
                {
                    *c = true;
                }
            }
        }
    }
    prog.funcs
        .iter()
        .zip(called)
        .map(|(f, c)| f.is_some() && !c)
        .collect()
}

/// A base pointer of the context that generated code reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Base {
    Dir,
    Statics,
    Fields,
    FramesEnd,
}

/// What Z holds across ops, when it is a base pointer (see [`Compiler::op`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ZHolds {
    Nothing,
    Statics,
    Fields,
    /// The data address of the array in a local with a [`Fact`].
    Data(u16),
}

/// What a block knows of the array a local refers to: its data address
/// (and, once an index was checked against it, its length) kept in tmp
/// locals, and the highest constant index proven in bounds. Arrays never
/// move or shrink during an invocation, so this holds until the local is
/// written, control merges, or a call reuses the tmp locals.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fact {
    pub(super) slot: usize,
    pub(super) checked: i32,
    pub(super) has_len: bool,
}

pub(super) struct Compiler<'p> {
    pub(super) f: Func,
    pub(super) prog: &'p Program,
    /// Each method's [`Analysis`], taken by [`Compiler::method`].
    pub(super) analyses: Vec<Option<Analysis>>,
    pub(super) regs: Regs,
    pub(super) locals: Locals,
    /// The bases the entry copied into `locals`.
    pub(super) uses: Uses,
    pub(super) entries: Vec<Label>,
    /// Each method's dispatch target.
    pub(super) calls: Vec<Label>,
    /// The methods compiled at their dispatch target ([`host_only`]).
    pub(super) direct: Vec<bool>,
    /// [`charge_free_methods`] of the program (empty when it is not metered).
    pub(super) charge_free: Vec<bool>,
    pub(super) sites: Vec<Site>,
    pub(super) stubs: Vec<Stub>,
    pub(super) exit: Label,
    pub(super) metered: bool,
    pub(super) marks: Vec<(usize, Mark)>,
    // Per method:
    pub(super) method: u16,
    pub(super) bci: u32,
    pub(super) max_locals: u16,
    pub(super) frame: u16,
    pub(super) homes: Vec<Home>,
    pub(super) stack: Vec<Val>,
    /// The method's ops and the stack depth before each.
    pub(super) code: Vec<Op>,
    pub(super) depth: Vec<Option<u16>>,
    /// The local the op being compiled should put its result in
    /// ([`Compiler::dest`]), and the entry its result becomes.
    pub(super) hint: Option<u16>,
    pub(super) dest_val: Val,
    pub(super) facts: Vec<Option<Fact>>,
    /// An upper bound (signed) of each local on the code being compiled,
    /// from the fall-through of a branch that tested it against a
    /// constant (`if (length <= 56)`), unless the branch's target is that
    /// fall-through itself: it holds from there to the next branch
    /// target, store to the local or `iinc` of it, where it is
    /// forgotten. An inline push whose length is such a local bounded by
    /// `RING_BYTES` leaves out its own test of the bound.
    pub(super) le: Vec<Option<i32>>,
    /// The op being compiled, and the end of its block (the next branch
    /// target, exclusive).
    pub(super) op_index: usize,
    pub(super) block_end: usize,
    pub(super) z_holds: ZHolds,
    pub(super) fact_ptr: Vec<Local<P>>,
    pub(super) fact_len: Vec<Local<I>>,
}

/// vcode's error while compiling `prog`, as a [`JitError`].
pub(super) fn codegen_error(prog: &Program) -> impl Fn(vcode::Error) -> JitError + Copy + '_ {
    move |source| JitError::Codegen {
        class: prog.info.name.clone(),
        source,
    }
}

/// The ops a (possibly fused) op stands for, in order.
pub(super) fn expand(op: Op) -> ([Op; 4], usize) {
    use Op::*;
    let n = Nop;
    let (a, k) = match op {
        IfLLEq(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpEq(t), n], 3),
        IfLLNe(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpNe(t), n], 3),
        IfLLLt(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpLt(t), n], 3),
        IfLLGe(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpGe(t), n], 3),
        IfLLGt(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpGt(t), n], 3),
        IfLLLe(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpLe(t), n], 3),
        IfLLEqBack(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpEqBack(t), n], 3),
        IfLLNeBack(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpNeBack(t), n], 3),
        IfLLLtBack(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpLtBack(t), n], 3),
        IfLLGeBack(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpGeBack(t), n], 3),
        IfLLGtBack(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpGtBack(t), n], 3),
        IfLLLeBack(a, b, t) => ([Load(a.into()), Load(b.into()), IfCmpLeBack(t), n], 3),
        IincGoto(a, d, t) => ([Iinc(a.into(), d), Goto(t), n, n], 2),
        IincGotoBack(a, d, t) => ([Iinc(a.into(), d), GotoBack(t), n, n], 2),
        Load2(a, b) => ([Load(a), Load(b), n, n], 2),
        AddL(a) => ([Load(a), Add, n, n], 2),
        AddS(k) => ([GetStatic(k), Add, n, n], 2),
        IALoadLL(a, i) => ([Load(a), Load(i), IALoad, n], 3),
        IALoadLC(a, c) => ([Load(a), Const(c.into()), IALoad, n], 3),
        BALoadLL(a, i) => ([Load(a), Load(i), BALoad, n], 3),
        AddIALoadLC(a, c) => ([Load(a), Const(c.into()), IALoad, Add], 4),
        AddLL(a, b) => ([Load(a), Load(b), Add, n], 3),
        IAStoreLCL(a, c, v) => ([Load(a), Const(c.into()), Load(v), IAStore], 4),
        IAStoreLLL(a, i, v) => ([Load(a), Load(i), Load(v), IAStore], 4),
        BAStoreLLL(a, i, v) => ([Load(a), Load(i), Load(v), BAStore], 4),
        op => ([op, n, n, n], 1),
    };
    (a, k)
}

/// (pops, pushes) of a base op.
pub(super) fn effect(prog: &Program, op: Op) -> (usize, usize) {
    use Op::*;
    match op {
        Nop | Iinc(..) | Goto(_) | GotoBack(_) | Return => (0, 0),
        Const(_) | Load(_) | GetStatic(_) => (0, 1),
        Store(_) | Pop | PutStatic(_) | ObjectInit | ReturnValue => (1, 0),
        IALoad | BALoad | SALoad => (2, 1),
        IAStore | BAStore | SAStore => (3, 0),
        Pop2 | PutField(_) => (2, 0),
        Dup => (1, 2),
        DupX1 => (2, 3),
        DupX2 => (3, 4),
        Dup2 => (2, 4),
        Dup2X1 => (3, 5),
        Dup2X2 => (4, 6),
        Swap => (2, 2),
        Add | Sub | Mul | Div | Rem | Shl | Shr | Ushr | And | Or | Xor => (2, 1),
        Neg | I2B | I2S | I2Z | GetField(_) | NewArray(_) | ArrayLength => (1, 1),
        IfEq(_) | IfNe(_) | IfLt(_) | IfGe(_) | IfGt(_) | IfLe(_) => (1, 0),
        IfEqBack(_) | IfNeBack(_) | IfLtBack(_) | IfGeBack(_) | IfGtBack(_) | IfLeBack(_) => (1, 0),
        IfCmpEq(_) | IfCmpNe(_) | IfCmpLt(_) | IfCmpGe(_) | IfCmpGt(_) | IfCmpLe(_) => (2, 0),
        IfCmpEqBack(_) | IfCmpNeBack(_) | IfCmpLtBack(_) | IfCmpGeBack(_) | IfCmpGtBack(_)
        | IfCmpLeBack(_) => (2, 0),
        TableSwitch(_) | LookupSwitch(_) | SwitchUnmetered(_) => (1, 0),
        Call(m) | CallUnmetered(m) => {
            let info = &prog.info.methods[usize::from(m)];
            (info.arg_slots(), usize::from(info.sig.ret.is_some()))
        }
        CallNative(n) | CallNativeUnmetered(n) => {
            let d = &prog.natives[usize::from(n)];
            (d.params.len(), usize::from(d.ret.is_some()))
        }
        // Fused ops: the sum of their parts.
        op => {
            let (parts, k) = expand(op);
            let mut depth: isize = 0;
            let mut low: isize = 0;
            for &o in &parts[..k] {
                let (po, pu) = effect(prog, o);
                depth -= po as isize;
                low = low.min(depth);
                depth += pu as isize;
            }
            ((-low) as usize, (depth - low) as usize)
        }
    }
}

/// The operand-stack depth before each op (`None`: unreachable).
pub(super) fn depths(prog: &Program, code: &[Op]) -> Vec<Option<u16>> {
    let mut d = vec![None; code.len()];
    let mut work = vec![(0usize, 0u16)];
    while let Some((i, depth)) = work.pop() {
        match d.get(i) {
            Some(Some(_)) | None => continue,
            _ => {}
        }
        d[i] = Some(depth);
        let (po, pu) = effect(prog, code[i]);
        let after = (usize::from(depth) + pu).saturating_sub(po) as u16;
        successors(code[i], i, &prog.switches, |t| work.push((t, after)));
    }
    d
}

/// The JVM condition of a branch op, and whether it compares two values.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Cond {
    Eq,
    Ne,
    Lt,
    Ge,
    Gt,
    Le,
}

impl Cond {
    pub(super) fn swap(self) -> Cond {
        match self {
            Cond::Lt => Cond::Gt,
            Cond::Gt => Cond::Lt,
            Cond::Le => Cond::Ge,
            Cond::Ge => Cond::Le,
            c => c,
        }
    }
    pub(super) fn not(self) -> Cond {
        match self {
            Cond::Eq => Cond::Ne,
            Cond::Ne => Cond::Eq,
            Cond::Lt => Cond::Ge,
            Cond::Ge => Cond::Lt,
            Cond::Gt => Cond::Le,
            Cond::Le => Cond::Gt,
        }
    }
    pub(super) fn eval(self, a: i32, b: i32) -> bool {
        match self {
            Cond::Eq => a == b,
            Cond::Ne => a != b,
            Cond::Lt => a < b,
            Cond::Ge => a >= b,
            Cond::Gt => a > b,
            Cond::Le => a <= b,
        }
    }
}

/// The magic number and shift of signed division by `d >= 2` (Hacker's
/// Delight, 2nd ed., §10-4, figure 10-1): `n / d` is
/// `((mulhs(m, n) + (m < 0 ? n : 0)) >> s) + sign bit of that`.
pub(super) fn magic(d: i32) -> (i32, i32) {
    const TWO31: u32 = 0x8000_0000;
    let ad = d.unsigned_abs();
    let t = TWO31 + ((d as u32) >> 31);
    let anc = t - 1 - t % ad;
    let mut p = 31;
    let (mut q1, mut r1) = (TWO31 / anc, TWO31 - (TWO31 / anc) * anc);
    let (mut q2, mut r2) = (TWO31 / ad, TWO31 - (TWO31 / ad) * ad);
    loop {
        p += 1;
        q1 = q1.wrapping_mul(2);
        r1 = r1.wrapping_mul(2);
        if r1 >= anc {
            q1 = q1.wrapping_add(1);
            r1 = r1.wrapping_sub(anc);
        }
        q2 = q2.wrapping_mul(2);
        r2 = r2.wrapping_mul(2);
        if r2 >= ad {
            q2 = q2.wrapping_add(1);
            r2 = r2.wrapping_sub(ad);
        }
        let delta = ad - r2;
        if !(q1 < delta || (q1 == delta && r1 == 0)) {
            break;
        }
    }
    (q2.wrapping_add(1) as i32, p - 32)
}

/// (condition, compares two values, target, charges fuel when taken).
pub(super) fn branch(op: Op) -> Option<(Cond, bool, u32, bool)> {
    use Op::*;
    Some(match op {
        IfEq(t) => (Cond::Eq, false, t, false),
        IfNe(t) => (Cond::Ne, false, t, false),
        IfLt(t) => (Cond::Lt, false, t, false),
        IfGe(t) => (Cond::Ge, false, t, false),
        IfGt(t) => (Cond::Gt, false, t, false),
        IfLe(t) => (Cond::Le, false, t, false),
        IfEqBack(t) => (Cond::Eq, false, t, true),
        IfNeBack(t) => (Cond::Ne, false, t, true),
        IfLtBack(t) => (Cond::Lt, false, t, true),
        IfGeBack(t) => (Cond::Ge, false, t, true),
        IfGtBack(t) => (Cond::Gt, false, t, true),
        IfLeBack(t) => (Cond::Le, false, t, true),
        IfCmpEq(t) => (Cond::Eq, true, t, false),
        IfCmpNe(t) => (Cond::Ne, true, t, false),
        IfCmpLt(t) => (Cond::Lt, true, t, false),
        IfCmpGe(t) => (Cond::Ge, true, t, false),
        IfCmpGt(t) => (Cond::Gt, true, t, false),
        IfCmpLe(t) => (Cond::Le, true, t, false),
        IfCmpEqBack(t) => (Cond::Eq, true, t, true),
        IfCmpNeBack(t) => (Cond::Ne, true, t, true),
        IfCmpLtBack(t) => (Cond::Lt, true, t, true),
        IfCmpGeBack(t) => (Cond::Ge, true, t, true),
        IfCmpGtBack(t) => (Cond::Gt, true, t, true),
        IfCmpLeBack(t) => (Cond::Le, true, t, true),
        _ => return None,
    })
}

/// An innermost loop whose trip count is known when it is entered, so that
/// its fuel can be charged once there ([`Compiler::versioned_loop`]):
///
/// - `head` is the loop's test, on an empty stack, of the counter against
///   a constant or a local (at most three ops: the pushes and a branch),
///   leaving the loop to a target past `back`;
/// - `back` is the one back edge, `counter += step; goto head`, with step
///   1 (the loop runs while `counter < bound`, or `<=` a constant below
///   `i32::MAX`) or -1 (while `counter > bound`, or `>=` a constant above
///   `i32::MIN`);
/// - no op between them writes the counter or the bound, returns, or
///   branches out of the loop, and no branch from outside lands inside it;
/// - the only charges between them (no back edge, switch or native) are
///   calls of bytecode methods that charge nothing themselves
///   ([`charge_free_methods`]), and every path from the test to the back edge
///   passes the same number of them, so that each pass of the body charges
///   the same `per_trip` units, the back edge's own included (the decoder
///   leaves the back edge of a loop that calls on every path uncharged).
///
/// Each pass of the body then ends in the back edge and moves the counter
/// one step towards the bound, which it reaches without wrapping: the back
/// edge is taken `max(0, bound - counter)` times (counting up) from the
/// entry, the test sees the bound, and the loop leaves, having charged
/// `per_trip` units per pass.
pub(super) struct CountedLoop {
    pub(super) head: usize,
    pub(super) back: usize,
    pub(super) counter: u16,
    pub(super) step: i16,
    pub(super) bound: Bound,
    /// The units each pass charges (at least 1, at most the loop's ops).
    pub(super) per_trip: u32,
}

/// What a [`CountedLoop`]'s counter is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bound {
    /// A local no op of the loop writes.
    Local(u16),
    Const(i32),
}

/// Loops longer than this many ops keep their per-iteration charge (the
/// versioned loop is compiled twice).
pub(super) const MAX_VERSIONED_OPS: usize = 64;

/// For each op of `code` (and its end), the lowest and highest index of an
/// op that jumps to it (other than by falling through): `usize::MAX` and 0
/// where none does. A loop `head..=back` is entered only at its head when
/// no op inside it past the head has a source outside.
fn jump_sources(prog: &Program, code: &[Op]) -> (Vec<usize>, Vec<usize>) {
    let n = code.len();
    let (mut lo, mut hi) = (vec![usize::MAX; n + 1], vec![0usize; n + 1]);
    for (i, &o) in code.iter().enumerate() {
        successors(o, i, &prog.switches, |t| {
            if t != i + 1 && t <= n {
                lo[t] = lo[t].min(i);
                hi[t] = hi[t].max(i);
            }
        });
    }
    (lo, hi)
}

/// The [`CountedLoop`]s of a method's code, in order; `free` is
/// [`charge_free_methods`] of `prog`.
pub(super) fn counted_loops(
    prog: &Program,
    free: &[bool],
    code: &[Op],
    depth: &[Option<u16>],
) -> Vec<CountedLoop> {
    let (lo, hi) = jump_sources(prog, code);
    let mut out: Vec<CountedLoop> = Vec::new();
    for (b, &o) in code.iter().enumerate() {
        // The back edge: charging, or not (a loop whose every path calls,
        // [`CountedLoop`]).
        let (Op::IincGotoBack(counter, step, t) | Op::IincGoto(counter, step, t)) = o else {
            continue;
        };
        let (t, counter) = (t as usize, u16::from(counter));
        if t >= b || b - t >= MAX_VERSIONED_OPS || !matches!(step, 1 | -1) {
            continue;
        }
        if out.last().is_some_and(|l| l.back >= t) {
            continue; // overlaps the previous loop
        }
        if let Some(lp) = counted_loop(prog, free, code, depth, t, b, counter, step, &lo, &hi) {
            out.push(lp);
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn counted_loop(
    prog: &Program,
    free: &[bool],
    code: &[Op],
    depth: &[Option<u16>],
    t: usize,
    b: usize,
    counter: u16,
    step: i16,
    lo: &[usize],
    hi: &[usize],
) -> Option<CountedLoop> {
    use Op::*;
    // The test: at most three ops that push locals and constants, then a
    // forward branch out of the loop (`javac`'s `i < n`, `i < 100`, `i > 0`).
    if depth.get(t) != Some(&Some(0)) {
        return None;
    }
    let val = |o: Op| match o {
        Load(s) => Some(Val::Slot(s)),
        Const(v) => Some(Val::Const(v)),
        _ => None,
    };
    let mut operands = Vec::new();
    let mut test = None;
    let mut body = t;
    while test.is_none() {
        if body >= b || body >= t + 3 {
            return None;
        }
        let (parts, k) = expand(code[body]);
        body += 1;
        for (n, &p) in parts[..k].iter().enumerate() {
            match branch(p) {
                Some((c, two, exit, false)) if n + 1 == k => test = Some((c, two, exit)),
                Some(_) => return None,
                None => operands.push(val(p)?),
            }
        }
    }
    let (c, two, exit) = test?;
    if (exit as usize) <= b {
        return None;
    }
    let (a, z) = match (two, operands.as_slice()) {
        (true, &[a, z]) => (a, z),
        (false, &[a]) => (a, Val::Const(0)),
        _ => return None,
    };
    // The loop goes on while `counter stay bound`.
    let (stay, bound) = if a == Val::Slot(counter) {
        (c.not(), z)
    } else if z == Val::Slot(counter) {
        (c.not().swap(), a)
    } else {
        return None;
    };
    // As `counter < bound` (counting up) or `counter > bound` (down); a
    // constant bound of `<=` or `>=` moves by one, unless the counter could
    // never pass it (`i <= Integer.MAX_VALUE` never ends).
    let bound = match (step, stay, bound) {
        (_, _, Val::Slot(s)) if s == counter => return None,
        (1, Cond::Lt, Val::Slot(s)) | (-1, Cond::Gt, Val::Slot(s)) => Bound::Local(s),
        (1, Cond::Lt, Val::Const(v)) | (-1, Cond::Gt, Val::Const(v)) => Bound::Const(v),
        (1, Cond::Le, Val::Const(v)) if v < i32::MAX => Bound::Const(v + 1),
        (-1, Cond::Ge, Val::Const(v)) if v > i32::MIN => Bound::Const(v - 1),
        _ => return None,
    };
    // One entry, at the test.
    if (t + 1..=b).any(|j| lo[j] < t || hi[j] > b) {
        return None;
    }
    // The fewest and most charges on a path from the body's first op to
    // each op (`None`: no path; branches inside the loop go forward only,
    // so one pass in order sees every path).
    let mut charges: Vec<Option<(u32, u32)>> = vec![None; b + 1 - body];
    if let Some(c) = charges.first_mut() {
        *c = Some((0, 0));
    }
    for (j, &o) in code.iter().enumerate().take(b).skip(body) {
        if depth[j].is_none() {
            continue;
        }
        let here = match o {
            Call(m) if free.get(usize::from(m)) == Some(&true) => 1,
            Return | ReturnValue => return None,
            o if calls_or_switches(o) => return None,
            _ => 0,
        };
        // Forward and inside the loop only (a back edge the decoder left
        // uncharged is a backward branch too).
        let mut inside = true;
        successors(o, j, &prog.switches, |s| inside &= s > j && s <= b);
        if !inside {
            return None;
        }
        let (parts, k) = expand(o);
        for &p in &parts[..k] {
            let writes =
                matches!(p, Store(s) | Iinc(s, _) if s == counter || Bound::Local(s) == bound);
            let back = matches!(p, GotoBack(_)) || branch(p).is_some_and(|(.., back)| back);
            if writes || back {
                return None;
            }
        }
        let Some((fewest, most)) = charges[j - body] else {
            continue; // no path from the test reaches it
        };
        let (fewest, most) = (fewest + here, most + here);
        successors(o, j, &prog.switches, |s| {
            let c = &mut charges[s - body];
            *c = Some(c.map_or((fewest, most), |(f, m)| (f.min(fewest), m.max(most))));
        });
    }
    // The back edge's own charge, then the same count on every path.
    let own = u32::from(matches!(code[b], IincGotoBack(..)));
    let (fewest, most) = charges[b - body]?;
    if fewest != most || fewest + own == 0 {
        return None;
    }
    Some(CountedLoop {
        head: t,
        back: b,
        counter,
        step,
        bound,
        per_trip: fewest + own,
    })
}

/// Passes of a [`straight_loops`] loop run per fuel test in its metered
/// copy ([`Compiler::unrolled_loop`]).
pub(super) const UNROLL: u32 = 4;

/// Straight loops longer than this many ops are not unrolled (the body is
/// compiled `UNROLL + 1` times).
pub(super) const MAX_UNROLLED_OPS: usize = 32;

/// The innermost loops `(head, back)` of a method's code, in order, whose
/// body is one straight-line block with its exits, so that the metered
/// copy can run `UNROLL` passes per fuel test ([`Compiler::unrolled_loop`]):
///
/// - `back` is the back edge that closes it, a charging `goto head` (with
///   or without an `iinc`), the loop's only charge: no op between them
///   calls, switches or returns;
/// - every op from `head` to `back - 1` falls through to the next, and any
///   other way it may go is a forward branch out of the loop (past `back`),
///   uncharged: the loop's exits, taken at any pass;
/// - `head` is on an empty stack, and no branch from outside lands in
///   `head + 1..=back`. Branches to `head` may come from anywhere (before
///   the loop, or back edges from after it); the JIT's rotated copy of
///   one ([`Compiler::rotate`]) enters pass 0 just after its test.
///
/// A pass is then the ops `head..=back` in order up to an exit or a trap,
/// and every pass that reaches the back edge charges exactly one unit
/// there, as in the interpreter. Loops that are [`counted_loops`] are left
/// out (`counted`).
pub(super) fn straight_loops(
    prog: &Program,
    code: &[Op],
    depth: &[Option<u16>],
    counted: &[CountedLoop],
) -> Vec<(usize, usize)> {
    use Op::*;
    let n = code.len();
    let (lo, hi) = jump_sources(prog, code);
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (b, &o) in code.iter().enumerate() {
        let (GotoBack(t) | IincGotoBack(_, _, t)) = o else {
            continue;
        };
        let t = t as usize;
        if t >= b || b - t >= MAX_UNROLLED_OPS || counted.iter().any(|l| l.back == b) {
            continue;
        }
        if out.last().is_some_and(|&(_, back)| back >= t) {
            continue;
        }
        if depth.get(t) != Some(&Some(0)) || depth[t..=b].iter().any(Option::is_none) {
            continue;
        }
        if (t + 1..=b).any(|j| lo[j] < t || hi[j] > b) {
            continue;
        }
        let straight = (t..b).all(|j| {
            let o = code[j];
            if calls_or_switches(o) || matches!(o, Return | ReturnValue) {
                return false;
            }
            let (parts, k) = expand(o);
            if parts[..k].iter().any(|&p| {
                matches!(p, Goto(_) | GotoBack(_)) || branch(p).is_some_and(|(.., back)| back)
            }) {
                return false;
            }
            let (mut falls, mut out_only) = (false, true);
            successors(o, j, &prog.switches, |s| {
                if s == j + 1 {
                    falls = true;
                } else {
                    out_only &= s > b && s <= n;
                }
            });
            falls && out_only
        });
        if straight {
            out.push((t, b));
        }
    }
    out
}

/// Whether `o` calls (a method or a native, metered or not) or switches:
/// the ops that charge fuel, or whose callee may, other than a branch.
fn calls_or_switches(o: Op) -> bool {
    use Op::*;
    matches!(
        o,
        Call(_)
            | CallNative(_)
            | CallUnmetered(_)
            | CallNativeUnmetered(_)
            | TableSwitch(_)
            | LookupSwitch(_)
            | SwitchUnmetered(_)
    )
}

/// For each method of `prog`, whether a call of it charges nothing past
/// the call's own unit: bytecode whose code has no call, no switch and no
/// backward branch (so no loop), in any form. One pass over the program's
/// code, made once per compile: asked again for every call of every loop,
/// a class of many loops calling one long method took seconds to compile.
pub(super) fn charge_free_methods(prog: &Program) -> Vec<bool> {
    prog.funcs
        .iter()
        .map(|f| {
            f.as_ref().is_some_and(|f| {
                #[cfg(test)]
                tests::SCANNED.with(|c| c.set(c.get() + f.code.len()));
                f.code.iter().enumerate().all(|(j, &o)| {
                    if calls_or_switches(o) {
                        return false;
                    }
                    let mut forward = true;
                    successors(o, j, &prog.switches, |s| forward &= s > j);
                    forward
                })
            })
        })
        .collect()
}

/// How much each slot of a method's frame (`max_locals` locals, then the
/// operand stack) would gain from a register home: its uses, weighted by
/// loop nesting. Slots of weight 0 are never read or written.
pub(super) fn slot_weights(
    prog: &Program,
    max_locals: u16,
    code: &[Op],
    depth: &[Option<u16>],
    frame: usize,
) -> Vec<u64> {
    let n = code.len();
    let mut nest = vec![0i32; n + 1];
    for (b, &o) in code.iter().enumerate() {
        successors(o, b, &prog.switches, |t| {
            if t <= b {
                nest[t] += 1;
                nest[b + 1] -= 1;
            }
        });
    }
    let mut weight = vec![0u64; frame];
    let mut level = 0i32;
    for i in 0..n {
        level += nest[i];
        let w = 8u64.saturating_pow(level.clamp(0, 6) as u32);
        let (parts, k) = expand(code[i]);
        let Some(mut d) = depth[i].map(usize::from) else {
            continue;
        };
        for &o in &parts[..k] {
            match o {
                Op::Load(s) | Op::Store(s) | Op::Iinc(s, _) => {
                    if let Some(x) = weight.get_mut(usize::from(s)) {
                        *x += w;
                    }
                }
                _ => {}
            }
            let (po, pu) = effect(prog, o);
            d = d.saturating_sub(po);
            // A result whose home is memory waits in W, so stack slots
            // need registers less than locals do.
            for j in d..d + pu {
                if let Some(x) = weight.get_mut(usize::from(max_locals) + j) {
                    *x += w.div_ceil(16);
                }
            }
            d += pu;
        }
    }
    weight
}

/// What the compiler knows of a method before it emits code: the stack
/// depth at each op ([`depths`]) and each frame slot's weight
/// ([`slot_weights`]). Computed once per method, in [`Compiler::new`], which
/// needs the weights to decide how many homes to claim.
pub(super) struct Analysis {
    pub(super) depth: Vec<Option<u16>>,
    pub(super) weight: Vec<u64>,
}

/// The [`Analysis`] of every bytecode method of `prog`, by method index.
pub(super) fn analyze(prog: &Program) -> Vec<Option<Analysis>> {
    prog.funcs
        .iter()
        .map(|f| {
            let func = f.as_ref()?;
            let frame = usize::from(func.max_locals) + usize::from(func.max_stack);
            let depth = depths(prog, &func.code);
            let weight = slot_weights(prog, func.max_locals, &func.code, &depth, frame);
            Some(Analysis { depth, weight })
        })
        .collect()
}

/// The most register homes any method can use: its slots of non-zero
/// weight. The compiler claims no more, so that the entry saves no
/// callee-saved register that no method uses.
pub(super) fn homes_wanted(analyses: &[Option<Analysis>]) -> usize {
    analyses
        .iter()
        .flatten()
        .map(|a| a.weight.iter().filter(|&&w| w > 0).count())
        .max()
        .unwrap_or(0)
}

impl<'p> Compiler<'p> {
    pub(super) fn new(prog: &'p Program) -> Result<Compiler<'p>, JitError> {
        let cg = codegen_error(prog);
        let mut f = Func::new();
        f.set_code_limit(4 << 20);
        // The entry's contract with the host (`exec::call_entry`): the
        // host's call declares `r12` to `r15` clobbered, so the entry does
        // not save them (the host saves what it needs of them once, in its
        // own frame, instead of both sides saving); natives and runtime
        // calls still keep them, so they stay persistent registers here.
        // `rbx`, which an `asm!` block cannot name, the entry still saves.
        f.set_config(entry_config());
        f.name(format!("jive:{}", prog.info.name));
        // The context, and the method's index as a machine word (the
        // jump table's index without a widening).
        let params = f.lambda("%p%ul", Leaf::No).map_err(cg)?;
        let ctx_arg = params.get::<P>(0).map_err(cg)?;
        let idx_in = params.get::<UL>(1).map_err(cg)?;
        // Where the host passes the context: in [`super::exec::CTX_IN`] (on
        // x86-64 `r13`, a register the host declares clobbered, so the
        // code's context register below is that one and the entry moves
        // nothing), or as the convention's first argument.
        let ctx_in = match super::exec::CTX_IN {
            Some(n) => {
                f.putreg(ctx_arg);
                f.reserve(Reg::<P>::phys(n)).map_err(cg)?
            }
            None => ctx_arg,
        };
        let fp = f.getreg::<P>(Class::Persistent).map_err(cg)?;
        let fuel = f.getreg::<UL>(Class::Persistent).map_err(cg)?;
        let locals = Locals {
            ctx: f.local(),
            dir: f.local(),
            statics: f.local(),
            fields: f.local(),
            frames_end: f.local(),
            depth: f.local(),
            trap: [f.local(), f.local(), f.local()],
            tmp: [f.local(), f.local(), f.local(), f.local()],
        };
        let uses = Uses::of(prog);
        // The context: in a callee-saved register where the program calls
        // natives, which read it at every call (their argument, the host's
        // words, the directory after the call). The register costs a save
        // and a restore per invocation and the last register home of a
        // program that wants them all ([`Compiler::new`]'s homes below);
        // it saves the context's store and every reload, and the base
        // pointers' copies below (each base is read through the register,
        // at the cost the copy's reload had), so the directory need not be
        // taken again after a call either. A program without natives keeps
        // the context in the native frame.
        let in_place = super::exec::CTX_IN.is_some();
        let ctx_reg = if uses.natives {
            if in_place {
                Some(ctx_in)
            } else {
                f.getreg::<P>(Class::Persistent).ok()
            }
        } else {
            None
        };
        match ctx_reg {
            Some(c) if c == ctx_in => {}
            Some(c) => f.mov(c, ctx_in),
            None => f.st_local(ctx_in, locals.ctx),
        }
        f.ld(fp, ctx_in, C_FRAMES);
        // The fuel the invocation starts with, kept by `Compiled::keep`
        // (the code writes what is left to `C_FUEL` at every exit).
        f.ld(fuel, ctx_in, C_FUEL_START);
        let t = f.getreg::<P>(Class::Temp).map_err(cg)?;
        // Copy the context's base pointers that the code reads into the
        // native frame's locals (with the context in a register, the code
        // reads them through it instead).
        for (off, l, used) in [
            (C_DIR, locals.dir, uses.dir),
            (C_STATICS, locals.statics, uses.statics),
            (C_FIELDS, locals.fields, uses.fields),
            (C_FRAMES_END, locals.frames_end, uses.calls),
        ] {
            if used && ctx_reg.is_none() {
                f.ld(t, ctx_in, off);
                f.st_local(t, l);
            }
        }
        // Depth left: calls from depth d trap when d >= max_depth.
        if uses.calls {
            let tl = t.cast::<L>();
            f.ld(tl, ctx_in, C_MAX_DEPTH);
            f.sub(tl, tl, 1);
            f.st_local(tl, locals.depth);
        }
        // Dispatch on the method index.
        let entries: Vec<Label> = prog.funcs.iter().map(|_| f.genlabel()).collect();
        let calls: Vec<Label> = prog.funcs.iter().map(|_| f.genlabel()).collect();
        let exit = f.genlabel();
        f.jump_table(idx_in, &calls);
        f.putreg(t);
        if ctx_reg != Some(ctx_in) {
            f.putreg(ctx_in);
        }
        f.putreg(idx_in);
        // X, Y, Z, W and the homes: no more homes than a method can use
        // (and at least one), taken in vcode's order, caller-saved
        // registers first, so that a program with few live slots leaves
        // callee-saved registers unclaimed and the entry does not save them.
        let analyses = analyze(prog);
        let wanted = 4 + homes_wanted(&analyses).max(1);
        let mut temps = Vec::new();
        while temps.len() < wanted
            && let Ok(t) = f.getreg::<I>(Class::Temp)
        {
            temps.push(t.num());
        }
        if temps.len() < 5 {
            return Err(JitError::TooFewRegisters {
                class: prog.info.name.clone(),
                available: temps.len(),
                needed: 5,
            });
        }
        let regs = Regs {
            fp,
            fuel,
            x: temps[0],
            y: temps[1],
            z: temps[2],
            w: temps[3],
            homes: temps[4..].to_vec(),
            ctx: ctx_reg,
        };
        // One call stub per method: run it, store the result, return 0. A
        // method no other method calls has none: it is compiled at its
        // dispatch target instead, and its returns are the stub's end
        // (`Compiler::method`, `Compiler::ret`), which saves the call, its
        // stack adjustment and the return of every invocation.
        let direct = host_only(prog);
        for (i, &l) in calls.iter().enumerate() {
            if direct[i] {
                continue;
            }
            f.label(l);
            if prog.funcs[i].is_some() {
                f.jal(entries[i]);
                let x = r(regs.x);
                let c = match regs.ctx {
                    Some(c) => c,
                    None => {
                        let c = p(regs.z);
                        f.ld_local(c, locals.ctx);
                        c
                    }
                };
                f.st(regs.fuel, c, C_FUEL);
                f.ret_zero_with(Operand::Reg(x), Reg::phys(super::exec::VALUE_OUT));
            } else {
                f.jmp(exit);
            }
        }
        Ok(Compiler {
            f,
            prog,
            analyses,
            regs,
            locals,
            uses,
            entries,
            calls,
            direct,
            charge_free: if prog.metered() {
                charge_free_methods(prog)
            } else {
                Vec::new()
            },
            sites: Vec::new(),
            stubs: Vec::new(),
            exit,
            metered: prog.metered(),
            marks: Vec::new(),
            method: 0,
            bci: 0,
            max_locals: 0,
            frame: 0,
            homes: Vec::new(),
            stack: Vec::new(),
            code: Vec::new(),
            depth: Vec::new(),
            hint: None,
            dest_val: Val::Const(0),
            facts: Vec::new(),
            le: Vec::new(),
            op_index: 0,
            block_end: 0,
            z_holds: ZHolds::Nothing,
            fact_ptr: Vec::new(),
            fact_len: Vec::new(),
        })
    }

    pub(super) fn x(&self) -> R {
        r(self.regs.x)
    }
    pub(super) fn w(&self) -> R {
        r(self.regs.w)
    }

    pub(super) fn site(&mut self, kind: SiteKind) -> u32 {
        self.sites.push(Site {
            kind,
            method: self.method,
            bci: self.bci,
        });
        (self.sites.len() - 1) as u32
    }

    /// A new out-of-line trap stub for the current op.
    pub(super) fn stub(&mut self, kind: SiteKind, recs: [Option<Rec>; 3]) -> Label {
        let site = self.site(kind);
        let label = self.f.genlabel();
        self.stubs.push(Stub { label, site, recs });
        label
    }

    pub(super) fn home(&self, s: u16) -> Home {
        self.homes[usize::from(s)]
    }

    /// The slot of stack position `j`.
    pub(super) fn pos_slot(&self, j: usize) -> u16 {
        self.max_locals + j as u16
    }

    /// The value `v` in a register: its home register, or loaded into `scratch`.
    pub(super) fn reg_of(&mut self, v: Val, scratch: u8) -> R {
        match v {
            Val::Const(c) => {
                self.f.set(r(scratch), c);
                r(scratch)
            }
            Val::W => self.w(),
            Val::Slot(s) => match self.home(s) {
                Home::Reg(h) => r(h),
                Home::Mem(off) => {
                    self.f.ld(r(scratch), self.regs.fp, i64::from(off));
                    r(scratch)
                }
            },
        }
    }

    pub(super) fn opnd(&mut self, v: Val, scratch: u8) -> Operand<I> {
        match v {
            Val::Const(c) => Operand::Imm(i64::from(c)),
            v => Operand::Reg(self.reg_of(v, scratch)),
        }
    }

    /// Writes `v` into slot `s`'s home.
    pub(super) fn put(&mut self, s: u16, v: Val) {
        if v == Val::Slot(s) {
            return;
        }
        match self.home(s) {
            Home::Reg(h) => match v {
                Val::Const(c) => self.f.set(r(h), c),
                v => {
                    let src = self.reg_of(v, h);
                    if src.num() != h {
                        self.f.mov(r(h), src);
                    }
                }
            },
            Home::Mem(off) => {
                let x = self.regs.x;
                let src = self.reg_of(v, x);
                self.f.st(src, self.regs.fp, i64::from(off));
            }
        }
    }

    /// Stores `W` into the home of the entry that holds it, if any.
    pub(super) fn flush_w(&mut self) {
        if let Some(j) = self.stack.iter().position(|&v| v == Val::W) {
            let s = self.pos_slot(j);
            self.put(s, Val::W);
            self.stack[j] = Val::Slot(s);
        }
    }

    /// Every entry into its own home (branch targets, calls).
    pub(super) fn sync(&mut self) {
        self.sync_below(self.stack.len());
    }

    /// The entries below stack position `end` into their own homes.
    pub(super) fn sync_below(&mut self, end: usize) {
        for j in 0..end {
            let s = self.pos_slot(j);
            let v = self.stack[j];
            if v != Val::Slot(s) {
                self.put(s, v);
                self.stack[j] = Val::Slot(s);
            }
        }
    }

    pub(super) fn pop(&mut self) -> Val {
        self.stack.pop().unwrap_or(Val::Const(0))
    }

    /// Where to compute the result pushed next: the home register of its
    /// position, or `W` (flushing what `W` held, unless that is an operand
    /// already popped).
    ///
    /// When the next op stores the result into a local with a register home
    /// that no entry reads, the result goes straight there (`t = a + b` is
    /// one instruction, not an add and a move).
    pub(super) fn dest(&mut self) -> R {
        if let Some(n) = self.hint.take()
            && let Home::Reg(h) = self.home(n)
            && !self.stack.contains(&Val::Slot(n))
        {
            self.dest_val = Val::Slot(n);
            return r(h);
        }
        let s = self.pos_slot(self.stack.len());
        match self.home(s) {
            Home::Reg(h) => {
                self.dest_val = Val::Slot(s);
                r(h)
            }
            Home::Mem(_) => {
                self.flush_w();
                self.dest_val = Val::W;
                self.w()
            }
        }
    }

    /// Pushes the result computed into `dest()`'s register.
    pub(super) fn push_result(&mut self, _rd: R) {
        self.stack.push(self.dest_val);
    }

    /// Before writing local `n`: entries that read it get their own copy.
    pub(super) fn detach_local(&mut self, n: u16) {
        for j in 0..self.stack.len() {
            if self.stack[j] == Val::Slot(n) {
                let s = self.pos_slot(j);
                self.put(s, Val::Slot(n));
                self.stack[j] = Val::Slot(s);
            }
        }
    }

    pub(super) fn charge(&mut self) {
        if !self.metered {
            return;
        }
        let stub = self.stub(SiteKind::Fuel, [None; 3]);
        // One fused `sub; jb`: out of fuel exactly when the count was 0,
        // as in the interpreter.
        self.f.dec_branch_borrow(self.regs.fuel, stub);
    }

    /// Loads a base pointer of the context into register `into`: through
    /// the context's register where there is one ([`Regs::ctx`]), else
    /// from the native frame if the entry copied it there, else through
    /// the context loaded from the frame.
    pub(super) fn ld_base(&mut self, into: u8, b: Base) -> Reg<P> {
        let (l, off, copied) = match b {
            Base::Dir => (self.locals.dir, C_DIR, self.uses.dir),
            Base::Statics => (self.locals.statics, C_STATICS, self.uses.statics),
            Base::Fields => (self.locals.fields, C_FIELDS, self.uses.fields),
            Base::FramesEnd => (self.locals.frames_end, C_FRAMES_END, self.uses.calls),
        };
        if let Some(c) = self.regs.ctx {
            self.f.ld(p(into), c, off);
        } else if copied {
            self.f.ld_local(p(into), l);
        } else {
            self.f.ld_local(p(into), self.locals.ctx);
            self.f.ld(p(into), p(into), off);
        }
        p(into)
    }

    /// The context's address: its register ([`Regs::ctx`]), or loaded
    /// from the native frame into `into`.
    pub(super) fn ctx(&mut self, into: u8) -> Reg<P> {
        match self.regs.ctx {
            Some(c) => c,
            None => {
                self.f.ld_local(p(into), self.locals.ctx);
                p(into)
            }
        }
    }

    // -- Operations ---------------------------------------------------------------

    pub(super) fn binop(&mut self, op: Op) {
        let b = self.pop();
        let a = self.pop();
        if let (Val::Const(x), Val::Const(y)) = (a, b)
            && !matches!(op, Op::Div | Op::Rem)
        {
            let v = match op {
                Op::Add => x.wrapping_add(y),
                Op::Sub => x.wrapping_sub(y),
                Op::Mul => x.wrapping_mul(y),
                Op::Shl => x.wrapping_shl(y as u32),
                Op::Shr => x.wrapping_shr(y as u32),
                Op::Ushr => (x as u32).wrapping_shr(y as u32) as i32,
                Op::And => x & y,
                Op::Or => x | y,
                _ => x ^ y,
            };
            self.stack.push(Val::Const(v));
            return;
        }
        let commutes = matches!(op, Op::Add | Op::Mul | Op::And | Op::Or | Op::Xor);
        let (a, b) = if commutes && matches!(a, Val::Const(_)) {
            (b, a)
        } else {
            (a, b)
        };
        if matches!(op, Op::Div | Op::Rem) {
            return self.divide(op, a, b);
        }
        let (x, y) = (self.regs.x, self.regs.y);
        let ra = self.reg_of(a, x);
        let rb = self.opnd(b, y);
        let rd = self.dest();
        let f = &mut self.f;
        match op {
            Op::Add => f.add(rd, ra, rb),
            Op::Sub => f.sub(rd, ra, rb),
            Op::Mul => f.mul(rd, ra, rb),
            Op::Shl => f.lsh(rd, ra, rb),
            Op::Shr => f.rsh(rd, ra, rb),
            Op::Ushr => {
                let rb = match rb {
                    Operand::Reg(b) => Operand::Reg(b.cast()),
                    Operand::Imm(v) => Operand::Imm(v & 31),
                };
                f.rsh(rd.cast::<vcode::U>(), ra.cast(), rb)
            }
            Op::And => f.and(rd, ra, rb),
            Op::Or => f.or(rd, ra, rb),
            _ => f.xor(rd, ra, rb),
        }
        self.push_result(rd);
    }

    /// `idiv`/`irem`: a zero divisor traps, `MIN / -1` is `MIN` (and
    /// `MIN % -1` is 0), where x86's `idiv` would fault.
    pub(super) fn divide(&mut self, op: Op, a: Val, b: Val) {
        let (x, y) = (self.regs.x, self.regs.y);
        let rem = op == Op::Rem;
        if let Val::Const(d) = b
            && d >= 2
        {
            let ra = self.reg_of(a, x);
            self.div_by_const(ra, d);
            let rd = self.dest();
            let q = r(y);
            if rem {
                // n - q * d
                self.f.mul(q, q, d);
                self.f.sub(rd, ra, q);
            } else {
                self.f.mov(rd, q);
            }
            return self.push_result(rd);
        }
        if let Val::Const(d) = b
            && d != 0
            && d != -1
        {
            let ra = self.reg_of(a, x);
            let rd = self.dest();
            if rem {
                self.f.rem(rd, ra, d);
            } else {
                self.f.div(rd, ra, d);
            }
            return self.push_result(rd);
        }
        let ra = self.reg_of(a, x);
        let rb = self.reg_of(b, y);
        let zero = self.stub(SiteKind::DivZero, [None; 3]);
        self.f.beq(rb, 0, zero);
        let (minus1, done) = (self.f.genlabel(), self.f.genlabel());
        let rd = self.dest();
        self.f.beq(rb, -1, minus1);
        if rem {
            self.f.rem(rd, ra, rb);
        } else {
            self.f.div(rd, ra, rb);
        }
        self.f.jmp(done);
        self.f.label(minus1);
        if rem {
            self.f.set(rd, 0);
        } else {
            self.f.neg(rd, ra);
        }
        self.f.label(done);
        self.push_result(rd);
    }

    /// `Y = n / d` for a constant `d >= 2`, without `idiv`: a shift for a
    /// power of two, else a multiply by a magic number and shifts (Hacker's
    /// Delight §10-4; `magic`). Uses Z.
    pub(super) fn div_by_const(&mut self, n: R, d: i32) {
        let (y, z) = (self.regs.y, self.regs.z);
        let q = r(y);
        if d & (d - 1) == 0 {
            // (n + (n < 0 ? d - 1 : 0)) >> k: rounds toward zero.
            let k = d.trailing_zeros() as i32;
            self.f.rsh(q, n, 31);
            self.f.rsh(q.cast::<vcode::U>(), q.cast(), (32 - k) as u32);
            self.f.add(q, q, n);
            self.f.rsh(q, q, k);
            return;
        }
        let (m, s) = magic(d);
        let wide = Reg::<L>::phys(z);
        self.f.cv::<I, L>(wide, n);
        self.f.mul(wide, wide, i64::from(m));
        self.f.rsh(wide, wide, 32);
        self.f.cv::<L, I>(q, wide);
        if m < 0 {
            self.f.add(q, q, n);
        }
        if s > 0 {
            self.f.rsh(q, q, s);
        }
        // Plus one when negative: truncation toward zero.
        let t = r(z);
        self.f.rsh(t.cast::<vcode::U>(), q.cast(), 31u32);
        self.f.add(q, q, t);
    }

    pub(super) fn unop(&mut self, op: Op) {
        let a = self.pop();
        if let Val::Const(c) = a {
            self.stack.push(Val::Const(match op {
                Op::Neg => c.wrapping_neg(),
                Op::I2B => i32::from(c as i8),
                Op::I2S => i32::from(c as i16),
                _ => c & 1,
            }));
            return;
        }
        let x = self.regs.x;
        let ra = self.reg_of(a, x);
        let rd = self.dest();
        match op {
            Op::Neg => self.f.neg(rd, ra),
            Op::I2B => {
                self.f.lsh(rd, ra, 24);
                self.f.rsh(rd, rd, 24);
            }
            Op::I2S => {
                self.f.lsh(rd, ra, 16);
                self.f.rsh(rd, rd, 16);
            }
            _ => self.f.and(rd, ra, 1),
        }
        self.push_result(rd);
    }

    /// The bounds check of `a[i]` (which also catches `null`); leaves the
    /// data address in `Z`. Returns the index register, or `None` for a
    /// constant index.
    pub(super) fn element(&mut self, a: Val, i: Val) -> (Option<R>, i32) {
        let (x, y, z) = (self.regs.x, self.regs.y, self.regs.z);
        let (ri, ci) = match i {
            Val::Const(c) => (None, c),
            v => (Some(self.reg_of(v, y)), 0),
        };
        // What this block already knows of an array in a local.
        let local = match a {
            Val::Slot(n) if n < self.max_locals => Some(usize::from(n)),
            _ => None,
        };
        let known = local.and_then(|n| self.facts[n]);
        if let Some(fact) = known
            && (ri.is_some() && fact.has_len || ri.is_none() && ci >= 0 && ci <= fact.checked)
        {
            let checked = match ri {
                None => true,
                Some(ri) => {
                    // The length, cached, against the index.
                    let ra = self.reg_of(a, x);
                    let stub = self.stub(
                        SiteKind::Array,
                        [
                            Some(Rec::Reg(ra.num())),
                            Some(Rec::Reg(ri.num())),
                            Some(Rec::Reg(z)),
                        ],
                    );
                    self.f.ld_local(r(z), self.fact_len[fact.slot]);
                    self.f
                        .bge(ri.cast::<vcode::U>(), r(z).cast::<vcode::U>(), stub);
                    true
                }
            };
            if checked {
                let n = local.unwrap_or(0) as u16;
                if ri.is_some() || self.z_holds != ZHolds::Data(n) {
                    self.f.ld_local(p(z), self.fact_ptr[fact.slot]);
                }
                self.z_holds = ZHolds::Data(n);
                return (ri, ci);
            }
        }
        self.z_holds = ZHolds::Nothing;
        let ra = self.reg_of(a, x);
        let rec_i = match ri {
            Some(ri) => Rec::Reg(ri.num()),
            None => Rec::Const(ci),
        };
        let stub = self.stub(
            SiteKind::Array,
            [Some(Rec::Reg(ra.num())), Some(rec_i), Some(Rec::Reg(z))],
        );
        // The directory's base in Y when the index does not need it.
        let base = if ri.is_some_and(|ri| ri.num() == y) {
            z
        } else {
            y
        };
        let dir = self.ld_base(base, Base::Dir);
        // Z = the length (entry of handle h at dir + 8h).
        self.f.ldx(r(z), Ty::I, dir, ix(ra), 8, DIR_LEN);
        let len = r(z).cast::<vcode::U>();
        match ri {
            Some(ri) => self.f.bge(ri.cast::<vcode::U>(), len, stub),
            None => self.f.ble(len, Operand::Imm(i64::from(ci as u32)), stub),
        }
        // Kept only if the block reads the local again.
        let local = local.filter(|&n| self.read_again(n as u16));
        let slot = local.map(|n| self.fact_slot(n));
        if let (Some(k), Some(_)) = (slot, ri) {
            self.f.st_local(r(z), self.fact_len[k]);
        }
        let dir = if base == z {
            self.ld_base(z, Base::Dir)
        } else {
            dir
        };
        self.f.ldx(p(z), Ty::P, dir, ix(ra), 8, DIR_DATA);
        if let (Some(n), Some(k)) = (local, slot) {
            self.f.st_local(p(z), self.fact_ptr[k]);
            let checked = match ri {
                None => ci.max(known.map_or(-1, |f| f.checked)),
                Some(_) => known.map_or(-1, |f| f.checked),
            };
            self.facts[n] = Some(Fact {
                slot: k,
                checked,
                has_len: ri.is_some() || known.is_some_and(|f| f.has_len),
            });
            self.z_holds = ZHolds::Data(n as u16);
        }
        (ri, ci)
    }

    /// Whether local `n` is read again later in the current block (within
    /// a few dozen ops), so that a fact about it can pay for its stores.
    pub(super) fn read_again(&self, n: u16) -> bool {
        let from = self.op_index + 1;
        let to = self.block_end.min(from + 48).min(self.code.len());
        self.code.get(from..to).is_some_and(|ops| {
            ops.iter().any(|&o| {
                let (parts, k) = expand(o);
                parts[..k].contains(&Op::Load(n))
            })
        })
    }

    /// The cache slot (tmp locals for the data address and length) of the
    /// array in local `n`.
    pub(super) fn fact_slot(&mut self, n: usize) -> usize {
        if let Some(f) = self.facts[n] {
            return f.slot;
        }
        let used: Vec<usize> = self.facts.iter().flatten().map(|f| f.slot).collect();
        let k = (0..).find(|k| !used.contains(k)).unwrap_or(0);
        while self.fact_ptr.len() <= k {
            let (pl, ll) = (self.f.local(), self.f.local());
            self.fact_ptr.push(pl);
            self.fact_len.push(ll);
        }
        k
    }

    /// Forgets what is known of arrays and the locals' range facts
    /// ([`Compiler::le`]), at a block start or a call (which may reuse the
    /// cache slots).
    pub(super) fn forget(&mut self) {
        self.z_holds = ZHolds::Nothing;
        self.facts.iter_mut().for_each(|f| *f = None);
        self.le.iter_mut().for_each(|b| *b = None);
    }

    pub(super) fn array_load(&mut self, mem: Ty, scale: u8) {
        let i = self.pop();
        let a = self.pop();
        let (ri, ci) = self.element(a, i);
        let data = p(self.regs.z);
        let rd = self.dest();
        match ri {
            Some(ri) => self.f.ldx(rd, mem, data, ix(ri), scale, 0),
            None => {
                let off = i64::from(ci) * i64::from(scale);
                match mem {
                    Ty::C => self.f.ldc(rd, data, off),
                    Ty::S => self.f.lds(rd, data, off),
                    _ => self.f.ld(rd, data, off),
                }
            }
        }
        self.push_result(rd);
    }

    pub(super) fn array_store(&mut self, mem: Ty, scale: u8, boolean_mask: bool) {
        let v = self.pop();
        let mut i = self.pop();
        let mut a = self.pop();
        let (x, z, w) = (self.regs.x, self.regs.z, self.regs.w);
        // A `bastore` keeps `v & mask` (the entry's store mask: 1 for a
        // boolean[], -1 otherwise), computed into W first; an array or index
        // held in W moves to its (now free) stack home before that.
        let masked = if boolean_mask {
            self.z_holds = ZHolds::Nothing;
            let at = self.stack.len();
            for (val, j) in [(&mut a, at), (&mut i, at + 1)] {
                if *val == Val::W {
                    let s = self.pos_slot(j);
                    self.put(s, Val::W);
                    *val = Val::Slot(s);
                }
            }
            self.flush_w_except(v);
            let ra = self.reg_of(a, x);
            let dir = self.ld_base(z, Base::Dir);
            self.f.ldx(r(z), Ty::C, dir, ix(ra), 8, DIR_MASK);
            let rv = self.reg_of(v, w);
            self.f.and(r(w), rv, r(z));
            true
        } else {
            false
        };
        let (ri, ci) = self.element(a, i);
        let data = p(z);
        let rv = if masked { r(w) } else { self.reg_of(v, x) };
        match ri {
            Some(ri) => self.f.stx(rv, mem, data, ix(ri), scale, 0),
            None => {
                let off = i64::from(ci) * i64::from(scale);
                match mem {
                    Ty::C => self.f.stc(rv, data, off),
                    Ty::S => self.f.sts(rv, data, off),
                    _ => self.f.st(rv, data, off),
                }
            }
        }
    }

    /// Flushes `W` unless it is the popped value `v`.
    pub(super) fn flush_w_except(&mut self, v: Val) {
        if v != Val::W {
            self.flush_w();
        }
    }

    pub(super) fn cond_branch(&mut self, c: Cond, two: bool, t: u32, back: bool, labels: &[Label]) {
        let (b, a) = if two {
            let b = self.pop();
            (b, self.pop())
        } else {
            (Val::Const(0), self.pop())
        };
        // The operands are above the rest of the stack, so syncing the rest
        // writes none of their homes (and never W); it may use X, so the
        // operands are loaded after it.
        let (x, y) = (self.regs.x, self.regs.y);
        let (c, a, b) = match (a, b) {
            (Val::Const(p), Val::Const(q)) => {
                self.sync();
                if c.eval(p, q) {
                    if back {
                        self.charge();
                    }
                    self.f.jmp(labels[t as usize]);
                }
                return;
            }
            (Val::Const(_), _) => (c.swap(), b, a),
            _ => (c, a, b),
        };
        self.sync();
        // What the fall-through knows of a local tested against a
        // constant (`Compiler::le`): nothing where the branch's target is
        // the next op itself (an empty `if`), which both ways reach, and
        // which `is_target` does not mark (a successor `i + 1` is the
        // fall-through), so `forget` does not run there.
        if let (Val::Slot(n), Val::Const(k)) = (a, b)
            && t as usize != self.op_index + 1
        {
            let bound = match c.not() {
                Cond::Le | Cond::Eq => Some(k),
                Cond::Lt => k.checked_sub(1),
                _ => None,
            };
            if let (Some(bound), Some(le)) = (bound, self.le.get_mut(usize::from(n))) {
                *le = Some(le.map_or(bound, |old| old.min(bound)));
            }
        }
        let ra = self.reg_of(a, x);
        let rb = self.opnd(b, y);
        let target = labels[t as usize];
        if back && self.metered {
            let skip = self.f.genlabel();
            self.bcond(c.not(), ra, rb, skip);
            self.charge();
            self.f.jmp(target);
            self.f.label(skip);
        } else {
            self.bcond(c, ra, rb, target);
        }
    }

    pub(super) fn bcond(&mut self, c: Cond, a: R, b: Operand<I>, l: Label) {
        match c {
            Cond::Eq => self.f.beq(a, b, l),
            Cond::Ne => self.f.bne(a, b, l),
            Cond::Lt => self.f.blt(a, b, l),
            Cond::Ge => self.f.bge(a, b, l),
            Cond::Gt => self.f.bgt(a, b, l),
            Cond::Le => self.f.ble(a, b, l),
        }
    }

    pub(super) fn switch(&mut self, k: u32, labels: &[Label]) {
        let key = self.pop();
        self.sync();
        let x = self.regs.x;
        // The key in its home's register, or loaded into X: the sync above
        // wrote only homes of other positions.
        let rk = self.reg_of(key, x);
        let Some(sw) = self.prog.switches.get(k as usize) else {
            return;
        };
        match sw {
            Switch::Table {
                low,
                targets,
                default,
            } => {
                // The index `key - low` (wrapping) in Y, compared unsigned
                // with the table's length; a table from 0 compares the key
                // itself and zero-extends it into Y.
                let y = self.regs.y;
                let idx = if *low == 0 {
                    rk
                } else {
                    self.f.sub(r(y), rk, *low);
                    r(y)
                };
                self.f.bge(
                    idx.cast::<vcode::U>(),
                    Operand::Imm(targets.len() as i64),
                    labels[*default as usize],
                );
                let ul = Reg::<UL>::phys(y);
                self.f.cv::<vcode::U, UL>(ul, idx.cast());
                let ls: Vec<Label> = targets.iter().map(|&t| labels[t as usize]).collect();
                self.f.jump_table(ul, &ls);
            }
            Switch::Lookup {
                keys,
                targets,
                default,
            } => {
                self.lookup(rk, keys, targets, labels);
                self.f.jmp(labels[*default as usize]);
            }
        }
    }

    /// A binary search over sorted keys, linear below 8.
    pub(super) fn lookup(&mut self, rk: R, keys: &[i32], targets: &[u32], labels: &[Label]) {
        if keys.len() <= 8 {
            for (&k, &t) in keys.iter().zip(targets) {
                self.f.beq(rk, k, labels[t as usize]);
            }
            return;
        }
        let mid = keys.len() / 2;
        let high = self.f.genlabel();
        let next = self.f.genlabel();
        self.f.bge(rk, keys[mid], high);
        self.lookup(rk, &keys[..mid], &targets[..mid], labels);
        self.f.jmp(next);
        self.f.label(high);
        self.lookup(rk, &keys[mid..], &targets[mid..], labels);
        self.f.label(next);
    }

    /// Saves the register homes that must survive a call: locals, and the
    /// entries below the arguments (already in their own homes).
    pub(super) fn saved_homes(&self, below: usize) -> Vec<(u8, i32)> {
        let mut out = Vec::new();
        let n = usize::from(self.max_locals) + below;
        for s in 0..n {
            if let Home::Reg(h) = self.homes[s] {
                out.push((h, 4 * s as i32));
            }
        }
        out
    }

    /// Stores (`save`) or reloads the register homes `saved_homes` names.
    pub(super) fn move_homes(&mut self, homes: &[(u8, i32)], save: bool) {
        for &(h, o) in homes {
            if save {
                self.f.st(r(h), self.regs.fp, i64::from(o));
            } else {
                self.f.ld(r(h), self.regs.fp, i64::from(o));
            }
        }
    }

    /// The synced entries from stack position `first` up (a call's
    /// arguments) into their frame slots, where the callee reads them.
    pub(super) fn args_to_memory(&mut self, first: usize) {
        for j in first..self.stack.len() {
            let s = self.pos_slot(j);
            if let Home::Reg(h) = self.home(s) {
                self.f.st(r(h), self.regs.fp, 4 * i64::from(s));
            }
        }
    }

    pub(super) fn call(&mut self, m: u16) {
        let prog = self.prog;
        let Some(Some(callee)) = prog.funcs.get(usize::from(m)) else {
            return;
        };
        let info = &prog.info.methods[usize::from(m)];
        let nargs = info.arg_slots();
        self.flush_w();
        self.charge();
        let (x, y, z) = (self.regs.x, self.regs.y, self.regs.z);
        // Depth.
        let deep = self.stub(SiteKind::Depth, [None; 3]);
        if !self.uses.calls {
            // `Uses::of` saw every call, so this cannot happen; if it did,
            // the depth counter was never set up and the call must not run.
            debug_assert!(false, "a call Uses::of did not see");
            self.f.jmp(deep);
            return;
        }
        let d = Reg::<L>::phys(y);
        self.f.ld_local(d, self.locals.depth);
        self.f.ble(d, 0, deep);
        let first = self.stack.len() - nargs;
        let inline = match *callee.code {
            [Op::Return] => Some(None),
            [Op::Const(c), Op::ReturnValue] => Some(Some(Val::Const(c))),
            _ => None,
        };
        if inline.is_none() {
            self.f.sub(d, d, 1);
            self.f.st_local(d, self.locals.depth);
        }
        // A null receiver.
        if callee.has_receiver {
            let recv = self.stack[first];
            let npe = self.stub(SiteKind::Null, [None; 3]);
            match recv {
                Val::Const(0) => self.f.jmp(npe),
                Val::Const(_) => {}
                v => {
                    let rr = self.reg_of(v, x);
                    self.f.beq(rr, 0, npe);
                }
            }
        }
        // The frame stack: the callee's frame starts at the arguments.
        let off = i64::from(self.max_locals) + first as i64;
        let need = i64::from(callee.max_locals) + i64::from(callee.max_stack);
        if off + need > i64::from(self.frame) {
            let end = self.ld_base(z, Base::FramesEnd);
            let top = p(x);
            self.f.add(top, self.regs.fp, 4 * (off + need));
            self.f.bgt(top.cast::<UL>(), end.cast::<UL>(), deep);
        }
        // A method that only returns a constant (or nothing) runs in place:
        // the checks above are all that a call of it can do.
        if let Some(value) = inline {
            self.stack.truncate(first);
            if let Some(v) = value {
                self.stack.push(v);
            }
            return;
        }
        // Everything into its home; the arguments into memory.
        self.sync();
        let saves = self.saved_homes(first);
        self.move_homes(&saves, true);
        self.args_to_memory(first);
        let fp = self.regs.fp;
        self.f.add(fp, fp, 4 * off);
        self.f.jal(self.entries[usize::from(m)]);
        self.forget();
        self.f.sub(fp, fp, 4 * off);
        self.f.ld_local(d, self.locals.depth);
        self.f.add(d, d, 1);
        self.f.st_local(d, self.locals.depth);
        self.move_homes(&saves, false);
        self.stack.truncate(first);
        if info.sig.ret.is_some() {
            let rd = self.dest();
            if rd.num() != x {
                self.f.mov(rd, r(x));
            }
            self.push_result(rd);
        }
    }

    /// A return, with the value (if any) in `X`: to the calling method, or,
    /// in a method compiled at its dispatch target ([`host_only`]), to the
    /// host as the call stub does: the fuel left stored in the context,
    /// status 0 (a value-returning method at its dispatch target stores its
    /// value where it is, [`Compiler::ret_to_host`], before it gets here).
    pub(super) fn ret(&mut self) {
        if !self.direct[usize::from(self.method)] {
            self.f.ret_link();
            return;
        }
        self.ret_to_host(None);
    }

    /// A method compiled at its dispatch target ([`host_only`]) returns
    /// `v` (`None`: whatever X holds, a `void` method's) to the host: the
    /// fuel left stored, then status 0 in the result register and the
    /// value in [`super::exec::VALUE_OUT`] (`Exit::ret_zero_with`: a
    /// constant as the move's immediate, a home or X, where it is), so
    /// that no value passes through X first and none is stored in the
    /// context for the host to read back (`exec::call_entry` takes both
    /// registers).
    fn ret_to_host(&mut self, v: Option<Val>) {
        let c = self.ctx(self.regs.z);
        self.f.st(self.regs.fuel, c, C_FUEL);
        let value = match v {
            Some(Val::Const(k)) => Operand::Imm(i64::from(k)),
            Some(v) => Operand::Reg(self.reg_of(v, self.regs.x)),
            None => Operand::Reg(self.x()),
        };
        self.f
            .ret_zero_with(value, Reg::phys(super::exec::VALUE_OUT));
    }

    /// A runtime call: the caller-saved homes saved and restored around it,
    /// the directory's copy in the native frame taken again after it where
    /// the context is in the frame (an allocation may move the directory;
    /// with the context in a register the directory is read through it at
    /// each use, [`Regs::ctx`]).
    ///
    /// The callee-saved homes stay in their registers: the runtime function
    /// keeps them (the C calling convention), and nothing it does reads the
    /// frame stack's slots of this method (a native reads its arguments,
    /// which [`Compiler::args_to_memory`] stored; the heap is collected
    /// only between invocations, so no slot is a root the runtime scans).
    pub(super) fn runtime(&mut self, func: usize, args: &[Arg], below: usize) -> Reg<L> {
        self.runtime_then(func, args, below, true)
    }

    /// Whether no op from the one after the current to the method's next
    /// return can read the heap's directory: a straight run of ops that
    /// touch only locals, constants, the operand stack and statics, ending
    /// in a return. A runtime call there need not take the directory again
    /// (nothing on that path reads the native frame's copy; a path that
    /// joins it later did not come through the call).
    pub(super) fn dir_dead_after(&self) -> bool {
        use Op::*;
        for &op in self.code.iter().skip(self.op_index + 1) {
            match op {
                Return | ReturnValue => return true,
                Nop | Const(_) | Load(_) | Store(_) | Iinc(..) | Pop | Add | Sub | Mul | And
                | Or | Xor | Shl | Shr | Ushr | Neg | GetStatic(_) | PutStatic(_) => {}
                _ => return false,
            }
        }
        false
    }

    /// [`Compiler::runtime`], taking the heap's directory again after the
    /// call (where the context is in the frame) only if `dir_after` (the
    /// caller knows it dead otherwise).
    pub(super) fn runtime_then(
        &mut self,
        func: usize,
        args: &[Arg],
        below: usize,
        dir_after: bool,
    ) -> Reg<L> {
        let mut saves = self.saved_homes(below);
        saves.retain(|&(h, _)| !callee_saved(h));
        self.move_homes(&saves, true);
        let x = Reg::<L>::phys(self.regs.x);
        self.f.call(x, Callee::Native(func), args);
        self.move_homes(&saves, false);
        // With the context in a register the directory is read through it
        // at each use, never from a copy, so there is nothing to take again.
        if self.uses.dir && dir_after && self.regs.ctx.is_none() {
            let z = p(self.regs.z);
            self.f.ld_local(z, self.locals.ctx);
            self.f.ld(z, z, C_DIR);
            self.f.st_local(z, self.locals.dir);
        }
        x
    }

    pub(super) fn call_native(&mut self, n: u16) {
        let Some(decl) = self.prog.natives.get(usize::from(n)) else {
            return;
        };
        let k = decl.params.len();
        let has_ret = decl.ret.is_some();
        self.flush_w();
        self.charge();
        // A constant length of an inline push, known before `sync` moves
        // it into its home.
        let len_const = match self.stack.last() {
            Some(&Val::Const(c)) => Some(c),
            _ => None,
        };
        let first = self.stack.len() - k;
        // The entries below the arguments into their homes, the same on
        // both paths of an inline form. The arguments of a form that
        // takes any stay where they are (a constant, a local's home) for
        // the form to read, and go into their homes on the rare path
        // only, where the call reads them from the frame.
        let inline_args = k > 0 && decl.fast != 0 && decl.inline.is_some();
        self.sync_below(if inline_args { first } else { self.stack.len() });
        // A native with an inline form ([`crate::Natives::set_inline`]):
        // the form in place, over the host's words; the call below is its
        // rare path.
        let inline = match decl.inline {
            Some(InlineForm::Int(i)) if k == 0 && has_ret && decl.fast != 0 => {
                Some(self.inline_int(i))
            }
            Some(InlineForm::PopU32) if k == 0 && has_ret && decl.fast != 0 => {
                Some(self.inline_pop())
            }
            _ => None,
        };
        let pushed = match decl.inline {
            // A constant length or tag the form never takes: the call
            // alone (the form's tests would send every call to it).
            Some(InlineForm::PushBytes)
                if k == 3
                    && !has_ret
                    && decl.fast != 0
                    && len_const.is_none_or(|c| (0..=RING_BYTES as i32).contains(&c))
                    && !matches!(self.stack[first + 1], Val::Const(t) if !(0..=0xffff).contains(&t)) =>
            {
                Some(self.inline_push(first, len_const))
            }
            Some(form @ (InlineForm::CopyOut | InlineForm::CopyIn))
                if k == 4 && !has_ret && decl.fast != 0 && len_const.is_none_or(|c| c >= 0) =>
            {
                Some(self.inline_copy(first, form == InlineForm::CopyOut))
            }
            // A constant length or channel the form never takes: the call
            // alone.
            Some(InlineForm::TailPush)
                if k == 4
                    && !has_ret
                    && decl.fast != 0
                    && len_const.is_none_or(|c| c >= 0)
                    && !matches!(self.stack[first + 2], Val::Const(c) if !(0..=0xffff).contains(&c)) =>
            {
                Some(self.inline_tail(first))
            }
            _ => None,
        };
        self.sync();
        self.args_to_memory(first);
        // The arguments' address in W, free here (`flush_w` above, and every
        // entry synced): on x86-64 W is `rdx`, the call's third argument
        // register, so the address needs no move into it.
        let args_at = p(self.regs.w);
        self.f
            .add(args_at, self.regs.fp, 4 * i64::from(self.pos_slot(first)));
        let ctx = self.ctx(self.regs.z);
        let fail = self.stub(SiteKind::Runtime, [None; 3]);
        let shape = NativeShape::of(decl);
        // A native with a fast form ([`crate::FastNative`]) is called
        // through that form's entry, which takes the same arguments.
        let entry = if decl.fast != 0 {
            decl.fast
        } else {
            shape.entry()
        };
        let dir_after = !self.dir_dead_after();
        let res = self.runtime_then(
            entry,
            &[
                Arg::Reg(ctx.any()),
                Arg::Imm(Ty::L, i64::from(n)),
                Arg::Reg(args_at.any()),
                Arg::Imm(Ty::L, shape.bits()),
            ],
            first,
            dir_after,
        );
        self.f.beq_min(res, fail);
        self.stack.truncate(first);
        if let Some(done) = pushed {
            self.f.label(done);
        }
        if let Some((rd, done)) = inline {
            self.f.cv::<L, I>(rd, res);
            self.f.label(done);
            self.push_result(rd);
        } else if has_ret {
            let rd = self.dest();
            self.f.cv::<L, I>(rd, res);
            self.push_result(rd);
        }
    }

    /// The invocation's work count after an inline native moving `len`
    /// bytes (in `rl`) charges its units, one and one per 4 KiB (as
    /// `Io::try_charge` counts them), into `count`; to `rare` if that
    /// reaches the next clock reading (`words`' bound), where the native's
    /// ordinary form charges and reads the clock. `tmp` is clobbered;
    /// nothing is stored.
    fn units_after(&mut self, count: Reg<UL>, tmp: Reg<UL>, rl: R, words: Reg<P>, rare: Label) {
        self.f.rsh(count, ix(rl), 12);
        self.f.add(count, count, 1);
        self.f.ld(tmp, words, W_WORK);
        self.f.add(count, count, tmp);
        self.f.ld(tmp, words, W_BOUND);
        self.f.bge(count, tmp, rare);
    }

    /// The invocation's [`crate::HostWords`] (`Ctx::words`), loaded into
    /// `into`. Never null: where the host lends none they are `NO_WORDS`,
    /// whose `bound` of 0 fails every form's budget check, which comes
    /// before the form's first store; so no form tests for null.
    fn host_words(&mut self, into: u8) -> Reg<P> {
        let words = p(into);
        let c = self.ctx(into);
        self.f.ld(words, c, C_WORDS);
        words
    }

    /// An inline form's budget check for one unit: branches to `rare`
    /// unless `words.work + 1 < words.bound` (unsigned), and returns the
    /// count plus one in the first register of `(count, bound)`, not yet
    /// stored (the form stores it once nothing more can fail).
    fn one_unit_or(&mut self, words: Reg<P>, (count, bound): (u8, u8), rare: Label) -> Reg<UL> {
        let count = Reg::<UL>::phys(count);
        self.f.ld(count, words, W_WORK);
        self.f.add(count, count, 1);
        let bound = Reg::<UL>::phys(bound);
        self.f.ld(bound, words, W_BOUND);
        self.f.bge(count, bound, rare);
        count
    }

    /// The result's register of an inline form that leaves a value, and
    /// the register it loads the value into: after the sync before the
    /// form no entry is in `W`, so `dest` writes nothing. The value is
    /// loaded straight into the result's register unless that is a
    /// scratch register the forms use (X, Z or W; then Y, and the form
    /// moves it at its end): whatever it held is dead (a new stack entry's
    /// home, or a local the next op overwrites), and the rare path writes
    /// it again.
    fn inline_result(&mut self) -> (R, R) {
        let (x, y, z, w) = (self.regs.x, self.regs.y, self.regs.z, self.regs.w);
        let rd = self.dest();
        let v = if [x, z, w].contains(&rd.num()) {
            Reg::<I>::phys(y)
        } else {
            rd
        };
        (rd, v)
    }

    /// [`InlineForm::Int`]`(i)` in place: with `w` the invocation's
    /// [`crate::HostWords`] (`Ctx::words`), if
    /// `w.ints[i] >= 0` and `w.work + 1 < w.bound` (unsigned), counts the
    /// unit and leaves `w.ints[i]` in the result's register, then jumps to
    /// the returned label; otherwise it falls through to the out-of-line
    /// call the caller emits next (the rare path), which leaves its value
    /// in the same register just before that label. Nothing is written
    /// before the last check passes, so the rare path runs as if the
    /// inline form had not been tried.
    fn inline_int(&mut self, i: u8) -> (R, Label) {
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, z, w) = (self.regs.x, self.regs.z, self.regs.w);
        // The result's register (`inline_result`).
        let (rd, v) = self.inline_result();
        let words = self.host_words(z);
        self.f.ld(v, words, W_INTS + 4 * i64::from(i));
        self.f.blt(v, 0, rare);
        let count = self.one_unit_or(words, (x, w), rare);
        self.f.st(count, words, W_WORK);
        if rd.num() != v.num() {
            self.f.mov(rd, v);
        }
        self.f.jmp(done);
        self.f.label(rare);
        (rd, done)
    }

    /// The end of an inline form that took the entry at `slot` of a run
    /// the host lent (`run`: where its words are in the invocation's
    /// [`crate::HostWords`] at `words`): the run's next entry `step` bytes
    /// on, wrapping at its limit to its base, one fewer left in it, and
    /// the unit counted. Uses the scratch registers `a` and `b`.
    fn take_from_run(
        &mut self,
        words: Reg<P>,
        slot: Reg<P>,
        step: i64,
        run: LentRun,
        (a, b): (u8, u8),
    ) {
        let next = p(a);
        self.f.add(next, slot, step);
        let limit = p(b);
        self.f.ld(limit, words, run.limit);
        let kept = self.f.genlabel();
        self.f.bne(next, limit, kept);
        self.f.ld(next, words, run.base);
        self.f.label(kept);
        self.f.st(next, words, run.next);
        // One fewer left, one unit counted: each an add to the word in
        // memory (`MemAdd`), where a load, an add and a store were three.
        self.f.add_mem_imm(false, words, run.left as i32, -1);
        self.f.add_mem_imm(true, words, W_WORK as i32, 1);
    }

    /// [`InlineForm::PopU32`] in place: with `w` the invocation's
    /// [`crate::HostWords`], if `w.work + 1 < w.bound`
    /// (unsigned), the lent run has an entry (`w.queue.avail > 0`), and
    /// the entry `e` at `w.queue.next` (read once) is below
    /// `w.queue.below` (unsigned) and `e & w.queue.align == 0`, it moves
    /// `next` to the following entry (wrapping at the queue's limit),
    /// takes one from `avail`, counts the unit, leaves `e` in the result's
    /// register and jumps to the returned label. Otherwise it falls
    /// through to the call the caller emits next (the rare path), which
    /// leaves its value in the same register just before that label.
    /// Every check comes before the first store, so the rare path runs as
    /// if the form had not been tried (an invalid entry stays for the
    /// native to skip and count). Uses X, Z and W, and Y where the
    /// result's register is one of those.
    fn inline_pop(&mut self) -> (R, Label) {
        use vcode::U;
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, z, w) = (self.regs.x, self.regs.z, self.regs.w);
        // The result's register (`inline_result`).
        let (rd, v) = self.inline_result();
        let words = self.host_words(z);
        self.one_unit_or(words, (x, w), rare);
        let avail = Reg::<U>::phys(x);
        self.f.ld(avail, words, W_QUEUE_AVAIL);
        self.f.beq(avail, 0, rare);
        // The entry, read once: every check is on this copy.
        let slot = p(w);
        self.f.ld(slot, words, W_QUEUE_NEXT);
        let e = Reg::<U>::phys(v.num());
        self.f.ld(e, slot, 0);
        let below = Reg::<U>::phys(x);
        self.f.ld(below, words, W_QUEUE_BELOW);
        self.f.bge(e, below, rare);
        let align = Reg::<U>::phys(x);
        self.f.ld(align, words, W_QUEUE_ALIGN);
        self.f.and(align, align, e);
        self.f.bne(align, 0, rare);
        // Every check passed: take it.
        let queue = LentRun {
            next: W_QUEUE_NEXT,
            limit: W_QUEUE_LIMIT,
            base: W_QUEUE_BASE,
            left: W_QUEUE_AVAIL,
        };
        self.take_from_run(words, slot, 4, queue, (w, x));
        if rd.num() != v.num() {
            self.f.mov(rd, v);
        }
        self.f.jmp(done);
        self.f.label(rare);
        (rd, done)
    }

    /// [`InlineForm::PushBytes`] in place, for the native call whose three
    /// arguments `(array, tag, len)` are the stack's entries from `first`
    /// (where they are: a constant, a local's home or their own;
    /// `len_const` the length where it is a
    /// constant of `0..=RING_BYTES`): with `w` the invocation's
    /// [`crate::HostWords`], if `w.work + 1 < w.bound`,
    /// the lent run has a free slot, `len <= RING_BYTES` and `tag <= 0xffff`
    /// (unsigned: a negative one is huge), and the array's directory entry
    /// says bytes and at least `len` of them (`null`'s says neither), it
    /// writes the slot at `w.ring.next` (`len` bytes after its 8-byte
    /// header, then the header word `len | tag << 32 |
    /// `[`crate::RING_HEADER_SEALED`] with one
    /// release store: the seal last), moves `next` to the following slot (wrapping at
    /// the ring's limit), takes it from `room`, counts the unit and jumps
    /// to the returned label. Otherwise it falls through to the call the
    /// caller emits next (the rare path). Every check comes before the
    /// first store, so the rare path runs as if the form had not been
    /// tried. Uses X, Y, Z and W; the arguments are only read.
    fn inline_push(&mut self, first: usize, len_const: Option<i32>) -> Label {
        use vcode::U;
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, y, z, w) = (self.regs.x, self.regs.y, self.regs.z, self.regs.w);
        let (arr, tag, len) = (
            self.stack[first],
            self.stack[first + 1],
            self.stack[first + 2],
        );
        // The words, the budget and the lent run.
        let words = self.host_words(z);
        self.one_unit_or(words, (x, y), rare);
        let room = Reg::<U>::phys(x);
        self.f.ld(room, words, W_RING_ROOM);
        self.f.beq(room, 0, rare);
        // The length (kept in its home or W until the copy) and the tag.
        // A length in a local that a branch above bounds by `RING_BYTES`
        // (`Compiler::le`: StandardUnet's `if (length <= 56)`) needs no
        // test of its own here: that bound is signed, and a negative
        // length is, unsigned, at least 2^31, past every array's length,
        // so the array's check below sends it to the rare path before any
        // store, as this test would have.
        let proven = matches!(len, Val::Slot(n) if self
            .le
            .get(usize::from(n))
            .copied()
            .flatten()
            .is_some_and(|b| b <= RING_BYTES as i32));
        let rl = match len_const {
            Some(_) => None,
            None if proven => Some(self.reg_of(len, w)),
            None => {
                let rl = self.reg_of(len, w);
                self.f.bgt(
                    Reg::<U>::phys(rl.num()),
                    Operand::Imm(RING_BYTES as i64),
                    rare,
                );
                Some(rl)
            }
        };
        let rt = self.reg_of(tag, y);
        self.f.bgt(Reg::<U>::phys(rt.num()), 0xffff, rare);
        // The array: its entry's second word holds its length (bits
        // 0-31) and whether its elements are bytes (bits 40-47).
        // The entry goes into X where the array is in a home of its own
        // (X is then free), so that Y keeps the directory for the data
        // address below.
        let ra = self.reg_of(arr, x);
        let dir = self.ld_base(y, Base::Dir);
        let e_in_x = ra.num() != x;
        let e = Reg::<UL>::phys(if e_in_x { x } else { y });
        self.f.ldx(e, Ty::UL, dir, ix(ra), 8, DIR_LEN);
        match (rl, len_const) {
            (Some(rl), _) => self
                .f
                .bgt(Reg::<U>::phys(rl.num()), Reg::<U>::phys(e.num()), rare),
            (None, Some(c)) if c > 0 => {
                self.f
                    .blt(Reg::<U>::phys(e.num()), Operand::Imm(i64::from(c)), rare)
            }
            _ => {}
        }
        self.f.rsh(e, e, i64::from(DIR_BYTES_SHIFT));
        self.f.bne(e, 1, rare);
        // Every check passed: the writes.
        let dir = if e_in_x {
            dir
        } else {
            self.ld_base(y, Base::Dir)
        };
        let data = p(y);
        self.f.ldx(data, Ty::P, dir, ix(ra), 8, DIR_DATA);
        let slot = p(z);
        self.f.ld(slot, words, W_RING_NEXT);
        let t = Reg::<UL>::phys(x);
        match (rl, len_const) {
            (Some(rl), _) => {
                // `copy_down`: 16 or 8 bytes at a time, overlapping at
                // the start; under 8, byte by byte. Every load stays
                // inside the array's first `len` bytes.
                let n = Reg::<UL>::phys(w);
                if rl.num() != w {
                    self.f.mov(n, Reg::<UL>::phys(rl.num()));
                }
                let copied = self.f.genlabel();
                self.copy_down(data, slot, 8, n, t, copied);
                self.f.label(copied);
            }
            (None, Some(c)) => {
                // Unrolled: whole words, then the last piece overlapping.
                let c = i64::from(c);
                let piece = |f: &mut Func, at: i64, size: i64| match size {
                    8 => {
                        f.ld(t, data, at);
                        f.st(t, slot, 8 + at);
                    }
                    4 => {
                        f.ldu(t, data, at);
                        f.st(Reg::<U>::phys(t.num()), slot, 8 + at);
                    }
                    2 => {
                        f.ldus(t, data, at);
                        f.sts(t, slot, 8 + at);
                    }
                    _ => {
                        f.lduc(t, data, at);
                        f.stc(t, slot, 8 + at);
                    }
                };
                let size = [8, 4, 2, 1].into_iter().find(|&s| c >= s).unwrap_or(0);
                let mut at = 0;
                while size > 0 && at + size <= c {
                    piece(&mut self.f, at, size);
                    at += size;
                }
                if size > 0 && at < c {
                    piece(&mut self.f, c - size, size);
                }
            }
            (None, None) => {}
        }
        // The header word last, sealed: `len | tag << 32 |
        // RING_HEADER_SEALED` (byte 6, the host's `nbufs`, 0; byte 7, its
        // `sealed`, `RING_SEALED`), built as the high half `tag | seal`
        // (`seal` the seal's high half) shifted left by 32, one release
        // store after the bytes, so that a reader that sees byte 7 set
        // (with an acquire load) sees the whole slot. The copy used X and
        // W, and Y held the array's data; the tag and the length are read
        // again from where they are (a constant, a local's home, or the
        // frame: `call_native` flushed W, so neither is in W).
        //
        // Why sealing here is sound (the seal was the host's, when it took
        // the run back, before): a slot written here is never withdrawn
        // or written again. Every check comes before the first store, so
        // a push that stores completes; what follows it (a trap, the fuel
        // or time budget, a failing method, the run taken back by the
        // native's own push or at the invocation's end) keeps every slot
        // the pushes filled, and the host takes each back exactly once
        // ([`crate::RingWords::take`]); a run is lent only from the
        // producer's index, which counts every slot taken back, so no
        // slot filled and sealed is lent again before its consumer frees
        // it.
        let head = t;
        let seal = (crate::natives::RING_HEADER_SEALED >> 32) as u32;
        match tag {
            Val::Const(c) => self.f.set(head, u64::from(c as u32 | seal) << 32),
            _ => {
                let rt = self.reg_of(tag, x);
                self.f.add(
                    Reg::<U>::phys(x),
                    Reg::<U>::phys(rt.num()),
                    Operand::Imm(i64::from(seal)),
                );
                self.f.lsh(head, head, 32);
            }
        }
        match len_const {
            None => {
                let rl = self.reg_of(len, y);
                self.f.or(head, head, Reg::<UL>::phys(rl.num()));
            }
            Some(c) if c > 0 => self.f.or(head, head, i64::from(c)),
            Some(_) => {}
        }
        self.f.st_release(head, slot, 0);
        // The words again (Z now holds the slot): the run's next slot and
        // room, then the count.
        let words = self.host_words(x);
        let ring = LentRun {
            next: W_RING_NEXT,
            limit: W_RING_LIMIT,
            base: W_RING_BASE,
            left: W_RING_ROOM,
        };
        self.take_from_run(words, slot, RING_SLOT as i64, ring, (y, w));
        self.f.jmp(done);
        self.f.label(rare);
        done
    }

    /// Copies `n` bytes (`n` in its register, consumed) from `src` to
    /// `dst + disp`: from 16 bytes on, down from the end 16 bytes at a
    /// time (`Move16`), then the first 16 again (overlapping); from 8, the
    /// last 8 and the first 8 (overlapping); under 8, byte by byte. `t` is
    /// scratch. Every access stays inside the two ranges of `n` bytes,
    /// which the caller has checked; it jumps to `done` from the word
    /// paths and falls through from the byte loop (at `n == 0` too).
    ///
    /// Why 16 at a time: the standard applet's 40-byte messages take two
    /// rounds of 4 instructions and a last move of 2, where an 8-byte loop
    /// took five rounds of 5 and a last move of 2 (two copies per
    /// message). Why `n - 16` in the register
    /// during the rounds: the entry's test and each round's are then the
    /// `sub`'s borrow ([`vcode::ext::Countdown::sub_branch`]), 2 fewer per
    /// copy of 32 to 47 bytes; a copy under 16 bytes adds the 16 back (1).
    fn copy_down(
        &mut self,
        src: Reg<P>,
        dst: Reg<P>,
        disp: i32,
        n: Reg<UL>,
        t: Reg<UL>,
        done: Label,
    ) {
        let (restore, small, rounds, bytes_loop) = (
            self.f.genlabel(),
            self.f.genlabel(),
            self.f.genlabel(),
            self.f.genlabel(),
        );
        let end = self.f.genlabel();
        // `n - 16` is counted down, not `n`, so that the `sub`'s own borrow
        // is each test (`sub; jb`, `sub; jae`, no `cmp`): the rounds move
        // the 16 bytes at `n - 16`, which is the register now.
        self.f.sub_branch(n, 16, true, restore);
        self.f.label(rounds);
        self.f.move16(dst, disp, src, 0, Some(n));
        self.f.sub_branch(n, 16, false, rounds);
        self.f.move16(dst, disp, src, 0, None);
        self.f.jmp(done);
        self.f.label(restore);
        self.f.add(n, n, 16);
        self.f.blt(n, 8, small);
        self.f.ldx(t, Ty::UL, src, n, 1, -8);
        self.f.stx(t, Ty::UL, dst, n, 1, disp - 8);
        self.f.ld(t, src, 0);
        self.f.st(t, dst, disp);
        self.f.jmp(done);
        self.f.label(small);
        self.f.beq(n, 0, end);
        self.f.label(bytes_loop);
        self.f.sub(n, n, 1);
        self.f.ldx(t, Ty::UC, src, n, 1, 0);
        self.f.stx(t, Ty::UC, dst, n, 1, disp);
        self.f.bne(n, 0, bytes_loop);
        self.f.label(end);
    }

    /// [`InlineForm::CopyOut`] (`out`: area to array) or
    /// [`InlineForm::CopyIn`] in place, for the native call whose four
    /// arguments `(array, aoff, off, len)` are the stack's entries from
    /// `first` (where they are: a constant, a local's home or their own):
    /// with `w` the invocation's
    /// [`crate::HostWords`], if `w.work + 1 + len / 4096
    /// < w.bound` (unsigned), `off + len <= w.area.len` (in 64 bits, `off`
    /// and `len` zero-extended: a negative one is past every area, which is
    /// below 2^31), the array's directory entry says bytes (`null`'s
    /// does not), `aoff >= 0` and `aoff + len <=` the array's length (in 32
    /// bits, which cannot wrap: both are below 2^31), it counts the units,
    /// copies the `len` bytes (a loop up to `COPY_INLINE_MAX`, a call of
    /// [`rt_copy`] past it) and jumps to the returned label. Otherwise it
    /// falls through to the call the caller emits next (the rare path),
    /// whose native makes every check in its own order and reports the
    /// first that fails. Every check comes before the first store, so the
    /// rare path runs as if the form had not been tried. Uses X, Y, Z and
    /// W; the arguments are only read. A constant `aoff` (javac's `0`)
    /// is folded: no test of its sign, no add.
    fn inline_copy(&mut self, first: usize, out: bool) -> Label {
        use vcode::U;
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, y, z, w) = (self.regs.x, self.regs.y, self.regs.z, self.regs.w);
        let (arr, aoff, off, len) = (
            self.stack[first],
            self.stack[first + 1],
            self.stack[first + 2],
            self.stack[first + 3],
        );
        // The length (kept in its home or W until the copy). A negative
        // one is, zero-extended, at least 2^31: past every area (below),
        // so it needs no test of its own; until that check its units are
        // only compared, never counted.
        let rl = self.reg_of(len, w);
        // The words and the budget: the units a native moving `len`
        // bytes charges, one and one per 4 KiB.
        let words = self.host_words(z);
        let count = Reg::<UL>::phys(x);
        self.units_after(count, Reg::<UL>::phys(y), rl, words, rare);
        // The area's range, in 64 bits: a negative `off` is, zero-extended,
        // at least 2^31, past any lent area (`AreaWords` lends less), and
        // the sum of two values below 2^32 cannot wrap.
        let ro = self.reg_of(off, x);
        let end = Reg::<UL>::phys(x);
        self.f.add(end, ix(ro), ix(rl));
        let area = Reg::<UL>::phys(y);
        self.f.ld(area, words, W_AREA_LEN);
        self.f.bgt(end, area, rare);
        // The array: its entry's second word holds its length (bits
        // 0-31) and whether its elements are bytes (bits 40-47). The
        // entry goes into W where the length is in a home of its own (W
        // is then free until the copy), so that Y keeps the directory for
        // the data address below. Z keeps the words where `aoff` is the
        // constant 0 (javac's `doHtoLDMA(TxBuf, 0, ...)`), which needs no
        // register; otherwise it is free from here and the words are
        // loaded again below.
        let ra = self.reg_of(arr, x);
        let dir = self.ld_base(y, Base::Dir);
        let e_in_w = rl.num() != w;
        let e = Reg::<UL>::phys(if e_in_w { w } else { y });
        self.f.ldx(e, Ty::UL, dir, ix(ra), 8, DIR_LEN);
        let aend = Reg::<U>::phys(z);
        let aend = match aoff {
            Val::Const(0) => Reg::<U>::phys(rl.num()),
            Val::Const(c) if c > 0 => {
                self.f
                    .add(aend, Reg::<U>::phys(rl.num()), Operand::Imm(i64::from(c)));
                aend
            }
            aoff => {
                let rao = self.reg_of(aoff, z);
                self.f.blt(rao, 0, rare);
                self.f
                    .add(aend, Reg::<U>::phys(rao.num()), Reg::<U>::phys(rl.num()));
                aend
            }
        };
        self.f.bgt(aend, Reg::<U>::phys(e.num()), rare);
        self.f.rsh(e, e, i64::from(DIR_BYTES_SHIFT));
        self.f.bne(e, 1, rare);
        // Every check passed: the array's bytes at `aoff` (Y).
        let dir = if e_in_w {
            dir
        } else {
            self.ld_base(y, Base::Dir)
        };
        let at = Reg::<UL>::phys(y);
        self.bytes_at(at, dir, ra, aoff, z);
        // The units counted (nothing can fail from here on), then the
        // area's bytes at `off` (X).
        let (words, units) = if aoff == Val::Const(0) {
            (words, Reg::<UL>::phys(x))
        } else {
            (self.host_words(x), Reg::<UL>::phys(z))
        };
        self.f.rsh(units, ix(rl), 12);
        self.f.add(units, units, 1);
        self.f.add_mem_reg(true, words, W_WORK as i32, units);
        let base = Reg::<UL>::phys(x);
        self.f.ld(base, words, W_AREA_BASE);
        let ro = self.reg_of(off, z);
        self.f.add(base, base, ix(ro));
        let (src, dst) = if out { (p(x), p(y)) } else { (p(y), p(x)) };
        let rl = self.reg_of(len, w);
        let n = Reg::<UL>::phys(w);
        if rl.num() != w {
            self.f.mov(n, Reg::<UL>::phys(rl.num()));
        }
        // Up to `COPY_INLINE_MAX` bytes: `copy_down` (16 or 8 bytes at a
        // time from the end, overlapping at the start; under 8, byte by
        // byte). Every access stays inside the two checked ranges. Past
        // it, `rt_copy` (a `memcpy`), with the homes saved around it.
        let t = Reg::<UL>::phys(z);
        let long = self.f.genlabel();
        self.f.bgt(n, COPY_INLINE_MAX as i64, long);
        self.copy_down(src, dst, 0, n, t, done);
        self.f.jmp(done);
        self.f.label(long);
        let below = self.stack.len();
        self.runtime(
            rt_copy as *const () as usize,
            &[Arg::Reg(dst.any()), Arg::Reg(src.any()), Arg::Reg(n.any())],
            below,
        );
        self.f.jmp(done);
        self.f.label(rare);
        done
    }

    /// [`InlineForm::TailPush`] in place, for the tail-site native call
    /// whose four arguments `(array, off, chan, len)` are the stack's
    /// entries from `first` (where they are: a constant, a local's home or
    /// their own): with `w` the invocation's [`crate::HostWords`], if
    /// `chan`, zero-extended, is `w.tail.chan` (the channel lent: at most
    /// `0xffff`, so that this is also the native's range check),
    /// `w.work + 1 + len / 4096 < w.bound` (unsigned, `len` zero-extended),
    /// `off >= 0`, `off + len <=` the array's length (unsigned, in 32
    /// bits), the array's directory entry says bytes (`null`'s does not),
    /// `len <= w.tail.max_message` (in 64 bits, `len` zero-extended: a
    /// negative one is at least 2^31, past every `max_message`, so this
    /// is also the native's `len >= 0`; and a non-negative one with a
    /// non-negative `off` makes a sum below 2^32, so the range check
    /// above did not wrap), `w.tail.frames < w.tail.max_frames` and
    /// `w.tail.bytes + len <= w.tail.max_bytes` (64 bits), it counts the
    /// units, the frame and the bytes, records
    /// `(array, off, len)` in `w.tail`, lends no channel from then on (the
    /// high half of `w.tail.chan` set: no zero-extended `int` equals it)
    /// and jumps to the returned label. Otherwise it falls through to the
    /// call the caller emits next (the rare path), whose native makes
    /// every check in its own order and reports the first that fails.
    ///
    /// The checks are the native's (`txPush#tail`: the budget's count, the
    /// array, `len`, `off`, the range, the channel, `len` against the
    /// largest message, the frames, the bytes), in its order but for two:
    /// the channel first, so that while none is lent (a `doRx`, a message
    /// that goes as a frame) one load and compare send the call to the
    /// native; and the budget's count last, so that the count stays in a
    /// register for its store (3 instructions fewer). The order among them
    /// changes nothing: every one comes before the first store, and where
    /// one fails the native makes them all again in its order. Uses X, Y,
    /// Z and W; the arguments are only read.
    fn inline_tail(&mut self, first: usize) -> Label {
        use vcode::U;
        use vcode::ext::Exit;
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, y, z, w) = (self.regs.x, self.regs.y, self.regs.z, self.regs.w);
        let (arr, off, chan, len) = (
            self.stack[first],
            self.stack[first + 1],
            self.stack[first + 2],
            self.stack[first + 3],
        );
        let words = self.host_words(z);
        // The channel lent (`call_native` sends a constant outside
        // `0..=0xffff` to the call alone).
        let lent = Reg::<UL>::phys(y);
        self.f.ld(lent, words, W_TAIL_CHAN);
        match chan {
            Val::Const(c) => self.f.bne(lent, i64::from(c), rare),
            chan => {
                let rc = self.reg_of(chan, x);
                self.f.bne(ix(rc), lent, rare);
            }
        }
        // The length (kept in its home or W until its last use).
        let rl = self.reg_of(len, w);
        // The array: its entry's second word holds its length (bits
        // 0-31) and whether its elements are bytes (bits 40-47); only the
        // entry is needed (the message is recorded by its handle), so it
        // goes into Y over the directory.
        let ra = self.reg_of(arr, x);
        let dir = self.ld_base(y, Base::Dir);
        let e = Reg::<UL>::phys(y);
        self.f.ldx(e, Ty::UL, dir, ix(ra), 8, DIR_LEN);
        // `off + len` against the array's length; Z (the words) holds it
        // where `off` is not the constant 0 (javac's `txPush(TxBuf, 0,
        // ...)`), and the words are loaded again after.
        let aend = Reg::<U>::phys(z);
        let (aend, reload) = match off {
            Val::Const(0) => (Reg::<U>::phys(rl.num()), false),
            Val::Const(c) if c > 0 => {
                self.f
                    .add(aend, Reg::<U>::phys(rl.num()), Operand::Imm(i64::from(c)));
                (aend, true)
            }
            off => {
                let ro = self.reg_of(off, z);
                self.f.blt(ro, 0, rare);
                self.f
                    .add(aend, Reg::<U>::phys(ro.num()), Reg::<U>::phys(rl.num()));
                (aend, true)
            }
        };
        self.f.bgt(aend, Reg::<U>::phys(e.num()), rare);
        self.f.rsh(e, e, i64::from(DIR_BYTES_SHIFT));
        self.f.bne(e, 1, rare);
        let words = if reload { self.host_words(z) } else { words };
        // The largest message, which is also the native's test of `len >=
        // 0`: a negative `len`, zero-extended, is at least 2^31, past
        // every `max_message` (`TailWords`). Then the push budgets (64
        // bits: `len` is below 2^31 here).
        let t = Reg::<UL>::phys(x);
        let u = Reg::<UL>::phys(y);
        self.f.ld(u, words, W_TAIL_MAX_MESSAGE);
        self.f.bgt(ix(rl), u, rare);
        self.f.ld(t, words, W_TAIL_FRAMES);
        self.f.ld(u, words, W_TAIL_MAX_FRAMES);
        self.f.bge(t, u, rare);
        self.f.ld(t, words, W_TAIL_BYTES);
        self.f.add(t, t, ix(rl));
        self.f.ld(u, words, W_TAIL_MAX_BYTES);
        self.f.bgt(t, u, rare);
        // A frame's room lent (`FrameWords`): the push is eager, and writes
        // its frame (`inline_frame`) instead of recording the message.
        let eager = self.f.genlabel();
        self.f.ld(t, words, W_FRAME_AT);
        self.f.bne(t, 0, eager);
        // The budget last, so that its count stays in a register for its
        // store: the units a native moving `len` bytes charges, one and
        // one per 4 KiB.
        let count = Reg::<UL>::phys(y);
        self.units_after(count, Reg::<UL>::phys(x), rl, words, rare);
        // Every check passed: the counts, the record, and no channel lent
        // from here on.
        self.f.add_mem_reg(true, words, W_TAIL_BYTES as i32, ix(rl));
        self.f.add_mem_imm(true, words, W_TAIL_FRAMES as i32, 1);
        self.f.st(count, words, W_WORK);
        self.f.st(rl, words, W_TAIL_LEN);
        match off {
            Val::Const(c) => self.f.st_imm32(words, W_TAIL_OFF as i32, c),
            off => {
                let ro = self.reg_of(off, y);
                self.f.st(ro, words, W_TAIL_OFF);
            }
        }
        let ra = self.reg_of(arr, x);
        self.f.st(ra, words, W_TAIL_ARRAY);
        self.f.st_imm32(words, W_TAIL_CHAN as i32 + 4, -1);
        self.f.jmp(done);
        self.f.label(eager);
        self.inline_frame(first, words, rl, rare, done);
        self.f.label(rare);
        done
    }

    /// The address of a `byte[]`'s element `off` into `into`: the array's
    /// data (its directory entry, `ra` its handle, `dir` the directory)
    /// plus `off`, for an inline form whose checks have passed (`off >= 0`
    /// and in range). A constant offset is added as an immediate, another
    /// from its register (loaded into `scratch` if it has none).
    fn bytes_at(&mut self, into: Reg<UL>, dir: Reg<P>, ra: R, off: Val, scratch: u8) {
        self.f.ldx(into, Ty::P, dir, ix(ra), 8, DIR_DATA);
        match off {
            Val::Const(0) => {}
            Val::Const(c) if c > 0 => self.f.add(into, into, i64::from(c)),
            off => {
                let ro = self.reg_of(off, scratch);
                self.f.add(into, into, ix(ro));
            }
        }
    }

    /// The eager end of [`InlineForm::TailPush`] (`inline_tail`), reached
    /// with every check of the deferring form passed and nothing written,
    /// where the host lent a frame's room ([`crate::FrameWords`]): with
    /// `w` the words (in `words`) and `len` in `rl`, if `len <=
    /// w.frame.room` (the room after a header) and the budget's count
    /// stays below its bound, it counts the units, the frame and the bytes
    /// as the deferring form does, records the frame's length
    /// (`w.frame.wrote`), lends no channel from then on, and writes the
    /// frame at `w.frame.at`: the template's [`crate::FRAME_HEADER`]
    /// bytes, the three length fields patched as unet's
    /// `frame::patch_lengths_from` patches them (big-endian; the IPv4
    /// checksum by RFC 1624 from the template's sum), then the message
    /// (`copy_down` up to `COPY_INLINE_MAX` bytes, `rt_copy` past it).
    /// Then it jumps to `done`. If either check fails it goes to `rare`
    /// having written nothing. Uses X, Y, Z and W; the arguments are only
    /// read.
    fn inline_frame(&mut self, first: usize, words: Reg<P>, rl: R, rare: Label, done: Label) {
        use crate::natives::{
            FRAME_HEADER, FRAME_IP, FRAME_IP_CSUM, FRAME_IP_TOTAL_LEN, FRAME_UDP, FRAME_UDP_LEN,
        };
        use vcode::U;
        use vcode::ext::{Bswap, Exit};
        let (x, y, z, w) = (self.regs.x, self.regs.y, self.regs.z, self.regs.w);
        let (arr, off, len) = (
            self.stack[first],
            self.stack[first + 1],
            self.stack[first + 3],
        );
        // The room: `len` is below 2^31 here (the largest message's check).
        let room = Reg::<UL>::phys(y);
        self.f.ld(room, words, W_FRAME_ROOM);
        self.f.bgt(ix(rl), room, rare);
        let count = Reg::<UL>::phys(y);
        self.units_after(count, Reg::<UL>::phys(x), rl, words, rare);
        // Every check passed: the counts, the frame's length, and no
        // channel lent from here on. The host reads them once the
        // invocation has returned, so their order with the frame's bytes
        // is free.
        self.f.add_mem_reg(true, words, W_TAIL_BYTES as i32, ix(rl));
        self.f.add_mem_imm(true, words, W_TAIL_FRAMES as i32, 1);
        self.f.st(count, words, W_WORK);
        let t = Reg::<UL>::phys(x);
        self.f.add(t, ix(rl), FRAME_HEADER as i64);
        self.f.st(t, words, W_FRAME_WROTE);
        self.f.st_imm32(words, W_TAIL_CHAN as i32 + 4, -1);
        // The header: the template's bytes (three moves of 16 and one of
        // 16 overlapping the third, 54 bytes), into the frame at Z (the
        // words are not needed after these loads).
        let sum = Reg::<UL>::phys(y);
        self.f.ld(sum, words, W_FRAME_SUM);
        let tpl = p(x);
        self.f.ld(tpl, words, W_FRAME_TEMPLATE);
        let dst = p(z);
        self.f.ld(dst, words, W_FRAME_AT);
        const _: () = assert!(FRAME_HEADER > 32 && FRAME_HEADER <= 64);
        for at in [0, 16, 32, FRAME_HEADER as i32 - 16] {
            self.f.move16(dst, at, tpl, at, None);
        }
        // The lengths, as `patch_lengths_from`: the IPv4 total length's
        // low 16 bits, the checksum `!fold(sum + total)` (the sum is below
        // 2^17, so 64 bits never carry out and two folds make 16 bits),
        // the UDP length's low 16 bits; each stored big-endian.
        let tot = Reg::<U>::phys(x);
        self.f.add(
            tot,
            Reg::<U>::phys(rl.num()),
            Operand::Imm((FRAME_HEADER - FRAME_IP) as i64),
        );
        self.f.and(tot, tot, Operand::Imm(0xffff));
        self.f.add(sum, sum, Reg::<UL>::phys(x));
        self.f.bswap16(tot, tot);
        self.f.sts(tot, dst, FRAME_IP_TOTAL_LEN as i64);
        let t = Reg::<UL>::phys(x);
        for _ in 0..2 {
            self.f.rsh(t, sum, 16);
            self.f.and(sum, sum, 0xffff);
            self.f.add(sum, sum, t);
        }
        self.f.com(sum, sum);
        self.f.bswap16(sum, sum);
        self.f.sts(sum, dst, FRAME_IP_CSUM as i64);
        let udp = Reg::<U>::phys(x);
        self.f.add(
            udp,
            Reg::<U>::phys(rl.num()),
            Operand::Imm((FRAME_HEADER - FRAME_UDP) as i64),
        );
        self.f.bswap16(udp, udp);
        self.f.sts(udp, dst, FRAME_UDP_LEN as i64);
        // The message: the array's bytes at `off` (X) after the header.
        let ra = self.reg_of(arr, x);
        let dir = self.ld_base(y, Base::Dir);
        let src = Reg::<UL>::phys(x);
        self.bytes_at(src, dir, ra, off, y);
        let rl = self.reg_of(len, w);
        let n = Reg::<UL>::phys(w);
        if rl.num() != w {
            self.f.mov(n, Reg::<UL>::phys(rl.num()));
        }
        let long = self.f.genlabel();
        self.f.bgt(n, COPY_INLINE_MAX as i64, long);
        self.copy_down(p(x), dst, FRAME_HEADER as i32, n, Reg::<UL>::phys(y), done);
        self.f.jmp(done);
        self.f.label(long);
        self.f.add(dst, dst, FRAME_HEADER as i64);
        let below = self.stack.len();
        self.runtime(
            rt_copy as *const () as usize,
            &[Arg::Reg(dst.any()), Arg::Reg(p(x).any()), Arg::Reg(n.any())],
            below,
        );
        self.f.jmp(done);
    }

    pub(super) fn new_array(&mut self, prim: Prim) {
        let n = self.pop();
        self.flush_w_except(n);
        let y = self.regs.y;
        let rn = self.reg_of(n, y);
        let neg = self.stub(SiteKind::NegSize, [Some(Rec::Reg(rn.num())), None, None]);
        self.f.blt(rn, 0, neg);
        let len = Reg::<L>::phys(y);
        self.f.cv::<I, L>(len, rn);
        self.sync();
        let below = self.stack.len();
        let ctx = self.ctx(self.regs.z);
        let code = match prim {
            Prim::Boolean => 0,
            Prim::Byte => 1,
            Prim::Short => 2,
            Prim::Int => 3,
        };
        let fail = self.stub(SiteKind::Runtime, [None; 3]);
        let res = self.runtime(
            rt_newarray as *const () as usize,
            &[
                Arg::Reg(ctx.any()),
                Arg::Imm(Ty::L, code),
                Arg::Reg(len.any()),
            ],
            below,
        );
        self.f.blt(res, 0, fail);
        let rd = self.dest();
        self.f.cv::<L, I>(rd, res);
        self.push_result(rd);
    }

    pub(super) fn field(&mut self, k: u16, put: bool, instance: bool) {
        let (x, y, z) = (self.regs.x, self.regs.y, self.regs.z);
        let v = if put { Some(self.pop()) } else { None };
        if instance {
            let o = self.pop();
            let npe = self.stub(SiteKind::Null, [None; 3]);
            match o {
                Val::Const(0) => self.f.jmp(npe),
                Val::Const(_) => {}
                o => {
                    let ro = self.reg_of(o, x);
                    self.f.beq(ro, 0, npe);
                }
            }
        }
        // Z keeps the base between field accesses of one kind with only
        // arithmetic and locals between them (see `op`).
        let want = if instance {
            ZHolds::Fields
        } else {
            ZHolds::Statics
        };
        let base = if self.z_holds == want {
            p(z)
        } else {
            let b = if instance {
                Base::Fields
            } else {
                Base::Statics
            };
            self.ld_base(z, b)
        };
        self.z_holds = want;
        let off = 4 * i64::from(k);
        match v {
            Some(v) => {
                let rv = self.reg_of(v, y);
                self.f.st(rv, base, off);
            }
            None => {
                let rd = self.dest();
                self.f.ld(rd, base, off);
                self.push_result(rd);
            }
        }
    }

    /// Stack manipulation: the new entries from the old ones, with values
    /// that change position copied through the native frame's tmp locals.
    pub(super) fn shuffle(&mut self, pops: usize, order: &[usize]) {
        self.flush_w();
        let base = self.stack.len() - pops;
        let old: Vec<Val> = self.stack[base..].to_vec();
        let x = self.regs.x;
        let mut moved = [None; 4];
        for (i, &v) in old.iter().enumerate() {
            if let Val::Slot(s) = v
                && s >= self.max_locals
            {
                let rv = self.reg_of(v, x);
                self.f.st_local(rv, self.locals.tmp[i]);
                moved[i] = Some(i);
            }
        }
        self.stack.truncate(base);
        for &i in order {
            let j = self.stack.len();
            let s = self.pos_slot(j);
            match (old[i], moved[i]) {
                (_, Some(t)) => match self.home(s) {
                    Home::Reg(h) => self.f.ld_local(r(h), self.locals.tmp[t]),
                    Home::Mem(o) => {
                        self.f.ld_local(r(x), self.locals.tmp[t]);
                        self.f.st(r(x), self.regs.fp, i64::from(o));
                    }
                },
                (v, None) => {
                    self.stack.push(v);
                    continue;
                }
            }
            self.stack.push(Val::Slot(s));
        }
    }

    pub(super) fn op(&mut self, op: Op, labels: &[Label]) -> bool {
        use Op::*;
        // Which ops leave Z alone: field and array accesses (which set it),
        // and arithmetic and locals, which use only X, Y, W and homes.
        let z_holds = self.z_holds;
        self.z_holds = ZHolds::Nothing;
        if matches!(
            op,
            Load(_)
                | Const(_)
                | Store(_)
                | Iinc(..)
                | Add
                | Sub
                | Mul
                | And
                | Or
                | Xor
                | Shl
                | Shr
                | Ushr
                | Neg
                | Pop
                | IALoad
                | BALoad
                | SALoad
                | IAStore
                | BAStore
                | SAStore
                | GetStatic(_)
                | PutStatic(_)
                | GetField(_)
                | PutField(_)
        ) {
            self.z_holds = z_holds;
        }
        match op {
            Nop => {}
            Const(c) => self.stack.push(Val::Const(c)),
            Load(n) => self.stack.push(Val::Slot(n)),
            Store(n) => {
                let v = self.pop();
                self.detach_local(n);
                self.put(n, v);
                if let Some(f) = self.facts.get_mut(usize::from(n)) {
                    *f = None;
                }
                if let Some(b) = self.le.get_mut(usize::from(n)) {
                    *b = None;
                }
                if self.z_holds == ZHolds::Data(n) {
                    self.z_holds = ZHolds::Nothing;
                }
            }
            Iinc(n, d) => {
                self.detach_local(n);
                if let Some(b) = self.le.get_mut(usize::from(n)) {
                    *b = None;
                }
                match self.home(n) {
                    Home::Reg(h) => self.f.add(r(h), r(h), i32::from(d)),
                    Home::Mem(o) => {
                        let x = self.x();
                        self.f.ld(x, self.regs.fp, i64::from(o));
                        self.f.add(x, x, i32::from(d));
                        self.f.st(x, self.regs.fp, i64::from(o));
                    }
                }
            }
            IALoad => self.array_load(Ty::I, 4),
            BALoad => self.array_load(Ty::C, 1),
            SALoad => self.array_load(Ty::S, 2),
            IAStore => self.array_store(Ty::I, 4, false),
            BAStore => self.array_store(Ty::C, 1, true),
            SAStore => self.array_store(Ty::S, 2, false),
            Pop => {
                self.pop();
            }
            Pop2 => {
                self.pop();
                self.pop();
            }
            Dup => {
                self.flush_w();
                let v = self.pop();
                self.stack.push(v);
                match v {
                    Val::Slot(s) if s >= self.max_locals => {
                        let t = self.pos_slot(self.stack.len());
                        self.put(t, v);
                        self.stack.push(Val::Slot(t));
                    }
                    v => self.stack.push(v),
                }
            }
            DupX1 => self.shuffle(2, &[1, 0, 1]),
            DupX2 => self.shuffle(3, &[2, 0, 1, 2]),
            Dup2 => self.shuffle(2, &[0, 1, 0, 1]),
            Dup2X1 => self.shuffle(3, &[1, 2, 0, 1, 2]),
            Dup2X2 => self.shuffle(4, &[2, 3, 0, 1, 2, 3]),
            Swap => self.shuffle(2, &[1, 0]),
            Add | Sub | Mul | Div | Rem | Shl | Shr | Ushr | And | Or | Xor => self.binop(op),
            Neg | I2B | I2S | I2Z => self.unop(op),
            Goto(t) => {
                self.sync();
                if !self.rotate(t, labels) {
                    self.f.jmp(labels[t as usize]);
                }
                return false;
            }
            GotoBack(t) => {
                self.sync();
                self.charge();
                if !self.rotate(t, labels) {
                    self.f.jmp(labels[t as usize]);
                }
                return false;
            }
            TableSwitch(k) | LookupSwitch(k) => {
                self.flush_w_except(*self.stack.last().unwrap_or(&Val::Const(0)));
                self.charge();
                self.switch(k, labels);
                return false;
            }
            SwitchUnmetered(k) => {
                self.switch(k, labels);
                return false;
            }
            ReturnValue => {
                let v = self.pop();
                if self.direct[usize::from(self.method)] {
                    self.ret_to_host(Some(v));
                    return false;
                }
                let x = self.regs.x;
                let rv = self.reg_of(v, x);
                if rv.num() != x {
                    self.f.mov(r(x), rv);
                }
                self.ret();
                return false;
            }
            Return => {
                self.ret();
                return false;
            }
            GetStatic(k) => self.field(k, false, false),
            PutStatic(k) => self.field(k, true, false),
            GetField(k) => self.field(k, false, true),
            PutField(k) => self.field(k, true, true),
            Call(m) | CallUnmetered(m) => self.call(m),
            CallNative(n) | CallNativeUnmetered(n) => self.call_native(n),
            ObjectInit => {
                self.pop();
            }
            NewArray(prim) => self.new_array(prim),
            ArrayLength => {
                let a = self.pop();
                let x = self.regs.x;
                let ra = self.reg_of(a, x);
                let npe = self.stub(SiteKind::Null, [None; 3]);
                self.f.beq(ra, 0, npe);
                let z = self.regs.z;
                let dir = self.ld_base(z, Base::Dir);
                let rd = self.dest();
                self.f.ldx(rd, Ty::I, dir, ix(ra), 8, DIR_LEN);
                self.push_result(rd);
            }
            op => {
                if let Some((c, two, t, back)) = branch(op) {
                    let back = back && self.metered;
                    self.cond_branch(c, two, t, back, labels);
                }
            }
        }
        true
    }

    /// Loop rotation: a jump to a loop's exit test (`javac`'s `for` and
    /// `while` put it at the top) becomes a copy of the test, so that each
    /// iteration takes one branch instead of a jump and a branch. Only for a
    /// test of locals and constants on an empty stack, which cannot trap.
    pub(super) fn rotate(&mut self, t: u32, labels: &[Label]) -> bool {
        let t = t as usize;
        if !self.rotatable(t) || !self.stack.is_empty() || t + 1 >= labels.len() {
            return false;
        }
        let (parts, k) = expand(self.code[t]);
        let Some((c, two, exit, _)) = branch(parts[k - 1]) else {
            return false;
        };
        for &o in &parts[..k - 1] {
            self.op(o, labels);
        }
        // Stay in the loop (the test's fall-through) unless it exits.
        self.cond_branch(c.not(), two, t as u32 + 1, false, labels);
        self.f.jmp(labels[exit as usize]);
        true
    }

    /// Whether a jump to op `t` can copy it ([`Compiler::rotate`]): a
    /// forward, uncharged branch on locals and constants, on an empty stack.
    pub(super) fn rotatable(&self, t: usize) -> bool {
        let Some(&op) = self.code.get(t) else {
            return false;
        };
        if self.depth.get(t) != Some(&Some(0)) {
            return false;
        }
        let (parts, k) = expand(op);
        matches!(branch(parts[k - 1]), Some((_, _, _, false)))
            && parts[..k - 1]
                .iter()
                .all(|o| matches!(o, Op::Load(_) | Op::Const(_)))
    }

    /// Picks register homes for a method's slots: the most used, weighted
    /// by loop nesting.
    pub(super) fn assign_homes(&mut self, code: &[Op], weight: &[u64], frame: usize) {
        let mut order: Vec<usize> = (0..frame).filter(|&s| weight[s] > 0).collect();
        order.sort_by_key(|&s| (core::cmp::Reverse(weight[s]), s));
        // A method that calls the runtime (natives, `newarray`) gives its
        // most used slots the callee-saved homes first: the runtime keeps
        // those, so a call spills and reloads only the caller-saved ones
        // ([`Compiler::runtime`]). Other methods take the caller-saved
        // homes first (the order of `regs.homes`).
        let calls_runtime = code.iter().any(|&o| {
            let (parts, k) = expand(o);
            parts[..k].iter().any(|p| {
                matches!(
                    p,
                    Op::CallNative(_) | Op::CallNativeUnmetered(_) | Op::NewArray(_)
                )
            })
        });
        let mut regs = self.regs.homes.clone();
        if calls_runtime {
            regs.sort_by_key(|&h| !callee_saved(h));
        }
        self.homes = (0..frame).map(|s| Home::Mem(4 * s as i32)).collect();
        for (&s, &h) in order.iter().zip(&regs) {
            self.homes[s] = Home::Reg(h);
        }
    }

    pub(super) fn method(&mut self, m: usize) -> Result<(), JitError> {
        let prog = self.prog;
        let Some(func) = prog.funcs[m].as_ref() else {
            return Ok(());
        };
        self.method = m as u16;
        self.max_locals = func.max_locals;
        let frame = usize::from(func.max_locals) + usize::from(func.max_stack);
        self.frame = frame as u16;
        let code = &func.code;
        // The analysis `new` made (made again if a method were compiled
        // twice).
        let Analysis { depth, weight } = match self.analyses.get_mut(m).and_then(Option::take) {
            Some(a) => a,
            None => {
                let depth = depths(prog, code);
                let weight = slot_weights(prog, func.max_locals, code, &depth, frame);
                Analysis { depth, weight }
            }
        };
        self.assign_homes(code, &weight, frame);
        self.code = code.to_vec();
        self.depth = depth;
        self.facts = vec![None; usize::from(func.max_locals)];
        self.le = vec![None; usize::from(func.max_locals)];
        self.block_end = 0;
        let mut labels: Vec<Label> = (0..=code.len()).map(|_| self.f.genlabel()).collect();
        let mut is_target = vec![false; code.len() + 1];
        for (i, &o) in code.iter().enumerate() {
            successors(o, i, &prog.switches, |t| {
                if t != i + 1
                    && let Some(x) = is_target.get_mut(t)
                {
                    *x = true;
                }
            });
        }
        // Loop heads, aligned to 32 bytes so that a loop's speed does not
        // depend on where the code before it happened to end: the test at
        // the top of a loop, or, when the back edge copies that test (see
        // `rotate`), the first op of the body.
        let mut align = vec![false; code.len() + 1];
        for (b, &o) in code.iter().enumerate() {
            successors(o, b, &prog.switches, |t| {
                if t <= b {
                    let head = if self.rotatable(t) { t + 1 } else { t };
                    if let Some(a) = align.get_mut(head) {
                        *a = true;
                    }
                }
            });
        }
        self.f.label(self.entries[m]);
        if self.direct[m] {
            self.f.label(self.calls[m]);
        }
        self.marks
            .push((self.f.code_offset(), Mark::Method(m as u16)));
        for k in 0..usize::from(func.arg_slots) {
            if let Home::Reg(h) = self.homes[k] {
                self.f.ld(r(h), self.regs.fp, 4 * k as i64);
            }
        }
        self.stack.clear();
        let mut live = true;
        let loops = if self.metered {
            counted_loops(prog, &self.charge_free, code, &self.depth)
        } else {
            Vec::new()
        };
        let straight = if self.metered {
            straight_loops(prog, code, &self.depth, &loops)
        } else {
            Vec::new()
        };
        // The loops are disjoint (each is innermost: no back edge inside)
        // and in order, so each head is met in turn.
        let (mut i, mut next_loop, mut next_straight) = (0, 0, 0);
        while i < code.len() {
            if let Some(lp) = loops.get(next_loop).filter(|l| l.head == i) {
                self.versioned_loop(lp, &mut labels, &is_target, &align, &mut live);
                i = lp.back + 1;
                next_loop += 1;
            } else if let Some(&(t, b)) = straight.get(next_straight).filter(|l| l.0 == i) {
                self.unrolled_loop(t, b, &mut labels, &is_target, &align, &mut live);
                i = b + 1;
                next_straight += 1;
            } else {
                self.emit(i, &labels, &is_target, &align, &mut live);
                i += 1;
            }
        }
        self.f.label(labels[code.len()]);
        Ok(())
    }

    /// A [`CountedLoop`] in two versions: on entry, the trip count `N` is
    /// computed from the counter and the bound; if the fuel left covers
    /// `N` × `per_trip` (a pass's back edge and calls), that is charged at
    /// once and a copy of the loop without charges runs; otherwise the loop
    /// as the interpreter runs it, charging each back edge and call, so
    /// that it traps at the same back edge or call with the same effects
    /// done. The loop leaves only through its test (or a trap, whose fuel
    /// left nothing reports), and takes its back edge exactly `N` times, so
    /// the fuel left after it is the interpreter's.
    pub(super) fn versioned_loop(
        &mut self,
        lp: &CountedLoop,
        labels: &mut [Label],
        is_target: &[bool],
        align: &[bool],
        live: &mut bool,
    ) {
        let (t, b) = (lp.head, lp.back);
        // The entry (from before the loop only: the back edges of both
        // versions go to their own copies of the test). A jump to the head
        // from before the loop that [`Compiler::rotate`] made a copy of the
        // test goes to `labels[t + 1]`, past the test: that label is bound
        // here too, so that such a jump also charges the trip count and
        // runs the copy without charges (it tests again there, which has no
        // effect: the test reads only locals and constants). Bound in the
        // metered copy, as it was until 2026-12-01, it ran the whole loop
        // metered, with the interpreter's fuel but some 60% slower.
        if *live {
            self.sync();
        }
        self.f.label(labels[t]);
        self.f.label(labels[t + 1]);
        self.reset_stack(0);
        self.forget();
        *live = true;
        self.bci = self.bci_of(t);
        self.marks.push((self.f.code_offset(), Mark::Bci(self.bci)));
        let metered = self.f.genlabel();
        let fast = self.f.genlabel();
        let (x, y) = (self.regs.x, self.regs.y);
        let (xl, yl) = (Reg::<L>::phys(x), Reg::<L>::phys(y));
        let rc = self.reg_of(Val::Slot(lp.counter), x);
        self.f.cv::<I, L>(xl, rc);
        match lp.bound {
            Bound::Local(s) => {
                let rb = self.reg_of(Val::Slot(s), y);
                self.f.cv::<I, L>(yl, rb);
            }
            Bound::Const(v) => self.f.set(yl, i64::from(v)),
        }
        // N = bound - counter counting up, counter - bound counting down
        // (64-bit: no overflow); no charge if the loop does not run.
        if lp.step > 0 {
            self.f.sub(yl, yl, xl);
        } else {
            self.f.sub(yl, xl, yl);
        }
        self.f.ble(yl, 0, fast);
        if lp.per_trip > 1 {
            // At most 2^32 passes of at most `MAX_VERSIONED_OPS` units:
            // no overflow in 64 bits.
            self.f.mul(yl, yl, i64::from(lp.per_trip));
        }
        let n = Reg::<UL>::phys(y);
        self.f.blt(self.regs.fuel, n, metered);
        self.f.sub(self.regs.fuel, self.regs.fuel, n);
        self.f.label(fast);
        // The copy without charges, with labels of its own for the loop's
        // ops (no branch from outside lands in the loop but at its test).
        let own: Vec<Label> = labels[t..=b].to_vec();
        for l in &mut labels[t..=b] {
            *l = self.f.genlabel();
        }
        self.metered = false;
        self.block_end = 0;
        for j in t..=b {
            self.emit(j, labels, is_target, align, live);
        }
        self.metered = true;
        // The metered loop, entered at its test from the entry only, with
        // a label of its own past the test (the loop's is the entry's).
        labels[t..=b].copy_from_slice(&own);
        labels[t] = metered;
        labels[t + 1] = self.f.genlabel();
        self.block_end = 0;
        for j in t..=b {
            self.emit(j, labels, is_target, align, live);
        }
        labels[t] = own[0];
        labels[t + 1] = own[1];
    }

    /// A [`straight_loops`] loop, metered, in groups of [`UNROLL`] passes
    /// compiled in a row (no jump between them). The group's first back
    /// edge charges the whole group, `UNROLL` units, in one `sub; jb`; the
    /// other back edges of the group charge nothing, and the last goes to
    /// the top, the next group's first pass. An exit from pass `m > 0` of
    /// the group (from 0) gives back the `UNROLL - m` units charged for back
    /// edges not taken, on the way out (one `add` on a path taken once per
    /// entry); an exit from pass 0 owes nothing, so an entry that runs no
    /// pass costs no instruction. If the fuel left at the first back edge
    /// is below `UNROLL`, the `sub` is undone, the back edge charged as the
    /// interpreter charges it (out of fuel there if none is left), and the
    /// loop goes on metered pass by pass, running out at the same back edge
    /// as the interpreter. Within a group the interpreter cannot run out
    /// (at least `UNROLL` units were left at its first back edge, and it
    /// takes at most `UNROLL`), so the fuel left at every exit and at every
    /// group's first back edge is the interpreter's; a trap in a pass (an
    /// index, a null array, a division) happens at the same op with the
    /// same effects done, and reports no fuel.
    pub(super) fn unrolled_loop(
        &mut self,
        t: usize,
        b: usize,
        labels: &mut [Label],
        is_target: &[bool],
        align: &[bool],
        live: &mut bool,
    ) {
        // Every entry is pass 0's: a jump to the head (from before the loop,
        // or a back edge from after it) reaches the group's top, pass 0's
        // test at `labels[t]`, aligned as a loop head; a rotated jump (its
        // own copy of the test, [`Compiler::rotate`]) reaches pass 0 just
        // after it, at `labels[t + 1]`. Pass 0 keeps the loop's own labels
        // for that; entering it there is exact, since a pass charges
        // nothing before its back edge, and pass 0's charges the group.
        let top = labels[t];
        let metered = self.f.genlabel();
        let undo = self.f.genlabel();
        // The loop's exits: the targets of its forward branches out.
        let mut exits: Vec<usize> = Vec::new();
        for j in t..b {
            successors(self.code[j], j, &self.prog.switches, |s| {
                if s > b && !exits.contains(&s) {
                    exits.push(s);
                }
            });
        }
        let own: Vec<Label> = labels[t..=b].to_vec();
        let unaligned = vec![false; align.len()];
        let mut top_aligned = unaligned.clone();
        top_aligned[t] = true;
        // (label, units to give back, where the exit goes).
        let mut outs: Vec<(Label, u32, Label)> = Vec::new();
        for pass in 0..UNROLL {
            if pass > 0 {
                for l in &mut labels[t..=b] {
                    *l = self.f.genlabel();
                }
            } else {
                labels[t..=b].copy_from_slice(&own);
            }
            let saved: Vec<Label> = exits.iter().map(|&e| labels[e]).collect();
            if pass > 0 {
                for &e in &exits {
                    let l = self.f.genlabel();
                    outs.push((l, UNROLL - pass, labels[e]));
                    labels[e] = l;
                }
            }
            self.block_end = 0;
            let align = if pass == 0 { &top_aligned } else { &unaligned };
            for j in t..b {
                self.emit(j, labels, is_target, align, live);
            }
            for (&e, &l) in exits.iter().zip(&saved) {
                labels[e] = l;
            }
            // The back edge: its increment; the group's charge at its first.
            // (An empty `if` just before it branches to its label.)
            self.f.label(labels[b]);
            self.bci = self.bci_of(b);
            self.op_index = b;
            self.marks.push((self.f.code_offset(), Mark::Bci(self.bci)));
            let (parts, k) = expand(self.code[b]);
            for &p in &parts[..k - 1] {
                self.op(p, labels);
            }
            self.sync();
            if pass == 0 {
                self.f.sub_branch(self.regs.fuel, UNROLL as i32, true, undo);
            }
            if pass + 1 == UNROLL {
                self.f.jmp(top);
            }
        }
        for (l, units, to) in outs {
            self.f.label(l);
            self.f.add(self.regs.fuel, self.regs.fuel, units);
            self.f.jmp(to);
        }
        // Less than `UNROLL` left at the first back edge: the interpreter's
        // charge there, then the metered loop, entered at its test.
        self.f.label(undo);
        self.f.add(self.regs.fuel, self.regs.fuel, UNROLL);
        self.bci = self.bci_of(b);
        self.charge();
        self.f.jmp(metered);
        // The metered loop's labels are its own: no jump from outside
        // reaches it but this one, to its test.
        for l in &mut labels[t..=b] {
            *l = self.f.genlabel();
        }
        labels[t] = metered;
        self.block_end = 0;
        for j in t..=b {
            self.emit(j, labels, is_target, align, live);
        }
        labels[t..=b].copy_from_slice(&own);
    }

    /// The bytecode index of op `i` of the method being compiled.
    pub(super) fn bci_of(&self, i: usize) -> u32 {
        let func = self.prog.funcs[usize::from(self.method)].as_ref();
        func.and_then(|f| f.bcis.get(i).copied()).unwrap_or(0)
    }

    /// Compiles op `i` of the method, with branch targets in `labels`
    /// (a loop's two versions pass different labels for its ops).
    pub(super) fn emit(
        &mut self,
        i: usize,
        labels: &[Label],
        is_target: &[bool],
        align: &[bool],
        live: &mut bool,
    ) {
        let Some(d) = self.depth[i] else {
            *live = false;
            return;
        };
        let op = self.code[i];
        if is_target[i] {
            if *live {
                self.sync();
            }
            if align[i] {
                self.f.align(32);
            }
            self.f.label(labels[i]);
            self.reset_stack(usize::from(d));
            self.forget();
            *live = true;
        } else if !*live {
            self.f.label(labels[i]);
            self.reset_stack(usize::from(d));
            self.forget();
            *live = true;
        } else {
            if align[i] {
                self.f.align(32);
            }
            self.f.label(labels[i]);
        }
        self.bci = self.bci_of(i);
        self.op_index = i;
        let n = self.code.len();
        if self.block_end <= i {
            self.block_end = (i + 1..n).find(|&j| is_target[j]).unwrap_or(n);
        }
        self.marks.push((self.f.code_offset(), Mark::Bci(self.bci)));
        let (parts, k) = expand(op);
        for j in 0..k {
            // The op after this part, if control always goes on to it.
            let next = if j + 1 < k {
                Some(parts[j + 1])
            } else if i + 1 < n && !is_target[i + 1] {
                Some(expand(self.code[i + 1]).0[0])
            } else {
                None
            };
            self.hint = match next {
                Some(Op::Store(n)) => Some(n),
                _ => None,
            };
            if !self.op(parts[j], labels) {
                *live = false;
            }
            self.hint = None;
        }
    }

    pub(super) fn reset_stack(&mut self, d: usize) {
        self.stack.clear();
        for j in 0..d {
            let s = self.pos_slot(j);
            self.stack.push(Val::Slot(s));
        }
    }

    /// The trap stubs and the shared exit.
    pub(super) fn finish(mut self) -> (Func, Meta) {
        let x = self.regs.x;
        let stubs = std::mem::take(&mut self.stubs);
        if !stubs.is_empty() {
            self.marks.push((self.f.code_offset(), Mark::Traps));
        }
        for s in &stubs {
            self.f.label(s.label);
            // Registers first: a constant goes through X, which a register
            // record may name.
            for (k, rec) in s.recs.iter().enumerate() {
                if let Some(Rec::Reg(n)) = *rec {
                    self.f.st_local(r(n), self.locals.trap[k]);
                }
            }
            for (k, rec) in s.recs.iter().enumerate() {
                if let Some(Rec::Const(c)) = *rec {
                    self.f.set(r(x), c);
                    self.f.st_local(r(x), self.locals.trap[k]);
                }
            }
            self.f.set(r(x), s.site as i32 + 1);
            self.f.jmp(self.exit);
        }
        self.f.label(self.exit);
        let c = self.ctx(self.regs.z);
        self.f.st(self.regs.fuel, c, C_FUEL);
        let t = Reg::<L>::phys(self.regs.y);
        for k in 0..3 {
            self.f.ld_local(r(self.regs.y), self.locals.trap[k]);
            self.f.cv::<I, L>(t, r(self.regs.y));
            self.f.st(t, c, C_TRAP + 8 * k as i64);
        }
        self.f.ret(r(x));
        let sites = std::mem::take(&mut self.sites);
        let marks = std::mem::take(&mut self.marks);
        let methods = self
            .prog
            .funcs
            .iter()
            .map(|f| f.as_ref().map(|f| f.id.clone()).unwrap_or_default())
            .collect();
        (
            self.f,
            Meta {
                sites,
                marks,
                methods,
                uses: self.uses,
            },
        )
    }
}

/// Compiles `prog` into a function not yet placed in memory.
pub(super) fn build(prog: &Program) -> Result<(Func, Meta), JitError> {
    let mut c = Compiler::new(prog)?;
    for m in 0..prog.funcs.len() {
        c.method(m)?;
    }
    Ok(c.finish())
}

/// Compiles `prog` into memory of its own, outside the cache: for
/// measuring the compiler alone (`jive-compile-count`, the benchmarks).
pub fn compile_standalone(prog: &Program) -> Result<vcode::Code, JitError> {
    let (mut f, _) = build(prog)?;
    f.end().map_err(codegen_error(prog))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sequence `div_by_const` emits, in Rust.
    fn model(n: i32, d: i32) -> i32 {
        if d & (d - 1) == 0 {
            let k = d.trailing_zeros();
            let bias = ((n >> 31) as u32 >> (32 - k)) as i32;
            return n.wrapping_add(bias) >> k;
        }
        let (m, s) = magic(d);
        let mut q = ((i64::from(n) * i64::from(m)) >> 32) as i32;
        if m < 0 {
            q = q.wrapping_add(n);
        }
        q >>= s;
        q.wrapping_add((q as u32 >> 31) as i32)
    }

    thread_local! {
        /// Ops [`charge_free_methods`] read on this thread.
        pub(super) static SCANNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    /// A compile reads each method's code once to find the callees that
    /// charge nothing, however many loops call them: asked per call, a
    /// class of many loops calling one long method took seconds (the
    /// eighteenth session's review measured 0.9 s and 2.8 s) while senders
    /// to its endpoint waited on the load.
    #[test]
    fn a_compile_reads_each_method_once_for_its_charge() {
        let Some(dir) = crate::APPLET_CLASSES else {
            return;
        };
        let path = std::path::Path::new(dir).join("release8/FuelLoops.class");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let applet = crate::Applet::load(&bytes, &crate::Natives::new(), crate::Limits::default())
            .expect("FuelLoops loads");
        let prog = applet.program();
        assert!(prog.metered(), "FuelLoops is compiled with fuel");
        let ops: usize = prog.funcs.iter().flatten().map(|f| f.code.len()).sum();
        SCANNED.with(|c| c.set(0));
        build(prog).expect("FuelLoops compiles");
        // Its loops make calls of charge-free methods (`calls`, `twoCalls`,
        // ...): read per call, the count would be far above `ops`.
        assert_eq!(SCANNED.with(std::cell::Cell::get), ops);
    }

    /// The counted loops and the [`straight_loops`] of each method of a
    /// class the build compiled, by method name (`None` without javac).
    fn loop_kinds_of(class: &str) -> Option<Vec<(String, usize, usize)>> {
        let dir = std::path::Path::new(crate::APPLET_CLASSES?).join("release8");
        let bytes = std::fs::read(dir.join(format!("{class}.class"))).ok()?;
        let applet = crate::Applet::load(&bytes, &crate::Natives::new(), crate::Limits::default())
            .unwrap_or_else(|e| panic!("{class}: {e}"));
        let prog = applet.program();
        let free = charge_free_methods(prog);
        let out = prog
            .info
            .methods
            .iter()
            .zip(&prog.funcs)
            .filter_map(|(m, f)| {
                let f = f.as_ref()?;
                let depth = depths(prog, &f.code);
                let counted = counted_loops(prog, &free, &f.code, &depth);
                let straight = straight_loops(prog, &f.code, &depth, &counted).len();
                Some((m.name.clone(), counted.len(), straight))
            })
            .collect();
        Some(out)
    }

    /// The number of counted loops of each method of a class.
    fn loops_of(class: &str) -> Option<Vec<(String, usize)>> {
        let kinds = loop_kinds_of(class)?;
        Some(kinds.into_iter().map(|(m, c, _)| (m, c)).collect())
    }

    /// The number of [`straight_loops`] of each method of a class.
    fn straight_of(class: &str) -> Option<Vec<(String, usize)>> {
        let kinds = loop_kinds_of(class)?;
        Some(kinds.into_iter().map(|(m, _, s)| (m, s)).collect())
    }

    /// The bases of the context a class's code reads (`None` without javac).
    fn uses_of(class: &str) -> Option<Uses> {
        let dir = std::path::Path::new(crate::APPLET_CLASSES?).join("release8");
        let bytes = std::fs::read(dir.join(format!("{class}.class"))).ok()?;
        let prog = crate::check(&bytes, &crate::Limits::default())
            .unwrap_or_else(|e| panic!("{class}: {e}"));
        Some(Uses::of(&prog))
    }

    /// The entry copies a base only for code that reads it: `Arith` (static
    /// methods over statics and arrays, recursing) reads no instance field,
    /// `Counter` reads every kind.
    #[test]
    fn the_entry_copies_the_bases_the_code_reads() {
        let Some(arith) = uses_of("Arith") else {
            return;
        };
        let u = |u: Uses| (u.dir, u.statics, u.fields, u.calls);
        assert_eq!(u(arith), (true, true, false, true), "Arith");
        let counter = uses_of("Counter").expect("Counter");
        assert_eq!(u(counter), (true, true, true, true), "Counter");
    }

    /// A method runs at its dispatch target, returning to the host without
    /// a call stub, only if no method calls it: in `Arith`, `fib` and
    /// `ack` call themselves (and `fibOf` calls `fib`), so they keep their
    /// stubs; `add` and `fibOf` are entered by the host alone.
    #[test]
    fn only_methods_no_method_calls_run_at_their_dispatch_target() {
        let Some(dir) = crate::APPLET_CLASSES else {
            return;
        };
        let path = std::path::Path::new(dir)
            .join("release8")
            .join("Arith.class");
        let bytes = std::fs::read(path).expect("Arith.class");
        let prog = crate::check(&bytes, &crate::Limits::default()).expect("Arith");
        let direct = host_only(&prog);
        let of = |name: &str| {
            let m = prog.info.methods.iter().position(|m| m.name == name);
            direct[m.unwrap_or_else(|| panic!("{name}"))]
        };
        for (name, want) in [
            ("fib", false),
            ("ack", false),
            ("add", true),
            ("fibOf", true),
        ] {
            assert_eq!(of(name), want, "{name}");
        }
        // A slot without code (`None`) is never a dispatch target's body.
        for (f, d) in prog.funcs.iter().zip(&direct) {
            assert!(f.is_some() || !d);
        }
    }

    /// The compiler claims as many register homes as the busiest method of
    /// a program can use, caller-saved registers first, so that a program
    /// of small methods leaves callee-saved registers unclaimed (and its
    /// entry does not save them); a program with more live slots than
    /// registers takes every one.
    #[test]
    fn the_compiler_claims_only_the_homes_a_method_can_use() {
        if crate::APPLET_CLASSES.is_none() || !crate::jit::available() {
            return;
        }
        let homes = |class: (&str, &str)| {
            let dir = std::path::Path::new(crate::APPLET_CLASSES.unwrap()).join(class.0);
            let class = class.1;
            let bytes = std::fs::read(dir.join(format!("{class}.class"))).expect(class);
            let prog = crate::check(&bytes, &crate::Limits::default())
                .unwrap_or_else(|e| panic!("{class}: {e}"));
            let c = Compiler::new(&prog).unwrap_or_else(|e| panic!("{class}: {e}"));
            let callee = c.regs.homes.iter().filter(|&&h| callee_saved(h)).count();
            let ctx = c.regs.ctx.map(|r| callee_saved(r.num()));
            (
                homes_wanted(&analyze(&prog)),
                c.regs.homes.len(),
                callee,
                ctx,
            )
        };
        // The Figure 7 probe (`applets/unet/Breakdown.java`): `doRx` uses 4
        // slots, so 4 homes, two of them callee-saved (x86-64 has two
        // caller-saved registers left for homes after the four scratch
        // registers); it calls natives, so the context takes the fifth
        // callee-saved register.
        assert_eq!(
            homes(("unet", "Breakdown")),
            (4, 4, 2, Some(true)),
            "Breakdown"
        );
        // `NativeHomes.keep` has more live ints than there are registers,
        // and calls natives: the context's register is one home fewer.
        let (wanted, claimed, callee, ctx) = homes(("release8", "NativeHomes"));
        assert!(
            wanted > claimed,
            "NativeHomes wants {wanted}, claimed {claimed}"
        );
        assert_eq!((claimed, callee, ctx), (4, 2, Some(true)), "NativeHomes");
        // `Arith` calls no native: the context stays in the native frame.
        let (.., ctx) = homes(("release8", "Arith"));
        assert_eq!(ctx, None, "Arith");
    }

    #[test]
    fn counted_loops_are_the_innermost_loops_that_leave_only_through_their_test() {
        let Some(fuel_loops) = loops_of("FuelLoops") else {
            return;
        };
        let expected = [
            ("up", 1),
            ("down", 1),
            ("upSwapped", 1),
            ("nested", 1),
            ("staticBound", 1),
            ("breaks", 0),
            ("movingBound", 0),
            ("calls", 1),
            ("twoLoops", 3),
            ("constBounds", 3),
            ("forever", 0),
            ("twoCalls", 1),
            ("callTraps", 1),
            ("callReadsPast", 1),
            ("instanceCalls", 1),
            ("callEitherWay", 1),
            ("callOneWay", 0),
            ("chargingCallees", 0),
            ("upAfterBranch", 1),
        ];
        for (name, n) in expected {
            let found = fuel_loops.iter().find(|(m, _)| m == name).map(|&(_, k)| k);
            assert_eq!(found, Some(n), "FuelLoops.{name}");
        }
        // Every loop of the benchmark suite's micro and fibonacci rows.
        let bench = loops_of("Bench").unwrap_or_default();
        for name in [
            "nullLoop",
            "nullCall",
            "fieldRead",
            "fieldWrite",
            "arrayRead",
            "arrayWrite",
            "math",
            "mathField",
            "mathArray",
            "fibonacci",
        ] {
            let found = bench.iter().find(|(m, _)| m == name).map(|&(_, k)| k);
            assert_eq!(found, Some(1), "Bench.{name}");
        }
    }

    #[test]
    fn straight_loops_are_the_uncounted_innermost_loops_without_calls_or_inner_branches() {
        let Some(fuel_loops) = straight_of("FuelLoops") else {
            return;
        };
        let expected = [
            ("scanUp", 1),
            ("scanDown", 1),
            ("scanTwoExits", 1),
            ("scanDivides", 1),
            ("scanStride", 1),
            ("scanAfterBranch", 1),
            ("forever", 1),
            // The callee that loops (its loop has no call).
            ("sumTo", 1),
            // Counted loops (charged at their entry) are not also straight.
            ("up", 0),
            ("twoLoops", 0),
            ("upAfterBranch", 0),
            // A break (a goto out of the body), a call, a loop inside.
            ("breaks", 0),
            ("chargingCallees", 0),
            ("nested", 0),
        ];
        for (name, n) in expected {
            let found = fuel_loops.iter().find(|(m, _)| m == name).map(|&(_, k)| k);
            assert_eq!(found, Some(n), "FuelLoops.{name}");
        }
        // Quicksort's two scanning loops.
        let bench = straight_of("Bench").unwrap_or_default();
        let found = bench.iter().find(|(m, _)| m == "qsort").map(|&(_, k)| k);
        assert_eq!(found, Some(2), "Bench.qsort");
    }

    #[test]
    fn division_by_a_constant_truncates_like_idiv() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut divisors: Vec<i32> = (2..=1100).collect();
        divisors.extend([
            1009,
            1000,
            55,
            641,
            65_537,
            1 << 20,
            (1 << 30) + 1,
            i32::MAX,
            i32::MAX - 1,
            1 << 30,
        ]);
        divisors.extend((0..200).map(|_| (next() as i32).unsigned_abs().max(2) as i32));
        let edges = [
            0,
            1,
            -1,
            2,
            -2,
            i32::MIN,
            i32::MIN + 1,
            i32::MAX,
            i32::MAX - 1,
        ];
        for &d in &divisors {
            if d < 2 {
                continue;
            }
            let near = [d, d - 1, d + 1, -d, -d + 1, -d - 1, 2 * d, -2 * d];
            for n in edges
                .into_iter()
                .chain(near)
                .chain((0..300).map(|_| next() as i32))
            {
                assert_eq!(model(n, d), n.wrapping_div(d), "{n} / {d}");
            }
        }
    }
}
