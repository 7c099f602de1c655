//! Fast-path and automaton graphs: the straight-line code that symbolic
//! execution (§4.2, [`crate::explore`]) extracts across process boundaries,
//! which [`crate::opt`] optimizes and [`crate::fpgen`] compiles through
//! vcode, and which [`run`] interprets as the reference.
//!
//! A graph works on the same flat variable array as the runtime (see
//! [`Layout`](crate::ir::Layout)): `Expr::Var(n)` is slot `n`. Control moves
//! between [`Block`]s; a graph ends in a [`Term::Leave`] that stores every
//! moved process's program counter and says why it left.

use crate::ir::{ChanId, Expr, Pc, ProcId};

/// A block's index in [`Graph::blocks`].
pub type BlockId = u32;

/// What a graph is for.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A fast path of a specification, entered from the process-based code.
    FastPath {
        /// True when the path contains a nondeterministic choice (an `alt`
        /// with more than one viable arm, or one of several waiting
        /// partners) or narrows an `alt` (leaves out an arm the path cannot
        /// continue with): the runtime then refuses to enter it now and then
        /// (§4.4).
        nondeterministic: bool,
    },
    /// The whole program as one product state machine (automata-based
    /// compilation, §4.1).
    Automaton,
}

/// An extracted graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    /// The fast path's name (the automaton's is `"automaton"`).
    pub name: String,
    /// What it is for.
    pub kind: Kind,
    /// The processes it moves, in specification order (every process, for an
    /// automaton).
    pub procs: Vec<ProcId>,
    /// The code.
    pub blocks: Vec<Block>,
    /// Where execution may begin: a fast path has one entry; an automaton's
    /// entry 0 is the program's start and entry `k` is the resume point of
    /// `Leave::Suspend { resume: k }`.
    pub entries: Vec<BlockId>,
    /// The bound of each repetition counter (§4.4); counters start at 0 on
    /// every entry.
    pub counters: Vec<u64>,
    /// Graph-local slots: slot numbers from the program's
    /// [`Layout::slots`](crate::ir::Layout) up to `slots + locals` are
    /// temporaries of the graph (the optimizer's), not process variables;
    /// they start undefined and are never stored back.
    pub locals: u32,
    /// How many control states symbolic execution visited.
    pub states: usize,
}

/// A basic block: instructions, then one terminator.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// The instructions, in order.
    pub insts: Vec<Inst>,
    /// Where control goes next.
    pub term: Term,
    /// A human-readable description of the control state it begins (for
    /// `fastpath esp dump`), e.g. `hostRequest@13 translateAddress@32`.
    pub note: String,
}

/// An instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum Inst {
    /// `slot = value`.
    Assign {
        /// The slot written.
        slot: u32,
        /// The value.
        value: Expr,
    },
    /// Evaluates an expression for its effect (a host call).
    Eval(Expr),
}

/// A value sent on an external channel: a slot or a constant.
pub use crate::ir::Operand;

/// How a block ends.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// Goes to a block.
    Jump(BlockId),
    /// Goes to `then` when `cond != 0`, else to `els`.
    Branch {
        /// The condition.
        cond: Expr,
        /// Taken when nonzero.
        then: BlockId,
        /// Taken when zero.
        els: BlockId,
    },
    /// Receives one message from an external-in channel into `slots` and
    /// goes to `got`; goes to `empty` (writing nothing) when the host has no
    /// message now.
    Recv {
        /// The channel.
        chan: ChanId,
        /// The slots written, one per field.
        slots: Vec<u32>,
        /// Taken after a message arrived.
        got: BlockId,
        /// Taken when none was available.
        empty: BlockId,
    },
    /// Sends one message on an external-out channel (the host always
    /// accepts) and goes to `next`.
    Send {
        /// The channel.
        chan: ChanId,
        /// The fields: slots (`Operand::Var`) or constants.
        args: Vec<Operand>,
        /// The next block.
        next: BlockId,
    },
    /// Adds one to a repetition counter; goes to `over` when the counter now
    /// exceeds its bound, else to `next` (§4.4).
    Count {
        /// The counter.
        counter: u32,
        /// Taken while within the bound.
        next: BlockId,
        /// Taken when the bound is exceeded.
        over: BlockId,
    },
    /// Leaves the graph: stores each listed process's program counter.
    Leave {
        /// The program counter of each moved process.
        pcs: Vec<(ProcId, Pc)>,
        /// Why.
        why: Leave,
    },
}

impl Term {
    /// Every block the terminator may go to, for rewriting.
    pub fn targets_mut(&mut self) -> Vec<&mut BlockId> {
        match self {
            Term::Jump(b) => vec![b],
            Term::Branch { then, els, .. } => vec![then, els],
            Term::Recv { got, empty, .. } => vec![got, empty],
            Term::Send { next, .. } => vec![next],
            Term::Count { next, over, .. } => vec![next, over],
            Term::Leave { .. } => vec![],
        }
    }
}

/// The strongly connected components of the graph on nodes
/// `0..succs.len()` (Tarjan's algorithm, iterative, so deep graphs cannot
/// overflow the stack), in the order Tarjan completes them (a component
/// comes before every component that reaches it), each listing its root,
/// the node the search entered it by, first.
pub(crate) fn sccs(succs: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = succs.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut out = Vec::new();
    let mut next = 0usize;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, next successor to visit)
        let mut call: Vec<(usize, usize)> = vec![(root, 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on[root] = true;
        while let Some(&mut (v, ref mut i)) = call.last_mut() {
            if *i < succs[v].len() {
                let w = succs[v][*i];
                *i += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on[w] = true;
                    call.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(parent, _)) = call.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on[w] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    comp.reverse();
                    out.push(comp);
                }
            }
        }
    }
    out
}

/// Why a graph returned control.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Leave {
    /// A process reached its `exit` element: the fast path's normal end.
    Exit,
    /// The path left the specification (or met a case it does not handle:
    /// a channel shared with a process outside the path, an empty external
    /// queue, an assertion or division that would fail, a repetition bound).
    /// The process-based code goes on from the stored state.
    Abort,
    /// An automaton found every process blocked; it resumes at
    /// `entries[resume]` once the host has offered more input.
    Suspend {
        /// The entry to resume at.
        resume: u32,
    },
}

// ---------------------------------------------------------------------------
// The reference interpreter of graphs.

use std::fmt;

use crate::error::{Error, Result};
use crate::ir::{BinOp, ExternId, Program, UnOp};

/// What a graph needs from its host while it runs: the external channels
/// and the host functions. The runtime implements it over its queues and
/// bindings; tests implement it over vectors.
pub trait Io {
    /// Receives one message of external-in channel `chan` into `dst` (its
    /// arity many fields): true if one was written, false if the host has
    /// none now.
    fn recv(&mut self, chan: ChanId, dst: &mut [i64]) -> bool;
    /// Sends one message on external-out channel `chan`.
    fn send(&mut self, chan: ChanId, src: &[i64]);
    /// Calls host function `f`.
    fn call(&mut self, f: ExternId, args: &[i64]) -> i64;
}

/// Runs graph `g` from `entries[entry]` over the flat variable array `vars`
/// until it leaves: stores the program counters of the leave into `pcs`
/// (indexed by process id) and returns why it left.
///
/// `vars` holds the program's slots ([`Layout`](crate::ir::Layout)); it
/// grows to hold the graph's locals when they are first used. Counters
/// start at 0. A graph that breaks its invariants (an id out of range, a
/// division by zero that its guards should have excluded) is an
/// [`Error::InvalidGraph`], never a panic.
pub fn run(
    g: &Graph,
    entry: u32,
    vars: &mut Vec<i64>,
    pcs: &mut [u32],
    io: &mut dyn Io,
) -> Result<Leave> {
    let bad = |msg: String| Error::InvalidGraph {
        graph: g.name.clone(),
        msg,
    };
    let mut m = Machine {
        vars,
        limit: 0,
        io,
        graph: &g.name,
    };
    // Slots past the array are the graph's locals; they may be created up to
    // `locals` past what the caller passed.
    m.limit = m.vars.len() + g.locals as usize;
    let mut counters = vec![0u64; g.counters.len()];
    let mut buf: Vec<i64> = Vec::new();
    let mut b = *g.entries.get(entry as usize).ok_or_else(|| {
        bad(format!(
            "no entry {entry} (the graph has {})",
            g.entries.len()
        ))
    })?;
    loop {
        let block = g
            .blocks
            .get(b as usize)
            .ok_or_else(|| bad(format!("no block b{b}")))?;
        for inst in &block.insts {
            match inst {
                Inst::Assign { slot, value } => {
                    let v = m.eval(value)?;
                    *m.slot(*slot)? = v;
                }
                Inst::Eval(e) => {
                    m.eval(e)?;
                }
            }
        }
        b = match &block.term {
            Term::Jump(t) => *t,
            Term::Branch { cond, then, els } => {
                if m.eval(cond)? != 0 {
                    *then
                } else {
                    *els
                }
            }
            Term::Recv {
                chan,
                slots,
                got,
                empty,
            } => {
                buf.clear();
                buf.resize(slots.len(), 0);
                if m.io.recv(*chan, &mut buf) {
                    for (s, v) in slots.iter().zip(&buf) {
                        *m.slot(*s)? = *v;
                    }
                    *got
                } else {
                    *empty
                }
            }
            Term::Send { chan, args, next } => {
                buf.clear();
                for a in args {
                    let v = match a {
                        Operand::Var(s) => *m.slot(*s)?,
                        Operand::Const(c) => *c,
                    };
                    buf.push(v);
                }
                m.io.send(*chan, &buf);
                *next
            }
            Term::Count {
                counter,
                next,
                over,
            } => {
                let i = *counter as usize;
                let bound = *g
                    .counters
                    .get(i)
                    .ok_or_else(|| bad(format!("no counter c{counter}")))?;
                counters[i] += 1;
                if counters[i] > bound { *over } else { *next }
            }
            Term::Leave { pcs: stored, why } => {
                for &(p, pc) in stored {
                    let n = pcs.len();
                    *pcs.get_mut(p as usize).ok_or_else(|| {
                        bad(format!("process {p} out of range (the program has {n})"))
                    })? = pc;
                }
                return Ok(*why);
            }
        };
    }
}

/// The state of [`run`] that expressions need.
struct Machine<'a> {
    vars: &'a mut Vec<i64>,
    limit: usize,
    io: &'a mut dyn Io,
    graph: &'a str,
}

impl Machine<'_> {
    fn slot(&mut self, s: u32) -> Result<&mut i64> {
        let s = s as usize;
        if s >= self.vars.len() {
            if s >= self.limit {
                return Err(Error::InvalidGraph {
                    graph: self.graph.to_string(),
                    msg: format!("slot {s} is neither a variable nor a local"),
                });
            }
            self.vars.resize(s + 1, 0);
        }
        Ok(&mut self.vars[s])
    }

    fn eval(&mut self, e: &Expr) -> Result<i64> {
        Ok(match e {
            Expr::Const(c) => *c,
            Expr::Var(v) => *self.slot(*v)?,
            Expr::Unary(op, a) => op.apply(self.eval(a)?),
            Expr::Binary(op, a, b) => {
                let a = self.eval(a)?;
                let b = self.eval(b)?;
                op.apply(a, b).ok_or_else(|| Error::InvalidGraph {
                    graph: self.graph.to_string(),
                    msg: "a division by zero that no guard excluded".into(),
                })?
            }
            Expr::And(a, b) => (self.eval(a)? != 0 && self.eval(b)? != 0) as i64,
            Expr::Or(a, b) => (self.eval(a)? != 0 || self.eval(b)? != 0) as i64,
            Expr::Call(f, args) => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(self.eval(a)?);
                }
                self.io.call(*f, &vals)
            }
        })
    }
}

// ---------------------------------------------------------------------------
// Readable pseudo-code.

impl Graph {
    /// The graph as readable pseudo-code: slots named `process.variable`,
    /// host functions and channels by name, program counters with the
    /// source line of their statement (`hostRequest@15(pc 7)`).
    ///
    /// ```text
    /// fastpath demo: hostRequest, translateAddress, networkSend (nondeterministic); 21 states
    ///   counters: c0 <= 65536
    ///   entry 0: b0
    /// b0:  // *hostRequest@11 translateAddress@32 networkSend@50
    ///   recv hostSendRequestC(hostRequest.virtualAddress, hostRequest.size) ? b1 : b2
    /// ```
    pub fn display<'a>(&'a self, program: &'a Program) -> impl fmt::Display + 'a {
        Show { g: self, program }
    }
}

struct Show<'a> {
    g: &'a Graph,
    program: &'a Program,
}

impl Show<'_> {
    fn slot(&self, s: u32) -> String {
        let mut base = 0u32;
        for p in &self.program.processes {
            let n = p.vars.len() as u32;
            if s < base + n {
                return format!("{}.{}", p.name, p.vars[(s - base) as usize].name);
            }
            base += n;
        }
        format!("$L{}", s - base)
    }

    fn chan(&self, c: ChanId) -> String {
        match self.program.channels.get(c as usize) {
            Some(ch) => ch.name.clone(),
            None => format!("channel{c}"),
        }
    }

    fn pc(&self, p: ProcId, pc: Pc) -> String {
        match self.program.processes.get(p as usize) {
            Some(proc) => match proc.nodes.get(pc as usize) {
                Some(n) => format!("{}@{}(pc {pc})", proc.name, n.pos.line),
                None => format!("{}(pc {pc})", proc.name),
            },
            None => format!("process{p}(pc {pc})"),
        }
    }

    fn operand(&self, o: &Operand) -> String {
        match o {
            Operand::Var(s) => self.slot(*s),
            Operand::Const(c) => c.to_string(),
        }
    }

    fn expr(&self, e: &Expr) -> String {
        let mut s = String::new();
        self.expr_into(e, 0, &mut s);
        s
    }

    /// Writes `e`, parenthesized when its precedence is below `min`.
    fn expr_into(&self, e: &Expr, min: u8, out: &mut String) {
        let (prec, text) = match e {
            Expr::Const(c) => (12, c.to_string()),
            Expr::Var(v) => (12, self.slot(*v)),
            Expr::Call(f, args) => {
                let name = match self.program.externs.get(*f as usize) {
                    Some(x) => x.name.clone(),
                    None => format!("extern{f}"),
                };
                let args: Vec<String> = args.iter().map(|a| self.expr(a)).collect();
                (12, format!("{name}({})", args.join(", ")))
            }
            Expr::Unary(op, a) => {
                let mut t = String::from(match op {
                    UnOp::Neg => "-",
                    UnOp::Not => "!",
                    UnOp::BitNot => "~",
                });
                self.expr_into(a, 11, &mut t);
                (11, t)
            }
            Expr::Binary(op, a, b) => {
                let (p, sym) = binop(*op);
                let mut t = String::new();
                self.expr_into(a, p, &mut t);
                t.push_str(&format!(" {sym} "));
                self.expr_into(b, p + 1, &mut t);
                (p, t)
            }
            Expr::And(a, b) | Expr::Or(a, b) => {
                let (p, sym) = if matches!(e, Expr::And(..)) {
                    (2, "&&")
                } else {
                    (1, "||")
                };
                let mut t = String::new();
                self.expr_into(a, p, &mut t);
                t.push_str(&format!(" {sym} "));
                self.expr_into(b, p + 1, &mut t);
                (p, t)
            }
        };
        if prec < min {
            out.push('(');
            out.push_str(&text);
            out.push(')');
        } else {
            out.push_str(&text);
        }
    }
}

/// C's precedence of a binary operator (higher binds tighter) and its symbol.
fn binop(op: BinOp) -> (u8, &'static str) {
    match op {
        BinOp::BitOr => (3, "|"),
        BinOp::BitXor => (4, "^"),
        BinOp::BitAnd => (5, "&"),
        BinOp::Eq => (6, "=="),
        BinOp::Ne => (6, "!="),
        BinOp::Lt => (7, "<"),
        BinOp::Le => (7, "<="),
        BinOp::Gt => (7, ">"),
        BinOp::Ge => (7, ">="),
        BinOp::Shl => (8, "<<"),
        BinOp::Shr => (8, ">>"),
        BinOp::Add => (9, "+"),
        BinOp::Sub => (9, "-"),
        BinOp::Mul => (10, "*"),
        BinOp::Div => (10, "/"),
        BinOp::Rem => (10, "%"),
    }
}

impl fmt::Display for Show<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.g;
        let procs: Vec<String> = g
            .procs
            .iter()
            .map(|&p| match self.program.processes.get(p as usize) {
                Some(proc) => proc.name.clone(),
                None => format!("process{p}"),
            })
            .collect();
        let what = match g.kind {
            Kind::FastPath { nondeterministic } => {
                format!(
                    "fastpath {}: {}{}",
                    g.name,
                    procs.join(", "),
                    if nondeterministic {
                        " (nondeterministic)"
                    } else {
                        ""
                    }
                )
            }
            Kind::Automaton => format!("{}: {}", g.name, procs.join(", ")),
        };
        writeln!(f, "{what}; {} states, {} blocks", g.states, g.blocks.len())?;
        if !g.counters.is_empty() {
            let cs: Vec<String> = g
                .counters
                .iter()
                .enumerate()
                .map(|(i, b)| format!("c{i} <= {b}"))
                .collect();
            writeln!(f, "  counters: {}", cs.join(", "))?;
        }
        if g.locals > 0 {
            writeln!(f, "  locals: {}", g.locals)?;
        }
        for (i, e) in g.entries.iter().enumerate() {
            writeln!(f, "  entry {i}: b{e}")?;
        }
        for (i, b) in g.blocks.iter().enumerate() {
            if b.note.is_empty() {
                writeln!(f, "b{i}:")?;
            } else {
                writeln!(f, "b{i}:  // {}", b.note)?;
            }
            for inst in &b.insts {
                match inst {
                    Inst::Assign { slot, value } => {
                        writeln!(f, "  {} = {}", self.slot(*slot), self.expr(value))?
                    }
                    Inst::Eval(e) => writeln!(f, "  {}", self.expr(e))?,
                }
            }
            match &b.term {
                Term::Jump(t) => writeln!(f, "  goto b{t}")?,
                Term::Branch { cond, then, els } => writeln!(
                    f,
                    "  if ({}) goto b{then} else goto b{els}",
                    self.expr(cond)
                )?,
                Term::Recv {
                    chan,
                    slots,
                    got,
                    empty,
                } => {
                    let s: Vec<String> = slots.iter().map(|s| self.slot(*s)).collect();
                    writeln!(
                        f,
                        "  recv {}({}) ? goto b{got} : empty goto b{empty}",
                        self.chan(*chan),
                        s.join(", ")
                    )?
                }
                Term::Send { chan, args, next } => {
                    let a: Vec<String> = args.iter().map(|a| self.operand(a)).collect();
                    writeln!(
                        f,
                        "  send {}({}); goto b{next}",
                        self.chan(*chan),
                        a.join(", ")
                    )?
                }
                Term::Count {
                    counter,
                    next,
                    over,
                } => writeln!(f, "  count c{counter} ? goto b{next} : over goto b{over}")?,
                Term::Leave { pcs, why } => {
                    let why = match why {
                        Leave::Exit => "exit".to_string(),
                        Leave::Abort => "abort".to_string(),
                        Leave::Suspend { resume } => format!("suspend (resume at entry {resume})"),
                    };
                    let p: Vec<String> = pcs.iter().map(|&(p, pc)| self.pc(p, pc)).collect();
                    writeln!(f, "  leave {why}: {}", p.join(" "))?
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoIo;

    impl Io for NoIo {
        fn recv(&mut self, _: ChanId, _: &mut [i64]) -> bool {
            false
        }
        fn send(&mut self, _: ChanId, _: &[i64]) {}
        fn call(&mut self, _: ExternId, args: &[i64]) -> i64 {
            args.iter().sum()
        }
    }

    fn graph(blocks: Vec<Block>, counters: Vec<u64>, locals: u32) -> Graph {
        Graph {
            name: "t".into(),
            kind: Kind::FastPath {
                nondeterministic: false,
            },
            procs: vec![0],
            blocks,
            entries: vec![0],
            counters,
            locals,
            states: 1,
        }
    }

    fn block(insts: Vec<Inst>, term: Term) -> Block {
        Block {
            insts,
            term,
            note: String::new(),
        }
    }

    /// A loop that counts slot 0 up with a graph local until its counter
    /// overflows: the counter's bound, locals and stored pcs.
    #[test]
    fn counters_locals_and_leaves() {
        let g = graph(
            vec![
                block(
                    vec![
                        Inst::Assign {
                            slot: 1,
                            value: Expr::Binary(
                                BinOp::Add,
                                Box::new(Expr::Var(0)),
                                Box::new(Expr::Const(1)),
                            ),
                        },
                        Inst::Assign {
                            slot: 0,
                            value: Expr::Call(0, vec![Expr::Var(1), Expr::Const(0)]),
                        },
                    ],
                    Term::Count {
                        counter: 0,
                        next: 0,
                        over: 1,
                    },
                ),
                block(
                    vec![],
                    Term::Leave {
                        pcs: vec![(0, 7)],
                        why: Leave::Abort,
                    },
                ),
            ],
            vec![4],
            1,
        );
        let mut vars = vec![10];
        let mut pcs = vec![0];
        assert_eq!(
            run(&g, 0, &mut vars, &mut pcs, &mut NoIo).unwrap(),
            Leave::Abort
        );
        // Five iterations: the fifth count exceeds the bound of 4.
        assert_eq!(vars, vec![15, 15]);
        assert_eq!(pcs, vec![7]);
        // Counters restart on every entry; the local slot is reused.
        assert_eq!(
            run(&g, 0, &mut vars, &mut pcs, &mut NoIo).unwrap(),
            Leave::Abort
        );
        assert_eq!(vars, vec![20, 20]);
    }

    #[test]
    fn invalid_graphs_are_errors() {
        let leave = |pcs| {
            block(
                vec![],
                Term::Leave {
                    pcs,
                    why: Leave::Exit,
                },
            )
        };
        let bad = |g: &Graph, vars: &mut Vec<i64>| {
            let e = run(g, 0, vars, &mut [0], &mut NoIo).unwrap_err();
            assert!(matches!(e, Error::InvalidGraph { .. }), "{e}");
        };
        bad(
            &graph(vec![block(vec![], Term::Jump(5))], vec![], 0),
            &mut vec![0],
        );
        bad(&graph(vec![leave(vec![(3, 0)])], vec![], 0), &mut vec![0]);
        let far = Inst::Assign {
            slot: 9,
            value: Expr::Const(1),
        };
        bad(
            &graph(vec![block(vec![far], Term::Jump(0))], vec![], 0),
            &mut vec![0],
        );
        let div = Inst::Eval(Expr::Binary(
            BinOp::Div,
            Box::new(Expr::Const(1)),
            Box::new(Expr::Var(0)),
        ));
        bad(
            &graph(vec![block(vec![div], Term::Jump(0))], vec![], 0),
            &mut vec![0],
        );
        let count = Term::Count {
            counter: 2,
            next: 0,
            over: 0,
        };
        bad(&graph(vec![block(vec![], count)], vec![], 0), &mut vec![0]);
        let g = graph(vec![leave(vec![(0, 3)])], vec![], 0);
        let e = run(&g, 1, &mut vec![0], &mut [0], &mut NoIo).unwrap_err();
        assert!(e.to_string().contains("no entry 1"), "{e}");
        // `i64::MIN / -1` wraps instead of failing.
        let min = Inst::Assign {
            slot: 0,
            value: Expr::Binary(
                BinOp::Div,
                Box::new(Expr::Const(i64::MIN)),
                Box::new(Expr::Const(-1)),
            ),
        };
        let g = graph(
            vec![block(vec![min], Term::Jump(1)), leave(vec![(0, 3)])],
            vec![],
            0,
        );
        let mut vars = vec![0];
        assert_eq!(
            run(&g, 0, &mut vars, &mut [0], &mut NoIo).unwrap(),
            Leave::Exit
        );
        assert_eq!(vars, vec![i64::MIN]);
    }
}
