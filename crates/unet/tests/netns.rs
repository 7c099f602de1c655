//! Two hosts in two network namespaces joined by a veth pair, talking over
//! the `udp` and the `packet` transports: a ping-pong of 1,000 frames and
//! a 100,000-frame one-way transfer paced by a window of acknowledgements,
//! in which every frame must arrive once, in order and intact.
//!
//! Each test creates its own pair of namespaces (`fpA<pid><tag>`,
//! `fpB<pid><tag>`), a veth pair `fp0`/`fp1` between them with addresses
//! 10.77.<x>.1/24 and 10.77.<x>.2/24, and removes them afterwards, also
//! when the test fails (a guard whose `Drop` deletes them). Each host runs
//! in a thread of its own that enters its namespace with `setns(2)`, so
//! that the test process's namespace is left alone and the traffic stays
//! between the two namespaces.
//!
//! The tests need root and `ip` (iproute2). Without them they print why
//! and pass, unless `UNET_REQUIRE_NETNS=1`, which makes that a failure.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use unet::frame::{
    Addr, FLAG_UDP_CHECKSUM, FrameHeader, HEADER_LEN, MacAddr, set_udp_checksum,
    verify_udp_checksum,
};
use unet::transport::{PacketTransport, Transport, TransportStats, UdpTransport};

/// Frames in the ping-pong.
const PINGS: u64 = 1_000;
/// Frames in the one-way transfer.
const BULK: u64 = 100_000;
/// Frames the sender may have unacknowledged.
const WINDOW: u64 = 256;
/// The receiver acknowledges at least every this many frames.
const ACK_EVERY: u64 = 32;
/// How long one phase may take before the test gives up.
const PHASE_LIMIT: Duration = Duration::from_secs(15);
/// The UDP port both hosts use.
const PORT: u16 = 7000;

// ---------------------------------------------------------------------------
// The namespaces.

/// Runs `ip` with `args`; the error says which command failed and why.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip {}`: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Two namespaces joined by a veth pair; deleted on drop.
struct Pair {
    ns: [String; 2],
    /// The hosts' addresses (on `fp0` in `ns[0]`, `fp1` in `ns[1]`).
    addr: [Addr; 2],
}

impl Pair {
    const IFNAME: [&'static str; 2] = ["fp0", "fp1"];

    /// Creates the pair for test `tag` on subnet 10.77.`subnet`.0/24.
    fn create(tag: &str, subnet: u8) -> Result<Pair, String> {
        let pid = std::process::id();
        let ns = [format!("fpA{pid}{tag}"), format!("fpB{pid}{tag}")];
        for n in &ns {
            let _ = ip(&["netns", "del", n]); // a leftover of a killed run
        }
        ip(&["netns", "add", &ns[0]])?;
        // From here on the guard removes whatever exists.
        let pair = Pair {
            ns: ns.clone(),
            addr: [1, 2].map(|h| Addr::new(Ipv4Addr::new(10, 77, subnet, h), PORT)),
        };
        ip(&["netns", "add", &ns[1]])?;
        let [a, b] = &ns;
        let [ia, ib] = Self::IFNAME;
        ip(&[
            "-n", a, "link", "add", ia, "type", "veth", "peer", "name", ib, "netns", b,
        ])?;
        for (n, ifname, addr) in [(a, ia, pair.addr[0]), (b, ib, pair.addr[1])] {
            ip(&[
                "-n",
                n,
                "addr",
                "add",
                &format!("{}/24", addr.ip),
                "dev",
                ifname,
            ])?;
            ip(&["-n", n, "link", "set", ifname, "up"])?;
            ip(&["-n", n, "link", "set", "lo", "up"])?;
        }
        Ok(pair)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for n in &self.ns {
            // Deleting a namespace deletes its end of the veth pair, and
            // the other end with it.
            if let Err(e) = ip(&["netns", "del", n]) {
                eprintln!("netns cleanup: {e}");
            }
        }
    }
}

/// Why the tests cannot run here, if they cannot.
fn missing_capability() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root (network namespaces need CAP_SYS_ADMIN)".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(format!("`ip -V` failed: {}", o.status)),
        Err(e) => Some(format!("`ip` (iproute2) is not available: {e}")),
    }
}

/// The namespace pair for a test, or `None` (and a printed reason) when the
/// machine cannot make one; with `UNET_REQUIRE_NETNS=1` that is a failure.
fn pair_or_skip(test: &str, tag: &str, subnet: u8) -> Option<Pair> {
    let reason = match missing_capability() {
        Some(r) => r,
        None => match Pair::create(tag, subnet) {
            Ok(p) => return Some(p),
            Err(e) => format!("cannot create the namespaces: {e}"),
        },
    };
    if std::env::var("UNET_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("{test}: {reason} (and UNET_REQUIRE_NETNS=1)");
    }
    // Straight to the process's stderr, past the test harness's capture,
    // so that the skip is visible in a normal run.
    use std::io::Write;
    let line = format!("\nSKIP {test}: {reason}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    None
}

/// Runs `f` in a new thread that has entered namespace `ns`.
fn in_netns<T: Send + 'static>(
    ns: &str,
    abort: &Arc<AtomicBool>,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    let path = format!("/var/run/netns/{ns}");
    let abort = abort.clone();
    std::thread::spawn(move || {
        // A host that fails tells the other one to stop waiting.
        struct OnPanic(Arc<AtomicBool>);
        impl Drop for OnPanic {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.store(true, Ordering::Relaxed);
                }
            }
        }
        let _guard = OnPanic(abort);
        let file = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
        // SAFETY: setns on an open namespace file; it affects only this
        // thread, which then creates its sockets inside that namespace.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
}

// ---------------------------------------------------------------------------
// The hosts' transports.

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Via {
    Udp,
    /// `packet`; `true`: the peers' MACs are given with `add_neighbor`,
    /// `false`: the transport finds them (broadcast, then learning).
    Packet(bool),
}

/// Opens host `me`'s transport inside its namespace and, for `packet`,
/// swaps MACs with the peer over `macs`; both hosts are open when this
/// returns (`ready`).
fn open(
    via: Via,
    pair_addr: [Addr; 2],
    me: usize,
    macs: (mpsc::Sender<MacAddr>, mpsc::Receiver<MacAddr>),
    ready: &Barrier,
) -> Box<dyn Transport> {
    let addr = pair_addr[me];
    let peer = pair_addr[1 - me];
    let t: Box<dyn Transport> = match via {
        Via::Udp => Box::new(UdpTransport::bind(addr).expect("bind the udp transport")),
        Via::Packet(given) => {
            let mut p =
                PacketTransport::open(Pair::IFNAME[me], addr).expect("open the packet transport");
            assert!(
                p.port_reserved(),
                "the UDP port is reserved in the host's stack"
            );
            assert_eq!(p.max_frame(), 1514, "MTU 1500 + Ethernet header");
            macs.0.send(p.mac()).expect("peer alive");
            let peer_mac = macs.1.recv().expect("peer's MAC");
            if given {
                p.add_neighbor(peer.ip, peer_mac);
            }
            Box::new(p)
        }
    };
    ready.wait();
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
fn ping_pong(pair: &Pair, via: Via) -> [TransportStats; 2] {
    let abort = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(2));
    let (tx0, rx1) = mpsc::channel();
    let (tx1, rx0) = mpsc::channel();
    let addr = pair.addr;
    let (a, b) = (addr[0], addr[1]);
    let pinger = {
        let (ready, abort2) = (ready.clone(), abort.clone());
        in_netns(&pair.ns[0], &abort, move || {
            let mut t = open(via, addr, 0, (tx0, rx0), &ready);
            let deadline = Instant::now() + PHASE_LIMIT;
            let mut buf = Vec::new();
            let start = Instant::now();
            for seq in 0..PINGS {
                data_frame(&mut buf, a, b, seq);
                send_all(&mut *t, &[&buf], deadline, &abort2);
                let mut echoed = false;
                while !echoed {
                    assert!(
                        Instant::now() < deadline && !abort2.load(Ordering::Relaxed),
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
            eprintln!(
                "{via:?}: ping-pong of {PINGS} frames of 62..1461 bytes: {rtt:?} per round trip"
            );
            t.stats()
        })
    };
    let echoer = {
        let abort2 = abort.clone();
        in_netns(&pair.ns[1], &abort, move || {
            let mut t = open(via, addr, 1, (tx1, rx1), &ready);
            let deadline = Instant::now() + PHASE_LIMIT;
            let (mut echoed, mut out) = (0u64, Vec::new());
            while echoed < PINGS {
                assert!(
                    Instant::now() < deadline && !abort2.load(Ordering::Relaxed),
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
                    send_all(&mut *t, &[&out], deadline, &abort2);
                    echoed += 1;
                } else {
                    wait_readable(&*t, 1);
                }
            }
            t.stats()
        })
    };
    let s0 = pinger.join().expect("pinging host");
    let s1 = echoer.join().expect("echoing host");
    [s0, s1]
}

/// Host 0 sends 100,000 frames to host 1 with at most `WINDOW`
/// unacknowledged; host 1 checks each and acknowledges cumulatively.
/// Returns both hosts' counters.
fn bulk(pair: &Pair, via: Via) -> [TransportStats; 2] {
    let abort = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(2));
    let (tx0, rx1) = mpsc::channel();
    let (tx1, rx0) = mpsc::channel();
    let addr = pair.addr;
    let (a, b) = (addr[0], addr[1]);
    let sender = {
        let (ready, abort2) = (ready.clone(), abort.clone());
        in_netns(&pair.ns[0], &abort, move || {
            let mut t = open(via, addr, 0, (tx0, rx0), &ready);
            let deadline = Instant::now() + PHASE_LIMIT;
            let start = Instant::now();
            let (mut sent, mut acked) = (0u64, 0u64);
            let mut bufs = vec![Vec::new(); 32];
            while acked < BULK {
                assert!(
                    Instant::now() < deadline && !abort2.load(Ordering::Relaxed),
                    "sent {sent}, acknowledged {acked}; {:?}",
                    t.stats()
                );
                let room = (WINDOW - (sent - acked)).min(BULK - sent).min(32) as usize;
                for (k, buf) in bufs[..room].iter_mut().enumerate() {
                    data_frame(buf, a, b, sent + k as u64);
                }
                let refs: Vec<&[u8]> = bufs[..room].iter().map(|f| &f[..]).collect();
                send_all(&mut *t, &refs, deadline, &abort2);
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
        })
    };
    let receiver = {
        let abort2 = abort.clone();
        in_netns(&pair.ns[1], &abort, move || {
            let mut t = open(via, addr, 1, (tx1, rx1), &ready);
            let deadline = Instant::now() + PHASE_LIMIT;
            let (mut expect, mut acked) = (0u64, 0u64);
            while expect < BULK {
                assert!(
                    Instant::now() < deadline && !abort2.load(Ordering::Relaxed),
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
                    send_all(&mut *t, &[&ack_frame(b, a, expect)], deadline, &abort2);
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
        })
    };
    let s0 = sender.join().expect("sending host");
    let s1 = receiver.join().expect("receiving host");
    [s0, s1]
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn udp_ping_pong_between_namespaces() {
    let Some(pair) = pair_or_skip("udp_ping_pong_between_namespaces", "up", 1) else {
        return;
    };
    let [a, b] = ping_pong(&pair, Via::Udp);
    assert_eq!((a.tx_frames, a.rx_frames), (PINGS, PINGS));
    assert_eq!((b.tx_frames, b.rx_frames), (PINGS, PINGS));
    assert_eq!(a.rx_dropped + b.rx_dropped, 0);
}

#[test]
fn udp_bulk_transfer_between_namespaces_loses_nothing() {
    let Some(pair) = pair_or_skip(
        "udp_bulk_transfer_between_namespaces_loses_nothing",
        "ub",
        2,
    ) else {
        return;
    };
    let [a, b] = bulk(&pair, Via::Udp);
    assert_eq!((a.tx_frames, b.rx_frames), (BULK, BULK));
    assert_eq!(a.rx_frames, b.tx_frames, "every acknowledgement arrived");
    assert_eq!(b.rx_overruns + b.rx_dropped, 0);
}

#[test]
fn packet_ping_pong_between_namespaces_learns_the_peers_mac() {
    let Some(pair) = pair_or_skip(
        "packet_ping_pong_between_namespaces_learns_the_peers_mac",
        "pp",
        3,
    ) else {
        return;
    };
    let [a, b] = ping_pong(&pair, Via::Packet(false));
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
    let Some(pair) = pair_or_skip(
        "packet_bulk_transfer_between_namespaces_loses_nothing",
        "pb",
        4,
    ) else {
        return;
    };
    let [a, b] = bulk(&pair, Via::Packet(true));
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
    let Some(pair) = pair_or_skip(
        "packet_transport_counts_and_drops_frames_it_cannot_classify",
        "pd",
        5,
    ) else {
        return;
    };
    let abort = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(2));
    let (tx0, rx1) = mpsc::channel();
    let (tx1, rx0) = mpsc::channel();
    let addr = pair.addr;
    let (a, b) = (addr[0], addr[1]);
    let sender = {
        let (ready, abort2) = (ready.clone(), abort.clone());
        in_netns(&pair.ns[0], &abort, move || {
            let mut t = open(Via::Packet(true), addr, 0, (tx0, rx0), &ready);
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
            send_all(&mut *t, &[&bad, &good], deadline, &abort2);
            t.stats()
        })
    };
    let receiver = {
        let abort2 = abort.clone();
        in_netns(&pair.ns[1], &abort, move || {
            let mut t = open(Via::Packet(true), addr, 1, (tx1, rx1), &ready);
            let deadline = Instant::now() + PHASE_LIMIT;
            let mut got = 0;
            while got == 0 {
                assert!(Instant::now() < deadline && !abort2.load(Ordering::Relaxed));
                got += t
                    .recv(8, &mut |f| check_data(f, a, b, 0).expect("the good frame"))
                    .expect("recv");
                wait_readable(&*t, 1);
            }
            t.stats()
        })
    };
    let s0 = sender.join().expect("sender");
    let s1 = receiver.join().expect("receiver");
    assert_eq!(s0.tx_frames, 2);
    assert_eq!((s1.rx_frames, s1.rx_dropped), (1, 1));
}
