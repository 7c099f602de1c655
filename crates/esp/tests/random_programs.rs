//! Random programs on every backend, with and without random fast-path
//! specifications, judged against the reference interpreter and the model
//! checker. Specifications are hints: every run with one must be an
//! execution the program has without it (the same one, for Kahn programs).
//!
//! - Kahn programs (no `alt`, one reader and one writer per channel) are
//!   deterministic: every backend must produce exactly the interpreter's
//!   messages on each external channel, end in the same status, and leave
//!   every process at the same pc with the same values in the variables live
//!   there (a fast path need not store a dead variable).
//! - Programs with `alt` may legitimately differ between backends (a fast
//!   path's schedule is not the process-based one): every backend's trace
//!   must be one the program can produce, as `mc::accepts` decides from the
//!   language's semantics alone, independently of the runtime.
//!
//! `ESP_RANDOM_PROGRAMS` sets how many programs (default 1,000; half of each
//! kind); `ESP_RANDOM_SEED` runs the one program of that seed, printing it.

use std::collections::HashMap;
use std::sync::Arc;

use esp::explore::ExploreOptions;
use esp::ir::{ChanId, Comm, NodeKind, Operand, Program};
use esp::mc::{self, CheckOptions, ExternModel};
use esp::random::{self, GenOptions, Kind};
use esp::runtime::{Backend, Event, Machine, Options, Stats, Status};

/// What one run produced.
#[derive(Debug)]
struct Outcome {
    status: Status,
    trace: Vec<Event>,
    pcs: Vec<u32>,
    vars: Vec<i64>,
    stats: Stats,
}

fn run(program: &Program, inputs: &[(ChanId, Vec<i64>)], options: Options) -> esp::Result<Outcome> {
    let mut m = Machine::new(program.clone(), options)?;
    for (name, _) in random::EXTERNS {
        let name = name.to_string();
        let f = name.clone();
        m.bind_extern(&name, move |args| random::host(&f, args))?;
    }
    m.set_tracing(true);
    for (chan, fields) in inputs {
        m.push(&program.channels[*chan as usize].name, fields)?;
    }
    let status = m.run()?;
    let (pcs, vars) = m.state();
    Ok(Outcome {
        status,
        trace: m.trace().to_vec(),
        pcs: pcs.to_vec(),
        vars: vars.to_vec(),
        stats: m.stats(),
    })
}

/// The variables live at each pc of each process (used before written on
/// some path from there).
fn liveness(program: &Program) -> Vec<Vec<Vec<bool>>> {
    let mut all = Vec::new();
    for p in &program.processes {
        let n = p.nodes.len();
        let nv = p.vars.len();
        let mut live = vec![vec![false; nv]; n];
        let mut changed = true;
        while changed {
            changed = false;
            for pc in (0..n).rev() {
                let mut now = vec![false; nv];
                let gen_expr = |e: &esp::ir::Expr, now: &mut Vec<bool>| {
                    e.for_each_var(&mut |v| now[v as usize] = true)
                };
                let flow = |next: u32, defs: &[u32], now: &mut Vec<bool>, live: &Vec<Vec<bool>>| {
                    for v in 0..nv {
                        if live[next as usize][v] && !defs.contains(&(v as u32)) {
                            now[v] = true;
                        }
                    }
                };
                let comm =
                    |op: &Comm, next: u32, now: &mut Vec<bool>, live: &Vec<Vec<bool>>| match op {
                        Comm::In { vars, .. } => flow(next, vars, now, live),
                        Comm::Out { args, .. } => {
                            for a in args {
                                if let Operand::Var(v) = a {
                                    now[*v as usize] = true;
                                }
                            }
                            flow(next, &[], now, live);
                        }
                    };
                match &p.nodes[pc].kind {
                    NodeKind::Assign { var, value, next } => {
                        flow(*next, &[*var], &mut now, &live);
                        gen_expr(value, &mut now);
                    }
                    NodeKind::Eval { value: e, next } | NodeKind::Assert { cond: e, next } => {
                        flow(*next, &[], &mut now, &live);
                        gen_expr(e, &mut now);
                    }
                    NodeKind::Branch { cond, then, els } => {
                        flow(*then, &[], &mut now, &live);
                        flow(*els, &[], &mut now, &live);
                        gen_expr(cond, &mut now);
                    }
                    NodeKind::Nop { next } => flow(*next, &[], &mut now, &live),
                    NodeKind::Comm { op, next } => comm(op, *next, &mut now, &live),
                    NodeKind::Alt { arms } => arms
                        .iter()
                        .for_each(|a| comm(&a.op, a.next, &mut now, &live)),
                    NodeKind::Halt => {}
                }
                if now != live[pc] {
                    live[pc] = now;
                    changed = true;
                }
            }
        }
        all.push(live);
    }
    all
}

/// Messages per channel, in order.
fn per_channel(trace: &[Event]) -> HashMap<(bool, ChanId), Vec<Vec<i64>>> {
    let mut m: HashMap<(bool, ChanId), Vec<Vec<i64>>> = HashMap::new();
    for e in trace {
        match e {
            Event::In { chan, fields } => m.entry((true, *chan)).or_default().push(fields.clone()),
            Event::Out { chan, fields } => {
                m.entry((false, *chan)).or_default().push(fields.clone())
            }
        }
    }
    m
}

fn check_options() -> CheckOptions {
    let mut o = CheckOptions {
        max_states: 2_000_000,
        ..CheckOptions::default()
    };
    for (name, _) in random::EXTERNS {
        let f = name.to_string();
        o.externs.insert(
            name.to_string(),
            ExternModel::Function(Arc::new(move |a| random::host(&f, a))),
        );
    }
    o
}

#[derive(Default, Debug)]
struct Tally {
    programs: usize,
    runs: usize,
    /// Runs whose specification entered a fast path at least once.
    entered: usize,
    spec_runs: usize,
    /// Backends that declined a program (state limit, automaton of an
    /// unsupported program), by reason.
    declined: HashMap<String, usize>,
    outputs: usize,
    stats: Stats,
}

fn add(t: &mut Stats, s: &Stats) {
    t.entries += s.entries;
    t.exits += s.exits;
    t.aborts += s.aborts;
    t.refusals += s.refusals;
    t.rendezvous += s.rendezvous;
    t.suspends += s.suspends;
}

/// Runs one program everywhere; returns a description of the first
/// disagreement.
fn one(seed: u64, tally: &mut Tally, verbose: bool) -> Result<(), String> {
    let kind = if seed.is_multiple_of(2) {
        Kind::Kahn
    } else {
        Kind::Alt
    };
    let src = random::program(
        seed,
        &GenOptions {
            kind,
            ..GenOptions::default()
        },
    );
    let program = esp::compile(&src)
        .map_err(|e| format!("generated program does not compile: {e}\n{src}"))?;
    let spec_src = random::spec(&program, seed);
    let spec = esp::spec::parse(&spec_src, &program)
        .map_err(|e| format!("generated specification does not parse: {e}\n{src}\n{spec_src}"))?;
    let inputs = random::inputs(&program, seed, 8);
    if verbose {
        println!("{src}\n{spec_src}\ninputs: {inputs:?}");
    }
    let context = || format!("seed {seed}\n{src}\n{spec_src}\ninputs: {inputs:?}");
    tally.programs += 1;

    let explore = ExploreOptions {
        state_limit: 20_000,
        ..ExploreOptions::default()
    };
    let options = |backend, spec: Option<&esp::spec::Spec>| Options {
        backend,
        spec: spec.cloned(),
        explore: explore.clone(),
        ..Options::default()
    };
    let reference = run(&program, &inputs, options(Backend::Interp, None))
        .map_err(|e| format!("the interpreter failed: {e}\n{}", context()))?;
    tally.outputs += reference
        .trace
        .iter()
        .filter(|e| matches!(e, Event::Out { .. }))
        .count();

    // The interpreter itself is judged by the model checker.
    let copts = check_options();
    let accepted = |o: &Outcome| mc::accepts(&program, &inputs, &o.trace, &copts);
    match accepted(&reference) {
        Ok(true) => {}
        Ok(false) => {
            return Err(format!(
                "the model checker rejects the interpreter's trace {:?}\n{}",
                reference.trace,
                context()
            ));
        }
        Err(e) => return Err(format!("accepts failed: {e}\n{}", context())),
    }

    let mut configs = vec![
        ("interp+spec", Backend::Interp, Some(&spec)),
        ("native", Backend::Native, None),
        ("native+spec", Backend::Native, Some(&spec)),
    ];
    if kind == Kind::Kahn {
        configs.push(("automata", Backend::Automata, None));
    }
    let live = liveness(&program);
    let layout = esp::ir::Layout::of(&program);
    for (name, backend, spec) in configs {
        let out = match run(&program, &inputs, options(backend, spec)) {
            Ok(o) => o,
            Err(esp::Error::StateLimit { .. }) => {
                *tally
                    .declined
                    .entry(format!("{name}: state limit"))
                    .or_default() += 1;
                continue;
            }
            Err(esp::Error::Unsupported { backend, msg }) if name == "automata" => {
                *tally
                    .declined
                    .entry(format!("{name}: {backend}: {msg}"))
                    .or_default() += 1;
                continue;
            }
            Err(e) => return Err(format!("{name} failed: {e}\n{}", context())),
        };
        tally.runs += 1;
        add(&mut tally.stats, &out.stats);
        if spec.is_some() {
            tally.spec_runs += 1;
            if out.stats.entries > 0 {
                tally.entered += 1;
            }
        }
        if kind == Kind::Kahn {
            let (a, b) = (per_channel(&reference.trace), per_channel(&out.trace));
            if a != b {
                return Err(format!(
                    "{name} disagrees with the interpreter on the external channels:\n  interp: {:?}\n  {name}: {:?}\n{}",
                    reference.trace,
                    out.trace,
                    context()
                ));
            }
            if out.status != reference.status {
                return Err(format!(
                    "{name} ends {:?}, the interpreter {:?}\n{}",
                    out.status,
                    reference.status,
                    context()
                ));
            }
            if out.pcs != reference.pcs {
                return Err(format!(
                    "{name} leaves pcs {:?}, the interpreter {:?}\n{}",
                    out.pcs,
                    reference.pcs,
                    context()
                ));
            }
            for (p, proc) in program.processes.iter().enumerate() {
                let pc = reference.pcs[p] as usize;
                for (v, info) in proc.vars.iter().enumerate() {
                    let slot = layout.slot(p as u32, v as u32) as usize;
                    if live[p][pc][v] && out.vars[slot] != reference.vars[slot] {
                        return Err(format!(
                            "{name}: process {} variable {} (live at pc {pc}) is {}, the interpreter's {}\n{}",
                            proc.name,
                            info.name,
                            out.vars[slot],
                            reference.vars[slot],
                            context()
                        ));
                    }
                }
            }
        }
        // Every trace, of either kind, must be one the program can produce.
        match accepted(&out) {
            Ok(true) => {}
            Ok(false) => {
                return Err(format!(
                    "the model checker rejects {name}'s trace {:?}\n{}",
                    out.trace,
                    context()
                ));
            }
            Err(e) => {
                return Err(format!(
                    "accepts failed on {name}'s trace: {e}\n{}",
                    context()
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn random_programs_agree_on_every_backend_with_and_without_specifications() {
    if let Ok(seed) = std::env::var("ESP_RANDOM_SEED") {
        let seed: u64 = seed.parse().expect("ESP_RANDOM_SEED is a number");
        let mut tally = Tally::default();
        if let Err(e) = one(seed, &mut tally, true) {
            panic!("{e}");
        }
        println!("{tally:?}");
        return;
    }
    let n: u64 = std::env::var("ESP_RANDOM_PROGRAMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    for seed in 0..n {
        if let Err(e) = one(seed, &mut tally, false) {
            failures.push((seed, e));
        }
    }
    println!("{tally:#?}");
    if !failures.is_empty() {
        let seeds: Vec<u64> = failures.iter().map(|f| f.0).collect();
        panic!(
            "{} of {n} programs disagree (seeds {seeds:?}); the first:\n{}",
            failures.len(),
            failures[0].1
        );
    }
    assert_eq!(tally.programs as u64, n);
    // The tests are only as good as what they exercise.
    assert!(
        tally.outputs as u64 >= 5 * n,
        "too little output: {tally:?}"
    );
    assert!(
        tally.entered * 4 >= tally.spec_runs,
        "fast paths too rarely entered: {tally:?}"
    );
}

/// The generator's promises, checked by the model checker: its asserts hold
/// and it never divides by zero, whatever the input; its loops yield.
#[test]
fn generated_programs_never_fail_an_assertion_or_divide_by_zero() {
    let mut options = check_options();
    options.domain = vec![0, 1, 5, -1, i64::MIN];
    options.max_inputs = 2;
    options.max_states = 10_000;
    let (mut exhaustive, mut deadlocks) = (0, 0);
    for seed in 0..80u64 {
        let kind = if seed % 2 == 0 { Kind::Kahn } else { Kind::Alt };
        let src = random::program(
            seed,
            &GenOptions {
                kind,
                ..GenOptions::default()
            },
        );
        let program = esp::compile(&src).unwrap();
        let r = mc::check(&program, &options).unwrap();
        match &r.violation {
            None => {}
            Some(mc::Violation::Deadlock { .. }) => deadlocks += 1,
            Some(v) => panic!("seed {seed}: {v}\n{r}\n{src}"),
        }
        // Finished within the state bound (a violation stops the search
        // early, which also finishes it).
        exhaustive += r.stopped.is_none() as usize;
    }
    println!("{exhaustive} of 80 exhaustive, {deadlocks} deadlocks (a root that halted)");
    assert!(exhaustive >= 20, "{exhaustive}");
}
