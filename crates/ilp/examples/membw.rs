//! Memory-traffic probe for the out-of-cache rows of Table 4: over a
//! working set far beyond the last-level cache, the speed of a read-only
//! pass (the reference checksum), a copy (`copy_from_slice`), and the
//! ilp copy+checksum and copy+crc32 loops with cached and with
//! non-temporal stores. The buffers sit where the allocator puts them (16
//! bytes past a 64-byte boundary for these sizes), as in the benchmark.
//! `cargo run --release -p ilp --example membw [MiB]`.

use std::hint::black_box;
use std::time::Instant;

use ilp::{Pipeline, State, Step, Stores, reference};

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1024);
    let n = mib << 20;
    let src: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
    let mut dst = vec![1u8; n];
    let sum = Pipeline::new(&[Step::Copy, Step::Checksum]).unwrap();
    let crc = Pipeline::new(&[Step::Copy, Step::Crc32]).unwrap();
    let chunk = 64 << 10;
    for round in 0..3 {
        let mut line = format!("round {round}:");
        let t = Instant::now();
        let mut st = State::new();
        reference::checksum(&mut st, black_box(&src));
        black_box(st);
        line += &format!("  read {:.0}", n as f64 / t.elapsed().as_secs_f64() / 1e6);
        let t = Instant::now();
        dst.copy_from_slice(black_box(&src));
        line += &format!("  memcpy {:.0}", n as f64 / t.elapsed().as_secs_f64() / 1e6);
        for (name, p, stores, msg) in [
            ("sum-cached", &sum, Stores::Cached, n),
            ("sum-nt", &sum, Stores::NonTemporal, n),
            ("crc-nt", &crc, Stores::NonTemporal, n),
            ("sum-cached/64K", &sum, Stores::Cached, chunk),
            ("sum-nt/64K", &sum, Stores::NonTemporal, chunk),
        ] {
            let t = Instant::now();
            for (s, d) in src.chunks(msg).zip(dst.chunks_mut(msg)) {
                let mut st = State::new();
                black_box(p.run_with(s, d, &mut st, stores).unwrap());
            }
            line += &format!("  {name} {:.0}", n as f64 / t.elapsed().as_secs_f64() / 1e6);
        }
        println!("{line} MB/s");
    }
}
