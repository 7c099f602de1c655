//! The paper's Table 4 as a criterion benchmark: each workload (copy +
//! checksum, copy + checksum + byte swap, copy + CRC-32) done by separate
//! passes, by a hand-fused Rust loop and by the ilp-generated loop, on a
//! message in cache (4 KiB, 64 KiB) and on 64 KiB messages cycled through a
//! working set four times the last-level cache. `fastpath bench ilp` runs
//! the same experiment in one process with ratios side by side.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ilp::table4::{Method, Runner, Workload, llc_bytes, random_bytes};
use std::hint::black_box;

fn table4(c: &mut Criterion) {
    let runners: Vec<Runner> = Workload::ALL.iter().map(|&w| Runner::new(w)).collect();
    for size in [4 << 10, 64 << 10] {
        let src = random_bytes(size, 0x9e37_79b9_7f4a_7c15);
        let mut dst = vec![0u8; size];
        for r in &runners {
            let mut g = c.benchmark_group(format!("{}/in-cache", r.pipeline_name()));
            g.throughput(Throughput::Bytes(size as u64));
            for m in Method::ALL {
                g.bench_with_input(BenchmarkId::new(format!("{m:?}"), size), &size, |b, _| {
                    b.iter(|| black_box(r.once(m, black_box(&src), &mut dst)))
                });
            }
            g.finish();
        }
    }
    // Out of cache: 64 KiB messages over 4x the last-level cache.
    let message = 64 << 10;
    let total = (4 * llc_bytes().unwrap_or(64 << 20)) / message * message;
    let src = random_bytes(total, 0x9e37_79b9_7f4a_7c15);
    let mut dst = vec![0u8; total];
    let count = total / message;
    for r in &runners {
        let mut g = c.benchmark_group(format!("{}/out-of-cache", r.pipeline_name()));
        g.throughput(Throughput::Bytes(message as u64));
        for m in Method::ALL {
            let mut i = 0;
            g.bench_function(BenchmarkId::new(format!("{m:?}"), message), |b| {
                b.iter(|| {
                    let at = i * message;
                    i = (i + 1) % count;
                    black_box(r.once(m, &src[at..at + message], &mut dst[at..at + message]))
                })
            });
        }
        g.finish();
    }
}

mod group {
    #![allow(missing_docs)] // the function criterion_group! generates
    use super::*;
    criterion_group!(benches, table4);
}
criterion_main!(group::benches);
