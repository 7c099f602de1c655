//! Installing a filter cannot stall or crash the engine: a filter is
//! compiled before the engine-wide lock is taken, so a huge one holds up
//! no other client's endpoint or channel; and a filter past dpf's limits
//! (64 KiB, nesting 64, 4,096 primitives, the optimizer's budget of
//! work) is an error reply from the daemon, which stays up and keeps
//! serving.
#![cfg(not(loom))]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use unet::client::Client;
use unet::daemon;
use unet::transport::LoopNet;
use unet::{Config, Engine};

fn engine() -> Engine {
    let net = LoopNet::new();
    Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ))
}

/// `n` alternatives `udp dst port P`, from port `first` on: about 21
/// bytes each, so 3,000 fill most of the 64 KiB limit.
fn alternatives(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|p| format!("udp dst port {p}"))
        .collect::<Vec<_>>()
        .join(" or ")
}

#[test]
fn a_filter_being_compiled_holds_up_no_other_client() {
    let engine = engine();
    let mut big = engine.create_endpoint(Config::default(), None).unwrap();
    let chan = big.open_channel(engine.local(), big.id()).unwrap();
    let (started, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let installer = {
        let (started, done) = (started.clone(), done.clone());
        std::thread::spawn(move || {
            started.store(true, Ordering::SeqCst);
            // 3,000 alternatives: most of the time goes to compiling
            // them, outside the lock.
            big.install_filter(chan, &alternatives(1000, 3000), 1)
                .unwrap();
            done.store(true, Ordering::SeqCst);
            big
        })
    };
    while !started.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    // Endpoints and channels come and go while the install runs. With
    // the compilation under the lock the first would wait for the whole
    // install, and at most that one could slip in before `done` is set.
    let mut while_compiling = 0;
    while !done.load(Ordering::SeqCst) {
        let mut ep = engine.create_endpoint(Config::default(), None).unwrap();
        ep.open_channel(engine.local(), ep.id()).unwrap();
        drop(ep);
        if !done.load(Ordering::SeqCst) {
            while_compiling += 1;
        }
    }
    let big = installer.join().unwrap();
    eprintln!("{while_compiling} endpoints created while the filter compiled");
    assert!(
        while_compiling >= 2,
        "no endpoint was created and connected while the filters compiled"
    );
    drop(big);
}

#[test]
fn a_rejected_filter_leaves_the_engine_as_it_was() {
    let engine = engine();
    let mut ep = engine.create_endpoint(Config::default(), None).unwrap();
    let chan = ep.open_channel(engine.local(), ep.id()).unwrap();
    for bad in [
        format!("{}udp", "!".repeat(4000)),
        format!("{}udp{}", "(".repeat(3000), ")".repeat(3000)),
        vec!["udp"; 8192].join(" and "),
        alternatives(1, 4097),
        // Within the limits above, past the optimizer's budget of work.
        (1..=2000)
            .map(|p| format!("port {p}"))
            .collect::<Vec<_>>()
            .join(" or "),
    ] {
        let e = ep.install_filter(chan, &bad, 1).unwrap_err();
        assert!(e.to_string().starts_with("filter: "), "{e}");
    }
    // The endpoint goes on: a good filter installs after them.
    ep.install_filter(chan, "udp port 9", 1).unwrap();
}

/// A frame of the daemon's protocol, by hand (see `unet::daemon`).
fn raw_call(s: &mut UnixStream, op: u8, payload: &[u8]) -> (u8, Vec<u8>) {
    let mut v = ((1 + payload.len()) as u32).to_le_bytes().to_vec();
    v.push(op);
    v.extend_from_slice(payload);
    s.write_all(&v).unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    let status = body.remove(0);
    (status, body)
}

#[test]
fn the_daemon_answers_a_filter_past_the_limits_with_an_error_and_stays_up() {
    let engine = engine();
    engine.start(1).expect("an engine thread");
    let path = std::env::temp_dir().join(format!("unet-filter-limits-{}.sock", std::process::id()));
    let server = daemon::serve(engine.clone(), &path).unwrap();

    let mut raw = UnixStream::connect(&path).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // CreateEndpoint, then OpenChannel to itself: channel 0.
    let cfg: Vec<u8> = [512u32, 4096, 256, 256, 512]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .chain([0])
        .collect();
    let (st, body) = raw_call(&mut raw, 2, &cfg);
    assert_eq!(st, 0);
    let id = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
    let open = [
        &id.to_le_bytes()[..],
        &[10, 0, 0, 1],
        &7000u16.to_le_bytes(),
        &id.to_le_bytes(),
        &[0],
    ]
    .concat();
    let (st, _) = raw_call(&mut raw, 3, &open);
    assert_eq!(st, 0);
    let install = |text: &str| {
        let mut p = [
            &id.to_le_bytes()[..],
            &0u16.to_le_bytes(),
            &0i32.to_le_bytes(),
            &(text.len() as u32).to_le_bytes(),
        ]
        .concat();
        p.extend_from_slice(text.as_bytes());
        p
    };
    // 4,000 negations: once a stack overflow that aborted the daemon.
    let (st, text) = raw_call(&mut raw, 4, &install(&format!("{}udp", "!".repeat(4000))));
    let text = String::from_utf8_lossy(&text).into_owned();
    assert_eq!(st, 1, "{text}");
    assert_eq!(
        text,
        "filter: column 64: parentheses and negations nested more than 63 deep"
    );
    // 3,000 nested parentheses and a 64 KiB chain: errors too.
    for bad in [
        format!("{}udp{}", "(".repeat(3000), ")".repeat(3000)),
        vec!["udp"; 8192].join(" and "),
    ] {
        let (st, text) = raw_call(&mut raw, 4, &install(&bad));
        assert_eq!(st, 1, "{}", String::from_utf8_lossy(&text));
    }
    // The connection goes on: a good filter installs.
    let (st, text) = raw_call(&mut raw, 4, &install("udp port 9"));
    assert_eq!(st, 0, "{}", String::from_utf8_lossy(&text));
    // And the daemon serves a new client.
    let client = Client::connect(&path).unwrap();
    let ep = client.create_endpoint(Config::default(), None).unwrap();
    assert!(engine.port(ep.id()).is_some());
    drop(ep);
    drop(client);
    drop(raw);
    drop(server);
    let _ = std::fs::remove_file(&path);
}

/// A daemon serving a fresh engine with `opts` at a socket named for
/// `tag`, and a client of it with one endpoint and a channel to itself.
/// Dropped in field order: the endpoint, the client, then the daemon
/// (which removes its socket file).
struct Served {
    ep: unet::Endpoint,
    chan: u16,
    client: Client,
    _server: daemon::Server,
    engine: Engine,
    path: std::path::PathBuf,
}

impl Served {
    fn new(tag: &str, opts: daemon::ServeOptions) -> Served {
        let engine = engine();
        engine.start(1).expect("an engine thread");
        let path = std::env::temp_dir().join(format!("unet-{tag}-{}.sock", std::process::id()));
        let server = daemon::serve_with(engine.clone(), &path, opts).unwrap();
        let client = Client::connect(&path).unwrap();
        let mut ep = client.create_endpoint(Config::default(), None).unwrap();
        let chan = ep.open_channel(engine.local(), ep.id()).unwrap();
        Served {
            ep,
            chan,
            client,
            _server: server,
            engine,
            path,
        }
    }

    /// Another endpoint of `client`, with a channel to itself.
    fn endpoint(&self, client: &Client) -> (unet::Endpoint, u16) {
        let mut ep = client.create_endpoint(Config::default(), None).unwrap();
        let chan = ep.open_channel(self.engine.local(), ep.id()).unwrap();
        (ep, chan)
    }
}

/// A client that installs filters, or opens channels, in a loop: each
/// install merges the whole table under the engine's control lock, so
/// before the budget an endpoint's 18,000th filter took 20 ms of that lock
/// and every later one more. Now an endpoint holds at most
/// `Budgets::filters`, its channels' own included; the refusal is typed,
/// changes nothing, and a removal makes room again. Through the daemon,
/// as a hostile local client would do it.
#[test]
fn an_endpoints_filters_have_a_budget() {
    let mut d = Served::new("filter-budget", daemon::ServeOptions::default());
    let limit = d.engine.budgets().filters;
    assert_eq!(limit, 64, "the documented default");
    let chan = d.chan;
    let mut installed = Vec::new();
    let mut refused = None;
    for p in 0..1000 {
        match d
            .ep
            .install_filter(chan, &format!("udp dst port {}", 1000 + p), 1)
        {
            Ok(fid) => installed.push(fid),
            Err(e) => {
                refused = Some(e.to_string());
                break;
            }
        }
    }
    // The channel's own filter and 63 more.
    assert_eq!(installed.len(), limit - 1);
    let refused = refused.expect("a refusal");
    assert!(
        refused.contains(&format!("holds {limit} filters, its budget")),
        "{refused}"
    );
    let (local, id) = (d.engine.local(), d.ep.id());
    let e = d.ep.open_channel(local, id).unwrap_err();
    assert!(e.to_string().contains("its budget"), "{e}");
    // A removal makes room for one, and only one: the refusals took no
    // room.
    d.ep.remove_filter(installed.pop().unwrap()).unwrap();
    installed.push(d.ep.install_filter(chan, "udp dst port 9", 1).unwrap());
    assert!(d.ep.install_filter(chan, "udp dst port 10", 1).is_err());
    // Another endpoint of the same client has its own budget.
    let (mut other, c2) = d.endpoint(&d.client);
    other.install_filter(c2, "udp dst port 11", 1).unwrap();
}

/// A process that installs dear filters in a loop, over as many
/// connections as it may hold (8), could hold as many connection threads
/// busy: through the daemon the dearest filter found (3,000 `port`s,
/// confined) takes 0.6 s of one. The process's installs share a budget of
/// CPU time a second (`ServeOptions::compile_time_per_second`): an install
/// is taken while any is left and charged after; then installs are
/// refused, typed, with the wait, on every connection of the process,
/// until it refills.
#[test]
fn a_process_filter_installs_have_a_budget_of_cpu_time() {
    let opts = daemon::ServeOptions {
        compile_time_per_second: Duration::from_millis(200),
        ..daemon::ServeOptions::default()
    };
    let mut d = Served::new("filter-cpu", opts);
    let chan = d.chan;
    // 2,000 ports: tens of milliseconds to a few hundred, confined.
    let ports = (1..=2000)
        .map(|p| format!("port {p}"))
        .collect::<Vec<_>>()
        .join(" or ");
    let refusal = |e: unet::EngineError| match e {
        unet::EngineError::Refused(daemon::Refusal::CompileBudget {
            ms_per_second,
            retry_ms,
        }) => {
            assert_eq!(ms_per_second, 200);
            retry_ms
        }
        other => panic!("{other}"),
    };
    // Dear installs until one is refused: the first is always taken.
    let mut taken = 0;
    let retry_ms = loop {
        match d.ep.install_filter(chan, &ports, 1) {
            Ok(_) => taken += 1,
            Err(e) => break refusal(e),
        }
        assert!(taken < 40, "40 dear installs taken within 200 ms a second");
    };
    assert!(taken >= 1);
    assert!(retry_ms >= 1, "{retry_ms}");
    // A cheap one is refused too, and on another connection of the
    // process: the budget is the process's.
    refusal(d.ep.install_filter(chan, "udp port 9", 1).unwrap_err());
    let other = Client::connect(&d.path).unwrap();
    let (mut ep2, c2) = d.endpoint(&other);
    refusal(ep2.install_filter(c2, "udp port 9", 1).unwrap_err());
    // Once it has refilled, installs are taken again.
    std::thread::sleep(Duration::from_millis(u64::from(retry_ms) + 50));
    d.ep.install_filter(chan, "udp port 9", 1).unwrap();
}

/// Loading an applet takes the connection thread's CPU too: verifying
/// jive's largest classes and compiling them takes up to about 0.4 s
/// (0.2 s for `Dear00`, the build's dearest applet the JIT takes), and a process may load one on
/// each of its endpoints in a loop. Applet loads share the filters'
/// budget: taken while any is left, charged after, then refused, typed,
/// with the wait, for filters and applets alike; removing an applet is
/// free.
#[test]
fn a_process_applet_loads_share_the_compile_budget() {
    const DEAR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/unet-applets/Dear00.class"));
    let opts = daemon::ServeOptions {
        compile_time_per_second: Duration::from_millis(200),
        ..daemon::ServeOptions::default()
    };
    let mut d = Served::new("applet-cpu", opts);
    let refusal = |e: unet::EngineError| match e {
        unet::EngineError::Refused(daemon::Refusal::CompileBudget { retry_ms, .. }) => retry_ms,
        other => panic!("{other}"),
    };
    let mut taken = 0;
    let retry_ms = loop {
        match d.ep.set_applet(Some(DEAR)) {
            Ok(()) => taken += 1,
            Err(e) => break refusal(e),
        }
        assert!(
            taken < 40,
            "40 loads of Dear00 taken within 200 ms a second"
        );
    };
    assert!(taken >= 1);
    // The same budget refuses a filter now, and a cheap applet; removing
    // the applet is not charged.
    refusal(d.ep.install_filter(d.chan, "udp port 9", 1).unwrap_err());
    refusal(d.ep.set_applet(Some(unet::applets::STANDARD)).unwrap_err());
    d.ep.set_applet(None).unwrap();
    std::thread::sleep(Duration::from_millis(u64::from(retry_ms) + 50));
    d.ep.set_applet(Some(unet::applets::STANDARD)).unwrap();
}

/// An applet given with `CreateEndpoint` is loaded as `SetApplet` loads
/// one, and it was not admitted or charged: a process creating endpoints
/// with `Dear00` and closing them, in a loop, took 0.1 to 0.2 s of a
/// connection thread each, unbudgeted. Now it shares the same budget.
#[test]
fn a_process_creating_endpoints_with_applets_shares_the_compile_budget() {
    const DEAR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/unet-applets/Dear00.class"));
    let opts = daemon::ServeOptions {
        compile_time_per_second: Duration::from_millis(200),
        ..daemon::ServeOptions::default()
    };
    let mut d = Served::new("create-cpu", opts);
    let refusal = |e: unet::EngineError| match e {
        unet::EngineError::Refused(daemon::Refusal::CompileBudget { retry_ms, .. }) => retry_ms,
        other => panic!("{other}"),
    };
    let mut taken = 0;
    let retry_ms = loop {
        match d.client.create_endpoint(Config::default(), Some(DEAR)) {
            Ok(ep) => {
                taken += 1;
                drop(ep);
            }
            Err(e) => break refusal(e),
        }
        assert!(
            taken < 40,
            "40 endpoints created with Dear00 within 200 ms of compiling a second"
        );
    };
    assert!(taken >= 1);
    // The budget is the process's: `SetApplet` is refused too. An endpoint
    // without an applet costs no compiling and is created.
    refusal(d.ep.set_applet(Some(unet::applets::STANDARD)).unwrap_err());
    let (plain, _) = d.endpoint(&d.client);
    drop(plain);
    std::thread::sleep(Duration::from_millis(u64::from(retry_ms) + 50));
    let ep = d
        .client
        .create_endpoint(Config::default(), Some(unet::applets::STANDARD))
        .unwrap();
    drop(ep);
}
