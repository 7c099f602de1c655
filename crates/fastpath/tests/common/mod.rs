//! What the command-line tests share: running the built `fastpath`.

use std::process::Command;

/// Runs `fastpath` with `args`: whether it succeeded, its standard output
/// and its standard error.
pub fn fastpath(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(args)
        .output()
        .expect("runs fastpath");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `fastpath args` with and without `--json`, which must fail with
/// the same exit status: with `--json`, stdout is `--json`'s error object
/// alone, `{"error": {"command", "message"}}`, and stderr still has the
/// message. Returns the command and the message.
#[allow(
    dead_code,
    reason = "not every command-line test checks `--json`'s errors"
)]
pub fn json_error(args: &[&str]) -> (String, String) {
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_fastpath"))
            .args(args)
            .output()
            .expect("runs fastpath")
    };
    let plain = run(args);
    let json = run(&[args, &["--json"]].concat());
    assert!(!plain.status.success(), "{args:?} succeeded");
    assert_eq!(json.status.code(), plain.status.code(), "{args:?} --json");
    let out = String::from_utf8_lossy(&json.stdout);
    let err = String::from_utf8_lossy(&json.stderr);
    let v: serde_json::Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{args:?} --json: stdout is not one JSON object ({e}):\n{out}"));
    let fields = |v: &serde_json::Value| v.as_object().map(|o| o.len());
    assert_eq!((fields(&v), fields(&v["error"])), (Some(1), Some(2)), "{v}");
    let (command, message) = (&v["error"]["command"], &v["error"]["message"]);
    let (Some(command), Some(message)) = (command.as_str(), message.as_str()) else {
        panic!("{args:?} --json: {v}");
    };
    assert!(err.contains(message), "stderr lacks {message:?}:\n{err}");
    (command.to_owned(), message.to_owned())
}
