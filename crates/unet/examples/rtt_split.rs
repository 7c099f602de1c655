//! Where a round trip's time goes, side by side: plain U-Net and the lent
//! standard applet (`unet::applets::STANDARD_LENT`) on both endpoints of
//! `loop`, the timing thread and its echo pinned to two CPUs, each step
//! stamped with the time-stamp counter (`rdtsc` between `lfence`s):
//!
//! - `A.send`: the timing thread's `send`, to its return (the work after
//!   the message's publication included);
//! - `A>B`: from that return to the echo thread's application having
//!   the message (what is left of the crossing, and the receiver's
//!   work);
//! - `B.send`: the echo's `send` of its reply;
//! - `B>A`: from that to the timing thread having the reply.
//!
//! Each figure is the median over the runs of a run's median (20,000
//! round trips a run, the first half left out), in ns. The two threads'
//! counters are the same clock on a CPU with `constant_tsc` and
//! `nonstop_tsc` (`/proc/cpuinfo`), as on the KVM guests this was written
//! on; elsewhere `A>B` and `B>A` mean nothing, and the two `send`s and
//! the round trip still do. The fences slow each step a little, the same
//! for both rows. It found that a 1 KiB message's `send` cost the lent
//! applet some 50 ns more than its other work: the producer's read of
//! the consumer's mark, at every push with a 1 KiB warm start
//! (docs/benchmarks.md, "The warm start a pass of 64 KiB").
//!
//! ```sh
//! cargo build --release -p unet --example rtt_split
//! target/release/examples/rtt_split 5 0,56,57,1024   # runs of each, sizes
//! ROWS=lent target/release/examples/rtt_split 3 1024  # one row alone (`unet` or `lent`),
//!                                                      # for a profile of it
//! ```
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use unet::Config;

#[path = "common/mod.rs"]
mod common;
use common::{Idle, recv_into, send_all, tsc, unet_pair_with};

/// Round trips a run; the first half warms up.
const ROUND_TRIPS: usize = 20_000;

/// One run: the medians of the four steps and of the round trip, ns.
fn run(applet: Option<&[u8]>, size: usize, cpus: [usize; 2]) -> [f64; 5] {
    let (_e, mut a, mut b, ab, ba) = unet_pair_with(Config::default(), applet);
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let echo = std::thread::spawn(move || {
        unet::affinity::pin(cpus[1]);
        let mut buf = Vec::with_capacity(65536);
        let mut stamps = Vec::with_capacity(ROUND_TRIPS);
        while recv_into(&mut b, &mut buf, Idle::Backoff, Some(&st)).is_some() {
            let got = tsc();
            send_all(&mut b, ba, &buf, Idle::Backoff);
            stamps.push((got, tsc()));
        }
        stamps
    });
    let msg = vec![0x5au8; size];
    let mut buf = Vec::with_capacity(65536);
    let mut stamps = Vec::with_capacity(ROUND_TRIPS);
    let (t0, clock) = (tsc(), std::time::Instant::now());
    for _ in 0..ROUND_TRIPS {
        let start = tsc();
        send_all(&mut a, ab, &msg, Idle::Backoff);
        let sent = tsc();
        recv_into(&mut a, &mut buf, Idle::Backoff, None);
        stamps.push((start, sent, tsc()));
    }
    let per_ns = (tsc() - t0) as f64 / clock.elapsed().as_nanos() as f64;
    stop.store(true, Ordering::Relaxed);
    let echoed = echo.join().expect("the echo thread");
    let ns = |from: u64, to: u64| to.wrapping_sub(from) as i64 as f64 / per_ns;
    let mut steps: [Vec<f64>; 5] = Default::default();
    for (&(start, sent, back), &(got, replied)) in stamps.iter().zip(&echoed).skip(ROUND_TRIPS / 2)
    {
        for (k, d) in [
            ns(start, sent),
            ns(sent, got),
            ns(got, replied),
            ns(replied, back),
            ns(start, back),
        ]
        .into_iter()
        .enumerate()
        {
            steps[k].push(d);
        }
    }
    steps.map(|mut v| median(&mut v))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args.get(1).map_or(5, |s| s.parse().expect("runs: a count"));
    if runs == 0 {
        eprintln!("rtt_split: runs is at least 1");
        std::process::exit(2);
    }
    let sizes: Vec<usize> = args
        .get(2)
        .map_or("0,56,57,1024", String::as_str)
        .split(',')
        .map(|s| s.parse().expect("sizes: byte counts, e.g. 0,56,57,1024"))
        .collect();
    let Some(cpus) = unet::affinity::two_cpus() else {
        eprintln!("rtt_split: needs two CPUs to pin the threads to");
        std::process::exit(1);
    };
    let old = unet::affinity::pin(cpus[0]);
    let all: [(&str, Option<&[u8]>); 2] =
        [("unet", None), ("lent", Some(unet::applets::STANDARD_LENT))];
    let only = std::env::var("ROWS").ok();
    let rows: Vec<_> = all
        .into_iter()
        .filter(|(name, _)| only.as_deref().is_none_or(|o| o == *name))
        .collect();
    if rows.is_empty() {
        eprintln!("rtt_split: ROWS is `unet` or `lent`");
        std::process::exit(2);
    }
    println!(
        "ns, medians of {runs} runs' medians; CPUs {} and {}",
        cpus[0], cpus[1]
    );
    println!(" size  row    A.send     A>B  B.send     B>A  round trip");
    for &size in &sizes {
        // The rows take turns within each run of the set.
        let mut figures = vec![Vec::new(); rows.len()];
        for _ in 0..runs {
            for (f, &(_, applet)) in figures.iter_mut().zip(&rows) {
                f.push(run(applet, size, cpus));
            }
        }
        for (f, &(name, _)) in figures.iter().zip(&rows) {
            let m: Vec<f64> = (0..5)
                .map(|k| median(&mut f.iter().map(|r| r[k]).collect::<Vec<_>>()))
                .collect();
            println!(
                "{size:5}  {name:5} {:7.1} {:7.1} {:7.1} {:7.1} {:11.1}",
                m[0], m[1], m[2], m[3], m[4]
            );
        }
    }
    if let Some(old) = old {
        unet::affinity::restore(&old);
    }
}
