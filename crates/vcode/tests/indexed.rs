//! The jive JIT's extensions: `ldx`/`stx` (trait `Indexed`, memory at
//! `base + idx * scale + disp` in one SIB-encoded instruction natively, core
//! instructions on the reference backend), `dec_branch_borrow` (trait
//! `Countdown`), and `Func::code_offset` with `Code::disassemble_marked`.
//!
//! Loads and stores run on both backends against a Rust model, for every
//! memory type into every register type it widens to (or narrows from),
//! every scale, displacements across the disp8/disp32 boundaries up to
//! `i32::MIN`/`i32::MAX`, and base, index and value in every pair of
//! allocatable registers (r12 as a base needs its SIB byte, r13 as a base a
//! displacement even when it is 0; rbp is kept by the backend, so r13 is the
//! only rbp-like base). Separately the native encodings are decoded with
//! iced-x86 and compared field by field.

use iced_x86::{Decoder, DecoderOptions, Instruction, MemorySize, Mnemonic, Register};
use vcode::ext::{Countdown, Indexed};
use vcode::{
    Backend, Class, ErrorKind, Func, I, Invoke, L, Leaf, P, Reference, Reg, Ty, U, UL, Value, X64,
};

const MEMS: [Ty; 9] = [
    Ty::C,
    Ty::UC,
    Ty::S,
    Ty::US,
    Ty::I,
    Ty::U,
    Ty::L,
    Ty::UL,
    Ty::P,
];
const SCALES: [u8; 4] = [1, 2, 4, 8];
/// Zero, disp8 (both ends), just past disp8 (both sides), and disp32.
const DISPS: [i32; 15] = [
    0,
    1,
    -1,
    8,
    -8,
    127,
    -128,
    128,
    -129,
    4096,
    -4096,
    1 << 20,
    -(1 << 20),
    i32::MAX,
    i32::MIN,
];
/// Index values, negative ones included (the address arithmetic wraps).
const IDXS: [u64; 6] = [0, 1, 3, 1000, u64::MAX, u64::MAX - 4];

/// The register types a load of `mem` widens into (a 64-bit element only
/// into a 64-bit register).
fn load_types(mem: Ty) -> &'static [Ty] {
    match mem {
        Ty::L | Ty::UL | Ty::P => &[Ty::L, Ty::UL, Ty::P],
        _ => &[Ty::I, Ty::U, Ty::L, Ty::UL],
    }
}

/// The register types a store of `mem` narrows from.
fn store_types(mem: Ty) -> &'static [Ty] {
    match mem {
        Ty::L | Ty::UL | Ty::P => &[Ty::L, Ty::UL, Ty::P],
        _ => &[Ty::I, Ty::U, Ty::L, Ty::UL],
    }
}

/// One indexed access: the instruction's operands but the registers.
#[derive(Clone, Copy, Debug)]
struct Access {
    /// Memory type.
    mem: Ty,
    /// Register type.
    ty: Ty,
    scale: u8,
    disp: i32,
}

fn ldx_as<B: Backend>(f: &mut Func<B>, a: Access, rd: u8, base: Reg<P>, idx: Reg<UL>) {
    let Access {
        mem,
        ty,
        scale,
        disp,
    } = a;
    match ty {
        Ty::I => f.ldx(Reg::<I>::phys(rd), mem, base, idx, scale, disp),
        Ty::U => f.ldx(Reg::<U>::phys(rd), mem, base, idx, scale, disp),
        Ty::L => f.ldx(Reg::<L>::phys(rd), mem, base, idx, scale, disp),
        Ty::UL => f.ldx(Reg::<UL>::phys(rd), mem, base, idx, scale, disp),
        Ty::P => f.ldx(Reg::<P>::phys(rd), mem, base, idx, scale, disp),
        _ => unreachable!("{ty}"),
    }
}

fn stx_as<B: Backend>(f: &mut Func<B>, a: Access, rs: u8, base: Reg<P>, idx: Reg<UL>) {
    let Access {
        mem,
        ty,
        scale,
        disp,
    } = a;
    match ty {
        Ty::I => f.stx(Reg::<I>::phys(rs), mem, base, idx, scale, disp),
        Ty::U => f.stx(Reg::<U>::phys(rs), mem, base, idx, scale, disp),
        Ty::L => f.stx(Reg::<L>::phys(rs), mem, base, idx, scale, disp),
        Ty::UL => f.stx(Reg::<UL>::phys(rs), mem, base, idx, scale, disp),
        Ty::P => f.stx(Reg::<P>::phys(rs), mem, base, idx, scale, disp),
        _ => unreachable!("{ty}"),
    }
}

/// `*(ty *)(out + off) = r` with the register's own width.
fn st_as<B: Backend>(f: &mut Func<B>, ty: Ty, r: u8, out: Reg<P>, off: i64) {
    match ty {
        Ty::I => f.st(Reg::<I>::phys(r), out, off),
        Ty::U => f.st(Reg::<U>::phys(r), out, off),
        Ty::L => f.st(Reg::<L>::phys(r), out, off),
        Ty::UL => f.st(Reg::<UL>::phys(r), out, off),
        Ty::P => f.st(Reg::<P>::phys(r), out, off),
        _ => unreachable!("{ty}"),
    }
}

fn set_as<B: Backend>(f: &mut Func<B>, ty: Ty, r: u8, v: u64) {
    match ty {
        Ty::I => f.set(Reg::<I>::phys(r), v as i32),
        Ty::U => f.set(Reg::<U>::phys(r), v as u32),
        Ty::L => f.set(Reg::<L>::phys(r), v as i64),
        Ty::UL => f.set(Reg::<UL>::phys(r), v),
        Ty::P => f.set(Reg::<P>::phys(r), v as usize),
        _ => unreachable!("{ty}"),
    }
}

/// The register bits `rd = *(mem *)at` leaves in a register of type `ty`:
/// `c` and `s` sign-extend, `uc` and `us` zero-extend, a 32-bit element is
/// zero-extended into a 64-bit register whether `i` or `u` (as every vcode
/// load of 32 bits; unlike C's `long x = *(int *)p`), and a 32-bit
/// register keeps the low half.
fn model_load(mem: Ty, ty: Ty, at: &[u8]) -> u64 {
    let raw = match mem {
        Ty::C => at[0] as i8 as u64,
        Ty::UC => u64::from(at[0]),
        Ty::S => i16::from_le_bytes([at[0], at[1]]) as u64,
        Ty::US => u64::from(u16::from_le_bytes([at[0], at[1]])),
        Ty::I | Ty::U => u64::from(u32::from_le_bytes(at[..4].try_into().unwrap())),
        _ => u64::from_le_bytes(at[..8].try_into().unwrap()),
    };
    if ty.is_64() { raw } else { raw & 0xffff_ffff }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// Every integer register `getreg` hands out once the parameter registers
/// are given back, in its order.
fn claim_all<B: Backend>(f: &mut Func<B>) -> Vec<Reg<UL>> {
    let mut regs = Vec::new();
    while let Ok(r) = f.getreg::<UL>(Class::Temp) {
        regs.push(r);
    }
    regs
}

/// Which of the claimed registers plays which part (indices into
/// [`claim_all`]'s list). `val` may equal `base` or `idx` (aliasing);
/// `out` is distinct from the others.
#[derive(Clone, Copy, Debug)]
struct Roles {
    base: usize,
    idx: usize,
    val: usize,
    out: usize,
}

/// Every ordered (base, index) pair of distinct registers, with the value
/// register cycling through all of them (so that it also lands on the
/// base and on the index) and a free output register.
fn all_roles(n: usize) -> Vec<Roles> {
    let mut v = Vec::new();
    for base in 0..n {
        for idx in (0..n).filter(|&i| i != base) {
            let val = (base * n + idx) % n;
            let out = (1..n)
                .map(|k| (val + k) % n)
                .find(|&o| o != base && o != idx && o != val)
                .unwrap();
            v.push(Roles {
                base,
                idx,
                val,
                out,
            });
        }
    }
    v
}

/// The registers `getreg` hands out once the parameter registers are
/// given back, in its order (11 on x86-64: rbp, rsp, rax, rcx and r11 are
/// the backend's).
fn host_regs() -> Vec<u8> {
    let mut f = Func::<X64>::new();
    let p = f.lambda("%p%p", Leaf::Yes).unwrap();
    f.putreg(p.get::<P>(0).unwrap());
    f.putreg(p.get::<P>(1).unwrap());
    claim_all(&mut f).iter().map(|r| r.num()).collect()
}

fn num_regs() -> usize {
    host_regs().len()
}

/// Names of the claimed registers, for messages.
fn reg_names() -> Vec<&'static str> {
    host_regs()
        .into_iter()
        .map(|n| vcode::host::reg_name(false, n))
        .collect()
}

// -- Loads, executed ----------------------------------------------------------------

/// One load of the execution tests: the access, the index value, and
/// where in the input buffer the element lies.
#[derive(Clone, Copy, Debug)]
struct LdCase {
    a: Access,
    idx: u64,
    pos: usize,
}

/// The base register's value relative to the buffer such that
/// `base + idx * scale + disp` is `buffer + pos`.
fn adjust(a: Access, idx: u64, pos: usize) -> i64 {
    (pos as i64)
        .wrapping_sub(i64::from(a.disp))
        .wrapping_sub((idx as i64).wrapping_mul(i64::from(a.scale)))
}

/// `f(in, out)`: case `k` loads its element through `ldx` with the
/// registers in `roles` and stores the register at `out + 8k` with the
/// register's width.
fn build_loads<B: Backend>(roles: Roles, cases: &[LdCase]) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p%p", Leaf::Yes)?;
    let (pin, pout) = (p.get::<P>(0)?, p.get::<P>(1)?);
    let (lin, lout) = (f.local::<P>(), f.local::<P>());
    f.st_local(pin, lin);
    f.st_local(pout, lout);
    f.putreg(pin);
    f.putreg(pout);
    let regs = claim_all(&mut f);
    let used = [roles.base, roles.idx, roles.val, roles.out];
    let (base, idx) = (regs[roles.base].cast::<P>(), regs[roles.idx]);
    let (rd, out) = (regs[roles.val].num(), regs[roles.out].cast::<P>());
    // The reference backend computes the address in a temporary.
    for (i, &r) in regs.iter().enumerate() {
        if !used.contains(&i) {
            f.putreg(r);
        }
    }
    f.ld_local(out, lout);
    for (k, c) in cases.iter().enumerate() {
        f.ld_local(base, lin);
        f.add(base, base, adjust(c.a, c.idx, c.pos));
        f.set(idx, c.idx);
        ldx_as(&mut f, c.a, rd, base, idx);
        st_as(&mut f, c.a.ty, rd, out, 8 * k as i64);
    }
    f.retv();
    f.end()
}

const CANARY: u8 = 0xa5;

fn run_loads(code: &(impl Invoke + ?Sized), input: &[u8], n: usize) -> Vec<u8> {
    let mut out = vec![CANARY; 8 * n];
    // SAFETY: every load reads inside `input` (`pos` is at least 8 bytes
    // from either end) and every store writes one of `out`'s `n` slots.
    let r = unsafe {
        code.invoke(&[
            Value::P(input.as_ptr() as usize),
            Value::P(out.as_mut_ptr() as usize),
        ])
    };
    assert_eq!(r, Ok(Value::V));
    out
}

fn expected_loads(input: &[u8], cases: &[LdCase]) -> Vec<u8> {
    let mut out = vec![CANARY; 8 * cases.len()];
    for (k, c) in cases.iter().enumerate() {
        let v = model_load(c.a.mem, c.a.ty, &input[c.pos..]).to_le_bytes();
        let w = if c.a.ty.is_64() { 8 } else { 4 };
        out[8 * k..8 * k + w].copy_from_slice(&v[..w]);
    }
    out
}

/// The load cases of one function: every access of the matrix, the index
/// value cycling through [`IDXS`], the element at a random position.
fn load_cases(rng: &mut Rng, input_len: usize) -> Vec<LdCase> {
    let mut cases = Vec::new();
    for disp in DISPS {
        for mem in MEMS {
            for &ty in load_types(mem) {
                for scale in SCALES {
                    let idx = IDXS[cases.len() % IDXS.len()];
                    let pos = 8 + (rng.next() as usize) % (input_len - 16);
                    let a = Access {
                        mem,
                        ty,
                        scale,
                        disp,
                    };
                    cases.push(LdCase { a, idx, pos });
                }
            }
        }
    }
    cases
}

/// The first case whose slot differs, with a disassembly of that load
/// alone natively.
fn explain_load(roles: Roles, cases: &[LdCase], got: &[u8], want: &[u8]) -> String {
    let k = (0..cases.len())
        .find(|&k| got[8 * k..8 * k + 8] != want[8 * k..8 * k + 8])
        .unwrap();
    let names = reg_names();
    let one = build_loads::<X64>(roles, &cases[k..=k]).unwrap();
    format!(
        "case {k}: {:?} base {} idx {} rd {}: got {:02x?}, want {:02x?}\n{}",
        cases[k],
        names[roles.base],
        names[roles.idx],
        names[roles.val],
        &got[8 * k..8 * k + 8],
        &want[8 * k..8 * k + 8],
        one.disassemble()
    )
}

#[test]
fn loads_every_type_scale_displacement_and_register_pair() {
    let n = num_regs();
    assert_eq!(n, 11, "{:?}", reg_names());
    let mut rng = Rng(0x1d_e7ed_c0de);
    let input = rng.bytes(4096);
    for roles in all_roles(n) {
        let cases = load_cases(&mut rng, input.len());
        let want = expected_loads(&input, &cases);
        let native = build_loads::<X64>(roles, &cases).unwrap();
        let got = run_loads(&native, &input, cases.len());
        assert!(
            got == want,
            "native: {}",
            explain_load(roles, &cases, &got, &want)
        );
        let reference = build_loads::<Reference>(roles, &cases).unwrap();
        let got = run_loads(&reference, &input, cases.len());
        assert!(
            got == want,
            "reference: {}",
            explain_load(roles, &cases, &got, &want)
        );
    }
}

// -- Stores, executed ---------------------------------------------------------------

/// Each store case owns a region of the buffer and writes at `STORE_AT`
/// inside it; the rest of the region is canary.
const REGION: usize = 32;
const STORE_AT: usize = 11;

#[derive(Clone, Copy, Debug)]
struct StCase {
    a: Access,
    idx: u64,
    val: u64,
}

/// `f(buf)`: case `k` stores its value through `stx` at
/// `buf + REGION * k + STORE_AT`, with the registers in `roles` (the value
/// register may be the base or the index: then it stores their value).
fn build_stores<B: Backend>(roles: Roles, cases: &[StCase]) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p", Leaf::Yes)?;
    let pbuf = p.get::<P>(0)?;
    let lbuf = f.local::<P>();
    f.st_local(pbuf, lbuf);
    f.putreg(pbuf);
    let regs = claim_all(&mut f);
    let used = [roles.base, roles.idx, roles.val];
    let (base, idx, rs) = (
        regs[roles.base].cast::<P>(),
        regs[roles.idx],
        regs[roles.val].num(),
    );
    for (i, &r) in regs.iter().enumerate() {
        if !used.contains(&i) {
            f.putreg(r);
        }
    }
    for (k, c) in cases.iter().enumerate() {
        f.ld_local(base, lbuf);
        f.add(base, base, adjust(c.a, c.idx, REGION * k + STORE_AT));
        f.set(idx, c.idx);
        if roles.val != roles.base && roles.val != roles.idx {
            set_as(&mut f, c.a.ty, rs, c.val);
        }
        stx_as(&mut f, c.a, rs, base, idx);
    }
    f.retv();
    f.end()
}

/// Runs the stores on a copy of `canaries`, and what the model says the
/// buffer holds afterwards.
fn run_stores(
    code: &(impl Invoke + ?Sized),
    roles: Roles,
    cases: &[StCase],
    canaries: &[u8],
) -> (Vec<u8>, Vec<u8>) {
    let mut buf = canaries.to_vec();
    let addr = buf.as_mut_ptr() as usize;
    // SAFETY: case `k` writes at most 8 bytes at `REGION * k + STORE_AT`,
    // inside `buf`.
    let r = unsafe { code.invoke(&[Value::P(addr)]) };
    assert_eq!(r, Ok(Value::V));
    let mut want = canaries.to_vec();
    for (k, c) in cases.iter().enumerate() {
        let at = REGION * k + STORE_AT;
        let v = if roles.val == roles.idx {
            c.idx
        } else if roles.val == roles.base {
            (addr as u64).wrapping_add(adjust(c.a, c.idx, at) as u64)
        } else {
            c.val
        };
        let v = if c.a.ty.is_64() { v } else { v & 0xffff_ffff };
        let size = c.a.mem.size();
        want[at..at + size].copy_from_slice(&v.to_le_bytes()[..size]);
    }
    (buf, want)
}

fn store_cases(rng: &mut Rng) -> Vec<StCase> {
    let mut cases = Vec::new();
    for disp in DISPS {
        for mem in MEMS {
            for &ty in store_types(mem) {
                for scale in SCALES {
                    let idx = IDXS[cases.len() % IDXS.len()];
                    // No byte of the value equals the canary's neighbours
                    // by construction; random values with the sign bits
                    // of every width set half the time.
                    let val = rng.next();
                    let a = Access {
                        mem,
                        ty,
                        scale,
                        disp,
                    };
                    cases.push(StCase { a, idx, val });
                }
            }
        }
    }
    cases
}

fn explain_store(roles: Roles, cases: &[StCase], got: &[u8], want: &[u8]) -> String {
    let byte = (0..got.len()).find(|&i| got[i] != want[i]).unwrap();
    let k = byte / REGION;
    let names = reg_names();
    let one = build_stores::<X64>(roles, &cases[k..=k]).unwrap();
    let r = REGION * k..REGION * (k + 1);
    format!(
        "case {k} (first wrong byte {} of its region): {:?} base {} idx {} rs {}\n got {:02x?}\nwant {:02x?}\n{}",
        byte - REGION * k,
        cases[k],
        names[roles.base],
        names[roles.idx],
        names[roles.val],
        &got[r.clone()],
        &want[r],
        one.disassemble()
    )
}

#[test]
fn stores_every_type_scale_displacement_and_register_pair() {
    let n = num_regs();
    let mut rng = Rng(0x0057_07e5);
    for roles in all_roles(n) {
        let cases = store_cases(&mut rng);
        let canaries = rng.bytes(REGION * cases.len());
        let native = build_stores::<X64>(roles, &cases).unwrap();
        let (got, want) = run_stores(&native, roles, &cases, &canaries);
        assert!(
            got == want,
            "native: {}",
            explain_store(roles, &cases, &got, &want)
        );
        let reference = build_stores::<Reference>(roles, &cases).unwrap();
        let (got, want) = run_stores(&reference, roles, &cases, &canaries);
        assert!(
            got == want,
            "reference: {}",
            explain_store(roles, &cases, &got, &want)
        );
    }
}

// -- Sign and zero extension, explicitly ---------------------------------------------

/// `f(base, idx) = ldx(mem, base, idx, scale, disp)` as a `ty` value.
fn load_one<B: Backend>(a: Access) -> B::Code {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p%ul", Leaf::Yes).unwrap();
    let (base, idx) = (p.get::<P>(0).unwrap(), p.get::<UL>(1).unwrap());
    let rd = f.getreg::<UL>(Class::Temp).unwrap().num();
    ldx_as(&mut f, a, rd, base, idx);
    match a.ty {
        Ty::I => f.ret(Reg::<I>::phys(rd)),
        Ty::U => f.ret(Reg::<U>::phys(rd)),
        Ty::L => f.ret(Reg::<L>::phys(rd)),
        Ty::UL => f.ret(Reg::<UL>::phys(rd)),
        Ty::P => f.ret(Reg::<P>::phys(rd)),
        _ => unreachable!(),
    }
    f.end().unwrap()
}

/// Element `k` of a table of `mem`'s width: 0, the sign bit alone, all
/// ones, the largest positive value.
fn edge_table(size: usize) -> Vec<u8> {
    let bits = 8 * size as u32;
    let all = u64::MAX >> (64 - bits);
    [0, 1u64 << (bits - 1), all, all >> 1]
        .iter()
        .flat_map(|v| v.to_le_bytes()[..size].to_vec())
        .collect()
}

#[test]
fn sign_and_zero_extension() {
    use Value as V;
    // (mem, register type, index, expected), the element at index * size.
    let cases = [
        (Ty::C, Ty::I, 1, V::I(-128)),
        (Ty::C, Ty::U, 1, V::U(0xffff_ff80)),
        (Ty::C, Ty::L, 1, V::L(-128)),
        (Ty::C, Ty::UL, 1, V::UL(0xffff_ffff_ffff_ff80)),
        (Ty::C, Ty::I, 2, V::I(-1)),
        (Ty::C, Ty::L, 3, V::L(0x7f)),
        (Ty::UC, Ty::I, 1, V::I(128)),
        (Ty::UC, Ty::U, 1, V::U(128)),
        (Ty::UC, Ty::L, 1, V::L(128)),
        (Ty::UC, Ty::UL, 1, V::UL(128)),
        (Ty::UC, Ty::UL, 2, V::UL(255)),
        (Ty::S, Ty::I, 1, V::I(-32768)),
        (Ty::S, Ty::U, 2, V::U(u32::MAX)),
        (Ty::S, Ty::L, 1, V::L(-32768)),
        (Ty::S, Ty::UL, 2, V::UL(u64::MAX)),
        (Ty::S, Ty::I, 3, V::I(0x7fff)),
        (Ty::US, Ty::I, 1, V::I(32768)),
        (Ty::US, Ty::U, 2, V::U(65535)),
        (Ty::US, Ty::L, 2, V::L(65535)),
        (Ty::US, Ty::UL, 1, V::UL(0x8000)),
        (Ty::I, Ty::I, 1, V::I(i32::MIN)),
        (Ty::I, Ty::U, 2, V::U(u32::MAX)),
        (Ty::I, Ty::I, 3, V::I(i32::MAX)),
        // Zero-extended into a 64-bit register, `i` as well (documented).
        (Ty::I, Ty::L, 1, V::L(0x8000_0000)),
        (Ty::I, Ty::UL, 2, V::UL(0xffff_ffff)),
        (Ty::U, Ty::U, 1, V::U(0x8000_0000)),
        (Ty::U, Ty::I, 2, V::I(-1)),
        (Ty::U, Ty::L, 2, V::L(0xffff_ffff)),
        (Ty::U, Ty::UL, 1, V::UL(0x8000_0000)),
        (Ty::L, Ty::L, 1, V::L(i64::MIN)),
        (Ty::L, Ty::UL, 2, V::UL(u64::MAX)),
        (Ty::UL, Ty::L, 2, V::L(-1)),
        (Ty::UL, Ty::UL, 3, V::UL(i64::MAX as u64)),
        (Ty::P, Ty::P, 1, V::P(1 << 63)),
        (Ty::L, Ty::P, 2, V::P(usize::MAX)),
    ];
    for (mem, ty, idx, want) in cases {
        let size = mem.size();
        let data = edge_table(size);
        for disp in [0, size as i32, -(size as i32)] {
            let a = Access {
                mem,
                ty,
                scale: size as u8,
                disp,
            };
            // Base moved against the displacement: the element stays `idx`.
            let base = (data.as_ptr() as usize).wrapping_add_signed(-(disp as isize));
            let args = [Value::P(base), Value::UL(idx)];
            let native = load_one::<X64>(a);
            // SAFETY: reads one element inside `data`.
            let got = unsafe { native.invoke(&args) }.unwrap();
            assert_eq!(
                got,
                want,
                "native {a:?} idx {idx}\n{}",
                native.disassemble()
            );
            // SAFETY: as above.
            let got = unsafe { load_one::<Reference>(a).invoke(&args) }.unwrap();
            assert_eq!(got, want, "reference {a:?} idx {idx}");
        }
    }
}

/// A 32-bit element loaded into a 64-bit register is zero-extended, `i` as
/// well as `u` (the documented choice: every vcode load of 32 bits
/// zero-extends; C's `long x = *(int *)p` would sign-extend).
#[test]
fn int_element_into_a_long_register_zero_extends() {
    let words = [0x8000_0000u32, 0xffff_fffe, 0x7fff_ffff];
    for mem in [Ty::I, Ty::U] {
        for ty in [Ty::L, Ty::UL] {
            let a = Access {
                mem,
                ty,
                scale: 4,
                disp: 0,
            };
            let (native, reference) = (load_one::<X64>(a), load_one::<Reference>(a));
            for (i, &w) in words.iter().enumerate() {
                let want = Value::from_bits(ty, u64::from(w));
                let args = [Value::P(words.as_ptr() as usize), Value::UL(i as u64)];
                // SAFETY: reads one element of `words`.
                let got = unsafe { native.invoke(&args) }.unwrap();
                assert_eq!(got, want, "native {a:?} [{i}]");
                // SAFETY: as above.
                let got = unsafe { reference.invoke(&args) }.unwrap();
                assert_eq!(got, want, "reference {a:?} [{i}]");
            }
        }
    }
}

// -- Native encodings, decoded -------------------------------------------------------

fn gpr64(n: u8) -> Register {
    [
        Register::RAX,
        Register::RCX,
        Register::RDX,
        Register::RBX,
        Register::RSP,
        Register::RBP,
        Register::RSI,
        Register::RDI,
        Register::R8,
        Register::R9,
        Register::R10,
        Register::R11,
        Register::R12,
        Register::R13,
        Register::R14,
        Register::R15,
    ][n as usize]
}

fn gpr_sized(n: u8, bytes: usize) -> Register {
    let r = gpr64(n);
    match bytes {
        8 => r,
        4 => [
            Register::EAX,
            Register::ECX,
            Register::EDX,
            Register::EBX,
            Register::ESP,
            Register::EBP,
            Register::ESI,
            Register::EDI,
            Register::R8D,
            Register::R9D,
            Register::R10D,
            Register::R11D,
            Register::R12D,
            Register::R13D,
            Register::R14D,
            Register::R15D,
        ][n as usize],
        2 => [
            Register::AX,
            Register::CX,
            Register::DX,
            Register::BX,
            Register::SP,
            Register::BP,
            Register::SI,
            Register::DI,
            Register::R8W,
            Register::R9W,
            Register::R10W,
            Register::R11W,
            Register::R12W,
            Register::R13W,
            Register::R14W,
            Register::R15W,
        ][n as usize],
        // With a REX prefix: spl, bpl, sil, dil, never ah..bh.
        _ => [
            Register::AL,
            Register::CL,
            Register::DL,
            Register::BL,
            Register::SPL,
            Register::BPL,
            Register::SIL,
            Register::DIL,
            Register::R8L,
            Register::R9L,
            Register::R10L,
            Register::R11L,
            Register::R12L,
            Register::R13L,
            Register::R14L,
            Register::R15L,
        ][n as usize],
    }
}

/// The instruction `ldx` (`store` false) or `stx` should be.
fn expected_insn(a: Access, store: bool, r: u8) -> (Mnemonic, Register, MemorySize) {
    use MemorySize as M;
    if store {
        let size = a.mem.size();
        let ms = match size {
            1 => M::UInt8,
            2 => M::UInt16,
            4 => M::UInt32,
            _ => M::UInt64,
        };
        return (Mnemonic::Mov, gpr_sized(r, size), ms);
    }
    let w = if a.ty.is_64() { 8 } else { 4 };
    match a.mem {
        Ty::C => (Mnemonic::Movsx, gpr_sized(r, w), M::Int8),
        Ty::S => (Mnemonic::Movsx, gpr_sized(r, w), M::Int16),
        // A 32-bit zero extension clears the upper half.
        Ty::UC => (Mnemonic::Movzx, gpr_sized(r, 4), M::UInt8),
        Ty::US => (Mnemonic::Movzx, gpr_sized(r, 4), M::UInt16),
        Ty::I | Ty::U => (Mnemonic::Mov, gpr_sized(r, 4), M::UInt32),
        _ => (Mnemonic::Mov, gpr_sized(r, 8), M::UInt64),
    }
}

/// All accesses with every value register (the base and the index
/// included), emitted natively in one function with base and index from
/// `roles`; returns the accesses and the code, and checks that the body
/// between the first and the last is exactly their instructions.
fn build_encodings(roles: Roles, store: bool) -> (Vec<(Access, u8)>, vcode::Code, usize) {
    let mut f = Func::<X64>::new();
    let p = f.lambda("%p%p", Leaf::Yes).unwrap();
    f.putreg(p.get::<P>(0).unwrap());
    f.putreg(p.get::<P>(1).unwrap());
    let regs = claim_all(&mut f);
    let (base, idx) = (regs[roles.base].cast::<P>(), regs[roles.idx]);
    let mut emitted = Vec::new();
    let start = f.code_offset();
    for disp in DISPS {
        for mem in MEMS {
            let types = if store {
                store_types(mem)
            } else {
                load_types(mem)
            };
            for &ty in types {
                for scale in SCALES {
                    for r in &regs {
                        let a = Access {
                            mem,
                            ty,
                            scale,
                            disp,
                        };
                        if store {
                            stx_as(&mut f, a, r.num(), base, idx);
                        } else {
                            ldx_as(&mut f, a, r.num(), base, idx);
                        }
                        emitted.push((a, r.num()));
                    }
                }
            }
        }
    }
    let body = f.code_offset() - start;
    f.retv();
    (emitted, f.end().unwrap(), body)
}

fn check_encodings(store: bool) {
    let n = num_regs();
    let names = reg_names();
    for roles in all_roles(n) {
        let (emitted, code, body) = build_encodings(roles, store);
        let insns: Vec<Instruction> =
            Decoder::with_ip(64, code.bytes(), code.addr() as u64, DecoderOptions::NONE)
                .into_iter()
                .filter(|i| i.memory_index() != Register::None)
                .collect();
        assert_eq!(insns.len(), emitted.len(), "one instruction per access");
        let total: usize = insns.iter().map(|i| i.len()).sum();
        assert_eq!(total, body, "nothing else between the accesses");
        let (base, idx) = (names[roles.base], names[roles.idx]);
        let regs = host_regs();
        for (insn, &(a, r)) in insns.iter().zip(&emitted) {
            let bytes = &code.bytes()[(insn.ip() - code.addr() as u64) as usize..][..insn.len()];
            let what = || format!("{a:?} reg {r} base {base} idx {idx}: {insn} ({bytes:02x?})");
            let (mn, reg, ms) = expected_insn(a, store, r);
            assert_eq!(insn.mnemonic(), mn, "{}", what());
            let (rop, mop) = if store { (1, 0) } else { (0, 1) };
            assert_eq!(insn.op_register(rop), reg, "{}", what());
            assert_eq!(insn.op_kind(mop), iced_x86::OpKind::Memory, "{}", what());
            assert_eq!(insn.memory_size(), ms, "{}", what());
            assert_eq!(insn.memory_base(), gpr64(regs[roles.base]), "{}", what());
            assert_eq!(insn.memory_index(), gpr64(regs[roles.idx]), "{}", what());
            assert_eq!(insn.memory_index_scale(), u32::from(a.scale), "{}", what());
            assert_eq!(
                insn.memory_displacement64(),
                i64::from(a.disp) as u64,
                "{}",
                what()
            );
            // The shortest displacement: none, disp8, disp32 (r13 as a base
            // always has one; iced calls a disp32 in 64-bit mode size 8).
            let dsize = if a.disp == 0 && regs[roles.base] & 7 != 5 {
                0
            } else if (-128..128).contains(&a.disp) {
                1
            } else {
                8
            };
            assert_eq!(insn.memory_displ_size(), dsize, "{}", what());
        }
    }
}

#[test]
fn load_encodings_decode_as_one_sib_instruction() {
    check_encodings(false);
}

#[test]
fn store_encodings_decode_as_one_sib_instruction() {
    check_encodings(true);
}

#[test]
fn r12_and_r13_are_reached_as_base_and_index() {
    let regs = host_regs();
    for r in [12u8, 13, 2, 3, 6, 7, 8, 9, 10, 14, 15] {
        assert!(regs.contains(&r), "{r} not allocatable: {regs:?}");
    }
}

// -- Errors ---------------------------------------------------------------------------

fn bad_access<B: Backend>(store: bool, mem: Ty, scale: u8) -> vcode::Error {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p%ul", Leaf::Yes).unwrap();
    let (base, idx) = (p.get::<P>(0).unwrap(), p.get::<UL>(1).unwrap());
    let r = f.getreg::<L>(Class::Temp).unwrap();
    f.set(r, 1);
    f.set(r, 2);
    if store {
        f.stx(r, mem, base, idx, scale, 0);
    } else {
        f.ldx(r, mem, base, idx, scale, 0);
    }
    // Code after the refused instruction is still accepted.
    f.ldx(r, Ty::L, base, idx, 8, 0);
    f.ret(r);
    match f.end() {
        Err(e) => e,
        Ok(_) => panic!("{mem} scale {scale} accepted"),
    }
}

#[test]
fn bad_scales_and_memory_types_are_unsupported_errors() {
    for store in [false, true] {
        let method = if store { "stx" } else { "ldx" };
        let bad = [0u8, 3, 5, 6, 7, 9, 16, 255]
            .map(|s| (Ty::I, s))
            .into_iter()
            .chain([(Ty::F, 4), (Ty::D, 8), (Ty::V, 1)]);
        for (mem, scale) in bad {
            for err in [
                bad_access::<X64>(store, mem, scale),
                bad_access::<Reference>(store, mem, scale),
            ] {
                assert!(
                    matches!(err.kind(), ErrorKind::Unsupported(_)),
                    "{method} {mem} scale {scale}: {err}"
                );
                assert_eq!(err.method(), method, "{err}");
                assert_eq!(err.index(), 2, "{method} {mem} scale {scale}: {err}");
            }
        }
    }
}

// -- dec_branch_borrow ------------------------------------------------------------------

/// `f(n)`: counts iterations of a loop charged by `dec_branch_borrow` on a
/// counter starting at `n` in the `k`-th register, and returns the count
/// (`ret_count`) or the counter's final value. `backward`: the exit is
/// placed before the loop (a backward conditional branch, short unless
/// `pad`); otherwise after it (forward). `pad` nops make the loop body
/// longer than a rel8 reaches.
fn countdown<B: Backend>(k: usize, ret_count: bool, backward: bool, pad: usize) -> B::Code {
    let mut f = Func::<B>::with_backend();
    let n = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
    let regs = claim_all(&mut f);
    let r = regs[k % regs.len()];
    let c = regs[(k + 1) % regs.len()];
    f.mov(r, n);
    f.set(c, 0);
    let (top, exit) = (f.genlabel(), f.genlabel());
    if backward {
        f.jmp(top);
        f.label(exit);
        f.ret(if ret_count { c } else { r });
    }
    f.label(top);
    f.dec_branch_borrow(r, exit);
    f.add(c, c, 1);
    // A countdown that misses its borrow leaves after 5000 rounds instead
    // of running 2^64 of them.
    f.bgt(c, 5000u64, exit);
    for _ in 0..pad {
        f.nop();
    }
    f.jmp(top);
    if !backward {
        f.label(exit);
        f.ret(if ret_count { c } else { r });
    }
    f.end().unwrap()
}

fn call1(code: &(impl Invoke + ?Sized), x: u64) -> u64 {
    // SAFETY: the functions compute on their argument only.
    match unsafe { code.invoke(&[Value::UL(x)]) }.unwrap_or_else(|e| panic!("{e}")) {
        Value::UL(v) => v,
        v => panic!("unexpected {v:?}"),
    }
}

#[test]
fn countdown_loops_run_n_times_and_leave_all_ones() {
    for (k, name) in reg_names().into_iter().enumerate() {
        for backward in [false, true] {
            for pad in [0, 200] {
                for ret_count in [true, false] {
                    let native = countdown::<X64>(k, ret_count, backward, pad);
                    let reference = countdown::<Reference>(k, ret_count, backward, pad);
                    for n in [0u64, 1, 2, 1000] {
                        let want = if ret_count { n } else { u64::MAX };
                        let what = format!(
                            "{} n={n} backward={backward} pad={pad} count={ret_count}",
                            name
                        );
                        assert_eq!(
                            call1(&native, n),
                            want,
                            "native {what}\n{}",
                            native.disassemble()
                        );
                        assert_eq!(call1(&reference, n), want, "reference {what}");
                    }
                }
            }
        }
    }
}

/// `f(x)`: one `dec_branch_borrow` on `x`; returns the register after it
/// (`ret_taken` false) or whether the branch was taken.
fn one_step<B: Backend>(k: usize, ret_taken: bool) -> B::Code {
    let mut f = Func::<B>::with_backend();
    let x = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
    let regs = claim_all(&mut f);
    let r = regs[k % regs.len()];
    f.mov(r, x);
    let taken = f.genlabel();
    f.dec_branch_borrow(r, taken);
    if ret_taken {
        f.set(r, 0);
    }
    f.ret(r);
    f.label(taken);
    if ret_taken {
        f.set(r, 1);
    }
    f.ret(r);
    f.end().unwrap()
}

#[test]
fn countdown_borrows_only_from_zero() {
    for k in 0..num_regs() {
        for ret_taken in [false, true] {
            let native = one_step::<X64>(k, ret_taken);
            let reference = one_step::<Reference>(k, ret_taken);
            for x in [
                0u64,
                1,
                2,
                1000,
                0x7fff_ffff,
                0x8000_0000,
                0x1_0000_0000,
                1 << 63,
                (1 << 63) + 1,
                u64::MAX - 1,
                u64::MAX,
            ] {
                let want = if ret_taken {
                    u64::from(x == 0)
                } else {
                    x.wrapping_sub(1)
                };
                assert_eq!(call1(&native, x), want, "native x={x:#x} reg {k}");
                assert_eq!(call1(&reference, x), want, "reference x={x:#x} reg {k}");
            }
        }
    }
}

#[test]
fn countdown_to_an_unplaced_label_is_a_typed_error() {
    let mut f = Func::<X64>::new();
    let x = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
    let l = f.genlabel();
    f.dec_branch_borrow(x, l);
    f.ret(x);
    let err = f.end().unwrap_err();
    assert_eq!(err.method(), "dec_branch_borrow", "{err}");
    assert!(
        matches!(err.kind(), ErrorKind::UnplacedLabel { .. }),
        "{err}"
    );
}

#[test]
fn sub_branch_to_an_unplaced_label_is_a_typed_error_naming_it() {
    let mut f = Func::<X64>::new();
    let x = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
    let l = f.genlabel();
    f.sub_branch(x, 16, true, l);
    f.ret(x);
    let err = f.end().unwrap_err();
    assert_eq!(err.method(), "sub_branch", "{err}");
    assert!(
        matches!(err.kind(), ErrorKind::UnplacedLabel { .. }),
        "{err}"
    );
}

// -- code_offset and disassemble_marked -------------------------------------------------

#[test]
fn marked_listing_shows_the_titles_at_their_instructions() {
    let mut f = Func::<X64>::new();
    let p = f.lambda("%p%ul", Leaf::Yes).unwrap();
    let (base, idx) = (p.get::<P>(0).unwrap(), p.get::<UL>(1).unwrap());
    let rd = f.getreg::<L>(Class::Temp).unwrap();
    let m0 = f.code_offset();
    f.ldx(rd, Ty::C, base, idx, 1, 0);
    let m1 = f.code_offset();
    f.ldx(rd, Ty::S, base, idx, 2, 0x1000);
    let m2 = f.code_offset();
    f.add(rd, rd, 1);
    f.ret(rd);
    let code = f.end().unwrap();
    assert_eq!(m0, 0, "the body starts at offset 0");
    assert!(m0 < m1 && m1 < m2, "{m0} {m1} {m2}");

    let marks = [
        (m0, "first load".to_string()),
        (m1, "second load".to_string()),
        (m2, "the add".to_string()),
    ];
    let listing = code.disassemble_marked(&marks);
    let lines: Vec<&str> = listing.lines().collect();
    let heading = |t: &str| {
        lines
            .iter()
            .position(|l| l.trim() == format!("; {t}"))
            .unwrap_or_else(|| panic!("no heading {t:?} in\n{listing}"))
    };
    let at = [
        "prologue",
        "first load",
        "second load",
        "the add",
        "epilogue",
    ]
    .map(heading);
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}\n{listing}");
    // Each title stands right before its instruction.
    let after = |i: usize| lines[at[i] + 1];
    assert!(
        after(1).contains("movsx") && after(1).contains("byte ptr"),
        "{listing}"
    );
    assert!(
        after(2).contains("movsx") && after(2).contains("word ptr"),
        "{listing}"
    );
    assert!(after(2).contains("*2+1000h]"), "{listing}");
    assert!(after(3).contains("add"), "{listing}");
    // Exactly one instruction between the first two titles, of m1 - m0 bytes.
    assert_eq!(at[2] - at[1], 2, "{listing}");
    let hex = after(1).split_whitespace().nth(1).unwrap();
    assert_eq!(hex.len() / 2, m1 - m0, "{listing}");

    // Without marks: the plain listing's instructions, the same ones.
    let plain = code.disassemble();
    let bare = code.disassemble_marked(&[]);
    let insns = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| !l.trim_start().starts_with(';'))
            .map(String::from)
            .collect()
    };
    assert_eq!(insns(&plain), insns(&bare));
    assert_eq!(insns(&listing), insns(&plain));
    assert!(
        bare.contains("; prologue") && bare.contains("; epilogue"),
        "{bare}"
    );
}

/// With `align` in the body (the prologue padded to keep it), a mark taken
/// after the padding still heads its instruction, at an aligned offset.
#[test]
fn marks_follow_aligned_code() {
    for n in [1usize, 2, 4, 8, 16, 32, 64] {
        let mut f = Func::<X64>::new();
        let p = f.lambda("%p%ul", Leaf::Yes).unwrap();
        let (base, idx) = (p.get::<P>(0).unwrap(), p.get::<UL>(1).unwrap());
        let rd = f.getreg::<UL>(Class::Temp).unwrap();
        f.set(rd, 1);
        f.align(n);
        let at = f.code_offset();
        f.ldx(rd, Ty::UL, base, idx, 8, -8);
        f.ret(rd);
        let code = f.end().unwrap();
        assert_eq!(at % n, 0, "align({n}) left offset {at}");
        let listing = code.disassemble_marked(&[(at, "aligned load".to_string())]);
        let lines: Vec<&str> = listing.lines().collect();
        let h = lines
            .iter()
            .position(|l| l.trim() == "; aligned load")
            .unwrap_or_else(|| panic!("{listing}"));
        let insn = lines[h + 1];
        assert!(insn.contains("mov") && insn.contains("*8-8]"), "{listing}");
        let off = usize::from_str_radix(insn.split_whitespace().next().unwrap(), 16).unwrap();
        assert_eq!(off % n, 0, "align({n}): the load at {off:#x}\n{listing}");
        assert_eq!((code.addr() + off) % n.min(16), 0, "{listing}");
        let data = [5u64, 6];
        let args = [Value::P(data.as_ptr() as usize), Value::UL(2)];
        // SAFETY: reads element 1 of `data`.
        assert_eq!(unsafe { code.invoke(&args) }, Ok(Value::UL(6)));
    }
}

#[test]
fn reference_code_offset_counts_instructions() {
    let mut f = Func::<Reference>::with_backend();
    let p = f.lambda("%p%ul", Leaf::Yes).unwrap();
    let (base, idx) = (p.get::<P>(0).unwrap(), p.get::<UL>(1).unwrap());
    let rd = f.getreg::<L>(Class::Temp).unwrap();
    let m0 = f.code_offset();
    f.ldx(rd, Ty::C, base, idx, 1, 0);
    let m1 = f.code_offset();
    f.add(rd, rd, 1);
    let m2 = f.code_offset();
    f.ret(rd);
    f.end().unwrap();
    assert!(m0 < m1 && m1 < m2, "{m0} {m1} {m2}");
    assert_eq!(m2 - m1, 1, "one core instruction for the add");
}

/// The reference backend computes the address in a temporary from
/// `getreg`: with every register claimed it refuses (a typed error, not a
/// panic), where the native instruction needs none.
#[test]
fn reference_needs_a_free_temporary() {
    fn build<B: Backend>(store: bool) -> vcode::Result<B::Code> {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%p%ul", Leaf::Yes)?;
        let (base, idx) = (p.get::<P>(0)?, p.get::<UL>(1)?);
        let regs = claim_all(&mut f);
        f.set(regs[0], 7);
        if store {
            f.stx(regs[0], Ty::L, base, idx, 8, 0);
        } else {
            f.ldx(regs[0], Ty::L, base, idx, 8, 0);
        }
        f.ret(regs[0]);
        f.end()
    }
    for store in [false, true] {
        let mut data = [1u64, 2, 3];
        let args = [Value::P(data.as_mut_ptr() as usize), Value::UL(2)];
        let native = build::<X64>(store).unwrap();
        // SAFETY: reads or writes element 2 of `data`.
        let got = unsafe { native.invoke(&args) }.unwrap();
        assert_eq!(got, Value::UL(if store { 7 } else { 3 }));
        match build::<Reference>(store) {
            Err(e) => {
                assert_eq!(e.method(), if store { "stx" } else { "ldx" }, "{e}");
                assert!(
                    matches!(e.kind(), ErrorKind::RegistersExhausted { .. }),
                    "{e}"
                );
            }
            Ok(_) => panic!("the reference backend found a free register"),
        }
    }
}

/// `ldx`/`stx` refuse a float register on both backends: natively its
/// number would be encoded as the integer register of the same number
/// (`ldx(xmm8, l, rdi, rsi, 8, 0)` was `4c 8b 04 f7`, `mov r8, [rdi+rsi*8]`).
#[test]
fn float_registers_are_refused() {
    use vcode::D;
    fn build<B: Backend>(store: bool) -> vcode::Result<B::Code> {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%p%ul", Leaf::Yes)?;
        let (base, idx) = (p.get::<P>(0)?, p.get::<UL>(1)?);
        let x = f.getreg::<D>(Class::Temp)?;
        f.set(x, 1.5);
        if store {
            f.stx(x, Ty::L, base, idx, 8, 0);
        } else {
            f.ldx(x, Ty::L, base, idx, 8, 0);
        }
        f.ret(x);
        f.end()
    }
    for store in [false, true] {
        for (backend, r) in [
            ("native", build::<X64>(store).map(|_| ())),
            ("reference", build::<Reference>(store).map(|_| ())),
        ] {
            let e = r.expect_err(backend);
            assert_eq!(e.method(), if store { "stx" } else { "ldx" }, "{e}");
        }
    }
}

/// A function with a frame and `align` in its body: the padding that keeps
/// the body aligned lies before the entry, never executed, so the code
/// from the entry to the body is the prologue alone, without no-ops, and
/// the aligned instruction still sits at an aligned address.
#[test]
fn alignment_padding_is_not_executed() {
    for n in [16usize, 32, 64] {
        let mut f = Func::<X64>::new();
        let p = f.lambda("%p%ul", Leaf::No).unwrap();
        let (base, idx) = (p.get::<P>(0).unwrap(), p.get::<UL>(1).unwrap());
        let rd = f.getreg::<UL>(Class::Temp).unwrap();
        let keep = f.getreg::<UL>(Class::Persistent).unwrap();
        let slot = f.local();
        f.st_local(idx, slot);
        f.set(keep, 0);
        f.align(n);
        let at = f.code_offset();
        f.ld_local(rd, slot);
        f.ldx(rd, Ty::UL, base, rd, 8, -8);
        f.add(rd, rd, keep);
        f.ret(rd);
        let code = f.end().unwrap();
        let (body, _) = code.parts();
        let listing = code.disassemble();
        // The prologue: no instruction before the body is a no-op.
        let mut dec = Decoder::with_ip(64, &code.bytes()[..body], 0, DecoderOptions::NONE);
        let mut first = true;
        for insn in dec.iter() {
            if first {
                assert_eq!(insn.mnemonic(), Mnemonic::Push, "{listing}");
                first = false;
            }
            assert_ne!(insn.mnemonic(), Mnemonic::Nop, "align({n}):\n{listing}");
            assert_ne!(insn.mnemonic(), Mnemonic::Xchg, "align({n}):\n{listing}");
        }
        assert!(!first, "a frame: {listing}");
        // The aligned instruction's address: aligned as far as the block
        // is (16 bytes).
        assert_eq!((code.addr() + body + at) % n.min(16), 0, "{listing}");
        let data = [5u64, 6];
        let args = [Value::P(data.as_ptr() as usize), Value::UL(2)];
        // SAFETY: reads element 1 of `data`.
        assert_eq!(unsafe { code.invoke(&args) }, Ok(Value::UL(6)));
    }
}

// -- beq_min ------------------------------------------------------------------------------

/// `f(x)`: 1 if `beq_min` on `x` (in the `k`-th register) branches, else 0.
fn min_test<B: Backend>(k: usize) -> B::Code {
    use vcode::ext::MinTest;
    let mut f = Func::<B>::with_backend();
    let x = f.lambda("%l", Leaf::Yes).unwrap().get::<L>(0).unwrap();
    let regs = claim_all(&mut f);
    let r = regs[k % regs.len()].cast::<L>();
    f.mov(r, x);
    let taken = f.genlabel();
    f.beq_min(r, taken);
    f.set(r, 0);
    f.ret(r);
    f.label(taken);
    f.set(r, 1);
    f.ret(r);
    f.end().unwrap()
}

fn call_l(code: &(impl Invoke + ?Sized), x: i64) -> i64 {
    // SAFETY: the functions compute on their argument only.
    match unsafe { code.invoke(&[Value::L(x)]) }.unwrap_or_else(|e| panic!("{e}")) {
        Value::L(v) => v,
        v => panic!("unexpected {v:?}"),
    }
}

/// `cmp r, 1; jo` is taken for `i64::MIN` alone: its neighbours, the
/// other extremes and the values around zero fall through, in every
/// register, natively and on the reference backend.
#[test]
fn beq_min_branches_on_the_least_value_only() {
    for k in 0..num_regs() {
        let native = min_test::<X64>(k);
        let reference = min_test::<Reference>(k);
        for x in [
            i64::MIN,
            i64::MIN + 1,
            i64::MIN + 2,
            i64::MAX,
            i64::MAX - 1,
            -1,
            0,
            1,
            2,
            i64::from(i32::MIN),
        ] {
            let want = i64::from(x == i64::MIN);
            assert_eq!(
                call_l(&native, x),
                want,
                "native x={x}\n{}",
                native.disassemble()
            );
            assert_eq!(call_l(&reference, x), want, "reference x={x}");
        }
    }
}

fn sub_branch_test<B: Backend>(k: usize, by: i32, borrow: bool) -> B::Code {
    let mut f = Func::<B>::with_backend();
    let x = f.lambda("%l", Leaf::Yes).unwrap().get::<L>(0).unwrap();
    let regs = claim_all(&mut f);
    let r = regs[k % regs.len()].cast::<UL>();
    f.mov(r, x.cast::<UL>());
    let taken = f.genlabel();
    f.sub_branch(r, by, borrow, taken);
    // Not taken: the result complemented, so that both the branch and the
    // subtraction's result are checked.
    f.xor(r, r, -1);
    f.ret(r.cast::<L>());
    f.label(taken);
    f.ret(r.cast::<L>());
    f.end().unwrap()
}

/// `sub r, k; jb` / `sub r, k; jae` subtract `k` (wrapping) and branch on
/// the borrow alone (`r < k` unsigned before), in every register, for
/// `k` of 1, 16 and 127, natively and on the reference backend; `k`
/// outside `1..=127` is refused.
#[test]
fn sub_branch_branches_on_the_subtractions_borrow() {
    for k in 0..num_regs() {
        for by in [1, 16, 127] {
            for borrow in [true, false] {
                let native = sub_branch_test::<X64>(k, by, borrow);
                let reference = sub_branch_test::<Reference>(k, by, borrow);
                let b = i64::from(by);
                for x in [
                    0,
                    1,
                    b - 1,
                    b,
                    b + 1,
                    2 * b,
                    -1,
                    -b,
                    i64::MIN,
                    i64::MAX,
                    i64::from(u32::MAX),
                ] {
                    let after = x.wrapping_sub(b);
                    let taken = ((x as u64) < (b as u64)) == borrow;
                    let want = if taken { after } else { !after };
                    assert_eq!(
                        call_l(&native, x),
                        want,
                        "native x={x} k={by} borrow={borrow}\n{}",
                        native.disassemble()
                    );
                    assert_eq!(call_l(&reference, x), want, "reference x={x}");
                }
            }
        }
    }
    for by in [0, 128, -1] {
        let mut f = Func::<X64>::with_backend();
        let x = f.lambda("%l", Leaf::Yes).unwrap().get::<L>(0).unwrap();
        let r = x.cast::<UL>();
        let l = f.genlabel();
        f.sub_branch(r, by, true, l);
        f.label(l);
        f.ret(x);
        assert!(f.end().is_err(), "k={by} accepted");
    }
}
