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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use unet::transport::{LoopConfig, LoopNet};
use unet::{Config, Engine, Endpoint, SendError, TxDesc, TxStatus};

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

/// The sender writes 50,000 bytes of 0x11, pushes the descriptor, waits
/// until the engine has taken it, and at once overwrites the bytes with
/// 0xEE, while another thread keeps the receiver's side busy (replacing its
/// applet in a loop) so that delivery lags behind the engine's transmit.
/// Every message arrives as 0x11 only: the index moved after the last byte
/// was copied.
#[test]
fn a_buffer_is_free_once_the_transmit_index_moves() {
    const LEN: usize = 50_000;
    const ROUNDS: usize = 40;
    let net = LoopNet::new();
    let engine = Engine::new(Box::new(net.attach(addr("10.0.0.1:7000")).unwrap()));
    engine.start(1).unwrap();
    let mut a = engine.create_endpoint(Config::default(), None).unwrap();
    let mut b = engine.create_endpoint(Config::default(), None).unwrap();
    a.set_drive(false);
    b.set_drive(false);
    let ab = a.open_channel(engine.local(), b.id()).unwrap();
    b.open_channel(engine.local(), a.id()).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let (engine, stop, id) = (engine.clone(), stop.clone(), b.id());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // Loading an applet holds the receive side while the
                // endpoint still counts as applet-less.
                engine
                    .set_applet(id, Some(unet::applets::STANDARD))
                    .unwrap();
                engine.set_applet(id, None).unwrap();
            }
        })
    };

    let mut torn = Vec::new();
    for round in 0..ROUNDS {
        a.write_area(0, &[0x11; LEN]).unwrap();
        a.push_tx(TxDesc {
            len: LEN as u32,
            offset: 0,
            chan: ab,
            ..TxDesc::default()
        })
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !a.flush(1000) {
            assert!(Instant::now() < deadline, "the engine never took the descriptor");
        }
        a.write_area(0, &[0xEE; LEN]).unwrap();
        let m = recv_within(&mut b, Duration::from_secs(20)).expect("delivered");
        assert_eq!(m.len(), LEN);
        if let Some(at) = m.iter().position(|&x| x != 0x11) {
            torn.push((round, at));
        }
    }
    stop.store(true, Ordering::Relaxed);
    busy.join().unwrap();
    engine.stop();
    let list: Vec<String> = torn
        .iter()
        .map(|(r, at)| format!("round {r} from byte {at}"))
        .collect();
    assert!(
        torn.is_empty(),
        "{} of {ROUNDS} messages changed after completion: {}",
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
