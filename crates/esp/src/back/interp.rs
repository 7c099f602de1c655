//! The reference interpreter: runs one process's local code over its
//! [`ir`](crate::ir) nodes until it reaches a place where the scheduler must
//! act (a channel operation, an `alt`, the end of the body, or a statement
//! the runtime asked to stop at), or fails.
//!
//! It is the oracle of the process-based backends: [`native`](crate::native)
//! compiles exactly the same stepping rule to machine code, and
//! [`runtime`](crate::runtime) drives either one with the same scheduler.
//!
//! The stepping rule, shared with the native code:
//! - `run_local` *executes* the node at the pc it is given, whatever it is
//!   (a node the runtime asked to stop at is not stopped at when execution
//!   resumes there: the runtime has already looked at it);
//! - it then follows the control flow and stops *before* the first node that
//!   is a `Comm`, an `Alt`, a `Halt`, or marked in `stops`, returning its pc;
//!   a `Comm`, `Alt` or `Halt` at the starting pc is returned at once;
//! - an `assert` whose condition is zero, a `/` or `%` by zero, and a failed
//!   host call stop it with a [`Fault`] at the node's pc, before the node has
//!   any effect on the variables;
//! - a *backward jump on a local loop* ([`LocalLoops`]: an edge
//!   `from → to`, `to <= from`, of a cycle through no `Comm`, `Alt` or
//!   `Halt`) costs one unit of the budget it is given; with none left it
//!   stops with [`Fault::Diverges`] at `to`, after the node at `from` has
//!   run and before `to` runs, so the process resumes exactly there. Every
//!   cycle of local code has such an edge, so a loop that never yields
//!   meets the bound; a loop through a channel operation costs nothing (the
//!   process returns to the scheduler on every iteration).

use crate::ir::{ExternId, NodeKind, Pc, Process};

/// The local loops of a process: the strongly connected components of its
/// code without its `Comm`, `Alt` and `Halt` nodes (where the process
/// returns to the scheduler). An edge inside one of them that goes to the
/// same or an earlier pc is a backward jump that [`run_local`] (and the
/// native code) counts against its budget.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalLoops {
    /// Per node: its component, or [`LocalLoops::NONE`] when it lies on no
    /// cycle of local code.
    comp: Vec<u32>,
}

impl LocalLoops {
    /// The component of a node on no local cycle.
    pub const NONE: u32 = u32::MAX;

    /// The local loops of `process`. Successors out of range are ignored
    /// (the runtime validates a program before it runs it).
    pub fn of(process: &Process) -> LocalLoops {
        let n = process.nodes.len();
        let yields = |pc: usize| {
            matches!(
                process.nodes[pc].kind,
                NodeKind::Comm { .. } | NodeKind::Alt { .. } | NodeKind::Halt
            )
        };
        let succs: Vec<Vec<usize>> = (0..n)
            .map(|pc| {
                if yields(pc) {
                    return Vec::new();
                }
                let targets = match &process.nodes[pc].kind {
                    NodeKind::Assign { next, .. }
                    | NodeKind::Eval { next, .. }
                    | NodeKind::Nop { next }
                    | NodeKind::Assert { next, .. } => vec![*next],
                    NodeKind::Branch { then, els, .. } => vec![*then, *els],
                    NodeKind::Comm { .. } | NodeKind::Alt { .. } | NodeKind::Halt => Vec::new(),
                };
                targets
                    .into_iter()
                    .map(|t| t as usize)
                    .filter(|&t| t < n && !yields(t))
                    .collect()
            })
            .collect();
        let mut comp = vec![Self::NONE; n];
        let mut next = 0u32;
        for c in crate::fp::sccs(&succs) {
            let cyclic = c.len() > 1 || succs[c[0]].contains(&c[0]);
            if cyclic {
                for &v in &c {
                    comp[v] = next;
                }
                next += 1;
            }
        }
        LocalLoops { comp }
    }

    /// True when the process has no local loop (nothing to count).
    pub fn is_empty(&self) -> bool {
        self.comp.iter().all(|&c| c == Self::NONE)
    }

    /// True when the edge `from → to` is a backward jump on a local loop.
    #[inline]
    pub fn counts(&self, from: Pc, to: Pc) -> bool {
        to <= from
            && match (self.comp.get(to as usize), self.comp.get(from as usize)) {
                (Some(&a), Some(&b)) => a != Self::NONE && a == b,
                _ => false,
            }
    }
}

/// Why a process stopped early.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The `assert` at this pc failed.
    Assert(Pc),
    /// The node at this pc divided by zero.
    DivisionByZero(Pc),
    /// A host function called by the node at this pc failed.
    Host(Pc),
    /// A backward jump on a local loop found the budget spent; the process
    /// is at this pc (the jump's target, not yet run).
    Diverges(Pc),
}

/// Runs `process` from `pc` (see the module docs for the stepping rule)
/// over its variables `vars`, calling host functions through `call`, which
/// returns `None` when the host function failed. `stops[pc]`, when present
/// and true, marks a node to stop before. Returns the pc it stopped at.
///
/// `loops` must be [`LocalLoops::of`] `process`; `budget` is the number of
/// backward jumps on local loops still allowed, and is decremented by each
/// one taken: a loop that never yields stops with [`Fault::Diverges`]
/// instead of running for ever.
pub fn run_local(
    process: &Process,
    mut pc: Pc,
    vars: &mut [i64],
    stops: &[bool],
    loops: &LocalLoops,
    budget: &mut u64,
    call: &mut dyn FnMut(ExternId, &[i64]) -> Option<i64>,
) -> Result<Pc, Fault> {
    let mut first = true;
    loop {
        let node = &process.nodes[pc as usize];
        let stop_here = !first && stops.get(pc as usize).copied().unwrap_or(false);
        first = false;
        if stop_here {
            return Ok(pc);
        }
        let mut failed = false;
        let mut host = |f: ExternId, args: &[i64]| match call(f, args) {
            Some(v) => v,
            None => {
                failed = true;
                0
            }
        };
        let next = match &node.kind {
            NodeKind::Comm { .. } | NodeKind::Alt { .. } | NodeKind::Halt => return Ok(pc),
            NodeKind::Assign { var, value, next } => {
                let v = value.eval(vars, &mut host);
                if failed {
                    return Err(Fault::Host(pc));
                }
                vars[*var as usize] = v.ok_or(Fault::DivisionByZero(pc))?;
                *next
            }
            NodeKind::Eval { value, next } => {
                let v = value.eval(vars, &mut host);
                if failed {
                    return Err(Fault::Host(pc));
                }
                v.ok_or(Fault::DivisionByZero(pc))?;
                *next
            }
            NodeKind::Branch { cond, then, els } => {
                let v = cond.eval(vars, &mut host);
                if failed {
                    return Err(Fault::Host(pc));
                }
                if v.ok_or(Fault::DivisionByZero(pc))? != 0 {
                    *then
                } else {
                    *els
                }
            }
            NodeKind::Nop { next } => *next,
            NodeKind::Assert { cond, next } => {
                let v = cond.eval(vars, &mut host);
                if failed {
                    return Err(Fault::Host(pc));
                }
                if v.ok_or(Fault::DivisionByZero(pc))? == 0 {
                    return Err(Fault::Assert(pc));
                }
                *next
            }
        };
        if loops.counts(pc, next) {
            if *budget == 0 {
                return Err(Fault::Diverges(next));
            }
            *budget -= 1;
        }
        pc = next;
        if matches!(
            process.nodes[pc as usize].kind,
            NodeKind::Comm { .. } | NodeKind::Alt { .. } | NodeKind::Halt
        ) {
            return Ok(pc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BinOp, Comm, Expr, Node, NodeKind, Pos, VarInfo};

    fn node(kind: NodeKind) -> Node {
        Node {
            kind,
            pos: Pos { line: 1, col: 1 },
            label: None,
        }
    }

    fn var(name: &str) -> VarInfo {
        VarInfo {
            name: name.into(),
            temp: false,
        }
    }

    /// `a = 0; while (a < 5) a = a + f(a); in(c, b); halt`
    fn counting() -> Process {
        let lt = Expr::Binary(BinOp::Lt, Box::new(Expr::Var(0)), Box::new(Expr::Const(5)));
        let step = Expr::Binary(
            BinOp::Add,
            Box::new(Expr::Var(0)),
            Box::new(Expr::Call(0, vec![Expr::Var(0)])),
        );
        Process {
            name: "P".into(),
            vars: vec![var("a"), var("b")],
            nodes: vec![
                node(NodeKind::Assign {
                    var: 0,
                    value: Expr::Const(0),
                    next: 1,
                }),
                node(NodeKind::Branch {
                    cond: lt,
                    then: 2,
                    els: 3,
                }),
                node(NodeKind::Assign {
                    var: 0,
                    value: step,
                    next: 1,
                }),
                node(NodeKind::Comm {
                    op: Comm::In {
                        chan: 0,
                        vars: vec![1],
                    },
                    next: 4,
                }),
                node(NodeKind::Halt),
            ],
            entry: 0,
            pos: Pos::default(),
        }
    }

    /// Runs `p` from `pc` with no bound on its loops.
    fn run(
        p: &Process,
        pc: Pc,
        vars: &mut [i64],
        stops: &[bool],
        call: &mut dyn FnMut(ExternId, &[i64]) -> Option<i64>,
    ) -> Result<Pc, Fault> {
        let mut budget = u64::MAX;
        run_local(p, pc, vars, stops, &LocalLoops::of(p), &mut budget, call)
    }

    #[test]
    fn runs_local_code_to_the_next_channel_operation() {
        let p = counting();
        let mut vars = [0i64; 2];
        let mut calls = Vec::new();
        let pc = run(&p, 0, &mut vars, &[], &mut |f, a| {
            calls.push((f, a.to_vec()));
            Some(2)
        })
        .unwrap();
        assert_eq!(pc, 3);
        assert_eq!(vars[0], 6);
        assert_eq!(calls, vec![(0, vec![0]), (0, vec![2]), (0, vec![4])]);
        // At a channel operation it returns at once.
        assert_eq!(run(&p, 3, &mut vars, &[], &mut |_, _| Some(0)), Ok(3));
    }

    #[test]
    fn stops_before_marked_nodes_but_not_at_the_start() {
        let p = counting();
        let mut vars = [0i64; 2];
        let stops = [false, true, false, false, false];
        assert_eq!(run(&p, 0, &mut vars, &stops, &mut |_, _| Some(1)), Ok(1));
        assert_eq!(run(&p, 1, &mut vars, &stops, &mut |_, _| Some(1)), Ok(1));
        assert_eq!(vars[0], 1);
    }

    #[test]
    fn faults_carry_the_pc() {
        let p = counting();
        let mut vars = [0i64; 2];
        assert_eq!(
            run(&p, 0, &mut vars, &[], &mut |_, _| None),
            Err(Fault::Host(2))
        );
        let mut q = counting();
        q.nodes[2] = node(NodeKind::Assert {
            cond: Expr::Binary(BinOp::Div, Box::new(Expr::Const(1)), Box::new(Expr::Var(1))),
            next: 1,
        });
        assert_eq!(
            run(&q, 0, &mut vars, &[], &mut |_, _| Some(0)),
            Err(Fault::DivisionByZero(2))
        );
        vars[1] = 2; // 1 / 2 == 0: the assertion fails.
        assert_eq!(
            run(&q, 0, &mut vars, &[], &mut |_, _| Some(0)),
            Err(Fault::Assert(2))
        );
    }

    /// Each jump back from node 2 to the loop's test costs one unit; with
    /// the budget spent the process stops at the test, resumable there.
    #[test]
    fn backward_jumps_on_local_loops_spend_the_budget() {
        let p = counting();
        let loops = LocalLoops::of(&p);
        assert!(loops.counts(2, 1) && !loops.counts(1, 2) && !loops.counts(0, 0));
        let mut vars = [0i64; 2];
        let mut budget = 2;
        let r = run_local(&p, 0, &mut vars, &[], &loops, &mut budget, &mut |_, _| {
            Some(1)
        });
        assert_eq!((r, vars[0], budget), (Err(Fault::Diverges(1)), 3, 0));
        // Resumed at the test with a fresh budget, it goes on where it was.
        let mut budget = 10;
        let r = run_local(&p, 1, &mut vars, &[], &loops, &mut budget, &mut |_, _| {
            Some(1)
        });
        assert_eq!((r, vars[0], budget), (Ok(3), 5, 8));
        // Exactly enough is enough.
        let (mut vars, mut budget) = ([0i64; 2], 5);
        let r = run_local(&p, 0, &mut vars, &[], &loops, &mut budget, &mut |_, _| {
            Some(1)
        });
        assert_eq!((r, budget), (Ok(3), 0));
    }

    /// A loop through a channel operation is no local loop: nothing counts.
    #[test]
    fn loops_through_channel_operations_cost_nothing() {
        let mut p = counting();
        // 2 goes to the `in` at 3, which goes back to the test at 1.
        p.nodes[2] = node(NodeKind::Assign {
            var: 0,
            value: Expr::Const(1),
            next: 3,
        });
        p.nodes[3] = node(NodeKind::Comm {
            op: Comm::In {
                chan: 0,
                vars: vec![1],
            },
            next: 1,
        });
        assert!(LocalLoops::of(&p).is_empty());
        assert!(!LocalLoops::of(&counting()).is_empty());
    }
}
