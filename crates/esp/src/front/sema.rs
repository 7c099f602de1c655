//! Name resolution, the static checks, and the lowering of the syntax tree
//! ([`crate::ast`]) to the program every backend reads ([`crate::ir`]).
//!
//! Static checks, each an [`Error::Check`] naming line and column:
//! - undeclared names, and names declared twice (channels, host functions
//!   and processes share one namespace; each process's constants and
//!   variables another);
//! - `in`/`out` arity against the channel, call arity against the `extern`;
//! - assigning or receiving into a constant; a constant that is not a
//!   constant expression of earlier constants;
//! - `out` on an `external in` channel, `in` on an `external out` channel
//!   (the host is that channel's only writer, or only reader);
//! - an internal channel used in one direction only (read but never
//!   written, or written but never read);
//! - a process none of whose channel operations can ever complete (no other
//!   process uses any of its channels the other way), or, when the program
//!   has several processes, a process with no channel operation at all:
//!   nothing can ever interact with it (it is unreachable);
//! - `break` outside a loop; a `#N` label used twice in one process.
//!
//! Lowering rules (the invariants of [`crate::ir`]):
//! - constants are folded and take no variable slot; constant
//!   subexpressions are folded (except a division by a constant zero, left
//!   for the run-time error);
//! - every `#N` becomes a `Nop` with `label: Some(N)` where the label is;
//! - `out` arguments that are neither a variable nor a constant are assigned
//!   to temporaries `$t0`, `$t1`, ... by `Assign` nodes just before the
//!   `Comm` (or, in an `alt`, before the `Alt` node); temporaries are
//!   numbered afresh in each statement and shared between statements;
//! - an expression that would be deeper than [`MAX_EXPR_DEPTH`] (a long
//!   chain such as `1 + 1 + ... + 1`) is split: the part evaluated first is
//!   assigned to a temporary by an `Assign` node before the statement's
//!   node (before a `while`'s test, which loops back to it), in evaluation
//!   order, so that no pass over [`ir::Expr`] recurses deeper;
//! - `if` and `while` are `Branch` nodes, except that a `while` whose
//!   condition is a nonzero constant has no node: its body loops back to its
//!   first node (an empty one gets a `Nop` looping to itself);
//! - the entry is node 0; the end of the body is a `Halt` node.

use std::collections::HashMap;

use crate::ast;
use crate::error::{Error, Result};
use crate::ir::{
    self, Arm, ChanKind, Comm, Expr, Node, NodeKind, Operand, Pc, Pos, ProcId, VarInfo,
};

/// Parses, checks and lowers a program.
///
/// ```
/// let p = esp::compile("channel c(int) external out; process P { out(c, 6 * 7); }").unwrap();
/// assert_eq!(p.processes[0].nodes.len(), 2); // the `out` and the `Halt`
/// let e = esp::compile("process P { var a; in(foo, a); }").unwrap_err();
/// assert_eq!(e.to_string(), "1:23: channel `foo` is not declared");
/// ```
pub fn compile(src: &str) -> Result<ir::Program> {
    lower(&crate::parse::parse(src)?)
}

fn check(pos: Pos, msg: impl Into<String>) -> Error {
    Error::Check {
        pos,
        msg: msg.into(),
    }
}

/// What a top-level name is.
#[derive(Copy, Clone)]
pub(crate) enum Global {
    Channel(u32),
    Extern(u32),
    Process,
}

impl Global {
    fn what(self) -> &'static str {
        match self {
            Global::Channel(_) => "a channel",
            Global::Extern(_) => "a host function",
            Global::Process => "a process",
        }
    }
}

/// What a name means inside a process.
#[derive(Copy, Clone)]
pub(crate) enum Local {
    Const(i64),
    Var(u32),
}

/// The names visible in one process: the program's globals and the
/// process's constants and variables. Also used to resolve the predicates
/// of specifications.
pub(crate) struct Scope<'a> {
    program: &'a ir::Program,
    globals: &'a HashMap<String, (Global, Pos)>,
    pub(crate) locals: HashMap<String, (Local, Pos)>,
    /// Where a predicate, not a process body, is being resolved.
    pub(crate) in_spec: bool,
}

/// The top-level names of a lowered program.
pub(crate) fn globals_of(program: &ir::Program) -> HashMap<String, (Global, Pos)> {
    let mut g = HashMap::new();
    for (i, c) in program.channels.iter().enumerate() {
        g.insert(c.name.clone(), (Global::Channel(i as u32), c.pos));
    }
    for (i, e) in program.externs.iter().enumerate() {
        g.insert(e.name.clone(), (Global::Extern(i as u32), e.pos));
    }
    for p in &program.processes {
        g.insert(p.name.clone(), (Global::Process, p.pos));
    }
    g
}

impl<'a> Scope<'a> {
    /// The scope of a lowered process's predicates: its variables (not the
    /// temporaries) and its constants; host calls are refused.
    pub(crate) fn for_predicates(
        program: &'a ir::Program,
        globals: &'a HashMap<String, (Global, Pos)>,
        proc: ProcId,
    ) -> Scope<'a> {
        let mut locals = HashMap::new();
        let process = &program.processes[proc as usize];
        for (i, v) in process.vars.iter().enumerate() {
            if !v.temp {
                locals.insert(v.name.clone(), (Local::Var(i as u32), process.pos));
            }
        }
        for c in program.constants.iter().filter(|c| c.proc == proc) {
            locals.insert(c.name.clone(), (Local::Const(c.value), c.pos));
        }
        Scope {
            program,
            globals,
            locals,
            in_spec: true,
        }
    }
}

/// Checks and lowers a parsed program.
pub fn lower(ast: &ast::Program) -> Result<ir::Program> {
    let mut globals: HashMap<String, (Global, Pos)> = HashMap::new();
    let mut declare = |name: &ast::Ident, g: Global| -> Result<()> {
        if let Some((old, at)) = globals.get(&name.name) {
            return Err(check(
                name.pos,
                format!(
                    "`{}` is already declared as {} at {at}",
                    name.name,
                    old.what()
                ),
            ));
        }
        globals.insert(name.name.clone(), (g, name.pos));
        Ok(())
    };
    // Declarations in source order, so that the second of two is reported.
    let mut decls: Vec<(Pos, &ast::Ident, Global)> = Vec::new();
    decls.extend(
        ast.channels
            .iter()
            .enumerate()
            .map(|(i, c)| (c.pos, &c.name, Global::Channel(i as u32))),
    );
    decls.extend(
        ast.externs
            .iter()
            .enumerate()
            .map(|(i, e)| (e.pos, &e.name, Global::Extern(i as u32))),
    );
    decls.extend(
        ast.processes
            .iter()
            .map(|p| (p.pos, &p.name, Global::Process)),
    );
    decls.sort_by_key(|d| d.0);
    for (_, name, g) in decls {
        declare(name, g)?;
    }

    let mut program = ir::Program {
        channels: ast
            .channels
            .iter()
            .map(|c| ir::Channel {
                name: c.name.name.clone(),
                arity: c.arity,
                kind: c.kind,
                pos: c.pos,
            })
            .collect(),
        externs: ast
            .externs
            .iter()
            .map(|e| ir::Extern {
                name: e.name.name.clone(),
                arity: e.arity,
                pos: e.pos,
            })
            .collect(),
        processes: Vec::new(),
        constants: Vec::new(),
    };

    let mut uses: Vec<Use> = Vec::new();
    let mut constants = Vec::new();
    for (p, decl) in ast.processes.iter().enumerate() {
        let process = {
            let mut scope = Scope {
                program: &program,
                globals: &globals,
                locals: HashMap::new(),
                in_spec: false,
            };
            let mut vars = Vec::new();
            for d in &decl.decls {
                let (name, local) = match d {
                    ast::Decl::Constant(name, e) => {
                        let v = scope.constant(name, e)?;
                        constants.push(ir::Constant {
                            proc: p as ProcId,
                            name: name.name.clone(),
                            value: v,
                            pos: name.pos,
                        });
                        (name, Local::Const(v))
                    }
                    ast::Decl::Var(name) => {
                        vars.push(VarInfo {
                            name: name.name.clone(),
                            temp: false,
                        });
                        (name, Local::Var(vars.len() as u32 - 1))
                    }
                };
                if let Some((_, at)) = scope.locals.get(&name.name) {
                    return Err(check(
                        name.pos,
                        format!(
                            "`{}` is already declared at {at} in process `{}`",
                            name.name, decl.name.name
                        ),
                    ));
                }
                scope.locals.insert(name.name.clone(), (local, name.pos));
            }
            let mut lw = Lowerer {
                scope,
                proc: p as ProcId,
                proc_name: &decl.name.name,
                nodes: Vec::new(),
                vars,
                open: vec![Hole::Entry],
                entry: None,
                breaks: Vec::new(),
                labels: HashMap::new(),
                temps: Vec::new(),
                uses: &mut uses,
            };
            for s in &decl.body {
                lw.stmt(s)?;
            }
            lw.emit(NodeKind::Halt, decl.end, None);
            lw.finish(decl)
        };
        program.processes.push(process);
    }
    program.constants = constants;
    check_channels(&program, &uses)?;
    Ok(program)
}

/// One channel operation in a process, for the whole-program checks.
struct Use {
    proc: ProcId,
    chan: u32,
    is_in: bool,
    pos: Pos,
}

fn check_channels(program: &ir::Program, uses: &[Use]) -> Result<()> {
    let name = |p: ProcId| &program.processes[p as usize].name;
    for (c, chan) in program.channels.iter().enumerate() {
        if chan.kind != ChanKind::Internal {
            continue;
        }
        let c = c as u32;
        let reader = uses.iter().find(|u| u.chan == c && u.is_in);
        let writer = uses.iter().find(|u| u.chan == c && !u.is_in);
        match (reader, writer) {
            (Some(r), None) => {
                return Err(check(
                    r.pos,
                    format!(
                        "channel `{}` is read by process `{}` at {} but no process writes it",
                        chan.name,
                        name(r.proc),
                        r.pos
                    ),
                ));
            }
            (None, Some(w)) => {
                return Err(check(
                    w.pos,
                    format!(
                        "channel `{}` is written by process `{}` at {} but no process reads it",
                        chan.name,
                        name(w.proc),
                        w.pos
                    ),
                ));
            }
            _ => {}
        }
    }
    let many = program.processes.len() > 1;
    for (p, process) in program.processes.iter().enumerate() {
        let p = p as ProcId;
        let mine: Vec<&Use> = uses.iter().filter(|u| u.proc == p).collect();
        if mine.is_empty() {
            if many {
                return Err(check(
                    process.pos,
                    format!(
                        "process `{}` is unreachable: it has no channel operation, so no other process can interact with it",
                        process.name
                    ),
                ));
            }
            continue;
        }
        let can_complete = mine.iter().any(|u| {
            program.channels[u.chan as usize].kind != ChanKind::Internal
                || uses
                    .iter()
                    .any(|v| v.proc != p && v.chan == u.chan && v.is_in != u.is_in)
        });
        if !can_complete {
            let mut chans: Vec<&str> = Vec::new();
            for u in &mine {
                let name = program.channels[u.chan as usize].name.as_str();
                if !chans.contains(&name) {
                    chans.push(name);
                }
            }
            return Err(check(
                process.pos,
                format!(
                    "process `{}` is unreachable: none of its channel operations can ever complete, since no other process uses {} the other way",
                    process.name,
                    chans
                        .iter()
                        .map(|c| format!("`{c}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    Ok(())
}

impl Scope<'_> {
    /// The value of `constant name = e`.
    fn constant(&self, name: &ast::Ident, e: &ast::Expr) -> Result<i64> {
        match self.expr(e, Some(name))? {
            Expr::Const(v) => Ok(v),
            _ => Err(check(
                e.pos,
                format!(
                    "constant `{}` must be a constant expression (it divides by zero)",
                    name.name
                ),
            )),
        }
    }

    /// Resolves and folds an expression that must stay one expression (a
    /// constant or a predicate): one deeper than [`MAX_EXPR_DEPTH`] after
    /// folding is an error. `constant` is set while defining that constant:
    /// variables and calls are then errors.
    pub(crate) fn expr(&self, e: &ast::Expr, constant: Option<&ast::Ident>) -> Result<Expr> {
        Ok(self.lower(e, constant, &mut None)?.0)
    }

    /// Resolves and folds an expression, with its depth. Where the result
    /// would be deeper than [`MAX_EXPR_DEPTH`] (a long chain such as
    /// `1 + 1 + ... + 1`), the part evaluated first is assigned to a
    /// temporary through `hoist`, in evaluation order, and the expression
    /// goes on from that temporary; without `hoist` that is an error.
    fn lower(
        &self,
        e: &ast::Expr,
        constant: Option<&ast::Ident>,
        hoist: &mut Option<&mut Hoist<'_>>,
    ) -> Result<(Expr, u32)> {
        use ast::ExprKind as K;
        let (value, depth) = match &e.kind {
            K::Int(v) => (Expr::Const(*v), 1),
            K::Name(n) => match self.locals.get(&n.name) {
                Some((Local::Const(v), _)) => (Expr::Const(*v), 1),
                Some((Local::Var(v), _)) => {
                    if let Some(c) = constant {
                        return Err(check(
                            n.pos,
                            format!(
                                "constant `{}` cannot use variable `{}`: constants are folded at compile time",
                                c.name, n.name
                            ),
                        ));
                    }
                    (Expr::Var(*v), 1)
                }
                None => return Err(self.undeclared(n, "variable")),
            },
            K::Unary(op, a) => match self.lower(a, constant, hoist)? {
                (Expr::Const(v), _) => (Expr::Const(op.apply(v)), 1),
                (a, d) => (Expr::Unary(*op, Box::new(a)), d + 1),
            },
            K::Chain(first, links) => return self.chain(first, links, constant, hoist),
            K::Call(f, args) => {
                if let Some(c) = constant {
                    return Err(check(
                        f.pos,
                        format!(
                            "constant `{}` cannot call host function `{}`: constants are folded at compile time",
                            c.name, f.name
                        ),
                    ));
                }
                if self.in_spec {
                    return Err(check(
                        f.pos,
                        format!("a predicate cannot call host function `{}`", f.name),
                    ));
                }
                let id = match self.globals.get(&f.name) {
                    Some((Global::Extern(id), _)) => *id,
                    Some((g, at)) => {
                        return Err(check(
                            f.pos,
                            format!(
                                "`{}` is {} (declared at {at}), not a host function",
                                f.name,
                                g.what()
                            ),
                        ));
                    }
                    None => {
                        return Err(check(
                            f.pos,
                            format!(
                                "host function `{}` is not declared (declare it with `extern {}(int, ...);`)",
                                f.name, f.name
                            ),
                        ));
                    }
                };
                let arity = self.program.externs[id as usize].arity;
                if args.len() != arity as usize {
                    return Err(check(
                        f.pos,
                        format!(
                            "host function `{}` takes {arity} argument{}, but {} {} given",
                            f.name,
                            plural(arity as usize),
                            args.len(),
                            if args.len() == 1 { "is" } else { "are" }
                        ),
                    ));
                }
                let mut values: Vec<Expr> = Vec::with_capacity(args.len());
                let mut depth = 0;
                for a in args {
                    let mark = hoisted(hoist);
                    let (v, d) = self.lower(a, constant, hoist)?;
                    if hoisted(hoist) > mark {
                        // This argument's hoisted parts run before it: the
                        // arguments to its left must be evaluated before
                        // them.
                        if let Some(h) = hoist.as_deref_mut() {
                            let earlier = values.iter_mut().filter(|v| !trivial(v));
                            for (at, earlier) in (mark..).zip(earlier) {
                                let t = (h.temp)();
                                let value = std::mem::replace(earlier, Expr::Var(t));
                                h.pre.insert(at, (t, value));
                            }
                            depth = values.iter().map(depth_of).max().unwrap_or(0);
                        }
                    }
                    depth = depth.max(d);
                    values.push(v);
                }
                (Expr::Call(id, values), depth + 1)
            }
        };
        self.bound(value, depth, e.pos, hoist)
    }

    /// `value` as it is when at most [`MAX_EXPR_DEPTH`] deep, else assigned
    /// to a new temporary.
    fn bound(
        &self,
        value: Expr,
        depth: u32,
        pos: Pos,
        hoist: &mut Option<&mut Hoist<'_>>,
    ) -> Result<(Expr, u32)> {
        if depth <= MAX_EXPR_DEPTH {
            return Ok((value, depth));
        }
        match hoist.as_deref_mut() {
            Some(h) => {
                let t = (h.temp)();
                h.pre.push((t, value));
                Ok((Expr::Var(t), 1))
            }
            None => Err(too_deep(pos)),
        }
    }

    /// A chain `first op rhs op rhs ...`, folded left to right in a loop.
    /// Whenever the accumulated expression would grow deeper than
    /// [`MAX_EXPR_DEPTH`] it is assigned to the chain's temporary (one per
    /// chain, reassigned), so a chain of any length lowers to a sequence of
    /// bounded assignments.
    fn chain(
        &self,
        first: &ast::Expr,
        links: &[ast::Link],
        constant: Option<&ast::Ident>,
        hoist: &mut Option<&mut Hoist<'_>>,
    ) -> Result<(Expr, u32)> {
        let (mut acc, mut depth) = self.lower(first, constant, hoist)?;
        let mut acc_temp: Option<u32> = None;
        for link in links {
            let mark = hoisted(hoist);
            let (rhs, rd) = self.lower(&link.rhs, constant, hoist)?;
            if hoisted(hoist) > mark
                && let Some(h) = hoist.as_deref_mut()
            {
                // The right operand's hoisted parts run first: the left
                // operand is evaluated before them.
                let mut start = mark;
                if !trivial(&acc) {
                    let t = *acc_temp.get_or_insert_with(|| (h.temp)());
                    let value = std::mem::replace(&mut acc, Expr::Var(t));
                    h.pre.insert(mark, (t, value));
                    depth = 1;
                    start += 1;
                }
                // `&&` and `||` evaluate their right operand only
                // sometimes; the hoisted parts run always, which is
                // unobservable only when they call nothing and cannot
                // fault.
                let effects = h.pre[start..]
                    .iter()
                    .any(|(_, v)| v.has_call() || v.may_fault());
                if effects && matches!(link.op, ast::ChainOp::And | ast::ChainOp::Or) {
                    return Err(check(
                        link.pos,
                        format!(
                            "the right operand of `{}` is nested more than {MAX_EXPR_DEPTH} operators deep and calls a host function or divides: it cannot be evaluated only when needed; compute it in an `if` first",
                            if link.op == ast::ChainOp::And {
                                "&&"
                            } else {
                                "||"
                            }
                        ),
                    ));
                }
            }
            let value = fold(link.op, acc, rhs);
            let d = if matches!(value, Expr::Const(_)) {
                1
            } else {
                1 + depth.max(rd)
            };
            (acc, depth) = self.bound_in(value, d, link.pos, hoist, &mut acc_temp)?;
        }
        Ok((acc, depth))
    }

    /// [`Scope::bound`] for a chain, reusing the chain's temporary.
    fn bound_in(
        &self,
        value: Expr,
        depth: u32,
        pos: Pos,
        hoist: &mut Option<&mut Hoist<'_>>,
        acc_temp: &mut Option<u32>,
    ) -> Result<(Expr, u32)> {
        if depth <= MAX_EXPR_DEPTH {
            return Ok((value, depth));
        }
        match hoist.as_deref_mut() {
            Some(h) => {
                let t = *acc_temp.get_or_insert_with(|| (h.temp)());
                h.pre.push((t, value));
                Ok((Expr::Var(t), 1))
            }
            None => Err(too_deep(pos)),
        }
    }

    fn undeclared(&self, n: &ast::Ident, what: &str) -> Error {
        if let Some((local, at)) = self.locals.get(&n.name) {
            let is = match local {
                Local::Const(_) => "a constant",
                Local::Var(_) => "a variable",
            };
            return check(
                n.pos,
                format!("`{}` is {is} (declared at {at}), not a {what}", n.name),
            );
        }
        match self.globals.get(&n.name) {
            Some((g, at)) => check(
                n.pos,
                format!(
                    "`{}` is {} (declared at {at}), not a {what}",
                    n.name,
                    g.what()
                ),
            ),
            None => check(n.pos, format!("{what} `{}` is not declared", n.name)),
        }
    }

    /// The channel a name refers to.
    fn channel(&self, n: &ast::Ident) -> Result<u32> {
        match self.globals.get(&n.name) {
            Some((Global::Channel(c), _)) => Ok(*c),
            _ => Err(self.undeclared(n, "channel")),
        }
    }
}

/// The deepest expression a node holds after lowering: deeper ones (long
/// chains) are split into assignments to temporaries, so that every pass
/// over [`ir::Expr`] recurses at most this deep.
pub const MAX_EXPR_DEPTH: u32 = crate::parse::MAX_DEPTH;

/// Where the lowering of one statement puts the assignments it hoists out
/// of an expression that would be too deep: `(temporary, value)` pairs, in
/// the order they must run, all before the statement's own node.
pub(crate) struct Hoist<'b> {
    pre: &'b mut Vec<(u32, Expr)>,
    temp: &'b mut dyn FnMut() -> u32,
}

/// How many assignments have been hoisted so far.
fn hoisted(hoist: &Option<&mut Hoist<'_>>) -> usize {
    hoist.as_ref().map_or(0, |h| h.pre.len())
}

/// A value that no hoisted assignment can change (hoisted assignments write
/// only fresh temporaries).
fn trivial(e: &Expr) -> bool {
    matches!(e, Expr::Const(_) | Expr::Var(_))
}

/// The depth of a lowered expression (bounded by [`MAX_EXPR_DEPTH`] + 1).
fn depth_of(e: &Expr) -> u32 {
    match e {
        Expr::Const(_) | Expr::Var(_) => 1,
        Expr::Unary(_, a) => 1 + depth_of(a),
        Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            1 + depth_of(a).max(depth_of(b))
        }
        Expr::Call(_, args) => 1 + args.iter().map(depth_of).max().unwrap_or(0),
    }
}

fn too_deep(pos: Pos) -> Error {
    check(
        pos,
        format!(
            "expression nested more than {MAX_EXPR_DEPTH} operators deep: only a statement can hold one that long (it is split into steps); a constant or a fast-path predicate cannot"
        ),
    )
}

/// `a op b`, with constants folded (a division by a constant zero is left
/// for the run-time error).
fn fold(op: ast::ChainOp, a: Expr, b: Expr) -> Expr {
    use ast::ChainOp as O;
    match (op, a, b) {
        (O::Bin(op), Expr::Const(x), Expr::Const(y)) if op.apply(x, y).is_some() => {
            Expr::Const(op.apply(x, y).unwrap_or(0))
        }
        (O::Bin(op), a, b) => Expr::Binary(op, Box::new(a), Box::new(b)),
        (O::And, Expr::Const(0), _) => Expr::Const(0),
        (O::And, Expr::Const(_), Expr::Const(y)) => Expr::Const((y != 0) as i64),
        (O::And, a, b) => Expr::And(Box::new(a), Box::new(b)),
        (O::Or, Expr::Const(x), _) if x != 0 => Expr::Const(1),
        (O::Or, Expr::Const(_), Expr::Const(y)) => Expr::Const((y != 0) as i64),
        (O::Or, a, b) => Expr::Or(Box::new(a), Box::new(b)),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// An edge still to be pointed at the next node created.
#[derive(Copy, Clone)]
enum Hole {
    Entry,
    Next(Pc),
    Then(Pc),
    Else(Pc),
    Arm(Pc, usize),
}

/// Placeholder target of an edge not yet patched.
const UNSET: Pc = Pc::MAX;

struct Lowerer<'a> {
    scope: Scope<'a>,
    proc: ProcId,
    proc_name: &'a str,
    nodes: Vec<Node>,
    vars: Vec<VarInfo>,
    /// Edges that lead to the next node created.
    open: Vec<Hole>,
    entry: Option<Pc>,
    /// For each enclosing loop, the edges its `break`s leave by.
    breaks: Vec<Vec<Hole>>,
    labels: HashMap<u32, Pos>,
    /// The variable of each temporary `$tN`.
    temps: Vec<u32>,
    uses: &'a mut Vec<Use>,
}

impl Lowerer<'_> {
    fn patch(&mut self, hole: Hole, to: Pc) {
        let n = |pc: Pc| pc as usize;
        match hole {
            Hole::Entry => self.entry = Some(to),
            Hole::Next(pc) => match &mut self.nodes[n(pc)].kind {
                NodeKind::Assign { next, .. }
                | NodeKind::Eval { next, .. }
                | NodeKind::Nop { next }
                | NodeKind::Assert { next, .. }
                | NodeKind::Comm { next, .. } => *next = to,
                NodeKind::Branch { .. } | NodeKind::Alt { .. } | NodeKind::Halt => {}
            },
            Hole::Then(pc) => {
                if let NodeKind::Branch { then, .. } = &mut self.nodes[n(pc)].kind {
                    *then = to;
                }
            }
            Hole::Else(pc) => {
                if let NodeKind::Branch { els, .. } = &mut self.nodes[n(pc)].kind {
                    *els = to;
                }
            }
            Hole::Arm(pc, i) => {
                if let NodeKind::Alt { arms } = &mut self.nodes[n(pc)].kind {
                    arms[i].next = to;
                }
            }
        }
    }

    /// Adds a node, points every open edge at it, and returns its pc. For
    /// nodes with a single `next`, that edge becomes the open one.
    fn emit(&mut self, kind: NodeKind, pos: Pos, label: Option<u32>) -> Pc {
        let pc = self.nodes.len() as Pc;
        let single = matches!(
            kind,
            NodeKind::Assign { .. }
                | NodeKind::Eval { .. }
                | NodeKind::Nop { .. }
                | NodeKind::Assert { .. }
                | NodeKind::Comm { .. }
        );
        self.nodes.push(Node { kind, pos, label });
        for h in std::mem::take(&mut self.open) {
            self.patch(h, pc);
        }
        if single {
            self.open.push(Hole::Next(pc));
        }
        pc
    }

    fn temp(&mut self, k: usize) -> u32 {
        temp(&mut self.vars, &mut self.temps, k)
    }

    /// Lowers an expression of the current statement; the assignments it
    /// hoists (see [`Scope::lower`]) go to `pre`, into temporaries numbered
    /// from `*k`.
    fn value(&mut self, e: &ast::Expr, k: &mut usize, pre: &mut Vec<(u32, Expr)>) -> Result<Expr> {
        let Lowerer {
            scope, vars, temps, ..
        } = self;
        let mut next = || {
            let t = temp(vars, temps, *k);
            *k += 1;
            t
        };
        let mut hoist = Hoist {
            pre,
            temp: &mut next,
        };
        Ok(scope.lower(e, None, &mut Some(&mut hoist))?.0)
    }

    /// Lowers a statement's one expression and emits what it hoisted.
    fn emit_value(&mut self, e: &ast::Expr, pos: Pos) -> Result<Expr> {
        let mut pre = Vec::new();
        let value = self.value(e, &mut 0, &mut pre)?;
        self.emit_pre(pre, pos);
        Ok(value)
    }

    /// `Assign` nodes for hoisted `(temporary, value)` pairs.
    fn emit_pre(&mut self, pre: Vec<(u32, Expr)>, pos: Pos) {
        for (var, value) in pre {
            self.emit(
                NodeKind::Assign {
                    var,
                    value,
                    next: UNSET,
                },
                pos,
                None,
            );
        }
    }

    fn var_target(&self, n: &ast::Ident, doing: &str) -> Result<u32> {
        match self.scope.locals.get(&n.name) {
            Some((Local::Var(v), _)) => Ok(*v),
            Some((Local::Const(_), at)) => Err(check(
                n.pos,
                format!("cannot {doing} constant `{}` (declared at {at})", n.name),
            )),
            None => Err(self.scope.undeclared(n, "variable")),
        }
    }

    /// Resolves a channel operation; out-arguments that need evaluating
    /// become `(temp, value)` assignments numbered from `*k`.
    fn comm(
        &mut self,
        op: &ast::Comm,
        pos: Pos,
        k: &mut usize,
        pre: &mut Vec<(u32, Expr)>,
    ) -> Result<Comm> {
        let name = op.chan();
        let chan = self.scope.channel(name)?;
        let info = &self.scope.program.channels[chan as usize];
        let is_in = matches!(op, ast::Comm::In(..));
        let (n, dir) = match op {
            ast::Comm::In(_, vs) => (vs.len(), "in"),
            ast::Comm::Out(_, es) => (es.len(), "out"),
        };
        match (info.kind, is_in) {
            (ChanKind::ExternalIn, false) => {
                return Err(check(
                    name.pos,
                    format!(
                        "channel `{}` is external in: the host is its only writer, so process `{}` cannot `out` on it",
                        info.name, self.proc_name
                    ),
                ));
            }
            (ChanKind::ExternalOut, true) => {
                return Err(check(
                    name.pos,
                    format!(
                        "channel `{}` is external out: the host is its only reader, so process `{}` cannot `in` from it",
                        info.name, self.proc_name
                    ),
                ));
            }
            _ => {}
        }
        if n != info.arity as usize {
            return Err(check(
                name.pos,
                format!(
                    "channel `{}` carries {} field{} (declared at {}), but this `{dir}` has {n}",
                    info.name,
                    info.arity,
                    plural(info.arity as usize),
                    info.pos
                ),
            ));
        }
        self.uses.push(Use {
            proc: self.proc,
            chan,
            is_in,
            pos,
        });
        Ok(match op {
            ast::Comm::In(_, vs) => {
                let vars = vs
                    .iter()
                    .map(|v| self.var_target(v, "receive into"))
                    .collect::<Result<Vec<_>>>()?;
                Comm::In { chan, vars }
            }
            ast::Comm::Out(_, es) => {
                let mut args = Vec::with_capacity(es.len());
                for e in es {
                    args.push(match self.value(e, k, pre)? {
                        Expr::Var(v) => Operand::Var(v),
                        Expr::Const(c) => Operand::Const(c),
                        value => {
                            let t = self.temp(*k);
                            *k += 1;
                            pre.push((t, value));
                            Operand::Var(t)
                        }
                    });
                }
                Comm::Out { chan, args }
            }
        })
    }

    fn stmt(&mut self, s: &ast::Stmt) -> Result<()> {
        use ast::StmtKind as S;
        match &s.kind {
            S::Assign(target, e) => {
                let var = self.var_target(target, "assign to")?;
                let value = self.emit_value(e, s.pos)?;
                self.emit(
                    NodeKind::Assign {
                        var,
                        value,
                        next: UNSET,
                    },
                    s.pos,
                    None,
                );
            }
            S::Eval(e) => {
                let value = self.emit_value(e, s.pos)?;
                self.emit(NodeKind::Eval { value, next: UNSET }, s.pos, None);
            }
            S::If(cond, then, els) => {
                let cond = self.emit_value(cond, s.pos)?;
                let b = self.emit(
                    NodeKind::Branch {
                        cond,
                        then: UNSET,
                        els: UNSET,
                    },
                    s.pos,
                    None,
                );
                self.open = vec![Hole::Then(b)];
                self.stmt(then)?;
                let after_then = std::mem::replace(&mut self.open, vec![Hole::Else(b)]);
                if let Some(els) = els {
                    self.stmt(els)?;
                }
                self.open.extend(after_then);
            }
            S::While(cond, body) => {
                // The condition's hoisted steps run on every test: the loop
                // goes back to the first of them.
                let mut pre = Vec::new();
                let cond = self.value(cond, &mut 0, &mut pre)?;
                let test = self.nodes.len() as Pc;
                self.emit_pre(pre, s.pos);
                self.breaks.push(Vec::new());
                if matches!(cond, Expr::Const(c) if c != 0) {
                    let start = self.nodes.len() as Pc;
                    self.stmt(body)?;
                    if self.nodes.len() as Pc == start {
                        self.emit(NodeKind::Nop { next: UNSET }, s.pos, None);
                    }
                    for h in std::mem::take(&mut self.open) {
                        self.patch(h, start);
                    }
                    self.open = self.breaks.pop().unwrap_or_default();
                } else {
                    let b = self.emit(
                        NodeKind::Branch {
                            cond,
                            then: UNSET,
                            els: UNSET,
                        },
                        s.pos,
                        None,
                    );
                    self.open = vec![Hole::Then(b)];
                    self.stmt(body)?;
                    for h in std::mem::take(&mut self.open) {
                        self.patch(h, test);
                    }
                    self.open = self.breaks.pop().unwrap_or_default();
                    self.open.push(Hole::Else(b));
                }
            }
            S::Break => {
                let open = std::mem::take(&mut self.open);
                match self.breaks.last_mut() {
                    Some(b) => b.extend(open),
                    None => return Err(check(s.pos, "`break` outside a loop")),
                }
            }
            S::Block(body) => {
                for s in body {
                    self.stmt(s)?;
                }
            }
            S::Empty => {}
            S::Comm(op) => {
                let mut pre = Vec::new();
                let op = self.comm(op, s.pos, &mut 0, &mut pre)?;
                self.emit_pre(pre, s.pos);
                self.emit(NodeKind::Comm { op, next: UNSET }, s.pos, None);
            }
            S::Alt(arms) => {
                let mut pre = Vec::new();
                let mut k = 0;
                let mut ops = Vec::with_capacity(arms.len());
                for arm in arms {
                    let op = self.comm(&arm.op, arm.pos, &mut k, &mut pre)?;
                    ops.push(Arm {
                        op,
                        next: UNSET,
                        pos: arm.pos,
                    });
                }
                self.emit_pre(pre, s.pos);
                let alt = self.emit(NodeKind::Alt { arms: ops }, s.pos, None);
                let mut ends = Vec::new();
                for (i, arm) in arms.iter().enumerate() {
                    self.open = vec![Hole::Arm(alt, i)];
                    self.stmt(&arm.body)?;
                    ends.append(&mut self.open);
                }
                self.open = ends;
            }
            S::Assert(cond) => {
                let cond = self.emit_value(cond, s.pos)?;
                self.emit(NodeKind::Assert { cond, next: UNSET }, s.pos, None);
            }
            S::Label(n) => {
                if let Some(at) = self.labels.get(n) {
                    return Err(check(
                        s.pos,
                        format!(
                            "label #{n} is already used at {at} in process `{}`",
                            self.proc_name
                        ),
                    ));
                }
                self.labels.insert(*n, s.pos);
                self.emit(NodeKind::Nop { next: UNSET }, s.pos, Some(*n));
            }
        }
        Ok(())
    }

    /// The lowered process, its entry moved to node 0.
    fn finish(self, decl: &ast::ProcessDecl) -> ir::Process {
        let mut nodes = self.nodes;
        let entry = self.entry.unwrap_or(0);
        if entry != 0 {
            let swap = |pc: &mut Pc| {
                if *pc == 0 {
                    *pc = entry;
                } else if *pc == entry {
                    *pc = 0;
                }
            };
            nodes.swap(0, entry as usize);
            for node in &mut nodes {
                for_each_target(&mut node.kind, &mut |pc| swap(pc));
            }
        }
        ir::Process {
            name: decl.name.name.clone(),
            vars: self.vars,
            nodes,
            entry: 0,
            pos: decl.pos,
        }
    }
}

/// The variable of temporary `$tk`, created if needed.
fn temp(vars: &mut Vec<VarInfo>, temps: &mut Vec<u32>, k: usize) -> u32 {
    while temps.len() <= k {
        let name = format!("$t{}", temps.len());
        vars.push(VarInfo { name, temp: true });
        temps.push(vars.len() as u32 - 1);
    }
    temps[k]
}

fn for_each_target(kind: &mut NodeKind, f: &mut dyn FnMut(&mut Pc)) {
    match kind {
        NodeKind::Assign { next, .. }
        | NodeKind::Eval { next, .. }
        | NodeKind::Nop { next }
        | NodeKind::Assert { next, .. }
        | NodeKind::Comm { next, .. } => f(next),
        NodeKind::Branch { then, els, .. } => {
            f(then);
            f(els);
        }
        NodeKind::Alt { arms } => arms.iter_mut().for_each(|a| f(&mut a.next)),
        NodeKind::Halt => {}
    }
}
