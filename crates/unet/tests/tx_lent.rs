//! The lent `doTx` (docs/unet.md, "The lent doTx"): an applet whose class
//! declares `int doTx(byte[] msg, int length, int channel)` gets the
//! application's message itself as `msg`, lent for the invocation where it
//! lies in the sending endpoint's buffer area, where `doTx(int length, int
//! channel, int off)` copies it out with `doHtoLDMA`. A `txPush(msg, ...)`
//! at a tail site is sent from the area once `doTx` has returned.
//!
//! Checked on the JIT and on the interpreter, each way a message reaches
//! `doTx` (`Endpoint::send` on the engine's thread, the same with the
//! receiver served by another thread, a transmit descriptor in the area):
//! a lent `doTx` that pushes its message delivers what the standard
//! applet's copying one does to every kind of receiver; `doTx` sees every byte of the message and its length;
//! a push of the whole message or of a part, at a tail site or not, sends
//! exactly those bytes; a `doLtoHDMA` over the lent message traps and sends
//! nothing, one beside it does not; and a class whose `doTx` keeps `msg`
//! is refused at install. The probe is `applets/unet/LentTx.java`.
//!
//! `Endpoint::send` lends `doTx` the caller's own bytes, where they lie,
//! instead of a copy in the transmit region (the copying `doTx` still gets
//! that copy); bytes in the sender's own segment, which its natives
//! write, are copied there first.
#![cfg(not(loom))]

#[path = "common/loopback.rs"]
mod loopback;

use loopback::{Way, deliver, engine, engines, message, refused_at_install};
use unet::{Config, Endpoint, Engine};

/// The probe's hash of a message (`LentTx`'s mode 3, in Java's `int`
/// arithmetic over signed bytes).
fn hash(msg: &[u8]) -> i32 {
    msg.iter().fold(0i32, |h, &b| {
        h.wrapping_mul(31).wrapping_add(i32::from(b as i8))
    })
}

/// Two endpoints of `e`: `a` with `sender` and `b` with `receiver` (each
/// on `on`), and a channel each way.
fn pair(
    e: &Engine,
    sender: &'static [u8],
    receiver: Option<&'static [u8]>,
    on: jive::Engine,
) -> (Endpoint, Endpoint, u16, u16) {
    let mut a = e.create_endpoint(Config::default(), Some(sender)).unwrap();
    let mut b = e.create_endpoint(Config::default(), receiver).unwrap();
    for ep in [&a, &b] {
        e.with_applet(ep.id(), |ap| ap.set_engine(on).unwrap());
    }
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    (a, b, ab, ba)
}

/// Every engine and every way.
fn cases() -> impl Iterator<Item = (jive::Engine, Way)> {
    engines().iter().flat_map(|&on| {
        [Way::Send, Way::Inbox, Way::Area]
            .into_iter()
            .map(move |way| (on, way))
    })
}

/// The sizes each test sends: empty, inline (56 B and under), one buffer
/// and several (`Way::Area` puts a message 8 KiB before the area's end).
const SIZES: [usize; 7] = [0, 1, 40, 56, 57, 1500, 8000];

/// Sends `msg` from `a`'s area at `own` on `ab` (as `Way::Area` does),
/// runs `b`'s side, and returns the descriptor's status.
fn send_from_area(
    a: &mut Endpoint,
    ab: u16,
    b: &mut Endpoint,
    msg: &[u8],
    own: u32,
) -> unet::layout::TxStatus {
    a.write_area(own, msg).unwrap();
    let n = a.tx_pushed();
    a.push_tx(unet::layout::TxDesc {
        len: msg.len() as u32,
        offset: own,
        chan: ab,
        ..unet::layout::TxDesc::default()
    })
    .unwrap();
    assert!(a.flush(10));
    b.poll_engine();
    a.tx_status(n)
}

#[test]
fn a_lent_do_tx_delivers_what_the_standard_applets_copying_one_does() {
    let receivers: [(&str, Option<&'static [u8]>); 3] = [
        ("lent", Some(unet::applets::STANDARD_LENT)),
        ("copying", Some(unet::applets::STANDARD)),
        ("none", None),
    ];
    for (on, way) in cases() {
        for (name, receiver) in receivers {
            // `LentTx` in mode 0 pushes its whole message at a tail site.
            for sender in [unet::applets::LENT_TX, unet::applets::STANDARD] {
                let e = engine();
                let (mut a, mut b, ab, ba) = pair(&e, sender, receiver, on);
                let what = format!("{on:?} {way:?} to {name}");
                for (k, len) in SIZES.into_iter().enumerate() {
                    let m = message(k as u8 + 7, len);
                    deliver(&mut a, ab, &mut b, &m, way);
                    let got = b.recv().map(|r| (r.chan(), r.to_vec()));
                    assert_eq!(got, Some((ba, m)), "{what}, {len} B");
                }
                for c in [a.counts(), b.counts()] {
                    assert_eq!((c.applet_traps, c.applet_drops), (0, 0), "{what}");
                }
                assert_eq!(a.counts().tx_frames, SIZES.len() as u64, "{what}");
            }
        }
    }
}

#[test]
fn do_tx_reads_the_message_itself_of_its_own_length() {
    for (on, way) in cases() {
        let e = engine();
        let (mut a, mut b, ab, _) = pair(&e, unet::applets::LENT_TX, None, on);
        e.with_applet(a.id(), |ap| ap.set_static_int("mode", 3).unwrap());
        for (k, len) in SIZES.into_iter().enumerate() {
            let m = message(k as u8 + 60, len);
            deliver(&mut a, ab, &mut b, &m, way);
            let seen = e.with_applet(a.id(), |ap| {
                (
                    ap.static_int("seen").unwrap(),
                    ap.static_int("hash").unwrap(),
                )
            });
            assert_eq!(seen, Some((len as i32, hash(&m))), "{on:?} {way:?} {len} B");
            assert!(b.recv().is_none(), "mode 3 pushes nothing");
        }
    }
}

#[test]
fn a_push_of_the_lent_message_or_a_part_sends_exactly_those_bytes() {
    // (mode, skip): the whole message at a tail site, its part past 5
    // bytes at a tail site, the whole message at a site that is not one.
    for (mode, skip) in [(0, 0), (0, 5), (1, 0)] {
        for (on, way) in cases() {
            let e = engine();
            for receiver in [None, Some(unet::applets::STANDARD_LENT)] {
                let (mut a, mut b, ab, ba) = pair(&e, unet::applets::LENT_TX, receiver, on);
                e.with_applet(a.id(), |ap| {
                    ap.set_static_int("mode", mode).unwrap();
                    ap.set_static_int("skip", skip).unwrap();
                });
                let what = format!("mode {mode} skip {skip} {on:?} {way:?}");
                for (k, len) in SIZES.into_iter().filter(|&l| l >= 5).enumerate() {
                    let m = message(k as u8 + 90, len);
                    deliver(&mut a, ab, &mut b, &m, way);
                    let got = b.recv().map(|r| (r.chan(), r.to_vec()));
                    assert_eq!(
                        got,
                        Some((ba, m[skip as usize..].to_vec())),
                        "{what}, {len} B"
                    );
                }
                let c = a.counts();
                assert_eq!((c.applet_traps, c.applet_drops), (0, 0), "{what}");
                let pushed = e.with_applet(a.id(), |ap| ap.static_int("pushed").unwrap());
                let sent = SIZES.into_iter().filter(|&l| l >= 5).count() as i32;
                let n = if mode == 1 { sent } else { 0 };
                assert_eq!(pushed, Some(n), "{what}");
            }
        }
    }
}

#[test]
fn do_lto_hdma_over_the_lent_message_traps_and_beside_it_does_not() {
    for &on in engines() {
        let e = engine();
        let (mut a, mut b, ab, ba) = pair(&e, unet::applets::LENT_TX, None, on);
        e.with_applet(a.id(), |ap| ap.set_static_int("mode", 2).unwrap());
        // `Way::Area` puts the message at `own`.
        let own = (a.layout().area_len - 8192) as i32;
        let len = 300usize;
        let m = message(3, len);
        // Over it: at its start, its last byte, and one byte short of it
        // on either side (which do not overlap).
        let cases = [
            (own, true),
            (own + len as i32 - 1, true),
            (own - len as i32 + 1, true),
            (own - len as i32, false),
            (own + len as i32, false),
            (0, false),
        ];
        let mut traps = 0;
        for (target, over) in cases {
            e.with_applet(a.id(), |ap| ap.set_static_int("target", target).unwrap());
            let status = send_from_area(&mut a, ab, &mut b, &m, own as u32);
            let got = b.recv().map(|r| (r.chan(), r.to_vec()));
            let what = format!("{on:?} target {target}");
            let sent = if over {
                unet::layout::TxStatus::Dropped
            } else {
                unet::layout::TxStatus::Sent
            };
            assert_eq!(status, sent, "{what}");
            if over {
                traps += 1;
                assert_eq!(got, None, "{what}: nothing sent");
                // The message in the area is as the application wrote it.
                let mut area = vec![0u8; len];
                a.segment()
                    .read_bytes(a.layout().area + own as usize, &mut area);
                assert_eq!(area, m, "{what}: the lent bytes unwritten");
            } else {
                assert_eq!(got, Some((ba, m.clone())), "{what}");
                let mut copy = vec![0u8; len];
                a.segment()
                    .read_bytes(a.layout().area + target as usize, &mut copy);
                assert_eq!(copy, m, "{what}: the copy beside it made");
            }
            assert_eq!(a.counts().applet_traps, traps, "{what}");
        }
    }
}

/// The first `n` bytes of `a`'s transmit region (the start of its buffer
/// area, where `send` copies a message for `doTx` to read).
fn region(a: &Endpoint, n: usize) -> Vec<u8> {
    assert!(n as u64 <= a.tx_region());
    let mut got = vec![0u8; n];
    a.segment().read_bytes(a.layout().area, &mut got);
    got
}

#[test]
fn send_lends_a_lent_do_tx_the_callers_bytes_and_copies_them_for_a_copying_one() {
    const SEEN: usize = 16 << 10;
    let pattern: Vec<u8> = (0..SEEN).map(|i| (i * 7 + 3) as u8).collect();
    for (on, way) in cases().filter(|(_, w)| !matches!(w, Way::Area)) {
        for (sender, lends) in [
            (unet::applets::LENT_TX, true),
            (unet::applets::STANDARD_LENT, true),
            (unet::applets::STANDARD, false),
        ] {
            let e = engine();
            let (mut a, mut b, ab, ba) = pair(&e, sender, Some(unet::applets::STANDARD_LENT), on);
            a.write_area(0, &pattern).unwrap();
            let what = format!("{on:?} {way:?}, lent doTx: {lends}");
            for (k, len) in SIZES.into_iter().enumerate() {
                let m = message(k as u8 + 30, len);
                deliver(&mut a, ab, &mut b, &m, way);
                let got = b.recv().map(|r| (r.chan(), r.to_vec()));
                assert_eq!(got, Some((ba, m)), "{what}, {len} B");
            }
            // A lent `doTx` read the messages where the application had
            // them: the transmit region is as it was written. A copying
            // one read them from there, where the first was copied.
            let after = region(&a, SEEN);
            if lends {
                assert_eq!(after, pattern, "{what}: the transmit region written");
            } else {
                assert_ne!(after, pattern, "{what}: nothing copied for doTx");
            }
            for c in [a.counts(), b.counts()] {
                assert_eq!((c.applet_traps, c.applet_drops), (0, 0), "{what}");
            }
        }
    }
}

#[test]
fn send_of_bytes_in_the_senders_own_area_lends_a_copy_that_its_natives_cannot_reach() {
    // `LentTx` in mode 2 copies its message with `doLtoHDMA` to `target`
    // in the area, then pushes it at a tail site. The message lies at
    // `own` in the sender's own area, and the copy goes one byte on, over
    // it: were those bytes lent in place, the copy would change them under
    // `doTx` (and the message sent would be shifted). Lent from a copy in
    // the transmit region, `doTx` sends the message as it was, and the
    // copy is made.
    for (on, way) in cases().filter(|(_, w)| !matches!(w, Way::Area)) {
        let e = engine();
        let (mut a, mut b, ab, ba) = pair(&e, unet::applets::LENT_TX, None, on);
        let own = (a.layout().area_len - 8192) as u32;
        e.with_applet(a.id(), |ap| {
            ap.set_static_int("mode", 2).unwrap();
            ap.set_static_int("target", own as i32 + 1).unwrap();
        });
        let what = format!("{on:?} {way:?}");
        for (k, len) in SIZES.into_iter().filter(|&l| l > 0).enumerate() {
            let m = message(k as u8 + 120, len);
            a.write_area(own, &m).unwrap();
            let seg = a.segment().clone();
            let at = a.layout().area + own as usize;
            seg.with_bytes(at, len, |bytes| {
                deliver(&mut a, ab, &mut b, bytes, way);
            });
            let got = b.recv().map(|r| (r.chan(), r.to_vec()));
            assert_eq!(got, Some((ba, m.clone())), "{what}, {len} B");
            let mut copy = vec![0u8; len];
            a.segment().read_bytes(at + 1, &mut copy);
            assert_eq!(copy, m, "{what}, {len} B: the copy made");
        }
        let c = a.counts();
        assert_eq!((c.applet_traps, c.applet_drops), (0, 0), "{what}");
    }
}

#[test]
fn a_do_tx_that_keeps_its_lent_message_is_refused_at_install() {
    refused_at_install(
        &engine(),
        unet::applets::LENT_TX_KEEPER,
        unet::applets::LENT_TX,
        &["doTx", "is stored in static field kept"],
    );
}
