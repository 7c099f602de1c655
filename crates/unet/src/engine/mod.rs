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
//! copies the rest from the sender's buffer area. While no installed
//! filter reads a byte that differs between two messages of a channel (a
//! length, a checksum, the message), such a message needs no frame at all:
//! the table's verdict on its channel's header, kept by the channel for the
//! table's current version, is its verdict, and the standard receive copies
//! it straight from the sender's buffer area (`Engine::deliver_direct`).
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
//!
//! **Modules.** This file holds the engine's and the ports' state, the
//! counters, the budgets and the frame builder; `control` the control
//! operations (create, open, install, remove, under the control lock);
//! `datapath` the rounds, transmit, delivery and the inbox drain;
//! `applet_io` what an applet invocation sees ([`Io`]) and its budgets.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::endpoint::{Direct, Handed};
use crate::frame::{
    self, Addr, EndpointId, HEADER_LEN, endpoint_generation, endpoint_id, endpoint_slot,
};
use crate::layout::{Config, INLINE_MAX, Layout, RX_BUFFERS_MAX, RxDesc, TxDesc, TxStatus};
use crate::natives::{self, HostError, NativeHost, RxBody};
use crate::ring::{Consumer, Producer};
use crate::shm::{AreaBytes, FreeQueue, RxQueue, Segment, TxQueue, queues};
use crate::transport::{Built, Transport};

mod applet_io;
#[cfg(test)]
pub(crate) use applet_io::tests::NEXT_FREE_FETCHED;
mod control;
mod datapath;
mod inbox;
mod ports;

/// The lock of an endpoint's transmit and receive sides, taken twice per
/// message on the path without applet, each side by the same thread
/// message after message: biased to that thread ([`crate::biased`]), which
/// then takes and releases it with plain loads and stores, where
/// `parking_lot`'s cost a locked instruction each way (four per message,
/// most of the `loop` round trip's gap over the bare ring). Another thread
/// takes it from the biased one with one `membarrier`, and a side that
/// threads share stays an ordinary lock after a few such revocations. No
/// poisoning: everything behind these locks (`TxSide`, `RxSide`) is
/// consistent between the statements that can panic (a queue publishes an
/// index only after its descriptor is whole, a counter is one store, an
/// applet's traps are values), so the next holder takes the value as a
/// panic left it, as every `lock` here always did.
use crate::biased::BiasedLock as SideLock;
use crate::biased::Me;
pub use applet_io::Io;
pub(crate) use applet_io::thread_cpu_time;
use applet_io::*;
pub(crate) use datapath::RxPoll;

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
    /// An applet's code would bring its process's share of the JIT's code
    /// cache past the daemon's budget (`ServeOptions::max_code_per_peer`).
    #[error(
        "an applet of {bytes} bytes of code would bring this process's code in the JIT's cache to {total} bytes, over its budget of {limit}"
    )]
    CodeBudget {
        /// The applet's code.
        bytes: usize,
        /// The process's code with it.
        total: usize,
        /// The budget.
        limit: usize,
    },
    /// An applet's memory would bring its process's applets past the
    /// daemon's budget (`ServeOptions::max_applet_memory_per_peer`).
    #[error(
        "an applet holding {bytes} bytes would bring this process's applets to {total} bytes, over its budget of {limit}"
    )]
    AppletMemoryBudget {
        /// The applet's memory (`jive::Applet::memory_bytes`).
        bytes: usize,
        /// The process's applets' with it.
        total: usize,
        /// The budget.
        limit: usize,
    },
    /// An applet's memory would bring the applets of all the daemon's
    /// clients past its budget (`ServeOptions::max_applet_memory_total`):
    /// the budget per process does not bound a client that forks.
    #[error(
        "an applet holding {bytes} bytes would bring the applets of all the daemon's clients to {total} bytes, over its budget of {limit}"
    )]
    AppletMemoryTotal {
        /// The applet's memory (`jive::Applet::memory_bytes`).
        bytes: usize,
        /// All the clients' applets' with it.
        total: usize,
        /// The budget.
        limit: usize,
    },
    /// The endpoint holds as many filters as its budget allows
    /// ([`Budgets::filters`]), its channels' own included.
    #[error(
        "endpoint {id} holds {limit} filters, its budget (a channel's own filter counts); \
         remove one first"
    )]
    FilterBudget {
        /// The endpoint.
        id: EndpointId,
        /// The budget.
        limit: usize,
    },
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
    /// An engine in another process refused the request for a reason
    /// the client can act on (an endpoint that is not its own, a spent
    /// budget).
    #[error("engine: {0}")]
    Refused(#[from] crate::daemon::Refusal),
    /// The transport could not follow a change of the filter table (the
    /// `xdp` transport could not load or swap in its kernel program).
    #[error("transport: {0}")]
    Transport(#[from] crate::transport::TransportError),
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
    /// Frames sent for this endpoint (by the engine or its applet), but
    /// for those counted in `tx_direct` and `tx_applet`;
    /// [`PortCounts::tx_frames`] is the sum of the three.
    pub tx_frames: AtomicU64,
    /// Transmit descriptors rejected as malformed (length, offset, channel).
    pub tx_rejected: AtomicU64,
    /// Transmit descriptors on a channel closed because its peer went
    /// away (not sent; completed as [`TxStatus::Closed`]).
    pub tx_closed: AtomicU64,
    /// Messages sent to an endpoint of this engine without a frame
    /// (`Engine::deliver_direct`), counted under the transmit lock with
    /// `bump`: `tx_frames` is changed from both sides (an applet's
    /// `txPush` runs under the receive lock), so it needs a read-modify-write,
    /// which the message path without applet no longer pays.
    pub tx_direct: AtomicU64,
    /// Frames and messages an applet's `txPush` made that its `Io`
    /// counts: the inline push's frame or deferred message, taken after
    /// the invocation (`Io::take_frame`, `Io::take_tail`), and the
    /// native push's deferred message (`Io::transmit_tail`). Counted
    /// under the receive lock, which holds the `Io`, with `bump`, as
    /// `tx_direct` is under the transmit lock: `tx_frames`' locked
    /// read-modify-write, a full barrier, was the one locked instruction
    /// of a lent `doTx`'s send before its message is published (at the
    /// take of the deferred message, `xthr_count` `LENT=1`).
    pub tx_applet: AtomicU64,
    _line: [u64; 2],
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
    /// [`PortCounts::queue_corrupt`] adds the frames the applet's inbox
    /// dropped behind a header that failed its check (memory corruption).
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
            tx_frames: l(&self.tx_frames) + l(&self.tx_direct) + l(&self.tx_applet),
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

/// Counts `n` events of the engine, from any thread.
#[inline]
fn bump_shared_by(c: &AtomicU64, n: u64) {
    if n > 0 {
        c.fetch_add(n, Ordering::Relaxed);
    }
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
    /// The template's [`frame::length_sum`], for `txPush`'s frames
    /// ([`Framer::push_message`]).
    length_sum: u32,
    /// Its flags ([`Channel::checksum`], [`Channel::local`],
    /// [`Channel::closed`], [`Channel::direct`]), one bit each.
    flags: u8,
    /// The filter table's verdict on the channel's frames: the transmit
    /// side's cache (see [`Kept`]).
    verdict: Kept,
}

/// [`Channel::checksum`]'s bit of [`Channel::flags`].
const CHAN_CHECKSUM: u8 = 1;
/// [`Channel::local`]'s bit.
const CHAN_LOCAL: u8 = 2;
/// [`Channel::closed`]'s bit.
const CHAN_CLOSED: u8 = 4;
/// [`Channel::direct`]'s bit.
const CHAN_DIRECT: u8 = 8;

impl Channel {
    /// Whether its frames carry a UDP checksum.
    #[inline(always)]
    fn checksum(&self) -> bool {
        self.flags & CHAN_CHECKSUM != 0
    }

    /// Whether its peer is on this engine (its frames never leave it).
    #[inline(always)]
    fn local(&self) -> bool {
        self.flags & CHAN_LOCAL != 0
    }

    /// Whether it was closed because its peer went away: sending on it
    /// fails, and its filters are gone.
    #[inline(always)]
    fn closed(&self) -> bool {
        self.flags & CHAN_CLOSED != 0
    }

    /// Whether a `doTx`'s tail `txPush` on the channel is deferred
    /// ([`Engine::may_defer`]): the kept verdict names the channel's peer,
    /// and the channel is local and unchecksummed, so that the message
    /// may go straight to that peer ([`Engine::deliver_deferred`]). A
    /// guess set with the verdict, cleared with it (a closed channel, a
    /// forgotten verdict) and where verdicts stop being kept (version
    /// 0). A flag beside the channel's others, not in [`Kept`], which it
    /// would make a word longer.
    #[inline(always)]
    fn direct(&self) -> bool {
        self.flags & CHAN_DIRECT != 0
    }

    /// Sets or clears [`Channel::direct`].
    #[inline(always)]
    fn set_direct(&mut self, on: bool) {
        self.flags = (self.flags & !CHAN_DIRECT) | if on { CHAN_DIRECT } else { 0 };
    }

    /// Whether a message on this channel goes to its peer with the
    /// channel's kept verdict, without being classified: its peer on this
    /// engine, no checksum, open. One test for every way that does so
    /// (`pump_sent`'s frames, the direct deliveries, the deferred
    /// `txPush`), so that none can drift from the others.
    ///
    /// One comparison of the three flags' bits: `local` set, `checksum`
    /// and `closed` clear (three tests of flags each a `bool` of its own
    /// were 6 instructions).
    #[inline(always)]
    fn goes_kept(&self) -> bool {
        self.flags & (CHAN_LOCAL | CHAN_CHECKSUM | CHAN_CLOSED) == CHAN_LOCAL
    }
}

/// The verdict a channel to an endpoint of this engine keeps: the owner
/// the filter table gives its frames (if any) and the version of
/// [`Inner::verdicts`] it was taken under, valid while that version is
/// current (a version is never 0). When the owner is the channel's peer,
/// its port too, so that delivery needs no look-up in the endpoint table:
/// the channel is closed, and this reference let go under the transmit
/// side's lock, when the peer goes away (and the version changes before,
/// as its filters are removed).
#[derive(Debug, Clone, Default)]
struct Kept {
    version: u64,
    owner: Option<u32>,
    peer: Option<Arc<Port>>,
}

/// An installed applet and its resolved entry points.
struct Loaded {
    applet: jive::Applet,
    do_tx: DoTx,
    do_rx: DoRx,
}

impl Loaded {
    /// Whether its `doTx` is lent ([`Port::lends_tx`]).
    fn lends_tx(&self) -> bool {
        matches!(self.do_tx, DoTx::Lent(_))
    }
}

/// How an applet's `doTx` receives its message (docs/unet.md, "Applets
/// and natives"): the form its class declares.
enum DoTx {
    /// `int doTx(int length, int channel, int off)`: the message where the
    /// application put it, at `off` in the buffer area, which `doTx` copies
    /// out with `doHtoLDMA` (Figure 2's).
    Copied(jive::Prepared<3, applet_io::Lender>),
    /// `int doTx(byte[] msg, int length, int channel)`: the message in the
    /// buffer area lent for the invocation (`applet_io::run_tx_lent`),
    /// which the verifier proved `doTx` only reads and never keeps
    /// ([`jive::LentParam`]).
    Lent(applet_io::LentMethod),
}

/// How an applet's `doRx` receives its message (docs/unet.md, "Applets
/// and natives"): the form its class declares.
enum DoRx {
    /// `int doRx(int length, int channel)`: the message copied into the
    /// static `byte[] RxBuf` first (`applet_io::fill_rxbuf`), which keeps
    /// it after the return.
    Copied {
        m: jive::Prepared<2, applet_io::Lender>,
        rxbuf: jive::StaticBytes,
    },
    /// `int doRx(byte[] msg, int length, int channel)`: the message lent
    /// for the invocation (`applet_io::run_lent`), which the verifier
    /// proved `doRx` only reads and never keeps ([`jive::LentParam`]).
    /// `scratch` holds a message that is not in one piece (a rest in a
    /// segment), copied there to be lent.
    Lent {
        m: applet_io::LentMethod,
        scratch: Vec<u8>,
    },
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
    /// switches and calls), at most: an applet whose unit of fuel pays for
    /// much work gets less ([`Budgets::applet_ops`]). Default 100,000,
    /// about 50 µs of the tightest loop with the JIT (docs/unet.md has the
    /// measurement).
    pub applet_fuel: u64,
    /// Ops (jive's decoded bytecode) one invocation may run, its
    /// constructor's included: an applet whose unit of fuel can pay for
    /// more than `applet_ops / applet_fuel` of them
    /// (`jive::Program::ops_per_fuel_unit`: its longest loop plus its
    /// longest callee) gets proportionally less fuel. A unit of fuel is a
    /// loop iteration, and a loop around 16 KiB of straight-line bytecode
    /// took 0.67 s an invocation on the JIT and 2.3 s on the interpreter
    /// at 100,000 units, holding an engine thread, where the tightest loop
    /// takes 50 µs. Default 6,400,000: an applet whose loops and callees
    /// are at most 64 ops keeps all its fuel (the build's applets are at
    /// most 36, but for `Burst25`, 133, and `Escape`, 184), and a loop of
    /// integer divisions, the dearest op found, runs them in about 4 ms
    /// on the JIT and 14 ms on the interpreter. A charge weighted by each
    /// back edge's own loop, instead of the program's longest, would bound
    /// it nearer the 50 µs without cutting any applet's fuel.
    pub applet_ops: u64,
    /// Time of one invocation, and of an applet's initializers together
    /// (`<clinit>` and the constructor, which run under the endpoint's
    /// locks when the applet replaces another). The natives check it
    /// (after the first 256 units of native work of an invocation, then
    /// every 256: a unit is a call or 4 KiB moved; the thread's CPU time
    /// from the first check on, so time the system spends preempting it
    /// does not count), so an applet that loops through the natives traps
    /// once it is spent; compute between two natives is bounded by the
    /// fuel. Default 1 ms:
    /// on a loaded machine a well-behaved invocation's CPU time has spikes
    /// far above its usual few µs (interrupts are charged to the thread
    /// they interrupt; docs/unet.md has the measurement), and an overrun
    /// drops the invocation's message.
    pub applet_time: Duration,
    /// Frames an applet's inbox holds while they wait for its thread.
    /// Default 1,024; at most 65,536 whatever the value.
    pub inbox_frames: usize,
    /// Bytes the frames in an applet's inbox hold together. Default 4 MiB:
    /// a burst of the paper's bandwidth experiment (25 messages of up to
    /// 64 KiB, 1.6 MiB) waits whole for the receiving applet, with room to
    /// spare. The inbox's ring, allocated at its first frame, has twice
    /// this and a header per frame (at most 64 MiB, which bounds a budget
    /// past about 32 MiB).
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
    /// Filters one endpoint may hold at once, its channels' own (one a
    /// channel) included. Each install merges the whole table under the
    /// engine's control lock, so the table's size sets what every other
    /// client's install and channel costs; with the daemon's endpoints per
    /// connection and connections per process, this bounds a process's
    /// share of it. Default 64.
    pub filters: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            push_frames: 64,
            push_bytes: 4 << 20,
            applet_fuel: 100_000,
            applet_ops: 6_400_000,
            applet_time: Duration::from_millis(1),
            inbox_frames: 1024,
            inbox_bytes: 4 << 20,
            round_time: Duration::from_micros(200),
            throttle: 64,
            filters: 64,
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

impl Tail {
    fn rest(&self) -> Rest<'_> {
        Rest {
            seg: &self.seg,
            at: self.at,
            len: self.len,
        }
    }
}

/// Bytes of a message read from where its sending application put them:
/// a [`Tail`], or a whole message delivered without a frame (see
/// [`Engine::deliver_direct`]).
#[derive(Clone, Copy)]
struct Rest<'a> {
    seg: &'a Segment,
    /// Offset of the bytes in `seg`.
    at: usize,
    len: usize,
}

/// A frame's payload as delivery sees it: the bytes in the frame, then the
/// rest, if any.
#[derive(Clone, Copy)]
struct Payload<'a> {
    head: &'a [u8],
    tail: Option<Rest<'a>>,
    /// Whether `head` is the sending application's own bytes
    /// ([`crate::endpoint::Direct::Bytes`], `Endpoint::send`'s message
    /// where the engine takes it without a frame), which may lie anywhere
    /// in its process, an endpoint's segment included. Every other head is
    /// the engine's memory or an applet's heap: a frame in an outbox, an
    /// inbox or a transport's buffer, or the `TxBuf` of a deferred
    /// `txPush`. Only such a head can be in the receiving endpoint's own
    /// segment, so that the lent `doRx` tests where it is only for it
    /// (`applet_io::run_lent`).
    app: bool,
}

impl<'a> Payload<'a> {
    /// The sending application's own bytes `b` as a payload
    /// ([`Payload::app`]: they may lie in an endpoint's segment).
    #[inline(always)]
    fn of_app(b: &'a [u8]) -> Payload<'a> {
        Payload {
            app: true,
            head: b,
            tail: None,
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.head.len() + self.tail.map_or(0, |t| t.len)
    }

    /// Calls `f` on the pieces of bytes `[start, end)`, in order.
    #[inline]
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

    /// Copies bytes `[start, start + dst.len())` into `dst`, piece by
    /// piece with `copy`: `shm::copy_small` into a receive descriptor,
    /// `shm::copy_message` into an inbox, which the other core reads next.
    #[inline]
    fn copy_to(&self, start: usize, dst: &mut [u8], copy: impl Fn(&mut [u8], &[u8])) {
        let mut k = 0;
        self.pieces(start, start + dst.len(), |p| {
            copy(&mut dst[k..k + p.len()], p);
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
    /// Each frame's start and length in `bytes`, its index in `tails`
    /// (`NO_TAIL`: none), so that most frames need no drop, and the
    /// endpoint and channel that sent it ([`sent_on`]).
    frames: Vec<(usize, usize, u32, u64)>,
    tails: Vec<Tail>,
}

const NO_TAIL: u32 = u32::MAX;

/// Makes an outbox's `bytes` `len` long (zeroed): a warm outbox is long
/// enough.
#[cold]
#[inline(never)]
fn grow(bytes: &mut Vec<u8>, len: usize) {
    bytes.resize(len, 0);
}

/// The tag of a frame sent by endpoint `id` on its channel `chan`: the
/// transmit side delivers a frame so tagged with its channel's kept
/// verdict ([`Engine::pump_sent`]), and only if the tag names its own
/// endpoint, wherever the frame went through before.
#[inline]
fn sent_on(id: EndpointId, chan: u16) -> u64 {
    (u64::from(id) << 16) | u64::from(chan)
}

impl Outbox {
    /// Inlined (its growth out of line), so that `txPush`'s fast form
    /// makes no call to push its frame.
    ///
    /// The frame's bytes are taken (and their range checked) before its
    /// record is pushed, so that the record's push, which may grow
    /// `frames`, does not make the range be computed and checked again.
    #[inline]
    fn push_frame(&mut self, len: usize, chan: u64) -> &mut [u8] {
        let Outbox {
            bytes,
            used,
            frames,
            ..
        } = self;
        let start = *used;
        let end = start + len;
        if bytes.len() < end {
            grow(bytes, end);
        }
        *used = end;
        let buf = &mut bytes[start..end];
        frames.push((start, len, NO_TAIL, chan));
        buf
    }

    /// The outbox's free bytes after its last frame, where the next frame
    /// goes: their address and how many there are (0 while the vector is
    /// not longer than the frames), for the eager inline tail push
    /// ([`Io::lend_frame`]). The address is `bytes`' own (`as_mut_ptr`,
    /// which makes no reference to the bytes), valid until `bytes` grows,
    /// is dropped or changes places with another outbox's.
    #[inline(always)]
    fn free_room(&mut self) -> (*mut u8, usize) {
        let room = self.bytes.len().saturating_sub(self.used);
        // `used <= len` always (`push_frame` grows first), so the address is
        // inside the vector's memory or one past its end (where `room` is 0).
        (self.bytes.as_mut_ptr().wrapping_add(self.used), room)
    }

    /// Makes the `len` bytes after the last frame, written in place (by the
    /// eager inline tail push, at [`Outbox::free_room`]'s address), the
    /// outbox's next frame, with channel tag `chan`: what
    /// [`Outbox::push_frame`] records for a frame it lends out.
    #[inline(always)]
    fn commit(&mut self, len: usize, chan: u64) {
        debug_assert!(
            self.used + len <= self.bytes.len(),
            "a frame written in the room"
        );
        let start = self.used;
        self.used = start + len;
        self.frames.push((start, len, NO_TAIL, chan));
    }

    /// Exchanges the frames of `self`, which holds no tail (the receive
    /// side's outbox, into which `txPush` writes whole frames alone), and
    /// `other`: their bytes and records change places, the tails stay.
    /// So a frame's tail index keeps naming its tail across
    /// `applet_tx`'s two exchanges (the only caller: nothing adds or
    /// reads a tail between them), and the exchange moves 56 bytes
    /// instead of 80.
    #[inline(always)]
    fn swap_frames(&mut self, other: &mut Outbox) {
        debug_assert!(self.tails.is_empty());
        std::mem::swap(&mut self.bytes, &mut other.bytes);
        std::mem::swap(&mut self.used, &mut other.used);
        std::mem::swap(&mut self.frames, &mut other.frames);
    }

    /// Gives the frame pushed last a tail.
    fn set_tail(&mut self, tail: Tail) {
        if let Some(f) = self.frames.last_mut() {
            f.2 = self.tails.len() as u32;
            self.tails.push(tail);
        }
    }

    #[inline]
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

    /// Empties an outbox kept for reuse, and gives its memory back if a
    /// burst grew it past [`OUTBOX_KEEP`].
    #[inline]
    fn trim(&mut self) {
        if self.bytes.len() > OUTBOX_KEEP {
            self.shrink();
        } else {
            self.clear();
        }
    }

    #[cold]
    #[inline(never)]
    fn shrink(&mut self) {
        *self = Outbox::default();
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&Tail>)> {
        self.tagged().map(|(f, t, _)| (f, t))
    }

    /// [`Outbox::iter`] with each frame's channel tag ([`sent_on`]).
    fn tagged(&self) -> impl Iterator<Item = (&[u8], Option<&Tail>, u64)> {
        self.frames
            .iter()
            .map(|&(s, l, t, c)| (&self.bytes[s..s + l], self.tails.get(t as usize), c))
    }

    /// Appends a whole frame: `f` and then its tail's bytes.
    fn push_whole(&mut self, f: &[u8], tail: Option<&Tail>, chan: u64) {
        let n = f.len() + tail.map_or(0, |t| t.len);
        let buf = self.push_frame(n, chan);
        buf[..f.len()].copy_from_slice(f);
        if let Some(t) = tail {
            t.seg.read_bytes(t.at, &mut buf[f.len()..]);
        }
    }

    /// Appends every frame of `other`, whole, with its channel tag. An
    /// outbox that has never held a frame (`Outbox::default()`, which
    /// allocates nothing) is first swapped for one of the thread's spare
    /// ones, so that a caller that may not need an outbox at all (an
    /// inbox's drain, whose `doRx`s seldom answer) makes an empty one
    /// instead of taking and giving back a spare one each time, and one
    /// that does need it still writes into warm memory.
    fn append(&mut self, other: &Outbox) {
        if self.bytes.is_empty() {
            self.take_spare();
        }
        for (f, t, c) in other.tagged() {
            self.push_whole(f, t, c);
        }
    }

    /// [`Outbox::append`]'s swap of an outbox that never held a frame
    /// for a spare one of this thread.
    #[cold]
    #[inline(never)]
    fn take_spare(&mut self) {
        if self.frames.is_empty() {
            *self = outbox();
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
/// back when the burst is over. As large as the default budgets' largest
/// burst ([`Budgets::push_bytes`], [`Budgets::inbox_bytes`], 4 MiB), so
/// that well-behaved bursts reuse their outbox rather than allocate and
/// zero it again each time (at 1 MiB, the demo's bursts of 25 messages of
/// 64 KiB lost a third of their bandwidth to that); a thread keeps at most
/// four, 16 MiB.
const OUTBOX_KEEP: usize = 4 << 20;

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
    /// The endpoint whose frames it makes (their tags, [`sent_on`]).
    id: EndpointId,
    /// The endpoint's channels by tag. The transmit side's and the receive
    /// side's framers hold the same channels in the same state (open,
    /// closed; their verdicts are each side's own): both start empty and
    /// change together, under both sides' locks (transmit side first:
    /// [`Framer::set_channel`] and [`Framer::close_channel`], from
    /// `control.rs`), so that a holder of the transmit side's lock that
    /// found a channel open and not closed there knows it so on the receive
    /// side ([`Io::lend_tail`]). A holder of the receive side's lock alone
    /// does not: a closing may have closed the transmit side's and wait for
    /// this one. `both_framers_keep_the_same_channels` tests it.
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
    /// Writes a frame for `chan` carrying `payload` into the outbox (an
    /// applet's `txPush`): the channel's header with the lengths patched,
    /// the payload, and its UDP checksum where the channel wants one. The
    /// checks of [`frame_parts`] in its order (an open channel of this
    /// endpoint, the length against `max_message`), each before anything
    /// is written or counted; the frame is counted as `frame_parts` counts
    /// it.
    ///
    /// [`frame_parts`] written out for the one whole-payload case, inlined
    /// into `Io::transmit` so that `txPush`'s fast form makes no call but
    /// the copy's: out of line, with its result returned through memory
    /// and the frame's slice checked again by the caller, it cost the
    /// standard applet's `txPush` 104 instructions a message.
    #[inline(always)]
    fn push_message(&mut self, chan: u16, payload: &[i8]) -> Result<(), HostError> {
        let ch = checked_channel(&self.channels, self.max_message, chan, payload.len())?;
        write_message(&mut self.out, self.id, ch, chan, payload);
        bump_shared(&self.stats.tx_frames);
        Ok(())
    }

    /// The checks of [`Framer::push_message`], in its order, for a
    /// `len`-byte message on `chan`, with nothing written or counted: what
    /// a deferred `txPush` makes at the call ([`Io::transmit_tail`]).
    #[inline(always)]
    fn check_message(&self, chan: u16, len: usize) -> Result<(), HostError> {
        checked_channel(&self.channels, self.max_message, chan, len).map(|_| ())
    }

    /// The frame [`Framer::push_message`] makes for `payload` on `chan`,
    /// for a deferred `txPush` whose message goes as a frame after all
    /// ([`Engine::resolve_deferred`]): checked and counted at the call
    /// ([`Framer::check_message`]), under the locks that every change of
    /// the channels takes, held since, so that the checks still hold.
    #[cold]
    #[inline(never)]
    fn push_checked(&mut self, chan: u16, payload: &[i8]) {
        let Some(Some(ch)) = self.channels.get(usize::from(chan)) else {
            debug_assert!(false, "a deferred message's channel was checked");
            return;
        };
        write_message(&mut self.out, self.id, ch, chan, payload);
    }

    fn set_channel(&mut self, tag: u16, ch: Option<Channel>) {
        let slot = usize::from(tag);
        if self.channels.len() <= slot {
            self.channels.resize(slot + 1, None);
        }
        self.channels[slot] = ch;
    }

    /// Marks channel `tag` closed (its peer went away).
    fn close_channel(&mut self, tag: u16) {
        if let Some(Some(c)) = self.channels.get_mut(usize::from(tag)) {
            c.flags = (c.flags & !CHAN_DIRECT) | CHAN_CLOSED;
            c.verdict = Kept::default();
        }
    }

    /// Lets go of every verdict kept (and the peers' ports they hold).
    fn forget_verdicts(&mut self) {
        for c in self.channels.iter_mut().flatten() {
            c.verdict = Kept::default();
            c.set_direct(false);
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
            id,
            channels,
            reach,
            out,
            stats,
            max_message,
            copy,
            copy_sum,
        } = self;
        if let Some(ch) = channels.get(usize::from(chan)).and_then(Option::as_ref)
            && ch.goes_kept()
        {
            // Below ILP_MIN_COPY bytes the whole message is cheaper to carry.
            let carried = reach
                .load(Ordering::Acquire)
                .saturating_sub(HEADER_LEN)
                .max(ILP_MIN_COPY);
            if (len as usize) > carried {
                let (_, buf) = frame_parts(
                    *id,
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
        let (want_sum, buf) = frame_parts(*id, channels, out, stats, *max_message, chan, len, len)?;
        let (hdr, body) = buf
            .split_first_chunk_mut::<HEADER_LEN>()
            .expect("a frame holds its header");
        fill_body(seg, at, hdr, body, want_sum, copy, copy_sum)
            .map_err(|e| HostError::Transport(e.to_string()))
    }
}

// The frame the eager inline tail push writes is `write_message`'s: the
// header's length and the fields `frame::patch_lengths_from` patches are
// where jive's generated code patches them (`jive::FRAME_HEADER`).
const _: () = assert!(
    HEADER_LEN == jive::FRAME_HEADER
        && frame::IP == jive::FRAME_IP
        && frame::IP_TOTAL_LEN == jive::FRAME_IP_TOTAL_LEN
        && frame::IP_CSUM == jive::FRAME_IP_CSUM
        && frame::UDP == jive::FRAME_UDP
        && frame::UDP_LEN == jive::FRAME_UDP_LEN
);

/// The checks of an applet's message of `len` bytes on `chan`, in their
/// order: the channel open in `channels`, not closed, and the message no
/// longer than `max`. Returns the channel, for the frame's write
/// ([`Framer::push_message`]); [`Framer::check_message`] alone for a
/// deferred `txPush`.
#[inline(always)]
fn checked_channel(
    channels: &[Option<Channel>],
    max: u32,
    chan: u16,
    len: usize,
) -> Result<&Channel, HostError> {
    let ch = channels
        .get(usize::from(chan))
        .and_then(Option::as_ref)
        .ok_or(HostError::NoSuchChannel(chan))?;
    if ch.closed() {
        return Err(HostError::ChannelClosed(chan));
    }
    // An applet's array is shorter than 2^31 bytes.
    if len as u32 > max {
        return Err(HostError::TooLong {
            len: len as u32,
            max,
        });
    }
    Ok(ch)
}

/// Writes the frame of `payload` on channel `ch` (`chan` of endpoint `id`)
/// into `out`: the channel's header with the lengths patched, the
/// payload, and its UDP checksum where the channel wants one. What
/// [`Framer::push_message`] writes once it has made its checks (inlined
/// there, as it was written).
#[inline(always)]
fn write_message(out: &mut Outbox, id: EndpointId, ch: &Channel, chan: u16, payload: &[i8]) {
    let len = payload.len();
    let buf = out.push_frame(HEADER_LEN + len, sent_on(id, chan));
    let Some((hdr, body)) = buf.split_first_chunk_mut::<HEADER_LEN>() else {
        unreachable!("a frame holds its header")
    };
    *hdr = ch.template;
    frame::patch_lengths_from(hdr, ch.length_sum, len);
    natives::i8_to_u8(body, payload);
    if ch.checksum() {
        // Cannot fail: the frame holds a whole header.
        let _ = frame::set_udp_checksum(buf);
    }
}

/// Copies a message of `body.len()` bytes at `at` of `seg` into a frame's
/// body after its header `hdr` (written, lengths patched), with the ilp
/// loop (`copy`, or `copy_sum` where the channel wants its UDP checksum,
/// which is then written in `hdr`); below [`ILP_MIN_COPY`] bytes without a
/// checksum, a plain copy. What [`Framer::transmit_from`] and
/// [`Framer::transmit_built`] both do once they have their frame (inlined
/// in each, as it was written there: a call of its own cost the framed
/// path 28 instructions a message).
#[inline(always)]
fn fill_body(
    seg: &Segment,
    at: usize,
    hdr: &mut [u8; HEADER_LEN],
    body: &mut [u8],
    want_sum: bool,
    copy: &ilp::Pipeline,
    copy_sum: &ilp::Pipeline,
) -> Result<(), ilp::Error> {
    if !want_sum && body.len() < ILP_MIN_COPY {
        seg.read_bytes(at, body);
        return Ok(());
    }
    let p = if want_sum { copy_sum } else { copy };
    let mut st = ilp::State::new();
    seg.with_bytes(at, body.len(), |src| p.run(src, body, &mut st))?;
    if want_sum {
        let c = frame::udp_checksum_with_payload_sum(hdr, u32::from(st.sum));
        hdr[frame::UDP_CSUM..frame::UDP_CSUM + 2].copy_from_slice(&c.to_be_bytes());
    }
    Ok(())
}

impl Framer {
    /// [`Framer::transmit_from`] of a message on `chan` to another engine,
    /// with its frame built straight in memory the transport lends
    /// ([`Transport::send_built`]: `xdp`'s UMEM transmit frames), so that
    /// the frame is written once, not built here and copied again by the
    /// transport. The same header and the same ilp loop as
    /// `transmit_from`; counted the same (a frame made), and the frame is
    /// queued on the transport, which [`Transport::flush`] sends.
    ///
    /// `None`, with nothing done or counted, where it does not apply and
    /// the caller makes the frame in the outbox as before: a channel to
    /// an endpoint of this engine, or none, or closed, or a message too
    /// long (the outbox's path reports those), or a transport that lends
    /// nothing. `Some(Err)`: the frame was not sent, the copy having
    /// failed (the lent memory went back to the transport unsent) or the
    /// transport having refused its length.
    fn transmit_built(
        &mut self,
        t: &mut dyn Transport,
        seg: &Segment,
        at: usize,
        chan: u16,
        len: u32,
    ) -> Option<Result<(), BuiltError>> {
        let Framer {
            channels,
            stats,
            max_message,
            copy,
            copy_sum,
            ..
        } = self;
        let ch = channels.get(usize::from(chan)).and_then(Option::as_ref)?;
        if ch.local() || ch.closed() || len > *max_message {
            return None;
        }
        let (template, want_sum) = (&ch.template, ch.checksum());
        let built = t.send_built(HEADER_LEN + len as usize, &mut |buf| {
            let Some((hdr, body)) = buf.split_first_chunk_mut::<HEADER_LEN>() else {
                return false;
            };
            *hdr = *template;
            frame::patch_lengths(hdr, len as usize);
            fill_body(seg, at, hdr, body, want_sum, copy, copy_sum).is_ok()
        });
        match built {
            Ok(Built::NotLent) => None,
            Ok(Built::Queued) => {
                bump_shared(&stats.tx_frames);
                Some(Ok(()))
            }
            Ok(Built::Abandoned) => Some(Err(BuiltError::Copy)),
            Err(_) => {
                // Made, as the outbox's path counts it, then refused.
                bump_shared(&stats.tx_frames);
                Some(Err(BuiltError::Refused))
            }
        }
    }
}

/// Why [`Framer::transmit_built`] sent no frame.
#[derive(Debug)]
enum BuiltError {
    /// The copy of the message failed: no frame was made, and the memory
    /// lent went back to the transport unsent.
    Copy,
    /// The transport refused the frame it was to build (counted as a
    /// send error, as a refusal of [`Transport::send`] is).
    Refused,
}

/// The frame of a message sent from the buffer area, on the framer's
/// fields it needs, so that a caller may keep borrowing the others: a
/// frame for a `len`-byte message of which the first `carried` bytes
/// follow the header (the caller keeps the rest as a [`Tail`]). An
/// applet's `txPush` makes its frame with [`Framer::push_message`], which
/// makes the same checks in the same order.
#[allow(clippy::too_many_arguments)]
fn frame_parts<'a>(
    id: EndpointId,
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
    if ch.closed() {
        return Err(HostError::ChannelClosed(chan));
    }
    if len > max_message {
        return Err(HostError::TooLong {
            len,
            max: max_message,
        });
    }
    let buf = out.push_frame(HEADER_LEN + carried.min(len) as usize, sent_on(id, chan));
    let (hdr, _) = buf
        .split_first_chunk_mut::<HEADER_LEN>()
        .expect("a frame holds its header");
    *hdr = ch.template;
    // From the channel's kept sum, as `txPush`'s frames are: the same
    // lengths and checksum without reading the header's two words again.
    frame::patch_lengths_from(hdr, ch.length_sum, len as usize);
    bump_shared(&stats.tx_frames);
    Ok((ch.checksum(), buf))
}

/// The transmit side of a port: the engine's end of the transmit queue and
/// what sending without an applet needs. Its lock is held by the thread
/// servicing the queue, from taking descriptors until their frames are
/// delivered, so a channel's messages arrive in order.
struct TxSide {
    tx: Consumer<TxDesc, TxQueue>,
    framer: Framer,
    /// The frames that delivering the framer's frames makes (an applet's
    /// replies), for [`Engine::pump`]'s next round.
    next: Outbox,
}

/// The receive side of a port: the receive and free queues, the applet
/// (which `doTx` reaches through this lock too), its trap policy.
struct RxSide {
    io: Io,
    applet: Option<Loaded>,
    policy: TrapPolicy,
    traps_since_install: u64,
    /// Invocations in a row that overran a budget (each doubles the
    /// throttle, up to [`THROTTLE_MAX`]).
    overruns_in_row: u32,
}

/// The engine's side of one endpoint.
pub struct Port {
    /// Slot and generation ([`EndpointId`]).
    id: EndpointId,
    seg: Arc<Segment>,
    layout: Layout,
    /// The buffer area of `seg` (`layout`'s), where the engine reads the
    /// message a lent `doTx` deferred ([`AreaBytes::view`]).
    area: AreaBytes,
    /// The receive queue `rx`'s producer writes, on the same mapping, for
    /// the hint a sender gives before it takes the receive side's lock
    /// ([`Port::ask_for_rx_slot`]).
    rx_queue: RxQueue,
    tx: CacheLine<SideLock<TxSide>>,
    rx: CacheLine<SideLock<RxSide>>,
    /// Whether `rx` holds an applet, so that transmit takes the receive
    /// side's lock only when an applet's `doTx` needs it.
    has_applet: AtomicBool,
    /// Whether that applet's `doTx` is lent ([`DoTx::Lent`]), so that a
    /// message from the application's memory is lent to it where it lies
    /// ([`Engine::send_applet_bytes`]). Written only with both sides'
    /// locks held ([`Engine::set_applet`]) and read under the transmit
    /// lock, so that it holds until the invocation (closing only removes
    /// the applet, which `has_applet` and the receive side tell).
    lends_tx: AtomicBool,
    /// Frames for an applet's `doRx`, in arrival order, waiting for a
    /// thread that drains them ([`Engine::drain`]): the endpoint's own
    /// application thread (its receive calls) or the engine's threads. So
    /// an applet runs on the thread of its own endpoint, and its heap and
    /// interpreter state stay in that core's cache, instead of moving to
    /// whichever thread delivered the frame. A byte ring (see `inbox.rs`).
    inbox: CacheLine<inbox::Inbox>,
    /// Set when the endpoint is removed (under the receive side's lock,
    /// before its inbox is emptied): frames that reach it from then on are
    /// counted as [`EngineCounts::closed`], not delivered.
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

/// A token of the calling thread (never 0, never another thread's): the
/// side locks' own ([`crate::biased::token`]), so that a thread reads one
/// thread-local for both its endpoints' owner check and its locks.
#[inline]
fn thread_token() -> u64 {
    crate::biased::token()
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
    #[inline]
    pub fn claim(&self) {
        self.claim_as(crate::biased::Me::current());
    }

    /// [`Port::claim`] with the calling thread's token read already.
    #[inline]
    pub(crate) fn claim_as(&self, me: crate::biased::Me) {
        let me = me.token();
        if self.owner.load(Ordering::Relaxed) != me {
            self.owner.store(me, Ordering::Relaxed);
        }
    }

    /// Whether the endpoint has an applet now, for
    /// [`crate::Endpoint::send_with`]'s choice of where its fill writes a
    /// short message (a hint: every way on reads the flag again under its
    /// locks).
    #[inline(always)]
    pub(crate) fn applet_installed(&self) -> bool {
        self.has_applet.load(Ordering::Acquire)
    }

    /// [`Port::claim`] if the endpoint has an applet (the only case in
    /// which the owner matters: an applet's frames skip the inbox on its
    /// thread, and its work is bounded on the others).
    #[inline]
    pub fn claim_if_applet(&self) {
        if self.has_applet.load(Ordering::Relaxed) {
            self.claim();
        }
    }

    /// Whether a frame for this endpoint waits in its inbox instead of
    /// running its applet on this thread: it has an applet, and this
    /// thread is not its own or the frames applets made in this thread's
    /// delivery (`made`) are past its inbox budget, so that they
    /// cannot pile up without bound. One test for every way to it (the
    /// frame's, [`Engine::deliver_to`]; a message without a frame,
    /// `deliver_local_inline`), so that neither can drift from the other.
    /// A deferred `txPush` ([`Engine::deliver_deferred`], which then
    /// puts it in the inbox or delivers it on the sender's thread) makes
    /// the same test with the thread's token read already
    /// ([`Port::applet_elsewhere_as`], a copy of [`Port::applet_elsewhere`]
    /// kept in step with it).
    #[inline(always)]
    fn waits_in_inbox(&self, made: &Outbox) -> bool {
        self.has_applet.load(Ordering::Acquire) && self.applet_elsewhere(made)
    }

    /// [`Port::waits_in_inbox`] for an endpoint whose applet is known.
    #[inline(always)]
    fn applet_elsewhere(&self, made: &Outbox) -> bool {
        self.owner.load(Ordering::Relaxed) != thread_token()
            || made.used >= self.budgets.inbox_bytes
    }

    /// [`Port::applet_elsewhere`] with the calling thread's token `me`
    /// read already: the same test, written out again rather than making
    /// `applet_elsewhere` take a token, which cost the path without applet
    /// an instruction a message (wip-txpath's section of
    /// docs/benchmarks.md). Change the two together.
    #[inline(always)]
    fn applet_elsewhere_as(&self, made: &Outbox, me: Me) -> bool {
        self.owner.load(Ordering::Relaxed) != me.token() || made.used >= self.budgets.inbox_bytes
    }

    /// Asks for the line of the receive slot the next descriptor pushed
    /// to this endpoint goes to ([`RxQueue::ask_for_next_slot`]), for a
    /// sender on this engine with its message's checks still to make
    /// ([`Engine::send_direct`]), unless the endpoint has an applet (its
    /// messages go through `doRx`, on its own thread or through its
    /// inbox, not straight into that slot). A hint only.
    #[inline(always)]
    pub(super) fn ask_for_rx_slot(&self) {
        if !self.has_applet.load(Ordering::Relaxed) {
            self.rx_queue.ask_for_next_slot();
        }
    }

    /// Whether the calling thread is the one that runs this endpoint's
    /// application (the last to [`Port::claim`] it).
    #[inline]
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

    /// The endpoint's counters. `queue_corrupt` includes the frames its
    /// applet's inbox dropped behind a header that failed its check
    /// (the inbox's `dropped`), counted there by the consumer alone.
    pub fn counts(&self) -> PortCounts {
        let mut c = self.stats.snapshot();
        c.queue_corrupt = c.queue_corrupt.wrapping_add(self.inbox.dropped());
        c
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
/// How many frames of an inbox a drain runs between two publications of
/// the receive and free queues.
const PUBLISH_EVERY: usize = 16;
/// How many frames one poll of the transport takes at most.
const RX_BUDGET: usize = 32;
/// How many rounds of applet-made frames one pump follows before it leaves
/// the rest for the next call (an applet ping-pong that never ends must not
/// hold a thread forever).
const PUMP_ROUNDS: usize = 4096;

/// What the control lock guards besides the control operations' order.
#[derive(Default)]
struct Control {
    /// Slots [`Engine::create_port`] has taken for endpoints it is
    /// building without the lock: no other creation takes them.
    reserved: Vec<u16>,
}

struct Inner {
    id: u64,
    local: Addr,
    transport: Mutex<Box<dyn Transport>>,
    /// The transport's lock-free "may have frames" test, if it has one.
    readiness: Option<crate::transport::Readiness>,
    /// Whether the transport lends memory to build frames in
    /// ([`Transport::lends`]): if not, a transmit pass never takes its
    /// lock to ask.
    lends: bool,
    max_payload: u32,
    table: Mutex<dpf::Table>,
    /// The endpoints, indexed by slot.
    ports: ports::Ports,
    control: Mutex<Control>,
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
    /// Each installed filter's footprint (see [`control::Footprint`]).
    footprints: Mutex<control::Footprints>,
    /// The version of the filter table that the transmit path's verdicts
    /// cached per channel are valid for, or 0 when they are not valid at
    /// all: some installed filter loads a byte that differs between two
    /// messages of one channel (a length, a checksum, the message).
    /// Changed after every change of the table (see
    /// [`Engine::publish_footprints`]); a local channel's frame whose
    /// verdict was taken under this version needs no classification, since
    /// the table would say of it what it said of the channel's header.
    verdicts: AtomicU64,
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
                lends: transport.lends(),
                transport: Mutex::new(transport),
                max_payload,
                table: Mutex::new(dpf::Table::new()),
                ports: ports::Ports::new(),
                control: Mutex::new(Control::default()),
                generations: Mutex::new(Vec::new()),
                local_peers: Mutex::new(std::collections::HashMap::new()),
                reach: Arc::new(AtomicUsize::new(HEADER_LEN)),
                footprints: Mutex::new(control::Footprints::default()),
                // No verdict is cached before the first change of the table.
                verdicts: AtomicU64::new(0),
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
        self.inner.ports.with(|ports| {
            ports
                .get(usize::from(endpoint_slot(id)))
                .and_then(Clone::clone)
                .filter(|p| p.id == id)
        })
    }

    /// The ids of the endpoints that exist now, in slot order.
    pub fn endpoints(&self) -> Vec<EndpointId> {
        self.inner
            .ports
            .with(|ports| ports.iter().flatten().map(|p| p.id).collect())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Two endpoints still open that send to each other keep each
        // other's port in their channels' verdicts: let go of them, so that
        // the ports (and their shared memory) go with the engine.
        for p in self.ports.load_full().iter().flatten() {
            p.tx.lock().framer.forget_verdicts();
        }
    }
}
