//! What the C tests and the round-trip comparison share: finding the
//! static library cargo built for this run, compiling C against it with
//! `cc -std=c11 -Wall -Werror`, and a daemon on a temporary socket.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use unet::daemon::Server;
use unet::transport::LoopNet;

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The header's directory.
pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// The profile directory this test binary was built into (`target/release`):
/// the binary is `<profile>/deps/<name>` for tests, `<profile>/examples/<name>`
/// for examples.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary lives two levels under the target directory")
        .to_path_buf()
}

/// `libunet_capi.a` as cargo built it for this run: the library's
/// `staticlib` crate type is built, as a dependency of the tests, into
/// `<profile>/deps/libunet_capi.a` (`<profile>/libunet_capi.a` is only
/// refreshed by a `cargo build` of the crate itself, so it may be stale).
pub fn staticlib() -> PathBuf {
    let lib = profile_dir().join("deps").join("libunet_capi.a");
    assert!(
        lib.exists(),
        "{} is missing: cargo builds it with the crate (crate-type staticlib)",
        lib.display()
    );
    lib
}

/// Whether `cc` runs; without it a test prints why and returns early, or
/// fails if `UNET_CAPI_REQUIRE_CC=1` (as in CI).
pub fn have_cc(test: &str) -> bool {
    let ok = Command::new("cc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("UNET_CAPI_REQUIRE_CC").as_deref() == Ok("1") {
            panic!("{test}: cc is not installed and UNET_CAPI_REQUIRE_CC=1");
        }
        eprintln!("{test}: skipped: cc is not installed (scripts/install-deps.sh installs gcc)");
    }
    ok
}

/// The system libraries the static library needs (`rustc --print
/// native-static-libs`).
pub const NATIVE_LIBS: &[&str] = &["-lpthread", "-ldl", "-lm", "-lrt", "-lutil", "-lgcc_s"];

/// Compiles and links the C sources `srcs` against the static library
/// into `out`, with `cc -std=c11 -Wall -Werror`; panics with cc's
/// message if it fails.
pub fn compile(srcs: &[&Path], out: &Path) {
    let o = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Werror", "-O2", "-pthread"])
        .arg("-I")
        .arg(include_dir())
        .args(srcs)
        .arg(staticlib())
        .args(NATIVE_LIBS)
        .arg("-o")
        .arg(out)
        .output()
        .expect("running cc");
    assert!(
        o.status.success(),
        "cc failed on {}:\n{}",
        srcs.iter()
            .map(|s| s.display().to_string())
            .collect::<Vec<_>>()
            .join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A scratch directory for one test, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh directory named after `name` and this process.
    pub fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("unet-capi-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("creating a scratch directory");
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An engine on the `loop` transport with `threads` threads, served as a
/// daemon at `socket` (what `fastpath engine --socket PATH` runs).
pub struct Daemon {
    pub engine: unet::Engine,
    server: Option<Server>,
    _net: LoopNet,
}

impl Daemon {
    pub fn start(socket: &Path, threads: usize) -> Daemon {
        let net = LoopNet::new();
        let port = net
            .attach("10.0.0.1:7000".parse().expect("an address"))
            .expect("attaching to the loop network");
        let engine = unet::Engine::new(Box::new(port));
        engine
            .start(threads)
            .expect("starting the engine's threads");
        let server = unet::daemon::serve(engine.clone(), socket).expect("serving the daemon");
        Daemon {
            engine,
            server: Some(server),
            _net: net,
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown();
        }
        self.engine.stop();
    }
}
