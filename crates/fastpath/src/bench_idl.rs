//! `fastpath bench idl`: IDL4's Tables 3 and 4 (Haeberlen et al., 2000)
//! replicated: instructions in the stubs and the server loop per call
//! (callgrind, exact; this binary re-runs itself under valgrind), round
//! trips between two processes over `idl::rt::shm` against the raw channel,
//! and IOzone's reread, for fastpath's generated stubs beside stubs of the
//! same shape over prost, capnp and flatbuffers and a hand-written one
//! (see `fastpath_bench::idl`). `--quick` (or `FASTPATH_BENCH_QUICK=1`)
//! runs one short round.
//!
//! Counts are exact; a count that came out negative after the carrier's
//! own instructions were subtracted is n/a. Times are the best of their
//! rounds, n/a with the reason when fewer rounds than stated were valid or
//! the time is at or below a twentieth of a cycle (see
//! [`crate::bench_figures`]); the stub share of the IOzone time is a
//! difference, n/a when within its noise or negative.
//!
//! The waiting section times null calls on an idle machine and with a busy
//! thread on every core, under each waiting policy of the channel
//! (futex only, adaptive, and fastpath's stubs over adaptive): medians, the
//! cost a caller sees. A figure that came out impossible (too few valid
//! batches, or fastpath's stubs faster than the raw channel under them) is
//! remeasured, up to [`MAX_REMEASURES`] times, and the report says so.

use std::process::ExitCode;

use fastpath_bench::idl::{self, IDL4, count, server, timing};

use crate::bench_figures::{
    Figure, MIN_NS_PER_OP, NotMeasured, best_figure, difference, median_figure, ratio,
};
use crate::bench_report::{Cell, Fmt, Report, Section, Target, col, verdict};

/// fastpath's instructions over prost's (at most), the dynamic stubs' over
/// the static ones' (at most), the null call over the raw channel's (at
/// most), fastpath's IOzone throughput over prost's (at least).
const TARGET_VS_PROST: f64 = 0.5;
const TARGET_DYNAMIC: f64 = 1.5;
const TARGET_NULL_VS_RAW: f64 = 1.2;
const TARGET_IOZONE_VS_PROST: f64 = 1.1;
/// Adaptive waiting's null call over a futex-only one with every core
/// busy (at most).
const TARGET_LOADED_VS_FUTEX: f64 = 2.0;
/// How many times the waiting section is measured again when a figure
/// came out impossible.
pub const MAX_REMEASURES: u32 = 2;

/// What a run measured: the callgrind counts (or why they were not
/// taken) and the timings (or why they failed).
pub struct Measured {
    pub counts: Result<Vec<count::Counts>, String>,
    pub timed: Result<timing::Timed, String>,
    /// Null calls idle and loaded under each waiting policy, and how many
    /// times they were measured again.
    pub waiting: Result<timing::Waiting, String>,
    pub waiting_remeasured: u32,
}

/// Runs the suite and prints the report.
pub fn run(json: bool, quick: bool) -> ExitCode {
    // A server child or the counted child does its work and exits here.
    idl::child_dispatch();
    let quick = quick || std::env::var_os("FASTPATH_BENCH_QUICK").is_some();
    let budget = if quick {
        timing::Budget::QUICK
    } else {
        timing::Budget::DEFAULT
    };
    eprintln!("idl: counting instructions under callgrind");
    let counts = std::env::current_exe()
        .map_err(|e| format!("cannot find this executable: {e}"))
        .and_then(|exe| count::measure(&exe));
    eprintln!("idl: timing round trips and IOzone");
    let timed = timing::run(budget);
    eprintln!("idl: timing null calls idle and with every core busy");
    let mut waiting = timing::waiting(budget);
    let mut waiting_remeasured = 0;
    while waiting_remeasured < MAX_REMEASURES
        && waiting
            .as_ref()
            .is_ok_and(|w| waiting_figures(w, budget.rounds).impossible())
    {
        waiting_remeasured += 1;
        eprintln!(
            "idl: remeasuring the waiting section: a figure came out impossible \
             (attempt {waiting_remeasured} of {MAX_REMEASURES})"
        );
        waiting = timing::waiting(budget);
    }
    let m = Measured {
        counts,
        timed,
        waiting,
        waiting_remeasured,
    };
    let failed = m.timed.is_err() || m.waiting.is_err();
    if let Err(e) = report(&m, budget, idl::fastpath_family::available(), quick).print(json) {
        eprintln!("fastpath bench idl: {e}");
        if json {
            crate::print_json_error("bench idl", &e);
        }
        return ExitCode::FAILURE;
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// A family's name as a JSON key: lowercase, `_` for anything else.
fn key(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// An exact count as a figure (no spread).
fn exact(n: i64) -> Figure {
    Figure::Value {
        value: n as f64,
        spread: 0.0,
    }
}

/// `k / f` for a figure `f` (e.g. MB/s from seconds), spread to first order.
fn reciprocal(f: &Figure, k: f64) -> Figure {
    match f {
        Figure::Value { value, spread } => Figure::Value {
            value: k / value,
            spread: k * spread / (value * value),
        },
        other => other.clone(),
    }
}

/// The raw channel's time (of a call, or of an IOzone run) as the baseline
/// of ratios, unless it is wrong: raw carries exactly the bytes of fastpath's stubs, without them,
/// so fastpath's stubs faster than raw by more than their spreads means the
/// raw figure measured something else (a server asleep, a descheduled
/// batch) and every "/ raw" of the call would be off.
/// `unit` names the figures' unit once multiplied by `scale` (`("ns",
/// 1.0)` for ns per call, `("µs", 1e6)` for seconds of a run).
fn raw_baseline(raw: Figure, fastpath: Option<Figure>, (unit, scale): (&str, f64)) -> Figure {
    match (&raw, fastpath) {
        (
            Figure::Value {
                value: r,
                spread: rs,
            },
            Some(Figure::Value {
                value: f,
                spread: fs,
            }),
        ) if f + fs < r - rs => Figure::NotMeasured(NotMeasured::Unavailable(format!(
            "the raw channel ({:.0} {unit}) measured slower than fastpath's stubs over the same bytes ({:.0} {unit})",
            r * scale,
            f * scale
        ))),
        _ => raw,
    }
}

/// The report of a run.
/// Where the timed part's client and servers ran, for a table's note.
fn placement(pinned: Option<(usize, usize)>) -> String {
    match pinned {
        Some((c, s)) => {
            format!("pinned to CPU {s} and the client to CPU {c} (FASTPATH_IDL_PIN=0: neither)")
        }
        None => "neither it nor the client pinned".to_owned(),
    }
}

pub fn report(m: &Measured, budget: timing::Budget, have_fastpath: bool, quick: bool) -> Report {
    let mut r = Report::new("idl", quick, "fastpath bench idl: IDL4's Tables 3 and 4");
    if !have_fastpath {
        r.notes
            .push("NOTE: fastpath's generated stubs are not in this build; the peers only.".into());
    }
    instructions(&mut r, &m.counts);
    match &m.timed {
        Ok(t) => timed(&mut r, t, budget),
        Err(e) => r.notes.push(format!("round trips and IOzone FAILED: {e}")),
    }
    match &m.waiting {
        Ok(w) => waiting(&mut r, w, budget, m.waiting_remeasured),
        Err(e) => r
            .notes
            .push(format!("null calls idle and loaded FAILED: {e}")),
    }
    r
}

/// The waiting section's figures: per load, the medians of futex only,
/// adaptive and fastpath, and fastpath's baseline (adaptive raw, unless
/// impossible).
struct WaitingFigures {
    rows: Vec<[Figure; 3]>,
    baselines: Vec<Figure>,
}

impl WaitingFigures {
    /// Whether a figure came out impossible in a way a new measurement
    /// may fix: too few valid batches, below resolution, or fastpath's
    /// stubs faster than the raw channel they run on.
    fn impossible(&self) -> bool {
        let remeasurable = |f: &Figure| f.reason().is_some_and(NotMeasured::remeasurable);
        self.rows.iter().flatten().any(remeasurable)
            || self
                .rows
                .iter()
                .zip(&self.baselines)
                .any(|(r, b)| r[1].value().is_some() && b.value().is_none())
    }
}

fn waiting_figures(w: &timing::Waiting, rounds: usize) -> WaitingFigures {
    let mut rows = Vec::new();
    let mut baselines = Vec::new();
    for per_load in &w.ns {
        let med = |p: usize| -> Figure {
            if per_load[p].iter().all(|x| x.is_nan()) {
                Figure::NotMeasured(NotMeasured::Unavailable(
                    "fastpath's generated stubs are not in this build".into(),
                ))
            } else {
                median_figure(&per_load[p], rounds, MIN_NS_PER_OP)
            }
        };
        let row = [med(0), med(1), med(2)];
        baselines.push(raw_baseline(
            row[1].clone(),
            Some(row[2].clone()),
            ("ns", 1.0),
        ));
        rows.push(row);
    }
    WaitingFigures { rows, baselines }
}

/// Section 4: null calls idle and loaded under each waiting policy, and
/// the targets of both.
fn waiting(r: &mut Report, w: &timing::Waiting, budget: timing::Budget, remeasured: u32) {
    let f = waiting_figures(w, budget.rounds);
    let mut s = Section::new(
        "waiting",
        "Null calls on an idle and on a loaded machine, by waiting policy (idl::rt::shm)",
        "machine",
        vec![
            col("futex_only_ns", "futex only ns", Fmt::Dec(0)),
            col("adaptive_ns", "adaptive ns", Fmt::Dec(0)),
            col(
                "adaptive_over_futex_only",
                "adaptive / futex only",
                Fmt::Times,
            ),
            col("fastpath_ns", "fastpath ns", Fmt::Dec(0)),
            col("fastpath_over_adaptive", "fastpath / adaptive", Fmt::Times),
        ],
    );
    s.samples = Some(budget.rounds);
    s.about = format!(
        "ns per null call, median of {} interleaved batches ({} calls idle, {} loaded), each after a \
         warm-up batch; the server is a child process. futex only = the raw channel with spin 0 (every \
         wait sleeps); adaptive = the raw channel with the default budget (polls at most 10 µs, 200 µs for a \
         wake-up; after two polls in a row ran out, only on probes 4 to 32 waits apart until one is answered); fastpath = its generated stubs over the adaptive channel. loaded = {} \
         busy threads of this process (one per CPU) running beside both sides.",
        budget.rounds, w.batch[0], w.batch[1], w.busy
    );
    for (l, load) in timing::LOADS.iter().enumerate() {
        let [fu, ad, fp] = &f.rows[l];
        s.row(
            *load,
            vec![
                Cell::Fig(fu.clone()),
                Cell::Fig(ad.clone()),
                Cell::Fig(ratio(ad, fu)),
                Cell::Fig(fp.clone()),
                Cell::Fig(ratio(fp, &f.baselines[l])),
            ],
        );
    }
    r.sections.push(s);
    if remeasured > 0 {
        r.notes.push(format!(
            "waiting: measured {} times in all, a figure having come out impossible",
            remeasured + 1
        ));
    }
    let q = ratio(&f.rows[1][1], &f.rows[1][0]);
    r.targets.push(Target {
        what: format!(
            "loaded null call: adaptive waiting at most {TARGET_LOADED_VS_FUTEX}x a futex-only round trip"
        ),
        verdict: verdict(&q, |v| v <= TARGET_LOADED_VS_FUTEX),
        detail: format!(
            "adaptive {} ns = {} futex only {} ns (medians)",
            f.rows[1][1].cell(|v| format!("{v:.0}")),
            q.cell(|v| format!("{v:.2}x")),
            f.rows[1][0].cell(|v| format!("{v:.0}"))
        ),
    });
    let q = ratio(&f.rows[0][2], &f.baselines[0]);
    r.targets.push(Target {
        what: format!(
            "idle null call: fastpath at most {TARGET_NULL_VS_RAW}x the raw channel (medians)"
        ),
        verdict: verdict(&q, |v| v <= TARGET_NULL_VS_RAW),
        detail: format!(
            "fastpath {} ns = {} raw {} ns",
            f.rows[0][2].cell(|v| format!("{v:.0}")),
            q.cell(|v| format!("{v:.2}x")),
            f.rows[0][1].cell(|v| format!("{v:.0}"))
        ),
    });
}

/// Section 1: Table 4 by callgrind, and its targets.
fn instructions(r: &mut Report, counts: &Result<Vec<count::Counts>, String>) {
    let counts = match counts {
        Ok(c) => c,
        Err(why) => {
            r.notes
                .push(format!("instruction counts (Table 4) skipped: {why}"));
            return;
        }
    };
    let mut cols = vec![col("idl4_paper_instructions", "IDL4 (paper)", Fmt::Dec(0))];
    for c in counts {
        cols.push(col(
            &format!("{}_instructions", key(c.name)),
            c.name,
            Fmt::Dec(0),
        ));
    }
    cols.push(col(
        "fastpath_over_prost_percent",
        "fastpath / prost",
        Fmt::Percent(0),
    ));
    let mut s = Section::new(
        "instructions",
        "Table 4: instructions in stubs and server loop (callgrind, exact)",
        "call",
        cols,
    );
    let (ea, eb) = counts
        .first()
        .and_then(|c| c.dirs.first().copied())
        .unwrap_or((0, 0));
    s.about = format!(
        "Instructions executed per call, client » server (client marshal, dispatch, server unmarshal) / \
         client « server (server marshal, client unmarshal) = total; the loopback carrier's own instructions \
         (the empty call: {ea} / {eb}) subtracted, the server method excluded. Arrays of {} ints. \
         Carriers: fastpath over FpLoop (no channel protocol, as IDL4's counts); fastpath over shm and \
         fastpath dynamic over an idl::rt::shm channel in one thread (post, wait, take, reply by the \
         channel's protocol; the client's wait runs the server loop once), with FpLoop's empty call \
         subtracted; the C stubs over loop.c's channel (the C twin of FpLoop, its own empty call \
         subtracted); the peers over a byte-buffer loopback.",
        count::TABLE4_INTS
    );
    let find = |n: &str| counts.iter().find(|c| c.name == n);
    let total = |c: &count::Counts, k: usize| -> Figure {
        let (a, b) = c.dirs[k];
        if a < 0 || b < 0 {
            Figure::NotMeasured(NotMeasured::Negative {
                value: (a.min(b)) as f64,
            })
        } else {
            exact(a + b)
        }
    };
    for (k, op) in count::OPS.iter().enumerate().skip(1) {
        let paper = IDL4.iter().find(|(n, _)| n == op).map(|(_, v)| *v);
        let mut cells = vec![match paper {
            Some(p) => Cell::Split(p[0], p[1]),
            None => Cell::Fig(Figure::NotMeasured(NotMeasured::Unavailable(
                "not in the paper's table".into(),
            ))),
        }];
        for c in counts {
            let (a, b) = c.dirs[k];
            cells.push(match total(c, k) {
                Figure::Value { .. } => Cell::Split(a, b),
                f => Cell::Fig(f),
            });
        }
        let (f, p) = match (find("fastpath"), find("prost")) {
            (Some(f), Some(p)) => (total(f, k), total(p, k)),
            _ => {
                let na = Figure::NotMeasured(NotMeasured::Unavailable(
                    "fastpath's or prost's stubs not counted".into(),
                ));
                (na.clone(), na)
            }
        };
        let share = ratio(&f, &p).scaled(100.0);
        cells.push(Cell::Fig(share.clone()));
        s.row(*op, cells);
        // The targets are Table 4's calls; the null call is context.
        if let Some(x) = paper {
            r.targets.push(Target {
                what: format!(
                    "{op}: fastpath's instructions at most {:.0}% of prost's",
                    TARGET_VS_PROST * 100.0
                ),
                verdict: verdict(&share, |v| v <= TARGET_VS_PROST * 100.0),
                detail: format!(
                    "fastpath {} = {} of prost's {}",
                    f.cell(|v| format!("{v:.0}")),
                    share.cell(|v| format!("{v:.0}%")),
                    p.cell(|v| format!("{v:.0}"))
                ),
            });
            r.targets.push(Target {
                what: format!("{op}: fastpath's instructions at most IDL4's"),
                verdict: verdict(&f, |v| v <= x[2] as f64),
                detail: format!("fastpath {}; IDL4 {}", f.cell(|v| format!("{v:.0}")), x[2]),
            });
        }
    }
    // The dynamic stubs make the whole call, the shm channel's protocol
    // included, so they are compared with the static stubs over the same
    // channel in one thread ("fastpath over shm"); the static stubs over
    // `FpLoop` (no protocol, the IDL4-comparable column) are given beside.
    if let (Some(sh), Some(dy)) = (find("fastpath over shm"), find("fastpath dynamic")) {
        for (k, op) in count::OPS.iter().enumerate().skip(1) {
            let q = ratio(&total(dy, k), &total(sh, k));
            let fp = find("fastpath").map_or_else(
                || "not counted".to_string(),
                |st| total(st, k).cell(|v| format!("{v:.0}")),
            );
            r.targets.push(Target {
                what: format!(
                    "{op}: dynamic stubs at most {TARGET_DYNAMIC}x the static ones, \
                     both over the shm channel in one thread"
                ),
                verdict: verdict(&q, |v| v <= TARGET_DYNAMIC),
                detail: format!(
                    "dynamic {} = {} the static stubs' {} over the same shm channel; \
                     static over FpLoop, without the channel's protocol: {fp}",
                    total(dy, k).cell(|v| format!("{v:.0}")),
                    q.cell(|v| format!("{v:.2}x")),
                    total(sh, k).cell(|v| format!("{v:.0}"))
                ),
            });
        }
    }
    r.sections.push(s);
}

/// Sections 2 and 3: round trips and IOzone, timed.
fn timed(r: &mut Report, t: &timing::Timed, budget: timing::Budget) {
    let mut cols = Vec::new();
    for n in &t.names {
        cols.push(col(
            &format!("{}_ns_per_call", key(n)),
            &format!("{n} ns"),
            Fmt::Dec(0),
        ));
        cols.push(col(&format!("{}_over_raw", key(n)), "/ raw", Fmt::Times));
    }
    let mut s = Section::new(
        "round_trips",
        "Round trips between two processes (idl::rt::shm)",
        "call",
        cols,
    );
    s.samples = Some(budget.rounds);
    s.about = format!(
        "ns per call, best of {} interleaved batches of {} calls; the server is a child process, {}; \
         raw = the channel's call_raw carrying fastpath's bytes with no stub.",
        budget.rounds,
        budget.batch,
        placement(t.pinned)
    );
    let ns = |i: usize, k: usize| best_figure(&t.ns[i][k], budget.rounds, MIN_NS_PER_OP);
    let fastpath = t.names.iter().position(|n| *n == "fastpath");
    let raw = |k: usize| raw_baseline(ns(0, k), fastpath.map(|i| ns(i, k)), ("ns", 1.0));
    for (k, call) in timing::CALLS.iter().enumerate() {
        let mut cells = Vec::new();
        for i in 0..t.names.len() {
            cells.push(Cell::Fig(ns(i, k)));
            cells.push(Cell::Fig(ratio(&ns(i, k), &raw(k))));
        }
        s.row(*call, cells);
    }
    r.sections.push(s);
    if let Some(i) = fastpath {
        let q = ratio(&ns(i, 0), &raw(0));
        r.targets.push(Target {
            what: format!("null call: fastpath at most {TARGET_NULL_VS_RAW}x the raw channel"),
            verdict: verdict(&q, |v| v <= TARGET_NULL_VS_RAW),
            detail: format!(
                "fastpath {} ns = {} raw {} ns",
                ns(i, 0).cell(|v| format!("{v:.0}")),
                q.cell(|v| format!("{v:.2}x")),
                ns(0, 0).cell(|v| format!("{v:.0}"))
            ),
        });
    }

    let runs = budget.rounds * budget.iozone_runs;
    let reads = (10 * server::FILE_BYTES / server::READ_BYTES) as f64;
    let mb = 10.0 * server::FILE_BYTES as f64 / 1e6;
    let mut s = Section::new(
        "iozone",
        &format!(
            "IOzone reread (Table 3): {} KiB file in a server process, {} KiB reads, ten passes",
            server::FILE_BYTES >> 10,
            server::READ_BYTES >> 10
        ),
        "family",
        vec![
            col("mb_per_s", "MB/s", Fmt::Dec(0)),
            col("us_per_read", "µs per 4 KiB read", Fmt::Dec(2)),
            col("stub_share_percent", "stub share", Fmt::Percent(0)),
            col("over_prost", "/ prost", Fmt::Times),
        ],
    );
    s.samples = Some(runs);
    s.about = format!(
        "Best of {runs} runs, each server a child process, {}; MB/s = 10^6 bytes/s; stub share = 1 - raw \
         time / family time (raw: the channel with the data copied in by the server and out by the client, \
         no stub); / prost: this family's throughput over prost's.",
        placement(t.pinned)
    );
    // Seconds per run: a run reads at least a byte per ns.
    let secs = |v: &[f64]| best_figure(v, runs, MIN_NS_PER_OP * 1e-9);
    let raw = raw_baseline(
        secs(&t.iozone[0]),
        fastpath.map(|i| secs(&t.iozone[i])),
        ("µs", 1e6),
    );
    let prost = t
        .names
        .iter()
        .position(|n| *n == "prost")
        .map(|i| secs(&t.iozone[i]));
    let vs_prost = |f: &Figure| match &prost {
        Some(p) => ratio(p, f),
        None => Figure::NotMeasured(NotMeasured::Unavailable("prost not run".into())),
    };
    for (i, n) in t.names.iter().enumerate() {
        let f = if i == 0 {
            raw.clone()
        } else {
            secs(&t.iozone[i])
        };
        let share = if i == 0 {
            Figure::NotMeasured(NotMeasured::Unavailable("the baseline itself".into()))
        } else {
            match ratio(&raw, &f) {
                Figure::Value { value, spread } => {
                    difference((1.0 - value) * 100.0, spread * 100.0, 0.5)
                }
                other => other,
            }
        };
        s.row(
            *n,
            vec![
                Cell::Fig(reciprocal(&f, mb)),
                Cell::Fig(f.scaled(1e6 / reads)),
                Cell::Fig(share),
                Cell::Fig(vs_prost(&f)),
            ],
        );
    }
    let pread = match &t.pread {
        Ok(v) => secs(v),
        Err(e) => Figure::NotMeasured(NotMeasured::Unavailable(format!("failed: {e}"))),
    };
    s.row(
        "pread on tmpfs (kernel, context)",
        vec![
            Cell::Fig(reciprocal(&pread, mb)),
            Cell::Fig(pread.scaled(1e6 / reads)),
            Cell::Fig(Figure::NotMeasured(NotMeasured::Unavailable(
                "not a stub family".into(),
            ))),
            Cell::Fig(vs_prost(&pread)),
        ],
    );
    r.sections.push(s);
    if let Some(i) = t.names.iter().position(|n| *n == "fastpath") {
        let q = vs_prost(&secs(&t.iozone[i]));
        r.targets.push(Target {
            what: format!(
                "IOzone reread: fastpath at least {TARGET_IOZONE_VS_PROST}x prost's throughput"
            ),
            verdict: verdict(&q, |v| v >= TARGET_IOZONE_VS_PROST),
            detail: q.cell(|v| format!("{v:.2}x")),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_times_render_alike_with_negative_and_short_figures_na() {
        let dirs = vec![(50, 30), (40, 20), (60, 30), (70, 35), (-5, 40)];
        let m = Measured {
            counts: Ok(vec![
                count::Counts {
                    name: "fastpath",
                    dirs: dirs.clone(),
                },
                count::Counts {
                    name: "prost",
                    dirs: vec![(50, 30), (100, 60), (150, 60), (200, 100), (250, 120)],
                },
            ]),
            timed: Ok(timing::Timed {
                pinned: Some((0, 1)),
                names: vec!["raw", "fastpath", "prost"],
                ns: vec![
                    vec![vec![1000.0, 1100.0]; 4],
                    vec![vec![1100.0, 1150.0]; 4],
                    // A lost round: not a best of two.
                    vec![vec![f64::NAN, 2000.0]; 4],
                ],
                iozone: vec![vec![0.001, 0.001], vec![0.002, 0.002], vec![0.004, 0.004]],
                pread: Err("no /dev/shm".into()),
            }),
            waiting: Ok(timing::Waiting {
                ns: vec![
                    // Idle: futex only, adaptive, fastpath.
                    vec![
                        vec![30_000.0, 40_000.0],
                        vec![400.0, 500.0],
                        vec![440.0, 550.0],
                    ],
                    // Loaded: a lost fastpath batch.
                    vec![
                        vec![10_000.0, 12_000.0],
                        vec![11_000.0, 14_000.0],
                        vec![f64::NAN, 900.0],
                    ],
                ],
                busy: 2,
                batch: [10, 3],
            }),
            waiting_remeasured: 1,
        };
        let b = timing::Budget {
            rounds: 2,
            batch: 10,
            iozone_runs: 1,
        };
        let r = report(&m, b, true, true);
        let v: serde_json::Value = serde_json::from_str(&r.json().unwrap()).unwrap();
        let ins = &v["sections"]["instructions"]["rows"];
        assert_eq!(ins[0]["name"], "null");
        assert_eq!(ins[0]["fastpath_instructions"]["total"], 60);
        assert_eq!(ins[0]["fastpath_over_prost_percent"]["value"], 37.5);
        // pfs_get_direntries: -5 after the carrier's subtraction.
        assert!(ins[3]["fastpath_instructions"]["value"].is_null());
        // The notes say where the sides ran.
        for t in ["round_trips", "iozone"] {
            let about = v["sections"][t]["about"].as_str().unwrap();
            assert!(
                about.contains("pinned to CPU 1 and the client to CPU 0"),
                "{t}: {about}"
            );
        }
        let rt = &v["sections"]["round_trips"]["rows"][0];
        assert_eq!(rt["fastpath_ns_per_call"]["value"], 1100.0);
        assert_eq!(rt["fastpath_over_raw"]["value"], 1.1);
        assert_eq!(
            rt["prost_ns_per_call"]["reason"],
            "1 valid samples of the 2 the median needs"
        );
        // A raw figure slower than fastpath's stubs over it is no baseline.
        let mut slow_raw = m;
        if let Ok(t) = &mut slow_raw.timed {
            t.ns[0][1] = vec![5000.0, 5000.0];
            // And an IOzone run of the raw channel far slower than fastpath's.
            t.iozone[0] = vec![1.0; t.iozone[0].len()];
        }
        let v2: serde_json::Value =
            serde_json::from_str(&report(&slow_raw, b, true, true).json().unwrap()).unwrap();
        let open = &v2["sections"]["round_trips"]["rows"][1];
        assert!(open["fastpath_over_raw"]["value"].is_null(), "{open}");
        assert!(
            open["prost_over_raw"]["reason"]
                .as_str()
                .unwrap()
                .contains("measured slower than fastpath's stubs"),
            "{open}"
        );
        // The IOzone baseline's reason gives its runs' times in µs (a
        // run lasts well under a millisecond), not seconds rounded to 0.
        let io_raw = v2["sections"]["iozone"]["rows"][0]["mb_per_s"]["reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            io_raw.contains("(1000000 µs) measured slower") && !io_raw.contains(" 0 "),
            "{io_raw}"
        );
        let wt = &v["sections"]["waiting"]["rows"];
        assert_eq!(wt[0]["name"], "idle");
        assert_eq!(wt[0]["adaptive_ns"]["value"], 500.0);
        assert_eq!(wt[0]["fastpath_over_adaptive"]["value"], 1.1);
        assert_eq!(
            wt[1]["adaptive_over_futex_only"]["value"],
            14_000.0 / 12_000.0
        );
        assert_eq!(
            wt[1]["fastpath_ns"]["reason"],
            "1 valid samples of the 2 the median needs"
        );
        assert!(
            waiting_figures(slow_raw.waiting.as_ref().unwrap(), 2).impossible(),
            "a lost batch is remeasured"
        );
        let loaded = v["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| {
                t["target"]
                    .as_str()
                    .unwrap()
                    .starts_with("loaded null call")
            })
            .expect("the loaded target");
        assert_eq!(loaded["verdict"], "PASS");
        // fastpath's stubs faster than the raw channel under them: the raw
        // figure is no baseline, and the section is measured again.
        let fast = timing::Waiting {
            ns: vec![
                vec![
                    vec![30_000.0, 30_000.0],
                    vec![900.0, 900.0],
                    vec![400.0, 400.0]
                ];
                2
            ],
            busy: 2,
            batch: [10, 3],
        };
        let wf = waiting_figures(&fast, 2);
        assert!(wf.baselines[0].value().is_none());
        assert!(wf.impossible());
        let io = &v["sections"]["iozone"]["rows"];
        assert_eq!(io[1]["stub_share_percent"]["value"], 50.0);
        assert_eq!(io[1]["over_prost"]["value"], 2.0);
        assert!(
            io[3]["mb_per_s"]["reason"]
                .as_str()
                .unwrap()
                .contains("no /dev/shm")
        );
        let text = r.text();
        assert!(
            text.contains("| null | n/a[1] | 40 / 20 = 60 | 100 / 60 = 160 | 38% |"),
            "{text}"
        );
    }
}
