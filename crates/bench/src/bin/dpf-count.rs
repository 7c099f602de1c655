//! Counts host instructions per dpf classification under callgrind: run
//! `valgrind --tool=callgrind --toggle-collect=dpf_count_loop dpf-count N`
//! (a batch: one code-cache scope for all packets) or
//! `--toggle-collect=dpf_count_scoped dpf-count N scoped` (a scope, a
//! lookup and the call for every packet), or
//! `--toggle-collect=dpf_count_install dpf-count N install` (10 installs
//! and removals of one filter in a table of N).
use std::hint::black_box;

#[inline(never)]
#[unsafe(no_mangle)]
fn dpf_count_loop(b: &dpf::Batch<'_>, pkts: &[Vec<u8>], trials: usize) -> usize {
    let mut hits = 0;
    for i in 0..trials {
        hits += b.classify(black_box(&pkts[i & 4095])).is_some() as usize;
    }
    hits
}

#[inline(never)]
#[unsafe(no_mangle)]
fn dpf_count_scoped(r: &mut dpf::Reader, pkts: &[Vec<u8>], trials: usize) -> usize {
    let mut hits = 0;
    for i in 0..trials {
        hits += r.classify(black_box(&pkts[i & 4095])).is_some() as usize;
    }
    hits
}

#[inline(never)]
#[unsafe(no_mangle)]
fn dpf_count_install(t: &mut dpf::Table, rounds: usize) {
    for i in 0..rounds {
        let id = t
            .install(&fastpath_bench::dpf::filter(5000 + i), 9999, 0)
            .unwrap();
        t.remove(id).unwrap();
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let mut table = fastpath_bench::dpf::table(n);
    if std::env::args().nth(2).as_deref() == Some("install") {
        dpf_count_install(&mut table, 10);
        return;
    }
    let pkts = fastpath_bench::dpf::packets(n, 4096);
    let mut r = table.reader();
    let trials = 100_000;
    let hits = if std::env::args().nth(2).as_deref() == Some("scoped") {
        dpf_count_scoped(&mut r, &pkts, trials)
    } else {
        r.batch(|b| dpf_count_loop(b, &pkts, trials))
    };
    println!("{hits} of {trials}");
}
