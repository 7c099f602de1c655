//! Differential tests, written once for every target: random vcode
//! programs run on the target's backend and on the reference backend
//! (parameterized by the target's calling convention) must give identical
//! results, in their return values and in every byte of the memory they
//! touch.
//!
//! A program is generated from a seed (proptest supplies the seeds; a
//! failing seed is printed and can be replayed with `VCODE_DIFF_SEED`). The
//! same generator, generic over the backend, drives both backends, so both
//! receive the same instruction sequence. Programs mix:
//!
//! * straight-line code over every type (binary and unary operations,
//!   `set`, every conversion, the shipped extensions),
//! * forward branches and bounded loops (backward branches; a counter in a
//!   persistent register guarantees termination), early returns,
//!   subroutines entered with `jal` and left with `ret_link`,
//! * loads and stores of every width into a buffer the test provides, with
//!   immediate offsets (including ones beyond 32 bits) and register
//!   offsets, and stack locals,
//! * calls with random argument lists to the target's host callbacks
//!   ([`Callbacks::natives`]: Rust `extern "C"` functions of several
//!   signatures on x86-64, directly and through a register) and to another
//!   generated function whose signature is chosen at random (up to 8
//!   integer and 11 float arguments, so the stack carries some), with
//!   register and immediate (integer and float) arguments,
//! * per-function register classifications (paper §5.3): the default,
//!   every register callee-saved, or some registers unavailable,
//! * register pressure up to exhaustion: every program takes every
//!   register `getreg` can give (a probe function finds the count and
//!   checks that one more is a `RegistersExhausted` error).
//!
//! Division by zero and `MIN / -1` are avoided by construction, and every
//! memory access stays inside the buffer, so the native code never traps.
//!
//! The test binary that declares this module names the target as
//! `crate::Arch` and gives its callbacks ([`Callbacks`]).
//! **On aarch64 the generator is restricted**: the code runs under
//! emulation, which cannot call host (x86-64) functions, so there are no
//! Rust callbacks and calls go only to the generated callee (with its
//! random signature); everything else is the same generator.
//!
//! The number of programs is `VCODE_DIFF_CASES`, 10,000 by default (about
//! 1.5 s in release on the development machine for x86-64; aarch64 under
//! emulation takes longer).
//!
//! The second half of the file tests the typed errors of both backends.

use crate::Arch;
use crate::common::r;
use crate::common::target::Target;
use proptest::prelude::*;
use vcode::ext::{Bswap, MinMax, OnesComplement, Popcount, Select, Sqrt};
use vcode::host;
use vcode::reference::{Fault, FaultKind};
use vcode::{
    AnyReg, Arg, Backend, Callee, Class, D, Error, ErrorKind, F, Func, I, Invoke, InvokeError, L,
    Leaf, Local, Operand, P, Reg, Ty, Type, U, UL, Value,
};

/// The backend under test.
type Native = <Arch as Target>::Native;
/// The reference backend with the target's calling convention.
type Reference = <Arch as Target>::Reference;

// ---------------------------------------------------------------------------
// Random numbers
// ---------------------------------------------------------------------------

/// SplitMix64: the generator decides everything from the seed, so the
/// native and reference builds of a seed are the same program.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
    /// An integer that is often an edge value.
    fn int(&mut self) -> u64 {
        const EDGE: &[u64] = &[
            0,
            1,
            -1i64 as u64,
            2,
            31,
            32,
            63,
            64,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            0x1_0000_0000,
            0x8000_0000_0000_0000,
            0x7fff_ffff_ffff_ffff,
            0x1234_5678_9abc_def0,
            -7i64 as u64,
        ];
        match self.below(4) {
            0 => self.pick(EDGE),
            1 => self.next() % 200,
            2 => (self.next() % 200).wrapping_neg(),
            _ => self.next(),
        }
    }
    fn f64(&mut self) -> f64 {
        const EDGE: &[f64] = &[
            0.0,
            -0.0,
            1.0,
            -1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            5e-324,
            9223372036854775808.0,
            18446744073709551616.0,
            2147483648.0,
            -2147483649.0,
            4294967295.5,
            1e300,
        ];
        match self.below(3) {
            0 => self.pick(EDGE),
            1 => (self.next() % 20000) as f64 / 64.0 - 150.0,
            _ => f64::from_bits(self.next()),
        }
    }
    fn f32(&mut self) -> f32 {
        match self.below(3) {
            0 | 1 => self.f64() as f32,
            _ => f32::from_bits(self.next() as u32),
        }
    }
}

// ---------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------

fn set_bits<B: Backend>(f: &mut Func<B>, ty: Ty, n: u8, bits: u64) {
    any_ty!(ty, |T| f.set(r::<T>(n), T::from_bits(bits)))
}

const INT_TYS: [Ty; 5] = [Ty::I, Ty::U, Ty::L, Ty::UL, Ty::P];

// ---------------------------------------------------------------------------
// The buffer the programs work on
// ---------------------------------------------------------------------------

/// Integer data: loads and stores of every width at any byte offset.
const INT_AREA: i64 = 0;
/// Float data: 32 slots of 8 bytes, `f` in even slots, `d` in odd ones.
const FLOAT_AREA: i64 = 512;
/// Where programs store their integer registers at the end.
const INT_OUT: i64 = 768;
/// Where programs store their float registers at the end.
const FLOAT_OUT: i64 = 1024;
const BUF: usize = 1280;

fn fill_buffer(rng: &mut Rng) -> Vec<u8> {
    let mut b = vec![0u8; BUF];
    for x in &mut b[..FLOAT_AREA as usize] {
        *x = rng.next() as u8;
    }
    for k in 0..32 {
        let at = FLOAT_AREA as usize + 8 * k;
        if k % 2 == 0 {
            b[at..at + 4].copy_from_slice(&rng.f32().to_bits().to_le_bytes());
        } else {
            b[at..at + 8].copy_from_slice(&rng.f64().to_bits().to_le_bytes());
        }
    }
    b
}

/// Compares two buffers: bytes equal, except that a float slot may hold
/// different NaNs (which NaN an operation returns depends on operand
/// order, which the reference backend does not promise to mirror).
fn same_buffers(a: &[u8], b: &[u8], float_out: &[Ty]) -> Result<(), String> {
    for at in (0..BUF).step_by(8) {
        let (x, y) = (&a[at..at + 8], &b[at..at + 8]);
        if x == y {
            continue;
        }
        let ty = if (FLOAT_AREA as usize..INT_OUT as usize).contains(&at) {
            Some(if (at / 8) % 2 == 0 { Ty::F } else { Ty::D })
        } else if at >= FLOAT_OUT as usize {
            float_out.get((at - FLOAT_OUT as usize) / 8).copied()
        } else {
            None
        };
        let ok = ty.is_some()
            && if ty == Some(Ty::F) {
                let fx = f32::from_le_bytes(x[..4].try_into().unwrap());
                let fy = f32::from_le_bytes(y[..4].try_into().unwrap());
                fx.is_nan() && fy.is_nan() && x[4..] == y[4..]
            } else {
                f64::from_le_bytes(x.try_into().unwrap()).is_nan()
                    && f64::from_le_bytes(y.try_into().unwrap()).is_nan()
            };
        if !ok {
            return Err(format!(
                "buffers differ at byte {at}: native {x:02x?}, reference {y:02x?}"
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Callbacks
// ---------------------------------------------------------------------------

/// A host function the programs may call, and its signature.
pub struct Callback {
    /// Its address.
    pub addr: usize,
    /// Its parameter types.
    pub params: &'static [Ty],
    /// Its return type.
    pub ret: Ty,
}

/// The functions outside generated code that programs call: each
/// target's test binary provides them.
pub trait Callbacks {
    /// The callbacks the generator may call (none where the code runs
    /// under emulation: emulated code cannot call host functions). One
    /// whose first parameter is `p` is always given the buffer.
    fn natives() -> Vec<Callback>;
    /// `i32 f()` returning 7, for the typed-error tests' calls.
    fn count() -> usize;
}

// ---------------------------------------------------------------------------
// The generated callee: a random signature
// ---------------------------------------------------------------------------

struct CalleeShape {
    params: Vec<Ty>,
    ret: Ty,
}

fn callee_shape(rng: &mut Rng) -> CalleeShape {
    let (ni, nf) = (rng.below(9), rng.below(12));
    let mut params: Vec<Ty> = (0..ni).map(|_| rng.pick(&INT_TYS)).collect();
    params.extend((0..nf).map(|_| rng.pick(&[Ty::F, Ty::D])));
    // Shuffle, so integer and float arguments interleave.
    for i in (1..params.len()).rev() {
        params.swap(i, rng.below(i + 1));
    }
    CalleeShape {
        params,
        ret: rng.pick(&[Ty::L, Ty::D, Ty::I, Ty::F, Ty::UL]),
    }
}

/// A function of `shape` that folds all its arguments into its result.
fn build_callee<B: Backend>(shape: &CalleeShape, salt: u64) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let sig: String = shape.params.iter().map(|t| format!("%{t}")).collect();
    let p = f.lambda(&sig, Leaf::Yes)?;
    let acc = f.getreg::<L>(Class::Temp)?;
    let t = f.getreg::<L>(Class::Temp)?;
    let accd = f.getreg::<D>(Class::Temp)?;
    let td = f.getreg::<D>(Class::Temp)?;
    let k = f.getreg::<D>(Class::Temp)?;
    f.set(acc, salt as i64);
    f.set(accd, 0.25);
    for (i, a) in p.all().iter().enumerate() {
        if a.ty.is_float() {
            float_ty!(a.ty, |T| f.cv(td, r::<T>(a.n)));
            f.set(k, (i + 1) as f64);
            f.mul(td, td, k);
            f.add(accd, accd, td);
        } else {
            int_ty!(a.ty, |T| f.cv(t, r::<T>(a.n)));
            f.mul(t, t, 2 * i as i64 + 3);
            f.xor(acc, acc, t);
            f.lsh(acc, acc, 1 + (salt as i64 & 7));
            f.add(acc, acc, t);
        }
    }
    match shape.ret {
        Ty::L | Ty::UL => {
            f.cv(t, accd);
            f.add(acc, acc, t);
            f.ret(acc.cast::<L>());
            if shape.ret == Ty::UL {
                // Not reached: a ret of another type would be an error,
                // so return through the same type.
            }
        }
        Ty::I => {
            let x = f.getreg::<I>(Class::Temp)?;
            f.cv(x, acc);
            f.ret(x);
        }
        Ty::F => {
            let x = f.getreg::<F>(Class::Temp)?;
            f.cv(td, acc);
            f.add(accd, accd, td);
            f.cv(x, accd);
            f.ret(x);
        }
        _ => {
            f.cv(td, acc);
            f.add(accd, accd, td);
            f.ret(accd);
        }
    }
    f.end()
}

// ---------------------------------------------------------------------------
// Program generation
// ---------------------------------------------------------------------------

/// What a program is given and returns.
struct Shape {
    /// Parameter types after the buffer pointer.
    params: Vec<Ty>,
    ret: Ty,
    leaf: bool,
    /// The register classification (paper §5.3).
    cfg: vcode::RegConfig,
    /// Types of the stack locals.
    locals: Vec<Ty>,
    /// Instructions at the top level.
    len: usize,
}

fn shape(rng: &mut Rng) -> Shape {
    let all = [Ty::I, Ty::U, Ty::L, Ty::UL, Ty::P, Ty::F, Ty::D];
    // Up to 6 integer parameters after the buffer pointer (the 7th integer
    // argument is on the stack) and up to 10 float ones (2 on the stack).
    let (ni, nf) = (rng.below(7), rng.below(11));
    let mut params: Vec<Ty> = (0..ni).map(|_| rng.pick(&INT_TYS)).collect();
    params.extend((0..nf).map(|_| rng.pick(&[Ty::F, Ty::D])));
    for i in (1..params.len()).rev() {
        params.swap(i, rng.below(i + 1));
    }
    let cfg = match rng.below(5) {
        // Every register the function touches is saved and restored.
        0 => vcode::RegConfig::all_callee_saved(),
        // Some registers are off limits (with few integer parameters, so
        // that the ones the program needs remain).
        1 if ni <= 3 => {
            use host::gpr::{R10, R12, R13};
            let mut c = vcode::RegConfig::default();
            c.set_gpr(R10, vcode::RegClass::Unavailable).unwrap();
            c.set_gpr(rng.pick(&[R12, R13]), vcode::RegClass::Unavailable)
                .unwrap();
            c.set_xmm(rng.pick(&[8u8, 9, 14]), vcode::RegClass::Unavailable)
                .unwrap();
            c
        }
        _ => vcode::RegConfig::default(),
    };
    Shape {
        params,
        cfg,
        ret: rng.pick(&[Ty::I, Ty::U, Ty::L, Ty::UL, Ty::P, Ty::F, Ty::D, Ty::V]),
        leaf: rng.chance(30),
        locals: (0..rng.below(4)).map(|_| rng.pick(&all)).collect(),
        len: 5 + rng.below(40),
    }
}

/// A program under construction: its registers and state.
struct Gen<'a, B: Backend> {
    f: Func<B>,
    rng: Rng,
    /// Buffer pointer (persistent).
    buf: Reg<P>,
    /// Loop counters, by depth (persistent).
    counters: [Reg<L>; 2],
    /// Scratch (temporary): address and divisor computations.
    sc: u8,
    /// Integer registers: number, 64-bit class.
    ints: Vec<(u8, bool)>,
    /// Float registers: number and type.
    floats: Vec<(u8, Ty)>,
    /// Float registers calls preserve (persistent ones).
    fpersist: Vec<u8>,
    locals: Vec<AnyLocal>,
    ret: Ty,
    leaf: bool,
    callee: &'a B::Code,
    callee_params: &'a [Ty],
    callee_ret: Ty,
    /// Subroutines entered with `jal`, emitted after the body.
    subs: Vec<vcode::Label>,
    in_sub: bool,
}

/// Registers every program takes, then the counts of integer and float
/// registers `getreg` still gives: found by a probe that asks until it is
/// refused.
fn probe(sh: &Shape) -> (usize, usize) {
    let mut f = Func::<Native>::with_backend();
    setup_fixed(&mut f, sh).expect("setup");
    let class = if sh.leaf {
        Class::Temp
    } else {
        Class::Persistent
    };
    let mut n = 0;
    let e = loop {
        match f.getreg::<L>(Class::Temp) {
            Ok(_) => n += 1,
            Err(e) => break e,
        }
    };
    assert!(
        matches!(
            e.kind(),
            ErrorKind::RegistersExhausted {
                class: "temporary",
                what: "integer"
            }
        ),
        "{e}"
    );
    let mut m = 0;
    let e = loop {
        match f.getreg::<D>(class) {
            Ok(_) => m += 1,
            Err(e) => break e,
        }
    };
    assert!(
        matches!(
            e.kind(),
            ErrorKind::RegistersExhausted { what: "float", .. }
        ),
        "{e}"
    );
    assert_eq!(e.method(), "getreg");
    // A refusal is an answer, not a mistake: the client may spill instead,
    // and the function still ends.
    f.retv();
    f.end().expect("getreg refusals do not poison end");
    (n, m)
}

/// The fixed part: lambda, the buffer pointer moved to a persistent
/// register (and its argument register released), loop counters, scratch.
/// Returns the other parameters.
#[allow(clippy::type_complexity)]
fn setup_fixed<B: Backend>(
    f: &mut Func<B>,
    sh: &Shape,
) -> vcode::Result<(Vec<AnyReg>, (Reg<P>, [Reg<L>; 2], u8))> {
    let sig: String = std::iter::once(Ty::P)
        .chain(sh.params.iter().copied())
        .map(|t| format!("%{t}"))
        .collect();
    f.set_config(sh.cfg.clone());
    let p = f.lambda(&sig, if sh.leaf { Leaf::Yes } else { Leaf::No })?;
    let buf = f.getreg::<P>(Class::Persistent)?;
    let p0 = p.get::<P>(0)?;
    f.mov(buf, p0);
    f.putreg(p0);
    let counters = [
        f.getreg::<L>(Class::Persistent)?,
        f.getreg::<L>(Class::Persistent)?,
    ];
    let sc = f.getreg::<L>(Class::Temp)?.num();
    Ok((p.all()[1..].to_vec(), (buf, counters, sc)))
}

fn build<B: Backend>(
    seed: u64,
    sh: &Shape,
    counts: (usize, usize),
    callee: &B::Code,
    cshape: &CalleeShape,
) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let (params, (buf, counters, sc)) = setup_fixed(&mut f, sh)?;
    let fclass = if sh.leaf {
        Class::Temp
    } else {
        Class::Persistent
    };
    let mut g = Gen {
        f,
        rng: Rng(seed ^ 0x5eed),
        buf,
        counters,
        sc,
        ints: Vec::new(),
        floats: Vec::new(),
        fpersist: Vec::new(),
        locals: Vec::new(),
        ret: sh.ret,
        leaf: sh.leaf,
        callee,
        callee_params: &cshape.params,
        callee_ret: cshape.ret,
        subs: Vec::new(),
        in_sub: false,
    };
    // The parameters and every register left make the pool: the function
    // runs with all registers allocated.
    for a in &params {
        if a.ty.is_float() {
            g.floats.push((a.n, a.ty));
        } else {
            g.ints.push((a.n, a.ty.is_64()));
        }
    }
    for _ in 0..counts.0 {
        let n = g.f.getreg::<L>(Class::Temp)?.num();
        let wide = g.rng.chance(60);
        g.ints.push((n, wide));
        let v = g.rng.int();
        set_bits(&mut g.f, if wide { Ty::UL } else { Ty::U }, n, v);
    }
    for k in 0..counts.1 {
        let n = g.f.getreg::<D>(fclass)?.num();
        let t = if k % 2 == 0 { Ty::F } else { Ty::D };
        g.floats.push((n, t));
        if !sh.leaf {
            g.fpersist.push(n);
        }
        let bits = if t == Ty::F {
            g.rng.f32().to_bits() as u64
        } else {
            g.rng.f64().to_bits()
        };
        set_bits(&mut g.f, t, n, bits);
    }
    // Locals, written before anything reads them.
    for &t in &sh.locals {
        let l = match t {
            Ty::I => AnyLocal::I(g.f.local()),
            Ty::U => AnyLocal::U(g.f.local()),
            Ty::L => AnyLocal::L(g.f.local()),
            Ty::UL => AnyLocal::UL(g.f.local()),
            Ty::P => AnyLocal::P(g.f.local()),
            Ty::F => AnyLocal::F(g.f.local()),
            _ => AnyLocal::D(g.f.local()),
        };
        g.locals.push(l);
    }
    for i in 0..g.locals.len() {
        g.local_op(i, true);
    }
    g.block(sh.len, 0);
    g.finish();
    g.f.end()
}

/// A stack local of any type.
#[derive(Copy, Clone)]
enum AnyLocal {
    I(Local<I>),
    U(Local<U>),
    L(Local<L>),
    UL(Local<UL>),
    P(Local<P>),
    F(Local<F>),
    D(Local<D>),
}

macro_rules! with_local {
    ($l:expr, |$T:ident, $x:ident| $e:expr) => {
        match $l {
            AnyLocal::I($x) => {
                type $T = I;
                $e
            }
            AnyLocal::U($x) => {
                type $T = U;
                $e
            }
            AnyLocal::L($x) => {
                type $T = L;
                $e
            }
            AnyLocal::UL($x) => {
                type $T = UL;
                $e
            }
            AnyLocal::P($x) => {
                type $T = P;
                $e
            }
            AnyLocal::F($x) => {
                type $T = F;
                $e
            }
            AnyLocal::D($x) => {
                type $T = D;
                $e
            }
        }
    };
}

impl<B: Backend> Gen<'_, B> {
    /// An integer register and a type of its class.
    fn int(&mut self) -> (u8, Ty) {
        let (n, wide) = self.rng.pick(&self.ints);
        let ty = if wide {
            self.rng.pick(&[Ty::L, Ty::UL, Ty::P])
        } else {
            self.rng.pick(&[Ty::I, Ty::U])
        };
        (n, ty)
    }

    /// An integer register of the class of `ty`, if there is one.
    fn int_of(&mut self, ty: Ty) -> Option<u8> {
        let regs: Vec<u8> = self
            .ints
            .iter()
            .filter(|&&(_, w)| w == ty.is_64())
            .map(|&(n, _)| n)
            .collect();
        (!regs.is_empty()).then(|| self.rng.pick(&regs))
    }

    fn float_of(&mut self, ty: Ty) -> Option<u8> {
        let regs: Vec<u8> = self
            .floats
            .iter()
            .filter(|&&(_, t)| t == ty)
            .map(|&(n, _)| n)
            .collect();
        (!regs.is_empty()).then(|| self.rng.pick(&regs))
    }

    /// A register of type `ty` (integer class or exact float type).
    fn reg_of(&mut self, ty: Ty) -> Option<u8> {
        if ty.is_float() {
            self.float_of(ty)
        } else {
            self.int_of(ty)
        }
    }

    fn block(&mut self, len: usize, depth: usize) {
        let mut pending: Vec<(usize, vcode::Label)> = Vec::new();
        for i in 0..len {
            self.insn(depth, len - i);
            // Place the labels of forward branches whose distance is run out.
            pending.retain_mut(|(left, l)| {
                *left -= 1;
                if *left == 0 {
                    self.f.label(*l);
                    false
                } else {
                    true
                }
            });
            if self.rng.chance(12) {
                let l = self.f.genlabel();
                self.branch(l);
                pending.push((1 + self.rng.below(len - i), l));
            }
        }
        for (_, l) in pending {
            self.f.label(l);
        }
    }

    /// A branch to `l` on a random comparison.
    fn branch(&mut self, l: vcode::Label) {
        let c = self.rng.below(6);
        if self.rng.chance(25) && !self.floats.is_empty() {
            let ty = self.rng.pick(&[Ty::F, Ty::D]);
            let (Some(a), Some(b)) = (self.float_of(ty), self.float_of(ty)) else {
                return self.f.jmp(l);
            };
            float_ty!(ty, |T| emit_br(
                &mut self.f,
                c,
                r::<T>(a),
                Operand::Reg(r(b)),
                l
            ));
        } else {
            let (a, ty) = self.int();
            let b: Result<u8, i64> = if self.rng.chance(50) {
                Ok(self.int_of(ty).unwrap_or(a))
            } else {
                Err(self.rng.int() as i64)
            };
            int_ty!(ty, |T| emit_br(&mut self.f, c, r::<T>(a), opnd(b), l));
        }
    }

    fn insn(&mut self, depth: usize, room: usize) {
        match self.rng.below(100) {
            0..=29 => self.binop(),
            30..=37 => self.unop(),
            38..=41 => {
                let (n, ty) = self.int();
                let v = self.rng.int();
                set_bits(&mut self.f, ty, n, v);
            }
            42..=49 => self.convert(),
            50..=59 => self.load(),
            60..=67 => self.store(),
            68..=70 if !self.locals.is_empty() => {
                let i = self.rng.below(self.locals.len());
                let st = self.rng.chance(50);
                self.local_op(i, st);
            }
            71..=77 => self.float_op(),
            78..=83 => self.extension(),
            84..=89 if depth < 2 && room > 1 => {
                let iters = 1 + self.rng.below(4);
                let len = 1 + self.rng.below(12);
                let c = self.counters[depth];
                self.f.set(c, iters as i64);
                let top = self.f.genlabel();
                self.f.label(top);
                self.block(len, depth + 1);
                self.f.sub(c, c, 1);
                self.f.bgt(c, 0, top);
            }
            90..=94 if !self.leaf => self.call(),
            97 if !self.in_sub => {
                // A subroutine, emitted after the body, entered with jal.
                let l = self.f.genlabel();
                self.f.jal(l);
                self.subs.push(l);
            }
            95..=96 => {
                // An early return, skipped or not.
                let skip = self.f.genlabel();
                self.branch(skip);
                self.ret();
                self.f.label(skip);
            }
            _ => self.f.nop(),
        }
    }

    fn binop(&mut self) {
        let (rd, ty) = self.int();
        let a = self.int_of(ty).unwrap_or(rd);
        let op = self.rng.below(10);
        let imm = self.rng.chance(40);
        let b: Result<u8, i64> = if imm {
            Err(self.rng.int() as i64)
        } else {
            Ok(self.int_of(ty).unwrap_or(a))
        };
        int_ty!(ty, |T| {
            let signed = T::TY == Ty::I || T::TY == Ty::L;
            let (rd, a) = (r::<T>(rd), r::<T>(a));
            let b = match (op, b) {
                // Division: a divisor that is neither 0 nor -1.
                (3 | 4, Ok(b)) => {
                    let s = r::<T>(self.sc);
                    self.f.or(s, r::<T>(b), 1);
                    if signed {
                        let ok = self.f.genlabel();
                        self.f.bne(s, Operand::Imm(-1), ok);
                        self.f.add(s, s, 4);
                        self.f.label(ok);
                    }
                    Operand::Reg(s)
                }
                (3 | 4, Err(v)) => {
                    let bits = if T::TY.is_64() { v } else { v as i32 as i64 };
                    let v =
                        if bits == 0 || (signed && bits == -1) || (!T::TY.is_64() && v as u32 == 0)
                        {
                            3
                        } else {
                            v
                        };
                    Operand::Imm(v)
                }
                (_, b) => opnd(b),
            };
            match op {
                0 => self.f.add(rd, a, b),
                1 => self.f.sub(rd, a, b),
                2 => self.f.mul(rd, a, b),
                3 => self.f.div(rd, a, b),
                4 => self.f.rem(rd, a, b),
                5 => self.f.and(rd, a, b),
                6 => self.f.or(rd, a, b),
                7 => self.f.xor(rd, a, b),
                8 => self.f.lsh(rd, a, b),
                _ => self.f.rsh(rd, a, b),
            }
        });
    }

    fn unop(&mut self) {
        let (rd, ty) = self.int();
        let a = self.int_of(ty).unwrap_or(rd);
        let u = self.rng.below(4);
        int_ty!(ty, |T| {
            let (rd, a) = (r::<T>(rd), r::<T>(a));
            match u {
                0 => self.f.com(rd, a),
                1 => self.f.not(rd, a),
                2 => self.f.mov(rd, a),
                _ => self.f.neg(rd, a),
            }
        });
    }

    fn float_op(&mut self) {
        if self.floats.is_empty() {
            return;
        }
        let ty = self.rng.pick(&[Ty::F, Ty::D]);
        let (Some(rd), Some(a), Some(b)) =
            (self.float_of(ty), self.float_of(ty), self.float_of(ty))
        else {
            return;
        };
        let op = self.rng.below(6);
        float_ty!(ty, |T| {
            let (rd, a, b) = (r::<T>(rd), r::<T>(a), r::<T>(b));
            match op {
                0 => self.f.add(rd, a, b),
                1 => self.f.sub(rd, a, b),
                2 => self.f.mul(rd, a, b),
                3 => self.f.div(rd, a, b),
                4 => self.f.neg(rd, a),
                _ => self.f.mov(rd, a),
            }
        });
    }

    fn convert(&mut self) {
        let all = [Ty::I, Ty::U, Ty::L, Ty::UL, Ty::P, Ty::F, Ty::D];
        let (from, to) = (self.rng.pick(&all), self.rng.pick(&all));
        if (from == Ty::P && to.is_float()) || (to == Ty::P && from.is_float()) {
            return;
        }
        let (Some(rs), Some(rd)) = (self.reg_of(from), self.reg_of(to)) else {
            return;
        };
        any_ty!(from, |S| any_ty!(to, |T| self.f.cv(r::<T>(rd), r::<S>(rs))));
    }

    /// The address of a random access of `size` bytes in the area at
    /// `area` with `span` bytes: (base register, offset operand).
    fn address(&mut self, area: i64, span: i64, align: i64) -> (Reg<P>, Operand<P>) {
        let at = area + (self.rng.below(((span - 8) / align + 1) as usize) as i64) * align;
        let s = r::<P>(self.sc);
        match self.rng.below(4) {
            0 | 1 => (self.buf, Operand::Imm(at)),
            2 => {
                // A base far away and an offset beyond 32 bits.
                let k = self.rng.pick(&[
                    1i64 << 31,
                    1 << 32,
                    0x1234_5678_9abc_def0,
                    -(1 << 31) - 8,
                    -(1i64 << 40),
                ]);
                self.f.sub(s, self.buf, k);
                (s, Operand::Imm(k + at))
            }
            _ => {
                // A register offset computed from a random register.
                let (n, wide) = self.rng.pick(&self.ints);
                let sl = r::<UL>(self.sc);
                if wide {
                    self.f.mov(sl, r::<UL>(n));
                } else {
                    self.f.cv(sl, r::<U>(n));
                }
                let mask = if align == 1 { 0xff } else { 0xf0 };
                self.f.and(sl, sl, mask);
                let rest = at - area;
                let base = area
                    + if align == 1 {
                        rest.min(span - 8 - 0xff)
                    } else {
                        rest % 16
                    };
                self.f.add(sl, sl, base);
                (self.buf, Operand::Reg(s))
            }
        }
    }

    fn load(&mut self) {
        if self.rng.chance(25) && !self.floats.is_empty() {
            let ty = self.rng.pick(&[Ty::F, Ty::D]);
            let Some(rd) = self.float_of(ty) else { return };
            let (base, off) = self.float_slot(ty, FLOAT_AREA);
            float_ty!(ty, |T| self.f.ld(r::<T>(rd), base, off));
            return;
        }
        let (rd, ty) = self.int();
        let w = self.rng.below(5);
        let (base, off) = self.address(INT_AREA, 512, 1);
        int_ty!(ty, |T| {
            let rd = r::<T>(rd);
            match w {
                0 => self.f.ld(rd, base, off),
                1 => self.f.ldc(rd, base, off),
                2 => self.f.lduc(rd, base, off),
                3 => self.f.lds(rd, base, off),
                _ => self.f.ldus(rd, base, off),
            }
        });
    }

    /// A float slot of type `ty` (f: even slots, d: odd) in the area at `area`.
    fn float_slot(&mut self, ty: Ty, area: i64) -> (Reg<P>, Operand<P>) {
        let slot = 2 * self.rng.below(16) as i64 + (ty == Ty::D) as i64;
        if self.rng.chance(50) {
            (self.buf, Operand::Imm(area + 8 * slot))
        } else {
            // Register offset: 16 * (x & 15) + slot parity.
            let (n, wide) = self.rng.pick(&self.ints);
            let sl = r::<UL>(self.sc);
            if wide {
                self.f.mov(sl, r::<UL>(n));
            } else {
                self.f.cv(sl, r::<U>(n));
            }
            self.f.and(sl, sl, 0xf0);
            self.f.add(sl, sl, area + 8 * (ty == Ty::D) as i64);
            (self.buf, Operand::Reg(r(self.sc)))
        }
    }

    fn store(&mut self) {
        if self.rng.chance(25) && !self.floats.is_empty() {
            let ty = self.rng.pick(&[Ty::F, Ty::D]);
            let Some(rs) = self.float_of(ty) else { return };
            let (base, off) = self.float_slot(ty, FLOAT_AREA);
            float_ty!(ty, |T| self.f.st(r::<T>(rs), base, off));
            return;
        }
        let (rs, ty) = self.int();
        let w = self.rng.below(3);
        let (base, off) = self.address(INT_AREA, 512, 1);
        int_ty!(ty, |T| {
            let rs = r::<T>(rs);
            match w {
                0 => self.f.st(rs, base, off),
                1 => self.f.stc(rs, base, off),
                _ => self.f.sts(rs, base, off),
            }
        });
    }

    fn local_op(&mut self, i: usize, store: bool) {
        let l = self.locals[i];
        let t = with_local!(l, |T, _x| T::TY);
        let Some(n) = self.reg_of(t) else { return };
        let via_addr = self.rng.chance(30);
        with_local!(l, |T, l| {
            if via_addr {
                let s = r::<P>(self.sc);
                self.f.addr_local(s, l);
                if store {
                    self.f.st(r::<T>(n), s, 0)
                } else {
                    self.f.ld(r::<T>(n), s, 0)
                }
            } else if store {
                self.f.st_local(r::<T>(n), l);
            } else {
                self.f.ld_local(r::<T>(n), l);
            }
        });
    }

    fn extension(&mut self) {
        match self.rng.below(8) {
            0 if !self.floats.is_empty() => {
                let ty = self.rng.pick(&[Ty::F, Ty::D]);
                let (Some(rd), Some(a)) = (self.float_of(ty), self.float_of(ty)) else {
                    return;
                };
                float_ty!(ty, |T| self.f.sqrt(r::<T>(rd), r::<T>(a)));
            }
            1 | 2 => {
                let (rd, ty) = self.int();
                let (a, b) = (self.int_of(ty).unwrap_or(rd), self.int_of(ty).unwrap_or(rd));
                let max = self.rng.chance(50);
                int_ty!(ty, |T| if max {
                    self.f.max(r::<T>(rd), r::<T>(a), r::<T>(b))
                } else {
                    self.f.min(r::<T>(rd), r::<T>(a), r::<T>(b))
                });
            }
            3 => {
                let (rd, ty) = self.int();
                let (c, a, b) = (
                    self.int_of(ty).unwrap_or(rd),
                    self.int_of(ty).unwrap_or(rd),
                    self.int_of(ty).unwrap_or(rd),
                );
                int_ty!(ty, |T| self.f.select(
                    r::<T>(rd),
                    r::<T>(c),
                    r::<T>(a),
                    r::<T>(b)
                ));
            }
            4 | 5 => {
                let (rd, ty) = self.int();
                let ty = if ty == Ty::P { Ty::UL } else { ty };
                let a = self.int_of(ty).unwrap_or(rd);
                let k = self.rng.below(4);
                match k {
                    0 => int_ty!(ty, |T| self.f.bswap16(r::<T>(rd), r::<T>(a))),
                    1 => int_ty!(ty, |T| self.f.bswap32(r::<T>(rd), r::<T>(a))),
                    2 if ty.is_64() => self.f.bswap64(r::<L>(rd), r::<L>(a)),
                    // The portable popcount takes two temporaries.
                    _ => self.with_scratch(2, &[rd, a], |g| {
                        int_ty!(ty, |T| g.f.popcount(r::<T>(rd), r::<T>(a)))
                    }),
                }
            }
            6 => {
                let (rd, ty) = self.int();
                let ty = if ty.is_64() { Ty::UL } else { Ty::U };
                let (a, b) = (self.int_of(ty).unwrap_or(rd), self.int_of(ty).unwrap_or(rd));
                // The portable add1c takes a temporary.
                self.with_scratch(1, &[rd, a, b], |g| {
                    int_ty!(ty, |T| g.f.add1c(r::<T>(rd), r::<T>(a), r::<T>(b)))
                });
            }
            _ if !self.floats.is_empty() => {
                let ty = self.rng.pick(&[Ty::F, Ty::D]);
                let (Some(rd), Some(a), Some(b)) =
                    (self.float_of(ty), self.float_of(ty), self.float_of(ty))
                else {
                    return;
                };
                let max = self.rng.chance(50);
                float_ty!(ty, |T| if max {
                    self.f.max(r::<T>(rd), r::<T>(a), r::<T>(b))
                } else {
                    self.f.min(r::<T>(rd), r::<T>(a), r::<T>(b))
                });
            }
            _ => {}
        }
    }

    /// Runs `emit` with `n` pool registers (none of `avoid`) released, for
    /// an extension whose portable definition (what the reference backend
    /// runs) takes temporaries from `getreg`; then claims them back with
    /// fresh values.
    fn with_scratch(&mut self, n: usize, avoid: &[u8], emit: impl FnOnce(&mut Self)) {
        let free: Vec<(u8, bool)> = self
            .ints
            .iter()
            .copied()
            .filter(|(r, _)| !avoid.contains(r))
            .take(n)
            .collect();
        if free.len() < n {
            return;
        }
        for &(x, _) in &free {
            self.f.putreg(r::<L>(x));
        }
        emit(self);
        for &(x, wide) in &free {
            self.f.reserve(r::<L>(x)).expect("claim back");
            let v = self.rng.int();
            set_bits(&mut self.f, if wide { Ty::UL } else { Ty::U }, x, v);
        }
    }

    /// An argument of type `t`: a register of that type or an immediate.
    fn arg(&mut self, t: Ty) -> Option<Arg> {
        if t == Ty::P && self.rng.chance(50) {
            return Some(Arg::Reg(AnyReg {
                ty: Ty::P,
                n: self.buf.num(),
            }));
        }
        if !t.is_float() && self.rng.chance(30) {
            return Some(Arg::Imm(t, self.rng.int() as i64));
        }
        if t.is_float() && self.rng.chance(20) {
            // A float immediate argument: its bits.
            let bits = if t == Ty::F {
                self.rng.f32().to_bits() as u64
            } else {
                self.rng.f64().to_bits()
            };
            return Some(Arg::Imm(t, bits as i64));
        }
        self.reg_of(t).map(|n| Arg::Reg(AnyReg { ty: t, n }))
    }

    fn call(&mut self) {
        let natives = Arch::natives();
        let k = self.rng.below(natives.len() + 2);
        let (params, ret): (Vec<Ty>, Ty) = if k < natives.len() {
            (natives[k].params.to_vec(), natives[k].ret)
        } else {
            (self.callee_params.to_vec(), self.callee_ret)
        };
        let mut args = Vec::new();
        for &t in &params {
            let Some(a) = self.arg(t) else { return };
            args.push(a);
        }
        if params.first() == Some(&Ty::P) && k < natives.len() {
            // The callback writes through its pointer: always the buffer.
            args[0] = Arg::Reg(AnyReg {
                ty: Ty::P,
                n: self.buf.num(),
            });
        }
        let rd = if ret == Ty::V || self.rng.chance(20) {
            None
        } else {
            self.reg_of(ret)
        };
        let callee = if k < natives.len() {
            if self.rng.chance(30) {
                let s = r::<P>(self.sc);
                self.f.set(s, natives[k].addr);
                Callee::Reg(self.sc)
            } else {
                Callee::Native(natives[k].addr)
            }
        } else {
            Callee::Code(self.callee)
        };
        match rd {
            Some(n) => any_ty!(ret, |T| self.f.call(r::<T>(n), callee, &args)),
            None => self.f.callv(callee, &args),
        }
        // Temporaries did not survive: give them new values.
        let ints = self.ints.clone();
        for (n, wide) in ints {
            if host::CALLEE_SAVED_GPR & (1 << n) == 0 && rd.is_none_or(|d| ret.is_float() || d != n)
            {
                let v = self.rng.int();
                set_bits(&mut self.f, if wide { Ty::UL } else { Ty::U }, n, v);
            }
        }
        let floats = self.floats.clone();
        for (n, t) in floats {
            if !self.fpersist.contains(&n) && rd.is_none_or(|d| !ret.is_float() || d != n) {
                let bits = if t == Ty::F {
                    self.rng.f32().to_bits() as u64
                } else {
                    self.rng.f64().to_bits()
                };
                set_bits(&mut self.f, t, n, bits);
            }
        }
    }

    fn ret(&mut self) {
        match self.ret {
            Ty::V => self.f.retv(),
            t => match self.reg_of(t) {
                Some(n) => any_ty!(t, |T| self.f.ret(r::<T>(n))),
                None => {
                    // No register of the class: return a constant.
                    let s = self.sc;
                    assert!(!t.is_float(), "the float pool has both types");
                    set_bits(&mut self.f, t, s, 42);
                    int_ty!(t, |T| self.f.ret(r::<T>(s)));
                }
            },
        }
    }

    /// Stores every pool register into the output areas, then returns.
    fn finish(&mut self) {
        let ints = self.ints.clone();
        for (k, (n, wide)) in ints.into_iter().enumerate() {
            let at = INT_OUT + 8 * k as i64;
            if wide {
                self.f.st(r::<UL>(n), self.buf, at);
            } else {
                self.f.st(r::<U>(n), self.buf, at);
            }
        }
        let floats = self.floats.clone();
        for (k, (n, t)) in floats.into_iter().enumerate() {
            let at = FLOAT_OUT + 8 * k as i64;
            float_ty!(t, |T| self.f.st(r::<T>(n), self.buf, at));
        }
        self.ret();
        // The subroutines: a block each (loops, branches, calls, early
        // returns), then back to the jal.
        self.in_sub = true;
        for l in std::mem::take(&mut self.subs) {
            self.f.label(l);
            let len = 1 + self.rng.below(10);
            self.block(len, 1);
            self.f.ret_link();
        }
    }
}

fn opnd<T>(b: Result<u8, i64>) -> Operand<T> {
    match b {
        Ok(n) => Operand::Reg(Reg::phys(n)),
        Err(v) => Operand::Imm(v),
    }
}

fn emit_br<B: Backend, T: Type>(
    f: &mut Func<B>,
    c: usize,
    a: Reg<T>,
    b: Operand<T>,
    l: vcode::Label,
) {
    match c {
        0 => f.blt(a, b, l),
        1 => f.ble(a, b, l),
        2 => f.bgt(a, b, l),
        3 => f.bge(a, b, l),
        4 => f.beq(a, b, l),
        _ => f.bne(a, b, l),
    }
}

// ---------------------------------------------------------------------------
// Running a seed
// ---------------------------------------------------------------------------

fn arg_value(rng: &mut Rng, t: Ty) -> Value {
    match t {
        Ty::F => Value::F(rng.f32()),
        Ty::D => Value::D(rng.f64()),
        t => Value::from_bits(t, rng.int()),
    }
}

/// Generates program `seed`, runs it on both backends and compares.
fn run_seed(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed);
    let sh = shape(&mut rng);
    let cshape = callee_shape(&mut rng);
    if std::env::var_os("VCODE_DIFF_VERBOSE").is_some() {
        eprintln!(
            "shape: leaf={} params={:?} ret={} cfg={:?}",
            sh.leaf, sh.params, sh.ret, sh.cfg
        );
    }
    let counts = probe(&sh);
    let native_callee =
        build_callee::<Native>(&cshape, seed).map_err(|e| format!("callee (native): {e}"))?;
    let ref_callee =
        build_callee::<Reference>(&cshape, seed).map_err(|e| format!("callee (reference): {e}"))?;
    let native = build::<Native>(seed, &sh, counts, &native_callee, &cshape)
        .map_err(|e| format!("native: {e}"))?;
    let reference = build::<Reference>(seed, &sh, counts, &ref_callee, &cshape)
        .map_err(|e| format!("reference: {e}"))?;
    // Every instruction generated decodes.
    Arch::check_decodes(&native)?;
    // Both backends run on identical buffer contents at the same address
    // (pointers derived from the buffer may flow into results): the native
    // run's buffer is saved, the buffer reset, and the reference run's
    // compared with it.
    let init = fill_buffer(&mut rng);
    let mut buf = init.clone();
    let extra: Vec<Value> = sh.params.iter().map(|&t| arg_value(&mut rng, t)).collect();
    let args: Vec<Value> = std::iter::once(Value::P(buf.as_mut_ptr() as usize))
        .chain(extra.iter().copied())
        .collect();
    if std::env::var_os("VCODE_DIFF_VERBOSE").is_some() {
        eprintln!("{}\n{}", reference.listing(), Arch::listing(&native));
    }
    // SAFETY: the generated program touches only its buffer (every address
    // is the buffer pointer plus a bounded offset) and calls the callbacks
    // with arguments of their parameter types.
    let vn = unsafe { Arch::run(&native, &args) };
    let buf_n = buf.clone();
    buf.copy_from_slice(&init);
    // SAFETY: as above.
    let vr = unsafe { reference.invoke(&args) };
    let buf_r = buf.clone();
    let ctx = || {
        format!(
            "{sh_dbg}\n{}",
            reference.listing(),
            sh_dbg = format_args!("seed {seed:#x}")
        )
    };
    let (vn, vr) = match (vn, vr) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            return Err(format!(
                "native {a:?}, reference {b:?}\n{}\n{}",
                Arch::stop_context(&native),
                ctx()
            ));
        }
    };
    if !vn.same(vr) {
        return Err(format!(
            "return values differ: native {vn:?}, reference {vr:?}\n{}",
            ctx()
        ));
    }
    let float_out = float_out_types(&sh, counts);
    same_buffers(&buf_n, &buf_r, &float_out).map_err(|e| format!("{e}\n{}", ctx()))?;
    Ok(())
}

/// The types of the float registers a program stores at `FLOAT_OUT`, in
/// order: its float parameters, then the registers from `getreg`.
fn float_out_types(sh: &Shape, counts: (usize, usize)) -> Vec<Ty> {
    let mut v: Vec<Ty> = sh.params.iter().copied().filter(|t| t.is_float()).collect();
    v.extend((0..counts.1).map(|k| if k % 2 == 0 { Ty::F } else { Ty::D }));
    v
}

fn cases() -> u32 {
    std::env::var("VCODE_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    /// Random programs agree on both backends.
    #[test]
    fn native_and_reference_agree(seed in any::<u64>()) {
        if let Err(e) = run_seed(seed) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Replays one seed: `VCODE_DIFF_SEED=0x... cargo test -p vcode --test differential replay`
/// (`--features emu --test aarch64_differential` for aarch64).
#[test]
fn replay() {
    if let Ok(s) = std::env::var("VCODE_DIFF_SEED") {
        let seed = u64::from_str_radix(
            s.trim_start_matches("0x"),
            if s.starts_with("0x") { 16 } else { 10 },
        )
        .unwrap();
        run_seed(seed).unwrap();
    }
    // And a few fixed seeds always.
    for seed in 0..50 {
        if std::env::var_os("VCODE_DIFF_VERBOSE").is_some() {
            eprintln!("seed {seed}");
        }
        run_seed(seed).unwrap_or_else(|e| panic!("{e}"));
    }
}

// ---------------------------------------------------------------------------
// Typed errors
// ---------------------------------------------------------------------------

/// A generation error: what, at which instruction, in which method.
fn expect_err(
    e: vcode::Result<impl std::fmt::Debug>,
    index: u32,
    method: &str,
    kind: ErrorKind,
) -> Error {
    let e = e.expect_err("an error");
    assert_eq!(
        (e.index(), e.method(), e.kind()),
        (index, method, &kind),
        "{e}"
    );
    // The message says what and where.
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("instruction {index}")) && msg.contains(method),
        "{msg}"
    );
    e
}

/// A run-time fault of the reference backend.
fn expect_fault(r: Result<Value, InvokeError>, index: u32, method: &'static str, kind: FaultKind) {
    match r {
        Err(InvokeError::Fault(f)) => {
            assert_eq!(
                f,
                Fault {
                    index,
                    method,
                    kind: kind.clone()
                }
            );
            let msg = f.to_string();
            assert!(
                msg.contains(&format!("instruction {index}")) && msg.contains(method),
                "{msg}"
            );
        }
        other => panic!("expected fault {kind:?} at {index} in {method}, got {other:?}"),
    }
}

/// The reference backend reports a register the function does not own:
/// one released by `putreg`, one the backend keeps, a callee-saved one
/// never claimed.
#[test]
fn reference_reports_unallocated_registers() {
    let mut f = Func::<Reference>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    let t = f.getreg::<L>(Class::Temp).unwrap();
    f.set(t, 1); // 0
    f.putreg(t);
    f.add(x, x, 1); // 1
    f.add(x, t, 1); // 2: t was released
    f.ret(x);
    let e = expect_err(
        f.end(),
        2,
        "add",
        ErrorKind::BadRegister {
            reg: Arch::FIRST_TEMP.into(),
            why: "used after putreg released it",
        },
    );
    assert!(e.to_string().contains(Arch::FIRST_TEMP));

    let mut f = Func::<Reference>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    f.mov(x, Reg::phys(host::gpr::RAX)); // 0: rax is the backend's
    f.ret(x);
    expect_err(
        f.end(),
        0,
        "mov",
        ErrorKind::BadRegister {
            reg: Arch::SCRATCH.into(),
            why: "kept by the backend for its own sequences",
        },
    );

    let mut f = Func::<Reference>::with_backend();
    let p = f.lambda("%l", Leaf::No).unwrap();
    let x = p.get::<L>(0).unwrap();
    f.nop(); // 0
    f.add(x, x, Reg::<L>::s(0)); // 1: S0 read, never written or reserved
    f.ret(x);
    expect_err(
        f.end(),
        1,
        "add",
        ErrorKind::BadRegister {
            reg: Arch::FIRST_SAVED.into(),
            why: "callee-saved, read before this function wrote or claimed it",
        },
    );
}

/// Writes `S<k>` for each bit `k` of `writes` (reserving those of
/// `reserves` first) with `(x ^ k) * (2k + 3)`, and adds each to `acc`: the
/// callee half of the callee-saved tests below; [`s_writes_sum`] is what it
/// adds up.
fn write_s<B: Backend>(
    f: &mut Func<B>,
    x: Reg<L>,
    acc: Reg<L>,
    writes: u8,
    reserves: u8,
) -> vcode::Result<()> {
    for k in 0..host::NUM_S {
        if writes & 1 << k == 0 {
            continue;
        }
        let s = Reg::<L>::s(k);
        if reserves & 1 << k != 0 {
            f.reserve(s)?;
        }
        f.xor(s, x, k as i64);
        f.mul(s, s, 2 * k as i64 + 3);
        f.add(acc, acc, s);
    }
    Ok(())
}

/// What [`write_s`] adds to its accumulator for `x`.
fn s_writes_sum(x: i64, writes: u8) -> i64 {
    (0..host::NUM_S)
        .filter(|k| writes & 1 << k != 0)
        .fold(0i64, |acc, k| {
            acc.wrapping_add((x ^ k as i64).wrapping_mul(2 * k as i64 + 3))
        })
}

/// Holds `base + step * k` in every `S<k>`, calls `g` with its argument,
/// and folds the S registers after the call into `g`'s result
/// (`r = r * 31 + S<k>` in order): a caller whose result shows any S
/// register `g` failed to keep. [`s_guard_fold`] is the same fold.
fn s_guard_caller<B: Backend>(g: &B::Code, base: i64, step: i64) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%l", Leaf::No)?;
    let x = p.get::<L>(0)?;
    for k in 0..host::NUM_S {
        let s = f.reserve(Reg::<L>::s(k))?;
        f.set(s, base + step * k as i64);
    }
    let r = f.getreg::<L>(Class::Temp)?;
    f.call(r, Callee::Code(g), &[Arg::Reg(x.any())]);
    for k in 0..host::NUM_S {
        f.mul(r, r, 31);
        f.add(r, r, Reg::<L>::s(k));
    }
    f.ret(r);
    f.end()
}

/// [`s_guard_caller`]'s result when `g` returned `r` and kept every S.
fn s_guard_fold(mut r: i64, base: i64, step: i64) -> i64 {
    for k in 0..host::NUM_S {
        r = r.wrapping_mul(31).wrapping_add(base + step * k as i64);
    }
    r
}

/// Runs `g` (on each backend) under [`s_guard_caller`] with `x`: the
/// native result and the reference's.
fn run_under_guard(
    gn: &<Native as Backend>::Code,
    gr: &<Reference as Backend>::Code,
    base: i64,
    step: i64,
    x: i64,
) -> (Value, Value) {
    let cn = s_guard_caller::<Native>(gn, base, step).unwrap();
    let cr = s_guard_caller::<Reference>(gr, base, step).unwrap();
    // SAFETY: the generated functions take one long and call only
    // each other.
    let native = unsafe { Arch::run(&cn, &[Value::L(x)]) }.unwrap();
    // SAFETY: the reference backend runs no native code here.
    let reference = unsafe { cr.invoke(&[Value::L(x)]) }.unwrap();
    (native, reference)
}

/// The callee-saved registers of the fixed names (`Reg::s`): a function
/// that writes some, reserving some of them first and not the others,
/// leaves its caller's as they were, on the target's backend as on the
/// reference. Both save every callee-saved register a function writes;
/// the native backend once saved only those reserved, and overwrote its
/// caller's `rbx`.
#[test]
fn callee_saved_registers_a_function_writes_survive_its_call() {
    /// `x -> sum over the written S<k> of (x ^ k) * (2k + 3)`, each
    /// written (and read back) in S<k>.
    fn callee<B: Backend>(writes: u8, reserves: u8) -> vcode::Result<B::Code> {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%l", Leaf::Yes)?;
        let x = p.get::<L>(0)?;
        let acc = f.getreg::<L>(Class::Temp)?;
        f.set(acc, 0);
        write_s(&mut f, x, acc, writes, reserves)?;
        f.ret(acc);
        f.end()
    }
    let (base, step) = (0x5a5a_0000, 0x111);
    let want = |x: i64, writes: u8| s_guard_fold(s_writes_sum(x, writes), base, step);
    let mut rng = Rng(0xca11_ee5a_7ed0);
    let all = (1u8 << host::NUM_S) - 1;
    for case in 0..64 {
        let writes = if case == 0 {
            all
        } else {
            rng.next() as u8 & all
        };
        let reserves = if case == 1 {
            0
        } else {
            rng.next() as u8 & writes
        };
        let x = rng.next() as i64 >> rng.below(40);
        let gn = callee::<Native>(writes, reserves).unwrap();
        let gr = callee::<Reference>(writes, reserves).unwrap();
        let what = format!("writes {writes:#07b}, reserved {reserves:#07b}, x = {x}");
        let (native, reference) = run_under_guard(&gn, &gr, base, step, x);
        assert_eq!(native, Value::L(want(x, writes)), "native: {what}");
        assert_eq!(reference, native, "reference: {what}");
    }
}

/// Callee-saved registers handed out by `getreg` (persistent ones of a
/// function that is not a leaf) and released with `putreg` before `end`
/// are saved too, beside fixed names written with and without `reserve`:
/// the caller's `S` registers survive, on the target's backend as on the
/// reference. `end` saves every callee-saved register the function ever
/// took, not only those it still holds.
#[test]
fn callee_saved_registers_released_before_end_survive_the_call() {
    /// Writes the S<k> of `writes` (reserving those of `reserves`) as
    /// the test above does, then holds up to `gets` persistent registers
    /// from `getreg`, the j-th set to `x + 7(j + 1)` and added up, and
    /// releases them all. Returns the code and how many `getreg` handed out.
    fn callee<B: Backend>(
        writes: u8,
        reserves: u8,
        gets: usize,
    ) -> vcode::Result<(B::Code, usize)> {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%l", Leaf::No)?;
        let x = p.get::<L>(0)?;
        let acc = f.getreg::<L>(Class::Temp)?;
        f.set(acc, 0);
        write_s(&mut f, x, acc, writes, reserves)?;
        let mut held = Vec::new();
        for j in 0..gets {
            // Exhausted when the fixed names took every callee-saved one.
            let Ok(r) = f.getreg::<L>(Class::Persistent) else {
                break;
            };
            f.add(r, x, 7 * (j as i64 + 1));
            f.add(acc, acc, r);
            held.push(r);
        }
        for &r in &held {
            f.putreg(r);
        }
        f.ret(acc);
        Ok((f.end()?, held.len()))
    }
    let (base, step) = (0x3c3c_0000, 0x101);
    let want = |x: i64, writes: u8, got: usize| {
        let r = (0..got).fold(s_writes_sum(x, writes), |r, j| {
            r.wrapping_add(x.wrapping_add(7 * (j as i64 + 1)))
        });
        s_guard_fold(r, base, step)
    };
    let mut rng = Rng(0x9e75_ee5a_7ed1);
    let all = (1u8 << host::NUM_S) - 1;
    for case in 0..64 {
        // The first case writes no fixed name, so getreg hands out
        // callee-saved registers only.
        let writes = if case == 0 { 0 } else { rng.next() as u8 & all };
        let reserves = rng.next() as u8 & writes;
        let gets = 1 + rng.below(3);
        let x = rng.next() as i64 >> rng.below(40);
        let (gn, got) = callee::<Native>(writes, reserves, gets).unwrap();
        let (gr, got_ref) = callee::<Reference>(writes, reserves, gets).unwrap();
        let what = format!(
            "writes {writes:#07b}, reserved {reserves:#07b}, {got} of {gets} from getreg, x = {x}"
        );
        assert_eq!(got, got_ref, "getreg handed out: {what}");
        let (native, reference) = run_under_guard(&gn, &gr, base, step, x);
        assert_eq!(native, Value::L(want(x, writes, got)), "native: {what}");
        assert_eq!(reference, native, "reference: {what}");
    }
}

/// A register read before anything was written to it, and temporaries
/// read after a call (which clobbers them).
#[test]
fn reference_reports_read_before_write() {
    let mut f = Func::<Reference>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    let t = f.getreg::<L>(Class::Temp).unwrap();
    f.add(x, x, 1); // 0
    f.add(x, x, t); // 1: t never written
    f.ret(x);
    let code = f.end().unwrap();
    // SAFETY: the reference backend executes no native code here.
    expect_fault(
        unsafe { code.invoke(&[Value::L(1)]) },
        1,
        "add",
        FaultKind::ReadBeforeWrite {
            reg: Arch::FIRST_TEMP.into(),
        },
    );

    let mut f = Func::<Reference>::with_backend();
    let p = f.lambda("%l", Leaf::No).unwrap();
    let x = p.get::<L>(0).unwrap();
    let s = f.getreg::<L>(Class::Persistent).unwrap();
    let t = f.getreg::<L>(Class::Temp).unwrap();
    f.mov(s, x); // 0
    f.set(t, 5); // 1
    f.callv(Callee::Native(Arch::count()), &[]); // 2
    f.add(s, s, 1); // 3: s survives the call
    f.add(s, s, t); // 4: t did not
    f.ret(s);
    let code = f.end().unwrap();
    // SAFETY: calls `Arch::count()`, a function of no arguments returning i32.
    expect_fault(
        unsafe { code.invoke(&[Value::L(1)]) },
        4,
        "add",
        FaultKind::ReadBeforeWrite {
            reg: Arch::FIRST_TEMP.into(),
        },
    );
}

/// A branch to a label never placed: both backends, at `end`.
#[test]
fn both_report_unplaced_labels() {
    fn build<B: Backend>() -> vcode::Result<B::Code> {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%i", Leaf::Yes)?;
        let x = p.get::<I>(0)?;
        let (placed, never) = (f.genlabel(), f.genlabel());
        f.add(x, x, 1); // 0
        f.beq(x, 0, placed); // 1
        f.blt(x, 10, never); // 2
        f.label(placed); // 3
        f.ret(x); // 4
        f.end()
    }
    expect_err(
        build::<Native>(),
        2,
        "blt",
        ErrorKind::UnplacedLabel { label: 1 },
    );
    expect_err(
        build::<Reference>(),
        2,
        "blt",
        ErrorKind::UnplacedLabel { label: 1 },
    );
}

/// Several labels never placed, each referenced more than once and first
/// by a different kind of jump: both backends name the earliest first
/// reference in program order, with its method (the x86-64 backend keeps
/// it in the tail of each label's chain of forward references).
#[test]
fn both_report_the_earliest_of_several_unplaced_labels() {
    fn build<B: Backend>(order: bool) -> vcode::Result<B::Code> {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%i%d", Leaf::No)?;
        let (x, d) = (p.get::<I>(0)?, p.get::<D>(1)?);
        let (a, b, c, placed) = (f.genlabel(), f.genlabel(), f.genlabel(), f.genlabel());
        let (first, second) = if order { (a, b) } else { (b, a) };
        f.add(x, x, 1); // 0
        f.beq(x, 0, placed); // 1
        f.jal(first); // 2
        f.bne(d, d, second); // 3: a float branch, two jumps
        f.jmp(c); // 4
        f.blt(x, 3, first); // 5
        f.bge(x, 9, second); // 6
        f.label(placed); // 7
        f.jmp(c); // 8
        f.ret(x); // 9
        f.end()
    }
    for order in [true, false] {
        let label = if order { 0 } else { 1 };
        for e in [
            build::<Native>(order).map(|_| ()),
            build::<Reference>(order).map(|_| ()),
        ] {
            expect_err(e, 2, "jal", ErrorKind::UnplacedLabel { label });
        }
    }
}

/// A label placed twice, and a label of another function.
#[test]
fn both_report_label_misuse() {
    fn twice<B: Backend>() -> vcode::Result<B::Code> {
        let mut f = Func::<B>::with_backend();
        f.lambda("", Leaf::Yes)?;
        let l = f.genlabel();
        f.label(l); // 0
        f.nop(); // 1
        f.label(l); // 2
        f.retv();
        f.end()
    }
    expect_err(
        twice::<Native>(),
        2,
        "label",
        ErrorKind::LabelPlacedTwice { label: 0 },
    );
    expect_err(
        twice::<Reference>(),
        2,
        "label",
        ErrorKind::LabelPlacedTwice { label: 0 },
    );
    fn foreign<B: Backend>() -> vcode::Result<B::Code> {
        let mut other = Func::<B>::with_backend();
        other.lambda("", Leaf::Yes)?;
        let _ = (other.genlabel(), other.genlabel());
        let l = other.genlabel();
        let mut f = Func::<B>::with_backend();
        f.lambda("", Leaf::Yes)?;
        f.nop(); // 0
        f.jmp(l); // 1
        f.retv();
        f.end()
    }
    expect_err(
        foreign::<Native>(),
        1,
        "jmp",
        ErrorKind::UnknownLabel { label: 2 },
    );
    expect_err(
        foreign::<Reference>(),
        1,
        "jmp",
        ErrorKind::UnknownLabel { label: 2 },
    );
}

/// A local that belongs to another function (its number is out of range here).
#[test]
fn both_report_out_of_range_locals() {
    fn build<B: Backend>() -> vcode::Result<B::Code> {
        let mut other = Func::<B>::with_backend();
        other.lambda("", Leaf::Yes)?;
        let _ = (other.local::<L>(), other.local::<L>());
        let foreign = other.local::<L>();
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%l", Leaf::Yes)?;
        let x = p.get::<L>(0)?;
        let mine = f.local::<L>();
        f.st_local(x, mine); // 0
        f.ld_local(x, foreign); // 1
        f.ret(x);
        f.end()
    }
    expect_err(
        build::<Native>(),
        1,
        "ld_local",
        ErrorKind::UnknownLocal { id: 2 },
    );
    expect_err(
        build::<Reference>(),
        1,
        "ld_local",
        ErrorKind::UnknownLocal { id: 2 },
    );
}

/// Division by an immediate zero is refused at generation; by a register
/// holding zero, or `MIN / -1`, the reference backend stops with a fault
/// (natively: SIGFPE, which this test does not provoke).
#[test]
fn division_by_zero_and_overflow() {
    fn by_imm<B: Backend>() -> vcode::Result<B::Code> {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%l", Leaf::Yes)?;
        let x = p.get::<L>(0)?;
        f.nop(); // 0
        f.rem(x, x, 0); // 1
        f.ret(x);
        f.end()
    }
    expect_err(by_imm::<Native>(), 1, "rem", ErrorKind::DivisionByZero);
    expect_err(by_imm::<Reference>(), 1, "rem", ErrorKind::DivisionByZero);
    // 32-bit: an immediate whose low 32 bits are zero is a zero `int`.
    let mut f = Func::<Reference>::with_backend();
    let p = f.lambda("%i", Leaf::Yes).unwrap();
    let x = p.get::<I>(0).unwrap();
    f.div(x, x, Operand::Imm(1 << 32)); // 0
    f.ret(x);
    expect_err(f.end(), 0, "div", ErrorKind::DivisionByZero);

    let mut f = Func::<Reference>::with_backend();
    let p = f.lambda("%i%i", Leaf::Yes).unwrap();
    let (a, b) = (p.get::<I>(0).unwrap(), p.get::<I>(1).unwrap());
    f.add(a, a, 0); // 0
    f.div(a, a, b); // 1
    f.ret(a);
    let code = f.end().unwrap();
    // SAFETY: no native code runs.
    unsafe {
        expect_fault(
            code.invoke(&[Value::I(7), Value::I(0)]),
            1,
            "div",
            FaultKind::DivisionByZero,
        );
        expect_fault(
            code.invoke(&[Value::I(i32::MIN), Value::I(-1)]),
            1,
            "div",
            FaultKind::DivisionOverflow,
        );
        assert_eq!(code.invoke(&[Value::I(-7), Value::I(2)]), Ok(Value::I(-3)));
    }
}

/// `end` on the native backend names the instruction and method of each
/// client mistake the issue lists.
#[test]
fn native_end_reports_typed_errors() {
    // Too many call arguments.
    let mut f = Func::<Native>::with_backend();
    let p = f.lambda("%l", Leaf::No).unwrap();
    let x = p.get::<L>(0).unwrap();
    let args = vec![Arg::Imm(Ty::L, 1); vcode::backend::MAX_CALL_ARGS + 1];
    f.nop(); // 0
    f.call(x, Callee::Native(Arch::count()), &args); // 1
    f.ret(x);
    expect_err(
        f.end(),
        1,
        "call",
        ErrorKind::TooManyArguments {
            count: args.len(),
            max: vcode::backend::MAX_CALL_ARGS,
        },
    );

    // A call to a generated function with the wrong number of arguments.
    let mut g = Func::<Native>::with_backend();
    let q = g.lambda("%l%l", Leaf::Yes).unwrap();
    let y = q.get::<L>(0).unwrap();
    g.ret(y);
    let two = g.end().unwrap();
    let mut f = Func::<Native>::with_backend();
    let p = f.lambda("%l", Leaf::No).unwrap();
    let x = p.get::<L>(0).unwrap();
    f.call(x, Callee::Code(&two), &[x.into(), x.into(), x.into()]); // 0
    f.ret(x);
    expect_err(
        f.end(),
        0,
        "call",
        ErrorKind::ArgumentCount {
            expected: 2,
            found: 3,
        },
    );
    // ... or too few ...
    let mut f = Func::<Native>::with_backend();
    let p = f.lambda("%l", Leaf::No).unwrap();
    let x = p.get::<L>(0).unwrap();
    f.nop(); // 0
    f.call(x, Callee::Code(&two), &[x.into()]); // 1
    f.ret(x);
    expect_err(
        f.end(),
        1,
        "call",
        ErrorKind::ArgumentCount {
            expected: 2,
            found: 1,
        },
    );
    // ... or an argument of the wrong type.
    let mut f = Func::<Native>::with_backend();
    let p = f.lambda("%l%i", Leaf::No).unwrap();
    let (x, i) = (p.get::<L>(0).unwrap(), p.get::<I>(1).unwrap());
    f.call(x, Callee::Code(&two), &[x.into(), i.into()]); // 0
    f.ret(x);
    expect_err(
        f.end(),
        0,
        "call",
        ErrorKind::TypeMismatch {
            expected: Ty::L,
            found: Ty::I,
        },
    );

    // An exhausted register class.
    let mut f = Func::<Native>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    f.nop(); // 0
    f.nop(); // 1
    let mut got = 0;
    let e = loop {
        match f.getreg::<L>(Class::Temp) {
            Ok(_) => got += 1,
            Err(e) => break e,
        }
    };
    // 11 allocatable integer registers, one holds the parameter.
    assert_eq!(got, host::TEMP_ORDER.len() - 1);
    assert_eq!(
        *e.kind(),
        ErrorKind::RegistersExhausted {
            class: "temporary",
            what: "integer"
        }
    );
    // It names the next instruction, and does not poison `end`: the client
    // may spill instead.
    assert_eq!((e.index(), e.method()), (2, "getreg"));
    f.ret(x);
    f.end().expect("getreg refusals do not poison end");
    let mut f = Func::<Reference>::with_backend();
    f.lambda("%l", Leaf::Yes).unwrap();
    f.nop();
    f.nop();
    let e = loop {
        if let Err(e) = f.getreg::<L>(Class::Temp) {
            break e;
        }
    };
    assert_eq!((e.index(), e.method()), (2, "getreg"));
    assert!(matches!(e.kind(), ErrorKind::RegistersExhausted { .. }));
    f.retv();
    f.end().expect("getreg refusals do not poison end");

    // A code buffer past its limit: `differential.rs` (the limit and the
    // sizes it counts are x86-64's).

    // A type mismatch the API cannot rule out: two returns of different types.
    let mut f = Func::<Native>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    let l = f.genlabel();
    f.beq(x, 0, l); // 0
    f.ret(x); // 1
    f.label(l); // 2
    f.ret(x.cast::<UL>()); // 3
    expect_err(
        f.end(),
        3,
        "ret",
        ErrorKind::TypeMismatch {
            expected: Ty::L,
            found: Ty::UL,
        },
    );
    let mut f = Func::<Reference>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    let l = f.genlabel();
    f.beq(x, 0, l);
    f.ret(x);
    f.label(l);
    f.ret(x.cast::<UL>());
    expect_err(
        f.end(),
        3,
        "ret",
        ErrorKind::TypeMismatch {
            expected: Ty::L,
            found: Ty::UL,
        },
    );

    // A call in a function declared a leaf.
    let mut f = Func::<Native>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    f.callv(Callee::Native(Arch::count()), &[]); // 0
    f.ret(x);
    expect_err(f.end(), 0, "callv", ErrorKind::CallInLeaf);
}
