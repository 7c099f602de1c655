//! Criterion benchmarks of jive: the U-Net/SLE paper's suite (§4) in the
//! interpreter with fuel metering off and on, and load+verify of the paper's
//! Figure 2 applet and of the benchmark class. The side-by-side comparison
//! with HotSpot is `fastpath bench jive`.

use criterion::{BenchmarkId, Criterion, criterion_main};
use jive::{Applet, Limits, Natives};

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

fn suite(c: &mut Criterion) {
    let Some(dir) = classes() else { return };
    let bytes = std::fs::read(dir.join("Bench.class")).unwrap();
    let heap = Limits {
        heap_bytes: 16 << 20,
        ..Limits::unmetered()
    };
    let mut off = Applet::load(&bytes, &Natives::new(), heap).unwrap();
    let mut on = Applet::load(
        &bytes,
        &Natives::new(),
        Limits {
            fuel: Some(u64::MAX / 2),
            ..heap
        },
    )
    .unwrap();
    let mut g = c.benchmark_group("jive-interpreter");
    let cases: &[(&str, i32)] = &[
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
    for &(m, n) in cases {
        g.bench_with_input(BenchmarkId::new("fuel-off", m), &n, |b, &n| {
            b.iter(|| off.invoke(m, &[n]).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("fuel-on", m), &n, |b, &n| {
            b.iter(|| on.invoke(m, &[n]).unwrap())
        });
    }
    g.finish();
}

fn load_verify(c: &mut Criterion) {
    let Some(dir) = classes() else { return };
    let rawunet = std::fs::read(dir.join("RawUnet.class")).unwrap();
    let bench = std::fs::read(dir.join("Bench.class")).unwrap();
    let natives = Natives::figure2_stubs();
    let mut g = c.benchmark_group("jive-load");
    g.bench_function("check RawUnet (Figure 2)", |b| {
        b.iter(|| jive::check(&rawunet, &Limits::default()).unwrap())
    });
    g.bench_function("load RawUnet (Figure 2)", |b| {
        b.iter(|| Applet::load(&rawunet, &natives, Limits::default()).unwrap())
    });
    g.bench_function("check Bench", |b| {
        b.iter(|| jive::check(&bench, &Limits::default()).unwrap())
    });
    g.finish();
}

/// The criterion entry points (generated, hence undocumented).
mod groups {
    #![allow(missing_docs)]
    use super::{load_verify, suite};
    criterion::criterion_group!(benches, suite, load_verify);
}
criterion_main!(groups::benches);
