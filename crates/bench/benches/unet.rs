//! Criterion benchmarks of unet (the U-Net/SLE paper's §5): the
//! engine's CPU cost per message in one thread, with and without the
//! standard applet, and round trips between two threads through endpoints
//! on the `loop` transport next to the bare shared-memory SPSC ring that
//! is the floor of the design.
//!
//! - `path/one_thread/{0,56,4096}`: `a.send` then `b.recv` and a copy of
//!   the message out, one thread, no applet (the engine runs inside the
//!   send: descriptor, frame, dpf, delivery).
//! - `path/one_thread_standard/{56,4096}`: the same with the standard U-Net
//!   applet on both endpoints (the paper's interface: `doRx` reads the
//!   message from its copy in `RxBuf`).
//! - `path/one_thread_standard_lent/{56,4096}`: the same with the standard
//!   applet written to the lent `doRx` and `doTx` (`StandardLent`: the
//!   message lent to each as a `byte[]`, two copies fewer) on both
//!   endpoints.
//! - `rtt/loop/{56,4096}` and `rtt/spsc_ring/{56,4096}`: one round trip
//!   between two threads (each waiting thread spins, then yields its core
//!   after 4,096 empty polls), through two endpoints of one engine, and
//!   through two bare SPSC rings: `rtt/loop / rtt/spsc_ring` is the
//!   endpoints' overhead over the floor of their design, whose target is
//!   at most 2x.
//! - `rtt/spsc_ring_in_turn/4096`: the same ring with its longer messages
//!   at its area's 4 KiB places in turn rather than at one place
//!   (`unet::peer::Placement`); the floor is the faster of the two, as in
//!   `fastpath demo`.
//!
//! `cargo bench -p fastpath-bench --bench unet` (under a minute). The
//! instruction-count breakdown (Figure 7) is `unet-count`.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fastpath_bench::unet::{LoopEcho, RingEcho, one_way, pair};
use unet::layout::INLINE_MAX;
use unet::peer::Placement;

fn path(c: &mut Criterion) {
    let mut g = c.benchmark_group("path");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    let standard = Some(unet::applets::STANDARD);
    let lent = Some(unet::applets::STANDARD_LENT);
    let runs = [
        ("one_thread", None, &[0usize, 56, 4096][..]),
        ("one_thread_standard", standard, &[56, 4096][..]),
        ("one_thread_standard_lent", lent, &[56, 4096][..]),
    ];
    for (name, applet, sizes) in runs {
        for &size in sizes {
            let mut p = pair(applet, applet).expect("two endpoints on a loop engine");
            let msg = vec![0x5au8; size];
            let mut buf = Vec::with_capacity(1 << 16);
            g.bench_with_input(BenchmarkId::new(name, size), &size, |bch, &size| {
                bch.iter(|| {
                    let got = one_way(&mut p.a, p.ab, &mut p.b, &msg, &mut buf);
                    assert_eq!(got, Some(size), "the message arrived whole");
                })
            });
        }
    }
    g.finish();
}

fn rtt(c: &mut Criterion) {
    let mut g = c.benchmark_group("rtt");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    for size in [56usize, 4096] {
        let mut echo = LoopEcho::new(size, None).expect("two endpoints and an echo thread");
        g.bench_with_input(BenchmarkId::new("loop", size), &size, |b, _| {
            b.iter_custom(|iters| echo.round_trips(iters))
        });
        drop(echo);
        let mut ring = RingEcho::new(size).expect("two rings and an echo thread");
        g.bench_with_input(BenchmarkId::new("spsc_ring", size), &size, |b, _| {
            b.iter_custom(|iters| ring.round_trips(iters))
        });
        drop(ring);
        if size > INLINE_MAX {
            let mut ring =
                RingEcho::placed(size, Placement::InTurn).expect("two rings and an echo thread");
            g.bench_with_input(
                BenchmarkId::new("spsc_ring_in_turn", size),
                &size,
                |b, _| b.iter_custom(|iters| ring.round_trips(iters)),
            );
        }
    }
    g.finish();
}

mod group {
    #![allow(missing_docs)] // the function criterion_group! generates
    use super::*;
    criterion_group!(benches, path, rtt);
}
criterion_main!(group::benches);
