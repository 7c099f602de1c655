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
use unet::layout::{INLINE_MAX, RX_BUFFERS_MAX};
use unet::{Addr, ChannelOptions, Config, EngineCounts, PortCounts, RxDesc};

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

/// An endpoint's layout (`unet::layout::Layout`) and the transmit region
/// `unet_send` allocates from.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct unet_layout {
    /// Its sizes.
    pub config: unet_config,
    /// The longest message one descriptor carries: 14 buffers.
    pub max_message: u32,
    /// Bytes in the buffer area (`buffers * buffer_size`).
    pub area_len: u64,
    /// Bytes `[0, tx_region)` of the area are `unet_send`'s transmit
    /// region; the buffers after it are the engine's, for reception.
    pub tx_region: u64,
}

/// A received message's descriptor (`unet::RxDesc`, its buffer offsets
/// decoded): inline (`nbufs == 0`, the bytes in `data`) or in `nbufs`
/// buffers of the area, each but the last full.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct unet_rx_desc {
    /// The message's length in bytes.
    pub len: u32,
    /// The channel it arrived on.
    pub chan: u16,
    /// Buffers holding it; 0 if inline.
    pub nbufs: u16,
    /// The buffers' offsets in the buffer area, `nbufs` of them.
    pub offsets: [u32; RX_BUFFERS_MAX],
    /// The message, if inline.
    pub data: [u8; INLINE_MAX],
}

impl From<RxDesc> for unet_rx_desc {
    fn from(d: RxDesc) -> Self {
        let mut out = unet_rx_desc {
            len: d.len,
            chan: d.chan,
            nbufs: u16::from(d.nbufs),
            offsets: [0; RX_BUFFERS_MAX],
            data: [0; INLINE_MAX],
        };
        if d.nbufs == 0 {
            out.data = d.data;
        } else {
            for (i, o) in out.offsets.iter_mut().enumerate().take(d.nbufs.into()) {
                *o = d.offset(i);
            }
        }
        out
    }
}

/// A channel's options (`unet::ChannelOptions`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct unet_channel_options {
    /// 1: frames carry a UDP checksum, computed while copying, and the
    /// receiver checks it; 0: none. Other values are refused.
    pub checksum: u32,
}

/// An engine's own counters (`unet::EngineCounts`, same fields in
/// order): an in-process engine's (`unet_engine_counts`) or a daemon's
/// (`unet_client_engine_counts`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct unet_engine_counters {
    /// Frames received from the transport.
    pub frames_in: u64,
    /// Frames that matched no filter, or whose endpoint is gone.
    pub unmatched: u64,
    /// Frames that failed the header check.
    pub malformed: u64,
    /// Frames handed to the transport.
    pub frames_out: u64,
    /// Frames the transport refused or failed to send.
    pub send_errors: u64,
    /// Frames the transport could not route.
    pub transport_no_route: u64,
    /// Frames dropped at a full destination queue.
    pub transport_queue_full: u64,
    /// Frames lost before the transport saw them.
    pub transport_overruns: u64,
    /// Frames that were not unet frames.
    pub transport_not_unet: u64,
    /// Frames dropped because their endpoint closed.
    pub closed: u64,
}

impl From<EngineCounts> for unet_engine_counters {
    fn from(c: EngineCounts) -> Self {
        unet_engine_counters {
            frames_in: c.frames_in,
            unmatched: c.unmatched,
            malformed: c.malformed,
            frames_out: c.frames_out,
            send_errors: c.send_errors,
            transport_no_route: c.transport_no_route,
            transport_queue_full: c.transport_queue_full,
            transport_overruns: c.transport_overruns,
            transport_not_unet: c.transport_not_unet,
            closed: c.closed,
        }
    }
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
/// The bytes it finds there are unspecified (zeros, or what earlier
/// messages of the endpoint left): it must write all `len` of them. It
/// must return normally.
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
    if len > isize::MAX as usize {
        return Err(CapiError::Range {
            func,
            why: format!("argument `{arg}`: a length of {len} bytes is more than any object holds"),
        });
    }
    // SAFETY: non-NULL and valid for `len` bytes by the caller's contract
    // (a length no object can have was refused above).
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
/// `applet` NULL with length 0: standard U-Net. Through a daemon an applet
/// is loaded as [`unet_set_applet`] loads one: `UNET_EAGAIN` once the
/// process's budget of compiling is spent.
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
/// to channel `chan`; its id in `*filter_id`. Through a daemon,
/// `UNET_EAGAIN` once the process's budget of compiling is spent, and
/// `unet_last_error` says when to try again.
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
        if len > 0 && msg.is_null() {
            return Err(null(f, "msg"));
        }
        // The bytes are read only once `len` is known to fit the endpoint,
        // so a length no buffer has is an error, not a read past `msg`.
        api::send_with(f, ep.id, chan, len, |buf| {
            // SAFETY: `buf` is `len` writable bytes of the transmit region
            // and `msg` `len` readable bytes by the caller's contract;
            // `copy` allows the two to overlap (a `msg` in the area).
            unsafe { std::ptr::copy(msg.cast::<u8>(), buf.as_mut_ptr(), buf.len()) }
        })
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
        api::send_with(f, ep.id, chan, len, |buf| {
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
        let timeout = timeout(timeout_ms);
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
        // No message is longer than LONGEST, so no more of `buf` is ever
        // written, and a `cap` larger than any object is never a slice.
        let cap = cap.min(LONGEST);
        let out: &mut [u8] = if cap == 0 {
            &mut []
        } else if buf.is_null() {
            return Err(null(f, "buf"));
        } else {
            // SAFETY: non-NULL and `cap` writable bytes by the caller's
            // contract (`cap` no more than the caller's); no other
            // reference to them exists during the call.
            unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), cap) }
        };
        let timeout = timeout(timeout_ms);
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

/// The longest message any endpoint receives: 14 buffers of the largest
/// buffer size.
const LONGEST: usize = RX_BUFFERS_MAX * 65536;

/// Writes the endpoint's layout to `out`: its sizes, the longest message
/// a descriptor carries, the buffer area's length, and the transmit
/// region `unet_send` uses.
///
/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_endpoint_layout(ep: unet_endpoint, out: *mut unet_layout) -> c_int {
    let f = "unet_endpoint_layout";
    api::guard(f, || {
        need(f, "out", out)?;
        let (config, max_message, area_len, tx_region) = api::layout(ep.id)?;
        let l = unet_layout {
            config: config.into(),
            max_message,
            area_len,
            tx_region,
        };
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, l) }
    })
}

/// The endpoint's buffer area, mapped in this process: its first byte to
/// `*base`, its length to `*len`. Offsets in descriptors are from `base`.
/// Valid until the endpoint is closed.
///
/// # Safety
/// `base`, `len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_endpoint_area(
    ep: unet_endpoint,
    base: *mut *mut c_void,
    len: *mut usize,
) -> c_int {
    let f = "unet_endpoint_area";
    api::guard(f, || {
        need(f, "base", base)?;
        need(f, "len", len)?;
        let (p, n) = api::area(ep.id)?;
        // SAFETY: the caller's contract, passed on.
        unsafe {
            put(f, "base", base, p.cast())?;
            put(f, "len", len, n)
        }
    })
}

/// Copies the `len` bytes at `data` into the buffer area at `offset` (for
/// `unet_push_tx`). `UNET_ERANGE` if they do not lie in the area.
///
/// # Safety
/// `data` NULL or `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_write_area(
    ep: unet_endpoint,
    offset: u32,
    data: *const c_void,
    len: usize,
) -> c_int {
    let f = "unet_write_area";
    api::guard(f, || {
        // SAFETY: the caller's contract, passed on; read only once the
        // range is known to lie in the area.
        api::write_area(ep.id, offset, len, || unsafe {
            bytes(f, "data", data, len)
        })
    })
}

/// Pushes a transmit descriptor for the `len` bytes at `offset` in the
/// buffer area, on channel `chan`; its number to `*seq` (NULL: not
/// wanted), for `unet_tx_status`.
///
/// # Safety
/// `seq` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_push_tx(
    ep: unet_endpoint,
    chan: u16,
    offset: u32,
    len: u32,
    seq: *mut u32,
) -> c_int {
    let f = "unet_push_tx";
    api::guard(f, || {
        let n = api::push_tx(ep.id, chan, offset, len)?;
        if !seq.is_null() {
            // SAFETY: the caller's contract, passed on.
            unsafe { put(f, "seq", seq, n)? };
        }
        Ok(())
    })
}

/// What the engine did with transmit descriptor number `seq`
/// (`UNET_TX_*`) to `*status`; only the last `tx_depth` pushed have one
/// (`UNET_ERANGE` for another number).
///
/// # Safety
/// `status` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_tx_status(ep: unet_endpoint, seq: u32, status: *mut c_int) -> c_int {
    let f = "unet_tx_status";
    api::guard(f, || {
        need(f, "status", status)?;
        let s = api::tx_status(ep.id, seq)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "status", status, s as u16 as c_int) }
    })
}

/// How many transmit descriptors were pushed, in all (wrapping at 2³²):
/// the number the next one gets.
///
/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_tx_pushed(ep: unet_endpoint, out: *mut u32) -> c_int {
    let f = "unet_tx_pushed";
    api::guard(f, || {
        let n = api::tx_pushed(ep.id)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, n) }
    })
}

/// Waits up to `timeout_ms` (0: one look; negative: no limit) until the
/// engine has taken every pushed transmit descriptor.
#[unsafe(no_mangle)]
pub extern "C" fn unet_flush(ep: unet_endpoint, timeout_ms: c_int) -> c_int {
    api::guard("unet_flush", || api::flush(ep.id, timeout(timeout_ms)))
}

/// Takes the next message's descriptor into `*out`, waiting as
/// `unet_recv`. Its buffers are the application's, to read (and write) in
/// place through `unet_endpoint_area`, until it gives each back with
/// `unet_give_buffer`.
///
/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_recv_desc(
    ep: unet_endpoint,
    out: *mut unet_rx_desc,
    timeout_ms: c_int,
) -> c_int {
    let f = "unet_recv_desc";
    api::guard(f, || {
        need(f, "out", out)?;
        let d = api::recv_desc(ep.id, timeout(timeout_ms))?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, d.into()) }
    })
}

/// Gives the buffer at `offset`, which `unet_recv_desc` handed out, back to
/// the engine. `UNET_ERANGE` if no buffer starts there, `UNET_ENOTHELD` if
/// the application does not hold it (never handed out, or given back).
#[unsafe(no_mangle)]
pub extern "C" fn unet_give_buffer(ep: unet_endpoint, offset: u32) -> c_int {
    api::guard("unet_give_buffer", || api::give_buffer(ep.id, offset))
}

/// Whether the endpoint's calls drive an engine in this process (nonzero,
/// the default) or leave it to the engine's threads (0).
#[unsafe(no_mangle)]
pub extern "C" fn unet_set_drive(ep: unet_endpoint, drive: c_int) -> c_int {
    api::guard("unet_set_drive", || api::set_drive(ep.id, drive != 0))
}

/// Does the engine work the endpoint's calls drive (its transmit queue,
/// its applet's waiting frames, the transport), without sending or
/// receiving; nothing for a daemon's endpoint.
#[unsafe(no_mangle)]
pub extern "C" fn unet_poll_engine(ep: unet_endpoint) -> c_int {
    api::guard("unet_poll_engine", || api::poll_engine(ep.id))
}

/// How many messages wait to be received.
///
/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_pending(ep: unet_endpoint, out: *mut usize) -> c_int {
    let f = "unet_pending";
    api::guard(f, || {
        need(f, "out", out)?;
        let n = api::pending(ep.id)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, n) }
    })
}

/// Whether channel `chan` was closed because its peer went away (1) or
/// not (0), to `*closed`.
///
/// # Safety
/// `closed` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_is_closed(ep: unet_endpoint, chan: u16, closed: *mut c_int) -> c_int {
    let f = "unet_is_closed";
    api::guard(f, || {
        need(f, "closed", closed)?;
        let c = api::is_closed(ep.id, chan)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "closed", closed, c_int::from(c)) }
    })
}

/// Receive descriptors the engine published that were not well formed
/// and were skipped, to `*out`.
///
/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_endpoint_bad_descriptors(ep: unet_endpoint, out: *mut u64) -> c_int {
    let f = "unet_endpoint_bad_descriptors";
    api::guard(f, || {
        need(f, "out", out)?;
        let n = api::bad_descriptors(ep.id)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, n) }
    })
}

/// `unet_open_channel` with options (`opts` NULL: the defaults).
///
/// # Safety
/// `opts` NULL or readable; `chan` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_open_channel_with(
    ep: unet_endpoint,
    remote: unet_addr,
    remote_ep: u32,
    opts: *const unet_channel_options,
    chan: *mut u16,
) -> c_int {
    let f = "unet_open_channel_with";
    api::guard(f, || {
        need(f, "chan", chan)?;
        let o = if opts.is_null() {
            ChannelOptions::default()
        } else {
            // SAFETY: non-NULL and readable by the caller's contract.
            let o = unsafe { opts.read() };
            let checksum = match o.checksum {
                0 => false,
                1 => true,
                v => {
                    return Err(CapiError::Invalid {
                        func: f,
                        arg: "opts",
                        why: format!("field `checksum` is {v}; it must be 0 or 1"),
                    });
                }
            };
            ChannelOptions { checksum }
        };
        let c = api::open_channel_with(ep.id, remote.into(), remote_ep, o)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "chan", chan, c) }
    })
}

/// The in-process engine's own counters (frames in and out, drops by
/// reason), to `*out`.
///
/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_engine_counts(
    engine: unet_engine,
    out: *mut unet_engine_counters,
) -> c_int {
    let f = "unet_engine_counts";
    api::guard(f, || {
        need(f, "out", out)?;
        let c = api::engine_counts(engine.id)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, c.into()) }
    })
}

/// The own counters of the engine the client is connected to (a
/// `fastpath engine` daemon's), to `*out`: the same totals
/// `unet_engine_counts` gives of an in-process engine. The daemon allows a
/// process a budget of such reads a second (100 by default);
/// past it the call is `UNET_EAGAIN`, and `unet_last_error` says when to
/// try again.
///
/// # Safety
/// `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn unet_client_engine_counts(
    client: unet_client,
    out: *mut unet_engine_counters,
) -> c_int {
    let f = "unet_client_engine_counts";
    api::guard(f, || {
        need(f, "out", out)?;
        let c = api::client_engine_counts(client.id)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { put(f, "out", out, c.into()) }
    })
}

/// A C timeout in milliseconds: negative is none.
fn timeout(ms: c_int) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
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
