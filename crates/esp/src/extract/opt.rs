//! Optimizations on fast paths and automata (§4.5 of the paper).
//!
//! A graph extracted by symbolic execution ([`crate::explore`]) is straight
//! code across former process boundaries: every channel transfer became an
//! assignment of the reader's variable from the writer's operand, and every
//! `Leave` hands control back to the process-based code. [`optimize`]
//! turns it into tight code:
//!
//! * **Liveness propagated from the processes** ([`Liveness`]): each
//!   process's variables are analysed over its own `ir` body; a `Leave`
//!   that stores pc `k` for process `P` needs exactly `P`'s variables live
//!   at `k` (and every variable of a process it does not move). With that,
//!   liveness inside the graph is ordinary backward data flow.
//! * **Constant and copy propagation** across the former process
//!   boundaries (forward, must-analysis over the graph's loops), with the
//!   facts a branch establishes on each of its edges (`x == 3` on the taken
//!   edge), so that the reader's `if (tag != 0)` after `out(c, 1, b)` folds.
//! * **Expression simplification**: constant folding and algebraic
//!   identities (`x & 0xFF & 0xFF`, `(a < b) != 0`, `x + 0`...).
//! * **Branch folding** and clean-up: constant conditions become jumps,
//!   empty blocks are threaded through, chains are merged, unreachable
//!   blocks dropped.
//! * **Value specialization** (loop unrolling and jump threading in one):
//!   blocks are cloned per value of the "control" variables whose constant
//!   values decide branches (a loop counter `k < 8` from `k = 0`, a flag
//!   that alternates), within a budget, so those branches disappear.
//! * **Dead-code elimination** with the propagated liveness.
//! * **Strength reduction of xor-linear runs** (`linear`): consecutive
//!   assignments to one variable that are affine over GF(2) in it alone
//!   (the bit-by-bit CRC of a byte) become one assignment whose terms all
//!   read the first value, side by side, instead of a chain of steps.
//! * **Lazy execution** (sinking): an assignment whose value only some
//!   successors need moves to those successors (edges are split when
//!   needed), so the assignments that mimic message passing end up only on
//!   the `Leave`s that store them.
//!
//! Every transformation keeps the graph's observable behaviour: the same
//! external receives and sends, host calls in the same order with the same
//! arguments, the same `Leave` with the same program counters, and every
//! variable live at those program counters (process-based liveness) with
//! the same value. Variables dead there may differ: the process-based code
//! never reads them before writing them.

use std::collections::{BTreeMap, HashMap};

use crate::fp::{Block, BlockId, Graph, Inst, Term};
use crate::ir::{BinOp, Comm, Expr, Layout, NodeKind, Operand, Pc, ProcId, Program, UnOp};

// -- Bit sets -----------------------------------------------------------------------

/// A dense set of small integers (variables or slots).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Bits(Vec<u64>);

impl Bits {
    pub(crate) fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }

    pub(crate) fn get(&self, i: u32) -> bool {
        self.0
            .get(i as usize / 64)
            .is_some_and(|w| w >> (i % 64) & 1 != 0)
    }

    pub(crate) fn set(&mut self, i: u32) {
        let w = i as usize / 64;
        if w >= self.0.len() {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << (i % 64);
    }

    pub(crate) fn clear(&mut self, i: u32) {
        if let Some(w) = self.0.get_mut(i as usize / 64) {
            *w &= !(1 << (i % 64));
        }
    }

    /// `self |= other`; true if `self` grew.
    pub(crate) fn union_with(&mut self, other: &Bits) -> bool {
        if other.0.len() > self.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        let mut changed = false;
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            let n = *a | b;
            changed |= n != *a;
            *a = n;
        }
        changed
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &w)| {
            (0..64u32)
                .filter(move |b| w >> b & 1 != 0)
                .map(move |b| i as u32 * 64 + b)
        })
    }
}

// -- Process-based liveness ---------------------------------------------------------------

/// The live variables of every process at every program counter: the
/// first stage of §4.5's two-stage liveness. A variable is live at `pc`
/// when some path of the process from `pc` reads it before writing it.
///
/// The runtime and the tests use it too: after a fast path has run, only
/// the variables live at each process's program counter are guaranteed to
/// equal what the process-based code would hold.
#[derive(Clone, Debug)]
pub struct Liveness {
    /// `[process][pc]`: the live variables (process-local indices).
    live: Vec<Vec<Bits>>,
    /// [`leave_slots`](Liveness::leave_slots) of the pcs seen so far.
    cache: std::cell::RefCell<HashMap<Vec<(ProcId, Pc)>, Bits>>,
}

fn comm_uses_defs(op: &Comm, uses: &mut Bits, defs: &mut Bits) {
    match op {
        Comm::In { vars, .. } => vars.iter().for_each(|&v| defs.set(v)),
        Comm::Out { args, .. } => {
            for a in args {
                if let Operand::Var(v) = a {
                    uses.set(*v)
                }
            }
        }
    }
}

fn expr_uses(e: &Expr, uses: &mut Bits) {
    e.for_each_var(&mut |v| uses.set(v));
}

impl PartialEq for Liveness {
    fn eq(&self, other: &Liveness) -> bool {
        self.live == other.live
    }
}

impl Liveness {
    /// Analyses every process of `program` (backward data flow to a fixed
    /// point over each process's nodes).
    pub fn of(program: &Program) -> Liveness {
        let live = program
            .processes
            .iter()
            .map(|p| {
                let n = p.nodes.len();
                let width = p.vars.len();
                let mut live = vec![Bits::new(width); n];
                let mut changed = true;
                while changed {
                    changed = false;
                    for pc in (0..n).rev() {
                        let mut out = Bits::new(width);
                        let at = |pc: Pc, live: &Vec<Bits>| live.get(pc as usize).cloned();
                        match &p.nodes[pc].kind {
                            NodeKind::Assign { var, value, next } => {
                                if let Some(l) = at(*next, &live) {
                                    out = l;
                                }
                                out.clear(*var);
                                expr_uses(value, &mut out);
                            }
                            NodeKind::Eval { value, next } => {
                                if let Some(l) = at(*next, &live) {
                                    out = l;
                                }
                                expr_uses(value, &mut out);
                            }
                            NodeKind::Branch { cond, then, els } => {
                                for t in [then, els] {
                                    if let Some(l) = at(*t, &live) {
                                        out.union_with(&l);
                                    }
                                }
                                expr_uses(cond, &mut out);
                            }
                            NodeKind::Nop { next } => {
                                if let Some(l) = at(*next, &live) {
                                    out = l;
                                }
                            }
                            NodeKind::Assert { cond, next } => {
                                if let Some(l) = at(*next, &live) {
                                    out = l;
                                }
                                expr_uses(cond, &mut out);
                            }
                            NodeKind::Comm { op, next } => {
                                if let Some(l) = at(*next, &live) {
                                    out = l;
                                }
                                let (mut uses, mut defs) = (Bits::new(width), Bits::new(width));
                                comm_uses_defs(op, &mut uses, &mut defs);
                                for d in defs.iter() {
                                    out.clear(d);
                                }
                                out.union_with(&uses);
                            }
                            NodeKind::Alt { arms } => {
                                for arm in arms {
                                    let mut l = at(arm.next, &live).unwrap_or_default();
                                    let (mut uses, mut defs) = (Bits::new(width), Bits::new(width));
                                    comm_uses_defs(&arm.op, &mut uses, &mut defs);
                                    for d in defs.iter() {
                                        l.clear(d);
                                    }
                                    l.union_with(&uses);
                                    out.union_with(&l);
                                }
                            }
                            NodeKind::Halt => {}
                        }
                        if live[pc].union_with(&out) {
                            changed = true;
                        }
                    }
                }
                live
            })
            .collect();
        Liveness {
            live,
            cache: Default::default(),
        }
    }

    /// True when variable `v` of process `p` is live at `pc` (false for
    /// anything out of range).
    pub fn is_live(&self, p: ProcId, pc: Pc, v: u32) -> bool {
        self.live
            .get(p as usize)
            .and_then(|l| l.get(pc as usize))
            .is_some_and(|b| b.get(v))
    }

    /// The variables of process `p` live at `pc`, in increasing order.
    pub fn live(&self, p: ProcId, pc: Pc) -> Vec<u32> {
        self.live
            .get(p as usize)
            .and_then(|l| l.get(pc as usize))
            .map(|b| b.iter().collect())
            .unwrap_or_default()
    }

    /// The global slots a `Leave` storing `pcs` must keep: the live
    /// variables of each listed process at its pc, and every variable of
    /// every process it does not list (the graph leaves those alone, so
    /// their values must survive).
    pub(crate) fn leave_slots(
        &self,
        program: &Program,
        layout: &Layout,
        pcs: &[(ProcId, Pc)],
    ) -> Bits {
        if let Some(b) = self.cache.borrow().get(pcs) {
            return b.clone();
        }
        let out = self.compute_leave_slots(program, layout, pcs);
        self.cache.borrow_mut().insert(pcs.to_vec(), out.clone());
        out
    }

    fn compute_leave_slots(
        &self,
        program: &Program,
        layout: &Layout,
        pcs: &[(ProcId, Pc)],
    ) -> Bits {
        let mut out = Bits::new(layout.slots as usize);
        let mut listed = vec![false; program.processes.len()];
        for &(p, pc) in pcs {
            let Some(l) = listed.get_mut(p as usize) else {
                continue;
            };
            *l = true;
            if let Some(bits) = self.live.get(p as usize).and_then(|l| l.get(pc as usize)) {
                for v in bits.iter() {
                    out.set(layout.base[p as usize] + v);
                }
            }
        }
        for (p, proc_) in program.processes.iter().enumerate() {
            if !listed[p] {
                for v in 0..proc_.vars.len() as u32 {
                    out.set(layout.base[p] + v);
                }
            }
        }
        out
    }
}

// -- Graph structure helpers ------------------------------------------------------------

/// The successors of a terminator, in order (duplicates kept).
pub(crate) fn successors(t: &Term) -> Vec<BlockId> {
    match t {
        Term::Jump(b) => vec![*b],
        Term::Branch { then, els, .. } => vec![*then, *els],
        Term::Recv { got, empty, .. } => vec![*got, *empty],
        Term::Send { next, .. } => vec![*next],
        Term::Count { next, over, .. } => vec![*next, *over],
        Term::Leave { .. } => vec![],
    }
}

/// Blocks reachable from the entries, in reverse post-order.
pub(crate) fn reverse_postorder(g: &Graph) -> Vec<BlockId> {
    let n = g.blocks.len();
    let mut seen = vec![false; n];
    let mut post = Vec::with_capacity(n);
    for &e in &g.entries {
        if (e as usize) >= n || seen[e as usize] {
            continue;
        }
        // Iterative DFS: (block, next successor index).
        let mut stack = vec![(e, 0usize)];
        seen[e as usize] = true;
        while let Some(&mut (b, ref mut i)) = stack.last_mut() {
            let succ = successors(&g.blocks[b as usize].term);
            if *i < succ.len() {
                let s = succ[*i];
                *i += 1;
                if (s as usize) < n && !seen[s as usize] {
                    seen[s as usize] = true;
                    stack.push((s, 0));
                }
            } else {
                post.push(b);
                stack.pop();
            }
        }
    }
    post.reverse();
    post
}

fn predecessor_counts(g: &Graph) -> Vec<usize> {
    let mut preds = vec![0usize; g.blocks.len()];
    for b in &g.blocks {
        for s in successors(&b.term) {
            if let Some(p) = preds.get_mut(s as usize) {
                *p += 1;
            }
        }
    }
    for &e in &g.entries {
        if let Some(p) = preds.get_mut(e as usize) {
            // An entry is entered from outside too: never merged away.
            *p += 2;
        }
    }
    preds
}

/// True when the graph only names blocks, slots, counters and processes
/// that exist: the optimizer leaves anything else alone.
pub(crate) fn well_formed(program: &Program, g: &Graph) -> bool {
    let layout = Layout::of(program);
    let slots = layout.slots as u64 + g.locals as u64;
    let nb = g.blocks.len();
    let ok_slot = |s: u32| (s as u64) < slots;
    let ok_expr = |e: &Expr| {
        let mut ok = true;
        e.for_each_var(&mut |v| ok &= ok_slot(v));
        ok && calls_ok(program, e)
    };
    if g.entries.is_empty() || g.entries.iter().any(|&e| e as usize >= nb) {
        return false;
    }
    g.blocks.iter().all(|b| {
        b.insts.iter().all(|i| match i {
            Inst::Assign { slot, value } => ok_slot(*slot) && ok_expr(value),
            Inst::Eval(e) => ok_expr(e),
        }) && successors(&b.term).iter().all(|&s| (s as usize) < nb)
            && match &b.term {
                Term::Branch { cond, .. } => ok_expr(cond),
                Term::Recv { chan, slots, .. } => {
                    program
                        .channels
                        .get(*chan as usize)
                        .is_some_and(|c| c.arity as usize == slots.len())
                        && slots.iter().all(|&s| ok_slot(s))
                }
                Term::Send { chan, args, .. } => {
                    program
                        .channels
                        .get(*chan as usize)
                        .is_some_and(|c| c.arity as usize == args.len())
                        && args.iter().all(|a| match a {
                            Operand::Var(v) => ok_slot(*v),
                            Operand::Const(_) => true,
                        })
                }
                Term::Count { counter, .. } => (*counter as usize) < g.counters.len(),
                Term::Leave { pcs, .. } => pcs.iter().all(|&(p, pc)| {
                    program
                        .processes
                        .get(p as usize)
                        .is_some_and(|pr| (pc as usize) < pr.nodes.len())
                }),
                Term::Jump(_) => true,
            }
    })
}

fn calls_ok(program: &Program, e: &Expr) -> bool {
    match e {
        Expr::Const(_) | Expr::Var(_) => true,
        Expr::Unary(_, a) => calls_ok(program, a),
        Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            calls_ok(program, a) && calls_ok(program, b)
        }
        Expr::Call(f, args) => {
            program
                .externs
                .get(*f as usize)
                .is_some_and(|x| x.arity as usize == args.len())
                && args.iter().all(|a| calls_ok(program, a))
        }
    }
}

// -- Expressions ----------------------------------------------------------------------------

/// Evaluating it has no effect and cannot fail: it may be dropped or
/// duplicated.
pub fn pure(e: &Expr) -> bool {
    !e.has_call() && !e.may_fault()
}

fn mentions(e: &Expr, slot: u32) -> bool {
    let mut m = false;
    e.for_each_var(&mut |v| m |= v == slot);
    m
}

fn size(e: &Expr) -> usize {
    match e {
        Expr::Const(_) | Expr::Var(_) => 1,
        Expr::Unary(_, a) => 1 + size(a),
        Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => 1 + size(a) + size(b),
        Expr::Call(_, args) => 1 + args.iter().map(size).sum::<usize>(),
    }
}

/// True when the value is always 0 or 1.
pub(crate) fn is_boolean(e: &Expr) -> bool {
    match e {
        Expr::Const(c) => *c == 0 || *c == 1,
        Expr::Unary(UnOp::Not, _) | Expr::And(..) | Expr::Or(..) => true,
        Expr::Binary(op, _, _) => is_compare(*op),
        _ => false,
    }
}

pub(crate) fn is_compare(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge
    )
}

/// `!(a op b)` as `a op' b`.
pub(crate) fn negate_compare(op: BinOp) -> BinOp {
    match op {
        BinOp::Eq => BinOp::Ne,
        BinOp::Ne => BinOp::Eq,
        BinOp::Lt => BinOp::Ge,
        BinOp::Ge => BinOp::Lt,
        BinOp::Le => BinOp::Gt,
        BinOp::Gt => BinOp::Le,
        other => other,
    }
}

/// `a op b` as `b op' a`.
pub(crate) fn mirror_compare(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Gt => BinOp::Lt,
        BinOp::Le => BinOp::Ge,
        BinOp::Ge => BinOp::Le,
        other => other,
    }
}

fn commutes(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Add
            | BinOp::Mul
            | BinOp::BitAnd
            | BinOp::BitOr
            | BinOp::BitXor
            | BinOp::Eq
            | BinOp::Ne
    )
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::Binary(op, Box::new(a), Box::new(b))
}

/// `c != 0 ? a : b` as an expression of the language: `b ^ ((a ^ b) &
/// -(c != 0))`. The code generator recognizes this shape and emits a
/// conditional move; everywhere else it is plain arithmetic. `a` and `b`
/// must be pure (both are evaluated).
pub fn select(c: Expr, a: Expr, b: Expr) -> Expr {
    let c = if is_boolean(&c) {
        c
    } else {
        bin(BinOp::Ne, c, Expr::Const(0))
    };
    bin(
        BinOp::BitXor,
        b.clone(),
        bin(
            BinOp::BitAnd,
            bin(BinOp::BitXor, a, b),
            Expr::Unary(UnOp::Neg, Box::new(c)),
        ),
    )
}

/// The parts `(c, a, b)` of an expression made by [`select`].
pub fn as_select(e: &Expr) -> Option<(&Expr, &Expr, &Expr)> {
    let Expr::Binary(BinOp::BitXor, b, rest) = e else {
        return None;
    };
    let Expr::Binary(BinOp::BitAnd, x, m) = &**rest else {
        return None;
    };
    let Expr::Binary(BinOp::BitXor, a, b2) = &**x else {
        return None;
    };
    let Expr::Unary(UnOp::Neg, c) = &**m else {
        return None;
    };
    (b == b2 && is_boolean(c)).then_some((&**c, &**a, &**b))
}

/// Simplifies an expression: constant folding and algebraic identities.
/// The result evaluates to the same value with the same host calls in the
/// same order, and fails exactly when the original fails.
pub fn simplify(e: &Expr) -> Expr {
    match e {
        Expr::Const(_) | Expr::Var(_) => e.clone(),
        Expr::Unary(op, a) => simplify_unary(*op, simplify(a)),
        Expr::Binary(op, a, b) => simplify_binary(*op, simplify(a), simplify(b)),
        Expr::And(a, b) => {
            let (a, b) = (simplify(a), simplify(b));
            match (&a, &b) {
                (Expr::Const(0), _) => Expr::Const(0),
                (Expr::Const(_), _) => truth(b),
                (_, Expr::Const(c)) if *c != 0 => truth(a),
                (_, Expr::Const(0)) if pure(&a) => Expr::Const(0),
                _ => Expr::And(Box::new(a), Box::new(b)),
            }
        }
        Expr::Or(a, b) => {
            let (a, b) = (simplify(a), simplify(b));
            match (&a, &b) {
                (Expr::Const(0), _) => truth(b),
                (Expr::Const(_), _) => Expr::Const(1),
                (_, Expr::Const(0)) => truth(a),
                (_, Expr::Const(_)) if pure(&a) => Expr::Const(1),
                _ => Expr::Or(Box::new(a), Box::new(b)),
            }
        }
        Expr::Call(f, args) => Expr::Call(*f, args.iter().map(simplify).collect()),
    }
}

/// `e != 0` as 0 or 1, simplified.
fn truth(e: Expr) -> Expr {
    if is_boolean(&e) {
        e
    } else {
        simplify_binary(BinOp::Ne, e, Expr::Const(0))
    }
}

fn simplify_unary(op: UnOp, a: Expr) -> Expr {
    match (op, a) {
        (op, Expr::Const(c)) => Expr::Const(op.apply(c)),
        (UnOp::Neg, Expr::Unary(UnOp::Neg, x)) | (UnOp::BitNot, Expr::Unary(UnOp::BitNot, x)) => *x,
        (UnOp::Not, Expr::Binary(c, x, y)) if is_compare(c) => {
            Expr::Binary(negate_compare(c), x, y)
        }
        (UnOp::Not, Expr::Unary(UnOp::Not, x)) => truth(*x),
        (UnOp::Not, x) => bin(BinOp::Eq, x, Expr::Const(0)),
        (op, a) => Expr::Unary(op, Box::new(a)),
    }
}

fn simplify_binary(op: BinOp, a: Expr, b: Expr) -> Expr {
    use BinOp::*;
    use Expr::Const;
    if let (Const(x), Const(y)) = (&a, &b)
        && let Some(v) = op.apply(*x, *y)
    {
        return Const(v);
    }
    // Constants to the right.
    let (op, a, b) = match (&a, &b) {
        (Const(_), r) if !matches!(r, Const(_)) && (commutes(op) || is_compare(op)) => {
            (mirror_compare(op), b, a)
        }
        _ => (op, a, b),
    };
    if let Const(c) = b {
        let c_ = c;
        match op {
            Add | BitOr | BitXor if c_ == 0 => return a,
            Shl | Shr if c_ & 63 == 0 => return a,
            Mul | Div if c_ == 1 => return a,
            BitAnd if c_ == -1 => return a,
            Mul | BitAnd if c_ == 0 && pure(&a) => return Const(0),
            Rem if (c_ == 1 || c_ == -1) && pure(&a) => return Const(0),
            Sub => return simplify_binary(Add, a, Const(c_.wrapping_neg())),
            Mul if c_ == -1 => return simplify_unary(UnOp::Neg, a),
            BitXor if c_ == -1 => return simplify_unary(UnOp::BitNot, a),
            _ => {}
        }
        // Reassociate constants: (x op c1) op c2.
        if let Expr::Binary(op2, x, y) = &a
            && let Const(c1) = **y
        {
            let merged = match (op, *op2) {
                (Add, Add) => Some(c1.wrapping_add(c_)),
                (BitAnd, BitAnd) => Some(c1 & c_),
                (BitOr, BitOr) => Some(c1 | c_),
                (BitXor, BitXor) => Some(c1 ^ c_),
                (Mul, Mul) => Some(c1.wrapping_mul(c_)),
                _ => None,
            };
            if let Some(m) = merged {
                return simplify_binary(op, (**x).clone(), Const(m));
            }
            // (x + c1) == c2  ->  x == c2 - c1 (addition is a bijection).
            if matches!(op, Eq | Ne) && *op2 == Add {
                return simplify_binary(op, (**x).clone(), Const(c_.wrapping_sub(c1)));
            }
            // ((x >> k) & m) with x's bits known... (not tracked).
        }
        // Comparisons of a boolean with 0 or 1.
        if is_boolean(&a) {
            match (op, c_) {
                (Ne, 0) | (Eq, 1) => return a,
                (Eq, 0) | (Ne, 1) => return simplify_unary(UnOp::Not, a),
                _ => {}
            }
        }
        // A shift by a constant takes the count modulo 64.
        if matches!(op, Shl | Shr) && !(0..64).contains(&c_) {
            return bin(op, a, Const(c_ & 63));
        }
        return bin(op, a, Const(c_));
    }
    if a == b && pure(&a) {
        match op {
            Sub | BitXor => return Const(0),
            BitAnd | BitOr => return a,
            Eq | Le | Ge => return Const(1),
            Ne | Lt | Gt => return Const(0),
            _ => {}
        }
    }
    bin(op, a, b)
}

// -- Constant and copy propagation -------------------------------------------------------

/// What is known about a slot: its value is a constant, or equal to
/// another slot.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Fact {
    Const(i64),
    Copy(u32),
}

type Facts = BTreeMap<u32, Fact>;

fn kill(f: &mut Facts, slot: u32) {
    f.remove(&slot);
    f.retain(|_, v| *v != Fact::Copy(slot));
}

fn subst(e: &Expr, f: &Facts) -> Expr {
    if f.is_empty() {
        return e.clone();
    }
    e.map_vars_expr(&mut |v| match f.get(&v) {
        Some(Fact::Const(c)) => Expr::Const(*c),
        Some(Fact::Copy(s)) => Expr::Var(*s),
        None => Expr::Var(v),
    })
}

trait MapVarsExpr {
    fn map_vars_expr(&self, f: &mut dyn FnMut(u32) -> Expr) -> Expr;
}

impl MapVarsExpr for Expr {
    fn map_vars_expr(&self, f: &mut dyn FnMut(u32) -> Expr) -> Expr {
        match self {
            Expr::Const(c) => Expr::Const(*c),
            Expr::Var(v) => f(*v),
            Expr::Unary(op, a) => Expr::Unary(*op, Box::new(a.map_vars_expr(f))),
            Expr::Binary(op, a, b) => Expr::Binary(
                *op,
                Box::new(a.map_vars_expr(f)),
                Box::new(b.map_vars_expr(f)),
            ),
            Expr::And(a, b) => {
                Expr::And(Box::new(a.map_vars_expr(f)), Box::new(b.map_vars_expr(f)))
            }
            Expr::Or(a, b) => Expr::Or(Box::new(a.map_vars_expr(f)), Box::new(b.map_vars_expr(f))),
            Expr::Call(g, args) => {
                Expr::Call(*g, args.iter().map(|a| a.map_vars_expr(f)).collect())
            }
        }
    }
}

fn assign_fact(f: &mut Facts, slot: u32, value: &Expr) {
    kill(f, slot);
    match value {
        Expr::Const(c) => {
            f.insert(slot, Fact::Const(*c));
        }
        Expr::Var(s) if *s != slot => {
            f.insert(slot, Fact::Copy(*s));
        }
        _ => {}
    }
}

/// The facts a branch establishes on its taken (`then`) or fall-through edge.
fn branch_facts(f: &mut Facts, cond: &Expr, taken: bool) {
    match (cond, taken) {
        (Expr::Var(s), false) => {
            kill(f, *s);
            f.insert(*s, Fact::Const(0));
        }
        (Expr::Binary(BinOp::Eq, x, y), true) | (Expr::Binary(BinOp::Ne, x, y), false) => {
            if let (Expr::Var(s), Expr::Const(c)) = (&**x, &**y) {
                kill(f, *s);
                f.insert(*s, Fact::Const(*c));
            }
        }
        (Expr::And(a, b), true) => {
            branch_facts(f, a, true);
            branch_facts(f, b, true);
        }
        (Expr::Or(a, b), false) => {
            branch_facts(f, a, false);
            branch_facts(f, b, false);
        }
        _ => {}
    }
}

fn meet(a: &Facts, b: &Facts) -> Facts {
    a.iter()
        .filter(|(k, v)| b.get(k) == Some(v))
        .map(|(k, v)| (*k, *v))
        .collect()
}

/// The facts on each outgoing edge of a block, given the facts at its start.
fn block_out(b: &Block, mut f: Facts) -> Vec<(BlockId, Facts)> {
    for i in &b.insts {
        if let Inst::Assign { slot, value } = i {
            let v = simplify(&subst(value, &f));
            assign_fact(&mut f, *slot, &v);
        }
    }
    match &b.term {
        Term::Branch { cond, then, els } => {
            let c = simplify(&subst(cond, &f));
            let (mut t, mut e) = (f.clone(), f);
            branch_facts(&mut t, &c, true);
            branch_facts(&mut e, &c, false);
            vec![(*then, t), (*els, e)]
        }
        Term::Recv {
            slots, got, empty, ..
        } => {
            let mut g = f.clone();
            for s in slots {
                kill(&mut g, *s);
            }
            vec![(*got, g), (*empty, f)]
        }
        t => successors(t).into_iter().map(|s| (s, f.clone())).collect(),
    }
}

/// Propagates constants and copies; true if anything changed.
fn propagate(g: &mut Graph) -> bool {
    let order = reverse_postorder(g);
    let n = g.blocks.len();
    let mut input: Vec<Option<Facts>> = vec![None; n];
    for &e in &g.entries {
        input[e as usize] = Some(Facts::new());
    }
    let mut changed = true;
    let mut rounds = 0;
    while changed && rounds < 100 {
        changed = false;
        rounds += 1;
        for &b in &order {
            let Some(f) = input[b as usize].clone() else {
                continue;
            };
            for (s, out) in block_out(&g.blocks[b as usize], f) {
                let slot = &mut input[s as usize];
                let new = match slot {
                    None => out,
                    Some(old) => meet(old, &out),
                };
                if slot.as_ref() != Some(&new) {
                    *slot = Some(new);
                    changed = true;
                }
            }
        }
    }
    if changed {
        // Not at a fixed point (should not happen: facts only shrink).
        return false;
    }
    let mut any = false;
    for &b in &order {
        let Some(mut f) = input[b as usize].clone() else {
            continue;
        };
        let block = &mut g.blocks[b as usize];
        for i in &mut block.insts {
            match i {
                Inst::Assign { slot, value } => {
                    let v = simplify(&subst(value, &f));
                    if v != *value {
                        *value = v.clone();
                        any = true;
                    }
                    assign_fact(&mut f, *slot, &v);
                }
                Inst::Eval(e) => {
                    let v = simplify(&subst(e, &f));
                    if v != *e {
                        *e = v;
                        any = true;
                    }
                }
            }
        }
        match &mut block.term {
            Term::Branch { cond, .. } => {
                let v = simplify(&subst(cond, &f));
                if v != *cond {
                    *cond = v;
                    any = true;
                }
            }
            Term::Send { args, .. } => {
                for a in args.iter_mut() {
                    if let Operand::Var(v) = a {
                        let new = match f.get(v) {
                            Some(Fact::Const(c)) => Operand::Const(*c),
                            Some(Fact::Copy(s)) => Operand::Var(*s),
                            None => continue,
                        };
                        *a = new;
                        any = true;
                    }
                }
            }
            _ => {}
        }
    }
    any
}

// -- Branch folding and clean-up ------------------------------------------------------

/// Folds constant branches; true if anything changed.
fn fold_branches(g: &mut Graph) -> bool {
    let mut any = false;
    for b in &mut g.blocks {
        let Term::Branch { cond, then, els } = &mut b.term else {
            continue;
        };
        let to = match &*cond {
            Expr::Const(c) => Some(if *c != 0 { *then } else { *els }),
            _ if then == els => Some(*then),
            _ => None,
        };
        if let Some(t) = to {
            if !pure(cond) {
                b.insts.push(Inst::Eval(cond.clone()));
            }
            b.term = Term::Jump(t);
            any = true;
            continue;
        }
        // `if (x == 0)` as `if (x)` with the targets swapped.
        let inner = match &*cond {
            Expr::Unary(UnOp::Not, x) => Some((**x).clone()),
            Expr::Binary(BinOp::Eq, x, y) if **y == Expr::Const(0) => Some((**x).clone()),
            _ => None,
        };
        if let Some(x) = inner {
            *cond = x;
            std::mem::swap(then, els);
            any = true;
        }
    }
    any
}

/// Drops unreachable blocks, threads jumps through empty blocks and merges
/// straight chains; true if anything changed.
fn cleanup(g: &mut Graph) -> bool {
    let mut any = false;
    // Thread through empty `Jump` blocks.
    let n = g.blocks.len();
    let forward: Vec<Option<BlockId>> = g
        .blocks
        .iter()
        .map(|b| match b.term {
            Term::Jump(t) if b.insts.is_empty() => Some(t),
            _ => None,
        })
        .collect();
    let resolve = |mut b: BlockId| {
        let mut steps = 0;
        while let Some(t) = forward[b as usize] {
            if t == b || steps > n {
                break;
            }
            b = t;
            steps += 1;
        }
        b
    };
    for b in 0..n {
        let mut term = g.blocks[b].term.clone();
        for t in term.targets_mut() {
            let r = resolve(*t);
            if r != *t {
                *t = r;
                any = true;
            }
        }
        g.blocks[b].term = term;
    }
    // Merge a block into its only predecessor's `Jump`.
    let mut preds = predecessor_counts(g);
    for b in 0..g.blocks.len() {
        while let Term::Jump(t) = g.blocks[b].term {
            if t as usize == b || preds[t as usize] != 1 {
                break;
            }
            let next = std::mem::replace(
                &mut g.blocks[t as usize],
                Block {
                    insts: vec![],
                    term: Term::Jump(t),
                    note: String::new(),
                },
            );
            preds[t as usize] = 0;
            let blk = &mut g.blocks[b];
            blk.insts.extend(next.insts);
            blk.term = next.term;
            any = true;
        }
    }
    any |= dedup(g);
    any | compact(g)
}

/// Merges blocks with the same instructions and terminator (after
/// specialization, the copies that no value distinguishes any more);
/// true if any were merged.
fn dedup(g: &mut Graph) -> bool {
    let mut any = false;
    loop {
        let mut seen: HashMap<String, BlockId> = HashMap::new();
        let mut map: Vec<BlockId> = (0..g.blocks.len() as BlockId).collect();
        let mut merged = false;
        for &b in &reverse_postorder(g) {
            let blk = &g.blocks[b as usize];
            let key = format!("{:?}{:?}", blk.insts, blk.term);
            match seen.get(&key) {
                Some(&r) => {
                    map[b as usize] = r;
                    merged = true;
                }
                None => {
                    seen.insert(key, b);
                }
            }
        }
        if !merged {
            return any;
        }
        any = true;
        for blk in &mut g.blocks {
            for t in blk.term.targets_mut() {
                *t = map[*t as usize];
            }
        }
        for e in &mut g.entries {
            *e = map[*e as usize];
        }
        compact(g);
    }
}

/// Removes unreachable blocks and renumbers; true if any were removed.
fn compact(g: &mut Graph) -> bool {
    let order = reverse_postorder(g);
    if order.len() == g.blocks.len() {
        return false;
    }
    // Keep the original relative order for readability.
    let mut keep = vec![false; g.blocks.len()];
    for &b in &order {
        keep[b as usize] = true;
    }
    let mut map = vec![u32::MAX; g.blocks.len()];
    let mut blocks = Vec::with_capacity(order.len());
    for (i, b) in std::mem::take(&mut g.blocks).into_iter().enumerate() {
        if keep[i] {
            map[i] = blocks.len() as u32;
            blocks.push(b);
        }
    }
    for b in &mut blocks {
        for t in b.term.targets_mut() {
            *t = map[*t as usize];
        }
    }
    for e in &mut g.entries {
        *e = map[*e as usize];
    }
    g.blocks = blocks;
    true
}

// -- Liveness in the graph and dead-code elimination ---------------------------------------

struct GraphLive {
    /// Live at the start of each block.
    live_in: Vec<Bits>,
    /// Live at each `Leave` (indexed by block).
    leave: Vec<Bits>,
}

/// Backward liveness over the graph, seeded at each `Leave` by the
/// process-based liveness at the pcs it stores.
fn graph_liveness(program: &Program, layout: &Layout, lv: &Liveness, g: &Graph) -> GraphLive {
    let n = g.blocks.len();
    let width = layout.slots as usize + g.locals as usize;
    let leave: Vec<Bits> = g
        .blocks
        .iter()
        .map(|b| match &b.term {
            Term::Leave { pcs, .. } => lv.leave_slots(program, layout, pcs),
            _ => Bits::new(width),
        })
        .collect();
    // Per block: what its instructions read before writing (gen) and
    // write (kill), so that the fixed point only combines bit sets.
    let mut gen_ = vec![Bits::new(width); n];
    let mut kill = vec![Bits::new(width); n];
    for (b, blk) in g.blocks.iter().enumerate() {
        for i in blk.insts.iter().rev() {
            match i {
                Inst::Assign { slot, value } => {
                    gen_[b].clear(*slot);
                    kill[b].set(*slot);
                    expr_uses(value, &mut gen_[b]);
                }
                Inst::Eval(e) => expr_uses(e, &mut gen_[b]),
            }
        }
    }
    let mut preds: Vec<Vec<BlockId>> = vec![Vec::new(); n];
    for (b, blk) in g.blocks.iter().enumerate() {
        for s in successors(&blk.term) {
            if let Some(p) = preds.get_mut(s as usize) {
                p.push(b as BlockId);
            }
        }
    }
    let mut live_in = vec![Bits::new(width); n];
    let mut queued = vec![true; n];
    let mut work: Vec<BlockId> = reverse_postorder(g);
    work.reverse();
    let mut work: std::collections::VecDeque<BlockId> = work.into();
    while let Some(b) = work.pop_front() {
        queued[b as usize] = false;
        let blk = &g.blocks[b as usize];
        let mut l = term_live(blk, &leave[b as usize], &live_in, width);
        for (w, k) in l.0.iter_mut().zip(kill[b as usize].0.iter()) {
            *w &= !k;
        }
        l.union_with(&gen_[b as usize]);
        if live_in[b as usize] != l {
            live_in[b as usize] = l;
            for &p in &preds[b as usize] {
                if !queued[p as usize] {
                    queued[p as usize] = true;
                    work.push_back(p);
                }
            }
        }
    }
    GraphLive { live_in, leave }
}

/// Graph liveness for the code generator: the slots live at the start of
/// each block, and at each block's `Leave` (empty for other blocks).
pub(crate) fn graph_live(
    program: &Program,
    layout: &Layout,
    lv: &Liveness,
    g: &Graph,
) -> (Vec<Bits>, Vec<Bits>) {
    let gl = graph_liveness(program, layout, lv, g);
    (gl.live_in, gl.leave)
}

/// Live at the end of the block's instructions (before its terminator
/// executes, counting what the terminator reads).
fn term_live(b: &Block, leave: &Bits, live_in: &[Bits], width: usize) -> Bits {
    let get = |s: BlockId| {
        live_in
            .get(s as usize)
            .cloned()
            .unwrap_or_else(|| Bits::new(width))
    };
    match &b.term {
        Term::Jump(t) => get(*t),
        Term::Branch { cond, then, els } => {
            let mut l = get(*then);
            l.union_with(&get(*els));
            expr_uses(cond, &mut l);
            l
        }
        Term::Recv {
            slots, got, empty, ..
        } => {
            let mut l = get(*got);
            for s in slots {
                l.clear(*s);
            }
            l.union_with(&get(*empty));
            l
        }
        Term::Send { args, next, .. } => {
            let mut l = get(*next);
            for a in args {
                if let Operand::Var(v) = a {
                    l.set(*v);
                }
            }
            l
        }
        Term::Count { next, over, .. } => {
            let mut l = get(*next);
            l.union_with(&get(*over));
            l
        }
        Term::Leave { .. } => leave.clone(),
    }
}

/// Removes assignments to dead slots; true if anything changed.
fn eliminate_dead(program: &Program, layout: &Layout, lv: &Liveness, g: &mut Graph) -> bool {
    let gl = graph_liveness(program, layout, lv, g);
    let width = layout.slots as usize + g.locals as usize;
    let mut any = false;
    for b in 0..g.blocks.len() {
        let block = &g.blocks[b];
        let mut l = term_live(block, &gl.leave[b], &gl.live_in, width);
        let mut keep: Vec<Option<Inst>> = Vec::with_capacity(block.insts.len());
        for i in block.insts.iter().rev() {
            match i {
                Inst::Assign { slot, value } => {
                    if l.get(*slot) {
                        l.clear(*slot);
                        expr_uses(value, &mut l);
                        keep.push(Some(i.clone()));
                    } else {
                        any = true;
                        if !pure(value) {
                            expr_uses(value, &mut l);
                            keep.push(Some(Inst::Eval(value.clone())));
                        }
                    }
                }
                Inst::Eval(e) => {
                    if pure(e) {
                        any = true;
                    } else {
                        expr_uses(e, &mut l);
                        keep.push(Some(Inst::Eval(e.clone())));
                    }
                }
            }
        }
        keep.reverse();
        g.blocks[b].insts = keep.into_iter().flatten().collect();
    }
    any
}

// -- Lazy execution: sinking assignments toward the leaves that need them ----------------

/// Moves assignments whose value only some successors need into those
/// successors (splitting edges into blocks with several predecessors).
/// True if anything moved.
fn sink(program: &Program, layout: &Layout, lv: &Liveness, g: &mut Graph) -> bool {
    let mut any = false;
    let budget = g.blocks.len() * 4 + 64;
    let mut added = 0;
    let mut moves = 0usize;
    let mut rounds = 0;
    'outer: loop {
        // Each round moves assignments one block on; long chains stop here
        // (what has not moved yet is still correct where it is).
        rounds += 1;
        if rounds > 48 {
            break;
        }
        let gl = graph_liveness(program, layout, lv, g);
        let preds = predecessor_counts(g);
        // One round moves many assignments, each decided on this round's
        // liveness: so no two may share a slot (the assigned one or one
        // their values read), and no block is looked at once changed.
        let mut touched = Bits::new(0);
        let mut changed = vec![false; g.blocks.len()];
        let mut moved = false;
        for b in 0..g.blocks.len() {
            if changed[b] {
                continue;
            }
            let block = &g.blocks[b];
            let succs = successors(&block.term);
            if succs.len() < 2
                || succs
                    .iter()
                    .any(|s| changed.get(*s as usize) != Some(&false))
            {
                continue;
            }
            // An assignment that can move to the end of the block and past
            // its terminator.
            let movable = (0..block.insts.len()).rev().find(|&i| {
                let Inst::Assign { slot, value } = &block.insts[i] else {
                    return false;
                };
                let mut clash = touched.get(*slot);
                value.for_each_var(&mut |v| clash |= touched.get(v));
                !clash
                    && pure(value)
                    && size(value) <= 12
                    && !term_touches(&block.term, *slot, value)
                    && block.insts[i + 1..]
                        .iter()
                        .all(|j| can_swap(&block.insts[i], j))
                    && {
                        let succs_need = succs
                            .iter()
                            .filter(|s| gl.live_in[**s as usize].get(*slot))
                            .count();
                        // Partly dead: sink into the successors that need it.
                        // Needed by all: still worth sinking into them when
                        // each is theirs alone and one of them lets it pass
                        // on (its value may be dead further down).
                        succs_need < succs.len()
                            || (succs
                                .iter()
                                .all(|s| preds[*s as usize] == 1 && *s as usize != b)
                                && succs
                                    .iter()
                                    .any(|s| passes(&g.blocks[*s as usize], &block.insts[i])))
                    }
            });
            let Some(i) = movable else {
                continue;
            };
            let Inst::Assign { slot, value } = &block.insts[i] else {
                continue;
            };
            let (slot, value) = (*slot, value.clone());
            let mut need: Vec<BlockId> = succs
                .iter()
                .copied()
                .filter(|s| gl.live_in[*s as usize].get(slot))
                .collect();
            need.sort_unstable();
            need.dedup();
            moves += 1;
            if added + need.len() > budget || moves > 50 * budget {
                break 'outer;
            }
            touched.set(slot);
            value.for_each_var(&mut |v| touched.set(v));
            changed[b] = true;
            g.blocks[b].insts.remove(i);
            for s in need {
                changed[s as usize] = true;
                if preds[s as usize] == 1 {
                    g.blocks[s as usize].insts.insert(
                        0,
                        Inst::Assign {
                            slot,
                            value: value.clone(),
                        },
                    );
                } else {
                    let nb = g.blocks.len() as BlockId;
                    let note = g.blocks[s as usize].note.clone();
                    g.blocks.push(Block {
                        insts: vec![Inst::Assign {
                            slot,
                            value: value.clone(),
                        }],
                        term: Term::Jump(s),
                        note,
                    });
                    added += 1;
                    for t in g.blocks[b].term.targets_mut() {
                        if *t == s {
                            *t = nb;
                        }
                    }
                }
            }
            moved = true;
            any = true;
        }
        if !moved {
            break;
        }
    }
    any
}

/// True when assignment `a`, put at the start of block `s`, could move past
/// all of it (its instructions and terminator).
fn passes(s: &Block, a: &Inst) -> bool {
    let Inst::Assign { slot, value } = a else {
        return false;
    };
    s.insts.iter().all(|j| can_swap(a, j))
        && !term_touches(&s.term, *slot, value)
        && !matches!(s.term, Term::Leave { .. })
}

/// True when the terminator reads `slot` or writes `slot` or a variable of
/// `value` (so the assignment cannot move past it).
fn term_touches(t: &Term, slot: u32, value: &Expr) -> bool {
    match t {
        Term::Branch { cond, .. } => mentions(cond, slot),
        Term::Recv { slots, .. } => slots.iter().any(|&s| s == slot || mentions(value, s)),
        Term::Send { args, .. } => args.contains(&Operand::Var(slot)),
        _ => false,
    }
}

/// True when instruction `a` (an assignment) can move after `b`.
fn can_swap(a: &Inst, b: &Inst) -> bool {
    let Inst::Assign { slot, value } = a else {
        return false;
    };
    if !pure(value) {
        return false;
    }
    match b {
        Inst::Assign {
            slot: s2,
            value: v2,
        } => *s2 != *slot && !mentions(v2, *slot) && !mentions(value, *s2),
        Inst::Eval(e) => !mentions(e, *slot),
    }
}

// -- Value specialization -----------------------------------------------------------------

/// The slots whose constant values would decide a branch: every variable
/// of a branch condition whose other variables are such slots too, and
/// that are assigned constants (or constant steps of themselves) somewhere.
fn control_slots(g: &Graph) -> Vec<u32> {
    let mut assigned_const = std::collections::HashSet::new();
    for b in &g.blocks {
        for i in &b.insts {
            if let Inst::Assign {
                slot,
                value: Expr::Const(_),
            } = i
            {
                assigned_const.insert(*slot);
            }
        }
    }
    let mut out = Vec::new();
    for b in &g.blocks {
        if let Term::Branch { cond, .. } = &b.term {
            let mut vars = Vec::new();
            cond.for_each_var(&mut |v| vars.push(v));
            if !vars.is_empty() && pure(cond) && vars.iter().all(|v| assigned_const.contains(v)) {
                out.extend(vars);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A control state of specialization: the known constant values of the
/// control slots (`None`: unknown).
type Valuation = Vec<Option<i64>>;

/// Clones blocks per valuation of the control slots, folding the branches
/// the values decide; gives up (leaving the graph unchanged) when the
/// specialized graph would exceed its budget. True if it changed anything.
fn specialize(program: &Program, layout: &Layout, lv: &Liveness, g: &mut Graph) -> bool {
    // Specialization multiplies blocks: only for graphs of modest size.
    if g.blocks.len() > 1000 {
        return false;
    }
    let mut control = control_slots(g);
    if control.is_empty() {
        return false;
    }
    let live = graph_liveness(program, layout, lv, g).live_in;
    let limit = (g.blocks.len() * 3).clamp(64, 2048);
    // Drop control slots that take too many values, until it fits.
    for _ in 0..8 {
        match try_specialize(g, &control, &live, limit) {
            Ok(Some(new)) => {
                let changed = new.blocks.len() != g.blocks.len() || new != *g;
                *g = new;
                return changed;
            }
            Ok(None) => return false,
            Err(worst) => {
                control.retain(|&c| c != worst);
                if control.is_empty() {
                    return false;
                }
            }
        }
    }
    false
}

/// `Ok(Some(graph))` when specialization pays off, `Ok(None)` when nothing
/// is decided by the control slots, `Err(slot)` naming the control slot that
/// took the most values when the budget was exceeded.
fn try_specialize(
    g: &Graph,
    control: &[u32],
    live: &[Bits],
    limit: usize,
) -> Result<Option<Graph>, u32> {
    let index: HashMap<u32, usize> = control.iter().enumerate().map(|(i, &s)| (s, i)).collect();
    let mut states: HashMap<(BlockId, Valuation), BlockId> = HashMap::new();
    let mut work: Vec<(BlockId, Valuation)> = Vec::new();
    let mut blocks: Vec<Block> = Vec::new();
    let mut values: Vec<std::collections::HashSet<i64>> = vec![Default::default(); control.len()];
    let mut decided = false;
    let new_of = |key: (BlockId, Valuation),
                  states: &mut HashMap<(BlockId, Valuation), BlockId>,
                  work: &mut Vec<(BlockId, Valuation)>,
                  blocks: &mut Vec<Block>|
     -> BlockId {
        // Values of slots dead at the block distinguish nothing.
        let mut key = key;
        for (k, v) in key.1.iter_mut().enumerate() {
            if !live[key.0 as usize].get(control[k]) {
                *v = None;
            }
        }
        if let Some(&id) = states.get(&key) {
            return id;
        }
        let id = blocks.len() as BlockId;
        blocks.push(Block {
            insts: vec![],
            term: Term::Jump(id),
            note: String::new(),
        });
        states.insert(key.clone(), id);
        work.push(key);
        id
    };
    let unknown: Valuation = vec![None; control.len()];
    let entries: Vec<BlockId> = g
        .entries
        .iter()
        .map(|&e| new_of((e, unknown.clone()), &mut states, &mut work, &mut blocks))
        .collect();
    while let Some((b, val)) = work.pop() {
        if blocks.len() > limit {
            let worst = (0..control.len())
                .max_by_key(|&i| values[i].len())
                .unwrap_or(0);
            return Err(control[worst]);
        }
        let id = states[&(b, val.clone())];
        let src = &g.blocks[b as usize];
        let mut v = val.clone();
        let mut insts = Vec::with_capacity(src.insts.len());
        for i in &src.insts {
            let i = match i {
                Inst::Assign { slot, value } => {
                    let value = simplify(&subst_val(value, control, &v));
                    if let Some(&k) = index.get(slot) {
                        v[k] = match value {
                            Expr::Const(c) => {
                                values[k].insert(c);
                                Some(c)
                            }
                            _ => None,
                        };
                    }
                    Inst::Assign { slot: *slot, value }
                }
                Inst::Eval(e) => Inst::Eval(e.clone()),
            };
            insts.push(i);
        }
        let edge =
            |t: BlockId,
             v: Valuation,
             states: &mut HashMap<(BlockId, Valuation), BlockId>,
             work: &mut Vec<(BlockId, Valuation)>,
             blocks: &mut Vec<Block>| { new_of((t, v), states, work, blocks) };
        let term = match &src.term {
            Term::Branch { cond, then, els } => {
                let c = simplify(&subst_val(cond, control, &v));
                match c {
                    Expr::Const(x) => {
                        decided = true;
                        let t = if x != 0 { *then } else { *els };
                        Term::Jump(edge(t, v, &mut states, &mut work, &mut blocks))
                    }
                    c => {
                        let (mut vt, mut ve) = (v.clone(), v);
                        refine(&c, true, &index, &mut vt);
                        refine(&c, false, &index, &mut ve);
                        Term::Branch {
                            cond: c,
                            then: edge(*then, vt, &mut states, &mut work, &mut blocks),
                            els: edge(*els, ve, &mut states, &mut work, &mut blocks),
                        }
                    }
                }
            }
            Term::Recv {
                chan,
                slots,
                got,
                empty,
            } => {
                let mut vg = v.clone();
                for s in slots {
                    if let Some(&k) = index.get(s) {
                        vg[k] = None;
                    }
                }
                Term::Recv {
                    chan: *chan,
                    slots: slots.clone(),
                    got: edge(*got, vg, &mut states, &mut work, &mut blocks),
                    empty: edge(*empty, v, &mut states, &mut work, &mut blocks),
                }
            }
            Term::Jump(t) => Term::Jump(edge(*t, v, &mut states, &mut work, &mut blocks)),
            Term::Send { chan, args, next } => Term::Send {
                chan: *chan,
                args: args.clone(),
                next: edge(*next, v, &mut states, &mut work, &mut blocks),
            },
            Term::Count {
                counter,
                next,
                over,
            } => Term::Count {
                counter: *counter,
                next: edge(*next, v.clone(), &mut states, &mut work, &mut blocks),
                over: edge(*over, v, &mut states, &mut work, &mut blocks),
            },
            Term::Leave { pcs, why } => Term::Leave {
                pcs: pcs.clone(),
                why: *why,
            },
        };
        blocks[id as usize] = Block {
            insts,
            term,
            note: src.note.clone(),
        };
    }
    if !decided {
        return Ok(None);
    }
    let mut out = g.clone();
    out.blocks = blocks;
    out.entries = entries;
    Ok(Some(out))
}

fn subst_val(e: &Expr, control: &[u32], v: &Valuation) -> Expr {
    e.map_vars_expr(&mut |s| match control.iter().position(|&c| c == s) {
        Some(k) => match v[k] {
            Some(c) => Expr::Const(c),
            None => Expr::Var(s),
        },
        None => Expr::Var(s),
    })
}

fn refine(c: &Expr, taken: bool, index: &HashMap<u32, usize>, v: &mut Valuation) {
    let mut f = Facts::new();
    branch_facts(&mut f, c, taken);
    for (s, fact) in f {
        if let (Some(&k), Fact::Const(x)) = (index.get(&s), fact) {
            v[k] = Some(x);
        }
    }
}

// -- If-conversion ------------------------------------------------------------------------

/// Turns small diamonds `if (c) s = a; else s = b;` (and one-armed ifs)
/// whose arms only assign pure values into conditional selections; true if
/// any changed.
fn if_convert(g: &mut Graph) -> bool {
    let preds = predecessor_counts(g);
    let mut any = false;
    for b in 0..g.blocks.len() {
        let Term::Branch { cond, then, els } = &g.blocks[b].term else {
            continue;
        };
        if !pure(cond) || size(cond) > 8 {
            continue;
        }
        let (cond, then, els) = (cond.clone(), *then, *els);
        let arm = |x: BlockId| -> Option<(Option<(u32, Expr)>, BlockId)> {
            let blk = &g.blocks[x as usize];
            match (&blk.insts[..], &blk.term) {
                ([Inst::Assign { slot, value }], Term::Jump(j))
                    if preds[x as usize] == 1 && pure(value) && size(value) <= 8 =>
                {
                    Some((Some((*slot, value.clone())), *j))
                }
                _ => None,
            }
        };
        // Two-armed: both arms assign the same slot and join.
        let plan = match (arm(then), arm(els)) {
            (Some((Some((s1, a)), j1)), Some((Some((s2, e)), j2))) if s1 == s2 && j1 == j2 => {
                Some((s1, a, e, j1))
            }
            (Some((Some((s, a)), j)), _) if j == els => Some((s, a, Expr::Var(s), j)),
            (_, Some((Some((s, e)), j))) if j == then => Some((s, Expr::Var(s), e, j)),
            _ => None,
        };
        let Some((slot, a, e, join)) = plan else {
            continue;
        };
        let v = simplify(&select(cond, a, e));
        let blk = &mut g.blocks[b];
        blk.insts.push(Inst::Assign { slot, value: v });
        blk.term = Term::Jump(join);
        any = true;
    }
    any
}

// -- The driver ----------------------------------------------------------------------------

/// Optimizes a fast-path or automaton graph in place (§4.5). A graph that
/// names slots, blocks, counters, channels or processes that do not exist
/// is left unchanged (the code generator reports it).
pub fn optimize(program: &Program, g: &mut Graph) {
    if !well_formed(program, g) {
        return;
    }
    let layout = Layout::of(program);
    let lv = Liveness::of(program);
    let mut rounds = 0;
    let basic = |g: &mut Graph| {
        for _ in 0..16 {
            let mut changed = propagate(g);
            changed |= fold_branches(g);
            changed |= cleanup(g);
            changed |= eliminate_dead(program, &layout, &lv, g);
            if !changed {
                break;
            }
        }
    };
    basic(g);
    while rounds < 4 {
        rounds += 1;
        let mut changed = specialize(program, &layout, &lv, g);
        if changed {
            basic(g);
        }
        if if_convert(g) {
            changed = true;
            basic(g);
        }
        if !changed {
            break;
        }
    }
    if super::linear::linearize(g) {
        basic(g);
    }
    if sink(program, &layout, &lv, g) {
        basic(g);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: u32) -> Expr {
        Expr::Var(n)
    }
    fn c(n: i64) -> Expr {
        Expr::Const(n)
    }

    #[test]
    fn masks_merge_and_identities_vanish() {
        let e = bin(BinOp::BitAnd, bin(BinOp::BitAnd, v(0), c(0xFFFF)), c(0xFF));
        assert_eq!(simplify(&e), bin(BinOp::BitAnd, v(0), c(0xFF)));
        let e = bin(BinOp::Add, bin(BinOp::Sub, v(1), c(3)), c(3));
        assert_eq!(simplify(&e), v(1));
        let e = bin(BinOp::Ne, bin(BinOp::Lt, v(0), v(1)), c(0));
        assert_eq!(simplify(&e), bin(BinOp::Lt, v(0), v(1)));
        let e = Expr::Unary(UnOp::Not, Box::new(bin(BinOp::Lt, v(0), v(1))));
        assert_eq!(simplify(&e), bin(BinOp::Ge, v(0), v(1)));
        assert_eq!(
            simplify(&bin(BinOp::Lt, c(3), v(2))),
            bin(BinOp::Gt, v(2), c(3))
        );
    }

    #[test]
    fn folding_keeps_calls_and_faults() {
        let call = Expr::Call(0, vec![v(0)]);
        assert_eq!(
            simplify(&bin(BinOp::Mul, call.clone(), c(0))),
            bin(BinOp::Mul, call, c(0))
        );
        let div = bin(BinOp::Div, v(0), v(1));
        assert_eq!(
            simplify(&bin(BinOp::BitAnd, div.clone(), c(0))),
            bin(BinOp::BitAnd, div, c(0))
        );
        assert_eq!(
            simplify(&bin(BinOp::Div, c(4), c(0))),
            bin(BinOp::Div, c(4), c(0))
        );
        assert_eq!(simplify(&bin(BinOp::Div, c(i64::MIN), c(-1))), c(i64::MIN));
    }

    #[test]
    fn select_round_trips() {
        let s = select(bin(BinOp::Lt, v(0), c(3)), v(1), v(2));
        let (cnd, a, b) = as_select(&s).unwrap();
        assert_eq!((cnd, a, b), (&bin(BinOp::Lt, v(0), c(3)), &v(1), &v(2)));
        for x in [0i64, 2, 3, 9] {
            let vars = [x, 100, -7];
            let got = s.eval(&vars, &mut |_, _| 0).unwrap();
            assert_eq!(got, if x < 3 { 100 } else { -7 });
        }
    }

    #[test]
    fn bits_behave_as_a_set() {
        let mut b = Bits::new(10);
        b.set(3);
        b.set(130);
        assert!(b.get(3) && b.get(130) && !b.get(4));
        b.clear(3);
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![130]);
        let mut a = Bits::new(1);
        assert!(a.union_with(&b));
        assert!(!a.union_with(&b));
    }
}
