//! Two hosts in two network namespaces joined by a veth pair
//! ([`unet::netns::TwoHosts`]), talking over the `udp`, `packet` and `xdp`
//! transports directly (no engine: `tests/multihost.rs` runs engines): a
//! ping-pong of 1,000 frames and a 100,000-frame one-way transfer paced by
//! a window of acknowledgements, in which every frame must arrive once, in
//! order and intact. First, what `TwoHosts` itself promises.
//!
//! Each test creates its own pair of namespaces and removes it afterwards,
//! also when the test fails. Each host runs on a thread of its own that
//! entered its namespace with `setns(2)`, so that the test process's
//! namespace is left alone and the traffic stays between the two.
//!
//! The tests need root and `ip` (iproute2). Without them they print why
//! and pass, unless `UNET_REQUIRE_NETNS=1`, which makes that a failure.
//! The `xdp` tests need AF_XDP and XDP on veth besides; without them they
//! print why and pass, unless `UNET_REQUIRE_XDP=1`.
#![cfg(not(loom))]

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;
use common::{Meet, OnPanic, PHASE_LIMIT, meeting, xdp_or_skip};

use unet::frame::{
    Addr, FLAG_UDP_CHECKSUM, FrameHeader, HEADER_LEN, set_udp_checksum, verify_udp_checksum,
};
use unet::netns::{IFNAMES, NETNS_DIR, TwoHosts};
use unet::transport::{
    Built, PacketTransport, Transport, TransportError, TransportStats, UdpTransport, XdpMode,
    XdpTransport,
};

/// Frames in the ping-pong.
const PINGS: u64 = 1_000;
/// Frames in the one-way transfer.
const BULK: u64 = 100_000;
/// Frames the sender may have unacknowledged.
const WINDOW: u64 = 256;
/// The receiver acknowledges at least every this many frames.
const ACK_EVERY: u64 = 32;
/// The UDP port both hosts use.
const PORT: u16 = 7000;

// ---------------------------------------------------------------------------
// The hosts.

/// The namespace pair for a test, or `None` (and a printed reason) when the
/// machine cannot make one; with `UNET_REQUIRE_NETNS=1` that is a failure.
fn hosts_or_skip(test: &str) -> Option<TwoHosts> {
    TwoHosts::for_test(test).unwrap_or_else(|e| panic!("{test}: {e} (and UNET_REQUIRE_NETNS=1)"))
}

/// The interfaces the calling thread's network namespace has
/// (`/proc/thread-self/net/dev`).
fn interfaces() -> Vec<String> {
    let dev = std::fs::read_to_string("/proc/thread-self/net/dev").expect("read net/dev");
    dev.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(name, _)| name.trim().to_owned())
        .collect()
}

/// `ip -n <ns> -o link show <ifname>`.
fn link(ns: &str, ifname: &str) -> String {
    let out = Command::new("ip")
        .args(["-n", ns, "-o", "link", "show", ifname])
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn two_hosts_each_see_only_their_end_of_the_veth_pair() {
    let Some(hosts) = hosts_or_skip("two_hosts_each_see_only_their_end_of_the_veth_pair") else {
        return;
    };
    let (ia, ib) = hosts
        .run_both(interfaces, interfaces)
        .expect("enter the namespaces");
    assert!(
        ia.iter().any(|i| i == IFNAMES[0]) && !ia.iter().any(|i| i == IFNAMES[1]),
        "{ia:?}"
    );
    assert!(
        ib.iter().any(|i| i == IFNAMES[1]) && !ib.iter().any(|i| i == IFNAMES[0]),
        "{ib:?}"
    );
    assert!(ia.iter().any(|i| i == "lo"));
    // The test's own thread did not move.
    let mine = interfaces();
    assert!(
        !mine.iter().any(|i| IFNAMES.contains(&i.as_str())),
        "{mine:?}"
    );
    // The ends carry the promised MACs, MTU and state.
    for h in hosts.hosts() {
        let l = link(&h.namespace, &h.ifname);
        assert!(l.contains(&format!("link/ether {}", h.mac)), "{l}");
        assert!(l.contains("mtu 1500") && l.contains("state UP"), "{l}");
    }
    // Host A reaches host B through the kernel's stack.
    let [a, b] = hosts.hosts();
    let rx = b
        .run(|| std::net::UdpSocket::bind((b.ip, PORT)))
        .expect("enter B")
        .expect("bind in B");
    rx.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    a.run(|| {
        let tx = std::net::UdpSocket::bind((a.ip, 0)).expect("bind in A");
        tx.send_to(b"over the veth pair", (b.ip, PORT))
            .expect("send");
    })
    .expect("enter A");
    let mut buf = [0u8; 64];
    let (n, from) = rx.recv_from(&mut buf).expect("the datagram arrives");
    assert_eq!(
        (&buf[..n], from.ip()),
        (&b"over the veth pair"[..], std::net::IpAddr::V4(a.ip))
    );
}

#[test]
fn two_hosts_take_a_given_mtu_and_differ_from_other_pairs() {
    let Some(one) = hosts_or_skip("two_hosts_take_a_given_mtu_and_differ_from_other_pairs") else {
        return;
    };
    let two = TwoHosts::with_mtu(9000).expect("a second pair");
    assert_eq!(two.mtu(), 9000);
    for h in two.hosts() {
        assert!(link(&h.namespace, &h.ifname).contains("mtu 9000"));
    }
    let names = |t: &TwoHosts| t.hosts().each_ref().map(|h| h.namespace.clone());
    let (n1, n2) = (names(&one), names(&two));
    assert!(n1.iter().all(|n| !n2.contains(n)), "{n1:?} {n2:?}");
    let pid = std::process::id().to_string();
    assert!(n1.iter().chain(&n2).all(|n| n.contains(&pid)));
    assert_ne!(one.hosts()[0].ip, two.hosts()[0].ip);
    // An MTU the veth driver refuses: the error names the command.
    let e = TwoHosts::with_mtu(1 << 20).expect_err("an MTU of 1 MiB");
    let msg = e.to_string();
    assert!(msg.contains("ip -n") && msg.contains("type veth"), "{msg}");
}

#[test]
fn two_hosts_are_removed_on_drop_also_when_the_test_panics() {
    let Some(hosts) = hosts_or_skip("two_hosts_are_removed_on_drop_also_when_the_test_panics")
    else {
        return;
    };
    let names = hosts.hosts().each_ref().map(|h| h.namespace.clone());
    let exists = |n: &String| Path::new(NETNS_DIR).join(n).exists();
    assert!(names.iter().all(exists));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _hosts = hosts;
        panic!("a test that fails while it holds the hosts");
    }));
    assert!(r.is_err());
    assert!(!names.iter().any(exists), "{names:?} left behind");
}

// ---------------------------------------------------------------------------
// The hosts' transports.

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Via {
    Udp,
    /// `packet`; `true`: the peers' MACs are given with `add_neighbor`,
    /// `false`: the transport finds them (broadcast, then learning).
    Packet(bool),
    /// `xdp`; `true`: the peers' MACs are given, as for `packet`.
    Xdp(bool),
}

/// Opens host `me`'s transport (on a thread inside its namespace); for
/// `packet` with given neighbours, tells it the peer's MAC. Both hosts are
/// open when this returns (`meet`).
fn open(via: Via, hosts: &TwoHosts, me: usize, meet: &Meet<u64>) -> Box<dyn Transport> {
    let (host, peer) = (&hosts.hosts()[me], &hosts.hosts()[1 - me]);
    let addr = host.addr(PORT);
    let t: Box<dyn Transport> = match via {
        Via::Udp => Box::new(UdpTransport::bind(addr).expect("bind the udp transport")),
        Via::Packet(given) => {
            let mut p =
                PacketTransport::open(&host.ifname, addr).expect("open the packet transport");
            assert!(
                p.port_reserved(),
                "the UDP port is reserved in the host's stack"
            );
            assert_eq!(p.max_frame(), 1514, "MTU 1500 + Ethernet header");
            assert_eq!(p.mac(), host.mac, "the MAC TwoHosts gave the veth end");
            if given {
                p.add_neighbor(peer.ip, peer.mac);
            }
            Box::new(p)
        }
        Via::Xdp(given) => {
            let mut x = XdpTransport::open(&host.ifname, addr).expect("open the xdp transport");
            assert_eq!(x.max_frame(), 1514, "MTU 1500 + Ethernet header");
            assert_eq!(x.mac(), host.mac, "the MAC TwoHosts gave the veth end");
            // veth runs XDP in its driver too, but with one socket the
            // transport takes the generic hook (faster there); its AF_XDP
            // sockets copy either way.
            assert_eq!((x.mode(), x.zero_copy()), (XdpMode::Generic, false));
            if given {
                x.add_neighbor(peer.ip, peer.mac);
            }
            Box::new(x)
        }
    };
    meet.swap(0);
    t
}

/// Waits up to `ms` milliseconds for the transport to become readable.
fn wait_readable(t: &dyn Transport, ms: i32) {
    if let Some(fd) = t.poll_fd() {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, ms) };
    } else {
        std::thread::yield_now();
    }
}

/// Sends every frame, waiting while the transport has no room.
fn send_all(t: &mut dyn Transport, frames: &[&[u8]], deadline: Instant, abort: &AtomicBool) {
    let mut done = 0;
    while done < frames.len() {
        assert!(
            Instant::now() < deadline && !abort.load(Ordering::Relaxed),
            "send stalled with {} of {} frames sent; {:?}",
            done,
            frames.len(),
            t.stats()
        );
        match t.send(&frames[done..]) {
            Ok(0) => std::thread::sleep(Duration::from_micros(50)),
            Ok(n) => done += n,
            Err(e) => panic!("send: {e}"),
        }
    }
}

// ---------------------------------------------------------------------------
// The frames.

/// FNV-1a, the payload's own check value.
fn fnv1a(data: &[u8]) -> u32 {
    data.iter().fold(0x811c_9dc5, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The payload length of frame `seq`: 12 to 1411 bytes (the frame fits an
/// MTU of 1500).
fn payload_len(seq: u64) -> usize {
    12 + (seq as usize).wrapping_mul(7919) % 1400
}

/// Writes data frame `seq` from `src` to `dst` into `buf`: the sequence
/// number, a pattern, its FNV-1a, and a UDP checksum.
fn data_frame(buf: &mut Vec<u8>, src: Addr, dst: Addr, seq: u64) {
    let len = payload_len(seq);
    buf.clear();
    buf.resize(HEADER_LEN + len, 0);
    let mut h = FrameHeader::new(src, dst, 1, 2);
    h.flags = FLAG_UDP_CHECKSUM;
    h.write(len, buf).expect("header");
    let p = &mut buf[HEADER_LEN..];
    p[..8].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in p[8..len - 4].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(i * 7) as u8;
    }
    let sum = fnv1a(&p[..len - 4]);
    p[len - 4..].copy_from_slice(&sum.to_le_bytes());
    set_udp_checksum(buf).expect("checksum");
}

/// Checks that `frame` is data frame `seq` from `src` to `dst`, intact.
fn check_data(frame: &[u8], src: Addr, dst: Addr, seq: u64) -> Result<(), String> {
    let (h, p) = FrameHeader::parse(frame).map_err(|e| format!("frame {seq}: {e}"))?;
    if (h.src, h.dst, h.dst_ep, h.src_ep) != (src, dst, 1, 2) {
        return Err(format!("frame {seq}: header {h:?}"));
    }
    if verify_udp_checksum(frame) != Ok(true) {
        return Err(format!(
            "frame {seq}: UDP checksum {:?}",
            verify_udp_checksum(frame)
        ));
    }
    if p.len() != payload_len(seq) {
        return Err(format!("frame {seq}: payload of {} bytes", p.len()));
    }
    let got = u64::from_le_bytes(p[..8].try_into().expect("8 bytes"));
    if got != seq {
        return Err(format!(
            "expected frame {seq}, got frame {got} (lost, duplicated or reordered)"
        ));
    }
    let (body, sum) = p.split_at(p.len() - 4);
    if fnv1a(body).to_le_bytes() != sum {
        return Err(format!("frame {seq}: payload damaged"));
    }
    Ok(())
}

fn ack_frame(src: Addr, dst: Addr, count: u64) -> Vec<u8> {
    let mut f = vec![0u8; HEADER_LEN + 8];
    FrameHeader::new(src, dst, 2, 1)
        .write(8, &mut f)
        .expect("header");
    f[HEADER_LEN..].copy_from_slice(&count.to_le_bytes());
    f
}

// ---------------------------------------------------------------------------
// The two experiments.

/// Host 0 sends frame i and waits for host 1 to echo it, 1,000 times;
/// returns both hosts' counters.
fn ping_pong(hosts: &TwoHosts, via: Via) -> [TransportStats; 2] {
    let abort = &AtomicBool::new(false);
    let (m0, m1) = meeting();
    let [a, b] = hosts.hosts().each_ref().map(|h| h.addr(PORT));
    let pinger = move || {
        let _guard = OnPanic(abort);
        let mut t = open(via, hosts, 0, &m0);
        let deadline = Instant::now() + PHASE_LIMIT;
        let mut buf = Vec::new();
        let start = Instant::now();
        for seq in 0..PINGS {
            data_frame(&mut buf, a, b, seq);
            send_all(&mut *t, &[&buf], deadline, abort);
            let mut echoed = false;
            while !echoed {
                assert!(
                    Instant::now() < deadline && !abort.load(Ordering::Relaxed),
                    "no echo of frame {seq}; {:?}",
                    t.stats()
                );
                let n = t
                    .recv(1, &mut |f| {
                        check_data(f, b, a, seq).unwrap_or_else(|e| panic!("echo: {e}"));
                        echoed = true;
                    })
                    .expect("recv");
                if n == 0 {
                    wait_readable(&*t, 1);
                }
            }
        }
        let rtt = start.elapsed() / PINGS as u32;
        eprintln!("{via:?}: ping-pong of {PINGS} frames of 62..1461 bytes: {rtt:?} per round trip");
        t.stats()
    };
    let echoer = move || {
        let _guard = OnPanic(abort);
        let mut t = open(via, hosts, 1, &m1);
        let deadline = Instant::now() + PHASE_LIMIT;
        let (mut echoed, mut out) = (0u64, Vec::new());
        while echoed < PINGS {
            assert!(
                Instant::now() < deadline && !abort.load(Ordering::Relaxed),
                "echoed {echoed} of {PINGS}; {:?}",
                t.stats()
            );
            let n = t
                .recv(1, &mut |f| {
                    check_data(f, a, b, echoed).unwrap_or_else(|e| panic!("ping: {e}"));
                    // The echo: the same payload with the addresses
                    // swapped.
                    let (h, p) = FrameHeader::parse(f).expect("checked");
                    out.clear();
                    out.resize(f.len(), 0);
                    let mut r = FrameHeader::new(h.dst, h.src, h.dst_ep, h.src_ep);
                    r.flags = h.flags;
                    r.write(p.len(), &mut out).expect("header");
                    out[HEADER_LEN..].copy_from_slice(p);
                    set_udp_checksum(&mut out).expect("checksum");
                })
                .expect("recv");
            if n == 1 {
                send_all(&mut *t, &[&out], deadline, abort);
                echoed += 1;
            } else {
                wait_readable(&*t, 1);
            }
        }
        t.stats()
    };
    let (s0, s1) = hosts
        .run_both(pinger, echoer)
        .expect("enter the namespaces");
    [s0, s1]
}

/// Host 0 sends 100,000 frames to host 1 with at most `WINDOW`
/// unacknowledged; host 1 checks each and acknowledges cumulatively.
/// Returns both hosts' counters.
fn bulk(hosts: &TwoHosts, via: Via) -> [TransportStats; 2] {
    let abort = &AtomicBool::new(false);
    let (m0, m1) = meeting();
    let [a, b] = hosts.hosts().each_ref().map(|h| h.addr(PORT));
    let sender = move || {
        let _guard = OnPanic(abort);
        let mut t = open(via, hosts, 0, &m0);
        let deadline = Instant::now() + PHASE_LIMIT;
        let start = Instant::now();
        let (mut sent, mut acked) = (0u64, 0u64);
        let mut bufs = vec![Vec::new(); 32];
        while acked < BULK {
            assert!(
                Instant::now() < deadline && !abort.load(Ordering::Relaxed),
                "sent {sent}, acknowledged {acked}; {:?}",
                t.stats()
            );
            let room = (WINDOW - (sent - acked)).min(BULK - sent).min(32) as usize;
            for (k, buf) in bufs[..room].iter_mut().enumerate() {
                data_frame(buf, a, b, sent + k as u64);
            }
            let refs: Vec<&[u8]> = bufs[..room].iter().map(|f| &f[..]).collect();
            send_all(&mut *t, &refs, deadline, abort);
            sent += room as u64;
            let n = t
                .recv(64, &mut |f| {
                    let (h, p) = FrameHeader::parse(f).expect("an acknowledgement");
                    assert_eq!((h.src, h.dst, p.len()), (b, a, 8), "acknowledgement");
                    let count = u64::from_le_bytes(p.try_into().expect("8 bytes"));
                    assert!(count <= sent, "acknowledged {count} of {sent} sent");
                    acked = acked.max(count);
                })
                .expect("recv");
            if n == 0 && room == 0 {
                wait_readable(&*t, 1);
            }
        }
        let secs = start.elapsed().as_secs_f64();
        eprintln!(
            "{via:?}: {BULK} frames of 62..1461 bytes in {secs:.2} s: {:.0} frames/s, window {WINDOW}",
            BULK as f64 / secs
        );
        t.stats()
    };
    let receiver = move || {
        let _guard = OnPanic(abort);
        let mut t = open(via, hosts, 1, &m1);
        let deadline = Instant::now() + PHASE_LIMIT;
        let (mut expect, mut acked) = (0u64, 0u64);
        while expect < BULK {
            assert!(
                Instant::now() < deadline && !abort.load(Ordering::Relaxed),
                "received {expect} of {BULK}; {:?}",
                t.stats()
            );
            let n = t
                .recv(64, &mut |f| {
                    check_data(f, a, b, expect).unwrap_or_else(|e| panic!("{e}"));
                    expect += 1;
                })
                .expect("recv");
            if expect - acked >= ACK_EVERY || (expect == BULK && acked < BULK) {
                send_all(&mut *t, &[&ack_frame(b, a, expect)], deadline, abort);
                acked = expect;
            }
            if n == 0 {
                wait_readable(&*t, 1);
            }
        }
        // Nothing more arrives: no frame came twice.
        let extra_until = Instant::now() + Duration::from_millis(50);
        while Instant::now() < extra_until {
            t.recv(64, &mut |f| {
                panic!("a frame after the last: {} bytes", f.len())
            })
            .expect("recv");
            wait_readable(&*t, 5);
        }
        t.stats()
    };
    let (s0, s1) = hosts
        .run_both(sender, receiver)
        .expect("enter the namespaces");
    [s0, s1]
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn udp_ping_pong_between_namespaces() {
    let Some(hosts) = hosts_or_skip("udp_ping_pong_between_namespaces") else {
        return;
    };
    let [a, b] = ping_pong(&hosts, Via::Udp);
    assert_eq!((a.tx_frames, a.rx_frames), (PINGS, PINGS));
    assert_eq!((b.tx_frames, b.rx_frames), (PINGS, PINGS));
    assert_eq!(a.rx_dropped + b.rx_dropped, 0);
}

#[test]
fn udp_bulk_transfer_between_namespaces_loses_nothing() {
    let Some(hosts) = hosts_or_skip("udp_bulk_transfer_between_namespaces_loses_nothing") else {
        return;
    };
    let [a, b] = bulk(&hosts, Via::Udp);
    assert_eq!((a.tx_frames, b.rx_frames), (BULK, BULK));
    assert_eq!(a.rx_frames, b.tx_frames, "every acknowledgement arrived");
    assert_eq!(b.rx_overruns + b.rx_dropped, 0);
}

#[test]
fn packet_ping_pong_between_namespaces_learns_the_peers_mac() {
    let Some(hosts) = hosts_or_skip("packet_ping_pong_between_namespaces_learns_the_peers_mac")
    else {
        return;
    };
    let [a, b] = ping_pong(&hosts, Via::Packet(false));
    assert_eq!((a.tx_frames, a.rx_frames), (PINGS, PINGS));
    assert_eq!((b.tx_frames, b.rx_frames), (PINGS, PINGS));
    // The first ping went to the broadcast MAC (nothing knew the peer);
    // its echo came back unicast, and the pinger learned from it.
    assert_eq!(a.tx_broadcast, 1, "{a:?}");
    assert_eq!(b.tx_broadcast, 0, "{b:?}");
    assert_eq!(
        a.rx_dropped + b.rx_dropped + a.rx_overruns + b.rx_overruns,
        0
    );
}

#[test]
fn packet_bulk_transfer_between_namespaces_loses_nothing() {
    let Some(hosts) = hosts_or_skip("packet_bulk_transfer_between_namespaces_loses_nothing") else {
        return;
    };
    let [a, b] = bulk(&hosts, Via::Packet(true));
    assert_eq!((a.tx_frames, b.rx_frames), (BULK, BULK));
    assert_eq!(a.rx_frames, b.tx_frames, "every acknowledgement arrived");
    assert_eq!(
        a.tx_broadcast + b.tx_broadcast,
        0,
        "the neighbours were given"
    );
    assert_eq!(b.rx_overruns + b.rx_dropped, 0);
}

/// A frame that passes the kernel's filter but is not a frame unet can
/// classify (IPv4 options) is dropped and counted by the `packet`
/// transport, and the next one still arrives.
#[test]
fn packet_transport_counts_and_drops_frames_it_cannot_classify() {
    let Some(hosts) = hosts_or_skip("packet_transport_counts_and_drops_frames_it_cannot_classify")
    else {
        return;
    };
    let abort = &AtomicBool::new(false);
    let (m0, m1) = meeting();
    let [a, b] = hosts.hosts().each_ref().map(|h| h.addr(PORT));
    let hosts = &hosts;
    let sender = move || {
        let _guard = OnPanic(abort);
        let mut t = open(Via::Packet(true), hosts, 0, &m0);
        let deadline = Instant::now() + PHASE_LIMIT;
        let mut good = Vec::new();
        data_frame(&mut good, a, b, 0);
        // IHL 6: a 4-byte option shifts the UDP header (the filter
        // follows it; the frame is IPv4/UDP to the right port).
        let mut bad = good.clone();
        bad[14] = 0x46;
        bad.splice(34..34, [1u8, 1, 1, 1]);
        let total = u16::from_be_bytes([bad[16], bad[17]]) + 4;
        bad[16..18].copy_from_slice(&total.to_be_bytes());
        send_all(&mut *t, &[&bad, &good], deadline, abort);
        t.stats()
    };
    let receiver = move || {
        let _guard = OnPanic(abort);
        let mut t = open(Via::Packet(true), hosts, 1, &m1);
        let deadline = Instant::now() + PHASE_LIMIT;
        let mut got = 0;
        while got == 0 {
            assert!(Instant::now() < deadline && !abort.load(Ordering::Relaxed));
            got += t
                .recv(8, &mut |f| check_data(f, a, b, 0).expect("the good frame"))
                .expect("recv");
            wait_readable(&*t, 1);
        }
        t.stats()
    };
    let (s0, s1) = hosts
        .run_both(sender, receiver)
        .expect("enter the namespaces");
    assert_eq!(s0.tx_frames, 2);
    assert_eq!((s1.rx_frames, s1.rx_dropped), (1, 1));
}

#[test]
fn xdp_ping_pong_between_namespaces_learns_the_peers_mac() {
    let test = "xdp_ping_pong_between_namespaces_learns_the_peers_mac";
    let Some(hosts) = hosts_or_skip(test) else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let [a, b] = ping_pong(&hosts, Via::Xdp(false));
    assert_eq!((a.tx_frames, a.rx_frames), (PINGS, PINGS));
    assert_eq!((b.tx_frames, b.rx_frames), (PINGS, PINGS));
    // As with `packet`: one broadcast, then the learned MAC.
    assert_eq!((a.tx_broadcast, b.tx_broadcast), (1, 0), "{a:?} {b:?}");
    assert_eq!(
        a.rx_dropped + b.rx_dropped + a.rx_overruns + b.rx_overruns,
        0
    );
}

#[test]
fn xdp_bulk_transfer_between_namespaces_loses_nothing() {
    let test = "xdp_bulk_transfer_between_namespaces_loses_nothing";
    let Some(hosts) = hosts_or_skip(test) else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let [a, b] = bulk(&hosts, Via::Xdp(true));
    assert_eq!((a.tx_frames, b.rx_frames), (BULK, BULK));
    assert_eq!(a.rx_frames, b.tx_frames, "every acknowledgement arrived");
    assert_eq!(a.tx_broadcast + b.tx_broadcast, 0);
    assert_eq!(b.rx_overruns + b.rx_dropped, 0);
}

/// The XDP program takes only the engine's frames: the kernel's stack
/// still gets the rest, so a UDP socket on another port of the same host
/// receives while the `xdp` transport runs, and the transport never sees
/// that datagram.
#[test]
fn xdp_leaves_other_traffic_to_the_kernels_stack() {
    let test = "xdp_leaves_other_traffic_to_the_kernels_stack";
    let Some(hosts) = hosts_or_skip(test) else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let [ha, hb] = hosts.hosts();
    let mut x = hb
        .run(|| XdpTransport::open(&hb.ifname, hb.addr(PORT)))
        .expect("enter B")
        .expect("open the xdp transport");
    let sock = hb
        .run(|| std::net::UdpSocket::bind((hb.ip, PORT + 1)))
        .expect("enter B")
        .expect("bind a UDP socket beside the transport");
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // From A's kernel stack: its ARP request for B must reach B's stack
    // too, or the datagram never leaves.
    ha.run(|| {
        let s = std::net::UdpSocket::bind((ha.ip, 0)).expect("bind in A");
        s.send_to(b"to the stack", (hb.ip, PORT + 1)).expect("send");
    })
    .expect("enter A");
    let mut buf = [0u8; 64];
    let (n, _) = sock
        .recv_from(&mut buf)
        .expect("the datagram reached B's stack");
    assert_eq!(&buf[..n], b"to the stack");
    let got = x.recv(64, &mut |f| panic!("the transport got {} bytes", f.len()));
    assert_eq!(got.expect("recv"), 0);
    assert_eq!(x.stats().rx_dropped, 0);
}

/// One socket per receive queue: on a veth pair made with three queues
/// the transport binds three (and two when asked for two); more than the
/// interface has is refused, naming both counts.
#[test]
fn xdp_opens_a_socket_for_every_receive_queue() {
    let test = "xdp_opens_a_socket_for_every_receive_queue";
    let Some(hosts) = hosts_or_skip(test) else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let a = &hosts.hosts()[0];
    let ip = |args: &[&str]| {
        let ok = Command::new("ip")
            .args(["-n", &a.namespace])
            .args(args)
            .status()
            .expect("run ip");
        assert!(ok.success(), "ip {args:?}");
    };
    // A second pair inside host A's namespace, deleted with it.
    ip(&[
        "link",
        "add",
        "mq0",
        "numtxqueues",
        "3",
        "numrxqueues",
        "3",
        "type",
        "veth",
        "peer",
        "name",
        "mq1",
        "numtxqueues",
        "3",
        "numrxqueues",
        "3",
    ]);
    ip(&["link", "set", "mq0", "up"]);
    ip(&["link", "set", "mq1", "up"]);
    let open = |queues| {
        let config = unet::transport::XdpConfig {
            queues,
            ..Default::default()
        };
        a.run(|| XdpTransport::open_with("mq0", a.addr(PORT), &config).map(|t| t.queues()))
            .expect("enter host A")
    };
    assert_eq!(open(None).expect("every queue"), 3);
    assert_eq!(open(Some(2)).expect("two queues"), 2);
    let e = open(Some(4)).unwrap_err();
    assert!(
        e.to_string()
            .contains("4 queues asked for, interface mq0 has 3 receive queues"),
        "{e}"
    );
}

/// `xdp` transports on A (with `config`) and B, their addresses, and A
/// told B's MAC address: for tests that drive the two transports by hand.
fn xdp_pair(
    hosts: &TwoHosts,
    config: &unet::transport::XdpConfig,
) -> (Addr, Addr, XdpTransport, XdpTransport) {
    let [ha, hb] = hosts.hosts();
    let (a, b) = (ha.addr(PORT), hb.addr(PORT));
    let mut xa = ha
        .run(|| XdpTransport::open_with(&ha.ifname, a, config))
        .expect("enter A")
        .expect("open A's xdp transport");
    let xb = hb
        .run(|| XdpTransport::open(&hb.ifname, b))
        .expect("enter B")
        .expect("open B's xdp transport");
    xa.add_neighbor(hb.ip, hb.mac);
    (a, b, xa, xb)
}

/// With several queues, the transport's poll descriptor wakes for a frame
/// on any of them: on a veth pair with two queues each way, datagrams of
/// 32 flows from A (each its own source port, which A's kernel spreads
/// over its two transmit queues, and veth hands to B's receive queue of
/// the same number) each make B's descriptor readable, and both queues
/// deliver some.
#[test]
fn xdp_poll_fd_wakes_for_a_frame_on_any_queue() {
    let test = "xdp_poll_fd_wakes_for_a_frame_on_any_queue";
    let Some(hosts) = TwoHosts::for_test_with(test, unet::netns::DEFAULT_MTU, 2)
        .unwrap_or_else(|e| panic!("{test}: {e} (and UNET_REQUIRE_NETNS=1)"))
    else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let [ha, hb] = hosts.hosts();
    let (a_addr, b_addr) = (ha.addr(PORT), hb.addr(PORT));
    let mut x = hb
        .run(|| XdpTransport::open(&hb.ifname, b_addr))
        .expect("enter B")
        .expect("open the xdp transport");
    assert_eq!(x.queues(), 2);
    // veth's driver: only its NAPI instance tells the queues apart.
    assert_eq!(x.mode(), XdpMode::Driver, "{}", x.mode_reason());
    let fd = x.poll_fd().expect("a poll descriptor");
    let readable = |ms| {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, ms) == 1 && p.revents & libc::POLLIN != 0 }
    };
    assert!(!readable(0), "nothing has arrived yet");
    let flows: Vec<_> = ha
        .run(|| {
            (0..32)
                .map(|i| std::net::UdpSocket::bind((ha.ip, PORT + 1 + i)).expect("bind in A"))
                .collect()
        })
        .expect("enter A");
    for (i, sock) in flows.iter().enumerate() {
        let mut f = Vec::new();
        data_frame(&mut f, a_addr, b_addr, i as u64);
        sock.send_to(&f[14 + 20 + 8..], (hb.ip, PORT))
            .expect("send from A");
        assert!(readable(5000), "flow {i}'s frame woke no poller");
        let mut got = 0;
        while got == 0 {
            got = x.recv(64, &mut |_| {}).expect("recv");
        }
        assert_eq!(got, 1, "flow {i}");
        assert!(!readable(0), "flow {i}: nothing is left");
    }
    let by_queue = x.rx_frames_by_queue();
    assert_eq!(by_queue.iter().sum::<u64>(), 32);
    assert!(
        by_queue.iter().all(|&n| n > 0),
        "A's kernel put all 32 flows on one queue ({} and {})",
        by_queue[0],
        by_queue[1]
    );
}

/// Frames built straight in the transport's UMEM transmit frames
/// (`Transport::send_built`): a length it cannot carry is refused before
/// anything is lent; a frame the builder gives up is never sent and its
/// transmit frame is not lost (200 given up, with 64 transmit frames, then
/// 300 more sent); and frames built in lent frames and frames sent whole
/// leave in the order of the calls, each once, intact.
#[test]
fn xdp_frames_built_in_lent_umem_frames_arrive_and_given_up_ones_never_leave() {
    let test = "xdp_frames_built_in_lent_umem_frames_arrive_and_given_up_ones_never_leave";
    let Some(hosts) = hosts_or_skip(test) else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let config = unet::transport::XdpConfig {
        tx_frames: 64,
        ..Default::default()
    };
    let (a, b, mut xa, mut xb) = xdp_pair(&hosts, &config);
    assert!(xa.lends());
    let mut called = false;
    let e = xa
        .send_built(HEADER_LEN - 1, &mut |_| {
            called = true;
            true
        })
        .unwrap_err();
    assert!(matches!(e, TransportError::FrameTooShort { .. }), "{e}");
    let e = xa
        .send_built(xa.max_frame() + 1, &mut |_| {
            called = true;
            true
        })
        .unwrap_err();
    assert!(matches!(e, TransportError::FrameTooLarge { .. }), "{e}");
    assert!(!called, "no memory is lent for a length that is refused");
    let mut f = Vec::new();
    for k in 0..200 {
        data_frame(&mut f, a, b, 1_000_000 + k);
        let r = xa.send_built(f.len(), &mut |buf| {
            buf.copy_from_slice(&f);
            false
        });
        assert_eq!(r.expect("lent"), Built::Abandoned, "frame {k}");
    }
    xa.flush().expect("flush");
    assert_eq!(xa.stats().tx_frames, 0, "a frame given up is not counted");
    let mut got: Vec<Vec<u8>> = Vec::new();
    let take = |xb: &mut XdpTransport, got: &mut Vec<Vec<u8>>| {
        xb.recv(64, &mut |fr| got.push(fr.to_vec())).expect("recv")
    };
    for seq in 0..300 {
        data_frame(&mut f, a, b, seq);
        if seq % 2 == 0 {
            let r = xa.send_built(f.len(), &mut |buf| {
                buf.copy_from_slice(&f);
                true
            });
            assert_eq!(r.expect("lent"), Built::Queued, "frame {seq}");
        } else {
            assert_eq!(xa.send(&[&f]).expect("send"), 1, "frame {seq}");
        }
        if seq % 5 == 4 {
            xa.flush().expect("flush");
            take(&mut xb, &mut got);
        }
    }
    xa.flush().expect("flush");
    let deadline = Instant::now() + PHASE_LIMIT;
    while got.len() < 300 && Instant::now() < deadline {
        if take(&mut xb, &mut got) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    assert_eq!(got.len(), 300, "{:?} {:?}", xa.stats(), xb.stats());
    for (seq, fr) in got.iter().enumerate() {
        check_data(fr, a, b, seq as u64).unwrap_or_else(|e| panic!("{e}"));
    }
    let (sa, sb) = (xa.stats(), xb.stats());
    assert_eq!((sa.tx_frames, sa.tx_rejected, sa.tx_broadcast), (300, 2, 0));
    assert_eq!((sb.rx_frames, sb.rx_dropped, sb.rx_overruns), (300, 0, 0));
}

/// The transport's lock-free readiness test (`Transport::readiness`),
/// which lets an empty poll skip the engine's transport lock: false while
/// a receive poll would find nothing; true while a frame waits on the
/// transmit ring for a kick, and while a frame waits on the receive ring,
/// before any poll; false again once a poll (or a flush) did the work. It
/// holds the rings' words only, and outlives the transport harmlessly.
#[test]
fn xdp_readiness_is_false_only_when_a_poll_would_find_nothing() {
    let test = "xdp_readiness_is_false_only_when_a_poll_would_find_nothing";
    let Some(hosts) = hosts_or_skip(test) else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let (a, b, mut xa, mut xb) = xdp_pair(&hosts, &Default::default());
    let ra = xa.readiness().expect("xdp has a lock-free readiness test");
    let rb = xb.readiness().expect("xdp has a lock-free readiness test");
    assert!(!ra() && !rb(), "nothing sent, nothing arrived");
    assert_eq!(xb.recv(64, &mut |_| {}).expect("recv"), 0);
    let mut f = Vec::new();
    data_frame(&mut f, a, b, 0);
    let r = xa.send_built(f.len(), &mut |buf| {
        buf.copy_from_slice(&f);
        true
    });
    assert_eq!(r.expect("lent"), Built::Queued);
    assert!(ra(), "a frame waits on A's transmit ring for a kick");
    xa.flush().expect("flush");
    assert!(
        !ra(),
        "the kernel took the frame (copy mode sends in the call)"
    );
    // The test runs on another thread than the transport's user.
    std::thread::scope(|s| {
        let seen = s.spawn(|| {
            let deadline = Instant::now() + PHASE_LIMIT;
            while !rb() {
                assert!(Instant::now() < deadline, "the frame never showed");
                std::thread::yield_now();
            }
        });
        seen.join().expect("B's readiness turned true");
    });
    assert!(rb(), "the frame waits on B's receive ring");
    let mut got = Vec::new();
    assert_eq!(
        xb.recv(64, &mut |fr| got.push(fr.to_vec())).expect("recv"),
        1
    );
    check_data(&got[0], a, b, 0).unwrap_or_else(|e| panic!("{e}"));
    assert!(!rb(), "the poll took it");
    // A's poll reclaims the completed frame: not a reason to poll.
    assert!(!ra());
    drop(xb);
    assert!(!rb(), "the test outlives the transport");
}
