//! Transports: how the engine's frames leave and arrive (the "network" of
//! U-Net/SLE §2, whose interface the engine plays).
//!
//! Every transport carries the same Ethernet / IPv4 / UDP / unet frames
//! ([`crate::frame`]), so that a dpf filter means the same on each:
//!
//! | kind | module | what it is |
//! |---|---|---|
//! | `loop` | [`loopnet`] | in-process: frames copied between the ports of a [`LoopNet`] hub (the embedded default) |
//! | `udp` | [`udp`] | kernel UDP sockets, batched with `sendmmsg`/`recvmmsg`; the header is rebuilt on arrival |
//! | `packet` | [`packet`] | raw frames on a network interface through `AF_PACKET` with `PACKET_MMAP` rings |
//! | `xdp` | [`xdp`] | raw frames on a network interface through `AF_XDP` sockets fed by an XDP program, past the kernel's stack |
//!
//! # The contract of [`Transport::send`]
//!
//! `send(frames)` takes the frames in order. `Ok(n)` means `frames[..n]` were
//! handed to the network, which may still drop them the way a network does
//! (a full queue, no such address), counted in [`TransportStats`]; `n` is
//! smaller than `frames.len()` only when the transport has no room right
//! now (a full socket buffer or TX ring), and the caller offers
//! `frames[n..]` again later. `Err(e)` always concerns `frames[0]`: it was
//! not sent and will not be (too large, too short, or the OS refused it),
//! and the caller drops it and goes on with `frames[1..]`. A bad frame in
//! the middle of a batch therefore ends the batch before it (`Ok(i)`), and
//! the next call reports it.
//!
//! # Frames built in the transport's memory
//!
//! A transport whose frames leave from memory of its own (`xdp`: a UMEM
//! transmit frame) can lend that memory for one frame
//! ([`Transport::send_built`]), so that the engine writes the frame there
//! instead of into its outbox, and the transport does not copy it again.
//! The transport checks the length first, lends memory it owns and nothing
//! else, and queues the frame only if the builder says it finished: a
//! builder that gives up ([`Built::Abandoned`]) leaves the memory the
//! transport's, nothing sent, nothing counted. Frames so queued, and those
//! of [`Transport::send`], leave in the order of the calls; they go out at
//! the next [`Transport::flush`], `send` or `recv` at the latest. The
//! other transports lend nothing ([`Built::NotLent`], the default) and the
//! engine builds the frame in its outbox and calls `send`, as before.

use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::str::FromStr;

use crate::frame::{Addr, HEADER_LEN};

pub mod loopnet;
pub mod packet;
pub mod udp;
pub mod xdp;

pub use loopnet::{LoopConfig, LoopNet, LoopPort};
pub use packet::{PacketConfig, PacketTransport};
pub use udp::UdpTransport;
pub use xdp::{XdpConfig, XdpMissing, XdpMode, XdpTransport};

/// A way to send and receive unet frames.
pub trait Transport: Send {
    /// Sends complete frames (each starts with the 54-byte header); returns
    /// how many were accepted (see the module documentation for the exact
    /// contract). Never blocks indefinitely. A frame larger than
    /// [`max_frame`](Transport::max_frame) is an error for that frame only.
    fn send(&mut self, frames: &[&[u8]]) -> Result<usize, TransportError>;

    /// Lends memory of the transport's own for one frame of `len` bytes
    /// (header included), which `build` writes whole (every byte: the
    /// memory holds an earlier frame's bytes) and then returns `true` to
    /// queue it or `false` to give it up; see the module documentation.
    /// `Err(e)`: `len` is refused as [`send`](Transport::send) refuses a
    /// frame (too short, too large), `build` is not called. The default
    /// lends nothing.
    fn send_built(
        &mut self,
        len: usize,
        build: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Result<Built, TransportError> {
        let _ = (len, build);
        Ok(Built::NotLent)
    }

    /// Whether [`send_built`](Transport::send_built) may lend memory at
    /// all, asked once when the engine takes the transport: if not, the
    /// engine never asks per frame. The default: no.
    fn lends(&self) -> bool {
        false
    }

    /// Sends the frames [`send_built`](Transport::send_built) queued that
    /// have not gone yet (`xdp`: one kick of the transmit ring for all of
    /// them); an error leaves them queued for the next `flush`, `send` or
    /// `recv`. The default has nothing to do.
    fn flush(&mut self) -> Result<(), TransportError> {
        Ok(())
    }

    /// Receives up to `max` frames without blocking, calling `f` on each
    /// complete Ethernet frame; returns how many.
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> Result<usize, TransportError>;

    /// This engine's address on the unet network.
    fn local(&self) -> Addr;

    /// Largest frame (header + payload) this transport carries.
    fn max_frame(&self) -> usize;

    /// Short name: "loop", "udp", "packet" or "xdp".
    fn kind(&self) -> &'static str;

    /// The transport's counters.
    fn stats(&self) -> TransportStats;

    /// A file descriptor that polls readable (`poll(2)`, `epoll`) when
    /// [`recv`](Transport::recv) may have frames, so that an idle engine
    /// can sleep; `None` for transports without one (`loop`).
    fn poll_fd(&self) -> Option<RawFd> {
        None
    }

    /// A test, callable from any thread without the transport, that is
    /// false only when [`recv`](Transport::recv) certainly has nothing
    /// (`loop`: its queue is empty; `xdp`: its rings hold nothing to take
    /// and nothing to kick). Threads that poll an engine often
    /// check it first, so that they do not fight over the transport's lock
    /// for nothing. `None`: the transport cannot tell without a system call.
    fn readiness(&self) -> Option<Readiness> {
        None
    }

    /// Tells the transport that the engine's filter table changed (a
    /// filter was installed or removed), with the classifier just
    /// published. The engine calls it after every change, before the
    /// change returns, and never concurrently with itself. A transport
    /// that filters in the kernel (`xdp`: the program that decides which
    /// frames leave the kernel's stack) rebuilds its filter from it; the
    /// others ignore it.
    fn filters_changed(&mut self, classifier: &dpf::Classifier) -> Result<(), TransportError> {
        let _ = classifier;
        Ok(())
    }
}

/// What [`Transport::send_built`] did with a frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Built {
    /// Built in the transport's memory and queued: counted as handed to
    /// the network, out at the next [`Transport::flush`] at the latest.
    Queued,
    /// The builder gave up: nothing was queued or counted, and the memory
    /// lent is the transport's again.
    Abandoned,
    /// The transport lent nothing (it has no such memory, none is free
    /// right now, or the frame needs more than one piece of it): the caller
    /// builds the frame elsewhere and [`send`](Transport::send)s it.
    NotLent,
}

/// See [`Transport::readiness`]. Boxed, not in an `Arc`: the engine calls
/// it on every receive call that finds its queue empty (a waiting
/// receiver's poll, a ping-pong's every drain), and an `Arc<dyn Fn>`'s
/// call first works out where the closure lies past the counts from the
/// vtable's alignment, five instructions a call more than a `Box`'s.
pub type Readiness = Box<dyn Fn() -> bool + Send + Sync>;

/// Counters of a transport. Each counts from the transport's creation; the
/// fields a transport cannot observe stay 0.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Frames handed to the network.
    pub tx_frames: u64,
    /// Bytes of those frames (whole frames, header included).
    pub tx_bytes: u64,
    /// Frames rejected by `send` (too short, too large, refused by the OS).
    pub tx_rejected: u64,
    /// `loop`: frames for an address no port is attached to, dropped.
    pub tx_no_route: u64,
    /// `loop`: frames dropped because the destination's queue was full.
    pub tx_queue_full: u64,
    /// `packet`: frames sent to the broadcast MAC because the destination's
    /// MAC was unknown.
    pub tx_broadcast: u64,
    /// Frames delivered to `recv`'s callback.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames that arrived but were not unet frames (a datagram shorter
    /// than the unet header, a frame that is not IPv4/UDP, a truncated
    /// frame), dropped.
    pub rx_dropped: u64,
    /// Frames the kernel dropped before the transport saw them, where it
    /// reports them (`udp`: socket buffer overflows, `SO_RXQ_OVFL`;
    /// `packet`: RX ring overruns, `PACKET_STATISTICS`).
    pub rx_overruns: u64,
}

/// What went wrong in a transport, and what it was doing.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A system call failed.
    #[error("{op}: {source}")]
    Io {
        /// What was being done, e.g. "bind UDP socket to 10.0.0.1:7000".
        op: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A frame is larger than the transport carries.
    #[error("frame of {len} bytes exceeds the {kind} transport's maximum of {max}")]
    FrameTooLarge {
        /// The frame's length.
        len: usize,
        /// [`Transport::max_frame`].
        max: usize,
        /// [`Transport::kind`].
        kind: &'static str,
    },
    /// A frame is shorter than the unet header.
    #[error("frame of {len} bytes is shorter than the {HEADER_LEN}-byte unet header")]
    FrameTooShort {
        /// The frame's length.
        len: usize,
    },
    /// `LoopNet::attach` for an address that is attached already.
    #[error("address {0} is already attached to this loop network")]
    AddressInUse(Addr),
    /// A transport name other than `loop`, `udp`, `packet` or `xdp`.
    #[error("unknown transport {0:?} (expected loop, udp, packet or xdp)")]
    UnknownKind(String),
    /// The `xdp` transport cannot work on an interface: what is missing
    /// (privilege, kernel or driver support), and the refusal.
    #[error("the xdp transport cannot run on {ifname}: {missing}: {source}")]
    XdpUnavailable {
        /// The interface.
        ifname: String,
        /// What is missing.
        missing: XdpMissing,
        /// The system's refusal.
        #[source]
        source: io::Error,
    },
    /// A configuration the transport cannot use.
    #[error("invalid {kind} transport configuration: {what}")]
    Config {
        /// [`Transport::kind`].
        kind: &'static str,
        /// What is wrong with it.
        what: String,
    },
}

impl TransportError {
    /// An [`Io`](TransportError::Io) error from `errno` for the operation
    /// `op`.
    pub fn last_os_error(op: impl Into<String>) -> Self {
        TransportError::Io {
            op: op.into(),
            source: io::Error::last_os_error(),
        }
    }

    /// Whether the error is about the frame itself (its size), as opposed
    /// to the system.
    pub fn is_frame_error(&self) -> bool {
        matches!(
            self,
            TransportError::FrameTooLarge { .. } | TransportError::FrameTooShort { .. }
        )
    }
}

/// Checks a frame's length against the header and a transport's maximum.
pub(crate) fn check_frame_len(
    frame: &[u8],
    max: usize,
    kind: &'static str,
) -> Result<(), TransportError> {
    check_len(frame.len(), max, kind)
}

/// [`check_frame_len`] of a frame not written yet, by its length.
pub(crate) fn check_len(len: usize, max: usize, kind: &'static str) -> Result<(), TransportError> {
    if len < HEADER_LEN {
        Err(TransportError::FrameTooShort { len })
    } else if len > max {
        Err(TransportError::FrameTooLarge { len, max, kind })
    } else {
        Ok(())
    }
}

/// The kinds of transport, as the command line names them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `loop`: in-process.
    Loop,
    /// `udp`: kernel UDP sockets.
    Udp,
    /// `packet`: `AF_PACKET` on an interface.
    Packet,
    /// `xdp`: `AF_XDP` sockets on an interface.
    Xdp,
}

impl Kind {
    /// Every kind, in the order above.
    pub const ALL: [Kind; 4] = [Kind::Loop, Kind::Udp, Kind::Packet, Kind::Xdp];

    /// The name: "loop", "udp", "packet" or "xdp".
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Loop => "loop",
            Kind::Udp => "udp",
            Kind::Packet => "packet",
            Kind::Xdp => "xdp",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Kind {
    type Err = TransportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| TransportError::UnknownKind(s.to_string()))
    }
}

/// Everything needed to open a transport.
#[derive(Clone, Debug)]
pub enum TransportConfig {
    /// A port on an in-process hub.
    Loop {
        /// The hub.
        net: LoopNet,
        /// The port's address.
        addr: Addr,
    },
    /// A UDP socket bound to `addr` (`0.0.0.0` for every local address,
    /// port 0 for any free port).
    Udp {
        /// The address to bind.
        addr: Addr,
    },
    /// An `AF_PACKET` socket on interface `ifname`, answering for `addr`.
    Packet {
        /// The interface, e.g. "veth0".
        ifname: String,
        /// This engine's address on that interface's network.
        addr: Addr,
        /// Ring sizes and options.
        config: PacketConfig,
    },
    /// `AF_XDP` sockets on interface `ifname`, answering for `addr`.
    Xdp {
        /// The interface, e.g. "veth0".
        ifname: String,
        /// This engine's address on that interface's network.
        addr: Addr,
        /// Ring sizes and options.
        config: XdpConfig,
    },
}

impl TransportConfig {
    /// The kind of transport this opens.
    pub fn kind(&self) -> Kind {
        match self {
            TransportConfig::Loop { .. } => Kind::Loop,
            TransportConfig::Udp { .. } => Kind::Udp,
            TransportConfig::Packet { .. } => Kind::Packet,
            TransportConfig::Xdp { .. } => Kind::Xdp,
        }
    }

    /// Opens the transport.
    pub fn open(&self) -> Result<Box<dyn Transport>, TransportError> {
        Ok(match self {
            TransportConfig::Loop { net, addr } => Box::new(net.attach(*addr)?),
            TransportConfig::Udp { addr } => Box::new(UdpTransport::bind(*addr)?),
            TransportConfig::Packet {
                ifname,
                addr,
                config,
            } => Box::new(PacketTransport::open_with(ifname, *addr, config)?),
            TransportConfig::Xdp {
                ifname,
                addr,
                config,
            } => Box::new(XdpTransport::open_with(ifname, *addr, config)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_from_their_names_only() {
        for k in Kind::ALL {
            assert_eq!(k.as_str().parse::<Kind>().unwrap(), k);
            assert_eq!(k.to_string(), k.as_str());
        }
        let e = "tcp".parse::<Kind>().unwrap_err();
        assert!(matches!(&e, TransportError::UnknownKind(s) if s == "tcp"));
        assert!(e.to_string().contains("loop, udp, packet or xdp"));
        assert!("Loop".parse::<Kind>().is_err());
    }

    #[test]
    fn transport_config_opens_the_kind_it_names() {
        let net = LoopNet::new();
        let addr: Addr = "10.0.0.1:7000".parse().unwrap();
        let cfg = TransportConfig::Loop {
            net: net.clone(),
            addr,
        };
        assert_eq!(cfg.kind(), Kind::Loop);
        let t = cfg.open().unwrap();
        assert_eq!((t.kind(), t.local()), ("loop", addr));
        let cfg = TransportConfig::Udp {
            addr: "127.0.0.1:0".parse().unwrap(),
        };
        let t = cfg.open().unwrap();
        assert_eq!(t.kind(), "udp");
        assert_ne!(t.local().port, 0, "the bound port is read back");
        assert!(t.poll_fd().is_some());
    }

    #[test]
    fn frame_length_checks_name_the_frame() {
        let e = check_frame_len(&[0; HEADER_LEN - 1], 100, "loop").unwrap_err();
        assert!(matches!(e, TransportError::FrameTooShort { len } if len == HEADER_LEN - 1));
        assert!(e.is_frame_error());
        let e = check_frame_len(&[0; 101], 100, "udp").unwrap_err();
        assert!(e.is_frame_error());
        assert_eq!(
            e.to_string(),
            "frame of 101 bytes exceeds the udp transport's maximum of 100"
        );
        assert!(check_frame_len(&[0; HEADER_LEN], 100, "loop").is_ok());
        assert!(check_frame_len(&[0; 100], 100, "loop").is_ok());
    }
}
