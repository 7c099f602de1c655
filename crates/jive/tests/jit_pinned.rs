//! An applet invoked again and again on one thread runs its code without
//! entering a code-cache scope while nothing has been retired
//! (`codecache::Thread::lookup_pinned`), and that never holds deletion
//! back: code retired between two invocations is freed at the thread's
//! next invocation, exactly as with a scope entered per invocation, and
//! the applet's own code, evicted, is compiled again at its next one.
//! (Its own binary: the cache is shared by the whole process, and the
//! test counts what is pending in it.)

mod common;

use jive::{Applet, Engine, Limits, Natives};

fn load(bytes: &[u8]) -> Applet {
    let a = Applet::load_with_engine(bytes, &Natives::new(), Limits::default(), Engine::Jit)
        .unwrap_or_else(|e| panic!("the JIT cannot load the applet: {e}"));
    assert_eq!(a.engine(), Engine::Jit);
    a
}

/// `s = s * 31 + step(i)` for `i < n`, `step(x) = x * 3 + 1`: what `work(n)`
/// of `adversarial/ReplaceA` adds to its `total` (it returns `s ^ 1`).
fn work_sum(n: i32) -> i32 {
    (0..n).fold(0i32, |s, i| {
        s.wrapping_mul(31)
            .wrapping_add(i.wrapping_mul(3).wrapping_add(1))
    })
}

#[test]
fn code_retired_between_two_invocations_is_freed_at_the_next() {
    // Every rebuild taken: this test is about code built again (the
    // budget that bounds rebuilds is `jit_rebuild_budget.rs`'s).
    jive::jit::set_rebuild_budget(std::time::Duration::MAX);
    let (Some(a), Some(b)) = (
        common::class_bytes("default", "adversarial/ReplaceA"),
        common::class_bytes("default", "adversarial/ReplaceB"),
    ) else {
        return;
    };
    let mut runner = load(&a);
    let work = runner.method("work").expect("work(int)");
    let call = |runner: &mut Applet, n: i32| {
        let v = runner.call(&work, &[n], None).expect("work(n)").value;
        assert_eq!(v, Some(work_sum(n) ^ 1), "work({n})");
    };
    // The first invocation looks the code up; the later ones reuse it
    // without a scope while nothing is retired.
    call(&mut runner, 3);
    call(&mut runner, 4);
    let base = jive::jit::cache_stats();
    assert_eq!(base.pending_sets, 0, "{base:?}");
    for round in 0..20 {
        let mut other = load(&b);
        other.invoke("work", &[round]).unwrap();
        drop(other);
        // Retired: this thread is registered and flagged in, so the code
        // waits for its next synchronization point.
        let s = jive::jit::cache_stats();
        assert_eq!(s.pending_sets, 1, "round {round}: {s:?}");
        // The next invocation passes it (the stamp moved, so the pinned
        // code is refused and a scope entered) and frees the code.
        call(&mut runner, 5 + round % 7);
        let s = jive::jit::cache_stats();
        assert_eq!(s.pending_sets, 0, "round {round}: {s:?}");
        assert_eq!(s.bytes_live, base.bytes_live, "round {round}: {s:?}");
        // And the runner's own code, evicted, is compiled again at its
        // next invocation, with the same results; the evicted copy is
        // freed as that invocation enters its scope.
        if round % 5 == 0 {
            let before = jive::jit::cache_stats().evictions;
            assert!(jive::jit::evict_oldest() > 0, "round {round}");
            assert!(jive::jit::cache_stats().evictions > before);
            call(&mut runner, 9);
            call(&mut runner, 10);
            let s = jive::jit::cache_stats();
            assert_eq!(s.pending_sets, 0, "round {round}: {s:?}");
            assert_eq!(s.entries, base.entries, "round {round}: {s:?}");
        }
    }
}
