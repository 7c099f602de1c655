//! The set-up the measuring examples share (`loop_rtt`, `loop_lines`,
//! `loop_split`, `ring_ab`, `daemon_rtt`, each including this file with `#[path]`): a
//! pair of U-Net endpoints on `loop` and their send and receive loops, the
//! bare SPSC ring peer they are compared with, and the timing: batches of
//! round trips and the time-stamp counter.
//!
//! The ring peer is [`unet::peer`]'s (the demo's and the bench's too): an
//! endpoint's receive queue per direction, a message of up to 56 bytes in
//! its slot and a longer one in the area, learned of by the slot's seal.
#![allow(dead_code)] // each example uses some of it

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use unet::transport::LoopNet;
use unet::wait::Backoff;
use unet::{Config, Endpoint, Engine};

/// How a waiting loop waits between polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Spin, then yield, then sleep ([`Backoff`]): for timing.
    Backoff,
    /// Yield the core at every empty poll: under valgrind, which runs one
    /// thread at a time, so that it switches threads once per message.
    Yield,
}

/// One waiting loop's state.
struct Waiter {
    idle: Idle,
    backoff: Backoff,
}

impl Waiter {
    fn new(idle: Idle) -> Waiter {
        Waiter {
            idle,
            backoff: Backoff::default(),
        }
    }

    /// Waits once; whether it is time to look at a stop flag (now and
    /// then while backing off, every time while yielding).
    fn wait(&mut self) -> bool {
        match self.idle {
            Idle::Backoff => {
                self.backoff.snooze();
                self.backoff.now_and_then()
            }
            Idle::Yield => {
                std::thread::yield_now();
                true
            }
        }
    }
}

/// Two endpoints of one engine on `loop` with a channel each way: the
/// engine, `a`, `b`, the channel from `a` to `b` and the one back.
pub fn unet_pair(cfg: Config) -> (Engine, Endpoint, Endpoint, u16, u16) {
    unet_pair_with(cfg, None)
}

/// [`unet_pair`] with `applet` (a class file) on both endpoints, as the
/// demo installs the standard applet: made on the calling thread, which
/// claims both; the thread that then drives one of them (its receive
/// calls) claims it, and its applet runs there.
pub fn unet_pair_with(
    cfg: Config,
    applet: Option<&[u8]>,
) -> (Engine, Endpoint, Endpoint, u16, u16) {
    let net = LoopNet::new();
    let e = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    let mut a = e.create_endpoint(cfg, applet).unwrap();
    let mut b = e.create_endpoint(cfg, applet).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    (e, a, b, ab, ba)
}

/// Waits for the next message and copies it into `buf`: its channel, or
/// `None` once `stop` is set (looked at now and then while waiting).
pub fn recv_into(
    ep: &mut Endpoint,
    buf: &mut Vec<u8>,
    idle: Idle,
    stop: Option<&AtomicBool>,
) -> Option<u16> {
    let mut wait = Waiter::new(idle);
    loop {
        if let Some(m) = ep.recv_ref() {
            buf.clear();
            m.read(|p| buf.extend_from_slice(p));
            return Some(m.chan());
        }
        if wait.wait() && stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return None;
        }
    }
}

/// Sends `msg` on `chan` ([`Endpoint::send`]), driving the engine and
/// waiting while the transmit queue is full. The engine copies the bytes
/// from `msg` into the receiver's buffer or slot: one copy, as the ring
/// peer's `send` copies its message once into its area or slot, and as
/// the bench's round trip sends (`fastpath_bench::unet`).
pub fn send_all(ep: &mut Endpoint, chan: u16, msg: &[u8], idle: Idle) {
    let mut wait = Waiter::new(idle);
    loop {
        match ep.send(chan, msg) {
            Err(unet::SendError::Full) => {
                ep.poll_engine();
                wait.wait();
            }
            r => return r.unwrap(),
        }
    }
}

/// [`send_all`] through [`Endpoint::send_with`], its `fill` copying `msg`:
/// the message written first where `send_with` puts it (a private buffer
/// up to 64 bytes, the transmit region above), then copied by the engine
/// again. Until 2026-12-02 the examples' one send; `loop_rtt` times it
/// with `WITH=1`.
pub fn send_all_with(ep: &mut Endpoint, chan: u16, msg: &[u8], idle: Idle) {
    let mut wait = Waiter::new(idle);
    loop {
        match ep.send_with(chan, msg.len(), |b| b.copy_from_slice(msg)) {
            Err(unet::SendError::Full) => {
                ep.poll_engine();
                wait.wait();
            }
            r => return r.unwrap(),
        }
    }
}

pub use unet::peer::RingEnd;

/// The ring peer's two ends ([`unet::peer::ring_pair`]), over two new
/// segments named after `tag`.
pub fn ring_pair(tag: &str) -> (RingEnd, RingEnd) {
    unet::peer::ring_pair(tag).expect("the ring peer's segments")
}

/// The examples' wait on the ring peer.
pub trait RingRecv {
    /// Waits for the next message ([`RingEnd::try_recv`]): its length, or
    /// `None` once `stop` is set (looked at now and then while waiting).
    fn recv(&mut self, buf: &mut [u8], idle: Idle, stop: Option<&AtomicBool>) -> Option<usize>;
}

impl RingRecv for RingEnd {
    /// Waits for the next message ([`RingEnd::try_recv`]): its length, or
    /// `None` once `stop` is set (looked at now and then while waiting).
    fn recv(&mut self, buf: &mut [u8], idle: Idle, stop: Option<&AtomicBool>) -> Option<usize> {
        let mut wait = Waiter::new(idle);
        loop {
            if let Some(n) = self.try_recv(buf) {
                return Some(n);
            }
            if wait.wait() && stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                return None;
            }
        }
    }
}

/// The command line of the round-trip examples: the batch count (the
/// first argument, `n` by default) and the message sizes (the
/// second, comma-separated, `sizes` by default).
pub fn batches_and_sizes(n: usize, sizes: &str) -> (usize, Vec<usize>) {
    let args: Vec<String> = std::env::args().collect();
    let n = args
        .get(1)
        .map_or(n, |s| s.parse().expect("batches: a count"));
    let sizes = args
        .get(2)
        .map_or(sizes, String::as_str)
        .split(',')
        .map(|s| s.parse().expect("sizes: byte counts, e.g. 0,56,57"))
        .collect();
    (n, sizes)
}

/// The median of `v`, in µs.
pub fn median_us(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

/// `round` 500 times to warm up (`WARMUP=n` times instead, e.g. 30000 for
/// a pair's steady state: an applet's round trip of up to a few hundred
/// bytes between two threads could run faster through its first ten
/// thousand than after), then `n` batches of 50: the median of the
/// batches' means, µs per round (with `TRACE` set, every batch's mean
/// too, on standard error).
pub fn batches(n: usize, mut round: impl FnMut()) -> f64 {
    let warm = std::env::var("WARMUP").map_or(500, |v| v.parse().expect("WARMUP: a count"));
    for _ in 0..warm {
        round();
    }
    let mut means = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        for _ in 0..50 {
            round();
        }
        means.push(t.elapsed() / 50);
    }
    if std::env::var_os("TRACE").is_some() {
        let v: Vec<String> = means
            .iter()
            .map(|d| format!("{:.3}", d.as_secs_f64() * 1e6))
            .collect();
        eprintln!("batches (us): {}", v.join(" "));
    }
    median_us(means)
}

/// The time-stamp counter, read once every instruction before it has
/// completed (its loads have their data) and before any after it starts.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn tsc() -> u64 {
    use core::arch::x86_64::{_mm_lfence, _rdtsc};
    // SAFETY: `lfence` and `rdtsc` have no memory effects; the fences
    // only order this thread's instructions around the read.
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

/// Elsewhere, nanoseconds from the monotonic clock stand in for the
/// counter's ticks (the rate measured against the clock is then 1).
#[cfg(not(target_arch = "x86_64"))]
pub fn tsc() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
