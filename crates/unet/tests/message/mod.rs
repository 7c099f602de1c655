//! The test messages `direct.rs` and `lent_frames.rs` send: bytes that a
//! message's sequence number and length decide, so that a receiver can
//! tell a message delivered whole from one torn, mixed or misplaced.

/// A message whose bytes say its sequence number and length.
pub fn message(seq: u64, len: usize) -> Vec<u8> {
    let mut x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ len as u64 ^ 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
