//! The exported C functions: every `unsafe` of the crate. Each function
//! checks its pointers for NULL, turns them into references and slices,
//! and calls the safe operation in [`crate::api`] inside
//! [`api::guard`] (which catches panics, so none crosses the boundary).
//!
//! What C can get wrong and this cannot detect is the contract each
//! function's `# Safety` states: a non-NULL pointer must be valid for the
//! length given (a buffer of `len` bytes, a NUL-terminated string, a
//! writable out-parameter). Handles are numbers checked against the handle
//! table, so stale, closed or forged handles are errors, not UB.

#![allow(non_camel_case_types)]

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::time::Duration;

use crate::api::{self, CapiError};
use unet::{Addr, Config, PortCounts};

/// A connection to a `fastpath engine` daemon (0 is never a handle).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct unet_client {
    /// The handle's number.
    pub id: u64,
}

/// An endpoint, of a daemon's engine or an in-process one.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct unet_endpoint {
    /// The handle's number.
    pub id: u64,
}

/// An in-process engine on the `loop` transport.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct unet_engine {
    /// The handle's number.
    pub id: u64,
}

/// An address on the unet network: IPv4 address (network order, `ip[0]` is
/// the first octet) and UDP port (host order).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct unet_addr {
    /// The IPv4 address's octets.
    pub ip: [u8; 4],
    /// The UDP port.
    pub port: u16,
}

/// An endpoint's sizes (`unet::Config`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct unet_config {
    /// Buffers in the buffer area.
    pub buffers: u32,
    /// Bytes per buffer (a power of two, 64 to 65,536).
    pub buffer_size: u32,
    /// Transmit queue depth (a power of two).
    pub tx_depth: u32,
    /// Receive queue depth (a power of two).
    pub rx_depth: u32,
    /// Free queue depth (a power of two, at least `buffers`).
    pub free_depth: u32,
}

/// An endpoint's counters (`unet::PortCounts`, same fields in order).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct unet_counts {
    /// Transmit descriptors taken.
    pub tx_descriptors: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Transmit descriptors rejected.
    pub tx_rejected: u64,
    /// Transmit descriptors on closed channels.
    pub tx_closed: u64,
    /// Messages delivered.
    pub rx_delivered: u64,
    /// Frames dropped for want of a free buffer.
    pub rx_no_buffer: u64,
    /// Frames dropped with the receive queue full.
    pub rx_queue_full: u64,
    /// Frames too long for the endpoint.
    pub rx_too_long: u64,
    /// Frames with a bad UDP checksum.
    pub rx_bad_checksum: u64,
    /// Applet traps.
    pub applet_traps: u64,
    /// Frames the applet dropped.
    pub applet_drops: u64,
    /// Invalid buffers given back.
    pub free_invalid: u64,
    /// Corrupt queue indices seen.
    pub queue_corrupt: u64,
    /// Applet fuel overruns.
    pub applet_overruns: u64,
    /// Times the endpoint was set aside after an overrun.
    pub applet_throttled: u64,
}

impl From<PortCounts> for unet_counts {
    fn from(c: PortCounts) -> Self {
        unet_counts {
            tx_descriptors: c.tx_descriptors,
            tx_frames: c.tx_frames,
            tx_rejected: c.tx_rejected,
            tx_closed: c.tx_closed,
            rx_delivered: c.rx_delivered,
            rx_no_buffer: c.rx_no_buffer,
            rx_queue_full: c.rx_queue_full,
            rx_too_long: c.rx_too_long,
            rx_bad_checksum: c.rx_bad_checksum,
            applet_traps: c.applet_traps,
            applet_drops: c.applet_drops,
            free_invalid: c.free_invalid,
            queue_corrupt: c.queue_corrupt,
            applet_overruns: c.applet_overruns,
            applet_throttled: c.applet_throttled,
        }
    }
}

impl From<Config> for unet_config {
    fn from(c: Config) -> Self {
        unet_config {
            buffers: c.buffers,
            buffer_size: c.buffer_size,
            tx_depth: c.tx_depth,
            rx_depth: c.rx_depth,
            free_depth: c.free_depth,
        }
    }
}

impl From<unet_config> for Config {
    fn from(c: unet_config) -> Self {
        Config {
            buffers: c.buffers,
            buffer_size: c.buffer_size,
            tx_depth: c.tx_depth,
            rx_depth: c.rx_depth,
            free_depth: c.free_depth,
        }
    }
}

impl From<Addr> for unet_addr {
    fn from(a: Addr) -> Self {
        unet_addr {
            ip: a.ip.octets(),
            port: a.port,
        }
    }
}

impl From<unet_addr> for Addr {
    fn from(a: unet_addr) -> Self {
        Addr::new(a.ip.into(), a.port)
    }
}

/// Called by `unet_recv_inplace` on each piece of a message, in order, in
/// the endpoint's memory (valid only during the call). It must return
/// normally (no `longjmp`, no C++ exception).
pub type unet_piece_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, piece: *const c_void, len: usize)>;

/// Called by `unet_send_inplace` once, to write the `len`-byte message at
/// `buf` in the endpoint's transmit region (valid only during the call).
/// It must return normally.
pub type unet_fill_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, buf: *mut c_void, len: usize)>;

fn null(func: &'static str, arg: &'static str) -> CapiError {
    CapiError::Null { func, arg }
}

/// Writes `v` through the out-parameter `out`.
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn put<T>(
    func: &'static str,
    arg: &'static str,
    out: *mut T,
    v: T,
) -> Result<(), CapiError> {
    if out.is_null() {
        return Err(null(func, arg));
    }
    // SAFETY: non-NULL, and valid for a write by the caller's contract.
    unsafe { out.write(v) };
    Ok(())
}

/// Checks that an out-parameter is not NULL before the work is done.
fn need<T>(func: &'static str, arg: &'static str, out: *mut T) -> Result<(), CapiError> {
    if out.is_null() {
        Err(null(func, arg))
    } else {
        Ok(())
    }
}

/// The UTF-8 string at `s`.
///
/// # Safety
/// `s` is NULL or points at a NUL-terminated string alive for `'a`.
unsafe fn string<'a>(
    func: &'static str,
    arg: &'static str,
    s: *const c_char,
) -> Result<&'a str, CapiError> {
    if s.is_null() {
        return Err(null(func, arg));
    }
    // SAFETY: non-NULL and NUL-terminated by the caller's contract.
    let c = unsafe { CStr::from_ptr(s) };
    c.to_str().map_err(|e| CapiError::Utf8 {
        func,
        arg,
        offset: e.valid_up_to(),
    })
}

/// The `len` bytes at `p` (NULL allowed when `len` is 0).
///
/// # Safety
/// `p` is NULL or valid for reads of `len` bytes for `'a`.
unsafe fn bytes<'a>(
    func: &'static str,
    arg: &'static str,
    p: *const c_void,
    len: usize,
) -> Result<&'a [u8], CapiError> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(null(func, arg));
    }
    // SAFETY: non-NULL and valid for `len` bytes by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// An optional applet: NULL (or length 0) for standard U-Net.
///
/// # Safety
/// As [`bytes`].
unsafe fn applet<'a>(
    func: &'static str,
    p: *const u8,
    len: usize,
) -> Result<Option<&'a [u8]>, CapiError> {
    if p.is_null() && len == 0 {
        return Ok(None);
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { bytes(func, "applet", p.cast(), len) }.map(Some)
}

/// An optional config: NULL for the defaults.
///
/// # Safety
/// `p` is NULL or valid for a read of `unet_config`.
unsafe fn config(p: *const unet_config) -> Config {
    if p.is_null() {
        Config::default()
    } else {
        // SAFETY: non-NULL and valid for a read by the caller's contract.
        Config::from(unsafe { p.read() })
    }
}

/// A fixed description of an error code; never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn unet_strerror(code: c_int) -> *const c_char {
    api::strerror(code).as_ptr()
}

/// The message of this thread's last failed call ("" before any); valid
/// until this thread's next failing call. Never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn unet_last_error() -> *const c_char {
    api::last_error()
}

/// Writes the default endpoint config to `out`.
///
/// # Safety
/// `out` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_config_default(out: *mut unet_config) -> c_int {
    api::guard("unet_config_default", || {
        // SAFETY: the caller's contract, passed on.
        unsafe { put("unet_config_default", "out", out, Config::default().into()) }
    })
}

/// Connects to the daemon at the Unix socket `path`.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_connect(path: *const c_char, out: *mut unet_client) -> c_int {
    let f = "unet_connect";
    api::guard(f, || {
        need(f, "out", out)?;
        // SAFETY: the caller's contract, passed on.
        let path = unsafe { string(f, "path", path) }?;
        let id = api::connect(path)?;
        // SAFETY: as above.
        unsafe { put(f, "out", out, unet_client { id }) }
    })
}

/// Closes a client handle; its endpoints stay open until closed.
#[unsafe(no_mangle)]
pub extern "C" fn unet_disconnect(client: unet_client) -> c_int {
    api::guard("unet_disconnect", || api::disconnect(client.id))
}

/// The address of the client's engine.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_client_local_addr(client: unet_client, out: *mut unet_addr) -> c_int {
    let f = "unet_client_local_addr";
    api::guard(f, || {
        let a = api::client_local(client.id)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, a.into()) }
    })
}

/// Creates an endpoint on the client's engine. `config` NULL: defaults;
/// `applet` NULL with length 0: standard U-Net.
///
/// # Safety
/// `config` NULL or readable; `applet` NULL or `applet_len` readable bytes;
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_endpoint_create(
    client: unet_client,
    config: *const unet_config,
    applet: *const u8,
    applet_len: usize,
    out: *mut unet_endpoint,
) -> c_int {
    let f = "unet_endpoint_create";
    api::guard(f, || {
        need(f, "out", out)?;
        // SAFETY: the caller's contract, passed on.
        let (cfg, app) = unsafe { (self::config(config), self::applet(f, applet, applet_len)?) };
        let id = api::create_endpoint(client.id, cfg, app)?;
        // SAFETY: as above.
        unsafe { put(f, "out", out, unet_endpoint { id }) }
    })
}

/// Closes an endpoint handle and removes the endpoint from its engine.
#[unsafe(no_mangle)]
pub extern "C" fn unet_endpoint_close(ep: unet_endpoint) -> c_int {
    api::guard("unet_endpoint_close", || api::close_endpoint(ep.id))
}

/// The endpoint's id on its engine (to give a peer's `unet_open_channel`).
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_endpoint_id(ep: unet_endpoint, out: *mut u32) -> c_int {
    let f = "unet_endpoint_id";
    api::guard(f, || {
        let id = api::with_endpoint(f, ep.id, |e| Ok(e.id()))?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, id) }
    })
}

/// The largest message the endpoint sends, in bytes.
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_endpoint_max_message(ep: unet_endpoint, out: *mut usize) -> c_int {
    let f = "unet_endpoint_max_message";
    api::guard(f, || {
        let n = api::with_endpoint(f, ep.id, |e| Ok(e.max_message()))?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, n) }
    })
}

/// The endpoint's counters (all zero if its engine cannot be reached).
///
/// # Safety
/// `out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_endpoint_counts(ep: unet_endpoint, out: *mut unet_counts) -> c_int {
    let f = "unet_endpoint_counts";
    api::guard(f, || {
        need(f, "out", out)?;
        let c = api::counts(ep.id)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, c.into()) }
    })
}

/// Opens a channel to endpoint `remote_ep` of the engine at `remote`; its
/// tag in `*chan`.
///
/// # Safety
/// `chan` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_open_channel(
    ep: unet_endpoint,
    remote: unet_addr,
    remote_ep: u32,
    chan: *mut u16,
) -> c_int {
    let f = "unet_open_channel";
    api::guard(f, || {
        need(f, "chan", chan)?;
        let c = api::with_endpoint(f, ep.id, |e| {
            e.open_channel(remote.into(), remote_ep)
                .map_err(|source| CapiError::Engine { func: f, source })
        })?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "chan", chan, c) }
    })
}

/// Installs a filter (pcap syntax, dpf) delivering the frames it matches
/// to channel `chan`; its id in `*filter_id`.
///
/// # Safety
/// `filter` NULL or NUL-terminated; `filter_id` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_install_filter(
    ep: unet_endpoint,
    chan: u16,
    filter: *const c_char,
    priority: i32,
    filter_id: *mut u64,
) -> c_int {
    let f = "unet_install_filter";
    api::guard(f, || {
        need(f, "filter_id", filter_id)?;
        // SAFETY: the caller's contract, passed on.
        let text = unsafe { string(f, "filter", filter) }?;
        let id = api::with_endpoint(f, ep.id, |e| {
            e.install_filter(chan, text, priority)
                .map_err(|source| CapiError::Engine { func: f, source })
        })?;
        // SAFETY: as above.
        unsafe { put(f, "filter_id", filter_id, id.0) }
    })
}

/// Removes a filter `unet_install_filter` installed.
#[unsafe(no_mangle)]
pub extern "C" fn unet_remove_filter(ep: unet_endpoint, filter_id: u64) -> c_int {
    let f = "unet_remove_filter";
    api::guard(f, || {
        api::with_endpoint(f, ep.id, |e| {
            e.remove_filter(dpf::FilterId(filter_id))
                .map_err(|source| CapiError::Engine { func: f, source })
        })
    })
}

/// Replaces the endpoint's applet (a class file; NULL with length 0:
/// standard U-Net).
///
/// # Safety
/// `applet` NULL or `applet_len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_set_applet(
    ep: unet_endpoint,
    applet: *const u8,
    applet_len: usize,
) -> c_int {
    let f = "unet_set_applet";
    api::guard(f, || {
        // SAFETY: the caller's contract, passed on.
        let app = unsafe { self::applet(f, applet, applet_len) }?;
        api::with_endpoint(f, ep.id, |e| {
            e.set_applet(app)
                .map_err(|source| CapiError::Engine { func: f, source })
        })
    })
}

/// A built-in applet's class file by its class name (e.g. `StandardUnet`,
/// ignoring ASCII case); the bytes are static.
///
/// # Safety
/// `name` NULL or NUL-terminated; `bytes`, `len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_applet_builtin(
    name: *const c_char,
    bytes: *mut *const u8,
    len: *mut usize,
) -> c_int {
    let f = "unet_applet_builtin";
    api::guard(f, || {
        need(f, "bytes", bytes)?;
        need(f, "len", len)?;
        // SAFETY: the caller's contract, passed on.
        let b = api::builtin_applet(unsafe { string(f, "name", name) }?)?;
        // SAFETY: as above.
        unsafe {
            put(f, "bytes", bytes, b.as_ptr())?;
            put(f, "len", len, b.len())
        }
    })
}

/// Sends a copy of the `len` bytes at `msg` on channel `chan`.
///
/// # Safety
/// `msg` NULL or `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_send(
    ep: unet_endpoint,
    chan: u16,
    msg: *const c_void,
    len: usize,
) -> c_int {
    let f = "unet_send";
    api::guard(f, || {
        // SAFETY: the caller's contract, passed on.
        let m = unsafe { bytes(f, "msg", msg, len) }?;
        api::send(ep.id, chan, m)
    })
}

/// Sends a `len`-byte message that `fill(ctx, buf, len)` writes in place
/// in the endpoint's transmit region (no copy).
///
/// # Safety
/// `fill` NULL or a function as [`unet_fill_fn`] says, which may be given
/// `ctx`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_send_inplace(
    ep: unet_endpoint,
    chan: u16,
    len: usize,
    fill: unet_fill_fn,
    ctx: *mut c_void,
) -> c_int {
    let f = "unet_send_inplace";
    api::guard(f, || {
        let fill = fill.ok_or(null(f, "fill"))?;
        api::send_with(ep.id, chan, len, |buf| {
            // SAFETY: `buf` is `len` writable bytes of the transmit region,
            // alive for the call; `fill` and `ctx` by the caller's contract.
            unsafe { fill(ctx, buf.as_mut_ptr().cast(), buf.len()) }
        })
    })
}

/// Receives the next message in place: calls `piece(ctx, bytes, n)` on
/// each of its pieces in order (the bytes inline in the descriptor, or
/// each receive buffer's share), then gives its buffers back to the
/// engine. Its length to `*len`, its channel to `*chan` (NULL: not
/// wanted). Waits as `unet_recv`.
///
/// # Safety
/// `piece` NULL or a function as [`unet_piece_fn`] says, which may be given
/// `ctx`; `len` NULL or writable; `chan` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_recv_inplace(
    ep: unet_endpoint,
    piece: unet_piece_fn,
    ctx: *mut c_void,
    len: *mut usize,
    chan: *mut u16,
    timeout_ms: c_int,
) -> c_int {
    let f = "unet_recv_inplace";
    api::guard(f, || {
        need(f, "len", len)?;
        let piece = piece.ok_or(null(f, "piece"))?;
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        let (n, c) = api::recv_with(ep.id, timeout, |p| {
            // SAFETY: `p` is readable for its length during the call;
            // `piece` and `ctx` by the caller's contract.
            unsafe { piece(ctx, p.as_ptr().cast(), p.len()) }
        })?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "len", len, n)? };
        if !chan.is_null() {
            // SAFETY: as above.
            unsafe { put(f, "chan", chan, c)? };
        }
        Ok(())
    })
}

/// Receives the next message: copies it into `buf` (`cap` bytes), its
/// length to `*len` and its channel to `*chan` (NULL: not wanted). Waits up
/// to `timeout_ms` milliseconds (0: one poll; negative: without limit). A
/// message longer than `cap` stays queued: `UNET_ENOSPC`, with its length
/// in `*len`.
///
/// # Safety
/// `buf` NULL or `cap` writable bytes; `len` NULL or writable; `chan` NULL
/// or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_recv(
    ep: unet_endpoint,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
    chan: *mut u16,
    timeout_ms: c_int,
) -> c_int {
    let f = "unet_recv";
    api::guard(f, || {
        need(f, "len", len)?;
        let out: &mut [u8] = if cap == 0 {
            &mut []
        } else if buf.is_null() {
            return Err(null(f, "buf"));
        } else {
            // SAFETY: non-NULL and `cap` writable bytes by the caller's
            // contract; no other reference to them exists during the call.
            unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) }
        };
        let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        match api::recv(ep.id, out, timeout) {
            Ok((n, c)) => {
                // SAFETY: the caller's contract, passed on.
                unsafe { put(f, "len", len, n)? };
                if !chan.is_null() {
                    // SAFETY: as above.
                    unsafe { put(f, "chan", chan, c)? };
                }
                Ok(())
            }
            Err(e) => {
                if let CapiError::NoSpace { need, .. } = e {
                    // SAFETY: as above.
                    unsafe { put(f, "len", len, need)? };
                }
                Err(e)
            }
        }
    })
}

/// Starts an engine in this process on the `loop` transport at `addr`
/// (`"a.b.c.d:port"`) with `threads` threads, at most 64 (0: the endpoints' own calls
/// drive it).
///
/// # Safety
/// `addr` NULL or NUL-terminated; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_engine_start(
    addr: *const c_char,
    threads: c_uint,
    out: *mut unet_engine,
) -> c_int {
    let f = "unet_engine_start";
    api::guard(f, || {
        need(f, "out", out)?;
        // SAFETY: the caller's contract, passed on.
        let text = unsafe { string(f, "addr", addr) }?;
        let a: Addr = text.parse().map_err(|e| CapiError::Invalid {
            func: f,
            arg: "addr",
            why: format!("`{text}` is not a.b.c.d:port ({e})"),
        })?;
        let id = api::engine_start(a, threads as usize)?;
        // SAFETY: as above.
        unsafe { put(f, "out", out, unet_engine { id }) }
    })
}

/// Serves the daemon's protocol for the in-process engine on the Unix
/// socket `socket_path`, as `fastpath engine --socket PATH` does.
///
/// # Safety
/// `socket_path` NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_engine_serve(
    engine: unet_engine,
    socket_path: *const c_char,
) -> c_int {
    let f = "unet_engine_serve";
    api::guard(f, || {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { string(f, "socket_path", socket_path) }?;
        api::engine_serve(engine.id, p)
    })
}

/// The in-process engine's address.
///
/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_engine_local_addr(engine: unet_engine, out: *mut unet_addr) -> c_int {
    let f = "unet_engine_local_addr";
    api::guard(f, || {
        let a = api::engine_local(engine.id)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, a.into()) }
    })
}

/// Creates an endpoint on the in-process engine (arguments as
/// `unet_endpoint_create`).
///
/// # Safety
/// As `unet_endpoint_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_engine_endpoint_create(
    engine: unet_engine,
    config: *const unet_config,
    applet: *const u8,
    applet_len: usize,
    out: *mut unet_endpoint,
) -> c_int {
    let f = "unet_engine_endpoint_create";
    api::guard(f, || {
        need(f, "out", out)?;
        // SAFETY: the caller's contract, passed on.
        let (cfg, app) = unsafe { (self::config(config), self::applet(f, applet, applet_len)?) };
        let id = api::engine_create_endpoint(engine.id, cfg, app)?;
        // SAFETY: as above.
        unsafe { put(f, "out", out, unet_endpoint { id }) }
    })
}

/// Stops the in-process engine (its daemon, then its threads).
#[unsafe(no_mangle)]
pub extern "C" fn unet_engine_stop(engine: unet_engine) -> c_int {
    api::guard("unet_engine_stop", || api::engine_stop(engine.id))
}
