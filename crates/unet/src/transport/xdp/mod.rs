//! `xdp`: whole Ethernet frames through `AF_XDP` sockets, the Linux
//! kernel's bypass of its own network stack (`Documentation/networking/
//! af_xdp.rst`). U-Net's point (§2) was to take the kernel off the data
//! path; this is as far as Linux lets a user-level engine go without
//! owning the driver.
//!
//! * **Receive.** An XDP program attached to the interface (driver mode where
//!   the driver has it, before the kernel builds a socket buffer; else, and
//!   with one socket on veth, the kernel's generic SKB mode) runs on every
//!   arriving frame, and redirects the frames the engine's dpf table accepts
//!   into the `AF_XDP` socket of the queue they arrived on
//!   (`bpf_redirect_map` into an `XSKMAP` indexed by `rx_queue_index`); what
//!   it does not redirect goes on to the kernel's stack (`XDP_PASS`). The
//!   program is the table lowered to eBPF, rebuilt and swapped in atomically
//!   on every install and removal ([`Transport::filters_changed`]); before
//!   the first, or when the table cannot be lowered, a fixed program admits
//!   every unet frame to the transport's address and port. There is one
//!   socket per receive queue of the interface ([`XdpConfig::queues`]),
//!   watched together by one epoll descriptor when there are several
//!   ([`Transport::poll_fd`] wakes for a frame on any queue), each with its
//!   own UMEM: a region of frames shared with the kernel, whose fill ring
//!   gives the kernel empty frames and whose receive ring gives back full
//!   ones. The engine classifies each frame *in place* in the UMEM (the
//!   `recv` callback gets a slice of it) and copies it once, into the
//!   endpoint's buffers (or its applet's inbox); the frame then goes straight
//!   back on the fill ring, so that every receive frame not being classified
//!   at that moment is the kernel's (the fill ring is kept full). A frame
//!   whose descriptor lies outside its UMEM frame, or that is not IPv4/UDP
//!   with a 20-byte header and at least the unet header, is dropped and
//!   counted ([`TransportStats::rx_dropped`]); frames the kernel could not
//!   place (receive ring full, no fill frame, too long for a frame) are
//!   counted from `XDP_STATISTICS` as [`TransportStats::rx_overruns`].
//! * **Transmit.** Each frame goes into a free transmit frame of the
//!   first queue's UMEM, with the interface's MAC as source and the
//!   peer's MAC (the `packet` transport's neighbour table: given, learned
//!   from frames received, the ARP cache, else broadcast) as destination,
//!   and is queued on the transmit ring; one `sendto` per batch kicks the
//!   ring, only when the kernel's need-wakeup flag asks for it
//!   (`XDP_USE_NEED_WAKEUP`). The engine builds its frames to other
//!   engines straight in the transmit frame ([`Transport::send_built`]:
//!   the frame is lent, and stays on the free list until the engine says
//!   it is whole) and kicks once a pass ([`Transport::flush`]); frames
//!   handed to [`Transport::send`] are copied in. Transmit frames come
//!   back on the completion ring once the kernel is done with them, which
//!   the transport drains before each batch, when a lent frame finds the
//!   free list empty, and on every receive poll that runs.
//! * **Readiness.** [`Transport::readiness`] reads the rings' index and
//!   flags words (mapped, shared with the kernel) without the transport,
//!   so that an engine's empty poll takes no lock.
//! * **Why one copy, not zero.** An endpoint's buffer area is its own
//!   `memfd`, mapped by its application; a UMEM is one region per socket
//!   that the kernel fills with *any* frame the program redirects, before
//!   anyone has classified it. Receiving into the endpoint's buffers
//!   directly would need one socket and one UMEM per endpoint and a
//!   program that tells endpoints apart in the kernel (the lowered table
//!   only says whether some filter accepts), and would still hand the application memory the kernel
//!   writes frames of other senders into until the free queue returns
//!   it; and applets take their frames in the engine's inbox, not in the
//!   endpoint's buffers. So the engine classifies in the UMEM and copies
//!   once, the same one copy as `packet`'s ring.
//!
//! Copying sockets are what a veth pair gives (veth runs native XDP but
//! has no AF_XDP zero-copy), and there [`XdpMode::Auto`] takes the generic
//! hook when it has one socket ([`VETH_GENERIC_WHY`]);
//! on a NIC whose driver has zero-copy support the sockets bind in
//! zero-copy mode ([`XdpTransport::zero_copy`]) and the frames are DMAed
//! into the UMEM.
//! * **Large frames.** The largest frame is the interface's MTU plus the
//!   Ethernet header. Up to an MTU of 1,778 a frame fits a 2 KiB UMEM
//!   frame with the kernel's 256 bytes of headroom; above it the UMEM
//!   frames are 4 KiB (a page) and the transport is multi-buffer: the
//!   sockets are bound with `XDP_USE_SG` and the programs loaded with
//!   `BPF_F_XDP_HAS_FRAGS` (which veth needs to run a program in its
//!   driver above an MTU of 3,504), so a frame larger than a UMEM frame
//!   arrives as a chain of descriptors, all but the last marked
//!   `XDP_PKT_CONTD`, and leaves as one. A chain is gathered into the
//!   queue's scratch buffer before the engine classifies and copies it (a
//!   second copy, for frames larger than a UMEM frame only: the `recv`
//!   callback takes one slice); a frame is split over as many transmit
//!   frames as it needs (at most 17 in copy mode, 68 KiB).
//!
//! All `unsafe` of this transport is in the `sys` module (socket, UMEM, ring
//! mappings, interface `ioctl`s); the XDP program is built and attached
//! through the `ebpf` crate.

use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, RawFd};

use super::packet::{Neighbors, acceptable};
use super::{
    Built, Readiness, Transport, TransportError, TransportStats, check_frame_len, check_len,
};
use crate::frame::{Addr, ETH_DST, ETH_SRC, MacAddr};

mod program;
mod sys;

use program::Program;
pub use program::ProgramCounts;

/// The environment variable that turns an unavailable `xdp` transport
/// ([`TransportError::XdpUnavailable`]) into a test failure instead of a
/// skip; CI sets it to `1` (it runs as root).
pub const REQUIRE_ENV: &str = "UNET_REQUIRE_XDP";

/// Bytes the kernel keeps before every received frame in its UMEM frame
/// (`XDP_PACKET_HEADROOM`).
const XDP_HEADROOM: usize = 256;
/// Ethernet header bytes.
const ETH_HLEN: usize = 14;
/// How many `sendto` kicks one batch makes at most while the kernel says
/// "again" (copy mode sends 32 frames per kick).
const KICKS: usize = 64;

/// Where the XDP program runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Driver mode if the driver has it, else generic (SKB) mode; with
    /// one socket on a veth interface generic mode first (see
    /// [`VETH_GENERIC_WHY`]; with several, veth's driver, since only its
    /// NAPI instance records which receive queue a frame came to).
    /// [`XdpTransport::mode_reason`] says which and why.
    #[default]
    Auto,
    /// In the driver, before the kernel allocates a socket buffer
    /// (`XDP_FLAGS_DRV_MODE`); an error if the driver cannot.
    Driver,
    /// The kernel's generic hook, after the socket buffer is built
    /// (`XDP_FLAGS_SKB_MODE`): every driver has it.
    Generic,
}

impl std::fmt::Display for XdpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            XdpMode::Auto => "auto",
            XdpMode::Driver => "driver",
            XdpMode::Generic => "generic (SKB)",
        })
    }
}

/// Why [`XdpMode::Auto`] attaches in generic mode on a veth interface
/// (with one socket).
///
/// veth runs XDP programs in its driver, but its sockets are copy mode
/// either way, and both hooks copy a transmitted frame twice in the
/// kernel (into a page with XDP's headroom, then into the receiver's
/// UMEM); the driver hook adds veth's own receive ring and NAPI poll in
/// between, where the generic hook takes the frame straight from the
/// receive backlog. Between two namespaces the round trip of two engines
/// was shorter at the generic hook at every size measured, 64 B to 4 KiB,
/// on the loaded machine, and the same within its runs' spread on the idle
/// one (docs/benchmarks.md, "Where an `xdp` round trip goes on veth").
pub const VETH_GENERIC_WHY: &str = "veth: both hooks copy each frame in the kernel, and the \
     generic hook skips veth's receive ring and NAPI poll";

/// Sizes and options of an [`XdpTransport`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpConfig {
    /// How many of the interface's receive queues get a socket, from queue
    /// 0; `None`: every one (`ETHTOOL_GCHANNELS`, or 1 when the driver does
    /// not say).
    pub queues: Option<u32>,
    /// Receive frames per socket: the depth of its fill and receive rings
    /// (a power of two, 64 to 32,768). Default 512.
    ///
    /// Every receive frame sits on the fill ring, which the kernel takes
    /// in order, so a socket cycles through all of them: the kernel's copy
    /// of each arriving frame goes to the frame least recently used. With
    /// 2,048 frames of 4 KiB (8 MiB, a frame's bytes at the same offset
    /// of every page) those writes missed the caches; with 512 a burst of
    /// 25 frames of 1 KiB took 5% less time in the sender's `sendto`
    /// (which on veth runs the receiver's copy too), as little as with 64,
    /// and a 1 KiB round trip 0.3 to 0.5 µs less at its 10th percentile
    /// (docs/benchmarks.md, "Where an `xdp` burst goes on veth"). 512 still
    /// holds 25 of the largest (16 KiB) frames of the demo's bursts four
    /// times over, and a receiver that stops polling for 0.7 ms at 1.4 µs a
    /// frame; raise it for longer stalls.
    pub rx_frames: u32,
    /// Transmit frames of the sending socket: the depth of its transmit
    /// and completion rings (a power of two, 64 to 32,768). Default 1,024.
    pub tx_frames: u32,
    /// Where the program runs. Default [`XdpMode::Auto`].
    pub mode: XdpMode,
}

impl Default for XdpConfig {
    fn default() -> Self {
        XdpConfig {
            queues: None,
            rx_frames: 512,
            tx_frames: 1024,
            mode: XdpMode::Auto,
        }
    }
}

/// What an interface or the system lacks for the `xdp` transport
/// ([`TransportError::XdpUnavailable`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum XdpMissing {
    /// The privilege: `AF_XDP` sockets need `CAP_NET_RAW`, loading and
    /// attaching the program `CAP_BPF` and `CAP_NET_ADMIN` (root has them).
    Privilege,
    /// Kernel support for `AF_XDP` sockets (`CONFIG_XDP_SOCKETS`) or for
    /// XDP programs (`CONFIG_BPF_SYSCALL`).
    Kernel,
    /// XDP support in the interface's driver, in the mode asked for.
    Driver,
}

impl std::fmt::Display for XdpMissing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            XdpMissing::Privilege => {
                "no privilege (AF_XDP sockets need CAP_NET_RAW, XDP programs CAP_BPF and \
                 CAP_NET_ADMIN; run as root)"
            }
            XdpMissing::Kernel => {
                "no kernel support (AF_XDP sockets need CONFIG_XDP_SOCKETS, XDP programs \
                 CONFIG_BPF_SYSCALL)"
            }
            XdpMissing::Driver => "no XDP support in the interface's driver",
        })
    }
}

/// One socket and the transport's side of its rings.
struct Queue {
    sock: sys::Socket,
    /// The queue's number on the interface.
    id: u32,
    /// Our producer index of the fill ring.
    fill_prod: u32,
    /// Our consumer index of the receive ring.
    rx_cons: u32,
    /// Our producer index of the transmit ring.
    tx_prod: u32,
    /// Our consumer index of the completion ring.
    comp_cons: u32,
    /// Frames delivered from this queue.
    rx_frames: u64,
    /// The fragments so far of a multi-buffer frame whose last descriptor
    /// has not been read yet (it may come in a later poll).
    partial: Vec<u8>,
    /// A fragment of that frame was bad (outside its UMEM frame, or the
    /// frame grew past the largest): the rest of it is dropped.
    partial_bad: bool,
    /// UMEM addresses of transmit frames that are ours.
    tx_free: Vec<u64>,
}

impl Queue {
    /// Puts completed transmit frames back on the free list.
    fn reclaim(&mut self) {
        let ready = self.sock.comp.producer().wrapping_sub(self.comp_cons);
        for i in 0..ready {
            let addr = self.sock.comp.read(self.comp_cons.wrapping_add(i));
            self.tx_free.push(addr);
        }
        if ready > 0 {
            self.comp_cons = self.comp_cons.wrapping_add(ready);
            self.sock.comp.set_consumer(self.comp_cons);
        }
    }

    /// Frames on the transmit ring the kernel has not taken yet.
    fn tx_pending(&self) -> u32 {
        self.tx_prod.wrapping_sub(self.sock.tx.consumer())
    }

    /// Kicks the transmit ring while the kernel asks for it and frames
    /// wait; an error only for a failure that is not "busy, later".
    fn kick(&mut self) -> std::io::Result<()> {
        for _ in 0..KICKS {
            if self.tx_pending() == 0 || !self.sock.tx.needs_wakeup() {
                return Ok(());
            }
            match self.sock.kick_tx() {
                Ok(()) => {}
                Err(e) => match e.raw_os_error() {
                    // The kernel sent a batch and more wait: kick again.
                    Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                    // The device is busy or out of buffers: a later kick
                    // (the next send or receive poll) sends the rest.
                    Some(libc::EBUSY) | Some(libc::ENOBUFS) => return Ok(()),
                    _ => return Err(e),
                },
            }
        }
        Ok(())
    }
}

/// Raw frames on an interface through `AF_XDP` sockets: the `xdp`
/// [`Transport`].
pub struct XdpTransport {
    /// Declared first: the program is detached before the sockets close.
    program: Program,
    queues: Vec<Queue>,
    /// With several queues, the descriptor that polls readable while any
    /// queue's socket does ([`Transport::poll_fd`]).
    epoll: Option<sys::Epoll>,
    /// The queue the next receive poll starts at.
    next: usize,
    /// Why the program runs where it does ([`XdpTransport::mode_reason`]).
    mode_reason: String,
    ifname: String,
    ifindex: u32,
    mac: MacAddr,
    mtu: usize,
    max_frame: usize,
    local: Addr,
    neighbors: Neighbors,
    stats: TransportStats,
}

impl std::fmt::Debug for XdpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpTransport")
            .field("ifname", &self.ifname)
            .field("ifindex", &self.ifindex)
            .field("mac", &self.mac)
            .field("mtu", &self.mtu)
            .field("local", &self.local)
            .field("queues", &self.queues.len())
            .field("mode", &self.program.mode())
            .field("mode_reason", &self.mode_reason)
            .field("stats", &self.stats)
            .finish()
    }
}

/// Checks a ring depth: a power of two from 64 to 32,768.
fn check_depth(what: &str, n: u32) -> Result<(), TransportError> {
    if n.is_power_of_two() && (64..=32768).contains(&n) {
        Ok(())
    } else {
        Err(TransportError::Config {
            kind: "xdp",
            what: format!("{what} must be a power of two from 64 to 32768, not {n}"),
        })
    }
}

/// The UMEM frame size for an MTU: 2 KiB when the largest frame and the
/// kernel's headroom fit, else 4 KiB (a page, the largest frame the
/// kernel takes without huge pages).
fn frame_size(mtu: usize) -> usize {
    if mtu + ETH_HLEN + XDP_HEADROOM <= 2048 {
        2048
    } else {
        4096
    }
}

impl XdpTransport {
    /// Opens the transport on interface `ifname` for address `addr` with
    /// the default [`XdpConfig`]. Needs root (see [`XdpMissing`]).
    pub fn open(ifname: &str, addr: Addr) -> Result<Self, TransportError> {
        Self::open_with(ifname, addr, &XdpConfig::default())
    }

    /// Opens the transport with the given sizes and options: a socket per
    /// queue, then the program that feeds them.
    pub fn open_with(ifname: &str, addr: Addr, config: &XdpConfig) -> Result<Self, TransportError> {
        let bytes = ifname.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return Err(TransportError::Config {
                kind: "xdp",
                what: format!(
                    "interface name {ifname:?} must be 1 to {} bytes without NUL",
                    libc::IFNAMSIZ - 1
                ),
            });
        }
        check_depth("rx_frames", config.rx_frames)?;
        check_depth("tx_frames", config.tx_frames)?;
        let unavailable = |missing, source| TransportError::XdpUnavailable {
            ifname: ifname.to_string(),
            missing,
            source,
        };
        // The socket first: it tells whether the kernel and the caller can
        // do AF_XDP at all, before the interface is looked at.
        let probe = sys::xdp_socket().map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => unavailable(XdpMissing::Privilege, e),
            Some(libc::EAFNOSUPPORT) | Some(libc::EINVAL) => unavailable(XdpMissing::Kernel, e),
            _ => TransportError::Io {
                op: format!("create an AF_XDP socket for {ifname}"),
                source: e,
            },
        })?;
        let link = sys::link(ifname).map_err(|e| TransportError::Io {
            op: format!("{} of {ifname}", e.step),
            source: e.source,
        })?;
        if link.hw_type != libc::ARPHRD_ETHER {
            return Err(TransportError::Config {
                kind: "xdp",
                what: format!(
                    "interface {ifname} is not Ethernet (hardware type {})",
                    link.hw_type
                ),
            });
        }
        let mtu = link.mtu.min(65535);
        if mtu + ETH_HLEN < crate::frame::HEADER_LEN {
            return Err(TransportError::Config {
                kind: "xdp",
                what: format!("interface {ifname} has an MTU of {mtu}, too small for unet"),
            });
        }
        let n = match config.queues {
            None => link.queues,
            Some(q) if q >= 1 && q <= link.queues => q,
            Some(q) => {
                return Err(TransportError::Config {
                    kind: "xdp",
                    what: format!(
                        "{q} queues asked for, interface {ifname} has {} receive queues",
                        link.queues
                    ),
                });
            }
        };
        let fsize = frame_size(mtu);
        // Above 2 KiB frames the sockets and programs take multi-buffer
        // frames: a frame larger than a UMEM frame (a page) comes as a
        // chain of them, and veth attaches a program in its driver above
        // an MTU of 3,504 only if it copes with such frames.
        let multi_buffer = fsize > 2048;
        let mut queues = Vec::with_capacity(n as usize);
        let mut probe = Some(probe);
        for id in 0..n {
            let fd = match probe.take() {
                Some(fd) => fd,
                None => sys::xdp_socket().map_err(|e| TransportError::Io {
                    op: format!("create the AF_XDP socket of queue {id} of {ifname}"),
                    source: e,
                })?,
            };
            // Only the first socket sends: the others get no transmit
            // frames and the smallest transmit rings.
            let tx_frames = if id == 0 { config.tx_frames } else { 0 };
            let g = sys::Geometry {
                frame_size: fsize,
                rx_frames: config.rx_frames,
                tx_frames,
                rx_ring: config.rx_frames,
                tx_ring: tx_frames.max(64),
                multi_buffer,
            };
            let mut sock = sys::Socket::open(fd, link.index, id, g).map_err(|e| {
                match e.source.raw_os_error() {
                    Some(libc::EPERM) | Some(libc::EACCES) => {
                        unavailable(XdpMissing::Privilege, e.source)
                    }
                    _ => TransportError::Io {
                        op: format!("{} (queue {id} of {ifname})", e.step),
                        source: e.source,
                    },
                }
            })?;
            // Every receive frame goes on the fill ring (it has room for
            // all of them).
            for i in 0..config.rx_frames {
                sock.fill.write(i, u64::from(i) * fsize as u64);
            }
            sock.fill.set_producer(config.rx_frames);
            let tx_free = (0..tx_frames)
                .map(|i| u64::from(config.rx_frames + i) * fsize as u64)
                .collect();
            queues.push(Queue {
                sock,
                id,
                fill_prod: config.rx_frames,
                rx_cons: 0,
                tx_prod: 0,
                comp_cons: 0,
                rx_frames: 0,
                partial: Vec::new(),
                partial_bad: false,
                tx_free,
            });
        }
        // One socket on veth: the generic hook (faster). With several,
        // veth's driver: without its NAPI instance veth records no receive
        // queue, and the generic hook would see every frame on queue 0.
        let veth_generic = link.driver == "veth" && n == 1;
        let order: &[XdpMode] = match config.mode {
            XdpMode::Auto if veth_generic => &[XdpMode::Generic, XdpMode::Driver],
            XdpMode::Auto => &[XdpMode::Driver, XdpMode::Generic],
            XdpMode::Driver => &[XdpMode::Driver],
            XdpMode::Generic => &[XdpMode::Generic],
        };
        let fds: Vec<_> = queues.iter().map(|q| (q.id, q.sock.as_fd())).collect();
        let (program, refused) =
            Program::attach(ifname, link.index, addr, &fds, order, multi_buffer)?;
        drop(fds);
        let chosen = program.mode();
        let mode_reason = match (config.mode, refused) {
            (XdpMode::Auto, Some((m, why))) => {
                format!("{chosen} mode: {ifname} refused {m} mode ({why})")
            }
            (XdpMode::Auto, None) if veth_generic => {
                format!("{chosen} mode: {VETH_GENERIC_WHY}")
            }
            (XdpMode::Auto, None) if link.driver == "veth" => format!(
                "{chosen} mode: the driver has it, and with {n} queues on veth the generic \
                 hook would see every frame on queue 0"
            ),
            (XdpMode::Auto, None) => format!("{chosen} mode: the driver has it"),
            (_, _) => format!("{chosen} mode: asked for"),
        };
        let epoll = if queues.len() > 1 {
            let fds: Vec<_> = queues.iter().map(|q| q.sock.as_raw_fd()).collect();
            Some(sys::Epoll::new(&fds).map_err(|e| TransportError::Io {
                op: format!(
                    "watch the sockets of the {} queues of {ifname} (epoll)",
                    fds.len()
                ),
                source: e,
            })?)
        } else {
            None
        };
        Ok(XdpTransport {
            program,
            queues,
            epoll,
            next: 0,
            mode_reason,
            ifname: ifname.to_string(),
            ifindex: link.index,
            mac: MacAddr(link.mac),
            mtu,
            max_frame: if multi_buffer {
                mtu + ETH_HLEN
            } else {
                (mtu + ETH_HLEN).min(fsize - XDP_HEADROOM)
            },
            local: addr,
            neighbors: Neighbors::new(ifname),
            stats: TransportStats::default(),
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

    /// The interface's MTU.
    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// How many queues (and sockets) the transport serves.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Frames delivered from each queue, in queue order.
    pub fn rx_frames_by_queue(&self) -> Vec<u64> {
        self.queues.iter().map(|q| q.rx_frames).collect()
    }

    /// Where the program runs: [`XdpMode::Driver`] or [`XdpMode::Generic`].
    pub fn mode(&self) -> XdpMode {
        self.program.mode()
    }

    /// Where the program runs and why, in words: asked for, the driver
    /// has it, the interface refused the first mode tried (with the
    /// kernel's refusal), or [`VETH_GENERIC_WHY`].
    pub fn mode_reason(&self) -> &str {
        &self.mode_reason
    }

    /// Why the engine's filter table runs on the fixed program that admits
    /// every unet frame to this address rather than on its own lowering
    /// (the table cannot be lowered, or the verifier refused it); `None`
    /// when it runs on its own, or before any filter was installed.
    pub fn program_fallback(&self) -> Option<&str> {
        self.program.fallback()
    }

    /// A handle on the counts of program swaps and grace-period waits,
    /// which stays readable once the transport belongs to an engine: a
    /// batch of removals (an endpoint closing with all its filters) is one
    /// swap and one wait.
    pub fn program_counts(&self) -> ProgramCounts {
        self.program.counts().clone()
    }

    /// Whether the sockets are bound in zero-copy mode (the driver DMAs
    /// frames into the UMEM) rather than copy mode.
    pub fn zero_copy(&self) -> bool {
        self.queues
            .iter()
            .all(|q| q.sock.copying == sys::Copying::Zero)
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
}

impl Transport for XdpTransport {
    fn send(&mut self, frames: &[&[u8]]) -> Result<usize, TransportError> {
        let max = self.max_frame;
        let q = &mut self.queues[0];
        q.reclaim();
        let chunk = q.sock.umem.frame_size();
        let (mut sent, mut descs) = (0u32, 0u32);
        for (i, f) in frames.iter().enumerate() {
            if let Err(e) = check_frame_len(f, max, "xdp") {
                if i == 0 {
                    self.stats.tx_rejected += 1;
                    return Err(e);
                }
                break;
            }
            // A frame larger than a UMEM frame (multi-buffer sockets only:
            // elsewhere `max_frame` is below it) goes as a chain.
            let pieces = f.len().div_ceil(chunk);
            if q.tx_free.len() < pieces {
                break; // its transmit frames are in flight
            }
            let dst_mac = match self.neighbors.resolve_dst(f) {
                Some(m) => m,
                None => {
                    self.stats.tx_broadcast += 1;
                    MacAddr::BROADCAST
                }
            };
            let at = q.tx_free.len() - pieces;
            let mut written = true;
            for (k, part) in f.chunks(chunk).enumerate() {
                let addr = q.tx_free[at + k];
                let Some(buf) = q.sock.umem.frame_mut(addr, part.len()) else {
                    // Not reached: transmit frames are whole UMEM frames.
                    written = false;
                    break;
                };
                buf.copy_from_slice(part);
                if k == 0 {
                    buf[ETH_DST..ETH_DST + 6].copy_from_slice(&dst_mac.0);
                    buf[ETH_SRC..ETH_SRC + 6].copy_from_slice(&self.mac.0);
                }
                let desc = libc::xdp_desc {
                    addr,
                    len: part.len() as u32,
                    options: if k + 1 < pieces {
                        libc::XDP_PKT_CONTD
                    } else {
                        0
                    },
                };
                q.sock
                    .tx
                    .write(q.tx_prod.wrapping_add(descs + k as u32), desc);
            }
            if !written {
                break;
            }
            q.tx_free.truncate(at);
            descs += pieces as u32;
            sent += 1;
            self.stats.tx_bytes += f.len() as u64;
        }
        if descs > 0 {
            q.tx_prod = q.tx_prod.wrapping_add(descs);
            q.sock.tx.set_producer(q.tx_prod);
            self.stats.tx_frames += u64::from(sent);
        }
        if let Err(source) = q.kick() {
            return if sent == 0 {
                self.stats.tx_rejected += 1;
                Err(TransportError::Io {
                    op: format!("send the transmit ring of {}", self.ifname),
                    source,
                })
            } else {
                Ok(sent as usize)
            };
        }
        Ok(sent as usize)
    }

    /// Lends a free transmit frame of the first queue's UMEM (see the
    /// module docs, "Transmit"): the frame is the transport's until
    /// `build` says it is done, and goes back on the free list (it never
    /// left it) if `build` gives up. A frame larger than one UMEM frame is
    /// not lent (it would be a chain): the engine sends it whole.
    fn send_built(
        &mut self,
        len: usize,
        build: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Result<Built, TransportError> {
        if let Err(e) = check_len(len, self.max_frame, "xdp") {
            self.stats.tx_rejected += 1;
            return Err(e);
        }
        let q = &mut self.queues[0];
        if len > q.sock.umem.frame_size() {
            return Ok(Built::NotLent);
        }
        if q.tx_free.is_empty() {
            q.reclaim();
        }
        let Some(&addr) = q.tx_free.last() else {
            return Ok(Built::NotLent); // its transmit frames are in flight
        };
        let Some(buf) = q.sock.umem.frame_mut(addr, len) else {
            // Not reached: transmit frames are whole UMEM frames.
            return Ok(Built::NotLent);
        };
        if !build(buf) {
            // Still on the free list: nothing to give back.
            return Ok(Built::Abandoned);
        }
        let dst_mac = match self.neighbors.resolve_dst(buf) {
            Some(m) => m,
            None => {
                self.stats.tx_broadcast += 1;
                MacAddr::BROADCAST
            }
        };
        buf[ETH_DST..ETH_DST + 6].copy_from_slice(&dst_mac.0);
        buf[ETH_SRC..ETH_SRC + 6].copy_from_slice(&self.mac.0);
        q.tx_free.pop();
        let desc = libc::xdp_desc {
            addr,
            len: len as u32,
            options: 0,
        };
        q.sock.tx.write(q.tx_prod, desc);
        q.tx_prod = q.tx_prod.wrapping_add(1);
        q.sock.tx.set_producer(q.tx_prod);
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += len as u64;
        Ok(Built::Queued)
    }

    fn lends(&self) -> bool {
        true
    }

    /// Kicks the transmit ring once for the frames
    /// [`send_built`](Transport::send_built) queued, if the kernel asks.
    fn flush(&mut self) -> Result<(), TransportError> {
        let q = &mut self.queues[0];
        q.kick().map_err(|source| TransportError::Io {
            op: format!("send the transmit ring of {}", self.ifname),
            source,
        })
    }

    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError> {
        let nq = self.queues.len();
        let max_frame = self.max_frame;
        let mut delivered = 0;
        let mut budget = max;
        for k in 0..nq {
            // `next < nq` and `k < nq`: a subtraction, not a division.
            let qi = self.next + k;
            let qi = if qi >= nq { qi - nq } else { qi };
            let q = &mut self.queues[qi];
            // Frames the last send left on the ring go out now, and their
            // frames come back.
            if q.tx_prod != q.comp_cons {
                let _ = q.kick();
                q.reclaim();
            }
            if budget == 0 {
                continue;
            }
            let ready = q.sock.rx.producer().wrapping_sub(q.rx_cons);
            if ready == 0 {
                if q.sock.fill.needs_wakeup() {
                    q.sock.wake_rx();
                }
                continue;
            }
            let take = ready.min(budget as u32);
            let mask = !(q.sock.umem.frame_size() as u64 - 1);
            let mut deliver = |frame: Option<&[u8]>, count: &mut u64| match frame {
                Some(frame) if acceptable(frame) => {
                    self.neighbors.learn_sender(frame);
                    // Classified in place; the engine copies it once.
                    f(frame);
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += frame.len() as u64;
                    *count += 1;
                    delivered += 1;
                }
                _ => self.stats.rx_dropped += 1,
            };
            for i in 0..take {
                let d = q.sock.rx.read(q.rx_cons.wrapping_add(i));
                let more = d.options & libc::XDP_PKT_CONTD != 0;
                let piece = q.sock.umem.frame(d.addr, d.len as usize);
                if !more && q.partial.is_empty() && !q.partial_bad {
                    deliver(piece, &mut q.rx_frames);
                } else {
                    // A fragment of a multi-buffer frame: gathered in the
                    // queue's scratch buffer, a second copy for frames
                    // larger than a UMEM frame only.
                    match piece {
                        Some(p) if !q.partial_bad && q.partial.len() + p.len() <= max_frame => {
                            q.partial.extend_from_slice(p)
                        }
                        _ => q.partial_bad = true,
                    }
                    if !more {
                        let whole = (!q.partial_bad).then_some(&q.partial[..]);
                        deliver(whole, &mut q.rx_frames);
                        q.partial.clear();
                        q.partial_bad = false;
                    }
                }
                // The frame goes straight back to the kernel (the fill
                // ring holds every receive frame, so it has room).
                q.sock
                    .fill
                    .write(q.fill_prod.wrapping_add(i), d.addr & mask);
            }
            q.rx_cons = q.rx_cons.wrapping_add(take);
            q.sock.rx.set_consumer(q.rx_cons);
            q.fill_prod = q.fill_prod.wrapping_add(take);
            q.sock.fill.set_producer(q.fill_prod);
            budget -= take as usize;
        }
        self.next = if self.next + 1 == nq {
            0
        } else {
            self.next + 1
        };
        Ok(delivered)
    }

    fn local(&self) -> Addr {
        self.local
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }

    fn kind(&self) -> &'static str {
        "xdp"
    }

    fn stats(&self) -> TransportStats {
        let mut st = self.stats;
        for q in &self.queues {
            if let Some(k) = q.sock.statistics() {
                st.rx_overruns += k.rx_dropped + k.rx_ring_full;
                st.tx_rejected += k.tx_invalid_descs;
            }
        }
        st
    }

    /// False only when no queue has a frame on its receive ring, none has
    /// frames on its transmit ring that the kernel has not taken (which a
    /// receive poll kicks), and no fill ring asks to be woken: a receive
    /// poll would then do nothing but find that out, under the engine's
    /// transport lock. Reads the rings' index and flags words alone (two
    /// of them written by this transport, under that lock, after the
    /// slots they cover), so an empty poll takes no lock and calls no
    /// transport. Completed transmit frames are not a reason to poll: the
    /// next send takes them back when it needs them.
    fn readiness(&self) -> Option<Readiness> {
        let watch = |q: &Queue| (q.sock.rx.words(), q.sock.tx.words(), q.sock.fill.words());
        let ready = |(rx, tx, fill): &(sys::RingWords, sys::RingWords, sys::RingWords)| {
            rx.producer() != rx.consumer() || tx.producer() != tx.consumer() || fill.needs_wakeup()
        };
        Some(match &self.queues[..] {
            // One queue (veth's usual): no loop.
            [q] => {
                let w = watch(q);
                Box::new(move || ready(&w))
            }
            qs => {
                let ws: Vec<_> = qs.iter().map(watch).collect();
                Box::new(move || ws.iter().any(ready))
            }
        })
    }

    /// The socket, with one queue; with several, an epoll descriptor over
    /// all their sockets, readable while any of them has a frame.
    fn poll_fd(&self) -> Option<RawFd> {
        match &self.epoll {
            Some(ep) => Some(ep.as_raw_fd()),
            None => self.queues.first().map(|q| q.sock.as_raw_fd()),
        }
    }

    /// Rebuilds the XDP program from the engine's table and swaps it in
    /// (see the module docs, "Receive").
    fn filters_changed(&mut self, classifier: &dpf::Classifier) -> Result<(), TransportError> {
        self.program
            .sync(classifier)
            .map_err(|e| TransportError::Io {
                op: format!(
                    "load and attach the XDP program built from the filter table on {}",
                    self.ifname
                ),
                source: std::io::Error::other(e.to_string()),
            })
    }
}
