//! The application's side of an endpoint (U-Net §2 as U-Net/SLE recalls
//! it): put a message in the buffer area, push a transmit descriptor, poll
//! the receive queue, give buffers back through the free queue.
//!
//! [`Endpoint`] owns the application's ends of the three queues and a
//! simple policy for the buffer area: the first half of the buffers is its
//! transmit region, allocated in order as a ring (transmit descriptors
//! complete in order, so the region frees in order too), and the second
//! half is handed to the engine through the free queue for reception. An
//! application that wants another policy uses [`Endpoint::push_tx`] and
//! [`Endpoint::give_buffer`] on offsets it manages itself.
//!
//! The engine runs in the same process by default and is driven by the
//! endpoint's own calls: [`Endpoint::send`] services the transmit queue it
//! just pushed to, and [`Endpoint::recv`] polls the transport when the
//! receive queue is empty. An engine with threads of its own
//! ([`crate::Engine::start`]) makes that unnecessary but harmless.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use thiserror::Error;

use crate::biased::Me;
use crate::engine::{ChannelOptions, Engine, EngineError, Port, PortCounts, RxPoll};
use crate::error::ConfigError;
use crate::frame::{Addr, EndpointId};
use crate::layout::{Config, INLINE_MAX, Layout, RX_BUFFERS_MAX, RxDesc, TxDesc, TxStatus};
use crate::ring::{Consumer, Producer, QueueMem};
use crate::shm::{FreeQueue, RxQueue, Segment, TxQueue, queues};

/// Why a message was not queued for sending. Nothing was queued.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SendError {
    /// The message is longer than the endpoint's largest message.
    #[error("message of {len} bytes exceeds this endpoint's largest message ({max} bytes)")]
    TooLong {
        /// The length given.
        len: usize,
        /// The largest allowed.
        max: usize,
    },
    /// The transmit queue or the transmit region is full for now: the
    /// engine has not taken enough earlier messages yet.
    #[error("the transmit queue is full; try again once the engine has taken earlier messages")]
    Full,
    /// The engine published a queue index no correct engine could have.
    #[error("the transmit queue is corrupt")]
    Corrupt,
    /// The channel was closed because its peer, an endpoint of the same
    /// engine, went away; nothing more is sent on it.
    #[error("channel {chan} is closed: its peer endpoint went away")]
    ChannelClosed {
        /// The channel's tag.
        chan: u16,
    },
}

/// One received message. Dropping it gives its buffers back to the engine
/// (through the free queue, a few at a time: see [`GIVE_BACK`]).
pub struct Message<'a> {
    ep: &'a mut Endpoint,
    desc: RxDesc,
}

impl Message<'_> {
    /// The channel it arrived on.
    pub fn chan(&self) -> u16 {
        self.desc.chan
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.desc.len as usize
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.desc.len == 0
    }

    /// Whether it came inline in the descriptor (≤ 56 bytes).
    pub fn is_inline(&self) -> bool {
        self.desc.nbufs == 0
    }

    /// The buffer offsets holding it (empty if inline).
    pub fn buffers(&self) -> impl Iterator<Item = u32> + '_ {
        (0..usize::from(self.desc.nbufs)).map(|i| self.desc.offset(i))
    }

    /// Calls `f` on each piece of the message in order, in place: the
    /// inline bytes, or each buffer's share (zero copy). Inlined, as the
    /// compiler mostly chose: as a call, the copying receive's 40-byte
    /// path took 24 instructions more (`unet-count` path-40-copying).
    #[inline]
    pub fn read(&self, mut f: impl FnMut(&[u8])) {
        if self.is_inline() {
            f(&self.desc.data[..self.len()]);
            return;
        }
        self.ep.read_buffers(&self.desc, f);
    }

    /// A copy of the message.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        self.read(|p| v.extend_from_slice(p));
        v
    }

    /// Its receive descriptor, keeping its buffers: they are not given
    /// back when the message goes, but stay the application's until it
    /// gives each back with [`Endpoint::give_buffer`] (receive buffers
    /// managed by hand, e.g. to send one on in place before giving it
    /// back).
    ///
    /// ```
    /// use unet::{Config, Engine};
    /// let net = unet::transport::LoopNet::new();
    /// let engine = Engine::new(Box::new(net.attach("10.0.0.1:7000".parse()?)?));
    /// let mut a = engine.create_endpoint(Config::default(), None)?;
    /// let mut b = engine.create_endpoint(Config::default(), None)?;
    /// let ab = a.open_channel(engine.local(), b.id())?;
    /// b.open_channel(engine.local(), a.id())?;
    /// a.send(ab, &[7u8; 5000])?;
    /// let d = b.recv().expect("delivered").into_desc();
    /// assert_eq!((d.len, d.nbufs), (5000, 2)); // b holds both buffers
    /// for i in 0..usize::from(d.nbufs) {
    ///     assert!(b.give_buffer(d.offset(i)));
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn into_desc(self) -> RxDesc {
        let desc = self.desc;
        // Nothing to release but the buffers, which the caller now holds.
        std::mem::forget(self);
        desc
    }
}

impl Drop for Message<'_> {
    fn drop(&mut self) {
        for i in 0..usize::from(self.desc.nbufs) {
            let off = self.desc.offset(i);
            self.ep.give_back(off);
        }
    }
}

/// One received message, read in place ([`Endpoint::recv_ref`]): a
/// borrow of the endpoint until it is dropped. An inline message (≤ 56
/// bytes) is read from its slot of the receive queue, which stays the
/// application's (the engine writes no descriptor into it) until the
/// message is dropped; a message in buffers is read from its buffers, which
/// are given back to the engine when it is dropped, as [`Message`]'s are.
///
/// Only the descriptor's fixed part (length, channel, number of buffers),
/// and for a message in buffers the whole descriptor, is copied into
/// private memory and checked; an inline message's bytes are read in
/// place, as a message in buffers always is.
pub struct MessageRef<'a> {
    ep: &'a mut Endpoint,
    len: u32,
    chan: u16,
    body: Body,
}

/// A message [`Endpoint::recv_ref_slow`] took, for `recv_ref` to make
/// its [`MessageRef`]: 16 bytes, made so to come back in two registers
/// (a `MessageRef` came back through memory, and the caller's short path,
/// joined with it, built its own inline message's there too: some 15
/// instructions per message). With rustc 1.95 an `Option<Taken>` still
/// comes back through memory, its four fields stored and loaded again,
/// which is why the applet's receive ([`Endpoint::recv_ref_inbox`])
/// answers with a `bool` and `recv_ref` looks at the front itself.
#[derive(Clone, Copy)]
struct Taken {
    len: u32,
    chan: u16,
    body: Body,
}

const _: () = assert!(size_of::<Option<Taken>>() == 16);

/// What a receive call that found its queue empty has to do
/// ([`Endpoint::empty_poll`]).
#[derive(Clone, Copy)]
enum EmptyPoll<'a> {
    /// Nothing: it returns at once.
    Idle,
    /// Run the frames waiting in the applet's inbox of port `.1` of
    /// engine `.0` (the endpoint's, found here), on this thread (`.2`,
    /// which claimed the endpoint): [`Endpoint::recv_ref_inbox`].
    Inbox(&'a Engine, &'a Port, Me),
    /// Give back gathered buffers, poll the transport, or drive a daemon's
    /// engine: [`Endpoint::recv_ref_drive`].
    Other,
}

/// Where a [`MessageRef`]'s bytes are.
#[derive(Clone, Copy)]
enum Body {
    /// Inline in receive queue slot `.0`, the front one, not yet freed.
    Inline(u32),
    /// In buffers; its slot is already freed. A message no longer than a
    /// buffer (checked as [`Endpoint::well_formed`] checks a descriptor:
    /// its length within the buffer, the offset a buffer's start) is in
    /// the one buffer at offset `.0` of the buffer area, the common case
    /// above `INLINE_MAX`, and nothing else of it is kept: the offset is
    /// all there is to read and give back. A longer one reads [`HELD`]
    /// here, which no buffer's offset is (so that reading and dropping the
    /// message test `.0` alone, not the length against the endpoint's
    /// buffer size: 8 instructions a 57-byte message, `unet-count`
    /// path-57): it is in the buffers that the private copy of its (well
    /// formed) descriptor in [`Endpoint::held`] names, kept in the
    /// endpoint, not here: a 64-byte aligned descriptor made every
    /// `Option<MessageRef>` 192 bytes, moved with a `memcpy` on each
    /// return, inline messages included. (Two variants, not a third for
    /// one buffer: with three, the compiler built the inline message's
    /// `MessageRef` in memory and read it back, some 20 instructions on
    /// the 40-byte path.)
    Buffers(u32),
}

/// [`Body::Buffers`]' offset for a message in more than one buffer: never
/// a buffer's offset (those are multiples of the buffer size, at least 64).
const HELD: u32 = u32::MAX;

impl MessageRef<'_> {
    /// The channel it arrived on.
    pub fn chan(&self) -> u16 {
        self.chan
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it came inline in the descriptor (≤ 56 bytes).
    pub fn is_inline(&self) -> bool {
        matches!(self.body, Body::Inline(_))
    }

    /// Calls `f` on each piece of the message in order, in place: the
    /// inline bytes in their receive queue slot (one piece), or each
    /// buffer's share.
    #[inline]
    pub fn read(&self, mut f: impl FnMut(&[u8])) {
        match &self.body {
            Body::Inline(i) => self.ep.rx.mem().with_rx_inline(*i, self.len(), f),
            Body::Buffers(off) if *off != HELD => {
                self.ep
                    .seg
                    .with_bytes(self.ep.layout.area + *off as usize, self.len(), f)
            }
            Body::Buffers(_) => self.ep.read_buffers(&self.ep.held, &mut f),
        }
    }

    /// A copy of the message.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        self.read(|p| v.extend_from_slice(p));
        v
    }

    /// The offset of its first buffer, if it came in buffers.
    #[cfg(test)]
    fn first_buffer(&self) -> Option<u32> {
        match self.body {
            Body::Inline(_) => None,
            Body::Buffers(HELD) => Some(self.ep.held.offset(0)),
            Body::Buffers(off) => Some(off),
        }
    }
}

impl Drop for MessageRef<'_> {
    #[inline]
    fn drop(&mut self) {
        match &self.body {
            // The slot goes back to the engine only now.
            Body::Inline(_) => self.ep.rx.advance(),
            // One buffer given back inline, the common case.
            Body::Buffers(off) if *off != HELD => {
                let off = *off;
                self.ep.give_back(off);
            }
            Body::Buffers(_) => self.ep.give_back_held(),
        }
    }
}

/// The most buffers of received messages an endpoint gathers before it
/// gives them back to the engine through the free queue: a receiver then
/// publishes the free queue once per 8 buffers, and the engine reads its
/// producer index and slots once per 8 (two cache lines crossing cores per
/// buffer otherwise). An endpoint with fewer than 64 receive buffers
/// gathers an eighth of them; a receiver that finds its receive queue
/// empty gives back what it gathered before it waits, so the engine runs
/// short of buffers only while the application has messages to read.
pub const GIVE_BACK: usize = 8;
const _: () = assert!(GIVE_BACK.is_power_of_two(), "give_back masks its index");

/// How many bytes of its transmit region an endpoint allocates between
/// two looks at whether the engine has taken everything, to start again at
/// the region's beginning if it has ([`Endpoint::alloc_slow`]): a few
/// pages, so that a ping-pong's messages stay in the same few cache lines
/// (each look reads the transmit queue's consumer index).
const REWIND_EVERY: u64 = 16384;

/// The bytes of the transmit region an allocation of `len` bytes takes:
/// whole cache lines, at least one.
#[inline(always)]
fn alloc_need(len: usize) -> u64 {
    (len as u64).div_ceil(64).max(1) * 64
}

/// The longest message [`Endpoint::send_with`] has written into a private
/// buffer rather than the transmit region when it may go to the engine
/// directly: a receive descriptor's inline bytes, rounded up to the 64
/// bytes `shm::copy_small` copies without a call.
const SMALL_DIRECT: usize = 64;

/// The most bytes of the buffer it expects the next message in that a
/// receiver asks the CPU for while the message's descriptor is on its way
/// ([`Endpoint::recv_ref`]): enough for the first 32 lines, so that a
/// ping-pong of 1 KiB messages has its payload fetched alongside the
/// descriptor rather than after it, and a stream of large ones does not
/// spend instructions on lines the hardware's own prefetcher brings.
const PREFETCH_MAX: usize = 2048;

/// The most lines of the buffer it expects the next message in that a
/// receiver asks the CPU for at each empty poll while it waits
/// ([`Endpoint::poll_expected`]): a short message's buffer then crosses
/// cores beside its receive slot, not after it. Four lines (256 bytes):
/// the 57 to 256-byte round trips gained 0.03 to 0.16 µs with it, while
/// asking for all 16 lines of a 1 KiB message at every poll took that
/// round trip from 1.2 to 2.3 µs (`loop_rtt`, alternated runs; the
/// waiting side then takes lines from the sender while it writes them).
const POLL_FETCH_LINES: u32 = 4;

/// The lines a receiver asks for ahead of its next message after a
/// `len`-byte message in buffers: the lines it filled, at most
/// [`PREFETCH_MAX`] bytes' ([`Endpoint::fetch_lines`], and the ring
/// peer's, which asks as an endpoint does).
#[inline(always)]
pub(crate) fn lines_ahead(len: u32) -> u32 {
    len.min(PREFETCH_MAX as u32).div_ceil(64)
}

/// Whether a receiver's empty poll asks for the `lines` of
/// [`lines_ahead`]: some, and at most [`POLL_FETCH_LINES`].
#[inline(always)]
pub(crate) fn poll_asks(lines: u32) -> bool {
    lines != 0 && lines <= POLL_FETCH_LINES
}

/// An endpoint, as its application sees it.
pub struct Endpoint {
    id: EndpointId,
    seg: Arc<Segment>,
    layout: Layout,
    tx: Producer<TxDesc, TxQueue>,
    rx: Consumer<RxDesc, RxQueue>,
    free: Producer<u32, FreeQueue>,
    /// The transmit region: bytes `[0, region)` of the buffer area.
    region: u64,
    /// Bytes of the region allocated and freed, since creation.
    alloc_head: u64,
    alloc_tail: u64,
    /// `alloc_head % region`, kept as it moves: two divisions per message
    /// (some 25 cycles each) otherwise.
    alloc_pos: u64,
    /// The largest message it sends ([`Endpoint::max_message`]).
    max_message: usize,
    /// For each push number `n` (wrapping) of the last `ends.len()`: the
    /// region's allocation end once descriptor `n` completes, that is
    /// `alloc_head` just after it was pushed (descriptors complete in
    /// order). Twice the transmit queue's depth: at most a depth of
    /// descriptors is in flight, so the entry of the last one completed is
    /// never overwritten before it is read.
    ends: Box<[u64]>,
    /// The transmit queue's consumer index when the region was last
    /// reclaimed.
    reclaimed: u32,
    /// The position in the region (at most `region`) past which the next
    /// allocation first asks whether the region is empty, to start again
    /// at its beginning ([`Endpoint::alloc_slow`]): every [`REWIND_EVERY`]
    /// bytes allocated.
    look_at: u64,
    /// Receive descriptors that were not well formed (skipped).
    bad_rx: u64,
    /// The engine's count of closed channels when `closed` was last read
    /// ([`crate::layout::CLOSED_CHANNELS_AT`]).
    closed_seen: u32,
    /// The channels closed because their peer went away.
    closed: Vec<u16>,
    /// Buffers of received messages dropped since the free queue was last
    /// published, given back together ([`Endpoint::give_back`]): one
    /// publication, and one cache line the engine reads, per batch rather
    /// than per buffer.
    given: [u32; GIVE_BACK],
    /// How many of `given` hold a buffer.
    gathered: usize,
    /// How many buffers `given` gathers before they go: [`GIVE_BACK`], or
    /// fewer for an endpoint with few receive buffers.
    give_batch: usize,
    /// The private, checked copy of the descriptor of the message in
    /// more than one buffer that a [`MessageRef`] reads (valid while one
    /// borrows the endpoint with [`Body::Buffers`] for a message longer
    /// than a buffer).
    held: RxDesc,
    /// The free queue's count (wrapping) of the entry the engine is
    /// expected to take next, as far as this side can tell: the engine
    /// takes the queue's entries in order, one per buffer of each message
    /// it delivers here, so this moves by each received message's number
    /// of buffers (and is set again from the message's first buffer when
    /// it was not the one expected: an applet's `getFreeBuffer`, or
    /// buffers the engine kept back, take entries this side does not see).
    /// Only a hint: it chooses which lines [`Endpoint::recv_ref`] asks the
    /// CPU to fetch early, never what is read.
    expect: u32,
    /// How many lines of the first buffer the last message received
    /// filled if it came in buffers (at most [`PREFETCH_MAX`] bytes'), 0 if
    /// it came inline: a message in buffers is probably followed by
    /// another of about its size, whose buffer's lines are asked for
    /// early. Counted when the message is taken, so that the early fetch
    /// costs only this field's read and the prefetches themselves.
    fetch_lines: u32,
    link: Box<dyn Control>,
    drive: bool,
    /// The engine and this endpoint's port, if the engine runs in this
    /// process: [`Endpoint::send`] hands it messages directly
    /// (`Engine::send_direct`), and a receive call that finds the queue
    /// empty drives its receive work directly (`Endpoint::drive_rx`).
    /// `None` for a daemon's client, whose
    /// messages the engine reads from the transmit queue, as an untrusted
    /// client's.
    direct: Option<(Engine, Arc<Port>)>,
}

/// A message an endpoint hands to an engine in its own process without a
/// transmit descriptor (`Engine::send_direct`): where its bytes are.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Direct<'a> {
    /// In the caller's memory.
    Bytes(&'a [u8]),
    /// The `len` bytes at `offset` in the endpoint's buffer area (written
    /// there by [`Endpoint::send_with`]'s `fill`).
    Area {
        /// Offset in the buffer area.
        offset: u32,
        /// Length in bytes.
        len: u32,
    },
}

/// What [`Engine::send_direct_or_applet`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handed {
    /// Sent without a descriptor, as [`Engine::send_direct`] sends.
    Sent,
    /// Not sent: the endpoint has an applet, whose `doTx` takes the
    /// message from the buffer area ([`Endpoint::send_applet`]).
    ToApplet,
    /// Not sent: the endpoint has an applet whose `doTx` is lent, which
    /// takes the message where the caller has it
    /// ([`Endpoint::send_applet_lent`]).
    ToLentApplet,
    /// Not sent, nothing done or counted: through the queue.
    Declined,
}

/// What an endpoint asks of its engine besides the queues: the control
/// operations, and, for an engine in this process, the work its calls
/// drive. An engine in another process (`fastpath engine`) answers these
/// over its Unix socket.
pub trait Control: Send {
    /// See [`Engine::open_channel`].
    fn open_channel(
        &mut self,
        id: EndpointId,
        remote: Addr,
        remote_ep: EndpointId,
        opts: ChannelOptions,
    ) -> Result<u16, EngineError>;
    /// See [`Engine::install_filter`].
    fn install_filter(
        &mut self,
        id: EndpointId,
        chan: u16,
        filter: &str,
        priority: i32,
    ) -> Result<dpf::FilterId, EngineError>;
    /// See [`Engine::remove_filter`].
    fn remove_filter(&mut self, id: EndpointId, filter: dpf::FilterId) -> Result<(), EngineError>;
    /// See [`Engine::set_applet`].
    fn set_applet(&mut self, id: EndpointId, applet: Option<&[u8]>) -> Result<(), EngineError>;
    /// The engine's counters for the endpoint.
    fn counts(&mut self, id: EndpointId) -> Result<PortCounts, EngineError>;
    /// See [`Engine::closed_channels`].
    fn closed_channels(&mut self, id: EndpointId) -> Result<Vec<u16>, EngineError>;
    /// Services the endpoint's transmit queue, if this process runs the engine.
    fn drive_tx(&mut self) {}
    /// Runs the frames waiting for this endpoint's applet and polls the
    /// transport, if this process runs the engine.
    fn drive_rx(&mut self) {}
    /// The engine, if it runs in this process.
    fn engine(&self) -> Option<&Engine> {
        None
    }
    /// The endpoint is going away.
    fn close(&mut self, id: EndpointId);
}

/// The engine in this process.
struct Embedded {
    engine: Engine,
    port: Arc<Port>,
}

impl Control for Embedded {
    fn open_channel(
        &mut self,
        id: EndpointId,
        remote: Addr,
        remote_ep: EndpointId,
        opts: ChannelOptions,
    ) -> Result<u16, EngineError> {
        self.engine.open_channel(id, remote, remote_ep, opts)
    }
    fn install_filter(
        &mut self,
        id: EndpointId,
        chan: u16,
        filter: &str,
        priority: i32,
    ) -> Result<dpf::FilterId, EngineError> {
        self.engine.install_filter(id, chan, filter, priority)
    }
    fn remove_filter(&mut self, id: EndpointId, filter: dpf::FilterId) -> Result<(), EngineError> {
        self.engine.remove_filter(id, filter)
    }
    fn set_applet(&mut self, id: EndpointId, applet: Option<&[u8]>) -> Result<(), EngineError> {
        // The thread that sets an applet runs it from now on (`drive_tx`
        // claims only an endpoint with an applet).
        self.port.claim();
        self.engine.set_applet(id, applet)
    }
    fn counts(&mut self, _id: EndpointId) -> Result<PortCounts, EngineError> {
        Ok(self.port.counts())
    }
    fn closed_channels(&mut self, id: EndpointId) -> Result<Vec<u16>, EngineError> {
        self.engine.closed_channels(id)
    }
    fn drive_tx(&mut self) {
        // Which thread runs the application matters only to an applet
        // (see `Port::claim`): the thread-local token is not read per
        // message of an endpoint without one. `drive_rx` and `set_applet`
        // claim in any case.
        self.port.claim_if_applet();
        self.engine.service(&self.port);
    }
    fn drive_rx(&mut self) {
        self.engine.drive_rx(&self.port);
    }
    fn engine(&self) -> Option<&Engine> {
        Some(&self.engine)
    }
    fn close(&mut self, id: EndpointId) {
        let _ = self.engine.remove_port(id);
    }
}

impl core::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Endpoint")
            .field("id", &self.id)
            .field("layout", &self.layout)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Creates an endpoint with `config` and an optional applet (a class
    /// file, loaded, verified and constructed now), in this process.
    ///
    /// ```
    /// use unet::{Config, Engine};
    /// let net = unet::transport::LoopNet::new();
    /// let engine = Engine::new(Box::new(net.attach("10.0.0.1:7000".parse()?)?));
    /// let mut a = engine.create_endpoint(Config::default(), None)?;
    /// let mut b = engine.create_endpoint(Config::default(), None)?;
    /// let ab = a.open_channel(engine.local(), b.id())?;
    /// let _ba = b.open_channel(engine.local(), a.id())?;
    /// a.send(ab, b"hello, endpoint")?;
    /// let msg = b.recv().expect("delivered");
    /// assert_eq!(msg.to_vec(), b"hello, endpoint");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_endpoint(
        &self,
        config: Config,
        applet: Option<&[u8]>,
    ) -> Result<Endpoint, EngineError> {
        let port = self.create_port(config, applet)?;
        let (id, seg, layout) = (port.id(), port.segment().clone(), *port.layout());
        let direct = Some((self.clone(), port.clone()));
        let made = Endpoint::from_parts(
            id,
            seg,
            layout,
            Box::new(Embedded {
                engine: self.clone(),
                port,
            }),
        );
        // The engine laid the segment out itself, so `from_parts` accepts
        // it; were it refused, the port goes, as a client's does.
        let mut ep = made.inspect_err(|_| {
            let _ = self.remove_port(id);
        })?;
        ep.direct = direct;
        Ok(ep)
    }
}

impl Endpoint {
    /// The application's side of endpoint `id`, whose segment `seg` (laid
    /// out as `layout`) the engine behind `link` created. Gives the second
    /// half of the buffers to the engine for reception.
    ///
    /// A `layout` that is not the one its configuration gives, or a
    /// segment shorter than it, is a [`ConfigError::Layout`], and nothing
    /// of the segment is touched.
    pub fn from_parts(
        id: EndpointId,
        seg: Arc<Segment>,
        layout: Layout,
        link: Box<dyn Control>,
    ) -> Result<Endpoint, ConfigError> {
        if Layout::new(layout.config)? != layout {
            return Err(ConfigError::Layout(
                "the offsets are not the ones its configuration gives".into(),
            ));
        }
        if layout.total > seg.len() {
            return Err(ConfigError::Layout(format!(
                "the segment is {} bytes, shorter than the layout's {}",
                seg.len(),
                layout.total
            )));
        }
        let (txq, rxq, freeq) = queues(&seg, &layout)?;
        let bs = u64::from(layout.config.buffer_size);
        let tx_buffers = u64::from(layout.config.buffers.div_ceil(2));
        let tx = Producer::new(txq);
        let free = Producer::new(freeq);
        let region = tx_buffers * bs;
        let mut ep = Endpoint {
            id,
            seg,
            layout,
            rx: Consumer::new(rxq),
            expect: free.pushed(),
            free,
            region,
            alloc_head: 0,
            alloc_tail: 0,
            alloc_pos: 0,
            max_message: (layout.config.max_message() as usize).min(region as usize),
            ends: vec![0; 2 * layout.config.tx_depth as usize].into_boxed_slice(),
            reclaimed: tx.pushed(),
            look_at: REWIND_EVERY.min(region),
            tx,
            bad_rx: 0,
            closed_seen: 0,
            closed: Vec::new(),
            given: [0; GIVE_BACK],
            gathered: 0,
            give_batch: (layout.config.buffers as usize / 2 / 8).clamp(1, GIVE_BACK),
            held: RxDesc::default(),
            fetch_lines: 0,
            link,
            drive: true,
            direct: None,
        };
        for b in tx_buffers..u64::from(layout.config.buffers) {
            ep.give_buffer((b * bs) as u32);
        }
        Ok(ep)
    }

    /// The endpoint's id on its engine: its slot and generation (see
    /// [`crate::frame::EndpointId`]); give it whole to a peer's
    /// [`Endpoint::open_channel`].
    pub fn id(&self) -> EndpointId {
        self.id
    }

    /// The engine it belongs to, if it runs in this process.
    pub fn engine(&self) -> Option<&Engine> {
        self.link.engine()
    }

    /// Its layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The transmit region [`Endpoint::send`] allocates from: bytes
    /// `[0, tx_region())` of the buffer area (the first half of the
    /// buffers; the rest are given to the engine for reception at
    /// creation). Descriptors pushed by hand ([`Endpoint::push_tx`]) name
    /// bytes elsewhere, or here if the application never calls `send`.
    pub fn tx_region(&self) -> u64 {
        self.region
    }

    /// The largest message it sends: 14 buffers, or less if the transmit
    /// region is smaller. (The engine also drops, as `TxStatus::Dropped`, a
    /// message longer than its transport carries.)
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// The engine's counters for this endpoint (all zero if the engine
    /// cannot be reached).
    pub fn counts(&mut self) -> PortCounts {
        self.link.counts(self.id).unwrap_or_default()
    }

    /// Receive descriptors that were not well formed and were skipped.
    pub fn bad_descriptors(&self) -> u64 {
        self.bad_rx
    }

    /// Whether this endpoint's calls drive the engine (the default). Turn
    /// it off when the engine has threads of its own and the application
    /// should not spend its time on engine work.
    pub fn set_drive(&mut self, drive: bool) {
        self.drive = drive;
    }

    /// Opens a channel to endpoint `remote_ep` (its whole id, generation
    /// included) of the engine at `remote`.
    pub fn open_channel(
        &mut self,
        remote: Addr,
        remote_ep: EndpointId,
    ) -> Result<u16, EngineError> {
        self.link
            .open_channel(self.id, remote, remote_ep, ChannelOptions::default())
    }

    /// [`Endpoint::open_channel`] with options (e.g. a UDP checksum).
    pub fn open_channel_with(
        &mut self,
        remote: Addr,
        remote_ep: EndpointId,
        opts: ChannelOptions,
    ) -> Result<u16, EngineError> {
        self.link.open_channel(self.id, remote, remote_ep, opts)
    }

    /// Whether channel `chan` was closed because its peer went away (the
    /// engine of this process, or the daemon, is asked only when its count
    /// of closed channels in the segment has moved).
    #[inline(always)]
    pub fn is_closed(&mut self, chan: u16) -> bool {
        let n = self.seg.closed_channels().load(Ordering::Acquire);
        if n != self.closed_seen {
            self.refresh_closed(n);
        }
        !self.closed.is_empty() && self.closed.contains(&chan)
    }

    /// Asks the engine (or daemon) for the closed channels, once the
    /// segment's count of them has moved to `n`.
    #[cold]
    #[inline(never)]
    fn refresh_closed(&mut self, n: u32) {
        if let Ok(c) = self.link.closed_channels(self.id) {
            self.closed = c;
            self.closed_seen = n;
        }
    }

    /// Installs a filter (pcap syntax) delivering what it matches to `chan`.
    pub fn install_filter(
        &mut self,
        chan: u16,
        filter: &str,
        priority: i32,
    ) -> Result<dpf::FilterId, EngineError> {
        self.link.install_filter(self.id, chan, filter, priority)
    }

    /// Removes a filter installed by [`Endpoint::install_filter`].
    pub fn remove_filter(&mut self, filter: dpf::FilterId) -> Result<(), EngineError> {
        self.link.remove_filter(self.id, filter)
    }

    /// Replaces the endpoint's applet (`None`: standard U-Net).
    pub fn set_applet(&mut self, applet: Option<&[u8]>) -> Result<(), EngineError> {
        self.link.set_applet(self.id, applet)
    }

    /// Frees the transmit region of every descriptor the engine has taken;
    /// returns the count of descriptors taken, in all (wrapping).
    fn reclaim(&mut self) -> Result<u32, SendError> {
        let done = self.tx.consumed().map_err(|_| SendError::Corrupt)?;
        if done != self.reclaimed {
            // The allocation end after the last descriptor taken: every
            // earlier one is taken too.
            let mask = self.ends.len() - 1;
            self.alloc_tail = self.ends[done.wrapping_sub(1) as usize & mask];
            self.reclaimed = done;
        }
        Ok(done)
    }

    /// Allocates `len` bytes of the transmit region: its offset, and the
    /// allocation's end (`alloc_head` once it is pushed; its position in
    /// the region, `alloc_pos` then, is [`Endpoint::pos_after`]'s). The
    /// common case inline: the bytes fit before `look_at` (so before the
    /// region's end) and are free.
    #[inline]
    fn alloc(&mut self, len: usize) -> Result<(u32, u64), SendError> {
        if len > self.max_message {
            return Err(SendError::TooLong {
                len,
                max: self.max_message,
            });
        }
        self.alloc_within(len)
    }

    /// [`Endpoint::alloc`] of a length its caller has compared with
    /// `max_message` already, through the same `&mut self` (nothing
    /// changes the field between): [`Endpoint::send_applet_body`], whose
    /// callers each make that test to choose it. Made a second time, the
    /// test was 3 instructions of every message to an applet's `doTx`,
    /// and LLVM allocated the rest of the body's registers worse around
    /// its error's way: without it, xthr_count `LENT=1` send 636.0 ->
    /// 625.0 a message (40 B, burst 1; every send row -11), `unet-count`
    /// standard-lent-40 -9.0, though the copied `doTx`'s standard-40 +2.0
    /// (its registers). A longer `len` would only be refused further on:
    /// by the region's bounds here and the segment's in the copy, and by
    /// the engine's own `max_message`.
    #[inline]
    fn alloc_within(&mut self, len: usize) -> Result<(u32, u64), SendError> {
        debug_assert!(len <= self.max_message, "alloc_within past max_message");
        let need = alloc_need(len);
        let pos = self.alloc_pos;
        if pos + need <= self.look_at && self.alloc_head + need - self.alloc_tail <= self.region {
            return Ok((pos as u32, self.alloc_head + need));
        }
        self.alloc_slow(need)
    }

    /// The allocation's position in the region after `len` bytes
    /// allocated at `off` by [`Endpoint::alloc`] (`alloc_pos` once they
    /// are pushed): just past them, or the region's start where they end
    /// at its end. Computed where they are pushed, not by `alloc`: a
    /// message `doTx` takes directly is not pushed, and `alloc`'s value,
    /// computed before the copy and the invocation, was 2 instructions of
    /// every one (xthr_count `LENT=1` send, 40 B, burst 1: 658.0 -> 656.0
    /// a message).
    #[inline]
    fn pos_after(&self, off: u32, len: usize) -> u64 {
        let next = u64::from(off) + alloc_need(len);
        if next == self.region { 0 } else { next }
    }

    /// [`Endpoint::alloc`] of `need` bytes past `look_at`, at the region's
    /// end, or when the region looks full.
    ///
    /// Every [`REWIND_EVERY`] bytes (at `look_at`): if the engine has
    /// taken every descriptor pushed, no byte of the region is in use, and
    /// the allocation starts again at the region's beginning (as if the
    /// ring had wrapped there) instead of further on. An application that
    /// waits for each message's answer (a ping-pong, or bursts with an
    /// acknowledgement) then keeps writing the same few cache lines, in
    /// its core's first-level cache and under a few pages' translations,
    /// rather than walking the whole region (1 MiB by default) and writing
    /// a line that has left the cache with each message: with the engine
    /// in this process, that line's store holds up the publication of the
    /// receive descriptor written after it, some 0.05 µs per message on
    /// `loop` between two threads. An endpoint with descriptors in flight
    /// goes on around the ring, and asks again [`REWIND_EVERY`] bytes on.
    ///
    /// Only when every descriptor is taken, not merely every byte freed: a
    /// descriptor pushed with [`Endpoint::push_tx`] frees the region up to
    /// where it stood when pushed, which must not be behind the new
    /// allocation tail when it completes.
    #[cold]
    #[inline(never)]
    fn alloc_slow(&mut self, need: u64) -> Result<(u32, u64), SendError> {
        if self.alloc_pos + need > self.look_at {
            let done = self.reclaim()?;
            if done == self.tx.pushed() && self.alloc_pos != 0 {
                // The region is empty.
                debug_assert_eq!(self.alloc_tail, self.alloc_head);
                self.alloc_head += self.region - self.alloc_pos;
                self.alloc_tail = self.alloc_head;
                self.alloc_pos = 0;
            }
            self.look_at = (self.alloc_pos + REWIND_EVERY).min(self.region);
        }
        for attempt in 0..2 {
            let pos = self.alloc_pos;
            // Past the region's end: start again at its beginning.
            let (start, off) = if pos + need > self.region {
                (self.alloc_head + (self.region - pos), 0)
            } else {
                (self.alloc_head, pos)
            };
            if start + need - self.alloc_tail <= self.region {
                if off == 0 {
                    self.look_at = REWIND_EVERY.min(self.region);
                }
                return Ok((off as u32, start + need));
            }
            if attempt == 0 {
                self.reclaim()?;
            }
        }
        Err(SendError::Full)
    }

    /// Sends `msg` on channel `chan`: copies it into the transmit region
    /// and pushes a descriptor, or, with the engine in this process and
    /// this endpoint driving it, hands it to the engine directly when it
    /// can take it so (see [`Endpoint::tx_pushed`]).
    ///
    /// On an endpoint whose applet's `doTx` takes its messages, a message
    /// handed over directly reaches `doTx` without a descriptor: `Ok(())`
    /// then says it reached `doTx`, as a pushed descriptor's `Ok(())` says
    /// it was queued for it, and what `doTx` made of it (sent, dropped,
    /// trapped) has no status for [`Endpoint::tx_status`] to read; the
    /// drops and traps are counted as ever. An application that reads
    /// each message's status pushes its descriptors itself
    /// ([`Endpoint::push_tx`], or after [`Endpoint::set_drive`]`(false)`).
    /// [`Endpoint::send_with`] hands its messages over in the same way.
    #[inline(always)]
    pub fn send(&mut self, chan: u16, msg: &[u8]) -> Result<(), SendError> {
        // The message handed to the engine directly in the caller's body
        // (the engine's own work too: `Engine::send_direct_locked` is
        // inlined); the length's error and the message through the queue
        // out of line.
        if self.is_closed(chan) {
            return Err(SendError::ChannelClosed { chan });
        }
        if self.drive
            && msg.len() <= self.max_message
            && let Some((engine, port)) = &self.direct
        {
            match engine.send_direct_or_applet(port, chan, msg) {
                Handed::Sent => return Ok(()),
                Handed::ToApplet => return self.send_applet(chan, msg),
                Handed::ToLentApplet => return self.send_applet_lent(chan, msg),
                Handed::Declined => {}
            }
        }
        self.send_slow(chan, msg)
    }

    /// [`Endpoint::send`] for a message the engine did not take directly:
    /// the length's error, and the message through the transmit queue. The
    /// channel was checked; a driving endpoint's message of an allowed
    /// length was offered to the engine directly already, and declined.
    #[inline(never)]
    fn send_slow(&mut self, chan: u16, msg: &[u8]) -> Result<(), SendError> {
        if self.drive && msg.len() > self.max_message {
            return Err(SendError::TooLong {
                len: msg.len(),
                max: self.max_message,
            });
        }
        self.send_queued(
            chan,
            msg.len(),
            |buf| crate::shm::copy_small(buf, msg),
            false,
        )
    }

    /// [`Endpoint::send`] for an endpoint whose applet's `doTx` takes its
    /// messages, with the engine in this process and this endpoint driving
    /// it: the message is copied into the transmit region and handed to
    /// `doTx` there without a descriptor when the engine can take it so
    /// ([`Engine::send_applet_direct`]), else a descriptor naming it is
    /// pushed as before.
    ///
    /// Without a descriptor there is no status to read: `Ok(())` says the
    /// message reached `doTx` (as a pushed descriptor's `Ok(())` says it
    /// was queued for it), whether `doTx` sent it (`TxStatus::Sent`),
    /// dropped it or trapped (`TxStatus::Dropped`, counted on
    /// `applet_drops` or `applet_traps` as before). Every outcome known
    /// before `doTx` runs (a channel not open or closed, a bad length)
    /// still goes through the queue with its status. An application that
    /// reads each message's status pushes descriptors itself
    /// ([`Endpoint::push_tx`], or after [`Endpoint::set_drive`]`(false)`).
    ///
    /// `msg` is at most `max_message` bytes: each caller tests that to
    /// come here ([`Endpoint::alloc_within`]).
    #[inline(never)]
    fn send_applet(&mut self, chan: u16, msg: &[u8]) -> Result<(), SendError> {
        self.send_applet_body(chan, msg.len(), |buf| crate::shm::copy_small(buf, msg))
    }

    /// [`Endpoint::send_applet`] for an applet whose `doTx` is lent: the
    /// message is lent to it where the caller has it, without the copy into
    /// the transmit region ([`Engine::send_applet_bytes`]: 43 instructions
    /// fewer a 40-byte message, 160 a 1 KiB one, 447 a 4 KiB one,
    /// `xthr_count` `LENT=1` send, bursts of 1); where the engine declines
    /// that (the bytes in this endpoint's own segment, the applet changed,
    /// or as [`Endpoint::send_applet`] declines), through the transmit
    /// region as before. Its own function, chosen by the engine's answer
    /// ([`Handed::ToLentApplet`]), so that a copied `doTx`'s messages make
    /// no test for it (they pay the flag's load and the third answer's
    /// test: 4 to 7 instructions a message, `unet-count` standard-40 and
    /// `xthr_count` send).
    #[inline(never)]
    fn send_applet_lent(&mut self, chan: u16, msg: &[u8]) -> Result<(), SendError> {
        if let Some((engine, port)) = &self.direct
            && engine.send_applet_bytes(port, chan, msg).is_some()
        {
            return Ok(());
        }
        self.send_applet(chan, msg)
    }

    /// [`Endpoint::send_applet`] of a short message that
    /// [`Endpoint::send_with`]'s `fill` writes in the transmit region
    /// itself, where `doTx` reads it: no private buffer zeroed, filled and
    /// copied. One copy for each caller's `fill`, compiled with the
    /// caller. `len` is at most `max_message`, as for `send_applet`.
    #[inline(never)]
    fn send_applet_with(
        &mut self,
        chan: u16,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), SendError> {
        self.send_applet_body(chan, len, fill)
    }

    /// The body of [`Endpoint::send_applet`] and
    /// [`Endpoint::send_applet_with`]: the `len`-byte message written by
    /// `fill` in the transmit region, then handed to `doTx` directly if
    /// the engine takes it so, else its descriptor pushed. Inlined into
    /// both, so that `send`'s copy stays compiled in this crate, with the
    /// engine's functions at hand (`send_applet_with`, generic, is
    /// compiled in the caller's).
    #[inline(always)]
    fn send_applet_body(
        &mut self,
        chan: u16,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), SendError> {
        // Each caller has tested `len <= max_message` to come here.
        let (off, end) = self.alloc_within(len)?;
        self.seg
            .with_bytes_mut(self.layout.area + off as usize, len, fill);
        if let Some((engine, port)) = &self.direct
            && engine
                .send_applet_direct(port, chan, off, len as u32)
                .is_some()
        {
            // Not pushed, so the allocation is not kept: `doTx` and the
            // delivery of its frames are done with the bytes.
            return Ok(());
        }
        self.tx_room()?;
        // The channel was checked by `send`.
        self.push_region(chan, off, len, end)
    }

    /// Sends a `len`-byte message that `fill` writes: in place in the
    /// buffer area (zero copy), or for a message of at most 64 bytes
    /// (which the engine copies into the receive descriptor) into a
    /// private buffer when the message can go to the engine directly (as
    /// with [`Endpoint::send`]).
    ///
    /// On an endpoint whose applet's `doTx` takes its messages, the message
    /// reaches `doTx` without a descriptor where the engine can take it so,
    /// as with [`Endpoint::send`] (and `Ok(())` means what it means there):
    /// `fill` writes it in the transmit region, where `doTx` reads it, a
    /// short message too. Until 2026-12-01 a descriptor was pushed and
    /// taken back by the engine's pass over the queue, some 190
    /// instructions a 40-byte message more (`examples/xthr_count`,
    /// `WITH=1`); and, later that day, a short message went through the
    /// private buffer (zeroed, filled, copied into the region), 25 more.
    /// The test of the applet's flag that chooses costs the message
    /// without an applet 4 instructions (`loop_rtt`'s U-Net column).
    ///
    /// The bytes `fill` is given are unspecified: zeros, or what earlier
    /// messages of this endpoint left in its transmit region (a message
    /// written in place, or a short one to an applet). `fill` must write
    /// all `len` of them; the message is what it leaves there.
    pub fn send_with(
        &mut self,
        chan: u16,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), SendError> {
        if self.drive && len <= SMALL_DIRECT.min(self.max_message) {
            if self.is_closed(chan) {
                return Err(SendError::ChannelClosed { chan });
            }
            let Some((engine, port)) = &self.direct else {
                return self.send_queued(chan, len, fill, false);
            };
            // An endpoint whose applet's `doTx` takes its messages: written
            // where `doTx` reads them. (Should the applet go meanwhile, the
            // engine declines and the descriptor goes, as in `send`.)
            if port.applet_installed() {
                return self.send_applet_with(chan, len, fill);
            }
            let mut b = [0u8; SMALL_DIRECT];
            let msg = &mut b[..len];
            fill(msg);
            // As `send` hands a message over: directly, or to the applet's
            // `doTx` through the transmit region (one installed since).
            match engine.send_direct_or_applet(port, chan, msg) {
                Handed::Sent => return Ok(()),
                Handed::ToApplet => return self.send_applet(chan, msg),
                Handed::ToLentApplet => return self.send_applet_lent(chan, msg),
                Handed::Declined => {}
            }
            return self.send_queued(chan, len, |buf| crate::shm::copy_small(buf, msg), false);
        }
        if self.is_closed(chan) {
            return Err(SendError::ChannelClosed { chan });
        }
        self.send_queued(chan, len, fill, self.drive)
    }

    /// Room in the transmit queue for one descriptor, after a kick of the
    /// engine if it is full: [`SendError::Full`] if there is still none.
    #[inline(always)]
    fn tx_room(&mut self) -> Result<(), SendError> {
        if !self.tx.has_space().map_err(|_| SendError::Corrupt)? {
            self.kick();
            if !self.tx.has_space().map_err(|_| SendError::Corrupt)? {
                return Err(SendError::Full);
            }
        }
        Ok(())
    }

    /// Pushes the descriptor of the `len` bytes at `off` of the transmit
    /// region, on `chan` (checked by the caller), which keeps the region
    /// allocated up to `end` (at `pos`) until its completion.
    #[inline(always)]
    fn push_region(&mut self, chan: u16, off: u32, len: usize, end: u64) -> Result<(), SendError> {
        let pos = self.pos_after(off, len);
        self.push_tx_unchecked(
            TxDesc {
                len: len as u32,
                offset: off,
                chan,
                ..TxDesc::default()
            },
            end,
            pos,
        )
    }

    /// [`Endpoint::send_with`] through the transmit region: the message is
    /// written there, then, if `direct`, handed to the engine directly if
    /// it can take it so (the region's bytes are then not kept: the engine
    /// has copied them when it returns), else a descriptor naming them is
    /// pushed. The caller has checked that the channel is not known to be
    /// closed.
    #[inline]
    fn send_queued(
        &mut self,
        chan: u16,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
        direct: bool,
    ) -> Result<(), SendError> {
        let (off, end) = self.alloc(len)?;
        self.tx_room()?;
        self.seg
            .with_bytes_mut(self.layout.area + off as usize, len, fill);
        if direct && self.send_area_direct(chan, off, len as u32) {
            // Not pushed, so the allocation is not kept: the engine has
            // copied the bytes, or `doTx` and the delivery of its frames
            // are done with them.
            return Ok(());
        }
        // The channel was checked above.
        self.push_region(chan, off, len, end)
    }

    /// Hands the `len` bytes at `off` of the transmit region, on `chan`,
    /// to the engine in this process without a descriptor, if it takes
    /// them so now (`Engine::send_area_direct`: delivered directly, or to
    /// the applet's `doTx`): whether it did. If not, nothing was sent or
    /// counted.
    #[inline(always)]
    fn send_area_direct(&self, chan: u16, off: u32, len: u32) -> bool {
        match &self.direct {
            Some((engine, port)) => engine.send_area_direct(port, chan, off, len),
            None => false,
        }
    }

    /// Pushes a transmit descriptor naming bytes the application placed in
    /// the buffer area itself (outside the transmit region this type
    /// manages, or after [`Endpoint::set_drive`]`(false)` for batching).
    ///
    /// A descriptor on a channel known to be closed is refused
    /// ([`SendError::ChannelClosed`]); one pushed before the closing is
    /// known completes as [`TxStatus::Closed`].
    pub fn push_tx(&mut self, desc: TxDesc) -> Result<(), SendError> {
        if self.is_closed(desc.chan) {
            return Err(SendError::ChannelClosed { chan: desc.chan });
        }
        self.push_tx_unchecked(desc, self.alloc_head, self.alloc_pos)
    }

    /// [`Endpoint::push_tx`] for a channel its caller has just checked:
    /// the transmit region is allocated up to `end` (at `pos` in the
    /// region) once it is pushed (its completion frees the region up to
    /// there).
    #[inline]
    fn push_tx_unchecked(&mut self, desc: TxDesc, end: u64, pos: u64) -> Result<(), SendError> {
        let n = self.tx.pushed();
        match self.tx.push(desc) {
            Ok(true) => {}
            Ok(false) => return Err(SendError::Full),
            Err(_) => return Err(SendError::Corrupt),
        }
        let mask = self.ends.len() - 1;
        self.ends[n as usize & mask] = end;
        self.alloc_head = end;
        self.alloc_pos = pos;
        self.kick();
        Ok(())
    }

    /// The status the engine wrote for the `n`-th descriptor pushed
    /// (counting from 0, wrapping), while its slot has not been reused.
    pub fn tx_status(&self, n: u32) -> TxStatus {
        TxStatus::from_u16(self.tx.slot_of(n).status)
    }

    /// How many descriptors were pushed, in all (wrapping).
    pub fn tx_pushed(&self) -> u32 {
        self.tx.pushed()
    }

    fn kick(&mut self) {
        if self.drive {
            self.link.drive_tx();
        }
    }

    /// Drives the engine until every pushed descriptor has been taken (or
    /// `spins` rounds pass); whether all were.
    pub fn flush(&mut self, spins: usize) -> bool {
        for _ in 0..spins {
            if self.tx.consumed().is_ok_and(|c| c == self.tx.pushed()) {
                return true;
            }
            if self.drive {
                self.link.drive_tx();
            } else {
                std::hint::spin_loop();
            }
        }
        false
    }

    /// Gives a buffer to the engine for reception, now (after any gathered
    /// from received messages). Returns false if the free queue is full
    /// (the buffer is then lost to reception until given again).
    pub fn give_buffer(&mut self, off: u32) -> bool {
        self.give_gathered();
        matches!(self.free.push(off), Ok(true))
    }

    /// Gives a buffer of a received message back: gathered, and given with
    /// the others once [`GIVE_BACK`] of them are (see there).
    #[inline]
    fn give_back(&mut self, off: u32) {
        // `gathered < give_batch <= GIVE_BACK` between calls: the mask
        // changes nothing, and spares the index's bounds check.
        self.given[self.gathered & (GIVE_BACK - 1)] = off;
        self.gathered += 1;
        if self.gathered >= self.give_batch {
            self.give_batch();
        }
    }

    /// [`Endpoint::give_back`] of each buffer of the message in buffers
    /// that a [`MessageRef`] held (`held`; out of line: the inline
    /// message's drop stays small).
    #[inline(never)]
    fn give_back_held(&mut self) {
        for i in 0..usize::from(self.held.nbufs) {
            self.give_back(self.held.offset(i));
        }
    }

    /// Gives every gathered buffer to the engine, with one publication. A
    /// buffer that finds the free queue full (only an application that
    /// gives buffers it does not own can fill it) is lost to reception, as
    /// with [`Endpoint::give_buffer`].
    #[inline]
    fn give_gathered(&mut self) {
        if self.gathered > 0 {
            self.give_all_gathered();
        }
    }

    /// [`Endpoint::give_gathered`] once there are some. One buffer alone
    /// is a ping-pong's (a message in one buffer goes back at the
    /// receiver's next empty poll, before the next message came): one
    /// push, where the batch's copy ([`Endpoint::give_batch`]: its run
    /// split at the queue's end, its unrolled loop) was 70 instructions
    /// for it (`xthr_count` recv, lent, 4096 B, bursts of 1: 1221.5 to
    /// 1169.5 instructions a message). A full queue loses the buffer as
    /// the batch's does. Apart from `give_batch`, so that a full batch
    /// (`give_back`'s) makes no test for it.
    #[inline(never)]
    fn give_all_gathered(&mut self) {
        if self.gathered == 1 {
            let _ = self.free.push_unpublished(self.given[0]);
            self.free.publish();
            self.gathered = 0;
        } else {
            self.give_batch();
        }
    }

    /// Gives the gathered buffers to the engine with one test of the free
    /// queue's room for them all ([`Producer::push_slice_unpublished`]),
    /// not one per buffer (`unet-count` path-57, 15.6 instructions a
    /// message before), and one publication.
    #[inline(never)]
    fn give_batch(&mut self) {
        self.free
            .push_slice_unpublished(&self.given[..self.gathered]);
        self.free.publish();
        self.gathered = 0;
    }

    /// Whether a receive descriptor is well formed for this layout.
    #[inline(never)]
    fn well_formed(&self, d: &RxDesc) -> bool {
        let bs = u64::from(self.layout.config.buffer_size);
        match usize::from(d.nbufs) {
            0 => d.len as usize <= INLINE_MAX,
            n if n <= RX_BUFFERS_MAX => {
                let len = u64::from(d.len);
                len <= n as u64 * bs
                    && len > (n as u64 - 1) * bs
                    && (0..n).all(|i| self.layout.is_buffer(d.offset(i)))
            }
            _ => false,
        }
    }

    /// The next received message, if any (polling the transport first when
    /// the queue is empty and this endpoint drives the engine).
    pub fn recv(&mut self) -> Option<Message<'_>> {
        for round in 0..2 {
            while let Some(i) = self.rx.take_sealed() {
                // The whole descriptor, copied once (after its seal; its
                // fixed part is not read apart, as `rx_front` reads it).
                let d: RxDesc = self.rx.mem().read(i);
                self.rx.advance();
                if self.well_formed(&d) {
                    if d.nbufs != 0 {
                        self.took_buffers(&d);
                    }
                    return Some(Message { ep: self, desc: d });
                }
                self.bad_rx += 1;
            }
            // Nothing to read: the engine gets the gathered buffers before
            // this receiver waits. Then run the frames waiting for this
            // endpoint's applet and poll the transport (each a flag check
            // when there is nothing: see `Transport::readiness`).
            self.give_gathered();
            if round == 1 || !self.drive || !self.drive_rx() {
                break;
            }
        }
        None
    }

    /// The next received message, if any, read in place rather than
    /// copied out ([`MessageRef`]); otherwise as [`Endpoint::recv`], which
    /// copies each 64-byte receive descriptor into the [`Message`] it
    /// returns. While the message is held, its receive queue slot stays the
    /// application's: the engine delivers into the other slots, and once
    /// they are full counts what it cannot deliver as a full receive queue,
    /// so hold a message briefly.
    ///
    /// ```
    /// use unet::{Config, Engine};
    /// let net = unet::transport::LoopNet::new();
    /// let engine = Engine::new(Box::new(net.attach("10.0.0.1:7000".parse()?)?));
    /// let mut a = engine.create_endpoint(Config::default(), None)?;
    /// let mut b = engine.create_endpoint(Config::default(), None)?;
    /// let ab = a.open_channel(engine.local(), b.id())?;
    /// b.open_channel(engine.local(), a.id())?;
    /// a.send(ab, b"in place")?;
    /// let msg = b.recv_ref().expect("delivered");
    /// assert!(msg.is_inline());
    /// let mut got = Vec::new();
    /// msg.read(|p| got.extend_from_slice(p));
    /// assert_eq!(got, b"in place");
    /// drop(msg); // the slot is the engine's again
    /// assert!(b.recv_ref().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// The message borrows the endpoint, so it cannot outlive it, nor be
    /// held across another call on it:
    ///
    /// ```compile_fail
    /// use unet::{Config, Engine};
    /// let net = unet::transport::LoopNet::new();
    /// let engine = Engine::new(Box::new(net.attach("10.0.0.1:7000".parse()?)?));
    /// let mut b = engine.create_endpoint(Config::default(), None)?;
    /// let msg = b.recv_ref().expect("delivered");
    /// drop(b);
    /// msg.read(|_| {});
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn recv_ref(&mut self) -> Option<MessageRef<'_>> {
        // The short path in the caller: an inline message or one in one
        // buffer at the front (its fixed part read once and checked, as
        // below). Everything else, from the start, out of line.
        if let Some((i, len, chan, nbufs)) = self.rx_front() {
            // The expected buffer's offset, read once: for the prefetch and
            // for the take's comparison (nothing writes the free queue in
            // between: this endpoint is its only producer).
            let mut guess = None;
            if self.fetch_lines != 0 {
                // The buffer the descriptor probably names, asked for
                // before its offset is read and checked.
                guess = Some(self.prefetch_expected());
            }
            if nbufs == 0 && len as usize <= INLINE_MAX {
                return Some(MessageRef {
                    ep: self,
                    len,
                    chan,
                    body: Body::Inline(i),
                });
            }
            if nbufs == 1
                && let Some(off) = self.take_one_buffer(i, len, guess)
            {
                return Some(MessageRef {
                    ep: self,
                    len,
                    chan,
                    body: Body::Buffers(off),
                });
            }
        } else {
            // Nothing sealed: driven at once, without the second look at
            // the queue that `recv_ref_slow` makes first, or if there is
            // nothing else to do, what `recv_ref_slow` would find, without
            // its call (a waiting receiver's empty poll).
            let t = match self.empty_poll() {
                EmptyPoll::Idle => {
                    self.poll_expected();
                    return None;
                }
                EmptyPoll::Inbox(engine, port, me) => {
                    if !Self::recv_ref_inbox(engine, port, me) {
                        self.poll_expected();
                        return None;
                    }
                    // The look again after the drain, here: an inline
                    // message at the front, built into the `MessageRef`
                    // in registers. Everything else (nothing sealed, a
                    // descriptor of buffers or not well formed), its front
                    // taken here and given again, in `recv_ref_worked`
                    // (a message in one buffer taken here too, by a copy
                    // of `take_one_buffer` that the application's crate
                    // reaches, grew this inline code: one spill more in
                    // `unet-count` path-57/1000/4096's loop, 1.1
                    // instructions a message).
                    if let Some((i, len, chan, nbufs)) = self.rx_front()
                        && nbufs == 0
                        && len as usize <= INLINE_MAX
                    {
                        return Some(MessageRef {
                            ep: self,
                            len,
                            chan,
                            body: Body::Inline(i),
                        });
                    }
                    self.recv_ref_worked()?
                }
                EmptyPoll::Other => self.recv_ref_drive()?,
            };
            return Some(MessageRef {
                ep: self,
                len: t.len,
                chan: t.chan,
                body: t.body,
            });
        }
        let t = self.recv_ref_slow()?;
        Some(MessageRef {
            ep: self,
            len: t.len,
            chan: t.chan,
            body: t.body,
        })
    }

    /// The front message's number (wrapping; every use masks it to its
    /// slot) and its descriptor's fixed part (length, channel, number of
    /// buffers), read once into private memory for the caller to check,
    /// if the engine has delivered it: the ring's seal protocol
    /// ([`crate::ring::Consumer::take_sealed`]) finds the slot at the
    /// consumer index sealed ([`crate::shm::RX_SEALED`]) and takes its
    /// seal, so that the slot reads as empty until the engine seals its
    /// next message. The producer index, on a line of its own, is not
    /// read: a waiting receiver polls the one slot line the engine writes
    /// for the message, so that line alone crosses cores. A front already
    /// taken and not yet freed (read again after `recv_ref`'s short path
    /// passed it on) is given again.
    #[inline(always)]
    fn rx_front(&mut self) -> Option<(u32, u32, u16, u8)> {
        let (i, (len, chan, nbufs)) = self.rx.take_sealed_with(|q, i| q.rx_fixed(i))?;
        Some((i, len, chan, nbufs))
    }

    /// [`Endpoint::rx_front`] that also reads the descriptor's first
    /// buffer offset (for a descriptor of one buffer, all it holds past
    /// its fixed part; for any other, bytes that go unused), in the same
    /// look at the slot: for `take_front`, the out-of-line receive calls'
    /// look, where reading it apart ([`Endpoint::take_one_buffer`]) worked
    /// the slot's address out again after the seal's load (`xthr_count`
    /// recv, lent, 4096 B, bursts of 1: 1134.5 to 1127.5 instructions a
    /// message; read only for a count of one, 1130.5). Not for
    /// `recv_ref`'s short path, where the load is one more for an inline
    /// message.
    #[inline(always)]
    fn rx_front_first(&mut self) -> Option<(u32, u32, u16, u8, u32)> {
        let (i, (len, chan, nbufs, first)) = self.rx.take_sealed_with(|q, s| {
            let (len, chan, nbufs) = q.rx_fixed(s);
            (len, chan, nbufs, q.rx_first_offset(s))
        })?;
        Some((i, len, chan, nbufs, first))
    }

    /// [`Endpoint::recv_ref`] but for its short path: messages in buffers,
    /// descriptors that are not well formed, an empty queue.
    #[inline(never)]
    fn recv_ref_slow(&mut self) -> Option<Taken> {
        if let Some(t) = self.take_front() {
            return Some(t);
        }
        self.recv_ref_driven()
    }

    /// [`Endpoint::recv_ref`] once it found nothing sealed and something
    /// for the engine to do other than frames in the applet's inbox
    /// ([`Endpoint::empty_poll`]'s [`EmptyPoll::Other`]):
    /// [`Endpoint::recv_ref_slow`] without its first look at the queue,
    /// which the caller has just made. A message sealed in between is
    /// seen by the look after the engine's work where that work ran
    /// (`drive_rx` returned work done), and otherwise by the next call, as
    /// one sealed just after any look is: a turn later, nothing lost
    /// (`None` makes no caller sleep).
    #[inline(never)]
    fn recv_ref_drive(&mut self) -> Option<Taken> {
        self.recv_ref_driven()
    }

    /// [`Endpoint::recv_ref`] once it found nothing sealed and frames in
    /// the applet's inbox ([`EmptyPoll::Inbox`]; in a ping-pong between
    /// two threads, every message): [`Endpoint::recv_ref_drive`] without
    /// the tests the caller has just made (no gathered buffers, a driving
    /// endpoint, the claim by this thread `me`, the inbox's two loads) or
    /// the thread's token read again ([`Engine::drive_rx_inbox`]), and
    /// without its look again: whether the engine's work ran, for the
    /// caller to look ([`Endpoint::look_again`] once it did, inline in
    /// `recv_ref`, the rest in [`Endpoint::recv_ref_worked`]) or call
    /// [`Endpoint::poll_expected`] if it did not. Its answer a `bool` in a
    /// register: an `Option<Taken>` came back through memory (its four
    /// fields stored here and loaded by the caller, with the tests of its
    /// tag on both sides). The engine and the port are the caller's, found
    /// by its `empty_poll` (not looked for in `direct` again: its test and
    /// loads here, 2 instructions a message, `xthr_count` recv, lent,
    /// 40 B, bursts of 1 and 25), and no `self`: with `poll_expected` here
    /// the endpoint's address was kept on the stack across the drain for
    /// it (6 instructions a message there, 40 B, bursts of 1).
    #[inline(never)]
    fn recv_ref_inbox(engine: &Engine, port: &Port, me: Me) -> bool {
        engine.drive_rx_inbox(port, me) != 0
    }

    /// [`Endpoint::look_again`] once the engine's work ran, for
    /// [`Endpoint::recv_ref`] after [`Endpoint::recv_ref_inbox`] where
    /// its inline look found no inline message at the front: nothing
    /// sealed, or a descriptor of buffers or not well formed, whose front
    /// `take_front` is given again and takes or counts as
    /// `recv_ref_slow` does.
    #[inline(never)]
    fn recv_ref_worked(&mut self) -> Option<Taken> {
        self.look_again(true)
    }

    /// The end of [`Endpoint::recv_ref_slow`] and
    /// [`Endpoint::recv_ref_drive`], with the queue found empty: the
    /// gathered buffers given back, the engine's receive work driven, and
    /// if it may have delivered something, one more look.
    #[inline(always)]
    fn recv_ref_driven(&mut self) -> Option<Taken> {
        self.give_gathered();
        let worked = self.drive && self.drive_rx();
        self.look_again(worked)
    }

    /// The end of [`Endpoint::recv_ref_driven`] and
    /// [`Endpoint::recv_ref_worked`] once the engine's receive work ran:
    /// one more look at the queue if it `worked` (the gathered buffers
    /// given back if that finds nothing), and [`Endpoint::poll_expected`]
    /// when nothing is returned.
    #[inline(always)]
    fn look_again(&mut self, worked: bool) -> Option<Taken> {
        if worked {
            if let Some(t) = self.take_front() {
                return Some(t);
            }
            self.give_gathered();
        }
        self.poll_expected();
        None
    }

    /// The front message of the queue, its descriptor's fixed part copied
    /// once and checked here; descriptors that are not well formed are
    /// counted and passed; `None` once nothing is sealed. A descriptor of
    /// one buffer has its offset read with the fixed part, from the slot
    /// the seal's test found ([`Endpoint::rx_front_first`]).
    #[inline(always)]
    fn take_front(&mut self) -> Option<Taken> {
        while let Some((i, len, chan, nbufs, first)) = self.rx_front_first() {
            if nbufs == 0 {
                if len as usize <= INLINE_MAX {
                    return Some(Taken {
                        len,
                        chan,
                        body: Body::Inline(i),
                    });
                }
                self.rx.advance();
                self.bad_rx += 1;
                continue;
            }
            if nbufs == 1 {
                if let Some(off) = self.take_buffer_at(len, first, None) {
                    return Some(Taken {
                        len,
                        chan,
                        body: Body::Buffers(off),
                    });
                }
                continue;
            }
            if self.hold_front(i) {
                let (len, chan) = (self.held.len, self.held.chan);
                return Some(Taken {
                    len,
                    chan,
                    body: Body::Buffers(HELD),
                });
            }
        }
        None
    }

    /// Takes the descriptor of one buffer for a `len`-byte message in
    /// front slot `i` (its fixed part read by the caller): the buffer's
    /// offset if the descriptor is well formed, else `None` with it
    /// counted. One buffer, the common case above `INLINE_MAX`: of the
    /// descriptor only its offset is copied, and it is checked as
    /// `well_formed` checks one buffer. The slot is freed either way.
    /// `guess`: the expected free-queue entry ([`Endpoint::took_buffer`])
    /// if the caller read it.
    ///
    /// Inlined into `recv_ref`'s short path, with the fixed part it read
    /// (not read again): as a call there, its frame (three saved
    /// registers), the call and the answer's return were some 10
    /// instructions of the 57-byte message's path (`unet-count` path-57).
    /// `take_front` (the out-of-line receive calls' look) reads the offset
    /// with the fixed part and goes to [`Endpoint::take_buffer_at`]
    /// directly; as a call there this was 16 instructions a message where
    /// a receiver's empty poll drives the engine and finds its message in
    /// a buffer (`xthr_count` recv, lent, 4096 B, bursts of 1: 1150.5 to
    /// 1134.5).
    #[inline(always)]
    fn take_one_buffer(&mut self, i: u32, len: u32, guess: Option<u32>) -> Option<u32> {
        let off = self.rx.mem().read_rx_first_offset(i);
        self.take_buffer_at(len, off, guess)
    }

    /// [`Endpoint::take_one_buffer`] with the descriptor's offset `off`
    /// read already ([`Endpoint::rx_front_first`]): the front slot freed,
    /// `off` checked and taken or the descriptor counted.
    #[inline(always)]
    fn take_buffer_at(&mut self, len: u32, off: u32, guess: Option<u32>) -> Option<u32> {
        self.rx.advance();
        if len != 0 && len <= self.layout.config.buffer_size && self.layout.is_buffer(off) {
            self.took_buffer(len, off, guess);
            return Some(off);
        }
        self.bad_rx += 1;
        None
    }

    /// [`Endpoint::recv_ref_slow`] of a descriptor of more than one buffer
    /// in front slot `i`: a private copy of the whole descriptor, checked
    /// as `recv` checks it, kept in [`Endpoint::held`] if well formed
    /// (whether it was; else counted). The slot is freed either way. Out
    /// of line, with the copy's 64-byte aligned place on its stack: the
    /// one-buffer path beside it then has a frame without it.
    #[inline(never)]
    fn hold_front(&mut self, i: u32) -> bool {
        let d: RxDesc = self.rx.mem().read(i);
        self.rx.advance();
        if self.well_formed(&d) {
            self.took_buffers(&d);
            self.held = d;
            return true;
        }
        self.bad_rx += 1;
        false
    }

    /// Asks the CPU for the lines of the buffer the engine is expected to
    /// have taken for the message just published ([`Endpoint::expect`]),
    /// as many as the last message's length fills in its first buffer, at
    /// most [`PREFETCH_MAX`] bytes ([`Endpoint::fetch_lines`]).
    /// Once per message: [`Endpoint::fetch_lines`] is set again only when
    /// the message turns out to be in buffers too, so that a run of inline
    /// messages pays nothing but the test of it. Inlined: as a call
    /// (`recv_ref` inlined into its caller either way) the 1 KiB round trip
    /// kept none of its gain (`loop_rtt`, six runs each: 0.313-0.334 µs
    /// against 0.265-0.280, `main` 0.321-0.350). Returns the expected
    /// entry it read (for [`Endpoint::took_buffer`]).
    ///
    /// Asked for even when the last message filled one line (57 to 64
    /// bytes), although the reader loads that line a few instructions
    /// later and a waiting receiver's empty polls asked for it already
    /// ([`Endpoint::poll_expected`]): a scratch build that asked for
    /// nothing then (13 instructions a message fewer, `unet-count`
    /// path-57) took the 57-byte `loop` round trip from 0.209 to 0.237 µs
    /// in the middle regime and from 0.60 to 0.69 in the slow one
    /// (`loop_rtt`, alternated runs, 2026-12-02).
    #[inline(always)]
    fn prefetch_expected(&mut self) -> u32 {
        // No test that the entry was given or holds a buffer: whatever
        // the slot holds (an old entry, an offset the engine will skip),
        // the lines asked for are inside the segment
        // (`prefetch_line_count` asks for none otherwise) and only a
        // hint; the tests cost more than the rare wrong guess they would
        // spare (`unet-count` path-1000, 12 instructions).
        let lines = std::mem::take(&mut self.fetch_lines);
        let guess = self.free.slot_of(self.expect);
        #[cfg(test)]
        tests::RECV_FETCHED.with(|f| f.set(Some((self.layout.area + guess as usize, lines))));
        self.seg
            .prefetch_line_count(self.layout.area + guess as usize, lines as usize);
        guess
    }

    /// The lines an empty poll asks the CPU for ([`Endpoint::poll_expected`]):
    /// the offset in the segment of the buffer the next message is
    /// expected in ([`Endpoint::expect`]) and the lines the last message
    /// filled in its first buffer, if it came in buffers and filled at
    /// most [`POLL_FETCH_LINES`].
    #[inline(always)]
    fn poll_fetch(&self) -> Option<(usize, usize)> {
        let lines = self.fetch_lines;
        if !poll_asks(lines) {
            return None;
        }
        let guess = self.free.slot_of(self.expect);
        Some((self.layout.area + guess as usize, lines as usize))
    }

    /// At each empty poll, while the receiver waits for a message that
    /// probably comes in the buffer it expects (the last one came in
    /// buffers and was short: [`Endpoint::poll_fetch`]), asks the CPU for
    /// that buffer's first lines. Until the engine writes them the
    /// request finds this core's own copy; once it has, the next poll's
    /// request fetches them from the writer's core at the same time as
    /// the poll's load of the receive slot finds the slot's seal, so that
    /// the message's two lines cross together rather than one after the
    /// other (`loop_rtt` at 57 B: 0.57-0.62 µs without, 0.45-0.49 with).
    /// Only a hint, as [`Endpoint::prefetch_expected`]'s: whatever the
    /// free-queue entry holds, the lines asked for are inside the segment
    /// (`prefetch_line_count` asks for none otherwise), and nothing is
    /// read. Out of the short path: only a poll of `recv_ref` that found
    /// nothing comes here (the copying `recv`, the burst's receiver, which
    /// may never read the bytes, asks for nothing early).
    #[inline]
    fn poll_expected(&self) {
        if let Some((at, lines)) = self.poll_fetch() {
            #[cfg(test)]
            tests::FETCHED.with(|f| f.set(Some((at, lines))));
            self.seg.prefetch_line_count(at, lines);
        }
    }

    /// The lines of a buffer that a `len`-byte message fills, at most
    /// [`PREFETCH_MAX`] bytes' ([`Endpoint::fetch_lines`]).
    #[inline(always)]
    fn lines_to_fetch(&self, len: u32) -> u32 {
        lines_ahead(len.min(self.layout.config.buffer_size))
    }

    /// Counts the buffers of a well-formed received message `d` in
    /// buffers (not inline: its data are bytes, not offsets) as taken
    /// from the free queue ([`Endpoint::expect`]), finding its first
    /// buffer among the entries near the expected one when it was not
    /// that one.
    #[inline]
    fn took_buffers(&mut self, d: &RxDesc) {
        self.fetch_lines = self.lines_to_fetch(d.len);
        let first = d.offset(0);
        if self.free.slot_of(self.expect) != first {
            self.find_expected(first);
        }
        self.expect = self.expect.wrapping_add(u32::from(d.nbufs));
    }

    /// [`Endpoint::took_buffers`] for a `len`-byte message in the one
    /// buffer `off` (`len` at most a buffer's size: the caller's check);
    /// `guess` the expected entry if the caller read it already
    /// (`recv_ref`'s prefetch: not read twice, some 7 instructions).
    #[inline(always)]
    fn took_buffer(&mut self, len: u32, off: u32, guess: Option<u32>) {
        debug_assert!(len <= self.layout.config.buffer_size);
        // [`Endpoint::lines_to_fetch`] without its bound by the buffer's
        // size, which `len` is within (2 instructions a message).
        self.fetch_lines = lines_ahead(len);
        let expected = match guess {
            Some(g) => g,
            None => self.free.slot_of(self.expect),
        };
        if expected != off {
            self.find_expected(off);
        }
        self.expect = self.expect.wrapping_add(1);
    }

    /// Sets [`Endpoint::expect`] to the free-queue entry near it that
    /// holds `first`, if one does (16 on either side); else leaves it.
    #[cold]
    #[inline(never)]
    fn find_expected(&mut self, first: u32) {
        let given =
            |n: u32| self.free.pushed().wrapping_sub(n).wrapping_sub(1) < self.layout.free.depth;
        for k in 1..=16u32 {
            for n in [self.expect.wrapping_add(k), self.expect.wrapping_sub(k)] {
                if given(n) && self.free.slot_of(n) == first {
                    self.expect = n;
                    return;
                }
            }
        }
    }

    /// Calls `f` on each buffer's share of the message of a well-formed
    /// descriptor `d` in buffers, in place.
    #[inline]
    fn read_buffers(&self, d: &RxDesc, mut f: impl FnMut(&[u8])) {
        let bs = self.layout.config.buffer_size as usize;
        let mut left = d.len as usize;
        for i in 0..usize::from(d.nbufs) {
            let n = left.min(bs);
            self.seg
                .with_bytes(self.layout.area + d.offset(i) as usize, n, &mut f);
            left -= n;
        }
    }

    /// The engine's receive work for this endpoint, driven by a receive
    /// call that found its queue empty: the frames waiting for its applet
    /// and the transport (`Control::drive_rx`). Whether it may have
    /// delivered something, so that the queue is worth a second look: with
    /// the engine in this process, only if it ran or received a frame
    /// ([`Engine::drive_rx`], called directly rather than through the
    /// `Control` object: a waiting receiver's empty poll, whose length is
    /// how late it sees a message that lands just after a look, was two
    /// indirect calls and two looks at the queue longer).
    #[inline(always)]
    fn drive_rx(&mut self) -> bool {
        match &self.direct {
            Some((engine, port)) => engine.drive_rx(port) != 0,
            None => {
                self.link.drive_rx();
                true
            }
        }
    }

    /// What a receive call that found its queue empty has to do now:
    /// nothing ([`EmptyPoll::Idle`]: no gathered buffers to give back,
    /// and if it drives the engine, nothing for the engine to do for it,
    /// [`Engine::rx_poll`]: the tests [`Endpoint::drive_rx`] would make
    /// first, with the endpoint claimed as it claims it), run the frames
    /// waiting in its applet's inbox ([`EmptyPoll::Inbox`]), or the rest
    /// ([`EmptyPoll::Other`]). [`Endpoint::recv_ref`] returns at once on
    /// `Idle`, in its caller's body: a waiting receiver's empty poll is
    /// how late it sees a message that lands just after a look, and
    /// `recv_ref_slow`'s call, frame and second look were most of it. A
    /// daemon's client that drives is never idle here (its
    /// `Control::drive_rx` is asked, as before).
    #[inline(always)]
    fn empty_poll(&self) -> EmptyPoll<'_> {
        if self.gathered != 0 {
            return EmptyPoll::Other;
        }
        if !self.drive {
            return EmptyPoll::Idle;
        }
        let Some((engine, port)) = &self.direct else {
            return EmptyPoll::Other;
        };
        let me = Me::current();
        match engine.rx_poll(port, me) {
            RxPoll::Inbox => EmptyPoll::Inbox(engine, port, me),
            RxPoll::Idle => EmptyPoll::Idle,
            RxPoll::Transport => EmptyPoll::Other,
        }
    }

    /// Does the engine work this endpoint's calls drive, without sending or
    /// receiving: its transmit queue, the frames waiting for its applet, the
    /// transport. For an application whose applet works on its own (e.g.
    /// token flow control whose acknowledgements never reach the
    /// application) while the application waits.
    pub fn poll_engine(&mut self) {
        self.give_gathered();
        self.link.drive_tx();
        self.link.drive_rx();
    }

    /// How many messages are waiting in the receive queue.
    pub fn pending(&mut self) -> usize {
        // Counted by the seals from the front, as `recv` finds messages:
        // the engine publishes the producer index after them (at the end
        // of a batch), so this receiver may have taken messages the index
        // does not count yet, and the index alone would read as 0 (or,
        // behind the consumer index, as corrupt).
        self.rx.sealed_count() as usize
    }

    /// Copies `data` into the buffer area at `off` (for [`Endpoint::push_tx`]).
    pub fn write_area(&mut self, off: u32, data: &[u8]) -> Result<(), SendError> {
        if !self.layout.in_area(off, data.len() as u32) || data.len() > u32::MAX as usize {
            return Err(SendError::TooLong {
                len: data.len(),
                max: self.layout.area_len.saturating_sub(off as usize),
            });
        }
        self.seg.write_bytes(self.layout.area + off as usize, data);
        Ok(())
    }

    /// The endpoint's segment (e.g. to hand its `memfd` to another process).
    pub fn segment(&self) -> &Arc<Segment> {
        &self.seg
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.link.close(self.id);
    }
}

#[cfg(test)]
mod tests {
    use crate::transport::LoopNet;
    use crate::{Config, Endpoint, Engine};

    /// An engine on a `loop` network of its own, and a configuration of
    /// 32 buffers of 256 bytes for its endpoints.
    fn small_endpoints() -> (Engine, Config) {
        let net = LoopNet::new();
        let e = Engine::new(Box::new(
            net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
        ));
        let cfg = Config {
            buffers: 32,
            buffer_size: 256,
            ..Config::default()
        };
        (e, cfg)
    }

    /// Two endpoints of [`small_endpoints`]' engine with buffers of 4 KiB
    /// (so that a few hundred bytes fill lines of one buffer), and channels
    /// both ways: `a`'s to `b` returned.
    fn pair_of_4k_buffers() -> (Engine, Endpoint, Endpoint, u16) {
        let (e, cfg) = small_endpoints();
        let cfg = Config {
            buffer_size: 4096,
            ..cfg
        };
        let mut a = e.create_endpoint(cfg, None).unwrap();
        let mut b = e.create_endpoint(cfg, None).unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        b.open_channel(e.local(), a.id()).unwrap();
        (e, a, b, ab)
    }

    /// `recv_ref`'s path for a message in one buffer reads only the
    /// descriptor's first offset, but checks it as `well_formed` does: a
    /// length of 0 or past the buffer, an offset that is not a buffer's
    /// start or lies past the area, each skipped and counted, and the
    /// well-formed one after them read from its buffer.
    #[test]
    fn a_one_buffer_descriptor_is_checked_as_any_other() {
        use crate::layout::RxDesc;
        use crate::ring::Producer;
        let (e, cfg) = small_endpoints();
        let mut b = e.create_endpoint(cfg, None).unwrap();
        let (area, area_len) = (b.layout.area, b.layout.area_len as u32);
        // This test plays the engine: nothing else writes b's queue.
        let (_, rxq, _) = crate::shm::queues(&b.seg, &b.layout).unwrap();
        let mut rx: Producer<RxDesc, _> = Producer::new(rxq);
        b.seg.write_bytes(area + 512, &[9u8; 100]);
        for (len, off) in [
            (0, 512),
            (257, 512),
            (100, 513),
            (100, area_len),
            (100, !255),
            (100, 512),
        ] {
            assert_eq!(rx.push(RxDesc::buffers(3, len, &[off])), Ok(true));
        }
        let m = b.recv_ref().expect("the well-formed one");
        assert_eq!((m.len(), m.chan(), m.is_inline()), (100, 3, false));
        assert_eq!(m.to_vec(), [9u8; 100]);
        drop(m);
        assert_eq!(b.bad_descriptors(), 5);
        assert!(b.recv_ref().is_none());
    }

    /// The receiver's guess of the buffer the next message arrives in
    /// (`Endpoint::expect`, what `recv_ref` prefetches) is the buffer the
    /// engine takes, message after message, and is found again after the
    /// engine skipped free-queue entries this side did not see taken (here
    /// entries that are not buffers, which the engine counts and skips).
    #[test]
    fn the_expected_receive_buffer_is_the_one_the_engine_takes() {
        let (e, cfg) = small_endpoints();
        let mut a = e.create_endpoint(cfg, None).unwrap();
        let mut b = e.create_endpoint(cfg, None).unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        b.open_channel(e.local(), a.id()).unwrap();
        let (mut hits, mut misses) = (0, 0);
        for round in 0..200u32 {
            if round % 50 == 25 {
                // Two entries the engine skips: the guess is two behind.
                assert!(b.give_buffer(3));
                assert!(b.give_buffer(u32::MAX));
            }
            let guess = b.free.slot_of(b.expect);
            let len = 57 + (round as usize % 200);
            a.send(ab, &vec![round as u8; len]).unwrap();
            let m = b.recv_ref().expect("delivered");
            assert_eq!(m.len(), len);
            assert!(m.to_vec().iter().all(|&x| x == round as u8));
            let took = m.first_buffer();
            drop(m);
            if Some(guess) == took {
                hits += 1;
            } else {
                misses += 1;
            }
            // An inline message between, received by the copying `recv`:
            // it takes no buffer, so the guess stays, and it is not taken
            // for a message in buffers (nothing fetched for the next).
            let (expect, last) = (b.expect, b.fetch_lines);
            a.send(ab, &[0u8; 40]).unwrap();
            assert_eq!(b.recv().expect("delivered").len(), 40);
            assert_eq!((b.expect, b.fetch_lines), (expect, last), "inline");
        }
        // One miss after each pair of skipped entries, then found again.
        assert_eq!((hits, misses), (196, 4));
    }

    thread_local! {
        /// The lines [`Endpoint::poll_expected`] last asked for on this
        /// thread.
        pub(super) static FETCHED: std::cell::Cell<Option<(usize, usize)>> =
            const { std::cell::Cell::new(None) };
        /// The lines [`Endpoint::prefetch_expected`] (a `recv_ref` that
        /// found a message) last asked for on this thread.
        pub(super) static RECV_FETCHED: std::cell::Cell<Option<(usize, u32)>> =
            const { std::cell::Cell::new(None) };
    }

    /// A receive that finds a message asks for the expected buffer's lines
    /// if the last message came in buffers (one line after 57 to 64
    /// bytes, which the 57-byte round trip needs). The engine asks for the
    /// line of the free-queue entry after those it took, for writing, only
    /// after a message in several buffers: after one in one buffer that
    /// request and the receiver's for reading took the line from each
    /// other (`Io::take_buffer_now`).
    #[test]
    fn a_found_message_asks_for_its_buffers_lines_and_the_engine_for_the_next_buffer_after_several()
    {
        use crate::engine::NEXT_FREE_FETCHED;
        let (_engine, mut a, mut b, ab) = pair_of_4k_buffers();
        // The last message's length, this one's, and the lines asked for
        // at its receive (those the last one filled, if it came in buffers).
        for (last, len, asked) in [
            (0, 57, None),
            (57, 57, Some(1)),
            (57, 130, Some(1)),
            (130, 130, Some(3)),
            (130, 64, Some(3)),
            (64, 1000, Some(1)),
            (1000, 40, Some(16)),
            (40, 57, None),
            (57, 5000, Some(1)),
            (5000, 57, Some(32)),
        ] {
            // The buffer the engine takes for this message (the first
            // one), and the one after those it takes.
            let bufs = (len as u32).div_ceil(4096);
            let (this, next) = (
                b.free.slot_of(b.expect),
                b.free.slot_of(b.expect.wrapping_add(bufs)),
            );
            NEXT_FREE_FETCHED.with(|f| f.set(None));
            a.send(ab, &vec![9u8; len]).unwrap();
            let in_buffer = len > crate::layout::INLINE_MAX;
            assert_eq!(
                NEXT_FREE_FETCHED.with(|f| f.get()),
                (bufs > 1).then_some(next),
                "the engine, {len} bytes"
            );
            RECV_FETCHED.with(|f| f.set(None));
            let want = asked.map(|l| (b.layout.area + this as usize, l));
            let m = b.recv_ref().expect("delivered");
            assert_eq!(m.len(), len);
            assert_eq!(m.first_buffer(), in_buffer.then_some(this), "{len} bytes");
            assert_eq!(
                RECV_FETCHED.with(|f| f.get()),
                want,
                "after {last}, {len} bytes"
            );
            drop(m);
        }
    }

    /// A receiver that finds its queue empty asks for the first lines of
    /// the buffer the engine will take next, as many as the last message
    /// filled, when that message came in buffers and filled at most
    /// `POLL_FETCH_LINES`: nothing after an inline message or a long one.
    #[test]
    fn an_empty_poll_asks_for_the_next_short_messages_buffer() {
        // Buffers of 4 KiB, so that 257 bytes fill five lines of one.
        let (_engine, mut a, mut b, ab) = pair_of_4k_buffers();
        assert_eq!(b.poll_fetch(), None, "nothing received yet");
        for (len, lines) in [
            (57, Some(1)),
            (40, None),
            (130, Some(3)),
            (256, Some(4)),
            (257, None),
        ] {
            a.send(ab, &vec![7u8; len]).unwrap();
            let m = b.recv_ref().expect("delivered");
            assert_eq!(m.len(), len);
            drop(m);
            FETCHED.with(|f| f.set(None));
            assert!(b.recv_ref().is_none());
            // The buffer the engine takes for the next message.
            let next = b.free.slot_of(b.expect);
            let want = lines.map(|l| (b.layout.area + next as usize, l));
            assert_eq!(b.poll_fetch(), want, "after {len} bytes");
            // ... asked for by the empty `recv_ref` itself, and not by the
            // copying `recv`, which reads a message whole when it comes.
            assert_eq!(FETCHED.with(|f| f.get()), want, "after {len} bytes");
            FETCHED.with(|f| f.set(None));
            assert!(b.recv().is_none());
            assert_eq!(FETCHED.with(|f| f.get()), None, "recv, after {len} bytes");
            if lines.is_some() {
                a.send(ab, &vec![8u8; len]).unwrap();
                let m = b.recv_ref().expect("delivered");
                assert_eq!(m.first_buffer(), Some(next), "the expected buffer");
                drop(m);
            }
        }
    }

    /// A receiver learns of a message from its slot's seal, not from the
    /// producer index: a descriptor the engine has written but not
    /// published is received (by `recv_ref` and by `recv`), in order, over
    /// several laps of the queue; a slot that holds the last lap's item
    /// (taken, so unsealed), or one whose bytes are written and whose
    /// sealed header word is not yet (as the JIT's inline push is between
    /// its copy and its last store), is not read until it is sealed.
    #[test]
    fn a_message_is_found_by_its_slot_seal_and_only_then() {
        use crate::layout::RxDesc;
        use crate::ring::{Producer, QueueMem};
        use std::sync::atomic::Ordering;
        let (e, cfg) = small_endpoints();
        let mut b = e.create_endpoint(cfg, None).unwrap();
        let depth = b.layout.rx.depth;
        // This test plays the engine: nothing else writes b's queue.
        let (_, rxq, _) = crate::shm::queues(&b.seg, &b.layout).unwrap();
        let mut rx: Producer<RxDesc, _> = Producer::new(rxq);
        for k in 0..3 * depth + 5 {
            let byte = k as u8;
            // Written, never published: the index stays at 0.
            let n = rx.next_slot().unwrap().expect("room");
            rx.mem()
                .write_rx_inline(n, 7, 3, |d| d.copy_from_slice(&[byte; 3]));
            rx.filled();
            assert_eq!(b.pending(), 1, "counted by its seal, the index at 0");
            if k % 2 == 0 {
                let m = b.recv_ref().expect("found by its seal");
                assert_eq!((m.chan(), m.to_vec()), (7, vec![byte; 3]));
            } else {
                let m = b.recv().expect("found by its seal");
                assert_eq!((m.chan(), m.to_vec()), (7, vec![byte; 3]));
            }
            assert!(b.recv_ref().is_none(), "the next slot holds the last lap's");
        }
        let index = QueueMem::<RxDesc>::head(rx.mem()).load(Ordering::Relaxed);
        assert_eq!(index, 0, "never published");
        // The next slot written as the JIT's inline push writes it: the
        // bytes, then the header word `len | chan << 32 | 1 << 56` (no
        // buffers, sealed) last. Until that word is stored the slot is
        // not read, whatever else it holds (here a header with the seal
        // 0).
        let n = rx.next_slot().unwrap().expect("room");
        let mut raw = [0u8; 64];
        raw[..8].copy_from_slice(&(3u64 | 7 << 32).to_le_bytes());
        raw[8..11].copy_from_slice(b"jit");
        let i = n & (depth - 1);
        let at = b.layout.rx.slots() + i as usize * size_of::<RxDesc>();
        b.seg.write_bytes(at, &raw);
        assert!(b.recv_ref().is_none(), "not sealed yet");
        let head = 3u64 | 7 << 32 | u64::from(crate::shm::RX_SEALED) << 56;
        b.seg.write_bytes(at, &head.to_le_bytes());
        assert_eq!(b.recv_ref().expect("sealed").to_vec(), b"jit");
        rx.filled();
        assert_eq!(b.bad_descriptors(), 0);
    }

    /// The `loop` ping-pong without applet between two threads, each
    /// sending with its own thread driving the engine (`send_with`, the
    /// direct path): each of the four side locks the path takes (each
    /// endpoint's transmit side, taken by its sender; each receive side,
    /// taken by the other endpoint's sender) is biased to the one thread
    /// that takes it, so that a message's send executes no locked
    /// instruction once the bias is granted. The receiver's `recv_ref`
    /// takes no lock. A lock that a second thread took would lose its bias
    /// (a revocation) and, after a few, stay unbiased: a compare-and-swap
    /// on every send.
    #[test]
    fn the_loop_round_trip_keeps_the_send_paths_locks_biased() {
        let (e, cfg) = small_endpoints();
        let mut a = e.create_endpoint(cfg, None).unwrap();
        let mut b = e.create_endpoint(cfg, None).unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        let ba = b.open_channel(e.local(), a.id()).unwrap();
        let locks = |x: &super::Endpoint| {
            let (_, port) = x.direct.as_ref().expect("drive mode: the engine is here");
            crate::Engine::side_locks(port).map(|l| (l.is_biased(), l.revocations()))
        };
        const ROUNDS: usize = 300;
        let echo = std::thread::spawn(move || {
            for _ in 0..ROUNDS {
                let m = loop {
                    if let Some(m) = b.recv_ref() {
                        break m.to_vec();
                    }
                    std::hint::spin_loop();
                };
                b.send_with(ba, m.len(), |buf| buf.copy_from_slice(&m))
                    .unwrap();
            }
            b
        });
        for i in 0..ROUNDS {
            let msg = [i as u8; 57];
            let len = if i % 2 == 0 { 57 } else { 40 };
            a.send_with(ab, len, |buf| buf.copy_from_slice(&msg[..len]))
                .unwrap();
            let m = loop {
                if let Some(m) = a.recv_ref() {
                    break m.to_vec();
                }
                std::hint::spin_loop();
            };
            assert_eq!(m, &msg[..len]);
        }
        let b = echo.join().unwrap();
        // [transmit, receive] of each: biased, never revoked.
        assert_eq!(locks(&a), [(true, 0), (true, 0)], "a's locks");
        assert_eq!(locks(&b), [(true, 0), (true, 0)], "b's locks");
    }
}
