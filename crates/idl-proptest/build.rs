//! Draws the random interfaces of the property tests, compiles each with
//! `idl::compile` (the build helper a user's `build.rs` calls), and writes
//! a harness beside each one's stubs.
//!
//! Into `$OUT_DIR` go, per interface `iface_NNN`: `iface_NNN.idl` (the
//! random IDL), `iface_NNN.rs` (what `idl::compile` wrote) and
//! `iface_NNN_harness.rs`; then `cases.rs`, which includes them all as
//! modules of the library and lists them in `CASES`. The fixed interface
//! of the limit tests (`idl/limits.idl`) is compiled the same way.
//!
//! `IDL_PROPTEST_SEED` (decimal or `0x` hex) and `IDL_PROPTEST_IFACES`
//! change the interfaces. A valid IDL that `idl::compile` rejects fails the
//! build with the error and the file's path: that is a bug of the front end
//! (or of the generator, which then must learn the rule).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

#[path = "build/harness.rs"]
mod harness;
#[path = "build/random_idl.rs"]
mod random_idl;
// The tests' generator too; the build script uses only part of it.
#[allow(dead_code)]
#[path = "src/rng.rs"]
mod rng;

const DEFAULT_SEED: u64 = 0x1d14_0000_5eed_0001;
const DEFAULT_IFACES: usize = 40;

fn env_number(name: &str) -> Option<u64> {
    println!("cargo:rerun-if-env-changed={name}");
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => v.replace('_', "").parse(),
    };
    match parsed {
        Ok(n) => Some(n),
        Err(e) => panic!("{name}={v:?} is not a number: {e}"),
    }
}

/// Writes `text` to `path` unless it already holds it, so that a rebuild
/// with the same seed leaves the files (and `rerun-if-changed`) alone.
fn write(path: &Path, text: &str) {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return;
    }
    if let Err(e) = std::fs::write(path, text) {
        panic!("writing {}: {e}", path.display());
    }
}

/// Compiles one IDL file with the build helper; the stubs land in
/// `$OUT_DIR/<stem>.rs`.
fn compile(idl: &Path, text: &str) -> PathBuf {
    match idl::compile(idl) {
        Ok(rs) => rs,
        Err(e) => panic!(
            "idl::compile rejected {}: {e}\n\
             (the generator draws valid IDL only: a front-end bug, or a rule the generator must learn)\n\
             --- {} ---\n{text}",
            idl.display(),
            idl.display()
        ),
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build");
    println!("cargo:rerun-if-changed=src/rng.rs");
    println!("cargo:rerun-if-changed=idl");
    let seed = env_number("IDL_PROPTEST_SEED").unwrap_or(DEFAULT_SEED);
    let count = env_number("IDL_PROPTEST_IFACES").map_or(DEFAULT_IFACES, |n| n as usize);
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));

    let mut cases = String::new();
    let _ = writeln!(
        cases,
        "/// The seed the build drew the interfaces from (`IDL_PROPTEST_SEED`)."
    );
    let _ = writeln!(cases, "pub const BUILD_SEED: u64 = {seed:#x};\n");
    let mut table = String::new();
    for f in random_idl::interfaces(seed, count) {
        let idl_path = out.join(format!("{}.idl", f.name));
        let text = f.render();
        write(&idl_path, &text);
        let stubs = compile(&idl_path, &text);
        let harness_path = out.join(format!("{}_harness.rs", f.name));
        write(&harness_path, &harness::harness(&f));
        let _ = writeln!(
            cases,
            "// The stubs use every item of the generated code but not all of it\n\
             // (record structs, keys, dispatch), hence dead_code.\n\
             #[allow(dead_code, clippy::too_many_arguments)]\n\
             mod {name} {{\n    \
                 mod stubs {{\n        include!({stubs:?});\n    }}\n    \
                 include!({harness:?});\n\
             }}\n",
            name = f.name,
            stubs = stubs.display().to_string(),
            harness = harness_path.display().to_string(),
        );
        let _ = writeln!(
            table,
            "    Case {{ name: {name:?}, idl_path: {path:?}, drive: {name}::drive::<dyn ClientTransport>, serve: {name}::serve::<dyn ServerTransport>, serve_answers: {name}::serve_answers::<dyn ServerTransport>, refusal: {name}::refusal::<dyn ClientTransport> }},",
            name = f.name,
            path = idl_path.display().to_string(),
        );
    }
    let _ = writeln!(cases, "/// Every random interface of this build.");
    let _ = writeln!(cases, "pub static CASES: &[Case] = &[\n{table}];\n");

    let limits = Path::new("idl/limits.idl");
    let text = std::fs::read_to_string(limits).expect("idl/limits.idl is part of the crate");
    let stubs = compile(limits, &text);
    let _ = writeln!(
        cases,
        "/// The fixed interface of the limit tests: `fixed::limits` (`idl/limits.idl`).\n\
         #[allow(dead_code, missing_docs)]\n\
         pub mod fixed {{\n    include!({:?});\n}}",
        stubs.display().to_string()
    );
    write(&out.join("cases.rs"), &cases);
}
