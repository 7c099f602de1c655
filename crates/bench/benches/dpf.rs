//! Criterion benchmarks of dpf (the VCODE paper's §4.2): classifying a
//! frame destined for one of N filters of `fastpath_bench::dpf`'s mix with dpf's merged native
//! classifier, with libpcap's BPF interpreter running the filters in turn,
//! and with rbpf's JIT running them in turn; and installing one filter
//! into a table of 1,000.
//!
//! `cargo bench -p fastpath-bench --bench dpf`. The side-by-side report
//! with ratios is `fastpath bench dpf`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fastpath_bench::dpf::{filter, filters, mbuff, packets, run_jit, table, to_ebpf};

fn classify(c: &mut Criterion) {
    let pcap = dpf::pcap::Libpcap::load().ok();
    let mut g = c.benchmark_group("classify");
    for n in [10usize, 100, 1000, 10_000] {
        let filters = filters(n);
        let pkts = packets(n, 256);
        let table = table(n);
        let mut reader = table.reader();
        let mut i = 0;
        g.bench_with_input(BenchmarkId::new("dpf", n), &n, |b, _| {
            reader.batch(|cl| {
                b.iter(|| {
                    i = (i + 1) & 255;
                    black_box(cl.classify(black_box(&pkts[i])))
                })
            })
        });
        g.bench_with_input(BenchmarkId::new("dpf_scope_per_packet", n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) & 255;
                black_box(reader.classify(black_box(&pkts[i])))
            })
        });
        if n > 1000 {
            continue;
        }
        if let Some(lib) = &pcap {
            let progs: Vec<_> = filters.iter().map(|f| lib.compile(f).unwrap()).collect();
            g.bench_with_input(BenchmarkId::new("libpcap_in_turn", n), &n, |b, _| {
                b.iter(|| {
                    i = (i + 1) & 255;
                    let p = &pkts[i];
                    black_box(progs.iter().position(|b| b.run(p, p.len() as u32) != 0))
                })
            });
        }
        let code: Vec<Vec<u8>> = filters
            .iter()
            .map(|f| to_ebpf(&dpf::compile(f).unwrap()))
            .collect();
        let vms: Vec<_> = code
            .iter()
            .map(|c| {
                let mut vm = rbpf::EbpfVmMbuff::new(Some(c)).unwrap();
                vm.jit_compile().unwrap();
                vm
            })
            .collect();
        let mut pkts = pkts.clone();
        g.bench_with_input(BenchmarkId::new("rbpf_jit_in_turn", n), &n, |b, _| {
            b.iter(|| {
                i = (i + 1) & 255;
                let p = &mut pkts[i];
                let mut m = mbuff(p);
                black_box(vms.iter().position(|vm| run_jit(vm, p, &mut m) != 0))
            })
        });
    }
    g.finish();
}

fn install(c: &mut Criterion) {
    let mut table = table(1000);
    let extra = filter(5000);
    c.bench_function("install_and_remove_one_in_1000", |b| {
        b.iter(|| {
            let id = table.install(&extra, 9999, 0).unwrap();
            table.remove(id).unwrap();
        })
    });
}

mod group {
    #![allow(missing_docs)] // the function criterion_group! generates
    use super::*;
    criterion_group! {
        name = benches;
        config = Criterion::default().sample_size(20);
        targets = classify, install
    }
}
criterion_main!(group::benches);
