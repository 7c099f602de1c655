//! Compiles the Java applets under `applets/` with `javac`, twice: with
//! `--release 8` (class files of version 52) and with the JDK's default
//! release, into `$OUT_DIR/applets/{release8,default}`. The test harness for
//! HotSpot goes into `$OUT_DIR/applets/harness`.
//!
//! The endpoint applets of `applets/unet` go into `$OUT_DIR/applets/unet`
//! (`--release 8`), for the JIT's differential test.
//!
//! It also generates random programs (`build/random_programs.rs`, a fixed
//! seed) into `$OUT_DIR/applets/random/src` and compiles them with one
//! `javac` run into `$OUT_DIR/applets/random/classes`, which
//! `JIVE_RANDOM_CLASSES` names: the programs of the differential test of the
//! JIT against the interpreter (`tests/jit.rs`).
//!
//! A missing `javac` does not fail the build: it prints a warning and leaves
//! `JIVE_APPLET_CLASSES` and `JIVE_RANDOM_CLASSES` unset, so the tests that
//! need class files say they are skipped and why.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build/random_programs.rs"]
mod random_programs;

fn java_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            java_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "java") {
            out.push(p);
        }
    }
}

/// `Err(None)`: javac is missing; `Err(Some(msg))`: it ran and failed.
fn javac(args: &[&str], files: &[PathBuf], out: &Path) -> Result<(), Option<String>> {
    let _ = std::fs::remove_dir_all(out);
    std::fs::create_dir_all(out).map_err(|e| Some(e.to_string()))?;
    let javac = std::env::var("JAVAC").unwrap_or_else(|_| "javac".into());
    let status = Command::new(&javac)
        .args(args)
        .arg("-d")
        .arg(out)
        .args(files)
        .output()
        .map_err(|_| None)?;
    if !status.status.success() {
        return Err(Some(format!(
            "{javac} failed:\n{}",
            String::from_utf8_lossy(&status.stderr)
        )));
    }
    Ok(())
}

/// Writes the random programs' sources and compiles them with one `javac`
/// run; returns the directory of the class files.
fn random_programs(dir: &Path) -> Result<PathBuf, Option<String>> {
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src).map_err(|e| Some(format!("{}: {e}", src.display())))?;
    let mut files = Vec::with_capacity(random_programs::CLASSES);
    for k in 0..random_programs::CLASSES {
        let (name, text) = random_programs::class(k);
        let f = src.join(format!("{name}.java"));
        std::fs::write(&f, text).map_err(|e| Some(format!("{}: {e}", f.display())))?;
        files.push(f);
    }
    let classes = dir.join("classes");
    javac(
        &[
            "--release",
            "8",
            "-Xlint:none",
            "-nowarn",
            "-proc:none",
            "-implicit:none",
            // A short run: the client compiler and the serial collector
            // halve the time and use a third of the memory.
            "-J-XX:TieredStopAtLevel=1",
            "-J-XX:+UseSerialGC",
        ],
        &files,
        &classes,
    )?;
    Ok(classes)
}

fn main() {
    println!("cargo::rerun-if-env-changed=JAVAC");
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let applets = manifest.join("../../applets");
    println!("cargo::rerun-if-changed={}", applets.display());
    let mut sources = Vec::new();
    java_files(&applets.join("src"), &mut sources);
    let mut harness = Vec::new();
    java_files(&applets.join("harness"), &mut harness);
    for f in sources.iter().chain(&harness) {
        println!("cargo::rerun-if-changed={}", f.display());
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("applets");
    let result = javac(
        &["--release", "8", "-g", "-Xlint:-options"],
        &sources,
        &out.join("release8"),
    )
    .and_then(|()| javac(&["-g"], &sources, &out.join("default")))
    .and_then(|()| {
        let mut all = harness.clone();
        all.extend(sources.iter().cloned());
        javac(&[], &all, &out.join("harness"))
    });
    match result {
        Ok(()) => {
            println!("cargo::rustc-env=JIVE_APPLET_CLASSES={}", out.display());
            let mut unet = Vec::new();
            java_files(&applets.join("unet"), &mut unet);
            if let Err(e) = javac(
                &["--release", "8", "-g", "-Xlint:-options"],
                &unet,
                &out.join("unet"),
            ) {
                panic!(
                    "jive: compiling the endpoint applets failed: {}",
                    e.unwrap_or_default()
                );
            }
            match random_programs(&out.join("random")) {
                Ok(classes) => {
                    println!("cargo::rustc-env=JIVE_RANDOM_CLASSES={}", classes.display())
                }
                // javac compiled the applets a moment ago, so this is the generator's bug.
                Err(e) => panic!(
                    "jive: compiling the random programs failed (a bug in build/random_programs.rs): {}",
                    e.unwrap_or_default()
                ),
            }
        }
        Err(None) => println!(
            "cargo::warning=jive: javac not found, so the Java test applets are not compiled and the tests that need \
             them will be skipped. Install a JDK, e.g. apt-get install openjdk-17-jdk-headless"
        ),
        // The applets are part of this repository: failing to compile them is a bug to fix, not to skip.
        Err(Some(e)) => panic!("jive: compiling the Java test applets failed: {e}"),
    }
}
