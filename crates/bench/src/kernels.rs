//! Generated-code quality: scalar kernels written in vcode, timed against
//! the same kernels in Rust compiled with optimizations.
//!
//! The scalar kernels are ones a compiler cannot simply vectorize: a
//! sieve of Eratosthenes (a data-dependent inner loop of stores), a binary
//! search per key (a chain of dependent loads), the Internet checksum
//! with an end-around carry after every addition (RFC 1071; a carry
//! chain) and the total of Collatz sequence lengths (a data-dependent
//! loop trip count). The sum of an `i32` slice is included for context
//! only: rustc vectorizes it and vcode, which has no vector instructions,
//! does not.
//!
//! Each vcode kernel is written as a good client would write it: pointer
//! bumping instead of index arithmetic where the algorithm allows, and
//! the `Select` extension (a conditional move) where the Rust source is
//! a data-dependent choice that rustc turns into one.

use std::hint::black_box;
use std::time::Instant;

use vcode::ext::{OnesComplement, Select};
use vcode::{Class, Code, Func, I, L, Leaf, P, Reg, U, UL};

type Res<T> = Result<T, String>;

fn ve(e: vcode::Error) -> String {
    e.to_string()
}

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
pub fn sieve_vcode(f: &mut Func) -> vcode::Result<Code> {
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
pub fn bsearch_vcode(f: &mut Func) -> vcode::Result<Code> {
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
pub fn cksum_vcode(f: &mut Func) -> vcode::Result<Code> {
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
pub fn collatz_vcode(f: &mut Func) -> vcode::Result<Code> {
    let ps = f.lambda("%ul", Leaf::Yes)?;
    let limit = ps.get::<UL>(0)?;
    let r = |f: &mut Func| f.getreg::<UL>(Class::Temp);
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
pub fn sum_vcode(f: &mut Func) -> vcode::Result<Code> {
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

// ---------------------------------------------------------------------------
// Running them side by side
// ---------------------------------------------------------------------------

/// One kernel's result.
#[derive(Clone, Debug)]
pub struct KernelTime {
    /// The kernel's name.
    pub name: &'static str,
    /// Whether rustc vectorizes the Rust version (context only).
    pub vectorized: bool,
    /// Best time of the vcode kernel, nanoseconds.
    pub vcode_ns: f64,
    /// Best time of the Rust kernel, nanoseconds.
    pub rust_ns: f64,
    /// The common result, as text.
    pub result: String,
}

impl KernelTime {
    /// vcode's speed as a fraction of rustc's (1.0 = as fast).
    pub fn speed(&self) -> f64 {
        self.rust_ns / self.vcode_ns
    }
}

/// A small deterministic generator (xorshift64*), so runs are repeatable.
pub struct Rng(u64);

impl Rng {
    /// A generator from a nonzero seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn best<R: PartialEq + std::fmt::Debug>(
    rounds: usize,
    mut run_v: impl FnMut() -> R,
    mut run_r: impl FnMut() -> R,
) -> Res<(f64, f64, R)> {
    let (mut bv, mut br) = (f64::MAX, f64::MAX);
    let mut last = None;
    for _ in 0..rounds {
        let t = Instant::now();
        let v = black_box(run_v());
        bv = bv.min(t.elapsed().as_nanos() as f64);
        let t = Instant::now();
        let r = black_box(run_r());
        br = br.min(t.elapsed().as_nanos() as f64);
        if v != r {
            return Err(format!("vcode kernel returned {v:?}, Rust returned {r:?}"));
        }
        last = Some(v);
    }
    Ok((bv, br, last.expect("rounds >= 1")))
}

/// Problem sizes of [`run_kernels`].
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Sieve limit.
    pub sieve: usize,
    /// Sorted array length of the binary search.
    pub bsearch_n: usize,
    /// Keys searched.
    pub bsearch_keys: usize,
    /// Bytes checksummed.
    pub cksum: usize,
    /// Collatz limit.
    pub collatz: u64,
    /// Elements summed.
    pub sum: usize,
}

impl Sizes {
    /// The sizes of the report: each kernel runs for about a millisecond
    /// or more, with data in cache where the kernel is about computation.
    pub const REPORT: Sizes = Sizes {
        sieve: 1 << 21,
        bsearch_n: 1 << 16,
        bsearch_keys: 1 << 17,
        cksum: 1 << 18,
        collatz: 100_000,
        sum: 1 << 16,
    };
    /// Small sizes for tests.
    pub const TEST: Sizes = Sizes {
        sieve: 10_000,
        bsearch_n: 1000,
        bsearch_keys: 3000,
        cksum: 4096,
        collatz: 1000,
        sum: 1000,
    };
}

/// Generates every vcode kernel, checks it against Rust and times both,
/// `rounds` times each, interleaved; the best time of each is kept.
pub fn run_kernels(sizes: Sizes, rounds: usize) -> Res<Vec<KernelTime>> {
    let mut f = Func::new();
    let mut out = Vec::new();
    let mut rng = Rng::new(0x5eed);

    // Sieve.
    {
        let code = sieve_vcode(&mut f).map_err(ve)?;
        // SAFETY: the kernel reads and writes flags[0..n] only.
        let k = unsafe { code.as_fn::<extern "C" fn(*mut u8, i64) -> i32>() }.map_err(ve)?;
        let mut fv = vec![1u8; sizes.sieve];
        let mut fr = vec![1u8; sizes.sieve];
        // The fill is not part of the kernel: time the kernel alone.
        let (mut bv, mut br) = (f64::MAX, f64::MAX);
        let mut count = 0;
        for _ in 0..rounds {
            fv.fill(1);
            let t = Instant::now();
            let cv = black_box(k(fv.as_mut_ptr(), fv.len() as i64));
            bv = bv.min(t.elapsed().as_nanos() as f64);
            fr.fill(1);
            let t = Instant::now();
            let cr = black_box(sieve_rust(black_box(&mut fr)));
            br = br.min(t.elapsed().as_nanos() as f64);
            if cv != cr || fv != fr {
                return Err(format!(
                    "sieve: vcode counted {cv} primes, Rust {cr}, or the flags differ"
                ));
            }
            count = cv;
        }
        out.push(KernelTime {
            name: "sieve",
            vectorized: false,
            vcode_ns: bv,
            rust_ns: br,
            result: format!("{count} primes below {}", sizes.sieve),
        });
    }

    // Binary search.
    {
        let code = bsearch_vcode(&mut f).map_err(ve)?;
        // SAFETY: reads a[0..n] and keys[0..m] only.
        let k = unsafe { code.as_fn::<extern "C" fn(*const i32, i64, *const i32, i64) -> i32>() }
            .map_err(ve)?;
        let a: Vec<i32> = (0..sizes.bsearch_n as i32).map(|i| 2 * i).collect();
        let keys: Vec<i32> = (0..sizes.bsearch_keys)
            .map(|_| (rng.next_u64() % (2 * sizes.bsearch_n as u64 + 2)) as i32 - 1)
            .collect();
        let (bv, br, r) = best(
            rounds,
            || k(a.as_ptr(), a.len() as i64, keys.as_ptr(), keys.len() as i64),
            || bsearch_rust(black_box(&a), black_box(&keys)),
        )
        .map_err(|e| format!("bsearch: {e}"))?;
        out.push(KernelTime {
            name: "binary search",
            vectorized: false,
            vcode_ns: bv,
            rust_ns: br,
            result: format!("index sum {r}"),
        });
    }

    // Internet checksum.
    {
        let code = cksum_vcode(&mut f).map_err(ve)?;
        // SAFETY: reads p[0..n] only.
        let k = unsafe { code.as_fn::<extern "C" fn(*const u8, i64) -> u32>() }.map_err(ve)?;
        let data: Vec<u8> = (0..sizes.cksum).map(|_| rng.next_u64() as u8).collect();
        let (bv, br, r) = best(
            rounds,
            || k(data.as_ptr(), data.len() as i64),
            || cksum_rust(black_box(&data)),
        )
        .map_err(|e| format!("checksum: {e}"))?;
        let want = cksum_rfc1071(&data);
        if (r as u16).swap_bytes() != want {
            return Err(format!(
                "checksum: kernels give {r:#06x}, RFC 1071 byte-wise gives {want:#06x} (byte-swapped)"
            ));
        }
        out.push(KernelTime {
            name: "Internet checksum",
            vectorized: false,
            vcode_ns: bv,
            rust_ns: br,
            result: format!("{want:#06x}"),
        });
    }

    // Collatz.
    {
        let code = collatz_vcode(&mut f).map_err(ve)?;
        // SAFETY: pure computation on its argument.
        let k = unsafe { code.as_fn::<extern "C" fn(u64) -> u64>() }.map_err(ve)?;
        let lim = sizes.collatz;
        let (bv, br, r) = best(
            rounds,
            || k(black_box(lim)),
            || collatz_rust(black_box(lim)),
        )
        .map_err(|e| format!("collatz: {e}"))?;
        out.push(KernelTime {
            name: "Collatz lengths",
            vectorized: false,
            vcode_ns: bv,
            rust_ns: br,
            result: format!("{r} steps"),
        });
    }

    // Sum (context).
    {
        let code = sum_vcode(&mut f).map_err(ve)?;
        // SAFETY: reads a[0..n] only.
        let k = unsafe { code.as_fn::<extern "C" fn(*const i32, i64) -> i32>() }.map_err(ve)?;
        let a: Vec<i32> = (0..sizes.sum).map(|_| rng.next_u64() as i32).collect();
        let (bv, br, r) = best(
            rounds,
            || k(a.as_ptr(), a.len() as i64),
            || sum_rust(black_box(&a)),
        )
        .map_err(|e| format!("sum: {e}"))?;
        out.push(KernelTime {
            name: "sum of i32 (vectorized by rustc)",
            vectorized: true,
            vcode_ns: bv,
            rust_ns: br,
            result: format!("{r}"),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_agree_with_rust_and_rfc1071() {
        let r = run_kernels(Sizes::TEST, 2).unwrap();
        assert_eq!(r.len(), 5);
        assert_eq!(r[0].result, "1229 primes below 10000");
    }

    /// The data-dependent choices are conditional moves, not branches
    /// (run with `--nocapture` to see the listings).
    #[test]
    fn select_lowers_to_cmov() {
        let mut f = Func::new();
        for (name, code) in [
            ("collatz", collatz_vcode(&mut f).unwrap()),
            ("bsearch", bsearch_vcode(&mut f).unwrap()),
        ] {
            let listing = code.disassemble();
            println!("== {name}\n{listing}");
            assert!(listing.contains("cmov"), "{name}: {listing}");
        }
    }

    #[test]
    fn checksum_edge_cases() {
        let mut f = Func::new();
        let code = cksum_vcode(&mut f).unwrap();
        // SAFETY: reads p[0..n] only.
        let k = unsafe { code.as_fn::<extern "C" fn(*const u8, i64) -> u32>() }.unwrap();
        for data in [
            vec![],
            vec![0xff; 4],
            vec![0xff; 64],
            vec![0x80, 0, 0, 0x80, 0x80, 0, 0, 0x80],
        ] {
            assert_eq!(k(data.as_ptr(), data.len() as i64), cksum_rust(&data));
            assert_eq!(
                (cksum_rust(&data) as u16).swap_bytes(),
                cksum_rfc1071(&data),
                "{data:?}"
            );
        }
    }
}
