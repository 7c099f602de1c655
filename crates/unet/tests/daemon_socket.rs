//! The daemon's socket and its robustness to its own log: where it binds
//! (any path that fits in `sun_path`, errors naming that path), that two
//! daemons started at once never both claim one socket (a stale one
//! included), and that an event hook that panics (a log whose output is
//! gone) neither stops the daemon serving nor keeps connection slots or
//! endpoints.
//!
//! Each test uses socket paths of its own, under the temporary directory
//! with this process's id in their names.
#![cfg(not(loom))]

use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use unet::client::Client;
use unet::daemon::{self, Event, ServeOptions, Server};
use unet::transport::LoopNet;
use unet::{Addr, Config, Engine};

fn engine_at(addr: &str) -> Engine {
    let net = LoopNet::new();
    Engine::new(Box::new(net.attach(addr.parse().unwrap()).unwrap()))
}

/// A directory of this test's own under the temporary directory, empty.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("unet-sock-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `Info` on a connection of its own: the engine's address, or the
/// reply's status and text if it is not a success.
fn info(path: &Path) -> Result<Addr, (u8, String)> {
    let mut c = UnixStream::connect(path).map_err(|e| (255, e.to_string()))?;
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A refused connection is closed after its reply, maybe before the
    // request is written: the reply is read all the same.
    let _ = c.write_all(&[1, 0, 0, 0, 1]);
    let mut reply = Vec::new();
    let mut len = [0u8; 4];
    c.read_exact(&mut len)
        .map_err(|e| (255, format!("no reply: {e}")))?;
    reply.resize(u32::from_le_bytes(len) as usize, 0);
    c.read_exact(&mut reply)
        .map_err(|e| (255, format!("short reply: {e}")))?;
    if reply[0] != 0 {
        return Err((reply[0], String::from_utf8_lossy(&reply[1..]).into_owned()));
    }
    let b = &reply[3..9];
    Ok(Addr::new(
        std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]),
        u16::from_le_bytes([b[4], b[5]]),
    ))
}

fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A hook that panics at every event, as `println!` did in `fastpath
/// engine` with its standard output gone: every client is still served,
/// a closed connection's slot and endpoints are given back (more
/// connections in turn than a process may hold at once are served), and
/// the accepting thread survives a refusal's event.
#[test]
fn a_panicking_event_hook_neither_stops_serving_nor_keeps_slots() {
    let dir = scratch("hook");
    let path = dir.join("e.sock");
    let engine = engine_at("10.0.0.1:7000");
    engine.start(1).unwrap();
    let events = Arc::new(AtomicU64::new(0));
    let n = events.clone();
    let server = daemon::serve_with(
        engine.clone(),
        &path,
        ServeOptions {
            on_event: Some(Arc::new(move |_: &Event| {
                n.fetch_add(1, Ordering::Relaxed);
                panic!("failed printing to stdout: Broken pipe (os error 32)")
            })),
            ..ServeOptions::default()
        },
    )
    .unwrap();
    let per_peer = ServeOptions::default().max_connections_per_peer;
    // Connections in turn, more than a process may hold at once, each
    // with an endpoint, closed before the next.
    for i in 0..per_peer + 4 {
        assert_eq!(info(&path), Ok(engine.local()), "connection {i}");
        let client = Client::connect(&path).unwrap();
        let ep = client.create_endpoint(Config::default(), None).unwrap();
        let id = ep.id();
        assert!(engine.port(id).is_some());
        drop(ep);
        drop(client);
        eventually("the connection's endpoint reclaimed", || {
            engine.port(id).is_none()
        });
        eventually("the connection's slot given back", || {
            server.connections() == 0
        });
    }
    // As many at once as a process may hold, and one more: refused, with
    // its event's hook panicking on the accepting thread.
    let held: Vec<UnixStream> = (0..per_peer)
        .map(|_| {
            let c = UnixStream::connect(&path).unwrap();
            (&c).write_all(&[1, 0, 0, 0, 1]).unwrap();
            let mut reply = [0u8; 13];
            (&c).read_exact(&mut reply).unwrap();
            assert_eq!(reply[4], 0);
            c
        })
        .collect();
    let refused = info(&path).unwrap_err();
    assert_eq!(refused.0, 1, "{refused:?}");
    assert!(refused.1.contains("holds 8 connections"), "{refused:?}");
    drop(held);
    eventually("every slot given back", || server.connections() == 0);
    // The accepting thread is still there.
    assert_eq!(info(&path), Ok(engine.local()));
    server.shutdown();
    engine.stop();
    assert!(events.load(Ordering::Relaxed) > 3 * per_peer as u64);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Daemons started together on one path, in rounds, on a free path and on
/// a stale socket (a daemon that died without removing it): exactly one
/// serves it, the others are refused as for a live socket, and the
/// socket answers with the winner's engine. (The daemon once checked the
/// path and then renamed its socket over it: a rename that came late
/// replaced the other daemon's live socket.)
#[test]
fn daemons_started_together_never_share_a_socket() {
    const DAEMONS: usize = 4;
    let dir = scratch("race");
    for round in 0..24 {
        let path = dir.join(format!("r{round}.sock"));
        if round % 2 == 1 {
            drop(UnixListener::bind(&path).unwrap());
            assert!(UnixStream::connect(&path).is_err(), "stale");
        }
        let barrier = Arc::new(Barrier::new(DAEMONS));
        let results: Vec<(Addr, io::Result<Server>)> = std::thread::scope(|s| {
            let starts: Vec<_> = (0..DAEMONS)
                .map(|i| {
                    let (barrier, path) = (barrier.clone(), &path);
                    s.spawn(move || {
                        let engine = engine_at(&format!("10.0.0.{}:7000", i + 1));
                        let local = engine.local();
                        barrier.wait();
                        (local, daemon::serve(engine, path))
                    })
                })
                .collect();
            starts.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mut winners = Vec::new();
        for (addr, r) in &results {
            match r {
                Ok(_) => winners.push(*addr),
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "round {round}: {e}");
                    assert!(
                        e.to_string().contains("already serving"),
                        "round {round}: {e}"
                    );
                }
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: {winners:?}");
        assert_eq!(info(&path), Ok(winners[0]), "round {round}");
        drop(results);
        assert!(
            !path.exists(),
            "round {round}: the winner removed its socket"
        );
    }
    // No temporary names left behind.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A path `len` bytes long in `dir` whose file name has `name` bytes:
/// `dir` padded with a subdirectory to fit.
fn path_of(dir: &Path, len: usize, name: usize) -> PathBuf {
    let base = dir.as_os_str().len() + 1;
    let pad = len - base - name - 1;
    assert!(pad >= 1, "the scratch directory's path is too long");
    let sub = dir.join("d".repeat(pad));
    std::fs::create_dir_all(&sub).unwrap();
    let p = sub.join("s".repeat(name));
    assert_eq!(p.as_os_str().len(), len);
    p
}

/// Every path that fits in `sun_path` (107 bytes and its NUL) is served,
/// whether or not a temporary name beside it would fit, replacing a stale
/// socket and refusing beside a live one; a longer one is refused naming
/// it. (The daemon once bound `<path>.<pid>.tmp` first, and refused paths
/// of 97 to 107 bytes.)
#[test]
fn every_path_that_fits_in_sun_path_is_served() {
    let dir = scratch("long");
    let engine = engine_at("10.0.0.1:7000");
    engine.start(1).unwrap();
    for (len, name) in [(97, 8), (100, 30), (104, 1), (107, 1), (107, 9), (107, 40)] {
        let path = path_of(&dir, len, name);
        let what = format!("{len} bytes, a name of {name}");
        // Twice: on a free path, and on the stale socket of the first.
        for stale in [false, true] {
            if stale {
                drop(UnixListener::bind(&path).unwrap());
            }
            let server = daemon::serve(engine.clone(), &path)
                .unwrap_or_else(|e| panic!("{what}, stale {stale}: {e}"));
            let mode = std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(&path).unwrap().permissions(),
            );
            assert_eq!(mode & 0o777, 0o600, "{what}");
            assert_eq!(Client::connect(&path).unwrap().local(), engine.local());
            let e = daemon::serve(engine.clone(), &path).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{what}: {e}");
            server.shutdown();
            assert!(!path.exists(), "{what}");
        }
        // Nothing left beside it.
        let parent = path.parent().unwrap();
        assert_eq!(std::fs::read_dir(parent).unwrap().count(), 0, "{what}");
    }
    let too_long = path_of(&dir, 108, 1);
    let e = daemon::serve(engine.clone(), &too_long).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let msg = e.to_string();
    assert!(
        msg.starts_with(&too_long.display().to_string()) && msg.contains("107"),
        "{msg}"
    );
    engine.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// What cannot be bound is reported against the path asked for, never a
/// temporary name of the daemon's.
#[test]
fn errors_name_the_path_asked_for() {
    let engine = engine_at("10.0.0.1:7000");
    let missing = std::env::temp_dir()
        .join(format!("unet-sock-missing-{}", std::process::id()))
        .join("e.sock");
    let e = daemon::serve(engine.clone(), &missing).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&missing.display().to_string()),
        "names the path: {msg}"
    );
    assert!(
        !msg.contains(".unet-") && !msg.contains(".tmp"),
        "names no temporary file: {msg}"
    );
    // In place too (no room for a temporary name).
    let dir = scratch("missing");
    let near = path_of(&dir, 107, 1);
    std::fs::remove_dir(near.parent().unwrap()).unwrap();
    let e = daemon::serve(engine, &near).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&near.display().to_string()), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}
