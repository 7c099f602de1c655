//! The round trip of `fastpath demo`'s latency table on `loop` between two
//! threads pinned to CPUs 0 and 1, U-Net without applet beside the bare
//! SPSC ring, at chosen message sizes and endpoint sizes, without the
//! rest of the demo: for finding where a size's time goes.
//!
//! ```sh
//! cargo build --release -p unet --example loop_rtt
//! target/release/examples/loop_rtt 200 0,8,56,57,1024   # 200 batches of 50
//! BUFS=64x1024 target/release/examples/loop_rtt         # 64 buffers of 1 KiB
//! ONE=1 target/release/examples/loop_rtt 200 0,56        # also both ends on one thread
//! REPLY=0 target/release/examples/loop_rtt 200 57        # the echo answers 0 bytes
//! ```
//!
//! `ONE=1` adds the U-Net round trip with both endpoints on the calling
//! thread: the same two messages with no cache line crossing cores, so
//! what is left is the path's own latency (its instructions and locked
//! operations). `REPLY=n` makes the echo answer with at most `n` bytes of
//! each message, to see one direction of a size alone.
//!
//! Each figure is the median of the batches' means, as in the demo (which
//! also measures each cell again while it is unsteady; this does not).
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use unet::layout::{Layout, RxDesc};
use unet::ring::{Consumer, Producer};
use unet::transport::LoopNet;
use unet::wait::Backoff;
use unet::{Config, Endpoint, Engine};

fn recv_into(ep: &mut Endpoint, buf: &mut Vec<u8>, stop: &AtomicBool) -> Option<u16> {
    let mut wait = Backoff::default();
    loop {
        if let Some(m) = ep.recv_ref() {
            buf.clear();
            m.read(|p| buf.extend_from_slice(p));
            return Some(m.chan());
        }
        wait.snooze();
        if wait.now_and_then() && stop.load(Ordering::Relaxed) {
            return None;
        }
    }
}

fn send_all(ep: &mut Endpoint, chan: u16, msg: &[u8]) {
    let mut wait = Backoff::default();
    loop {
        match ep.send_with(chan, msg.len(), |b| b.copy_from_slice(msg)) {
            Err(unet::SendError::Full) => {
                ep.poll_engine();
                wait.snooze();
            }
            r => return r.unwrap(),
        }
    }
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e6
}

fn batches(n: usize, mut round: impl FnMut()) -> f64 {
    for _ in 0..500 {
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
    median(means)
}

fn unet_rtt(size: usize, n: usize) -> f64 {
    let net = LoopNet::new();
    let e = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
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
    let mut a = e.create_endpoint(cfg, None).unwrap();
    let mut b = e.create_endpoint(cfg, None).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let reply: Option<usize> = std::env::var("REPLY")
        .ok()
        .map(|v| v.parse().expect("REPLY: a byte count, e.g. REPLY=0"));
    let echo = std::thread::spawn(move || {
        unet::affinity::pin(1);
        let mut buf = Vec::with_capacity(65536);
        while recv_into(&mut b, &mut buf, &st).is_some() {
            let n = reply.unwrap_or(buf.len()).min(buf.len());
            send_all(&mut b, ba, &buf[..n]);
        }
        b
    });
    let msg = vec![0x5au8; size];
    let mut buf = Vec::with_capacity(65536);
    let never = AtomicBool::new(false);
    let r = batches(n, || {
        send_all(&mut a, ab, &msg);
        recv_into(&mut a, &mut buf, &never);
        assert_eq!(buf.len(), reply.unwrap_or(size).min(size));
    });
    stop.store(true, Ordering::Relaxed);
    let _b = echo.join().unwrap();
    r
}

/// [`unet_rtt`] with both endpoints on this thread: the round trip's
/// instructions and private cache traffic, without a line crossing cores.
fn unet_one(size: usize, n: usize) -> f64 {
    let net = LoopNet::new();
    let e = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    let mut a = e.create_endpoint(Config::default(), None).unwrap();
    let mut b = e.create_endpoint(Config::default(), None).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    let msg = vec![0x5au8; size];
    let mut buf = Vec::with_capacity(65536);
    let never = AtomicBool::new(false);
    batches(n, || {
        send_all(&mut a, ab, &msg);
        recv_into(&mut b, &mut buf, &never);
        send_all(&mut b, ba, &buf);
        recv_into(&mut a, &mut buf, &never);
        assert_eq!(buf.len(), size);
    })
}

fn ring_rtt(size: usize, n: usize) -> f64 {
    let layout = Layout::new(Config::default()).unwrap();
    let ring = |name| {
        let seg = Arc::new(unet::shm::Segment::create(name, layout.total).unwrap());
        let (_, q, _) = unet::shm::queues(&seg, &layout);
        (
            seg,
            Producer::<RxDesc, _>::new(q.clone()),
            Consumer::<RxDesc, _>::new(q),
        )
    };
    let (seg, mut tx_a, mut rx_b) = ring("r1");
    let (seg2, mut tx_b, mut rx_a) = ring("r2");
    let area = layout.area;
    let stop = Arc::new(AtomicBool::new(false));
    let (s1, s2) = (seg.clone(), seg2.clone());
    let st = stop.clone();
    let echo = std::thread::spawn(move || {
        unet::affinity::pin(1);
        let mut buf = vec![0u8; 65536];
        let mut wait = Backoff::default();
        loop {
            match rx_b.pop() {
                Ok(Some(d)) => {
                    wait = Backoff::default();
                    let n = d.len as usize;
                    s1.read_bytes(area, &mut buf[..n]);
                    s2.write_bytes(area, &buf[..n]);
                    while !tx_b
                        .push(RxDesc {
                            len: d.len,
                            ..RxDesc::default()
                        })
                        .unwrap_or(true)
                    {}
                }
                _ => {
                    if st.load(Ordering::Relaxed) {
                        return;
                    }
                    wait.snooze();
                }
            }
        }
    });
    let msg = vec![0x5au8; size];
    let mut buf = vec![0u8; 65536];
    let r = batches(n, || {
        seg.write_bytes(area, &msg);
        while !tx_a
            .push(RxDesc {
                len: size as u32,
                ..RxDesc::default()
            })
            .unwrap_or(true)
        {}
        let mut wait = Backoff::default();
        loop {
            if let Ok(Some(d)) = rx_a.pop() {
                seg2.read_bytes(area, &mut buf[..d.len as usize]);
                break;
            }
            wait.snooze();
        }
    });
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    r
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(80, |s| s.parse().unwrap());
    let sizes: Vec<usize> = args
        .get(2)
        .map_or("0,56,57,1024".into(), |s| s.clone())
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    unet::affinity::pin(0);
    for &s in &sizes {
        let u = unet_rtt(s, n);
        let r = ring_rtt(s, n);
        let one = if std::env::var_os("ONE").is_some() {
            format!("  one thread {:.3} us", unet_one(s, n))
        } else {
            String::new()
        };
        println!(
            "{s:5} B  unet {u:.3} us  ring {r:.3} us  ratio {:.2}x{one}",
            u / r
        );
    }
}
