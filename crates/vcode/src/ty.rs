//! The VCODE types (paper Table 1) and the typed handles clients hold:
//! registers, operands, labels and stack locals.
//!
//! A register's vcode type is part of its Rust type: `Reg<I>` holds an
//! `int`, `Reg<D>` a `double`. An instruction takes its type from its
//! registers, so `v_addii(rd, rs, 1)` is written `f.add(rd, rs, 1)` with
//! `rd, rs: Reg<I>`, and adding an `int` to a `double` does not compile.

use std::fmt;
use std::marker::PhantomData;

/// Every VCODE type of the paper's Table 1, as a value.
///
/// `C`, `UC`, `S` and `US` exist only in memory: loads widen them into an
/// integer register and stores narrow them. `V` (void) only types returns.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum Ty {
    C,
    UC,
    S,
    US,
    I,
    U,
    L,
    UL,
    P,
    F,
    D,
    V,
}

impl Ty {
    /// The paper's letter for the type (`"i"`, `"ul"`, ...).
    pub const fn letter(self) -> &'static str {
        match self {
            Ty::C => "c",
            Ty::UC => "uc",
            Ty::S => "s",
            Ty::US => "us",
            Ty::I => "i",
            Ty::U => "u",
            Ty::L => "l",
            Ty::UL => "ul",
            Ty::P => "p",
            Ty::F => "f",
            Ty::D => "d",
            Ty::V => "v",
        }
    }

    /// True for `f` and `d`.
    pub const fn is_float(self) -> bool {
        matches!(self, Ty::F | Ty::D)
    }

    /// True for the 64-bit register types `l`, `ul` and `p`.
    pub const fn is_64(self) -> bool {
        matches!(self, Ty::L | Ty::UL | Ty::P | Ty::D)
    }

    /// True for types whose comparisons, shifts and divisions are signed.
    pub const fn is_signed(self) -> bool {
        matches!(self, Ty::C | Ty::S | Ty::I | Ty::L)
    }

    /// Size in bytes in memory.
    pub const fn size(self) -> usize {
        match self {
            Ty::C | Ty::UC => 1,
            Ty::S | Ty::US => 2,
            Ty::I | Ty::U | Ty::F => 4,
            Ty::L | Ty::UL | Ty::P | Ty::D => 8,
            Ty::V => 0,
        }
    }
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.letter())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A register type: one of [`I`], [`U`], [`L`], [`UL`], [`P`], [`F`], [`D`].
pub trait Type: sealed::Sealed + Copy + 'static {
    /// The type as a value.
    const TY: Ty;
    /// The Rust type of a value of this type.
    type Native: Copy + fmt::Debug + PartialEq;
    /// The bits a register holds for `v` (32-bit values zero-extended).
    fn to_bits(v: Self::Native) -> u64;
    /// The value register bits `b` hold (the low 32 bits for 32-bit types):
    /// the inverse of [`to_bits`](Type::to_bits).
    fn from_bits(b: u64) -> Self::Native;
}

/// An integer register type: [`I`], [`U`], [`L`], [`UL`] or [`P`].
pub trait Int: Type {}

/// A floating-point register type: [`F`] or [`D`].
pub trait Float: Type {}

macro_rules! types {
    ($($(#[$m:meta])* $name:ident = $ty:ident, $native:ty, $class:ident, |$v:ident| $bits:expr, |$b:ident| $val:expr;)*) => {$(
        $(#[$m])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub struct $name;
        impl sealed::Sealed for $name {}
        impl Type for $name {
            const TY: Ty = Ty::$ty;
            type Native = $native;
            #[inline(always)]
            fn to_bits($v: $native) -> u64 {
                $bits
            }
            #[inline(always)]
            fn from_bits($b: u64) -> $native {
                $val
            }
        }
        impl $class for $name {}
    )*};
}

types! {
    /// `int`: 32-bit signed.
    I = I, i32, Int, |v| v as u32 as u64, |b| b as i32;
    /// `unsigned`: 32-bit unsigned.
    U = U, u32, Int, |v| v as u64, |b| b as u32;
    /// `long`: 64-bit signed.
    L = L, i64, Int, |v| v as u64, |b| b as i64;
    /// `unsigned long`: 64-bit unsigned.
    UL = UL, u64, Int, |v| v, |b| b;
    /// `void *`: a 64-bit address.
    P = P, usize, Int, |v| v as u64, |b| b as usize;
    /// `float`: IEEE single.
    F = F, f32, Float, |v| v.to_bits() as u64, |b| f32::from_bits(b as u32);
    /// `double`: IEEE double.
    D = D, f64, Float, |v| v.to_bits(), |b| f64::from_bits(b);
}

/// A register holding a value of vcode type `T`.
///
/// Registers come from [`Func::getreg`](crate::Func::getreg), from the
/// parameters of [`Func::lambda`](crate::Func::lambda), or from the fixed
/// names [`Reg::t`] and [`Reg::s`]. The number inside is the host's
/// physical register number (for x86-64: 0 = rax ... 15 = r15 for
/// integers, xmm0 ... xmm15 for floats).
#[derive(PartialEq, Eq, Hash)]
pub struct Reg<T> {
    n: u8,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Reg<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Reg<T> {}

impl<T: Type> fmt::Debug for Reg<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}",
            crate::host::reg_name(T::TY.is_float(), self.n),
            T::TY
        )
    }
}

impl<T> Reg<T> {
    /// The register with host physical number `n`.
    ///
    /// This is the lowest level of the paper's "violating abstractions"
    /// (§5.3): no allocator bookkeeping happens. Prefer [`Reg::t`].
    #[inline(always)]
    pub const fn phys(n: u8) -> Self {
        Reg { n, _t: PhantomData }
    }

    /// The host physical register number.
    #[inline(always)]
    pub const fn num(self) -> u8 {
        self.n
    }
}

impl<T: Type> Reg<T> {
    /// Fixed temporary register `T<k>` (caller-saved; paper §5.3).
    ///
    /// Fixed names cost nothing to use: with a constant `k` the compiler
    /// folds the whole encoding of an instruction into a constant.
    ///
    /// A fixed name is a physical register, the same one `getreg` may hand
    /// out (`T0` is `getreg`'s first temporary). Once an instruction of the
    /// function has named it, `getreg` does not hand it out, on either
    /// backend, until it is released to it ([`Func::reserve`](crate::Func::reserve)
    /// then [`Func::putreg`](crate::Func::putreg)). A fixed name first used
    /// *after* `getreg` handed its register out is the same register as the
    /// one `getreg` returned: use the fixed names before `getreg`, or
    /// `reserve` them. They alias argument registers from `T1` on (see
    /// `docs/vcode.md`), so a client that uses `T1..` must not also need
    /// the parameters they hold.
    ///
    /// ```
    /// use vcode::{Class, Func, I, Leaf, Reg};
    /// let mut f = Func::new();
    /// f.lambda("", Leaf::Yes)?;
    /// let t0 = Reg::<I>::t(0);
    /// f.set(t0, 5);
    /// let g = f.getreg::<I>(Class::Temp)?; // not T0: the function uses it
    /// assert_ne!(g, t0);
    /// f.set(g, 7);
    /// f.add(g, g, t0);
    /// f.ret(g);
    /// let code = f.end()?;
    /// // SAFETY: register arithmetic only.
    /// let h = unsafe { code.as_fn::<extern "C" fn() -> i32>()? };
    /// assert_eq!(h(), 12);
    /// # Ok::<(), vcode::Error>(())
    /// ```
    ///
    /// # Panics
    /// At compile time in const contexts, or at run time otherwise, if
    /// `k` is not below [`host::NUM_T`](crate::host::NUM_T) (integer) or
    /// [`host::NUM_FT`](crate::host::NUM_FT) (float).
    #[inline(always)]
    pub const fn t(k: usize) -> Self {
        if T::TY.is_float() {
            Reg::phys(crate::host::FIXED_FT[k])
        } else {
            Reg::phys(crate::host::FIXED_T[k])
        }
    }

    /// Fixed callee-saved register `S<k>` (persistent across calls).
    ///
    /// `end` saves and restores it if the function writes it, claimed or
    /// not; claim it with [`Func::reserve`](crate::Func::reserve) before
    /// any `getreg` of its class, so that `getreg` does not hand it out.
    ///
    /// # Panics
    /// If `T` is a float type (the host ABI has no callee-saved float
    /// registers) or `k` is not below [`host::NUM_S`](crate::host::NUM_S).
    #[inline(always)]
    pub const fn s(k: usize) -> Self {
        assert!(!T::TY.is_float(), "no fixed callee-saved float registers");
        Reg::phys(crate::host::FIXED_S[k])
    }

    /// The same physical register viewed as another type of the same
    /// width and class (`i` and `u`; `l`, `ul` and `p`).
    ///
    /// # Panics
    /// At compile time when used in a const context, and otherwise on
    /// the first call, if the widths or classes differ.
    #[inline(always)]
    pub fn cast<T2: Type>(self) -> Reg<T2> {
        const { assert_same_class::<T, T2>() };
        Reg::phys(self.n)
    }

    /// This register as an untyped [`AnyReg`].
    #[inline(always)]
    pub fn any(self) -> AnyReg {
        AnyReg {
            ty: T::TY,
            n: self.n,
        }
    }
}

const fn assert_same_class<A: Type, B: Type>() {
    let (a, b) = (A::TY, B::TY);
    assert!(
        a.is_float() == b.is_float()
            && a.is_64() == b.is_64()
            && (!a.is_float() || a.size() == b.size()),
        "Reg::cast between types of different width or class"
    );
}

/// A register together with its type, known only at run time: what a
/// run-time signature such as `"%i%p%d"` gives back.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct AnyReg {
    /// The value type.
    pub ty: Ty,
    /// Host physical register number.
    pub n: u8,
}

impl fmt::Debug for AnyReg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}",
            crate::host::reg_name(self.ty.is_float(), self.n),
            self.ty
        )
    }
}

impl AnyReg {
    /// The typed register, if `T` is this register's type.
    pub fn typed<T: Type>(self) -> Option<Reg<T>> {
        (self.ty == T::TY).then_some(Reg::phys(self.n))
    }
}

/// The second source of an integer instruction: a register or an
/// immediate of any 64-bit value (paper Table 2, operands marked †).
///
/// An immediate is converted to the instruction's type the way C
/// converts it: `-1` as an `unsigned` operand is `0xffff_ffff`.
pub enum Operand<T> {
    /// A register.
    Reg(Reg<T>),
    /// An immediate, sign-extended to 64 bits.
    Imm(i64),
}

impl<T> Clone for Operand<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Operand<T> {}

impl<T: Type> fmt::Debug for Operand<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Reg(r) => r.fmt(f),
            Operand::Imm(v) => write!(f, "{v}"),
        }
    }
}

impl<T> From<Reg<T>> for Operand<T> {
    #[inline(always)]
    fn from(r: Reg<T>) -> Self {
        Operand::Reg(r)
    }
}

macro_rules! imm_from {
    ($($t:ty => [$($native:ty),*];)*) => {$($(
        impl From<$native> for Operand<$t> {
            #[inline(always)]
            fn from(v: $native) -> Self {
                Operand::Imm(v as i64)
            }
        }
    )*)*};
}

imm_from! {
    I => [i32];
    U => [i32, u32];
    L => [i32, i64];
    UL => [i32, i64, u32, u64];
    P => [i32, i64, usize];
}

/// A label: a position in the function being generated.
///
/// Made by [`Func::genlabel`](crate::Func::genlabel), placed by
/// [`Func::label`](crate::Func::label). Branches to it may come before or
/// after it is placed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Label(pub(crate) u32);

/// Constant data placed with a function's code by
/// [`Func::data`](crate::Func::data): a lookup table the code reads.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Data(pub(crate) u32);

/// A stack slot of type `T` in the current function's frame (`v_local`).
#[derive(PartialEq, Eq, Hash)]
pub struct Local<T> {
    pub(crate) off: i32,
    pub(crate) id: u32,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Local<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Local<T> {}

impl<T> fmt::Debug for Local<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "local#{}@{}", self.id, self.off)
    }
}

impl<T> Local<T> {
    pub(crate) fn new(off: i32, id: u32) -> Self {
        Local {
            off,
            id,
            _t: PhantomData,
        }
    }
}

/// A value crossing the boundary between Rust and generated code, used
/// by [`Invoke`](crate::Invoke) and by the reference backend.
#[derive(Copy, Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum Value {
    I(i32),
    U(u32),
    L(i64),
    UL(u64),
    P(usize),
    F(f32),
    D(f64),
    V,
}

/// The value as Rust prints the number (a pointer in hex, `void` for
/// [`Value::V`]), without its type.
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Value::I(v) => write!(f, "{v}"),
            Value::U(v) => write!(f, "{v}"),
            Value::L(v) => write!(f, "{v}"),
            Value::UL(v) => write!(f, "{v}"),
            Value::P(v) => write!(f, "{v:#x}"),
            Value::F(v) => write!(f, "{v}"),
            Value::D(v) => write!(f, "{v}"),
            Value::V => f.write_str("void"),
        }
    }
}

impl Value {
    /// The value's type.
    pub fn ty(self) -> Ty {
        match self {
            Value::I(_) => Ty::I,
            Value::U(_) => Ty::U,
            Value::L(_) => Ty::L,
            Value::UL(_) => Ty::UL,
            Value::P(_) => Ty::P,
            Value::F(_) => Ty::F,
            Value::D(_) => Ty::D,
            Value::V => Ty::V,
        }
    }

    /// The raw 64-bit pattern as a register would hold it: integers of
    /// 32 bits zero-extended, `f` in the low 32 bits.
    pub fn bits(self) -> u64 {
        match self {
            Value::I(v) => v as u32 as u64,
            Value::U(v) => v as u64,
            Value::L(v) => v as u64,
            Value::UL(v) => v,
            Value::P(v) => v as u64,
            Value::F(v) => v.to_bits() as u64,
            Value::D(v) => v.to_bits(),
            Value::V => 0,
        }
    }

    /// Rebuilds a value of type `ty` from register bits.
    pub fn from_bits(ty: Ty, bits: u64) -> Value {
        match ty {
            Ty::I | Ty::C | Ty::S => Value::I(bits as i32),
            Ty::U | Ty::UC | Ty::US => Value::U(bits as u32),
            Ty::L => Value::L(bits as i64),
            Ty::UL => Value::UL(bits),
            Ty::P => Value::P(bits as usize),
            Ty::F => Value::F(f32::from_bits(bits as u32)),
            Ty::D => Value::D(f64::from_bits(bits)),
            Ty::V => Value::V,
        }
    }

    /// Equality that treats two NaNs as equal and compares floats by bits
    /// otherwise, which is what differential tests want.
    pub fn same(self, other: Value) -> bool {
        match (self, other) {
            (Value::F(a), Value::F(b)) => a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            (Value::D(a), Value::D(b)) => a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            (a, b) => a == b,
        }
    }
}

/// The most parameters a function may take (and arguments a call may pass).
pub const MAX_PARAMS: usize = 32;
