//! What idl's process-level tests share: whether gcc runs, a C test
//! program built with the C run time, and the Rust peer of the liveness
//! tests (`tests/liveness.rs`, `tests/c_liveness.rs`).
//!
//! A liveness test's peer is the test executable re-run with `--exact
//! child_peer` and [`ROLE`] naming what it does on the channel whose
//! descriptor number is in [`FD`]; [`rust_peer`] plays the roles both
//! files use.

// Each test binary uses part of this module.
#![allow(dead_code)]

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use idl::rt::shm::{ClientEnd, Config, ServerEnd};
use idl::rt::{ServerTransport, Status};

/// The environment variable naming a child's role.
pub const ROLE: &str = "IDL_LIVE_CHILD";
/// The environment variable holding the channel's descriptor number.
pub const FD: &str = "IDL_LIVE_FD";
/// The key a client child calls when the call must never be answered by
/// the server before the child is dead (`live_test.c`'s `KEY_HOLD`).
pub const KEY_HOLD: u16 = 9;
/// How long a waiting side may take to notice a dead peer: far above the
/// 50 ms checks, so that a loaded machine does not fail a test; without
/// liveness it would wait for ever.
pub const BOUND: Duration = Duration::from_secs(20);

/// The channel the liveness tests create: a small area.
pub fn config() -> Config {
    Config {
        area: 4096,
        ..Config::default()
    }
}

/// Whether gcc runs; without it a test returns early, or fails if
/// `IDL_REQUIRE_GCC=1`.
pub fn have_gcc(test: &str) -> bool {
    let ok = Command::new("gcc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("IDL_REQUIRE_GCC").is_ok_and(|v| v == "1") {
            panic!("{test}: gcc is not installed and IDL_REQUIRE_GCC=1");
        }
        eprintln!("{test}: skipped: gcc is not installed");
    }
    ok
}

/// Compiles `tests/c/{main}` with the C run time (`c/idl_rt.c`) and the
/// sources `extra` (each one's directory on the include path, for the
/// header generated beside it) into `exe`, warnings as errors: generated
/// and test C must compile cleanly. Panics with gcc's message if it does
/// not compile.
pub fn gcc_with_rt(main: &str, extra: &[PathBuf], exe: &Path) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rt = manifest.join("c");
    let mut gcc = Command::new("gcc");
    gcc.args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-I"])
        .arg(&rt);
    for dir in extra.iter().filter_map(|src| src.parent()) {
        gcc.arg("-I").arg(dir);
    }
    let out = gcc
        .arg(manifest.join("tests/c").join(main))
        .args(extra)
        .arg(rt.join("idl_rt.c"))
        .arg("-o")
        .arg(exe)
        .output()
        .expect("run gcc");
    let with: String = extra
        .iter()
        .map(|src| format!(" with {}", src.display()))
        .collect();
    assert!(
        out.status.success(),
        "gcc failed on {main}{with}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `tests/c/{name}.c` compiled with the C run time ([`gcc_with_rt`]) into
/// cargo's temp directory for integration tests. Each caller keeps the
/// path in a `OnceLock`, so a test binary builds each program once.
pub fn build_c_test(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = dir.join(format!("{name}-{}", std::process::id()));
    gcc_with_rt(&format!("{name}.c"), &[], &exe);
    exe
}

/// Runs `f` on a thread; its result and how long it took, or a panic if it
/// takes over [`BOUND`].
pub fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> (T, Duration) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let t = Instant::now();
        let r = f();
        let _ = tx.send((r, t.elapsed()));
    });
    rx.recv_timeout(BOUND)
        .expect("the waiting side returned within the bound")
}

/// Plays the Rust peer `role` on the channel `fd` until it is killed:
/// - `idle-client`: one call, then sleeps;
/// - `holding-client`: one call, then a call of [`KEY_HOLD`] that the
///   server holds until the child is dead;
/// - `server`: answers every call, and holds a call of [`KEY_HOLD`].
///
/// Prints `child: called`, `child: serving`, `child: holding` as it goes,
/// for the parent to wait on. Returns the fd for a role it does not play.
pub fn rust_peer(role: &str, fd: OwnedFd) -> Result<std::convert::Infallible, OwnedFd> {
    match role {
        "idle-client" | "holding-client" => {
            let mut c = ClientEnd::from_fd(fd).expect("client end");
            c.call_raw(1, &[]).expect("first call");
            println!("child: called");
            if role == "holding-client" {
                // The server holds it until the parent has killed us.
                let _ = c.call_raw(KEY_HOLD, &[]);
            }
            std::thread::sleep(Duration::from_secs(60));
            std::process::exit(0)
        }
        "server" => {
            let mut s = ServerEnd::from_fd(fd).expect("server end");
            println!("child: serving");
            loop {
                let (key, len) = s.wait().expect("a request");
                if key == KEY_HOLD {
                    println!("child: holding");
                    std::thread::sleep(Duration::from_secs(60));
                }
                s.reply(Status::Ok, len, 0..0).expect("reply");
            }
        }
        _ => Err(fd),
    }
}
