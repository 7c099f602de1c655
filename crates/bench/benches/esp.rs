//! Criterion benchmarks of Table 1 (Xu, Kumar and Li, PACT 2004, §6.1): one
//! 10,000-byte stream through each filter program as process-based native
//! code, with the automatic fast paths, as automata, as the hand-fused Rust
//! loop, and as OS threads over crossbeam rendezvous channels. Outputs are
//! checked against the reference before timing.
//!
//! `cargo bench -p fastpath-bench --bench esp`. The side-by-side table with
//! ratios, code sizes and the Go peer is `fastpath bench esp`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use esp::filters::{self, PROGRAMS};
use fastpath_bench::esp::{STREAM_BYTES, Variant, fused, machine, stream, threads};

fn table1(c: &mut Criterion) {
    for (i, p) in PROGRAMS.iter().enumerate() {
        let input = stream(STREAM_BYTES, 0x5EED_0000 + i as u64);
        let expected = filters::reference(i, &input);
        let mut g = c.benchmark_group(p.name);
        g.throughput(Throughput::Bytes(input.len() as u64));
        for v in [Variant::Native, Variant::FastPath, Variant::Automata] {
            let mut m = match machine(i, v) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("{}: {v} skipped: {e}", p.name);
                    continue;
                }
            };
            assert_eq!(
                filters::run(&mut m, &input).expect("runs"),
                expected,
                "{} {v}",
                p.name
            );
            let id = match v {
                Variant::Native => "esp_native",
                Variant::FastPath => "esp_fastpath",
                _ => "esp_automata",
            };
            g.bench_function(BenchmarkId::new(id, STREAM_BYTES), |b| {
                b.iter(|| black_box(filters::run(&mut m, black_box(&input)).expect("runs")))
            });
        }
        let f = fused::program(i).expect("four programs");
        let mut out = Vec::new();
        f(&input, &mut out);
        assert_eq!(out, expected, "{} fused", p.name);
        g.bench_function(BenchmarkId::new("rust_fused", STREAM_BYTES), |b| {
            b.iter(|| {
                f(black_box(&input), &mut out);
                black_box(out.len())
            })
        });
        let pipe = threads::Pipeline::new(p.chain).expect("a filter chain");
        assert_eq!(
            pipe.run(&input).as_deref(),
            Some(&expected[..]),
            "{} threads",
            p.name
        );
        g.sample_size(10);
        g.bench_function(BenchmarkId::new("crossbeam_threads", STREAM_BYTES), |b| {
            b.iter(|| black_box(pipe.run(black_box(&input))))
        });
        g.finish();
    }
}

mod group {
    #![allow(missing_docs)] // the function criterion_group! generates
    use super::*;
    criterion_group!(benches, table1);
}
criterion_main!(group::benches);
