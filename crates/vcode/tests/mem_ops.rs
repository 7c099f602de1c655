//! The jive JIT's memory extensions: `move16` (trait `Move16`: 16 bytes
//! from `[src + idx + sdisp]` to `[dst + idx + ddisp]`, natively two
//! `movdqu` through xmm15) and `add_mem_imm`/`add_mem_reg` (trait
//! `MemAdd`: an `add` with a memory destination). Both run natively and on
//! the reference backend against a Rust model, with the base in every
//! allocatable register (r12 and r13 as bases take a SIB byte and a
//! displacement of their own), displacements across the disp8/disp32
//! boundary, and for the add both widths and immediates across the
//! imm8/imm32 boundary; nothing outside the 16 bytes or the word changes.
//! `Exit`'s `st_imm32` and `ret_zero` (the JIT's return to the host) the
//! same way: the 32-bit word stored and nothing else, and 0 returned
//! whatever the scratch register held. `bcmp_mem`/`bcmp_mem_imm` (trait
//! `MemCompare`: `cmp` with a memory operand and the `jcc`) the same way,
//! against a Rust model of the comparison, for every condition and the
//! four integer types of 4 and 8 bytes. `add_reg_mem` (`MemAdd`: an
//! `add` with a memory source) the same way: the register's sum, and
//! memory unchanged.

use vcode::backend::Cond;
use vcode::ext::{Exit, MemAdd, MemCompare, Move16};
use vcode::{
    Backend, Class, Func, I, Int, Invoke, L, Leaf, P, Reference, Reg, Ty, Type, U, UL, Value, X64,
};

fn call(code: &(impl Invoke + ?Sized), args: &[Value]) {
    // SAFETY: the functions read and write only the buffers the tests pass,
    // inside their bounds (the model says where).
    unsafe { code.invoke(args) }.unwrap_or_else(|e| panic!("{e}"));
}

/// The codes of a native and a reference build that were built, each
/// with its name for the assertion's message.
fn built<'a>(
    native: &'a Option<impl Invoke>,
    reference: &'a Option<impl Invoke>,
) -> Vec<(&'a dyn Invoke, &'static str)> {
    let mut v: Vec<(&dyn Invoke, &str)> = Vec::new();
    if let Some(c) = native {
        v.push((c, "native"));
    }
    if let Some(c) = reference {
        v.push((c, "reference"));
    }
    v
}

/// The registers a function can claim as temporaries and persistents.
fn claimable<B: Backend>() -> usize {
    let mut f = Func::<B>::with_backend();
    f.lambda("%p%p%ul", Leaf::Yes).unwrap();
    let mut n = 0;
    while f.getreg::<UL>(Class::Temp).is_ok() {
        n += 1;
    }
    while f.getreg::<UL>(Class::Persistent).is_ok() {
        n += 1;
    }
    n
}

/// The `k`-th register claimed after the parameters, temporaries first,
/// the ones before it claimed too, so that the form under test sees them
/// all taken and only the others stay free for the portable forms'
/// temporary. `None` if there are not that many.
fn claim_kth<B: Backend>(f: &mut Func<B>, k: usize) -> Option<Reg<P>> {
    let mut last = None;
    for _ in 0..=k {
        last = Some(
            f.getreg::<P>(Class::Temp)
                .or_else(|_| f.getreg::<P>(Class::Persistent))
                .ok()?,
        );
    }
    last
}

/// Returns and ends `f`. The portable forms need a temporary: with every
/// register claimed, the reference backend reports that instead (`None`);
/// the native one must not fail.
fn finish<B: Backend>(mut f: Func<B>, native: bool) -> Option<B::Code> {
    f.retv();
    match f.end() {
        Ok(c) => Some(c),
        Err(e) if native => panic!("{e}"),
        Err(_) => None,
    }
}

/// `f(src, dst, idx)`: `move16(dst', ddisp, src, sdisp, idx?)` with `dst`
/// first moved into the `k`-th register claimed after the parameters.
fn mover<B: Backend>(
    native: bool,
    k: usize,
    sdisp: i32,
    ddisp: i32,
    indexed: bool,
) -> Option<B::Code> {
    let mut f = Func::<B>::with_backend();
    let ps = f.lambda("%p%p%ul", Leaf::No).unwrap();
    let (src, dst, idx) = (
        ps.get::<P>(0).unwrap(),
        ps.get::<P>(1).unwrap(),
        ps.get::<UL>(2).unwrap(),
    );
    let d = claim_kth(&mut f, k)?;
    f.mov(d, dst);
    f.move16(d, ddisp, src, sdisp, indexed.then_some(idx));
    finish(f, native)
}

#[test]
fn move16_moves_sixteen_bytes_and_nothing_else() {
    let pattern: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
    for k in 0..claimable::<X64>() {
        for (sdisp, ddisp) in [(0, 0), (-16, -8), (5, 127), (-128, 300), (200, -3)] {
            for indexed in [false, true] {
                for idx in [0u64, 1, 40, 150] {
                    let native = mover::<X64>(true, k, sdisp, ddisp, indexed);
                    let reference = mover::<Reference>(false, k, sdisp, ddisp, indexed);
                    for (code, what) in built(&native, &reference) {
                        let src = pattern.clone();
                        let mut dst = vec![0xeeu8; 1000];
                        let i = if indexed { idx as i64 } else { 0 };
                        let from = (300 + i + i64::from(sdisp)) as usize;
                        let to = (300 + i + i64::from(ddisp)) as usize;
                        call(
                            code,
                            &[
                                Value::P(src.as_ptr().wrapping_add(300) as usize),
                                Value::P(dst.as_mut_ptr().wrapping_add(300) as usize),
                                Value::UL(idx),
                            ],
                        );
                        let mut want = vec![0xeeu8; 1000];
                        want[to..to + 16].copy_from_slice(&pattern[from..from + 16]);
                        assert_eq!(
                            dst, want,
                            "{what} k={k} sdisp={sdisp} ddisp={ddisp} indexed={indexed} idx={idx}"
                        );
                    }
                }
            }
        }
    }
}

/// `f(p, _, v)`: `add_mem_*(wide, p', disp, imm or v)` with `p` first
/// moved into the `k`-th register claimed after the parameters.
fn adder<B: Backend>(
    native: bool,
    k: usize,
    wide: bool,
    disp: i32,
    imm: Option<i32>,
) -> Option<B::Code> {
    let mut f = Func::<B>::with_backend();
    let ps = f.lambda("%p%p%ul", Leaf::No).unwrap();
    let (base, v) = (ps.get::<P>(0).unwrap(), ps.get::<UL>(2).unwrap());
    let b = claim_kth(&mut f, k)?;
    f.mov(b, base);
    match imm {
        Some(i) => f.add_mem_imm(wide, b, disp, i),
        None => f.add_mem_reg(wide, b, disp, v),
    }
    finish(f, native)
}

#[test]
fn add_mem_adds_to_one_word_of_its_width() {
    for k in 0..claimable::<X64>() {
        for wide in [false, true] {
            for disp in [0, 8, -16, 127, 128, -129, 1000] {
                for imm in [
                    Some(1),
                    Some(-1),
                    Some(127),
                    Some(128),
                    Some(-129),
                    Some(i32::MIN),
                    None,
                ] {
                    for v in [0u64, 1, 0xffff_ffff, u64::MAX, 1 << 40] {
                        let native = adder::<X64>(true, k, wide, disp, imm);
                        let reference = adder::<Reference>(false, k, wide, disp, imm);
                        for (code, what) in built(&native, &reference) {
                            let mut mem = vec![0x5au8; 2400];
                            let at = (1200 + disp) as usize;
                            mem[at..at + 8]
                                .copy_from_slice(&0x8877_6655_fffe_fdfcu64.to_le_bytes());
                            call(
                                code,
                                &[
                                    Value::P(mem.as_mut_ptr().wrapping_add(1200) as usize),
                                    Value::P(0),
                                    Value::UL(v),
                                ],
                            );
                            let mut want = vec![0x5au8; 2400];
                            let old = 0x8877_6655_fffe_fdfcu64;
                            let add = imm.map_or(v, |i| i64::from(i) as u64);
                            let new = if wide {
                                old.wrapping_add(add)
                            } else {
                                (old & !0xffff_ffff)
                                    | u64::from((old as u32).wrapping_add(add as u32))
                            };
                            want[at..at + 8].copy_from_slice(&new.to_le_bytes());
                            assert_eq!(
                                mem, want,
                                "{what} k={k} wide={wide} disp={disp} imm={imm:?} v={v:#x}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// `f(p, _, v)`: `v += *(p' + disp)` (`add_reg_mem`, the portable form's
/// scratch the parameter register of `_`), `v` returned, with `p` first
/// moved into the `k`-th register claimed after the parameters.
fn reg_adder<B: Backend>(k: usize, disp: i32) -> Option<B::Code> {
    let mut f = Func::<B>::with_backend();
    let ps = f.lambda("%p%p%ul", Leaf::No).unwrap();
    let (base, t, v) = (
        ps.get::<P>(0).unwrap(),
        ps.get::<P>(1).unwrap(),
        ps.get::<UL>(2).unwrap(),
    );
    let b = claim_kth(&mut f, k)?;
    f.mov(b, base);
    f.add_reg_mem(v, b, disp, Reg::<UL>::phys(t.num()));
    f.ret(v);
    Some(f.end().unwrap_or_else(|e| panic!("{e}")))
}

#[test]
fn add_reg_mem_adds_one_word_to_its_register() {
    for k in 0..claimable::<X64>() {
        for disp in [0, 8, -16, 127, 128, -129, 1000] {
            for v in [0u64, 1, 0xffff_ffff, u64::MAX, 1 << 40] {
                let native = reg_adder::<X64>(k, disp);
                let reference = reg_adder::<Reference>(k, disp);
                for (code, what) in built(&native, &reference) {
                    let mut mem = vec![0x5au8; 2400];
                    let at = (1200 + disp) as usize;
                    let word = 0x8877_6655_fffe_fdfcu64;
                    mem[at..at + 8].copy_from_slice(&word.to_le_bytes());
                    let want_mem = mem.clone();
                    // SAFETY: the function reads the 8 bytes at `at`, inside `mem`.
                    let got = unsafe {
                        code.invoke(&[
                            Value::P(mem.as_mut_ptr().wrapping_add(1200) as usize),
                            Value::P(0),
                            Value::UL(v),
                        ])
                    }
                    .unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(
                        got,
                        Value::UL(v.wrapping_add(word)),
                        "{what} k={k} disp={disp}"
                    );
                    assert_eq!(mem, want_mem, "{what} k={k} disp={disp}: memory unchanged");
                }
            }
        }
    }
}

/// `f(p, _, v)`: `st_imm32(p', disp, imm)` with `p` first moved into the
/// `k`-th register claimed after the parameters, then `ret_zero` with the
/// scratch register holding `v`.
fn exiter<B: Backend>(native: bool, k: usize, disp: i32, imm: i32) -> Option<B::Code> {
    let mut f = Func::<B>::with_backend();
    let ps = f.lambda("%p%p%ul", Leaf::No).unwrap();
    let (base, v) = (ps.get::<P>(0).unwrap(), ps.get::<UL>(2).unwrap());
    let b = claim_kth(&mut f, k)?;
    f.mov(b, base);
    f.st_imm32(b, disp, imm);
    let scratch = Reg::<vcode::I>::phys(v.num());
    f.ret_zero(scratch);
    match f.end() {
        Ok(c) => Some(c),
        Err(e) if native => panic!("{e}"),
        Err(_) => None,
    }
}

#[test]
fn exit_stores_one_word_and_returns_zero() {
    for k in 0..claimable::<X64>() {
        for disp in [0, 8, -16, 127, 128, -129, 1000] {
            for imm in [0, 1, -1, 127, 128, 0x1234_5678, i32::MIN] {
                let native = exiter::<X64>(true, k, disp, imm);
                let reference = exiter::<Reference>(false, k, disp, imm);
                for (code, what) in built(&native, &reference) {
                    let mut mem = vec![0x5au8; 2400];
                    let at = (1200 + disp) as usize;
                    // SAFETY: the function writes the 4 bytes at `at`, inside `mem`.
                    let got = unsafe {
                        code.invoke(&[
                            Value::P(mem.as_mut_ptr().wrapping_add(1200) as usize),
                            Value::P(0),
                            Value::UL(0xdead_beef_0bad_cafe),
                        ])
                    }
                    .unwrap_or_else(|e| panic!("{e}"));
                    let mut want = vec![0x5au8; 2400];
                    want[at..at + 4].copy_from_slice(&imm.to_le_bytes());
                    assert_eq!(mem, want, "{what} k={k} disp={disp} imm={imm}");
                    assert_eq!(got, Value::I(0), "{what} k={k} disp={disp} imm={imm}");
                }
            }
        }
    }
}

/// What a function ending in `ret_zero_with` into `rdx` returns: the
/// status and the value, the two result registers of the C convention
/// (`rax`, `rdx`).
#[repr(C)]
#[derive(Debug, PartialEq, Eq)]
struct Pair {
    status: u64,
    value: u64,
}

/// `f(v, _)`: `v` moved into the `k`-th register claimed after the
/// parameters (every register, the result registers among them), every
/// other register claimed set to all ones, then `ret_zero_with` of that
/// register, or of `imm` where it is given, into `to`; `kept`: registers
/// the caller keeps (`RegConfig::keep_in_caller`).
fn pair_exiter<B: Backend>(
    k: usize,
    imm: Option<i32>,
    to: u8,
    kept: &[u8],
) -> Result<B::Code, vcode::Error> {
    let mut f = Func::<B>::with_backend();
    let mut cfg = vcode::RegConfig::default();
    for &n in kept {
        cfg.keep_in_caller(n).unwrap();
    }
    f.set_config(cfg);
    let ps = f.lambda("%ul%ul", Leaf::No)?;
    let v = ps.get::<UL>(0)?;
    let b = claim_kth(&mut f, k).expect("k is claimable");
    f.mov(b.cast::<UL>(), v);
    while let Ok(o) = f
        .getreg::<UL>(Class::Temp)
        .or_else(|_| f.getreg::<UL>(Class::Persistent))
    {
        f.set(o, u64::MAX);
    }
    let value = match imm {
        Some(i) => vcode::Operand::Imm(i64::from(i)),
        None => vcode::Operand::Reg(Reg::<vcode::I>::phys(b.num())),
    };
    f.ret_zero_with(value, Reg::phys(to));
    f.end()
}

/// Runs `code` (a `pair_exiter` into `r14`, which its caller keeps) on
/// `v`: `eax` and `r14d`, as the jive JIT's host reads them.
fn run_into_r14(code: &vcode::Code, v: u64) -> (u32, u32) {
    let (status, value): (u32, u32);
    // SAFETY: the function takes two integers, touches no memory, and
    // changes only the registers of the C convention's caller-saved set
    // and `r14` (kept by the caller: declared an output here); its
    // frame restores `rbx` and `rbp`.
    unsafe {
        core::arch::asm!(
            "call {f}",
            f = in(reg) code.addr(),
            in("rdi") v,
            in("rsi") u64::MAX,
            lateout("eax") status,
            lateout("r14") value,
            clobber_abi("C"),
        );
    }
    (status, value)
}

/// `ret_zero_with` returns 0 in `rax` and the value's 32 bits,
/// zero-extended, in `to`: `rdx` (the C convention's second result
/// register, read as a returned struct) and `r14` (a callee-saved
/// register the caller keeps, read by an `asm!` call), from every
/// register the value may be in (`rax`, `rdx` and `r14` themselves
/// included) and as a constant. It refuses `rax` (the status's) and a
/// callee-saved register the caller does not keep (the function would
/// change it without restoring it), and the reference backend, whose
/// functions return one value, refuses it too.
#[test]
fn exit_with_a_value_returns_zero_and_the_value_in_another_register() {
    use vcode::host::gpr::{R14, RAX, RBX};
    let value = 0xdead_beef_8765_4321u64;
    let rdx = vcode::ext::second_result::<X64>().expect("x86-64's").num();
    assert_eq!(rdx, vcode::host::gpr::RDX);
    let mut cases: Vec<(usize, Option<i32>)> = (0..claimable::<X64>()).map(|k| (k, None)).collect();
    for imm in [0, 1, -1, 127, 128, 0x1234_5678, i32::MIN] {
        cases.push((0, Some(imm)));
    }
    for (k, imm) in cases {
        let want = imm.map_or(value as u32, |i| i as u32);
        let code = pair_exiter::<X64>(k, imm, rdx, &[]).unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: the function takes two integers and returns two
        // (`ret_zero_with` into `rdx`), touching no memory.
        let run =
            unsafe { core::mem::transmute::<usize, extern "C" fn(u64, u64) -> Pair>(code.addr()) };
        assert_eq!(
            run(value, !0),
            Pair {
                status: 0,
                value: u64::from(want),
            },
            "rdx k={k} imm={imm:?}"
        );
        let code = pair_exiter::<X64>(k, imm, R14, &[R14]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            run_into_r14(&code, value),
            (0, want),
            "r14 k={k} imm={imm:?}"
        );
    }
    let refused = |r: Result<vcode::Code, vcode::Error>| matches!(r.map(|_| ()), Err(e) if matches!(e.kind(), vcode::ErrorKind::Unsupported(_)));
    assert!(refused(pair_exiter::<X64>(0, None, RAX, &[])), "rax");
    assert!(
        refused(pair_exiter::<X64>(0, None, R14, &[])),
        "r14 not kept"
    );
    assert!(refused(pair_exiter::<X64>(0, None, RBX, &[])), "rbx");
    assert!(matches!(
        pair_exiter::<Reference>(0, None, rdx, &[]).map(|_| ()),
        Err(e) if matches!(e.kind(), vcode::ErrorKind::Unsupported(_))
    ));
}

/// `ret_zero_with` on x86-64 writes the epilogue in place of the jump to
/// it: a function whose returns all take it has no `jmp` to the
/// epilogue, and it still restores what it saved (`rbx`, `r12` to `r15`
/// claimed, each set to all ones: the caller's values must come back).
/// A return made before the function came to save more than it had
/// (room for the epilogue of `rbx` alone, then four more saved) jumps to
/// the epilogue instead, and restores all five as well.
#[test]
fn exit_with_a_value_writes_the_epilogue_in_place() {
    use vcode::host::gpr::{RBX, RDX};
    // Two returns, the first before `late` more callee-saved registers
    // are claimed; `v` chooses between them.
    fn build(late: usize) -> vcode::Code {
        let mut f = Func::<X64>::with_backend();
        let ps = f.lambda("%ul%ul", Leaf::No).unwrap();
        let (v, w) = (ps.get::<UL>(0).unwrap(), ps.get::<UL>(1).unwrap());
        let b = f.reserve(Reg::<UL>::phys(RBX)).unwrap();
        f.set(b, u64::MAX);
        let second = f.genlabel();
        f.bne(v, 0, second);
        f.ret_zero_with(vcode::Operand::Imm(7), Reg::phys(RDX));
        f.label(second);
        for _ in 0..late {
            let p = f.getreg::<UL>(Class::Persistent).unwrap();
            f.set(p, u64::MAX);
        }
        f.ret_zero_with(vcode::Operand::Reg(Reg::phys(w.num())), Reg::phys(RDX));
        f.end().unwrap()
    }
    for late in [0, 4] {
        let code = build(late);
        let list = code.disassemble();
        // Every return's epilogue in place (`leave` once per return, and
        // the frame's own after the body), or for the early return of a
        // function that came to save more, one jump.
        let leaves = list.matches("leave").count();
        let jumps = list.lines().filter(|l| l.contains("jmp")).count();
        if late == 0 {
            assert_eq!((leaves, jumps), (3, 0), "{list}");
        } else {
            assert_eq!((leaves, jumps), (2, 1), "{list}");
        }
        for (v, want) in [(0u64, 7u32), (1, 0x1234_5678)] {
            let (status, value, kept): (u32, u32, [u64; 5]);
            // SAFETY: the function takes two integers, touches no memory
            // but its frame, and restores every callee-saved register it
            // uses (what this checks); `rdx` comes back as its second
            // result.
            unsafe {
                let (rbx, r12, r13, r14, r15): (u64, u64, u64, u64, u64);
                core::arch::asm!(
                    // `rbx` kept around the block (an `asm!` block cannot
                    // name it), the stack still 16-byte aligned at the call.
                    "push rbx",
                    "sub rsp, 8",
                    "mov rbx, 0x1111",
                    "mov r12, 0x1212",
                    "mov r13, 0x1313",
                    "mov r14, 0x1414",
                    "mov r15, 0x1515",
                    "call {f}",
                    "add rsp, 8",
                    "mov r8, rbx",
                    "pop rbx",
                    f = in(reg) code.addr(),
                    out("r8") rbx,
                    in("rdi") v,
                    in("rsi") 0x1234_5678u64,
                    lateout("eax") status,
                    lateout("edx") value,
                    out("r12") r12,
                    out("r13") r13,
                    out("r14") r14,
                    out("r15") r15,
                    clobber_abi("C"),
                );
                kept = [rbx, r12, r13, r14, r15];
            }
            assert_eq!((status, value), (0, want), "late={late} v={v}");
            assert_eq!(
                kept,
                [0x1111, 0x1212, 0x1313, 0x1414, 0x1515],
                "late={late} v={v}"
            );
        }
    }
}

/// `f(p, a, _)`: `bcmp_mem(c, a, (p', disp), t)` (or `bcmp_mem_imm(c,
/// (p', disp), imm, t)`) of type `T`, with `p` first moved into the `k`-th
/// register claimed after the parameters and the scratch `t`; returns 1
/// if it branched, 0 if not.
fn comparer<B: Backend, T: Int>(
    native: bool,
    k: usize,
    c: Cond,
    disp: i32,
    imm: Option<i32>,
) -> Option<B::Code> {
    let mut f = Func::<B>::with_backend();
    let ps = f.lambda("%p%ul", Leaf::No).unwrap();
    let (base, v) = (ps.get::<P>(0).unwrap(), ps.get::<UL>(1).unwrap());
    let t = f.getreg::<T>(Class::Temp).ok()?;
    let b = claim_kth(&mut f, k)?;
    f.mov(b, base);
    let a = Reg::<T>::phys(v.num());
    let yes = f.genlabel();
    match imm {
        Some(i) => f.bcmp_mem_imm(c, (b, disp), i, t, yes),
        None => f.bcmp_mem(c, a, (b, disp), t, yes),
    }
    let out = Reg::<UL>::phys(t.num());
    f.set(out, 0u64);
    f.ret(out);
    f.label(yes);
    f.set(out, 1u64);
    f.ret(out);
    match f.end() {
        Ok(c) => Some(c),
        Err(e) if native => panic!("{e}"),
        Err(_) => None,
    }
}

/// Whether `a c b` holds for type `ty` (its width and signedness) on the
/// low bits of `a` and `b`.
fn holds(ty: Ty, c: Cond, a: u64, b: u64) -> bool {
    let (a, b): (i128, i128) = match ty {
        Ty::I => (i128::from(a as i32), i128::from(b as i32)),
        Ty::U => (i128::from(a as u32), i128::from(b as u32)),
        Ty::L => (i128::from(a as i64), i128::from(b as i64)),
        _ => (i128::from(a), i128::from(b)),
    };
    match c {
        Cond::Lt => a < b,
        Cond::Le => a <= b,
        Cond::Gt => a > b,
        Cond::Ge => a >= b,
        Cond::Eq => a == b,
        Cond::Ne => a != b,
    }
}

/// `bcmp_mem` and `bcmp_mem_imm` of type `T` against [`holds`], natively
/// and on the reference backend, with the base in every allocatable
/// register, displacements across the disp8/disp32 boundary, immediates
/// across the imm8/imm32 boundary and values at the width's and the
/// sign's edges, the word beside the compared one never equal to it.
fn compares_as_the_core_branch<T: Int>() {
    let ty = <T as Type>::TY;
    let values = [
        0u64,
        1,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_ffff,
        1 << 40,
        0x8000_0000_0000_0000,
        u64::MAX,
    ];
    for k in 0..claimable::<X64>() {
        for c in [Cond::Lt, Cond::Le, Cond::Gt, Cond::Ge, Cond::Eq, Cond::Ne] {
            for disp in [0, -8, 127, 128, -1000] {
                for imm in [
                    None,
                    Some(0),
                    Some(1),
                    Some(-1),
                    Some(127),
                    Some(128),
                    Some(-129),
                    Some(i32::MIN),
                ] {
                    let native = comparer::<X64, T>(true, k, c, disp, imm);
                    let reference = comparer::<Reference, T>(false, k, c, disp, imm);
                    for (code, what) in built(&native, &reference) {
                        for &a in &values {
                            for &m in &values {
                                // A 32-bit type's register holds its value
                                // zero-extended, as vcode keeps one.
                                let a = if ty.is_64() { a } else { u64::from(a as u32) };
                                let mut mem = vec![0x5au8; 2400];
                                let at = (1200 + disp) as usize;
                                mem[at..at + 8].copy_from_slice(&m.to_le_bytes());
                                let got = call_value(
                                    code,
                                    &[
                                        Value::P(mem.as_mut_ptr().wrapping_add(1200) as usize),
                                        Value::UL(a),
                                    ],
                                );
                                let want = match imm {
                                    Some(i) => holds(ty, c, m, i64::from(i) as u64),
                                    None => holds(ty, c, a, m),
                                };
                                assert_eq!(
                                    got,
                                    Value::UL(u64::from(want)),
                                    "{what} {ty:?} k={k} {c:?} disp={disp} imm={imm:?} a={a:#x} m={m:#x}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

fn call_value(code: &(impl Invoke + ?Sized), args: &[Value]) -> Value {
    // SAFETY: the function reads one word of the buffer the test passes,
    // inside its bounds.
    unsafe { code.invoke(args) }.unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn bcmp_mem_branches_as_a_load_and_the_core_branch() {
    compares_as_the_core_branch::<UL>();
    compares_as_the_core_branch::<L>();
    compares_as_the_core_branch::<U>();
    compares_as_the_core_branch::<I>();
}
