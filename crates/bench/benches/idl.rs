//! The idl suite under criterion: each family's calls over the in-process
//! loopback (stubs and dispatch, no wait), and round trips between two
//! processes over `idl::rt::shm` (the server a child process running this
//! same binary), raw channel included. `fastpath bench idl` prints the
//! tables with ratios and the callgrind counts.

use criterion::{Criterion, criterion_group};
use fastpath_bench::idl::{count, timing};

fn loopback(c: &mut Criterion) {
    let mut g = c.benchmark_group("idl/loopback");
    for mut s in count::subjects() {
        for (op, name) in count::OPS.iter().enumerate() {
            g.bench_function(format!("{}/{name}", s.name()), |b| b.iter(|| s.op(op)));
        }
    }
    g.finish();
}

fn shm(c: &mut Criterion) {
    // With `FASTPATH_IDL_PIN=1`, the servers on the second CPU.
    let server_cpu = fastpath_bench::idl::shm::pinning(false).map(|(_, s)| s);
    let mut fams = match timing::start_all(server_cpu) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("idl/shm skipped: {e}");
            return;
        }
    };
    let mut g = c.benchmark_group("idl/shm");
    for f in &mut fams {
        for (k, name) in timing::CALLS.iter().enumerate() {
            g.bench_function(format!("{}/{name}", f.name), |b| {
                b.iter(|| f.call(k).expect("call"))
            });
        }
        g.bench_function(format!("{}/iozone-reread", f.name), |b| {
            b.iter(|| f.iozone().expect("iozone"))
        });
    }
    g.finish();
}

mod group {
    #![allow(missing_docs)] // the function criterion_group! generates
    use super::*;
    criterion_group!(benches, loopback, shm);
}

fn main() {
    // A server child does its work and exits here.
    fastpath_bench::idl::child_dispatch();
    group::benches();
    Criterion::default().configure_from_args().final_summary();
}
