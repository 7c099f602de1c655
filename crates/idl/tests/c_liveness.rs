//! Liveness across languages: a C side of a shared-memory channel and a
//! Rust side whose peer process dies without closing the channel
//! (`SIGKILL`) notice it within a bounded time, whichever language each
//! side is written in (docs/idl.md, "Liveness"):
//!
//! | waiting side | killed peer | when |
//! |---|---|---|
//! | Rust server | C client | between calls, mid-call |
//! | Rust client | C server | mid-call |
//! | C server | Rust client | between calls, mid-call |
//! | C client | Rust server | mid-call |
//!
//! and, with both runtimes, a server that replies and closes the channel
//! at once leaves its last reply for the client (C server and Rust client,
//! Rust server and C client).
//!
//! A Rust side gets [`CallError::PeerDied`], a C side `IDL_E_PEER_DIED`
//! (261). The C side is `tests/c/live_test.c` on the C run time, compiled
//! with gcc at test time (without gcc the tests print why and pass, unless
//! `IDL_REQUIRE_GCC=1`); a Rust peer that must be killed is this test
//! executable re-run with `--exact child_peer` and `IDL_LIVE_CHILD=<role>`,
//! as in `tests/liveness.rs`.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use idl::rt::shm::{self, ClientEnd, Config, LIVENESS_CHECK, ServerEnd};
use idl::rt::{CallError, ServerTransport, Status};

mod support;

use support::{BOUND, FD, KEY_HOLD, ROLE, config, have_gcc, within};
/// `IDL_E_PEER_DIED` of `idl_rt.h`.
const IDL_E_PEER_DIED: i32 = 261;
/// `tests/c/live_test.c` with the C run time, built once per test run into
/// cargo's temp directory for integration tests.
fn live_test() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| support::build_c_test("live_test"))
}

/// A child process and its stdout lines, read on a thread so that a wait
/// for a line can time out.
struct Peer {
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
}

impl Peer {
    /// Spawns `cmd`, which inherits `inherit` (closed here once spawned).
    fn start(mut cmd: Command, inherit: OwnedFd) -> Peer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the peer");
        drop(inherit);
        let out = BufReader::new(child.stdout.take().expect("piped stdout"));
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Peer {
            child: Some(child),
            lines,
        }
    }

    /// `live_test MODE FD REST...` on the channel `fd`.
    fn c(mode: &str, fd: &OwnedFd, rest: &[&str]) -> Peer {
        let inherit = shm::inheritable(fd).expect("inheritable duplicate");
        let mut cmd = Command::new(live_test());
        cmd.arg(mode)
            .arg(inherit.as_raw_fd().to_string())
            .args(rest);
        Peer::start(cmd, inherit)
    }

    /// This executable as the Rust peer `role` on the channel `fd`.
    fn rust(role: &str, fd: &OwnedFd) -> Peer {
        let inherit = shm::inheritable(fd).expect("inheritable duplicate");
        let mut cmd = Command::new(std::env::current_exe().expect("test executable"));
        cmd.args(["--exact", "child_peer", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .env(FD, inherit.as_raw_fd().to_string());
        Peer::start(cmd, inherit)
    }

    /// Waits (at most [`BOUND`]) for a line holding `child: <what>` and
    /// returns the rest of it.
    fn expect(&self, what: &str) -> String {
        let want = format!("child: {what}");
        let end = Instant::now() + BOUND;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(at) = line.find(&want) {
                        return line[at + want.len()..].trim().to_string();
                    }
                }
                Err(_) => panic!(
                    "no line {want:?} from the peer within {} s",
                    BOUND.as_secs()
                ),
            }
        }
    }

    /// Writes a line to the peer's stdin (a C server's held call goes on).
    fn release(&mut self) {
        let child = self.child.as_mut().expect("a running peer");
        let stdin = child.stdin.as_mut().expect("piped stdin");
        stdin.write_all(b"go\n").expect("write to the peer");
        stdin.flush().expect("flush the peer's stdin");
    }

    /// `SIGKILL`s the peer and reaps it, so that its process is surely gone.
    fn kill(&mut self) {
        let mut child = self.child.take().expect("a running peer");
        child.kill().expect("SIGKILL the peer");
        child.wait().expect("reap the peer");
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn report(case: &str, took: Duration) {
    eprintln!(
        "{case}: noticed {} ms after the kill (checks every {} ms)",
        took.as_millis(),
        LIVENESS_CHECK.as_millis()
    );
}

#[test]
fn a_rust_server_notices_a_c_client_killed_between_calls() {
    if !have_gcc("a_rust_server_notices_a_c_client_killed_between_calls") {
        return;
    }
    let mut server = ServerEnd::create(&config()).expect("channel");
    let mut peer = Peer::c("client", server.fd(), &["idle"]);
    let (key, _) = server.wait().expect("the C client's first call");
    assert_eq!(key, 1);
    server.reply(Status::Ok, 0, 0..0).expect("reply");
    peer.expect("called");
    peer.kill();
    let (r, took) = within(move || server.wait().map(|_| ()));
    assert!(matches!(r, Err(CallError::PeerDied)), "{r:?}");
    report("Rust server, C client between calls", took);
}

#[test]
fn a_rust_server_notices_a_c_client_killed_mid_call() {
    if !have_gcc("a_rust_server_notices_a_c_client_killed_mid_call") {
        return;
    }
    let mut server = ServerEnd::create(&config()).expect("channel");
    let mut peer = Peer::c("client", server.fd(), &["hold"]);
    let (key, _) = server.wait().expect("the C client's first call");
    assert_eq!(key, 1);
    server.reply(Status::Ok, 0, 0..0).expect("reply");
    peer.expect("called");
    let (key, _) = server.wait().expect("the C client's held call");
    assert_eq!(key, KEY_HOLD);
    peer.kill();
    server
        .reply(Status::Ok, 0, 0..0)
        .expect("the reply to a dead client still posts");
    let (r, took) = within(move || server.wait().map(|_| ()));
    assert!(matches!(r, Err(CallError::PeerDied)), "{r:?}");
    report("Rust server, C client mid-call", took);
}

#[test]
fn a_rust_client_notices_a_c_server_killed_mid_call() {
    if !have_gcc("a_rust_client_notices_a_c_server_killed_mid_call") {
        return;
    }
    let fd = shm::create(&config()).expect("channel");
    let mut peer = Peer::c("server", &fd, &[]);
    let mut client = ClientEnd::from_fd(fd).expect("client end");
    peer.expect("serving");
    assert!(client.call_raw(1, &[]).expect("answered").is_empty());
    let waiter = std::thread::spawn(move || {
        let t = Instant::now();
        let r = client.call_raw(KEY_HOLD, &[]).map(|_| ());
        (r, t)
    });
    peer.expect("holding");
    let killed = Instant::now();
    peer.kill();
    let (r, _) = within(move || waiter.join().expect("client thread"));
    let (r, _) = r;
    assert!(matches!(r, Err(CallError::PeerDied)), "{r:?}");
    report("Rust client, C server mid-call", killed.elapsed());
}

#[test]
fn a_c_server_notices_a_rust_client_killed_between_calls() {
    if !have_gcc("a_c_server_notices_a_rust_client_killed_between_calls") {
        return;
    }
    let fd = shm::create(&config()).expect("channel");
    let server = Peer::c("server", &fd, &[]);
    server.expect("serving");
    let mut client = Peer::rust("idle-client", &fd);
    client.expect("called");
    let killed = Instant::now();
    client.kill();
    let status = server.expect("ended");
    assert_eq!(status, IDL_E_PEER_DIED.to_string(), "the C server's wait");
    report("C server, Rust client between calls", killed.elapsed());
}

#[test]
fn a_c_server_notices_a_rust_client_killed_mid_call() {
    if !have_gcc("a_c_server_notices_a_rust_client_killed_mid_call") {
        return;
    }
    let fd = shm::create(&config()).expect("channel");
    let mut server = Peer::c("server", &fd, &[]);
    server.expect("serving");
    let mut client = Peer::rust("holding-client", &fd);
    client.expect("called");
    server.expect("holding");
    client.kill();
    // The C server replies to the dead client (the channel is not closed,
    // so the reply posts), then waits for the next request.
    let released = Instant::now();
    server.release();
    let status = server.expect("ended");
    assert_eq!(status, IDL_E_PEER_DIED.to_string(), "the C server's wait");
    report("C server, Rust client mid-call", released.elapsed());
}

#[test]
fn a_c_client_notices_a_rust_server_killed_mid_call() {
    if !have_gcc("a_c_client_notices_a_rust_server_killed_mid_call") {
        return;
    }
    let fd = shm::create(&config()).expect("channel");
    let mut server = Peer::rust("server", &fd);
    server.expect("serving");
    let client = Peer::c("client", &fd, &["hold"]);
    client.expect("called");
    server.expect("holding");
    let killed = Instant::now();
    server.kill();
    let status = client.expect("returned");
    assert_eq!(status, IDL_E_PEER_DIED.to_string(), "the C client's call");
    report("C client, Rust server mid-call", killed.elapsed());
}

/// The C run time's waiting policy: a C client whose server takes 20 ms
/// per call polls at most about 10 µs per call before it sleeps, whatever
/// the channel's spin count allows (here the most, 2^20 polls, which the
/// old fixed-count rule spent in full, about 20 ms of CPU per call).
#[test]
fn a_c_client_stops_polling_a_server_that_does_not_answer_soon() {
    if !have_gcc("a_c_client_stops_polling_a_server_that_does_not_answer_soon") {
        return;
    }
    const CALLS: u32 = 20;
    const WORK: Duration = Duration::from_millis(20);
    let mut server = ServerEnd::create(&Config {
        spin: 1 << 20,
        ..config()
    })
    .expect("channel");
    let client = Peer::c("client", server.fd(), &["slow", &CALLS.to_string()]);
    let t = std::thread::spawn(move || {
        for _ in 0..CALLS {
            let (key, _) = server.wait().expect("a call");
            assert_eq!(key, 2);
            std::thread::sleep(WORK);
            server.reply(Status::Ok, 0, 0..0).expect("reply");
        }
        server
    });
    let cpu: u64 = client.expect("cpu").parse().expect("a number of µs");
    drop(t.join().expect("server thread"));
    eprintln!(
        "C client: {} µs of CPU over {CALLS} calls of {} ms each",
        cpu,
        WORK.as_millis()
    );
    // Polling the whole wait would be CALLS * WORK = 400 ms of CPU; the
    // policy's polls are 20 * 10 µs. The bound leaves room for the system
    // calls and a loaded machine's scheduling, and is a quarter of the
    // old rule's cost.
    assert!(
        cpu < 100_000,
        "the C client spent {cpu} µs of CPU waiting: it polled instead of sleeping"
    );
}

/// `IDL_E_CLOSED` of `idl_rt.h`.
const IDL_E_CLOSED: i32 = 256;

/// The channel the close tests use: no polling, so that the client sleeps
/// on the futex and the server's close lands before it reads the state.
fn sleeping() -> Config {
    Config {
        spin: 0,
        ..config()
    }
}

/// The C run time's close keeps a posted reply: a C server that answers
/// one call and closes the channel at once (its process then exits) still
/// answers it; the Rust client's next call finds the channel closed.
#[test]
fn a_c_server_that_closes_right_after_replying_still_answers() {
    if !have_gcc("a_c_server_that_closes_right_after_replying_still_answers") {
        return;
    }
    for round in 0..10u8 {
        let fd = shm::create(&sleeping()).expect("channel");
        let mut peer = Peer::c("server", &fd, &["once"]);
        let mut client = ClientEnd::from_fd(fd).expect("client end");
        let (r, _) = within(move || {
            let first = client.call_raw(5, &[round, 1]).map(<[u8]>::to_vec);
            let second = client.call_raw(5, &[round]).map(|_| ());
            (first, second)
        });
        match r {
            (Ok(rec), Err(CallError::Closed)) => assert_eq!(rec, [round + 5, 1]),
            (first, second) => panic!(
                "round {round}: the reply before the close: {}; the call after it: {}",
                first.map_or_else(|e| e.to_string(), |r| format!("{} bytes", r.len())),
                second.map_or_else(|e| e.to_string(), |()| "answered".into())
            ),
        }
        let status = peer
            .child
            .take()
            .expect("a running peer")
            .wait()
            .expect("the C server exits");
        assert!(status.success(), "the C server: {status}");
    }
}

/// The Rust run time's close keeps a posted reply for a C client: the C
/// client gets the reply of a Rust server that closed right after posting
/// it, and `IDL_E_CLOSED` on its next call.
#[test]
fn a_c_client_gets_the_reply_of_a_rust_server_that_closed_right_after() {
    if !have_gcc("a_c_client_gets_the_reply_of_a_rust_server_that_closed_right_after") {
        return;
    }
    for _ in 0..10 {
        let mut server = ServerEnd::create(&sleeping()).expect("channel");
        let client = Peer::c("client", server.fd(), &["last"]);
        let (key, _) = server.wait().expect("the C client's call");
        assert_eq!(key, 1);
        server.reply(Status::Ok, 0, 0..0).expect("reply");
        drop(server);
        assert_eq!(client.expect("returned"), "0", "the C client's call");
        assert_eq!(
            client.expect("again"),
            IDL_E_CLOSED.to_string(),
            "the C client's call after the close"
        );
    }
}

/// The Rust peer's side, in the child process.
#[test]
fn child_peer() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    // SAFETY: the parent passed this descriptor for this purpose, and
    // nothing else in this process knows its number.
    let fd = unsafe { shm::fd_from_env(FD) }.expect("inherited channel");
    let Err(_) = support::rust_peer(&role, fd);
    panic!("unknown role {role}");
}
