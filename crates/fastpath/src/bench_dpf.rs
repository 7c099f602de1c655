//! `fastpath bench dpf`: the VCODE paper's §4.2 experiment, dpf's merged
//! classifier against libpcap's BPF interpreter and rbpf's JIT running the
//! filters in turn (see `fastpath_bench::dpf`).

use std::process::ExitCode;

/// Runs the suite and prints its report.
pub fn run() -> ExitCode {
    println!("# fastpath bench dpf\n");
    println!("{}", fastpath_bench::dpf::report());
    ExitCode::SUCCESS
}
