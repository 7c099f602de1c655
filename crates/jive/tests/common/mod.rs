//! Helpers shared by jive's integration tests: where the compiled applets are.
#![allow(dead_code)]

use std::path::PathBuf;

/// The message printed by tests that need `javac`'s output when it is missing.
pub const SKIP_JAVAC: &str =
    "skipped: javac not found (install a JDK, e.g. apt-get install openjdk-17-jdk-headless)";

/// The two builds of the applets.
pub const RELEASES: [&str; 2] = ["release8", "default"];

/// The directory of one build (`"release8"`, `"default"` or `"harness"`),
/// or `None` (after printing why) if javac was missing at build time.
pub fn classes(release: &str) -> Option<PathBuf> {
    match jive::APPLET_CLASSES {
        Some(d) => Some(PathBuf::from(d).join(release)),
        None => {
            eprintln!("{SKIP_JAVAC}");
            None
        }
    }
}

/// The bytes of `Name.class` in a build.
pub fn class_bytes(release: &str, name: &str) -> Option<Vec<u8>> {
    let p = classes(release)?.join(format!("{name}.class"));
    Some(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}
