//! The behaviour of loaded applets, as a specification: invocation, instance
//! state, natives, traps, run-time limits and the heap model. Each test runs
//! on the class files of both `javac --release 8` and the JDK's default.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use common::{RELEASES, class_bytes};
use jive::subset::Prim;
use jive::{Applet, Engine, InvokeError, Limits, LoadError, Natives, Object, TrapKind};

fn load(release: &str, name: &str, natives: &Natives, limits: Limits) -> Option<Applet> {
    let bytes = class_bytes(release, name)?;
    Some(Applet::load(&bytes, natives, limits).unwrap_or_else(|e| panic!("{release} {name}: {e}")))
}

fn counter_natives() -> Natives {
    Natives::new()
        .with("hostAdd", "(II)I", |_, a| Ok(a[0].wrapping_add(a[1])))
        .with("fill", "([BI)V", |cx, a| {
            cx.bytes(a[0])?.fill(a[1] as i8);
            Ok(0)
        })
        .with("makeInts", "(I)[I", |cx, a| cx.new_array(Prim::Int, a[0]))
}

fn trap_kind(r: Result<jive::Outcome, InvokeError>) -> TrapKind {
    match r {
        Err(InvokeError::Trap(t)) => t.kind,
        other => panic!("expected a trap, got {other:?}"),
    }
}

#[test]
fn static_methods_return_their_results() {
    for r in RELEASES {
        let Some(mut a) = load(r, "Arith", &Natives::new(), Limits::default()) else {
            return;
        };
        assert_eq!(
            a.invoke("add", &[i32::MAX, 1]).unwrap().value,
            Some(i32::MIN)
        );
        assert_eq!(
            a.invoke("div", &[i32::MIN, -1]).unwrap().value,
            Some(i32::MIN)
        );
        assert_eq!(a.invoke("rem", &[i32::MIN, -1]).unwrap().value, Some(0));
        assert_eq!(a.invoke("shl", &[1, 33]).unwrap().value, Some(2));
        assert_eq!(a.invoke("ushr", &[-1, 28]).unwrap().value, Some(15));
        assert_eq!(a.invoke("toByte", &[200]).unwrap().value, Some(-56));
        assert_eq!(a.invoke("retByte", &[100]).unwrap().value, Some(44));
        assert_eq!(a.invoke("isNeg", &[-3]).unwrap().value, Some(1));
        assert_eq!(a.invoke("tswitch", &[4]).unwrap().value, Some(14));
        assert_eq!(a.invoke("tswitch", &[3]).unwrap().value, Some(-1));
        assert_eq!(a.invoke("lswitch", &[i32::MIN]).unwrap().value, Some(5));
        assert_eq!(a.invoke("fib", &[20]).unwrap().value, Some(6765));
        assert_eq!(a.invoke("incs", &[0]).unwrap().value, Some(41101));
        assert_eq!(a.invoke("intArray", &[10, 3]).unwrap().value, Some(135));
    }
}

#[test]
fn arguments_are_narrowed_to_the_parameter_type() {
    for r in RELEASES {
        let Some(mut a) = load(r, "Arith", &Natives::new(), Limits::default()) else {
            return;
        };
        // isSmall(byte): 300 becomes (byte) 44, which is not < 10.
        assert_eq!(a.invoke("isSmall", &[300]).unwrap().value, Some(0));
        assert_eq!(a.invoke("isSmall", &[260]).unwrap().value, Some(1));
    }
}

#[test]
fn host_call_errors_say_what_is_wrong() {
    for r in RELEASES {
        let Some(mut a) = load(r, "Counter", &counter_natives(), Limits::default()) else {
            return;
        };
        assert_eq!(
            a.invoke("nope", &[]),
            Err(InvokeError::NoSuchMethod("nope".into()))
        );
        assert!(matches!(
            a.invoke("bump", &[]),
            Err(InvokeError::ArgumentCount {
                expected: 1,
                given: 0,
                ..
            })
        ));
        assert!(matches!(
            a.invoke("hostAdd", &[1, 2]),
            Err(InvokeError::NotInvocable(_))
        ));
        assert!(matches!(
            a.invoke("<init>", &[]),
            Err(InvokeError::NotInvocable(_))
        ));
        assert!(matches!(
            a.set_static_array("hist", &[1]),
            Err(InvokeError::NoSuchField { .. })
        ));
    }
}

/// `<clinit>` and the constructor share one invocation's fuel (a host that
/// runs them under its locks bounds them as it bounds an invocation):
/// `InitFuel`'s each run `again`'s loop, which 700 units pay for, but not
/// twice. The load fails in the constructor, naming the whole limit, on
/// both engines; with enough for both, each initializer ran.
#[test]
fn the_initializers_share_one_invocations_fuel() {
    let fuel = |units| Limits {
        fuel: Some(units),
        ..Limits::default()
    };
    for r in RELEASES {
        let Some(bytes) = class_bytes(r, "InitFuel") else {
            return;
        };
        for engine in [Engine::Interpreter, Engine::Jit] {
            let load =
                |units| Applet::load_with_engine(&bytes, &Natives::new(), fuel(units), engine);
            let mut a = load(1_300).unwrap_or_else(|e| panic!("{r} {engine:?}: {e}"));
            let once = a.invoke("again", &[]).unwrap();
            assert_eq!(once.value, Some(179_700));
            assert!(
                (600..700).contains(&once.fuel_used),
                "{r} {engine:?}: one initializer's loop takes {} units",
                once.fuel_used
            );
            assert_eq!(a.invoke("total", &[]).unwrap().value, Some(179_700));
            assert_eq!(a.invoke("mine", &[]).unwrap().value, Some(179_700));
            match load(700) {
                Err(LoadError::Instantiate(trap)) => {
                    assert_eq!(trap.kind, TrapKind::FuelExhausted(700), "{r} {engine:?}");
                    assert_eq!(trap.method, "<init>()V", "{r} {engine:?}");
                }
                other => panic!("{r} {engine:?}: 700 units for both initializers: {other:?}"),
            }
        }
    }
}

#[test]
fn a_resolved_method_is_called_on_its_own_applet_only_and_narrows_like_invoke() {
    for r in RELEASES {
        for engine in [Engine::Interpreter, Engine::Jit] {
            let load_on = |name: &str, natives: &Natives| {
                let mut a = load(r, name, natives, Limits::default())?;
                a.set_engine(engine).expect("the engine runs the applet");
                Some(a)
            };
            let (Some(mut a), Some(mut b)) = (
                load_on("Counter", &counter_natives()),
                load_on("Counter", &counter_natives()),
            ) else {
                return;
            };
            let bump = a.method("bump").unwrap();
            assert_eq!(a.call(&bump, &[2], None).unwrap().value, Some(7));
            // Another applet of the same class refuses it and is untouched.
            assert_eq!(b.call(&bump, &[2], None), Err(InvokeError::ForeignMethod));
            assert_eq!(b.invoke("bump", &[2]).unwrap().value, Some(7));
            assert!(matches!(
                a.call(&bump, &[], None),
                Err(InvokeError::ArgumentCount {
                    expected: 1,
                    given: 0,
                    ..
                })
            ));
            assert_eq!(a.call(&bump, &[3], None).unwrap().value, Some(10));

            let Some(mut arith) = load_on("Arith", &Natives::new()) else {
                return;
            };
            let is_small = arith.method("isSmall").unwrap();
            assert_eq!(arith.call(&is_small, &[300], None).unwrap().value, Some(0));
            assert_eq!(arith.call(&is_small, &[260], None).unwrap().value, Some(1));
            let add = arith.method("add").unwrap();
            assert_eq!(
                arith.call(&add, &[i32::MAX, 1], None).unwrap().value,
                Some(i32::MIN)
            );
        }
    }
}

#[test]
fn call_value_returns_what_call_returns_and_the_same_errors() {
    for r in RELEASES {
        for engine in [Engine::Interpreter, Engine::Jit] {
            let Some(mut arith) = load(r, "Arith", &Natives::new(), Limits::default()) else {
                return;
            };
            arith
                .set_engine(engine)
                .expect("the engine runs the applet");
            let div = arith.method("div").unwrap();
            assert_eq!(arith.call_value(&div, &[7, 2], None), Ok(Some(3)));
            assert_eq!(arith.call(&div, &[7, 2], None).unwrap().value, Some(3));
            let small = arith.method("isSmall").unwrap();
            assert_eq!(arith.call_value(&small, &[260], None), Ok(Some(1)));
            // A trap: the same error, with its method and bytecode index.
            let by_zero = arith.call(&div, &[7, 0], None).unwrap_err();
            assert!(matches!(&by_zero, InvokeError::Trap(t)
                if t.kind == TrapKind::DivisionByZero && t.method.starts_with("div")));
            assert_eq!(
                arith.call_value(&div, &[7, 0], None),
                Err(Box::new(by_zero))
            );
            // The applet runs on after it.
            assert_eq!(arith.call_value(&div, &[-9, 3], None), Ok(Some(-3)));
            // Refusals, as `call` refuses.
            assert_eq!(
                arith.call_value(&div, &[1], None).unwrap_err().to_string(),
                arith.call(&div, &[1], None).unwrap_err().to_string()
            );
            let Some(other) = load(r, "Arith", &Natives::new(), Limits::default()) else {
                return;
            };
            let foreign = other.method("div").unwrap();
            assert_eq!(
                arith.call_value(&foreign, &[1, 1], None),
                Err(Box::new(InvokeError::ForeignMethod))
            );
        }
    }
}

#[test]
fn the_constructor_runs_once_and_instance_state_persists() {
    for r in RELEASES {
        let Some(mut a) = load(r, "Counter", &counter_natives(), Limits::default()) else {
            return;
        };
        assert_eq!(a.static_int("made").unwrap(), 1);
        assert_eq!(a.invoke("bump", &[2]).unwrap().value, Some(7));
        assert_eq!(a.invoke("bump", &[3]).unwrap().value, Some(10));
        assert_eq!(a.invoke("viaPriv", &[1]).unwrap().value, Some(21));
        assert_eq!(a.invoke("bufLen", &[]).unwrap().value, Some(16));
        assert_eq!(a.invoke("histLen", &[]).unwrap().value, Some(4));
    }
}

#[test]
fn natives_are_called_with_their_arguments_and_see_the_applets_arrays() {
    for r in RELEASES {
        let Some(mut a) = load(r, "Counter", &counter_natives(), Limits::default()) else {
            return;
        };
        assert_eq!(a.invoke("callNative", &[41]).unwrap().value, Some(42));
        assert_eq!(a.invoke("fillBuf", &[-7]).unwrap().value, Some(-7));
        assert_eq!(a.invoke("fromHost", &[9]).unwrap().value, Some(9));
    }
}

#[test]
fn an_unknown_native_is_a_load_error() {
    let Some(bytes) = class_bytes("default", "Counter") else {
        return;
    };
    let natives =
        Natives::new()
            .with("hostAdd", "(II)I", |_, _| Ok(0))
            .with("fill", "([BI)V", |_, _| Ok(0));
    let e = Applet::load(&bytes, &natives, Limits::default()).unwrap_err();
    assert_eq!(
        e,
        LoadError::UnknownNative {
            name: "makeInts".into(),
            descriptor: "(I)[I".into()
        }
    );
    // Binding by name alone is not enough: the descriptor must match too.
    let natives = counter_natives().with("makeInts", "(I)[B", |_, _| Ok(0));
    let mut natives2 = Natives::new();
    natives2
        .register("hostAdd", "(II)I", |_, _| Ok(0))
        .register("fill", "([BI)V", |_, _| Ok(0))
        .register("makeInts", "(I)[B", |_, _| Ok(0));
    assert!(Applet::load(&bytes, &natives, Limits::default()).is_ok());
    assert!(matches!(
        Applet::load(&bytes, &natives2, Limits::default()),
        Err(LoadError::UnknownNative { .. })
    ));
}

#[test]
fn a_failing_native_traps_and_a_native_cannot_forge_an_array() {
    let Some(bytes) = class_bytes("default", "Counter") else {
        return;
    };
    let natives = counter_natives()
        .with("hostAdd", "(II)I", |_, _| {
            Err(jive::NativeError("device busy".into()))
        })
        .with("makeInts", "(I)[I", |_, a| Ok(a[0]));
    let mut a = Applet::load(&bytes, &natives, Limits::default()).unwrap();
    assert_eq!(
        trap_kind(a.invoke("callNative", &[1])),
        TrapKind::Native("hostAdd(II)I: device busy".into())
    );
    // Handle 1 is the byte[] buf, not an int[]: the forged reference is refused.
    assert!(
        matches!(trap_kind(a.invoke("fromHost", &[1])), TrapKind::Native(m) if m.contains("not a handle"))
    );
}

/// A native that panics is a trap on both engines, the same one, and the
/// panic goes no further than the invocation: the host that invoked it
/// (which may have lent words for the call) goes on, and so does the
/// applet.
#[test]
fn a_panicking_native_traps_alike_on_both_engines() {
    let Some(bytes) = class_bytes("default", "Counter") else {
        return;
    };
    let natives = counter_natives().with("hostAdd", "(II)I", |_, a| {
        if a[0] == 1 {
            panic!("a bug in the host's native");
        }
        Ok(a[0] + a[1])
    });
    let engines: &[jive::Engine] = if jive::jit::available() {
        &[jive::Engine::Interpreter, jive::Engine::Jit]
    } else {
        &[jive::Engine::Interpreter]
    };
    for &engine in engines {
        let mut a = Applet::load(&bytes, &natives, Limits::default()).unwrap();
        a.set_engine(engine).unwrap();
        assert_eq!(
            trap_kind(a.invoke("callNative", &[1])),
            TrapKind::Native("hostAdd(II)I: the native panicked".into()),
            "{engine:?}"
        );
        assert_eq!(
            a.invoke("callNative", &[2]).unwrap().value,
            Some(3),
            "{engine:?}: the applet runs on"
        );
    }
}

#[test]
fn the_host_hands_the_applet_a_receive_buffer() {
    for r in RELEASES {
        let Some(mut a) = load(r, "Counter", &counter_natives(), Limits::default()) else {
            return;
        };
        a.set_static_array("RxBuf", &[1, 2, 3, 250]).unwrap();
        assert_eq!(a.invoke("rxSum", &[4]).unwrap().value, Some(1 + 2 + 3 - 6));
        a.invoke("rxInc", &[]).unwrap();
        assert_eq!(
            a.static_array("RxBuf"),
            Some(&Object::Bytes(vec![2, 2, 3, -6]))
        );
        // Replacing the buffer frees the old one.
        let before = a.heap().object_count();
        a.set_static_array("RxBuf", &[9; 100]).unwrap();
        assert_eq!(a.heap().object_count(), before);
    }
}

#[test]
fn the_figure_2_applet_runs_against_host_natives() {
    let log = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let l = |log: &Arc<std::sync::Mutex<Vec<String>>>, name: &'static str| {
        let log = log.clone();
        move |_: &mut jive::Context<'_>, a: &[i32]| {
            log.lock().unwrap().push(format!("{name}{a:?}"));
            Ok(0)
        }
    };
    let free = Arc::new(AtomicI32::new(8192));
    let f2 = free.clone();
    let natives = Natives::new()
        .with("newAlignedArray", "(I)[B", |cx, a| {
            cx.new_array(Prim::Byte, a[0])
        })
        .with("getFreeBufferLength", "()I", |_, _| Ok(2048))
        .with("getFreeBuffer", "()I", move |_, _| {
            Ok(f2.load(Ordering::Relaxed))
        })
        .with("doHtoLDMA", "([BIII)V", l(&log, "doHtoLDMA"))
        .with("doLtoHDMA", "([BIII)V", l(&log, "doLtoHDMA"))
        .with("txPush", "([BIII)V", l(&log, "txPush"))
        .with("dmaRxd", "([III)V", |cx, a| {
            let offsets = cx.ints(a[0])?;
            assert_eq!(offsets.len(), 14);
            Ok(0)
        })
        .with("dmaRxdPayload", "([BII)V", l(&log, "dmaRxdPayload"));
    for r in RELEASES {
        let Some(mut a) = load(r, "RawUnet", &natives, Limits::default()) else {
            return;
        };
        log.lock().unwrap().clear();
        assert_eq!(a.static_int("freebufferlen").unwrap(), 2048);
        a.set_static_array("RxBuf", &[0; 1500]).unwrap();
        assert_eq!(a.invoke("doTx", &[100, 3, 64]).unwrap().value, Some(0));
        assert_eq!(a.invoke("doRx", &[40, 5]).unwrap().value, Some(0));
        free.store(-1, Ordering::Relaxed);
        assert_eq!(a.invoke("doRx", &[1000, 5]).unwrap().value, Some(-1));
        free.store(4096, Ordering::Relaxed);
        assert_eq!(a.invoke("doRx", &[1000, 5]).unwrap().value, Some(0));
        let log = log.lock().unwrap();
        // Handles are even (see jive::heap): 2 is the lent array's
        // (`jive::LENT`), 4 the applet object, 6 TxBuf (the constructor's
        // first array).
        assert_eq!(log[0], "doHtoLDMA[6, 0, 64, 100]");
        assert_eq!(log[1], "txPush[6, 0, 3, 100]");
        assert!(log[2].starts_with("dmaRxdPayload["));
        assert!(log[3].starts_with("doLtoHDMA[") && log[3].ends_with(", 0, 4096, 1000]"));
    }
}

#[test]
fn each_runtime_error_is_a_typed_trap_with_method_and_bci() {
    for r in RELEASES {
        let Some(mut a) = load(
            r,
            "Traps",
            &Natives::new(),
            Limits {
                max_call_depth: 64,
                ..Limits::default()
            },
        ) else {
            return;
        };
        let t = match a.invoke("aioobe", &[3]) {
            Err(InvokeError::Trap(t)) => t,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            t.kind,
            TrapKind::ArrayIndexOutOfBounds {
                index: 3,
                length: 3
            }
        );
        assert_eq!(t.method, "aioobe(I)I");
        assert_eq!(
            t.bci, 6,
            "iconst_3 newarray astore_1 aload_1 iload_0 iaload: iaload is at bci 6"
        );
        assert_eq!(
            trap_kind(a.invoke("aioobe", &[-1])),
            TrapKind::ArrayIndexOutOfBounds {
                index: -1,
                length: 3
            }
        );
        assert_eq!(trap_kind(a.invoke("npe", &[0])), TrapKind::NullPointer);
        assert_eq!(
            trap_kind(a.invoke("div", &[1, 0])),
            TrapKind::DivisionByZero
        );
        assert_eq!(
            trap_kind(a.invoke("negSize", &[-5])),
            TrapKind::NegativeArraySize(-5)
        );
        assert_eq!(
            trap_kind(a.invoke("spin", &[0])),
            TrapKind::FuelExhausted(10_000_000)
        );
        assert_eq!(
            trap_kind(a.invoke("recurse", &[0])),
            TrapKind::CallDepthExceeded(64)
        );
        assert!(matches!(
            trap_kind(a.invoke("hog", &[1_000_000])),
            TrapKind::HeapLimitExceeded { limit: 1048576, .. }
        ));
    }
}

#[test]
fn after_a_trap_the_applet_stays_loaded_and_consistent() {
    for r in RELEASES {
        let Some(mut a) = load(r, "Traps", &Natives::new(), Limits::default()) else {
            return;
        };
        assert_eq!(a.invoke("bump", &[]).unwrap().value, Some(1));
        assert_eq!(
            trap_kind(a.invoke("bumpThenTrap", &[8])),
            TrapKind::ArrayIndexOutOfBounds {
                index: 8,
                length: 8
            }
        );
        // The field writes before the trap stand, as in Java; the scratch array is freed,
        // the array stored in a field is kept.
        assert_eq!(a.invoke("bump", &[]).unwrap().value, Some(102));
        assert_eq!(a.invoke("keptLen", &[]).unwrap().value, Some(8));
        let objects = a.heap().object_count();
        assert_eq!(objects, 2, "the applet object and `kept`");
        // A heap-limit trap frees everything the invocation allocated.
        assert!(matches!(
            trap_kind(a.invoke("hog", &[1_000_000])),
            TrapKind::HeapLimitExceeded { .. }
        ));
        assert_eq!(a.heap().object_count(), objects);
        assert_eq!(a.invoke("hog", &[10]).unwrap().value, Some(10_000));
    }
}

#[test]
fn fuel_is_charged_at_backward_branches_calls_and_switches_only() {
    // What a metered applet is charged; checked on a fresh applet and again
    // after metering was turned off and back on.
    let charges = |a: &mut Applet| {
        // Straight-line code costs nothing.
        assert_eq!(a.invoke("add", &[1, 2]).unwrap().fuel_used, 0);
        // A loop of n iterations costs n taken backward branches (javac puts the test at the top).
        assert_eq!(a.invoke("loop", &[100]).unwrap().fuel_used, 100);
        // fib(n) makes fib-call-count - 1 calls.
        assert_eq!(a.invoke("fib", &[10]).unwrap().fuel_used, 176);
        // A switch is one unit, whichever kind.
        assert_eq!(a.invoke("tswitch", &[4]).unwrap().fuel_used, 1);
        assert_eq!(a.invoke("lswitch", &[i32::MIN]).unwrap().fuel_used, 1);
        a.set_run_limits(Some(100), 256);
        assert_eq!(
            trap_kind(a.invoke("loop", &[101])),
            TrapKind::FuelExhausted(100)
        );
        assert_eq!(a.invoke("loop", &[100]).unwrap().fuel_used, 100);
    };
    for r in RELEASES {
        let Some(mut a) = load(r, "Arith", &Natives::new(), Limits::default()) else {
            return;
        };
        charges(&mut a);
        a.set_run_limits(None, 256);
        for (m, args) in [
            ("loop", &[1000][..]),
            ("fib", &[10]),
            ("tswitch", &[4]),
            ("lswitch", &[i32::MIN]),
        ] {
            assert_eq!(a.invoke(m, args).unwrap().fuel_used, 0, "{m}: metering off");
        }
        assert_eq!(a.invoke("fib", &[10]).unwrap().value, Some(55));
        a.set_run_limits(Some(1000), 256);
        charges(&mut a);
    }
}

#[test]
fn fuel_beyond_32_bits_is_charged_exactly_on_both_engines() {
    // The interpreter counts fuel in a 32-bit counter next to its frames
    // and keeps the rest in reserve: a budget just above 2^32 runs out of
    // the counter after 5 charges and refills it from the reserve, and the
    // fuel used is still one unit per taken back edge, as on the JIT.
    for engine in [Engine::Interpreter, Engine::Jit] {
        for fuel in [(1u64 << 32) + 5, 1 << 32, 3 << 32, u64::MAX] {
            let Some(bytes) = class_bytes("release8", "Arith") else {
                return;
            };
            let limits = Limits {
                fuel: Some(fuel),
                ..Limits::default()
            };
            let mut a = Applet::load_with_engine(&bytes, &Natives::new(), limits, engine)
                .unwrap_or_else(|e| panic!("Arith: {e}"));
            for n in [0, 3, 100] {
                let used = a.invoke("loop", &[n]).unwrap().fuel_used;
                let on = if engine == Engine::Jit {
                    "JIT"
                } else {
                    "interpreter"
                };
                assert_eq!(used, n as u64, "loop({n}) with fuel {fuel} on the {on}");
            }
            assert_eq!(a.invoke("fib", &[10]).unwrap().fuel_used, 176);
        }
    }
}

#[test]
fn a_loop_that_calls_on_every_iteration_pays_for_the_call_only() {
    for r in RELEASES {
        let Some(mut a) = load(r, "Traps", &Natives::new(), Limits::default()) else {
            return;
        };
        // `while (true) n += bump();`: the call charges, the back edge does
        // not, and the loop still ends when the fuel does, after exactly
        // as many iterations as units.
        a.set_run_limits(Some(1000), 64);
        assert_eq!(
            trap_kind(a.invoke("spinCalling", &[0])),
            TrapKind::FuelExhausted(1000)
        );
        assert_eq!(a.invoke("bump", &[]).unwrap().value, Some(1001));
        // `while (true) n++;` has no call: its back edge charges.
        assert_eq!(
            trap_kind(a.invoke("spin", &[0])),
            TrapKind::FuelExhausted(1000)
        );
    }
}

#[test]
fn load_time_limits_name_the_limit_and_the_method() {
    let Some(bytes) = class_bytes("default", "Arith") else {
        return;
    };
    let e = jive::check(
        &bytes,
        &Limits {
            max_methods: 10,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, LoadError::Limit(ref l) if l.what == "method count" && l.limit == 10),
        "{e}"
    );
    let e = jive::check(
        &bytes,
        &Limits {
            max_code_bytes: 40,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, LoadError::Limit(ref l) if l.what == "code size" && l.method.is_some()),
        "{e}"
    );
    let e = jive::check(
        &bytes,
        &Limits {
            max_stack: 2,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, LoadError::Limit(ref l) if l.what == "max_stack"),
        "{e}"
    );
    let e = jive::check(
        &bytes,
        &Limits {
            max_locals: 1,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, LoadError::Limit(ref l) if l.what == "max_locals"),
        "{e}"
    );
    let e = jive::check(
        &bytes,
        &Limits {
            max_class_bytes: 100,
            ..Limits::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("class file size"), "{e}");
}

#[test]
fn a_million_allocating_invocations_stay_within_a_fixed_heap() {
    for r in RELEASES {
        let Some(mut a) = load(
            r,
            "Counter",
            &counter_natives(),
            Limits {
                heap_bytes: 64 * 1024,
                ..Limits::default()
            },
        ) else {
            return;
        };
        let base_bytes = a.heap().bytes_in_use();
        let base_capacity = a.heap().capacity();
        let n = if r == "default" { 1_000_000 } else { 10_000 };
        for i in 0..n {
            // Each call allocates an int[1 + i % 64] that dies with the invocation.
            let out = a.invoke("scratch", &[1 + i % 64]).unwrap();
            assert_eq!(out.value, Some(1 + i % 64 + 5));
            if i % 1000 == 0 {
                // Persistent arrays replaced from a field are reclaimed too.
                a.invoke("keep", &[1 + i % 16]).unwrap();
            }
        }
        assert!(
            a.heap().bytes_in_use() <= base_bytes + 16 + 4 * 16,
            "{} bytes in use",
            a.heap().bytes_in_use()
        );
        assert!(a.heap().capacity() <= base_capacity + 1);
        // The constructor's arrays persist.
        assert_eq!(a.invoke("bufLen", &[]).unwrap().value, Some(16));
    }
}
