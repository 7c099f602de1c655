//! Prepared invocations (`Applet::prepare`, `Applet::call_prepared`): the
//! checks `Applet::call` makes on every call (the owner, the arity, the
//! engine, the table of enterable methods) are made when the handle is
//! prepared and again whenever what they depend on changes. These tests
//! change each between two calls of one handle and check that the next
//! call behaves as `Applet::call` (and the interpreter) would.

mod common;

use jive::{Applet, Engine, InvokeError, Limits, Natives, TrapKind};

fn load(name: &str, engine: Engine) -> Option<Applet> {
    let natives = Natives::new()
        .with("hostAdd", "(II)I", |_, a| Ok(a[0].wrapping_add(a[1])))
        .with("fill", "([BI)V", |cx, a| {
            cx.bytes(a[0])?.fill(a[1] as i8);
            Ok(0)
        })
        .with("makeInts", "(I)[I", |cx, a| {
            cx.new_array(jive::subset::Prim::Int, a[0])
        });
    let bytes = common::class_bytes("default", name)?;
    let a = Applet::load_with_engine(&bytes, &natives, Limits::default(), engine)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(a.engine(), engine);
    Some(a)
}

fn trap_kind(r: Result<Option<i32>, Box<InvokeError>>) -> TrapKind {
    match r.map_err(|e| *e) {
        Err(InvokeError::Trap(t)) => t.kind,
        other => panic!("expected a trap, got {other:?}"),
    }
}

#[test]
fn a_handle_is_prepared_for_its_arity_only() {
    let Some(a) = load("Counter", Engine::Jit) else {
        return;
    };
    assert!(a.prepare::<1>("bump").is_ok());
    assert!(matches!(
        a.prepare::<2>("bump"),
        Err(InvokeError::ArgumentCount {
            expected: 1,
            given: 2,
            ..
        })
    ));
    assert!(matches!(
        a.prepare::<0>("nothing"),
        Err(InvokeError::NoSuchMethod(_))
    ));
}

#[test]
fn another_applets_handle_is_refused_even_from_the_same_class() {
    let (Some(mut a), Some(mut b)) = (load("Counter", Engine::Jit), load("Counter", Engine::Jit))
    else {
        return;
    };
    let mut bump_a = a.prepare::<1>("bump").unwrap();
    assert_eq!(a.call_prepared(&mut bump_a, [1], None).unwrap(), Some(6));
    for _ in 0..3 {
        let r = b.call_prepared(&mut bump_a, [1], None);
        assert!(matches!(r.map_err(|e| *e), Err(InvokeError::ForeignMethod)));
    }
    // Neither applet's state moved by the refused calls, and the handle
    // still works on its own applet.
    assert_eq!(a.call_prepared(&mut bump_a, [1], None).unwrap(), Some(7));
    let mut bump_b = b.prepare::<1>("bump").unwrap();
    assert_eq!(b.call_prepared(&mut bump_b, [0], None).unwrap(), Some(5));
}

#[test]
fn a_limit_changed_between_two_calls_is_the_one_the_next_call_checks() {
    let Some(mut a) = load("Traps", Engine::Jit) else {
        return;
    };
    let mut recurse = a.prepare::<1>("recurse").unwrap();
    let mut spin = a.prepare::<1>("spin").unwrap();
    let fuel = a.limits().fuel;
    for depth in [256, 10, 300, 1] {
        a.set_run_limits(fuel, depth);
        assert_eq!(a.engine(), Engine::Jit);
        for _ in 0..2 {
            assert_eq!(
                trap_kind(a.call_prepared(&mut recurse, [0], None)),
                TrapKind::CallDepthExceeded(depth),
                "depth limit {depth}"
            );
        }
    }
    // Above the JIT's deepest chain: the interpreter runs the handle.
    a.set_run_limits(fuel, jive::jit::MAX_CALL_DEPTH + 1);
    assert_eq!(a.engine(), Engine::Interpreter);
    a.set_run_limits(fuel, 5);
    assert_eq!(
        trap_kind(a.call_prepared(&mut recurse, [0], None)),
        TrapKind::CallDepthExceeded(5)
    );
    a.set_engine(Engine::Jit).unwrap();
    let depth = a.limits().max_call_depth;
    for f in [1_000, 50, 1] {
        a.set_run_limits(Some(f), depth);
        for _ in 0..2 {
            assert_eq!(
                trap_kind(a.call_prepared(&mut spin, [0], None)),
                TrapKind::FuelExhausted(f),
                "fuel {f}"
            );
        }
    }
}

#[test]
fn a_handle_follows_the_applet_across_engines_and_recompilation() {
    let Some(mut a) = load("Counter", Engine::Interpreter) else {
        return;
    };
    // Prepared while the interpreter runs the applet.
    let mut bump = a.prepare::<1>("bump").unwrap();
    assert_eq!(a.call_prepared(&mut bump, [1], None).unwrap(), Some(6));
    a.set_engine(Engine::Jit).unwrap();
    assert_eq!(a.call_prepared(&mut bump, [1], None).unwrap(), Some(7));
    assert_eq!(a.call_prepared(&mut bump, [1], None).unwrap(), Some(8));
    a.set_engine(Engine::Interpreter).unwrap();
    assert_eq!(a.call_prepared(&mut bump, [1], None).unwrap(), Some(9));
    // Compiled again: a new stamp, the old word stale.
    a.set_engine(Engine::Jit).unwrap();
    assert_eq!(a.call_prepared(&mut bump, [1], None).unwrap(), Some(10));
    a.set_engine(Engine::Jit).unwrap();
    assert_eq!(a.call_prepared(&mut bump, [1], None).unwrap(), Some(11));
    // Calls by name in between (each keeps the context again).
    assert_eq!(a.invoke("bump", &[1]).unwrap().value, Some(12));
    assert_eq!(a.call_prepared(&mut bump, [1], None).unwrap(), Some(13));
}
