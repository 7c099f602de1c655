//! The examples of the VCODE paper (Engler, PLDI 1996) as tests, each run
//! on the native backend and on the reference backend:
//!
//! * `plus1`, Figure 1: the smallest function;
//! * a loop (summing an array, and a count-down loop with a backward branch);
//! * a call to a Rust callback, from inside a loop;
//! * the paper's motivating case, marshalling: a function whose parameter
//!   type string is built at run time stores its arguments into a message
//!   buffer, and another generated function reads them back and calls a
//!   callee (a Rust callback or a generated function) with an argument list
//!   known only at run time.

use vcode::{
    AnyReg, Arg, Backend, Callee, Class, Code, D, F, Func, I, Invoke, L, Leaf, P, Reference, Reg,
    Ty, Value, X64,
};

/// Runs `code` with `args` (through [`Invoke`]).
fn run(code: &(impl Invoke + ?Sized), args: &[Value]) -> Value {
    // SAFETY: each test passes arguments of the function's types and the
    // functions touch only the memory the test passes to them.
    unsafe { code.invoke(args) }.unwrap_or_else(|e| panic!("{e}"))
}

// ---------------------------------------------------------------------------
// Figure 1: plus1
// ---------------------------------------------------------------------------

/// `int plus1(int x) { return x + 1; }`, written once for any backend.
fn plus1<B: Backend>() -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let args = f.lambda("%i", Leaf::Yes)?;
    let x = args.get::<I>(0)?;
    f.add(x, x, 1);
    f.ret(x);
    f.end()
}

#[test]
fn figure_1_plus1() {
    let native = plus1::<X64>().unwrap();
    let reference = plus1::<Reference>().unwrap();
    // SAFETY: plus1 only computes on its argument.
    let f = unsafe { native.as_fn::<extern "C" fn(i32) -> i32>() }.unwrap();
    for x in [0, 1, -1, 41, i32::MAX, i32::MIN, 0x7fff_fffe] {
        assert_eq!(f(x), x.wrapping_add(1));
        assert_eq!(run(&reference, &[Value::I(x)]), Value::I(x.wrapping_add(1)));
        assert_eq!(run(&native, &[Value::I(x)]), Value::I(x.wrapping_add(1)));
    }
    // As in the paper, the function is a couple of instructions: an add and
    // a return (no frame).
    let mut dec = iced_x86::Decoder::new(64, native.bytes(), iced_x86::DecoderOptions::NONE);
    let insns: Vec<_> = dec.iter().collect();
    assert!(insns.len() <= 3, "{}", native.disassemble());
    assert_eq!(insns.last().unwrap().mnemonic(), iced_x86::Mnemonic::Ret);
    // The typed pointer is checked against the signature.
    // SAFETY: never called: the check fails.
    assert!(unsafe { native.as_fn::<extern "C" fn(i64) -> i32>() }.is_err());
}

// ---------------------------------------------------------------------------
// Loops
// ---------------------------------------------------------------------------

/// `long sum(int *a, int n)`: a pointer loop, sign-extending each element.
fn sum<B: Backend>() -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p%i", Leaf::Yes)?;
    let (a, n) = (p.get::<P>(0)?, p.get::<I>(1)?);
    let s = f.getreg::<L>(Class::Temp)?;
    let x = f.getreg::<L>(Class::Temp)?;
    let xi = f.getreg::<I>(Class::Temp)?;
    let end = f.getreg::<P>(Class::Temp)?;
    f.set(s, 0);
    let (top, done) = (f.genlabel(), f.genlabel());
    f.ble(n, 0, done);
    f.cv(end.cast::<L>(), n);
    f.lsh(end, end, 2);
    f.add(end, end, a);
    f.label(top);
    f.ld(xi, a, 0);
    f.cv(x, xi);
    f.add(s, s, x);
    f.add(a, a, 4);
    f.blt(a, end, top);
    f.label(done);
    f.ret(s);
    f.end()
}

/// `unsigned long fact(unsigned n)`: a count-down loop (backward `bne`).
fn fact<B: Backend>() -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%u", Leaf::Yes)?;
    let n = p.get::<vcode::U>(0)?;
    let (acc, k) = (
        f.getreg::<vcode::UL>(Class::Temp)?,
        f.getreg::<vcode::UL>(Class::Temp)?,
    );
    f.set(acc, 1);
    f.cv(k, n);
    let (top, done) = (f.genlabel(), f.genlabel());
    f.beq(k, 0, done);
    f.label(top);
    f.mul(acc, acc, k);
    f.sub(k, k, 1);
    f.bne(k, 0, top);
    f.label(done);
    f.ret(acc);
    f.end()
}

#[test]
fn loops() {
    let (native, reference) = (sum::<X64>().unwrap(), sum::<Reference>().unwrap());
    let arrays: [&[i32]; 4] = [
        &[],
        &[5],
        &[1, 2, 3, 4],
        &[i32::MAX, i32::MAX, i32::MIN, -1, 7],
    ];
    for a in arrays {
        let want: i64 = a.iter().map(|&x| x as i64).sum();
        let args = [Value::P(a.as_ptr() as usize), Value::I(a.len() as i32)];
        assert_eq!(run(&native, &args), Value::L(want));
        assert_eq!(run(&reference, &args), Value::L(want));
    }
    let big: Vec<i32> = (0..10_000).map(|i| i * 37 - 5000).collect();
    let args = [Value::P(big.as_ptr() as usize), Value::I(big.len() as i32)];
    let want: i64 = big.iter().map(|&x| x as i64).sum();
    assert_eq!(run(&native, &args), Value::L(want));
    assert_eq!(run(&reference, &args), Value::L(want));

    let (native, reference) = (fact::<X64>().unwrap(), fact::<Reference>().unwrap());
    for n in [0u32, 1, 2, 5, 20, 21, 30] {
        let want = (1..=n as u64).fold(1u64, |a, k| a.wrapping_mul(k));
        assert_eq!(run(&native, &[Value::U(n)]), Value::UL(want));
        assert_eq!(run(&reference, &[Value::U(n)]), Value::UL(want));
    }
}

// ---------------------------------------------------------------------------
// A call to a Rust callback
// ---------------------------------------------------------------------------

/// The callback: `double weigh(int i, double x, long w)`.
extern "C" fn weigh(i: i32, x: f64, w: i64) -> f64 {
    x * (i as f64 + 1.0) + w as f64
}

/// `double dot(double *xs, int n, long w)`: calls `weigh` for each element
/// and sums the results; `i`, the sum, the pointer and `n` live in
/// persistent registers across the calls.
fn dot<B: Backend>() -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p%i%l", Leaf::No)?;
    let (xs0, n0, w0) = (p.get::<P>(0)?, p.get::<I>(1)?, p.get::<L>(2)?);
    let xs = f.getreg::<P>(Class::Persistent)?;
    let n = f.getreg::<I>(Class::Persistent)?;
    let w = f.getreg::<L>(Class::Persistent)?;
    let i = f.getreg::<I>(Class::Persistent)?;
    let acc = f.getreg::<D>(Class::Persistent)?;
    let x = f.getreg::<D>(Class::Temp)?;
    f.mov(xs, xs0);
    f.mov(n, n0);
    f.mov(w, w0);
    f.set(i, 0);
    f.set(acc, 0.0);
    let (top, done) = (f.genlabel(), f.genlabel());
    f.bge(i, n, done);
    f.label(top);
    f.ld(x, xs, 0);
    f.call(
        x,
        Callee::Native(weigh as *const () as usize),
        &[i.into(), x.into(), w.into()],
    );
    f.add(acc, acc, x);
    f.add(xs, xs, 8);
    f.add(i, i, 1);
    f.blt(i, n, top);
    f.label(done);
    f.ret(acc);
    f.end()
}

#[test]
fn call_to_a_rust_callback() {
    let (native, reference) = (dot::<X64>().unwrap(), dot::<Reference>().unwrap());
    let xs = [1.5, -2.0, 0.25, 1e10, -0.0];
    for n in 0..=xs.len() {
        let want = (0..n).fold(0.0, |a, i| a + weigh(i as i32, xs[i], -3));
        let args = [
            Value::P(xs.as_ptr() as usize),
            Value::I(n as i32),
            Value::L(-3),
        ];
        assert_eq!(run(&native, &args), Value::D(want));
        assert_eq!(run(&reference, &args), Value::D(want));
    }
    // Through the typed pointer too.
    // SAFETY: reads n doubles from xs and calls `weigh`.
    let f = unsafe { native.as_fn::<extern "C" fn(*const f64, i32, i64) -> f64>() }.unwrap();
    assert_eq!(
        f(xs.as_ptr(), 3, 2),
        weigh(0, 1.5, 2) + weigh(1, -2.0, 2) + weigh(2, 0.25, 2)
    );
}

// ---------------------------------------------------------------------------
// Marshalling: a signature chosen at run time
// ---------------------------------------------------------------------------

/// The parameter type string for `tys`, built at run time.
fn type_string(tys: &[Ty]) -> String {
    tys.iter().map(|t| format!("%{t}")).collect()
}

/// `void marshal(u8 *msg, T0 a0, T1 a1, ...)`: stores each argument into
/// its 8-byte slot of the message, for a signature known only at run time.
fn marshal<B: Backend>(tys: &[Ty]) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let sig = format!("%p{}", type_string(tys));
    let p = f.lambda(&sig, Leaf::Yes)?;
    let msg = p.get::<P>(0)?;
    for (k, a) in p.all()[1..].iter().enumerate() {
        let off = 8 * k as i64;
        match a.ty {
            Ty::I => f.st(Reg::<I>::phys(a.n), msg, off),
            Ty::U => f.st(Reg::<vcode::U>::phys(a.n), msg, off),
            Ty::L => f.st(Reg::<L>::phys(a.n), msg, off),
            Ty::UL => f.st(Reg::<vcode::UL>::phys(a.n), msg, off),
            Ty::P => f.st(Reg::<P>::phys(a.n), msg, off),
            Ty::F => f.st(Reg::<F>::phys(a.n), msg, off),
            _ => f.st(Reg::<D>::phys(a.n), msg, off),
        }
    }
    f.retv();
    f.end()
}

/// `R unmarshal(u8 *msg)`: loads the arguments back from the message and
/// calls `callee` with them: an argument list known only at run time.
fn unmarshal_call<B: Backend>(
    tys: &[Ty],
    ret: Ty,
    callee: Callee<'_, B::Code>,
) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p", Leaf::No)?;
    let msg = p.get::<P>(0)?;
    let mut args = Vec::new();
    for (k, &t) in tys.iter().enumerate() {
        let off = 8 * k as i64;
        let n = if t.is_float() {
            f.getreg::<D>(Class::Temp)?.num()
        } else {
            f.getreg::<L>(Class::Temp)?.num()
        };
        match t {
            Ty::I => f.ld(Reg::<I>::phys(n), msg, off),
            Ty::U => f.ld(Reg::<vcode::U>::phys(n), msg, off),
            Ty::L => f.ld(Reg::<L>::phys(n), msg, off),
            Ty::UL => f.ld(Reg::<vcode::UL>::phys(n), msg, off),
            Ty::P => f.ld(Reg::<P>::phys(n), msg, off),
            Ty::F => f.ld(Reg::<F>::phys(n), msg, off),
            _ => f.ld(Reg::<D>::phys(n), msg, off),
        }
        args.push(Arg::Reg(AnyReg { ty: t, n }));
    }
    match ret {
        Ty::D => {
            let r = f.getreg::<D>(Class::Temp)?;
            f.call(r, callee, &args);
            f.ret(r);
        }
        _ => {
            let r = f.getreg::<L>(Class::Temp)?;
            f.call(r, callee, &args);
            f.ret(r);
        }
    }
    f.end()
}

/// A generated callee of a run-time signature: a weighted sum of its
/// arguments, as a double.
fn checksum<B: Backend>(tys: &[Ty]) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda(&type_string(tys), Leaf::Yes)?;
    let acc = f.getreg::<D>(Class::Temp)?;
    let t = f.getreg::<D>(Class::Temp)?;
    let k = f.getreg::<D>(Class::Temp)?;
    f.set(acc, 0.0);
    for (i, a) in p.all().iter().enumerate() {
        match a.ty {
            Ty::I => f.cv(t, Reg::<I>::phys(a.n)),
            Ty::U => f.cv(t, Reg::<vcode::U>::phys(a.n)),
            Ty::L => f.cv(t, Reg::<L>::phys(a.n)),
            Ty::UL => f.cv(t, Reg::<vcode::UL>::phys(a.n)),
            Ty::P => {
                // Pointers do not convert to floats: through `ul`.
                let u = Reg::<vcode::UL>::phys(a.n);
                f.cv(t, u);
            }
            Ty::F => f.cv(t, Reg::<F>::phys(a.n)),
            _ => f.mov(t, Reg::<D>::phys(a.n)),
        }
        f.set(k, (i + 1) as f64);
        f.mul(t, t, k);
        f.add(acc, acc, t);
    }
    f.ret(acc);
    f.end()
}

fn checksum_rust(vals: &[Value]) -> f64 {
    vals.iter().enumerate().fold(0.0, |acc, (i, v)| {
        let x = match *v {
            Value::I(x) => x as f64,
            Value::U(x) => x as f64,
            Value::L(x) => x as f64,
            Value::UL(x) => x as f64,
            Value::P(x) => x as u64 as f64,
            Value::F(x) => x as f64,
            Value::D(x) => x,
            Value::V => unreachable!(),
        };
        acc + x * (i + 1) as f64
    })
}

/// A Rust callee with more than 6 integer and 8 float arguments.
#[allow(clippy::too_many_arguments)]
extern "C" fn wide(
    a: i32,
    b: f64,
    c: i64,
    d: f32,
    e: u32,
    f: f64,
    g: u64,
    h: f64,
    i: i32,
    j: f32,
    k: f64,
    l: i64,
    m: f64,
    n: f64,
    o: usize,
) -> i64 {
    let fl = b + d as f64 * 2.0 + f * 3.0 + h * 4.0 + j as f64 * 5.0 + k * 6.0 + m * 7.0 + n * 8.0;
    (a as i64)
        ^ c.wrapping_mul(3)
        ^ ((e as i64) << 7)
        ^ (g as i64).rotate_left(13)
        ^ ((i as i64) << 21)
        ^ l.wrapping_mul(5)
        ^ (o as i64).wrapping_mul(7)
        ^ fl as i64
}

const WIDE: [Ty; 15] = [
    Ty::I,
    Ty::D,
    Ty::L,
    Ty::F,
    Ty::U,
    Ty::D,
    Ty::UL,
    Ty::D,
    Ty::I,
    Ty::F,
    Ty::D,
    Ty::L,
    Ty::D,
    Ty::D,
    Ty::P,
];

/// Round trip of one message: marshal `vals` with a generated function of
/// their run-time signature, then unmarshal and call `callee`; returns what
/// each backend's call returned, and checks the messages are identical.
fn round_trip(
    vals: &[Value],
    ret: Ty,
    native_callee: Callee<'_, Code>,
    ref_callee: Callee<'_, vcode::reference::RefCode>,
) -> (Value, Value) {
    let tys: Vec<Ty> = vals.iter().map(|v| v.ty()).collect();
    let (mn, mr) = (
        marshal::<X64>(&tys).unwrap(),
        marshal::<Reference>(&tys).unwrap(),
    );
    let (un, ur) = (
        unmarshal_call::<X64>(&tys, ret, native_callee).unwrap(),
        unmarshal_call::<Reference>(&tys, ret, ref_callee).unwrap(),
    );
    let mut out = Vec::new();
    let mut msgs = Vec::new();
    for (m, native) in [(&mn as &dyn Invoke, true), (&mr as &dyn Invoke, false)] {
        let mut msg = vec![0u8; 8 * vals.len()];
        let mut args = vec![Value::P(msg.as_mut_ptr() as usize)];
        args.extend_from_slice(vals);
        assert_eq!(run(m, &args), Value::V);
        let u: &dyn Invoke = if native { &un } else { &ur };
        out.push(run(u, &[Value::P(msg.as_ptr() as usize)]));
        msgs.push(msg);
    }
    assert_eq!(msgs[0], msgs[1], "the marshalled messages differ");
    // The message holds each argument in its slot.
    for (k, v) in vals.iter().enumerate() {
        let slot = &msgs[0][8 * k..8 * k + 8];
        let n = v.ty().size();
        assert_eq!(&slot[..n], &v.bits().to_le_bytes()[..n], "slot {k}");
    }
    (out[0], out[1])
}

#[test]
fn marshalling_with_a_run_time_signature_calling_a_rust_callee() {
    let vals = [
        Value::I(-5),
        Value::D(1.5),
        Value::L(0x1234_5678_9abc_def0),
        Value::F(-2.25),
        Value::U(0xffff_fff0),
        Value::D(3.0),
        Value::UL(u64::MAX - 3),
        Value::D(-0.5),
        Value::I(i32::MIN),
        Value::F(8.5),
        Value::D(1e3),
        Value::L(-77),
        Value::D(0.125),
        Value::D(-64.0),
        Value::P(0xdead_beef),
    ];
    assert_eq!(vals.map(|v| v.ty()), WIDE);
    let want = wide(
        -5,
        1.5,
        0x1234_5678_9abc_def0,
        -2.25,
        0xffff_fff0,
        3.0,
        u64::MAX - 3,
        -0.5,
        i32::MIN,
        8.5,
        1e3,
        -77,
        0.125,
        -64.0,
        0xdead_beef,
    );
    let addr = wide as *const () as usize;
    let (n, r) = round_trip(&vals, Ty::L, Callee::Native(addr), Callee::Native(addr));
    assert_eq!(n, Value::L(want));
    assert_eq!(r, Value::L(want));
}

#[test]
fn marshalling_with_run_time_signatures_calling_generated_callees() {
    // Signatures built at run time from a seed: short ones, ones with
    // many integer arguments (stack), many float arguments (stack), mixed.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let all = [Ty::I, Ty::U, Ty::L, Ty::UL, Ty::P, Ty::F, Ty::D];
    for round in 0..60 {
        let (ni, nf) = match round % 4 {
            0 => (next() % 3, next() % 3),
            1 => (7 + next() % 2, next() % 3),
            2 => (next() % 3, 9 + next() % 3),
            _ => (next() % 8, next() % 12),
        };
        let mut tys: Vec<Ty> = (0..ni).map(|_| all[(next() % 5) as usize]).collect();
        tys.extend((0..nf).map(|_| all[5 + (next() % 2) as usize]));
        for i in (1..tys.len()).rev() {
            tys.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let vals: Vec<Value> = tys
            .iter()
            .map(|&t| match t {
                Ty::F => Value::F((next() % 1000) as f32 / 8.0 - 60.0),
                Ty::D => Value::D((next() % 100_000) as f64 / 16.0 - 3000.0),
                // Integers that convert to doubles exactly.
                t => Value::from_bits(t, next() % (1 << 40)),
            })
            .collect();
        let (cn, cr) = (
            checksum::<X64>(&tys).unwrap(),
            checksum::<Reference>(&tys).unwrap(),
        );
        let want = checksum_rust(&vals);
        assert_eq!(run(&cn, &vals), Value::D(want), "{}", type_string(&tys));
        let (n, r) = round_trip(&vals, Ty::D, Callee::Code(&cn), Callee::Code(&cr));
        assert_eq!(n, Value::D(want), "{}", type_string(&tys));
        assert_eq!(r, Value::D(want), "{}", type_string(&tys));
    }
}

#[allow(clippy::too_many_arguments)]
extern "C" fn many(
    a0: i64,
    a1: i64,
    a2: i64,
    a3: i64,
    a4: i64,
    a5: i64,
    a6: i64,
    a7: i64,
    a8: i64,
    a9: i64,
    a10: i64,
    a11: i64,
    a12: i64,
    a13: i64,
    a14: i64,
    a15: i64,
    a16: i64,
    a17: i64,
    a18: i64,
    a19: i64,
    a20: i64,
    a21: i64,
    a22: i64,
    a23: i64,
    a24: i64,
    a25: i64,
) -> i64 {
    let v = [
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19,
        a20, a21, a22, a23, a24, a25,
    ];
    v.iter().enumerate().fold(0i64, |acc, (i, &x)| {
        acc.wrapping_mul(31).wrapping_add(x ^ i as i64)
    })
}

/// The most integer arguments a call can pass (26: 6 in registers, 20 on
/// the stack) reach a Rust function intact on both backends.
#[test]
fn a_call_with_twenty_stack_arguments() {
    fn build<B: Backend>() -> vcode::Result<B::Code> {
        let mut f = Func::<B>::with_backend();
        f.lambda("", Leaf::No)?;
        let r = f.getreg::<L>(Class::Temp)?;
        let args: Vec<Arg> = (0..26).map(|k| Arg::Imm(Ty::L, 1000 + 7 * k)).collect();
        f.call(r, Callee::Native(many as *const () as usize), &args);
        f.ret(r);
        f.end()
    }
    let want = many(
        1000, 1007, 1014, 1021, 1028, 1035, 1042, 1049, 1056, 1063, 1070, 1077, 1084, 1091, 1098,
        1105, 1112, 1119, 1126, 1133, 1140, 1147, 1154, 1161, 1168, 1175,
    );
    assert_eq!(run(&build::<X64>().unwrap(), &[]), Value::L(want));
    assert_eq!(run(&build::<Reference>().unwrap(), &[]), Value::L(want));
}
