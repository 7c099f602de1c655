//! Code the cache evicted is built again at the next invocation, on the
//! invoking thread, within a process-wide budget of CPU time a second
//! (`jive::jit::set_rebuild_budget`): applets whose code together passes
//! the cache's high-water mark would otherwise keep every invocation
//! rebuilding, and a host's threads (unet's engine serves every client
//! on them) doing nothing else. Past the budget the invocation runs on
//! the interpreter: the same values, traps, fuel and effects, through
//! every way of invoking (`call`, `call_value`, `invoke`, a prepared
//! handle). (Its own binary: the budget and the cache are the process's.)

mod common;

use std::time::Duration;

use jive::{Applet, Engine, InvokeError, Limits, Natives};

fn natives() -> Natives {
    Natives::new()
        .with("hostAdd", "(II)I", |_, a| Ok(a[0].wrapping_add(a[1])))
        .with("fill", "([BI)V", |_, _| Ok(0))
        .with("makeInts", "(I)[I", |cx, a| {
            cx.new_array(jive::subset::Prim::Int, a[0])
        })
}

fn load(bytes: &[u8], engine: Engine) -> Applet {
    Applet::load_with_engine(bytes, &natives(), Limits::default(), engine)
        .unwrap_or_else(|e| panic!("{engine:?}: {e}"))
}

/// Live entries in the shared cache.
fn entries() -> usize {
    jive::jit::cache_stats().entries
}

/// Every way of invoking `jit` (whose code is evicted) and `interp` (the
/// interpreter's copy, in the same state) gives the same outcome.
fn same_on_both(jit: &mut Applet, interp: &mut Applet, round: i32) {
    let mut bump = jit.prepare::<1>("bump").unwrap();
    let mut bump_i = interp.prepare::<1>("bump").unwrap();
    assert_eq!(
        jit.call_prepared(&mut bump, [round], None).unwrap(),
        interp.call_prepared(&mut bump_i, [round], None).unwrap(),
    );
    let m = jit.method("scratch").unwrap();
    let mi = interp.method("scratch").unwrap();
    let (o, oi) = (
        jit.call(&m, &[3 + round % 5], None).unwrap(),
        interp.call(&mi, &[3 + round % 5], None).unwrap(),
    );
    assert_eq!(o, oi, "value and fuel");
    assert_eq!(
        jit.call_value(&m, &[4], None).unwrap(),
        interp.call_value(&mi, &[4], None).unwrap()
    );
    assert_eq!(
        jit.invoke("callNative", &[round]).unwrap(),
        interp.invoke("callNative", &[round]).unwrap()
    );
    // A trap: the same kind, method and index, and the applet goes on.
    let trap = |a: &mut Applet| match a.invoke("scratch", &[0]) {
        Err(InvokeError::Trap(t)) => t,
        other => panic!("scratch(0) did not trap: {other:?}"),
    };
    assert_eq!(trap(jit), trap(interp));
}

#[test]
fn evicted_code_is_built_again_within_the_budget_and_interpreted_past_it() {
    let Some(bytes) = common::class_bytes("default", "Counter") else {
        return;
    };
    let mut jit = load(&bytes, Engine::Jit);
    let mut interp = load(&bytes, Engine::Interpreter);
    same_on_both(&mut jit, &mut interp, 0);
    let live = entries();
    assert!(live >= 1);

    // No budget: the evicted code is never built again, and every
    // invocation runs on the interpreter, with the same outcomes.
    jive::jit::set_rebuild_budget(Duration::ZERO);
    assert!(jive::jit::evict_oldest() > 0);
    assert_eq!(entries(), live - 1);
    for round in 1..20 {
        same_on_both(&mut jit, &mut interp, round);
        assert_eq!(entries(), live - 1, "round {round}: built again");
    }
    assert_eq!(jit.engine(), Engine::Jit, "it stays the JIT's");

    // A budget: the next invocation builds the code again, and the JIT
    // runs the ones after it.
    jive::jit::set_rebuild_budget(Duration::from_secs(1));
    same_on_both(&mut jit, &mut interp, 20);
    assert_eq!(entries(), live, "built again within the budget");

    // The budget is taken while any is left and charged after: with a
    // microsecond a second, the first rebuild (which takes longer) is
    // taken and spends it for far longer than this test runs.
    jive::jit::set_rebuild_budget(Duration::from_micros(1));
    assert!(jive::jit::evict_oldest() > 0);
    same_on_both(&mut jit, &mut interp, 21);
    assert_eq!(entries(), live, "the first rebuild is taken");
    assert!(jive::jit::evict_oldest() > 0);
    for round in 22..30 {
        same_on_both(&mut jit, &mut interp, round);
        assert_eq!(entries(), live - 1, "round {round}: built past the budget");
    }
    jive::jit::set_rebuild_budget(jive::jit::REBUILD_TIME_PER_SECOND);
}
