//! `fastpath vcode demo`: the paper's examples, generated, run, listed and
//! timed.
//!
//! 1. `plus1`, Figure 1 of the VCODE paper.
//! 2. A loop: the sum of an `int` array.
//! 3. A call to a Rust callback from generated code.
//! 4. Marshalling with a signature chosen at run time (the paper's
//!    motivating case): a callee whose parameter list comes from a type
//!    string, and a stub that unpacks a message buffer into that argument
//!    list and calls it.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use vcode::{Arg, Callee, Class, Code, D, Func, I, L, Leaf, P, Reg, Ty};

type Res<T> = Result<T, vcode::Error>;

/// Figure 1: `int plus1(int x) { return x + 1; }`.
pub fn plus1(f: &mut Func) -> Res<Code> {
    let args = f.lambda("%i", Leaf::Yes)?;
    let x = args.get::<I>(0)?;
    f.name("plus1");
    f.add(x, x, 1);
    f.ret(x);
    f.end()
}

/// `int sum(int *a, int n)`: a loop over memory.
pub fn sum(f: &mut Func) -> Res<Code> {
    let args = f.lambda("%p%i", Leaf::Yes)?;
    let (a, n) = (args.get::<P>(0)?, args.get::<I>(1)?);
    f.name("sum");
    let s = f.getreg::<I>(Class::Temp)?;
    let x = f.getreg::<I>(Class::Temp)?;
    let end = f.getreg::<P>(Class::Temp)?;
    let (top, done) = (f.genlabel(), f.genlabel());
    f.set(s, 0);
    f.ble(n, 0, done);
    f.cv(end.cast::<L>(), n);
    f.lsh(end, end, 2);
    f.add(end, end, a);
    f.label(top);
    f.ld(x, a, 0);
    f.add(s, s, x);
    f.add(a, a, 4);
    f.blt(a, end, top);
    f.label(done);
    f.ret(s);
    f.end()
}

extern "C" fn scale(x: i64, k: i32) -> i64 {
    x * k as i64
}

/// `long twice_scaled(long x)`: calls the Rust function `scale` twice,
/// keeping a value across the calls in a persistent register.
pub fn callback(f: &mut Func) -> Res<Code> {
    let args = f.lambda("%l", Leaf::No)?;
    let x = args.get::<L>(0)?;
    f.name("twice_scaled");
    let keep = f.getreg::<L>(Class::Persistent)?;
    let r = f.getreg::<L>(Class::Temp)?;
    f.mov(keep, x);
    f.call(
        r,
        Callee::Native(scale as *const () as usize),
        &[keep.into(), Arg::Imm(Ty::I, 3)],
    );
    f.call(
        r,
        Callee::Native(scale as *const () as usize),
        &[r.into(), Arg::Imm(Ty::I, 5)],
    );
    f.add(r, r, keep);
    f.ret(r);
    f.end()
}

/// A callee with run-time signature `sig` returning the double
/// `sum (k + 1) * arg_k`.
pub fn weighted_sum(f: &mut Func, sig: &str) -> Res<Code> {
    let args = f.lambda(sig, Leaf::Yes)?;
    f.name("weighted_sum");
    let acc = f.getreg::<D>(Class::Temp)?;
    let t = f.getreg::<D>(Class::Temp)?;
    f.set(acc, 0.0);
    for (k, &r) in args.all().iter().enumerate() {
        match r.ty {
            Ty::I => f.cv(t, r.typed::<I>().expect("typed")),
            Ty::L => f.cv(t, r.typed::<L>().expect("typed")),
            Ty::F => f.cv(t, r.typed::<vcode::F>().expect("typed")),
            Ty::D => f.mov(t, r.typed::<D>().expect("typed")),
            other => unreachable!("signature restricted to i l f d, got {other}"),
        }
        let w = f.getreg::<D>(Class::Temp)?;
        f.set(w, (k + 1) as f64);
        f.mul(t, t, w);
        f.putreg(w);
        f.add(acc, acc, t);
    }
    f.ret(acc);
    f.end()
}

/// `double unmarshal(void *msg)`: loads one 8-byte field per parameter of
/// `callee` from `msg` and calls it with that argument list.
pub fn unmarshal(f: &mut Func, callee: &Code) -> Res<Code> {
    let args = f.lambda("%p", Leaf::No)?;
    let msg = args.get::<P>(0)?;
    f.name("unmarshal");
    let base = f.getreg::<P>(Class::Persistent)?;
    f.mov(base, msg);
    let mut list = Vec::new();
    for (k, &ty) in callee.signature().params().iter().enumerate() {
        let off = 8 * k as i32;
        let r = match ty {
            Ty::I => {
                let r = f.getreg::<I>(Class::Temp)?;
                f.ld(r, base, off);
                r.any()
            }
            Ty::L => {
                let r = f.getreg::<L>(Class::Temp)?;
                f.ld(r, base, off);
                r.any()
            }
            Ty::F => {
                let r = f.getreg::<vcode::F>(Class::Temp)?;
                f.ld(r, base, off);
                r.any()
            }
            _ => {
                let r = f.getreg::<D>(Class::Temp)?;
                f.ld(r, base, off);
                r.any()
            }
        };
        list.push(Arg::Reg(r));
    }
    let out = f.getreg::<D>(Class::Temp)?;
    f.call(out, Callee::Code(callee), &list);
    f.ret(out);
    f.end()
}

fn show(out: &mut String, code: &Code, result: &str) {
    let _ = writeln!(
        out,
        "\n== {} ({} bytes) ==",
        code.name().unwrap_or("?"),
        code.len()
    );
    let _ = writeln!(out, "{result}");
    out.push_str(&code.disassemble());
}

/// Generation cost: `reps` functions of the given builder, timed.
fn cost(
    name: &str,
    insns: usize,
    reps: usize,
    mut build: impl FnMut(&mut Func) -> Res<Code>,
) -> Res<String> {
    let mut f = Func::new();
    build(&mut f)?; // warm up the buffers and the arena
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(build(&mut f)?);
    }
    let ns = t.elapsed().as_nanos() as f64 / reps as f64;
    Ok(format!(
        "  {name:<14} {insns:>4} insns  {ns:>9.1} ns/function  {:>6.2} ns/insn (lambda and end included)\n",
        ns / insns as f64
    ))
}

/// Runs the demo; `sig` is the run-time signature for example 4.
pub fn run(sig: &str) -> ExitCode {
    match demo(sig) {
        Ok(s) => {
            print!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fastpath vcode demo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn demo(sig: &str) -> Result<String, Box<dyn std::error::Error>> {
    if let Some(bad) = vcode::Signature::parse(sig)?
        .params()
        .iter()
        .find(|t| !matches!(t, Ty::I | Ty::L | Ty::F | Ty::D))
    {
        return Err(
            format!("example 4 takes parameters of types i, l, f, d; {sig:?} has {bad}").into(),
        );
    }
    let mut out =
        String::from("vcode demo: the VCODE paper's examples, generated in place for x86-64\n");
    let mut f = Func::new();

    let c = plus1(&mut f)?;
    // SAFETY: plus1 only computes on its argument.
    let g = unsafe { c.as_fn::<extern "C" fn(i32) -> i32>()? };
    show(&mut out, &c, &format!("plus1(41) = {}", g(41)));

    let c = sum(&mut f)?;
    let data: Vec<i32> = (1..=100).collect();
    // SAFETY: sum reads `n` ints from the pointer it is given.
    let g = unsafe { c.as_fn::<extern "C" fn(*const i32, i32) -> i32>()? };
    show(
        &mut out,
        &c,
        &format!("sum(1..=100) = {}", g(data.as_ptr(), 100)),
    );

    let c = callback(&mut f)?;
    // SAFETY: calls `scale`, a plain Rust function of the declared signature.
    let g = unsafe { c.as_fn::<extern "C" fn(i64) -> i64>()? };
    show(
        &mut out,
        &c,
        &format!("twice_scaled(7) = scale(scale(7, 3), 5) + 7 = {}", g(7)),
    );

    let callee = weighted_sum(&mut f, sig)?;
    let stub = unmarshal(&mut Func::new(), &callee)?;
    let params = callee.signature().params().to_vec();
    let mut msg = vec![0u64; params.len()];
    let mut expect = 0.0f64;
    for (k, ty) in params.iter().enumerate() {
        let v = (k as i64 + 1) * if k % 2 == 0 { 10 } else { -3 };
        msg[k] = match ty {
            Ty::I => v as i32 as u32 as u64,
            Ty::L => v as u64,
            Ty::F => (v as f32 + 0.5).to_bits() as u64,
            _ => (v as f64 + 0.25).to_bits(),
        };
        let x = match ty {
            Ty::F => (v as f32 + 0.5) as f64,
            Ty::D => v as f64 + 0.25,
            _ => v as f64,
        };
        expect += (k + 1) as f64 * x;
    }
    // SAFETY: the stub reads one 8-byte field per parameter from `msg`,
    // which has exactly that many, and calls the generated callee.
    let g = unsafe { stub.as_fn::<extern "C" fn(*const u64) -> f64>()? };
    let got = g(msg.as_ptr());
    let verdict = if got == expect { "ok" } else { "MISMATCH" };
    show(
        &mut out,
        &callee,
        &format!("signature {sig:?} chosen at run time"),
    );
    show(
        &mut out,
        &stub,
        &format!("unmarshal(msg) = {got} (Rust computes {expect}: {verdict})"),
    );
    if got != expect {
        return Err(format!("example 4 computed {got}, expected {expect}").into());
    }

    out.push_str("\n== generation cost (wall clock on this machine; see docs/benchmarks.md for callgrind counts) ==\n");
    out.push_str(&cost("plus1", 2, 200_000, plus1)?);
    out.push_str(&cost("sum", 12, 100_000, sum)?);
    out.push_str(&cost("twice_scaled", 5, 100_000, callback)?);
    let n = Reg::<I>::t(0);
    out.push_str(&cost("straight-100", 102, 20_000, |f| {
        f.lambda("", Leaf::Yes)?;
        f.set(n, 1);
        for k in 0..25 {
            f.add(n, n, k);
            f.xor(n, n, 0x55);
            f.lsh(n, n, 1);
            f.rsh(n, n, 1);
        }
        f.ret(n);
        f.end()
    })?);
    Ok(out)
}
