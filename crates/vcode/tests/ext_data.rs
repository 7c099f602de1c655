//! The data-touching extensions that fused protocol loops use (`add1c4`,
//! `bswap32x2`, `bswap16x4`, `ldtab32`, `crc32x8`): the native x86-64
//! mapping against the reference backend (which runs the `eval` or the
//! portable `core` definition) and against a plain Rust model, with every
//! way the destination can alias a source; and the non-temporal store
//! (`stnt`, `sfence`) with every register as base and as value, and
//! `prefetch` (which must not fault, even on an unmapped address); and the
//! 128-bit `ldx`, `stx`, `xorq`, `clfold` against a software carry-less
//! product, with every float register in every role.

use vcode::ext::{Bswap, Clmul, NonTemporal, OnesComplement, Prefetch, TableLookup};
use vcode::{Backend, Class, D, Func, Invoke, Leaf, Operand, P, Reference, Reg, UL, Value, X64};

/// The operation under test, on the parameter registers; `rd_from` picks
/// the source the destination aliases (`None`: a fresh register).
type Op<B> = fn(&mut Func<B>, Reg<UL>, &[Reg<UL>]);

/// `f(a0, .., an-1)` returning `op`'s destination.
fn build<B: Backend>(n: usize, rd_from: Option<usize>, op: Op<B>) -> B::Code {
    let mut f = Func::<B>::with_backend();
    let sig = "%ul".repeat(n);
    let p = f.lambda(&sig, Leaf::Yes).unwrap();
    let args: Vec<Reg<UL>> = (0..n).map(|i| p.get::<UL>(i).unwrap()).collect();
    let rd = match rd_from {
        Some(i) => args[i],
        None => f.getreg::<UL>(vcode::Class::Temp).unwrap(),
    };
    op(&mut f, rd, &args);
    f.ret(rd);
    f.end().unwrap()
}

fn run(code: &(impl Invoke + ?Sized), args: &[u64]) -> u64 {
    let vals: Vec<Value> = args.iter().map(|&a| Value::UL(a)).collect();
    // SAFETY: the functions compute on their arguments, and the table
    // lookups read only the tables whose addresses the tests pass.
    match unsafe { code.invoke(&vals) }.unwrap() {
        Value::UL(v) => v,
        v => panic!("returned {v:?}"),
    }
}

/// Checks `op` natively and on the reference backend against `model` for
/// every aliasing of the destination with the sources in `alias`.
fn check(
    n: usize,
    alias: &[usize],
    cases: &[Vec<u64>],
    opx: Op<X64>,
    opr: Op<Reference>,
    model: impl Fn(&[u64]) -> u64,
) {
    let choices: Vec<Option<usize>> = std::iter::once(None)
        .chain(alias.iter().map(|&i| Some(i)))
        .collect();
    for rd in choices {
        let native = build::<X64>(n, rd, opx);
        let reference = build::<Reference>(n, rd, opr);
        for args in cases {
            let want = model(args);
            assert_eq!(
                run(&native, args),
                want,
                "native, rd {rd:?}, {args:x?}\n{}",
                native.disassemble()
            );
            assert_eq!(
                run(&reference, args),
                want,
                "reference, rd {rd:?}, {args:x?}"
            );
        }
    }
}

fn values(n: usize, seed: u64) -> Vec<Vec<u64>> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let specials = [
        0u64,
        1,
        u64::MAX,
        u64::MAX - 1,
        1 << 63,
        0xffff_ffff,
        0x8000_0000_0000_0001,
    ];
    let mut out: Vec<Vec<u64>> = Vec::new();
    for &s in &specials {
        out.push(vec![s; n]);
        out.push(
            (0..n)
                .map(|i| if i % 2 == 0 { s } else { next() })
                .collect(),
        );
    }
    for _ in 0..300 {
        out.push((0..n).map(|_| next()).collect());
    }
    out
}

/// The ones'-complement sum modulo 2^64 - 1, represented as the adders
/// leave it: 0 only when every operand is 0.
fn ones_sum(v: &[u64]) -> u64 {
    let s: u128 = v.iter().map(|&x| x as u128).sum();
    if v.iter().all(|&x| x == 0) {
        0
    } else {
        let m = u64::MAX as u128;
        ((s - 1) % m + 1) as u64
    }
}

#[test]
fn add1c4_is_a_ones_complement_sum() {
    fn x(f: &mut Func<X64>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.add1c4(rd, a[0], a[1], a[2], a[3], a[4]);
    }
    fn r(f: &mut Func<Reference>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.add1c4(rd, a[0], a[1], a[2], a[3], a[4]);
    }
    check(5, &[0, 1, 2, 3, 4], &values(5, 1), x, r, ones_sum);
}

#[test]
fn add1c4_chain_never_loses_a_carry() {
    // All ones everywhere: every adc carries.
    fn x(f: &mut Func<X64>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.add1c4(rd, a[0], a[1], a[2], a[3], a[4]);
    }
    let native = build::<X64>(5, Some(0), x);
    for v in [
        [u64::MAX; 5],
        [u64::MAX, u64::MAX, 1, 0, 0],
        [u64::MAX - 1, 1, u64::MAX, u64::MAX, 2],
    ] {
        assert_eq!(run(&native, &v), ones_sum(&v), "{v:x?}");
    }
}

#[test]
fn bswap32x2_swaps_each_half() {
    fn x(f: &mut Func<X64>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.bswap32x2(rd, a[0]);
    }
    fn r(f: &mut Func<Reference>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.bswap32x2(rd, a[0]);
    }
    check(1, &[0], &values(1, 2), x, r, |v| {
        let (lo, hi) = (v[0] as u32, (v[0] >> 32) as u32);
        (lo.swap_bytes() as u64) | (hi.swap_bytes() as u64) << 32
    });
    let native = build::<X64>(1, None, x);
    assert_eq!(
        run(&native, &[0x0102_0304_0506_0708]),
        0x0403_0201_0807_0605
    );
}

#[test]
fn bswap16x4_swaps_each_quarter() {
    fn x(f: &mut Func<X64>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.bswap16x4(rd, a[0], a[1]);
    }
    fn r(f: &mut Func<Reference>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.bswap16x4(rd, a[0], a[1]);
    }
    // With the lane mask, and with arbitrary masks (the general formula).
    let mut cases = values(2, 3);
    for c in cases.iter_mut().step_by(2) {
        c[1] = 0x00ff_00ff_00ff_00ff;
    }
    check(2, &[0, 1], &cases, x, r, |v| {
        ((v[0] >> 8) & v[1]) | ((v[0] & v[1]) << 8)
    });
    let native = build::<X64>(2, None, x);
    assert_eq!(
        run(&native, &[0x0102_0304_0506_0708, 0x00ff_00ff_00ff_00ff]),
        0x0201_0403_0605_0807
    );
}

/// Eight distinct tables of 256 entries, contiguous.
fn tables() -> Box<[[u32; 256]; 8]> {
    let mut t = Box::new([[0u32; 256]; 8]);
    for (k, tk) in t.iter_mut().enumerate() {
        for (i, e) in tk.iter_mut().enumerate() {
            *e = (i as u32).wrapping_mul(0x9e37_79b9)
                ^ (k as u32) << 28
                ^ 0x1234_5678u32.rotate_left(k as u32);
        }
    }
    t
}

#[test]
fn ldtab32_reads_a_table_entry() {
    fn x(f: &mut Func<X64>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.ldtab32(rd, a[0], a[1]);
    }
    fn r(f: &mut Func<Reference>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.ldtab32(rd, a[0], a[1]);
    }
    let t = tables();
    let base = t.as_ptr() as u64;
    let cases: Vec<Vec<u64>> = values(1, 4).into_iter().map(|v| vec![base, v[0]]).collect();
    check(2, &[0, 1], &cases, x, r, |v| {
        t[0][(v[1] & 0xff) as usize] as u64
    });
}

#[test]
fn crc32x8_is_slicing_by_8() {
    fn x(f: &mut Func<X64>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.crc32x8(rd, a[0], a[1], a[2]);
    }
    fn r(f: &mut Func<Reference>, rd: Reg<UL>, a: &[Reg<UL>]) {
        f.crc32x8(rd, a[0], a[1], a[2]);
    }
    let t = tables();
    let base = t.as_ptr() as u64;
    let cases: Vec<Vec<u64>> = values(2, 5)
        .into_iter()
        .map(|v| vec![v[0] & 0xffff_ffff, v[1], base])
        .collect();
    check(3, &[0, 1, 2], &cases, x, r, |v| {
        let w = v[0] ^ v[1];
        (0..8).fold(0u64, |acc, j| {
            acc ^ t[7 - j][((w >> (8 * j)) & 0xff) as usize] as u64
        })
    });
}

/// Slots written by [`build_stnt`]: one per round, then the parameters'.
const NT_ROUNDS: usize = 24;

/// The `k`-th temporary pointer register (modulo their number), holding
/// `base0`; the caller puts it back. Over `k`, every register serves as a
/// base.
fn kth_base<B: Backend>(f: &mut Func<B>, k: usize, base0: Reg<P>) -> Reg<P> {
    let mut ps = Vec::new();
    while let Ok(r) = f.getreg::<P>(Class::Temp) {
        ps.push(r);
    }
    let b = ps.remove(k % ps.len());
    for r in ps {
        f.putreg(r);
    }
    f.mov(b, base0);
    b
}

/// `f(p, v)`: round `k` stores `k + 1` times a byte pattern at
/// `p + 8 * (3 * k)`, with the `k`-th free register as the base and the
/// `k`-th as the value (every register takes both roles, r12 as a base
/// needs a SIB byte); then `v` at `p + 8 * 3 * NT_ROUNDS` from the
/// parameter registers themselves, and an `sfence`.
fn build_stnt<B: Backend>() -> B::Code {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p%ul", Leaf::Yes).unwrap();
    let (base0, v) = (p.get::<P>(0).unwrap(), p.get::<UL>(1).unwrap());
    for k in 0..NT_ROUNDS {
        let b = kth_base(&mut f, k, base0);
        let mut us = Vec::new();
        while let Ok(r) = f.getreg::<UL>(Class::Temp) {
            us.push(r);
        }
        let w = us[(k * 7) % us.len()];
        f.set(w, (k as u64 + 1) * 0x0101_0101_0101_0101);
        f.stnt(w, b, 8 * 3 * k as i32);
        for r in us {
            f.putreg(r);
        }
        f.putreg(b);
    }
    f.stnt(v, base0, 8 * 3 * NT_ROUNDS as i32);
    f.sfence();
    f.retv();
    f.end().unwrap()
}

#[test]
fn stnt_stores_a_word_at_base_plus_offset() {
    let native = build_stnt::<X64>();
    let reference = build_stnt::<Reference>();
    for (name, code) in [
        ("native", &native as &dyn Invoke),
        ("reference", &reference as &dyn Invoke),
    ] {
        let mut mem = vec![0xeeu64; 3 * NT_ROUNDS + 2];
        let v = 0x0123_4567_89ab_cdefu64;
        // SAFETY: the function writes only the words at p + 8 * 3k for
        // k < NT_ROUNDS and p + 8 * 3 * NT_ROUNDS, all inside `mem`.
        unsafe { code.invoke(&[Value::P(mem.as_mut_ptr() as usize), Value::UL(v)]) }.unwrap();
        for (i, &m) in mem.iter().enumerate() {
            let want = match i {
                i if i == 3 * NT_ROUNDS => v,
                i if i % 3 == 0 && i < 3 * NT_ROUNDS => (i as u64 / 3 + 1) * 0x0101_0101_0101_0101,
                _ => 0xee,
            };
            assert_eq!(m, want, "{name}, word {i}");
        }
    }
    let text = native.disassemble();
    assert!(text.contains("movnti") && text.contains("sfence"), "{text}");
}

#[test]
fn prefetch_is_harmless_with_every_base() {
    fn build_pf<B: Backend>() -> B::Code {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%p", Leaf::Yes).unwrap();
        let base0 = p.get::<P>(0).unwrap();
        for k in 0..NT_ROUNDS {
            let b = kth_base(&mut f, k, base0);
            f.prefetch(b, 64 * k as i32, k % 2 == 1);
            f.putreg(b);
        }
        f.prefetch(base0, 1 << 20, false);
        f.retv();
        f.end().unwrap()
    }
    let native = build_pf::<X64>();
    let reference = build_pf::<Reference>();
    let mem = vec![0u8; 64 * NT_ROUNDS];
    for addr in [mem.as_ptr() as usize, 0, 8, usize::MAX - 4096] {
        // SAFETY: prefetches read nothing architecturally and never fault.
        unsafe { native.invoke(&[Value::P(addr)]) }.unwrap();
        // SAFETY: as above; on the reference backend they do nothing.
        unsafe { reference.invoke(&[Value::P(addr)]) }.unwrap();
    }
    let text = native.disassemble();
    assert!(
        text.contains("prefetcht0") && text.contains("prefetchnta"),
        "{text}"
    );
}

/// The carry-less product of two 64-bit values.
fn clmul(a: u64, b: u64) -> u128 {
    (0..64)
        .filter(|i| b >> i & 1 == 1)
        .fold(0u128, |r, i| r ^ (a as u128) << i)
}

/// Rounds of [`build_fold`]: each uses other registers.
const FOLD_ROUNDS: usize = 16;

/// `f(src, dst, g)`: round `k` (registers rotated by `k`) loads a lane
/// from `src + 64k` and a constant from `src + 64k + 16`, XORs `g` into the
/// lane, folds it with the 16 bytes at `src + 64k + 32`, and stores the
/// lane and the loaded bytes to `dst + 32k` (the latter with `stxnt` in
/// odd rounds; `dst` must be 16-byte aligned).
fn build_fold<B: Backend>() -> B::Code {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p%p%ul", Leaf::Yes).unwrap();
    let (src0, dst0, g) = (
        p.get::<P>(0).unwrap(),
        p.get::<P>(1).unwrap(),
        p.get::<UL>(2).unwrap(),
    );
    for k in 0..FOLD_ROUNDS {
        let mut xs: Vec<Reg<D>> = Vec::new();
        while let Ok(r) = f.getreg::<D>(Class::Temp) {
            xs.push(r);
        }
        let n = xs.len();
        let (lane, kk, t) = (xs[k % n], xs[(k + 5) % n], xs[(k + 11) % n]);
        let mut ps = Vec::new();
        while let Ok(r) = f.getreg::<P>(Class::Temp) {
            ps.push(r);
        }
        let (sb, db) = (ps[k % ps.len()], ps[(k + 3) % ps.len()]);
        f.mov(sb, src0);
        f.add(sb, sb, Operand::Imm(64 * k as i64));
        f.mov(db, dst0);
        f.ldx(lane, sb, 0);
        f.ldx(kk, sb, 16);
        f.xorq(lane, g);
        f.clfold(lane, kk, t, sb, 32);
        f.stx(lane, db, 32 * k as i32);
        if k % 2 == 0 {
            f.stx(t, db, 32 * k as i32 + 16);
        } else {
            f.stxnt(t, db, 32 * k as i32 + 16);
        }
        for r in xs {
            f.putreg(r);
        }
        for r in ps {
            f.putreg(r);
        }
    }
    f.retv();
    f.end().unwrap()
}

#[test]
fn clfold_folds_a_lane() {
    if !std::is_x86_feature_detected!("pclmulqdq") {
        return;
    }
    let native = build_fold::<X64>();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..50 {
        let src: Vec<u64> = (0..8 * FOLD_ROUNDS).map(|_| next()).collect();
        let g = next();
        let mut dst = vec![0u128; 2 * FOLD_ROUNDS];
        // SAFETY: round k reads src words 8k..8k+6 and writes the 32
        // bytes at dst + 32k, all inside the vectors; `dst` is a Vec<u128>,
        // so 16-byte aligned as `stxnt` needs.
        unsafe {
            native.invoke(&[
                Value::P(src.as_ptr() as usize),
                Value::P(dst.as_mut_ptr() as usize),
                Value::UL(g),
            ])
        }
        .unwrap();
        let dst: Vec<u64> = dst
            .iter()
            .flat_map(|&v| [v as u64, (v >> 64) as u64])
            .collect();
        for k in 0..FOLD_ROUNDS {
            let w = &src[8 * k..8 * k + 6];
            let lane =
                clmul(w[0] ^ g, w[2]) ^ clmul(w[1], w[3]) ^ (w[4] as u128 | (w[5] as u128) << 64);
            let want = [lane as u64, (lane >> 64) as u64, w[4], w[5]];
            assert_eq!(dst[4 * k..4 * k + 4], want, "round {k}");
        }
    }
}

#[test]
fn clmul_needs_the_native_backend() {
    let mut f = Func::<Reference>::with_backend();
    assert!(!f.clmul_available());
    let p = f.lambda("%p", Leaf::Yes).unwrap();
    let a = p.get::<P>(0).unwrap();
    let x = f.getreg::<D>(Class::Temp).unwrap();
    f.ldx(x, a, 0);
    f.retv();
    assert!(f.end().is_err());
}
