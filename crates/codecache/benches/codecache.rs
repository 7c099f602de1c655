//! Criterion benchmarks of the cache's fast paths on one thread: a lookup
//! in the lock-free table against `RwLock<HashMap>`, `Mutex<HashMap>` and
//! `dashmap`; a synchronization point against `crossbeam_epoch::pin`; and
//! publishing a new version of a function (generate, publish, retire).
//! The multi-threaded comparisons are in `fastpath bench codecache`.

use codecache::deletion::Reclaimer;
use codecache::table::Map;
use codecache::{CodeCache, Config};
use criterion::{Criterion, criterion_group, criterion_main};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::{Mutex, RwLock};

const KEYS: u64 = 2000;

fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x % KEYS
}

fn lookups(c: &mut Criterion) {
    let mut g = c.benchmark_group("lookup");
    let map = Map::new(std::sync::Arc::new(Reclaimer::new()));
    let rec = map.reclaimer().clone();
    for k in 0..KEYS {
        assert!(map.insert(k, Box::new(k as usize)).is_none());
    }
    let mut me = rec.register();
    g.bench_function("codecache table (scope per 64)", |b| {
        let mut seed = 1;
        b.iter(|| {
            let guard = rec.enter(&mut me);
            let mut acc = 0;
            for _ in 0..64 {
                acc += *map.get(next(&mut seed), &guard).unwrap();
            }
            black_box(acc)
        })
    });
    let rw: RwLock<HashMap<u64, usize>> = RwLock::new((0..KEYS).map(|k| (k, k as usize)).collect());
    g.bench_function("RwLock<HashMap> (64)", |b| {
        let mut seed = 1;
        b.iter(|| {
            let mut acc = 0;
            for _ in 0..64 {
                acc += *rw.read().unwrap().get(&next(&mut seed)).unwrap();
            }
            black_box(acc)
        })
    });
    let mx: Mutex<HashMap<u64, usize>> = Mutex::new((0..KEYS).map(|k| (k, k as usize)).collect());
    g.bench_function("Mutex<HashMap> (64)", |b| {
        let mut seed = 1;
        b.iter(|| {
            let mut acc = 0;
            for _ in 0..64 {
                acc += *mx.lock().unwrap().get(&next(&mut seed)).unwrap();
            }
            black_box(acc)
        })
    });
    let dm: dashmap::DashMap<u64, usize> = (0..KEYS).map(|k| (k, k as usize)).collect();
    g.bench_function("dashmap (64)", |b| {
        let mut seed = 1;
        b.iter(|| {
            let mut acc = 0;
            for _ in 0..64 {
                acc += *dm.get(&next(&mut seed)).unwrap();
            }
            black_box(acc)
        })
    });
    g.finish();
    rec.unregister(&me);
}

fn sync_points(c: &mut Criterion) {
    let mut g = c.benchmark_group("synchronization point");
    let cache = CodeCache::new(Config::default());
    let mut me = cache.register();
    g.bench_function("codecache enter + exit", |b| {
        b.iter(|| drop(black_box(me.enter())))
    });
    g.bench_function("crossbeam_epoch pin + unpin", |b| {
        b.iter(|| drop(black_box(crossbeam_epoch::pin())))
    });
    g.finish();
}

fn publish(c: &mut Criterion) {
    let cache = CodeCache::new(Config::default());
    let mut me = cache.register();
    let mut v = 0u64;
    c.bench_function(
        "publish a new version (generate, publish, retire, sync)",
        |b| {
            b.iter(|| {
                v += 1;
                cache
                    .publish(1, v, |e| {
                        let mut f = vcode::Func::new();
                        let p = f.lambda("%i", vcode::Leaf::Yes)?;
                        let x = p.get::<vcode::I>(0)?;
                        f.add(x, x, v as i32);
                        f.ret(x);
                        f.end_in(e.mem())
                    })
                    .unwrap();
                drop(me.enter());
            })
        },
    );
}

mod group {
    #![allow(missing_docs)] // the function criterion_group! generates
    use super::*;
    criterion_group!(benches, lookups, sync_points, publish);
}
criterion_main!(group::benches);
