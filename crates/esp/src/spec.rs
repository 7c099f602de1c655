//! Fast-path specifications (§3, Figure 5): path expressions over the
//! statements of each process, kept in a file of their own.
//!
//! The types below are the resolved form every later stage reads; the
//! parser that produces them from text follows.

use crate::ir::{Expr, Pos, ProcId, StmtRef};

/// A specification file: one or more `fastpath NAME { ... }` blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// The fast paths, in file order.
    pub fastpaths: Vec<FastPath>,
}

/// One `fastpath NAME { process P { ... } ... }` block.
#[derive(Clone, Debug, PartialEq)]
pub struct FastPath {
    /// Its name.
    pub name: String,
    /// Where it begins.
    pub pos: Pos,
    /// The processes it moves, in specification order (the order of the
    /// default scheduling policy's ready list).
    pub procs: Vec<ProcSpec>,
}

/// The part of a fast path for one process.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcSpec {
    /// The process.
    pub proc: ProcId,
    /// The `statement` field, with the statements of `start`, `follows` and
    /// `exit` added: every statement whose execution moves the path's
    /// automaton; all others are ignored.
    pub stmts: Vec<StmtRef>,
    /// The `start` element: the process must be at this statement when the
    /// path is entered, and it is the first event.
    pub start: Element,
    /// The `follows` expression (absent: the empty path).
    pub follows: Option<Regex>,
    /// The `exit` element (absent: the path only ends by leaving `follows`).
    pub exit: Option<Element>,
    /// Where the `process` block begins.
    pub pos: Pos,
}

/// A statement element: a statement and its qualifiers.
#[derive(Clone, Debug, PartialEq)]
pub struct Element {
    /// The statement.
    pub stmt: StmtRef,
    /// `? (pred)`: must hold at the statement; over the process's own
    /// variables (`Expr::Var` is the process's variable index). For a
    /// channel statement it is evaluated after the communication (so it can
    /// test what an `in` received); for any other statement, before it.
    pub pred: Option<Expr>,
    /// `<=> X`: the partner process and statement of the communication.
    pub partner: Option<(ProcId, StmtRef)>,
    /// `yield P`: after this statement, process `P` runs next.
    pub yield_to: Option<ProcId>,
    /// Where the element is written.
    pub pos: Pos,
}

/// A path expression over elements.
#[derive(Clone, Debug, PartialEq)]
pub enum Regex {
    /// One element.
    Elem(Element),
    /// Each in turn.
    Seq(Vec<Regex>),
    /// Any one of them (`a | b`).
    Alt(Vec<Regex>),
    /// Zero or more times (`r*`): a repetition operator (§4.4).
    Star(Box<Regex>),
    /// One or more times (`r+`): a repetition operator (§4.4).
    Plus(Box<Regex>),
    /// Zero or one time (`r?`).
    Opt(Box<Regex>),
}
