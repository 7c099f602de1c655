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
//!   any effect on the variables.

use crate::ir::{ExternId, NodeKind, Pc, Process};

/// Why a process stopped early.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The `assert` at this pc failed.
    Assert(Pc),
    /// The node at this pc divided by zero.
    DivisionByZero(Pc),
    /// A host function called by the node at this pc failed.
    Host(Pc),
}

/// Runs `process` from `pc` (see the module docs for the stepping rule)
/// over its variables `vars`, calling host functions through `call`, which
/// returns `None` when the host function failed. `stops[pc]`, when present
/// and true, marks a node to stop before. Returns the pc it stopped at.
///
/// A loop without a channel operation, a halt or a stop never returns, as
/// in ESP's runtime (a process runs until it blocks).
pub fn run_local(
    process: &Process,
    mut pc: Pc,
    vars: &mut [i64],
    stops: &[bool],
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

    #[test]
    fn runs_local_code_to_the_next_channel_operation() {
        let p = counting();
        let mut vars = [0i64; 2];
        let mut calls = Vec::new();
        let pc = run_local(&p, 0, &mut vars, &[], &mut |f, a| {
            calls.push((f, a.to_vec()));
            Some(2)
        })
        .unwrap();
        assert_eq!(pc, 3);
        assert_eq!(vars[0], 6);
        assert_eq!(calls, vec![(0, vec![0]), (0, vec![2]), (0, vec![4])]);
        // At a channel operation it returns at once.
        assert_eq!(run_local(&p, 3, &mut vars, &[], &mut |_, _| Some(0)), Ok(3));
    }

    #[test]
    fn stops_before_marked_nodes_but_not_at_the_start() {
        let p = counting();
        let mut vars = [0i64; 2];
        let stops = [false, true, false, false, false];
        assert_eq!(
            run_local(&p, 0, &mut vars, &stops, &mut |_, _| Some(1)),
            Ok(1)
        );
        assert_eq!(
            run_local(&p, 1, &mut vars, &stops, &mut |_, _| Some(1)),
            Ok(1)
        );
        assert_eq!(vars[0], 1);
    }

    #[test]
    fn faults_carry_the_pc() {
        let p = counting();
        let mut vars = [0i64; 2];
        assert_eq!(
            run_local(&p, 0, &mut vars, &[], &mut |_, _| None),
            Err(Fault::Host(2))
        );
        let mut q = counting();
        q.nodes[2] = node(NodeKind::Assert {
            cond: Expr::Binary(BinOp::Div, Box::new(Expr::Const(1)), Box::new(Expr::Var(1))),
            next: 1,
        });
        assert_eq!(
            run_local(&q, 0, &mut vars, &[], &mut |_, _| Some(0)),
            Err(Fault::DivisionByZero(2))
        );
        vars[1] = 2; // 1 / 2 == 0: the assertion fails.
        assert_eq!(
            run_local(&q, 0, &mut vars, &[], &mut |_, _| Some(0)),
            Err(Fault::Assert(2))
        );
    }
}
