//! The words of the JIT's invocation context that stay from one invocation
//! to the next (`jit::Compiled::keep`: the applet object's fields, the
//! call-depth limit, the fuel each invocation starts with, and the table of
//! methods an invocation may enter) are written where they change, not by
//! each `Applet::call`: these tests change each between two calls and check
//! that the next call runs with the new value, as the interpreter does.

mod common;

use jive::subset::Prim;
use jive::{Applet, Engine, InvokeError, Limits, Natives, TrapKind};

fn counter_natives() -> Natives {
    Natives::new()
        .with("hostAdd", "(II)I", |_, a| Ok(a[0].wrapping_add(a[1])))
        .with("fill", "([BI)V", |cx, a| {
            cx.bytes(a[0])?.fill(a[1] as i8);
            Ok(0)
        })
        .with("makeInts", "(I)[I", |cx, a| cx.new_array(Prim::Int, a[0]))
}

fn load(name: &str, natives: &Natives, engine: Engine) -> Option<Applet> {
    let bytes = common::class_bytes("default", name)?;
    let a = Applet::load_with_engine(&bytes, natives, Limits::default(), engine)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(a.engine(), engine);
    Some(a)
}

fn trap_kind(r: Result<jive::Outcome, InvokeError>) -> TrapKind {
    match r {
        Err(InvokeError::Trap(t)) => t.kind,
        other => panic!("expected a trap, got {other:?}"),
    }
}

#[test]
fn a_depth_limit_set_between_two_calls_is_the_one_the_next_call_checks() {
    let Some(mut a) = load("Traps", &Natives::new(), Engine::Jit) else {
        return;
    };
    let recurse = a.method("recurse").unwrap();
    let fuel = a.limits().fuel;
    for depth in [256, 10, 300, 1] {
        a.set_run_limits(fuel, depth);
        assert_eq!(a.engine(), Engine::Jit);
        assert_eq!(
            trap_kind(a.call(&recurse, &[0], None)),
            TrapKind::CallDepthExceeded(depth),
            "depth limit {depth}"
        );
    }
    // Above the JIT's deepest chain the applet moves to the interpreter,
    // which checks the limit itself.
    a.set_run_limits(fuel, jive::jit::MAX_CALL_DEPTH + 1);
    assert_eq!(a.engine(), Engine::Interpreter);
    // And back: compiled again, with the limit kept in its context.
    a.set_run_limits(fuel, 7);
    a.set_engine(Engine::Jit).unwrap();
    assert_eq!(
        trap_kind(a.call(&recurse, &[0], None)),
        TrapKind::CallDepthExceeded(7)
    );
}

#[test]
fn a_fuel_limit_set_between_two_calls_is_the_one_the_next_call_starts_with() {
    let Some(mut a) = load("Traps", &Natives::new(), Engine::Jit) else {
        return;
    };
    let spin = a.method("spin").unwrap();
    let hog = a.method("hog").unwrap();
    let depth = a.limits().max_call_depth;
    for fuel in [1_000, 50, 20_000, 1] {
        // Metered both before and after: the code is not compiled again,
        // so only the kept limit changes.
        a.set_run_limits(Some(fuel), depth);
        assert_eq!(
            trap_kind(a.call(&spin, &[0], None)),
            TrapKind::FuelExhausted(fuel),
            "fuel {fuel}"
        );
        // A call that ends normally reports what it used of the new limit.
        let used = a.call(&hog, &[0], None).unwrap().fuel_used;
        assert_eq!(used, 0, "fuel {fuel}");
    }
    // Unmetered (compiled again) and metered again.
    a.set_run_limits(None, depth);
    assert_eq!(a.call(&hog, &[3], None).unwrap().value, Some(3000));
    a.set_run_limits(Some(2), depth);
    assert_eq!(
        trap_kind(a.call(&spin, &[0], None)),
        TrapKind::FuelExhausted(2)
    );
}

#[test]
fn code_compiled_after_the_applet_was_made_reads_its_fields() {
    let natives = counter_natives();
    let Some(mut a) = load("Counter", &natives, Engine::Interpreter) else {
        return;
    };
    let bump = a.method("bump").unwrap();
    let buf_len = a.method("bufLen").unwrap();
    assert_eq!(a.call(&bump, &[1], None).unwrap().value, Some(6));
    // The object was made before the code: switching engines gives the
    // code the object's fields.
    a.set_engine(Engine::Jit).unwrap();
    assert_eq!(a.call(&bump, &[1], None).unwrap().value, Some(7));
    assert_eq!(a.call(&buf_len, &[], None).unwrap().value, Some(16));
    // The heap's directory grows between two calls (arrays the host
    // stores, each replacing the last): the next call finds it.
    for n in 1..200 {
        a.set_static_int_array("hist", &vec![n; n as usize])
            .unwrap();
        let len = a.method("histLen").unwrap();
        assert_eq!(a.call(&len, &[], None).unwrap().value, Some(n));
    }
    assert_eq!(a.call(&bump, &[2], None).unwrap().value, Some(9));
    a.set_engine(Engine::Interpreter).unwrap();
    assert_eq!(a.call(&bump, &[1], None).unwrap().value, Some(10));
    a.set_engine(Engine::Jit).unwrap();
    assert_eq!(a.call(&bump, &[1], None).unwrap().value, Some(11));
}
