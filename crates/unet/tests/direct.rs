//! Messages an application hands to the engine of its own process without
//! a transmit descriptor (`Endpoint::send` while it drives the engine, no
//! applet, the transmit queue empty): the same checks, deliveries and
//! counters as through the transmit queue, and the transmit queue's
//! numbers and statuses left to the descriptors actually pushed; and
//! messages handed to an applet's `doTx` so.
#![cfg(not(loom))]

mod message;
use message::message;
use unet::layout::{INLINE_MAX, TxDesc, TxStatus};
use unet::transport::LoopNet;
use unet::{Config, Endpoint, Engine, SendError};

fn engine() -> Engine {
    let net = LoopNet::new();
    Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ))
}

fn pair(e: &Engine, config: Config) -> (Endpoint, Endpoint, u16, u16) {
    let mut a = e.create_endpoint(config, None).unwrap();
    let mut b = e.create_endpoint(config, None).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    (a, b, ab, ba)
}

/// Every length a descriptor holds inline, sent directly from the
/// caller's memory, longest first so that each slot held longer bytes
/// before: each arrives with exactly its bytes.
#[test]
fn every_inline_length_arrives_intact() {
    let e = engine();
    let (mut a, mut b, ab, _) = pair(&e, Config::default());
    for (seq, len) in (0..=INLINE_MAX).rev().enumerate() {
        let m = message(seq as u64 + 1, len);
        a.send(ab, &m).unwrap();
        let got = b.recv_ref().expect("delivered");
        assert!(got.is_inline(), "{len} bytes");
        assert!(got.to_vec() == m, "{len} bytes differ");
    }
    assert_eq!(a.tx_pushed(), 0, "no descriptor was pushed");
    assert_eq!(b.counts().rx_delivered, INLINE_MAX as u64 + 1);
}

/// Every size class (empty, inline, one past inline, the private buffer's
/// edge, one and several buffers, the largest message), through `send`
/// and `send_with`, in place and copied out: each arrives intact, none
/// pushes a descriptor, and the counters count each once.
#[test]
fn every_size_arrives_intact_without_a_descriptor() {
    let e = engine();
    let (mut a, mut b, ab, _) = pair(&e, Config::default());
    let max = a.max_message();
    let sizes = [
        0,
        1,
        INLINE_MAX - 1,
        INLINE_MAX,
        INLINE_MAX + 1,
        64,
        65,
        1000,
        4095,
        4096,
        4097,
        3 * 4096 + 5,
        max - 1,
        max,
    ];
    let mut seq = 0;
    for &len in &sizes {
        for how in 0..4 {
            seq += 1;
            let m = message(seq, len);
            if how % 2 == 0 {
                a.send(ab, &m).unwrap();
            } else {
                a.send_with(ab, len, |buf| buf.copy_from_slice(&m)).unwrap();
            }
            let got = if how < 2 {
                b.recv().expect("delivered").to_vec()
            } else {
                b.recv_ref().expect("delivered").to_vec()
            };
            assert_eq!(got.len(), len, "message {seq} of {len} bytes");
            assert!(got == m, "message {seq} of {len} bytes differs");
        }
    }
    let n = 4 * sizes.len() as u64;
    assert_eq!(a.tx_pushed(), 0, "no descriptor was pushed");
    let (ca, cb) = (a.counts(), b.counts());
    assert_eq!((ca.tx_descriptors, ca.tx_frames), (n, n));
    assert_eq!(cb.rx_delivered, n);
    assert!(matches!(
        a.send(ab, &vec![0; max + 1]),
        Err(SendError::TooLong { .. })
    ));
    assert!(matches!(
        a.send_with(ab, max + 1, |_| {}),
        Err(SendError::TooLong { .. })
    ));
    assert_eq!(a.counts().tx_descriptors, n);
}

/// With the standard applet on both endpoints, `send` and `send_with`
/// hand every size class to `doTx` without a descriptor (before
/// 2026-12-01 `send_with` pushed one, which the engine's pass over the
/// queue took back): each message arrives intact, none pushes a
/// descriptor, and each is counted once, with no drop or trap.
#[test]
fn with_the_standard_applet_send_with_hands_every_size_to_dotx_without_a_descriptor() {
    let e = engine();
    let std_applet = Some(unet::applets::STANDARD);
    let mut a = e.create_endpoint(Config::default(), std_applet).unwrap();
    let mut b = e.create_endpoint(Config::default(), std_applet).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    b.open_channel(e.local(), a.id()).unwrap();
    let max = a.max_message();
    let sizes = [0, 1, INLINE_MAX, INLINE_MAX + 1, 64, 65, 1000, 4097, max];
    let mut seq = 0;
    for &len in &sizes {
        for with in [false, true] {
            seq += 1;
            let m = message(seq, len);
            if with {
                a.send_with(ab, len, |buf| buf.copy_from_slice(&m)).unwrap();
            } else {
                a.send(ab, &m).unwrap();
            }
            let got = b.recv().expect("delivered").to_vec();
            assert_eq!(got.len(), len, "message {seq} of {len} bytes");
            assert!(got == m, "message {seq} of {len} bytes differs");
            assert_eq!(
                a.tx_pushed(),
                0,
                "message {seq} of {len} bytes pushed a descriptor"
            );
        }
    }
    let n = 2 * sizes.len() as u64;
    let (ca, cb) = (a.counts(), b.counts());
    assert_eq!(ca.tx_descriptors, n);
    assert_eq!((ca.applet_drops, ca.applet_traps), (0, 0));
    assert_eq!((cb.applet_drops, cb.applet_traps), (0, 0));
    assert_eq!(cb.rx_delivered, n);
}

/// A message sent while descriptors wait in the transmit queue goes behind
/// them: they are delivered first, in order, and it through the queue.
#[test]
fn a_message_waits_behind_queued_descriptors() {
    let e = engine();
    let (mut a, mut b, ab, _) = pair(&e, Config::default());
    a.set_drive(false);
    for seq in 0..5 {
        a.send(ab, &message(seq, 8 + seq as usize)).unwrap();
    }
    assert_eq!(a.tx_pushed(), 5);
    assert!(b.recv().is_none(), "nothing serviced yet");
    a.set_drive(true);
    a.send(ab, &message(5, 13)).unwrap();
    assert_eq!(
        a.tx_pushed(),
        6,
        "it went through the queue, behind the five"
    );
    for seq in 0..6 {
        let m = b.recv().expect("delivered");
        assert_eq!(m.to_vec(), message(seq, 8 + seq as usize), "message {seq}");
    }
    for n in 0..6 {
        assert_eq!(a.tx_status(n), TxStatus::Sent);
    }
    // Then, the queue empty again, directly.
    a.send(ab, &message(6, 14)).unwrap();
    assert_eq!(a.tx_pushed(), 6);
    assert_eq!(b.recv().expect("delivered").to_vec(), message(6, 14));
    assert_eq!(a.counts().tx_descriptors, 7);
}

/// A message to a full receive queue is counted there, as through the
/// transmit queue, and the receiver's next message arrives once it reads.
#[test]
fn a_full_receiver_counts_what_it_cannot_take() {
    let e = engine();
    let config = Config::default();
    let (mut a, mut b, ab, _) = pair(&e, config);
    b.set_drive(false);
    let depth = u64::from(config.rx_depth);
    for seq in 0..depth + 7 {
        a.send(ab, &message(seq, 40)).unwrap();
    }
    assert_eq!(a.tx_pushed(), 0);
    let cb = b.counts();
    assert_eq!((cb.rx_delivered, cb.rx_queue_full), (depth, 7));
    assert_eq!(a.counts().tx_descriptors, depth + 7);
    for seq in 0..depth {
        assert_eq!(b.recv().expect("delivered").to_vec(), message(seq, 40));
    }
    assert!(b.recv().is_none());
    a.send(ab, &message(99, 40)).unwrap();
    assert_eq!(b.recv().expect("delivered").to_vec(), message(99, 40));
}

/// A channel whose peer went away refuses the message at the endpoint, as
/// before; a descriptor pushed on it by hand still completes as closed.
#[test]
fn a_closed_channel_sends_nothing() {
    let e = engine();
    let (mut a, b, ab, _) = pair(&e, Config::default());
    a.send(ab, b"before").unwrap();
    drop(b);
    assert_eq!(
        a.send(ab, b"after"),
        Err(SendError::ChannelClosed { chan: ab })
    );
    a.write_area(0, b"late").unwrap();
    let n = a.tx_pushed();
    assert!(matches!(
        a.push_tx(TxDesc {
            len: 4,
            offset: 0,
            chan: ab,
            ..TxDesc::default()
        }),
        Err(SendError::ChannelClosed { .. })
    ));
    assert_eq!(a.tx_pushed(), n);
    let c = a.counts();
    assert_eq!((c.tx_descriptors, c.tx_frames, c.tx_closed), (1, 1, 0));
}

/// A message on a channel the engine does not know goes through the queue
/// and completes as rejected, its status readable as before.
#[test]
fn an_unknown_channel_is_rejected_through_the_queue() {
    let e = engine();
    let (mut a, _b, _ab, _) = pair(&e, Config::default());
    a.send(7, b"nowhere").unwrap();
    assert_eq!(a.tx_pushed(), 1);
    assert_eq!(a.tx_status(0), TxStatus::Rejected);
    let c = a.counts();
    assert_eq!((c.tx_descriptors, c.tx_rejected, c.tx_frames), (1, 1, 0));
}

/// A message in one buffer sent directly (the engine's delivery of it
/// inlined into the send) takes its buffer as one through the transmit
/// queue does: without a free buffer it is dropped and counted, and
/// free-queue entries that are not buffers (misaligned, past the area) are
/// counted and skipped, the message going into the valid buffer behind
/// them, intact.
#[test]
fn a_message_in_one_buffer_skips_and_counts_bad_free_entries() {
    let e = engine();
    let config = Config {
        buffers: 8,
        buffer_size: 256,
        ..Config::default()
    };
    let (mut a, mut b, ab, _) = pair(&e, config);
    // b gave its 4 receive buffers; four messages take them, and none is
    // given back while they wait in b's receive queue.
    for seq in 0..4 {
        a.send(ab, &message(seq, 100)).unwrap();
    }
    a.send(ab, &message(4, 100)).unwrap();
    let cb = b.counts();
    assert_eq!(
        (cb.rx_delivered, cb.rx_no_buffer),
        (4, 1),
        "the fifth dropped"
    );
    // The first message's buffer, kept by the application, then given
    // back behind two entries that are not buffers.
    let first = b.recv().expect("delivered");
    assert_eq!(first.to_vec(), message(0, 100));
    let off = first.into_desc().offset(0);
    assert!(b.give_buffer(off + 3));
    assert!(b.give_buffer(u32::MAX));
    assert!(b.give_buffer(off));
    a.send(ab, &message(5, 200)).unwrap();
    assert_eq!(a.tx_pushed(), 0, "every message went directly");
    let cb = b.counts();
    assert_eq!(
        (cb.rx_delivered, cb.rx_no_buffer, cb.free_invalid),
        (5, 1, 2),
        "two bad entries counted and skipped"
    );
    for seq in 1..4 {
        assert_eq!(b.recv_ref().expect("delivered").to_vec(), message(seq, 100));
    }
    let m = b.recv_ref().expect("delivered");
    assert_eq!(m.to_vec(), message(5, 200), "intact in the valid buffer");
    drop(m);
    assert!(b.recv_ref().is_none());
}
