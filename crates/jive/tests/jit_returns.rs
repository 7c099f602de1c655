//! Returns to the host on the JIT against the interpreter: the value, the
//! fuel used and the trap of every method of `applets/src/Returns.java`,
//! metered on every budget from 0 to two units past the method's cost (so
//! a budget of exactly its cost and one less), and unmetered. The methods
//! run in an order where a method returning 0 follows one returning
//! something else, so a return that left the value of an earlier
//! invocation in place would show.

mod common;

use common::{RELEASES, class_bytes};
use jive::{Applet, Engine, Limits, Natives};

/// Each method, its arguments, and the fuel it costs on them.
const CALLS: &[(&str, &[i32], u64)] = &[
    ("seven", &[1], 0),
    ("zero", &[1], 0),
    ("big", &[0], 0),
    ("zero", &[0], 0),
    ("minusOne", &[0], 0),
    ("min", &[0], 0),
    ("arg", &[-5], 0),
    ("arg", &[0], 0),
    ("second", &[3, i32::MAX], 0),
    ("deep", &[7, -9], 0),
    ("deep", &[i32::MIN, i32::MAX], 0),
    ("touch", &[42], 0),
    ("seenNow", &[0], 0),
    ("pick", &[1], 1),
    ("pick", &[0], 1),
    ("pick", &[2], 1),
    ("pick", &[-3], 1),
    ("pick2", &[1], 2),
    ("pick2", &[0], 2),
    ("pick2", &[6], 2),
    ("callee", &[4], 0),
    ("caller", &[4], 1),
    ("zero", &[4], 0),
];

fn load(bytes: &[u8], engine: Engine, fuel: Option<u64>) -> Applet {
    let limits = Limits {
        fuel,
        ..Limits::default()
    };
    let a = Applet::load_with_engine(bytes, &Natives::new(), limits, engine)
        .unwrap_or_else(|e| panic!("Returns does not load on {engine:?}: {e}"));
    assert_eq!(a.engine(), engine);
    a
}

#[test]
fn returns_to_the_host_give_the_interpreters_value_fuel_and_trap() {
    for r in RELEASES {
        let Some(bytes) = class_bytes(r, "Returns") else {
            return;
        };
        let mut budgets: Vec<Option<u64>> = (0..=4).map(Some).collect();
        budgets.push(None);
        for fuel in budgets {
            let mut interp = load(&bytes, Engine::Interpreter, fuel);
            let mut jit = load(&bytes, Engine::Jit, fuel);
            for &(m, args, cost) in CALLS {
                let want = interp.invoke(m, args);
                let got = jit.invoke(m, args);
                let (w, g) = (format!("{want:?}"), format!("{got:?}"));
                assert_eq!(g, w, "{r}: {m}{args:?} with fuel {fuel:?}");
                // The cost stated above, so that the budgets cover exactly
                // the cost and one less.
                match (fuel, &want) {
                    (Some(f), Ok(o)) => {
                        assert!(f >= cost, "{r}: {m}{args:?} ran on {f} < {cost}");
                        assert_eq!(o.fuel_used, cost, "{r}: {m}{args:?}");
                    }
                    (Some(f), Err(_)) => assert!(f < cost, "{r}: {m}{args:?} trapped on {f}"),
                    (None, w) => assert!(w.is_ok(), "{r}: {m}{args:?}: {w:?}"),
                }
            }
        }
    }
}

/// The values themselves, on the JIT alone: a method returning a constant
/// gives that constant whatever the previous invocation returned.
#[test]
fn the_jit_returns_each_constant_after_another() {
    for r in RELEASES {
        let Some(bytes) = class_bytes(r, "Returns") else {
            return;
        };
        let mut jit = load(&bytes, Engine::Jit, Some(10));
        for _ in 0..3 {
            for (m, v) in [
                ("seven", 7),
                ("zero", 0),
                ("big", 0x1234_5678),
                ("minusOne", -1),
                ("zero", 0),
                ("min", i32::MIN),
            ] {
                let o = jit.invoke(m, &[1]).unwrap();
                assert_eq!(o.value, Some(v), "{r}: {m}");
                assert_eq!(o.fuel_used, 0, "{r}: {m}");
            }
            assert_eq!(jit.invoke("caller", &[9]).unwrap().value, Some(0));
            assert_eq!(jit.invoke("callee", &[9]).unwrap().value, Some(10));
            assert_eq!(jit.invoke("pick", &[1]).unwrap().value, Some(11));
            assert_eq!(jit.invoke("pick", &[0]).unwrap().value, Some(0));
        }
    }
}
