//! The round trip of `fastpath demo`'s latency table on `loop` between two
//! threads pinned to CPUs 0 and 1, U-Net without applet beside the bare
//! SPSC ring, at chosen message sizes and endpoint sizes, without the
//! rest of the demo: for finding where a size's time goes.
//!
//! ```sh
//! cargo build --release -p unet --example loop_rtt
//! target/release/examples/loop_rtt 200 0,8,56,57,1024   # 200 batches of 50
//! BUFS=64x1024 target/release/examples/loop_rtt         # 64 buffers of 1 KiB
//! RXD=8 target/release/examples/loop_rtt 200 0,56        # receive queues of 8 slots
//! TRACE=1 LENT=1 STD=1 target/release/examples/loop_rtt 400 0 # every batch's mean, to stderr
//! ONE=1 target/release/examples/loop_rtt 200 0,56        # also both ends on one thread
//! ONE=1 STD=1 target/release/examples/loop_rtt 200 0,1024 # and the standard applet on one thread
//! REPLY=0 target/release/examples/loop_rtt 200 57        # the echo answers 0 bytes
//! ONLY_ONE=1 STD=1 target/release/examples/loop_rtt 20 0  # only the one-thread round trips
//! STD=1 target/release/examples/loop_rtt 200 0,56         # also the standard applet
//! TURN=1 target/release/examples/loop_rtt 200 57,1024,4096 # also the ring in turn
//! WITH=1 target/release/examples/loop_rtt 200 57,1024      # U-Net's sends through send_with
//! WARMUP=30000 LENT=1 STD=1 target/release/examples/loop_rtt 100 0,56 # each pair's steady state
//! ```
//!
//! `RXD=n`: the two-thread rows' receive queues of `n` slots (a power of
//! two from 2; 256 by default). U-Net's messages of up to 56 bytes cross
//! on their slots' lines, and fewer slots make a pair's round trip depend
//! on fewer lines' addresses: at 8 slots 0.34 µs, at 256 0.31, the same
//! from there on (docs/benchmarks.md, "A pair's round trip set by the line
//! it crosses on").
//!
//! `TRACE=1`: every batch's mean, in µs, on one line of standard error per
//! figure: whether a pair's round trip stays at one level for its life
//! (the standard applet's does, a level drawn per pair) or moves.
//!
//! `WARMUP=n`: each pair's round trips before the timed batches (500 by
//! default). A pair's first ten thousand or so may run faster than its
//! steady state: the standard applet's round trips of 57 bytes to a few
//! hundred did, their inbox cycling through its first 16 lines; those of
//! up to 56 bytes keep to four and do not (docs/benchmarks.md, "A round
//! trip's warm start by its frames' size").
//!
//! U-Net's messages go by `Endpoint::send`, from the caller's memory, as
//! the ring peer's `send` takes them (and the bench's round trip sends):
//! each copies the message once into shared memory. `WITH=1` sends them by
//! `send_with` with a `fill` that copies the message, as until
//! 2026-12-02: the fill's copy (into a private buffer up to 64 bytes,
//! into the transmit region above) and then the engine's, two copies.
//!
//! `STD=1` adds the round trip with the standard applet on both endpoints
//! (`unet::applets::STANDARD`, as the demo installs it), and its ratio to
//! U-Net's without applet (the demo's "standard/U-Net"); with `LENT=1` the
//! applet is `unet::applets::STANDARD_LENT` (the demo's "std lent").
//!
//! `ONE=1` adds the U-Net round trip with both endpoints on the calling
//! thread: the same two messages with no cache line crossing cores, so
//! what is left is the path's own latency (its instructions and locked
//! operations). With `STD=1` too, it adds the standard applet's round trip
//! on one thread beside it: the applet's own work (its copies, its
//! invocations; the message goes from `doTx` to the receiver's `doRx`
//! without the inbox), so that the two-thread cost less this one is what
//! the hand-off between the cores costs. `REPLY=n` makes the echo answer
//! with at most `n` bytes of each message, to see one direction of a size
//! alone.
//!
//! The ring is `unet::peer`'s: the same receive queue code as an
//! endpoint's, learning of each message by its slot's seal as U-Net's
//! receiver does, and carrying a message of up to 56 bytes in its slot as
//! U-Net does. Before 2026-12-01 it read the producer index (a second line
//! crossing per direction), and until the eighteenth session it carried
//! every message in its area (a second line at 1 to 56 bytes): both made
//! a slower floor. In the eighteenth session's form it built each
//! descriptor in private memory and copied whole slots in and out, which
//! made it slower again (10-20% at 0 to 57 B); it now writes and reads the
//! slot in place (`ring_ab` compares the three). Its longer messages go
//! at one place in its area; `TURN=1` adds the ring that places them in
//! turn (`unet::peer::Placement`), which `fastpath demo` also measures,
//! taking the faster of the two as its floor.
//!
//! Each figure is the median of the batches' means, as in the demo (which
//! also measures each cell again while it is unsteady; this does not).
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use unet::Config;
use unet::peer::Placement;

#[path = "common/mod.rs"]
mod common;
use common::{
    Idle, RingRecv, batches, batches_and_sizes, recv_into, send_all, send_all_with, unet_pair_with,
};

/// A send loop U-Net's rows use: [`send_all`], or [`send_all_with`].
trait SendAll: Fn(&mut unet::Endpoint, u16, &[u8], Idle) + Copy + Send + 'static {}
impl<F: Fn(&mut unet::Endpoint, u16, &[u8], Idle) + Copy + Send + 'static> SendAll for F {}

/// U-Net's round trip, with `applet` on both endpoints or none, its
/// messages sent by `send_all`.
fn unet_rtt(send_all: impl SendAll, applet: Option<&[u8]>, size: usize, n: usize) -> f64 {
    let cfg = match std::env::var("BUFS") {
        Ok(v) => {
            let (n, bs) = v.split_once('x').unwrap();
            Config {
                buffers: n.parse().unwrap(),
                buffer_size: bs.parse().unwrap(),
                ..Config::default()
            }
        }
        Err(_) => Config::default(),
    };
    let cfg = match std::env::var("RXD") {
        Ok(v) => Config {
            rx_depth: v.parse().expect("RXD: a queue depth, e.g. RXD=8"),
            ..cfg
        },
        Err(_) => cfg,
    };
    let (_e, mut a, mut b, ab, ba) = unet_pair_with(cfg, applet);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let reply: Option<usize> = std::env::var("REPLY")
        .ok()
        .map(|v| v.parse().expect("REPLY: a byte count, e.g. REPLY=0"));
    let echo = std::thread::spawn(move || {
        unet::affinity::pin(1);
        let mut buf = Vec::with_capacity(65536);
        while recv_into(&mut b, &mut buf, Idle::Backoff, Some(&st)).is_some() {
            let n = reply.unwrap_or(buf.len()).min(buf.len());
            send_all(&mut b, ba, &buf[..n], Idle::Backoff);
        }
        b
    });
    let msg = vec![0x5au8; size];
    let mut buf = Vec::with_capacity(65536);
    let r = batches(n, || {
        send_all(&mut a, ab, &msg, Idle::Backoff);
        recv_into(&mut a, &mut buf, Idle::Backoff, None);
        std::hint::black_box(&buf);
        assert_eq!(buf.len(), reply.unwrap_or(size).min(size));
    });
    stop.store(true, Ordering::Relaxed);
    let _b = echo.join().unwrap();
    r
}

/// [`unet_rtt`] with both endpoints on this thread, with `applet` on both
/// or none: the round trip's instructions and private cache traffic,
/// without a line crossing cores.
fn unet_one(send_all: impl SendAll, applet: Option<&[u8]>, size: usize, n: usize) -> f64 {
    let (_e, mut a, mut b, ab, ba) = unet_pair_with(Config::default(), applet);
    let msg = vec![0x5au8; size];
    let mut buf = Vec::with_capacity(65536);
    batches(n, || {
        send_all(&mut a, ab, &msg, Idle::Backoff);
        recv_into(&mut b, &mut buf, Idle::Backoff, None);
        send_all(&mut b, ba, &buf, Idle::Backoff);
        recv_into(&mut a, &mut buf, Idle::Backoff, None);
        assert_eq!(buf.len(), size);
    })
}

/// The bare ring peer ([`unet::peer::ring_pair_placed`], placing its
/// longer messages by `placement`): each side copies the message in and
/// out, and learns of it by its slot's seal, as an endpoint's receiver
/// does.
fn ring_rtt(size: usize, n: usize, placement: Placement) -> f64 {
    let (mut a, mut b) =
        unet::peer::ring_pair_placed("loop-rtt-ring", placement).expect("the ring peer's segments");
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let echo = std::thread::spawn(move || {
        unet::affinity::pin(1);
        let mut buf = vec![0u8; 65536];
        while let Some(n) = b.recv(&mut buf, Idle::Backoff, Some(&st)) {
            b.send(&buf[..n]);
        }
    });
    let msg = vec![0x5au8; size];
    let mut buf = vec![0u8; 65536];
    let r = batches(n, || {
        a.send(&msg);
        let got = a.recv(&mut buf, Idle::Backoff, None);
        // The reply is read (as in `unet_rtt`): else the compiler may drop
        // the copy into a buffer nothing reads, if it inlines the receive.
        std::hint::black_box(&buf);
        assert_eq!(got, Some(size));
    });
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    r
}

fn main() {
    let (n, sizes) = batches_and_sizes(80, "0,56,57,1024");
    unet::affinity::pin(0);
    // `ONLY_ONE`: the one-thread round trips alone, without the threads
    // (for a trace under valgrind, which runs two spinning threads slowly).
    let only_one = std::env::var_os("ONLY_ONE").is_some();
    for &s in &sizes {
        // Each send loop its own instance (a direct call, as before).
        let with = std::env::var_os("WITH").is_some();
        let rtt = |applet, s, n| {
            if with {
                unet_rtt(send_all_with, applet, s, n)
            } else {
                unet_rtt(send_all, applet, s, n)
            }
        };
        let one_rtt = |applet, s, n| {
            if with {
                unet_one(send_all_with, applet, s, n)
            } else {
                unet_one(send_all, applet, s, n)
            }
        };
        if only_one {
            // U-Net's first, then the standard applet's, as with `ONE`.
            let u1 = one_rtt(None, s, n);
            let std = std::env::var_os("STD").map_or(String::new(), |_| {
                format!(
                    ", standard {:.3} us",
                    one_rtt(Some(standard_applet()), s, n)
                )
            });
            println!("{s:5} B  one thread {u1:.3} us{std}");
            continue;
        }
        let u = rtt(None, s, n);
        let r = ring_rtt(s, n, Placement::OnePlace);
        let turn = if std::env::var_os("TURN").is_some() {
            let t = ring_rtt(s, n, Placement::InTurn);
            format!("  ring in turn {t:.3} us ({:.2}x)", u / t)
        } else {
            String::new()
        };
        let one = match (std::env::var_os("ONE"), std::env::var_os("STD")) {
            (None, _) => String::new(),
            (Some(_), None) => format!("  one thread {:.3} us", one_rtt(None, s, n)),
            (Some(_), Some(_)) => format!(
                "  one thread {:.3} us, standard {:.3} us",
                one_rtt(None, s, n),
                one_rtt(Some(standard_applet()), s, n)
            ),
        };
        let std = if std::env::var_os("STD").is_some() {
            let t = rtt(Some(standard_applet()), s, n);
            format!("  standard {t:.3} us ({:.2}x unet)", t / u)
        } else {
            String::new()
        };
        println!(
            "{s:5} B  unet {u:.3} us  ring {r:.3} us  ratio {:.2}x{turn}{std}{one}",
            u / r
        );
    }
}

/// The standard applet the `STD` columns run: `StandardUnet`, or with
/// `LENT=1` `StandardLent`.
fn standard_applet() -> &'static [u8] {
    if std::env::var_os("LENT").is_some() {
        unet::applets::STANDARD_LENT
    } else {
        unet::applets::STANDARD
    }
}
