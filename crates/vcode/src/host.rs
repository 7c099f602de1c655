//! The host register file and calling convention (x86-64 System V), as
//! data: register names, argument order, which registers the backends keep
//! for themselves, the fixed names `T<k>`/`S<k>`, and the order in which
//! `getreg` hands registers out.
//!
//! Both backends use this one description, so a program that runs on the
//! reference backend allocates exactly the registers it gets natively.

/// x86-64 integer register numbers, as encoded in ModRM/REX.
#[allow(missing_docs)]
pub mod gpr {
    pub const RAX: u8 = 0;
    pub const RCX: u8 = 1;
    pub const RDX: u8 = 2;
    pub const RBX: u8 = 3;
    pub const RSP: u8 = 4;
    pub const RBP: u8 = 5;
    pub const RSI: u8 = 6;
    pub const RDI: u8 = 7;
    pub const R8: u8 = 8;
    pub const R9: u8 = 9;
    pub const R10: u8 = 10;
    pub const R11: u8 = 11;
    pub const R12: u8 = 12;
    pub const R13: u8 = 13;
    pub const R14: u8 = 14;
    pub const R15: u8 = 15;
}

use gpr::*;

const GPR_NAMES: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];
const XMM_NAMES: [&str; 16] = [
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
    "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
];

/// The assembler name of a physical register.
pub fn reg_name(float: bool, n: u8) -> &'static str {
    let names = if float { &XMM_NAMES } else { &GPR_NAMES };
    names.get(n as usize).copied().unwrap_or("?")
}

/// Integer argument registers, in order.
pub const INT_ARGS: [u8; 6] = [RDI, RSI, RDX, RCX, R8, R9];
/// Float argument registers (xmm numbers), in order.
pub const FLOAT_ARGS: [u8; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

/// Registers the native backend keeps for itself: `rax` (return value,
/// division, scratch), `rcx` (shift counts), `r11` (long immediates,
/// parallel moves), and the stack and frame pointers.
pub const RESERVED_GPR: u16 = bit(RAX) | bit(RCX) | bit(R11) | bit(RSP) | bit(RBP);
/// Float registers the native backend keeps: `xmm15` (scratch).
pub const RESERVED_XMM: u16 = bit(15);

/// Integer registers the ABI makes callee-saved (besides `rbp`).
pub const CALLEE_SAVED_GPR: u16 = bit(RBX) | bit(R12) | bit(R13) | bit(R14) | bit(R15);

/// Number of fixed temporary integer names `T0..`.
pub const NUM_T: usize = 6;
/// Fixed temporaries: `r10`, then the argument registers from last to
/// first, so `T0` never aliases a parameter and `T<k>` aliases only the
/// last ones.
pub const FIXED_T: [u8; NUM_T] = [R10, R9, R8, RDX, RSI, RDI];
/// Number of fixed callee-saved integer names `S0..`.
pub const NUM_S: usize = 5;
/// Fixed callee-saved registers.
pub const FIXED_S: [u8; NUM_S] = [RBX, R12, R13, R14, R15];
/// Number of fixed float temporaries `T0..` for `f`/`d`.
pub const NUM_FT: usize = 15;
/// Fixed float temporaries: non-argument registers first.
pub const FIXED_FT: [u8; NUM_FT] = [8, 9, 10, 11, 12, 13, 14, 7, 6, 5, 4, 3, 2, 1, 0];

/// `getreg` order for integer temporaries: caller-saved registers that
/// carry no argument, then argument registers from the last, then the
/// callee-saved ones (which cost a save in the prologue).
pub const TEMP_ORDER: [u8; 11] = [R10, R9, R8, RDX, RSI, RDI, RBX, R12, R13, R14, R15];
/// `getreg` order for persistent integer registers in a non-leaf function.
pub const PERSIST_ORDER: [u8; 5] = [RBX, R12, R13, R14, R15];
/// `getreg` order for float registers (temporary or persistent): the
/// registers that carry no argument first.
pub const FLOAT_ORDER: [u8; 15] = FIXED_FT;

/// A one-bit mask for register `n`.
pub const fn bit(n: u8) -> u16 {
    1 << n
}

/// Frame offset (from `rbp`) of the slot where the prologue saves integer
/// register `n` when it is callee-saved and used.
pub const fn gpr_save_slot(n: u8) -> i32 {
    -8 * (n as i32 + 1)
}
/// Frame offset of the 16-byte slot where the prologue saves float
/// register `n` when a [`RegConfig`](crate::RegConfig) makes it callee-saved.
pub const fn xmm_save_slot(n: u8) -> i32 {
    -128 - 16 * (n as i32 + 1)
}
/// Frame offset of the slot where a call site keeps persistent float
/// register `n` (the ABI has no callee-saved float registers, so the
/// caller saves them around the call).
pub const fn xmm_call_slot(n: u8) -> i32 {
    -384 - 8 * (n as i32 + 1)
}
/// Bytes below `rbp` taken by the save slots above; locals start here.
pub const SAVE_AREA: i32 = 512;
