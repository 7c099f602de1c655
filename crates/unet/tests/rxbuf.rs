//! What `doRx` can see of `RxBuf`, the array the engine fills with each
//! arriving message (docs/unet.md, "Applets and natives"): one array, of
//! the endpoint's largest message, the message copied to its start, the
//! bytes past it as earlier messages and the applet left them, and the
//! message still there after `doRx` returns, for the applet's later
//! invocations. The probe is `applets/unet/RxBufProbe.java`.
//!
//! This is the contract that keeps the engine copying each message into
//! `RxBuf` (about 20 instructions at 40 B, docs/benchmarks.md): a receive
//! that lent `doRx` the message's bytes in place instead (the frame, or the
//! sender's buffer area) would show the applet an array of the message's
//! length, without what the applet left past it, and gone after the
//! invocation. Checked on the JIT and on the interpreter, with the message
//! in a frame and without one, run on the sender's thread and from the
//! inbox by another thread.
#![cfg(not(loom))]

#[path = "common/loopback.rs"]
mod loopback;

use loopback::{Way, connected, deliver, engine, engines, message};
use unet::layout::TxDesc;
use unet::{Endpoint, Engine};

/// What the probe's last `doRx` recorded: `(seen, past, same, own)`.
fn recorded(e: &Engine, b: &Endpoint) -> (i32, i32, i32, i32) {
    e.with_applet(b.id(), |ap| {
        let v = |n: &str| ap.static_int(n).unwrap();
        (v("seen"), v("past"), v("same"), v("own"))
    })
    .expect("the probe is installed")
}

#[test]
fn do_rx_sees_one_array_of_the_largest_message_that_keeps_what_it_held() {
    for &on in engines() {
        for (framed, way) in [
            (false, Way::Send),
            (true, Way::Send),
            (false, Way::Inbox),
            (true, Way::Inbox),
        ] {
            let what = format!("{on:?}, framed {framed}, {way:?}");
            let e = engine();
            let (mut a, mut b, ab, ba) = connected(&e, unet::applets::RXBUF_PROBE);
            e.with_applet(b.id(), |ap| ap.set_engine(on))
                .unwrap()
                .unwrap();
            if framed {
                // Never matches; while it is installed, every message is
                // framed and classified (`fastpath_bench::unet::FRAMING_FILTER`).
                a.install_filter(ab, "ip[2:2] = 1", 0).unwrap();
            }
            let largest = b.max_message().min(1 << 16);
            assert!(largest > 64, "{what}");

            // The first message: the array of the largest message, its
            // initial zeros past the message.
            let m1 = message(1, 40);
            deliver(&mut a, ab, &mut b, &m1, way);
            assert_eq!(recorded(&e, &b), (largest as i32, 0, 0, 0), "{what}: first");

            // A shorter one: the same array, the first message's bytes past
            // it, and what the last doRx wrote at the array's end.
            let m2 = message(2, 10);
            deliver(&mut a, ab, &mut b, &m2, way);
            assert_eq!(
                recorded(&e, &b),
                (largest as i32, i32::from(m1[10] as i8), 1, 40),
                "{what}: second"
            );

            // The message is still in the array after its doRx: a later
            // doTx sends what the array the last doRx kept holds.
            let n = b.tx_pushed();
            b.push_tx(TxDesc {
                len: m2.len() as u32,
                chan: ba,
                ..TxDesc::default()
            })
            .unwrap();
            assert!(b.flush(10), "{what}");
            assert_eq!(b.tx_status(n), unet::layout::TxStatus::Sent, "{what}");
            let got = a.recv().map(|m| m.to_vec());
            assert_eq!(got.as_deref(), Some(&m2[..]), "{what}: sent after doRx");

            // A message as long as the array: nothing past it, and its last
            // byte over what the last doRx wrote there.
            let m3 = message(3, largest);
            deliver(&mut a, ab, &mut b, &m3, way);
            assert_eq!(
                recorded(&e, &b),
                (largest as i32, -1, 1, i32::from(m3[largest - 1] as i8)),
                "{what}: the largest"
            );
            // The host sees the same array: the message, then the probe's
            // byte at the end (the message's length, as a byte).
            let held = e
                .with_applet(b.id(), |ap| match ap.static_array("RxBuf") {
                    Some(jive::Object::Bytes(v)) => v.iter().map(|&x| x as u8).collect::<Vec<_>>(),
                    other => panic!("RxBuf is {other:?}"),
                })
                .unwrap();
            assert_eq!(held.len(), largest, "{what}");
            assert_eq!(&held[..largest - 1], &m3[..largest - 1], "{what}");
            assert_eq!(held[largest - 1], largest as u8, "{what}");
            let c = b.counts();
            assert_eq!((c.applet_traps, c.applet_drops), (0, 0), "{what}");
        }
    }
}
