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
