//! `fastpath idl` end to end: `check` prints each operation's record with
//! the offsets the layout rules give the paper's pfs calls; `compile`
//! writes Rust or C stubs (the C files and the run time written beside
//! them compile with gcc on their own); a bad file is an error that names the file, line and
//! column, shows the line, and fails the command.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::fastpath;

fn idl_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../idl")
}

fn pfs() -> String {
    idl_dir().join("idl/pfs.idl").to_str().unwrap().to_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fastpath-idl-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
    let dir = scratch("compile");
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
        .arg(&dir)
        .arg(dir.join("pfs.c"))
        .output()
        .unwrap();
    assert!(
        gcc.status.success(),
        "{}",
        String::from_utf8_lossy(&gcc.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_file_is_an_error_at_its_place() {
    let dir = scratch("bad");
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
    let _ = std::fs::remove_dir_all(&dir);
}
