//! Message integrity and endpoint identity: what an application may rely
//! on when others share its engine.
//!
//! - A transmit descriptor completes only when no byte of its message will
//!   be read again: a sender that overwrites its buffer as soon as the
//!   transmit index moves never changes what the receiver gets, even for a
//!   message between two endpoints of one engine, whose tail is copied
//!   from the sender's buffer area at delivery.
//! - Every message the engine takes is delivered or counted under a reason,
//!   including the frames a transport drops (a full `loop` queue).
//! - Endpoint ids carry a generation: a channel whose peer went away is
//!   closed, sending on it fails with a typed error, and nothing reaches the
//!   endpoint that gets the id's slot next, in this process or through the
//!   daemon.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use unet::transport::{LoopConfig, LoopNet};
use unet::{ChannelOptions, Config, Endpoint, Engine, SendError, TxDesc, TxStatus};

fn addr(s: &str) -> unet::Addr {
    s.parse().unwrap()
}

/// Waits for the next message on `ep` (whose engine runs on its own
/// threads), up to `limit`.
fn recv_within(ep: &mut Endpoint, limit: Duration) -> Option<Vec<u8>> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(m) = ep.recv() {
            return Some(m.to_vec());
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::yield_now();
    }
}

/// Waits until `done` holds, polling; fails with `what` if it does not
/// within `WAIT`, a bound far past any wait of a working engine on a
/// loaded machine: each wait here is for an event, not for time.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    const WAIT: Duration = Duration::from_secs(120);
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "{what} (after {WAIT:?})");
        std::thread::yield_now();
    }
}

/// The sender writes 50,000 bytes of 0x11 and pushes their descriptor
/// while another thread holds the receiver's side busy (replacing its
/// applet in a loop), so that delivery lags behind the engine's take of
/// the descriptor. If the transmit index moves while the receiver's side
/// is held, the sender overwrites the bytes with 0xEE at once; otherwise
/// the holder lets go and the sender overwrites them as soon as the index
/// moves. Every message arrives as 0x11 only: the index moved after the
/// last byte was copied.
///
/// Each round pushes the message on both routes between two endpoints of
/// one engine: alone, it is delivered without a frame (copied under the
/// receiver's lock before its descriptor is taken); behind an 8-byte
/// message to a third endpoint on a checksummed channel, taken in the
/// same pass (the test's own thread drives the engine, and pushes both
/// before it lets it run), it goes as a frame whose tail is read from the
/// sender's buffer area when the frame is delivered, after the descriptor
/// was taken (the route that tears if the index moves at the take).
///
/// Every wait is for an event, so that a loaded machine slows the test and
/// does not fail it: the holder is seen holding (its loop counted) before
/// the push; the engine is seen taking the descriptors (its counter); the
/// holder then holds for `HOLD` more loops of its own, however long those
/// take, unless the index moves first, and then lets go, so that it cannot
/// starve the engine (the earlier form, which held throughout, timed out
/// at load 8-10).
#[test]
fn a_buffer_is_free_once_the_transmit_index_moves() {
    const LEN: usize = 50_000;
    const ROUNDS: usize = 40;
    const HOLD: u64 = 20;
    let net = LoopNet::new();
    let engine = Engine::new(Box::new(net.attach(addr("10.0.0.1:7000")).unwrap()));
    let mut a = engine.create_endpoint(Config::default(), None).unwrap();
    let mut b = engine.create_endpoint(Config::default(), None).unwrap();
    let mut c = engine.create_endpoint(Config::default(), None).unwrap();
    for ep in [&mut a, &mut b, &mut c] {
        ep.set_drive(false);
    }
    let ab = a.open_channel(engine.local(), b.id()).unwrap();
    b.open_channel(engine.local(), a.id()).unwrap();
    let sum = ChannelOptions { checksum: true };
    let ac = a.open_channel_with(engine.local(), c.id(), sum).unwrap();
    c.open_channel_with(engine.local(), a.id(), sum).unwrap();

    let (stop, hold, loops) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    // The engine's driver: polls it whenever the sender does not hold the
    // gate.
    let gate = Arc::new(Mutex::new(()));
    let driver = {
        let (engine, stop, gate) = (engine.clone(), stop.clone(), gate.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                let _g = gate.lock().unwrap();
                if engine.poll() == 0 {
                    std::thread::yield_now();
                }
            }
        })
    };
    let busy = {
        let (engine, id) = (engine.clone(), b.id());
        let (stop, hold, loops) = (stop.clone(), hold.clone(), loops.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                if !hold.load(Ordering::Acquire) {
                    std::thread::park();
                    continue;
                }
                // Loading an applet holds the receive side while the
                // endpoint still counts as applet-less.
                engine
                    .set_applet(id, Some(unet::applets::STANDARD))
                    .unwrap();
                engine.set_applet(id, None).unwrap();
                loops.fetch_add(1, Ordering::Release);
            }
        })
    };

    let mut torn = Vec::new();
    let mut early = 0;
    for round in 0..ROUNDS {
        let framed = round % 2 == 1;
        a.write_area(0, &[0x11; LEN]).unwrap();
        let held = loops.load(Ordering::Acquire);
        hold.store(true, Ordering::Release);
        busy.thread().unpark();
        wait_for("the receiver's side was never held", || {
            loops.load(Ordering::Acquire) > held
        });
        let taken = a.counts().tx_descriptors;
        let pushed = {
            let _g = gate.lock().unwrap();
            if framed {
                a.push_tx(TxDesc {
                    len: 8,
                    offset: LEN as u32,
                    chan: ac,
                    ..TxDesc::default()
                })
                .unwrap();
            }
            a.push_tx(TxDesc {
                len: LEN as u32,
                offset: 0,
                chan: ab,
                ..TxDesc::default()
            })
            .unwrap();
            1 + u64::from(framed)
        };
        wait_for("the engine never took the descriptors", || {
            a.counts().tx_descriptors >= taken + pushed
        });
        let held = loops.load(Ordering::Acquire);
        let mut moved = false;
        wait_for("the receiver's side was never let go", || {
            moved = a.flush(1);
            moved || loops.load(Ordering::Acquire) >= held + HOLD
        });
        if moved {
            // The index moved while the receiver's side was held.
            a.write_area(0, &[0xEE; LEN]).unwrap();
            early += 1;
        }
        hold.store(false, Ordering::Release);
        if !moved {
            wait_for("the engine never completed the descriptors", || a.flush(1));
            a.write_area(0, &[0xEE; LEN]).unwrap();
        }
        let mut m = None;
        wait_for("the message was never delivered", || {
            m = b.recv().map(|m| m.to_vec());
            m.is_some()
        });
        if framed {
            wait_for("the checksummed message was never delivered", || {
                c.recv().is_some()
            });
        }
        let m = m.unwrap();
        assert_eq!(m.len(), LEN);
        if let Some(at) = m.iter().position(|&x| x != 0x11) {
            torn.push((round, at));
        }
    }
    stop.store(true, Ordering::Release);
    busy.thread().unpark();
    busy.join().unwrap();
    driver.join().unwrap();
    let list: Vec<String> = torn
        .iter()
        .map(|(r, at)| format!("round {r} from byte {at}"))
        .collect();
    assert!(
        torn.is_empty(),
        "{} of {ROUNDS} messages changed after completion (odd rounds framed; \
         {early} completed while the receiver's side was held): {}",
        torn.len(),
        list.join(", ")
    );
}

/// Two engines on one `loop` hub; the sender bursts 2,000 messages of 3,000
/// bytes while the receiver does not poll, more than the hub's queue holds
/// (1,024 frames, 4 MiB). Every message is delivered or counted: what the
/// hub dropped shows in the sender's engine counters.
#[test]
fn frames_a_transport_drops_are_counted_by_the_engine() {
    const N: usize = 2000;
    let net = LoopNet::with_config(LoopConfig::default()).unwrap();
    let ea = Engine::new(Box::new(net.attach(addr("10.0.0.1:7000")).unwrap()));
    let eb = Engine::new(Box::new(net.attach(addr("10.0.0.2:7000")).unwrap()));
    let mut a = ea.create_endpoint(Config::default(), None).unwrap();
    let mut b = eb.create_endpoint(Config::default(), None).unwrap();
    let ab = a.open_channel(eb.local(), b.id()).unwrap();
    b.open_channel(ea.local(), a.id()).unwrap();
    let msg = vec![0x5a; 3000];
    for _ in 0..N {
        loop {
            match a.send(ab, &msg) {
                Ok(()) => break,
                Err(SendError::Full) => assert!(a.flush(1_000_000), "sender stuck"),
                Err(e) => panic!("send: {e}"),
            }
        }
    }
    assert!(a.flush(1_000_000));
    let mut received = 0;
    let mut idle = 0;
    while idle < 1000 {
        match b.recv() {
            Some(m) => {
                assert_eq!(m.to_vec(), msg);
                received += 1;
                idle = 0;
            }
            None => idle += 1,
        }
    }
    let (ca, cb) = (ea.counts(), eb.counts());
    let (pa, pb) = (a.counts(), b.counts());
    assert_eq!((pa.tx_descriptors, pa.tx_frames), (N as u64, N as u64));
    assert_eq!(ca.frames_out, N as u64);
    assert!(
        ca.transport_queue_full > 0,
        "the burst was meant to overflow the hub's queue"
    );
    assert_eq!(
        ca.frames_out,
        cb.frames_in + ca.transport_no_route + ca.transport_queue_full,
        "every frame handed to the hub arrived or was counted by it"
    );
    assert_eq!(cb.frames_in, pb.rx_delivered);
    assert_eq!(received, pb.rx_delivered);
    assert_eq!(
        received + ca.dropped() + cb.dropped(),
        N as u64,
        "every message delivered or counted under a reason"
    );
}

/// Waits until `cond` holds, up to `limit`.
fn until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !cond() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Across the daemon: a victim's connection and its peer's; the peer's
/// connection closes; an attacker connects and gets the peer's slot. The
/// victim's channel is closed (its sends fail with a typed error, and the
/// engine says which channels closed), and nothing passes between the
/// victim and the attacker either way, even with the widest filter the
/// attacker may install.
#[test]
fn a_reused_endpoint_slot_is_never_taken_for_its_former_holder() {
    use unet::client::Client;
    use unet::frame::endpoint_slot;
    let net = LoopNet::new();
    let engine = Engine::new(Box::new(net.attach(addr("10.0.0.1:7000")).unwrap()));
    engine.start(1).unwrap();
    let path = std::env::temp_dir().join(format!("unet-integrity-{}.sock", std::process::id()));
    let server = unet::daemon::serve(engine.clone(), &path).unwrap();
    let local = engine.local();
    let recv_one = |ep: &mut Endpoint| recv_within(ep, Duration::from_secs(10));

    let victim = Client::connect(&path).unwrap();
    let peer = Client::connect(&path).unwrap();
    let mut v = victim.create_endpoint(Config::default(), None).unwrap();
    let mut p = peer.create_endpoint(Config::default(), None).unwrap();
    let vp = v.open_channel(local, p.id()).unwrap();
    let pv = p.open_channel(local, v.id()).unwrap();
    v.send(vp, b"hello, peer").unwrap();
    assert_eq!(recv_one(&mut p).unwrap(), b"hello, peer");
    p.send(pv, &[0x42; 3000]).unwrap();
    assert_eq!(recv_one(&mut v).unwrap(), vec![0x42; 3000]);

    // The peer's connection closes (its endpoint with it).
    let gone = p.id();
    drop(p);
    drop(peer);
    assert!(
        until(Duration::from_secs(10), || engine.port(gone).is_none()),
        "the peer's endpoint was not reclaimed"
    );

    let attacker = Client::connect(&path).unwrap();
    let mut x = attacker.create_endpoint(Config::default(), None).unwrap();
    assert_eq!(
        endpoint_slot(x.id()),
        endpoint_slot(gone),
        "the attacker holds the peer's slot"
    );
    assert_ne!(x.id(), gone, "under a new generation");
    let xv = x.open_channel(local, v.id()).unwrap();
    // The widest filter the daemon lets it have: every UDP frame, above
    // every channel filter (confined to frames addressed to it).
    x.install_filter(xv, "udp", 1000).unwrap();

    // The victim's channel is closed: its sends fail with a typed error.
    assert_eq!(
        v.send(vp, b"for the peer"),
        Err(SendError::ChannelClosed { chan: vp })
    );
    assert!(v.is_closed(vp));

    // The attacker's messages to the victim match nothing there.
    let unmatched = engine.counts().unmatched;
    for len in [10, 600, 5000] {
        x.send(xv, &vec![0xee; len]).unwrap();
    }
    assert!(
        until(Duration::from_secs(10), || engine.counts().unmatched
            >= unmatched + 3),
        "the attacker's frames were neither delivered nor counted"
    );
    std::thread::sleep(Duration::from_millis(50));
    assert!(v.recv().is_none(), "the victim took the attacker's message");
    assert!(x.recv().is_none(), "the attacker got a message");
    let c = v.counts();
    assert_eq!((c.rx_delivered, c.tx_closed), (1, 0));

    drop((v, x));
    drop((victim, attacker));
    server.shutdown();
    engine.stop();
}

/// The same between two engines, where the victim's engine cannot learn
/// that the peer went away: the generations in the frames keep the
/// attacker, who holds the peer's slot on the peer's engine, from sending
/// as the peer and from receiving what the victim sends to the peer.
#[test]
fn generations_in_the_frame_separate_a_remote_slots_holders() {
    use unet::frame::endpoint_slot;
    let net = LoopNet::new();
    let ea = Engine::new(Box::new(net.attach(addr("10.0.0.1:7000")).unwrap()));
    let eb = Engine::new(Box::new(net.attach(addr("10.0.0.2:7000")).unwrap()));
    let mut v = ea.create_endpoint(Config::default(), None).unwrap();
    let mut p = eb.create_endpoint(Config::default(), None).unwrap();
    let vp = v.open_channel(eb.local(), p.id()).unwrap();
    let pv = p.open_channel(ea.local(), v.id()).unwrap();
    p.send(pv, b"from the peer").unwrap();
    assert_eq!(v.recv().unwrap().to_vec(), b"from the peer");
    let gone = p.id();
    drop(p);
    let mut x = eb.create_endpoint(Config::default(), None).unwrap();
    assert_eq!(endpoint_slot(x.id()), endpoint_slot(gone));
    let xv = x.open_channel(ea.local(), v.id()).unwrap();
    let xv2 = x
        .open_channel_with(ea.local(), v.id(), unet::ChannelOptions { checksum: true })
        .unwrap();

    let (ua, ub) = (ea.counts().unmatched, eb.counts().unmatched);
    x.send(xv, b"as the peer").unwrap();
    x.send(xv2, &[0xee; 2000]).unwrap();
    assert!(v.recv().is_none());
    assert_eq!(ea.counts().unmatched, ua + 2);
    // The victim still sends (its engine cannot know), but what it sends
    // reaches no one on the peer's engine.
    v.send(vp, b"for the peer").unwrap();
    assert!(x.recv().is_none());
    assert_eq!(eb.counts().unmatched, ub + 1);
    assert_eq!(x.counts().rx_delivered, 0);
}

/// Within one engine, closing an endpoint closes the channels of the
/// others whose peer it was: a descriptor pushed on one completes as
/// `Closed` and is counted, the engine names the closed channels, and a
/// filter cannot be added to it.
#[test]
fn a_channel_whose_peer_closed_is_closed() {
    let net = LoopNet::new();
    let e = Engine::new(Box::new(net.attach(addr("10.0.0.1:7000")).unwrap()));
    let mut v = e.create_endpoint(Config::default(), None).unwrap();
    let p = e.create_endpoint(Config::default(), None).unwrap();
    let vp = v.open_channel(e.local(), p.id()).unwrap();
    let other = e.create_endpoint(Config::default(), None).unwrap();
    let vo = v.open_channel(e.local(), other.id()).unwrap();
    let gone = p.id();
    drop(p);
    assert_eq!(e.closed_channels(v.id()).unwrap(), vec![vp]);
    assert!(v.is_closed(vp) && !v.is_closed(vo));
    assert!(matches!(
        v.install_filter(vp, "udp", 1),
        Err(unet::EngineError::ChannelClosed { chan, .. }) if chan == vp
    ));
    assert!(
        e.open_channel(v.id(), e.local(), gone, Default::default())
            .is_err()
    );
    // A descriptor the endpoint did not check (as a hostile or careless
    // application would push it) completes as Closed.
    let n = v.tx_pushed();
    v.write_area(0, b"late").unwrap();
    let raw = unet::shm::Segment::map(
        v.segment()
            .fd()
            .try_clone()
            .expect("duplicate the endpoint's memfd"),
    )
    .unwrap();
    let (txq, _, _) = unet::shm::queues(&Arc::new(raw), v.layout()).unwrap();
    let mut prod = unet::ring::Producer::new(txq);
    assert_eq!(
        prod.push(TxDesc {
            len: 4,
            offset: 0,
            chan: vp,
            ..TxDesc::default()
        }),
        Ok(true)
    );
    v.poll_engine();
    assert_eq!(v.tx_status(n), TxStatus::Closed);
    assert_eq!(v.counts().tx_closed, 1);
    assert_eq!(v.counts().tx_frames, 0);
}
