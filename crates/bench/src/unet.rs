//! Benchmark workloads of `unet`: the U-Net/SLE
//! paper's §5 measurements of endpoints and applets (Figure 5's round
//! trips, Figure 7's breakdown), on the in-process `loop` transport.
//!
//! - [`pair`] and [`one_way`]: two endpoints of one engine and one message
//!   from the first to the second in the calling thread (the engine's CPU
//!   cost per message: the engine runs inside `send`, see
//!   [`unet::endpoint`]).
//! - [`LoopEcho`] and [`RingEcho`]: round trips between two threads,
//!   through endpoints and through the bare shared-memory SPSC ring that
//!   is the floor of this design (the same peers as `fastpath demo`).
//! - [`CASES`], [`run_case`], [`callgrind`] and [`report`]: Figure 7's
//!   breakdown as exact instruction counts, each operation isolated as the
//!   difference of two runs that differ in that operation alone (see
//!   [`CASES`] and `src/bin/unet-count.rs`).
//!
//! `benches/unet.rs` is the criterion bench; `unet-count` the callgrind
//! harness.

use std::hint::black_box;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use unet::peer::{Placement, RingEnd};
use unet::transport::LoopNet;
use unet::wait::Backoff;
use unet::{Config, Endpoint, Engine, SendError};

use crate::callgrind::{Skip, parse_total};

/// Errors of the set-up (endpoints, applets, transports).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Two endpoints of one engine on the `loop` transport, with a channel
/// each way.
pub struct Pair {
    /// The sending endpoint.
    pub a: Endpoint,
    /// The receiving endpoint.
    pub b: Endpoint,
    /// `a`'s channel to `b`.
    pub ab: u16,
    /// `b`'s channel to `a`.
    pub ba: u16,
}

/// Two endpoints with default configurations on one `loop` engine, `a`
/// with `applet_a` and `b` with `applet_b` (class files, e.g.
/// [`unet::applets::STANDARD`]).
pub fn pair(applet_a: Option<&[u8]>, applet_b: Option<&[u8]>) -> Result<Pair, BoxError> {
    let net = LoopNet::new();
    let engine = Engine::new(Box::new(net.attach("10.0.0.1:7000".parse()?)?));
    let mut a = engine.create_endpoint(Config::default(), applet_a)?;
    let mut b = engine.create_endpoint(Config::default(), applet_b)?;
    let ab = a.open_channel(engine.local(), b.id())?;
    let ba = b.open_channel(engine.local(), a.id())?;
    Ok(Pair { a, b, ab, ba })
}

/// Sends `msg` from `a` on `chan`, then receives it at `b` in place
/// ([`Endpoint::recv_ref`], as a client that wants the short path does) and
/// copies it out into `buf`, all in this thread; the length received, or
/// `None` if the send failed or nothing arrived. The engine's work (take
/// the descriptor, make the frame, classify it with dpf, run the applets,
/// deliver) happens inside the send.
#[inline]
pub fn one_way(
    a: &mut Endpoint,
    chan: u16,
    b: &mut Endpoint,
    msg: &[u8],
    buf: &mut Vec<u8>,
) -> Option<usize> {
    a.send(chan, msg).ok()?;
    let m = b.recv_ref()?;
    buf.clear();
    m.read(|p| buf.extend_from_slice(p));
    Some(buf.len())
}

/// [`one_way`] with the copying receive ([`Endpoint::recv`], which copies
/// the receive descriptor out before the message is read).
#[inline]
pub fn one_way_copying(
    a: &mut Endpoint,
    chan: u16,
    b: &mut Endpoint,
    msg: &[u8],
    buf: &mut Vec<u8>,
) -> Option<usize> {
    a.send(chan, msg).ok()?;
    let m = b.recv()?;
    buf.clear();
    m.read(|p| buf.extend_from_slice(p));
    Some(buf.len())
}

/// How long a round trip may take before the benchmark gives up (the echo
/// thread died, or a message was lost).
const STUCK: Duration = Duration::from_secs(10);

/// Receives the next message into `buf`, spinning, then yielding; `None`
/// once `stop` is set or after [`STUCK`].
fn recv_into(ep: &mut Endpoint, buf: &mut Vec<u8>, stop: &AtomicBool) -> Option<u16> {
    let mut wait = Backoff::default();
    let mut since: Option<Instant> = None;
    loop {
        if let Some(m) = ep.recv_ref() {
            buf.clear();
            m.read(|p| buf.extend_from_slice(p));
            return Some(m.chan());
        }
        if wait.polls() % 1024 == 1023 {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            if since.get_or_insert_with(Instant::now).elapsed() > STUCK {
                return None;
            }
        }
        wait.snooze();
    }
}

/// Sends, retrying while the transmit queue is full.
fn send_all(ep: &mut Endpoint, chan: u16, msg: &[u8]) -> Result<(), SendError> {
    let mut wait = Backoff::default();
    loop {
        match ep.send(chan, msg) {
            Err(SendError::Full) => {
                ep.flush(1);
                wait.snooze();
            }
            r => return r,
        }
    }
}

/// Round trips between two application threads through two endpoints of
/// one `loop` engine (Figure 5's set-up, as `fastpath demo` runs it): this
/// thread sends on `a` and waits for the echo; a second thread echoes
/// every message `b` receives.
pub struct LoopEcho {
    a: Endpoint,
    ab: u16,
    msg: Vec<u8>,
    buf: Vec<u8>,
    stop: Arc<AtomicBool>,
    echo: Option<JoinHandle<()>>,
}

impl LoopEcho {
    /// Starts the echo thread, both endpoints with `applet` (or none), for
    /// messages of `size` bytes.
    pub fn new(size: usize, applet: Option<&[u8]>) -> Result<LoopEcho, BoxError> {
        let Pair {
            a, mut b, ab, ba, ..
        } = pair(applet, applet)?;
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let echo = std::thread::Builder::new()
            .name("unet-echo".into())
            .spawn(move || {
                let mut buf = Vec::with_capacity(1 << 16);
                while recv_into(&mut b, &mut buf, &st).is_some() {
                    if send_all(&mut b, ba, &buf).is_err() {
                        break;
                    }
                }
            })?;
        Ok(LoopEcho {
            a,
            ab,
            msg: vec![0x5a; size],
            buf: Vec::with_capacity(1 << 16),
            stop,
            echo: Some(echo),
        })
    }

    /// Runs `n` round trips; the time they took.
    ///
    /// # Panics
    ///
    /// If an echo does not come back within 10 s or with another length
    /// (a lost message: the benchmark cannot go on).
    pub fn round_trips(&mut self, n: u64) -> Duration {
        let never = AtomicBool::new(false);
        let start = Instant::now();
        for _ in 0..n {
            send_all(&mut self.a, self.ab, &self.msg).expect("sending on the loop engine");
            recv_into(&mut self.a, &mut self.buf, &never).expect("the echo came back");
            assert_eq!(self.buf.len(), self.msg.len(), "the echo's length");
        }
        start.elapsed()
    }
}

impl Drop for LoopEcho {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.echo.take() {
            let _ = h.join();
        }
    }
}

/// The floor of the endpoint design (the same peer as `fastpath demo`'s
/// "SPSC ring"): [`unet::peer`]'s two ends between two threads, the same
/// queue code as the endpoints', a message of up to 56 bytes in its slot
/// and a longer one in the area, learned of by the slot's seal as an
/// endpoint's receiver does (the producer index is never read); no engine,
/// no frame, no classification.
pub struct RingEcho {
    end: RingEnd,
    msg: Vec<u8>,
    buf: Vec<u8>,
    stop: Arc<AtomicBool>,
    echo: Option<JoinHandle<()>>,
}

impl RingEcho {
    /// Starts the echo thread for messages of `size` bytes (at most 64
    /// KiB, the echo's buffer), a longer message at one place in each
    /// ring's area.
    pub fn new(size: usize) -> Result<RingEcho, BoxError> {
        RingEcho::placed(size, Placement::OnePlace)
    }

    /// [`RingEcho::new`] with the longer messages placed by `placement`
    /// (`unet::peer`: neither placement is the faster at every size).
    pub fn placed(size: usize, placement: Placement) -> Result<RingEcho, BoxError> {
        let (end, mut far) = unet::peer::ring_pair_placed("unet-bench-ring", placement)?;
        if size > end.max_len().min(1 << 16) {
            return Err(format!("{size} bytes exceed the ring echo's 64 KiB").into());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let echo = std::thread::Builder::new()
            .name("ring-echo".into())
            .spawn(move || {
                // 64 KiB from the heap, as the sender's buffer; one of the area's
                // 2 MiB would be mapped page-aligned like the area, its copies
                // then aliasing the area's at 4 KiB.
                let mut buf = vec![0u8; 1 << 16];
                let mut wait = Backoff::default();
                loop {
                    match far.try_recv(&mut buf) {
                        Some(n) => {
                            wait = Backoff::default();
                            far.send(&buf[..n]);
                        }
                        None => {
                            if st.load(Ordering::Relaxed) {
                                return;
                            }
                            wait.snooze();
                        }
                    }
                }
            })?;
        Ok(RingEcho {
            end,
            msg: vec![0x5a; size],
            buf: vec![0u8; 1 << 16],
            stop,
            echo: Some(echo),
        })
    }

    /// Runs `n` round trips; the time they took.
    ///
    /// # Panics
    ///
    /// If an echo does not come back within 10 s.
    pub fn round_trips(&mut self, n: u64) -> Duration {
        let start = Instant::now();
        for _ in 0..n {
            self.end.send(&self.msg);
            let mut wait = Backoff::default();
            while self.end.try_recv(&mut self.buf).is_none() {
                assert!(
                    wait.polls() % (1 << 16) != (1 << 16) - 1 || start.elapsed() < STUCK,
                    "the ring echo did not come back"
                );
                wait.snooze();
            }
        }
        black_box(&self.buf);
        start.elapsed()
    }
}

impl Drop for RingEcho {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.echo.take() {
            let _ = h.join();
        }
    }
}

// ---------------------------------------------------------------------------
// Figure 7: the breakdown in instructions (callgrind)
// ---------------------------------------------------------------------------

/// The callgrind toggle of the whole path: one message sent, received and
/// copied out ([`one_way`]).
pub const TOGGLE_PATH: &str = "unet_count_path";
/// The callgrind toggle of the engine's work for one message: `a.send`,
/// which runs the transmit side and delivers the frame (the standard
/// delivery, or into the receiving endpoint's inbox), then the receiving
/// endpoint's `poll_engine`, which runs its `doRx` on the inbox's frame; not
/// the receiving application's `recv`.
pub const TOGGLE_SEND: &str = "unet_count_send";

/// The whole path of one message; the toggle point [`TOGGLE_PATH`].
#[unsafe(no_mangle)]
#[inline(never)]
pub fn unet_count_path(p: &mut Pair, msg: &[u8], buf: &mut Vec<u8>) -> Option<usize> {
    one_way(&mut p.a, p.ab, &mut p.b, msg, buf)
}

/// The callgrind toggle of the whole path with the copying receive
/// ([`one_way_copying`]).
pub const TOGGLE_PATH_COPYING: &str = "unet_count_path_copying";

/// The whole path of one message with the copying receive; the toggle
/// point [`TOGGLE_PATH_COPYING`].
#[unsafe(no_mangle)]
#[inline(never)]
pub fn unet_count_path_copying(p: &mut Pair, msg: &[u8], buf: &mut Vec<u8>) -> Option<usize> {
    one_way_copying(&mut p.a, p.ab, &mut p.b, msg, buf)
}

/// The callgrind toggle of the bare ring's path ([`unet_count_ring`]).
pub const TOGGLE_RING: &str = "unet_count_ring";

/// One message through the bare SPSC ring (the demo's floor, `unet::peer`:
/// the endpoints' queue code, no engine) on one thread: `a` sends it, `b`
/// copies it out into `buf`; the toggle point [`TOGGLE_RING`]. What the
/// path without applet does beyond this is the engine's (the channel's
/// checks and its kept verdict's, the locks, the counts) and its copy out
/// into a `Vec` ([`one_way`]).
#[unsafe(no_mangle)]
#[inline(never)]
pub fn unet_count_ring(
    a: &mut RingEnd,
    b: &mut RingEnd,
    msg: &[u8],
    buf: &mut [u8],
) -> Option<usize> {
    a.send(msg);
    b.try_recv(buf)
}

/// One send and the receiving endpoint's engine work (its applet runs on
/// its own side, when it polls); the toggle point [`TOGGLE_SEND`].
#[unsafe(no_mangle)]
#[inline(never)]
pub fn unet_count_send(
    a: &mut Endpoint,
    chan: u16,
    msg: &[u8],
    b: &mut Endpoint,
) -> Result<(), SendError> {
    let r = a.send(chan, msg);
    b.poll_engine();
    r
}

/// What the receiving endpoint runs in a breakdown case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiver {
    /// No applet: standard U-Net delivery by the engine.
    Standard,
    /// The standard U-Net applet (`StandardUnet`) on both endpoints.
    StandardApplet,
    /// The `Breakdown` applet in this mode (0: doRx returns at once; 1:
    /// 8 `getFreeBufferLength`; 2: 8 `getFreeBuffer`; 3: 8
    /// `dmaRxdPayload` of 0 bytes), the sender without an applet.
    Breakdown(i32),
    /// The standard applet written against the lent `doRx` and `doTx`
    /// (`StandardLent`) on both endpoints.
    StandardLent,
    /// `BreakdownLent` (`Breakdown` with the lent `doRx`) in this mode,
    /// the sender without an applet.
    BreakdownLent(i32),
    /// `NullRx`: `doRx(int, int)` returns at once (no `switch`), the
    /// sender without an applet.
    NullRx,
    /// `NullRxLent`: the lent `doRx` returns at once, the sender without
    /// an applet.
    NullRxLent,
    /// No endpoint: the bare SPSC ring's two ends ([`unet_count_ring`]),
    /// Figure 7's peer.
    Ring,
}

impl Receiver {
    /// Whether an applet runs in this case (on either endpoint), so that
    /// its count depends on the engine that runs applets.
    pub fn runs_applet(self) -> bool {
        !matches!(self, Receiver::Standard | Receiver::Ring)
    }
}

impl std::fmt::Display for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Receiver::Standard => f.write_str("no applet"),
            Receiver::StandardApplet => f.write_str("the standard applet on both endpoints"),
            Receiver::Breakdown(mode) => write!(f, "Breakdown mode {mode}"),
            Receiver::StandardLent => {
                f.write_str("the standard applet with the lent doRx and doTx on both endpoints")
            }
            Receiver::BreakdownLent(mode) => write!(f, "BreakdownLent mode {mode}"),
            Receiver::NullRx => f.write_str("NullRx"),
            Receiver::NullRxLent => f.write_str("NullRxLent"),
            Receiver::Ring => f.write_str("the bare SPSC ring, no endpoint"),
        }
    }
}

/// One counted run: a set-up, a message size and a toggle point.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Its name on `unet-count`'s command line.
    pub name: &'static str,
    /// The function whose instructions callgrind counts.
    pub toggle: &'static str,
    /// The message size in bytes.
    pub size: usize,
    /// What the receiving endpoint runs.
    pub receiver: Receiver,
    /// Receive descriptors the receiving endpoint gets per message.
    pub delivered: u64,
    /// Whether every message goes through a frame ([`FRAMING_FILTER`]
    /// installed): a message to an endpoint of the same engine, with an
    /// applet or without, is otherwise delivered without one (and an
    /// applet's `txPush` to one is delivered without being classified).
    /// The `*-framed` cases measure the path as it was before, and the
    /// breakdown of an applet invocation is framed throughout, so that its
    /// cases differ only in the receiver.
    pub framed: bool,
}

/// A filter that never matches the benchmark's frames and reads the IPv4
/// total length, a byte that differs between messages of one channel: while
/// it is installed the engine keeps no per-channel verdict, so every
/// message is framed and classified as before the frameless delivery. It
/// reads only header bytes, so frames carry no more bytes than without it;
/// it is installed on the sending endpoint, which receives nothing.
pub const FRAMING_FILTER: &str = "ip[2:2] = 1";

/// Calls of the measured native per `doRx` in the `Breakdown` applet's
/// modes 1 to 3 (written out, not looped).
pub const CALLS_PER_RX: u64 = 8;

/// The message size of the breakdown (the paper's Figure 7 has a 40-byte
/// and a 1000-byte column).
pub const SMALL: usize = 40;
/// The large message of the breakdown's path rows.
pub const LARGE: usize = 1000;

/// The message size of the burst-25 bandwidth cell of `fastpath bench
/// unet` (4 KiB), counted in one thread: what each copy and each native of
/// the standard applet costs beside plain U-Net's one copy.
pub const BURST: usize = 4096;

/// Every counted run. The `path*` and `standard*` cases count the whole
/// path ([`TOGGLE_PATH`]); the others count the send alone
/// ([`TOGGLE_SEND`]), the receiving application draining its receive
/// queue and giving buffers back outside the count, so that they differ
/// only in what the receiving endpoint does with the frame:
///
/// | case | the receiving endpoint | delivers |
/// |---|---|---|
/// | `deliver` | no applet: the engine's standard inline delivery | 1 |
/// | `dorx` | `Breakdown` mode 0: `doRx` returns at once | 0 |
/// | `null` | mode 1: `doRx` calls `getFreeBufferLength` 8 times | 0 |
/// | `getbuf` | mode 2: `doRx` calls `getFreeBuffer` 8 times | 0 |
/// | `push` | mode 3: `doRx` calls `dmaRxdPayload(RxBuf, chan, 0)` 8 times | 8 |
/// | `dorx-lent` | `BreakdownLent` mode 0: the lent `doRx` returns at once | 0 |
/// | `dorx-null` | `NullRx`: `doRx` returns at once, no `switch (mode)` | 0 |
/// | `dorx-lent-null` | `NullRxLent`: the lent `doRx` returns at once, no `switch` | 0 |
pub const CASES: &[Case] = &[
    Case {
        name: "path-40",
        toggle: TOGGLE_PATH,
        size: SMALL,
        receiver: Receiver::Standard,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "path-1000",
        toggle: TOGGLE_PATH,
        size: LARGE,
        receiver: Receiver::Standard,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "path-57",
        toggle: TOGGLE_PATH,
        size: unet::layout::INLINE_MAX + 1,
        receiver: Receiver::Standard,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "path-40-framed",
        toggle: TOGGLE_PATH,
        size: SMALL,
        receiver: Receiver::Standard,
        delivered: 1,
        framed: true,
    },
    Case {
        name: "path-1000-framed",
        toggle: TOGGLE_PATH,
        size: LARGE,
        receiver: Receiver::Standard,
        delivered: 1,
        framed: true,
    },
    Case {
        name: "standard-40",
        toggle: TOGGLE_PATH,
        size: SMALL,
        receiver: Receiver::StandardApplet,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "standard-1000",
        toggle: TOGGLE_PATH,
        size: LARGE,
        receiver: Receiver::StandardApplet,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "standard-40-framed",
        toggle: TOGGLE_PATH,
        size: SMALL,
        receiver: Receiver::StandardApplet,
        delivered: 1,
        framed: true,
    },
    Case {
        name: "standard-1000-framed",
        toggle: TOGGLE_PATH,
        size: LARGE,
        receiver: Receiver::StandardApplet,
        delivered: 1,
        framed: true,
    },
    Case {
        name: "deliver",
        toggle: TOGGLE_SEND,
        size: SMALL,
        receiver: Receiver::Standard,
        delivered: 1,
        framed: true,
    },
    Case {
        name: "dorx",
        toggle: TOGGLE_SEND,
        size: SMALL,
        receiver: Receiver::Breakdown(0),
        delivered: 0,
        framed: true,
    },
    Case {
        name: "null",
        toggle: TOGGLE_SEND,
        size: SMALL,
        receiver: Receiver::Breakdown(1),
        delivered: 0,
        framed: true,
    },
    Case {
        name: "getbuf",
        toggle: TOGGLE_SEND,
        size: SMALL,
        receiver: Receiver::Breakdown(2),
        delivered: 0,
        framed: true,
    },
    Case {
        name: "push",
        toggle: TOGGLE_SEND,
        size: SMALL,
        receiver: Receiver::Breakdown(3),
        delivered: CALLS_PER_RX,
        framed: true,
    },
    Case {
        name: "path-4096",
        toggle: TOGGLE_PATH,
        size: BURST,
        receiver: Receiver::Standard,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "standard-4096",
        toggle: TOGGLE_PATH,
        size: BURST,
        receiver: Receiver::StandardApplet,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "standard-lent-40",
        toggle: TOGGLE_PATH,
        size: SMALL,
        receiver: Receiver::StandardLent,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "standard-lent-1000",
        toggle: TOGGLE_PATH,
        size: LARGE,
        receiver: Receiver::StandardLent,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "standard-lent-4096",
        toggle: TOGGLE_PATH,
        size: BURST,
        receiver: Receiver::StandardLent,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "standard-lent-40-framed",
        toggle: TOGGLE_PATH,
        size: SMALL,
        receiver: Receiver::StandardLent,
        delivered: 1,
        framed: true,
    },
    Case {
        name: "dorx-lent",
        toggle: TOGGLE_SEND,
        size: SMALL,
        receiver: Receiver::BreakdownLent(0),
        delivered: 0,
        framed: true,
    },
    Case {
        name: "dorx-null",
        toggle: TOGGLE_SEND,
        size: SMALL,
        receiver: Receiver::NullRx,
        delivered: 0,
        framed: true,
    },
    Case {
        name: "dorx-lent-null",
        toggle: TOGGLE_SEND,
        size: SMALL,
        receiver: Receiver::NullRxLent,
        delivered: 0,
        framed: true,
    },
    Case {
        name: "path-40-copying",
        toggle: TOGGLE_PATH_COPYING,
        size: SMALL,
        receiver: Receiver::Standard,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "ring-40",
        toggle: TOGGLE_RING,
        size: SMALL,
        receiver: Receiver::Ring,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "ring-57",
        toggle: TOGGLE_RING,
        size: 57,
        receiver: Receiver::Ring,
        delivered: 1,
        framed: false,
    },
    Case {
        name: "ring-1000",
        toggle: TOGGLE_RING,
        size: LARGE,
        receiver: Receiver::Ring,
        delivered: 1,
        framed: false,
    },
];

/// The case named `name`.
pub fn case(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

/// Messages per counted run by default. A multiple of the 16,384 40-byte
/// messages the sender's transmit region holds, so that the region's
/// periodic reclaim falls into the count exactly once per 16,384 messages.
pub const MESSAGES: usize = 16_384;

/// Messages sent before the counted ones, outside the toggled functions:
/// they warm the per-thread state (the dpf reader, the outboxes, the
/// natives' scratch buffer) and grow the sender's in-flight list to its
/// largest, so that none of that is counted.
pub const WARM_UP: usize = 20_000;

/// The receiving endpoint's buffers handed to the free queue at creation
/// (the second half of a default endpoint's 512 buffers), in the order
/// they were given.
struct FreeCursor {
    first: u32,
    count: u32,
    next: u32,
    size: u32,
}

impl FreeCursor {
    fn new(ep: &Endpoint) -> FreeCursor {
        let c = ep.layout().config;
        let first = c.buffers.div_ceil(2);
        FreeCursor {
            first,
            count: c.buffers - first,
            next: 0,
            size: c.buffer_size,
        }
    }

    /// The next buffer to give back: the free queue is FIFO, so giving
    /// them back in the order they were first given keeps every buffer in
    /// it exactly once.
    fn take(&mut self) -> u32 {
        let off = (self.first + self.next) * self.size;
        self.next = (self.next + 1) % self.count;
        off
    }
}

/// What a counted run did, for the checks that make its count mean what
/// [`CASES`] says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaseRun {
    /// Messages sent through the toggled function.
    pub counted: u64,
    /// Receive descriptors the receiving application took, warm-up
    /// included.
    pub received: u64,
    /// The receiving endpoint's counters at the end.
    pub counts: unet::PortCounts,
    /// The engine that ran the receiving endpoint's applet (`None`
    /// without one).
    pub engine: Option<jive::Engine>,
}

/// Runs `case` for `n` counted messages after [`WARM_UP`] others, its
/// applets (if any) run by `engine`, checks that every message did what
/// the case says (no trap, no drop, the expected descriptors, the free
/// queue never dry) and returns what happened. This is the process
/// callgrind measures.
pub fn run_case(case: &Case, n: usize, engine: jive::Engine) -> Result<CaseRun, String> {
    let (applet_a, applet_b) = match case.receiver {
        Receiver::Ring => return run_ring_case(case, n),
        Receiver::Standard => (None, None),
        Receiver::StandardApplet => (Some(unet::applets::STANDARD), Some(unet::applets::STANDARD)),
        Receiver::Breakdown(_) => (None, Some(unet::applets::BREAKDOWN)),
        Receiver::StandardLent => (
            Some(unet::applets::STANDARD_LENT),
            Some(unet::applets::STANDARD_LENT),
        ),
        Receiver::BreakdownLent(_) => (None, Some(unet::applets::BREAKDOWN_LENT)),
        Receiver::NullRx => (None, Some(unet::applets::NULL_RX)),
        Receiver::NullRxLent => (None, Some(unet::applets::NULL_RX_LENT)),
    };
    let mut p = pair(applet_a, applet_b).map_err(|e| format!("set-up: {e}"))?;
    if case.framed {
        p.a.install_filter(p.ab, FRAMING_FILTER, 0)
            .map_err(|e| format!("installing the framing filter: {e}"))?;
    }
    set_engine(&p, engine)?;
    if let Receiver::Breakdown(mode) | Receiver::BreakdownLent(mode) = case.receiver {
        let id = p.b.id();
        p.b.engine()
            .ok_or("the engine is not in this process")?
            .with_applet(id, |ap| ap.set_static_int("mode", mode))
            .ok_or("no applet on the receiving endpoint")?
            .map_err(|e| format!("setting mode: {e}"))?;
    }
    let msg = vec![0xa5u8; case.size];
    let mut buf = Vec::with_capacity(1 << 16);
    let mut free = FreeCursor::new(&p.b);
    let mut run = CaseRun::default();
    let give_back = if case.receiver == Receiver::Breakdown(2) {
        CALLS_PER_RX
    } else {
        0
    };
    for i in 0..WARM_UP + n {
        let counted = i >= WARM_UP;
        if case.toggle == TOGGLE_PATH || case.toggle == TOGGLE_PATH_COPYING {
            let copying = case.toggle == TOGGLE_PATH_COPYING;
            let got = match (counted, copying) {
                (true, false) => unet_count_path(&mut p, &msg, &mut buf),
                (true, true) => unet_count_path_copying(&mut p, &msg, &mut buf),
                (false, false) => one_way(&mut p.a, p.ab, &mut p.b, &msg, &mut buf),
                (false, true) => one_way_copying(&mut p.a, p.ab, &mut p.b, &msg, &mut buf),
            };
            match got {
                Some(len) if len == case.size => run.received += 1,
                other => return Err(format!("message {i}: received {other:?}")),
            }
        } else {
            let sent = if counted {
                unet_count_send(&mut p.a, p.ab, &msg, &mut p.b)
            } else {
                let r = p.a.send(p.ab, &msg);
                p.b.poll_engine();
                r
            };
            sent.map_err(|e| format!("message {i}: {e}"))?;
            while p.b.recv().is_some() {
                run.received += 1;
            }
            for _ in 0..give_back {
                let off = free.take();
                if !p.b.give_buffer(off) {
                    return Err(format!(
                        "message {i}: the free queue is full, so doRx did not take its buffers"
                    ));
                }
            }
        }
        run.counted += u64::from(counted);
    }
    if std::env::var_os("UNET_COUNT_LISTING").is_some() {
        // The receiver's applet's machine code, at the addresses it ran at
        // (callgrind's `--dump-instr=yes` counts name the same addresses).
        let id = p.b.id();
        if let Some(Some(text)) =
            p.b.engine()
                .and_then(|e| e.with_applet(id, |ap| ap.native_listing()))
        {
            eprintln!("{text}");
        }
    }
    run.counts = p.b.counts();
    run.engine =
        p.b.engine()
            .and_then(|e| e.with_applet(p.b.id(), |ap| ap.engine()));
    let c = run.counts;
    let expected = case.delivered * (WARM_UP + n) as u64;
    if c.applet_traps + c.applet_drops + c.rx_no_buffer + c.rx_queue_full + c.free_invalid > 0 {
        return Err(format!(
            "{}: the receiver dropped or trapped: {c:?}",
            case.name
        ));
    }
    if run.received != expected || c.rx_delivered != expected {
        return Err(format!(
            "{}: {} descriptors received, {} delivered, {expected} expected",
            case.name, run.received, c.rx_delivered
        ));
    }
    Ok(run)
}

/// Makes `engine` run the applets of both endpoints of `p`, and checks
/// that it does.
fn set_engine(p: &Pair, engine: jive::Engine) -> Result<(), String> {
    let e = p.a.engine().ok_or("the engine is not in this process")?;
    for id in [p.a.id(), p.b.id()] {
        if let Some(set) = e.with_applet(id, |ap| ap.set_engine(engine).map(|()| ap.engine())) {
            let now = set.map_err(|err| format!("running the applet on {engine:?}: {err}"))?;
            if now != engine {
                return Err(format!("the applet runs on {now:?}, not {engine:?}"));
            }
        }
    }
    Ok(())
}

/// [`run_case`] of a [`Receiver::Ring`] case: each message sent by one
/// end of the ring and copied out of the other, on this thread, and
/// checked (its length and its bytes). No endpoint, so no counters.
fn run_ring_case(case: &Case, n: usize) -> Result<CaseRun, String> {
    let (mut a, mut b) = unet::peer::ring_pair_placed("unet-count-ring", Placement::OnePlace)
        .map_err(|e| format!("set-up: {e}"))?;
    let msg: Vec<u8> = (0..case.size).map(|i| i as u8 ^ 0xa5).collect();
    let mut buf = vec![0u8; 1 << 16];
    let mut run = CaseRun::default();
    for i in 0..WARM_UP + n {
        let counted = i >= WARM_UP;
        let got = if counted {
            unet_count_ring(&mut a, &mut b, &msg, &mut buf)
        } else {
            a.send(&msg);
            b.try_recv(&mut buf)
        };
        match got {
            Some(len) if len == case.size && buf[..len] == msg[..] => run.received += 1,
            other => return Err(format!("message {i}: received {other:?}")),
        }
        run.counted += u64::from(counted);
    }
    Ok(run)
}

/// Runs `exe case.name n` (with [`INTERP_FLAG`] when `engine` is the
/// interpreter) under callgrind with the case's toggle; the instructions
/// counted.
pub fn callgrind(exe: &Path, case: &Case, n: usize, engine: jive::Engine) -> Result<u64, Skip> {
    let interp = engine == jive::Engine::Interpreter;
    let file = std::env::temp_dir().join(format!(
        "unet-count-{}-{}{}.out",
        std::process::id(),
        case.name,
        if interp { "-interp" } else { "" }
    ));
    let mut cmd = Command::new("valgrind");
    cmd.arg("--tool=callgrind")
        .arg(format!("--toggle-collect={}", case.toggle))
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(exe)
        .arg(case.name)
        .arg(n.to_string());
    if interp {
        cmd.arg(INTERP_FLAG);
    }
    let run = cmd.output().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Skip(
            "valgrind is not installed (apt-get install valgrind); callgrind counts skipped".into(),
        ),
        _ => Skip(format!("running valgrind: {e}")),
    })?;
    let text = std::fs::read_to_string(&file);
    let _ = std::fs::remove_file(&file);
    if !run.status.success() {
        return Err(Skip(format!(
            "callgrind run of {} failed ({}): {}",
            case.name,
            run.status,
            String::from_utf8_lossy(&run.stderr)
                .lines()
                .rfind(|l| !l.starts_with("=="))
                .unwrap_or("")
        )));
    }
    let text = text.map_err(|e| Skip(format!("reading {}: {e}", file.display())))?;
    parse_total(&text).ok_or_else(|| Skip(format!("no totals line in {}", file.display())))
}

/// `unet-count`'s flag that runs a case's applets on jive's interpreter
/// instead of its JIT.
pub const INTERP_FLAG: &str = "--interp";

/// One row of the breakdown.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// What it measures.
    pub operation: String,
    /// Instructions per message or per call.
    pub instructions: f64,
    /// How it was computed from the cases' totals.
    pub formula: &'static str,
    /// Whether an applet runs in a case it is computed from, so that the
    /// engine that runs applets can change it.
    pub applet: bool,
}

/// Figure 7's rows from the cases' totals (`(name, instructions)`, every
/// case of [`CASES`]) over `n` counted messages each; `None` if a case is
/// missing.
pub fn report(totals: &[(&str, u64)], n: usize) -> Option<Vec<Row>> {
    let t = |name: &str| {
        totals
            .iter()
            .find(|(c, _)| *c == name)
            .map(|&(_, v)| v as f64)
    };
    let n = n as f64;
    let k = CALLS_PER_RX as f64;
    let per = |name: &str| t(name).map(|v| v / n);
    // A row without applet (`row`) or with one (`arow`).
    let row = |operation: &str, instructions: f64, formula| Row {
        operation: operation.into(),
        instructions,
        formula,
        applet: false,
    };
    let arow = |operation: &str, instructions: f64, formula| Row {
        applet: true,
        ..row(operation, instructions, formula)
    };
    let dorx = t("dorx")?;
    Some(vec![
        row(
            "U-Net path, 40 B, no applet (send, engine, dpf, deliver, recv in place, copy out)",
            per("path-40")?,
            "path-40 / N",
        ),
        row(
            "the bare SPSC ring (the demo's floor: the endpoints' queue code, no engine), 40 B: send, copy out",
            per("ring-40")?,
            "ring-40 / N",
        ),
        row(
            "U-Net path, 40 B, no applet: added over the bare ring (the engine's work, and the copy out into a Vec where the ring's is into a slice)",
            per("path-40")? - per("ring-40")?,
            "(path-40 - ring-40) / N",
        ),
        row(
            "U-Net path, 40 B, no applet, the copying recv (the descriptor copied out, then read)",
            per("path-40-copying")?,
            "path-40-copying / N",
        ),
        row(
            "U-Net path, 1000 B, no applet",
            per("path-1000")?,
            "path-1000 / N",
        ),
        row(
            "the bare SPSC ring, 1000 B (in its area): send, copy out",
            per("ring-1000")?,
            "ring-1000 / N",
        ),
        row(
            "U-Net path, 1000 B, no applet: added over the bare ring",
            per("path-1000")? - per("ring-1000")?,
            "(path-1000 - ring-1000) / N",
        ),
        row(
            "U-Net path, 57 B, no applet (the shortest message in a buffer)",
            per("path-57")?,
            "path-57 / N",
        ),
        row(
            "the bare SPSC ring, 57 B (in its area): send, copy out",
            per("ring-57")?,
            "ring-57 / N",
        ),
        row(
            "U-Net path, 57 B, no applet: added over the bare ring",
            per("path-57")? - per("ring-57")?,
            "(path-57 - ring-57) / N",
        ),
        row(
            "U-Net path, 40 B, no applet, through a frame (as to an applet's endpoint)",
            per("path-40-framed")?,
            "path-40-framed / N",
        ),
        row(
            "U-Net path, 1000 B, no applet, through a frame",
            per("path-1000-framed")?,
            "path-1000-framed / N",
        ),
        arow(
            "standard applet on both endpoints, 40 B: added per message over the path without applet (doTx + doRx; what a user pays)",
            per("standard-40")? - per("path-40")?,
            "(standard-40 - path-40) / N",
        ),
        arow(
            "standard applet on both endpoints, 1000 B: added per message over the path without applet",
            per("standard-1000")? - per("path-1000")?,
            "(standard-1000 - path-1000) / N",
        ),
        row(
            "U-Net path, 4096 B, no applet (burst-25's message)",
            per("path-4096")?,
            "path-4096 / N",
        ),
        arow(
            "standard applet on both endpoints, 4096 B: added per message over the path without applet",
            per("standard-4096")? - per("path-4096")?,
            "(standard-4096 - path-4096) / N",
        ),
        arow(
            "standard applet on both endpoints, 40 B, every message through a frame: added over the framed path",
            per("standard-40-framed")? - per("path-40-framed")?,
            "(standard-40-framed - path-40-framed) / N",
        ),
        arow(
            "standard applet on both endpoints, 1000 B, through a frame: added over the framed path",
            per("standard-1000-framed")? - per("path-1000-framed")?,
            "(standard-1000-framed - path-1000-framed) / N",
        ),
        arow(
            "standard applet on both endpoints, 40 B: what the frameless delivery saves per message",
            per("standard-40-framed")? - per("standard-40")?,
            "(standard-40-framed - standard-40) / N",
        ),
        row(
            "send + engine + standard U-Net delivery through a frame, 40 B (recv not counted)",
            per("deliver")?,
            "deliver / N",
        ),
        arow(
            "send + engine + doRx that returns at once, 40 B",
            dorx / n,
            "dorx / N",
        ),
        arow(
            "invoking doRx (fill RxBuf, call, return) in place of the standard delivery through a frame",
            (dorx - t("deliver")?) / n,
            "(dorx - deliver) / N",
        ),
        arow(
            "invoking a lent doRx (lend the message, call, return) in place of the standard delivery through a frame",
            (t("dorx-lent")? - t("deliver")?) / n,
            "(dorx-lent - deliver) / N",
        ),
        arow(
            "invoking a doRx that returns at once (NullRx: no switch), the message copied into RxBuf: issue 28's target",
            (t("dorx-null")? - t("deliver")?) / n,
            "(dorx-null - deliver) / N",
        ),
        arow(
            "invoking a lent doRx that returns at once (NullRxLent: no switch): issue 28's target",
            (t("dorx-lent-null")? - t("deliver")?) / n,
            "(dorx-lent-null - deliver) / N",
        ),
        arow(
            "standard applet with the lent doRx and doTx on both endpoints, 40 B: added per message over the path without applet",
            per("standard-lent-40")? - per("path-40")?,
            "(standard-lent-40 - path-40) / N",
        ),
        arow(
            "standard applet with the lent doRx and doTx on both endpoints, 1000 B: added over the path without applet",
            per("standard-lent-1000")? - per("path-1000")?,
            "(standard-lent-1000 - path-1000) / N",
        ),
        arow(
            "standard applet with the lent doRx and doTx on both endpoints, 4096 B: added over the path without applet",
            per("standard-lent-4096")? - per("path-4096")?,
            "(standard-lent-4096 - path-4096) / N",
        ),
        arow(
            "standard applet with the lent doRx and doTx on both endpoints, 40 B, through a frame: added over the framed path",
            per("standard-lent-40-framed")? - per("path-40-framed")?,
            "(standard-lent-40-framed - path-40-framed) / N",
        ),
        arow(
            "null native (getFreeBufferLength)",
            (t("null")? - dorx) / (k * n),
            "(null - dorx) / 8N",
        ),
        arow(
            "getFreeBuffer",
            (t("getbuf")? - dorx) / (k * n),
            "(getbuf - dorx) / 8N",
        ),
        arow(
            "push a receive descriptor (dmaRxdPayload, 0 B inline)",
            (t("push")? - dorx) / (k * n),
            "(push - dorx) / 8N",
        ),
    ])
}

/// The rows as a markdown table: the JIT's column, and beside it, when
/// `interp` is given (the same rows from the interpreter's counts), the
/// interpreter's, filled where an applet runs.
pub fn table(rows: &[Row], interp: Option<&[Row]>) -> String {
    let mut s = match interp {
        Some(_) => String::from("| operation | JIT | interpreter | from |\n|---|---:|---:|---|\n"),
        None => String::from("| operation | instructions | from |\n|---|---:|---|\n"),
    };
    for (i, r) in rows.iter().enumerate() {
        let other = match interp.map(|rows| rows.get(i)) {
            None => String::new(),
            Some(Some(o)) if r.applet => format!(" {:.1} |", o.instructions),
            Some(_) => " |".into(),
        };
        s += &format!(
            "| {} | {:.1} |{other} `{}` |\n",
            r.operation, r.instructions, r.formula
        );
    }
    s
}

/// The totals of the interpreter's run: `interp`'s count for each case
/// whose applets it ran, `jit`'s for the others (no applet runs in them,
/// so the engine does not change what they count).
pub fn interp_totals<'a>(jit: &[(&'a str, u64)], interp: &[(&str, u64)]) -> Vec<(&'a str, u64)> {
    jit.iter()
        .map(|&(name, v)| {
            let ran = interp.iter().find(|(c, _)| *c == name).map(|&(_, v)| v);
            (name, ran.unwrap_or(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case runs, and its receiver did what the case's count
    /// assumes: the right descriptors, no trap, no drop, no dry free queue;
    /// each case with an applet on the interpreter too.
    #[test]
    fn every_case_runs_as_its_count_assumes() {
        for (c, engine) in CASES.iter().map(|c| (c, jive::Engine::Jit)).chain(
            CASES
                .iter()
                .filter(|c| c.receiver.runs_applet())
                .map(|c| (c, jive::Engine::Interpreter)),
        ) {
            let r =
                run_case(c, 10, engine).unwrap_or_else(|e| panic!("{} on {engine:?}: {e}", c.name));
            assert_eq!(r.counted, 10, "{}", c.name);
            let ran = c.receiver.runs_applet().then_some(engine);
            assert_eq!(r.engine, ran, "{}", c.name);
            assert_eq!(
                r.received,
                c.delivered * (WARM_UP as u64 + 10),
                "{} on {engine:?}",
                c.name
            );
        }
    }

    /// The interpreter's column takes its run's count for the cases with
    /// an applet and the JIT's for the others, and shows a figure only on
    /// the rows an applet runs in.
    #[test]
    fn the_interpreters_column_is_its_own_only_where_an_applet_runs() {
        let jit = [("path-40", 10), ("standard-40", 30)];
        let interp = [("standard-40", 70)];
        assert_eq!(
            interp_totals(&jit, &interp),
            [("path-40", 10), ("standard-40", 70)]
        );
        let rows = |v: f64, w: f64| {
            vec![
                Row {
                    operation: "path".into(),
                    instructions: v,
                    formula: "path-40 / N",
                    applet: false,
                },
                Row {
                    operation: "standard".into(),
                    instructions: w,
                    formula: "(standard-40 - path-40) / N",
                    applet: true,
                },
            ]
        };
        let t = table(&rows(1.0, 2.0), Some(&rows(1.0, 6.0)));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "| operation | JIT | interpreter | from |");
        assert_eq!(lines[2], "| path | 1.0 | | `path-40 / N` |");
        assert_eq!(
            lines[3],
            "| standard | 2.0 | 6.0 | `(standard-40 - path-40) / N` |"
        );
        let t = table(&rows(1.0, 2.0), None);
        assert_eq!(
            t.lines().nth(3),
            Some("| standard | 2.0 | `(standard-40 - path-40) / N` |")
        );
    }

    #[test]
    fn case_names_are_unique_and_found() {
        for c in CASES {
            assert_eq!(case(c.name).map(|f| f.name), Some(c.name));
        }
        assert!(case("all").is_none());
    }

    #[test]
    fn report_subtracts_baselines_per_message_and_per_call() {
        let n = 10;
        let totals = [
            ("path-40", 1000),
            ("path-1000", 2000),
            ("path-57", 1200),
            ("path-40-framed", 1500),
            ("path-1000-framed", 2500),
            ("standard-40", 4000),
            ("standard-1000", 8000),
            ("standard-40-framed", 5000),
            ("standard-1000-framed", 9000),
            ("deliver", 600),
            ("dorx", 900),
            ("null", 900 + 8 * 10 * 7),
            ("getbuf", 900 + 8 * 10 * 11),
            ("push", 900 + 8 * 10 * 13),
            ("path-40-copying", 1100),
            ("path-4096", 3000),
            ("standard-4096", 7000),
            ("standard-lent-40", 3500),
            ("standard-lent-1000", 7000),
            ("standard-lent-4096", 6000),
            ("standard-lent-40-framed", 4000),
            ("dorx-lent", 800),
            ("dorx-null", 820),
            ("dorx-lent-null", 780),
            ("ring-40", 300),
            ("ring-57", 400),
            ("ring-1000", 700),
        ];
        let rows = report(&totals, n).unwrap();
        let v: Vec<f64> = rows.iter().map(|r| r.instructions).collect();
        assert_eq!(
            v,
            [
                100.0, 30.0, 70.0, 110.0, 200.0, 70.0, 130.0, 120.0, 40.0, 80.0, 150.0, 250.0,
                300.0, 600.0, 300.0, 400.0, 350.0, 650.0, 100.0, 60.0, 90.0, 30.0, 20.0, 22.0,
                18.0, 250.0, 500.0, 300.0, 250.0, 7.0, 11.0, 13.0
            ]
        );
        assert!(report(&totals[1..], n).is_none());
        // A row has the interpreter's figure exactly when a case it is
        // computed from runs an applet.
        for r in &rows {
            let named: Vec<&Case> = r
                .formula
                .split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '-'))
                .filter_map(case)
                .collect();
            assert!(!named.is_empty(), "{}", r.formula);
            let applet = named.iter().any(|c| c.receiver.runs_applet());
            assert_eq!(r.applet, applet, "{}", r.formula);
        }
    }

    #[test]
    fn round_trips_come_back() {
        let mut l = LoopEcho::new(56, None).unwrap();
        assert!(l.round_trips(50) > Duration::ZERO);
        let mut r = RingEcho::new(4096).unwrap();
        assert!(r.round_trips(50) > Duration::ZERO);
    }
}
