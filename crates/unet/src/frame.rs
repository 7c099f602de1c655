//! The unet frame: Ethernet II / IPv4 / UDP / unet header / payload, its
//! codec and its checksums.
//!
//! Every transport carries the same frames, so that a dpf filter written in
//! pcap syntax means the same on `loop`, `udp` and `packet`:
//!
//! | bytes | field |
//! |---|---|
//! | 0..6 | Ethernet destination MAC |
//! | 6..12 | Ethernet source MAC |
//! | 12..14 | ethertype 0x0800 (IPv4) |
//! | 14..34 | IPv4 header without options (RFC 791): version/IHL 0x45, TOS 0, total length, identification, DF, TTL 64, protocol 17, header checksum (RFC 1071), source, destination |
//! | 34..42 | UDP header (RFC 768): source port, destination port, length, checksum (0 = none) |
//! | 42..54 | unet header: destination endpoint slot, source endpoint slot, flags (bit 0: UDP checksum present), destination generation, source generation, reserved (0), each 16 bits |
//! | 54.. | payload |
//!
//! An endpoint id ([`EndpointId`]) is its slot on its engine (the low 16
//! bits) and the slot's generation (the high 16 bits): the frame carries
//! them apart, the slots where a filter finds them as `udp[8:2]`
//! (destination) and `udp[10:2]` (source), the generations as `udp[14:2]`
//! and `udp[16:2]`. A channel's filter matches all four, so a frame sent
//! to or from an endpoint that has gone never reaches the endpoint that
//! holds its slot next.
//!
//! [`FrameHeader::write`] and [`FrameHeader::parse`] are the codec;
//! [`FrameHeader::template`] with [`patch_lengths`] / [`patch`] is the fast
//! path of the engine, which builds a channel's header once and per message
//! only updates the two length fields, the identification and the IPv4
//! header checksum, incrementally as in RFC 1624. The UDP checksum
//! ([`udp_checksum`], RFC 768) is optional; [`udp_checksum_with_payload_sum`]
//! takes the payload's ones'-complement sum from elsewhere (ilp's fused
//! copy-and-checksum loop).

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::str::FromStr;

/// Length of the whole header (Ethernet + IPv4 + UDP + unet): the payload
/// starts here.
pub const HEADER_LEN: usize = 54;
/// Length of the Ethernet, IPv4 and UDP headers: the part the `udp`
/// transport leaves to the kernel (the datagram it sends starts here).
pub const WIRE_HEADER_LEN: usize = 42;
/// Length of the IPv4 header (no options).
pub const IPV4_HEADER_LEN: usize = 20;
/// Length of the UDP header.
pub const UDP_HEADER_LEN: usize = 8;
/// Length of the unet header.
pub const UNET_HEADER_LEN: usize = 12;
/// The largest payload of one frame: the IPv4 total length is a `u16`.
pub const MAX_PAYLOAD: usize = 65535 - IPV4_HEADER_LEN - UDP_HEADER_LEN - UNET_HEADER_LEN;

/// Offset of the Ethernet destination MAC.
pub const ETH_DST: usize = 0;
/// Offset of the Ethernet source MAC.
pub const ETH_SRC: usize = 6;
/// Offset of the ethertype.
pub const ETH_TYPE: usize = 12;
/// Offset of the IPv4 header (its version/IHL byte).
pub const IP: usize = 14;
/// Offset of the IPv4 type of service.
pub const IP_TOS: usize = 15;
/// Offset of the IPv4 total length.
pub const IP_TOTAL_LEN: usize = 16;
/// Offset of the IPv4 identification.
pub const IP_ID: usize = 18;
/// Offset of the IPv4 flags and fragment offset.
pub const IP_FRAG: usize = 20;
/// Offset of the IPv4 time to live.
pub const IP_TTL: usize = 22;
/// Offset of the IPv4 protocol.
pub const IP_PROTO: usize = 23;
/// Offset of the IPv4 header checksum.
pub const IP_CSUM: usize = 24;
/// Offset of the IPv4 source address.
pub const IP_SRC: usize = 26;
/// Offset of the IPv4 destination address.
pub const IP_DST: usize = 30;
/// Offset of the UDP header (its source port).
pub const UDP: usize = 34;
/// Offset of the UDP source port.
pub const UDP_SRC_PORT: usize = 34;
/// Offset of the UDP destination port.
pub const UDP_DST_PORT: usize = 36;
/// Offset of the UDP length.
pub const UDP_LEN: usize = 38;
/// Offset of the UDP checksum.
pub const UDP_CSUM: usize = 40;
/// Offset of the unet header (its destination endpoint id).
pub const UNET: usize = 42;
/// Offset of the destination endpoint's slot.
pub const UNET_DST_EP: usize = 42;
/// Offset of the source endpoint's slot.
pub const UNET_SRC_EP: usize = 44;
/// Offset of the unet flags.
pub const UNET_FLAGS: usize = 46;
/// Offset of the destination endpoint's generation.
pub const UNET_DST_GEN: usize = 48;
/// Offset of the source endpoint's generation.
pub const UNET_SRC_GEN: usize = 50;
/// Offset of the reserved unet field (zero).
pub const UNET_RESERVED: usize = 52;

/// An endpoint's id on its engine: the slot in the low 16 bits, the
/// slot's generation (at least 1) in the high 16 bits. An engine gives a
/// slot a new generation each time it hands the slot to a new endpoint, and
/// never hands out an id twice (a slot whose generations are used up is
/// retired), so an id names one endpoint for the engine's lifetime.
pub type EndpointId = u32;

/// The slot of endpoint id `id`.
#[inline]
pub const fn endpoint_slot(id: EndpointId) -> u16 {
    id as u16
}

/// The generation of endpoint id `id`.
#[inline]
pub const fn endpoint_generation(id: EndpointId) -> u16 {
    (id >> 16) as u16
}

/// The endpoint id of `slot` at `generation`.
#[inline]
pub const fn endpoint_id(slot: u16, generation: u16) -> EndpointId {
    (generation as u32) << 16 | slot as u32
}

/// The ethertype of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// IPv4 version 4, header length 5 words.
pub const IPV4_VERSION_IHL: u8 = 0x45;
/// The IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// The IPv4 flags and fragment offset unet sends: DF, offset 0.
pub const IPV4_DF: u16 = 0x4000;
/// The TTL unet sends.
pub const DEFAULT_TTL: u8 = 64;
/// unet flag bit 0: the UDP checksum field holds a checksum.
pub const FLAG_UDP_CHECKSUM: u16 = 1;

/// An address on the unet network: an engine's IPv4 address and UDP port.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Addr {
    /// The IPv4 address.
    pub ip: Ipv4Addr,
    /// The UDP port.
    pub port: u16,
}

impl Addr {
    /// The address `ip:port`.
    pub const fn new(ip: Ipv4Addr, port: u16) -> Self {
        Addr { ip, port }
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.ip, self.port)
    }
}

impl From<SocketAddrV4> for Addr {
    fn from(s: SocketAddrV4) -> Self {
        Addr::new(*s.ip(), s.port())
    }
}

impl From<Addr> for SocketAddrV4 {
    fn from(a: Addr) -> Self {
        SocketAddrV4::new(a.ip, a.port)
    }
}

impl FromStr for Addr {
    type Err = std::net::AddrParseError;

    /// Parses `a.b.c.d:port`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse::<SocketAddrV4>().map(Addr::from)
    }
}

/// An Ethernet MAC address.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// The broadcast address ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// The locally administered unicast MAC that `loop` and `udp` use for
    /// an IPv4 address `a.b.c.d`: 02:00:a:b:c:d (bit 1 of the first byte
    /// marks it locally administered, bit 0 clear makes it unicast).
    pub const fn from_ip(ip: Ipv4Addr) -> Self {
        let o = ip.octets();
        MacAddr([0x02, 0x00, o[0], o[1], o[2], o[3]])
    }

    /// Whether this is the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether the group bit is set (multicast or broadcast).
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 1 == 1
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(m: [u8; 6]) -> Self {
        MacAddr(m)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(m: MacAddr) -> Self {
        m.0
    }
}

/// Why a frame was rejected or could not be written. Each variant names the
/// field; [`offset`](FrameError::offset) is the byte offset in the frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The frame ends before the 54-byte header does.
    #[error(
        "frame of {len} bytes is shorter than the {HEADER_LEN}-byte unet header (at byte {len})"
    )]
    Truncated {
        /// The frame's length.
        len: usize,
    },
    /// The ethertype is not IPv4.
    #[error("ethertype {found:#06x} is not IPv4 (0x0800) at byte {ETH_TYPE}")]
    Ethertype {
        /// The ethertype found.
        found: u16,
    },
    /// The IPv4 version/IHL byte is not 0x45 (IPv4 without options).
    #[error("IPv4 version/IHL {found:#04x} is not 0x45 at byte {IP}")]
    VersionIhl {
        /// The byte found.
        found: u8,
    },
    /// The IPv4 protocol is not UDP.
    #[error("IP protocol {found} is not UDP (17) at byte {IP_PROTO}")]
    Protocol {
        /// The protocol found.
        found: u8,
    },
    /// The IPv4 total length is shorter than the headers or longer than the
    /// frame.
    #[error(
        "IPv4 total length {found} at byte {IP_TOTAL_LEN} does not fit a frame of {frame_len} bytes (needs 36..={})",
        frame_len.saturating_sub(IP)
    )]
    TotalLength {
        /// The total length found.
        found: u16,
        /// The frame's length.
        frame_len: usize,
    },
    /// The datagram is a fragment (MF set or a non-zero fragment offset).
    #[error("IPv4 fragment (flags/offset {found:#06x}) at byte {IP_FRAG}")]
    Fragment {
        /// The flags and fragment offset field.
        found: u16,
    },
    /// The IPv4 header checksum is wrong.
    #[error("IPv4 header checksum {found:#06x} at byte {IP_CSUM}, expected {expected:#06x}")]
    HeaderChecksum {
        /// The checksum found.
        found: u16,
        /// The correct checksum.
        expected: u16,
    },
    /// The UDP length disagrees with the IPv4 total length.
    #[error("UDP length {found} at byte {UDP_LEN}, expected {expected} (IPv4 total length - 20)")]
    UdpLength {
        /// The UDP length found.
        found: u16,
        /// The length the IPv4 header implies.
        expected: u16,
    },
    /// The reserved unet field is not zero.
    #[error("reserved unet field {found:#06x} at byte {UNET_RESERVED} is not zero")]
    Reserved {
        /// The value found.
        found: u16,
    },
    /// The UDP checksum is wrong.
    #[error("UDP checksum {found:#06x} at byte {UDP_CSUM}, expected {expected:#06x}")]
    UdpChecksum {
        /// The checksum found.
        found: u16,
        /// The correct checksum.
        expected: u16,
    },
    /// A payload too long for one IPv4 datagram.
    #[error(
        "payload of {len} bytes exceeds the maximum of {MAX_PAYLOAD} (IPv4 total length at byte {IP_TOTAL_LEN})"
    )]
    PayloadTooLong {
        /// The payload length asked for.
        len: usize,
    },
    /// The output buffer is too short for the header.
    #[error(
        "output buffer of {len} bytes is shorter than the {HEADER_LEN}-byte header (at byte {len})"
    )]
    OutputTooShort {
        /// The buffer's length.
        len: usize,
    },
}

impl FrameError {
    /// The byte offset in the frame of the field in error.
    pub fn offset(&self) -> usize {
        match *self {
            FrameError::Truncated { len } | FrameError::OutputTooShort { len } => len,
            FrameError::Ethertype { .. } => ETH_TYPE,
            FrameError::VersionIhl { .. } => IP,
            FrameError::Protocol { .. } => IP_PROTO,
            FrameError::TotalLength { .. } | FrameError::PayloadTooLong { .. } => IP_TOTAL_LEN,
            FrameError::Fragment { .. } => IP_FRAG,
            FrameError::HeaderChecksum { .. } => IP_CSUM,
            FrameError::UdpLength { .. } => UDP_LEN,
            FrameError::Reserved { .. } => UNET_RESERVED,
            FrameError::UdpChecksum { .. } => UDP_CSUM,
        }
    }
}

/// The fields of a unet frame's header that vary between channels. The
/// others are fixed by the wire format (ethertype IPv4, IHL 5, TOS 0, DF,
/// TTL 64, protocol UDP, reserved 0) or computed (lengths, checksums); the
/// identification is written as 0 and set per message by [`patch`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct FrameHeader {
    /// Ethernet source MAC.
    pub src_mac: [u8; 6],
    /// Ethernet destination MAC.
    pub dst_mac: [u8; 6],
    /// Source address (IPv4 source, UDP source port).
    pub src: Addr,
    /// Destination address (IPv4 destination, UDP destination port).
    pub dst: Addr,
    /// Destination endpoint id (slot and generation).
    pub dst_ep: EndpointId,
    /// Source endpoint id (slot and generation).
    pub src_ep: EndpointId,
    /// unet flags (bit 0: [`FLAG_UDP_CHECKSUM`]).
    pub flags: u16,
}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
fn ip_at(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

impl FrameHeader {
    /// A header from `src` to `dst` with the MACs `loop` and `udp` use
    /// ([`MacAddr::from_ip`]) and no flags.
    pub fn new(src: Addr, dst: Addr, dst_ep: EndpointId, src_ep: EndpointId) -> Self {
        FrameHeader {
            src_mac: MacAddr::from_ip(src.ip).0,
            dst_mac: MacAddr::from_ip(dst.ip).0,
            src,
            dst,
            dst_ep,
            src_ep,
            flags: 0,
        }
    }

    /// Writes the 54 header bytes for a payload of `payload_len` bytes into
    /// `out[..54]`: the IPv4 total length, the UDP length and the IPv4
    /// header checksum computed, identification 0 and the UDP checksum
    /// field 0 (see [`set_udp_checksum`]).
    pub fn write(&self, payload_len: usize, out: &mut [u8]) -> Result<(), FrameError> {
        if payload_len > MAX_PAYLOAD {
            return Err(FrameError::PayloadTooLong { len: payload_len });
        }
        let Some(out) = out.get_mut(..HEADER_LEN) else {
            return Err(FrameError::OutputTooShort { len: out.len() });
        };
        let mut t = self.template();
        patch_lengths(&mut t, payload_len);
        out.copy_from_slice(&t);
        Ok(())
    }

    /// The header for an empty payload with identification 0: the
    /// template a channel keeps and [`patch`] per message.
    pub fn template(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[ETH_DST..ETH_DST + 6].copy_from_slice(&self.dst_mac);
        h[ETH_SRC..ETH_SRC + 6].copy_from_slice(&self.src_mac);
        put16(&mut h, ETH_TYPE, ETHERTYPE_IPV4);
        h[IP] = IPV4_VERSION_IHL;
        h[IP_TOS] = 0;
        put16(&mut h, IP_TOTAL_LEN, (HEADER_LEN - IP) as u16);
        put16(&mut h, IP_ID, 0);
        put16(&mut h, IP_FRAG, IPV4_DF);
        h[IP_TTL] = DEFAULT_TTL;
        h[IP_PROTO] = IPPROTO_UDP;
        h[IP_SRC..IP_SRC + 4].copy_from_slice(&self.src.ip.octets());
        h[IP_DST..IP_DST + 4].copy_from_slice(&self.dst.ip.octets());
        put16(&mut h, UDP_SRC_PORT, self.src.port);
        put16(&mut h, UDP_DST_PORT, self.dst.port);
        put16(&mut h, UDP_LEN, (HEADER_LEN - UDP) as u16);
        put16(&mut h, UDP_CSUM, 0);
        put16(&mut h, UNET_DST_EP, endpoint_slot(self.dst_ep));
        put16(&mut h, UNET_SRC_EP, endpoint_slot(self.src_ep));
        put16(&mut h, UNET_FLAGS, self.flags);
        put16(&mut h, UNET_DST_GEN, endpoint_generation(self.dst_ep));
        put16(&mut h, UNET_SRC_GEN, endpoint_generation(self.src_ep));
        put16(&mut h, UNET_RESERVED, 0);
        let csum = ipv4_header_checksum(&h);
        put16(&mut h, IP_CSUM, csum);
        h
    }

    /// Parses and validates a frame: at least 54 bytes, ethertype IPv4,
    /// version/IHL 0x45, protocol UDP, not a fragment, a correct header
    /// checksum, a total length that fits the frame (which may carry
    /// Ethernet padding beyond it), a UDP length that agrees, and a zero
    /// reserved field. Returns the header and the payload (without the
    /// padding). The UDP checksum is not checked here
    /// ([`verify_udp_checksum`]).
    pub fn parse(frame: &[u8]) -> Result<(FrameHeader, &[u8]), FrameError> {
        if frame.len() < HEADER_LEN {
            return Err(FrameError::Truncated { len: frame.len() });
        }
        let ethertype = be16(frame, ETH_TYPE);
        if ethertype != ETHERTYPE_IPV4 {
            return Err(FrameError::Ethertype { found: ethertype });
        }
        if frame[IP] != IPV4_VERSION_IHL {
            return Err(FrameError::VersionIhl { found: frame[IP] });
        }
        if frame[IP_PROTO] != IPPROTO_UDP {
            return Err(FrameError::Protocol {
                found: frame[IP_PROTO],
            });
        }
        let total = be16(frame, IP_TOTAL_LEN);
        let end = IP + total as usize;
        if end < HEADER_LEN || end > frame.len() {
            return Err(FrameError::TotalLength {
                found: total,
                frame_len: frame.len(),
            });
        }
        let frag = be16(frame, IP_FRAG);
        if frag & 0x3fff != 0 {
            return Err(FrameError::Fragment { found: frag });
        }
        let sum = ones_sum(&frame[IP..UDP]);
        if sum != 0xffff {
            let found = be16(frame, IP_CSUM);
            let mut hdr = [0u8; IPV4_HEADER_LEN];
            hdr.copy_from_slice(&frame[IP..UDP]);
            hdr[IP_CSUM - IP..IP_CSUM - IP + 2].fill(0);
            return Err(FrameError::HeaderChecksum {
                found,
                expected: !ones_sum(&hdr),
            });
        }
        let udp_len = be16(frame, UDP_LEN);
        let expected = total - IPV4_HEADER_LEN as u16;
        if udp_len != expected {
            return Err(FrameError::UdpLength {
                found: udp_len,
                expected,
            });
        }
        let reserved = be16(frame, UNET_RESERVED);
        if reserved != 0 {
            return Err(FrameError::Reserved { found: reserved });
        }
        let mut src_mac = [0u8; 6];
        let mut dst_mac = [0u8; 6];
        src_mac.copy_from_slice(&frame[ETH_SRC..ETH_SRC + 6]);
        dst_mac.copy_from_slice(&frame[ETH_DST..ETH_DST + 6]);
        let header = FrameHeader {
            src_mac,
            dst_mac,
            src: Addr::new(ip_at(frame, IP_SRC), be16(frame, UDP_SRC_PORT)),
            dst: Addr::new(ip_at(frame, IP_DST), be16(frame, UDP_DST_PORT)),
            dst_ep: endpoint_id(be16(frame, UNET_DST_EP), be16(frame, UNET_DST_GEN)),
            src_ep: endpoint_id(be16(frame, UNET_SRC_EP), be16(frame, UNET_SRC_GEN)),
            flags: be16(frame, UNET_FLAGS),
        };
        Ok((header, &frame[HEADER_LEN..end]))
    }
}

/// The destination address (IPv4 destination, UDP destination port) of a
/// frame, read without validation, or `None` if the frame is shorter than
/// the Ethernet, IPv4 and UDP headers. Transports route by it.
#[inline]
pub fn peek_dst(frame: &[u8]) -> Option<Addr> {
    if frame.len() < WIRE_HEADER_LEN {
        return None;
    }
    Some(Addr::new(ip_at(frame, IP_DST), be16(frame, UDP_DST_PORT)))
}

/// The source address (IPv4 source, UDP source port) of a frame, read
/// without validation, or `None` if the frame is too short.
#[inline]
pub fn peek_src(frame: &[u8]) -> Option<Addr> {
    if frame.len() < WIRE_HEADER_LEN {
        return None;
    }
    Some(Addr::new(ip_at(frame, IP_SRC), be16(frame, UDP_SRC_PORT)))
}

/// Sets the IPv4 total length and the UDP length of a header for a payload
/// of `payload_len` bytes and updates the IPv4 header checksum
/// incrementally (RFC 1624, eqn. 3: `HC' = ~(~HC + ~m + m')`). The header
/// must have a correct checksum before (as [`FrameHeader::template`] and
/// [`FrameHeader::write`] leave it); the result equals a full recompute.
///
/// A `payload_len` above [`MAX_PAYLOAD`] is taken modulo the 16-bit field
/// (the caller checks the length against the transport's maximum first).
#[inline]
pub fn patch_lengths(hdr: &mut [u8; HEADER_LEN], payload_len: usize) {
    let total = (payload_len + (HEADER_LEN - IP)) as u16;
    let udp = (payload_len + (HEADER_LEN - UDP)) as u16;
    let old_total = be16(hdr, IP_TOTAL_LEN);
    let old_csum = be16(hdr, IP_CSUM);
    let csum = incremental(old_csum, old_total, total);
    put16(hdr, IP_TOTAL_LEN, total);
    put16(hdr, UDP_LEN, udp);
    put16(hdr, IP_CSUM, csum);
}

/// What [`patch_lengths_from`] needs of a template that does not change
/// with the length: `~HC + ~m` of RFC 1624's eqn. 3, the template's
/// checksum and total length complemented and summed (not folded). The
/// engine keeps it with each channel's template.
#[inline]
pub fn length_sum(hdr: &[u8; HEADER_LEN]) -> u32 {
    u32::from(!be16(hdr, IP_CSUM)) + u32::from(!be16(hdr, IP_TOTAL_LEN))
}

/// [`patch_lengths`] on a copy of a template whose [`length_sum`] is
/// `sum`: the same lengths and the same checksum, without reading the
/// header's two words again.
#[inline]
pub fn patch_lengths_from(hdr: &mut [u8; HEADER_LEN], sum: u32, payload_len: usize) {
    let total = (payload_len + (HEADER_LEN - IP)) as u16;
    let udp = (payload_len + (HEADER_LEN - UDP)) as u16;
    put16(hdr, IP_TOTAL_LEN, total);
    put16(hdr, UDP_LEN, udp);
    put16(hdr, IP_CSUM, !fold(sum + u32::from(total)));
}

/// [`patch_lengths`] and the IPv4 identification `ident`, both folded into
/// the checksum incrementally: what the engine does per message.
#[inline]
pub fn patch(hdr: &mut [u8; HEADER_LEN], payload_len: usize, ident: u16) {
    let total = (payload_len + (HEADER_LEN - IP)) as u16;
    let udp = (payload_len + (HEADER_LEN - UDP)) as u16;
    let old_total = be16(hdr, IP_TOTAL_LEN);
    let old_id = be16(hdr, IP_ID);
    let old_csum = be16(hdr, IP_CSUM);
    // RFC 1624 eqn. 3 for two changed words: ~(~HC + ~m1 + m1' + ~m2 + m2').
    let sum = u32::from(!old_csum)
        + u32::from(!old_total)
        + u32::from(total)
        + u32::from(!old_id)
        + u32::from(ident);
    put16(hdr, IP_TOTAL_LEN, total);
    put16(hdr, IP_ID, ident);
    put16(hdr, UDP_LEN, udp);
    put16(hdr, IP_CSUM, !fold(sum));
}

/// RFC 1624 eqn. 3 for one changed word.
#[inline]
fn incremental(old_csum: u16, old: u16, new: u16) -> u16 {
    !fold(u32::from(!old_csum) + u32::from(!old) + u32::from(new))
}

/// Folds a 32-bit partial sum to a 16-bit ones'-complement sum.
#[inline]
pub fn fold(mut sum: u32) -> u16 {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// Folds a 64-bit partial sum to a 16-bit ones'-complement sum.
#[inline]
fn fold64(sum: u64) -> u16 {
    let s = (sum & 0xffff_ffff) + (sum >> 32);
    let s = (s & 0xffff_ffff) + (s >> 32);
    fold((s & 0xffff_ffff) as u32 + (s >> 32) as u32)
}

/// The ones'-complement sum of `data` as big-endian 16-bit words, an odd
/// trailing byte padded with zero (RFC 1071), not complemented. It is 0
/// exactly when every byte is 0.
pub fn ones_sum(data: &[u8]) -> u16 {
    // RFC 1071 §2(C): summing 64-bit big-endian words with end-around
    // carry and folding gives the same ones'-complement sum as 16-bit words.
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let v = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let (s, carry) = acc.overflowing_add(v);
        acc = s + u64::from(carry);
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    let v = u64::from_be_bytes(tail);
    let (s, carry) = acc.overflowing_add(v);
    acc = s + u64::from(carry);
    fold64(acc)
}

/// Ones'-complement addition of two 16-bit sums.
#[inline]
pub fn ones_add(a: u16, b: u16) -> u16 {
    fold(u32::from(a) + u32::from(b))
}

/// The IPv4 header checksum of `hdr[14..34]`, with the checksum field
/// taken as zero (RFC 791, RFC 1071): the value to store at byte 24.
pub fn ipv4_header_checksum(hdr: &[u8; HEADER_LEN]) -> u16 {
    let mut words = [0u8; IPV4_HEADER_LEN];
    words.copy_from_slice(&hdr[IP..UDP]);
    words[IP_CSUM - IP] = 0;
    words[IP_CSUM - IP + 1] = 0;
    !ones_sum(&words)
}

/// The UDP checksum (RFC 768) of a frame: the ones'-complement sum of the
/// pseudo-header (source and destination address, protocol, UDP length),
/// the UDP header with its checksum field taken as zero, the unet header
/// and the payload up to the UDP length, complemented; a result of 0 is
/// sent as 0xffff. The frame should have passed [`FrameHeader::parse`]; a
/// shorter frame is summed as far as it goes and then as if zero-padded.
pub fn udp_checksum(frame: &[u8]) -> u16 {
    let Some(header) = frame.first_chunk::<HEADER_LEN>() else {
        let mut h = [0u8; HEADER_LEN];
        h[..frame.len()].copy_from_slice(frame);
        return udp_checksum_with_payload_sum(&h, 0);
    };
    let udp_len = usize::from(be16(frame, UDP_LEN));
    let end = (UDP + udp_len).clamp(HEADER_LEN, frame.len());
    udp_checksum_with_payload_sum(header, u32::from(ones_sum(&frame[HEADER_LEN..end])))
}

/// The UDP checksum of a frame whose 54-byte header is `header` and whose
/// payload's ones'-complement sum (RFC 1071: big-endian 16-bit words, not
/// complemented, e.g. ilp's `State::sum`) is `payload_sum`; any 32-bit
/// partial sum is accepted and folded. The payload starts at byte 54, an
/// even offset, so its words line up with the frame's.
pub fn udp_checksum_with_payload_sum(header: &[u8; HEADER_LEN], payload_sum: u32) -> u16 {
    let mut sum = u32::from(ones_sum(&header[IP_SRC..UDP])); // source, destination addresses
    sum += u32::from(IPPROTO_UDP);
    sum += u32::from(be16(header, UDP_LEN));
    sum += u32::from(ones_sum(&header[UDP..UDP_CSUM]));
    sum += u32::from(ones_sum(&header[UNET..HEADER_LEN]));
    sum += u32::from(fold(payload_sum));
    match !fold(sum) {
        0 => 0xffff,
        c => c,
    }
}

/// Sets unet flag bit 0 ("UDP checksum present") and stores the UDP
/// checksum of the frame at byte 40. A frame shorter than the header is
/// left unchanged and reported.
pub fn set_udp_checksum(frame: &mut [u8]) -> Result<(), FrameError> {
    if frame.len() < HEADER_LEN {
        return Err(FrameError::Truncated { len: frame.len() });
    }
    let flags = be16(frame, UNET_FLAGS) | FLAG_UDP_CHECKSUM;
    put16(frame, UNET_FLAGS, flags);
    put16(frame, UDP_CSUM, 0);
    let c = udp_checksum(frame);
    put16(frame, UDP_CSUM, c);
    Ok(())
}

/// Verifies a frame's UDP checksum: `Ok(true)` if it is present and
/// correct, `Ok(false)` if the field is 0 (none was sent, RFC 768), and an
/// error naming both values if it is wrong.
pub fn verify_udp_checksum(frame: &[u8]) -> Result<bool, FrameError> {
    if frame.len() < HEADER_LEN {
        return Err(FrameError::Truncated { len: frame.len() });
    }
    let found = be16(frame, UDP_CSUM);
    if found == 0 {
        return Ok(false);
    }
    let expected = udp_checksum(frame);
    if found == expected {
        Ok(true)
    } else {
        Err(FrameError::UdpChecksum { found, expected })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Addr {
        s.parse().unwrap()
    }

    fn header() -> FrameHeader {
        FrameHeader::new(
            a("10.0.0.2:7001"),
            a("10.0.0.1:7000"),
            endpoint_id(5, 3),
            endpoint_id(9, 4),
        )
    }

    fn frame(h: &FrameHeader, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; HEADER_LEN + payload.len()];
        h.write(payload.len(), &mut f).unwrap();
        f[HEADER_LEN..].copy_from_slice(payload);
        f
    }

    /// RFC 1071 summed the slow way: 16-bit words, one at a time, with
    /// end-around carry.
    fn naive_sum(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for w in data.chunks(2) {
            s += u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0));
            s = (s & 0xffff) + (s >> 16);
        }
        s as u16
    }

    /// A header recomputed field by field: the oracle of the fast paths.
    fn recomputed(h: &[u8; HEADER_LEN]) -> [u8; HEADER_LEN] {
        let mut r = *h;
        r[IP_CSUM] = 0;
        r[IP_CSUM + 1] = 0;
        let c = !naive_sum(&r[IP..UDP]);
        r[IP_CSUM..IP_CSUM + 2].copy_from_slice(&c.to_be_bytes());
        r
    }

    #[test]
    fn addr_and_mac_print_and_parse() {
        let x = a("10.0.0.1:7000");
        assert_eq!(x, Addr::new(Ipv4Addr::new(10, 0, 0, 1), 7000));
        assert_eq!(x.to_string(), "10.0.0.1:7000");
        assert!("10.0.0.1".parse::<Addr>().is_err());
        let m = MacAddr::from_ip(Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(m.0, [0x02, 0, 10, 0, 0, 1]);
        assert_eq!(m.to_string(), "02:00:0a:00:00:01");
        assert!(!m.is_multicast() && !m.is_broadcast());
        assert!(MacAddr::BROADCAST.is_broadcast() && MacAddr::BROADCAST.is_multicast());
    }

    #[test]
    fn written_header_has_the_wire_format_of_the_brief() {
        let f = frame(&header(), &[0xab; 7]);
        assert_eq!(&f[0..6], &[2, 0, 10, 0, 0, 1]);
        assert_eq!(&f[6..12], &[2, 0, 10, 0, 0, 2]);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        assert_eq!(f[14], 0x45);
        assert_eq!(f[15], 0);
        assert_eq!(be16(&f, 16), 20 + 8 + 12 + 7);
        assert_eq!(be16(&f, 18), 0);
        assert_eq!(be16(&f, 20), 0x4000);
        assert_eq!(f[22], 64);
        assert_eq!(f[23], 17);
        assert_eq!(&f[26..30], &[10, 0, 0, 2]);
        assert_eq!(&f[30..34], &[10, 0, 0, 1]);
        assert_eq!(be16(&f, 34), 7001);
        assert_eq!(be16(&f, 36), 7000);
        assert_eq!(be16(&f, 38), 8 + 12 + 7);
        assert_eq!(be16(&f, 40), 0);
        assert_eq!(be16(&f, 42), 5);
        assert_eq!(be16(&f, 44), 9);
        assert_eq!(be16(&f, 46), 0);
        assert_eq!(be16(&f, 48), 3);
        assert_eq!(be16(&f, 50), 4);
        assert_eq!(be16(&f, 52), 0);
        // The checksum makes the header's words sum to 0xffff.
        assert_eq!(naive_sum(&f[14..34]), 0xffff);
    }

    #[test]
    fn round_trip() {
        let mut h = header();
        h.flags = 0x8001;
        h.src_mac = [1, 2, 3, 4, 5, 6];
        for len in [0usize, 1, 55, 56, 57, 1024, 4096, MAX_PAYLOAD] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let f = frame(&h, &payload);
            let (got, p) = FrameHeader::parse(&f).unwrap();
            assert_eq!(got, h);
            assert_eq!(p, &payload[..]);
        }
    }

    #[test]
    fn ethernet_padding_is_not_payload() {
        // A 3-byte payload is a 57-byte frame; Ethernet pads it to 60.
        let mut f = frame(&header(), b"abc");
        f.resize(60, 0);
        let (_, p) = FrameHeader::parse(&f).unwrap();
        assert_eq!(p, b"abc");
    }

    #[test]
    fn write_rejects_long_payloads_and_short_buffers() {
        let mut out = [0u8; 64];
        assert_eq!(
            header().write(MAX_PAYLOAD + 1, &mut out),
            Err(FrameError::PayloadTooLong {
                len: MAX_PAYLOAD + 1
            })
        );
        let e = header().write(0, &mut out[..53]).unwrap_err();
        assert_eq!(e, FrameError::OutputTooShort { len: 53 });
        assert_eq!(e.offset(), 53);
        assert_eq!(out, [0u8; 64], "nothing written on error");
    }

    /// Every rejection, each with the offset of the field it names.
    #[test]
    fn every_rejection_names_its_offset() {
        let good = frame(&header(), &[1, 2, 3, 4]);
        // Refixes the IPv4 checksum so that only the damaged field is wrong.
        let fix = |f: &mut Vec<u8>| {
            let h: [u8; HEADER_LEN] = f[..HEADER_LEN].try_into().unwrap();
            let c = ipv4_header_checksum(&h);
            f[IP_CSUM..IP_CSUM + 2].copy_from_slice(&c.to_be_bytes());
        };
        type Damage = fn(&mut Vec<u8>);
        let cases: Vec<(Damage, FrameError, usize)> = vec![
            (|f| f.truncate(53), FrameError::Truncated { len: 53 }, 53),
            (
                |f| f[12] = 0x86,
                FrameError::Ethertype { found: 0x8600 },
                12,
            ),
            (|f| f[14] = 0x46, FrameError::VersionIhl { found: 0x46 }, 14),
            (|f| f[23] = 6, FrameError::Protocol { found: 6 }, 23),
            (
                |f| put16(f, IP_TOTAL_LEN, 45),
                FrameError::TotalLength {
                    found: 45,
                    frame_len: 58,
                },
                16,
            ),
            (
                |f| put16(f, IP_TOTAL_LEN, 39),
                FrameError::TotalLength {
                    found: 39,
                    frame_len: 58,
                },
                16,
            ),
            (
                |f| put16(f, IP_FRAG, 0x2000),
                FrameError::Fragment { found: 0x2000 },
                20,
            ),
            (
                |f| put16(f, IP_FRAG, 0x4001),
                FrameError::Fragment { found: 0x4001 },
                20,
            ),
            (
                |f| put16(f, UDP_LEN, 13),
                FrameError::UdpLength {
                    found: 13,
                    expected: 24,
                },
                38,
            ),
            (
                |f| put16(f, UNET_RESERVED, 1),
                FrameError::Reserved { found: 1 },
                52,
            ),
        ];
        for (damage, want, offset) in cases {
            let mut f = good.clone();
            damage(&mut f);
            if f.len() >= HEADER_LEN {
                fix(&mut f);
            }
            let e = FrameHeader::parse(&f).unwrap_err();
            assert_eq!(e, want);
            assert_eq!(e.offset(), offset, "{e}");
            assert!(e.to_string().contains(&format!("byte {offset}")), "{e}");
        }
        // A wrong header checksum, reported with the right one.
        let mut f = good.clone();
        let right = be16(&f, IP_CSUM);
        put16(&mut f, IP_CSUM, right ^ 0x0100);
        let e = FrameHeader::parse(&f).unwrap_err();
        assert_eq!(
            e,
            FrameError::HeaderChecksum {
                found: right ^ 0x0100,
                expected: right
            }
        );
        assert_eq!(e.offset(), 24);
        // A flipped address bit is caught by the checksum too.
        let mut f = good.clone();
        f[IP_SRC + 3] ^= 1;
        assert!(matches!(
            FrameHeader::parse(&f),
            Err(FrameError::HeaderChecksum { .. })
        ));
        // DF clear is fine: only MF and the offset make a fragment.
        let mut f = good;
        put16(&mut f, IP_FRAG, 0);
        fix(&mut f);
        assert!(FrameHeader::parse(&f).is_ok());
    }

    #[test]
    fn nothing_panics_on_arbitrary_bytes() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let good = frame(&header(), &[9; 20]);
        for i in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let mut f = good.clone();
            f.truncate((seed % 80) as usize);
            let at = (seed >> 8) as usize % 70;
            if let Some(b) = f.get_mut(at) {
                *b = (seed >> 20) as u8;
            }
            if i % 3 == 0 {
                f.iter_mut().for_each(|b| *b = (seed >> 30) as u8);
            }
            let _ = FrameHeader::parse(&f);
            let _ = udp_checksum(&f);
            let _ = verify_udp_checksum(&f);
            let _ = set_udp_checksum(&mut f);
            let _ = peek_dst(&f);
        }
    }

    /// RFC 1071 §3's worked example: the bytes 00 01 f2 03 f4 f5 f6 f7
    /// sum to ddf2, so the checksum is 220d.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_sum(&data), 0xddf2);
        assert_eq!(!ones_sum(&data), 0x220d);
        assert_eq!(naive_sum(&data), 0xddf2);
        // Odd lengths pad with a zero byte.
        assert_eq!(ones_sum(&[0xab]), 0xab00);
        assert_eq!(ones_sum(&[]), 0);
    }

    #[test]
    fn ones_sum_matches_the_naive_sum_for_every_length_and_alignment() {
        let data: Vec<u8> = (0..300u32).map(|i| (i * 131 + 7) as u8 | 0x80).collect();
        for start in 0..8 {
            for end in start..data.len() {
                assert_eq!(ones_sum(&data[start..end]), naive_sum(&data[start..end]));
            }
        }
        // Many carries: all ones.
        let ff = [0xffu8; 4097];
        assert_eq!(ones_sum(&ff), naive_sum(&ff));
    }

    /// A hand-computed IPv4 header checksum: the header of
    /// 10.0.0.2 -> 10.0.0.1, total length 40, id 0, DF, TTL 64, UDP:
    /// 4500 + 0028 + 0000 + 4000 + 4011 + 0000 + 0a00 + 0002 + 0a00 + 0001
    /// = 0xd93c (no carry), complemented: 0x26c3.
    #[test]
    fn ipv4_checksum_by_hand() {
        let t = header().template();
        assert_eq!(be16(&t, IP_TOTAL_LEN), 40);
        assert_eq!(be16(&t, IP_CSUM), 0x26c3);
    }

    /// The UDP checksum of a small frame, summed by hand:
    /// pseudo-header 0a00 0002 0a00 0001 0011 0018,
    /// UDP 1b59 1b58 0018 (checksum 0), unet 0005 0009 0001 0003 0004 0000,
    /// payload 0102 0304.
    #[test]
    fn udp_checksum_by_hand() {
        let mut h = header();
        h.flags = FLAG_UDP_CHECKSUM;
        let mut f = frame(&h, &[1, 2, 3, 4]);
        let words: [u32; 17] = [
            0x0a00, 0x0002, 0x0a00, 0x0001, 0x0011, 0x0018, 0x1b59, 0x1b58, 0x0018, 0x0005, 0x0009,
            0x0001, 0x0003, 0x0004, 0x0000, 0x0102, 0x0304,
        ];
        let want = !fold(words.iter().sum());
        assert_eq!(udp_checksum(&f), want);
        set_udp_checksum(&mut f).unwrap();
        assert_eq!(be16(&f, UDP_CSUM), want);
        assert_eq!(verify_udp_checksum(&f), Ok(true));
        // Every single-bit error in the UDP part is detected.
        for byte in UDP..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                g[byte] ^= 1 << bit;
                if byte == UDP_LEN || byte == UDP_LEN + 1 {
                    continue; // the length changes what is summed
                }
                if be16(&g, UDP_CSUM) == 0 {
                    continue; // "no checksum"
                }
                assert!(
                    matches!(verify_udp_checksum(&g), Err(FrameError::UdpChecksum { .. })),
                    "bit {bit} of byte {byte}"
                );
            }
        }
    }

    #[test]
    fn udp_checksum_zero_is_sent_as_ffff_and_zero_means_none() {
        let mut h = header();
        h.flags = FLAG_UDP_CHECKSUM;
        let mut f = frame(&h, &[0, 0]);
        assert_eq!(verify_udp_checksum(&f), Ok(false));
        // The sum over everything but the payload word, then a payload
        // word that brings the total to 0xffff (its ones'-complement
        // negative): the checksum computes to 0 and is sent as 0xffff.
        let partial = !udp_checksum(&f);
        put16(&mut f, HEADER_LEN, !partial);
        let hdr: [u8; HEADER_LEN] = f[..HEADER_LEN].try_into().unwrap();
        assert_eq!(ones_add(partial, !partial), 0xffff);
        assert_eq!(udp_checksum(&f), 0xffff);
        assert_eq!(
            udp_checksum_with_payload_sum(&hdr, u32::from(!partial)),
            0xffff
        );
        set_udp_checksum(&mut f).unwrap();
        assert_eq!(be16(&f, UDP_CSUM), 0xffff);
        assert_eq!(verify_udp_checksum(&f), Ok(true));
    }

    #[test]
    fn checksum_with_payload_sum_plugs_in_a_partial_sum() {
        let mut h = header();
        h.flags = FLAG_UDP_CHECKSUM;
        for len in [0usize, 1, 2, 3, 56, 57, 1500] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 31 + 1) as u8).collect();
            let f = frame(&h, &payload);
            let hdr: [u8; HEADER_LEN] = f[..HEADER_LEN].try_into().unwrap();
            let s = ones_sum(&payload);
            assert_eq!(
                udp_checksum_with_payload_sum(&hdr, u32::from(s)),
                udp_checksum(&f)
            );
            // An unfolded 32-bit partial sum is accepted too.
            let unfolded: u32 = payload
                .chunks(2)
                .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
                .sum();
            assert_eq!(
                udp_checksum_with_payload_sum(&hdr, unfolded),
                udp_checksum(&f)
            );
        }
    }

    /// The fast path equals a full recompute for every payload length, on
    /// templates with different addresses (and so different checksums).
    #[test]
    fn patch_lengths_equals_a_full_recompute_for_every_length() {
        let templates = [
            header(),
            FrameHeader::new(a("255.255.255.255:65535"), a("255.255.255.254:1"), 1, 2),
            FrameHeader::new(a("0.0.0.0:0"), a("0.0.0.1:0"), 0, 0),
            FrameHeader::new(a("192.168.77.3:40000"), a("172.16.0.9:53"), 65535, 0),
        ];
        for h in templates {
            let t = h.template();
            assert_eq!(t, recomputed(&t));
            let mut chained = t;
            for len in 0..=MAX_PAYLOAD {
                let mut p = t;
                patch_lengths(&mut p, len);
                let mut from = t;
                patch_lengths_from(&mut from, length_sum(&t), len);
                assert_eq!(from, p, "from the template's sum, length {len}");
                let mut want = t;
                put16(&mut want, IP_TOTAL_LEN, (len + 40) as u16);
                put16(&mut want, UDP_LEN, (len + 20) as u16);
                let want = recomputed(&want);
                assert_eq!(p, want, "length {len}");
                // Patching an already patched header works too.
                patch_lengths(&mut chained, len);
                assert_eq!(chained, want, "chained, length {len}");
                // And `write` agrees.
                let mut w = [0u8; HEADER_LEN];
                h.write(len, &mut w).unwrap();
                assert_eq!(w, want);
            }
        }
    }

    #[test]
    fn patch_sets_identification_and_equals_a_full_recompute() {
        let t = header().template();
        let mut chained = t;
        let mut seed = 99u32;
        for i in 0..200_000u32 {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let len = (seed >> 8) as usize % (MAX_PAYLOAD + 1);
            let id = if i < 65536 {
                i as u16
            } else {
                (seed >> 3) as u16
            };
            let mut want = t;
            put16(&mut want, IP_TOTAL_LEN, (len + 40) as u16);
            put16(&mut want, UDP_LEN, (len + 20) as u16);
            put16(&mut want, IP_ID, id);
            let want = recomputed(&want);
            let mut p = t;
            patch(&mut p, len, id);
            assert_eq!(p, want, "length {len} id {id}");
            patch(&mut chained, len, id);
            assert_eq!(chained, want, "chained: length {len} id {id}");
        }
        let mut f = frame(&header(), &[]);
        f.resize(HEADER_LEN + 10, 0);
        let hdr: &mut [u8; HEADER_LEN] = (&mut f[..HEADER_LEN]).try_into().unwrap();
        patch(hdr, 10, 0xbeef);
        assert!(FrameHeader::parse(&f).is_ok());
    }

    /// pcap compatibility: dpf classifies a written frame with a filter in
    /// pcap syntax on the addresses, the ports and the endpoint ids
    /// (`udp[8:2]` is the destination endpoint's slot, `udp[10:2]` the
    /// source's, `udp[14:2]` and `udp[16:2]` their generations).
    #[test]
    fn dpf_classifies_frames_by_pcap_filters() {
        const FILTER: &str = "udp and src host 10.0.0.2 and udp src port 7001 and dst host 10.0.0.1 \
             and udp dst port 7000 and udp[8:2] = 5 and udp[10:2] = 9 and udp[14:2] = 3 \
             and udp[16:2] = 4";
        let mut table = dpf::Table::new();
        table
            .install(FILTER, 42, 0)
            .expect("dpf accepts the filter");
        let mut reader = table.reader();
        let f = frame(&header(), b"hello");
        assert_eq!(reader.classify(&f), Some(42));
        // The reference evaluator agrees with the native classifier.
        assert_eq!(table.classifier().classify_reference(&f), Some(42));
        // Each field the filter names matters.
        let (d, s) = (endpoint_id(5, 3), endpoint_id(9, 4));
        let variants = [
            FrameHeader::new(a("10.0.0.3:7001"), a("10.0.0.1:7000"), d, s),
            FrameHeader::new(a("10.0.0.2:7002"), a("10.0.0.1:7000"), d, s),
            FrameHeader::new(a("10.0.0.2:7001"), a("10.0.0.9:7000"), d, s),
            FrameHeader::new(a("10.0.0.2:7001"), a("10.0.0.1:7009"), d, s),
            FrameHeader::new(a("10.0.0.2:7001"), a("10.0.0.1:7000"), endpoint_id(6, 3), s),
            FrameHeader::new(a("10.0.0.2:7001"), a("10.0.0.1:7000"), d, endpoint_id(8, 4)),
            FrameHeader::new(a("10.0.0.2:7001"), a("10.0.0.1:7000"), endpoint_id(5, 2), s),
            FrameHeader::new(a("10.0.0.2:7001"), a("10.0.0.1:7000"), d, endpoint_id(9, 5)),
        ];
        for h in variants {
            let f = frame(&h, b"hello");
            assert_eq!(
                reader.classify(&f),
                None,
                "{} -> {}, endpoints {:#x} -> {:#x}",
                h.src,
                h.dst,
                h.src_ep,
                h.dst_ep
            );
        }
    }
}
