//! `fastpath idl` end to end: `check` prints each operation's record with
//! the offsets the layout rules give the paper's pfs calls; `compile`
//! writes Rust or C stubs (the C files and the run time written beside
//! them compile with gcc on their own); a bad file is an error that names the file, line and
//! column, shows the line, and fails the command.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{fastpath, json_error};

fn idl_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../idl")
}

fn pfs() -> String {
    idl_dir().join("idl/pfs.idl").to_str().unwrap().to_owned()
}

/// A test's scratch directory, removed with everything in it when the
/// returned guard drops (when the test ends, pass or fail).
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fastpath-idl-cli-{name}-"))
        .tempdir()
        .unwrap()
}

#[test]
fn check_prints_the_pfs_records() {
    let (ok, out, err) = fastpath(&["idl", "check", &pfs()]);
    assert!(ok, "{err}");
    assert!(out.contains("interface pfs (3 operations)"), "{out}");
    // pfs_write: in handle, len, the data descriptor; inout pos; the
    // return value last; data_size travels as the descriptor's count.
    let write = &out[out.find("pfs_write").unwrap()..];
    let write = &write[..write.find("key").unwrap_or(write.len())];
    assert!(
        write.contains("request 20 B, reply 24 B, inline"),
        "{write}"
    );
    for row in [
        "0     4  in     handle: i32",
        "4     4  in     len: i32",
        "8     8  in     data: sequence<i32>  (descriptor: offset, count = data_size)",
        "16     4  inout  pos: i32",
        "20     4  ret    return value: i32",
    ] {
        assert!(write.contains(row), "missing `{row}` in\n{write}");
    }
}

#[test]
fn compile_writes_rust_and_c() {
    let tmp = scratch("compile");
    let dir = tmp.path();
    let d = dir.to_str().unwrap();
    let (ok, out, err) = fastpath(&["idl", "compile", &pfs(), "--lang", "rust", "--out", d]);
    assert!(ok, "{err}");
    assert!(out.contains("pfs.rs"), "{out}");
    let rust = std::fs::read_to_string(dir.join("pfs.rs")).unwrap();
    assert!(rust.contains("fn pfs_write"), "{rust}");

    let (ok, out, err) = fastpath(&["idl", "compile", &pfs(), "--lang", "c", "--out", d]);
    assert!(ok, "{err}");
    for f in ["pfs.h", "pfs.c", "idl_rt.h", "idl_rt.c"] {
        assert!(out.contains(f), "{f} not written: {out}");
    }
    if Command::new("gcc").arg("--version").output().is_err() {
        eprintln!("gcc is missing: the generated C is not compiled");
        return;
    }
    let include = idl_dir().join("c");
    let gcc = Command::new("gcc")
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            "-I",
        ])
        .arg(&include)
        .arg("-I")
        .arg(dir)
        .arg(dir.join("pfs.c"))
        .output()
        .unwrap();
    assert!(
        gcc.status.success(),
        "{}",
        String::from_utf8_lossy(&gcc.stderr)
    );
}

#[test]
fn a_bad_file_is_an_error_at_its_place() {
    let tmp = scratch("bad");
    let dir = tmp.path();
    let file = dir.join("bad.idl");
    std::fs::write(
        &file,
        "interface x {\n  int f([in] int a, [in, size_is(n)] int *d);\n};\n",
    )
    .unwrap();
    let (ok, out, err) = fastpath(&["idl", "check", file.to_str().unwrap()]);
    assert!(!ok);
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("bad.idl:2:34: size_is(n): `f` has no parameter `n`"),
        "{err}"
    );
    assert!(
        err.contains("  int f([in] int a, [in, size_is(n)] int *d);\n"),
        "{err}"
    );
    let (ok, _, err) = fastpath(&["idl", "compile", "/nonexistent/x.idl"]);
    assert!(!ok);
    assert!(err.contains("/nonexistent/x.idl"), "{err}");
}

/// `--out` names a directory that `compile` creates, with its parents.
#[test]
fn compile_creates_the_out_directory() {
    let tmp = scratch("mkdir");
    let dir = tmp.path().join("a/b");
    let d = dir.to_str().unwrap();
    let (ok, out, err) = fastpath(&["idl", "compile", &pfs(), "--lang", "c", "--out", d]);
    assert!(ok, "{err}");
    for f in ["pfs.h", "pfs.c", "idl_rt.h", "idl_rt.c"] {
        assert!(dir.join(f).is_file(), "{f} not written: {out}");
    }
}

/// A file named like the C run time would have its stubs overwritten by
/// it in the output directory: refused, and nothing is written.
#[test]
fn a_file_named_like_the_c_run_time_is_refused() {
    let tmp = scratch("idl-rt");
    let file = tmp.path().join("idl_rt.idl");
    std::fs::copy(pfs(), &file).unwrap();
    let dir = tmp.path().join("out");
    let (ok, _, err) = fastpath(&[
        "idl",
        "compile",
        file.to_str().unwrap(),
        "--lang",
        "c",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("idl_rt.idl: ") && err.contains("rename the IDL file"),
        "{err}"
    );
    assert!(!dir.exists(), "written despite the refusal");
}

/// A file that declares nothing (empty, or only comments) generates
/// nothing, so it is an error that says what a file must declare; one with
/// types but no interface is compiled, with a warning that it has no stubs.
#[test]
fn a_file_that_declares_nothing_is_an_error() {
    let tmp = scratch("empty");
    let dir = tmp.path();
    for (name, text) in [
        ("empty.idl", ""),
        ("comments.idl", "// nothing\n/* here */\n"),
    ] {
        let f = dir.join(name);
        std::fs::write(&f, text).unwrap();
        for cmd in ["check", "compile"] {
            let (ok, out, err) = fastpath(&["idl", cmd, f.to_str().unwrap()]);
            assert!(!ok, "{cmd} {name} succeeded: {out}");
            assert!(out.is_empty(), "{out}");
            assert!(
                err.contains(name) && err.contains("declares nothing") && err.contains("interface"),
                "{err}"
            );
        }
    }
    let f = dir.join("types.idl");
    std::fs::write(&f, "struct point { long x; long y; };\n").unwrap();
    let (ok, out, err) = fastpath(&["idl", "check", f.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("struct point (8 bytes, align 4)"), "{out}");
    assert!(err.contains("warning: no interface"), "{err}");
}

/// A limit exceeded on the command line is named by the flag that sets it,
/// not by the library's field; raising the flag accepts the file.
#[test]
fn a_limit_error_names_its_flag() {
    let tmp = scratch("limit");
    let dir = tmp.path();
    let f = dir.join("big.idl");
    std::fs::write(&f, "interface big {\n  void put(in char a[5000]);\n};\n").unwrap();
    let f = f.to_str().unwrap();
    let (ok, _, err) = fastpath(&["idl", "check", f]);
    assert!(!ok);
    assert!(
        err.contains("big.idl:2:8: the message record of `put` is 5000 bytes, more than the limit of 4096 (set by --max-record)"),
        "{err}"
    );
    assert!(!err.contains("Limits::"), "{err}");
    let (ok, _, err) = fastpath(&["idl", "check", f, "--max-record", "8192"]);
    assert!(ok, "{err}");

    let many: Vec<String> = (0..3).map(|k| format!("in string s{k}")).collect();
    let g = dir.join("strings.idl");
    std::fs::write(
        &g,
        format!("interface s {{ void f({}); }};\n", many.join(", ")),
    )
    .unwrap();
    let (ok, _, err) = fastpath(&["idl", "check", g.to_str().unwrap(), "--max-strings", "2"]);
    assert!(!ok);
    assert!(err.contains("(set by --max-strings)"), "{err}");
}

/// Invalid UTF-8 is an error at the line and column of the first bad byte.
#[test]
fn invalid_utf8_is_an_error_at_its_line_and_column() {
    let tmp = scratch("utf8");
    let dir = tmp.path();
    let f = dir.join("bad.idl");
    std::fs::write(&f, b"interface i {\n  void f(in long \xc3\xa9x\xff);\n};\n").unwrap();
    let (ok, _, err) = fastpath(&["idl", "check", f.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("bad.idl:2:20: byte 0xff (at byte offset 34) is not UTF-8"),
        "{err}"
    );
}

/// A file that starts with a UTF-8 byte-order mark (as some Windows
/// editors write it) is read as if it had none: it checks and compiles,
/// and an error's column, caret and invalid byte count no column for it.
/// A mark alone is a file that declares nothing.
#[test]
fn a_leading_byte_order_mark_is_skipped() {
    let tmp = scratch("bom");
    let dir = tmp.path();
    let text = std::fs::read(pfs()).unwrap();
    let f = dir.join("pfs.idl");
    std::fs::write(&f, [b"\xef\xbb\xbf".as_slice(), &text].concat()).unwrap();
    let f = f.to_str().unwrap();
    let (ok, out, err) = fastpath(&["idl", "check", f]);
    assert!(ok, "{err}");
    assert!(out.contains("interface pfs (3 operations)"), "{out}");
    let d = dir.join("out");
    let (ok, _, err) = fastpath(&[
        "idl",
        "compile",
        f,
        "--lang",
        "c",
        "--out",
        d.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(d.join("pfs.h").is_file());

    for (name, text, want) in [
        (
            "at.idl",
            b"\xef\xbb\xbfinterface i { void f(@); };\n".as_slice(),
            "at.idl:1:22: unexpected character `@`\ninterface i { void f(@); };\n                     ^",
        ),
        (
            "byte.idl",
            b"\xef\xbb\xbfinterface i\xff {};\n",
            "byte.idl:1:12: byte 0xff (at byte offset 14) is not UTF-8",
        ),
        ("mark.idl", b"\xef\xbb\xbf", "mark.idl: declares nothing"),
    ] {
        let g = dir.join(name);
        std::fs::write(&g, text).unwrap();
        let (ok, _, err) = fastpath(&["idl", "check", g.to_str().unwrap()]);
        assert!(!ok, "{name} accepted");
        assert!(err.contains(want), "{name}: want `{want}` in\n{err}");
    }
}

/// `check --json` gives scripts the same records as the text.
#[test]
fn check_json_gives_the_records() {
    let (ok, out, err) = fastpath(&["idl", "check", &pfs(), "--json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("check --json prints JSON");
    let ops = v["interfaces"][0]["operations"].as_array().unwrap();
    let write = ops.iter().find(|o| o["name"] == "pfs_write").unwrap();
    assert_eq!(write["request_bytes"], 20);
    assert_eq!(write["reply_bytes"], 24);
    assert_eq!(write["inline"], true);
    let data = write["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "data")
        .unwrap();
    assert_eq!(data["offset"], 8);
    assert_eq!(data["descriptor"], true);
    assert_eq!(data["count_from"], "data_size");
    assert_eq!(data["type"], "sequence<i32>");
}

/// `check --json` on a file in error: standard output holds the CLI's JSON
/// error object with the message standard error gets, and the exit status
/// is the failure's.
#[test]
fn check_json_on_an_error_prints_the_error_object() {
    let dir = std::env::temp_dir().join(format!("fastpath-idl-json-error-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.idl");
    std::fs::write(&bad, "interface I { void f(in long x, in long X); };\n").unwrap();
    let (command, message) = json_error(&["idl", "check", bad.to_str().unwrap()]);
    assert_eq!(command, "idl check");
    assert!(message.contains("bad.idl:1:"), "{message}");
    std::fs::remove_dir_all(&dir).unwrap();
}
