//! What the command-line tests share: running the built `fastpath`.

use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `fastpath` with `args` and an empty standard input: whether it
/// succeeded, its standard output and its standard error.
#[allow(
    dead_code,
    reason = "a test giving every run an input uses `fastpath_with_input`"
)]
pub fn fastpath(args: &[&str]) -> (bool, String, String) {
    fastpath_with_input(args, [])
}

/// Runs `fastpath` with `args` and `input` on its standard input: its
/// exit status (`None` if a signal ended it), its standard output and its
/// standard error.
#[allow(
    dead_code,
    reason = "not every command-line test gives fastpath an input"
)]
pub fn fastpath_input(args: &[&str], input: impl AsRef<[u8]>) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fastpath"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs fastpath");
    // A command that refuses its arguments exits before it reads its
    // input: the pipe's end is then gone, which is no failure here.
    match child.stdin.take().unwrap().write_all(input.as_ref()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.unwrap(),
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// [`fastpath_input`], with whether it succeeded for its exit status.
#[allow(
    dead_code,
    reason = "not every command-line test gives fastpath an input"
)]
pub fn fastpath_with_input(args: &[&str], input: impl AsRef<[u8]>) -> (bool, String, String) {
    let (code, out, err) = fastpath_input(args, input);
    (code == Some(0), out, err)
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
    let (plain, _, _) = fastpath_input(args, []);
    let (json, out, err) = fastpath_input(&[args, &["--json"]].concat(), []);
    assert!(plain != Some(0), "{args:?} succeeded");
    assert_eq!(json, plain, "{args:?} --json");
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
