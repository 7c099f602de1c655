//! An applet's inbox under concurrency: frames for an endpoint's applet
//! that arrive on other threads wait in a lock-free queue until the
//! endpoint's own thread runs them. Many threads push at once, the
//! endpoint's thread pops, and the endpoint may be removed in the middle:
//! every frame is run once, in each sender's order, or counted under
//! exactly one reason.
//!
//! | property | test |
//! |---|---|
//! | frames from many threads at once arrive once, in order, or are counted | [`frames_from_many_threads_arrive_once_in_order_or_are_counted`] |
//! | frames racing the endpoint's removal are each counted once | [`frames_racing_the_endpoints_removal_are_each_counted_once`] |
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use unet::engine::Budgets;
use unet::transport::LoopNet;
use unet::{Config, Engine, SendError, applets};

/// An engine on `loop` whose applets' inboxes hold few frames, so that the
/// senders fill them.
fn engine(inbox_frames: usize) -> Engine {
    let net = LoopNet::new();
    Engine::with_budgets(
        Box::new(net.attach("10.0.0.1:7000".parse().unwrap()).unwrap()),
        Budgets {
            inbox_frames,
            ..Budgets::default()
        },
    )
}

const SENDERS: u64 = 4;

#[test]
fn frames_from_many_threads_arrive_once_in_order_or_are_counted() {
    let per_sender: u64 = 20_000;
    let e = engine(32);
    // The receiver runs the standard applet: frames its senders deliver on
    // their own threads wait in its inbox for its thread.
    let mut b = e
        .create_endpoint(Config::default(), Some(applets::STANDARD))
        .unwrap();
    let mut senders = Vec::new();
    for _ in 0..SENDERS {
        let mut a = e.create_endpoint(Config::default(), None).unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        senders.push((a, ab));
    }
    // One channel of the receiver per sender, in the senders' order: a
    // message's channel names its sender.
    let chans: Vec<u16> = senders
        .iter()
        .map(|(a, _)| b.open_channel(e.local(), a.id()).unwrap())
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    // A window over all senders: they wait while more than `WINDOW`
    // messages are on their way (U-Net has no flow control; without one a
    // receiver on a loaded machine would see few of them). The senders
    // race past it a little, so the inbox still fills now and then.
    const WINDOW: u64 = 48;
    let (sent_all, got_all) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let threads: Vec<_> = senders
        .into_iter()
        .map(|(mut a, ab)| {
            let (sent_all, got_all) = (sent_all.clone(), got_all.clone());
            std::thread::spawn(move || {
                for seq in 0..per_sender {
                    while sent_all.load(Ordering::Relaxed)
                        > got_all.load(Ordering::Relaxed) + WINDOW
                    {
                        std::thread::yield_now();
                    }
                    let mut msg = [0u8; 16];
                    msg[..8].copy_from_slice(&seq.to_le_bytes());
                    loop {
                        match a.send(ab, &msg) {
                            Ok(()) => break,
                            Err(SendError::Full) => std::thread::yield_now(),
                            Err(err) => panic!("{err}"),
                        }
                    }
                    sent_all.fetch_add(1, Ordering::Relaxed);
                }
                assert!(a.flush(1_000_000), "the sender's queue drained");
                a
            })
        })
        .collect();
    let mut next = vec![0u64; SENDERS as usize];
    let mut got = 0u64;
    let mut quiet = Instant::now();
    loop {
        match b.recv().map(|m| (m.chan(), m.to_vec())) {
            Some((chan, v)) => {
                let who = chans
                    .iter()
                    .position(|&c| c == chan)
                    .expect("a known channel");
                assert_eq!(v.len(), 16);
                let seq = u64::from_le_bytes(v[..8].try_into().unwrap());
                assert!(
                    seq >= next[who],
                    "sender {who}: message {seq} after {}: reordered or duplicated",
                    next[who]
                );
                next[who] = seq + 1;
                got += 1;
                got_all.fetch_add(1, Ordering::Relaxed);
                quiet = Instant::now();
            }
            None => {
                // Messages counted as dropped open the window too.
                let c = b.counts();
                got_all.store(
                    got + c.rx_queue_full + c.rx_no_buffer + c.applet_drops,
                    Ordering::Relaxed,
                );
                if !done.load(Ordering::Acquire) && threads.iter().all(|t| t.is_finished()) {
                    done.store(true, Ordering::Release);
                    quiet = Instant::now();
                }
                if done.load(Ordering::Acquire) && quiet.elapsed() > Duration::from_millis(200) {
                    break;
                }
                std::thread::yield_now();
            }
        }
    }
    let senders: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let sent: u64 = senders
        .iter()
        .map(|a| e.port(a.id()).unwrap().counts().tx_frames)
        .sum();
    assert_eq!(sent, SENDERS * per_sender, "every message was made a frame");
    let c = b.counts();
    assert_eq!(c.applet_traps, 0);
    let counted = c.rx_queue_full + c.rx_no_buffer + c.applet_drops;
    assert_eq!(
        got + counted,
        sent,
        "{got} received + {counted} counted drops != {sent} sent"
    );
    let engine = e.counts();
    assert_eq!((engine.unmatched, engine.closed), (0, 0));
    assert!(got > sent / 2, "only {got} of {sent} arrived");
    eprintln!("{got} run through the inbox, {counted} counted as a full inbox or queue");
}

#[test]
fn frames_racing_the_endpoints_removal_are_each_counted_once() {
    let e = engine(64);
    let start = Instant::now();
    let mut rounds = 0;
    // Rounds until at least 20 and a second have passed: the removal lands
    // at a different point of the senders' pushes each time.
    while rounds < 20 || start.elapsed() < Duration::from_secs(1) {
        rounds += 1;
        let b = e
            .create_endpoint(Config::default(), Some(applets::STANDARD))
            .unwrap();
        let port = e.port(b.id()).unwrap();
        let before = e.counts();
        let stop = Arc::new(AtomicBool::new(false));
        let threads: Vec<_> = (0..SENDERS)
            .map(|_| {
                let mut a = e.create_endpoint(Config::default(), None).unwrap();
                let ab = a.open_channel(e.local(), b.id()).unwrap();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let id = a.id();
                    while !stop.load(Ordering::Relaxed) {
                        match a.send(ab, &[7u8; 24]) {
                            Ok(()) | Err(SendError::Full) => {}
                            Err(SendError::ChannelClosed { .. }) => break,
                            Err(err) => panic!("{err}"),
                        }
                    }
                    a.flush(1_000_000);
                    (id, a)
                })
            })
            .collect();
        // Nobody drains the receiver's inbox until it is removed: it fills,
        // and the senders' frames race the removal's emptying of it.
        std::thread::sleep(Duration::from_millis(2 + rounds % 5));
        drop(b);
        stop.store(true, Ordering::Relaxed);
        let senders: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let sent: u64 = senders
            .iter()
            .map(|(id, _)| e.port(*id).unwrap().counts().tx_frames)
            .sum();
        let c = port.counts();
        let after = e.counts();
        let closed = after.closed - before.closed;
        let unmatched = after.unmatched - before.unmatched;
        let counted = c.rx_delivered
            + c.rx_queue_full
            + c.rx_no_buffer
            + c.applet_drops
            + c.applet_traps
            + closed
            + unmatched;
        assert_eq!(
            counted, sent,
            "round {rounds}: {sent} frames sent, {counted} accounted for \
             ({} delivered, {} refused by a full inbox or queue, {closed} lost to the closing, \
             {unmatched} unmatched)",
            c.rx_delivered, c.rx_queue_full
        );
        drop(senders);
    }
}
