//! Criterion benchmarks of jive: the U-Net/SLE paper's suite (§4) on the
//! interpreter and on the JIT, each with fuel metering off and on, and
//! load+verify (+compile, for the JIT) of the paper's Figure 2 applet and
//! of the benchmark class. The side-by-side comparison with HotSpot, with
//! the paper's targets judged (JIT speedup over the interpreter, JIT time
//! against C2's, the cost of fuel metering, RawUnet's load time), is
//! `fastpath bench jive`.
//!
//! Where the JIT cannot run (no native backend, or it refuses the class),
//! its benchmarks are skipped with the reason.

use criterion::{BenchmarkId, Criterion, criterion_main};
use jive::{Applet, Engine, Limits, LoadError, Natives};

fn classes() -> Option<std::path::PathBuf> {
    match jive::APPLET_CLASSES {
        Some(d) => Some(std::path::PathBuf::from(d).join("default")),
        None => {
            eprintln!(
                "skipped: javac not found (install a JDK, e.g. apt-get install openjdk-17-jdk-headless)"
            );
            None
        }
    }
}

/// The suite: (method, n).
const CASES: &[(&str, i32)] = &[
    ("nullLoop", 10_000),
    ("nullCall", 10_000),
    ("fieldRead", 10_000),
    ("fieldWrite", 10_000),
    ("arrayRead", 10_000),
    ("arrayWrite", 10_000),
    ("math", 10_000),
    ("mathField", 10_000),
    ("mathArray", 10_000),
    ("qsortReverse", 1000),
    ("rand", 1000),
    ("fibonacci", 40),
];

/// Loads `bytes` on `engine`; `None` (with the reason printed) if the JIT
/// refuses it.
fn load(bytes: &[u8], natives: &Natives, limits: Limits, engine: Engine) -> Option<Applet> {
    match Applet::load_with_engine(bytes, natives, limits, engine) {
        Ok(a) => Some(a),
        Err(LoadError::Jit(e)) => {
            eprintln!("skipped: {engine:?} benchmarks: JIT unavailable: {e}");
            None
        }
        Err(e) => panic!("the benchmark class does not load: {e}"),
    }
}

/// The suite on one engine, metering off and on, each method resolved once
/// ([`Applet::method`]) so that the loop times the call alone.
fn suite_on(c: &mut Criterion, bytes: &[u8], engine: Engine, group: &str) {
    let heap = Limits {
        heap_bytes: 16 << 20,
        ..Limits::unmetered()
    };
    let Some(mut off) = load(bytes, &Natives::new(), heap, engine) else {
        return;
    };
    let Some(mut on) = load(
        bytes,
        &Natives::new(),
        Limits {
            fuel: Some(u64::MAX / 2),
            ..heap
        },
        engine,
    ) else {
        return;
    };
    let mut g = c.benchmark_group(group);
    for &(m, n) in CASES {
        let (m_off, m_on) = (off.method(m).unwrap(), on.method(m).unwrap());
        g.bench_with_input(BenchmarkId::new("fuel-off", m), &n, |b, &n| {
            b.iter(|| off.call(&m_off, &[n], None).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("fuel-on", m), &n, |b, &n| {
            b.iter(|| on.call(&m_on, &[n], None).unwrap())
        });
    }
    g.finish();
}

fn suite(c: &mut Criterion) {
    let Some(dir) = classes() else { return };
    let bytes = std::fs::read(dir.join("Bench.class")).unwrap();
    suite_on(c, &bytes, Engine::Interpreter, "jive-interpreter");
    suite_on(c, &bytes, Engine::Jit, "jive-jit");
}

fn load_verify(c: &mut Criterion) {
    let Some(dir) = classes() else { return };
    let rawunet = std::fs::read(dir.join("RawUnet.class")).unwrap();
    let bench = std::fs::read(dir.join("Bench.class")).unwrap();
    let natives = Natives::figure2_stubs();
    let limits = Limits::default();
    let mut g = c.benchmark_group("jive-load");
    g.bench_function("check RawUnet (Figure 2)", |b| {
        b.iter(|| jive::check(&rawunet, &limits).unwrap())
    });
    g.bench_function("load RawUnet (Figure 2)", |b| {
        b.iter(|| {
            Applet::load_with_engine(&rawunet, &natives, limits, Engine::Interpreter).unwrap()
        })
    });
    g.bench_function("check Bench", |b| {
        b.iter(|| jive::check(&bench, &limits).unwrap())
    });
    // Load + verify + compile: the same load on the JIT (the target for
    // RawUnet is at most 100 us), and the compile alone, outside the code
    // cache. Each iteration's applet is dropped within the iteration, so
    // that the next load compiles again rather than sharing the code of a
    // live identical applet: the time includes retiring the code (wall
    // time; `fastpath bench jive` gives the CPU time without the unload).
    if load(&rawunet, &natives, limits, Engine::Jit).is_some() {
        g.bench_function("load+compile RawUnet (Figure 2, JIT)", |b| {
            b.iter(|| Applet::load_with_engine(&rawunet, &natives, limits, Engine::Jit).unwrap())
        });
        let prog = jive::check(&rawunet, &limits).unwrap();
        g.bench_function("compile RawUnet (Figure 2)", |b| {
            b.iter(|| jive::jit::compile_standalone(&prog).unwrap())
        });
        let prog = jive::check(&bench, &limits).unwrap();
        if jive::jit::compile_standalone(&prog).is_ok() {
            g.bench_function("compile Bench", |b| {
                b.iter(|| jive::jit::compile_standalone(&prog).unwrap())
            });
        }
    }
    g.finish();
}

/// The criterion entry points (generated, hence undocumented).
mod groups {
    #![allow(missing_docs)]
    use super::{load_verify, suite};
    criterion::criterion_group!(benches, suite, load_verify);
}
criterion_main!(groups::benches);
