//! `loop_rtt`'s round trip cut into its four stretches with the time-stamp
//! counter (synchronised between cores on this machine: `constant_tsc`,
//! `nonstop_tsc`): the sender's call (t0 to t1), from its return to the
//! echo's receive call returning the message (t1 to t2: the lines'
//! crossing, the waiting loop's turn, the receive's own path and its copy
//! out), the echo's send (t2 to t3), and back (t3 to t4). U-Net without
//! applet, U-Net with the lent standard applet on both endpoints
//! (`unet::applets::STANDARD_LENT`, the demo's "std lent"), or the bare
//! SPSC ring that `loop_rtt` compares it with (`unet::peer`), at one size.
//! The lent applet's 1 KiB `send` here is what showed the inbox's warm
//! start read at every push (docs/benchmarks.md, "The warm start a pass
//! of 64 KiB"); run the kinds in turn for a comparison, and under `perf
//! record -e cpu-clock` for a profile in time.
//!
//! ```sh
//! cargo build --release -p unet --example loop_split
//! target/release/examples/loop_split unet 0 20000
//! target/release/examples/loop_split lent 0 20000
//! target/release/examples/loop_split ring 0 20000
//! ```
//!
//! Prints the median of each stretch in TSC ticks and in ns (the TSC's
//! rate measured against the clock over the run).
use std::time::Instant;

use unet::Config;

#[path = "common/mod.rs"]
mod common;
use common::{Idle, RingRecv, recv_into, ring_pair, send_all, tsc, unet_pair_with};

/// The sender's t0, t1, t4 and the echo's t2, t3 of each round trip.
type Stamps = (Vec<[u64; 3]>, Vec<[u64; 2]>);

/// U-Net's round trips, with `applet` on both endpoints or none.
fn unet(applet: Option<&[u8]>, size: usize, n: usize) -> Stamps {
    let (_e, mut a, mut b, ab, ba) = unet_pair_with(Config::default(), applet);
    let echo = std::thread::spawn(move || {
        unet::affinity::pin(1);
        let mut buf = Vec::with_capacity(65536);
        let mut st = Vec::with_capacity(n);
        for _ in 0..n {
            recv_into(&mut b, &mut buf, Idle::Backoff, None);
            let t2 = tsc();
            send_all(&mut b, ba, &buf, Idle::Backoff);
            st.push([t2, tsc()]);
        }
        (b, st)
    });
    let msg = vec![0x5au8; size];
    let mut buf = Vec::with_capacity(65536);
    let mut st = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = tsc();
        send_all(&mut a, ab, &msg, Idle::Backoff);
        let t1 = tsc();
        recv_into(&mut a, &mut buf, Idle::Backoff, None);
        st.push([t0, t1, tsc()]);
        assert_eq!(buf.len(), size);
    }
    let (_b, theirs) = echo.join().unwrap();
    (st, theirs)
}

/// The bare ring peer ([`common::ring_pair`]), learning of each message by
/// its slot's seal.
fn ring(size: usize, n: usize) -> Stamps {
    let (mut a, mut b) = ring_pair("loop-split-ring");
    let echo = std::thread::spawn(move || {
        unet::affinity::pin(1);
        let mut buf = vec![0u8; 65536];
        let mut st = Vec::with_capacity(n);
        while st.len() < n {
            let got = b.recv(&mut buf, Idle::Backoff, None).expect("no stop flag");
            let t2 = tsc();
            b.send(&buf[..got]);
            st.push([t2, tsc()]);
        }
        st
    });
    let msg = vec![0x5au8; size];
    let mut buf = vec![0u8; 65536];
    let mut st = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = tsc();
        a.send(&msg);
        let t1 = tsc();
        let got = a.recv(&mut buf, Idle::Backoff, None);
        st.push([t0, t1, tsc()]);
        assert_eq!(got, Some(size));
    }
    let theirs = echo.join().unwrap();
    (st, theirs)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map_or("unet", String::as_str);
    let size: usize = args
        .get(2)
        .map_or(0, |s| s.parse().expect("a size in bytes"));
    let n: usize = args.get(3).map_or(20000, |s| s.parse().expect("a count"));
    unet::affinity::pin(0);
    let (c0, t0) = (Instant::now(), tsc());
    let (mine, theirs) = match which {
        "unet" => unet(None, size, n),
        "lent" => unet(Some(unet::applets::STANDARD_LENT), size, n),
        "ring" => ring(size, n),
        _ => {
            eprintln!("loop_split: unet, lent or ring");
            std::process::exit(2);
        }
    };
    let ns_per_tick = c0.elapsed().as_secs_f64() * 1e9 / (tsc() - t0) as f64;
    // The first quarter is warm-up.
    let k = n / 4;
    let part = |f: &dyn Fn(&[u64; 3], &[u64; 2]) -> u64| {
        median(
            mine[k..]
                .iter()
                .zip(&theirs[k..])
                .map(|(m, t)| f(m, t))
                .collect(),
        )
    };
    let d = |a: u64, b: u64| b.saturating_sub(a);
    let parts = [
        ("send", part(&|m, _| d(m[0], m[1]))),
        ("to echo", part(&|m, t| d(m[1], t[0]))),
        ("echo", part(&|_, t| d(t[0], t[1]))),
        ("back", part(&|m, t| d(t[1], m[2]))),
        ("round trip", part(&|m, _| d(m[0], m[2]))),
    ];
    print!("{which} {size:5} B");
    for (name, ticks) in parts {
        print!("  {name} {:.0} ns", ticks as f64 * ns_per_tick);
    }
    println!();
}
