//! A pass over an applet's transmit descriptors: the frames each `doTx`
//! makes for endpoints of the same engine are delivered before the next
//! descriptor's `doTx` runs, as a network interface finishes one
//! descriptor before it takes the next (docs/unet.md, "Transmit"). Between
//! two threads this lets the receiver start on a burst's first message
//! while the sender makes the rest (burst-25, docs/benchmarks.md).
//!
//! | property | test |
//! |---|---|
//! | each `doTx`'s frames are delivered before the next `doTx` runs | [`each_do_tx_is_delivered_before_the_next_runs`] |
//! | a pass's messages to another thread's applet arrive in order, or are counted | [`a_pass_to_another_threads_applet_arrives_in_order_or_is_counted`] |
//! | `doTx`'s frames to another engine leave by the transport, those to this engine are delivered here, on every kind of channel | [`do_tx_frames_reach_this_engine_and_another_on_every_kind_of_channel`] |
//! | an applet removed during a pass leaves the pass's rest to the path without one | [`an_applet_removed_during_a_pass_leaves_the_rest_to_the_path_without_one`] |
#![cfg(not(loom))]

mod message;
use message::message;
use unet::engine::Budgets;
use unet::transport::LoopNet;
use unet::{ChannelOptions, Config, Endpoint, Engine, applets};

fn engine(budgets: Budgets) -> Engine {
    let net = LoopNet::new();
    Engine::with_budgets(
        Box::new(net.attach("10.0.0.1:7000".parse().unwrap()).unwrap()),
        budgets,
    )
}

/// PingPong on both endpoints of one thread, the initiator with `limit`
/// 1: each `doTx` resets its `rounds` to 0 and sends a ping, which the
/// other endpoint echoes; the echo makes `rounds` 1 and delivers it.
/// Three descriptors taken in one pass therefore deliver 1, 1, 1 if each
/// `doTx`'s ping (and its echo) is delivered before the next `doTx`; were
/// the pass's pings delivered only after its last `doTx`, the three
/// echoes would count on from one reset: 1, 2, 3.
#[test]
fn each_do_tx_is_delivered_before_the_next_runs() {
    let e = engine(Budgets::default());
    let mut a = e
        .create_endpoint(Config::default(), Some(applets::PING_PONG))
        .unwrap();
    let mut b = e
        .create_endpoint(Config::default(), Some(applets::PING_PONG))
        .unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    b.open_channel(e.local(), a.id()).unwrap();
    e.with_applet(a.id(), |ap| ap.set_static_int("limit", 1).unwrap())
        .unwrap();
    // Both endpoints' applications run on this thread: their applets'
    // frames are delivered at once, not through an inbox.
    assert!(b.recv().is_none());
    a.set_drive(false);
    for i in 0..3u8 {
        a.send(ab, &[i; 40]).unwrap();
    }
    a.set_drive(true);
    a.poll_engine();
    let got: Vec<Vec<u8>> = std::iter::from_fn(|| a.recv().map(|m| m.to_vec())).collect();
    assert_eq!(got, vec![vec![0, 0, 0, 1]; 3]);
    assert_eq!(a.counts().applet_traps + b.counts().applet_traps, 0);
}

/// The standard applet on both endpoints, the receiver's on another
/// thread (its frames wait in its inbox) with an inbox of 4 frames: of
/// passes of 10 messages, each message arrives once and in order, or is
/// counted as refused by the full inbox, and nothing else.
#[test]
fn a_pass_to_another_threads_applet_arrives_in_order_or_is_counted() {
    let e = engine(Budgets {
        inbox_frames: 4,
        ..Budgets::default()
    });
    let mut a = e
        .create_endpoint(Config::default(), Some(applets::STANDARD))
        .unwrap();
    let mut b = e
        .create_endpoint(Config::default(), Some(applets::STANDARD))
        .unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    b.open_channel(e.local(), a.id()).unwrap();
    const PASSES: u32 = 200;
    const PER_PASS: u32 = 10;
    let recv = std::thread::spawn(move || {
        let mut got = Vec::new();
        let start = std::time::Instant::now();
        loop {
            while let Some(m) = b.recv() {
                let v = m.to_vec();
                got.push(u32::from_le_bytes(v[..4].try_into().unwrap()));
                assert!(v[4..].iter().all(|&x| x == v[0]), "intact");
            }
            let refused = b.counts().rx_queue_full;
            if got.len() as u64 + refused == u64::from(PASSES * PER_PASS) {
                return (got, refused);
            }
            assert!(
                start.elapsed().as_secs() < 20,
                "stalled: {} {:?}",
                got.len(),
                b.counts()
            );
            std::thread::yield_now();
        }
    });
    for pass in 0..PASSES {
        a.set_drive(false);
        for i in 0..PER_PASS {
            let seq = pass * PER_PASS + i;
            let mut m = vec![seq as u8; 600];
            m[..4].copy_from_slice(&seq.to_le_bytes());
            a.send(ab, &m).unwrap();
        }
        a.set_drive(true);
        a.poll_engine();
    }
    let (got, refused) = recv.join().unwrap();
    assert!(got.windows(2).all(|w| w[0] < w[1]), "in order, once each");
    assert_eq!(got.len() as u64 + refused, u64::from(PASSES * PER_PASS));
    assert!(!got.is_empty());
}

/// The standard applet's `doTx` on an endpoint with four channels: plain
/// and checksummed, each to an endpoint of its own engine and to one of
/// another engine on the same `loop` hub. A frame on a plain channel to
/// this engine is delivered with the channel's kept verdict without its
/// destination being read from it; every other frame is delivered or sent
/// by its destination. Each message arrives once, intact, on its own
/// receiver, and the counters add up: every frame made, the remote ones
/// out through the transport, nothing unmatched or lost.
#[test]
fn do_tx_frames_reach_this_engine_and_another_on_every_kind_of_channel() {
    let net = LoopNet::new();
    let ea = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    let eb = Engine::new(Box::new(
        net.attach("10.0.0.2:7000".parse().unwrap()).unwrap(),
    ));
    let mut a = ea
        .create_endpoint(Config::default(), Some(applets::STANDARD))
        .unwrap();
    let mut here = ea.create_endpoint(Config::default(), None).unwrap();
    let mut there = eb.create_endpoint(Config::default(), None).unwrap();
    let summed = ChannelOptions { checksum: true };
    let plain = ChannelOptions::default();
    // (channel, receives on `there`)
    let chans = [
        (
            a.open_channel_with(ea.local(), here.id(), plain).unwrap(),
            false,
        ),
        (
            a.open_channel_with(ea.local(), here.id(), summed).unwrap(),
            false,
        ),
        (
            a.open_channel_with(eb.local(), there.id(), plain).unwrap(),
            true,
        ),
        (
            a.open_channel_with(eb.local(), there.id(), summed).unwrap(),
            true,
        ),
    ];
    here.open_channel(ea.local(), a.id()).unwrap();
    there.open_channel(ea.local(), a.id()).unwrap();
    fn next(ep: &mut Endpoint) -> Vec<u8> {
        for _ in 0..100_000 {
            if let Some(m) = ep.recv() {
                return m.to_vec();
            }
        }
        panic!("no message arrived");
    }
    let lens = [0, 1, 40, 56, 57, 1000, 4096, 8000];
    let mut remote = 0u64;
    for (i, &len) in lens.iter().enumerate() {
        for (k, &(chan, far)) in chans.iter().enumerate() {
            let m = message((i * chans.len() + k) as u64, len);
            a.send(chan, &m).unwrap();
            let got = if far {
                remote += 1;
                next(&mut there)
            } else {
                next(&mut here)
            };
            assert_eq!(got, m, "{len} bytes on channel {k}");
        }
    }
    assert!(here.recv().is_none() && there.recv().is_none(), "once each");
    let n = (lens.len() * chans.len()) as u64;
    let (ac, ec) = (a.counts(), ea.counts());
    assert_eq!((ac.tx_descriptors, ac.tx_frames), (n, n));
    assert_eq!((ac.applet_traps, ac.applet_drops), (0, 0));
    assert_eq!((ec.frames_out, ec.send_errors), (remote, 0));
    assert_eq!((ec.unmatched, ec.malformed), (0, 0));
    assert_eq!(here.counts().rx_delivered, n - remote);
    assert_eq!(there.counts().rx_delivered, remote);
    assert_eq!(eb.counts().unmatched, 0);
}

/// A pass of four descriptors whose first makes the sender's applet trap
/// (RawUnet's `doTx` on a message longer than its 4 KiB `TxBuf`) under
/// `UninstallAfter(1)`: the applet is removed during the pass, and the
/// same pass (one poll) delivers its other three messages, in order, as
/// an endpoint without an applet delivers them.
#[test]
fn an_applet_removed_during_a_pass_leaves_the_rest_to_the_path_without_one() {
    let e = engine(Budgets::default());
    let mut a = e
        .create_endpoint(Config::default(), Some(applets::SIMPLE))
        .unwrap();
    let mut b = e.create_endpoint(Config::default(), None).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    b.open_channel(e.local(), a.id()).unwrap();
    e.set_trap_policy(a.id(), unet::TrapPolicy::UninstallAfter(1))
        .unwrap();
    let msgs: Vec<Vec<u8>> = [5000, 40, 1000, 57]
        .iter()
        .enumerate()
        .map(|(i, &len)| message(i as u64, len))
        .collect();
    a.set_drive(false);
    for m in &msgs {
        a.send(ab, m).unwrap();
    }
    a.set_drive(true);
    a.poll_engine();
    assert!(!e.has_applet(a.id()));
    let got: Vec<Vec<u8>> = std::iter::from_fn(|| b.recv().map(|m| m.to_vec())).collect();
    assert_eq!(got, msgs[1..]);
    let c = a.counts();
    assert_eq!((c.tx_descriptors, c.applet_traps, c.tx_frames), (4, 1, 3));
    assert_eq!(b.counts().rx_delivered, 3);
}
