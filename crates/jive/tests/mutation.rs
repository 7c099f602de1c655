//! Mutation property test: random byte-level mutations of valid class files
//! never panic the reader, the subset check, the verifier or the decoder; and
//! whenever a mutant still passes them, instantiating it and invoking each of
//! its methods never panics either (it returns a value or a trap), and the
//! JIT gives the interpreter's results (value or trap, fuel, heap).
//!
//! The number of mutants is `JIVE_MUTATIONS` (default 20,000; CI sets
//! 100,000 or more). A failure prints the minimal mutation list proptest
//! found, which replays the case.

mod common;

use common::{RELEASES, class_bytes};
use jive::{Applet, Engine, Limits, Natives};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const BASES: &[&str] = &["Victim", "Arith", "RawUnet", "Counter", "Traps", "Bench"];

#[derive(Debug, Clone)]
enum Mutation {
    Set(usize, u8),
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
    /// Add a small delta to a big-endian u16 (indices, lengths, offsets).
    Nudge(usize, i8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::Set(p, b)),
        4 => (any::<usize>(), 0u8..8).prop_map(|(p, b)| Mutation::Flip(p, 1 << b)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(p, b)| Mutation::Insert(p, b)),
        1 => any::<usize>().prop_map(Mutation::Delete),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        3 => (any::<usize>(), -3i8..=3).prop_map(|(p, d)| Mutation::Nudge(p, d)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let n = bytes.len();
    match *m {
        Mutation::Set(p, b) => bytes[p % n] = b,
        Mutation::Flip(p, b) => bytes[p % n] ^= b,
        Mutation::Insert(p, b) => bytes.insert(p % (n + 1), b),
        Mutation::Delete(p) => {
            bytes.remove(p % n);
        }
        Mutation::Truncate(p) => bytes.truncate(p % n),
        Mutation::Nudge(p, d) => {
            let p = p % n.saturating_sub(1).max(1);
            if p + 1 < n {
                let v =
                    u16::from_be_bytes([bytes[p], bytes[p + 1]]).wrapping_add_signed(i16::from(d));
                bytes[p..p + 2].copy_from_slice(&v.to_be_bytes());
            }
        }
    }
}

/// Runs every phase on a mutant; panics only if jive does. A mutant that
/// still verifies runs on both engines: a disagreement is the error.
fn exercise(bytes: &[u8]) -> Result<(), String> {
    let limits = Limits {
        fuel: Some(20_000),
        heap_bytes: 64 * 1024,
        max_call_depth: 64,
        ..Limits::default()
    };
    let Ok(prog) = jive::check(bytes, &limits) else {
        return Ok(());
    };
    let mut natives = Natives::new();
    for n in &prog.natives {
        natives.register(&n.name, &n.descriptor, |_, _| Ok(0));
    }
    let methods: Vec<(String, usize)> = prog
        .info
        .methods
        .iter()
        .filter(|m| {
            !m.is_native && !m.name.starts_with('<') && m.sig.params.iter().all(|p| !p.is_ref())
        })
        .map(|m| (m.name.clone(), m.sig.params.len()))
        .collect();
    let Ok(mut applet) = Applet::load_with_engine(bytes, &natives, limits, Engine::Interpreter)
    else {
        return Ok(());
    };
    let mut jit = Applet::load_with_engine(bytes, &natives, limits, Engine::Jit)
        .map_err(|e| format!("JIT failed to compile a verified mutant: {e}"))?;
    for (name, n) in methods {
        for arg in [0, 1, -1, 7] {
            let args = vec![arg; n];
            let (a, b) = (applet.invoke(&name, &args), jit.invoke(&name, &args));
            let heap = |x: &Applet| (x.heap().bytes_in_use(), x.heap().object_count());
            if a != b || heap(&applet) != heap(&jit) {
                return Err(format!(
                    "{name}{args:?}: interpreter {a:?} with heap {:?}, JIT {b:?} with heap {:?}",
                    heap(&applet),
                    heap(&jit)
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn random_mutations_never_panic_any_phase() {
    let mut bases = Vec::new();
    for r in RELEASES {
        for b in BASES {
            match class_bytes(r, b) {
                Some(bytes) => bases.push(bytes),
                None => return,
            }
        }
    }
    let cases: u32 = std::env::var("JIVE_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (0..bases.len(), proptest::collection::vec(mutation(), 1..6));
    let started = std::time::Instant::now();
    let verified = std::cell::Cell::new(0u32);
    runner
        .run(&strategy, |(base, muts)| {
            let mut b = bases[base].clone();
            for m in &muts {
                apply(&mut b, m);
            }
            if jive::check(&b, &Limits::default()).is_ok() {
                verified.set(verified.get() + 1);
            }
            exercise(&b).map_err(TestCaseError::fail)
        })
        .unwrap();
    eprintln!(
        "{cases} mutants in {:.1?}; {} still verified and were run",
        started.elapsed(),
        verified.get()
    );
}
