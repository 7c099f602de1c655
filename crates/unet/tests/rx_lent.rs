//! The lent `doRx` (docs/unet.md, "Applets and natives"): an applet whose
//! class declares `int doRx(byte[] msg, int length, int channel)` gets the
//! message itself as `msg`, lent for the invocation (`jive::Applet::lend`),
//! where `doRx(int length, int channel)` finds it copied into `RxBuf`
//! (`tests/rxbuf.rs`). The probe is `applets/unet/LentProbe.java`.
//!
//! Checked on the JIT and on the interpreter, with the message in a frame
//! and without one, run on the sender's thread and from the inbox by
//! another thread, and placed in the sender's buffer area by its
//! application (a message the engine reads from a segment, which it copies
//! once to lend, since the receiving applet's natives may write an area):
//! `doRx` sees every byte and `msg.length` is the message's; a read past it
//! traps and ends the lend; the message goes on from `msg` through the
//! natives that only read it; and a class whose `doRx` keeps `msg` is
//! refused at install.
#![cfg(not(loom))]

#[path = "common/loopback.rs"]
mod loopback;

use loopback::{Way, connected, deliver, engine, engines, message, refused_at_install};
use unet::{Endpoint, Engine};

/// The probe's hash of a message (`LentProbe`'s mode 0, in Java's `int`
/// arithmetic over signed bytes).
fn hash(msg: &[u8]) -> i32 {
    msg.iter().fold(0i32, |h, &b| {
        h.wrapping_mul(31).wrapping_add(i32::from(b as i8))
    })
}

/// Two endpoints of one engine, `b` with the probe in `mode` on `on`;
/// framed (a filter that never matches, so that every message is framed
/// and classified) or not. Returns the engine, `a`, `b`, `a`'s channel to
/// `b` and `b`'s to `a`.
fn pair(on: jive::Engine, framed: bool, mode: i32) -> (Engine, Endpoint, Endpoint, u16, u16) {
    let e = engine();
    let (mut a, b, ab, ba) = connected(&e, unet::applets::LENT_PROBE);
    e.with_applet(b.id(), |ap| {
        ap.set_engine(on).unwrap();
        ap.set_static_int("mode", mode).unwrap();
    })
    .unwrap();
    if framed {
        a.install_filter(ab, "ip[2:2] = 1", 0).unwrap();
    }
    (e, a, b, ab, ba)
}

/// Every case of a lent message: each engine, framed or not, each way.
fn cases() -> impl Iterator<Item = (jive::Engine, bool, Way)> {
    engines().iter().flat_map(|&on| {
        [false, true].into_iter().flat_map(move |framed| {
            [Way::Send, Way::Inbox, Way::Area]
                .into_iter()
                .map(move |way| (on, framed, way))
        })
    })
}

#[test]
fn do_rx_reads_the_message_itself_of_its_own_length() {
    for (on, framed, way) in cases() {
        let what = format!("{on:?}, framed {framed}, {way:?}");
        let (e, mut a, mut b, ab, _) = pair(on, framed, 0);
        let largest = b.max_message().min(4096);
        for (k, len) in [40, 0, 1, 56, 57, 1000, largest, 10]
            .into_iter()
            .enumerate()
        {
            let m = message(k as u8, len);
            deliver(&mut a, ab, &mut b, &m, way);
            let (seen, h) = e
                .with_applet(b.id(), |ap| {
                    (
                        ap.static_int("seen").unwrap(),
                        ap.static_int("hash").unwrap(),
                    )
                })
                .unwrap();
            assert_eq!((seen, h), (len as i32, hash(&m)), "{what}: {len} B");
        }
        let c = b.counts();
        assert_eq!((c.applet_traps, c.applet_drops), (0, 0), "{what}");
        // The lent form has no `RxBuf`: nothing was copied into the heap.
        let rxbuf = e.with_applet(b.id(), |ap| ap.static_array("RxBuf").is_some());
        assert_eq!(rxbuf, Some(false), "{what}");
    }
}

#[test]
fn a_read_past_the_message_traps_and_the_next_message_is_lent_again() {
    for (on, framed, way) in cases() {
        let what = format!("{on:?}, framed {framed}, {way:?}");
        let (e, mut a, mut b, ab, _) = pair(on, framed, 1);
        deliver(&mut a, ab, &mut b, &message(1, 40), way);
        let c = b.counts();
        assert_eq!(c.applet_traps, 1, "{what}: msg[length] traps");
        // The trap ended the lend: the next invocation is lent its
        // own message (a lend left active would be refused, and
        // the message dropped as a trap).
        e.with_applet(b.id(), |ap| ap.set_static_int("mode", 0).unwrap())
            .unwrap();
        let m = message(2, 57);
        deliver(&mut a, ab, &mut b, &m, way);
        let seen = e.with_applet(b.id(), |ap| {
            (
                ap.static_int("seen").unwrap(),
                ap.static_int("hash").unwrap(),
            )
        });
        assert_eq!(seen, Some((57, hash(&m))), "{what}");
        assert_eq!(b.counts().applet_traps, 1, "{what}");
    }
}

#[test]
fn the_message_goes_on_from_msg_through_the_natives_that_read_it() {
    for (on, framed, way) in cases() {
        let what = format!("{on:?}, framed {framed}, {way:?}");
        // Mode 3: delivered as the standard applet does, inline
        // up to 56 bytes, else in a free buffer (doLtoHDMA).
        let (e, mut a, mut b, ab, ba) = pair(on, framed, 3);
        for (k, len) in [40, 56, 57, 1000, 4096].into_iter().enumerate() {
            let m = message(k as u8 + 10, len);
            deliver(&mut a, ab, &mut b, &m, way);
            let got = b.recv().map(|r| (r.chan(), r.to_vec()));
            assert_eq!(got, Some((ba, m)), "{what}: delivered, {len} B");
        }
        // Mode 2: echoed back to `a` (txPush(msg, ...)).
        e.with_applet(b.id(), |ap| ap.set_static_int("mode", 2).unwrap())
            .unwrap();
        for (k, len) in [40, 1000].into_iter().enumerate() {
            let m = message(k as u8 + 20, len);
            deliver(&mut a, ab, &mut b, &m, way);
            assert!(b.flush(10), "{what}");
            a.poll_engine();
            let got = a.recv().map(|r| r.to_vec());
            assert_eq!(got, Some(m), "{what}: echoed, {len} B");
        }
        let c = b.counts();
        assert_eq!((c.applet_traps, c.applet_drops), (0, 0), "{what}");
    }
}

#[test]
fn a_do_rx_that_keeps_its_lent_message_is_refused_at_install() {
    refused_at_install(
        &engine(),
        unet::applets::LENT_KEEPER,
        unet::applets::LENT_PROBE,
        &["doRx", "lent"],
    );
}

#[test]
fn an_applet_replaced_by_one_of_the_other_form_gets_its_messages_its_own_way() {
    let e = engine();
    let (mut a, mut b, ab, ba) = connected(&e, unet::applets::STANDARD);
    for (k, applet) in [
        unet::applets::STANDARD_LENT,
        unet::applets::STANDARD,
        unet::applets::STANDARD_LENT,
    ]
    .into_iter()
    .enumerate()
    {
        b.set_applet(Some(applet)).unwrap();
        for len in [40, 3000] {
            let m = message(k as u8 + 30, len);
            deliver(&mut a, ab, &mut b, &m, Way::Send);
            let got = b.recv().map(|r| (r.chan(), r.to_vec()));
            assert_eq!(got, Some((ba, m)), "applet {k}, {len} B");
        }
    }
    let c = b.counts();
    assert_eq!((c.applet_traps, c.applet_drops), (0, 0));
}
