//! `fastpath vcode demo [--target x86-64|aarch64]`: the paper's examples,
//! generated, run, listed and timed.
//!
//! 1. `plus1`, Figure 1 of the VCODE paper.
//! 2. A loop: the sum of an `int` array.
//! 3. Calls from generated code: to a Rust function on x86-64; on aarch64,
//!    whose code runs under emulation and cannot call the host, to a
//!    generated function.
//! 4. Marshalling with a signature chosen at run time (the paper's
//!    motivating case): a callee whose parameter list comes from a type
//!    string, and a stub that unpacks a message buffer into that argument
//!    list and calls it.
//!
//! The examples are written once, generic over the backend; each target
//! says only how its code is listed and how example 3 reaches its callee.
//! The aarch64 target needs the cargo feature `aarch64` (the Unicorn
//! emulator and a disassembler, built from source), off by default so
//! that the main command builds without cmake.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Instant;

use clap::ValueEnum;
use vcode::{
    Arg, Backend, Callee, Class, D, Func, I, Invoke, L, Leaf, Local, P, Reg, Ty, Value, X64,
};

type Res<T> = Result<T, vcode::Error>;

/// The instruction sets `fastpath vcode demo` generates code for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TargetArg {
    /// This host: the code runs natively.
    #[value(name = "x86-64")]
    X86_64,
    /// AArch64 (AAPCS64): the code runs under emulation (feature `aarch64`).
    Aarch64,
}

/// What the demo needs of a target beyond [`Backend`].
trait Target: Backend {
    /// The instruction set's name.
    const NAME: &'static str;
    /// How the heading names the target.
    const TITLE: &'static str;
    /// Whether generated code can call host functions (example 3).
    const CALLS_HOST: bool;
    /// The function's name, its length in bytes and its disassembly.
    fn listing(code: &Self::Code) -> (Option<&str>, usize, String);
}

impl Target for X64 {
    const NAME: &'static str = "x86-64";
    const TITLE: &'static str = "x86-64, run natively";
    const CALLS_HOST: bool = true;
    fn listing(code: &Self::Code) -> (Option<&str>, usize, String) {
        (code.name(), code.len(), code.disassemble())
    }
}

#[cfg(feature = "aarch64")]
impl Target for vcode::aarch64::A64 {
    const NAME: &'static str = "aarch64";
    const TITLE: &'static str = "aarch64 (AAPCS64), run under emulation (Unicorn) on this host";
    const CALLS_HOST: bool = false;
    fn listing(code: &Self::Code) -> (Option<&str>, usize, String) {
        (code.name(), code.len(), code.disassemble())
    }
}

/// Figure 1: `int plus1(int x) { return x + 1; }`.
fn plus1<B: Backend>(f: &mut Func<B>) -> Res<B::Code> {
    let args = f.lambda("%i", Leaf::Yes)?;
    let x = args.get::<I>(0)?;
    f.name("plus1");
    f.add(x, x, 1);
    f.ret(x);
    f.end()
}

/// `int sum(int *a, int n)`: a loop over memory.
fn sum<B: Backend>(f: &mut Func<B>) -> Res<B::Code> {
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

/// `long scale(long x, int k)` in Rust: example 3's callee where
/// generated code can call the host.
extern "C" fn scale(x: i64, k: i32) -> i64 {
    x * k as i64
}

/// The same `scale`, generated: example 3's callee under emulation.
fn scale_generated<B: Backend>(f: &mut Func<B>) -> Res<B::Code> {
    let args = f.lambda("%l%i", Leaf::Yes)?;
    let (x, k) = (args.get::<L>(0)?, args.get::<I>(1)?);
    f.name("scale");
    let k64 = f.getreg::<L>(Class::Temp)?;
    f.cv(k64, k);
    f.mul(x, x, k64);
    f.ret(x);
    f.end()
}

/// `long twice_scaled(long x)`: calls `scale` twice, keeping a value
/// across the calls in a persistent register.
fn callback<B: Backend>(f: &mut Func<B>, scale: Callee<'_, B::Code>) -> Res<B::Code> {
    let args = f.lambda("%l", Leaf::No)?;
    let x = args.get::<L>(0)?;
    f.name("twice_scaled");
    let keep = f.getreg::<L>(Class::Persistent)?;
    let r = f.getreg::<L>(Class::Temp)?;
    f.mov(keep, x);
    f.call(r, scale, &[keep.into(), Arg::Imm(Ty::I, 3)]);
    f.call(r, scale, &[r.into(), Arg::Imm(Ty::I, 5)]);
    f.add(r, r, keep);
    f.ret(r);
    f.end()
}

/// Where a float parameter of [`weighted_sum`] moved to free its register.
#[derive(Clone, Copy)]
enum Spilled {
    F(Local<vcode::F>),
    D(Local<D>),
}

/// A callee with run-time signature `sig` returning the double
/// `sum (k + 1) * arg_k`, summed in parameter order. Up to 32 parameters:
/// those `lambda` could not give a register stay in their stack slots and
/// are read through [`vcode::Params::local`]; when every float register
/// holds a parameter, the last ones are spilled to stack locals to free the
/// three the sum needs.
fn weighted_sum<B: Backend>(f: &mut Func<B>, sig: &str) -> Res<B::Code> {
    let args = f.lambda(sig, Leaf::Yes)?;
    f.name("weighted_sum");
    let n = args.len();
    let mut spilled: Vec<Option<Spilled>> = vec![None; n];
    let mut victims = (0..n)
        .rev()
        .filter(|&k| args.any(k).is_some_and(|r| r.ty.is_float()));
    let mut regs = Vec::new();
    while regs.len() < 3 {
        match f.getreg::<D>(Class::Temp) {
            Ok(r) => regs.push(r),
            Err(e) => {
                let k = victims.next().ok_or(e)?;
                spilled[k] = Some(if let Some(r) = args.any(k).and_then(|r| r.typed::<D>()) {
                    let l = f.local::<D>();
                    f.st_local(r, l);
                    f.putreg(r);
                    Spilled::D(l)
                } else {
                    let r = args.get::<vcode::F>(k)?;
                    let l = f.local::<vcode::F>();
                    f.st_local(r, l);
                    f.putreg(r);
                    Spilled::F(l)
                });
            }
        }
    }
    let (acc, t, w) = (regs[0], regs[1], regs[2]);
    // `t` as a float register, for float parameters read from memory.
    let tf = Reg::<vcode::F>::phys(t.num());
    f.set(acc, 0.0);
    for (k, &spill) in spilled.iter().enumerate() {
        match (args.all()[k].ty, spill) {
            (Ty::F, Some(Spilled::F(l))) => {
                f.ld_local(tf, l);
                f.cv(t, tf);
            }
            (Ty::D, Some(Spilled::D(l))) => f.ld_local(t, l),
            (Ty::F, _) if args.in_memory(k) => {
                f.ld_local(tf, args.local::<vcode::F>(k)?);
                f.cv(t, tf);
            }
            (Ty::D, _) if args.in_memory(k) => f.ld_local(t, args.local::<D>(k)?),
            (Ty::F, _) => f.cv(t, args.get::<vcode::F>(k)?),
            (Ty::D, _) => f.mov(t, args.get::<D>(k)?),
            (Ty::I, _) => {
                let r = int_param::<B, I>(f, &args, k)?;
                f.cv(t, r);
                f.putreg(r);
            }
            (Ty::L, _) => {
                let r = int_param::<B, L>(f, &args, k)?;
                f.cv(t, r);
                f.putreg(r);
            }
            (other, _) => unreachable!("signature restricted to i l f d, got {other}"),
        }
        f.set(w, (k + 1) as f64);
        f.mul(t, t, w);
        f.add(acc, acc, t);
    }
    f.ret(acc);
    f.end()
}

/// Integer parameter `k` in a register: its own, or, if it stayed in its
/// stack slot, one freed by an earlier integer parameter.
fn int_param<B: Backend, T: vcode::Type>(
    f: &mut Func<B>,
    args: &vcode::Params,
    k: usize,
) -> Res<Reg<T>> {
    if !args.in_memory(k) {
        return args.get::<T>(k);
    }
    let r = f.getreg::<T>(Class::Temp)?;
    f.ld_local(r, args.local::<T>(k)?);
    Ok(r)
}

/// `double unmarshal(void *msg)`: calls `callee` with one 8-byte field of
/// `msg` per parameter, each passed from memory (`Arg::mem`): the call
/// copies each field into its argument register or stack slot, so the stub
/// needs no register per argument.
fn unmarshal<B: Backend>(
    f: &mut Func<B>,
    callee: &B::Code,
) -> Result<B::Code, Box<dyn std::error::Error>> {
    let args = f.lambda("%p", Leaf::No)?;
    let msg = args.get::<P>(0)?;
    f.name("unmarshal");
    let mut list = Vec::new();
    for (k, &ty) in callee.params().iter().enumerate() {
        let off = 8 * k as i32;
        list.push(match ty {
            Ty::I => Arg::mem::<I>(msg, off),
            Ty::L => Arg::mem::<L>(msg, off),
            Ty::F => Arg::mem::<vcode::F>(msg, off),
            _ => Arg::mem::<D>(msg, off),
        });
    }
    let out = f.getreg::<D>(Class::Temp)?;
    f.call(out, Callee::Code(callee), &list);
    f.ret(out);
    Ok(f.end()?)
}

/// The 100-instruction straight line of the cost table.
fn straight<B: Backend>(f: &mut Func<B>) -> Res<B::Code> {
    let n = Reg::<I>::t(0);
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
}

fn show<B: Target>(out: &mut String, code: &B::Code, result: &str) {
    let (name, len, text) = B::listing(code);
    let _ = writeln!(out, "\n== {} ({len} bytes) ==", name.unwrap_or("?"));
    let _ = writeln!(out, "{result}");
    out.push_str(&text);
}

/// Runs generated code (natively, or under emulation).
fn run_code<C: Invoke>(code: &C, args: &[Value]) -> Result<Value, Box<dyn std::error::Error>> {
    // SAFETY: every example computes on its arguments only, reads no more
    // than the buffer it is given (`sum`: `n` ints; `unmarshal`: one
    // 8-byte field per parameter of its callee, which the message has),
    // and calls only `scale`, of the declared signature.
    Ok(unsafe { code.invoke(args) }?)
}

/// Nanoseconds per function for `reps` builds, lambda through end.
fn cost<B: Backend>(reps: usize, mut build: impl FnMut(&mut Func<B>) -> Res<B::Code>) -> Res<f64> {
    let mut f = Func::<B>::with_backend();
    build(&mut f)?; // warm up the buffers and the arena
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(build(&mut f)?);
    }
    Ok(t.elapsed().as_nanos() as f64 / reps as f64)
}

/// Runs the demo for `target`; `sig` is the run-time signature of
/// example 4.
pub fn run(sig: &str, target: TargetArg) -> ExitCode {
    let out = match target {
        TargetArg::X86_64 => demo::<X64>(sig),
        #[cfg(feature = "aarch64")]
        TargetArg::Aarch64 => demo::<vcode::aarch64::A64>(sig),
        #[cfg(not(feature = "aarch64"))]
        TargetArg::Aarch64 => Err("this fastpath was built without the aarch64 emulator; \
             run `cargo run --release -p fastpath --features aarch64 -- vcode demo --target aarch64` \
             (the feature builds the Unicorn emulator from source and needs cmake: \
             `bash scripts/install-deps.sh` installs it)"
            .into()),
    };
    match out {
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

fn demo<B: Target>(sig: &str) -> Result<String, Box<dyn std::error::Error>> {
    if vcode::Signature::parse(sig)?.params().is_empty() {
        return Err("--sig: example 4 takes 1 to 32 parameters; the signature is empty".into());
    }
    // The letters as written (`parse` took them, so each is `%` and one
    // type): `%uc` is named `uc`, not the `u` it is passed as.
    if let Some(bad) = sig
        .split('%')
        .skip(1)
        .find(|t| !matches!(*t, "i" | "l" | "f" | "d" | "c" | "s"))
    {
        return Err(format!(
            "--sig: example 4 takes parameters of types i, l, f, d (and c, s, passed widened to \
             int as C does), since its callee converts each to double; {sig} has a parameter of \
             type {bad}"
        )
        .into());
    }
    let mut out = format!(
        "vcode demo: the VCODE paper's examples, generated in place for {}\n",
        B::TITLE
    );
    let mut f = Func::<B>::with_backend();

    let c = plus1(&mut f)?;
    let r = run_code(&c, &[Value::I(41)])?;
    show::<B>(&mut out, &c, &format!("plus1(41) = {r}"));

    let c = sum(&mut f)?;
    let data: Vec<i32> = (1..=100).collect();
    let r = run_code(&c, &[Value::P(data.as_ptr() as usize), Value::I(100)])?;
    show::<B>(&mut out, &c, &format!("sum(1..=100) = {r}"));

    // Example 3's callee: the Rust function, or its generated twin.
    let generated = if B::CALLS_HOST {
        None
    } else {
        Some(scale_generated(&mut f)?)
    };
    let c = callback(&mut f, scale_callee::<B>(&generated))?;
    let r = run_code(&c, &[Value::L(7)])?;
    if let Some(code) = &generated {
        show::<B>(
            &mut out,
            code,
            "example 3's callee, generated: code under emulation cannot call the host",
        );
    }
    show::<B>(
        &mut out,
        &c,
        &format!("twice_scaled(7) = scale(scale(7, 3), 5) + 7 = {r}"),
    );

    let callee = weighted_sum(&mut f, sig)?;
    let stub = unmarshal(&mut Func::<B>::with_backend(), &callee)?;
    let params = callee.params().to_vec();
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
    let got = run_code(&stub, &[Value::P(msg.as_ptr() as usize)])?;
    let ok = got == Value::D(expect);
    show::<B>(
        &mut out,
        &callee,
        &format!("signature {sig:?} chosen at run time"),
    );
    show::<B>(
        &mut out,
        &stub,
        &format!(
            "unmarshal(msg) = {got} (Rust computes {expect}: {})",
            if ok { "ok" } else { "MISMATCH" }
        ),
    );
    if !ok {
        return Err(format!("example 4 computed {got}, expected {expect}").into());
    }

    out.push_str(
        "\n== generation cost, lambda through end (wall clock on this machine; \
         docs/benchmarks.md has callgrind counts) ==\n",
    );
    let _ = write!(
        out,
        "  {:<14} {:>5}  {:>12}",
        "function",
        "insns",
        X64::NAME
    );
    if B::NAME != X64::NAME {
        let _ = write!(out, "  {:>12}", B::NAME);
    }
    out.push('\n');
    row::<B>(&mut out, "plus1", 2, 200_000, plus1, plus1)?;
    row::<B>(&mut out, "sum", 12, 100_000, sum, sum)?;
    let host = Callee::Native(scale as *const () as usize);
    row::<B>(
        &mut out,
        "twice_scaled",
        5,
        100_000,
        |f| callback(f, host),
        |f| callback(f, scale_callee::<B>(&generated)),
    )?;
    row::<B>(&mut out, "straight-100", 102, 20_000, straight, straight)?;
    Ok(out)
}

/// One line of the cost table: the x86-64 backend, and beside it the
/// target's if it is another.
fn row<B: Target>(
    out: &mut String,
    name: &str,
    insns: usize,
    reps: usize,
    x86: impl FnMut(&mut Func<X64>) -> Res<<X64 as Backend>::Code>,
    this: impl FnMut(&mut Func<B>) -> Res<B::Code>,
) -> Res<()> {
    let mut ns = cost(reps, x86)?;
    let _ = write!(out, "  {name:<14} {insns:>5}  {ns:>9.1} ns");
    if B::NAME != X64::NAME {
        ns = cost(reps, this)?;
        let _ = write!(out, "  {ns:>9.1} ns");
    }
    let _ = writeln!(out, "  ({:.2} ns per instruction)", ns / insns as f64);
    Ok(())
}

/// Example 3's callee: `scale`'s generated twin if there is one, else the
/// Rust function.
fn scale_callee<B: Backend>(generated: &Option<B::Code>) -> Callee<'_, B::Code> {
    match generated {
        Some(code) => Callee::Code(code),
        None => Callee::Native(scale as *const () as usize),
    }
}
