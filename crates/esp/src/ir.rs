//! The checked, lowered form of an ESP program that every backend reads.
//!
//! The front end ([`crate::parse`], [`crate::sema`]) turns source text into a
//! [`Program`]: channels, host functions, and processes whose bodies are
//! control-flow graphs of [`Node`]s. A node's index in its process is its
//! *program counter* ([`Pc`]): the runtime saves a blocked process as a pc
//! and its variables, and the fast paths of §4 leave each process at a pc.
//!
//! Invariants every consumer may rely on (the front end guarantees them):
//! - `Out` operands are variables or constants: any other expression was
//!   assigned to a temporary variable by an `Assign` node just before, so
//!   re-executing a channel node at its pc has no side effect beyond the
//!   communication itself (§4.2: a fast path may leave a process blocked at a
//!   channel statement and the runtime performs it again).
//! - every `next`, `then`, `els` is a valid pc of the same process; every
//!   `Var` is a valid index in the process's `vars`; every channel and extern
//!   id is valid, and the operand counts match the channel's arity and the
//!   function's arity.
//! - a channel is used by `In` (and `Alt` in-arms) only in processes that read
//!   it, and its kind allows it: an `ExternalIn` channel is only read, an
//!   `ExternalOut` channel only written.

use std::fmt;

/// A program counter: a node's index in its process.
pub type Pc = u32;
/// A process's index in [`Program::processes`].
pub type ProcId = u32;
/// A channel's index in [`Program::channels`].
pub type ChanId = u32;
/// A host function's index in [`Program::externs`].
pub type ExternId = u32;

/// The default bound on the backward jumps a process may take on loops
/// through no channel operation between two of its channel operations
/// ([`runtime::Options::max_local_iterations`](crate::runtime::Options::max_local_iterations)),
/// and on the iterations of such loops in one entry of a fast path or the
/// automaton
/// ([`ExploreOptions::local_loop_bound`](crate::explore::ExploreOptions::local_loop_bound)).
/// Far above what any program of this repository needs between two
/// messages, and reached by a loop that never yields in well under a
/// second of native code (a few seconds interpreted).
pub const DEFAULT_MAX_LOCAL_ITERATIONS: u64 = 10_000_000;

/// A position in a source file: 1-based line and column (in characters).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pos {
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A whole checked program.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// Every channel, in declaration order.
    pub channels: Vec<Channel>,
    /// Every host function, in declaration order.
    pub externs: Vec<Extern>,
    /// Every process, in declaration order.
    pub processes: Vec<Process>,
    /// The processes' named constants (folded into the code; kept so that
    /// fast-path predicates can name them), in declaration order.
    pub constants: Vec<Constant>,
}

/// A process's `constant NAME = value;`.
#[derive(Clone, Debug, PartialEq)]
pub struct Constant {
    /// The process that declares it.
    pub proc: ProcId,
    /// Its name.
    pub name: String,
    /// Its folded value.
    pub value: i64,
    /// Where it was declared.
    pub pos: Pos,
}

/// Whether a channel joins two processes or one process and the host.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ChanKind {
    /// Between processes of the program.
    Internal,
    /// `external in`: the host writes, processes read.
    ExternalIn,
    /// `external out`: processes write, the host reads.
    ExternalOut,
}

/// A channel declaration: `channel NAME(int, int) [external in|out];`.
#[derive(Clone, Debug, PartialEq)]
pub struct Channel {
    /// Its name.
    pub name: String,
    /// How many ints one message carries.
    pub arity: u32,
    /// Internal or external.
    pub kind: ChanKind,
    /// Where it was declared.
    pub pos: Pos,
}

/// A host function: `extern NAME(int, ...);`. Every call returns an int.
#[derive(Clone, Debug, PartialEq)]
pub struct Extern {
    /// Its name.
    pub name: String,
    /// How many int arguments it takes.
    pub arity: u32,
    /// Where it was declared.
    pub pos: Pos,
}

/// One variable of a process.
#[derive(Clone, Debug, PartialEq)]
pub struct VarInfo {
    /// The source name, or `$tN` for a temporary the lowering introduced.
    pub name: String,
    /// True for temporaries introduced by lowering (never named by a spec).
    pub temp: bool,
}

/// One process: its variables and its body as a graph of nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Process {
    /// Its name.
    pub name: String,
    /// Its variables; all start at 0. Constants are folded and take no slot.
    pub vars: Vec<VarInfo>,
    /// The body; node `entry` runs first.
    pub nodes: Vec<Node>,
    /// The first node.
    pub entry: Pc,
    /// Where it was declared.
    pub pos: Pos,
}

/// One node: a statement, or the join point a `#N` label names.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// What it does.
    pub kind: NodeKind,
    /// The source position of the statement it came from.
    pub pos: Pos,
    /// The `#N` annotation that names this node, if any.
    pub label: Option<u32>,
}

/// What a node does. Every variant but `Halt` names its successors.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeKind {
    /// `var = value;`
    Assign {
        /// The variable written.
        var: u32,
        /// The value.
        value: Expr,
        /// The next node.
        next: Pc,
    },
    /// An expression evaluated for its effect (a host function call).
    Eval {
        /// The expression.
        value: Expr,
        /// The next node.
        next: Pc,
    },
    /// A two-way branch (`if`, `while`): nonzero goes to `then`.
    Branch {
        /// The condition.
        cond: Expr,
        /// Taken when `cond != 0`.
        then: Pc,
        /// Taken when `cond == 0`.
        els: Pc,
    },
    /// Does nothing: a join point, the target of a `#N` label at the end of
    /// a block, or an empty loop body.
    Nop {
        /// The next node.
        next: Pc,
    },
    /// `assert(cond);`: a zero value stops the program with an error.
    Assert {
        /// The condition.
        cond: Expr,
        /// The next node.
        next: Pc,
    },
    /// One channel operation, `in(...)` or `out(...)`, outside an `alt`.
    Comm {
        /// The operation.
        op: Comm,
        /// The next node once it completes.
        next: Pc,
    },
    /// `alt { arm ... }`: waits until one arm's operation can complete.
    Alt {
        /// The arms, in source order.
        arms: Vec<Arm>,
    },
    /// The end of the process's body.
    Halt,
}

/// One arm of an `alt`.
#[derive(Clone, Debug, PartialEq)]
pub struct Arm {
    /// Its guard operation.
    pub op: Comm,
    /// The first node of its body.
    pub next: Pc,
    /// Where the arm's operation is written.
    pub pos: Pos,
}

/// A channel operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Comm {
    /// `in(chan, v, ...)`: receive into these variables.
    In {
        /// The channel.
        chan: ChanId,
        /// The variables written, one per field.
        vars: Vec<u32>,
    },
    /// `out(chan, e, ...)`: send these values.
    Out {
        /// The channel.
        chan: ChanId,
        /// The values, one per field.
        args: Vec<Operand>,
    },
}

impl Comm {
    /// The channel it uses.
    pub fn chan(&self) -> ChanId {
        match self {
            Comm::In { chan, .. } | Comm::Out { chan, .. } => *chan,
        }
    }

    /// True for `in`.
    pub fn is_in(&self) -> bool {
        matches!(self, Comm::In { .. })
    }
}

/// A value an `out` sends: a variable or a constant.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    /// A variable.
    Var(u32),
    /// A constant.
    Const(i64),
}

/// An integer expression. Arithmetic is 64-bit two's complement and wraps.
///
/// `Var(n)` is the process's variable `n` in a process body, and the global
/// slot `n` (see [`Layout`]) in a fast-path or automaton graph
/// ([`crate::fp`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A constant.
    Const(i64),
    /// A variable.
    Var(u32),
    /// A unary operator.
    Unary(UnOp, Box<Expr>),
    /// A binary operator; both sides are evaluated, left first.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `a && b`: `b` is evaluated only when `a != 0`; the value is 0 or 1.
    And(Box<Expr>, Box<Expr>),
    /// `a || b`: `b` is evaluated only when `a == 0`; the value is 0 or 1.
    Or(Box<Expr>, Box<Expr>),
    /// A call to a host function; arguments are evaluated left to right.
    Call(ExternId, Vec<Expr>),
}

/// Unary operators.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `-a` (wrapping).
    Neg,
    /// `!a`: 1 if `a == 0`, else 0.
    Not,
    /// `~a`.
    BitNot,
}

/// Binary operators, with C's meaning on 64-bit ints.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+` (wrapping).
    Add,
    /// `-` (wrapping).
    Sub,
    /// `*` (wrapping).
    Mul,
    /// `/`: truncates toward zero; a zero divisor is a run-time error;
    /// `i64::MIN / -1` wraps to `i64::MIN`.
    Div,
    /// `%`: the sign of the dividend; a zero divisor is a run-time error;
    /// `i64::MIN % -1` is 0.
    Rem,
    /// `<<`: the shift count is taken modulo 64.
    Shl,
    /// `>>`: arithmetic; the shift count is taken modulo 64.
    Shr,
    /// `&`.
    BitAnd,
    /// `|`.
    BitOr,
    /// `^`.
    BitXor,
    /// `==` (0 or 1).
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
}

impl BinOp {
    /// Applies the operator; `None` for a zero divisor of `/` or `%`.
    pub fn apply(self, a: i64, b: i64) -> Option<i64> {
        Some(match self {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div => {
                if b == 0 {
                    return None;
                }
                a.wrapping_div(b)
            }
            BinOp::Rem => {
                if b == 0 {
                    return None;
                }
                a.wrapping_rem(b)
            }
            BinOp::Shl => a.wrapping_shl((b & 63) as u32),
            BinOp::Shr => a.wrapping_shr((b & 63) as u32),
            BinOp::BitAnd => a & b,
            BinOp::BitOr => a | b,
            BinOp::BitXor => a ^ b,
            BinOp::Eq => (a == b) as i64,
            BinOp::Ne => (a != b) as i64,
            BinOp::Lt => (a < b) as i64,
            BinOp::Le => (a <= b) as i64,
            BinOp::Gt => (a > b) as i64,
            BinOp::Ge => (a >= b) as i64,
        })
    }
}

impl UnOp {
    /// Applies the operator.
    pub fn apply(self, a: i64) -> i64 {
        match self {
            UnOp::Neg => a.wrapping_neg(),
            UnOp::Not => (a == 0) as i64,
            UnOp::BitNot => !a,
        }
    }
}

/// Where each process's variables live in the one flat array of `i64`
/// slots that the runtime, the fast paths and the automata share: process
/// `p`'s variable `v` is slot `base[p] + v`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The first slot of each process.
    pub base: Vec<u32>,
    /// The number of slots.
    pub slots: u32,
}

impl Layout {
    /// The layout of a program: processes in order, variables in order.
    pub fn of(program: &Program) -> Layout {
        let mut base = Vec::with_capacity(program.processes.len());
        let mut slots = 0u32;
        for p in &program.processes {
            base.push(slots);
            slots += p.vars.len() as u32;
        }
        Layout { base, slots }
    }

    /// The slot of process `p`'s variable `v`.
    pub fn slot(&self, p: ProcId, v: u32) -> u32 {
        self.base[p as usize] + v
    }
}

/// A statement a fast-path specification can name: a node, or one arm of an
/// `alt` node.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StmtRef {
    /// The node.
    pub pc: Pc,
    /// The arm, when the node is an `alt`.
    pub arm: Option<u32>,
}

impl Program {
    /// The id of the channel with this name.
    pub fn channel(&self, name: &str) -> Option<ChanId> {
        self.channels
            .iter()
            .position(|c| c.name == name)
            .map(|i| i as ChanId)
    }

    /// The id of the process with this name.
    pub fn process(&self, name: &str) -> Option<ProcId> {
        self.processes
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as ProcId)
    }

    /// The id of the host function with this name.
    pub fn extern_fn(&self, name: &str) -> Option<ExternId> {
        self.externs
            .iter()
            .position(|e| e.name == name)
            .map(|i| i as ExternId)
    }
}

impl Expr {
    /// Evaluates the expression over `vars`, calling host functions through
    /// `call`. Returns `None` when a `/` or `%` has a zero divisor.
    pub fn eval(&self, vars: &[i64], call: &mut dyn FnMut(ExternId, &[i64]) -> i64) -> Option<i64> {
        Some(match self {
            Expr::Const(c) => *c,
            Expr::Var(v) => vars[*v as usize],
            Expr::Unary(op, a) => op.apply(a.eval(vars, call)?),
            Expr::Binary(op, a, b) => {
                let a = a.eval(vars, call)?;
                let b = b.eval(vars, call)?;
                op.apply(a, b)?
            }
            Expr::And(a, b) => (a.eval(vars, call)? != 0 && b.eval(vars, call)? != 0) as i64,
            Expr::Or(a, b) => (a.eval(vars, call)? != 0 || b.eval(vars, call)? != 0) as i64,
            Expr::Call(f, args) => {
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    values.push(a.eval(vars, call)?);
                }
                call(*f, &values)
            }
        })
    }

    /// Calls `f` on every variable the expression reads.
    pub fn for_each_var(&self, f: &mut dyn FnMut(u32)) {
        match self {
            Expr::Const(_) => {}
            Expr::Var(v) => f(*v),
            Expr::Unary(_, a) => a.for_each_var(f),
            Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                a.for_each_var(f);
                b.for_each_var(f);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.for_each_var(f)),
        }
    }

    /// True when evaluating it calls a host function (it has an effect).
    pub fn has_call(&self) -> bool {
        match self {
            Expr::Const(_) | Expr::Var(_) => false,
            Expr::Unary(_, a) => a.has_call(),
            Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
                a.has_call() || b.has_call()
            }
            Expr::Call(..) => true,
        }
    }

    /// True when it may fail: it divides by something not a nonzero constant.
    pub fn may_fault(&self) -> bool {
        match self {
            Expr::Const(_) | Expr::Var(_) => false,
            Expr::Unary(_, a) => a.may_fault(),
            Expr::Binary(op, a, b) => {
                let divides = matches!(op, BinOp::Div | BinOp::Rem)
                    && !matches!(**b, Expr::Const(c) if c != 0);
                divides || a.may_fault() || b.may_fault()
            }
            Expr::And(a, b) | Expr::Or(a, b) => a.may_fault() || b.may_fault(),
            Expr::Call(_, args) => args.iter().any(Expr::may_fault),
        }
    }

    /// The same expression with every variable renamed by `f` (a process's
    /// variable to its global slot, for instance).
    pub fn map_vars(&self, f: &mut dyn FnMut(u32) -> u32) -> Expr {
        match self {
            Expr::Const(c) => Expr::Const(*c),
            Expr::Var(v) => Expr::Var(f(*v)),
            Expr::Unary(op, a) => Expr::Unary(*op, Box::new(a.map_vars(f))),
            Expr::Binary(op, a, b) => {
                Expr::Binary(*op, Box::new(a.map_vars(f)), Box::new(b.map_vars(f)))
            }
            Expr::And(a, b) => Expr::And(Box::new(a.map_vars(f)), Box::new(b.map_vars(f))),
            Expr::Or(a, b) => Expr::Or(Box::new(a.map_vars(f)), Box::new(b.map_vars(f))),
            Expr::Call(g, args) => Expr::Call(*g, args.iter().map(|a| a.map_vars(f)).collect()),
        }
    }
}
