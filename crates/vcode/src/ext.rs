//! Instruction extensions (paper §5.4): one declarative table adds a family
//! of instructions.
//!
//! The paper's preprocessor took lines like `(sqrt (rd, rs) (f fsqrts)
//! (d fsqrtd))`. Here the table is the [`extensions!`](crate::extensions)
//! macro; each entry names the instruction, its operands, the types it is
//! defined for, and up to three meanings:
//!
//! * `x86_64 => |x, ty, rd, [srcs..]| ...`: a native mapping, calling the
//!   encoders of [`X64`] (optionally guarded by a
//!   CPU-feature test, `x86_64 if cond => ...`);
//! * `aarch64 => |a, ty, rd, [srcs..]| ...`: a native mapping on the
//!   aarch64 backend, calling the encoders of [`A64`]
//!   (section 7 of `aarch64.rs`);
//! * `eval => |ty, &[u64]| -> u64`: the meaning on register bits, which the
//!   reference backend executes;
//! * `core => |f| { ... }`: a definition in terms of core vcode
//!   instructions, which works on every target. The reference backend
//!   runs it when there is no `eval`, so differential tests compare a
//!   native mapping with its portable definition.
//!
//! The macro makes a trait with one generic method per entry and
//! implements it for every [`Func<B>`](crate::Func), so a client crate
//! adds instructions without touching vcode:
//!
//! ```
//! use vcode::{extensions, Func, Leaf, Class, I};
//! extensions! {
//!     /// `rd = a * 2 + b`, portably.
//!     pub trait Mad2 {
//!         /// Multiply by two and add.
//!         fn mad2(rd, a, b): Int for [I, L] {
//!             core => |f| {
//!                 let t = f.getreg::<T>(Class::Temp).unwrap();
//!                 f.add(t, a, a);
//!                 f.add(rd, t, b);
//!                 f.putreg(t);
//!             };
//!         }
//!     }
//! }
//! let mut f = Func::new();
//! let p = f.lambda("%i%i", Leaf::Yes)?;
//! let (a, b) = (p.get::<I>(0)?, p.get::<I>(1)?);
//! f.mad2(a, a, b);
//! f.ret(a);
//! let code = f.end()?;
//! // SAFETY: pure arithmetic.
//! let g = unsafe { code.as_fn::<extern "C" fn(i32, i32) -> i32>()? };
//! assert_eq!(g(20, 2), 42);
//! # Ok::<(), vcode::Error>(())
//! ```

use crate::Operand;
use crate::aarch64::A64;
use crate::backend::Backend;
use crate::func::Func;
use crate::ty::{P, Reg, Type};
use crate::x86_64::X64;

/// What an extension's portable form reports when it finds no integer
/// temporary register free.
const NO_TEMP: crate::ErrorKind = crate::ErrorKind::RegistersExhausted {
    class: "temporary",
    what: "integer",
};

/// The targets an extension entry has a native mapping for: the backend as
/// that target's emitter, if it is one (`None` on the reference backend
/// and on other targets). Resolved at compile time.
pub trait Targets {
    /// The x86-64 emitter.
    fn x86(&mut self) -> Option<&mut X64>;
    /// The aarch64 emitter.
    fn aarch64(&mut self) -> Option<&mut A64>;
}

impl<B: Backend> Targets for B {
    #[inline(always)]
    fn x86(&mut self) -> Option<&mut X64> {
        self.downcast::<X64>()
    }
    #[inline(always)]
    fn aarch64(&mut self) -> Option<&mut A64> {
        self.downcast::<A64>()
    }
}

/// Declares instruction extensions. See the [module docs](crate::ext).
#[macro_export]
macro_rules! extensions {
    ($(
        $(#[$tm:meta])*
        $vis:vis trait $Trait:ident {
            $(
                $(#[$m:meta])*
                fn $name:ident($rd:ident $(, $arg:ident)*): $bound:ident for [$($ty:ident),* $(,)?] {
                    $( x86_64 $(if $guard:expr)? => $x86:expr; )?
                    $( aarch64 => $a64:expr; )?
                    $( eval => $eval:expr; )?
                    $( core => |$f:ident| $core:block; )?
                }
            )*
        }
    )*) => {$(
        $(#[$tm])*
        $vis trait $Trait {
            $(
                $(#[$m])*
                #[doc = concat!("\n\nDefined for types: ", $(stringify!($ty), " ",)* ".")]
                fn $name<T: $crate::$bound>(&mut self, $rd: $crate::Reg<T> $(, $arg: $crate::Reg<T>)*);
            )*
        }
        impl<B: $crate::Backend> $Trait for $crate::Func<B> {
            $(
                #[inline(always)]
                #[allow(unreachable_code, unused_variables, unused_mut)]
                fn $name<T: $crate::$bound>(&mut self, $rd: $crate::Reg<T> $(, $arg: $crate::Reg<T>)*) {
                    const NAME: &str = stringify!($name);
                    let fl = <T as $crate::Type>::TY.is_float();
                    if ![$($crate::Ty::$ty),*].contains(&<T as $crate::Type>::TY) {
                        return self.fail(NAME, $crate::ErrorKind::UnsupportedType { insn: NAME, ty: <T as $crate::Type>::TY });
                    }
                    let args = [$($arg.num()),*];
                    let srcs = [$((fl, $arg.num())),*];
                    self.check_regs(NAME, &[(fl, $rd.num()) $(, (fl, $arg.num()))*]);
                    $(
                        if true $(&& $guard)? {
                            if let Some(x) = $crate::Backend::downcast::<$crate::X64>(self.backend()) {
                                x.insn(NAME);
                                ($x86)(x, <T as $crate::Type>::TY, $rd.num(), args);
                                return;
                            }
                        }
                    )?
                    $(
                        if let Some(x) = $crate::Backend::downcast::<$crate::aarch64::A64>(self.backend()) {
                            x.insn(NAME);
                            ($a64)(x, <T as $crate::Type>::TY, $rd.num(), args);
                            return;
                        }
                    )?
                    $(
                        if $crate::Backend::ext_eval(self.backend(), NAME, <T as $crate::Type>::TY, (fl, $rd.num()), &srcs, $eval) {
                            return;
                        }
                    )?
                    $(
                        let $f = self;
                        $core
                        return;
                    )?
                    self.fail(NAME, $crate::ErrorKind::Unsupported(concat!(stringify!($name), " has no meaning on this backend")));
                }
            )*
        }
    )*};
}

/// Whether this host's CPU has the x86-64 feature `$f`; `false` on any
/// other host, which never runs the x86-64 code these features select
/// (the gates below ask only before emitting code for this host to run).
macro_rules! host_has {
    ($f:tt) => {{
        #[cfg(target_arch = "x86_64")]
        let has = std::is_x86_feature_detected!($f);
        #[cfg(not(target_arch = "x86_64"))]
        let has = false;
        has
    }};
}

fn has_popcnt() -> bool {
    host_has!("popcnt")
}

fn f32b(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

// -- Raw encoders for the data-touching extensions below ------------------------
//
// Kept here (rather than in `x86_64.rs`) so that these instructions are one
// self-contained table entry each. All write through the code buffer's
// `put`, which the budget keeps in bounds; the longer sequences reserve room
// first (`Buf::reserve`) and resynchronize the budget after (`Buf::resync`).

/// The scratch registers the backend keeps for itself and an extension may
/// clobber within one instruction.
const RAX: u8 = 0;
const RCX: u8 = 1;
const R11: u8 = 11;

/// `op r/m, reg` on registers (`op` = 0x01 add, 0x11 adc, 0x31 xor, 0x21
/// and, 0x09 or), 64-bit when `w`.
fn enc_alu(x: &mut crate::X64, w: bool, op: u8, dst: u8, src: u8) {
    let rex = 0x40 | (w as u8) << 3 | (src >> 3) << 2 | (dst >> 3);
    let modrm = 0xc0 | (src & 7) << 3 | (dst & 7);
    x.buf
        .put(rex as u64 | (op as u64) << 8 | (modrm as u64) << 16, 3);
}

/// `adc r, 0`.
fn enc_adc0(x: &mut crate::X64, w: bool, r: u8) {
    let rex = 0x40 | (w as u8) << 3 | (r >> 3);
    x.buf
        .put(rex as u64 | 0x83 << 8 | ((0xd0 | (r & 7)) as u64) << 16, 4);
}

/// Shift or rotate of a 64-bit register by an immediate (`ext`: 0 rol,
/// 4 shl, 5 shr).
fn enc_shift(x: &mut crate::X64, ext: u8, r: u8, n: u8) {
    let rex = 0x48 | (r >> 3);
    let modrm = 0xc0 | ext << 3 | (r & 7);
    x.buf.put(
        rex as u64 | 0xc1 << 8 | (modrm as u64) << 16 | (n as u64) << 24,
        4,
    );
}

/// `movzx rd32, rs8` (always with a REX prefix, so 4..7 name sil/dil...).
fn enc_movzx8(x: &mut crate::X64, rd: u8, rs: u8) {
    let rex = 0x40 | (rd >> 3) << 2 | (rs >> 3);
    let modrm = 0xc0 | (rd & 7) << 3 | (rs & 7);
    x.buf
        .put(rex as u64 | 0xb60f << 8 | (modrm as u64) << 24, 4);
}

/// `op r32, dword [base + index*4 + disp32]` (`op` = 0x8b mov, 0x33 xor):
/// a table lookup.
fn enc_tab32(x: &mut crate::X64, op: u8, rd: u8, base: u8, index: u8, disp: i32) {
    let rex = 0x40 | (rd >> 3) << 2 | (index >> 3) << 1 | (base >> 3);
    let modrm = 0x84 | (rd & 7) << 3; // mod 10 (disp32), rm 100 (SIB)
    let sib = 0x80 | (index & 7) << 3 | (base & 7); // scale 4
    x.buf.put(
        rex as u64 | (op as u64) << 8 | (modrm as u64) << 16 | (sib as u64) << 24,
        4,
    );
    x.buf.put4(disp as u32);
}

/// `rd = *(u32 *)(base + 4 * (x & 0xff) + disp)` in core instructions:
/// the portable meaning of the table lookups. Uses `rd` for the address
/// unless it is `base`, so it needs two temporaries (three then).
fn core_ldtab32<B: Backend, T: crate::Int>(
    f: &mut Func<B>,
    rd: Reg<T>,
    base: Reg<T>,
    x: Reg<T>,
    disp: i64,
) {
    let t = if rd.num() == base.num() {
        f.getreg::<T>(crate::Class::Temp)
    } else {
        Ok(rd)
    };
    let regs = (
        t,
        f.getreg::<P>(crate::Class::Temp),
        f.getreg::<crate::U>(crate::Class::Temp),
    );
    let (Ok(t), Ok(p), Ok(u)) = regs else {
        return f.fail("ldtab32", NO_TEMP);
    };
    f.and(t, x, Operand::Imm(0xff));
    f.lsh(t, t, Operand::Imm(2));
    f.add(t, t, base);
    f.cv::<T, P>(p, t);
    f.ld::<crate::U>(u, p, Operand::Imm(disp));
    f.cv::<crate::U, T>(rd, u);
    f.putreg(u);
    f.putreg(p);
    if t.num() != rd.num() {
        f.putreg(t);
    }
}

extensions! {
    /// `sqrt` for `f` and `d`: the paper's example extension.
    pub trait Sqrt {
        /// `rd = sqrt(a)`.
        fn sqrt(rd, a): Float for [F, D] {
            x86_64 => |x: &mut crate::X64, ty, rd, [a]: [u8; 1]| x.sqrt(ty, rd, a);
            aarch64 => |x: &mut crate::aarch64::A64, ty, rd, [a]: [u8; 1]| x.sqrt(ty, rd, a);
            eval => |ty, v: &[u64]| if ty == crate::Ty::F { f32b(v[0]).sqrt().to_bits() as u64 } else { f64::from_bits(v[0]).sqrt().to_bits() };
        }
    }

    /// Byte swaps, the data-touching step of protocol code.
    pub trait Bswap {
        /// `rd` = the low 16 bits of `a` byte-swapped, zero-extended.
        fn bswap16(rd, a): Int for [I, U, L, UL] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a]: [u8; 1]| { x.copy(ty, rd, a); x.bswap(16, rd) };
            aarch64 => |x: &mut crate::aarch64::A64, _ty, rd, [a]: [u8; 1]| x.bswap(16, rd, a);
            eval => |_, v: &[u64]| (v[0] as u16).swap_bytes() as u64;
        }
        /// `rd` = the low 32 bits of `a` byte-swapped (zero-extended for `l`/`ul`).
        fn bswap32(rd, a): Int for [I, U, L, UL] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a]: [u8; 1]| { x.copy(crate::Ty::U, rd, a); let _ = ty; x.bswap(32, rd) };
            aarch64 => |x: &mut crate::aarch64::A64, _ty, rd, [a]: [u8; 1]| x.bswap(32, rd, a);
            eval => |_, v: &[u64]| (v[0] as u32).swap_bytes() as u64;
        }
        /// `rd` = the 64 bits of `a` byte-swapped.
        fn bswap64(rd, a): Int for [L, UL] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a]: [u8; 1]| { x.copy(ty, rd, a); x.bswap(64, rd) };
            aarch64 => |x: &mut crate::aarch64::A64, _ty, rd, [a]: [u8; 1]| x.bswap(64, rd, a);
            eval => |_, v: &[u64]| v[0].swap_bytes();
        }
        /// `rd` = each 32-bit half of `a` byte-swapped in place (x86-64:
        /// `bswap` and `rol 32`): a 32-bit byte swap of two words at once.
        fn bswap32x2(rd, a): Int for [UL] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a]: [u8; 1]| { x.copy(ty, rd, a); x.bswap(64, rd); enc_shift(x, 0, rd, 32) };
            aarch64 => |x: &mut crate::aarch64::A64, _ty, rd, [a]: [u8; 1]| x.bswap(3232, rd, a);
            eval => |_, v: &[u64]| v[0].swap_bytes().rotate_left(32);
        }
        /// `rd = ((a >> 8) & m) | ((a & m) << 8)`. With `m` holding
        /// `0x00ff_00ff_00ff_00ff` it byte-swaps each 16-bit quarter of `a`:
        /// four 16-bit byte swaps at once (the mask is an operand so that a
        /// loop sets it once).
        fn bswap16x4(rd, a, m): Int for [UL] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a, m]: [u8; 2]| {
                // r11 = (a >> 8) & m, before rd is written.
                x.copy(ty, R11, a);
                enc_shift(x, 5, R11, 8);
                enc_alu(x, true, 0x21, R11, m);
                if rd == m {
                    enc_alu(x, true, 0x21, rd, a);
                } else {
                    x.copy(ty, rd, a);
                    enc_alu(x, true, 0x21, rd, m);
                }
                enc_shift(x, 4, rd, 8);
                enc_alu(x, true, 0x09, rd, R11);
            };
            aarch64 => |x: &mut crate::aarch64::A64, _ty, rd, [a, m]: [u8; 2]| x.bswap16x4(rd, a, m);
            eval => |_, v: &[u64]| ((v[0] >> 8) & v[1]) | ((v[0] & v[1]) << 8);
        }
    }

    /// Population count.
    pub trait Popcount {
        /// `rd` = the number of one bits in `a`.
        fn popcount(rd, a): Int for [I, U, L, UL] {
            x86_64 if has_popcnt() => |x: &mut crate::X64, ty: crate::Ty, rd, [a]: [u8; 1]| x.popcnt(ty.is_64(), rd, a);
            aarch64 => |x: &mut crate::aarch64::A64, ty: crate::Ty, rd, [a]: [u8; 1]| x.popcnt(ty.is_64(), rd, a);
            core => |f| {
                // Clear the lowest set bit until none is left.
                let regs = (f.getreg::<T>(crate::Class::Temp), f.getreg::<T>(crate::Class::Temp));
                let (Ok(t), Ok(u)) = regs else {
                    return f.fail("popcount", NO_TEMP);
                };
                let (top, done) = (f.genlabel(), f.genlabel());
                f.mov(t, a);
                // rd = 0 from t, which is written (rd may not be yet).
                f.xor(rd, t, t);
                f.label(top);
                f.beq(t, Operand::Imm(0), done);
                f.add(rd, rd, Operand::Imm(1));
                f.sub(u, t, Operand::Imm(1));
                f.and(t, t, u);
                f.jmp(top);
                f.label(done);
                f.putreg(u);
                f.putreg(t);
            };
        }
    }

    /// Conditional selection (a conditional move on x86-64).
    pub trait Select {
        /// `rd = c != 0 ? a : b`.
        fn select(rd, c, a, b): Int for [I, U, L, UL, P] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [c, a, b]: [u8; 3]| {
                let w = ty.is_64();
                let c = if rd == c { x.scratch_copy(w, c) } else { c };
                if rd == a {
                    x.test_cmovz(w, c, rd, b);
                } else {
                    x.copy(ty, rd, b);
                    x.test_cmovnz(w, c, rd, a);
                }
            };
            aarch64 => |x: &mut crate::aarch64::A64, ty: crate::Ty, rd, [c, a, b]: [u8; 3]| x.select(ty.is_64(), rd, c, a, b);
            core => |f| {
                let (yes, done) = (f.genlabel(), f.genlabel());
                f.bne(c, Operand::Imm(0), yes);
                f.mov(rd, b);
                f.jmp(done);
                f.label(yes);
                f.mov(rd, a);
                f.label(done);
            };
        }
    }

    /// Minimum and maximum. For floats, `min(a, b)` is `a < b ? a : b`
    /// exactly (so a NaN in either operand gives `b`), as `minss` computes it.
    pub trait MinMax {
        /// `rd = a < b ? a : b`.
        fn min(rd, a, b): Type for [I, U, L, UL, P, F, D] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a, b]: [u8; 2]| x.minmax(ty, false, rd, a, b);
            aarch64 => |x: &mut crate::aarch64::A64, ty: crate::Ty, rd, [a, b]: [u8; 2]| x.minmax(ty, false, rd, a, b);
            core => |f| {
                let (take_a, done) = (f.genlabel(), f.genlabel());
                f.blt(a, b, take_a);
                f.mov(rd, b);
                f.jmp(done);
                f.label(take_a);
                f.mov(rd, a);
                f.label(done);
            };
        }
        /// `rd = a > b ? a : b`.
        fn max(rd, a, b): Type for [I, U, L, UL, P, F, D] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a, b]: [u8; 2]| x.minmax(ty, true, rd, a, b);
            aarch64 => |x: &mut crate::aarch64::A64, ty: crate::Ty, rd, [a, b]: [u8; 2]| x.minmax(ty, true, rd, a, b);
            core => |f| {
                let (take_a, done) = (f.genlabel(), f.genlabel());
                f.bgt(a, b, take_a);
                f.mov(rd, b);
                f.jmp(done);
                f.label(take_a);
                f.mov(rd, a);
                f.label(done);
            };
        }
    }

    /// Ones'-complement addition, the inner step of the Internet checksum
    /// (RFC 1071): the carry out of the top bit is added back in.
    pub trait OnesComplement {
        /// `rd = a + b + carry(a + b)`.
        fn add1c(rd, a, b): Int for [U, UL] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a, b]: [u8; 2]| {
                let w = ty.is_64();
                if rd == b && rd != a {
                    x.add_end_around(w, rd, a);
                } else {
                    x.copy(ty, rd, a);
                    x.add_end_around(w, rd, b);
                }
            };
            aarch64 => |x: &mut crate::aarch64::A64, ty: crate::Ty, rd, [a, b]: [u8; 2]| x.add1c(ty.is_64(), rd, a, b);
            core => |f| {
                let Ok(t) = f.getreg::<T>(crate::Class::Temp) else {
                    return f.fail("add1c", NO_TEMP);
                };
                let done = f.genlabel();
                f.add(t, a, b);
                // Unsigned types: the sum wrapped iff it is below an addend.
                f.bge(t, a, done);
                f.add(t, t, Operand::Imm(1));
                f.label(done);
                f.mov(rd, t);
                f.putreg(t);
            };
        }
        /// `rd = acc + a + b + c + d` in one add-with-carry chain, the last
        /// carry added back (x86-64: `add`, three `adc`, `adc 0`): the
        /// wide accumulation step of the Internet checksum, one cycle of
        /// latency per word. The result is congruent to the ones'-complement
        /// sum modulo `2^w - 1` and never overflows (the final `adc 0`
        /// cannot carry out, since a chain never ends on all ones with a
        /// carry pending).
        fn add1c4(rd, acc, a, b, c, d): Int for [U, UL] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [acc, a, b, c, d]: [u8; 5]| {
                let w = ty.is_64();
                // Chain in rd, or in r11 when rd is an addend other than acc.
                let r = if rd != acc && [a, b, c, d].contains(&rd) { R11 } else { rd };
                x.copy(ty, r, acc);
                enc_alu(x, w, 0x01, r, a);
                enc_alu(x, w, 0x11, r, b);
                enc_alu(x, w, 0x11, r, c);
                enc_alu(x, w, 0x11, r, d);
                enc_adc0(x, w, r);
                x.copy(ty, rd, r);
            };
            core => |f| {
                // Four end-around adds give the same bits: both sums are
                // congruent modulo 2^w - 1, and both are 0 only when every
                // operand is 0 (an end-around add of anything nonzero is
                // nonzero), so they cannot differ as 0 against 2^w - 1.
                let alias = rd.num() != acc.num() && [a, b, c, d].iter().any(|r| r.num() == rd.num());
                let t = if alias { f.getreg::<T>(crate::Class::Temp) } else { Ok(rd) };
                let Ok(t) = t else {
                    return f.fail("add1c4", NO_TEMP);
                };
                f.add1c(t, acc, a);
                f.add1c(t, t, b);
                f.add1c(t, t, c);
                f.add1c(t, t, d);
                if alias {
                    f.mov(rd, t);
                    f.putreg(t);
                }
            };
        }
    }
}

extensions! {
    /// Table lookups of 32-bit entries, and the slicing-by-8 step of a
    /// table-driven CRC built on them.
    pub trait TableLookup {
        /// `rd = *(u32 *)(base + 4 * (x & 0xff))`, zero-extended: one
        /// lookup in a 256-entry table (x86-64: `movzx` and a scaled-index
        /// load).
        fn ldtab32(rd, base, x): Int for [UL] {
            x86_64 => |x86: &mut crate::X64, _ty: crate::Ty, rd, [base, x]: [u8; 2]| {
                enc_movzx8(x86, R11, x);
                enc_tab32(x86, 0x8b, rd, base, R11, 0);
            };
            core => |f| { core_ldtab32(f, rd, base, x, 0) };
        }
        /// One slicing-by-8 CRC step over the 8 bytes of `w`:
        /// with `v = w ^ crc` and `b_j` byte `j` of `v`. `crc` must hold a
        /// 32-bit value, zero-extended, as this instruction leaves it (the
        /// native mapping reads only its low half),
        /// `rd = T7[b0] ^ T6[b1] ^ ... ^ T0[b7]`, where `T_k` is the 256-entry
        /// `u32` table at `tab + 1024 * k`. With the tables of a reflected
        /// CRC-32 this advances the (inverted) CRC register by 8 bytes.
        fn crc32x8(rd, crc, w, tab): Int for [UL] {
            x86_64 => |x: &mut crate::X64, _ty: crate::Ty, rd, [crc, w, tab]: [u8; 3]| {
                // The sum in r11d, indices in ecx, bytes taken two at a
                // time from al and ah. The high half of w does not depend
                // on the CRC, so its four lookups go first, off the
                // CRC-to-CRC dependency chain.
                x.buf.reserve("crc32x8", 160);
                x.copy(crate::Ty::UL, RAX, w);
                enc_shift(x, 5, RAX, 32);
                for (half, k) in [(0, 3), (1, 7)] {
                    if half == 1 {
                        // eax = low32(w) ^ low32(crc)
                        x.copy(crate::Ty::U, RAX, w);
                        enc_alu(x, false, 0x31, RAX, crc);
                    }
                    for pair in 0..2 {
                        if pair == 1 {
                            x.buf.put(0x10_e8c1, 3); // shr eax, 16
                        }
                        for hi in 0..2 {
                            // movzx ecx, al / ah
                            x.buf.put(0xc8_b60f | (hi as u64 * 4) << 16, 3);
                            let first = half == 0 && pair == 0 && hi == 0;
                            let t = k - 2 * pair - hi;
                            enc_tab32(x, if first { 0x8b } else { 0x33 }, R11, tab, RCX, 1024 * t);
                        }
                    }
                }
                x.copy(crate::Ty::U, rd, R11);
                x.buf.resync("crc32x8");
            };
            core => |f| {
                // v = w ^ crc first: rd (even if it is crc or w) is then free
                // for the sum, unless it is the table base.
                let sum = if rd.num() == tab.num() { f.getreg::<T>(crate::Class::Temp) } else { Ok(rd) };
                let regs = (f.getreg::<T>(crate::Class::Temp), sum, f.getreg::<T>(crate::Class::Temp));
                let (Ok(v), Ok(s), Ok(t)) = regs else {
                    return f.fail("crc32x8", NO_TEMP);
                };
                f.xor(v, w, crc);
                for j in 0..8i64 {
                    core_ldtab32(f, t, tab, v, 1024 * (7 - j));
                    if j == 0 { f.mov(s, t) } else { f.xor(s, s, t) }
                    f.rsh(v, v, Operand::Imm(8));
                }
                f.putreg(t);
                if s.num() != rd.num() {
                    f.mov(rd, s);
                    f.putreg(s);
                }
                f.putreg(v);
            };
        }
    }
}

/// Stores that bypass the caches, for loops that write far more data than
/// the caches hold and will not read it back soon: a cached store first
/// reads the line it writes (read for ownership), a non-temporal one
/// writes whole lines to memory without reading them. Hand-written rather
/// than table entries, since a store has no destination register and
/// takes an offset.
pub trait NonTemporal {
    /// `*(u64 *)(base + off) = v`, bypassing the caches (x86-64: `movnti`).
    /// The store is weakly ordered: end a run of them with
    /// [`sfence`](NonTemporal::sfence) before the data is handed to
    /// another thread. Portable meaning: an ordinary 64-bit store.
    fn stnt(&mut self, v: Reg<crate::UL>, base: Reg<P>, off: i32);
    /// Orders all earlier stores before later ones (x86-64: `sfence`);
    /// portable meaning: nothing (ordinary stores are ordered).
    fn sfence(&mut self);
}

impl<B: Backend> NonTemporal for Func<B> {
    #[inline(always)]
    fn stnt(&mut self, v: Reg<crate::UL>, base: Reg<P>, off: i32) {
        self.check_regs("stnt", &[(false, v.num()), (false, base.num())]);
        if let Some(x) = self.backend().x86() {
            x.insn("stnt");
            // REX.W 0f c3 /r with mod 10 (disp32), a SIB byte when the
            // base is rsp or r12.
            let (r, b) = (v.num(), base.num());
            let rex = 0x48 | (r >> 3) << 2 | (b >> 3);
            let modrm = 0x80 | (r & 7) << 3 | (b & 7);
            if b & 7 == 4 {
                x.buf.put(
                    rex as u64 | 0xc30f << 8 | (modrm as u64) << 24 | 0x24 << 32,
                    5,
                );
            } else {
                x.buf
                    .put(rex as u64 | 0xc30f << 8 | (modrm as u64) << 24, 4);
            }
            x.buf.put4(off as u32);
            return;
        }
        self.st(v, base, Operand::Imm(off as i64));
    }

    #[inline(always)]
    fn sfence(&mut self) {
        if let Some(x) = self.backend().x86() {
            x.insn("sfence");
            x.buf.put(0xf8_ae0f, 3);
        }
    }
}

/// A store that publishes what was written before it to another thread:
/// a release store, for a protocol whose reader tests a word (with an
/// acquire load) and then reads what the writer stored before that word
/// (unet's receive slot, whose `sealed` byte is in its header word).
/// Hand-written rather than a table entry, since a store has no
/// destination register and takes an offset.
pub trait StoreRelease {
    /// `*(u64 *)(base + off) = v`, ordered after every load and store
    /// before it, as seen by any other thread that reads the word with
    /// acquire ordering. x86-64: a plain `mov` (the processor's order
    /// already makes every store a release store). aarch64: `dmb ish`,
    /// then the store (`stlr` takes no offset). Reference backend (one
    /// thread runs its code): an ordinary 64-bit store. Any other backend
    /// records an `Unsupported` error rather than emit a store that may
    /// not be a release store there.
    fn st_release(&mut self, v: Reg<crate::UL>, base: Reg<P>, off: i32);
}

impl<B: Backend> StoreRelease for Func<B> {
    #[inline(always)]
    fn st_release(&mut self, v: Reg<crate::UL>, base: Reg<P>, off: i32) {
        const M: &str = "st_release";
        self.check_regs(M, &[(false, v.num()), (false, base.num())]);
        if let Some(a) = self.backend().aarch64() {
            a.insn(M);
            a.dmb_ish();
        } else if self.backend().x86().is_none()
            && std::any::TypeId::of::<B::Code>()
                != std::any::TypeId::of::<crate::reference::RefCode>()
        {
            return self.fail(
                M,
                crate::ErrorKind::Unsupported(
                    "st_release: x86-64, aarch64 and the reference backend only",
                ),
            );
        }
        self.st(v, base, Operand::Imm(i64::from(off)));
    }
}

/// Software prefetch, for loops that stream through more memory than the
/// hardware prefetchers keep ahead of.
pub trait Prefetch {
    /// Hints that the line at `base + off` will be read soon (x86-64:
    /// `prefetcht0`, or `prefetchnta` when `nta`); never faults, whatever
    /// the address. Portable meaning: nothing.
    fn prefetch(&mut self, base: Reg<P>, off: i32, nta: bool);
}

impl<B: Backend> Prefetch for Func<B> {
    #[inline(always)]
    fn prefetch(&mut self, base: Reg<P>, off: i32, nta: bool) {
        self.check_regs("prefetch", &[(false, base.num())]);
        if let Some(x) = self.backend().x86() {
            x.insn("prefetch");
            // [REX.B] 0f 18 /1 (/0 for nta), mod 10 (disp32), SIB for rsp/r12.
            let b = base.num();
            let modrm = 0x80 | (!nta as u8) << 3 | (b & 7);
            let mut word = 0x180f | (modrm as u64) << 16;
            let mut len = 3;
            if b & 7 == 4 {
                word |= 0x24 << 24;
                len += 1;
            }
            if b >= 8 {
                word = 0x41 | word << 8;
                len += 1;
            }
            x.buf.put(word, len);
            x.buf.put4(off as u32);
        }
    }
}

/// `pfx [REX] 0f op.. modrm [sib disp32] [imm8]`: an SSE instruction
/// with xmm `reg` and, without `disp`, xmm `rm`, or with it the memory
/// operand `[rm + disp]` (`rm` a general register).
#[allow(clippy::too_many_arguments)]
fn enc_sse(
    x: &mut crate::X64,
    pfx: u8,
    w: bool,
    op: &[u8],
    reg: u8,
    rm: u8,
    disp: Option<i32>,
    imm: Option<u8>,
) {
    x.buf.put1(pfx);
    let rex = (w as u8) << 3 | (reg >> 3) << 2 | (rm >> 3);
    if rex != 0 {
        x.buf.put1(0x40 | rex);
    }
    x.buf.put1(0x0f);
    for &b in op {
        x.buf.put1(b);
    }
    enc_modrm(x, reg, rm, disp, imm);
}

/// The ModRM byte and what follows it, shared by the SSE and the VEX/EVEX
/// encoders: register `rm` without `disp`, `[rm + disp32]` with it (a SIB
/// byte when `rm` is rsp or r12), then the immediate if any.
fn enc_modrm(x: &mut crate::X64, reg: u8, rm: u8, disp: Option<i32>, imm: Option<u8>) {
    match disp {
        None => x.buf.put1(0xc0 | (reg & 7) << 3 | (rm & 7)),
        Some(d) => {
            x.buf.put1(0x80 | (reg & 7) << 3 | (rm & 7));
            if rm & 7 == 4 {
                x.buf.put1(0x24);
            }
            x.buf.put4(d as u32);
        }
    }
    if let Some(i) = imm {
        x.buf.put1(i);
    }
}

/// The float scratch register the native backend keeps.
const XMM15: u8 = 15;

fn has_pclmulqdq() -> bool {
    host_has!("pclmulqdq")
}

/// 128-bit data in float (xmm) registers and the carry-less-multiply
/// folding step of a CRC (the method of Intel's "Fast CRC Computation for
/// Generic Polynomials Using PCLMULQDQ"). A `Reg<D>` here holds 128 bits.
/// Native x86-64 only: the reference backend's float registers hold 64
/// bits, so there these record an `Unsupported` error, and clients keep a
/// table-driven path for other backends (and for CPUs without
/// PCLMULQDQ, which [`clmul_available`](Clmul::clmul_available) reports).
pub trait Clmul {
    /// Whether this backend and CPU run these instructions.
    fn clmul_available(&mut self) -> bool;
    /// `x = *(u128 *)(base + off)` (x86-64: `movdqu`).
    fn ldx(&mut self, x: Reg<crate::D>, base: Reg<P>, off: i32);
    /// `*(u128 *)(base + off) = x` (x86-64: `movdqu`).
    fn stx(&mut self, x: Reg<crate::D>, base: Reg<P>, off: i32);
    /// `*(u128 *)(base + off) = x` bypassing the caches (x86-64:
    /// `movntdq`): `base + off` must be 16-byte aligned (the CPU faults
    /// otherwise), and a run of these ends with an `sfence`.
    fn stxnt(&mut self, x: Reg<crate::D>, base: Reg<P>, off: i32);
    /// `x ^= g` zero-extended to 128 bits (x86-64: `movq` into `xmm15`,
    /// `pxor`).
    fn xorq(&mut self, x: Reg<crate::D>, g: Reg<crate::UL>);
    /// One folding step: `lane = clmul(lane.lo, k.lo) ^ clmul(lane.hi,
    /// k.hi) ^ *(u128 *)(base + off)`, leaving the 16 loaded bytes in `t`
    /// (for a copy). `lane`, `k` and `t` must be distinct.
    fn clfold(
        &mut self,
        lane: Reg<crate::D>,
        k: Reg<crate::D>,
        t: Reg<crate::D>,
        base: Reg<P>,
        off: i32,
    );
}

impl<B: Backend> Func<B> {
    /// The register checks of a fold (`clfold`, `zfold`, `zfoldr`): a
    /// lane, a constant and a third vector register, distinct, and the base
    /// of the memory operand if any. Their numbers, or `None` after
    /// recording the error.
    fn fold_regs(
        &mut self,
        m: &'static str,
        lane: Reg<crate::D>,
        k: Reg<crate::D>,
        t: Reg<crate::D>,
        base: Option<Reg<P>>,
    ) -> Option<(u8, u8, u8)> {
        let (l, k, t) = (lane.num(), k.num(), t.num());
        let mut regs = vec![(true, l), (true, k), (true, t)];
        regs.extend(base.map(|b| (false, b.num())));
        self.check_regs(m, &regs);
        if l == k || l == t || k == t {
            self.fail(
                m,
                crate::ErrorKind::Unsupported("a fold needs three distinct registers"),
            );
            return None;
        }
        Some((l, k, t))
    }

    fn clmul_native(&mut self, m: &'static str) -> Option<&mut crate::X64> {
        if self.backend().x86().is_none() {
            self.fail(
                m,
                crate::ErrorKind::Unsupported("128-bit registers: native x86-64 only"),
            );
            return None;
        }
        if !has_pclmulqdq() {
            self.fail(m, crate::ErrorKind::Unsupported("the CPU has no PCLMULQDQ"));
            return None;
        }
        let x = self.backend().x86()?;
        x.insn(m);
        x.buf.reserve(m, 64);
        Some(x)
    }
}

/// One SSE move between xmm register `x` and `[base + off]` (`pfx 0f opc`),
/// natively; the reference backend records it as unsupported.
fn xmm_mem<B: Backend>(
    f: &mut Func<B>,
    m: &'static str,
    pfx: u8,
    opc: u8,
    x: Reg<crate::D>,
    base: Reg<P>,
    off: i32,
) {
    f.check_regs(m, &[(true, x.num()), (false, base.num())]);
    if let Some(a) = f.clmul_native(m) {
        enc_sse(a, pfx, false, &[opc], x.num(), base.num(), Some(off), None);
        a.buf.resync(m);
    }
}

impl<B: Backend> Clmul for Func<B> {
    fn clmul_available(&mut self) -> bool {
        self.backend().x86().is_some() && has_pclmulqdq()
    }

    fn ldx(&mut self, x: Reg<crate::D>, base: Reg<P>, off: i32) {
        // movdqu xmm, [base+off]
        xmm_mem(self, "ldx", 0xf3, 0x6f, x, base, off);
    }

    fn stx(&mut self, x: Reg<crate::D>, base: Reg<P>, off: i32) {
        // movdqu [base+off], xmm
        xmm_mem(self, "stx", 0xf3, 0x7f, x, base, off);
    }

    fn stxnt(&mut self, x: Reg<crate::D>, base: Reg<P>, off: i32) {
        // movntdq [base+off], xmm
        xmm_mem(self, "stxnt", 0x66, 0xe7, x, base, off);
    }

    fn xorq(&mut self, x: Reg<crate::D>, g: Reg<crate::UL>) {
        self.check_regs("xorq", &[(true, x.num()), (false, g.num())]);
        if let Some(a) = self.clmul_native("xorq") {
            enc_sse(a, 0x66, true, &[0x6e], XMM15, g.num(), None, None);
            enc_sse(a, 0x66, false, &[0xef], x.num(), XMM15, None, None);
            a.buf.resync("xorq");
        }
    }

    fn clfold(
        &mut self,
        lane: Reg<crate::D>,
        k: Reg<crate::D>,
        t: Reg<crate::D>,
        base: Reg<P>,
        off: i32,
    ) {
        let Some((l, k, t)) = self.fold_regs("clfold", lane, k, t, Some(base)) else {
            return;
        };
        if let Some(a) = self.clmul_native("clfold") {
            enc_sse(a, 0x66, false, &[0x6f], t, l, None, None); // movdqa t, lane
            enc_sse(a, 0x66, false, &[0x3a, 0x44], l, k, None, Some(0x00)); // lane.lo * k.lo
            enc_sse(a, 0x66, false, &[0x3a, 0x44], t, k, None, Some(0x11)); // lane.hi * k.hi
            enc_sse(a, 0x66, false, &[0xef], l, t, None, None); // pxor
            enc_sse(a, 0xf3, false, &[0x6f], t, base.num(), Some(off), None); // movdqu t, [base + off]
            enc_sse(a, 0x66, false, &[0xef], l, t, None, None);
            a.buf.resync("clfold");
        }
    }
}

// -- VEX and EVEX ---------------------------------------------------------------

/// A VEX- or EVEX-encoded instruction: the prefix fields besides the
/// registers, and the opcode byte.
#[derive(Copy, Clone, Debug)]
struct Vop {
    /// EVEX (AVX-512) rather than VEX.
    evex: bool,
    /// Vector length: 0 = 128, 1 = 256, 2 = 512 bits (EVEX only).
    l: u8,
    /// Implied prefix: 0 none, 1 `66`, 2 `f3`, 3 `f2`.
    pp: u8,
    /// Opcode map: 1 `0f`, 2 `0f38`, 3 `0f3a`.
    map: u8,
    /// The W bit.
    w: bool,
    op: u8,
}

/// A 512-bit EVEX instruction.
const fn z512(pp: u8, map: u8, w: bool, op: u8) -> Vop {
    Vop {
        evex: true,
        l: 2,
        pp,
        map,
        w,
        op,
    }
}

impl Vop {
    /// The 256-bit VEX form of a 512-bit EVEX instruction: every one the
    /// `Wide` extensions use at both widths has one with the same implied
    /// prefix, map and opcode (`VEX.256`, W ignored): `vmovdqu64` becomes
    /// `vmovdqu`, `vpxorq` `vpxor`, `vextracti32x4` `vextracti128`.
    const fn ymm(self) -> Vop {
        Vop {
            evex: false,
            l: 1,
            w: false,
            ..self
        }
    }

    /// This instruction as emitted at `bits`: an EVEX one in its
    /// [`ymm`](Vop::ymm) form at 256 bits, any other as it is.
    const fn at(self, bits: u32) -> Vop {
        if bits == 256 && self.evex {
            self.ymm()
        } else {
            self
        }
    }
}

/// A 128-bit VEX instruction (`VEX.L0`).
const fn v128(pp: u8, map: u8, w: bool, op: u8) -> Vop {
    Vop {
        evex: false,
        l: 0,
        pp,
        map,
        w,
        op,
    }
}

/// `vmovdqu64 zmm, m512` / `vmovdqu64 m512, zmm`.
const VMOVDQU64_LD: Vop = z512(2, 1, true, 0x6f);
const VMOVDQU64_ST: Vop = z512(2, 1, true, 0x7f);
/// `vmovdqu8 zmm{k}{z}, m512` / `vmovdqu8 m512{k}, zmm` (AVX-512BW), with
/// the opmask of [`MASK_K`].
const VMOVDQU8_LD: Vop = z512(3, 1, false, 0x6f);
const VMOVDQU8_ST: Vop = z512(3, 1, false, 0x7f);
/// `kmovq k, r64` (VEX.L0, AVX-512BW; the general register in ModRM.rm).
const KMOVQ_K_R: Vop = v128(3, 1, true, 0x92);
/// The opmask register of [`Wide::zmask`], [`Wide::ldzm`] and
/// [`Wide::stzm`]: `k1` (nothing else in generated code uses the opmask
/// registers, which are caller-saved).
const MASK_K: u8 = 1;
/// `vmovntdq m512, zmm`.
const VMOVNTDQ: Vop = z512(1, 1, false, 0xe7);
/// `vpxorq`, `vpaddq`, `vpsubq` (zmm, zmm, zmm).
const VPXORQ: Vop = z512(1, 1, true, 0xef);
const VPADDQ: Vop = z512(1, 1, true, 0xd4);
const VPSUBQ: Vop = z512(1, 1, true, 0xfb);
/// `vpsrlq` (`/2`) and `vpsllq` (`/6`) zmm, zmm, imm8: the group 0x73.
const VPSHIFTQ: Vop = z512(1, 1, true, 0x73);
/// `vpclmulqdq zmm, zmm, zmm, imm8`.
const VPCLMULQDQ: Vop = z512(1, 3, false, 0x44);
/// `vpternlogq zmm, zmm, zmm, imm8`.
const VPTERNLOGQ: Vop = z512(1, 3, true, 0x25);
/// `vpshufb zmm, zmm, zmm` (AVX-512BW).
const VPSHUFB: Vop = z512(1, 2, false, 0x00);
/// `vpandq zmm, zmm, zmm`.
const VPANDQ: Vop = z512(1, 1, true, 0xdb);
/// `vextracti32x4 xmm, zmm, imm8` / `vextracti64x4 ymm, zmm, imm8` (the
/// destination in ModRM.rm).
const VEXTRACTI32X4: Vop = z512(1, 3, false, 0x39);
const VEXTRACTI64X4: Vop = z512(1, 3, true, 0x3b);
/// `vmovq r64, xmm` / `vpextrq r64, xmm, imm8` (VEX.128; the general
/// register in ModRM.rm).
const VMOVQ_R_X: Vop = v128(1, 1, true, 0x7e);
const VPEXTRQ: Vop = v128(1, 3, true, 0x16);
/// `vmovq xmm, r64` (VEX.128; zeroes the register up to bit 511).
const VMOVQ_X_R: Vop = v128(1, 1, true, 0x6e);

/// `o` with `reg` in ModRM.reg, `v` in the prefix's vvvv (0 when the
/// instruction has no such operand: the field is stored inverted, so 0 is
/// the required all-ones) and `rm` a register, or `[rm + disp]` with
/// `disp`. Registers up to 31 for EVEX, 15 for VEX.
fn enc_vex(x: &mut crate::X64, o: Vop, reg: u8, v: u8, rm: u8, disp: Option<i32>, imm: Option<u8>) {
    enc_vex_k(x, o, reg, v, rm, disp, imm, 0);
}

/// [`enc_vex`] with EVEX's last prefix byte also holding `kz`: the opmask
/// register in bits 0..3 (EVEX.aaa) and zeroing in bit 7 (EVEX.z).
#[allow(clippy::too_many_arguments)]
fn enc_vex_k(
    x: &mut crate::X64,
    o: Vop,
    reg: u8,
    v: u8,
    rm: u8,
    disp: Option<i32>,
    imm: Option<u8>,
    kz: u8,
) {
    let inv = |b: u8, n: u8| !(b >> n) & 1;
    // R, X, B inverted; an EVEX register rm takes its fifth bit from X.
    let x_bit = if disp.is_none() && o.evex {
        inv(rm, 4)
    } else {
        1
    };
    let p1 = inv(reg, 3) << 7 | x_bit << 6 | inv(rm, 3) << 5;
    let p2 = (o.w as u8) << 7 | (!v & 15) << 3;
    if o.evex {
        x.buf.put1(0x62);
        x.buf.put1(p1 | inv(reg, 4) << 4 | o.map);
        x.buf.put1(p2 | 4 | o.pp);
        x.buf.put1(kz | o.l << 5 | inv(v, 4) << 3);
    } else {
        x.buf.put1(0xc4);
        x.buf.put1(p1 | o.map);
        x.buf.put1(p2 | o.l << 2 | o.pp);
    }
    x.buf.put1(o.op);
    enc_modrm(x, reg, rm, disp, imm);
}

/// AVX-512F and BW (every AVX-512 CPU since Skylake-SP has both).
fn has_avx512f() -> bool {
    host_has!("avx512f") && host_has!("avx512bw")
}

/// Whether the CPU runs the `Wide` instructions at `bits` (512: AVX-512F
/// and BW; 256: AVX2), and with `clmul` also the folds (VPCLMULQDQ, whose
/// VEX.256 form needs only AVX beside it).
fn cpu_has_wide(bits: u32, clmul: bool) -> bool {
    let base = match bits {
        512 => has_avx512f(),
        256 => host_has!("avx2"),
        _ => false,
    };
    base && (!clmul || host_has!("vpclmulqdq"))
}

/// The widest vector the CPU runs the `Wide` instructions at, or 0.
fn widest() -> u32 {
    [512, 256]
        .into_iter()
        .find(|&b| cpu_has_wide(b, false))
        .unwrap_or(0)
}

/// Vector data in ymm or zmm registers, for loops that move four
/// registers (128 or 256 bytes) per iteration: loads, stores (also
/// non-temporal), 64-bit lane arithmetic, byte shuffles, and the
/// carry-less-multiply folding step of [`Clmul::clfold`] on every 128-bit
/// lane at once (VPCLMULQDQ). A `Reg<D>` here holds
/// [`wide_bits`](Wide::wide_bits) bits: 512 (zmm, AVX-512F and BW, EVEX
/// encodings) or 256 (ymm, AVX2, the VEX encodings of the same
/// instructions). A function uses the widest its CPU has unless it
/// chooses with [`set_wide_bits`](Wide::set_wide_bits); so one client loop
/// written against these methods, with its offsets in units of the
/// register's size, runs on both kinds of CPU. The byte-masked moves
/// ([`zmask`](Wide::zmask), [`ldzm`](Wide::ldzm), [`stzm`](Wide::stzm)) and
/// the 256-bit [`zextract`](Wide::zextract) exist only at 512 bits.
///
/// Native x86-64 only, like [`Clmul`]: the reference backend's float
/// registers hold 64 bits, so there these record an `Unsupported` error;
/// clients check [`wide_available`](Wide::wide_available) (and
/// [`wide_clmul_available`](Wide::wide_clmul_available) for the folds)
/// and keep a narrower path for other backends and CPUs. A run of these
/// ends with [`vzeroupper`](Wide::vzeroupper) before any SSE code (the
/// rest of the generated function, or its caller) runs.
///
/// ```
/// use vcode::ext::Wide;
/// use vcode::{Class, D, Func, Leaf, P};
/// // dst[i] = src[i] + src[lanes + i] for the 64-bit lanes of one register,
/// // at whatever width this CPU has.
/// let mut f = Func::new();
/// if f.wide_available() {
///     let bytes = f.wide_bits() as i32 / 8;
///     let p = f.lambda("%p%p", Leaf::Yes)?;
///     let (src, dst) = (p.get::<P>(0)?, p.get::<P>(1)?);
///     let (a, b) = (f.getreg::<D>(Class::Temp)?, f.getreg::<D>(Class::Temp)?);
///     f.ldz(a, src, 0);
///     f.ldz(b, src, bytes);
///     f.zaddq(a, a, b);
///     f.stz(a, dst, 0);
///     f.vzeroupper();
///     f.retv();
///     let code = f.end()?;
///     // SAFETY: the function reads two registers' worth of bytes from its
///     // first argument and writes one to its second, as called below.
///     let g = unsafe { code.as_fn::<extern "C" fn(*const u64, *mut u64)>()? };
///     let lanes = bytes as usize / 8;
///     let src: Vec<u64> = (0..2 * lanes as u64).map(|i| i * 0x1_0000_0001).collect();
///     let mut dst = vec![0u64; lanes];
///     g(src.as_ptr(), dst.as_mut_ptr());
///     for i in 0..lanes {
///         assert_eq!(dst[i], src[i] + src[lanes + i]);
///     }
/// }
/// # Ok::<(), vcode::Error>(())
/// ```
pub trait Wide {
    /// The width of the vector registers of these instructions in this
    /// function, in bits: 512 or 256, or 0 when this backend or CPU runs
    /// neither.
    fn wide_bits(&mut self) -> u32;
    /// Chooses the width (256 or 512) of the instructions emitted from
    /// now on, in this function and the later ones of this builder;
    /// returns false, and changes nothing, when this backend or CPU does
    /// not run that width.
    fn set_wide_bits(&mut self, bits: u32) -> bool;
    /// Whether this backend and CPU run these instructions (at
    /// [`wide_bits`](Wide::wide_bits)).
    fn wide_available(&mut self) -> bool;
    /// Whether they also run [`zfold`](Wide::zfold) and
    /// [`zfoldr`](Wide::zfoldr) (VPCLMULQDQ).
    fn wide_clmul_available(&mut self) -> bool;
    /// `z = *(vector *)(base + off)` (x86-64: `vmovdqu64` zmm, `vmovdqu`
    /// ymm).
    fn ldz(&mut self, z: Reg<crate::D>, base: Reg<P>, off: i32);
    /// `*(vector *)(base + off) = z` (x86-64: `vmovdqu64`, `vmovdqu`).
    fn stz(&mut self, z: Reg<crate::D>, base: Reg<P>, off: i32);
    /// `*(vector *)(base + off) = z` bypassing the caches (x86-64:
    /// `vmovntdq`): `base + off` must be aligned to the vector's size (the
    /// CPU faults otherwise), and a run of these ends with an `sfence`.
    fn stznt(&mut self, z: Reg<crate::D>, base: Reg<P>, off: i32);
    /// Sets the byte mask of [`ldzm`](Wide::ldzm) and
    /// [`stzm`](Wide::stzm): bit `j` of `m` selects byte `j` of the 64
    /// (x86-64: `kmovq` into the opmask register `k1`, which these three
    /// own, as the scalar code owns `xmm15`). 512 bits only.
    fn zmask(&mut self, m: Reg<crate::UL>);
    /// `z` byte `j` = `*(u8 *)(base + off + j)` where the mask has bit
    /// `j`, 0 elsewhere; the masked-out bytes are not read, so they may
    /// lie in unmapped memory (x86-64: `vmovdqu8 zmm{k1}{z}`). 512 bits
    /// only.
    fn ldzm(&mut self, z: Reg<crate::D>, base: Reg<P>, off: i32);
    /// `*(u8 *)(base + off + j)` = `z` byte `j` where the mask has bit
    /// `j`; the other bytes of memory are neither written nor read
    /// (x86-64: `vmovdqu8 m512{k1}`). 512 bits only.
    fn stzm(&mut self, z: Reg<crate::D>, base: Reg<P>, off: i32);
    /// `z ^= g` zero-extended to the vector's width (x86-64: `vmovq` into
    /// `xmm15`, `vpxorq` / `vpxor`).
    fn zxorq(&mut self, z: Reg<crate::D>, g: Reg<crate::UL>);
    /// `zd = a ^ b` (`vpxorq`, `vpxor`); `zxor(z, z, z)` clears `z`.
    fn zxor(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, b: Reg<crate::D>);
    /// `zd = a + b` in each 64-bit lane (`vpaddq`).
    fn zaddq(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, b: Reg<crate::D>);
    /// `zd = a - b` in each 64-bit lane (`vpsubq`).
    fn zsubq(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, b: Reg<crate::D>);
    /// `zd` byte `j` = `a` byte `16 * (j / 16) + (idx[j] & 15)`, or 0 when
    /// `idx[j]` has its top bit (`vpshufb`: a byte shuffle within each
    /// 128-bit lane, e.g. byte swaps).
    fn zshufb(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, idx: Reg<crate::D>);
    /// `zd = a & b` (`vpandq`, `vpand`).
    fn zand(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, b: Reg<crate::D>);
    /// `zd` = 128-bit lane `i` of `a` when `bits` is 128 (`vextracti32x4`,
    /// `vextracti128`), or, at 512 bits, 256-bit half `i` (0..2) when it is
    /// 256 (`vextracti64x4`), zero-extended. Other widths or indices are an
    /// `Unsupported` error.
    fn zextract(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, bits: u32, i: u8);
    /// `rd` = 64-bit word `i` (0 or 1) of `a` (`vmovq`, `vpextrq`).
    fn zmovq(&mut self, rd: Reg<crate::UL>, a: Reg<crate::D>, i: u8);
    /// `zd = a >> n` in each 64-bit lane, logical (`vpsrlq`).
    fn zsrlq(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, n: u8);
    /// `zd = a << n` in each 64-bit lane (`vpsllq`).
    fn zsllq(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, n: u8);
    /// [`Clmul::clfold`] on each 128-bit lane: `lane = clmul(lane.lo,
    /// k.lo) ^ clmul(lane.hi, k.hi) ^ *(vector *)(base + off)` per lane,
    /// leaving the loaded bytes in `t` (x86-64: 2 × `vpclmulqdq`, the
    /// load, then `vpternlogq` at 512 bits or 2 × `vpxor` at 256). `lane`,
    /// `k` and `t` must be distinct.
    fn zfold(
        &mut self,
        lane: Reg<crate::D>,
        k: Reg<crate::D>,
        t: Reg<crate::D>,
        base: Reg<P>,
        off: i32,
    );
    /// The same fold with a register: `lane = fold(lane, k) ^ x`. `lane`
    /// and `k` must be distinct from each other and from `x`.
    fn zfoldr(&mut self, lane: Reg<crate::D>, k: Reg<crate::D>, x: Reg<crate::D>);
    /// Clears the upper halves of the vector registers (`vzeroupper`), so
    /// that later SSE code pays no transition; nothing elsewhere.
    fn vzeroupper(&mut self);
}

impl<B: Backend> Func<B> {
    /// The width the `Wide` instructions are emitted at (see
    /// [`Wide::wide_bits`]), without the backend test.
    fn wide_width(&self) -> u32 {
        match self.wide_bits {
            0 => widest(),
            b => b,
        }
    }

    /// The native backend and the width for a `Wide` instruction, if this
    /// backend and CPU have it (with VPCLMULQDQ when `clmul`, at 512 bits
    /// when `zmm_only`); records why not otherwise.
    fn wide_native(
        &mut self,
        m: &'static str,
        clmul: bool,
        zmm_only: bool,
    ) -> Option<(&mut crate::X64, u32)> {
        let bits = self.wide_width();
        let why = if self.backend().x86().is_none() {
            "vector registers: native x86-64 only"
        } else if !cpu_has_wide(bits, clmul) {
            "the CPU has neither AVX-512F and BW nor AVX2, or no VPCLMULQDQ"
        } else if zmm_only && bits != 512 {
            "byte masks and 256-bit extracts need 512-bit registers (AVX-512)"
        } else {
            let x = self.backend().x86()?;
            x.insn(m);
            x.buf.reserve(m, 64);
            return Some((x, bits));
        };
        self.fail(m, crate::ErrorKind::Unsupported(why));
        None
    }

    /// One instruction (`rm` a register, or `[rm + disp]`), natively: a
    /// 512-bit EVEX one as it is, or its VEX.256 form at 256 bits; VEX.128
    /// ones as they are at both widths.
    #[allow(clippy::too_many_arguments)]
    fn wide_one(
        &mut self,
        m: &'static str,
        o: Vop,
        reg: u8,
        v: u8,
        rm: u8,
        disp: Option<i32>,
        imm: Option<u8>,
    ) {
        if let Some((a, bits)) = self.wide_native(m, false, false) {
            enc_vex(a, o.at(bits), reg, v, rm, disp, imm);
            a.buf.resync(m);
        }
    }

    /// A load or store between `z` and `[base + off]`.
    fn wide_mem(&mut self, m: &'static str, o: Vop, z: Reg<crate::D>, base: Reg<P>, off: i32) {
        self.check_regs(m, &[(true, z.num()), (false, base.num())]);
        self.wide_one(m, o, z.num(), 0, base.num(), Some(off), None);
    }

    /// `zd = a op b` on vector registers.
    fn wide_rrr(
        &mut self,
        m: &'static str,
        o: Vop,
        zd: Reg<crate::D>,
        a: Reg<crate::D>,
        b: Reg<crate::D>,
    ) {
        self.check_regs(m, &[(true, zd.num()), (true, a.num()), (true, b.num())]);
        self.wide_one(m, o, zd.num(), a.num(), b.num(), None, None);
    }

    /// `zd = a shifted by n` (`ext` the ModRM.reg digit of the 0x73 group;
    /// the destination goes in vvvv).
    fn wide_shift(&mut self, m: &'static str, ext: u8, zd: Reg<crate::D>, a: Reg<crate::D>, n: u8) {
        self.check_regs(m, &[(true, zd.num()), (true, a.num())]);
        self.wide_one(m, VPSHIFTQ, ext, zd.num(), a.num(), None, Some(n));
    }

    /// The fold of [`Wide::zfold`]/[`Wide::zfoldr`], the data XORed in
    /// from `t`, which the memory form loads first.
    fn wide_fold(
        &mut self,
        m: &'static str,
        lane: Reg<crate::D>,
        k: Reg<crate::D>,
        t: Reg<crate::D>,
        mem: Option<(Reg<P>, i32)>,
    ) {
        let Some((lane, k, t)) = self.fold_regs(m, lane, k, t, mem.map(|(b, _)| b)) else {
            return;
        };
        if let Some((a, bits)) = self.wide_native(m, true, false) {
            let clmul = VPCLMULQDQ.at(bits);
            enc_vex(a, clmul, XMM15, lane, k, None, Some(0x00)); // lo * k.lo
            enc_vex(a, clmul, lane, lane, k, None, Some(0x11)); // hi * k.hi
            if let Some((base, off)) = mem {
                enc_vex(a, VMOVDQU64_LD.at(bits), t, 0, base.num(), Some(off), None);
            }
            if bits == 512 {
                enc_vex(a, VPTERNLOGQ, lane, XMM15, t, None, Some(0x96)); // lane ^= xmm15 ^ t
            } else {
                enc_vex(a, VPXORQ.ymm(), lane, lane, XMM15, None, None);
                enc_vex(a, VPXORQ.ymm(), lane, lane, t, None, None);
            }
            a.buf.resync(m);
        }
    }

    /// A byte-masked 512-bit move (`kz`: EVEX's opmask and zeroing bits).
    fn wide_masked(
        &mut self,
        m: &'static str,
        o: Vop,
        z: Reg<crate::D>,
        base: Reg<P>,
        off: i32,
        kz: u8,
    ) {
        self.check_regs(m, &[(true, z.num()), (false, base.num())]);
        if let Some((a, _)) = self.wide_native(m, false, true) {
            enc_vex_k(a, o, z.num(), 0, base.num(), Some(off), None, kz);
            a.buf.resync(m);
        }
    }
}

impl<B: Backend> Wide for Func<B> {
    fn wide_bits(&mut self) -> u32 {
        match self.backend().x86() {
            Some(_) => self.wide_width(),
            None => 0,
        }
    }

    fn set_wide_bits(&mut self, bits: u32) -> bool {
        let ok = self.backend().x86().is_some() && cpu_has_wide(bits, false);
        if ok {
            self.wide_bits = bits;
        }
        ok
    }

    fn wide_available(&mut self) -> bool {
        self.wide_bits() != 0
    }

    fn wide_clmul_available(&mut self) -> bool {
        let bits = self.wide_bits();
        bits != 0 && cpu_has_wide(bits, true)
    }

    fn ldz(&mut self, z: Reg<crate::D>, base: Reg<P>, off: i32) {
        self.wide_mem("ldz", VMOVDQU64_LD, z, base, off);
    }

    fn stz(&mut self, z: Reg<crate::D>, base: Reg<P>, off: i32) {
        self.wide_mem("stz", VMOVDQU64_ST, z, base, off);
    }

    fn stznt(&mut self, z: Reg<crate::D>, base: Reg<P>, off: i32) {
        self.wide_mem("stznt", VMOVNTDQ, z, base, off);
    }

    fn zmask(&mut self, m: Reg<crate::UL>) {
        self.check_regs("zmask", &[(false, m.num())]);
        if let Some((a, _)) = self.wide_native("zmask", false, true) {
            enc_vex(a, KMOVQ_K_R, MASK_K, 0, m.num(), None, None);
            a.buf.resync("zmask");
        }
    }

    fn ldzm(&mut self, z: Reg<crate::D>, base: Reg<P>, off: i32) {
        self.wide_masked("ldzm", VMOVDQU8_LD, z, base, off, 0x80 | MASK_K);
    }

    fn stzm(&mut self, z: Reg<crate::D>, base: Reg<P>, off: i32) {
        self.wide_masked("stzm", VMOVDQU8_ST, z, base, off, MASK_K);
    }

    fn zxorq(&mut self, z: Reg<crate::D>, g: Reg<crate::UL>) {
        self.check_regs("zxorq", &[(true, z.num()), (false, g.num())]);
        if let Some((a, bits)) = self.wide_native("zxorq", false, false) {
            enc_vex(a, VMOVQ_X_R, XMM15, 0, g.num(), None, None);
            enc_vex(a, VPXORQ.at(bits), z.num(), z.num(), XMM15, None, None);
            a.buf.resync("zxorq");
        }
    }

    fn zxor(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, b: Reg<crate::D>) {
        self.wide_rrr("zxor", VPXORQ, zd, a, b);
    }

    fn zshufb(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, idx: Reg<crate::D>) {
        self.wide_rrr("zshufb", VPSHUFB, zd, a, idx);
    }

    fn zand(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, b: Reg<crate::D>) {
        self.wide_rrr("zand", VPANDQ, zd, a, b);
    }

    fn zextract(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, bits: u32, i: u8) {
        self.check_regs("zextract", &[(true, zd.num()), (true, a.num())]);
        let width = self.wide_width();
        let o = match (bits, i) {
            (128, _) if u32::from(i) < width / 128 => VEXTRACTI32X4,
            (256, 0..2) if width == 512 => VEXTRACTI64X4,
            _ => {
                return self.fail(
                    "zextract",
                    crate::ErrorKind::Unsupported(
                        "zextract takes a 128-bit lane, or at 512 bits a half",
                    ),
                );
            }
        };
        self.wide_one("zextract", o, a.num(), 0, zd.num(), None, Some(i));
    }

    fn zmovq(&mut self, rd: Reg<crate::UL>, a: Reg<crate::D>, i: u8) {
        self.check_regs("zmovq", &[(false, rd.num()), (true, a.num())]);
        match i {
            0 => self.wide_one("zmovq", VMOVQ_R_X, a.num(), 0, rd.num(), None, None),
            1 => self.wide_one("zmovq", VPEXTRQ, a.num(), 0, rd.num(), None, Some(1)),
            _ => self.fail(
                "zmovq",
                crate::ErrorKind::Unsupported("zmovq takes word 0 or 1"),
            ),
        }
    }

    fn zaddq(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, b: Reg<crate::D>) {
        self.wide_rrr("zaddq", VPADDQ, zd, a, b);
    }

    fn zsubq(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, b: Reg<crate::D>) {
        self.wide_rrr("zsubq", VPSUBQ, zd, a, b);
    }

    fn zsrlq(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, n: u8) {
        self.wide_shift("zsrlq", 2, zd, a, n);
    }

    fn zsllq(&mut self, zd: Reg<crate::D>, a: Reg<crate::D>, n: u8) {
        self.wide_shift("zsllq", 6, zd, a, n);
    }

    fn zfold(
        &mut self,
        lane: Reg<crate::D>,
        k: Reg<crate::D>,
        t: Reg<crate::D>,
        base: Reg<P>,
        off: i32,
    ) {
        self.wide_fold("zfold", lane, k, t, Some((base, off)));
    }

    fn zfoldr(&mut self, lane: Reg<crate::D>, k: Reg<crate::D>, x: Reg<crate::D>) {
        self.wide_fold("zfoldr", lane, k, x, None);
    }

    fn vzeroupper(&mut self) {
        if let Some(x) = self.backend().x86() {
            x.insn("vzeroupper");
            x.buf.put(0x77_f8c5, 3);
        }
    }
}

// The paper's portable scheduling interface (§5.3). x86-64 has neither
/// branch delay slots nor load interlocks to manage, so both are plain
/// emission here; code written against them stays correct on targets
/// where they matter.
pub trait Schedule {
    /// Emits a branch and an instruction for its delay slot. On a machine
    /// with delay slots the delay instruction would fill the slot; here it
    /// is emitted first. It must not change the branch's operands.
    fn schedule_delay(&mut self, branch: impl FnOnce(&mut Self), delay: impl FnOnce(&mut Self));
    /// A load whose result is not used for the next `latency`
    /// instructions (no interlock needed on machines without one); an
    /// ordinary load on x86-64.
    fn raw_load<T: Type>(
        &mut self,
        rd: Reg<T>,
        base: Reg<P>,
        off: impl Into<Operand<P>>,
        latency: u32,
    );
}

impl<B: Backend> Schedule for Func<B> {
    fn schedule_delay(&mut self, branch: impl FnOnce(&mut Self), delay: impl FnOnce(&mut Self)) {
        delay(self);
        branch(self);
    }

    #[inline(always)]
    fn raw_load<T: Type>(
        &mut self,
        rd: Reg<T>,
        base: Reg<P>,
        off: impl Into<Operand<P>>,
        _latency: u32,
    ) {
        self.ld(rd, base, off);
    }
}

// -- Indexed memory access (added for the jive JIT) -------------------------------

/// The address `base + idx * scale` in a new temporary, in
/// core instructions (the portable meaning of [`Indexed`]).
fn core_index_addr<B: Backend>(
    f: &mut Func<B>,
    m: &'static str,
    base: Reg<P>,
    idx: Reg<crate::UL>,
    scale: u8,
) -> Option<Reg<P>> {
    let Ok(t) = f.getreg::<crate::UL>(crate::Class::Temp) else {
        f.fail(m, NO_TEMP);
        return None;
    };
    f.mov(t, idx);
    let shift = scale.trailing_zeros() as i64;
    if shift > 0 {
        f.lsh(t, t, Operand::Imm(shift));
    }
    f.add(t, t, base.cast::<crate::UL>());
    Some(t.cast::<P>())
}

/// Loads and stores at `base + idx * scale + disp` (`idx` a 64-bit
/// register), the addressing of an array element. Natively one instruction
/// with a SIB byte, portably an address computed in core instructions. A
/// client with a 32-bit index passes its register as `ul` when it knows the
/// upper half is zero (on x86-64 every 32-bit operation clears it).
///
/// `mem` is the memory type: `C` and `S` sign-extend, `UC` and `US`
/// zero-extend, `I`/`U` are 32 bits (zero-extended into a 64-bit register,
/// as every vcode load of 32 bits is), `L`/`UL`/`P` 64. `scale` must be 1,
/// 2, 4 or 8.
pub trait Indexed {
    /// `rd = *(mem *)(base + idx * scale + disp)`, widened to `rd`'s type.
    fn ldx<T: Type>(
        &mut self,
        rd: Reg<T>,
        mem: crate::Ty,
        base: Reg<P>,
        idx: Reg<crate::UL>,
        scale: u8,
        disp: i32,
    );
    /// `*(mem *)(base + idx * scale + disp) = rs`, narrowed to `mem`.
    fn stx<T: Type>(
        &mut self,
        rs: Reg<T>,
        mem: crate::Ty,
        base: Reg<P>,
        idx: Reg<crate::UL>,
        scale: u8,
        disp: i32,
    );
}

fn bad_scale(scale: u8) -> bool {
    !matches!(scale, 1 | 2 | 4 | 8)
}

impl<B: Backend> Indexed for Func<B> {
    fn ldx<T: Type>(
        &mut self,
        rd: Reg<T>,
        mem: crate::Ty,
        base: Reg<P>,
        idx: Reg<crate::UL>,
        scale: u8,
        disp: i32,
    ) {
        indexed(self, false, rd, mem, (base, idx, scale, disp));
    }

    fn stx<T: Type>(
        &mut self,
        rs: Reg<T>,
        mem: crate::Ty,
        base: Reg<P>,
        idx: Reg<crate::UL>,
        scale: u8,
        disp: i32,
    ) {
        indexed(self, true, rs, mem, (base, idx, scale, disp));
    }
}

/// `ldx` (`store` false) or `stx` of `r` at `(base, idx, scale, disp)`.
fn indexed<B: Backend, T: Type>(
    f: &mut Func<B>,
    store: bool,
    r: Reg<T>,
    mem: crate::Ty,
    (base, idx, scale, disp): (Reg<P>, Reg<crate::UL>, u8, i32),
) {
    let name = if store { "stx" } else { "ldx" };
    let ty = <T as Type>::TY;
    if bad_scale(scale) || mem.is_float() || mem == crate::Ty::V || ty.is_float() {
        return f.fail(
            name,
            crate::ErrorKind::Unsupported(
                "ldx/stx: a scale of 1, 2, 4 or 8, an integer memory type and register",
            ),
        );
    }
    f.check_regs(
        name,
        &[(false, r.num()), (false, base.num()), (false, idx.num())],
    );
    if let Some(x) = f.backend().x86() {
        x.insn(name);
        x.buf.reserve(name, 32);
        use crate::Ty::*;
        // (prefix, REX.W, opcode, opcode length, byte register)
        let (pfx, w, opc, olen, byte) = match (store, mem) {
            (false, C) => (0, ty.is_64(), 0xbe0f, 2, false),
            (false, UC) => (0, false, 0xb60f, 2, false),
            (false, S) => (0, ty.is_64(), 0xbf0f, 2, false),
            (false, US) => (0, false, 0xb70f, 2, false),
            (false, I | U) => (0, false, 0x8b, 1, false),
            (false, _) => (0, true, 0x8b, 1, false),
            (true, C | UC) => (0, false, 0x88, 1, true),
            (true, S | US) => (0x66, false, 0x89, 1, false),
            (true, I | U) => (0, false, 0x89, 1, false),
            (true, _) => (0, true, 0x89, 1, false),
        };
        x.rm_scaled(
            pfx,
            w,
            opc,
            olen,
            r.num(),
            base.num(),
            Some(idx.num()),
            scale.trailing_zeros() as u8,
            disp,
            byte,
        );
        x.buf.resync(name);
        return;
    }
    let Some(a) = core_index_addr(f, name, base, idx, scale) else {
        return;
    };
    let at = crate::backend::Src::I(i64::from(disp));
    if store {
        f.backend().store(name, mem, r.num(), a.num(), at);
    } else {
        f.backend().load(name, mem, ty, r.num(), a.num(), at);
    }
    f.putreg(a);
}

// -- Move16 (added for the jive JIT's inline copies) -------------------------------

/// A 16-byte move between two places in memory, the step of a copy loop
/// (added for the jive JIT's inline copies, where it halves the rounds of
/// an 8-byte loop). Natively `movdqu xmm15, [src + idx + sdisp]; movdqu
/// [dst + idx + ddisp], xmm15` through the float scratch register the
/// backend keeps (SSE2, which every x86-64 CPU has); portably two 8-byte
/// loads and stores through a temporary. The two ranges may overlap only
/// if they are the same (the 16 bytes are read before any is written).
pub trait Move16 {
    /// `*(u128 *)(dst + idx + ddisp) = *(u128 *)(src + idx + sdisp)`,
    /// `idx` none for no index.
    fn move16(
        &mut self,
        dst: Reg<P>,
        ddisp: i32,
        src: Reg<P>,
        sdisp: i32,
        idx: Option<Reg<crate::UL>>,
    );
}

impl<B: Backend> Move16 for Func<B> {
    fn move16(
        &mut self,
        dst: Reg<P>,
        ddisp: i32,
        src: Reg<P>,
        sdisp: i32,
        idx: Option<Reg<crate::UL>>,
    ) {
        const NAME: &str = "move16";
        let mut regs = vec![(false, dst.num()), (false, src.num())];
        regs.extend(idx.map(|i| (false, i.num())));
        self.check_regs(NAME, &regs);
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 32);
            let ix = idx.map(|i| i.num());
            // movdqu xmm15, [src + idx + sdisp] (f3 0f 6f), then
            // movdqu [dst + idx + ddisp], xmm15 (f3 0f 7f).
            x.rm_scaled(
                0xf3,
                false,
                0x6f0f,
                2,
                XMM15,
                src.num(),
                ix,
                0,
                sdisp,
                false,
            );
            x.rm_scaled(
                0xf3,
                false,
                0x7f0f,
                2,
                XMM15,
                dst.num(),
                ix,
                0,
                ddisp,
                false,
            );
            x.buf.resync(NAME);
            return;
        }
        let Ok(t) = self.getreg::<crate::UL>(crate::Class::Temp) else {
            return self.fail(NAME, NO_TEMP);
        };
        let Ok(u) = self.getreg::<crate::UL>(crate::Class::Temp) else {
            self.putreg(t);
            return self.fail(NAME, NO_TEMP);
        };
        match idx {
            Some(i) => {
                Indexed::ldx(self, t, crate::Ty::UL, src, i, 1, sdisp);
                Indexed::ldx(self, u, crate::Ty::UL, src, i, 1, sdisp.wrapping_add(8));
                Indexed::stx(self, t, crate::Ty::UL, dst, i, 1, ddisp);
                Indexed::stx(self, u, crate::Ty::UL, dst, i, 1, ddisp.wrapping_add(8));
            }
            None => {
                self.ld(t, src, i64::from(sdisp));
                self.ld(u, src, i64::from(sdisp) + 8);
                self.st(t, dst, i64::from(ddisp));
                self.st(u, dst, i64::from(ddisp) + 8);
            }
        }
        self.putreg(u);
        self.putreg(t);
    }
}

// -- MemAdd (added for the jive JIT's inline natives) -----------------------------

/// An add to a word in memory (added for the jive JIT's inline natives,
/// which count a unit of the budget and take a slot from a lent run per
/// call): natively one `add` with a memory destination, where a load, an
/// add and a store were three instructions; portably those three through
/// a temporary.
pub trait MemAdd {
    /// `*(base + disp) += imm`, 64 bits wide if `wide`, else 32 (wrapping).
    fn add_mem_imm(&mut self, wide: bool, base: Reg<P>, disp: i32, imm: i32);
    /// `*(base + disp) += r`, 64 bits wide if `wide`, else 32 (wrapping).
    fn add_mem_reg(&mut self, wide: bool, base: Reg<P>, disp: i32, r: Reg<crate::UL>);
    /// `r += *(base + disp)`, 64 bits (wrapping): natively `add r, [base +
    /// disp]`, where a load and an add were two instructions (the jive
    /// JIT's work count, the units a native charges plus the count so
    /// far); portably the load into `t` and the add (`t` is clobbered
    /// there only).
    fn add_reg_mem(&mut self, r: Reg<crate::UL>, base: Reg<P>, disp: i32, t: Reg<crate::UL>);
}

/// The portable form of [`MemAdd`]: a load, an add and a store.
fn add_mem_core<B: Backend>(
    f: &mut Func<B>,
    m: &'static str,
    wide: bool,
    (base, disp): (Reg<P>, i32),
    v: Operand<crate::UL>,
) {
    let Ok(t) = f.getreg::<crate::UL>(crate::Class::Temp) else {
        return f.fail(m, NO_TEMP);
    };
    if wide {
        f.ld(t, base, i64::from(disp));
        f.add(t, t, v);
        f.st(t, base, i64::from(disp));
    } else {
        let t32 = Reg::<crate::U>::phys(t.num());
        f.ld(t32, base, i64::from(disp));
        let v32 = match v {
            Operand::Reg(r) => Operand::Reg(Reg::<crate::U>::phys(r.num())),
            Operand::Imm(i) => Operand::Imm(i),
        };
        f.add(t32, t32, v32);
        f.st(t32, base, i64::from(disp));
    }
    f.putreg(t);
}

impl<B: Backend> MemAdd for Func<B> {
    fn add_mem_imm(&mut self, wide: bool, base: Reg<P>, disp: i32, imm: i32) {
        const NAME: &str = "add_mem_imm";
        self.check_regs(NAME, &[(false, base.num())]);
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 16);
            if (-128..=127).contains(&imm) {
                // add r/m, imm8 (83 /0 ib)
                x.rm_scaled(0, wide, 0x83, 1, 0, base.num(), None, 0, disp, false);
                x.buf.put1(imm as u8);
            } else {
                // add r/m, imm32 (81 /0 id)
                x.rm_scaled(0, wide, 0x81, 1, 0, base.num(), None, 0, disp, false);
                x.buf.put4(imm as u32);
            }
            x.buf.resync(NAME);
            return;
        }
        add_mem_core(self, NAME, wide, (base, disp), Operand::Imm(i64::from(imm)));
    }

    fn add_mem_reg(&mut self, wide: bool, base: Reg<P>, disp: i32, r: Reg<crate::UL>) {
        const NAME: &str = "add_mem_reg";
        self.check_regs(NAME, &[(false, base.num()), (false, r.num())]);
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 16);
            // add r/m, r (01 /r)
            x.rm_scaled(0, wide, 0x01, 1, r.num(), base.num(), None, 0, disp, false);
            x.buf.resync(NAME);
            return;
        }
        add_mem_core(self, NAME, wide, (base, disp), Operand::Reg(r));
    }

    fn add_reg_mem(&mut self, r: Reg<crate::UL>, base: Reg<P>, disp: i32, t: Reg<crate::UL>) {
        const NAME: &str = "add_reg_mem";
        self.check_regs(NAME, &[(false, r.num()), (false, base.num())]);
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 16);
            // add r, r/m (REX.W 03 /r)
            x.rm_scaled(0, true, 0x03, 1, r.num(), base.num(), None, 0, disp, false);
            x.buf.resync(NAME);
            return;
        }
        self.ld(t, base, i64::from(disp));
        self.add(r, r, t);
    }
}

// -- Countdown (added for the jive JIT's fuel) -------------------------------------

/// A counter that counts down and branches when it was already 0: the
/// charge of a fuel meter, one operation natively.
pub trait Countdown {
    /// `r -= 1` (wrapping), and a branch to `l` if `r` was 0 before, i.e.
    /// if the subtraction borrowed. Natively `sub r, 1; jb l` (one fused
    /// operation on x86-64); portably `sub` and `beq r, -1`.
    fn dec_branch_borrow(&mut self, r: Reg<crate::UL>, l: crate::Label);
    /// [`dec_branch_borrow`](Countdown::dec_branch_borrow) on a counter kept
    /// in a stack local (added for esp's repetition counters, which
    /// outnumber the registers): natively `sub qword [rbp + off], 1; jb l`,
    /// portably a load, `sub`, store and `beq` through a temporary.
    fn dec_local_branch_borrow(&mut self, loc: crate::Local<crate::UL>, l: crate::Label);
    /// `r -= k` (wrapping, `k` in `1..=127`), and a branch to `l` if the
    /// subtraction borrowed (`r < k` before, unsigned) when `borrow`, if it
    /// did not when `!borrow`. Natively `sub r, k; jb l` or `sub r, k;
    /// jae l`: the flags of the `sub` are the test, with no `cmp` (added for
    /// the jive JIT's copy loops, which count a length down by 16);
    /// portably `sub` and an unsigned compare of the result with `-k`.
    fn sub_branch(&mut self, r: Reg<crate::UL>, k: i32, borrow: bool, l: crate::Label);
}

impl<B: Backend> Countdown for Func<B> {
    fn dec_branch_borrow(&mut self, r: Reg<crate::UL>, l: crate::Label) {
        const NAME: &str = "dec_branch_borrow";
        self.check_regs(NAME, &[(false, r.num())]);
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 16);
            x.countdown(r.num(), l.0);
            x.buf.resync(NAME);
            return;
        }
        self.sub(r, r, Operand::Imm(1));
        self.beq(r, Operand::Imm(-1), l);
    }

    fn dec_local_branch_borrow(&mut self, loc: crate::Local<crate::UL>, l: crate::Label) {
        const NAME: &str = "dec_local_branch_borrow";
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 16);
            x.countdown_local(NAME, loc.off, loc.id, l.0);
            x.buf.resync(NAME);
            return;
        }
        let Ok(t) = self.getreg::<crate::UL>(crate::Class::Temp) else {
            return self.fail(NAME, NO_TEMP);
        };
        self.ld_local(t, loc);
        self.sub(t, t, Operand::Imm(1));
        self.st_local(t, loc);
        self.beq(t, Operand::Imm(-1), l);
        self.putreg(t);
    }

    fn sub_branch(&mut self, r: Reg<crate::UL>, k: i32, borrow: bool, l: crate::Label) {
        const NAME: &str = "sub_branch";
        self.check_regs(NAME, &[(false, r.num())]);
        if !(1..=127).contains(&k) {
            return self.fail(
                NAME,
                crate::ErrorKind::Unsupported("sub_branch takes k in 1..=127"),
            );
        }
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 16);
            x.sub_branch(r.num(), k, borrow, l.0);
            x.buf.resync(NAME);
            return;
        }
        self.sub(r, r, Operand::Imm(i64::from(k)));
        // Borrowed exactly when the result is `2^64 - k` or more.
        if borrow {
            self.bge(r, Operand::Imm(-i64::from(k)), l);
        } else {
            self.blt(r, Operand::Imm(-i64::from(k)), l);
        }
    }
}

// -- A return's stores and status (added for the jive JIT's exits) ---------------

/// The result register's vcode number on x86-64 (`rax`).
const FIRST_RESULT_X86: u8 = 0;
/// The result register's vcode number on aarch64 (`x0`).
const FIRST_RESULT_A64: u8 = 7;

/// [`second_result`] of [`X64`] (`rdx`), as a vcode register number: a
/// constant for a host that names it at compile time (jive's JIT off
/// x86-64), so that the two cannot drift.
pub const SECOND_RESULT_X86: u8 = crate::x86_64::regfile::gpr::RDX;
/// [`second_result`] of [`A64`] (`x1`), as a vcode register number.
pub const SECOND_RESULT_A64: u8 = crate::aarch64::regfile::gpr::X1;

/// The convention's second result register of backend `B`, as a vcode
/// register: `rdx` on x86-64, `x1` on aarch64 (`None` on the reference
/// backend): the `to` of [`Exit::ret_zero_with`] for a C host.
pub fn second_result<B: Backend>() -> Option<Reg<crate::I>> {
    let any = core::any::TypeId::of::<B>();
    if any == core::any::TypeId::of::<X64>() {
        Some(Reg::phys(SECOND_RESULT_X86))
    } else if any == core::any::TypeId::of::<A64>() {
        Some(Reg::phys(SECOND_RESULT_A64))
    } else {
        None
    }
}

/// What a return to a host that reads its status from the result register
/// and its value from memory needs: the value stored, a constant without
/// a register, and the status 0 returned without a register of the
/// function set first.
pub trait Exit {
    /// `*(base + disp) = imm`, 32 bits. Natively `mov dword [base +
    /// disp], imm32`; portably through a temporary.
    fn st_imm32(&mut self, base: Reg<P>, disp: i32, imm: i32);
    /// Returns the 32-bit constant 0 (the function's returns are of type
    /// `I`). Natively `xor eax, eax` and the jump to the epilogue;
    /// portably `scratch = 0` and [`Func::ret`] of it, so `scratch` is
    /// written there only.
    fn ret_zero(&mut self, scratch: Reg<crate::I>);
    /// Returns the 32-bit constant 0 in the result register and `value`
    /// (a register or a 32-bit constant), 32 bits zero-extended, in
    /// register `to`, for a host that reads both, so that the value is
    /// not stored and read back. `to` is any integer register but the
    /// result register that the function may change without restoring:
    /// a caller-saved one, or a callee-saved one its caller keeps
    /// ([`crate::RegConfig::keep_in_caller`]); it is not counted as used
    /// (no save). With `to` the convention's second result register
    /// (`rdx`, `x1`: [`second_result`]) the function returns a C
    /// `struct { uint64_t status, value; }` in registers; an `asm!` host
    /// may name another. Natively `mov to, value`, then `xor eax, eax` and
    /// the epilogue itself, written in place of the jump to it (x86-64:
    /// the return leaves room for the epilogue of the registers saved so
    /// far, and jumps to it where the function came to save more), or
    /// `mov w0, #0` and the branch to the epilogue (aarch64). Not on the
    /// reference backend, whose functions return
    /// one value: an `Unsupported` error there, as for a `to` that is not
    /// such a register.
    fn ret_zero_with(&mut self, value: Operand<crate::I>, to: Reg<crate::I>);
}

impl<B: Backend> Exit for Func<B> {
    fn st_imm32(&mut self, base: Reg<P>, disp: i32, imm: i32) {
        const NAME: &str = "st_imm32";
        self.check_regs(NAME, &[(false, base.num())]);
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 16);
            // mov r/m32, imm32 (C7 /0 id)
            x.rm_scaled(0, false, 0xc7, 1, 0, base.num(), None, 0, disp, false);
            x.buf.put4(imm as u32);
            x.buf.resync(NAME);
            return;
        }
        let Ok(t) = self.getreg::<crate::I>(crate::Class::Temp) else {
            return self.fail(NAME, NO_TEMP);
        };
        self.set(t, imm);
        self.st(t, base, i64::from(disp));
        self.putreg(t);
    }

    fn ret_zero(&mut self, scratch: Reg<crate::I>) {
        const NAME: &str = "ret_zero";
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 16);
            x.ret_zero(NAME);
            x.buf.resync(NAME);
            return;
        }
        self.set(scratch, 0);
        self.ret(scratch);
    }

    fn ret_zero_with(&mut self, value: Operand<crate::I>, to: Reg<crate::I>) {
        const NAME: &str = "ret_zero_with";
        let v = match value {
            Operand::Reg(r) => {
                self.check_regs(NAME, &[(false, r.num())]);
                crate::backend::Src::R(r.num())
            }
            Operand::Imm(k) => crate::backend::Src::I(i64::from(k as i32)),
        };
        let cfg = self.config();
        let free = match cfg.gpr(to.num()) {
            crate::regs::RegClass::CallerSaved => true,
            crate::regs::RegClass::CalleeSaved => cfg.kept_in_caller(to.num()),
            crate::regs::RegClass::Unavailable => false,
        };
        let first = if self.backend().x86().is_some() {
            FIRST_RESULT_X86
        } else {
            FIRST_RESULT_A64
        };
        if !free || to.num() == first {
            return self.fail(
                NAME,
                crate::ErrorKind::Unsupported(
                    "ret_zero_with: `to` is the result register, or one the function must restore",
                ),
            );
        }
        let saves = self.used_callee_saved();
        if let Some(x) = self.backend().x86() {
            let room = x.inline_epilogue_room(saves);
            x.insn(NAME);
            x.buf.reserve(NAME, 16 + room);
            x.ret_zero_with(NAME, v, to.num(), room);
            x.buf.resync(NAME);
            return;
        }
        if let Some(a) = self.backend().aarch64() {
            return a.ret_zero_with(NAME, v, to.num());
        }
        self.fail(
            NAME,
            crate::ErrorKind::Unsupported("ret_zero_with: native x86-64 and aarch64 only"),
        );
    }
}

// -- The least value's test (added for the jive JIT's native calls) ---------------

/// A branch on the one value a 64-bit runtime call returns for failure,
/// `i64::MIN`, without materializing it: the constant needs a 10-byte move
/// into a scratch register before the compare natively.
pub trait MinTest {
    /// Branch to `l` if `r == i64::MIN`. Natively `cmp r, 1; jo l` (`r - 1`
    /// overflows exactly when `r` is `i64::MIN`); portably `beq r, i64::MIN`.
    fn beq_min(&mut self, r: Reg<crate::L>, l: crate::Label);
}

impl<B: Backend> MinTest for Func<B> {
    fn beq_min(&mut self, r: Reg<crate::L>, l: crate::Label) {
        const NAME: &str = "beq_min";
        self.check_regs(NAME, &[(false, r.num())]);
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 16);
            x.branch_min(r.num(), l.0);
            x.buf.resync(NAME);
            return;
        }
        self.beq(r, Operand::Imm(i64::MIN), l);
    }
}

// -- Compare with a stack local (added for esp's port ends) -------------------------

/// A conditional branch comparing a register with a stack local: the
/// bound of a loop kept in the frame when registers run out.
pub trait LocalCompare {
    /// Branch to `l` if `a c local` (`c` as in `blt`.. `bne`: signed for
    /// signed types). Natively `cmp a, [rbp + off]; jcc l`; portably a load
    /// into a temporary and the core branch.
    fn bcmp_local<T: crate::Int>(
        &mut self,
        c: crate::backend::Cond,
        a: Reg<T>,
        loc: crate::Local<T>,
        l: crate::Label,
    );
}

impl<B: Backend> LocalCompare for Func<B> {
    fn bcmp_local<T: crate::Int>(
        &mut self,
        c: crate::backend::Cond,
        a: Reg<T>,
        loc: crate::Local<T>,
        l: crate::Label,
    ) {
        const NAME: &str = "bcmp_local";
        self.check_regs(NAME, &[(false, a.num())]);
        let ty = <T as Type>::TY;
        if let Some(x) = self.backend().x86() {
            x.insn(NAME);
            x.buf.reserve(NAME, 16);
            x.branch_local(NAME, c, ty, a.num(), (loc.off, loc.id), l.0);
            x.buf.resync(NAME);
            return;
        }
        let Ok(t) = self.getreg::<T>(crate::Class::Temp) else {
            return self.fail(NAME, NO_TEMP);
        };
        self.ld_local(t, loc);
        bcmp_core(self, c, a, Operand::Reg(t), l);
        self.putreg(t);
    }
}

// -- Compare with a word in memory (added for the jive JIT's inline natives) ------

/// A conditional branch comparing a register, or an immediate, with a word
/// in memory (added for the jive JIT's inline natives, whose every check of
/// a lent budget compares a count with a bound loaded for that compare
/// alone): natively one `cmp` with a memory operand and the `jcc`, where a
/// load, the `cmp` and the `jcc` were three instructions; portably the load
/// into the caller's scratch register `t` and the core branch. Integer
/// types of 4 or 8 bytes take the native form; narrower ones the portable.
pub trait MemCompare {
    /// Branch to `l` if `a c *(base + disp)` (`c` as in `blt`.. `bne`:
    /// signed for signed types; the word of `T`'s width). `t` is
    /// clobbered on the portable form only.
    fn bcmp_mem<T: crate::Int>(
        &mut self,
        c: crate::backend::Cond,
        a: Reg<T>,
        at: (Reg<P>, i32),
        t: Reg<T>,
        l: crate::Label,
    );
    /// Branch to `l` if `*(base + disp) c imm` (as [`MemCompare::bcmp_mem`];
    /// `imm` sign-extended to a 64-bit type's width, as the core branch's
    /// immediate is).
    fn bcmp_mem_imm<T: crate::Int>(
        &mut self,
        c: crate::backend::Cond,
        at: (Reg<P>, i32),
        imm: i32,
        t: Reg<T>,
        l: crate::Label,
    );
}

/// The core branch `a c b` of the portable forms of [`MemCompare`] and
/// [`LocalCompare`].
fn bcmp_core<B: Backend, T: crate::Int>(
    f: &mut Func<B>,
    c: crate::backend::Cond,
    a: Reg<T>,
    b: Operand<T>,
    l: crate::Label,
) {
    use crate::backend::Cond::*;
    match c {
        Lt => f.blt(a, b, l),
        Le => f.ble(a, b, l),
        Gt => f.bgt(a, b, l),
        Ge => f.bge(a, b, l),
        Eq => f.beq(a, b, l),
        Ne => f.bne(a, b, l),
    }
}

impl<B: Backend> MemCompare for Func<B> {
    fn bcmp_mem<T: crate::Int>(
        &mut self,
        c: crate::backend::Cond,
        a: Reg<T>,
        (base, disp): (Reg<P>, i32),
        t: Reg<T>,
        l: crate::Label,
    ) {
        const NAME: &str = "bcmp_mem";
        self.check_regs(NAME, &[(false, a.num()), (false, base.num())]);
        let ty = <T as Type>::TY;
        if ty.size() >= 4
            && let Some(x) = self.backend().x86()
        {
            x.insn(NAME);
            x.buf.reserve(NAME, 24);
            x.branch_mem(c, ty, Some(a.num()), (base.num(), disp), 0, l.0);
            x.buf.resync(NAME);
            return;
        }
        self.ld(t, base, i64::from(disp));
        bcmp_core(self, c, a, Operand::Reg(t), l);
    }

    fn bcmp_mem_imm<T: crate::Int>(
        &mut self,
        c: crate::backend::Cond,
        (base, disp): (Reg<P>, i32),
        imm: i32,
        t: Reg<T>,
        l: crate::Label,
    ) {
        const NAME: &str = "bcmp_mem_imm";
        self.check_regs(NAME, &[(false, base.num())]);
        let ty = <T as Type>::TY;
        if ty.size() >= 4
            && let Some(x) = self.backend().x86()
        {
            x.insn(NAME);
            x.buf.reserve(NAME, 24);
            x.branch_mem(c, ty, None, (base.num(), disp), imm, l.0);
            x.buf.resync(NAME);
            return;
        }
        self.ld(t, base, i64::from(disp));
        bcmp_core(self, c, t, Operand::Imm(i64::from(imm)), l);
    }
}

/// An atomic exchange on shared memory, for generated code that follows a
/// protocol with another thread or process through a word they both
/// write (idl's shared-memory channel posts requests and replies with it).
/// Hand-written rather than a table entry, since it takes an address.
pub trait Atomic {
    /// Whether [`swap32`](Atomic::swap32) is atomic on this backend
    /// (native x86-64). Elsewhere it records an `Unsupported` error
    /// (aarch64) or has its single-threaded meaning (the reference
    /// backend), and a client keeps another path for the protocol.
    fn atomic_available(&mut self) -> bool;
    /// Atomically `v, *(u32 *)(base + off) = *(u32 *)(base + off), v`: the
    /// low 32 bits of `v` are stored, and `v` receives the old word
    /// zero-extended. x86-64: `xchg [base + disp32], v` (locked by the
    /// processor, a full barrier: no load or store moves across it).
    /// Reference backend: a load and a store through a temporary (one
    /// thread runs its code). aarch64: not mapped (`Unsupported`).
    fn swap32(&mut self, v: Reg<crate::UL>, base: Reg<P>, off: i32);
}

impl<B: Backend> Atomic for Func<B> {
    fn atomic_available(&mut self) -> bool {
        self.backend().x86().is_some()
    }

    fn swap32(&mut self, v: Reg<crate::UL>, base: Reg<P>, off: i32) {
        const M: &str = "swap32";
        self.check_regs(M, &[(false, v.num()), (false, base.num())]);
        if let Some(x) = self.backend().x86() {
            x.insn(M);
            // [REX] 87 /r with mod 10 (disp32), a SIB byte when the base
            // is rsp or r12; a 32-bit operand (no REX.W).
            let (r, b) = (v.num(), base.num());
            let rex = (r >> 3) << 2 | (b >> 3);
            if rex != 0 {
                x.buf.put1(0x40 | rex);
            }
            x.buf.put1(0x87);
            x.buf.put1(0x80 | (r & 7) << 3 | (b & 7));
            if b & 7 == 4 {
                x.buf.put1(0x24);
            }
            x.buf.put4(off as u32);
            return;
        }
        if self.backend().aarch64().is_some() {
            return self.fail(
                M,
                crate::ErrorKind::Unsupported(
                    "swap32: native x86-64 and the reference backend only",
                ),
            );
        }
        let t = match self.getreg::<crate::UL>(crate::Class::Temp) {
            Ok(t) => t,
            Err(_) => {
                return self.fail(
                    M,
                    crate::ErrorKind::Unsupported("swap32 needs a free temporary register here"),
                );
            }
        };
        self.ldu(t, base, off as i64);
        self.st(Reg::<crate::U>::phys(v.num()), base, off as i64);
        self.mov(v, t);
        self.putreg(t);
    }
}
