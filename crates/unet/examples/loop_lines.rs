//! `loop_rtt`'s ping-pong (U-Net without applet on `loop`, with the
//! standard applet on both endpoints as the demo installs it, or the bare
//! SPSC ring beside them) made for counting the cache lines that cross between
//! the two threads per message, under valgrind: each waiting loop yields
//! its core at every empty poll, so that valgrind, which runs one thread
//! at a time, switches threads once per message, and a trace of every
//! load and store with the thread switches marked says which lines one
//! thread wrote and the other then touched. This VM has no PMU
//! (`perf stat -e` reports `<not supported>` for every hardware event), so
//! `perf c2c` cannot count them.
//!
//! ```sh
//! cargo build --release -p unet --example loop_lines
//! valgrind --tool=lackey --trace-mem=yes --trace-sched=yes --fair-sched=yes --log-file=/tmp/ll.%p \
//!     target/release/examples/loop_lines unet 56
//! python3 scripts/lines.py /tmp/ll.<pid> target/release/examples/loop_lines 512
//! ```
//!
//! Arguments: `unet`, `std` (the standard applet), `lent` (the lent standard
//! applet, `unet::applets::STANDARD_LENT`) or `ring`, the message size, the number of round
//! trips counted (512 by default: twice the receive queue's depth, so
//! that every slot is used equally often), after as many again of
//! warm-up (at least 300, so that every slot has been used once). The
//! sending thread marks the counted stretch by storing to [`MARK`], which
//! `scripts/lines.py` watches for. The lines a waiting loop polls are
//! counted once per change, as they would be by a spinning waiter: what
//! matters is which lines change hands, not how often a waiter looks.
use std::sync::atomic::{AtomicU64, Ordering};

use unet::Config;

#[path = "common/mod.rs"]
mod common;
use common::{Idle, RingRecv, recv_into, ring_pair, send_all, unet_pair_with};

/// Stored 1 when the counted round trips start and 2 when they end.
#[unsafe(no_mangle)]
pub static MARK: AtomicU64 = AtomicU64::new(0);

/// Runs `warm` round trips, then `n` between the marks.
fn marked(warm: usize, n: usize, mut round: impl FnMut()) {
    for _ in 0..warm {
        round();
    }
    MARK.store(1, Ordering::SeqCst);
    for _ in 0..n {
        round();
    }
    MARK.store(2, Ordering::SeqCst);
}

/// U-Net's endpoints, with `applet` on both or none.
fn unet(applet: Option<&[u8]>, size: usize, warm: usize, n: usize) {
    let (_e, mut a, mut b, ab, ba) = unet_pair_with(Config::default(), applet);
    let echo = std::thread::spawn(move || {
        let mut buf = Vec::with_capacity(65536);
        for _ in 0..warm + n {
            recv_into(&mut b, &mut buf, Idle::Yield, None);
            send_all(&mut b, ba, &buf, Idle::Yield);
        }
        b
    });
    let msg = vec![0x5au8; size];
    let mut buf = Vec::with_capacity(65536);
    marked(warm, n, || {
        send_all(&mut a, ab, &msg, Idle::Yield);
        recv_into(&mut a, &mut buf, Idle::Yield, None);
        assert_eq!(buf.len(), size);
    });
    let _b = echo.join().unwrap();
}

/// The bare ring peer ([`common::ring_pair`]), learning of each message by
/// its slot's seal.
fn ring(size: usize, warm: usize, n: usize) {
    let (mut a, mut b) = ring_pair("loop-lines-ring");
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        for _ in 0..warm + n {
            let got = b.recv(&mut buf, Idle::Yield, None).expect("no stop flag");
            b.send(&buf[..got]);
        }
    });
    let msg = vec![0x5au8; size];
    let mut buf = vec![0u8; 65536];
    marked(warm, n, || {
        a.send(&msg);
        assert_eq!(a.recv(&mut buf, Idle::Yield, None), Some(size));
    });
    echo.join().unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map_or("unet", String::as_str);
    let size: usize = args
        .get(2)
        .map_or(0, |s| s.parse().expect("a size in bytes"));
    let n: usize = args.get(3).map_or(512, |s| s.parse().expect("a count"));
    let warm = n.max(300);
    match which {
        "unet" => unet(None, size, warm, n),
        "std" => unet(Some(unet::applets::STANDARD), size, warm, n),
        "lent" => unet(Some(unet::applets::STANDARD_LENT), size, warm, n),
        "ring" => ring(size, warm, n),
        _ => panic!("unet, std, lent or ring"),
    }
}
