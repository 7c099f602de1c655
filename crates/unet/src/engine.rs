//! The engine: the network interface of U-Net/SLE (§2.1: the LanAI
//! firmware that polls every endpoint's transmit queue while checking for
//! arriving data), in software.
//!
//! For each endpoint the engine holds a [`Port`]: its private copy of the
//! endpoint's layout, its own side of the three queues, the channels, the
//! applet, and counters. It never trusts the shared segment (see
//! [`crate::shm`]): each transmit descriptor is copied once and checked,
//! each free-queue offset is checked before the engine writes a byte at it.
//!
//! **Transmit.** A transmit descriptor is checked (length, extent in the
//! buffer area, open channel). Without an applet the engine writes the
//! channel's prebuilt header and copies the message behind it with an ilp
//! loop (copy, or copy and checksum when the channel asks for a UDP
//! checksum). With an applet, `doTx(length, channel, offset)` runs, and its
//! `txPush` calls make the frames. The engine then writes the descriptor's
//! completion status and frees its slot.
//!
//! **Receive.** A frame addressed to this engine is classified by the one
//! dpf table in which every channel installed its filter: the owner of a
//! filter is `endpoint << 16 | channel`. A frame that matches nothing is
//! counted and dropped. For the endpoint it names, the engine either runs
//! `doRx(length, channel)` with the payload in the applet's `RxBuf` (on the
//! endpoint's own thread: frames for an applet wait in the port's inbox
//! until that thread, or an engine thread, drains it), or does what U-Net
//! does: a message of at most 56 bytes goes inline in the receive
//! descriptor; a longer one is copied into buffers popped from the free
//! queue (at most 14), whose offsets the descriptor lists. A message
//! between two endpoints of this engine is copied once: its frame carries
//! only the bytes a filter can read (the engine's reach), and delivery
//! copies the rest from the sender's buffer area.
//!
//! **Order and progress.** Frames an applet makes while it runs are queued
//! and sent after it returns, so an applet never runs inside another
//! endpoint's critical section and ping-pong between applets is a loop, not
//! a recursion. One thread at a time services an endpoint's transmit queue
//! and delivers what it took, in order, so a channel's messages arrive in
//! the order they were pushed. The engine runs on threads of its own
//! ([`Engine::start`]) or, by default, on the application's threads: a
//! send services the sender's transmit queue, a receive on an empty queue
//! polls the transport.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use thiserror::Error;

use crate::frame::{
    self, Addr, EndpointId, HEADER_LEN, endpoint_generation, endpoint_id, endpoint_slot,
};
use crate::layout::{Config, INLINE_MAX, Layout, RX_BUFFERS_MAX, RxDesc, TxDesc, TxStatus};
use crate::natives::{self, HostError, NativeHost, RxBody};
use crate::ring::{Consumer, Producer};
use crate::shm::{Segment, ShmQueue, queues};
use crate::transport::Transport;

/// Errors of the engine's control operations. A failed operation leaves
/// the engine, its filters and its endpoints as they were.
#[derive(Debug, Error)]
pub enum EngineError {
    /// A bad endpoint configuration.
    #[error(transparent)]
    Config(#[from] crate::error::ConfigError),
    /// The operating system refused the shared memory.
    #[error("endpoint memory: {0}")]
    Memory(#[from] std::io::Error),
    /// The applet failed to load, verify or construct.
    #[error("applet: {0}")]
    Applet(#[from] jive::LoadError),
    /// The applet lacks a method the engine calls, or declares it with
    /// other parameters.
    #[error("applet: {0}")]
    AppletShape(String),
    /// A filter failed to parse or compile.
    #[error("filter: {0}")]
    Filter(#[from] dpf::Error),
    /// The copy loops could not be generated.
    #[error("copy loop: {0}")]
    Copy(#[from] ilp::Error),
    /// The endpoint id or channel tag space is exhausted.
    #[error("{0}")]
    Exhausted(&'static str),
    /// No such endpoint or channel.
    #[error("{0}")]
    NotFound(String),
    /// The channel was closed because its peer, an endpoint of this
    /// engine, went away: nothing more is sent or received on it.
    #[error("channel {chan} of endpoint {id} is closed: its peer endpoint went away")]
    ChannelClosed {
        /// The endpoint.
        id: EndpointId,
        /// The channel's tag.
        chan: u16,
    },
    /// An engine in another process refused the request (its message), or
    /// could not be reached.
    #[error("engine: {0}")]
    Remote(String),
}

/// What the engine counts for one endpoint. Every message that does not
/// reach its destination is counted under exactly one reason.
///
/// The transmit-side counters (changed by the thread that services the
/// endpoint's transmit queue) and the receive-side ones (changed by the
/// threads that deliver to it) lie on different cache lines, so that two
/// applications sending to each other do not pass a line back and forth
/// per message.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct PortStats {
    /// Transmit descriptors taken.
    pub tx_descriptors: AtomicU64,
    /// Frames sent for this endpoint (by the engine or its applet).
    pub tx_frames: AtomicU64,
    /// Transmit descriptors rejected as malformed (length, offset, channel).
    pub tx_rejected: AtomicU64,
    /// Transmit descriptors on a channel closed because its peer went
    /// away (not sent; completed as [`TxStatus::Closed`]).
    pub tx_closed: AtomicU64,
    _line: [u64; 4],
    /// Messages delivered to the receive queue.
    pub rx_delivered: AtomicU64,
    /// Arriving messages dropped: no free buffer.
    pub rx_no_buffer: AtomicU64,
    /// Arriving messages dropped: the receive queue was full.
    pub rx_queue_full: AtomicU64,
    /// Arriving messages dropped: longer than 14 buffers.
    pub rx_too_long: AtomicU64,
    /// Arriving messages dropped: UDP checksum mismatch.
    pub rx_bad_checksum: AtomicU64,
    /// Applet invocations that trapped (the message was dropped).
    pub applet_traps: AtomicU64,
    /// Messages the applet dropped by returning a negative value (e.g. the
    /// standard applet finding no free buffer).
    pub applet_drops: AtomicU64,
    /// Free-queue entries that were not buffer offsets (skipped).
    pub free_invalid: AtomicU64,
    /// Queue indices found inconsistent (a broken or hostile application).
    pub queue_corrupt: AtomicU64,
    /// Applet invocations ended for exceeding a budget of [`Budgets`]:
    /// fuel, time, frames or bytes pushed (each is also an applet trap, and
    /// its message is counted there).
    pub applet_overruns: AtomicU64,
    /// Times the endpoint was set aside after an overrun ([`Budgets::throttle`]).
    pub applet_throttled: AtomicU64,
}

/// A snapshot of [`PortStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounts {
    /// See [`PortStats::tx_descriptors`].
    pub tx_descriptors: u64,
    /// See [`PortStats::tx_frames`].
    pub tx_frames: u64,
    /// See [`PortStats::tx_rejected`].
    pub tx_rejected: u64,
    /// See [`PortStats::tx_closed`].
    pub tx_closed: u64,
    /// See [`PortStats::rx_delivered`].
    pub rx_delivered: u64,
    /// See [`PortStats::rx_no_buffer`].
    pub rx_no_buffer: u64,
    /// See [`PortStats::rx_queue_full`].
    pub rx_queue_full: u64,
    /// See [`PortStats::rx_too_long`].
    pub rx_too_long: u64,
    /// See [`PortStats::rx_bad_checksum`].
    pub rx_bad_checksum: u64,
    /// See [`PortStats::applet_traps`].
    pub applet_traps: u64,
    /// See [`PortStats::applet_drops`].
    pub applet_drops: u64,
    /// See [`PortStats::free_invalid`].
    pub free_invalid: u64,
    /// See [`PortStats::queue_corrupt`].
    pub queue_corrupt: u64,
    /// See [`PortStats::applet_overruns`].
    pub applet_overruns: u64,
    /// See [`PortStats::applet_throttled`].
    pub applet_throttled: u64,
}

impl PortStats {
    fn snapshot(&self) -> PortCounts {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PortCounts {
            tx_descriptors: l(&self.tx_descriptors),
            tx_frames: l(&self.tx_frames),
            tx_rejected: l(&self.tx_rejected),
            tx_closed: l(&self.tx_closed),
            rx_delivered: l(&self.rx_delivered),
            rx_no_buffer: l(&self.rx_no_buffer),
            rx_queue_full: l(&self.rx_queue_full),
            rx_too_long: l(&self.rx_too_long),
            rx_bad_checksum: l(&self.rx_bad_checksum),
            applet_traps: l(&self.applet_traps),
            applet_drops: l(&self.applet_drops),
            free_invalid: l(&self.free_invalid),
            queue_corrupt: l(&self.queue_corrupt),
            applet_overruns: l(&self.applet_overruns),
            applet_throttled: l(&self.applet_throttled),
        }
    }
}

/// Counts one event on a counter that one thread at a time changes: a
/// port's transmit counters under its transmit lock, its receive counters
/// under its receive lock, `frames_in` under the transport's lock
/// (`tx_frames` and `queue_corrupt`, changed on both sides, use
/// [`bump_shared`]). A load
/// and a store suffice (no read-modify-write on the per-message path);
/// other threads read the counters with relaxed loads.
#[inline]
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// Counts one event of the engine, from any thread.
#[inline]
fn bump_shared(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// What the engine counts for itself. With [`PortCounts`] this accounts
/// for every message the engine takes: each frame is delivered, or dropped
/// and counted under exactly one of the reasons below or an endpoint's.
///
/// The `transport_*` fields are the transport's own counters
/// ([`crate::transport::TransportStats`]) of frames it accepted and then
/// lost, read when the counts are taken: between two engines on one
/// `loop` hub, frames the sender handed out (`frames_out`) are the
/// receiver's `frames_in` plus the sender's `transport_no_route` and
/// `transport_queue_full`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EngineCounts {
    /// Frames received from the transport (frames an engine sends to its
    /// own address are delivered without it and not counted here).
    pub frames_in: u64,
    /// Frames that matched no filter, or whose endpoint is gone (dropped).
    pub unmatched: u64,
    /// Frames that failed the header check (dropped).
    pub malformed: u64,
    /// Frames handed to the transport.
    pub frames_out: u64,
    /// Frames the transport refused or failed to send (`udp`: the socket
    /// buffer stayed full, `sendmmsg` failed; `packet`: the transmit ring
    /// stayed full), dropped.
    pub send_errors: u64,
    /// Frames the transport took but could not route: no port attached at
    /// the destination address (`loop`), dropped.
    pub transport_no_route: u64,
    /// Frames the transport took but the destination's queue was full
    /// (`loop`: 1,024 frames or 4 MiB by default), dropped.
    pub transport_queue_full: u64,
    /// Frames lost on the way in before the transport saw them, where the
    /// system reports it (`udp`: socket buffer overflows; `packet`: receive
    /// ring overruns).
    pub transport_overruns: u64,
    /// Frames that arrived but were not unet frames (the transport dropped
    /// them before the engine's header check).
    pub transport_not_unet: u64,
    /// Frames that were waiting for an endpoint's applet when the endpoint
    /// was closed, or arrived for it while it closed (dropped).
    pub closed: u64,
}

impl EngineCounts {
    /// Frames lost at this engine or its transport, every reason summed.
    pub fn dropped(&self) -> u64 {
        self.unmatched
            + self.malformed
            + self.send_errors
            + self.transport_no_route
            + self.transport_queue_full
            + self.transport_overruns
            + self.transport_not_unet
            + self.closed
    }
}

#[derive(Debug, Default)]
struct EngineStats {
    frames_in: AtomicU64,
    unmatched: AtomicU64,
    malformed: AtomicU64,
    frames_out: AtomicU64,
    send_errors: AtomicU64,
    closed: AtomicU64,
}

/// Options of a channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelOptions {
    /// Send a UDP checksum (computed while copying, by ilp) and have the
    /// receiver check it (the receiver checks any frame that carries one).
    pub checksum: bool,
}

/// A channel, as the transmit path needs it: the frame header every
/// message on it carries (its filters are kept with the port's control
/// state, off the data path).
#[derive(Debug, Clone)]
struct Channel {
    template: [u8; HEADER_LEN],
    /// Whether its frames carry a UDP checksum.
    checksum: bool,
    /// Whether its peer is on this engine (its frames never leave it).
    local: bool,
    /// Whether it was closed because its peer went away: sending on it
    /// fails, and its filters are gone.
    closed: bool,
}

/// An installed applet and its resolved entry points.
struct Loaded {
    applet: jive::Applet,
    do_tx: jive::Method,
    do_rx: jive::Method,
    rxbuf: jive::StaticBytes,
}

/// The per-endpoint policy for applets that trap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TrapPolicy {
    /// Keep the applet installed whatever happens (the default): each trap
    /// drops its message and is counted.
    #[default]
    Keep,
    /// Uninstall the applet after this many traps; the endpoint then works
    /// as standard U-Net.
    UninstallAfter(u64),
}

/// What one endpoint's applet and its application may make the engine
/// hold or spend. An engine's budgets are fixed when it is made
/// ([`Engine::with_budgets`]); [`Budgets::default`] is what
/// [`Engine::new`] uses, and docs/unet.md's trust model lists each default.
/// Exceeding a budget is never an abort: an applet invocation that exceeds
/// one traps (its message is dropped and counted as an applet trap, the
/// overrun as [`PortStats::applet_overruns`]); a frame past the inbox's
/// budget is dropped and counted as a full receive queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    /// Frames one applet invocation may push (`txPush`); the endpoint's
    /// transmit depth if that is smaller. Default 64.
    pub push_frames: usize,
    /// Payload bytes the frames of one invocation may hold together.
    /// Default 4 MiB: the paper's bandwidth experiment sends a burst of 25
    /// messages of up to 64 KiB per transmit request (`Burst25PerTx` in
    /// `fastpath demo`), 1.6 MiB, with room to spare.
    pub push_bytes: usize,
    /// Fuel of one invocation (jive's metering: taken backward branches,
    /// switches and calls). Default 100,000, about 50 µs of the tightest
    /// loop with the JIT (docs/unet.md has the measurement).
    pub applet_fuel: u64,
    /// Time of one invocation. The natives check it (after the first 256
    /// units of native work of an invocation, then every 256: a unit is a
    /// call or 256 bytes moved; the thread's CPU time from the first check
    /// on, so time the system spends preempting it does not count), so an
    /// applet that loops through the natives traps once it is spent;
    /// compute between two natives is bounded by the fuel. Default 1 ms:
    /// on a loaded machine a well-behaved invocation's CPU time has spikes
    /// far above its usual few µs (interrupts are charged to the thread
    /// they interrupt; docs/unet.md has the measurement), and an overrun
    /// drops the invocation's message.
    pub applet_time: Duration,
    /// Frames an applet's inbox holds while they wait for its thread.
    /// Default 1,024.
    pub inbox_frames: usize,
    /// Bytes the frames in an applet's inbox hold together. Default 4 MiB:
    /// a burst of the paper's bandwidth experiment (25 messages of up to
    /// 64 KiB, 1.6 MiB) waits whole for the receiving applet, with room to
    /// spare.
    pub inbox_bytes: usize,
    /// Applet time one endpoint gets per round of an engine thread: a
    /// service of its transmit queue or a drain of its inbox stops taking
    /// more once this is spent, and the thread goes on to the next
    /// endpoint. Default 200 µs.
    pub round_time: Duration,
    /// After an invocation that overran a budget, the endpoint's applet is
    /// not run again until `throttle` times the invocation's duration has
    /// passed (its descriptors and inbox frames wait), so that an applet
    /// that always burns its budget gets at most `1 / (1 + throttle)` of a
    /// thread. 0 turns throttling off. Default 64.
    pub throttle: u32,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            push_frames: 64,
            push_bytes: 4 << 20,
            applet_fuel: 100_000,
            applet_time: Duration::from_millis(1),
            inbox_frames: 1024,
            inbox_bytes: 4 << 20,
            round_time: Duration::from_micros(200),
            throttle: 64,
        }
    }
}

/// The longest an endpoint is set aside after one overrun, whatever the
/// overrun's length.
const THROTTLE_MAX: Duration = Duration::from_millis(50);

/// Work units (one per native call, one per 256 bytes it moves) an
/// invocation may spend before the natives first read the clock, and
/// between two readings after that.
const TIME_CHECK_EVERY: u64 = 256;

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, the one given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The state of the applet invocation running on an [`Io`]: what it has
/// pushed and done, against its budgets.
#[derive(Debug, Clone, Copy)]
struct Invocation {
    frames: usize,
    bytes: usize,
    work: u64,
    next_check: u64,
    /// The thread's CPU time when the natives first read it (`None`: not
    /// yet).
    cpu_start: Option<Duration>,
    /// Whether it exceeded a budget (the natives set this before they trap).
    overran: bool,
}

impl Invocation {
    fn new() -> Invocation {
        Invocation {
            frames: 0,
            bytes: 0,
            work: 0,
            next_check: TIME_CHECK_EVERY,
            cpu_start: None,
            overran: false,
        }
    }
}

/// The rest of a frame's payload, left where the sending application put
/// it: a frame from one endpoint to another of the same engine carries in
/// the outbox only the bytes any installed filter can read (see
/// [`Engine`]'s reach), and delivery copies the rest straight from the
/// sender's buffer area into the receiver's buffers: one copy of the
/// message instead of two.
#[derive(Debug, Clone)]
struct Tail {
    seg: Arc<Segment>,
    /// Offset of the rest in `seg`.
    at: usize,
    len: usize,
}

/// A frame's payload as delivery sees it: the bytes in the frame, then the
/// tail's, if any.
#[derive(Clone, Copy)]
struct Payload<'a> {
    head: &'a [u8],
    tail: Option<&'a Tail>,
}

impl Payload<'_> {
    fn len(&self) -> usize {
        self.head.len() + self.tail.map_or(0, |t| t.len)
    }

    /// Calls `f` on the pieces of bytes `[start, end)`, in order.
    fn pieces(&self, start: usize, end: usize, mut f: impl FnMut(&[u8])) {
        let h = self.head.len();
        if start < h {
            f(&self.head[start..end.min(h)]);
        }
        if let Some(t) = self.tail
            && end > h
        {
            let from = start.max(h) - h;
            t.seg.with_bytes(t.at + from, end - h - from, f);
        }
    }

    /// Copies bytes `[start, start + dst.len())` into `dst`.
    fn copy_to(&self, start: usize, dst: &mut [u8]) {
        let mut k = 0;
        self.pieces(start, start + dst.len(), |p| {
            dst[k..k + p.len()].copy_from_slice(p);
            k += p.len();
        });
    }
}

/// Frames waiting to be sent or delivered, one byte vector for all. The
/// vector only grows: `clear` resets a cursor, so a reused outbox writes
/// frames without allocating or zeroing memory.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    bytes: Vec<u8>,
    used: usize,
    /// Each frame's start and length in `bytes`, and its index in `tails`
    /// (`NO_TAIL`: none), so that most frames need no drop.
    frames: Vec<(usize, usize, u32)>,
    tails: Vec<Tail>,
}

const NO_TAIL: u32 = u32::MAX;

impl Outbox {
    fn push_frame(&mut self, len: usize) -> &mut [u8] {
        let start = self.used;
        if self.bytes.len() < start + len {
            self.bytes.resize(start + len, 0);
        }
        self.used = start + len;
        self.frames.push((start, len, NO_TAIL));
        &mut self.bytes[start..start + len]
    }

    /// Gives the frame pushed last a tail.
    fn set_tail(&mut self, tail: Tail) {
        if let Some(f) = self.frames.last_mut() {
            f.2 = self.tails.len() as u32;
            self.tails.push(tail);
        }
    }

    fn clear(&mut self) {
        self.used = 0;
        self.frames.clear();
        if !self.tails.is_empty() {
            self.tails.clear();
        }
    }

    fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&Tail>)> {
        self.frames
            .iter()
            .map(|&(s, l, t)| (&self.bytes[s..s + l], self.tails.get(t as usize)))
    }

    /// Appends a whole frame: `f` and then its tail's bytes.
    fn push_whole(&mut self, f: &[u8], tail: Option<&Tail>) {
        let n = f.len() + tail.map_or(0, |t| t.len);
        let buf = self.push_frame(n);
        buf[..f.len()].copy_from_slice(f);
        if let Some(t) = tail {
            t.seg.read_bytes(t.at, &mut buf[f.len()..]);
        }
    }

    /// Appends every frame of `other`, whole.
    fn append(&mut self, other: &Outbox) {
        for (f, t) in other.iter() {
            self.push_whole(f, t);
        }
    }
}

thread_local! {
    /// Each thread's spare outboxes, so that servicing a queue allocates
    /// nothing once warm.
    static OUTBOXES: std::cell::RefCell<Vec<Outbox>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn outbox() -> Outbox {
    OUTBOXES.with(|o| o.borrow_mut().pop()).unwrap_or_default()
}

/// Outboxes larger than this are not kept for reuse: a burst's memory goes
/// back when the burst is over.
const OUTBOX_KEEP: usize = 1 << 20;

fn recycle(mut o: Outbox) {
    if o.bytes.len() > OUTBOX_KEEP {
        return;
    }
    o.clear();
    OUTBOXES.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < 4 {
            p.push(o);
        }
    });
}

/// What making frames for an endpoint's channels needs: their prebuilt
/// headers, an outbox, the copy loops. The transmit side and the receive
/// side (for an applet's `txPush` in `doRx`) each hold one, so that neither
/// takes the other's lock to send.
struct Framer {
    channels: Vec<Option<Channel>>,
    /// The engine's reach (see `Inner::reach`).
    reach: Arc<AtomicUsize>,
    out: Outbox,
    stats: Arc<PortStats>,
    max_message: u32,
    copy: ilp::Pipeline,
    copy_sum: ilp::Pipeline,
}

impl Framer {
    /// Writes a frame for `chan` with a `len`-byte payload into the outbox:
    /// the channel's header with the lengths patched. Returns whether the
    /// channel wants a UDP checksum, and the frame, whose payload the
    /// caller writes.
    fn frame(&mut self, chan: u16, len: u32) -> Result<(bool, &mut [u8]), HostError> {
        frame_parts(
            &self.channels,
            &mut self.out,
            &self.stats,
            self.max_message,
            chan,
            len,
            len,
        )
    }

    fn set_channel(&mut self, tag: u16, ch: Option<Channel>) {
        let slot = usize::from(tag);
        if self.channels.len() <= slot {
            self.channels.resize(slot + 1, None);
        }
        self.channels[slot] = ch;
    }

    /// `None` if `tag` names no channel, else whether it is closed.
    fn channel_closed(&self, tag: u16) -> Option<bool> {
        self.channels
            .get(usize::from(tag))
            .and_then(Option::as_ref)
            .map(|c| c.closed)
    }

    /// Marks channel `tag` closed (its peer went away).
    fn close_channel(&mut self, tag: u16) {
        if let Some(Some(c)) = self.channels.get_mut(usize::from(tag)) {
            c.closed = true;
        }
    }

    /// Sends `len` bytes of `seg` at `at` on `chan` (the standard U-Net
    /// transmit): the header, then one ilp loop copying the message (and
    /// summing it when the channel wants a checksum). To a peer on this
    /// engine, without a checksum, only the bytes a filter can read go into
    /// the frame, and delivery copies the rest from here (see [`Tail`]).
    fn transmit_from(
        &mut self,
        seg: &Arc<Segment>,
        at: usize,
        chan: u16,
        len: u32,
    ) -> Result<(), HostError> {
        let Framer {
            channels,
            reach,
            out,
            stats,
            max_message,
            copy,
            copy_sum,
        } = self;
        if let Some(ch) = channels.get(usize::from(chan)).and_then(Option::as_ref)
            && ch.local
            && !ch.checksum
            && !ch.closed
        {
            // Below ILP_MIN_COPY bytes the whole message is cheaper to carry.
            let carried = reach
                .load(Ordering::Acquire)
                .saturating_sub(HEADER_LEN)
                .max(ILP_MIN_COPY);
            if (len as usize) > carried {
                let (_, buf) = frame_parts(
                    channels,
                    out,
                    stats,
                    *max_message,
                    chan,
                    len,
                    carried as u32,
                )?;
                seg.read_bytes(at, &mut buf[HEADER_LEN..]);
                out.set_tail(Tail {
                    seg: seg.clone(),
                    at: at + carried,
                    len: len as usize - carried,
                });
                return Ok(());
            }
        }
        let (want_sum, buf) = frame_parts(channels, out, stats, *max_message, chan, len, len)?;
        let (hdr, body) = buf
            .split_first_chunk_mut::<HEADER_LEN>()
            .expect("a frame holds its header");
        if !want_sum && (len as usize) < ILP_MIN_COPY {
            seg.read_bytes(at, body);
            return Ok(());
        }
        let p = if want_sum { copy_sum } else { copy };
        let mut st = ilp::State::new();
        seg.with_bytes(at, len as usize, |src| p.run(src, body, &mut st))
            .map_err(|e| HostError::Transport(e.to_string()))?;
        if want_sum {
            let c = frame::udp_checksum_with_payload_sum(hdr, u32::from(st.sum));
            hdr[frame::UDP_CSUM..frame::UDP_CSUM + 2].copy_from_slice(&c.to_be_bytes());
        }
        Ok(())
    }
}

/// [`Framer::frame`] on the fields it needs, so that a caller may keep
/// borrowing the others: a frame for a `len`-byte message of which the
/// first `carried` bytes follow the header (the caller keeps the rest as a
/// [`Tail`]).
fn frame_parts<'a>(
    channels: &[Option<Channel>],
    out: &'a mut Outbox,
    stats: &PortStats,
    max_message: u32,
    chan: u16,
    len: u32,
    carried: u32,
) -> Result<(bool, &'a mut [u8]), HostError> {
    let ch = channels
        .get(usize::from(chan))
        .and_then(Option::as_ref)
        .ok_or(HostError::NoSuchChannel(chan))?;
    if ch.closed {
        return Err(HostError::ChannelClosed(chan));
    }
    if len > max_message {
        return Err(HostError::TooLong {
            len,
            max: max_message,
        });
    }
    let buf = out.push_frame(HEADER_LEN + carried.min(len) as usize);
    let (hdr, _) = buf
        .split_first_chunk_mut::<HEADER_LEN>()
        .expect("a frame holds its header");
    *hdr = ch.template;
    frame::patch_lengths(hdr, len as usize);
    bump_shared(&stats.tx_frames);
    Ok((ch.checksum, buf))
}

/// The engine's receive side of an endpoint, reached by the natives during
/// an applet invocation ([`NativeHost`]) and by the standard delivery.
pub struct Io {
    seg: Arc<Segment>,
    layout: Layout,
    rx: Producer<RxDesc, ShmQueue>,
    free: Consumer<u32, ShmQueue>,
    /// Valid buffers taken from the free queue and not used yet.
    spare: Vec<u32>,
    stats: Arc<PortStats>,
    framer: Framer,
    /// The engine's budgets, `push_frames` cut to the transmit depth.
    budgets: Budgets,
    /// The running (or last) applet invocation.
    inv: Invocation,
}

impl Io {
    /// Starts an applet invocation's accounting.
    fn begin(&mut self) {
        self.inv = Invocation::new();
    }

    /// Refuses the invocation's request for exceeding `what` (its `limit`).
    #[cold]
    fn over(&mut self, what: &'static str, limit: u64) -> HostError {
        self.inv.overran = true;
        HostError::OverBudget { what, limit }
    }

    /// The next valid buffer: a spare one, or one from the free queue
    /// (entries that are not buffer offsets are counted and skipped).
    fn take_buffer(&mut self) -> Option<u32> {
        if let Some(b) = self.spare.pop() {
            return Some(b);
        }
        loop {
            match self.free.pop() {
                Ok(Some(off)) if self.layout.is_buffer(off) => return Some(off),
                Ok(Some(_)) => bump(&self.stats.free_invalid),
                Ok(None) => return None,
                Err(_) => {
                    bump_shared(&self.stats.queue_corrupt);
                    return None;
                }
            }
        }
    }

    fn push_rx_desc(&mut self, d: RxDesc) -> Result<(), HostError> {
        match self.rx.push(d) {
            Ok(true) => {
                bump(&self.stats.rx_delivered);
                Ok(())
            }
            Ok(false) => Err(HostError::RxQueueFull),
            Err(_) => {
                bump_shared(&self.stats.queue_corrupt);
                Err(HostError::RxQueueFull)
            }
        }
    }

    /// The standard U-Net receive of `payload` on `chan`.
    fn deliver_default(&mut self, chan: u16, payload: Payload<'_>) {
        let len = payload.len();
        if len <= INLINE_MAX {
            let d = match payload.tail {
                None => RxDesc::inline(chan, payload.head),
                Some(_) => {
                    let mut inline = [0u8; INLINE_MAX];
                    payload.copy_to(0, &mut inline[..len]);
                    RxDesc::inline(chan, &inline[..len])
                }
            };
            if self.push_rx_desc(d).is_err() {
                bump(&self.stats.rx_queue_full);
            }
            return;
        }
        let bs = self.layout.config.buffer_size as usize;
        let n = len.div_ceil(bs);
        if n > RX_BUFFERS_MAX {
            bump(&self.stats.rx_too_long);
            return;
        }
        let mut offs = [0u32; RX_BUFFERS_MAX];
        for i in 0..n {
            match self.take_buffer() {
                Some(b) => offs[i] = b,
                None => {
                    self.spare.extend_from_slice(&offs[..i]);
                    bump(&self.stats.rx_no_buffer);
                    return;
                }
            }
        }
        for (i, &off) in offs[..n].iter().enumerate() {
            let (start, end) = (i * bs, ((i + 1) * bs).min(len));
            let mut at = self.layout.area + off as usize;
            payload.pieces(start, end, |p| {
                self.seg.write_bytes(at, p);
                at += p.len();
            });
        }
        if self
            .push_rx_desc(RxDesc::buffers(chan, len as u32, &offs[..n]))
            .is_err()
        {
            self.spare.extend_from_slice(&offs[..n]);
            bump(&self.stats.rx_queue_full);
        }
    }
}

impl NativeHost for Io {
    fn buffer_size(&self) -> u32 {
        self.layout.config.buffer_size
    }

    fn area_len(&self) -> u32 {
        self.layout.area_len as u32
    }

    fn read_area(&self, off: u32, dst: &mut [i8]) {
        let at = self.layout.area + off as usize;
        self.seg
            .with_bytes(at, dst.len(), |src| natives::u8_to_i8(dst, src));
    }

    fn write_area(&mut self, off: u32, src: &[i8]) {
        let at = self.layout.area + off as usize;
        self.seg
            .with_bytes_mut(at, src.len(), |dst| natives::i8_to_u8(dst, src));
    }

    fn pop_free(&mut self) -> Option<u32> {
        self.take_buffer()
    }

    /// A full receive queue drops the message, as it does without an
    /// applet: counted, and its buffers kept for the next message (they are
    /// not lost to the application). The applet is not told (the natives
    /// are `void`, as in the paper).
    fn push_rx(&mut self, chan: u16, len: u32, body: RxBody<'_>) -> Result<(), HostError> {
        let d = match body {
            RxBody::Inline(p) => RxDesc::inline(chan, p),
            RxBody::Buffers(o) => RxDesc::buffers(chan, len, o),
        };
        if self.push_rx_desc(d).is_err() {
            bump(&self.stats.rx_queue_full);
            if let RxBody::Buffers(o) = body {
                self.spare.extend_from_slice(o);
            }
        }
        Ok(())
    }

    /// Counts a native call moving `bytes` against the invocation's time
    /// budget, reading the clock only every [`TIME_CHECK_EVERY`] units.
    fn charge(&mut self, bytes: usize) -> Result<(), HostError> {
        let inv = &mut self.inv;
        inv.work += 1 + (bytes as u64 >> 8);
        if inv.work >= inv.next_check {
            inv.next_check = inv.work + TIME_CHECK_EVERY;
            let limit = self.budgets.applet_time;
            // The thread's CPU time from the first check on, so that an
            // invocation preempted by the system is never charged for the
            // time it waited. What ran before the first check is bounded
            // otherwise: at most `TIME_CHECK_EVERY` units of native work (a
            // native charges before it moves its bytes) and the fuel.
            let cpu = thread_cpu_time();
            let start = *inv.cpu_start.get_or_insert(cpu);
            if cpu.saturating_sub(start) > limit {
                return Err(self.over("time per invocation (µs)", limit.as_micros() as u64));
            }
        }
        Ok(())
    }

    fn transmit(&mut self, chan: u16, payload: &[i8]) -> Result<(), HostError> {
        if self.inv.frames >= self.budgets.push_frames {
            return Err(self.over(
                "frames pushed per invocation",
                self.budgets.push_frames as u64,
            ));
        }
        if self.inv.bytes + payload.len() > self.budgets.push_bytes {
            return Err(self.over(
                "bytes pushed per invocation",
                self.budgets.push_bytes as u64,
            ));
        }
        self.inv.frames += 1;
        self.inv.bytes += payload.len();
        let (want_sum, buf) = self.framer.frame(chan, payload.len() as u32)?;
        natives::i8_to_u8(&mut buf[HEADER_LEN..], payload);
        if want_sum {
            // Cannot fail: the frame holds a whole header.
            let _ = frame::set_udp_checksum(buf);
        }
        Ok(())
    }

    fn max_message(&self) -> u32 {
        self.framer.max_message
    }
}

/// The transmit side of a port: the engine's end of the transmit queue and
/// what sending without an applet needs. Its lock is held by the thread
/// servicing the queue, from taking descriptors until their frames are
/// delivered, so a channel's messages arrive in order.
struct TxSide {
    tx: Consumer<TxDesc, ShmQueue>,
    framer: Framer,
}

/// The receive side of a port: the receive and free queues, the applet
/// (which `doTx` reaches through this lock too), its trap policy.
struct RxSide {
    io: Io,
    /// The inbox's frames being run (traded with the inbox by `drain`).
    batch: Inbox,
    applet: Option<Loaded>,
    policy: TrapPolicy,
    traps_since_install: u64,
    /// Invocations in a row that overran a budget (each doubles the
    /// throttle, up to [`THROTTLE_MAX`]).
    overruns_in_row: u32,
    /// Frames of `batch` already run: a drain that spent its round's time
    /// leaves the rest here, ahead of the inbox.
    batch_pos: usize,
}

/// Frames waiting for an applet's `doRx`, with the channel each arrived on.
#[derive(Debug, Default)]
struct Inbox {
    frames: Outbox,
    chans: Vec<u16>,
}

/// The engine's side of one endpoint.
pub struct Port {
    /// Slot and generation ([`EndpointId`]).
    id: EndpointId,
    seg: Arc<Segment>,
    layout: Layout,
    tx: CacheLine<Mutex<TxSide>>,
    rx: CacheLine<Mutex<RxSide>>,
    /// Whether `rx` holds an applet, so that transmit takes the receive
    /// side's lock only when an applet's `doTx` needs it.
    has_applet: AtomicBool,
    /// Frames for an applet's `doRx`, in arrival order, waiting for a
    /// thread that drains them ([`Engine::drain`]): the endpoint's own
    /// application thread (its receive calls) or the engine's threads. So
    /// an applet runs on the thread of its own endpoint, and its heap and
    /// interpreter state stay in that core's cache, instead of moving to
    /// whichever thread delivered the frame.
    inbox: CacheLine<Mutex<Inbox>>,
    /// Whether `inbox` holds frames (changed under its lock).
    pending: AtomicBool,
    /// Set when the endpoint is removed (under the receive side's lock and
    /// the inbox's): frames that reach it from then on are counted as
    /// [`EngineCounts::closed`], not delivered.
    closed: AtomicBool,
    /// The thread that last drove this endpoint from its application
    /// ([`Port::claim`]): frames for its applet that arrive on that thread
    /// skip the inbox.
    owner: AtomicU64,
    /// The filters of each channel (`None`: no channel with that tag): the
    /// control operations' state, off the data path. A closed channel
    /// keeps its tag, with no filters.
    filters: Mutex<Vec<Option<Vec<dpf::FilterId>>>>,
    /// The tags of the channels closed because their peer went away, in
    /// the order they closed (taken after `filters`).
    closed_chans: Mutex<Vec<u16>>,
    stats: Arc<PortStats>,
    /// The engine's budgets (the inbox's are checked without the receive
    /// side's lock).
    budgets: Budgets,
    /// Until when (nanoseconds on [`clock_ns`]) the applet is set aside
    /// after an overrun; 0: not throttled.
    throttle_until: AtomicU64,
}

impl core::fmt::Debug for Port {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Port")
            .field("id", &self.id)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

/// A value on a cache line of its own (a lock that threads of two
/// applications take in turn shares its line with nothing else).
#[repr(align(64))]
#[derive(Debug, Default)]
struct CacheLine<T>(T);

impl<T> core::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every structure behind these locks is consistent between statements
    // that can panic, so a poisoned lock is taken as is.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A token of the calling thread (never 0).
fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

/// Nanoseconds since the first call in this process (never 0 after it).
fn clock_ns(now: Instant) -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let epoch = *EPOCH.get_or_init(|| Instant::now() - Duration::from_nanos(1));
    now.saturating_duration_since(epoch).as_nanos() as u64
}

impl Port {
    /// Whether the applet is set aside after an overrun (a clock read only
    /// while it is).
    fn throttled(&self) -> bool {
        let until = self.throttle_until.load(Ordering::Relaxed);
        if until == 0 {
            return false;
        }
        if clock_ns(Instant::now()) < until {
            return true;
        }
        let _ =
            self.throttle_until
                .compare_exchange(until, 0, Ordering::Relaxed, Ordering::Relaxed);
        false
    }

    /// Records the calling thread as the one that runs this endpoint's
    /// application (the endpoint's calls do this), so that its applet's
    /// frames delivered on this thread run at once rather than through the
    /// inbox. A store only when the thread changes.
    pub fn claim(&self) {
        let me = thread_token();
        if self.owner.load(Ordering::Relaxed) != me {
            self.owner.store(me, Ordering::Relaxed);
        }
    }

    /// Whether the calling thread is the one that runs this endpoint's
    /// application (the last to [`Port::claim`] it).
    fn is_owner(&self) -> bool {
        self.owner.load(Ordering::Relaxed) == thread_token()
    }

    /// The endpoint's id on its engine (slot and generation).
    pub fn id(&self) -> EndpointId {
        self.id
    }

    /// The endpoint's slot: its id without the generation.
    pub fn slot(&self) -> u16 {
        endpoint_slot(self.id)
    }

    /// The endpoint's counters.
    pub fn counts(&self) -> PortCounts {
        self.stats.snapshot()
    }

    /// The shared segment.
    pub fn segment(&self) -> &Arc<Segment> {
        &self.seg
    }

    /// Its layout (the engine's private copy).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

/// Messages shorter than this are copied with `memcpy` rather than an ilp
/// loop, whose set-up (about 250 instructions, by callgrind) outweighs the
/// copy of a small message; checksummed channels always use ilp.
const ILP_MIN_COPY: usize = 512;

/// How many transmit descriptors one service of a queue takes at most
/// before it delivers them (bounds the outbox and the latency of others).
const TX_BUDGET: usize = 32;
/// How many frames one poll of the transport takes at most.
const RX_BUDGET: usize = 32;
/// How many rounds of applet-made frames one pump follows before it leaves
/// the rest for the next call (an applet ping-pong that never ends must not
/// hold a thread forever).
const PUMP_ROUNDS: usize = 4096;

struct Inner {
    id: u64,
    local: Addr,
    transport: Mutex<Box<dyn Transport>>,
    /// The transport's lock-free "may have frames" test, if it has one.
    readiness: Option<crate::transport::Readiness>,
    max_payload: u32,
    table: Mutex<dpf::Table>,
    /// The endpoints, indexed by slot.
    ports: ArcSwap<Vec<Option<Arc<Port>>>>,
    control: Mutex<()>,
    /// The last generation each slot was given (0: never used); a slot at
    /// `u16::MAX` is retired, so that no id is handed out twice.
    generations: Mutex<Vec<u16>>,
    /// For each endpoint of this engine, the channels on this engine that
    /// have it as their peer (owner's id, tag): closed when it goes.
    local_peers: Mutex<std::collections::HashMap<EndpointId, Vec<(EndpointId, u16)>>>,
    /// How many leading bytes of a frame the installed filters can read, at
    /// most: the largest end of a field any filter loads (a field counted
    /// from the transport header taken at 34, the engine's own frames'
    /// IPv4 header being 20 bytes). Only that much of a message to an
    /// endpoint of this engine is copied into its frame ([`Tail`]); the
    /// classifier's verdict on that prefix is its verdict on the whole
    /// frame, since every field it loads lies inside the prefix or past
    /// the end of both.
    reach: Arc<AtomicUsize>,
    /// Each installed filter's reach.
    reaches: Mutex<std::collections::BTreeMap<dpf::FilterId, usize>>,
    /// Frames a pump left after [`PUMP_ROUNDS`] rounds, for the next poll.
    backlog: Mutex<Outbox>,
    has_backlog: AtomicBool,
    stats: EngineStats,
    stop: AtomicBool,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    budgets: Budgets,
    /// Where the next [`Engine::poll`] starts its round, so that an endpoint
    /// left waiting by one round's budget is early in the next.
    cursor: AtomicUsize,
}

/// The engine. Cheap to clone: clones share one engine.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl core::fmt::Debug for Engine {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Engine")
            .field("local", &self.inner.local)
            .finish_non_exhaustive()
    }
}

thread_local! {
    /// Each thread's readers of the engines' filter tables (a dpf reader is
    /// a thread registered with the table's code cache).
    static READERS: std::cell::RefCell<Vec<(u64, dpf::Reader)>> = const { std::cell::RefCell::new(Vec::new()) };
}

static NEXT_ENGINE: AtomicU64 = AtomicU64::new(1);

impl Engine {
    /// An engine on `transport`, run by the application's threads until
    /// [`Engine::start`] gives it threads of its own.
    pub fn new(transport: Box<dyn Transport>) -> Engine {
        Engine::with_budgets(transport, Budgets::default())
    }

    /// [`Engine::new`] with other [`Budgets`] for its endpoints and applets.
    pub fn with_budgets(transport: Box<dyn Transport>, budgets: Budgets) -> Engine {
        let local = transport.local();
        let max_payload = transport
            .max_frame()
            .saturating_sub(HEADER_LEN)
            .min(u32::MAX as usize) as u32;
        Engine {
            inner: Arc::new(Inner {
                id: NEXT_ENGINE.fetch_add(1, Ordering::Relaxed),
                local,
                readiness: transport.readiness(),
                transport: Mutex::new(transport),
                max_payload,
                table: Mutex::new(dpf::Table::new()),
                ports: ArcSwap::from_pointee(Vec::new()),
                control: Mutex::new(()),
                generations: Mutex::new(Vec::new()),
                local_peers: Mutex::new(std::collections::HashMap::new()),
                reach: Arc::new(AtomicUsize::new(HEADER_LEN)),
                reaches: Mutex::new(std::collections::BTreeMap::new()),
                backlog: Mutex::new(Outbox::default()),
                has_backlog: AtomicBool::new(false),
                stats: EngineStats::default(),
                stop: AtomicBool::new(false),
                threads: Mutex::new(Vec::new()),
                budgets,
                cursor: AtomicUsize::new(0),
            }),
        }
    }

    /// The budgets this engine enforces.
    pub fn budgets(&self) -> Budgets {
        self.inner.budgets
    }

    /// This engine's address.
    pub fn local(&self) -> Addr {
        self.inner.local
    }

    /// The engine's counters, with its transport's losses (this takes the
    /// transport's lock for a moment).
    pub fn counts(&self) -> EngineCounts {
        let t = lock(&self.inner.transport).stats();
        let s = &self.inner.stats;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EngineCounts {
            frames_in: l(&s.frames_in),
            unmatched: l(&s.unmatched),
            malformed: l(&s.malformed),
            frames_out: l(&s.frames_out),
            send_errors: l(&s.send_errors),
            transport_no_route: t.tx_no_route,
            transport_queue_full: t.tx_queue_full,
            transport_overruns: t.rx_overruns,
            transport_not_unet: t.rx_dropped,
            closed: l(&s.closed),
        }
    }

    /// The port of endpoint `id`, if it exists (an id whose generation is
    /// not the slot's current one names an endpoint that is gone).
    pub fn port(&self, id: EndpointId) -> Option<Arc<Port>> {
        self.inner
            .ports
            .load()
            .get(usize::from(endpoint_slot(id)))
            .and_then(Clone::clone)
            .filter(|p| p.id == id)
    }

    /// The ids of the endpoints that exist now, in slot order.
    pub fn endpoints(&self) -> Vec<EndpointId> {
        self.inner
            .ports
            .load()
            .iter()
            .flatten()
            .map(|p| p.id)
            .collect()
    }

    /// Creates an endpoint's segment and port, with an applet if given.
    pub fn create_port(
        &self,
        config: Config,
        applet: Option<&[u8]>,
    ) -> Result<Arc<Port>, EngineError> {
        let layout = Layout::new(config)?;
        let budgets = self.inner.budgets;
        let _c = lock(&self.inner.control);
        let ports = self.inner.ports.load_full();
        let mut generations = lock(&self.inner.generations);
        let gen_of = |g: &[u16], i: u16| g.get(usize::from(i)).copied().unwrap_or(0);
        let slot = (1..=u16::MAX)
            .find(|&i| {
                ports.get(usize::from(i)).is_none_or(Option::is_none)
                    && gen_of(&generations, i) < u16::MAX
            })
            .ok_or(EngineError::Exhausted(
                "every endpoint slot is in use or has used up its generations",
            ))?;
        let id = endpoint_id(slot, gen_of(&generations, slot) + 1);
        let seg = Arc::new(Segment::create(
            &format!("unet-endpoint-{slot}.{}", endpoint_generation(id)),
            layout.total,
        )?);
        seg.write_header(&layout.header(id));
        let (txq, rxq, freeq) = queues(&seg, &layout);
        let stats = Arc::new(PortStats::default());
        let framer = || -> Result<Framer, EngineError> {
            let pipeline =
                |steps: &[ilp::Step]| ilp::Pipeline::new(steps).map_err(EngineError::from);
            Ok(Framer {
                channels: Vec::new(),
                reach: self.inner.reach.clone(),
                out: Outbox::default(),
                stats: stats.clone(),
                max_message: layout.config.max_message().min(self.inner.max_payload),
                copy: pipeline(&[ilp::Step::Copy])?,
                copy_sum: pipeline(&[ilp::Step::Copy, ilp::Step::Checksum])?,
            })
        };
        let mut rx = RxSide {
            batch: Inbox::default(),
            io: Io {
                seg: seg.clone(),
                layout,
                rx: Producer::new(rxq),
                free: Consumer::new(freeq),
                spare: Vec::with_capacity(RX_BUFFERS_MAX),
                stats: stats.clone(),
                framer: framer()?,
                budgets: Budgets {
                    push_frames: budgets.push_frames.min(layout.config.tx_depth as usize),
                    ..budgets
                },
                inv: Invocation::new(),
            },
            applet: None,
            policy: TrapPolicy::Keep,
            traps_since_install: 0,
            overruns_in_row: 0,
            batch_pos: 0,
        };
        if let Some(bytes) = applet {
            rx.applet = Some(load_applet(bytes, &mut rx.io)?);
        }
        let port = Arc::new(Port {
            id,
            seg,
            layout,
            tx: CacheLine(Mutex::new(TxSide {
                tx: Consumer::new(txq),
                framer: framer()?,
            })),
            has_applet: AtomicBool::new(rx.applet.is_some()),
            rx: CacheLine(Mutex::new(rx)),
            inbox: CacheLine(Mutex::new(Inbox::default())),
            pending: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            owner: AtomicU64::new(0),
            filters: Mutex::new(Vec::new()),
            closed_chans: Mutex::new(Vec::new()),
            stats,
            budgets,
            throttle_until: AtomicU64::new(0),
        });
        let mut next: Vec<Option<Arc<Port>>> = ports.as_ref().clone();
        let at = usize::from(slot);
        if next.len() <= at {
            next.resize(at + 1, None);
        }
        next[at] = Some(port.clone());
        if generations.len() <= at {
            generations.resize(at + 1, 0);
        }
        generations[at] = endpoint_generation(id);
        self.inner.ports.store(Arc::new(next));
        Ok(port)
    }

    /// Installs a filter prepared (parsed, lowered, analyzed) before any
    /// lock was taken, and records its reach: under the locks only the
    /// table is merged and published, so a large filter's compilation
    /// holds up no other client, and one that does not compile never
    /// reaches the engine. The engine's reach grows before the filter is
    /// published, so that frames built from then on carry every byte it
    /// reads; a frame built before and classified after loses nothing but
    /// the new filter's verdict, as if it had been classified a moment
    /// earlier.
    fn install(
        &self,
        filter: dpf::Prepared,
        owner: u32,
        priority: i32,
    ) -> Result<dpf::FilterId, EngineError> {
        let reach = program_reach(filter.program());
        let mut reaches = lock(&self.inner.reaches);
        self.inner.reach.fetch_max(reach, Ordering::AcqRel);
        let installed = lock(&self.inner.table).install_prepared(filter, owner, priority);
        if let Ok(fid) = installed {
            reaches.insert(fid, reach);
        }
        self.publish_reach(&reaches);
        Ok(installed?)
    }

    /// Removes filter `fid` from the table and its reach.
    fn uninstall(&self, fid: dpf::FilterId) -> Result<(), EngineError> {
        lock(&self.inner.table).remove(fid)?;
        let mut reaches = lock(&self.inner.reaches);
        reaches.remove(&fid);
        self.publish_reach(&reaches);
        Ok(())
    }

    fn publish_reach(&self, reaches: &std::collections::BTreeMap<dpf::FilterId, usize>) {
        let r = reaches.values().copied().max().unwrap_or(0).max(HEADER_LEN);
        self.inner.reach.store(r, Ordering::Release);
    }

    fn port_or_err(&self, id: EndpointId) -> Result<Arc<Port>, EngineError> {
        self.port(id)
            .ok_or_else(|| EngineError::NotFound(format!("no endpoint {id}")))
    }

    /// Removes endpoint `id`: its filters, its applet and its port. The
    /// segment is unmapped when the last user lets go of it.
    ///
    /// Every channel of another endpoint of this engine whose peer it was is
    /// closed: its filters go, sending on it completes as
    /// [`TxStatus::Closed`], and the endpoint that gets this slot next (with
    /// a new generation) is never taken for this one.
    pub fn remove_port(&self, id: EndpointId) -> Result<(), EngineError> {
        let _c = lock(&self.inner.control);
        let ports = self.inner.ports.load_full();
        let slot = usize::from(endpoint_slot(id));
        let Some(port) = ports
            .get(slot)
            .and_then(Clone::clone)
            .filter(|p| p.id == id)
        else {
            return Err(EngineError::NotFound(format!("no endpoint {id}")));
        };
        let mut next: Vec<Option<Arc<Port>>> = ports.as_ref().clone();
        next[slot] = None;
        self.inner.ports.store(Arc::new(next));
        let filters: Vec<_> = lock(&port.filters).drain(..).flatten().flatten().collect();
        for f in filters {
            let _ = self.uninstall(f);
        }
        port.has_applet.store(false, Ordering::Release);
        let mut rx = lock(&port.rx);
        rx.applet = None;
        // Frames waiting for the applet, or delivered from now on by a
        // thread that found the port before it left the table, are counted
        // as lost to the closing.
        let mut inbox = lock(&port.inbox);
        port.closed.store(true, Ordering::Release);
        // The rest of a batch a drain left for a later round waits too.
        let waiting = (inbox.chans.len() + rx.batch.chans.len() - rx.batch_pos) as u64;
        inbox.chans.clear();
        inbox.frames.clear();
        rx.batch.chans.clear();
        rx.batch.frames.clear();
        rx.batch_pos = 0;
        port.pending.store(false, Ordering::Release);
        self.inner
            .stats
            .closed
            .fetch_add(waiting, Ordering::Relaxed);
        drop(inbox);
        drop(rx);
        let peers_of = lock(&self.inner.local_peers).remove(&id);
        for (owner, tag) in peers_of.into_iter().flatten() {
            if let Some(p) = self.port(owner) {
                self.close_channel(&p, tag);
            }
        }
        Ok(())
    }

    /// Closes channel `tag` of `port` (under the control lock): removes its
    /// filters, marks it closed on both sides, and tells the application
    /// through the segment's count of closed channels.
    fn close_channel(&self, port: &Port, tag: u16) {
        let mut filters = lock(&port.filters);
        let Some(Some(fids)) = filters.get_mut(usize::from(tag)) else {
            return;
        };
        for f in std::mem::take(fids) {
            let _ = self.uninstall(f);
        }
        lock(&port.closed_chans).push(tag);
        drop(filters);
        // Lock order: transmit side, then receive side.
        let mut tx = lock(&port.tx);
        tx.framer.close_channel(tag);
        lock(&port.rx).io.framer.close_channel(tag);
        drop(tx);
        port.seg.closed_channels().fetch_add(1, Ordering::Release);
    }

    /// The tags of endpoint `id`'s channels that were closed because their
    /// peer went away, in the order they closed.
    pub fn closed_channels(&self, id: EndpointId) -> Result<Vec<u16>, EngineError> {
        Ok(lock(&self.port_or_err(id)?.closed_chans).clone())
    }

    /// Opens a channel from endpoint `id` to endpoint `remote_ep` at
    /// `remote`, installing the filter that brings the peer's messages to
    /// it; returns the channel's tag.
    ///
    /// `remote_ep` is the peer's whole id, generation included: the filter
    /// admits only frames from that endpoint to this one, and the frames
    /// sent carry both generations, so neither end's slot passing to a new
    /// endpoint lets a frame through to it. A peer on this engine must
    /// exist, and when it goes the channel is closed.
    pub fn open_channel(
        &self,
        id: EndpointId,
        remote: Addr,
        remote_ep: EndpointId,
        opts: ChannelOptions,
    ) -> Result<u16, EngineError> {
        let port = self.port_or_err(id)?;
        let local = self.inner.local;
        let filter = dpf::Table::prepare(&format!(
            "udp and src host {} and udp src port {} and dst host {} and udp dst port {} \
             and udp[8:2] = {} and udp[10:2] = {} and udp[14:2] = {} and udp[16:2] = {}",
            remote.ip,
            remote.port,
            local.ip,
            local.port,
            endpoint_slot(id),
            endpoint_slot(remote_ep),
            endpoint_generation(id),
            endpoint_generation(remote_ep)
        ))?;
        let _c = lock(&self.inner.control);
        if remote == local && self.port(remote_ep).is_none() {
            return Err(EngineError::NotFound(format!(
                "no endpoint {remote_ep} on this engine (it has closed, or never existed)"
            )));
        }
        let mut filters = lock(&port.filters);
        let tag = (0..=u16::MAX)
            .find(|&t| filters.get(usize::from(t)).is_none_or(Option::is_none))
            .ok_or(EngineError::Exhausted(
                "every channel tag of this endpoint is in use",
            ))?;
        let owner = u32::from(endpoint_slot(id)) << 16 | u32::from(tag);
        let fid = self.install(filter, owner, 0)?;
        let hdr = frame::FrameHeader {
            src_mac: frame::MacAddr::from_ip(local.ip).0,
            dst_mac: frame::MacAddr::from_ip(remote.ip).0,
            src: local,
            dst: remote,
            dst_ep: remote_ep,
            src_ep: id,
            flags: if opts.checksum {
                frame::FLAG_UDP_CHECKSUM
            } else {
                0
            },
        };
        let ch = Channel {
            template: hdr.template(),
            checksum: opts.checksum,
            local: remote == local,
            closed: false,
        };
        if remote == local {
            lock(&self.inner.local_peers)
                .entry(remote_ep)
                .or_default()
                .push((id, tag));
        }
        let slot = usize::from(tag);
        if filters.len() <= slot {
            filters.resize(slot + 1, None);
        }
        filters[slot] = Some(vec![fid]);
        // Lock order: transmit side, then receive side.
        let mut tx = lock(&port.tx);
        tx.framer.set_channel(tag, Some(ch.clone()));
        lock(&port.rx).io.framer.set_channel(tag, Some(ch));
        Ok(tag)
    }

    /// Installs one more filter (pcap syntax) that delivers the frames it
    /// matches to channel `chan` of endpoint `id`, at `priority` (higher
    /// wins; channel filters have priority 0).
    pub fn install_filter(
        &self,
        id: EndpointId,
        chan: u16,
        filter: &str,
        priority: i32,
    ) -> Result<dpf::FilterId, EngineError> {
        let port = self.port_or_err(id)?;
        // Compiled before the engine-wide lock: see `Engine::install`.
        let filter = dpf::Table::prepare(filter)?;
        let _c = lock(&self.inner.control);
        let mut filters = lock(&port.filters);
        let ch = filters
            .get_mut(usize::from(chan))
            .and_then(Option::as_mut)
            .ok_or_else(|| EngineError::NotFound(format!("endpoint {id} has no channel {chan}")))?;
        if lock(&port.closed_chans).contains(&chan) {
            return Err(EngineError::ChannelClosed { id, chan });
        }
        let owner = u32::from(endpoint_slot(id)) << 16 | u32::from(chan);
        let fid = self.install(filter, owner, priority)?;
        ch.push(fid);
        Ok(fid)
    }

    /// Removes a filter installed by [`Engine::install_filter`] (a
    /// channel's own filter goes only with its endpoint).
    pub fn remove_filter(&self, id: EndpointId, fid: dpf::FilterId) -> Result<(), EngineError> {
        let port = self.port_or_err(id)?;
        let _c = lock(&self.inner.control);
        let mut filters = lock(&port.filters);
        // A closed channel has no filters left, not even its own.
        let Some(ch) = filters
            .iter_mut()
            .flatten()
            .find(|c| c.get(1..).is_some_and(|extra| extra.contains(&fid)))
        else {
            return Err(EngineError::NotFound(format!(
                "endpoint {id} has no extra filter {}",
                fid.0
            )));
        };
        self.uninstall(fid)?;
        ch.retain(|&f| f != fid);
        Ok(())
    }

    /// Replaces endpoint `id`'s applet (`None`: standard U-Net). The new
    /// applet is loaded, verified and constructed first; if that fails the
    /// old one stays. Messages in flight see the old applet or the new one.
    pub fn set_applet(&self, id: EndpointId, applet: Option<&[u8]>) -> Result<(), EngineError> {
        let port = self.port_or_err(id)?;
        let mut rx = lock(&port.rx);
        let loaded = match applet {
            Some(bytes) => Some(load_applet(bytes, &mut rx.io)?),
            None => None,
        };
        port.has_applet.store(loaded.is_some(), Ordering::Release);
        rx.applet = loaded;
        rx.traps_since_install = 0;
        rx.overruns_in_row = 0;
        port.throttle_until.store(0, Ordering::Relaxed);
        Ok(())
    }

    /// Sets endpoint `id`'s policy for applets that trap.
    pub fn set_trap_policy(&self, id: EndpointId, policy: TrapPolicy) -> Result<(), EngineError> {
        lock(&self.port_or_err(id)?.rx).policy = policy;
        Ok(())
    }

    /// Runs `f` on endpoint `id`'s applet, if it has one (to set or read
    /// its fields, e.g. a ping-pong's round limit).
    pub fn with_applet<R>(
        &self,
        id: EndpointId,
        f: impl FnOnce(&mut jive::Applet) -> R,
    ) -> Option<R> {
        let port = self.port(id)?;
        let mut rx = lock(&port.rx);
        rx.applet.as_mut().map(|l| f(&mut l.applet))
    }

    /// Whether endpoint `id` has an applet installed.
    pub fn has_applet(&self, id: EndpointId) -> bool {
        self.port(id)
            .is_some_and(|p| p.has_applet.load(Ordering::Acquire))
    }

    /// Services endpoint `id`'s transmit queue once (up to a budget of
    /// descriptors), delivering what it took. Returns the descriptors taken.
    ///
    /// On a thread shared by every endpoint (the engine's own, or any
    /// caller of [`Engine::poll`] that is not the endpoint's application)
    /// an applet's descriptors are served within [`Budgets::round_time`]
    /// and not at all while it is throttled: the rest waits for a later
    /// round, which such a thread always comes back for. On the thread
    /// that runs the endpoint's application ([`Port::claim`]) neither
    /// applies: it spends its own time, and may be the only thread that
    /// ever drives the endpoint, so it takes every descriptor it can.
    pub fn service(&self, port: &Port) -> usize {
        let shared = !port.is_owner();
        if shared && port.has_applet.load(Ordering::Relaxed) && port.throttled() {
            return 0;
        }
        let Ok(mut tx) = port.tx.try_lock() else {
            return 0;
        };
        let taken = take_tx(&mut tx, port, shared);
        if taken > 0 {
            let mut out = outbox();
            std::mem::swap(&mut out, &mut tx.framer.out);
            // Delivered with the transmit side still locked: the next
            // descriptors of this endpoint wait until these have arrived.
            self.pump(out);
            // Only now, with every byte of these messages copied (a frame
            // to an endpoint of this engine reads the rest of its message
            // from the sender's buffer area during delivery), do the
            // descriptors complete: once the application sees the index
            // move, no byte of the message will be read again.
            tx.tx.publish();
        }
        taken
    }

    /// Polls the transport once (up to a budget of frames), delivering what
    /// arrived. Returns the frames received.
    pub fn poll_transport(&self) -> usize {
        let backlog = self.drain_backlog();
        if self.inner.readiness.as_ref().is_some_and(|ready| !ready()) {
            return backlog;
        }
        let Ok(mut t) = self.inner.transport.try_lock() else {
            return backlog;
        };
        let mut made = outbox();
        let n = t
            .recv(RX_BUDGET, &mut |f: &[u8]| {
                // Under the transport's lock: one thread at a time.
                bump(&self.inner.stats.frames_in);
                if frame::FrameHeader::parse(f).is_err() {
                    bump_shared(&self.inner.stats.malformed);
                    return;
                }
                self.deliver(f, None, &mut made);
            })
            .unwrap_or(0);
        drop(t);
        self.pump(made);
        n + backlog
    }

    /// One round over every endpoint and the transport; the work done.
    ///
    /// Endpoints are served round-robin: each round starts one endpoint
    /// further than the last (so one left waiting by its round's budget,
    /// [`Budgets::round_time`], is early in a later round), and threads
    /// that find an endpoint busy with another thread go on to the next.
    pub fn poll(&self) -> usize {
        let ports = self.inner.ports.load_full();
        let mut work = 0;
        let n = ports.len();
        if n > 0 {
            let first = self.inner.cursor.fetch_add(1, Ordering::Relaxed) % n;
            for p in ports[first..].iter().chain(&ports[..first]).flatten() {
                work += self.service(p) + self.drain(p);
            }
        }
        work + self.poll_transport()
    }

    /// Gives the engine `n` threads of its own, polling every endpoint and
    /// the transport (the LanAI's loop; each starts its rounds at another
    /// endpoint and skips those another thread is serving, see
    /// [`Engine::poll`]), until [`Engine::stop`] (they hold
    /// the engine: stop them before dropping it). Fails if the system
    /// refuses a thread; those already started keep running.
    pub fn start(&self, n: usize) -> std::io::Result<()> {
        let mut threads = lock(&self.inner.threads);
        for i in 0..n {
            let e = self.clone();
            let h = std::thread::Builder::new()
                .name(format!("unet-engine-{i}"))
                .spawn(move || {
                    let mut idle = 0u32;
                    while !e.inner.stop.load(Ordering::Acquire) {
                        if e.poll() > 0 {
                            idle = 0;
                        } else {
                            idle = idle.saturating_add(1);
                            if idle > 1000 {
                                std::thread::sleep(std::time::Duration::from_micros(50));
                            } else if idle > 64 {
                                std::thread::yield_now();
                            } else {
                                std::hint::spin_loop();
                            }
                        }
                    }
                })?;
            threads.push(h);
        }
        Ok(())
    }

    /// Stops the engine's own threads and waits for them.
    pub fn stop(&self) {
        self.inner.stop.store(true, Ordering::Release);
        let threads: Vec<_> = lock(&self.inner.threads).drain(..).collect();
        for t in threads {
            let _ = t.join();
        }
        self.inner.stop.store(false, Ordering::Release);
    }

    /// Sends or delivers every frame of `out`, and the frames that
    /// delivering them makes, round after round.
    fn pump(&self, mut out: Outbox) {
        // Most polls find nothing: return the outbox untouched.
        if out.is_empty() {
            recycle(out);
            return;
        }
        let mut next = outbox();
        for _ in 0..PUMP_ROUNDS {
            if out.is_empty() {
                break;
            }
            let mut remote: Vec<&[u8]> = Vec::new();
            for (f, tail) in out.iter() {
                if frame::peek_dst(f) == Some(self.inner.local) {
                    self.deliver(f, tail, &mut next);
                } else {
                    // Only frames to this engine leave part of their
                    // payload behind.
                    debug_assert!(tail.is_none());
                    remote.push(f);
                }
            }
            if !remote.is_empty() {
                self.send_remote(&remote);
            }
            std::mem::swap(&mut out, &mut next);
            next.clear();
        }
        if !out.is_empty() {
            lock(&self.inner.backlog).append(&out);
            self.inner.has_backlog.store(true, Ordering::Release);
        }
        recycle(out);
        recycle(next);
    }

    /// Pumps the frames an earlier pump left.
    fn drain_backlog(&self) -> usize {
        if !self.inner.has_backlog.load(Ordering::Acquire) {
            return 0;
        }
        let out = {
            let Ok(mut b) = self.inner.backlog.try_lock() else {
                return 0;
            };
            self.inner.has_backlog.store(false, Ordering::Release);
            std::mem::replace(&mut *b, outbox())
        };
        let n = out.frames.len();
        self.pump(out);
        n
    }

    fn send_remote(&self, frames: &[&[u8]]) {
        let s = &self.inner.stats;
        let mut t = lock(&self.inner.transport);
        let mut sent = 0;
        // A transport may accept part of a batch when its queue fills; what
        // it refuses is counted, never retried forever.
        for _ in 0..4 {
            match t.send(&frames[sent..]) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
            if sent == frames.len() {
                break;
            }
        }
        s.frames_out.fetch_add(sent as u64, Ordering::Relaxed);
        s.send_errors
            .fetch_add((frames.len() - sent) as u64, Ordering::Relaxed);
    }

    /// Classifies one frame and hands it to its endpoint; frames the
    /// endpoint's applet makes go to `made`.
    fn deliver(&self, f: &[u8], tail: Option<&Tail>, made: &mut Outbox) {
        let s = &self.inner.stats;
        let Some(owner) = self.classify(f) else {
            bump_shared(&s.unmatched);
            return;
        };
        let (slot, chan) = ((owner >> 16) as u16, owner as u16);
        // A reference through the table's guard, not a clone: no atomic
        // write to the port's reference count per frame.
        let ports = self.inner.ports.load();
        let Some(port) = ports.get(usize::from(slot)).and_then(Option::as_ref) else {
            bump_shared(&s.unmatched);
            return;
        };
        if f.len() < HEADER_LEN {
            bump_shared(&s.malformed);
            return;
        }
        // The filters match the destination's generation, but a thread may
        // have classified with a table from before the slot changed hands.
        let dst_gen = u16::from_be_bytes([f[frame::UNET_DST_GEN], f[frame::UNET_DST_GEN + 1]]);
        if dst_gen != endpoint_generation(port.id) {
            bump_shared(&s.unmatched);
            return;
        }
        // An applet's frame waits in the inbox for its endpoint's thread,
        // unless this is that thread.
        // So does one whose applet would add to frames already past the
        // inbox budget: frames made by applets delivering on their own
        // thread cannot pile up without bound.
        if port.has_applet.load(Ordering::Acquire)
            && (port.owner.load(Ordering::Relaxed) != thread_token()
                || made.used >= port.budgets.inbox_bytes)
        {
            enqueue(port, chan, f, tail, s);
            return;
        }
        let mut rx = lock(&port.rx);
        if port.closed.load(Ordering::Acquire) {
            bump_shared(&s.closed);
            return;
        }
        // Frames still waiting for an applet removed since keep their
        // place: this one waits behind them.
        if port.pending.load(Ordering::Acquire) {
            drop(rx);
            enqueue(port, chan, f, tail, s);
            return;
        }
        receive(port, &mut rx, chan, f, tail, made);
    }

    /// Runs the frames waiting in `port`'s inbox through its applet (or the
    /// standard receive, if the applet was removed since), in order, on
    /// this thread; returns how many. Called by the endpoint's receive
    /// calls and by the engine's threads; one thread drains at a time.
    ///
    /// Like [`Engine::service`], a thread shared by every endpoint runs an
    /// applet's frames within [`Budgets::round_time`] and not while it is
    /// throttled (the rest stays ahead of the inbox for a later round); the
    /// application's own thread drains everything waiting.
    pub fn drain(&self, port: &Port) -> usize {
        if !port.pending.load(Ordering::Acquire) {
            return 0;
        }
        let shared = !port.is_owner();
        if shared && port.has_applet.load(Ordering::Relaxed) && port.throttled() {
            return 0;
        }
        let Ok(mut guard) = port.rx.try_lock() else {
            return 0;
        };
        let mut made = outbox();
        let mut n = 0;
        // The applet time this round has spent on this endpoint.
        let mut spent = Duration::ZERO;
        let rx = &mut *guard;
        'round: loop {
            if rx.batch_pos == rx.batch.chans.len() {
                rx.batch.frames.clear();
                rx.batch.chans.clear();
                rx.batch_pos = 0;
                let mut inbox = lock(&port.inbox);
                if inbox.chans.is_empty() {
                    // Under the inbox's lock, so that a frame enqueued now
                    // sets it again.
                    port.pending.store(false, Ordering::Release);
                    break;
                }
                // The two buffers trade places and keep their capacity:
                // no allocation per frame on either thread.
                std::mem::swap(&mut *inbox, &mut rx.batch);
            }
            let batch = std::mem::take(&mut rx.batch);
            while rx.batch_pos < batch.chans.len() {
                let i = rx.batch_pos;
                let (start, len, _) = batch.frames.frames[i];
                rx.batch_pos += 1;
                let f = &batch.frames.bytes[start..start + len];
                spent += receive(port, rx, batch.chans[i], f, None, &mut made);
                n += 1;
                if shared
                    && (spent > port.budgets.round_time
                        || port.throttle_until.load(Ordering::Relaxed) != 0)
                {
                    // The rest waits, ahead of the inbox, for a later round
                    // (`pending` stays set).
                    rx.batch = batch;
                    break 'round;
                }
            }
            rx.batch = batch;
        }
        drop(guard);
        self.pump(made);
        n
    }

    #[inline]
    fn classify(&self, f: &[u8]) -> Option<u32> {
        READERS.with(|r| {
            let mut r = r.borrow_mut();
            if let Some((_, reader)) = r.iter_mut().find(|(id, _)| *id == self.inner.id) {
                return reader.classify(f);
            }
            let mut reader = lock(&self.inner.table).reader();
            let v = reader.classify(f);
            if r.len() >= 8 {
                r.remove(0);
            }
            r.push((self.inner.id, reader));
            v
        })
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Puts a frame in `port`'s inbox for its applet, or drops it: counted as
/// closed if the endpoint is, as a full receive queue if the inbox is at its
/// budget of frames or bytes ([`Budgets::inbox_frames`],
/// [`Budgets::inbox_bytes`]).
fn enqueue(port: &Port, chan: u16, f: &[u8], tail: Option<&Tail>, s: &EngineStats) {
    let mut inbox = lock(&port.inbox);
    if port.closed.load(Ordering::Acquire) {
        drop(inbox);
        bump_shared(&s.closed);
        return;
    }
    let len = f.len() + tail.map_or(0, |t| t.len);
    if inbox.chans.len() >= port.budgets.inbox_frames
        || inbox.frames.used + len > port.budgets.inbox_bytes
    {
        drop(inbox);
        bump_shared(&port.stats.rx_queue_full);
        return;
    }
    inbox.frames.push_whole(f, tail);
    inbox.chans.push(chan);
    port.pending.store(true, Ordering::Release);
}

/// Receives one frame for `port` on `chan`, under its receive lock: checks
/// the UDP checksum if it carries one, then runs `doRx` or the standard
/// U-Net receive. Frames the applet makes go to `made`.
fn receive(
    port: &Port,
    rx: &mut RxSide,
    chan: u16,
    f: &[u8],
    tail: Option<&Tail>,
    made: &mut Outbox,
) -> Duration {
    let payload = Payload {
        head: &f[HEADER_LEN..],
        tail,
    };
    let flags = u16::from_be_bytes([f[frame::UNET_FLAGS], f[frame::UNET_FLAGS + 1]]);
    if flags & frame::FLAG_UDP_CHECKSUM != 0 && !matches!(frame::verify_udp_checksum(f), Ok(true)) {
        bump(&port.stats.rx_bad_checksum);
        return Duration::ZERO;
    }
    let mut took = Duration::ZERO;
    match rx.applet.as_mut() {
        None => rx.io.deliver_default(chan, payload),
        Some(l) => {
            let r = if fill_rxbuf(l, payload) {
                let args = [payload.len() as i32, i32::from(chan)];
                invoke(rx, port, false, &args).and_then(|(r, t)| {
                    took = t;
                    r.ok()
                })
            } else {
                None
            };
            match r {
                None => applet_trapped(rx, port),
                Some(o) if o.value.is_some_and(|v| v < 0) => bump(&port.stats.applet_drops),
                Some(_) => {}
            }
        }
    }
    let out = &mut rx.io.framer.out;
    if !out.is_empty() {
        made.append(out);
        out.clear();
    }
    took
}

/// Copies `payload` into the applet's `RxBuf`, replacing the array with a
/// larger one if it is too short (or was set to null by the applet).
fn fill_rxbuf(l: &mut Loaded, payload: Payload<'_>) -> bool {
    let len = payload.len();
    if l.applet
        .static_bytes_mut(l.rxbuf)
        .is_none_or(|b| b.len() < len)
        && l.applet.set_static_array("RxBuf", &vec![0; len]).is_err()
    {
        return false;
    }
    let Some(buf) = l.applet.static_bytes_mut(l.rxbuf) else {
        return false;
    };
    let mut k = 0;
    payload.pieces(0, len, |p| {
        natives::u8_to_i8(&mut buf[k..k + p.len()], p);
        k += p.len();
    });
    true
}

/// The end of the last byte any test of `p` loads, with fields counted
/// from the transport header taken at byte 34 (a 20-byte IPv4 header, as
/// in every frame the engine builds).
fn program_reach(p: &dpf::ir::Program) -> usize {
    p.nodes
        .iter()
        .filter_map(|n| match n {
            dpf::ir::Node::Test { test, .. } => {
                let f = test.field;
                let base = match f.base {
                    dpf::ir::Base::Link => 0,
                    // The IHL byte is read too.
                    dpf::ir::Base::Transport => 34,
                };
                Some((base + f.offset as usize + f.size as usize).max(15))
            }
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// Runs `doTx` (`tx`) or `doRx` of the applet in `rx` with `args` under
/// the invocation budgets; `None`: no applet. Returns the outcome and how
/// long the invocation took. An invocation that overran a budget (out of
/// fuel, out of time, or pushing past its frames or bytes) is counted and
/// sets the endpoint aside ([`Budgets::throttle`]); the caller counts the
/// trap.
fn invoke(
    rx: &mut RxSide,
    port: &Port,
    tx: bool,
    args: &[i32],
) -> Option<(Result<jive::Outcome, jive::InvokeError>, Duration)> {
    let l = rx.applet.as_mut()?;
    let start = Instant::now();
    rx.io.begin();
    let m = if tx { &l.do_tx } else { &l.do_rx };
    let r = l.applet.call(m, args, Some(&mut rx.io));
    let end = Instant::now();
    let took = end.saturating_duration_since(start);
    let out_of_fuel = matches!(&r, Err(jive::InvokeError::Trap(t))
        if matches!(t.kind, jive::TrapKind::FuelExhausted(_)));
    if rx.io.inv.overran || out_of_fuel {
        bump_shared(&port.stats.applet_overruns);
        rx.overruns_in_row = rx.overruns_in_row.saturating_add(1);
        let factor = rx.io.budgets.throttle;
        if factor > 0 {
            let doubling = 1u32 << rx.overruns_in_row.min(11).saturating_sub(1);
            let pause = took
                .saturating_mul(factor)
                .saturating_mul(doubling)
                .min(THROTTLE_MAX);
            let until = clock_ns(end) + pause.as_nanos() as u64;
            port.throttle_until.store(until.max(1), Ordering::Relaxed);
            bump_shared(&port.stats.applet_throttled);
        }
    } else {
        rx.overruns_in_row = 0;
    }
    Some((r, took))
}

fn applet_trapped(rx: &mut RxSide, port: &Port) {
    bump(&port.stats.applet_traps);
    rx.traps_since_install += 1;
    if let TrapPolicy::UninstallAfter(n) = rx.policy
        && rx.traps_since_install >= n
    {
        rx.applet = None;
        port.has_applet.store(false, Ordering::Release);
        port.throttle_until.store(0, Ordering::Relaxed);
    }
}

/// Takes up to [`TX_BUDGET`] transmit descriptors of `port`, making their
/// frames in the transmit side's outbox.
///
/// `shared`: the calling thread serves every endpoint, so an applet's
/// descriptors stop once [`Budgets::round_time`] is spent or it overran
/// (see [`Engine::service`]).
fn take_tx(tx: &mut TxSide, port: &Port, shared: bool) -> usize {
    let (stats, layout) = (&*port.stats, &port.layout);
    let mut n = 0;
    // The applet time this round has spent on this endpoint.
    let mut spent = Duration::ZERO;
    let mut done = false;
    while n < TX_BUDGET && !done {
        let d = match tx.tx.peek() {
            Ok(Some(d)) => d,
            Ok(None) => break,
            Err(_) => {
                bump_shared(&stats.queue_corrupt);
                break;
            }
        };
        n += 1;
        bump(&stats.tx_descriptors);
        // `d` is a private copy: everything below checks and uses it, never
        // the shared slot again.
        let chan = tx.framer.channel_closed(d.chan);
        let status = if d.len > tx.framer.max_message
            || !layout.in_area(d.offset, d.len)
            || chan.is_none()
        {
            bump(&stats.tx_rejected);
            TxStatus::Rejected
        } else if chan == Some(true) {
            bump(&stats.tx_closed);
            TxStatus::Closed
        } else if port.has_applet.load(Ordering::Acquire) {
            let (status, took) = applet_tx(tx, port, d);
            spent += took;
            if shared
                && (spent > port.budgets.round_time
                    || port.throttle_until.load(Ordering::Relaxed) != 0)
            {
                // This round's time for the endpoint is spent, or its applet
                // overran: the rest waits for a later round.
                done = true;
            }
            status
        } else {
            match tx
                .framer
                .transmit_from(&port.seg, layout.area + d.offset as usize, d.chan, d.len)
            {
                Ok(()) => TxStatus::Sent,
                Err(_) => TxStatus::Dropped,
            }
        };
        tx.tx.write_front(TxDesc {
            status: status as u16,
            ..d
        });
        // Taken, not yet completed: [`Engine::service`] publishes the
        // consumer index after the frames are delivered.
        tx.tx.take();
    }
    n
}

/// Runs the applet's `doTx` for a checked descriptor; its frames join the
/// transmit side's outbox. Returns the status and the invocation's time.
fn applet_tx(tx: &mut TxSide, port: &Port, d: TxDesc) -> (TxStatus, Duration) {
    let mut guard = lock(&port.rx);
    let rx = &mut *guard;
    if rx.applet.is_none() {
        // Uninstalled since the flag was read: send as standard U-Net.
        drop(guard);
        let status = match tx.framer.transmit_from(
            &port.seg,
            port.layout.area + d.offset as usize,
            d.chan,
            d.len,
        ) {
            Ok(()) => TxStatus::Sent,
            Err(_) => TxStatus::Dropped,
        };
        return (status, Duration::ZERO);
    }
    let args = [d.len as i32, i32::from(d.chan), d.offset as i32];
    let (r, took) = invoke(rx, port, true, &args).expect("the applet is installed");
    let status = match r {
        Ok(o) if o.value.is_some_and(|v| v < 0) => {
            bump(&port.stats.applet_drops);
            TxStatus::Dropped
        }
        Ok(_) => TxStatus::Sent,
        Err(_) => {
            applet_trapped(rx, port);
            TxStatus::Dropped
        }
    };
    let made = &mut rx.io.framer.out;
    tx.framer.out.append(made);
    made.clear();
    (status, took)
}

/// Loads, verifies and constructs an applet for the endpoint of `io`,
/// giving it an `RxBuf` of the endpoint's largest message.
fn load_applet(bytes: &[u8], io: &mut Io) -> Result<Loaded, EngineError> {
    let max_message = io.framer.max_message;
    let limits = jive::Limits {
        fuel: Some(io.budgets.applet_fuel),
        ..jive::Limits::default()
    };
    // Constructors are bounded by fuel alone: their time includes the
    // JIT's compilation.
    io.begin();
    io.inv.next_check = u64::MAX;
    let mut applet = jive::Applet::load_with_host(bytes, &natives_table(), limits, Some(io))?;
    let shape = |e: jive::InvokeError| EngineError::AppletShape(e.to_string());
    let do_tx = applet.method("doTx").map_err(shape)?;
    let do_rx = applet.method("doRx").map_err(shape)?;
    let rxbuf = applet.static_bytes_field("RxBuf").map_err(shape)?;
    applet
        .set_static_array("RxBuf", &vec![0u8; max_message.min(1 << 16) as usize])
        .map_err(shape)?;
    // Check the arities now rather than trap on the first packet.
    for (m, name, n) in [(&do_tx, "doTx", 3usize), (&do_rx, "doRx", 2)] {
        if m.arity() != n {
            return Err(EngineError::AppletShape(format!(
                "{name} must take {n} int arguments"
            )));
        }
    }
    Ok(Loaded {
        applet,
        do_tx,
        do_rx,
        rxbuf,
    })
}

fn natives_table() -> jive::Natives {
    static TABLE: std::sync::OnceLock<jive::Natives> = std::sync::OnceLock::new();
    TABLE.get_or_init(natives::bind::<Io>).clone()
}
