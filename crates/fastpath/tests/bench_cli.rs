//! `fastpath bench` and the cargo feature `bench`: the suite is a validated
//! value in every build (an unknown one is refused with the list of suites);
//! without the feature a known suite says how to build it and exits
//! non-zero; with it, the suites are compiled in, every suite has `--json`
//! (one JSON object on stdout and nothing else: every row, each figure a
//! non-negative value or `null` with the reason, ratios, verdicts, sample
//! counts), `--quick` is refused by the one suite without it (naming those
//! with it), and the text tables show the rows the JSON has.
//!
//! Every suite but unet runs here with `--quick` (a few seconds each; esp
//! builds its Go peer); unet (ten times the demo's rounds, minutes) is
//! covered by the demo's own `--json` tests. Each suite's table and JSON
//! are checked against each other on constructed reports in the suite's
//! unit tests.

mod common;
use common::json_error;

/// `fastpath` with `args`: whether it succeeded, and its standard error.
fn fastpath(args: &[&str]) -> (bool, String) {
    let (ok, _, err) = common::fastpath(args);
    (ok, err)
}

#[test]
fn an_unknown_suite_is_refused_with_the_list_of_suites() {
    let (ok, err) = fastpath(&["bench", "foo"]);
    assert!(!ok, "fastpath bench foo must fail");
    assert!(err.contains("invalid value 'foo'"), "{err}");
    for suite in [
        "codegen",
        "jive",
        "dpf",
        "esp",
        "idl",
        "ilp",
        "codecache",
        "unet",
    ] {
        assert!(err.contains(suite), "the list lacks {suite}: {err}");
    }
    assert!(
        !err.contains("cargo run"),
        "an unknown suite gets no build hint: {err}"
    );
}

#[cfg(not(feature = "bench"))]
#[test]
fn without_the_feature_bench_says_how_to_get_it() {
    let (ok, err) = fastpath(&["bench", "dpf"]);
    assert!(!ok, "fastpath bench must fail without the feature");
    assert!(
        err.contains("cargo run --release -p fastpath --features bench -- bench dpf"),
        "{err}"
    );
    let (ok, err) = fastpath(&["bench", "jive", "--json"]);
    assert!(!ok);
    assert!(
        err.contains("cargo run --release -p fastpath --features bench -- bench jive --json"),
        "{err}"
    );
}

#[cfg(feature = "bench")]
#[test]
fn quick_is_refused_by_unet_naming_the_suites_with_it() {
    let (ok, err) = fastpath(&["bench", "unet", "--quick"]);
    assert!(!ok, "bench unet --quick must be refused");
    assert!(
        err.contains("--quick is not supported by the unet suite")
            && err.contains("fastpath demo --json")
            && err.contains("suites with --quick: codegen, jive, dpf, esp, idl, ilp, codecache"),
        "{err}"
    );
}

/// Walks every cell of a suite's JSON report: a figure is a finite,
/// non-negative value with a non-negative spread, or `null` with a reason;
/// a count (or a call's counts each way) is a non-negative integer. Returns how many figures had values.
#[cfg(feature = "bench")]
fn check_cells(suite: &str, v: &serde_json::Value) -> usize {
    let mut values = 0;
    for (key, section) in v["sections"].as_object().expect("sections") {
        let rows = section["rows"].as_array().expect("rows");
        for row in rows {
            let name = row["name"].as_str().expect("a row has a name");
            for (col, cell) in row.as_object().unwrap() {
                let at = format!("{suite} {key} {name} {col}");
                match cell {
                    serde_json::Value::Object(o) if o.contains_key("value") => {
                        match o["value"].as_f64() {
                            Some(x) => {
                                assert!(x.is_finite() && x >= 0.0, "{at}: {x}");
                                let s = o["spread"].as_f64().expect("a value has a spread");
                                assert!(s.is_finite() && s >= 0.0, "{at}: spread {s}");
                                values += 1;
                            }
                            None => {
                                assert!(o["value"].is_null(), "{at}: {cell}");
                                let why = o["reason"].as_str().unwrap_or("");
                                assert!(!why.is_empty(), "{at}: null without a reason");
                            }
                        }
                    }
                    // Exact counts of a call's two directions.
                    serde_json::Value::Object(o) if o.contains_key("total") => {
                        for (k, n) in o {
                            assert!(n.as_u64().is_some(), "{at} {k}: a count must be >= 0: {n}");
                        }
                    }
                    serde_json::Value::Number(n) => {
                        assert!(n.as_u64().is_some(), "{at}: a count must be >= 0: {n}")
                    }
                    serde_json::Value::String(_) | serde_json::Value::Null => {}
                    other => panic!("{at}: unexpected cell {other}"),
                }
            }
        }
    }
    for t in v["targets"].as_array().expect("targets") {
        assert!(
            t["verdict"].is_null() || t["verdict"] == "PASS" || t["verdict"] == "MISS",
            "{suite}: {t}"
        );
        assert!(t["target"].is_string(), "{suite}: {t}");
    }
    values
}

/// Runs `bench <suite> --json --quick` and checks the object: the suite's
/// name, its sections with their row names, every cell sane.
#[cfg(feature = "bench")]
fn suite_json(suite: &str, sections: &[(&str, &[&str])]) -> serde_json::Value {
    let (ok, out, err) = common::fastpath(&["bench", suite, "--json", "--quick"]);
    assert!(ok, "bench {suite} --json --quick failed: {err}");
    // Nothing but the object on stdout: from_str refuses trailing text.
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{suite}: {e}:\n{out}"));
    assert_eq!(v["suite"], suite);
    assert_eq!(v["quick"], true);
    for (key, rows) in sections {
        let s = &v["sections"][key];
        let names: Vec<&str> = s["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("{suite}: no section {key}: {v}"))
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(&names, rows, "{suite} {key}");
    }
    assert!(check_cells(suite, &v) > 0, "{suite}: no figure has a value");
    v
}

#[cfg(feature = "bench")]
#[test]
fn dpf_json_has_every_table_size_and_the_install_cost() {
    let v = suite_json(
        "dpf",
        &[
            ("classify", &["10", "100", "1000", "10000"]),
            ("install", &["install one filter into 1,000"]),
        ],
    );
    assert_eq!(v["sections"]["classify"]["samples"], 7);
    let row = &v["sections"]["classify"]["rows"][0];
    for key in [
        "dpf_ns_per_pkt",
        "dpf_scope_per_pkt_ns_per_pkt",
        "libpcap_ns_per_pkt",
        "rbpf_ns_per_pkt",
        "libpcap_over_dpf",
        "rbpf_over_dpf",
    ] {
        assert!(row[key].is_object(), "{key}: {row}");
    }
    assert_eq!(v["targets"].as_array().unwrap().len(), 3);
}

#[cfg(feature = "bench")]
#[test]
fn ilp_json_has_every_pipeline_and_placement() {
    let v = suite_json(
        "ilp",
        &[(
            "table4",
            &[
                "copy+checksum",
                "copy+checksum+bswap32",
                "copy+crc32",
                "copy+checksum",
                "copy+checksum+bswap32",
                "copy+crc32",
                "copy+checksum",
                "copy+checksum+bswap32",
                "copy+crc32",
            ],
        )],
    );
    let rows = v["sections"]["table4"]["rows"].as_array().unwrap();
    assert_eq!(rows[0]["data"], "in cache, 4 KiB");
    assert_eq!(rows[8]["data"], "out of cache, 64 MiB in 64 KiB messages");
    assert_eq!(v["targets"].as_array().unwrap().len(), 3);
}

#[cfg(feature = "bench")]
#[test]
fn codecache_json_has_its_three_sections() {
    suite_json(
        "codecache",
        &[
            (
                "lookup",
                &[
                    "codecache table",
                    "RwLock<HashMap>",
                    "Mutex<HashMap>",
                    "dashmap",
                ],
            ),
            (
                "promptness",
                &[
                    "codecache, blocked thread flagged out",
                    "codecache, blocked thread not flagged",
                    "crossbeam-epoch, blocked thread unpinned",
                    "crossbeam-epoch, blocked thread pinned",
                ],
            ),
            ("sharing", &["1", "2", "8"]),
        ],
    );
}

#[cfg(feature = "bench")]
#[test]
fn codegen_json_has_every_generator_and_kernel_and_its_table_the_same_rows() {
    let peers: &[&str] = &[
        "vcode (getreg)",
        "vcode (fixed names)",
        "dynasm-rs",
        "dynasm-rs VecAssembler (bytes only)",
        "iced-x86 CodeAssembler",
        "cranelift-jit (opt none)",
        "cranelift-jit (opt speed)",
    ];
    let v = suite_json("codegen", &[("generation", peers)]);
    // Counted under callgrind, or a line saying why not.
    let ins = &v["sections"]["instructions"];
    if ins["rows"].as_array().unwrap().is_empty() {
        let skipped = ins["lines"][0].as_str().unwrap();
        assert!(skipped.starts_with("skipped: "), "{skipped}");
    } else {
        let names: Vec<&str> = ins["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(
            names,
            [
                "virtual (`getreg`)",
                "fixed names (`Reg::t`/`Reg::s`)",
                "empty function"
            ]
        );
    }
    assert!(v["sections"]["kernels"]["rows"].as_array().unwrap().len() >= 4);
    // The tables: the same sections and rows, nothing on stdout but them.
    let (ok, out, err) = common::fastpath(&["bench", "codegen", "--quick"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("# vcode codegen benchmarks"), "{out}");
    for p in peers {
        assert!(out.contains(&format!("| {p} |")), "{p}: {out}");
    }
    for k in v["sections"]["kernels"]["rows"].as_array().unwrap() {
        let name = k["name"].as_str().unwrap();
        assert!(out.contains(&format!("| {name} |")), "{name}: {out}");
    }
}

#[cfg(feature = "bench")]
#[test]
fn esp_json_has_every_program_in_every_table() {
    let programs: &[&str] = &["program1", "program2", "program3", "program4"];
    let v = suite_json(
        "esp",
        &[
            ("times", programs),
            ("ratios", programs),
            ("fast_paths", programs),
        ],
    );
    assert_eq!(v["sections"]["times"]["samples"], 2);
    assert!(v["targets"].as_array().unwrap().len() >= 4);
}

/// Checks one figure of the JSON output: a finite number (positive if
/// `positive`), or `null` with a reason.
#[cfg(feature = "bench")]
fn check_figure(row: &serde_json::Value, key: &str, positive: bool) {
    let f = &row[key];
    let name = &row["name"];
    match f["value"].as_f64() {
        Some(v) => {
            assert!(v.is_finite(), "{name} {key}: {v}");
            if positive {
                assert!(v > 0.0, "{name} {key} is not positive: {v}");
            }
        }
        None => {
            assert!(f["value"].is_null(), "{name} {key}: {f}");
            let why = f["reason"].as_str().unwrap_or("");
            assert!(!why.is_empty(), "{name} {key}: null without a reason");
        }
    }
}

#[cfg(feature = "bench")]
#[test]
fn jive_json_has_every_row_with_figures_or_reasons() {
    let (ok, out, err) = common::fastpath(&["bench", "jive", "--json", "--quick"]);
    if !ok && err.contains("javac was missing") {
        eprintln!("skipped: {err}");
        return;
    }
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("stdout is one JSON object");
    assert_eq!(v["suite"], "jive");
    assert_eq!(v["rounds"], 5);
    let micro = v["micro"]["rows"].as_array().expect("micro rows");
    let names: Vec<&str> = micro.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "null-loop",
            "null-call",
            "field-read",
            "field-write",
            "array-read",
            "array-write",
            "math",
            "math-field",
            "math-array"
        ]
    );
    let macro_rows = v["macro"]["rows"].as_array().expect("macro rows");
    assert_eq!(macro_rows.len(), 3);
    for (rows, target) in [(micro, "int_over_jit"), (macro_rows, "jit_over_c2")] {
        for row in rows {
            for key in ["jive_int", "jive_jit", "java_xint", "java_c2"] {
                check_figure(row, key, true);
            }
            for key in ["int_over_xint", "int_over_c2", target] {
                check_figure(row, key, true);
            }
            // A verdict only where the ratio it judges is a value.
            match row["verdict"].as_str() {
                Some(w) => {
                    assert!(w == "PASS" || w == "MISS", "{row}");
                    assert!(row[target]["value"].is_number(), "{row}");
                }
                None => assert!(row[target]["value"].is_null(), "{row}"),
            }
        }
    }
    let fuel = v["fuel"]["rows"].as_array().expect("fuel rows");
    assert_eq!(fuel.len(), 12);
    // A fuel cost is positive or n/a (within noise, or negative beyond it).
    for row in fuel {
        check_figure(row, "interpreter", true);
        check_figure(row, "jit", true);
    }
    for key in ["rawunet_check", "rawunet_load", "bench_check"] {
        let l = &v["load"];
        let f = &l[key];
        assert!(
            f["value"].as_f64().is_some_and(|x| x > 0.0) || f["reason"].is_string(),
            "{key}: {f}"
        );
    }
    let targets = v["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 4);
    for t in targets {
        assert!(
            t["verdict"].is_null() || t["verdict"] == "PASS" || t["verdict"] == "MISS",
            "{t}"
        );
    }
}

#[cfg(feature = "bench")]
#[test]
fn idl_json_has_every_call_and_family() {
    let calls: &[&str] = &["null", "pfs_open", "pfs_write", "pfs_get_direntries"];
    let v = suite_json("idl", &[("round_trips", calls)]);
    let io: Vec<&str> = v["sections"]["iozone"]["rows"]
        .as_array()
        .expect("iozone rows")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(io.first(), Some(&"raw"), "{io:?}");
    assert!(io.contains(&"prost"), "{io:?}");
    // Counted under callgrind, or a note saying why not.
    match v["sections"]["instructions"]["rows"].as_array() {
        Some(rows) => assert_eq!(rows.len(), 4, "{v}"),
        None => assert!(
            v["notes"].as_array().unwrap().iter().any(|n| n
                .as_str()
                .unwrap()
                .contains("instruction counts (Table 4) skipped")),
            "{v}"
        ),
    }
}

/// The dynamic stubs' instructions against the static ones' over the same
/// shared-memory channel in one thread (Table 4's "fastpath over shm" and
/// "fastpath dynamic" columns): callgrind's counts are exact, so this is
/// not a timed test. At most 1.5x on each of Table 4's calls. Skipped,
/// saying so, where valgrind is missing, unless `IDL_REQUIRE_VALGRIND=1`.
#[cfg(feature = "bench")]
#[test]
fn dynamic_stubs_count_at_most_one_and_a_half_times_the_static_ones_over_shm() {
    use fastpath_bench::idl::count;
    let have = std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            std::env::var("IDL_REQUIRE_VALGRIND").ok().as_deref() != Some("1"),
            "IDL_REQUIRE_VALGRIND=1 but valgrind is not installed (scripts/install-deps.sh)"
        );
        eprintln!(
            "skipped: valgrind is not installed (scripts/install-deps.sh); \
             IDL_REQUIRE_VALGRIND=1 makes this a failure"
        );
        return;
    }
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_fastpath"));
    let counts = count::measure_with(exe, ["bench", "idl"]).expect("callgrind counts");
    let find = |n: &str| {
        counts
            .iter()
            .find(|c| c.name == n)
            .unwrap_or_else(|| panic!("no family {n} among the counted"))
    };
    let (st, dy) = (find("fastpath over shm"), find("fastpath dynamic"));
    for (k, op) in count::OPS.iter().enumerate().skip(1) {
        let total = |c: &count::Counts| c.dirs[k].0 + c.dirs[k].1;
        let (s, d) = (total(st), total(dy));
        assert!(s > 0 && d > 0, "{op}: static {s}, dynamic {d} instructions");
        assert!(
            2 * d <= 3 * s,
            "{op}: the dynamic stubs take {d} instructions, over 1.5x the static ones' {s} \
             over the same channel"
        );
    }
}

/// With `--json`, a suite refused or unable to start prints the error
/// object on stdout, exits 1 and says why on stderr as without `--json`.
#[test]
fn json_errors_are_one_object_on_stdout() {
    let (command, message) = json_error(&["bench", "unet", "--quick"]);
    assert_eq!(command, "bench unet");
    assert!(
        message.starts_with("--quick is not supported by the unet suite"),
        "{message}"
    );
    let (command, message) = json_error(&["bench", "dpf", "--only", "burst"]);
    assert_eq!(command, "bench dpf");
    assert!(
        message.contains("--only burst is a cell of the unet suite"),
        "{message}"
    );
    #[cfg(not(feature = "bench"))]
    {
        let (command, message) = json_error(&["bench", "dpf"]);
        assert_eq!(command, "bench dpf");
        assert!(
            message
                .contains("cargo run --release -p fastpath --features bench -- bench dpf --json"),
            "{message}"
        );
    }
}

/// A suite that fails before it measures (here ilp on an `ILP_VECTORS` it
/// does not know) prints the error object with `--json`.
#[cfg(feature = "bench")]
#[test]
fn a_suite_that_cannot_start_prints_the_error_object() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(["bench", "ilp", "--quick", "--json"])
        .env("ILP_VECTORS", "zmm")
        .output()
        .expect("runs fastpath");
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["error"]["command"], "bench ilp");
    assert_eq!(
        v["error"]["message"],
        "ILP_VECTORS=\"zmm\": expected widest, ymm or xmm"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("fastpath bench ilp: ILP_VECTORS=\"zmm\""),
        "{err}"
    );
}
