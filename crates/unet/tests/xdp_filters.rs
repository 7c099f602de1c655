//! The `xdp` transport's XDP program follows the engine's dpf table: over
//! two network namespaces, host B runs an engine on `xdp` and host A
//! sends it unet frames from its kernel's UDP sockets (a datagram whose
//! payload is a unet frame's bytes after the UDP header is that frame on
//! the wire). What the tests pin down:
//!
//! * a channel's frames reach its endpoint;
//! * a frame no installed filter accepts stays with B's kernel stack,
//!   even one to the engine's own address and port (a kernel socket bound
//!   there gets it, and the engine never sees it), as does a datagram to
//!   another port;
//! * installing a filter brings its frames to the engine before the call
//!   returns, and removing it gives them back to the kernel;
//! * once the channel closes (its endpoint goes), its frames go to the
//!   kernel's stack, not the engine;
//! * an endpoint that goes with several filters, taking with it the
//!   channel of another endpoint whose peer it was, costs one program swap
//!   and one wait for the old program's last runs, not one per filter,
//!   and none of those filters' frames reaches the engine afterwards.
//!
//! The tests need root, `ip` and AF_XDP with XDP on veth; without them
//! they print why and pass, unless `UNET_REQUIRE_NETNS=1` or
//! `UNET_REQUIRE_XDP=1`. Each creates its own namespaces and removes them
//! afterwards, also when it fails.
#![cfg(not(loom))]

use std::net::UdpSocket;
use std::time::{Duration, Instant};

// Only the host and skip helpers are used here.
#[allow(dead_code)]
mod common;
use common::{PHASE_LIMIT, xdp_or_skip};

use unet::frame::{Addr, EndpointId, FrameHeader, HEADER_LEN};
use unet::netns::TwoHosts;
use unet::transport::XdpTransport;
use unet::transport::xdp::ProgramCounts;
use unet::{Config, Endpoint, Engine};

/// The port of B's engine and of A's sending socket.
const PORT: u16 = 7000;
/// The endpoint A's frames claim to come from (slot 1, generation 1).
const A_EP: EndpointId = 0x0001_0001;
/// Bytes after the unet header in each frame.
const PAYLOAD: usize = 32;
/// Offset of the UDP payload in a frame: Ethernet, IPv4 and UDP headers.
const UDP_PAYLOAD: usize = 14 + 20 + 8;

/// The UDP payload of a unet frame from `src` (endpoint [`A_EP`]) to
/// endpoint `dst_ep` at `dst`, with the payload bytes all `fill`.
fn datagram(src: Addr, dst: Addr, dst_ep: EndpointId, fill: u8) -> Vec<u8> {
    let mut f = vec![fill; HEADER_LEN + PAYLOAD];
    FrameHeader::new(src, dst, dst_ep, A_EP)
        .write(PAYLOAD, &mut f)
        .expect("write the header");
    f.split_off(UDP_PAYLOAD)
}

/// Waits for the next message at `ep` and returns its channel and bytes.
fn next_message(ep: &mut Endpoint, what: &str) -> (u16, Vec<u8>) {
    let deadline = Instant::now() + PHASE_LIMIT;
    loop {
        if let Some(m) = ep.recv() {
            return (m.chan(), m.to_vec());
        }
        assert!(Instant::now() < deadline, "no message: {what}");
        std::thread::yield_now();
    }
}

/// Receives one datagram on a kernel socket (with its read timeout).
fn kernel_gets(sock: &UdpSocket, what: &str) -> (Vec<u8>, std::net::SocketAddr) {
    let mut buf = [0u8; 2048];
    let (n, from) = sock
        .recv_from(&mut buf)
        .unwrap_or_else(|e| panic!("{what}: the kernel's socket got nothing: {e}"));
    (buf[..n].to_vec(), from)
}

/// A small endpoint's configuration.
fn small() -> Config {
    Config {
        buffers: 8,
        buffer_size: 1024,
        tx_depth: 8,
        rx_depth: 8,
        free_depth: 8,
    }
}

/// Frames the engine has taken from its transport, after a few polls.
fn engine_frames_in(engine: &Engine, ep: &mut Endpoint) -> u64 {
    for _ in 0..64 {
        ep.poll_engine();
    }
    engine.counts().frames_in
}

#[test]
fn the_xdp_program_follows_the_engines_filter_table() {
    let test = "the_xdp_program_follows_the_engines_filter_table";
    let Some(hosts) = TwoHosts::for_test(test)
        .unwrap_or_else(|e| panic!("{test}: {e} (and UNET_REQUIRE_NETNS=1)"))
    else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let [ha, hb] = hosts.hosts();
    let (a_addr, b_addr) = (ha.addr(PORT), hb.addr(PORT));
    let a_other = ha.addr(PORT + 2);
    // B: the engine on xdp, an endpoint with a channel to A's endpoint,
    // and kernel sockets on the engine's port and the next one.
    let (engine, mut ep, chan, b_engine_port, b_next_port) = hb
        .run(|| {
            let mut x = XdpTransport::open(&hb.ifname, b_addr).expect("open the xdp transport");
            x.add_neighbor(ha.ip, ha.mac);
            let engine = Engine::new(Box::new(x));
            let config = Config {
                buffers: 64,
                buffer_size: 1024,
                tx_depth: 64,
                rx_depth: 64,
                free_depth: 64,
            };
            let mut ep = engine
                .create_endpoint(config, None)
                .expect("create the endpoint");
            let chan = ep.open_channel(a_addr, A_EP).expect("open the channel");
            let bind = |port| {
                let s = UdpSocket::bind((hb.ip, port)).expect("bind a kernel socket in B");
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                s
            };
            (engine, ep, chan, bind(PORT), bind(PORT + 1))
        })
        .expect("enter B");
    let (a_main, a_side) = ha
        .run(|| {
            (
                UdpSocket::bind((ha.ip, PORT)).expect("bind in A"),
                UdpSocket::bind((ha.ip, PORT + 2)).expect("bind in A"),
            )
        })
        .expect("enter A");
    let to_b = (hb.ip, PORT);

    // The channel's frames reach its endpoint.
    a_main
        .send_to(&datagram(a_addr, b_addr, ep.id(), 1), to_b)
        .unwrap();
    let (got_chan, msg) = next_message(&mut ep, "the channel's frame");
    assert_eq!((got_chan, msg), (chan, vec![1u8; PAYLOAD]));

    // A unet frame to the engine's address and port that no filter
    // accepts (it comes from another port of A) stays in B's kernel.
    let before = engine_frames_in(&engine, &mut ep);
    let stray = datagram(a_other, b_addr, ep.id(), 2);
    a_side.send_to(&stray, to_b).unwrap();
    let (got, from) = kernel_gets(&b_engine_port, "a frame no filter accepts");
    assert_eq!((got, from.port()), (stray.clone(), PORT + 2));
    // So does a datagram to another port.
    a_main.send_to(b"to the stack", (hb.ip, PORT + 1)).unwrap();
    let (got, _) = kernel_gets(&b_next_port, "a datagram to another port");
    assert_eq!(got, b"to the stack");
    assert_eq!(
        engine_frames_in(&engine, &mut ep),
        before,
        "the engine saw frames the kernel kept"
    );

    // A filter installed for those frames brings them to the endpoint...
    let extra = ep
        .install_filter(chan, &format!("udp and udp src port {}", PORT + 2), 1)
        .expect("install a filter");
    a_side.send_to(&stray, to_b).unwrap();
    let (got_chan, msg) = next_message(&mut ep, "a frame of the installed filter");
    assert_eq!((got_chan, msg), (chan, vec![2u8; PAYLOAD]));
    // ...and once it is removed they are the kernel's again.
    ep.remove_filter(extra).expect("remove the filter");
    let before = engine_frames_in(&engine, &mut ep);
    a_side.send_to(&stray, to_b).unwrap();
    let (got, _) = kernel_gets(&b_engine_port, "a frame of the removed filter");
    assert_eq!(got, stray);
    assert_eq!(engine_frames_in(&engine, &mut ep), before);

    // The channel closes with its endpoint: its frames then go to the
    // kernel's stack, not the engine.
    let id = ep.id();
    let mut spare = hb
        .run(|| {
            engine
                .create_endpoint(
                    Config {
                        buffers: 8,
                        buffer_size: 1024,
                        tx_depth: 8,
                        rx_depth: 8,
                        free_depth: 8,
                    },
                    None,
                )
                .expect("create a second endpoint")
        })
        .expect("enter B");
    drop(ep);
    let before = engine_frames_in(&engine, &mut spare);
    let late = datagram(a_addr, b_addr, id, 3);
    a_main.send_to(&late, to_b).unwrap();
    let (got, from) = kernel_gets(&b_engine_port, "a frame of the closed channel");
    assert_eq!((got, from.port()), (late, PORT));
    assert_eq!(
        engine_frames_in(&engine, &mut spare),
        before,
        "the engine saw a frame of the closed channel"
    );
}

#[test]
fn an_endpoint_with_several_filters_goes_in_one_program_swap() {
    let test = "an_endpoint_with_several_filters_goes_in_one_program_swap";
    let Some(hosts) = TwoHosts::for_test(test)
        .unwrap_or_else(|e| panic!("{test}: {e} (and UNET_REQUIRE_NETNS=1)"))
    else {
        return;
    };
    if !xdp_or_skip(&hosts, test) {
        return;
    }
    let [ha, hb] = hosts.hosts();
    let (a_addr, b_addr) = (ha.addr(PORT), hb.addr(PORT));
    // B: endpoint `ep` with a channel to A's endpoint and three more
    // filters on it, and a channel each way with a second endpoint of the
    // same engine: six filters, all going when `ep` goes.
    let (engine, counts, ep, mut other, kernel) = hb
        .run(|| {
            let mut x = XdpTransport::open(&hb.ifname, b_addr).expect("open the xdp transport");
            x.add_neighbor(ha.ip, ha.mac);
            let counts: ProgramCounts = x.program_counts();
            let engine = Engine::new(Box::new(x));
            let mut ep = engine.create_endpoint(small(), None).expect("endpoint");
            let mut other = engine.create_endpoint(small(), None).expect("endpoint");
            let chan = ep.open_channel(a_addr, A_EP).expect("open the channel");
            for port in [PORT + 2, PORT + 3, PORT + 4] {
                ep.install_filter(chan, &format!("udp and udp src port {port}"), 1)
                    .expect("install a filter");
            }
            ep.open_channel(b_addr, other.id())
                .expect("a local channel");
            other
                .open_channel(b_addr, ep.id())
                .expect("a local channel");
            let s = UdpSocket::bind((hb.ip, PORT)).expect("bind a kernel socket in B");
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            (engine, counts, ep, other, s)
        })
        .expect("enter B");
    let a_side = ha
        .run(|| UdpSocket::bind((ha.ip, PORT + 3)).expect("bind in A"))
        .expect("enter A");
    let (swaps, waits) = (counts.swaps(), counts.grace_periods());
    assert!(swaps >= 6, "each install swapped the program ({swaps})");

    let id = ep.id();
    drop(ep);
    assert_eq!(
        (counts.swaps() - swaps, counts.grace_periods() - waits),
        (1, 1),
        "six filters went in one swap and one grace period"
    );
    // The other endpoint's channel to it closed with it.
    assert_eq!(engine.closed_channels(other.id()).unwrap(), vec![0]);
    // None of the removed filters' frames reaches the engine any more.
    let before = engine_frames_in(&engine, &mut other);
    let late = datagram(ha.addr(PORT + 3), b_addr, id, 4);
    a_side.send_to(&late, (hb.ip, PORT)).unwrap();
    let (got, from) = kernel_gets(&kernel, "a frame of a removed filter");
    assert_eq!((got, from.port()), (late, PORT + 3));
    assert_eq!(engine_frames_in(&engine, &mut other), before);
}
