//! Counted loops of a graph: loops whose number of iterations is known
//! when they are entered, so that [`crate::fpgen`] charges their counter
//! once at the entry instead of once per iteration.
//!
//! A graph's loops that never yield carry a counter ([`Term::Count`], see
//! [`crate::explore`]) that counts down on every way round and aborts the
//! graph past its bound. On a tight loop that count is a third of the
//! loop's instructions and branches (`s = s + i; i = i + 1` took twice
//! as long with it). A loop is *counted* when
//!
//! - its blocks (a strongly connected component of the local edges: none
//!   out of a channel operation or to a counter's bound) are entered from
//!   outside only at one block, its head `h`;
//! - its blocks end in jumps, branches and `Count`s of one counter, and
//!   without its edges back to `h` it is acyclic;
//! - one of its branches, the test `T`, leaves the loop on one side, and
//!   on the other side holds `i < m` or `i != m` (`i > m` or `i != m` when
//!   `i` counts down; `m > i`, `!(i >= m)`, `i <= c` for a constant
//!   `c < i64::MAX` and the like too), with `i` and `m` slots (or `m` a
//!   constant), no block of the loop assigning `m`;
//! - `i` is assigned once in the loop, by `i = i + 1` (or `i = i - 1`);
//! - every way from `h` back to `h` passes `T`, the assignment of `i` once
//!   and the same number `K >= 1` of `Count`s, and the counts and
//!   increments done from `h` to any block are the same on every path
//!   (`c_T` and `d_T` at `T`).
//!
//! Entered with `i = i0`, the test then first sees `i0 ± d_T` and passes
//! exactly `N = m - (i0 + d_T)` times counting up (`(i0 - d_T) - m` down;
//! 0 when a `<` or `>` fails at once; modulo 2^64 for `!=`, which is
//! exact since `i` wraps as the loop wraps it), so a loop that leaves
//! through `T` counts `c_T + K * N`. When that fits in what is left of
//! the counter, the code charges it at the entry and runs a copy of the
//! loop without counts; otherwise it runs the loop as it is, which aborts
//! past the bound exactly where it always did.
//!
//! An earlier exit from the copy, from block `u` after `c` counts and
//! `d` increments on the way from `h`, gives back what the loop will not
//! count: `j` ways round done so far make `i = i0 ± (j + d)`, the loop
//! counted `K * j + c`, so the refund is
//! `K * (distance(i) + d - d_T) + c_T - c` with `distance(i) = m - i`
//! (`i - m` counting down). An exit to code from which no `Count` of the
//! counter is reachable needs none: the counter starts afresh at every
//! entry. For a loop whose test may fail at once (`<`, `>`) the refund at
//! an exit before the first test has nothing to count from, so a loop
//! with such an exit that can count again is not charged. The count left
//! after the loop, and so the point where a later loop of the same entry
//! aborts, is what counting every way round leaves.
//!
//! A loop that does not qualify (the bound or `i` changing elsewhere in
//! the body, an outer loop around another) counts every way round, as
//! before; its inner loops are looked for in it without its head.

use std::collections::HashMap;

use crate::fp::{BlockId, Graph, Term};
use crate::ir::{BinOp, Expr, UnOp};
use crate::opt;

/// A counted loop (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct CountedLoop {
    /// The block by which the loop is entered.
    pub(crate) head: BlockId,
    /// The block that tests `i` against `m` (the head, or a block every
    /// way round passes).
    pub(crate) test: BlockId,
    /// Per block of the graph: it belongs to the loop.
    pub(crate) inside: Vec<bool>,
    /// The counter the loop's `Count`s count.
    pub(crate) counter: u32,
    /// `K`: the counts of one way round.
    pub(crate) per_trip: u64,
    /// The counts and increments from the head to the test (`c_T`,
    /// `d_T`): the test first sees `i0 ± d_T`.
    pub(crate) at_test: (u64, u64),
    /// The slot of `i`.
    pub(crate) var: u32,
    /// `m`: a slot or a constant.
    pub(crate) bound: Expr,
    /// `i` counts up (`i = i + 1`), or down.
    pub(crate) up: bool,
    /// The test is `<` (`>` counting down), false for `!=`: when it fails
    /// at first the loop does not go round, whatever `distance` says.
    pub(crate) guarded: bool,
    /// Per block of the loop: what the way from the head has done by its
    /// end, the same on every path.
    pub(crate) done: HashMap<BlockId, Done>,
}

impl CountedLoop {
    /// `i` moved by `by` steps of the loop (wrapping, as the loop moves it).
    fn var_after(&self, by: u64) -> Expr {
        let i = Expr::Var(self.var);
        if by == 0 {
            return i;
        }
        let step = if self.up {
            by as i64
        } else {
            (by as i64).wrapping_neg()
        };
        Expr::Binary(BinOp::Add, Box::new(i), Box::new(Expr::Const(step)))
    }

    /// `m - x` counting up, `x - m` counting down (wrapping).
    fn distance_of(&self, x: Expr) -> Expr {
        let m = self.bound.clone();
        if self.up {
            Expr::Binary(BinOp::Sub, Box::new(m), Box::new(x))
        } else {
            Expr::Binary(BinOp::Sub, Box::new(x), Box::new(m))
        }
    }

    /// At the entry: the times the test will pass, `N` (if it passes at
    /// first, for a guarded loop).
    pub(crate) fn trips(&self) -> Expr {
        self.distance_of(self.var_after(self.at_test.1))
    }

    /// At the entry, for a guarded loop: the test will pass at first.
    pub(crate) fn runs(&self) -> Expr {
        let op = if self.up { BinOp::Lt } else { BinOp::Gt };
        Expr::Binary(
            op,
            Box::new(self.var_after(self.at_test.1)),
            Box::new(self.bound.clone()),
        )
    }

    /// Anywhere in the loop: `m - i` counting up, `i - m` down.
    pub(crate) fn distance(&self) -> Expr {
        self.distance_of(Expr::Var(self.var))
    }
}

/// `a op b` with `op` a comparison, under `!` as many times as it comes:
/// the comparison that holds when `e` is nonzero (`positive`) or zero.
fn comparison(e: &Expr, positive: bool) -> Option<(BinOp, &Expr, &Expr)> {
    match e {
        Expr::Unary(UnOp::Not, x) => comparison(x, !positive),
        Expr::Binary(op, a, b) if opt::is_compare(*op) => {
            let op = if positive {
                *op
            } else {
                opt::negate_compare(*op)
            };
            Some((op, a, b))
        }
        _ => None,
    }
}

/// The step of `i = i + 1`, `i = 1 + i`, `i = i - 1`, `i = i + -1`,
/// `i = -1 + i`: `Some(true)` up, `Some(false)` down.
fn step(var: u32, value: &Expr) -> Option<bool> {
    let (op, a, b) = match value {
        Expr::Binary(op, a, b) => (*op, a.as_ref(), b.as_ref()),
        _ => return None,
    };
    let k = match (op, a, b) {
        (BinOp::Add, Expr::Var(v), Expr::Const(k)) | (BinOp::Add, Expr::Const(k), Expr::Var(v))
            if *v == var =>
        {
            *k
        }
        (BinOp::Sub, Expr::Var(v), Expr::Const(k)) if *v == var => k.wrapping_neg(),
        _ => return None,
    };
    match k {
        1 => Some(true),
        -1 => Some(false),
        _ => None,
    }
}

/// The counted loops of `g` (see the module docs), with disjoint blocks.
pub(crate) fn counted_loops(g: &Graph) -> Vec<CountedLoop> {
    let n = g.blocks.len();
    let full: Vec<Vec<usize>> = g
        .blocks
        .iter()
        .map(|b| {
            opt::successors(&b.term)
                .into_iter()
                .map(|s| s as usize)
                .filter(|&s| s < n)
                .collect()
        })
        .collect();
    // The edges of local loops: none out of a channel operation, nor to a
    // counter's bound.
    let local: Vec<Vec<usize>> = g
        .blocks
        .iter()
        .map(|b| match &b.term {
            Term::Jump(x) | Term::Count { next: x, .. } => vec![*x as usize],
            Term::Branch { then, els, .. } => vec![*then as usize, *els as usize],
            Term::Recv { .. } | Term::Send { .. } | Term::Leave { .. } => Vec::new(),
        })
        .map(|v| v.into_iter().filter(|&s| s < n).collect())
        .collect();
    let mut out = Vec::new();
    let all: Vec<usize> = (0..n).collect();
    find(g, &full, &local, &all, 0, &mut out);
    out
}

/// The counted loops among `nodes`: each cyclic component of the local
/// edges between them is one, or, when it has one way in, the loops
/// inside it once its head is taken out.
fn find(
    g: &Graph,
    full: &[Vec<usize>],
    local: &[Vec<usize>],
    nodes: &[usize],
    depth: u32,
    out: &mut Vec<CountedLoop>,
) {
    if depth > 8 {
        return;
    }
    let n = g.blocks.len();
    let mut keep = vec![false; n];
    for &v in nodes {
        keep[v] = true;
    }
    let sub: Vec<Vec<usize>> = (0..n)
        .map(|v| {
            if keep[v] {
                local[v].iter().copied().filter(|&s| keep[s]).collect()
            } else {
                Vec::new()
            }
        })
        .collect();
    for comp in crate::fp::sccs(&sub) {
        let cyclic = comp.len() > 1 || sub[comp[0]].contains(&comp[0]);
        if !cyclic {
            continue;
        }
        let mut inside = vec![false; n];
        for &b in &comp {
            inside[b] = true;
        }
        let [h] = heads(g, full, &inside)[..] else {
            continue;
        };
        if let Some(l) = counted_loop(g, &inside, &comp, h) {
            out.push(l);
        } else {
            let rest: Vec<usize> = comp.iter().copied().filter(|&b| b != h).collect();
            find(g, full, local, &rest, depth + 1, out);
        }
    }
}

/// The blocks of a set entered from outside it (or by the graph's entries).
fn heads(g: &Graph, full: &[Vec<usize>], inside: &[bool]) -> Vec<usize> {
    let n = g.blocks.len();
    let mut heads: Vec<usize> = g
        .entries
        .iter()
        .map(|&e| e as usize)
        .filter(|&e| e < n && inside[e])
        .collect();
    for (v, ss) in full.iter().enumerate() {
        if !inside[v] {
            heads.extend(ss.iter().copied().filter(|&s| inside[s]));
        }
    }
    heads.sort_unstable();
    heads.dedup();
    heads
}

fn counted_loop(g: &Graph, inside: &[bool], comp: &[usize], h: usize) -> Option<CountedLoop> {
    // The loop's blocks: jumps, branches and counts of one counter.
    let mut counter = None;
    for &v in comp {
        match &g.blocks[v].term {
            Term::Jump(_) | Term::Branch { .. } => {}
            Term::Count {
                counter: k, over, ..
            } => {
                if counter.is_some_and(|c| c != *k)
                    || inside.get(*over as usize).copied().unwrap_or(true)
                {
                    return None;
                }
                counter = Some(*k);
            }
            Term::Recv { .. } | Term::Send { .. } | Term::Leave { .. } => return None,
        }
    }
    let counter = counter?;
    // The test: a branch out of the loop on `i op m`, either way round.
    for &t in comp {
        let Term::Branch { cond, then, els } = &g.blocks[t].term else {
            continue;
        };
        let positive = match (
            inside.get(*then as usize).copied().unwrap_or(false),
            inside.get(*els as usize).copied().unwrap_or(false),
        ) {
            (true, false) => true,
            (false, true) => false,
            _ => continue,
        };
        let Some((op, a, b)) = comparison(cond, positive) else {
            continue;
        };
        let mut tries = Vec::new();
        if let Expr::Var(v) = a {
            tries.push((*v, op, b));
        }
        if let Expr::Var(v) = b {
            tries.push((*v, opt::mirror_compare(op), a));
        }
        for (var, op, bound) in tries {
            match bound {
                Expr::Var(m) if *m != var => {}
                Expr::Const(_) => {}
                _ => continue,
            }
            let shape = Shape {
                h,
                test: t,
                counter,
                var,
            };
            if let Some(l) = with_var(g, inside, comp, &shape, op, bound) {
                return Some(l);
            }
        }
    }
    None
}

/// A candidate: the loop's head, its test, its counter and `i`.
struct Shape {
    h: usize,
    test: usize,
    counter: u32,
    var: u32,
}

fn with_var(
    g: &Graph,
    inside: &[bool],
    comp: &[usize],
    shape: &Shape,
    op: BinOp,
    bound: &Expr,
) -> Option<CountedLoop> {
    let &Shape {
        h,
        test,
        counter,
        var,
    } = shape;
    // Exactly one assignment of `i`, an increment or a decrement; none of
    // `m`.
    let m = match bound {
        Expr::Var(m) => Some(*m),
        _ => None,
    };
    let mut incr: Option<(usize, bool)> = None;
    for &v in comp {
        for inst in &g.blocks[v].insts {
            if let crate::fp::Inst::Assign { slot, value } = inst {
                if Some(*slot) == m {
                    return None;
                }
                if *slot == var {
                    let up = step(var, value)?;
                    if incr.is_some() {
                        return None;
                    }
                    incr = Some((v, up));
                }
            }
        }
    }
    let (incr_block, up) = incr?;
    // The test, as `i < m` / `i != m` counting up, `i > m` / `i != m`
    // down; `<=` and `>=` against a constant that `i` can pass.
    let (guarded, bound) = match (up, op, bound) {
        (_, BinOp::Ne, b) => (false, b.clone()),
        (true, BinOp::Lt, b) | (false, BinOp::Gt, b) => (true, b.clone()),
        (true, BinOp::Le, Expr::Const(c)) if *c < i64::MAX => (true, Expr::Const(c + 1)),
        (false, BinOp::Ge, Expr::Const(c)) if *c > i64::MIN => (true, Expr::Const(c - 1)),
        _ => return None,
    };
    // The loop without its edges back to the head, in topological order.
    let n = g.blocks.len();
    let inner = |v: usize| -> Vec<usize> {
        match &g.blocks[v].term {
            // The bound's way out is not the loop's: never taken when the
            // count was charged.
            Term::Count { next, .. } => vec![*next as usize],
            t => opt::successors(t).into_iter().map(|s| s as usize).collect(),
        }
        .into_iter()
        .filter(|&s| s < n && inside[s])
        .collect()
    };
    let mut indeg = vec![0usize; n];
    for &v in comp {
        for s in inner(v) {
            if s != h {
                indeg[s] += 1;
            }
        }
    }
    let mut order = Vec::with_capacity(comp.len());
    let mut ready = vec![h];
    while let Some(v) = ready.pop() {
        order.push(v);
        for s in inner(v) {
            if s != h {
                indeg[s] -= 1;
                if indeg[s] == 0 {
                    ready.push(s);
                }
            }
        }
    }
    if order.len() != comp.len() {
        return None; // a cycle that does not pass the head
    }
    // What is done from the head to each block's end, the same on every
    // path; on every way back, the same `K` counts, one increment and the
    // test passed.
    let mut before: HashMap<usize, Done> = HashMap::new();
    before.insert(h, Done::default());
    let mut done: HashMap<BlockId, Done> = HashMap::new();
    let mut per_trip = None;
    for &v in &order {
        let b = *before.get(&v)?;
        let after = Done {
            counts: b.counts + u64::from(matches!(g.blocks[v].term, Term::Count { .. })),
            incrs: b.incrs + u64::from(v == incr_block),
            tested: b.tested || v == test,
        };
        done.insert(v as BlockId, after);
        for s in inner(v) {
            if s == h {
                if after.incrs != 1
                    || !after.tested
                    || after.counts == 0
                    || per_trip.is_some_and(|k| k != after.counts)
                {
                    return None;
                }
                per_trip = Some(after.counts);
            } else if *before.entry(s).or_insert(after) != after {
                return None;
            }
        }
    }
    let at_test = done[&(test as BlockId)];
    let l = CountedLoop {
        head: h as BlockId,
        inside: inside.to_vec(),
        counter,
        per_trip: per_trip?,
        at_test: (at_test.counts, at_test.incrs),
        var,
        bound,
        up,
        guarded,
        test: test as BlockId,
        done,
    };
    // The charge must be able to fit in the counter.
    if l.at_test.0 > g.counters.get(counter as usize).copied().unwrap_or(0) {
        return None;
    }
    // A loop that may not run at all (a failed `<`) has no iterations to
    // give back from at an exit before its first test: when such an exit
    // can count again, the loop is not charged.
    if guarded {
        let reaches = reaches_count(g, counter);
        for &u in comp {
            if l.done[&(u as BlockId)].tested {
                continue;
            }
            for x in opt::successors(&g.blocks[u].term) {
                let exit = !matches!(g.blocks[u].term, Term::Count { .. });
                if exit && !inside[x as usize] && reaches[x as usize] {
                    return None;
                }
            }
        }
    }
    Some(l)
}

/// The blocks from which a `Count` of `counter` is reachable.
pub(crate) fn reaches_count(g: &Graph, counter: u32) -> Vec<bool> {
    let n = g.blocks.len();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (b, blk) in g.blocks.iter().enumerate() {
        for s in opt::successors(&blk.term) {
            if (s as usize) < n {
                preds[s as usize].push(b);
            }
        }
    }
    let mut reach = vec![false; n];
    let mut todo: Vec<usize> = (0..n)
        .filter(|&b| matches!(g.blocks[b].term, Term::Count { counter: c, .. } if c == counter))
        .collect();
    while let Some(b) = todo.pop() {
        if !std::mem::replace(&mut reach[b], true) {
            todo.extend(&preds[b]);
        }
    }
    reach
}

/// What the way from a counted loop's head has done by a block's end.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Done {
    /// `Count`s of the loop's counter (the block's own included).
    pub(crate) counts: u64,
    /// Increments (or decrements) of `i`: 0 or 1.
    pub(crate) incrs: u64,
    /// The test has been passed.
    pub(crate) tested: bool,
}
