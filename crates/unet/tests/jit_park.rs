//! An engine thread that ran an applet on the JIT and then sits idle does
//! not hold up the freeing of code retired meanwhile: it flags itself out
//! of jive's shared code cache (`jive::jit::park`) when it starts to
//! sleep. (Its own binary: the cache is shared by the whole process, and
//! another test's threads would hold it up.)
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use unet::transport::LoopNet;
use unet::{Config, Engine};

#[test]
fn an_idle_engine_thread_does_not_hold_up_retired_code() {
    if !jive::jit::available() {
        eprintln!("no JIT on this host");
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let net = LoopNet::new();
    let attach = |at: &str| Engine::new(Box::new(net.attach(at.parse().unwrap()).unwrap()));
    let (ea, eb) = (attach("10.0.0.1:7000"), attach("10.0.0.2:7000"));
    let mut a = ea.create_endpoint(Config::default(), None).unwrap();
    let mut b = eb
        .create_endpoint(Config::default(), Some(unet::applets::STANDARD))
        .unwrap();
    let ab = a.open_channel(eb.local(), b.id()).unwrap();
    b.open_channel(ea.local(), a.id()).unwrap();
    // b's engine thread takes the frame from the transport and runs the
    // applet's doRx on the JIT; this thread never receives on b.
    eb.start(1).unwrap();
    a.send(ab, b"to the applet").unwrap();
    let start = Instant::now();
    while b.counts().rx_delivered == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            b.counts()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // The engine thread idles; the applet's code is retired.
    std::thread::sleep(Duration::from_millis(50));
    eb.set_applet(b.id(), None).unwrap();
    // This thread may have run the applet's constructor on the JIT: it parks.
    nothing_pending_soon("the idle engine thread");
    eb.stop();
}

/// A daemon's connection thread that installed an applet (whose
/// constructor may run on the JIT) and then waits for an idle client's
/// next request does not hold up the freeing of code retired meanwhile:
/// it flags itself out after each request.
#[test]
fn an_idle_clients_connection_does_not_hold_up_retired_code() {
    if !jive::jit::available() {
        eprintln!("no JIT on this host");
        return;
    }
    // One test at a time in this binary: the cache is the process's.
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let net = LoopNet::new();
    let engine = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    let path = std::env::temp_dir().join(format!("unet-jit-park-{}.sock", std::process::id()));
    let server = unet::daemon::serve(engine.clone(), &path).unwrap();
    let client = unet::client::Client::connect(&path).unwrap();
    // Installed by the connection's thread, which then waits.
    let _held = client
        .create_endpoint(Config::default(), Some(unet::applets::STANDARD))
        .unwrap();
    // Code retired by this thread: another applet's, installed and removed.
    let mut other = engine
        .create_endpoint(Config::default(), Some(unet::applets::BREAKDOWN))
        .unwrap();
    let peer = other.open_channel(engine.local(), other.id()).unwrap();
    other.send(peer, b"run it once").unwrap();
    engine.set_applet(other.id(), None).unwrap();
    nothing_pending_soon("the idle client's connection");
    drop(client);
    server.shutdown();
}

/// Parks this thread, then waits up to 5 s for the shared code cache to
/// hold no retired code, failing with `holder` named if it still does.
fn nothing_pending_soon(holder: &str) {
    jive::jit::park();
    let start = Instant::now();
    loop {
        let s = jive::jit::cache_stats();
        if s.bytes_pending == 0 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "retired code still waits for {holder}: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
