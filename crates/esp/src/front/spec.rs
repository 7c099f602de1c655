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
    /// How symbolic execution schedules the processes: the default policy
    /// of §3 (with the elements' `yield`s), or `schedule downstream;`.
    pub schedule: Schedule,
}

/// How symbolic execution picks the running process: a fast path follows
/// the one its specification names ([`FastPath::schedule`]), the automaton
/// the one of its options (`ExploreOptions::automaton_schedule` in
/// [`crate::explore`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// The default policy (§3): a FIFO ready list, the running process
    /// continues until it blocks, the reader of a rendezvous continues.
    /// The control state includes the ready list's order, and on a chain
    /// of filters whose rates depend on the data the product of the
    /// processes' positions is large (programs 3 and 4 of Table 1 have
    /// over a million control states).
    Fifo,
    /// The ready process declared last runs, preempting the running one at
    /// a statement boundary when a later-declared process becomes ready.
    /// Any interleaving at statement boundaries is an execution of the
    /// program (a process's local statements touch only its own variables),
    /// so this is as legal as the default; on a chain declared from source
    /// to sink it drains each message through the chain before the source
    /// reads the next, which keeps the control states few (thousands for
    /// programs 3 and 4). The automaton's default: it is the schedule of
    /// Proebsting and Watterson's filter fusion, where the consumer pulls.
    #[default]
    DownstreamFirst,
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

// ---- the parser -------------------------------------------------------------
//
// ```text
// file     := fastpath*
// fastpath := "fastpath" NAME "{" ["schedule" ("fifo" | "downstream") ";"] proc* "}"
// proc     := "process" NAME "{" field* "}"
// field    := "statement" decl ("," decl)* ";"
//           | "start" element ";" | "follows" regex ";" | "exit" element ";"
// decl     := stmt ["as" NAME]
// stmt     := CHANNEL | "#" N | ALIAS
// element  := stmt ["?" "(" expr ")"] ["<=>" stmt] ["yield" PROCESS]
// regex    := seq ("|" seq)*
// seq      := postfix postfix*
// postfix  := atom ("*" | "+" | "?")*
// atom     := element | "(" regex ")"
// ```
//
// `?` directly after an element's statement and followed by `(` is a
// predicate; anywhere else (after `)`, after a partner or a `yield`, or not
// followed by `(`) it is the optional operator.

use std::collections::HashMap;

use crate::ast;
use crate::error::{Error, Result};
use crate::ir::{Comm, NodeKind, Program};
use crate::lex::{Tok, lex};
use crate::parse::{MAX_DEPTH, Parser};
use crate::sema::{Scope, globals_of};

/// Parses a specification file and resolves it against `program`: process,
/// channel and alias names, `#N` labels, predicates over each process's
/// variables and constants, `<=>` partners and `yield` targets.
///
/// ```
/// let program = esp::compile(
///     "channel c(int); channel o(int) external out;
///      process P { var a; while (true) { a = a + 1; out(c, a); } }
///      process Q { var b; while (true) { in(c, b); out(o, b); #1 } }",
/// ).unwrap();
/// let spec = esp::spec::parse(
///     "fastpath f {
///        process P { statement c as W; start W ? (a < 100); follows W*; }
///        process Q { statement c, #1; start c <=> W; exit #1; }
///      }",
///     &program,
/// ).unwrap();
/// assert_eq!(spec.fastpaths[0].procs.len(), 2);
/// let e = esp::spec::parse("fastpath f { process P { start d; } }", &program).unwrap_err();
/// assert_eq!(e.to_string(), "1:32: fast-path specification: `d` is neither a channel nor an alias of fast path `f`");
/// ```
pub fn parse(src: &str, program: &Program) -> Result<Spec> {
    let toks = lex(src).map_err(|e| match e {
        Error::Syntax { pos, msg } => Error::Spec { pos, msg },
        e => e,
    })?;
    let mut p = Parser::new(toks, |pos, msg| Error::Spec { pos, msg });
    let mut raw = Vec::new();
    loop {
        if matches!(p.peek(), Tok::Eof) {
            break;
        }
        raw.push(fastpath(&mut p)?);
    }
    let globals = globals_of(program);
    let mut fastpaths: Vec<FastPath> = Vec::new();
    for fp in &raw {
        if let Some(old) = fastpaths.iter().find(|f| f.name == fp.name.name) {
            return Err(spec_err(
                fp.name.pos,
                format!(
                    "fast path `{}` is already defined at {}",
                    fp.name.name, old.pos
                ),
            ));
        }
        fastpaths.push(
            Resolver {
                program,
                globals: &globals,
                fp,
                aliases: HashMap::new(),
            }
            .run()?,
        );
    }
    Ok(Spec { fastpaths })
}

fn spec_err(pos: Pos, msg: impl Into<String>) -> Error {
    Error::Spec {
        pos,
        msg: msg.into(),
    }
}

/// A statement as written: a name (channel or alias) or a `#N` label.
#[derive(Clone, Debug)]
enum RawStmt {
    Name(ast::Ident),
    Label(u32, Pos),
}

impl RawStmt {
    fn pos(&self) -> Pos {
        match self {
            RawStmt::Name(n) => n.pos,
            RawStmt::Label(_, pos) => *pos,
        }
    }

    fn show(&self) -> String {
        match self {
            RawStmt::Name(n) => n.name.clone(),
            RawStmt::Label(n, _) => format!("#{n}"),
        }
    }
}

#[derive(Clone, Debug)]
struct RawElement {
    stmt: RawStmt,
    pred: Option<ast::Expr>,
    partner: Option<RawStmt>,
    yield_to: Option<ast::Ident>,
}

#[derive(Clone, Debug)]
enum RawRegex {
    Elem(RawElement),
    Seq(Vec<RawRegex>),
    Alt(Vec<RawRegex>),
    Star(Box<RawRegex>),
    Plus(Box<RawRegex>),
    Opt(Box<RawRegex>),
}

struct RawProc {
    name: ast::Ident,
    pos: Pos,
    stmts: Vec<(RawStmt, Option<ast::Ident>)>,
    start: Option<RawElement>,
    follows: Option<RawRegex>,
    exit: Option<RawElement>,
}

struct RawFastPath {
    name: ast::Ident,
    pos: Pos,
    /// `schedule downstream;`, and where it is written.
    downstream: Option<Pos>,
    procs: Vec<RawProc>,
}

fn fastpath(p: &mut Parser) -> Result<RawFastPath> {
    let pos = p.pos();
    if !p.eat_word("fastpath") {
        return Err(p.unexpected("`fastpath`"));
    }
    let name = p.name("a fast-path name")?;
    p.expect_sym("{")?;
    let mut downstream = None;
    let at = p.pos();
    if p.eat_word("schedule") {
        if p.eat_word("downstream") {
            downstream = Some(at);
        } else if !p.eat_word("fifo") {
            return Err(p.unexpected("`fifo` or `downstream` after `schedule`"));
        }
        p.expect_sym(";")?;
    }
    let mut procs = Vec::new();
    while !p.eat_sym("}") {
        let pos = p.pos();
        if !p.eat_word("process") {
            return Err(p.unexpected("`process` or `}`"));
        }
        procs.push(process(p, pos)?);
    }
    Ok(RawFastPath {
        name,
        pos,
        downstream,
        procs,
    })
}

fn process(p: &mut Parser, pos: Pos) -> Result<RawProc> {
    let name = p.name("a process name")?;
    p.expect_sym("{")?;
    let mut rp = RawProc {
        name,
        pos,
        stmts: Vec::new(),
        start: None,
        follows: None,
        exit: None,
    };
    while !p.eat_sym("}") {
        let at = p.pos();
        let field = match p.peek() {
            Tok::Ident(w) if ["statement", "start", "follows", "exit"].contains(&w.as_str()) => {
                w.clone()
            }
            _ => return Err(p.unexpected("`statement`, `start`, `follows`, `exit` or `}`")),
        };
        p.bump();
        let twice = |what: &str| {
            spec_err(
                at,
                format!("process `{}` has a second `{what}` field", rp.name.name),
            )
        };
        match field.as_str() {
            "statement" => loop {
                let s = stmt(p)?;
                let alias = if p.eat_word("as") {
                    Some(p.name("an alias name")?)
                } else {
                    None
                };
                rp.stmts.push((s, alias));
                if p.eat_sym(";") {
                    break;
                }
                if !p.eat_sym(",") {
                    return Err(p.unexpected("`,` or `;`"));
                }
            },
            "start" => {
                if rp.start.is_some() {
                    return Err(twice("start"));
                }
                rp.start = Some(element(p)?);
                p.expect_sym(";")?;
            }
            "exit" => {
                if rp.exit.is_some() {
                    return Err(twice("exit"));
                }
                rp.exit = Some(element(p)?);
                p.expect_sym(";")?;
            }
            _ => {
                if rp.follows.is_some() {
                    return Err(twice("follows"));
                }
                rp.follows = Some(regex(p, 0)?.0);
                p.expect_sym(";")?;
            }
        }
    }
    Ok(rp)
}

fn stmt(p: &mut Parser) -> Result<RawStmt> {
    let pos = p.pos();
    if let Tok::Label(n) = p.peek() {
        let n = *n;
        p.bump();
        return Ok(RawStmt::Label(n, pos));
    }
    match p.peek() {
        Tok::Ident(_) => Ok(RawStmt::Name(
            p.name("a statement: a channel name, an alias or `#N`")?,
        )),
        _ => Err(p.unexpected("a statement: a channel name, an alias or `#N`")),
    }
}

fn element(p: &mut Parser) -> Result<RawElement> {
    let stmt = stmt(p)?;
    let pred = if p.is_sym("?") && matches!(p.peek_at(1), Tok::Sym("(")) {
        p.bump();
        p.bump();
        let e = p.expr()?;
        p.expect_sym(")")?;
        Some(e)
    } else {
        None
    };
    let partner = if p.eat_sym("<=>") {
        Some(self::stmt(p)?)
    } else {
        None
    };
    let yield_to = if p.eat_word("yield") {
        Some(p.name("a process name after `yield`")?)
    } else {
        None
    };
    Ok(RawElement {
        stmt,
        pred,
        partner,
        yield_to,
    })
}

/// A regex and its nesting depth (bounded by [`MAX_DEPTH`]).
fn regex(p: &mut Parser, depth: u32) -> Result<(RawRegex, u32)> {
    if depth > MAX_DEPTH {
        return Err(spec_err(
            p.pos(),
            format!("path expression nested more than {MAX_DEPTH} levels deep"),
        ));
    }
    let mut alts = vec![seq(p, depth)?];
    while p.eat_sym("|") {
        alts.push(seq(p, depth)?);
    }
    let d = alts.iter().map(|a| a.1).max().unwrap_or(0) + 1;
    Ok(if alts.len() == 1 {
        alts.pop().unwrap_or((RawRegex::Seq(Vec::new()), 0))
    } else {
        (RawRegex::Alt(alts.into_iter().map(|a| a.0).collect()), d)
    })
}

fn seq(p: &mut Parser, depth: u32) -> Result<(RawRegex, u32)> {
    let mut items = Vec::new();
    loop {
        let end = matches!(p.peek(), Tok::Sym("|" | ")" | ";") | Tok::Eof);
        if end {
            break;
        }
        items.push(postfix(p, depth)?);
    }
    if items.is_empty() {
        return Err(p.unexpected("a statement element or `(`"));
    }
    let d = items.iter().map(|a| a.1).max().unwrap_or(0) + 1;
    Ok(if items.len() == 1 {
        items.pop().unwrap_or((RawRegex::Seq(Vec::new()), 0))
    } else {
        (RawRegex::Seq(items.into_iter().map(|a| a.0).collect()), d)
    })
}

fn postfix(p: &mut Parser, depth: u32) -> Result<(RawRegex, u32)> {
    let (mut r, mut d) = if p.eat_sym("(") {
        let r = regex(p, depth + 1)?;
        p.expect_sym(")")?;
        r
    } else {
        (RawRegex::Elem(element(p)?), 1)
    };
    loop {
        let wrap: fn(Box<RawRegex>) -> RawRegex = match p.peek() {
            Tok::Sym("*") => RawRegex::Star,
            Tok::Sym("+") => RawRegex::Plus,
            Tok::Sym("?") => RawRegex::Opt,
            _ => return Ok((r, d)),
        };
        d += 1;
        if depth + d > MAX_DEPTH {
            return Err(spec_err(
                p.pos(),
                format!("path expression nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        p.bump();
        r = wrap(Box::new(r));
    }
}

/// Resolves one fast path's names against the program.
struct Resolver<'a> {
    program: &'a Program,
    globals: &'a HashMap<String, (crate::sema::Global, Pos)>,
    fp: &'a RawFastPath,
    /// Alias name: its process (in the program), statement and definition.
    aliases: HashMap<String, (ProcId, StmtRef, Pos)>,
}

impl Resolver<'_> {
    fn run(mut self) -> Result<FastPath> {
        let fp = self.fp;
        if fp.procs.is_empty() {
            return Err(spec_err(
                fp.pos,
                format!("fast path `{}` names no process", fp.name.name),
            ));
        }
        let mut ids: Vec<ProcId> = Vec::new();
        for rp in &fp.procs {
            let id = self.program.process(&rp.name.name).ok_or_else(|| {
                spec_err(
                    rp.name.pos,
                    format!("process `{}` is not declared in the program", rp.name.name),
                )
            })?;
            if let Some(i) = ids.iter().position(|&x| x == id) {
                return Err(spec_err(
                    rp.name.pos,
                    format!(
                        "process `{}` appears twice in fast path `{}` (first at {})",
                        rp.name.name, fp.name.name, fp.procs[i].pos
                    ),
                ));
            }
            ids.push(id);
        }
        // Aliases first: they are visible in the whole block.
        for (rp, &id) in fp.procs.iter().zip(&ids) {
            for (s, alias) in &rp.stmts {
                let Some(alias) = alias else { continue };
                let stmt = self.own_stmt(id, s)?;
                if let Some((_, _, at)) = self.aliases.get(&alias.name) {
                    return Err(spec_err(
                        alias.pos,
                        format!("alias `{}` is already defined at {at}", alias.name),
                    ));
                }
                if self.program.channel(&alias.name).is_some() {
                    return Err(spec_err(
                        alias.pos,
                        format!("alias `{}` is the name of a channel", alias.name),
                    ));
                }
                self.aliases
                    .insert(alias.name.clone(), (id, stmt, alias.pos));
            }
        }
        let mut procs = Vec::new();
        for (rp, &id) in fp.procs.iter().zip(&ids) {
            let mut stmts: Vec<StmtRef> = Vec::new();
            let mut add = |s: StmtRef| {
                if !stmts.contains(&s) {
                    stmts.push(s);
                }
            };
            for (s, _) in &rp.stmts {
                add(self.own_stmt(id, s)?);
            }
            let start = match &rp.start {
                Some(e) => self.element(id, &ids, e)?,
                None => {
                    return Err(spec_err(
                        rp.pos,
                        format!(
                            "process `{}` of fast path `{}` has no `start` field",
                            rp.name.name, fp.name.name
                        ),
                    ));
                }
            };
            add(start.stmt);
            let follows = match &rp.follows {
                Some(r) => Some(self.regex(id, &ids, r, &mut add)?),
                None => None,
            };
            let exit = match &rp.exit {
                Some(e) => Some(self.element(id, &ids, e)?),
                None => None,
            };
            if let Some(e) = &exit {
                add(e.stmt);
            }
            procs.push(ProcSpec {
                proc: id,
                stmts,
                start,
                follows,
                exit,
                pos: rp.pos,
            });
        }
        let schedule = match fp.downstream {
            None => Schedule::Fifo,
            Some(at) => {
                let yields = procs.iter().any(|p| {
                    let mut any = p.start.yield_to.is_some()
                        || p.exit.as_ref().is_some_and(|e| e.yield_to.is_some());
                    if let Some(r) = &p.follows {
                        any |= regex_yields(r);
                    }
                    any
                });
                if yields {
                    return Err(spec_err(
                        at,
                        format!(
                            "fast path `{}` uses `yield`, which only steers the default schedule: \
                             drop `schedule downstream;` or the `yield`s",
                            fp.name.name
                        ),
                    ));
                }
                Schedule::DownstreamFirst
            }
        };
        Ok(FastPath {
            name: fp.name.name.clone(),
            pos: fp.pos,
            procs,
            schedule,
        })
    }

    fn proc_name(&self, id: ProcId) -> &str {
        &self.program.processes[id as usize].name
    }

    /// The statements of process `id` that operate on channel `chan`.
    fn chan_stmts(&self, id: ProcId, chan: u32) -> Vec<(StmtRef, Pos, bool)> {
        let mut out = Vec::new();
        for (pc, node) in self.program.processes[id as usize].nodes.iter().enumerate() {
            match &node.kind {
                NodeKind::Comm { op, .. } if op.chan() == chan => {
                    out.push((
                        StmtRef {
                            pc: pc as u32,
                            arm: None,
                        },
                        node.pos,
                        op.is_in(),
                    ));
                }
                NodeKind::Alt { arms } => {
                    for (i, arm) in arms.iter().enumerate() {
                        if arm.op.chan() == chan {
                            out.push((
                                StmtRef {
                                    pc: pc as u32,
                                    arm: Some(i as u32),
                                },
                                arm.pos,
                                arm.op.is_in(),
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// A statement named in process `id`'s own block.
    fn own_stmt(&self, id: ProcId, s: &RawStmt) -> Result<StmtRef> {
        let process = &self.program.processes[id as usize];
        match s {
            RawStmt::Label(n, pos) => process
                .nodes
                .iter()
                .position(|node| node.label == Some(*n))
                .map(|pc| StmtRef {
                    pc: pc as u32,
                    arm: None,
                })
                .ok_or_else(|| {
                    spec_err(
                        *pos,
                        format!("process `{}` has no label #{n}", process.name),
                    )
                }),
            RawStmt::Name(name) => {
                if let Some((owner, stmt, _)) = self.aliases.get(&name.name) {
                    if *owner == id {
                        return Ok(*stmt);
                    }
                    return Err(spec_err(
                        name.pos,
                        format!(
                            "`{}` names a statement of process `{}`, not of `{}`",
                            name.name,
                            self.proc_name(*owner),
                            process.name
                        ),
                    ));
                }
                let Some(chan) = self.program.channel(&name.name) else {
                    return Err(spec_err(
                        name.pos,
                        format!(
                            "`{}` is neither a channel nor an alias of fast path `{}`",
                            name.name, self.fp.name.name
                        ),
                    ));
                };
                let found = self.chan_stmts(id, chan);
                match found.as_slice() {
                    [(stmt, _, _)] => Ok(*stmt),
                    [] => Err(spec_err(
                        name.pos,
                        format!(
                            "process `{}` has no `in` or `out` on channel `{}`",
                            process.name, name.name
                        ),
                    )),
                    many => Err(spec_err(
                        name.pos,
                        format!(
                            "channel `{}` names {} statements of process `{}` (at {}); put a `#N` label just before the one you mean and name `#N`: its event is control reaching that statement, before the communication (so it cannot be a `<=>` partner)",
                            name.name,
                            many.len(),
                            process.name,
                            many.iter()
                                .map(|m| m.1.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )),
                }
            }
        }
    }

    /// The channel and direction of a statement, if it is a channel statement.
    fn comm_of(&self, id: ProcId, s: StmtRef) -> Option<(u32, bool)> {
        let node = &self.program.processes[id as usize].nodes[s.pc as usize];
        let op: &Comm = match (&node.kind, s.arm) {
            (NodeKind::Comm { op, .. }, None) => op,
            (NodeKind::Alt { arms }, Some(i)) => &arms.get(i as usize)?.op,
            _ => return None,
        };
        Some((op.chan(), op.is_in()))
    }

    fn element(&self, id: ProcId, ids: &[ProcId], e: &RawElement) -> Result<Element> {
        let pos = e.stmt.pos();
        let stmt = self.own_stmt(id, &e.stmt)?;
        let pred = match &e.pred {
            Some(pred) => {
                let scope = Scope::for_predicates(self.program, self.globals, id);
                Some(scope.expr(pred, None).map_err(|err| match err {
                    Error::Check { pos, msg } => Error::Spec { pos, msg },
                    err => err,
                })?)
            }
            None => None,
        };
        let partner = match &e.partner {
            Some(raw) => Some(self.partner(id, ids, stmt, &e.stmt, raw)?),
            None => None,
        };
        let yield_to = match &e.yield_to {
            Some(name) => match self.program.process(&name.name) {
                Some(q) if ids.contains(&q) => Some(q),
                Some(_) => {
                    return Err(spec_err(
                        name.pos,
                        format!(
                            "`yield {}`: process `{}` is not on fast path `{}`",
                            name.name, name.name, self.fp.name.name
                        ),
                    ));
                }
                None => {
                    return Err(spec_err(
                        name.pos,
                        format!("process `{}` is not declared in the program", name.name),
                    ));
                }
            },
            None => None,
        };
        Ok(Element {
            stmt,
            pred,
            partner,
            yield_to,
            pos,
        })
    }

    fn partner(
        &self,
        id: ProcId,
        ids: &[ProcId],
        stmt: StmtRef,
        own: &RawStmt,
        raw: &RawStmt,
    ) -> Result<(ProcId, StmtRef)> {
        let pos = raw.pos();
        let Some((chan, is_in)) = self.comm_of(id, stmt) else {
            return Err(spec_err(
                own.pos(),
                format!(
                    "`<=>` needs a channel statement, and `{}` is not one (a `#N` label names a point, reached before any communication); name the statement by its channel or an alias of it",
                    own.show()
                ),
            ));
        };
        let chan_name = &self.program.channels[chan as usize].name;
        let (q, other) = match raw {
            RawStmt::Label(..) => {
                return Err(spec_err(
                    pos,
                    "a `<=>` partner is a channel statement of another process, named by its channel or an alias of it; a `#N` label names a point, not a communication",
                ));
            }
            RawStmt::Name(name) => {
                if let Some((q, s, _)) = self.aliases.get(&name.name) {
                    (*q, *s)
                } else if let Some(c) = self.program.channel(&name.name) {
                    let mut found = Vec::new();
                    for &q in ids.iter().filter(|&&q| q != id) {
                        for (s, _, dir) in self.chan_stmts(q, c) {
                            if dir != is_in {
                                found.push((q, s));
                            }
                        }
                    }
                    match found.as_slice() {
                        [one] => *one,
                        [] => {
                            return Err(spec_err(
                                pos,
                                format!(
                                    "no other process of fast path `{}` has a matching operation on channel `{}`",
                                    self.fp.name.name, name.name
                                ),
                            ));
                        }
                        _ => {
                            return Err(spec_err(
                                pos,
                                format!(
                                    "channel `{}` names several statements of other processes of fast path `{}`; name the partner by an alias",
                                    name.name, self.fp.name.name
                                ),
                            ));
                        }
                    }
                } else {
                    return Err(spec_err(
                        pos,
                        format!(
                            "`{}` is neither a channel nor an alias of fast path `{}`",
                            name.name, self.fp.name.name
                        ),
                    ));
                }
            }
        };
        if q == id {
            return Err(spec_err(
                pos,
                format!(
                    "`{}` is a statement of the same process; a partner is in another process",
                    raw.show()
                ),
            ));
        }
        match self.comm_of(q, other) {
            Some((c, dir)) if c == chan && dir != is_in => Ok((q, other)),
            Some((c, dir)) if c == chan && dir == is_in => Err(spec_err(
                pos,
                format!(
                    "`{}` also does `{}` on channel `{chan_name}`; a partner does the opposite operation",
                    raw.show(),
                    if is_in { "in" } else { "out" }
                ),
            )),
            Some((c, _)) => Err(spec_err(
                pos,
                format!(
                    "`{}` is on channel `{}` but `{}` is on channel `{chan_name}`",
                    raw.show(),
                    self.program.channels[c as usize].name,
                    own.show()
                ),
            )),
            None => {
                let node = &self.program.processes[q as usize].nodes[other.pc as usize];
                let what = match node.label {
                    Some(n) => format!(
                        "`{}` names label #{n} of process `{}`, a point and not a communication",
                        raw.show(),
                        self.program.processes[q as usize].name
                    ),
                    None => format!("`{}` is not a channel statement", raw.show()),
                };
                Err(spec_err(
                    pos,
                    format!(
                        "{what}; a `<=>` partner is a channel statement, named by its channel or an alias of it"
                    ),
                ))
            }
        }
    }

    fn regex(
        &self,
        id: ProcId,
        ids: &[ProcId],
        r: &RawRegex,
        add: &mut dyn FnMut(StmtRef),
    ) -> Result<Regex> {
        let many = |rs: &[RawRegex], add: &mut dyn FnMut(StmtRef)| -> Result<Vec<Regex>> {
            rs.iter().map(|r| self.regex(id, ids, r, add)).collect()
        };
        Ok(match r {
            RawRegex::Elem(e) => {
                let e = self.element(id, ids, e)?;
                add(e.stmt);
                Regex::Elem(e)
            }
            RawRegex::Seq(rs) => Regex::Seq(many(rs, add)?),
            RawRegex::Alt(rs) => Regex::Alt(many(rs, add)?),
            RawRegex::Star(r) => Regex::Star(Box::new(self.regex(id, ids, r, add)?)),
            RawRegex::Plus(r) => Regex::Plus(Box::new(self.regex(id, ids, r, add)?)),
            RawRegex::Opt(r) => Regex::Opt(Box::new(self.regex(id, ids, r, add)?)),
        })
    }
}

/// True when an element of `r` has a `yield`.
fn regex_yields(r: &Regex) -> bool {
    match r {
        Regex::Elem(e) => e.yield_to.is_some(),
        Regex::Seq(v) | Regex::Alt(v) => v.iter().any(regex_yields),
        Regex::Star(r) | Regex::Plus(r) | Regex::Opt(r) => regex_yields(r),
    }
}
