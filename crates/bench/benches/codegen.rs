//! Criterion benchmarks of vcode: generation speed of vcode and its peers
//! (dynasm-rs, iced-x86, cranelift-jit) on the same function, generation
//! of the ~100-instruction workload, and the kernels against rustc.
//!
//! `cargo bench -p fastpath-bench --bench codegen`. The side-by-side
//! report with ratios is `fastpath bench codegen`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fastpath_bench::{kernels, peers, workload};
use vcode::Func;

fn generation(c: &mut Criterion) {
    peers::verify_all().expect("every peer generates a working mix");
    let insns = peers::mix_instruction_count().expect("mix") as u64;
    let mut g = c.benchmark_group("generate_mix");
    g.throughput(Throughput::Elements(insns));
    let mut f = Func::new();
    g.bench_function("vcode_getreg", |b| {
        b.iter_with_large_drop(|| peers::mix_vcode_virtual(&mut f).unwrap())
    });
    g.bench_function("vcode_fixed", |b| {
        b.iter_with_large_drop(|| peers::mix_vcode_fixed(&mut f).unwrap())
    });
    g.bench_function("dynasm", |b| {
        b.iter_with_large_drop(|| peers::mix_dynasm().unwrap())
    });
    g.bench_function("dynasm_vec_bytes_only", |b| {
        b.iter_with_large_drop(|| peers::mix_dynasm_vec().unwrap())
    });
    g.bench_function("iced_code_assembler", |b| {
        b.iter_with_large_drop(|| peers::mix_iced().unwrap())
    });
    for opt in ["none", "speed"] {
        let mut cl = peers::Cranelift::new(opt).expect("cranelift");
        g.bench_function(BenchmarkId::new("cranelift_jit", opt), |b| {
            b.iter(|| cl.mix().unwrap())
        });
    }
    g.finish();

    let (n, _, _) = workload::instruction_counts().expect("workload");
    let mut g = c.benchmark_group("generate_workload");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("vcode_getreg", |b| {
        b.iter_with_large_drop(|| workload::mixed_virtual(&mut f).unwrap())
    });
    g.bench_function("vcode_fixed", |b| {
        b.iter_with_large_drop(|| workload::mixed_fixed(&mut f).unwrap())
    });
    g.finish();
}

fn kernel_quality(c: &mut Criterion) {
    let mut f = Func::new();
    let mut g = c.benchmark_group("kernels");
    g.sample_size(20);
    let s = kernels::Sizes::REPORT;

    let code = kernels::sieve_vcode(&mut f).unwrap();
    // SAFETY: reads and writes flags[0..n] only.
    let k = unsafe { code.as_fn::<extern "C" fn(*mut u8, i64) -> i32>() }.unwrap();
    let mut flags = vec![1u8; s.sieve];
    g.bench_function("sieve/vcode", |b| {
        b.iter(|| {
            flags.fill(1);
            k(flags.as_mut_ptr(), flags.len() as i64)
        })
    });
    g.bench_function("sieve/rustc", |b| {
        b.iter(|| {
            flags.fill(1);
            kernels::sieve_rust(black_box(&mut flags))
        })
    });

    let code = kernels::bsearch_vcode(&mut f).unwrap();
    // SAFETY: reads a[0..n] and keys[0..m] only.
    let k =
        unsafe { code.as_fn::<extern "C" fn(*const i32, i64, *const i32, i64) -> i32>() }.unwrap();
    let a: Vec<i32> = (0..s.bsearch_n as i32).map(|i| 2 * i).collect();
    let mut rng = kernels::Rng::new(7);
    let keys: Vec<i32> = (0..s.bsearch_keys)
        .map(|_| (rng.next_u64() % (2 * s.bsearch_n as u64)) as i32)
        .collect();
    g.bench_function("bsearch/vcode", |b| {
        b.iter(|| k(a.as_ptr(), a.len() as i64, keys.as_ptr(), keys.len() as i64))
    });
    g.bench_function("bsearch/rustc", |b| {
        b.iter(|| kernels::bsearch_rust(black_box(&a), black_box(&keys)))
    });

    let code = kernels::cksum_vcode(&mut f).unwrap();
    // SAFETY: reads p[0..n] only.
    let k = unsafe { code.as_fn::<extern "C" fn(*const u8, i64) -> u32>() }.unwrap();
    let data: Vec<u8> = (0..s.cksum).map(|_| rng.next_u64() as u8).collect();
    g.bench_function("cksum/vcode", |b| {
        b.iter(|| k(data.as_ptr(), data.len() as i64))
    });
    g.bench_function("cksum/rustc", |b| {
        b.iter(|| kernels::cksum_rust(black_box(&data)))
    });

    let code = kernels::collatz_vcode(&mut f).unwrap();
    // SAFETY: pure computation.
    let k = unsafe { code.as_fn::<extern "C" fn(u64) -> u64>() }.unwrap();
    g.bench_function("collatz/vcode", |b| b.iter(|| k(black_box(s.collatz))));
    g.bench_function("collatz/rustc", |b| {
        b.iter(|| kernels::collatz_rust(black_box(s.collatz)))
    });

    let code = kernels::sum_vcode(&mut f).unwrap();
    // SAFETY: reads a[0..n] only.
    let k = unsafe { code.as_fn::<extern "C" fn(*const i32, i64) -> i32>() }.unwrap();
    let v: Vec<i32> = (0..s.sum).map(|_| rng.next_u64() as i32).collect();
    g.bench_function("sum_vectorized_by_rustc/vcode", |b| {
        b.iter(|| k(v.as_ptr(), v.len() as i64))
    });
    g.bench_function("sum_vectorized_by_rustc/rustc", |b| {
        b.iter(|| kernels::sum_rust(black_box(&v)))
    });
    g.finish();
}

mod group {
    #![allow(missing_docs)] // the function criterion_group! generates
    use super::*;
    criterion_group!(benches, generation, kernel_quality);
}
criterion_main!(group::benches);
