//! Fairness on fast paths (§4.4): a fast path that repeats, through an
//! `alt` with more than one viable arm, cannot starve a third process.
//!
//! The program: `F` sends a long stream on `fast`; `S` sends one message on
//! `slow`; `P` serves both with an `alt` and logs what it got. The
//! process-based code's rotating `alt` serves `S` at once. A fast path over
//! `P` and `F` always takes the `fast` arm (`slow` is a channel of a process
//! outside the path), so without the two mechanisms of §4.4 `S` would wait
//! for the whole stream:
//! - repetition counters: a path whose `follows` repeats aborts after
//!   `counter_bound` iterations, and the process-based code runs the `alt`;
//! - refusal: a path with a nondeterministic choice is not entered on every
//!   `refuse_every`-th eligible entry.
//!
//! Each test also runs the same program with the mechanism switched off and
//! checks that `S` then does starve: the mechanism, not luck, is what helps.

use esp::explore::ExploreOptions;
use esp::runtime::{Backend, Machine, Options};

const STREAM: i64 = 200_000;

fn program() -> String {
    format!(
        "channel fast(int);
channel slow(int);
channel log(int) external out;
process P {{
  var x;
  while (true) {{
    alt {{
      in(fast, x) {{ #1 out(log, x); }}
      in(slow, x) {{ out(log, x); }}
    }}
  }}
}}
process F {{ var i; while (i < {STREAM}) {{ out(fast, i); i = i + 1; }} }}
process S {{ out(slow, -1); }}
"
    )
}

/// A path that loops: both processes repeat their statement.
const REPEAT: &str = "fastpath stream {
  process P { statement fast as PF; start PF; follows (PF)*; }
  process F { statement fast as FS; start FS; follows (FS)*; }
}";

/// A path of one message: P exits at #1, right after the rendezvous. F is
/// first in the ready list afterwards (specification order), so it is back
/// at its `out` and blocked there when P comes back to the `alt`: P enters
/// the path again at once, and the process-based `alt` never runs in
/// between.
const ONE: &str = "fastpath one {
  process F { statement fast as FS; start FS; follows (FS)*; }
  process P { statement fast as PF, #1; start PF; exit #1; }
}";

/// Runs the program; returns how many `fast` messages P logged before S's,
/// and the machine's statistics.
fn slow_position(
    backend: Backend,
    spec: &str,
    counter_bound: u64,
    refuse_every: u32,
) -> (usize, esp::runtime::Stats) {
    let program = esp::compile(&program()).unwrap();
    let spec = esp::spec::parse(spec, &program).unwrap();
    let options = Options {
        backend,
        spec: Some(spec),
        explore: ExploreOptions {
            counter_bound,
            ..ExploreOptions::default()
        },
        refuse_every,
        ..Options::default()
    };
    let mut m = Machine::new(program, options).unwrap();
    m.run().unwrap();
    let log = m.take_output("log").unwrap();
    // Every message arrives exactly once, whatever the schedule.
    assert_eq!(log.len() as i64, STREAM + 1);
    let mut fast: Vec<i64> = log.iter().copied().filter(|&v| v >= 0).collect();
    fast.sort_unstable();
    assert!(fast.iter().copied().eq(0..STREAM));
    (log.iter().position(|&v| v == -1).unwrap(), m.stats())
}

#[test]
fn the_extracted_paths_are_nondeterministic() {
    let program = esp::compile(&program()).unwrap();
    for spec in [REPEAT, ONE] {
        let spec = esp::spec::parse(spec, &program).unwrap();
        let g = esp::explore::fast_path(&program, &spec.fastpaths[0], &ExploreOptions::default())
            .unwrap();
        assert_eq!(
            g.kind,
            esp::fp::Kind::FastPath {
                nondeterministic: true
            },
            "{}",
            g.name
        );
    }
}

#[test]
fn a_repeating_path_yields_to_the_third_process_after_its_counter_bound() {
    for backend in [Backend::Interp, Backend::Native] {
        // The default bound, 65536, is below the stream's length.
        let (at, stats) =
            slow_position(backend, REPEAT, ExploreOptions::default().counter_bound, 0);
        assert!(stats.entries > 0, "{backend:?}: the path was never entered");
        assert!(at <= 65_536 + 8, "{backend:?}: S waited for {at} messages");
        assert!(at < STREAM as usize / 2);
        // A small bound: S gets through sooner.
        let (at, _) = slow_position(backend, REPEAT, 100, 0);
        assert!(at <= 100 + 8, "{backend:?}: S waited for {at} messages");
        // No effective bound: S starves until the stream ends.
        let (at, _) = slow_position(backend, REPEAT, u64::MAX, 0);
        assert_eq!(
            at, STREAM as usize,
            "{backend:?}: with no bound S should starve"
        );
    }
}

#[test]
fn refusing_every_eighth_entry_lets_the_alt_serve_the_third_process() {
    for backend in [Backend::Interp, Backend::Native] {
        let (at, stats) = slow_position(backend, ONE, u64::MAX, 8);
        assert!(
            stats.entries > 0 && stats.refusals > 0,
            "{backend:?}: {stats:?}"
        );
        // Two refusals at most: the first may find the alt's rotating start
        // on the fast arm, the next one finds it on the slow arm.
        assert!(
            at <= 2 * 8 + 2,
            "{backend:?}: S waited for {at} messages ({stats:?})"
        );
        // Never refusing: S starves until the stream ends.
        let (at, stats) = slow_position(backend, ONE, u64::MAX, 0);
        assert_eq!(stats.refusals, 0);
        assert_eq!(
            at, STREAM as usize,
            "{backend:?}: never refusing should starve S ({stats:?})"
        );
    }
}

#[test]
fn both_mechanisms_together_with_the_default_options() {
    for backend in [Backend::Interp, Backend::Native] {
        for spec in [REPEAT, ONE] {
            let program = esp::compile(&program()).unwrap();
            let options = Options {
                backend,
                spec: Some(esp::spec::parse(spec, &program).unwrap()),
                ..Options::default()
            };
            let mut m = Machine::new(program, options).unwrap();
            m.run().unwrap();
            let log = m.take_output("log").unwrap();
            let at = log.iter().position(|&v| v == -1).unwrap();
            assert!(at <= 65_536 + 8, "{backend:?}: S waited for {at} messages");
        }
    }
}

/// The program of a new user's that starved with a deterministic
/// specification: `onlyA`'s path narrows `Merge`'s `alt` to the `a` arm, and
/// every entry ended at the repetition bound and was followed at once by
/// another, so `SrcB`'s message waited for the whole of `inA`.
const MERGE: &str = "channel inA(int) external in; channel inB(int) external in; channel a(int); channel b(int); channel o(int,int) external out;
process SrcA { var v; while (true) { in(inA, v); out(a, v); } }
process SrcB { var v; while (true) { in(inB, v); out(b, v); } }
process Merge { var v; while (true) { #1 alt { in(a, v) { out(o, 0, v); } in(b, v) { out(o, 1, v); } } } }";

const ONLY_A: &str = "fastpath onlyA { process SrcA { statement inA, a as OA; start OA; follows (inA OA)*; } process Merge { statement a as MA, b, #1; start #1; follows (MA #1)*; } }";

/// Where `SrcB`'s value comes out (0-based) among `o`'s messages.
fn merge_position(
    backend: Backend,
    spec: &str,
    values: i64,
    refuse_every: u32,
) -> (usize, esp::runtime::Stats) {
    let program = esp::compile(MERGE).unwrap();
    let options = Options {
        backend,
        spec: Some(esp::spec::parse(spec, &program).unwrap()),
        refuse_every,
        ..Options::default()
    };
    let mut m = Machine::new(program, options).unwrap();
    for v in 0..values {
        m.push("inA", &[v]).unwrap();
    }
    m.push("inB", &[-1]).unwrap();
    m.run().unwrap();
    let o = m.take_output("o").unwrap();
    assert_eq!(o.len() as i64, 2 * (values + 1));
    (o.chunks(2).position(|t| t[0] == 1).unwrap(), m.stats())
}

#[test]
fn a_narrowed_alt_on_a_deterministic_path_is_marked_for_refusals() {
    let program = esp::compile(MERGE).unwrap();
    let spec = esp::spec::parse(ONLY_A, &program).unwrap();
    let g =
        esp::explore::fast_path(&program, &spec.fastpaths[0], &ExploreOptions::default()).unwrap();
    assert_eq!(
        g.kind,
        esp::fp::Kind::FastPath {
            nondeterministic: true
        }
    );
}

#[test]
fn the_merge_program_serves_b_within_the_bound_after_an_abort() {
    let bound = ExploreOptions::default().counter_bound as usize;
    for backend in [Backend::Interp, Backend::Native] {
        let (at, stats) = merge_position(backend, ONLY_A, 300_000, 8);
        // The first entry ends at the repetition bound; the next eligible
        // entry is refused, and the process-based `alt` (two arms) serves B
        // within two of its executions.
        assert!(
            at <= bound + 1 + 2,
            "{backend:?}: B came out after {at} values of A ({stats:?})"
        );
        assert!(
            stats.entries > 0 && stats.refusals > 0,
            "{backend:?}: {stats:?}"
        );
        // With refusals switched off B waits for all of A.
        let (at, _) = merge_position(backend, ONLY_A, 300_000, 0);
        assert_eq!(at, 300_000, "{backend:?}: without refusals B should starve");
    }
}

/// Several paths that start at the same statement and narrow the same
/// `alt`: a refusal of one is not an entry of the next. The refused
/// statement runs in the process-based code, so `B` is served within the
/// bound of one path however many there are (it waited for three entries,
/// 196,612 values, with two copies of `onlyA` when the next path took the
/// refused entry).
#[test]
fn a_refused_entry_is_not_taken_by_another_path_at_the_same_statement() {
    let bound = ExploreOptions::default().counter_bound as usize;
    for copies in [2, 3] {
        let spec: String = (0..copies)
            .map(|k| ONLY_A.replace("onlyA", &format!("onlyA{k}")))
            .collect::<Vec<_>>()
            .join("\n");
        for backend in [Backend::Interp, Backend::Native] {
            let (at, stats) = merge_position(backend, &spec, 300_000, 8);
            assert!(
                at <= bound + 1 + 2,
                "{backend:?}, {copies} paths: B came out after {at} values of A ({stats:?})"
            );
            assert!(stats.refusals > 0, "{backend:?}: {stats:?}");
        }
    }
}

/// A random merge program: `n` sources stream `per` values each on `f0..`,
/// `S` sends one value (-1) on `slow`, and `M` serves every channel with one
/// `alt` whose arms come in a random order, some with extra local code and
/// a `#N` inside.
fn merge_program(rng: &mut esp::random::Rng, n: usize, per: i64) -> String {
    let mut t = String::from("channel slow(int); channel log(int) external out;\n");
    for i in 0..n {
        t += &format!("channel f{i}(int);\n");
        t += &format!(
            "process F{i} {{ var k; while (k < {per}) {{ out(f{i}, k * {n} + {i}); k = k + 1; }} }}\n"
        );
    }
    t += "process S { out(slow, -1); }\n";
    let mut arms: Vec<String> = (0..n)
        .map(|i| {
            let extra = if rng.chance(50) { "y = y + x; " } else { "" };
            format!("in(f{i}, x) {{ {extra}#{} out(log, x); }}", i + 2)
        })
        .collect();
    arms.push("in(slow, x) { out(log, x); }".into());
    for i in (1..arms.len()).rev() {
        arms.swap(i, rng.below(i + 1));
    }
    t += &format!(
        "process M {{ var x, y; while (true) {{ #1 alt {{ {} }} }} }}\n",
        arms.join(" ")
    );
    t
}

/// A random specification over `M` and some sources that never lists `S`:
/// one to three paths, each of which narrows `M`'s `alt` (and may choose
/// among the sources' arms), repeats or exits after one message, and starts
/// at `#1` or at an arm; several paths may start at the same statement.
/// Returns the text, the number of paths and the most processes in one.
fn merge_spec(rng: &mut esp::random::Rng, n: usize) -> (String, usize, usize) {
    let paths = 1 + rng.below(3);
    let mut t = String::new();
    let mut most = 0;
    for b in 0..paths {
        let mut srcs: Vec<usize> = (0..n).filter(|_| rng.chance(60)).collect();
        if srcs.is_empty() {
            srcs.push(rng.below(n));
        }
        most = most.max(1 + srcs.len());
        t += &format!("fastpath r{b} {{\n");
        if rng.chance(50) {
            t += "  schedule downstream;\n";
        }
        let arms: Vec<String> = srcs.iter().map(|i| format!("M{i}")).collect();
        let decl: Vec<String> = srcs.iter().map(|i| format!("f{i} as M{i}")).collect();
        let slow = if rng.chance(50) { ", slow" } else { "" };
        let choice = arms.join(" | ");
        let (start, follows) = match rng.below(3) {
            0 => ("#1".to_string(), format!("(({choice}) #1)*")),
            1 => (format!("({choice})"), format!("(#1 ({choice}))*")),
            _ => ("#1".to_string(), format!("({choice})")),
        };
        let start = if start.starts_with('(') {
            arms[0].clone()
        } else {
            start
        };
        let exit = if !follows.ends_with('*') || rng.chance(50) {
            " exit #1;"
        } else {
            ""
        };
        t += &format!(
            "  process M {{ statement {}, #1{slow}; start {start}; follows {follows};{exit} }}\n",
            decl.join(", ")
        );
        for &i in &srcs {
            t += &format!(
                "  process F{i} {{ statement f{i} as S{i}; start S{i}; follows (S{i})*; }}\n"
            );
        }
        t += "}\n";
    }
    (t, paths, most)
}

/// Random merge programs with random specifications: `S`, ready from the
/// start and for ever (its partner `M` comes back to the `alt` after every
/// message), is served within the bound docs/esp.md states: a path's entry
/// runs at most `counter_bound` iterations of each repetition; each refusal
/// runs the `alt` in the process-based code, which takes `S`'s arm within
/// `arms` executions; refusals come at the first eligible entry after every
/// abort and at every `refuse_every`-th eligible entry of each of the
/// `paths` paths, so at most `paths * refuse_every` entries come between
/// two of them. So `S` is served before `M` has logged
/// `arms * (paths * refuse_every + 1) * (counters * (counter_bound + 1) + arms)`
/// messages. Each program runs with refusals off too, and over the run at
/// least one of them starves `S` there: the refusals, not the schedule, are
/// what serves it. Half the programs' traces (on both backends) are judged
/// by the model checker (`mc::accepts`): the refusals choose among the
/// program's own schedules.
#[test]
fn random_merges_serve_a_process_ready_for_ever_within_the_bound() {
    let count: u64 = std::env::var("ESP_FAIRNESS_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let counter_bound = 40u64;
    let refuse_every = 4u32;
    let per = 10_000i64;
    let mut starved_without = 0;
    let mut entered = 0;
    for seed in 0..count {
        let mut rng = esp::random::Rng::new(seed);
        let n = 1 + rng.below(3);
        let text = merge_program(&mut rng, n, per);
        let (spec_text, paths, counters) = merge_spec(&mut rng, n);
        let program = esp::compile(&text).unwrap();
        let spec = match esp::spec::parse(&spec_text, &program) {
            Ok(s) => s,
            Err(e) => panic!("seed {seed}: {e}\n{spec_text}"),
        };
        let arms = n + 1;
        let bound = arms
            * (paths * refuse_every as usize + 1)
            * (counters * (counter_bound as usize + 1) + arms);
        assert!(
            bound < n * per as usize / 2,
            "seed {seed}: the stream is too short"
        );
        let backend = if seed % 2 == 0 {
            Backend::Native
        } else {
            Backend::Interp
        };
        let run = |refuse_every: u32| {
            let program = esp::compile(&text).unwrap();
            let options = Options {
                backend,
                spec: Some(spec.clone()),
                explore: ExploreOptions {
                    counter_bound,
                    ..ExploreOptions::default()
                },
                refuse_every,
                ..Options::default()
            };
            let mut m = match Machine::new(program, options) {
                Ok(m) => m,
                Err(e) => panic!("seed {seed}: {e}\n{text}{spec_text}"),
            };
            let judge = seed % 4 < 2;
            m.set_tracing(judge);
            m.run().unwrap();
            if judge {
                // The schedule the refusals produce is one the program has.
                let options = esp::mc::CheckOptions {
                    max_states: 2_000_000,
                    ..esp::mc::CheckOptions::default()
                };
                let program = esp::compile(&text).unwrap();
                assert!(
                    esp::mc::accepts(&program, &[], m.trace(), &options).unwrap(),
                    "seed {seed}: the model checker rejects the trace"
                );
            }
            let log = m.take_output("log").unwrap();
            assert_eq!(log.len(), n * per as usize + 1, "seed {seed}");
            (log.iter().position(|&v| v == -1).unwrap(), m.stats())
        };
        let (at, stats) = run(refuse_every);
        assert!(
            at <= bound,
            "seed {seed}: S waited for {at} messages (bound {bound}, {stats:?})\n{text}{spec_text}"
        );
        entered += usize::from(stats.entries > 0);
        let (at, _) = run(0);
        starved_without += usize::from(at > bound);
    }
    assert!(
        entered as u64 > count / 2,
        "only {entered} of {count} programs entered a path"
    );
    assert!(starved_without > 0, "no program starved S without refusals");
}

/// A path over one process whose loop reads and writes external channels
/// only, through statements the specification does not list: no
/// repetition counts its trips and no rendezvous lies on them.
const EXTERNAL_LOOP: &str =
    "channel inA(int) external in; channel w(int); channel o(int) external out;
process M { var x; #1 while (true) { alt { in(inA, x) { out(o, x); } in(w, x) { out(o, -1); } } } }
process W { out(w, -1); }";

/// `M` enters the path at `#1`, before its loop, and loops there on `inA`:
/// the `w` arm is narrowed away (`W` is outside the path). The loop gets a
/// counter, so the path aborts after `counter_bound` trips and the
/// process-based `alt` serves `W` within its two arms; without the counter
/// `W` waited for all 300,000 values.
#[test]
fn a_loop_over_unlisted_external_messages_is_counted() {
    let bound = ExploreOptions::default().counter_bound as usize;
    for backend in [Backend::Interp, Backend::Native] {
        let program = esp::compile(EXTERNAL_LOOP).unwrap();
        let spec = esp::spec::parse(
            "fastpath f { process M { statement #1; start #1; } }",
            &program,
        )
        .unwrap();
        let options = Options {
            backend,
            spec: Some(spec),
            ..Options::default()
        };
        let mut m = Machine::new(program, options).unwrap();
        for v in 0..300_000 {
            m.push("inA", &[v]).unwrap();
        }
        m.run().unwrap();
        let o = m.take_output("o").unwrap();
        assert_eq!(o.len(), 300_001);
        let at = o.iter().position(|&v| v == -1).unwrap();
        let stats = m.stats();
        assert!(
            at <= bound + 2,
            "{backend:?}: W came out after {at} values ({stats:?})"
        );
        assert_eq!((stats.entries, stats.aborts), (1, 1), "{backend:?}");
        // Every value of `inA` comes out once, in order.
        let a: Vec<i64> = o.iter().copied().filter(|&v| v >= 0).collect();
        assert!(a.iter().copied().eq(0..300_000), "{backend:?}");
    }
}

/// A host with unlimited input for the graph interpreter: every external
/// in channel always has a message (until `cap` messages, so that a path
/// that never ends would still stop the test), every message is counted.
struct Unlimited {
    arity: Vec<usize>,
    messages: u64,
    cap: u64,
}

impl esp::fp::Io for Unlimited {
    fn recv(&mut self, chan: esp::ir::ChanId, dst: &mut [i64]) -> bool {
        if self.messages >= self.cap || dst.len() != self.arity[chan as usize] {
            return false;
        }
        self.messages += 1;
        for (k, d) in dst.iter_mut().enumerate() {
            *d = (self.messages as i64 + k as i64) % 37;
        }
        true
    }
    fn send(&mut self, _chan: esp::ir::ChanId, _src: &[i64]) {
        self.messages += 1;
    }
    fn call(&mut self, f: esp::ir::ExternId, args: &[i64]) -> i64 {
        let (name, _) = esp::random::EXTERNS[f as usize % esp::random::EXTERNS.len()];
        esp::random::host(name, args)
    }
}

/// The first half of the bound, for every specification: one entry of a
/// path is bounded even when input never runs out. Random programs with
/// `alt` and random specifications (`esp::random`), each path extracted
/// with a counter bound of 3 and optimized as the runtime does, run on the
/// graph interpreter from their entry with unlimited input: each leaves
/// after at most `(counters * (counter_bound + 1) + 1) * io` external
/// messages, where `io` is the number of blocks that receive or send one.
/// Every cycle of a graph passes a counter (a repetition's, or the loop
/// counter of a cycle through a channel operation), so between two counts
/// a run meets each of those blocks at most once, and over the bound of any
/// counter it aborts.
#[test]
fn random_paths_leave_within_their_counters_with_unlimited_input() {
    let count: u64 = std::env::var("ESP_FAIRNESS_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(300, |n: u64| 5 * n);
    let counter_bound = 3u64;
    let options = ExploreOptions {
        counter_bound,
        ..ExploreOptions::default()
    };
    let generate = esp::random::GenOptions {
        kind: esp::random::Kind::Alt,
        ..esp::random::GenOptions::default()
    };
    let mut paths = 0;
    let mut looped = 0;
    for seed in 0..count {
        let text = esp::random::program(seed, &generate);
        let program = esp::compile(&text).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
        let spec_text = esp::random::spec(&program, seed);
        let spec = esp::spec::parse(&spec_text, &program)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}{spec_text}"));
        let layout = esp::ir::Layout::of(&program);
        for fpath in &spec.fastpaths {
            let Ok(mut g) = esp::explore::fast_path(&program, fpath, &options) else {
                continue;
            };
            esp::opt::optimize(&program, &mut g);
            let io_blocks = g
                .blocks
                .iter()
                .filter(|b| {
                    matches!(
                        b.term,
                        esp::fp::Term::Recv { .. } | esp::fp::Term::Send { .. }
                    )
                })
                .count() as u64;
            let bound = (g.counters.len() as u64 * (counter_bound + 1) + 1) * io_blocks;
            let mut io = Unlimited {
                arity: program.channels.iter().map(|c| c.arity as usize).collect(),
                messages: 0,
                cap: bound + 1_000,
            };
            let mut vars = vec![0i64; layout.slots as usize];
            let mut pcs = vec![u32::MAX; program.processes.len()];
            esp::fp::run(&g, 0, &mut vars, &mut pcs, &mut io)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}{spec_text}"));
            assert!(
                io.messages <= bound,
                "seed {seed}, path {}: {} messages in one entry (bound {bound})\n{text}{spec_text}",
                g.name,
                io.messages
            );
            paths += 1;
            looped += u64::from(io.messages > io_blocks);
        }
    }
    assert!(
        paths as u64 > count / 2,
        "only {paths} paths from {count} programs"
    );
    assert!(looped > 0, "no path looped: the test shows nothing");
}
