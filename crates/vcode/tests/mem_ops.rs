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
//! whatever the scratch register held.

use vcode::ext::{Exit, MemAdd, Move16};
use vcode::{Backend, Class, Func, Invoke, Leaf, P, Reference, Reg, UL, Value, X64};

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
