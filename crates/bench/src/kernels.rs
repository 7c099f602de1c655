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
//! The kernels themselves, in Rust and in vcode, are in
//! [`crate::kernel_code`].

use std::hint::black_box;
use std::time::Instant;

use vcode::Func;

type Res<T> = Result<T, String>;

fn ve(e: vcode::Error) -> String {
    e.to_string()
}

pub use crate::kernel_code::{
    bsearch_rust, bsearch_vcode, cksum_rfc1071, cksum_rust, cksum_vcode, collatz_rust,
    collatz_vcode, sieve_rust, sieve_vcode, sum_rust, sum_vcode,
};

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
