//! The vector extensions (`vcode::ext::Wide`) at both widths, zmm (512
//! bits, EVEX) and ymm (256 bits, VEX): every encoding decoded with
//! `iced-x86` and compared operand by operand (every float register in
//! every role, every integer register as base, offsets that need a SIB
//! byte); the instructions run against plain Rust models (64-bit lane
//! arithmetic, byte shuffles, `zxorq`, extracts, loads and stores, and the
//! two folds against a software carry-less product); the byte-masked moves
//! (zmm only) touching only their bytes; what only zmm has refused at 256
//! bits; and the reference backend, which has no vector registers,
//! refusing them. Each width runs where the CPU has it (AVX-512F, BW and
//! VPCLMULQDQ; AVX2 and VPCLMULQDQ).

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind};
use vcode::ext::Wide;
use vcode::host::reg_name;
use vcode::{Class, D, Func, Invoke, Leaf, P, Reference, Reg, UL, Value, X64};

/// A function builder whose `Wide` instructions are `bits` wide, if the
/// CPU runs them there, folds included.
fn at(bits: u32) -> Option<Func<X64>> {
    let mut f = Func::<X64>::with_backend();
    (f.set_wide_bits(bits) && f.wide_clmul_available()).then_some(f)
}

/// Every float and every pointer register vcode hands out.
fn all_regs(f: &mut Func<X64>) -> (Vec<Reg<D>>, Vec<Reg<P>>) {
    let mut xs = Vec::new();
    while let Ok(r) = f.getreg::<D>(Class::Temp) {
        xs.push(r);
    }
    let mut ps = Vec::new();
    while let Ok(r) = f.getreg::<P>(Class::Persistent) {
        ps.push(r);
    }
    while let Ok(r) = f.getreg::<P>(Class::Temp) {
        ps.push(r);
    }
    (xs, ps)
}

/// What one decoded instruction must be: mnemonic, then its operands as
/// iced names them (`ZMM3`, `R12`, memory as `[R12+0x40]`, immediates).
fn describe(i: &Instruction) -> String {
    let mut s = format!("{:?}", i.mnemonic());
    for k in 0..i.op_count() {
        s += &match i.op_kind(k) {
            OpKind::Register => format!(" {:?}", i.op_register(k)),
            OpKind::Memory => format!(
                " [{:?}{:+#x}]",
                i.memory_base(),
                i.memory_displacement64() as i64
            ),
            OpKind::Immediate8 => format!(" {:#x}", i.immediate8()),
            k => format!(" {k:?}"),
        };
    }
    if i.has_op_mask() {
        s += &format!(" {{{:?}}}", i.op_mask());
    }
    if i.zeroing_masking() {
        s += " {z}";
    }
    s
}

/// The names iced gives one width's registers and instructions.
struct Names {
    zmm: bool,
}

impl Names {
    fn v(&self, r: Reg<D>) -> String {
        format!("{}{}", if self.zmm { "ZMM" } else { "YMM" }, r.num())
    }

    fn scratch(&self) -> &'static str {
        if self.zmm { "ZMM15" } else { "YMM15" }
    }

    /// The mnemonic of an instruction whose EVEX and VEX names differ.
    fn op(&self, evex: &'static str, vex: &'static str) -> &'static str {
        if self.zmm { evex } else { vex }
    }
}

fn g(r: Reg<P>) -> String {
    reg_name(false, r.num()).to_uppercase()
}

#[test]
fn every_encoding_decodes_to_what_was_asked() {
    for bits in [512, 256] {
        if let Some(f) = at(bits) {
            encodings(f, bits);
        }
    }
}

fn encodings(mut f: Func<X64>, bits: u32) {
    let nm = Names { zmm: bits == 512 };
    let z = |r: Reg<D>| nm.v(r);
    let mov = nm.op("Vmovdqu64", "Vmovdqu");
    let xor = nm.op("Vpxorq", "Vpxor");
    f.lambda("", Leaf::Yes).unwrap();
    let gr = f.getreg::<UL>(Class::Temp).unwrap();
    let gname = reg_name(false, gr.num()).to_uppercase();
    let (xs, ps) = all_regs(&mut f);
    let n = xs.len();
    let lanes = bits as usize / 128;
    let mut want = Vec::new();
    for k in 0..n {
        let (a, b, c) = (xs[k], xs[(k + 5) % n], xs[(k + 11) % n]);
        let base = ps[k % ps.len()];
        let off = [0, 64, -64, 0x1234_5678, -1][k % 5];
        let m = format!("[{}{:+#x}]", g(base), off as i64);
        f.ldz(a, base, off);
        want.push(format!("{mov} {} {m}", z(a)));
        f.stz(b, base, off);
        want.push(format!("{mov} {m} {}", z(b)));
        f.stznt(c, base, off);
        want.push(format!("Vmovntdq {m} {}", z(c)));
        f.zxor(a, b, c);
        want.push(format!("{xor} {} {} {}", z(a), z(b), z(c)));
        f.zaddq(b, c, a);
        want.push(format!("Vpaddq {} {} {}", z(b), z(c), z(a)));
        f.zsubq(c, a, b);
        want.push(format!("Vpsubq {} {} {}", z(c), z(a), z(b)));
        f.zsrlq(a, b, 32);
        want.push(format!("Vpsrlq {} {} 0x20", z(a), z(b)));
        f.zsllq(c, a, 7);
        want.push(format!("Vpsllq {} {} 0x7", z(c), z(a)));
        if nm.zmm {
            f.zmask(gr);
            want.push(format!("Kmovq K1 {gname}"));
            f.ldzm(b, base, off);
            want.push(format!("Vmovdqu8 {} {m} {{K1}} {{z}}", z(b)));
            f.stzm(c, base, off);
            want.push(format!("Vmovdqu8 {m} {} {{K1}}", z(c)));
        }
        f.zxorq(a, gr);
        want.push(format!("Vmovq XMM15 {gname}"));
        want.push(format!("{xor} {} {} {}", z(a), z(a), nm.scratch()));
        f.zshufb(c, a, b);
        want.push(format!("Vpshufb {} {} {}", z(c), z(a), z(b)));
        f.zand(b, c, a);
        want.push(format!(
            "{} {} {} {}",
            nm.op("Vpandq", "Vpand"),
            z(b),
            z(c),
            z(a)
        ));
        f.zextract(c, a, 128, (k % lanes) as u8);
        want.push(format!(
            "{} XMM{} {} {:#x}",
            nm.op("Vextracti32x4", "Vextracti128"),
            c.num(),
            z(a),
            k % lanes
        ));
        if nm.zmm {
            f.zextract(a, b, 256, (k % 2) as u8);
            want.push(format!(
                "Vextracti64x4 YMM{} {} {:#x}",
                a.num(),
                z(b),
                k % 2
            ));
        }
        f.zmovq(gr, c, 0);
        want.push(format!("Vmovq {gname} XMM{}", c.num()));
        f.zmovq(gr, b, 1);
        want.push(format!("Vpextrq {gname} XMM{} 0x1", b.num()));
        // The folds: the data XORed in by one vpternlogq (zmm) or two
        // vpxors (ymm).
        let sum = |want: &mut Vec<String>, l: Reg<D>, t: Reg<D>| {
            if nm.zmm {
                want.push(format!("Vpternlogq {} ZMM15 {} 0x96", z(l), z(t)));
            } else {
                want.push(format!("Vpxor {} {} YMM15", z(l), z(l)));
                want.push(format!("Vpxor {} {} {}", z(l), z(l), z(t)));
            }
        };
        f.zfold(a, b, c, base, off);
        want.push(format!("Vpclmulqdq {} {} {} 0x0", nm.scratch(), z(a), z(b)));
        want.push(format!("Vpclmulqdq {} {} {} 0x11", z(a), z(a), z(b)));
        want.push(format!("{mov} {} {m}", z(c)));
        sum(&mut want, a, c);
        f.zfoldr(c, a, b);
        want.push(format!("Vpclmulqdq {} {} {} 0x0", nm.scratch(), z(c), z(a)));
        want.push(format!("Vpclmulqdq {} {} {} 0x11", z(c), z(c), z(a)));
        sum(&mut want, c, b);
    }
    f.vzeroupper();
    want.push("Vzeroupper".to_string());
    f.retv();
    let code = f.end().unwrap();
    let mut dec = Decoder::new(64, code.bytes(), DecoderOptions::NONE);
    let mut got = Vec::new();
    while dec.can_decode() {
        let i = dec.decode();
        assert!(!i.is_invalid(), "{}", code.disassemble());
        let vector = i.op_count() > 0
            && (0..i.op_count())
                .any(|k| i.op_kind(k) == OpKind::Register && i.op_register(k).is_vector_register());
        if vector || matches!(i.mnemonic(), Mnemonic::Vzeroupper | Mnemonic::Kmovq) {
            got.push(describe(&i));
        }
    }
    assert_eq!(got.len(), want.len(), "{bits} bits: {got:#?}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w, "{bits} bits");
    }
}

/// The carry-less product of two 64-bit values.
fn clmul(a: u64, b: u64) -> u128 {
    (0..64)
        .filter(|i| b >> i & 1 == 1)
        .fold(0u128, |r, i| r ^ (a as u128) << i)
}

/// `f(src, dst, g)` at `bits` with `src` = four vectors `a, b, k, m`:
/// writes to `dst` (a vector each) `a` shuffled by `b`, `a + b`, `a - b`,
/// `a >> 13`, `a << 40`, `a ^ b`, `a ^ g`, `fold(a, k) ^ m` (zfold, which
/// also leaves `m` to store non-temporally), `fold(b, k) ^ a` (zfoldr),
/// `a & k`, the last 128-bit lane of `a` and, at 512 bits, its upper half
/// (zero-extended), then the words of the last 128-bit lane of `k`
/// (through `zmovq`). The registers are rotated by `rot`.
fn build_ops(mut f: Func<X64>, bits: u32, rot: usize) -> vcode::Code {
    let vb = bits as i32 / 8;
    let p = f.lambda("%p%p%ul", Leaf::Yes).unwrap();
    let (s, d, gr) = (
        p.get::<P>(0).unwrap(),
        p.get::<P>(1).unwrap(),
        p.get::<UL>(2).unwrap(),
    );
    let mut xs = Vec::new();
    while let Ok(r) = f.getreg::<D>(Class::Temp) {
        xs.push(r);
    }
    let n = xs.len();
    let r = |i: usize| xs[(i + rot) % n];
    let (a, b, k, t, u) = (r(0), r(1), r(2), r(3), r(4));
    f.ldz(a, s, 0);
    f.ldz(b, s, vb);
    f.ldz(k, s, 2 * vb);
    type Op = fn(&mut Func<X64>, Reg<D>, Reg<D>, Reg<D>);
    let ops: [Op; 6] = [
        |f, u, a, b| f.zshufb(u, a, b),
        |f, u, a, b| f.zaddq(u, a, b),
        |f, u, a, b| f.zsubq(u, a, b),
        |f, u, a, _| f.zsrlq(u, a, 13),
        |f, u, a, _| f.zsllq(u, a, 40),
        |f, u, a, b| f.zxor(u, a, b),
    ];
    for (i, op) in ops.iter().enumerate() {
        op(&mut f, u, a, b);
        f.stz(u, d, vb * i as i32);
    }
    f.zxor(u, u, u);
    f.zxor(u, u, a);
    f.zxorq(u, gr);
    f.stz(u, d, 6 * vb);
    f.zxor(u, a, a);
    f.zaddq(u, u, a); // u = a
    f.zfold(u, k, t, s, 3 * vb);
    f.stz(u, d, 7 * vb);
    f.stznt(t, d, 8 * vb);
    f.zfoldr(b, k, a);
    f.stz(b, d, 9 * vb);
    let last = (bits / 128 - 1) as u8;
    f.zand(u, a, k);
    f.stz(u, d, 10 * vb);
    f.zextract(u, a, 128, last);
    f.stz(u, d, 11 * vb);
    let mut at = 12 * vb;
    if bits == 512 {
        f.zextract(u, a, 256, 1);
        f.stz(u, d, at);
        at += vb;
    }
    f.zextract(u, k, 128, last);
    f.zmovq(gr, u, 0);
    f.st(gr, d, vcode::Operand::Imm(at as i64));
    f.zmovq(gr, u, 1);
    f.st(gr, d, vcode::Operand::Imm(at as i64 + 8));
    f.vzeroupper();
    f.retv();
    f.end().unwrap()
}

#[test]
fn the_instructions_compute_their_models() {
    for bits in [512, 256] {
        for rot in 0..15 {
            if let Some(f) = at(bits) {
                models(build_ops(f, bits, rot), bits, rot);
            }
        }
    }
}

/// Runs [`build_ops`]'s code on random vectors against the models.
fn models(code: vcode::Code, bits: u32, rot: usize) {
    let mut x = 0x2545_f491_4f6c_dd1du64 ^ rot as u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Words per vector, and the vectors written.
    let n = bits as usize / 64;
    let outs = if bits == 512 { 13 } else { 12 };
    for _ in 0..8 {
        let src: Vec<u64> = (0..4 * n).map(|_| next()).collect();
        let gv = next();
        // 64-byte aligned for `stznt`: eight words spare.
        let mut buf = vec![0u64; outs * n + 2 + 8];
        let at = buf.as_ptr().align_offset(64);
        let dst = &mut buf[at..at + outs * n + 2];
        // SAFETY: the function reads src[0..4n] and writes dst[0..outs * n
        // + 2], whose slot 8 (of n words) is aligned as `stznt` needs.
        unsafe {
            code.invoke(&[
                Value::P(src.as_ptr() as usize),
                Value::P(dst.as_mut_ptr() as usize),
                Value::UL(gv),
            ])
        }
        .unwrap();
        let (a, b, k, m) = (
            &src[0..n],
            &src[n..2 * n],
            &src[2 * n..3 * n],
            &src[3 * n..],
        );
        let fold = |l: &[u64], x: &[u64]| -> Vec<u64> {
            (0..n / 2)
                .flat_map(|q| {
                    let (lo, hi) = (l[2 * q], l[2 * q + 1]);
                    let v = clmul(lo, k[2 * q]) ^ clmul(hi, k[2 * q + 1]);
                    [v as u64 ^ x[2 * q], (v >> 64) as u64 ^ x[2 * q + 1]]
                })
                .collect()
        };
        let bytes = |v: &[u64]| -> Vec<u8> { v.iter().flat_map(|w| w.to_le_bytes()).collect() };
        let (ab, bb) = (bytes(a), bytes(b));
        let shuf: Vec<u8> = (0..8 * n)
            .map(|j| {
                if bb[j] & 0x80 != 0 {
                    0
                } else {
                    ab[16 * (j / 16) + (bb[j] & 15) as usize]
                }
            })
            .collect();
        let mut want: Vec<u64> = shuf
            .chunks(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        want.extend((0..n).map(|i| a[i].wrapping_add(b[i])));
        want.extend((0..n).map(|i| a[i].wrapping_sub(b[i])));
        want.extend((0..n).map(|i| a[i] >> 13));
        want.extend((0..n).map(|i| a[i] << 40));
        want.extend((0..n).map(|i| a[i] ^ b[i]));
        want.extend((0..n).map(|i| a[i] ^ if i == 0 { gv } else { 0 }));
        want.extend(fold(a, m));
        want.extend(m);
        want.extend(fold(b, a));
        want.extend((0..n).map(|i| a[i] & k[i]));
        let zext =
            |v: &[u64]| -> Vec<u64> { (0..n).map(|i| v.get(i).copied().unwrap_or(0)).collect() };
        want.extend(zext(&a[n - 2..]));
        if bits == 512 {
            want.extend(zext(&a[4..]));
        }
        want.extend(&k[n - 2..]);
        assert_eq!(dst, &want[..], "{bits} bits, rotation {rot}");
    }
}

/// `f(src, dst, m)`: with the byte mask `m`, a zero-masking load of
/// `src[0..64]` stored whole to `dst[64..128]`, and a masked store of
/// `src[64..128]` to `dst[0..64]`.
fn build_masked(mut f: Func<X64>) -> vcode::Code {
    let p = f.lambda("%p%p%ul", Leaf::Yes).unwrap();
    let (s, d, m) = (
        p.get::<P>(0).unwrap(),
        p.get::<P>(1).unwrap(),
        p.get::<UL>(2).unwrap(),
    );
    let x = f.getreg::<D>(Class::Temp).unwrap();
    f.zmask(m);
    f.ldzm(x, s, 0);
    f.stz(x, d, 64);
    f.ldz(x, s, 64);
    f.stzm(x, d, 0);
    f.vzeroupper();
    f.retv();
    f.end().unwrap()
}

#[test]
fn the_masked_load_and_store_touch_only_the_masked_bytes() {
    let Some(f) = at(512) else {
        return;
    };
    let code = build_masked(f);
    let src: Vec<u8> = (0..128u32).map(|i| (i * 37 + 11) as u8).collect();
    let masks = [
        0u64,
        !0,
        1,
        1 << 63,
        0x00ff_f0f0_1234_8001,
        !0 << 17,
        !0 >> 60,
        !0 << 60,
    ];
    for (i, &m) in masks.iter().enumerate() {
        let mut dst = vec![0xa5u8; 128];
        // SAFETY: the function reads src[0..128] and writes dst[0..128].
        unsafe {
            code.invoke(&[
                Value::P(src.as_ptr() as usize),
                Value::P(dst.as_mut_ptr() as usize),
                Value::UL(m),
            ])
        }
        .unwrap();
        for j in 0..64 {
            let on = m >> j & 1 == 1;
            assert_eq!(
                dst[j],
                if on { src[64 + j] } else { 0xa5 },
                "mask {i} byte {j}"
            );
            assert_eq!(
                dst[64 + j],
                if on { src[j] } else { 0 },
                "mask {i} byte {j}"
            );
        }
    }
}

#[test]
fn what_only_zmm_has_is_refused_at_256_bits() {
    type Op = fn(&mut Func<X64>, Reg<D>, Reg<D>, Reg<P>, Reg<UL>);
    // A 256-bit function `(p, ul)` with two vector registers, running `op`.
    let build = |op: Op| {
        let mut f = Func::<X64>::with_backend();
        assert!(f.set_wide_bits(256));
        assert_eq!(f.wide_bits(), 256);
        let p = f.lambda("%p%ul", Leaf::Yes).unwrap();
        let (a, m) = (p.get::<P>(0).unwrap(), p.get::<UL>(1).unwrap());
        let (x, y) = (
            f.getreg::<D>(Class::Temp).unwrap(),
            f.getreg::<D>(Class::Temp).unwrap(),
        );
        op(&mut f, x, y, a, m);
        f.vzeroupper();
        f.retv();
        f.end()
    };
    if !Func::<X64>::with_backend().set_wide_bits(256) {
        return;
    }
    let bad: [(&str, Op); 5] = [
        ("zmask", |f, _, _, _, m| f.zmask(m)),
        ("ldzm", |f, x, _, a, _| f.ldzm(x, a, 0)),
        ("stzm", |f, x, _, a, _| f.stzm(x, a, 0)),
        ("zextract", |f, x, y, _, _| f.zextract(x, y, 256, 0)),
        ("zextract", |f, x, y, _, _| f.zextract(x, y, 128, 2)),
    ];
    for (name, op) in bad {
        let err = build(op).unwrap_err();
        assert!(err.to_string().contains(name), "{name}: {err}");
    }
    // What is allowed there still builds.
    build(|f, x, y, a, _| {
        f.zextract(x, y, 128, 1);
        f.ldz(x, a, 0);
    })
    .unwrap();
}

#[test]
fn the_reference_backend_has_no_vector_registers() {
    let mut f = Func::<Reference>::with_backend();
    assert!(!f.wide_available() && !f.wide_clmul_available());
    assert_eq!(f.wide_bits(), 0);
    assert!(!f.set_wide_bits(256) && !f.set_wide_bits(512));
    let p = f.lambda("%p", Leaf::Yes).unwrap();
    let a = p.get::<P>(0).unwrap();
    let x = f.getreg::<D>(Class::Temp).unwrap();
    f.ldz(x, a, 0);
    f.ldzm(x, a, 0);
    f.retv();
    let err = f.end().unwrap_err();
    assert!(err.to_string().contains("native x86-64 only"), "{err}");
}
