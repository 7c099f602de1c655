//! The engine as a daemon (`fastpath engine`): applications in other
//! processes get their endpoints over a Unix socket.
//!
//! U-Net (§2) leaves to the operating system what is off the data path:
//! creating an endpoint, mapping its memory into the application, and
//! setting up channels. Here the daemon plays that part. An application
//! connects to the daemon's Unix stream socket and asks for an endpoint;
//! the reply carries the endpoint's `memfd`, passed with `SCM_RIGHTS`
//! (unix(7)), which the application maps ([`crate::client`]). From then on
//! messages move through the shared segment only, polled by the engine's
//! own threads; the socket carries the control operations.
//!
//! # Protocol
//!
//! Every request and every reply is one frame: a `u32` length (little
//! endian) counting the bytes after it, then those bytes. A request's bytes
//! are an operation code ([`Op`]) and its fields; a reply's are a status
//! byte (`0` ok, `1` error, `2` refused) and, on success, the operation's
//! result, on error a UTF-8 message, or on a refusal a typed [`Refusal`]
//! (a kind byte and its `u32` fields: [`Refusal::encode`]). All integers are little endian; an IPv4 address
//! is its 4 bytes in network order. `bytes` is a `u32` length and that many
//! bytes; `opt bytes` is a byte `0` (none) or `1` followed by `bytes`.
//!
//! | op | request fields | reply |
//! |---|---|---|
//! | 1 `Info` | — | `u16` protocol version, engine address: 4-byte IPv4, `u16` port |
//! | 2 `CreateEndpoint` | 5 × `u32` config (buffers, buffer_size, tx_depth, rx_depth, free_depth), `opt bytes` applet | `u32` endpoint id, and the `memfd` as `SCM_RIGHTS` on the reply |
//! | 3 `OpenChannel` | `u32` id, IPv4, `u16` port, `u32` remote endpoint id, `u8` flags (bit 0: UDP checksum) | `u16` channel tag |
//! | 4 `InstallFilter` | `u32` id, `u16` channel, `i32` priority, `bytes` filter text (UTF-8, pcap syntax) | `u64` filter id |
//! | 5 `RemoveFilter` | `u32` id, `u64` filter id | — |
//! | 6 `SetApplet` | `u32` id, `opt bytes` applet | — |
//! | 7 `Counts` | `u32` id | [`COUNTERS`] × `u64`: the fields of [`PortCounts`] in declaration order |
//! | 8 `CloseEndpoint` | `u32` id | — |
//! | 9 `ClosedChannels` | `u32` id | `u16` tag of each channel closed because its peer went away, in the order they closed |
//! | 10 `EngineCounts` | `u16` n, n × `u32` endpoint id (at most [`MAX_COUNTS_ENDPOINTS`]) | [`ENGINE_COUNTERS`] × `u64`: the fields of [`EngineCounts`](crate::EngineCounts) in declaration order; then, for each id in order, [`COUNTERS`] × `u64` as for `Counts` |
//!
//! An endpoint id is a [`crate::frame::EndpointId`]: the endpoint's slot in
//! the low 16 bits, the slot's generation in the high 16 bits. An engine
//! never hands out an id twice, so an id names one endpoint for good.
//!
//! A frame holds at most [`MAX_FRAME`] bytes, an applet at most
//! [`MAX_APPLET`] (jive's default class-size limit), a filter at most
//! [`MAX_FILTER`]. A request must use exactly the bytes of its frame.
//!
//! # Trust
//!
//! The daemon trusts no client:
//! - **Parsing.** Every request is decoded field by field against its
//!   frame's end; a short, overlong, or unknown request gets an error reply
//!   and the connection goes on. A frame whose length exceeds the limit
//!   gets an error reply and the connection is closed (its bytes cannot be
//!   skipped safely). Nothing a client sends panics the daemon or touches
//!   another connection.
//! - **Isolation.** A connection owns the endpoints it created; a request
//!   naming any other id is refused ([`Refusal::NotYours`]: "endpoint N
//!   is not yours"), whether or not N exists. What a client may read of
//!   the counters follows: the counters of its own endpoints (`Counts`,
//!   and `EngineCounts` for the ids it names, all of which must be its
//!   own, or nothing is read) and the engine's own totals (frames in and
//!   out, drops by reason, summed over every endpoint and client), never
//!   another connection's per-endpoint figures. A filter installed through the daemon is confined to
//!   frames addressed to the caller's endpoint (it is installed as
//!   `(text) and (udp[8:2] = slot and udp[14:2] = generation)`), so no
//!   process can take another's traffic, nor the traffic of an endpoint
//!   that held the same slot before.
//! - **Budgets.** A client is a process, known by the pid `SO_PEERCRED`
//!   gives. A connection holds at most [`ServeOptions::max_endpoints`]
//!   endpoints and [`ServeOptions::max_memory_per_connection`] bytes of
//!   shared memory, a process [`ServeOptions::max_memory_per_peer`] over
//!   all its connections; past either, `CreateEndpoint` is refused naming
//!   the budget. A process's applets hold at most
//!   [`ServeOptions::max_applet_memory_per_peer`] of the daemon's memory
//!   and [`ServeOptions::max_code_per_peer`] of the JIT's code cache; past
//!   either, a load (`SetApplet`, `CreateEndpoint` with an applet) is
//!   refused naming the budget, the endpoint left as it was. All the
//!   clients together hold at most [`ServeOptions::max_memory_total`] of
//!   shared memory and [`ServeOptions::max_applet_memory_total`] of
//!   applets, so that a client that forks cannot exhaust the machine.
//!   Reading the engine's own counters takes the transport's
//!   lock, which the engine's threads take to send and receive, so a
//!   process may do it ([`Op::EngineCounts`]) at most
//!   [`ServeOptions::max_engine_counts_per_second`] times a second over
//!   all its connections (a token bucket holding a second's worth);
//!   past it the request is refused ([`Refusal::CountsBudget`], with the
//!   wait until the next read) without touching the engine. Compiling a
//!   filter takes the connection thread's CPU, up to about a second for
//!   one within dpf's limits, and loading an applet up to about 0.4 s, so
//!   a process's installs and loads share
//!   [`ServeOptions::compile_time_per_second`] of CPU time a second (a
//!   token bucket holding a second's worth, each request taken while any
//!   is left and charged its thread CPU time after); past it
//!   `InstallFilter`, `SetApplet` with an applet and `CreateEndpoint`
//!   with one are refused ([`Refusal::CompileBudget`], with the wait).
//!   A connection compiles on a thread of its own at
//!   [`ServeOptions::control_nice`] (19, the lowest priority), so that
//!   compiles on many connections at once, each within its process's
//!   budget, take only what the engine's threads leave; the connection's
//!   thread does the rest at the daemon's priority, since some of it is
//!   done under locks an engine thread takes too. The daemon
//!   serves at most
//!   [`ServeOptions::max_connections`] at once, at most
//!   [`ServeOptions::max_connections_per_peer`] of one process and
//!   [`ServeOptions::max_connections_per_user`] of one user (`SO_PEERCRED`'s
//!   uid; root and the daemon's own user, who can stop it anyway, are not
//!   counted), and keeps the last [`ServeOptions::reserve`] slots for
//!   processes that hold none, so one process cannot lock the others out.
//!   Connections that hold nothing cannot either, however many processes
//!   hold them: when every slot is taken, a newcomer is served in the
//!   place of the connection that has waited longest for a request owning
//!   no endpoint, once that has waited
//!   [`ServeOptions::evict_idle_after`] ([`Event::Evicted`]). A request
//!   whose first byte has come must arrive whole, and a reply be taken,
//!   within [`ServeOptions::request_timeout`], or the connection is
//!   closed.
//! - **Reclaim.** When a connection closes, because the application closed
//!   it, exited or was killed, every endpoint it still owns is removed from
//!   the engine with its channels, filters and applet. The same happens if
//!   the connection's thread unwinds (a bug): its endpoints, its slot among
//!   the connections and its count in its process's budget are given back
//!   as the thread ends, and its client sees the connection close.
//! - **The event hook** ([`ServeOptions::on_event`], the log of `fastpath
//!   engine`) cannot stop the daemon: a hook that panics loses that event
//!   and nothing else, on a connection's thread or the accepting one.
//! - **The socket** is created with mode `0600` (configurable) before it
//!   appears under its name: bound under a short temporary name in the same
//!   directory, given its mode, then linked to its name (`link(2)`), so no
//!   other user can connect in between. The link never replaces anything:
//!   of two daemons started at once on one path exactly one serves it, the
//!   other refused ("an engine is already serving this socket"). A socket
//!   that refuses connections (`ECONNREFUSED`: a daemon died without
//!   removing it) is stale and replaced, under an exclusive `flock(2)` on
//!   the directory, so that two daemons never both replace it; anything
//!   else at the path (a live socket, another user's, a file of another
//!   kind) is an error. Any path that fits in `sun_path` (107 bytes) is
//!   taken: one too near the limit for the temporary name beside it is
//!   bound in place under the directory's lock. Either way the socket is
//!   given its mode before it is bound, so its file never has more bits
//!   than the mode's (bound first, it had 0777 less the umask's until
//!   changed). Errors name the path asked for.

use std::collections::{BTreeSet, HashMap};
use std::ffi::c_int;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use crate::engine::{ChannelOptions, Engine, EngineError, PortCounts};
use crate::frame::EndpointId;

pub mod proto;

pub use proto::*;

/// The filter that `text` becomes when installed for endpoint `id`
/// through the daemon: `(text) and (udp[8:2] = slot and udp[14:2] =
/// generation)`, which matches only frames addressed to endpoint `id` (its
/// slot, at this generation: not to an earlier or later holder of the
/// slot). The result is parsed and its root checked to be that
/// conjunction, so no text (unbalanced parentheses included) escapes the
/// confinement. The client's text is checked against dpf's limits less
/// what the confinement adds (one level of parentheses, the guard's two
/// primitives and its bytes), so a filter is refused, with the column in
/// the client's own text, exactly when its confined form would be.
fn confine_filter(text: &str, id: EndpointId) -> Result<String, String> {
    let err = |e: dpf::Error| format!("filter: {e}");
    let guard_text = format!(
        "udp[8:2] = {} and udp[14:2] = {}",
        crate::frame::endpoint_slot(id),
        crate::frame::endpoint_generation(id)
    );
    let confined = format!("({text}) and ({guard_text})");
    let full = dpf::syntax::Limits::default();
    let room = dpf::syntax::Limits {
        max_len: full.max_len - (confined.len() - text.len()),
        max_nesting: full.max_nesting - 1,
        max_primitives: full.max_primitives - 2,
    };
    dpf::syntax::parse_with(text, &room).map_err(err)?;
    let guard = dpf::parse(&guard_text).map_err(err)?;
    match &dpf::parse(&confined).map_err(err)? {
        dpf::syntax::Expr::And(_, rhs) if **rhs == guard => Ok(confined),
        _ => Err(format!(
            "filter {text:?} cannot be confined to endpoint {id}"
        )),
    }
}

/// The default socket path: `$XDG_RUNTIME_DIR/fastpath-engine.sock`, or
/// `/tmp/fastpath-engine.sock` without a runtime directory.
pub fn default_socket_path() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("fastpath-engine.sock"),
        _ => PathBuf::from("/tmp/fastpath-engine.sock"),
    }
}

/// Something that happened on the daemon, for a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A client connected.
    Connected {
        /// The connection's number (from 1, in order of arrival).
        conn: u64,
        /// The client's process id, from `SO_PEERCRED`.
        pid: Option<u32>,
        /// The client's user id, from `SO_PEERCRED`.
        uid: Option<u32>,
    },
    /// A client was turned away, for the reason its reply gave.
    Refused {
        /// The client's process id.
        pid: Option<u32>,
        /// The client's user id.
        uid: Option<u32>,
        /// Which limit: the text of the error reply the client got.
        reason: String,
    },
    /// An idle connection that owned no endpoint was closed to make room
    /// for a new client ([`ServeOptions::evict_idle_after`]); its
    /// [`Event::Disconnected`] follows.
    Evicted {
        /// The connection closed.
        conn: u64,
        /// Its client's process id.
        pid: Option<u32>,
        /// How long it had waited for its next request.
        idle: std::time::Duration,
    },
    /// A connection created an endpoint.
    EndpointCreated {
        /// The connection.
        conn: u64,
        /// The endpoint's id.
        id: EndpointId,
    },
    /// An endpoint was removed: closed by its connection, or reclaimed
    /// when the connection went away.
    EndpointClosed {
        /// The connection.
        conn: u64,
        /// The endpoint's id.
        id: EndpointId,
        /// Its counters at the end.
        counts: PortCounts,
        /// Whether it was reclaimed (its connection closed without closing it).
        reclaimed: bool,
    },
    /// A connection closed.
    Disconnected {
        /// The connection.
        conn: u64,
        /// How many endpoints were reclaimed.
        reclaimed: usize,
    },
}

/// A callback for [`Event`]s.
pub type EventHook = Arc<dyn Fn(&Event) + Send + Sync>;

/// How the daemon serves, and the budgets of its clients. A client is a
/// process, known by the pid `SO_PEERCRED` gives for its connection.
#[derive(Clone)]
pub struct ServeOptions {
    /// The socket file's mode. Default `0o600`: only the daemon's user.
    pub mode: u32,
    /// Connections served at once; more are refused. Default 64.
    pub max_connections: usize,
    /// Connections one process may hold at once. Default 8.
    pub max_connections_per_peer: usize,
    /// Connection slots kept for processes that hold none: a process that
    /// already has a connection is refused another once fewer than this
    /// many slots are free, so that a new client can always connect while
    /// one process, or a few, hold all they may. Default 16.
    pub reserve: usize,
    /// Connections one user may hold at once, over all its processes: the
    /// limit per process bounds one process, not a user's many, and a
    /// socket opened to other users ([`ServeOptions::mode`]) is otherwise
    /// theirs to fill by forking. Users in
    /// [`ServeOptions::exempt_users`] are not counted. Default 16.
    pub max_connections_per_user: usize,
    /// Users the limit per user does not count. Default root and the
    /// daemon's own user, who can signal or trace the daemon anyway, so
    /// that the connections of the clients of a daemon whose socket has
    /// the default mode, all of its own user, are bounded by the limits
    /// per process and in all.
    pub exempt_users: Vec<u32>,
    /// How long a connection that owns no endpoint must have waited for
    /// its next request (or its first) before it may be closed to make
    /// room for a new client when every slot is taken: then the one idle
    /// longest is closed ([`Event::Evicted`]) and the newcomer served, so
    /// that connections that hold nothing cannot keep clients out however
    /// many processes hold them. A connection that owns an endpoint, or is
    /// in the middle of a request, is never closed for another. Default
    /// 5 s; [`std::time::Duration::MAX`] closes none.
    pub evict_idle_after: std::time::Duration,
    /// How long a request may take to arrive once its first byte has, and
    /// a reply to be taken by the client; past it the connection is closed
    /// (a connection idle between requests is not timed by this, only as
    /// [`ServeOptions::evict_idle_after`] says). Default 5 s.
    pub request_timeout: std::time::Duration,
    /// Endpoints one connection may hold. Default 64.
    pub max_endpoints: usize,
    /// Bytes of shared memory (the endpoints' whole segments, every page
    /// of which the client may commit by writing it) one connection's
    /// endpoints may hold together. Default 256 MiB.
    pub max_memory_per_connection: u64,
    /// The same, over all the connections of one process. Default 1 GiB.
    pub max_memory_per_peer: u64,
    /// The same, over all the daemon's clients: the budgets per process
    /// do not bound a client that forks, and 64 connections of 256 MiB
    /// are 16 GiB. Default 4 GiB; set it from the machine's memory.
    pub max_memory_total: u64,
    /// Reads of the engine's own counters (`EngineCounts`) one process
    /// may make a second, over all its connections, and at most that many
    /// at once (each takes the transport's lock, which the data path
    /// takes too); past it the request is refused with
    /// [`Refusal::CountsBudget`]. 0 refuses every read. Default 100.
    pub max_engine_counts_per_second: u32,
    /// The daemon's CPU time one process may spend compiling and
    /// installing its filters (`InstallFilter`) and verifying and compiling
    /// its applets (`SetApplet` or `CreateEndpoint` with an applet) a
    /// second, over all its
    /// connections: a token bucket holding a second's worth. A request is
    /// taken while any is left and its time (the connection thread's CPU
    /// time) charged after, so one may overdraw it, at most by dpf's
    /// optimizer budget (about a second) or one applet's load (up to
    /// about 0.4 s within jive's limits); past it those requests are refused with
    /// [`Refusal::CompileBudget`] until it refills. Zero refuses every
    /// one. Default 250 ms.
    pub compile_time_per_second: std::time::Duration,
    /// Bytes of the JIT's code cache one process's applets may hold, over
    /// all its connections: each distinct code (`jive::CodeShare`'s key;
    /// applets of one class share it) counted once, from its load until
    /// the last of the process's endpoints running it lets it go. The
    /// cache (64 MiB) evicts its oldest code past 48 MiB, and evicted code
    /// runs on the interpreter until rebuilt within jive's rebuild budget,
    /// so without a share one process's applets could keep every client's
    /// code cycling. Past it `SetApplet` and `CreateEndpoint` with an
    /// applet are refused, naming the budget, and the endpoint is left as
    /// it was. Default 8 MiB: two applets near the JIT's 4 MiB a class, or
    /// hundreds of the size of the standard applet's.
    pub max_code_per_peer: usize,
    /// Bytes of the daemon's memory one process's applets may hold, over
    /// all its connections: each loaded applet's
    /// `jive::Applet::memory_bytes` (its decoded program, its heap's
    /// budget, its frame stacks), each load counted, as each load has its
    /// own. A class of 1 MiB decodes to several MiB (`Dear00`, 761 KiB,
    /// held 5.2 MiB an endpoint), and a process may hold 8 connections of
    /// 64 endpoints. Past it `SetApplet` and `CreateEndpoint` with an
    /// applet are refused, naming the budget, the endpoint left as it was.
    /// Default 512 MiB: about 450 endpoints with the standard applet (its
    /// heap's budget of 1 MiB counted whole), or 95 with `Dear00`.
    pub max_applet_memory_per_peer: usize,
    /// The same, over all the daemon's clients: 64 processes of one
    /// connection each could hold 32 GiB within their budgets. Past it
    /// loads are refused ([`EngineError::AppletMemoryTotal`]) as past a
    /// process's. Default 2 GiB; set it from the machine's memory.
    pub max_applet_memory_total: usize,
    /// The nice value the daemon compiles clients' filters and applets at,
    /// each connection on a thread of its own, while the engine's threads
    /// carry every client's messages. A process's compile budget bounds its
    /// own compiling, not that of many processes at once: on 2 cores four
    /// connections compiling applets without pause held another client's
    /// round trips up by as much as 36 ms. At 19, the lowest priority, the
    /// scheduler gives that work what the engine's threads leave. The
    /// connection's own thread, which does the rest (an applet's
    /// constructor and swap under its endpoint's locks, a filter's merge
    /// into the table), stays at the daemon's priority: holding a lock an
    /// engine thread waits for at the lowest, it was preempted for hundreds
    /// of milliseconds beside busy processes. A thread is only ever
    /// lowered: a value above the daemon's own priority leaves the
    /// compiling threads as they are (raising takes a privilege). Default
    /// 19.
    pub control_nice: i32,
    /// Called on every [`Event`], from the daemon's threads. A hook that
    /// panics loses that event, nothing else: the daemon goes on serving.
    /// It runs on the thread the event happened on, so a hook that blocks
    /// (a log written to a pipe no one reads) holds that thread up.
    pub on_event: Option<EventHook>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            mode: 0o600,
            max_connections: 64,
            max_connections_per_peer: 8,
            reserve: 16,
            max_connections_per_user: 16,
            exempt_users: own_users(),
            evict_idle_after: std::time::Duration::from_secs(5),
            request_timeout: std::time::Duration::from_secs(5),
            max_endpoints: 64,
            max_memory_per_connection: 256 << 20,
            max_memory_per_peer: 1 << 30,
            max_memory_total: 4 << 30,
            max_engine_counts_per_second: 100,
            compile_time_per_second: std::time::Duration::from_millis(250),
            max_code_per_peer: 8 << 20,
            max_applet_memory_per_peer: 512 << 20,
            max_applet_memory_total: 2 << 30,
            control_nice: 19,
            on_event: None,
        }
    }
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("mode", &format_args!("{:#o}", self.mode))
            .field("max_connections", &self.max_connections)
            .field("max_connections_per_peer", &self.max_connections_per_peer)
            .field("reserve", &self.reserve)
            .field("max_connections_per_user", &self.max_connections_per_user)
            .field("exempt_users", &self.exempt_users)
            .field("evict_idle_after", &self.evict_idle_after)
            .field("request_timeout", &self.request_timeout)
            .field("max_endpoints", &self.max_endpoints)
            .field("max_memory_per_connection", &self.max_memory_per_connection)
            .field("max_memory_per_peer", &self.max_memory_per_peer)
            .field("max_memory_total", &self.max_memory_total)
            .field(
                "max_engine_counts_per_second",
                &self.max_engine_counts_per_second,
            )
            .field("compile_time_per_second", &self.compile_time_per_second)
            .field("max_code_per_peer", &self.max_code_per_peer)
            .field(
                "max_applet_memory_per_peer",
                &self.max_applet_memory_per_peer,
            )
            .field("max_applet_memory_total", &self.max_applet_memory_total)
            .field("control_nice", &self.control_nice)
            .field("on_event", &self.on_event.is_some())
            .finish()
    }
}

/// Root and the user this process runs as: the default
/// [`ServeOptions::exempt_users`].
fn own_users() -> Vec<u32> {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    if me == 0 { vec![0] } else { vec![0, me] }
}

/// State shared by the accepting thread, the connections and the [`Server`].
struct Shared {
    engine: Engine,
    opts: ServeOptions,
    listener: UnixListener,
    stop: AtomicBool,
    next_conn: AtomicU64,
    conns: Mutex<Conns>,
    /// The origin of [`Activity`]'s times.
    epoch: std::time::Instant,
}

#[derive(Default)]
struct Conns {
    live: HashMap<u64, Live>,
    threads: Vec<JoinHandle<()>>,
    /// What each client process holds, by pid (`None`: a peer whose
    /// credentials could not be read, all counted as one).
    peers: HashMap<Option<u32>, PeerUse>,
    /// Connections each user holds, by uid (`None`: unknown, all counted
    /// as one user).
    users: HashMap<Option<u32>, usize>,
}

/// A live connection, as the accepting thread sees it.
struct Live {
    /// A second handle on its socket, to shut it down.
    stream: UnixStream,
    pid: Option<u32>,
    activity: Arc<Activity>,
}

/// What a connection is doing, for closing idle ones to make room
/// ([`ServeOptions::evict_idle_after`]), in one word: its state in the low
/// two bits ([`Activity::IDLE`], [`Activity::BUSY`],
/// [`Activity::EVICTED`]), [`Activity::HOLDS`] while it owns an endpoint,
/// and above them the millisecond (from [`Shared::epoch`]) since which it
/// has been idle. The connection's thread moves it from idle to busy when
/// a request has come, the accepting thread from idle to evicted, each by
/// a compare-and-swap on the whole word, so exactly one of them wins: a
/// connection is never closed while it serves a request, nor after it
/// came to own an endpoint, and an evicted connection serves nothing more.
struct Activity(AtomicU64);

impl Activity {
    const IDLE: u64 = 0;
    const BUSY: u64 = 1;
    const EVICTED: u64 = 2;
    const STATE: u64 = 3;
    const HOLDS: u64 = 4;
    const SHIFT: u32 = 3;

    fn new(now_ms: u64) -> Self {
        Activity(AtomicU64::new(now_ms << Self::SHIFT))
    }

    /// A request has come: true if the connection may serve it, false if
    /// it was evicted.
    fn begin(&self) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w & Self::STATE == Self::IDLE).then_some(Self::BUSY)
            })
            .is_ok()
    }

    /// A request was answered: idle from `now_ms`, owning endpoints or
    /// not.
    fn end(&self, now_ms: u64, holds: bool) {
        let holds = if holds { Self::HOLDS } else { 0 };
        self.0.store(
            now_ms << Self::SHIFT | holds | Self::IDLE,
            Ordering::Release,
        );
    }

    /// The word, and the millisecond it has been idle since, if it is idle
    /// owning no endpoint.
    fn idle_since(&self) -> Option<(u64, u64)> {
        let w = self.0.load(Ordering::Acquire);
        (w & (Self::STATE | Self::HOLDS) == Self::IDLE).then_some((w, w >> Self::SHIFT))
    }

    /// Evicts it if it is still as `seen` found it.
    fn evict(&self, seen: u64) -> bool {
        self.0
            .compare_exchange(seen, Self::EVICTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// What one client process holds.
#[derive(Default, Clone)]
struct PeerUse {
    connections: usize,
    /// Bytes of shared memory of its endpoints.
    memory: u64,
    /// The JIT's code its endpoints' applets run, by key: its bytes and
    /// how many of them run it ([`ServeOptions::max_code_per_peer`]).
    code: HashMap<u64, (usize, u32)>,
    /// The bytes of `code`, summed.
    code_bytes: usize,
    /// The memory its endpoints' applets hold
    /// ([`ServeOptions::max_applet_memory_per_peer`]).
    applet_memory: usize,
    /// Its reads of the engine's counters: the budget left and when it
    /// was last counted (`None`: full).
    counts: Option<Bucket>,
    /// Its time compiling filters, in seconds (`None`: full).
    compile: Option<Bucket>,
}

/// A token bucket: `tokens` at `at`, refilling at the budget's rate up to
/// a second's worth.
#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: std::time::Instant,
}

impl Bucket {
    /// `slot`'s bucket at `now`, refilled at `rate` a second (full if it
    /// had none).
    fn refilled(slot: &mut Option<Bucket>, rate: f64, now: std::time::Instant) -> &mut Bucket {
        let b = slot.get_or_insert(Bucket {
            tokens: rate,
            at: now,
        });
        b.tokens = (b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate).min(rate);
        b.at = now;
        b
    }

    /// Milliseconds until it holds more than `need`, at `rate` a second.
    fn wait_ms(&self, need: f64, rate: f64) -> u32 {
        if rate == 0.0 {
            u32::MAX
        } else {
            ((need - self.tokens) / rate * 1000.0).ceil().max(1.0) as u32
        }
    }

    /// Whether `slot` would be full by `now` (forgetting a spent bucket
    /// would let a process refill it by reconnecting).
    fn full_by(slot: &Option<Bucket>, rate: f64, now: std::time::Instant) -> bool {
        slot.is_none_or(|b| {
            b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate >= rate
        })
    }
}

impl PeerUse {
    /// Takes one engine-counter read from the budget of `per_second`, or
    /// says how long until one is allowed.
    fn take_count(&mut self, per_second: u32, now: std::time::Instant) -> Result<(), Refusal> {
        let rate = f64::from(per_second);
        let b = Bucket::refilled(&mut self.counts, rate, now);
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Ok(());
        }
        Err(Refusal::CountsBudget {
            per_second,
            retry_ms: b.wait_ms(1.0, rate),
        })
    }

    /// Whether a filter install may start under the budget of
    /// `per_second` of compiling a second: while any is left.
    fn admit_compile(
        &mut self,
        per_second: std::time::Duration,
        now: std::time::Instant,
    ) -> Result<(), Refusal> {
        let rate = per_second.as_secs_f64();
        let b = Bucket::refilled(&mut self.compile, rate, now);
        if b.tokens > 0.0 {
            return Ok(());
        }
        Err(Refusal::CompileBudget {
            ms_per_second: u32::try_from(per_second.as_millis()).unwrap_or(u32::MAX),
            retry_ms: b.wait_ms(0.0, rate),
        })
    }

    /// Charges an install's `cost` to the compile budget.
    fn charge_compile(
        &mut self,
        cost: std::time::Duration,
        per_second: std::time::Duration,
        now: std::time::Instant,
    ) {
        Bucket::refilled(&mut self.compile, per_second.as_secs_f64(), now).tokens -=
            cost.as_secs_f64();
    }

    /// Whether it holds nothing the daemon must remember: no connection,
    /// and budgets that have refilled.
    fn idle(&self, opts: &ServeOptions, now: std::time::Instant) -> bool {
        self.connections == 0
            && self.code.is_empty()
            && self.applet_memory == 0
            && Bucket::full_by(
                &self.counts,
                f64::from(opts.max_engine_counts_per_second),
                now,
            )
            && Bucket::full_by(
                &self.compile,
                opts.compile_time_per_second.as_secs_f64(),
                now,
            )
    }
}

/// Why a new connection is turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TurnedAway {
    /// Every slot is taken.
    Full { limit: usize },
    /// Its process holds its share.
    Process { held: usize },
    /// Its process holds some, and the last slots are kept for processes
    /// that hold none.
    Reserve { reserve: usize, held: usize },
    /// Its user holds its share.
    User { uid: Option<u32>, held: usize },
}

impl std::fmt::Display for TurnedAway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurnedAway::Full { limit } => write!(f, "too many connections (limit {limit})"),
            TurnedAway::Process { held } => {
                write!(
                    f,
                    "this process holds {held} connections, the limit per process"
                )
            }
            TurnedAway::Reserve { reserve, held } => write!(
                f,
                "the last {reserve} connection slots are kept for new clients; this process holds {held}"
            ),
            TurnedAway::User {
                uid: Some(uid),
                held,
            } => write!(f, "user {uid} holds {held} connections, the limit per user"),
            TurnedAway::User { uid: None, held } => write!(
                f,
                "clients of unknown user hold {held} connections, the limit per user"
            ),
        }
    }
}

impl Conns {
    /// A connection of `pid`, of user `uid`, closed.
    fn leave(&mut self, pid: Option<u32>, uid: Option<u32>, opts: &ServeOptions) {
        let now = std::time::Instant::now();
        if let Some(p) = self.peers.get_mut(&pid) {
            p.connections = p.connections.saturating_sub(1);
            if p.idle(opts, now) {
                self.peers.remove(&pid);
            }
        }
        if let Some(n) = self.users.get_mut(&uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.users.remove(&uid);
            }
        }
    }

    /// A connection of `pid`, of user `uid`, is taken in.
    fn join(&mut self, conn: u64, live: Live, uid: Option<u32>) {
        self.peers.entry(live.pid).or_default().connections += 1;
        *self.users.entry(uid).or_default() += 1;
        self.live.insert(conn, live);
    }

    /// Why a new connection of `pid`, of user `uid`, is refused while
    /// `total` connections are open, if it is.
    fn turned_away(
        &self,
        pid: Option<u32>,
        uid: Option<u32>,
        opts: &ServeOptions,
        total: usize,
    ) -> Option<TurnedAway> {
        let held = self.peers.get(&pid).map_or(0, |p| p.connections);
        let by_user = self.users.get(&uid).copied().unwrap_or(0);
        let exempt = uid.is_some_and(|u| opts.exempt_users.contains(&u));
        if total >= opts.max_connections {
            Some(TurnedAway::Full {
                limit: opts.max_connections,
            })
        } else if held >= opts.max_connections_per_peer {
            Some(TurnedAway::Process { held })
        } else if !exempt && by_user >= opts.max_connections_per_user {
            Some(TurnedAway::User { uid, held: by_user })
        } else if held > 0 && total + opts.reserve >= opts.max_connections {
            Some(TurnedAway::Reserve {
                reserve: opts.reserve,
                held,
            })
        } else {
            None
        }
    }

    /// Closes the connection that has waited longest for a request, owning
    /// no endpoint, if it has waited at least `after` at `now_ms`: its
    /// number, its process and how long it had waited. It leaves
    /// [`Conns::live`] at once (its slot is the newcomer's); its thread
    /// sees the end of its socket, or that it was evicted, and ends. Its
    /// client finds an error reply saying why before the end, which a
    /// client reads as the answer to its next request (or to the one it
    /// was sending).
    fn evict_idle(
        &mut self,
        now_ms: u64,
        after: std::time::Duration,
    ) -> Option<(u64, Option<u32>, std::time::Duration)> {
        let after = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        loop {
            let (conn, seen, since) = self
                .live
                .iter()
                .filter_map(|(&c, l)| l.activity.idle_since().map(|(w, t)| (c, w, t)))
                .filter(|&(_, _, t)| now_ms.saturating_sub(t) >= after)
                .min_by_key(|&(c, _, t)| (t, c))?;
            let live = &self.live[&conn];
            // It may have begun a request since: then look again.
            if !live.activity.evict(seen) {
                continue;
            }
            let live = self.live.remove(&conn).expect("found above");
            let idle = std::time::Duration::from_millis(now_ms.saturating_sub(since));
            let why = format!(
                "the daemon closed this connection to make room for a new client: it owned no endpoint and had been idle {:.1} s",
                idle.as_secs_f64()
            );
            // Never waits: an idle client's socket has room for a reply
            // (it has sent nothing to answer), and one that has none does
            // without. Data sent before the shutdown stays readable.
            let _ = socket2::SockRef::from(&live.stream).send_with_flags(
                &reply_frame(STATUS_ERR, why.as_bytes()),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            );
            let _ = live.stream.shutdown(std::net::Shutdown::Both);
            return Some((conn, live.pid, idle));
        }
    }
}

impl Shared {
    /// Calls the event hook. A hook that panics (a log whose output is
    /// gone, with `println!`) is caught here, so that it neither ends the
    /// thread that reported the event (a connection's, before it served
    /// a request; the accepting thread's) nor, reporting a reclaim while a
    /// connection's thread unwinds, aborts the daemon: the event is lost,
    /// the daemon goes on.
    fn event(&self, e: Event) {
        if let Some(hook) = &self.opts.on_event {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&e)));
        }
    }

    /// Milliseconds since the daemon started, for [`Activity`].
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX >> Activity::SHIFT)
    }
}

/// A connection's slot: its entry in [`Conns::live`] (the second handle
/// on its socket) and its count in its process's [`PeerUse`], given back
/// when this is dropped, at the end of the connection's thread or while
/// it unwinds. Without it a connection thread that panicked kept both
/// for good: its client got neither a reply nor an end of file, and its
/// process was refused connections once it had held
/// [`ServeOptions::max_connections_per_peer`].
struct Slot<'a> {
    shared: &'a Shared,
    conn: u64,
    pid: Option<u32>,
    uid: Option<u32>,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut c = lock(&self.shared.conns);
        // Dropping the handle closes the daemon's last descriptor of the
        // socket (the session's went first): the client sees the end. (An
        // evicted connection's went when it was evicted.)
        c.live.remove(&self.conn);
        c.leave(self.pid, self.uid, &self.shared.opts);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running daemon. [`Server::shutdown`] or dropping it stops accepting,
/// closes every connection (reclaiming their endpoints) and removes the
/// socket file.
pub struct Server {
    path: PathBuf,
    /// Device and inode of the socket file this server made, so that it
    /// removes only its own.
    file: (u64, u64),
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Serves `engine` on a Unix socket at `path` with the default
/// [`ServeOptions`]. A stale socket file at `path` (connections to it
/// refused: no one listening) is replaced; a live one, or a file that is
/// not a socket, is an error (`AddrInUse`, `AlreadyExists`), also when
/// another daemon takes the path while this one starts. `path` may be up
/// to 107 bytes long (`sun_path`); a longer one is `InvalidInput`.
///
/// The engine should have threads of its own ([`Engine::start`]): the
/// endpoints of applications in other processes do not drive it.
///
/// ```
/// use unet::transport::LoopNet;
/// let net = LoopNet::new();
/// let engine = unet::Engine::new(Box::new(net.attach("10.0.0.1:7000".parse()?)?));
/// engine.start(1);
/// let path = std::env::temp_dir().join(format!("unet-doc-serve-{}.sock", std::process::id()));
/// let server = unet::daemon::serve(engine.clone(), &path)?;
/// let client = unet::client::Client::connect(&path)?;
/// assert_eq!(client.local(), engine.local());
/// server.shutdown();
/// assert!(!path.exists());
/// engine.stop();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn serve(engine: Engine, path: &Path) -> io::Result<Server> {
    serve_with(engine, path, ServeOptions::default())
}

/// [`serve`] with options.
pub fn serve_with(engine: Engine, path: &Path, opts: ServeOptions) -> io::Result<Server> {
    let (listener, file) = bind(path, opts.mode)?;
    let shared = Arc::new(Shared {
        engine,
        opts,
        listener,
        stop: AtomicBool::new(false),
        next_conn: AtomicU64::new(1),
        conns: Mutex::new(Conns::default()),
        epoch: std::time::Instant::now(),
    });
    let s = shared.clone();
    let accept = std::thread::Builder::new()
        .name("unet-daemon-accept".into())
        .spawn(move || accept_loop(&s));
    let accept = match accept {
        Ok(h) => h,
        Err(e) => {
            remove_if_ours(path, file);
            return Err(e);
        }
    };
    Ok(Server {
        path: path.to_path_buf(),
        file,
        shared,
        accept: Some(accept),
    })
}

fn annotate(e: io::Error, what: String) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The longest path a Unix socket is bound at: `sun_path`'s bytes less its
/// terminating NUL (107 on Linux).
const MAX_SOCKET_PATH: usize = size_of::<libc::sockaddr_un>() - size_of::<libc::sa_family_t>() - 1;

/// How many times [`bind`] looks again at a path that changes under it
/// (each time something else came and went) before it gives up.
const BIND_TRIES: usize = 16;

/// How long [`DirLock::take`] waits for another process's lock.
const DIR_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What is at a socket path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AtPath {
    Nothing,
    /// A socket something accepts connections on.
    Live,
    /// A socket that refuses connections (`ECONNREFUSED`): what a daemon
    /// that died without removing it leaves.
    Stale,
    /// A file of another kind, or a symbolic link.
    NotSocket,
}

/// What is at `path` now. A socket whose connection fails for another
/// reason than a refusal (another user's, `EACCES`) is an error: not
/// known to be stale, it is not replaced.
fn at_path(path: &Path) -> io::Result<AtPath> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(AtPath::Nothing),
        Err(e) => Err(annotate(e, path.display().to_string())),
        Ok(m) if !m.file_type().is_socket() => Ok(AtPath::NotSocket),
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => Ok(AtPath::Live),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(AtPath::Stale),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(AtPath::Nothing),
            Err(e) => Err(annotate(
                e,
                format!(
                    "{}: cannot tell whether an engine serves this socket",
                    path.display()
                ),
            )),
        },
    }
}

/// The error for a live socket at `path`.
fn in_use(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "{}: an engine is already serving this socket",
            path.display()
        ),
    )
}

/// The error for a file at `path` that is not a socket.
fn not_socket(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("{} exists and is not a socket", path.display()),
    )
}

/// Acts on what [`at_path`] found at `path` while the daemon has the
/// directory's lock ([`DirLock`]): a live socket or another file is an
/// error, a stale socket is removed.
fn clear_stale(path: &Path) -> io::Result<()> {
    match at_path(path)? {
        AtPath::Live => Err(in_use(path)),
        AtPath::NotSocket => Err(not_socket(path)),
        AtPath::Stale => match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(annotate(
                e,
                format!("removing stale socket {}", path.display()),
            )),
            _ => Ok(()),
        },
        AtPath::Nothing => Ok(()),
    }
}

/// An exclusive `flock(2)` on the directory of a socket path, held while
/// a daemon decides a socket there is stale and replaces it, and while it
/// binds in place ([`bind`]), so that two daemons never both take one
/// stale socket for theirs, nor one take for stale the socket another has
/// bound and not yet listened on. Released when dropped.
struct DirLock {
    /// The open directory: closing it releases the lock.
    _dir: std::fs::File,
}

impl DirLock {
    fn take(path: &Path) -> io::Result<DirLock> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let what = || format!("{}: locking its directory", path.display());
        let f = std::fs::File::open(dir).map_err(|e| annotate(e, what()))?;
        let deadline = std::time::Instant::now() + DIR_LOCK_WAIT;
        loop {
            // SAFETY: flock(2) on the descriptor `f` owns, open for the
            // call; it touches no memory of ours.
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(DirLock { _dir: f });
            }
            let e = io::Error::last_os_error();
            let busy = matches!(e.raw_os_error(), Some(libc::EWOULDBLOCK | libc::EINTR));
            if !busy || std::time::Instant::now() >= deadline {
                return Err(annotate(e, what()));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// Temporary names in this process, so that its threads never share one.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// A short temporary name beside `path` (same directory, so same file
/// system, for `link(2)`): `.unet-<pid>-<n>`.
fn temp_path(path: &Path) -> PathBuf {
    let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".unet-{}-{n}", std::process::id()))
}

/// The device and inode of the file at `path`.
fn file_id(path: &Path) -> io::Result<(u64, u64)> {
    std::fs::symlink_metadata(path).map(|m| (m.dev(), m.ino()))
}

/// Removes `path` if it is still the socket file `file`.
fn remove_if_ours(path: &Path, file: (u64, u64)) {
    if file_id(path).is_ok_and(|f| f == file) {
        let _ = std::fs::remove_file(path);
    }
}

/// Makes the listening socket at `path` with mode `mode`, never in place
/// of a live socket; its listener and the socket file's device and inode.
///
/// The socket is bound under a short temporary name in `path`'s directory,
/// given its mode, and then linked to `path` (`link(2)`, which fails if
/// anything is there), so that it appears under its name listening and
/// with its mode, and so that of two daemons started at once exactly one
/// gets the name: the other's link fails, and it finds the first's socket
/// live. Something at `path` is looked at under the directory's lock
/// ([`DirLock`]): a stale socket is removed and the link tried again, a
/// live one or a file of another kind is an error. (Checking, then
/// renaming the temporary name over `path`, as the daemon once did, let a
/// daemon whose rename came late replace another's live socket.)
///
/// A path so near `sun_path`'s limit that the temporary name would not fit
/// in its directory, or on a file system without hard links, is bound in
/// place, under the directory's lock; there too the file is made with no
/// more than `mode`'s bits ([`listen_at`]).
/// Errors name `path`, never the temporary name.
fn bind(path: &Path, mode: u32) -> io::Result<(UnixListener, (u64, u64))> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: a Unix socket's path holds at most {MAX_SOCKET_PATH} bytes, this one has {len}",
                path.display()
            ),
        ));
    }
    if path.file_name().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: no file name", path.display()),
        ));
    }
    // What is there already is refused before anything is made (it is
    // looked at again, under the lock, if the link finds it).
    match at_path(path)? {
        AtPath::Live => return Err(in_use(path)),
        AtPath::NotSocket => return Err(not_socket(path)),
        AtPath::Stale | AtPath::Nothing => {}
    }
    let mut tmp = temp_path(path);
    if tmp.as_os_str().len() > MAX_SOCKET_PATH {
        return bind_in_place(path, mode);
    }
    let binding = |e| annotate(e, format!("binding {}", path.display()));
    let mut bound = listen_at(&tmp, mode);
    // A name left by a process of the same pid that died: take another.
    for _ in 1..BIND_TRIES {
        if !bound
            .as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::AddrInUse)
        {
            break;
        }
        tmp = temp_path(path);
        bound = listen_at(&tmp, mode);
    }
    let listener = bound.map_err(binding)?;
    let made = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .and_then(|()| file_id(&tmp))
        .map_err(|e| annotate(e, format!("creating socket {}", path.display())))
        .and_then(|file| publish(&tmp, path).map(|linked| linked.then_some(file)));
    let _ = std::fs::remove_file(&tmp);
    match made {
        Ok(Some(file)) => Ok((listener, file)),
        // A file system without hard links: in place, under the lock.
        Ok(None) => {
            drop(listener);
            bind_in_place(path, mode)
        }
        Err(e) => Err(e),
    }
}

/// A socket listening at `path`, given `mode` before it is bound, so that
/// its file is made with that mode less the umask's bits and never has one
/// wider ([`bind`] then gives it `mode` exactly). Bound by `bind(2)` with
/// the socket's default mode, 0777 less the umask, the file let any user
/// connect until it was changed: in place, under its own name.
fn listen_at(path: &Path, mode: u32) -> io::Result<UnixListener> {
    let socket = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)?;
    // SAFETY: fchmod(2) on the descriptor `socket` owns, open for the
    // call; it touches no memory of ours.
    if unsafe { libc::fchmod(socket.as_raw_fd(), mode & 0o777) } != 0 {
        return Err(io::Error::last_os_error());
    }
    socket.bind(&socket2::SockAddr::unix(path)?)?;
    socket.listen(libc::SOMAXCONN)?;
    Ok(UnixListener::from(std::os::fd::OwnedFd::from(socket)))
}

/// Links the listening socket at `tmp` to `path` ([`bind`]): true once
/// linked, false if the file system has no hard links (`EPERM`,
/// `EOPNOTSUPP`), where the caller binds in place instead.
fn publish(tmp: &Path, path: &Path) -> io::Result<bool> {
    let mut lock = None;
    for _ in 0..BIND_TRIES {
        match std::fs::hard_link(tmp, path) {
            Ok(()) => return Ok(true),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EOPNOTSUPP)) => {
                return Ok(false);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(annotate(e, format!("creating socket {}", path.display()))),
        }
        if lock.is_none() {
            lock = Some(DirLock::take(path)?);
        }
        clear_stale(path)?;
    }
    Err(changing(path))
}

/// Binds at `path` itself, for a path whose temporary name would not fit
/// ([`bind`]).
fn bind_in_place(path: &Path, mode: u32) -> io::Result<(UnixListener, (u64, u64))> {
    let _lock = DirLock::take(path)?;
    for _ in 0..BIND_TRIES {
        clear_stale(path)?;
        let listener = match listen_at(path, mode) {
            Ok(l) => l,
            // Something came in between: look again.
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(annotate(e, format!("binding {}", path.display()))),
        };
        let creating = |e| annotate(e, format!("creating socket {}", path.display()));
        let file = file_id(path).map_err(creating)?;
        if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
            remove_if_ours(path, file);
            return Err(creating(e));
        }
        return Ok((listener, file));
    }
    Err(changing(path))
}

fn changing(path: &Path) -> io::Error {
    io::Error::other(format!(
        "{}: another process keeps creating and removing files at this path",
        path.display()
    ))
}

impl Server {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        lock(&self.shared.conns).live.len()
    }

    /// Stops the daemon (see [`Server`]).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stop.store(true, Ordering::Release);
        // SAFETY: shutdown(2) on the listener's descriptor, which the
        // shared state keeps open; it wakes the accepting thread.
        unsafe { libc::shutdown(self.shared.listener.as_raw_fd(), libc::SHUT_RDWR) };
        let _ = accept.join();
        let threads = {
            let mut c = lock(&self.shared.conns);
            for l in c.live.values() {
                let _ = l.stream.shutdown(std::net::Shutdown::Both);
            }
            std::mem::take(&mut c.threads)
        };
        for t in threads {
            let _ = t.join();
        }
        remove_if_ours(&self.path, self.file);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(shared: &Arc<Shared>) {
    loop {
        let accepted = shared.listener.accept();
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                // EMFILE and the like: back off rather than spin.
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        let (pid, uid) = peer_cred(&stream);
        let mut conns = lock(&shared.conns);
        conns.threads.retain(|t| !t.is_finished());
        let now = std::time::Instant::now();
        conns.peers.retain(|_, p| !p.idle(&shared.opts, now));
        let now_ms = shared.now_ms();
        let total = conns.live.len();
        let mut why = conns.turned_away(pid, uid, &shared.opts, total);
        let mut evicted = None;
        // Every slot taken, and one less would do: close the connection
        // idle longest that owns nothing, if one has waited long enough.
        if matches!(why, Some(TurnedAway::Full { .. }))
            && conns
                .turned_away(pid, uid, &shared.opts, total.saturating_sub(1))
                .is_none()
        {
            evicted = conns.evict_idle(now_ms, shared.opts.evict_idle_after);
            if evicted.is_some() {
                why = None;
            }
        }
        if let Some(why) = why {
            drop(conns);
            let reason = why.to_string();
            // A refused client that does not read must not hold this thread.
            let _ = stream.set_nonblocking(true);
            let _ = (&stream).write_all(&reply_frame(STATUS_ERR, reason.as_bytes()));
            shared.event(Event::Refused { pid, uid, reason });
            continue;
        }
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        let conn = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(now_ms));
        let live = Live {
            stream: handle,
            pid,
            activity: activity.clone(),
        };
        conns.join(conn, live, uid);
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("unet-daemon-conn-{conn}"))
            .spawn(move || {
                // First, so that whatever happens next, the slot is given
                // back; then the session, whose endpoints are reclaimed
                // when it is dropped, before the slot.
                let _slot = Slot {
                    shared: &s,
                    conn,
                    pid,
                    uid,
                };
                s.event(Event::Connected { conn, pid, uid });
                Session::new(&s, conn, pid, activity).run(stream);
            });
        match spawned {
            Ok(t) => conns.threads.push(t),
            Err(_) => {
                // The stream went with the closure; drop the second handle.
                conns.live.remove(&conn);
                conns.leave(pid, uid, &shared.opts);
            }
        }
        drop(conns);
        if let Some((conn, pid, idle)) = evicted {
            shared.event(Event::Evicted { conn, pid, idle });
        }
    }
}

/// The process and user ids of the peer of `s` (`SO_PEERCRED`).
fn peer_cred(s: &UnixStream) -> (Option<u32>, Option<u32>) {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a
    // `ucred` of exactly that size, and sets `len` to what it wrote.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if r == 0 && len as usize == size_of::<libc::ucred>() {
        (Some(cred.pid as u32), Some(cred.uid))
    } else {
        (None, None)
    }
}

/// Sends `bytes` with `fd` attached (`SCM_RIGHTS` on the first byte).
pub(crate) fn send_with_fd(s: &UnixStream, bytes: &[u8], fd: BorrowedFd<'_>) -> io::Result<()> {
    // A control buffer aligned for `cmsghdr` with room for one descriptor.
    let mut control = [0u64; 8];
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(size_of::<c_int>() as u32) } as usize;
    assert!(space <= size_of_val(&control));
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    // SAFETY: `msghdr` is a C struct for which all zeros is a valid value
    // (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg_control` points at `space` writable bytes, at least one
    // `cmsghdr` plus one `c_int`, aligned for `cmsghdr` (`u64` alignment);
    // CMSG_FIRSTHDR therefore returns a non-null pointer into it, and
    // CMSG_DATA points `CMSG_LEN(0)` bytes further, with room for the fd.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&raw const msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<c_int>() as u32) as _;
        libc::CMSG_DATA(c)
            .cast::<c_int>()
            .write_unaligned(fd.as_raw_fd());
    }
    let sent = loop {
        // SAFETY: `msg` describes `bytes` (readable for the call) and the
        // control buffer above; the kernel only reads them.
        let n = unsafe { libc::sendmsg(s.as_raw_fd(), &raw const msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    (&*s).write_all(&bytes[sent..])
}

/// Reads one frame. `Ok(None)`: the peer closed the connection between
/// frames. The wait for a frame's first byte is not timed; once it has
/// come, the rest must arrive within `timeout` (`TimedOut` otherwise).
fn read_frame(
    s: &mut UnixStream,
    timeout: std::time::Duration,
) -> io::Result<Option<Result<Vec<u8>, ProtocolError>>> {
    s.set_read_timeout(None)?;
    let mut len = [0u8; 4];
    let mut deadline = None;
    let mut got = 0;
    while got < 4 {
        match read_before(s, &mut len[got..], deadline) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        deadline.get_or_insert_with(|| std::time::Instant::now() + timeout);
    }
    let len = u32::from_le_bytes(len);
    if len as usize > MAX_FRAME {
        return Ok(Some(Err(ProtocolError::TooLarge {
            len: u64::from(len),
            max: MAX_FRAME,
        })));
    }
    let mut body = vec![0u8; len as usize];
    let mut got = 0;
    while got < body.len() {
        match read_before(s, &mut body[got..], deadline) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(Ok(body)))
}

/// One read of `s` that gives up at `deadline` (`None`: waits as long as
/// it takes) with `TimedOut`.
fn read_before(
    s: &mut UnixStream,
    buf: &mut [u8],
    deadline: Option<std::time::Instant>,
) -> io::Result<usize> {
    if let Some(d) = deadline {
        let left = d.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        s.set_read_timeout(Some(left))?;
    }
    match s.read(buf) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Err(io::ErrorKind::TimedOut.into()),
        r => r,
    }
}

/// One connection: the endpoints it owns.
struct Session<'a> {
    shared: &'a Shared,
    conn: u64,
    /// The client's process id, by which its budgets are counted.
    pid: Option<u32>,
    owned: BTreeSet<EndpointId>,
    /// Bytes of shared memory of the endpoints it owns.
    memory: u64,
    /// What each owned endpoint's applet holds of its process's budgets.
    applets: HashMap<EndpointId, Held>,
    /// Its compiling, below the engine's threads in priority.
    compiler: Compiler,
    /// Whether it is serving a request, idle, or evicted.
    activity: Arc<Activity>,
}

/// A connection's compiling (its filters and applets, up to about a
/// second each within dpf's and jive's limits) on a thread of its own at
/// [`ServeOptions::control_nice`], started at the first compile: below the
/// engine's threads, so that compiles on many connections at once take
/// only what those threads leave. The connection's own thread stays at
/// the daemon's priority for the rest, some of it under locks an engine
/// thread takes too (an endpoint's side locks while an applet is swapped
/// and constructed): at the lowest priority, a thread preempted with one
/// held kept the engine thread waiting on it for as long as the scheduler
/// left it off the processor, hundreds of milliseconds beside busy
/// processes.
struct Compiler {
    nice: i32,
    name: String,
    jobs: Option<std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Compiler {
    fn new(nice: i32, conn: u64) -> Self {
        Compiler {
            nice,
            name: format!("unet-daemon-compile-{conn}"),
            jobs: None,
            thread: None,
        }
    }

    /// Runs `job` on the compiling thread and returns what it gives, with
    /// the CPU time it took there; an error if the thread cannot be
    /// started or the job panicked.
    fn run<T: Send + 'static>(
        &mut self,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<(T, std::time::Duration), String> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let job: Box<dyn FnOnce() + Send> = Box::new(move || {
            let start = crate::engine::thread_cpu_time();
            let out = job();
            let _ = tx.send((out, crate::engine::thread_cpu_time().saturating_sub(start)));
        });
        let job = match &self.jobs {
            Some(jobs) => jobs.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = job {
            // Not started yet, or ended: a new one.
            self.stop();
            let (jobs, queue) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
            let nice = self.nice;
            let thread = std::thread::Builder::new()
                .name(self.name.clone())
                .spawn(move || {
                    // A system that refuses leaves the thread as it was.
                    let _ = crate::affinity::lower_priority(nice);
                    for job in queue {
                        job();
                        // As the connection's thread after a request
                        // (`jive::jit::park`).
                        jive::jit::park();
                    }
                })
                .map_err(|e| format!("cannot start the compiling thread: {e}"))?;
            jobs.send(job)
                .map_err(|_| "the compiling thread ended".to_string())?;
            (self.jobs, self.thread) = (Some(jobs), Some(thread));
        }
        rx.recv().map_err(|_| {
            // The job panicked: the thread is ending; the next compile
            // starts another.
            self.stop();
            "compiling failed: the compiling thread ended".to_string()
        })
    }

    fn stop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Compiler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What one endpoint's applet holds of its process's budgets
/// ([`Session::hold_applet`]).
#[derive(Debug, Clone, Copy)]
struct Held {
    /// The key of the JIT's code it runs, if it runs on the JIT.
    code: Option<u64>,
    /// Its memory.
    memory: usize,
}

/// A successful reply: its payload, and the endpoint whose `memfd` goes
/// with it.
type Reply = (Vec<u8>, Option<EndpointId>);

/// A failed request: an error message, or a typed refusal.
#[derive(Debug)]
enum Failure {
    Message(String),
    Refused(Refusal),
}

impl From<String> for Failure {
    fn from(s: String) -> Failure {
        Failure::Message(s)
    }
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Failure {
        Failure::Refused(r)
    }
}

impl<'a> Session<'a> {
    fn new(shared: &'a Shared, conn: u64, pid: Option<u32>, activity: Arc<Activity>) -> Self {
        Session {
            shared,
            conn,
            pid,
            owned: BTreeSet::new(),
            memory: 0,
            applets: HashMap::new(),
            compiler: Compiler::new(shared.opts.control_nice, conn),
            activity,
        }
    }
}

/// The end of a connection, however it ends (its thread returning or
/// unwinding): every endpoint it still owns is reclaimed.
impl Drop for Session<'_> {
    fn drop(&mut self) {
        let owned = std::mem::take(&mut self.owned);
        for &id in &owned {
            self.remove(id, true);
        }
        self.shared.event(Event::Disconnected {
            conn: self.conn,
            reclaimed: owned.len(),
        });
    }
}

impl Session<'_> {
    /// Serves the connection until it ends; dropping the session then
    /// reclaims its endpoints.
    fn run(mut self, mut stream: UnixStream) {
        let timeout = self.shared.opts.request_timeout;
        // A client that does not take its replies is cut off like one that
        // does not finish its requests.
        let _ = stream.set_write_timeout(Some(timeout));
        // An end of file, a read error or a timeout ends the connection.
        while let Ok(Some(frame)) = read_frame(&mut stream, timeout) {
            // Closed to make room for a new client while idle: the request
            // that came meanwhile is not served.
            if !self.activity.begin() {
                break;
            }
            let body = match frame {
                Ok(b) => b,
                Err(e) => {
                    // The rest of an oversized frame cannot be skipped
                    // safely: say why, and close.
                    let _ = stream.write_all(&reply_frame(STATUS_ERR, e.to_string().as_bytes()));
                    break;
                }
            };
            let handled = self.handle(&body);
            // A request may have run applet code on the JIT (an applet's
            // constructor): flag this thread out of the shared code cache
            // before it waits for the client's next request, so that a
            // client that stays connected and idle never holds up the
            // freeing of code retired meanwhile (every other client's
            // removed applets; `jive::jit::park`).
            jive::jit::park();
            let sent = match handled {
                Ok((payload, None)) => stream.write_all(&reply_frame(STATUS_OK, &payload)),
                Ok((payload, Some(id))) => self.send_endpoint(&stream, id, &payload),
                Err(Failure::Message(msg)) => {
                    stream.write_all(&reply_frame(STATUS_ERR, msg.as_bytes()))
                }
                Err(Failure::Refused(r)) => {
                    stream.write_all(&reply_frame(STATUS_REFUSED, &r.encode()))
                }
            };
            if sent.is_err() {
                break;
            }
            self.activity
                .end(self.shared.now_ms(), !self.owned.is_empty());
        }
    }

    /// Sends the reply to `CreateEndpoint` with the endpoint's `memfd`; if
    /// that fails the endpoint is removed (the client never got it).
    fn send_endpoint(
        &mut self,
        stream: &UnixStream,
        id: EndpointId,
        payload: &[u8],
    ) -> io::Result<()> {
        let Some(port) = self.shared.engine.port(id) else {
            let mut stream = stream;
            return stream.write_all(&reply_frame(
                STATUS_ERR,
                format!("endpoint {id} vanished").as_bytes(),
            ));
        };
        let r = send_with_fd(
            stream,
            &reply_frame(STATUS_OK, payload),
            port.segment().fd().as_fd(),
        );
        if r.is_err() {
            self.owned.remove(&id);
            self.remove(id, true);
        }
        r
    }

    fn remove(&mut self, id: EndpointId, reclaimed: bool) {
        let Some(port) = self.shared.engine.port(id) else {
            return;
        };
        let size = port.layout().total as u64;
        drop(port);
        // The counters as the removal leaves them: read before it, they
        // would miss what its closing of the inbox counts.
        if let Ok(counts) = self.shared.engine.remove_port(id) {
            self.release(size);
            if let Some(held) = self.applets.remove(&id) {
                self.release_applet(held);
            }
            self.shared.event(Event::EndpointClosed {
                conn: self.conn,
                id,
                counts,
                reclaimed,
            });
        }
    }

    /// Charges `size` bytes of shared memory to this connection and its
    /// process, or says which budget it would exceed.
    fn charge(&mut self, size: u64) -> Result<(), String> {
        let o = &self.shared.opts;
        if self.memory + size > o.max_memory_per_connection {
            return Err(format!(
                "an endpoint of {size} bytes would bring this connection's shared memory to {} bytes, over its budget of {}",
                self.memory + size,
                o.max_memory_per_connection
            ));
        }
        let mut conns = lock(&self.shared.conns);
        let all = conns.peers.values().map(|p| p.memory).sum::<u64>() + size;
        let peer = conns.peers.entry(self.pid).or_default();
        if peer.memory + size > o.max_memory_per_peer {
            return Err(format!(
                "an endpoint of {size} bytes would bring this process's shared memory to {} bytes, over its budget of {}",
                peer.memory + size,
                o.max_memory_per_peer
            ));
        }
        if all > o.max_memory_total {
            return Err(format!(
                "an endpoint of {size} bytes would bring the shared memory of all the daemon's clients to {all} bytes, over its budget of {}",
                o.max_memory_total
            ));
        }
        peer.memory += size;
        self.memory += size;
        Ok(())
    }

    /// Gives back `size` bytes charged by [`Session::charge`].
    fn release(&mut self, size: u64) {
        self.memory = self.memory.saturating_sub(size);
        if let Some(p) = lock(&self.shared.conns).peers.get_mut(&self.pid) {
            p.memory = p.memory.saturating_sub(size);
        }
    }

    fn mine(&self, id: EndpointId) -> Result<(), Refusal> {
        if self.owned.contains(&id) {
            Ok(())
        } else {
            Err(Refusal::NotYours { id })
        }
    }

    /// Counts a loaded applet against this process's budgets: its memory
    /// ([`ServeOptions::max_applet_memory_per_peer`]) and its code's share
    /// of the JIT's cache ([`ServeOptions::max_code_per_peer`]; code the
    /// process already runs is free). Past either nothing is counted.
    fn hold_applet(&self, applet: &jive::Unconstructed) -> Result<Held, EngineError> {
        let o = &self.shared.opts;
        let memory = applet.memory_bytes();
        let code = applet.code();
        let mut conns = lock(&self.shared.conns);
        let all = (conns.peers.values()).fold(memory, |sum, p| sum.saturating_add(p.applet_memory));
        let peer = conns.peers.entry(self.pid).or_default();
        let total = peer.applet_memory.saturating_add(memory);
        if total > o.max_applet_memory_per_peer {
            return Err(EngineError::AppletMemoryBudget {
                bytes: memory,
                total,
                limit: o.max_applet_memory_per_peer,
            });
        }
        if all > o.max_applet_memory_total {
            return Err(EngineError::AppletMemoryTotal {
                bytes: memory,
                total: all,
                limit: o.max_applet_memory_total,
            });
        }
        if let Some(code) = code.filter(|c| !peer.code.contains_key(&c.key)) {
            let total = peer.code_bytes + code.bytes;
            if total > o.max_code_per_peer {
                return Err(EngineError::CodeBudget {
                    bytes: code.bytes,
                    total,
                    limit: o.max_code_per_peer,
                });
            }
            peer.code_bytes = total;
            peer.code.insert(code.key, (code.bytes, 0));
        }
        if let Some((_, n)) = code.and_then(|c| peer.code.get_mut(&c.key)) {
            *n += 1;
        }
        peer.applet_memory = total;
        Ok(Held {
            code: code.map(|c| c.key),
            memory,
        })
    }

    /// Gives back what [`Session::hold_applet`] counted.
    fn release_applet(&self, held: Held) {
        let mut conns = lock(&self.shared.conns);
        let Some(peer) = conns.peers.get_mut(&self.pid) else {
            return;
        };
        peer.applet_memory = peer.applet_memory.saturating_sub(held.memory);
        if let Some(key) = held.code
            && let Some((bytes, n)) = peer.code.get_mut(&key)
        {
            *n -= 1;
            if *n == 0 {
                peer.code_bytes -= *bytes;
                peer.code.remove(&key);
            }
        }
    }

    /// Verifies and compiles an applet for endpoint `id` (`None`: one
    /// being created) on the connection's compiling thread ([`Compiler`]):
    /// the applet and the CPU time it took, for [`Session::load_counted`]
    /// to charge with the rest of the load. If it fails, that time is
    /// charged here.
    fn compile_applet(
        &mut self,
        id: Option<EndpointId>,
        bytes: &[u8],
    ) -> Result<(jive::Unconstructed, std::time::Duration), Failure> {
        let (engine, bytes) = (self.shared.engine.clone(), bytes.to_vec());
        let (compiled, cpu) = self
            .compiler
            .run(move || engine.compile_applet(id, &bytes))?;
        match compiled {
            Ok(applet) => Ok((applet, cpu)),
            Err(e) => {
                self.charge_compile(cpu);
                Err(e.to_string().into())
            }
        }
    }

    /// Runs `load`, an engine call that loads an applet and asks the
    /// admission it is given: the applet is counted against this
    /// process's budgets ([`Session::hold_applet`]), and with `compiled`
    /// (the compile's CPU time, [`Session::compile_applet`]) the call's
    /// thread CPU time is charged to its compile budget with it. What the
    /// call gives, and what the applet holds (`None`: no applet loaded);
    /// if it fails, nothing stays counted.
    fn load_counted<T>(
        &self,
        compiled: Option<std::time::Duration>,
        load: impl FnOnce(
            &mut dyn FnMut(&jive::Unconstructed) -> Result<(), EngineError>,
        ) -> Result<T, EngineError>,
    ) -> Result<(T, Option<Held>), EngineError> {
        let start = crate::engine::thread_cpu_time();
        let mut held = None;
        let loaded = load(&mut |a| {
            held = Some(self.hold_applet(a)?);
            Ok(())
        });
        if let Some(cpu) = compiled {
            self.charge_compile(cpu + crate::engine::thread_cpu_time().saturating_sub(start));
        }
        match loaded {
            Ok(t) => Ok((t, held)),
            Err(e) => {
                if let Some(h) = held {
                    self.release_applet(h);
                }
                Err(e)
            }
        }
    }

    /// Records that endpoint `id` now runs the applet `held` counted
    /// (`None`: none), giving back what it ran before.
    fn runs_applet(&mut self, id: EndpointId, held: Option<Held>) {
        let before = match held {
            Some(h) => self.applets.insert(id, h),
            None => self.applets.remove(&id),
        };
        if let Some(h) = before {
            self.release_applet(h);
        }
    }

    /// Takes one engine-counter read from this process's budget.
    fn take_count(&self) -> Result<(), Refusal> {
        let mut conns = lock(&self.shared.conns);
        conns.peers.entry(self.pid).or_default().take_count(
            self.shared.opts.max_engine_counts_per_second,
            std::time::Instant::now(),
        )
    }

    /// Whether this process may start a filter install or an applet load.
    fn admit_compile(&self) -> Result<(), Refusal> {
        let mut conns = lock(&self.shared.conns);
        conns.peers.entry(self.pid).or_default().admit_compile(
            self.shared.opts.compile_time_per_second,
            std::time::Instant::now(),
        )
    }

    /// Charges a filter install's or an applet load's CPU time to this
    /// process's budget.
    fn charge_compile(&self, cost: std::time::Duration) {
        let mut conns = lock(&self.shared.conns);
        conns.peers.entry(self.pid).or_default().charge_compile(
            cost,
            self.shared.opts.compile_time_per_second,
            std::time::Instant::now(),
        );
    }

    fn handle(&mut self, body: &[u8]) -> Result<Reply, Failure> {
        let req = Request::decode(body).map_err(|e| e.to_string())?;
        let engine = &self.shared.engine;
        let err = |e: EngineError| e.to_string();
        Ok(match req {
            Request::Info => {
                let local = engine.local();
                let mut v = PROTOCOL_VERSION.to_le_bytes().to_vec();
                v.extend_from_slice(&local.ip.octets());
                v.extend_from_slice(&local.port.to_le_bytes());
                (v, None)
            }
            Request::Create { config, applet } => {
                if self.owned.len() >= self.shared.opts.max_endpoints {
                    return Err(format!(
                        "this connection holds {} endpoints, the limit",
                        self.owned.len()
                    )
                    .into());
                }
                let size = crate::layout::Layout::new(config)
                    .map_err(|e| err(e.into()))?
                    .total as u64;
                // An applet given here is loaded as `SetApplet` loads
                // one: admitted and charged to the same budget.
                if applet.is_some() {
                    self.admit_compile()?;
                }
                self.charge(size)?;
                let compiled = match applet.map(|a| self.compile_applet(None, a)).transpose() {
                    Ok(compiled) => compiled,
                    Err(e) => {
                        self.release(size);
                        return Err(e);
                    }
                };
                let cpu = compiled.as_ref().map(|c| c.1);
                let created = self.load_counted(cpu, |admit| {
                    engine.create_port_compiled(config, compiled.map(|c| c.0), admit)
                });
                let (port, held) = match created {
                    Ok(created) => created,
                    Err(e) => {
                        self.release(size);
                        return Err(err(e).into());
                    }
                };
                let id = port.id();
                self.owned.insert(id);
                self.runs_applet(id, held);
                self.shared.event(Event::EndpointCreated {
                    conn: self.conn,
                    id,
                });
                (id.to_le_bytes().to_vec(), Some(id))
            }
            Request::OpenChannel {
                id,
                remote,
                remote_ep,
                checksum,
            } => {
                self.mine(id)?;
                let tag = engine
                    .open_channel(id, remote, remote_ep, ChannelOptions { checksum })
                    .map_err(err)?;
                (tag.to_le_bytes().to_vec(), None)
            }
            Request::InstallFilter {
                id,
                chan,
                priority,
                text,
            } => {
                self.mine(id)?;
                self.admit_compile()?;
                // Parsed and compiled on the compiling thread, installed
                // (the table merged) here; both charged.
                let text = text.to_string();
                let (prepared, cpu) = self.compiler.run(move || {
                    confine_filter(&text, id).and_then(|confined| {
                        dpf::Table::prepare(&confined).map_err(|e| err(e.into()))
                    })
                })?;
                let start = crate::engine::thread_cpu_time();
                let fid = prepared.and_then(|filter| {
                    engine
                        .install_prepared_filter(id, chan, filter, priority)
                        .map_err(err)
                });
                self.charge_compile(cpu + crate::engine::thread_cpu_time().saturating_sub(start));
                (fid?.0.to_le_bytes().to_vec(), None)
            }
            Request::RemoveFilter { id, filter } => {
                self.mine(id)?;
                engine
                    .remove_filter(id, dpf::FilterId(filter))
                    .map_err(err)?;
                (Vec::new(), None)
            }
            Request::SetApplet { id, applet } => {
                self.mine(id)?;
                // Verifying and compiling an applet takes CPU as a
                // filter does (up to about 0.4 s within jive's limits), on
                // the compiling thread, and its constructor some on this
                // one: the same budget. Removing one is free.
                if applet.is_some() {
                    self.admit_compile()?;
                }
                let compiled = applet
                    .map(|a| self.compile_applet(Some(id), a))
                    .transpose()?;
                let cpu = compiled.as_ref().map(|c| c.1);
                let ((), held) = self
                    .load_counted(cpu, |admit| {
                        engine.set_applet_compiled(id, compiled.map(|c| c.0), admit)
                    })
                    .map_err(err)?;
                self.runs_applet(id, held);
                (Vec::new(), None)
            }
            Request::Counts { id } => {
                self.mine(id)?;
                let port = engine.port(id).ok_or_else(|| format!("no endpoint {id}"))?;
                (counts_to_bytes(&port.counts()), None)
            }
            Request::Close { id } => {
                self.mine(id)?;
                self.owned.remove(&id);
                self.remove(id, false);
                (Vec::new(), None)
            }
            Request::ClosedChannels { id } => {
                self.mine(id)?;
                let tags = engine.closed_channels(id).map_err(err)?;
                (tags.iter().flat_map(|t| t.to_le_bytes()).collect(), None)
            }
            Request::EngineCounts { ids } => {
                // Every id is checked before anything is read or charged.
                for &id in &ids {
                    self.mine(id)?;
                }
                self.take_count()?;
                let mut v = engine_counts_to_bytes(&engine.counts());
                for &id in &ids {
                    let port = engine.port(id).ok_or_else(|| format!("no endpoint {id}"))?;
                    v.extend_from_slice(&counts_to_bytes(&port.counts()));
                }
                (v, None)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Config;
    use proptest::prelude::*;

    fn body(frame: &[u8]) -> &[u8] {
        let len = u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4, "the length counts the bytes after it");
        &frame[4..]
    }

    fn sample_requests(applet: &[u8]) -> Vec<Request<'_>> {
        vec![
            Request::Info,
            Request::Create {
                config: Config::default(),
                applet: None,
            },
            Request::Create {
                config: Config {
                    buffers: 3,
                    buffer_size: 64,
                    tx_depth: 2,
                    rx_depth: 4,
                    free_depth: 8,
                },
                applet: Some(applet),
            },
            Request::OpenChannel {
                id: 7,
                remote: "10.1.2.3:7000".parse().unwrap(),
                remote_ep: 65535,
                checksum: true,
            },
            Request::InstallFilter {
                id: 1,
                chan: 2,
                priority: -5,
                text: "udp dst port 7000",
            },
            Request::RemoveFilter {
                id: 9,
                filter: u64::MAX,
            },
            Request::SetApplet {
                id: 3,
                applet: None,
            },
            Request::SetApplet {
                id: 3,
                applet: Some(applet),
            },
            Request::Counts { id: 4 },
            Request::Close { id: 5 },
            Request::ClosedChannels { id: 6 },
            Request::EngineCounts { ids: vec![] },
            Request::EngineCounts {
                ids: vec![1, 0x0002_0007, u32::MAX],
            },
        ]
    }

    #[test]
    fn every_request_round_trips() {
        let applet = [0xca, 0xfe, 0xba, 0xbe, 1, 2, 3];
        for r in sample_requests(&applet) {
            let f = r.encode();
            assert_eq!(Request::decode(body(&f)), Ok(r.clone()), "{r:?}");
        }
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        let applet = [1, 2, 3];
        for r in sample_requests(&applet) {
            let f = r.encode();
            let b = body(&f);
            for cut in 0..b.len() {
                let e = Request::decode(&b[..cut]).unwrap_err();
                assert!(
                    matches!(e, ProtocolError::Empty | ProtocolError::Short { .. }),
                    "{r:?} cut at {cut}: {e:?}"
                );
            }
            let mut long = b.to_vec();
            long.push(0);
            assert_eq!(
                Request::decode(&long),
                Err(ProtocolError::Trailing {
                    op: Op::from_code(b[0]).unwrap().name(),
                    extra: 1
                })
            );
        }
    }

    #[test]
    fn lengths_past_the_end_and_oversized_fields_are_refused() {
        // InstallFilter announcing 100 bytes of text but carrying 3.
        let mut b = vec![Op::InstallFilter as u8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&100u32.to_le_bytes());
        b.extend_from_slice(b"udp");
        let e = Request::decode(&b).unwrap_err();
        assert_eq!(
            e,
            ProtocolError::Short {
                op: "InstallFilter",
                field: "filter",
                need: 114,
                len: 17
            }
        );
        // A length that would overflow an offset computation.
        let mut b = vec![Op::SetApplet as u8, 1, 0, 0, 0, 1];
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            Request::decode(&b),
            Err(ProtocolError::FieldTooLarge {
                field: "applet",
                max: MAX_APPLET,
                ..
            })
        ));
        // An applet one byte over jive's limit.
        let mut b = vec![Op::SetApplet as u8, 1, 0, 0, 0, 1];
        b.extend_from_slice(&(MAX_APPLET as u32 + 1).to_le_bytes());
        assert!(matches!(
            Request::decode(&b),
            Err(ProtocolError::FieldTooLarge { .. })
        ));
        // Flags other than 0 and 1.
        let b = [Op::SetApplet as u8, 1, 0, 0, 0, 2];
        assert!(matches!(
            Request::decode(&b),
            Err(ProtocolError::BadFlag { value: 2, .. })
        ));
        let mut b = Request::OpenChannel {
            id: 1,
            remote: "10.0.0.1:1".parse().unwrap(),
            remote_ep: 1,
            checksum: false,
        }
        .encode();
        *b.last_mut().unwrap() = 0x80;
        assert!(matches!(
            Request::decode(body(&b)),
            Err(ProtocolError::BadFlag { field: "flags", .. })
        ));
        // Invalid UTF-8 in a filter.
        let mut b = vec![Op::InstallFilter as u8, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&2u32.to_le_bytes());
        b.extend_from_slice(&[0xff, 0xfe]);
        assert_eq!(
            Request::decode(&b),
            Err(ProtocolError::NotUtf8 {
                op: "InstallFilter"
            })
        );
        assert_eq!(Request::decode(&[0]), Err(ProtocolError::UnknownOp(0)));
        assert_eq!(Request::decode(&[11]), Err(ProtocolError::UnknownOp(11)));
        // More endpoint ids than a request may name.
        let n = MAX_COUNTS_ENDPOINTS as u16 + 1;
        let mut b = vec![Op::EngineCounts as u8];
        b.extend_from_slice(&n.to_le_bytes());
        let e = Request::decode(&b).unwrap_err();
        assert_eq!(
            e,
            ProtocolError::TooMany {
                op: "EngineCounts",
                items: "endpoint ids",
                count: u64::from(n),
                max: MAX_COUNTS_ENDPOINTS,
            }
        );
        // They are ids, not bytes.
        let mut b = vec![Op::EngineCounts as u8];
        b.extend_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(
            Request::decode(&b).unwrap_err().to_string(),
            "EngineCounts: 65535 endpoint ids exceed the limit of 256"
        );
    }

    #[test]
    fn the_applet_limit_is_jives() {
        assert_eq!(MAX_APPLET, jive::Limits::default().max_class_bytes);
        assert!(
            MAX_FRAME
                >= Request::Create {
                    config: Config::default(),
                    applet: Some(&[0; MAX_APPLET])
                }
                .encode()
                .len()
                    - 4
        );
    }

    #[test]
    fn counts_round_trip_field_by_field() {
        let c = PortCounts {
            tx_descriptors: 1,
            tx_frames: 2,
            tx_rejected: 3,
            tx_closed: 4,
            rx_delivered: 5,
            rx_no_buffer: 6,
            rx_queue_full: 7,
            rx_too_long: 8,
            rx_bad_checksum: 9,
            applet_traps: 10,
            applet_drops: 11,
            free_invalid: 12,
            queue_corrupt: 13,
            applet_overruns: 14,
            applet_throttled: 15,
        };
        let b = counts_to_bytes(&c);
        assert_eq!(b.len(), 8 * COUNTERS);
        assert_eq!(
            &b[16..24],
            &3u64.to_le_bytes(),
            "tx_rejected is the third field"
        );
        assert_eq!(counts_from_bytes(&b), Some(c));
        assert_eq!(counts_from_bytes(&b[1..]), None);
    }

    #[test]
    fn engine_counts_and_refusals_round_trip_field_by_field() {
        let c = crate::EngineCounts {
            frames_in: 1,
            unmatched: 2,
            malformed: 3,
            frames_out: 4,
            send_errors: 5,
            transport_no_route: 6,
            transport_queue_full: 7,
            transport_overruns: 8,
            transport_not_unet: 9,
            closed: 10,
        };
        let b = engine_counts_to_bytes(&c);
        assert_eq!(b.len(), 8 * ENGINE_COUNTERS);
        assert_eq!(&b[24..32], &4u64.to_le_bytes(), "frames_out is the fourth");
        assert_eq!(engine_counts_from_bytes(&b), Some(c));
        assert_eq!(engine_counts_from_bytes(&b[8..]), None);
        for r in [
            Refusal::NotYours { id: 0x0003_0009 },
            Refusal::CountsBudget {
                per_second: 100,
                retry_ms: 7,
            },
            Refusal::CompileBudget {
                ms_per_second: 250,
                retry_ms: 3_400,
            },
        ] {
            let b = r.encode();
            assert_eq!(Refusal::decode(&b), Some(r));
            assert_eq!(Refusal::decode(&b[..b.len() - 1]), None);
            assert_eq!(Refusal::decode(&[b.as_slice(), &[0]].concat()), None);
        }
        assert_eq!(Refusal::decode(&[3, 0, 0, 0, 0]), None);
        assert_eq!(
            Refusal::NotYours { id: 7 }.to_string(),
            "endpoint 7 is not yours"
        );
    }

    #[test]
    fn the_counts_budget_holds_a_second_and_refills_at_its_rate() {
        let opts = ServeOptions {
            max_engine_counts_per_second: 3,
            ..ServeOptions::default()
        };
        let t0 = std::time::Instant::now();
        let mut p = PeerUse::default();
        for _ in 0..3 {
            assert_eq!(p.take_count(3, t0), Ok(()));
        }
        assert_eq!(
            p.take_count(3, t0),
            Err(Refusal::CountsBudget {
                per_second: 3,
                retry_ms: 334
            })
        );
        assert!(!p.idle(&opts, t0), "a spent budget is remembered");
        let later = t0 + std::time::Duration::from_millis(340);
        assert_eq!(p.take_count(3, later), Ok(()));
        assert!(p.take_count(3, later).is_err());
        // Ten seconds idle refill it to a second's worth, no more.
        let much_later = later + std::time::Duration::from_secs(10);
        assert!(p.idle(&opts, much_later));
        for _ in 0..3 {
            assert_eq!(p.take_count(3, much_later), Ok(()));
        }
        assert!(p.take_count(3, much_later).is_err());
        // A budget of 0 refuses every read.
        assert!(PeerUse::default().take_count(0, t0).is_err());
    }

    /// A connection's compiling thread runs at its nice value while the
    /// connection's stays where it was, gives each job's result and CPU
    /// time, and a job that panics ends only that thread: the error is
    /// the request's, and the next compile starts a new one.
    #[test]
    fn a_connection_compiles_below_itself_and_survives_a_compile_that_panics() {
        // `lower_priority` to the highest priority changes nothing and
        // says where the thread is.
        let nice = || crate::affinity::lower_priority(-20).unwrap();
        let ours = nice();
        let mut c = Compiler::new(19, 0);
        let (theirs, _) = c.run(nice).unwrap();
        assert_eq!(theirs, ours.max(19));
        assert_eq!(nice(), ours, "the connection's thread keeps its priority");
        let (sum, cpu) = c
            .run(|| (0..20_000_000u64).fold(0u64, |s, i| s.wrapping_add(i * i)))
            .unwrap();
        assert_ne!(sum, 0);
        assert!(cpu > std::time::Duration::ZERO, "{cpu:?}");
        let e = c
            .run(|| -> u32 { panic!("a bug in a compiler") })
            .unwrap_err();
        assert!(e.contains("compiling thread ended"), "{e}");
        assert_eq!(c.run(|| 7).unwrap().0, 7);
    }

    #[test]
    fn the_compile_budget_takes_an_install_while_any_is_left_and_charges_it_after() {
        use std::time::Duration;
        let ms = Duration::from_millis;
        let opts = ServeOptions {
            compile_time_per_second: ms(250),
            ..ServeOptions::default()
        };
        let rate = opts.compile_time_per_second;
        let retry = |r: Result<(), Refusal>| match r {
            Err(Refusal::CompileBudget {
                ms_per_second: 250,
                retry_ms,
            }) => retry_ms,
            other => panic!("{other:?}"),
        };
        let t0 = std::time::Instant::now();
        let mut p = PeerUse::default();
        // Small installs run while any of the second's worth is left: the
        // fifth of 60 ms starts with 10 ms left and overdraws by 50.
        for _ in 0..5 {
            assert_eq!(p.admit_compile(rate, t0), Ok(()));
            p.charge_compile(ms(60), rate, t0);
        }
        assert!((200..=201).contains(&retry(p.admit_compile(rate, t0))));
        // 300 ms later 25 ms are left; one dear install of a second
        // overdraws by 975, and the wait is their refill at 250 a second.
        let t1 = t0 + ms(300);
        assert_eq!(p.admit_compile(rate, t1), Ok(()));
        p.charge_compile(ms(1_000), rate, t1);
        assert!((3_900..=3_901).contains(&retry(p.admit_compile(rate, t1))));
        assert!(!p.idle(&opts, t1), "a spent budget is remembered");
        assert!(p.admit_compile(rate, t1 + ms(3_890)).is_err());
        assert_eq!(p.admit_compile(rate, t1 + ms(3_910)), Ok(()));
        assert!(p.idle(&opts, t1 + ms(10_000)));
        // A budget of 0 refuses every install.
        assert!(
            PeerUse::default()
                .admit_compile(Duration::ZERO, t0)
                .is_err()
        );
    }

    #[test]
    fn filters_are_confined_to_the_callers_endpoint() {
        let id = crate::frame::endpoint_id(5, 2);
        assert_eq!(
            confine_filter("udp dst port 7000", id).unwrap(),
            "(udp dst port 7000) and (udp[8:2] = 5 and udp[14:2] = 2)"
        );
        // Text that tries to close the parenthesis and escape is refused
        // (it does not parse on its own) ...
        for evil in ["udp) or (udp", "udp) or udp or (udp", "(udp", "udp)"] {
            assert!(confine_filter(evil, id).is_err(), "{evil}");
        }
        // Text that moves the offsets of what follows it (a tag, a label,
        // a PPPoE session's PPP frame) would have the guard read elsewhere
        // in the frame: refused.
        for moving in [
            "vlan or udp",
            "mpls or udp",
            "pppoes or udp",
            "udp or pppoes 1",
        ] {
            let e = confine_filter(moving, id).unwrap_err();
            assert!(e.contains("cannot be confined"), "{moving}: {e}");
        }
        // ... and what parses stays under the guard.
        let c = confine_filter("udp or tcp", id).unwrap();
        match &dpf::parse(&c).unwrap() {
            dpf::syntax::Expr::And(_, rhs) => {
                assert_eq!(**rhs, dpf::parse("udp[8:2] = 5 and udp[14:2] = 2").unwrap())
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_filter_is_refused_at_the_client_column_exactly_when_its_confined_form_would_be() {
        use dpf::syntax::{MAX_FILTER_LEN, MAX_NESTING, MAX_PRIMITIVES};
        let id = crate::frame::endpoint_id(5, 2);
        // One level short of the limit: confined, it is at the limit and
        // installs.
        let ok = format!("{}udp", "!".repeat(MAX_NESTING - 1));
        let c = confine_filter(&ok, id).unwrap();
        assert!(dpf::parse(&c).is_ok());
        // At the limit on its own: refused, at the column of the client's
        // own text where the confined form goes past it.
        let deep = format!("{}udp", "!".repeat(MAX_NESTING));
        let e = confine_filter(&deep, id).unwrap_err();
        assert!(e.contains(&format!("column {MAX_NESTING}:")), "{e}");
        // Primitives (the guard adds two) and length, likewise.
        let many = vec!["udp"; MAX_PRIMITIVES - 1].join(" or ");
        assert!(confine_filter(&many, id).is_err());
        let fits = vec!["udp"; MAX_PRIMITIVES - 2].join(" or ");
        assert!(dpf::parse(&confine_filter(&fits, id).unwrap()).is_ok());
        let long = format!("udp{}", " ".repeat(MAX_FILTER_LEN - 3));
        assert!(confine_filter(&long, id).unwrap_err().contains("limit"));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_the_decoder(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(r) = Request::decode(&b) {
                // What decodes re-encodes to the same bytes.
                let f = r.encode();
                prop_assert_eq!(body(&f), &b[..]);
            }
        }

        #[test]
        fn arbitrary_bodies_of_each_op_never_panic(op in 0u8..12, rest in proptest::collection::vec(any::<u8>(), 0..48)) {
            let mut b = vec![op];
            b.extend_from_slice(&rest);
            let _ = Request::decode(&b);
        }
    }

    fn temp_sock(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("unet-daemon-{tag}-{}.sock", std::process::id()))
    }

    fn engine() -> Engine {
        let net = crate::transport::LoopNet::new();
        Engine::new(Box::new(
            net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
        ))
    }

    #[test]
    fn the_socket_is_private_replaces_a_stale_one_and_goes_away() {
        let path = temp_sock("mode");
        let _ = std::fs::remove_file(&path);
        // A stale socket: bound, then its listener closed.
        drop(UnixListener::bind(&path).unwrap());
        assert!(UnixStream::connect(&path).is_err());
        let server = serve(engine(), &path).unwrap();
        let m = std::fs::symlink_metadata(&path).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        // A second engine on the same path is refused, not a thief.
        let e = serve(engine(), &path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        let c = UnixStream::connect(&path).unwrap();
        server.shutdown();
        assert!(!path.exists(), "shutdown removes the socket file");
        // The connection was closed by the shutdown (an end of file if it
        // had been accepted, a reset if it was still in the backlog).
        let mut buf = [0u8; 1];
        let r = (&c).read(&mut buf);
        assert!(
            matches!(r, Ok(0))
                || r.as_ref()
                    .is_err_and(|e| e.kind() == io::ErrorKind::ConnectionReset),
            "{r:?}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_left_alone() {
        let path = temp_sock("file");
        std::fs::write(&path, b"precious").unwrap();
        let e = serve(engine(), &path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&path).unwrap(), b"precious");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_mode_is_configurable() {
        let path = temp_sock("mode660");
        let server = serve_with(
            engine(),
            &path,
            ServeOptions {
                mode: 0o660,
                ..ServeOptions::default()
            },
        )
        .unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o660
        );
        drop(server);
        assert!(
            !path.exists(),
            "dropping the server removes the socket file"
        );
    }

    #[test]
    fn connections_past_the_limit_are_refused_with_a_reason() {
        let path = temp_sock("limit");
        let events = Arc::new(Mutex::new(Vec::new()));
        let ev = events.clone();
        let server = serve_with(
            engine(),
            &path,
            ServeOptions {
                max_connections: 1,
                on_event: Some(Arc::new(move |e: &Event| lock(&ev).push(e.clone()))),
                ..ServeOptions::default()
            },
        )
        .unwrap();
        let first = UnixStream::connect(&path).unwrap();
        (&first).write_all(&Request::Info.encode()).unwrap();
        let mut reply = [0u8; 13];
        (&first).read_exact(&mut reply).unwrap();
        assert_eq!(reply[4], STATUS_OK);
        let mut second = UnixStream::connect(&path).unwrap();
        let mut got = Vec::new();
        second.read_to_end(&mut got).unwrap();
        assert_eq!(got[4], STATUS_ERR);
        assert_eq!(&got[5..], b"too many connections (limit 1)");
        drop(first);
        server.shutdown();
        let events = lock(&events).clone();
        assert!(
            matches!(events[0], Event::Connected { conn: 1, pid: Some(p), .. } if p == std::process::id())
        );
        assert!(events.contains(&Event::Refused {
            pid: Some(std::process::id()),
            uid: Some(own_users().pop().unwrap()),
            reason: "too many connections (limit 1)".into(),
        }));
        assert!(events.contains(&Event::Disconnected {
            conn: 1,
            reclaimed: 0
        }));
    }

    /// The address an engine behind `path` reports (`Info`).
    fn served_by(path: &Path) -> crate::Addr {
        let c = UnixStream::connect(path).unwrap();
        (&c).write_all(&Request::Info.encode()).unwrap();
        let mut reply = [0u8; 13];
        (&c).read_exact(&mut reply).unwrap();
        assert_eq!(reply[4], STATUS_OK);
        let ip = std::net::Ipv4Addr::new(reply[7], reply[8], reply[9], reply[10]);
        crate::Addr::new(ip, u16::from_le_bytes([reply[11], reply[12]]))
    }

    /// The race of two daemons started together, at the moment that
    /// decided it: one has its socket bound under its temporary name and
    /// has found the path free, and the other's socket appears there
    /// before the first publishes its own. (Renaming over the path, the
    /// daemon once replaced the other's live socket: reproduced with
    /// `strace -e inject=rename:delay_enter=1500000`.)
    #[test]
    fn publishing_never_replaces_a_live_socket() {
        let path = temp_sock("publish");
        let _ = std::fs::remove_file(&path);
        let tmp = temp_path(&path);
        let late = UnixListener::bind(&tmp).unwrap();
        let net = crate::transport::LoopNet::new();
        let first = Engine::new(Box::new(
            net.attach("10.0.0.9:7000".parse().unwrap()).unwrap(),
        ));
        let server = serve(first, &path).unwrap();
        let e = publish(&tmp, &path).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(e.to_string().contains("already serving"), "{e}");
        assert_eq!(served_by(&path), "10.0.0.9:7000".parse().unwrap());
        // A stale socket, though, is replaced.
        drop(server);
        drop(UnixListener::bind(&path).unwrap());
        publish(&tmp, &path).unwrap();
        let _ = std::fs::remove_file(&tmp);
        drop(UnixStream::connect(&path).unwrap());
        drop(late);
        std::fs::remove_file(&path).unwrap();
    }

    /// A connection's thread that unwinds (a bug in a request's handling)
    /// gives back what it held: its endpoints, its slot in the live table
    /// (the daemon's handle on its socket) and its count in its process's
    /// budget.
    #[test]
    fn a_connection_that_unwinds_gives_back_its_slot_and_its_endpoints() {
        let path = temp_sock("unwind");
        let server = serve(engine(), &path).unwrap();
        let shared = server.shared.clone();
        let (pid, uid) = (Some(std::process::id()), Some(4_321));
        let (client, ours) = UnixStream::pair().unwrap();
        let activity = Arc::new(Activity::new(0));
        {
            let mut c = lock(&shared.conns);
            let live = Live {
                stream: ours.try_clone().unwrap(),
                pid,
                activity: activity.clone(),
            };
            c.join(1_000, live, uid);
        }
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _slot = Slot {
                shared: &shared,
                conn: 1_000,
                pid,
                uid,
            };
            let _stream = ours;
            let mut session = Session::new(&shared, 1_000, pid, activity);
            let create = Request::Create {
                config: Config::default(),
                applet: None,
            }
            .encode();
            session.handle(body(&create)).unwrap();
            assert_eq!(shared.engine.endpoints().len(), 1);
            panic!("a bug in a request's handling");
        }));
        assert!(unwound.is_err());
        assert_eq!(shared.engine.endpoints(), vec![], "its endpoint reclaimed");
        {
            let c = lock(&shared.conns);
            assert!(c.live.is_empty(), "its slot given back");
            assert!(c.users.is_empty(), "its count in its user's");
            let p = c.peers.get(&pid).cloned().unwrap_or_default();
            assert_eq!((p.connections, p.memory), (0, 0));
        }
        // Every handle the daemon had on the socket is closed.
        let mut buf = [0u8; 1];
        assert_eq!((&client).read(&mut buf).unwrap(), 0);
        server.shutdown();
    }

    /// A hook that panics loses its event and nothing else.
    #[test]
    fn a_panicking_event_hook_is_contained() {
        let path = temp_sock("hook");
        let calls = Arc::new(AtomicU64::new(0));
        let n = calls.clone();
        let server = serve_with(
            engine(),
            &path,
            ServeOptions {
                on_event: Some(Arc::new(move |_: &Event| {
                    n.fetch_add(1, Ordering::Relaxed);
                    panic!("the log's output is gone")
                })),
                ..ServeOptions::default()
            },
        )
        .unwrap();
        for _ in 0..3 {
            assert_eq!(served_by(&path), engine_addr());
        }
        server.shutdown();
        assert!(calls.load(Ordering::Relaxed) >= 3);
    }

    fn engine_addr() -> crate::Addr {
        "10.0.0.1:7000".parse().unwrap()
    }

    /// The limits in the order a newcomer meets them, the user's counted
    /// for users not exempt only.
    #[test]
    fn a_newcomer_is_turned_away_by_the_first_limit_it_meets() {
        let opts = ServeOptions {
            max_connections: 10,
            max_connections_per_peer: 3,
            max_connections_per_user: 4,
            reserve: 2,
            exempt_users: vec![0],
            ..ServeOptions::default()
        };
        let mut c = Conns::default();
        let (a, b) = (Some(1000), Some(2000));
        for (pid, uid) in [(1, a), (1, a), (2, a), (3, b)] {
            c.peers.entry(Some(pid)).or_default().connections += 1;
            *c.users.entry(uid).or_default() += 1;
        }
        let away = |c: &Conns, pid: u32, uid: Option<u32>, total| {
            c.turned_away(Some(pid), uid, &opts, total)
        };
        assert_eq!(away(&c, 9, a, 4), None, "a's third connection");
        assert_eq!(away(&c, 9, a, 10), Some(TurnedAway::Full { limit: 10 }));
        *c.users.get_mut(&a).unwrap() = 4;
        assert_eq!(
            away(&c, 9, a, 5),
            Some(TurnedAway::User { uid: a, held: 4 }),
            "a new process of a user that holds its share"
        );
        assert_eq!(away(&c, 9, b, 5), None, "another user's");
        assert_eq!(
            away(&c, 1, a, 5),
            Some(TurnedAway::User { uid: a, held: 4 }),
            "the user's limit before the reserve"
        );
        assert_eq!(
            away(&c, 3, b, 8),
            Some(TurnedAway::Reserve {
                reserve: 2,
                held: 1
            })
        );
        c.peers.get_mut(&Some(3)).unwrap().connections = 3;
        assert_eq!(away(&c, 3, b, 5), Some(TurnedAway::Process { held: 3 }));
        // Root is exempt, and an unknown user is one user like another.
        *c.users.entry(Some(0)).or_default() = 9;
        assert_eq!(away(&c, 9, Some(0), 9), None);
        *c.users.entry(None).or_default() = 4;
        let m = away(&c, 9, None, 5).unwrap().to_string();
        assert_eq!(
            m,
            "clients of unknown user hold 4 connections, the limit per user"
        );
        assert_eq!(
            TurnedAway::User { uid: a, held: 4 }.to_string(),
            "user 1000 holds 4 connections, the limit per user"
        );
    }

    /// Of the connection's thread beginning a request and the accepting
    /// thread evicting it, exactly one wins; a connection that owns an
    /// endpoint or serves a request is never a candidate.
    #[test]
    fn a_connection_is_evicted_only_while_idle_owning_nothing() {
        let a = Activity::new(7);
        let (seen, since) = a.idle_since().expect("idle from its start");
        assert_eq!(since, 7);
        assert!(a.begin());
        assert_eq!(a.idle_since(), None, "busy");
        assert!(!a.evict(seen), "not while it serves a request");
        a.end(9, true);
        assert_eq!(a.idle_since(), None, "it owns an endpoint");
        a.end(12, false);
        let (seen, since) = a.idle_since().unwrap();
        assert_eq!(since, 12);
        // A request begun and answered since it was seen: the word moved.
        assert!(a.begin());
        a.end(12, false);
        assert!(a.evict(seen), "the same word: nothing happened to it");
        assert!(!a.begin(), "an evicted connection serves nothing more");
        assert_eq!(a.idle_since(), None);
        let b = Activity::new(3);
        let (seen, _) = b.idle_since().unwrap();
        assert!(b.begin());
        b.end(4, false);
        assert!(!b.evict(seen), "it was answered since: looked at again");
    }

    /// A client whose idle connection made room for another is told why
    /// at its next request.
    #[test]
    fn an_evicted_client_is_told_why_at_its_next_request() {
        let path = temp_sock("evicted-told");
        let server = serve_with(
            engine(),
            &path,
            ServeOptions {
                max_connections: 1,
                reserve: 0,
                evict_idle_after: std::time::Duration::from_millis(100),
                ..ServeOptions::default()
            },
        )
        .unwrap();
        let idle = crate::client::Client::connect(&path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let newcomer = crate::client::Client::connect(&path).unwrap();
        let e = idle.engine_counts(&[]).unwrap_err().to_string();
        assert!(
            e.contains("closed this connection to make room for a new client"),
            "{e}"
        );
        assert!(newcomer.engine_counts(&[]).is_ok());
        server.shutdown();
    }

    /// The race itself, on two threads: a request beginning against an
    /// eviction of the word seen idle, 20,000 times; exactly one wins each
    /// time, and the loser sees the winner's state.
    #[test]
    fn a_request_and_an_eviction_racing_have_one_winner() {
        let barrier = std::sync::Barrier::new(2);
        for round in 0..20_000u64 {
            let a = Activity::new(round);
            let (seen, _) = a.idle_since().unwrap();
            let (began, evicted) = std::thread::scope(|s| {
                let t = s.spawn(|| {
                    barrier.wait();
                    a.begin()
                });
                barrier.wait();
                let evicted = a.evict(seen);
                (t.join().unwrap(), evicted)
            });
            assert!(began != evicted, "round {round}: {began} {evicted}");
            assert_eq!(a.idle_since(), None, "round {round}");
            assert!(!a.begin(), "round {round}: busy or evicted");
        }
    }

    /// The socket file is made with no more than the mode's bits, before
    /// anything changes them: bound with the default 0777 less the umask
    /// (0755 under the usual 022), any user could connect until the chmod.
    #[test]
    fn a_socket_is_made_with_its_mode() {
        let path = temp_sock("made-with-mode");
        let _ = std::fs::remove_file(&path);
        let l = listen_at(&path, 0o600).unwrap();
        let mode = std::fs::symlink_metadata(&path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode & !0o600, 0, "{mode:o}");
        assert!(UnixStream::connect(&path).is_ok(), "it listens");
        drop(l);
        std::fs::remove_file(&path).unwrap();
    }

    /// Every slot taken by connections that hold nothing: a newcomer is
    /// served in the place of the one idle longest once it has waited
    /// `evict_idle_after`; one that owns an endpoint is never closed.
    #[test]
    fn idle_connections_owning_nothing_make_room_for_a_newcomer() {
        let path = temp_sock("evict");
        let events = Arc::new(Mutex::new(Vec::new()));
        let ev = events.clone();
        let e = engine();
        e.start(1).unwrap();
        let server = serve_with(
            e.clone(),
            &path,
            ServeOptions {
                max_connections: 2,
                reserve: 0,
                evict_idle_after: std::time::Duration::from_millis(300),
                on_event: Some(Arc::new(move |e: &Event| lock(&ev).push(e.clone()))),
                ..ServeOptions::default()
            },
        )
        .unwrap();
        let refused = |what: &str| {
            let mut s = UnixStream::connect(&path).unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).unwrap();
            assert_eq!(got[4], STATUS_ERR, "{what}");
            assert_eq!(&got[5..], b"too many connections (limit 2)", "{what}");
        };
        let first = UnixStream::connect(&path).unwrap();
        assert_eq!(served_by(&path), engine_addr(), "a connection of its own");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let second = crate::client::Client::connect(&path).unwrap();
        // Neither has waited long enough.
        refused("while none has waited 300 ms");
        std::thread::sleep(std::time::Duration::from_millis(400));
        // The first, idle longest, makes room; the second stays.
        let third = crate::client::Client::connect(&path).unwrap();
        let mut got = Vec::new();
        (&first).read_to_end(&mut got).unwrap();
        assert_eq!(got[4], STATUS_ERR, "the first is told why, then its end");
        let why = String::from_utf8_lossy(&got[5..]);
        assert!(
            why.starts_with("the daemon closed this connection to make room for a new client: it owned no endpoint and had been idle "),
            "{why}"
        );
        assert_eq!(server.connections(), 2);
        assert_eq!(second.local(), engine_addr(), "the second is served");
        // Both remaining own an endpoint: neither is closed for another.
        let _ep2 = second.create_endpoint(Config::default(), None).unwrap();
        let _ep3 = third.create_endpoint(Config::default(), None).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(400));
        refused("every connection owns an endpoint");
        assert!(second.engine_counts(&[]).is_ok(), "the second still serves");
        server.shutdown();
        e.stop();
        let events = lock(&events).clone();
        let evicted: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                Event::Evicted { conn, pid, idle } => Some((*conn, *pid, *idle)),
                _ => None,
            })
            .collect();
        assert_eq!(evicted.len(), 1, "{events:?}");
        let (conn, pid, idle) = evicted[0];
        assert_eq!((conn, pid), (1, Some(std::process::id())));
        assert!(idle >= std::time::Duration::from_millis(300), "{idle:?}");
    }
}
