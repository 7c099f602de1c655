//! `fastpath bench ilp`: the paper's Table 4 (VCODE, PLDI 1996, §4.3),
//! replicated in one process run: copy + checksum, copy + checksum + byte
//! swap and copy + CRC-32, each done by separate passes (the reference
//! steps; `crc32fast` for the CRC), by a loop fused by hand in Rust and by
//! the ilp-generated loop, on data in cache (4 KiB, 64 KiB) and out of
//! cache (a working set of 16 times the last-level cache, in 64 KiB
//! messages and in messages larger than the cache). Methods are
//! interleaved round by round and each figure is the median, so the ratios
//! compare like with like on a machine whose absolute speed drifts. A
//! median over fewer valid rounds than stated is n/a with the reason (see
//! [`crate::bench_figures`]), and so is a ratio over it.
//!
//! `--quick` runs `Config::quick` (4 KiB and 64 KiB in cache, 64 MiB out of
//! cache, 3 rounds). `ILP_LLC_MULTIPLE=n` changes the out-of-cache working
//! set to `n` times the last-level cache (source and destination each).
//! `ILP_VECTORS=ymm` (or `xmm`) caps the generated loops' vector registers
//! (`ilp::Vectors`), e.g. to compare the AVX2 loops with the AVX-512 ones
//! on one machine; the default is `widest`.

use std::process::ExitCode;

use ilp::Vectors;
use ilp::table4::{Config, Placement, Row, run as run_table};

use crate::bench_figures::{Figure, median_figure, ratio};
use crate::bench_report::{Cell, Fmt, Report, Section, col, judge, verdict};

/// ilp over the separate passes in cache and out of cache, ilp over the
/// hand-fused loop (each at least).
const TARGET_IN_CACHE: f64 = 1.2;
const TARGET_OUT_OF_CACHE: f64 = 1.8;
const TARGET_VS_HAND: f64 = 1.0;

/// The least throughput taken as measured, MB/s: a rate below it means a
/// round of a fraction of a byte per µs, i.e. a stalled or broken sample.
const MIN_MB_PER_S: f64 = 1.0;

/// Runs the suite and prints the table (or the JSON object).
pub fn run(json: bool, quick: bool) -> ExitCode {
    let vectors = match vectors_from(std::env::var("ILP_VECTORS").ok().as_deref()) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("fastpath bench ilp: {e}");
            if json {
                crate::print_json_error("bench ilp", &e);
            }
            return ExitCode::FAILURE;
        }
    };
    let mut cfg = if quick {
        Config::quick()
    } else {
        let mult = std::env::var("ILP_LLC_MULTIPLE")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(16);
        Config::standard(mult)
    };
    cfg.vectors = vectors;
    let rows = run_table(&cfg, |s| eprintln!("{s}"));
    match report(&rows, &cfg, ilp::table4::llc_bytes(), quick).print(json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fastpath bench ilp: {e}");
            if json {
                crate::print_json_error("bench ilp", &e);
            }
            ExitCode::FAILURE
        }
    }
}

/// The vector registers `ILP_VECTORS` asks for (unset: the widest).
fn vectors_from(v: Option<&str>) -> Result<Vectors, String> {
    match v {
        None | Some("widest") => Ok(Vectors::Widest),
        Some("ymm") => Ok(Vectors::Ymm),
        Some("xmm") => Ok(Vectors::Xmm),
        Some(v) => Err(format!("ILP_VECTORS={v:?}: expected widest, ymm or xmm")),
    }
}

/// The report of a run.
pub fn report(rows: &[Row], cfg: &Config, llc: Option<usize>, quick: bool) -> Report {
    let mut r = Report::new(
        "ilp",
        quick,
        "fastpath bench ilp: Table 4 (separate passes, hand-fused Rust, ilp-generated loop)",
    );
    r.notes.push(format!("vector registers: {:?}", cfg.vectors));
    r.notes.push(format!(
        "last-level cache: {}",
        llc.map_or("unknown (assuming 64 MiB)".to_string(), |b| format!(
            "{} MiB",
            b >> 20
        ))
    ));
    let mut s = Section::new(
        "table4",
        "Table 4",
        "pipeline",
        vec![
            col("data", "data", Fmt::Dec(0)),
            col("separate_mb_per_s", "separate MB/s", Fmt::Dec(0)),
            col("handfused_mb_per_s", "hand-fused MB/s", Fmt::Dec(0)),
            col("ilp_mb_per_s", "ilp MB/s", Fmt::Dec(0)),
            col("ilp_nt_mb_per_s", "ilp-nt MB/s", Fmt::Dec(0)),
            col("ilp_over_separate", "ilp / separate", Fmt::Times),
            col("ilp_nt_over_separate", "ilp-nt / separate", Fmt::Times),
            col("ilp_over_handfused", "ilp / hand-fused", Fmt::Times),
            col("rounds", "rounds", Fmt::Dec(0)),
        ],
    );
    s.about = format!(
        "MB/s = 10^6 bytes per second, the median over the rounds (in cache: {} rounds of at least {} ms each; \
         out of cache: {} sweeps); ilp-nt: the ilp loop with non-temporal stores at every length.",
        cfg.rounds,
        cfg.sample.as_millis(),
        cfg.rounds_out
    );
    let mut in_cache = Vec::new();
    let mut out_cache = Vec::new();
    let mut vs_hand = Vec::new();
    for row in rows {
        let rounds = match row.placement {
            Placement::InCache(_) => cfg.rounds,
            Placement::OutOfCache { .. } => cfg.rounds_out,
        };
        let [sep, hand, ilp, nt]: [Figure; 4] =
            std::array::from_fn(|i| median_figure(&row.samples[i], rounds, MIN_MB_PER_S));
        let name = format!("{}, {}", row.workload.name(), row.placement.label());
        let ilp_sep = ratio(&ilp, &sep);
        let ilp_hand = ratio(&ilp, &hand);
        let target = match row.placement {
            Placement::InCache(_) => TARGET_IN_CACHE,
            Placement::OutOfCache { .. } => TARGET_OUT_OF_CACHE,
        };
        let v = (name.clone(), verdict(&ilp_sep, |x| x >= target));
        match row.placement {
            Placement::InCache(_) => in_cache.push(v),
            Placement::OutOfCache { .. } => out_cache.push(v),
        }
        vs_hand.push((name, verdict(&ilp_hand, |x| x >= TARGET_VS_HAND)));
        s.row(
            row.workload.name(),
            vec![
                Cell::Text(row.placement.label()),
                Cell::Fig(sep.clone()),
                Cell::Fig(hand),
                Cell::Fig(ilp),
                Cell::Fig(nt.clone()),
                Cell::Fig(ilp_sep),
                Cell::Fig(ratio(&nt, &sep)),
                Cell::Fig(ilp_hand),
                Cell::Int(rounds as i64),
            ],
        );
    }
    r.sections.push(s);
    r.targets = vec![
        judge(
            format!("ilp / separate >= {TARGET_IN_CACHE}x in cache"),
            &in_cache,
            String::new(),
        ),
        judge(
            format!("ilp / separate >= {TARGET_OUT_OF_CACHE}x out of cache"),
            &out_cache,
            String::new(),
        ),
        judge(
            format!("ilp / hand-fused >= {TARGET_VS_HAND}x"),
            &vs_hand,
            String::new(),
        ),
    ];
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_figures::NotMeasured;
    use ilp::table4::Workload;

    #[test]
    fn ilp_vectors_names_a_width_or_is_refused() {
        assert_eq!(vectors_from(None), Ok(Vectors::Widest));
        assert_eq!(vectors_from(Some("widest")), Ok(Vectors::Widest));
        assert_eq!(vectors_from(Some("ymm")), Ok(Vectors::Ymm));
        assert_eq!(vectors_from(Some("xmm")), Ok(Vectors::Xmm));
        assert_eq!(
            vectors_from(Some("zmm")),
            Err("ILP_VECTORS=\"zmm\": expected widest, ymm or xmm".to_string())
        );
    }

    #[test]
    fn rows_render_the_same_figures_in_the_table_and_the_json() {
        let cfg = Config::quick();
        let rows = vec![Row {
            workload: Workload::ALL[0],
            placement: Placement::InCache(4096),
            separate: 1000.0,
            handfused: 1500.0,
            ilp: 2000.0,
            ilp_nt: 1900.0,
            samples: [
                vec![1000.0, 1000.0, 1000.0],
                vec![1500.0, 1500.0, 1500.0],
                vec![2000.0, 2000.0, 2000.0],
                // A round lost: not a median over 3.
                vec![1900.0, f64::NAN, 1900.0],
            ],
        }];
        let r = report(&rows, &cfg, Some(32 << 20), true);
        let text = r.text();
        assert!(
            text.contains("| 1000 | 1500 | 2000 | n/a[1] | 2.00x | n/a[2] | 1.33x | 3 |"),
            "{text}"
        );
        let v: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        let row = &v["sections"]["table4"]["rows"][0];
        assert_eq!(row["ilp_over_separate"]["value"], 2.0);
        assert_eq!(
            row["ilp_nt_mb_per_s"]["reason"],
            NotMeasured::TooFewSamples { got: 2, want: 3 }.to_string()
        );
        assert!(row["ilp_nt_over_separate"]["value"].is_null());
        assert_eq!(v["targets"][0]["verdict"], "PASS");
    }
}
