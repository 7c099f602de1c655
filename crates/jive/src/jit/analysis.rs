//! What the compiler learns of a program before it emits code: which of
//! the context's bases its code reads ([`Uses`]), the methods only the host
//! enters, the operand-stack depth at each op, the branches' conditions,
//! the counted and straight loops that fuel is charged for at once, the
//! methods that charge nothing, and the weight of each slot, from which
//! the compiler picks the slots that get registers ([`Analysis`]).

use super::*;

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
///
/// In code without metering (`metered` false in [`counted_loops`]) the
/// same shape is found with no charge at all (`per_trip` 0: the decoder
/// leaves every back edge uncharged, and a loop that calls is not
/// counted, since `free` is empty then), for [`Compiler::passes`].
pub(super) struct CountedLoop {
    pub(super) head: usize,
    pub(super) back: usize,
    pub(super) counter: u16,
    pub(super) step: i16,
    pub(super) bound: Bound,
    /// The units each pass charges (at least 1, at most the loop's ops;
    /// 0 in code without metering).
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
/// [`charge_free_methods`] of `prog` (empty without metering); `metered`
/// whether the code charges fuel (if so, a loop that charges nothing is
/// not counted: it needs no charge at its entry).
pub(super) fn counted_loops(
    prog: &Program,
    free: &[bool],
    code: &[Op],
    depth: &[Option<u16>],
    metered: bool,
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
        if let Some(lp) = counted_loop(
            prog, free, code, depth, t, b, counter, step, &lo, &hi, metered,
        ) {
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
    metered: bool,
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
    if fewest != most || (metered && fewest + own == 0) {
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
/// loop nesting (8 per enclosing loop), a local's use 16 and a stack
/// position's 1. Slots of weight 0 are never read or written.
///
/// A stack position is weighed at exactly a sixteenth of a local: rounded
/// up, as it was, a push outside any loop weighed as much as a local's use
/// inside one, so that `Bench.fibonacci`'s first stack position (9 pushes,
/// 4 of them outside its loop; those in it go straight into a local or the
/// loop's test, never into their home) took the last register from the
/// loop's bound `n`, which the loop then read from memory at every pass.
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
                        *x += 16 * w;
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
                    *x += w;
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// `Bench.fibonacci`'s loop reads its bound `n` at every pass; its
    /// first stack position is pushed 9 times, 5 of them in the loop,
    /// where each push goes straight into a local or the test. `n` weighs
    /// more (128 against 44), so it gets the register the two compete for
    /// (the fifth home) and the loop compares with a register, not with
    /// memory. Until 2026-12-02 a stack position's use weighed
    /// `ceil(w / 16)`, at least 1: 9 against 8.
    #[test]
    fn a_loops_bound_outweighs_a_stack_position_pushed_outside_it() {
        let Some(dir) = crate::APPLET_CLASSES else {
            return;
        };
        let path = std::path::Path::new(dir).join("default/Bench.class");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let prog = crate::check(&bytes, &crate::Limits::default()).expect("Bench");
        let k = prog.info.methods.iter().position(|m| m.name == "fibonacci");
        let f = k.and_then(|k| prog.funcs[k].as_ref()).expect("fibonacci");
        let frame = usize::from(f.max_locals) + usize::from(f.max_stack);
        let weight = slot_weights(&prog, f.max_locals, &f.code, &depths(&prog, &f.code), frame);
        let stack = &weight[usize::from(f.max_locals)..];
        assert!(
            stack.iter().all(|&w| w < weight[0]),
            "n weighs {}, the stack positions {stack:?}",
            weight[0]
        );
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
                let counted = counted_loops(prog, &free, &f.code, &depth, true);
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
}
