//! A client of vcode written against its public API only, as a
//! generation-cost benchmark of the kind a compiler is: a small structured
//! integer language (arithmetic, shifts, comparisons, if/else, counted
//! loops, `a[e & 15]` loads and stores, returns) and two code
//! generators for it:
//!
//! * [`gen_getreg`]: variables and expression temporaries from
//!   `getreg`/`putreg`, subscripts widened with `cv`;
//! * [`gen_fixed`]: a template JIT: constant fixed names `T0..T3`, the
//!   variables and an operand stack in `local`s.
//!
//! Both walk the same tree ([`program`]) while generating, so the
//! counted cost is the client's walk plus vcode's own work; callgrind's
//! per-file attribution separates the two (see `docs/benchmarks.md`).
//! A test runs both generators' code against an evaluator.

use vcode::{Backend, Class, Func, I, Label, Leaf, Local, P, Reg};

/// Variables of a program.
pub const VARS: usize = 5;

/// A binary operator.
#[derive(Copy, Clone, Debug)]
pub enum Op {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `&`
    And,
    /// `^`
    Xor,
    /// `>>` (arithmetic)
    Shr,
}

/// A comparison.
#[derive(Copy, Clone, Debug)]
pub enum Cmp {
    /// `<`
    Lt,
    /// `==`
    Eq,
    /// `>`
    Gt,
}

/// An expression.
#[derive(Clone, Debug)]
pub enum E {
    /// A constant.
    K(i32),
    /// A variable.
    V(u8),
    /// The parameter `n`.
    N,
    /// A binary operation.
    B(Op, Box<E>, Box<E>),
    /// `a[e & 15]`.
    At(Box<E>),
}

/// A statement.
#[derive(Clone, Debug)]
pub enum S {
    /// `v = e`.
    Set(u8, E),
    /// `a[i & 15] = e`.
    Store(E, E),
    /// `if a cmp b { then } else { els }`.
    If(Cmp, E, E, Vec<S>, Vec<S>),
    /// `v = count; do { body; v -= 1 } while v > 0` (`count >= 1`).
    Repeat(u8, i32, Vec<S>),
    /// `return e`.
    Ret(E),
}

fn b(op: Op, x: E, y: E) -> E {
    E::B(op, Box::new(x), Box::new(y))
}
fn at(e: E) -> E {
    E::At(Box::new(e))
}

/// The benchmark program: `int prog(int *a, int n)` over `a[0..16]`.
///
/// ```text
/// x = n; y = 0; s = 1;
/// repeat i = 8 {
///     t = a[(x + i) & 15];
///     if t < 100 { y = y + t * 3 } else { y = y ^ (t >> 2) }
///     a[(i * 5) & 15] = y + x;
///     if (y & 1) == 0 { s = s + y } else { s = s - (y & 255) }
///     x = x * 7 + 3;
/// }
/// repeat i = 4 {
///     a[i & 15] = a[(i + 3) & 15] ^ (s & 1023);
///     if a[i & 15] > y { y = y + a[i & 15] } else { x = x - 1 }
///     t = (y >> 3) * i;
///     s = s + (t - x);
/// }
/// if s > y { return s - y }
/// return (y ^ s) + a[x & 15];
/// ```
pub fn program() -> Vec<S> {
    use E::{K, N, V};
    let (x, y, s, i, t) = (0, 1, 2, 3, 4);
    vec![
        S::Set(x, N),
        S::Set(y, K(0)),
        S::Set(s, K(1)),
        S::Repeat(
            i,
            8,
            vec![
                S::Set(t, at(b(Op::Add, V(x), V(i)))),
                S::If(
                    Cmp::Lt,
                    V(t),
                    K(100),
                    vec![S::Set(y, b(Op::Add, V(y), b(Op::Mul, V(t), K(3))))],
                    vec![S::Set(y, b(Op::Xor, V(y), b(Op::Shr, V(t), K(2))))],
                ),
                S::Store(b(Op::Mul, V(i), K(5)), b(Op::Add, V(y), V(x))),
                S::If(
                    Cmp::Eq,
                    b(Op::And, V(y), K(1)),
                    K(0),
                    vec![S::Set(s, b(Op::Add, V(s), V(y)))],
                    vec![S::Set(s, b(Op::Sub, V(s), b(Op::And, V(y), K(255))))],
                ),
                S::Set(x, b(Op::Add, b(Op::Mul, V(x), K(7)), K(3))),
            ],
        ),
        S::Repeat(
            i,
            4,
            vec![
                S::Store(
                    V(i),
                    b(
                        Op::Xor,
                        at(b(Op::Add, V(i), K(3))),
                        b(Op::And, V(s), K(1023)),
                    ),
                ),
                S::If(
                    Cmp::Gt,
                    at(V(i)),
                    V(y),
                    vec![S::Set(y, b(Op::Add, V(y), at(V(i))))],
                    vec![S::Set(x, b(Op::Sub, V(x), K(1)))],
                ),
                S::Set(t, b(Op::Mul, b(Op::Shr, V(y), K(3)), V(i))),
                S::Set(s, b(Op::Add, V(s), b(Op::Sub, V(t), V(x)))),
            ],
        ),
        S::If(
            Cmp::Gt,
            V(s),
            V(y),
            vec![S::Ret(b(Op::Sub, V(s), V(y)))],
            vec![],
        ),
        S::Ret(b(Op::Add, b(Op::Xor, V(y), V(s)), at(V(x)))),
    ]
}

// -- the evaluator ---------------------------------------------------------

fn eval_e(e: &E, v: &[i32; VARS], n: i32, a: &[i32; 16]) -> i32 {
    match e {
        E::K(k) => *k,
        E::V(i) => v[*i as usize],
        E::N => n,
        E::B(op, x, y) => {
            let (x, y) = (eval_e(x, v, n, a), eval_e(y, v, n, a));
            match op {
                Op::Add => x.wrapping_add(y),
                Op::Sub => x.wrapping_sub(y),
                Op::Mul => x.wrapping_mul(y),
                Op::And => x & y,
                Op::Xor => x ^ y,
                Op::Shr => x >> (y & 31),
            }
        }
        E::At(i) => a[(eval_e(i, v, n, a) & 15) as usize],
    }
}

fn eval_s(s: &[S], v: &mut [i32; VARS], n: i32, a: &mut [i32; 16]) -> Option<i32> {
    for st in s {
        match st {
            S::Set(i, e) => v[*i as usize] = eval_e(e, v, n, a),
            S::Store(i, e) => {
                let k = (eval_e(i, v, n, a) & 15) as usize;
                a[k] = eval_e(e, v, n, a);
            }
            S::If(c, x, y, t, e) => {
                let (x, y) = (eval_e(x, v, n, a), eval_e(y, v, n, a));
                let go = match c {
                    Cmp::Lt => x < y,
                    Cmp::Eq => x == y,
                    Cmp::Gt => x > y,
                };
                if let Some(r) = eval_s(if go { t } else { e }, v, n, a) {
                    return Some(r);
                }
            }
            S::Repeat(i, k, body) => {
                v[*i as usize] = *k;
                loop {
                    if let Some(r) = eval_s(body, v, n, a) {
                        return Some(r);
                    }
                    v[*i as usize] -= 1;
                    if v[*i as usize] <= 0 {
                        break;
                    }
                }
            }
            S::Ret(e) => return Some(eval_e(e, v, n, a)),
        }
    }
    None
}

/// Runs the program in Rust: the result and the array after it.
pub fn eval(p: &[S], n: i32, a: &mut [i32; 16]) -> i32 {
    let mut v = [0; VARS];
    eval_s(p, &mut v, n, a).unwrap_or(0)
}

// -- generator 1: getreg/putreg temporaries ----------------------------------

struct G<'f, B: Backend> {
    f: &'f mut Func<B>,
    a: Reg<P>,
    n: Reg<I>,
    vars: [Reg<I>; VARS],
}

impl<B: Backend> G<'_, B> {
    /// The register holding `e`: a variable's own register (not to be
    /// released) or a temporary from `getreg` (released by the caller).
    fn expr(&mut self, e: &E) -> vcode::Result<(Reg<I>, bool)> {
        Ok(match e {
            E::V(i) => (self.vars[*i as usize], false),
            E::N => (self.n, false),
            E::K(k) => {
                let r = self.f.getreg::<I>(Class::Temp)?;
                self.f.set(r, *k);
                (r, true)
            }
            E::B(op, x, y) => {
                let (rx, tx) = self.expr(x)?;
                let rd = if tx {
                    rx
                } else {
                    self.f.getreg::<I>(Class::Temp)?
                };
                if let E::K(k) = **y {
                    self.op(*op, rd, rx, k);
                } else {
                    let (ry, ty) = self.expr(y)?;
                    self.op(*op, rd, rx, ry);
                    if ty {
                        self.f.putreg(ry);
                    }
                }
                (rd, true)
            }
            E::At(i) => {
                let (ri, ti) = self.expr(i)?;
                let rd = if ti {
                    ri
                } else {
                    self.f.getreg::<I>(Class::Temp)?
                };
                self.f.and(rd, ri, 15);
                let q = self.f.getreg::<P>(Class::Temp)?;
                self.f.cv(q, rd);
                self.f.lsh(q, q, 2);
                self.f.ld(rd, self.a, q);
                self.f.putreg(q);
                (rd, true)
            }
        })
    }

    #[inline(always)]
    fn op(&mut self, op: Op, rd: Reg<I>, x: Reg<I>, y: impl Into<vcode::Operand<I>>) {
        match op {
            Op::Add => self.f.add(rd, x, y),
            Op::Sub => self.f.sub(rd, x, y),
            Op::Mul => self.f.mul(rd, x, y),
            Op::And => self.f.and(rd, x, y),
            Op::Xor => self.f.xor(rd, x, y),
            Op::Shr => self.f.rsh(rd, x, y),
        }
    }

    fn set_var(&mut self, v: u8, e: &E) -> vcode::Result<()> {
        let rv = self.vars[v as usize];
        match e {
            E::K(k) => self.f.set(rv, *k),
            _ => {
                let (r, t) = self.expr(e)?;
                self.f.mov(rv, r);
                if t {
                    self.f.putreg(r);
                }
            }
        }
        Ok(())
    }

    /// Branches to `l` when `x cmp y` is false.
    fn branch_unless(&mut self, c: Cmp, x: &E, y: &E, l: Label) -> vcode::Result<()> {
        let (rx, tx) = self.expr(x)?;
        match y {
            E::K(k) => match c {
                Cmp::Lt => self.f.bge(rx, *k, l),
                Cmp::Eq => self.f.bne(rx, *k, l),
                Cmp::Gt => self.f.ble(rx, *k, l),
            },
            _ => {
                let (ry, ty) = self.expr(y)?;
                match c {
                    Cmp::Lt => self.f.bge(rx, ry, l),
                    Cmp::Eq => self.f.bne(rx, ry, l),
                    Cmp::Gt => self.f.ble(rx, ry, l),
                }
                if ty {
                    self.f.putreg(ry);
                }
            }
        }
        if tx {
            self.f.putreg(rx);
        }
        Ok(())
    }

    fn stmts(&mut self, s: &[S]) -> vcode::Result<()> {
        for st in s {
            match st {
                S::Set(v, e) => self.set_var(*v, e)?,
                S::Store(i, e) => {
                    let (ri, ti) = self.expr(i)?;
                    let q = self.f.getreg::<P>(Class::Temp)?;
                    let k = self.f.getreg::<I>(Class::Temp)?;
                    self.f.and(k, ri, 15);
                    self.f.cv(q, k);
                    self.f.lsh(q, q, 2);
                    self.f.putreg(k);
                    if ti {
                        self.f.putreg(ri);
                    }
                    let (re, te) = self.expr(e)?;
                    self.f.st(re, self.a, q);
                    if te {
                        self.f.putreg(re);
                    }
                    self.f.putreg(q);
                }
                S::If(c, x, y, t, e) => {
                    let (els, done) = (self.f.genlabel(), self.f.genlabel());
                    self.branch_unless(*c, x, y, els)?;
                    self.stmts(t)?;
                    if !e.is_empty() {
                        self.f.jmp(done);
                    }
                    self.f.label(els);
                    self.stmts(e)?;
                    self.f.label(done);
                }
                S::Repeat(v, k, body) => {
                    let rv = self.vars[*v as usize];
                    let top = self.f.genlabel();
                    self.f.set(rv, *k);
                    self.f.label(top);
                    self.stmts(body)?;
                    self.f.sub(rv, rv, 1);
                    self.f.bgt(rv, 0, top);
                }
                S::Ret(e) => {
                    let (r, t) = self.expr(e)?;
                    self.f.ret(r);
                    if t {
                        self.f.putreg(r);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Generates `int prog(int *a, int n)` with `getreg` registers.
#[inline(always)]
pub fn gen_getreg<B: Backend>(f: &mut Func<B>, p: &[S]) -> vcode::Result<B::Code> {
    let ps = f.lambda("%p%i", Leaf::Yes)?;
    let (a, n) = (ps.get::<P>(0)?, ps.get::<I>(1)?);
    let mut vars = [n; VARS];
    for v in &mut vars {
        *v = f.getreg::<I>(Class::Persistent)?;
    }
    let mut g = G { f, a, n, vars };
    g.stmts(p)?;
    f.end()
}

// -- generator 2: a template JIT over fixed names and locals -----------------

struct T<'f, B: Backend> {
    f: &'f mut Func<B>,
    vars: [Local<I>; VARS],
    /// The operand stack: slot `d` holds the left operand at depth `d`.
    stack: Vec<Local<I>>,
}

const T0: Reg<I> = Reg::t(0);
const T1: Reg<I> = Reg::t(1);
const A: Reg<P> = Reg::t(5);
const N: Reg<I> = Reg::t(4);

impl<B: Backend> T<'_, B> {
    fn slot(&mut self, d: usize) -> Local<I> {
        while self.stack.len() <= d {
            let l = self.f.local::<I>();
            self.stack.push(l);
        }
        self.stack[d]
    }

    /// `e` into `T0`; `T1` is clobbered.
    fn expr(&mut self, e: &E, d: usize) {
        match e {
            E::K(k) => self.f.set(T0, *k),
            E::V(i) => self.f.ld_local(T0, self.vars[*i as usize]),
            E::N => self.f.mov(T0, N),
            E::B(op, x, y) => {
                if let E::K(k) = **y {
                    self.expr(x, d);
                    self.op(*op, k);
                } else {
                    self.expr(x, d);
                    let s = self.slot(d);
                    self.f.st_local(T0, s);
                    self.expr(y, d + 1);
                    self.f.mov(T1, T0);
                    self.f.ld_local(T0, s);
                    self.op(*op, T1);
                }
            }
            E::At(i) => {
                self.expr(i, d);
                self.f.and(T0, T0, 15);
                let q = self.f.cv_in_place::<P>(T0);
                self.f.lsh(q, q, 2);
                self.f.ld(T0, A, q);
            }
        }
    }

    #[inline(always)]
    fn op(&mut self, op: Op, y: impl Into<vcode::Operand<I>>) {
        match op {
            Op::Add => self.f.add(T0, T0, y),
            Op::Sub => self.f.sub(T0, T0, y),
            Op::Mul => self.f.mul(T0, T0, y),
            Op::And => self.f.and(T0, T0, y),
            Op::Xor => self.f.xor(T0, T0, y),
            Op::Shr => self.f.rsh(T0, T0, y),
        }
    }

    fn stmts(&mut self, s: &[S]) {
        for st in s {
            match st {
                S::Set(v, e) => {
                    self.expr(e, 0);
                    self.f.st_local(T0, self.vars[*v as usize]);
                }
                S::Store(i, e) => {
                    // The value first, onto the operand stack; then the
                    // subscript, widened in place.
                    self.expr(e, 0);
                    let s = self.slot(0);
                    self.f.st_local(T0, s);
                    self.expr(i, 1);
                    self.f.and(T0, T0, 15);
                    let q = self.f.cv_in_place::<P>(T0);
                    self.f.lsh(q, q, 2);
                    self.f.ld_local(T1, s);
                    self.f.st(T1, A, q);
                }
                S::If(c, x, y, t, e) => {
                    let (els, done) = (self.f.genlabel(), self.f.genlabel());
                    self.expr(x, 0);
                    if let E::K(k) = y {
                        match c {
                            Cmp::Lt => self.f.bge(T0, *k, els),
                            Cmp::Eq => self.f.bne(T0, *k, els),
                            Cmp::Gt => self.f.ble(T0, *k, els),
                        }
                    } else {
                        let s = self.slot(0);
                        self.f.st_local(T0, s);
                        self.expr(y, 1);
                        self.f.ld_local(T1, s);
                        match c {
                            Cmp::Lt => self.f.bge(T1, T0, els),
                            Cmp::Eq => self.f.bne(T1, T0, els),
                            Cmp::Gt => self.f.ble(T1, T0, els),
                        }
                    }
                    self.stmts(t);
                    if !e.is_empty() {
                        self.f.jmp(done);
                    }
                    self.f.label(els);
                    self.stmts(e);
                    self.f.label(done);
                }
                S::Repeat(v, k, body) => {
                    let l = self.vars[*v as usize];
                    let top = self.f.genlabel();
                    self.f.set(T0, *k);
                    self.f.st_local(T0, l);
                    self.f.label(top);
                    self.stmts(body);
                    self.f.ld_local(T0, l);
                    self.f.sub(T0, T0, 1);
                    self.f.st_local(T0, l);
                    self.f.bgt(T0, 0, top);
                }
                S::Ret(e) => {
                    self.expr(e, 0);
                    self.f.ret(T0);
                }
            }
        }
    }
}

/// Generates `int prog(int *a, int n)` as a template JIT with fixed names.
#[inline(always)]
pub fn gen_fixed<B: Backend>(f: &mut Func<B>, p: &[S]) -> vcode::Result<B::Code> {
    f.lambda("%p%i", Leaf::Yes)?;
    let vars: [Local<I>; VARS] = std::array::from_fn(|_| f.local::<I>());
    let mut t = T {
        f,
        vars,
        stack: Vec::new(),
    };
    t.stmts(p);
    f.end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use vcode::{Invoke, Value};

    fn start() -> [i32; 16] {
        std::array::from_fn(|i| (i as i32 * 37 + 11) % 150 - 20)
    }

    #[test]
    fn both_generators_agree_with_the_evaluator_and_the_reference() {
        let p = program();
        let mut f = Func::new();
        let mut r = Func::<vcode::Reference>::with_backend();
        let natives = [
            gen_getreg(&mut f, &p).unwrap(),
            gen_fixed(&mut f, &p).unwrap(),
        ];
        let refs = [
            gen_getreg(&mut r, &p).unwrap(),
            gen_fixed(&mut r, &p).unwrap(),
        ];
        for n in [-5, 0, 1, 7, 123, 100_000] {
            let mut want_a = start();
            let want = eval(&p, n, &mut want_a);
            for (code, rc) in natives.iter().zip(&refs) {
                let mut a = start();
                // SAFETY: the program reads and writes a[0..16] only.
                let g = unsafe { code.as_fn::<extern "C" fn(*mut i32, i32) -> i32>() }.unwrap();
                assert_eq!(g(a.as_mut_ptr(), n), want, "n = {n}");
                assert_eq!(a, want_a, "n = {n}");
                let mut ra = start();
                // SAFETY: as above, under the reference backend's checks.
                let got = unsafe { rc.invoke(&[Value::P(ra.as_mut_ptr() as usize), Value::I(n)]) }
                    .unwrap();
                assert_eq!(got, Value::I(want), "reference, n = {n}");
                assert_eq!(ra, want_a, "reference, n = {n}");
            }
        }
    }

    #[test]
    fn the_program_is_about_a_hundred_instructions() {
        let p = program();
        let mut r = Func::<vcode::Reference>::with_backend();
        let g = gen_getreg(&mut r, &p).unwrap().len();
        let t = gen_fixed(&mut r, &p).unwrap().len();
        assert!(
            (60..=200).contains(&g) && (60..=250).contains(&t),
            "{g} {t}"
        );
    }
}
