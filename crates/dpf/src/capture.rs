//! Reading packet captures: pcap and pcapng files, as leniently as libpcap
//! reads them.
//!
//! [`CaptureReader`] reads a capture from any [`Read`] (a file, standard
//! input, a byte slice) one packet at a time and hands each out with its
//! interface, link type, original length and timestamp. It accepts every
//! file libpcap's `pcap_open_offline` accepts, by the same rules
//! (libpcap's `sf-pcap.c` and `sf-pcapng.c`):
//!
//! - **pcap**: the microsecond (`a1b2c3d4`), nanosecond (`a1b23c4d`) and
//!   Kuznetzov (`a1b2cd34`, 24-byte record headers) magics, in either byte
//!   order; versions 2.0 to 2.4 and 543.0 (captured and original lengths
//!   swapped before 2.3, maybe in 2.3, and in 543.0).
//! - **Short snaplens**: a packet's original length may exceed the
//!   snaplen (that is what a short snaplen means); only the captured length
//!   is bounded.
//! - **Captured lengths over the snaplen** are read and cut to the snaplen
//!   ([`Packet::cut`] says so); a captured length over the most libpcap
//!   accepts for the link type (256 KiB for Ethernet) is an error, as it is
//!   in libpcap. A snaplen of 0 or over that maximum means the maximum.
//! - **Link-type flag bits**: only the low 16 bits of a pcap header's
//!   link-type field name the link type; the bits above (an FCS length, for
//!   instance `0x30000001` for Ethernet) are kept in
//!   [`Format::Pcap::link_type_ext`] and otherwise ignored.
//! - **pcapng**: sections in either byte order, each with its interface
//!   descriptions (link type, snaplen, `if_tsresol`, `if_tsoffset`);
//!   enhanced, simple and (obsolete) packet blocks; every other block type
//!   is skipped. Where libpcap is stricter than it need be, this reader is
//!   not: interfaces of one file may have different link types and
//!   snaplens (the packets then carry their own; libpcap refuses such
//!   files), and an enhanced packet block's captured length over its
//!   interface's snaplen is cut to it, as in pcap files (libpcap refuses
//!   the packet).
//!
//! Every error says at which byte offset of the input it was found and what
//! was expected there ([`CaptureError`]); a capture that ends in the middle
//! of a record gives [`CaptureError::Truncated`] after the packets before
//! it, so that a caller can report what it read and where it stopped.
//!
//! ```
//! use dpf::capture::CaptureReader;
//! // A little-endian microsecond pcap file: snaplen 64, Ethernet, one
//! // 106-byte frame captured to its first 64 bytes.
//! let mut file = Vec::new();
//! for word in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 64, 1] {
//!     file.extend_from_slice(&word.to_le_bytes());
//! }
//! for word in [1u32, 0, 64, 106] {
//!     file.extend_from_slice(&word.to_le_bytes());
//! }
//! file.extend_from_slice(&[0u8; 64]);
//! let mut capture = CaptureReader::new(&file[..])?;
//! let packet = capture.next_packet()?.expect("one packet");
//! assert_eq!((packet.data.len(), packet.orig_len, packet.link_type), (64, 106, 1));
//! assert!(capture.next_packet()?.is_none());
//! # Ok::<(), dpf::capture::CaptureError>(())
//! ```
//!
//! Why not the `pcap-file` crate, which the workspace used before: its
//! readers refuse a packet whose original length exceeds the snaplen (every
//! capture taken with a short snaplen) and one whose captured length
//! exceeds it, keep no record of the link type's flag bits, and report
//! errors without the byte offset; its lower-level parsers would still
//! leave the Kuznetzov format, the length swaps of old versions and the
//! pcapng leniency above to the caller. The formats are small (the pcap
//! file header and record header, and four pcapng block layouts), so this
//! module reads them itself, with no `unsafe` and no allocation per packet
//! beyond the largest block seen.

use std::fmt;
use std::io::{self, Read};

use thiserror::Error;

/// libpcap's `MAXIMUM_SNAPLEN`: the largest captured length it accepts for
/// most link types, and the snaplen it assumes when a file says 0.
pub const MAXIMUM_SNAPLEN: u32 = 262_144;

/// The link type of Ethernet (`LINKTYPE_ETHERNET`, `DLT_EN10MB`).
pub const LINKTYPE_ETHERNET: u16 = 1;

/// The largest pcapng block this reader accepts (libpcap's initial maximum,
/// 16 MiB; its blocks for the largest Ethernet snaplen are far smaller).
pub const MAX_BLOCK: u32 = 16 * 1024 * 1024;

const PCAP_MICRO: u32 = 0xa1b2_c3d4;
const PCAP_NANO: u32 = 0xa1b2_3c4d;
const PCAP_KUZNETZOV: u32 = 0xa1b2_cd34;
const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
const PCAPNG_BYTE_ORDER: u32 = 0x1a2b_3c4d;
const BT_IDB: u32 = 1;
const BT_PB: u32 = 2;
const BT_SPB: u32 = 3;
const BT_EPB: u32 = 6;

/// The largest captured length libpcap accepts for a link type
/// (`max_snaplen_for_dlt`): a few link types carry larger packets.
pub fn max_snaplen(link_type: u16) -> u32 {
    match link_type {
        231 => 128 * 1024 * 1024, // D-Bus messages
        279 => 8 * 1024 * 1024,   // EBHSCR
        249 => 1024 * 1024,       // USBPcap
        _ => MAXIMUM_SNAPLEN,
    }
}

/// The snaplen libpcap uses for a file that declares `snaplen`
/// (`pcap_adjust_snapshot`): 0, or more than the link type allows, means
/// the link type's maximum.
pub fn adjust_snaplen(link_type: u16, snaplen: u32) -> u32 {
    let max = max_snaplen(link_type);
    if snaplen == 0 || snaplen > max {
        max
    } else {
        snaplen
    }
}

/// The usual name of a link type (`LINKTYPE_*` without its prefix), for
/// messages; `None` for the less common ones.
pub fn link_type_name(link_type: u16) -> Option<&'static str> {
    Some(match link_type {
        0 => "NULL, BSD loopback",
        1 => "ETHERNET",
        6 => "IEEE802_5, token ring",
        8 => "SLIP",
        9 => "PPP",
        10 => "FDDI",
        101 => "RAW, IP without a link-layer header",
        104 => "C_HDLC",
        105 => "IEEE802_11, Wi-Fi",
        108 => "LOOP, OpenBSD loopback",
        113 => "LINUX_SLL, Linux cooked capture",
        117 => "PFLOG",
        127 => "IEEE802_11_RADIOTAP",
        143 => "DOCSIS",
        192 => "PPI",
        195 => "IEEE802_15_4",
        220 => "USB_LINUX_MMAPPED",
        228 => "IPV4",
        229 => "IPV6",
        239 => "NFLOG",
        249 => "USBPCAP",
        276 => "LINUX_SLL2, Linux cooked capture v2",
        _ => return None,
    })
}

/// A link type as messages show it: `113 (LINUX_SLL, Linux cooked
/// capture)`, or the number alone.
pub struct LinkType(pub u16);

impl fmt::Display for LinkType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match link_type_name(self.0) {
            Some(name) => write!(f, "{} ({name})", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

/// Why a capture could not be read (further). Every variant but
/// [`CaptureError::Empty`] says at which byte of the input.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The input holds no byte at all.
    #[error("the input is empty: expected a pcap or pcapng file header")]
    Empty,
    /// The first four bytes are no magic number of a capture format.
    #[error(
        "byte 0: not a pcap or pcapng capture: it starts with {}, expected a pcap magic number (a1b2c3d4, a1b23c4d or a1b2cd34, in either byte order) or a pcapng section header (0a0d0d0a){hint}",
        hex4(found)
    )]
    NotACapture {
        /// The first four bytes.
        found: [u8; 4],
        /// A guess at what the file is instead (may be empty).
        hint: &'static str,
    },
    /// The input ends inside a header, a record or a block.
    #[error(
        "byte {offset}: the capture is truncated inside {what}, which starts there: expected {expected} bytes, found {found}"
    )]
    Truncated {
        /// Where the incomplete piece starts.
        offset: u64,
        /// The piece: "the file header", "the record header of packet 7"...
        what: String,
        /// Its length.
        expected: u64,
        /// The bytes that were there.
        found: u64,
    },
    /// A field with a value the format does not allow.
    #[error("byte {offset}: {what}")]
    Malformed {
        /// Where the field, or its record or block, starts.
        offset: u64,
        /// What is wrong and what was expected.
        what: String,
    },
    /// Reading the input failed.
    #[error("byte {offset}: reading failed: {source}")]
    Io {
        /// How far reading got.
        offset: u64,
        /// The failure.
        #[source]
        source: io::Error,
    },
}

impl CaptureError {
    /// The byte offset the error is about (0 for an empty input).
    pub fn offset(&self) -> u64 {
        match self {
            CaptureError::Empty | CaptureError::NotACapture { .. } => 0,
            CaptureError::Truncated { offset, .. }
            | CaptureError::Malformed { offset, .. }
            | CaptureError::Io { offset, .. } => *offset,
        }
    }
}

fn hex4(b: &[u8; 4]) -> String {
    format!("{:02x}{:02x}{:02x}{:02x}", b[0], b[1], b[2], b[3])
}

/// What kind of capture the input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A pcap file.
    Pcap {
        /// Timestamps in nanoseconds rather than microseconds.
        nanoseconds: bool,
        /// Written big-endian.
        big_endian: bool,
        /// The file header's version.
        version: (u16, u16),
        /// The snaplen as libpcap uses it (see [`adjust_snaplen`]).
        snaplen: u32,
        /// The link type (the link-type field's low 16 bits).
        link_type: u16,
        /// The link-type field's upper 16 bits (flags such as an FCS
        /// length), which do not change the link type.
        link_type_ext: u16,
    },
    /// A pcapng file.
    PcapNg,
}

/// One interface of a pcapng section (a pcap file has one, interface 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Its link type.
    pub link_type: u16,
    /// Its snaplen as libpcap uses it (see [`adjust_snaplen`]).
    pub snaplen: u32,
    /// Timestamp units per second (`if_tsresol`; 10^6 by default).
    pub units_per_second: u64,
    /// Seconds added to every timestamp (`if_tsoffset`).
    pub offset_seconds: i64,
}

/// A packet, borrowed from the reader until the next call.
#[derive(Debug)]
pub struct Packet<'a> {
    /// Where its record or block starts in the input.
    pub offset: u64,
    /// Its interface (0 in a pcap file, the interface's index in its
    /// pcapng section).
    pub interface: u32,
    /// The link type of its interface.
    pub link_type: u16,
    /// Its length on the wire (may exceed `data.len()`).
    pub orig_len: u32,
    /// Its timestamp in nanoseconds since the epoch (0 for a simple packet
    /// block, which has none).
    pub timestamp_ns: i128,
    /// Whether the record held more bytes than the snaplen and `data` was
    /// cut to it.
    pub cut: bool,
    /// The captured bytes.
    pub data: &'a [u8],
}

/// `u32`/`u16` fields in a file's byte order.
#[derive(Clone, Copy, Debug)]
struct Order {
    big: bool,
}

impl Order {
    fn u16(self, b: &[u8]) -> u16 {
        let b = [b[0], b[1]];
        if self.big {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }
    fn u64(self, b: &[u8]) -> u64 {
        let b = [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
        if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        }
    }
    fn u32(self, b: &[u8]) -> u32 {
        let b = [b[0], b[1], b[2], b[3]];
        if self.big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }
}

/// The input, with the count of bytes consumed.
struct Input<R> {
    inner: R,
    offset: u64,
}

impl<R: Read> Input<R> {
    /// Fills `buf` as far as the input goes; returns how many bytes it got
    /// (fewer than `buf.len()` only at the end of the input).
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, CaptureError> {
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => {
                    got += n;
                    self.offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(CaptureError::Io {
                        offset: self.offset,
                        source,
                    });
                }
            }
        }
        Ok(got)
    }

    /// Fills `buf` completely, or fails with `Truncated` naming `what`,
    /// which starts at `start`.
    fn exact(
        &mut self,
        buf: &mut [u8],
        start: u64,
        what: impl FnOnce() -> String,
    ) -> Result<(), CaptureError> {
        let before = self.offset - start;
        let got = self.fill(buf)?;
        if got < buf.len() {
            return Err(CaptureError::Truncated {
                offset: start,
                what: what(),
                expected: before + buf.len() as u64,
                found: before + got as u64,
            });
        }
        Ok(())
    }

    /// Reads and drops `n` bytes, or fails as [`Input::exact`].
    fn skip(
        &mut self,
        mut n: u64,
        start: u64,
        expected: u64,
        what: impl FnOnce() -> String,
    ) -> Result<(), CaptureError> {
        let mut sink = [0u8; 4096];
        while n > 0 {
            let want = n.min(sink.len() as u64) as usize;
            let got = self.fill(&mut sink[..want])?;
            if got < want {
                return Err(CaptureError::Truncated {
                    offset: start,
                    what: what(),
                    expected,
                    found: self.offset - start,
                });
            }
            n -= got as u64;
        }
        Ok(())
    }
}

/// How the two lengths of a pcap record are ordered (by file version).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lengths {
    /// Captured length first (2.4 and later 2.x).
    Normal,
    /// Original length first (before 2.3, and 543.0).
    Swapped,
    /// Either (2.3): swapped if the first exceeds the second.
    Maybe,
}

#[derive(Debug)]
enum State {
    Pcap {
        order: Order,
        nanos: bool,
        record: usize,
        lengths: Lengths,
        iface: Interface,
    },
    PcapNg {
        order: Order,
        /// The current section's interfaces.
        ifaces: Vec<Interface>,
    },
}

/// A pcap or pcapng capture, read one packet at a time.
pub struct CaptureReader<R> {
    input: Input<R>,
    state: State,
    format: Format,
    /// The current packet's bytes (pcap) or block body (pcapng).
    buf: Vec<u8>,
    /// Packets handed out so far.
    packets: u64,
}

impl<R> fmt::Debug for CaptureReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureReader")
            .field("format", &self.format)
            .field("offset", &self.input.offset)
            .field("packets", &self.packets)
            .finish_non_exhaustive()
    }
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file header (pcap) or the first section header and the
    /// blocks up to the first packet (pcapng).
    pub fn new(inner: R) -> Result<Self, CaptureError> {
        let mut input = Input { inner, offset: 0 };
        let mut magic = [0u8; 4];
        match input.fill(&mut magic)? {
            0 => return Err(CaptureError::Empty),
            4 => {}
            n => {
                return Err(CaptureError::Truncated {
                    offset: 0,
                    what: "the file header".into(),
                    expected: 24,
                    found: n as u64,
                });
            }
        }
        let be = u32::from_be_bytes(magic);
        if be == PCAPNG_SHB {
            let mut reader = CaptureReader {
                input,
                state: State::PcapNg {
                    order: Order { big: false },
                    ifaces: Vec::new(),
                },
                format: Format::PcapNg,
                buf: Vec::new(),
                packets: 0,
            };
            reader.section_header(0)?;
            return Ok(reader);
        }
        let known = |m: u32| [PCAP_MICRO, PCAP_NANO, PCAP_KUZNETZOV].contains(&m);
        let (big, m) = if known(be) {
            (true, be)
        } else if known(be.swap_bytes()) {
            (false, be.swap_bytes())
        } else {
            return Err(CaptureError::NotACapture {
                found: magic,
                hint: not_a_capture_hint(&magic),
            });
        };
        let order = Order { big };
        let mut rest = [0u8; 20];
        input.exact(&mut rest, 0, || "the file header".into())?;
        let version = (order.u16(&rest[0..]), order.u16(&rest[2..]));
        if version.0 < 2 {
            return Err(CaptureError::Malformed {
                offset: 4,
                what: format!(
                    "pcap version {}.{} is archaic: expected 2.0 to 2.4 (or 543.0)",
                    version.0, version.1
                ),
            });
        }
        let lengths = match version {
            (2, 0..=2) | (543, 0) => Lengths::Swapped,
            (2, 3) => Lengths::Maybe,
            (2, 4) => Lengths::Normal,
            (major, minor) => {
                return Err(CaptureError::Malformed {
                    offset: 4,
                    what: format!(
                        "unsupported pcap version {major}.{minor}: expected 2.0 to 2.4 (or 543.0)"
                    ),
                });
            }
        };
        let declared = order.u32(&rest[12..]);
        let field = order.u32(&rest[16..]);
        let link_type = (field & 0xffff) as u16;
        let mut snaplen = adjust_snaplen(link_type, declared);
        let record = if m == PCAP_KUZNETZOV {
            // That patched libpcap captured Ethernet in cooked mode, with a
            // faked 14-byte header added after the snaplen was applied.
            if link_type == LINKTYPE_ETHERNET {
                snaplen += 14;
            }
            24
        } else {
            16
        };
        let iface = Interface {
            link_type,
            snaplen,
            units_per_second: if m == PCAP_NANO {
                1_000_000_000
            } else {
                1_000_000
            },
            offset_seconds: 0,
        };
        Ok(CaptureReader {
            input,
            state: State::Pcap {
                order,
                nanos: m == PCAP_NANO,
                record,
                lengths,
                iface,
            },
            format: Format::Pcap {
                nanoseconds: m == PCAP_NANO,
                big_endian: big,
                version,
                snaplen,
                link_type,
                link_type_ext: (field >> 16) as u16,
            },
            buf: Vec::new(),
            packets: 0,
        })
    }

    /// The capture's format (and for pcap, its header).
    pub fn format(&self) -> Format {
        self.format
    }

    /// The bytes read so far: after an error, where reading stopped.
    pub fn offset(&self) -> u64 {
        self.input.offset
    }

    /// The packets handed out so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// The interfaces of the current section (pcapng), or the one
    /// interface of a pcap file.
    pub fn interfaces(&self) -> Vec<Interface> {
        match &self.state {
            State::Pcap { iface, .. } => vec![*iface],
            State::PcapNg { ifaces, .. } => ifaces.clone(),
        }
    }

    /// The next packet, `None` at the end of the capture.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        match self.state {
            State::Pcap { .. } => self.next_pcap(),
            State::PcapNg { .. } => self.next_pcapng(),
        }
    }

    fn next_pcap(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        let State::Pcap {
            order,
            nanos,
            record,
            lengths,
            iface,
        } = self.state
        else {
            unreachable!("next_pcap is called for pcap files")
        };
        let n = self.packets + 1;
        let start = self.input.offset;
        let mut hdr = [0u8; 24];
        let hdr = &mut hdr[..record];
        match self.input.fill(hdr)? {
            0 => return Ok(None),
            got if got < record => {
                return Err(CaptureError::Truncated {
                    offset: start,
                    what: format!("the record header of packet {n}"),
                    expected: record as u64,
                    found: got as u64,
                });
            }
            _ => {}
        }
        let (sec, frac) = (order.u32(&hdr[0..]), order.u32(&hdr[4..]));
        let (mut caplen, mut len) = (order.u32(&hdr[8..]), order.u32(&hdr[12..]));
        if lengths == Lengths::Swapped || (lengths == Lengths::Maybe && caplen > len) {
            std::mem::swap(&mut caplen, &mut len);
        }
        let max = max_snaplen(iface.link_type);
        if caplen > max {
            return Err(CaptureError::Malformed {
                offset: start + 8,
                what: format!(
                    "packet {n}: captured length {caplen} is over {max}, the most libpcap accepts for link type {} (a damaged file?)",
                    LinkType(iface.link_type)
                ),
            });
        }
        let keep = caplen.min(iface.snaplen);
        self.buf.resize(keep as usize, 0);
        let what = || format!("the data of packet {n}");
        self.input.exact(&mut self.buf, start, what)?;
        if caplen > keep {
            self.input.skip(
                u64::from(caplen - keep),
                start,
                record as u64 + u64::from(caplen),
                what,
            )?;
        }
        self.packets = n;
        let per_unit = if nanos { 1 } else { 1000 };
        Ok(Some(Packet {
            offset: start,
            interface: 0,
            link_type: iface.link_type,
            orig_len: len,
            timestamp_ns: i128::from(sec) * 1_000_000_000 + i128::from(frac) * per_unit,
            cut: caplen > keep,
            data: &self.buf,
        }))
    }

    /// Reads the rest of a section header block whose type field started
    /// at `start`, and starts a new section.
    fn section_header(&mut self, start: u64) -> Result<(), CaptureError> {
        let mut head = [0u8; 8];
        self.input
            .exact(&mut head, start, || "a pcapng section header block".into())?;
        let order = match u32::from_be_bytes([head[4], head[5], head[6], head[7]]) {
            PCAPNG_BYTE_ORDER => Order { big: true },
            m if m.swap_bytes() == PCAPNG_BYTE_ORDER => Order { big: false },
            _ => {
                return Err(CaptureError::Malformed {
                    offset: start + 8,
                    what: format!(
                        "pcapng section header: byte-order magic {}, expected 1a2b3c4d in either byte order",
                        hex4(&[head[4], head[5], head[6], head[7]])
                    ),
                });
            }
        };
        let total = order.u32(&head[0..]);
        if !(28..=MAX_BLOCK).contains(&total) || total % 4 != 0 {
            return Err(CaptureError::Malformed {
                offset: start + 4,
                what: format!(
                    "pcapng section header: block length {total}, expected a multiple of 4 from 28 to {MAX_BLOCK}"
                ),
            });
        }
        // The rest of the block: version, section length, options, trailer.
        self.buf.resize(total as usize - 12, 0);
        let before = self.input.offset;
        let got = self.input.fill(&mut self.buf)?;
        if got < self.buf.len() {
            return Err(CaptureError::Truncated {
                offset: start,
                what: "a pcapng section header block".into(),
                expected: u64::from(total),
                found: before - start + got as u64,
            });
        }
        let major = order.u16(&self.buf[0..]);
        if major != 1 {
            return Err(CaptureError::Malformed {
                offset: start + 12,
                what: format!(
                    "pcapng version {major}.{}: expected 1.x",
                    order.u16(&self.buf[2..])
                ),
            });
        }
        let trailer = order.u32(&self.buf[self.buf.len() - 4..]);
        if trailer != total {
            return Err(trailer_mismatch(start, total, trailer));
        }
        self.state = State::PcapNg {
            order,
            ifaces: Vec::new(),
        };
        Ok(())
    }

    fn next_pcapng(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        loop {
            let State::PcapNg { order, .. } = self.state else {
                unreachable!("next_pcapng is called for pcapng files")
            };
            let n = self.packets + 1;
            let start = self.input.offset;
            let mut ty = [0u8; 4];
            match self.input.fill(&mut ty)? {
                0 => return Ok(None),
                4 => {}
                got => {
                    return Err(CaptureError::Truncated {
                        offset: start,
                        what: "a pcapng block header".into(),
                        expected: 8,
                        found: got as u64,
                    });
                }
            }
            let ty = order.u32(&ty);
            if ty == PCAPNG_SHB {
                self.section_header(start)?;
                continue;
            }
            let mut len = [0u8; 4];
            self.input
                .exact(&mut len, start, || "a pcapng block header".into())?;
            let total = order.u32(&len);
            if !(12..=MAX_BLOCK).contains(&total) || total % 4 != 0 {
                return Err(CaptureError::Malformed {
                    offset: start + 4,
                    what: format!(
                        "pcapng block of type {ty:#x}: length {total}, expected a multiple of 4 from 12 to {MAX_BLOCK}"
                    ),
                });
            }
            let body = total as usize - 12;
            if !matches!(ty, BT_IDB | BT_PB | BT_SPB | BT_EPB) {
                // A block this reader does not use (statistics, name
                // resolution, custom...): skipped, trailer included.
                self.input
                    .skip(body as u64 + 4, start, u64::from(total), || {
                        format!("a pcapng block of type {ty:#x}")
                    })?;
                continue;
            }
            self.buf.resize(body + 4, 0);
            let what = match ty {
                BT_IDB => "a pcapng interface description block".to_string(),
                _ => format!("the block of packet {n}"),
            };
            let before = self.input.offset;
            let got = self.input.fill(&mut self.buf)?;
            if got < self.buf.len() {
                return Err(CaptureError::Truncated {
                    offset: start,
                    what,
                    expected: u64::from(total),
                    found: before - start + got as u64,
                });
            }
            let trailer = order.u32(&self.buf[body..]);
            if trailer != total {
                return Err(trailer_mismatch(start, total, trailer));
            }
            if ty == BT_IDB {
                let iface = interface(order, &self.buf[..body], start)?;
                let State::PcapNg { ifaces, .. } = &mut self.state else {
                    unreachable!()
                };
                ifaces.push(iface);
                continue;
            }
            return self.packet_block(ty, order, body, start, n).map(Some);
        }
    }

    /// The packet of the enhanced, simple or obsolete packet block whose
    /// body (`body` bytes) is in `self.buf`.
    fn packet_block(
        &mut self,
        ty: u32,
        order: Order,
        body: usize,
        start: u64,
        n: u64,
    ) -> Result<Packet<'_>, CaptureError> {
        let State::PcapNg { ifaces, .. } = &self.state else {
            unreachable!()
        };
        let b = &self.buf[..body];
        let (name, fixed) = match ty {
            BT_EPB => ("enhanced packet block", 20),
            BT_PB => ("packet block", 20),
            _ => ("simple packet block", 4),
        };
        let malformed = |what: String| CaptureError::Malformed {
            offset: start,
            what: format!("packet {n} ({name}): {what}"),
        };
        if body < fixed {
            return Err(malformed(format!(
                "the block is {} bytes, expected at least {}",
                body + 12,
                fixed + 12
            )));
        }
        let (id, ts, caplen, orig_len) = match ty {
            BT_EPB => (
                order.u32(&b[0..]),
                Some(u64::from(order.u32(&b[4..])) << 32 | u64::from(order.u32(&b[8..]))),
                order.u32(&b[12..]),
                order.u32(&b[16..]),
            ),
            BT_PB => (
                u32::from(order.u16(&b[0..])),
                Some(u64::from(order.u32(&b[4..])) << 32 | u64::from(order.u32(&b[8..]))),
                order.u32(&b[12..]),
                order.u32(&b[16..]),
            ),
            _ => {
                let len = order.u32(&b[0..]);
                // A simple packet block has no captured length: it is the
                // original length cut to the first interface's snaplen.
                let snap = ifaces.first().map_or(len, |i| i.snaplen);
                (0, None, len.min(snap), len)
            }
        };
        let Some(&iface) = ifaces.get(id as usize) else {
            return Err(malformed(if ifaces.is_empty() {
                "a packet before any interface description block of its section".to_string()
            } else {
                format!(
                    "interface {id}, but the section describes {} interface(s)",
                    ifaces.len()
                )
            }));
        };
        if caplen as usize > body - fixed {
            return Err(malformed(format!(
                "captured length {caplen} does not fit in the block ({} bytes of data)",
                body - fixed
            )));
        }
        let keep = caplen.min(iface.snaplen) as usize;
        let timestamp_ns = ts.map_or(0, |t| {
            let per = u128::from(iface.units_per_second);
            let t = u128::from(t);
            let ns = (t / per) * 1_000_000_000 + (t % per) * 1_000_000_000 / per;
            ns as i128 + i128::from(iface.offset_seconds) * 1_000_000_000
        });
        self.packets = n;
        Ok(Packet {
            offset: start,
            interface: id,
            link_type: iface.link_type,
            orig_len,
            timestamp_ns,
            cut: keep < caplen as usize,
            data: &self.buf[fixed..fixed + keep],
        })
    }
}

fn trailer_mismatch(start: u64, total: u32, trailer: u32) -> CaptureError {
    CaptureError::Malformed {
        offset: start + u64::from(total) - 4,
        what: format!(
            "pcapng block trailer says length {trailer}, expected {total} as in the block's header at byte {start}"
        ),
    }
}

/// An interface description block's body (`b`, the block started at
/// `start`): link type, snaplen and the timestamp options.
fn interface(order: Order, b: &[u8], start: u64) -> Result<Interface, CaptureError> {
    let malformed = |at: usize, what: String| CaptureError::Malformed {
        offset: start + 8 + at as u64,
        what: format!("pcapng interface description block: {what}"),
    };
    if b.len() < 8 {
        return Err(malformed(
            0,
            format!("the block is {} bytes, expected at least 20", b.len() + 12),
        ));
    }
    let link_type = order.u16(&b[0..]);
    let mut iface = Interface {
        link_type,
        snaplen: adjust_snaplen(link_type, order.u32(&b[4..])),
        units_per_second: 1_000_000,
        offset_seconds: 0,
    };
    let mut at = 8;
    while at + 4 <= b.len() {
        let (code, len) = (order.u16(&b[at..]), order.u16(&b[at + 2..]) as usize);
        if code == 0 {
            break; // opt_endofopt
        }
        let value = at + 4;
        if value + len > b.len() {
            return Err(malformed(
                at,
                format!(
                    "option {code} of {len} bytes runs past the end of the block ({} bytes left)",
                    b.len() - value
                ),
            ));
        }
        let v = &b[value..value + len];
        match (code, len) {
            (9, 1) => {
                let exp = u32::from(v[0] & 0x7f);
                let base: u64 = if v[0] & 0x80 != 0 { 2 } else { 10 };
                iface.units_per_second = base.checked_pow(exp).ok_or_else(|| {
                    malformed(
                        at,
                        format!(
                            "if_tsresol {:#04x} is over 2^63 units a second, expected at most 10^18 or 2^63",
                            v[0]
                        ),
                    )
                })?;
            }
            (14, 8) => iface.offset_seconds = order.u64(v) as i64,
            (9 | 14, _) => {
                return Err(malformed(
                    at,
                    format!(
                        "option {} has length {len}, expected {}",
                        if code == 9 {
                            "if_tsresol"
                        } else {
                            "if_tsoffset"
                        },
                        if code == 9 { 1 } else { 8 }
                    ),
                ));
            }
            _ => {}
        }
        at = value + len.div_ceil(4) * 4;
    }
    Ok(iface)
}

/// A guess at what a file that is not a capture is, from its first bytes.
fn not_a_capture_hint(magic: &[u8; 4]) -> &'static str {
    match magic {
        [0x1f, 0x8b, ..] => " (it looks gzip-compressed: decompress it first)",
        [0x28, 0xb5, 0x2f, 0xfd] => " (it looks zstd-compressed: decompress it first)",
        [b'X', b'C', b'P', 0] => " (it looks like a NetMon capture: convert it with editcap)",
        [b'R', b'T', b'S', b'S'] => " (it looks like a NetMon capture: convert it with editcap)",
        b"snoo" => " (it looks like a snoop capture: convert it with editcap -F pcap)",
        [0x0a, 0x0d, 0x0d, 0x0a] => "",
        b if b
            .iter()
            .all(|c| c.is_ascii_graphic() || c.is_ascii_whitespace()) =>
        {
            " (it looks like text)"
        }
        _ => "",
    }
}
