//! `loop_rtt`'s ping-pong (U-Net without applet on `loop`, or the bare SPSC
//! ring beside it) made for counting the cache lines that cross between
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
//! Arguments: `unet` or `ring`, the message size, the number of round
//! trips counted (512 by default: twice the receive queue's depth, so
//! that every slot is used equally often), after as many again of
//! warm-up (at least 300, so that every slot has been used once). The
//! sending thread marks the counted stretch by storing to [`MARK`], which
//! `scripts/lines.py` watches for. The lines a waiting loop polls are
//! counted once per change, as they would be by a spinning waiter: what
//! matters is which lines change hands, not how often a waiter looks.
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use unet::layout::{Layout, RxDesc};
use unet::ring::{Consumer, Producer};
use unet::transport::LoopNet;
use unet::{Config, Endpoint, Engine};

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

fn recv_into(ep: &mut Endpoint, buf: &mut Vec<u8>) {
    loop {
        if let Some(m) = ep.recv_ref() {
            buf.clear();
            m.read(|p| buf.extend_from_slice(p));
            return;
        }
        std::thread::yield_now();
    }
}

fn send_all(ep: &mut Endpoint, chan: u16, msg: &[u8]) {
    loop {
        match ep.send_with(chan, msg.len(), |b| b.copy_from_slice(msg)) {
            Err(unet::SendError::Full) => {
                ep.poll_engine();
                std::thread::yield_now();
            }
            r => return r.unwrap(),
        }
    }
}

fn unet(size: usize, warm: usize, n: usize) {
    let net = LoopNet::new();
    let e = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    let mut a = e.create_endpoint(Config::default(), None).unwrap();
    let mut b = e.create_endpoint(Config::default(), None).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    let echo = std::thread::spawn(move || {
        let mut buf = Vec::with_capacity(65536);
        for _ in 0..warm + n {
            recv_into(&mut b, &mut buf);
            send_all(&mut b, ba, &buf);
        }
        b
    });
    let msg = vec![0x5au8; size];
    let mut buf = Vec::with_capacity(65536);
    marked(warm, n, || {
        send_all(&mut a, ab, &msg);
        recv_into(&mut a, &mut buf);
        assert_eq!(buf.len(), size);
    });
    let _b = echo.join().unwrap();
}

fn ring(size: usize, warm: usize, n: usize) {
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
    let (s1, s2) = (seg.clone(), seg2.clone());
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut left = warm + n;
        while left > 0 {
            match rx_b.pop() {
                Ok(Some(d)) => {
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
                    left -= 1;
                }
                _ => std::thread::yield_now(),
            }
        }
    });
    let msg = vec![0x5au8; size];
    let mut buf = vec![0u8; 65536];
    marked(warm, n, || {
        seg.write_bytes(area, &msg);
        while !tx_a
            .push(RxDesc {
                len: size as u32,
                ..RxDesc::default()
            })
            .unwrap_or(true)
        {}
        loop {
            if let Ok(Some(d)) = rx_a.pop() {
                seg2.read_bytes(area, &mut buf[..d.len as usize]);
                break;
            }
            std::thread::yield_now();
        }
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
        "unet" => unet(size, warm, n),
        "ring" => ring(size, warm, n),
        _ => panic!("unet or ring"),
    }
}
