//! Smoke tests of the aarch64 backend under emulation.
#![cfg(feature = "emu")]

use vcode::aarch64::{A64, Aapcs64};
use vcode::{Func, I, Invoke, L, Leaf, P, Value};

type Ref = vcode::reference::Reference<Aapcs64>;

/// `int f(int x) { return x + 1; }`
fn plus1_code() -> vcode::aarch64::Code {
    let mut f = Func::<A64>::with_backend();
    let p = f.lambda("%i", Leaf::Yes).unwrap();
    let x = p.get::<I>(0).unwrap();
    f.add(x, x, 1);
    f.ret(x);
    f.end().unwrap()
}

#[test]
fn plus1() {
    let code = plus1_code();
    println!("{}", code.listing());
    // SAFETY: the generated code computes on its arguments and reads only the buffers passed to it.
    let v = unsafe { code.invoke(&[Value::I(41)]) };
    assert_eq!(v, Ok(Value::I(42)));
}

#[test]
fn sum_array() {
    fn build<B: vcode::Backend>() -> B::Code {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%p%l", Leaf::Yes).unwrap();
        let (a, n) = (p.get::<P>(0).unwrap(), p.get::<L>(1).unwrap());
        let s = f.getreg::<L>(vcode::Class::Temp).unwrap();
        let x = f.getreg::<L>(vcode::Class::Temp).unwrap();
        let end = f.getreg::<P>(vcode::Class::Temp).unwrap();
        f.set(s, 0);
        let (top, done) = (f.genlabel(), f.genlabel());
        f.ble(n, 0, done);
        f.lsh(n, n, 3);
        f.add(end, a, n.cast::<P>());
        f.label(top);
        f.ld(x, a, 0);
        f.add(s, s, x);
        f.add(a, a, 8);
        f.blt(a, end, top);
        f.label(done);
        f.ret(s);
        f.end().unwrap()
    }
    let data: Vec<i64> = (1..=100).collect();
    let args = [Value::P(data.as_ptr() as usize), Value::L(100)];
    // SAFETY: the generated code computes on its arguments and reads only the buffers passed to it.
    let a = unsafe { build::<A64>().invoke(&args) };
    // SAFETY: the generated code computes on its arguments and reads only the buffers passed to it.
    let r = unsafe { build::<Ref>().invoke(&args) };
    assert_eq!(a, Ok(Value::L(5050)));
    assert_eq!(a, r);
}

#[test]
fn disassembles() {
    let d = plus1_code().disassemble();
    println!("{d}");
    assert!(d.contains("add w0, w0, #0x1"), "{d}");
    assert!(d.contains("ret"), "{d}");
}

/// The two extensions the regression table does not list, against the
/// reference backend.
#[test]
fn bswap32x2_and_bswap16x4() {
    use vcode::UL;
    use vcode::ext::Bswap;
    fn build<B: vcode::Backend>(which: u32) -> B::Code {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%ul%ul", Leaf::Yes).unwrap();
        let (a, m) = (p.get::<UL>(0).unwrap(), p.get::<UL>(1).unwrap());
        let r = f.getreg::<UL>(vcode::Class::Temp).unwrap();
        if which == 0 {
            f.bswap32x2(r, a);
        } else {
            f.bswap16x4(r, a, m);
        }
        f.ret(r);
        f.end().unwrap()
    }
    for which in 0..2 {
        let (a64, rf) = (build::<A64>(which), build::<Ref>(which));
        for v in [0u64, 1, 0x0123_4567_89ab_cdef, !0, 0x8000_0000_0000_0001] {
            let args = [Value::UL(v), Value::UL(0x00ff_00ff_00ff_00ff)];
            // SAFETY: the generated code computes on its arguments and reads only the buffers passed to it.
            let (x, y) = unsafe { (a64.invoke(&args), rf.invoke(&args)) };
            assert_eq!(x, y, "which={which} v={v:#x}");
        }
    }
}

use vcode_kernels::workload;

/// The generation-cost workload (both register styles) runs under
/// emulation as on the reference backend: same result, same buffer.
#[test]
fn the_callgrind_workload_agrees_with_the_reference() {
    for fixed in [false, true] {
        let build = |f: &mut Func<A64>| {
            if fixed {
                workload::mixed_fixed(f)
            } else {
                workload::mixed_virtual(f)
            }
        };
        let a64 = build(&mut Func::<A64>::with_backend()).unwrap();
        let mut r = Func::<Ref>::with_backend();
        let rf = if fixed {
            workload::mixed_fixed(&mut r)
        } else {
            workload::mixed_virtual(&mut r)
        }
        .unwrap();
        for n in [1, 2, 7] {
            let init: Vec<u8> = (0..workload::MIXED_BUF_BYTES)
                .map(|i| (i * 7 + 3) as u8)
                .collect();
            let (mut b1, mut b2) = (init.clone(), init);
            // SAFETY: the workload reads and writes only its buffer.
            let x = unsafe { a64.invoke(&[Value::P(b1.as_mut_ptr() as usize), Value::I(n)]) };
            // SAFETY: as above.
            let y = unsafe { rf.invoke(&[Value::P(b2.as_mut_ptr() as usize), Value::I(n)]) };
            assert_eq!(x, y, "fixed={fixed} n={n}");
            assert_eq!(b1, b2, "fixed={fixed} n={n}");
        }
    }
}

/// `align(n)` places the next instruction at a multiple of `n` in memory.
#[test]
fn align_in_memory() {
    for n in [4usize, 8, 16, 32, 64] {
        let mut f = Func::<A64>::with_backend();
        let p = f.lambda("%l", Leaf::Yes).unwrap();
        let x = p.get::<L>(0).unwrap();
        f.add(x, x, 1);
        f.align(n);
        let at = f.code_offset();
        f.add(x, x, 2);
        f.ret(x);
        let code = f.end().unwrap();
        let (body, _) = code.parts();
        assert_eq!((code.addr() + body + at) % n, 0, "align {n}");
        // SAFETY: arithmetic only.
        assert_eq!(unsafe { code.invoke(&[Value::L(1)]) }, Ok(Value::L(4)));
    }
}

/// Consecutive `select`s on one condition share its `cmp`, except across
/// a label, after a select that overwrote the condition, or at another
/// width: each case against the reference backend.
#[test]
fn consecutive_selects() {
    use vcode::ext::Select;
    fn build<B: vcode::Backend>(case: u32) -> B::Code {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%l%l%l", Leaf::Yes).unwrap();
        let (c, a, b) = (
            p.get::<L>(0).unwrap(),
            p.get::<L>(1).unwrap(),
            p.get::<L>(2).unwrap(),
        );
        let (x, y) = (
            f.getreg::<L>(vcode::Class::Temp).unwrap(),
            f.getreg::<L>(vcode::Class::Temp).unwrap(),
        );
        let (skip, join) = (f.genlabel(), f.genlabel());
        match case {
            0 => {
                f.select(x, c, a, b);
                f.select(y, c, b, a);
            }
            1 => {
                // The first select overwrites the condition.
                f.mov(x, c);
                f.select(x, x, a, b);
                f.select(y, x, b, a);
            }
            2 => {
                // A label between: reached from a branch taken after a
                // compare with other flags.
                f.set(y, 5);
                f.select(x, c, a, b);
                f.beq(a, b, skip);
                f.jmp(join);
                f.label(skip);
                f.label(join);
                f.select(y, c, b, a);
            }
            _ => {
                // Another width: the low half of c.
                f.select(x, c, a, b);
                let (ci, ai, bi) = (
                    Reg::<I>::phys(c.num()),
                    Reg::<I>::phys(a.num()),
                    Reg::<I>::phys(b.num()),
                );
                f.select(Reg::<I>::phys(y.num()), ci, bi, ai);
            }
        }
        f.xor(x, x, y);
        f.ret(x);
        f.end().unwrap()
    }
    use vcode::Reg;
    for case in 0..4 {
        let (a64, rf) = (build::<A64>(case), build::<Ref>(case));
        for c in [0i64, 1, -1, 1 << 32, 7] {
            let args = [Value::L(c), Value::L(0x1234), Value::L(0x1234)];
            let args2 = [Value::L(c), Value::L(3), Value::L(9)];
            for args in [args, args2] {
                // SAFETY: arithmetic only.
                let (x, y) = unsafe { (a64.invoke(&args), rf.invoke(&args)) };
                assert_eq!(x, y, "case {case} c={c}\n{}", a64.disassemble());
            }
        }
    }
}

/// `end` reuses the last function's prologue and epilogue when the frame
/// is the same: a sequence of functions with different frames (saved
/// registers, locals, none), with a repeat after each change and after a
/// failed `end`, is byte for byte what a fresh `Func` writes for each,
/// every function still runs correctly, and the functions written into
/// the backend's run stay intact as later ones are added.
#[test]
fn frames_reused_across_functions_match_fresh_ones() {
    use vcode::Class;
    /// `int f(int x)`: x * 3 + `k`, through `saves` callee-saved
    /// registers (persistent in a function that is not a leaf) and
    /// `locals` locals.
    fn build(f: &mut Func<A64>, saves: usize, locals: usize, k: i32) -> vcode::aarch64::Code {
        let p = f.lambda("%i", Leaf::No).unwrap();
        let x = p.get::<I>(0).unwrap();
        let mut regs = Vec::new();
        for _ in 0..saves {
            let r = f.getreg::<I>(Class::Persistent).unwrap();
            f.mov(r, x);
            regs.push(r);
        }
        for _ in 0..locals {
            let l = f.local::<I>();
            f.st_local(x, l);
            f.ld_local(x, l);
        }
        f.mul(x, x, 3);
        for r in regs {
            f.add(x, x, r);
            f.sub(x, x, r);
        }
        f.add(x, x, k);
        f.ret(x);
        f.end().unwrap()
    }
    let shapes = [
        (1, 0),
        (1, 0),
        (0, 0),
        (2, 0),
        (2, 0),
        (1, 1),
        (1, 1),
        (0, 0),
        (1, 0),
    ];
    let mut f = Func::<A64>::with_backend();
    let mut kept = Vec::new();
    for (i, &(saves, locals)) in shapes.iter().enumerate() {
        if i == 4 {
            // A failed `end` (a label never placed) after the frame
            // buffers were taken: the next function has the frame of the
            // last one written, and must not reuse what the failure dropped.
            f.lambda("%i", Leaf::No).unwrap();
            let r = f.getreg::<I>(Class::Persistent).unwrap();
            f.set(r, 1);
            let nowhere = f.genlabel();
            f.jmp(nowhere);
            f.ret(r);
            assert!(f.end().is_err());
        }
        let code = build(&mut f, saves, locals, i as i32);
        let fresh = build(&mut Func::<A64>::with_backend(), saves, locals, i as i32);
        assert_eq!(code.bytes(), fresh.bytes(), "function {i} ({saves} saves)");
        assert_eq!(code.image(), fresh.image(), "function {i} ({saves} saves)");
        assert_eq!(code.parts(), fresh.parts(), "function {i} ({saves} saves)");
        kept.push(code);
    }
    for (i, code) in kept.iter().enumerate() {
        // SAFETY: the generated code computes on its argument only.
        let v = unsafe { code.invoke(&[Value::I(5)]) };
        assert_eq!(v, Ok(Value::I(15 + i as i32)), "function {i}");
    }
}

/// `end_in` places the code in the client's executable memory: the
/// function lies inside a block of that allocator (a separate
/// `vcode::mem::Arena`, not the backend's own run), starts at the
/// alignment `align` asked for, is the same bytes as `end` writes, and
/// runs.
#[test]
fn end_in_places_code_in_the_clients_memory() {
    fn build(f: &mut Func<A64>, mem: Option<&vcode::mem::Arena>) -> vcode::aarch64::Code {
        let p = f.lambda("%i", Leaf::Yes).unwrap();
        let x = p.get::<I>(0).unwrap();
        f.align(64);
        f.mul(x, x, 0x1234_5678);
        f.add(x, x, 1);
        f.ret(x);
        match mem {
            Some(m) => f.end_in(m).unwrap(),
            None => f.end().unwrap(),
        }
    }
    let arena = vcode::mem::Arena::new();
    let mut f = Func::<A64>::with_backend();
    let own = build(&mut f, None);
    let theirs = build(&mut f, Some(&arena));
    // A second block of the client's arena follows the first in its chunk.
    let next = vcode::mem::ExecMemory::alloc(&arena, 8).unwrap();
    assert!(theirs.addr() < next.addr() && next.addr() - theirs.addr() < 4096);
    assert_eq!(theirs.addr() % 64, 0);
    assert_eq!(theirs.bytes(), own.bytes());
    // SAFETY: the generated code computes on its argument only.
    let v = unsafe { theirs.invoke(&[Value::I(2)]) };
    assert_eq!(v, Ok(Value::I(2i32.wrapping_mul(0x1234_5678) + 1)));
}

/// Forward references are chained through the code until their label is
/// placed: chains of length 0, 1, 2 and many, of `b.cond`s of every
/// condition, `b`s and `bl`s, for two labels whose chains interleave, each
/// land on their own label (the code agrees with the reference backend
/// for every argument that takes a different branch).
#[test]
fn forward_reference_chains_of_any_length() {
    use vcode::{Backend, Class, Label};
    fn build<B: Backend>(n: i64) -> B::Code {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%l", Leaf::No).unwrap();
        let x = p.get::<L>(0).unwrap();
        let r = f.getreg::<L>(Class::Temp).unwrap();
        let ls: [Label; 2] = [f.genlabel(), f.genlabel()];
        let (sub, after) = (f.genlabel(), f.genlabel());
        let unused = f.genlabel();
        for i in 0..n {
            let l = ls[(i % 2) as usize];
            match i % 4 {
                // b.cond: x == i, by a condition that says so.
                0 => f.beq(x, i, l),
                1 => {
                    let skip = f.genlabel();
                    f.blt(x, i, skip);
                    f.ble(x, i, l);
                    f.label(skip);
                }
                // b, behind a b.cond to a label of its own.
                2 => {
                    let skip = f.genlabel();
                    f.bne(x, i, skip);
                    f.jmp(l);
                    f.label(skip);
                }
                // bl to the subroutine, then b.
                _ => {
                    let skip = f.genlabel();
                    f.bne(x, i, skip);
                    f.jal(sub);
                    f.jmp(l);
                    f.label(skip);
                }
            }
        }
        f.set(r, -1);
        f.ret(r);
        f.label(unused);
        f.label(ls[0]);
        f.set(r, 100);
        f.add(r, r, x);
        f.ret(r);
        f.label(ls[1]);
        f.set(r, 200);
        f.add(r, r, x);
        f.jmp(after);
        // The subroutine: x += 1000, back by the link register.
        f.label(sub);
        f.add(x, x, 1000);
        f.ret_link();
        f.label(after);
        f.ret(r);
        f.end().unwrap()
    }
    for n in [0, 1, 2, 3, 4, 9, 200] {
        let (a64, rf) = (build::<A64>(n), build::<Ref>(n));
        for x in -1..=n {
            let args = [Value::L(x)];
            // SAFETY: the generated code computes on its argument.
            let (got, want) = unsafe { (a64.invoke(&args), rf.invoke(&args)) };
            assert_eq!(got, want, "n={n} x={x}");
        }
    }
}

/// A label used and never placed is reported at its first reference,
/// however long its chain, with that reference's method.
#[test]
fn an_unplaced_label_names_its_first_reference() {
    let mut f = Func::<A64>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    let (placed, never) = (f.genlabel(), f.genlabel());
    f.beq(x, 1, placed); // 0
    f.bgt(x, 2, never); // 1: the first reference
    for _ in 0..10 {
        f.jmp(never);
        f.blt(x, 3, never);
    }
    f.label(placed);
    f.ret(x);
    let e = f.end().unwrap_err();
    assert_eq!(
        (e.index(), e.method(), e.kind()),
        (1, "bgt", &vcode::ErrorKind::UnplacedLabel { label: 1 })
    );
}

/// `st_release` on aarch64: a `dmb ish` before the store (a release
/// store: every earlier store is visible before the word), and the word
/// stored at `base + off`; the bytes stored before it are there too.
#[test]
fn st_release_is_a_barrier_then_the_store() {
    use vcode::UL;
    use vcode::ext::StoreRelease;
    let mut f = Func::<A64>::with_backend();
    let a = f.lambda("%p%ul", Leaf::Yes).unwrap();
    let (p0, v0) = (a.get::<P>(0).unwrap(), a.get::<UL>(1).unwrap());
    let t = f.getreg::<UL>(vcode::Class::Temp).unwrap();
    f.set(t, 0x1122_3344_5566_7788);
    f.st(t, p0, 16);
    f.st_release(v0, p0, 8);
    f.retv();
    let code = f.end().unwrap();
    let d = code.disassemble();
    let (dmb, st) = (
        d.find("dmb ish").expect("a barrier"),
        d.rfind("str x").expect("the store"),
    );
    assert!(dmb < st, "{d}");
    assert!(
        d[dmb..].contains(", #0x8]"),
        "the word at +8 after the barrier\n{d}"
    );
    let mut w = [1u64, 2, 3];
    let args = [
        Value::P(w.as_mut_ptr() as usize),
        Value::UL(0x0100_0007_0000_0028),
    ];
    // SAFETY: the code stores two words into `w`, at +8 and +16.
    let r = unsafe { code.invoke(&args) };
    assert!(r.is_ok(), "{r:?}\n{d}");
    assert_eq!(w, [1, 0x0100_0007_0000_0028, 0x1122_3344_5566_7788]);
}

/// `ret_zero_with` on aarch64: 0 in `x0` and the value's 32 bits,
/// zero-extended, in `x1`, from every register the value may be in (`x0`
/// and `x1` themselves among them; every other register claimed is set to
/// all ones first) and as a constant. The emulated call returns `x0`
/// only, so `x1` is read by a second generated function that calls the
/// first and returns `x1` (vcode's register 6).
#[test]
fn exit_with_a_value_returns_zero_and_the_value_in_two_registers() {
    use vcode::ext::Exit;
    use vcode::{Callee, Class, Operand, Reg, UL};
    fn inner(k: usize, imm: Option<i32>) -> vcode::aarch64::Code {
        let mut f = Func::<A64>::with_backend();
        let v = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
        let mut b = None;
        for _ in 0..=k {
            b = Some(
                f.getreg::<UL>(Class::Temp)
                    .or_else(|_| f.getreg::<UL>(Class::Persistent))
                    .unwrap(),
            );
        }
        let b = b.unwrap();
        f.mov(b, v);
        while let Ok(o) = f
            .getreg::<UL>(Class::Temp)
            .or_else(|_| f.getreg::<UL>(Class::Persistent))
        {
            f.set(o, u64::MAX);
        }
        let to = vcode::ext::second_result::<A64>().expect("aarch64's");
        f.ret_zero_with(
            match imm {
                Some(i) => Operand::Imm(i64::from(i)),
                None => Operand::Reg(Reg::<I>::phys(b.num())),
            },
            to,
        );
        f.end().unwrap()
    }
    fn second(inner: &vcode::aarch64::Code) -> vcode::aarch64::Code {
        let mut f = Func::<A64>::with_backend();
        let v = f.lambda("%ul", Leaf::No).unwrap().get::<UL>(0).unwrap();
        f.callv(Callee::Code(inner), &[v.into()]);
        // x1, the second result register.
        let to = vcode::ext::second_result::<A64>().expect("aarch64's");
        assert_eq!(vcode::aarch64::regfile::GPR_PHYS[usize::from(to.num())], 1);
        f.ret(Reg::<UL>::phys(to.num()));
        f.end().unwrap()
    }
    let value = 0xdead_beef_8765_4321u64;
    let mut k = 0;
    let mut cases: Vec<(usize, Option<i32>)> = Vec::new();
    while {
        let mut f = Func::<A64>::with_backend();
        f.lambda("%ul", Leaf::Yes).unwrap();
        (0..=k).all(|_| {
            f.getreg::<UL>(Class::Temp)
                .or_else(|_| f.getreg::<UL>(Class::Persistent))
                .is_ok()
        })
    } {
        cases.push((k, None));
        k += 1;
    }
    assert!(cases.len() >= 8, "{} registers", cases.len());
    for imm in [0, 1, -1, 127, 128, 0x1234_5678, i32::MIN] {
        cases.push((0, Some(imm)));
    }
    for (k, imm) in cases {
        let code = inner(k, imm);
        let want = imm.map_or(u64::from(value as u32), |i| u64::from(i as u32));
        // SAFETY: the generated code computes on its argument only.
        let status = unsafe { code.invoke(&[Value::UL(value)]) };
        assert_eq!(status, Ok(Value::I(0)), "k={k} imm={imm:?}");
        // SAFETY: as above, and it calls the function above only.
        let got = unsafe { second(&code).invoke(&[Value::UL(value)]) };
        assert_eq!(got, Ok(Value::UL(want)), "k={k} imm={imm:?}");
    }
}
