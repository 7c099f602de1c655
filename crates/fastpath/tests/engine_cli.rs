//! `fastpath engine`, the daemon, as a process: its log never stops it
//! serving.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The daemon's process, killed (by its pid) if a test ends without
/// stopping it.
struct Daemon(Child);

impl Daemon {
    /// All the daemon writes on standard error, to its end (read once).
    fn stderr(&mut self) -> String {
        let mut err = String::new();
        self.0
            .stderr
            .take()
            .expect("standard error read once")
            .read_to_string(&mut err)
            .unwrap();
        err
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn socket_path(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("fastpath-engine-{tag}-{}.sock", std::process::id()))
}

/// `Info` (frame `01 00 00 00 01`) on a connection of its own: the reply's
/// status and body, or why there is none.
fn info(path: &Path) -> Result<(u8, Vec<u8>), String> {
    let mut c = UnixStream::connect(path).map_err(|e| format!("connect: {e}"))?;
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A refused connection is closed after its reply, maybe before the
    // request is written: the reply is read all the same.
    let _ = c.write_all(&[1, 0, 0, 0, 1]);
    let mut len = [0u8; 4];
    c.read_exact(&mut len)
        .map_err(|e| format!("no reply: {e}"))?;
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    c.read_exact(&mut body)
        .map_err(|e| format!("short reply: {e}"))?;
    Ok((body[0], body[1..].to_vec()))
}

/// The daemon with its standard output a pipe whose reader has gone, as
/// under `fastpath engine | head -1`: every line it logs fails with
/// `EPIPE`. It serves ten connections in turn (more than the eight a
/// process may hold at once, so a slot kept by a connection would show),
/// stops on SIGTERM with success, and says on standard error how many
/// lines it lost. (Its log once used `println!`, which panicked: every
/// connection's thread before it read a request, the accepting thread on
/// a refusal, and the main thread at SIGTERM, exit 101.)
#[test]
fn the_engine_serves_with_its_standard_output_gone() {
    let path = socket_path("stdout");
    let _ = std::fs::remove_file(&path);
    let mut daemon = Daemon(
        Command::new(env!("CARGO_BIN_EXE_fastpath"))
            .args(["engine", "--socket"])
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runs fastpath engine"),
    );
    // The only reader of its standard output goes away.
    drop(daemon.0.stdout.take());
    let deadline = Instant::now() + Duration::from_secs(60);
    while UnixStream::connect(&path).is_err() {
        if let Some(status) = daemon.0.try_wait().unwrap() {
            panic!(
                "the daemon exited ({status}) before serving: {}",
                daemon.stderr()
            );
        }
        assert!(Instant::now() < deadline, "the daemon never served");
        std::thread::sleep(Duration::from_millis(20));
    }
    for i in 0..10 {
        // A connection's slot is given back when its thread sees the end
        // of the last: until then one over the process's limit is
        // refused, and asked again.
        let (status, body) = loop {
            let r = info(&path).unwrap_or_else(|e| panic!("connection {i}: {e}"));
            let refused = r.0 == 1 && String::from_utf8_lossy(&r.1).contains("holds");
            if !refused || Instant::now() > deadline {
                break r;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(
            status,
            0,
            "connection {i}: {}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(&body[2..8], &[10, 0, 0, 1, 0x58, 0x1b], "10.0.0.1:7000");
    }
    // SAFETY: kill(2) with the pid of the child this test started and
    // has not yet waited for.
    let r = unsafe { libc::kill(daemon.0.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(r, 0);
    let err = daemon.stderr();
    let status = daemon.0.wait().unwrap();
    assert!(status.success(), "{status}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("log lines could not be written to standard output"),
        "{err}"
    );
    assert!(!path.exists(), "the daemon removed its socket");
}
