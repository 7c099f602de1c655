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
