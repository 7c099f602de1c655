//! Software models of the carry-less-multiply folding CRC-32 of the
//! generated loops (docs/ilp.md): four 128-bit lanes per 64-byte block,
//! each folded forward 512 bits with two 64 x 32-bit carry-less products,
//! the lanes reduced at the end by running them through the byte-wise CRC;
//! and the 512-bit loop: sixteen 128-bit lanes (four zmm registers) per
//! 256-byte block folded forward 2048 bits, the four registers folded into
//! one (1024, then 512 bits), the last whole blocks folded in 512 bits at a
//! time, the 64 bytes left folded to 16 (by 384, 256 and 128 bits). The folding
//! constants are derived here from the polynomial (x^k mod P) and the
//! models are checked against `crc32fast`.

/// The CRC-32 polynomial of IEEE 802.3, not reflected, with its x^32 term.
const POLY: u64 = 0x1_04c1_1db7;

/// `x^k mod P`, not reflected (bit m = coefficient of x^m).
fn xpow_mod(k: u32) -> u64 {
    let mut r: u64 = 1;
    for _ in 0..k {
        r <<= 1;
        if r & 1 << 32 != 0 {
            r ^= POLY;
        }
    }
    r
}

/// The carry-less product of two 64-bit values (what `pclmulqdq` computes).
fn clmul(a: u64, b: u64) -> u128 {
    (0..64)
        .filter(|i| b >> i & 1 == 1)
        .fold(0u128, |r, i| r ^ (a as u128) << i)
}

/// The constant that folds a reflected 64-bit half forward `e` bits: in a
/// reflected register bit k of a 128-bit lane stands for x^(127-k), and a
/// carry-less product of reflected operands comes out multiplied by x, so
/// the constant is x^(e-1) mod P, reflected into the top half of a u64.
fn fold_const(e: u32) -> u64 {
    xpow_mod(e - 1).reverse_bits()
}

/// The raw (uninverted) reflected CRC register advanced over `data`, bit
/// by bit.
fn raw(mut c: u32, data: &[u8]) -> u32 {
    for &b in data {
        c ^= b as u32;
        for _ in 0..8 {
            c = if c & 1 == 1 {
                c >> 1 ^ 0xedb8_8320
            } else {
                c >> 1
            };
        }
    }
    c
}

/// CRC-32 of `data` by folding (from 128 bytes on) and the bit-wise tail.
fn folded_crc32(data: &[u8]) -> u32 {
    if data.len() < 128 {
        return !raw(!0, data);
    }
    let (k_hi, k_lo) = (fold_const(512 + 64), fold_const(512));
    let lane = |b: &[u8]| u128::from_le_bytes(b.try_into().unwrap());
    let mut lanes: [u128; 4] = std::array::from_fn(|i| lane(&data[16 * i..16 * i + 16]));
    // The initial register (all ones) XORs into the first four bytes.
    lanes[0] ^= 0xffff_ffff;
    let blocks = data.len() / 64;
    for blk in 1..blocks {
        for (i, l) in lanes.iter_mut().enumerate() {
            let (h, lo) = (*l as u64, (*l >> 64) as u64);
            let at = 64 * blk + 16 * i;
            *l = clmul(h, k_hi) ^ clmul(lo, k_lo) ^ lane(&data[at..at + 16]);
        }
    }
    // The lanes, as 64 bytes of message, through the CRC from 0; then the
    // rest of the data.
    let bytes: Vec<u8> = lanes.iter().flat_map(|l| l.to_le_bytes()).collect();
    !raw(raw(0, &bytes), &data[64 * blocks..])
}

/// Folds `lane` forward `bits` (two carry-less products) and XORs `data`.
fn fold(lane: u128, bits: u32, data: u128) -> u128 {
    let (lo, hi) = (lane as u64, (lane >> 64) as u64);
    clmul(lo, fold_const(bits + 64)) ^ clmul(hi, fold_const(bits)) ^ data
}

/// CRC-32 of `data` as the 512-bit loop computes it (from 256 bytes on;
/// the 128-bit model below that).
fn wide_folded_crc32(data: &[u8]) -> u32 {
    if data.len() < 256 {
        return folded_crc32(data);
    }
    let lane = |at: usize| u128::from_le_bytes(data[at..at + 16].try_into().unwrap());
    // zmm register r, quarter q: bytes 64r + 16q of each 256-byte block.
    let mut z: [[u128; 4]; 4] =
        std::array::from_fn(|r| std::array::from_fn(|q| lane(64 * r + 16 * q)));
    z[0][0] ^= 0xffff_ffff;
    let mut at = 256;
    while at + 256 <= data.len() {
        for (r, reg) in z.iter_mut().enumerate() {
            for (q, l) in reg.iter_mut().enumerate() {
                *l = fold(*l, 2048, lane(at + 64 * r + 16 * q));
            }
        }
        at += 256;
    }
    // The registers into the last: 0 onto 2 and 1 onto 3 (1024 bits),
    // then the first result onto the second (512 bits).
    let onto = |a: [u128; 4], bits: u32, b: [u128; 4]| -> [u128; 4] {
        std::array::from_fn(|q| fold(a[q], bits, b[q]))
    };
    let mut one = onto(onto(z[0], 1024, z[2]), 512, onto(z[1], 1024, z[3]));
    // The last whole 64-byte blocks.
    while at + 64 <= data.len() {
        for (q, l) in one.iter_mut().enumerate() {
            *l = fold(*l, 512, lane(at + 16 * q));
        }
        at += 64;
    }
    // 64 bytes to 16 (each quarter folded onto the last at once), then
    // through the CRC from 0, then the rest.
    let last = fold(one[0], 384, 0) ^ fold(one[1], 256, 0) ^ fold(one[2], 128, 0) ^ one[3];
    !raw(raw(0, &last.to_le_bytes()), &data[at..])
}

#[test]
fn the_constants_match_the_polynomial() {
    // x^32 mod P is P without its top term; x^31 is itself.
    assert_eq!(xpow_mod(32), POLY & 0xffff_ffff);
    assert_eq!(xpow_mod(31), 1 << 31);
    // Each constant fits the top half of its u64 (degree below 32).
    for e in [
        128, 192, 256, 320, 384, 448, 512, 576, 1024, 1088, 2048, 2112,
    ] {
        assert_eq!(fold_const(e) & 0xffff_ffff, 0, "{e}");
    }
    // Folding agrees with multiplying out: x^e * x^f = x^(e+f) mod P.
    let mulmod = |a: u64, b: u64| {
        let mut p = clmul(a, b);
        for bit in (32..64).rev() {
            if p >> bit & 1 == 1 {
                p ^= (POLY as u128) << (bit - 32);
            }
        }
        p as u64
    };
    assert_eq!(mulmod(xpow_mod(300), xpow_mod(276)), xpow_mod(576));
}

#[test]
fn folding_matches_crc32fast() {
    let data = ilp::table4::random_bytes(5000, 0x1234_5678_9abc_def1);
    let mut lens: Vec<usize> = (0..=1100).collect();
    lens.extend([2047, 2048, 2049, 4095, 4096, 4097, 4351, 5000]);
    type Model = fn(&[u8]) -> u32;
    let models: [(&str, Model); 2] = [("128-bit", folded_crc32), ("512-bit", wide_folded_crc32)];
    for (name, model) in models {
        for &n in &lens {
            assert_eq!(
                model(&data[..n]),
                crc32fast::hash(&data[..n]),
                "{name} len {n}"
            );
        }
        assert_eq!(model(b"123456789"), 0xcbf4_3926, "{name}");
    }
}
