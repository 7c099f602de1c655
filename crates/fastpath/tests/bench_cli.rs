//! `fastpath bench` and the cargo feature `bench`: the suite is a validated
//! value in every build (an unknown one is refused with the list of suites);
//! without the feature a known suite says how to build it and exits
//! non-zero; with it, the suites are compiled in, `--json` and `--quick` are
//! refused by the suites that do not have them (naming those that do), and
//! `bench jive --json` gives every row, figure, ratio and verdict or `null`
//! with the reason.

mod common;

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
fn json_is_refused_by_the_suites_without_it_naming_those_with_it() {
    for suite in ["dpf", "esp", "idl", "ilp", "codecache", "codegen", "unet"] {
        let (ok, err) = fastpath(&["bench", suite, "--json"]);
        assert!(!ok, "bench {suite} --json must be refused");
        assert!(
            err.contains(&format!("--json is not supported by the {suite} suite"))
                && err.contains("suites with --json: jive"),
            "{err}"
        );
    }
    let (ok, err) = fastpath(&["bench", "codegen", "--quick"]);
    assert!(!ok);
    assert!(err.contains("suites with --quick: jive"), "{err}");
}

/// Checks one figure of the JSON output: a positive number, or `null` with
/// a reason (ratios and fuel costs may be any finite number).
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
    for row in fuel {
        check_figure(row, "interpreter", false);
        check_figure(row, "jit", false);
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
