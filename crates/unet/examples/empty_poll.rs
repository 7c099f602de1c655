//! What one turn of a waiting receiver's loop costs on one thread, with
//! nothing to read: an empty [`Endpoint::recv_ref`] (the engine in this
//! process, so each empty poll also drives it: the endpoint's inbox and
//! the transport), an empty pop of the bare ring that `loop_rtt` compares
//! U-Net with, and the `spin_loop` hint that both of `loop_rtt`'s loops
//! wait with between polls (`Backoff::snooze`).
//!
//! ```sh
//! cargo build --release -p unet --example empty_poll
//! target/release/examples/empty_poll            # 2,000,000 polls a figure
//! N=100000 valgrind --tool=callgrind target/release/examples/empty_poll
//! ```
//!
//! A message that lands just after a look at the queue is seen only a
//! turn later, so where a round trip is a few turns long (`loop_rtt` at
//! 0-56 B: about 0.1 µs against a `spin_loop` of 30-56 ns on the machine
//! of docs/benchmarks.md) its time moves in steps with the turn's length,
//! not only with the path's. Kept apart from `loop_rtt`: adding this to
//! that example's binary moved its 0 B round trip by 0.015 µs (code
//! layout alone; docs/benchmarks.md).
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use unet::layout::{Layout, RxDesc};
use unet::ring::Consumer;
use unet::transport::LoopNet;
use unet::{Config, Endpoint, Engine};

/// Nanoseconds per call of `f`, over `n` calls (the best of three runs).
fn per_call(n: u32, mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                f();
            }
            t.elapsed().as_secs_f64() * 1e9 / f64::from(n)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let n: u32 = std::env::var("N").map_or(2_000_000, |v| v.parse().expect("N: a count"));
    unet::affinity::pin(0);
    let net = LoopNet::new();
    let e = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    let mut a: Endpoint = e.create_endpoint(Config::default(), None).unwrap();
    let unet = per_call(n, || {
        assert!(black_box(&mut a).recv_ref().is_none());
    });
    let layout = Layout::new(Config::default()).unwrap();
    let seg = Arc::new(unet::shm::Segment::create("empty", layout.total).unwrap());
    let (_, q, _) = unet::shm::queues(&seg, &layout).unwrap();
    let mut rx = Consumer::<RxDesc, _>::new(q);
    let ring = per_call(n, || {
        assert!(matches!(black_box(&mut rx).pop(), Ok(None)));
    });
    let spin = per_call(n, std::hint::spin_loop);
    println!("empty poll: recv_ref {unet:.1} ns  ring pop {ring:.1} ns  spin_loop {spin:.1} ns");
}
