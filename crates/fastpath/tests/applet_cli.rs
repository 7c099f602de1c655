//! `fastpath applet` end to end: the built-in example applets (listed,
//! written out, taken by name), the README's `applet run` example on an
//! applet the repository ships, endpoint applets run with the real natives
//! on a scratch endpoint, and `--json` for scripts.

use std::path::Path;

mod common;
use common::{fastpath, json_error};

/// The README's `fastpath applet run ...` example, as its words.
fn readme_run_example() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .expect("read README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("fastpath applet run "))
        .expect("README.md has an `applet run` example");
    let cmd = line.split('#').next().unwrap();
    cmd.split_whitespace().skip(1).map(str::to_owned).collect()
}

/// The README's example runs as written, on the standard applet it names:
/// a 64-byte message goes into one free buffer and one receive descriptor.
/// (With natives stubbed to return 0 the applet's buffer size was 0 and
/// `doRx` trapped dividing by it.)
#[test]
fn the_readme_example_runs() {
    let words = readme_run_example();
    assert_eq!(words[..2], ["applet", "run"], "{words:?}");
    let args: Vec<&str> = words.iter().map(String::as_str).collect();
    let (ok, out, err) = fastpath(&args);
    assert!(ok, "`fastpath {}` failed:\n{out}\n{err}", args.join(" "));
    assert!(!out.contains("division"), "{out}");
    assert!(out.contains("result: 0"), "{out}");
    assert!(
        out.contains("receive descriptor: channel 0, 64 bytes in buffers at offsets 0"),
        "{out}"
    );
}

/// `StandardUnet` on both engines: short messages travel inline, long ones
/// in as many 4096-byte buffers as they need; doTx transmits.
#[test]
fn standard_unet_on_a_scratch_endpoint() {
    for engine in ["interp", "jit"] {
        let (ok, out, err) = fastpath(&[
            "applet",
            "run",
            "StandardUnet",
            "doRx",
            "40",
            "3",
            "--engine",
            engine,
        ]);
        if engine == "jit" && !ok && err.contains("--engine jit") {
            eprintln!("skipped the JIT: {err}");
            continue;
        }
        assert!(ok, "{engine}: {out}\n{err}");
        assert!(
            out.contains("receive descriptor: channel 3, 40 bytes inline: 00 01 02 03"),
            "{engine}: {out}"
        );
        let (ok, out, err) = fastpath(&[
            "applet",
            "run",
            "StandardUnet",
            "doRx",
            "10000",
            "0",
            "--engine",
            engine,
        ]);
        assert!(ok, "{engine}: {out}\n{err}");
        assert!(
            out.contains("10000 bytes in buffers at offsets 0, 4096, 8192"),
            "{engine}: {out}"
        );
        let (ok, out, err) = fastpath(&[
            "applet",
            "run",
            "StandardUnet",
            "doTx",
            "100",
            "1",
            "0",
            "--engine",
            engine,
        ]);
        assert!(ok, "{engine}: {out}\n{err}");
        assert!(
            out.contains("transmit: channel 1, 100 bytes"),
            "{engine}: {out}"
        );
    }
}

/// `examples` lists the built-in applets, writes them out as class files
/// that verify, and says how to compile one's own.
#[test]
fn examples_lists_and_writes_the_built_in_applets() {
    let dir = std::env::temp_dir().join(format!("fastpath-applet-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out_dir = dir.join("classes");
    let (ok, out, err) = fastpath(&["applet", "examples", "--out", out_dir.to_str().unwrap()]);
    assert!(ok, "{err}");
    for name in ["StandardUnet", "RawUnet", "PingPong", "Burst25"] {
        assert!(out.contains(name), "{name} missing:\n{out}");
        let class = out_dir.join(format!("{name}.class"));
        assert!(class.is_file(), "{name}.class not written");
        let (ok, vout, verr) = fastpath(&["applet", "verify", class.to_str().unwrap()]);
        assert!(ok, "{vout}\n{verr}");
        assert!(vout.contains(&format!("verified: class {name}")), "{vout}");
    }
    assert!(out.contains("javac --release 8"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);

    let (ok, out, err) = fastpath(&["applet", "examples", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("examples --json prints JSON");
    let names: Vec<&str> = v["builtin"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"StandardUnet"), "{names:?}");
}

/// A missing class file is an error that points to the built-in applets.
#[test]
fn a_missing_class_file_points_to_the_examples() {
    let (ok, _, err) = fastpath(&["applet", "run", "NoSuch.class", "doRx", "1", "0"]);
    assert!(!ok);
    assert!(
        err.contains("NoSuch.class") && err.contains("fastpath applet examples"),
        "{err}"
    );
}

/// `verify --json`: the verdict and what the host must bind.
#[test]
fn verify_json_gives_the_verdict() {
    let (ok, out, err) = fastpath(&["applet", "verify", "RawUnet", "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("verify --json prints JSON");
    assert_eq!(v["verified"], true);
    assert_eq!(v["class"], "RawUnet");
    assert!(
        v["natives"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "dmaRxd([III)V"),
        "{v}"
    );
}

/// With `--json`, a command that fails before it has a verdict prints the
/// error object on stdout; a rejected class is a verdict (the report).
#[test]
fn json_errors_are_one_object_on_stdout() {
    let (command, message) = json_error(&["applet", "verify", "NoSuch.class"]);
    assert_eq!(command, "applet verify");
    assert!(
        message.contains("NoSuch.class") && message.contains("fastpath applet examples"),
        "{message}"
    );
    // `--out` under a file: the directory cannot be created.
    let file = std::env::temp_dir().join(format!("fastpath-applet-json-{}", std::process::id()));
    std::fs::write(&file, b"not a directory").unwrap();
    let under = file.join("classes");
    let (command, message) = json_error(&["applet", "examples", "--out", under.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(command, "applet examples");
    assert!(message.contains("cannot create it"), "{message}");
}

/// `run` refuses an invocation it cannot make (the wrong number of
/// arguments, no such method) before it prints anything: the error on
/// stderr, nothing on stdout, exit status 1.
#[test]
fn a_refused_invocation_prints_nothing_on_stdout() {
    for (args, said) in [
        (&["doRx", "1"][..], "doRx(II)I takes 2 arguments, 1 given"),
        (
            &["doRx", "1", "2", "3"][..],
            "doRx(II)I takes 2 arguments, 3 given",
        ),
        (&["doRx"][..], "doRx(II)I takes 2 arguments, 0 given"),
        (
            &["noSuch", "1"][..],
            "no method named \"noSuch\" in the applet",
        ),
    ] {
        for engine in ["interp", "tiered"] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_fastpath"))
                .args(["applet", "run", "StandardUnet"])
                .args(args)
                .args(["--engine", engine])
                .output()
                .expect("runs fastpath");
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
            assert!(
                stdout.is_empty(),
                "{args:?} --engine {engine}: stdout:\n{stdout}"
            );
            assert_eq!(
                stderr.trim_end(),
                format!("fastpath applet: StandardUnet: {said}"),
                "{args:?}"
            );
        }
    }
    // The same method with its two arguments runs and prints.
    let (ok, out, err) = fastpath(&["applet", "run", "StandardUnet", "doRx", "1", "0"]);
    assert!(ok, "{err}");
    assert!(out.starts_with("endpoint: a scratch one"), "{out}");
    assert!(out.contains("engine: "), "{out}");
}
