//! A `byte[]` the host lends an invocation (`Applet::lend`,
//! `Applet::prepare_lending`; `applets/src/Lending.java` and
//! `LendingNatives.java`): both engines read the lent bytes alike, its
//! length is the lent length, an index past it traps at the same bytecode
//! on both, a reading native reads it and a writing one is refused, the
//! lend ends when its guard is dropped whatever the invocation did, a
//! handle kept past the lend reads as an empty array, and one lend is
//! active at a time. The methods are declared lent at load (`LENT`), so
//! that the verifier proves them readers (`tests/lend.rs` tests that
//! proof); the two that keep or write the array are prepared without it
//! (`prepare_lending_unverified`), to test the runtime's own defences.

mod common;

use jive::{
    Applet, Engine, InvokeError, LendError, LentParam, Limits, NativeError, Natives, Trap, TrapKind,
};

fn engines() -> Vec<Engine> {
    let mut v = vec![Engine::Interpreter];
    if jive::jit::available() {
        v.push(Engine::Jit);
    }
    v
}

fn natives() -> Natives {
    let mut n = Natives::new()
        .with("checksum", "([BII)I", |cx, a| {
            let b = cx.bytes_read(a[0])?;
            let r = usize::try_from(a[1])
                .ok()
                .zip(usize::try_from(a[2]).ok())
                .and_then(|(o, n)| b.get(o..o.checked_add(n)?))
                .ok_or_else(|| NativeError("checksum: out of bounds".into()))?;
            Ok(r.iter()
                .fold(0i32, |s, &x| s.wrapping_mul(31).wrapping_add(i32::from(x))))
        })
        .with("fill", "([BI)V", |cx, a| {
            cx.bytes(a[0])?.fill(a[1] as i8);
            Ok(0)
        });
    n.set_read_only("checksum", "([BII)I", &[0]).unwrap();
    n
}

/// The methods of `Lending` and `LendingNatives` whose `byte[]` is lent.
const LENT: &[LentParam] = &[
    LentParam {
        method: "sum",
        descriptor: "([BI)I",
        param: 0,
    },
    LentParam {
        method: "length",
        descriptor: "([BI)I",
        param: 0,
    },
    LentParam {
        method: "at",
        descriptor: "([BI)I",
        param: 0,
    },
    LentParam {
        method: "doRx",
        descriptor: "(I[BI)I",
        param: 1,
    },
    LentParam {
        method: "viaNative",
        descriptor: "([BI)I",
        param: 0,
    },
];

fn load(class: &str, engine: Engine) -> Option<Applet> {
    let bytes = common::class_bytes("default", class)?;
    let mut a = Applet::load_lending(&bytes, &natives(), Limits::default(), LENT, None).unwrap();
    a.set_engine(engine).unwrap();
    Some(a)
}

/// What `Lending.sum(msg, n)` computes, in Rust.
fn sum(msg: &[u8]) -> i32 {
    msg.iter().fold(0i32, |s, &x| {
        s.wrapping_mul(31).wrapping_add(i32::from(x as i8))
    })
}

/// Bytes of every value, negative ones (as Java's `byte`) among them.
fn message(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 97 + 13) as u8).collect()
}

fn trap_of(e: InvokeError) -> Trap {
    match e {
        InvokeError::Trap(t) => t,
        e => panic!("not a trap: {e}"),
    }
}

/// The interpreter and the JIT read the same lent bytes: every element
/// (`sum`), the length (`arraylength`), and with the lent parameter
/// second (`doRx(channel, msg, length)`).
#[test]
fn both_engines_read_the_lent_bytes_alike() {
    for engine in engines() {
        let Some(mut a) = load("Lending", engine) else {
            return;
        };
        let mut s = a.prepare_lending::<2>("sum", 0).unwrap();
        let mut length = a.prepare_lending::<2>("length", 0).unwrap();
        let mut rx = a.prepare_lending::<3>("doRx", 1).unwrap();
        // Each length lent by address and length (`lend`) and as a slice
        // (`lend_slice`, unet's).
        let lens = [0, 1, 7, 64, 255, 1500, 4096];
        for (len, slice) in lens.into_iter().flat_map(|l| [(l, false), (l, true)]) {
            let msg = message(len);
            let mut lend = if slice {
                // SAFETY: `msg` outlives the lend (dropped in this block)
                // and nothing writes it.
                unsafe { a.lend_slice(&msg) }.unwrap()
            } else {
                // SAFETY: as above.
                unsafe { a.lend(msg.as_ptr(), msg.len()) }.unwrap()
            };
            // The lent argument's value is the lend's, whatever is passed.
            let got = lend.run_prepared(&mut s, [12345, len as i32], None);
            assert_eq!(got.value(), Some(sum(&msg)), "{engine:?}, {len} bytes");
            let got = lend.run_prepared(&mut length, [0, 0], None);
            assert_eq!(got.value(), Some(len as i32), "{engine:?}: msg.length");
            if len > 0 {
                let got = lend.run_prepared(&mut rx, [7, 0, len as i32], None);
                assert_eq!(got.value(), Some(7000 + i32::from(msg[0])), "{engine:?}");
            }
            assert!(lend.applet().heap().is_lending());
            assert_eq!(
                lend.applet().heap().bytes_read(jive::LENT),
                Some(bytemuck_i8(&msg)),
                "the host reads the lent bytes through the heap during the lend"
            );
        }
        assert!(!a.heap().is_lending(), "each lend ended with its guard");
    }
}

fn bytemuck_i8(b: &[u8]) -> &[i8] {
    // SAFETY: `u8` and `i8` have the same size and alignment, every bit
    // pattern valid in both.
    unsafe { core::slice::from_raw_parts(b.as_ptr().cast(), b.len()) }
}

/// An index past the lent length (or negative) traps with the lent
/// length, at the same bytecode on both engines; the lend lasts past the
/// trap until its guard is dropped, and then ends.
#[test]
fn an_index_past_the_lent_length_traps_at_the_same_bci_on_both() {
    let msg = message(10);
    let mut traps = Vec::new();
    for engine in engines() {
        let Some(mut a) = load("Lending", engine) else {
            return;
        };
        let mut at = a.prepare_lending::<2>("at", 0).unwrap();
        {
            // SAFETY: as above.
            let mut lend = unsafe { a.lend(msg.as_ptr(), msg.len()) }.unwrap();
            for i in [10, 11, -1, i32::MAX] {
                let c = lend.run_prepared(&mut at, [0, i], None);
                assert!(!c.is_ok(), "{engine:?}: index {i}");
                let t = trap_of(*lend.take_error().unwrap());
                assert_eq!(
                    t.kind,
                    TrapKind::ArrayIndexOutOfBounds {
                        index: i,
                        length: 10
                    },
                    "{engine:?}"
                );
                traps.push((i, t.method, t.bci));
            }
            // The trap ended the invocation, not the lend.
            assert!(lend.applet().heap().is_lending());
            let c = lend.run_prepared(&mut at, [0, 9], None);
            assert_eq!(c.value(), Some(i32::from(msg[9] as i8)), "{engine:?}");
        }
        assert!(
            !a.heap().is_lending(),
            "{engine:?}: the guard ended the lend"
        );
    }
    if engines().len() == 2 {
        let (i, j) = traps.split_at(traps.len() / 2);
        assert_eq!(i, j, "the interpreter's traps, then the JIT's");
    }
}

/// A native that only reads its array (`Context::bytes_read`) reads the
/// lent bytes; one that writes (`Context::bytes`) is refused, on both
/// engines, and the bytes stay as they were.
#[test]
fn a_reading_native_reads_the_lent_array_and_a_writing_one_is_refused() {
    let msg = message(300);
    for engine in engines() {
        let Some(mut a) = load("LendingNatives", engine) else {
            return;
        };
        let mut via = a.prepare_lending::<2>("viaNative", 0).unwrap();
        // SAFETY: `writes` passes the array to `fill`, a native the JIT
        // calls (no inline form): its accessor refuses the lent array, and
        // no compiled code writes it.
        let mut writes = unsafe { a.prepare_lending_unverified::<2>("writes", 0) }.unwrap();
        // SAFETY: as above.
        let mut lend = unsafe { a.lend(msg.as_ptr(), msg.len()) }.unwrap();
        let c = lend.run_prepared(&mut via, [0, 300], None);
        assert_eq!(c.value(), Some(sum(&msg)), "{engine:?}");
        let c = lend.run_prepared(&mut via, [0, 301], None);
        assert!(!c.is_ok(), "{engine:?}: the native checks the lent length");
        let _ = lend.take_error();
        let c = lend.run_prepared(&mut writes, [0, 7], None);
        assert!(!c.is_ok(), "{engine:?}");
        let t = trap_of(*lend.take_error().unwrap());
        assert!(
            matches!(&t.kind, TrapKind::Native(m) if m.contains("the lent byte[] is read-only")),
            "{engine:?}: {t}"
        );
        drop(lend);
        assert_eq!(msg, message(300), "the lent bytes unwritten");
    }
}

/// A method that keeps the lent handle in a static (the verifier refuses
/// it where the parameter is declared lent: here it is not, so this is
/// the runtime alone): after the lend the kept handle reads as an empty
/// array on both engines (`arraylength` 0, every index out of bounds, a
/// write too, at the same bytecode), and a later lend is what it reads.
#[test]
fn a_handle_kept_past_the_lend_reads_as_an_empty_array() {
    let msg = message(16);
    let mut traps = Vec::new();
    for engine in engines() {
        let Some(mut a) = load("Lending", engine) else {
            return;
        };
        // SAFETY: `keep` stores the array in a static and writes nothing.
        let mut keep = unsafe { a.prepare_lending_unverified::<2>("keep", 0) }.unwrap();
        {
            // SAFETY: as above.
            let mut lend = unsafe { a.lend(msg.as_ptr(), msg.len()) }.unwrap();
            assert_eq!(lend.run_prepared(&mut keep, [0, 0], None).value(), Some(16));
        }
        assert_eq!(
            a.invoke("keptLength", &[]).unwrap().value,
            Some(0),
            "{engine:?}"
        );
        for (method, args) in [
            ("keptAt", vec![0]),
            ("keptAt", vec![15]),
            ("keptStore", vec![3, 1]),
        ] {
            let e = a.invoke(method, &args).unwrap_err();
            let InvokeError::Trap(t) = e else {
                panic!("{engine:?}: {e}")
            };
            assert_eq!(
                t.kind,
                TrapKind::ArrayIndexOutOfBounds {
                    index: args[0],
                    length: 0
                },
                "{engine:?}: {method}{args:?}"
            );
            traps.push((method, t.bci));
        }
        // A collection with the handle among the roots (the static) keeps
        // the heap whole.
        let mut s = a.prepare_lending::<2>("sum", 0).unwrap();
        let other = [5u8, 6];
        // SAFETY: as above.
        let mut lend = unsafe { a.lend(other.as_ptr(), other.len()) }.unwrap();
        assert_eq!(
            lend.run_prepared(&mut s, [0, 2], None).value(),
            Some(5 * 31 + 6)
        );
        drop(lend);
        assert_eq!(msg, message(16));
    }
    if engines().len() == 2 {
        let (i, j) = traps.split_at(traps.len() / 2);
        assert_eq!(i, j, "the interpreter's traps, then the JIT's");
    }
}

/// One lend at a time: a second lend while one is active (here one leaked)
/// is refused, and the first is what the applet reads.
#[test]
fn a_second_lend_while_one_is_active_is_refused() {
    static FIRST: [u8; 3] = [1, 2, 3];
    static SECOND: [u8; 5] = [9; 5];
    for engine in engines() {
        let Some(mut a) = load("Lending", engine) else {
            return;
        };
        // SAFETY: `FIRST` is static: readable for as long as the leaked
        // lend lasts (the applet's life).
        let lend = unsafe { a.lend(FIRST.as_ptr(), FIRST.len()) }.unwrap();
        core::mem::forget(lend);
        // SAFETY: refused (and `SECOND` is static anyway).
        let e = match unsafe { a.lend(SECOND.as_ptr(), SECOND.len()) } {
            Err(e) => e,
            Ok(_) => panic!("{engine:?}: a second lend"),
        };
        assert_eq!(e, LendError::AlreadyLent);
        // SAFETY: as above.
        let e = match unsafe { a.lend_slice(&SECOND) } {
            Err(e) => e,
            Ok(_) => panic!("{engine:?}: a second lend of a slice"),
        };
        assert_eq!(e, LendError::AlreadyLent);
        assert_eq!(a.heap().bytes_read(jive::LENT), Some(&[1i8, 2, 3][..]));
    }
}

/// What may be prepared for a lend: a `byte[]` parameter, counted among
/// the declared ones, with the arity the host says.
#[test]
fn only_a_byte_array_parameter_is_lent() {
    let Some(a) = load("Lending", Engine::Interpreter) else {
        return;
    };
    let not_lent = |name: &str, param| match a.prepare_lending::<2>(name, param) {
        Err(InvokeError::NotLent { method, param: p }) => (method, p),
        r => panic!("{name} {param}: {r:?}"),
    };
    assert_eq!(not_lent("sum", 1), ("sum([BI)I".to_string(), 1));
    assert_eq!(not_lent("plain", 0), ("plain(II)I".to_string(), 0));
    assert_eq!(not_lent("sum", 2).1, 2);
    assert!(matches!(
        a.prepare_lending::<2>("doRx", 0),
        Err(InvokeError::NotLent { .. })
    ));
    assert!(matches!(
        a.prepare_lending::<3>("sum", 0),
        Err(InvokeError::ArgumentCount { .. })
    ));
    assert!(matches!(
        a.prepare_lending::<2>("nothing", 0),
        Err(InvokeError::NoSuchMethod(_))
    ));
    // The ordinary ways still refuse an array parameter.
    assert!(matches!(
        a.prepare::<2>("sum"),
        Err(InvokeError::NotIntArguments(_))
    ));
}
