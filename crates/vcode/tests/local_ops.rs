//! esp's extensions on stack locals: `dec_local_branch_borrow` (trait
//! `Countdown`: a repetition counter in the frame, `sub qword [rbp+off], 1;
//! jb`) and `bcmp_local` (trait `LocalCompare`: `cmp r, [rbp+off]; jcc`).
//! Both run natively and on the reference backend against a Rust model,
//! for every register and, for the compare, every condition and integer
//! type.

use vcode::backend::Cond;
use vcode::ext::{Countdown, LocalCompare};
use vcode::{
    Backend, Class, ErrorKind, Func, I, Int, Invoke, L, Leaf, Reference, Reg, Type, U, UL, Value,
    X64,
};

fn call(code: &(impl Invoke + ?Sized), args: &[Value]) -> Value {
    // SAFETY: the functions compute on their arguments and their own frame.
    unsafe { code.invoke(args) }.unwrap_or_else(|e| panic!("{e}"))
}

/// `f(x)`: a local holds `x` (one of several, the `k`-th); one
/// `dec_local_branch_borrow` on it; returns whether it branched (`taken`)
/// or the local's value after it.
fn countdown<B: Backend>(k: usize, taken: bool) -> B::Code {
    let mut f = Func::<B>::with_backend();
    let x = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
    let locals: Vec<_> = (0..4).map(|_| f.local::<UL>()).collect();
    let t = f.getreg::<UL>(Class::Temp).unwrap();
    f.set(t, 0x5555);
    for l in &locals {
        f.st_local(t, *l);
    }
    let loc = locals[k];
    f.st_local(x, loc);
    let yes = f.genlabel();
    f.dec_local_branch_borrow(loc, yes);
    if taken {
        f.set(t, 0);
        f.ret(t);
        f.label(yes);
        f.set(t, 1);
        f.ret(t);
    } else {
        f.label(yes);
        f.ld_local(t, loc);
        // The neighbours are untouched.
        for l in &locals {
            if *l != loc {
                let u = f.getreg::<UL>(Class::Temp).unwrap();
                f.ld_local(u, *l);
                f.add(t, t, u);
                f.sub(t, t, 0x5555);
                f.putreg(u);
            }
        }
        f.ret(t);
    }
    f.end().unwrap()
}

#[test]
fn a_countdown_in_a_local_borrows_only_from_zero() {
    for k in 0..4 {
        for taken in [false, true] {
            let native = countdown::<X64>(k, taken);
            let reference = countdown::<Reference>(k, taken);
            for x in [0u64, 1, 2, 1000, 0x8000_0000, 1 << 63, u64::MAX] {
                let want = if taken {
                    u64::from(x == 0)
                } else {
                    x.wrapping_sub(1)
                };
                for (code, what) in [
                    (&native as &dyn Invoke, "native"),
                    (&reference, "reference"),
                ] {
                    assert_eq!(
                        call(code, &[Value::UL(x)]),
                        Value::UL(want),
                        "{what} local {k} x={x:#x} taken={taken}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_countdown_loop_in_a_local_runs_n_times() {
    fn counted<B: Backend>() -> B::Code {
        let mut f = Func::<B>::with_backend();
        let n = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
        let loc = f.local::<UL>();
        let c = f.getreg::<UL>(Class::Temp).unwrap();
        f.st_local(n, loc);
        f.set(c, 0);
        let (top, exit) = (f.genlabel(), f.genlabel());
        f.label(top);
        f.dec_local_branch_borrow(loc, exit);
        f.add(c, c, 1);
        f.bgt(c, 5000u64, exit);
        f.jmp(top);
        f.label(exit);
        f.ret(c);
        f.end().unwrap()
    }
    let (native, reference) = (counted::<X64>(), counted::<Reference>());
    for n in [0u64, 1, 7, 1000] {
        assert_eq!(call(&native, &[Value::UL(n)]), Value::UL(n));
        assert_eq!(call(&reference, &[Value::UL(n)]), Value::UL(n));
    }
}

/// `f(a, b)`: 1 if `a c b` with `b` in a local and `a` in the `k`-th
/// temporary register, else 0.
fn compare<B: Backend, T: Int + FromI64>(c: Cond, k: usize) -> B::Code {
    let mut f = Func::<B>::with_backend();
    let sig = format!("%{}%{}", T::TY.letter(), T::TY.letter());
    let p = f.lambda(&sig, Leaf::Yes).unwrap();
    let (a, b) = (p.get::<T>(0).unwrap(), p.get::<T>(1).unwrap());
    let loc = f.local::<T>();
    f.st_local(b, loc);
    let mut regs: Vec<Reg<T>> = Vec::new();
    while let Ok(r) = f.getreg::<T>(Class::Temp) {
        regs.push(r);
    }
    // The reference backend's sequence needs one temporary.
    let spare = regs.remove(0);
    f.putreg(spare);
    let r = regs[k % regs.len()];
    f.mov(r, a);
    let yes = f.genlabel();
    f.bcmp_local(c, r, loc, yes);
    f.set(r, T::from_i64(0));
    f.ret(r);
    f.label(yes);
    f.set(r, T::from_i64(1));
    f.ret(r);
    f.end().unwrap()
}

trait FromI64: Type {
    fn from_i64(v: i64) -> Self::Native;
    fn value(v: i64) -> Value;
}
impl FromI64 for L {
    fn from_i64(v: i64) -> i64 {
        v
    }
    fn value(v: i64) -> Value {
        Value::L(v)
    }
}
impl FromI64 for UL {
    fn from_i64(v: i64) -> u64 {
        v as u64
    }
    fn value(v: i64) -> Value {
        Value::UL(v as u64)
    }
}
impl FromI64 for I {
    fn from_i64(v: i64) -> i32 {
        v as i32
    }
    fn value(v: i64) -> Value {
        Value::I(v as i32)
    }
}
impl FromI64 for U {
    fn from_i64(v: i64) -> u32 {
        v as u32
    }
    fn value(v: i64) -> Value {
        Value::U(v as u32)
    }
}

fn holds(c: Cond, a: i128, b: i128) -> bool {
    match c {
        Cond::Lt => a < b,
        Cond::Le => a <= b,
        Cond::Gt => a > b,
        Cond::Ge => a >= b,
        Cond::Eq => a == b,
        Cond::Ne => a != b,
    }
}

fn check<T: Int + FromI64>(widen: fn(i64) -> i128) {
    let vals = [
        0i64,
        1,
        -1,
        2,
        0x7fff_ffff,
        -0x8000_0000,
        0x1_0000_0000,
        i64::MIN,
        i64::MAX,
    ];
    for c in Cond::ALL {
        for k in [0, 3, 6, 10] {
            let native = compare::<X64, T>(c, k);
            let reference = compare::<Reference, T>(c, k);
            for &a in &vals {
                for &b in &vals {
                    let want = T::value(holds(c, widen(a), widen(b)) as i64);
                    let args = [T::value(a), T::value(b)];
                    assert_eq!(call(&native, &args), want, "native {c:?} {} {a} {b}", T::TY);
                    assert_eq!(
                        call(&reference, &args),
                        want,
                        "reference {c:?} {} {a} {b}",
                        T::TY
                    );
                }
            }
        }
    }
}

#[test]
fn compares_with_a_local_follow_the_type_signedness() {
    check::<L>(|v| v as i128);
    check::<UL>(|v| v as u64 as i128);
    check::<I>(|v| v as i32 as i128);
    check::<U>(|v| v as u32 as i128);
}

#[test]
fn an_unknown_local_is_a_typed_error() {
    // A local of another function.
    let mut g = Func::<X64>::new();
    g.lambda("", Leaf::Yes).unwrap();
    let _ = g.local::<UL>();
    let foreign = g.local::<UL>();
    let mut f = Func::<X64>::new();
    let x = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
    let l = f.genlabel();
    f.dec_local_branch_borrow(foreign, l);
    f.label(l);
    f.ret(x);
    let err = f.end().unwrap_err();
    assert_eq!(err.method(), "dec_local_branch_borrow", "{err}");
    assert!(
        matches!(err.kind(), ErrorKind::UnknownLocal { .. }),
        "{err}"
    );
}
