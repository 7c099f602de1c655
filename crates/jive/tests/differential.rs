//! Differential test against HotSpot: every static method of the `Arith`
//! applet runs in jive and in `java` (through `applets/harness/Harness.java`,
//! which calls the same methods with the same arguments by reflection), on
//! edge-case and pseudo-random arguments, and the results must agree:
//! values, and traps against the Java exception of the same kind.
//!
//! Both builds of the applet are compared (`--release 8` and default).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{RELEASES, classes};
use jive::subset::FieldType;
use jive::{Applet, InvokeError, Limits, Natives, TrapKind};

const EDGES: &[i32] = &[
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
const SIZED: &[&str] = &["intArray", "arrayLen"];
/// Methods that recurse on their argument without masking it.
const UNBOUNDED: &[&str] = &["fib", "ack"];

fn java_name(k: &TrapKind) -> String {
    match k {
        TrapKind::ArrayIndexOutOfBounds { .. } => "!ArrayIndexOutOfBoundsException".into(),
        TrapKind::NullPointer => "!NullPointerException".into(),
        TrapKind::DivisionByZero => "!ArithmeticException".into(),
        TrapKind::NegativeArraySize(_) => "!NegativeArraySizeException".into(),
        TrapKind::CallDepthExceeded(_) => "!StackOverflowError".into(),
        other => format!("!jive-only trap {other}"),
    }
}

fn cases(applet: &Applet) -> Vec<(String, Vec<i32>)> {
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

#[test]
fn arith_agrees_with_hotspot() {
    let Some(harness) = classes("harness") else {
        return;
    };
    let java = std::env::var("JAVA").unwrap_or_else(|_| "java".into());
    if Command::new(&java)
        .arg("-version")
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        eprintln!(
            "skipped: `{java}` not found, so there is no HotSpot to compare with (install a JDK)"
        );
        return;
    }
    for r in RELEASES {
        let dir = classes(r).unwrap();
        let bytes = std::fs::read(dir.join("Arith.class")).unwrap();
        let mut applet = Applet::load(&bytes, &Natives::new(), Limits::default()).unwrap();
        let cases = cases(&applet);
        assert!(cases.len() > 5000, "{} cases", cases.len());

        let mut input = String::new();
        for (m, args) in &cases {
            input.push_str("Arith ");
            input.push_str(m);
            for a in args {
                input.push_str(&format!(" {a}"));
            }
            input.push('\n');
        }
        // The applet's own build first on the class path, so HotSpot runs the same class file.
        let cp = format!("{}:{}", dir.display(), harness.display());
        let mut child = Command::new(&java)
            .args(["-Xss16m", "-cp", &cp, "Harness"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start java");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "the harness failed");
        let hotspot = String::from_utf8(out.stdout).unwrap();
        let hotspot: Vec<&str> = hotspot.lines().collect();
        assert_eq!(hotspot.len(), cases.len());

        // Metering off runs the unmetered forms of the charging ops (calls,
        // switches, back edges); both modes must give HotSpot's results.
        let unmetered = Limits {
            fuel: None,
            ..Limits::default()
        };
        let mut applet_off = Applet::load(&bytes, &Natives::new(), unmetered).unwrap();
        let mut mismatches = Vec::new();
        for ((m, args), expected) in cases.iter().zip(&hotspot) {
            for (mode, a) in [("metered", &mut applet), ("unmetered", &mut applet_off)] {
                let got = match a.invoke(m, args) {
                    Ok(o) => o.value.map_or("void".to_string(), |v| v.to_string()),
                    Err(InvokeError::Trap(t)) => java_name(&t.kind),
                    Err(e) => format!("!{e}"),
                };
                if got != *expected {
                    mismatches.push(format!(
                        "{r} Arith.{m}{args:?} ({mode}): jive {got}, HotSpot {expected}"
                    ));
                }
            }
        }
        assert!(
            mismatches.is_empty(),
            "{} mismatches:\n{}",
            mismatches.len(),
            mismatches.join("\n")
        );
        eprintln!("{r}: {} calls agree with HotSpot", cases.len());
    }
}
