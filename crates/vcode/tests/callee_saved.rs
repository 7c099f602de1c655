//! A function that claims every register and writes each one returns to a
//! caller whose callee-saved registers (`rbx`, `r12` to `r15`, and `rbp`
//! and `rsp` themselves) hold what they held before the call: the caller
//! is a small assembly shim that loads distinct values into them, calls
//! the generated code, and reads them back. The jive JIT keeps its frame
//! pointer, fuel and context (and its busiest methods' homes) in such
//! registers for a whole invocation, and the host is compiled Rust that
//! relies on them across the call.
//!
//! The jive JIT's own contract (`RegConfig::keep_in_caller` for `r12` to
//! `r15`, which its host's `asm!` call declares clobbered): the entry saves
//! and restores `rbx`, `rbp` and `rsp` and nothing else, so the host's
//! values in `rbx` survive and those in `r12` to `r15` do not.

#![cfg(all(target_arch = "x86_64", unix))]

use vcode::host::gpr::{R12, R13, R14, R15, RAX, RDI};
use vcode::{Class, Func, L, Leaf, Reg, RegConfig, UL, X64};

/// `f(x)`: claims every persistent and then every temporary register,
/// writes `x + k` into the `k`-th, and returns the sum of them all (so no
/// write is dead), as the code of `X64`.
fn clobber_all() -> vcode::Code {
    clobber_all_in(RegConfig::default())
}

/// [`clobber_all`] with the register classes `cfg`.
fn clobber_all_in(cfg: RegConfig) -> vcode::Code {
    let mut f = Func::<X64>::with_backend();
    f.set_config(cfg);
    let x = f.lambda("%ul", Leaf::Yes).unwrap().get::<UL>(0).unwrap();
    let mut regs: Vec<Reg<UL>> = Vec::new();
    while let Ok(r) = f.getreg::<UL>(Class::Persistent) {
        regs.push(r);
    }
    while let Ok(r) = f.getreg::<UL>(Class::Temp) {
        regs.push(r);
    }
    for (k, &r) in regs.iter().enumerate() {
        f.add(r, x, k as i64 + 1);
    }
    let acc = regs[0];
    for &r in &regs[1..] {
        f.add(acc, acc, r);
    }
    f.ret(acc);
    f.end().unwrap()
}

/// Calls `entry(arg)` with `sent` in `rbx`, `r12`..`r15`; returns the
/// result and what those registers held after the call.
fn call_checking(entry: usize, arg: u64, sent: &[u64; 5]) -> (u64, [u64; 5]) {
    let mut after = [0u64; 5];
    let ret: u64;
    // SAFETY: the shim saves every register it loads (`rbx`, `r12`..`r15`
    // on the stack, `rbp` and `rsp` through `rbp`) and restores them before
    // it ends; it calls `entry` with a 16-byte aligned stack, and `entry`
    // is a function of one word argument that touches only its registers
    // and its own frame (`clobber_all`); `after` outlives the block.
    unsafe {
        core::arch::asm!(
            "push rbp",
            "mov rbp, rsp",
            "and rsp, -16",
            "push rbx",
            "push r12",
            "push r13",
            "push r14",
            "push r15",
            "push rdx",
            "mov rbx, [rsi]",
            "mov r12, [rsi + 8]",
            "mov r13, [rsi + 16]",
            "mov r14, [rsi + 24]",
            "mov r15, [rsi + 32]",
            "call r11",
            "pop rdx",
            "mov [rdx], rbx",
            "mov [rdx + 8], r12",
            "mov [rdx + 16], r13",
            "mov [rdx + 24], r14",
            "mov [rdx + 32], r15",
            "pop r15",
            "pop r14",
            "pop r13",
            "pop r12",
            "pop rbx",
            "mov rsp, rbp",
            "pop rbp",
            in("r11") entry,
            in("rsi") sent.as_ptr(),
            in("rdx") after.as_mut_ptr(),
            in("rdi") arg,
            lateout("rax") ret,
            clobber_abi("C"),
        );
    }
    (ret, after)
}

#[test]
fn a_function_using_every_register_keeps_the_callers_callee_saved_ones() {
    let code = clobber_all();
    let sent = [
        0x1111_2222_3333_4444,
        0x5555_6666_7777_8888,
        0x9999_aaaa_bbbb_cccc,
        0xdddd_eeee_ffff_0001,
        0x0123_4567_89ab_cdef,
    ];
    for arg in [0u64, 7, u64::MAX] {
        let (ret, after) = call_checking(code.addr(), arg, &sent);
        assert_eq!(after, sent, "arg {arg}\n{}", code.disassemble());
        let n = code_regs();
        let want = (0..n as u64).fold(0u64, |a, k| a.wrapping_add(arg.wrapping_add(k + 1)));
        assert_eq!(ret, want, "arg {arg}");
    }
}

/// How many registers `clobber_all` claims.
fn code_regs() -> usize {
    let mut f = Func::<X64>::with_backend();
    let _ = f.lambda("%ul", Leaf::Yes).unwrap();
    let mut n = 0;
    while f.getreg::<L>(Class::Persistent).is_ok() {
        n += 1;
    }
    while f.getreg::<L>(Class::Temp).is_ok() {
        n += 1;
    }
    n
}

/// The jive JIT's entry contract: `r12` to `r15` kept by the caller.
fn jit_entry_config() -> RegConfig {
    let mut cfg = RegConfig::default();
    for n in [R12, R13, R14, R15] {
        cfg.keep_in_caller(n).unwrap();
    }
    cfg
}

#[test]
fn a_function_whose_caller_keeps_r12_to_r15_saves_only_rbx() {
    let code = clobber_all_in(jit_entry_config());
    let sent = [
        0x1111_2222_3333_4444,
        0x5555_6666_7777_8888,
        0x9999_aaaa_bbbb_cccc,
        0xdddd_eeee_ffff_0001,
        0x0123_4567_89ab_cdef,
    ];
    let n = code_regs();
    for arg in [0u64, 7, u64::MAX] {
        let (ret, after) = call_checking(code.addr(), arg, &sent);
        let dis = code.disassemble();
        // `rbx` (which an `asm!` caller cannot name) is restored; `rbp`
        // and `rsp` too, or the shim would not have come back.
        assert_eq!(after[0], sent[0], "rbx, arg {arg}\n{dis}");
        // The others hold what the code wrote: not saved, so not
        // restored (the saves the caller's contract removes).
        for (k, (&a, &s)) in after[1..].iter().zip(&sent[1..]).enumerate() {
            assert_ne!(a, s, "r{} was restored, arg {arg}\n{dis}", 12 + k);
        }
        let want = (0..n as u64).fold(0u64, |a, k| a.wrapping_add(arg.wrapping_add(k + 1)));
        assert_eq!(ret, want, "arg {arg}");
    }
    // The entry is shorter than the C convention's by the four saves and
    // four restores.
    assert!(code.len() < clobber_all().len(), "{}", code.disassemble());
}

#[test]
fn only_a_callee_saved_register_can_be_kept_by_the_caller() {
    let mut cfg = RegConfig::default();
    assert!(cfg.keep_in_caller(RAX).is_err());
    assert!(cfg.keep_in_caller(RDI).is_err());
    // No such register: refused, not a shift past the mask's width.
    for n in [16, 31, 255] {
        assert!(cfg.keep_in_caller(n).is_err(), "register {n}");
        assert!(!cfg.kept_in_caller(n));
    }
    assert!(!cfg.kept_in_caller(R12));
    cfg.keep_in_caller(R12).unwrap();
    assert!(cfg.kept_in_caller(R12));
    // Reclassified, it is no longer kept.
    cfg.set_gpr(R12, vcode::RegClass::CallerSaved).unwrap();
    assert!(!cfg.kept_in_caller(R12));
    assert!(cfg.keep_in_caller(R12).is_err());
}
