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

use std::marker::PhantomData;
use std::ops::Range;
use std::ptr::NonNull;

pub mod shm;
pub mod unet;
pub mod wait;

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
            Status::BadValue => {
                "a value is invalid for its type (boolean not 0/1, string not UTF-8)"
            }
            Status::Overflow => "the reply's strings do not fit the string area",
            Status::ServerFailed => "the server's implementation failed",
        })
    }
}

/// Why a call failed, as the client sees it (and why a server's transport
/// stopped). A failed call may have written some of the caller's out and
/// inout values (the stubs store results as they check them).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server refused the request, or its implementation failed.
    #[error("the server refused the call: {0}")]
    Status(Status),
    /// A string or sequence is longer than the per-string limit.
    #[error("a string of {len} bytes exceeds the per-string limit of {max} bytes")]
    StringTooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit (`Limits::max_string_bytes`).
        max: u32,
    },
    /// A `size_is` sequence longer than its length parameter's type can
    /// count (a `short` length counts at most 32,767 elements).
    #[error("`{param}` holds {len} elements, more than its size_is length can count ({max})")]
    CountTooLarge {
        /// The sequence parameter.
        param: String,
        /// Its length in elements.
        len: usize,
        /// The most its length parameter's type counts.
        max: u32,
    },
    /// More strings in one message than the limit.
    #[error("more than {max} strings in one message")]
    TooManyStrings {
        /// The limit (`Limits::max_strings`).
        max: u32,
    },
    /// The string area has no room for a string.
    #[error("the string area is full: {len} bytes do not fit at offset {at} of {size}")]
    AreaFull {
        /// The string's length in bytes.
        len: usize,
        /// Where it would start.
        at: usize,
        /// The area's size.
        size: usize,
    },
    /// An operation's record does not fit the transport's message buffer.
    #[error("a record of {size} bytes does not fit the message buffer of {capacity} bytes")]
    RecordTooLarge {
        /// The record's size.
        size: usize,
        /// The buffer's capacity.
        capacity: usize,
    },
    /// The peer closed the channel (or went away).
    #[error("the channel is closed")]
    Closed,
    /// The peer's process exited (or was killed) without closing the
    /// channel: a shared-memory side notices it within
    /// [`shm::LIVENESS_CHECK`] of sleeping for the peer's next message.
    #[error("the peer's process exited without closing the channel")]
    PeerDied,
    /// No reply came within the transport's timeout.
    #[error("no reply within the timeout")]
    Timeout,
    /// The transport's operating-system call failed.
    #[error("transport: {0}")]
    Io(#[from] std::io::Error),
    /// The reply breaks the wire format: an unknown status, a length
    /// outside the buffer, a descriptor outside the string area or
    /// misaligned, a `boolean` other than 0 or 1, a `string` that is not
    /// UTF-8. The client trusts the server's bytes no more than the server
    /// trusts the client's.
    #[error("malformed reply: {0}")]
    Malformed(&'static str),
}

impl CallError {
    /// The server's status, if the server refused the call.
    pub fn status(&self) -> Option<Status> {
        match self {
            CallError::Status(s) => Some(*s),
            _ => None,
        }
    }
}

/// An element type of a sequence: plain data that the run time copies as
/// bytes into and out of the string area, and views in place.
///
/// # Safety
/// An implementor is `#[repr(C)]` (or a primitive integer, or an array of
/// `Plain`), has no padding bytes (generated structs spell their padding
/// out as fields), has an alignment of at most 8, and every bit pattern of
/// its size is a valid value (no `bool`, `char`, reference, pointer or
/// enum inside). The integer types and arrays of `Plain` implement it here;
/// generated structs implement it with a compile-time check of their size.
pub unsafe trait Plain: Copy + 'static {}

macro_rules! plain {
    ($($t:ty),*) => {$(
        // SAFETY: a primitive integer: no padding, alignment at most 8,
        // every bit pattern valid.
        unsafe impl Plain for $t {}
    )*};
}
plain!(i8, u8, i16, u16, i32, u32, i64, u64);

// SAFETY: an array of `Plain` has the elements' alignment, no padding
// between elements (their size is a multiple of their alignment), and
// every bit pattern valid.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}

// SAFETY: `#[repr(C)]` of two `u32`: no padding, alignment 4, any bits.
unsafe impl Plain for Desc {}

/// An operation's message record, as generated: the server and client stubs
/// view it in place in the transport's message buffer.
///
/// # Safety
/// An implementor is `#[repr(C)]`, of alignment at most 8 and size at most
/// `u16::MAX`, and every bit pattern of every field is a valid value
/// (integers, [`Desc`], `Plain` structs and arrays; a `boolean` is a `u8`
/// that the stubs check). Padding may exist: the run time never copies a
/// record as a value, only stores and loads its fields.
pub unsafe trait Message: Sized + 'static {
    /// The operation's key.
    const KEY: u16;
    /// Bytes of the request: the end of the last in or inout field.
    const REQUEST_SIZE: usize;
}

/// The client's side of a transport: the message buffer the client stub
/// writes its record into, the string area its strings go to, and the call.
///
/// A stub's sequence, for each call: [`ClientTransport::begin`] (if it has
/// strings), [`ClientTransport::put`] for each in string in record order,
/// store the record's fields into [`ClientTransport::buf`] ([`record`]),
/// [`ClientTransport::call`], then read the results in place and copy the
/// out strings after checking their descriptors
/// ([`ClientTransport::reply_bytes`]).
///
/// # Safety
/// An implementor guarantees that [`ClientTransport::buf`] points to
/// [`ClientTransport::capacity`] bytes, 8-aligned, valid for reads and
/// writes until the next call of a `&mut self` method other than `buf`,
/// and written by no one else in this process in that time (another
/// process may write them: every type stored there is valid for any bits);
/// that [`ClientTransport::call`] returns `Ok(n)` only with `n <=
/// capacity`; and that the slice [`ClientTransport::reply_bytes`] returns
/// lies in a string area whose start is 8-aligned and whose offsets the
/// server uses.
pub unsafe trait ClientTransport {
    /// The message buffer: [`ClientTransport::capacity`] bytes, 8-aligned.
    fn buf(&mut self) -> NonNull<u8>;
    /// Bytes of the message buffer (the largest record).
    fn capacity(&self) -> usize;
    /// Starts a request's strings: the string area is empty again.
    fn begin(&mut self);
    /// Copies `bytes` into the string area at the next offset aligned to
    /// `align` (at most 8) and returns that offset. Errors: the string is
    /// longer than the per-string limit, the message has too many strings,
    /// the area is full.
    fn put(&mut self, bytes: &[u8], align: usize) -> Result<u32, CallError>;
    /// Sends the request (`len` bytes of record, `key`) and waits for the
    /// reply; returns the reply's record length. A reply whose status is
    /// not `Ok` is [`CallError::Status`].
    fn call(&mut self, key: u16, len: usize) -> Result<usize, CallError>;
    /// The `len` bytes at `off` of the reply's string area, after checking
    /// that they lie in it ([`CallError::Malformed`] otherwise) and are
    /// within the per-string limit. The server may write them while the
    /// caller reads: copy them once, rely on nothing read twice.
    fn reply_bytes(&self, off: u32, len: usize) -> Result<&[u8], CallError>;
    /// The transport as a shared-memory channel's client end, if it is
    /// one: the dynamic stubs then run the whole call (post, wait, take)
    /// in their generated code ([`crate::dynamic`]). `None` by default.
    fn as_shm(&mut self) -> Option<&mut shm::ClientEnd> {
        None
    }
}

/// The server's side of a transport: waits for requests, holds the
/// received record and string area, sends replies.
///
/// # Safety
/// An implementor guarantees, from a [`ServerTransport::wait`] that
/// returned `(key, len)` until the next call of `reply` or `wait`: that
/// [`ServerTransport::buf`] points to [`ServerTransport::capacity`] bytes,
/// 8-aligned, holding the request's record, with `len <= capacity`; that
/// [`ServerTransport::area`] points to that many bytes of the string area,
/// 8-aligned, disjoint from the buffer; that [`ServerTransport::scratch`]
/// points to at least as many bytes of private memory, disjoint from both;
/// all valid for reads and writes and touched by no one else in this
/// process (another process may write the buffer and the area: every type
/// the stubs view there is valid for any bits).
pub unsafe trait ServerTransport {
    /// Waits for the next request; returns its key and record length.
    /// [`CallError::Closed`] when the client has gone.
    fn wait(&mut self) -> Result<(u16, usize), CallError>;
    /// The message buffer, holding the request's record.
    fn buf(&mut self) -> NonNull<u8>;
    /// Bytes of the message buffer.
    fn capacity(&self) -> usize;
    /// The string area and its length in bytes.
    fn area(&mut self) -> (NonNull<u8>, usize);
    /// Private memory of the string area's length, where in strings are
    /// copied before their UTF-8 check (so that the `&str` a server method
    /// gets cannot change under it).
    fn scratch(&mut self) -> NonNull<u8>;
    /// The per-string limit in bytes.
    fn max_string_bytes(&self) -> u32;
    /// Sends the reply: `status`, `len` bytes of record (0 unless `Ok`),
    /// and the bytes `strings` of the string area that the reply's inout
    /// and out strings occupy (a transport that shares the area ignores
    /// it; one that copies sends just those).
    fn reply(&mut self, status: Status, len: usize, strings: Range<u32>) -> Result<(), CallError>;

    /// The transport as a shared-memory channel's server end, if it is
    /// one: the dynamic server then runs its dispatch-and-reply loop in
    /// generated code ([`crate::dynamic`]). `None` by default.
    fn as_shm(&mut self) -> Option<&mut shm::ServerEnd> {
        None
    }

    /// The checked view of the request that [`ServerTransport::wait`]
    /// returned, for a server stub.
    fn request(&mut self, len: usize) -> Request<'_> {
        let buf = self.buf();
        let capacity = self.capacity();
        let (area, area_len) = self.area();
        let scratch = self.scratch();
        let max = self.max_string_bytes() as usize;
        // SAFETY: the trait's contract: the three regions are valid,
        // disjoint and ours until the next `reply` or `wait`, which need
        // `&mut self` and so end the borrow the request holds.
        unsafe { Request::new(buf, capacity, len, area, area_len, scratch, max) }
    }
}

/// Where a client stub stores its record: the transport's message buffer
/// viewed as `M`, after checking that `M` fits it.
#[inline(always)]
pub fn record<M: Message>(t: &mut (impl ClientTransport + ?Sized)) -> Result<&mut M, CallError> {
    if size_of::<M>() > t.capacity() {
        return Err(CallError::RecordTooLarge {
            size: size_of::<M>(),
            capacity: t.capacity(),
        });
    }
    // SAFETY: the buffer holds `capacity >= size_of::<M>()` bytes, is
    // 8-aligned (`M`'s alignment is at most 8), and is ours while `t` is
    // borrowed (the trait's contract); every bit pattern is a valid `M`
    // (`Message`'s contract), so whatever the buffer holds is an `M`.
    Ok(unsafe { t.buf().cast::<M>().as_mut() })
}

/// Sends the record a client stub stored ([`record`]) as a request for
/// `M`'s operation, waits, and views the reply's record, after checking
/// that the reply carries the whole record.
#[inline(always)]
pub fn invoke<M: Message>(t: &mut (impl ClientTransport + ?Sized)) -> Result<&M, CallError> {
    let n = t.call(M::KEY, M::REQUEST_SIZE)?;
    if n < size_of::<M>() {
        return Err(CallError::Malformed(
            "the reply's record is shorter than the operation's",
        ));
    }
    // SAFETY: `size_of::<M>() <= n <= capacity` (checked above; `n <=
    // capacity` is the trait's contract), the buffer is 8-aligned and ours
    // while `t` is borrowed; any bits are an `M` (`Message`).
    Ok(unsafe { t.buf().cast::<M>().as_ref() })
}

/// A value of plain data with every byte zero (generated structs'
/// `Default`).
#[inline]
pub fn zeroed<T: Plain>() -> T {
    // SAFETY: every bit pattern, zero included, is a valid `T` (`Plain`).
    unsafe { std::mem::zeroed() }
}

/// The bytes of a slice of plain data.
#[inline(always)]
fn bytes_of<T: Plain>(v: &[T]) -> &[u8] {
    // SAFETY: `T` has no padding (`Plain`), so every byte of the slice is
    // initialized; the length is the slice's size in bytes, which fits
    // `isize` because the slice exists.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), size_of_val(v)) }
}

/// Copies an in or inout sequence into the string area; its descriptor.
#[inline(always)]
pub fn put_seq<T: Plain>(
    t: &mut (impl ClientTransport + ?Sized),
    v: &[T],
) -> Result<Desc, CallError> {
    let off = t.put(bytes_of(v), align_of::<T>())?;
    // `put` checked the length against the per-string limit, a `u32`.
    Ok(Desc {
        off,
        len: v.len() as u32,
    })
}

/// Copies an in or inout string into the string area; its descriptor.
#[inline(always)]
pub fn put_str(t: &mut (impl ClientTransport + ?Sized), s: &str) -> Result<Desc, CallError> {
    let off = t.put(s.as_bytes(), 1)?;
    Ok(Desc {
        off,
        len: s.len() as u32,
    })
}

/// The bytes a reply's descriptor for elements of `T` names, checked:
/// in the area (the transport), aligned to `T`.
#[inline(always)]
fn reply_elems<T: Plain>(t: &(impl ClientTransport + ?Sized), d: Desc) -> Result<&[u8], CallError> {
    // (A `let else`, not `ok_or`: an eager `CallError` is dropped on the
    // good path, and its drop is not free.)
    let Some(n) = (d.len as usize).checked_mul(size_of::<T>()) else {
        return Err(CallError::Malformed(
            "a reply's descriptor is longer than the string area",
        ));
    };
    if !(d.off as usize).is_multiple_of(align_of::<T>()) {
        return Err(CallError::Malformed(
            "a reply's descriptor is misaligned for its element",
        ));
    }
    t.reply_bytes(d.off, n)
}

/// Copies an out sequence of the reply into `out` (cleared first), after
/// checking its descriptor `d` (read once from the reply by the stub).
#[inline]
pub fn read_vec<T: Plain>(
    t: &(impl ClientTransport + ?Sized),
    d: Desc,
    out: &mut Vec<T>,
) -> Result<(), CallError> {
    let src = reply_elems::<T>(t, d)?;
    out.clear();
    out.reserve(d.len as usize);
    // SAFETY: `src` holds `d.len` elements' bytes (checked above), `out`
    // has room for `d.len` elements (reserved), the two do not overlap
    // (`out` is private memory, `src` the transport's area); a byte copy
    // of plain data is a valid `T` for any bits, so the first `d.len`
    // elements are initialized before `set_len`.
    unsafe {
        copy_bytes(src.as_ptr(), out.as_mut_ptr().cast::<u8>(), src.len());
        out.set_len(d.len as usize);
    }
    Ok(())
}

/// Copies `n` bytes from `src` to `dst`; a copy of 8 to 32 bytes (a few
/// ints) is two overlapping pairs of loads and stores in line instead of
/// a call of `memcpy`. For transports' `put`, which copy small in arrays.
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`] for `n` bytes (no alignment
/// needed).
#[inline(always)]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: in all three arms, the caller's contract: `n` readable bytes
    // at `src` and `n` writable bytes at `dst`, not overlapping; each
    // access below lies in those `n` bytes (`16 <= n <= 32`, or `8 <= n <
    // 16`) and is unaligned, so no alignment is assumed.
    unsafe {
        if (16..=32).contains(&n) {
            let a = src.cast::<[u8; 16]>().read_unaligned();
            let b = src.add(n - 16).cast::<[u8; 16]>().read_unaligned();
            dst.cast::<[u8; 16]>().write_unaligned(a);
            dst.add(n - 16).cast::<[u8; 16]>().write_unaligned(b);
        } else if (8..16).contains(&n) {
            let a = src.cast::<u64>().read_unaligned();
            let b = src.add(n - 8).cast::<u64>().read_unaligned();
            dst.cast::<u64>().write_unaligned(a);
            dst.add(n - 8).cast::<u64>().write_unaligned(b);
        } else {
            std::ptr::copy_nonoverlapping(src, dst, n);
        }
    }
}

/// Copies the elements of an inout sequence back into the caller's slice,
/// from where the client put them (`d` is the client's own descriptor, so
/// its length is the slice's).
#[inline]
pub fn read_back<T: Plain>(
    t: &(impl ClientTransport + ?Sized),
    d: Desc,
    out: &mut [T],
) -> Result<(), CallError> {
    let src = reply_elems::<T>(t, d)?;
    if src.len() != size_of_val(out) {
        return Err(CallError::Malformed("an inout sequence changed length"));
    }
    // SAFETY: both hold `size_of_val(out)` bytes (checked), do not overlap
    // (private memory and the transport's area), and any bytes are valid
    // `T`s (`Plain`).
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), out.as_mut_ptr().cast::<u8>(), src.len())
    };
    Ok(())
}

/// Copies an out string of the reply into `out` (replacing its contents),
/// after checking its descriptor and, on the copy, that it is UTF-8.
#[inline]
pub fn read_string(
    t: &(impl ClientTransport + ?Sized),
    d: Desc,
    out: &mut String,
) -> Result<(), CallError> {
    let src = t.reply_bytes(d.off, d.len as usize)?;
    let mut v = std::mem::take(out).into_bytes();
    v.clear();
    v.extend_from_slice(src);
    match String::from_utf8(v) {
        Ok(s) => {
            *out = s;
            Ok(())
        }
        Err(_) => Err(CallError::Malformed("an out string is not UTF-8")),
    }
}

/// A copy of a value in a received record, read exactly once (a volatile
/// load), so that the compiler cannot read memory the peer may change a
/// second time after the copy was checked. The stubs read every descriptor
/// and boolean through it.
#[inline(always)]
pub fn once<T: Copy>(v: &T) -> T {
    // SAFETY: `v` is a valid, aligned reference; a volatile read of a
    // `Copy` value is a plain load that is neither repeated nor merged.
    unsafe { std::ptr::read_volatile(v) }
}

/// A `boolean` of a reply, read once: 0 or 1, anything else is malformed.
#[inline(always)]
pub fn reply_bool(b: &u8) -> Result<bool, CallError> {
    match once(b) {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(CallError::Malformed("a boolean is neither 0 nor 1")),
    }
}

/// A `boolean` of a request, read once: 0 or 1, anything else is
/// [`Status::BadValue`].
#[inline(always)]
pub fn request_bool(b: &u8) -> Result<bool, Status> {
    match once(b) {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Status::BadValue),
    }
}

/// What a server stub hands back to the loop for [`ServerTransport::reply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Bytes of the reply's record (the operation's whole record).
    pub len: usize,
    /// The bytes of the string area the reply's inout and out strings
    /// occupy (empty if none).
    pub strings: Range<u32>,
}

/// A received request as a server stub sees it: the message buffer (of
/// which the first `len` bytes were sent) and the string area, not yet
/// checked. [`Request::open`] checks the length and gives the record and
/// the string checker.
///
/// The buffer and the area are memory the client's process can write at
/// any time, also while the server reads it (a hostile client does). As
/// for unet's endpoint segments (crates/unet/src/shm.rs), that is sound
/// here because:
/// - every type viewed in place is valid for any bits ([`Message`],
///   [`Plain`]), so a concurrent write changes values, never validity;
/// - the stubs read each descriptor and each scalar once, into a local,
///   check the local and use the local; a value the client changes after
///   the check changes nothing the server relies on;
/// - a `boolean` is checked on a copy; a `string` is copied into private
///   memory ([`ServerTransport::scratch`]) and checked there, so the
///   `&str` a server method gets is UTF-8 for as long as it lives;
/// - the memory cannot go away: the transport keeps its mapping (sealed
///   against shrinking for a `memfd`) for the request's lifetime `'a`.
///
/// What remains is the client's own business: a slice the server method
/// reads may show values the client changes while it reads (torn data),
/// which only the client itself can observe in its results.
pub struct Request<'a> {
    buf: NonNull<u8>,
    capacity: usize,
    len: usize,
    strings: Strings<'a>,
}

impl<'a> Request<'a> {
    /// A request over raw parts, for a transport's `request`.
    ///
    /// # Safety
    /// As [`ServerTransport`]'s contract: `buf` holds `capacity` bytes,
    /// 8-aligned, with `len <= capacity` (a transport that cannot ensure
    /// it passes a smaller `len`: the check here refuses short requests
    /// only); `area` holds `area_len` bytes, 8-aligned; `scratch` holds at
    /// least `area_len` bytes of private memory; the three are disjoint,
    /// valid for reads and writes for `'a`, and accessed by nothing else in
    /// this process during `'a`.
    #[inline(always)]
    pub unsafe fn new(
        buf: NonNull<u8>,
        capacity: usize,
        len: usize,
        area: NonNull<u8>,
        area_len: usize,
        scratch: NonNull<u8>,
        max_string_bytes: usize,
    ) -> Request<'a> {
        Request {
            buf,
            capacity,
            len,
            strings: Strings {
                area,
                area_len,
                scratch,
                max: max_string_bytes,
                next: 0,
                from: usize::MAX,
                end: 0,
                _mem: PhantomData,
            },
        }
    }

    /// Bytes of the record the client sent.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the client sent no record bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The record of `M`'s operation in place, after checking that the
    /// client sent all of its request part ([`Status::ShortMessage`]), and
    /// the checker of its descriptors.
    #[inline(always)]
    pub fn open<M: Message>(self) -> Result<(&'a mut M, Strings<'a>), Status> {
        if self.len < M::REQUEST_SIZE || size_of::<M>() > self.capacity {
            return Err(Status::ShortMessage);
        }
        // SAFETY: the buffer holds `capacity >= size_of::<M>()` bytes,
        // 8-aligned (`M`'s alignment is at most 8), is ours for `'a` (the
        // constructor's contract) and `self` is consumed, so this is the
        // only reference to it; every bit pattern is a valid `M`
        // (`Message`), including bytes the client changes later.
        let m = unsafe { self.buf.cast::<M>().as_mut() };
        Ok((m, self.strings))
    }
}

/// The checker of a request's string descriptors and the allocator of its
/// reply's out strings.
///
/// A server stub calls it for each in and inout descriptor in record order
/// (with a copy of the descriptor it read once), then creates the writers
/// of the out strings, then closes each into its descriptor. A descriptor
/// is accepted if its bytes lie in the string area, its offset is aligned
/// to the element, it starts at or after the end of the previous one (so
/// no two views overlap, and a `&mut` view is never aliased) and it is
/// within the per-string limit; [`Status::BadString`] otherwise.
///
/// The out strings go after the last in string: the free rest of the area,
/// split in equal 8-aligned parts when an operation has several (each part
/// also bounded by the per-string limit). A writer that runs out of room
/// fails its push and makes the reply [`Status::Overflow`].
pub struct Strings<'a> {
    area: NonNull<u8>,
    area_len: usize,
    scratch: NonNull<u8>,
    max: usize,
    /// The end of the last checked descriptor.
    next: usize,
    /// The start and end of the reply's strings.
    from: usize,
    end: usize,
    _mem: PhantomData<&'a mut [u8]>,
}

impl<'a> Strings<'a> {
    /// Checks the descriptor at `d` (read once) for `size`-byte elements
    /// of alignment `align`; returns the byte range and the element count.
    #[inline(always)]
    fn check(
        &mut self,
        d: &Desc,
        size: usize,
        align: usize,
    ) -> Result<(usize, usize, usize), Status> {
        let d = once(d);
        let off = d.off as usize;
        let n = (d.len as usize)
            .checked_mul(size)
            .ok_or(Status::BadString)?;
        if n > self.max
            || !off.is_multiple_of(align)
            || off < self.next
            || off > self.area_len
            || n > self.area_len - off
        {
            return Err(Status::BadString);
        }
        self.next = off + n;
        Ok((off, n, d.len as usize))
    }

    /// An in sequence in place.
    #[inline(always)]
    pub fn seq<T: Plain>(&mut self, d: &Desc) -> Result<&'a [T], Status> {
        let (off, _, len) = self.check(d, size_of::<T>(), align_of::<T>())?;
        // SAFETY: `off .. off + len * size_of::<T>()` lies in the area
        // (checked), is aligned to `T` (the area is 8-aligned and `off` a
        // multiple of `T`'s alignment), overlaps no other view this checker
        // handed out (each starts at or after the previous one's end), and
        // stays valid for `'a` (`Request::new`'s contract). Any bits are a
        // `T` (`Plain`); see `Request` for concurrent writes by the client.
        Ok(unsafe { std::slice::from_raw_parts(self.area.as_ptr().add(off).cast::<T>(), len) })
    }

    /// An inout sequence in place: the server method writes its results
    /// straight into the client's string area.
    #[inline(always)]
    pub fn seq_mut<T: Plain>(&mut self, d: &Desc) -> Result<&'a mut [T], Status> {
        let (off, n, len) = self.check(d, size_of::<T>(), align_of::<T>())?;
        self.from = self.from.min(off);
        self.end = self.end.max(off + n);
        // SAFETY: as for `seq`; the range overlaps no other view, so this
        // is the only reference to it.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.area.as_ptr().add(off).cast::<T>(), len) })
    }

    /// An in (or inout) string: copied into private memory, then checked
    /// to be UTF-8 there ([`Status::BadValue`] if not).
    #[inline]
    pub fn str(&mut self, d: &Desc) -> Result<&'a str, Status> {
        let (off, n, _) = self.check(d, 1, 1)?;
        // SAFETY: `off .. off + n` lies in the area (checked) and in the
        // scratch memory (at least as long as the area); the scratch is
        // private and disjoint from the area; ranges of different strings
        // do not overlap (checked), so no earlier `&str` sees these bytes.
        let bytes = unsafe {
            let dst = self.scratch.as_ptr().add(off);
            std::ptr::copy_nonoverlapping(self.area.as_ptr().add(off), dst, n);
            std::slice::from_raw_parts(dst.cast_const(), n)
        };
        std::str::from_utf8(bytes).map_err(|_| Status::BadValue)
    }

    /// Part `part` of `parts` of the free rest of the area: its offset and
    /// length in bytes.
    #[inline(always)]
    fn part(&self, part: u32, parts: u32) -> (usize, usize) {
        let start = self.next.next_multiple_of(8).min(self.area_len);
        let each = ((self.area_len - start) / parts.max(1) as usize) & !7;
        (start + part as usize * each, each.min(self.max))
    }

    /// The writer of an out sequence: part `part` of `parts` (the
    /// operation's number of out strings) of the free area.
    #[inline(always)]
    pub fn out_seq<T: Plain>(&mut self, part: u32, parts: u32) -> OutSeq<'a, T> {
        let (off, n) = self.part(part, parts);
        OutSeq {
            // SAFETY: `off <= area_len` (`part`), so the pointer stays in
            // the area or one past it; it is 8-aligned (the area is, and
            // `off` is a multiple of 8), hence aligned to `T`.
            ptr: unsafe { NonNull::new_unchecked(self.area.as_ptr().add(off).cast::<T>()) },
            off,
            len: 0,
            cap: n / size_of::<T>().max(1),
            overflow: false,
            _mem: PhantomData,
        }
    }

    /// The writer of an out string (or of an inout string's new value):
    /// part `part` of `parts` of the free area.
    #[inline(always)]
    pub fn out_str(&mut self, part: u32, parts: u32) -> OutStr<'a> {
        OutStr(self.out_seq::<u8>(part, parts))
    }

    /// Ends an out sequence: its descriptor, or [`Status::Overflow`] if a
    /// write did not fit.
    #[inline(always)]
    pub fn close_seq<T: Plain>(&mut self, w: OutSeq<'a, T>) -> Result<Desc, Status> {
        if w.overflow {
            return Err(Status::Overflow);
        }
        self.from = self.from.min(w.off);
        self.end = self.end.max(w.off + w.len * size_of::<T>());
        // `off` and `len` are bounded by the area, which is below 4 GiB.
        Ok(Desc {
            off: w.off as u32,
            len: w.len as u32,
        })
    }

    /// Ends an out string: its descriptor, or [`Status::Overflow`].
    #[inline(always)]
    pub fn close_str(&mut self, w: OutStr<'a>) -> Result<Desc, Status> {
        self.close_seq(w.0)
    }

    /// The reply of a call whose record is `len` bytes.
    #[inline(always)]
    pub fn reply(self, len: usize) -> Reply {
        let strings = if self.from < self.end {
            self.from as u32..self.end as u32
        } else {
            0..0
        };
        Reply { len, strings }
    }
}

/// A write did not fit the room of an out string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the out string's room in the string area is full")]
pub struct Overflow;

/// The writer of an out sequence, straight into the client's string area
/// (IDL4 §3.3: the server writes the result where the client reads it).
///
/// Its room is the part of the free string area the stub gave it (see
/// [`Strings`]); a push beyond it fails with [`Overflow`] and the reply is
/// [`Status::Overflow`], whether or not the method looked at the error.
pub struct OutSeq<'a, T: Plain> {
    ptr: NonNull<T>,
    off: usize,
    len: usize,
    cap: usize,
    overflow: bool,
    _mem: PhantomData<&'a mut [T]>,
}

impl<'a, T: Plain> OutSeq<'a, T> {
    /// A writer into the caller's `buf` (to call a server method directly,
    /// in a test or in process); [`OutSeq::as_mut_slice`] reads back.
    pub fn new(buf: &'a mut [T]) -> OutSeq<'a, T> {
        OutSeq {
            ptr: NonNull::from(&mut *buf).cast::<T>(),
            off: 0,
            len: 0,
            cap: buf.len(),
            overflow: false,
            _mem: PhantomData,
        }
    }

    /// Whether a write did not fit (the reply will be [`Status::Overflow`]).
    pub fn overflowed(&self) -> bool {
        self.overflow
    }

    /// Elements written.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements it can hold.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Appends `v`.
    #[inline]
    pub fn push(&mut self, v: T) -> Result<(), Overflow> {
        if self.len == self.cap {
            self.overflow = true;
            return Err(Overflow);
        }
        // SAFETY: `len < cap`, so the element lies in this writer's room
        // of the area, aligned (see `Strings::out_seq`), and no other view
        // covers it.
        unsafe { self.ptr.as_ptr().add(self.len).write(v) };
        self.len += 1;
        Ok(())
    }

    /// Appends all of `v`, or nothing if it does not fit.
    #[inline]
    pub fn extend_from_slice(&mut self, v: &[T]) -> Result<(), Overflow> {
        if v.len() > self.cap - self.len {
            self.overflow = true;
            return Err(Overflow);
        }
        // SAFETY: the elements `len .. len + v.len()` lie in the room
        // (checked); `v` is the caller's memory, which cannot overlap the
        // room (no reference to the room is handed out but `spare` and
        // `as_mut_slice`, whose borrows end before this call).
        unsafe {
            std::ptr::copy_nonoverlapping(v.as_ptr(), self.ptr.as_ptr().add(self.len), v.len())
        };
        self.len += v.len();
        Ok(())
    }

    /// The room not yet written, to fill in place and then
    /// [`OutSeq::advance`] over (the elements hold whatever the area held).
    #[inline]
    pub fn spare(&mut self) -> &mut [T] {
        // SAFETY: the elements `len .. cap` lie in the room; any bits are a
        // `T`; the borrow of `self` keeps it the only view.
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(self.len), self.cap - self.len)
        }
    }

    /// Counts `n` more elements of [`OutSeq::spare`] as written.
    #[inline]
    pub fn advance(&mut self, n: usize) -> Result<(), Overflow> {
        if n > self.cap - self.len {
            self.overflow = true;
            return Err(Overflow);
        }
        self.len += n;
        Ok(())
    }

    /// The elements written so far.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: the first `len` elements lie in the room; the borrow of
        // `self` keeps it the only view.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Forgets the elements written (an earlier overflow still stands).
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// The writer of an out string, straight into the client's string area;
/// implements [`std::fmt::Write`]. As [`OutSeq`] for its room.
pub struct OutStr<'a>(OutSeq<'a, u8>);

impl<'a> OutStr<'a> {
    /// A writer into the caller's `buf` (to call a server method directly,
    /// in a test or in process); [`OutStr::as_bytes`] reads back.
    pub fn new(buf: &'a mut [u8]) -> OutStr<'a> {
        OutStr(OutSeq::new(buf))
    }

    /// The bytes written so far (UTF-8 as written, unless another process
    /// changed them since).
    pub fn as_bytes(&mut self) -> &[u8] {
        self.0.as_mut_slice()
    }

    /// Whether a write did not fit (the reply will be [`Status::Overflow`]).
    pub fn overflowed(&self) -> bool {
        self.0.overflowed()
    }

    /// Bytes written.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Bytes it can hold.
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }

    /// Appends `s`, or nothing if it does not fit.
    #[inline]
    pub fn push_str(&mut self, s: &str) -> Result<(), Overflow> {
        self.0.extend_from_slice(s.as_bytes())
    }

    /// Appends `c`.
    pub fn push(&mut self, c: char) -> Result<(), Overflow> {
        self.push_str(c.encode_utf8(&mut [0; 4]))
    }

    /// Forgets what was written (an earlier overflow still stands).
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

impl std::fmt::Write for OutStr<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push_str(s).map_err(|_| std::fmt::Error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct TwoMsg {
        a: Desc,
        b: Desc,
    }

    // SAFETY: `#[repr(C)]` of two descriptors: any bits, alignment 4.
    unsafe impl Message for TwoMsg {
        const KEY: u16 = 0;
        const REQUEST_SIZE: usize = 16;
    }

    /// Runs `f` on a request of `len` record bytes holding descriptors
    /// `a` and `b`, over a 64-byte area and a 16-byte per-string limit.
    fn with(len: usize, a: Desc, b: Desc, f: impl FnOnce(&mut TwoMsg, &mut Strings<'_>)) {
        let mut buf = [0u64; 8];
        let mut area = [0u64; 8];
        let mut scratch = [0u8; 64];
        for (i, x) in area.iter_mut().enumerate() {
            *x = u64::from_ne_bytes([b'a' + i as u8; 8]);
        }
        // SAFETY: the three are distinct local arrays of the given sizes,
        // 8-aligned (u64), alive for the request.
        let req = unsafe {
            let p = NonNull::from(&mut buf).cast::<u8>();
            p.cast::<TwoMsg>().write(TwoMsg { a, b });
            Request::new(
                p,
                64,
                len,
                NonNull::from(&mut area).cast(),
                64,
                NonNull::from(&mut scratch).cast(),
                16,
            )
        };
        let (m, mut st) = req.open::<TwoMsg>().expect("long enough");
        f(m, &mut st);
    }

    fn d(off: u32, len: u32) -> Desc {
        Desc { off, len }
    }

    #[test]
    fn short_request() {
        let mut buf = [0u64; 8];
        let mut area = [0u64; 1];
        let mut scratch = [0u8; 8];
        // SAFETY: distinct local arrays, 8-aligned, alive for the request.
        let req = unsafe {
            Request::new(
                NonNull::from(&mut buf).cast(),
                64,
                15,
                NonNull::from(&mut area).cast(),
                8,
                NonNull::from(&mut scratch).cast(),
                8,
            )
        };
        assert!(matches!(req.open::<TwoMsg>(), Err(Status::ShortMessage)));
    }

    #[test]
    fn descriptor_rules() {
        // In range, in order, aligned: accepted, viewed in place.
        with(16, d(0, 2), d(8, 4), |m, st| {
            assert_eq!(st.seq::<u16>(&m.a), Ok(&[0x6161u16, 0x6161][..]));
            assert_eq!(st.str(&m.b), Ok("bbbb"));
        });
        // Ending exactly at the area's end; empty ones anywhere in order.
        with(16, d(48, 16), d(64, 0), |m, st| {
            assert_eq!(st.str(&m.a), Ok("gggggggghhhhhhhh"));
            assert_eq!(st.seq::<u8>(&m.b), Ok(&[][..]));
        });
        // Past the end, overlapping the previous one, misaligned, over the
        // per-string limit: BadString.
        with(16, d(60, 5), d(0, 0), |m, st| {
            assert_eq!(st.str(&m.a), Err(Status::BadString))
        });
        with(16, d(u32::MAX, 1), d(0, 0), |m, st| {
            assert_eq!(st.str(&m.a), Err(Status::BadString))
        });
        with(16, d(0, 8), d(4, 1), |m, st| {
            assert!(st.str(&m.a).is_ok());
            assert_eq!(st.str(&m.b), Err(Status::BadString));
        });
        with(16, d(2, 1), d(0, 0), |m, st| {
            assert_eq!(st.seq::<u32>(&m.a), Err(Status::BadString))
        });
        with(16, d(0, 17), d(0, 0), |m, st| {
            assert_eq!(st.str(&m.a), Err(Status::BadString))
        });
        with(16, d(0, u32::MAX), d(0, 0), |m, st| {
            assert_eq!(st.seq::<u64>(&m.a), Err(Status::BadString))
        });
    }

    #[test]
    fn strings_are_checked_utf8_copies() {
        with(16, d(0, 4), d(0, 0), |m, st| {
            let s = st.str(&m.a).expect("ascii");
            assert_eq!(s, "aaaa");
        });
        let mut buf = [0u64; 8];
        let mut area = [u64::from_ne_bytes([0xff; 8])];
        let mut scratch = [0u8; 8];
        // SAFETY: distinct local arrays, 8-aligned, alive for the request.
        let req = unsafe {
            NonNull::from(&mut buf).cast::<TwoMsg>().write(TwoMsg {
                a: d(0, 3),
                b: d(0, 0),
            });
            Request::new(
                NonNull::from(&mut buf).cast(),
                64,
                16,
                NonNull::from(&mut area).cast(),
                8,
                NonNull::from(&mut scratch).cast(),
                8,
            )
        };
        let (m, mut st) = req.open::<TwoMsg>().expect("long enough");
        assert_eq!(st.str(&m.a), Err(Status::BadValue));
    }

    #[test]
    fn out_writers_share_the_rest_and_overflow() {
        with(16, d(0, 10), d(0, 0), |m, st| {
            assert!(st.str(&m.a).is_ok());
            // The rest of the area from 16 (10 rounded up to 8): 48 bytes,
            // two parts of 24, each also under the 16-byte limit.
            let mut x = st.out_seq::<u32>(0, 2);
            let mut y = st.out_str(1, 2);
            assert_eq!((x.capacity(), y.capacity()), (4, 16));
            x.extend_from_slice(&[1, 2, 3, 4]).expect("fits");
            assert_eq!(x.push(5), Err(Overflow));
            y.push_str("hello").expect("fits");
            assert_eq!(st.close_str(y), Ok(d(40, 5)));
            assert_eq!(st.close_seq(x), Err(Status::Overflow));
        });
        with(16, d(0, 0), d(0, 0), |_, st| {
            let mut x = st.out_seq::<u64>(0, 1);
            x.spare()[..2].copy_from_slice(&[7, 8]);
            x.advance(2).expect("fits");
            assert_eq!(x.as_mut_slice(), &[7, 8]);
            assert_eq!(st.close_seq(x), Ok(d(0, 2)));
        });
    }
}
