//! The kernels of `fastpath bench codegen` (`fastpath_bench::kernels`)
//! themselves: each in Rust, the reference, and as a vcode generator
//! written once over the backend.
//!
//! Each vcode kernel is written as a good client would write it: pointer
//! bumping instead of index arithmetic where the algorithm allows, and
//! the `Select` extension (a conditional move) where the Rust source is
//! a data-dependent choice that rustc turns into one.
//!
//! vcode's aarch64 kernel test (`crates/vcode/tests/aarch64_kernels.rs`)
//! runs the same generators on the aarch64 backend under emulation.

use vcode::ext::{OnesComplement, Select};
use vcode::{Backend, Class, Func, I, L, Leaf, P, Reg, U, UL};

// ---------------------------------------------------------------------------
// Sieve of Eratosthenes
// ---------------------------------------------------------------------------

/// Counts the primes below `flags.len()`; `flags` must be all ones.
#[inline(never)]
pub fn sieve_rust(flags: &mut [u8]) -> i32 {
    let n = flags.len();
    let mut count = 0i32;
    let mut i = 2;
    while i < n {
        if flags[i] != 0 {
            count += 1;
            let mut j = i * i;
            while j < n {
                flags[j] = 0;
                j += i;
            }
        }
        i += 1;
    }
    count
}

/// `int sieve(unsigned char *flags, long n)`, as [`sieve_rust`].
pub fn sieve_vcode<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    let ps = f.lambda("%p%l", Leaf::Yes)?;
    let (flags, n) = (ps.get::<P>(0)?, ps.get::<L>(1)?.cast::<P>());
    let (count, t, zero) = (
        f.getreg::<I>(Class::Temp)?,
        f.getreg::<I>(Class::Temp)?,
        f.getreg::<I>(Class::Temp)?,
    );
    let (i, j) = (f.getreg::<P>(Class::Temp)?, f.getreg::<P>(Class::Temp)?);
    let (outer, inner, next, done) = (f.genlabel(), f.genlabel(), f.genlabel(), f.genlabel());
    f.set(count, 0);
    f.set(zero, 0);
    f.set(i, 2);
    f.bge(i, n, done);
    f.label(outer);
    f.lduc(t, flags, i);
    f.beq(t, 0, next);
    f.add(count, count, 1);
    f.mul(j, i, i);
    f.bge(j, n, next);
    f.label(inner);
    f.stc(zero, flags, j);
    f.add(j, j, i);
    f.blt(j, n, inner);
    f.label(next);
    f.add(i, i, 1);
    f.blt(i, n, outer);
    f.label(done);
    f.ret(count);
    f.end()
}

// ---------------------------------------------------------------------------
// Binary search
// ---------------------------------------------------------------------------

/// For each key, the index of the key in the sorted `a` or -1; returns
/// the wrapping sum of those.
#[inline(never)]
pub fn bsearch_rust(a: &[i32], keys: &[i32]) -> i32 {
    let mut sum = 0i32;
    for &k in keys {
        let (mut lo, mut hi) = (0usize, a.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if a[mid] < k {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let r = if lo < a.len() && a[lo] == k {
            lo as i32
        } else {
            -1
        };
        sum = sum.wrapping_add(r);
    }
    sum
}

/// `int bsearch(int *a, long n, int *keys, long m)`, as [`bsearch_rust`].
///
/// The choice between `lo = mid + 1` and `hi = mid` is made with two
/// conditional moves on a mask `(a[mid] - key) >> 63` computed in 64
/// bits (vcode's branches cannot produce a value), as rustc makes it.
pub fn bsearch_vcode<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    let ps = f.lambda("%p%l%p%l", Leaf::Yes)?;
    let (a, n, kp, m) = (
        ps.get::<P>(0)?,
        ps.get::<L>(1)?.cast::<P>(),
        ps.get::<P>(2)?,
        ps.get::<L>(3)?.cast::<P>(),
    );
    let sum = f.getreg::<I>(Class::Temp)?;
    let (lo, hi) = (f.getreg::<P>(Class::Temp)?, f.getreg::<P>(Class::Temp)?);
    let (mid, mid1) = (f.getreg::<P>(Class::Temp)?, f.getreg::<P>(Class::Temp)?);
    // The end of the keys, in `m`'s register.
    let kend = m;
    let (key, v) = (f.getreg::<L>(Class::Temp)?, f.getreg::<L>(Class::Temp)?);
    // The 32-bit view of `v`'s register, for the loads that `cv` widens
    // (`Reg::phys` is the paper's lowest-level name for a register, §5.3;
    // a separate register would exhaust the temporaries).
    let vi = Reg::<I>::phys(v.num());
    let (outer, lp, check, miss, store, done) = (
        f.genlabel(),
        f.genlabel(),
        f.genlabel(),
        f.genlabel(),
        f.genlabel(),
        f.genlabel(),
    );
    f.set(sum, 0);
    f.lsh(kend, m, 2);
    f.add(kend, kend, kp);
    f.bge(kp, kend, done);
    f.label(outer);
    f.ld(vi, kp, 0);
    f.cv(key, vi);
    f.set(lo, 0);
    f.mov(hi, n);
    f.bge(lo, hi, check);
    f.label(lp);
    f.add(mid, lo, hi);
    f.rsh(mid, mid, 1);
    f.lsh(mid1, mid, 2);
    f.ld(vi, a, mid1);
    f.cv(v, vi);
    f.sub(v, v, key);
    f.rsh(v, v, 63);
    f.add(mid1, mid, 1);
    let vp = v.cast::<P>();
    f.select(lo, vp, mid1, lo);
    f.select(hi, vp, hi, mid);
    f.blt(lo, hi, lp);
    f.label(check);
    f.bge(lo, n, miss);
    f.lsh(mid1, lo, 2);
    f.ld(vi, a, mid1);
    f.cv(v, vi);
    f.bne(v, key, miss);
    f.cv(vi, lo);
    f.jmp(store);
    f.label(miss);
    f.set(vi, -1);
    f.label(store);
    f.add(sum, sum, vi);
    f.add(kp, kp, 4);
    f.blt(kp, kend, outer);
    f.label(done);
    f.ret(sum);
    f.end()
}

// ---------------------------------------------------------------------------
// Internet checksum
// ---------------------------------------------------------------------------

/// The ones'-complement sum of `data` (length a multiple of 4) taken as
/// little-endian 32-bit words with the end-around carry added after
/// every word, folded to 16 bits (RFC 1071 §2(B): the sum in host order;
/// byte-swap it for network order).
#[inline(never)]
pub fn cksum_rust(data: &[u8]) -> u32 {
    let mut sum = 0u32;
    for w in data.chunks_exact(4) {
        let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let (s, carry) = sum.overflowing_add(w);
        sum = s.wrapping_add(carry as u32);
    }
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum
}

/// The RFC 1071 checksum sum computed the textbook way, over big-endian
/// 16-bit words, folded at the end: the oracle for both kernels.
pub fn cksum_rfc1071(data: &[u8]) -> u16 {
    let mut sum = 0u64;
    for w in data.chunks(2) {
        sum += u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u64;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// `unsigned cksum(unsigned char *p, long n)`, as [`cksum_rust`], with
/// the `add1c` extension (`add` then `adc 0`).
pub fn cksum_vcode<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    let ps = f.lambda("%p%l", Leaf::Yes)?;
    let (p, n) = (ps.get::<P>(0)?, ps.get::<L>(1)?.cast::<P>());
    let (sum, w, t) = (
        f.getreg::<U>(Class::Temp)?,
        f.getreg::<U>(Class::Temp)?,
        f.getreg::<U>(Class::Temp)?,
    );
    let end = f.getreg::<P>(Class::Temp)?;
    let (lp, done) = (f.genlabel(), f.genlabel());
    f.set(sum, 0);
    f.add(end, p, n);
    f.bge(p, end, done);
    f.label(lp);
    f.ld(w, p, 0);
    f.add1c(sum, sum, w);
    f.add(p, p, 4);
    f.blt(p, end, lp);
    f.label(done);
    for _ in 0..2 {
        f.rsh(t, sum, 16);
        f.and(sum, sum, 0xffff);
        f.add(sum, sum, t);
    }
    f.ret(sum);
    f.end()
}

// ---------------------------------------------------------------------------
// Collatz lengths
// ---------------------------------------------------------------------------

/// The total number of Collatz steps to reach 1 from every start in `1..limit`.
#[inline(never)]
pub fn collatz_rust(limit: u64) -> u64 {
    let mut total = 0u64;
    for i in 1..limit {
        let mut x = i;
        let mut steps = 0u64;
        while x != 1 {
            x = if x & 1 == 1 { 3 * x + 1 } else { x >> 1 };
            steps += 1;
        }
        total += steps;
    }
    total
}

/// `unsigned long collatz(unsigned long limit)`, as [`collatz_rust`]; the
/// odd/even step is a conditional move (`Select`), as rustc makes it, and
/// `3x + 1` is computed as `(x + x) + (x + 1)` to keep the loop-carried
/// dependency chain as short as rustc's `lea`/`inc`.
pub fn collatz_vcode<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    let ps = f.lambda("%ul", Leaf::Yes)?;
    let limit = ps.get::<UL>(0)?;
    let r = |f: &mut Func<B>| f.getreg::<UL>(Class::Temp);
    let (total, i, x, steps, odd, t) = (r(f)?, r(f)?, r(f)?, r(f)?, r(f)?, r(f)?);
    let (outer, inner, idone, done) = (f.genlabel(), f.genlabel(), f.genlabel(), f.genlabel());
    f.set(total, 0);
    f.set(i, 1);
    f.bge(i, limit, done);
    f.label(outer);
    f.mov(x, i);
    f.set(steps, 0);
    f.beq(x, 1, idone);
    f.label(inner);
    // 3x + 1 as (x + x) + (x + 1): two additions deep, not three.
    f.add(odd, x, x);
    f.add(t, x, 1);
    f.add(odd, odd, t);
    f.and(t, x, 1);
    // Halve in place: `select` then keeps `x` or takes `odd` with one cmov.
    f.rsh(x, x, 1);
    f.select(x, t, odd, x);
    f.add(steps, steps, 1);
    f.bne(x, 1, inner);
    f.label(idone);
    f.add(total, total, steps);
    f.add(i, i, 1);
    f.blt(i, limit, outer);
    f.label(done);
    f.ret(total);
    f.end()
}

// ---------------------------------------------------------------------------
// Sum of an i32 slice (context: rustc vectorizes it)
// ---------------------------------------------------------------------------

/// The wrapping sum of `a`.
#[inline(never)]
pub fn sum_rust(a: &[i32]) -> i32 {
    a.iter().fold(0i32, |s, &x| s.wrapping_add(x))
}

/// `int sum(int *a, long n)`, as [`sum_rust`].
pub fn sum_vcode<B: Backend>(f: &mut Func<B>) -> vcode::Result<B::Code> {
    let ps = f.lambda("%p%l", Leaf::Yes)?;
    let (a, n) = (ps.get::<P>(0)?, ps.get::<L>(1)?.cast::<P>());
    let (s, x) = (f.getreg::<I>(Class::Temp)?, f.getreg::<I>(Class::Temp)?);
    let end = f.getreg::<P>(Class::Temp)?;
    let (lp, done) = (f.genlabel(), f.genlabel());
    f.set(s, 0);
    f.lsh(end, n, 2);
    f.add(end, end, a);
    f.bge(a, end, done);
    f.label(lp);
    f.ld(x, a, 0);
    f.add(s, s, x);
    f.add(a, a, 4);
    f.blt(a, end, lp);
    f.label(done);
    f.ret(s);
    f.end()
}
