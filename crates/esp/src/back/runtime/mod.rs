//! The runtime: a program loaded on a backend, its external channels and
//! host functions bound, run by a user-level scheduler in one OS thread.
//!
//! ## Scheduling (§2.1, §4.3's default policy)
//! - A FIFO ready list; at the start every process is ready, in declaration
//!   order. The running process continues until it blocks.
//! - A rendezvous completes when an `out` and an `in` on one channel meet;
//!   the reader's variables receive the writer's values, copied once, from
//!   one slot of the flat variable array to another. When the running
//!   process completes a rendezvous with a blocked partner, the process
//!   doing the `in` continues and the other is appended to the ready list.
//!   Blocked processes wait on a channel in FIFO order.
//! - `alt` is fair: each `alt` node keeps a rotating start arm; the first arm
//!   from there that can complete now is taken and the start moves past it.
//!   With none ready, the process waits on every arm; a partner arriving on
//!   any of them completes that arm (and moves the start past it).
//! - External channels: an `external out` is always ready (the message is
//!   queued, or handed to the bound callback); an `external in` is ready
//!   when the queue has a message (or the callback returns one).
//! - [`Machine::run`] returns when no process is ready. Before it schedules,
//!   every process blocked on an external in that may now have input (its
//!   queue is not empty, or it is bound to a callback) is made ready again.
//! - Errors stop the run: a failed assertion, a division by zero, a host
//!   function that panicked or is not bound, a loop that never yields. The
//!   faulting process stays at the faulting statement, first in the ready
//!   list.
//!
//! ## Loops that never yield
//! A process runs until it blocks, so a loop through no channel operation
//! would hold the processor for ever. Each process has a budget of
//! [`Options::max_local_iterations`] backward jumps on such loops
//! ([`LocalLoops`](crate::interp::LocalLoops)), refilled whenever it
//! reaches a channel operation, an `alt` or its end; the interpreter and
//! the native code count the same jumps (the native code one `sub` and one
//! `jb` per jump, in a register; a process without such loops counts
//! nothing), and with the budget spent the run stops with
//! [`Error::Diverges`](crate::Error::Diverges) naming the process and the
//! loop's head, where the process stays: running again continues the loop
//! with a fresh budget. Steps between channel operations are what is
//! bounded, not the run's length: a program that streams input for ever is
//! no error. Fast paths and the automaton count the iterations of their
//! graphs' loops through no channel operation per entry (per run, for the
//! automaton) against the same bound, so a count costs nothing at channel
//! operations; past it they abort, and the process-based code takes over
//! with a full budget and reports the loop if it goes on. A graph whose
//! local loops legitimately run longer than the bound in one entry only
//! loses its speed (the automaton is then abandoned for the process-based
//! code, as after any abort).
//!
//! ## Fast paths (§3-§4)
//! With a specification, each fast path is extracted
//! ([`explore`](crate::explore)) and optimized ([`opt`](crate::opt)); on the
//! native backend it is compiled ([`fpgen`](crate::fpgen)), on the
//! interpreter it runs on the graph interpreter
//! ([`fp::run`](crate::fp::run)). A process that is dispatched or continues at the `start` statement of a fast path,
//! while every other process of the path waits at its own start statement
//! (ready or blocked there), enters the path: the path's processes leave the
//! ready list and the channel waits, the graph runs, and afterwards every one
//! of them is appended to the ready list (specification order) at the pc the
//! graph stored. A process is not checked again at the pc it left the path at
//! until it has moved, so a path that aborts at once cannot loop (or until
//! the next `run` retries it for external input that may have arrived: new
//! input is a new situation). For fairness (§4.4) an eligible entry is
//! refused right after the path aborted, and on every `refuse_every`-th
//! eligible entry of a path that narrows an `alt` or makes a choice. A
//! refused entry runs the statement in the process-based code, whose `alt`
//! is fair, at once (no other path starting there takes it), and the
//! refused path is not entered again until each of its processes has run
//! its start statement in the process-based code.
//!
//! ## Automata (§4.1)
//! [`Backend::Automata`] runs the whole program's product machine
//! ([`automata::automaton`](crate::automata::automaton)) as native code.
//! When every process is blocked it leaves with `Suspend`, and the next
//! [`Machine::run`] resumes it where it stopped; when it aborts (a failing assertion or division, every process
//! halted), the process-based native code takes over from the stored state.
//!
//! ## Native code and the host
//! Generated code reaches the runtime through [`abi::Ctx`](crate::abi::Ctx):
//! the variable and pc arrays, the external ports, and three trampolines
//! (`call`, `recv`, `send`). A host callback that panics is caught inside the trampoline and
//! becomes [`Error::Host`](crate::Error::Host): no unwinding ever crosses
//! generated code.
//!
//! ## Source
//! - `host.rs`: the host side (external channels' bindings, queues and
//!   ports, host functions, the trace) and the trampolines;
//! - `tables.rs`: the program's static tables and the validation of a
//!   program built outside the front end;
//! - `machine.rs`: the [`Machine`] and its scheduler, fast-path entry and
//!   fairness, and the automaton's driver.

mod host;
mod machine;
mod tables;

use crate::explore::ExploreOptions;
use crate::ir::ChanId;
use crate::spec::Spec;

pub use machine::Machine;

/// The addresses of the scheduler's functions (the run loop first, then
/// the functions of the rendezvous, the ready list, the external channels
/// and the fast-path entry that it may call), for counting the machine
/// instructions of the code that the process-based code returns to at
/// every channel operation (`fastpath bench esp`'s size column: the
/// paper's ESP code contained its context switches, ours calls them). A
/// function the compiler inlined everywhere still has an address here; a
/// count should follow direct calls from the first and take only these.
pub fn scheduler_functions() -> Vec<usize> {
    machine::scheduler_functions()
}

/// Which code runs the program.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// The reference interpreter ([`interp`](crate::interp)); fast paths run on the graph
    /// interpreter ([`fp::run`](crate::fp::run)).
    Interp,
    /// Process-based native code ([`native`](crate::native)); fast paths compiled by
    /// [`fpgen`](crate::fpgen).
    #[default]
    Native,
    /// The whole program as one native state machine (programs without
    /// `alt` only); the process-based native code takes over if it aborts.
    /// It has no fast paths: [`Machine::new`] refuses a specification with
    /// [`Error::SpecWithAutomata`](crate::Error::SpecWithAutomata).
    Automata,
}

/// How to load a program.
#[derive(Clone, Debug)]
pub struct Options {
    /// The backend.
    pub backend: Backend,
    /// A fast-path specification, resolved against the program
    /// ([`spec::parse`](crate::spec::parse)).
    pub spec: Option<Spec>,
    /// Limits of symbolic execution.
    pub explore: ExploreOptions,
    /// A fast path that narrows an `alt` or makes a choice is refused on
    /// every `refuse_every`-th eligible entry, and any path on its first
    /// eligible entry after an abort (§4.4); 0 never refuses.
    pub refuse_every: u32,
    /// How many backward jumps on loops through no channel operation
    /// ([`LocalLoops`](crate::interp::LocalLoops)) a process may take
    /// between two of its channel operations; one more stops the run with
    /// [`Error::Diverges`](crate::Error::Diverges). Fast paths and the
    /// automaton count the iterations of such loops per entry against the
    /// same bound and abort past it (see the module docs). Default
    /// [`DEFAULT_MAX_LOCAL_ITERATIONS`](crate::ir::DEFAULT_MAX_LOCAL_ITERATIONS);
    /// `u64::MAX` is, in practice, no bound.
    pub max_local_iterations: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            backend: Backend::default(),
            spec: None,
            explore: ExploreOptions::default(),
            refuse_every: 8,
            max_local_iterations: crate::ir::DEFAULT_MAX_LOCAL_ITERATIONS,
        }
    }
}

/// An event on an external channel, as the host sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// The program read a message from an `external in` channel.
    In {
        /// The channel.
        chan: ChanId,
        /// The message.
        fields: Vec<i64>,
    },
    /// The program wrote a message to an `external out` channel.
    Out {
        /// The channel.
        chan: ChanId,
        /// The message.
        fields: Vec<i64>,
    },
}

/// Counters of what the runtime did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Fast paths entered.
    pub entries: u64,
    /// Fast paths that left at their `exit` element.
    pub exits: u64,
    /// Fast paths (or the automaton) that aborted to the process-based code.
    pub aborts: u64,
    /// Eligible entries refused for fairness (§4.4).
    pub refusals: u64,
    /// Times a process was given the processor by the scheduler.
    pub switches: u64,
    /// Rendezvous between two processes completed by the scheduler.
    pub rendezvous: u64,
    /// Times the automaton suspended for lack of input.
    pub suspends: u64,
}

/// Generated machine instructions (excluding initialization and data).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CodeSize {
    /// The process-based code of every process.
    pub processes: usize,
    /// Every fast path.
    pub fast_paths: usize,
    /// The automaton.
    pub automaton: usize,
}

/// Where a run stopped: no process was ready.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Every process has halted.
    Halted,
    /// Some process waits for input on an external in channel.
    Input,
    /// No process waits for input and some process is blocked on an internal
    /// channel for good.
    Deadlock,
}
