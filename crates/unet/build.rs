//! Compiles the endpoint applets, `applets/unet/*.java` and Figure 2's
//! `applets/src/RawUnet.java` (the U-Net/SLE paper's evaluation applets,
//! §5), with `javac --release 8 -g` into
//! `$OUT_DIR/unet-applets`, where `src/applets.rs` includes the class files.
//!
//! Unlike jive's build script, a missing `javac` fails the build: the engine's
//! applets and the main command (`fastpath demo`) need these class files, so
//! skipping them silently would leave a crate that cannot do its job. `JAVAC`
//! names another compiler.

use std::path::{Path, PathBuf};
use std::process::Command;

const NO_JAVAC: &str = "unet: javac not found; the endpoint applets are compiled from applets/unet/*.java. \
     Install a JDK: bash scripts/install-deps.sh (or apt-get install openjdk-17-jdk-headless)";

fn java_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "java"))
        .collect();
    out.sort();
    Ok(out)
}

fn run() -> Result<(), String> {
    println!("cargo::rerun-if-env-changed=JAVAC");
    let manifest = PathBuf::from(
        std::env::var("CARGO_MANIFEST_DIR").map_err(|_| "CARGO_MANIFEST_DIR is not set")?,
    );
    let dir = manifest.join("../../applets/unet");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut sources =
        java_files(&dir).map_err(|e| format!("unet: reading {}: {e}", dir.display()))?;
    if sources.is_empty() {
        return Err(format!("unet: no applets (*.java) in {}", dir.display()));
    }
    // Figure 2's applet, as the paper prints it, is jive's test applet too:
    // one source for both.
    sources.push(manifest.join("../../applets/src/RawUnet.java"));
    for f in &sources {
        println!("cargo::rerun-if-changed={}", f.display());
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").map_err(|_| "OUT_DIR is not set")?)
        .join("unet-applets");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("unet: creating {}: {e}", out.display()))?;
    let javac = std::env::var("JAVAC").unwrap_or_else(|_| "javac".into());
    let output = Command::new(&javac)
        .args(["--release", "8", "-g", "-Xlint:-options", "-d"])
        .arg(&out)
        .args(&sources)
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => NO_JAVAC.to_owned(),
            _ => format!("unet: running {javac}: {e}"),
        })?;
    if !output.status.success() {
        // The applets are part of this repository: a compile error is a bug to fix.
        return Err(format!(
            "unet: compiling applets/unet/*.java with {javac} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        for line in e.lines() {
            println!("cargo::error={line}");
        }
    }
}
