//! The stress test of the issue: 8 threads run generated functions from
//! the cache in a loop and check every result against the key and version
//! of the entry they ran; a publisher replaces and retires those functions
//! (and the helper they call through links) as fast as it can; a third
//! kind of thread sits flagged out in blocking sleeps. No wrong result is
//! allowed, and at quiescence the pending list is empty and every byte is
//! back on the free lists.
//!
//! `CODECACHE_STRESS_SECS` sets the duration (CI: 10 s; default 2 s).

#![cfg(not(loom))]

mod common;

use codecache::{CodeCache, Config};
use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const WORKERS: usize = 8;
const KEYS: u64 = 48;
const LINKED: u64 = 16; // keys 0..LINKED call the helper through a link
const HELPER: u64 = 1 << 40;

fn secs() -> f64 {
    std::env::var("CODECACHE_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0)
}

fn build(cache: &CodeCache, key: u64, version: u64) {
    let r = if key < LINKED {
        cache.publish(key, version, linked_fn(key, version, HELPER))
    } else {
        cache.publish(key, version, value_fn(key, version, (version % 8) as usize))
    };
    r.unwrap();
}

#[test]
fn eight_runners_one_publisher_one_blocked_thread() {
    let cache = Arc::new(CodeCache::new(Config::with_capacity(16 << 20)));
    cache.publish(HELPER, 0, helper_fn(0)).unwrap();
    for k in 0..KEYS {
        build(&cache, k, 0);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let wrong = Arc::new(AtomicU64::new(0));
    let runs = Arc::new(AtomicU64::new(0));
    let misses = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for w in 0..WORKERS {
        let (cache, stop, wrong, runs, misses) = (
            cache.clone(),
            stop.clone(),
            wrong.clone(),
            runs.clone(),
            misses.clone(),
        );
        handles.push(std::thread::spawn(move || {
            let mut me = cache.register();
            let mut key = w as u64;
            let (mut n, mut bad, mut miss) = (0u64, 0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let scope = me.enter();
                for _ in 0..16 {
                    key = (key * 7 + 3) % KEYS;
                    let x = (n % 1000) as i64;
                    match scope.lookup(key) {
                        Some(e) => {
                            // SAFETY: the functions compute on their argument
                            // (and call the helper through a link); used only
                            // inside this scope.
                            let f =
                                unsafe { e.code().as_fn::<extern "C" fn(i64) -> i64>() }.unwrap();
                            let want = if key < LINKED { 3 * x } else { x } + tag(key, e.version());
                            let got = f(x);
                            if got != want || e.key() != key {
                                bad += 1;
                                eprintln!("key {key} v{}: {got} != {want}", e.version());
                            }
                            n += 1;
                        }
                        None => miss += 1,
                    }
                }
                drop(scope);
                if n % 4096 < 16 {
                    // Now and then a short blocking call, flagged out.
                    me.blocking(std::thread::yield_now);
                }
            }
            wrong.fetch_add(bad, Ordering::Relaxed);
            runs.fetch_add(n, Ordering::Relaxed);
            misses.fetch_add(miss, Ordering::Relaxed);
            // `me` drops here: thread exit is a synchronization point.
        }));
    }
    // The blocked thread: registered, almost always in a blocking sleep.
    {
        let (cache, stop) = (cache.clone(), stop.clone());
        handles.push(std::thread::spawn(move || {
            let mut me = cache.register();
            while !stop.load(Ordering::Relaxed) {
                me.blocking(|| std::thread::sleep(Duration::from_millis(50)));
                drop(me.enter());
            }
        }));
    }
    // The publisher, on this thread: replace, retire and republish.
    let deadline = Instant::now() + Duration::from_secs_f64(secs());
    let mut version = 1u64;
    let mut replaced = 0u64;
    while Instant::now() < deadline {
        for k in 0..KEYS {
            build(&cache, k, version);
            replaced += 1;
        }
        cache.publish(HELPER, version, helper_fn(version)).unwrap();
        // Retire a set of keys (one pending entry), then bring them back.
        let set: Vec<u64> = (0..KEYS)
            .filter(|k| (k + version).is_multiple_of(5))
            .collect();
        cache.retire_set(&set);
        if version.is_multiple_of(3) {
            cache.retire(HELPER); // calls go to the fallback meanwhile
            cache.publish(HELPER, version, helper_fn(version)).unwrap();
        }
        for &k in &set {
            build(&cache, k, version);
        }
        version += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().expect("no thread crashed");
    }
    let s = cache.stats();
    eprintln!(
        "runs {} misses {} replaced {replaced} versions {version} resolves {} patches {} freed sets {} slow syncs {} contention {:?}",
        runs.load(Ordering::Relaxed),
        misses.load(Ordering::Relaxed),
        s.resolves,
        s.patches,
        s.freed_sets,
        s.slow_syncs,
        s.contention
    );
    for (limit, name) in [(1, "1 ms"), (10, "10 ms"), (100, "100 ms"), (1000, "1 s")] {
        eprintln!(
            "freed within {name}: {:.4}",
            s.deletion_delay
                .fraction_within(Duration::from_millis(limit))
        );
    }
    assert_eq!(wrong.load(Ordering::Relaxed), 0);
    assert!(runs.load(Ordering::Relaxed) > 1000);
    assert!(s.resolves > 0 && s.patches > 0, "links were exercised");
    // Quiescence: every thread is gone, so nothing can be pending.
    assert_eq!(s.threads, 0);
    assert_eq!((s.pending_sets, s.bytes_pending), (0, 0), "{s:?}");
    assert_eq!(s.retired_sets, s.freed_sets);
    // Retire everything: every byte is back on the free lists.
    let mut all: Vec<u64> = (0..KEYS).collect();
    all.push(HELPER);
    cache.retire_set(&all);
    let s = cache.stats();
    assert_eq!((s.entries, s.bytes_live, s.arena.live), (0, 0, 0), "{s:?}");
    assert_eq!(s.bytes_free, s.bytes_mapped);
}
