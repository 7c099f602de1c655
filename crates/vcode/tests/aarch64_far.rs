//! Functions larger than `b.cond`'s and `ldr` (literal)'s ±1 MiB on the
//! aarch64 backend, under emulation, against the
//! reference backend: forward conditional branches and constants reach
//! through *islands* (`b over; veneers; constants; over:`) placed before
//! the code outgrows them, backward conditional branches beyond the range
//! are the inverted condition over a `b`, and a small function's code is
//! what it was before islands existed.
#![cfg(feature = "emu")]

use vcode::aarch64::{A64, Aapcs64};
use vcode::backend::Cond;
use vcode::{Backend, Class, D, ErrorKind, Func, I, Invoke, L, Label, Leaf, P, Reg, U, UL, Value};

type Ref = vcode::reference::Reference<Aapcs64>;

/// Filler instructions: `add c, c, #1`, one word each, so `FILL` of them
/// are 1,080,000 bytes, beyond the ±1 MiB (1,048,576 bytes) reach.
const FILL: usize = 270_000;
const MIB: usize = 1 << 20;

fn fill<B: Backend>(f: &mut Func<B>, c: Reg<L>, n: usize) {
    for _ in 0..n {
        f.add(c, c, 1);
    }
}

fn br<B: Backend, T: vcode::Type>(f: &mut Func<B>, c: Cond, a: Reg<T>, b: Reg<T>, l: Label) {
    match c {
        Cond::Lt => f.blt(a, b, l),
        Cond::Le => f.ble(a, b, l),
        Cond::Gt => f.bgt(a, b, l),
        Cond::Ge => f.bge(a, b, l),
        Cond::Eq => f.beq(a, b, l),
        Cond::Ne => f.bne(a, b, l),
    }
}

/// Runs `code` on `args` on both backends and returns the aarch64 result
/// after checking that the reference backend agrees.
fn same(a64: &vcode::aarch64::Code, rf: &<Ref as Backend>::Code, args: &[Value]) -> Value {
    // SAFETY: the generated code computes on its arguments and reads only
    // its own constants.
    let (x, y) = unsafe { (a64.invoke(args), rf.invoke(args)) };
    assert_eq!(x, y, "args {args:?}");
    x.expect("runs")
}

/// The conditional branches `conds` (on the two parameters of type `T`),
/// all forward over the filler to labels after it, each returning
/// 1,000,000 + its position; falling through returns the filler count.
fn forward<B: Backend, T: vcode::Type>(sig: &str, conds: &[Cond]) -> B::Code {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda(sig, Leaf::Yes).unwrap();
    let (a, b) = (p.get::<T>(0).unwrap(), p.get::<T>(1).unwrap());
    let c = f.getreg::<L>(Class::Temp).unwrap();
    f.set(c, 0);
    let labels: Vec<Label> = conds.iter().map(|_| f.genlabel()).collect();
    for (&cond, &l) in conds.iter().zip(&labels) {
        br(&mut f, cond, a, b, l);
    }
    fill(&mut f, c, FILL);
    f.ret(c);
    for (k, &l) in labels.iter().enumerate() {
        f.label(l);
        f.set(c, 1_000_000 + k as i64);
        f.ret(c);
    }
    f.end().unwrap()
}

/// Arguments below, equal, above (and unordered, for floats).
fn pairs(ty: vcode::Ty) -> Vec<[Value; 2]> {
    match ty {
        vcode::Ty::I => vec![
            [Value::I(-5), Value::I(3)],
            [Value::I(3), Value::I(3)],
            [Value::I(3), Value::I(-5)],
        ],
        vcode::Ty::U => vec![
            [Value::U(3), Value::U(u32::MAX)],
            [Value::U(7), Value::U(7)],
            [Value::U(u32::MAX), Value::U(3)],
        ],
        vcode::Ty::L => vec![
            [Value::L(-5), Value::L(3)],
            [Value::L(3), Value::L(3)],
            [Value::L(3), Value::L(-5)],
        ],
        vcode::Ty::UL => vec![
            [Value::UL(3), Value::UL(u64::MAX)],
            [Value::UL(7), Value::UL(7)],
            [Value::UL(u64::MAX), Value::UL(3)],
        ],
        vcode::Ty::D => vec![
            [Value::D(-0.5), Value::D(2.0)],
            [Value::D(2.0), Value::D(2.0)],
            [Value::D(2.0), Value::D(-0.5)],
            [Value::D(f64::NAN), Value::D(2.0)],
        ],
        _ => vec![
            [Value::F(-0.5), Value::F(2.0)],
            [Value::F(2.0), Value::F(2.0)],
            [Value::F(2.0), Value::F(-0.5)],
            [Value::F(2.0), Value::F(f32::NAN)],
        ],
    }
}

/// Six forward conditional branches beyond ±1 MiB in one function (one
/// island, six veneers): the first true condition wins, for every type.
#[test]
fn forward_branches_of_every_type_reach_through_veneers() {
    fn check<T: vcode::Type>(sig: &str) {
        let a64 = forward::<A64, T>(sig, &Cond::ALL);
        let rf = forward::<Ref, T>(sig, &Cond::ALL);
        assert!(a64.len() > FILL * 4, "{}", a64.len());
        for args in pairs(T::TY) {
            let v = same(&a64, &rf, &args);
            assert!(
                matches!(v, Value::L(n) if n >= 1_000_000),
                "{args:?}: {v:?}"
            );
        }
    }
    check::<I>("%i%i");
    check::<U>("%u%u");
    check::<L>("%l%l");
    check::<UL>("%ul%ul");
    check::<vcode::F>("%f%f");
    check::<D>("%d%d");
}

/// Each condition alone, taken and not taken (falling through the
/// filler), integer and float.
#[test]
fn forward_branch_of_each_condition_taken_and_not() {
    for cond in Cond::ALL {
        let (a64, rf) = (
            forward::<A64, L>("%l%l", &[cond]),
            forward::<Ref, L>("%l%l", &[cond]),
        );
        let mut seen = [false; 2];
        for args in pairs(vcode::Ty::L) {
            let v = same(&a64, &rf, &args);
            seen[(v == Value::L(FILL as i64)) as usize] = true;
        }
        assert_eq!(seen, [true, true], "{cond:?}: taken and not taken");
        let (a64, rf) = (
            forward::<A64, D>("%d%d", &[cond]),
            forward::<Ref, D>("%d%d", &[cond]),
        );
        for args in pairs(vcode::Ty::D) {
            same(&a64, &rf, &args);
        }
    }
}

/// `top: filler; i += 1; b<cond> top` (operands ordered so that the loop
/// ends): a back edge beyond ±1 MiB, the inverted condition over a `b`.
fn backward<B: Backend>(cond: Cond, float: bool) -> B::Code {
    let mut f = Func::<B>::with_backend();
    if float {
        let p = f.lambda("%d", Leaf::Yes).unwrap();
        let a = p.get::<D>(0).unwrap();
        let top = f.genlabel();
        let (i, one) = (
            f.getreg::<D>(Class::Temp).unwrap(),
            f.getreg::<D>(Class::Temp).unwrap(),
        );
        let c = f.getreg::<L>(Class::Temp).unwrap();
        f.set(c, 0);
        f.set(i, 0.0);
        f.set(one, 1.0);
        f.label(top);
        fill(&mut f, c, FILL);
        f.add(i, i, one);
        match cond {
            Cond::Gt | Cond::Ge => br(&mut f, cond, a, i, top),
            _ => br(&mut f, cond, i, a, top),
        }
        f.ret(c);
    } else {
        let p = f.lambda("%l", Leaf::Yes).unwrap();
        let a = p.get::<L>(0).unwrap();
        let top = f.genlabel();
        let i = f.getreg::<L>(Class::Temp).unwrap();
        let c = f.getreg::<L>(Class::Temp).unwrap();
        f.set(c, 0);
        f.set(i, 0);
        f.label(top);
        fill(&mut f, c, FILL);
        f.add(i, i, 1);
        match cond {
            Cond::Gt | Cond::Ge => br(&mut f, cond, a, i, top),
            _ => br(&mut f, cond, i, a, top),
        }
        f.ret(c);
    }
    f.end().unwrap()
}

/// Loops whose back edge is beyond ±1 MiB, every condition, integer and
/// float, taken once (two trips) and not taken (one trip).
#[test]
fn backward_branches_beyond_range_loop() {
    // (a giving two trips, a giving one), per condition.
    let bounds = |c: Cond| match c {
        Cond::Lt => (2, 1),
        Cond::Le => (1, 0),
        Cond::Gt => (2, 1),
        Cond::Ge => (1, 0),
        Cond::Eq => (1, 5),
        Cond::Ne => (2, 1),
    };
    for cond in Cond::ALL {
        let (two, one) = bounds(cond);
        let (a64, rf) = (backward::<A64>(cond, false), backward::<Ref>(cond, false));
        assert_eq!(
            same(&a64, &rf, &[Value::L(two)]),
            Value::L(2 * FILL as i64),
            "{cond:?}"
        );
        assert_eq!(
            same(&a64, &rf, &[Value::L(one)]),
            Value::L(FILL as i64),
            "{cond:?}"
        );
        let (a64, rf) = (backward::<A64>(cond, true), backward::<Ref>(cond, true));
        let (two, one) = (two as f64, one as f64);
        assert_eq!(
            same(&a64, &rf, &[Value::D(two)]),
            Value::L(2 * FILL as i64),
            "{cond:?}"
        );
        assert_eq!(
            same(&a64, &rf, &[Value::D(one)]),
            Value::L(FILL as i64),
            "{cond:?}"
        );
    }
}

/// Float constants from the literal pool (more than two 16-bit chunks)
/// used more than 1 MiB before the end, and again after the filler.
#[test]
fn pool_constants_far_from_the_end() {
    fn build<B: Backend>() -> B::Code {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%d", Leaf::Yes).unwrap();
        let x = p.get::<D>(0).unwrap();
        let k = f.getreg::<D>(Class::Temp).unwrap();
        let t = f.getreg::<D>(Class::Temp).unwrap();
        let c = f.getreg::<L>(Class::Temp).unwrap();
        f.set(c, 0);
        f.set(k, 0.1);
        f.mul(x, x, k);
        fill(&mut f, c, FILL);
        f.set(k, 0.3);
        f.add(x, x, k);
        fill(&mut f, c, FILL);
        f.set(k, 1.0e-7);
        f.cv(t, c);
        f.mul(t, t, k);
        f.add(x, x, t);
        f.ret(x);
        f.end().unwrap()
    }
    let (a64, rf) = (build::<A64>(), build::<Ref>());
    for v in [1.5, -3.25, 1e300] {
        let want = (v * 0.1 + 0.3) + (2 * FILL) as f64 * 1.0e-7;
        assert_eq!(same(&a64, &rf, &[Value::D(v)]), Value::D(want));
    }
}

/// Data used before a filler (it goes to the island) and after two (it is
/// behind, beyond `adr`'s ±1 MiB: `adr` + `add`), and a jump table whose
/// targets are beyond the first filler.
#[test]
fn data_and_jump_table_far_away() {
    fn build<B: Backend>() -> B::Code {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%ul", Leaf::Yes).unwrap();
        let idx = p.get::<UL>(0).unwrap();
        let words: Vec<u8> = [11u64, 22, 33]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let d = f.data(&words);
        let base = f.getreg::<P>(Class::Temp).unwrap();
        let (c, v) = (
            f.getreg::<L>(Class::Temp).unwrap(),
            f.getreg::<L>(Class::Temp).unwrap(),
        );
        f.set(c, 0);
        f.addr_data(base, d);
        f.ld(v, base, 0);
        f.add(c, c, v);
        let (m0, m1, m2, done) = (f.genlabel(), f.genlabel(), f.genlabel(), f.genlabel());
        f.jump_table(idx, &[m0, m1, m2]);
        fill(&mut f, c, FILL);
        for (l, n) in [(m0, 100), (m1, 200), (m2, 300)] {
            f.label(l);
            f.add(c, c, n);
            f.jmp(done);
        }
        f.label(done);
        fill(&mut f, c, FILL);
        f.addr_data(base, d);
        f.ld(v, base, 16);
        f.add(c, c, v);
        f.ret(c);
        f.end().unwrap()
    }
    let (a64, rf) = (build::<A64>(), build::<Ref>());
    // The second use: `adr x, .` then `sub x, x, #hi, lsl 12` (and `#lo`).
    let b = a64.bytes();
    let far = (0..b.len() / 4 - 1).any(|i| {
        let (w, next) = (word(b, 4 * i), word(b, 4 * i + 4));
        w & !31 == 0x1000_0000 && next & 0xffc0_0000 == 0xd140_0000 && (w ^ next) & 31 == 0
    });
    assert!(far, "adr + sub for the far data");
    // The jump skips the first filler; the second runs.
    for (i, want) in [(0u64, 144i64), (1, 244), (2, 344)] {
        let want = want + FILL as i64;
        assert_eq!(same(&a64, &rf, &[Value::UL(i)]), Value::L(want));
    }
}

fn word(code: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(code[at..at + 4].try_into().unwrap())
}

/// The target of the branch (or `ldr` literal) at `at`.
fn target(code: &[u8], at: usize) -> usize {
    let w = word(code, at);
    let off = if w & 0xfc00_0000 == 0x1400_0000 {
        ((w << 6) as i32 >> 6) as isize
    } else {
        ((w << 8) as i32 >> 13) as isize
    };
    (at as isize + 4 * off) as usize
}

/// The island's exact layout: `b.eq` to a veneer `b out` placed just
/// before the code outgrows the `b.eq`'s reach, after `b over` and before
/// `over:` (8-byte-aligned constants follow the veneers).
#[test]
fn island_layout() {
    let mut f = Func::<A64>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    let out = f.genlabel();
    f.beq(x, 0, out);
    fill(&mut f, x, FILL);
    f.label(out);
    f.ret(x);
    let code = f.end().unwrap();
    let (body, epi) = code.parts();
    let b = code.bytes();
    assert_eq!(word(b, body), 0xf100_001f, "cmp x0, #0");
    let beq = body + 4;
    assert_eq!(word(b, beq) & 0xff00_001f, 0x5400_0000, "b.eq");
    let veneer = target(b, beq);
    assert!(
        veneer - beq < MIB && veneer - beq > MIB - 1024,
        "island at {:#x}",
        veneer - beq
    );
    // `b over`, just before the veneer, lands just after it (no constants,
    // so no padding).
    let over = veneer - 4;
    assert_eq!(word(b, over) & 0xfc00_0000, 0x1400_0000);
    let after = target(b, over);
    assert_eq!(after, veneer + 4);
    // The veneer goes to `out`, the end of the body (the return falls
    // through into the epilogue).
    assert_eq!(word(b, veneer) & 0xfc00_0000, 0x1400_0000);
    assert_eq!(target(b, veneer), epi);
    // The filler resumes after the island.
    assert_eq!(word(b, after), 0x9100_0400, "add x0, x0, #1");
    // SAFETY: the code computes on its argument.
    unsafe {
        assert_eq!(code.invoke(&[Value::L(0)]), Ok(Value::L(0)));
        assert_eq!(code.invoke(&[Value::L(1)]), Ok(Value::L(1 + FILL as i64)));
    }
}

/// A pool constant's island: the `ldr` reaches the constant, 8-byte
/// aligned in the body, right after `b over` (and padding).
#[test]
fn constant_island_layout() {
    let mut f = Func::<A64>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    let k = f.getreg::<D>(Class::Temp).unwrap();
    let y = f.getreg::<L>(Class::Temp).unwrap();
    f.set(k, 100.1);
    fill(&mut f, x, FILL);
    f.cv(y, k);
    f.add(x, x, y);
    f.ret(x);
    let code = f.end().unwrap();
    let (body, _) = code.parts();
    let b = code.bytes();
    assert_eq!(word(b, body) & 0xff00_0000, 0x5c00_0000, "ldr d, literal");
    let at = target(b, body);
    assert!(
        at - body < MIB && at - body > MIB - 1024,
        "island at {:#x}",
        at - body
    );
    assert_eq!((at - body) % 8, 0);
    assert_eq!(&b[at..at + 8], &100.1f64.to_bits().to_le_bytes());
    let over = if word(b, at - 4) == 0 { at - 8 } else { at - 4 };
    assert_eq!(target(b, over), at + 8, "b over the constant");
    // SAFETY: the code computes on its argument.
    let v = unsafe { code.invoke(&[Value::L(5)]) };
    assert_eq!(v, Ok(Value::L(105 + FILL as i64)));
}

/// A forward branch whose label comes within reach, and a constant used
/// near the end, need no island: the code is the branch, the filler and
/// the return, nothing more.
#[test]
fn no_island_when_everything_is_in_reach() {
    let mut f = Func::<A64>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    let k = f.getreg::<D>(Class::Temp).unwrap();
    for _ in 0..4 {
        let l = f.genlabel();
        f.beq(x, 0, l);
        fill(&mut f, x, 200_000);
        f.label(l);
    }
    f.set(k, 0.1);
    f.cv(x, k);
    f.ret(x);
    let code = f.end().unwrap();
    // cmp + b.eq + filler per block, ldr + fcvtzs and its 5 fix-ups, ret.
    assert_eq!(code.len(), 4 * (4 * (2 + 200_000) + 1 + 6 + 1));
}

/// 64-bit FNV-1a.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

use vcode_kernels::workload;

/// Small functions are byte for byte what the backend generated before
/// islands (hashes taken at `b1c674f`): the generation workload's
/// functions, and one with a pool constant, data and a forward branch.
#[test]
fn small_functions_unchanged() {
    let mut f = Func::<A64>::with_backend();
    let fixed = fnv(workload::mixed_fixed(&mut f).unwrap().bytes());
    let virt = fnv(workload::mixed_virtual(&mut f).unwrap().bytes());
    let p = f.lambda("%l%d", Leaf::Yes).unwrap();
    let (x, y) = (p.get::<L>(0).unwrap(), p.get::<D>(1).unwrap());
    let k = f.getreg::<D>(Class::Temp).unwrap();
    let base = f.getreg::<P>(Class::Temp).unwrap();
    let d = f.data(&7u64.to_le_bytes());
    let l = f.genlabel();
    f.set(k, 0.1);
    f.add(y, y, k);
    f.blt(x, 0, l);
    f.addr_data(base, d);
    f.ld(x, base, 0);
    f.label(l);
    f.cv(x, y);
    f.ret(x);
    let small = f.end().unwrap();
    let small_image = fnv(small.image());
    assert_eq!(
        (fixed, virt, small_image),
        (
            0x4630_4c01_128d_bec5,
            0x4630_4c01_128d_bec5,
            0x7bf1_5516_234e_ab29
        )
    );
}

/// A constant placed after a data block larger than `ldr`'s reach cannot
/// be reached: a typed error naming the instruction, never wrong code.
#[test]
fn unreachable_constant_is_a_typed_error() {
    let mut f = Func::<A64>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    let k = f.getreg::<D>(Class::Temp).unwrap();
    f.data(&vec![0u8; 2 * MIB]);
    f.add(x, x, 1);
    f.set(k, 0.1);
    f.cv(x, k);
    f.ret(x);
    let e = f.end().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Unsupported(_)), "{e}");
    assert_eq!((e.method(), e.index()), ("set", 1), "{e}");
}

/// Random long functions: forward conditional branches to labels placed
/// from a few instructions to about 1.4 MiB later, float constants from
/// the pool and data blocks (declared while branches are pending, used
/// near and more than 1 MiB after their island) between fillers of
/// random length, about 3 MB of code; the aarch64 code
/// agrees with the reference backend for arguments that take different
/// sets of branches.
#[test]
fn random_long_functions_agree_with_the_reference() {
    fn build<B: Backend>(seed: u64) -> B::Code {
        let mut rng = seed;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%l", Leaf::Yes).unwrap();
        let x = p.get::<L>(0).unwrap();
        let c = f.getreg::<L>(Class::Temp).unwrap();
        let (k, sum) = (
            f.getreg::<D>(Class::Temp).unwrap(),
            f.getreg::<D>(Class::Temp).unwrap(),
        );
        let base = f.getreg::<P>(Class::Temp).unwrap();
        let v = f.getreg::<L>(Class::Temp).unwrap();
        let mut blocks = Vec::new();
        f.set(c, 0);
        f.set(sum, 0.0);
        // (segment at which the label is placed, label, its number)
        let mut open: Vec<(u64, Label, i64)> = Vec::new();
        for seg in 0..64u64 {
            for i in (0..open.len()).rev() {
                if open[i].0 == seg {
                    let (_, l, n) = open.swap_remove(i);
                    f.label(l);
                    f.add(c, c, 1_000_000 * n);
                }
            }
            let l = f.genlabel();
            f.blt(x, next(8) as i64, l);
            open.push((seg + 1 + next(30), l, seg as i64 + 1));
            if next(2) == 0 {
                f.set(k, 0.1 * (seg + 1) as f64);
                f.add(sum, sum, k);
            }
            if next(4) == 0 {
                let mut bytes = vec![0u8; 8 * (1 + next(4096) as usize)];
                bytes[..8].copy_from_slice(&(seg + 1).to_le_bytes());
                blocks.push(f.data(&bytes));
            }
            if !blocks.is_empty() && next(3) == 0 {
                // The oldest block half of the time: far behind, later on.
                let d = blocks[(next(2) * next(blocks.len() as u64)) as usize];
                f.addr_data(base, d);
                f.ld(v, base, 0);
                f.add(c, c, v);
            }
            fill(&mut f, c, next(24_000) as usize);
        }
        for (_, l, n) in open {
            f.label(l);
            f.add(c, c, 1_000_000 * n);
        }
        let t = f.getreg::<L>(Class::Temp).unwrap();
        f.cv(t, sum);
        f.add(c, c, t);
        f.ret(c);
        f.end().unwrap()
    }
    for seed in [1u64, 0x9e37_79b9_7f4a_7c15, 77, 0x1234_5678] {
        let (a64, rf) = (build::<A64>(seed), build::<Ref>(seed));
        assert!(a64.len() > MIB, "{}", a64.len());
        // Some b.conds go through veneers: their target is a `b`.
        let b = a64.bytes();
        let veneered = (0..b.len() / 4)
            .filter(|&i| {
                let w = word(b, 4 * i);
                w & 0xff00_0010 == 0x5400_0000 && word(b, target(b, 4 * i)) >> 26 == 0b000101
            })
            .count();
        assert!(veneered > 0, "seed {seed:#x}: no veneer");
        // Some data is used beyond adr's reach: `adr x, .` + `sub`.
        let far = (0..b.len() / 4 - 1)
            .filter(|&i| {
                let (w, next) = (word(b, 4 * i), word(b, 4 * i + 4));
                w & !31 == 0x1000_0000 && next & 0xff00_0000 == 0xd100_0000
            })
            .count();
        assert!(far > 0, "seed {seed:#x}: no far data");
        for v in [0i64, 3, 7] {
            same(&a64, &rf, &[Value::L(v)]);
        }
    }
}

/// A label's chain of forward references across an island: its `b.cond`s
/// go to one veneer, which takes their place in the chain beside the
/// label's `b`s (kept, and patched when the label is placed), and a
/// `b.cond` after the island joins the same chain.
#[test]
fn chains_keep_their_jumps_across_an_island() {
    fn build<B: Backend>() -> B::Code {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%l", Leaf::Yes).unwrap();
        let x = p.get::<L>(0).unwrap();
        let c = f.getreg::<L>(Class::Temp).unwrap();
        f.set(c, 0);
        let out = f.genlabel();
        let jump_if = |f: &mut Func<B>, k: i64| {
            let skip = f.genlabel();
            f.bne(x, k, skip);
            f.jmp(out);
            f.label(skip);
        };
        jump_if(&mut f, 0);
        f.beq(x, 1, out);
        jump_if(&mut f, 2);
        f.blt(x, -5, out);
        fill(&mut f, c, FILL);
        f.beq(x, 3, out);
        f.ret(c);
        f.label(out);
        f.add(c, c, 1_000_000);
        f.add(c, c, x);
        f.ret(c);
        f.end().unwrap()
    }
    let (a64, rf) = (build::<A64>(), build::<Ref>());
    // Both b.conds before the island share its one veneer.
    let b = a64.bytes();
    let (body, _) = a64.parts();
    let conds: Vec<usize> = (body..body + 64)
        .step_by(4)
        .filter(|&at| word(b, at) & 0xff00_0010 == 0x5400_0000 && word(b, at) & 15 != 1)
        .collect();
    assert_eq!(conds.len(), 2, "b.eq and b.lt");
    let veneer = target(b, conds[0]);
    assert_eq!(target(b, conds[1]), veneer);
    assert!(veneer - body > MIB - 1024 && veneer - body < MIB);
    for x in [-6, 0, 1, 2, 3, 4] {
        same(&a64, &rf, &[Value::L(x)]);
    }
}

/// A forward `b.cond` whose label's previous reference lies farther back
/// than its 19-bit field can link (here the veneer of an island more than
/// 1 MiB before) becomes the inverted condition over a `b`.
#[test]
fn a_forward_branch_beyond_its_links_reach() {
    fn build<B: Backend>() -> B::Code {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%l", Leaf::Yes).unwrap();
        let x = p.get::<L>(0).unwrap();
        let c = f.getreg::<L>(Class::Temp).unwrap();
        f.set(c, 0);
        let out = f.genlabel();
        f.beq(x, 0, out);
        fill(&mut f, c, 2 * FILL);
        f.beq(x, 1, out);
        f.ret(c);
        f.label(out);
        f.add(c, c, 1_000_000);
        f.add(c, c, x);
        f.ret(c);
        f.end().unwrap()
    }
    let (a64, rf) = (build::<A64>(), build::<Ref>());
    let b = a64.bytes();
    let (_, epi) = a64.parts();
    // The second branch: cmp x0, #1; b.ne .+8; b out, just before the
    // first return (b to the epilogue) and the label's code.
    let at = (0..epi / 4)
        .map(|i| 4 * i)
        .rev()
        .find(|&at| word(b, at) == 0xf100_041f)
        .expect("cmp x0, #1");
    assert_eq!(word(b, at + 4), 0x5400_0041, "b.ne .+8");
    assert_eq!(word(b, at + 8) >> 26, 0b000101, "b");
    // The return is `mov x0, c` and `b epilogue`.
    assert_eq!(target(b, at + 8), at + 20, "to the label, past the return");
    for x in [0, 1, 2] {
        same(&a64, &rf, &[Value::L(x)]);
    }
}
