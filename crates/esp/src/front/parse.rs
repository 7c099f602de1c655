//! A hand-written recursive-descent parser from tokens ([`crate::lex`]) to
//! the syntax tree ([`crate::ast`]).
//!
//! ```text
//! program  := item*
//! item     := "channel" NAME "(" [types] ")" ["external" ("in" | "out")] ";"
//!           | "extern" NAME "(" [types] ")" ";"
//!           | "process" NAME "{" decl* stmt* "}"
//! types    := "int" ("," "int")*
//! decl     := "constant" NAME "=" expr ("," NAME "=" expr)* ";"
//!           | "var" NAME ("," NAME)* ";"
//! stmt     := "{" stmt* "}" | ";" | "#" N
//!           | NAME "=" expr ";" | NAME "(" [expr ("," expr)*] ")" ";"
//!           | "if" "(" expr ")" stmt ["else" stmt] | "while" "(" expr ")" stmt
//!           | "break" ";" | "assert" "(" expr ")" ";"
//!           | comm ";" | "alt" "{" (comm stmt)+ "}"
//! comm     := "in" "(" NAME ("," NAME)* ")" | "out" "(" NAME ("," expr)* ")"
//! expr     := C's binary operators and precedence over unary - ! ~,
//!             literals, `true`, `false`, names, calls and parentheses
//! ```
//!
//! Nesting of statements and expressions is bounded ([`MAX_DEPTH`]) so that
//! no input can exhaust the stack here or in any later recursive pass. A run
//! of left-associative operators is not nesting: it becomes one flat
//! [`ExprKind::Chain`], however long, and the lowering splits long chains
//! into steps ([`crate::sema::MAX_EXPR_DEPTH`]).

use crate::ast::*;
use crate::error::{Error, Result};
use crate::ir::{BinOp, ChanKind, Pos, UnOp};
use crate::lex::{Tok, Token, lex};

/// The deepest nesting of statements, or of expressions, that is accepted.
pub const MAX_DEPTH: u32 = 100;

/// The words a program cannot use as names.
pub const KEYWORDS: &[&str] = &[
    "alt", "assert", "break", "channel", "constant", "else", "extern", "external", "false", "if",
    "in", "int", "out", "process", "true", "var", "while",
];

/// Parses a program's source text into its syntax tree.
pub fn parse(src: &str) -> Result<Program> {
    let mut p = Parser::new(lex(src)?, |pos, msg| Error::Syntax { pos, msg });
    p.program()
}

/// A cursor over tokens, shared with the specification parser (which makes
/// its errors [`Error::Spec`]).
pub(crate) struct Parser {
    toks: Vec<Token>,
    i: usize,
    nest: u32,
    err: fn(Pos, String) -> Error,
}

/// Binary operators by precedence level, loosest first.
fn binop(tok: &Tok) -> Option<(u32, ChainOp)> {
    let Tok::Sym(s) = tok else { return None };
    use ChainOp::*;
    Some(match *s {
        "||" => (1, Or),
        "&&" => (2, And),
        "|" => (3, Bin(BinOp::BitOr)),
        "^" => (4, Bin(BinOp::BitXor)),
        "&" => (5, Bin(BinOp::BitAnd)),
        "==" => (6, Bin(BinOp::Eq)),
        "!=" => (6, Bin(BinOp::Ne)),
        "<" => (7, Bin(BinOp::Lt)),
        "<=" => (7, Bin(BinOp::Le)),
        ">" => (7, Bin(BinOp::Gt)),
        ">=" => (7, Bin(BinOp::Ge)),
        "<<" => (8, Bin(BinOp::Shl)),
        ">>" => (8, Bin(BinOp::Shr)),
        "+" => (9, Bin(BinOp::Add)),
        "-" => (9, Bin(BinOp::Sub)),
        "*" => (10, Bin(BinOp::Mul)),
        "/" => (10, Bin(BinOp::Div)),
        "%" => (10, Bin(BinOp::Rem)),
        _ => return None,
    })
}

impl Parser {
    pub(crate) fn new(toks: Vec<Token>, err: fn(Pos, String) -> Error) -> Parser {
        Parser {
            toks,
            i: 0,
            nest: 0,
            err,
        }
    }

    pub(crate) fn error(&self, pos: Pos, msg: impl Into<String>) -> Error {
        (self.err)(pos, msg.into())
    }

    pub(crate) fn peek(&self) -> &Tok {
        &self.toks[self.i.min(self.toks.len() - 1)].tok
    }

    pub(crate) fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.i + k).min(self.toks.len() - 1)].tok
    }

    pub(crate) fn pos(&self) -> Pos {
        self.toks[self.i.min(self.toks.len() - 1)].pos
    }

    pub(crate) fn bump(&mut self) -> Token {
        let t = self.toks[self.i.min(self.toks.len() - 1)].clone();
        if self.i < self.toks.len() - 1 {
            self.i += 1;
        }
        t
    }

    pub(crate) fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    pub(crate) fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(x) if x == w)
    }

    pub(crate) fn eat_sym(&mut self, s: &str) -> bool {
        let yes = self.is_sym(s);
        if yes {
            self.bump();
        }
        yes
    }

    pub(crate) fn eat_word(&mut self, w: &str) -> bool {
        let yes = self.is_word(w);
        if yes {
            self.bump();
        }
        yes
    }

    pub(crate) fn unexpected(&self, wanted: &str) -> Error {
        self.error(
            self.pos(),
            format!("expected {wanted}, found {}", self.peek()),
        )
    }

    pub(crate) fn expect_sym(&mut self, s: &str) -> Result<Pos> {
        let pos = self.pos();
        if self.eat_sym(s) {
            Ok(pos)
        } else {
            Err(self.unexpected(&format!("`{s}`")))
        }
    }

    pub(crate) fn expect_word(&mut self, w: &str) -> Result<Pos> {
        let pos = self.pos();
        if self.eat_word(w) {
            Ok(pos)
        } else {
            Err(self.unexpected(&format!("`{w}`")))
        }
    }

    /// A name that is not a keyword; `what` says what kind of name.
    pub(crate) fn name(&mut self, what: &str) -> Result<Ident> {
        let pos = self.pos();
        match self.peek().clone() {
            Tok::Ident(name) if KEYWORDS.contains(&name.as_str()) => {
                Err(self.error(pos, format!("expected {what}, found keyword `{name}`")))
            }
            Tok::Ident(name) => {
                self.bump();
                Ok(Ident { name, pos })
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn enter(&mut self) -> Result<()> {
        self.nest += 1;
        if self.nest > MAX_DEPTH {
            return Err(self.error(
                self.pos(),
                format!("nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.nest -= 1;
    }

    // ---- programs ---------------------------------------------------------

    fn program(&mut self) -> Result<Program> {
        let mut prog = Program::default();
        loop {
            let pos = self.pos();
            match self.peek() {
                Tok::Eof => return Ok(prog),
                Tok::Ident(w) if w == "channel" => {
                    self.bump();
                    let name = self.name("a channel name")?;
                    let arity = self.types()?;
                    let kind = if self.eat_word("external") {
                        if self.eat_word("in") {
                            ChanKind::ExternalIn
                        } else if self.eat_word("out") {
                            ChanKind::ExternalOut
                        } else {
                            return Err(self.unexpected("`in` or `out` after `external`"));
                        }
                    } else {
                        ChanKind::Internal
                    };
                    self.expect_sym(";")?;
                    prog.channels.push(ChannelDecl {
                        name,
                        arity,
                        kind,
                        pos,
                    });
                }
                Tok::Ident(w) if w == "extern" => {
                    self.bump();
                    let name = self.name("a host function name")?;
                    let arity = self.types()?;
                    self.expect_sym(";")?;
                    prog.externs.push(ExternDecl { name, arity, pos });
                }
                Tok::Ident(w) if w == "process" => {
                    self.bump();
                    prog.processes.push(self.process(pos)?);
                }
                _ => return Err(self.unexpected("`channel`, `extern` or `process`")),
            }
        }
    }

    /// `"(" ["int" ("," "int")*] ")"`: the number of ints.
    fn types(&mut self) -> Result<u32> {
        self.expect_sym("(")?;
        let mut n = 0u32;
        if self.eat_sym(")") {
            return Ok(0);
        }
        loop {
            self.expect_word("int")?;
            n += 1;
            if self.eat_sym(")") {
                return Ok(n);
            }
            if !self.eat_sym(",") {
                return Err(self.unexpected("`,` or `)`"));
            }
        }
    }

    fn process(&mut self, pos: Pos) -> Result<ProcessDecl> {
        let name = self.name("a process name")?;
        self.expect_sym("{")?;
        let mut decls = Vec::new();
        loop {
            if self.eat_word("constant") {
                loop {
                    let c = self.name("a constant name")?;
                    self.expect_sym("=")?;
                    let e = self.expr()?;
                    decls.push(Decl::Constant(c, e));
                    if !self.eat_sym(",") {
                        break;
                    }
                }
                self.expect_sym(";")?;
            } else if self.eat_word("var") {
                loop {
                    decls.push(Decl::Var(self.name("a variable name")?));
                    if !self.eat_sym(",") {
                        break;
                    }
                }
                self.expect_sym(";")?;
            } else {
                break;
            }
        }
        let mut body = Vec::new();
        while !self.is_sym("}") {
            if matches!(self.peek(), Tok::Eof) {
                return Err(self.error(
                    self.pos(),
                    format!("process `{}` is not closed by `}}`", name.name),
                ));
            }
            body.push(self.stmt()?);
        }
        let end = self.expect_sym("}")?;
        Ok(ProcessDecl {
            name,
            pos,
            decls,
            body,
            end,
        })
    }

    // ---- statements -------------------------------------------------------

    fn stmt(&mut self) -> Result<Stmt> {
        self.enter()?;
        let s = self.stmt_inner();
        self.leave();
        s
    }

    fn stmt_inner(&mut self) -> Result<Stmt> {
        let pos = self.pos();
        let kind = match self.peek().clone() {
            Tok::Sym("{") => {
                self.bump();
                StmtKind::Block(self.block_rest()?)
            }
            Tok::Sym(";") => {
                self.bump();
                StmtKind::Empty
            }
            Tok::Label(n) => {
                self.bump();
                StmtKind::Label(n)
            }
            Tok::Ident(w) => match w.as_str() {
                "if" => {
                    self.bump();
                    let cond = self.paren_expr()?;
                    let then = self.stmt()?;
                    let els = if self.eat_word("else") {
                        Some(Box::new(self.stmt()?))
                    } else {
                        None
                    };
                    StmtKind::If(cond, Box::new(then), els)
                }
                "while" => {
                    self.bump();
                    let cond = self.paren_expr()?;
                    StmtKind::While(cond, Box::new(self.stmt()?))
                }
                "break" => {
                    self.bump();
                    self.expect_sym(";")?;
                    StmtKind::Break
                }
                "assert" => {
                    self.bump();
                    let cond = self.paren_expr()?;
                    self.expect_sym(";")?;
                    StmtKind::Assert(cond)
                }
                "in" | "out" => {
                    let c = self.comm()?;
                    self.expect_sym(";")?;
                    StmtKind::Comm(c)
                }
                "alt" => self.alt(pos)?,
                "constant" | "var" => {
                    return Err(self.error(
                        pos,
                        format!("`{w}` declarations must come before the statements of a process"),
                    ));
                }
                "else" => return Err(self.error(pos, "`else` without a matching `if`")),
                _ => self.simple()?,
            },
            _ => return Err(self.unexpected("a statement")),
        };
        Ok(Stmt { kind, pos })
    }

    fn alt(&mut self, pos: Pos) -> Result<StmtKind> {
        self.bump();
        self.expect_sym("{")?;
        let mut arms = Vec::new();
        while !self.eat_sym("}") {
            let pos = self.pos();
            if !(self.is_word("in") || self.is_word("out")) {
                return Err(
                    self.unexpected("an `in(...)` or `out(...)` arm, or `}` closing the `alt`")
                );
            }
            let op = self.comm()?;
            let body = self.stmt()?;
            arms.push(AltArm { op, pos, body });
        }
        if arms.is_empty() {
            return Err(self.error(pos, "an `alt` needs at least one arm"));
        }
        Ok(StmtKind::Alt(arms))
    }

    /// An assignment or a call statement.
    fn simple(&mut self) -> Result<StmtKind> {
        let name = self.name("a statement")?;
        if self.eat_sym("=") {
            let e = self.expr()?;
            self.expect_sym(";")?;
            Ok(StmtKind::Assign(name, e))
        } else if self.is_sym("(") {
            let call = self.call(name)?;
            self.expect_sym(";")?;
            Ok(StmtKind::Eval(call))
        } else {
            Err(self.error(
                self.pos(),
                format!(
                    "expected `=` or `(` after `{}`, found {}",
                    name.name,
                    self.peek()
                ),
            ))
        }
    }

    /// The statements of a block after its `{`, through its `}`.
    fn block_rest(&mut self) -> Result<Vec<Stmt>> {
        let mut body = Vec::new();
        while !self.eat_sym("}") {
            if matches!(self.peek(), Tok::Eof) {
                return Err(self.unexpected("`}`"));
            }
            body.push(self.stmt()?);
        }
        Ok(body)
    }

    fn comm(&mut self) -> Result<Comm> {
        let is_in = self.is_word("in");
        self.bump();
        self.expect_sym("(")?;
        let chan = self.name("a channel name")?;
        let c = if is_in {
            let mut vars = Vec::new();
            while self.eat_sym(",") {
                vars.push(self.name("a variable to receive into")?);
            }
            Comm::In(chan, vars)
        } else {
            let mut args = Vec::new();
            while self.eat_sym(",") {
                args.push(self.expr()?);
            }
            Comm::Out(chan, args)
        };
        if !self.eat_sym(")") {
            return Err(self.unexpected("`,` or `)`"));
        }
        Ok(c)
    }

    fn paren_expr(&mut self) -> Result<Expr> {
        self.expect_sym("(")?;
        let e = self.expr()?;
        self.expect_sym(")")?;
        Ok(e)
    }

    // ---- expressions ------------------------------------------------------

    /// One expression.
    pub(crate) fn expr(&mut self) -> Result<Expr> {
        self.enter()?;
        let e = self.binary(1);
        self.leave();
        e
    }

    fn node(&self, kind: ExprKind, pos: Pos, depth: u32) -> Result<Expr> {
        if depth > MAX_DEPTH {
            return Err(self.error(
                pos,
                format!("expression nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        Ok(Expr { kind, pos, depth })
    }

    /// Operators of precedence `min` and tighter, left-associative. A run
    /// of operators is collected in a loop into one flat [`ExprKind::Chain`]
    /// (only a tighter operator's operand recurses, at most one level per
    /// precedence), so a long chain is not deep nesting.
    fn binary(&mut self, min: u32) -> Result<Expr> {
        let first = self.unary()?;
        let mut links = Vec::new();
        while let Some((prec, op)) = binop(self.peek()) {
            if prec < min {
                break;
            }
            let pos = self.pos();
            self.bump();
            let rhs = self.binary(prec + 1)?;
            links.push(Link { op, pos, rhs });
        }
        let Some(last) = links.last() else {
            return Ok(first);
        };
        let pos = last.pos;
        let depth = 1 + links
            .iter()
            .map(|l| l.rhs.depth)
            .max()
            .unwrap_or(0)
            .max(first.depth);
        self.node(ExprKind::Chain(Box::new(first), links), pos, depth)
    }

    fn unary(&mut self) -> Result<Expr> {
        let pos = self.pos();
        let op = match self.peek() {
            Tok::Sym("-") => UnOp::Neg,
            Tok::Sym("!") => UnOp::Not,
            Tok::Sym("~") => UnOp::BitNot,
            _ => return self.primary(),
        };
        self.bump();
        self.enter()?;
        let a = self.unary();
        self.leave();
        let a = a?;
        let depth = a.depth + 1;
        self.node(ExprKind::Unary(op, Box::new(a)), pos, depth)
    }

    fn primary(&mut self) -> Result<Expr> {
        let pos = self.pos();
        match self.peek().clone() {
            Tok::Int(v) => {
                self.bump();
                self.node(ExprKind::Int(v), pos, 1)
            }
            Tok::Sym("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect_sym(")")?;
                Ok(e)
            }
            Tok::Ident(w) if w == "true" || w == "false" => {
                self.bump();
                self.node(ExprKind::Int((w == "true") as i64), pos, 1)
            }
            Tok::Ident(_) => {
                let name = self.name("an expression")?;
                if self.is_sym("(") {
                    self.call(name)
                } else {
                    self.node(ExprKind::Name(name), pos, 1)
                }
            }
            _ => Err(self.unexpected("an expression")),
        }
    }

    /// `f(args)` after the name `f`.
    fn call(&mut self, f: Ident) -> Result<Expr> {
        self.expect_sym("(")?;
        let mut args = Vec::new();
        if !self.eat_sym(")") {
            loop {
                args.push(self.expr()?);
                if self.eat_sym(")") {
                    break;
                }
                if !self.eat_sym(",") {
                    return Err(self.unexpected("`,` or `)`"));
                }
            }
        }
        let depth = 1 + args.iter().map(|a| a.depth).max().unwrap_or(0);
        let pos = f.pos;
        self.node(ExprKind::Call(f, args), pos, depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr(src: &str) -> Expr {
        let mut p = Parser::new(lex(src).unwrap(), |pos, msg| Error::Syntax { pos, msg });
        p.expr().unwrap()
    }

    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Int(v) => v.to_string(),
            ExprKind::Name(n) => n.name.clone(),
            ExprKind::Unary(op, a) => format!("({op:?} {})", show(a)),
            ExprKind::Chain(first, links) => links.iter().fold(show(first), |acc, l| {
                let rhs = show(&l.rhs);
                match l.op {
                    ChainOp::Bin(op) => format!("({op:?} {acc} {rhs})"),
                    ChainOp::And => format!("(&& {acc} {rhs})"),
                    ChainOp::Or => format!("(|| {acc} {rhs})"),
                }
            }),
            ExprKind::Call(f, args) => format!(
                "{}({})",
                f.name,
                args.iter().map(show).collect::<Vec<_>>().join(",")
            ),
        }
    }

    #[test]
    fn precedence_is_c() {
        assert_eq!(
            show(&expr("a || b && c | d ^ e & f == g < h << i + j * k")),
            "(|| a (&& b (BitOr c (BitXor d (BitAnd e (Eq f (Lt g (Shl h (Add i (Mul j k))))))))))"
        );
        assert_eq!(show(&expr("a - b - c")), "(Sub (Sub a b) c)");
        assert_eq!(
            show(&expr("-a * ~b + !f(1, x)")),
            "(Add (Mul (Neg a) (BitNot b)) (Not f(1,x)))"
        );
        assert_eq!(show(&expr("(a + b) * true")), "(Mul (Add a b) 1)");
    }

    fn on_small_stack(f: impl FnOnce() + Send + 'static) {
        // A panic in `f` makes `join` fail, failing the test.
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap();
    }

    /// The deepest input accepted compiles on a 1 MiB stack, even unoptimized.
    #[test]
    fn the_deepest_accepted_nesting_compiles_on_a_small_stack() {
        let d = MAX_DEPTH as usize - 3;
        for (name, src) in [
            (
                "parens",
                format!(
                    "process P {{ var a; a = {}1{}; }}",
                    "(".repeat(d),
                    ")".repeat(d)
                ),
            ),
            (
                "long",
                format!("process P {{ var a; a = 1{}; }}", " + a".repeat(d)),
            ),
            (
                "blocks",
                format!("process P {{ {}{} }}", "{".repeat(d), "}".repeat(d)),
            ),
            (
                "ifs",
                format!("process P {{ var a; {} a = 1; }}", "if (a) ".repeat(d)),
            ),
            (
                "whiles",
                format!("process P {{ var a; {} a = 1; }}", "while (a) ".repeat(d)),
            ),
            (
                "alts",
                format!(
                    "channel c(int); process P {{ var a; {} }} process Q {{ out(c, 1); }}",
                    "alt { in(c, a) ".repeat(d) + ";" + &"}".repeat(d)
                ),
            ),
            (
                "neg",
                format!("process P {{ var a; a = {}1; }}", "-".repeat(d)),
            ),
            (
                "mixed",
                format!(
                    "process P {{ var a; {} a = {}a{}; }}",
                    "if (a) ".repeat(d / 2),
                    "(".repeat(d / 2),
                    ")".repeat(d / 2)
                ),
            ),
        ] {
            on_small_stack(move || {
                let r = crate::compile(&src);
                assert!(r.is_ok(), "{name}: {r:?}");
            });
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = format!(
            "process P {{ var a; a = {}1{}; }}",
            "(".repeat(5000),
            ")".repeat(5000)
        );
        assert!(
            parse(&deep)
                .unwrap_err()
                .to_string()
                .contains("nested more than")
        );
        // The error names where the limit is crossed (nesting counts the
        // statement and the expression too).
        let e = parse(&deep).unwrap_err().to_string();
        assert!(
            e.starts_with("1:123: syntax error: nested more than 100"),
            "{e}"
        );
        // A left-associative chain is flat, however long.
        let long = format!("process P {{ var a; a = 1{}; }}", " + a".repeat(5000));
        let p = parse(&long).unwrap();
        let StmtKind::Assign(_, e) = &p.processes[0].body[0].kind else {
            panic!("not an assignment");
        };
        let ExprKind::Chain(_, links) = &e.kind else {
            panic!("not a chain");
        };
        assert_eq!((links.len(), e.depth), (5000, 2));
        // Parentheses around a long chain are one level, not 5000.
        let inner = format!("process P {{ var a; a = a * (1{}); }}", " - a".repeat(5000));
        assert!(parse(&inner).is_ok());
        let blocks = format!("process P {{ {} }}", "{".repeat(5000));
        assert!(parse(&blocks).is_err());
        let neg = format!("process P {{ var a; a = {}1; }}", "-".repeat(5000));
        assert!(parse(&neg).is_err());
    }

    #[test]
    fn statements() {
        let p = parse(
            "channel c(int, int) external in; extern f(int);
             process P { constant K = 2, L = K; var a, b; var x;
               if (a) b = 1; else if (b) { } else ;
               while (true) { alt { in(c, a, b) { break; } } #3 }
               f(a); assert(a == 0); #4 }",
        )
        .unwrap();
        assert_eq!(p.channels[0].arity, 2);
        assert_eq!(p.channels[0].kind, ChanKind::ExternalIn);
        assert_eq!(p.externs[0].arity, 1);
        assert_eq!(p.processes[0].decls.len(), 5);
        assert_eq!(p.processes[0].body.len(), 5);
        assert!(matches!(p.processes[0].body[4].kind, StmtKind::Label(4)));
    }

    #[test]
    fn syntax_errors_name_the_place() {
        let e = parse("process P {\n  var a;\n  a = ;\n}").unwrap_err();
        assert_eq!(
            e.to_string(),
            "3:7: syntax error: expected an expression, found `;`"
        );
        let e = parse("process P { a = 1; var b; }").unwrap_err();
        assert!(e.to_string().starts_with("1:20:"), "{e}");
        let e = parse("process in { }").unwrap_err();
        assert_eq!(
            e.to_string(),
            "1:9: syntax error: expected a process name, found keyword `in`"
        );
        let e = parse("process P { alt { } }").unwrap_err();
        assert!(e.to_string().contains("at least one arm"));
        let e = parse("process P { var a; a; }").unwrap_err();
        assert!(e.to_string().contains("expected `=` or `(`"));
    }
}
