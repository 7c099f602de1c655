//! The host's view of a static `byte[]` (`Applet::static_bytes_mut`
//! through a `StaticBytes`, as U-Net/SLE fills `RxBuf` on every message):
//! found again with two compares while the field holds the same array, and
//! looked up again whenever the applet stores another array or null in
//! the field, or a collection frees an object whose handle a new array may
//! then take. On both engines (`applets/src/RxSwap.java`).

mod common;

use jive::{Applet, Engine, Limits, Natives};

fn load(engine: Engine) -> Option<Applet> {
    let bytes = common::class_bytes("default", "RxSwap")?;
    let mut a = Applet::load_with_engine(&bytes, &Natives::new(), Limits::default(), engine)
        .unwrap_or_else(|e| panic!("RxSwap loads on {engine:?}: {e}"));
    a.set_static_array("RxBuf", &[1, 2, 3, 4]).unwrap();
    Some(a)
}

fn engines() -> Vec<Engine> {
    let mut v = vec![Engine::Interpreter];
    if jive::jit::available() {
        v.push(Engine::Jit);
    }
    v
}

/// The handle `RxBuf` holds: the heap's handle whose object is the field's.
fn rxbuf_handle(a: &Applet) -> i32 {
    let obj = a.static_array("RxBuf").expect("RxBuf is set");
    // Slot `k` has handle `2 * (k + 2)`: handle 2 is the lent array's
    // (`jive::LENT`), no slot's.
    (2..a.heap().capacity() as i32 + 2)
        .map(|k| 2 * k)
        .find(|&h| a.heap().get(h).is_some_and(|o| std::ptr::eq(o, obj)))
        .expect("a handle of the heap")
}

/// What `first()` returns: `RxBuf[0]` as the applet sees it.
fn first(a: &mut Applet) -> i32 {
    a.invoke("first", &[]).unwrap().value.unwrap()
}

/// The view follows writes both ways while the array stays, and a new
/// array the applet stores (a handle of its own) is found at once.
#[test]
fn the_view_finds_the_array_the_applet_sees() {
    for engine in engines() {
        let Some(mut a) = load(engine) else { return };
        let mut f = a.static_bytes_field("RxBuf").unwrap();
        for round in 0..3i8 {
            let buf = a.static_bytes_mut(&mut f).expect("RxBuf is set");
            assert_eq!(buf.len(), 4);
            buf[0] = 10 + round;
            assert_eq!(first(&mut a), i32::from(10 + round), "{engine:?}");
        }
        a.invoke("rxNew", &[9, 7]).unwrap();
        let buf = a.static_bytes_mut(&mut f).expect("the new RxBuf");
        assert_eq!((buf.len(), buf[0]), (9, 7), "{engine:?}");
        buf[0] = 8;
        assert_eq!(first(&mut a), 8, "{engine:?}");
    }
}

/// The applet stores null, or another live array, in the field without
/// allocating or freeing anything (the heap's generation stays): the
/// field's handle tells the view it is stale.
#[test]
fn a_field_set_to_null_or_to_another_array_is_seen() {
    for engine in engines() {
        let Some(mut a) = load(engine) else { return };
        let mut f = a.static_bytes_field("RxBuf").unwrap();
        let before = a.heap().generation();
        assert_eq!(a.static_bytes_mut(&mut f).map(|b| b.len()), Some(4));
        a.invoke("rxNullKept", &[]).unwrap();
        assert_eq!(a.heap().generation(), before, "{engine:?}: nothing freed");
        assert!(
            a.static_bytes_mut(&mut f).is_none(),
            "{engine:?}: RxBuf is null"
        );
        // The old array comes back into the field: found again.
        a.invoke("swap", &[]).unwrap();
        assert_eq!(a.static_bytes_mut(&mut f).map(|b| b.len()), Some(4));
        // A new array goes in, the old one kept in `Other`: a collection
        // runs (the invocation allocated) and frees nothing.
        a.invoke("rxNullKept", &[]).unwrap();
        a.invoke("rxNew", &[6, 5]).unwrap();
        let kept = a.heap().generation();
        assert_eq!(kept, before, "{engine:?}: nothing freed");
        assert_eq!(
            a.static_bytes_mut(&mut f).map(|b| (b.len(), b[0])),
            Some((6, 5))
        );
        // The two arrays swap fields: the old one is found again.
        a.invoke("swap", &[]).unwrap();
        assert_eq!(a.heap().generation(), kept, "{engine:?}: nothing freed");
        let buf = a.static_bytes_mut(&mut f).expect("the old array back");
        assert_eq!(buf.len(), 4, "{engine:?}: the array swapped in");
    }
}

/// A collection frees the viewed array, and the applet's next array takes
/// its slot, so the field holds the very handle the view was made for:
/// only the heap's generation tells the view it is stale.
#[test]
fn a_new_array_under_the_old_handle_is_seen() {
    for engine in engines() {
        let Some(mut a) = load(engine) else { return };
        let mut f = a.static_bytes_field("RxBuf").unwrap();
        let old = rxbuf_handle(&a);
        assert_eq!(a.static_bytes_mut(&mut f).map(|b| b.len()), Some(4));
        let before = a.heap().generation();
        a.invoke("rxNullFreed", &[]).unwrap();
        assert_ne!(a.heap().generation(), before, "{engine:?}: the array freed");
        a.invoke("rxNew", &[16, 3]).unwrap();
        assert_eq!(
            rxbuf_handle(&a),
            old,
            "{engine:?}: the new array took the slot"
        );
        let buf = a.static_bytes_mut(&mut f).expect("the new RxBuf");
        assert_eq!(
            buf.len(),
            16,
            "{engine:?}: the new array, not the freed one"
        );
        assert_eq!(buf[0], 3);
        buf[0] = 4;
        assert_eq!(first(&mut a), 4, "{engine:?}");
    }
}

/// A view made on one applet's heap finds nothing on another's, even for
/// the same field and handle: no two heaps share a generation.
#[test]
fn a_view_of_another_applet_misses() {
    for engine in engines() {
        let (Some(mut a), Some(mut b)) = (load(engine), load(engine)) else {
            return;
        };
        let mut f = a.static_bytes_field("RxBuf").unwrap();
        a.static_bytes_mut(&mut f).unwrap()[0] = 42;
        let buf = b.static_bytes_mut(&mut f).expect("b's RxBuf");
        assert_eq!(buf[0], 1, "{engine:?}: b's own array");
        buf[0] = 43;
        assert_eq!(first(&mut a), 42);
        assert_eq!(first(&mut b), 43);
    }
}

/// The view alone (`Applet::static_bytes_if_viewed`, the host's common way
/// before it looks the array up out of line): the array only while the
/// view is current, `None` before it is filled, once the field holds null
/// or another array, once a collection freed the array (a new one under
/// the same handle), and on another applet.
#[test]
fn the_view_alone_finds_only_the_array_it_was_filled_for() {
    for engine in engines() {
        let (Some(mut a), Some(mut b)) = (load(engine), load(engine)) else {
            return;
        };
        let mut f = a.static_bytes_field("RxBuf").unwrap();
        assert!(
            a.static_bytes_if_viewed(&f).is_none(),
            "{engine:?}: not filled"
        );
        let filled = a.static_bytes_mut(&mut f).map(|b| b.as_ptr());
        let viewed = a.static_bytes_if_viewed(&f).expect("filled");
        assert_eq!(Some(viewed.as_ptr()), filled, "{engine:?}");
        viewed[0] = 21;
        assert_eq!(first(&mut a), 21, "{engine:?}");
        assert!(
            b.static_bytes_if_viewed(&f).is_none(),
            "{engine:?}: b's heap"
        );
        // Null, then another array, with nothing freed.
        a.invoke("rxNullKept", &[]).unwrap();
        assert!(a.static_bytes_if_viewed(&f).is_none(), "{engine:?}: null");
        a.invoke("rxNew", &[6, 5]).unwrap();
        assert!(
            a.static_bytes_if_viewed(&f).is_none(),
            "{engine:?}: another"
        );
        assert_eq!(a.static_bytes_mut(&mut f).map(|b| b.len()), Some(6));
        assert_eq!(a.static_bytes_if_viewed(&f).map(|b| b.len()), Some(6));
        // The array freed and a new one under its handle (on `b`, whose
        // field's array is the first it made).
        let mut g = b.static_bytes_field("RxBuf").unwrap();
        assert_eq!(b.static_bytes_mut(&mut g).map(|b| b.len()), Some(4));
        let old = rxbuf_handle(&b);
        b.invoke("rxNullFreed", &[]).unwrap();
        b.invoke("rxNew", &[16, 3]).unwrap();
        assert_eq!(rxbuf_handle(&b), old, "{engine:?}: the slot taken again");
        assert!(b.static_bytes_if_viewed(&g).is_none(), "{engine:?}: freed");
        assert_eq!(b.static_bytes_mut(&mut g).map(|b| b.len()), Some(16));
    }
}
