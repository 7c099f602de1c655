//! Extraction by symbolic execution (`esp::explore`) and the graph
//! interpreter (`esp::fp::run`), as a specification:
//! - Figure 2 with Figure 5: the control states of Figure 6, the exit and
//!   abort points, and what the graph does when run;
//! - every fast path is only a hint: a plain process-based interpretation
//!   that enters the graphs wherever their start states occur ends up with
//!   the same output and the same final state as one that never does
//!   (Figure 2, and random Kahn programs with random specifications);
//! - the automaton of a filter chain runs the chain, suspending when the
//!   input runs dry and resuming when more comes;
//! - the state limit and programs the automaton does not handle fail with
//!   their errors.
//!
//! The plain interpretation here (`Sim`) is the runtime's scheduling rules
//! (docs/esp.md, "Scheduling" and "Entry") written out directly: a FIFO ready list, processes run until they block, the
//! reader of a rendezvous continues, `alt` rotates its start arm, and a fast
//! path is entered when a process is at its start statement and every
//! other process of the path is at its own.

use std::collections::VecDeque;

use esp::explore::{self, ExploreOptions};
use esp::fp::{self, Graph, Io, Kind, Leave, Term};
use esp::ir::{ChanId, ChanKind, Comm, ExternId, Layout, NodeKind, Pc, Program};
use esp::runtime::Event;
use esp::spec::Schedule;

const FIGURE2: &str = include_str!("../programs/figure2.esp");
const FIGURE5: &str = include_str!("../programs/figure5.fp");

// ---------------------------------------------------------------------------
// The host: external queues and host functions.

#[derive(Clone, Debug)]
struct Host {
    names: Vec<String>,
    /// Input messages per channel.
    queues: Vec<VecDeque<Vec<i64>>>,
    /// Output messages per channel.
    out: Vec<Vec<Vec<i64>>>,
    /// Every host call, in order.
    calls: Vec<(String, Vec<i64>)>,
    funcs: fn(&str, &[i64]) -> i64,
    /// Every external event, in order.
    trace: Vec<Event>,
}

impl Host {
    fn new(p: &Program, funcs: fn(&str, &[i64]) -> i64) -> Host {
        Host {
            names: p.externs.iter().map(|e| e.name.clone()).collect(),
            queues: vec![VecDeque::new(); p.channels.len()],
            out: vec![Vec::new(); p.channels.len()],
            calls: Vec::new(),
            funcs,
            trace: Vec::new(),
        }
    }

    fn push(&mut self, p: &Program, chan: &str, msg: &[i64]) {
        self.queues[p.channel(chan).unwrap() as usize].push_back(msg.to_vec());
    }

    /// The calls of one host function, in order.
    fn calls_of(&self, f: &str) -> Vec<Vec<i64>> {
        self.calls
            .iter()
            .filter(|(n, _)| n == f)
            .map(|(_, a)| a.clone())
            .collect()
    }
}

impl Io for Host {
    fn recv(&mut self, chan: ChanId, dst: &mut [i64]) -> bool {
        match self.queues[chan as usize].pop_front() {
            Some(m) => {
                dst.copy_from_slice(&m);
                self.trace.push(Event::In { chan, fields: m });
                true
            }
            None => false,
        }
    }

    fn send(&mut self, chan: ChanId, src: &[i64]) {
        self.out[chan as usize].push(src.to_vec());
        self.trace.push(Event::Out {
            chan,
            fields: src.to_vec(),
        });
    }

    fn call(&mut self, f: ExternId, args: &[i64]) -> i64 {
        let name = self.names[f as usize].clone();
        let v = (self.funcs)(&name, args);
        self.calls.push((name, args.to_vec()));
        v
    }
}

/// Figure 2's host functions: a translation is unavailable for one page in
/// five; translating adds an offset; a packet mixes address and size.
fn figure2_host(name: &str, a: &[i64]) -> i64 {
    match name {
        "translationUnavailable" => ((a[0] >> 12) % 5 == 4) as i64,
        "translate" => a[0] + 0x4000_0000,
        "preparePacket" => a[0] ^ (a[1] << 3),
        _ => panic!("no host function {name}"),
    }
}

// ---------------------------------------------------------------------------
// The plain interpretation.

#[derive(Copy, Clone, Debug, PartialEq)]
enum St {
    Ready,
    Blocked,
    Halted,
}

/// A fast path the simulation may enter.
struct Path {
    g: Graph,
    /// The start pc of each process of `g.procs`.
    start: Vec<Pc>,
    eligible: u64,
}

struct Sim<'a> {
    prog: &'a Program,
    layout: Layout,
    vars: Vec<i64>,
    pcs: Vec<Pc>,
    st: Vec<St>,
    ready: VecDeque<usize>,
    alt_start: Vec<Vec<usize>>,
    host: Host,
    paths: Vec<Path>,
    /// A process not to be checked for entry again at this pc.
    moved: Vec<Option<Pc>>,
    entries: usize,
    leaves: Vec<Leave>,
    started: bool,
}

/// What stopped a run.
#[derive(Clone, Debug, PartialEq)]
enum Stop {
    Idle,
    Fault(String),
}

impl<'a> Sim<'a> {
    fn new(prog: &'a Program, host: Host) -> Sim<'a> {
        let layout = Layout::of(prog);
        let n = prog.processes.len();
        Sim {
            prog,
            vars: vec![0; layout.slots as usize],
            layout,
            pcs: prog.processes.iter().map(|p| p.entry).collect(),
            st: vec![St::Ready; n],
            ready: VecDeque::new(),
            alt_start: prog
                .processes
                .iter()
                .map(|p| vec![0; p.nodes.len()])
                .collect(),
            host,
            paths: Vec::new(),
            moved: vec![None; n],
            entries: 0,
            leaves: Vec::new(),
            started: false,
        }
    }

    fn with_paths(mut self, graphs: Vec<Graph>, starts: Vec<Vec<Pc>>) -> Self {
        for (g, start) in graphs.into_iter().zip(starts) {
            self.paths.push(Path {
                g,
                start,
                eligible: 0,
            });
        }
        self
    }

    fn node(&self, p: usize) -> &'a NodeKind {
        &self.prog.processes[p].nodes[self.pcs[p] as usize].kind
    }

    fn kind(&self, c: ChanId) -> ChanKind {
        self.prog.channels[c as usize].kind
    }

    /// Runs until no process is ready.
    fn run(&mut self) -> Stop {
        if !self.started {
            self.started = true;
            self.ready.extend(0..self.prog.processes.len());
        } else {
            // Retry every process blocked on an external in.
            for p in 0..self.prog.processes.len() {
                if self.st[p] == St::Blocked && self.waits_external(p) {
                    self.st[p] = St::Ready;
                    self.ready.push_back(p);
                }
            }
        }
        while let Some(p) = self.ready.pop_front() {
            if let Err(f) = self.run_proc(p) {
                return Stop::Fault(f);
            }
        }
        Stop::Idle
    }

    fn waits_external(&self, p: usize) -> bool {
        match self.node(p) {
            NodeKind::Comm { op, .. } => self.kind(op.chan()) == ChanKind::ExternalIn,
            NodeKind::Alt { arms } => arms
                .iter()
                .any(|a| self.kind(a.op.chan()) == ChanKind::ExternalIn),
            _ => false,
        }
    }

    /// Enters a fast path if `p` is at its start and every other process of
    /// it is at its own; true if it did (all of them are then ready).
    fn try_enter(&mut self, p: usize) -> bool {
        for k in 0..self.paths.len() {
            let path = &self.paths[k];
            let Some(i) = path.g.procs.iter().position(|&q| q as usize == p) else {
                continue;
            };
            if self.pcs[p] != path.start[i] || self.moved[p] == Some(self.pcs[p]) {
                continue;
            }
            let others_ok = path.g.procs.iter().zip(&path.start).all(|(&q, &pc)| {
                let q = q as usize;
                q == p || (self.pcs[q] == pc && self.st[q] != St::Halted)
            });
            if !others_ok {
                continue;
            }
            let path = &mut self.paths[k];
            path.eligible += 1;
            if matches!(
                path.g.kind,
                Kind::FastPath {
                    nondeterministic: true
                }
            ) && path.eligible.is_multiple_of(8)
            {
                continue;
            }
            let procs: Vec<usize> = path.g.procs.iter().map(|&q| q as usize).collect();
            self.ready.retain(|q| !procs.contains(q));
            self.entries += 1;
            let leave = fp::run(&path.g, 0, &mut self.vars, &mut self.pcs, &mut self.host)
                .expect("graph runs");
            self.leaves.push(leave);
            for q in procs {
                self.st[q] = St::Ready;
                self.ready.push_back(q);
                self.moved[q] = Some(self.pcs[q]);
            }
            return true;
        }
        false
    }

    /// A blocked process that completes `op`: the process and its next pc
    /// (advancing its `alt`'s start arm).
    fn partner(&mut self, me: usize, op: &Comm) -> Option<(usize, Comm, Pc)> {
        let fits = |o: &Comm| o.chan() == op.chan() && o.is_in() != op.is_in();
        for q in 0..self.prog.processes.len() {
            if q == me || self.st[q] != St::Blocked {
                continue;
            }
            match self.node(q) {
                NodeKind::Comm { op: o, next } if fits(o) => return Some((q, o.clone(), *next)),
                NodeKind::Alt { arms } => {
                    let pc = self.pcs[q] as usize;
                    let n = arms.len();
                    let s = self.alt_start[q][pc];
                    for k in 0..n {
                        let i = (s + k) % n;
                        if fits(&arms[i].op) {
                            self.alt_start[q][pc] = (i + 1) % n;
                            return Some((q, arms[i].op.clone(), arms[i].next));
                        }
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// Copies a message from the writer's operands to the reader's variables.
    fn transfer(&mut self, reader: usize, rop: &Comm, writer: usize, wop: &Comm) {
        if let (Comm::In { vars, .. }, Comm::Out { args, .. }) = (rop, wop) {
            for (v, a) in vars.iter().zip(args) {
                let val = match a {
                    esp::ir::Operand::Var(x) => {
                        self.vars[self.layout.slot(writer as u32, *x) as usize]
                    }
                    esp::ir::Operand::Const(c) => *c,
                };
                self.vars[self.layout.slot(reader as u32, *v) as usize] = val;
            }
        }
    }

    /// Whether operation `op` of process `p` can complete now.
    fn can_complete(&mut self, p: usize, op: &Comm) -> bool {
        match self.kind(op.chan()) {
            ChanKind::ExternalIn => !self.host.queues[op.chan() as usize].is_empty(),
            ChanKind::ExternalOut => true,
            ChanKind::Internal => {
                let fits = |o: &Comm| o.chan() == op.chan() && o.is_in() != op.is_in();
                (0..self.prog.processes.len()).any(|q| {
                    q != p
                        && self.st[q] == St::Blocked
                        && match self.node(q) {
                            NodeKind::Comm { op: o, .. } => fits(o),
                            NodeKind::Alt { arms } => arms.iter().any(|a| fits(&a.op)),
                            _ => false,
                        }
                })
            }
        }
    }

    /// Performs `op` of process `p` (which can complete), going on at `next`.
    /// Returns the process that runs next, if not `p`.
    fn complete(&mut self, p: usize, op: &Comm, next: Pc) -> Option<usize> {
        match self.kind(op.chan()) {
            ChanKind::ExternalIn => {
                let msg = self.host.queues[op.chan() as usize].pop_front().unwrap();
                self.host.trace.push(Event::In {
                    chan: op.chan(),
                    fields: msg.clone(),
                });
                if let Comm::In { vars, .. } = op {
                    for (v, x) in vars.iter().zip(msg) {
                        self.vars[self.layout.slot(p as u32, *v) as usize] = x;
                    }
                }
                self.pcs[p] = next;
                None
            }
            ChanKind::ExternalOut => {
                if let Comm::Out { args, .. } = op {
                    let msg = args
                        .iter()
                        .map(|a| match a {
                            esp::ir::Operand::Var(x) => {
                                self.vars[self.layout.slot(p as u32, *x) as usize]
                            }
                            esp::ir::Operand::Const(c) => *c,
                        })
                        .collect::<Vec<i64>>();
                    self.host.trace.push(Event::Out {
                        chan: op.chan(),
                        fields: msg.clone(),
                    });
                    self.host.out[op.chan() as usize].push(msg);
                }
                self.pcs[p] = next;
                None
            }
            ChanKind::Internal => {
                let (q, qop, qnext) = self.partner(p, op).unwrap();
                self.pcs[p] = next;
                self.pcs[q] = qnext;
                self.st[q] = St::Ready;
                if op.is_in() {
                    self.transfer(p, op, q, &qop);
                    self.ready.push_back(q);
                    None
                } else {
                    self.transfer(q, &qop, p, op);
                    self.ready.push_back(p);
                    Some(q)
                }
            }
        }
    }

    fn run_proc(&mut self, mut p: usize) -> Result<(), String> {
        loop {
            if self.try_enter(p) {
                return Ok(());
            }
            let pc = self.pcs[p];
            let node = self.node(p);
            let name = &self.prog.processes[p].name;
            let base = self.layout.base[p] as usize;
            let nvars = self.prog.processes[p].vars.len();
            let (vars, host) = (&mut self.vars[base..base + nvars], &mut self.host);
            let mut call = |f: ExternId, a: &[i64]| host.call(f, a);
            let next = match node {
                NodeKind::Assign { var, value, next } => {
                    let v = value
                        .eval(vars, &mut call)
                        .ok_or(format!("division by zero in {name} at pc {pc}"))?;
                    vars[*var as usize] = v;
                    *next
                }
                NodeKind::Eval { value, next } => {
                    value
                        .eval(vars, &mut call)
                        .ok_or(format!("division by zero in {name} at pc {pc}"))?;
                    *next
                }
                NodeKind::Branch { cond, then, els } => {
                    let v = cond
                        .eval(vars, &mut call)
                        .ok_or(format!("division by zero in {name} at pc {pc}"))?;
                    if v != 0 { *then } else { *els }
                }
                NodeKind::Nop { next } => *next,
                NodeKind::Assert { cond, next } => {
                    let v = cond
                        .eval(vars, &mut call)
                        .ok_or(format!("division by zero in {name} at pc {pc}"))?;
                    if v == 0 {
                        return Err(format!("assertion failed in {name} at pc {pc}"));
                    }
                    *next
                }
                NodeKind::Halt => {
                    self.st[p] = St::Halted;
                    return Ok(());
                }
                NodeKind::Comm { op, next } => {
                    if !self.can_complete(p, op) {
                        self.st[p] = St::Blocked;
                        return Ok(());
                    }
                    self.moved[p] = None;
                    if let Some(q) = self.complete(p, op, *next) {
                        p = q;
                    }
                    continue;
                }
                NodeKind::Alt { arms } => {
                    let n = arms.len();
                    let s = self.alt_start[p][pc as usize];
                    let Some(i) = (0..n)
                        .map(|k| (s + k) % n)
                        .find(|&i| self.can_complete(p, &arms[i].op))
                    else {
                        self.st[p] = St::Blocked;
                        return Ok(());
                    };
                    self.alt_start[p][pc as usize] = (i + 1) % n;
                    self.moved[p] = None;
                    if let Some(q) = self.complete(p, &arms[i].op, arms[i].next) {
                        p = q;
                    }
                    continue;
                }
            };
            self.pcs[p] = next;
            self.moved[p] = None;
        }
    }
}

// ---------------------------------------------------------------------------
// Helpers.

fn figure2() -> (Program, esp::spec::Spec) {
    let p = esp::compile(FIGURE2).expect("figure 2 compiles");
    let s = esp::spec::parse(FIGURE5, &p).expect("figure 5 parses");
    (p, s)
}

/// The control states of a graph as the source lines of each process's pc
/// (from the block notes `*hostRequest@13 translateAddress@40:blocked ...`).
fn state_lines(g: &Graph) -> Vec<Vec<u32>> {
    g.blocks
        .iter()
        .filter(|b| !b.note.is_empty())
        .map(|b| {
            b.note
                .split_whitespace()
                .map(|part| {
                    let at = part.split('@').nth(1).unwrap();
                    at.split(':').next().unwrap().parse().unwrap()
                })
                .collect()
        })
        .collect()
}

/// The pc of the node at `line` in process `proc` satisfying `f`.
fn pc_at(p: &Program, proc: &str, line: u32, f: impl Fn(&NodeKind) -> bool) -> Pc {
    let pr = &p.processes[p.process(proc).unwrap() as usize];
    pr.nodes
        .iter()
        .position(|n| n.pos.line == line && f(&n.kind))
        .unwrap_or_else(|| panic!("no node at {proc}:{line}")) as Pc
}

fn is_comm(k: &NodeKind) -> bool {
    matches!(k, NodeKind::Comm { .. })
}

fn is_nop(k: &NodeKind) -> bool {
    matches!(k, NodeKind::Nop { .. })
}

/// Every leave of a graph: why, and the stored pcs.
fn leaves(g: &Graph) -> Vec<(Leave, Vec<Pc>)> {
    g.blocks
        .iter()
        .filter_map(|b| match &b.term {
            Term::Leave { pcs, why } => Some((*why, pcs.iter().map(|&(_, pc)| pc).collect())),
            _ => None,
        })
        .collect()
}

/// Runs the Figure 5 graph once from its start state with `host`'s input.
fn run_figure5(p: &Program, g: &Graph, host: &mut Host) -> (Leave, Vec<Pc>, Vec<i64>) {
    let mut vars = vec![0; Layout::of(p).slots as usize];
    let mut pcs = vec![u32::MAX; p.processes.len()];
    let leave = fp::run(g, 0, &mut vars, &mut pcs, host).unwrap();
    (leave, pcs, vars)
}

// ---------------------------------------------------------------------------
// Figure 2 with Figure 5.

/// The start state and the states of Figure 6 (pcs named by Figure 2's
/// lines): the path starts with hostRequest at its `alt` and the others at
/// their `in`s; after the request it is (13, 32, 50); after the translation
/// request (15, 35, 50); hostRequest reaches its exit at (19, 32, 50).
#[test]
fn figure6_states() {
    let (p, s) = figure2();
    let g = explore::fast_path(&p, &s.fastpaths[0], &ExploreOptions::default()).unwrap();
    let names: Vec<&str> = g
        .procs
        .iter()
        .map(|&q| p.processes[q as usize].name.as_str())
        .collect();
    assert_eq!(names, ["hostRequest", "translateAddress", "networkSend"]);
    // The alt's two arms are both viable (hostFetchRequestC is not listed).
    assert_eq!(
        g.kind,
        Kind::FastPath {
            nondeterministic: true
        }
    );
    assert_eq!(g.entries.len(), 1);
    let entry = &g.blocks[g.entries[0] as usize].note;
    assert_eq!(entry, "*hostRequest@11 translateAddress@32 networkSend@50");
    let states = state_lines(&g);
    for want in [
        [13, 32, 50],
        [15, 35, 50],
        [19, 32, 50],
        [15, 40, 50],
        [16, 41, 50],
        [15, 41, 51],
    ] {
        assert!(
            states.iter().any(|s| s[..] == want[..]),
            "state {want:?} missing from {states:?}"
        );
    }
    // Control states are counted; the blocks of code inline after one (in a
    // process's straight-line code) have notes too.
    assert!(g.states > 0 && g.states <= states.len());
    // One repetition, (H2 H3)*: one counter; and a loop counter for the
    // cycle through the unlisted fetch arm (the alt, then an external
    // message, then the alt again), which no repetition counts.
    assert_eq!(g.counters, vec![65_536, 65_536]);
    // The code moves data across processes: translateRequestC's transfer.
    let shown = g.display(&p).to_string();
    assert!(
        shown.contains("translateAddress.virtualAddress = hostRequest.virtualAddress"),
        "{shown}"
    );
    assert!(
        shown.contains("recv hostSendRequestC(hostRequest.virtualAddress, hostRequest.size)"),
        "{shown}"
    );
    assert!(
        shown.contains("send networkSendC(networkSend.packet)"),
        "{shown}"
    );
    assert!(shown.contains("leave exit: hostRequest@19"), "{shown}");
}

/// The exit and abort points of Figure 5's path, by where they leave.
#[test]
fn figure5_exits_and_aborts() {
    let (p, s) = figure2();
    let g = explore::fast_path(&p, &s.fastpaths[0], &ExploreOptions::default()).unwrap();
    let l = leaves(&g);
    let alt = pc_at(&p, "hostRequest", 11, |k| matches!(k, NodeKind::Alt { .. }));
    let out13 = pc_at(&p, "hostRequest", 13, is_comm);
    let exit1 = pc_at(&p, "hostRequest", 19, is_nop);
    let in15 = pc_at(&p, "hostRequest", 15, is_comm);
    let in32 = pc_at(&p, "translateAddress", 32, is_comm);
    let nop2 = pc_at(&p, "translateAddress", 36, is_nop);
    let in50 = pc_at(&p, "networkSend", 50, is_comm);
    let nop3 = pc_at(&p, "networkSend", 52, is_nop);
    let has = |why: Leave, f: &dyn Fn(&[Pc]) -> bool| l.iter().any(|(w, pcs)| *w == why && f(pcs));
    // No request: abort at the alt, nothing moved.
    assert!(has(Leave::Abort, &|v| v == [alt, in32, in50]));
    // A request of 10000 bytes or more: abort after receiving it.
    assert!(has(Leave::Abort, &|v| v == [out13, in32, in50]));
    // A missing translation: abort before #2.
    assert!(has(Leave::Abort, &|v| v[1] == nop2));
    // hostRequest reaches #1: exit, #1 not executed.
    assert!(has(Leave::Exit, &|v| v == [exit1, in32, in50]));
    // networkSend reaches #3: exit.
    assert!(has(Leave::Exit, &|v| v[0] == in15 && v[2] == nop3));
    // No leave stores a pc that is not a statement of its process.
    for (_, pcs) in &l {
        for (i, &pc) in pcs.iter().enumerate() {
            assert!((pc as usize) < p.processes[g.procs[i] as usize].nodes.len());
        }
    }
}

/// What the graph does with particular inputs, run by `fp::run`.
#[test]
fn figure5_runs() {
    let (p, s) = figure2();
    let g = explore::fast_path(&p, &s.fastpaths[0], &ExploreOptions::default()).unwrap();
    let net = p.channel("networkSendC").unwrap() as usize;
    let pc = |proc: &str, line: u32, f: fn(&NodeKind) -> bool| pc_at(&p, proc, line, f);

    // One page: translated and sent, then networkSend exits at #3.
    let mut h = Host::new(&p, figure2_host);
    h.push(&p, "hostSendRequestC", &[3 * 4096, 4096]);
    let (leave, pcs, _) = run_figure5(&p, &g, &mut h);
    assert_eq!(leave, Leave::Exit);
    assert_eq!(pcs[2], pc("networkSend", 52, is_nop));
    let pa = 3 * 4096 + 0x4000_0000;
    assert_eq!(h.out[net], vec![vec![pa ^ (4096 << 3)]]);
    assert_eq!(h.calls_of("translationUnavailable"), vec![vec![3 * 4096]]);

    // An empty request: hostRequest exits at #1; translateAddress is back at
    // its `in`, networkSend never ran.
    let mut h = Host::new(&p, figure2_host);
    h.push(&p, "hostSendRequestC", &[4096, 0]);
    let (leave, pcs, _) = run_figure5(&p, &g, &mut h);
    assert_eq!(leave, Leave::Exit);
    assert_eq!(
        pcs,
        vec![
            pc("hostRequest", 19, is_nop),
            pc("translateAddress", 32, is_comm),
            pc("networkSend", 50, is_comm)
        ]
    );
    assert!(h.out[net].is_empty());

    // Too large: the start predicate fails after the request was received.
    let mut h = Host::new(&p, figure2_host);
    h.push(&p, "hostSendRequestC", &[0, 20_000]);
    let (leave, pcs, vars) = run_figure5(&p, &g, &mut h);
    assert_eq!(leave, Leave::Abort);
    assert_eq!(pcs[0], pc("hostRequest", 13, is_comm));
    let size = Layout::of(&p).slot(0, 2) as usize;
    assert_eq!(vars[size], 20_000);

    // A misaligned address: abort before the failing assert, which the
    // process-based code then reports.
    let mut h = Host::new(&p, figure2_host);
    h.push(&p, "hostSendRequestC", &[5, 4096]);
    let (leave, pcs, _) = run_figure5(&p, &g, &mut h);
    assert_eq!(leave, Leave::Abort);
    assert_eq!(
        pcs[1],
        pc("translateAddress", 33, |k| matches!(
            k,
            NodeKind::Assert { .. }
        ))
    );

    // A missing translation: abort before #2, after the host was asked once.
    let mut h = Host::new(&p, figure2_host);
    h.push(&p, "hostSendRequestC", &[4 * 4096, 4096]);
    let (leave, pcs, _) = run_figure5(&p, &g, &mut h);
    assert_eq!(leave, Leave::Abort);
    assert_eq!(pcs[1], pc("translateAddress", 36, is_nop));
    assert_eq!(h.calls.len(), 1);

    // Only fetch requests: each is consumed by the unlisted arm, then the
    // alt has nothing: abort at the alt.
    let mut h = Host::new(&p, figure2_host);
    h.push(&p, "hostFetchRequestC", &[7]);
    h.push(&p, "hostFetchRequestC", &[8]);
    let (leave, pcs, vars) = run_figure5(&p, &g, &mut h);
    assert_eq!(leave, Leave::Abort);
    assert_eq!(
        pcs[0],
        pc("hostRequest", 11, |k| matches!(k, NodeKind::Alt { .. }))
    );
    let source = Layout::of(&p).slot(0, 3) as usize;
    assert_eq!(vars[source], 8);
    assert!(h.queues.iter().all(|q| q.is_empty()));
}

/// A deterministic stream of Figure 2 requests.
fn requests(seed: u64, n: usize) -> Vec<[i64; 2]> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|_| {
            let va = (next() % 64) as i64 * 4096;
            let size = match next() % 6 {
                0 => 0,
                1 => 20_480,
                k => (k as i64 - 1) * 4096 % 12_288,
            };
            [va, size]
        })
        .collect()
}

/// Figure 2 run plainly and with the fast path agree: the packets sent, the
/// host calls of each function, and the final state.
#[test]
fn figure2_fast_path_agrees_with_plain_interpretation() {
    let (p, s) = figure2();
    let g = explore::fast_path(&p, &s.fastpaths[0], &ExploreOptions::default()).unwrap();
    let start: Vec<Pc> = s.fastpaths[0]
        .procs
        .iter()
        .map(|ps| ps.start.stmt.pc)
        .collect();
    let mut entered = 0;
    for seed in 0..40 {
        let mut host = Host::new(&p, figure2_host);
        for r in requests(seed, 1 + seed as usize % 7) {
            host.push(&p, "hostSendRequestC", &r);
        }
        if seed % 3 == 0 {
            host.push(&p, "hostFetchRequestC", &[seed as i64]);
        }
        let mut plain = Sim::new(&p, host.clone());
        let mut fast = Sim::new(&p, host).with_paths(vec![g.clone()], vec![start.clone()]);
        let a = plain.run();
        let b = fast.run();
        assert_eq!(a, Stop::Idle, "seed {seed}");
        assert_eq!(a, b, "seed {seed}");
        assert_eq!(plain.host.out, fast.host.out, "seed {seed}");
        for f in ["translationUnavailable", "translate", "preparePacket"] {
            assert_eq!(
                plain.host.calls_of(f),
                fast.host.calls_of(f),
                "seed {seed}: calls of {f}"
            );
        }
        assert_eq!(plain.pcs, fast.pcs, "seed {seed}");
        assert_eq!(plain.vars, fast.vars, "seed {seed}");
        entered += fast.entries;
    }
    assert!(entered >= 40, "the fast path was entered {entered} times");
}

/// An assertion that fails on the fast path aborts before it, and the
/// plain code reports it exactly as without the fast path.
#[test]
fn figure2_assertion_failure_is_reported_by_the_process_code() {
    let (p, s) = figure2();
    let g = explore::fast_path(&p, &s.fastpaths[0], &ExploreOptions::default()).unwrap();
    let start: Vec<Pc> = s.fastpaths[0]
        .procs
        .iter()
        .map(|ps| ps.start.stmt.pc)
        .collect();
    let mut host = Host::new(&p, figure2_host);
    host.push(&p, "hostSendRequestC", &[4097, 4096]);
    host.push(&p, "hostSendRequestC", &[4096, 4096]);
    let mut plain = Sim::new(&p, host.clone());
    let mut fast = Sim::new(&p, host).with_paths(vec![g], vec![start]);
    let a = plain.run();
    assert!(
        matches!(&a, Stop::Fault(m) if m.starts_with("assertion failed in translateAddress")),
        "{a:?}"
    );
    assert_eq!(fast.run(), a);
    assert_eq!(fast.leaves, vec![Leave::Abort]);
    assert_eq!(plain.host.out, fast.host.out);
    assert_eq!(plain.pcs, fast.pcs);
}

// ---------------------------------------------------------------------------
// Limits and unsupported programs.

#[test]
fn state_limit_is_an_error() {
    let (p, s) = figure2();
    let small = ExploreOptions {
        state_limit: 5,
        ..ExploreOptions::default()
    };
    let e = explore::fast_path(&p, &s.fastpaths[0], &small).unwrap_err();
    assert_eq!(
        e,
        esp::Error::StateLimit {
            what: "demo".into(),
            limit: 5
        }
    );
    assert!(e.to_string().contains("more than 5 control states"), "{e}");
    let chain = esp::compile(CHAIN).unwrap();
    let e = esp::automata::automaton(&chain, &small).unwrap_err();
    assert!(
        matches!(e, esp::Error::StateLimit { ref what, limit: 5 } if what == "automaton"),
        "{e}"
    );
}

#[test]
fn automaton_rejects_alt() {
    let (p, _) = figure2();
    let e = esp::automata::automaton(&p, &ExploreOptions::default()).unwrap_err();
    assert!(matches!(e, esp::Error::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("alt"), "{e}");
}

// ---------------------------------------------------------------------------
// The automaton of a small filter chain.

const CHAIN: &str = "
channel src(int) external in;
channel dst(int) external out;
channel a(int, int);
channel b(int, int);
process Source {
  var x;
  while (true) { in(src, x); out(a, 1, x); }
}
process Double {
  var f, x;
  while (true) {
    in(a, f, x);
    if (x % 3 == 0) { out(b, f, x * 2); } else { out(b, f, x); out(b, 0, x + 100); }
  }
}
process Sink {
  var f, x, count;
  while (true) { in(b, f, x); count = count + 1; out(dst, x * 1000 + count); }
}
";

fn no_host(name: &str, _: &[i64]) -> i64 {
    panic!("no host function {name}")
}

/// The automaton runs the chain like the plain interpretation, suspends when
/// the input is exhausted, and resumes at the entry it names.
#[test]
fn automaton_of_a_filter_chain() {
    for schedule in [Schedule::Fifo, Schedule::DownstreamFirst] {
        automaton_of_a_filter_chain_with(schedule);
    }
}

fn automaton_of_a_filter_chain_with(schedule: Schedule) {
    let p = esp::compile(CHAIN).unwrap();
    let options = ExploreOptions {
        automaton_schedule: schedule,
        ..ExploreOptions::default()
    };
    let g = esp::automata::automaton(&p, &options).unwrap();
    assert_eq!(g.kind, Kind::Automaton);
    assert_eq!(g.procs, vec![0, 1, 2]);
    assert!(g.counters.is_empty());
    // No process runs alone: no channel statements remain in the graph as
    // internal communication, only transfers.
    let shown = g.display(&p).to_string();
    assert!(shown.contains("Double.x = Source.x"), "{shown}");
    assert!(shown.contains("recv src(Source.x)"), "{shown}");

    let mut plain = Sim::new(&p, Host::new(&p, no_host));
    let mut auto = Host::new(&p, no_host);
    let mut vars = vec![0; Layout::of(&p).slots as usize];
    let mut pcs = vec![0; 3];
    let mut entry = 0;
    let dst = p.channel("dst").unwrap() as usize;
    for round in 0..4i64 {
        for i in 0..(round * 3) {
            let x = round * 10 + i;
            plain.host.push(&p, "src", &[x]);
            auto.push(&p, "src", &[x]);
        }
        assert_eq!(plain.run(), Stop::Idle);
        let leave = fp::run(&g, entry, &mut vars, &mut pcs, &mut auto).unwrap();
        let Leave::Suspend { resume } = leave else {
            panic!("round {round}: {leave:?}");
        };
        assert!((resume as usize) < g.entries.len());
        entry = resume;
        assert_eq!(auto.out[dst], plain.host.out[dst], "round {round}");
        assert_eq!(pcs, plain.pcs, "round {round}");
        assert_eq!(vars, plain.vars, "round {round}");
    }
    assert!(!auto.out[dst].is_empty());
}

/// An automaton aborts where an assertion would fail or everything halted,
/// storing the pcs from which the process-based code goes on.
#[test]
fn automaton_aborts_on_failures_and_halting() {
    let src = "
channel c(int);
channel o(int) external out;
process A { var i; while (i < 3) { i = i + 1; out(c, 10 / (3 - i)); } }
process B { var x, n; while (n < 2) { in(c, x); n = n + 1; assert(x > 0); out(o, x); } }
";
    let p = esp::compile(src).unwrap();
    let g = esp::automata::automaton(&p, &ExploreOptions::default()).unwrap();
    let mut h = Host::new(&p, no_host);
    let mut vars = vec![0; Layout::of(&p).slots as usize];
    let mut pcs = vec![0; 2];
    // A sends 5 then 10; B outputs both and halts; A then divides by zero at
    // i = 3: abort before that statement.
    let leave = fp::run(&g, 0, &mut vars, &mut pcs, &mut h).unwrap();
    assert_eq!(leave, Leave::Abort);
    assert_eq!(h.out[1], vec![vec![5], vec![10]]);
    let a = &p.processes[0];
    assert!(
        matches!(&a.nodes[pcs[0] as usize].kind, NodeKind::Assign { value, .. } if value.may_fault()),
        "A stopped at {:?}",
        a.nodes[pcs[0] as usize]
    );
    assert!(matches!(
        p.processes[1].nodes[pcs[1] as usize].kind,
        NodeKind::Halt
    ));
    // The plain interpretation reports the division from the same state.
    let mut plain = Sim::new(&p, Host::new(&p, no_host));
    assert!(matches!(plain.run(), Stop::Fault(m) if m.starts_with("division by zero in A")));
    assert_eq!(plain.pcs, pcs);
}

// ---------------------------------------------------------------------------
// The rules of the extraction on small programs.

fn extract(src: &str, spec: &str) -> (Program, Graph) {
    let p = esp::compile(src).unwrap();
    let s = esp::spec::parse(spec, &p).unwrap();
    let g = explore::fast_path(&p, &s.fastpaths[0], &ExploreOptions::default()).unwrap();
    (p, g)
}

/// A channel that a process outside the path also uses is never used on
/// the path: the path aborts before the statement.
#[test]
fn channels_shared_with_other_processes_abort() {
    let src = "
channel c(int);
channel d(int);
channel o(int) external out;
process A { var x; while (true) { out(c, x); x = x + 1; out(d, x); } }
process B { var y; while (true) { in(c, y); out(o, y); } }
process C { var z; while (true) { in(d, z); out(o, z); } }
process D { var w; while (true) { in(d, w); } }
";
    let (p, g) = extract(
        src,
        "fastpath f { process A { start c; follows c*; } process B { start c; follows c*; } }",
    );
    let mut h = Host::new(&p, no_host);
    let mut vars = vec![0; Layout::of(&p).slots as usize];
    let mut pcs = vec![u32::MAX; 4];
    let leave = fp::run(&g, 0, &mut vars, &mut pcs, &mut h).unwrap();
    // A sends on c to B (both on the path); B outputs; A stops before d,
    // which C and D (outside the path) read.
    assert_eq!(leave, Leave::Abort);
    let a_out_d = pc_at(&p, "A", 5, |k| {
        matches!(
            k,
            NodeKind::Comm {
                op: Comm::Out { chan: 1, .. },
                ..
            }
        )
    });
    assert_eq!(pcs[0], a_out_d);
    assert_eq!(h.out[2], vec![vec![0]]);
    assert_eq!(
        (pcs[2], pcs[3]),
        (u32::MAX, u32::MAX),
        "C and D are not stored"
    );
}

/// `yield` overrides the default policy; the path's automaton follows the
/// specification's order of events, aborting after an unexpected partner.
#[test]
fn yield_changes_the_schedule() {
    let src = "
channel c(int);
channel o(int) external out;
process W { var i; while (true) { i = i + 1; out(c, i); out(o, 0 - i); } }
process R { var x; while (true) { in(c, x); out(o, x); } }
";
    // Default: the reader continues after each rendezvous, so R's output of
    // i comes before W's output of -i.
    let (p, g) = extract(
        src,
        "fastpath f { process W { start c; follows c*; } process R { start c; follows c*; } }",
    );
    let mut h = Host::new(&p, no_host);
    let mut vars = vec![0; Layout::of(&p).slots as usize];
    let mut pcs = vec![0; 2];
    let mut g1 = g.clone();
    g1.counters = vec![3; g1.counters.len()];
    let leave = fp::run(&g1, 0, &mut vars, &mut pcs, &mut h).unwrap();
    assert_eq!(leave, Leave::Abort, "the repetition bound ends the path");
    let o = p.channel("o").unwrap() as usize;
    assert_eq!(&h.out[o][2..6], &[vec![1], vec![-1], vec![2], vec![-2]]);
    // With `yield W` on R's element, W runs right after each rendezvous.
    let (p, g) = extract(
        src,
        "fastpath f { process W { start c; follows c*; } process R { start c yield W; follows (c yield W)*; } }",
    );
    let mut h = Host::new(&p, no_host);
    let mut vars = vec![0; Layout::of(&p).slots as usize];
    let mut g1 = g.clone();
    g1.counters = vec![3; g1.counters.len()];
    fp::run(&g1, 0, &mut vars, &mut pcs, &mut h).unwrap();
    assert_eq!(&h.out[o][2..6], &[vec![-1], vec![1], vec![-2], vec![2]]);
}

/// A loop through an internal rendezvous that no repetition counts still
/// gets a counter, so the path cannot run forever (§4.4).
#[test]
fn unlisted_loops_are_bounded() {
    let src = "
channel c(int);
process W { var i; #1 while (true) { i = i + 1; out(c, i); } }
process R { var x; #2 while (true) { in(c, x); } }
";
    // Only the starts, before the loops, are listed: the loop over c is
    // not the specification's business, and would never end.
    let (p, g) = extract(
        src,
        "fastpath f { process W { start #1; } process R { start #2; } }",
    );
    assert_eq!(g.counters, vec![65_536], "one loop counter");
    let mut h = Host::new(&p, no_host);
    let mut vars = vec![0; Layout::of(&p).slots as usize];
    let mut pcs = vec![0; 2];
    let mut g1 = g.clone();
    g1.counters = vec![10];
    let leave = fp::run(&g1, 0, &mut vars, &mut pcs, &mut h).unwrap();
    assert_eq!(leave, Leave::Abort);
    // The abort comes after a completed rendezvous: R received what W sent.
    let (wi, rx) = (
        Layout::of(&p).slot(0, 0) as usize,
        Layout::of(&p).slot(1, 0) as usize,
    );
    assert!(vars[wi] > 10 && vars[rx] == vars[wi], "{vars:?}");
    // With the default bound the path ends too.
    let leave = fp::run(&g, 0, &mut vars, &mut pcs, &mut h).unwrap();
    assert_eq!(leave, Leave::Abort);

    // When a repetition covers the loop, no extra counter is added.
    let (_, g) = extract(
        src,
        "fastpath f { process W { start #1; } process R { start #2; follows c*; } }",
    );
    assert_eq!(g.counters, vec![65_536], "only c*'s counter");
}

/// A loop through no channel operation (one that may never yield) gets a
/// counter bounded by `local_loop_bound`, in a fast path and in the
/// automaton: past it the graph aborts at the loop's head, where the
/// process-based code takes over and bounds the loop itself. A loop through
/// a channel operation gets none of it.
#[test]
fn loops_that_never_yield_are_bounded_in_graphs() {
    let src = "
channel i(int) external in;
channel o(int) external out;
process P {
  var x, n;
  while (true) {
    in(i, n);
    x = 0;
    while (x != n) { x = x + 1; }
    out(o, x);
  }
}
";
    let p = esp::compile(src).unwrap();
    let s = esp::spec::parse(
        "fastpath f { process P { statement i, o; start i; follows (o i)*; } }",
        &p,
    )
    .unwrap();
    let options = ExploreOptions {
        local_loop_bound: 40,
        ..ExploreOptions::default()
    };
    let head = pc_at(&p, "P", 9, |k| matches!(k, NodeKind::Branch { .. }));
    let x = Layout::of(&p).slot(0, 0) as usize;
    for whole in [false, true] {
        let mut g = if whole {
            esp::automata::automaton(&p, &options).unwrap()
        } else {
            explore::fast_path(&p, &s.fastpaths[0], &options).unwrap()
        };
        assert_eq!(g.counters.last(), Some(&40), "whole {whole}");
        for optimized in [false, true] {
            if optimized {
                esp::opt::optimize(&p, &mut g);
            }
            // 40 iterations are within the bound; -1 would take 2^64.
            for (n, want) in [(40, None), (-1, Some(41))] {
                let mut h = Host::new(&p, no_host);
                h.push(&p, "i", &[n]);
                let mut vars = vec![0; Layout::of(&p).slots as usize];
                let mut pcs = vec![0; 1];
                let leave = fp::run(&g, 0, &mut vars, &mut pcs, &mut h).unwrap();
                let at = format!("whole {whole}, optimized {optimized}, n {n}");
                match want {
                    None => {
                        assert_eq!(
                            h.out[p.channel("o").unwrap() as usize],
                            vec![vec![40]],
                            "{at}"
                        );
                    }
                    Some(x_at_abort) => {
                        assert_eq!((leave, pcs[0]), (Leave::Abort, head), "{at}");
                        assert_eq!(vars[x], x_at_abort, "{at}");
                    }
                }
            }
        }
    }
    // Without the inner loop no counter is added to the automaton, whose
    // only loop goes through `in` and `out`.
    let plain = src.replace("    while (x != n) { x = x + 1; }\n", "");
    let p = esp::compile(&plain).unwrap();
    let g = esp::automata::automaton(&p, &options).unwrap();
    assert!(g.counters.is_empty(), "{:?}", g.counters);
}

// ---------------------------------------------------------------------------
// Random programs and specifications (esp::random).

fn random_host(name: &str, a: &[i64]) -> i64 {
    esp::random::host(name, a)
}

/// Kahn programs (no alt, one reader and one writer per channel) end in the
/// same state with the same output whatever the schedule: entering random
/// fast paths must not change either.
#[test]
fn random_kahn_programs_with_random_specs_agree() {
    let opts = esp::random::GenOptions::default();
    let (mut checked, mut entered, mut graphs) = (0, 0, 0);
    for seed in 0..300u64 {
        let src = esp::random::program(seed, &opts);
        let p = esp::compile(&src).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        let spec_src = esp::random::spec(&p, seed);
        let spec = match esp::spec::parse(&spec_src, &p) {
            Ok(s) => s,
            Err(e) => panic!("seed {seed}: {e}\n{spec_src}"),
        };
        let mut gs = Vec::new();
        let mut starts = Vec::new();
        for f in &spec.fastpaths {
            match explore::fast_path(&p, f, &ExploreOptions::default()) {
                Ok(g) => {
                    starts.push(f.procs.iter().map(|ps| ps.start.stmt.pc).collect());
                    gs.push(g);
                }
                Err(esp::Error::StateLimit { .. }) => {}
                Err(e) => panic!("seed {seed}: {e}\n{src}\n{spec_src}"),
            }
        }
        graphs += gs.len();
        let mut host = Host::new(&p, random_host);
        for (c, flat) in esp::random::inputs(&p, seed, 6) {
            let k = p.channels[c as usize].arity as usize;
            for m in flat.chunks(k.max(1)) {
                host.queues[c as usize].push_back(if k == 0 { vec![] } else { m.to_vec() });
            }
        }
        let mut plain = Sim::new(&p, host.clone());
        let mut fast = Sim::new(&p, host).with_paths(gs, starts);
        let a = plain.run();
        let b = fast.run();
        let ctx = || format!("seed {seed}\n{src}\n{spec_src}");
        assert_eq!(a, b, "{}", ctx());
        assert_eq!(plain.host.out, fast.host.out, "{}", ctx());
        if a == Stop::Idle {
            assert_eq!(plain.pcs, fast.pcs, "{}", ctx());
            assert_eq!(plain.vars, fast.vars, "{}", ctx());
        }
        checked += 1;
        entered += fast.entries;
    }
    assert_eq!(checked, 300);
    assert!(graphs >= 300, "{graphs} graphs");
    assert!(entered >= 300, "fast paths entered {entered} times");
}

/// Programs with `alt` are nondeterministic: the trace of a run that enters
/// random fast paths must be one the program can produce (the model
/// checker's `accepts`), and so must the plain interpretation's.
#[test]
fn random_alt_programs_with_random_specs_give_legal_traces() {
    let opts = esp::random::GenOptions {
        kind: esp::random::Kind::Alt,
        ..Default::default()
    };
    let mut check = esp::mc::CheckOptions::default();
    for (name, _) in esp::random::EXTERNS {
        let n = name.to_string();
        check.externs.insert(
            n.clone(),
            esp::mc::ExternModel::Function(std::sync::Arc::new(move |a: &[i64]| {
                esp::random::host(&n, a)
            })),
        );
    }
    let (mut judged, mut entered) = (0, 0);
    for seed in 0..120u64 {
        let src = esp::random::program(seed, &opts);
        let p = esp::compile(&src).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        let spec_src = esp::random::spec(&p, seed);
        let spec = esp::spec::parse(&spec_src, &p)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{spec_src}"));
        let mut gs = Vec::new();
        let mut starts = Vec::new();
        for f in &spec.fastpaths {
            match explore::fast_path(&p, f, &ExploreOptions::default()) {
                Ok(g) => {
                    starts.push(f.procs.iter().map(|ps| ps.start.stmt.pc).collect());
                    gs.push(g);
                }
                Err(esp::Error::StateLimit { .. }) => {}
                Err(e) => panic!("seed {seed}: {e}\n{src}\n{spec_src}"),
            }
        }
        let inputs = esp::random::inputs(&p, seed, 3);
        let mut host = Host::new(&p, random_host);
        for (c, flat) in &inputs {
            let k = p.channels[*c as usize].arity as usize;
            for m in flat.chunks(k.max(1)) {
                host.queues[*c as usize].push_back(m.to_vec());
            }
        }
        let mut plain = Sim::new(&p, host.clone());
        let mut fast = Sim::new(&p, host).with_paths(gs, starts);
        if plain.run() != Stop::Idle || fast.run() != Stop::Idle {
            continue;
        }
        let ctx = || format!("seed {seed}\n{src}\n{spec_src}");
        match esp::mc::accepts(&p, &inputs, &fast.host.trace, &check) {
            Ok(ok) => assert!(ok, "fast trace rejected: {:?}\n{}", fast.host.trace, ctx()),
            Err(esp::Error::StateLimit { .. }) => continue,
            Err(e) => panic!("{e}\n{}", ctx()),
        }
        assert!(
            esp::mc::accepts(&p, &inputs, &plain.host.trace, &check).unwrap(),
            "plain trace rejected\n{}",
            ctx()
        );
        judged += 1;
        entered += fast.entries;
    }
    assert!(judged >= 60, "only {judged} programs judged");
    assert!(entered >= 60, "fast paths entered {entered} times");
}

// ---------------------------------------------------------------------------
// The filter programs of Table 1 with their fast paths.

/// Each filter program with its specification gives the output of the
/// plain interpretation (and of the plain Rust reference chain), stream
/// after stream.
#[test]
fn filter_programs_with_fast_paths_agree() {
    let programs = [
        (
            include_str!("../programs/program1.esp"),
            include_str!("../programs/program1.fp"),
        ),
        (
            include_str!("../programs/program2.esp"),
            include_str!("../programs/program2.fp"),
        ),
        (
            include_str!("../programs/program3.esp"),
            include_str!("../programs/program3.fp"),
        ),
        (
            include_str!("../programs/program4.esp"),
            include_str!("../programs/program4.fp"),
        ),
    ];
    for (k, (src, spec_src)) in programs.iter().enumerate() {
        let p = esp::compile(src).unwrap();
        let spec = esp::spec::parse(spec_src, &p).unwrap();
        let f = &spec.fastpaths[0];
        let g = explore::fast_path(&p, f, &ExploreOptions::default()).unwrap();
        let start: Vec<Pc> = f.procs.iter().map(|ps| ps.start.stmt.pc).collect();
        let mut host = Host::new(&p, no_host);
        let streams: [&[i64]; 3] = [
            &[1, 2, 2, 2, 0x7E, 0x7D, 5, 5, 5, 5, 9],
            &[],
            &[0x7E, 0x7E, 0x7E, 3, 3, 4, 0, 0, 0, 0, 0, 255, 255],
        ];
        for s in streams {
            host.push(&p, "arrayIn", &[s.len() as i64]);
            for &b in s {
                host.push(&p, "arrayIn", &[b]);
            }
        }
        let mut plain = Sim::new(&p, host.clone());
        let mut fast = Sim::new(&p, host).with_paths(vec![g], vec![start]);
        assert_eq!(plain.run(), Stop::Idle);
        assert_eq!(fast.run(), Stop::Idle);
        assert_eq!(plain.host.out, fast.host.out, "program {}", k + 1);
        assert_eq!(plain.pcs, fast.pcs, "program {}", k + 1);
        assert_eq!(plain.vars, fast.vars, "program {}", k + 1);
        assert!(fast.entries >= 1, "program {}: never entered", k + 1);
        // The plain interpretation computes the filter chain.
        let ends = &plain.host.out[p.channel("arrayEnd").unwrap() as usize];
        assert_eq!(ends.len(), 3, "program {}", k + 1);
        let bytes: Vec<u8> = plain.host.out[p.channel("arrayOut").unwrap() as usize]
            .iter()
            .map(|m| m[0] as u8)
            .collect();
        let mut at = 0;
        for (s, end) in streams.iter().zip(ends) {
            let input: Vec<u8> = s.iter().map(|&b| b as u8).collect();
            let want = esp::filters::reference(k, &input);
            let n = end[0] as usize;
            assert_eq!(
                &bytes[at..at + n],
                &want[..],
                "program {} stream {:?}",
                k + 1,
                s
            );
            at += n;
        }
    }
}

/// The automata of the four filter programs, scheduled downstream first,
/// compute the reference chains stream after stream, suspending whenever
/// the input is exhausted.
#[test]
fn filter_program_automata() {
    let programs = [
        include_str!("../programs/program1.esp"),
        include_str!("../programs/program2.esp"),
        include_str!("../programs/program3.esp"),
        include_str!("../programs/program4.esp"),
    ];
    let options = ExploreOptions {
        automaton_schedule: Schedule::DownstreamFirst,
        ..ExploreOptions::default()
    };
    for (k, src) in programs.iter().enumerate() {
        let p = esp::compile(src).unwrap();
        let g = esp::automata::automaton(&p, &options)
            .unwrap_or_else(|e| panic!("program {}: {e}", k + 1));
        let mut h = Host::new(&p, no_host);
        let mut vars = vec![0; Layout::of(&p).slots as usize];
        let mut pcs = vec![0; p.processes.len()];
        let mut entry = 0;
        let out = p.channel("arrayOut").unwrap() as usize;
        let end = p.channel("arrayEnd").unwrap() as usize;
        let streams: [&[u8]; 4] = [
            &[1, 2, 2, 2, 0x7E, 0x7D, 5, 5, 5, 5, 9],
            &[],
            &[0x7E; 300],
            &[3, 0, 0, 4, 255, 255, 0x7D, 1],
        ];
        for s in streams {
            h.out[out].clear();
            h.out[end].clear();
            h.push(&p, "arrayIn", &[s.len() as i64]);
            for &b in s {
                h.push(&p, "arrayIn", &[b as i64]);
            }
            let leave = fp::run(&g, entry, &mut vars, &mut pcs, &mut h).unwrap();
            let Leave::Suspend { resume } = leave else {
                panic!("program {}: {leave:?}", k + 1);
            };
            entry = resume;
            let bytes: Vec<u8> = h.out[out].iter().map(|m| m[0] as u8).collect();
            assert_eq!(
                bytes,
                esp::filters::reference(k, s),
                "program {} stream {s:?}",
                k + 1
            );
            assert_eq!(
                h.out[end],
                vec![vec![bytes.len() as i64]],
                "program {}",
                k + 1
            );
        }
    }
}

/// An `alt` on the path: the specification narrows its arms; with no arm
/// ready the process blocks on the viable ones, and a partner arriving later
/// completes one. More than one viable arm, or fewer viable arms than arms
/// (a narrowing that ignores a partner the process-based `alt` would serve),
/// marks the path for the runtime's refusals.
#[test]
fn alt_on_the_path() {
    let src = "
channel a(int);
channel b(int);
channel o(int) external out;
process M { var x; while (true) { alt { in(a, x) { out(o, x); } in(b, x) { out(o, 0 - x); } } } }
process A { var i; while (true) { i = i + 1; out(a, i); } }
process B { var j; while (true) { j = j + 1; out(b, j); } }
";
    let run = |g: &Graph, p: &Program| {
        let mut g = g.clone();
        g.counters = vec![3; g.counters.len()];
        let mut h = Host::new(p, no_host);
        let mut vars = vec![0; Layout::of(p).slots as usize];
        let mut pcs = vec![u32::MAX; 3];
        let leave = fp::run(&g, 0, &mut vars, &mut pcs, &mut h).unwrap();
        (
            leave,
            h.out[2].iter().map(|m| m[0]).collect::<Vec<i64>>(),
            pcs,
        )
    };
    // Only `a` can continue M's path, and B is not on it: b is never used,
    // a narrowing, so the path is marked for refusals.
    let (p, g) = extract(
        src,
        "fastpath f { process M { statement a, b; start a; follows a*; } process A { start a; follows a*; } }",
    );
    assert_eq!(
        g.kind,
        Kind::FastPath {
            nondeterministic: true
        }
    );
    let (leave, out, pcs) = run(&g, &p);
    assert_eq!(leave, Leave::Abort);
    // A starts at its `out`, with i still 0.
    assert_eq!(out[..3], [0, 1, 2]);
    assert_eq!(pcs[2], u32::MAX);
    // Both arms viable, both writers on the path: M takes whichever writer
    // comes first, A then B (the ready list's order).
    let (p, g) = extract(
        src,
        "fastpath f { process M { statement a, b; start a; follows (a | b)*; } \
         process A { start a; follows a*; } process B { start b; follows b*; } }",
    );
    assert_eq!(
        g.kind,
        Kind::FastPath {
            nondeterministic: true
        }
    );
    let (leave, out, _) = run(&g, &p);
    assert_eq!(leave, Leave::Abort);
    assert_eq!(out[..4], [0, 0, 1, -1]);
    // A start element that the alt's arm cannot match: abort at the alt.
    let (p, g) = extract(
        src,
        "fastpath f { process M { statement a, b; start b; } process A { start a; follows a*; } process B { start b; } }",
    );
    let (leave, out, pcs) = run(&g, &p);
    assert_eq!(leave, Leave::Abort);
    // M waited on b alone; A blocked with no reader; B's `out` completed it.
    assert_eq!(out, [0]);
    let m = &p.processes[0];
    assert!(matches!(
        m.nodes[pcs[0] as usize].kind,
        NodeKind::Alt { .. }
    ));
}

/// A specification may choose a different legal interleaving, never a
/// behaviour the program does not have. Here the process-based code lets
/// the reader `Sink` continue after the rendezvous, so its assertion stops
/// the run before `Src` sends `3` on `o`; with `schedule downstream` and
/// `Src` listed last, the path runs `Src` first, and `3` comes out before
/// the same assertion stops the run. Both are interleavings of the program;
/// with inputs that never fail the assertion, both send the same messages.
#[test]
fn a_specification_may_choose_another_legal_interleaving() {
    use esp::runtime::{Backend, Machine, Options};
    let src = "channel i(int) external in; channel c(int); channel o(int) external out;
process Src { var x; while (true) { in(i, x); out(c, x); out(o, x); } }
process Sink { var z; while (true) { in(c, z); assert(z < 3); } }";
    let spec_text = "fastpath f { schedule downstream; process Sink { statement c; start c; follows c*; } process Src { statement i, c, o; start i; follows (c o i)*; } }";
    let run = |backend: Backend, with_spec: bool, inputs: &[i64]| {
        let program = esp::compile(src).unwrap();
        let spec = with_spec.then(|| esp::spec::parse(spec_text, &program).unwrap());
        let mut m = Machine::new(
            program,
            Options {
                backend,
                spec,
                ..Options::default()
            },
        )
        .unwrap();
        for &v in inputs {
            m.push("i", &[v]).unwrap();
        }
        let r = m.run();
        let failed =
            matches!(r, Err(esp::Error::AssertionFailed { ref process, .. }) if process == "Sink");
        (failed, m.take_output("o").unwrap(), m.stats().entries)
    };
    for backend in [Backend::Interp, Backend::Native] {
        let (failed, plain, _) = run(backend, false, &[1, 2, 3, 4]);
        assert!(failed);
        assert_eq!(plain, [1, 2]);
        let (failed, fast, entries) = run(backend, true, &[1, 2, 3, 4]);
        assert!(failed && entries > 0);
        assert_eq!(fast, [1, 2, 3]);
        // Where the interleaving does not show, the outputs agree.
        let (failed, plain, _) = run(backend, false, &[1, 2, 0, 1]);
        let (failed2, fast, _) = run(backend, true, &[1, 2, 0, 1]);
        assert!(!failed && !failed2);
        assert_eq!(plain, fast);
    }
}
