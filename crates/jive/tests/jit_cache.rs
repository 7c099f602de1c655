//! The JIT's code in the shared code cache while an applet is replaced:
//! four threads run an applet while the main thread replaces it,
//! again and again; nothing crashes, every result is the one of the version
//! the thread runs, and the old code is freed.
//!
//! The applet comes in three versions, `adversarial/ReplaceA`, `ReplaceB` and
//! `ReplaceC` (`applets/src/adversarial/`): the same methods with other
//! constants. Each thread loads its own [`Applet`] with [`Engine::Jit`] from
//! the class bytes of the current version, so the four share one copy of the
//! compiled code in the cache. The main thread moves a round counter; each
//! thread notices between two invocations, drops its applet and loads the
//! next version (half of them load first and drop after, half the other way
//! round), and acknowledges. Once all four run the new version and none
//! holds the old one, the old code is unlinked; the cache frees it when
//! every thread has passed a synchronization point, while the threads keep
//! running the new code. The test then checks `jive::jit::cache_stats()`:
//! nothing pending, and the live code exactly one version's worth, the same
//! each time that version comes back. At the end, with every applet dropped
//! and every thread gone, the live code is back where it started and the
//! mapped memory stopped growing.
//!
//! One test in this binary, so that nothing else touches the shared cache
//! while it counts.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::class_bytes;
use jive::{Applet, Engine, Limits, Natives};

/// (class, `version()`, the multiplier of `step`): `step(x) = x * mul + version`.
const VERSIONS: [(&str, i32, i32); 3] = [
    ("adversarial/ReplaceA", 1, 3),
    ("adversarial/ReplaceB", 2, 5),
    ("adversarial/ReplaceC", 3, 7),
];
const THREADS: usize = 4;
const ROUNDS: usize = 60;
/// Invocations each thread makes of a version before the next replacement.
const RUNS_PER_ROUND: u64 = 50;
/// How long a wait may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

/// `s = s * 31 + step(i)` for `i < n`: the `s` that `work(n)` adds to `total`.
fn work_sum(version: i32, mul: i32, n: i32) -> i32 {
    (0..n).fold(0i32, |s, i| {
        s.wrapping_mul(31)
            .wrapping_add(i.wrapping_mul(mul).wrapping_add(version))
    })
}

fn load(bytes: &[u8], class: &str) -> Applet {
    match Applet::load_with_engine(bytes, &Natives::new(), Limits::default(), Engine::Jit) {
        Ok(a) => {
            assert_eq!(a.engine(), Engine::Jit);
            a
        }
        Err(e) => panic!(
            "{class}: Engine::Jit cannot load the applet: {e}\n\
             This test runs JIT code from the shared code cache; it fails if the JIT \
             cannot compile the applet."
        ),
    }
}

/// What the threads and the main thread share.
struct Shared {
    /// The round: threads run `VERSIONS[round % 3]`.
    round: AtomicUsize,
    stop: AtomicBool,
    /// The round each thread has switched to.
    acked: [AtomicUsize; THREADS],
    /// Invocations each thread has made.
    runs: [AtomicU64; THREADS],
}

/// One worker: runs `work` on its own applet of the current version, and
/// switches versions between invocations when the round changes.
fn worker(t: usize, shared: &Shared, bytes: &[Vec<u8>; 3]) {
    let mut round = usize::MAX;
    let mut applet: Option<Applet> = None;
    let (mut calls, mut total) = (0i32, 0i32);
    let mut rng = 0x9e37_79b9u32.wrapping_mul(t as u32 + 1);
    while !shared.stop.load(Ordering::Acquire) {
        let r = shared.round.load(Ordering::Acquire);
        if r != round {
            let (class, _, _) = VERSIONS[r % 3];
            if t.is_multiple_of(2) {
                let new = load(&bytes[r % 3], class);
                drop(applet.replace(new));
            } else {
                drop(applet.take());
                applet = Some(load(&bytes[r % 3], class));
            }
            round = r;
            (calls, total) = (0, 0);
            shared.acked[t].store(r, Ordering::Release);
        }
        let Some(a) = applet.as_mut() else {
            unreachable!("loaded above")
        };
        let (class, version, mul) = VERSIONS[round % 3];
        rng ^= rng << 13;
        rng ^= rng >> 17;
        rng ^= rng << 5;
        let n = (rng % 64) as i32;
        let out = a
            .invoke("work", &[n])
            .unwrap_or_else(|e| panic!("thread {t}, round {round}, {class}: work({n}): {e}"));
        let s = work_sum(version, mul, n);
        assert_eq!(
            out.value,
            Some(s ^ version),
            "thread {t}, round {round}: work({n}) of {class}"
        );
        // n calls of step, each calling version(), and version() once
        // more; the loop's back edge is exempt (a call on every path).
        assert_eq!(out.fuel_used, 2 * n as u64 + 1, "fuel of work({n})");
        calls += 1;
        total = total.wrapping_add(s);
        if calls % 16 == 0 {
            // The statics and fields are this applet's, not shared with the
            // other threads' applets of the same version.
            let c = a.invoke("calls", &[]).expect("calls()").value;
            assert_eq!(
                c,
                Some(calls),
                "thread {t}, round {round}: calls() of {class}"
            );
            let tot = a.invoke("total", &[]).expect("total()").value;
            assert_eq!(
                tot,
                Some(total),
                "thread {t}, round {round}: total() of {class}"
            );
        }
        shared.runs[t].fetch_add(1, Ordering::Release);
    }
}

/// Waits until `done` holds, failing the test after [`PATIENCE`] or when a
/// worker has ended (its panic is then reported by joining it).
fn wait(workers: &mut Vec<JoinHandle<()>>, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if workers.iter().any(|w| w.is_finished()) {
            for w in workers.drain(..) {
                if let Err(p) = w.join() {
                    std::panic::resume_unwind(p);
                }
            }
            panic!("a worker ended early while waiting for {what}");
        }
        assert!(
            start.elapsed() < PATIENCE,
            "timed out waiting for {what}: {:?}",
            jive::jit::cache_stats()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Runs `f` on a thread of its own, so that the main thread never runs JIT
/// code (and never counts as a thread the cache's deletion waits for).
fn on_a_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match std::thread::spawn(f).join() {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    }
}

#[test]
fn replacing_an_applet_while_four_threads_run_it_frees_the_old_code() {
    if !jive::jit::available() {
        eprintln!("skipped: vcode has no native backend for this CPU, so there is no JIT");
        return;
    }
    let mut loaded = Vec::new();
    for (class, _, _) in VERSIONS {
        let Some(b) = class_bytes("release8", class) else {
            return;
        };
        loaded.push(b);
    }
    let bytes: Arc<[Vec<u8>; 3]> = Arc::new(loaded.try_into().expect("three versions"));

    // Each version once, alone, on a thread that exits: the first time may
    // leave code the JIT keeps for good (shared stubs), so the baseline is
    // taken after it. The second time measures one version's code.
    for pass in 0..2 {
        for v in 0..3 {
            let b = Arc::clone(&bytes);
            let before = jive::jit::cache_stats().bytes_live;
            let alone = on_a_thread(move || {
                let mut a = load(&b[v], VERSIONS[v].0);
                let out = a.invoke("work", &[10]).expect("work(10)");
                let (_, version, mul) = VERSIONS[v];
                assert_eq!(out.value, Some(work_sum(version, mul, 10) ^ version));
                jive::jit::cache_stats().bytes_live
            });
            let after = jive::jit::cache_stats();
            assert!(
                alone > before,
                "pass {pass}: loading {} added no code to the cache",
                VERSIONS[v].0
            );
            if pass == 1 {
                assert_eq!(
                    after.bytes_live, before,
                    "{}: dropped, its code is no longer live",
                    VERSIONS[v].0
                );
            }
        }
    }
    let base = jive::jit::cache_stats();
    assert_eq!(
        base.bytes_pending, 0,
        "with no thread left, retired code is freed at once: {base:?}"
    );
    // One version's code, measured alone: four applets of it share it.
    let mut one = [0usize; 3];
    for (v, size) in one.iter_mut().enumerate() {
        let b = Arc::clone(&bytes);
        *size = on_a_thread(move || {
            let _a = load(&b[v], VERSIONS[v].0);
            jive::jit::cache_stats().bytes_live
        }) - base.bytes_live;
    }
    assert_eq!(jive::jit::cache_stats().bytes_live, base.bytes_live);

    let shared = Arc::new(Shared {
        round: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        acked: std::array::from_fn(|_| AtomicUsize::new(usize::MAX)),
        runs: std::array::from_fn(|_| AtomicU64::new(0)),
    });
    let mut workers: Vec<JoinHandle<()>> = (0..THREADS)
        .map(|t| {
            let (shared, bytes) = (Arc::clone(&shared), Arc::clone(&bytes));
            std::thread::spawn(move || worker(t, &shared, &bytes))
        })
        .collect();

    let mut mapped_mid = 0;
    for round in 0..ROUNDS {
        shared.round.store(round, Ordering::Release);
        wait(
            &mut workers,
            &format!("all threads to switch to round {round}"),
            || {
                shared
                    .acked
                    .iter()
                    .all(|a| a.load(Ordering::Acquire) == round)
            },
        );
        let start: Vec<u64> = shared
            .runs
            .iter()
            .map(|r| r.load(Ordering::Acquire))
            .collect();
        wait(
            &mut workers,
            &format!("all threads to run round {round}"),
            || {
                shared
                    .runs
                    .iter()
                    .zip(&start)
                    .all(|(r, &s)| r.load(Ordering::Acquire) >= s + RUNS_PER_ROUND)
            },
        );
        // Every thread runs this round's version and holds no applet of the
        // last one: its code is unlinked, and freed once every thread has
        // passed a synchronization point, which they do while they run on.
        wait(
            &mut workers,
            &format!("the code replaced in round {round} to be freed"),
            || jive::jit::cache_stats().bytes_pending == 0,
        );
        let s = jive::jit::cache_stats();
        let v = round % 3;
        assert_eq!(
            s.bytes_live.checked_sub(base.bytes_live),
            Some(one[v]),
            "round {round}: the live code is one copy of {} (four applets share it), the old \
             version's is gone: {s:?}",
            VERSIONS[v].0
        );
        if round == ROUNDS / 2 {
            mapped_mid = s.bytes_mapped;
        }
    }

    shared.stop.store(true, Ordering::Release);
    for w in workers {
        if let Err(p) = w.join() {
            std::panic::resume_unwind(p);
        }
    }
    let total_runs: u64 = shared.runs.iter().map(|r| r.load(Ordering::Relaxed)).sum();
    assert!(total_runs >= THREADS as u64 * ROUNDS as u64 * RUNS_PER_ROUND);

    // Every applet dropped and every thread gone: all the code is freed.
    let end = jive::jit::cache_stats();
    eprintln!("one version's code: {one:?} bytes; at the start: {base:?}; at the end: {end:?}");
    assert_eq!(end.bytes_pending, 0, "{end:?}");
    assert_eq!(end.pending_sets, 0, "{end:?}");
    assert_eq!(
        end.bytes_live, base.bytes_live,
        "the last version's code is freed too: {end:?}"
    );
    assert_eq!(end.entries, base.entries, "{end:?}");
    assert_eq!(end.freed_sets, end.retired_sets, "{end:?}");
    assert!(
        end.freed_sets >= base.freed_sets + ROUNDS as u64,
        "each of the {ROUNDS} versions run was retired and freed: {end:?}"
    );
    // Freed code is reused: the second half of the rounds mapped no more
    // memory than the first.
    assert!(
        end.bytes_mapped <= mapped_mid,
        "mapped code memory grew from {mapped_mid} (round {}) to {}: freed blocks are not reused",
        ROUNDS / 2,
        end.bytes_mapped
    );
}
