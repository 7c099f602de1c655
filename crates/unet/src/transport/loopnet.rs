//! `loop`: the in-process transport, the embedded default.
//!
//! A [`LoopNet`] is a hub, a switch in software: every [`LoopPort`]
//! attached to it has an address ([`Addr`]) and an inbound queue, and
//! [`send`](Transport::send) routes each frame by the IPv4 destination
//! address and UDP destination port in its header (bytes 30..34 and
//! 36..38, see [`crate::frame`]) to that port's queue, the sender's own
//! included. Nothing else of the frame is interpreted: a frame arrives byte
//! for byte as it was sent, which is what the `udp` transport rebuilds.
//!
//! Like a network, the hub drops rather than blocks: a frame for an
//! address no port is attached to, or for a full queue, is counted
//! ([`TransportStats::tx_no_route`], [`TransportStats::tx_queue_full`]) and
//! dropped.
//!
//! # The queue
//!
//! Each port's queue is a byte ring (like a NIC's receive ring, U-Net §2):
//! one contiguous allocation in which a frame is a record `[len: u64][bytes,
//! padded to 8]`, with a marker record where the ring wraps. Senders copy a
//! frame in once, under a short per-queue lock that orders the senders
//! among themselves; the receiver is the port's owner alone and takes no
//! lock: it reads records in place, hands `recv`'s callback a slice of the
//! ring (no copy), and publishes the space as free with one release store
//! per batch. No allocation happens per frame. A queue is bounded both in
//! bytes ([`LoopConfig::queue_bytes`]) and in frames
//! ([`LoopConfig::queue_frames`]).
//!
//! This module owns the `unsafe` of the ring memory; each block says why
//! it is sound.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::collections::HashMap;
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Transport, TransportError, TransportStats, check_frame_len};
use crate::frame::{Addr, HEADER_LEN, peek_dst};

/// The default largest frame: 14 buffers of 64 KiB (a receive descriptor's
/// limit) plus the header.
pub const DEFAULT_MAX_FRAME: usize = 14 * 65536 + HEADER_LEN;

/// Sizes of a [`LoopNet`]'s queues.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LoopConfig {
    /// Bytes of each port's inbound ring, rounded up to a power of two; at
    /// least twice a record of the largest frame (8 + `max_frame` rounded
    /// up to 8), so that an empty ring always takes one. Default 4 MiB.
    pub queue_bytes: usize,
    /// Most frames queued at a port. Default 1024.
    pub queue_frames: usize,
    /// Largest frame, header included ([`Transport::max_frame`]); at least
    /// the 54-byte header. Default [`DEFAULT_MAX_FRAME`].
    pub max_frame: usize,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig {
            queue_bytes: 4 << 20,
            queue_frames: 1024,
            max_frame: DEFAULT_MAX_FRAME,
        }
    }
}

/// Bytes of a record's length word.
const RECORD_HDR: usize = 8;
/// The length word of the record that marks the wrap to the ring's start.
const WRAP: u64 = u64::MAX;
/// Route cache entries a port keeps before it starts over.
const ROUTE_CACHE_MAX: usize = 4096;

/// Bytes a frame of `len` bytes takes in a ring.
#[inline]
fn record_len(len: usize) -> usize {
    RECORD_HDR + len.next_multiple_of(8)
}

impl LoopConfig {
    /// Checks the configuration and returns the ring size to allocate.
    fn ring_bytes(&self) -> Result<usize, TransportError> {
        let bad = |what: String| TransportError::Config { kind: "loop", what };
        if self.max_frame < HEADER_LEN || self.max_frame > (1 << 32) {
            return Err(bad(format!(
                "max_frame {} is outside {HEADER_LEN}..=2^32",
                self.max_frame
            )));
        }
        if self.queue_frames == 0 {
            return Err(bad("queue_frames is 0".into()));
        }
        let need = 2 * record_len(self.max_frame);
        let bytes = self.queue_bytes.max(1).checked_next_power_of_two();
        match bytes {
            Some(b) if b >= need && b <= 1 << 40 => Ok(b),
            _ => Err(bad(format!(
                "queue_bytes {} must be at most 2^40 and, rounded up to a power of two, \
                 at least {need} (two records of a {}-byte frame)",
                self.queue_bytes, self.max_frame
            ))),
        }
    }
}

/// A value on a cache line of its own, so that the consumer's and the
/// producers' positions do not share one.
#[repr(align(128))]
struct Padded<T>(T);

/// What the consumer publishes: how far it has read.
struct Head {
    /// Ring position (bytes, growing without wrapping) up to which records
    /// were consumed.
    bytes: AtomicU64,
    /// Frames consumed.
    frames: AtomicU64,
}

/// The producers' state, behind the queue's lock.
struct Producer {
    /// Ring position after the last record written (equals the published
    /// tail outside a push).
    tail: u64,
    /// Frames written.
    frames: u64,
    /// The port was detached: frames are no longer accepted.
    closed: bool,
}

/// One port's inbound queue: a byte ring with one consumer (the port) and
/// producers serialized by a lock.
struct Inbox {
    /// The ring: `cap` bytes, 128-byte aligned.
    mem: NonNull<u8>,
    /// `cap - 1`; `cap` is a power of two.
    mask: u64,
    cap: u64,
    max_frames: u64,
    head: Padded<Head>,
    /// Published end of the complete records: producers store it (release)
    /// after writing, the consumer loads it (acquire) before reading.
    tail: Padded<AtomicU64>,
    producer: Padded<Mutex<Producer>>,
}

// SAFETY: the ring memory is shared by the producers and the consumer
// under the SPSC protocol (producers serialized by `producer`'s lock):
// producers write only the free range [tail, head + cap) and publish it by
// a release store of `tail`; the consumer reads only [head, tail) after an
// acquire load of `tail`, and frees it by a release store of `head`, which
// producers load with acquire before writing. No byte is written while
// another thread may read it, so the `Inbox` may be shared and sent.
unsafe impl Send for Inbox {}
// SAFETY: as for `Send` above.
unsafe impl Sync for Inbox {}

/// How a run of frames fared at a queue.
#[derive(Default)]
struct Pushed {
    frames: u64,
    bytes: u64,
    full: u64,
    closed: u64,
}

impl Inbox {
    fn new(cap: usize, max_frames: usize) -> Inbox {
        let layout = Self::layout(cap);
        // SAFETY: the layout has a non-zero size (cap >= 2 records).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(mem) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        Inbox {
            mem,
            mask: cap as u64 - 1,
            cap: cap as u64,
            max_frames: max_frames as u64,
            head: Padded(Head {
                bytes: AtomicU64::new(0),
                frames: AtomicU64::new(0),
            }),
            tail: Padded(AtomicU64::new(0)),
            producer: Padded(Mutex::new(Producer {
                tail: 0,
                frames: 0,
                closed: false,
            })),
        }
    }

    fn layout(cap: usize) -> Layout {
        // A power of two up to 2^40 with alignment 128 is always valid.
        Layout::from_size_align(cap, 128).unwrap_or_else(|_| Layout::new::<[u8; 128]>())
    }

    fn lock(&self) -> MutexGuard<'_, Producer> {
        // A producer that panicked while holding the lock left `tail`
        // unpublished beyond the last complete record, so the state is
        // consistent: carry on.
        self.producer.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends `frames` (each already checked against the maximum frame
    /// size, which the ring can hold twice) under one lock, publishing the
    /// tail once.
    fn push(&self, frames: &[&[u8]]) -> Pushed {
        let mut out = Pushed::default();
        let mut p = self.lock();
        if p.closed {
            out.closed = frames.len() as u64;
            return out;
        }
        let mut head = self.head.0.bytes.load(Ordering::Acquire);
        let mut popped = self.head.0.frames.load(Ordering::Acquire);
        for f in frames {
            let need = record_len(f.len()) as u64;
            let pos = p.tail & self.mask;
            let to_end = self.cap - pos;
            let skip = if need <= to_end { 0 } else { to_end };
            let fits = |head: u64, popped: u64, p: &Producer| {
                p.tail + skip + need - head <= self.cap && p.frames - popped < self.max_frames
            };
            if !fits(head, popped, &p) {
                // The consumer may have freed space since the first look.
                head = self.head.0.bytes.load(Ordering::Acquire);
                popped = self.head.0.frames.load(Ordering::Acquire);
                if !fits(head, popped, &p) {
                    out.full += 1;
                    continue;
                }
            }
            if skip != 0 {
                // SAFETY: `pos` is a multiple of 8 below `cap`, so the
                // 8-byte word at `pos` is inside the ring and aligned (the
                // ring is 128-aligned); it is in the free range
                // [tail, head + cap) checked just above, which the consumer
                // does not read until `tail` is published.
                unsafe {
                    self.mem
                        .as_ptr()
                        .add(pos as usize)
                        .cast::<u64>()
                        .write(WRAP)
                };
                p.tail += skip;
            }
            let at = (p.tail & self.mask) as usize;
            // SAFETY: the record's `need` bytes at `at` lie inside the ring
            // (`at + need <= cap`: either the record fits before the end or
            // it starts at 0 after the wrap marker, and need <= cap / 2) and
            // in the free range checked above; `at` is a multiple of 8. The
            // source is the caller's slice, which cannot overlap the ring.
            unsafe {
                let dst = self.mem.as_ptr().add(at);
                dst.cast::<u64>().write(f.len() as u64);
                std::ptr::copy_nonoverlapping(f.as_ptr(), dst.add(RECORD_HDR), f.len());
            }
            p.tail += need;
            p.frames += 1;
            out.frames += 1;
            out.bytes += f.len() as u64;
        }
        self.tail.0.store(p.tail, Ordering::Release);
        out
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        // SAFETY: `mem` was allocated in `new` with this layout (`mask + 1`
        // is the `cap` it was made with) and is freed once, here.
        unsafe { dealloc(self.mem.as_ptr(), Self::layout(self.cap as usize)) };
    }
}

/// The hub shared by a [`LoopNet`]'s handles and ports.
struct Hub {
    config: LoopConfig,
    ring_bytes: usize,
    ports: Mutex<HashMap<Addr, Arc<Inbox>>>,
    /// Bumped on every attach and detach, so that ports refresh their
    /// route caches.
    generation: AtomicU64,
}

impl Hub {
    fn ports(&self) -> MutexGuard<'_, HashMap<Addr, Arc<Inbox>>> {
        // The map is never left half-updated by a panic (one insert or
        // remove per critical section).
        self.ports.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An in-process network: a clone-able handle on a hub to which
/// [`LoopPort`]s attach.
///
/// ```
/// use unet::frame::{Addr, FrameHeader, HEADER_LEN};
/// use unet::transport::{LoopNet, Transport};
///
/// let net = LoopNet::new();
/// let a: Addr = "10.0.0.1:7000".parse().unwrap();
/// let b: Addr = "10.0.0.2:7000".parse().unwrap();
/// let mut pa = net.attach(a)?;
/// let mut pb = net.attach(b)?;
/// let mut frame = vec![0u8; HEADER_LEN + 5];
/// FrameHeader::new(a, b, 1, 2).write(5, &mut frame)?;
/// frame[HEADER_LEN..].copy_from_slice(b"hello");
/// assert_eq!(pa.send(&[&frame])?, 1);
/// let mut got = Vec::new();
/// pb.recv(16, &mut |f| got = f.to_vec())?;
/// assert_eq!(got, frame);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct LoopNet {
    hub: Arc<Hub>,
}

impl fmt::Debug for LoopNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopNet")
            .field("config", &self.hub.config)
            .field("ports", &self.attached())
            .finish()
    }
}

impl Default for LoopNet {
    fn default() -> Self {
        Self::new()
    }
}

impl LoopNet {
    /// A hub with the default [`LoopConfig`].
    pub fn new() -> Self {
        let config = LoopConfig::default();
        // The default configuration is valid (a unit test checks it); fall
        // back to its arithmetic if that ever changed.
        let ring_bytes = config
            .ring_bytes()
            .unwrap_or(2 * record_len(config.max_frame).next_power_of_two());
        Self::build(config, ring_bytes)
    }

    /// A hub with the given queue sizes, checked.
    pub fn with_config(config: LoopConfig) -> Result<Self, TransportError> {
        let ring_bytes = config.ring_bytes()?;
        Ok(Self::build(config, ring_bytes))
    }

    fn build(config: LoopConfig, ring_bytes: usize) -> Self {
        LoopNet {
            hub: Arc::new(Hub {
                config,
                ring_bytes,
                ports: Mutex::new(HashMap::new()),
                generation: AtomicU64::new(0),
            }),
        }
    }

    /// The hub's configuration.
    pub fn config(&self) -> LoopConfig {
        self.hub.config
    }

    /// Attaches a port at `addr`; an error if a port is attached there
    /// already. The port detaches when dropped.
    pub fn attach(&self, addr: Addr) -> Result<LoopPort, TransportError> {
        let inbox = {
            let mut ports = self.hub.ports();
            if ports.contains_key(&addr) {
                return Err(TransportError::AddressInUse(addr));
            }
            let inbox = Arc::new(Inbox::new(
                self.hub.ring_bytes,
                self.hub.config.queue_frames,
            ));
            ports.insert(addr, inbox.clone());
            self.hub.generation.fetch_add(1, Ordering::Release);
            inbox
        };
        Ok(LoopPort {
            addr,
            hub: self.hub.clone(),
            inbox,
            head: 0,
            popped: 0,
            routes: Routes::default(),
            stats: TransportStats::default(),
        })
    }

    /// The addresses attached now, sorted.
    pub fn attached(&self) -> Vec<Addr> {
        let mut v: Vec<Addr> = self.hub.ports().keys().copied().collect();
        v.sort();
        v
    }
}

/// A port's cache of the hub's routing table, refreshed when the hub's
/// generation changes, so that sending takes no shared lock.
#[derive(Default)]
struct Routes {
    generation: u64,
    /// The last destination looked up, and its queue (`None`: no port).
    last: Option<(Addr, Option<Arc<Inbox>>)>,
    map: HashMap<Addr, Option<Arc<Inbox>>>,
}

impl Routes {
    fn refresh(&mut self, hub: &Hub) {
        let generation = hub.generation.load(Ordering::Acquire);
        if generation != self.generation {
            self.generation = generation;
            self.last = None;
            self.map.clear();
        }
    }

    fn lookup(&mut self, hub: &Hub, dst: Addr) -> Option<&Arc<Inbox>> {
        if !matches!(&self.last, Some((a, _)) if *a == dst) {
            let entry = match self.map.get(&dst) {
                Some(e) => e.clone(),
                None => {
                    let e = hub.ports().get(&dst).cloned();
                    if self.map.len() >= ROUTE_CACHE_MAX {
                        self.map.clear();
                    }
                    self.map.insert(dst, e.clone());
                    e
                }
            };
            self.last = Some((dst, entry));
        }
        self.last.as_ref().and_then(|(_, e)| e.as_ref())
    }
}

/// A port on a [`LoopNet`]: the `loop` [`Transport`].
pub struct LoopPort {
    addr: Addr,
    hub: Arc<Hub>,
    inbox: Arc<Inbox>,
    /// Consumer position in the inbox ring, and frames consumed.
    head: u64,
    popped: u64,
    routes: Routes,
    stats: TransportStats,
}

impl fmt::Debug for LoopPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopPort")
            .field("addr", &self.addr)
            .field("stats", &self.stats)
            .finish()
    }
}

impl LoopPort {
    /// Frames waiting in this port's queue.
    pub fn queued(&self) -> usize {
        let written = self.inbox.lock().frames;
        (written - self.popped) as usize
    }
}

impl Transport for LoopPort {
    fn send(&mut self, frames: &[&[u8]]) -> Result<usize, TransportError> {
        self.routes.refresh(&self.hub);
        let max = self.hub.config.max_frame;
        let ok = |f: &[u8]| f.len() >= HEADER_LEN && f.len() <= max;
        let mut i = 0;
        while i < frames.len() {
            if let Err(e) = check_frame_len(frames[i], max, "loop") {
                if i > 0 {
                    return Ok(i);
                }
                self.stats.tx_rejected += 1;
                return Err(e);
            }
            // The frame is at least 54 bytes long, so it has a destination.
            let dst = peek_dst(frames[i]);
            let mut j = i + 1;
            while j < frames.len() && ok(frames[j]) && peek_dst(frames[j]) == dst {
                j += 1;
            }
            let run = &frames[i..j];
            match dst.and_then(|d| self.routes.lookup(&self.hub, d)) {
                None => self.stats.tx_no_route += run.len() as u64,
                Some(inbox) => {
                    let p = inbox.push(run);
                    self.stats.tx_frames += p.frames;
                    self.stats.tx_bytes += p.bytes;
                    self.stats.tx_queue_full += p.full;
                    self.stats.tx_no_route += p.closed;
                }
            }
            i = j;
        }
        Ok(frames.len())
    }

    fn readiness(&self) -> Option<super::Readiness> {
        let inbox = self.inbox.clone();
        // Frames wait while the published tail is past the consumed head.
        Some(Box::new(move || {
            inbox.tail.0.load(Ordering::Acquire) != inbox.head.0.bytes.load(Ordering::Relaxed)
        }))
    }

    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        let inbox = &*self.inbox;
        let tail = inbox.tail.0.load(Ordering::Acquire);
        let start = self.head;
        let mut n = 0;
        while n < max && self.head != tail {
            let pos = self.head & inbox.mask;
            // SAFETY: `pos` is a multiple of 8 below `cap` (records are
            // 8-byte multiples), so the word is inside the ring and
            // aligned; it lies in [head, tail), published by a producer's
            // release store of `tail` that the acquire load above saw.
            let word = unsafe { inbox.mem.as_ptr().add(pos as usize).cast::<u64>().read() };
            if word == WRAP {
                self.head += inbox.cap - pos;
                continue;
            }
            // Producers write records that fit before the ring's end.
            debug_assert!(word <= inbox.cap - pos - RECORD_HDR as u64);
            let len = word.min(inbox.cap - pos - RECORD_HDR as u64) as usize;
            // SAFETY: the `len` bytes after the length word are inside the
            // ring (clamped just above) and inside the published range
            // [head, tail); producers do not write there until this
            // consumer stores a `head` beyond them, which happens after
            // the slice's last use below.
            let frame = unsafe {
                std::slice::from_raw_parts(inbox.mem.as_ptr().add(pos as usize + RECORD_HDR), len)
            };
            f(frame);
            self.head += record_len(len) as u64;
            self.popped += 1;
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += len as u64;
            n += 1;
        }
        if self.head != start {
            inbox.head.0.frames.store(self.popped, Ordering::Release);
            inbox.head.0.bytes.store(self.head, Ordering::Release);
        }
        Ok(n)
    }

    fn local(&self) -> Addr {
        self.addr
    }

    fn max_frame(&self) -> usize {
        self.hub.config.max_frame
    }

    fn kind(&self) -> &'static str {
        "loop"
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }
}

impl Drop for LoopPort {
    fn drop(&mut self) {
        // Close first, so that a sender still holding this queue in its
        // cache counts its frames as unroutable from now on.
        self.inbox.lock().closed = true;
        let mut ports = self.hub.ports();
        if ports
            .get(&self.addr)
            .is_some_and(|q| Arc::ptr_eq(q, &self.inbox))
        {
            ports.remove(&self.addr);
        }
        self.hub.generation.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{FrameHeader, MAX_PAYLOAD};
    use std::sync::atomic::AtomicU64;
    use std::time::{Duration, Instant};

    fn addr(s: &str) -> Addr {
        s.parse().unwrap()
    }

    /// Writes into `f` a frame from `src` to `dst` whose payload is `seq`
    /// (8 bytes) then `extra` bytes derived from it.
    fn fill(f: &mut Vec<u8>, src: Addr, dst: Addr, seq: u64, extra: usize) {
        let len = 8 + extra;
        f.clear();
        f.resize(HEADER_LEN + len, 0);
        FrameHeader::new(src, dst, 1, 2).write(len, f).unwrap();
        f[HEADER_LEN..HEADER_LEN + 8].copy_from_slice(&seq.to_le_bytes());
        for (i, b) in f[HEADER_LEN + 8..].iter_mut().enumerate() {
            *b = (seq as usize * 31 + i) as u8;
        }
    }

    fn frame(src: Addr, dst: Addr, seq: u64, extra: usize) -> Vec<u8> {
        let mut f = Vec::new();
        fill(&mut f, src, dst, seq, extra);
        f
    }

    #[test]
    fn readiness_says_whether_frames_wait() {
        let net = LoopNet::new();
        let (a, b) = (addr("10.0.0.1:7000"), addr("10.0.0.2:7000"));
        let mut pa = net.attach(a).unwrap();
        let mut pb = net.attach(b).unwrap();
        let ready = pb.readiness().expect("loop can tell");
        assert!(!ready(), "nothing sent yet");
        let f = frame(a, b, 1, 100);
        assert_eq!(pa.send(&[&f, &f]).unwrap(), 2);
        assert!(ready());
        assert_eq!(pb.recv(1, &mut |_| ()).unwrap(), 1);
        assert!(ready(), "one frame still waits");
        assert_eq!(pb.recv(8, &mut |_| ()).unwrap(), 1);
        assert!(!ready());
    }

    /// Whether `f` is exactly the frame `fill` writes for these arguments.
    fn is_frame(f: &[u8], src: Addr, dst: Addr, seq: u64, extra: usize) -> bool {
        let mut h = [0u8; HEADER_LEN];
        FrameHeader::new(src, dst, 1, 2)
            .write(8 + extra, &mut h)
            .unwrap();
        f.len() == HEADER_LEN + 8 + extra
            && f[..HEADER_LEN] == h
            && f[HEADER_LEN..HEADER_LEN + 8] == seq.to_le_bytes()
            && f[HEADER_LEN + 8..]
                .iter()
                .enumerate()
                .all(|(i, b)| *b == (seq as usize * 31 + i) as u8)
    }

    fn seq_of(f: &[u8]) -> u64 {
        u64::from_le_bytes(f[HEADER_LEN..HEADER_LEN + 8].try_into().unwrap())
    }

    fn drain(p: &mut LoopPort) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        p.recv(usize::MAX, &mut |f| v.push(f.to_vec())).unwrap();
        v
    }

    #[test]
    fn the_default_configuration_is_valid() {
        let c = LoopConfig::default();
        assert_eq!(c.ring_bytes().unwrap(), 4 << 20);
        assert_eq!(LoopNet::new().config(), c);
        assert!(c.max_frame >= 14 * 4096 + HEADER_LEN);
    }

    #[test]
    fn bad_configurations_are_refused() {
        for c in [
            LoopConfig {
                max_frame: 49,
                ..Default::default()
            },
            LoopConfig {
                queue_frames: 0,
                ..Default::default()
            },
            LoopConfig {
                queue_bytes: 1 << 20,
                ..Default::default()
            },
        ] {
            let e = LoopNet::with_config(c).unwrap_err();
            assert!(
                matches!(e, TransportError::Config { kind: "loop", .. }),
                "{e}"
            );
        }
        // Rounded up to a power of two.
        let c = LoopConfig {
            queue_bytes: 3000,
            queue_frames: 8,
            max_frame: 1000,
        };
        assert_eq!(c.ring_bytes().unwrap(), 4096);
    }

    #[test]
    fn frames_are_routed_by_destination_address_and_port() {
        let net = LoopNet::new();
        let (a, b, c) = (
            addr("10.0.0.1:7000"),
            addr("10.0.0.2:7000"),
            addr("10.0.0.2:7001"),
        );
        let mut pa = net.attach(a).unwrap();
        let mut pb = net.attach(b).unwrap();
        let mut pc = net.attach(c).unwrap();
        assert_eq!(net.attached(), vec![a, b, c]);
        let to_b = frame(a, b, 1, 10);
        let to_c = frame(a, c, 2, 20);
        let to_b2 = frame(a, b, 3, 0);
        assert_eq!(pa.send(&[&to_b, &to_c, &to_b2]).unwrap(), 3);
        assert_eq!(drain(&mut pb), vec![to_b.clone(), to_b2.clone()]);
        assert_eq!(drain(&mut pc), vec![to_c.clone()]);
        assert!(drain(&mut pa).is_empty());
        let s = pa.stats();
        assert_eq!((s.tx_frames, s.tx_no_route, s.tx_queue_full), (3, 0, 0));
        assert_eq!(s.tx_bytes, (to_b.len() + to_c.len() + to_b2.len()) as u64);
        assert_eq!(pb.stats().rx_frames, 2);
        assert_eq!(pb.stats().rx_bytes, (to_b.len() + to_b2.len()) as u64);
    }

    #[test]
    fn frames_to_the_own_address_loop_back() {
        let net = LoopNet::new();
        let a = addr("10.0.0.1:7000");
        let mut pa = net.attach(a).unwrap();
        let f = frame(a, a, 7, 100);
        pa.send(&[&f]).unwrap();
        assert_eq!(drain(&mut pa), vec![f]);
    }

    #[test]
    fn an_address_attaches_once_and_is_free_again_after_drop() {
        let net = LoopNet::new();
        let a = addr("10.0.0.1:7000");
        let p = net.attach(a).unwrap();
        assert!(matches!(net.attach(a), Err(TransportError::AddressInUse(x)) if x == a));
        drop(p);
        assert!(net.attached().is_empty());
        net.attach(a).unwrap();
    }

    #[test]
    fn frames_for_no_attached_address_are_counted_and_dropped() {
        let net = LoopNet::new();
        let (a, b) = (addr("10.0.0.1:7000"), addr("10.0.0.2:7000"));
        let mut pa = net.attach(a).unwrap();
        let f = frame(a, b, 1, 0);
        assert_eq!(pa.send(&[&f, &f]).unwrap(), 2);
        assert_eq!(pa.stats().tx_no_route, 2);
        assert_eq!(pa.stats().tx_frames, 0);
        // Once b attaches, the route cache sees it.
        let mut pb = net.attach(b).unwrap();
        pa.send(&[&f]).unwrap();
        assert_eq!(drain(&mut pb).len(), 1);
        // And after b detaches, frames to it are unroutable again, even
        // within one batch whose route was cached.
        drop(pb);
        pa.send(&[&f]).unwrap();
        assert_eq!(pa.stats().tx_no_route, 3);
        assert_eq!(pa.stats().tx_frames, 1);
    }

    #[test]
    fn a_full_queue_drops_and_counts_by_frames_and_by_bytes() {
        let net = LoopNet::with_config(LoopConfig {
            queue_bytes: 8192,
            queue_frames: 4,
            max_frame: 2000,
        })
        .unwrap();
        let (a, b) = (addr("10.0.0.1:7000"), addr("10.0.0.2:7000"));
        let mut pa = net.attach(a).unwrap();
        let mut pb = net.attach(b).unwrap();
        let small: Vec<Vec<u8>> = (0..10).map(|i| frame(a, b, i, 0)).collect();
        let refs: Vec<&[u8]> = small.iter().map(|f| &f[..]).collect();
        assert_eq!(pa.send(&refs).unwrap(), 10);
        assert_eq!(pa.stats().tx_queue_full, 6);
        assert_eq!(pb.queued(), 4);
        let got: Vec<u64> = drain(&mut pb).iter().map(|f| seq_of(f)).collect();
        assert_eq!(got, vec![0, 1, 2, 3]);
        // By bytes, on a fresh ring: 2000-byte frames take records of 2008
        // bytes, so four of them fit in 8192 bytes and the fifth does not.
        let net = LoopNet::with_config(LoopConfig {
            queue_bytes: 8192,
            queue_frames: 100,
            max_frame: 2000,
        })
        .unwrap();
        let mut pa = net.attach(a).unwrap();
        let mut pb = net.attach(b).unwrap();
        let big: Vec<Vec<u8>> = (0..6)
            .map(|i| frame(a, b, i, 2000 - HEADER_LEN - 8))
            .collect();
        assert_eq!(big[0].len(), 2000);
        let refs: Vec<&[u8]> = big.iter().map(|f| &f[..]).collect();
        pa.send(&refs).unwrap();
        assert_eq!(pa.stats().tx_queue_full, 2);
        assert_eq!(drain(&mut pb), big[..4].to_vec());
        // Space is free again after the receive (this one wraps).
        pa.send(&refs[..2]).unwrap();
        assert_eq!(drain(&mut pb), big[..2].to_vec());
        assert_eq!(pa.stats().tx_queue_full, 2);
    }

    #[test]
    fn frames_survive_the_wrap_of_the_ring_in_order() {
        let net = LoopNet::with_config(LoopConfig {
            queue_bytes: 4096,
            queue_frames: 1000,
            max_frame: 1000,
        })
        .unwrap();
        let (a, b) = (addr("10.0.0.1:7000"), addr("10.0.0.2:7000"));
        let mut pa = net.attach(a).unwrap();
        let mut pb = net.attach(b).unwrap();
        let mut next = 0u64;
        for round in 0..500u64 {
            let batch: Vec<Vec<u8>> = (0..1 + round % 4)
                .map(|k| {
                    frame(
                        a,
                        b,
                        round * 10 + k,
                        ((round * 37 + k * 101) % (1000 - HEADER_LEN as u64 - 8 + 1)) as usize,
                    )
                })
                .collect();
            let refs: Vec<&[u8]> = batch.iter().map(|f| &f[..]).collect();
            pa.send(&refs).unwrap();
            let mut got = Vec::new();
            // Receive in batches of 1 to exercise partial consumption.
            while pb.recv(1, &mut |f| got.push(f.to_vec())).unwrap() == 1 {}
            assert_eq!(got, batch, "round {round}");
            next += batch.len() as u64;
        }
        assert_eq!(pa.stats().tx_queue_full, 0);
        assert_eq!(pb.stats().rx_frames, next);
    }

    #[test]
    fn bad_frames_are_errors_for_that_frame_only() {
        let net = LoopNet::with_config(LoopConfig {
            queue_bytes: 1 << 16,
            queue_frames: 64,
            max_frame: 1000,
        })
        .unwrap();
        let (a, b) = (addr("10.0.0.1:7000"), addr("10.0.0.2:7000"));
        let mut pa = net.attach(a).unwrap();
        let mut pb = net.attach(b).unwrap();
        let good = frame(a, b, 1, 0);
        let big = vec![0u8; 1001];
        let short = vec![0u8; 49];
        // The batch ends before the bad frame; the next call reports it.
        assert_eq!(pa.send(&[&good, &big, &good]).unwrap(), 1);
        let e = pa.send(&[&big, &good]).unwrap_err();
        assert!(matches!(
            e,
            TransportError::FrameTooLarge {
                len: 1001,
                max: 1000,
                kind: "loop"
            }
        ));
        assert!(matches!(
            pa.send(&[&short]),
            Err(TransportError::FrameTooShort { len: 49 })
        ));
        assert_eq!(pa.send(&[&good]).unwrap(), 1);
        assert_eq!(drain(&mut pb).len(), 2);
        assert_eq!(pa.stats().tx_rejected, 2);
        // The largest frame is carried.
        let max = frame(a, b, 9, 1000 - HEADER_LEN - 8);
        assert_eq!(max.len(), pa.max_frame());
        pa.send(&[&max]).unwrap();
        assert_eq!(drain(&mut pb), vec![max]);
    }

    #[test]
    fn the_default_maximum_frame_is_carried() {
        let net = LoopNet::new();
        let (a, b) = (addr("10.0.0.1:7000"), addr("10.0.0.2:7000"));
        let mut pa = net.attach(a).unwrap();
        let mut pb = net.attach(b).unwrap();
        let mut f = frame(a, b, 1, MAX_PAYLOAD - 8);
        f.resize(DEFAULT_MAX_FRAME, 0x5a);
        for _ in 0..9 {
            pa.send(&[&f, &f]).unwrap();
            assert_eq!(drain(&mut pb), vec![f.clone(), f.clone()]);
        }
        assert_eq!(pa.stats().tx_queue_full, 0);
    }

    /// One thread sends frame i and waits for the other to echo it (with
    /// the addresses swapped), 10,000 times: each echo is the frame sent.
    #[test]
    fn ping_pong_between_two_threads() {
        const ROUNDS: u64 = 10_000;
        // Spin, but let other threads run now and then on a busy machine.
        fn idle(spins: &mut u32) {
            *spins += 1;
            if (*spins).is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let net = LoopNet::new();
        let (a, b) = (addr("10.0.0.1:7000"), addr("10.0.0.2:7000"));
        let mut pa = net.attach(a).unwrap();
        let mut pb = net.attach(b).unwrap();
        let echoer = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            let (mut echoed, mut spins) = (0, 0);
            let mut out = Vec::new();
            while echoed < ROUNDS {
                assert!(Instant::now() < deadline, "echoed {echoed}");
                let n = pb
                    .recv(1, &mut |f| {
                        out.clear();
                        out.extend_from_slice(f);
                        // Swap the MACs, addresses and ports: the IPv4
                        // checksum is a sum, so it stays right.
                        out[0..12].rotate_left(6);
                        out[26..34].rotate_left(4);
                        out[34..38].rotate_left(2);
                    })
                    .unwrap();
                if n == 1 {
                    pb.send(&[&out]).unwrap();
                    echoed += 1;
                } else {
                    idle(&mut spins);
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let (mut buf, mut spins) = (Vec::new(), 0);
        let start = Instant::now();
        for seq in 0..ROUNDS {
            fill(&mut buf, a, b, seq, 0);
            pa.send(&[&buf]).unwrap();
            let mut back = false;
            while !back {
                assert!(Instant::now() < deadline, "no echo of {seq}");
                let n = pa
                    .recv(1, &mut |f| {
                        assert!(is_frame(f, b, a, seq, 0), "echo of {seq}");
                        back = true;
                    })
                    .unwrap();
                if n == 0 {
                    idle(&mut spins);
                }
            }
        }
        let rtt = start.elapsed() / ROUNDS as u32;
        echoer.join().unwrap();
        assert_eq!(pa.stats().tx_queue_full, 0);
        eprintln!("loop: ping-pong of 58-byte frames between two threads: {rtt:?} per round trip");
    }

    /// Two threads exchange 100,000 frames each way with sequence numbers;
    /// each sender stays at most a window ahead of what its receiver has
    /// taken (the receiver keeps up), so nothing may be lost, duplicated
    /// or reordered, and every payload arrives intact.
    #[test]
    fn two_threads_exchange_100_000_frames_each_way() {
        const N: u64 = 100_000;
        const WINDOW: u64 = 512;
        let net = LoopNet::new();
        let (a, b) = (addr("10.0.0.1:7000"), addr("10.0.0.2:7000"));
        let ports = [net.attach(a).unwrap(), net.attach(b).unwrap()];
        // received[i]: frames thread i has received.
        let received = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let start = Instant::now();
        let handles: Vec<_> = ports
            .into_iter()
            .enumerate()
            .map(|(me, mut port)| {
                let received = received.clone();
                let (src, dst) = if me == 0 { (a, b) } else { (b, a) };
                std::thread::spawn(move || {
                    let deadline = Instant::now() + Duration::from_secs(60);
                    let (mut sent, mut expect) = (0u64, 0u64);
                    let mut bufs = vec![Vec::new(); 32];
                    while sent < N || expect < N {
                        assert!(
                            Instant::now() < deadline,
                            "stalled: sent {sent} got {expect}"
                        );
                        let peer_got = received[1 - me].load(Ordering::Acquire);
                        let room = (WINDOW - (sent - peer_got)).min(N - sent).min(32) as usize;
                        for (k, buf) in bufs[..room].iter_mut().enumerate() {
                            let seq = sent + k as u64;
                            fill(buf, src, dst, seq, (seq % 200) as usize);
                        }
                        let refs: Vec<&[u8]> = bufs[..room].iter().map(|b| &b[..]).collect();
                        assert_eq!(port.send(&refs).unwrap(), room);
                        sent += room as u64;
                        let n = port
                            .recv(64, &mut |f| {
                                assert_eq!(seq_of(f), expect, "order");
                                assert!(is_frame(f, dst, src, expect, (expect % 200) as usize));
                                expect += 1;
                            })
                            .unwrap();
                        received[me].fetch_add(n as u64, Ordering::Release);
                        if n == 0 && room == 0 {
                            std::thread::yield_now();
                        }
                    }
                    port.stats()
                })
            })
            .collect();
        for h in handles {
            let s = h.join().unwrap();
            assert_eq!((s.tx_frames, s.rx_frames), (N, N));
            assert_eq!((s.tx_queue_full, s.tx_no_route), (0, 0));
        }
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "loop: {} frames of 58..258 bytes in {secs:.3} s: {:.2} M frames/s (checked)",
            2 * N,
            2.0 * N as f64 / secs / 1e6
        );
    }
}
