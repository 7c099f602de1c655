//! `packet`: whole Ethernet frames on a network interface through an
//! `AF_PACKET` socket with memory-mapped rings (`PACKET_MMAP`,
//! `TPACKET_V2`; see the kernel's `Documentation/networking/packet_mmap.rst`).
//!
//! This is the closest a user-level engine gets to U-Net's network
//! interface (§2): the kernel writes arriving frames straight into a
//! receive ring shared with the engine, and sends the frames the engine
//! writes into a transmit ring, with one system call per batch (a
//! `sendto` with `MSG_DONTWAIT` that "kicks" the ring) and none per frame
//! on the receive side.
//!
//! * **Receive.** The socket is bound to one interface and to ethertype
//!   IPv4. A classic BPF socket filter (on by default,
//!   [`PacketConfig::kernel_filter`]) admits only unfragmented IPv4/UDP to
//!   this transport's address and port, so that other traffic never takes
//!   ring space (the kernel drops it uncounted: it is not ours). Every
//!   frame that reaches the ring is checked again here: a frame the kernel
//!   truncated, one that is not IPv4 with a 20-byte header and protocol
//!   UDP, or shorter than the unet header, is dropped and counted in
//!   [`TransportStats::rx_dropped`]; frames this host sends are not
//!   received (`PACKET_IGNORE_OUTGOING`, and a check of the packet type).
//!   Ring overruns the kernel reports (`PACKET_STATISTICS`) are counted in
//!   [`TransportStats::rx_overruns`].
//! * **Transmit.** A frame is copied into the next free slot of the TX ring
//!   with its Ethernet source set to the interface's MAC and its
//!   destination set to the peer's MAC, found in a small neighbour table:
//!   entries given with [`add_neighbor`](PacketTransport::add_neighbor)
//!   (never replaced), else learned from the source addresses of frames
//!   received (the way a switch learns), else read from the kernel's ARP
//!   cache (`/proc/thread-self/net/arp`, at most every 100 ms), else the
//!   broadcast MAC (counted in [`TransportStats::tx_broadcast`]): the peer
//!   still receives the frame and, once it answers, the answer teaches the
//!   table the peer's MAC. Broadcast and multicast IPv4 destinations use
//!   the matching group MAC.
//! * **The kernel's own stack** also sees the frames (an `AF_PACKET`
//!   socket taps, it does not divert). So that it neither answers them
//!   with ICMP "port unreachable" nor lets another program take the port,
//!   the transport by default binds an ordinary UDP socket to its address
//!   with the smallest receive buffer and never reads it
//!   ([`PacketConfig::reserve_port`]; best effort: it is skipped when the
//!   address is not local).
//!
//! The largest frame is the interface's MTU plus the 14-byte Ethernet
//! header. The rings use one `mmap` of the socket: the RX ring, then the
//! TX ring. All of this transport's `unsafe` is in this module; the ring
//! walking code checks every offset and length the kernel writes before
//! using it.

use std::cell::Cell;
use std::collections::HashMap;
use std::mem::{size_of, zeroed};
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::{Transport, TransportError, TransportStats, check_frame_len};
use crate::frame::{
    Addr, ETH_DST, ETH_SRC, ETH_TYPE, ETHERTYPE_IPV4, HEADER_LEN, IP, IP_DST, IP_PROTO, IP_SRC,
    IPPROTO_UDP, IPV4_VERSION_IHL, MacAddr,
};

/// Ring sizes and options of a [`PacketTransport`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketConfig {
    /// Bytes of the receive ring (rounded down to whole blocks, at least
    /// one). Default 4 MiB: 2048 frames at an MTU of 1500.
    pub rx_ring_bytes: usize,
    /// Bytes of the transmit ring. Default 1 MiB.
    pub tx_ring_bytes: usize,
    /// Attach a socket filter that admits only unfragmented IPv4/UDP to
    /// this transport's address and port. Default on.
    pub kernel_filter: bool,
    /// Bind a UDP socket to the address so that the kernel's stack neither
    /// answers with ICMP nor gives the port to another program. Default on.
    pub reserve_port: bool,
}

impl Default for PacketConfig {
    fn default() -> Self {
        PacketConfig {
            rx_ring_bytes: 4 << 20,
            tx_ring_bytes: 1 << 20,
            kernel_filter: true,
            reserve_port: true,
        }
    }
}

/// Bytes of the `tpacket2_hdr` that starts every ring frame.
const TP2_HDR: usize = size_of::<libc::tpacket2_hdr>();
/// Offset of the `sockaddr_ll` after it (`TPACKET_ALIGN(sizeof hdr)`).
const TP2_SLL: usize = TP2_HDR.next_multiple_of(libc::TPACKET_ALIGNMENT);
/// Offset of `sll_pkttype` in the `sockaddr_ll`.
const SLL_PKTTYPE: usize = 10;
/// Offset of a frame's data in a TX slot (`TPACKET2_HDRLEN - sizeof(struct
/// sockaddr_ll)`, as the kernel computes it without `PACKET_TX_HAS_OFF`).
const TX_DATA: usize = libc::TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>();
/// Offset of the network header in an RX slot for an Ethernet frame:
/// `TPACKET_ALIGN(TPACKET2_HDRLEN + 16)`; the frame starts 14 bytes before.
const RX_NET: usize = (libc::TPACKET2_HDRLEN + 16).next_multiple_of(libc::TPACKET_ALIGNMENT);
/// Ethernet header bytes.
const ETH_HLEN: usize = 14;
/// How often a missing neighbour may be looked up in the ARP cache.
const ARP_RETRY: Duration = Duration::from_millis(100);
/// Learned neighbours kept before the learned part of the table is cleared.
const NEIGHBORS_MAX: usize = 4096;

/// One memory-mapped region of the socket, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by one `PacketTransport`, which accesses it
// only through `&mut self` (or `&self` for reads that race with nothing of
// ours); moving it to another thread moves that ownership.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what `mmap` returned and are
        // unmapped once; no slice into the mapping outlives `self` (the
        // slices handed to callbacks live only during `recv`).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

impl Mapping {
    /// The status word of slot `i` of `ring`.
    fn status(&self, ring: &Ring, i: usize) -> &AtomicU32 {
        debug_assert!(i < ring.frame_nr);
        let off = ring.offset + i * ring.frame_size;
        // SAFETY: `off` is a slot start inside the mapping (`i < frame_nr`,
        // and the rings' frames fit in their blocks); slots are 16-byte
        // aligned in a page-aligned mapping, so the u32 status at the
        // slot's start is aligned. The kernel accesses it concurrently, so
        // it is only ever accessed atomically here.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast()) }
    }

    /// A pointer to byte `at` of slot `i` of `ring`; `at` must be below the
    /// frame size.
    fn slot_ptr(&self, ring: &Ring, i: usize, at: usize) -> *mut u8 {
        debug_assert!(i < ring.frame_nr && at < ring.frame_size);
        // SAFETY: inside the mapping, as in `status`.
        unsafe {
            self.ptr
                .as_ptr()
                .add(ring.offset + i * ring.frame_size + at)
        }
    }
}

/// Geometry and position of one ring inside the mapping.
#[derive(Copy, Clone, Debug)]
struct Ring {
    /// Offset of the ring in the mapping.
    offset: usize,
    frame_size: usize,
    frame_nr: usize,
    /// The next slot to look at.
    next: usize,
}

/// The neighbour table: IPv4 address to MAC (the `xdp` transport's too).
#[derive(Debug)]
pub(super) struct Neighbors {
    ifname: String,
    /// `true`: given by `add_neighbor` (never replaced by learning).
    table: HashMap<Ipv4Addr, (MacAddr, bool)>,
    /// The last resolution, checked before the table.
    last_tx: Option<(Ipv4Addr, MacAddr)>,
    /// The last learned pair, so that a stream from one peer costs one
    /// comparison per frame.
    last_rx: Option<(Ipv4Addr, MacAddr)>,
    /// When the ARP cache was last read for a missing neighbour.
    arp_read: Option<Instant>,
}

impl Neighbors {
    /// An empty table for interface `ifname` (whose ARP cache it reads).
    pub(super) fn new(ifname: &str) -> Neighbors {
        Neighbors {
            ifname: ifname.to_string(),
            table: HashMap::new(),
            last_tx: None,
            last_rx: None,
            arp_read: None,
        }
    }

    /// The MAC of `ip`: given, learned, from the ARP cache, or a group
    /// MAC; `None` when unknown.
    pub(super) fn resolve(&mut self, ip: Ipv4Addr) -> Option<MacAddr> {
        if let Some((_, m)) = self.last_tx.filter(|&(i, _)| i == ip) {
            return Some(m);
        }
        let o = ip.octets();
        let mac = if ip.is_broadcast() {
            Some(MacAddr::BROADCAST)
        } else if ip.is_multicast() {
            Some(MacAddr([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]))
        } else if let Some(&(m, _)) = self.table.get(&ip) {
            Some(m)
        } else if self.arp_read.is_none_or(|t| t.elapsed() >= ARP_RETRY) {
            self.arp_read = Some(Instant::now());
            let m = arp_cache_lookup(&self.ifname, ip);
            if let Some(m) = m {
                self.insert_learned(ip, m);
            }
            m
        } else {
            None
        };
        if let Some(m) = mac {
            self.last_tx = Some((ip, m));
        }
        mac
    }

    /// Learns `ip`'s MAC from a frame it sent (unless given).
    pub(super) fn learn(&mut self, ip: Ipv4Addr, mac: MacAddr) {
        if self.last_rx == Some((ip, mac)) {
            return;
        }
        self.last_rx = Some((ip, mac));
        if mac.is_multicast() || ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
            return;
        }
        match self.table.get(&ip) {
            Some(&(_, true)) => {}
            Some(&(m, false)) if m == mac => {}
            _ => self.insert_learned(ip, mac),
        }
    }

    /// Learns the sender of an accepted frame: its IPv4 source address and
    /// Ethernet source MAC (see [`Neighbors::learn`]).
    pub(super) fn learn_sender(&mut self, frame: &[u8]) {
        let ip = Ipv4Addr::new(
            frame[IP_SRC],
            frame[IP_SRC + 1],
            frame[IP_SRC + 2],
            frame[IP_SRC + 3],
        );
        let mut m = [0u8; 6];
        m.copy_from_slice(&frame[ETH_SRC..ETH_SRC + 6]);
        self.learn(ip, MacAddr(m));
    }

    /// The MAC of the IPv4 destination a frame carries (see
    /// [`Neighbors::resolve`]); `None` when unknown.
    pub(super) fn resolve_dst(&mut self, frame: &[u8]) -> Option<MacAddr> {
        self.resolve(Ipv4Addr::new(
            frame[IP_DST],
            frame[IP_DST + 1],
            frame[IP_DST + 2],
            frame[IP_DST + 3],
        ))
    }

    /// Sets `ip`'s MAC, never replaced by learning.
    pub(super) fn give(&mut self, ip: Ipv4Addr, mac: MacAddr) {
        self.table.insert(ip, (mac, true));
        self.last_tx = None;
    }

    /// Forgets `ip`.
    pub(super) fn forget(&mut self, ip: Ipv4Addr) {
        self.table.remove(&ip);
        self.last_tx = None;
        self.last_rx = None;
    }

    /// The MAC known for `ip` (given or learned), if any.
    pub(super) fn get(&self, ip: Ipv4Addr) -> Option<MacAddr> {
        self.table.get(&ip).map(|&(m, _)| m)
    }

    fn insert_learned(&mut self, ip: Ipv4Addr, mac: MacAddr) {
        if self.table.len() >= NEIGHBORS_MAX {
            self.table.retain(|_, (_, fixed)| *fixed);
        }
        self.table.insert(ip, (mac, false));
        if self.last_tx.is_some_and(|(i, _)| i == ip) {
            self.last_tx = None;
        }
    }
}

/// Looks `ip` up in the kernel's ARP cache of the calling thread's network
/// namespace, for interface `ifname`: a complete entry (flag ATF_COM).
fn arp_cache_lookup(ifname: &str, ip: Ipv4Addr) -> Option<MacAddr> {
    // thread-self: the namespace of this thread, which may differ from the
    // process's (setns in one thread).
    let text = std::fs::read_to_string("/proc/thread-self/net/arp").ok()?;
    parse_arp_cache(&text, ifname, ip)
}

/// Finds `ip` on `ifname` in the text of `/proc/net/arp`.
fn parse_arp_cache(text: &str, ifname: &str, ip: Ipv4Addr) -> Option<MacAddr> {
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [addr, _hwtype, flags, hw, _mask, dev] = f[..] else {
            continue;
        };
        let complete =
            u32::from_str_radix(flags.trim_start_matches("0x"), 16).is_ok_and(|fl| fl & 0x2 != 0);
        if dev != ifname || !complete || addr.parse::<Ipv4Addr>() != Ok(ip) {
            continue;
        }
        let bytes: Vec<u8> = hw
            .split(':')
            .filter_map(|b| u8::from_str_radix(b, 16).ok())
            .collect();
        if let Ok(m) = <[u8; 6]>::try_from(bytes) {
            return Some(MacAddr(m));
        }
    }
    None
}

/// A raw Ethernet transport on one interface: the `packet` [`Transport`].
pub struct PacketTransport {
    map: Mapping,
    fd: OwnedFd,
    ifname: String,
    ifindex: i32,
    mac: MacAddr,
    mtu: usize,
    local: Addr,
    rx: Ring,
    tx: Ring,
    neighbors: Neighbors,
    reservation: Option<OwnedFd>,
    stats: TransportStats,
    /// Ring overruns read from `PACKET_STATISTICS` (which resets on read).
    overruns: Cell<u64>,
}

impl std::fmt::Debug for PacketTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketTransport")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("mac", &self.mac)
            .field("mtu", &self.mtu)
            .field("local", &self.local)
            .field("rx", &self.rx)
            .field("tx", &self.tx)
            .field("stats", &self.stats)
            .finish()
    }
}

fn setsockopt<T>(fd: RawFd, level: i32, name: i32, value: &T) -> std::io::Result<()> {
    // SAFETY: `value` is a live `T` whose size is passed; the kernel reads
    // at most that many bytes.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// An `ifreq` naming `ifname`, checked for length and NUL bytes.
fn ifreq(ifname: &str) -> Result<libc::ifreq, TransportError> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(TransportError::Config {
            kind: "packet",
            what: format!(
                "interface name {ifname:?} must be 1 to {} bytes without NUL",
                libc::IFNAMSIZ - 1
            ),
        });
    }
    // SAFETY: all-zero is a valid `ifreq` (a name and a union of plain
    // data).
    let mut req: libc::ifreq = unsafe { zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(req)
}

fn ioctl(fd: RawFd, req: libc::c_ulong, ifr: &mut libc::ifreq) -> std::io::Result<()> {
    // SAFETY: the interface ioctls used here read the name and write one
    // member of the `ifreq` union, all inside `*ifr`.
    let r = unsafe { libc::ioctl(fd, req as _, ifr as *mut libc::ifreq) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A classic BPF program admitting unfragmented IPv4/UDP frames to
/// `addr` (any destination address if it is 0.0.0.0) and port.
fn socket_filter(addr: Addr) -> Vec<libc::sock_filter> {
    const LD_H_ABS: u16 = (libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) as u16;
    const LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const LD_H_IND: u16 = (libc::BPF_LD | libc::BPF_H | libc::BPF_IND) as u16;
    const LDX_MSH: u16 = (libc::BPF_LDX | libc::BPF_B | libc::BPF_MSH) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    // (code, k, jump-to-drop-if-true, jump-to-drop-if-false)
    let mut prog: Vec<(u16, u32, bool, bool)> = vec![
        (LD_H_ABS, ETH_TYPE as u32, false, false),
        (JEQ, u32::from(ETHERTYPE_IPV4), false, true),
        (LD_B_ABS, IP_PROTO as u32, false, false),
        (JEQ, u32::from(IPPROTO_UDP), false, true),
        (LD_H_ABS, crate::frame::IP_FRAG as u32, false, false),
        (JSET, 0x3fff, true, false),
    ];
    if !addr.ip.is_unspecified() {
        prog.push((LD_W_ABS, IP_DST as u32, false, false));
        prog.push((JEQ, u32::from(addr.ip), false, true));
    }
    // X = IP header length; the UDP destination port is at 14 + X + 2.
    prog.push((LDX_MSH, IP as u32, false, false));
    prog.push((LD_H_IND, (IP + 2) as u32, false, false));
    prog.push((JEQ, u32::from(addr.port), false, true));
    let accept = prog.len();
    let drop = accept + 1;
    let mut out: Vec<libc::sock_filter> = prog
        .iter()
        .enumerate()
        .map(|(pc, &(code, k, dt, df))| {
            let to_drop = (drop - pc - 1) as u8;
            libc::sock_filter {
                code,
                jt: if dt { to_drop } else { 0 },
                jf: if df { to_drop } else { 0 },
                k,
            }
        })
        .collect();
    out.push(libc::sock_filter {
        code: RET,
        jt: 0,
        jf: 0,
        k: 0x40000,
    });
    out.push(libc::sock_filter {
        code: RET,
        jt: 0,
        jf: 0,
        k: 0,
    });
    out
}

/// Frame size, block size and block count of a ring of about `bytes`.
fn ring_geometry(frame_size: usize, bytes: usize) -> (usize, usize) {
    // SAFETY: sysconf has no memory effects.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let block = frame_size.max(64 << 10).max(page).next_power_of_two();
    (block, (bytes / block).max(1))
}

impl PacketTransport {
    /// Opens the transport on interface `ifname` for address `addr` with
    /// the default [`PacketConfig`]. Needs `CAP_NET_RAW`.
    pub fn open(ifname: &str, addr: Addr) -> Result<Self, TransportError> {
        Self::open_with(ifname, addr, &PacketConfig::default())
    }

    /// Opens the transport with the given ring sizes and options.
    pub fn open_with(
        ifname: &str,
        addr: Addr,
        config: &PacketConfig,
    ) -> Result<Self, TransportError> {
        let io = |op: String| move |source| TransportError::Io { op, source };
        ifreq(ifname)?; // the name is checked before anything is created
        // Protocol 0: nothing is received until the bind at the end, after
        // the filter and the rings are in place.
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(TransportError::last_os_error(format!(
                "create an AF_PACKET socket for {ifname} (needs CAP_NET_RAW)"
            )));
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let mut req = ifreq(ifname)?;
        ioctl(raw, libc::SIOCGIFINDEX, &mut req)
            .map_err(io(format!("find interface {ifname} (SIOCGIFINDEX)")))?;
        // SAFETY: SIOCGIFINDEX wrote the `ifru_ifindex` member.
        let ifindex = unsafe { req.ifr_ifru.ifru_ifindex };
        let mut req = ifreq(ifname)?;
        ioctl(raw, libc::SIOCGIFHWADDR, &mut req)
            .map_err(io(format!("read the MAC of {ifname} (SIOCGIFHWADDR)")))?;
        // SAFETY: SIOCGIFHWADDR wrote the `ifru_hwaddr` member.
        let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
        if hw.sa_family != libc::ARPHRD_ETHER {
            return Err(TransportError::Config {
                kind: "packet",
                what: format!(
                    "interface {ifname} is not Ethernet (hardware type {})",
                    hw.sa_family
                ),
            });
        }
        let mut mac = [0u8; 6];
        for (m, b) in mac.iter_mut().zip(hw.sa_data) {
            *m = b as u8;
        }
        let mut req = ifreq(ifname)?;
        ioctl(raw, libc::SIOCGIFMTU, &mut req)
            .map_err(io(format!("read the MTU of {ifname} (SIOCGIFMTU)")))?;
        // SAFETY: SIOCGIFMTU wrote the `ifru_mtu` member.
        let mtu = unsafe { req.ifr_ifru.ifru_mtu };
        // An IPv4 datagram is at most 65535 bytes.
        let mtu = usize::try_from(mtu).unwrap_or(0).min(65535);
        if mtu < HEADER_LEN - ETH_HLEN {
            return Err(TransportError::Config {
                kind: "packet",
                what: format!("interface {ifname} has an MTU of {mtu}, too small for unet"),
            });
        }

        let version = libc::tpacket_versions::TPACKET_V2 as i32;
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_VERSION, &version)
            .map_err(io(format!("select TPACKET_V2 on {ifname}")))?;
        // Skip frames the kernel finds malformed rather than stopping the
        // TX ring at them.
        setsockopt(raw, libc::SOL_PACKET, libc::PACKET_LOSS, &1i32)
            .map_err(io(format!("set PACKET_LOSS on {ifname}")))?;
        // Optional: not receiving our host's own frames (kernel >= 4.20;
        // the packet type is checked as well) and bypassing the qdisc.
        let _ = setsockopt(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &1i32);
        let _ = setsockopt(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1i32);
        if config.kernel_filter {
            let mut prog = socket_filter(addr);
            let fprog = libc::sock_fprog {
                len: prog.len() as u16,
                filter: prog.as_mut_ptr(),
            };
            setsockopt(raw, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
                .map_err(io(format!("attach the socket filter on {ifname}")))?;
        }

        let frame_size = (RX_NET + mtu + 4).next_power_of_two().max(2048);
        let mut rings = [0usize; 2];
        for (i, (opt, bytes, what)) in [
            (libc::PACKET_RX_RING, config.rx_ring_bytes, "RX"),
            (libc::PACKET_TX_RING, config.tx_ring_bytes, "TX"),
        ]
        .into_iter()
        .enumerate()
        {
            let (block, blocks) = ring_geometry(frame_size, bytes);
            let req = libc::tpacket_req {
                tp_block_size: block as u32,
                tp_block_nr: blocks as u32,
                tp_frame_size: frame_size as u32,
                tp_frame_nr: (blocks * (block / frame_size)) as u32,
            };
            setsockopt(raw, libc::SOL_PACKET, opt, &req).map_err(io(format!(
                "set up the {what} ring on {ifname} ({blocks} blocks of {block} bytes)"
            )))?;
            rings[i] = block * blocks;
        }
        let len = rings[0] + rings[1];
        // SAFETY: maps the socket's rings (RX then TX, as the kernel lays
        // them out) at an address the kernel chooses; the result is
        // checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                raw,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(TransportError::last_os_error(format!(
                "map the {len}-byte rings of {ifname}"
            )));
        }
        let map = Mapping {
            ptr: NonNull::new(ptr.cast()).ok_or_else(|| TransportError::Config {
                kind: "packet",
                what: "mmap returned a null mapping".into(),
            })?,
            len,
        };

        // SAFETY: all-zero is a valid `sockaddr_ll`.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_IP as u16).to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: `sll` is a valid `sockaddr_ll` whose size is passed.
        let r = unsafe {
            libc::bind(
                raw,
                (&raw const sll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(TransportError::last_os_error(format!(
                "bind the AF_PACKET socket to {ifname}"
            )));
        }
        let reservation = if config.reserve_port {
            reserve(addr)
        } else {
            None
        };
        let ring = |offset, bytes: usize| Ring {
            offset,
            frame_size,
            frame_nr: bytes / frame_size,
            next: 0,
        };
        Ok(PacketTransport {
            rx: ring(0, rings[0]),
            tx: ring(rings[0], rings[1]),
            map,
            fd,
            ifname: ifname.to_string(),
            ifindex,
            mac: MacAddr(mac),
            mtu,
            local: addr,
            neighbors: Neighbors::new(ifname),
            reservation,
            stats: TransportStats::default(),
            overruns: Cell::new(0),
        })
    }

    /// The interface's MAC address (the source of every frame sent).
    pub fn mac(&self) -> MacAddr {
        self.mac
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's index.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// The interface's MTU.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// Whether the UDP port is reserved in the kernel's stack
    /// ([`PacketConfig::reserve_port`]).
    pub fn port_reserved(&self) -> bool {
        self.reservation.is_some()
    }

    /// Sets the MAC of neighbour `ip`; it is never replaced by learning.
    pub fn add_neighbor(&mut self, ip: Ipv4Addr, mac: MacAddr) {
        self.neighbors.give(ip, mac);
    }

    /// Forgets neighbour `ip`.
    pub fn remove_neighbor(&mut self, ip: Ipv4Addr) {
        self.neighbors.forget(ip);
    }

    /// The MAC known for `ip` (given or learned), if any.
    pub fn neighbor(&self, ip: Ipv4Addr) -> Option<MacAddr> {
        self.neighbors.get(ip)
    }

    fn kick(&mut self) -> std::io::Result<()> {
        loop {
            // SAFETY: a send with no data and no address kicks the TX
            // ring; nothing is read from or written to our memory.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r >= 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                // The device is busy or dropped frames: a network drop or
                // a later kick's work, not an error of the transport.
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => return Ok(()),
                _ => return Err(e),
            }
        }
    }
}

/// Binds a UDP socket to `addr` with the smallest receive buffer, so that
/// the kernel's stack holds the port (best effort).
fn reserve(addr: Addr) -> Option<OwnedFd> {
    // SAFETY: plain system call; the result is checked.
    let raw = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let _ = setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, &0i32);
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(addr.ip.octets()),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `sa` is a valid `sockaddr_in` whose size is passed.
    let r = unsafe {
        libc::bind(
            raw,
            (&raw const sa).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    (r == 0).then_some(fd)
}

/// Whether an arriving frame is one the engine can classify: at least the
/// unet header, IPv4 with a 20-byte header, protocol UDP.
pub(super) fn acceptable(frame: &[u8]) -> bool {
    frame.len() >= HEADER_LEN
        && u16::from_be_bytes([frame[ETH_TYPE], frame[ETH_TYPE + 1]]) == ETHERTYPE_IPV4
        && frame[IP] == IPV4_VERSION_IHL
        && frame[IP_PROTO] == IPPROTO_UDP
}

impl Transport for PacketTransport {
    fn send(&mut self, frames: &[&[u8]]) -> Result<usize, TransportError> {
        let max = self.max_frame();
        let mut queued = 0;
        let mut full = false;
        for (i, f) in frames.iter().enumerate() {
            if let Err(e) = check_frame_len(f, max, "packet") {
                if i == 0 {
                    self.stats.tx_rejected += 1;
                    return Err(e);
                }
                break;
            }
            let tx = self.tx;
            // Timestamp flags may accompany a status the kernel hands back.
            let ts = libc::TP_STATUS_TS_SOFTWARE
                | libc::TP_STATUS_TS_SYS_HARDWARE
                | libc::TP_STATUS_TS_RAW_HARDWARE;
            let status = self.map.status(&tx, tx.next).load(Ordering::Acquire) & !ts;
            match status {
                libc::TP_STATUS_AVAILABLE => {}
                libc::TP_STATUS_WRONG_FORMAT => self.stats.tx_rejected += 1,
                _ => {
                    full = true; // still queued or being sent
                    break;
                }
            }
            let dst_mac = match self.neighbors.resolve_dst(f) {
                Some(m) => m,
                None => {
                    self.stats.tx_broadcast += 1;
                    MacAddr::BROADCAST
                }
            };
            let data = self.map.slot_ptr(&tx, tx.next, TX_DATA);
            // SAFETY: the slot is ours (status AVAILABLE or WRONG_FORMAT:
            // the kernel does not touch it until we set SEND_REQUEST); the
            // frame's `len <= max <= frame_size - TX_DATA` bytes fit after
            // TX_DATA; the frame is caller memory, not the ring.
            unsafe {
                std::ptr::copy_nonoverlapping(f.as_ptr(), data, f.len());
                std::ptr::copy_nonoverlapping(dst_mac.0.as_ptr(), data.add(ETH_DST), 6);
                std::ptr::copy_nonoverlapping(self.mac.0.as_ptr(), data.add(ETH_SRC), 6);
                let hdr = self
                    .map
                    .slot_ptr(&tx, tx.next, 0)
                    .cast::<libc::tpacket2_hdr>();
                (&raw mut (*hdr).tp_len).write_volatile(f.len() as u32);
            }
            // Release: the frame and its length are written before the
            // kernel may see SEND_REQUEST.
            self.map
                .status(&tx, tx.next)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.tx.next = (tx.next + 1) % tx.frame_nr;
            self.stats.tx_frames += 1;
            self.stats.tx_bytes += f.len() as u64;
            queued += 1;
        }
        if (queued > 0 || full)
            && let Err(source) = self.kick()
        {
            self.stats.tx_rejected += 1;
            if queued == 0 {
                return Err(TransportError::Io {
                    op: format!("send the TX ring of {}", self.ifname),
                    source,
                });
            }
        }
        Ok(queued)
    }

    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        let mut n = 0;
        while n < max {
            let rx = self.rx;
            let status = self.map.status(&rx, rx.next);
            if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                break;
            }
            let hdr = self
                .map
                .slot_ptr(&rx, rx.next, 0)
                .cast::<libc::tpacket2_hdr>();
            // SAFETY: the slot belongs to us while its status has
            // TP_STATUS_USER (acquire above orders these reads after the
            // kernel's writes); the header is inside the slot.
            let (len, snaplen, mac, pkttype) = unsafe {
                (
                    (&raw const (*hdr).tp_len).read_volatile() as usize,
                    (&raw const (*hdr).tp_snaplen).read_volatile() as usize,
                    (&raw const (*hdr).tp_mac).read_volatile() as usize,
                    self.map
                        .slot_ptr(&rx, rx.next, TP2_SLL + SLL_PKTTYPE)
                        .read_volatile(),
                )
            };
            // Check what the kernel wrote before following it.
            let in_slot = mac >= libc::TPACKET2_HDRLEN
                && mac.checked_add(snaplen).is_some_and(|e| e <= rx.frame_size);
            let mut delivered = false;
            if in_slot && snaplen == len && pkttype != libc::PACKET_OUTGOING {
                // SAFETY: [mac, mac + snaplen) is inside the slot (checked
                // just above), which the kernel leaves alone until we hand
                // it back below, after the slice's last use.
                let frame = unsafe {
                    std::slice::from_raw_parts(self.map.slot_ptr(&rx, rx.next, 0).add(mac), snaplen)
                };
                if acceptable(frame) {
                    self.neighbors.learn_sender(frame);
                    f(frame);
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += snaplen as u64;
                    n += 1;
                    delivered = true;
                }
            }
            if !delivered && pkttype != libc::PACKET_OUTGOING {
                self.stats.rx_dropped += 1;
            }
            status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.rx.next = (rx.next + 1) % rx.frame_nr;
        }
        Ok(n)
    }

    fn local(&self) -> Addr {
        self.local
    }

    fn max_frame(&self) -> usize {
        // The rings are sized so that they hold this much (see `open_with`).
        (self.mtu + ETH_HLEN)
            .min(self.tx.frame_size - TX_DATA)
            .min(self.rx.frame_size - RX_NET + ETH_HLEN)
    }

    fn kind(&self) -> &'static str {
        "packet"
    }

    fn stats(&self) -> TransportStats {
        // SAFETY: all-zero is a valid `tpacket_stats`.
        let mut st: libc::tpacket_stats = unsafe { zeroed() };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` has room for `len` bytes, which the kernel updates.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&raw mut st).cast(),
                &mut len,
            )
        };
        if r == 0 {
            self.overruns
                .set(self.overruns.get() + u64::from(st.tp_drops));
        }
        TransportStats {
            rx_overruns: self.overruns.get(),
            ..self.stats
        }
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
}

impl AsRawFd for PacketTransport {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a classic BPF program (the subset `socket_filter` uses) on a
    /// packet: the number of bytes it accepts.
    fn run_bpf(prog: &[libc::sock_filter], pkt: &[u8]) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let ld = |at: usize, n: usize| -> Option<u32> {
            pkt.get(at..at + n)
                .map(|b| b.iter().fold(0u32, |v, &b| v << 8 | u32::from(b)))
        };
        loop {
            let i = prog[pc];
            pc += 1;
            let code = u32::from(i.code);
            let class = code & 0x07;
            match class {
                libc::BPF_RET => return i.k,
                libc::BPF_LD | libc::BPF_LDX => {
                    let size = match code & 0x18 {
                        libc::BPF_W => 4,
                        libc::BPF_H => 2,
                        _ => 1,
                    };
                    match code & 0xe0 {
                        libc::BPF_ABS => match ld(i.k as usize, size) {
                            Some(v) => a = v,
                            None => return 0,
                        },
                        libc::BPF_IND => match ld((x + i.k) as usize, size) {
                            Some(v) => a = v,
                            None => return 0,
                        },
                        libc::BPF_MSH => match ld(i.k as usize, 1) {
                            Some(v) => x = 4 * (v & 0xf),
                            None => return 0,
                        },
                        m => panic!("mode {m:#x}"),
                    }
                }
                libc::BPF_JMP => {
                    let taken = match code & 0xf0 {
                        libc::BPF_JEQ => a == i.k,
                        libc::BPF_JSET => a & i.k != 0,
                        op => panic!("jump {op:#x}"),
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                c => panic!("class {c:#x}"),
            }
        }
    }

    #[test]
    fn the_socket_filter_admits_unfragmented_udp_to_this_address_and_port() {
        use crate::frame::{FrameHeader, IP_FRAG, ipv4_header_checksum};
        let me: Addr = "10.77.1.1:7000".parse().unwrap();
        let peer: Addr = "10.77.1.2:7001".parse().unwrap();
        let mut f = vec![0u8; HEADER_LEN + 4];
        FrameHeader::new(peer, me, 1, 2).write(4, &mut f).unwrap();
        for prog in [
            socket_filter(me),
            socket_filter(Addr::new(Ipv4Addr::UNSPECIFIED, 7000)),
        ] {
            assert_eq!(run_bpf(&prog, &f), 0x40000);
            let mut other_port = f.clone();
            other_port[crate::frame::UDP_DST_PORT + 1] ^= 1;
            assert_eq!(run_bpf(&prog, &other_port), 0);
            let mut tcp = f.clone();
            tcp[IP_PROTO] = 6;
            assert_eq!(run_bpf(&prog, &tcp), 0);
            let mut arp = f.clone();
            arp[ETH_TYPE + 1] = 0x06;
            assert_eq!(run_bpf(&prog, &arp), 0);
            let mut frag = f.clone();
            frag[IP_FRAG + 1] = 1;
            assert_eq!(run_bpf(&prog, &frag), 0);
            // IP options move the UDP header; the filter follows them.
            let mut opts = f.clone();
            opts[IP] = 0x46;
            opts.splice(34..34, [0u8; 4]);
            assert_eq!(run_bpf(&prog, &opts), 0x40000);
            let h: [u8; HEADER_LEN] = f[..HEADER_LEN].try_into().unwrap();
            assert_ne!(ipv4_header_checksum(&h), 0);
        }
        let mut other_host = f.clone();
        other_host[IP_DST + 3] = 9;
        assert_eq!(run_bpf(&socket_filter(me), &other_host), 0);
        assert_eq!(
            run_bpf(
                &socket_filter(Addr::new(Ipv4Addr::UNSPECIFIED, 7000)),
                &other_host
            ),
            0x40000
        );
    }

    #[test]
    fn the_arp_cache_is_read_for_complete_entries_on_the_interface() {
        let text = "IP address       HW type     Flags       HW address            Mask     Device\n\
                    10.77.1.2        0x1         0x2         aa:bb:cc:dd:ee:0f     *        fp0\n\
                    10.77.1.3        0x1         0x0         00:00:00:00:00:00     *        fp0\n\
                    10.77.1.4        0x1         0x2         aa:bb:cc:dd:ee:04     *        eth9\n";
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(
            parse_arp_cache(text, "fp0", ip("10.77.1.2")),
            Some(MacAddr([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x0f]))
        );
        assert_eq!(
            parse_arp_cache(text, "fp0", ip("10.77.1.3")),
            None,
            "incomplete"
        );
        assert_eq!(
            parse_arp_cache(text, "fp0", ip("10.77.1.4")),
            None,
            "other device"
        );
        assert_eq!(parse_arp_cache(text, "fp0", ip("10.77.1.9")), None);
        assert_eq!(
            parse_arp_cache("garbage\n1 2 3\n", "fp0", ip("1.2.3.4")),
            None
        );
    }

    #[test]
    fn neighbours_given_beat_learned_ones_and_group_addresses_map_to_group_macs() {
        let mut n = Neighbors {
            ifname: "fp-none-such".into(),
            table: HashMap::new(),
            last_tx: None,
            last_rx: None,
            arp_read: None,
        };
        let ip: Ipv4Addr = "10.77.1.2".parse().unwrap();
        let (m1, m2) = (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]));
        assert_eq!(n.resolve(ip), None);
        n.learn(ip, m1);
        assert_eq!(n.resolve(ip), Some(m1));
        n.learn(ip, m2);
        assert_eq!(n.resolve(ip), Some(m2), "a learned entry follows the peer");
        n.table.insert(ip, (m1, true));
        n.last_tx = None;
        n.learn(ip, m2);
        n.learn(ip, MacAddr([2, 0, 0, 0, 0, 3]));
        assert_eq!(n.resolve(ip), Some(m1), "a given entry stays");
        // Group source MACs teach nothing.
        let other: Ipv4Addr = "10.77.1.3".parse().unwrap();
        n.learn(other, MacAddr::BROADCAST);
        assert_eq!(n.table.get(&other), None);
        assert_eq!(n.resolve(Ipv4Addr::BROADCAST), Some(MacAddr::BROADCAST));
        assert_eq!(
            n.resolve("239.1.2.3".parse().unwrap()),
            Some(MacAddr([0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]))
        );
    }

    #[test]
    fn ring_constants_match_the_kernel_layout() {
        assert_eq!(TP2_HDR, 32);
        assert_eq!(TP2_SLL, 32);
        assert_eq!(TX_DATA, 32);
        assert_eq!(RX_NET, 80);
        let (block, blocks) = ring_geometry(2048, 4 << 20);
        assert_eq!((block, blocks), (64 << 10, 64));
        let (block, blocks) = ring_geometry(131072, 1000);
        assert_eq!((block, blocks), (131072, 1));
    }

    #[test]
    fn bad_interface_names_are_refused_before_any_system_call() {
        let a: Addr = "10.0.0.1:7000".parse().unwrap();
        for name in ["", "a-name-that-is-far-too-long", "nul\0"] {
            let e = PacketTransport::open(name, a).unwrap_err();
            assert!(
                matches!(e, TransportError::Config { kind: "packet", .. }),
                "{e}"
            );
        }
    }
}
