//! `fastpath ilp demo [--json]`: composes the Table 4 pipelines at run
//! time, shows what each computes on RFC 1071's example and the CRC check
//! string, the size of each generated loop, and a quick throughput
//! comparison with separate passes and hand-fused Rust (`fastpath bench
//! ilp` is the full run).
//!
//! The output is for people: bytes in hex, steps by name, and the
//! throughput table once (progress goes to stderr as a spinner that is
//! cleared when the table is ready). `--json` prints the same results as one
//! JSON object for scripts:
//!
//! ```text
//! { "pipelines": [ { "name", "steps": [..], "code_bytes", "input": "hex",
//!                    "output": "hex", "checksum": "0x220d" | null,
//!                    "crc32": "0xcbf43926" | null } ],
//!   "composed": { "steps": [..], "bytes", "pieces", "checksum", "crc32",
//!                 "code_bytes" },
//!   "throughput": [ { "pipeline", "data", "separate_mb_s", "hand_fused_mb_s",
//!                     "ilp_mb_s", "ilp_nt_mb_s" } ] }
//! ```
//!
//! or, should a pipeline fail, the crate's error object `{"error":
//! {"command": "ilp demo", "message"}}`, the message on stderr too.

use clap::Subcommand;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use ilp::table4::{Config, Row, Workload, run as run_table};
use ilp::{Pipeline, State, Step};
use serde_json::{Value, json};

/// The `ilp` subcommands.
#[derive(Subcommand)]
pub enum IlpCmd {
    /// Run the pipelines on known inputs and print what they compute and
    /// their throughput.
    Demo {
        /// Print the results as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Runs an `ilp` subcommand.
pub fn main(cmd: IlpCmd) -> ExitCode {
    match cmd {
        IlpCmd::Demo { json } => match demo(json) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fastpath ilp demo: {e}");
                if json {
                    crate::print_json_error("ilp demo", &e.to_string());
                }
                ExitCode::FAILURE
            }
        },
    }
}

/// A step as a person names it.
fn step_name(s: &Step) -> String {
    match s {
        Step::Copy => "copy".into(),
        Step::Checksum => "checksum".into(),
        Step::Bswap16 => "bswap16".into(),
        Step::Bswap32 => "bswap32".into(),
        Step::Crc32 => "crc32".into(),
        Step::Xor(key) => match std::str::from_utf8(key) {
            Ok(k) if k.chars().all(|c| c.is_ascii_graphic() || c == ' ') => {
                format!("xor \"{k}\"")
            }
            _ => format!("xor 0x{}", hex(key, "")),
        },
    }
}

fn hex(bytes: &[u8], sep: &str) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(sep)
}

fn checksum_text(c: Option<u16>) -> Option<String> {
    c.map(|c| format!("{c:#06x}"))
}

fn crc_text(c: Option<u32>) -> Option<String> {
    c.map(|c| format!("{c:#010x}"))
}

fn demo(json: bool) -> Result<(), ilp::Error> {
    let rfc1071 = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    let mut pipelines = Vec::new();
    for w in Workload::ALL {
        let steps = w.steps();
        let p = Pipeline::new(&steps)?;
        let (input, what): (&[u8], &str) = if w == Workload::CopyCrc32 {
            (b"123456789", "the CRC check string \"123456789\"")
        } else {
            (&rfc1071, "RFC 1071's example")
        };
        let mut dst = vec![0u8; input.len()];
        let out = p.run(input, &mut dst, &mut State::new())?;
        pipelines.push(json!({
            "name": w.name(),
            "steps": steps.iter().map(step_name).collect::<Vec<_>>(),
            "code_bytes": p.code_len(),
            "input_is": what,
            "input": hex(input, " "),
            "output": hex(&dst, " "),
            "checksum": checksum_text(out.checksum),
            "crc32": crc_text(out.crc32),
        }));
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
    let composed = json!({
        "steps": steps.iter().map(step_name).collect::<Vec<_>>(),
        "bytes": msg.len(),
        "pieces": 2,
        "checksum": checksum_text(out.checksum),
        "crc32": crc_text(out.crc32),
        "code_bytes": p.code_len(),
    });

    let rows = throughput();
    if json {
        let doc = json!({
            "pipelines": pipelines,
            "composed": composed,
            "throughput": rows.iter().map(row_json).collect::<Vec<_>>(),
        });
        let _ = writeln!(std::io::stdout().lock(), "{doc:#}");
    } else {
        let _ = write!(
            std::io::stdout().lock(),
            "{}",
            text(&pipelines, &composed, &rows)
        );
    }
    Ok(())
}

/// The quick throughput run, with a spinner on stderr while it runs.
fn throughput() -> Vec<Row> {
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} ilp demo: {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar.set_message("measuring throughput");
    // The run reports a heading per placement and a line per pipeline; the
    // headings say where it is, the lines become the table.
    let rows = run_table(&Config::quick(), |s| {
        if !s.starts_with(' ') {
            bar.set_message(format!("measuring throughput: {s}"));
        }
    });
    bar.finish_and_clear();
    rows
}

fn row_json(r: &Row) -> Value {
    json!({
        "pipeline": r.workload.name(),
        "data": r.placement.label(),
        "separate_mb_s": r.separate,
        "hand_fused_mb_s": r.handfused,
        "ilp_mb_s": r.ilp,
        "ilp_nt_mb_s": r.ilp_nt,
    })
}

fn opt(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

/// The results as text for people.
fn text(pipelines: &[Value], composed: &Value, rows: &[Row]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for p in pipelines {
        let computed: Vec<String> = ["checksum", "crc32"]
            .iter()
            .filter_map(|k| p[*k].as_str().map(|v| format!("{k} {v}")))
            .collect();
        let _ = writeln!(
            s,
            "{}: {} bytes of code\n  on {}: {}\n  {}\n  copied out: {}",
            p["name"].as_str().unwrap_or(""),
            p["code_bytes"],
            p["input_is"].as_str().unwrap_or(""),
            opt(&p["input"]),
            computed.join(", "),
            opt(&p["output"]),
        );
    }
    let steps: Vec<&str> = composed["steps"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "{}: {} bytes of code\n  over {} bytes fed in {} pieces: checksum {}, crc32 {}",
        steps.join(", then "),
        composed["code_bytes"],
        composed["bytes"],
        composed["pieces"],
        opt(&composed["checksum"]),
        opt(&composed["crc32"]),
    );
    let _ = writeln!(
        s,
        "\nthroughput in MB/s (quick run; `fastpath bench ilp` for the full table):"
    );
    let data_w = rows
        .iter()
        .map(|r| r.placement.label().len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        s,
        "  {:<22} {:<data_w$} {:>9} {:>10} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "pipeline",
        "data",
        "separate",
        "hand-fused",
        "ilp",
        "ilp-nt",
        "ilp/sep",
        "nt/sep",
        "ilp/hand"
    );
    for r in rows {
        let _ = writeln!(
            s,
            "  {:<22} {:<data_w$} {:>9.0} {:>10.0} {:>9.0} {:>9.0} {:>7.2}x {:>7.2}x {:>7.2}x",
            r.workload.name(),
            r.placement.label(),
            r.separate,
            r.handfused,
            r.ilp,
            r.ilp_nt,
            r.ilp_vs_separate(),
            r.ilp_nt_vs_separate(),
            r.ilp_vs_handfused()
        );
    }
    s
}
