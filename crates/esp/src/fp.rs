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
        /// with more than one arm on the path): the runtime then refuses to
        /// enter it now and then (§4.4).
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
