//! `fastpath bench dpf`: the VCODE paper's §4.2 experiment, dpf's merged
//! classifier against libpcap's BPF interpreter and rbpf's JIT running the
//! filters in turn (see `fastpath_bench::dpf`), and in the kernel, dpf's
//! table lowered to XDP against the same filters as classic BPF (see
//! `fastpath_bench::dpf_kernel`).
//!
//! Every time is the median of its interleaved rounds (see
//! [`crate::bench_figures`]: fewer valid rounds than stated, or a time at or
//! below a twentieth of a cycle, is n/a with the reason); ratios are
//! peer / dpf, n/a when either side is.

use std::process::ExitCode;

use fastpath_bench::dpf::{Budget, CATCH_ALL, Measured, measure_all};
use fastpath_bench::dpf_kernel::{KernelBudget, KernelMeasured, measure_kernel};

use crate::bench_figures::{Figure, MIN_NS_PER_OP, NotMeasured, median_figure, ratio};
use crate::bench_report::{Cell, Fmt, Report, Section, Target, col, verdict};

/// dpf's cost at 10,000 filters over its cost at 10 (at most: the merged
/// classifier stays flat), libpcap's cost running the 10 filters in turn
/// over dpf's (at least), and the install time of one filter into a table
/// of 1,000 in µs (below).
const TARGET_SCALING: f64 = 1.2;
const TARGET_PCAP_AT_10: f64 = 10.0;
const TARGET_INSTALL_US: f64 = 1000.0;

/// Runs the suite and prints the report (the tables, or JSON with `json`).
pub fn run(json: bool, quick: bool) -> ExitCode {
    let budget = if quick {
        Budget::QUICK
    } else {
        Budget::DEFAULT
    };
    let kbudget = if quick {
        KernelBudget::QUICK
    } else {
        KernelBudget::DEFAULT
    };
    let m = measure_all(budget, |s| eprintln!("dpf: {s}"));
    let k = measure_kernel(kbudget, |s| eprintln!("dpf: {s}"));
    match report(&m, &k, kbudget, budget, quick).print(json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fastpath bench dpf: {e}");
            if json {
                crate::print_json_error("bench dpf", &e);
            }
            ExitCode::FAILURE
        }
    }
}

/// A column's median, or why there is none (`missing`: the peer did not run).
fn median(samples: &[f64], rounds: usize, missing: Option<&str>) -> Figure {
    match missing {
        Some(why) if samples.is_empty() => Figure::NotMeasured(NotMeasured::Unavailable(format!(
            "libpcap unavailable: {why}"
        ))),
        _ => median_figure(samples, rounds, MIN_NS_PER_OP),
    }
}

/// The report of a run.
pub fn report(
    m: &Measured,
    k: &KernelMeasured,
    kbudget: KernelBudget,
    budget: Budget,
    quick: bool,
) -> Report {
    let mut r = Report::new(
        "dpf",
        quick,
        "fastpath bench dpf: merged classifier against libpcap and rbpf (VCODE §4.2)",
    );
    if let Some(why) = &m.pcap_missing {
        r.notes
            .push(format!("libpcap unavailable ({why}): its column is n/a"));
    }
    let mut s = Section::new(
        "classify",
        "Classification cost",
        "N",
        vec![
            col("dpf_ns_per_pkt", "dpf ns/pkt", Fmt::Dec(2)),
            col(
                "dpf_scope_per_pkt_ns_per_pkt",
                "dpf, scope per pkt",
                Fmt::Dec(2),
            ),
            col("libpcap_ns_per_pkt", "libpcap BPF ns/pkt", Fmt::Dec(1)),
            col("rbpf_ns_per_pkt", "rbpf JIT ns/pkt", Fmt::Dec(1)),
            col("libpcap_over_dpf", "libpcap / dpf", Fmt::Times),
            col("rbpf_over_dpf", "rbpf / dpf", Fmt::Times),
        ],
    );
    s.samples = Some(budget.rounds);
    s.about = format!(
        "N endpoint filters in a cycle of eight classes (the paper's `tcp dst port P and dst host 10.0.0.1`, \
         `tcp dst portrange P and dst host 10.0.0.1`, `udp dst port P and dst net 10.1`, `ip6 proto \\tcp and dst port P`, `ether dst MAC`, \
         `vlan V`, `ether proto \\arp and arp dst host A`, `tcp dst port http and dst host A`), then {} catch-all \
         filters ranked below them ({}); 15 frames in 16 each for an endpoint filter drawn uniformly, 1 in 16 for a \
         catch-all. dpf: the merged native classifier; the peers run the same filters one after another until one \
         matches. Each cell: {} trials for dpf, {} for the peers ({} at N = 10,000), in {} rounds that interleave \
         the table sizes, median round; each dpf sample follows an untimed pass over the 4,096 frames. The dpf \
         column classifies many packets per code-cache scope (one lookup of the classifier for the batch, as a \
         receive loop does); the next column enters the scope, looks the classifier up and leaves for every \
         packet. Ratios use the first.",
        CATCH_ALL.len(),
        CATCH_ALL.join(", "),
        budget.dpf_trials / budget.rounds * budget.rounds,
        budget.peer_trials(10) * budget.rounds,
        budget.peer_trials(10_000) * budget.rounds,
        budget.rounds
    );
    let pcap_missing = m.pcap_missing.as_deref();
    let mut dpf_at = Vec::new();
    let mut pcap_over_dpf_at_10 =
        Figure::NotMeasured(NotMeasured::Unavailable("N = 10 not run".into()));
    for row in &m.rows {
        let dpf = median(&row.dpf, budget.rounds, None);
        let single = median(&row.dpf_single, budget.rounds, None);
        let pcap = median(&row.pcap, budget.rounds, pcap_missing);
        let rbpf = median(&row.rbpf, budget.rounds, None);
        let cells = vec![
            Cell::Fig(dpf.clone()),
            Cell::Fig(single),
            Cell::Fig(pcap.clone()),
            Cell::Fig(rbpf.clone()),
            Cell::Fig(ratio(&pcap, &dpf)),
            Cell::Fig(ratio(&rbpf, &dpf)),
        ];
        if row.n == 10 {
            pcap_over_dpf_at_10 = ratio(&pcap, &dpf);
        }
        dpf_at.push((row.n, dpf));
        s.row(row.n.to_string(), cells);
    }
    r.sections.push(s);

    let install = median_figure(&m.install_us, budget.installs, 1e-3);
    let mut i = Section::new(
        "install",
        "Installing a filter",
        "what",
        vec![
            col("install_us", "µs", Fmt::Dec(0)),
            col("code_bytes", "classifier code bytes", Fmt::Dec(0)),
        ],
    );
    i.samples = Some(budget.installs);
    i.about = format!(
        "One filter installed into a table of 1,000 (parse, merge, generate, publish), then removed; \
         median of {} rounds.",
        budget.installs
    );
    i.row(
        "install one filter into 1,000",
        vec![Cell::Fig(install.clone()), Cell::Int(m.code_bytes as i64)],
    );
    r.sections.push(i);

    r.sections.push(kernel_section(k, kbudget));

    let at = |n: usize| dpf_at.iter().find(|(k, _)| *k == n).map(|(_, f)| f.clone());
    let scaling = match (at(10_000), at(10)) {
        (Some(a), Some(b)) => ratio(&a, &b),
        _ => Figure::NotMeasured(NotMeasured::Unavailable(
            "N = 10 and N = 10,000 not both run".into(),
        )),
    };
    r.targets = vec![
        Target {
            what: format!("dpf cost at 10,000 filters at most {TARGET_SCALING}x its cost at 10"),
            verdict: verdict(&scaling, |x| x <= TARGET_SCALING),
            detail: scaling.cell(|x| format!("{x:.2}x")),
        },
        Target {
            what: format!(
                "dpf at least {TARGET_PCAP_AT_10}x faster than libpcap running the filters in turn at N = 10"
            ),
            verdict: verdict(&pcap_over_dpf_at_10, |x| x >= TARGET_PCAP_AT_10),
            detail: pcap_over_dpf_at_10.cell(|x| format!("{x:.1}x")),
        },
        Target {
            what: format!(
                "installing one filter into a table of 1,000 under {TARGET_INSTALL_US:.0} µs"
            ),
            verdict: verdict(&install, |x| x < TARGET_INSTALL_US),
            detail: install.cell(|x| format!("{x:.0} µs")),
        },
    ];
    r
}

/// Frames per second, in millions, from ns per frame: one sample per round.
fn mfps(ns: &[f64]) -> Vec<f64> {
    ns.iter().map(|&t| 1e3 / t).collect()
}

/// The kernel section: dpf's XDP program against classic BPF.
fn kernel_section(k: &KernelMeasured, b: KernelBudget) -> Section {
    let mut s = Section::new(
        "kernel",
        "In the kernel: dpf's table as XDP against classic BPF (tcpdump's)",
        "N",
        vec![
            col("filters", "filters", Fmt::Dec(0)),
            col("xdp_ns_per_frame", "dpf XDP ns/frame", Fmt::Dec(1)),
            col("classic_ns_per_frame", "classic BPF ns/frame", Fmt::Dec(1)),
            col("xdp_mfps", "dpf XDP Mframes/s", Fmt::Dec(1)),
            col("classic_mfps", "classic BPF Mframes/s", Fmt::Dec(1)),
            col("classic_over_xdp", "classic / XDP", Fmt::Times),
            col("xdp_insns", "XDP insns", Fmt::Dec(0)),
            col("classic_insns", "classic insns", Fmt::Dec(0)),
        ],
    );
    s.samples = Some(b.rounds);
    s.about = format!(
        "Both sides run in the kernel by BPF_PROG_TEST_RUN ({} runs per call, timed by the kernel's own timer around \
         its loop, in whole ns per run, truncated; averaged over {} frames of the main table's mix; median of {} rounds). dpf XDP: the merged table lowered to \
         one XDP program (dpf::ebpf). Classic BPF: libpcap's pcap_compile output for each filter, converted to eBPF \
         as the kernel converts an attached socket filter, run as a tc classifier (the link header first, as a packet \
         socket's filter sees it), the filters in turn until one accepts. N = 0: no filter (dpf's empty table, \
         classic `ret #0`), about the test run's own cost per run. N = 1 is the first endpoint filter alone \
         (`{}`); larger N add the catch-all filters. Frames per second are 1e9 / (ns per frame) of each round. \
         The two sides and dpf's native classifier were checked to agree on every frame first.",
        b.repeat,
        b.frames,
        b.rounds,
        fastpath_bench::dpf::filter(0),
    );
    if let Some(why) = &k.missing {
        let na = || Cell::Fig(Figure::NotMeasured(NotMeasured::Unavailable(why.clone())));
        for n in std::iter::once(&0).chain(b.sizes) {
            s.row(
                n.to_string(),
                vec![na(), na(), na(), na(), na(), na(), na(), na()],
            );
        }
        return s;
    }
    for row in &k.rows {
        let name = if row.n == 0 {
            "0 (no filter)".to_string()
        } else {
            row.n.to_string()
        };
        let xdp = median_figure(&row.xdp, b.rounds, MIN_NS_PER_OP);
        let classic = median_figure(&row.classic, b.rounds, MIN_NS_PER_OP);
        s.row(
            name,
            vec![
                Cell::Int(row.filters as i64),
                Cell::Fig(xdp.clone()),
                Cell::Fig(classic.clone()),
                Cell::Fig(median_figure(&mfps(&row.xdp), b.rounds, 0.0)),
                Cell::Fig(median_figure(&mfps(&row.classic), b.rounds, 0.0)),
                Cell::Fig(ratio(&classic, &xdp)),
                Cell::Int(row.xdp_insns as i64),
                Cell::Int(row.classic_insns as i64),
            ],
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use fastpath_bench::dpf::Row;

    fn measured() -> Measured {
        let row = |n: usize, dpf: f64| Row {
            n,
            dpf: vec![dpf, dpf + 0.1, dpf - 0.1, dpf, dpf, dpf + 0.1, dpf],
            dpf_single: vec![dpf * 2.0; 7],
            pcap: vec![],
            rbpf: vec![f64::NAN, 50.0, f64::NAN, 51.0, 49.0, f64::NAN, 50.0],
        };
        Measured {
            pcap_missing: Some("libpcap.so.0.8: not found".into()),
            rows: vec![row(10, 3.0), row(10_000, 3.3)],
            install_us: vec![300.0, 310.0, 290.0, 305.0, 295.0],
            code_bytes: 12345,
        }
    }

    #[test]
    fn a_missing_peer_and_too_few_rounds_are_na_with_the_reason_in_both_renderings() {
        let k = KernelMeasured {
            missing: Some("not running as root".into()),
            rows: Vec::new(),
        };
        let r = report(&measured(), &k, KernelBudget::QUICK, Budget::QUICK, true);
        let s = r.section("classify").unwrap();
        let Some(Cell::Fig(pcap)) = s.cell("10", "libpcap_ns_per_pkt") else {
            panic!("no libpcap cell")
        };
        assert!(
            pcap.reason()
                .unwrap()
                .to_string()
                .contains("libpcap unavailable")
        );
        let Some(Cell::Fig(rbpf)) = s.cell("10", "rbpf_ns_per_pkt") else {
            panic!("no rbpf cell")
        };
        assert_eq!(
            rbpf,
            &Figure::NotMeasured(NotMeasured::TooFewSamples { got: 4, want: 7 })
        );
        let text = r.text();
        assert!(
            text.contains("4 valid samples of the 7 the median needs"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        let row = &json["sections"]["classify"]["rows"][0];
        assert_eq!(row["name"], "10");
        assert_eq!(row["dpf_ns_per_pkt"]["value"], 3.0);
        assert!(row["rbpf_ns_per_pkt"]["value"].is_null());
        assert_eq!(
            row["rbpf_ns_per_pkt"]["reason"],
            "4 valid samples of the 7 the median needs"
        );
        assert!(row["rbpf_over_dpf"]["value"].is_null());
        // Flat (3.3 / 3.0 = 1.1); the libpcap target has no verdict
        // without libpcap.
        assert_eq!(json["targets"][0]["verdict"], "PASS");
        assert!(json["targets"][1]["verdict"].is_null(), "{json}");
        assert_eq!(json["sections"]["install"]["rows"][0]["code_bytes"], 12345);
        // Without bpf(2), every kernel cell is n/a with the reason.
        let kernel = &json["sections"]["kernel"]["rows"];
        assert_eq!(kernel.as_array().unwrap().len(), 4);
        assert_eq!(kernel[1]["name"], "1");
        assert!(kernel[1]["xdp_ns_per_frame"]["value"].is_null());
        assert_eq!(
            kernel[1]["xdp_ns_per_frame"]["reason"],
            "not running as root"
        );
    }

    #[test]
    fn the_kernel_section_gives_frames_per_second_and_the_ratio_of_medians() {
        let k = KernelMeasured {
            missing: None,
            rows: vec![fastpath_bench::dpf_kernel::KernelRow {
                n: 10,
                filters: 15,
                xdp: vec![30.0, 31.0, 29.0],
                classic: vec![300.0, 330.0, 270.0],
                xdp_insns: 347,
                classic_insns: 156,
            }],
        };
        let s = kernel_section(&k, KernelBudget::QUICK);
        let fig = |key| match s.cell("10", key) {
            Some(Cell::Fig(f)) => f.value().unwrap(),
            _ => panic!("no {key}"),
        };
        assert_eq!(fig("xdp_ns_per_frame"), 30.0);
        assert_eq!(fig("classic_ns_per_frame"), 300.0);
        assert!((fig("xdp_mfps") - 1e3 / 30.0).abs() < 1e-9);
        assert!((fig("classic_mfps") - 1e3 / 300.0).abs() < 1e-9);
        assert_eq!(fig("classic_over_xdp"), 10.0);
    }
}
