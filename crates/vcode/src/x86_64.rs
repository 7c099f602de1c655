//! The x86-64 backend: vcode instructions to machine code, in place.
//!
//! Like sljit's `sljitNative*.c` and TCG's per-target files, this file has
//! a fixed shape that a new target copies section by section, in order:
//!
//! 1. **Registers and classes**: [`regfile`], the register file as data
//!    (numbers, names, the registers the backend keeps, callee-saved ones,
//!    the fixed names, `getreg`'s order, save slots, from `slots.rs`). It imports nothing else;
//!    [`crate::host`] re-exports it for the allocator and `Reg::t`.
//! 2. **Calling convention**: [`SysV`], the [`CallConv`] the target-neutral
//!    parts of vcode (the reference backend, `lambda`) see: its tables
//!    ([`ConvTables`]), and calls into native code with a run-time
//!    signature.
//! 3. **Encoders**: the backend's state ([`X64`]) and the byte-level
//!    encoding helpers (REX/ModRM/SIB, immediates, moves, float
//!    constants), with the encodings the shared sequences of `common.rs`
//!    call (a call's argument placement, the entry's parameter moves, a
//!    call).
//! 4. **Instruction methods**: the [`Backend`] implementation, one method
//!    per vcode instruction: arithmetic, `set`, conversions, loads, stores,
//!    locals, calls, data (the methods every native target writes alike
//!    are shared). Branches, entry and exit delegate to 5 and 6.
//! 5. **Branches and fixups**: labels, branches, jumps, jump tables, and
//!    the forward references, chained through their rel32 fields and
//!    patched when their label is placed (`end` patches the returns and
//!    the jump tables).
//! 6. **Prologue, epilogue and `end`**: the per-function reset, returns,
//!    and `end` (the frame's encoding, backpatching, constants, linking
//!    into executable memory), and [`Code`]'s disassembly.
//! 7. **Extensions**: the native encoders the `ext` tables use.
//!
//! The calling convention is System V. Registers `rax`, `rcx`, `r11` and
//! `xmm15` are kept by the backend for its own sequences (division,
//! shift counts, long immediates, parallel moves), as are `rsp` and `rbp`.
//!
//! ## Semantics chosen where C leaves them open
//!
//! * Shifts use the count modulo the width (32 or 64), as the hardware does.
//! * Integer division and `mod` by zero, and signed `INT_MIN / -1` or
//!   `LONG_MIN / -1` (and their `mod`), execute `idiv`/`div` and raise the
//!   processor's divide error, which Linux delivers as `SIGFPE`: exactly
//!   what C compiled for x86-64 does. A division by an *immediate* zero is
//!   rejected at generation time. The reference backend reports both as
//!   typed errors instead.
//! * Float to integer conversions truncate toward zero, exactly for every
//!   value the target type can hold. Outside that range (C leaves it
//!   undefined): to `i`/`l`, NaN and out-of-range values give the
//!   hardware's "integer indefinite" (`0x80000000`, `0x8000000000000000`);
//!   to `u`, the low 32 bits of the 64-bit truncation (so `-1.0` gives
//!   `0xffffffff`); to `ul`, values at or above 2^64 give 0, NaN gives
//!   2^63, and negative values the two's complement of their truncation.
//! * Float comparisons follow C: every ordered comparison with a NaN is
//!   false and `!=` is true.

use crate::abi::{ArgLoc, CallConv, ConvTables, InvokeError};
use crate::backend::{
    Arg, Backend, BinOp, Callee, Cond, LocalOp, MAX_CALL_ARGS, Src, Target, UnOp,
};
use crate::buf::Buf;
use crate::code::Parts;
use crate::common::{
    ArgEmit, CallEmit, FuncState, check_tables, emit_call, native_backend_methods, parallel_move,
};
use crate::error::{Error, ErrorKind};
use crate::mem::ExecMemory;
use crate::regs::RegAlloc;
use crate::sig::Signature;
use crate::ty::{AnyReg, Label, Ty, Value};
use regfile::gpr::*;

// ===========================================================================
// 1. Registers and classes
// ===========================================================================

/// The register file as data: register numbers and names, the registers
/// the backend keeps, the callee-saved ones, the fixed names `T<k>`/`S<k>`,
/// the order in which `getreg` hands registers out, and the frame slots
/// where they are saved. It imports only the shared save slots (`slots.rs`): the target-neutral allocator
/// and [`Reg::t`](crate::Reg::t) read it as [`crate::host`] on an x86-64 host.
pub mod regfile {
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

    /// The assembler names of the integer registers, by number.
    pub const GPR_NAMES: [&str; 16] = [
        "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15",
    ];
    /// The assembler names of the float registers, by number.
    pub const XMM_NAMES: [&str; 16] = [
        "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
    ];

    /// The names of both files (integer, float), as
    /// [`host::reg_name`](crate::host::reg_name) and the convention's
    /// tables read them.
    pub const NAMES: [&[&str; 16]; 2] = [&GPR_NAMES, &XMM_NAMES];

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

    /// `bit` and the frame's save slots, the same on every target.
    pub use crate::slots::*;
}

/// Float scratch register.
const XTMP: u8 = 15;

// ===========================================================================
// 2. Calling convention
// ===========================================================================

/// System V x86-64, the calling convention of this target, as the
/// target-neutral parts of vcode see it (the reference backend, `lambda`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SysV;

impl CallConv for SysV {
    fn get() -> &'static Self {
        &SysV
    }

    fn tables(&self) -> &'static ConvTables {
        &TABLES
    }

    fn check_call(&self, args: &[Value]) -> Result<(), InvokeError> {
        if args.iter().filter(|a| !a.ty().is_float()).count() > 6 + STACK_SLOTS
            || args.len() > 6 + 8 + STACK_SLOTS
        {
            return Err(InvokeError::Arity {
                expected: 6 + 8 + STACK_SLOTS,
                found: args.len(),
            });
        }
        Ok(())
    }

    unsafe fn call(&self, addr: usize, args: &[Value], ret: Ty) -> Value {
        // SAFETY: forwarded from the caller (the trait's contract).
        unsafe { call_native(addr, args, ret) }
    }
}

/// The convention's tables, which [`CallConv`]'s methods and the
/// argument layout read.
const TABLES: ConvTables = ConvTables {
    name: "System V x86-64",
    int_args: &regfile::INT_ARGS,
    float_args: &regfile::FLOAT_ARGS,
    reserved: [regfile::RESERVED_GPR, regfile::RESERVED_XMM],
    callee_saved: [regfile::CALLEE_SAVED_GPR, 0],
    names: regfile::NAMES,
};

/// Stack slots [`call_native`] can pass: enough for every call vcode
/// accepts ([`MAX_CALL_ARGS`] arguments, at
/// least 6 of them in integer registers or at most 8 in float ones).
pub const STACK_SLOTS: usize = 26;
const _: () = assert!(STACK_SLOTS >= MAX_CALL_ARGS - 6);

type Wide<R> = extern "C" fn(
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    f64,
    f64,
    f64,
    f64,
    f64,
    f64,
    f64,
    f64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
    u64,
) -> R;

/// Calls the code at `addr` with `args`, returning a value of type `ret`.
///
/// It calls through one wide signature: six integer registers, eight
/// float registers and 26 stack slots. Under System V, integer and
/// float arguments are assigned to their registers independently and the
/// rest go to the stack in order, so filling exactly the registers and
/// slots the real signature uses, and leaving the others unused, passes
/// the arguments as the callee expects; the caller owns and pops the
/// extra stack slots. `f` values travel in the low 32 bits of an xmm
/// register or stack slot, integers of 32 bits in the low half of theirs.
///
/// # Safety
/// `addr` must be a function whose parameter types are the types of
/// `args` (checked by [`check_args`](crate::abi::check_args)) and whose return type is `ret`, and
/// calling it must be sound.
pub unsafe fn call_native(addr: usize, args: &[Value], ret: Ty) -> Value {
    let mut tys = [Ty::V; crate::ty::MAX_PARAMS];
    for (t, a) in tys.iter_mut().zip(args) {
        *t = a.ty();
    }
    let mut g = [0u64; 6];
    let mut x = [0f64; 8];
    let mut s = [0u64; STACK_SLOTS];
    for (a, loc) in args.iter().zip(TABLES.layout(&tys[..args.len()])) {
        match loc {
            ArgLoc::Reg(n) if a.ty().is_float() => x[n as usize] = f64::from_bits(a.bits()),
            ArgLoc::Reg(n) => {
                let i = regfile::INT_ARGS.iter().position(|&r| r == n).unwrap_or(0);
                g[i] = a.bits();
            }
            // In range: at most MAX_CALL_ARGS - 6 arguments go on the stack.
            ArgLoc::Stack(k) => s[k] = a.bits(),
        }
    }
    macro_rules! go {
        ($r:ty) => {{
            // SAFETY: see the function documentation: the wide signature
            // passes exactly the registers and slots the callee reads.
            let f: Wide<$r> = unsafe { std::mem::transmute::<usize, Wide<$r>>(addr) };
            f(
                g[0], g[1], g[2], g[3], g[4], g[5], x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
                s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10], s[11], s[12],
                s[13], s[14], s[15], s[16], s[17], s[18], s[19], s[20], s[21], s[22], s[23], s[24],
                s[25],
            )
        }};
    }
    if ret.is_float() {
        let bits = go!(f64).to_bits();
        Value::from_bits(
            ret,
            if ret == Ty::F {
                bits & 0xffff_ffff
            } else {
                bits
            },
        )
    } else {
        let bits = go!(u64);
        let bits = match ret {
            Ty::I | Ty::U => bits & 0xffff_ffff,
            _ => bits,
        };
        Value::from_bits(ret, bits)
    }
}

// ===========================================================================
// 3. Encoders
// ===========================================================================

/// Default limit on one function's code size.
pub const DEFAULT_LIMIT: usize = 64 << 20;

/// The x86-64 backend's per-function state.
pub struct X64 {
    pub(crate) buf: Buf,
    /// One word per label (see [`UNPLACED`]).
    labels: Vec<u32>,
    /// Labels referenced before being placed and not placed yet.
    pending: u32,
    /// The first forward references whose instruction index does not fit
    /// in a chain's tail word (see [`TAIL`]): `(label, index, kind)`.
    far_firsts: Vec<(u32, u32, u8)>,
    /// The chain of `jmp epilogue` rel32 fields (see [`LabelSlot::head`]).
    ret_head: u32,
    /// Jump-table slots (`at` is the slot), filled with absolute addresses.
    tables: Vec<Fixup>,
    /// The rip-relative displacements that refer to the constant pool
    /// (placed after the code).
    pool_refs: Vec<(u32, u32)>,
    /// The state every native target keeps: pool, locals, frame, return
    /// type, alignment, executable memory.
    st: FuncState,
    /// Start of the last `jmp epilogue` and the chain of returns before
    /// it (what its rel32 field links to), for `end` to drop the jump if
    /// it ends the body.
    last_ret: Option<(usize, u32)>,
    /// The frames written lately, for `end` to copy rather than derive.
    frames: Box<[FrameSlot; FRAME_SLOTS]>,
    /// The returns that take the epilogue in place
    /// ([`X64::ret_zero_with`]): where each one's room starts, and how
    /// many bytes it has (`int3`s until `end` writes the epilogue there,
    /// or a `jmp epilogue` where the epilogue is longer).
    inline_rets: Vec<(u32, u8)>,
    /// The locals' bytes a client framing its functions from the stack
    /// pointer allows ([`X64::frame_from_sp`]); `None` for the ordinary
    /// frame, through `rbp`.
    sp_locals: Option<u32>,
    /// The frame size of the function being written when it is framed
    /// from the stack pointer (fixed at `lambda`, from `sp_locals`), or 0
    /// for the ordinary frame.
    sp_size: u32,
}

const fn jcc(c: Cond, signed: bool) -> u8 {
    match (c, signed) {
        (Cond::Lt, true) => 0x0C,
        (Cond::Le, true) => 0x0E,
        (Cond::Gt, true) => 0x0F,
        (Cond::Ge, true) => 0x0D,
        (Cond::Lt, false) => 0x02,
        (Cond::Le, false) => 0x06,
        (Cond::Gt, false) => 0x07,
        (Cond::Ge, false) => 0x03,
        (Cond::Eq, _) => 0x04,
        (Cond::Ne, _) => 0x05,
    }
}

const CC_E: u8 = 0x04;
const CC_NE: u8 = 0x05;
const CC_A: u8 = 0x07;
const CC_AE: u8 = 0x03;
const CC_P: u8 = 0x0A;
const CC_S: u8 = 0x08;

#[inline(always)]
const fn fits8(v: i64) -> bool {
    v as i8 as i64 == v
}
#[inline(always)]
const fn fits32(v: i64) -> bool {
    v as i32 as i64 == v
}

/// The register fields of `rr` per register pair, indexed by
/// `reg << 4 | rm` for a 1-byte (`[0]`) and a 2-byte (`[1]`) opcode: the
/// REX.R and REX.B bits in the low byte and the ModRM byte (mod 11) where
/// it goes after the REX byte and the opcode.
///
/// A `const` and read through a promoted reference, not a `static`: a
/// static of this crate is opaque to the optimizer of a client crate, so
/// its entries would not fold for constant registers (the fixed names).
const RR_FRAG: &[[u32; 256]; 2] = &{
    let mut t = [[0u32; 256]; 2];
    let mut i = 0;
    while i < 256 {
        let (reg, rm) = ((i >> 4) as u32, (i & 15) as u32);
        let rex = (reg >> 3) << 2 | rm >> 3;
        let modrm = 0xc0 | (reg & 7) << 3 | (rm & 7);
        t[0][i] = rex | modrm << 16;
        t[1][i] = rex | modrm << 24;
        i += 1;
    }
    t
};

/// The register fields of [`X64::rm_sib`] per register and base,
/// indexed by `reg << 4 | base` for a 1-byte (`[0]`) and a 2-byte (`[1]`)
/// opcode: the REX.R and REX.B bits, the ModRM byte (mod 00, rm 100: a
/// SIB byte follows) and the SIB byte (no index, the base), each where it
/// goes after the REX byte and the opcode; bit 63 is set for the bases
/// (`rbp`, `r13`) that need a displacement even when it is 0.
const RM_FRAG: &[[u64; 256]; 2] = &{
    let mut t = [[0u64; 256]; 2];
    let mut i = 0;
    while i < 256 {
        let (reg, base) = ((i >> 4) as u64, (i & 15) as u64);
        let rex = (reg >> 3) << 2 | base >> 3;
        let modrm = (reg & 7) << 3 | 4;
        let sib = 0x20 | (base & 7);
        let bp = ((base & 7) == 5) as u64;
        t[0][i] = rex | modrm << 16 | sib << 24 | bp << 63;
        t[1][i] = rex | modrm << 24 | sib << 32 | bp << 63;
        i += 1;
    }
    t
};

/// The index fields of a SIB byte per index register, for a 1-byte
/// (`[0]`) and a 2-byte (`[1]`) opcode: REX.X, and the SIB's index bits
/// as an `xor` onto [`RM_FRAG`]'s SIB (whose index field is 100, none),
/// where the SIB goes after the REX byte, the opcode and the ModRM byte.
const X_FRAG: &[[u64; 16]; 2] = &{
    let mut t = [[0u64; 16]; 2];
    let mut x = 0;
    while x < 16 {
        let rex_x = ((x as u64) >> 3) << 1;
        let idx = ((x as u64 & 7) << 3) ^ 0x20;
        t[0][x] = rex_x | idx << 24;
        t[1][x] = rex_x | idx << 32;
        x += 1;
    }
    t
};

/// The index of a register pair in [`RR_FRAG`] and [`RM_FRAG`]: `(a & 15)
/// << 4 | (b & 15)`, computed in a byte (the shift drops the high bits of
/// `a` by itself), so that it is one shift, one `and` and one `or`.
#[inline(always)]
const fn pair(a: u8, b: u8) -> usize {
    (a << 4 | b & 15) as usize
}

/// Group-1 ALU operations: `/digit` and the `op r/m, reg` opcode.
#[derive(Copy, Clone)]
enum Alu {
    Add = 0,
    Or = 1,
    And = 4,
    Sub = 5,
    Xor = 6,
    Cmp = 7,
}

impl X64 {
    /// `[pfx] REX opc modrm(11, reg, rm)`; `opc` has `olen` bytes (1 or 2).
    ///
    /// The REX prefix is always written (`0x40` when no bit is set: harmless
    /// in front of these forms, and it makes `spl`..`dil` the byte
    /// registers, which is what a byte form means), so the length is a
    /// constant, and the REX bits and ModRM byte of a register pair come
    /// precomputed from [`RR_FRAG`]: with run-time register numbers an
    /// instruction is a table load and an `or` (constant registers fold).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn rr(&mut self, pfx: u8, w: bool, opc: u32, olen: usize, reg: u8, rm: u8, byte_regs: bool) {
        let _ = byte_regs; // REX is always present: spl..dil, never ah..bh.
        let frag = RR_FRAG[olen - 1][pair(reg, rm)] as u64;
        let mut word = frag | 0x40 | (w as u64) << 3 | (opc as u64) << 8;
        let mut len = olen + 2;
        if pfx != 0 {
            word = pfx as u64 | word << 8;
            len += 1;
        }
        self.buf.put(word, len);
    }

    /// [`rr`](X64::rr) followed by an immediate of `ilen` bytes (1 or 4),
    /// written with the instruction in one store when they fit in 8 bytes.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn rr_imm(
        &mut self,
        pfx: u8,
        w: bool,
        opc: u32,
        olen: usize,
        reg: u8,
        rm: u8,
        imm: u32,
        ilen: usize,
    ) {
        let frag = RR_FRAG[olen - 1][pair(reg, rm)] as u64;
        let mut word = frag | 0x40 | (w as u64) << 3 | (opc as u64) << 8;
        let mut len = olen + 2;
        if pfx != 0 {
            word = pfx as u64 | word << 8;
            len += 1;
        }
        if len + ilen <= 8 {
            let imm = if ilen == 1 {
                imm as u8 as u64
            } else {
                imm as u64
            };
            self.buf.put(word | imm << (8 * len), len + ilen);
        } else {
            self.buf.put(word, len);
            self.buf.put(imm as u64, ilen);
        }
    }

    /// `[pfx] REX opc modrm sib disp` for `[base + index + disp]`.
    ///
    /// Built like [`rr`](X64::rr): `REX opc modrm sib disp8` in one word
    /// from tables (see [`rm_sib`](X64::rm_sib)), written with one store
    /// when it fits in 8 bytes.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn rm(
        &mut self,
        pfx: u8,
        w: bool,
        opc: u32,
        olen: usize,
        reg: u8,
        base: u8,
        index: Option<u8>,
        disp: i32,
        byte_regs: bool,
    ) {
        self.rm_scaled(pfx, w, opc, olen, reg, base, index, 0, disp, byte_regs)
    }

    /// [`rm`](X64::rm) for `[base + index * 2^scale_log2 + disp]` (the
    /// indexed loads and stores of [`Indexed`](crate::ext::Indexed)).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn rm_scaled(
        &mut self,
        pfx: u8,
        w: bool,
        opc: u32,
        olen: usize,
        reg: u8,
        base: u8,
        index: Option<u8>,
        scale_log2: u8,
        disp: i32,
        byte_regs: bool,
    ) {
        let _ = byte_regs; // REX is always present, as in `rr`.
        let xw = match index {
            None => 0,
            Some(x) => {
                X_FRAG[olen - 1][x as usize & 15] | (scale_log2 as u64 & 3) << (8 * olen + 22)
            }
        };
        self.rm_sib(pfx, w, opc, olen, reg, base, xw, disp)
    }

    /// `[pfx] REX opc modrm sib disp` for `[base + index * 2^scale +
    /// disp]`, the index none when `xw` is 0: the SIB byte is always
    /// written (index field 100 without an index), which is valid for every
    /// base, so the layout is fixed and the register fields come from
    /// [`RM_FRAG`], an index's fields (`xw`) from [`X_FRAG`] and the scale
    /// applied onto it; only a zero displacement from `rbp`/`r13` still
    /// takes a `disp8` of 0.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn rm_sib(
        &mut self,
        pfx: u8,
        w: bool,
        opc: u32,
        olen: usize,
        reg: u8,
        base: u8,
        xw: u64,
        disp: i32,
    ) {
        let f = RM_FRAG[olen - 1][pair(reg, base)];
        let bp = f >> 63;
        let at = 8 * olen + 8;
        let mut word = ((f & !(1 << 63)) ^ xw) | 0x40 | (w as u64) << 3 | (opc as u64) << 8;
        let mut len = olen + 3;
        if disp == 0 {
            // mod 00, or mod 01 with a disp8 of 0 for rbp/r13.
            word |= bp << (at + 6);
            len += bp as usize;
        } else if fits8(disp as i64) {
            word |= 1 << (at + 6) | (disp as u8 as u64) << (8 * len);
            len += 1;
        } else {
            word |= 2 << (at + 6);
        }
        if pfx != 0 {
            word = pfx as u64 | word << 8;
            len += 1;
        }
        if disp != 0 && !fits8(disp as i64) {
            if len + 4 <= 8 {
                word |= (disp as u32 as u64) << (8 * len);
                len += 4;
            } else {
                self.buf.put(word, len);
                return self.buf.put4(disp as u32);
            }
        }
        self.buf.put(word, len);
    }

    /// `[pfx] [REX] opc modrm(00, reg, 101) disp32` referring to pool entry `idx`.
    #[inline]
    fn rip(&mut self, pfx: u8, w: bool, opc: u32, olen: usize, reg: u8, idx: u32) {
        let mut word = 0u64;
        let mut n = 0;
        if pfx != 0 {
            word = pfx as u64;
            n = 8;
        }
        let rex = 0x40 | (w as u8) << 3 | ((reg >> 3) & 1) << 2;
        if rex != 0x40 {
            word |= (rex as u64) << n;
            n += 8;
        }
        word |= (opc as u64) << n;
        n += 8 * olen;
        word |= (((reg & 7) << 3 | 5) as u64) << n;
        self.buf.put(word, n / 8 + 1);
        self.pool_refs.push((self.buf.pos() as u32, idx));
        self.buf.put4(0);
    }

    fn pool_const(&mut self, bits: u64) -> u32 {
        let b = bits.to_le_bytes();
        if let Some(i) = self.st.pool.chunks_exact(8).position(|c| c == b) {
            return i as u32;
        }
        self.st.pool.extend_from_slice(&b);
        (self.st.pool.len() / 8 - 1) as u32
    }

    /// `mov rd, rs` (32- or 64-bit).
    #[inline(always)]
    fn mov(&mut self, w: bool, rd: u8, rs: u8) {
        if rd != rs {
            self.rr(0, w, 0x89, 1, rs, rd, false);
        }
    }

    /// `movaps rd, rs` (any float).
    #[inline(always)]
    fn fmov(&mut self, rd: u8, rs: u8) {
        if rd != rs {
            self.rr(0, false, 0x280f, 2, rd, rs, false);
        }
    }

    /// Loads an integer constant into `rd`, as short as possible.
    #[inline(always)]
    fn movi(&mut self, w: bool, rd: u8, v: i64) {
        if !w || v as u64 <= u32::MAX as u64 {
            let v = v as u32;
            if v == 0 {
                self.rr(0, false, 0x31, 1, rd, rd, false); // xor r32, r32
            } else {
                // mov r32, imm32 (REX B8+r): REX always, as in `rr`, for one
                // length and one store.
                let op = 0x40 | (rd as u64 >> 3 & 1) | (0xb8 | (rd as u64 & 7)) << 8;
                self.buf.put(op | (v as u64) << 16, 6);
            }
        } else if fits32(v) {
            // mov r/m64, simm32
            self.rr_imm(0, true, 0xc7, 1, 0, rd, v as u32, 4);
        } else {
            // movabs r64, imm64
            self.buf.put(
                (0x48 | (rd >> 3)) as u64 | ((0xb8 | (rd & 7)) as u64) << 8,
                2,
            );
            self.buf.put(v as u64, 8);
        }
    }

    /// `op rd, rs` for group-1 operations.
    #[inline(always)]
    fn alu_rr(&mut self, op: Alu, w: bool, rd: u8, rs: u8) {
        self.rr(0, w, (op as u32) << 3 | 1, 1, rs, rd, false);
    }

    /// `op rd, imm32` for group-1 operations (imm8 form when it fits).
    #[inline(always)]
    fn alu_ri(&mut self, op: Alu, w: bool, rd: u8, v: i32) {
        if fits8(v as i64) {
            self.rr_imm(0, w, 0x83, 1, op as u8, rd, v as u32, 1);
        } else {
            self.rr_imm(0, w, 0x81, 1, op as u8, rd, v as u32, 4);
        }
    }

    /// Emits a short forward jump whose rel8 is filled in by `bind8`.
    #[inline]
    fn jcc8(&mut self, cc: Option<u8>) -> usize {
        self.buf.put(cc.map_or(0xeb, |c| 0x70 | c) as u64, 2);
        self.buf.pos() - 1
    }

    #[inline]
    fn bind8(&mut self, at: usize) {
        let rel = self.buf.pos() - (at + 1);
        debug_assert!(rel < 128);
        self.buf.patch1(at, rel as u8);
    }

    /// Gets `b` into a register: itself, or `r11` holding the immediate.
    #[inline(always)]
    fn src_reg(&mut self, w: bool, b: Src) -> u8 {
        match b {
            Src::R(r) => r,
            Src::I(v) => {
                self.movi(w, R11, v);
                R11
            }
        }
    }

    /// The memory operand for `base + off`: `(index, disp)`.
    #[inline(always)]
    fn addr(&mut self, off: Src) -> (Option<u8>, i32) {
        match off {
            Src::I(v) if fits32(v) => (None, v as i32),
            Src::I(v) => {
                self.movi(true, R11, v);
                (Some(R11), 0)
            }
            // rsp cannot be an index register; it never holds a client
            // value, but a raw `Reg::phys` could name it.
            Src::R(RSP) => {
                self.mov(true, R11, RSP);
                (Some(R11), 0)
            }
            Src::R(r) => (Some(r), 0),
        }
    }
}

impl X64 {
    /// The conversions involving a float register (out of line).
    fn cvt_float(&mut self, m: &'static str, from: Ty, to: Ty, rd: u8, rs: u8) {
        self.buf.insn(m);
        let sd = |t: Ty| if t == Ty::F { 0xf3u8 } else { 0xf2 };
        match (from.is_float(), to.is_float()) {
            (false, false) => unreachable!("integer conversions are inline in `cvt`"),
            (true, true) => {
                if from == to {
                    self.fmov(rd, rs);
                } else {
                    // cvtss2sd / cvtsd2ss
                    self.rr(sd(from), false, 0x5a0f, 2, rd, rs, false);
                }
            }
            (false, true) => {
                if from == Ty::P {
                    return self.buf.fail(
                        m,
                        ErrorKind::UnsupportedType {
                            insn: "cv",
                            ty: from,
                        },
                    );
                }
                let p = sd(to);
                self.rr(0, false, 0x570f, 2, rd, rd, false); // xorps: break the dependency
                match from {
                    Ty::I => self.rr(p, false, 0x2a0f, 2, rd, rs, false),
                    Ty::U => {
                        self.mov(false, R11, rs);
                        self.rr(p, true, 0x2a0f, 2, rd, R11, false);
                    }
                    Ty::L => self.rr(p, true, 0x2a0f, 2, rd, rs, false),
                    _ => {
                        // ul: halve values >= 2^63 keeping the low bit, convert, double.
                        self.rr(0, true, 0x85, 1, rs, rs, false); // test rs, rs
                        let big = self.jcc8(Some(CC_S));
                        self.rr(p, true, 0x2a0f, 2, rd, rs, false);
                        let done = self.jcc8(None);
                        self.bind8(big);
                        self.mov(true, R11, rs);
                        self.rr(0, true, 0xd1, 1, 5, R11, false); // shr r11, 1
                        self.mov(false, RAX, rs);
                        self.alu_ri(Alu::And, false, RAX, 1);
                        self.alu_rr(Alu::Or, true, R11, RAX);
                        self.rr(p, true, 0x2a0f, 2, rd, R11, false);
                        self.rr(p, false, 0x580f, 2, rd, rd, false); // add rd, rd
                        self.bind8(done);
                    }
                }
            }
            (true, false) => {
                if to == Ty::P {
                    return self
                        .buf
                        .fail(m, ErrorKind::UnsupportedType { insn: "cv", ty: to });
                }
                let p = sd(from);
                match to {
                    Ty::I => self.rr(p, false, 0x2c0f, 2, rd, rs, false),
                    Ty::L | Ty::U => self.rr(p, true, 0x2c0f, 2, rd, rs, false),
                    _ => {
                        // ul: values >= 2^63 are converted after subtracting 2^63.
                        let two63 = if from == Ty::F {
                            0x5f00_0000u64
                        } else {
                            0x43e0_0000_0000_0000
                        };
                        let idx = self.pool_const(two63);
                        let pfx = if from == Ty::F { 0 } else { 0x66 };
                        self.rip(pfx, false, 0x2e0f, 2, rs, idx); // ucomis rs, [2^63]
                        let big = self.jcc8(Some(CC_AE));
                        self.rr(p, true, 0x2c0f, 2, rd, rs, false);
                        let done = self.jcc8(None);
                        self.bind8(big);
                        self.fmov(XTMP, rs);
                        self.rip(p, false, 0x5c0f, 2, XTMP, idx); // sub xmm15, [2^63]
                        self.rr(p, true, 0x2c0f, 2, rd, XTMP, false);
                        self.rr(0, true, 0xba0f, 2, 7, rd, false); // btc rd, 63
                        self.buf.put1(63);
                        self.bind8(done);
                    }
                }
            }
        }
    }

    fn fbinop(&mut self, op: BinOp, ty: Ty, rd: u8, a: u8, b: Src) {
        let Src::R(b) = b else {
            return self.buf.fail(
                op.name(),
                ErrorKind::UnsupportedType {
                    insn: "float immediate operand",
                    ty,
                },
            );
        };
        let opc = match op {
            BinOp::Add => 0x580f,
            BinOp::Mul => 0x590f,
            BinOp::Sub => 0x5c0f,
            BinOp::Div => 0x5e0f,
            _ => {
                return self.buf.fail(
                    op.name(),
                    ErrorKind::UnsupportedType {
                        insn: op.name(),
                        ty,
                    },
                );
            }
        };
        let p = if ty == Ty::F { 0xf3 } else { 0xf2 };
        self.sse3(p, opc, matches!(op, BinOp::Add | BinOp::Mul), rd, a, b);
    }

    /// `rd = a op b` for a two-address SSE scalar operation (prefix `p`,
    /// opcode `opc`): `a` is copied into `rd` first, through `xmm15` when
    /// `rd` holds `b` and the operation does not commute.
    fn sse3(&mut self, p: u8, opc: u32, commutes: bool, rd: u8, a: u8, b: u8) {
        if rd == a {
            self.rr(p, false, opc, 2, rd, b, false);
        } else if rd == b && commutes {
            self.rr(p, false, opc, 2, rd, a, false);
        } else if rd == b {
            self.fmov(XTMP, b);
            self.fmov(rd, a);
            self.rr(p, false, opc, 2, rd, XTMP, false);
        } else {
            self.fmov(rd, a);
            self.rr(p, false, opc, 2, rd, b, false);
        }
    }

    #[inline(always)]
    fn load_at(&mut self, mem: Ty, rd_ty: Ty, rd: u8, base: u8, index: Option<u8>, disp: i32) {
        let w = rd_ty.is_64();
        match mem {
            Ty::C => self.rm(0, w, 0xbe0f, 2, rd, base, index, disp, false),
            Ty::UC => self.rm(0, false, 0xb60f, 2, rd, base, index, disp, false),
            Ty::S => self.rm(0, w, 0xbf0f, 2, rd, base, index, disp, false),
            Ty::US => self.rm(0, false, 0xb70f, 2, rd, base, index, disp, false),
            Ty::I | Ty::U => self.rm(0, false, 0x8b, 1, rd, base, index, disp, false),
            Ty::L | Ty::UL | Ty::P => self.rm(0, true, 0x8b, 1, rd, base, index, disp, false),
            Ty::F => self.rm(0xf3, false, 0x100f, 2, rd, base, index, disp, false),
            Ty::D => self.rm(0xf2, false, 0x100f, 2, rd, base, index, disp, false),
            Ty::V => {}
        }
    }

    #[inline(always)]
    fn store_at(&mut self, mem: Ty, rs: u8, base: u8, index: Option<u8>, disp: i32) {
        match mem {
            Ty::C | Ty::UC => self.rm(0, false, 0x88, 1, rs, base, index, disp, true),
            Ty::S | Ty::US => self.rm(0x66, false, 0x89, 1, rs, base, index, disp, false),
            Ty::I | Ty::U => self.rm(0, false, 0x89, 1, rs, base, index, disp, false),
            Ty::L | Ty::UL | Ty::P => self.rm(0, true, 0x89, 1, rs, base, index, disp, false),
            Ty::F => self.rm(0xf3, false, 0x110f, 2, rs, base, index, disp, false),
            Ty::D => self.rm(0xf2, false, 0x110f, 2, rs, base, index, disp, false),
            Ty::V => {}
        }
    }

    /// Moves `src -> dst` pairs "at once" (destinations are distinct),
    /// breaking cycles through the scratch register.
    fn parallel_move(&mut self, moves: &mut Vec<(u8, u8)>, float: bool) {
        if float {
            parallel_move(moves, XTMP, |d, s| self.fmov(d, s))
        } else {
            parallel_move(moves, R11, |d, s| self.mov(true, d, s))
        }
    }
}

/// The encodings of a call's argument placement and of the entry's
/// parameter moves (the order is shared, `common.rs`).
impl ArgEmit for X64 {
    #[inline(always)]
    fn buf(&mut self) -> &mut Buf {
        &mut self.buf
    }

    #[inline(always)]
    fn st(&mut self) -> &mut FuncState {
        &mut self.st
    }

    #[inline]
    fn store_arg(&mut self, a: Arg, disp: i32) {
        match a {
            Arg::Reg(r) if r.ty.is_float() => {
                self.rm(0xf2, false, 0x110f, 2, r.n, RSP, None, disp, false)
            }
            Arg::Reg(r) => self.rm(0, true, 0x89, 1, r.n, RSP, None, disp, false),
            Arg::Imm(_, v) => {
                self.movi(true, R11, v);
                self.rm(0, true, 0x89, 1, R11, RSP, None, disp, false);
            }
            Arg::Mem { ty, base, off } => {
                // mov r11(d), [base + off]: the value's bits, zero-extended.
                self.rm(0, ty.size() == 8, 0x8b, 1, R11, base, None, off, false);
                self.rm(0, true, 0x89, 1, R11, RSP, None, disp, false);
            }
        }
    }

    fn move_args(&mut self, moves: &mut Vec<(u8, u8)>, float: bool) {
        self.parallel_move(moves, float)
    }

    #[inline]
    fn imm_arg(&mut self, _m: &'static str, ty: Ty, d: u8, v: i64) {
        if ty.is_float() {
            // The bits through r11: movd/movq xmm, r11.
            self.movi(true, R11, v);
            self.rr(0x66, ty == Ty::D, 0x6e0f, 2, d, R11, false);
        } else {
            self.movi(ty.is_64(), d, v);
        }
    }

    #[inline]
    fn load_slot(&mut self, ty: Ty, d: u8, frame: bool, disp: i32) {
        let (base, disp) = if frame {
            self.frame_at(disp)
        } else {
            (RSP, disp)
        };
        match ty {
            Ty::F => self.rm(0xf3, false, 0x100f, 2, d, base, None, disp, false),
            Ty::D => self.rm(0xf2, false, 0x100f, 2, d, base, None, disp, false),
            _ => self.rm(0, true, 0x8b, 1, d, base, None, disp, false),
        }
    }

    fn move_reg(&mut self, ty: Ty, d: u8, s: u8) {
        if ty.is_float() {
            self.fmov(d, s)
        } else {
            self.mov(true, d, s)
        }
    }
}

/// The encodings of a call (its order is shared, `common.rs`): through
/// `rax`, with the stack arguments below `rsp`.
impl CallEmit for X64 {
    fn call_reserve(&mut self, m: &'static str, nargs: usize) {
        // Worst case: per argument a movabs and a store (~20 bytes), or a
        // load, a store and a reload (~26), plus saves.
        self.buf.reserve(m, 32 * nargs + 16 * 16 + 64);
    }

    fn call_resync(&mut self, m: &'static str) {
        self.buf.resync(m);
    }

    fn load_callee(&mut self, t: Target) {
        match t {
            Target::Reg(r) => self.mov(true, RAX, r),
            Target::Addr(a) => self.movi(true, RAX, a as i64),
            Target::Label(_) => {}
        }
    }

    fn save_float(&mut self, n: u8, disp: i32) {
        let (base, disp) = self.frame_at(disp);
        self.rm(0xf2, false, 0x110f, 2, n, base, None, disp, false); // movsd
    }

    fn enter_call(&mut self, reserve: i32) {
        if reserve > 0 {
            self.alu_ri(Alu::Sub, true, RSP, reserve);
        }
    }

    fn make_call(&mut self, reserve: i32) {
        self.rr(0, false, 0xff, 1, 2, RAX, false); // call rax
        if reserve > 0 {
            self.alu_ri(Alu::Add, true, RSP, reserve);
        }
    }

    fn take_result(&mut self, r: AnyReg) {
        if r.ty.is_float() {
            self.fmov(r.n, 0)
        } else {
            self.mov(r.ty.is_64(), r.n, RAX)
        }
    }
}

/// The multi-byte `nop` forms Intel and AMD recommend, of 1 to 8 bytes.
const NOPS: [&[u8]; 8] = [
    &[0x90],
    &[0x66, 0x90],
    &[0x0f, 0x1f, 0x00],
    &[0x0f, 0x1f, 0x40, 0x00],
    &[0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
    &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
];

/// `n` bytes of no-ops, in the fewest instructions.
fn push_nops(out: &mut Vec<u8>, mut n: usize) {
    while n > 0 {
        let k = n.min(8);
        out.extend_from_slice(NOPS[k - 1]);
        n -= k;
    }
}

// ===========================================================================
// 4. Instruction methods
// ===========================================================================

impl Backend for X64 {
    type Code = Code;
    type Conv = SysV;

    fn new() -> Self {
        X64 {
            buf: Buf::new(DEFAULT_LIMIT),
            labels: Vec::new(),
            pending: 0,
            far_firsts: Vec::new(),
            ret_head: NO_LINK,
            tables: Vec::new(),
            pool_refs: Vec::new(),
            st: FuncState::new(),
            last_ret: None,
            frames: Box::new([FrameSlot::EMPTY; FRAME_SLOTS]),
            inline_rets: Vec::new(),
            sp_locals: None,
            sp_size: 0,
        }
    }

    // Entry and `end` (section 6), errors, locals: shared.
    native_backend_methods!();

    // -- arithmetic ----------------------------------------------------------

    #[inline(always)]
    fn binop(&mut self, m: &'static str, op: BinOp, ty: Ty, rd: u8, a: u8, b: Src) {
        self.buf.insn(m);
        if ty.is_float() {
            return self.fbinop(op, ty, rd, a, b);
        }
        let w = ty.is_64();
        match op {
            BinOp::Add | BinOp::Sub | BinOp::And | BinOp::Or | BinOp::Xor => {
                let alu = match op {
                    BinOp::Add => Alu::Add,
                    BinOp::Sub => Alu::Sub,
                    BinOp::And => Alu::And,
                    BinOp::Or => Alu::Or,
                    _ => Alu::Xor,
                };
                match b {
                    Src::I(v)
                        if !w || fits32(v) || (op == BinOp::Sub && fits32(v.wrapping_neg())) =>
                    {
                        let (alu, v) = match op {
                            BinOp::Sub if w && !fits32(v) => (Alu::Add, v.wrapping_neg()),
                            _ => (alu, v),
                        };
                        let v = v as i32;
                        if rd != a && matches!(alu, Alu::Add | Alu::Sub) {
                            // lea rd, [a + v]: three-address add.
                            let v = if matches!(alu, Alu::Sub) {
                                v.wrapping_neg()
                            } else {
                                v
                            };
                            // Except `sub l, INT_MIN`: its negation, +2^31, needs 64 bits.
                            if !(w && matches!(alu, Alu::Sub) && v == i32::MIN) {
                                self.rm(0, w, 0x8d, 1, rd, a, None, v, false);
                                return;
                            }
                        }
                        self.mov(w, rd, a);
                        self.alu_ri(alu, w, rd, v);
                    }
                    _ => {
                        let rb = self.src_reg(w, b);
                        if rd == a {
                            self.alu_rr(alu, w, rd, rb);
                        } else if rd == rb {
                            if op == BinOp::Sub {
                                self.rr(0, w, 0xf7, 1, 3, rd, false); // neg rd
                                self.alu_rr(Alu::Add, w, rd, a);
                            } else {
                                self.alu_rr(alu, w, rd, a);
                            }
                        } else if op == BinOp::Add && a != RSP {
                            // lea rd, [a + rb]
                            self.rm(0, w, 0x8d, 1, rd, a, Some(rb), 0, false);
                        } else {
                            self.mov(w, rd, a);
                            self.alu_rr(alu, w, rd, rb);
                        }
                    }
                }
            }
            BinOp::Mul => match b {
                Src::I(v) if !w || fits32(v) => {
                    let v = v as i32;
                    if fits8(v as i64) {
                        self.rr_imm(0, w, 0x6b, 1, rd, a, v as u32, 1);
                    } else {
                        self.rr_imm(0, w, 0x69, 1, rd, a, v as u32, 4);
                    }
                }
                _ => {
                    let rb = self.src_reg(w, b);
                    if rd == rb {
                        self.rr(0, w, 0xaf0f, 2, rd, a, false);
                    } else {
                        self.mov(w, rd, a);
                        self.rr(0, w, 0xaf0f, 2, rd, rb, false);
                    }
                }
            },
            BinOp::Div | BinOp::Mod => {
                if b == Src::I(0) || (!w && matches!(b, Src::I(v) if v as i32 == 0)) {
                    return self.buf.fail(m, ErrorKind::DivisionByZero);
                }
                let signed = ty.is_signed();
                if rd != RDX {
                    self.buf.put1(0x52); // push rdx
                }
                let d = match b {
                    Src::I(v) => {
                        self.movi(w, R11, v);
                        R11
                    }
                    Src::R(RDX) => {
                        self.mov(true, R11, RDX);
                        R11
                    }
                    Src::R(r) => r,
                };
                self.mov(w, RAX, a);
                if signed {
                    // cdq / cqo
                    self.buf.put(if w { 0x9948 } else { 0x99 }, 1 + w as usize);
                } else {
                    self.rr(0, false, 0x31, 1, RDX, RDX, false);
                }
                self.rr(0, w, 0xf7, 1, if signed { 7 } else { 6 }, d, false);
                self.mov(w, rd, if op == BinOp::Div { RAX } else { RDX });
                if rd != RDX {
                    self.buf.put1(0x5a); // pop rdx
                }
            }
            BinOp::Lsh | BinOp::Rsh => {
                let digit = match (op, ty.is_signed()) {
                    (BinOp::Lsh, _) => 4,
                    (_, true) => 7,
                    (_, false) => 5,
                };
                match b {
                    Src::I(v) => {
                        let c = (v as u8) & if w { 63 } else { 31 };
                        self.mov(w, rd, a);
                        if c == 1 {
                            self.rr(0, w, 0xd1, 1, digit, rd, false);
                        } else if c != 0 {
                            self.rr_imm(0, w, 0xc1, 1, digit, rd, c as u32, 1);
                        }
                    }
                    Src::R(rb) => {
                        self.mov(false, RCX, rb);
                        self.mov(w, rd, a);
                        self.rr(0, w, 0xd3, 1, digit, rd, false);
                    }
                }
            }
        }
    }

    #[inline(always)]
    fn unop(&mut self, m: &'static str, op: UnOp, ty: Ty, rd: u8, a: u8) {
        self.buf.insn(m);
        let w = ty.is_64();
        if ty.is_float() {
            self.fmov(rd, a);
            if op == UnOp::Neg {
                let (w, sign) = if ty == Ty::F {
                    (false, 0x8000_0000u64)
                } else {
                    (true, 1u64 << 63)
                };
                self.movi(true, R11, sign as i64);
                self.rr(0x66, w, 0x6e0f, 2, XTMP, R11, false); // movd/movq xmm15, r11
                self.rr(0, false, 0x570f, 2, rd, XTMP, false); // xorps rd, xmm15
            }
            return;
        }
        match op {
            UnOp::Mov => self.mov(w, rd, a),
            UnOp::Com => {
                self.mov(w, rd, a);
                self.rr(0, w, 0xf7, 1, 2, rd, false);
            }
            UnOp::Neg => {
                self.mov(w, rd, a);
                self.rr(0, w, 0xf7, 1, 3, rd, false);
            }
            UnOp::Not => {
                self.rr(0, false, 0x31, 1, R11, R11, false); // xor r11d, r11d
                self.rr(0, w, 0x85, 1, a, a, false); // test a, a
                self.rr(0, false, 0x940f, 2, 0, R11, true); // sete r11b
                self.mov(false, rd, R11);
            }
        }
    }

    #[inline(always)]
    fn set(&mut self, m: &'static str, ty: Ty, rd: u8, bits: u64) {
        self.buf.insn(m);
        match ty {
            Ty::F | Ty::D => {
                if bits == 0 {
                    self.rr(0, false, 0x570f, 2, rd, rd, false); // xorps
                } else {
                    let idx = self.pool_const(bits);
                    self.rip(
                        if ty == Ty::F { 0xf3 } else { 0xf2 },
                        false,
                        0x100f,
                        2,
                        rd,
                        idx,
                    );
                }
            }
            _ => self.movi(ty.is_64(), rd, bits as i64),
        }
    }

    // -- conversions ---------------------------------------------------------

    #[inline(always)]
    fn cvt(&mut self, m: &'static str, from: Ty, to: Ty, rd: u8, rs: u8) {
        if from.is_float() || to.is_float() {
            return self.cvt_float(m, from, to, rd, rs);
        }
        // Integer to integer (a subscript widened to `p`): inline.
        self.buf.insn(m);
        if from.is_64() == to.is_64() {
            self.mov(to.is_64(), rd, rs);
        } else if to.is_64() && from == Ty::I {
            self.rr(0, true, 0x63, 1, rd, rs, false); // movsxd
        } else {
            // mov r32, r32: zero-extends or truncates. Emitted even
            // when rd == rs: the upper half must be cleared in place.
            self.rr(0, false, 0x89, 1, rs, rd, false);
        }
    }

    // -- loads, stores, locals -----------------------------------------------

    #[inline(always)]
    fn load(&mut self, m: &'static str, mem: Ty, rd_ty: Ty, rd: u8, base: u8, off: Src) {
        self.buf.insn(m);
        let (index, disp) = self.addr(off);
        self.load_at(mem, rd_ty, rd, base, index, disp);
    }

    #[inline(always)]
    fn store(&mut self, m: &'static str, mem: Ty, rs: u8, base: u8, off: Src) {
        self.buf.insn(m);
        let (index, disp) = self.addr(off);
        self.store_at(mem, rs, base, index, disp);
    }

    #[inline(always)]
    fn local_op(&mut self, m: &'static str, op: LocalOp, ty: Ty, r: u8, off: i32, id: u32) {
        self.buf.insn(m);
        if !self.st.local_ok(off, id) {
            return self.param_local_op(m, op, ty, r, off, id);
        }
        self.local_at(op, ty, r, off);
    }

    // -- returns, branches, jumps (sections 5 and 6) -------------------------

    #[inline(always)]
    fn ret(&mut self, m: &'static str, ty: Ty, r: u8) {
        self.emit_ret(m, ty, r)
    }

    #[inline(always)]
    fn branch(&mut self, m: &'static str, c: Cond, ty: Ty, a: u8, b: Src, l: Label) {
        self.emit_branch(m, c, ty, a, b, l)
    }

    #[inline(always)]
    fn jump(&mut self, m: &'static str, link: bool, t: Target) {
        self.emit_jump(m, link, t)
    }

    fn ret_link(&mut self, m: &'static str) {
        self.emit_ret_link(m)
    }

    // -- calls ---------------------------------------------------------------

    fn call(
        &mut self,
        m: &'static str,
        callee: Callee<'_, Code>,
        args: &[Arg],
        ret: Option<AnyReg>,
        alloc: &RegAlloc,
    ) {
        self.buf.insn(m);
        emit_call(self, m, &TABLES, callee, args, ret, alloc);
    }

    #[inline(always)]
    fn genlabel(&mut self) -> Label {
        self.emit_genlabel()
    }

    #[inline(always)]
    fn place(&mut self, m: &'static str, l: Label) {
        self.emit_place(m, l)
    }

    #[inline(always)]
    fn nop(&mut self, m: &'static str) {
        self.buf.insn(m);
        self.buf.put1(0x90);
    }

    fn align(&mut self, m: &'static str, n: usize) {
        self.emit_align(m, n)
    }

    fn data(&mut self, bytes: &[u8]) -> u32 {
        self.st.data(0, bytes)
    }

    fn addr_data(&mut self, m: &'static str, rd: u8, data: u32) {
        self.buf.insn(m);
        if data as usize * 8 >= self.st.pool.len() {
            return self.buf.fail(m, ErrorKind::UnknownData { data });
        }
        // lea rd, [rip + data]
        self.rip(0, true, 0x8d, 1, rd, data);
    }

    fn jump_table(&mut self, m: &'static str, idx: u8, targets: &[Label]) {
        self.emit_jump_table(m, idx, targets)
    }
}

// ===========================================================================
// 5. Branches and fixups
// ===========================================================================

/// A label's word: once placed, its position (bit 31 clear: code
/// positions stay below 2 GiB, see [`DEFAULT_LIMIT`] and
/// [`Buf::new`](crate::buf::Buf::new)); until then this bit, set, and in
/// the low 31 bits the newest forward reference to it ([`NO_REF`] when
/// there is none yet). The references form a chain threaded through the
/// code itself: each unresolved rel32 field holds the position of the
/// previous reference, and the oldest holds the chain's tail word
/// ([`TAIL`]). A forward branch is then a read and a write of the label's
/// word and one store of the jump with its link, and no record; placing
/// the label walks its chain once and patches every reference, so `end`
/// has nothing left to backpatch but the returns.
const UNPLACED: u32 = 1 << 31;
/// The low bits of an unplaced label's word when nothing refers to it.
const NO_REF: u32 = UNPLACED - 1;
/// A new label: unplaced, without references.
const NEW_LABEL: u32 = UNPLACED | NO_REF;
/// The tail word of a chain of forward references (bit 31 set, so above
/// every position): the kind of the first reference in bits 27..31 and
/// its instruction index in bits 0..27, for the error of a label used and
/// never placed. An index too large for 27 bits is kept in
/// [`X64::far_firsts`] instead, under the kind [`FAR`].
const TAIL: u32 = 1 << 31;
const TAIL_INDEX: u32 = (1 << 27) - 1;
const FAR: u8 = 15;
/// The end of the chain of returns.
const NO_LINK: u32 = u32::MAX;

/// A jump-table slot to fill with a label's absolute address at link.
/// The method is kept as a [`kind`](Fixup::kind) code and named only for
/// an error.
#[derive(Clone, Copy, Debug)]
struct Fixup {
    at: u32,
    label: u32,
    index: u32,
    kind: u8,
}

/// Fixup kinds besides the six branch conditions (`Cond as u8`).
const FIX_JMP: u8 = 6;
const FIX_JAL: u8 = 7;
const FIX_RET: u8 = 8;
/// An 8-byte jump-table slot: the label's absolute address, known at link.
const FIX_TABLE: u8 = 9;
/// The branch of [`X64::countdown`].
const FIX_COUNTDOWN: u8 = 10;
/// The branch of [`X64::branch_min`].
const FIX_MIN: u8 = 11;
/// The branch of [`X64::sub_branch`].
const FIX_SUB_BRANCH: u8 = 12;

impl Fixup {
    /// The client method that recorded the fixup.
    fn method(self) -> &'static str {
        kind_method(self.kind)
    }
}

/// The client method of a reference of kind `kind`.
fn kind_method(kind: u8) -> &'static str {
    {
        match kind {
            FIX_JMP => "jmp",
            FIX_JAL => "jal",
            FIX_RET => "ret",
            FIX_TABLE => "jump_table",
            FIX_COUNTDOWN => "dec_branch_borrow",
            FIX_MIN => "beq_min",
            FIX_SUB_BRANCH => "sub_branch",
            k => Cond::ALL[k as usize].name(),
        }
    }
}

/// The word a first forward reference of kind `kind` to `label` leaves
/// at the tail of the label's chain: its kind and instruction index.
#[inline(always)]
fn tail_word(buf: &Buf, far_firsts: &mut Vec<(u32, u32, u8)>, kind: u8, label: u32) -> u32 {
    let index = buf.index();
    if index > TAIL_INDEX {
        return far_first(far_firsts, kind, label, index);
    }
    TAIL | (kind as u32) << 27 | index
}

/// [`tail_word`] past 2^27 instructions: the index is kept aside.
#[cold]
#[inline(never)]
fn far_first(far_firsts: &mut Vec<(u32, u32, u8)>, kind: u8, label: u32, index: u32) -> u32 {
    far_firsts.push((label, index, kind));
    TAIL | (FAR as u32) << 27
}

impl X64 {
    /// A backward or forward jump of kind `kind` (`cc` `None`:
    /// unconditional) to `label`.
    #[inline(always)]
    fn jump_to(&mut self, kind: u8, cc: Option<u8>, label: u32) {
        let pos = self.buf.pos() as u32;
        let X64 {
            labels,
            buf,
            pending,
            far_firsts,
            ..
        } = self;
        let Some(w) = labels.get_mut(label as usize) else {
            return self.unknown_label(kind, cc, label);
        };
        if *w & UNPLACED == 0 {
            let t = *w;
            let rel = t as i64 - (pos as i64 + 2);
            if fits8(rel) {
                let op = cc.map_or(0xeb, |c| 0x70 | c);
                buf.put(op as u64 | ((rel as u8) as u64) << 8, 2);
            } else {
                match cc {
                    None => {
                        let rel = t.wrapping_sub(pos + 5) as u64;
                        buf.put(0xe9 | rel << 8, 5);
                    }
                    Some(c) => {
                        let rel = t.wrapping_sub(pos + 6) as u64;
                        buf.put(0x800f | (c as u64) << 8 | rel << 16, 6);
                    }
                }
            }
            return;
        }
        // Forward: link the rel32 field into the label's chain.
        let mut link = *w & NO_REF;
        if link == NO_REF {
            link = tail_word(buf, far_firsts, kind, label);
            *pending += 1;
        }
        let (at, word, len) = match cc {
            None => (pos + 1, 0xe9 | (link as u64) << 8, 5),
            Some(c) => (pos + 2, 0x800f | (c as u64) << 8 | (link as u64) << 16, 6),
        };
        *w = UNPLACED | at;
        buf.put(word, len);
    }

    /// A jump to a label this function never made: recorded as the error,
    /// and the jump written (to nowhere) so that the code stays in step.
    #[cold]
    #[inline(never)]
    fn unknown_label(&mut self, kind: u8, cc: Option<u8>, label: u32) {
        self.buf
            .fail(kind_method(kind), ErrorKind::UnknownLabel { label });
        match cc {
            None => self.buf.put(0xe9, 5),
            Some(c) => self.buf.put(0x800f | (c as u64) << 8, 6),
        }
    }

    /// Writes a rel32 at the current position to `label` (whose position
    /// is not known yet, or is), as [`jump_to`](X64::jump_to) does for a
    /// jump's field.
    #[inline(always)]
    fn fix(&mut self, kind: u8, label: u32) {
        let at = self.buf.pos() as u32;
        let X64 {
            labels,
            buf,
            pending,
            far_firsts,
            ..
        } = self;
        let Some(w) = labels.get_mut(label as usize) else {
            buf.fail(kind_method(kind), ErrorKind::UnknownLabel { label });
            return buf.put4(0);
        };
        if *w & UNPLACED == 0 {
            return buf.put4(w.wrapping_sub(at + 4));
        }
        let mut link = *w & NO_REF;
        if link == NO_REF {
            link = tail_word(buf, far_firsts, kind, label);
            *pending += 1;
        }
        *w = UNPLACED | at;
        buf.put4(link);
    }

    /// Patches every rel32 of the chain starting at `head` to `target`.
    /// Links only go backwards in the code, so the walk stops at the
    /// first word that does not (the tail word, above every position):
    /// it ends even over code overwritten after a `CodeTooLarge`.
    #[inline]
    fn resolve(&mut self, mut head: u32, target: u32) {
        loop {
            let next = self.buf.swap4(head as usize, target.wrapping_sub(head + 4));
            if next >= head {
                return;
            }
            head = next;
        }
    }

    /// The error of a label referenced and never placed: the first such
    /// reference in program order, as its branch's method names it. Each
    /// pending label's chain is walked to its tail word.
    #[cold]
    #[inline(never)]
    fn unplaced_error(&self) -> Error {
        let (index, kind, label) = self
            .labels
            .iter()
            .enumerate()
            .filter(|&(_, &w)| w & UNPLACED != 0 && w != NEW_LABEL)
            .map(|(label, &w)| {
                let mut h = w & NO_REF;
                let tail = loop {
                    let next = self.buf.read4(h as usize);
                    if next >= h {
                        break next;
                    }
                    h = next;
                };
                let label = label as u32;
                let kind = (tail >> 27 & 15) as u8;
                if kind == FAR {
                    let &(_, index, kind) = self
                        .far_firsts
                        .iter()
                        .find(|f| f.0 == label)
                        .expect("a far first reference is recorded");
                    (index, kind, label)
                } else {
                    (tail & TAIL_INDEX, kind, label)
                }
            })
            .min()
            .expect("a pending label");
        Error::new(index, kind_method(kind), ErrorKind::UnplacedLabel { label })
    }

    #[inline(always)]
    fn emit_branch(&mut self, m: &'static str, c: Cond, ty: Ty, a: u8, b: Src, l: Label) {
        self.buf.insn(m);
        debug_assert_eq!(m, c.name(), "branch fixups name their method by condition");
        let kind = c as u8;
        if ty.is_float() {
            let pfx = if ty == Ty::D { 0x66 } else { 0 };
            let Src::R(b) = b else {
                return self.buf.fail(
                    m,
                    ErrorKind::UnsupportedType {
                        insn: "branch with an immediate",
                        ty,
                    },
                );
            };
            let (x, y, cc) = match c {
                Cond::Lt => (b, a, CC_A),
                Cond::Le => (b, a, CC_AE),
                Cond::Gt => (a, b, CC_A),
                Cond::Ge => (a, b, CC_AE),
                Cond::Eq | Cond::Ne => (a, b, 0),
            };
            self.rr(pfx, false, 0x2e0f, 2, x, y, false); // ucomis x, y
            match c {
                Cond::Eq => {
                    let skip = self.jcc8(Some(CC_P));
                    self.jump_to(kind, Some(CC_E), l.0);
                    self.bind8(skip);
                }
                Cond::Ne => {
                    self.jump_to(kind, Some(CC_P), l.0);
                    self.jump_to(kind, Some(CC_NE), l.0);
                }
                _ => self.jump_to(kind, Some(cc), l.0),
            }
            return;
        }
        let w = ty.is_64();
        match b {
            Src::I(0) => self.rr(0, w, 0x85, 1, a, a, false), // test a, a
            Src::I(v) if !w || fits32(v) => self.alu_ri(Alu::Cmp, w, a, v as i32),
            _ => {
                let rb = self.src_reg(w, b);
                self.alu_rr(Alu::Cmp, w, a, rb);
            }
        }
        self.jump_to(kind, Some(jcc(c, ty.is_signed())), l.0);
    }

    #[inline(always)]
    fn emit_jump(&mut self, m: &'static str, link: bool, t: Target) {
        self.buf.insn(m);
        if link {
            // A call moves the stack pointer, from which a frame framed
            // so addresses its locals.
            if self.sp_size != 0 {
                return self.buf.fail(
                    m,
                    ErrorKind::Unsupported("jal in a function framed from the stack pointer"),
                );
            }
            self.st.frame = true;
        }
        match t {
            Target::Label(l) => {
                if link {
                    // sub rsp, 8; call L; add rsp, 8: the subroutine runs with
                    // rsp 16-byte aligned, as the calls it makes require.
                    self.buf.put(0x08ec_8348, 4);
                    self.buf.put1(0xe8);
                    self.fix(FIX_JAL, l.0);
                    self.buf.put(0x08c4_8348, 4);
                } else {
                    self.jump_to(FIX_JMP, None, l.0);
                }
            }
            Target::Reg(r) => self.rr(0, false, 0xff, 1, if link { 2 } else { 4 }, r, false),
            Target::Addr(a) => {
                self.movi(true, R11, a as i64);
                self.rr(0, false, 0xff, 1, if link { 2 } else { 4 }, R11, false);
            }
        }
    }

    #[inline(always)]
    fn emit_ret_link(&mut self, m: &'static str) {
        self.buf.insn(m);
        self.buf.put1(0xc3);
    }

    #[inline(always)]
    fn emit_genlabel(&mut self) -> Label {
        self.labels.push(NEW_LABEL);
        Label(self.labels.len() as u32 - 1)
    }

    #[inline(always)]
    fn emit_place(&mut self, m: &'static str, l: Label) {
        self.buf.insn_no_code();
        let pos = self.buf.pos() as u32;
        match self.labels.get_mut(l.0 as usize) {
            Some(w) if *w & UNPLACED != 0 => {
                let head = *w & NO_REF;
                *w = pos;
                self.st.last_place = pos;
                if head != NO_REF {
                    self.pending -= 1;
                    self.resolve(head, pos);
                }
            }
            Some(_) => self.buf.fail(m, ErrorKind::LabelPlacedTwice { label: l.0 }),
            None => self.buf.fail(m, ErrorKind::UnknownLabel { label: l.0 }),
        }
    }

    #[inline(always)]
    fn emit_align(&mut self, m: &'static str, n: usize) {
        self.buf.insn(m);
        if let Err(kind) = self.st.align(n, 1) {
            return self.buf.fail(m, kind);
        }
        let pad = self.buf.pos().next_multiple_of(n) - self.buf.pos();
        self.buf.reserve(m, pad + 8);
        let mut nops = Vec::with_capacity(pad);
        push_nops(&mut nops, pad);
        for b in nops {
            self.buf.put1(b);
        }
        self.buf.resync(m);
    }

    #[inline(always)]
    fn emit_jump_table(&mut self, m: &'static str, idx: u8, targets: &[Label]) {
        self.buf.insn(m);
        self.buf.reserve(m, 8 * targets.len());
        // lea r11, [rip + table]; jmp [r11 + idx*8]; the table follows.
        self.buf.put(0x1d8d4c, 3);
        self.buf.put4(4);
        self.buf.put1(0x41 | (idx >> 3 & 1) << 1);
        self.buf.put(0xff, 1);
        self.buf.put(0xc324 | ((idx & 7) as u64) << 11, 2);
        let index = self.buf.index();
        for l in targets {
            self.tables.push(Fixup {
                at: self.buf.pos() as u32,
                label: l.0,
                index,
                kind: FIX_TABLE,
            });
            self.buf.put4(0);
            self.buf.put4(0);
        }
        self.buf.resync(m);
    }
}

// ===========================================================================
// 6. Prologue, epilogue and end
// ===========================================================================

/// The lengths of the prologue (without its alignment padding) and the
/// epilogue of a function with a frame that saves `saves` (integer,
/// `xmm`): `push rbp; mov rbp, rsp; sub rsp, imm32`, the saves (7 bytes
/// for an integer register, `mov [rbp + disp32], r64` with REX.W; 8 for
/// `movdqu [rbp + disp32], xmm`, 9 for `xmm8`..`xmm15` with a REX), and
/// `leave; ret`. Known before the code is written, so
/// that `end` allocates the block first and writes the frame straight
/// into it.
fn frame_lens(saves: [u16; 2]) -> (usize, usize) {
    // Bits counted by table: the baseline x86-64 target has no `popcnt`,
    // and `count_ones` becomes some forty instructions per word.
    const POP: [u8; 256] = {
        let mut t = [0u8; 256];
        let mut i = 0;
        while i < 256 {
            t[i] = (i as u8).count_ones() as u8;
            i += 1;
        }
        t
    };
    let pop = |m: u16| usize::from(POP[usize::from(m & 0xff)] + POP[usize::from(m >> 8)]);
    let regs = 7 * pop(saves[0]) + 8 * pop(saves[1]) + usize::from(POP[usize::from(saves[1] >> 8)]);
    (11 + regs, regs + 2)
}

/// The saves of a frame and their restores, by register, as the words
/// [`write_frame`] stores: `mov [rbp + disp32], r64` (`89`; `8b`
/// restores) behind REX.W, 7 bytes; `movdqu [rbp + disp32], xmm` (`f3 0f
/// 7f`; `6f` restores), 8 bytes, and 9 for `xmm8`.. with a REX after the
/// `f3` (its last byte in the second word).
struct FrameEnc {
    gpr: [[u64; 16]; 2],
    xmm: [[(u64, u8); 16]; 2],
}

const FRAME_ENC: &FrameEnc = &{
    let mut t = FrameEnc {
        gpr: [[0; 16]; 2],
        xmm: [[(0, 0); 16]; 2],
    };
    let mut n = 0;
    while n < 16 {
        let modrm = 0x80 | (n as u64 & 7) << 3 | 5;
        let g = regfile::gpr_save_slot(n) as u32 as u64;
        let x = regfile::xmm_save_slot(n) as u32 as u64;
        let rex = 0x48 | ((n as u64 >> 3) & 1) << 2;
        let mut i = 0;
        while i < 2 {
            let (gop, xop) = if i == 0 { (0x89, 0x7f) } else { (0x8b, 0x6f) };
            t.gpr[i][n as usize] = rex | gop << 8 | modrm << 16 | g << 24;
            t.xmm[i][n as usize] = if n < 8 {
                (0xf3 | 0x0f << 8 | xop << 16 | modrm << 24 | x << 32, 0)
            } else {
                (
                    0xf3 | 0x44 << 8 | 0x0f << 16 | xop << 24 | modrm << 32 | x << 40,
                    (x >> 24) as u8,
                )
            };
            i += 1;
        }
        n += 1;
    }
    t
};

/// Writes the prologue (`out[..pro_len]`) and the epilogue but its `ret`
/// (from `out[epi_at..]`) of a function with a frame of `size` bytes that
/// saves `saves` (integer, `xmm`), at the lengths [`frame_lens`] gave, in
/// one pass over the saved registers: each save and its restore are one
/// 8-byte store of their [`FRAME_ENC`] words (and a byte each for
/// `xmm8`..). An integer save's store writes one byte past its
/// instruction: into the next save, written after it, or past the last
/// one, into the body, written after this (the caller's contract), or,
/// when the body is empty, the epilogue's first byte, rewritten here. A
/// restore's spill lands in the next restore or on `leave`, written last.
#[inline(always)]
fn write_frame(out: &mut [u8], pro_len: usize, epi_at: usize, size: u32, saves: [u16; 2]) {
    // push rbp; mov rbp, rsp; sub rsp, imm32: one 8-byte store and the
    // immediate's last three bytes.
    const HEAD: u64 = u64::from_le_bytes([0x55, 0x48, 0x89, 0xe5, 0x48, 0x81, 0xec, 0]);
    let put = |out: &mut [u8], at: usize, w: u64| out[at..at + 8].copy_from_slice(&w.to_le_bytes());
    put(out, 0, HEAD | u64::from(size) << 56);
    out[8..11].copy_from_slice(&size.to_le_bytes()[1..]);
    let (mut p, mut e) = (11, epi_at);
    // Only the registers to save, in ascending order.
    let mut pending = saves[0] | saves[1];
    while pending != 0 {
        let n = pending.trailing_zeros() as usize;
        pending &= pending - 1;
        if saves[0] & (1 << n) != 0 {
            put(out, p, FRAME_ENC.gpr[0][n]);
            put(out, e, FRAME_ENC.gpr[1][n]);
            p += 7;
            e += 7;
        }
        if saves[1] & (1 << n) != 0 {
            let ((ws, ls), (wr, lr)) = (FRAME_ENC.xmm[0][n], FRAME_ENC.xmm[1][n]);
            put(out, p, ws);
            put(out, e, wr);
            if n < 8 {
                p += 8;
                e += 8;
            } else {
                out[p + 8] = ls;
                out[e + 8] = lr;
                p += 9;
                e += 9;
            }
        }
    }
    debug_assert_eq!(p, pro_len);
    if p == epi_at && e != epi_at {
        // An empty body: the last save's spill (an integer register's)
        // overwrote the first restore's first byte: its REX.W, or the
        // `f3` that every `movdqu` starts with.
        let n = (saves[0] | saves[1]).trailing_zeros() as usize;
        out[epi_at] = if saves[0] & (1 << n) != 0 {
            FRAME_ENC.gpr[1][n] as u8
        } else {
            0xf3
        };
    }
    out[e] = 0xc9; // leave
}

/// The size of a frame framed from the stack pointer
/// ([`X64::frame_from_sp`]) with room for `locals` bytes of locals: the
/// save area and the locals, to a multiple of 16, as
/// [`FuncState::frame_size`] counts them.
fn sp_frame_size(locals: u32) -> u32 {
    (crate::slots::SAVE_AREA as u32)
        .saturating_add(locals)
        .saturating_add(15)
        & !15
}

/// The lengths of the prologue and epilogue of a frame framed from the
/// stack pointer that saves `saves`: `sub rsp, imm32` (7 bytes), the
/// saves (`mov [rsp + disp32], r64`, 8 bytes with its SIB; `movdqu [rsp +
/// disp32], xmm`, 9, and 10 for `xmm8`..), and the restores, `add rsp,
/// imm32` (7) and `ret`.
fn sp_frame_lens(saves: [u16; 2]) -> (usize, usize) {
    let n = |m: u16| m.count_ones() as usize;
    let regs = 8 * n(saves[0]) + 9 * n(saves[1]) + n(saves[1] & 0xff00);
    (7 + regs, regs + 8)
}

/// Writes the prologue (`out[..]`) and the epilogue but its `ret` (from
/// `out[epi_at..]`) of a frame framed from the stack pointer
/// ([`X64::frame_from_sp`]) of `size` bytes that saves `saves`, at the
/// lengths [`sp_frame_lens`] gave: `sub rsp, size + 8` (the 8 in place of
/// the ordinary frame's `push rbp`, so that `rsp` is as 16-byte aligned
/// as there), each save at its slot from where `rbp` would be, `size`
/// bytes above `rsp`, and the restores and `add rsp, size + 8`.
fn write_sp_frame(out: &mut [u8], epi_at: usize, size: u32, saves: [u16; 2]) {
    let adjust = (size + 8).to_le_bytes();
    let (mut p, mut e) = (0, epi_at);
    let mut put = |at: &mut usize, bytes: &[u8]| {
        out[*at..*at + bytes.len()].copy_from_slice(bytes);
        *at += bytes.len();
    };
    put(&mut p, &[0x48, 0x81, 0xec]);
    put(&mut p, &adjust);
    for n in 0..16u8 {
        let modrm = 0x84 | (n & 7) << 3;
        if saves[0] & (1 << n) != 0 {
            let rex = 0x48 | (n >> 3 & 1) << 2;
            let disp = (size as i32 + regfile::gpr_save_slot(n)).to_le_bytes();
            for (at, op) in [(&mut p, 0x89), (&mut e, 0x8b)] {
                put(at, &[rex, op, modrm, 0x24]);
                put(at, &disp);
            }
        }
        if saves[1] & (1 << n) != 0 {
            let disp = (size as i32 + regfile::xmm_save_slot(n)).to_le_bytes();
            for (at, op) in [(&mut p, 0x7f), (&mut e, 0x6f)] {
                put(at, &[0xf3]);
                if n >= 8 {
                    put(at, &[0x44]);
                }
                put(at, &[0x0f, op, modrm, 0x24]);
                put(at, &disp);
            }
        }
    }
    put(&mut e, &[0x48, 0x81, 0xc4]);
    put(&mut e, &adjust);
}

/// The longest prologue, and the longest epilogue, a [`FrameSlot`] holds:
/// seven integer saves (the System V ABI has five callee-saved registers
/// besides `rbp`), or a few `xmm` ones. A longer frame takes
/// `link_general`.
const FRAME_MAX: usize = 64;

/// The slots of [`X64::frames`]: a few, for a client whose functions
/// alternate between frames (different saved registers, locals).
const FRAME_SLOTS: usize = 4;

/// A frame `end` has written: its saves, prologue and epilogue (with its
/// `ret`), under its key, which determines them: the allocator's
/// callee-saved mask ([`RegAlloc::used_callee_raw`]), and the frame's size
/// with bit 0 set when the result is a float (`xmm0` is then not
/// restored). Most of a JIT's functions save the same registers and have
/// the same locals, so `end` copies the frame instead of converting the
/// mask, counting lengths and storing each save.
#[derive(Clone, Copy)]
struct FrameSlot {
    key: u64,
    saves: [u16; 2],
    pro_len: u8,
    epi_len: u8,
    pro: [u8; FRAME_MAX],
    epi: [u8; FRAME_MAX],
}

impl FrameSlot {
    /// A slot no key matches: a key's size (bits 32..) is a multiple of
    /// 16 with at most bit 0 set below that.
    const EMPTY: FrameSlot = FrameSlot {
        key: u64::MAX,
        saves: [0, 0],
        pro_len: 0,
        epi_len: 0,
        pro: [0; FRAME_MAX],
        epi: [0; FRAME_MAX],
    };

    /// The slot of `key`: its top bits after a multiplicative hash.
    #[inline(always)]
    fn index(key: u64) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 62) as usize & (FRAME_SLOTS - 1)
    }

    /// The slot for `key`, a frame of `size` bytes that saves `saves`;
    /// `None` if the frame is longer than a slot holds.
    #[cold]
    #[inline(never)]
    fn fill(key: u64, saves: [u16; 2], size: u32) -> Option<FrameSlot> {
        let (pro_len, epi_len) = frame_lens(saves);
        if pro_len > FRAME_MAX || epi_len > FRAME_MAX {
            return None;
        }
        // `write_frame` with an 8-byte body between prologue and
        // epilogue (its stores spill up to a byte past a save) and room
        // for the last store's seven bytes past the end.
        let mut out = [0u8; 2 * FRAME_MAX + 16];
        let epi_at = pro_len + 8;
        write_frame(&mut out, pro_len, epi_at, size, saves);
        out[epi_at + epi_len - 1] = 0xc3; // ret
        let mut slot = FrameSlot {
            key,
            saves,
            pro_len: pro_len as u8,
            epi_len: epi_len as u8,
            ..FrameSlot::EMPTY
        };
        slot.pro[..pro_len].copy_from_slice(&out[..pro_len]);
        slot.epi[..epi_len].copy_from_slice(&out[epi_at..epi_at + epi_len]);
        Some(slot)
    }
}

impl X64 {
    /// Resets this target's own per-function state (the shared `begin`
    /// resets the buffer and [`FuncState`] and moves the parameters);
    /// inlined into `lambda`.
    #[inline(always)]
    fn enter(&mut self) {
        self.labels.clear();
        self.pending = 0;
        self.far_firsts.clear();
        self.ret_head = NO_LINK;
        self.tables.clear();
        self.pool_refs.clear();
        self.last_ret = None;
        self.inline_rets.clear();
        self.sp_size = match self.sp_locals {
            Some(l) => sp_frame_size(l),
            None => 0,
        };
    }

    /// Frames the functions begun from now on from the stack pointer, with
    /// room for `locals` bytes of locals (`None`: the ordinary frame,
    /// through `rbp`). Such a frame is `sub rsp, size + 8` and `add rsp,
    /// size + 8; ret` around the saves, where the ordinary one is `push
    /// rbp; mov rbp, rsp; sub rsp, size` and `leave; ret`: two
    /// instructions fewer a call (the jive JIT's every invocation). Its
    /// size is fixed before the first local is used, so that each
    /// local's address from `rsp` is known where it is written; a function
    /// whose locals outgrow it fails at `end`. The stack pointer must not
    /// move in its body, so `jal` (and a linked jump) fails in it.
    pub fn frame_from_sp(&mut self, locals: Option<u32>) {
        self.sp_locals = locals;
    }

    /// The base register and displacement of the frame's byte at `off`
    /// from the frame pointer: `rbp` in the ordinary frame; `rsp` in one
    /// framed from the stack pointer (`X64::frame_from_sp`), which is
    /// `size` bytes below where `rbp` would be.
    #[inline(always)]
    fn frame_at(&self, off: i32) -> (u8, i32) {
        if self.sp_size == 0 {
            (RBP, off)
        } else {
            (RSP, off.wrapping_add(self.sp_size as i32))
        }
    }

    /// A load, store or address of the slot at `off` from `rbp`.
    #[inline(always)]
    fn local_at(&mut self, op: LocalOp, ty: Ty, r: u8, off: i32) {
        self.st.frame = true;
        let (base, off) = self.frame_at(off);
        match op {
            LocalOp::Load => self.load_at(ty, ty, r, base, None, off),
            LocalOp::Store => self.store_at(ty, r, base, None, off),
            LocalOp::Addr => self.rm(0, true, 0x8d, 1, r, base, None, off, false),
        }
    }

    /// `local_op` of a handle that is none of this function's own locals:
    /// a parameter kept in its stack slot, or an error. Out of line, so
    /// that the common path checks only the function's locals (with the
    /// shared check inline there, the template client paid 7% more).
    #[cold]
    #[inline(never)]
    fn param_local_op(&mut self, m: &'static str, op: LocalOp, ty: Ty, r: u8, off: i32, id: u32) {
        if !self.st.use_local(off, id) {
            return self.buf.fail(m, ErrorKind::UnknownLocal { id });
        }
        self.local_at(op, ty, r, off);
    }

    #[inline(always)]
    fn emit_ret(&mut self, m: &'static str, ty: Ty, r: u8) {
        self.buf.insn(m);
        if let Err(kind) = self.st.note_ret(ty) {
            return self.buf.fail(m, kind);
        }
        match ty {
            Ty::V => {}
            Ty::F | Ty::D => self.fmov(0, r),
            _ => self.mov(ty.is_64(), RAX, r),
        }
        let at = self.buf.pos();
        // jmp epilogue, linked into the chain of returns.
        self.buf.put(0xe9 | (self.ret_head as u64) << 8, 5);
        self.last_ret = Some((at, self.ret_head));
        self.ret_head = at as u32 + 1;
    }

    /// A return of the 32-bit constant 0 ([`crate::ext::Exit::ret_zero`]):
    /// `xor eax, eax; jmp epilogue`, with no register of the function's
    /// written first.
    pub(crate) fn ret_zero(&mut self, m: &'static str) {
        if let Err(kind) = self.st.note_ret(Ty::I) {
            return self.buf.fail(m, kind);
        }
        self.movi(false, RAX, 0);
        let at = self.buf.pos();
        // jmp epilogue, linked into the chain of returns.
        self.buf.put(0xe9 | (self.ret_head as u64) << 8, 5);
        self.last_ret = Some((at, self.ret_head));
        self.ret_head = at as u32 + 1;
    }

    /// A return of the 32-bit constant 0 with `value` (a register or a
    /// 32-bit constant) in register `to`
    /// ([`crate::ext::Exit::ret_zero_with`]): `mov to, value; xor eax,
    /// eax`, then the epilogue itself in place of the jump to it. The
    /// value is moved first, so that it may be in `eax`.
    ///
    /// The epilogue is known only at `end`, so the return leaves `room`
    /// bytes for it: the length of the epilogue of a frame that saves
    /// `saves` (the callee-saved registers the function uses so far; a
    /// client such as the jive JIT claims its registers before its
    /// code), at least a `jmp` (5). `end` writes the epilogue there where
    /// it fits, or the `jmp epilogue` where the function came to save
    /// more; the bytes after either are `int3`s, never run.
    pub(crate) fn ret_zero_with(&mut self, m: &'static str, value: Src, to: u8, room: usize) {
        if let Err(kind) = self.st.note_ret(Ty::I) {
            return self.buf.fail(m, kind);
        }
        match value {
            // `mov to32, r32`, even from `to` itself: it clears the upper
            // half, which `mov` skips for a register moved to itself.
            Src::R(r) => self.rr(0, false, 0x89, 1, r, to, false),
            Src::I(k) => self.movi(false, to, i64::from(k as i32)),
        }
        self.movi(false, RAX, 0);
        let at = self.buf.pos();
        for _ in 0..room {
            self.buf.put1(0xcc);
        }
        self.inline_rets.push((at as u32, room as u8));
    }

    /// The room [`X64::ret_zero_with`] leaves for the epilogue of a
    /// function that saves `saves` (integer, `xmm`): its length, at least
    /// a `jmp`'s 5 bytes, at most a [`FrameSlot`]'s.
    pub(crate) fn inline_epilogue_room(&self, saves: [u16; 2]) -> usize {
        let lens = if self.sp_size == 0 {
            frame_lens(saves)
        } else {
            sp_frame_lens(saves)
        };
        lens.1.clamp(5, FRAME_MAX)
    }

    #[inline(always)]
    fn link(
        &mut self,
        alloc: &RegAlloc,
        sig: &'static Signature,
        name: Option<String>,
        mem: Option<&dyn ExecMemory>,
    ) -> Result<Code, Error> {
        if self.buf.err.is_some() {
            return Err(self.buf.err.take().expect("an error"));
        }
        if self.pending != 0 {
            return Err(self.unplaced_error());
        }
        // A function whose body ends in `jmp epilogue` falls through
        // instead, unless a label was placed after it (branches to it are
        // patched already): the jump is the head of the chain of returns,
        // and the rest of the chain is the head before it.
        if let Some((at, rest)) = self.last_ret
            && at + 5 == self.buf.pos()
            && self.st.last_place as usize <= at
        {
            debug_assert_eq!(self.ret_head as usize, at + 1);
            self.ret_head = rest;
            self.buf.truncate(at);
        }
        // The common cases: no constants, no jump tables, no alignment, in
        // this backend's run of the default memory. The code is written
        // straight into the run's writable view (dual-mapped: nothing to
        // seal), and the block is built straight into the `Code`.
        let simple = self.st.pool.is_empty()
            && self.tables.is_empty()
            && self.st.align == 1
            && mem.is_none()
            && self.inline_rets.is_empty();
        if !simple {
            return self.link_general(alloc, sig, name, mem);
        }
        // Inline: no frame (nothing saved, no locals, no stack parameters).
        // The code is the body and a `ret`.
        if !self.st.frame && !alloc.uses_callee_saved() && self.st.locals == 0 {
            let body_len = self.buf.pos();
            if let Some(r) = self.st.slab.reserve(body_len + 1) {
                // Every return returns in place.
                let mut h = self.ret_head;
                while h != NO_LINK {
                    let next = self.buf.read4(h as usize);
                    self.buf.patch1(h as usize - 1, 0xc3);
                    self.buf.patch4(h as usize, 0xcccc_cccc);
                    h = next;
                }
                crate::mem::copy_to(r.out, self.buf.bytes());
                r.out[body_len] = 0xc3;
                let lay = Layout::plain(body_len);
                let ret = self.st.ret_ty.unwrap_or(Ty::V);
                return Ok(code(r.into_block(), lay, sig, name, ret));
            }
            return self.link_general(alloc, sig, name, mem);
        }
        if self.sp_size != 0 {
            return self.link_general(alloc, sig, name, mem);
        }
        self.link_framed(alloc, sig, name)
    }

    /// `end` for a function with a frame and nothing else (no constants,
    /// jump tables or alignment, the default memory): prologue, body and
    /// epilogue copied straight into the slab's run, the frame from its
    /// [`FrameSlot`] (filled on a miss). Out of line, so that the
    /// frameless path inlined into `end` stays small; a call is a small
    /// part of a frame's cost.
    #[inline(never)]
    fn link_framed(
        &mut self,
        alloc: &RegAlloc,
        sig: &'static Signature,
        name: Option<String>,
    ) -> Result<Code, Error> {
        let size = self.st.frame_size();
        let float_ret = matches!(self.st.ret_ty, Some(Ty::F | Ty::D));
        let key = u64::from(alloc.used_callee_raw()) | u64::from(size | u32::from(float_ret)) << 32;
        let at = FrameSlot::index(key);
        if self.frames[at].key != key {
            match FrameSlot::fill(key, self.st.saves(alloc, RAX), size) {
                Some(slot) => self.frames[at] = slot,
                None => return self.link_general(alloc, sig, name, None),
            }
        }
        let slot = &self.frames[at];
        if !self.st.needs_frame(slot.saves) {
            // Only xmm0 was touched, and it carries a float result out.
            return self.link_general(alloc, sig, name, None);
        }
        let body_len = self.buf.pos();
        let (pro_len, epi_len) = (usize::from(slot.pro_len), usize::from(slot.epi_len));
        let total = pro_len + body_len + epi_len;
        let Some(r) = self.st.slab.reserve(total) else {
            return self.link_general(alloc, sig, name, None);
        };
        // Every return jumps to the epilogue.
        let mut h = self.ret_head;
        while h != NO_LINK {
            let next = self.buf.read4(h as usize);
            self.buf
                .patch4(h as usize, (body_len as u32).wrapping_sub(h + 4));
            h = next;
        }
        let (pro, rest) = r.out.split_at_mut(pro_len);
        let (body, epi) = rest.split_at_mut(body_len);
        crate::mem::copy_short(pro, &slot.pro[..pro_len]);
        crate::mem::copy_to(body, self.buf.bytes());
        crate::mem::copy_short(epi, &slot.epi[..epi_len]);
        let lay = Layout::framed(slot.saves, size, pro_len, body_len, epi_len);
        let ret = self.st.ret_ty.unwrap_or(Ty::V);
        Ok(code(r.into_block(), lay, sig, name, ret))
    }

    /// `end` for every other function: constants, jump tables,
    /// alignment, or a block from the client's allocator or (where
    /// `memfd_create` is refused) a mapping of its own, sealed once
    /// written.
    #[inline(never)]
    fn link_general(
        &mut self,
        alloc: &RegAlloc,
        sig: &'static Signature,
        name: Option<String>,
        mem: Option<&dyn ExecMemory>,
    ) -> Result<Code, Error> {
        if !self.tables.is_empty() {
            let entries = self.tables.iter().map(|f| (f.label, f.index, f.method()));
            let labels = &self.labels;
            check_tables(entries, |l| {
                labels.get(l as usize).map(|&w| w & UNPLACED == 0)
            })?;
        }
        let end_index = self.buf.index().wrapping_add(1);
        if self.sp_size != 0 && self.st.frame_size() > self.sp_size {
            // Locals past the room `frame_from_sp` allowed, which the
            // body addressed below the stack pointer.
            return Err(Error::new(
                end_index,
                "end",
                ErrorKind::Unsupported("locals past the frame_from_sp room"),
            ));
        }
        let lay = self.layout(alloc);
        let ret = self.st.ret_ty.unwrap_or(Ty::V);
        let (body, pool) = (self.buf.bytes(), &self.st.pool[..]);
        let (tables, labels) = (&self.tables[..], &self.labels[..]);
        let inline = &self.inline_rets[..];
        if mem.is_none()
            && let Some(r) = self.st.slab.reserve(lay.total)
        {
            write_code(r.out, r.exec, lay, body, pool, tables, labels, inline);
            return Ok(code(r.into_block(), lay, sig, name, ret));
        }
        let err = |kind| Error::new(end_index, "end", kind);
        let mut block = match mem {
            Some(m) => m.alloc(lay.total),
            None => self.st.slab.alloc(lay.total),
        }
        .map_err(err)?;
        let exec = block.addr();
        block
            .fill_with(lay.total, |out| {
                write_code(out, exec, lay, body, pool, tables, labels, inline)
            })
            .map_err(err)?;
        Ok(code(block, lay, sig, name, ret))
    }

    /// Decides the frame and where each part goes, and backpatches the
    /// returns and the constants' references in the body (which does not
    /// move: its position in the block is known before the block is).
    #[inline(always)]
    fn layout(&mut self, alloc: &RegAlloc) -> Layout {
        let body_len = self.buf.pos();
        let saves = self.st.saves(alloc, RAX);
        let frame = self.st.needs_frame(saves);
        // Padding and prologue, so that body positions keep the alignment
        // `align` (a power of two) asked for (the padding first, where it
        // is not executed); body; epilogue; constants, 8-byte aligned.
        let (pro_len, epi_len) = match (frame, self.sp_size) {
            (false, _) => (0, 1),
            (true, 0) => frame_lens(saves),
            (true, _) => sp_frame_lens(saves),
        };
        let pro_total = (pro_len + self.st.align - 1) & !(self.st.align - 1);
        let code_len = pro_total + body_len + epi_len;
        // Body-relative, as the rip-relative references are.
        let pool_at = (body_len + epi_len + 7) & !7;
        let total = if self.st.pool.is_empty() {
            code_len
        } else {
            pro_total + pool_at + self.st.pool.len()
        };
        // Backpatch the returns (every label's references were patched
        // when it was placed).
        let epi_at = body_len as u32;
        let mut h = self.ret_head;
        while h != NO_LINK {
            let next = self.buf.read4(h as usize);
            if frame {
                self.buf.patch4(h as usize, epi_at.wrapping_sub(h + 4));
            } else {
                // The epilogue is a bare `ret`: return in place.
                self.buf.patch1(h as usize - 1, 0xc3);
                self.buf.patch4(h as usize, 0xcccc_cccc);
            }
            h = next;
        }
        // A return with the epilogue in place whose room is too short for
        // it (the function came to save more than when the return was
        // made) jumps to it instead (`write_code` fills the others).
        for &(at, room) in &self.inline_rets {
            if epi_len > usize::from(room) {
                self.buf.patch1(at as usize, 0xe9);
                self.buf
                    .patch4(at as usize + 1, epi_at.wrapping_sub(at + 5));
            }
        }
        for &(at, idx) in &self.pool_refs {
            let target = pool_at as u32 + 8 * idx;
            self.buf.patch4(at as usize, target.wrapping_sub(at + 4));
        }
        Layout {
            frame: frame.then(|| FrameLayout {
                saves,
                size: if self.sp_size == 0 {
                    self.st.frame_size()
                } else {
                    self.sp_size
                },
                sp: self.sp_size != 0,
            }),
            pro_len,
            pro_total,
            body_len,
            epi_len,
            pool_at,
            code_len,
            total,
        }
    }
}

/// Where `end` puts a function's parts, decided before its block is
/// allocated. Offsets are from the start of the block except `pool_at`,
/// which is from the start of the body.
#[derive(Copy, Clone)]
struct Layout {
    frame: Option<FrameLayout>,
    pro_len: usize,
    pro_total: usize,
    body_len: usize,
    epi_len: usize,
    pool_at: usize,
    code_len: usize,
    total: usize,
}

impl Layout {
    /// Where the code starts in the block: after the padding that puts the
    /// body at the alignment `align` asked for (less than 64 bytes, never
    /// executed).
    #[inline(always)]
    fn start(&self) -> usize {
        self.pro_total - self.pro_len
    }

    /// The layout of a function without frame, constants or alignment:
    /// its body and a `ret`.
    #[inline(always)]
    fn plain(body_len: usize) -> Layout {
        Layout {
            frame: None,
            pro_len: 0,
            pro_total: 0,
            body_len,
            epi_len: 1,
            pool_at: (body_len + 8) & !7,
            code_len: body_len + 1,
            total: body_len + 1,
        }
    }
}

impl Layout {
    /// The layout of a function with a frame but no constants or
    /// alignment: prologue, body, epilogue.
    #[inline(always)]
    fn framed(
        saves: [u16; 2],
        size: u32,
        pro_len: usize,
        body_len: usize,
        epi_len: usize,
    ) -> Layout {
        let code_len = pro_len + body_len + epi_len;
        Layout {
            frame: Some(FrameLayout {
                saves,
                size,
                sp: false,
            }),
            pro_len,
            pro_total: pro_len,
            body_len,
            epi_len,
            pool_at: (body_len + epi_len + 7) & !7,
            code_len,
            total: code_len,
        }
    }
}

/// The frame of a function that has one: the registers it saves (integer,
/// `xmm`) and its size.
#[derive(Copy, Clone)]
struct FrameLayout {
    saves: [u16; 2],
    size: u32,
    /// Framed from the stack pointer ([`X64::frame_from_sp`]).
    sp: bool,
}

/// Writes a function into `out`, the writable view of its block (`lay.total`
/// bytes), which runs at `exec`: the prologue and epilogue straight from
/// the layout, the body, the epilogue again at each return of `inline`
/// whose room holds it ([`X64::ret_zero_with`]), the constants, and the
/// jump tables' absolute addresses (their labels are known to be placed).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn write_code(
    out: &mut [u8],
    exec: usize,
    lay: Layout,
    body: &[u8],
    pool: &[u8],
    tables: &[Fixup],
    labels: &[u32],
    inline: &[(u32, u8)],
) {
    // The alignment padding goes before the prologue, where it is never
    // executed (the entry is past it: `Layout::start`), not between the
    // prologue and the body, where every call would run its no-ops.
    let pad = lay.start();
    out[..pad].fill(0xcc);
    // The frame first: its stores may write a byte past a save, which the
    // rest then overwrites.
    if let Some(f) = lay.frame {
        let epi_at = lay.pro_len + lay.body_len;
        if f.sp {
            write_sp_frame(&mut out[pad..], epi_at, f.size, f.saves);
        } else {
            write_frame(&mut out[pad..], lay.pro_len, epi_at, f.size, f.saves);
        }
    }
    let (_, rest) = out.split_at_mut(lay.pro_total);
    let (code, rest) = rest.split_at_mut(lay.body_len);
    let (epi, rest) = rest.split_at_mut(lay.epi_len);
    epi[lay.epi_len - 1] = 0xc3; // ret
    crate::mem::copy_to(code, body);
    for &(at, room) in inline {
        if lay.epi_len <= usize::from(room) {
            let at = at as usize;
            code[at..at + lay.epi_len].copy_from_slice(&epi[..lay.epi_len]);
        }
    }
    if !pool.is_empty() {
        let (pad, consts) = rest.split_at_mut(lay.pool_at - lay.body_len - lay.epi_len);
        pad.fill(0xcc);
        crate::mem::copy_to(consts, pool);
    }
    if !tables.is_empty() {
        let body_at = (exec + lay.pro_total) as u64;
        for f in tables {
            let addr = body_at + u64::from(labels[f.label as usize]);
            code[f.at as usize..f.at as usize + 8].copy_from_slice(&addr.to_le_bytes());
        }
    }
}

/// A function generated by the x86-64 backend (its accessors are
/// [`crate::code::Code`]'s). Dropping it frees the code.
pub type Code = crate::code::Code<X64>;

/// The function in `block`, laid out as `lay`; registered in the perf map
/// if that is on.
#[inline(always)]
fn code(
    block: crate::mem::ExecBlock,
    lay: Layout,
    sig: &'static Signature,
    name: Option<String>,
    ret: Ty,
) -> Code {
    let start = lay.start();
    crate::debug::register(block.addr() + start, lay.code_len - start, name.as_deref());
    let parts = Parts {
        start,
        image_len: lay.total - start,
        prologue: lay.pro_len,
        body: lay.body_len,
        code_len: lay.code_len - start,
    };
    Code::new(block, parts, sig, name, ret)
}

impl Code {
    /// A listing of the machine code, with the vcode function's parts marked.
    pub fn disassemble(&self) -> String {
        self.disassemble_marked(&[(0, "body".to_string())])
    }

    /// [`Code::disassemble`] with the client's own headings: `marks` are
    /// (body offset as given by [`Func::code_offset`](crate::Func::code_offset), title),
    /// in increasing order.
    pub fn disassemble_marked(&self, marks: &[(usize, String)]) -> String {
        let all = self.headings(marks);
        crate::debug::disassemble(self.bytes(), self.addr() as u64, &all)
    }
}

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fmt_titled(f, "Code")
    }
}

// ===========================================================================
// 7. Extensions (native encoders for `ext`)
// ===========================================================================

impl X64 {
    /// Starts an extension instruction.
    #[inline(always)]
    pub fn insn(&mut self, m: &'static str) {
        self.buf.insn(m);
    }

    /// `movaps`/`mov` of the right width, for extension sequences.
    #[inline(always)]
    pub fn copy(&mut self, ty: Ty, rd: u8, rs: u8) {
        if ty.is_float() {
            self.fmov(rd, rs)
        } else {
            self.mov(ty.is_64(), rd, rs)
        }
    }

    /// `sub r, 1; jb label` (64-bit): a countdown's step and its branch on
    /// borrow, which the CPU fuses into one operation
    /// ([`Countdown`](crate::ext::Countdown)).
    pub(crate) fn countdown(&mut self, r: u8, label: u32) {
        self.alu_ri(Alu::Sub, true, r, 1);
        self.jump_to(FIX_COUNTDOWN, Some(0x02), label);
    }

    /// `sub r, k; jb label` (`borrow`) or `sub r, k; jae label`
    /// ([`Countdown::sub_branch`](crate::ext::Countdown::sub_branch)).
    pub(crate) fn sub_branch(&mut self, r: u8, k: i32, borrow: bool, label: u32) {
        self.alu_ri(Alu::Sub, true, r, k);
        let cc = if borrow { 0x02 } else { 0x03 };
        self.jump_to(FIX_SUB_BRANCH, Some(cc), label);
    }

    /// `cmp r, 1; jo label`: a branch taken exactly when the 64-bit `r` is
    /// `i64::MIN`, the one value whose `r - 1` overflows
    /// ([`MinTest::beq_min`](crate::ext::MinTest::beq_min)).
    pub(crate) fn branch_min(&mut self, r: u8, label: u32) {
        self.alu_ri(Alu::Cmp, true, r, 1);
        self.jump_to(FIX_MIN, Some(0x00), label);
    }

    /// `sub qword [rbp + off], 1; jb label`: a countdown kept in a stack
    /// local ([`Countdown::dec_local_branch_borrow`](crate::ext::Countdown::dec_local_branch_borrow)).
    pub(crate) fn countdown_local(&mut self, m: &'static str, off: i32, id: u32, label: u32) {
        if !self.st.local_ok(off, id) {
            return self.buf.fail(m, ErrorKind::UnknownLocal { id });
        }
        self.st.frame = true;
        let (base, off) = self.frame_at(off);
        self.rm(0, true, 0x83, 1, 5, base, None, off, false);
        self.buf.put1(1);
        self.jump_to(FIX_COUNTDOWN, Some(0x02), label);
    }

    /// `cmp r, [rbp + off]; jcc label` for an integer type
    /// ([`LocalCompare`](crate::ext::LocalCompare)).
    pub(crate) fn branch_local(
        &mut self,
        m: &'static str,
        c: Cond,
        ty: Ty,
        r: u8,
        (off, id): (i32, u32),
        label: u32,
    ) {
        if !self.st.local_ok(off, id) {
            return self.buf.fail(m, ErrorKind::UnknownLocal { id });
        }
        self.st.frame = true;
        let (base, off) = self.frame_at(off);
        self.rm(0, ty.is_64(), 0x3b, 1, r, base, None, off, false);
        self.jump_to(c as u8, Some(jcc(c, ty.is_signed())), label);
    }

    /// `cmp r, [base + disp]; jcc label` (`r` given), or `cmp [base +
    /// disp], imm; jcc label` (`r` none), for an integer type of 4 or 8
    /// bytes ([`MemCompare`](crate::ext::MemCompare)).
    pub(crate) fn branch_mem(
        &mut self,
        c: Cond,
        ty: Ty,
        r: Option<u8>,
        (base, disp): (u8, i32),
        imm: i32,
        label: u32,
    ) {
        let w = ty.is_64();
        match r {
            // cmp r, r/m (3b /r)
            Some(r) => self.rm(0, w, 0x3b, 1, r, base, None, disp, false),
            None if (-128..=127).contains(&imm) => {
                // cmp r/m, imm8 (83 /7 ib)
                self.rm(0, w, 0x83, 1, 7, base, None, disp, false);
                self.buf.put1(imm as u8);
            }
            None => {
                // cmp r/m, imm32 (81 /7 id)
                self.rm(0, w, 0x81, 1, 7, base, None, disp, false);
                self.buf.put4(imm as u32);
            }
        }
        self.jump_to(c as u8, Some(jcc(c, ty.is_signed())), label);
    }

    /// `sqrtss`/`sqrtsd rd, rs`.
    #[inline(always)]
    pub fn sqrt(&mut self, ty: Ty, rd: u8, rs: u8) {
        self.rr(
            if ty == Ty::F { 0xf3 } else { 0xf2 },
            false,
            0x510f,
            2,
            rd,
            rs,
            false,
        );
    }

    /// `minss`/`maxss`/`minsd`/`maxsd rd, rs` (`max` when `max`).
    #[inline(always)]
    pub fn fminmax(&mut self, ty: Ty, max: bool, rd: u8, rs: u8) {
        self.rr(
            if ty == Ty::F { 0xf3 } else { 0xf2 },
            false,
            if max { 0x5f0f } else { 0x5d0f },
            2,
            rd,
            rs,
            false,
        );
    }

    /// Byte swap of the low 16, 32 or 64 bits of `rd`, in place; the
    /// 16-bit form zero-extends.
    #[inline(always)]
    pub fn bswap(&mut self, bits: u32, rd: u8) {
        match bits {
            16 => {
                // rol r16, 8; movzx r32, r16
                self.rr(0x66, false, 0xc1, 1, 0, rd, false);
                self.buf.put1(8);
                self.rr(0, false, 0xb70f, 2, rd, rd, false);
            }
            _ => {
                let rex = 0x40 | ((bits == 64) as u8) << 3 | (rd >> 3);
                let (word, n) = if rex != 0x40 {
                    (rex as u64 | 0x0f << 8 | ((0xc8 | (rd & 7)) as u64) << 16, 3)
                } else {
                    (0x0f | ((0xc8 | (rd & 7)) as u64) << 8, 2)
                };
                self.buf.put(word, n);
            }
        }
    }

    /// `popcnt rd, rs`.
    #[inline(always)]
    pub fn popcnt(&mut self, w: bool, rd: u8, rs: u8) {
        self.rr(0xf3, w, 0xb80f, 2, rd, rs, false);
    }

    /// `rd = a < b ? a : b` (`max`: `a > b ? a : b`), by `cmov` for
    /// integers and `minss`/`maxss` (which compute exactly that) for floats.
    pub fn minmax(&mut self, ty: Ty, max: bool, rd: u8, a: u8, b: u8) {
        if ty.is_float() {
            // minss/maxss do not commute (NaNs, signed zeros).
            let p = if ty == Ty::F { 0xf3 } else { 0xf2 };
            return self.sse3(p, if max { 0x5f0f } else { 0x5d0f }, false, rd, a, b);
        }
        let (w, s) = (ty.is_64(), ty.is_signed());
        if rd == b && rd != a {
            // rd holds b: take a where a wins.
            self.alu_rr(Alu::Cmp, w, a, b);
            let cc = jcc(if max { Cond::Gt } else { Cond::Lt }, s);
            self.rr(0, w, 0x400f | (cc as u32) << 8, 2, rd, a, false);
        } else {
            // rd holds a: take b where a does not win.
            self.mov(w, rd, a);
            self.alu_rr(Alu::Cmp, w, rd, b);
            let cc = jcc(if max { Cond::Le } else { Cond::Ge }, s);
            self.rr(0, w, 0x400f | (cc as u32) << 8, 2, rd, b, false);
        }
    }

    /// `test c, c` then `cmovne rd, a` (select helper: rd already holds the
    /// "false" value).
    #[inline(always)]
    pub fn test_cmovnz(&mut self, w: bool, c: u8, rd: u8, a: u8) {
        self.rr(0, w, 0x85, 1, c, c, false);
        self.rr(0, w, 0x400f | (CC_NE as u32) << 8, 2, rd, a, false);
    }

    /// `test c, c` then `cmove rd, b` (select helper: rd already holds the
    /// "true" value).
    #[inline(always)]
    pub fn test_cmovz(&mut self, w: bool, c: u8, rd: u8, b: u8) {
        self.rr(0, w, 0x85, 1, c, c, false);
        self.rr(0, w, 0x400f | (CC_E as u32) << 8, 2, rd, b, false);
    }

    /// `add rd, rs; adc rd, 0` (64-bit): ones'-complement addition.
    #[inline(always)]
    pub fn add_end_around(&mut self, w: bool, rd: u8, rs: u8) {
        self.alu_rr(Alu::Add, w, rd, rs);
        self.rr(0, w, 0x83, 1, 2, rd, false);
        self.buf.put1(0);
    }

    /// Moves `rs` to scratch `r11` and returns it, when `rs == rd` would
    /// be clobbered by a two-step sequence.
    #[inline(always)]
    pub fn scratch_copy(&mut self, w: bool, rs: u8) -> u8 {
        self.mov(w, R11, rs);
        R11
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every save and restore `write_frame` stores from its table, decoded
    /// by iced-x86: the instruction, the register, the slot, in order, at
    /// the lengths `frame_lens` predicts (and so with nothing left over
    /// from the one-byte overlaps of its stores).
    #[test]
    fn frames_save_and_restore_every_register_at_its_slot() {
        for saves in [
            [0u16, 0],
            [0xffff, 0],
            [0, 0xffff],
            [0xffff, 0xffff],
            [0x8421, 0x1248],
            [0x0008, 0x0100],
            [0x0100, 0x0001],
        ] {
            // A one-byte body between them, as the caller writes it after,
            // or none (the prologue's last store may reach the epilogue).
            for body in [1, 0] {
                let (pro_len, epi_len) = frame_lens(saves);
                let mut out = vec![0xaa; pro_len + body + epi_len];
                write_frame(&mut out, pro_len, pro_len + body, 0x1234, saves);
                if body == 1 {
                    out[pro_len] = 0x90;
                }
                out[pro_len + body + epi_len - 1] = 0xc3;
                let text = crate::debug::disassemble(&out, 0, &[]);
                let lines: Vec<&str> = text.lines().map(|l| l[31..].trim()).collect();
                let mut want = vec![
                    "push    rbp".to_string(),
                    "mov     rbp,rsp".to_string(),
                    "sub     rsp,1234h".to_string(),
                ];
                // iced's numbers: decimal below 10, else hex with a leading 0
                // before a letter.
                let num = |v: i32| match v {
                    0..=9 => v.to_string(),
                    _ => match format!("{v:X}h") {
                        h if h.starts_with(|c: char| c.is_ascii_alphabetic()) => format!("0{h}"),
                        h => h,
                    },
                };
                let mut restores = Vec::new();
                for n in 0..16u8 {
                    if saves[0] & (1 << n) != 0 {
                        let (r, slot) = (SysV.reg_name(false, n), num(-regfile::gpr_save_slot(n)));
                        want.push(format!("mov     [rbp-{slot}],{r}"));
                        restores.push(format!("mov     {r},[rbp-{slot}]"));
                    }
                    if saves[1] & (1 << n) != 0 {
                        let (r, slot) = (SysV.reg_name(true, n), num(-regfile::xmm_save_slot(n)));
                        want.push(format!("movdqu  [rbp-{slot}],{r}"));
                        restores.push(format!("movdqu  {r},[rbp-{slot}]"));
                    }
                }
                if body == 1 {
                    want.push("nop".into());
                }
                want.extend(restores);
                want.extend(["leave".to_string(), "ret".to_string()]);
                assert_eq!(lines, want, "{saves:x?}, body {body}\n{text}");
            }
        }
    }

    /// `end`'s inline paths (no frame; a frame) write what the general
    /// path, which `end_in` takes with any other memory, writes: the same
    /// bytes, and code that runs.
    #[test]
    fn the_inline_paths_write_what_the_general_path_writes() {
        use crate::{Class, Func, I, Invoke, Leaf};
        type Body = fn(&mut Func) -> crate::Result<()>;
        let bodies: [(&str, Body); 6] = [
            ("frameless", |f| {
                let p = f.lambda("%i", Leaf::Yes)?.get::<I>(0)?;
                f.add(p, p, 1);
                f.ret(p);
                Ok(())
            }),
            ("one callee-saved register", |f| {
                let p = f.lambda("%i", Leaf::No)?.get::<I>(0)?;
                let r = f.getreg::<I>(Class::Persistent)?;
                f.add(r, p, 1);
                f.ret(r);
                Ok(())
            }),
            ("every callee-saved register, two returns", |f| {
                let p = f.lambda("%i", Leaf::No)?.get::<I>(0)?;
                let mut rs = Vec::new();
                while let Ok(r) = f.getreg::<I>(Class::Persistent) {
                    f.add(r, p, rs.len() as i32);
                    rs.push(r);
                }
                let l = f.genlabel();
                f.bge(p, 10, l);
                f.ret(rs[1]);
                f.label(l);
                f.ret(rs[rs.len() - 1]);
                Ok(())
            }),
            ("a local and an empty body", |f| {
                f.lambda("", Leaf::Yes)?;
                let _ = f.local::<I>();
                f.retv();
                Ok(())
            }),
            ("stack parameters", |f| {
                let ps = f.lambda("%i%i%i%i%i%i%i%i", Leaf::Yes)?;
                let (a, b) = (ps.get::<I>(6)?, ps.get::<I>(7)?);
                f.add(a, a, b);
                f.add(a, a, 1);
                f.ret(a);
                Ok(())
            }),
            ("a local", |f| {
                let p = f.lambda("%i", Leaf::Yes)?.get::<I>(0)?;
                let l = f.local::<I>();
                f.st_local(p, l);
                f.add(p, p, 1);
                f.ret(p);
                Ok(())
            }),
        ];
        let arena = crate::mem::Arena::new();
        let mut f = Func::new();
        for (what, body) in bodies {
            body(&mut f).unwrap();
            let inline = f.end().unwrap();
            body(&mut f).unwrap();
            let general = f.end_in(&arena).unwrap();
            assert_eq!(
                inline.bytes(),
                general.bytes(),
                "{what}\n{}\n{}",
                inline.disassemble(),
                general.disassemble()
            );
            let args: Vec<Value> = (0..inline.params().len() as i32).map(Value::I).collect();
            let want = if args.len() == 8 { 14 } else { 1 };
            // SAFETY: the functions only read their parameters and their
            // own frame.
            let (a, b) = unsafe { (inline.invoke(&args), general.invoke(&args)) };
            assert_eq!(a.unwrap(), b.unwrap(), "{what}");
            if what != "a local and an empty body" && !what.starts_with("every") {
                // SAFETY: as above.
                let got = unsafe { inline.invoke(&args) };
                assert_eq!(got.unwrap(), Value::I(want), "{what}");
            }
        }
    }

    /// `end`'s frame slots: frames of every subset of the fixed
    /// callee-saved registers, with and without locals, with an integer
    /// and a float result, under the default registers and with every
    /// register callee-saved (`xmm` saves, frames too long for a slot),
    /// in an order that revisits, collides and evicts slots, are the
    /// bytes the general path writes and run.
    #[test]
    fn frame_slots_write_what_the_general_path_writes() {
        use crate::{Class, D, Func, I, Invoke, Leaf, RegConfig, host};
        let arena = crate::mem::Arena::new();
        let mut f = Func::new();
        // The cases: (config, saved subset, locals, float result, many xmm).
        let mut cases = Vec::new();
        for all in [false, true] {
            for subset in 0..1u32 << host::NUM_S {
                for locals in [0, 1, 3] {
                    for float in [false, true] {
                        cases.push((all, subset, locals, float, false));
                    }
                }
            }
            cases.push((all, 0b10101, 1, true, true));
        }
        // Three rounds, each in a different order.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut order = Vec::new();
        for _ in 0..3 {
            let mut round: Vec<usize> = (0..cases.len()).collect();
            for i in (1..round.len()).rev() {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                round.swap(i, (seed % (i as u64 + 1)) as usize);
            }
            order.extend(round);
        }
        let body = |f: &mut Func, (_, subset, locals, float, xmm): (bool, u32, i32, bool, bool)| {
            let p = f.lambda(if float { "%i%d" } else { "%i" }, Leaf::No)?;
            let (x, d) = (
                p.get::<I>(0)?,
                if float { Some(p.get::<D>(1)?) } else { None },
            );
            let mut want = 1i64;
            for k in 0..host::NUM_S {
                if subset & (1 << k) != 0 {
                    let s = f.reserve(crate::Reg::<I>::s(k))?;
                    f.mov(s, x);
                    f.add(x, x, s);
                    want *= 2;
                }
            }
            for _ in 0..locals {
                let l = f.local::<I>();
                f.st_local(x, l);
                f.ld_local(x, l);
            }
            if xmm {
                while let Ok(r) = f.getreg::<D>(Class::Temp) {
                    f.mov(r, d.expect("a float parameter"));
                }
            }
            match d {
                Some(d) => f.ret(d),
                None => f.ret(x),
            }
            Ok::<_, crate::Error>(want)
        };
        for &i in &order {
            let case = cases[i];
            f.set_config(if case.0 {
                RegConfig::all_callee_saved()
            } else {
                RegConfig::default()
            });
            let want = body(&mut f, case).unwrap();
            let inline = f.end().unwrap();
            body(&mut f, case).unwrap();
            let general = f.end_in(&arena).unwrap();
            assert_eq!(
                inline.bytes(),
                general.bytes(),
                "{case:?}\n{}\n{}",
                inline.disassemble(),
                general.disassemble()
            );
            let args = [Value::I(1), Value::D(2.5)];
            let args = &args[..inline.params().len()];
            // SAFETY: the functions only read their parameters and their
            // own frame, and restore what they save.
            let got = unsafe { inline.invoke(args) }.unwrap();
            let expect = if case.3 {
                Value::D(2.5)
            } else {
                Value::I(want as i32)
            };
            assert_eq!(got, expect, "{case:?}");
        }
    }

    extern "C" fn mix(
        a: i32,
        b: f64,
        c: i64,
        d: f32,
        e: u32,
        f: usize,
        g: i32,
        h: i64,
        i: i32,
        j: f64,
    ) -> f64 {
        a as f64
            + b * 2.0
            + c as f64 * 3.0
            + d as f64 * 4.0
            + e as f64 * 5.0
            + f as f64 * 6.0
            + g as f64 * 7.0
            + h as f64 * 8.0
            + i as f64 * 9.0
            + j * 10.0
    }

    extern "C" fn nine(
        a: i64,
        b: i64,
        c: i64,
        d: i64,
        e: i64,
        f: i64,
        g: i64,
        h: i64,
        i: i64,
    ) -> i64 {
        a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i
    }

    #[test]
    fn calls_with_a_run_time_signature_reach_registers_and_stack() {
        let args = [
            Value::I(1),
            Value::D(0.5),
            Value::L(-2),
            Value::F(1.5),
            Value::U(3),
            Value::P(4),
            Value::I(5),
            Value::L(6),
            Value::I(7),
            Value::D(0.25),
        ];
        // SAFETY: `mix` has exactly these parameter types and returns f64.
        let got = unsafe { call_native(mix as *const () as usize, &args, Ty::D) };
        assert_eq!(got, Value::D(mix(1, 0.5, -2, 1.5, 3, 4, 5, 6, 7, 0.25)));
        let args: Vec<Value> = (1..=9).map(Value::L).collect();
        // SAFETY: `nine` takes nine i64 and returns i64.
        let got = unsafe { call_native(nine as *const () as usize, &args, Ty::L) };
        assert_eq!(got, Value::L(nine(1, 2, 3, 4, 5, 6, 7, 8, 9)));
    }
}
