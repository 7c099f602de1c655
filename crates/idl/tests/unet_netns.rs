//! The generated pfs stubs calling a server on another host over unet:
//! two hosts are two network namespaces joined by a veth pair
//! ([`unet::netns::TwoHosts`]), each with a unet engine on the `udp`
//! transport (kernel UDP sockets) bound to its end of the pair. Host A
//! runs the generated `pfs::serve` over an [`idl::rt::unet::ServerEnd`],
//! host B the client stubs over an [`idl::rt::unet::ClientEnd`], each on a
//! thread inside its namespace; every result is checked against the same
//! call on a local server object, and at the end the client closes, the
//! server loop ends cleanly and the remote server's files equal the local
//! ones. (tests/roundtrip.rs runs the same stubs over unet's in-process
//! `loop` transport.)
//!
//! The sizes: the endpoints have unet's default buffers of 4 KiB, so an
//! endpoint's largest message is 14 of them, 57,344 bytes, below the
//! `udp` transport's largest payload (65,499 bytes: a 65,535-byte IPv4
//! datagram less the IPv4, UDP and unet headers); the channel has idl's
//! default configuration, a 4 KiB record and a 48 KiB string area, so the
//! largest message is 24 + 4,096 + 49,152 = 53,272 bytes. An `int`
//! array of up to [`MAX_INTS`] = 12,288 elements fits the area; a pfs
//! message carrying a full one (about 49.2 KB: header, a small record, the
//! array) spans 13 receive buffers and travels as one UDP datagram that
//! the kernel fragments to the veth MTU of 1,500 and reassembles. One
//! element more is refused: by the client stub for an in array
//! ([`CallError::AreaFull`], nothing sent) and by the server for an out
//! array ([`Status::Overflow`]); both are checked once, and the channel
//! goes on working.
//!
//! The namespaces are removed when the `TwoHosts` value is dropped, also
//! when the test fails. The test needs root and `ip` (iproute2); without
//! them it prints why and passes, unless `UNET_REQUIRE_NETNS=1`, which
//! makes that a failure.

use std::sync::mpsc;
use std::time::Duration;

use idl::rt::unet::{ClientEnd, Config, ServerEnd};
use idl::rt::{CallError, OutSeq, Status};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use unet::netns::{Host, TwoHosts};
use unet::transport::{Transport, UdpTransport};
use unet::{Endpoint, Engine};

#[allow(dead_code)]
mod gen_pfs {
    include!("idl/pfs.rs");
}

use gen_pfs::pfs;
use pfs::Server as _;

/// The UDP port of both engines.
const PORT: u16 = 7000;
/// Random calls after the scripted ones.
const CALLS: usize = 400;
/// The most `int`s an array may have: the whole string area.
const MAX_INTS: usize = (48 << 10) / 4;

/// The hosts, or `None` (and a printed reason) when the machine cannot
/// make them; with `UNET_REQUIRE_NETNS=1` that is a failure.
fn hosts_or_skip(test: &str) -> Option<TwoHosts> {
    TwoHosts::for_test(test).unwrap_or_else(|e| panic!("{test}: {e} (and UNET_REQUIRE_NETNS=1)"))
}

/// One side of a two-way exchange between the hosts' threads. If the other
/// side has ended (panicked), the exchange panics instead of waiting.
struct Meet {
    tx: mpsc::Sender<u32>,
    rx: mpsc::Receiver<u32>,
}

fn meeting() -> (Meet, Meet) {
    let (ta, rb) = mpsc::channel();
    let (tb, ra) = mpsc::channel();
    (Meet { tx: ta, rx: ra }, Meet { tx: tb, rx: rb })
}

impl Meet {
    /// Gives `v` to the other side and returns what it gave.
    fn swap(&self, v: u32) -> u32 {
        self.tx.send(v).expect("the other host gave up");
        self.rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the other host gave up")
    }
}

/// `host`'s endpoint on an engine on the `udp` transport bound to its veth
/// address (the caller is a thread inside its namespace), and a channel to
/// the other host's endpoint. Both channels are open when this returns.
fn endpoint(host: &Host, peer: &Host, meet: &Meet) -> (Endpoint, u16) {
    let t = UdpTransport::bind(host.addr(PORT)).expect("bind the udp transport");
    assert_eq!(t.local(), host.addr(PORT));
    let mut ep = Engine::new(Box::new(t))
        .create_endpoint(unet::Config::default(), None)
        .expect("create the endpoint");
    assert_eq!(ep.max_message(), 14 * 4096, "14 buffers of 4 KiB");
    let peer_ep = meet.swap(ep.id());
    let chan = ep
        .open_channel(peer.addr(PORT), peer_ep)
        .expect("open the channel");
    (ep, chan)
}

// ---------------------------------------------------------------- pfs

/// A file server of the paper's pfs calls: files of `i32` words (as in
/// tests/roundtrip.rs).
#[derive(Clone, Default, Debug, PartialEq)]
struct Pfs {
    files: Vec<Vec<i32>>,
}

impl pfs::Server for Pfs {
    fn pfs_open(&mut self, client: i32, fobj: i32, flags: i32, mode: i32, handle: &mut i32) -> i32 {
        self.files.push(vec![client, fobj, flags, mode]);
        *handle = self.files.len() as i32 - 1;
        0
    }

    fn pfs_write(&mut self, handle: i32, pos: &mut i32, len: i32, data: &[i32]) -> i32 {
        let Some(f) = self.files.get_mut(handle as usize) else {
            return -1;
        };
        let at = (*pos).max(0) as usize;
        let n = (len.max(0) as usize).min(data.len());
        if f.len() < at + n {
            f.resize(at + n, 0);
        }
        f[at..at + n].copy_from_slice(&data[..n]);
        *pos = (at + n) as i32;
        n as i32
    }

    fn pfs_get_direntries(
        &mut self,
        handle: i32,
        pos: &mut i32,
        count: i32,
        data: &mut OutSeq<'_, i32>,
    ) -> i32 {
        let Some(f) = self.files.get(handle as usize) else {
            return -1;
        };
        let at = ((*pos).max(0) as usize).min(f.len());
        let n = (count.max(0) as usize).min(f.len() - at);
        if data.extend_from_slice(&f[at..at + n]).is_err() {
            return -2;
        }
        *pos = (at + n) as i32;
        n as i32
    }
}

/// The client's side: calls through `c`, each checked against `local`.
struct Calls<'a> {
    c: &'a mut ClientEnd,
    local: Pfs,
    /// Calls that went over the wire (and were answered).
    sent: u64,
}

impl Calls<'_> {
    fn open(&mut self, a: [i32; 4]) {
        let (mut h, mut hl) = (0, 0);
        let r = pfs::pfs_open(self.c, a[0], a[1], a[2], a[3], &mut h).expect("pfs_open");
        self.sent += 1;
        let rl = self.local.pfs_open(a[0], a[1], a[2], a[3], &mut hl);
        assert_eq!((r, h), (rl, hl), "pfs_open{a:?}");
    }

    fn write(&mut self, handle: i32, pos: i32, len: i32, data: &[i32]) {
        let (mut p, mut pl) = (pos, pos);
        let r = pfs::pfs_write(self.c, handle, &mut p, len, data).unwrap_or_else(|e| {
            panic!(
                "pfs_write({handle}, {pos}, {len}, {} ints): {e}",
                data.len()
            )
        });
        self.sent += 1;
        let rl = self.local.pfs_write(handle, &mut pl, len, data);
        assert_eq!(
            (r, p),
            (rl, pl),
            "pfs_write({handle}, {pos}, {len}, {} ints)",
            data.len()
        );
    }

    fn get(&mut self, handle: i32, pos: i32, count: i32) {
        let (mut p, mut pl) = (pos, pos);
        // The vector's old contents are replaced, not appended to.
        let mut data = vec![7; 3];
        let r = pfs::pfs_get_direntries(self.c, handle, &mut p, count, &mut data)
            .unwrap_or_else(|e| panic!("pfs_get_direntries({handle}, {pos}, {count}): {e}"));
        self.sent += 1;
        let mut buf = vec![0; MAX_INTS];
        let mut w = OutSeq::new(&mut buf);
        let rl = self
            .local
            .pfs_get_direntries(handle, &mut pl, count, &mut w);
        assert_eq!(
            (r, p, &data[..]),
            (rl, pl, w.as_mut_slice() as &[i32]),
            "pfs_get_direntries({handle}, {pos}, {count})"
        );
    }
}

/// An array length: empty, short, around one 4 KiB unet buffer, or up to
/// the whole string area (13 or 14 buffers, a fragmented UDP datagram).
fn length(rng: &mut StdRng) -> usize {
    match rng.random_range(0..8) {
        0 => 0,
        1 => rng.random_range(1..16),
        2 | 3 => rng.random_range(16..1100),
        4 => MAX_INTS - rng.random_range(0..4),
        _ => rng.random_range(1100..=MAX_INTS),
    }
}

/// The client's calls: scripted edge cases, then [`CALLS`] random ones.
/// Returns its local server (to compare with the remote one) and how many
/// calls went over the wire.
fn client(c: &mut ClientEnd, rng: &mut StdRng) -> (Pfs, u64) {
    let mut k = Calls {
        c,
        local: Pfs::default(),
        sent: 0,
    };
    // A file, an empty write, the largest write, and reading it back
    // whole (a request and a reply of 13 buffers each).
    k.open([1, 2, 3, 4]);
    k.write(0, 0, 0, &[]);
    let big: Vec<i32> = (0..MAX_INTS).map(|_| rng.random()).collect();
    k.write(0, 0, MAX_INTS as i32, &big);
    k.get(0, 0, MAX_INTS as i32);
    k.get(0, 0, 0);
    // One int too many, each way: refused, and nothing changes.
    let over: Vec<i32> = vec![5; MAX_INTS + 1];
    let mut pos = 0;
    let e = pfs::pfs_write(k.c, 0, &mut pos, 1, &over).expect_err("an in array too large");
    assert!(matches!(e, CallError::AreaFull { .. }), "{e}");
    k.write(0, MAX_INTS as i32, 4, &[9, 8, 7, 6]); // the file now has MAX_INTS + 4
    let mut data = Vec::new();
    let e = pfs::pfs_get_direntries(k.c, 0, &mut pos, MAX_INTS as i32 + 1, &mut data)
        .expect_err("an out array too large");
    assert_eq!(e.status(), Some(Status::Overflow), "{e}");
    k.sent += 1;
    k.get(0, 4, MAX_INTS as i32);
    // Random calls.
    for _ in 0..CALLS {
        let files = k.local.files.len() as i32;
        match rng.random_range(0..4) {
            0 => k.open(rng.random()),
            1 | 2 => {
                let handle = rng.random_range(-1..files + 1);
                let data: Vec<i32> = (0..length(rng)).map(|_| rng.random()).collect();
                let len = rng.random_range(-1..data.len() as i32 + 2);
                k.write(handle, rng.random_range(0..100), len, &data);
            }
            _ => {
                let handle = rng.random_range(-1..files + 1);
                let count = length(rng) as i32 - rng.random_range(0..2);
                k.get(handle, rng.random_range(0..200), count);
            }
        }
    }
    (k.local, k.sent)
}

#[test]
fn pfs_stubs_call_a_server_on_another_host_over_udp() {
    let Some(hosts) = hosts_or_skip("pfs_stubs_call_a_server_on_another_host_over_udp") else {
        return;
    };
    let [ha, hb] = hosts.hosts();
    let config = Config::default();
    let (ma, mb) = meeting();
    let server = move || {
        let (ep, _chan) = endpoint(ha, hb, &ma);
        let mut s = ServerEnd::new(ep, &config).expect("server end");
        // Serve only once the client's end exists: from then on, a panic
        // on the client's side drops it, which closes the channel.
        ma.swap(0);
        let mut pfs = Pfs::default();
        let ended = pfs::serve(&mut pfs, &mut s);
        (ended, pfs)
    };
    let caller = move || {
        let (ep, chan) = endpoint(hb, ha, &mb);
        let mut c = ClientEnd::new(ep, chan, &config).expect("client end");
        c.set_timeout(Some(Duration::from_secs(10)));
        mb.swap(0);
        let mut rng = StdRng::seed_from_u64(0x1d1_0e75);
        let (local, sent) = client(&mut c, &mut rng);
        let counts = c.endpoint().counts();
        c.close();
        (local, sent, counts)
    };
    let ((ended, remote), (local, sent, counts)) = hosts
        .run_both(server, caller)
        .expect("enter the namespaces");
    ended.expect("the server loop ends cleanly when the client closes");
    assert_eq!(remote, local, "the remote server saw the same calls");
    assert!(sent > CALLS as u64, "{sent} calls");
    // One request out and one reply in per call, no message lost or
    // dropped (the close is not counted: it went out after the counts).
    assert_eq!((counts.tx_frames, counts.rx_delivered), (sent, sent));
    assert_eq!(
        counts.rx_no_buffer + counts.rx_queue_full + counts.rx_too_long + counts.rx_bad_checksum,
        0,
        "{counts:?}"
    );
}
