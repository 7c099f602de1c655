//! Extraction by symbolic execution (§4.2-§4.4): fast paths from a
//! specification, and the symbolic execution of the whole program that
//! [`crate::automata`] turns into its automaton (§4.1).
//!
//! Symbolic execution follows the *control* of the processes, never their
//! data: a control state is each process's program counter and status
//! (ready, blocked at a channel operation, blocked in an `alt` on some of
//! its arms, blocked on an empty external input, halted), the ready list,
//! the running process and, for a fast path, each process's path automaton
//! state ([`crate::path`]). From a state the running process executes one
//! statement under the default scheduling policy (a FIFO ready list; the
//! running process continues until it blocks; on a rendezvous with a blocked
//! partner the reader continues and the writer goes to the end of the ready
//! list) or a `yield` of the specification. The code of the statement is
//! emitted into the state's block ([`crate::fp`]): assignments with process
//! variables as global slots, branches on the program's conditions, and for
//! a rendezvous one assignment per field from the writer's operand to the
//! reader's variable. Data-dependent facts (a predicate, an assertion, a
//! divisor, an empty external queue) become run-time tests. A state seen
//! before is a back edge: the graph loops.
//!
//! Every path through a fast path's graph is a legal execution of the
//! program, so that the process-based code can take over at any leave:
//! - the schedule is one the language allows (any interleaving of
//!   processes is a legal execution; fairness is restored by §4.4's
//!   counters and refusals);
//! - an `alt` takes an arm whose operation can complete now (the
//!   specification only narrows which one);
//! - a communication with a channel some process outside the path uses is
//!   never done (that process's state lives in the runtime): Abort before;
//! - an `assert` or a division that would fail aborts *before* its
//!   statement, by a test of values that the statement cannot change, so
//!   the process-based code redoes the statement and reports the error; a
//!   statement whose failure could only be known after a host call (say
//!   `assert(f(x) > 0)`) always aborts before it, since a host call must
//!   not happen twice;
//! - a leave stores every process's program counter at a statement
//!   boundary; a process blocked at a channel statement is stored at it and
//!   performs it again (its operands are variables or constants, ir.rs), a
//!   process blocked in an `alt` at the `alt`, which the runtime evaluates
//!   afresh.
//!
//! Control states are made only where they can recur: at channel
//! statements, `Halt`, listed statements, joins and loop heads of the
//! running process; the straight-line code between them is emitted inline.
//! Automaton states are identified by what they can do next
//! ([`PathAutomaton::signature`]). Both only merge states that behave alike.
//!
//! Beyond the counters of the repetition operators (one per `*` and `+`,
//! §4.4), a cycle of the graph that goes through a channel operation (an
//! internal rendezvous or an external message) but through no repetition
//! counter (possible when the processes loop over statements the
//! specification does not list) gets a counter of its own with the same
//! bound, so that no fast path can run unboundedly long and starve a
//! process outside it (§4.4).
//!
//! A cycle that goes through no channel operation and no counter at all (a
//! process's loop over local code, which may never yield) gets one more
//! counter, bounded by [`ExploreOptions::local_loop_bound`], in fast paths
//! and the automaton alike: past it the graph aborts at a control state of
//! the loop, and the process-based code, which bounds such loops itself
//! ([`crate::runtime`]), reports the loop if it goes on.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use crate::error::{Error, Result};
use crate::fp::{Block, BlockId, Graph, Inst, Kind, Leave, Term};
use crate::ir::{
    Arm, BinOp, ChanKind, Comm, Expr, Layout, Node, NodeKind, Operand, Pc, Pos, ProcId, Program,
    StmtRef, UnOp,
};
use crate::path::PathAutomaton;
use crate::spec::{Element, FastPath, Regex, Schedule};

/// Limits of symbolic execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExploreOptions {
    /// The most control states one extraction may visit before it fails
    /// with [`Error::StateLimit`].
    pub state_limit: usize,
    /// The bound of every repetition counter (§4.4): a fast path aborts
    /// when a repetition starts more iterations than this in one entry.
    pub counter_bound: u64,
    /// The schedule [`automaton`](crate::automata::automaton) follows (fast paths always follow the
    /// default policy and the specification's `yield`s).
    pub automaton_schedule: Schedule,
    /// The bound of the counter that every loop of the graph through no
    /// channel operation (and no repetition counter) passes: a graph
    /// aborts when such loops run more iterations than this in one entry,
    /// so that a loop that never yields ends up in the process-based code,
    /// which reports it. [`Machine::new`](crate::runtime::Machine::new)
    /// sets it to
    /// [`Options::max_local_iterations`](crate::runtime::Options::max_local_iterations).
    pub local_loop_bound: u64,
}

impl Default for ExploreOptions {
    fn default() -> Self {
        ExploreOptions {
            state_limit: 100_000,
            counter_bound: 65_536,
            automaton_schedule: Schedule::DownstreamFirst,
            local_loop_bound: crate::ir::DEFAULT_MAX_LOCAL_ITERATIONS,
        }
    }
}

/// Extracts the fast path `fp` of `program` (§4.2).
///
/// The graph's single entry is the state in which every process of the path
/// is ready at its `start` statement, in specification order, the first
/// running. It leaves with [`Leave::Exit`] when a process reaches its `exit`
/// element and with [`Leave::Abort`] wherever the execution leaves the
/// specification or meets a case it does not handle.
///
/// ```no_run
/// # fn main() -> esp::Result<()> {
/// let program = esp::compile(&std::fs::read_to_string("programs/figure2.esp").unwrap())?;
/// let spec = esp::spec::parse(&std::fs::read_to_string("programs/figure5.fp").unwrap(), &program)?;
/// let g = esp::explore::fast_path(&program, &spec.fastpaths[0], &Default::default())?;
/// println!("{}", g.display(&program));
/// # Ok(()) }
/// ```
pub fn fast_path(program: &Program, fp: &FastPath, options: &ExploreOptions) -> Result<Graph> {
    check_spec(program, fp)?;
    let mut autos = Vec::new();
    let mut counters = 0u32;
    for ps in &fp.procs {
        let a = PathAutomaton::new(ps, counters)?;
        counters += a.counter_count();
        autos.push(a);
    }
    let procs: Vec<ProcId> = fp.procs.iter().map(|p| p.proc).collect();
    let start: Vec<Pc> = fp.procs.iter().map(|p| p.start.stmt.pc).collect();
    let mut x = Explorer::new(program, fp.name.clone(), procs, autos, options, false);
    x.schedule = fp.schedule;
    x.counters = counters;
    x.run(start)
}

// ---------------------------------------------------------------------------
// Checking a specification against the program.

fn spec_err(pos: Pos, msg: String) -> Error {
    Error::Spec { pos, msg }
}

fn check_spec(program: &Program, fp: &FastPath) -> Result<()> {
    if fp.procs.is_empty() {
        return Err(spec_err(
            fp.pos,
            format!("fast path {} names no process", fp.name),
        ));
    }
    for (i, ps) in fp.procs.iter().enumerate() {
        let Some(proc) = program.processes.get(ps.proc as usize) else {
            return Err(spec_err(
                ps.pos,
                format!("process {} does not exist", ps.proc),
            ));
        };
        if fp.procs[..i].iter().any(|q| q.proc == ps.proc) {
            return Err(spec_err(
                ps.pos,
                format!(
                    "process {} appears twice in fast path {}",
                    proc.name, fp.name
                ),
            ));
        }
        let stmt_ok = |s: StmtRef| match (proc.nodes.get(s.pc as usize).map(|n| &n.kind), s.arm) {
            (Some(NodeKind::Alt { arms }), Some(a)) => (a as usize) < arms.len(),
            (Some(NodeKind::Alt { .. }), None) => false,
            (Some(_), None) => true,
            _ => false,
        };
        for s in &ps.stmts {
            if !stmt_ok(*s) {
                return Err(spec_err(
                    ps.pos,
                    format!("no statement {s:?} in process {}", proc.name),
                ));
            }
        }
        let mut elems = vec![&ps.start];
        if let Some(f) = &ps.follows {
            collect_elems(f, &mut elems);
        }
        if let Some(x) = &ps.exit {
            elems.push(x);
        }
        for e in elems {
            if !stmt_ok(e.stmt) {
                return Err(spec_err(
                    e.pos,
                    format!("no statement {:?} in process {}", e.stmt, proc.name),
                ));
            }
            if let Some(pred) = &e.pred {
                if pred.has_call() {
                    return Err(spec_err(
                        e.pos,
                        "a predicate may not call a host function".into(),
                    ));
                }
                let mut bad = None;
                pred.for_each_var(&mut |v| {
                    if v as usize >= proc.vars.len() {
                        bad = Some(v);
                    }
                });
                if let Some(v) = bad {
                    return Err(spec_err(
                        e.pos,
                        format!("predicate variable {v} is not a variable of {}", proc.name),
                    ));
                }
            }
            if let Some((q, s)) = e.partner {
                let ok = program
                    .processes
                    .get(q as usize)
                    .and_then(|qp| qp.nodes.get(s.pc as usize))
                    .is_some();
                if !ok {
                    return Err(spec_err(
                        e.pos,
                        "the partner statement does not exist".into(),
                    ));
                }
            }
            if let Some(y) = e.yield_to
                && program.processes.get(y as usize).is_none()
            {
                return Err(spec_err(
                    e.pos,
                    format!("yield to process {y}, which does not exist"),
                ));
            }
        }
    }
    Ok(())
}

fn collect_elems<'a>(r: &'a Regex, out: &mut Vec<&'a Element>) {
    match r {
        Regex::Elem(e) => out.push(e),
        Regex::Seq(v) | Regex::Alt(v) => v.iter().for_each(|r| collect_elems(r, out)),
        Regex::Star(b) | Regex::Plus(b) | Regex::Opt(b) => collect_elems(b, out),
    }
}

// ---------------------------------------------------------------------------
// Failure conditions of expressions.

fn or(a: Expr, b: Expr) -> Expr {
    match (&a, &b) {
        (Expr::Const(0), _) => b,
        (_, Expr::Const(0)) => a,
        (Expr::Const(_), _) => Expr::Const(1),
        _ => Expr::Or(Box::new(a), Box::new(b)),
    }
}

/// A condition, over the same variables and free of host calls, that is
/// nonzero exactly when evaluating `e` divides by zero; evaluating it never
/// fails. `None` when that cannot be known without calling a host function
/// (a divisor, or the left side of a `&&`/`||` guarding a division, that
/// calls one).
fn fail_cond(e: &Expr) -> Option<Expr> {
    Some(match e {
        Expr::Const(_) | Expr::Var(_) => Expr::Const(0),
        Expr::Unary(_, a) => fail_cond(a)?,
        Expr::Binary(op, a, b) => {
            let c = or(fail_cond(a)?, fail_cond(b)?);
            if matches!(op, BinOp::Div | BinOp::Rem) {
                match **b {
                    Expr::Const(0) => or(c, Expr::Const(1)),
                    Expr::Const(_) => c,
                    _ if b.has_call() => return None,
                    // Evaluated only when `c` is 0, so `b` itself does not fail.
                    _ => or(
                        c,
                        Expr::Binary(BinOp::Eq, b.clone(), Box::new(Expr::Const(0))),
                    ),
                }
            } else {
                c
            }
        }
        Expr::And(a, b) | Expr::Or(a, b) => {
            let fa = fail_cond(a)?;
            let fb = fail_cond(b)?;
            if fb == Expr::Const(0) {
                fa
            } else if a.has_call() {
                return None;
            } else {
                // `b` is evaluated only when `a` is nonzero (`&&`) or zero (`||`).
                let taken = if matches!(e, Expr::And(..)) {
                    (**a).clone()
                } else {
                    Expr::Unary(UnOp::Not, a.clone())
                };
                or(fa, Expr::And(Box::new(taken), Box::new(fb)))
            }
        }
        Expr::Call(_, args) => {
            let mut c = Expr::Const(0);
            for a in args {
                c = or(c, fail_cond(a)?);
            }
            c
        }
    })
}

/// The value of an expression without variables or calls, if it has one.
fn constant(e: &Expr) -> Option<i64> {
    let mut vars = false;
    e.for_each_var(&mut |_| vars = true);
    if vars || e.has_call() {
        return None;
    }
    e.eval(&[], &mut |_, _| 0)
}

// ---------------------------------------------------------------------------
// Control states.

/// A process's status in a control state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum St {
    /// Ready (or running) at its pc.
    Ready,
    /// Blocked at the `Comm` node at its pc.
    Blocked,
    /// Blocked in the `alt` at its pc, offering these arms.
    BlockedAlt(Vec<u32>),
    /// Blocked at an `in` on an empty external channel (automaton only).
    BlockedExt,
    /// At its `Halt` node.
    Halted,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PState {
    pc: Pc,
    st: St,
}

/// A control state; processes are numbered by their index in the graph's
/// `procs`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CState {
    procs: Vec<PState>,
    /// The ready list, front first (the running process is not in it).
    ready: Vec<u32>,
    /// The running process; `None` only transiently (see `Explorer::state`).
    running: Option<u32>,
    /// Each process's automaton state (empty for an automaton graph).
    autos: Vec<Vec<u32>>,
}

/// What an automaton state can do next ([`PathAutomaton::signature`]).
type Signature = BTreeMap<u32, BTreeSet<u32>>;

/// A block whose `Jump` completes a channel operation (an internal
/// rendezvous or an external message); it gets a loop counter if it lies on
/// a cycle without one.
struct Hook {
    block: BlockId,
    pcs: Vec<(ProcId, Pc)>,
}

/// The most predicated elements one statement may match: their
/// combinations are enumerated.
const MAX_PREDICATED: usize = 8;

pub(crate) struct Explorer<'a> {
    program: &'a Program,
    layout: Layout,
    name: String,
    procs: Vec<ProcId>,
    autos: Vec<PathAutomaton>,
    /// Per channel: internal and used by a process outside the graph.
    shared: Vec<bool>,
    whole: bool,
    /// The schedule: the specification's for a fast path, the options' for
    /// the automaton.
    schedule: Schedule,
    options: &'a ExploreOptions,
    blocks: Vec<Block>,
    states: HashMap<CState, BlockId>,
    work: VecDeque<(CState, BlockId)>,
    entries: Vec<BlockId>,
    resume: HashMap<CState, u32>,
    nondeterministic: bool,
    counters: u32,
    hooks: Vec<Hook>,
    /// Per process: the pcs where control states are made (and compared);
    /// the code between them is emitted inline (see `Explorer::state`).
    cuts: Vec<Vec<bool>>,
    /// Per process: the representative automaton state of each signature.
    canon: Vec<HashMap<Signature, Vec<u32>>>,
    /// Per block: true for the block of a control state.
    is_state: Vec<bool>,
}

/// Placeholder of a block whose terminator is not written yet.
const UNSET: Term = Term::Jump(BlockId::MAX);

/// One way an event can go: the block to continue in, the state after it,
/// and the `yield`s of the matched elements.
struct Outcome {
    open: BlockId,
    s: CState,
    yields: Vec<ProcId>,
}

impl<'a> Explorer<'a> {
    pub(crate) fn new(
        program: &'a Program,
        name: String,
        procs: Vec<ProcId>,
        autos: Vec<PathAutomaton>,
        options: &'a ExploreOptions,
        whole: bool,
    ) -> Self {
        let mut shared = vec![false; program.channels.len()];
        for (p, proc) in program.processes.iter().enumerate() {
            if procs.contains(&(p as ProcId)) {
                continue;
            }
            for n in &proc.nodes {
                let mut mark = |op: &Comm| {
                    let c = op.chan() as usize;
                    if program
                        .channels
                        .get(c)
                        .is_some_and(|ch| ch.kind == ChanKind::Internal)
                    {
                        shared[c] = true;
                    }
                };
                match &n.kind {
                    NodeKind::Comm { op, .. } => mark(op),
                    NodeKind::Alt { arms } => arms.iter().for_each(|a| mark(&a.op)),
                    _ => {}
                }
            }
        }
        let cuts = procs
            .iter()
            .enumerate()
            .map(|(i, &p)| cut_points(&program.processes[p as usize], autos.get(i)))
            .collect();
        let canon = vec![HashMap::new(); autos.len()];
        Explorer {
            cuts,
            canon,
            is_state: Vec::new(),
            program,
            layout: Layout::of(program),
            name,
            procs,
            autos,
            shared,
            whole,
            schedule: options.automaton_schedule,
            options,
            blocks: Vec::new(),
            states: HashMap::new(),
            work: VecDeque::new(),
            entries: Vec::new(),
            resume: HashMap::new(),
            nondeterministic: false,
            counters: 0,
            hooks: Vec::new(),
        }
    }

    pub(crate) fn run(mut self, start: Vec<Pc>) -> Result<Graph> {
        let n = self.procs.len();
        for (i, &pc) in start.iter().enumerate() {
            let p = &self.program.processes[self.procs[i] as usize];
            if p.nodes.get(pc as usize).is_none() {
                return Err(Error::Check {
                    pos: p.pos,
                    msg: format!("process {} has no node {pc}", p.name),
                });
            }
        }
        let s0 = CState {
            procs: start
                .iter()
                .map(|&pc| PState { pc, st: St::Ready })
                .collect(),
            ready: (1..n as u32).collect(),
            running: if n > 0 { Some(0) } else { None },
            autos: if self.whole {
                Vec::new()
            } else {
                vec![PathAutomaton::initial(); n]
            },
        };
        let b0 = self.state(s0)?;
        self.entries.insert(0, b0);
        // `state` may have registered resume entries while making b0; they
        // come after entry 0.
        while let Some((s, b)) = self.work.pop_front() {
            self.step(s, b)?;
        }
        if let Some(i) = self.blocks.iter().position(|b| b.term == UNSET) {
            return Err(Error::InvalidGraph {
                graph: self.name.clone(),
                msg: format!("extraction left block b{i} unfinished"),
            });
        }
        let mut bounds = vec![self.options.counter_bound; self.counters as usize];
        let mut hook = vec![false; self.blocks.len()];
        for h in &self.hooks {
            hook[h.block as usize] = true;
        }
        if !self.whole {
            self.count_loops(&mut bounds);
        }
        self.count_local_loops(&hook, &mut bounds)?;
        let (blocks, entries) = tidy(self.blocks, self.entries, &self.is_state);
        self.blocks = blocks;
        self.entries = entries;
        Ok(Graph {
            name: self.name,
            kind: if self.whole {
                Kind::Automaton
            } else {
                Kind::FastPath {
                    nondeterministic: self.nondeterministic,
                }
            },
            procs: self.procs,
            blocks: self.blocks,
            entries: self.entries,
            counters: bounds,
            locals: 0,
            states: self.states.len(),
        })
    }

    // --- blocks --------------------------------------------------------

    fn block(&mut self, note: String) -> BlockId {
        self.blocks.push(Block {
            insts: Vec::new(),
            term: UNSET,
            note,
        });
        self.is_state.push(false);
        (self.blocks.len() - 1) as BlockId
    }

    fn term(&mut self, b: BlockId, t: Term) {
        self.blocks[b as usize].term = t;
    }

    fn push(&mut self, b: BlockId, i: Inst) {
        self.blocks[b as usize].insts.push(i);
    }

    fn pcs(&self, s: &CState) -> Vec<(ProcId, Pc)> {
        self.procs
            .iter()
            .zip(&s.procs)
            .map(|(&p, ps)| (p, ps.pc))
            .collect()
    }

    /// A new block that leaves with every process at its pc in `s`.
    fn leave(&mut self, s: &CState, why: Leave) -> BlockId {
        let b = self.block(String::new());
        let pcs = self.pcs(s);
        self.term(b, Term::Leave { pcs, why });
        b
    }

    fn abort_at(&mut self, open: BlockId, s: &CState) {
        let l = self.leave(s, Leave::Abort);
        self.term(open, Term::Jump(l));
    }

    fn goto(&mut self, open: BlockId, s: CState) -> Result<()> {
        let t = self.state(s)?;
        self.term(open, Term::Jump(t));
        Ok(())
    }

    /// The block of control state `s`: its existing block, a new one queued
    /// for exploration, or a leave when no process can run.
    fn state(&mut self, mut s: CState) -> Result<BlockId> {
        if self.schedule == Schedule::DownstreamFirst {
            // The ready list is a set: the latest-declared process (the
            // last in specification order, on a fast path) runs.
            if let Some(r) = s.running.take() {
                s.ready.push(r);
            }
            s.ready.sort_unstable();
            s.running = s.ready.pop();
        }
        if s.running.is_none() {
            if s.ready.is_empty() {
                let waiting: Vec<usize> = (0..s.procs.len())
                    .filter(|&i| s.procs[i].st == St::BlockedExt)
                    .collect();
                if self.whole && !waiting.is_empty() {
                    let mut r = s.clone();
                    for &i in &waiting {
                        r.procs[i].st = St::Ready;
                        r.ready.push(i as u32);
                    }
                    let k = match self.resume.get(&r) {
                        Some(&k) => k,
                        None => {
                            let k = self.resume.len() as u32 + 1;
                            self.resume.insert(r.clone(), k);
                            let b = self.state(r)?;
                            // Entry 0 is inserted first once the start state exists.
                            self.entries.push(b);
                            k
                        }
                    };
                    return Ok(self.leave(&s, Leave::Suspend { resume: k }));
                }
                return Ok(self.leave(&s, Leave::Abort));
            }
            s.running = Some(s.ready.remove(0));
        }
        if let Some(r) = s.running {
            let r = r as usize;
            if !self.cuts[r][s.procs[r].pc as usize] {
                // Inside a process's straight-line code: no control state,
                // the code is emitted inline (the region between cut points
                // has no joins and no loops, so nothing is duplicated).
                let b = self.block(self.note(&s));
                self.work.push_back((s, b));
                return Ok(b);
            }
        }
        if let Some(&b) = self.states.get(&s) {
            return Ok(b);
        }
        if self.states.len() >= self.options.state_limit {
            return Err(Error::StateLimit {
                what: self.name.clone(),
                limit: self.options.state_limit,
            });
        }
        let b = self.block(self.note(&s));
        self.is_state[b as usize] = true;
        self.states.insert(s.clone(), b);
        self.work.push_back((s, b));
        Ok(b)
    }

    /// `*hostRequest@13 translateAddress@40:blocked networkSend@50`: each
    /// process at the source line of its pc, the running one starred.
    fn note(&self, s: &CState) -> String {
        let mut parts = Vec::new();
        for (i, ps) in s.procs.iter().enumerate() {
            let p = &self.program.processes[self.procs[i] as usize];
            let line = p.nodes.get(ps.pc as usize).map_or(0, |n| n.pos.line);
            let star = if s.running == Some(i as u32) { "*" } else { "" };
            let st = match ps.st {
                St::Ready => "",
                St::Blocked => ":blocked",
                St::BlockedAlt(_) => ":alt",
                St::BlockedExt => ":waiting",
                St::Halted => ":halted",
            };
            parts.push(format!("{star}{}@{line}{st}", p.name));
        }
        parts.join(" ")
    }

    // --- values --------------------------------------------------------

    fn slot(&self, i: usize, v: u32) -> u32 {
        self.layout.slot(self.procs[i], v)
    }

    fn map(&self, i: usize, e: &Expr) -> Expr {
        let base = self.layout.base[self.procs[i] as usize];
        e.map_vars(&mut |v| base + v)
    }

    fn operand(&self, i: usize, o: &Operand) -> Operand {
        match o {
            Operand::Var(v) => Operand::Var(self.slot(i, *v)),
            Operand::Const(c) => Operand::Const(*c),
        }
    }

    /// Emits the test that the statement of `s`'s running process would
    /// fail (`fail` over process `i`'s variables; `None`: unknowable, so
    /// always) as an abort before it; returns the block to go on in, or
    /// `None` when it always aborts.
    fn guard(
        &mut self,
        open: BlockId,
        i: usize,
        fail: Option<Expr>,
        s: &CState,
    ) -> Option<BlockId> {
        match fail {
            None => {
                self.abort_at(open, s);
                None
            }
            Some(Expr::Const(0)) => Some(open),
            Some(c) => match constant(&c) {
                Some(0) => Some(open),
                Some(_) => {
                    self.abort_at(open, s);
                    None
                }
                None => {
                    let abort = self.leave(s, Leave::Abort);
                    let next = self.block(String::new());
                    let cond = self.map(i, &c);
                    self.term(
                        open,
                        Term::Branch {
                            cond,
                            then: abort,
                            els: next,
                        },
                    );
                    Some(next)
                }
            },
        }
    }

    /// A predicate of process `i` as a graph condition that is false where
    /// the predicate would divide by zero.
    fn pred(&self, i: usize, p: &Expr) -> Expr {
        // Predicates have no calls (check_spec), so the condition is known.
        let safe = match fail_cond(p) {
            Some(Expr::Const(0)) | None => p.clone(),
            Some(f) => Expr::And(
                Box::new(Expr::Unary(UnOp::Not, Box::new(f))),
                Box::new(p.clone()),
            ),
        };
        self.map(i, &safe)
    }

    // --- events --------------------------------------------------------

    fn listed(&self, i: usize, stmt: StmtRef) -> bool {
        !self.whole && self.autos[i].listed(stmt)
    }

    /// Process `i` reaches the listed statements `stmts` (one, or the listed
    /// arms of an `alt`): leaves with `Exit` where an exit element's
    /// predicate holds. Returns the block to go on in, or `None`.
    fn exit_check(
        &mut self,
        s: &CState,
        i: usize,
        stmts: &[StmtRef],
        mut open: BlockId,
    ) -> Option<BlockId> {
        for &stmt in stmts {
            for q in self.autos[i].exit_candidates(&s.autos[i], stmt) {
                let pred = self.autos[i].positions[q as usize].elem.pred.clone();
                let cond = match pred {
                    None => Expr::Const(1),
                    Some(p) => self.pred(i, &p),
                };
                match constant(&cond) {
                    Some(0) => {}
                    Some(_) => {
                        let l = self.leave(s, Leave::Exit);
                        self.term(open, Term::Jump(l));
                        return None;
                    }
                    None => {
                        let l = self.leave(s, Leave::Exit);
                        let next = self.block(String::new());
                        self.term(
                            open,
                            Term::Branch {
                                cond,
                                then: l,
                                els: next,
                            },
                        );
                        open = next;
                    }
                }
            }
        }
        Some(open)
    }

    /// Process `i` executed listed statement `stmt` with `partner` (the
    /// other side of a rendezvous; `None` for the host or a non-channel
    /// statement): branches on the predicates of the matching elements. For
    /// each outcome in which some element matched, the automaton state
    /// moves, its repetition counters count, and the outcome is returned;
    /// where none matched, or a counter overflows, the path aborts at
    /// `abort`.
    fn event(
        &mut self,
        o: Outcome,
        i: usize,
        stmt: StmtRef,
        partner: Option<(ProcId, StmtRef)>,
        abort: &CState,
    ) -> Result<Vec<Outcome>> {
        let cands: Vec<u32> = self.autos[i]
            .step_candidates(&o.s.autos[i], stmt)
            .into_iter()
            .filter(|&q| {
                let e = &self.autos[i].positions[q as usize].elem;
                e.partner.is_none() || e.partner == partner
            })
            .collect();
        let predicated = cands
            .iter()
            .filter(|&&q| self.autos[i].positions[q as usize].elem.pred.is_some())
            .count();
        if predicated > MAX_PREDICATED {
            let e = &self.autos[i].positions[cands[0] as usize].elem;
            return Err(Error::Unsupported {
                backend: "fast-path extraction",
                msg: format!(
                    "{}: more than {MAX_PREDICATED} elements with predicates may match one statement",
                    e.pos
                ),
            });
        }
        let mut outs: Vec<(BlockId, Vec<u32>)> = vec![(o.open, Vec::new())];
        for &q in &cands {
            let pred = self.autos[i].positions[q as usize].elem.pred.clone();
            let cond = match pred {
                None => Expr::Const(1),
                Some(p) => self.pred(i, &p),
            };
            match constant(&cond) {
                Some(0) => {}
                Some(_) => outs.iter_mut().for_each(|(_, m)| m.push(q)),
                None => {
                    let mut next = Vec::new();
                    for (b, m) in outs {
                        let t = self.block(String::new());
                        let e = self.block(String::new());
                        self.term(
                            b,
                            Term::Branch {
                                cond: cond.clone(),
                                then: t,
                                els: e,
                            },
                        );
                        let mut mt = m.clone();
                        mt.push(q);
                        next.push((t, mt));
                        next.push((e, m));
                    }
                    outs = next;
                }
            }
        }
        let mut result = Vec::new();
        for (mut b, m) in outs {
            if m.is_empty() {
                self.abort_at(b, abort);
                continue;
            }
            for c in self.autos[i].counters_between(&o.s.autos[i], &m) {
                let next = self.block(String::new());
                let over = self.leave(abort, Leave::Abort);
                self.term(
                    b,
                    Term::Count {
                        counter: c,
                        next,
                        over,
                    },
                );
                b = next;
            }
            let y = m
                .iter()
                .find_map(|&q| self.autos[i].positions[q as usize].elem.yield_to);
            let mut s = o.s.clone();
            let sig = self.autos[i].signature(&m);
            s.autos[i] = self.canon[i].entry(sig).or_insert(m).clone();
            let mut yields = o.yields.clone();
            yields.extend(y);
            result.push(Outcome { open: b, s, yields });
        }
        Ok(result)
    }

    /// `yield q`: the running process goes to the end of the ready list and
    /// `q`, if ready, runs next.
    fn apply_yields(&self, s: &mut CState, yields: &[ProcId]) {
        for &q in yields {
            let Some(iq) = self.procs.iter().position(|&p| p == q) else {
                continue;
            };
            let iq = iq as u32;
            if s.running == Some(iq) {
                continue;
            }
            if let Some(cur) = s.running.take() {
                s.ready.push(cur);
            }
            if let Some(k) = s.ready.iter().position(|&x| x == iq) {
                s.ready.remove(k);
                s.running = Some(iq);
            }
        }
    }

    // --- one step --------------------------------------------------------

    fn step(&mut self, s: CState, b: BlockId) -> Result<()> {
        let Some(r) = s.running else {
            return Err(Error::InvalidGraph {
                graph: self.name.clone(),
                msg: "a control state without a running process".into(),
            });
        };
        let r = r as usize;
        let program = self.program;
        let proc = &program.processes[self.procs[r] as usize];
        let pc = s.procs[r].pc;
        let Some(node) = proc.nodes.get(pc as usize) else {
            return Err(Error::Check {
                pos: proc.pos,
                msg: format!("process {} has no node {pc}", proc.name),
            });
        };
        match &node.kind {
            NodeKind::Alt { arms } => self.alt(s, b, r, pc, arms),
            NodeKind::Comm { op, next } => self.comm(s, b, r, pc, op, *next),
            _ => self.local(s, b, r, pc, node),
        }
    }

    /// A statement without communication.
    fn local(&mut self, s: CState, b: BlockId, r: usize, pc: Pc, node: &Node) -> Result<()> {
        let stmt = StmtRef { pc, arm: None };
        let outs = if self.listed(r, stmt) {
            let Some(open) = self.exit_check(&s, r, &[stmt], b) else {
                return Ok(());
            };
            if self.autos[r].step_candidates(&s.autos[r], stmt).is_empty() {
                self.abort_at(open, &s);
                return Ok(());
            }
            let o = Outcome {
                open,
                s: s.clone(),
                yields: Vec::new(),
            };
            self.event(o, r, stmt, None, &s)?
        } else {
            vec![Outcome {
                open: b,
                s: s.clone(),
                yields: Vec::new(),
            }]
        };
        for o in outs {
            self.exec(o, r, node, &s)?;
        }
        Ok(())
    }

    /// Executes a statement without communication in outcome `o`; `before`
    /// is the state to abort to (the statement not executed).
    fn exec(&mut self, o: Outcome, r: usize, node: &Node, before: &CState) -> Result<()> {
        let Outcome {
            open,
            mut s,
            yields,
        } = o;
        let moved = |mut s: CState, pc: Pc, this: &Self| {
            s.procs[r].pc = pc;
            this.apply_yields(&mut s, &yields);
            s
        };
        match &node.kind {
            NodeKind::Assign { var, value, next } => {
                let Some(open) = self.guard(open, r, fail_cond(value), before) else {
                    return Ok(());
                };
                let inst = Inst::Assign {
                    slot: self.slot(r, *var),
                    value: self.map(r, value),
                };
                self.push(open, inst);
                let s = moved(s, *next, self);
                self.goto(open, s)
            }
            NodeKind::Eval { value, next } => {
                let Some(open) = self.guard(open, r, fail_cond(value), before) else {
                    return Ok(());
                };
                let inst = Inst::Eval(self.map(r, value));
                self.push(open, inst);
                let s = moved(s, *next, self);
                self.goto(open, s)
            }
            NodeKind::Nop { next } => {
                let s = moved(s, *next, self);
                self.goto(open, s)
            }
            NodeKind::Assert { cond, next } => {
                let fail = match constant(cond) {
                    Some(0) => Some(Expr::Const(1)),
                    Some(_) => Some(Expr::Const(0)),
                    None if cond.has_call() => None,
                    None => fail_cond(cond)
                        .map(|f| or(f, Expr::Unary(UnOp::Not, Box::new(cond.clone())))),
                };
                let Some(open) = self.guard(open, r, fail, before) else {
                    return Ok(());
                };
                let s = moved(s, *next, self);
                self.goto(open, s)
            }
            NodeKind::Branch { cond, then, els } => {
                let Some(open) = self.guard(open, r, fail_cond(cond), before) else {
                    return Ok(());
                };
                if let Some(c) = constant(cond) {
                    let s = moved(s, if c != 0 { *then } else { *els }, self);
                    return self.goto(open, s);
                }
                if then == els {
                    if cond.has_call() {
                        let inst = Inst::Eval(self.map(r, cond));
                        self.push(open, inst);
                    }
                    let s = moved(s, *then, self);
                    return self.goto(open, s);
                }
                let st = moved(s.clone(), *then, self);
                let se = moved(s, *els, self);
                let t = self.state(st)?;
                let e = self.state(se)?;
                let cond = self.map(r, cond);
                self.term(
                    open,
                    Term::Branch {
                        cond,
                        then: t,
                        els: e,
                    },
                );
                Ok(())
            }
            NodeKind::Halt => {
                s.procs[r].st = St::Halted;
                s.running = None;
                self.apply_yields(&mut s, &yields);
                self.goto(open, s)
            }
            NodeKind::Comm { .. } | NodeKind::Alt { .. } => Err(Error::InvalidGraph {
                graph: self.name.clone(),
                msg: "a channel statement executed as a local one".into(),
            }),
        }
    }

    /// A process blocked with an operation that completes with `op`: its
    /// index, statement, operation and next pc (the first in path order, and
    /// in an `alt` the first offered arm).
    fn find_partner(
        &mut self,
        s: &CState,
        r: usize,
        op: &Comm,
    ) -> Option<(usize, StmtRef, Comm, Pc)> {
        let fits = |o: &Comm| o.chan() == op.chan() && o.is_in() != op.is_in();
        let mut found = Vec::new();
        for (i, ps) in s.procs.iter().enumerate() {
            if i == r {
                continue;
            }
            let node = &self.program.processes[self.procs[i] as usize].nodes[ps.pc as usize];
            match (&ps.st, &node.kind) {
                (St::Blocked, NodeKind::Comm { op: o, next }) if fits(o) => {
                    let stmt = StmtRef {
                        pc: ps.pc,
                        arm: None,
                    };
                    found.push((i, stmt, o.clone(), *next));
                }
                (St::BlockedAlt(offered), NodeKind::Alt { arms }) => {
                    for &k in offered {
                        let arm = &arms[k as usize];
                        if fits(&arm.op) {
                            let stmt = StmtRef {
                                pc: ps.pc,
                                arm: Some(k),
                            };
                            found.push((i, stmt, arm.op.clone(), arm.next));
                        }
                    }
                }
                _ => {}
            }
        }
        // Choosing one of several waiting partners is a nondeterministic
        // choice too: the runtime's refusals keep it fair (§4.4).
        if found.len() > 1 {
            self.nondeterministic = true;
        }
        found.into_iter().next()
    }

    /// A channel operation outside an `alt`.
    fn comm(&mut self, s: CState, b: BlockId, r: usize, pc: Pc, op: &Comm, next: Pc) -> Result<()> {
        let stmt = StmtRef { pc, arm: None };
        let mut open = b;
        if self.listed(r, stmt) {
            let Some(o) = self.exit_check(&s, r, &[stmt], open) else {
                return Ok(());
            };
            open = o;
            if self.autos[r].step_candidates(&s.autos[r], stmt).is_empty() {
                self.abort_at(open, &s);
                return Ok(());
            }
        }
        let chan = op.chan();
        match self.program.channels[chan as usize].kind {
            ChanKind::ExternalIn | ChanKind::ExternalOut => {
                let empty = if !op.is_in() {
                    None
                } else if self.whole {
                    let mut w = s.clone();
                    w.procs[r].st = St::BlockedExt;
                    w.running = None;
                    Some(self.state(w)?)
                } else {
                    Some(self.leave(&s, Leave::Abort))
                };
                self.external(&s, open, r, stmt, op, next, empty)
            }
            ChanKind::Internal => {
                if self.shared[chan as usize] {
                    self.abort_at(open, &s);
                    return Ok(());
                }
                if let Some(partner) = self.find_partner(&s, r, op) {
                    return self.rendezvous(&s, open, (r, stmt, op.clone(), next), partner);
                }
                let mut w = s;
                w.procs[r].st = St::Blocked;
                w.running = None;
                self.goto(open, w)
            }
        }
    }

    /// An operation of process `r` on an external channel, from block
    /// `open`: `Recv` (going to `empty` when there is no message; `Some` for
    /// an `in`) or `Send`, then the event.
    #[allow(clippy::too_many_arguments)]
    fn external(
        &mut self,
        s: &CState,
        open: BlockId,
        r: usize,
        stmt: StmtRef,
        op: &Comm,
        next: Pc,
        empty: Option<BlockId>,
    ) -> Result<()> {
        let got = self.block(String::new());
        let t = match op {
            Comm::In { chan, vars } => Term::Recv {
                chan: *chan,
                slots: vars.iter().map(|&v| self.slot(r, v)).collect(),
                got,
                empty: empty.unwrap_or(BlockId::MAX),
            },
            Comm::Out { chan, args } => Term::Send {
                chan: *chan,
                args: args.iter().map(|a| self.operand(r, a)).collect(),
                next: got,
            },
        };
        self.term(open, t);
        let mut post = s.clone();
        post.procs[r] = PState {
            pc: next,
            st: St::Ready,
        };
        let o = Outcome {
            open: got,
            s: post.clone(),
            yields: Vec::new(),
        };
        let outs = if self.listed(r, stmt) {
            self.event(o, r, stmt, None, &post)?
        } else {
            vec![o]
        };
        let pcs = self.pcs(&post);
        for o in outs {
            let mut st = o.s;
            self.apply_yields(&mut st, &o.yields);
            // A loop over external messages alone (through statements the
            // specification does not list) is counted like one through a
            // rendezvous: it must not run for as long as input lasts.
            self.hooks.push(Hook {
                block: o.open,
                pcs: pcs.clone(),
            });
            self.goto(o.open, st)?;
        }
        Ok(())
    }

    /// A rendezvous of the running process `a` with the blocked process `b`
    /// (each: index, statement, operation, next pc), from block `open`.
    fn rendezvous(
        &mut self,
        s: &CState,
        open: BlockId,
        a: (usize, StmtRef, Comm, Pc),
        b: (usize, StmtRef, Comm, Pc),
    ) -> Result<()> {
        let (reader, writer) = if a.2.is_in() { (&a, &b) } else { (&b, &a) };
        if let (Comm::In { vars, .. }, Comm::Out { args, .. }) = (&reader.2, &writer.2) {
            for (v, arg) in vars.iter().zip(args) {
                let value = match self.operand(writer.0, arg) {
                    Operand::Var(sl) => Expr::Var(sl),
                    Operand::Const(c) => Expr::Const(c),
                };
                let inst = Inst::Assign {
                    slot: self.slot(reader.0, *v),
                    value,
                };
                self.push(open, inst);
            }
        }
        let mut post = s.clone();
        post.procs[a.0] = PState {
            pc: a.3,
            st: St::Ready,
        };
        post.procs[b.0] = PState {
            pc: b.3,
            st: St::Ready,
        };
        post.running = Some(reader.0 as u32);
        post.ready.push(writer.0 as u32);
        let mut outs = vec![Outcome {
            open,
            s: post.clone(),
            yields: Vec::new(),
        }];
        for (x, y) in [(reader, writer), (writer, reader)] {
            if !self.listed(x.0, x.1) {
                continue;
            }
            let partner = Some((self.procs[y.0], y.1));
            let mut next = Vec::new();
            for o in outs {
                next.extend(self.event(o, x.0, x.1, partner, &post)?);
            }
            outs = next;
        }
        let pcs = self.pcs(&post);
        for o in outs {
            let mut st = o.s;
            self.apply_yields(&mut st, &o.yields);
            self.hooks.push(Hook {
                block: o.open,
                pcs: pcs.clone(),
            });
            self.goto(o.open, st)?;
        }
        Ok(())
    }

    /// An `alt` (fast paths only): the specification narrows the arms; the
    /// first one that can complete now is taken.
    fn alt(&mut self, s: CState, b: BlockId, r: usize, pc: Pc, arms: &[Arm]) -> Result<()> {
        let stmt = |k: usize| StmtRef {
            pc,
            arm: Some(k as u32),
        };
        let listed: Vec<StmtRef> = (0..arms.len())
            .map(stmt)
            .filter(|&st| self.listed(r, st))
            .collect();
        let Some(mut open) = self.exit_check(&s, r, &listed, b) else {
            return Ok(());
        };
        let viable: Vec<usize> = (0..arms.len())
            .filter(|&k| {
                let st = stmt(k);
                !self.listed(r, st) || !self.autos[r].step_candidates(&s.autos[r], st).is_empty()
            })
            .collect();
        // Several viable arms is a choice; fewer viable arms than arms is a
        // narrowing that ignores a partner the process-based `alt` would
        // serve. Either way the runtime's refusals keep the `alt` fair.
        if viable.len() > 1 || viable.len() < arms.len() {
            self.nondeterministic = true;
        }
        let mut waiting = Vec::new();
        for &k in &viable {
            let arm = &arms[k];
            let chan = arm.op.chan();
            match self.program.channels[chan as usize].kind {
                ChanKind::Internal => {
                    if self.shared[chan as usize] {
                        continue;
                    }
                    if let Some(partner) = self.find_partner(&s, r, &arm.op) {
                        return self.rendezvous(
                            &s,
                            open,
                            (r, stmt(k), arm.op.clone(), arm.next),
                            partner,
                        );
                    }
                    waiting.push(k as u32);
                }
                ChanKind::ExternalIn => {
                    let empty = self.block(String::new());
                    self.external(&s, open, r, stmt(k), &arm.op, arm.next, Some(empty))?;
                    open = empty;
                }
                ChanKind::ExternalOut => {
                    return self.external(&s, open, r, stmt(k), &arm.op, arm.next, None);
                }
            }
        }
        if waiting.is_empty() {
            self.abort_at(open, &s);
            return Ok(());
        }
        let mut w = s;
        w.procs[r].st = St::BlockedAlt(waiting);
        w.running = None;
        self.goto(open, w)
    }

    // --- fairness of unlisted loops ----------------------------------------

    /// Gives every channel operation (rendezvous or external message) that
    /// lies on a cycle without a repetition counter a shared loop counter
    /// (see the module documentation).
    fn count_loops(&mut self, bounds: &mut Vec<u64>) {
        if self.hooks.is_empty() {
            return;
        }
        let comp = sccs(&self.blocks);
        let loop_counter = bounds.len() as u32;
        let mut used = false;
        let hooks = std::mem::take(&mut self.hooks);
        for h in hooks {
            let Term::Jump(t) = self.blocks[h.block as usize].term else {
                continue;
            };
            if comp[h.block as usize] != comp[t as usize] {
                continue;
            }
            let over = self.block(String::new());
            self.term(
                over,
                Term::Leave {
                    pcs: h.pcs,
                    why: Leave::Abort,
                },
            );
            self.term(
                h.block,
                Term::Count {
                    counter: loop_counter,
                    next: t,
                    over,
                },
            );
            used = true;
        }
        if used {
            bounds.push(self.options.counter_bound);
        }
    }
}

impl Explorer<'_> {
    // --- loops that never yield ---------------------------------------------

    /// Gives the cycles of the graph that pass no channel operation and no
    /// counter (a process's loop through local code alone) a shared counter
    /// bounded by [`ExploreOptions::local_loop_bound`], counted on every
    /// edge that enters a control state from inside such a cycle's
    /// component; past the bound the graph aborts at that state, and the
    /// process-based code, which bounds such loops itself, takes over.
    /// (Every cycle enters a control state: the code between them is
    /// trees.) `hook[b]` marks the blocks whose jump completes a channel
    /// operation.
    fn count_local_loops(&mut self, hook: &[bool], bounds: &mut Vec<u64>) -> Result<()> {
        let n = self.blocks.len();
        let succs: Vec<Vec<usize>> = (0..n)
            .map(|b| {
                let mut t = self.blocks[b].term.clone();
                local_targets(&mut t, hook.get(b).copied().unwrap_or(false))
                    .into_iter()
                    .map(|x| *x as usize)
                    .filter(|&x| x < n)
                    .collect()
            })
            .collect();
        let mut comp = vec![usize::MAX; n];
        let mut cyclic = Vec::new();
        for c in crate::fp::sccs(&succs) {
            if c.len() > 1 || succs[c[0]].contains(&c[0]) {
                for &b in &c {
                    comp[b] = cyclic.len();
                }
                cyclic.push(c);
            }
        }
        if cyclic.is_empty() {
            return Ok(());
        }
        let state_of: HashMap<BlockId, CState> =
            self.states.iter().map(|(s, &b)| (b, s.clone())).collect();
        let counter = bounds.len() as u32;
        bounds.push(self.options.local_loop_bound);
        let mut count_at: HashMap<BlockId, BlockId> = HashMap::new();
        for c in &cyclic {
            let mut counted = false;
            for &u in c {
                let mut term = std::mem::replace(&mut self.blocks[u].term, UNSET);
                for t in local_targets(&mut term, hook.get(u).copied().unwrap_or(false)) {
                    let v = *t as usize;
                    if v >= n || comp[v] != comp[u] || !self.is_state[v] {
                        continue;
                    }
                    let Some(s) = state_of.get(t) else { continue };
                    let at = match count_at.get(t) {
                        Some(&b) => b,
                        None => {
                            let over = self.leave(s, Leave::Abort);
                            let b = self.block(String::new());
                            self.term(
                                b,
                                Term::Count {
                                    counter,
                                    next: *t,
                                    over,
                                },
                            );
                            count_at.insert(*t, b);
                            b
                        }
                    };
                    *t = at;
                    counted = true;
                }
                self.blocks[u].term = term;
            }
            if !counted {
                return Err(Error::InvalidGraph {
                    graph: self.name.clone(),
                    msg: format!(
                        "a loop through no channel operation (blocks {c:?}) enters no control state"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The targets of a terminator along which no channel operation completes
/// and no counter counts: the edges of a loop that never yields. `hook`:
/// the block's jump completes a channel operation.
fn local_targets(t: &mut Term, hook: bool) -> Vec<&mut BlockId> {
    match t {
        Term::Jump(b) if !hook => vec![b],
        Term::Jump(_) | Term::Send { .. } | Term::Leave { .. } => vec![],
        Term::Branch { then, els, .. } => vec![then, els],
        Term::Recv { empty, .. } => vec![empty],
        Term::Count { over, .. } => vec![over],
    }
}

/// The pcs of `p` where control states are made: channel statements,
/// `Halt`, the statements a fast path lists, joins (two or more
/// predecessors, or the entry) and the targets of back edges (so that every
/// loop has one). The code between cut points forms trees, emitted inline.
fn cut_points(p: &crate::ir::Process, auto: Option<&PathAutomaton>) -> Vec<bool> {
    let n = p.nodes.len();
    let succ = |k: &NodeKind| -> Vec<Pc> {
        match k {
            NodeKind::Assign { next, .. }
            | NodeKind::Eval { next, .. }
            | NodeKind::Nop { next }
            | NodeKind::Assert { next, .. }
            | NodeKind::Comm { next, .. } => vec![*next],
            NodeKind::Branch { then, els, .. } => vec![*then, *els],
            NodeKind::Alt { arms } => arms.iter().map(|a| a.next).collect(),
            NodeKind::Halt => vec![],
        }
    };
    let mut cut = vec![false; n];
    let mut preds = vec![0u32; n];
    for node in &p.nodes {
        for t in succ(&node.kind) {
            if let Some(c) = preds.get_mut(t as usize) {
                *c += 1;
            }
        }
    }
    if let Some(c) = preds.get_mut(p.entry as usize) {
        *c += 1;
    }
    for (i, node) in p.nodes.iter().enumerate() {
        let listed = auto.is_some_and(|a| {
            a.listed(StmtRef {
                pc: i as Pc,
                arm: None,
            })
        });
        cut[i] = preds[i] >= 2
            || listed
            || matches!(
                node.kind,
                NodeKind::Comm { .. } | NodeKind::Alt { .. } | NodeKind::Halt
            );
    }
    // Back edges: iterative depth-first search from the entry, then from
    // every node not reached yet.
    let mut color = vec![0u8; n]; // 0 new, 1 on the stack, 2 done
    let roots = std::iter::once(p.entry as usize).chain(0..n);
    for root in roots {
        if root >= n || color[root] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, Vec<Pc>, usize)> = vec![(root, succ(&p.nodes[root].kind), 0)];
        color[root] = 1;
        while let Some((v, succs, k)) = stack.last_mut() {
            if *k < succs.len() {
                let w = succs[*k] as usize;
                *k += 1;
                if w >= n {
                    continue;
                }
                match color[w] {
                    0 => {
                        color[w] = 1;
                        let s = succ(&p.nodes[w].kind);
                        stack.push((w, s, 0));
                    }
                    1 => cut[w] = true,
                    _ => {}
                }
            } else {
                color[*v] = 2;
                stack.pop();
            }
        }
    }
    cut
}

/// Redirects jumps through the empty blocks that guards, events and inline
/// statements without code (an unlisted `#N`) leave behind, and drops the
/// blocks no entry reaches; the blocks of control states stay, one per
/// state.
fn tidy(
    mut blocks: Vec<Block>,
    entries: Vec<BlockId>,
    is_state: &[bool],
) -> (Vec<Block>, Vec<BlockId>) {
    let n = blocks.len();
    let forward = |blocks: &[Block], mut t: BlockId| {
        for _ in 0..n {
            let b = &blocks[t as usize];
            match b.term {
                Term::Jump(u) if b.insts.is_empty() && !is_state[t as usize] && u != t => t = u,
                _ => break,
            }
        }
        t
    };
    for i in 0..n {
        let mut term = std::mem::replace(&mut blocks[i].term, UNSET);
        for t in term.targets_mut() {
            *t = forward(&blocks, *t);
        }
        blocks[i].term = term;
    }
    let entries: Vec<BlockId> = entries.into_iter().map(|e| forward(&blocks, e)).collect();
    // Keep what the entries reach, in the original order.
    let mut reached = vec![false; n];
    let mut stack: Vec<BlockId> = entries.clone();
    while let Some(b) = stack.pop() {
        if std::mem::replace(&mut reached[b as usize], true) {
            continue;
        }
        stack.extend(uncounted_succs(&blocks[b as usize].term));
        if let Term::Count { next, .. } = blocks[b as usize].term {
            stack.push(next);
        }
    }
    let mut new_id = vec![BlockId::MAX; n];
    let mut kept = Vec::new();
    for (i, b) in blocks.into_iter().enumerate() {
        if reached[i] {
            new_id[i] = kept.len() as BlockId;
            kept.push(b);
        }
    }
    for b in &mut kept {
        for t in b.term.targets_mut() {
            *t = new_id[*t as usize];
        }
    }
    let entries = entries.into_iter().map(|e| new_id[e as usize]).collect();
    (kept, entries)
}

/// The successors of a block, without the `next` edge of a `Count` (a cycle
/// through it is bounded already).
fn uncounted_succs(t: &Term) -> Vec<BlockId> {
    match t {
        Term::Jump(b) => vec![*b],
        Term::Branch { then, els, .. } => vec![*then, *els],
        Term::Recv { got, empty, .. } => vec![*got, *empty],
        Term::Send { next, .. } => vec![*next],
        Term::Count { over, .. } => vec![*over],
        Term::Leave { .. } => vec![],
    }
}

/// Strongly connected components of the blocks over [`uncounted_succs`]:
/// the component id of each block.
fn sccs(blocks: &[Block]) -> Vec<u32> {
    let n = blocks.len();
    let succs: Vec<Vec<usize>> = blocks
        .iter()
        .map(|b| {
            uncounted_succs(&b.term)
                .into_iter()
                .map(|s| s as usize)
                .filter(|&s| s < n)
                .collect()
        })
        .collect();
    let mut comp = vec![u32::MAX; n];
    for (id, members) in crate::fp::sccs(&succs).iter().enumerate() {
        for &b in members {
            comp[b] = id as u32;
        }
    }
    comp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(v: u32) -> Box<Expr> {
        Box::new(Expr::Var(v))
    }

    fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::Binary(op, Box::new(a), Box::new(b))
    }

    /// A small random expression over variables 0 and 1 with divisions,
    /// remainders and short-circuits.
    fn random_expr(seed: &mut u64, depth: u32) -> Expr {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let k = *seed % if depth == 0 { 3 } else { 9 };
        match k {
            0 => Expr::Const((*seed >> 8) as i64 % 3 - 1),
            1 => Expr::Var(0),
            2 => Expr::Var(1),
            3 => bin(
                BinOp::Div,
                random_expr(seed, depth - 1),
                random_expr(seed, depth - 1),
            ),
            4 => bin(
                BinOp::Rem,
                random_expr(seed, depth - 1),
                random_expr(seed, depth - 1),
            ),
            5 => bin(
                BinOp::Sub,
                random_expr(seed, depth - 1),
                random_expr(seed, depth - 1),
            ),
            6 => Expr::And(
                Box::new(random_expr(seed, depth - 1)),
                Box::new(random_expr(seed, depth - 1)),
            ),
            7 => Expr::Or(
                Box::new(random_expr(seed, depth - 1)),
                Box::new(random_expr(seed, depth - 1)),
            ),
            _ => Expr::Unary(UnOp::Not, Box::new(random_expr(seed, depth - 1))),
        }
    }

    /// The failure condition is true exactly where evaluation fails, and
    /// evaluating it never fails.
    #[test]
    fn fail_cond_is_exact() {
        let mut seed = 0x1234_5678_9abc_def1u64;
        let values = [-2, -1, 0, 1, 2, i64::MIN];
        for _ in 0..2000 {
            let e = random_expr(&mut seed, 4);
            let f = fail_cond(&e).expect("no calls");
            for &a in &values {
                for &b in &values {
                    let vars = [a, b];
                    let fails = e.eval(&vars, &mut |_, _| 0).is_none();
                    let guard = f.eval(&vars, &mut |_, _| 0).expect("a guard never fails");
                    assert_eq!(guard != 0, fails, "{e:?} at {vars:?}: guard {f:?}");
                }
            }
        }
    }

    #[test]
    fn fail_cond_with_calls() {
        let call = |args: Vec<Expr>| Expr::Call(0, args);
        // A call before the division: the divisor is still known.
        let e = bin(BinOp::Div, call(vec![Expr::Var(0)]), Expr::Var(1));
        assert_eq!(
            fail_cond(&e),
            Some(Expr::Binary(BinOp::Eq, var(1), Box::new(Expr::Const(0))))
        );
        // A call in the divisor: unknowable.
        let e = bin(BinOp::Div, Expr::Var(1), call(vec![Expr::Var(0)]));
        assert_eq!(fail_cond(&e), None);
        // A call guarding a division by `&&`: unknowable.
        let e = Expr::And(
            Box::new(call(vec![])),
            Box::new(bin(BinOp::Rem, Expr::Var(0), Expr::Var(1))),
        );
        assert_eq!(fail_cond(&e), None);
        // A call guarding nothing that can fail: fine.
        let e = Expr::And(Box::new(call(vec![])), Box::new(Expr::Var(1)));
        assert_eq!(fail_cond(&e), Some(Expr::Const(0)));
        // Constant divisors.
        assert_eq!(
            fail_cond(&bin(BinOp::Div, Expr::Var(0), Expr::Const(4))),
            Some(Expr::Const(0))
        );
        assert_eq!(
            fail_cond(&bin(BinOp::Div, Expr::Var(0), Expr::Const(0))),
            Some(Expr::Const(1))
        );
    }

    #[test]
    fn constant_values() {
        assert_eq!(
            constant(&bin(BinOp::Add, Expr::Const(2), Expr::Const(3))),
            Some(5)
        );
        assert_eq!(
            constant(&bin(BinOp::Add, Expr::Var(0), Expr::Const(3))),
            None
        );
        assert_eq!(constant(&Expr::Call(0, vec![])), None);
        assert_eq!(
            constant(&bin(BinOp::Div, Expr::Const(1), Expr::Const(0))),
            None
        );
    }

    /// Cut points: channel statements, joins and loop heads.
    #[test]
    fn cut_points_of_a_loop() {
        use crate::ir::{Node, Process};
        let node = |kind| Node {
            kind,
            pos: Pos::default(),
            label: None,
        };
        // 0: x = 1; 1: while (x < 5) { 2: x = x + 1; 3: y = x; } 4: out(c, x); 5: halt
        let p = Process {
            name: "P".into(),
            vars: vec![],
            nodes: vec![
                node(NodeKind::Assign {
                    var: 0,
                    value: Expr::Const(1),
                    next: 1,
                }),
                node(NodeKind::Branch {
                    cond: Expr::Var(0),
                    then: 2,
                    els: 4,
                }),
                node(NodeKind::Assign {
                    var: 0,
                    value: Expr::Var(0),
                    next: 3,
                }),
                node(NodeKind::Assign {
                    var: 1,
                    value: Expr::Var(0),
                    next: 1,
                }),
                node(NodeKind::Comm {
                    op: Comm::Out {
                        chan: 0,
                        args: vec![Operand::Var(0)],
                    },
                    next: 5,
                }),
                node(NodeKind::Halt),
            ],
            entry: 0,
            pos: Pos::default(),
        };
        assert_eq!(
            cut_points(&p, None),
            vec![false, true, false, false, true, true]
        );
    }

    #[test]
    fn strongly_connected_components() {
        let b = |term| Block {
            insts: vec![],
            term,
            note: String::new(),
        };
        // 0 -> 1 -> 2 -> 1, 2 -> 3 (count, next 0; over 4), 4 leaves.
        let blocks = vec![
            b(Term::Jump(1)),
            b(Term::Jump(2)),
            b(Term::Branch {
                cond: Expr::Var(0),
                then: 1,
                els: 3,
            }),
            b(Term::Count {
                counter: 0,
                next: 0,
                over: 4,
            }),
            b(Term::Leave {
                pcs: vec![],
                why: Leave::Abort,
            }),
        ];
        let c = sccs(&blocks);
        assert_eq!(c[1], c[2]);
        assert_ne!(c[0], c[1], "the cycle through the count is not uncounted");
        assert_ne!(c[3], c[0]);
        assert_ne!(c[4], c[3]);
    }
}
