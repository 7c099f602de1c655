//! `fastpath vcode demo` end to end: the paper's examples generated, run
//! and listed for x86-64, and for aarch64 under emulation when the
//! command is built with the cargo feature `aarch64` (without it, the
//! target is an error that says how to get it).

mod common;
use common::fastpath;

/// The results every target must print: computed by the generated code,
/// checked here against Rust's arithmetic.
fn assert_results(out: &str) {
    for want in [
        "plus1(41) = 42",
        "sum(1..=100) = 5050",
        "twice_scaled(7) = scale(scale(7, 3), 5) + 7 = 112",
        "unmarshal(msg) = 1778.25 (Rust computes 1778.25: ok)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn x86_64_runs_and_lists_the_examples() {
    let (ok, out, err) = fastpath(&["vcode", "demo"]);
    assert!(ok, "{err}");
    assert!(out.contains("generated in place for x86-64"), "{out}");
    assert_results(&out);
    // iced-x86's listing of Figure 1's body: `add edi,1` on the first
    // argument register.
    assert!(
        out.lines()
            .any(|l| l.contains("add") && l.contains("edi,1")),
        "{out}"
    );
}

#[test]
fn a_bad_signature_is_an_error() {
    let (ok, _, err) = fastpath(&["vcode", "demo", "--sig", "%i%x"]);
    assert!(!ok);
    assert!(err.contains("fastpath vcode demo:"), "{err}");
    assert!(
        err.contains("at byte 3: each parameter is `%` and a type letter"),
        "{err}"
    );
    let (ok, _, err) = fastpath(&["vcode", "demo", "--sig", "%i%p"]);
    assert!(!ok);
    assert!(
        err.contains("example 4 takes parameters of types i, l, f, d"),
        "{err}"
    );
    // The type as written, not the one it is passed as.
    let (ok, _, err) = fastpath(&["vcode", "demo", "--sig", "%i%uc"]);
    assert!(!ok);
    assert!(err.ends_with("has a parameter of type uc\n"), "{err}");
    // The help says 1 to 32.
    let (ok, _, err) = fastpath(&["vcode", "demo", "--sig", ""]);
    assert!(!ok);
    assert!(
        err.contains("takes 1 to 32 parameters; the signature is empty"),
        "{err}"
    );
}

#[cfg(feature = "aarch64")]
#[test]
fn aarch64_runs_under_emulation_and_lists_the_examples() {
    let (ok, out, err) = fastpath(&["vcode", "demo", "--target", "aarch64"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("for aarch64 (AAPCS64), run under emulation"),
        "{out}"
    );
    assert_results(&out);
    // yaxpeax-arm's listing: Figure 1's body and the AAPCS64 return, and
    // example 3's callee generated rather than the host's.
    assert!(out.contains("add w0, w0, #0x1"), "{out}");
    assert!(out.contains("ret"), "{out}");
    assert!(out.contains("== scale ("), "{out}");
    assert!(out.contains("aarch64"), "{out}");
}

#[cfg(not(feature = "aarch64"))]
#[test]
fn aarch64_without_the_feature_says_how_to_get_it() {
    let (ok, out, err) = fastpath(&["vcode", "demo", "--target", "aarch64"]);
    assert!(!ok);
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("--features aarch64"), "{err}");
}

/// `--sig` and its limits: a 33rd parameter is an error that says the
/// limit of 32 (not a bad byte); `%c` and `%s` are accepted (widened to
/// int) and documented in `--help` with every other letter; signatures of
/// up to 32 parameters of each type, and mixed ones, more than the
/// registers hold, run and compute what Rust computes.
#[test]
fn signature_limits_are_stated() {
    let (ok, _, err) = fastpath(&["vcode", "demo", "--sig", &"%i".repeat(33)]);
    assert!(!ok);
    assert!(
        err.contains("has 33 parameters, more than the 32 a function takes"),
        "{err}"
    );
    assert!(!err.contains("at byte"), "{err}");

    let (ok, help, _) = fastpath(&["vcode", "demo", "--help"]);
    assert!(ok);
    for letter in [
        "i (int)",
        "l (long)",
        "f (float)",
        "d",
        "c (char)",
        "s (short)",
    ] {
        assert!(help.contains(letter), "{letter:?} undocumented in:\n{help}");
    }
    assert!(help.contains("any 32 work"), "{help}");

    for sig in MANY {
        let (ok, out, err) = fastpath(&["vcode", "demo", "--sig", sig]);
        assert!(ok, "--sig {sig}: {err}");
        assert!(out.contains(": ok)"), "--sig {sig}:\n{out}");
    }
}

/// The signatures of up to 32 parameters the demo must run: each type 32
/// times, and a 32-long mix (ints and floats past the registers of both
/// files, `%c`/`%s` widened).
const MANY: [&str; 6] = [
    "%c%s%i",
    "%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i%i",
    "%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d",
    "%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l%l",
    "%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f%f",
    "%i%d%l%f%c%d%s%i%f%l%d%i%d%f%l%i%i%d%l%f%c%d%s%i%f%l%d%i%d%f%l%d",
];

/// The same signatures under emulation: the aarch64 backend keeps
/// parameters in memory and passes arguments from memory the same way.
#[cfg(feature = "aarch64")]
#[test]
fn signatures_of_32_parameters_run_on_aarch64() {
    for sig in MANY {
        let (ok, out, err) = fastpath(&["vcode", "demo", "--target", "aarch64", "--sig", sig]);
        assert!(ok, "--sig {sig}: {err}");
        assert!(out.contains(": ok)"), "--sig {sig}:\n{out}");
    }
    let (ok, _, err) = fastpath(&[
        "vcode",
        "demo",
        "--target",
        "aarch64",
        "--sig",
        &"%d".repeat(33),
    ]);
    assert!(!ok);
    assert!(
        err.contains("has 33 parameters, more than the 32 a function takes"),
        "{err}"
    );
}
