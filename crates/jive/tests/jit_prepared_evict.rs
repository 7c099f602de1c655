//! A prepared invocation (`Applet::call_prepared`) whose code is evicted
//! between two calls: the handle's word is unchanged (eviction is the code
//! cache's, not the applet's), the code cache's own check finds the code
//! gone, the next call compiles it again with the same results, and the
//! evicted copy is freed at that call, so deletion stays as prompt as with
//! `Applet::call`. (Its own binary: the cache is shared by the whole
//! process, and the test counts what is pending in it.)

mod common;

use jive::{Applet, Engine, Limits, Natives};

#[test]
fn a_handle_runs_the_code_compiled_again_after_its_eviction() {
    // Every rebuild taken: this test is about code built again (the
    // budget that bounds rebuilds is `jit_rebuild_budget.rs`'s).
    jive::jit::set_rebuild_budget(std::time::Duration::MAX);
    let Some(bytes) = common::class_bytes("default", "Counter") else {
        return;
    };
    let natives = Natives::new()
        .with("hostAdd", "(II)I", |_, a| Ok(a[0].wrapping_add(a[1])))
        .with("fill", "([BI)V", |_, _| Ok(0))
        .with("makeInts", "(I)[I", |cx, a| {
            cx.new_array(jive::subset::Prim::Int, a[0])
        });
    let mut a = Applet::load_with_engine(&bytes, &natives, Limits::default(), Engine::Jit)
        .unwrap_or_else(|e| panic!("Counter: {e}"));
    let mut bump = a.prepare::<1>("bump").unwrap();
    let mut expect = 5;
    let mut call = |a: &mut Applet, round: usize| {
        expect += 1;
        assert_eq!(
            a.call_prepared(&mut bump, [1], None).unwrap(),
            Some(expect),
            "round {round}"
        );
    };
    call(&mut a, 0);
    let base = jive::jit::cache_stats();
    assert_eq!(base.pending_sets, 0, "{base:?}");
    for round in 0..50 {
        if round % 2 == 0 {
            let before = jive::jit::cache_stats().evictions;
            assert!(jive::jit::evict_oldest() > 0, "round {round}");
            assert!(jive::jit::cache_stats().evictions > before);
            // Retired, and waiting for this thread's next synchronization
            // point.
            let s = jive::jit::cache_stats();
            assert_eq!(s.pending_sets, 1, "round {round}: {s:?}");
        }
        for _ in 0..3 {
            call(&mut a, round);
            // The call after an eviction refused the pinned code, entered
            // a scope, compiled the code again and freed the old copy.
            let s = jive::jit::cache_stats();
            assert_eq!(s.pending_sets, 0, "round {round}: {s:?}");
            assert_eq!(s.entries, base.entries, "round {round}: {s:?}");
        }
    }
    assert_eq!(a.engine(), Engine::Jit);
}
