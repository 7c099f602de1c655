//! The C API's own cost per call, counted exactly: the instructions of
//! `unet_send` and `unet_recv` against those of the Rust calls they wrap
//! (`Endpoint::send`, `Endpoint::recv` and the copy out), and of a whole
//! round trip through each.
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     --toggle-collect=count_c_round target/release/examples/callcount [ROUNDS]
//! ```
//!
//! One thread, an engine in this process on the `loop` transport without
//! threads of its own, two endpoints whose calls do not drive it: a round
//! is a send from `a`, the engine's poll, a receive at `b` into a buffer,
//! the echo sent back from it, the poll, the receive at `a`; 64-byte
//! messages. The same round is run through the C API's functions
//! (`count_c_*`, calling the exported `extern "C"` functions exactly as a
//! C program does) and through the Rust endpoint (`count_rust_*`).
//! Callgrind's `--toggle-collect=NAME` counts exactly the instructions
//! executed inside the function NAME and everything it calls, so the
//! counts below contain no harness. The Rust receive waits as the
//! round-trip example's Rust client does and as `unet_recv` does (a
//! `unet::wait::Spins` budget; here the message is always there at the
//! first poll):
//!
//! | toggle | what |
//! |---|---|
//! | `count_c_round`, `count_rust_round` | a whole round (two sends, two polls, two receives) |
//! | `unet_send`, `count_rust_send` | one send of 64 bytes |
//! | `unet_recv`, `count_rust_recv` | one receive of 64 bytes, copied into the caller's buffer |
//!
//! Each round runs ROUNDS times (default 10,000) and the count divided by
//! the calls is the figure per call (`unet_send`, `unet_recv` and the
//! `count_rust_*` calls run twice a round): the first call's one-time
//! costs (the handle's first look-up, thread-locals) are in it, spread
//! over the rest.

use std::hint::black_box;

use unet::wait::Spins;
use unet::{Config, Endpoint};
use unet_capi::ffi::{
    self, unet_addr, unet_endpoint, unet_engine, unet_engine_endpoint_create, unet_engine_start,
    unet_open_channel, unet_poll_engine, unet_recv, unet_send, unet_set_drive,
};

const SIZE: usize = 64;

fn ok(rc: i32, what: &str) {
    assert_eq!(rc, 0, "{what}: {:?}", ffi_last_error());
}

fn ffi_last_error() -> String {
    // SAFETY: unet_last_error returns a NUL-terminated string valid until
    // this thread's next failing call.
    unsafe { std::ffi::CStr::from_ptr(ffi::unet_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// The C API's two endpoints and their channels.
pub struct C {
    a: unet_endpoint,
    b: unet_endpoint,
    ab: u16,
    ba: u16,
}

fn c_setup() -> C {
    let mut e = unet_engine { id: 0 };
    // SAFETY: a NUL-terminated address and a writable handle.
    ok(
        unsafe { unet_engine_start(c"10.0.0.1:7000".as_ptr(), 0, &mut e) },
        "engine",
    );
    let mut a = unet_endpoint { id: 0 };
    let mut b = unet_endpoint { id: 0 };
    // SAFETY: NULL config and applet (the defaults), writable handles.
    unsafe {
        ok(
            unet_engine_endpoint_create(e, std::ptr::null(), std::ptr::null(), 0, &mut a),
            "a",
        );
        ok(
            unet_engine_endpoint_create(e, std::ptr::null(), std::ptr::null(), 0, &mut b),
            "b",
        );
    }
    let here = unet_addr {
        ip: [10, 0, 0, 1],
        port: 7000,
    };
    let id = |ep| {
        let mut v = 0u32;
        // SAFETY: a writable u32.
        ok(unsafe { ffi::unet_endpoint_id(ep, &mut v) }, "id");
        v
    };
    let (mut ab, mut ba) = (0u16, 0u16);
    // SAFETY: writable channel tags.
    unsafe {
        ok(unet_open_channel(a, here, id(b), &mut ab), "ab");
        ok(unet_open_channel(b, here, id(a), &mut ba), "ba");
        ok(unet_set_drive(a, 0), "drive");
        ok(unet_set_drive(b, 0), "drive");
    }
    C { a, b, ab, ba }
}

/// One `unet_recv` of the next message (one poll, no wait): its length.
fn c_recv(ep: unet_endpoint, buf: &mut [u8]) -> usize {
    let (mut len, mut chan) = (0usize, 0u16);
    // SAFETY: `buf` is writable for its length; `len` and `chan` writable.
    ok(
        unsafe {
            unet_recv(
                ep,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut len,
                &mut chan,
                0,
            )
        },
        "recv",
    );
    len
}

/// A round through the C API's functions. The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn count_c_round(c: &C, out: &[u8], echo: &mut [u8], back: &mut [u8]) {
    // SAFETY: `out` is readable for its length.
    ok(
        unsafe { unet_send(c.a, c.ab, out.as_ptr().cast(), out.len()) },
        "send",
    );
    ok(unet_poll_engine(c.a), "poll");
    let n = c_recv(c.b, echo);
    // SAFETY: `echo` is readable for `n` bytes.
    ok(
        unsafe { unet_send(c.b, c.ba, echo.as_ptr().cast(), n) },
        "send",
    );
    ok(unet_poll_engine(c.b), "poll");
    let m = c_recv(c.a, back);
    assert_eq!(m, out.len());
}

/// The Rust endpoints and their channels.
pub struct R {
    a: Endpoint,
    b: Endpoint,
    ab: u16,
    ba: u16,
    spins_a: Spins,
    spins_b: Spins,
    _engine: unet::Engine,
    _net: unet::transport::LoopNet,
}

fn rust_setup() -> R {
    let net = unet::transport::LoopNet::new();
    let engine = unet::Engine::new(Box::new(
        net.attach("10.0.0.2:7000".parse().expect("an address"))
            .expect("attach"),
    ));
    let mut a = engine.create_endpoint(Config::default(), None).expect("a");
    let mut b = engine.create_endpoint(Config::default(), None).expect("b");
    let ab = a.open_channel(engine.local(), b.id()).expect("ab");
    let ba = b.open_channel(engine.local(), a.id()).expect("ba");
    a.set_drive(false);
    b.set_drive(false);
    R {
        a,
        b,
        ab,
        ba,
        spins_a: Spins::default(),
        spins_b: Spins::default(),
        _engine: engine,
        _net: net,
    }
}

/// A send through the Rust endpoint. The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn count_rust_send(ep: &mut Endpoint, chan: u16, msg: &[u8]) {
    ep.send(chan, msg).expect("send");
}

/// A receive through the Rust endpoint, copied out. The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn count_rust_recv(ep: &mut Endpoint, spins: &mut Spins, buf: &mut [u8]) -> usize {
    // The wait of the round-trip example's Rust client (and of unet_recv).
    let mut wait = spins.backoff();
    let m = loop {
        if let Some(m) = ep.recv() {
            spins.learn(&wait);
            break m;
        }
        wait.snooze();
    };
    let len = m.len();
    let mut at = 0;
    m.read(|p| {
        buf[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    });
    len
}

/// A round through the Rust endpoints. The callgrind toggle point.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn count_rust_round(r: &mut R, out: &[u8], echo: &mut [u8], back: &mut [u8]) {
    count_rust_send(&mut r.a, r.ab, out);
    r.a.poll_engine();
    let n = count_rust_recv(&mut r.b, &mut r.spins_b, echo);
    count_rust_send(&mut r.b, r.ba, &echo[..n]);
    r.b.poll_engine();
    let m = count_rust_recv(&mut r.a, &mut r.spins_a, back);
    assert_eq!(m, out.len());
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("ROUNDS: a number"))
        .unwrap_or(10_000);
    let out = [7u8; SIZE];
    // The receive buffers are as large as the longest message, as an echo
    // server's would be.
    let (mut echo, mut back) = (vec![0u8; 65536], vec![0u8; 65536]);
    let c = c_setup();
    let mut r = rust_setup();
    // Timed as well (not under callgrind, where the times mean nothing):
    // blocks of rounds alternating between the two, the fastest block of
    // each.
    let block = rounds.div_ceil(10).max(1);
    let (mut c_best, mut r_best) = (f64::MAX, f64::MAX);
    let mut done = 0;
    while done < rounds {
        let n = block.min(rounds - done);
        let t = std::time::Instant::now();
        for _ in 0..n {
            count_c_round(black_box(&c), &out, &mut echo, &mut back);
        }
        c_best = c_best.min(t.elapsed().as_nanos() as f64 / n as f64);
        let t = std::time::Instant::now();
        for _ in 0..n {
            count_rust_round(black_box(&mut r), &out, &mut echo, &mut back);
        }
        r_best = r_best.min(t.elapsed().as_nanos() as f64 / n as f64);
        done += n;
    }
    println!(
        "callcount: {rounds} rounds of {SIZE} bytes; fastest block of {block}: C API {c_best:.0} ns a round, Rust {r_best:.0} ns"
    );
}
