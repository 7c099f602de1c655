//! A `txPush` at a tail site whose receiver's applet another thread
//! serves: the deferred message goes into that receiver's inbox as the
//! bytes of the frame the eager push makes, with the frame's checks and
//! counts (the inbox's budgets, a closed receiver), and it never overtakes
//! a frame of its channel that waits. The sender runs on the test's
//! thread; each drain of a receiver of "another thread" runs on a thread
//! of its own (it claims the endpoint, so that the sender's thread is not
//! the receiver's), one at a time, so that every stream is exact.
//! `tail.rs` holds the same-thread cases; the engine's unit tests
//! (`datapath.rs`) the closed receiver and the message whose bytes are
//! gone.
#![cfg(not(loom))]

mod message;
mod tail_setup;

use message::message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tail_setup::{Outcome, Streams, drain, engine_on, interpret, random_len, set_mode, streams};
use unet::transport::LoopNet;
use unet::{Budgets, Config, Endpoint};

/// [`drain`] on a thread of its own, which claims `ep`: from then on its
/// applet is another thread's than the test's.
fn drain_elsewhere(ep: &mut Endpoint, into: &mut Vec<Vec<u8>>) {
    std::thread::scope(|s| {
        s.spawn(|| drain(ep, into));
    });
}

/// One random stream from `seed`, with the sender's `doTx` in `mode` (0:
/// the tail push; 2: the same push, eager), on jive's interpreter if
/// `on_interpreter`, else on the JIT. Its receivers: `b` (the standard
/// applet, another thread's: the inbox way), `c` (no applet, another
/// thread's), `g` (the standard applet, the sender's thread: straight
/// into its `RxBuf`), the sender itself, `d` (the standard applet,
/// another thread's, removed mid-stream), one on another engine and no
/// channel at all; random push and inbox budgets (frames and bytes), and
/// descriptors sent one at a time or queued for one pass.
fn stream(seed: u64, mode: i32, on_interpreter: bool) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    let budgets = Budgets {
        push_bytes: if rng.random_bool(0.2) { 300 } else { 4 << 20 },
        inbox_bytes: match rng.random_range(0..4) {
            0 => 0,
            1 => rng.random_range(100..20_000),
            _ => 4 << 20,
        },
        inbox_frames: if rng.random_bool(0.3) {
            rng.random_range(1..6)
        } else {
            Budgets::default().inbox_frames
        },
        ..Budgets::default()
    };
    let Streams {
        net: _net,
        e,
        r,
        mut a,
        mut b,
        mut c,
        g,
        mut d,
        mut far,
        ab,
        ac,
        ag,
        aa,
        ad,
        af,
    } = streams(budgets, mode, on_interpreter, true);
    let (mut g, ag) = (g.unwrap(), ag.unwrap());
    let mut out = Outcome::new(6);
    // The receivers of another thread claimed there.
    drain_elsewhere(&mut b, &mut out.received[0]);
    drain_elsewhere(&mut c, &mut out.received[1]);
    drain_elsewhere(d.as_mut().unwrap(), &mut out.received[4]);
    drain(&mut g, &mut out.received[2]);
    let chans = [ab, ab, ab, ab, ac, ag, aa, ad, af, 77];
    let max = a.max_message();
    let mut seq = 0;
    for _ in 0..rng.random_range(20..60u64) {
        if d.is_some() && rng.random_bool(0.04) {
            d = None;
        }
        // One descriptor, or a few queued and taken in one pass.
        let queued = rng.random_bool(0.3);
        if queued {
            a.set_drive(false);
        }
        for _ in 0..if queued { rng.random_range(2..6) } else { 1 } {
            seq += 1;
            let ch = chans[rng.random_range(0..chans.len())];
            let len = random_len(&mut rng, max);
            let m = message(seq, len);
            out.sent.push(format!("{:?}", a.send(ch, &m)));
        }
        if queued {
            a.set_drive(true);
            a.poll_engine();
        }
        if rng.random_bool(0.6) {
            drain_elsewhere(&mut b, &mut out.received[0]);
            drain_elsewhere(&mut c, &mut out.received[1]);
            drain(&mut g, &mut out.received[2]);
            drain(&mut a, &mut out.received[3]);
            if let Some(d) = d.as_mut() {
                drain_elsewhere(d, &mut out.received[4]);
            }
            r.poll();
            drain(&mut far, &mut out.received[5]);
        }
    }
    e.poll();
    r.poll();
    drain_elsewhere(&mut b, &mut out.received[0]);
    drain_elsewhere(&mut c, &mut out.received[1]);
    drain(&mut g, &mut out.received[2]);
    drain(&mut a, &mut out.received[3]);
    drain(&mut far, &mut out.received[5]);
    out.counts = vec![a.counts(), b.counts(), c.counts(), g.counts(), far.counts()];
    out.engines = vec![e.counts(), r.counts()];
    out
}

/// Random streams to receivers of another thread (with and without an
/// applet), of the sender's thread, itself, one removed mid-stream, one
/// on another engine and no channel, under random budgets: the tail push
/// (mode 0) and the eager push of the same message (mode 2), and the tail
/// push on the JIT and on the interpreter, give the same results,
/// deliveries and counters.
#[test]
fn a_deferred_push_to_another_threads_applet_delivers_and_counts_as_the_eager_push() {
    let (mut inboxed, mut full) = (0, 0);
    for seed in 0..40 {
        let tail = stream(seed, 0, false);
        for (what, other) in [
            ("the eager push", stream(seed, 2, false)),
            ("the interpreter's tail push", stream(seed, 0, true)),
        ] {
            assert!(
                tail == other,
                "seed {seed}: the JIT's tail push and {what} differ: sent {:?} / {:?}, counts {:?} / {:?}, engines {:?} / {:?}, messages received {:?} / {:?}",
                tail.sent,
                other.sent,
                tail.counts,
                other.counts,
                tail.engines,
                other.engines,
                tail.received.iter().map(Vec::len).collect::<Vec<_>>(),
                other.received.iter().map(Vec::len).collect::<Vec<_>>(),
            );
        }
        inboxed += tail.received[0].len();
        full += tail.counts[1].rx_queue_full;
    }
    assert!(inboxed > 100, "the streams reach the other thread's applet");
    assert!(full > 10, "the streams find its inbox full");
}

/// The receiver of another thread, with the standard applet, at an inbox
/// budget of 3 frames: of 8 messages sent before it drains, 3 arrive and
/// 5 are counted as a full receive queue, each pushed and counted by the
/// sender, for the tail push and the eager one, on the JIT and on the
/// interpreter; the next message arrives.
#[test]
fn a_full_inbox_refuses_the_deferred_message_and_counts_it_as_the_frame() {
    for (mode, on_interpreter) in [(0, false), (2, false), (0, true)] {
        let budgets = Budgets {
            inbox_frames: 3,
            ..Budgets::default()
        };
        let net = LoopNet::new();
        let e = engine_on(&net, "10.0.0.1:7000", budgets);
        let cfg = Config::default();
        let mut a = e
            .create_endpoint(cfg, Some(unet::applets::TAIL_PUSH))
            .unwrap();
        let mut b = e
            .create_endpoint(cfg, Some(unet::applets::STANDARD))
            .unwrap();
        set_mode(&e, &a, mode);
        if on_interpreter {
            interpret(&e, &a);
        }
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        b.open_channel(e.local(), a.id()).unwrap();
        let mut got = Vec::new();
        drain_elsewhere(&mut b, &mut got);
        let sent: Vec<_> = (0..8).map(|i| message(i + 1, 40)).collect();
        for m in &sent {
            a.send(ab, m).unwrap();
        }
        drain_elsewhere(&mut b, &mut got);
        let what = format!("mode {mode}, interpreter {on_interpreter}");
        assert_eq!(got, sent[..3], "{what}");
        let (ca, cb) = (a.counts(), b.counts());
        assert_eq!(ca.tx_frames, 8, "{what}");
        assert_eq!(ca.applet_drops, 0, "{what}");
        assert_eq!(cb.rx_queue_full, 5, "{what}");
        assert_eq!(cb.rx_delivered, 3, "{what}");
        let last = message(99, 40);
        a.send(ab, &last).unwrap();
        got.clear();
        drain_elsewhere(&mut b, &mut got);
        assert_eq!(got, [last], "{what}");
    }
}

/// Descriptors queued for one pass: a message to another engine first
/// (its frame waits for the pass's end), then three on the channel to
/// another thread's applet. In modes 0 and 2 the first of the three is
/// framed behind it and the next two must not overtake it into the
/// receiver's inbox (the deferring window stays shut while a frame
/// waits); in mode 3 each `doTx` pushes its message twice, the first push
/// eager (its frame waits in the outbox lent to `doTx`) and the second at
/// a tail site, which must not overtake the first (`resolve_deferred`
/// tests the outbox, and the window is shut anyway). Every message
/// arrives in the order sent.
#[test]
fn a_deferred_message_into_an_inbox_never_overtakes_a_waiting_frame() {
    for mode in [0, 2, 3] {
        let copies = if mode == 3 { 2 } else { 1 };
        let twice = |ms: &[Vec<u8>]| -> Vec<Vec<u8>> {
            ms.iter()
                .flat_map(|m| std::iter::repeat_n(m.clone(), copies))
                .collect()
        };
        let net = LoopNet::new();
        let e = engine_on(&net, "10.0.0.1:7000", Budgets::default());
        let r = engine_on(&net, "10.0.0.2:7000", Budgets::default());
        let cfg = Config::default();
        let std = Some(unet::applets::STANDARD);
        let mut a = e
            .create_endpoint(cfg, Some(unet::applets::TAIL_PUSH))
            .unwrap();
        let mut b = e.create_endpoint(cfg, std).unwrap();
        let mut far = r.create_endpoint(cfg, std).unwrap();
        set_mode(&e, &a, mode);
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        let af = a.open_channel(r.local(), far.id()).unwrap();
        b.open_channel(e.local(), a.id()).unwrap();
        far.open_channel(e.local(), a.id()).unwrap();
        let mut got = Vec::new();
        drain_elsewhere(&mut b, &mut got);
        // The channel's verdict taken, so that the window can open.
        a.send(ab, b"first").unwrap();
        drain_elsewhere(&mut b, &mut got);
        assert_eq!(got, twice(&[b"first".to_vec()]), "mode {mode}");
        got.clear();
        for round in 0..3u64 {
            let sent: Vec<_> = (1..=3).map(|i| message(round * 10 + i, 40)).collect();
            a.set_drive(false);
            a.send(af, b"away").unwrap();
            for m in &sent {
                a.send(ab, m).unwrap();
            }
            a.set_drive(true);
            a.poll_engine();
            drain_elsewhere(&mut b, &mut got);
            assert_eq!(got, twice(&sent), "mode {mode}, round {round}");
            got.clear();
            r.poll();
            let mut away = Vec::new();
            drain(&mut far, &mut away);
            assert_eq!(away, twice(&[b"away".to_vec()]), "mode {mode}");
        }
        assert_eq!(a.counts().tx_frames, 13 * copies as u64, "mode {mode}");
    }
}

/// A sender whose channel leads to itself, its application on another
/// thread, its descriptors served by a thread shared by every endpoint
/// (the engine's poll here, not the endpoint's own calls): each deferred
/// message would wait in the sender's own inbox, and it goes there at
/// once, as any peer's does (`Engine::deliver_deferred`'s inbox way with
/// the peer the sender itself). It waits there until the owner's receive
/// runs it, arrives once and in order, and counts as the frame of the
/// eager push (mode 2) counts, on the JIT and on the interpreter.
#[test]
fn a_deferred_push_to_itself_from_a_shared_thread_waits_in_its_own_inbox() {
    let mut outcomes = Vec::new();
    for (mode, on_interpreter) in [(0, false), (0, true), (2, false)] {
        let what = format!("mode {mode}, interpreter {on_interpreter}");
        let net = LoopNet::new();
        // A round long enough for the three descriptors below on a loaded
        // machine: `service` on a shared thread stops at the round's
        // applet time (200 µs by default), which a debug build's
        // interpreter under a parallel test run once spent on two.
        let budgets = Budgets {
            round_time: std::time::Duration::from_secs(10),
            ..Budgets::default()
        };
        let e = engine_on(&net, "10.0.0.1:7000", budgets);
        let mut a = e
            .create_endpoint(Config::default(), Some(unet::applets::TAIL_PUSH))
            .unwrap();
        set_mode(&e, &a, mode);
        if on_interpreter {
            interpret(&e, &a);
        }
        let aa = a.open_channel(e.local(), a.id()).unwrap();
        // The channel's verdict taken on the owner's thread (this one).
        let mut got = Vec::new();
        a.send(aa, b"first").unwrap();
        drain(&mut a, &mut got);
        assert_eq!(got, [b"first".to_vec()], "{what}");
        got.clear();
        // The application moves to another thread; this one queues
        // descriptors without driving the engine (no claim), then serves
        // them as a shared engine thread.
        drain_elsewhere(&mut a, &mut got);
        let sent: Vec<_> = (1..=3).map(|i| message(i, 40)).collect();
        a.set_drive(false);
        for m in &sent {
            a.send(aa, m).unwrap();
        }
        let port = e.port(a.id()).unwrap();
        assert_eq!(e.service(&port), 3, "{what}");
        assert_eq!(a.pending(), 0, "{what}: they wait in the inbox");
        assert_eq!(a.counts().rx_delivered, 1, "{what}");
        a.set_drive(true);
        drain_elsewhere(&mut a, &mut got);
        assert_eq!(got, sent, "{what}: each once, in order");
        let c = a.counts();
        assert_eq!((c.tx_frames, c.rx_delivered), (4, 4), "{what}");
        assert_eq!(
            c.rx_queue_full + c.rx_no_buffer + c.applet_drops + c.applet_traps + c.queue_corrupt,
            0,
            "{what}"
        );
        let ec = e.counts();
        assert_eq!((ec.unmatched, ec.closed), (0, 0), "{what}");
        outcomes.push((c, ec));
    }
    assert!(
        outcomes.iter().all(|o| *o == outcomes[0]),
        "the tail push and the eager push count alike: {outcomes:?}"
    );
}
