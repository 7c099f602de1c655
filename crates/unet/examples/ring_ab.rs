//! The ring peer against its earlier forms, in one binary, alternated:
//! for telling a change to `unet::peer::RingEnd` from the machine's drift.
//!
//! - `old`: the peer before 3e859ec (the examples' own): every message
//!   copied into the area, its length pushed as a whole descriptor, the
//!   whole slot copied out by the receiver.
//! - `v1`: `RingEnd` as 3e859ec made it: a message of up to 56 bytes in
//!   its slot, but the descriptor built in private memory and copied into
//!   the slot whole, and the slot copied out whole before the message.
//! - `new`: `unet::peer::RingEnd` as it is (the slot written and read in
//!   place with the endpoint's own code).
//!
//! ```sh
//! cargo build --release -p unet --example ring_ab
//! target/release/examples/ring_ab 200 0,56,57,1024,4096 4 old,v1,new
//! ONE=1 target/release/examples/ring_ab 200 56 2        # both ends on one thread
//! SPLIT=1 target/release/examples/ring_ab 200 1024 1    # the round trip cut in four
//! ONE=1 valgrind --tool=callgrind --toggle-collect='*one_rounds*' \
//!   target/release/examples/ring_ab 2 56 1 new          # instructions: / 2000 round trips
//! ```
//!
//! The cross-core figure is the median of the batches' means of 50 round
//! trips, as `loop_rtt`'s; `ONE` gives the best batch of 1000 round trips
//! with both ends on the calling thread (the path's own latency, no line
//! crossing cores). Each measuring loop reads the reply it received
//! (`black_box`): without it, a receive inlined into the loop let the
//! compiler drop the copy into a buffer nothing read, and that variant's
//! 1 KiB round trip looked 0.15 µs faster.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use unet::Config;
use unet::layout::{INLINE_MAX, Layout, RxDesc};
use unet::peer::RingEnd;
use unet::ring::{Consumer, Producer};
use unet::shm::{RxQueue, Segment};
use unet::wait::Backoff;

#[path = "common/mod.rs"]
mod common;
use common::{batches, batches_and_sizes, tsc};

trait Peer: Send + 'static {
    fn send(&mut self, msg: &[u8]);
    fn try_recv(&mut self, buf: &mut [u8]) -> Option<usize>;
}

impl Peer for RingEnd {
    #[inline(always)]
    fn send(&mut self, msg: &[u8]) {
        RingEnd::send(self, msg)
    }
    #[inline(always)]
    fn try_recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        RingEnd::try_recv(self, buf)
    }
}

/// One end of the earlier peers: a segment's receive queue and area to
/// send through, another's to receive through (both areas at `area`).
struct End {
    tx: (Arc<Segment>, Producer<RxDesc, RxQueue>),
    rx: (Arc<Segment>, Consumer<RxDesc, RxQueue>),
    area: usize,
    area_len: usize,
}

fn end_pair(tag: &str) -> (End, End) {
    let layout = Layout::new(Config::default()).unwrap();
    let way = |dir: &str| {
        let seg = Arc::new(Segment::create(&format!("{tag}-{dir}"), layout.total).unwrap());
        let (_, q, _) = unet::shm::queues(&seg, &layout).unwrap();
        (seg, Producer::new(q.clone()), Consumer::new(q))
    };
    let (there, tx_a, rx_b) = way("there");
    let (back, tx_b, rx_a) = way("back");
    let (area, area_len) = (layout.area, layout.area_len);
    (
        End {
            tx: (there.clone(), tx_a),
            rx: (back.clone(), rx_a),
            area,
            area_len,
        },
        End {
            tx: (back, tx_b),
            rx: (there, rx_b),
            area,
            area_len,
        },
    )
}

/// The peer before 3e859ec (crates/unet/examples/common/mod.rs then).
struct Old(End);

impl Peer for Old {
    fn send(&mut self, msg: &[u8]) {
        let e = &mut self.0;
        e.tx.0.write_bytes(e.area, msg);
        let d = RxDesc {
            len: msg.len() as u32,
            ..RxDesc::default()
        };
        while !e.tx.1.push(d).unwrap_or(true) {
            std::hint::spin_loop();
        }
    }
    #[inline]
    fn try_recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        let e = &mut self.0;
        let d = e.rx.1.pop_sealed()?;
        let n = (d.len as usize).min(buf.len());
        e.rx.0.read_bytes(e.area, &mut buf[..n]);
        Some(n)
    }
}

/// `RingEnd` as 3e859ec made it (crates/unet/src/peer.rs then).
struct V1(End);

impl Peer for V1 {
    #[inline]
    fn send(&mut self, msg: &[u8]) {
        let e = &mut self.0;
        let d = if msg.len() <= INLINE_MAX {
            RxDesc::inline(0, msg)
        } else {
            assert!(msg.len() <= e.area_len, "longer than the ring's area");
            e.tx.0.write_bytes(e.area, msg);
            RxDesc {
                len: msg.len() as u32,
                ..RxDesc::default()
            }
        };
        while !e.tx.1.push(d).unwrap_or(true) {
            std::hint::spin_loop();
        }
    }
    #[inline]
    fn try_recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        let e = &mut self.0;
        let d = e.rx.1.pop_sealed()?;
        let len = d.len as usize;
        let n = len.min(buf.len());
        if len <= INLINE_MAX {
            buf[..n].copy_from_slice(&d.data[..n]);
        } else {
            e.rx.0.read_bytes(e.area, &mut buf[..n]);
        }
        Some(n)
    }
}

fn recv<P: Peer>(p: &mut P, buf: &mut [u8], stop: Option<&AtomicBool>) -> Option<usize> {
    let mut wait = Backoff::default();
    loop {
        if let Some(n) = p.try_recv(buf) {
            return Some(n);
        }
        wait.snooze();
        if wait.now_and_then() && stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return None;
        }
    }
}

/// The round trip between this thread (CPU 0) and an echo (CPU 1), µs.
fn rtt<P: Peer>((mut a, mut b): (P, P), size: usize, n: usize) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let echo = std::thread::spawn(move || {
        unet::affinity::pin(1);
        let mut buf = vec![0u8; 65536];
        while let Some(n) = recv(&mut b, &mut buf, Some(&st)) {
            b.send(&buf[..n]);
        }
    });
    let msg = vec![0x5au8; size];
    let mut buf = vec![0u8; 65536];
    let round = || {
        a.send(&msg);
        let got = recv(&mut a, &mut buf, None);
        std::hint::black_box(&buf);
        assert_eq!(got, Some(size));
    };
    let us = batches(n, round);
    stop.store(true, Ordering::Relaxed);
    echo.join().unwrap();
    us
}

/// Both ends on this thread: the best of `n` batches of 1000 round trips,
/// µs per round trip.
fn one<P: Peer>((mut a, mut b): (P, P), size: usize, n: usize) -> f64 {
    let msg = vec![0x5au8; size];
    let (mut buf, mut buf2) = (vec![0u8; 65536], vec![0u8; 65536]);
    let mut best = f64::MAX;
    for _ in 0..n {
        let t = Instant::now();
        one_rounds(&mut a, &mut b, &msg, &mut buf, &mut buf2, 1000);
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / 1000.0);
    }
    best
}

/// `k` round trips with both ends on this thread (out of line, for
/// callgrind's `--toggle-collect=*one_rounds*`).
#[inline(never)]
fn one_rounds<P: Peer>(
    a: &mut P,
    b: &mut P,
    msg: &[u8],
    buf: &mut [u8],
    buf2: &mut [u8],
    k: usize,
) {
    for _ in 0..k {
        a.send(msg);
        let n = b.try_recv(buf).unwrap();
        b.send(&buf[..n]);
        let m = a.try_recv(buf2).unwrap();
        assert_eq!(m, msg.len());
    }
    std::hint::black_box(buf2);
}

/// The round trip cut in four by the counter (medians, in ticks): this
/// thread's send call; from its start to the echo's receive returning; the
/// echo's send call; from its return to this thread's receive returning.
fn split<P: Peer>((mut a, mut b): (P, P), size: usize, n: usize) -> [u64; 4] {
    let rounds = 500 + n * 50;
    let echo = std::thread::spawn(move || {
        unet::affinity::pin(1);
        let mut buf = vec![0u8; 65536];
        let mut st = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let n = recv(&mut b, &mut buf, None).unwrap();
            let t2 = tsc();
            b.send(&buf[..n]);
            st.push([t2, tsc()]);
        }
        st
    });
    let msg = vec![0x5au8; size];
    let mut buf = vec![0u8; 65536];
    let mut st = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t0 = tsc();
        a.send(&msg);
        let t1 = tsc();
        let got = recv(&mut a, &mut buf, None);
        std::hint::black_box(&buf);
        st.push([t0, t1, tsc()]);
        assert_eq!(got, Some(size));
    }
    let theirs = echo.join().unwrap();
    let mut parts: [Vec<u64>; 4] = Default::default();
    for (m, e) in st.iter().zip(&theirs).skip(500) {
        parts[0].push(m[1].wrapping_sub(m[0]));
        parts[1].push(e[0].wrapping_sub(m[0]));
        parts[2].push(e[1].wrapping_sub(e[0]));
        parts[3].push(m[2].wrapping_sub(e[1]));
    }
    parts.map(|mut v| {
        v.sort();
        v[v.len() / 2]
    })
}

/// One measurement of `ab` at `size`, by the mode the environment names;
/// µs (`SPLIT` prints its four parts and gives ticks).
fn measure<P: Peer>(ab: (P, P), size: usize, n: usize) -> f64 {
    if std::env::var_os("ONE").is_some() {
        one(ab, size, n)
    } else if std::env::var_os("SPLIT").is_some() {
        let p = split(ab, size, n);
        println!(
            "      split (ticks): send {}  to echo {}  echo send {}  back {}",
            p[0], p[1], p[2], p[3]
        );
        (p[1] + p[2] + p[3]) as f64
    } else {
        rtt(ab, size, n)
    }
}

fn main() {
    let (n, sizes) = batches_and_sizes(200, "0,56,57,1024,4096");
    let args: Vec<String> = std::env::args().collect();
    let pairs: usize = args.get(3).map_or(4, |s| s.parse().unwrap());
    let which: Vec<String> = args
        .get(4)
        .map_or("old,v1,new".into(), |s| s.clone())
        .split(',')
        .map(String::from)
        .collect();
    unet::affinity::pin(0);
    for &s in &sizes {
        let mut res: Vec<Vec<f64>> = vec![vec![]; which.len()];
        for _ in 0..pairs {
            for (k, w) in which.iter().enumerate() {
                let t = match w.as_str() {
                    "old" => {
                        let (a, b) = end_pair("ring-ab-old");
                        measure((Old(a), Old(b)), s, n)
                    }
                    "v1" => {
                        let (a, b) = end_pair("ring-ab-v1");
                        measure((V1(a), V1(b)), s, n)
                    }
                    "new" => measure(unet::peer::ring_pair("ring-ab-new").unwrap(), s, n),
                    _ => panic!("peers: old, v1, new"),
                };
                res[k].push(t);
            }
        }
        let mut line = format!("{s:5} B");
        for (w, v) in which.iter().zip(&res) {
            let v: Vec<String> = v.iter().map(|x| format!("{x:.3}")).collect();
            line += &format!("  {w} {}", v.join(" "));
        }
        println!("{line}");
    }
}
