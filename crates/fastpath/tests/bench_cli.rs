//! `fastpath bench` and the cargo feature `bench`: without the feature the
//! subcommand is still there, says how to build it and exits non-zero; with
//! it, the suites are compiled in (an unknown suite is refused by name).

mod common;

/// `fastpath` with `args`: whether it succeeded, and its standard error.
fn fastpath(args: &[&str]) -> (bool, String) {
    let (ok, _, err) = common::fastpath(args);
    (ok, err)
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
}

#[cfg(feature = "bench")]
#[test]
fn with_the_feature_an_unknown_suite_is_refused() {
    let (ok, err) = fastpath(&["bench", "no-such-suite"]);
    assert!(!ok);
    assert!(err.contains("unknown suite \"no-such-suite\""), "{err}");
}
