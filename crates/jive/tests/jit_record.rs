//! The JIT's invocation record (`Compiled::rec`): the words of an
//! invocation kept from one to the next, and the pointers each invocation
//! writes again from its own borrows. These tests change what those
//! pointers depend on between two prepared invocations
//! (`Applet::run_prepared`) and check that the next one sees the change:
//! the heap's directory moved (the heap grew), the applet itself moved
//! (its heap with it), another host value, and limits changed.

mod common;

use jive::{Applet, Engine, InvokeError, Limits, Natives, TrapKind};

/// The host value of `Counter`'s natives here: how often `hostAdd` ran
/// with it.
#[derive(Debug, Default)]
struct Tally {
    adds: u32,
}

fn natives() -> Natives {
    Natives::new()
        .with("hostAdd", "(II)I", |cx, a| {
            cx.host::<Tally>()?.adds += 1;
            Ok(a[0].wrapping_add(a[1]))
        })
        .with("fill", "([BI)V", |cx, a| {
            cx.bytes(a[0])?.fill(a[1] as i8);
            Ok(0)
        })
        .with("makeInts", "(I)[I", |cx, a| {
            cx.new_array(jive::subset::Prim::Int, a[0])
        })
}

fn counter() -> Option<Applet> {
    let bytes = common::class_bytes("default", "Counter")?;
    let a = Applet::load_with_engine(&bytes, &natives(), Limits::default(), Engine::Jit)
        .unwrap_or_else(|e| panic!("Counter: {e}"));
    assert_eq!(a.engine(), Engine::Jit);
    Some(a)
}

fn trap_kind(a: &mut Applet, c: jive::Called) -> TrapKind {
    assert!(!c.is_ok(), "expected a trap, got {c:?}");
    // A host's one-test screen of the common outcome never passes a failure.
    assert!(
        !c.returned_non_negative(),
        "a failure screened as returned: {c:?}"
    );
    match a.take_error().map(|e| *e) {
        Some(InvokeError::Trap(t)) => t.kind,
        other => panic!("expected a trap, got {other:?}"),
    }
}

/// `RxBuf` replaced by larger and larger arrays between invocations, with
/// more arrays kept alive each time: the heap's directory grows (and so
/// moves) between two invocations, and `rxSum` reads the new `RxBuf`
/// through the directory the invocation found, not the one of the last.
#[test]
fn an_invocation_reads_the_heap_through_its_directory_as_it_is_now() {
    let Some(mut a) = counter() else {
        return;
    };
    let mut rx_sum = a.prepare::<1>("rxSum").unwrap();
    let mut keep = a.prepare::<1>("keep").unwrap();
    a.set_static_array("RxBuf", &[1, 2, 3]).unwrap();
    assert_eq!(a.run_prepared(&mut rx_sum, [3], None).value(), Some(6));
    // Arrays kept by the host's own handles are what the directory must
    // describe: each `set_static_array` allocates one (the last stays
    // reachable), each `makeInts` through `fromHost` one more that the
    // next collection frees; the `hist` array made by `keep` stays.
    let mut from_host = a.prepare::<1>("fromHost").unwrap();
    for round in 1..200u32 {
        let len = 3 + round as usize;
        let data: Vec<u8> = (0..len).map(|i| (i as u32 * 7 + round) as u8).collect();
        a.set_static_array("RxBuf", &data).unwrap();
        assert_eq!(
            a.run_prepared(&mut keep, [round as i32 % 50 + 1], None)
                .value(),
            Some(round as i32 % 50 + 1)
        );
        assert_eq!(
            a.run_prepared(&mut from_host, [round as i32], None).value(),
            Some(round as i32)
        );
        let want: i32 = data.iter().map(|&b| i32::from(b as i8)).sum();
        assert_eq!(
            a.run_prepared(&mut rx_sum, [len as i32], None).value(),
            Some(want),
            "round {round}"
        );
    }
}

/// The applet moved between invocations (out of one box into another, the
/// first freed): the heap is a field of the applet, so its address
/// changed, and an invocation whose runtime calls allocate (`fromHost`,
/// through the native `makeInts`) and read fields (`bump`) must reach the
/// heap where it is now.
#[test]
fn an_applet_that_moved_is_invoked_where_it_is_now() {
    let Some(a) = counter() else {
        return;
    };
    let mut a = Box::new(a);
    let mut bump = a.prepare::<1>("bump").unwrap();
    let mut from_host = a.prepare::<1>("fromHost").unwrap();
    assert_eq!(a.run_prepared(&mut bump, [1], None).value(), Some(6));
    let mut count = 6;
    for round in 1..50 {
        // Moved out of its box into a new one; the old box is freed.
        let spacer = vec![1u8; 4096 * round];
        a = moved(a);
        assert_eq!(
            a.run_prepared(&mut from_host, [round as i32 + 1], None)
                .value(),
            Some(round as i32 + 1),
            "round {round}"
        );
        count += round as i32;
        assert_eq!(
            a.run_prepared(&mut bump, [round as i32], None).value(),
            Some(count),
            "round {round}"
        );
        drop(spacer);
    }
}

/// The statics' buffer is given to the code once (`Compiled::keep`), not
/// per invocation: a static written before the applet moved is read
/// after, and one written after is read by the next, through prepared
/// invocations, the checked `invoke` (which runs through `keep` again)
/// and a collection that frees the array the static held before.
#[test]
fn an_applet_that_moved_finds_its_statics() {
    let Some(a) = counter() else {
        return;
    };
    let mut a = Box::new(a);
    let mut keep = a.prepare::<1>("keep").unwrap();
    let mut hist_len = a.prepare::<0>("histLen").unwrap();
    assert_eq!(a.run_prepared(&mut keep, [3], None).value(), Some(3));
    for round in 1..40i32 {
        let spacer = vec![1u8; 4096 * round as usize];
        a = moved(a);
        assert_eq!(
            a.run_prepared(&mut hist_len, [], None).value(),
            Some(if round == 1 { 3 } else { round + 2 }),
            "round {round}: the static written before the move"
        );
        if round % 3 == 0 {
            // The checked way writes the context again (`keep`).
            let o = a.invoke("keep", &[round + 3]).unwrap();
            assert_eq!(o.value, Some(round + 3));
        } else {
            assert_eq!(
                a.run_prepared(&mut keep, [round + 3], None).value(),
                Some(round + 3)
            );
        }
        assert_eq!(
            a.run_prepared(&mut hist_len, [], None).value(),
            Some(round + 3),
            "round {round}: the static written after the move"
        );
        drop(spacer);
    }
}

/// `a` moved into a new box, allocated while the old one still is (so at
/// another address); the old one is freed on return.
fn moved(a: Box<Applet>) -> Box<Applet> {
    Box::new(*a)
}

/// Two host values in turn: each invocation's natives see the host value
/// that invocation was given, never the last one's.
#[test]
fn each_invocation_gives_its_natives_its_own_host_value() {
    let Some(mut a) = counter() else {
        return;
    };
    let mut call = a.prepare::<1>("callNative").unwrap();
    let (mut x, mut y) = (Tally::default(), Tally::default());
    for round in 0..20 {
        assert_eq!(
            a.run_prepared(&mut call, [round], Some(&mut x)).value(),
            Some(round + 1)
        );
        assert_eq!((x.adds, y.adds), (round as u32 + 1, round as u32));
        {
            // A host value that lives only for this invocation.
            let mut z = Tally::default();
            assert_eq!(
                a.run_prepared(&mut call, [round], Some(&mut z)).value(),
                Some(round + 1)
            );
            assert_eq!(z.adds, 1);
        }
        assert_eq!(
            a.run_prepared(&mut call, [round], Some(&mut y)).value(),
            Some(round + 1)
        );
        assert_eq!((x.adds, y.adds), (round as u32 + 1, round as u32 + 1));
    }
    // No host value: the native's own error, as a trap.
    let c = a.run_prepared(&mut call, [1], None);
    assert!(matches!(trap_kind(&mut a, c), TrapKind::Native(_)));
    assert_eq!((x.adds, y.adds), (20, 20));
}

/// Limits changed between two invocations of one handle: the fuel the
/// next starts with and the depth limit it checks are the new ones,
/// metering switched on and off recompiles the code and the handle
/// follows it.
#[test]
fn limits_changed_between_invocations_are_the_ones_the_next_runs_under() {
    let Some(bytes) = common::class_bytes("default", "Traps") else {
        return;
    };
    let mut a = Applet::load_with_engine(&bytes, &Natives::new(), Limits::default(), Engine::Jit)
        .expect("Traps");
    let mut spin = a.prepare::<1>("spin").unwrap();
    let mut recurse = a.prepare::<1>("recurse").unwrap();
    let mut bump = a.prepare::<0>("bump").unwrap();
    let depth = a.limits().max_call_depth;
    let mut counter = 0;
    for f in [500, 20, 1_000, 3_000] {
        a.set_run_limits(Some(f), depth);
        assert_eq!(a.engine(), Engine::Jit);
        for _ in 0..2 {
            let c = a.run_prepared(&mut spin, [0], None);
            assert_eq!(trap_kind(&mut a, c), TrapKind::FuelExhausted(f), "fuel {f}");
            // The next invocation starts with the whole limit again, not
            // with what the trapped one left (nothing).
            counter += 1;
            assert_eq!(
                a.run_prepared(&mut bump, [], None).value(),
                Some(counter),
                "fuel {f}"
            );
        }
    }
    for d in [7, 64, 2] {
        a.set_run_limits(None, d);
        let c = a.run_prepared(&mut recurse, [0], None);
        assert_eq!(
            trap_kind(&mut a, c),
            TrapKind::CallDepthExceeded(d),
            "depth {d}"
        );
        a.set_run_limits(Some(1_000_000), d);
        let c = a.run_prepared(&mut recurse, [0], None);
        assert_eq!(
            trap_kind(&mut a, c),
            TrapKind::CallDepthExceeded(d),
            "metered, depth {d}"
        );
    }
    // The error is taken once.
    assert!(a.take_error().is_none());
}

/// Every failing way returns `Called::FAILURE` on the interpreter too
/// (`Applet::failed`), not only from the JIT's trap: a native's error,
/// fuel and depth run out, each through `run_prepared`, fail the host's
/// one-test screen (`trap_kind` asserts it) and report the interpreter's
/// trap.
#[test]
fn an_interpreted_failure_fails_the_screen_too() {
    let (Some(counter), Some(traps)) = (
        common::class_bytes("default", "Counter"),
        common::class_bytes("default", "Traps"),
    ) else {
        return;
    };
    let mut a =
        Applet::load_with_engine(&counter, &natives(), Limits::default(), Engine::Interpreter)
            .unwrap_or_else(|e| panic!("Counter: {e}"));
    assert_eq!(a.engine(), Engine::Interpreter);
    let mut call = a.prepare::<1>("callNative").unwrap();
    let c = a.run_prepared(&mut call, [1], None);
    assert_eq!(c.value(), None);
    assert!(matches!(trap_kind(&mut a, c), TrapKind::Native(_)));
    let mut a = Applet::load_with_engine(
        &traps,
        &Natives::new(),
        Limits::default(),
        Engine::Interpreter,
    )
    .expect("Traps");
    let mut spin = a.prepare::<1>("spin").unwrap();
    let depth = a.limits().max_call_depth;
    a.set_run_limits(Some(20), depth);
    let c = a.run_prepared(&mut spin, [0], None);
    assert_eq!(trap_kind(&mut a, c), TrapKind::FuelExhausted(20));
    let mut recurse = a.prepare::<1>("recurse").unwrap();
    a.set_run_limits(None, 7);
    let c = a.run_prepared(&mut recurse, [0], None);
    assert_eq!(trap_kind(&mut a, c), TrapKind::CallDepthExceeded(7));
}
