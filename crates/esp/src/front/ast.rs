//! The syntax tree of an ESP program, as written: names are still names.
//!
//! [`crate::parse`] builds it; [`crate::sema`] resolves the names, checks
//! the static rules and lowers it to [`crate::ir`].

use crate::ir::{BinOp, ChanKind, Pos, UnOp};

/// A name and where it is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    /// The name.
    pub name: String,
    /// Where it is written.
    pub pos: Pos,
}

/// A whole source file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    /// `channel` declarations, in order.
    pub channels: Vec<ChannelDecl>,
    /// `extern` declarations, in order.
    pub externs: Vec<ExternDecl>,
    /// `process` declarations, in order.
    pub processes: Vec<ProcessDecl>,
}

/// `channel NAME(int, ...) [external in|out];`
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelDecl {
    /// Its name.
    pub name: Ident,
    /// The number of `int` fields.
    pub arity: u32,
    /// Internal or external.
    pub kind: ChanKind,
    /// Where the declaration begins.
    pub pos: Pos,
}

/// `extern NAME(int, ...);`
#[derive(Clone, Debug, PartialEq)]
pub struct ExternDecl {
    /// Its name.
    pub name: Ident,
    /// The number of `int` parameters.
    pub arity: u32,
    /// Where the declaration begins.
    pub pos: Pos,
}

/// `process NAME { decls stmts }`
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessDecl {
    /// Its name.
    pub name: Ident,
    /// Where the declaration begins.
    pub pos: Pos,
    /// `constant` and `var` declarations, in order.
    pub decls: Vec<Decl>,
    /// The body.
    pub body: Vec<Stmt>,
    /// Where the closing `}` is.
    pub end: Pos,
}

/// A declaration at the top of a process body.
#[derive(Clone, Debug, PartialEq)]
pub enum Decl {
    /// `constant NAME = expr;`
    Constant(Ident, Expr),
    /// `var NAME;` (one per name of a `var a, b;` list).
    Var(Ident),
}

/// A statement and where it begins.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What it is.
    pub kind: StmtKind,
    /// Where it begins.
    pub pos: Pos,
}

/// The statements.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `x = e;`
    Assign(Ident, Expr),
    /// `f(args);`: an expression evaluated for its effect.
    Eval(Expr),
    /// `if (c) then [else els]`
    If(Expr, Box<Stmt>, Option<Box<Stmt>>),
    /// `while (c) body`
    While(Expr, Box<Stmt>),
    /// `break;`
    Break,
    /// `{ ... }`
    Block(Vec<Stmt>),
    /// `;`
    Empty,
    /// `in(...);` or `out(...);`
    Comm(Comm),
    /// `alt { arms }`
    Alt(Vec<AltArm>),
    /// `assert(c);`
    Assert(Expr),
    /// `#N`: names the point where it stands (lowered to a no-op); a
    /// specification's event for it is control reaching that point.
    Label(u32),
}

/// A channel operation as written.
#[derive(Clone, Debug, PartialEq)]
pub enum Comm {
    /// `in(chan, v, ...)`
    In(Ident, Vec<Ident>),
    /// `out(chan, e, ...)`
    Out(Ident, Vec<Expr>),
}

impl Comm {
    /// The channel it names.
    pub fn chan(&self) -> &Ident {
        match self {
            Comm::In(c, _) | Comm::Out(c, _) => c,
        }
    }
}

/// One arm of an `alt`: a guard operation and a body.
#[derive(Clone, Debug, PartialEq)]
pub struct AltArm {
    /// The guard.
    pub op: Comm,
    /// Where the guard is written.
    pub pos: Pos,
    /// The body (a block, or `;` for none).
    pub body: Stmt,
}

/// An expression, its position, and its depth (the parser bounds nesting
/// so that later recursive passes cannot exhaust the stack).
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it begins (for a chain: where its last operator is).
    pub pos: Pos,
    /// 1 for a leaf; 1 + the deepest operand otherwise (a chain counts
    /// once, however long).
    pub depth: u32,
}

/// The expressions.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A literal (`true` is 1, `false` is 0).
    Int(i64),
    /// A variable or constant.
    Name(Ident),
    /// A unary operator.
    Unary(UnOp, Box<Expr>),
    /// A left-associative chain of binary operators: `first op1 rhs1 op2
    /// rhs2 ...` means `((first op1 rhs1) op2 rhs2) ...`. A chain is flat,
    /// however long (`1 + 1 + ... + 1` is one node with a link per `+`), so
    /// that its length is not nesting: no pass recurses along it.
    Chain(Box<Expr>, Vec<Link>),
    /// A host function call.
    Call(Ident, Vec<Expr>),
}

/// One step of a [`ExprKind::Chain`]: an operator and its right operand.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// The operator.
    pub op: ChainOp,
    /// Where the operator is.
    pub pos: Pos,
    /// The right operand.
    pub rhs: Expr,
}

/// The operators of a chain.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ChainOp {
    /// An arithmetic, bitwise or comparison operator.
    Bin(BinOp),
    /// `&&`: the right operand is evaluated only when the left is nonzero.
    And,
    /// `||`: the right operand is evaluated only when the left is zero.
    Or,
}
