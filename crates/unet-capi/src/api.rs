//! The C API's behaviour in safe Rust: the handle table, the error codes
//! and messages, and each operation on Rust types. [`crate::ffi`] only
//! turns C pointers into these types and back.
//!
//! A handle is a number, never a pointer: the table maps it to its object,
//! so a handle that was never issued, was already closed, or names another
//! kind of object is an error ([`CapiError::BadHandle`]) rather than a read
//! of freed memory. Numbers are not reused (a 64-bit counter).

#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::lock::{CallGuard, CallLock};
use unet::client::Client;
use unet::daemon::Server;
use unet::transport::LoopNet;
use unet::wait::{Backoff, Spins};
use unet::{
    Addr, ChannelOptions, Config, Endpoint, EngineCounts, EngineError, PortCounts, RxDesc,
    SendError, TxDesc, TxStatus,
};

/// The error codes a C caller sees (`UNET_E*` in `unet.h`); success is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Code {
    /// `UNET_ENULL`: a required pointer argument was NULL.
    Null = -1,
    /// `UNET_EBADHANDLE`: the handle is not open (never issued, already
    /// closed, or a handle of another kind).
    BadHandle = -2,
    /// `UNET_EINVAL`: an argument's value is invalid (not UTF-8, a bad
    /// address, an unknown name).
    Invalid = -3,
    /// `UNET_EENGINE`: the engine refused the operation or could not be
    /// reached (filter syntax, applet verification, budgets, a broken
    /// connection).
    Engine = -4,
    /// `UNET_EAGAIN`: try again later: the transmit queue is full for now,
    /// or the daemon's budget of engine-counter reads or of filter
    /// compiling is spent for now.
    Again = -5,
    /// `UNET_ETOOLONG`: the message exceeds the endpoint's largest message.
    TooLong = -6,
    /// `UNET_ECLOSED`: the channel's peer endpoint went away.
    Closed = -7,
    /// `UNET_ETIMEDOUT`: no message arrived within the timeout.
    TimedOut = -8,
    /// `UNET_ENOSPC`: the caller's buffer is smaller than the message.
    NoSpace = -9,
    /// `UNET_ECORRUPT`: the engine published a queue index no correct
    /// engine could have.
    Corrupt = -10,
    /// `UNET_EPANIC`: a bug inside the library (a Rust panic, caught).
    Panic = -11,
    /// `UNET_ERANGE`: an offset, a length or a descriptor number lies
    /// outside the endpoint's buffer area or transmit queue.
    Range = -12,
    /// `UNET_ENOTHELD`: a buffer given back that is not the
    /// application's: no receive handed it out, or it was given back
    /// already.
    NotHeld = -13,
    /// `UNET_EDEADLK`: an endpoint call made from inside a callback of
    /// `unet_send_inplace` or `unet_recv_inplace`, while this thread holds
    /// an endpoint for the callback.
    Deadlock = -14,
}

/// Every code, for [`strerror`] and the header check.
pub const CODES: [Code; 14] = [
    Code::Null,
    Code::BadHandle,
    Code::Invalid,
    Code::Engine,
    Code::Again,
    Code::TooLong,
    Code::Closed,
    Code::TimedOut,
    Code::NoSpace,
    Code::Corrupt,
    Code::Panic,
    Code::Range,
    Code::NotHeld,
    Code::Deadlock,
];

/// A fixed, NUL-terminated description of `code` (for `unet_strerror`).
pub fn strerror(code: i32) -> &'static std::ffi::CStr {
    match code {
        0 => c"success",
        -1 => c"a required pointer argument is NULL",
        -2 => c"the handle is not open (never issued, already closed, or of another kind)",
        -3 => c"an argument's value is invalid",
        -4 => c"the engine refused the operation or could not be reached",
        -5 => c"try again later: the transmit queue is full (until the engine takes earlier messages), or the daemon's budget of engine-counter reads is spent (until it refills)",
        -6 => c"the message exceeds the endpoint's largest message",
        -7 => c"the channel is closed: its peer endpoint went away",
        -8 => c"no message arrived within the timeout",
        -9 => c"the buffer is smaller than the message; it stays queued for the next receive",
        -10 => c"the endpoint's queue is corrupt",
        -11 => c"internal error in the unet library",
        -12 => c"an offset, length or descriptor number lies outside the endpoint's buffer area or transmit queue",
        -13 => c"the buffer is not the application's to give back: never handed out by a receive, or given back already",
        -14 => c"an endpoint call from inside an in-place send or receive callback, which holds an endpoint: it would deadlock",
        _ => c"unknown unet error code",
    }
}

/// The kinds of handle, named in [`CapiError::BadHandle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `unet_client`.
    Client,
    /// `unet_endpoint`.
    Endpoint,
    /// `unet_engine`.
    Engine,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Client => "client",
            Kind::Endpoint => "endpoint",
            Kind::Engine => "engine",
        })
    }
}

/// Why a C API call failed; its message is what `unet_last_error` gives.
#[derive(Debug, Error)]
pub enum CapiError {
    /// A required pointer was NULL.
    #[error("{func}: argument `{arg}` is NULL")]
    Null {
        /// The function.
        func: &'static str,
        /// The argument.
        arg: &'static str,
    },
    /// A handle that is not open.
    #[error(
        "{func}: {kind} handle {id} is not open (never issued, already closed, or of another kind)"
    )]
    BadHandle {
        /// The function.
        func: &'static str,
        /// The kind the function takes.
        kind: Kind,
        /// The handle's number.
        id: u64,
    },
    /// A string argument that is not UTF-8.
    #[error("{func}: argument `{arg}` is not UTF-8 (invalid byte at offset {offset})")]
    Utf8 {
        /// The function.
        func: &'static str,
        /// The argument.
        arg: &'static str,
        /// The byte offset of the first invalid byte.
        offset: usize,
    },
    /// Another invalid argument value.
    #[error("{func}: argument `{arg}`: {why}")]
    Invalid {
        /// The function.
        func: &'static str,
        /// The argument.
        arg: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// The engine's error.
    #[error("{func}: {source}")]
    Engine {
        /// The function.
        func: &'static str,
        /// The engine's typed error.
        source: EngineError,
    },
    /// The endpoint's send error.
    #[error("{func}: {source}")]
    Send {
        /// The function.
        func: &'static str,
        /// The endpoint's typed error.
        source: SendError,
    },
    /// What was waited for did not happen within the timeout.
    #[error("{func}: {what} within {ms} ms")]
    TimedOut {
        /// The function.
        func: &'static str,
        /// What did not happen.
        what: &'static str,
        /// The timeout.
        ms: u64,
    },
    /// An offset, length or descriptor number out of range.
    #[error("{func}: {why}")]
    Range {
        /// The function.
        func: &'static str,
        /// What lies where, and the range it should lie in.
        why: String,
    },
    /// A buffer given back that the application does not hold.
    #[error(
        "{func}: the buffer at offset {offset} is not the application's to give back: no unet_recv_desc handed it out, or it was given back already"
    )]
    NotHeld {
        /// The function.
        func: &'static str,
        /// The buffer's offset in the buffer area.
        offset: u32,
    },
    /// An endpoint call from inside an in-place callback.
    #[error(
        "{func}: called from inside a callback of unet_send_inplace or unet_recv_inplace, which holds an endpoint for the callback; the call would wait on itself (or on another thread's callback), so make it after the callback returns"
    )]
    Reentered {
        /// The function.
        func: &'static str,
    },
    /// The caller's buffer is too small for the next message.
    #[error(
        "unet_recv: the next message has {need} bytes, the buffer {cap}; it stays queued for the next unet_recv"
    )]
    NoSpace {
        /// The message's length.
        need: usize,
        /// The buffer's capacity.
        cap: usize,
    },
    /// A panic inside the library, caught at the boundary.
    #[error("{func}: internal error (a panic, caught): {msg}")]
    Panic {
        /// The function.
        func: &'static str,
        /// The panic's message.
        msg: String,
    },
}

impl CapiError {
    /// Its code.
    pub fn code(&self) -> Code {
        match self {
            CapiError::Null { .. } => Code::Null,
            CapiError::BadHandle { .. } => Code::BadHandle,
            CapiError::Utf8 { .. } | CapiError::Invalid { .. } => Code::Invalid,
            // The daemon's budgets of counter reads and of filter
            // compiling refill: try again.
            CapiError::Engine {
                source:
                    EngineError::Refused(
                        unet::daemon::Refusal::CountsBudget { .. }
                        | unet::daemon::Refusal::CompileBudget { .. },
                    ),
                ..
            } => Code::Again,
            CapiError::Engine { .. } => Code::Engine,
            CapiError::Send { source, .. } => match source {
                SendError::TooLong { .. } => Code::TooLong,
                SendError::Full => Code::Again,
                SendError::Corrupt => Code::Corrupt,
                SendError::ChannelClosed { .. } => Code::Closed,
            },
            CapiError::TimedOut { .. } => Code::TimedOut,
            CapiError::NoSpace { .. } => Code::NoSpace,
            CapiError::Range { .. } => Code::Range,
            CapiError::NotHeld { .. } => Code::NotHeld,
            CapiError::Reentered { .. } => Code::Deadlock,
            CapiError::Panic { .. } => Code::Panic,
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `e` as this thread's last error and returns its code.
pub fn fail(e: CapiError) -> i32 {
    let msg = e.to_string().replace('\0', "\\0");
    let c = CString::new(msg).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = c);
    e.code() as i32
}

/// This thread's last error message ("" before the first failure); the
/// pointer stays valid until this thread's next failing call.
pub fn last_error() -> *const std::ffi::c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// Runs `f`, turning a panic into [`CapiError::Panic`] and an error into
/// its code; 0 on success.
pub fn guard(func: &'static str, f: impl FnOnce() -> Result<(), CapiError>) -> i32 {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => fail(e),
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            fail(CapiError::Panic { func, msg })
        }
    }
}

/// An endpoint as the C API holds it.
struct EndpointState {
    ep: Endpoint,
    /// A message that did not fit a `unet_recv` caller's buffer, kept for
    /// the next receive, its buffers still held (by the library).
    held: Option<RxDesc>,
    /// The receive buffers `unet_recv_desc` handed to the application and
    /// it has not given back: one bit per buffer of the area.
    lent: Vec<u64>,
    /// Whether the count of transmit descriptors pushed has wrapped past
    /// 2³² (so that every number is a descriptor pushed at some time).
    tx_wrapped: bool,
    /// How long a receive spins before it yields, learnt from the
    /// receives before it.
    spins: Spins,
}

impl EndpointState {
    /// The bit of the buffer at `off` (a buffer's start) in `lent`.
    fn bit(&self, off: u32) -> (usize, u64) {
        let i = (off / self.ep.layout().config.buffer_size) as usize;
        (i / 64, 1 << (i % 64))
    }

    /// Notes a push: the count of pushes wraps to 0 after 2³² of them.
    fn pushed_one(&mut self) {
        if self.ep.tx_pushed() == 0 {
            self.tx_wrapped = true;
        }
    }
}

/// An in-process engine on the `loop` transport, and its daemon if it
/// serves one.
struct EngineState {
    engine: unet::Engine,
    // Kept so the transport's network lives as long as the engine.
    _net: LoopNet,
    server: Mutex<Option<Server>>,
}

#[derive(Default)]
struct Table {
    clients: HashMap<u64, Client>,
    endpoints: HashMap<u64, Arc<EndpointEntry>>,
    engines: HashMap<u64, Arc<EngineState>>,
}

static NEXT: AtomicU64 = AtomicU64::new(1);
static TABLE: RwLock<Option<Table>> = RwLock::new(None);

fn next_id() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn with_table<R>(f: impl FnOnce(&Table) -> R) -> R {
    let t = TABLE.read().unwrap_or_else(|p| p.into_inner());
    match &*t {
        Some(t) => f(t),
        None => f(&Table::default()),
    }
}

fn with_table_mut<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    let mut t = TABLE.write().unwrap_or_else(|p| p.into_inner());
    f(t.get_or_insert_with(Table::default))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn engine_err(func: &'static str) -> impl FnOnce(EngineError) -> CapiError {
    move |source| CapiError::Engine { func, source }
}

fn client(func: &'static str, id: u64) -> Result<Client, CapiError> {
    with_table(|t| t.clients.get(&id).cloned()).ok_or(CapiError::BadHandle {
        func,
        kind: Kind::Client,
        id,
    })
}

/// An endpoint handle's object: its state, behind a lock that a waiting
/// receive holds for its wait, and whether the handle was closed (looked
/// at without the lock). The state goes (`None`) when the handle is
/// closed, so that the endpoint leaves its engine then, whoever still
/// holds the entry itself ([`RECENT`] of any thread).
struct EndpointEntry {
    id: u64,
    closed: AtomicBool,
    state: CallLock<Option<EndpointState>>,
}

thread_local! {
    /// How many endpoints this thread holds locked: more than zero only
    /// while an in-place callback runs (every other call takes and
    /// releases one endpoint without calling out).
    static HOLDING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// An endpoint's state, locked by this thread; counted in [`HOLDING`]
/// while it lives.
struct Held<'a> {
    guard: CallGuard<'a, Option<EndpointState>>,
    entry: &'a EndpointEntry,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let _ = HOLDING.try_with(|h| h.set(h.get() - 1));
        // A handle closed while this call held it: its endpoint goes now
        // (the close could not take the lock).
        if self.entry.closed.load(Ordering::SeqCst) {
            *self.guard = None;
        }
    }
}

impl std::ops::Deref for Held<'_> {
    type Target = EndpointState;
    fn deref(&self) -> &EndpointState {
        self.guard
            .as_ref()
            .expect("EndpointEntry::lock checked the state")
    }
}

impl std::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut EndpointState {
        self.guard
            .as_mut()
            .expect("EndpointEntry::lock checked the state")
    }
}

impl EndpointEntry {
    /// Locks the endpoint for `func`, or refuses if this thread already
    /// holds one: that happens only inside an in-place callback, where
    /// waiting would deadlock, on this endpoint's own lock or, two threads
    /// each in a callback calling the other's endpoint, on each other's.
    fn lock(&self, func: &'static str) -> Result<Held<'_>, CapiError> {
        // A thread whose thread-locals are being destroyed holds nothing.
        if HOLDING.try_with(|h| h.get()).unwrap_or(0) > 0 {
            return Err(CapiError::Reentered { func });
        }
        let guard = self.state.lock();
        if guard.is_none() {
            return Err(self.bad(func));
        }
        let _ = HOLDING.try_with(|h| h.set(h.get() + 1));
        Ok(Held { guard, entry: self })
    }

    fn bad(&self, func: &'static str) -> CapiError {
        CapiError::BadHandle {
            func,
            kind: Kind::Endpoint,
            id: self.id,
        }
    }
}

/// How many endpoint handles a thread keeps in [`RECENT`].
const RECENT_MAX: usize = 16;

thread_local! {
    /// The endpoint handles this thread used last. A call finds its
    /// handle here without the table's lock, whose counter every call of
    /// every thread would write (two threads of a process calling at each
    /// message, an echo server and a client, passed its cache line
    /// between their cores twice per call), and uses the entry where it
    /// lies, without a reference count to raise and lower. The entries
    /// are strong references, but a closed handle's endpoint does not
    /// live on in them: closing takes the endpoint out of its entry.
    static RECENT: RefCell<Vec<(u64, Arc<EndpointEntry>)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on the entry of endpoint handle `id`.
fn with_entry<R>(
    func: &'static str,
    id: u64,
    f: impl FnOnce(&EndpointEntry) -> Result<R, CapiError>,
) -> Result<R, CapiError> {
    let mut f = Some(f);
    // Found among this thread's recent handles, and open: `f` runs on it
    // there. (A thread whose thread-locals are being destroyed, a call
    // from a pthread key's destructor, finds its handles in the table.)
    let hit = RECENT.try_with(|r| {
        let r = r.try_borrow().ok()?;
        let (_, e) = r.iter().rev().find(|(k, _)| *k == id)?;
        if e.closed.load(Ordering::Acquire) {
            return None;
        }
        let f = f.take()?;
        Some(f(e))
    });
    if let Ok(Some(r)) = hit {
        return r;
    }
    let found = with_table(|t| t.endpoints.get(&id).cloned());
    // Remembered (and a closed handle forgotten), unless this thread is
    // inside a call that is using the list (an in-place callback).
    let _ = RECENT.try_with(|r| {
        if let Ok(mut r) = r.try_borrow_mut() {
            r.retain(|(k, _)| *k != id);
            if let Some(e) = &found {
                if r.len() >= RECENT_MAX {
                    r.remove(0);
                }
                r.push((id, e.clone()));
            }
        }
    });
    let e = found.ok_or(CapiError::BadHandle {
        func,
        kind: Kind::Endpoint,
        id,
    })?;
    let f = f
        .take()
        .expect("`f` runs at most once: it did not on the fast path");
    f(&e)
}

/// Runs `f` on endpoint `id`'s state, locked for `func`.
fn with_state<R>(
    func: &'static str,
    id: u64,
    f: impl FnOnce(&mut EndpointState) -> Result<R, CapiError>,
) -> Result<R, CapiError> {
    with_entry(func, id, |e| {
        let mut g = e.lock(func)?;
        f(&mut g)
    })
}

fn engine(func: &'static str, id: u64) -> Result<Arc<EngineState>, CapiError> {
    with_table(|t| t.engines.get(&id).cloned()).ok_or(CapiError::BadHandle {
        func,
        kind: Kind::Engine,
        id,
    })
}

fn add_endpoint(ep: Endpoint) -> u64 {
    let id = next_id();
    let words = ep.layout().config.buffers.div_ceil(64) as usize;
    let st = Arc::new(EndpointEntry {
        id,
        closed: AtomicBool::new(false),
        state: CallLock::new(Some(EndpointState {
            ep,
            held: None,
            lent: vec![0; words],
            tx_wrapped: false,
            spins: Spins::default(),
        })),
    });
    with_table_mut(|t| t.endpoints.insert(id, st));
    id
}

/// Connects to the daemon at `path`; the client's handle.
pub fn connect(path: &str) -> Result<u64, CapiError> {
    let c = Client::connect(path).map_err(engine_err("unet_connect"))?;
    let id = next_id();
    with_table_mut(|t| t.clients.insert(id, c));
    Ok(id)
}

/// Closes a client handle. Its endpoints stay open (and keep the
/// connection) until each is closed.
pub fn disconnect(id: u64) -> Result<(), CapiError> {
    with_table_mut(|t| t.clients.remove(&id))
        .map(drop)
        .ok_or(CapiError::BadHandle {
            func: "unet_disconnect",
            kind: Kind::Client,
            id,
        })
}

/// The client's engine's address.
pub fn client_local(id: u64) -> Result<Addr, CapiError> {
    Ok(client("unet_client_local_addr", id)?.local())
}

/// Creates an endpoint on the client's engine.
pub fn create_endpoint(id: u64, config: Config, applet: Option<&[u8]>) -> Result<u64, CapiError> {
    let func = "unet_endpoint_create";
    let c = client(func, id)?;
    let ep = c
        .create_endpoint(config, applet)
        .map_err(engine_err(func))?;
    Ok(add_endpoint(ep))
}

/// Closes an endpoint handle (the endpoint is removed from its engine once
/// no call on another thread is still using it).
pub fn close_endpoint(id: u64) -> Result<(), CapiError> {
    let e = with_table_mut(|t| t.endpoints.remove(&id)).ok_or(CapiError::BadHandle {
        func: "unet_endpoint_close",
        kind: Kind::Endpoint,
        id,
    })?;
    // Threads that keep the handle in RECENT see it closed from now on,
    // and a call that holds it now takes the endpoint out as it ends.
    e.closed.store(true, Ordering::SeqCst);
    // The endpoint goes now unless a call holds it: for a call that is
    // ending (it looked at `closed` before the store above), the lock is
    // tried again for a few yields; a call that waits (a receive) takes
    // the endpoint out itself when it ends.
    for _ in 0..64 {
        match e.state.try_lock() {
            Some(mut g) => {
                *g = None;
                break;
            }
            None => std::thread::yield_now(),
        }
    }
    Ok(())
}

/// Runs `f` on the endpoint `id`.
pub fn with_endpoint<R>(
    func: &'static str,
    id: u64,
    f: impl FnOnce(&mut Endpoint) -> Result<R, CapiError>,
) -> Result<R, CapiError> {
    with_state(func, id, |g| f(&mut g.ep))
}

/// The endpoint's counters.
pub fn counts(id: u64) -> Result<PortCounts, CapiError> {
    with_endpoint("unet_endpoint_counts", id, |ep| Ok(ep.counts()))
}

/// Sends a copy of `msg` on `chan`.
pub fn send(id: u64, chan: u16, msg: &[u8]) -> Result<(), CapiError> {
    send_with("unet_send", id, chan, msg.len(), |buf| {
        buf.copy_from_slice(msg)
    })
}

/// Sends a `len`-byte message that `fill` writes in place in the
/// endpoint's transmit region (no copy), for the C function `func`.
/// `fill` is called only once `len` is known to fit.
pub fn send_with(
    func: &'static str,
    id: u64,
    chan: u16,
    len: usize,
    fill: impl FnOnce(&mut [u8]),
) -> Result<(), CapiError> {
    with_state(func, id, |g| {
        let before = g.ep.tx_pushed();
        g.ep.send_with(chan, len, fill)
            .map_err(|source| CapiError::Send { func, source })?;
        // A message the in-process engine took directly pushed no
        // descriptor (docs/unet.md, "Sending without a descriptor").
        if g.ep.tx_pushed() != before {
            g.pushed_one();
        }
        Ok(())
    })
}

/// Calls `f` on each piece of the message `d` of `ep` in order, where it
/// lies: its inline bytes, or each buffer's share.
fn read_desc(ep: &Endpoint, d: &RxDesc, mut f: impl FnMut(&[u8])) {
    if d.nbufs == 0 {
        f(&d.data[..d.len as usize]);
        return;
    }
    let (area, bs) = (ep.layout().area, ep.layout().config.buffer_size as usize);
    let mut left = d.len as usize;
    for i in 0..usize::from(d.nbufs) {
        let n = left.min(bs);
        ep.segment()
            .with_bytes(area + d.offset(i) as usize, n, &mut f);
        left -= n;
    }
}

/// Gives the buffers of the message `d` back to the engine.
fn release(ep: &mut Endpoint, d: &RxDesc) {
    for i in 0..usize::from(d.nbufs) {
        ep.give_buffer(d.offset(i));
    }
}

/// Receives the next message in place: calls `piece` on each of its
/// pieces in order (the inline bytes, or each receive buffer's share), then
/// gives its buffers back; its length and channel. Waits as [`recv`]. A
/// message [`recv`] kept for want of room is handed over the same way
/// (it stays in its receive buffers).
pub fn recv_with(
    id: u64,
    timeout: Option<Duration>,
    mut piece: impl FnMut(&[u8]),
) -> Result<(usize, u16), CapiError> {
    let func = "unet_recv_inplace";
    with_state(func, id, |g| {
        if let Some(d) = g.held.take() {
            read_desc(&g.ep, &d, &mut piece);
            release(&mut g.ep, &d);
            return Ok((d.len as usize, d.chan));
        }
        let (m_len, chan) = wait_for(func, &mut g.ep, &mut g.spins, timeout, |m| {
            m.read(&mut piece);
            (m.len(), m.chan())
        })?;
        Ok((m_len, chan))
    })
}

/// A wait of up to a timeout (`None`: without limit; zero: one poll)
/// between a C call's polls: spin, then yield ([`Backoff`]). The timeout
/// runs from the first empty poll, so that a call whose first poll finds
/// what it waits for (a receive in a busy exchange) reads no clock.
struct Wait {
    start: Option<Instant>,
    timeout: Option<Duration>,
    backoff: Backoff,
}

impl Wait {
    fn new(timeout: Option<Duration>, backoff: Backoff) -> Wait {
        Wait {
            start: None,
            timeout,
            backoff,
        }
    }

    /// After an empty poll: the timeout error if it has passed, else
    /// waits before the next poll. The clock is read at the first empty
    /// poll, then at every 1024th while spinning (where a clock read can
    /// cost as much as the poll, e.g. without a vDSO) and at every poll
    /// once the wait yields its core.
    fn snooze(&mut self, func: &'static str, what: &'static str) -> Result<(), CapiError> {
        if let Some(t) = self.timeout
            && (t.is_zero() || self.backoff.now_and_then() || self.backoff.yielding())
        {
            let now = Instant::now();
            if now.saturating_duration_since(*self.start.get_or_insert(now)) >= t {
                return Err(CapiError::TimedOut {
                    func,
                    what,
                    ms: t.as_millis() as u64,
                });
            }
        }
        self.backoff.snooze();
        Ok(())
    }
}

/// Waits up to `timeout` for the next message of `ep` and runs `f` on it.
/// The wait spins as long as `spins` has learnt pays, then yields its
/// core (see [`Spins`]: on a machine whose cores are shared, a receive
/// that spins holds the core its peer or the engine needs).
fn wait_for<R>(
    func: &'static str,
    ep: &mut Endpoint,
    spins: &mut Spins,
    timeout: Option<Duration>,
    f: impl FnOnce(unet::Message<'_>) -> R,
) -> Result<R, CapiError> {
    let mut wait = Wait::new(timeout, spins.backoff());
    loop {
        if let Some(m) = ep.recv() {
            spins.learn(&wait.backoff);
            return Ok(f(m));
        }
        wait.snooze(func, "no message arrived")?;
    }
}

/// Receives the next message into `buf`: its length and channel. Waits up
/// to `timeout` (`None`: without limit; zero: one poll). A message longer
/// than `buf` is kept for the next call and reported as
/// [`CapiError::NoSpace`].
pub fn recv(id: u64, buf: &mut [u8], timeout: Option<Duration>) -> Result<(usize, u16), CapiError> {
    let func = "unet_recv";
    with_state(func, id, |g| {
        let cap = buf.len();
        let copy = |ep: &Endpoint, d: &RxDesc, buf: &mut [u8]| {
            let mut at = 0;
            read_desc(ep, d, |p| {
                buf[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            });
        };
        if let Some(d) = &g.held {
            let need = d.len as usize;
            if need > cap {
                return Err(CapiError::NoSpace { need, cap });
            }
            let d = *d;
            g.held = None;
            copy(&g.ep, &d, buf);
            release(&mut g.ep, &d);
            return Ok((need, d.chan));
        }
        let got = wait_for(func, &mut g.ep, &mut g.spins, timeout, |m| {
            let (len, chan) = (m.len(), m.chan());
            if len > cap {
                // Kept, buffers and all, for the next receive.
                return Err(m.into_desc());
            }
            let mut at = 0;
            m.read(|p| {
                buf[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            });
            Ok((len, chan))
        })?;
        got.map_err(|d| {
            g.held = Some(d);
            CapiError::NoSpace {
                need: d.len as usize,
                cap,
            }
        })
    })
}

/// The endpoint's layout and the transmit region `unet_send` uses: its
/// config, largest message per descriptor, buffer area length, transmit
/// region length.
pub fn layout(id: u64) -> Result<(Config, u32, u64, u64), CapiError> {
    with_endpoint("unet_endpoint_layout", id, |ep| {
        let l = ep.layout();
        Ok((
            l.config,
            l.config.max_message(),
            l.area_len as u64,
            ep.tx_region(),
        ))
    })
}

/// The address and length of the endpoint's buffer area in this process
/// (its mapping lives as long as the endpoint).
pub fn area(id: u64) -> Result<(*mut u8, usize), CapiError> {
    with_endpoint("unet_endpoint_area", id, |ep| {
        let l = ep.layout();
        let base = ep.segment().as_ptr().as_ptr().wrapping_add(l.area);
        Ok((base, l.area_len))
    })
}

/// Checks that `[off, off + len)` lies in the buffer area of `ep`.
fn in_area(func: &'static str, ep: &Endpoint, off: u32, len: u64) -> Result<(), CapiError> {
    let area = ep.layout().area_len as u64;
    if u64::from(off)
        .checked_add(len)
        .is_some_and(|end| end <= area)
    {
        Ok(())
    } else {
        Err(CapiError::Range {
            func,
            why: format!(
                "{len} bytes at offset {off} do not lie in the buffer area ({area} bytes, offsets 0 to {})",
                area - 1
            ),
        })
    }
}

/// Copies into the buffer area at `off` the `len` bytes `src` gives,
/// once they are known to fit (`src` is not called otherwise).
pub fn write_area<'a>(
    id: u64,
    off: u32,
    len: usize,
    src: impl FnOnce() -> Result<&'a [u8], CapiError>,
) -> Result<(), CapiError> {
    let func = "unet_write_area";
    with_endpoint(func, id, |ep| {
        in_area(func, ep, off, len as u64)?;
        ep.write_area(off, src()?)
            .map_err(|source| CapiError::Send { func, source })
    })
}

/// Pushes a transmit descriptor for the `len` bytes at `off` in the
/// buffer area, on `chan`; its number (for [`tx_status`]).
pub fn push_tx(id: u64, chan: u16, off: u32, len: u32) -> Result<u32, CapiError> {
    let func = "unet_push_tx";
    with_state(func, id, |g| {
        let max = g.ep.layout().config.max_message();
        if len > max {
            return Err(CapiError::Send {
                func,
                source: SendError::TooLong {
                    len: len as usize,
                    max: max as usize,
                },
            });
        }
        in_area(func, &g.ep, off, u64::from(len))?;
        let n = g.ep.tx_pushed();
        g.ep.push_tx(TxDesc {
            len,
            offset: off,
            chan,
            ..TxDesc::default()
        })
        .map_err(|source| CapiError::Send { func, source })?;
        g.pushed_one();
        Ok(n)
    })
}

/// The status of transmit descriptor number `n`: only the last `tx_depth`
/// pushed have one (the slot of an older one has been reused).
pub fn tx_status(id: u64, n: u32) -> Result<TxStatus, CapiError> {
    let func = "unet_tx_status";
    with_state(func, id, |g| {
        let (pushed, depth) = (g.ep.tx_pushed(), g.ep.layout().config.tx_depth);
        let age = pushed.wrapping_sub(n);
        let known = if g.tx_wrapped {
            depth
        } else {
            depth.min(pushed)
        };
        if age == 0 || age > known {
            let why = if known == 0 {
                format!("descriptor {n}: none has been pushed yet")
            } else {
                format!(
                    "descriptor {n}: only the last {known} pushed have a status (numbers {} to {})",
                    pushed.wrapping_sub(known),
                    pushed.wrapping_sub(1)
                )
            };
            return Err(CapiError::Range { func, why });
        }
        Ok(g.ep.tx_status(n))
    })
}

/// How many transmit descriptors were pushed, in all (wrapping).
pub fn tx_pushed(id: u64) -> Result<u32, CapiError> {
    with_endpoint("unet_tx_pushed", id, |ep| Ok(ep.tx_pushed()))
}

/// Waits up to `timeout` until the engine has taken every pushed transmit
/// descriptor (driving it, if this endpoint's calls drive its engine).
pub fn flush(id: u64, timeout: Option<Duration>) -> Result<(), CapiError> {
    let func = "unet_flush";
    with_endpoint(func, id, |ep| {
        let mut wait = Wait::new(timeout, Backoff::default());
        while !ep.flush(1) {
            wait.snooze(
                func,
                "the engine has not taken every pushed transmit descriptor",
            )?;
        }
        Ok(())
    })
}

/// Takes the next message's receive descriptor, waiting as [`recv`]; its
/// buffers are the application's until given back with [`give_buffer`].
pub fn recv_desc(id: u64, timeout: Option<Duration>) -> Result<RxDesc, CapiError> {
    let func = "unet_recv_desc";
    with_state(func, id, |g| {
        let d = match g.held.take() {
            Some(d) => d,
            None => wait_for(func, &mut g.ep, &mut g.spins, timeout, |m| m.into_desc())?,
        };
        for i in 0..usize::from(d.nbufs) {
            let (w, b) = g.bit(d.offset(i));
            g.lent[w] |= b;
        }
        Ok(d)
    })
}

/// Gives the buffer at `off`, which [`recv_desc`] handed out, back to the
/// engine.
pub fn give_buffer(id: u64, off: u32) -> Result<(), CapiError> {
    let func = "unet_give_buffer";
    with_state(func, id, |g| {
        let l = *g.ep.layout();
        if !l.is_buffer(off) {
            return Err(CapiError::Range {
                func,
                why: format!(
                    "offset {off} is not the start of a buffer (the area has {} buffers of {} bytes)",
                    l.config.buffers, l.config.buffer_size
                ),
            });
        }
        let (w, b) = g.bit(off);
        if g.lent[w] & b == 0 {
            return Err(CapiError::NotHeld { func, offset: off });
        }
        if !g.ep.give_buffer(off) {
            return Err(CapiError::Send {
                func,
                source: SendError::Full,
            });
        }
        g.lent[w] &= !b;
        Ok(())
    })
}

/// Whether the endpoint's calls drive its engine (see
/// [`Endpoint::set_drive`]).
pub fn set_drive(id: u64, drive: bool) -> Result<(), CapiError> {
    with_endpoint("unet_set_drive", id, |ep| {
        ep.set_drive(drive);
        Ok(())
    })
}

/// Does the engine work the endpoint's calls drive ([`Endpoint::poll_engine`]).
pub fn poll_engine(id: u64) -> Result<(), CapiError> {
    with_endpoint("unet_poll_engine", id, |ep| {
        ep.poll_engine();
        Ok(())
    })
}

/// Messages waiting in the receive queue (and one kept by [`recv`]).
pub fn pending(id: u64) -> Result<usize, CapiError> {
    with_state("unet_pending", id, |g| {
        Ok(g.ep.pending() + usize::from(g.held.is_some()))
    })
}

/// Whether channel `chan` was closed because its peer went away.
pub fn is_closed(id: u64, chan: u16) -> Result<bool, CapiError> {
    with_endpoint("unet_is_closed", id, |ep| Ok(ep.is_closed(chan)))
}

/// Receive descriptors that were not well formed and were skipped.
pub fn bad_descriptors(id: u64) -> Result<u64, CapiError> {
    with_endpoint("unet_endpoint_bad_descriptors", id, |ep| {
        Ok(ep.bad_descriptors())
    })
}

/// Opens a channel with options.
pub fn open_channel_with(
    id: u64,
    remote: Addr,
    remote_ep: u32,
    opts: ChannelOptions,
) -> Result<u16, CapiError> {
    let func = "unet_open_channel_with";
    with_endpoint(func, id, |ep| {
        ep.open_channel_with(remote, remote_ep, opts)
            .map_err(engine_err(func))
    })
}

/// The most threads `unet_engine_start` gives an engine.
pub const MAX_ENGINE_THREADS: usize = 64;

/// Starts an engine in this process on the `loop` transport at `addr`, with
/// `threads` threads of its own (0: the endpoints' calls drive it).
pub fn engine_start(addr: Addr, threads: usize) -> Result<u64, CapiError> {
    let func = "unet_engine_start";
    if threads > MAX_ENGINE_THREADS {
        return Err(CapiError::Invalid {
            func,
            arg: "threads",
            why: format!("{threads} threads; at most {MAX_ENGINE_THREADS}"),
        });
    }
    let net = LoopNet::new();
    let port = net.attach(addr).map_err(|e| CapiError::Invalid {
        func,
        arg: "addr",
        why: e.to_string(),
    })?;
    let engine = unet::Engine::new(Box::new(port));
    if threads > 0
        && let Err(e) = engine.start(threads)
    {
        // The threads that did start would hold the engine forever.
        engine.stop();
        return Err(CapiError::Engine {
            func,
            source: EngineError::Memory(e),
        });
    }
    let id = next_id();
    let st = Arc::new(EngineState {
        engine,
        _net: net,
        server: Mutex::new(None),
    });
    with_table_mut(|t| t.engines.insert(id, st));
    Ok(id)
}

/// Serves the daemon's protocol for engine `id` on the Unix socket `path`
/// (as `fastpath engine --socket PATH` does), until the engine stops.
pub fn engine_serve(id: u64, path: &str) -> Result<(), CapiError> {
    let func = "unet_engine_serve";
    let st = engine(func, id)?;
    let mut server = lock(&st.server);
    if server.is_some() {
        return Err(CapiError::Invalid {
            func,
            arg: "engine",
            why: "the engine already serves a socket".into(),
        });
    }
    let s =
        unet::daemon::serve(st.engine.clone(), path.as_ref()).map_err(|e| CapiError::Invalid {
            func,
            arg: "socket_path",
            why: format!("serving {path}: {e}"),
        })?;
    *server = Some(s);
    Ok(())
}

/// The own counters of the engine the client `id` is connected to, within
/// the daemon's budget of reads for this process.
pub fn client_engine_counts(id: u64) -> Result<EngineCounts, CapiError> {
    let func = "unet_client_engine_counts";
    client(func, id)?
        .engine_counts(&[])
        .map(|c| c.engine)
        .map_err(engine_err(func))
}

/// The in-process engine's own counters.
pub fn engine_counts(id: u64) -> Result<EngineCounts, CapiError> {
    Ok(engine("unet_engine_counts", id)?.engine.counts())
}

/// The in-process engine's address.
pub fn engine_local(id: u64) -> Result<Addr, CapiError> {
    Ok(engine("unet_engine_local_addr", id)?.engine.local())
}

/// Creates an endpoint on the in-process engine `id`.
pub fn engine_create_endpoint(
    id: u64,
    config: Config,
    applet: Option<&[u8]>,
) -> Result<u64, CapiError> {
    let func = "unet_engine_endpoint_create";
    let st = engine(func, id)?;
    let ep = st
        .engine
        .create_endpoint(config, applet)
        .map_err(engine_err(func))?;
    Ok(add_endpoint(ep))
}

/// Stops the in-process engine `id`: its daemon, if any, then its threads.
/// Its endpoints stay valid handles until closed (an endpoint with no
/// threads behind it drives the engine from its own calls).
pub fn engine_stop(id: u64) -> Result<(), CapiError> {
    let st = with_table_mut(|t| t.engines.remove(&id)).ok_or(CapiError::BadHandle {
        func: "unet_engine_stop",
        kind: Kind::Engine,
        id,
    })?;
    if let Some(s) = lock(&st.server).take() {
        s.shutdown();
    }
    st.engine.stop();
    Ok(())
}

/// The built-in applet called `name` (its class name, e.g. `StandardUnet`,
/// ignoring ASCII case: `unet::applets::ALL`).
pub fn builtin_applet(name: &str) -> Result<&'static [u8], CapiError> {
    unet::applets::by_name(name).ok_or_else(|| CapiError::Invalid {
        func: "unet_applet_builtin",
        arg: "name",
        why: format!(
            "no built-in applet `{name}` (there are: {})",
            unet::applets::ALL
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}
