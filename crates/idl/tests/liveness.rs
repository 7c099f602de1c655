//! A side of a shared-memory channel whose peer process dies without
//! closing the channel (`SIGKILL`) notices it and returns
//! [`CallError::PeerDied`] instead of waiting for ever: the server when its
//! client dies between calls and in the middle of a call, the client when
//! its server dies in the middle of a call.
//!
//! The peer is this test executable re-run (`std::env::current_exe()`) with
//! `--exact child_peer --nocapture --test-threads=1`, so that it runs just
//! the test `child_peer`, with `IDL_LIVE_CHILD=<role>` and the channel's
//! descriptor number in `IDL_LIVE_FD`. In a normal run `child_peer` finds
//! no role and returns at once.

use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use idl::rt::shm::{self, ClientEnd, LIVENESS_CHECK, ServerEnd};
use idl::rt::{CallError, ServerTransport, Status};

mod support;

use support::{FD, KEY_HOLD, ROLE, config, within};

/// Starts this executable as the peer `role` on the channel `fd`.
fn spawn(role: &str, fd: &std::os::fd::OwnedFd) -> (Child, BufReader<ChildStdout>) {
    let inherit = shm::inheritable(fd).expect("inheritable duplicate");
    let mut child = Command::new(std::env::current_exe().expect("test executable"))
        .args(["--exact", "child_peer", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(FD, inherit.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the peer");
    drop(inherit);
    let out = BufReader::new(child.stdout.take().expect("piped stdout"));
    (child, out)
}

/// Reads the child's stdout until a line holding `child: <what>`.
fn expect_line(out: &mut BufReader<ChildStdout>, what: &str) {
    let want = format!("child: {what}");
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).expect("read the child's stdout");
        assert!(n > 0, "the child ended before printing {want:?}");
        if line.contains(&want) {
            return;
        }
    }
}

/// Kills the child with `SIGKILL` and reaps it, so that its process is
/// surely gone.
fn kill(mut child: Child) {
    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");
}

#[test]
fn the_server_notices_a_client_killed_between_calls() {
    let mut server = ServerEnd::create(&config()).expect("channel");
    let (child, mut out) = spawn("idle-client", server.fd());
    // The child makes one call (answered here), then sleeps.
    let (key, _) = server.wait().expect("the child's first call");
    assert_eq!(key, 1);
    server.reply(Status::Ok, 0, 0..0).expect("reply");
    expect_line(&mut out, "called");
    let killed = Instant::now();
    kill(child);
    let (r, _) = within(move || server.wait().map(|_| ()));
    let after = killed.elapsed();
    assert!(matches!(r, Err(CallError::PeerDied)), "{r:?}");
    eprintln!(
        "between calls: noticed {} ms after the kill (check every {} ms)",
        after.as_millis(),
        LIVENESS_CHECK.as_millis()
    );
}

#[test]
fn the_server_notices_a_client_killed_mid_call() {
    let mut server = ServerEnd::create(&config()).expect("channel");
    let (child, mut out) = spawn("holding-client", server.fd());
    let (key, _) = server.wait().expect("the child's first call");
    assert_eq!(key, 1);
    server.reply(Status::Ok, 0, 0..0).expect("reply");
    expect_line(&mut out, "called");
    // The child's second call: the server holds it until the child is
    // dead, then replies (the channel is not closed, so the reply posts)
    // and waits for the next request, which never comes.
    let (key, _) = server.wait().expect("the child's held call");
    assert_eq!(key, KEY_HOLD);
    kill(child);
    server
        .reply(Status::Ok, 0, 0..0)
        .expect("the reply to a dead client still posts");
    let (r, took) = within(move || server.wait().map(|_| ()));
    assert!(matches!(r, Err(CallError::PeerDied)), "{r:?}");
    eprintln!("mid-call: noticed {} ms after the reply", took.as_millis());
}

#[test]
fn a_generated_style_server_loop_ends_with_the_error() {
    // `serve_raw` (as the generated loops do) returns the error rather
    // than ending as it does on a close.
    let mut server = ServerEnd::create(&config()).expect("channel");
    let (child, mut out) = spawn("idle-client", server.fd());
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        server.serve_raw(|key, _, _| {
            let _ = tx.send(key);
            0
        })
    });
    assert_eq!(rx.recv().expect("first call"), 1);
    expect_line(&mut out, "called");
    kill(child);
    let (r, _) = within(move || t.join().expect("server thread"));
    assert!(matches!(r, Err(CallError::PeerDied)), "{r:?}");
}

#[test]
fn the_client_notices_a_server_killed_mid_call() {
    let fd = shm::create(&config()).expect("channel");
    let (child, mut out) = spawn("server", &fd);
    let mut client = ClientEnd::from_fd(fd).expect("client end");
    expect_line(&mut out, "serving");
    assert_eq!(client.call_raw(1, &[5]).expect("answered").len(), 1);
    // The server child takes the next call and never answers it; it is
    // killed while the client waits.
    let waiter =
        std::thread::spawn(move || within(move || client.call_raw(KEY_HOLD, &[]).map(|_| ())));
    expect_line(&mut out, "holding");
    kill(child);
    let (r, _) = waiter.join().expect("client thread");
    assert!(matches!(r, Err(CallError::PeerDied)), "{r:?}");
}

#[test]
fn a_dynamic_client_notices_a_server_killed_mid_call() {
    // The dynamic stubs' generated code makes the whole call; its wait for
    // the reply is the channel's own, with the liveness watch.
    let ops: String = (0..=KEY_HOLD).map(|k| format!("void k{k}(); ")).collect();
    let iface: &'static idl::dynamic::Interface = Box::leak(Box::new(
        idl::dynamic::Interface::load(&format!("interface h {{ {ops}}};"), "h").expect("load"),
    ));
    assert!(
        iface.shm_listing(usize::from(KEY_HOLD)).is_some(),
        "the generated call"
    );
    let fd = shm::create(&config()).expect("channel");
    let (child, mut out) = spawn("server", &fd);
    let mut client = ClientEnd::from_fd(fd).expect("client end");
    expect_line(&mut out, "serving");
    iface
        .client()
        .call(&mut client, 1, &mut [])
        .expect("answered");
    let waiter = std::thread::spawn(move || {
        within(move || {
            iface
                .client()
                .call(&mut client, usize::from(KEY_HOLD), &mut [])
                .map(|_| ())
        })
    });
    expect_line(&mut out, "holding");
    kill(child);
    let (r, _) = waiter.join().expect("client thread");
    assert!(
        matches!(
            r,
            Err(idl::dynamic::CallError::Transport(CallError::PeerDied))
        ),
        "{r:?}"
    );
}

#[test]
fn the_dynamic_server_loop_notices_a_client_killed_between_calls() {
    // The dynamic server's generated loop answers the child's first call,
    // then blocks out of line with the liveness watch.
    let iface: &'static idl::dynamic::Interface = Box::leak(Box::new(
        idl::dynamic::Interface::load("interface h { void k0(); void k1(); };", "h").expect("load"),
    ));
    extern "C" fn nothing(_: *mut u8) {}
    // SAFETY: `nothing` takes the context of a void operation.
    let server = unsafe {
        iface.server(&[(
            "k1",
            idl::dynamic::Handler::new(nothing as *const () as usize, std::ptr::null_mut()),
        )])
    }
    .expect("server");
    let server: &'static idl::dynamic::DynServer<'static> = Box::leak(Box::new(server));
    if cfg!(target_arch = "x86_64") {
        assert!(server.shm_listing().is_some(), "the generated loop");
    }
    let mut end = ServerEnd::create(&config()).expect("channel");
    let (child, mut out) = spawn("idle-client", end.fd());
    let t = std::thread::spawn(move || server.serve(&mut end));
    expect_line(&mut out, "called");
    kill(child);
    let (r, _) = within(move || t.join().expect("server thread"));
    assert!(
        matches!(
            r,
            Err(idl::dynamic::CallError::Transport(CallError::PeerDied))
        ),
        "{r:?}"
    );
}

#[test]
fn a_closed_channel_is_closed_not_dead() {
    // A peer that closes and then exits is reported as closed: the state
    // word says so before the lock is gone.
    let mut server = ServerEnd::create(&config()).expect("channel");
    let (mut child, mut out) = spawn("closer", server.fd());
    expect_line(&mut out, "closed");
    child.wait().expect("the child exits");
    let (r, _) = within(move || server.wait().map(|_| ()));
    assert!(matches!(r, Err(CallError::Closed)), "{r:?}");
}

/// The peer's side, in the child process.
#[test]
fn child_peer() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    // SAFETY: the parent passed this descriptor for this purpose, and
    // nothing else in this process knows its number.
    let fd = unsafe { shm::fd_from_env(FD) }.expect("inherited channel");
    let Err(fd) = support::rust_peer(&role, fd);
    match role.as_str() {
        "closer" => {
            let c = ClientEnd::from_fd(fd).expect("client end");
            c.close();
            println!("child: closed");
            std::process::exit(0);
        }
        other => panic!("unknown role {other}"),
    }
}
