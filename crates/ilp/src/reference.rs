//! Plain Rust for each step alone, and their composition: the meaning of a
//! pipeline, against which the generated loops are tested, and the
//! "separate passes" of the benchmarks.
//!
//! Each function is a reasonable stand-alone implementation (word-wide
//! where the step allows it), not a deliberately slow one.

use crate::error::Error;
use crate::state::{Outputs, State, fold64};
use crate::step::Step;
use crate::tables::TABLES;

/// `dst = src` (the lengths must be equal; panics otherwise, like
/// `copy_from_slice`).
pub fn copy(src: &[u8], dst: &mut [u8]) {
    dst.copy_from_slice(src);
}

/// The ones'-complement sum of `data` read as little-endian 64-bit words
/// (the last one zero-padded), folded to 16 bits: congruent modulo
/// `0xffff` to the sum of its little-endian 16-bit words. Wide
/// accumulation: two 128-bit sums, whose high halves count the carries,
/// folded at the end.
pub fn sum_le(data: &[u8]) -> u16 {
    let (mut a, mut b) = (0u128, 0u128);
    let mut chunks = data.chunks_exact(16);
    for c in &mut chunks {
        a += u64::from_le_bytes(c[..8].try_into().unwrap()) as u128;
        b += u64::from_le_bytes(c[8..].try_into().unwrap()) as u128;
    }
    let mut rest = chunks.remainder();
    if rest.len() >= 8 {
        a += u64::from_le_bytes(rest[..8].try_into().unwrap()) as u128;
        rest = &rest[8..];
    }
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    b += u64::from_le_bytes(last) as u128;
    let s = a + b; // < 2^128: fine for any slice
    let lo = s as u64;
    let hi = (s >> 64) as u64;
    let (t, c) = lo.overflowing_add(hi);
    fold64(t + c as u64)
}

/// Adds `data` to a running checksum: the Internet checksum step alone.
/// `state.offset` tells whether `data` starts in the high or the low byte
/// of a 16-bit word; the caller advances it.
pub fn checksum(state: &mut State, data: &[u8]) {
    state.absorb_sum(sum_le(data));
}

/// The RFC 1071 checksum of one buffer: the complement of the
/// ones'-complement sum of its big-endian 16-bit words.
///
/// ```
/// // RFC 1071 §3's example bytes: the sum is 0xddf2.
/// let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
/// assert_eq!(ilp::reference::internet_checksum(&b), !0xddf2);
/// ```
pub fn internet_checksum(data: &[u8]) -> u16 {
    let mut s = State::new();
    checksum(&mut s, data);
    s.checksum()
}

/// Swaps the bytes of each whole 16-bit unit of `buf`; an odd last byte
/// stays.
pub fn bswap16(buf: &mut [u8]) {
    const M: u64 = 0x00ff_00ff_00ff_00ff;
    let mut words = buf.chunks_exact_mut(8);
    for c in &mut words {
        let w = u64::from_le_bytes((&*c).try_into().unwrap());
        c.copy_from_slice(&(((w >> 8) & M) | ((w & M) << 8)).to_le_bytes());
    }
    for u in words.into_remainder().chunks_exact_mut(2) {
        u.swap(0, 1);
    }
}

/// Reverses the bytes of each whole 32-bit unit of `buf`; a last 1 to 3
/// bytes stay.
pub fn bswap32(buf: &mut [u8]) {
    let mut words = buf.chunks_exact_mut(8);
    for c in &mut words {
        let w = u64::from_le_bytes((&*c).try_into().unwrap());
        c.copy_from_slice(&w.swap_bytes().rotate_left(32).to_le_bytes());
    }
    for u in words.into_remainder().chunks_exact_mut(4) {
        u.reverse();
    }
}

/// Continues a CRC-32 (IEEE 802.3) over `data`: `crc` is the CRC of what
/// came before (0 to start). Byte at a time, the textbook table method.
///
/// ```
/// assert_eq!(ilp::reference::crc32(0, b"123456789"), 0xcbf4_3926);
/// ```
pub fn crc32(crc: u32, data: &[u8]) -> u32 {
    let mut c = !crc;
    for &b in data {
        c = TABLES[0][((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// XORs `buf` with `key` repeating from stream offset 0; `buf` starts at
/// stream offset `offset`. `key` must not be empty.
pub fn xor(buf: &mut [u8], key: &[u8], offset: u64) {
    let k = key.len();
    let mut j = (offset % k as u64) as usize;
    for b in buf {
        *b ^= key[j];
        j += 1;
        if j == k {
            j = 0;
        }
    }
}

/// Applies `steps` one after another, each as a separate pass over a
/// working copy of `src`: the meaning of a pipeline. The checks on the
/// arguments and the resulting state and outputs are those of
/// [`Pipeline::run`](crate::Pipeline::run).
pub fn run(
    steps: &[Step],
    src: &[u8],
    dst: &mut [u8],
    state: &mut State,
) -> Result<Outputs, Error> {
    crate::step::validate(steps)?;
    crate::pipeline::check_buffers(steps.contains(&Step::Copy), src, dst)?;
    let mut data = src.to_vec();
    let mut out = Outputs::default();
    let mut next = *state;
    for s in steps {
        match s {
            Step::Copy => {}
            Step::Checksum => {
                checksum(&mut next, &data);
                out.checksum = Some(next.checksum());
            }
            Step::Bswap16 => bswap16(&mut data),
            Step::Bswap32 => bswap32(&mut data),
            Step::Crc32 => {
                next.crc = crc32(next.crc, &data);
                out.crc32 = Some(next.crc);
            }
            Step::Xor(key) => xor(&mut data, key, state.offset),
        }
    }
    if steps.contains(&Step::Copy) {
        copy(&data, dst);
    }
    next.offset += src.len() as u64;
    *state = next;
    Ok(out)
}
