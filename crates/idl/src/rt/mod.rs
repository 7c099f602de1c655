//! The run-time side of generated stubs: the wire format they share with
//! every transport, the transports' traits, and the checked view of a
//! request that server stubs read (IDL4 §3: steps C2, S0 and S4 are the
//! transport's, C1/S1 and S3/C3 the stubs').
//!
//! The wire format (docs/idl.md, "The transport"):
//! - an operation's message is its record ([`crate::model::Layout`]),
//!   preceded on the wire by an 8-byte header: the state word, the key
//!   (request) or [`Status`] (reply), and the record's length;
//! - the first [`INLINE`] bytes of the record share the header's cache line,
//!   so a record of at most 56 bytes is one line (the register message of
//!   L4, unet's inline receive descriptor);
//! - strings and sequences travel indirectly: the record holds a [`Desc`]
//!   (offset in the channel's string area, element count), the bytes stay
//!   in the string area, and the server reads them in place after one check.

pub mod shm;
pub mod unet;

/// Bytes of a record that travel inline, in the descriptor's cache line.
pub const INLINE: usize = 56;

/// A string or sequence in a record: where its elements start in the
/// string area (bytes, aligned to the element's alignment) and how many
/// there are. `#[repr(C)]`, 8 bytes, 4-aligned: C's `idl_desc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Desc {
    /// Byte offset in the string area.
    pub off: u32,
    /// Number of elements (bytes for a `string`).
    pub len: u32,
}

/// The status word of a reply: `Ok`, or why the server refused the
/// request. Values are the wire's (and C's `IDL_*` constants).
#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// The call was made; the record holds the results.
    Ok = 0,
    /// No operation has this key.
    BadKey = 1,
    /// The request is shorter than the operation's request record, or
    /// longer than the message buffer.
    ShortMessage = 2,
    /// A descriptor lies outside the string area, is misaligned, overlaps
    /// the one before it, or exceeds the per-string limit.
    BadString = 3,
    /// A value no Rust or C type can hold: a `boolean` other than 0 or 1,
    /// a `string` that is not UTF-8.
    BadValue = 4,
    /// The server's out strings do not fit the string area.
    Overflow = 5,
    /// The server's implementation panicked; the server survives.
    ServerFailed = 6,
}

impl Status {
    /// The status of a wire word, if it names one.
    pub fn from_wire(w: u16) -> Option<Status> {
        Some(match w {
            0 => Status::Ok,
            1 => Status::BadKey,
            2 => Status::ShortMessage,
            3 => Status::BadString,
            4 => Status::BadValue,
            5 => Status::Overflow,
            6 => Status::ServerFailed,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Ok => "ok",
            Status::BadKey => "no operation has this key",
            Status::ShortMessage => "the request's length does not match its operation",
            Status::BadString => "a string descriptor is out of range, misaligned or overlapping",
            Status::BadValue => "a value is invalid for its type (boolean not 0/1, string not UTF-8)",
            Status::Overflow => "the reply's strings do not fit the string area",
            Status::ServerFailed => "the server's implementation failed",
        })
    }
}
