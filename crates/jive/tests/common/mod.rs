//! Helpers shared by jive's integration tests: where the compiled applets
//! are, and the cases of the differential test of the `Arith` applet (run
//! against HotSpot in `differential.rs`, on both engines in `jit.rs`).
#![allow(dead_code)]

use std::path::PathBuf;

use jive::Applet;
use jive::subset::FieldType;

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

/// Edge-case int arguments of the `Arith` differential test.
pub const EDGES: &[i32] = &[
    0,
    1,
    -1,
    2,
    3,
    7,
    8,
    31,
    32,
    33,
    63,
    100,
    127,
    128,
    255,
    256,
    -128,
    -129,
    32767,
    32768,
    65535,
    -32768,
    1000,
    -1_000_000,
    i32::MAX,
    i32::MIN,
    i32::MAX - 1,
    i32::MIN + 1,
];

/// Methods whose first argument is an array size: kept small so that the
/// comparison is about semantics, not about whose heap is bigger.
pub const SIZED: &[&str] = &["intArray", "arrayLen"];
/// Methods that recurse on their argument without masking it.
pub const UNBOUNDED: &[&str] = &["fib", "ack"];

/// The calls of the `Arith` differential test: every static method but the
/// unbounded recursions, on edge-case and pseudo-random arguments.
pub fn arith_cases(applet: &Applet) -> Vec<(String, Vec<i32>)> {
    let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng as i32
    };
    let mut out = Vec::new();
    for m in &applet.program().info.methods {
        if !m.is_static || m.name.starts_with('<') || UNBOUNDED.contains(&m.name.as_str()) {
            continue;
        }
        assert!(
            m.sig.params.iter().all(|p| matches!(p, FieldType::Prim(_))),
            "{}",
            m.id()
        );
        let dom: Vec<i32> = if SIZED.contains(&m.name.as_str()) {
            vec![-1, 0, 1, 5, 100, i32::MIN]
        } else {
            EDGES.to_vec()
        };
        match m.sig.params.len() {
            0 => out.push((m.name.clone(), vec![])),
            1 => {
                for &a in &dom {
                    out.push((m.name.clone(), vec![a]));
                }
                for _ in 0..40 {
                    let a = if SIZED.contains(&m.name.as_str()) {
                        next() & 255
                    } else {
                        next()
                    };
                    out.push((m.name.clone(), vec![a]));
                }
            }
            2 => {
                for &a in &dom {
                    for &b in EDGES {
                        out.push((m.name.clone(), vec![a, b]));
                    }
                }
                for _ in 0..100 {
                    let a = if SIZED.contains(&m.name.as_str()) {
                        next() & 255
                    } else {
                        next()
                    };
                    out.push((m.name.clone(), vec![a, next()]));
                }
            }
            n => panic!("{} has {n} parameters", m.id()),
        }
    }
    out
}
