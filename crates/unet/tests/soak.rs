//! A randomized soak of two engines on one `loop` hub: client threads
//! create and close endpoints, open channels to each other's endpoints
//! (across the engines too), send messages of random sizes (many over 512
//! bytes, some overwritten the moment the engine completes them), push
//! malformed descriptors, send on channels whose peer closed, install and
//! remove filters, and ask for things that do not exist, for a bounded time
//! (`UNET_SOAK_SECS`, default 5 s; CI runs 60).
//!
//! Checked throughout: every message that arrives is whole and addressed
//! to the endpoint that got it (its header names the destination id and
//! the source id, and a checksum covers it all). Checked at the end, once
//! all is quiet: every descriptor the engines took is accounted for (sent,
//! rejected or closed), and every frame sent is delivered or counted under
//! a reason at an endpoint, an engine or the hub.
//!
//! Seeded from the clock (or `UNET_SOAK_SEED`); the seed is printed on
//! failure.
#![cfg(not(loom))]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use unet::engine::Port;
use unet::frame::{endpoint_generation, endpoint_slot};
use unet::transport::LoopNet;
use unet::{Config, Endpoint, Engine, SendError, TxDesc, TxStatus};

const MAGIC: u32 = 0x5041_4b31;
const HDR: usize = 28;

fn config() -> Config {
    Config {
        buffers: 64,
        buffer_size: 2048,
        tx_depth: 32,
        rx_depth: 64,
        free_depth: 64,
    }
}

/// A message: magic, destination id, source id, sequence, length, a
/// checksum of everything else, then a body derived from the rest.
fn message(dst: u32, src: u32, seq: u64, len: usize) -> Vec<u8> {
    let len = len.max(HDR);
    let mut m = vec![0u8; len];
    m[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    m[4..8].copy_from_slice(&dst.to_le_bytes());
    m[8..12].copy_from_slice(&src.to_le_bytes());
    m[12..20].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in m[HDR..].iter_mut().enumerate() {
        *b = (seq as usize ^ i.wrapping_mul(31)) as u8 ^ src as u8;
    }
    let sum = checksum(&m);
    m[20..28].copy_from_slice(&sum.to_le_bytes());
    m
}

fn checksum(m: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ m.len() as u64;
    for (i, &b) in m.iter().enumerate() {
        if (20..28).contains(&i) {
            continue;
        }
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// What is wrong with a received message, if anything: `me` got it.
fn check(m: &[u8], me: u32) -> Result<(u32, u64), String> {
    if m.len() < HDR || m[0..4] != MAGIC.to_le_bytes() {
        return Err(format!("a message of {} bytes without the magic", m.len()));
    }
    let word = |a: usize| u32::from_le_bytes(m[a..a + 4].try_into().unwrap());
    let (dst, src) = (word(4), word(8));
    let seq = u64::from_le_bytes(m[12..20].try_into().unwrap());
    let sum = u64::from_le_bytes(m[20..28].try_into().unwrap());
    if checksum(m) != sum || message(dst, src, seq, m.len()) != m {
        return Err(format!(
            "message {seq} of {} bytes from {src} to {dst} is torn",
            m.len()
        ));
    }
    if dst != me {
        return Err(format!(
            "message {seq} from {src} addressed to {dst} reached {me}"
        ));
    }
    Ok((src, seq))
}

/// An endpoint a client thread owns, with its channels: tag -> peer id.
struct Mine {
    ep: Endpoint,
    /// The engine it lives on: ids are unique per engine only, so the live
    /// list is keyed by both.
    engine: usize,
    /// Its port in the engine, for its counts.
    port: Arc<Port>,
    chans: HashMap<u16, u32>,
    /// Extra filters installed: (channel, filter).
    filters: Vec<(u16, dpf::FilterId)>,
    /// Whether an extra filter was ever installed (frames may then arrive
    /// on a channel other than their sender's).
    rerouted: bool,
}

struct World {
    engines: Vec<Engine>,
    /// Live endpoints anyone may open a channel to: (engine index, id).
    live: Mutex<Vec<(usize, u32)>>,
    /// Every port not yet settled, for the final counts.
    ports: Mutex<Vec<Arc<Port>>>,
    /// Ports of endpoints closed lately: their counters may still move
    /// while frames already in flight to them are counted.
    closing: Mutex<std::collections::VecDeque<Arc<Port>>>,
    /// The final counts of ports closed long ago. Keeping the ports
    /// themselves would keep each one's memfd and mapping open to the end,
    /// and a long soak would run out of file descriptors.
    settled: Mutex<Vec<unet::PortCounts>>,
    stop: AtomicBool,
    received: AtomicU64,
    sent: AtomicU64,
    failure: Mutex<Option<String>>,
}

impl World {
    /// Moves a closed endpoint's port from the live list to the closing
    /// queue; the oldest of more than 64 closing ports (closed long enough
    /// ago that nothing in flight can still reach it) leaves only its
    /// counts behind.
    fn settle(&self, port: Arc<Port>) {
        self.ports
            .lock()
            .unwrap()
            .retain(|p| !Arc::ptr_eq(p, &port));
        let mut closing = self.closing.lock().unwrap();
        closing.push_back(port);
        if closing.len() > 64 {
            let old = closing.pop_front().unwrap();
            self.settled.lock().unwrap().push(old.counts());
        }
    }

    fn fail(&self, what: String) {
        let mut f = self.failure.lock().unwrap();
        if f.is_none() {
            *f = Some(what);
        }
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn flush(ep: &mut Endpoint) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ep.flush(1000) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::yield_now();
    }
    true
}

fn drain(w: &World, m: &mut Mine) {
    let me = m.ep.id();
    while let Some(msg) = m.ep.recv() {
        let chan = msg.chan();
        let bytes = msg.to_vec();
        drop(msg);
        match check(&bytes, me) {
            Ok((src, _)) => {
                w.received.fetch_add(1, Ordering::Relaxed);
                if !m.rerouted && m.chans.get(&chan) != Some(&src) {
                    w.fail(format!(
                        "endpoint {me} got a message from {src} on channel {chan}, which is not its channel to {src}"
                    ));
                }
            }
            Err(e) => w.fail(e),
        }
    }
}

fn client(w: &World, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut mine: Vec<Mine> = Vec::new();
    let mut seq = 0u64;
    while !w.stop.load(Ordering::Relaxed) {
        let op = rng.random_range(0..100);
        if mine.is_empty() || (op < 4 && mine.len() < 4) {
            let e = rng.random_range(0..w.engines.len());
            let mut ep = w.engines[e].create_endpoint(config(), None).unwrap();
            ep.set_drive(rng.random_bool(0.5));
            let port = w.engines[e].port(ep.id()).unwrap();
            w.ports.lock().unwrap().push(port.clone());
            w.live.lock().unwrap().push((e, ep.id()));
            mine.push(Mine {
                ep,
                engine: e,
                port,
                chans: HashMap::new(),
                filters: Vec::new(),
                rerouted: false,
            });
            continue;
        }
        let k = rng.random_range(0..mine.len());
        match op {
            // Close an endpoint (after its last messages are taken).
            4..=6 => {
                let mut m = mine.swap_remove(k);
                if !flush(&mut m.ep) {
                    w.fail(format!("endpoint {} never drained", m.ep.id()));
                }
                drain(w, &mut m);
                let key = (m.engine, m.ep.id());
                w.live.lock().unwrap().retain(|&live| live != key);
                let port = m.port.clone();
                drop(m);
                w.settle(port);
            }
            // Open a channel to someone's live endpoint.
            7..=14 => {
                let target = {
                    let live = w.live.lock().unwrap();
                    live[rng.random_range(0..live.len())]
                };
                let m = &mut mine[k];
                let at = w.engines[target.0].local();
                if let Ok(tag) = m.ep.open_channel(at, target.1) {
                    m.chans.insert(tag, target.1);
                }
            }
            // An extra filter, confined to frames addressed to this
            // endpoint; or remove one.
            15..=17 => {
                let m = &mut mine[k];
                let id = m.ep.id();
                if let Some(&tag) = m.chans.keys().next() {
                    let text = format!(
                        "udp and udp[8:2] = {} and udp[14:2] = {} and udp[24:1] = {}",
                        endpoint_slot(id),
                        endpoint_generation(id),
                        rng.random::<u8>()
                    );
                    if let Ok(f) = m.ep.install_filter(tag, &text, rng.random_range(1..10)) {
                        m.filters.push((tag, f));
                        m.rerouted = true;
                    }
                }
            }
            18..=19 => {
                let m = &mut mine[k];
                if let Some((tag, f)) = m.filters.pop()
                    && m.ep.remove_filter(f).is_err()
                    && !m.ep.is_closed(tag)
                {
                    w.fail(format!(
                        "filter {} of channel {tag}, which is open, could not be removed",
                        f.0
                    ));
                }
            }
            // Illegal requests: each is refused, nothing changes.
            20..=23 => {
                let m = &mut mine[k];
                assert!(m.ep.install_filter(60000, "udp", 1).is_err());
                assert!(m.ep.remove_filter(dpf::FilterId(u64::MAX)).is_err());
                assert!(m.ep.set_applet(Some(b"not a class file")).is_err());
                assert!(m.ep.install_filter(0, "udp and (", 1).is_err());
                let at = m.ep.engine().expect("in this process").local();
                assert!(m.ep.open_channel(at, 0xffff_0000 | 4000).is_err());
                // A malformed descriptor: rejected and counted.
                let bad = TxDesc {
                    len: u32::MAX,
                    offset: 0,
                    chan: 0,
                    ..TxDesc::default()
                };
                let _ = m.ep.push_tx(bad);
            }
            // Send on a random channel of an endpoint, sometimes
            // overwriting the buffer as soon as the engine completes it.
            _ => {
                let m = &mut mine[k];
                let Some((&tag, &peer)) = m
                    .chans
                    .iter()
                    .nth(rng.random_range(0..m.chans.len().max(1)))
                else {
                    continue;
                };
                let len = match rng.random_range(0..4) {
                    0 => rng.random_range(HDR..=56),
                    1 => rng.random_range(57..=512),
                    2 => rng.random_range(513..=4096),
                    _ => rng.random_range(4097..=m.ep.max_message()),
                };
                seq += 1;
                let msg = message(peer, m.ep.id(), seq, len);
                if rng.random_bool(0.3) {
                    // In place at offset 0, overwritten once completed.
                    if !flush(&mut m.ep) {
                        w.fail("a transmit queue never drained".into());
                        break;
                    }
                    m.ep.write_area(0, &msg).unwrap();
                    let n = m.ep.tx_pushed();
                    match m.ep.push_tx(TxDesc {
                        len: msg.len() as u32,
                        offset: 0,
                        chan: tag,
                        ..TxDesc::default()
                    }) {
                        Ok(()) => {
                            if !flush(&mut m.ep) {
                                w.fail("a transmit queue never drained".into());
                                break;
                            }
                            m.ep.write_area(0, &vec![0xee; msg.len()]).unwrap();
                            if m.ep.tx_status(n) == TxStatus::Sent {
                                w.sent.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        // Its peer went away; messages it sent before may
                        // still be waiting here, so the channel stays known.
                        Err(SendError::ChannelClosed { .. }) => {}
                        Err(_) => {}
                    }
                } else {
                    match m.ep.send(tag, &msg) {
                        Ok(()) => {}
                        // Its peer went away; messages it sent before may
                        // still be waiting here, so the channel stays known.
                        Err(SendError::ChannelClosed { .. }) => {}
                        Err(SendError::Full) => {
                            m.ep.poll_engine();
                        }
                        Err(e) => w.fail(format!("send: {e}")),
                    }
                }
            }
        }
        for m in mine.iter_mut() {
            drain(w, m);
        }
    }
    for mut m in mine {
        if !flush(&mut m.ep) {
            w.fail(format!("endpoint {} never drained", m.ep.id()));
        }
        drain(w, &mut m);
    }
}

#[test]
fn random_clients_never_see_a_torn_or_misdelivered_message_and_every_loss_is_counted() {
    let secs: u64 = std::env::var("UNET_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let seed: u64 = std::env::var("UNET_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let net = LoopNet::new();
    let engines: Vec<Engine> = ["10.0.0.1:7000", "10.0.0.2:7000"]
        .iter()
        .map(|a| Engine::new(Box::new(net.attach(a.parse().unwrap()).unwrap())))
        .collect();
    for e in &engines {
        e.start(1).unwrap();
    }
    let w = Arc::new(World {
        engines,
        live: Mutex::new(Vec::new()),
        ports: Mutex::new(Vec::new()),
        closing: Mutex::new(std::collections::VecDeque::new()),
        settled: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
        received: AtomicU64::new(0),
        sent: AtomicU64::new(0),
        failure: Mutex::new(None),
    });
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let w = w.clone();
            std::thread::spawn(move || client(&w, seed.wrapping_add(t)))
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline && !w.stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(20));
    }
    w.stop.store(true, Ordering::Relaxed);
    for t in threads {
        if t.join().is_err() {
            w.fail("a client thread panicked".into());
        }
    }
    // Quiet: let the engines deliver what is in flight.
    std::thread::sleep(Duration::from_millis(200));
    for e in &w.engines {
        e.stop();
    }
    while w.engines.iter().map(Engine::poll).sum::<usize>() > 0 {}
    if let Some(f) = w.failure.lock().unwrap().take() {
        panic!("soak seed {seed}: {f}");
    }
    let mut counts = w.settled.lock().unwrap().clone();
    counts.extend(w.ports.lock().unwrap().iter().map(|p| p.counts()));
    counts.extend(w.closing.lock().unwrap().iter().map(|p| p.counts()));
    let sum = |f: fn(&unet::PortCounts) -> u64| counts.iter().map(f).sum::<u64>();
    let (desc, frames, rejected, closed) = (
        sum(|c| c.tx_descriptors),
        sum(|c| c.tx_frames),
        sum(|c| c.tx_rejected),
        sum(|c| c.tx_closed),
    );
    assert_eq!(
        desc,
        frames + rejected + closed,
        "soak seed {seed}: every descriptor taken was sent, rejected or closed"
    );
    let delivered = sum(|c| c.rx_delivered);
    let rx_lost = sum(|c| c.rx_no_buffer + c.rx_queue_full + c.rx_too_long + c.rx_bad_checksum);
    let engine_lost: u64 = w.engines.iter().map(|e| e.counts().dropped()).sum();
    assert_eq!(
        frames,
        delivered + rx_lost + engine_lost,
        "soak seed {seed}: {frames} frames sent, {delivered} delivered, {rx_lost} dropped at \
         endpoints, {engine_lost} at engines or the hub"
    );
    assert!(
        w.received.load(Ordering::Relaxed) > 0 && w.sent.load(Ordering::Relaxed) > 0,
        "soak seed {seed}: nothing was exchanged"
    );
    eprintln!(
        "soak seed {seed}: {secs} s, {frames} frames, {delivered} delivered, {} read and checked, \
         {rx_lost} + {engine_lost} counted losses, {rejected} rejected, {closed} closed",
        w.received.load(Ordering::Relaxed)
    );
}
