//! Instruction extensions (paper §5.4): one declarative table adds a family
//! of instructions.
//!
//! The paper's preprocessor took lines like `(sqrt (rd, rs) (f fsqrts)
//! (d fsqrtd))`. Here the table is the [`extensions!`](crate::extensions)
//! macro; each entry names the instruction, its operands, the types it is
//! defined for, and up to three meanings:
//!
//! * `x86_64 => |x, ty, rd, [srcs..]| ...`: a native mapping, calling the
//!   encoders of [`X64`](crate::x86_64::X64) (optionally guarded by a
//!   CPU-feature test, `x86_64 if cond => ...`);
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
use crate::backend::Backend;
use crate::func::Func;
use crate::ty::{P, Reg, Type};

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
                            if let Some(x) = self.backend().x86() {
                                x.insn(NAME);
                                ($x86)(x, <T as $crate::Type>::TY, $rd.num(), args);
                                return;
                            }
                        }
                    )?
                    $(
                        if let Some(r) = self.backend().reference() {
                            r.ext(NAME, <T as $crate::Type>::TY, (fl, $rd.num()), &srcs, $eval);
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

fn has_popcnt() -> bool {
    std::is_x86_feature_detected!("popcnt")
}

fn f32b(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

extensions! {
    /// `sqrt` for `f` and `d`: the paper's example extension.
    pub trait Sqrt {
        /// `rd = sqrt(a)`.
        fn sqrt(rd, a): Float for [F, D] {
            x86_64 => |x: &mut crate::X64, ty, rd, [a]: [u8; 1]| x.sqrt(ty, rd, a);
            eval => |ty, v: &[u64]| if ty == crate::Ty::F { f32b(v[0]).sqrt().to_bits() as u64 } else { f64::from_bits(v[0]).sqrt().to_bits() };
        }
    }

    /// Byte swaps, the data-touching step of protocol code.
    pub trait Bswap {
        /// `rd` = the low 16 bits of `a` byte-swapped, zero-extended.
        fn bswap16(rd, a): Int for [I, U, L, UL] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a]: [u8; 1]| { x.copy(ty, rd, a); x.bswap(16, rd) };
            eval => |_, v: &[u64]| (v[0] as u16).swap_bytes() as u64;
        }
        /// `rd` = the low 32 bits of `a` byte-swapped (zero-extended for `l`/`ul`).
        fn bswap32(rd, a): Int for [I, U, L, UL] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a]: [u8; 1]| { x.copy(crate::Ty::U, rd, a); let _ = ty; x.bswap(32, rd) };
            eval => |_, v: &[u64]| (v[0] as u32).swap_bytes() as u64;
        }
        /// `rd` = the 64 bits of `a` byte-swapped.
        fn bswap64(rd, a): Int for [L, UL] {
            x86_64 => |x: &mut crate::X64, ty: crate::Ty, rd, [a]: [u8; 1]| { x.copy(ty, rd, a); x.bswap(64, rd) };
            eval => |_, v: &[u64]| v[0].swap_bytes();
        }
    }

    /// Population count.
    pub trait Popcount {
        /// `rd` = the number of one bits in `a`.
        fn popcount(rd, a): Int for [I, U, L, UL] {
            x86_64 if has_popcnt() => |x: &mut crate::X64, ty: crate::Ty, rd, [a]: [u8; 1]| x.popcnt(ty.is_64(), rd, a);
            core => |f| {
                // Clear the lowest set bit until none is left.
                let regs = (f.getreg::<T>(crate::Class::Temp), f.getreg::<T>(crate::Class::Temp));
                let (Ok(t), Ok(u)) = regs else {
                    return f.fail("popcount", crate::ErrorKind::RegistersExhausted { class: "temporary", what: "integer" });
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
            core => |f| {
                let Ok(t) = f.getreg::<T>(crate::Class::Temp) else {
                    return f.fail("add1c", crate::ErrorKind::RegistersExhausted { class: "temporary", what: "integer" });
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
    }
}

/// The paper's portable scheduling interface (§5.3). x86-64 has neither
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
