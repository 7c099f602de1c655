//! `fastpath bench ilp`: the paper's Table 4 (VCODE, PLDI 1996, §4.3),
//! replicated in one process run: copy + checksum, copy + checksum + byte
//! swap and copy + CRC-32, each done by separate passes (the reference
//! steps; `crc32fast` for the CRC), by a loop fused by hand in Rust and by
//! the ilp-generated loop, on data in cache (4 KiB, 64 KiB) and out of
//! cache (a working set of 16 times the last-level cache, in 64 KiB
//! messages and in messages larger than the cache). Methods are
//! interleaved round by round and each figure is the median, so the ratios
//! compare like with like on a machine whose absolute speed drifts.
//!
//! `ILP_LLC_MULTIPLE=n` changes the out-of-cache working set to `n` times
//! the last-level cache (source and destination each).

use std::process::ExitCode;

use ilp::table4::{Config, markdown, run as run_table};

/// Runs the suite and prints the table.
pub fn run() -> ExitCode {
    let mult = std::env::var("ILP_LLC_MULTIPLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let llc = ilp::table4::llc_bytes();
    println!(
        "ilp: Table 4 (separate passes, hand-fused Rust, ilp-generated loop); last-level cache {}",
        llc.map_or("unknown (assuming 64 MiB)".to_string(), |b| format!(
            "{} MiB",
            b >> 20
        ))
    );
    let rows = run_table(&Config::standard(mult), |s| eprintln!("{s}"));
    println!("{}", markdown(&rows));
    println!(
        "targets: ilp/separate >= 1.2x in cache and >= 1.8x out of cache; ilp/hand-fused >= 1.0x"
    );
    ExitCode::SUCCESS
}
