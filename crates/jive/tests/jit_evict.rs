//! The JIT's code evicted from the shared code cache while applets run:
//! two threads invoke their applets' methods on the JIT without pause
//! (through `Applet::method` and `Applet::call`, a host's per-message path,
//! and through `invoke`), while the main thread evicts the cache's oldest
//! code again and again, as memory pressure would. Every invocation after
//! an eviction compiles the code again (again, if it is evicted before the
//! thread could look it up); every result and the applets' state stay
//! exactly what they would be without evictions, and the code the threads
//! stop using is freed.
//!
//! One test in this binary, so that nothing else touches the shared cache
//! while it counts.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::class_bytes;
use jive::{Applet, Engine, Limits, Natives};

/// `s = s * 31 + step(i)` for `i < n`, `step(x) = x * 3 + 1`: what `work(n)`
/// of `adversarial/ReplaceA` adds to its `total` (it returns `s ^ 1`).
fn work_sum(n: i32) -> i32 {
    (0..n).fold(0i32, |s, i| {
        s.wrapping_mul(31)
            .wrapping_add(i.wrapping_mul(3).wrapping_add(1))
    })
}

fn worker(bytes: &[u8], stop: &AtomicBool, runs: &AtomicU64) {
    let mut a = Applet::load_with_engine(bytes, &Natives::new(), Limits::default(), Engine::Jit)
        .unwrap_or_else(|e| panic!("Engine::Jit cannot load ReplaceA: {e}"));
    let work = a.method("work").expect("work(int)");
    let mut calls = 0i32;
    let mut total = 0i32;
    while !stop.load(Ordering::Relaxed) {
        let n = 1 + calls % 40;
        let out = if calls % 2 == 0 {
            a.call(&work, &[n], None)
        } else {
            a.invoke("work", &[n])
        }
        .unwrap_or_else(|e| panic!("work({n}) after {calls} calls: {e}"));
        assert_eq!(out.value, Some(work_sum(n) ^ 1), "work({n})");
        calls += 1;
        total = total.wrapping_add(work_sum(n));
        runs.fetch_add(1, Ordering::Relaxed);
    }
    // The applet's fields saw every invocation, evictions or not.
    assert_eq!(a.invoke("calls", &[]).unwrap().value, Some(calls));
    assert_eq!(a.invoke("total", &[]).unwrap().value, Some(total));
    assert_eq!(a.engine(), Engine::Jit);
}

#[test]
fn evicted_code_is_compiled_again_and_every_invocation_stays_exact() {
    // Every rebuild taken: this test is about code built again (the
    // budget that bounds rebuilds is `jit_rebuild_budget.rs`'s).
    jive::jit::set_rebuild_budget(std::time::Duration::MAX);
    let Some(bytes) = class_bytes("release8", "adversarial/ReplaceA") else {
        return;
    };
    let bytes = Arc::new(bytes);
    let stop = Arc::new(AtomicBool::new(false));
    let runs: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let (bytes, stop, runs) = (bytes.clone(), stop.clone(), runs.clone());
            std::thread::spawn(move || worker(&bytes, &stop, &runs[t]))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    // Both applets loaded (their code compiled and published) and running.
    while runs.iter().any(|r| r.load(Ordering::Relaxed) == 0) {
        assert!(Instant::now() < deadline, "a worker did not start");
        assert!(
            !workers.iter().any(|w| w.is_finished()),
            "a worker ended early"
        );
        std::thread::yield_now();
    }
    let before = jive::jit::cache_stats();
    let mut evicted = 0;
    let mut rounds_with_runs = 0;
    for _ in 0..200 {
        let seen: Vec<u64> = runs.iter().map(|r| r.load(Ordering::Relaxed)).collect();
        evicted += jive::jit::evict_oldest();
        // Each thread starts an invocation after the eviction (its second
        // from now: the first may have looked the code up before) and so
        // compiles the code again before the next one.
        while runs
            .iter()
            .zip(&seen)
            .any(|(r, &s)| r.load(Ordering::Relaxed) < s + 2)
        {
            assert!(
                Instant::now() < deadline,
                "a worker stopped making progress"
            );
            assert!(
                !workers.iter().any(|w| w.is_finished()),
                "a worker ended early"
            );
            std::thread::yield_now();
        }
        rounds_with_runs += 1;
    }
    // Then without pause, so that code is also evicted between the moment a
    // thread publishes it again and the moment it looks it up.
    let storm = Instant::now() + Duration::from_millis(500);
    while Instant::now() < storm {
        evicted += jive::jit::evict_oldest();
        assert!(
            !workers.iter().any(|w| w.is_finished()),
            "a worker ended early"
        );
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("a worker panicked");
    }
    let after = jive::jit::cache_stats();
    assert_eq!(rounds_with_runs, 200);
    // Every round found code to evict: the workers' invocations had
    // compiled it again since the last one.
    assert!(evicted >= 200, "{evicted} entries evicted in 200 rounds");
    assert!(
        after.evictions >= before.evictions + 200,
        "evictions {} -> {}",
        before.evictions,
        after.evictions
    );
    // The evicted copies are freed once the threads passed their
    // synchronization points (both have exited since).
    assert_eq!(after.pending_sets, 0, "evicted code still pending deletion");
}
