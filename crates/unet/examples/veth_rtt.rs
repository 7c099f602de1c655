//! Round trips of one message, or bursts of 25 with an acknowledgement,
//! between two U-Net endpoints across a veth pair, one engine in each of
//! two network namespaces, over `udp` or `xdp`, for a fixed time: the
//! loops that docs/benchmarks.md profiles ("Where an `xdp` round trip goes
//! on veth", "Where an `xdp` burst goes on veth"; run `perf record -g -p`
//! while it runs). Both application threads spin on their endpoints (a
//! receive polls the engine, which polls the transport), pinned to two
//! CPUs like `fastpath demo`'s. Needs root.
//!
//! ```sh
//! cargo build --release -p unet --example veth_rtt
//! sudo target/release/examples/veth_rtt <udp|xdp|xdp-driver|xdp-generic> [bytes] [seconds] [mtu] [rtt|bw|count] [rx_frames]
//! ```
//!
//! `xdp` attaches in [`XdpMode::Auto`] (the generic hook on veth),
//! `xdp-driver` and `xdp-generic` in the mode named. `rtt` (the default)
//! prints the median, 10th and 90th percentile of the means of batches of
//! 100 round trips; `bw` runs `fastpath demo`'s bandwidth experiment (the
//! same endpoints, 8 KiB buffers; 25 messages sent in place, the engine
//! driven once, the receiver reading in place and acknowledging every 25)
//! and prints the same percentiles of the bandwidth of batches of 40
//! bursts, with the time per message. `rx_frames` sets the `xdp` sockets'
//! receive frames (`XdpConfig::rx_frames`; its default otherwise).
//! `count` makes `seconds` round trips on one thread, which drives both
//! endpoints in turn, for callgrind:
//! `valgrind --tool=callgrind --toggle-collect='*counted*' veth_rtt xdp 1024 2000 16500 count`
//! counts the user-space instructions of the round trips alone, and
//! `--toggle-collect='*idle_polls*'` those of as many receive polls that
//! find nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use unet::netns::{Host, TwoHosts};
use unet::transport::{Transport, UdpTransport, XdpConfig, XdpMode, XdpTransport};
use unet::{Config, Endpoint, Engine};

/// Round trips per timed batch.
const BATCH: usize = 100;

/// Spins until a message arrives (into `buf`); `false` once `stop`.
fn recv(ep: &mut Endpoint, buf: &mut Vec<u8>, stop: &AtomicBool) -> bool {
    loop {
        if let Some(m) = ep.recv() {
            buf.clear();
            m.read(|p| buf.extend_from_slice(p));
            return true;
        }
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::hint::spin_loop();
    }
}

/// `n` round trips of `msg` on the calling thread, which drives both
/// endpoints in turn: what `callgrind --toggle-collect='*counted*'`
/// counts, the user-space instructions of both directions of a round trip
/// without the spinning of two threads (on veth the kernel's `sendto`
/// delivers the frame before it returns, so a receive rarely polls in
/// vain). Returns the receive polls that found nothing.
#[inline(never)]
fn counted(
    a: &mut Endpoint,
    b: &mut Endpoint,
    ab: u16,
    ba: u16,
    msg: &[u8],
    n: usize,
) -> Result<u64, Box<dyn std::error::Error>> {
    let mut polls = 0u64;
    let mut buf = Vec::with_capacity(msg.len());
    let mut take = |ep: &mut Endpoint, buf: &mut Vec<u8>| loop {
        if let Some(m) = ep.recv() {
            buf.clear();
            m.read(|p| buf.extend_from_slice(p));
            return;
        }
        polls += 1;
    };
    for _ in 0..n {
        send(a, ab, msg)?;
        take(b, &mut buf);
        send(b, ba, &buf)?;
        take(a, &mut buf);
        if buf.len() != msg.len() {
            return Err(format!("a reply of {} bytes", buf.len()).into());
        }
    }
    Ok(polls)
}

/// `n` receive polls of an endpoint to which nothing comes: what one
/// empty poll costs (`callgrind --toggle-collect='*idle_polls*'`), the
/// spinning receiver's loop between two messages.
#[inline(never)]
fn idle_polls(ep: &mut Endpoint, n: usize) -> Result<(), Box<dyn std::error::Error>> {
    for _ in 0..n {
        if ep.recv().is_some() {
            return Err("a message came to the idle endpoint".into());
        }
    }
    Ok(())
}

/// Sends `msg` on `chan`, driving the engine while the queue is full.
fn send(ep: &mut Endpoint, chan: u16, msg: &[u8]) -> Result<(), unet::SendError> {
    loop {
        match ep.send_with(chan, msg.len(), |b| b.copy_from_slice(msg)) {
            Err(unet::SendError::Full) => {
                ep.poll_engine();
            }
            r => return r,
        }
    }
}

/// Host `me`'s endpoint on `kind` with `config`, made inside its namespace.
/// `rx_frames`: the `xdp` sockets' receive frames, if not the default.
fn endpoint(
    kind: &str,
    me: &Host,
    peer: &Host,
    config: Config,
    rx_frames: Option<u32>,
) -> Result<Endpoint, String> {
    let made = me.run(|| -> Result<Endpoint, String> {
        let transport: Box<dyn Transport> = match kind {
            "udp" => Box::new(UdpTransport::bind(me.addr(0)).map_err(|e| e.to_string())?),
            _ => {
                let mode = match kind {
                    "xdp-driver" => XdpMode::Driver,
                    "xdp-generic" => XdpMode::Generic,
                    _ => XdpMode::Auto,
                };
                let config = XdpConfig {
                    mode,
                    rx_frames: rx_frames.unwrap_or(XdpConfig::default().rx_frames),
                    ..XdpConfig::default()
                };
                let mut x = XdpTransport::open_with(&me.ifname, me.addr(7000), &config)
                    .map_err(|e| e.to_string())?;
                x.add_neighbor(peer.ip, peer.mac);
                eprintln!("{}: {}", me.namespace, x.mode_reason());
                Box::new(x)
            }
        };
        Engine::new(transport)
            .create_endpoint(config, None)
            .map_err(|e| e.to_string())
    });
    made.map_err(|e| e.to_string())?
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map_or("xdp", String::as_str);
    if !["udp", "xdp", "xdp-driver", "xdp-generic"].contains(&kind) {
        return Err(format!("transport {kind}: udp, xdp, xdp-driver or xdp-generic").into());
    }
    let size: usize = args.get(2).map_or(Ok(1024), |s| s.parse())?;
    let secs: f64 = args.get(3).map_or(Ok(5.0), |s| s.parse())?;
    let mtu: u32 = args.get(4).map_or(Ok(16_500), |s| s.parse())?;
    let (bw, count) = match args.get(5).map_or("rtt", String::as_str) {
        "rtt" => (false, false),
        "bw" => (true, false),
        "count" => (false, true),
        other => return Err(format!("experiment {other}: rtt, bw or count").into()),
    };
    let rx_frames: Option<u32> = args.get(6).map(|s| s.parse()).transpose()?;
    let config = if bw {
        // `fastpath demo`'s bandwidth endpoints.
        Config {
            buffer_size: 8192,
            ..Config::default()
        }
    } else {
        Config::default()
    };
    let hosts = TwoHosts::with_mtu(mtu)?;
    let [ha, hb] = hosts.hosts();
    let mut a = endpoint(kind, ha, hb, config, rx_frames)?;
    let mut b = endpoint(kind, hb, ha, config, rx_frames)?;
    let local = |ep: &Endpoint| ep.engine().map(Engine::local).ok_or("no engine");
    let (la, lb) = (local(&a)?, local(&b)?);
    let ab = a.open_channel(lb, b.id())?;
    let ba = b.open_channel(la, a.id())?;
    let cpus = unet::affinity::two_cpus();
    if let Some(c) = cpus {
        unet::affinity::pin(c[0]);
    }
    if bw {
        return bandwidth(kind, a, b, ab, ba, cpus, size, secs);
    }
    if count {
        let msg = vec![0x5au8; size];
        counted(&mut a, &mut b, ab, ba, &msg, 100)?;
        let n = secs as usize;
        let polls = counted(&mut a, &mut b, ab, ba, &msg, n)?;
        println!(
            "{kind} {size} B: {n} round trips on one thread, {:.2} empty polls a round trip",
            polls as f64 / n as f64
        );
        idle_polls(&mut a, n)?;
        return Ok(());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let echo = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            if let Some(c) = cpus {
                unet::affinity::pin(c[1]);
            }
            let mut buf = Vec::new();
            while recv(&mut b, &mut buf, &stop) {
                if send(&mut b, ba, &buf).is_err() {
                    break;
                }
            }
        })
    };
    let msg = vec![0x5au8; size];
    let mut buf = Vec::new();
    let never = AtomicBool::new(false);
    let mut round_trip = || -> Result<(), Box<dyn std::error::Error>> {
        send(&mut a, ab, &msg)?;
        recv(&mut a, &mut buf, &never);
        if buf.len() != size {
            return Err(format!("echo of {size} bytes came back with {}", buf.len()).into());
        }
        Ok(())
    };
    for _ in 0..1000 {
        round_trip()?;
    }
    let mut batches = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(secs) {
        let t = Instant::now();
        for _ in 0..BATCH {
            round_trip()?;
        }
        batches.push(t.elapsed().as_secs_f64() * 1e6 / BATCH as f64);
    }
    stop.store(true, Ordering::Relaxed);
    echo.join().map_err(|_| "the echo thread panicked")?;
    batches.sort_by(f64::total_cmp);
    let at = |q: f64| batches[((batches.len() - 1) as f64 * q) as usize];
    println!(
        "{kind} {size} B: {} round trips in {secs} s, batch means (µs): median {:.2}, p10 {:.2}, p90 {:.2}",
        batches.len() * BATCH,
        at(0.5),
        at(0.1),
        at(0.9)
    );
    Ok(())
}

/// Bursts per timed batch of the bandwidth loop.
const BURSTS: usize = 40;

/// Messages per burst, each burst acknowledged (`fastpath demo`'s
/// `BURST`).
const BURST: u32 = 25;

/// `fastpath demo`'s bandwidth experiment (`bandwidth()` in
/// `crates/fastpath/src/demo.rs`, its `AppAck` flow) for `secs` seconds:
/// `a` sends bursts of 25 `size`-byte messages in place and drives its
/// engine once per burst, `b`'s thread reads each message in place and
/// acknowledges every 25th with the count received; `a` waits for it.
#[allow(clippy::too_many_arguments)]
fn bandwidth(
    kind: &str,
    mut a: Endpoint,
    mut b: Endpoint,
    ab: u16,
    ba: u16,
    cpus: Option<[usize; 2]>,
    size: usize,
    secs: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = {
        let stop = stop.clone();
        std::thread::spawn(move || -> Result<u64, String> {
            if let Some(c) = cpus {
                unet::affinity::pin(c[1]);
            }
            let mut got = 0u32;
            loop {
                let arrived = b.recv().map(|m| {
                    let mut n = 0;
                    m.read(|p| n += p.len());
                    n
                });
                match arrived {
                    Some(n) if n != size => {
                        return Err(format!("a message of {n} bytes, not {size}"));
                    }
                    Some(_) => {
                        got = got.wrapping_add(1);
                        if got.is_multiple_of(BURST) {
                            send(&mut b, ba, &got.to_le_bytes()).map_err(|e| e.to_string())?;
                        }
                    }
                    None if stop.load(Ordering::Relaxed) => return Ok(u64::from(got)),
                    None => std::hint::spin_loop(),
                }
            }
        })
    };
    let never = AtomicBool::new(false);
    let mut ack = Vec::new();
    let mut sent = 0u32;
    let mut burst = || -> Result<(), Box<dyn std::error::Error>> {
        a.set_drive(false);
        for _ in 0..BURST {
            loop {
                match a.send_with(ab, size, |_| ()) {
                    Err(unet::SendError::Full) => a.poll_engine(),
                    r => break r?,
                }
            }
        }
        sent = sent.wrapping_add(BURST);
        a.set_drive(true);
        a.poll_engine();
        loop {
            recv(&mut a, &mut ack, &never);
            let count = ack.first_chunk::<4>().map_or(0, |c| u32::from_le_bytes(*c));
            if count == sent {
                return Ok(());
            }
        }
    };
    for _ in 0..100 {
        burst()?;
    }
    let mut rates = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(secs) {
        let t = Instant::now();
        for _ in 0..BURSTS {
            burst()?;
        }
        let bytes = (BURSTS * BURST as usize * size) as f64;
        rates.push(bytes / t.elapsed().as_secs_f64() / 1e9);
    }
    stop.store(true, Ordering::Relaxed);
    receiver
        .join()
        .map_err(|_| "the receiving thread panicked")??;
    rates.sort_by(f64::total_cmp);
    let at = |q: f64| rates[((rates.len() - 1) as f64 * q) as usize];
    let per_msg = |gbs: f64| size as f64 / gbs / 1e3;
    println!(
        "{kind} {size} B bursts of {BURST}: {} messages in {secs} s, batch bandwidth (GB/s): \
         median {:.4} ({:.2} µs a message), p10 {:.4}, p90 {:.4}",
        rates.len() * BURSTS * BURST as usize,
        at(0.5),
        per_msg(at(0.5)),
        at(0.1),
        at(0.9)
    );
    Ok(())
}
