//! Strength reduction of xor-linear runs: consecutive assignments to one
//! variable whose values are GF(2)-affine in that variable alone are
//! collapsed into one assignment that computes the composed map from the
//! variable's first value, with a short dependency chain.
//!
//! Over GF(2) (bits, with xor as addition) the 64-bit operations `x ^ c`,
//! `x & c`, `x | c`, `~x`, `x << k`, `x >> k` (arithmetic) with constant
//! `c` and `k`, and `-b` for a value `b` that is always 0 or 1 (the bit
//! broadcast to every bit) are affine maps, and so is any composition of
//! them. The bit-by-bit CRC step `crc = (crc >> 1) ^ (POLY & -(crc & 1))`
//! is one; eight of them in a row, as a CRC of one byte, are a chain of
//! eight dependent steps of three instructions each. Composed, the eight
//! steps are one affine map `M x ^ k`, written here as an xor of a few
//! independent terms of the first value:
//!
//! * a whole shift, `x >> s` or `x << s`, when every bit it moves is in `M`
//!   (`crc >> 8` for the CRC);
//! * a masked diagonal, `(x >> s) & m` or `(x << s) & m`: the bits of `M`
//!   that move by `s`;
//! * a column, `c & ((x << (63 - j)) >> 63)`: the bits that input bit `j`
//!   flips (`c` when bit `j` is set), one per byte bit tested by the CRC.
//!
//! The terms are chosen greedily, most bits per instruction first, until
//! they cover `M` exactly; the constant `k` is xored last. The terms read
//! only the first value, so they evaluate side by side and the chain on
//! the variable is one xor per term instead of the run's whole depth (the
//! CRC byte: 9 xors after a 4-instruction term, against 24 dependent
//! instructions). A run is replaced only when the new expression is no
//! larger than the run (counted in expression nodes).
//!
//! Instructions between the run's assignments stay where they are; they
//! must not read the variable (the run's intermediate values disappear),
//! and the run reads nothing else, so moving its work to its last
//! assignment changes no value any instruction sees.

use crate::fp::{Graph, Inst};
use crate::ir::{BinOp, Expr, UnOp};

/// An affine map of one 64-bit input over GF(2): output bit `i` is the xor
/// of the input bits set in `rows[i]`, xored with bit `i` of `konst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Affine {
    rows: [u64; 64],
    konst: u64,
}

impl Affine {
    fn identity() -> Affine {
        let mut rows = [0u64; 64];
        for (i, r) in rows.iter_mut().enumerate() {
            *r = 1 << i;
        }
        Affine { rows, konst: 0 }
    }

    fn constant(c: i64) -> Affine {
        Affine {
            rows: [0; 64],
            konst: c as u64,
        }
    }

    fn xor(mut self, o: &Affine) -> Affine {
        for (r, s) in self.rows.iter_mut().zip(&o.rows) {
            *r ^= s;
        }
        self.konst ^= o.konst;
        self
    }

    fn and_const(mut self, c: u64) -> Affine {
        for (i, r) in self.rows.iter_mut().enumerate() {
            if c >> i & 1 == 0 {
                *r = 0;
            }
        }
        self.konst &= c;
        self
    }

    fn or_const(mut self, c: u64) -> Affine {
        for (i, r) in self.rows.iter_mut().enumerate() {
            if c >> i & 1 != 0 {
                *r = 0;
            }
        }
        self.konst |= c;
        self
    }

    fn shl(&self, s: u32) -> Affine {
        let mut out = Affine::constant(0);
        for i in s as usize..64 {
            out.rows[i] = self.rows[i - s as usize];
        }
        out.konst = self.konst << s;
        out
    }

    fn sar(&self, s: u32) -> Affine {
        let mut out = Affine::constant(0);
        for i in 0..64 {
            out.rows[i] = self.rows[(i + s as usize).min(63)];
        }
        out.konst = ((self.konst as i64) >> s) as u64;
        out
    }

    /// `-b` when `b` is always 0 or 1 (only its bit 0 can be nonzero):
    /// bit 0 broadcast to every bit. `None` otherwise (negation is not
    /// linear).
    fn neg_bit(&self) -> Option<Affine> {
        if self.rows[1..].iter().any(|&r| r != 0) || self.konst & !1 != 0 {
            return None;
        }
        Some(Affine {
            rows: [self.rows[0]; 64],
            konst: if self.konst & 1 != 0 { !0 } else { 0 },
        })
    }

    /// `self` after `first`: the map `x -> self(first(x))`.
    fn after(&self, first: &Affine) -> Affine {
        let mut out = Affine::constant(self.konst as i64);
        for i in 0..64 {
            let mut row = 0u64;
            let mut k = 0u64;
            let mut bits = self.rows[i];
            while bits != 0 {
                let j = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                row ^= first.rows[j];
                k ^= first.konst >> j & 1;
            }
            out.rows[i] = row;
            out.konst ^= k << i;
        }
        out
    }

    /// Applies the map to a value (for tests).
    #[cfg(test)]
    fn apply(&self, x: i64) -> i64 {
        let x = x as u64;
        let mut out = self.konst;
        for (i, r) in self.rows.iter().enumerate() {
            out ^= u64::from((r & x).count_ones() & 1) << i;
        }
        out as i64
    }
}

/// The affine map `e` computes from variable `v`, when `e` reads no other
/// variable and uses only operations that are affine over GF(2).
pub(crate) fn affine_of(e: &Expr, v: u32) -> Option<Affine> {
    Some(match e {
        Expr::Const(c) => Affine::constant(*c),
        Expr::Var(x) if *x == v => Affine::identity(),
        Expr::Var(_) | Expr::And(..) | Expr::Or(..) | Expr::Call(..) => return None,
        Expr::Unary(UnOp::BitNot, a) => {
            let mut a = affine_of(a, v)?;
            a.konst ^= !0;
            a
        }
        Expr::Unary(UnOp::Neg, a) => affine_of(a, v)?.neg_bit()?,
        Expr::Unary(UnOp::Not, _) => return None,
        Expr::Binary(op, a, b) => match (op, &**a, &**b) {
            (BinOp::BitXor, a, b) => affine_of(a, v)?.xor(&affine_of(b, v)?),
            (BinOp::BitAnd, a, Expr::Const(c)) | (BinOp::BitAnd, Expr::Const(c), a) => {
                affine_of(a, v)?.and_const(*c as u64)
            }
            (BinOp::BitOr, a, Expr::Const(c)) | (BinOp::BitOr, Expr::Const(c), a) => {
                affine_of(a, v)?.or_const(*c as u64)
            }
            (BinOp::Shl, a, Expr::Const(k)) => affine_of(a, v)?.shl((*k & 63) as u32),
            (BinOp::Shr, a, Expr::Const(k)) => affine_of(a, v)?.sar((*k & 63) as u32),
            (BinOp::Sub, Expr::Const(0), a) => affine_of(a, v)?.neg_bit()?,
            _ => return None,
        },
    })
}

fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::Binary(op, Box::new(a), Box::new(b))
}

/// The expression nodes of `e`.
fn size(e: &Expr) -> usize {
    match e {
        Expr::Const(_) | Expr::Var(_) => 1,
        Expr::Unary(_, a) => 1 + size(a),
        Expr::Binary(_, a, b) | Expr::And(a, b) | Expr::Or(a, b) => 1 + size(a) + size(b),
        Expr::Call(_, args) => 1 + args.iter().map(size).sum::<usize>(),
    }
}

/// One term of the cover: the pairs (output bit, input bit) it flips and
/// its expression.
struct Term {
    pairs: [u64; 64],
    expr: Expr,
    /// Instructions it costs (with its xor into the sum).
    cost: usize,
}

fn count(p: &[u64; 64]) -> usize {
    p.iter().map(|r| r.count_ones() as usize).sum()
}

/// The candidate terms for the remaining pairs `rem`.
fn candidates(rem: &[u64; 64], x: &Expr) -> Vec<Term> {
    let mut out = Vec::new();
    let var = || x.clone();
    // Whole arithmetic right shifts and left shifts.
    for s in 0..64u32 {
        let mut sar = [0u64; 64];
        for (i, r) in sar.iter_mut().enumerate() {
            *r = 1 << (i + s as usize).min(63);
        }
        if (0..64).all(|i| rem[i] & sar[i] == sar[i]) {
            let expr = if s == 0 {
                var()
            } else {
                bin(BinOp::Shr, var(), Expr::Const(s.into()))
            };
            out.push(Term {
                pairs: sar,
                expr,
                cost: if s == 0 { 1 } else { 2 },
            });
        }
        if s > 0 {
            let mut shl = [0u64; 64];
            for (i, r) in shl.iter_mut().enumerate().skip(s as usize) {
                *r = 1 << (i - s as usize);
            }
            if (0..64).all(|i| rem[i] & shl[i] == shl[i]) {
                out.push(Term {
                    pairs: shl,
                    expr: bin(BinOp::Shl, var(), Expr::Const(s.into())),
                    cost: 2,
                });
            }
        }
    }
    // Masked diagonals: output bit i from input bit i - d.
    for d in -63i32..=63 {
        let mut pairs = [0u64; 64];
        let mut mask = 0u64;
        for (i, p) in pairs.iter_mut().enumerate() {
            let j = i as i32 - d;
            if (0..64).contains(&j) && rem[i] >> j & 1 != 0 {
                *p = 1 << j;
                mask |= 1 << i;
            }
        }
        if mask == 0 {
            continue;
        }
        let shifted = match d {
            0 => var(),
            d if d < 0 => bin(BinOp::Shr, var(), Expr::Const((-d).into())),
            d => bin(BinOp::Shl, var(), Expr::Const(d.into())),
        };
        out.push(Term {
            pairs,
            expr: bin(BinOp::BitAnd, shifted, Expr::Const(mask as i64)),
            cost: if d == 0 { 2 } else { 3 },
        });
    }
    // Columns: the output bits input bit j flips.
    for j in 0..64u32 {
        let mut pairs = [0u64; 64];
        let mut col = 0u64;
        for (i, p) in pairs.iter_mut().enumerate() {
            if rem[i] >> j & 1 != 0 {
                *p = 1 << j;
                col |= 1 << i;
            }
        }
        if col == 0 {
            continue;
        }
        // All ones or all zeros: input bit j spread over the word.
        let spread = if j == 63 {
            bin(BinOp::Shr, var(), Expr::Const(63))
        } else {
            bin(
                BinOp::Shr,
                bin(BinOp::Shl, var(), Expr::Const(i64::from(63 - j))),
                Expr::Const(63),
            )
        };
        let (expr, cost) = if col == !0 {
            (spread, if j == 63 { 2 } else { 3 })
        } else {
            (
                bin(BinOp::BitAnd, spread, Expr::Const(col as i64)),
                if j == 63 { 3 } else { 4 },
            )
        };
        out.push(Term { pairs, expr, cost });
    }
    out
}

/// An expression of `x` that computes `map`: an xor of independent terms
/// of `x` (see the module documentation).
pub(crate) fn expr_of(map: &Affine, x: &Expr) -> Expr {
    let mut rem = map.rows;
    let mut terms: Vec<Expr> = Vec::new();
    while rem.iter().any(|&r| r != 0) {
        let best = candidates(&rem, x)
            .into_iter()
            .max_by(|a, b| {
                // Most pairs per instruction; on a tie the cheaper term.
                (count(&a.pairs) * b.cost)
                    .cmp(&(count(&b.pairs) * a.cost))
                    .then(b.cost.cmp(&a.cost))
            })
            .expect("a nonzero remainder has a column candidate");
        for (r, p) in rem.iter_mut().zip(&best.pairs) {
            *r ^= p;
        }
        terms.push(best.expr);
    }
    if map.konst != 0 || terms.is_empty() {
        terms.push(Expr::Const(map.konst as i64));
    }
    let mut it = terms.into_iter();
    let first = it.next().expect("at least one term");
    it.fold(first, |acc, t| bin(BinOp::BitXor, acc, t))
}

/// Collapses every xor-linear run of at least two assignments in the
/// graph's blocks (see the module documentation); true if any changed.
pub(crate) fn linearize(g: &mut Graph) -> bool {
    let mut changed = false;
    for b in &mut g.blocks {
        changed |= linearize_insts(&mut b.insts);
    }
    changed
}

fn reads(i: &Inst, v: u32) -> bool {
    let e = match i {
        Inst::Assign { value, .. } => value,
        Inst::Eval(e) => e,
    };
    let mut m = false;
    e.for_each_var(&mut |x| m |= x == v);
    m
}

fn linearize_insts(insts: &mut Vec<Inst>) -> bool {
    let mut changed = false;
    let mut start = 0;
    while start < insts.len() {
        let Inst::Assign { slot: v, value } = &insts[start] else {
            start += 1;
            continue;
        };
        let v = *v;
        let Some(mut map) = affine_of(value, v) else {
            start += 1;
            continue;
        };
        // The run: assignments to v, each affine in v alone, with nothing
        // between them reading v.
        let mut run = vec![start];
        let mut old = size(value);
        let mut k = start + 1;
        while k < insts.len() {
            match &insts[k] {
                Inst::Assign { slot, value } if *slot == v => match affine_of(value, v) {
                    Some(step) => {
                        map = step.after(&map);
                        old += size(value);
                        run.push(k);
                    }
                    None => break,
                },
                i if reads(i, v) => break,
                _ => {}
            }
            k += 1;
        }
        let last = *run.last().expect("a run has its first assignment");
        if run.len() >= 2 {
            let new = expr_of(&map, &Expr::Var(v));
            if size(&new) <= old {
                insts[last] = Inst::Assign {
                    slot: v,
                    value: new,
                };
                for &r in run[..run.len() - 1].iter().rev() {
                    insts.remove(r);
                }
                changed = true;
                start = last + 1 - (run.len() - 1);
                continue;
            }
        }
        start += 1;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: u32) -> Expr {
        Expr::Var(n)
    }
    fn c(n: i64) -> Expr {
        Expr::Const(n)
    }
    /// The bit-by-bit CRC-32 step on variable 0.
    fn crc_step() -> Inst {
        let bit = bin(BinOp::BitAnd, v(0), c(1));
        let mask = Expr::Unary(UnOp::Neg, Box::new(bit));
        Inst::Assign {
            slot: 0,
            value: bin(
                BinOp::BitXor,
                bin(BinOp::Shr, v(0), c(1)),
                bin(BinOp::BitAnd, c(0xEDB8_8320), mask),
            ),
        }
    }

    fn run(insts: &[Inst], vars: &mut [i64]) {
        for i in insts {
            match i {
                Inst::Assign { slot, value } => {
                    vars[*slot as usize] = value.eval(vars, &mut |_, _| 0).unwrap()
                }
                Inst::Eval(e) => {
                    e.eval(vars, &mut |_, _| 0).unwrap();
                }
            }
        }
    }

    fn xorshift(s: &mut u64) -> i64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s as i64
    }

    #[test]
    fn eight_crc_steps_become_one_assignment_of_the_first_value() {
        let mut insts = vec![crc_step(); 8];
        let before = insts.clone();
        assert!(linearize_insts(&mut insts));
        assert_eq!(insts.len(), 1);
        let Inst::Assign { slot: 0, value } = &insts[0] else {
            panic!("one assignment to the CRC");
        };
        // crc >> 8, then one column per byte bit: nine terms, each reading
        // the first value, none the result of another.
        let mut terms = 1;
        let mut e = value;
        while let Expr::Binary(BinOp::BitXor, a, _) = e {
            terms += 1;
            e = a;
        }
        assert_eq!(terms, 9, "{value:?}");
        let mut seed = 0x1234_5678_9abc_def1;
        for _ in 0..2000 {
            let x = xorshift(&mut seed);
            for x in [x, x & 0xFFFF_FFFF, x & 0xFF] {
                let (mut a, mut b) = ([x, 7], [x, 7]);
                run(&before, &mut a);
                run(&insts, &mut b);
                assert_eq!(a, b, "first value {x:#x}");
            }
        }
    }

    #[test]
    fn a_read_of_the_variable_ends_the_run() {
        let read = Inst::Assign {
            slot: 1,
            value: bin(BinOp::BitAnd, v(0), c(255)),
        };
        let other = Inst::Assign {
            slot: 1,
            value: bin(BinOp::Add, v(1), c(1)),
        };
        // Two runs of four, split by a read of the CRC; a write of another
        // variable inside a run does not split it.
        let mut insts = vec![
            crc_step(),
            crc_step(),
            other.clone(),
            crc_step(),
            crc_step(),
        ];
        insts.push(read.clone());
        insts.extend(vec![crc_step(); 4]);
        let before = insts.clone();
        assert!(linearize_insts(&mut insts));
        assert_eq!(insts.len(), 4, "{insts:?}");
        assert_eq!(insts[0], other);
        assert_eq!(insts[2], read);
        let mut seed = 99;
        for _ in 0..500 {
            let x = xorshift(&mut seed);
            let (mut a, mut b) = ([x, 3], [x, 3]);
            run(&before, &mut a);
            run(&insts, &mut b);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn non_linear_steps_are_left_alone() {
        // `+` is not affine over GF(2); another variable is not the run's.
        let add = Inst::Assign {
            slot: 0,
            value: bin(BinOp::Add, v(0), c(1)),
        };
        let other = Inst::Assign {
            slot: 0,
            value: bin(BinOp::BitXor, v(0), v(1)),
        };
        let mut insts = vec![add.clone(), other.clone(), add.clone()];
        assert!(!linearize_insts(&mut insts));
        assert_eq!(insts, vec![add, other, bin_inst()]);
        fn bin_inst() -> Inst {
            Inst::Assign {
                slot: 0,
                value: bin(BinOp::Add, v(0), c(1)),
            }
        }
    }

    /// A random affine step of variable 0.
    fn random_step(s: &mut u64, depth: u32) -> Expr {
        let r = xorshift(s).rem_euclid(9);
        if depth == 0 {
            return if r < 5 { v(0) } else { c(xorshift(s)) };
        }
        let a = || v(0);
        match r {
            0 => bin(
                BinOp::BitXor,
                random_step(s, depth - 1),
                random_step(s, depth - 1),
            ),
            1 => bin(BinOp::BitAnd, random_step(s, depth - 1), c(xorshift(s))),
            2 => bin(BinOp::BitOr, c(xorshift(s)), random_step(s, depth - 1)),
            3 => bin(BinOp::Shl, random_step(s, depth - 1), c(xorshift(s) & 127)),
            4 => bin(BinOp::Shr, random_step(s, depth - 1), c(xorshift(s) & 127)),
            5 => Expr::Unary(UnOp::BitNot, Box::new(random_step(s, depth - 1))),
            6 => Expr::Unary(
                UnOp::Neg,
                Box::new(bin(
                    BinOp::BitAnd,
                    bin(BinOp::Shr, random_step(s, depth - 1), c(xorshift(s) & 63)),
                    c(1),
                )),
            ),
            7 => bin(
                BinOp::Sub,
                c(0),
                bin(BinOp::BitAnd, random_step(s, depth - 1), c(1)),
            ),
            _ => a(),
        }
    }

    #[test]
    fn random_affine_runs_compute_the_same_values() {
        let mut seed = 0xfeed_beef_u64;
        let mut collapsed = 0;
        for _ in 0..300 {
            let n = 2 + xorshift(&mut seed).rem_euclid(6) as usize;
            let insts: Vec<Inst> = (0..n)
                .map(|_| Inst::Assign {
                    slot: 0,
                    value: random_step(&mut seed, 3),
                })
                .collect();
            // The composed map agrees with the steps on every input.
            let mut map = Affine::identity();
            for i in &insts {
                let Inst::Assign { value, .. } = i else {
                    unreachable!()
                };
                map = affine_of(value, 0)
                    .expect("affine by construction")
                    .after(&map);
            }
            let rebuilt = expr_of(&map, &v(0));
            let mut out = insts.clone();
            collapsed += usize::from(linearize_insts(&mut out));
            for _ in 0..20 {
                let x = xorshift(&mut seed);
                let mut a = [x];
                run(&insts, &mut a);
                assert_eq!(map.apply(x), a[0]);
                assert_eq!(rebuilt.eval(&[x], &mut |_, _| 0), Some(a[0]));
                let mut b = [x];
                run(&out, &mut b);
                assert_eq!(a, b);
            }
        }
        assert!(collapsed > 100, "only {collapsed} of 300 runs collapsed");
    }
}
