//! The daemon's wire protocol: the frames, the operations and their
//! fields ([`Op`], `Request`), the version, the limits, the typed
//! refusals ([`Refusal`]) and the layouts of the `Counts` and
//! `EngineCounts` replies ([`COUNTERS`], [`ENGINE_COUNTERS`]). Both sides use it: the server in
//! [`crate::daemon`], the client in [`crate::client`]. The protocol's
//! description, operation by operation, is the daemon's module doc.

use std::net::Ipv4Addr;

use thiserror::Error;

use crate::engine::{EngineCounts, PortCounts};
use crate::frame::{Addr, EndpointId};
use crate::layout::Config;

/// The protocol version [`Op::Info`] reports: 5 since the compile-budget
/// refusal (kind 3), which a client of version 4 could not decode.
pub const PROTOCOL_VERSION: u16 = 5;

/// The largest applet a request carries: jive's default limit on a class
/// file (`jive::Limits::default().max_class_bytes`).
pub const MAX_APPLET: usize = 1 << 20;

/// The longest filter text a request carries.
pub const MAX_FILTER: usize = 64 * 1024;

/// The most endpoints one `EngineCounts` request names.
pub const MAX_COUNTS_ENDPOINTS: usize = 256;

/// The largest frame (the bytes after the length) either side accepts:
/// an applet and its request's fixed fields.
pub const MAX_FRAME: usize = MAX_APPLET + 64;

/// A reply's status byte: success.
pub const STATUS_OK: u8 = 0;
/// A reply's status byte: the request was refused; a UTF-8 message follows.
pub const STATUS_ERR: u8 = 1;
/// A reply's status byte: the request was understood and refused for a
/// reason the client can act on; a [`Refusal`] follows
/// ([`Refusal::encode`]).
pub const STATUS_REFUSED: u8 = 2;

/// Why the daemon refused a well-formed request, typed so that a client
/// can tell it from other errors (a reply with [`STATUS_REFUSED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Refusal {
    /// The request named an endpoint this connection does not own:
    /// another connection's, or one that does not exist (the two are not
    /// told apart, so that no client learns which ids are live).
    #[error("endpoint {id} is not yours")]
    NotYours {
        /// The endpoint named.
        id: EndpointId,
    },
    /// The process has spent its budget of engine-counter reads
    /// (`EngineCounts`); the budget refills at `per_second` reads a second.
    #[error(
        "engine counters: this process's budget of {per_second} reads a second is spent; try again in {retry_ms} ms"
    )]
    CountsBudget {
        /// The budget: reads a second, and at most that many at once.
        per_second: u32,
        /// When the next read will be allowed, in milliseconds from the reply.
        retry_ms: u32,
    },
    /// The process has spent its budget of time compiling filters and
    /// applets (`InstallFilter`; `SetApplet` and `CreateEndpoint` with an
    /// applet); the budget refills at
    /// `ms_per_second` milliseconds a second.
    #[error(
        "filters and applets: this process's budget of {ms_per_second} ms of compiling a second is spent; try again in {retry_ms} ms"
    )]
    CompileBudget {
        /// The budget: milliseconds of the daemon's CPU a second, and at
        /// most that many ahead.
        ms_per_second: u32,
        /// When the next install will be taken, in milliseconds from the
        /// reply.
        retry_ms: u32,
    },
}

impl Refusal {
    /// Its bytes after the status: a kind (`1` not yours, `2` counts
    /// budget, `3` compile budget) and the kind's `u32` fields (the
    /// endpoint id; the budget and the wait).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(9);
        match *self {
            Refusal::NotYours { id } => {
                v.push(1);
                v.extend_from_slice(&id.to_le_bytes());
            }
            Refusal::CountsBudget {
                per_second,
                retry_ms,
            } => {
                v.push(2);
                v.extend_from_slice(&per_second.to_le_bytes());
                v.extend_from_slice(&retry_ms.to_le_bytes());
            }
            Refusal::CompileBudget {
                ms_per_second,
                retry_ms,
            } => {
                v.push(3);
                v.extend_from_slice(&ms_per_second.to_le_bytes());
                v.extend_from_slice(&retry_ms.to_le_bytes());
            }
        }
        v
    }

    /// The inverse of [`Refusal::encode`]; `None` for any other bytes.
    pub fn decode(b: &[u8]) -> Option<Refusal> {
        let u = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        match (b.first()?, b.len()) {
            (1, 5) => Some(Refusal::NotYours { id: u(1)? }),
            (2, 9) => Some(Refusal::CountsBudget {
                per_second: u(1)?,
                retry_ms: u(5)?,
            }),
            (3, 9) => Some(Refusal::CompileBudget {
                ms_per_second: u(1)?,
                retry_ms: u(5)?,
            }),
            _ => None,
        }
    }
}

/// The operations of the protocol, by their code (the request's first byte).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The protocol version and the engine's address.
    Info = 1,
    /// Create an endpoint; its `memfd` comes with the reply.
    CreateEndpoint = 2,
    /// Open a channel from an endpoint of the caller's.
    OpenChannel = 3,
    /// Install a filter for a channel of an endpoint of the caller's.
    InstallFilter = 4,
    /// Remove a filter installed by `InstallFilter`.
    RemoveFilter = 5,
    /// Replace an endpoint's applet.
    SetApplet = 6,
    /// An endpoint's counters.
    Counts = 7,
    /// Remove an endpoint.
    CloseEndpoint = 8,
    /// The channels of an endpoint closed because their peer went away.
    ClosedChannels = 9,
    /// The engine's own counters, and those of endpoints of the caller's.
    EngineCounts = 10,
}

impl Op {
    /// The operation with code `code`, if any.
    pub fn from_code(code: u8) -> Option<Op> {
        Some(match code {
            1 => Op::Info,
            2 => Op::CreateEndpoint,
            3 => Op::OpenChannel,
            4 => Op::InstallFilter,
            5 => Op::RemoveFilter,
            6 => Op::SetApplet,
            7 => Op::Counts,
            8 => Op::CloseEndpoint,
            9 => Op::ClosedChannels,
            10 => Op::EngineCounts,
            _ => return None,
        })
    }

    /// Its name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Op::Info => "Info",
            Op::CreateEndpoint => "CreateEndpoint",
            Op::OpenChannel => "OpenChannel",
            Op::InstallFilter => "InstallFilter",
            Op::RemoveFilter => "RemoveFilter",
            Op::SetApplet => "SetApplet",
            Op::Counts => "Counts",
            Op::CloseEndpoint => "CloseEndpoint",
            Op::ClosedChannels => "ClosedChannels",
            Op::EngineCounts => "EngineCounts",
        }
    }
}

/// What is wrong with a frame or a request. The daemon sends its text back
/// as the error reply.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtocolError {
    /// A frame of length 0 (no operation).
    #[error("empty request frame")]
    Empty,
    /// A frame longer than [`MAX_FRAME`].
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// The length the frame announced.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// An unknown operation code.
    #[error("unknown operation {0}")]
    UnknownOp(u8),
    /// The request ends before one of its fields does.
    #[error("{op}: {field} needs bytes up to {need} but the request has {len}")]
    Short {
        /// The operation.
        op: &'static str,
        /// The field.
        field: &'static str,
        /// The byte offset (after the op code) the field ends at.
        need: u64,
        /// The request's length (after the op code).
        len: usize,
    },
    /// Bytes after the request's last field.
    #[error("{op}: {extra} bytes after the last field")]
    Trailing {
        /// The operation.
        op: &'static str,
        /// How many.
        extra: usize,
    },
    /// A flag byte with a value other than those allowed.
    #[error("{op}: {field} is {value}, which is not a valid value")]
    BadFlag {
        /// The operation.
        op: &'static str,
        /// The field.
        field: &'static str,
        /// Its value.
        value: u8,
    },
    /// A byte string longer than its limit.
    #[error("{op}: {field} of {len} bytes exceeds the limit of {max} bytes")]
    FieldTooLarge {
        /// The operation.
        op: &'static str,
        /// The field.
        field: &'static str,
        /// Its length.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// A count of items larger than its limit (`EngineCounts`' endpoint
    /// ids).
    #[error("{op}: {count} {items} exceed the limit of {max}")]
    TooMany {
        /// The operation.
        op: &'static str,
        /// What is counted, in the plural: "endpoint ids".
        items: &'static str,
        /// How many the request announced.
        count: u64,
        /// The limit.
        max: usize,
    },
    /// Filter text that is not UTF-8.
    #[error("{op}: the filter text is not UTF-8")]
    NotUtf8 {
        /// The operation.
        op: &'static str,
    },
}

/// A decoded request. Byte strings borrow from the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request<'a> {
    Info,
    Create {
        config: Config,
        applet: Option<&'a [u8]>,
    },
    OpenChannel {
        id: EndpointId,
        remote: Addr,
        remote_ep: EndpointId,
        checksum: bool,
    },
    InstallFilter {
        id: EndpointId,
        chan: u16,
        priority: i32,
        text: &'a str,
    },
    RemoveFilter {
        id: EndpointId,
        filter: u64,
    },
    SetApplet {
        id: EndpointId,
        applet: Option<&'a [u8]>,
    },
    Counts {
        id: EndpointId,
    },
    Close {
        id: EndpointId,
    },
    ClosedChannels {
        id: EndpointId,
    },
    EngineCounts {
        ids: Vec<EndpointId>,
    },
}

/// Reads a request's fields in order, each checked against its end.
struct Fields<'a> {
    op: &'static str,
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Fields<'a> {
    fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], ProtocolError> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.buf.len() => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => Err(ProtocolError::Short {
                op: self.op,
                field,
                need: self.pos as u64 + n as u64,
                len: self.buf.len(),
            }),
        }
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], ProtocolError> {
        let s = self.take(field, N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, ProtocolError> {
        self.array(field).map(u16::from_le_bytes)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, ProtocolError> {
        self.array(field).map(u32::from_le_bytes)
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, ProtocolError> {
        self.array(field).map(i32::from_le_bytes)
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, ProtocolError> {
        self.array(field).map(u64::from_le_bytes)
    }

    fn flag(&mut self, field: &'static str) -> Result<bool, ProtocolError> {
        match self.array::<1>(field)?[0] {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(ProtocolError::BadFlag {
                op: self.op,
                field,
                value,
            }),
        }
    }

    fn bytes(&mut self, field: &'static str, max: usize) -> Result<&'a [u8], ProtocolError> {
        let len = self.u32(field)?;
        if len as usize > max {
            return Err(ProtocolError::FieldTooLarge {
                op: self.op,
                field,
                len: u64::from(len),
                max,
            });
        }
        self.take(field, len as usize)
    }

    fn opt_bytes(
        &mut self,
        field: &'static str,
        max: usize,
    ) -> Result<Option<&'a [u8]>, ProtocolError> {
        if self.flag(field)? {
            self.bytes(field, max).map(Some)
        } else {
            Ok(None)
        }
    }

    fn end(&self) -> Result<(), ProtocolError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            extra => Err(ProtocolError::Trailing { op: self.op, extra }),
        }
    }
}

impl<'a> Request<'a> {
    /// Decodes a request: the bytes of one frame after its length.
    pub(crate) fn decode(frame: &'a [u8]) -> Result<Request<'a>, ProtocolError> {
        let (&code, rest) = frame.split_first().ok_or(ProtocolError::Empty)?;
        let op = Op::from_code(code).ok_or(ProtocolError::UnknownOp(code))?;
        let mut f = Fields {
            op: op.name(),
            buf: rest,
            pos: 0,
        };
        let req = match op {
            Op::Info => Request::Info,
            Op::CreateEndpoint => Request::Create {
                config: Config {
                    buffers: f.u32("buffers")?,
                    buffer_size: f.u32("buffer_size")?,
                    tx_depth: f.u32("tx_depth")?,
                    rx_depth: f.u32("rx_depth")?,
                    free_depth: f.u32("free_depth")?,
                },
                applet: f.opt_bytes("applet", MAX_APPLET)?,
            },
            Op::OpenChannel => {
                let id = f.u32("endpoint id")?;
                let ip = Ipv4Addr::from(f.array::<4>("remote address")?);
                let port = f.u16("remote port")?;
                let remote_ep = f.u32("remote endpoint")?;
                let flags = f.array::<1>("flags")?[0];
                if flags & !1 != 0 {
                    return Err(ProtocolError::BadFlag {
                        op: op.name(),
                        field: "flags",
                        value: flags,
                    });
                }
                Request::OpenChannel {
                    id,
                    remote: Addr::new(ip, port),
                    remote_ep,
                    checksum: flags & 1 != 0,
                }
            }
            Op::InstallFilter => Request::InstallFilter {
                id: f.u32("endpoint id")?,
                chan: f.u16("channel")?,
                priority: f.i32("priority")?,
                text: std::str::from_utf8(f.bytes("filter", MAX_FILTER)?)
                    .map_err(|_| ProtocolError::NotUtf8 { op: op.name() })?,
            },
            Op::RemoveFilter => Request::RemoveFilter {
                id: f.u32("endpoint id")?,
                filter: f.u64("filter id")?,
            },
            Op::SetApplet => Request::SetApplet {
                id: f.u32("endpoint id")?,
                applet: f.opt_bytes("applet", MAX_APPLET)?,
            },
            Op::Counts => Request::Counts {
                id: f.u32("endpoint id")?,
            },
            Op::CloseEndpoint => Request::Close {
                id: f.u32("endpoint id")?,
            },
            Op::ClosedChannels => Request::ClosedChannels {
                id: f.u32("endpoint id")?,
            },
            Op::EngineCounts => {
                let n = f.u16("endpoint count")?;
                if usize::from(n) > MAX_COUNTS_ENDPOINTS {
                    return Err(ProtocolError::TooMany {
                        op: op.name(),
                        items: "endpoint ids",
                        count: u64::from(n),
                        max: MAX_COUNTS_ENDPOINTS,
                    });
                }
                let ids = (0..n)
                    .map(|_| f.u32("endpoint id"))
                    .collect::<Result<_, _>>()?;
                Request::EngineCounts { ids }
            }
        };
        f.end()?;
        Ok(req)
    }

    /// The whole frame of this request, length first.
    pub(crate) fn encode(&self) -> Vec<u8> {
        fn bytes(v: &mut Vec<u8>, b: &[u8]) {
            v.extend_from_slice(&(b.len() as u32).to_le_bytes());
            v.extend_from_slice(b);
        }
        fn opt_bytes(v: &mut Vec<u8>, b: Option<&[u8]>) {
            match b {
                Some(b) => {
                    v.push(1);
                    bytes(v, b);
                }
                None => v.push(0),
            }
        }
        let mut v = vec![0u8; 4];
        match self {
            Request::Info => v.push(Op::Info as u8),
            Request::Create { config: c, applet } => {
                v.push(Op::CreateEndpoint as u8);
                for x in [
                    c.buffers,
                    c.buffer_size,
                    c.tx_depth,
                    c.rx_depth,
                    c.free_depth,
                ] {
                    v.extend_from_slice(&x.to_le_bytes());
                }
                opt_bytes(&mut v, *applet);
            }
            Request::OpenChannel {
                id,
                remote,
                remote_ep,
                checksum,
            } => {
                v.push(Op::OpenChannel as u8);
                v.extend_from_slice(&id.to_le_bytes());
                v.extend_from_slice(&remote.ip.octets());
                v.extend_from_slice(&remote.port.to_le_bytes());
                v.extend_from_slice(&remote_ep.to_le_bytes());
                v.push(u8::from(*checksum));
            }
            Request::InstallFilter {
                id,
                chan,
                priority,
                text,
            } => {
                v.push(Op::InstallFilter as u8);
                v.extend_from_slice(&id.to_le_bytes());
                v.extend_from_slice(&chan.to_le_bytes());
                v.extend_from_slice(&priority.to_le_bytes());
                bytes(&mut v, text.as_bytes());
            }
            Request::RemoveFilter { id, filter } => {
                v.push(Op::RemoveFilter as u8);
                v.extend_from_slice(&id.to_le_bytes());
                v.extend_from_slice(&filter.to_le_bytes());
            }
            Request::SetApplet { id, applet } => {
                v.push(Op::SetApplet as u8);
                v.extend_from_slice(&id.to_le_bytes());
                opt_bytes(&mut v, *applet);
            }
            Request::Counts { id } => {
                v.push(Op::Counts as u8);
                v.extend_from_slice(&id.to_le_bytes());
            }
            Request::Close { id } => {
                v.push(Op::CloseEndpoint as u8);
                v.extend_from_slice(&id.to_le_bytes());
            }
            Request::ClosedChannels { id } => {
                v.push(Op::ClosedChannels as u8);
                v.extend_from_slice(&id.to_le_bytes());
            }
            Request::EngineCounts { ids } => {
                v.push(Op::EngineCounts as u8);
                v.extend_from_slice(&(ids.len() as u16).to_le_bytes());
                for id in ids {
                    v.extend_from_slice(&id.to_le_bytes());
                }
            }
        }
        let len = (v.len() - 4) as u32;
        v[..4].copy_from_slice(&len.to_le_bytes());
        v
    }
}

/// The fields of [`PortCounts`] in declaration order (the `Counts` reply).
pub(crate) fn counts_to_bytes(c: &PortCounts) -> Vec<u8> {
    [
        c.tx_descriptors,
        c.tx_frames,
        c.tx_rejected,
        c.tx_closed,
        c.rx_delivered,
        c.rx_no_buffer,
        c.rx_queue_full,
        c.rx_too_long,
        c.rx_bad_checksum,
        c.applet_traps,
        c.applet_drops,
        c.free_invalid,
        c.queue_corrupt,
        c.applet_overruns,
        c.applet_throttled,
    ]
    .iter()
    .flat_map(|v| v.to_le_bytes())
    .collect()
}

/// The number of counters in a `Counts` reply.
pub const COUNTERS: usize = 15;

/// The inverse of [`counts_to_bytes`]; `None` unless `b` holds exactly
/// [`COUNTERS`] values.
pub(crate) fn counts_from_bytes(b: &[u8]) -> Option<PortCounts> {
    if b.len() != 8 * COUNTERS {
        return None;
    }
    let v = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    Some(PortCounts {
        tx_descriptors: v(0),
        tx_frames: v(1),
        tx_rejected: v(2),
        tx_closed: v(3),
        rx_delivered: v(4),
        rx_no_buffer: v(5),
        rx_queue_full: v(6),
        rx_too_long: v(7),
        rx_bad_checksum: v(8),
        applet_traps: v(9),
        applet_drops: v(10),
        free_invalid: v(11),
        queue_corrupt: v(12),
        applet_overruns: v(13),
        applet_throttled: v(14),
    })
}

/// The number of counters of the engine's own in an `EngineCounts` reply.
pub const ENGINE_COUNTERS: usize = 10;

/// The fields of [`EngineCounts`] in declaration order (the start of the
/// `EngineCounts` reply).
pub(crate) fn engine_counts_to_bytes(c: &EngineCounts) -> Vec<u8> {
    [
        c.frames_in,
        c.unmatched,
        c.malformed,
        c.frames_out,
        c.send_errors,
        c.transport_no_route,
        c.transport_queue_full,
        c.transport_overruns,
        c.transport_not_unet,
        c.closed,
    ]
    .iter()
    .flat_map(|v| v.to_le_bytes())
    .collect()
}

/// The inverse of [`engine_counts_to_bytes`]; `None` unless `b` holds
/// exactly [`ENGINE_COUNTERS`] values.
pub(crate) fn engine_counts_from_bytes(b: &[u8]) -> Option<EngineCounts> {
    if b.len() != 8 * ENGINE_COUNTERS {
        return None;
    }
    let v = |i: usize| u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes"));
    Some(EngineCounts {
        frames_in: v(0),
        unmatched: v(1),
        malformed: v(2),
        frames_out: v(3),
        send_errors: v(4),
        transport_no_route: v(5),
        transport_queue_full: v(6),
        transport_overruns: v(7),
        transport_not_unet: v(8),
        closed: v(9),
    })
}

/// A reply frame: length, status, payload.
pub(crate) fn reply_frame(status: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(5 + payload.len());
    v.extend_from_slice(&(1 + payload.len() as u32).to_le_bytes());
    v.push(status);
    v.extend_from_slice(payload);
    v
}
