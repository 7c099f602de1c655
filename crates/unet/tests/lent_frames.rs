//! Frames built in memory the transport lends (`Transport::send_built`,
//! which the `xdp` transport implements with its UMEM transmit frames):
//! the engine writes a frame to another engine there instead of in its
//! outbox, and what arrives is what the outbox's path would have sent, in
//! the same order, counted the same. Checked here on the `loop` transport
//! wrapped in a transport that lends memory of its own (filled with a
//! pattern first, so that a byte the engine leaves unwritten shows), and
//! that sometimes lends nothing, so that a transmit pass mixes frames built
//! in lent memory with frames built in its outbox. `tests/netns.rs` checks
//! the `xdp` transport's side (a frame given up goes back unsent).
#![cfg(not(loom))]

mod message;
use message::message;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use unet::transport::{
    Built, LoopNet, LoopPort, Readiness, Transport, TransportError, TransportStats,
};
use unet::{ChannelOptions, Config, Endpoint, Engine, frame::Addr};

/// What the lending transport saw.
#[derive(Default)]
struct Seen {
    /// Frames built in lent memory and queued.
    lent: AtomicU64,
    /// Frames handed to `send` whole.
    whole: AtomicU64,
    /// Calls of `flush`.
    flushes: AtomicU64,
}

/// A `loop` port that lends a buffer of its own for each frame, except on
/// every `decline_every`-th call (0: never declines), and forwards what
/// was built there at `flush` (or before the next `send`, so that the
/// frames leave in the order of the calls).
struct Lending {
    inner: LoopPort,
    queued: Vec<Vec<u8>>,
    calls: u64,
    decline_every: u64,
    seen: Arc<Seen>,
}

impl Lending {
    fn forward(&mut self) {
        let frames: Vec<&[u8]> = self.queued.iter().map(Vec::as_slice).collect();
        let mut sent = 0;
        while sent < frames.len() {
            sent += self
                .inner
                .send(&frames[sent..])
                .expect("the loop port sends");
        }
        self.queued.clear();
    }
}

impl Transport for Lending {
    fn send(&mut self, frames: &[&[u8]]) -> Result<usize, TransportError> {
        self.forward();
        let n = self.inner.send(frames)?;
        self.seen.whole.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn send_built(
        &mut self,
        len: usize,
        build: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Result<Built, TransportError> {
        self.calls += 1;
        if self.decline_every != 0 && self.calls.is_multiple_of(self.decline_every) {
            return Ok(Built::NotLent);
        }
        // An earlier frame's bytes, as in a reused UMEM frame.
        let mut buf = vec![0xa5; len];
        if !build(&mut buf) {
            return Ok(Built::Abandoned);
        }
        self.queued.push(buf);
        self.seen.lent.fetch_add(1, Ordering::Relaxed);
        Ok(Built::Queued)
    }

    fn lends(&self) -> bool {
        true
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        self.seen.flushes.fetch_add(1, Ordering::Relaxed);
        self.forward();
        Ok(())
    }

    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        self.inner.recv(max, f)
    }

    fn local(&self) -> Addr {
        self.inner.local()
    }

    fn max_frame(&self) -> usize {
        self.inner.max_frame()
    }

    fn kind(&self) -> &'static str {
        "loop"
    }

    fn stats(&self) -> TransportStats {
        self.inner.stats()
    }

    fn readiness(&self) -> Option<Readiness> {
        self.inner.readiness()
    }
}

/// Engine A on a lending port and engine B on a plain one, an endpoint on
/// each, and A's two channels to B's endpoint (plain and checksummed).
fn hosts(decline_every: u64) -> (Arc<Seen>, Engine, Endpoint, Endpoint, [u16; 2]) {
    let net = LoopNet::new();
    let seen = Arc::new(Seen::default());
    let a_eng = Engine::new(Box::new(Lending {
        inner: net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
        queued: Vec::new(),
        calls: 0,
        decline_every,
        seen: seen.clone(),
    }));
    let b_eng = Engine::new(Box::new(
        net.attach("10.0.0.2:7000".parse().unwrap()).unwrap(),
    ));
    let mut a = a_eng.create_endpoint(Config::default(), None).unwrap();
    let mut b = b_eng.create_endpoint(Config::default(), None).unwrap();
    let plain = a.open_channel(b_eng.local(), b.id()).unwrap();
    let summed = a
        .open_channel_with(b_eng.local(), b.id(), ChannelOptions { checksum: true })
        .unwrap();
    b.open_channel(a_eng.local(), a.id()).unwrap();
    (seen, a_eng, a, b, [plain, summed])
}

const LENS: [usize; 10] = [0, 1, 55, 56, 57, 63, 1000, 1001, 4096, 8000];

/// Receives one message at `b`, driving its engine.
fn next(b: &mut Endpoint) -> (u16, Vec<u8>) {
    for _ in 0..100_000 {
        if let Some(m) = b.recv() {
            return (m.chan(), m.to_vec());
        }
    }
    panic!("no message arrived");
}

#[test]
fn frames_built_in_lent_memory_arrive_as_the_outbox_would_send_them() {
    let (seen, a_eng, mut a, mut b, chans) = hosts(0);
    let mut n = 0u64;
    for (i, &len) in LENS.iter().enumerate() {
        let m = message(i as u64, len);
        a.send(chans[i % 2], &m).unwrap();
        n += 1;
        let (_, got) = next(&mut b);
        assert_eq!(got, m, "message {i} of {len} bytes");
    }
    // Every frame was built in lent memory and sent by a flush; none went
    // through the outbox.
    assert_eq!(seen.lent.load(Ordering::Relaxed), n);
    assert_eq!(seen.whole.load(Ordering::Relaxed), 0);
    assert!(seen.flushes.load(Ordering::Relaxed) >= n);
    let (ac, ec) = (a.counts(), a_eng.counts());
    assert_eq!((ac.tx_frames, ec.frames_out, ec.send_errors), (n, n, 0));
    assert_eq!(b.counts().rx_bad_checksum, 0);
}

/// A transmit pass of many descriptors in which the transport declines to
/// lend every third time: the frames built in lent memory and those built
/// in the outbox leave in the order they were sent, and after a declined
/// one the rest of the pass goes through the outbox (none overtakes it).
#[test]
fn a_pass_mixing_lent_and_outbox_frames_keeps_their_order() {
    let (seen, a_eng, mut a, mut b, chans) = hosts(3);
    a.set_drive(false);
    let mut sent = Vec::new();
    for round in 0..20u64 {
        for (i, &len) in LENS.iter().enumerate() {
            let seq = round * 100 + i as u64;
            let m = message(seq, len);
            a.send(chans[i % 2], &m).unwrap();
            sent.push(m);
        }
        // One pass takes the round's ten descriptors.
        a_eng.poll();
        for (k, m) in sent.drain(..).enumerate() {
            let (_, got) = next(&mut b);
            assert_eq!(got, m, "round {round}, message {k}");
        }
    }
    let (lent, whole) = (
        seen.lent.load(Ordering::Relaxed),
        seen.whole.load(Ordering::Relaxed),
    );
    assert_eq!(lent + whole, 200);
    assert!(lent > 0 && whole > 0, "lent {lent}, whole {whole}");
    let ec = a_eng.counts();
    assert_eq!((ec.frames_out, ec.send_errors), (200, 0));
    assert_eq!(a.counts().tx_frames, 200);
}

/// The frames of one transmit pass built in lent memory go out together:
/// one flush for the pass (for `xdp`, one `sendto` kick of the transmit
/// ring for the burst), not one per frame.
#[test]
fn a_pass_of_lent_frames_flushes_once() {
    let (seen, a_eng, mut a, mut b, chans) = hosts(0);
    a.set_drive(false);
    let sent: Vec<Vec<u8>> = (0..20u64).map(|seq| message(seq, 64)).collect();
    for m in &sent {
        a.send(chans[0], m).unwrap();
    }
    let before = seen.flushes.load(Ordering::Relaxed);
    a_eng.poll();
    assert_eq!(seen.flushes.load(Ordering::Relaxed) - before, 1);
    assert_eq!(seen.lent.load(Ordering::Relaxed), 20);
    for (k, m) in sent.iter().enumerate() {
        assert_eq!(&next(&mut b).1, m, "message {k}");
    }
}
