//! `fastpath engine`, the daemon, as a process: its log never stops it
//! serving, says why a client was refused, and its socket has the mode
//! asked for.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The daemon's process, killed (by its pid) if a test ends without
/// stopping it.
struct Daemon(Child);

impl Daemon {
    /// `fastpath engine --socket path` with `args`, its standard output
    /// and error piped, once its socket answers.
    fn start(path: &Path, args: &[&str]) -> Daemon {
        let _ = std::fs::remove_file(path);
        let mut daemon = Daemon(
            Command::new(env!("CARGO_BIN_EXE_fastpath"))
                .args(["engine", "--socket"])
                .arg(path)
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("runs fastpath engine"),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while UnixStream::connect(path).is_err() {
            if let Some(status) = daemon.0.try_wait().unwrap() {
                panic!(
                    "the daemon exited ({status}) before serving: {}",
                    daemon.stderr()
                );
            }
            assert!(Instant::now() < deadline, "the daemon never served");
            std::thread::sleep(Duration::from_millis(20));
        }
        daemon
    }

    /// Stops it with SIGTERM; its standard error, once it exited with
    /// success.
    fn stop(mut self) -> String {
        // SAFETY: kill(2) with the pid of the child this test started and
        // has not yet waited for.
        let r = unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(r, 0);
        let err = self.stderr();
        let status = self.0.wait().unwrap();
        assert!(status.success(), "{status}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        err
    }

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
    let mut daemon = Daemon::start(&path, &[]);
    // The only reader of its standard output goes away.
    drop(daemon.0.stdout.take());
    served_in_turn(&path, 10);
    let err = daemon.stop();
    assert!(
        err.contains("log lines could not be written to standard output"),
        "{err}"
    );
    assert!(!path.exists(), "the daemon removed its socket");
}

/// `n` connections in turn, each served `Info`, within 10 s each.
fn served_in_turn(path: &Path, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..n {
        // A connection's slot is given back when its thread sees the end
        // of the last: until then one over the process's limit is
        // refused, and asked again.
        let (status, body) = loop {
            let r = info(path).unwrap_or_else(|e| panic!("connection {i}: {e}"));
            let refused = r.0 == 1 && String::from_utf8_lossy(&r.1).contains("holds");
            if !refused || Instant::now() > deadline {
                break r;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(
            status,
            0,
            "connection {i}: {}",
            String::from_utf8_lossy(&body)
        );
        assert_eq!(&body[2..8], &[10, 0, 0, 1, 0x58, 0x1b], "10.0.0.1:7000");
    }
}

/// The daemon with its standard output a pipe no one reads, left open:
/// once the pipe is full every write of the log waits. 3,000 connections
/// in turn, two lines each, several times what the pipe and the log's
/// queue hold, are all served, and the daemon stops on SIGTERM within
/// the log's drain, saying how many lines it lost. (Written from the
/// serving threads, the log held the 800th or so connection's thread
/// before it served, its client waiting for ever.)
#[test]
fn the_engine_serves_with_its_standard_output_never_read() {
    let path = socket_path("stdout-full");
    let mut daemon = Daemon::start(&path, &[]);
    // Held open, never read.
    let _unread = daemon.0.stdout.take();
    served_in_turn(&path, 3_000);
    let t = Instant::now();
    let err = daemon.stop();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let lost: u64 = err
        .strip_prefix("fastpath engine: ")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of lost lines: {err}"));
    // 6,000 lines, of which the pipe (64 KiB) takes about 800 and the
    // queue 4,096.
    assert!(lost >= 1_000, "{lost} lost: {err}");
    assert!(!path.exists(), "the daemon removed its socket");
}

/// `--mode 660`: the socket has that mode, and the log names each client
/// with its user and says which limit turned one away (it once said "too
/// many connections" whatever the limit).
#[test]
fn the_socket_has_the_mode_asked_and_the_log_says_why_a_client_was_refused() {
    let path = socket_path("mode");
    let mut daemon = Daemon::start(&path, &["--mode", "660"]);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o660, "{mode:o}");
    let lines = BufReader::new(daemon.0.stdout.take().unwrap());
    // Eight connections, a process's share, held; the ninth refused.
    let held: Vec<UnixStream> = (0..8)
        .map(|i| {
            let c = UnixStream::connect(&path).unwrap();
            (&c).write_all(&[1, 0, 0, 0, 1]).unwrap();
            let mut reply = [0u8; 13];
            (&c).read_exact(&mut reply).unwrap();
            assert_eq!(reply[4], 0, "connection {i} served");
            c
        })
        .collect();
    let (status, body) = info(&path).unwrap();
    let why = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(
        (status, why.as_str()),
        (1, "this process holds 8 connections, the limit per process")
    );
    drop(held);
    let err = daemon.stop();
    let log: Vec<String> = lines.lines().map(Result::unwrap).collect();
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    let uid = unsafe { libc::geteuid() };
    let pid = std::process::id();
    assert!(
        log[0].contains(&format!(
            "serving endpoints at {} (mode 660,",
            path.display()
        )),
        "{log:?}"
    );
    let who = format!("process {pid} (user {uid})");
    assert!(log.contains(&format!("connection 1: {who}")), "{log:?}");
    assert!(
        log.contains(&format!("refused a connection from {who}: {why}")),
        "{log:?} {err}"
    );
}

/// A mode that is not octal, has more than permission bits, or would keep
/// the daemon's own user out is refused before anything is made.
#[test]
fn a_mode_the_daemon_cannot_serve_is_refused() {
    let path = socket_path("bad-mode");
    for (mode, says) in [
        ("8", "not an octal mode"),
        ("1777", "permission bits only"),
        ("066", "600 at least"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_fastpath"))
            .args(["engine", "--mode", mode, "--socket"])
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{mode}: {err}");
        assert!(err.contains(says), "{mode}: {err}");
        assert!(!path.exists(), "{mode}");
    }
}
