//! The code generator: one fused loop for a step list, written against
//! vcode's client interface (generic over the backend, so the same code
//! runs natively and on vcode's reference backend).
//!
//! The generated function is `extern "C" fn(*mut Frame)`. It processes the
//! buffer in three parts, reading every source byte once and writing every
//! destination byte once:
//!
//! 1. blocks of 64 bytes: eight 64-bit words, unrolled, in groups of up to
//!    four words held in registers; for each group the steps run in list
//!    order on the registers (`bswap16x4`, `bswap32x2`, an `xor` with the
//!    expanded key, `add1c4` into one of two alternating checksum
//!    accumulators, `crc32x8`), then the group is stored;
//! 2. the remaining whole words, one at a time, with the same step code;
//! 3. the last 1 to 7 bytes, gathered into a zero-padded word: the byte
//!    swaps apply to whole units only (masks keep a partial unit as it
//!    was), the xor result is masked to the real bytes, the checksum adds
//!    the padded word, the CRC advances byte by byte (`ldtab32`), and the
//!    bytes are stored one by one.
//!
//! Loads and stores are unaligned 64-bit accesses at any address, so
//! every alignment of `src` and `dst` takes the same path.
//!
//! With a copy, the blocks loop is generated twice: once with ordinary
//! stores, once with non-temporal ones (`stnt`, vcode's `movnti`, and an
//! `sfence` after the loop), which write whole lines to memory without
//! first reading them into the cache. `Frame::nt` picks one at run time:
//! a buffer far larger than the caches then moves two bytes of memory
//! traffic per byte (read `src`, write `dst`) instead of three. That loop
//! also prefetches the source 1 KiB ahead (`prefetcht0`).
//!
//! For a CRC of the unchanged source (`[Copy, Crc32]`, `[Crc32, Copy]`,
//! `[Crc32]`) on a native backend whose CPU has PCLMULQDQ, the whole
//! blocks of a buffer of 128 bytes or more go through `clmul_blocks`
//! first: carry-less-multiply folding, 64 bytes per iteration.
//!
//! On a native backend whose CPU has AVX-512 (F and BW) or AVX2, buffers
//! of one iteration or more go through a vector loop before all of that,
//! four registers per iteration (vcode's `Wide` extensions, at the widest
//! the CPU has: 256 bytes in zmm registers, or 128 in ymm): for the CRC
//! lists when the CPU also has VPCLMULQDQ, `wide_clmul_blocks` (folding,
//! then a reduction in registers); for lists of copies, checksums and
//! byte swaps, `wide_blocks` (the checksum in 64-bit vector lanes, the
//! swaps by `vpshufb`). Each ends with `vzeroupper` and leaves the last
//! bytes short of an iteration (the CRC path: 0 to 63) to the code above.
//! `Pipeline::run_with` runs the bytes before `dst`'s first 64-byte
//! boundary as a buffer of their own when it can, so that these loops
//! store whole cache lines (and may store them non-temporally); the zmm
//! CRC loop with ordinary stores does that itself, with byte-masked
//! 512-bit loads and stores (`masked_head`).
//! Which loops exist is decided here, once per pipeline, from the CPU's
//! features; the reference backend gets none of them.

use vcode::ext::{Bswap, Clmul, NonTemporal, OnesComplement, Prefetch, TableLookup, Wide};
use vcode::{Backend, Class, D, Func, Label, Leaf, Operand, P, Reg, U, UL};

use crate::error::Error;
use crate::pipeline::Vectors;
use crate::step::StepKind;
use crate::tables::TABLES;

/// The argument block of a generated loop (one pointer argument, so every
/// pipeline has the same signature).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Frame {
    /// Source bytes.
    pub src: *const u8,
    /// Destination bytes (unused without a copy step).
    pub dst: *mut u8,
    /// Length of both.
    pub len: u64,
    /// The expanded xor key at the current phase (unused without xor).
    pub key: *const u8,
    /// The expanded key's start plus its period `L`.
    pub kend: *const u8,
    /// Out: the checksum accumulator (a 64-bit ones'-complement sum of the
    /// buffer's little-endian words).
    pub sum: u64,
    /// In and out: the inverted CRC register, zero-extended.
    pub crc: u64,
    /// Nonzero: store the 64-byte blocks with non-temporal stores; bit 1
    /// also set: `dst` is 16-byte aligned, so the folding CRC loop may
    /// store 16 bytes at a time non-temporally; bit 2 also set: `dst` is
    /// 64-byte aligned, so the 512-bit loops may store 64 bytes at a time
    /// non-temporally (without it, a non-temporal run skips them).
    pub nt: u64,
    /// The folding constants of the carry-less-multiply CRC: forward 512
    /// bits ([`FOLD_K`]), then 128 bits (the final reduction).
    pub fold_k: [u64; 4],
    /// Scratch: the four folded lanes at the end of the 128-bit folding
    /// loop.
    pub fold: [u64; 8],
}

/// The CRC-32 polynomial of IEEE 802.3, not reflected, with its x^32 term.
const POLY: u64 = 0x1_04c1_1db7;

/// `x^k mod P`, not reflected.
const fn xpow_mod(k: u32) -> u64 {
    let mut r: u64 = 1;
    let mut i = 0;
    while i < k {
        r <<= 1;
        if r & 1 << 32 != 0 {
            r ^= POLY;
        }
        i += 1;
    }
    r
}

/// The constants that fold a 128-bit lane of reflected data forward
/// `bits`: the low half (the higher-degree 64 coefficients) by
/// x^(bits + 64), the high half by x^bits. A carry-less product of
/// reflected operands comes out one degree high, so each is x^(e-1) mod
/// P, reflected into the top half of a u64. (`tests/clmul_fold.rs` checks
/// the same derivation against `crc32fast`.)
const fn fold_k(bits: u32) -> [u64; 2] {
    [
        xpow_mod(bits + 64 - 1).reverse_bits(),
        xpow_mod(bits - 1).reverse_bits(),
    ]
}

/// Folding forward 512 bits: one 64-byte block.
pub(crate) const FOLD_K: [u64; 2] = fold_k(512);

/// `Frame::fold_k`: [`FOLD_K`], then folding forward 128 bits.
pub(crate) const FRAME_FOLD_K: [u64; 4] = {
    let k = fold_k(128);
    [FOLD_K[0], FOLD_K[1], k[0], k[1]]
};

/// The constants of the vector folding loop for registers of `N` 64-bit
/// words (8: zmm, 4: ymm), by row (one register each), each pair repeated
/// for every 128-bit lane of the register: forward four registers (one
/// iteration: 2048 bits for zmm, 1024 for ymm); two registers (a lane
/// onto the one two further); one register (onto the next, and the last
/// 64-byte blocks); then per 128-bit lane the distance to the last lane
/// (zmm: 384, 256, 128 and 0 bits; ymm: 128 and 0), whose constant is 0;
/// and a mask of the last 128-bit lane.
const fn wide_k<const N: usize>() -> [[u64; N]; 5] {
    let bits = 64 * N as u32;
    let rows = [fold_k(4 * bits), fold_k(2 * bits), fold_k(bits)];
    let mut t = [[0u64; N]; 5];
    let mut j = 0;
    while j < N {
        let mut r = 0;
        while r < 3 {
            t[r][j] = rows[r][j % 2];
            r += 1;
        }
        j += 1;
    }
    let lanes = N / 2;
    let mut q = 0;
    while q + 1 < lanes {
        let k = fold_k(128 * (lanes - 1 - q) as u32);
        t[3][2 * q] = k[0];
        t[3][2 * q + 1] = k[1];
        q += 1;
    }
    t[4][N - 2] = !0;
    t[4][N - 1] = !0;
    t
}

/// [`wide_k`] of zmm registers (AVX-512).
static WIDE_K_512: [[u64; 8]; 5] = wide_k::<8>();
/// [`wide_k`] of ymm registers (AVX2).
static WIDE_K_256: [[u64; 4]; 5] = wide_k::<4>();

const OFF_SRC: i64 = 0;
const OFF_DST: i64 = 8;
const OFF_LEN: i64 = 16;
const OFF_KEY: i64 = 24;
const OFF_KEND: i64 = 32;
const OFF_SUM: i64 = 40;
const OFF_CRC: i64 = 48;
const OFF_NT: i64 = 56;
const OFF_FOLD_K: i32 = 64;
const OFF_FOLD: i32 = 96;

/// How far ahead of the source pointer the non-temporal 64-byte blocks
/// loop prefetches.
const PREFETCH_AHEAD: i32 = 1024;

/// How far ahead the non-temporal vector loops prefetch (one `prefetcht0`
/// per 64 bytes): 4 KiB measured 1-3% faster than 1 KiB and 2 KiB, and
/// 8 KiB no better, over 512 MiB buffers (`examples/membw.rs`);
/// `prefetchnta` was 5-10% slower, no prefetch about 7% slower.
const STREAM_AHEAD: i32 = 4096;

/// Bytes per unrolled block.
pub(crate) const BLOCK: i64 = 64;

/// Bytes per iteration of the 512-bit loops: four zmm registers (the
/// masked head's first group).
const ZMM_ITER: i64 = 256;

/// The most bytes the vector checksum loop adds up before folding its
/// 64-bit lanes: a lane must add fewer than 2^32 words (2^38 bytes) for
/// its sums to stay exact; 64 KiB keeps the fold rare (under 1% of a
/// chunk's time) and lets the tests cover buffers of several chunks.
const WIDE_SUM_CHUNK: i64 = 1 << 16;

/// The xor key's period in the expanded key: the smallest multiple of the
/// key length that is at least one block, so that one subtraction after a
/// block's advance brings the key pointer back into `[0, L)`.
pub(crate) fn key_period(key_len: usize) -> usize {
    key_len * (BLOCK as usize).div_ceil(key_len)
}

const M16: u64 = 0x00ff_00ff_00ff_00ff;

/// The registers of the loop.
struct Regs {
    s: Reg<P>,
    d: Option<Reg<P>>,
    acc: Option<Reg<UL>>,
    acc2: Option<Reg<UL>>,
    crc: Option<(Reg<UL>, Reg<UL>)>,
    key: Option<(Reg<P>, Reg<P>, i64)>,
    mask: Option<Reg<UL>>,
    k: Option<Reg<UL>>,
    words: Vec<Reg<UL>>,
}

fn imm<T>(v: i64) -> Operand<T> {
    Operand::Imm(v)
}

fn temp<B: Backend, T: vcode::Type>(f: &mut Func<B>) -> vcode::Result<Reg<T>> {
    f.getreg::<T>(Class::Temp)
}

/// A temporary, or a callee-saved register when the loop's words took the
/// last temporaries (the vector paths need a pointer or two more).
fn any_reg<B: Backend, T: vcode::Type>(f: &mut Func<B>) -> vcode::Result<Reg<T>> {
    f.getreg::<T>(Class::Temp)
        .or_else(|_| f.getreg::<T>(Class::Persistent))
}

/// Generates the fused loop for `kinds` (a validated list), leaving
/// `spare` registers free for extension instructions whose portable
/// definitions need temporaries (the reference backend runs those; the
/// native mappings use only the registers the backend keeps). Also says
/// whether the code has a 512-bit loop (the caller then aligns `dst` for
/// it: see `Pipeline::run_with`), and whether that loop aligns its stores
/// itself with the masked head of the CRC path (see [`masked_head`]).
pub(crate) fn generate<B: Backend>(
    kinds: &[StepKind],
    spare: usize,
    vectors: Vectors,
) -> Result<(B::Code, bool, bool), Error> {
    let has = |k: StepKind| kinds.contains(&k);
    let key_len = kinds.iter().find_map(|k| match k {
        StepKind::Xor(n) => Some(*n as usize),
        _ => None,
    });
    let mut f = Func::<B>::with_backend();
    // Whether the ymm/zmm loops may be generated, at the width they take.
    let vector_loops = match vectors {
        Vectors::Widest => true,
        // Every CPU with AVX-512 has AVX2.
        Vectors::Ymm => f.wide_bits() <= 256 || f.set_wide_bits(256),
        Vectors::Xmm => false,
    };
    let params = f.lambda("%p", Leaf::Yes)?;
    f.name(format!("ilp{kinds:?}"));
    let a = params.get::<P>(0)?;
    let la = f.local::<P>();
    f.st_local(a, la);
    // The store flag, kept in a local until the blocks loop.
    let lnt = f.local::<UL>();
    if has(StepKind::Copy) {
        let t = temp::<B, UL>(&mut f)?;
        f.ld(t, a, imm(OFF_NT));
        f.st_local(t, lnt);
        f.putreg(t);
    }

    // Registers that live through the loops.
    let s = temp::<B, P>(&mut f)?;
    f.ld(s, a, imm(OFF_SRC));
    let d = if has(StepKind::Copy) {
        let d = temp::<B, P>(&mut f)?;
        f.ld(d, a, imm(OFF_DST));
        Some(d)
    } else {
        None
    };
    let acc = if has(StepKind::Checksum) {
        let r = temp::<B, UL>(&mut f)?;
        f.set(r, 0);
        Some(r)
    } else {
        None
    };
    let crc = if has(StepKind::Crc32) {
        let (c, t) = (temp::<B, UL>(&mut f)?, temp::<B, UL>(&mut f)?);
        f.ld(c, a, imm(OFF_CRC));
        f.set(t, TABLES.as_ptr() as u64);
        Some((c, t))
    } else {
        None
    };
    let key = match key_len {
        Some(n) => {
            let (kp, kend) = (temp::<B, P>(&mut f)?, temp::<B, P>(&mut f)?);
            f.ld(kp, a, imm(OFF_KEY));
            f.ld(kend, a, imm(OFF_KEND));
            Some((kp, kend, key_period(n) as i64))
        }
        None => None,
    };
    let mask = if has(StepKind::Bswap16) {
        let m = temp::<B, UL>(&mut f)?;
        f.set(m, M16);
        Some(m)
    } else {
        None
    };
    // The end of the whole blocks: s + (len & -64).
    let end = temp::<B, P>(&mut f)?;
    f.ld(end, a, imm(OFF_LEN));
    f.and(end, end, imm(-BLOCK));
    f.add(end, end, s);
    // The argument pointer is reloaded from its local when needed.
    f.putreg(a);
    let k = if key.is_some() {
        Some(temp::<B, UL>(&mut f)?)
    } else {
        None
    };
    // The rest: `spare` stay free, then up to four words and a second
    // checksum accumulator.
    let mut pool = Vec::new();
    while let Ok(r) = f.getreg::<UL>(Class::Temp) {
        pool.push(r);
    }
    for _ in 0..spare.min(pool.len()) {
        let r = pool.pop().unwrap();
        f.putreg(r);
    }
    if pool.is_empty() {
        return Err(Error::OutOfRegisters);
    }
    let n = match pool.len() {
        1 => 1,
        2 | 3 => 2,
        _ => 4,
    };
    let words: Vec<Reg<UL>> = pool.drain(..n).collect();
    let acc2 = match acc {
        Some(_) => pool.pop(),
        None => None,
    };
    for r in pool {
        f.putreg(r);
    }
    if let Some(r) = acc2 {
        f.set(r, 0);
    }
    let regs = Regs {
        s,
        d,
        acc,
        acc2,
        crc,
        key,
        mask,
        k,
        words,
    };
    let g = regs.words.len() as i64;

    // 0. A CRC of the unchanged source, with a copy or none, folds by
    // carry-less multiplication when the CPU can.
    let fold_list = matches!(
        kinds,
        [StepKind::Copy, StepKind::Crc32] | [StepKind::Crc32, StepKind::Copy] | [StepKind::Crc32]
    );
    let mut wide = false;
    let mut masked_head = false;
    if vector_loops && fold_list && f.wide_clmul_available() {
        wide_clmul_blocks(&mut f, &regs, la, lnt, end)?;
        wide = true;
        masked_head = d.is_some() && f.wide_bits() == 512;
    }
    if fold_list && f.clmul_available() {
        clmul_blocks(&mut f, &regs, la, lnt, end)?;
    }
    // Copies, checksums and byte swaps take four vector registers per
    // iteration when the CPU can.
    if vector_loops && wide_list(kinds) && f.wide_available() {
        wide_blocks(&mut f, kinds, &regs, lnt, end)?;
        wide = true;
    }

    // 1. Blocks of 64 bytes: with a copy, the non-temporal loop when the
    // frame asks for it.
    let (top, blocks_done) = (f.genlabel(), f.genlabel());
    f.bge(s, end, blocks_done);
    let nt_top = f.genlabel();
    if d.is_some() {
        f.ld_local(regs.words[0], lnt);
        f.bne(regs.words[0], imm(0), nt_top);
    }
    f.label(top);
    for grp in 0..BLOCK / (8 * g) {
        group(
            &mut f,
            kinds,
            &regs,
            grp * 8 * g,
            g as usize,
            grp % 2 == 1,
            false,
        );
    }
    advance(&mut f, &regs, BLOCK);
    f.blt(s, end, top);
    if d.is_some() {
        f.jmp(blocks_done);
        f.label(nt_top);
        // The source 1 KiB ahead (prefetches never fault past the end).
        f.prefetch(s, PREFETCH_AHEAD, false);
        for grp in 0..BLOCK / (8 * g) {
            group(
                &mut f,
                kinds,
                &regs,
                grp * 8 * g,
                g as usize,
                grp % 2 == 1,
                true,
            );
        }
        advance(&mut f, &regs, BLOCK);
        f.blt(s, end, nt_top);
        // The non-temporal stores are weakly ordered: fence them before
        // the caller (or another thread it signals) sees the data.
        f.sfence();
    }
    f.label(blocks_done);

    // 2. Whole words: end = s + (len & 56).
    let (wtop, words_done) = (f.genlabel(), f.genlabel());
    f.ld_local(end, la);
    f.ld(end, end, imm(OFF_LEN));
    f.and(end, end, imm(BLOCK - 8));
    f.add(end, end, s);
    f.bge(s, end, words_done);
    f.label(wtop);
    group(&mut f, kinds, &regs, 0, 1, false, false);
    advance(&mut f, &regs, 8);
    f.blt(s, end, wtop);
    f.label(words_done);
    f.putreg(end);
    if let (Some(acc), Some(acc2)) = (acc, acc2) {
        f.add1c(acc, acc, acc2);
        f.putreg(acc2);
    }
    for &w in &regs.words {
        f.putreg(w);
    }
    if let Some(k) = k {
        f.putreg(k);
    }
    if let Some((_, kend, _)) = key {
        f.putreg(kend);
    }
    if let Some(m) = mask {
        f.putreg(m);
    }

    // 3. The last 1 to 7 bytes.
    let done = f.genlabel();
    tail(&mut f, kinds, &regs, la, done)?;
    f.label(done);

    let a = temp::<B, P>(&mut f)?;
    f.ld_local(a, la);
    if let Some(acc) = acc {
        f.st(acc, a, imm(OFF_SUM));
    }
    if let Some((c, _)) = crc {
        f.st(c, a, imm(OFF_CRC));
    }
    f.retv();
    Ok((f.end()?, wide, masked_head))
}

/// The CRC by folding (see `docs/ilp.md`), for buffers of two blocks or
/// more: four 128-bit lanes in xmm registers take the first 64 bytes (the
/// CRC register XORed into the first four), each further block folds every
/// lane forward 512 bits and XORs in its next 16 bytes (`clfold`), and the
/// bytes are copied from the registers that loaded them. The lanes, as 64
/// bytes of message, then go through the CRC from 0 with the last whole
/// 16-byte words folded in ([`crc_of_fold`]); the words and tail code that
/// follow continue from there (no whole block is left for the blocks
/// loop).
fn clmul_blocks<B: Backend>(
    f: &mut Func<B>,
    r: &Regs,
    la: vcode::Local<P>,
    lnt: vcode::Local<UL>,
    end: Reg<P>,
) -> Result<(), Error> {
    let skip = f.genlabel();
    let p = temp::<B, P>(f)?;
    f.add(p, r.s, imm(2 * BLOCK));
    f.bgt(p, end, skip);
    let x = vregs(f, 6)?;
    let (lanes, k, t) = (&x[..4], x[4], x[5]);
    f.ld_local(p, la);
    f.ldx(k, p, OFF_FOLD_K);
    fold_lanes(f, r, lnt, Width::X, lanes, k, t, end, None);
    f.ld_local(p, la);
    for (i, &l) in lanes.iter().enumerate() {
        f.stx(l, p, OFF_FOLD + 16 * i as i32);
    }
    crc_of_fold(f, r, la, end, p, [x[0], k, t]);
    path_end(f, x, &[p], skip);
    Ok(())
}

/// The 64 folded bytes at `frame.fold` (frame at `p`), as message,
/// through the CRC from 0 into `c`: the end of the 128-bit folding loop.
/// Three 128-bit folds (`clfold` with `frame.fold_k`'s second pair, in xmm
/// registers `x`: a lane, the constant, scratch) take them to 16 bytes
/// with the same CRC, the whole 16-byte words of the last `len % 64`
/// bytes fold into those ([`fold_tail`]), and two table steps finish.
fn crc_of_fold<B: Backend>(
    f: &mut Func<B>,
    r: &Regs,
    la: vcode::Local<P>,
    end: Reg<P>,
    p: Reg<P>,
    x: [Reg<D>; 3],
) {
    let (c, tab) = r.crc.expect("a CRC list");
    let [lane, k, t] = x;
    f.ldx(lane, p, OFF_FOLD);
    f.ldx(k, p, OFF_FOLD_K + 16);
    for i in 1..4 {
        f.clfold(lane, k, t, p, OFF_FOLD + 16 * i);
    }
    fold_tail(f, r, la, end, p, x);
    f.stx(lane, p, OFF_FOLD);
    f.set(c, 0);
    let w = r.words[0];
    for j in 0..2 {
        f.ld(w, p, imm(OFF_FOLD as i64 + 8 * j));
        f.crc32x8(c, c, w, tab);
    }
}

/// The vector registers of a loop: xmm (128 bits, `Clmul`), or those of
/// vcode's `Wide` extensions (ymm or zmm, whichever the CPU has widest),
/// with their size in bytes (32 or 64).
#[derive(Copy, Clone, PartialEq, Eq)]
enum Width {
    X,
    V(i32),
}

impl Width {
    /// The `Wide` registers of this function.
    fn wide<B: Backend>(f: &mut Func<B>) -> Width {
        Width::V(f.wide_bits() as i32 / 8)
    }

    fn bytes(self) -> i32 {
        match self {
            Width::X => 16,
            Width::V(n) => n,
        }
    }

    /// Bytes per iteration of a loop over four registers.
    fn iter(self) -> i64 {
        4 * self.bytes() as i64
    }

    /// The load of `x` from `[base + off]`.
    fn ld<B: Backend>(self, f: &mut Func<B>, x: Reg<D>, base: Reg<P>, off: i32) {
        match self {
            Width::X => f.ldx(x, base, off),
            Width::V(_) => f.ldz(x, base, off),
        }
    }

    /// The store of `x` to `[base + off]`, non-temporal when `nt`.
    fn st<B: Backend>(self, f: &mut Func<B>, x: Reg<D>, base: Reg<P>, off: i32, nt: bool) {
        match (self, nt) {
            (Width::X, false) => f.stx(x, base, off),
            (Width::X, true) => f.stxnt(x, base, off),
            (Width::V(_), false) => f.stz(x, base, off),
            (Width::V(_), true) => f.stznt(x, base, off),
        }
    }

    /// The `zextract`s that halve a `Wide` register down to its first
    /// 128-bit lane: zmm halves, then quarters; ymm halves.
    fn halvings(self) -> &'static [(u32, u8)] {
        match self {
            Width::V(64) => &[(256, 1), (128, 1)],
            _ => &[(128, 1)],
        }
    }
}

/// The folding loop of both widths: the lanes take the first `4 w` bytes
/// (the CRC register XORed into the first four), stored to `dst` from the
/// registers that loaded them; then per further `4 w` bytes while `s <
/// lim`, each lane folds forward by that distance (`k`) and takes its
/// next `w` bytes (left in `t`, and stored from there; non-temporally when
/// the frame's store flag has bit 1 for xmm, bit 2 for zmm). With `go`,
/// the loop starts there (a label the caller's own first group jumps to:
/// the masked head of [`wide_clmul_blocks`]).
#[allow(clippy::too_many_arguments)]
fn fold_lanes<B: Backend>(
    f: &mut Func<B>,
    r: &Regs,
    lnt: vcode::Local<UL>,
    w: Width,
    lanes: &[Reg<D>],
    k: Reg<D>,
    t: Reg<D>,
    lim: Reg<P>,
    go: Option<Label>,
) {
    let n = w.bytes();
    let c = r.crc.expect("a CRC list").0;
    for (i, &l) in lanes.iter().enumerate() {
        let off = n * i as i32;
        w.ld(f, l, r.s, off);
        if let Some(d) = r.d {
            w.st(f, l, d, off, false);
        }
    }
    match w {
        Width::X => f.xorq(lanes[0], c),
        Width::V(_) => f.zxorq(lanes[0], c),
    }
    let step = w.iter();
    advance(f, r, step);
    if let Some(go) = go {
        f.label(go);
    }
    let bit = if w == Width::X { 2 } else { 4 };
    store_loops(f, r, lnt, bit, step, lim, |f, nt| {
        for (i, &l) in lanes.iter().enumerate() {
            let off = n * i as i32;
            match w {
                Width::X => f.clfold(l, k, t, r.s, off),
                Width::V(_) => f.zfold(l, k, t, r.s, off),
            }
            if let Some(d) = r.d {
                w.st(f, t, d, off, nt);
            }
        }
    });
}

/// A vector instruction `zd = a op b`.
type VecOp<B> = fn(&mut Func<B>, Reg<D>, Reg<D>, Reg<D>);

/// Combines the 128-bit lanes of the `Wide` register `x` with `op` into
/// its first (zmm: its upper half into the lower, then lane 1 into 0;
/// ymm: lane 1 into 0; through `t`).
fn to_first_lane<B: Backend>(f: &mut Func<B>, w: Width, x: Reg<D>, t: Reg<D>, op: VecOp<B>) {
    for &(bits, i) in w.halvings() {
        f.zextract(t, x, bits, i);
        op(f, x, x, t);
    }
}

/// `n` vector registers for a vector path.
fn vregs<B: Backend>(f: &mut Func<B>, n: usize) -> Result<Vec<Reg<D>>, Error> {
    (0..n).map(|_| Ok(f.getreg::<D>(Class::Temp)?)).collect()
}

/// The end of a vector path: its registers given back, then the label its
/// entry test skips to.
fn path_end<B: Backend>(f: &mut Func<B>, z: Vec<Reg<D>>, ps: &[Reg<P>], skip: Label) {
    for x in z {
        f.putreg(x);
    }
    for &p in ps {
        f.putreg(p);
    }
    f.label(skip);
}

/// `Frame::nt & mask` in the first word register.
fn store_flag<B: Backend>(f: &mut Func<B>, r: &Regs, lnt: vcode::Local<UL>, mask: i64) -> Reg<UL> {
    let w = r.words[0];
    f.ld_local(w, lnt);
    f.and(w, w, imm(mask));
    w
}

/// The loop of a vector path: `body(f, nt)` then an advance by `step`,
/// while `s < lim` (nothing when it is not). With a copy it exists twice:
/// with ordinary stores, and, when the frame's store flag has `bit`, with
/// non-temporal ones (`nt`), a prefetch of the source [`STREAM_AHEAD`]
/// ahead per 64 bytes, and an `sfence` after.
fn store_loops<B: Backend>(
    f: &mut Func<B>,
    r: &Regs,
    lnt: vcode::Local<UL>,
    bit: i64,
    step: i64,
    lim: Reg<P>,
    mut body: impl FnMut(&mut Func<B>, bool),
) {
    let (top, nt_top, done) = (f.genlabel(), f.genlabel(), f.genlabel());
    f.bge(r.s, lim, done);
    if r.d.is_some() {
        let w = store_flag(f, r, lnt, bit);
        f.bne(w, imm(0), nt_top);
    }
    for nt in [false, true] {
        if nt && r.d.is_none() {
            break;
        }
        f.label(if nt { nt_top } else { top });
        if nt {
            for i in 0..step / BLOCK {
                f.prefetch(r.s, STREAM_AHEAD + (BLOCK * i) as i32, false);
            }
        }
        body(f, nt);
        advance(f, r, step);
        f.blt(r.s, lim, if nt { nt_top } else { top });
        if nt {
            f.sfence();
        } else if r.d.is_some() {
            f.jmp(done);
        }
    }
    f.label(done);
}

/// What [`wide_entry`] hands a vector path: its skip label, its limit,
/// its vector registers.
type WidePath = (Label, Reg<P>, Vec<Reg<D>>);

/// The entry test of a `Wide` loop of width `w`: at least one iteration
/// (four registers: 256 bytes for zmm, 128 for ymm), and with a copy,
/// stores the loop can make (non-temporal vector stores need an aligned
/// `dst`: store flag 1 without bit 2 takes the narrower path). Returns the
/// label that skips the path, `end - (iteration - 64)` (the loop's limit:
/// a whole iteration left while `s` is below it) and `n` vector
/// registers.
fn wide_entry<B: Backend>(
    f: &mut Func<B>,
    r: &Regs,
    lnt: vcode::Local<UL>,
    end: Reg<P>,
    w: Width,
    n: usize,
) -> Result<WidePath, Error> {
    let skip = f.genlabel();
    let lim = any_reg::<B, P>(f)?;
    f.add(lim, r.s, imm(w.iter()));
    f.bgt(lim, end, skip);
    if r.d.is_some() {
        let w = store_flag(f, r, lnt, 5);
        f.beq(w, imm(1), skip);
    }
    f.sub(lim, end, imm(w.iter() - BLOCK));
    Ok((skip, lim, vregs(f, n)?))
}

/// The CRC by folding four vector registers per iteration (see
/// `docs/ilp.md`), for buffers of one iteration or more on a CPU with
/// VPCLMULQDQ and AVX-512F (zmm: 256 bytes per iteration) or AVX2 (ymm:
/// 128 bytes): four lanes (`ldz`, the CRC register XORed into the first
/// four bytes with `zxorq`) take the first iteration's bytes, and each
/// further iteration folds every 128-bit lane forward by its length
/// (`zfold`), the data stored from the registers that loaded it
/// (`vmovntdq` in the non-temporal loop, frame bit 2). Then the lanes
/// fold into one (`zfoldr`: lanes 0 and 1 forward two registers onto 2 and
/// 3, then the first result one register onto the second), the remaining
/// whole 64-byte blocks fold into it a register at a time, its 128-bit
/// lanes (zmm: four, the four lanes of `clmul_blocks`; ymm: two) fold onto
/// the last at once and are XORed together (`zextract`), the whole 16-byte
/// words of the last `len % 64` bytes fold into them ([`fold_tail`]), and
/// the 16 bytes left, moved to two registers (`zmovq`), take two table
/// steps from 0.
///
/// With zmm, a copy and ordinary stores, a `dst` that is not 64-byte
/// aligned takes the masked head when it can (see [`masked_head`]), so that
/// the loop's stores are whole lines; AVX2 has no byte-masked moves.
fn wide_clmul_blocks<B: Backend>(
    f: &mut Func<B>,
    r: &Regs,
    la: vcode::Local<P>,
    lnt: vcode::Local<UL>,
    end: Reg<P>,
) -> Result<(), Error> {
    let w = Width::wide(f);
    let vb = w.bytes();
    let (skip, lim, z) = wide_entry(f, r, lnt, end, w, 6)?;
    let (lanes, k, t) = (&z[..4], z[4], z[5]);
    let kp = any_reg::<B, P>(f)?;
    let table = match w {
        Width::V(64) => WIDE_K_512.as_ptr() as usize,
        _ => WIDE_K_256.as_ptr() as usize,
    };
    let go = match r.d {
        Some(d) if vb == 64 => {
            let (plain, go) = (f.genlabel(), f.genlabel());
            masked_head(f, r, la, lnt, end, lim, kp, d, lanes, t, plain);
            f.set(kp, table);
            f.ldz(k, kp, 0);
            f.jmp(go);
            f.label(plain);
            Some(go)
        }
        _ => None,
    };
    f.set(kp, table);
    f.ldz(k, kp, 0);
    fold_lanes(f, r, lnt, w, lanes, k, t, lim, go);
    // The lanes into the last: 0 onto 2 and 1 onto 3 (independent), then
    // that onto 3.
    f.ldz(k, kp, vb);
    f.zfoldr(lanes[0], k, lanes[2]);
    f.zfoldr(lanes[1], k, lanes[3]);
    f.ldz(k, kp, 2 * vb);
    f.zfoldr(lanes[0], k, lanes[1]);
    let one = lanes[0];
    // The last whole blocks (ordinary stores): 0 to 3 after zmm, 0 or 1
    // after ymm.
    let (btop, bdone) = (f.genlabel(), f.genlabel());
    f.bge(r.s, end, bdone);
    f.label(btop);
    for off in (0..BLOCK as i32).step_by(vb as usize) {
        f.zfold(one, k, t, r.s, off);
        if let Some(d) = r.d {
            f.stz(t, d, off);
        }
    }
    advance(f, r, BLOCK);
    f.blt(r.s, end, btop);
    f.label(bdone);
    // One register to 16 bytes with the same CRC: its 128-bit lanes but
    // the last folded onto the last, then all XORed together.
    f.ldz(k, kp, 3 * vb);
    f.ldz(t, kp, 4 * vb);
    f.zand(t, t, one);
    f.zfoldr(one, k, t);
    to_first_lane(f, w, one, t, Func::zxor);
    f.vzeroupper();
    // Row 3's next-to-last lane: forward 128 bits.
    f.ldx(k, kp, 3 * vb + vb - 32);
    fold_tail(f, r, la, end, kp, [one, k, t]);
    let (w0, w1) = (r.words[0], r.words[1]);
    f.zmovq(w0, one, 0);
    f.zmovq(w1, one, 1);
    let (c, tab) = r.crc.expect("a CRC list");
    f.set(c, 0);
    f.crc32x8(c, c, w0, tab);
    f.crc32x8(c, c, w1, tab);
    path_end(f, z, &[kp, lim], skip);
    Ok(())
}

/// The folding tail of both folding loops, once their lanes are reduced
/// to 16 bytes in `x[0]` and `s` is at `end`: the whole 16-byte words of
/// the last `len % 64` bytes fold into them (`clfold` with `x[1]`, which
/// the caller loads with the constants that fold forward 128 bits; the
/// loaded bytes left in `x[2]` and stored from there), so that the narrow
/// code's table steps take at most 15 bytes instead of 63. `Frame::len`
/// loses bits 4 and 5 (the words and tail code read only its low six
/// bits), `end` ends where the folded words do, and `kp` is left holding
/// the frame pointer. In the 512-bit path after `vzeroupper`: the
/// legacy-SSE `clfold` then pays no transition.
fn fold_tail<B: Backend>(
    f: &mut Func<B>,
    r: &Regs,
    la: vcode::Local<P>,
    end: Reg<P>,
    kp: Reg<P>,
    x: [Reg<D>; 3],
) {
    let [one, k, t] = x;
    // One word register: a list may have only one.
    let w = r.words[0];
    f.ld_local(kp, la);
    f.ld(w, kp, imm(OFF_LEN));
    f.and(w, w, imm(BLOCK - 16));
    // The path is native-only: `Reg::phys` retypes without bookkeeping.
    f.add(end, r.s, Reg::<P>::phys(w.num()));
    f.ld(w, kp, imm(OFF_LEN));
    f.and(w, w, imm(!(BLOCK - 16)));
    f.st(w, kp, imm(OFF_LEN));
    let (top, done) = (f.genlabel(), f.genlabel());
    f.bge(r.s, end, done);
    f.label(top);
    f.clfold(one, k, t, r.s, 0);
    if let Some(d) = r.d {
        f.stx(t, d, 0);
    }
    advance(f, r, 16);
    f.blt(r.s, end, top);
    f.label(done);
}

/// The masked head of [`wide_clmul_blocks`] (see `docs/ilp.md`, "The
/// masked head"): with ordinary stores, `o = dst % 64` in 4..=60 (a head
/// of `h = 64 - o` bytes, at least 4) and `len >= h + 256`, the first
/// group's lane 0 is the 64 bytes `zeros(o) || src[0..h]`, loaded from
/// `src - o` with the byte mask of the top `h` bytes (`ldzm`: the `o`
/// bytes before `src` are not read), and `src[0..h]` is stored to
/// `dst[0..h]` with the same mask at `dst - o` (a line boundary; `stzm`
/// writes nothing before `dst`). Lanes 1 to 3 take `src[h..h + 192]` as
/// usual, so every later store is line-aligned. Not when it would leave
/// the narrow code's table steps more than `len / 256` more bytes at the
/// end. The CRC of `zeros(o) ||
/// src` from state 0 is that of `src` from state 0 (leading zeros leave
/// it 0), so the CRC register goes in at byte `o` of lane 0 instead of
/// byte 0: built in the frame's fold area (zeroed, the register's 32 bits
/// stored at `o`) and XORed in. Then `Frame::len` becomes the length after
/// the first group and `end` and `lim` are computed from it, so the loops
/// and the words and tail code after them go on from `src + h + 192` as
/// from the start of a buffer. Otherwise (non-temporal stores, `o` 0 or
/// above 60, a shorter buffer, too long an end) it branches to `plain`, today's first
/// group; the caller follows it with the loop's constants and a jump into
/// the loop. Uses `kp` as a scratch pointer.
#[allow(clippy::too_many_arguments)]
fn masked_head<B: Backend>(
    f: &mut Func<B>,
    r: &Regs,
    la: vcode::Local<P>,
    lnt: vcode::Local<UL>,
    end: Reg<P>,
    lim: Reg<P>,
    kp: Reg<P>,
    d: Reg<P>,
    lanes: &[Reg<D>],
    t: Reg<D>,
    plain: Label,
) {
    let c = r.crc.expect("a CRC list").0;
    let (o, n) = (r.words[0], r.words[1]);
    // The same registers typed as a pointer offset and a 32-bit value (the
    // path is native-only: `Reg::phys` retypes without bookkeeping).
    let (op, np, c32, m) = (
        Reg::<P>::phys(o.num()),
        Reg::<P>::phys(n.num()),
        Reg::<U>::phys(c.num()),
        Reg::<UL>::phys(kp.num()),
    );
    let w = store_flag(f, r, lnt, 1);
    f.bne(w, imm(0), plain);
    f.cv::<P, UL>(o, d);
    f.and(o, o, imm(BLOCK - 1));
    f.beq(o, imm(0), plain);
    f.bgt(o, imm(BLOCK - 4), plain);
    // The head moves the last bytes after the folded blocks from len % 64
    // to (len + o) % 64: not when that adds more than len / 256 bytes (at
    // 4 KiB in cache, 16 more bytes still gained 4%, 32 lost 2-7%, 60 lost
    // 25%; from 16 KiB on it always pays). Measured when those bytes all
    // went through the table steps; since `fold_tail` folds their whole
    // 16-byte words, the rule may be stricter than it needs to be.
    f.ld_local(kp, la);
    f.ld(n, kp, imm(OFF_LEN));
    f.rsh(m, n, imm(8));
    f.and(n, n, imm(BLOCK - 1));
    f.add(m, m, n);
    f.add(n, n, o);
    f.and(n, n, imm(BLOCK - 1));
    f.bgt(n, m, plain);
    // len - h >= 256, i.e. len + o >= 320; n = len + o.
    f.ld_local(kp, la);
    f.ld(n, kp, imm(OFF_LEN));
    f.add(n, n, o);
    f.blt(n, imm(ZMM_ITER + BLOCK), plain);
    // What is left after the first group (len + o - 256) becomes the
    // frame's length, and the limits follow from it.
    f.sub(n, n, imm(ZMM_ITER));
    f.st(n, kp, imm(OFF_LEN));
    // The CRC register at byte o of 64 zero bytes (the frame's fold
    // area), into t.
    f.zxor(t, t, t);
    f.stz(t, kp, OFF_FOLD);
    f.add(kp, kp, op);
    f.st(c32, kp, imm(OFF_FOLD as i64));
    f.sub(kp, kp, op);
    f.ldz(t, kp, OFF_FOLD);
    // The mask: the top h = 64 - o bytes.
    f.set(n, u64::MAX);
    f.lsh(n, n, o);
    f.zmask(n);
    f.sub(r.s, r.s, op);
    f.sub(d, d, op);
    f.ldzm(lanes[0], r.s, 0);
    f.stzm(lanes[0], d, 0);
    f.zxor(lanes[0], lanes[0], t);
    for (i, &l) in lanes.iter().enumerate().skip(1) {
        let off = 64 * i as i32;
        f.ldz(l, r.s, off);
        f.stz(l, d, off);
    }
    advance(f, r, ZMM_ITER);
    // end = s + (left & -64), lim = end - 192.
    f.ld_local(kp, la);
    f.ld(n, kp, imm(OFF_LEN));
    f.and(n, n, imm(-BLOCK));
    f.add(end, r.s, np);
    f.sub(lim, end, imm(ZMM_ITER - BLOCK));
}

/// Whether a list has the vector copy loop: copies, checksums and byte
/// swaps only, with a copy or a checksum.
fn wide_list(kinds: &[StepKind]) -> bool {
    use StepKind::*;
    kinds
        .iter()
        .all(|k| matches!(k, Copy | Checksum | Bswap16 | Bswap32))
        && kinds.iter().any(|k| matches!(k, Copy | Checksum))
}

/// `vpshufb` indices of the byte swaps within each 128-bit lane: 16-bit
/// units, then 32-bit units (a ymm register loads the first half).
static SWAP_IDX: [[u8; 64]; 2] = {
    let mut t = [[0u8; 64]; 2];
    let mut j = 0;
    while j < 64 {
        t[0][j] = ((j % 16) ^ 1) as u8;
        t[1][j] = ((j % 16) ^ 3) as u8;
        j += 1;
    }
    t
};

/// The loop of [`wide_list`]s, four vector registers per iteration (zmm
/// on a CPU with AVX-512F and BW: 256 bytes; ymm with AVX2: 128), for
/// buffers of one iteration or more: each register's load goes through
/// the steps in list order (byte swaps: `vpshufb`), and is stored to
/// `dst` from the same register (`vmovntdq` in the non-temporal loop).
/// The checksum adds it as 64-bit words into `S` and their high
/// 32-bit halves into `H` (`vpaddq`, `vpsrlq`; two pairs, for alternate
/// registers). A lane that added `n < 2^32` words `w = lo + 2^32 hi`
/// holds `H = Σhi` exactly and `S = Σw mod 2^64`, so `S - (H << 32) = Σlo`
/// exactly; since `2^32 ≡ 1` modulo `2^16 - 1`, `Σlo + Σhi` is congruent
/// to the ones'-complement sum of the words the 16-bit checksum needs, and
/// it is 0 only when every word was. So every `WIDE_SUM_CHUNK` bytes the
/// lanes fold: their 32-bit halves added in the vector (below 2^34 per
/// lane), the eight or four lanes added (halves, quarters, then the last
/// two words in a register: below 2^37), that total end-around-added into
/// the checksum accumulator.
fn wide_blocks<B: Backend>(
    f: &mut Func<B>,
    kinds: &[StepKind],
    r: &Regs,
    lnt: vcode::Local<UL>,
    end: Reg<P>,
) -> Result<(), Error> {
    let w = Width::wide(f);
    let (skip, lim, z) = wide_entry(f, r, lnt, end, w, 12)?;
    let (t, sums, highs, u) = (&z[..4], [z[4], z[5]], [z[6], z[7]], [z[8], z[9]]);
    let swap = [z[10], z[11]];
    // The end of the blocks waits in a local, its register holding the
    // end of each chunk (a list with a checksum and swaps leaves no other).
    let saved_end = f.local::<P>();
    f.st_local(end, saved_end);
    let cend = end;
    f.set(cend, SWAP_IDX.as_ptr() as usize);
    f.ldz(swap[0], cend, 0);
    f.ldz(swap[1], cend, 64);
    let (outer, sized) = (f.genlabel(), f.genlabel());
    f.label(outer);
    if r.acc.is_some() {
        for &x in sums.iter().chain(&highs) {
            f.zxor(x, x, x);
        }
    }
    // cend = s + min(lim - s, chunk)
    f.sub(cend, lim, r.s);
    f.ble(cend, imm(WIDE_SUM_CHUNK), sized);
    f.set(cend, WIDE_SUM_CHUNK as usize);
    f.label(sized);
    f.add(cend, cend, r.s);
    store_loops(f, r, lnt, 4, w.iter(), cend, |f, nt| {
        for (i, &x) in t.iter().enumerate() {
            let off = w.bytes() * i as i32;
            f.ldz(x, r.s, off);
            for kind in kinds {
                match kind {
                    StepKind::Bswap16 => f.zshufb(x, x, swap[0]),
                    StepKind::Bswap32 => f.zshufb(x, x, swap[1]),
                    StepKind::Checksum => {
                        let (sm, hi, v) = (sums[i % 2], highs[i % 2], u[i % 2]);
                        f.zaddq(sm, sm, x);
                        f.zsrlq(v, x, 32);
                        f.zaddq(hi, hi, v);
                    }
                    _ => {}
                }
            }
            if let Some(d) = r.d {
                w.st(f, x, d, off, nt);
            }
        }
    });
    if let Some(acc) = r.acc {
        // Per lane: s = Σlo, h = Σhi; then s = halves(s) + halves(h).
        let (s, h, v) = (sums[0], highs[0], u[0]);
        f.zaddq(s, s, sums[1]);
        f.zaddq(h, h, highs[1]);
        f.zsllq(v, h, 32);
        f.zsubq(s, s, v);
        for x in [s, h] {
            f.zsrlq(v, x, 32);
            f.zsllq(x, x, 32);
            f.zsrlq(x, x, 32);
            f.zaddq(x, x, v);
        }
        f.zaddq(s, s, h);
        // The lanes.
        let (word, total) = (r.words[0], r.words[1]);
        to_first_lane(f, w, s, v, Func::zaddq);
        f.zmovq(total, s, 0);
        f.zmovq(word, s, 1);
        f.add(total, total, word);
        f.add1c(acc, acc, total);
    }
    f.blt(r.s, lim, outer);
    f.vzeroupper();
    f.ld_local(end, saved_end);
    path_end(f, z, &[lim], skip);
    Ok(())
}

/// Steps `g` words at `s + off` through the list; `odd` picks the second
/// checksum accumulator, `nt` non-temporal stores.
fn group<B: Backend>(
    f: &mut Func<B>,
    kinds: &[StepKind],
    r: &Regs,
    off: i64,
    g: usize,
    odd: bool,
    nt: bool,
) {
    let w = &r.words[..g];
    for (j, &wj) in w.iter().enumerate() {
        f.ld(wj, r.s, imm(off + 8 * j as i64));
    }
    for kind in kinds {
        match *kind {
            StepKind::Copy => {}
            StepKind::Xor(_) => {
                let (kp, _, _) = r.key.unwrap();
                let k = r.k.unwrap();
                for (j, &wj) in w.iter().enumerate() {
                    f.ld(k, kp, imm(off + 8 * j as i64));
                    f.xor(wj, wj, k);
                }
            }
            StepKind::Bswap16 => {
                let m = r.mask.unwrap();
                for &wj in w {
                    f.bswap16x4(wj, wj, m);
                }
            }
            StepKind::Bswap32 => {
                for &wj in w {
                    f.bswap32x2(wj, wj);
                }
            }
            StepKind::Checksum => {
                let acc = r.acc.unwrap();
                let pick = |second: bool| match (second, r.acc2) {
                    (true, Some(a2)) => a2,
                    _ => acc,
                };
                if g == 4 {
                    let a = pick(odd);
                    f.add1c4(a, a, w[0], w[1], w[2], w[3]);
                } else {
                    for (j, &wj) in w.iter().enumerate() {
                        let a = pick(j % 2 == 1);
                        f.add1c(a, a, wj);
                    }
                }
            }
            StepKind::Crc32 => {
                let (c, tab) = r.crc.unwrap();
                for &wj in w {
                    f.crc32x8(c, c, wj, tab);
                }
            }
        }
    }
    if let Some(d) = r.d {
        for (j, &wj) in w.iter().enumerate() {
            if nt {
                f.stnt(wj, d, (off + 8 * j as i64) as i32);
            } else {
                f.st(wj, d, imm(off + 8 * j as i64));
            }
        }
    }
}

/// Advances the pointers by `n` bytes, wrapping the key pointer into its
/// period.
fn advance<B: Backend>(f: &mut Func<B>, r: &Regs, n: i64) {
    f.add(r.s, r.s, imm(n));
    if let Some(d) = r.d {
        f.add(d, d, imm(n));
    }
    if let Some((kp, kend, period)) = r.key {
        let ok: Label = f.genlabel();
        f.add(kp, kp, imm(n));
        f.blt(kp, kend, ok);
        f.sub(kp, kp, imm(period));
        f.label(ok);
    }
}

/// The last `len & 7` bytes, as a zero-padded word (see the module docs).
fn tail<B: Backend>(
    f: &mut Func<B>,
    kinds: &[StepKind],
    r: &Regs,
    la: vcode::Local<P>,
    done: Label,
) -> vcode::Result<()> {
    let n = temp::<B, P>(f)?;
    f.ld_local(n, la);
    f.ld(n, n, imm(OFF_LEN));
    f.and(n, n, imm(7));
    f.beq(n, imm(0), done);

    // Gather: w = bytes s[n-1] .. s[0], little-endian.
    let w = temp::<B, UL>(f)?;
    {
        let (b, j) = (temp::<B, UL>(f)?, temp::<B, P>(f)?);
        let gather = f.genlabel();
        f.set(w, 0);
        f.mov(j, n);
        f.label(gather);
        f.sub(j, j, imm(1));
        f.lduc(b, r.s, j);
        f.lsh(w, w, imm(8));
        f.or(w, w, b);
        f.bne(j, imm(0), gather);
        f.putreg(j);
        f.putreg(b);
    }
    // bits = 8 * n
    let bits = temp::<B, UL>(f)?;
    f.cv::<P, UL>(bits, n);
    f.lsh(bits, bits, imm(3));
    f.putreg(n);

    for kind in kinds {
        match *kind {
            StepKind::Copy => {}
            StepKind::Xor(_) => {
                let (kp, _, _) = r.key.unwrap();
                let (k, v) = (temp::<B, UL>(f)?, temp::<B, UL>(f)?);
                f.ld(k, kp, imm(0));
                f.xor(w, w, k);
                // Only the real bytes: w &= (1 << bits) - 1.
                f.set(v, 1);
                f.lsh(v, v, bits);
                f.sub(v, v, imm(1));
                f.and(w, w, v);
                f.putreg(v);
                f.putreg(k);
            }
            StepKind::Bswap16 | StepKind::Bswap32 => {
                let (t, m, keep) = (temp::<B, UL>(f)?, temp::<B, UL>(f)?, temp::<B, UL>(f)?);
                let unit_bits = if *kind == StepKind::Bswap16 {
                    f.set(m, M16);
                    f.bswap16x4(t, w, m);
                    16
                } else {
                    f.bswap32x2(t, w);
                    32
                };
                // keep = the bytes of whole units: (1 << (bits & -unit)) - 1.
                f.and(m, bits, imm(-unit_bits));
                f.set(keep, 1);
                f.lsh(keep, keep, m);
                f.sub(keep, keep, imm(1));
                f.and(t, t, keep);
                f.com(keep, keep);
                f.and(w, w, keep);
                f.or(w, w, t);
                f.putreg(keep);
                f.putreg(m);
                f.putreg(t);
            }
            StepKind::Checksum => {
                let acc = r.acc.unwrap();
                f.add1c(acc, acc, w);
            }
            StepKind::Crc32 => {
                let (c, tab) = r.crc.unwrap();
                let (v, left, t) = (temp::<B, UL>(f)?, temp::<B, UL>(f)?, temp::<B, UL>(f)?);
                let byte = f.genlabel();
                f.mov(v, w);
                f.mov(left, bits);
                f.label(byte);
                // c = T0[(c ^ v) & 0xff] ^ (c >> 8)
                f.xor(t, c, v);
                f.ldtab32(t, tab, t);
                f.rsh(c, c, imm(8));
                f.xor(c, c, t);
                f.rsh(v, v, imm(8));
                f.sub(left, left, imm(8));
                f.bne(left, imm(0), byte);
                f.putreg(t);
                f.putreg(left);
                f.putreg(v);
            }
        }
    }
    if let Some(d) = r.d {
        let (j, n) = (temp::<B, P>(f)?, temp::<B, P>(f)?);
        let store = f.genlabel();
        f.cv::<UL, P>(n, bits);
        f.rsh(n, n, imm(3));
        f.set(j, 0);
        f.label(store);
        f.stc(w, d, j);
        f.rsh(w, w, imm(8));
        f.add(j, j, imm(1));
        f.blt(j, n, store);
        f.putreg(n);
        f.putreg(j);
    }
    f.putreg(bits);
    f.putreg(w);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The zmm table, which only an AVX-512 CPU executes, spelled out row
    /// by row as the 512-bit loop uses it, so that a CPU without AVX-512
    /// still checks what `wide_k` builds for it; and the ymm table beside.
    #[test]
    fn the_wide_constants_are_the_distances_each_row_folds() {
        let rep =
            |k: [u64; 2], n: usize| -> Vec<u64> { k.iter().copied().cycle().take(n).collect() };
        let (a, b, c) = (fold_k(384), fold_k(256), fold_k(128));
        let zmm: [Vec<u64>; 5] = [
            rep(fold_k(2048), 8),
            rep(fold_k(1024), 8),
            rep(fold_k(512), 8),
            vec![a[0], a[1], b[0], b[1], c[0], c[1], 0, 0],
            vec![0, 0, 0, 0, 0, 0, !0, !0],
        ];
        let ymm: [Vec<u64>; 5] = [
            rep(fold_k(1024), 4),
            rep(fold_k(512), 4),
            rep(fold_k(256), 4),
            vec![c[0], c[1], 0, 0],
            vec![0, 0, !0, !0],
        ];
        for (row, want) in WIDE_K_512.iter().zip(&zmm) {
            assert_eq!(&row[..], &want[..]);
        }
        for (row, want) in WIDE_K_256.iter().zip(&ymm) {
            assert_eq!(&row[..], &want[..]);
        }
        // Row 2 of the zmm table is the 64-byte block fold of the 128-bit
        // loop.
        assert_eq!(fold_k(512), FOLD_K);
    }
}
