//! `fastpath ilp demo`: composes the Table 4 pipelines at run time, shows
//! what each computes on RFC 1071's example and the CRC check string, the
//! size of each generated loop, and a quick throughput comparison with
//! separate passes and hand-fused Rust (`fastpath bench ilp` is the full
//! run).

use clap::Subcommand;
use std::process::ExitCode;

use ilp::table4::{Config, Workload, markdown, run as run_table};
use ilp::{Pipeline, State, Step};

/// The `ilp` subcommands.
#[derive(Subcommand)]
pub enum IlpCmd {
    /// Run the pipelines and print their throughput.
    Demo,
}

/// Runs an `ilp` subcommand.
pub fn main(cmd: IlpCmd) -> ExitCode {
    match cmd {
        IlpCmd::Demo => match demo() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fastpath ilp demo: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn demo() -> Result<(), ilp::Error> {
    let rfc1071 = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    for w in Workload::ALL {
        let p = Pipeline::new(&w.steps())?;
        let input: &[u8] = if w == Workload::CopyCrc32 {
            b"123456789"
        } else {
            &rfc1071
        };
        let mut dst = vec![0u8; input.len()];
        let out = p.run(input, &mut dst, &mut State::new())?;
        println!(
            "{:<22} {:>4} bytes of code; on {:02x?}: checksum {:?} crc32 {:?} -> {:02x?}",
            w.name(),
            p.code_len(),
            input,
            out.checksum.map(|c| format!("{c:#06x}")),
            out.crc32.map(|c| format!("{c:#010x}")),
            dst
        );
    }
    // Any order and mix composes, and a stream can be fed in pieces.
    let steps = [
        Step::Xor(b"secret".to_vec()),
        Step::Crc32,
        Step::Bswap16,
        Step::Copy,
        Step::Checksum,
    ];
    let p = Pipeline::new(&steps)?;
    let msg = b"integrated layer processing, one pass over the data";
    let mut st = State::new();
    let mut dst = vec![0u8; msg.len()];
    let (a, b) = msg.split_at(17);
    let (da, db) = dst.split_at_mut(17);
    p.run(a, da, &mut st)?;
    let out = p.run(b, db, &mut st)?;
    println!(
        "{steps:?}\n  over {} bytes in two pieces: checksum {:#06x}, crc32 {:#010x}, {} bytes of code",
        msg.len(),
        out.checksum.unwrap_or(0),
        out.crc32.unwrap_or(0),
        p.code_len()
    );
    println!("\nthroughput (quick run; `fastpath bench ilp` for the full table):");
    let rows = run_table(&Config::quick(), |s| eprintln!("{s}"));
    println!("{}", markdown(&rows));
    Ok(())
}
