//! The C API's behaviour, called from Rust through the exported functions
//! themselves: send and receive through a daemon, the receive timeout and
//! a too-small buffer, filters, applets, counters, an in-process engine,
//! and every misuse C can cheaply commit answered with an error code and a
//! message, never a crash.

mod support;

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use support::{Daemon, Scratch};
use unet_capi::api::{self, Code};
use unet_capi::ffi::*;

const OK: i32 = 0;

fn last_error() -> String {
    // SAFETY: unet_last_error returns a NUL-terminated string that stays
    // valid until this thread's next failing call.
    unsafe { CStr::from_ptr(unet_last_error()) }
        .to_str()
        .unwrap()
        .to_string()
}

fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn connect(p: &Path) -> unet_client {
    let mut c = unet_client { id: 0 };
    // SAFETY: a C string and a writable out-parameter.
    let rc = unsafe { unet_connect(cpath(p).as_ptr(), &mut c) };
    assert_eq!(rc, OK, "{}", last_error());
    c
}

fn endpoint(c: unet_client) -> unet_endpoint {
    let mut e = unet_endpoint { id: 0 };
    // SAFETY: NULL config and applet (the defaults), a writable out.
    let rc = unsafe { unet_endpoint_create(c, std::ptr::null(), std::ptr::null(), 0, &mut e) };
    assert_eq!(rc, OK, "{}", last_error());
    e
}

fn id(e: unet_endpoint) -> u32 {
    let mut i = 0;
    // SAFETY: a writable out-parameter.
    assert_eq!(unsafe { unet_endpoint_id(e, &mut i) }, OK);
    i
}

fn channel(from: unet_endpoint, engine: unet_addr, to: unet_endpoint) -> u16 {
    let mut c = 0;
    // SAFETY: a writable out-parameter.
    let rc = unsafe { unet_open_channel(from, engine, id(to), &mut c) };
    assert_eq!(rc, OK, "{}", last_error());
    c
}

fn send(e: unet_endpoint, chan: u16, msg: &[u8]) -> i32 {
    // SAFETY: `msg` is readable for its length.
    unsafe { unet_send(e, chan, msg.as_ptr().cast(), msg.len()) }
}

/// Receives into a buffer of `cap` bytes: the code, the bytes, the channel.
fn recv(e: unet_endpoint, cap: usize, timeout_ms: i32) -> (i32, Vec<u8>, usize, u16) {
    let mut buf = vec![0u8; cap];
    let (mut len, mut chan) = (0usize, 0u16);
    // SAFETY: `buf` is writable for `cap` bytes; `len` and `chan` writable.
    let rc = unsafe {
        unet_recv(
            e,
            buf.as_mut_ptr().cast(),
            cap,
            &mut len,
            &mut chan,
            timeout_ms,
        )
    };
    let n = if rc == OK { len } else { 0 };
    buf.truncate(n);
    (rc, buf, len, chan)
}

/// A daemon, a client and two endpoints with a channel each way.
struct Pair {
    _dir: Scratch,
    _daemon: Daemon,
    socket: std::path::PathBuf,
    client: unet_client,
    engine: unet_addr,
    a: unet_endpoint,
    b: unet_endpoint,
    ab: u16,
    ba: u16,
}

fn pair(name: &str) -> Pair {
    let dir = Scratch::new(name);
    let socket = dir.0.join("engine.sock");
    let daemon = Daemon::start(&socket, 1);
    let client = connect(&socket);
    let mut engine = unet_addr {
        ip: [0; 4],
        port: 0,
    };
    // SAFETY: a writable out-parameter.
    assert_eq!(unsafe { unet_client_local_addr(client, &mut engine) }, OK);
    assert_eq!((engine.ip, engine.port), ([10, 0, 0, 1], 7000));
    let (a, b) = (endpoint(client), endpoint(client));
    let ab = channel(a, engine, b);
    let ba = channel(b, engine, a);
    Pair {
        _dir: dir,
        _daemon: daemon,
        socket,
        client,
        engine,
        a,
        b,
        ab,
        ba,
    }
}

#[test]
fn messages_go_through_the_daemon_and_a_short_buffer_keeps_the_message() {
    let p = pair("sendrecv");
    assert_eq!(send(p.a, p.ab, b"hello from C"), OK);
    let (rc, msg, _, chan) = recv(p.b, 64, 5000);
    assert_eq!((rc, msg.as_slice(), chan), (OK, &b"hello from C"[..], p.ba));

    // A 5000-byte message (two buffers) into 16 bytes: UNET_ENOSPC with
    // its length, and the same message whole at the next call.
    let big: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    assert_eq!(send(p.a, p.ab, &big), OK);
    let (rc, _, need, _) = recv(p.b, 16, 5000);
    assert_eq!((rc, need), (Code::NoSpace as i32, 5000));
    assert!(
        last_error().contains("5000 bytes, the buffer 16"),
        "{}",
        last_error()
    );
    let (rc, msg, _, chan) = recv(p.b, 5000, 0);
    assert_eq!((rc, chan), (OK, p.ba));
    assert_eq!(msg, big);

    // Nothing queued: one poll, then a wait of at least the timeout.
    assert_eq!(recv(p.b, 64, 0).0, Code::TimedOut as i32);
    let t = Instant::now();
    assert_eq!(recv(p.b, 64, 50).0, Code::TimedOut as i32);
    assert!(t.elapsed() >= Duration::from_millis(50));
    assert_eq!(last_error(), "unet_recv: no message arrived within 50 ms");

    // Longer than the endpoint's largest message.
    let mut max = 0usize;
    // SAFETY: a writable out-parameter.
    assert_eq!(unsafe { unet_endpoint_max_message(p.a, &mut max) }, OK);
    assert_eq!(send(p.a, p.ab, &vec![0; max + 1]), Code::TooLong as i32);
    assert!(
        last_error().starts_with("unet_send: message of "),
        "{}",
        last_error()
    );

    let mut c = unet_counts::default();
    // SAFETY: a writable out-parameter.
    assert_eq!(unsafe { unet_endpoint_counts(p.b, &mut c) }, OK);
    assert_eq!((c.rx_delivered, c.tx_frames), (2, 0));
    // SAFETY: as above.
    assert_eq!(unsafe { unet_endpoint_counts(p.a, &mut c) }, OK);
    assert_eq!((c.tx_descriptors, c.tx_frames), (2, 2));
}

#[test]
fn filters_and_applets_are_installed_through_the_c_api() {
    let p = pair("filters");
    // A second channel of b, to a peer that does not exist; a filter
    // routes what reaches b to it (the daemon confines any filter to
    // frames addressed to b).
    let nowhere = unet_addr {
        ip: [10, 9, 9, 9],
        port: 1,
    };
    let mut side = 0;
    // SAFETY: a writable out-parameter.
    assert_eq!(unsafe { unet_open_channel(p.b, nowhere, 1, &mut side) }, OK);
    let mut fid = 0u64;
    let udp = CString::new("udp").unwrap();
    // SAFETY: a C string and a writable out-parameter.
    let rc = unsafe { unet_install_filter(p.b, side, udp.as_ptr(), 5, &mut fid) };
    assert_eq!(rc, OK);
    assert_eq!(send(p.a, p.ab, b"to the side"), OK);
    assert_eq!(recv(p.b, 64, 5000).3, side);
    assert_eq!(unet_remove_filter(p.b, fid), OK);
    assert_eq!(send(p.a, p.ab, b"back"), OK);
    assert_eq!(recv(p.b, 64, 5000).3, p.ba);
    assert_eq!(unet_remove_filter(p.b, fid), Code::Engine as i32);

    let bad = CString::new("udp and (").unwrap();
    // SAFETY: as above.
    let rc = unsafe { unet_install_filter(p.b, side, bad.as_ptr(), 5, &mut fid) };
    assert_eq!(rc, Code::Engine as i32);
    assert!(
        last_error().starts_with("unet_install_filter: engine: filter: "),
        "{}",
        last_error()
    );

    // A built-in applet by name, set and taken off again; a class file
    // that is not one is the engine's verifier's error.
    let (mut bytes, mut len) = (std::ptr::null::<u8>(), 0usize);
    let name = CString::new("standardunet").unwrap();
    // SAFETY: a C string and writable out-parameters.
    let rc = unsafe { unet_applet_builtin(name.as_ptr(), &mut bytes, &mut len) };
    assert_eq!(rc, OK);
    assert_eq!(len, unet::applets::STANDARD.len());
    // SAFETY: the library's static bytes, `len` long.
    let rc = unsafe { unet_set_applet(p.b, bytes, len) };
    assert_eq!(rc, OK, "{}", last_error());
    assert_eq!(send(p.a, p.ab, b"through the applet"), OK);
    assert_eq!(recv(p.b, 64, 5000).1, b"through the applet");
    // SAFETY: NULL with length 0 is standard U-Net.
    assert_eq!(unsafe { unet_set_applet(p.b, std::ptr::null(), 0) }, OK);
    let junk = [0xCAu8, 0xFE, 0xBA, 0xBE, 0];
    // SAFETY: `junk` is readable for its length.
    let rc = unsafe { unet_set_applet(p.b, junk.as_ptr(), junk.len()) };
    assert_eq!(rc, Code::Engine as i32);
    assert!(
        last_error().starts_with("unet_set_applet: engine: "),
        "{}",
        last_error()
    );
    let nope = CString::new("NoSuchApplet").unwrap();
    // SAFETY: as above.
    let rc = unsafe { unet_applet_builtin(nope.as_ptr(), &mut bytes, &mut len) };
    assert_eq!(rc, Code::Invalid as i32);
    assert!(last_error().contains("no built-in applet `NoSuchApplet` (there are: StandardUnet"));
}

#[test]
fn misuse_is_an_error_code_with_a_message_never_a_crash() {
    let p = pair("misuse");
    let never = unet_endpoint { id: 0 };
    assert_eq!(send(never, 0, b"x"), Code::BadHandle as i32);
    assert_eq!(
        last_error(),
        "unet_send: endpoint handle 0 is not open (never issued, already closed, or of another kind)"
    );
    // A client's handle is not an endpoint's.
    assert_eq!(
        send(unet_endpoint { id: p.client.id }, 0, b"x"),
        Code::BadHandle as i32
    );
    // NULL out-parameters and buffers.
    // SAFETY: NULL pointers are what is being tested; nothing is written.
    unsafe {
        assert_eq!(
            unet_endpoint_id(p.a, std::ptr::null_mut()),
            Code::Null as i32
        );
        assert_eq!(last_error(), "unet_endpoint_id: argument `out` is NULL");
        assert_eq!(unet_send(p.a, p.ab, std::ptr::null(), 3), Code::Null as i32);
        let mut len = 0;
        let rc = unet_recv(
            p.b,
            std::ptr::null_mut(),
            8,
            &mut len,
            std::ptr::null_mut(),
            0,
        );
        assert_eq!(rc, Code::Null as i32);
        assert_eq!(
            unet_connect(std::ptr::null(), std::ptr::null_mut()),
            Code::Null as i32
        );
        let mut c = unet_client { id: 0 };
        assert_eq!(unet_connect(std::ptr::null(), &mut c), Code::Null as i32);
        assert_eq!(last_error(), "unet_connect: argument `path` is NULL");
    }
    // A path that is not UTF-8, named with the offset of its bad byte.
    let bad = CString::new(b"/tmp/\xffsock".to_vec()).unwrap();
    let mut c = unet_client { id: 0 };
    // SAFETY: a C string and a writable out-parameter.
    let rc = unsafe { unet_connect(bad.as_ptr(), &mut c) };
    assert_eq!(rc, Code::Invalid as i32);
    assert_eq!(
        last_error(),
        "unet_connect: argument `path` is not UTF-8 (invalid byte at offset 5)"
    );
    // Messages are per thread.
    let other = std::thread::spawn(last_error).join().unwrap();
    assert_eq!(other, "");
    // A closed channel's peer: b goes away, a's channel to it closes.
    // Double closes and use after close are errors.
    assert_eq!(unet_endpoint_close(p.b), OK);
    assert_eq!(unet_endpoint_close(p.b), Code::BadHandle as i32);
    assert_eq!(recv(p.b, 8, 0).0, Code::BadHandle as i32);
    let deadline = Instant::now() + Duration::from_secs(10);
    let rc = loop {
        let rc = send(p.a, p.ab, b"to nobody");
        // A full transmit queue (the engine not yet at it) is not the answer.
        if (rc != OK && rc != Code::Again as i32) || Instant::now() > deadline {
            break rc;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(rc, Code::Closed as i32, "{}", last_error());
    assert_eq!(unet_disconnect(p.client), OK);
    assert_eq!(unet_disconnect(p.client), Code::BadHandle as i32);
    // The endpoint outlives its client handle.
    let mut i = 0;
    // SAFETY: a writable out-parameter.
    assert_eq!(unsafe { unet_endpoint_id(p.a, &mut i) }, OK);
    assert_eq!(unet_endpoint_close(p.a), OK);
    // SAFETY: a C string and a writable out-parameter.
    let _ = unsafe { unet_connect(cpath(&p.socket).as_ptr(), &mut c) };
    assert_eq!(unet_disconnect(c), OK);
    let _ = p.engine;
}

#[test]
fn a_panic_inside_becomes_an_error_code() {
    let rc = api::guard("unet_test", || panic!("boom"));
    assert_eq!(rc, Code::Panic as i32);
    assert_eq!(
        last_error(),
        "unet_test: internal error (a panic, caught): boom"
    );
}

#[test]
fn an_in_process_engine_serves_its_own_endpoints_and_a_socket() {
    let mut e = unet_engine { id: 0 };
    let addr = CString::new("10.0.0.2:7000").unwrap();
    // SAFETY: a C string and a writable out-parameter.
    let rc = unsafe { unet_engine_start(addr.as_ptr(), 0, &mut e) };
    assert_eq!(rc, OK, "{}", last_error());
    let mut local = unet_addr {
        ip: [0; 4],
        port: 0,
    };
    // SAFETY: a writable out-parameter.
    assert_eq!(unsafe { unet_engine_local_addr(e, &mut local) }, OK);
    assert_eq!((local.ip, local.port), ([10, 0, 0, 2], 7000));
    let make = || {
        let mut ep = unet_endpoint { id: 0 };
        let mut cfg = unet_config {
            buffers: 0,
            buffer_size: 0,
            tx_depth: 0,
            rx_depth: 0,
            free_depth: 0,
        };
        // SAFETY: writable out-parameters; a config read; no applet.
        unsafe {
            assert_eq!(unet_config_default(&mut cfg), OK);
            assert_eq!(cfg.buffers, 512);
            let rc = unet_engine_endpoint_create(e, &cfg, std::ptr::null(), 0, &mut ep);
            assert_eq!(rc, OK, "{}", last_error());
        }
        ep
    };
    let (a, b) = (make(), make());
    let ab = channel(a, local, b);
    channel(b, local, a);
    // No threads: the endpoints' own calls drive the engine.
    assert_eq!(send(a, ab, b"in process"), OK);
    assert_eq!(recv(b, 64, 5000).1, b"in process");

    // The same engine, served on a socket, to a client.
    let dir = Scratch::new("inproc");
    let sock = dir.0.join("e.sock");
    // SAFETY: a C string.
    let rc = unsafe { unet_engine_serve(e, cpath(&sock).as_ptr()) };
    assert_eq!(rc, OK, "{}", last_error());
    let c = connect(&sock);
    let r = endpoint(c);
    let ar = channel(a, local, r);
    channel(r, local, a);
    assert_eq!(send(a, ar, b"to a client"), OK);
    let got = loop {
        // Nothing else drives this engine: poll `a` while waiting.
        let _ = recv(a, 8, 0);
        let (rc, m, _, _) = recv(r, 64, 0);
        if rc == OK {
            break m;
        }
    };
    assert_eq!(got, b"to a client");
    assert_eq!(unet_endpoint_close(r), OK);
    assert_eq!(unet_disconnect(c), OK);
    assert_eq!(unet_engine_stop(e), OK);
    assert_eq!(unet_engine_stop(e), Code::BadHandle as i32);
    assert_eq!(unet_endpoint_close(a), OK);
    assert_eq!(unet_endpoint_close(b), OK);

    let many = CString::new("10.0.0.3:7000").unwrap();
    // SAFETY: a C string and a writable out-parameter.
    let rc = unsafe { unet_engine_start(many.as_ptr(), 1_000_000, &mut e) };
    assert_eq!(rc, Code::Invalid as i32);
    assert_eq!(
        last_error(),
        "unet_engine_start: argument `threads`: 1000000 threads; at most 64"
    );
    let bad = CString::new("10.0.0.2").unwrap();
    // SAFETY: as above.
    let rc = unsafe { unet_engine_start(bad.as_ptr(), 0, &mut e) };
    assert_eq!(rc, Code::Invalid as i32);
    assert!(
        last_error()
            .starts_with("unet_engine_start: argument `addr`: `10.0.0.2` is not a.b.c.d:port")
    );
}

/// Writes `len` bytes of the pattern `i * 7` (the fill callback).
unsafe extern "C" fn fill_pattern(
    _ctx: *mut std::ffi::c_void,
    buf: *mut std::ffi::c_void,
    len: usize,
) {
    // SAFETY: the library gives `len` writable bytes at `buf`.
    let b = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
    for (i, x) in b.iter_mut().enumerate() {
        *x = (i * 7) as u8;
    }
}

/// Appends each piece, as its own Vec, to the `Vec<Vec<u8>>` at `ctx`.
unsafe extern "C" fn collect_piece(
    ctx: *mut std::ffi::c_void,
    piece: *const std::ffi::c_void,
    len: usize,
) {
    // SAFETY: `ctx` is the test's `Vec<Vec<u8>>`; the library gives `len`
    // readable bytes at `piece`.
    unsafe {
        let v = &mut *ctx.cast::<Vec<Vec<u8>>>();
        v.push(std::slice::from_raw_parts(piece.cast::<u8>(), len).to_vec());
    }
}

/// Receives the next message on `ep` in place (waiting up to `timeout_ms`),
/// each piece copied out by `collect_piece`: the return code, the pieces,
/// the message's length and its channel.
fn recv_pieces(ep: unet_endpoint, timeout_ms: i32) -> (i32, Vec<Vec<u8>>, usize, u16) {
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let (mut len, mut chan) = (0usize, 0u16);
    // SAFETY: `collect_piece` is given `pieces` as its context, and `len`
    // and `chan` are valid for writes.
    let rc = unsafe {
        unet_recv_inplace(
            ep,
            Some(collect_piece),
            (&raw mut pieces).cast(),
            &mut len,
            &mut chan,
            timeout_ms,
        )
    };
    (rc, pieces, len, chan)
}

#[test]
fn messages_are_written_and_read_in_place() {
    let p = pair("inplace");
    let pattern: Vec<u8> = (0..5000usize).map(|i| (i * 7) as u8).collect();
    // SAFETY: a fill function that writes exactly the bytes it is given.
    let rc =
        unsafe { unet_send_inplace(p.a, p.ab, 5000, Some(fill_pattern), std::ptr::null_mut()) };
    assert_eq!(rc, OK, "{}", last_error());
    let (rc, pieces, len, chan) = recv_pieces(p.b, 5000);
    assert_eq!((rc, len, chan), (OK, 5000, p.ba), "{}", last_error());
    // 5000 bytes in 4096-byte receive buffers: two pieces, read in place.
    assert_eq!(pieces.iter().map(Vec::len).collect::<Vec<_>>(), [4096, 904]);
    assert_eq!(pieces.concat(), pattern);

    // A short message comes inline: one piece. One that did not fit a
    // copying receive's buffer stays in its receive buffers and is handed
    // over where it lies, as any other.
    assert_eq!(send(p.a, p.ab, b"inline"), OK);
    let (rc, pieces, _, _) = recv_pieces(p.b, 5000);
    assert_eq!((rc, pieces.concat()), (OK, b"inline".to_vec()));
    assert_eq!(send(p.a, p.ab, &pattern), OK);
    assert_eq!(recv(p.b, 10, 5000).0, Code::NoSpace as i32);
    let (rc, pieces, len, _) = recv_pieces(p.b, 0);
    assert_eq!((rc, len), (OK, 5000));
    assert_eq!(pieces.iter().map(Vec::len).collect::<Vec<_>>(), [4096, 904]);
    assert_eq!(pieces.concat(), pattern);

    // NULL callbacks are refused; nothing is sent.
    // SAFETY: NULL callbacks are what is tested.
    unsafe {
        assert_eq!(
            unet_send_inplace(p.a, p.ab, 8, None, std::ptr::null_mut()),
            Code::Null as i32
        );
        assert_eq!(last_error(), "unet_send_inplace: argument `fill` is NULL");
        let (mut len, mut chan) = (0usize, 0u16);
        let rc = unet_recv_inplace(p.b, None, std::ptr::null_mut(), &mut len, &mut chan, 0);
        assert_eq!(rc, Code::Null as i32);
    }
    assert_eq!(recv(p.b, 64, 0).0, Code::TimedOut as i32);
}

/// What `close_inside` saw: the endpoint it closes, and the codes of the
/// close and of a call made after it.
struct Inside {
    ep: unet_endpoint,
    close: i32,
    after: i32,
}

/// A fill callback that closes the endpoint being sent on, then uses it.
unsafe extern "C" fn close_inside(
    ctx: *mut std::ffi::c_void,
    _buf: *mut std::ffi::c_void,
    _len: usize,
) {
    // SAFETY: `ctx` is the test's `Inside`.
    let i = unsafe { &mut *ctx.cast::<Inside>() };
    i.close = unet_endpoint_close(i.ep);
    let mut id = 0;
    // SAFETY: a writable out-parameter.
    i.after = unsafe { unet_endpoint_id(i.ep, &mut id) };
}

#[test]
fn a_closed_handle_is_refused_while_a_call_still_uses_its_endpoint() {
    let p = pair("closed-inside");
    // The handle is in this thread's recent handles (a call used it), and
    // the send below holds its endpoint while the callback closes it: the
    // next call must see the handle closed all the same.
    assert_eq!(send(p.a, p.ab, b"first"), OK);
    let mut inside = Inside {
        ep: p.a,
        close: 1,
        after: 1,
    };
    // SAFETY: `close_inside` is given `inside` as its context.
    let rc =
        unsafe { unet_send_inplace(p.a, p.ab, 8, Some(close_inside), (&raw mut inside).cast()) };
    assert_eq!(rc, OK, "{}", last_error());
    assert_eq!((inside.close, inside.after), (OK, Code::BadHandle as i32));
    assert_eq!(send(p.a, p.ab, b"after"), Code::BadHandle as i32);
    let _ = p.b;
}

/// What `call_inside` saw: the codes of endpoint calls made from inside an
/// in-place callback, on the endpoint being used and on another one.
struct Nested {
    own: unet_endpoint,
    other: unet_endpoint,
    chan: u16,
    codes: Vec<i32>,
    message: String,
}

/// An in-place callback (a fill or a piece callback: the same three
/// arguments) that calls the C API on its own endpoint and on another.
unsafe extern "C" fn call_inside(
    ctx: *mut std::ffi::c_void,
    _buf: *mut std::ffi::c_void,
    _len: usize,
) {
    // SAFETY: `ctx` is the test's `Nested`.
    let n = unsafe { &mut *ctx.cast::<Nested>() };
    n.codes.push(send(n.own, n.chan, b"nested"));
    n.message = last_error();
    n.codes.push(recv(n.other, 64, 0).0);
    let mut c = unet_counts::default();
    // SAFETY: a writable out-parameter.
    n.codes.push(unsafe { unet_endpoint_counts(n.own, &mut c) });
}

unsafe extern "C" fn call_inside_piece(
    ctx: *mut std::ffi::c_void,
    _p: *const std::ffi::c_void,
    len: usize,
) {
    // SAFETY: the same context and callback contract as `call_inside`.
    unsafe { call_inside(ctx, std::ptr::null_mut(), len) }
}

#[test]
fn an_endpoint_call_inside_an_in_place_callback_is_refused_not_a_deadlock() {
    let p = pair("nested");
    let mut n = Nested {
        own: p.a,
        other: p.b,
        chan: p.ab,
        codes: Vec::new(),
        message: String::new(),
    };
    // SAFETY: `call_inside` is given `n` as its context.
    let rc = unsafe { unet_send_inplace(p.a, p.ab, 8, Some(call_inside), (&raw mut n).cast()) };
    assert_eq!(rc, OK, "{}", last_error());
    let refused = Code::Deadlock as i32;
    assert_eq!(n.codes, [refused, refused, refused]);
    assert!(
        n.message
            .starts_with("unet_send: called from inside a callback of unet_send_inplace"),
        "{}",
        n.message
    );
    // The outer send went out whole, and nothing of the refused calls did.
    let (rc, pieces, len, _) = {
        let (mut len, mut chan) = (0usize, 0u16);
        let mut m = Nested {
            own: p.b,
            other: p.a,
            chan: p.ab,
            codes: Vec::new(),
            message: String::new(),
        };
        // SAFETY: `call_inside_piece` is given `m` as its context; `len`
        // and `chan` are writable.
        let rc = unsafe {
            unet_recv_inplace(
                p.b,
                Some(call_inside_piece),
                (&raw mut m).cast(),
                &mut len,
                &mut chan,
                2000,
            )
        };
        (rc, m.codes, len, chan)
    };
    assert_eq!(rc, OK, "{}", last_error());
    assert_eq!(len, 8);
    assert_eq!(pieces, [refused, refused, refused]);
    assert_eq!(recv(p.b, 64, 0).0, Code::TimedOut as i32);
    // Outside a callback the same calls work again.
    assert_eq!(send(p.a, p.ab, b"after"), OK);
    let (rc, msg, _, _) = recv(p.b, 64, 2000);
    assert_eq!(rc, OK, "{}", last_error());
    assert_eq!(msg, b"after");
}

/// Waits until the daemon's engine no longer has endpoint `id`.
fn wait_gone(daemon: &Daemon, id: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while daemon.engine.port(id).is_some() {
        assert!(
            Instant::now() < deadline,
            "{what}: endpoint {id} is still in the engine"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn closing_a_handle_removes_its_endpoint_though_threads_remember_it() {
    let p = pair("close-remembered");
    let (ida, idb) = (id(p.a), id(p.b));
    // Another thread uses both handles, so that its list of recent
    // handles holds their entries, and stays alive holding them.
    let (used, done) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
    let (a, b, ab) = (p.a, p.b, p.ab);
    let other = std::thread::spawn(move || {
        assert_eq!(send(a, ab, b"from the other thread"), OK);
        assert_eq!(recv(b, 64, 5000).0, OK);
        used.0.send(()).unwrap();
        done.1.recv().unwrap();
        // Closed on the main thread: closed here too.
        assert_eq!(send(a, ab, b"late"), Code::BadHandle as i32);
        assert_eq!(recv(b, 64, 0).0, Code::BadHandle as i32);
    });
    used.1.recv().unwrap();
    // Closed from inside a call that holds it: it goes when the call ends.
    let mut inside = Inside {
        ep: p.b,
        close: 1,
        after: 1,
    };
    // SAFETY: `close_inside` is given `inside` as its context.
    let rc =
        unsafe { unet_send_inplace(p.b, p.ba, 8, Some(close_inside), (&raw mut inside).cast()) };
    assert_eq!(rc, OK, "{}", last_error());
    assert_eq!(inside.close, OK);
    wait_gone(&p._daemon, idb, "closed inside a call");
    // Closed while no call holds it.
    assert_eq!(unet_endpoint_close(p.a), OK);
    wait_gone(&p._daemon, ida, "closed while another thread remembers it");
    done.0.send(()).unwrap();
    other.join().unwrap();
}
