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

use common::{RELEASES, arith_cases, classes};
use jive::{Applet, InvokeError, Limits, Natives, TrapKind};

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
        let cases = arith_cases(&applet);
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
