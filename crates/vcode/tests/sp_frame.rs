//! Frames addressed from the stack pointer (`Func::frame_from_sp`, for the
//! jive JIT: no `push rbp; mov rbp, rsp` and `leave` on x86-64): a body
//! that uses every part of a frame (stack parameters, locals read,
//! written, compared, counted down and passed by address to a native,
//! every callee-saved register live across a native call, a persistent
//! float register saved around it) computes the same on x86-64 framed so,
//! on x86-64 framed through `rbp`, and on the reference backend; the
//! x86-64 listing framed so has no `rbp` in it. `jal` in such a function,
//! and locals past the room it was given, fail instead of running.
#![cfg(target_arch = "x86_64")]

use vcode::backend::Cond;
use vcode::ext::{Countdown, LocalCompare};
use vcode::{Arg, Backend, Callee, Class, D, Func, I, Invoke, L, Leaf, Reference, UL, Value, X64};

extern "C" fn mix(a: i64, p: *const i64, b: i64) -> i64 {
    // SAFETY: the generated code passes the address of its local, which
    // holds an `l`, live for the call.
    let at = unsafe { p.read() };
    a.wrapping_mul(31) ^ at.wrapping_add(b)
}

extern "C" fn half(x: f64) -> f64 {
    x / 2.0
}

/// The body: `f(a0..a7)` over eight `l` parameters (the last two on the
/// stack in the System V convention).
fn body<B: Backend>(sp: bool) -> B::Code {
    let mut f = Func::<B>::with_backend();
    f.frame_from_sp(sp.then_some(256));
    let ps = f.lambda("%l%l%l%l%l%l%l%l", Leaf::No).unwrap();
    let a: Vec<_> = (0..8).map(|i| ps.get::<L>(i).unwrap()).collect();
    // Locals: one per parameter, and a countdown.
    let locals: Vec<_> = (0..8).map(|_| f.local::<L>()).collect();
    for (p, l) in a.iter().zip(&locals) {
        f.st_local(*p, *l);
    }
    for p in &a {
        f.putreg(*p);
    }
    let count = f.local::<UL>();
    let t = f.getreg::<UL>(Class::Temp).unwrap();
    f.set(t, 3);
    f.st_local(t, count);
    f.putreg(t);
    // Every callee-saved register, live across the call.
    let mut keep = Vec::new();
    while let Ok(r) = f.getreg::<L>(Class::Persistent) {
        f.ld_local(r, locals[keep.len() % 8]);
        f.add(r, r, keep.len() as i32 * 7 + 1);
        keep.push(r);
    }
    let fl = f.getreg::<D>(Class::Persistent).ok();
    if let Some(d) = fl {
        f.set(d, 1.5);
        f.call(
            d,
            Callee::Native(half as *const () as usize),
            &[Arg::Reg(d.any())],
        );
    }
    let base = f.getreg::<vcode::P>(Class::Temp).unwrap();
    f.addr_local(base, locals[6]);
    let (a0, a1) = (
        f.getreg::<L>(Class::Temp).unwrap(),
        f.getreg::<L>(Class::Temp).unwrap(),
    );
    f.ld_local(a0, locals[0]);
    f.ld_local(a1, locals[1]);
    let r = f.getreg::<L>(Class::Temp).unwrap();
    f.call(
        r,
        Callee::Native(mix as *const () as usize),
        &[Arg::Reg(a0.any()), Arg::Reg(base.any()), Arg::Reg(a1.any())],
    );
    for k in &keep {
        f.add(r, r, *k);
    }
    if let Some(d) = fl {
        // 0.75 after the call; kept across the second.
        let u = f.getreg::<L>(Class::Temp).unwrap();
        f.cv::<D, L>(u, d);
        f.add(r, r, u);
        f.putreg(u);
    }
    // Count down 3 times in the local, adding the stack parameters.
    let head = f.genlabel();
    let out = f.genlabel();
    f.label(head);
    f.dec_local_branch_borrow(count, out);
    let u = f.getreg::<L>(Class::Temp).unwrap();
    f.ld_local(u, locals[7]);
    f.add(r, r, u);
    f.jmp(head);
    f.label(out);
    // Compared with a local where it lies.
    let big = f.genlabel();
    f.bcmp_local(Cond::Gt, r, locals[5], big);
    f.add(r, r, 1000);
    f.label(big);
    f.ret(r);
    f.end().unwrap()
}

fn call(code: &(impl Invoke + ?Sized), args: &[Value]) -> Value {
    // SAFETY: the code reads its arguments and its own frame, and calls
    // `mix` with its local's address and `half`.
    unsafe { code.invoke(args) }.unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_frame_from_the_stack_pointer_runs_as_the_others_do() {
    let sp = body::<X64>(true);
    let bp = body::<X64>(false);
    let reference = body::<Reference>(true);
    let text = sp.disassemble();
    assert!(!text.contains("rbp"), "no frame pointer:\n{text}");
    assert!(!text.contains("leave"), "no frame pointer:\n{text}");
    assert!(
        text.lines().any(|l| l.contains("sub     rsp,")),
        "the frame reserved from rsp:\n{text}"
    );
    assert!(bp.disassemble().contains("push    rbp"));
    for seed in [0i64, 1, -7, 1 << 40, i64::MIN, 0x1234_5678] {
        let args: Vec<Value> = (0..8)
            .map(|i| Value::L(seed.wrapping_mul(i + 3).wrapping_add(i * 11)))
            .collect();
        let want = call(&reference, &args);
        assert_eq!(call(&sp, &args), want, "framed from rsp, {seed}\n{text}");
        assert_eq!(call(&bp, &args), want, "framed through rbp, {seed}");
    }
}

#[test]
fn jal_fails_in_a_frame_from_the_stack_pointer() {
    // A function that returns its argument after a `jal` to a leaf.
    let body = |f: &mut Func<X64>| {
        let x = f.lambda("%i", Leaf::No).unwrap().get::<I>(0).unwrap();
        let sub = f.genlabel();
        f.jal(sub);
        f.ret(x);
        f.label(sub);
        f.ret_link();
    };
    let mut f = Func::<X64>::with_backend();
    f.frame_from_sp(Some(64));
    body(&mut f);
    let err = f.end().expect_err("jal refused");
    assert!(err.to_string().contains("jal"), "{err}");
    // The ordinary frame again: the same function is made.
    f.frame_from_sp(None);
    body(&mut f);
    let code = f.end().unwrap();
    assert_eq!(call(&code, &[Value::I(5)]), Value::I(5));
}

#[test]
fn locals_past_the_room_fail_at_end() {
    let mut f = Func::<X64>::with_backend();
    f.frame_from_sp(Some(16));
    let x = f.lambda("%l", Leaf::Yes).unwrap().get::<L>(0).unwrap();
    let ls: Vec<_> = (0..2).map(|_| f.local::<L>()).collect();
    for l in &ls {
        f.st_local(x, *l);
    }
    f.ret(x);
    let code = f.end().unwrap();
    assert_eq!(call(&code, &[Value::L(9)]), Value::L(9));
    let x = f.lambda("%l", Leaf::Yes).unwrap().get::<L>(0).unwrap();
    let ls: Vec<_> = (0..3).map(|_| f.local::<L>()).collect();
    for l in &ls {
        f.st_local(x, *l);
    }
    f.ret(x);
    let err = f.end().expect_err("a third local past 16 bytes");
    assert!(err.to_string().contains("frame_from_sp"), "{err}");
}
