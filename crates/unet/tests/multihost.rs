//! Multi-host: two engines on two hosts, each host a network
//! namespace of its own, joined by a veth pair ([`unet::netns::TwoHosts`]).
//! Over the `udp`, `packet` and `xdp` transports, two applications, one
//! per host, each with an endpoint on its host's engine:
//!
//! 1. play ping-pong: 1,000 round trips, each message checked when it
//!    arrives and when it comes back;
//! 2. move 100,000 messages one way with no loss: the sender runs at most
//!    [`WINDOW`] messages ahead of the receiver's acknowledgements (small
//!    messages back every [`ACK_EVERY`]), so that no queue or buffer on
//!    the way overflows, and the receiver checks that every message
//!    arrives once, in order, intact (a sequence number and an FNV-1a of
//!    the payload in the payload); the engines' counters must show no drop
//!    of any kind;
//! 3. do both once more over `udp` and over `xdp` with the standard U-Net
//!    applet (`unet::applets::STANDARD`) on both endpoints;
//! 4. play the ping-pong over `xdp` once more with the program in veth's
//!    driver (`XdpMode::Driver`; the other `xdp` tests take the generic
//!    hook, which `XdpMode::Auto` prefers on veth);
//! 5. over `xdp` on a veth pair with an MTU of 16,500, carry messages of
//!    up to 16 KiB, each in one frame of several UMEM frames (multi-buffer
//!    `AF_XDP`): round trips, then windows of 16 KiB messages one way.
//!
//! Messages are 8 to 1,400 bytes: inline (≤ 56 bytes), one buffer and two
//! buffers at the receiver (buffers of 1 KiB), and every frame fits the
//! veth MTU of 1,500 (checked against each transport's largest frame).
//! Each host's transport, engine and endpoint are made on a thread that
//! entered its namespace, and the application runs there, driving its
//! engine through its endpoint's calls (a send services the transmit
//! queue, an empty receive queue polls the transport).
//!
//! The tests need root and `ip` (iproute2). Without them they print why
//! and pass, unless `UNET_REQUIRE_NETNS=1`, which makes that a failure.
//! The `xdp` tests need AF_XDP and XDP on veth besides; without them they
//! print why and pass, unless `UNET_REQUIRE_XDP=1`.
#![cfg(not(loom))]

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{Meet, OnPanic, PHASE_LIMIT, meeting, xdp_or_skip};

use unet::frame::HEADER_LEN;
use unet::netns::TwoHosts;
use unet::transport::{PacketTransport, Transport, UdpTransport, XdpConfig, XdpMode, XdpTransport};
use unet::{Config, Endpoint, Engine, EngineCounts, PortCounts, SendError};

/// Round trips in the ping-pong.
const PINGS: u32 = 1_000;
/// Messages in the one-way transfer.
const BULK: u32 = 100_000;
/// Messages the sender may run ahead of the acknowledgements.
const WINDOW: u32 = 128;
/// The receiver acknowledges every this many messages (and the last).
const ACK_EVERY: u32 = 32;
/// The shortest and longest message.
const MIN_LEN: usize = 8;
const MAX_LEN: usize = 1400;
/// The UDP port of both engines.
const PORT: u16 = 7000;

/// The endpoints: 1 KiB buffers, so that the longest messages span two;
/// 512 receive buffers hold a whole window of them.
fn config() -> Config {
    Config {
        buffers: 1024,
        buffer_size: 1024,
        tx_depth: 256,
        rx_depth: 256,
        free_depth: 1024,
    }
}

// ---------------------------------------------------------------------------
// The hosts.

/// One test at a time: each keeps two threads busy, and the machine may
/// have only two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// The hosts for a test, or `None` (and a printed reason) when the machine
/// cannot make them; with `UNET_REQUIRE_NETNS=1` that is a failure.
fn hosts_or_skip(test: &str) -> Option<TwoHosts> {
    TwoHosts::for_test(test).unwrap_or_else(|e| panic!("{test}: {e} (and UNET_REQUIRE_NETNS=1)"))
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Via {
    Udp,
    Packet,
    Xdp,
    /// `xdp` with the program in veth's driver ([`XdpMode::Driver`]) rather
    /// than the generic hook [`XdpMode::Auto`] takes on veth.
    XdpDriver,
}

/// Host `me`'s engine on `via`, made on a thread inside its namespace.
fn engine(via: Via, hosts: &TwoHosts, me: usize) -> Engine {
    let (host, peer) = (&hosts.hosts()[me], &hosts.hosts()[1 - me]);
    let t: Box<dyn Transport> = match via {
        Via::Udp => Box::new(UdpTransport::bind(host.addr(PORT)).expect("bind the udp transport")),
        Via::Packet => {
            let mut p = PacketTransport::open(&host.ifname, host.addr(PORT))
                .expect("open the packet transport");
            p.add_neighbor(peer.ip, peer.mac);
            Box::new(p)
        }
        Via::Xdp => {
            let mut x =
                XdpTransport::open(&host.ifname, host.addr(PORT)).expect("open the xdp transport");
            x.add_neighbor(peer.ip, peer.mac);
            Box::new(x)
        }
        Via::XdpDriver => {
            let config = XdpConfig {
                mode: XdpMode::Driver,
                ..XdpConfig::default()
            };
            let mut x = XdpTransport::open_with(&host.ifname, host.addr(PORT), &config)
                .expect("open the xdp transport in driver mode");
            assert_eq!(x.mode(), XdpMode::Driver, "{}", x.mode_reason());
            x.add_neighbor(peer.ip, peer.mac);
            Box::new(x)
        }
    };
    // The longest message's frame fits the transport and the link (the
    // IP packet is the frame without its 14-byte Ethernet header).
    assert!(
        HEADER_LEN + MAX_LEN <= t.max_frame(),
        "{via:?} carries frames of {}",
        t.max_frame()
    );
    assert!(HEADER_LEN - 14 + MAX_LEN <= hosts.mtu() as usize);
    Engine::new(t)
}

/// Host `me`'s endpoint (with `applet`) and its channel to the other
/// host's endpoint; both channels are open when this returns, so that no
/// message arrives before the filter that takes it.
fn endpoint(
    via: Via,
    hosts: &TwoHosts,
    me: usize,
    applet: Option<&[u8]>,
    config: Config,
    meet: &Meet<u32>,
) -> (Endpoint, u16) {
    let engine = engine(via, hosts, me);
    let mut ep = engine
        .create_endpoint(config, applet)
        .expect("create the endpoint");
    assert_eq!(engine.has_applet(ep.id()), applet.is_some());
    let peer_id = meet.swap(ep.id());
    let peer = hosts.hosts()[1 - me].addr(PORT);
    let chan = ep.open_channel(peer, peer_id).expect("open the channel");
    meet.swap(0);
    (ep, chan)
}

/// What one host saw: its endpoint's and its engine's counters.
#[derive(Debug)]
struct Seen {
    port: PortCounts,
    engine: EngineCounts,
}

fn seen(ep: &mut Endpoint) -> Seen {
    Seen {
        port: ep.counts(),
        engine: ep.engine().expect("in this process").counts(),
    }
}

/// Runs host A's and host B's application at once, each with its endpoint
/// and channel, on threads inside their namespaces.
fn two_applications<A: Send, B: Send>(
    hosts: &TwoHosts,
    via: Via,
    applet: Option<&[u8]>,
    a: impl FnOnce(Endpoint, u16, &AtomicBool) -> A + Send,
    b: impl FnOnce(Endpoint, u16, &AtomicBool) -> B + Send,
) -> (A, B) {
    two_applications_with(hosts, via, applet, config(), a, b)
}

/// [`two_applications`] with endpoints of configuration `config`.
fn two_applications_with<A: Send, B: Send>(
    hosts: &TwoHosts,
    via: Via,
    applet: Option<&[u8]>,
    config: Config,
    a: impl FnOnce(Endpoint, u16, &AtomicBool) -> A + Send,
    b: impl FnOnce(Endpoint, u16, &AtomicBool) -> B + Send,
) -> (A, B) {
    let abort = &AtomicBool::new(false);
    let (ma, mb) = meeting();
    hosts
        .run_both(
            move || {
                let _guard = OnPanic(abort);
                let (ep, chan) = endpoint(via, hosts, 0, applet, config, &ma);
                a(ep, chan, abort)
            },
            move || {
                let _guard = OnPanic(abort);
                let (ep, chan) = endpoint(via, hosts, 1, applet, config, &mb);
                b(ep, chan, abort)
            },
        )
        .expect("enter the namespaces")
}

// ---------------------------------------------------------------------------
// The messages.

/// FNV-1a, the payload's own check value.
fn fnv1a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The length of message `seq`: every length from 8 to 1,400 bytes within
/// any 1,393 consecutive messages (7,919 is prime to 1,393).
fn msg_len(seq: u32) -> usize {
    MIN_LEN + (seq as usize).wrapping_mul(7919) % (MAX_LEN - MIN_LEN + 1)
}

/// Writes message `seq`: its number, a pattern, and the FNV-1a of both.
fn fill(seq: u32, buf: &mut [u8]) {
    let len = buf.len();
    buf[..4].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in buf[4..len - 4].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(i * 7) as u8;
    }
    let sum = fnv1a(&buf[..len - 4]);
    buf[len - 4..].copy_from_slice(&sum.to_le_bytes());
}

/// Checks that `msg` is message `seq`, intact.
fn check(seq: u32, msg: &[u8]) -> Result<(), String> {
    if msg.len() < MIN_LEN {
        return Err(format!("message {seq}: {} bytes", msg.len()));
    }
    let got = u32::from_le_bytes(msg[..4].try_into().expect("4 bytes"));
    if got != seq {
        return Err(format!(
            "expected message {seq}, got message {got} (lost, duplicated or reordered)"
        ));
    }
    if msg.len() != msg_len(seq) {
        return Err(format!(
            "message {seq}: {} bytes, sent {}",
            msg.len(),
            msg_len(seq)
        ));
    }
    let (body, sum) = msg.split_at(msg.len() - 4);
    if fnv1a(body).to_le_bytes() != sum {
        return Err(format!("message {seq}: payload damaged"));
    }
    Ok(())
}

/// Sends `len` bytes written by `fill`, driving the engine while the
/// transmit queue is full.
fn send(ep: &mut Endpoint, chan: u16, len: usize, mut fill: impl FnMut(&mut [u8])) {
    let deadline = Instant::now() + PHASE_LIMIT;
    loop {
        match ep.send_with(chan, len, &mut fill) {
            Ok(()) => return,
            Err(SendError::Full) => {
                assert!(Instant::now() < deadline, "the transmit queue stays full");
                ep.flush(1);
            }
            Err(e) => panic!("send: {e}"),
        }
    }
}

/// Waits for the next message on `chan` and copies it into `buf`.
fn recv(ep: &mut Endpoint, chan: u16, buf: &mut Vec<u8>, what: &str, abort: &AtomicBool) {
    let deadline = Instant::now() + PHASE_LIMIT;
    let mut idle = 0u32;
    loop {
        if let Some(m) = ep.recv() {
            assert_eq!(m.chan(), chan, "{what}: the channel it arrived on");
            buf.clear();
            m.read(|p| buf.extend_from_slice(p));
            return;
        }
        idle += 1;
        if idle.is_multiple_of(64) {
            // Two busy hosts may share one core: let the other run.
            std::thread::yield_now();
            if idle.is_multiple_of(1024) {
                assert!(
                    Instant::now() < deadline && !abort.load(Ordering::Relaxed),
                    "no {what}: {:?}",
                    seen(ep)
                );
            }
        }
    }
}

/// Every way a message can be lost at an endpoint or an engine, summed.
fn losses(s: &Seen) -> u64 {
    let p = &s.port;
    let e = &s.engine;
    p.tx_rejected
        + p.rx_no_buffer
        + p.rx_queue_full
        + p.rx_too_long
        + p.rx_bad_checksum
        + p.applet_traps
        + p.applet_drops
        + p.free_invalid
        + p.queue_corrupt
        + e.unmatched
        + e.malformed
        + e.send_errors
}

// ---------------------------------------------------------------------------
// The experiments.

/// Host A sends message i and waits for host B to echo it, 1,000 times.
fn ping_pong(hosts: &TwoHosts, via: Via, applet: Option<&[u8]>) -> (Seen, Seen) {
    let pinger = |mut ep: Endpoint, chan: u16, abort: &AtomicBool| {
        let (mut msg, mut echo) = (Vec::new(), Vec::new());
        let start = Instant::now();
        for seq in 0..PINGS {
            msg.resize(msg_len(seq), 0);
            fill(seq, &mut msg);
            send(&mut ep, chan, msg.len(), |b| b.copy_from_slice(&msg));
            recv(&mut ep, chan, &mut echo, "echo", abort);
            check(seq, &echo).unwrap_or_else(|e| panic!("echo: {e}"));
        }
        let rtt = start.elapsed() / PINGS;
        eprintln!(
            "{via:?}{}: {PINGS} round trips of {MIN_LEN}..{MAX_LEN}-byte messages between two engines: {rtt:?} each",
            if applet.is_some() {
                " (standard applet)"
            } else {
                ""
            }
        );
        seen(&mut ep)
    };
    let echoer = |mut ep: Endpoint, chan: u16, abort: &AtomicBool| {
        let mut msg = Vec::new();
        for seq in 0..PINGS {
            recv(&mut ep, chan, &mut msg, "ping", abort);
            check(seq, &msg).unwrap_or_else(|e| panic!("ping: {e}"));
            send(&mut ep, chan, msg.len(), |b| b.copy_from_slice(&msg));
        }
        // The last echo must leave before the endpoint (and the engine
        // with it) goes away.
        assert!(ep.flush(1 << 20), "the last echo was not taken");
        seen(&mut ep)
    };
    two_applications(hosts, via, applet, pinger, echoer)
}

/// Host A sends 100,000 messages to host B, at most `WINDOW` ahead of B's
/// acknowledgements; B checks each. Returns what each saw, and how many
/// acknowledgements B sent.
fn bulk(hosts: &TwoHosts, via: Via, applet: Option<&[u8]>) -> (Seen, (Seen, u64)) {
    let sender = |mut ep: Endpoint, chan: u16, abort: &AtomicBool| {
        let deadline = Instant::now() + PHASE_LIMIT;
        let start = Instant::now();
        let (mut sent, mut acked, mut idle) = (0u32, 0u32, 0u32);
        while acked < BULK {
            let mut progress = false;
            while sent < BULK && sent - acked < WINDOW {
                let seq = sent;
                match ep.send_with(chan, msg_len(seq), |b| fill(seq, b)) {
                    Ok(()) => {
                        sent += 1;
                        progress = true;
                    }
                    Err(SendError::Full) => {
                        ep.flush(1);
                        break;
                    }
                    Err(e) => panic!("send {seq}: {e}"),
                }
            }
            while let Some(m) = ep.recv() {
                assert_eq!((m.chan(), m.len()), (chan, 4), "an acknowledgement");
                let mut count = [0u8; 4];
                m.read(|p| count.copy_from_slice(p));
                let count = u32::from_le_bytes(count);
                assert!(
                    count > acked && count <= sent,
                    "acknowledgement of {count} after {acked}, with {sent} sent"
                );
                acked = count;
                progress = true;
            }
            if progress {
                idle = 0;
                continue;
            }
            idle += 1;
            if idle % 64 == 0 {
                std::thread::yield_now();
                assert!(
                    Instant::now() < deadline && !abort.load(Ordering::Relaxed),
                    "sent {sent}, acknowledged {acked}: {:?}",
                    seen(&mut ep)
                );
            }
        }
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "{via:?}{}: {BULK} messages of {MIN_LEN}..{MAX_LEN} bytes between two engines in {secs:.2} s ({:.0}/s), window {WINDOW}",
            if applet.is_some() {
                " (standard applet)"
            } else {
                ""
            },
            f64::from(BULK) / secs
        );
        seen(&mut ep)
    };
    let receiver = |mut ep: Endpoint, chan: u16, abort: &AtomicBool| {
        let (mut buf, mut acks) = (Vec::new(), 0u64);
        let mut acked = 0;
        for seq in 0..BULK {
            recv(&mut ep, chan, &mut buf, "message", abort);
            check(seq, &buf).unwrap_or_else(|e| panic!("{e}"));
            let got = seq + 1;
            if got - acked == ACK_EVERY || got == BULK {
                send(&mut ep, chan, 4, |b| b.copy_from_slice(&got.to_le_bytes()));
                acked = got;
                acks += 1;
            }
        }
        assert!(ep.flush(1 << 20), "the last acknowledgement was not taken");
        // Nothing more arrives: no message came twice.
        let until = Instant::now() + Duration::from_millis(50);
        while Instant::now() < until {
            if let Some(m) = ep.recv() {
                panic!("a message after the last: {} bytes", m.len());
            }
            std::thread::yield_now();
        }
        (seen(&mut ep), acks)
    };
    two_applications(hosts, via, applet, sender, receiver)
}

/// What the ping-pong's counters must say: every message delivered, once,
/// and nothing lost anywhere.
fn check_ping_pong(a: &Seen, b: &Seen) {
    let n = u64::from(PINGS);
    for (who, s) in [("pinger", a), ("echoer", b)] {
        assert_eq!(losses(s), 0, "{who}: {s:?}");
        assert_eq!(
            (s.port.tx_descriptors, s.port.tx_frames, s.port.rx_delivered),
            (n, n, n),
            "{who}: {s:?}"
        );
        assert_eq!(
            (s.engine.frames_in, s.engine.frames_out),
            (n, n),
            "{who}: {s:?}"
        );
    }
}

/// What the transfer's counters must say.
fn check_bulk(a: &Seen, b: &Seen, acks: u64) {
    let n = u64::from(BULK);
    assert_eq!(acks, n.div_ceil(u64::from(ACK_EVERY)));
    assert_eq!(losses(a), 0, "sender: {a:?}");
    assert_eq!(losses(b), 0, "receiver: {b:?}");
    assert_eq!((a.port.tx_frames, a.engine.frames_out), (n, n), "{a:?}");
    assert_eq!((b.port.rx_delivered, b.engine.frames_in), (n, n), "{b:?}");
    // Every acknowledgement arrived too.
    assert_eq!(
        (b.port.tx_frames, b.engine.frames_out),
        (acks, acks),
        "{b:?}"
    );
    assert_eq!(
        (a.port.rx_delivered, a.engine.frames_in),
        (acks, acks),
        "{a:?}"
    );
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn the_messages_cover_every_length_and_detect_damage() {
    let lens: std::collections::BTreeSet<usize> = (0..1393).map(msg_len).collect();
    assert_eq!(lens.len(), MAX_LEN - MIN_LEN + 1);
    assert_eq!(
        (lens.first(), lens.last()),
        (Some(&MIN_LEN), Some(&MAX_LEN))
    );
    let mut m = vec![0u8; msg_len(5)];
    fill(5, &mut m);
    assert_eq!(check(5, &m), Ok(()));
    assert!(check(4, &m).is_err(), "another sequence number");
    for i in [4, m.len() / 2, m.len() - 1] {
        let mut bad = m.clone();
        bad[i] ^= 0x10;
        assert!(check(5, &bad).is_err(), "byte {i} damaged");
    }
    assert!(check(5, &m[..m.len() - 1]).is_err(), "truncated");
}

#[test]
fn udp_engines_in_two_namespaces_play_ping_pong() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(hosts) = hosts_or_skip("udp_engines_in_two_namespaces_play_ping_pong") else {
        return;
    };
    let (a, b) = ping_pong(&hosts, Via::Udp, None);
    check_ping_pong(&a, &b);
}

#[test]
fn udp_engines_in_two_namespaces_move_100k_messages_without_loss() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(hosts) =
        hosts_or_skip("udp_engines_in_two_namespaces_move_100k_messages_without_loss")
    else {
        return;
    };
    let (a, (b, acks)) = bulk(&hosts, Via::Udp, None);
    check_bulk(&a, &b, acks);
}

#[test]
fn packet_engines_in_two_namespaces_play_ping_pong() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(hosts) = hosts_or_skip("packet_engines_in_two_namespaces_play_ping_pong") else {
        return;
    };
    let (a, b) = ping_pong(&hosts, Via::Packet, None);
    check_ping_pong(&a, &b);
}

#[test]
fn packet_engines_in_two_namespaces_move_100k_messages_without_loss() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(hosts) =
        hosts_or_skip("packet_engines_in_two_namespaces_move_100k_messages_without_loss")
    else {
        return;
    };
    let (a, (b, acks)) = bulk(&hosts, Via::Packet, None);
    check_bulk(&a, &b, acks);
}

#[test]
fn udp_engines_with_the_standard_applet_on_both_endpoints() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(hosts) = hosts_or_skip("udp_engines_with_the_standard_applet_on_both_endpoints")
    else {
        return;
    };
    let applet = Some(unet::applets::STANDARD);
    let (a, b) = ping_pong(&hosts, Via::Udp, applet);
    check_ping_pong(&a, &b);
    let (a, (b, acks)) = bulk(&hosts, Via::Udp, applet);
    check_bulk(&a, &b, acks);
}

#[test]
fn xdp_engines_in_two_namespaces_play_ping_pong() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let test = "xdp_engines_in_two_namespaces_play_ping_pong";
    let Some(hosts) = hosts_or_skip(test) else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let (a, b) = ping_pong(&hosts, Via::Xdp, None);
    check_ping_pong(&a, &b);
}

#[test]
fn xdp_engines_with_the_program_in_veths_driver_play_ping_pong() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let test = "xdp_engines_with_the_program_in_veths_driver_play_ping_pong";
    let Some(hosts) = hosts_or_skip(test) else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let (a, b) = ping_pong(&hosts, Via::XdpDriver, None);
    check_ping_pong(&a, &b);
}

#[test]
fn xdp_engines_in_two_namespaces_move_100k_messages_without_loss() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let test = "xdp_engines_in_two_namespaces_move_100k_messages_without_loss";
    let Some(hosts) = hosts_or_skip(test) else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let (a, (b, acks)) = bulk(&hosts, Via::Xdp, None);
    check_bulk(&a, &b, acks);
}

#[test]
fn xdp_engines_with_the_standard_applet_on_both_endpoints() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let test = "xdp_engines_with_the_standard_applet_on_both_endpoints";
    let Some(hosts) = hosts_or_skip(test) else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let applet = Some(unet::applets::STANDARD);
    let (a, b) = ping_pong(&hosts, Via::Xdp, applet);
    check_ping_pong(&a, &b);
    let (a, (b, acks)) = bulk(&hosts, Via::Xdp, applet);
    check_bulk(&a, &b, acks);
}

/// The veth MTU of the large-message test: a 16 KiB message and its
/// headers in one frame, as `fastpath demo --netns` has it.
const JUMBO_MTU: u32 = 16_500;
/// The message sizes of the large-message round trips: one byte past a
/// 4 KiB UMEM frame's worth, a few frames, and 16 KiB (five UMEM frames).
const JUMBO_SIZES: [usize; 4] = [4_097, 9_000, 16_384, 1_200];

#[test]
fn xdp_engines_carry_16k_messages_in_multi_buffer_frames() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let test = "xdp_engines_carry_16k_messages_in_multi_buffer_frames";
    let Some(hosts) = TwoHosts::for_test_with(test, JUMBO_MTU, 1)
        .unwrap_or_else(|e| panic!("{test}: {e} (and UNET_REQUIRE_NETNS=1)"))
    else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    // 2 KiB buffers: up to 28 KiB a message.
    let config = Config {
        buffers: 512,
        buffer_size: 2048,
        tx_depth: 64,
        rx_depth: 64,
        free_depth: 512,
    };
    const ROUNDS: u32 = 200;
    const WINDOWS: u32 = 8;
    const PER_WINDOW: u32 = 16;
    let message = |seq: u32, len: usize| {
        let mut m = vec![0u8; len];
        fill(seq, &mut m);
        m
    };
    let size = |seq: u32| JUMBO_SIZES[seq as usize % JUMBO_SIZES.len()];
    let a = |mut ep: Endpoint, chan: u16, abort: &AtomicBool| {
        assert!(ep.max_message() >= 16_384, "{} bytes", ep.max_message());
        let mut echo = Vec::new();
        for seq in 0..ROUNDS {
            let msg = message(seq, size(seq));
            send(&mut ep, chan, msg.len(), |b| b.copy_from_slice(&msg));
            recv(&mut ep, chan, &mut echo, "echo", abort);
            assert!(echo == msg, "echo {seq} of {} bytes differs", msg.len());
        }
        // Windows of 16 KiB messages one way, each acknowledged.
        for w in 0..WINDOWS {
            for i in 0..PER_WINDOW {
                let msg = message(w * PER_WINDOW + i, 16_384);
                send(&mut ep, chan, msg.len(), |b| b.copy_from_slice(&msg));
            }
            recv(&mut ep, chan, &mut echo, "acknowledgement", abort);
            assert_eq!(echo, (w + 1).to_le_bytes());
        }
        seen(&mut ep)
    };
    let b = |mut ep: Endpoint, chan: u16, abort: &AtomicBool| {
        let mut msg = Vec::new();
        for seq in 0..ROUNDS {
            recv(&mut ep, chan, &mut msg, "message", abort);
            assert!(msg == message(seq, size(seq)), "message {seq} differs");
            send(&mut ep, chan, msg.len(), |b| b.copy_from_slice(&msg));
        }
        for w in 0..WINDOWS {
            for i in 0..PER_WINDOW {
                let seq = w * PER_WINDOW + i;
                recv(&mut ep, chan, &mut msg, "16 KiB message", abort);
                assert!(msg == message(seq, 16_384), "16 KiB message {seq} differs");
            }
            send(&mut ep, chan, 4, |b| {
                b.copy_from_slice(&(w + 1).to_le_bytes())
            });
        }
        assert!(ep.flush(1 << 20), "the last acknowledgement was not taken");
        seen(&mut ep)
    };
    let (sa, sb) = two_applications_with(&hosts, Via::Xdp, None, config, a, b);
    let n = u64::from(ROUNDS + WINDOWS * PER_WINDOW);
    for (who, s, out, inn) in [
        ("A", &sa, n, u64::from(ROUNDS + WINDOWS)),
        ("B", &sb, u64::from(ROUNDS + WINDOWS), n),
    ] {
        assert_eq!(losses(s), 0, "{who} lost messages");
        // One frame a message: the engine does not fragment, and a
        // message the transport could not carry would have failed.
        assert_eq!(
            (s.engine.frames_out, s.engine.frames_in),
            (out, inn),
            "{who}: frames out and in"
        );
        assert_eq!(s.engine.transport_not_unet, 0, "{who}: frames dropped");
    }
}
