//! The byte channel the peers' stubs and the hand-written stub run over:
//! a message buffer that the client stub writes its request into and reads
//! its reply from, a key, and a call. Two carriers implement it: the
//! single-threaded [`Loopback`] (the server's dispatch called directly, for
//! exact instruction counts) and the shared-memory channel of `idl::rt::shm`
//! between two processes (`super::shm`), with no stub of its own: each peer
//! serializes into the channel's message buffer as bytes.

use std::fmt;

/// The null call's key.
pub const KEY_NULL: u16 = 0;
/// `pfs_open`'s key.
pub const KEY_OPEN: u16 = 1;
/// `pfs_write`'s key.
pub const KEY_WRITE: u16 = 2;
/// `pfs_get_direntries`'s key.
pub const KEY_DIRENTRIES: u16 = 3;
/// IOzone's read's key.
pub const KEY_READ: u16 = 4;
/// The empty call of the baseline: no stub; the server calls the method
/// marker and replies nothing.
pub const KEY_EMPTY: u16 = 5;

/// Status words of a refused request: `idl::rt::Status`'s wire values,
/// which the peers' servers answer with too.
pub mod status {
    /// No operation has this key.
    pub const BAD_KEY: u16 = 1;
    /// The request is shorter than its record.
    pub const SHORT_MESSAGE: u16 = 2;
    /// An array's descriptor is out of range.
    pub const BAD_STRING: u16 = 3;
    /// The request does not decode.
    pub const BAD_VALUE: u16 = 4;
    /// The reply does not fit the buffer.
    pub const OVERFLOW: u16 = 5;
}

/// Why a call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// The carrier failed (the peer process died, a closed channel).
    Transport(String),
    /// The server refused the request with this status word.
    Status(u16),
    /// A reply or request did not decode (the peer's own error).
    Decode(String),
    /// The message does not fit the message buffer.
    TooLarge(usize),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Transport(e) => write!(f, "transport: {e}"),
            Error::Status(s) => write!(f, "server replied status {s}"),
            Error::Decode(e) => write!(f, "decoding: {e}"),
            Error::TooLarge(n) => write!(f, "a {n}-byte message does not fit the buffer"),
        }
    }
}

impl std::error::Error for Error {}

/// The client's side of a byte channel.
pub trait Wire {
    /// The message buffer, 8-byte aligned: the request is written here,
    /// the reply read from here.
    fn msg(&mut self) -> &mut [u8];
    /// Sends the first `len` bytes of [`Wire::msg`] as a request for `key`
    /// and waits for the reply; returns the reply's length.
    fn call(&mut self, key: u16, len: usize) -> Result<usize, Error>;
}

/// The server's side: one received request in `msg[..len]`, answered in
/// place. Returns the reply's length, or the status word of a refusal.
pub trait Service {
    /// Unmarshals, calls, marshals the reply into `msg`.
    fn serve(&mut self, key: u16, msg: &mut [u8], len: usize) -> Result<usize, u16>;
}

/// A message buffer of `u64` words seen as bytes, so that it is 8-byte
/// aligned (Cap'n Proto's segments must be).
#[derive(Clone, Debug)]
pub struct AlignedBuf {
    words: Vec<u64>,
}

impl AlignedBuf {
    /// A zeroed buffer of at least `bytes` bytes.
    pub fn new(bytes: usize) -> AlignedBuf {
        AlignedBuf {
            words: vec![0; bytes.div_ceil(8)],
        }
    }

    /// The first byte, for reads.
    pub fn as_ptr(&self) -> *const u8 {
        self.words.as_ptr().cast()
    }

    /// The bytes.
    pub fn bytes(&mut self) -> &mut [u8] {
        let n = self.words.len() * 8;
        // SAFETY: the pointer is the start of the vector's live allocation
        // of `words.len()` u64s, which is `n` initialized bytes; u8 has
        // alignment 1 and every bit pattern is a valid u8 (and a valid
        // u64, so writes through the slice keep the vector valid); the
        // returned slice borrows `self` mutably, so nothing else aliases it.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), n) }
    }
}

/// A single-threaded carrier: one buffer, and `call` runs the server's
/// dispatch directly in [`serve_one`]. It has no wait, so under callgrind
/// every instruction between the client stub's entry and its return is
/// either stub, the server loop's dispatch, the method, or this carrier's
/// few instructions (measured by the empty call and subtracted).
pub struct Loopback<S> {
    buf: AlignedBuf,
    /// The server.
    pub server: S,
}

impl<S: Service> Loopback<S> {
    /// A loopback with a message buffer of `cap` bytes.
    pub fn new(server: S, cap: usize) -> Loopback<S> {
        Loopback {
            buf: AlignedBuf::new(cap),
            server,
        }
    }
}

impl<S: Service> Wire for Loopback<S> {
    fn msg(&mut self) -> &mut [u8] {
        self.buf.bytes()
    }

    fn call(&mut self, key: u16, len: usize) -> Result<usize, Error> {
        serve_one(&mut self.server, key, self.buf.bytes(), len).map_err(Error::Status)
    }
}

/// The server loop's body for one request: the loopback's "receive".
#[inline(never)]
pub fn serve_one<S: Service>(
    s: &mut S,
    key: u16,
    msg: &mut [u8],
    len: usize,
) -> Result<usize, u16> {
    s.serve(key, msg, len)
}

/// The baseline service: answers every request by calling the method
/// marker with an empty method, reading and writing nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Empty;

impl Service for Empty {
    fn serve(&mut self, _key: u16, _msg: &mut [u8], _len: usize) -> Result<usize, u16> {
        super::server::method(&mut || {});
        Ok(0)
    }
}

/// The baseline client: the call with no stub.
pub fn empty_call<W: Wire + ?Sized>(w: &mut W) -> Result<usize, Error> {
    w.call(KEY_EMPTY, 0)
}
