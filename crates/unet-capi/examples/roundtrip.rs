//! The round trip of a C client (`examples/c/echo.c` over `libunet_capi.a`)
//! against a Rust client (`unet::client`) through the same daemon, in one
//! run.
//!
//! ```text
//! cargo run --release -p unet-capi --example roundtrip [-- ROUNDS [SIZE [TRIALS]]]
//! ```
//!
//! Both do the same thing, each in a process of its own (this example
//! runs itself again with `--rust-client` for the Rust one), so that
//! neither shares the daemon's process: two connections to the daemon, an
//! endpoint on each, a server thread echoing every message, and a client
//! sending ROUNDS messages of SIZE bytes (default 2,000 of 64) one at a
//! time after 100 warm-up rounds, timing each round trip. Every wait
//! spins for as long as it has learnt pays and then yields its core
//! (`unet::wait::Spins`, as `unet_recv` waits). The two
//! alternate for TRIALS runs each (default 15); the table gives each run's
//! median, then the median and the lowest of those (the least disturbed
//! run on a shared machine) and the ratios C / Rust of both.

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::Instant;

use support::{Daemon, Scratch, compile, workspace};
use unet::Config;
use unet::client::Client;
use unet::wait::Spins;

/// One Rust run: the median round trip in nanoseconds.
fn rust_run(socket: &std::path::Path, rounds: usize, size: usize) -> u64 {
    let sc = Client::connect(socket).expect("connecting");
    let cc = Client::connect(socket).expect("connecting");
    let mut s = sc
        .create_endpoint(Config::default(), None)
        .expect("server endpoint");
    let mut c = cc
        .create_endpoint(Config::default(), None)
        .expect("client endpoint");
    let sch = s.open_channel(cc.local(), c.id()).expect("channel");
    let cch = c.open_channel(sc.local(), s.id()).expect("channel");
    let server = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut spins = Spins::default();
        loop {
            let mut wait = spins.backoff();
            let m = loop {
                if let Some(m) = s.recv() {
                    spins.learn(&wait);
                    break m;
                }
                wait.snooze();
            };
            buf.clear();
            m.read(|p| buf.extend_from_slice(p));
            drop(m);
            if buf.is_empty() {
                return;
            }
            while s.send(sch, &buf) == Err(unet::SendError::Full) {}
        }
    });
    let mut out = vec![0u8; size];
    let mut rtt = Vec::with_capacity(rounds);
    let warmup = rounds.min(100);
    let mut spins = Spins::default();
    for i in 0..warmup + rounds {
        for (j, b) in out.iter_mut().enumerate() {
            *b = (i * 31 + j) as u8;
        }
        let t0 = Instant::now();
        c.send(cch, &out).expect("send");
        let mut wait = spins.backoff();
        let m = loop {
            if let Some(m) = c.recv() {
                spins.learn(&wait);
                break m;
            }
            wait.snooze();
        };
        let mut ok = m.len() == size;
        let mut at = 0;
        m.read(|p| {
            ok &= out[at..at + p.len()] == *p;
            at += p.len();
        });
        drop(m);
        let t = t0.elapsed().as_nanos() as u64;
        assert!(ok, "round {i}: the echo differs from the message sent");
        if i >= warmup {
            rtt.push(t);
        }
    }
    c.send(cch, &[]).expect("send");
    server.join().expect("the server thread");
    rtt.sort_unstable();
    rtt[rtt.len() / 2]
}

/// One run of `cmd` (echo.c, or this example as the Rust client): the
/// median round trip it reports.
fn child_run(mut cmd: Command, socket: &std::path::Path, rounds: usize, size: usize) -> u64 {
    let out = cmd
        .arg(socket)
        .args([rounds.to_string(), size.to_string()])
        .output()
        .expect("running echo");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "echo failed:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .split(": median ")
        .nth(1)
        .and_then(|r| r.split(" ns").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no median in echo's output:\n{stdout}"))
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--rust-client") {
        let (rounds, size) = (
            args[3].parse().expect("ROUNDS"),
            args[4].parse().expect("SIZE"),
        );
        let m = rust_run(args[2].as_ref(), rounds, size);
        println!("rust: {rounds} round trips of {size} bytes: median {m} ns");
        return;
    }
    let arg = |i: usize, d: usize| {
        std::env::args()
            .nth(i)
            .map(|a| a.parse().expect("a positive number"))
            .unwrap_or(d)
    };
    let (rounds, size, trials) = (arg(1, 2_000), arg(2, 64), arg(3, 15));
    assert!(
        rounds > 0 && size > 0 && trials > 0,
        "ROUNDS, SIZE and TRIALS must be positive"
    );
    let dir = Scratch::new("roundtrip");
    let exe = dir.0.join("echo");
    compile(&[&workspace().join("examples/c/echo.c")], &exe);
    let socket = dir.0.join("engine.sock");
    let _daemon = Daemon::start(&socket, 1);

    let (mut rust, mut c) = (Vec::new(), Vec::new());
    println!(
        "{rounds} round trips of {size} bytes through one daemon (engine: 1 thread, loop transport), each client in its own process, median per run:"
    );
    println!("{:>5}  {:>12}  {:>12}", "run", "Rust (ns)", "C (ns)");
    for t in 0..trials {
        let mut me = Command::new(std::env::current_exe().expect("this example's path"));
        me.arg("--rust-client");
        rust.push(child_run(me, &socket, rounds, size));
        c.push(child_run(Command::new(&exe), &socket, rounds, size));
        println!("{:>5}  {:>12}  {:>12}", t + 1, rust[t], c[t]);
    }
    let (r, cm) = (median(&mut rust), median(&mut c));
    let (rmin, cmin) = (rust[0], c[0]);
    println!(
        "{:>6}  {:>12}  {:>12}  {:>8}",
        "", "Rust (ns)", "C (ns)", "C / Rust"
    );
    println!(
        "{:>6}  {:>12}  {:>12}  {:>8.3}",
        "median",
        r,
        cm,
        cm as f64 / r as f64
    );
    println!(
        "{:>6}  {:>12}  {:>12}  {:>8.3}",
        "lowest",
        rmin,
        cmin,
        cmin as f64 / rmin as f64
    );
}
