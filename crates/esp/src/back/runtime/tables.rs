//! The runtime's static tables of a program, built once when it is loaded:
//! what the scheduler does at each node, every channel operation's site and
//! fields, every `alt`, and the fast paths that start at each statement;
//! and the validation of a program that may not come from the front end.

use crate::error::{Error, Result};
use crate::ir::{ChanKind, Comm, Layout, NodeKind, Operand, Pc, Program};

/// No index: the end of a list, no `alt`, no fast path.
pub(super) const NONE: u32 = u32::MAX;

/// What the scheduler does at a node.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Tag {
    /// Local code: run it.
    Code,
    /// The end of the body.
    Halt,
    /// A channel operation: the site.
    Comm(u32),
    /// An `alt`: its index.
    Alt(u32),
}

/// A channel operation: a `Comm` node or one arm of an `alt`.
#[derive(Copy, Clone, Debug)]
pub(super) struct Site {
    pub(super) chan: u32,
    pub(super) kind: ChanKind,
    pub(super) is_in: bool,
    pub(super) next: Pc,
    /// The fields: `fields[first..first + arity]`.
    pub(super) first: u32,
    pub(super) arity: u32,
    /// The `alt` it belongs to, or `NONE`.
    pub(super) alt: u32,
    pub(super) arm: u32,
}

/// A field of a message: a slot (of the flat array) or a constant.
#[derive(Copy, Clone, Debug)]
pub(super) enum Field {
    Slot(u32),
    Const(i64),
}

#[derive(Clone, Debug)]
pub(super) struct AltInfo {
    pub(super) first: u32,
    pub(super) arms: u32,
    /// Some arm reads an external in channel.
    pub(super) ext_in: bool,
}

pub(super) struct Tables {
    pub(super) pc_base: Vec<usize>,
    pub(super) tags: Vec<Tag>,
    pub(super) sites: Vec<Site>,
    pub(super) fields: Vec<Field>,
    pub(super) alts: Vec<AltInfo>,
    /// Per (process, pc): an index into `fp_lists`, or `NONE`.
    pub(super) fp_at: Vec<u32>,
    pub(super) fp_lists: Vec<Vec<u32>>,
    pub(super) max_arity: usize,
}

impl Tables {
    pub(super) fn new(program: &Program, layout: &Layout) -> Tables {
        let mut t = Tables {
            pc_base: Vec::new(),
            tags: Vec::new(),
            sites: Vec::new(),
            fields: Vec::new(),
            alts: Vec::new(),
            fp_at: Vec::new(),
            fp_lists: Vec::new(),
            max_arity: 0,
        };
        for (p, process) in program.processes.iter().enumerate() {
            t.pc_base.push(t.tags.len());
            let base = layout.base[p];
            for node in &process.nodes {
                let tag = match &node.kind {
                    NodeKind::Halt => Tag::Halt,
                    NodeKind::Comm { op, next } => {
                        let s = t.site(program, base, op, *next, NONE, 0);
                        Tag::Comm(s)
                    }
                    NodeKind::Alt { arms } => {
                        let a = t.alts.len() as u32;
                        let first = t.sites.len() as u32;
                        let mut ext_in = false;
                        for (k, arm) in arms.iter().enumerate() {
                            t.site(program, base, &arm.op, arm.next, a, k as u32);
                            ext_in |= arm.op.is_in()
                                && program.channels[arm.op.chan() as usize].kind
                                    == ChanKind::ExternalIn;
                        }
                        t.alts.push(AltInfo {
                            first,
                            arms: arms.len() as u32,
                            ext_in,
                        });
                        Tag::Alt(a)
                    }
                    _ => Tag::Code,
                };
                t.tags.push(tag);
            }
        }
        t.fp_at = vec![NONE; t.tags.len()];
        t
    }

    pub(super) fn site(
        &mut self,
        program: &Program,
        base: u32,
        op: &Comm,
        next: Pc,
        alt: u32,
        arm: u32,
    ) -> u32 {
        let first = self.fields.len() as u32;
        match op {
            Comm::In { vars, .. } => self
                .fields
                .extend(vars.iter().map(|v| Field::Slot(base + v))),
            Comm::Out { args, .. } => self.fields.extend(args.iter().map(|a| match a {
                Operand::Var(v) => Field::Slot(base + v),
                Operand::Const(c) => Field::Const(*c),
            })),
        }
        let arity = self.fields.len() as u32 - first;
        self.max_arity = self.max_arity.max(arity as usize);
        let chan = op.chan();
        self.sites.push(Site {
            chan,
            kind: program.channels[chan as usize].kind,
            is_in: op.is_in(),
            next,
            first,
            arity,
            alt,
            arm,
        });
        self.sites.len() as u32 - 1
    }

    #[inline]
    pub(super) fn tag(&self, p: usize, pc: Pc) -> Tag {
        self.tags[self.pc_base[p] + pc as usize]
    }
}

/// Checks what the runtime relies on in a program that may not come from
/// the front end: every pc, variable, channel and host function in range,
/// arities matching, channel directions allowed.
pub(super) fn validate(program: &Program) -> Result<()> {
    let bad = |pos, msg: String| Err(Error::Check { pos, msg });
    for process in &program.processes {
        let n = process.nodes.len() as u32;
        let nv = process.vars.len() as u32;
        if process.entry >= n {
            return bad(
                process.pos,
                format!(
                    "process {}: entry {} out of range",
                    process.name, process.entry
                ),
            );
        }
        for (pc, node) in process.nodes.iter().enumerate() {
            let here = |what: &str| format!("process {} node {pc}: {what}", process.name);
            let mut ok = true;
            let check_expr = |e: &crate::ir::Expr, ok: &mut bool| {
                e.for_each_var(&mut |v| *ok &= v < nv);
                check_calls(e, program, ok);
            };
            let mut succ = Vec::new();
            match &node.kind {
                NodeKind::Assign { var, value, next } => {
                    ok &= *var < nv;
                    check_expr(value, &mut ok);
                    succ.push(*next);
                }
                NodeKind::Eval { value, next } => {
                    check_expr(value, &mut ok);
                    succ.push(*next);
                }
                NodeKind::Branch { cond, then, els } => {
                    check_expr(cond, &mut ok);
                    succ.extend([*then, *els]);
                }
                NodeKind::Nop { next } => succ.push(*next),
                NodeKind::Assert { cond, next } => {
                    check_expr(cond, &mut ok);
                    succ.push(*next);
                }
                NodeKind::Comm { op, next } => {
                    if let Err(m) = check_comm(program, op, nv) {
                        return bad(node.pos, here(&m));
                    }
                    succ.push(*next);
                }
                NodeKind::Alt { arms } => {
                    if arms.is_empty() {
                        return bad(node.pos, here("an alt without arms"));
                    }
                    for arm in arms {
                        if let Err(m) = check_comm(program, &arm.op, nv) {
                            return bad(arm.pos, here(&m));
                        }
                        succ.push(arm.next);
                    }
                }
                NodeKind::Halt => {}
            }
            if !ok {
                return bad(
                    node.pos,
                    here("a variable or host function out of range, or a call of the wrong arity"),
                );
            }
            if succ.iter().any(|&s| s >= n) {
                return bad(node.pos, here("a successor out of range"));
            }
        }
    }
    Ok(())
}

pub(super) fn check_calls(e: &crate::ir::Expr, program: &Program, ok: &mut bool) {
    use crate::ir::Expr;
    match e {
        Expr::Const(_) | Expr::Var(_) => {}
        Expr::Unary(_, a) => check_calls(a, program, ok),
        Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            check_calls(a, program, ok);
            check_calls(b, program, ok);
        }
        Expr::Call(f, args) => {
            *ok &= program
                .externs
                .get(*f as usize)
                .is_some_and(|x| x.arity as usize == args.len());
            args.iter().for_each(|a| check_calls(a, program, ok));
        }
    }
}

pub(super) fn check_comm(program: &Program, op: &Comm, nv: u32) -> std::result::Result<(), String> {
    let Some(ch) = program.channels.get(op.chan() as usize) else {
        return Err("a channel out of range".into());
    };
    let n = match op {
        Comm::In { vars, .. } => {
            if vars.iter().any(|&v| v >= nv) {
                return Err("a variable out of range".into());
            }
            vars.len()
        }
        Comm::Out { args, .. } => {
            if args
                .iter()
                .any(|a| matches!(a, Operand::Var(v) if *v >= nv))
            {
                return Err("a variable out of range".into());
            }
            args.len()
        }
    };
    if n != ch.arity as usize {
        return Err(format!(
            "channel {} carries {} fields, not {n}",
            ch.name, ch.arity
        ));
    }
    match (ch.kind, op.is_in()) {
        (ChanKind::ExternalIn, false) => Err(format!("out on external in channel {}", ch.name)),
        (ChanKind::ExternalOut, true) => Err(format!("in on external out channel {}", ch.name)),
        _ => Ok(()),
    }
}
