//! A model checker for ESP programs (`fastpath esp check`), beyond the
//! paper: ESP's own tool chain translated programs to SPIN; this module
//! explores a program's state space directly.
//!
//! It re-implements the language's semantics from [`crate::ir`] alone,
//! independently of the runtime ([`crate::runtime`], [`crate::interp`]), so
//! that it is a second oracle: it shares nothing with them but
//! [`Expr::eval`].
//!
//! ## The model
//!
//! A *state* is every process's program counter and variables, and, for
//! each `external in` channel, how many messages the environment has sent
//! on it. In a state every process is *at a channel operation* (a `Comm` or
//! an `Alt` node) or halted: local code (assignments, branches, asserts,
//! host calls) runs as part of the transition that reaches it.
//!
//! A *transition* is one communication, then the local code of the
//! processes it moved, each up to its next channel operation:
//! - a rendezvous on an internal channel between a process offering `out`
//!   and another offering `in` (in a `Comm` node or an `alt` arm; every
//!   pair of a ready writer and a ready reader is a separate transition,
//!   so `alt` is an arbitrary choice: fairness is not modelled, which only
//!   adds behaviours);
//! - an input on an `external in` channel: the environment sends any tuple
//!   of the channel's domain ([`CheckOptions::domain`], or its entry in
//!   [`CheckOptions::domains`]), at most [`CheckOptions::max_inputs`]
//!   messages per channel;
//! - an output on an `external out` channel: the environment always takes it.
//!
//! Host functions return any value of the domain unless
//! [`CheckOptions::externs`] models them otherwise; every combination of
//! returned values is a separate transition. The initial states are the
//! program's start with each process run to its first channel operation.
//!
//! ## What it reports
//!
//! Exploration is breadth-first, so the first violation found has a
//! shortest trace (counted in transitions). Violations:
//! - an `assert` that fails, a `/` or `%` by zero ([`Violation`]);
//! - a process that runs more than [`CheckOptions::max_local_steps`] nodes
//!   without reaching a channel operation (a loop that never yields);
//! - a *deadlock*: a state with no transition in which some process is stuck
//!   forever. A process that is not halted is *stuck* unless it *can move*:
//!   a process blocked on an `external in` can move (the environment may
//!   always send more, beyond the bound), and a process blocked on an
//!   internal channel can move if some other process that can move has an
//!   operation on that channel in the other direction anywhere in its body
//!   (the least fixed point of this rule). So a filter chain that has
//!   consumed all its input and waits for more is not deadlocked; two
//!   processes waiting for each other are, whatever the rest does.
//!
//! [`Report::exhaustive`] says whether every state within the bounds (the
//! domains and `max_inputs`) was explored: no bound
//! ([`CheckOptions::max_states`], [`CheckOptions::max_memory`]) was hit and
//! no violation stopped the search. The search stops at the first violation,
//! so a report with one is never exhaustive: states it did not reach may
//! hold others.
//!
//! ## Judging observed traces
//!
//! [`accepts`] decides whether a trace observed on a backend (each external
//! input consumed, output produced and host call made, in order) is one the
//! program can produce from the given input queues, ending idle. The random
//! program tests use it to judge backends on programs with `alt`, where
//! different (fair) schedules give different traces.

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ir::{
    ChanId, ChanKind, Comm, Expr, ExternId, NodeKind, Operand, Pc, Pos, ProcId, Program,
};

/// A host function given as a deterministic function of its arguments.
pub type HostFn = Arc<dyn Fn(&[i64]) -> i64 + Send + Sync>;

/// How a host function is modelled.
#[derive(Clone)]
pub enum ExternModel {
    /// Returns any value of [`CheckOptions::domain`].
    Any,
    /// Returns any of these values.
    Values(Vec<i64>),
    /// A deterministic function of the arguments.
    Function(HostFn),
}

impl fmt::Debug for ExternModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExternModel::Any => write!(f, "Any"),
            ExternModel::Values(v) => write!(f, "Values({v:?})"),
            ExternModel::Function(_) => write!(f, "Function(..)"),
        }
    }
}

/// The bounds and the environment of a check.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// The values the environment may send in any field of an
    /// `external in` channel (and that unmodelled host functions return).
    pub domain: Vec<i64>,
    /// Per-channel overrides of `domain`, by channel name.
    pub domains: HashMap<String, Vec<i64>>,
    /// How many messages the environment sends on each `external in`
    /// channel at most.
    pub max_inputs: u32,
    /// How many states to explore at most; beyond it the report is not
    /// exhaustive.
    pub max_states: usize,
    /// How many nodes a process may execute between two channel operations
    /// before it counts as a loop that never yields.
    pub max_local_steps: u64,
    /// The memory the visited states may take, in bytes, as estimated by
    /// [`state_bytes`]; beyond it the report is not exhaustive and says how
    /// deep the exploration was complete.
    pub max_memory: usize,
    /// Host functions by name; any other returns any `domain` value.
    pub externs: HashMap<String, ExternModel>,
    /// Called every [`PROGRESS_EVERY`] states explored, for a caller that
    /// shows progress.
    pub progress: Option<ProgressFn>,
}

/// How often [`CheckOptions::progress`] is called, in states explored.
pub const PROGRESS_EVERY: usize = 4096;

/// Where a running check is, for [`CheckOptions::progress`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// States visited so far.
    pub states: usize,
    /// States whose transitions have been explored.
    pub explored: usize,
    /// Transitions taken.
    pub transitions: usize,
    /// The estimated memory of the visited states, in bytes.
    pub bytes: usize,
}

/// A progress callback.
#[derive(Clone)]
pub struct ProgressFn(pub Arc<dyn Fn(Progress) + Send + Sync>);

impl fmt::Debug for ProgressFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProgressFn(..)")
    }
}

/// The estimated memory one visited state takes, in bytes, for a program
/// whose state vector has `len` entries: the vector itself, its shared
/// allocation's header, its hash-table entry and its slot in the
/// breadth-first queue, with the tables' growth slack.
pub fn state_bytes(len: usize) -> usize {
    8 * len + 112
}

/// Which bound stopped the exploration short.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Bound {
    /// [`CheckOptions::max_states`].
    States(usize),
    /// [`CheckOptions::max_memory`], in bytes.
    Memory(usize),
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            domain: vec![0, 1, 2],
            domains: HashMap::new(),
            max_inputs: 3,
            max_states: 1_000_000,
            max_local_steps: 1_000_000,
            max_memory: 1 << 30,
            externs: HashMap::new(),
            progress: None,
        }
    }
}

/// What the checker found.
#[derive(Clone, Debug, PartialEq)]
pub enum Violation {
    /// No transition is possible and these processes are stuck forever
    /// (see the module documentation).
    Deadlock {
        /// Each stuck process and where it waits.
        stuck: Vec<Blocked>,
    },
    /// An `assert` failed.
    AssertionFailed {
        /// The process.
        process: String,
        /// The `assert`.
        pos: Pos,
    },
    /// A `/` or `%` by zero.
    DivisionByZero {
        /// The process.
        process: String,
        /// The statement.
        pos: Pos,
    },
    /// A process executed more than `max_local_steps` nodes without a
    /// channel operation.
    Diverges {
        /// The process.
        process: String,
        /// The node it was at when the bound was hit.
        pos: Pos,
        /// The bound, [`CheckOptions::max_local_steps`].
        limit: u64,
    },
}

/// A process waiting at a channel operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocked {
    /// The process.
    pub proc: ProcId,
    /// Its name.
    pub process: String,
    /// Its program counter.
    pub pc: Pc,
    /// The position of the operation (`alt` or `in`/`out`).
    pub pos: Pos,
    /// The channels it waits on, e.g. `in(a) | out(b)`.
    pub waits: String,
}

/// One host call made during a transition.
#[derive(Clone, Debug, PartialEq)]
pub struct HostCall {
    /// The calling process.
    pub process: String,
    /// The function.
    pub name: String,
    /// Its arguments.
    pub args: Vec<i64>,
    /// What it returned.
    pub result: i64,
}

/// One transition of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The communication.
    pub kind: StepKind,
    /// The host calls made by the local code that followed it, in order.
    pub calls: Vec<HostCall>,
}

/// The communication of a [`Step`].
#[derive(Clone, Debug, PartialEq)]
pub enum StepKind {
    /// The program starts: every process runs to its first channel
    /// operation.
    Start,
    /// A rendezvous on an internal channel.
    Rendezvous {
        /// The channel.
        chan: String,
        /// The writing process.
        writer: String,
        /// The position of its `out`.
        writer_pos: Pos,
        /// The reading process.
        reader: String,
        /// The position of its `in`.
        reader_pos: Pos,
        /// The message.
        values: Vec<i64>,
    },
    /// The environment sends a message on an `external in` channel.
    Input {
        /// The channel.
        chan: String,
        /// The receiving process.
        process: String,
        /// The position of its `in`.
        pos: Pos,
        /// The message.
        values: Vec<i64>,
    },
    /// A process sends a message on an `external out` channel.
    Output {
        /// The channel.
        chan: String,
        /// The sending process.
        process: String,
        /// The position of its `out`.
        pos: Pos,
        /// The message.
        values: Vec<i64>,
    },
}

/// The result of [`check`].
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The first violation found, if any.
    pub violation: Option<Violation>,
    /// A shortest trace to it (empty when there is none); the first step is
    /// [`StepKind::Start`].
    pub trace: Vec<Step>,
    /// How many distinct states were visited.
    pub states: usize,
    /// How many transitions were taken.
    pub transitions: usize,
    /// True when every state within the bounds was explored: no bound was
    /// hit and no violation stopped the search (it stops at the first).
    pub exhaustive: bool,
    /// The bound that cut the search short, if one did (before the
    /// violation, when there is one).
    pub stopped: Option<Bound>,
    /// When not exhaustive: every state reachable in at most this many
    /// transitions from the start was explored.
    pub complete_depth: u32,
}

impl Report {
    /// True when no violation was found and the search was exhaustive.
    pub fn is_ok(&self) -> bool {
        self.violation.is_none() && self.exhaustive
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Deadlock { stuck } => {
                write!(f, "deadlock:")?;
                for (i, b) in stuck.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    write!(
                        f,
                        "{sep}process {} waits forever at {} on {}",
                        b.process, b.pos, b.waits
                    )?;
                }
                Ok(())
            }
            Violation::AssertionFailed { process, pos } => {
                write!(f, "{pos}: assertion failed in process {process}")
            }
            Violation::DivisionByZero { process, pos } => {
                write!(f, "{pos}: division by zero in process {process}")
            }
            Violation::Diverges {
                process,
                pos,
                limit,
            } => {
                write!(
                    f,
                    "{pos}: process {process} ran more than {limit} steps without a channel operation: a loop that never yields, or a finite one longer than the step limit (raise it with --max-local-steps)"
                )
            }
        }
    }
}

fn tuple(values: &[i64]) -> String {
    let v: Vec<String> = values.iter().map(i64::to_string).collect();
    format!("({})", v.join(", "))
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            StepKind::Start => write!(
                f,
                "start: every process runs to its first channel operation"
            )?,
            StepKind::Rendezvous {
                chan,
                writer,
                writer_pos,
                reader,
                reader_pos,
                values,
            } => write!(
                f,
                "{writer} ({writer_pos}) sends {} on {chan} to {reader} ({reader_pos})",
                tuple(values)
            )?,
            StepKind::Input {
                chan,
                process,
                pos,
                values,
            } => write!(
                f,
                "the environment sends {} on {chan} to {process} ({pos})",
                tuple(values)
            )?,
            StepKind::Output {
                chan,
                process,
                pos,
                values,
            } => write!(
                f,
                "{process} ({pos}) sends {} on {chan} to the environment",
                tuple(values)
            )?,
        }
        for c in &self.calls {
            write!(
                f,
                "; {} calls {}{} = {}",
                c.process,
                c.name,
                tuple(&c.args),
                c.result
            )?;
        }
        Ok(())
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.violation {
            None => writeln!(
                f,
                "no deadlock, assertion failure or division by zero found"
            )?,
            Some(v) => {
                writeln!(f, "{v}")?;
                writeln!(f, "trace ({} steps):", self.trace.len())?;
                for (i, s) in self.trace.iter().enumerate() {
                    writeln!(f, "  {:>3}. {s}", i + 1)?;
                }
            }
        }
        write!(
            f,
            "{} states, {} transitions, ",
            self.states, self.transitions
        )?;
        match (self.exhaustive, self.stopped, &self.violation) {
            (true, _, _) => write!(f, "exhaustive within the bounds"),
            (false, None, Some(_)) => {
                write!(
                    f,
                    "NOT exhaustive: stopped at the first violation after {} states",
                    self.states
                )?;
                if self.complete_depth > 0 {
                    write!(
                        f,
                        "; every state within {} transitions of the start was explored",
                        self.complete_depth
                    )?;
                }
                Ok(())
            }
            (false, bound, _) => {
                let why = match bound {
                    Some(Bound::Memory(b)) => format!(
                        "the memory budget of {} MiB was reached (raise it with --max-memory)",
                        b >> 20
                    ),
                    _ => "the state bound was hit (raise it with --max-states)".to_string(),
                };
                write!(
                    f,
                    "NOT exhaustive: {why}; every state within {} transitions of the start was explored",
                    self.complete_depth
                )
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Validation: the checker is an oracle, so it trusts nothing it is given.

fn check_expr(e: &Expr, nvars: usize, program: &Program, pos: Pos, what: &str) -> Result<()> {
    let mut bad = None;
    e.for_each_var(&mut |v| {
        if v as usize >= nvars {
            bad = Some(v);
        }
    });
    if let Some(v) = bad {
        return Err(Error::Check {
            pos,
            msg: format!("{what}: variable {v} out of range"),
        });
    }
    fn calls(e: &Expr, program: &Program, pos: Pos, what: &str) -> Result<()> {
        match e {
            Expr::Const(_) | Expr::Var(_) => Ok(()),
            Expr::Unary(_, a) => calls(a, program, pos, what),
            Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                calls(a, program, pos, what)?;
                calls(b, program, pos, what)
            }
            Expr::Call(g, args) => {
                let Some(x) = program.externs.get(*g as usize) else {
                    return Err(Error::Check {
                        pos,
                        msg: format!("{what}: host function {g} out of range"),
                    });
                };
                if x.arity as usize != args.len() {
                    return Err(Error::Check {
                        pos,
                        msg: format!(
                            "{what}: {} takes {} arguments, given {}",
                            x.name,
                            x.arity,
                            args.len()
                        ),
                    });
                }
                args.iter().try_for_each(|a| calls(a, program, pos, what))
            }
        }
    }
    calls(e, program, pos, what)
}

fn validate(program: &Program) -> Result<()> {
    for p in &program.processes {
        let what = format!("process {}", p.name);
        let n = p.nodes.len();
        let nvars = p.vars.len();
        let pc_ok = |pc: Pc, pos: Pos| {
            if (pc as usize) < n {
                Ok(())
            } else {
                Err(Error::Check {
                    pos,
                    msg: format!("{what}: jump to node {pc} out of range"),
                })
            }
        };
        pc_ok(p.entry, p.pos)?;
        let comm_ok = |op: &Comm, pos: Pos| -> Result<()> {
            let Some(c) = program.channels.get(op.chan() as usize) else {
                return Err(Error::Check {
                    pos,
                    msg: format!("{what}: channel {} out of range", op.chan()),
                });
            };
            let (count, wrong_dir) = match op {
                Comm::In { vars, .. } => {
                    if let Some(v) = vars.iter().find(|v| **v as usize >= nvars) {
                        return Err(Error::Check {
                            pos,
                            msg: format!("{what}: variable {v} out of range"),
                        });
                    }
                    (vars.len(), c.kind == ChanKind::ExternalOut)
                }
                Comm::Out { args, .. } => {
                    for a in args {
                        if let Operand::Var(v) = a
                            && *v as usize >= nvars
                        {
                            return Err(Error::Check {
                                pos,
                                msg: format!("{what}: variable {v} out of range"),
                            });
                        }
                    }
                    (args.len(), c.kind == ChanKind::ExternalIn)
                }
            };
            if count != c.arity as usize {
                return Err(Error::Check {
                    pos,
                    msg: format!(
                        "{what}: channel {} carries {} fields, given {count}",
                        c.name, c.arity
                    ),
                });
            }
            if wrong_dir {
                return Err(Error::Check {
                    pos,
                    msg: format!("{what}: channel {} used the wrong way", c.name),
                });
            }
            Ok(())
        };
        for node in &p.nodes {
            let pos = node.pos;
            match &node.kind {
                NodeKind::Assign { var, value, next } => {
                    if *var as usize >= nvars {
                        return Err(Error::Check {
                            pos,
                            msg: format!("{what}: variable {var} out of range"),
                        });
                    }
                    check_expr(value, nvars, program, pos, &what)?;
                    pc_ok(*next, pos)?;
                }
                NodeKind::Eval { value, next } => {
                    check_expr(value, nvars, program, pos, &what)?;
                    pc_ok(*next, pos)?;
                }
                NodeKind::Branch { cond, then, els } => {
                    check_expr(cond, nvars, program, pos, &what)?;
                    pc_ok(*then, pos)?;
                    pc_ok(*els, pos)?;
                }
                NodeKind::Nop { next } => pc_ok(*next, pos)?,
                NodeKind::Assert { cond, next } => {
                    check_expr(cond, nvars, program, pos, &what)?;
                    pc_ok(*next, pos)?;
                }
                NodeKind::Comm { op, next } => {
                    comm_ok(op, pos)?;
                    pc_ok(*next, pos)?;
                }
                NodeKind::Alt { arms } => {
                    if arms.is_empty() {
                        return Err(Error::Check {
                            pos,
                            msg: format!("{what}: an alt without arms"),
                        });
                    }
                    for a in arms {
                        comm_ok(&a.op, a.pos)?;
                        pc_ok(a.next, a.pos)?;
                    }
                }
                NodeKind::Halt => {}
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Choices: enumerating every combination of host-function results.

/// A script of choices for one transition: entry `i` is (chosen, count) for
/// the `i`-th nondeterministic host call. Runs are enumerated like an
/// odometer, so every combination is visited exactly once even when which
/// calls happen depends on earlier results.
#[derive(Default)]
struct Choices {
    script: Vec<(u32, u32)>,
    pos: usize,
}

impl Choices {
    fn next(&mut self, count: u32) -> u32 {
        let i = self.pos;
        self.pos += 1;
        if i < self.script.len() {
            self.script[i].0
        } else {
            self.script.push((0, count));
            0
        }
    }

    /// Prepares the next run; false when every combination was tried.
    fn advance(&mut self) -> bool {
        self.script.truncate(self.pos);
        self.pos = 0;
        while let Some(last) = self.script.last_mut() {
            if last.0 + 1 < last.1 {
                last.0 += 1;
                return true;
            }
            self.script.pop();
        }
        false
    }
}

// ---------------------------------------------------------------------------
// The model.

/// A fault stopping a local run.
enum Fault {
    Assert(Pos),
    Div(Pos),
    Diverges(Pos),
}

#[derive(Clone)]
enum Model {
    Values(Vec<i64>),
    Function(HostFn),
}

/// A possible communication from a state.
#[derive(Clone, Copy, Debug)]
enum Move {
    Rendezvous {
        chan: ChanId,
        w: usize,
        warm: Option<u32>,
        r: usize,
        rarm: Option<u32>,
    },
    Input {
        chan: ChanId,
        p: usize,
        arm: Option<u32>,
        tuple: usize,
    },
    Output {
        chan: ChanId,
        p: usize,
        arm: Option<u32>,
    },
}

struct Machine<'a> {
    program: &'a Program,
    /// The index of process `p`'s first variable in a state vector.
    base: Vec<usize>,
    /// Per channel, the index of its input counter in a state vector
    /// (external-in channels only).
    counter: Vec<Option<usize>>,
    len: usize,
    /// Per channel, the domain of its fields.
    domains: Vec<Vec<i64>>,
    /// Per host function.
    externs: Vec<Model>,
    max_inputs: u32,
    max_local_steps: u64,
    /// Per channel, the processes with an `in` / `out` on it anywhere.
    readers: Vec<Vec<usize>>,
    writers: Vec<Vec<usize>>,
}

type State = Rc<[i64]>;

impl<'a> Machine<'a> {
    fn new(program: &'a Program, options: &CheckOptions) -> Result<Machine<'a>> {
        validate(program)?;
        let np = program.processes.len();
        let mut base = Vec::with_capacity(np);
        let mut len = np;
        for p in &program.processes {
            base.push(len);
            len += p.vars.len();
        }
        let mut counter = Vec::new();
        for c in &program.channels {
            if c.kind == ChanKind::ExternalIn {
                counter.push(Some(len));
                len += 1;
            } else {
                counter.push(None);
            }
        }
        for name in options.domains.keys() {
            if program.channel(name).is_none() {
                return Err(Error::Binding(format!(
                    "model checker: a domain for channel {name}, which the program does not declare"
                )));
            }
        }
        let mut domains = Vec::new();
        for c in &program.channels {
            let d = options
                .domains
                .get(&c.name)
                .unwrap_or(&options.domain)
                .clone();
            if d.is_empty()
                && c.kind == ChanKind::ExternalIn
                && c.arity > 0
                && options.max_inputs > 0
            {
                return Err(Error::Binding(format!(
                    "model checker: the domain of channel {} is empty",
                    c.name
                )));
            }
            if (d.len() as u64)
                .checked_pow(c.arity)
                .is_none_or(|n| n > 1 << 20)
            {
                return Err(Error::Binding(format!(
                    "model checker: channel {} has {}^{} possible messages, too many to enumerate",
                    c.name,
                    d.len(),
                    c.arity
                )));
            }
            domains.push(d);
        }
        for name in options.externs.keys() {
            if program.extern_fn(name).is_none() {
                return Err(Error::Binding(format!(
                    "model checker: a model for host function {name}, which the program does not declare"
                )));
            }
        }
        let mut externs = Vec::new();
        for x in &program.externs {
            let m = match options.externs.get(&x.name) {
                None | Some(ExternModel::Any) => Model::Values(options.domain.clone()),
                Some(ExternModel::Values(v)) => Model::Values(v.clone()),
                Some(ExternModel::Function(f)) => Model::Function(f.clone()),
            };
            if matches!(&m, Model::Values(v) if v.is_empty()) {
                return Err(Error::Binding(format!(
                    "model checker: host function {} may return no value",
                    x.name
                )));
            }
            externs.push(m);
        }
        let mut readers = vec![Vec::new(); program.channels.len()];
        let mut writers = vec![Vec::new(); program.channels.len()];
        for (i, p) in program.processes.iter().enumerate() {
            for node in &p.nodes {
                let ops: Vec<&Comm> = match &node.kind {
                    NodeKind::Comm { op, .. } => vec![op],
                    NodeKind::Alt { arms } => arms.iter().map(|a| &a.op).collect(),
                    _ => continue,
                };
                for op in ops {
                    let list = if op.is_in() {
                        &mut readers
                    } else {
                        &mut writers
                    };
                    let l = &mut list[op.chan() as usize];
                    if !l.contains(&i) {
                        l.push(i);
                    }
                }
            }
        }
        Ok(Machine {
            program,
            base,
            counter,
            len,
            domains,
            externs,
            max_inputs: options.max_inputs,
            max_local_steps: options.max_local_steps,
            readers,
            writers,
        })
    }

    fn pname(&self, p: usize) -> String {
        self.program.processes[p].name.clone()
    }

    /// Runs process `p` from `s[p]` until it is at a channel operation or
    /// halted, recording host calls.
    fn run_local(
        &self,
        s: &mut [i64],
        p: usize,
        choices: &mut Choices,
        calls: &mut Vec<HostCall>,
    ) -> std::result::Result<(), Fault> {
        let proc = &self.program.processes[p];
        let b = self.base[p];
        let nv = proc.vars.len();
        let mut pc = s[p] as usize;
        let mut steps = 0u64;
        let mut fault_call = false;
        loop {
            let node = &proc.nodes[pc];
            steps += 1;
            if steps > self.max_local_steps {
                return Err(Fault::Diverges(node.pos));
            }
            let mut eval = |e: &Expr, vars: &[i64]| -> Option<i64> {
                let mut call = |f: ExternId, args: &[i64]| -> i64 {
                    let result = match &self.externs[f as usize] {
                        Model::Function(g) => g(args),
                        Model::Values(v) => v[choices.next(v.len() as u32) as usize],
                    };
                    calls.push(HostCall {
                        process: proc.name.clone(),
                        name: self.program.externs[f as usize].name.clone(),
                        args: args.to_vec(),
                        result,
                    });
                    result
                };
                e.eval(vars, &mut call)
            };
            let vars = &s[b..b + nv];
            let next = match &node.kind {
                NodeKind::Comm { .. } | NodeKind::Alt { .. } | NodeKind::Halt => {
                    s[p] = pc as i64;
                    return Ok(());
                }
                NodeKind::Assign { var, value, next } => {
                    let v = eval(value, vars).ok_or(Fault::Div(node.pos))?;
                    s[b + *var as usize] = v;
                    *next
                }
                NodeKind::Eval { value, next } => {
                    eval(value, vars).ok_or(Fault::Div(node.pos))?;
                    *next
                }
                NodeKind::Branch { cond, then, els } => {
                    if eval(cond, vars).ok_or(Fault::Div(node.pos))? != 0 {
                        *then
                    } else {
                        *els
                    }
                }
                NodeKind::Nop { next } => *next,
                NodeKind::Assert { cond, next } => {
                    if eval(cond, vars).ok_or(Fault::Div(node.pos))? == 0 {
                        fault_call = true;
                    }
                    *next
                }
            };
            if fault_call {
                return Err(Fault::Assert(node.pos));
            }
            pc = next as usize;
        }
    }

    /// The operations process `p` offers in state `s`: (arm, op, pos, next).
    fn offers<'s>(&'s self, s: &[i64], p: usize) -> Vec<(Option<u32>, &'s Comm, Pos, Pc)> {
        let proc = &self.program.processes[p];
        let node = &proc.nodes[s[p] as usize];
        match &node.kind {
            NodeKind::Comm { op, next } => vec![(None, op, node.pos, *next)],
            NodeKind::Alt { arms } => arms
                .iter()
                .enumerate()
                .map(|(i, a)| (Some(i as u32), &a.op, a.pos, a.next))
                .collect(),
            _ => Vec::new(),
        }
    }

    fn offer(&self, s: &[i64], p: usize, arm: Option<u32>) -> (&Comm, Pos, Pc) {
        let proc = &self.program.processes[p];
        let node = &proc.nodes[s[p] as usize];
        match (&node.kind, arm) {
            (NodeKind::Comm { op, next }, None) => (op, node.pos, *next),
            (NodeKind::Alt { arms }, Some(i)) => {
                let a = &arms[i as usize];
                (&a.op, a.pos, a.next)
            }
            _ => unreachable!("a move names an operation its process offers"),
        }
    }

    /// Every communication possible in `s`. `inputs` limits external input
    /// (`None`: the domain, up to `max_inputs`; `Some`: one queued message
    /// per channel, the next one).
    fn moves(&self, s: &[i64], queues: Option<&[Vec<Vec<i64>>]>) -> Vec<Move> {
        let np = self.program.processes.len();
        let mut out = Vec::new();
        for p in 0..np {
            for (arm, op, _, _) in self.offers(s, p) {
                let chan = op.chan();
                let c = &self.program.channels[chan as usize];
                match (c.kind, op) {
                    (ChanKind::Internal, Comm::Out { .. }) => {
                        for r in 0..np {
                            if r == p {
                                continue;
                            }
                            for (rarm, rop, _, _) in self.offers(s, r) {
                                if rop.is_in() && rop.chan() == chan {
                                    out.push(Move::Rendezvous {
                                        chan,
                                        w: p,
                                        warm: arm,
                                        r,
                                        rarm,
                                    });
                                }
                            }
                        }
                    }
                    (ChanKind::ExternalIn, Comm::In { .. }) => {
                        let k = self.counter[chan as usize].expect("external in has a counter");
                        match queues {
                            None => {
                                if (s[k] as u64) < self.max_inputs as u64 {
                                    let n = self.domains[chan as usize].len().pow(c.arity);
                                    for t in 0..n {
                                        out.push(Move::Input {
                                            chan,
                                            p,
                                            arm,
                                            tuple: t,
                                        });
                                    }
                                }
                            }
                            Some(q) => {
                                if (s[k] as usize) < q[chan as usize].len() {
                                    out.push(Move::Input {
                                        chan,
                                        p,
                                        arm,
                                        tuple: s[k] as usize,
                                    });
                                }
                            }
                        }
                    }
                    (ChanKind::ExternalOut, Comm::Out { .. }) => {
                        out.push(Move::Output { chan, p, arm })
                    }
                    _ => {}
                }
            }
        }
        out
    }

    fn operand(&self, s: &[i64], p: usize, a: &Operand) -> i64 {
        match a {
            Operand::Const(c) => *c,
            Operand::Var(v) => s[self.base[p] + *v as usize],
        }
    }

    /// Applies a move to `s`, then runs the moved processes' local code.
    /// Returns the new state, the step, and a fault if one stopped it.
    fn apply(
        &self,
        s: &[i64],
        m: Move,
        queues: Option<&[Vec<Vec<i64>>]>,
        choices: &mut Choices,
    ) -> (Vec<i64>, Step, Option<(usize, Fault)>) {
        let mut t = s.to_vec();
        let mut calls = Vec::new();
        let chan_name = |c: ChanId| self.program.channels[c as usize].name.clone();
        let (kind, moved): (StepKind, Vec<usize>) = match m {
            Move::Rendezvous {
                chan,
                w,
                warm,
                r,
                rarm,
            } => {
                let (wop, wpos, wnext) = self.offer(s, w, warm);
                let (rop, rpos, rnext) = self.offer(s, r, rarm);
                let values: Vec<i64> = match wop {
                    Comm::Out { args, .. } => args.iter().map(|a| self.operand(s, w, a)).collect(),
                    Comm::In { .. } => unreachable!("the writer offers out"),
                };
                if let Comm::In { vars, .. } = rop {
                    for (v, x) in vars.iter().zip(&values) {
                        t[self.base[r] + *v as usize] = *x;
                    }
                }
                t[w] = wnext as i64;
                t[r] = rnext as i64;
                let kind = StepKind::Rendezvous {
                    chan: chan_name(chan),
                    writer: self.pname(w),
                    writer_pos: wpos,
                    reader: self.pname(r),
                    reader_pos: rpos,
                    values,
                };
                (kind, vec![r, w])
            }
            Move::Input {
                chan,
                p,
                arm,
                tuple,
            } => {
                let (op, pos, next) = self.offer(s, p, arm);
                let values: Vec<i64> = match queues {
                    Some(q) => q[chan as usize][tuple].clone(),
                    None => {
                        let d = &self.domains[chan as usize];
                        let mut x = tuple;
                        let mut v = Vec::new();
                        for _ in 0..self.program.channels[chan as usize].arity {
                            v.push(d[x % d.len()]);
                            x /= d.len();
                        }
                        v
                    }
                };
                if let Comm::In { vars, .. } = op {
                    for (v, x) in vars.iter().zip(&values) {
                        t[self.base[p] + *v as usize] = *x;
                    }
                }
                let k = self.counter[chan as usize].expect("external in has a counter");
                t[k] += 1;
                t[p] = next as i64;
                (
                    StepKind::Input {
                        chan: chan_name(chan),
                        process: self.pname(p),
                        pos,
                        values,
                    },
                    vec![p],
                )
            }
            Move::Output { chan, p, arm } => {
                let (op, pos, next) = self.offer(s, p, arm);
                let values: Vec<i64> = match op {
                    Comm::Out { args, .. } => args.iter().map(|a| self.operand(s, p, a)).collect(),
                    Comm::In { .. } => unreachable!("an output offers out"),
                };
                t[p] = next as i64;
                (
                    StepKind::Output {
                        chan: chan_name(chan),
                        process: self.pname(p),
                        pos,
                        values,
                    },
                    vec![p],
                )
            }
        };
        let mut fault = None;
        for p in moved {
            if let Err(f) = self.run_local(&mut t, p, choices, &mut calls) {
                fault = Some((p, f));
                break;
            }
        }
        (t, Step { kind, calls }, fault)
    }

    /// The program's start: every process at its entry with zeroed
    /// variables, run to its first channel operation.
    fn start(&self, choices: &mut Choices) -> (Vec<i64>, Step, Option<(usize, Fault)>) {
        let mut t = vec![0i64; self.len];
        for (p, proc) in self.program.processes.iter().enumerate() {
            t[p] = proc.entry as i64;
        }
        let mut calls = Vec::new();
        let mut fault = None;
        for p in 0..self.program.processes.len() {
            if let Err(f) = self.run_local(&mut t, p, choices, &mut calls) {
                fault = Some((p, f));
                break;
            }
        }
        (
            t,
            Step {
                kind: StepKind::Start,
                calls,
            },
            fault,
        )
    }

    fn violation(&self, p: usize, f: Fault) -> Violation {
        let process = self.pname(p);
        match f {
            Fault::Assert(pos) => Violation::AssertionFailed { process, pos },
            Fault::Div(pos) => Violation::DivisionByZero { process, pos },
            Fault::Diverges(pos) => Violation::Diverges {
                process,
                pos,
                limit: self.max_local_steps,
            },
        }
    }

    fn halted(&self, s: &[i64], p: usize) -> bool {
        matches!(
            self.program.processes[p].nodes[s[p] as usize].kind,
            NodeKind::Halt
        )
    }

    fn blocked(&self, s: &[i64], p: usize) -> Blocked {
        let proc = &self.program.processes[p];
        let waits: Vec<String> = self
            .offers(s, p)
            .iter()
            .map(|(_, op, _, _)| {
                let dir = if op.is_in() { "in" } else { "out" };
                format!("{dir}({})", self.program.channels[op.chan() as usize].name)
            })
            .collect();
        Blocked {
            proc: p as ProcId,
            process: proc.name.clone(),
            pc: s[p] as Pc,
            pos: proc.nodes[s[p] as usize].pos,
            waits: waits.join(" | "),
        }
    }

    /// In a state without moves: the processes stuck forever.
    fn stuck(&self, s: &[i64]) -> Vec<Blocked> {
        let np = self.program.processes.len();
        let mut live = vec![false; np];
        for (p, l) in live.iter_mut().enumerate() {
            *l = self.offers(s, p).iter().any(|(_, op, _, _)| {
                self.program.channels[op.chan() as usize].kind == ChanKind::ExternalIn
            });
        }
        loop {
            let mut changed = false;
            for p in 0..np {
                if live[p] || self.halted(s, p) {
                    continue;
                }
                let can = self.offers(s, p).iter().any(|(_, op, _, _)| {
                    let partners = if op.is_in() {
                        &self.writers
                    } else {
                        &self.readers
                    };
                    partners[op.chan() as usize]
                        .iter()
                        .any(|&q| q != p && live[q])
                });
                if can {
                    live[p] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        (0..np)
            .filter(|&p| !live[p] && !self.halted(s, p))
            .map(|p| self.blocked(s, p))
            .collect()
    }
}

/// The visited states in breadth-first order, with each one's parent.
struct Visited {
    index: HashMap<State, u32>,
    states: Vec<State>,
    parent: Vec<u32>,
}

const ROOT: u32 = u32::MAX;

impl Visited {
    /// Adds a state; `Err` with the bound when it is new and a bound is
    /// hit.
    fn add(&mut self, t: Vec<i64>, from: u32, o: &CheckOptions) -> std::result::Result<(), Bound> {
        let t: State = t.into();
        if self.index.contains_key(&t) {
            return Ok(());
        }
        if self.states.len() >= o.max_states {
            return Err(Bound::States(o.max_states));
        }
        if (self.states.len() + 1).saturating_mul(state_bytes(t.len())) > o.max_memory {
            return Err(Bound::Memory(o.max_memory));
        }
        self.index.insert(t.clone(), self.states.len() as u32);
        self.states.push(t);
        self.parent.push(from);
        Ok(())
    }

    /// How many transitions state `i` is from the start.
    fn depth(&self, mut i: usize) -> u32 {
        let mut d = 0;
        while self.parent[i] != ROOT {
            i = self.parent[i] as usize;
            d += 1;
        }
        d
    }

    /// The steps from the start to state `i`.
    fn trace(&self, m: &Machine, i: usize) -> Vec<Step> {
        let mut path = vec![i];
        while self.parent[*path.last().expect("nonempty")] != ROOT {
            path.push(self.parent[*path.last().expect("nonempty")] as usize);
        }
        path.reverse();
        let mut steps = Vec::new();
        // The start step that produced the root.
        let mut choices = Choices::default();
        loop {
            let (t, step, _) = m.start(&mut choices);
            if *t == *self.states[path[0]] {
                steps.push(step);
                break;
            }
            if !choices.advance() {
                break;
            }
        }
        for w in path.windows(2) {
            let (a, b) = (&self.states[w[0]], &self.states[w[1]]);
            'found: for mv in m.moves(a, None) {
                let mut choices = Choices::default();
                loop {
                    let (t, step, fault) = m.apply(a, mv, None, &mut choices);
                    if fault.is_none() && *t == **b {
                        steps.push(step);
                        break 'found;
                    }
                    if !choices.advance() {
                        break;
                    }
                }
            }
        }
        steps
    }
}

/// Explores `program`'s states breadth-first within `options`' bounds and
/// reports the first deadlock, assertion failure, division by zero or
/// non-yielding loop, with a shortest trace.
///
/// Errors: a malformed program (`Error::Check`), or options that do not fit
/// it (`Error::Binding`: a domain or model for a name the program does not
/// declare, an empty domain, a channel with too many possible messages).
pub fn check(program: &Program, options: &CheckOptions) -> Result<Report> {
    let m = Machine::new(program, options)?;
    let mut seen = Visited {
        index: HashMap::new(),
        states: Vec::new(),
        parent: Vec::new(),
    };
    let mut transitions = 0usize;
    // The first bound hit, and the depth up to which the search is complete.
    let mut stop: Option<(Bound, u32)> = None;
    // `depth`: for a violation, the depth of the state it was found from
    // (breadth-first, every state that deep was stored before it).
    let report = |seen: &Visited,
                  depth: u32,
                  violation: Option<Violation>,
                  trace: Vec<Step>,
                  transitions: usize,
                  stop: Option<(Bound, u32)>| Report {
        trace,
        states: seen.states.len(),
        transitions,
        exhaustive: stop.is_none() && violation.is_none(),
        stopped: stop.map(|s| s.0),
        complete_depth: match stop {
            Some((_, d)) if violation.is_some() => d.min(depth),
            Some((_, d)) => d,
            None => depth,
        },
        violation,
    };

    let mut choices = Choices::default();
    loop {
        let (t, step, fault) = m.start(&mut choices);
        transitions += 1;
        if let Some((p, f)) = fault {
            return Ok(report(
                &seen,
                0,
                Some(m.violation(p, f)),
                vec![step],
                transitions,
                stop,
            ));
        }
        if let Err(bound) = seen.add(t, ROOT, options) {
            stop.get_or_insert((bound, 0));
        }
        if !choices.advance() {
            break;
        }
    }

    let mut head = 0usize;
    while head < seen.states.len() {
        if head.is_multiple_of(PROGRESS_EVERY)
            && head > 0
            && let Some(progress) = &options.progress
        {
            (progress.0)(Progress {
                states: seen.states.len(),
                explored: head,
                transitions,
                bytes: seen.states.len() * state_bytes(m.len),
            });
        }
        let s = seen.states[head].clone();
        let moves = m.moves(&s, None);
        if moves.is_empty() {
            let stuck = m.stuck(&s);
            if !stuck.is_empty() {
                let trace = seen.trace(&m, head);
                return Ok(report(
                    &seen,
                    seen.depth(head),
                    Some(Violation::Deadlock { stuck }),
                    trace,
                    transitions,
                    stop,
                ));
            }
        }
        for mv in moves {
            let mut choices = Choices::default();
            loop {
                let (t, step, fault) = m.apply(&s, mv, None, &mut choices);
                transitions += 1;
                if let Some((p, f)) = fault {
                    let mut trace = seen.trace(&m, head);
                    trace.push(step);
                    return Ok(report(
                        &seen,
                        seen.depth(head),
                        Some(m.violation(p, f)),
                        trace,
                        transitions,
                        stop,
                    ));
                }
                if let Err(bound) = seen.add(t, head as u32, options)
                    && stop.is_none()
                {
                    // Breadth-first: every state as deep as this one was
                    // stored before it, so they are all explored.
                    stop = Some((bound, seen.depth(head)));
                }
                if !choices.advance() {
                    break;
                }
            }
        }
        head += 1;
    }
    Ok(report(&seen, 0, None, Vec::new(), transitions, stop))
}

/// An event on an external channel, as a backend observed it (the
/// runtime's trace).
pub use crate::runtime::Event;

/// Decides whether `trace` is a trace of `program`: whether some execution,
/// in which each `external in` channel delivers the messages queued for it
/// in `inputs` (flat fields, as [`crate::runtime::Machine::push`] takes
/// them) in order and nothing more, performs exactly these external events
/// in this order and then is idle (no communication can happen). Host
/// functions behave as [`CheckOptions::externs`] models them (unmodelled
/// ones return any value of `domain`); the other bounds do not apply, but
/// at most `max_states` states are explored.
///
/// Any fair schedule the runtime may choose gives an execution of the
/// model, so a backend whose observed trace is rejected is wrong.
///
/// Errors: a malformed program, an input that is not on an `external in`
/// channel or not a whole number of messages (`Error::Binding`), more than
/// `max_states` states (`Error::StateLimit`).
pub fn accepts(
    program: &Program,
    inputs: &[(ChanId, Vec<i64>)],
    trace: &[Event],
    options: &CheckOptions,
) -> Result<bool> {
    let m = Machine::new(program, options)?;
    let mut queues: Vec<Vec<Vec<i64>>> = vec![Vec::new(); program.channels.len()];
    for (chan, fields) in inputs {
        let Some(c) = program.channels.get(*chan as usize) else {
            return Err(Error::Binding(format!(
                "input for channel {chan}, which does not exist"
            )));
        };
        if c.kind != ChanKind::ExternalIn {
            return Err(Error::Binding(format!(
                "input for channel {}, which is not external in",
                c.name
            )));
        }
        if c.arity == 0 {
            return Err(Error::Binding(format!(
                "input for channel {}, which carries no fields",
                c.name
            )));
        }
        if fields.len() % c.arity as usize != 0 {
            return Err(Error::Binding(format!(
                "input for channel {}: {} fields are not a whole number of {}-field messages",
                c.name,
                fields.len(),
                c.arity
            )));
        }
        queues[*chan as usize].extend(fields.chunks(c.arity as usize).map(<[i64]>::to_vec));
    }
    let pos_at = m.len;
    let mut seen: std::collections::HashSet<Rc<[i64]>> = std::collections::HashSet::new();
    let mut stack: Vec<Rc<[i64]>> = Vec::new();
    let push = |mut t: Vec<i64>,
                pos: usize,
                seen: &mut std::collections::HashSet<Rc<[i64]>>,
                stack: &mut Vec<Rc<[i64]>>|
     -> Result<()> {
        t.push(pos as i64);
        let t: Rc<[i64]> = t.into();
        if seen.contains(&t) {
            return Ok(());
        }
        if seen.len() >= options.max_states {
            return Err(Error::StateLimit {
                what: "trace acceptance".to_string(),
                limit: options.max_states,
            });
        }
        seen.insert(t.clone());
        stack.push(t);
        Ok(())
    };
    let mut choices = Choices::default();
    loop {
        let (t, _, fault) = m.start(&mut choices);
        if fault.is_none() {
            push(t, 0, &mut seen, &mut stack)?;
        }
        if !choices.advance() {
            break;
        }
    }
    while let Some(s) = stack.pop() {
        let pos = s[pos_at] as usize;
        let s = &s[..pos_at];
        let moves = m.moves(s, Some(&queues));
        if moves.is_empty() && pos == trace.len() {
            return Ok(true);
        }
        for mv in moves {
            let mut choices = Choices::default();
            loop {
                let (t, step, fault) = m.apply(s, mv, Some(&queues), &mut choices);
                let next = match (&mv, &step.kind) {
                    (Move::Rendezvous { .. }, _) => Some(pos),
                    (Move::Input { chan, .. }, StepKind::Input { values, .. }) => match trace
                        .get(pos)
                    {
                        Some(Event::In { chan: c, fields }) if c == chan && fields == values => {
                            Some(pos + 1)
                        }
                        _ => None,
                    },
                    (Move::Output { chan, .. }, StepKind::Output { values, .. }) => match trace
                        .get(pos)
                    {
                        Some(Event::Out { chan: c, fields }) if c == chan && fields == values => {
                            Some(pos + 1)
                        }
                        _ => None,
                    },
                    _ => None,
                };
                if let (Some(next), None) = (next, fault) {
                    push(t, next, &mut seen, &mut stack)?;
                }
                if !choices.advance() {
                    break;
                }
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_enumerate_every_combination_once_even_when_later_calls_depend_on_earlier_ones() {
        // A run makes a first choice among 3; only when it is 1 does it make
        // a second choice among 2.
        let mut c = Choices::default();
        let mut seen = Vec::new();
        loop {
            let a = c.next(3);
            let b = if a == 1 { Some(c.next(2)) } else { None };
            seen.push((a, b));
            if !c.advance() {
                break;
            }
        }
        assert_eq!(seen, [(0, None), (1, Some(0)), (1, Some(1)), (2, None)]);
    }
}
