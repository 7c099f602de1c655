//! `fastpath bench idl`: IDL4's Tables 3 and 4 (Haeberlen et al., 2000)
//! replicated: instructions in the stubs and the server loop per call
//! (callgrind, exact; this binary re-runs itself under valgrind), round
//! trips between two processes over `idl::rt::shm` against the raw channel,
//! and IOzone's reread, for fastpath's generated stubs beside stubs of the
//! same shape over prost, capnp and flatbuffers and a hand-written one
//! (see `fastpath_bench::idl`). `FASTPATH_BENCH_QUICK=1` runs one short
//! round.

use std::process::ExitCode;

use fastpath_bench::idl::{self, timing::Budget};

/// Runs the suite and prints the report.
pub fn run() -> ExitCode {
    // A server child or the counted child does its work and exits here.
    idl::child_dispatch();
    let budget = if std::env::var_os("FASTPATH_BENCH_QUICK").is_some() {
        Budget::QUICK
    } else {
        Budget::DEFAULT
    };
    let report = idl::report(budget);
    println!("{report}");
    if report.contains("FAILED") {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
