//! The standard applet's message between two threads, for callgrind: the
//! sender's work and the receiver's, each in a function of its own, so
//! that `--toggle-collect` on both counts them per message (the burst-25
//! experiment's and the demo's case, where the receiver's applet is
//! another thread's and its messages wait in its inbox).
//!
//! ```text
//! cargo build --release -p unet --example xthr_count
//! valgrind --tool=callgrind --toggle-collect=xthr_count_send --toggle-collect=xthr_count_recv \
//!     target/release/examples/xthr_count 4096 16384
//! callgrind_annotate --inclusive=yes callgrind.out.<pid>
//! WITH=1 valgrind ... target/release/examples/xthr_count 40 16400 1   # send_with, bursts of 1
//! LENT=1 valgrind ... target/release/examples/xthr_count 4096 16400     # StandardLent
//! NONE=1 valgrind ... target/release/examples/xthr_count 4096 16400     # no applet
//! QUEUED=1 LENT=1 valgrind ... target/release/examples/xthr_count 4096 16400  # burst-25's sender
//! ANSWER=1 LENT=1 valgrind ... target/release/examples/xthr_count 40 16400 1  # a round trip's direction
//! WAITED=1 ANSWER=1 LENT=1 valgrind ... xthr_count 57 16400 1  # with the waiting receiver's give-back
//! ```
//!
//! The sender uses [`Endpoint::send`]; with `WITH=1` it uses
//! [`Endpoint::send_with`], copying the message in its fill, as the demo's
//! and `loop_rtt`'s applications sent until 2026-12-02 (they now send with
//! `send`; `loop_rtt`'s `WITH=1` times `send_with`). With `QUEUED=1` it
//! sends as burst-25's sender does (`fastpath bench unet --only burst`):
//! the burst's messages written in the transmit region by `send_with`
//! with the endpoint not driving the engine, so that each is a transmit
//! descriptor, then one `poll_engine` that takes them all.
//!
//! Two endpoints of one engine on `loop`, both with the standard applet
//! (with `LENT=1` the standard applet written to the lent `doRx` and
//! `doTx`, `StandardLent`, whose `doRx` reads the message lent instead of
//! its copy in `RxBuf`, and whose `doTx` pushes it from the area without
//! a copy into `TxBuf`; with `NONE=1` without applets, plain U-Net, whose sender's
//! engine delivers each message into the receiver's buffers itself);
//! the sender on the main thread, the receiver on a thread of its own
//! (which claims it). Messages of `SIZE` bytes (default 40) go in bursts
//! of 25, as burst-25's do (or of the third argument's count: 1 is one
//! direction of the demo's ping-pong, where every message meets an empty
//! inbox and a receiver that drains it alone): the main thread sends a burst
//! (`xthr_count_send`, each `send` running `doTx`), then the receiving
//! thread takes it (`xthr_count_recv`: its `recv`s drain the inbox
//! through `doRx` and read each message), and the main thread waits for
//! it. The threads never run at once, so that each count is exact. With
//! `ANSWER=1` the receiver then answers each burst with an empty message,
//! which the main thread receives, both outside the toggles: each
//! endpoint's inbox then sees a round trip's pattern (one frame, one
//! answer), which alone keeps it to the ring's warm start
//! (`Inbox::answered`), so that with bursts of 1 the two counts are a
//! round trip's two halves of one direction. With `WAITED=1` the
//! receiver also makes one empty receive call after each burst, outside
//! the toggles, as a waiting receiver's first poll does before the next
//! message comes: a message in buffers leaves its buffer gathered for
//! giving back, and the receive call that finds it so drives the engine
//! the long way ([`Endpoint::recv_ref`]'s `EmptyPoll::Other`: the buffers
//! given back, then the engine's whole poll), which a round trip's
//! receiver does while it waits, not when the message is there. Without
//! it, the counted receive of a message past 56 bytes includes that way.
//! 2,000 bursts warm up first, outside the toggles; then `N` messages
//! (default 16,384, rounded up to bursts) are counted. The instructions
//! per message are the two functions' totals over `N`.

use std::sync::mpsc;

use unet::transport::LoopNet;
use unet::{Config, Endpoint, Engine};

/// Messages per burst by default (burst-25's).
const BURST: usize = 25;
const WARM_BURSTS: usize = 2000;

/// A burst of `burst` messages from `a` on `chan`; the toggle point of the
/// sender's work.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn xthr_count_send(a: &mut Endpoint, chan: u16, msg: &[u8], how: How, burst: usize) {
    send_burst(a, chan, msg, how, burst);
}

/// A burst of `burst` messages, sent `how`.
#[inline(always)]
fn send_burst(a: &mut Endpoint, chan: u16, msg: &[u8], how: How, burst: usize) {
    if how == How::Queued {
        a.set_drive(false);
        for _ in 0..burst {
            a.send_with(chan, msg.len(), |b| b.copy_from_slice(msg))
                .expect("queued");
        }
        a.set_drive(true);
        a.poll_engine();
        return;
    }
    for _ in 0..burst {
        send(a, chan, msg, how == How::With);
    }
}

/// How [`xthr_count_send`] sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// [`Endpoint::send`].
    Send,
    /// [`Endpoint::send_with`] (`WITH=1`).
    With,
    /// Transmit descriptors, taken in one pass (`QUEUED=1`).
    Queued,
}

/// Sends `msg` with [`Endpoint::send`], or with [`Endpoint::send_with`]
/// (copying it in its fill) if `with`, as the demo and `loop_rtt` send.
#[inline(always)]
fn send(a: &mut Endpoint, chan: u16, msg: &[u8], with: bool) {
    if with {
        a.send_with(chan, msg.len(), |b| b.copy_from_slice(msg))
            .expect("sent");
    } else {
        a.send(chan, msg).expect("sent");
    }
}

/// The receiver's take of one burst, each message read through; the toggle
/// point of the receiver's work. Returns the bytes read.
#[unsafe(no_mangle)]
#[inline(never)]
pub fn xthr_count_recv(b: &mut Endpoint, burst: usize) -> usize {
    let mut n = 0;
    let mut got = 0;
    while got < burst {
        if let Some(m) = b.recv_ref() {
            m.read(|p| n += std::hint::black_box(p).len());
            got += 1;
        }
    }
    n
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a number"))
        .collect();
    let size = args.first().copied().unwrap_or(40);
    let burst = args.get(2).copied().unwrap_or(BURST).max(1);
    let n = args.get(1).copied().unwrap_or(16384).div_ceil(burst) * burst;
    let how = if std::env::var_os("QUEUED").is_some() {
        How::Queued
    } else if std::env::var_os("WITH").is_some() {
        How::With
    } else {
        How::Send
    };
    let lent = std::env::var_os("LENT").is_some();
    let answer = std::env::var_os("ANSWER").is_some();
    let waited = std::env::var_os("WAITED").is_some();
    let none = std::env::var_os("NONE").is_some();
    let net = LoopNet::new();
    let e = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    let cfg = Config {
        buffer_size: 8192,
        ..Config::default()
    };
    let std_applet = match (none, lent) {
        (true, _) => None,
        (false, true) => Some(unet::applets::STANDARD_LENT),
        (false, false) => Some(unet::applets::STANDARD),
    };
    let mut a = e.create_endpoint(cfg, std_applet).unwrap();
    let mut b = e.create_endpoint(cfg, std_applet).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    let msg = vec![0x5a; size];
    // The receiving thread: one burst per request, then the bytes read.
    let (go, bursts) = mpsc::sync_channel::<bool>(0);
    let (done, taken) = mpsc::sync_channel::<usize>(0);
    let receiver = std::thread::spawn(move || {
        // The receiving endpoint's applet is this thread's from now on
        // (its creation claimed it for the main thread).
        b.poll_engine();
        done.send(0).unwrap();
        while let Ok(counted) = bursts.recv() {
            let n = if counted {
                xthr_count_recv(&mut b, burst)
            } else {
                uncounted_recv(&mut b, burst)
            };
            if answer {
                b.send(ba, &[]).expect("answered");
            }
            if waited {
                // A waiting receiver's first empty poll, before the next
                // message comes: it gives back the buffers the last one's
                // reading gathered, so that the next receive finds none.
                assert!(b.recv_ref().is_none(), "nothing sent yet");
            }
            done.send(n).unwrap();
        }
        b.counts()
    });
    taken.recv().unwrap();
    let mut bytes = 0;
    for _ in 0..WARM_BURSTS {
        uncounted_send(&mut a, ab, &msg, how, burst);
        go.send(false).unwrap();
        taken.recv().unwrap();
        if answer {
            uncounted_recv(&mut a, 1);
        }
    }
    for _ in 0..n / burst {
        xthr_count_send(&mut a, ab, &msg, how, burst);
        go.send(true).unwrap();
        bytes += taken.recv().unwrap();
        if answer {
            uncounted_recv(&mut a, 1);
        }
    }
    drop(go);
    let counts = receiver.join().unwrap();
    assert_eq!(bytes, n * size);
    assert_eq!(
        counts.applet_traps + counts.applet_drops + counts.rx_queue_full,
        0
    );
    println!(
        "xthr_count: {n} counted messages of {size} B after {} warm-up ({}); the receiver delivered {}",
        WARM_BURSTS * burst,
        match how {
            How::Send => "send",
            How::With => "send_with",
            How::Queued => "send_with, queued",
        },
        counts.rx_delivered
    );
}

/// [`xthr_count_send`] outside the toggle (the warm-up's).
#[inline(never)]
fn uncounted_send(a: &mut Endpoint, chan: u16, msg: &[u8], how: How, burst: usize) {
    send_burst(a, chan, msg, how, burst);
}

/// [`xthr_count_recv`] outside the toggle (the warm-up's): its code must
/// differ from `xthr_count_recv`'s (here, the count taken from each
/// message is not hidden from the optimiser). With the same body the
/// compiler merged the two into one function (one address), and the
/// receiver's toggle counted the warm-up's messages too (its totals were
/// over 66,400 messages, not 16,400).
#[inline(never)]
fn uncounted_recv(b: &mut Endpoint, burst: usize) -> usize {
    let mut n = 0;
    let mut got = 0;
    while got < burst {
        if let Some(m) = b.recv_ref() {
            m.read(|p| n += p.len());
            got += 1;
        }
    }
    n
}
