//! Loops fused by hand in Rust (compiled with `-O` like the rest of the
//! crate): the "C integrated" rows of the paper's Table 4, the baselines
//! the generated loops are measured against.
//!
//! They are written to be fast, not to be modular: 64-bit words, unrolled
//! by four, independent 128-bit accumulators so that the add chains
//! overlap (each add is an `add`/`adc` pair; of the variants tried, u32
//! halves, end-around adds and two or four wide accumulators, four were
//! fastest for copy + checksum, two with the byte swap, where four spill),
//! and the same slicing-by-8 tables as the generated CRC. Each returns what the
//! matching pipeline observes, so tests check them against [`reference`](crate::reference).

use crate::state::fold64;
use crate::tables::TABLES;

#[inline(always)]
fn word(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().unwrap())
}

/// Folds two wide (128-bit) sums into a 16-bit ones'-complement sum.
#[inline(always)]
fn fold_wide(a: u128, b: u128) -> u16 {
    let s = a + b;
    let (t, c) = (s as u64).overflowing_add((s >> 64) as u64);
    fold64(t + c as u64)
}

/// The tail of a buffer as a zero-padded little-endian word.
#[inline(always)]
fn padded(rest: &[u8]) -> u64 {
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    u64::from_le_bytes(last)
}

/// Copies `src` to `dst` (equal lengths) and returns the little-endian
/// ones'-complement sum of `src` folded to 16 bits (as
/// [`reference::sum_le`](crate::reference::sum_le)).
pub fn copy_checksum(src: &[u8], dst: &mut [u8]) -> u16 {
    assert_eq!(src.len(), dst.len());
    let (mut a, mut b, mut c, mut e) = (0u128, 0u128, 0u128, 0u128);
    let n = src.len() & !31;
    let (s32, srest) = src.split_at(n);
    let (d32, drest) = dst.split_at_mut(n);
    for (s, d) in s32.chunks_exact(32).zip(d32.chunks_exact_mut(32)) {
        let (w0, w1, w2, w3) = (word(s), word(&s[8..]), word(&s[16..]), word(&s[24..]));
        d[..8].copy_from_slice(&w0.to_le_bytes());
        d[8..16].copy_from_slice(&w1.to_le_bytes());
        d[16..24].copy_from_slice(&w2.to_le_bytes());
        d[24..].copy_from_slice(&w3.to_le_bytes());
        a += w0 as u128;
        b += w1 as u128;
        c += w2 as u128;
        e += w3 as u128;
    }
    a += c;
    b += e;
    let mut s = srest.chunks_exact(8);
    let mut d = drest.chunks_exact_mut(8);
    for (s, d) in (&mut s).zip(&mut d) {
        let w = word(s);
        d.copy_from_slice(&w.to_le_bytes());
        a += w as u128;
    }
    let (sr, dr) = (s.remainder(), d.into_remainder());
    dr.copy_from_slice(sr);
    b += padded(sr) as u128;
    fold_wide(a, b)
}

#[inline(always)]
fn swap32x2(w: u64) -> u64 {
    w.swap_bytes().rotate_left(32)
}

/// Copies `src` to `dst` with every whole 32-bit unit byte-reversed (a
/// last 1 to 3 bytes as they are), and returns the little-endian sum of
/// `src` (the checksum observes the data before the swap).
pub fn copy_checksum_bswap32(src: &[u8], dst: &mut [u8]) -> u16 {
    assert_eq!(src.len(), dst.len());
    // Two accumulators here: with four, the swaps' temporaries make rustc
    // spill accumulators to the stack inside the loop.
    let (mut a, mut b) = (0u128, 0u128);
    let n = src.len() & !31;
    let (s32, srest) = src.split_at(n);
    let (d32, drest) = dst.split_at_mut(n);
    for (s, d) in s32.chunks_exact(32).zip(d32.chunks_exact_mut(32)) {
        let (w0, w1, w2, w3) = (word(s), word(&s[8..]), word(&s[16..]), word(&s[24..]));
        d[..8].copy_from_slice(&swap32x2(w0).to_le_bytes());
        d[8..16].copy_from_slice(&swap32x2(w1).to_le_bytes());
        d[16..24].copy_from_slice(&swap32x2(w2).to_le_bytes());
        d[24..].copy_from_slice(&swap32x2(w3).to_le_bytes());
        a += w0 as u128;
        b += w1 as u128;
        a += w2 as u128;
        b += w3 as u128;
    }
    let mut s = srest.chunks_exact(8);
    let mut d = drest.chunks_exact_mut(8);
    for (s, d) in (&mut s).zip(&mut d) {
        let w = word(s);
        d.copy_from_slice(&swap32x2(w).to_le_bytes());
        a += w as u128;
    }
    let (sr, dr) = (s.remainder(), d.into_remainder());
    b += padded(sr) as u128;
    dr.copy_from_slice(sr);
    if sr.len() >= 4 {
        dr[..4].reverse();
    }
    fold_wide(a, b)
}

/// Copies `src` to `dst` and continues the CRC-32 `crc` over `src`
/// (slicing-by-8, the tables of [`tables`](crate::tables)).
pub fn copy_crc32(src: &[u8], dst: &mut [u8], crc: u32) -> u32 {
    assert_eq!(src.len(), dst.len());
    let t = &TABLES;
    let mut c = !crc;
    let mut s = src.chunks_exact(8);
    let mut d = dst.chunks_exact_mut(8);
    for (s, d) in (&mut s).zip(&mut d) {
        let w = word(s);
        d.copy_from_slice(&w.to_le_bytes());
        let v = w ^ c as u64;
        c = t[7][(v & 0xff) as usize]
            ^ t[6][((v >> 8) & 0xff) as usize]
            ^ t[5][((v >> 16) & 0xff) as usize]
            ^ t[4][((v >> 24) & 0xff) as usize]
            ^ t[3][((v >> 32) & 0xff) as usize]
            ^ t[2][((v >> 40) & 0xff) as usize]
            ^ t[1][((v >> 48) & 0xff) as usize]
            ^ t[0][(v >> 56) as usize];
    }
    let (sr, dr) = (s.remainder(), d.into_remainder());
    dr.copy_from_slice(sr);
    for &b in sr {
        c = t[0][((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}
