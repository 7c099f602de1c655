//! The running state a pipeline carries from one buffer to the next, and
//! what a run reports.

/// The state of a stream processed in several buffers: the running
/// checksum and CRC, and the stream offset (which fixes the xor key's phase
/// and the byte lane of an odd-length buffer's successor).
///
/// `State::default()` starts a stream.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct State {
    /// Bytes processed so far.
    pub offset: u64,
    /// The running ones'-complement sum of the stream as big-endian 16-bit
    /// words (RFC 1071), not yet complemented. It is 0 exactly when every
    /// byte so far was 0.
    pub sum: u16,
    /// The CRC-32 of the stream so far (finalized: 0 for the empty stream).
    pub crc: u32,
}

impl State {
    /// A new stream.
    pub fn new() -> Self {
        State::default()
    }

    /// The Internet checksum of the stream so far: the complement of
    /// [`sum`](State::sum).
    pub fn checksum(&self) -> u16 {
        !self.sum
    }

    /// Adds a buffer's ones'-complement sum, computed as if the buffer
    /// started the stream (`le_sum`: its bytes summed as little-endian
    /// words, folded to 16 bits), to the running sum.
    pub(crate) fn absorb_sum(&mut self, le_sum: u16) {
        // RFC 1071 §2(B): the sum of byte-swapped words is the byte-swapped
        // sum, so the little-endian sum swapped is the big-endian one; a
        // buffer that starts at an odd stream offset has its bytes in the
        // other lanes, which swaps it once more.
        let be = if self.offset & 1 == 0 {
            le_sum.swap_bytes()
        } else {
            le_sum
        };
        self.sum = ones_add16(self.sum, be);
    }
}

/// What one run reports: the values of the observing steps in the
/// pipeline, for the whole stream up to the end of this buffer.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Outputs {
    /// The Internet checksum (`!state.sum`), if the pipeline has
    /// [`Step::Checksum`](crate::Step::Checksum).
    pub checksum: Option<u16>,
    /// The CRC-32, if the pipeline has [`Step::Crc32`](crate::Step::Crc32).
    pub crc32: Option<u32>,
}

/// Ones'-complement addition of 16-bit values (end-around carry).
pub(crate) fn ones_add16(a: u16, b: u16) -> u16 {
    let s = a as u32 + b as u32;
    ((s & 0xffff) + (s >> 16)) as u16
}

/// Folds a 64-bit ones'-complement sum to 16 bits, end-around: the result
/// is congruent modulo `0xffff` and 0 only if `s` is 0.
pub fn fold64(s: u64) -> u16 {
    let s = (s & 0xffff_ffff) + (s >> 32); // < 2^33
    let s = (s & 0xffff) + (s >> 16); // < 2^17 + 2^16
    let s = (s & 0xffff) + (s >> 16); // < 2^16 + 2
    ((s & 0xffff) + (s >> 16)) as u16
}
