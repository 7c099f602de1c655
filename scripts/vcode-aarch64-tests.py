#!/usr/bin/env python3
"""Regenerates crates/vcode/tests/aarch64_regression.rs and aarch64_differential.rs
from regression.rs and differential.rs (the native backend swapped for the aarch64
one under emulation, and the restrictions emulation needs; see the files' docs).
Run from anywhere: python3 scripts/vcode-aarch64-tests.py"""
import os, re
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
src = open(ROOT + '/crates/vcode/tests/regression.rs').read()

def cut_fn(s, start_marker, end_marker):
    i = s.index(start_marker); j = s.index(end_marker, i)
    return s[:i] + s[j:]

# header
i = src.index('#[macro_use]')
header = '''//! The regression table of `regression.rs`, for the aarch64 backend: every
//! row (each instruction of Table 2 with every type, the shipped
//! extensions, registers swept) runs on the aarch64 backend under
//! emulation (`vcode::emu`, feature `emu`) and on the reference backend
//! parameterized by AAPCS64, and every result is compared with the C
//! semantics written here. This file is `regression.rs` with the native
//! backend swapped (`A64` for `X64`, `listing` for the iced-x86
//! disassembly) and these differences, since emulated code cannot call
//! host (x86-64) functions: jumps and `jal`s to registers and addresses
//! reach generated A64 functions (a counter bumped by an A64 stub), the
//! typed-function-pointer check of `ret` and the two calls into Rust
//! functions (`bug_calls_from_a_jal_subroutine`,
//! `bug_float_immediate_call_arguments`) call generated A64 callees
//! instead. Division by zero does not trap on A64; those rows check the
//! reference backend's fault only, as on x86-64.
//!
//! Run: `cargo test -p vcode --features emu --test aarch64_regression`.

#![cfg(feature = "emu")]

'''
src = header + src[i:]
src = src.replace('''use vcode::{
    Backend, Code, D, ErrorKind, F, Float, Func, I, Int, Invoke, InvokeError, L, Leaf, Operand, P,
    Reference, Reg, Ty, Type, U, UL, Value, X64,
};''', '''use vcode::aarch64::{A64, Aapcs64, Code};
use vcode::{
    Backend, D, ErrorKind, F, Float, Func, I, Int, Invoke, InvokeError, L, Leaf, Operand, P, Reg,
    Ty, Type, U, UL, Value,
};

/// The reference backend with the aarch64 target's calling convention.
type Reference = vcode::reference::Reference<Aapcs64>;''')
src = re.sub(r'\bX64\b', 'A64', src)
src = src.replace('Func::new()', 'Func::<A64>::with_backend()')
src = src.replace('.disassemble()', '.listing()')
# check_decodes: A64 words are all 4 bytes; check the code is whole words and has no udf (0) in it.
i = src.index('/// Decodes `code` and fails on an invalid instruction.')
j = src.index('impl Pair {', i)
src = src[:i] + '''/// Checks that `code` is whole A64 words, none of them `udf #0`.
fn check_decodes(code: &Code, what: &str) {
    assert_eq!(code.len() % 4, 0, "{what}");
    for (k, w) in code.bytes()[..code.parts().1].chunks_exact(4).enumerate() {
        assert_ne!(w, [0, 0, 0, 0], "{what}: udf at {:#x}\\n{}", 4 * k, code.listing());
    }
}

''' + src[j:]
# ret_of: drop the typed function pointer part
i = src.index('    // Through the typed function pointer too.')
j = src.index('// ---------------------------------------------------------------------------\n// Jumps and jal', i)
# find the closing brace of ret_of fn: the text between i and j ends with "}\n\n"
src = src[:i] + '}\n\n' + src[j:]
# jumps to reg/addr: invoke instead of as_fn
src = src.replace('''            // SAFETY: jumps with x + 10 in rdi to `target`, which returns x + 11.
            let g = unsafe { code.as_fn::<extern "C" fn(i64) -> i64>().unwrap() };
            for v in [0, -11, i64::MAX - 11, 0x1234_5678_9abc_def0] {
                assert_eq!(g(v), v + 11);
            }''', '''            for v in [0, -11, i64::MAX - 11, 0x1234_5678_9abc_def0] {
                // SAFETY: jumps with x + 10 in x0 to `target`, which returns x + 11.
                assert_eq!(unsafe { code.invoke(&[Value::L(v)]) }, Ok(Value::L(v + 11)));
            }''')
# jal reg/addr: a generated stub instead of the Rust function `bump`
src = src.replace('''extern "C" fn bump() {
    JAL_COUNT.fetch_add(1, Ordering::SeqCst);
}''', '''/// An A64 stub that adds 1 to `JAL_COUNT` (the emulated code cannot call
/// a Rust function). Built once and kept.
fn bump() -> usize {
    static STUB: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *STUB.get_or_init(|| {
        let mut f = Func::<A64>::with_backend();
        f.lambda("", Leaf::Yes).unwrap();
        let (a, x) = (Reg::<P>::t(0), Reg::<UL>::t(1));
        f.set(a, &JAL_COUNT as *const AtomicU64 as usize);
        f.ld(x, a, 0);
        f.add(x, x, 1);
        f.st(x, a, 0);
        f.retv();
        let code = Box::leak(Box::new(f.end().unwrap()));
        code.addr()
    })
}''')
src = src.replace('f.set(a, bump as *const () as usize);', 'f.set(a, bump());')
src = src.replace('f.jal(bump as *const () as usize);', 'f.jal(bump());')
open(ROOT + '/crates/vcode/tests/aarch64_regression.rs','w').write(src)
src = open(ROOT + '/crates/vcode/tests/aarch64_regression.rs').read()
src = src.replace('''    let nops = pair.native.bytes().iter().filter(|&&b| b == 0x90).count();''','''    let nops = pair
        .native
        .bytes()
        .chunks_exact(4)
        .filter(|w| *w == 0xd503_201fu32.to_le_bytes())
        .count();''')
# Rust callees -> generated A64 callees (by address: Callee::Native of A64 code).
i = src.index('#[repr(align(16))]\nstruct Aligned16')
j = src.index('/// A subroutine entered by `jal` to a label ran with rsp')
src = src[:i] + '''/// Generated A64 callees (emulated code cannot call Rust functions),
/// built once and kept: their addresses are `Callee::Native` targets.
fn a64_callee(key: usize, build: fn() -> Code) -> usize {
    static CALLEES: std::sync::Mutex<Vec<(usize, usize)>> = std::sync::Mutex::new(Vec::new());
    let mut c = CALLEES.lock().unwrap();
    if let Some(&(_, a)) = c.iter().find(|(k, _)| *k == key) {
        return a;
    }
    let a = Box::leak(Box::new(build())).addr();
    c.push((key, a));
    a
}

/// How far from 16-byte alignment the caller left the stack: the address
/// of an 8-byte local, 8 mod 16 below a 16-byte aligned frame, xor 8.
fn stack_misalignment() -> usize {
    a64_callee(1, || {
        let mut f = Func::<A64>::with_backend();
        f.lambda("", Leaf::Yes).unwrap();
        let l = f.local::<D>();
        let a = Reg::<P>::t(0);
        f.addr_local(a, l);
        f.and(a, a, 15);
        f.xor(a, a, 8);
        f.ret(a.cast::<L>());
        f.end().unwrap()
    })
}

#[allow(clippy::too_many_arguments)]
fn nine_args_rust(a: i64, b: i64, c: i64, d: i64, e: i64, f: i64, g: i64, h: i64, i: i64) -> i64 {
    a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i
}

/// `a + 2b + ... + 9i` of nine `l` arguments (the ninth on the stack).
fn nine_args() -> usize {
    a64_callee(2, || {
        let mut f = Func::<A64>::with_backend();
        let p = f.lambda("%l%l%l%l%l%l%l%l%l", Leaf::Yes).unwrap();
        let s = f.getreg::<L>(vcode::Class::Temp).unwrap();
        f.set(s, 0);
        for k in 0..9 {
            let x = p.get::<L>(k).unwrap();
            f.mul(x, x, k as i64 + 1);
            f.add(s, s, x);
        }
        f.ret(s);
        f.end().unwrap()
    })
}

''' + src[j:]
src = src.replace('vcode::Callee::Native(stack_misalignment as *const () as usize)', 'vcode::Callee::Native(stack_misalignment())')
src = src.replace('vcode::Callee::Native(nine_args as *const () as usize)', 'vcode::Callee::Native(nine_args())')
src = src.replace('&[0, nine_args(1, 2, 3, 4, 5, 6, 7, 8, 9) as u64]', '&[0, nine_args_rust(1, 2, 3, 4, 5, 6, 7, 8, 9) as u64]')
i = src.index('extern "C" fn floats_and_ints(')
j = src.index('/// A float immediate argument')
body = src[i:j]
body = body.replace('extern "C" fn floats_and_ints(', 'fn floats_and_ints_rust(')
body = body.replace('#[allow(clippy::too_many_arguments)]\nfn floats_and_ints_rust(', 'fn floats_and_ints_rust(')
body = '#[allow(clippy::too_many_arguments)]\n' + body if not body.startswith('#[allow') else body
body += '''/// [`floats_and_ints_rust`] generated for A64, the same operations in the
/// same order (so the same bits).
fn floats_and_ints() -> usize {
    a64_callee(3, || {
        let mut f = Func::<A64>::with_backend();
        let p = f.lambda("%f%d%i%d%d%d%d%d%f%d%f", Leaf::Yes).unwrap();
        let (acc, t, k) = (
            f.getreg::<D>(vcode::Class::Temp).unwrap(),
            f.getreg::<D>(vcode::Class::Temp).unwrap(),
            f.getreg::<D>(vcode::Class::Temp).unwrap(),
        );
        let sig = [Ty::F, Ty::D, Ty::I, Ty::D, Ty::D, Ty::D, Ty::D, Ty::D, Ty::F, Ty::D, Ty::F];
        for (n, ty) in sig.iter().enumerate() {
            match ty {
                Ty::F => f.cv(t, p.get::<F>(n).unwrap()),
                Ty::I => f.cv(t, p.get::<I>(n).unwrap()),
                _ => f.mov(t, p.get::<D>(n).unwrap()),
            }
            if n == 0 {
                f.mov(acc, t);
            } else {
                f.set(k, (n + 1) as f64);
                f.mul(t, k, t);
                f.add(acc, acc, t);
            }
        }
        f.ret(acc);
        f.end().unwrap()
    })
}

'''
src = src[:i] + body + src[j:]
src = src.replace('vcode::Callee::Native(floats_and_ints as *const () as usize)', 'vcode::Callee::Native(floats_and_ints())')
src = src.replace('let want = floats_and_ints(1.5,', 'let want = floats_and_ints_rust(1.5,')
open(ROOT + '/crates/vcode/tests/aarch64_regression.rs','w').write(src)
src = open(ROOT + '/crates/vcode/tests/differential.rs').read()
i = src.index('#[macro_use]')
header = '''//! The differential test of `differential.rs`, for the aarch64 backend:
//! random vcode programs run on the aarch64 backend under emulation
//! (`vcode::emu`, feature `emu`) and on the reference backend
//! parameterized by AAPCS64 must give identical results, in their return
//! values and in every byte of the memory they touch.
//!
//! The generator is `differential.rs`'s (see there for what programs mix:
//! every type and operation, conversions, extensions, branches, loops,
//! `jal` subroutines, loads and stores of every width with any offset,
//! locals, register classifications, register pressure to exhaustion),
//! restricted to what runs under emulation: **calls go only to the
//! generated callee** with its random signature (up to 8 integer and 11
//! float arguments, so the stack carries some), never to the Rust
//! `extern "C"` callbacks, since emulated A64 code cannot call host
//! x86-64 functions. Everything else is the same generator.
//!
//! The number of programs is `VCODE_DIFF_CASES` (default 2,000 here, to
//! keep the CI run short; the issue's 10,000 with `VCODE_DIFF_CASES=10000`).
//! Run: `cargo test -p vcode --features emu --test aarch64_differential`.

#![cfg(feature = "emu")]

'''
src = header + src[i:]
src = src.replace('''    Leaf, Local, Operand, P, Reference, Reg, Ty, Type, U, UL, Value, X64,
};''', '''    Leaf, Local, Operand, P, Reg, Ty, Type, U, UL, Value,
};
use vcode::aarch64::{A64, Aapcs64};

/// The reference backend with the aarch64 target's calling convention.
type Reference = vcode::reference::Reference<Aapcs64>;''')
src = re.sub(r'\bX64\b', 'A64', src)
src = src.replace('.disassemble()', '.listing()')
# only the generated callee
src = src.replace('''    fn call(&mut self) {
        let natives = natives();''', '''    fn call(&mut self) {
        // Under emulation only generated code can be called (see the
        // module documentation): no Rust callbacks.
        let natives: [Native; 0] = [];''')
# no iced decoding of A64 code
i = src.index('    // Every byte generated decodes as a valid instruction.')
j = src.index('    // Both backends run on identical buffer contents', i)
src = src[:i] + src[j:]
src = src.replace('.unwrap_or(10_000)', '.unwrap_or(2_000)')
src = src.replace('cargo test --test differential replay', 'cargo test -p vcode --features emu --test aarch64_differential replay')
open(ROOT + '/crates/vcode/tests/aarch64_differential.rs', 'w').write(src)
src = open(ROOT + '/crates/vcode/tests/aarch64_differential.rs').read()
i = src.index('// ---------------------------------------------------------------------------\n// Rust callbacks')
j = src.index('// ---------------------------------------------------------------------------\n// The generated callee')
src = src[:i] + '''/// A native callee (unused here: emulated code cannot call host functions).
#[allow(dead_code)]
struct Native {
    addr: usize,
    params: &'static [Ty],
    ret: Ty,
}

''' + src[j:]
open(ROOT + '/crates/vcode/tests/aarch64_differential.rs', 'w').write(src)
src = open(ROOT + '/crates/vcode/tests/aarch64_differential.rs').read()
src = src.replace('cb_count as *const () as usize', 'NEVER_CALLED')
src = src.replace('use std::sync::atomic::{AtomicU64, Ordering};\n', '''
/// A callee address for the typed-error tests, whose functions are
/// generated but never run.
const NEVER_CALLED: usize = 0x1000;
''')
open(ROOT + '/crates/vcode/tests/aarch64_differential.rs', 'w').write(src)

src = open(ROOT + '/crates/vcode/tests/aarch64_differential.rs').read()
src = src.replace("""        (a, b) => return Err(format!("native {a:?}, reference {b:?}\\n{}", ctx())),""",
"""        (a, b) => {
            let (pc, addr) = vcode::emu::last_stop();
            return Err(format!(
                "native {a:?} (pc {pc:#x}, code at {:#x}, access {addr:#x}), reference {b:?}\\n{}\\n{}",
                native.addr(),
                native.listing(),
                ctx()
            ));
        }""")
open(ROOT + '/crates/vcode/tests/aarch64_differential.rs', 'w').write(src)
src = open(ROOT + '/crates/vcode/tests/aarch64_differential.rs').read()
i = src.index('fn reference_reports_unallocated_registers')
j = src.index('fn both_report_unplaced_labels')
mid = src[i:j]
for a, b in [('"r10"', '"x6"'), ('"rax"', '"x8"'), ('"rbx"', '"x19"')]:
    mid = mid.replace(a, b)
src = src[:i] + mid + src[j:]
src = src.replace('.unwrap_or(2_000)', '.unwrap_or(10_000)')
src = src.replace("""//! The number of programs is `VCODE_DIFF_CASES` (default 2,000 here, to
//! keep the CI run short; the issue's 10,000 with `VCODE_DIFF_CASES=10000`).""",
"""//! The number of programs is `VCODE_DIFF_CASES`, 10,000 by default (about
//! 13 s in a debug build on the development machine, emulation included).
//! The reference backend names registers by their A64 names here.""")
open(ROOT + '/crates/vcode/tests/aarch64_differential.rs', 'w').write(src)
