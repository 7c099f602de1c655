//! The automata-based back end (§4.1): the whole program's product state
//! machine, built by the extraction's symbolic execution
//! ([`crate::explore`]) run over every process from the program's start,
//! and compiled like a fast path ([`crate::fpgen`]). The runtime runs it
//! with [`Backend::Automata`](crate::runtime::Backend::Automata).

use crate::error::{Error, Result};
use crate::explore::{ExploreOptions, Explorer};
use crate::fp::Graph;
use crate::ir::{NodeKind, Pc, ProcId, Program};

/// The automaton of the whole program (§4.1): symbolic execution of every
/// process from the program's start under the default policy.
///
/// A process whose external input is empty blocks on it; when no process is
/// ready and some wait for input, the graph leaves with
/// [`Leave::Suspend`](crate::fp::Leave::Suspend)` { resume: k }`, and `entries[k]` continues from that
/// state with those processes ready again (in declaration order). An
/// assertion or division that would fail, and a state in which every
/// process has halted or is blocked on an internal channel, leave with
/// [`Leave::Abort`](crate::fp::Leave::Abort): the process-based code goes on from there. Programs
/// with `alt` are [`Error::Unsupported`].
pub fn automaton(program: &Program, options: &ExploreOptions) -> Result<Graph> {
    for p in &program.processes {
        if let Some(n) = p
            .nodes
            .iter()
            .find(|n| matches!(n.kind, NodeKind::Alt { .. }))
        {
            return Err(Error::Unsupported {
                backend: "automaton",
                msg: format!(
                    "process {} uses alt at {}: automata-based compilation handles only programs without alt",
                    p.name, n.pos
                ),
            });
        }
    }
    let procs: Vec<ProcId> = (0..program.processes.len() as ProcId).collect();
    let start: Vec<Pc> = program.processes.iter().map(|p| p.entry).collect();
    let x = Explorer::new(
        program,
        "automaton".into(),
        procs,
        Vec::new(),
        options,
        true,
    );
    x.run(start)
}
