//! A registration in the code cache held by the host (`jive::jit::Runner`)
//! and passed to every invocation (`Applet::run_prepared_on`): it runs the
//! same code with the same results as the thread's own, on any thread it
//! is moved to; code retired while the runner is registered waits for its
//! next invocation, or for `Runner::park`, and not longer; and a native
//! that invokes another applet during an invocation on the runner takes
//! the thread's registration. (Its own binary: the cache is shared by the
//! whole process, and the test counts what is pending in it.)

mod common;

use std::sync::{Arc, Mutex};

use jive::jit::Runner;
use jive::{Applet, Engine, Limits, Natives, Prepared};

fn load(bytes: &[u8], natives: &Natives) -> Applet {
    let a = Applet::load_with_engine(bytes, natives, Limits::default(), Engine::Jit)
        .unwrap_or_else(|e| panic!("the JIT cannot load the applet: {e}"));
    assert_eq!(a.engine(), Engine::Jit);
    a
}

/// What `work(n)` of `adversarial/ReplaceA` returns.
fn work_result(n: i32) -> i32 {
    (0..n).fold(0i32, |s, i| {
        s.wrapping_mul(31)
            .wrapping_add(i.wrapping_mul(3).wrapping_add(1))
    }) ^ 1
}

fn work_on(runner: &mut Runner, a: &mut Applet, p: &mut Prepared<1>, n: i32) {
    let c = a.run_prepared_on(runner, p, [n], None);
    assert_eq!(c.value(), Some(work_result(n)), "work({n})");
}

/// The three parts in turn, on one thread: the cache's counts are the
/// whole process's, so no other test may run meanwhile.
#[test]
fn a_held_registration() {
    a_runner_runs_on_the_thread_it_is_moved_to();
    retired_code_waits_for_the_runner_and_no_longer();
    a_native_that_invokes_another_applet_runs_beside_the_runner();
    a_nested_invocation_leaves_the_threads_registration_free();
}

/// One runner carried from thread to thread, and two runners on two
/// threads at once, each running its applet with exact results.
fn a_runner_runs_on_the_thread_it_is_moved_to() {
    let Some(bytes) = common::class_bytes("default", "adversarial/ReplaceA") else {
        return;
    };
    let mut a = load(&bytes, &Natives::new());
    let mut p = a.prepare::<1>("work").unwrap();
    let mut runner = Runner::new();
    for n in 0..5 {
        work_on(&mut runner, &mut a, &mut p, n);
    }
    for round in 0..4 {
        let (r, a2, p2) = std::thread::spawn(move || {
            for n in 0..5 {
                work_on(&mut runner, &mut a, &mut p, n + round);
            }
            (runner, a, p)
        })
        .join()
        .unwrap();
        (runner, a, p) = (r, a2, p2);
        work_on(&mut runner, &mut a, &mut p, 7);
    }
    let two: Vec<_> = (0..2)
        .map(|t| {
            let bytes = bytes.clone();
            std::thread::spawn(move || {
                let mut a = load(&bytes, &Natives::new());
                let mut p = a.prepare::<1>("work").unwrap();
                let mut runner = Runner::new();
                for n in 0..200 {
                    work_on(&mut runner, &mut a, &mut p, (n + t) % 13);
                }
            })
        })
        .collect();
    for t in two {
        t.join().unwrap();
    }
}

/// Code retired while the runner is registered is pending until the
/// runner's next invocation frees it, or until the runner parks; the
/// runner's own code, evicted, is compiled again at its next invocation.
/// This thread's own registration (made by the loads' constructors) is
/// parked each time, so that only the runner can hold the code.
fn retired_code_waits_for_the_runner_and_no_longer() {
    // Every rebuild taken: this test is about code built again (the
    // budget that bounds rebuilds is `jit_rebuild_budget.rs`'s).
    jive::jit::set_rebuild_budget(std::time::Duration::MAX);
    let (Some(a), Some(b)) = (
        common::class_bytes("default", "adversarial/ReplaceA"),
        common::class_bytes("default", "adversarial/ReplaceB"),
    ) else {
        return;
    };
    let mut runner = Runner::new();
    let mut app = load(&a, &Natives::new());
    let mut p = app.prepare::<1>("work").unwrap();
    work_on(&mut runner, &mut app, &mut p, 3);
    work_on(&mut runner, &mut app, &mut p, 4);
    jive::jit::park();
    let base = jive::jit::cache_stats();
    assert_eq!(base.pending_sets, 0, "{base:?}");
    for round in 0..12 {
        let mut other = load(&b, &Natives::new());
        other.invoke("work", &[round]).unwrap();
        drop(other);
        jive::jit::park();
        // Retired: the runner is registered and flagged in.
        let s = jive::jit::cache_stats();
        assert_eq!(s.pending_sets, 1, "round {round}: {s:?}");
        if round % 2 == 0 {
            // Its next invocation synchronizes and frees the code.
            work_on(&mut runner, &mut app, &mut p, 5 + round % 7);
        } else {
            // Parked, it holds nothing up; it flags in again at its next
            // invocation.
            runner.park();
        }
        let s = jive::jit::cache_stats();
        assert_eq!(s.pending_sets, 0, "round {round}: {s:?}");
        assert_eq!(s.bytes_live, base.bytes_live, "round {round}: {s:?}");
        work_on(&mut runner, &mut app, &mut p, 6);
        if round % 4 == 1 {
            assert!(jive::jit::evict_oldest() > 0, "round {round}");
            work_on(&mut runner, &mut app, &mut p, 9);
            work_on(&mut runner, &mut app, &mut p, 10);
            jive::jit::park();
            let s = jive::jit::cache_stats();
            assert_eq!(s.pending_sets, 0, "round {round}: {s:?}");
            assert_eq!(s.entries, base.entries, "round {round}: {s:?}");
        }
    }
}

/// A native of an applet invoked on the runner invokes another applet
/// (on this thread's registration: the runner is borrowed by the outer
/// invocation), and both results are exact; code retired meanwhile is
/// freed by the runner's next invocation and the thread's park.
fn a_native_that_invokes_another_applet_runs_beside_the_runner() {
    let (Some(counter), Some(work)) = (
        common::class_bytes("default", "Counter"),
        common::class_bytes("default", "adversarial/ReplaceA"),
    ) else {
        return;
    };
    let inner = Arc::new(Mutex::new(load(&work, &Natives::new())));
    let natives = {
        let inner = inner.clone();
        Natives::new()
            .with("hostAdd", "(II)I", move |_, a| {
                let mut w = inner.lock().unwrap();
                let v = w.invoke("work", &[a[0]]).unwrap().value.unwrap();
                Ok(v.wrapping_add(a[1]))
            })
            .with("fill", "([BI)V", |_, _| Ok(0))
            .with("makeInts", "(I)[I", |_, _| Ok(0))
    };
    let mut outer = load(&counter, &natives);
    let mut p = outer.prepare::<1>("callNative").unwrap();
    let mut runner = Runner::new();
    for n in 0..20 {
        let c = outer.run_prepared_on(&mut runner, &mut p, [n], None);
        // callNative(a) = hostAdd(a, 1) = work(a) + 1.
        assert_eq!(c.value(), Some(work_result(n).wrapping_add(1)), "n = {n}");
    }
    jive::jit::park();
    let base = jive::jit::cache_stats();
    let b = common::class_bytes("default", "adversarial/ReplaceB").unwrap();
    drop(load(&b, &Natives::new()));
    jive::jit::park();
    assert_eq!(jive::jit::cache_stats().pending_sets, 1);
    let c = outer.run_prepared_on(&mut runner, &mut p, [3], None);
    assert_eq!(c.value(), Some(work_result(3).wrapping_add(1)));
    // The nested invocation flagged this thread's registration in again.
    jive::jit::park();
    let s = jive::jit::cache_stats();
    assert_eq!(s.pending_sets, 0, "{s:?}");
    assert_eq!(s.bytes_live, base.bytes_live, "{s:?}");
}

/// A native of an applet invoked on this thread's own registration
/// (`Applet::run_prepared`, no runner) invokes another applet and parks
/// the thread: the nested invocation finds the registration in use and
/// takes one of its own, `park` leaves it alone, and both results are
/// exact. After the outer invocation the registration is free again: code
/// retired after it waits for the thread alone, and `park` frees it.
fn a_nested_invocation_leaves_the_threads_registration_free() {
    let (Some(counter), Some(work), Some(b)) = (
        common::class_bytes("default", "Counter"),
        common::class_bytes("default", "adversarial/ReplaceA"),
        common::class_bytes("default", "adversarial/ReplaceB"),
    ) else {
        return;
    };
    let inner = Arc::new(Mutex::new(load(&work, &Natives::new())));
    let natives = {
        let inner = inner.clone();
        Natives::new()
            .with("hostAdd", "(II)I", move |_, a| {
                let mut w = inner.lock().unwrap();
                let v = w.invoke("work", &[a[0]]).unwrap().value.unwrap();
                // In use by the outer invocation: left alone.
                jive::jit::park();
                Ok(v.wrapping_add(a[1]))
            })
            .with("fill", "([BI)V", |_, _| Ok(0))
            .with("makeInts", "(I)[I", |_, _| Ok(0))
    };
    let mut outer = load(&counter, &natives);
    let mut p = outer.prepare::<1>("callNative").unwrap();
    for n in 0..20 {
        let c = outer.run_prepared(&mut p, [n], None);
        assert_eq!(c.value(), Some(work_result(n).wrapping_add(1)), "n = {n}");
    }
    jive::jit::park();
    let base = jive::jit::cache_stats();
    assert_eq!(base.pending_sets, 0, "{base:?}");
    for round in 0..4 {
        // The thread's registration flagged in (by its next invocation),
        // then code retired: pending until the thread parks.
        let c = outer.run_prepared(&mut p, [round], None);
        assert_eq!(c.value(), Some(work_result(round).wrapping_add(1)));
        drop(load(&b, &Natives::new()));
        let s = jive::jit::cache_stats();
        assert_eq!(s.pending_sets, 1, "round {round}: {s:?}");
        // Free again after the outer invocation: `park` flags it out.
        jive::jit::park();
        let s = jive::jit::cache_stats();
        assert_eq!(s.pending_sets, 0, "round {round}: {s:?}");
        assert_eq!(s.bytes_live, base.bytes_live, "round {round}: {s:?}");
    }
}
