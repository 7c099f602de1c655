//! The machine: a loaded program's processes, channels and fast paths, and
//! the scheduler that runs them (the rules are in the runtime's module
//! documentation).

use std::collections::VecDeque;

use super::host::{Endpoint, Host, empty_in, empty_out, rt_call, rt_recv, rt_send};
use super::tables::{AltInfo, Field, NONE, Site, Tables, Tag, validate};
use super::{Backend, CodeSize, Event, Options, Stats, Status};
use crate::abi::Ctx;
use crate::error::{Error, Result};
use crate::explore;
use crate::fp::{self, Graph, Leave};
use crate::fpgen::{self, NativeGraph};
use crate::interp::{self, Fault, LocalLoops};
use crate::ir::{ChanId, ChanKind, ExternId, Layout, NodeKind, Pc, Program};
use crate::native::{self, HostHooks, NativeProgram};
use crate::opt;

/// A process's scheduling state.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum St {
    Ready,
    Running,
    /// Blocked at the `Comm` or `Alt` at its pc (in the channels' waits).
    Blocked,
    /// Blocked at a `Comm` reading an external in channel with no message.
    BlockedExt,
    Halted,
    /// Moved by a fast path that is running.
    InPath,
}

/// A process waiting on a channel at a site.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Waiter {
    proc: u32,
    site: u32,
}

/// What the running process does after a channel operation.
enum Next {
    /// It goes on at its new pc.
    Continue,
    /// It was appended to the ready list; this process runs.
    Switch(usize),
    /// It blocked.
    Block,
}

/// One fast path, ready to enter.
struct FastPath {
    graph: Graph,
    native: Option<NativeGraph>,
    procs: Vec<usize>,
    starts: Vec<Pc>,
    /// The path narrows an `alt` or chooses among partners: refused on
    /// every `refuse_every`-th eligible entry.
    nondeterministic: bool,
    eligible: u64,
    /// It aborted last time: its next eligible entry is refused.
    refuse_next: bool,
    /// It was refused: not entered again until every one of its processes
    /// has run its start statement in the process-based code (moved off it
    /// or been made ready by new input).
    owed: bool,
}

/// The automaton of [`Backend::Automata`].
struct Automaton {
    graph: Graph,
    native: NativeGraph,
    /// The entry the next run begins at.
    entry: u32,
    /// False once it aborted: the process-based code runs from then on.
    active: bool,
}

/// A program loaded on a backend. See the [module docs](super).
pub struct Machine {
    program: Program,
    layout: Layout,
    backend: Backend,
    tables: Tables,
    host: Box<Host>,
    ctx: Box<Ctx>,
    vars: Vec<i64>,
    pcs: Vec<u32>,
    status: Vec<St>,
    ready: VecDeque<u32>,
    /// Per channel: waiting readers, waiting writers (FIFO).
    waits: Vec<[Vec<Waiter>; 2]>,
    alt_start: Vec<u32>,
    /// The pc at which each process is not checked for fast-path entry
    /// (where it left a path), or `NONE`.
    suppress: Vec<u32>,
    stops: Vec<Vec<bool>>,
    /// Each process's local loops (for the interpreter).
    loops: Vec<LocalLoops>,
    /// Per process: the backward jumps on local loops it may still take
    /// before its next channel operation.
    left: Vec<u64>,
    /// [`Options::max_local_iterations`].
    max_local: u64,
    native: Option<NativeProgram>,
    fast: Vec<FastPath>,
    automaton: Option<Automaton>,
    refuse_every: u32,
    stats: Stats,
    /// Scratch for one message.
    msg: Vec<i64>,
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Machine")
            .field("backend", &self.backend)
            .field("pcs", &self.pcs)
            .field("status", &self.status)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Machine {
    /// Loads `program`: builds the scheduler's tables and compiles
    /// everything the backend needs (process code, fast paths, automaton).
    pub fn new(program: Program, options: Options) -> Result<Machine> {
        if let (Backend::Automata, Some(spec)) = (options.backend, &options.spec) {
            return Err(Error::SpecWithAutomata {
                fast_paths: spec.fastpaths.iter().map(|f| f.name.clone()).collect(),
            });
        }
        validate(&program)?;
        // The graphs' local loops abort to the process-based code past the
        // same bound, which then counts them exactly.
        let explore_options = explore::ExploreOptions {
            local_loop_bound: options.max_local_iterations,
            ..options.explore.clone()
        };
        let layout = Layout::of(&program);
        let mut tables = Tables::new(&program, &layout);
        let nchan = program.channels.len();
        let mut host = Box::new(Host {
            failed: 0,
            error: None,
            externs: program.externs.iter().map(|_| None).collect(),
            extern_names: program.externs.iter().map(|e| e.name.clone()).collect(),
            extern_arity: program.externs.iter().map(|e| e.arity as usize).collect(),
            chans: program
                .channels
                .iter()
                .map(|c| Endpoint {
                    name: c.name.clone(),
                    kind: c.kind,
                    arity: c.arity as usize,
                    input: Vec::new(),
                    head: 0,
                    empties: 0,
                    output: Vec::new(),
                    out_len: 0,
                    recv_cb: None,
                    send_cb: None,
                })
                .collect(),
            ins: vec![empty_in(); nchan],
            outs: vec![empty_out(); nchan],
            ports_open: false,
            tracing: false,
            trace: Vec::new(),
        });
        let host_ptr: *mut Host = &mut *host;
        let ctx = Box::new(Ctx {
            vars: std::ptr::null_mut(),
            pcs: std::ptr::null_mut(),
            ins: host.ins.as_mut_ptr(),
            outs: host.outs.as_mut_ptr(),
            host: host_ptr.cast(),
            call: rt_call,
            recv: rt_recv,
            send: rt_send,
        });
        let hooks = HostHooks {
            host: host_ptr.cast(),
            call: rt_call,
            // SAFETY (of the later reads): `failed` is the first field of the
            // boxed `Host`, which lives as long as the machine and its code.
            failed: &host.failed as *const i64,
        };

        // Fast paths.
        let mut stops: Vec<Vec<bool>> = program
            .processes
            .iter()
            .map(|p| vec![false; p.nodes.len()])
            .collect();
        let mut fast = Vec::new();
        if let Some(spec) = &options.spec {
            for fpath in &spec.fastpaths {
                let mut graph = explore::fast_path(&program, fpath, &explore_options)?;
                opt::optimize(&program, &mut graph);
                let native = match options.backend {
                    Backend::Native => Some(fpgen::compile(&graph, &program)?),
                    _ => None,
                };
                let nondeterministic = matches!(
                    graph.kind,
                    fp::Kind::FastPath {
                        nondeterministic: true
                    }
                );
                let mut procs = Vec::new();
                let mut starts = Vec::new();
                for ps in &fpath.procs {
                    let (p, pc) = (ps.proc as usize, ps.start.stmt.pc);
                    let Some(node) = program
                        .processes
                        .get(p)
                        .and_then(|q| q.nodes.get(pc as usize))
                    else {
                        return Err(Error::Spec {
                            pos: ps.pos,
                            msg: "the start statement is not in the program".into(),
                        });
                    };
                    if !matches!(
                        node.kind,
                        NodeKind::Comm { .. } | NodeKind::Alt { .. } | NodeKind::Halt
                    ) {
                        stops[p][pc as usize] = true;
                    }
                    procs.push(p);
                    starts.push(pc);
                }
                let i = fast.len() as u32;
                for (&p, &pc) in procs.iter().zip(&starts) {
                    let at = tables.pc_base[p] + pc as usize;
                    if tables.fp_at[at] == NONE {
                        tables.fp_at[at] = tables.fp_lists.len() as u32;
                        tables.fp_lists.push(Vec::new());
                    }
                    let list = &mut tables.fp_lists[tables.fp_at[at] as usize];
                    if !list.contains(&i) {
                        list.push(i);
                    }
                }
                fast.push(FastPath {
                    graph,
                    native,
                    procs,
                    starts,
                    nondeterministic,
                    eligible: 0,
                    refuse_next: false,
                    owed: false,
                });
            }
        }

        let automaton = if options.backend == Backend::Automata {
            let mut graph = crate::automata::automaton(&program, &explore_options)?;
            opt::optimize(&program, &mut graph);
            let native = fpgen::compile(&graph, &program)?;
            Some(Automaton {
                graph,
                native,
                entry: 0,
                active: true,
            })
        } else {
            None
        };

        let native = match options.backend {
            Backend::Interp => None,
            Backend::Native | Backend::Automata => {
                Some(NativeProgram::compile(&program, &stops, hooks)?)
            }
        };

        let locals = fast
            .iter()
            .map(|f| f.graph.locals)
            .chain(automaton.as_ref().map(|a| a.graph.locals))
            .max()
            .unwrap_or(0);
        let n = program.processes.len();
        let max_arity = tables.max_arity.max(
            program
                .channels
                .iter()
                .map(|c| c.arity as usize)
                .max()
                .unwrap_or(0),
        );
        let mut m = Machine {
            layout: layout.clone(),
            backend: options.backend,
            host,
            ctx,
            vars: vec![0; (layout.slots + locals) as usize],
            pcs: program.processes.iter().map(|p| p.entry).collect(),
            status: vec![St::Ready; n],
            ready: (0..n as u32).collect(),
            waits: (0..nchan).map(|_| [Vec::new(), Vec::new()]).collect(),
            alt_start: vec![0; tables.alts.len()],
            suppress: vec![NONE; n],
            stops,
            loops: program.processes.iter().map(LocalLoops::of).collect(),
            left: vec![options.max_local_iterations; n],
            max_local: options.max_local_iterations,
            native,
            fast,
            automaton,
            refuse_every: options.refuse_every,
            stats: Stats::default(),
            msg: vec![0; max_arity],
            tables,
            program,
        };
        // Wait lists never grow past the sites on their channel.
        let mut per_chan = vec![[0usize; 2]; nchan];
        for s in &m.tables.sites {
            per_chan[s.chan as usize][usize::from(!s.is_in)] += 1;
        }
        for (w, n) in m.waits.iter_mut().zip(per_chan) {
            w[0].reserve(n[0]);
            w[1].reserve(n[1]);
        }
        if m.automaton.is_some() {
            // The automaton owns the processes until it aborts.
            m.ready.clear();
        }
        Ok(m)
    }

    /// The program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Binds host function `name` to `f`.
    pub fn bind_extern(
        &mut self,
        name: &str,
        mut f: impl FnMut(&[i64]) -> i64 + 'static,
    ) -> Result<()> {
        self.bind_extern_fallible(name, move |args| Ok(f(args)))
    }

    /// Binds host function `name` to `f`, which may fail: an `Err` stops the
    /// run with [`Error::Host`] carrying its message.
    pub fn bind_extern_fallible(
        &mut self,
        name: &str,
        f: impl FnMut(&[i64]) -> std::result::Result<i64, String> + 'static,
    ) -> Result<()> {
        let id = self
            .program
            .extern_fn(name)
            .ok_or_else(|| Error::Binding(format!("no host function {name} in the program")))?;
        self.host.externs[id as usize] = Some(Box::new(f));
        Ok(())
    }

    fn ext_chan(&self, name: &str, kind: ChanKind) -> Result<ChanId> {
        let id = self
            .program
            .channel(name)
            .ok_or_else(|| Error::Binding(format!("no channel {name} in the program")))?;
        let have = self.program.channels[id as usize].kind;
        if have != kind {
            let want = match kind {
                ChanKind::ExternalIn => "an external in channel",
                ChanKind::ExternalOut => "an external out channel",
                ChanKind::Internal => "an internal channel",
            };
            return Err(Error::Binding(format!("channel {name} is not {want}")));
        }
        Ok(id)
    }

    /// Binds external in channel `chan` to a callback: the program's reads
    /// call it, and `None` means no message now.
    pub fn bind_in(
        &mut self,
        chan: &str,
        f: impl FnMut() -> Option<Vec<i64>> + 'static,
    ) -> Result<()> {
        let c = self.ext_chan(chan, ChanKind::ExternalIn)?;
        self.host.chans[c as usize].recv_cb = Some(Box::new(f));
        Ok(())
    }

    /// Binds external out channel `chan` to a callback that receives each
    /// message.
    pub fn bind_out(&mut self, chan: &str, f: impl FnMut(&[i64]) + 'static) -> Result<()> {
        let c = self.ext_chan(chan, ChanKind::ExternalOut)?;
        self.host.chans[c as usize].send_cb = Some(Box::new(f));
        Ok(())
    }

    /// Queues input on external in channel `chan`: `fields` is any number
    /// of whole messages, flat (for a channel of arity 0, one message).
    pub fn push(&mut self, chan: &str, fields: &[i64]) -> Result<()> {
        let c = self.ext_chan(chan, ChanKind::ExternalIn)?;
        let ch = &mut self.host.chans[c as usize];
        if ch.recv_cb.is_some() {
            return Err(Error::Binding(format!(
                "channel {chan} is bound to a callback"
            )));
        }
        if ch.arity == 0 {
            if !fields.is_empty() {
                return Err(Error::Binding(format!("channel {chan} carries no fields")));
            }
            ch.empties += 1;
            return Ok(());
        }
        if !fields.len().is_multiple_of(ch.arity) {
            return Err(Error::Binding(format!(
                "channel {chan} carries {} fields a message; {} is not a whole number of messages",
                ch.arity,
                fields.len()
            )));
        }
        if ch.head > 0 && ch.head * 2 >= ch.input.len() {
            ch.input.drain(..ch.head);
            ch.head = 0;
        }
        ch.input.extend_from_slice(fields);
        Ok(())
    }

    /// Takes the messages queued on external out channel `chan`, flat.
    pub fn take_output(&mut self, chan: &str) -> Result<Vec<i64>> {
        let c = self.ext_chan(chan, ChanKind::ExternalOut)?;
        let ch = &mut self.host.chans[c as usize];
        let out = ch.output[..ch.out_len].to_vec();
        ch.out_len = 0;
        Ok(out)
    }

    /// The external events so far, in order (recorded while tracing is on).
    pub fn trace(&self) -> &[Event] {
        &self.host.trace
    }

    /// Turns the recording of external events on or off. While it is on,
    /// generated code reaches every external channel through the runtime.
    pub fn set_tracing(&mut self, on: bool) {
        self.host.tracing = on;
    }

    /// What the runtime did so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Machine instructions generated for the program.
    pub fn code_size(&self) -> CodeSize {
        CodeSize {
            processes: self.native.as_ref().map_or(0, NativeProgram::instructions),
            fast_paths: self
                .fast
                .iter()
                .filter_map(|f| f.native.as_ref())
                .map(|n| n.instructions())
                .sum(),
            automaton: self
                .automaton
                .as_ref()
                .map_or(0, |a| a.native.instructions()),
        }
    }

    /// The compiled processes (native backends).
    pub fn native(&self) -> Option<&NativeProgram> {
        self.native.as_ref()
    }

    /// The extracted (and optimized) fast-path graphs, in specification
    /// order.
    pub fn fast_paths(&self) -> impl Iterator<Item = &Graph> {
        self.fast.iter().map(|f| &f.graph)
    }

    /// The compiled fast paths (native backend), in specification order.
    pub fn native_fast_paths(&self) -> impl Iterator<Item = &NativeGraph> {
        self.fast.iter().filter_map(|f| f.native.as_ref())
    }

    /// The automaton's graph ([`Backend::Automata`]).
    pub fn automaton(&self) -> Option<&Graph> {
        self.automaton.as_ref().map(|a| &a.graph)
    }

    /// Every process's pc and the flat variable array
    /// ([`Layout`]).
    pub fn state(&self) -> (&[u32], &[i64]) {
        (&self.pcs, &self.vars[..self.layout.slots as usize])
    }

    /// Runs until no process is ready, and says why.
    pub fn run(&mut self) -> Result<Status> {
        for (f, name) in self.host.externs.iter().zip(&self.host.extern_names) {
            if f.is_none() {
                return Err(Error::Binding(format!("host function {name} is not bound")));
            }
        }
        if let Some(status) = self.run_automaton()? {
            return Ok(status);
        }
        self.retry_external();
        while let Some(p) = self.ready.pop_front() {
            self.stats.switches += 1;
            self.status[p as usize] = St::Running;
            self.run_process(p as usize)?;
        }
        Ok(self.idle_status())
    }

    fn idle_status(&self) -> Status {
        let mut halted = true;
        let mut input = false;
        for (p, st) in self.status.iter().enumerate() {
            match st {
                St::Halted => {}
                St::BlockedExt => {
                    halted = false;
                    input = true;
                }
                St::Blocked => {
                    halted = false;
                    if let Tag::Alt(a) = self.tables.tag(p, self.pcs[p]) {
                        input |= self.tables.alts[a as usize].ext_in;
                    }
                }
                _ => halted = false,
            }
        }
        if halted {
            Status::Halted
        } else if input {
            Status::Input
        } else {
            Status::Deadlock
        }
    }

    /// Makes ready again every process blocked on an external in that may
    /// have input now.
    fn retry_external(&mut self) {
        for p in 0..self.status.len() {
            let pc = self.pcs[p];
            let retry = match (self.status[p], self.tables.tag(p, pc)) {
                (St::BlockedExt, Tag::Comm(s)) => {
                    self.may_have_input(self.tables.sites[s as usize].chan)
                }
                (St::Blocked, Tag::Alt(a)) => {
                    let alt = &self.tables.alts[a as usize];
                    alt.ext_in
                        && (alt.first..alt.first + alt.arms).any(|s| {
                            let site = &self.tables.sites[s as usize];
                            site.kind == ChanKind::ExternalIn && self.may_have_input(site.chan)
                        })
                }
                _ => false,
            };
            if retry {
                self.unwait(p);
                self.status[p] = St::Ready;
                self.ready.push_back(p as u32);
                // New input is a new situation: a fast path that aborted for
                // lack of it may be entered again.
                self.suppress[p] = NONE;
            }
        }
    }

    fn may_have_input(&self, c: ChanId) -> bool {
        let ch = &self.host.chans[c as usize];
        ch.recv_cb.is_some() || ch.head < ch.input.len() || ch.empties > 0
    }

    /// Removes process `p` from every channel wait it is in.
    fn unwait(&mut self, p: usize) {
        let pc = self.pcs[p];
        match self.tables.tag(p, pc) {
            Tag::Comm(s) => {
                let site = self.tables.sites[s as usize];
                if site.kind == ChanKind::Internal {
                    self.waits[site.chan as usize][usize::from(!site.is_in)]
                        .retain(|w| w.proc != p as u32);
                }
            }
            Tag::Alt(a) => {
                let alt = &self.tables.alts[a as usize];
                for s in alt.first..alt.first + alt.arms {
                    let site = self.tables.sites[s as usize];
                    if site.kind == ChanKind::Internal {
                        self.waits[site.chan as usize][usize::from(!site.is_in)]
                            .retain(|w| w.proc != p as u32);
                    }
                }
            }
            _ => {}
        }
    }

    /// Moves process `p` to `pc`.
    #[inline]
    fn set_pc(&mut self, p: usize, pc: Pc) {
        self.pcs[p] = pc;
        self.suppress[p] = NONE;
    }

    /// Runs process `p` (already marked running) until it blocks, halts,
    /// enters a fast path, or hands the processor on.
    fn run_process(&mut self, mut p: usize) -> Result<()> {
        loop {
            let pc = self.pcs[p];
            if !self.fast.is_empty() && self.try_enter(p, pc)? {
                return Ok(());
            }
            let step = match self.tables.tag(p, pc) {
                Tag::Code => match self.exec(p, pc) {
                    Ok(next) => {
                        self.set_pc(p, next);
                        Ok(Next::Continue)
                    }
                    Err(e) => Err(e),
                },
                Tag::Halt => {
                    self.status[p] = St::Halted;
                    return Ok(());
                }
                Tag::Comm(s) => self.comm(p, s),
                Tag::Alt(a) => self.alt(p, a),
            };
            match step {
                Ok(Next::Continue) => {}
                Ok(Next::Switch(q)) => {
                    self.stats.switches += 1;
                    p = q;
                }
                Ok(Next::Block) => return Ok(()),
                Err(e) => {
                    // The process stays at the statement, first in line.
                    self.status[p] = St::Ready;
                    self.ready.push_front(p as u32);
                    return Err(e);
                }
            }
        }
    }

    /// Runs process `p`'s local code from `pc`; returns where it stopped.
    fn exec(&mut self, p: usize, pc: Pc) -> Result<Pc> {
        let result = match &self.native {
            Some(code) => {
                self.ctx.vars = self.vars.as_mut_ptr();
                let ctx: *mut Ctx = &mut *self.ctx;
                // SAFETY: `ctx.vars` points to the machine's variable array,
                // at least `layout.slots` long and not otherwise borrowed
                // during the call; the hooks compiled into the code point
                // into `self.host`, boxed and alive as long as `self`, and
                // the machine holds no reference to it across the call.
                let r = unsafe { code.run(ctx, p, pc, &mut self.left[p]) };
                let at = r & native::PC_MASK;
                match r & !native::PC_MASK {
                    native::STOP => Ok(at),
                    native::FAULT_ASSERT => Err(Fault::Assert(at)),
                    native::FAULT_DIV => Err(Fault::DivisionByZero(at)),
                    native::FAULT_HOST => Err(Fault::Host(at)),
                    native::FAULT_LOOP => Err(Fault::Diverges(at)),
                    _ => {
                        return Err(Error::Unsupported {
                            backend: "native",
                            msg: format!(
                                "process {} cannot resume at pc {pc}",
                                self.program.processes[p].name
                            ),
                        });
                    }
                }
            }
            None => {
                let process = &self.program.processes[p];
                let base = self.layout.base[p] as usize;
                let vars = &mut self.vars[base..base + process.vars.len()];
                let host = &mut self.host;
                interp::run_local(
                    process,
                    pc,
                    vars,
                    &self.stops[p],
                    &self.loops[p],
                    &mut self.left[p],
                    &mut |f, a| host.call(f, a),
                )
            }
        };
        match result {
            Ok(at) => {
                // A channel operation, an `alt` or the end comes next: the
                // count starts afresh after it. (Only a process that took a
                // counted jump has anything to refill.)
                if self.left[p] != self.max_local && !matches!(self.tables.tag(p, at), Tag::Code) {
                    self.left[p] = self.max_local;
                }
                Ok(at)
            }
            Err(fault) => {
                // The process stays at the faulting statement, which has not
                // run (the local code before it has): running again retries
                // it, rather than running that code a second time from
                // where it started (a host call twice, a variable
                // incremented twice).
                let (Fault::Assert(at)
                | Fault::DivisionByZero(at)
                | Fault::Host(at)
                | Fault::Diverges(at)) = fault;
                self.set_pc(p, at);
                if let Fault::Diverges(_) = fault {
                    // At the loop's head: it goes on with a fresh count.
                    self.left[p] = self.max_local;
                }
                Err(self.fault_error(p, fault))
            }
        }
    }

    fn fault_error(&mut self, p: usize, fault: Fault) -> Error {
        let process = &self.program.processes[p];
        let pos_of = |pc: Pc| {
            process
                .nodes
                .get(pc as usize)
                .map(|n| n.pos)
                .unwrap_or_default()
        };
        match fault {
            Fault::Assert(pc) => Error::AssertionFailed {
                process: process.name.clone(),
                pos: pos_of(pc),
            },
            Fault::DivisionByZero(pc) => Error::DivisionByZero {
                process: process.name.clone(),
                pos: pos_of(pc),
            },
            Fault::Host(_) => self.host.take_error().unwrap_or_else(|| Error::Host {
                name: "?".into(),
                msg: "failed".into(),
            }),
            Fault::Diverges(pc) => Error::Diverges {
                process: process.name.clone(),
                pos: pos_of(pc),
                limit: self.max_local,
            },
        }
    }

    /// Copies a message from the writer's site to the reader's.
    #[inline]
    fn transfer(&mut self, w: Site, r: Site) {
        for i in 0..w.arity {
            let v = match self.tables.fields[(w.first + i) as usize] {
                Field::Slot(s) => self.vars[s as usize],
                Field::Const(c) => c,
            };
            if let Field::Slot(d) = self.tables.fields[(r.first + i) as usize] {
                self.vars[d as usize] = v;
            }
        }
    }

    /// Gathers the values a site sends into `self.msg`.
    fn gather(&mut self, s: Site) {
        for i in 0..s.arity as usize {
            self.msg[i] = match self.tables.fields[s.first as usize + i] {
                Field::Slot(x) => self.vars[x as usize],
                Field::Const(c) => c,
            };
        }
    }

    /// Scatters `self.msg` into the variables a site receives.
    fn scatter(&mut self, s: Site) {
        for i in 0..s.arity as usize {
            if let Field::Slot(d) = self.tables.fields[s.first as usize + i] {
                self.vars[d as usize] = self.msg[i];
            }
        }
    }

    /// Tries to complete the operation at `site` for the running process
    /// `p` now; `None` if it cannot.
    #[inline]
    fn attempt(&mut self, p: usize, si: u32) -> Result<Option<Next>> {
        let s = self.tables.sites[si as usize];
        match s.kind {
            ChanKind::Internal => {
                let list = &mut self.waits[s.chan as usize][usize::from(s.is_in)];
                if list.is_empty() {
                    return Ok(None);
                }
                // The oldest waiter (usually the only one: no memmove then).
                let w = if list.len() == 1 {
                    list.pop()
                } else {
                    Some(list.remove(0))
                };
                let Some(w) = w else { return Ok(None) };
                let q = w.proc as usize;
                let ws = self.tables.sites[w.site as usize];
                if ws.alt != NONE {
                    // Leave the partner's other arms, and move its start.
                    self.unwait(q);
                    let alt = &self.tables.alts[ws.alt as usize];
                    self.alt_start[ws.alt as usize] = (ws.arm + 1) % alt.arms;
                }
                if s.is_in {
                    self.transfer(ws, s);
                } else {
                    self.transfer(s, ws);
                }
                self.stats.rendezvous += 1;
                self.set_pc(q, ws.next);
                self.set_pc(p, s.next);
                if s.is_in {
                    self.status[q] = St::Ready;
                    self.ready.push_back(q as u32);
                    Ok(Some(Next::Continue))
                } else {
                    self.status[p] = St::Ready;
                    self.ready.push_back(p as u32);
                    self.status[q] = St::Running;
                    Ok(Some(Next::Switch(q)))
                }
            }
            ChanKind::ExternalIn => {
                let n = s.arity as usize;
                let got = self.host.recv(s.chan, &mut self.msg[..n]);
                if let Some(e) = self.host.take_error() {
                    return Err(e);
                }
                if !got {
                    return Ok(None);
                }
                self.scatter(s);
                self.set_pc(p, s.next);
                Ok(Some(Next::Continue))
            }
            ChanKind::ExternalOut => {
                self.gather(s);
                let n = s.arity as usize;
                self.host.send(s.chan, &self.msg[..n]);
                if let Some(e) = self.host.take_error() {
                    return Err(e);
                }
                self.set_pc(p, s.next);
                Ok(Some(Next::Continue))
            }
        }
    }

    /// The running process `p` at a `Comm` node.
    fn comm(&mut self, p: usize, si: u32) -> Result<Next> {
        if let Some(next) = self.attempt(p, si)? {
            return Ok(next);
        }
        let s = self.tables.sites[si as usize];
        if s.kind == ChanKind::Internal {
            self.waits[s.chan as usize][usize::from(!s.is_in)].push(Waiter {
                proc: p as u32,
                site: si,
            });
            self.status[p] = St::Blocked;
        } else {
            self.status[p] = St::BlockedExt;
        }
        Ok(Next::Block)
    }

    /// The running process `p` at an `alt`.
    fn alt(&mut self, p: usize, a: u32) -> Result<Next> {
        let AltInfo { first, arms, .. } = self.tables.alts[a as usize];
        let start = self.alt_start[a as usize];
        for i in 0..arms {
            let k = (start + i) % arms;
            if let Some(next) = self.attempt(p, first + k)? {
                self.alt_start[a as usize] = (k + 1) % arms;
                return Ok(next);
            }
        }
        for k in 0..arms {
            let si = first + k;
            let s = self.tables.sites[si as usize];
            if s.kind == ChanKind::Internal {
                self.waits[s.chan as usize][usize::from(!s.is_in)].push(Waiter {
                    proc: p as u32,
                    site: si,
                });
            }
        }
        self.status[p] = St::Blocked;
        Ok(Next::Block)
    }

    // -- Fast paths ----------------------------------------------------------

    /// Enters a fast path starting at process `p`'s `pc` if one applies;
    /// true if one ran (then `p` is back in the ready list).
    fn try_enter(&mut self, p: usize, pc: Pc) -> Result<bool> {
        let at = self.tables.fp_at[self.tables.pc_base[p] + pc as usize];
        if at == NONE || self.suppress[p] == pc {
            return Ok(false);
        }
        for k in 0..self.tables.fp_lists[at as usize].len() {
            let fi = self.tables.fp_lists[at as usize][k] as usize;
            let fpath = &self.fast[fi];
            let eligible = fpath.procs.iter().zip(&fpath.starts).all(|(&q, &start)| {
                self.pcs[q] == start
                    && (q == p
                        || matches!(self.status[q], St::Ready | St::Blocked | St::BlockedExt))
            });
            if !eligible || !fpath.procs.contains(&p) {
                continue;
            }
            if self.refuse_every > 0 {
                let fpath = &self.fast[fi];
                if fpath.owed {
                    // A refusal is paid when every process of the path has
                    // run its start statement in the process-based code.
                    let suppress = &self.suppress;
                    if fpath
                        .procs
                        .iter()
                        .zip(&fpath.starts)
                        .any(|(&q, &start)| suppress[q] == start)
                    {
                        continue;
                    }
                    self.fast[fi].owed = false;
                }
                let fpath = &mut self.fast[fi];
                let mut refuse = std::mem::take(&mut fpath.refuse_next);
                if fpath.nondeterministic {
                    fpath.eligible += 1;
                    refuse |= fpath.eligible.is_multiple_of(u64::from(self.refuse_every));
                }
                if refuse {
                    fpath.owed = true;
                    for (&q, &start) in fpath.procs.iter().zip(&fpath.starts) {
                        self.suppress[q] = start;
                    }
                    self.stats.refusals += 1;
                    // The process-based code runs this statement now: another
                    // path starting here must not take the refused entry (it
                    // could narrow the same `alt`, and the refusal would
                    // serve no one).
                    return Ok(false);
                }
            }
            self.enter(fi)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Runs fast path `fi`, whose processes are at their start pcs.
    fn enter(&mut self, fi: usize) -> Result<()> {
        let procs = std::mem::take(&mut self.fast[fi].procs);
        for &q in &procs {
            match self.status[q] {
                St::Ready => self.ready.retain(|&x| x as usize != q),
                St::Blocked => self.unwait(q),
                _ => {}
            }
            self.status[q] = St::InPath;
        }
        self.stats.entries += 1;
        let fpath = &self.fast[fi];
        let leave = match &fpath.native {
            Some(ng) => run_native_graph(
                ng,
                0,
                &mut self.ctx,
                &mut self.host,
                &mut self.vars,
                &mut self.pcs,
            ),
            None => {
                let mut io = HostIo {
                    host: &mut self.host,
                };
                fp::run(&fpath.graph, 0, &mut self.vars, &mut self.pcs, &mut io)
            }
        };
        for &q in &procs {
            self.status[q] = St::Ready;
            self.ready.push_back(q as u32);
            self.suppress[q] = self.pcs[q];
            // The path counted its own local loops (per entry).
            self.left[q] = self.max_local;
        }
        self.fast[fi].procs = procs;
        let leave = leave?;
        if let Some(e) = self.host.take_error() {
            return Err(e);
        }
        match leave {
            Leave::Exit => self.stats.exits += 1,
            Leave::Abort | Leave::Suspend { .. } => {
                self.stats.aborts += 1;
                // Entering again right away could keep the path's `alt`s
                // narrowed for ever (each entry ending at the counter bound).
                self.fast[fi].refuse_next = true;
            }
        }
        Ok(())
    }

    // -- The automaton -------------------------------------------------------

    /// Runs the automaton if it is active: `Some(status)` when it
    /// suspended, `None` when the process-based code is to run (it aborted
    /// now, with every process made ready at its stored pc, or before).
    fn run_automaton(&mut self) -> Result<Option<Status>> {
        let Some(auto) = &self.automaton else {
            return Ok(None);
        };
        if !auto.active {
            return Ok(None);
        }
        let leave = run_native_graph(
            &auto.native,
            auto.entry,
            &mut self.ctx,
            &mut self.host,
            &mut self.vars,
            &mut self.pcs,
        );
        let leave = leave?;
        if let Some(e) = self.host.take_error() {
            // Resume from the start of this run's state is not possible:
            // hand the stored state to the process-based code.
            self.abandon_automaton();
            return Err(e);
        }
        match leave {
            Leave::Suspend { resume } => {
                self.stats.suspends += 1;
                if let Some(a) = self.automaton.as_mut() {
                    a.entry = resume;
                }
                Ok(Some(self.status_from_pcs()))
            }
            Leave::Abort | Leave::Exit => {
                self.stats.aborts += 1;
                self.abandon_automaton();
                Ok(None)
            }
        }
    }

    fn abandon_automaton(&mut self) {
        if let Some(a) = self.automaton.as_mut() {
            a.active = false;
        }
        self.ready.clear();
        for p in 0..self.status.len() {
            self.status[p] = St::Ready;
            self.ready.push_back(p as u32);
            self.left[p] = self.max_local;
        }
    }

    /// The status of a state known only by its pcs (the automaton's).
    fn status_from_pcs(&self) -> Status {
        let mut halted = true;
        let mut input = false;
        for (p, &pc) in self.pcs.iter().enumerate() {
            match self.tables.tag(p, pc) {
                Tag::Halt => {}
                Tag::Comm(s) => {
                    halted = false;
                    input |= self.tables.sites[s as usize].kind == ChanKind::ExternalIn;
                }
                Tag::Alt(a) => {
                    halted = false;
                    input |= self.tables.alts[a as usize].ext_in;
                }
                Tag::Code => halted = false,
            }
        }
        if halted {
            Status::Halted
        } else if input {
            Status::Input
        } else {
            Status::Deadlock
        }
    }
}

/// The addresses of the scheduler's functions, its run loop first: what
/// the process-based code returns to at every channel operation (see
/// [`super::scheduler_functions`]).
pub(super) fn scheduler_functions() -> Vec<usize> {
    vec![
        Machine::run as *const () as usize,
        Machine::idle_status as *const () as usize,
        Machine::retry_external as *const () as usize,
        Machine::may_have_input as *const () as usize,
        Machine::unwait as *const () as usize,
        Machine::set_pc as *const () as usize,
        Machine::run_process as *const () as usize,
        Machine::exec as *const () as usize,
        Machine::fault_error as *const () as usize,
        Machine::transfer as *const () as usize,
        Machine::gather as *const () as usize,
        Machine::scatter as *const () as usize,
        Machine::attempt as *const () as usize,
        Machine::comm as *const () as usize,
        Machine::alt as *const () as usize,
        Machine::try_enter as *const () as usize,
        Machine::enter as *const () as usize,
        Machine::run_automaton as *const () as usize,
        run_native_graph as *const () as usize,
        Host::call as *const () as usize,
        Host::recv as *const () as usize,
        Host::send as *const () as usize,
        Host::take_error_slow as *const () as usize,
        Host::reopen_in as *const () as usize,
        Host::reopen_out as *const () as usize,
        Host::sync_in as *const () as usize,
        Host::sync_out as *const () as usize,
    ]
}

/// Runs a compiled graph from `entry` over the machine's state with the
/// external ports open.
fn run_native_graph(
    ng: &NativeGraph,
    entry: u32,
    ctx: &mut Ctx,
    host: &mut Host,
    vars: &mut [i64],
    pcs: &mut [u32],
) -> Result<Leave> {
    host.open_ports();
    ctx.vars = vars.as_mut_ptr();
    ctx.pcs = pcs.as_mut_ptr();
    ctx.ins = host.ins.as_mut_ptr();
    ctx.outs = host.outs.as_mut_ptr();
    ctx.host = (host as *mut Host).cast();
    // SAFETY: `ctx` describes the machine's own buffers: `vars` holds the
    // layout's slots and the graph's locals, `pcs` one pc per process, the
    // port arrays one port per channel, opened over queues that do not move
    // while the code runs; `host` is the boxed `Host` the trampolines expect,
    // not otherwise borrowed until the code returns.
    let leave = unsafe { ng.run(ctx, entry) };
    host.close_ports();
    Ok(leave)
}

/// The graph interpreter's view of the host.
struct HostIo<'a> {
    host: &'a mut Host,
}

impl fp::Io for HostIo<'_> {
    fn recv(&mut self, chan: ChanId, dst: &mut [i64]) -> bool {
        self.host.recv(chan, dst)
    }

    fn send(&mut self, chan: ChanId, src: &[i64]) {
        self.host.send(chan, src)
    }

    fn call(&mut self, f: ExternId, args: &[i64]) -> i64 {
        self.host.call(f, args).unwrap_or(0)
    }
}
