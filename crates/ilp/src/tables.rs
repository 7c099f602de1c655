//! The CRC-32 (IEEE 802.3) tables: the reflected polynomial `0xEDB88320`,
//! eight 256-entry tables for slicing-by-8, computed at compile time.
//!
//! `TABLES[0]` is the classic byte-at-a-time table (`T0[i]` = the CRC
//! register after shifting byte `i` through a zero register);
//! `TABLES[k][i] = (TABLES[k-1][i] >> 8) ^ TABLES[0][TABLES[k-1][i] & 0xff]`,
//! the effect of byte `i` followed by `k` zero bytes. The generated code
//! reads them at `TABLES.as_ptr() + 1024 * k` (vcode's `crc32x8`).

/// The reflected IEEE 802.3 polynomial.
pub const POLY: u32 = 0xedb8_8320;

/// The eight slicing-by-8 tables, contiguous (the layout `crc32x8` expects).
pub static TABLES: [[u32; 256]; 8] = build();

const fn build() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let p = t[k - 1][i];
            t[k][i] = (p >> 8) ^ t[0][(p & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}
