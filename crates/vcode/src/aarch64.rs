//! The aarch64 backend (AArch64, Linux AAPCS64): vcode instructions to
//! A64 machine code, in place.
//!
//! The file has the shape of `x86_64.rs`, section by section:
//!
//! 1. **Registers and classes**: [`regfile`]: vcode's register numbers
//!    and the A64 registers they stand for.
//! 2. **Calling convention**: [`Aapcs64`], the [`CallConv`] the
//!    target-neutral parts of vcode see (`lambda`, the reference backend).
//! 3. **Encoders**: the backend's state ([`A64`]) and the A64 instruction
//!    encoders: data processing (register, immediate, logical immediates),
//!    `movz`/`movn`/`movk` for any 64-bit immediate, loads and stores of
//!    every width with any offset, float moves and constants.
//!    With them, the encodings the shared sequences of `common.rs` call
//!    (a call's argument placement, the entry's parameter moves, a call).
//! 4. **Instruction methods**: the [`Backend`] implementation (the
//!    methods every native target writes alike are shared).
//! 5. **Branches and fixups**: `b.cond` (19-bit), `b`/`bl` (26-bit);
//!    forward references chained through their own offset fields and
//!    patched when their label is placed, returns at `end`; islands of
//!    veneers and constants where a function outgrows `b.cond`'s and
//!    `ldr`'s ±1 MiB; jump tables.
//! 6. **Prologue, epilogue and `end`**: the per-function reset, `ret`,
//!    the frame (its size known at `end`) and its encoding, constants,
//!    instruction-cache maintenance, the code written straight into the
//!    backend's run of the executable arena (or the client's memory with
//!    `end_in`), and [`Code`]'s listing and disassembly.
//! 7. **Extensions**: native encoders (`rev`, `cnt`, `fsqrt`, `csel`,
//!    `fmin`/`fmax`) for the `ext` tables.
//!
//! ## Register numbers
//!
//! The register allocator, the fixed names `T<k>`/`S<k>` and `lambda`'s
//! parameter assignment are target-neutral and number registers 0 to 15
//! per file, in the host's numbering (`vcode::host`). This backend gives
//! each of those numbers one A64 register with the same role (argument
//! registers carry the same arguments, callee-saved ones are callee-saved
//! here too), so a client written against the host's names runs unchanged:
//! integer `rdi, rsi, rdx, rcx, r8, r9, r10, r11` are `x0..x7` (the eight
//! AAPCS64 argument registers), `rbx, r12..r15` are `x19..x23`, `rax` is
//! `x8`; float `0..7` are `v0..v7` and `8..15` are `v16..v23` (AAPCS64
//! makes only the low halves of `v8..v15` callee-saved, so vcode leaves them
//! alone). The backend keeps `x9`, `x10`, `x15`, `x16`, `x17` and
//! `v30`/`v31` for its own sequences, `x29` as the frame pointer and `x30`
//! as the link register; `x18` (the platform register) is never touched.
//!
//! ## Semantics chosen where C leaves them open
//!
//! Results agree with the x86-64 backend and the reference backend, with
//! one exception: integer division by zero and `MIN / -1` do not trap on
//! A64 (`sdiv`/`udiv` give 0 and `MIN`, `mod` then gives `a` and 0); the
//! reference backend reports them as faults. Float-to-integer conversions
//! reproduce x86-64's "integer indefinite" results (NaN and out-of-range
//! values give `MIN`; see `docs/vcode.md`) with a few extra instructions
//! around `fcvtzs`, so that every target computes the same values.

use crate::abi::{CallConv, ConvTables, InvokeError};
use crate::backend::{
    Arg, Backend, BinOp, Callee, Cond, LocalOp, MAX_CALL_ARGS, Src, Target, UnOp,
};
use crate::buf::{Buf, MAX_INSN};
use crate::code::Parts;
use crate::common::{
    ArgEmit, CallEmit, FuncState, emit_call, label_error, native_backend_methods, parallel_move,
};
use crate::error::{Error, ErrorKind, Fault, FaultKind};
use crate::mem::ExecMemory;
use crate::regs::RegAlloc;
use crate::sig::Signature;
use crate::ty::{AnyReg, Label, Ty, Value};

// ===========================================================================
// 1. Registers and classes
// ===========================================================================

/// The register file as data. vcode's register numbers (slots 0 to 15 per
/// file, with the roles of the host's numbering; see the module
/// documentation) and the A64 registers they stand for. It imports
/// only the shared save slots (`slots.rs`).
pub mod regfile {
    /// vcode's integer register numbers, named by the A64 register each
    /// stands for.
    #[allow(missing_docs)]
    pub mod gpr {
        pub const X8: u8 = 0;
        pub const X3: u8 = 1;
        pub const X2: u8 = 2;
        pub const X19: u8 = 3;
        pub const SP: u8 = 4;
        pub const FP: u8 = 5;
        pub const X1: u8 = 6;
        pub const X0: u8 = 7;
        pub const X4: u8 = 8;
        pub const X5: u8 = 9;
        pub const X6: u8 = 10;
        pub const X7: u8 = 11;
        pub const X20: u8 = 12;
        pub const X21: u8 = 13;
        pub const X22: u8 = 14;
        pub const X23: u8 = 15;
    }

    use gpr::*;

    /// The A64 integer register of each vcode number (31 is `sp`).
    pub const GPR_PHYS: [u8; 16] = [8, 3, 2, 19, 31, 29, 1, 0, 4, 5, 6, 7, 20, 21, 22, 23];
    /// The A64 vector register of each vcode float number.
    pub const FPR_PHYS: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];

    /// The assembler names of the integer registers, by number.
    pub const GPR_NAMES: [&str; 16] = [
        "x8", "x3", "x2", "x19", "sp", "x29", "x1", "x0", "x4", "x5", "x6", "x7", "x20", "x21",
        "x22", "x23",
    ];
    /// The assembler names of the float registers, by number.
    pub const FPR_NAMES: [&str; 16] = [
        "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v16", "v17", "v18", "v19", "v20", "v21",
        "v22", "v23",
    ];

    /// The names of both files (integer, float), as
    /// [`host::reg_name`](crate::host::reg_name) and the convention's
    /// tables read them.
    pub const NAMES: [&[&str; 16]; 2] = [&GPR_NAMES, &FPR_NAMES];

    /// Integer argument registers (`x0..x7`), in order.
    pub const INT_ARGS: [u8; 8] = [X0, X1, X2, X3, X4, X5, X6, X7];
    /// Float argument registers (`v0..v7`), in order.
    pub const FLOAT_ARGS: [u8; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

    /// vcode numbers that are not handed out (the same as on the host:
    /// the allocator is shared). `x3` and `x7` carry arguments; a parameter
    /// arriving there is copied into a register from `getreg`.
    pub const RESERVED_GPR: u16 = bit(X8) | bit(X3) | bit(X7) | bit(SP) | bit(FP);
    /// Float numbers not handed out.
    pub const RESERVED_XMM: u16 = bit(15);
    /// Callee-saved integer numbers (`x19..x23`).
    pub const CALLEE_SAVED_GPR: u16 = bit(X19) | bit(X20) | bit(X21) | bit(X22) | bit(X23);

    /// Number of fixed temporaries `T0..`.
    pub const NUM_T: usize = 6;
    /// Fixed temporaries (`x6, x5, x4, x2, x1, x0`).
    pub const FIXED_T: [u8; NUM_T] = [X6, X5, X4, X2, X1, X0];
    /// Number of fixed callee-saved names `S0..`.
    pub const NUM_S: usize = 5;
    /// Fixed callee-saved registers (`x19..x23`).
    pub const FIXED_S: [u8; NUM_S] = [X19, X20, X21, X22, X23];
    /// Number of fixed float temporaries.
    pub const NUM_FT: usize = 15;
    /// Fixed float temporaries: `v16..v22`, then `v7..v0`.
    pub const FIXED_FT: [u8; NUM_FT] = [8, 9, 10, 11, 12, 13, 14, 7, 6, 5, 4, 3, 2, 1, 0];
    /// `getreg` order for integer temporaries.
    pub const TEMP_ORDER: [u8; 11] = [X6, X5, X4, X2, X1, X0, X19, X20, X21, X22, X23];
    /// `getreg` order for persistent integer registers.
    pub const PERSIST_ORDER: [u8; 5] = [X19, X20, X21, X22, X23];
    /// `getreg` order for float registers.
    pub const FLOAT_ORDER: [u8; 15] = FIXED_FT;

    /// `bit` and the frame's save slots, the same on every target.
    pub use crate::slots::*;
}

// The roles of the register numbers agree with x86-64's (the shared
// allocator's): checked in `common.rs`.

/// Scratch integer registers (A64 numbers).
const X9: u8 = 9;
const X10: u8 = 10;
const X15: u8 = 15;
const IP0: u8 = 16;
const IP1: u8 = 17;
const FP: u8 = 29;
/// `sp` in address and immediate forms, `xzr` in register forms.
const SP: u8 = 31;
const ZR: u8 = 31;
/// Scratch vector registers.
const V30: u8 = 30;
const V31: u8 = 31;

/// The A64 register of vcode integer number `n`.
#[inline(always)]
fn g(n: u8) -> u8 {
    regfile::GPR_PHYS[(n & 15) as usize]
}
/// The A64 register of vcode float number `n`.
#[inline(always)]
fn v(n: u8) -> u8 {
    regfile::FPR_PHYS[(n & 15) as usize]
}

// ===========================================================================
// 2. Calling convention
// ===========================================================================

/// AAPCS64 as on Linux: eight integer and eight float argument registers,
/// then 8-byte stack slots in order.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Aapcs64;

/// The convention's tables, which [`CallConv`]'s methods and the
/// argument layout read.
const TABLES: ConvTables = ConvTables {
    name: "AAPCS64",
    int_args: &regfile::INT_ARGS,
    float_args: &regfile::FLOAT_ARGS,
    reserved: [regfile::RESERVED_GPR, regfile::RESERVED_XMM],
    callee_saved: [regfile::CALLEE_SAVED_GPR, 0],
    names: regfile::NAMES,
};

impl CallConv for Aapcs64 {
    fn get() -> &'static Self {
        &Aapcs64
    }

    fn tables(&self) -> &'static ConvTables {
        &TABLES
    }

    fn check_call(&self, args: &[Value]) -> Result<(), InvokeError> {
        if args.len() > MAX_CALL_ARGS {
            return Err(InvokeError::Arity {
                expected: MAX_CALL_ARGS,
                found: args.len(),
            });
        }
        if cfg!(feature = "emu") {
            Ok(())
        } else {
            Err(InvokeError::Fault(Fault {
                index: 0,
                method: "call",
                kind: FaultKind::Unsupported(
                    "aarch64 code runs only under emulation (vcode's feature `emu`)",
                ),
            }))
        }
    }

    unsafe fn call(&self, addr: usize, args: &[Value], ret: Ty) -> Value {
        #[cfg(feature = "emu")]
        {
            // SAFETY: forwarded from the caller.
            match unsafe { crate::emu::call(addr, args, ret) } {
                Ok(v) => v,
                Err(_) => Value::from_bits(ret, 0),
            }
        }
        #[cfg(not(feature = "emu"))]
        {
            // check_call refused: never reached.
            let _ = (addr, args);
            Value::from_bits(ret, 0)
        }
    }

    /// Runs generated code under emulation, reporting a fault of the run
    /// (an unmapped access, an undefined instruction) as the error.
    unsafe fn run(&self, addr: usize, args: &[Value], ret: Ty) -> Result<Value, InvokeError> {
        self.check_call(args)?;
        #[cfg(feature = "emu")]
        {
            // SAFETY: forwarded from the caller (the trait's contract).
            unsafe { crate::emu::call(addr, args, ret) }.map_err(|e| {
                InvokeError::Fault(Fault {
                    index: 0,
                    method: "invoke",
                    kind: FaultKind::Unsupported(e.0),
                })
            })
        }
        #[cfg(not(feature = "emu"))]
        {
            // check_call refused: never reached.
            let _ = (addr, ret);
            Err(InvokeError::Fault(Fault {
                index: 0,
                method: "invoke",
                kind: FaultKind::Unsupported(
                    "aarch64 code runs only under emulation (vcode's feature `emu`)",
                ),
            }))
        }
    }
}

// ===========================================================================
// 3. Encoders
// ===========================================================================

/// Default limit on one function's code size: within `b`'s ±128 MiB.
pub const DEFAULT_LIMIT: usize = 64 << 20;

/// The aarch64 backend's per-function state.
pub struct A64 {
    pub(crate) buf: Buf,
    /// One word per label (see [`UNPLACED`]): its position once placed,
    /// until then the newest forward reference to it, the head of a chain
    /// threaded through the code, and its first reference (for errors).
    labels: Vec<u64>,
    /// The labels referenced and not placed yet.
    open_labels: u32,
    /// First references past [`TAIL_INDEX`] instructions: (label, index,
    /// kind).
    far_firsts: Vec<(u32, u32, u8)>,
    /// The newest return (`b epilogue`), the head of the chain of returns,
    /// or [`NO_LINK`].
    ret_head: u32,
    /// No label before this one has a pending forward reference
    /// (`recount` and `island` start their scan here).
    label_scan: usize,
    /// Jump-table entries (`at` is the 4-byte entry, relative to `table`).
    tables: Vec<(Fixup, u32)>,
    /// The `ldr`-literal and `adr` instructions that refer to the pool's
    /// constants and data (`st.pool`: not placed yet, in 8-byte slots
    /// numbered from `pool_base`, for the next island or the end of the
    /// code).
    pool_refs: Vec<PoolRef>,
    /// The slot number of `pool`'s first byte: earlier slots are placed.
    pool_base: u32,
    /// The slots placed in islands: (first slot, body position) of each
    /// island's constants.
    placed: Vec<(u32, u32)>,
    /// The oldest position that may need an island (a forward `b.cond`
    /// or a constant's use), or [`NONE`]; see section 5.
    pending: u32,
    /// At least the number of veneers the next island needs: the labels
    /// with a pending forward `b.cond` when last counted, plus every
    /// forward `b.cond` since.
    veneers: u32,
    /// The state every native target keeps: pool, locals, frame, return
    /// type, alignment, executable memory.
    st: FuncState,
    /// The last return's position and the chain of returns before it.
    last_ret: Option<(usize, u32)>,
    /// After a `select`: (the position just past it, the A64 register it
    /// compared with 0, its width), while the flags still hold that
    /// comparison (see [`A64::select`]).
    flags: Option<(u32, u8, bool)>,
    /// Prologue and epilogue bytes, built by `end` (kept for their capacity).
    pro: Vec<u8>,
    epi: Vec<u8>,
    /// What `pro` and `epi` were built for (the frame, its saves and
    /// size; [`NO_FRAME_KEY`] when they are not to be reused), and their
    /// lengths before padding.
    frame_key: u64,
    frame_lens: (usize, usize),
}

/// A [`A64::frame_key`] no frame has.
const NO_FRAME_KEY: u64 = u64::MAX;

/// A64 condition codes.
const EQ: u8 = 0;
const NE: u8 = 1;
const HS: u8 = 2;
const LO: u8 = 3;
const MI: u8 = 4;
const VC: u8 = 7;
const HI: u8 = 8;
const LS: u8 = 9;
const GE: u8 = 10;
const LT: u8 = 11;
const GT: u8 = 12;
const LE: u8 = 13;

const fn cc_int(c: Cond, signed: bool) -> u8 {
    match (c, signed) {
        (Cond::Lt, true) => LT,
        (Cond::Le, true) => LE,
        (Cond::Gt, true) => GT,
        (Cond::Ge, true) => GE,
        (Cond::Lt, false) => LO,
        (Cond::Le, false) => LS,
        (Cond::Gt, false) => HI,
        (Cond::Ge, false) => HS,
        (Cond::Eq, _) => EQ,
        (Cond::Ne, _) => NE,
    }
}

/// After `fcmp`: ordered comparisons are false on NaN, `!=` is true.
const fn cc_float(c: Cond) -> u8 {
    match c {
        Cond::Lt => MI,
        Cond::Le => LS,
        Cond::Gt => GT,
        Cond::Ge => GE,
        Cond::Eq => EQ,
        Cond::Ne => NE,
    }
}

/// The `sf` bit.
#[inline(always)]
const fn sf(w: bool) -> u32 {
    (w as u32) << 31
}
/// The float `type` field (bit 22): double.
#[inline(always)]
const fn ftype(ty: Ty) -> u32 {
    ((matches!(ty, Ty::D)) as u32) << 22
}

/// The `N:immr:imms` field of a logical immediate, if `v` (64-bit, or the
/// low 32 bits when `!w`) is a rotated run of ones repeated.
///
/// Branch-free but for the two refusals (after Dougall Johnson's
/// encoder): rotate the value right so that a run of ones starts at bit
/// 0; the leading zeros and trailing ones of that are the element's zeros
/// and ones, their sum its size, and the value is a logical immediate
/// exactly when rotating it by the size leaves it unchanged.
#[inline(always)]
pub fn logical_imm(v: u64, w: bool) -> Option<u32> {
    let mask = if w { !0 } else { 0xffff_ffff };
    let x = v & mask;
    // The common masks first: a run of ones from bit 0 (`0xff`,
    // `0x7fff_ffff`), of the element the width gives, not rotated.
    if x & x.wrapping_add(1) == 0 && x != 0 && x != mask {
        let ones = 64 - x.leading_zeros();
        return Some((w as u32) << 12 | (ones - 1));
    }
    let v = if w { v } else { x | x << 32 };
    if v == 0 || v == !0 {
        return None;
    }
    // `v & (v + 1)` clears the ones at the bottom (a run that may wrap
    // around the top): its lowest set bit starts a whole run.
    let rotation = (v & v.wrapping_add(1)).trailing_zeros();
    let normalized = v.rotate_right(rotation);
    let zeros = normalized.leading_zeros();
    let ones = (!normalized).trailing_zeros();
    let size = zeros + ones;
    if v.rotate_right(size & 63) != v {
        return None;
    }
    let imms = ((size << 1).wrapping_neg() | (ones - 1)) & 0x3f;
    let immr = rotation.wrapping_neg() & (size - 1);
    Some((size >> 6) << 12 | immr << 6 | imms)
}

/// The `imm8` of `fmov` (immediate) for float bits, if it has one.
fn fmov_imm8(ty: Ty, bits: u64) -> Option<u32> {
    let (imm8, back) = if ty == Ty::D {
        let i = ((bits >> 63) << 7 | ((bits >> 61) & 1) << 6 | ((bits >> 48) & 0x3f)) as u32;
        let b = (i >> 6 & 1) as u64;
        let exp = ((b ^ 1) << 10) | if b == 1 { 0xff << 2 } else { 0 } | ((i >> 4) & 3) as u64;
        (
            i,
            ((i >> 7) as u64) << 63 | exp << 52 | ((i & 15) as u64) << 48,
        )
    } else {
        let bits = bits & 0xffff_ffff;
        let i = ((bits >> 31) << 7 | ((bits >> 29) & 1) << 6 | ((bits >> 19) & 0x3f)) as u32;
        let b = (i >> 6 & 1) as u64;
        let exp = ((b ^ 1) << 7) | if b == 1 { 0x1f << 2 } else { 0 } | ((i >> 4) & 3) as u64;
        (
            i,
            ((i >> 7) as u64) << 31 | exp << 23 | ((i & 15) as u64) << 19,
        )
    };
    (back == bits).then_some(imm8)
}

/// Load/store opcodes (unsigned-offset form) and their access size (log2).
#[derive(Copy, Clone)]
struct MemOp(u32, u32);

const STRB: MemOp = MemOp(0x3900_0000, 0);
const LDRB: MemOp = MemOp(0x3940_0000, 0);
const LDRSB_X: MemOp = MemOp(0x3980_0000, 0);
const LDRSB_W: MemOp = MemOp(0x39c0_0000, 0);
const STRH: MemOp = MemOp(0x7900_0000, 1);
const LDRH: MemOp = MemOp(0x7940_0000, 1);
const LDRSH_X: MemOp = MemOp(0x7980_0000, 1);
const LDRSH_W: MemOp = MemOp(0x79c0_0000, 1);
const STR_W: MemOp = MemOp(0xb900_0000, 2);
const LDR_W: MemOp = MemOp(0xb940_0000, 2);
const STR_X: MemOp = MemOp(0xf900_0000, 3);
const LDR_X: MemOp = MemOp(0xf940_0000, 3);
const STR_S: MemOp = MemOp(0xbd00_0000, 2);
const LDR_S: MemOp = MemOp(0xbd40_0000, 2);
const STR_D: MemOp = MemOp(0xfd00_0000, 3);
const LDR_D: MemOp = MemOp(0xfd40_0000, 3);
const STR_Q: MemOp = MemOp(0x3d80_0000, 4);
const LDR_Q: MemOp = MemOp(0x3dc0_0000, 4);

/// Words of A64 code, for the prologue and epilogue built at `end`.
trait Sink {
    fn w(&mut self, word: u32);
}
impl Sink for Vec<u8> {
    fn w(&mut self, word: u32) {
        self.extend_from_slice(&word.to_le_bytes());
    }
}
impl Sink for Buf {
    #[inline(always)]
    fn w(&mut self, word: u32) {
        self.put4(word);
    }
}

/// `movz`/`movn`/`movk` (or one `orr` of a logical immediate) for any
/// value: one `movz` or `movn`, else [`movi_long`].
///
/// A compiler's constants are mostly small: a value in the low 16 bits
/// (one `movz`) or its complement there (one `movn`, small negative
/// numbers) is tested first, in a compare each, before the search for a
/// single chunk elsewhere. Literal values fold either way.
#[inline(always)]
fn movi_to(s: &mut impl Sink, w: bool, rd: u8, v: i64) {
    let mask = if w { !0u64 } else { 0xffff_ffff };
    let v = v as u64 & mask;
    let nv = !v & mask;
    if v < 0x1_0000 {
        return s.w(sf(w) | 0x5280_0000 | (v as u32) << 5 | rd as u32);
    }
    // (32-bit `0xffff_0000` is `movz` of its high chunk, as the search
    // finds it.)
    if nv < 0x1_0000 && (w || nv != 0xffff) {
        return s.w(sf(w) | 0x1280_0000 | (nv as u32) << 5 | rd as u32);
    }
    // One 16-bit chunk (at any position) set, the rest 0 (or, for movn, 1).
    // The lowest nonzero chunk's bit position (0 for 0).
    let tz = if v == 0 { 0 } else { v.trailing_zeros() & !15 };
    let tzn = if nv == 0 {
        0
    } else {
        nv.trailing_zeros() & !15
    };
    if v >> tz < 0x1_0000 {
        s.w(sf(w) | 0x5280_0000 | (tz / 16) << 21 | ((v >> tz) as u32) << 5 | rd as u32);
    } else if nv >> tzn < 0x1_0000 {
        s.w(sf(w) | 0x1280_0000 | (tzn / 16) << 21 | ((nv >> tzn) as u32) << 5 | rd as u32);
    } else {
        movi_long(s, w, rd, v);
    }
}

/// [`movi_to`] for values that need more than one `movz`/`movn`: one
/// `orr` of a logical immediate when that is shorter, else `movz` (or
/// `movn` when more chunks are `0xffff` than 0) and a `movk` per other
/// chunk. The chunks that need an instruction are found for all four at
/// once (bit 15 of each 16-bit chunk of a mask, by a carry), not by a loop.
///
/// Inline: a client's immediates are mostly literals, and inlined into
/// its code this folds to the stores of the finished words (out of line
/// it cost about 125 host instructions a call, a tenth of a workload
/// function's generation). A run-time value pays the same work without
/// the call.
#[inline(always)]
fn movi_long(s: &mut impl Sink, w: bool, rd: u8, v: u64) {
    /// Bit 15 of each 16-bit chunk.
    const H: u64 = 0x8000_8000_8000_8000;
    /// Bit 15 of each chunk of `x` that is not 0.
    #[inline(always)]
    fn nonzero(x: u64) -> u64 {
        // The low 15 bits plus 0x7fff carry into bit 15 unless all are 0
        // (and never out of the chunk).
        ((x & !H).wrapping_add(!H) | x) & H
    }
    let used = if w { H } else { H & 0xffff_ffff };
    // The chunks a movz sequence writes (not 0), and a movn one (not 0xffff).
    let by_movz = nonzero(v) & used;
    let by_movn = nonzero(!v) & used;
    // How many chunks each writes: the (at most four) flags summed into
    // the top chunk by one multiply (`count_ones` is a software popcount
    // on the baseline x86-64 target).
    let count = |m: u64| ((m >> 15).wrapping_mul(0x0001_0001_0001_0001) >> 48) as u32;
    let (nz, nn) = (count(by_movz), count(by_movn));
    if nz.min(nn) > 1
        && let Some(imm) = logical_imm(v, w)
    {
        // orr rd, zr, #imm
        s.w(sf(w) | 0x3200_0000 | imm << 10 | (ZR as u32) << 5 | rd as u32);
        return;
    }
    let inverted = nn < nz;
    // Every chunk skipped (0, or -1): one movz/movn of chunk 0.
    let mut todo = if inverted { by_movn } else { by_movz };
    if todo == 0 {
        todo = 0x8000;
    }
    let i = todo.trailing_zeros() >> 4;
    let c = (v >> (16 * i)) as u32 & 0xffff;
    s.w(if inverted {
        // movn: rd = !(imm << 16i)
        sf(w) | 0x1280_0000 | i << 21 | (!c & 0xffff) << 5 | rd as u32
    } else {
        sf(w) | 0x5280_0000 | i << 21 | c << 5 | rd as u32
    });
    todo &= todo - 1;
    while todo != 0 {
        let i = todo.trailing_zeros() >> 4;
        let c = (v >> (16 * i)) as u32 & 0xffff;
        s.w(sf(w) | 0x7280_0000 | i << 21 | c << 5 | rd as u32);
        todo &= todo - 1;
    }
}

/// A load or store of `rt` at `base + off` (A64 registers): the scaled
/// unsigned 12-bit offset, the unscaled 9-bit one, or the offset in `ip0`.
#[inline(always)]
fn mem_to(s: &mut impl Sink, op: MemOp, rt: u8, base: u8, off: Src) {
    let MemOp(opc, lg) = op;
    match off {
        Src::R(r) => s.w((opc & !0x0100_0000)
            | 0x0020_6800
            | (r as u32) << 16
            | (base as u32) << 5
            | rt as u32),
        Src::I(o) if o >= 0 && o & ((1 << lg) - 1) == 0 && (o >> lg) < 4096 => {
            s.w(opc | ((o >> lg) as u32) << 10 | (base as u32) << 5 | rt as u32)
        }
        Src::I(o) if (-256..256).contains(&o) => {
            s.w((opc & !0x0100_0000) | ((o as u32) & 0x1ff) << 12 | (base as u32) << 5 | rt as u32)
        }
        Src::I(o) => mem_long(s, op, rt, base, o),
    }
}

/// [`mem_to`] with an offset in neither immediate form: through `ip0`.
#[inline(never)]
fn mem_long(s: &mut impl Sink, op: MemOp, rt: u8, base: u8, off: i64) {
    movi_to(s, true, IP0, off);
    s.w((op.0 & !0x0100_0000) | 0x0020_6800 | (IP0 as u32) << 16 | (base as u32) << 5 | rt as u32);
}

/// `add`/`sub` (immediate) of any value: `rd = rn + v`; `sp` allowed.
#[inline(always)]
fn add_imm_to(s: &mut impl Sink, w: bool, rd: u8, rn: u8, v: i64) {
    // The common case first: a small positive value, one `add`.
    if (v as u64) < 4096 {
        return s.w(sf(w) | 0x1100_0000 | (v as u32) << 10 | (rn as u32) << 5 | rd as u32);
    }
    let (sub, m) = if v < 0 {
        (true, v.unsigned_abs())
    } else {
        (false, v as u64)
    };
    let base = sf(w) | if sub { 0x5100_0000 } else { 0x1100_0000 };
    if m < 4096 {
        s.w(base | (m as u32) << 10 | (rn as u32) << 5 | rd as u32);
    } else if m < (1 << 24) {
        s.w(base | 1 << 22 | ((m >> 12) as u32) << 10 | (rn as u32) << 5 | rd as u32);
        if m & 0xfff != 0 {
            s.w(base | ((m & 0xfff) as u32) << 10 | (rd as u32) << 5 | rd as u32);
        }
    } else if rn == SP || rd == SP {
        // The extended-register form reads and writes sp (64-bit only).
        movi_to(s, true, IP0, v);
        s.w(0x8b20_6000 | (IP0 as u32) << 16 | (rn as u32) << 5 | rd as u32);
    } else {
        movi_to(s, w, IP0, v);
        s.w(sf(w) | 0x0b00_0000 | (IP0 as u32) << 16 | (rn as u32) << 5 | rd as u32);
    }
}

impl A64 {
    #[inline(always)]
    fn put(&mut self, word: u32) {
        self.buf.put4(word);
    }

    /// `mov rd, rs` (`orr rd, zr, rs`); 32-bit moves zero-extend.
    #[inline(always)]
    fn mov(&mut self, w: bool, rd: u8, rs: u8) {
        if rd != rs || !w {
            self.put(sf(w) | 0x2a00_03e0 | (rs as u32) << 16 | rd as u32);
        }
    }

    /// `fmov` between vector registers of type `ty`.
    #[inline(always)]
    fn fmov(&mut self, ty: Ty, rd: u8, rs: u8) {
        if rd != rs {
            self.put(0x1e20_4000 | ftype(ty) | (rs as u32) << 5 | rd as u32);
        }
    }

    #[inline(always)]
    fn movi(&mut self, w: bool, rd: u8, v: i64) {
        movi_to(&mut self.buf, w, rd, v)
    }

    #[inline(always)]
    fn mem(&mut self, op: MemOp, rt: u8, base: u8, off: Src) {
        mem_to(&mut self.buf, op, rt, base, off)
    }

    /// Three-register data processing: `base | rm << 16 | rn << 5 | rd`.
    #[inline(always)]
    fn rrr(&mut self, base: u32, rd: u8, rn: u8, rm: u8) {
        self.put(base | (rm as u32) << 16 | (rn as u32) << 5 | rd as u32);
    }

    /// `cmp rn, #v` or `cmp rn, rm` (via `ip0` for other immediates).
    #[inline(always)]
    fn cmp(&mut self, w: bool, rn: u8, b: Src) {
        match b {
            Src::I(v) => {
                let v = if w { v } else { v as i32 as i64 };
                if (0..4096).contains(&v) {
                    self.put(sf(w) | 0x7100_001f | (v as u32) << 10 | (rn as u32) << 5);
                } else if (-4095..0).contains(&v) {
                    // cmn rn, #-v
                    self.put(sf(w) | 0x3100_001f | ((-v) as u32) << 10 | (rn as u32) << 5);
                } else {
                    self.movi(w, IP0, v);
                    self.rrr(sf(w) | 0x6b00_001f, 0, rn, IP0);
                }
            }
            Src::R(rm) => self.rrr(sf(w) | 0x6b00_001f, 0, rn, rm),
        }
    }

    /// `csel rd, rn, rm, cc`.
    #[inline(always)]
    fn csel(&mut self, w: bool, rd: u8, rn: u8, rm: u8, cc: u8) {
        self.put(
            sf(w)
                | 0x1a80_0000
                | (rm as u32) << 16
                | (cc as u32) << 12
                | (rn as u32) << 5
                | rd as u32,
        );
    }

    /// `fcmp rn, rm` of type `ty`.
    #[inline(always)]
    fn fcmp(&mut self, ty: Ty, rn: u8, rm: u8) {
        self.put(0x1e20_2000 | ftype(ty) | (rm as u32) << 16 | (rn as u32) << 5);
    }

    /// A float constant: `fmov` (immediate or from `ip0`) or a literal load.
    fn fconst(&mut self, m: &'static str, ty: Ty, rd: u8, bits: u64) {
        let bits = if ty == Ty::F {
            bits & 0xffff_ffff
        } else {
            bits
        };
        if bits == 0 {
            // fmov s/d, wzr/xzr
            let word = if ty == Ty::D {
                0x9e67_03e0
            } else {
                0x1e27_03e0
            };
            self.put(word | rd as u32);
        } else if let Some(imm8) = fmov_imm8(ty, bits) {
            self.put(0x1e20_1000 | ftype(ty) | imm8 << 13 | rd as u32);
        } else if (0..4).filter(|i| (bits >> (16 * i)) & 0xffff != 0).count() <= 2 {
            self.movi(true, IP0, bits as i64);
            let word = if ty == Ty::D {
                0x9e67_0000
            } else {
                0x1e27_0000
            };
            self.put(word | (IP0 as u32) << 5 | rd as u32);
        } else {
            let slot = self.pool_const(bits);
            self.pool_ref(m, slot);
            // ldr s/d, literal (patched at end)
            self.put(
                if ty == Ty::D {
                    0x5c00_0000
                } else {
                    0x1c00_0000
                } | rd as u32,
            );
        }
    }

    fn pool_const(&mut self, bits: u64) -> u32 {
        let slot = self.pool_base + (self.st.pool.len() / 8) as u32;
        self.st.pool.extend_from_slice(&bits.to_le_bytes());
        slot
    }

    /// Records that the instruction about to be written at the current
    /// position (an `ldr` literal or `adr`) refers to pool slot `slot`.
    #[inline]
    fn pool_ref(&mut self, m: &'static str, slot: u32) {
        let at = self.buf.pos() as u32;
        self.pool_refs.push(PoolRef {
            at,
            slot,
            index: self.buf.index(),
            method: m,
        });
        if self.pending == NONE {
            self.arm(at);
        }
    }

    /// `xd = (i64) trunc(src)` with x86-64's "integer indefinite":
    /// NaN and values out of range give `i64::MIN` (left in `tmp` too).
    fn fcvt_l(&mut self, ty: Ty, xd: u8, src: u8, tmp: u8) {
        self.put(0x9e38_0000 | ftype(ty) | (src as u32) << 5 | xd as u32); // fcvtzs xd, src
        self.put(0xd2f0_0000 | tmp as u32); // movz tmp, #0x8000, lsl 48
        self.fcmp(ty, src, src);
        self.csel(true, xd, xd, tmp, VC);
        self.put(0xb100_041f | (xd as u32) << 5); // cmn xd, #1: V iff xd == MAX
        self.csel(true, xd, xd, tmp, VC);
    }

    /// Loads and stores by vcode memory type.
    #[inline(always)]
    fn load_at(&mut self, mem: Ty, rd_ty: Ty, rd: u8, base: u8, off: Src) {
        let w = rd_ty.is_64();
        let (op, r) = match mem {
            Ty::C => (if w { LDRSB_X } else { LDRSB_W }, g(rd)),
            Ty::UC => (LDRB, g(rd)),
            Ty::S => (if w { LDRSH_X } else { LDRSH_W }, g(rd)),
            Ty::US => (LDRH, g(rd)),
            Ty::I | Ty::U => (LDR_W, g(rd)),
            Ty::L | Ty::UL | Ty::P => (LDR_X, g(rd)),
            Ty::F => (LDR_S, v(rd)),
            Ty::D => (LDR_D, v(rd)),
            Ty::V => return,
        };
        self.mem(op, r, base, off);
    }

    #[inline(always)]
    fn store_at(&mut self, mem: Ty, rs: u8, base: u8, off: Src) {
        let (op, r) = match mem {
            Ty::C | Ty::UC => (STRB, g(rs)),
            Ty::S | Ty::US => (STRH, g(rs)),
            Ty::I | Ty::U => (STR_W, g(rs)),
            Ty::L | Ty::UL | Ty::P => (STR_X, g(rs)),
            Ty::F => (STR_S, v(rs)),
            Ty::D => (STR_D, v(rs)),
            Ty::V => return,
        };
        self.mem(op, r, base, off);
    }

    /// Moves `src -> dst` pairs (A64 registers) at once, breaking cycles
    /// through a scratch register.
    fn parallel_move(&mut self, moves: &mut Vec<(u8, u8)>, float: bool) {
        if float {
            parallel_move(moves, V31, |d, s| self.fmov(Ty::D, d, s))
        } else {
            parallel_move(moves, X10, |d, s| self.mov(true, d, s))
        }
    }

    /// `rd = a op b` for float types (A64 registers).
    fn fbinop(&mut self, m: &'static str, op: BinOp, ty: Ty, rd: u8, a: u8, b: Src) {
        let Src::R(b) = b else {
            return self.buf.fail(
                m,
                ErrorKind::UnsupportedType {
                    insn: "float operation with an immediate",
                    ty,
                },
            );
        };
        let base = match op {
            BinOp::Add => 0x1e20_2800,
            BinOp::Sub => 0x1e20_3800,
            BinOp::Mul => 0x1e20_0800,
            BinOp::Div => 0x1e20_1800,
            _ => {
                return self.buf.fail(
                    m,
                    ErrorKind::UnsupportedType {
                        insn: op.name(),
                        ty,
                    },
                );
            }
        };
        self.rrr(base | ftype(ty), v(rd), v(a), v(b));
    }
}

// ===========================================================================
// 4. Instruction methods
// ===========================================================================

/// The encodings of a call's argument placement and of the entry's
/// parameter moves (the order is shared, `common.rs`).
impl ArgEmit for A64 {
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
        let off = Src::I(disp as i64);
        match a {
            Arg::Reg(r) if r.ty.is_float() => self.mem(STR_D, v(r.n), SP, off),
            Arg::Reg(r) => self.mem(STR_X, g(r.n), SP, off),
            Arg::Imm(_, val) => {
                self.movi(true, IP1, val);
                self.mem(STR_X, IP1, SP, off);
            }
            Arg::Mem { ty, base, off: at } => {
                // The value's bits, zero-extended, through ip1.
                let op = if ty.size() == 8 { LDR_X } else { LDR_W };
                self.mem(op, IP1, g(base), Src::I(at as i64));
                self.mem(STR_X, IP1, SP, off);
            }
        }
    }

    fn move_args(&mut self, moves: &mut Vec<(u8, u8)>, float: bool) {
        let phys = if float { v } else { g };
        for mv in moves.iter_mut() {
            *mv = (phys(mv.0), phys(mv.1));
        }
        self.parallel_move(moves, float)
    }

    #[inline]
    fn imm_arg(&mut self, m: &'static str, ty: Ty, d: u8, val: i64) {
        if ty.is_float() {
            self.fconst(m, ty, v(d), val as u64);
        } else {
            self.movi(ty.is_64(), g(d), val);
        }
    }

    #[inline]
    fn load_slot(&mut self, ty: Ty, d: u8, frame: bool, disp: i32) {
        let (base, off) = (if frame { FP } else { SP }, Src::I(disp as i64));
        match ty {
            Ty::F => self.mem(LDR_S, v(d), base, off),
            Ty::D => self.mem(LDR_D, v(d), base, off),
            _ => self.mem(LDR_X, g(d), base, off),
        }
    }

    fn move_reg(&mut self, ty: Ty, d: u8, s: u8) {
        if ty.is_float() {
            self.fmov(Ty::D, v(d), v(s))
        } else {
            self.mov(true, g(d), g(s))
        }
    }
}

/// The encodings of a call (its order is shared, `common.rs`): through
/// `x9`, with the link register kept on the stack across it (so that a
/// subroutine entered by `jal` may call) and the stack arguments below it.
impl CallEmit for A64 {
    fn call_reserve(&mut self, m: &'static str, nargs: usize) {
        self.reserve(m, 40 * nargs + 8 * 16 + 96);
    }

    fn call_resync(&mut self, m: &'static str) {
        self.resync(m);
    }

    fn load_callee(&mut self, t: Target) {
        match t {
            Target::Reg(r) => self.mov(true, X9, g(r)),
            Target::Addr(a) => self.movi(true, X9, a as i64),
            Target::Label(_) => {}
        }
    }

    fn save_float(&mut self, n: u8, disp: i32) {
        self.mem(STR_D, v(n), FP, Src::I(disp as i64));
    }

    fn enter_call(&mut self, reserve: i32) {
        self.put(0xf81f_0ffe); // str x30, [sp, #-16]!
        if reserve > 0 {
            add_imm_to(&mut self.buf, true, SP, SP, -i64::from(reserve));
        }
    }

    fn make_call(&mut self, reserve: i32) {
        self.put(0xd63f_0000 | (X9 as u32) << 5); // blr x9
        if reserve > 0 {
            add_imm_to(&mut self.buf, true, SP, SP, i64::from(reserve));
        }
        self.put(0xf841_07fe); // ldr x30, [sp], #16
    }

    fn take_result(&mut self, r: AnyReg) {
        if r.ty.is_float() {
            self.fmov(r.ty, v(r.n), 0)
        } else {
            self.mov(r.ty.is_64(), g(r.n), 0)
        }
    }
}

impl Backend for A64 {
    type Code = Code;
    type Conv = Aapcs64;

    fn new() -> Self {
        A64 {
            buf: Buf::new(DEFAULT_LIMIT),
            labels: Vec::new(),
            open_labels: 0,
            far_firsts: Vec::new(),
            ret_head: NO_LINK,
            label_scan: 0,
            tables: Vec::new(),
            pool_refs: Vec::new(),
            pool_base: 0,
            placed: Vec::new(),
            pending: NONE,
            veneers: 0,
            st: FuncState::new(),
            last_ret: None,
            flags: None,
            pro: Vec::with_capacity(64),
            epi: Vec::with_capacity(64),
            frame_key: NO_FRAME_KEY,
            frame_lens: (0, 0),
        }
    }

    // Entry and `end` (section 6), errors, locals: shared.
    native_backend_methods!();

    // -- arithmetic ----------------------------------------------------------

    #[inline(always)]
    fn binop(&mut self, m: &'static str, op: BinOp, ty: Ty, rd: u8, a: u8, b: Src) {
        self.insn(m);
        if ty.is_float() {
            return self.fbinop(m, op, ty, rd, a, b);
        }
        let w = ty.is_64();
        let (rd, a) = (g(rd), g(a));
        let b = match b {
            Src::R(r) => Src::R(g(r)),
            i => i,
        };
        // The second operand in a register (immediates through ip1).
        let reg = |s: &mut Self, b: Src| -> u8 {
            match b {
                Src::R(r) => r,
                Src::I(v) => {
                    s.movi(w, IP1, v);
                    IP1
                }
            }
        };
        match op {
            BinOp::Add | BinOp::Sub => match b {
                Src::I(v) => {
                    let v = if w { v } else { v as i32 as i64 };
                    let v = if op == BinOp::Sub {
                        v.wrapping_neg()
                    } else {
                        v
                    };
                    if v == i64::MIN {
                        self.movi(true, IP1, v);
                        self.rrr(0x8b00_0000, rd, a, IP1);
                    } else {
                        add_imm_to(&mut self.buf, w, rd, a, v);
                    }
                }
                Src::R(r) => {
                    let base = if op == BinOp::Add {
                        0x0b00_0000
                    } else {
                        0x4b00_0000
                    };
                    self.rrr(sf(w) | base, rd, a, r);
                }
            },
            BinOp::And | BinOp::Or | BinOp::Xor => {
                let (rbase, ibase) = match op {
                    BinOp::And => (0x0a00_0000, 0x1200_0000),
                    BinOp::Or => (0x2a00_0000, 0x3200_0000),
                    _ => (0x4a00_0000, 0x5200_0000),
                };
                if let Src::I(v) = b
                    && let Some(imm) = logical_imm(v as u64, w)
                {
                    self.put(sf(w) | ibase | imm << 10 | (a as u32) << 5 | rd as u32);
                    return;
                }
                let r = reg(self, b);
                self.rrr(sf(w) | rbase, rd, a, r);
            }
            BinOp::Mul => {
                let r = reg(self, b);
                self.rrr(sf(w) | 0x1b00_7c00, rd, a, r); // madd rd, a, r, zr
            }
            BinOp::Div | BinOp::Mod => {
                if let Src::I(v) = b
                    && (v == 0 || (!w && v as i32 == 0))
                {
                    return self.buf.fail(m, ErrorKind::DivisionByZero);
                }
                let r = reg(self, b);
                let div = sf(w)
                    | if ty.is_signed() {
                        0x1ac0_0c00
                    } else {
                        0x1ac0_0800
                    };
                if op == BinOp::Div {
                    self.rrr(div, rd, a, r);
                } else {
                    self.rrr(div, IP0, a, r);
                    // msub rd, ip0, r, a
                    self.put(
                        sf(w)
                            | 0x1b00_8000
                            | (r as u32) << 16
                            | (a as u32) << 10
                            | (IP0 as u32) << 5
                            | rd as u32,
                    );
                }
            }
            BinOp::Lsh | BinOp::Rsh => match b {
                Src::I(v) => {
                    let width = if w { 64 } else { 32 };
                    let c = (v as u32) & (width - 1);
                    let n = (w as u32) << 22;
                    if c == 0 {
                        self.mov(w, rd, a);
                    } else if op == BinOp::Lsh {
                        // ubfm rd, a, #(width - c), #(width - 1 - c)
                        self.put(
                            sf(w)
                                | 0x5300_0000
                                | n
                                | (width - c) << 16
                                | (width - 1 - c) << 10
                                | (a as u32) << 5
                                | rd as u32,
                        );
                    } else {
                        let base = if ty.is_signed() {
                            0x1300_0000
                        } else {
                            0x5300_0000
                        };
                        self.put(
                            sf(w)
                                | base
                                | n
                                | c << 16
                                | (width - 1) << 10
                                | (a as u32) << 5
                                | rd as u32,
                        );
                    }
                }
                Src::R(r) => {
                    let base = match (op, ty.is_signed()) {
                        (BinOp::Lsh, _) => 0x1ac0_2000,
                        (_, true) => 0x1ac0_2800,
                        (_, false) => 0x1ac0_2400,
                    };
                    self.rrr(sf(w) | base, rd, a, r);
                }
            },
        }
    }

    #[inline(always)]
    fn unop(&mut self, m: &'static str, op: UnOp, ty: Ty, rd: u8, a: u8) {
        self.insn(m);
        if ty.is_float() {
            let (rd, a) = (v(rd), v(a));
            if op == UnOp::Neg {
                self.put(0x1e21_4000 | ftype(ty) | (a as u32) << 5 | rd as u32);
            } else {
                self.fmov(ty, rd, a);
            }
            return;
        }
        let w = ty.is_64();
        let (rd, a) = (g(rd), g(a));
        match op {
            UnOp::Mov => self.mov(w, rd, a),
            UnOp::Com => self.rrr(sf(w) | 0x2a20_03e0, rd, ZR, a), // orn rd, zr, a
            UnOp::Neg => self.rrr(sf(w) | 0x4b00_03e0, rd, ZR, a), // sub rd, zr, a
            UnOp::Not => {
                self.cmp(w, a, Src::I(0));
                // cset rd, eq = csinc rd, zr, zr, ne
                self.put(0x1a9f_17e0 | rd as u32);
            }
        }
    }

    #[inline(always)]
    fn set(&mut self, m: &'static str, ty: Ty, rd: u8, bits: u64) {
        self.insn(m);
        match ty {
            Ty::F | Ty::D => self.fconst(m, ty, v(rd), bits),
            _ => self.movi(ty.is_64(), g(rd), bits as i64),
        }
    }

    // -- conversions ---------------------------------------------------------

    fn cvt(&mut self, m: &'static str, from: Ty, to: Ty, rd: u8, rs: u8) {
        self.insn(m);
        match (from.is_float(), to.is_float()) {
            (false, false) => {
                let (rd, rs) = (g(rd), g(rs));
                if from.is_64() == to.is_64() {
                    self.mov(to.is_64(), rd, rs);
                } else if to.is_64() && from == Ty::I {
                    self.put(0x9340_7c00 | (rs as u32) << 5 | rd as u32); // sxtw
                } else {
                    // mov wd, ws: zero-extends or truncates, also in place.
                    self.put(0x2a00_03e0 | (rs as u32) << 16 | rd as u32);
                }
            }
            (true, true) => {
                let (rd, rs) = (v(rd), v(rs));
                if from == to {
                    self.fmov(to, rd, rs);
                } else if from == Ty::F {
                    self.put(0x1e22_c000 | (rs as u32) << 5 | rd as u32); // fcvt d, s
                } else {
                    self.put(0x1e62_4000 | (rs as u32) << 5 | rd as u32); // fcvt s, d
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
                let (rd, rs) = (v(rd), g(rs));
                // scvtf / ucvtf
                let base = if from.is_signed() {
                    0x1e22_0000
                } else {
                    0x1e23_0000
                };
                self.put(sf(from.is_64()) | base | ftype(to) | (rs as u32) << 5 | rd as u32);
            }
            (true, false) => {
                if to == Ty::P {
                    return self
                        .buf
                        .fail(m, ErrorKind::UnsupportedType { insn: "cv", ty: to });
                }
                let (rd, rs) = (g(rd), v(rs));
                match to {
                    Ty::I => {
                        // The 64-bit truncation, kept only if it fits in 32 bits.
                        self.put(0x9e38_0000 | ftype(from) | (rs as u32) << 5 | IP0 as u32);
                        self.put(0x52b0_0000 | IP1 as u32); // movz w17, #0x8000, lsl 16
                        // cmp x16, w16, sxtw
                        self.put(0xeb20_c000 | (IP0 as u32) << 16 | (IP0 as u32) << 5 | 31);
                        self.csel(false, IP0, IP0, IP1, EQ);
                        self.fcmp(from, rs, rs);
                        self.csel(false, rd, IP0, IP1, VC);
                    }
                    Ty::L => self.fcvt_l(from, rd, rs, IP1),
                    Ty::U => {
                        self.fcvt_l(from, IP0, rs, IP1);
                        self.mov(false, rd, IP0);
                    }
                    _ => {
                        // ul: values >= 2^63 convert after subtracting 2^63
                        // (in the source precision), and get the top bit back.
                        if from == Ty::D {
                            self.put(0xd2e8_7c00 | IP1 as u32); // movz x17, #0x43e0, lsl 48
                            self.put(0x9e67_0000 | (IP1 as u32) << 5 | V31 as u32);
                        } else {
                            self.put(0x52ab_e000 | IP1 as u32); // movz w17, #0x5f00, lsl 16
                            self.put(0x1e27_0000 | (IP1 as u32) << 5 | V31 as u32);
                        }
                        self.rrr(0x1e20_3800 | ftype(from), V30, rs, V31); // fsub v30, rs, v31
                        self.fcvt_l(from, IP0, V30, IP1);
                        self.rrr(0xca00_0000, IP0, IP0, IP1); // eor x16, x16, x17 (= 2^63)
                        self.fcvt_l(from, X15, rs, IP1);
                        // v31 still holds 2^63: pick (NaN takes the small path).
                        self.fcmp(from, rs, V31);
                        self.csel(true, rd, IP0, X15, GE);
                    }
                }
            }
        }
    }

    // -- loads, stores, locals -----------------------------------------------

    #[inline(always)]
    fn load(&mut self, m: &'static str, mem: Ty, rd_ty: Ty, rd: u8, base: u8, off: Src) {
        self.insn(m);
        let off = match off {
            Src::R(r) => Src::R(g(r)),
            i => i,
        };
        self.load_at(mem, rd_ty, rd, g(base), off);
    }

    #[inline(always)]
    fn store(&mut self, m: &'static str, mem: Ty, rs: u8, base: u8, off: Src) {
        self.insn(m);
        let off = match off {
            Src::R(r) => Src::R(g(r)),
            i => i,
        };
        self.store_at(mem, rs, g(base), off);
    }

    fn local_op(&mut self, m: &'static str, op: LocalOp, ty: Ty, r: u8, off: i32, id: u32) {
        self.insn(m);
        if !self.st.use_local(off, id) {
            return self.buf.fail(m, ErrorKind::UnknownLocal { id });
        }
        match op {
            LocalOp::Load => self.load_at(ty, ty, r, FP, Src::I(off as i64)),
            LocalOp::Store => self.store_at(ty, r, FP, Src::I(off as i64)),
            LocalOp::Addr => add_imm_to(&mut self.buf, true, g(r), FP, off as i64),
        }
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
        self.insn(m);
        self.put(0xd65f_03c0); // ret
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
        self.insn(m);
        emit_call(self, m, &TABLES, callee, args, ret, alloc);
    }

    #[inline(always)]
    fn genlabel(&mut self) -> Label {
        self.labels.push(NEW_LABEL);
        Label(self.labels.len() as u32 - 1)
    }

    #[inline(always)]
    fn place(&mut self, m: &'static str, l: Label) {
        self.emit_place(m, l)
    }

    fn nop(&mut self, m: &'static str) {
        self.insn(m);
        self.put(NOP);
    }

    fn align(&mut self, m: &'static str, n: usize) {
        self.insn(m);
        let n = match self.st.align(n, 4) {
            Ok(n) => n,
            Err(kind) => return self.buf.fail(m, kind),
        };
        while !self.buf.pos().is_multiple_of(n) {
            self.put(NOP);
        }
    }

    fn data(&mut self, bytes: &[u8]) -> u32 {
        if self.pending != NONE {
            // The next island grows by the data: it may have to come now.
            self.plan("data", bytes.len() + 8);
        }
        self.st.data(self.pool_base, bytes)
    }

    fn addr_data(&mut self, m: &'static str, rd: u8, data: u32) {
        self.insn(m);
        let rd = g(rd);
        if data >= self.pool_base {
            if (data - self.pool_base) as usize * 8 >= self.st.pool.len() {
                return self.buf.fail(m, ErrorKind::UnknownData { data });
            }
            self.pool_ref(m, data);
            self.put(0x1000_0000 | rd as u32); // adr rd, data (patched later)
            return;
        }
        // In an island behind: the distance is known.
        let i = self.placed.partition_point(|&(first, _)| first <= data);
        let (first, at) = self.placed[i.saturating_sub(1)];
        let rel = (at as i64 + 8 * (data - first) as i64) - self.buf.pos() as i64;
        match adr_word(0x1000_0000 | rd as u32, rel) {
            Some(w) => self.put(w),
            None => {
                // Beyond adr's ±1 MiB: adr rd, . and add the distance.
                self.put(0x1000_0000 | rd as u32);
                add_imm_to(&mut self.buf, true, rd, rd, rel);
            }
        }
    }

    fn jump_table(&mut self, m: &'static str, idx: u8, targets: &[Label]) {
        self.emit_jump_table(m, idx, targets)
    }
}

const NOP: u32 = 0xd503_201f;
const RET: u32 = 0xd65f_03c0;

// ===========================================================================
// 5. Branches and fixups
// ===========================================================================

/// A label's word, low half: once placed, its position (bit 31 clear:
/// code positions stay below 2 GiB, see [`Buf::new`]); until then this
/// bit, set, and in the low 31 bits the newest forward reference to it
/// ([`NO_REF`] when there is none yet). The references form a chain
/// threaded through the code itself: the offset field of each unresolved
/// `b`, `bl` or `b.cond` holds the distance in words back to the previous
/// reference (0 for the oldest). A forward branch is then a read and a
/// write of the label's word and one store of the branch with its link,
/// and no record; placing the label walks its chain once and patches
/// every reference, so `end` has nothing left to backpatch but the
/// returns. The high half holds the first reference's kind (bits 27..32)
/// and instruction index (bits 0..27), for the error of a label used and
/// never placed; an index too large for 27 bits is kept in
/// [`A64::far_firsts`] under the kind [`FAR`].
const UNPLACED: u32 = 1 << 31;
/// The low bits of an unplaced label's word when nothing refers to it.
const NO_REF: u32 = UNPLACED - 1;
/// A new label: unplaced, without references.
const NEW_LABEL: u64 = (UNPLACED | NO_REF) as u64;
const TAIL_INDEX: u32 = (1 << 27) - 1;
const FAR: u8 = 31;
/// The end of the chain of returns.
const NO_LINK: u32 = u32::MAX;
/// The largest link a `b.cond`'s 19-bit field holds (and the largest
/// forward distance in words it reaches).
const COND_LINK: u32 = (1 << 18) - 1;
/// The largest link or forward distance in words of `b`/`bl`'s field.
const B_LINK: u32 = (1 << 25) - 1;

/// A jump-table entry to fill with a label's offset at `end`.
#[derive(Clone, Copy, Debug)]
struct Fixup {
    at: u32,
    label: u32,
    index: u32,
    kind: u8,
}

/// Reference kinds besides the six conditions (`Cond as u8`, a `b.cond`):
/// `b`, `bl`, a return's `b epilogue`, a jump-table entry.
const FIX_JMP: u8 = 6;
const FIX_JAL: u8 = 7;
const FIX_TABLE: u8 = 9;

/// The client method of a reference of kind `kind`.
fn kind_method(kind: u8) -> &'static str {
    match kind {
        FIX_JMP => "jmp",
        FIX_JAL => "jal",
        FIX_TABLE => "jump_table",
        k => Cond::ALL[k as usize].name(),
    }
}

impl Fixup {
    fn method(self) -> &'static str {
        kind_method(self.kind)
    }
}

/// True if `word` is a `b` or `bl` (a 26-bit field), false for a `b.cond`.
#[inline(always)]
fn is_b(word: u32) -> bool {
    word >> 26 & 0x1f == 0b00101
}

/// The high half of a label's word for its first reference, of kind
/// `kind`: the kind and the instruction index.
#[inline(always)]
fn first_ref(buf: &Buf, far_firsts: &mut Vec<(u32, u32, u8)>, kind: u8, label: u32) -> u64 {
    let index = buf.index();
    if index > TAIL_INDEX {
        return far_first(far_firsts, kind, label, index);
    }
    u64::from((kind as u32) << 27 | index) << 32
}

/// [`first_ref`] past 2^27 instructions: the index is kept aside.
#[cold]
#[inline(never)]
fn far_first(far_firsts: &mut Vec<(u32, u32, u8)>, kind: u8, label: u32, index: u32) -> u64 {
    far_firsts.push((label, index, kind));
    u64::from((FAR as u32) << 27) << 32
}

/// A use of a pool slot: the `ldr` (literal) or `adr` at `at`, from
/// instruction `index` (for errors).
#[derive(Clone, Copy, Debug)]
struct PoolRef {
    at: u32,
    slot: u32,
    index: u32,
    method: &'static str,
}

/// "Nothing pending" for [`A64::pending`].
const NONE: u32 = u32::MAX;
/// The farthest forward reach of `b.cond` and `ldr` (literal), in bytes
/// (`adr` reaches 3 bytes farther).
const REACH: usize = (1 << 20) - 4;
/// Bytes an island or the end adds before its constants beyond the
/// veneers: `b over` and padding, or the epilogue (at most about 180
/// bytes, 16 float restores included) and padding.
const MARGIN: usize = 512;
/// The most one ordinary instruction adds to the distance from a pending
/// use to its island: its code (at most [`MAX_INSN`] bytes) and what it
/// adds to the island (a veneer, or a constant's 8 bytes). Calls and jump
/// tables, which write more, say so through [`A64::reserve`].
const PER_INSN: usize = MAX_INSN + 8;
/// How far the code and the pool may grow from the first pending use
/// before the next check: the use's reach less the margin, the
/// instruction being written and the use's own veneer.
const ARM_SLACK: usize = REACH - MARGIN - PER_INSN - 4;
/// The pool bytes a call may add (a float constant per argument register).
const CALL_POOL: usize = 8 * 8;

/// True if a byte distance fits a branch of `bits`-bit word offset.
fn fits(rel: i64, bits: u32) -> bool {
    let w = rel >> 2;
    w >= -(1 << (bits - 1)) && w < (1 << (bits - 1))
}

/// A `b.cond` or `ldr` (literal) word with its 19-bit word offset, if
/// `rel` fits.
fn imm19_word(word: u32, rel: i64) -> Option<u32> {
    fits(rel, 19).then_some(word | ((rel >> 2) as u32 & 0x7ffff) << 5)
}

/// An `adr` word with its 21-bit byte offset (`immlo` in 30:29, `immhi`
/// in 23:5), if `rel` fits.
fn adr_word(word: u32, rel: i64) -> Option<u32> {
    (-(1 << 20)..(1 << 20))
        .contains(&rel)
        .then_some(word | ((rel as u32) & 3) << 29 | (((rel >> 2) as u32) & 0x7ffff) << 5)
}

/// A pool reference's word patched to reach `rel` bytes away, if it can.
fn pool_word(word: u32, rel: i64) -> Option<u32> {
    if word & 0x9f00_0000 == 0x1000_0000 {
        adr_word(word, rel)
    } else {
        imm19_word(word, rel)
    }
}

/// The error for a `b.cond` that cannot reach its target or veneer (the
/// islands should make it impossible).
const FAR_BRANCH: ErrorKind =
    ErrorKind::Unsupported("aarch64: a conditional branch beyond b.cond's ±1 MiB");

/// The error for a use that cannot reach its constant.
const FAR_CONSTANT: ErrorKind =
    ErrorKind::Unsupported("aarch64: a constant or data beyond ±1 MiB of its use (ldr, adr)");

impl A64 {
    /// `b.cc label` (or `b label` when `cc` is `None`), from the current
    /// position. Backward, the distance is known: beyond `b.cond`'s ±1 MiB,
    /// the inverted condition over a `b`. Forward, the branch is linked
    /// into the label's chain; a forward `b.cond` counts towards the next
    /// island's veneers, and the first with nothing pending arms the
    /// island's deadline.
    #[inline(always)]
    fn jump_to(&mut self, kind: u8, cc: Option<u8>, label: u32) {
        let pos = self.buf.pos() as u32;
        let A64 {
            labels,
            buf,
            open_labels,
            far_firsts,
            ..
        } = self;
        let Some(w) = labels.get_mut(label as usize) else {
            return self.unknown_label(kind, cc, label);
        };
        let lo = *w as u32;
        if lo & UNPLACED == 0 {
            let rel = lo as i64 - pos as i64;
            match cc {
                None => buf.put4(0x1400_0000 | ((rel >> 2) as u32 & 0x03ff_ffff)),
                Some(c) if fits(rel, 19) => {
                    buf.put4(0x5400_0000 | ((rel >> 2) as u32 & 0x7ffff) << 5 | c as u32)
                }
                Some(c) => {
                    // Out of b.cond's range: the inverted condition over a b.
                    buf.put4(0x5400_0000 | 2 << 5 | (c ^ 1) as u32);
                    let rel = rel - 4;
                    buf.put4(0x1400_0000 | ((rel >> 2) as u32 & 0x03ff_ffff));
                }
            }
            return;
        }
        // Forward: link the branch into the label's chain.
        let head = lo & NO_REF;
        let (high, link) = if head == NO_REF {
            *open_labels += 1;
            (first_ref(buf, far_firsts, kind, label), 0)
        } else {
            (*w & !0xffff_ffff, pos.wrapping_sub(head) >> 2)
        };
        if link > if cc.is_some() { COND_LINK } else { B_LINK } {
            return self.far_link(kind, cc, label);
        }
        *w = high | u64::from(UNPLACED | pos);
        match cc {
            None => buf.put4(0x1400_0000 | link),
            Some(c) => {
                buf.put4(0x5400_0000 | link << 5 | c as u32);
                self.veneers += 1;
                if self.pending == NONE {
                    self.arm(pos);
                }
            }
        }
    }

    /// A forward branch whose label's previous reference is too far back
    /// for a link in its field: a `b.cond` becomes the inverted condition
    /// over a `b` (whose field reaches 64 times as far); a `b` that far is
    /// beyond any target `b` reaches.
    #[cold]
    #[inline(never)]
    fn far_link(&mut self, kind: u8, cc: Option<u8>, label: u32) {
        match cc {
            Some(c) => {
                self.put(0x5400_0000 | 2 << 5 | (c ^ 1) as u32);
                self.jump_to(kind, None, label);
            }
            None => {
                self.buf.fail(
                    kind_method(kind),
                    ErrorKind::Unsupported("aarch64: a branch beyond b's ±128 MiB"),
                );
                self.put(0x1400_0000);
            }
        }
    }

    /// A jump to a label this function never made: recorded as the error,
    /// and the jump written (to nowhere) so that the code stays in step.
    #[cold]
    #[inline(never)]
    fn unknown_label(&mut self, kind: u8, cc: Option<u8>, label: u32) {
        self.buf
            .fail(kind_method(kind), ErrorKind::UnknownLabel { label });
        self.put(match cc {
            None => 0x1400_0000,
            Some(c) => 0x5400_0000 | c as u32,
        });
    }

    /// Patches every branch of the chain starting at `head` to `target`
    /// (forward: every link points back). The walk stops at a link of 0,
    /// or one that would lead before the start of the code (over code
    /// overwritten after a `CodeTooLarge`).
    #[inline]
    fn resolve(&mut self, m: &'static str, mut at: u32, target: u32) {
        loop {
            let word = self.buf.read4(at as usize);
            let rel = target.wrapping_sub(at) >> 2;
            let (link, patched, reach) = if is_b(word) {
                (
                    word & 0x03ff_ffff,
                    word & 0xfc00_0000 | rel & 0x03ff_ffff,
                    B_LINK,
                )
            } else {
                let field = (rel & 0x7ffff) << 5;
                (word >> 5 & 0x7ffff, word & 0xff00_001f | field, COND_LINK)
            };
            if rel > reach {
                // Islands keep forward b.conds within reach, and the code
                // size limit b's; checked all the same, so that no limit
                // makes wrong code.
                self.far_target(m, reach);
            }
            self.buf.patch4(at as usize, patched);
            if link == 0 || link > at >> 2 {
                return;
            }
            at -= link << 2;
        }
    }

    #[cold]
    #[inline(never)]
    fn far_target(&mut self, m: &'static str, reach: u32) {
        let kind = if reach == COND_LINK {
            FAR_BRANCH
        } else {
            ErrorKind::Unsupported("aarch64: a branch beyond b's ±128 MiB")
        };
        self.buf.fail(m, kind);
    }

    /// The error of a label referenced and never placed: the first such
    /// reference in program order, as its branch's method names it.
    #[cold]
    #[inline(never)]
    fn unplaced_error(&self) -> Error {
        let (index, kind, label) = self
            .labels
            .iter()
            .enumerate()
            .filter(|&(_, &w)| (w as u32) & UNPLACED != 0 && w as u32 != UNPLACED | NO_REF)
            .map(|(label, &w)| {
                let label = label as u32;
                let (kind, index) = ((w >> 59) as u8, (w >> 32) as u32 & TAIL_INDEX);
                if kind == FAR {
                    let &(_, index, kind) = self
                        .far_firsts
                        .iter()
                        .find(|f| f.0 == label)
                        .expect("a far first reference is recorded");
                    (index, kind, label)
                } else {
                    (index, kind, label)
                }
            })
            .min()
            .expect("a pending label");
        Error::new(index, kind_method(kind), ErrorKind::UnplacedLabel { label })
    }

    /// Starts an instruction: spends one unit of the buffer's budget. When
    /// the budget runs out (the buffer's own refill, or earlier when an
    /// island may be due: see `plan`), the cold path refills and
    /// plans; the hot path is the buffer's count-down and nothing else.
    #[inline(always)]
    pub fn insn(&mut self, m: &'static str) {
        if self.buf.tick() {
            self.refill(m);
        }
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self, m: &'static str) {
        self.buf.refill(m, 0);
        if self.pending != NONE {
            self.plan(m, 0);
        }
    }

    /// [`Buf::reserve`] for an instruction longer than [`MAX_INSN`] (a call,
    /// a jump table), which may need its island first.
    fn reserve(&mut self, m: &'static str, bytes: usize) {
        self.buf.reserve(m, bytes);
        if self.pending != NONE {
            self.plan(m, bytes + CALL_POOL);
        }
    }

    /// [`Buf::resync`] after such an instruction, keeping the island's
    /// deadline in the budget.
    fn resync(&mut self, m: &'static str) {
        self.buf.resync(m);
        if self.pending != NONE {
            self.plan(m, 0);
        }
    }

    /// Notes the first pending use, at the current position (nothing was
    /// pending, so the next island holds only the pool and this use's
    /// veneer). The buffer's next refill, where [`A64::plan`] looks again,
    /// usually comes well before the deadline; when the budget is large (a
    /// buffer grown for a big function) or the pool is, it is brought
    /// forward to the last instruction that may still place the island.
    #[inline(always)]
    fn arm(&mut self, at: u32) {
        self.pending = at;
        let room = ARM_SLACK.saturating_sub(self.st.pool.len());
        if self.buf.budget() as usize * PER_INSN > room {
            self.buf.cap((room / PER_INSN) as u32);
        }
    }

    /// At an instruction boundary with something pending: emits the
    /// island now if the code and the island could otherwise grow beyond
    /// the reach of the oldest pending use, or brings the next refill
    /// forward to the last instruction that may still decide it. `extra`
    /// is what the instruction being started writes and adds to the
    /// island beyond [`PER_INSN`].
    ///
    /// The deadline first comes from bounds kept on the hot path: the
    /// oldest pending use may since have been resolved, and `veneers`
    /// counts every forward `b.cond` since the last count. When that
    /// deadline is reached, `recount` walks the chains of the labels still
    /// open for the real oldest use and the real number of veneers, and
    /// only if those say so is the island placed. A count comes at most
    /// about once per MiB of code while anything is pending.
    fn plan(&mut self, m: &'static str, extra: usize) {
        if self.within_reach(extra) {
            return;
        }
        self.recount();
        if self.pending != NONE && !self.within_reach(extra) {
            self.island(m, extra);
        }
    }

    /// True if the code and the island may grow by another instruction
    /// (and `extra`) before the oldest pending use's deadline; the budget
    /// then runs out at the last instruction that may still place the
    /// island.
    fn within_reach(&mut self, extra: usize) -> bool {
        let limit = self.pending as usize + REACH - MARGIN;
        let used =
            self.buf.pos() + self.st.pool.len() + 4 * self.veneers as usize + extra + PER_INSN;
        if used > limit {
            return false;
        }
        let n = (limit - used) / PER_INSN + 1;
        self.buf.cap(n.min(u32::MAX as usize) as u32);
        true
    }

    /// The open labels from `label_scan` on whose chains hold a `b.cond`:
    /// calls `each` with the label and the position of its oldest
    /// `b.cond`. Moves `label_scan` past the placed labels it starts at.
    fn open_conds(&mut self, mut each: impl FnMut(u32, u32)) {
        while self
            .labels
            .get(self.label_scan)
            .is_some_and(|&w| (w as u32) & UNPLACED == 0)
        {
            self.label_scan += 1;
        }
        for (label, &w) in self.labels.iter().enumerate().skip(self.label_scan) {
            let lo = w as u32;
            if lo & UNPLACED == 0 || lo == UNPLACED | NO_REF {
                continue;
            }
            let (mut at, mut oldest) = (lo & NO_REF, None);
            loop {
                let word = self.buf.read4(at as usize);
                let link = if is_b(word) {
                    word & 0x03ff_ffff
                } else {
                    oldest = Some(at);
                    word >> 5 & 0x7ffff
                };
                if link == 0 || link > at >> 2 {
                    break;
                }
                at -= link << 2;
            }
            if let Some(at) = oldest {
                each(label as u32, at);
            }
        }
    }

    /// Sets `pending` to the oldest use still pending (a forward `b.cond`
    /// to a label not placed, or a constant's use) and `veneers` to the
    /// labels such `b.cond`s go to, or `pending` to [`NONE`].
    #[cold]
    #[inline(never)]
    fn recount(&mut self) {
        let (mut oldest, mut n) = (self.pool_refs.first().map_or(NONE, |r| r.at), 0);
        self.open_conds(|_, at| {
            oldest = oldest.min(at);
            n += 1;
        });
        self.pending = oldest;
        self.veneers = n;
    }

    /// Emits an island at the current position: `b over`, a veneer `b
    /// label` for each label that a forward `b.cond` goes to (the
    /// `b.cond`s now branch to it; the veneer takes their place in the
    /// label's chain), the pending constants and data (their uses patched
    /// now), and `over:`. Nothing is pending afterwards.
    #[cold]
    #[inline(never)]
    fn island(&mut self, m: &'static str, extra: usize) {
        let mut open = Vec::new();
        self.open_conds(|label, _| open.push(label));
        self.buf.reserve(m, 8 + 4 * open.len() + self.st.pool.len());
        let start = self.buf.pos();
        self.put(0x1400_0000); // b over (patched below)
        for label in open {
            // The veneer heads the chain of the label's `b`s and `bl`s;
            // its `b.cond`s leave the chain for the veneer.
            let veneer = self.buf.pos() as u32;
            self.put(0x1400_0000);
            let w = self.labels[label as usize];
            let mut at = w as u32 & NO_REF;
            let mut kept = veneer;
            loop {
                let word = self.buf.read4(at as usize);
                let rel = veneer - at;
                let link = if is_b(word) {
                    let word_kept = self.buf.read4(kept as usize);
                    let back = (kept - at) >> 2;
                    self.buf
                        .patch4(kept as usize, word_kept & 0xfc00_0000 | back & 0x03ff_ffff);
                    kept = at;
                    word & 0x03ff_ffff
                } else {
                    if rel >> 2 > COND_LINK {
                        self.far_target(m, COND_LINK);
                    }
                    let field = ((rel >> 2) & 0x7ffff) << 5;
                    self.buf.patch4(at as usize, word & 0xff00_001f | field);
                    word >> 5 & 0x7ffff
                };
                if link == 0 || link > at >> 2 {
                    break;
                }
                at -= link << 2;
            }
            // The last `b` kept ends the chain.
            let word_kept = self.buf.read4(kept as usize);
            self.buf.patch4(kept as usize, word_kept & 0xfc00_0000);
            self.labels[label as usize] = w & !0xffff_ffff | u64::from(UNPLACED | veneer);
        }
        if !self.st.pool.is_empty() {
            if !self.buf.pos().is_multiple_of(8) {
                self.put(0); // udf: 8-byte slots, as at the end
            }
            let pool_at = self.buf.pos();
            self.placed.push((self.pool_base, pool_at as u32));
            for c in self.st.pool.chunks_exact(8) {
                let word = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
                self.buf.put(word, 8);
            }
            for i in 0..self.pool_refs.len() {
                let r = self.pool_refs[i];
                let slot_at = pool_at + 8 * (r.slot - self.pool_base) as usize;
                let rel = slot_at as i64 - r.at as i64;
                match pool_word(self.buf.read4(r.at as usize), rel) {
                    Some(w) => self.buf.patch4(r.at as usize, w),
                    None => self.buf.fail_at(r.index, r.method, FAR_CONSTANT),
                }
            }
            self.pool_base += (self.st.pool.len() / 8) as u32;
            self.st.pool.clear();
        }
        self.pool_refs.clear();
        let over = self.buf.pos() - start;
        self.buf.patch4(start, 0x1400_0000 | (over >> 2) as u32);
        self.veneers = 0;
        self.pending = NONE;
        self.buf.refill(m, extra);
    }

    /// `bl label`: as [`A64::jump_to`] for `b`.
    #[inline(always)]
    fn bl_to(&mut self, label: u32) {
        let at = self.buf.pos();
        self.jump_to(FIX_JAL, None, label);
        // The same word with the link bit: bl.
        let word = self.buf.read4(at);
        self.buf.patch4(at, word | 0x8000_0000);
    }

    #[inline(always)]
    fn emit_branch(&mut self, m: &'static str, c: Cond, ty: Ty, a: u8, b: Src, l: Label) {
        self.insn(m);
        let kind = c as u8;
        if ty.is_float() {
            let Src::R(b) = b else {
                return self.buf.fail(
                    m,
                    ErrorKind::UnsupportedType {
                        insn: "branch with an immediate",
                        ty,
                    },
                );
            };
            self.fcmp(ty, v(a), v(b));
            return self.jump_to(kind, Some(cc_float(c)), l.0);
        }
        let b = match b {
            Src::R(r) => Src::R(g(r)),
            i => i,
        };
        self.cmp(ty.is_64(), g(a), b);
        self.jump_to(kind, Some(cc_int(c, ty.is_signed())), l.0);
    }

    #[inline(always)]
    fn emit_jump(&mut self, m: &'static str, link: bool, t: Target) {
        self.insn(m);
        if link {
            self.st.frame = true;
            // x30 survives: a subroutine may itself jal.
            self.put(0xf81f_0ffe); // str x30, [sp, #-16]!
        }
        match t {
            Target::Label(l) => {
                if link {
                    self.bl_to(l.0);
                } else {
                    self.jump_to(FIX_JMP, None, l.0);
                }
            }
            Target::Reg(r) => {
                let op = if link { 0xd63f_0000 } else { 0xd61f_0000 };
                self.put(op | (g(r) as u32) << 5);
            }
            Target::Addr(a) => {
                self.movi(true, IP0, a as i64);
                let op = if link { 0xd63f_0000 } else { 0xd61f_0000 };
                self.put(op | (IP0 as u32) << 5);
            }
        }
        if link {
            self.put(0xf841_07fe); // ldr x30, [sp], #16
        }
    }

    #[inline(always)]
    fn emit_place(&mut self, m: &'static str, l: Label) {
        self.buf.insn_no_code();
        // A branch may arrive here with other flags.
        self.flags = None;
        let pos = self.buf.pos() as u32;
        match self.labels.get_mut(l.0 as usize) {
            Some(w) if (*w as u32) & UNPLACED != 0 => {
                let head = *w as u32 & NO_REF;
                *w = u64::from(pos);
                self.st.last_place = pos;
                if head != NO_REF {
                    self.open_labels -= 1;
                    self.resolve(m, head, pos);
                }
            }
            Some(_) => self.buf.fail(m, ErrorKind::LabelPlacedTwice { label: l.0 }),
            None => self.buf.fail(m, ErrorKind::UnknownLabel { label: l.0 }),
        }
    }

    fn emit_jump_table(&mut self, m: &'static str, idx: u8, targets: &[Label]) {
        self.insn(m);
        self.reserve(m, 4 * targets.len() + 32);
        // adr x17, table; ldrsw x16, [x17, idx, lsl 2]; add x17, x17, x16; br x17
        self.put(0x1000_0000 | (16 >> 2) << 5 | IP1 as u32);
        self.put(0xb8a0_7800 | (g(idx) as u32) << 16 | (IP1 as u32) << 5 | IP0 as u32);
        self.rrr(0x8b00_0000, IP1, IP1, IP0);
        self.put(0xd61f_0000 | (IP1 as u32) << 5);
        let table = self.buf.pos() as u32;
        let index = self.buf.index();
        for l in targets {
            self.tables.push((
                Fixup {
                    at: self.buf.pos() as u32,
                    label: l.0,
                    index,
                    kind: FIX_TABLE,
                },
                table,
            ));
            self.put(0);
        }
        self.resync(m);
    }
}

// ===========================================================================
// 6. Prologue, epilogue and end
// ===========================================================================

impl A64 {
    /// Resets this target's own per-function state (the shared `begin`
    /// resets the buffer and [`FuncState`] and moves the parameters);
    /// inlined into `lambda` (a dozen stores).
    #[inline(always)]
    fn enter(&mut self) {
        self.labels.clear();
        self.open_labels = 0;
        self.far_firsts.clear();
        self.ret_head = NO_LINK;
        self.label_scan = 0;
        self.tables.clear();
        self.pool_refs.clear();
        self.pool_base = 0;
        self.placed.clear();
        self.pending = NONE;
        self.veneers = 0;
        self.last_ret = None;
        self.flags = None;
    }

    #[inline(always)]
    fn emit_ret(&mut self, m: &'static str, ty: Ty, r: u8) {
        self.insn(m);
        if let Err(kind) = self.st.note_ret(ty) {
            return self.buf.fail(m, kind);
        }
        match ty {
            Ty::V => {}
            Ty::F | Ty::D => self.fmov(ty, 0, v(r)),
            // The caller reads only w0 of a 32-bit result.
            _ if g(r) == 0 => {}
            _ => self.mov(ty.is_64(), 0, g(r)),
        }
        self.ret_branch(m);
    }

    /// A return's `b epilogue`, linked into the chain of returns.
    #[inline(always)]
    fn ret_branch(&mut self, m: &'static str) {
        let at = self.buf.pos() as u32;
        let link = if self.ret_head == NO_LINK {
            0
        } else {
            (at - self.ret_head) >> 2
        };
        if link > 0x03ff_ffff {
            self.far_target(m, B_LINK);
        }
        self.put(0x1400_0000 | link & 0x03ff_ffff);
        self.last_ret = Some((at as usize, self.ret_head));
        self.ret_head = at;
    }

    /// A return of the 32-bit constant 0 in `w0` with `value` (a vcode
    /// register or a 32-bit constant) in vcode register `to`
    /// ([`crate::ext::Exit::ret_zero_with`]): `mov to, value; mov w0, #0;
    /// b epilogue`. The value is moved first, so that it may be in `w0`.
    pub(crate) fn ret_zero_with(&mut self, m: &'static str, value: Src, to: u8) {
        self.insn(m);
        if let Err(kind) = self.st.note_ret(Ty::I) {
            return self.buf.fail(m, kind);
        }
        match value {
            Src::R(r) => self.mov(false, g(to), g(r)),
            Src::I(k) => self.movi(false, g(to), i64::from(k as i32)),
        }
        self.movi(false, 0, 0);
        self.ret_branch(m);
    }

    /// Points every return at the epilogue at `epi_at`, or without a frame
    /// makes it a `ret`.
    #[inline(always)]
    fn patch_returns(&mut self, frame: bool, epi_at: u32) -> Result<(), Error> {
        let mut at = self.ret_head;
        while at != NO_LINK {
            let link = self.buf.read4(at as usize) & 0x03ff_ffff;
            if frame {
                let rel = (epi_at - at) >> 2;
                if rel > B_LINK {
                    return Err(self.far_return());
                }
                self.buf.patch4(at as usize, 0x1400_0000 | rel);
            } else {
                self.buf.patch4(at as usize, RET); // the epilogue is a bare ret
            }
            if link == 0 {
                break;
            }
            at -= link << 2;
        }
        Ok(())
    }

    /// The error of a return beyond `b`'s reach of the epilogue.
    #[cold]
    #[inline(never)]
    fn far_return(&self) -> Error {
        Error::new(
            self.buf.index().wrapping_add(1),
            "end",
            ErrorKind::Unsupported("aarch64: a branch beyond b's ±128 MiB"),
        )
    }

    #[inline]
    fn link(
        &mut self,
        alloc: &RegAlloc,
        sig: &'static Signature,
        name: Option<String>,
        mem: Option<&dyn ExecMemory>,
    ) -> Result<Code, Error> {
        if let Some(e) = self.buf.err.take() {
            return Err(e);
        }
        if self.open_labels != 0 {
            return Err(self.unplaced_error());
        }
        let end_index = self.buf.index().wrapping_add(1);
        let err = Error::new;
        // A body ending in `b epilogue` falls through instead, unless a
        // label was placed after it (branches to it are patched already):
        // the jump is the head of the chain of returns, and the rest of
        // the chain is the head before it.
        if let Some((at, rest)) = self.last_ret
            && at + 4 == self.buf.pos()
            && self.st.last_place as usize <= at
        {
            self.ret_head = rest;
            self.buf.truncate(at);
        }
        let body_len = self.buf.pos();
        let saves = self.st.saves(alloc, regfile::gpr::X0);
        let frame = self.st.needs_frame(saves);
        // The common case: no frame, constants, jump tables or alignment,
        // in this backend's run of the default memory. The code is the
        // body and a `ret`, written straight into the run's writable view
        // (dual-mapped: nothing to seal); every return returns in place.
        let plain = self.st.pool.is_empty()
            && self.pool_refs.is_empty()
            && self.tables.is_empty()
            && self.st.align == 1
            && mem.is_none();
        if plain && !frame {
            self.patch_returns(false, body_len as u32)?;
            let len = (body_len + 4).next_multiple_of(8);
            if let Some(r) = self.st.slab.reserve(len) {
                // The run's bytes are fresh zeroes (a run is never reused),
                // so the padding after the `ret` needs no writing.
                crate::mem::copy_to(r.out, self.buf.bytes());
                r.out[body_len..body_len + 4].copy_from_slice(&RET.to_le_bytes());
                let parts = Parts {
                    start: 0,
                    image_len: len,
                    prologue: 0,
                    body: body_len,
                    code_len: body_len + 4,
                };
                let ret = self.st.ret_ty.unwrap_or(Ty::V);
                let code = Code::new(r.into_block(), parts, sig, name, ret);
                sync_icache(code.addr(), code.len());
                return Ok(code);
            }
        }
        // The prologue and epilogue depend only on the frame, the saved
        // registers and the frame's size: the last function's are reused
        // when those are the same (as they are for most functions of one
        // client). The key is unset while the buffers are out of `self`,
        // so that an error return (which drops them) cannot leave a stale key.
        let size = if frame { self.st.frame_size() } else { 0 };
        let key = if frame {
            1 | u64::from(saves[0]) << 1 | u64::from(saves[1]) << 17 | u64::from(size) << 33
        } else {
            0
        };
        // With a frame and nothing else, and the frame of the last
        // function: the prologue, the body and the epilogue copied
        // straight into the run (its bytes are fresh zeroes, so the
        // padding to a whole word needs no writing).
        let (pro_len, epi_len) = self.frame_lens;
        if plain && self.frame_key == key && pro_len <= 64 && epi_len <= 64 {
            let total = pro_len + body_len + epi_len;
            let len = total.next_multiple_of(8);
            // The general path, if the run has no room, finds the returns
            // patched as it would patch them.
            self.patch_returns(true, body_len as u32)?;
            self.ret_head = NO_LINK;
            if let Some(r) = self.st.slab.reserve(len) {
                let (pro, rest) = r.out.split_at_mut(pro_len);
                let (body, epi) = rest.split_at_mut(body_len);
                crate::mem::copy_short(pro, &self.pro[..pro_len]);
                crate::mem::copy_to(body, self.buf.bytes());
                crate::mem::copy_short(epi, &self.epi[..epi_len]);
                let parts = Parts {
                    start: 0,
                    image_len: len,
                    prologue: pro_len,
                    body: body_len,
                    code_len: total,
                };
                let ret = self.st.ret_ty.unwrap_or(Ty::V);
                let code = Code::new(r.into_block(), parts, sig, name, ret);
                sync_icache(code.addr(), code.len());
                return Ok(code);
            }
        }
        let mut pro = std::mem::take(&mut self.pro);
        let mut epi = std::mem::take(&mut self.epi);
        if std::mem::replace(&mut self.frame_key, NO_FRAME_KEY) == key {
            pro.truncate(self.frame_lens.0);
            epi.truncate(self.frame_lens.1);
        } else {
            pro.clear();
            epi.clear();
            if frame {
                pro.w(0xa9bf_7bfd); // stp x29, x30, [sp, #-16]!
                pro.w(0x9100_03fd); // mov x29, sp
                add_imm_to(&mut pro, true, SP, SP, -i64::from(size));
                // Only the register numbers saved in either file, in order.
                let mut todo = saves[0] | saves[1];
                while todo != 0 {
                    let n = todo.trailing_zeros() as u8;
                    todo &= todo - 1;
                    if saves[0] & (1 << n) != 0 {
                        let off = Src::I(regfile::gpr_save_slot(n) as i64);
                        mem_to(&mut pro, STR_X, g(n), FP, off);
                        mem_to(&mut epi, LDR_X, g(n), FP, off);
                    }
                    if saves[1] & (1 << n) != 0 {
                        let off = Src::I(regfile::xmm_save_slot(n) as i64);
                        mem_to(&mut pro, STR_Q, v(n), FP, off);
                        mem_to(&mut epi, LDR_Q, v(n), FP, off);
                    }
                }
                epi.w(0x9100_03bf); // mov sp, x29
                epi.w(0xa8c1_7bfd); // ldp x29, x30, [sp], #16
            }
            epi.w(RET);
            self.frame_lens = (pro.len(), epi.len());
        }
        while pro.len() & (self.st.align - 1) != 0 {
            pro.w(NOP);
        }
        let epi_at = body_len as u32;
        let epi_len = epi.len();
        let pool_at = (body_len + epi_len + 7) & !7;
        while body_len + epi.len() < pool_at {
            epi.w(0); // udf
        }
        self.patch_returns(frame, epi_at)?;
        for r in &self.pool_refs {
            let slot_at = pool_at as i64 + 8 * (r.slot - self.pool_base) as i64;
            let at = r.at as usize;
            let word = self.buf.read4(at);
            let patched = pool_word(word, slot_at - r.at as i64)
                .ok_or_else(|| err(r.index, r.method, FAR_CONSTANT))?;
            self.buf.patch4(at, patched);
        }
        for &(f, table) in &self.tables {
            let target = match self.labels.get(f.label as usize).map(|&w| w as u32) {
                Some(p) if p & UNPLACED == 0 => p,
                found => return Err(label_error(f.index, f.method(), f.label, found.is_some())),
            };
            self.buf.patch4(f.at as usize, target.wrapping_sub(table));
        }
        let total = pro.len() + body_len + epi.len() + self.st.pool.len();
        // The image is a whole number of 8-byte words (the constants are
        // 8-byte slots) starting at a multiple of `align` (at least 8) in
        // memory: the block is taken with room to move the start there.
        let align = self.st.align.max(8);
        let len = total.next_multiple_of(8) + (align - 8);
        let parts = [&pro[..], self.buf.bytes(), &epi[..], &self.st.pool[..]];
        let block = match mem {
            None => match self.st.slab.reserve(len) {
                // The common case: written straight into this backend's run
                // of the thread's arena (dual-mapped: nothing to seal).
                Some(r) => {
                    let start = r.exec.next_multiple_of(align) - r.exec;
                    write_image(r.out, start, parts, false);
                    Ok((r.into_block(), start))
                }
                None => fill_block(self.st.slab.alloc(len), len, align, parts),
            },
            Some(m) => fill_block(m.alloc(len), len, align, parts),
        };
        let (block, start) = block.map_err(|kind| Error::new(end_index, "end", kind))?;
        let pro_len = pro.len();
        self.pro = pro;
        self.epi = epi;
        self.frame_key = key;
        let parts = Parts {
            start,
            image_len: len - (align - 8),
            prologue: pro_len,
            body: body_len,
            code_len: pro_len + body_len + epi_len,
        };
        let code = Code::new(block, parts, sig, name, self.st.ret_ty.unwrap_or(Ty::V));
        sync_icache(code.addr(), code.len());
        Ok(code)
    }
}

/// Writes `parts` one after the other into `out` from `start`, and if
/// `zero`, zeroes the rest (the padding before and after the image; a
/// [`Slab`](crate::mem::Slab)'s run is fresh zeroes already, never reused).
#[inline(always)]
fn write_image(out: &mut [u8], start: usize, parts: [&[u8]; 4], zero: bool) {
    if zero {
        out[..start].fill(0);
    }
    let mut at = start;
    for part in parts {
        crate::mem::copy_to(&mut out[at..], part);
        at += part.len();
    }
    if zero {
        out[at..].fill(0);
    }
}

/// Writes `parts` into a block of `len` bytes taken from an allocator
/// (the client's [`ExecMemory`], or a mapping of its own where the
/// default arena has no runs), at the first multiple of `align` in it,
/// and seals it: the block and where the image starts in it.
#[cold]
#[inline(never)]
fn fill_block(
    block: Result<crate::mem::ExecBlock, ErrorKind>,
    len: usize,
    align: usize,
    parts: [&[u8]; 4],
) -> Result<(crate::mem::ExecBlock, usize), ErrorKind> {
    let mut block = block?;
    let exec = block.addr();
    let start = exec.next_multiple_of(align) - exec;
    block.fill_with(len, |out| write_image(out, start, parts, true))?;
    Ok((block, start))
}

/// Makes freshly written code visible to instruction fetch: on an aarch64
/// host, `__clear_cache` (`dc cvau` / `ic ivau` over the range, then `dsb
/// ish; isb`); elsewhere (this backend under emulation) nothing, since the
/// emulator translates the code afresh.
#[inline]
fn sync_icache(addr: usize, len: usize) {
    #[cfg(target_arch = "aarch64")]
    {
        unsafe extern "C" {
            fn __clear_cache(start: *mut std::ffi::c_char, end: *mut std::ffi::c_char);
        }
        // SAFETY: the range is the code just written, owned by the caller.
        unsafe { __clear_cache(addr as *mut _, (addr + len) as *mut _) };
    }
    #[cfg(not(target_arch = "aarch64"))]
    let _ = (addr, len);
}

/// A function generated by the aarch64 backend (its accessors are
/// [`crate::code::Code`]'s). Dropping it frees the code.
pub type Code = crate::code::Code<A64>;

impl Code {
    /// The instruction words, one per line with its offset, the parts marked.
    pub fn listing(&self) -> String {
        let (pro, epi) = self.parts();
        let mut s = String::new();
        for (i, w) in self.bytes().chunks_exact(4).enumerate() {
            let at = 4 * i;
            if at == 0 {
                s.push_str("; prologue\n");
            }
            if at == pro {
                s.push_str("; body\n");
            }
            if at == epi {
                s.push_str("; epilogue\n");
            }
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            s.push_str(&format!("{at:6x}: {w:08x}\n"));
        }
        s
    }
}

#[cfg(feature = "emu")]
impl Code {
    /// A listing of the machine code (yaxpeax-arm), with the vcode
    /// function's parts marked.
    pub fn disassemble(&self) -> String {
        self.disassemble_marked(&[])
    }

    /// [`Code::disassemble`] with the client's own headings at body
    /// offsets (as given by [`Func::code_offset`](crate::Func::code_offset)).
    ///
    /// A jump table (`jump_table`'s `adr x17, #16; ldrsw; add; br x17`,
    /// the table right after the `br`) is listed as data: one `.word` a
    /// line with the entry's target as an offset in the code, while the
    /// words are offsets from the table into the code and no heading
    /// falls on one after the first.
    pub fn disassemble_marked(&self, marks: &[(usize, String)]) -> String {
        use yaxpeax_arch::{Decoder, U8Reader};
        /// `adr x17, #16`: the table 16 bytes on, after the `br`.
        const ADR_TABLE: u32 = 0x1000_0000 | (16 >> 2) << 5 | IP1 as u32;
        /// `br x17`.
        const BR_TABLE: u32 = 0xd61f_0000 | (IP1 as u32) << 5;
        let all = self.headings(marks);
        let dec = yaxpeax_arm::armv8::a64::InstDecoder::default();
        let mut s = String::new();
        let base = self.addr();
        let code = self.bytes();
        let words: Vec<u32> = code
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        // Within a jump table, the offset where it starts: its entries
        // are offsets from there.
        let mut table = None;
        for (i, &word) in words.iter().enumerate() {
            let at = 4 * i;
            let mut headed = false;
            for (_, t) in all.iter().filter(|m| m.0 == at) {
                s.push_str(&format!("; {t}\n"));
                headed = true;
            }
            if headed && table.is_some_and(|t| t != at) {
                table = None;
            }
            let to = table.and_then(|t: usize| {
                let to = t as i64 + i64::from(word as i32);
                (0..code.len() as i64).contains(&to).then_some(to)
            });
            table = to.and(table);
            let text = match to {
                Some(to) => format!(".word   {to:x}"),
                None => match dec.decode(&mut U8Reader::new(&word.to_le_bytes())) {
                    Ok(insn) => insn.to_string(),
                    Err(e) => format!("(invalid: {e})"),
                },
            };
            s.push_str(&format!("{:12x}:  {word:08x}  {text}\n", base + at));
            if to.is_none() && word == BR_TABLE && i >= 3 && words[i - 3] == ADR_TABLE {
                table = Some(at + 4);
            }
        }
        s
    }
}

impl std::fmt::Debug for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fmt_titled(f, "aarch64::Code")
    }
}

// ===========================================================================
// 7. Extensions (native encoders for `ext`)
// ===========================================================================

impl A64 {
    /// `fsqrt rd, a`.
    pub fn sqrt(&mut self, ty: Ty, rd: u8, a: u8) {
        self.put(0x1e21_c000 | ftype(ty) | (v(a) as u32) << 5 | v(rd) as u32);
    }

    /// Byte swaps: `rd` = the low `bits` bits of `a` byte-swapped,
    /// zero-extended (`rev16`+`uxth`, `rev w`, `rev x`); `bits` 3232: each
    /// 32-bit half swapped in place (`rev32 x`).
    pub fn bswap(&mut self, bits: u32, rd: u8, a: u8) {
        let (rd, a) = (g(rd), g(a));
        match bits {
            16 => {
                self.put(0x5ac0_0400 | (a as u32) << 5 | rd as u32); // rev16 wd, wa
                self.put(0x5300_3c00 | (rd as u32) << 5 | rd as u32); // uxth
            }
            32 => self.put(0x5ac0_0800 | (a as u32) << 5 | rd as u32),
            3232 => self.put(0xdac0_0800 | (a as u32) << 5 | rd as u32),
            _ => self.put(0xdac0_0c00 | (a as u32) << 5 | rd as u32),
        }
    }

    /// `dmb ish`: a full barrier for the inner shareable domain (every
    /// load and store before it is ordered before every one after it, as
    /// other cores see them). A release store is this and a store
    /// ([`crate::ext::StoreRelease`]).
    pub fn dmb_ish(&mut self) {
        self.put(0xd503_3bbf);
    }

    /// `rd = ((a >> 8) & m) | ((a & m) << 8)` (64-bit).
    pub fn bswap16x4(&mut self, rd: u8, a: u8, m: u8) {
        let (rd, a, m) = (g(rd), g(a), g(m));
        self.put(0xd348_fc00 | (a as u32) << 5 | IP0 as u32); // lsr x16, a, #8
        self.rrr(0x8a00_0000, IP0, IP0, m);
        self.rrr(0x8a00_0000, IP1, a, m);
        self.put(0xd378_dc00 | (IP1 as u32) << 5 | IP1 as u32); // lsl x17, x17, #8
        self.rrr(0xaa00_0000, rd, IP0, IP1);
    }

    /// `rd = a + b + carry(a + b)`: `adds` and `cinc rd, rd, cs`.
    pub fn add1c(&mut self, w: bool, rd: u8, a: u8, b: u8) {
        let (rd, a, b) = (g(rd), g(a), g(b));
        self.rrr(sf(w) | 0x2b00_0000, rd, a, b);
        self.put(
            sf(w)
                | 0x1a80_0400
                | (rd as u32) << 16
                | (LO as u32) << 12
                | (rd as u32) << 5
                | rd as u32,
        );
    }

    /// `rd = popcount(a)` through the SIMD unit: `fmov d31, a; cnt v31.8b;
    /// addv b31, v31.8b; fmov rd, s31`.
    pub fn popcnt(&mut self, w: bool, rd: u8, a: u8) {
        let (rd, a) = (g(rd), g(a));
        if w {
            self.put(0x9e67_0000 | (a as u32) << 5 | V31 as u32);
        } else {
            self.put(0x1e27_0000 | (a as u32) << 5 | V31 as u32);
        }
        self.put(0x0e20_5800 | (V31 as u32) << 5 | V31 as u32); // cnt v31.8b, v31.8b
        self.put(0x0e31_b800 | (V31 as u32) << 5 | V31 as u32); // addv b31, v31.8b
        self.put(0x1e26_0000 | (V31 as u32) << 5 | rd as u32); // fmov wd, s31
    }

    /// `rd = c != 0 ? a : b`: `cmp c, #0; csel`.
    /// A `select` right after another on the same condition register
    /// (nothing in between, no label, the register not its destination)
    /// reuses the flags of the first one's `cmp`.
    pub fn select(&mut self, w: bool, rd: u8, c: u8, a: u8, b: u8) {
        let (rd, c, a, b) = (g(rd), g(c), g(a), g(b));
        if self.flags != Some((self.buf.pos() as u32, c, w)) {
            self.cmp(w, c, Src::I(0));
        }
        self.csel(w, rd, a, b, NE);
        self.flags = (rd != c).then_some((self.buf.pos() as u32, c, w));
    }

    /// `rd = a < b ? a : b` (or `>` for `max`): `cmp`/`fcmp` and `csel`/`fcsel`.
    pub fn minmax(&mut self, ty: Ty, max: bool, rd: u8, a: u8, b: u8) {
        if ty.is_float() {
            self.fcmp(ty, v(a), v(b));
            let cc = if max { GT } else { MI };
            // fcsel rd, a, b, cc
            self.put(
                0x1e20_0c00
                    | ftype(ty)
                    | (v(b) as u32) << 16
                    | (cc as u32) << 12
                    | (v(a) as u32) << 5
                    | v(rd) as u32,
            );
        } else {
            self.cmp(ty.is_64(), g(a), Src::R(g(b)));
            let cc = cc_int(if max { Cond::Gt } else { Cond::Lt }, ty.is_signed());
            self.csel(ty.is_64(), g(rd), g(a), g(b), cc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first implementation of [`logical_imm`] (a search for the
    /// element size), the oracle of the branch-free one: the `N:immr:imms` field of a logical immediate, if `v` (64-bit, or the
    /// low 32 bits when `!w`) is a rotated run of ones repeated.
    fn logical_imm_by_search(v: u64, w: bool) -> Option<u32> {
        let v = if w {
            v
        } else {
            let x = v & 0xffff_ffff;
            x | x << 32
        };
        if v == 0 || v == !0 {
            return None;
        }
        let mut size = 64u32;
        while size > 2 {
            let half = size / 2;
            let mask = (1u64 << half) - 1;
            if v & mask != (v >> half) & mask {
                break;
            }
            size = half;
        }
        let mask = if size == 64 { !0 } else { (1u64 << size) - 1 };
        let elt = v & mask;
        let ones = elt.count_ones();
        // elt = ROR(ones-run, r) within `size` bits: the run starts at bit
        // `start`, either inside the element or wrapping around its top.
        let tz = elt.trailing_zeros();
        let start = if (elt >> tz) == (1u64 << ones) - 1 {
            tz
        } else {
            let inv = !elt & mask;
            let tzi = inv.trailing_zeros();
            if (inv >> tzi) != (1u64 << (size - ones)) - 1 {
                return None;
            }
            tzi + size - ones
        };
        let r = (size - start % size) % size;
        let n = (size == 64) as u32;
        let imms = ((!(size * 2 - 1)) & 0x3f) | (ones - 1);
        Some(n << 12 | r << 6 | imms)
    }

    /// The first implementation of [`movi_long`] (a loop over the chunks),
    /// the oracle of the mask-based one.
    fn movi_long_by_loop(s: &mut impl Sink, w: bool, rd: u8, v: u64) {
        let chunks: u32 = if w { 4 } else { 2 };
        let ch = |i: u32| (v >> (16 * i)) & 0xffff;
        let (mut zeros, mut ones) = (0, 0);
        for i in 0..4 {
            if i < chunks {
                zeros += (ch(i) == 0) as u32;
                ones += (ch(i) == 0xffff) as u32;
            }
        }
        let need = chunks - zeros.max(ones);
        if need > 1
            && let Some(imm) = logical_imm_by_search(v, w)
        {
            // orr rd, zr, #imm
            s.w(sf(w) | 0x3200_0000 | imm << 10 | (ZR as u32) << 5 | rd as u32);
            return;
        }
        let inverted = ones > zeros;
        let skip = if inverted { 0xffff } else { 0 };
        // All chunks skipped (0 or -1): one movz/movn of chunk 0.
        let all = zeros.max(ones) == chunks;
        let mut first = true;
        for i in 0..chunks {
            let c = ch(i);
            if c == skip && !(all && i == 0) {
                continue;
            }
            let word = if first {
                first = false;
                if inverted {
                    // movn: rd = !(imm << 16i)
                    sf(w) | 0x1280_0000 | i << 21 | ((!c & 0xffff) as u32) << 5
                } else {
                    sf(w) | 0x5280_0000 | i << 21 | (c as u32) << 5
                }
            } else {
                sf(w) | 0x7280_0000 | i << 21 | (c as u32) << 5
            };
            s.w(word | rd as u32);
        }
    }

    /// The 64-bit value whose every `size`-bit element is `run` (ones in
    /// the low bits) rotated right by `r`: a logical immediate as the
    /// architecture's DecodeBitMasks builds it.
    fn replicated(run: u64, r: u32, size: u32) -> u64 {
        let mask = if size == 64 { !0 } else { (1u64 << size) - 1 };
        let elt = if r == 0 {
            run
        } else {
            ((run >> r) | (run << (size - r))) & mask
        };
        (0..64).step_by(size as usize).fold(0, |v, k| v | elt << k)
    }

    /// Values of every shape the two encoders tell apart: each 16-bit
    /// chunk 0, 0xffff, or another value; every rotated run in every
    /// element size; random values.
    fn immediates() -> Vec<u64> {
        let mut vals = Vec::new();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for shape in 0..81u32 {
            for _ in 0..8 {
                let mut v = 0u64;
                let mut k = shape;
                for i in 0..4 {
                    let c = match k % 3 {
                        0 => 0,
                        1 => 0xffff,
                        _ => next() & 0xffff,
                    };
                    v |= c << (16 * i);
                    k /= 3;
                }
                vals.push(v);
            }
        }
        for size in [2u32, 4, 8, 16, 32, 64] {
            for ones in 1..size {
                for r in 0..size {
                    let v = replicated((1u64 << ones) - 1, r, size);
                    vals.extend([v, v ^ 1, v ^ (1 << 63), !v]);
                }
            }
        }
        vals.extend((0..20_000).map(|_| next()));
        vals.extend((0..2_000).map(|_| next() >> (next() % 64)));
        vals
    }

    #[test]
    fn logical_immediates_agree_with_the_search() {
        for v in immediates() {
            for w in [true, false] {
                assert_eq!(logical_imm(v, w), logical_imm_by_search(v, w), "{v:#x} {w}");
            }
        }
    }

    #[test]
    fn long_constants_are_the_same_instructions_as_by_the_loop() {
        for v in immediates() {
            for w in [true, false] {
                let v = if w { v } else { v & 0xffff_ffff };
                let (mut got, mut want) = (Vec::new(), Vec::new());
                movi_long(&mut got, w, 9, v);
                movi_long_by_loop(&mut want, w, 9, v);
                assert_eq!(got, want, "{v:#x} {w}");
            }
        }
    }

    #[test]
    fn logical_immediates_encode_as_the_architecture_does() {
        // Known encodings (N:immr:imms) from the A64 reference.
        assert_eq!(logical_imm(0xff, true), Some(0b1_000000_000111));
        assert_eq!(
            logical_imm(0x5555_5555_5555_5555, true),
            Some(0b0_000000_111100)
        );
        assert_eq!(logical_imm(0xffff_0000, false), Some(0b0_010000_001111));
        assert_eq!(logical_imm(0, true), None);
        assert_eq!(logical_imm(!0, true), None);
        assert_eq!(logical_imm(0x1234, true), None);
    }

    /// The encoding decodes (DecodeBitMasks) back to the value, for every
    /// rotated run in every element size, and nothing else encodes.
    #[test]
    fn logical_immediates_decode_back() {
        let decode = |enc: u32, w: bool| -> u64 {
            let (n, immr, imms) = (enc >> 12 & 1, enc >> 6 & 63, enc & 63);
            let len = 31 - ((n << 6) | (!imms & 63)).leading_zeros();
            let size = 1u32 << len;
            let s = imms & (size - 1);
            let r = immr & (size - 1);
            let v = replicated((1u64 << (s + 1)) - 1, r, size);
            if w { v } else { v & 0xffff_ffff }
        };
        let mut rng = 0x1234_5678u64;
        for size in [2u32, 4, 8, 16, 32, 64] {
            for ones in 1..size {
                for r in 0..size {
                    let v = replicated((1u64 << ones) - 1, r, size);
                    let enc = logical_imm(v, true).expect("encodable");
                    assert_eq!(decode(enc, true), v, "{v:#x}");
                    if size <= 32 {
                        let enc = logical_imm(v & 0xffff_ffff, false).expect("encodable");
                        assert_eq!(decode(enc, false), v & 0xffff_ffff, "{v:#x}");
                    }
                }
            }
        }
        for _ in 0..100_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            if let Some(enc) = logical_imm(rng, true) {
                assert_eq!(decode(enc, true), rng);
            }
        }
    }

    #[test]
    fn fmov_immediates_round_trip() {
        assert_eq!(fmov_imm8(Ty::D, 1.0f64.to_bits()), Some(0x70));
        assert_eq!(fmov_imm8(Ty::F, 1.0f32.to_bits() as u64), Some(0x70));
        assert_eq!(fmov_imm8(Ty::D, (-2.5f64).to_bits()), Some(0x84));
        assert_eq!(fmov_imm8(Ty::D, 0.1f64.to_bits()), None);
    }

    /// The first implementation of [`movi_to`] (the chunk search before
    /// the small-value tests), the oracle of the one with them.
    fn movi_by_search(s: &mut impl Sink, w: bool, rd: u8, v: i64) {
        let mask = if w { !0u64 } else { 0xffff_ffff };
        let v = v as u64 & mask;
        let nv = !v & mask;
        let tz = if v == 0 { 0 } else { v.trailing_zeros() & !15 };
        let tzn = if nv == 0 {
            0
        } else {
            nv.trailing_zeros() & !15
        };
        if v >> tz < 0x1_0000 {
            s.w(sf(w) | 0x5280_0000 | (tz / 16) << 21 | ((v >> tz) as u32) << 5 | rd as u32);
        } else if nv >> tzn < 0x1_0000 {
            s.w(sf(w) | 0x1280_0000 | (tzn / 16) << 21 | ((nv >> tzn) as u32) << 5 | rd as u32);
        } else {
            movi_long_by_loop(s, w, rd, v);
        }
    }

    /// The first implementation of [`add_imm_to`] (without the test for
    /// a small positive value first), its oracle.
    fn add_imm_by_cases(s: &mut impl Sink, w: bool, rd: u8, rn: u8, v: i64) {
        let (sub, m) = if v < 0 {
            (true, v.unsigned_abs())
        } else {
            (false, v as u64)
        };
        let base = sf(w) | if sub { 0x5100_0000 } else { 0x1100_0000 };
        if m < 4096 {
            s.w(base | (m as u32) << 10 | (rn as u32) << 5 | rd as u32);
        } else if m < (1 << 24) {
            s.w(base | 1 << 22 | ((m >> 12) as u32) << 10 | (rn as u32) << 5 | rd as u32);
            if m & 0xfff != 0 {
                s.w(base | ((m & 0xfff) as u32) << 10 | (rd as u32) << 5 | rd as u32);
            }
        } else if rn == SP || rd == SP {
            movi_by_search(s, true, IP0, v);
            s.w(0x8b20_6000 | (IP0 as u32) << 16 | (rn as u32) << 5 | rd as u32);
        } else {
            movi_by_search(s, w, IP0, v);
            s.w(sf(w) | 0x0b00_0000 | (IP0 as u32) << 16 | (rn as u32) << 5 | rd as u32);
        }
    }

    /// Values at every boundary of the fast paths for small immediates:
    /// around the 16-bit `movz`/`movn` range, the 12-bit `add` range and
    /// the low-ones masks of every length, in both widths, with the
    /// values beside each.
    fn boundaries() -> Vec<u64> {
        let mut vals = Vec::new();
        for base in [
            0u64,
            0xfff,
            0x1000,
            0xffff,
            0x1_0000,
            0xffff_ffff,
            1 << 32,
            1 << 63,
        ] {
            for d in 0..3u64 {
                for b in [base.wrapping_add(d), base.wrapping_sub(d)] {
                    vals.extend([b, b.wrapping_neg(), !b, b & 0xffff_ffff, !b & 0xffff_ffff]);
                }
            }
        }
        for ones in 1..=64u32 {
            let m = if ones == 64 { !0 } else { (1u64 << ones) - 1 };
            for v in [m, m - 1, m + 1, m << 1, m ^ 1 << 63, m & 0xffff_ffff] {
                vals.extend([v, !v]);
            }
        }
        vals
    }

    #[test]
    fn small_immediates_take_the_same_instructions_as_the_search() {
        for v in boundaries().into_iter().chain(immediates()) {
            for w in [true, false] {
                assert_eq!(logical_imm(v, w), logical_imm_by_search(v, w), "{v:#x} {w}");
                let (mut got, mut want) = (Vec::new(), Vec::new());
                movi_to(&mut got, w, 9, v as i64);
                movi_by_search(&mut want, w, 9, v as i64);
                assert_eq!(got, want, "movi {v:#x} {w}");
                for (rd, rn) in [(9, 10), (SP, SP), (9, SP)] {
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    add_imm_to(&mut got, w, rd, rn, v as i64);
                    add_imm_by_cases(&mut want, w, rd, rn, v as i64);
                    assert_eq!(got, want, "add {v:#x} {w} {rd} {rn}");
                }
            }
        }
    }

    #[test]
    fn movi_uses_the_fewest_instructions() {
        let n = |w, v| {
            let mut s: Vec<u8> = Vec::new();
            movi_to(&mut s, w, 0, v);
            s.len() / 4
        };
        assert_eq!(n(true, 0), 1);
        assert_eq!(n(true, -1), 1);
        assert_eq!(n(true, 0x1234_0000), 1);
        assert_eq!(n(true, 0x1234_5678_9abc_def0), 4);
        assert_eq!(n(true, 0x00ff_00ff_00ff_00ff), 1);
        assert_eq!(n(false, -2), 1);
    }
}
