//! The generation-cost workload: one function of about 100 mixed vcode
//! instructions, written as straight-line client code, the way a client
//! of the paper writes it (no table of instructions is interpreted while
//! generating, which would measure the harness, not vcode).
//!
//! The body is written once, over register arguments, and instantiated
//! twice:
//!
//! * [`mixed_virtual`] takes its registers from `getreg` (and the
//!   parameters from `lambda`): register numbers are run-time values, so
//!   every instruction computes its encoding.
//! * [`mixed_fixed`] uses the fixed names `Reg::t`/`Reg::s`: the register
//!   numbers are constants and the compiler folds each encoding.
//!
//! Both hand out the same physical registers (`getreg`'s priority order
//! after `rdi`/`rsi` hold the parameters is `r10 r9 r8 rdx`, then `rbx
//! r12`; `T0..T3` are `r10 r9 r8 rdx`, `S0 S1` are `rbx r12`), so they
//! generate byte-identical code, which a test checks: the two counts
//! differ only in how the client names its registers.
//!
//! The function is `int mixed(int *buf, int n)`: it reads and writes
//! `buf[0..64]` and loops `n` times (`n >= 1`). It mixes ALU operations
//! with register and immediate operands (8-bit, 32-bit and 64-bit
//! immediates, the last needing the long `movabs` form), loads and stores
//! of several widths, a forward branch and a backward branch.
//!
//! vcode's aarch64 generation count (`crates/vcode/examples/aarch64_gencount`)
//! and its `aarch64_smoke` and `aarch64_far` tests run it too; its own
//! tests are in `workload_tests.rs`.

use vcode::{Backend, Class, Func, I, L, Leaf, P, Reg};

/// Bytes of the buffer [`mixed_virtual`]'s function reads and writes.
pub const MIXED_BUF_BYTES: usize = 256;

/// The registers of the workload body.
#[derive(Clone, Copy)]
struct Regs {
    p: Reg<P>,
    n: Reg<I>,
    a: Reg<I>,
    b: Reg<I>,
    c: Reg<I>,
    d: Reg<I>,
    q: Reg<P>,
    l: Reg<L>,
}

/// The ~100 instructions, straight-line client code.
#[inline(always)]
fn body<B: Backend>(f: &mut Func<B>, r: Regs) {
    let Regs {
        p,
        n,
        a,
        b,
        c,
        d,
        q,
        l,
    } = r;
    let (top, skip, odd, done) = (f.genlabel(), f.genlabel(), f.genlabel(), f.genlabel());
    f.set(a, 1);
    f.set(b, 0x1234_5678);
    f.set(c, -1);
    f.set(l, 0x1234_5678_9abc_def0);
    f.mov(d, n);
    f.mov(q, p);
    f.ble(d, 0, done);
    f.label(top);
    // ALU, register and immediate operands.
    f.add(a, a, b);
    f.add(a, a, 7);
    f.sub(c, c, a);
    f.sub(c, c, 0x10000);
    f.xor(b, b, c);
    f.xor(b, b, 0x5bd1_e995u32 as i32);
    f.and(c, c, 0xff0);
    f.or(a, a, 0x100);
    f.lsh(b, b, 3);
    f.rsh(c, c, 2);
    f.mul(a, a, 31);
    f.mul(b, b, c);
    f.add(l, l, 0x0123_4567_89ab_cdef_i64);
    f.xor(l, l, 0x7fff_ffff_i64);
    f.rsh(l, l, 17);
    f.neg(c, c);
    f.com(b, b);
    f.and(b, b, 0x3f);
    // Loads and stores.
    f.ld(c, q, 0);
    f.add(c, c, a);
    f.st(c, q, 4);
    f.ld(a, q, 8);
    f.xor(a, a, b);
    f.st(a, q, 12);
    f.lduc(b, q, 16);
    f.add(b, b, c);
    f.stc(b, q, 17);
    f.lds(c, q, 18);
    f.sub(c, c, b);
    f.sts(c, q, 20);
    f.ld(l, q.cast(), 24);
    f.add(l, l, 1);
    f.st(l, q.cast(), 32);
    f.ld(c, q, 200);
    f.add(c, c, 0x4000_0000);
    f.st(c, q, 200);
    // A forward branch over a block.
    f.and(c, c, 1);
    f.beq(c, 0, skip);
    f.add(a, a, 0x55);
    f.sub(b, b, a);
    f.mul(b, b, 3);
    f.label(skip);
    f.bne(a, b, odd);
    f.set(a, 0x7777);
    f.label(odd);
    // More ALU with the long immediate forms.
    f.add(a, a, 0x7fff_ffff);
    f.sub(b, b, -0x8000_0000);
    f.and(a, a, 0x00ff_00ff);
    f.or(b, b, 0x0f0f_0000);
    f.xor(c, c, 0x1357_9bdf);
    f.add(c, c, b);
    f.sub(a, a, c);
    f.rsh(a, a, 5);
    f.lsh(c, c, 7);
    f.xor(a, a, c);
    f.add(b, b, a);
    f.st(a, q, 40);
    f.st(b, q, 44);
    f.st(c, q, 48);
    f.ld(c, q, 52);
    f.add(c, c, 1);
    f.st(c, q, 52);
    f.add(l, l, 0x1_0000_0001_i64);
    f.and(l, l, -0x100_i64);
    f.or(l, l, 0x4000_0000_0000_i64);
    f.st(l, q.cast(), 56);
    f.set(c, 0x1_0000);
    f.add(c, c, d);
    f.st(c, q, 64);
    f.add(a, a, c);
    f.sub(b, b, c);
    f.xor(a, a, b);
    f.st(a, q, 68);
    f.ld(b, q, 72);
    f.add(b, b, a);
    f.st(b, q, 72);
    f.rsh(a, a, 1);
    f.add(a, a, 0x1234);
    f.and(a, a, 0x7fff_ffff);
    f.st(a, q, 76);
    f.mul(c, c, 0x10001);
    f.or(c, c, a);
    f.st(c, q, 80);
    f.lsh(a, a, 2);
    f.sub(a, a, 0x1234_5678);
    f.xor(b, b, 0xff);
    // The backward branch.
    f.sub(d, d, 1);
    f.bgt(d, 0, top);
    f.label(done);
    f.ld(a, q, 4);
    f.add(a, a, b);
    f.ret(a);
}

/// Generates the workload with registers from `getreg`.
#[inline(always)]
pub fn mixed_virtual<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    let ps = f.lambda("%p%i", Leaf::Yes)?;
    let (p, n) = (ps.get::<P>(0)?, ps.get::<I>(1)?);
    let (a, b) = (f.getreg::<I>(Class::Temp)?, f.getreg::<I>(Class::Temp)?);
    let (c, d) = (f.getreg::<I>(Class::Temp)?, f.getreg::<I>(Class::Temp)?);
    let (q, l) = (f.getreg::<P>(Class::Temp)?, f.getreg::<L>(Class::Temp)?);
    body(
        f,
        Regs {
            p,
            n,
            a,
            b,
            c,
            d,
            q,
            l,
        },
    );
    f.end()
}

/// Generates the workload with the fixed names `T0..T5` (`T4` = `rsi`
/// and `T5` = `rdi` hold the parameters) and `S0`, `S1`.
#[inline(always)]
pub fn mixed_fixed<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    f.lambda("%p%i", Leaf::Yes)?;
    // Claim S0 and S1 (so `end` saves them), then name them by their
    // constant names: the register `reserve` hands back is a run-time
    // value to the compiler, which would defeat constant folding.
    f.reserve(Reg::<P>::s(0))?;
    f.reserve(Reg::<L>::s(1))?;
    let (q, l) = (Reg::s(0), Reg::s(1));
    let r = Regs {
        p: Reg::t(5),
        n: Reg::t(4),
        a: Reg::t(0),
        b: Reg::t(1),
        c: Reg::t(2),
        d: Reg::t(3),
        q,
        l,
    };
    body(f, r);
    f.end()
}

/// The empty function (`lambda`, `ret`, `end`): the per-function fixed
/// cost, subtracted to give the cost of a body instruction alone.
#[inline(always)]
pub fn empty<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    f.lambda("%p%i", Leaf::Yes)?;
    f.ret(Reg::<I>::t(4));
    f.end()
}

/// The empty function with a frame (`lambda`, `getreg` of a persistent
/// register, `mov`, `ret`, `end`): a non-leaf function whose one register
/// is callee-saved, so `end` writes a prologue that saves it and an
/// epilogue that restores it. Its count is the fixed per-function cost of
/// a function with a frame, as every real function has (`empty` measures
/// the frameless one).
#[inline(always)]
pub fn empty_framed<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    let ps = f.lambda("%i", Leaf::No)?;
    let r = f.getreg::<I>(Class::Persistent)?;
    f.mov(r, ps.get::<I>(0)?);
    f.ret(r);
    f.end()
}

/// The branch-heavy body: eight blocks, each an if/else (a forward
/// conditional branch, a forward `jmp`, two labels) around ALU
/// operations and a store, in a loop: 40% of the instructions are
/// branches and labels. `int branchy(int *buf, int n)` writes
/// `buf[0..8]` and loops `n` times.
#[inline(always)]
fn branchy_body<B: Backend>(f: &mut Func<B>, p: Reg<P>, n: Reg<I>, r: [Reg<I>; 4]) {
    let [a, b, c, d] = r;
    let (top, done) = (f.genlabel(), f.genlabel());
    f.set(a, 0);
    f.set(b, 1);
    f.set(c, 2);
    f.mov(d, n);
    f.ble(d, 0, done);
    f.label(top);
    for k in 0..8 {
        let (skip, join) = (f.genlabel(), f.genlabel());
        f.bge(a, k * 13, skip);
        f.add(b, b, a);
        f.xor(c, c, b);
        f.jmp(join);
        f.label(skip);
        f.sub(c, c, k + 1);
        f.and(b, b, 0xfff);
        f.label(join);
        f.add(a, a, 3);
        f.st(b, p, 4 * k);
    }
    f.sub(d, d, 1);
    f.bgt(d, 0, top);
    f.label(done);
    f.add(a, a, b);
    f.add(a, a, c);
    f.ret(a);
}

/// The branch-heavy workload with registers from `getreg`.
#[inline(always)]
pub fn branchy_virtual<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    let ps = f.lambda("%p%i", Leaf::Yes)?;
    let (p, n) = (ps.get::<P>(0)?, ps.get::<I>(1)?);
    let (a, b) = (f.getreg::<I>(Class::Temp)?, f.getreg::<I>(Class::Temp)?);
    let (c, d) = (f.getreg::<I>(Class::Temp)?, f.getreg::<I>(Class::Temp)?);
    branchy_body(f, p, n, [a, b, c, d]);
    f.end()
}

/// The branch-heavy workload with the fixed names `T0..T5`.
#[inline(always)]
pub fn branchy_fixed<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    f.lambda("%p%i", Leaf::Yes)?;
    branchy_body(
        f,
        Reg::t(5),
        Reg::t(4),
        [Reg::t(0), Reg::t(1), Reg::t(2), Reg::t(3)],
    );
    f.end()
}

/// The number of vcode instructions (labels included) of the branch-heavy
/// workload's function, counted by the reference backend.
pub fn branchy_count() -> vcode::Result<usize> {
    let mut r = Func::<vcode::Reference>::with_backend();
    let v = branchy_virtual(&mut r)?.len();
    let x = branchy_fixed(&mut r)?.len();
    assert_eq!(v, x);
    Ok(v)
}

/// The number of vcode instructions (labels included) each workload
/// function generates, counted by the reference backend, which records
/// one entry per instruction method called.
pub fn instruction_counts() -> vcode::Result<(usize, usize, usize)> {
    let mut r = Func::<vcode::Reference>::with_backend();
    let v = mixed_virtual(&mut r)?.len();
    let x = mixed_fixed(&mut r)?.len();
    let e = empty(&mut r)?.len();
    Ok((v, x, e))
}

/// Runs generated workload code on a fresh buffer: the result and the buffer.
pub fn run_native(code: &vcode::Code, n: i32) -> vcode::Result<(i32, Vec<u8>)> {
    let mut buf: Vec<u8> = (0..MIXED_BUF_BYTES).map(|i| (i * 7 + 3) as u8).collect();
    // SAFETY: the workload reads and writes only `buf[0..MIXED_BUF_BYTES]`
    // through its pointer parameter (offsets below 208 plus 4 bytes).
    let f = unsafe { code.as_fn::<extern "C" fn(*mut u8, i32) -> i32>()? };
    let r = f(buf.as_mut_ptr(), n);
    Ok((r, buf))
}
