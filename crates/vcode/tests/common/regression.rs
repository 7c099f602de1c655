//! The paper's "automatically generated regression tests" (VCODE §5.1),
//! written once for every target: one table, [`table!`] below, lists every
//! instruction of Table 2 (and the shipped extensions) with every type it
//! is defined for, and generates one `#[test]` per row. Each row is run in
//! register and immediate forms over the edge values (0, 1, -1, the type's
//! min and max, 2^31 - 1, 2^31, 2^32, long-form values such as
//! 0x1234_5678_9abc_def0; ±0, infinities, NaN, subnormals, 2^63, 2^64,
//! -1.5 for floats), with register aliasing (`rd == a`, `rd == b`,
//! `a == b`), on the target's backend and on the reference backend
//! parameterized by the target's calling convention. Every result is
//! compared with C semantics written here independently in Rust (wrapping
//! arithmetic, masked shifts, truncating division), and every generated
//! function is checked to decode ([`Target::check_decodes`]: iced-x86 on
//! x86-64).
//!
//! Operands reach generated code through a control block: each test
//! function is `void f(u64 *ctl)`; it loads its operands from `ctl`, runs
//! the instruction under test, and stores the results back into `ctl`
//! (whose output slots are filled with a sentinel first, so a store of
//! the wrong width shows). That lets the register sweeps at the end put
//! every operand in every allocatable register, `r12` and `r13` (the SIB
//! and disp8 special cases of x86 addressing) included.
//!
//! The test binary that declares this module names the target as
//! `crate::Arch` (`regression.rs`: x86-64, run natively;
//! `aarch64_regression.rs`: aarch64, run under emulation) and gives the
//! functions outside the generated code that the tests call
//! ([`Callees`]): Rust functions on x86-64, generated A64 functions under
//! emulation, which cannot call host code. Division by zero traps on
//! x86-64 and not on A64; the rows that divide by zero check the
//! reference backend's fault only, on both.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::Arch;
use crate::common::r;
use crate::common::target::Target;
use vcode::ext::{Bswap, MinMax, OnesComplement, Popcount, Select, Sqrt};
use vcode::host;
use vcode::reference::{Fault, FaultKind, RefCode};
use vcode::{
    Backend, D, ErrorKind, F, Float, Func, I, Int, Invoke, InvokeError, L, Leaf, Operand, P, Reg,
    Ty, Type, U, UL, Value,
};

/// The backend under test.
type Native = <Arch as Target>::Native;
/// Its generated functions.
type Code = <Arch as Target>::Code;
/// The reference backend with the target's calling convention.
type Reference = <Arch as Target>::Reference;

/// The functions outside the generated one that the tests call, by
/// address: each target's test binary provides them, as host functions
/// where the code runs natively and as generated ones under emulation.
pub trait Callees {
    /// A function of no arguments that adds 1 to [`JAL_COUNT`].
    fn bump() -> usize;
    /// `i64 f()`: 0 if its caller left the stack aligned as the ABI says.
    fn stack_misalignment() -> usize;
    /// [`nine_args_model`] of nine `l` arguments (the last on the stack).
    fn nine_args() -> usize;
    /// [`floats_and_ints_model`], computed in the same order (so the same bits).
    fn floats_and_ints() -> usize;
    /// [`mixed32_model`] as a native function the code can call, where it
    /// can call host code (x86-64); `None` under emulation.
    fn mixed32() -> Option<usize>;
}

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/// Integer edge values (as 64-bit patterns; 32-bit types use the low half).
const EDGE: &[u64] = &[
    0,
    1,
    -1i64 as u64,
    2,
    7,
    -7i64 as u64,
    31,
    32,
    33,
    63,
    64,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    i32::MIN as i64 as u64,
    0x8000_0000_0000_0000,
    0x7fff_ffff_ffff_ffff,
    0x1234_5678_9abc_def0,
    0xedcb_a987_6543_2110,
];

const F_EDGE: &[f32] = &[
    0.0,
    -0.0,
    1.0,
    -1.5,
    2.5,
    -3.75,
    0.1,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    f32::MAX,
    f32::MIN_POSITIVE,
    1.0e-45, // the smallest subnormal
    -1.0e-40,
    2147483648.0,
    -2147483648.0,
    4294967296.0,
    9223372036854775808.0,
    -9223372036854775808.0,
    18446744073709551616.0,
    1.0e30,
];

const D_EDGE: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.5,
    2.5,
    -3.75,
    0.1,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    f64::MAX,
    f64::MIN_POSITIVE,
    5e-324, // the smallest subnormal
    -1e-310,
    2147483647.0,
    2147483647.9,
    2147483648.0,
    -2147483648.5,
    -2147483649.0,
    4294967295.5,
    4294967296.0,
    9223372036854775807.0,
    9223372036854775808.0,
    -9223372036854775808.0,
    18446744073709549568.0,
    18446744073709551616.0,
    1.0e300,
];

/// The register bits of `v` as type `ty` (32-bit types zero-extended).
fn norm(ty: Ty, v: u64) -> u64 {
    match ty {
        Ty::I | Ty::U | Ty::F => v & 0xffff_ffff,
        _ => v,
    }
}

/// The edge values of a register type, as register bits, deduplicated.
fn values(ty: Ty) -> Vec<u64> {
    let mut v: Vec<u64> = match ty {
        Ty::F => F_EDGE.iter().map(|x| x.to_bits() as u64).collect(),
        Ty::D => D_EDGE.iter().map(|x| x.to_bits()).collect(),
        _ => EDGE.iter().map(|&x| norm(ty, x)).collect(),
    };
    let mut seen = std::collections::HashSet::new();
    v.retain(|x| seen.insert(*x));
    v
}

/// An immediate operand converted to the instruction's type, as C does.
fn imm_bits(ty: Ty, v: i64) -> u64 {
    norm(ty, v as u64)
}

// ---------------------------------------------------------------------------
// C semantics, written independently of vcode
// ---------------------------------------------------------------------------

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Lsh,
    Rsh,
}

const INT_OPS: [Op; 10] = [
    Op::Add,
    Op::Sub,
    Op::Mul,
    Op::Div,
    Op::Mod,
    Op::And,
    Op::Or,
    Op::Xor,
    Op::Lsh,
    Op::Rsh,
];

/// Why C code on x86-64 would trap.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Trap {
    Zero,
    Overflow,
}

macro_rules! arith {
    ($t:ty, $op:expr, $a:expr, $b:expr) => {{
        let (a, b) = ($a as $t, $b as $t);
        match $op {
            Op::Add => a.wrapping_add(b),
            Op::Sub => a.wrapping_sub(b),
            Op::Mul => a.wrapping_mul(b),
            Op::Div => match a.checked_div(b) {
                Some(v) => v,
                None => return Err(if b == 0 { Trap::Zero } else { Trap::Overflow }),
            },
            Op::Mod => match a.checked_rem(b) {
                Some(v) => v,
                None => return Err(if b == 0 { Trap::Zero } else { Trap::Overflow }),
            },
            Op::And => a & b,
            Op::Or => a | b,
            Op::Xor => a ^ b,
            // Rust's wrapping shifts take the count modulo the width, as x86 does.
            Op::Lsh => a.wrapping_shl(b as u32),
            Op::Rsh => a.wrapping_shr(b as u32),
        }
    }};
}

fn c_int(op: Op, ty: Ty, a: u64, b: u64) -> Result<u64, Trap> {
    Ok(match ty {
        Ty::I => arith!(i32, op, a, b) as u32 as u64,
        Ty::U => arith!(u32, op, a, b) as u64,
        Ty::L => arith!(i64, op, a, b) as u64,
        Ty::UL | Ty::P => arith!(u64, op, a, b),
        t => panic!("not an integer type: {t}"),
    })
}

fn c_float(op: Op, ty: Ty, a: u64, b: u64) -> u64 {
    macro_rules! go {
        ($a:expr, $b:expr) => {
            match op {
                Op::Add => $a + $b,
                Op::Sub => $a - $b,
                Op::Mul => $a * $b,
                Op::Div => $a / $b,
                _ => unreachable!(),
            }
        };
    }
    if ty == Ty::F {
        go!(f32::from_bits(a as u32), f32::from_bits(b as u32)).to_bits() as u64
    } else {
        go!(f64::from_bits(a), f64::from_bits(b)).to_bits()
    }
}

/// The value of register bits `v` of integer type `ty`, exactly.
fn int_value(ty: Ty, v: u64) -> i128 {
    match ty {
        Ty::I => v as i32 as i128,
        Ty::U => v as u32 as i128,
        Ty::L => v as i64 as i128,
        _ => v as i128,
    }
}

fn float_value(ty: Ty, v: u64) -> f64 {
    if ty == Ty::F {
        f32::from_bits(v as u32) as f64
    } else {
        f64::from_bits(v)
    }
}

const TWO63: f64 = 9223372036854775808.0;

/// `cvtt*2si` with a 64-bit destination: truncation, or the "integer
/// indefinite" value for NaN and out-of-range values.
fn trunc64(x: f64) -> u64 {
    if x.is_nan() || x.trunc() >= TWO63 || x.trunc() < -TWO63 {
        1 << 63
    } else {
        x as i64 as u64
    }
}

/// The documented conversion semantics (x86_64 module docs).
fn c_cv(from: Ty, to: Ty, v: u64) -> u64 {
    match (from.is_float(), to.is_float()) {
        (false, false) => {
            let x = int_value(from, v);
            norm(to, x as u64)
        }
        (false, true) => {
            let x = int_value(from, v);
            if to == Ty::F {
                (x as f32).to_bits() as u64
            } else {
                (x as f64).to_bits()
            }
        }
        (true, true) => {
            let x = float_value(from, v);
            if to == Ty::F {
                (x as f32).to_bits() as u64
            } else {
                x.to_bits()
            }
        }
        (true, false) => {
            let x = float_value(from, v);
            match to {
                Ty::I => {
                    if x.is_nan() || x.trunc() > i32::MAX as f64 || x.trunc() < i32::MIN as f64 {
                        0x8000_0000
                    } else {
                        x as i32 as u32 as u64
                    }
                }
                Ty::L => trunc64(x),
                // `u`: the low half of the 64-bit truncation (what C
                // compilers emit for x86-64): exact on [0, 2^32).
                Ty::U => trunc64(x) & 0xffff_ffff,
                _ => {
                    if (0.0..18446744073709551616.0).contains(&x) {
                        x as u64 // exact on the documented range [0, 2^64)
                    } else if x >= TWO63 {
                        // 2^64 and above: the sequence subtracts 2^63 and
                        // converts, giving the indefinite value with bit 63
                        // flipped, 0 (as C compilers' sequences do).
                        0
                    } else {
                        trunc64(x)
                    }
                }
            }
        }
    }
}

fn c_compare(c: Cond, ty: Ty, a: u64, b: u64) -> bool {
    use std::cmp::Ordering::*;
    let ord = if ty.is_float() {
        float_value(ty, a).partial_cmp(&float_value(ty, b))
    } else {
        Some(int_value(ty, a).cmp(&int_value(ty, b)))
    };
    match (c, ord) {
        (Cond::Ne, None) => true,
        (_, None) => false,
        (Cond::Lt, Some(o)) => o == Less,
        (Cond::Le, Some(o)) => o != Greater,
        (Cond::Gt, Some(o)) => o == Greater,
        (Cond::Ge, Some(o)) => o != Less,
        (Cond::Eq, Some(o)) => o == Equal,
        (Cond::Ne, Some(o)) => o != Equal,
    }
}

/// Two register-bit patterns are the same result: equal, or both NaN.
fn same(ty: Ty, a: u64, b: u64) -> bool {
    a == b
        || match ty {
            Ty::F => f32::from_bits(a as u32).is_nan() && f32::from_bits(b as u32).is_nan(),
            Ty::D => f64::from_bits(a).is_nan() && f64::from_bits(b).is_nan(),
            _ => false,
        }
}

/// Builds the same function on both backends: `$e` is written once,
/// generic over the backend type `$B`.
macro_rules! pair {
    ($what:expr, |$B:ident| $e:expr) => {{
        let native = {
            type $B = Native;
            $e
        };
        let reference = {
            type $B = Reference;
            $e
        };
        Pair::new(native, reference, &$what)
    }};
}

// ---------------------------------------------------------------------------
// The harness: `void f(u64 *ctl)`
// ---------------------------------------------------------------------------

/// Slots of the control block.
pub const CTL: usize = 64;
/// First output slot.
const OUT: usize = 16;
/// What output slots hold before a run.
const SENTINEL: u64 = 0xa5a5_a5a5_a5a5_a5a5;

/// Allocatable integer registers, in `getreg` order.
pub const ALLOC: [u8; 11] = host::TEMP_ORDER;
/// Allocatable float registers.
pub const FALLOC: [u8; 15] = host::FLOAT_ORDER;

/// Begins `void f(u64 *ctl)` and returns the register holding `ctl`: the
/// parameter register `rdi`, or another free one if the instruction under
/// test uses `rdi`. Reserves every register in `busy` (float, number).
fn begin<B: Backend>(f: &mut Func<B>, busy: &[(bool, u8)], leaf: Leaf) -> Reg<P> {
    let p = f.lambda("%p", leaf).expect("lambda");
    let p0 = p.get::<P>(0).expect("param");
    let mut taken = vec![(false, p0.num())];
    let ctl = if busy.contains(&(false, p0.num())) {
        let n = *ALLOC
            .iter()
            .find(|&&n| !busy.contains(&(false, n)))
            .expect("a register for ctl");
        let c = f.reserve(r::<P>(n)).expect("reserve ctl");
        f.mov(c, p0);
        taken.push((false, n));
        c
    } else {
        p0
    };
    for &(fl, n) in busy {
        if taken.contains(&(fl, n)) {
            continue;
        }
        taken.push((fl, n));
        if fl {
            f.reserve(r::<D>(n)).expect("reserve");
        } else {
            f.reserve(r::<L>(n)).expect("reserve");
        }
    }
    ctl
}

fn reg_of<T: Type>(n: u8) -> (bool, u8) {
    (T::TY.is_float(), n)
}

/// A function built on both backends.
struct Pair {
    native: Code,
    reference: RefCode,
    what: String,
}

/// Fails if `code` holds an invalid instruction.
fn check_decodes(code: &Code, what: &str) {
    if let Err(e) = Arch::check_decodes(code) {
        panic!("{what}: {e}");
    }
}

impl Pair {
    fn new(native: vcode::Result<Code>, reference: vcode::Result<RefCode>, what: &str) -> Pair {
        let native = native.unwrap_or_else(|e| panic!("{what}: native end: {e}"));
        let reference = reference.unwrap_or_else(|e| panic!("{what}: reference end: {e}"));
        check_decodes(&native, what);
        Pair {
            native,
            reference,
            what: what.to_string(),
        }
    }

    /// Runs one backend on a copy of `ctl`.
    fn run_one(&self, native: bool, ctl: &[u64; CTL]) -> (Result<Value, InvokeError>, [u64; CTL]) {
        let mut c = *ctl;
        let arg = [Value::P(c.as_mut_ptr() as usize)];
        // SAFETY: every test function reads and writes only `ctl`, within
        // its CTL slots, and memory the test passes in `ctl` explicitly.
        let v = unsafe {
            if native {
                Arch::run(&self.native, &arg)
            } else {
                self.reference.invoke(&arg)
            }
        };
        (v, c)
    }

    /// Runs both backends with `inputs` in the first slots and checks that
    /// output slot `OUT + i` holds `expect[i]` (of type `tys[i]`) on both.
    fn check(&self, inputs: &[u64], tys: &[Ty], expect: &[u64], ctx: &dyn std::fmt::Debug) {
        let mut ctl = [SENTINEL; CTL];
        ctl[..inputs.len()].copy_from_slice(inputs);
        for native in [true, false] {
            let (v, out) = self.run_one(native, &ctl);
            let backend = if native { "native" } else { "reference" };
            assert_eq!(v, Ok(Value::V), "{}: {backend}: {ctx:?}", self.what);
            for (i, (&e, &ty)) in expect.iter().zip(tys).enumerate() {
                // A 4-byte store leaves the upper half of the slot alone.
                let (got, hi) = if ty.size() == 4 {
                    (out[OUT + i] & 0xffff_ffff, out[OUT + i] >> 32)
                } else {
                    (out[OUT + i], SENTINEL >> 32)
                };
                assert_eq!(
                    hi,
                    SENTINEL >> 32,
                    "{}: {backend}: {ctx:?}: output {i} ({ty}) stored too wide",
                    self.what
                );
                assert!(
                    same(ty, got, e),
                    "{}: {backend}: {ctx:?}: output {i} ({ty}) is {got:#x}, expected {e:#x}\n{}",
                    self.what,
                    if native {
                        Arch::listing(&self.native)
                    } else {
                        self.reference.listing()
                    }
                );
            }
            for (i, &v) in out[OUT + expect.len()..].iter().enumerate() {
                assert_eq!(
                    v,
                    SENTINEL,
                    "{}: {backend}: {ctx:?}: stray store to slot {}",
                    self.what,
                    OUT + expect.len() + i
                );
            }
        }
    }

    /// The reference backend stops with `kind` (natively the same input traps).
    fn check_fault(&self, inputs: &[u64], kind: FaultKind, ctx: &dyn std::fmt::Debug) {
        let mut ctl = [SENTINEL; CTL];
        ctl[..inputs.len()].copy_from_slice(inputs);
        let (v, _) = self.run_one(false, &ctl);
        match v {
            Err(InvokeError::Fault(Fault { kind: k, .. })) => {
                assert_eq!(k, kind, "{}: {ctx:?}", self.what)
            }
            other => panic!(
                "{}: {ctx:?}: expected fault {kind:?}, got {other:?}",
                self.what
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Cond {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Un {
    Com,
    Not,
    Mov,
    Neg,
}

/// Memory widths of loads and stores.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Width {
    /// `ld`/`st`: the register type's own width.
    Full,
    /// `ldc`, `stc`.
    C,
    /// `lduc`.
    UC,
    /// `lds`, `sts`.
    S,
    /// `ldus`.
    US,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Tgt {
    Label,
    Reg,
    Addr,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Ext {
    Sqrt,
    Bswap16,
    Bswap32,
    Bswap64,
    Popcount,
    Select,
    Min,
    Max,
    Add1c,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    Bin(Op),
    Un(Un),
    Set,
    Cv,
    Ld(Width),
    St(Width),
    Local,
    Ret,
    Jmp(Tgt),
    Jal(Tgt),
    Br(Cond),
    Nop,
    Ext(Ext),
}

#[derive(Debug)]
struct Row {
    name: &'static str,
    kind: Kind,
    tys: &'static [Ty],
}

macro_rules! table {
    ($( $name:ident : $kind:expr => [$($t:ident),*]; )*) => {
        /// Every row, for the coverage check.
        static TABLE: &[Row] = &[$( Row { name: stringify!($name), kind: $kind, tys: &[$(Ty::$t),*] }, )*];
        $(
            #[test]
            fn $name() {
                run_row(&Row { name: stringify!($name), kind: $kind, tys: &[$(Ty::$t),*] });
            }
        )*
    };
}

table! {
    // Binary operations (Table 2): every integer type, and f/d where allowed.
    add: Kind::Bin(Op::Add) => [I, U, L, UL, P, F, D];
    sub: Kind::Bin(Op::Sub) => [I, U, L, UL, P, F, D];
    mul: Kind::Bin(Op::Mul) => [I, U, L, UL, P, F, D];
    div: Kind::Bin(Op::Div) => [I, U, L, UL, P, F, D];
    rem: Kind::Bin(Op::Mod) => [I, U, L, UL, P];
    and: Kind::Bin(Op::And) => [I, U, L, UL, P];
    or: Kind::Bin(Op::Or) => [I, U, L, UL, P];
    xor: Kind::Bin(Op::Xor) => [I, U, L, UL, P];
    lsh: Kind::Bin(Op::Lsh) => [I, U, L, UL, P];
    rsh: Kind::Bin(Op::Rsh) => [I, U, L, UL, P];
    // Unary operations.
    com: Kind::Un(Un::Com) => [I, U, L, UL, P];
    not: Kind::Un(Un::Not) => [I, U, L, UL, P];
    mov: Kind::Un(Un::Mov) => [I, U, L, UL, P, F, D];
    neg: Kind::Un(Un::Neg) => [I, U, L, UL, P, F, D];
    set: Kind::Set => [I, U, L, UL, P, F, D];
    // Conversions: from each type to every other (p <-> float is an error).
    cv: Kind::Cv => [I, U, L, UL, P, F, D];
    // Loads and stores of every width, signed and unsigned.
    ld: Kind::Ld(Width::Full) => [I, U, L, UL, P, F, D];
    ldc: Kind::Ld(Width::C) => [I, U, L, UL, P];
    lduc: Kind::Ld(Width::UC) => [I, U, L, UL, P];
    lds: Kind::Ld(Width::S) => [I, U, L, UL, P];
    ldus: Kind::Ld(Width::US) => [I, U, L, UL, P];
    st: Kind::St(Width::Full) => [I, U, L, UL, P, F, D];
    stc: Kind::St(Width::C) => [I, U, L, UL, P];
    sts: Kind::St(Width::S) => [I, U, L, UL, P];
    locals: Kind::Local => [I, U, L, UL, P, F, D];
    // Control.
    ret: Kind::Ret => [I, U, L, UL, P, F, D, V];
    jmp_label: Kind::Jmp(Tgt::Label) => [];
    jmp_reg: Kind::Jmp(Tgt::Reg) => [P];
    jmp_addr: Kind::Jmp(Tgt::Addr) => [];
    jal_label: Kind::Jal(Tgt::Label) => [];
    jal_reg: Kind::Jal(Tgt::Reg) => [P];
    jal_addr: Kind::Jal(Tgt::Addr) => [];
    blt: Kind::Br(Cond::Lt) => [I, U, L, UL, P, F, D];
    ble: Kind::Br(Cond::Le) => [I, U, L, UL, P, F, D];
    bgt: Kind::Br(Cond::Gt) => [I, U, L, UL, P, F, D];
    bge: Kind::Br(Cond::Ge) => [I, U, L, UL, P, F, D];
    beq: Kind::Br(Cond::Eq) => [I, U, L, UL, P, F, D];
    bne: Kind::Br(Cond::Ne) => [I, U, L, UL, P, F, D];
    nop: Kind::Nop => [];
    // The shipped extensions.
    ext_sqrt: Kind::Ext(Ext::Sqrt) => [F, D];
    ext_bswap16: Kind::Ext(Ext::Bswap16) => [I, U, L, UL];
    ext_bswap32: Kind::Ext(Ext::Bswap32) => [I, U, L, UL];
    ext_bswap64: Kind::Ext(Ext::Bswap64) => [L, UL];
    ext_popcount: Kind::Ext(Ext::Popcount) => [I, U, L, UL];
    ext_select: Kind::Ext(Ext::Select) => [I, U, L, UL, P];
    ext_min: Kind::Ext(Ext::Min) => [I, U, L, UL, P, F, D];
    ext_max: Kind::Ext(Ext::Max) => [I, U, L, UL, P, F, D];
    ext_add1c: Kind::Ext(Ext::Add1c) => [U, UL];
}

fn run_row(row: &Row) {
    match row.kind {
        Kind::Bin(op) => row.tys.iter().for_each(|&t| binary(op, t)),
        Kind::Un(u) => row.tys.iter().for_each(|&t| unary(u, t)),
        Kind::Set => row.tys.iter().for_each(|&t| set_values(t)),
        Kind::Cv => row.tys.iter().for_each(|&t| conversions_from(t)),
        Kind::Ld(w) => row.tys.iter().for_each(|&t| loads(w, t)),
        Kind::St(w) => row.tys.iter().for_each(|&t| stores(w, t)),
        Kind::Local => row.tys.iter().for_each(|&t| locals_of(t)),
        Kind::Ret => row.tys.iter().for_each(|&t| ret_of(t)),
        Kind::Jmp(t) => jumps(t),
        Kind::Jal(t) => jals(t),
        Kind::Br(c) => row.tys.iter().for_each(|&t| branches(c, t)),
        Kind::Nop => nops(),
        Kind::Ext(e) => row.tys.iter().for_each(|&t| extension(e, t)),
    }
}

/// The table covers every instruction family the issue lists.
#[test]
fn table_covers_every_instruction() {
    let has = |k: Kind| TABLE.iter().any(|r| r.kind == k);
    for op in INT_OPS {
        let row = TABLE
            .iter()
            .find(|r| r.kind == Kind::Bin(op))
            .expect("binary row");
        for t in [Ty::I, Ty::U, Ty::L, Ty::UL, Ty::P] {
            assert!(row.tys.contains(&t), "{} lacks {t}", row.name);
        }
    }
    for u in [Un::Com, Un::Not, Un::Mov, Un::Neg] {
        assert!(has(Kind::Un(u)));
    }
    for w in [Width::Full, Width::C, Width::UC, Width::S, Width::US] {
        assert!(has(Kind::Ld(w)));
    }
    for w in [Width::Full, Width::C, Width::S] {
        assert!(has(Kind::St(w)));
    }
    for t in [Tgt::Label, Tgt::Reg, Tgt::Addr] {
        assert!(has(Kind::Jmp(t)) && has(Kind::Jal(t)));
    }
    for c in [Cond::Lt, Cond::Le, Cond::Gt, Cond::Ge, Cond::Eq, Cond::Ne] {
        assert!(has(Kind::Br(c)));
    }
    assert!(
        has(Kind::Set) && has(Kind::Cv) && has(Kind::Ret) && has(Kind::Nop) && has(Kind::Local)
    );
    assert_eq!(TABLE.len(), 48);
}

// ---------------------------------------------------------------------------
// Binary operations
// ---------------------------------------------------------------------------

fn emit_int<B: Backend, T: Int>(f: &mut Func<B>, op: Op, rd: Reg<T>, a: Reg<T>, b: Operand<T>) {
    match op {
        Op::Add => f.add(rd, a, b),
        Op::Sub => f.sub(rd, a, b),
        Op::Mul => f.mul(rd, a, b),
        Op::Div => f.div(rd, a, b),
        Op::Mod => f.rem(rd, a, b),
        Op::And => f.and(rd, a, b),
        Op::Or => f.or(rd, a, b),
        Op::Xor => f.xor(rd, a, b),
        Op::Lsh => f.lsh(rd, a, b),
        Op::Rsh => f.rsh(rd, a, b),
    }
}

fn emit_float<B: Backend, T: Float>(f: &mut Func<B>, op: Op, rd: Reg<T>, a: Reg<T>, b: Reg<T>) {
    match op {
        Op::Add => f.add(rd, a, b),
        Op::Sub => f.sub(rd, a, b),
        Op::Mul => f.mul(rd, a, b),
        Op::Div => f.div(rd, a, b),
        _ => unreachable!("{op:?} is not a float operation"),
    }
}

/// `rd = a op b` with the given physical registers (`b: None` for an
/// immediate). Loads a from slot 0 and b from slot 1, stores rd to OUT.
fn bin_fn<B: Backend, T: Type>(
    op: Op,
    rd: u8,
    a: u8,
    b: Result<u8, i64>,
) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let mut busy = vec![reg_of::<T>(rd), reg_of::<T>(a)];
    if let Ok(b) = b {
        busy.push(reg_of::<T>(b));
    }
    let ctl = begin(&mut f, &busy, Leaf::Yes);
    f.ld(r::<T>(a), ctl, 0);
    if let Ok(b) = b {
        f.ld(r::<T>(b), ctl, 8);
    }
    if T::TY.is_float() {
        float_ty!(T::TY, |FT| emit_float(
            &mut f,
            op,
            r::<FT>(rd),
            r::<FT>(a),
            r::<FT>(b.expect("float register"))
        ));
    } else {
        let b: Operand<T> = match b {
            Ok(n) => Operand::Reg(r(n)),
            Err(v) => Operand::Imm(v),
        };
        int_ty!(T::TY, |IT| {
            let b: Operand<IT> = match b {
                Operand::Reg(x) => Operand::Reg(r(x.num())),
                Operand::Imm(v) => Operand::Imm(v),
            };
            emit_int(&mut f, op, r::<IT>(rd), r::<IT>(a), b)
        });
    }
    f.st(r::<T>(rd), ctl, 8 * OUT as i32);
    f.retv();
    f.end()
}

/// Register aliasing patterns of a binary operation: (rd, a, b) as
/// indices into a list of three distinct registers.
const ALIASES: [(&str, [usize; 3]); 5] = [
    ("distinct", [0, 1, 2]),
    ("rd == a", [0, 0, 1]),
    ("rd == b", [0, 1, 0]),
    ("a == b", [0, 1, 1]),
    ("rd == a == b", [0, 0, 0]),
];

fn check_bin(pair: &Pair, op: Op, ty: Ty, a: u64, b: u64) {
    let expect = if ty.is_float() {
        Ok(c_float(op, ty, a, b))
    } else {
        c_int(op, ty, a, b)
    };
    match expect {
        Ok(e) => pair.check(&[a, b], &[ty], &[e], &(op, ty, a, b)),
        Err(Trap::Zero) => pair.check_fault(&[a, b], FaultKind::DivisionByZero, &(op, ty, a, b)),
        Err(Trap::Overflow) => {
            pair.check_fault(&[a, b], FaultKind::DivisionOverflow, &(op, ty, a, b))
        }
    }
}

fn binary(op: Op, ty: Ty) {
    let vals = values(ty);
    // Register form, in every aliasing pattern, with registers that vary
    // by pattern (so r12/r13/r8.. also appear).
    let pool: &[u8] = if ty.is_float() { &FALLOC } else { &ALLOC };
    for (k, (name, idx)) in ALIASES.iter().enumerate() {
        let regs: Vec<u8> = idx
            .iter()
            .map(|&i| pool[(3 * k + i + 4) % pool.len()])
            .collect();
        let what = format!("{op:?} {ty} {name} {regs:?}");
        let pair = pair!(what, |B| any_ty!(ty, |T| bin_fn::<B, T>(
            op,
            regs[0],
            regs[1],
            Ok(regs[2])
        )));
        for &a in &vals {
            for &b in &vals {
                if idx[1] == idx[2] && a != b {
                    continue; // one register cannot hold two values
                }
                let b = if idx[1] == idx[2] { a } else { b };
                check_bin(&pair, op, ty, a, b);
            }
        }
    }
    if ty.is_float() {
        // Float operations have no immediate form: a typed error.
        let e = {
            let mut f = Func::<Native>::with_backend();
            let p = f.lambda("%d", Leaf::Yes).unwrap();
            let x = p.get::<D>(0).unwrap();
            f.add(x, x, Operand::Imm(1));
            f.ret(x);
            f.end().expect_err("float immediate")
        };
        assert!(matches!(e.kind(), ErrorKind::UnsupportedType { .. }), "{e}");
        return;
    }
    // Immediate form: every edge immediate, with rd == a and rd != a.
    for &imm in EDGE {
        let imm = imm as i64;
        let b = imm_bits(ty, imm);
        for (same_reg, rd) in [(true, ALLOC[0]), (false, ALLOC[7])] {
            let a = ALLOC[0];
            let what = format!("{op:?} {ty} imm {imm:#x} rd==a:{same_reg}");
            if matches!(op, Op::Div | Op::Mod) && b == 0 {
                // Division by an immediate zero is rejected when generating.
                let e = int_ty!(ty, |T| bin_fn::<Native, T>(op, rd, a, Err(imm)))
                    .expect_err("div by imm 0");
                assert_eq!(*e.kind(), ErrorKind::DivisionByZero, "{what}");
                let e = int_ty!(ty, |T| bin_fn::<Reference, T>(op, rd, a, Err(imm)))
                    .expect_err("div by imm 0");
                assert_eq!(*e.kind(), ErrorKind::DivisionByZero, "{what}");
                continue;
            }
            let pair = pair!(what, |B| int_ty!(ty, |T| bin_fn::<B, T>(
                op,
                rd,
                a,
                Err(imm)
            )));
            for &a in &vals {
                check_bin(&pair, op, ty, a, b);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Unary operations, set
// ---------------------------------------------------------------------------

fn un_fn<B: Backend, T: Type>(u: Un, rd: u8, a: u8) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let ctl = begin(&mut f, &[reg_of::<T>(rd), reg_of::<T>(a)], Leaf::Yes);
    f.ld(r::<T>(a), ctl, 0);
    match u {
        Un::Mov => f.mov(r::<T>(rd), r::<T>(a)),
        Un::Neg => f.neg(r::<T>(rd), r::<T>(a)),
        Un::Com => int_ty!(T::TY, |IT| f.com(r::<IT>(rd), r::<IT>(a))),
        Un::Not => int_ty!(T::TY, |IT| f.not(r::<IT>(rd), r::<IT>(a))),
    }
    f.st(r::<T>(rd), ctl, 8 * OUT as i32);
    f.retv();
    f.end()
}

fn c_un(u: Un, ty: Ty, a: u64) -> u64 {
    match (u, ty) {
        (Un::Mov, _) => a,
        (Un::Neg, Ty::F) => (-f32::from_bits(a as u32)).to_bits() as u64,
        (Un::Neg, Ty::D) => (-f64::from_bits(a)).to_bits(),
        (Un::Neg, _) => norm(ty, a.wrapping_neg()),
        (Un::Com, _) => norm(ty, !a),
        (Un::Not, _) => (norm(ty, a) == 0) as u64,
    }
}

fn unary(u: Un, ty: Ty) {
    let pool: &[u8] = if ty.is_float() { &FALLOC } else { &ALLOC };
    for (rd, a) in [(pool[3], pool[3]), (pool[1], pool[8]), (pool[8], pool[1])] {
        let what = format!("{u:?} {ty} rd={rd} a={a}");
        let pair = pair!(what, |B| any_ty!(ty, |T| un_fn::<B, T>(u, rd, a)));
        for a in values(ty) {
            pair.check(&[a], &[ty], &[c_un(u, ty, a)], &(u, ty, a));
        }
    }
}

/// `set` of every edge value into register `rd`, one output slot each.
fn set_fn<B: Backend, T: Type>(rd: u8, vals: &[u64]) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let ctl = begin(&mut f, &[reg_of::<T>(rd)], Leaf::Yes);
    for (i, &v) in vals.iter().enumerate() {
        f.set(r::<T>(rd), T::from_bits(v));
        f.st(r::<T>(rd), ctl, 8 * (OUT + i) as i32);
    }
    f.retv();
    f.end()
}

fn set_values(ty: Ty) {
    let vals = values(ty);
    let pool: &[u8] = if ty.is_float() { &FALLOC } else { &ALLOC };
    for &rd in pool {
        for chunk in vals.chunks(CTL - OUT) {
            let what = format!("set {ty} in {}", host::reg_name(ty.is_float(), rd));
            let pair = pair!(what, |B| any_ty!(ty, |T| set_fn::<B, T>(rd, chunk)));
            let tys = vec![ty; chunk.len()];
            pair.check(&[], &tys, chunk, &ty);
        }
    }
}

// ---------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------

fn cv_fn<B: Backend, S: Type, T: Type>(rd: u8, rs: u8) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let ctl = begin(&mut f, &[reg_of::<T>(rd), reg_of::<S>(rs)], Leaf::Yes);
    f.ld(r::<S>(rs), ctl, 0);
    f.cv(r::<T>(rd), r::<S>(rs));
    f.st(r::<T>(rd), ctl, 8 * OUT as i32);
    f.retv();
    f.end()
}

const ALL: [Ty; 7] = [Ty::I, Ty::U, Ty::L, Ty::UL, Ty::P, Ty::F, Ty::D];

fn conversions_from(from: Ty) {
    for to in ALL {
        if (from == Ty::P && to.is_float()) || (to == Ty::P && from.is_float()) {
            // Not defined: a typed error on both backends.
            let n = any_ty!(from, |S| any_ty!(to, |T| cv_fn::<Native, S, T>(
                ALLOC[0], FALLOC[0]
            )))
            .expect_err("p<->float");
            let r = any_ty!(from, |S| any_ty!(to, |T| cv_fn::<Reference, S, T>(
                ALLOC[0], FALLOC[0]
            )))
            .expect_err("p<->float");
            for e in [n, r] {
                assert!(
                    matches!(e.kind(), ErrorKind::UnsupportedType { insn: "cv", .. }),
                    "{e}"
                );
                assert_eq!(e.method(), "cv");
            }
            continue;
        }
        let pf = |t: Ty| -> &[u8] { if t.is_float() { &FALLOC } else { &ALLOC } };
        // Distinct registers, and the same register number where the
        // register files coincide (or differ: xmm3 and rbx share number 3).
        let mut pairs = vec![(pf(to)[2], pf(from)[9])];
        if from.is_float() == to.is_float() {
            pairs.push((pf(to)[4], pf(from)[4]));
        } else {
            pairs.push((3, 3));
        }
        for (rd, rs) in pairs {
            let what = format!("cv {from}->{to} rd={rd} rs={rs}");
            let pair = pair!(what, |B| any_ty!(from, |S| any_ty!(
                to,
                |T| cv_fn::<B, S, T>(rd, rs)
            )));
            for v in values(from) {
                pair.check(&[v], &[to], &[c_cv(from, to, v)], &(from, to, v));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Loads and stores
// ---------------------------------------------------------------------------

/// Immediate offsets: zero, disp8 and disp32 edges, and ones beyond i32.
const OFFSETS: &[i64] = &[
    0,
    1,
    -1,
    3,
    127,
    128,
    -128,
    -129,
    0x7fff_ffff,
    -0x8000_0000,
    0x8000_0000,
    0x1_0000_0000,
    -0x1_0000_0000,
    0x1234_5678_9abc_def0,
];

/// A data buffer whose bytes have the top bit set in places, so that
/// sign and zero extension differ.
fn data() -> [u8; 64] {
    std::array::from_fn(|i| (i as u8).wrapping_mul(0x35).wrapping_add(0x81))
}

fn mem_ty(w: Width, reg: Ty) -> Ty {
    match w {
        Width::Full => reg,
        Width::C => Ty::C,
        Width::UC => Ty::UC,
        Width::S => Ty::S,
        Width::US => Ty::US,
    }
}

/// What a load of `mem` at `bytes` gives in a register of type `ty` (C).
fn c_load(mem: Ty, ty: Ty, bytes: &[u8]) -> u64 {
    let raw = |n: usize| {
        bytes[..n]
            .iter()
            .rev()
            .fold(0u64, |a, &b| a << 8 | b as u64)
    };
    let v: i128 = match mem {
        Ty::C => raw(1) as u8 as i8 as i128,
        Ty::UC => raw(1) as i128,
        Ty::S => raw(2) as u16 as i16 as i128,
        Ty::US => raw(2) as i128,
        Ty::I | Ty::U | Ty::F => return raw(4),
        _ => return raw(8),
    };
    norm(ty, v as u64)
}

fn emit_load<B: Backend, T: Int>(
    f: &mut Func<B>,
    w: Width,
    rd: Reg<T>,
    base: Reg<P>,
    off: Operand<P>,
) {
    match w {
        Width::Full => f.ld(rd, base, off),
        Width::C => f.ldc(rd, base, off),
        Width::UC => f.lduc(rd, base, off),
        Width::S => f.lds(rd, base, off),
        Width::US => f.ldus(rd, base, off),
    }
}

/// `rd = load(base + off)`; base from slot 0, a register offset from slot 1.
fn ld_fn<B: Backend, T: Type>(
    w: Width,
    rd: u8,
    base: u8,
    off: Result<u8, i64>,
) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let mut busy = vec![reg_of::<T>(rd), (false, base)];
    if let Ok(o) = off {
        busy.push((false, o));
    }
    let ctl = begin(&mut f, &busy, Leaf::Yes);
    f.ld(r::<P>(base), ctl, 0);
    let off: Operand<P> = match off {
        Ok(o) => {
            f.ld(r::<P>(o), ctl, 8);
            Operand::Reg(r(o))
        }
        Err(v) => Operand::Imm(v),
    };
    if T::TY.is_float() {
        f.ld(r::<T>(rd), r::<P>(base), off);
    } else {
        int_ty!(T::TY, |IT| emit_load(
            &mut f,
            w,
            r::<IT>(rd),
            r::<P>(base),
            off
        ));
    }
    f.st(r::<T>(rd), ctl, 8 * OUT as i32);
    f.retv();
    f.end()
}

/// Runs a load function at byte `at` of the data buffer with offset `off`.
fn check_load(pair: &Pair, w: Width, ty: Ty, off: i64, at: usize) {
    let buf = data();
    let addr = buf.as_ptr() as usize + at;
    let base = (addr as u64).wrapping_sub(off as u64);
    let e = c_load(mem_ty(w, ty), ty, &buf[at..]);
    pair.check(&[base, off as u64], &[ty], &[e], &(w, ty, off, at));
}

fn loads(w: Width, ty: Ty) {
    // Immediate offsets, base and rd in varying registers.
    for (k, &off) in OFFSETS.iter().enumerate() {
        let base = ALLOC[k % ALLOC.len()];
        let rd = if ty.is_float() {
            FALLOC[k % FALLOC.len()]
        } else {
            ALLOC[(k + 3) % ALLOC.len()]
        };
        let what = format!(
            "{w:?} {ty} off {off:#x} base {}",
            host::reg_name(false, base)
        );
        let pair = pair!(what, |B| any_ty!(ty, |T| ld_fn::<B, T>(
            w,
            rd,
            base,
            Err(off)
        )));
        for at in [8, 13, 40] {
            check_load(&pair, w, ty, off, at);
        }
    }
    // Register offsets: the same values in a register, including rd == base
    // and rd == offset register.
    let int = !ty.is_float();
    for (rd, base, o) in [
        (ALLOC[2], ALLOC[7], ALLOC[8]),
        (ALLOC[7], ALLOC[7], ALLOC[8]),
        (ALLOC[8], ALLOC[7], ALLOC[8]),
    ] {
        if !int && rd != ALLOC[2] {
            continue;
        }
        let rd = if int { rd } else { FALLOC[5] };
        let what = format!("{w:?} {ty} register offset rd={rd} base={base} off={o}");
        let pair = pair!(what, |B| any_ty!(ty, |T| ld_fn::<B, T>(w, rd, base, Ok(o))));
        for &off in OFFSETS {
            check_load(&pair, w, ty, off, 21);
        }
    }
}

fn emit_store<B: Backend, T: Int>(
    f: &mut Func<B>,
    w: Width,
    rs: Reg<T>,
    base: Reg<P>,
    off: Operand<P>,
) {
    match w {
        Width::Full => f.st(rs, base, off),
        Width::C => f.stc(rs, base, off),
        Width::S => f.sts(rs, base, off),
        _ => unreachable!("no unsigned store"),
    }
}

/// `store(base + off) = rs`; rs from slot 2, base slot 0, register offset slot 1.
fn st_fn<B: Backend, T: Type>(
    w: Width,
    rs: u8,
    base: u8,
    off: Result<u8, i64>,
) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let mut busy = vec![reg_of::<T>(rs), (false, base)];
    if let Ok(o) = off {
        busy.push((false, o));
    }
    let ctl = begin(&mut f, &busy, Leaf::Yes);
    f.ld(r::<T>(rs), ctl, 16);
    f.ld(r::<P>(base), ctl, 0);
    let off: Operand<P> = match off {
        Ok(o) => {
            f.ld(r::<P>(o), ctl, 8);
            Operand::Reg(r(o))
        }
        Err(v) => Operand::Imm(v),
    };
    if T::TY.is_float() {
        f.st(r::<T>(rs), r::<P>(base), off);
    } else {
        int_ty!(T::TY, |IT| emit_store(
            &mut f,
            w,
            r::<IT>(rs),
            r::<P>(base),
            off
        ));
    }
    f.retv();
    f.end()
}

/// Runs a store of `v` at byte `at` with offset `off` on both backends and
/// compares the whole data buffer with the expected one.
fn check_store(pair: &Pair, w: Width, ty: Ty, off: i64, at: usize, v: u64) {
    let size = match w {
        Width::C => 1,
        Width::S => 2,
        _ => ty.size(),
    };
    let mut want = data();
    want[at..at + size].copy_from_slice(&v.to_le_bytes()[..size]);
    for native in [true, false] {
        let mut buf = data();
        let addr = buf.as_mut_ptr() as usize + at;
        let base = (addr as u64).wrapping_sub(off as u64);
        let mut ctl = [SENTINEL; CTL];
        ctl[..3].copy_from_slice(&[base, off as u64, v]);
        let (res, _) = pair.run_one(native, &ctl);
        assert_eq!(res, Ok(Value::V), "{}", pair.what);
        assert_eq!(
            buf, want,
            "{}: native={native} off={off:#x} at={at} v={v:#x}",
            pair.what
        );
    }
}

fn stores(w: Width, ty: Ty) {
    let vals = values(ty);
    for (k, &off) in OFFSETS.iter().enumerate() {
        let base = ALLOC[(k + 5) % ALLOC.len()];
        let rs = if ty.is_float() {
            FALLOC[k % FALLOC.len()]
        } else {
            ALLOC[(k + 1) % ALLOC.len()]
        };
        let what = format!(
            "st{w:?} {ty} off {off:#x} base {} rs {rs}",
            host::reg_name(false, base)
        );
        let pair = pair!(what, |B| any_ty!(ty, |T| st_fn::<B, T>(
            w,
            rs,
            base,
            Err(off)
        )));
        for &v in &vals {
            check_store(&pair, w, ty, off, 9 + k % 4, v);
        }
    }
    let int = !ty.is_float();
    for (rs, base, o) in [
        (ALLOC[3], ALLOC[4], ALLOC[5]),
        (ALLOC[4], ALLOC[4], ALLOC[5]),
        (ALLOC[5], ALLOC[4], ALLOC[5]),
    ] {
        if !int && rs != ALLOC[3] {
            continue;
        }
        let rs = if int { rs } else { FALLOC[9] };
        let what = format!("st{w:?} {ty} register offset rs={rs} base={base} off={o}");
        let pair = pair!(what, |B| any_ty!(ty, |T| st_fn::<B, T>(w, rs, base, Ok(o))));
        for &off in OFFSETS {
            if rs == base || rs == o {
                // The stored value is the address part itself.
                continue;
            }
            check_store(&pair, w, ty, off, 30, vals[vals.len() / 2]);
        }
        if rs == base || rs == o {
            // rs aliases an address register: it stores that register's value.
            let at = 17;
            let size = match w {
                Width::C => 1,
                Width::S => 2,
                _ => ty.size(),
            };
            for native in [true, false] {
                let mut buf = data();
                let off = 5u64;
                let vbase = buf.as_mut_ptr() as u64 + at as u64 - off;
                let mut ctl = [SENTINEL; CTL];
                // The value slot's load is overwritten by the address load.
                ctl[..3].copy_from_slice(&[vbase, off, 0]);
                let (res, _) = pair.run_one(native, &ctl);
                assert_eq!(res, Ok(Value::V));
                let mut want = data();
                let v = if rs == o { off } else { vbase };
                want[at..at + size].copy_from_slice(&v.to_le_bytes()[..size]);
                assert_eq!(buf, want, "{}: native={native}", pair.what);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Locals
// ---------------------------------------------------------------------------

fn local_fn<B: Backend, T: Type>(rd: u8) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = ALLOC[9];
    let ctl = begin(&mut f, &[reg_of::<T>(rd), (false, p)], Leaf::Yes);
    // Two locals of the type around one of another type: stores must not
    // overlap, and addresses must reach the same slot.
    let l1 = f.local::<T>();
    let lc = f.local::<I>();
    let l2 = f.local::<T>();
    f.ld(r::<T>(rd), ctl, 0);
    f.st_local(r::<T>(rd), l1);
    f.ld(r::<T>(rd), ctl, 8);
    f.st_local(r::<T>(rd), l2);
    let t = r::<I>(if T::TY.is_float() {
        ALLOC[2]
    } else {
        ALLOC[10]
    });
    f.reserve(t).ok();
    f.set(t, 0x5a5a);
    f.st_local(t, lc);
    f.ld_local(r::<T>(rd), l1);
    f.st(r::<T>(rd), ctl, 8 * OUT as i32);
    f.addr_local(r::<P>(p), l2);
    f.ld(r::<T>(rd), r::<P>(p), 0);
    f.st(r::<T>(rd), ctl, 8 * (OUT + 1) as i32);
    // A store through the address is seen by ld_local.
    f.ld(r::<T>(rd), ctl, 16);
    f.st(r::<T>(rd), r::<P>(p), 0);
    f.ld_local(r::<T>(rd), l2);
    f.st(r::<T>(rd), ctl, 8 * (OUT + 2) as i32);
    f.ld_local(t, lc);
    f.st(t, ctl, 8 * (OUT + 3) as i32);
    f.retv();
    f.end()
}

fn locals_of(ty: Ty) {
    let rd = if ty.is_float() { FALLOC[3] } else { ALLOC[7] };
    let pair = pair!(format!("locals {ty}"), |B| any_ty!(
        ty,
        |T| local_fn::<B, T>(rd)
    ));
    let v = values(ty);
    for w in v.windows(3) {
        pair.check(
            &[w[0], w[1], w[2]],
            &[ty, ty, ty, Ty::I],
            &[w[0], w[1], w[2], 0x5a5a],
            &(ty, w),
        );
    }
}

// ---------------------------------------------------------------------------
// Returns
// ---------------------------------------------------------------------------

/// `T f(u64 *ctl) { return *(T *)ctl; }` with the value in register `n`,
/// through a return that ends the body or a jump to the epilogue.
pub fn ret_fn<B: Backend, T: Type>(n: u8, early: bool) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let ctl = begin(&mut f, &[reg_of::<T>(n)], Leaf::Yes);
    f.ld(r::<T>(n), ctl, 0);
    if early {
        let skip = f.genlabel();
        f.ret(r::<T>(n));
        f.label(skip);
        f.ret(r::<T>(n));
    } else {
        f.ret(r::<T>(n));
    }
    f.end()
}

fn ret_of(ty: Ty) {
    if ty == Ty::V {
        for early in [false, true] {
            let pair = pair!(format!("retv early={early}"), |B| {
                let mut f = Func::<B>::with_backend();
                let ctl = begin(&mut f, &[], Leaf::Yes);
                let t = f.getreg::<L>(vcode::Class::Temp).unwrap();
                f.set(t, 77);
                f.st(t, ctl, 8 * OUT as i32);
                f.retv();
                if early {
                    f.set(t, 78);
                    f.st(t, ctl, 8 * OUT as i32);
                    f.retv();
                }
                f.end()
            });
            pair.check(&[], &[Ty::L], &[77], &"retv");
            assert_eq!(pair.native.ret_type(), Ty::V);
            assert_eq!(pair.reference.ret_type(), Ty::V);
        }
        return;
    }
    let pool: &[u8] = if ty.is_float() { &FALLOC } else { &ALLOC };
    for (k, &n) in pool.iter().enumerate() {
        let early = k % 2 == 1;
        let pair = pair!(format!("ret {ty} in {n} early={early}"), |B| any_ty!(
            ty,
            |T| ret_fn::<B, T>(n, early)
        ));
        assert_eq!(pair.native.ret_type(), ty);
        for v in values(ty) {
            let mut ctl = [SENTINEL; CTL];
            ctl[0] = v;
            for native in [true, false] {
                let (got, _) = pair.run_one(native, &ctl);
                let got = got.unwrap_or_else(|e| panic!("{}: {e}", pair.what));
                assert!(
                    got.same(Value::from_bits(ty, v)),
                    "{}: native={native}: {got:?} vs {v:#x}",
                    pair.what
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Jumps and jal
// ---------------------------------------------------------------------------

/// `i64 f(i64 x)`: x + 1, for jumps to registers and addresses (a tail
/// jump: the target returns straight to our caller).
fn plus1_native() -> Code {
    let mut f = Func::<Native>::with_backend();
    let p = f.lambda("%l", Leaf::Yes).unwrap();
    let x = p.get::<L>(0).unwrap();
    f.add(x, x, 1);
    f.ret(x);
    f.end().unwrap()
}

fn jumps(t: Tgt) {
    match t {
        Tgt::Label => {
            // Forward and backward jumps, short (rel8) and long (rel32).
            for pad in [0usize, 200] {
                let pair = pair!(format!("jmp label pad={pad}"), |B| {
                    let mut f = Func::<B>::with_backend();
                    let ctl = begin(&mut f, &[], Leaf::Yes);
                    let x = f.getreg::<L>(vcode::Class::Temp).unwrap();
                    let (fwd, back, out) = (f.genlabel(), f.genlabel(), f.genlabel());
                    f.set(x, 1);
                    f.jmp(fwd);
                    f.set(x, 100); // skipped
                    for _ in 0..pad {
                        f.nop();
                    }
                    f.label(back);
                    f.add(x, x, 10);
                    f.jmp(out);
                    f.label(fwd);
                    f.add(x, x, 2);
                    for _ in 0..pad {
                        f.nop();
                    }
                    f.jmp(back);
                    f.label(out);
                    f.st(x, ctl, 8 * OUT as i32);
                    f.retv();
                    f.end()
                });
                pair.check(&[], &[Ty::L], &[13], &pad);
            }
        }
        Tgt::Reg | Tgt::Addr => {
            let target = plus1_native();
            let mut f = Func::<Native>::with_backend();
            let p = f.lambda("%l", Leaf::Yes).unwrap();
            let x = p.get::<L>(0).unwrap();
            f.add(x, x, 10);
            if t == Tgt::Reg {
                let a = f.getreg::<P>(vcode::Class::Temp).unwrap();
                f.set(a, Arch::addr(&target));
                f.jmp(a);
            } else {
                f.jmp(Arch::addr(&target));
            }
            // Not reached: gives the function its return type.
            f.ret(x);
            let code = f.end().unwrap();
            check_decodes(&code, "jmp");
            for v in [0, -11, i64::MAX - 11, 0x1234_5678_9abc_def0] {
                // SAFETY: jumps with x + 10 in the argument register to
                // `target`, which returns x + 11.
                let got = unsafe { Arch::run(&code, &[Value::L(v)]) };
                assert_eq!(got, Ok(Value::L(v + 11)), "{}", Arch::listing(&code));
            }
            // The reference backend cannot jump into native code: a typed fault.
            let mut f = Func::<Reference>::with_backend();
            let p = f.lambda("%l", Leaf::Yes).unwrap();
            let x = p.get::<L>(0).unwrap();
            if t == Tgt::Reg {
                let a = f.getreg::<P>(vcode::Class::Temp).unwrap();
                f.set(a, Arch::addr(&target));
                f.jmp(a);
            } else {
                f.jmp(Arch::addr(&target));
            }
            f.ret(x);
            let rc = f.end().unwrap();
            // SAFETY: the reference backend refuses the jump before making it.
            let e = unsafe { rc.invoke(&[Value::L(1)]) }.unwrap_err();
            let at = if t == Tgt::Reg { 1 } else { 0 };
            assert!(
                matches!(e, InvokeError::Fault(Fault { kind: FaultKind::Unsupported(_), index, method: "jmp" }) if index == at),
                "{e:?}"
            );
        }
    }
}

/// What [`Callees::bump`] counts.
pub static JAL_COUNT: AtomicU64 = AtomicU64::new(0);

fn jals(t: Tgt) {
    match t {
        Tgt::Label => {
            // A subroutine entered twice with jal and left with ret_link,
            // placed after the call sites and before them.
            let pair = pair!("jal label", |B| {
                let mut f = Func::<B>::with_backend();
                let ctl = begin(&mut f, &[], Leaf::No);
                let x = f.getreg::<L>(vcode::Class::Persistent).unwrap();
                let (sub, sub2, main) = (f.genlabel(), f.genlabel(), f.genlabel());
                f.jmp(main);
                f.label(sub2);
                f.mul(x, x, 3);
                f.ret_link();
                f.label(main);
                f.ld(x, ctl, 0);
                f.jal(sub);
                f.jal(sub);
                f.jal(sub2);
                f.st(x, ctl, 8 * OUT as i32);
                f.retv();
                f.label(sub);
                f.add(x, x, 5);
                f.ret_link();
                f.end()
            });
            for v in [0u64, 1, -20i64 as u64, 0x1234_5678_9abc_def0] {
                pair.check(&[v], &[Ty::L], &[v.wrapping_add(10).wrapping_mul(3)], &v);
            }
        }
        Tgt::Reg | Tgt::Addr => {
            let pair = pair!(format!("jal {t:?}"), |B| {
                let mut f = Func::<B>::with_backend();
                let ctl0 = begin(&mut f, &[], Leaf::No);
                // ctl arrives in a temporary: keep it where calls leave it.
                let ctl = f.getreg::<P>(vcode::Class::Persistent).unwrap();
                f.mov(ctl, ctl0);
                let s = f.getreg::<L>(vcode::Class::Persistent).unwrap();
                f.ld(s, ctl, 0);
                if t == Tgt::Reg {
                    let a = f.getreg::<P>(vcode::Class::Persistent).unwrap();
                    f.set(a, Arch::bump());
                    f.jal(a);
                    f.jal(a);
                } else {
                    f.jal(Arch::bump());
                    f.jal(Arch::bump());
                }
                // Persistent registers survive the calls.
                f.st(s, ctl, 8 * OUT as i32);
                f.retv();
                f.end()
            });
            for native in [true, false] {
                let before = JAL_COUNT.load(Ordering::SeqCst);
                let mut ctl = [SENTINEL; CTL];
                ctl[0] = 0x1234_5678_9abc_def0;
                let (v, out) = pair.run_one(native, &ctl);
                assert_eq!(v, Ok(Value::V));
                assert_eq!(out[OUT], 0x1234_5678_9abc_def0);
                assert!(
                    JAL_COUNT.load(Ordering::SeqCst) >= before + 2,
                    "native={native}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Branches
// ---------------------------------------------------------------------------

fn emit_branch<B: Backend, T: Type>(
    f: &mut Func<B>,
    c: Cond,
    a: Reg<T>,
    b: Operand<T>,
    l: vcode::Label,
) {
    match c {
        Cond::Lt => f.blt(a, b, l),
        Cond::Le => f.ble(a, b, l),
        Cond::Gt => f.bgt(a, b, l),
        Cond::Ge => f.bge(a, b, l),
        Cond::Eq => f.beq(a, b, l),
        Cond::Ne => f.bne(a, b, l),
    }
}

/// Stores 1 at OUT if `a c b` branches, else 0; `back`: the target comes
/// before the branch; `pad` nops between branch and target force rel32.
fn br_fn<B: Backend, T: Type>(
    c: Cond,
    a: u8,
    b: Result<u8, i64>,
    back: bool,
    pad: usize,
) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let out = ALLOC[10];
    let mut busy = vec![reg_of::<T>(a), (false, out)];
    if let Ok(b) = b {
        busy.push(reg_of::<T>(b));
    }
    let ctl = begin(&mut f, &busy, Leaf::Yes);
    let o = r::<L>(out);
    f.ld(r::<T>(a), ctl, 0);
    let bo: Operand<T> = match b {
        Ok(n) => {
            f.ld(r::<T>(n), ctl, 8);
            Operand::Reg(r(n))
        }
        Err(v) => Operand::Imm(v),
    };
    let (taken, test) = (f.genlabel(), f.genlabel());
    if back {
        f.jmp(test);
        f.label(taken);
        f.set(o, 1);
        f.st(o, ctl, 8 * OUT as i32);
        f.retv();
        for _ in 0..pad {
            f.nop();
        }
        f.label(test);
        emit_branch(&mut f, c, r::<T>(a), bo, taken);
        f.set(o, 0);
        f.st(o, ctl, 8 * OUT as i32);
        f.retv();
    } else {
        emit_branch(&mut f, c, r::<T>(a), bo, taken);
        f.set(o, 0);
        f.st(o, ctl, 8 * OUT as i32);
        f.retv();
        for _ in 0..pad {
            f.nop();
        }
        f.label(taken);
        f.set(o, 1);
        f.st(o, ctl, 8 * OUT as i32);
        f.retv();
    }
    f.end()
}

fn branches(c: Cond, ty: Ty) {
    let vals = values(ty);
    let pool: &[u8] = if ty.is_float() { &FALLOC } else { &ALLOC };
    for (back, pad) in [(false, 0), (true, 0), (false, 150), (true, 150)] {
        for (a, b) in [(pool[1], pool[6]), (pool[6], pool[6])] {
            let what = format!("{c:?} {ty} back={back} pad={pad} a={a} b={b}");
            let pair = pair!(what, |B| any_ty!(ty, |T| br_fn::<B, T>(
                c,
                a,
                Ok(b),
                back,
                pad
            )));
            for &x in &vals {
                for &y in &vals {
                    if a == b && x != y {
                        continue;
                    }
                    pair.check(
                        &[x, y],
                        &[Ty::L],
                        &[c_compare(c, ty, x, y) as u64],
                        &(c, ty, x, y),
                    );
                }
            }
        }
        if ty.is_float() {
            continue;
        }
        for &imm in EDGE {
            let imm = imm as i64;
            let what = format!("{c:?} {ty} imm {imm:#x} back={back} pad={pad}");
            let pair = pair!(what, |B| int_ty!(ty, |T| br_fn::<B, T>(
                c,
                ALLOC[8],
                Err(imm),
                back,
                pad
            )));
            for &x in &vals {
                pair.check(
                    &[x],
                    &[Ty::L],
                    &[c_compare(c, ty, x, imm_bits(ty, imm)) as u64],
                    &(c, ty, x, imm),
                );
            }
        }
    }
    if ty.is_float() {
        // No immediate form for floats: a typed error.
        let e = float_ty!(ty, |T| br_fn::<Native, T>(c, FALLOC[0], Err(1), false, 0))
            .expect_err("float imm branch");
        assert!(matches!(e.kind(), ErrorKind::UnsupportedType { .. }), "{e}");
        let e = float_ty!(ty, |T| br_fn::<Reference, T>(
            c,
            FALLOC[0],
            Err(1),
            false,
            0
        ))
        .expect_err("float imm branch");
        assert!(matches!(e.kind(), ErrorKind::UnsupportedType { .. }), "{e}");
    }
}

// ---------------------------------------------------------------------------
// nop
// ---------------------------------------------------------------------------

fn nops() {
    let pair = pair!("nop", |B| {
        let mut f = Func::<B>::with_backend();
        let ctl = begin(&mut f, &[], Leaf::Yes);
        let x = f.getreg::<L>(vcode::Class::Temp).unwrap();
        f.ld(x, ctl, 0);
        for _ in 0..5 {
            f.nop();
        }
        f.st(x, ctl, 8 * OUT as i32);
        f.retv();
        f.end()
    });
    pair.check(&[42], &[Ty::L], &[42], &"nop");
    let nops = Arch::nops(&pair.native);
    assert!(nops >= 5, "{}", Arch::listing(&pair.native));
}

// ---------------------------------------------------------------------------
// Extensions
// ---------------------------------------------------------------------------

fn ext_fn<B: Backend, T: Type>(e: Ext, regs: &[u8]) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let busy: Vec<(bool, u8)> = regs.iter().map(|&n| reg_of::<T>(n)).collect();
    let ctl = begin(&mut f, &busy, Leaf::Yes);
    // Load sources (slots 0..) in order: later loads win where registers alias.
    for (i, &n) in regs[1..].iter().enumerate() {
        f.ld(r::<T>(n), ctl, 8 * i as i32);
    }
    let g = |i: usize| regs[i];
    match e {
        Ext::Sqrt => float_ty!(T::TY, |X| f.sqrt(r::<X>(g(0)), r::<X>(g(1)))),
        Ext::Min => f.min(r::<T>(g(0)), r::<T>(g(1)), r::<T>(g(2))),
        Ext::Max => f.max(r::<T>(g(0)), r::<T>(g(1)), r::<T>(g(2))),
        Ext::Bswap16 => int_ty!(T::TY, |X| f.bswap16(r::<X>(g(0)), r::<X>(g(1)))),
        Ext::Bswap32 => int_ty!(T::TY, |X| f.bswap32(r::<X>(g(0)), r::<X>(g(1)))),
        Ext::Bswap64 => int_ty!(T::TY, |X| f.bswap64(r::<X>(g(0)), r::<X>(g(1)))),
        Ext::Popcount => int_ty!(T::TY, |X| f.popcount(r::<X>(g(0)), r::<X>(g(1)))),
        Ext::Select => int_ty!(T::TY, |X| f.select(
            r::<X>(g(0)),
            r::<X>(g(1)),
            r::<X>(g(2)),
            r::<X>(g(3))
        )),
        Ext::Add1c => int_ty!(T::TY, |X| f.add1c(r::<X>(g(0)), r::<X>(g(1)), r::<X>(g(2)))),
    }
    f.st(r::<T>(g(0)), ctl, 8 * OUT as i32);
    f.retv();
    f.end()
}

fn c_ext(e: Ext, ty: Ty, s: &[u64]) -> u64 {
    match e {
        Ext::Sqrt => {
            if ty == Ty::F {
                f32::from_bits(s[0] as u32).sqrt().to_bits() as u64
            } else {
                f64::from_bits(s[0]).sqrt().to_bits()
            }
        }
        Ext::Bswap16 => (s[0] as u16).swap_bytes() as u64,
        Ext::Bswap32 => (s[0] as u32).swap_bytes() as u64,
        Ext::Bswap64 => s[0].swap_bytes(),
        Ext::Popcount => norm(ty, s[0]).count_ones() as u64,
        Ext::Select => {
            if norm(ty, s[0]) != 0 {
                s[1]
            } else {
                s[2]
            }
        }
        Ext::Min | Ext::Max => {
            let lt = if e == Ext::Min {
                c_compare(Cond::Lt, ty, s[0], s[1])
            } else {
                c_compare(Cond::Gt, ty, s[0], s[1])
            };
            if lt { s[0] } else { s[1] }
        }
        Ext::Add1c => {
            if ty == Ty::U {
                let (v, c) = (s[0] as u32).overflowing_add(s[1] as u32);
                v.wrapping_add(c as u32) as u64
            } else {
                let (v, c) = s[0].overflowing_add(s[1]);
                v.wrapping_add(c as u64)
            }
        }
    }
}

fn extension(e: Ext, ty: Ty) {
    let nsrc = match e {
        Ext::Select => 3,
        Ext::Min | Ext::Max | Ext::Add1c => 2,
        _ => 1,
    };
    let pool: &[u8] = if ty.is_float() { &FALLOC } else { &ALLOC };
    // Aliasing patterns: every way of sharing registers among rd and the
    // sources (the set partitions of the operands, as restricted growth
    // strings: 2, 5 or 15 patterns).
    let mut patterns: Vec<Vec<usize>> = vec![vec![0]];
    for _ in 0..nsrc {
        patterns = patterns
            .into_iter()
            .flat_map(|p| {
                let top = *p.iter().max().unwrap();
                (0..=top + 1).map(move |k| {
                    let mut q = p.clone();
                    q.push(k);
                    q
                })
            })
            .collect();
    }
    let vals = values(ty);
    for (k, pat) in patterns.iter().enumerate() {
        let regs: Vec<u8> = pat
            .iter()
            .map(|&i| pool[(i + 2 * k + 3) % pool.len()])
            .collect();
        let what = format!("{e:?} {ty} regs {regs:?}");
        let pair = pair!(what, |B| any_ty!(ty, |T| ext_fn::<B, T>(e, &regs)));
        // Inputs: what the sources hold after the loads (aliases share).
        let run = |ins: &[u64]| {
            let mut held = std::collections::HashMap::new();
            for (i, &n) in regs[1..].iter().enumerate() {
                held.insert(n, ins[i]);
            }
            let srcs: Vec<u64> = regs[1..].iter().map(|n| held[n]).collect();
            pair.check(ins, &[ty], &[c_ext(e, ty, &srcs)], &(e, ty, ins));
        };
        for (i, &a) in vals.iter().enumerate() {
            match nsrc {
                1 => run(&[a]),
                2 => {
                    for &b in &vals {
                        run(&[a, b]);
                    }
                }
                _ => {
                    for c in [0, 1, a] {
                        run(&[c, a, vals[(i + 5) % vals.len()]]);
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Register sweeps: every allocatable register in every role
// ---------------------------------------------------------------------------

/// Every binary operation with (rd, a, b) over all ordered pairs of
/// allocatable integer registers (the third register varying), in one
/// function per register triple.
#[test]
fn binary_ops_in_every_register_pair() {
    for ty in [Ty::I, Ty::L] {
        for (i, &x) in ALLOC.iter().enumerate() {
            for (j, &y) in ALLOC.iter().enumerate() {
                let z = ALLOC[(i + j + 1..)
                    .map(|k| k % 11)
                    .find(|&k| ALLOC[k] != x && ALLOC[k] != y)
                    .unwrap()];
                for (rd, a, b) in [(x, y, z), (x, z, y), (z, x, y)] {
                    let what = format!("sweep {ty} rd={rd} a={a} b={b}");
                    let pair = pair!(what, |B| int_ty!(ty, |T| {
                        let mut f = Func::<B>::with_backend();
                        let ctl = begin(&mut f, &[(false, rd), (false, a), (false, b)], Leaf::Yes);
                        for (k, op) in INT_OPS.iter().enumerate() {
                            f.ld(r::<T>(a), ctl, 0);
                            f.ld(r::<T>(b), ctl, 8);
                            emit_int(&mut f, *op, r::<T>(rd), r::<T>(a), Operand::Reg(r(b)));
                            f.st(r::<T>(rd), ctl, 8 * (OUT + k) as i32);
                            // The immediate form, with a long immediate.
                            f.ld(r::<T>(a), ctl, 0);
                            emit_int(
                                &mut f,
                                *op,
                                r::<T>(rd),
                                r::<T>(a),
                                Operand::Imm(0x1234_5678_9abc_def1),
                            );
                            f.st(r::<T>(rd), ctl, 8 * (OUT + 10 + k) as i32);
                        }
                        f.retv();
                        f.end()
                    }));
                    for (va, vb) in [
                        (0x1234_5678_9abc_def0u64, 0x13u64),
                        (-5i64 as u64, 3),
                        (0x8000_0000_0000_0001, -3i64 as u64),
                    ] {
                        let (va, vb) = (norm(ty, va), norm(ty, vb));
                        // Where a and b share a register, b's load wins.
                        let ea = if a == b { vb } else { va };
                        let mut expect: Vec<u64> = INT_OPS
                            .iter()
                            .map(|&op| c_int(op, ty, ea, vb).unwrap())
                            .collect();
                        let imm = imm_bits(ty, 0x1234_5678_9abc_def1);
                        expect.extend(INT_OPS.iter().map(|&op| c_int(op, ty, va, imm).unwrap()));
                        pair.check(&[va, vb], &[ty; 20], &expect, &(va, vb));
                    }
                }
            }
        }
    }
}

/// Float operations over all ordered pairs of float registers.
#[test]
fn float_ops_in_every_register_pair() {
    for ty in [Ty::F, Ty::D] {
        for (i, &x) in FALLOC.iter().enumerate() {
            for (j, &y) in FALLOC.iter().enumerate() {
                let z = FALLOC[(i + j + 1..)
                    .map(|k| k % 15)
                    .find(|&k| FALLOC[k] != x && FALLOC[k] != y)
                    .unwrap()];
                for (rd, a, b) in [(x, y, z), (x, z, y)] {
                    let what = format!("fsweep {ty} rd={rd} a={a} b={b}");
                    let ops = [Op::Add, Op::Sub, Op::Mul, Op::Div];
                    let pair = pair!(what, |B| float_ty!(ty, |T| {
                        let mut f = Func::<B>::with_backend();
                        let ctl = begin(&mut f, &[(true, rd), (true, a), (true, b)], Leaf::Yes);
                        for (k, op) in ops.iter().enumerate() {
                            f.ld(r::<T>(a), ctl, 0);
                            f.ld(r::<T>(b), ctl, 8);
                            emit_float(&mut f, *op, r::<T>(rd), r::<T>(a), r::<T>(b));
                            f.st(r::<T>(rd), ctl, 8 * (OUT + k) as i32);
                        }
                        f.ld(r::<T>(a), ctl, 0);
                        f.neg(r::<T>(rd), r::<T>(a));
                        f.st(r::<T>(rd), ctl, 8 * (OUT + 4) as i32);
                        f.retv();
                        f.end()
                    }));
                    let (va, vb) = if ty == Ty::F {
                        (1.75f32.to_bits() as u64, (-0.5f32).to_bits() as u64)
                    } else {
                        (1.75f64.to_bits(), (-0.5f64).to_bits())
                    };
                    let ea = if a == b { vb } else { va };
                    let mut expect: Vec<u64> =
                        ops.iter().map(|&op| c_float(op, ty, ea, vb)).collect();
                    expect.push(c_un(Un::Neg, ty, va));
                    pair.check(&[va, vb], &[ty; 5], &expect, &(va, vb));
                }
            }
        }
    }
}

/// Loads and stores of every width with the base in every allocatable
/// register, the offset register in every other one, and the value
/// register varying (so it also equals the base or the offset).
#[test]
fn loads_and_stores_with_every_base_and_index_register() {
    let widths: [(Width, Ty); 9] = [
        (Width::C, Ty::L),
        (Width::UC, Ty::L),
        (Width::S, Ty::L),
        (Width::US, Ty::L),
        (Width::Full, Ty::I),
        (Width::Full, Ty::L),
        (Width::C, Ty::I),
        (Width::S, Ty::U),
        (Width::UC, Ty::UL),
    ];
    for (i, &base) in ALLOC.iter().enumerate() {
        for (j, &idx) in ALLOC.iter().enumerate() {
            let rd = ALLOC[(i + 2 * j) % 11];
            let xd = FALLOC[(i + j) % 15];
            let what = format!("ldst base={base} idx={idx} rd={rd}");
            // Slot 0: base, slot 1: offset (0 when idx == base), slot 2: store value.
            let pair = pair!(what, |B| {
                let mut f = Func::<B>::with_backend();
                let ctl = begin(
                    &mut f,
                    &[(false, base), (false, idx), (false, rd), (true, xd)],
                    Leaf::Yes,
                );
                let (b, o) = (r::<P>(base), r::<P>(idx));
                let mut k = 0;
                for &(w, ty) in &widths {
                    for disp in [None, Some(0), Some(100), Some(1000)] {
                        f.ld(b, ctl, 0);
                        f.ld(o, ctl, 8);
                        let off: Operand<P> = match disp {
                            None => Operand::Reg(o),
                            Some(d) => Operand::Imm(d),
                        };
                        int_ty!(ty, |T| {
                            emit_load(&mut f, w, r::<T>(rd), b, off);
                            f.st(r::<T>(rd), ctl, 8 * (OUT + k) as i32);
                        });
                        k += 1;
                    }
                }
                // Float loads and stores with the same addressing.
                f.ld(b, ctl, 0);
                f.ld(o, ctl, 8);
                f.ld(r::<D>(xd), b, o);
                f.st(r::<D>(xd), ctl, 8 * (OUT + k) as i32);
                f.ld(r::<F>(xd), b, 4);
                f.st(r::<F>(xd), ctl, 8 * (OUT + k + 1) as i32);
                // Stores: value from slot 2 (if rd is not an address register).
                if rd != base && rd != idx {
                    f.ld(r::<L>(rd), ctl, 16);
                    f.stc(r::<L>(rd), b, 1000);
                    f.sts(r::<L>(rd), b, 100);
                    f.st(r::<I>(rd), b, o);
                    f.ld(r::<D>(xd), ctl, 16);
                    f.st(r::<D>(xd), b, 8);
                }
                f.retv();
                f.end()
            });
            // Memory: base + 1008 stays inside the buffer.
            let mut mem = vec![0u8; 2048];
            for (n, b) in mem.iter_mut().enumerate() {
                *b = (n as u8).wrapping_mul(0x35).wrapping_add(0x81);
            }
            let mem0 = mem.clone();
            let addr = mem.as_ptr() as usize;
            let start = addr;
            let (vbase, voff) = (start as u64, 24u64);
            let reg_addr = start + 24;
            let disp_base = vbase as usize;
            let bytes_at = |a: usize| &mem0[a - addr..];
            // When base == idx the register-offset forms read base + base:
            // covered by `loads_with_base_equal_to_index`.
            if base == idx {
                continue;
            }
            let mut expect = Vec::new();
            let mut tys = Vec::new();
            for &(w, ty) in &widths {
                for disp in [None, Some(0usize), Some(100), Some(1000)] {
                    let at = match disp {
                        None => reg_addr,
                        Some(d) => disp_base + d,
                    };
                    expect.push(c_load(mem_ty(w, ty), ty, bytes_at(at)));
                    tys.push(ty);
                }
            }
            expect.push(c_load(Ty::D, Ty::D, bytes_at(reg_addr)));
            tys.push(Ty::D);
            expect.push(c_load(Ty::F, Ty::F, bytes_at(disp_base + 4)));
            tys.push(Ty::F);
            let val = 0x0123_4567_89ab_cdefu64;
            let mut want = mem0.clone();
            if rd != base && rd != idx {
                let put = |want: &mut Vec<u8>, at: usize, n: usize, v: u64| {
                    want[at - addr..at - addr + n].copy_from_slice(&v.to_le_bytes()[..n]);
                };
                put(&mut want, disp_base + 1000, 1, val);
                put(&mut want, disp_base + 100, 2, val);
                put(&mut want, reg_addr, 4, val);
                put(&mut want, disp_base + 8, 8, val);
            }
            for native in [true, false] {
                mem.copy_from_slice(&mem0);
                let mut ctl = [SENTINEL; CTL];
                ctl[..3].copy_from_slice(&[vbase, voff, val]);
                let (res, out) = pair.run_one(native, &ctl);
                assert_eq!(res, Ok(Value::V), "{}", pair.what);
                for (k, (&e, &t)) in expect.iter().zip(&tys).enumerate() {
                    assert!(
                        same(
                            t,
                            if t.size() == 4 {
                                out[OUT + k] & 0xffff_ffff
                            } else {
                                out[OUT + k]
                            },
                            e
                        ),
                        "{}: native={native} load {k}: {:#x} vs {e:#x}",
                        pair.what,
                        out[OUT + k]
                    );
                }
                assert!(mem == want, "{}: native={native}: stores differ", pair.what);
            }
        }
    }
}

/// A base register equal to the offset register (`[r + r]`), in each register.
#[test]
fn loads_with_base_equal_to_index() {
    let mem: Vec<u64> = (0..64u64)
        .map(|i| i.wrapping_mul(0x0101_0101_0101_0101) ^ 0x8080)
        .collect();
    for &n in &ALLOC {
        let pair = pair!(format!("ld [r+r] r={n}"), |B| {
            let mut f = Func::<B>::with_backend();
            let ctl = begin(&mut f, &[(false, n)], Leaf::Yes);
            let x = r::<P>(n);
            f.ld(x, ctl, 0);
            f.ld(r::<L>(n), x, x);
            f.st(r::<L>(n), ctl, 8 * OUT as i32);
            f.retv();
            f.end()
        });
        // An address a with a + a inside `mem`, 8-aligned.
        let target = mem.as_ptr() as usize + 8 * 20;
        if !target.is_multiple_of(2) {
            continue;
        }
        let half = (target / 2) as u64;
        pair.check(&[half], &[Ty::L], &[mem[20]], &n);
    }
}

// ---------------------------------------------------------------------------
// Bugs these tests found, pinned
// ---------------------------------------------------------------------------

/// `sub` of the immediate `INT_MIN` into another 64-bit register was
/// emitted as `lea rd, [a - 2^31]` (the negated displacement wrapped), so
/// it subtracted 2^31 instead of adding it.
#[test]
fn bug_sub_long_int_min_immediate_three_address() {
    let pair = pair!("sub l INT_MIN", |B| bin_fn::<B, L>(
        Op::Sub,
        ALLOC[0],
        ALLOC[1],
        Err(i32::MIN as i64)
    ));
    pair.check(&[0, 0], &[Ty::L], &[0x8000_0000], &"0 - INT_MIN");
    pair.check(&[5, 0], &[Ty::L], &[0x8000_0005], &"5 - INT_MIN");
}

/// The portable `popcount` (what the reference backend runs) cleared `rd`
/// with `xor rd, rd, rd`, a read of `rd` before any write, which the
/// reference backend rightly rejects.
#[test]
fn bug_portable_popcount_reads_rd_before_writing_it() {
    let pair = pair!("popcount", |B| ext_fn::<B, UL>(
        Ext::Popcount,
        &[ALLOC[0], ALLOC[1]]
    ));
    pair.check(&[0xf0f0], &[Ty::UL], &[8], &"popcount");
}

/// `cv` from `u` to a 64-bit type in place (`rd` and `rs` the same
/// register, as with the fixed names `Reg::<U>::t(0)` and
/// `Reg::<L>::t(0)`) must zero-extend even when the register's upper half
/// holds bits from an earlier 64-bit use.
#[test]
fn bug_cv_u_to_l_in_place_zero_extends() {
    let pair = pair!("cv in place", |B| {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%l", Leaf::Yes).unwrap();
        let x = p.get::<L>(0).unwrap();
        let (wide, narrow) = (Reg::<L>::t(0), Reg::<U>::t(0));
        let wide_ul = Reg::<UL>::t(0);
        f.mov(wide, x);
        f.cv(narrow, wide); // truncate in place
        f.cv(wide_ul, narrow); // zero-extend in place
        f.ret(wide_ul);
        f.end()
    });
    for v in [0x1234_5678_9abc_def0u64, u64::MAX, 0xffff_ffff_0000_0001] {
        for native in [true, false] {
            // SAFETY: pure register arithmetic.
            let got = unsafe {
                if native {
                    Arch::run(&pair.native, &[Value::L(v as i64)])
                } else {
                    pair.reference.invoke(&[Value::L(v as i64)])
                }
            };
            assert_eq!(
                got,
                Ok(Value::UL(v & 0xffff_ffff)),
                "native={native} v={v:#x}\n{}",
                Arch::listing(&pair.native)
            );
        }
    }
}

/// A regression: `getreg` once handed out `r10`, the register of the fixed name
/// `T0`, although the function had written `T0`, so `g` and `T0` were one
/// register and the program returned 14. A fixed name the function has
/// used is never handed out by `getreg` (unless released to it), on both
/// backends alike.
#[test]
fn bug_getreg_hands_out_a_fixed_name_in_use() {
    fn build<B: Backend>() -> (vcode::Result<B::Code>, u8) {
        let mut f = Func::<B>::with_backend();
        f.lambda("", Leaf::Yes).unwrap();
        let t0 = Reg::<I>::t(0);
        f.set(t0, 5);
        let g = f.getreg::<I>(vcode::Class::Temp).unwrap();
        f.set(g, 7);
        f.add(g, g, t0);
        f.ret(g);
        (f.end(), g.num())
    }
    let (native, gn) = build::<Native>();
    let (reference, gr) = build::<Reference>();
    assert_ne!(gn, Reg::<I>::t(0).num(), "getreg handed out T0 natively");
    assert_eq!(gn, gr, "the backends allocate alike");
    let (native, reference) = (native.unwrap(), reference.unwrap());
    check_decodes(&native, "getreg after T0");
    for got in [
        // SAFETY: pure register arithmetic, no arguments.
        unsafe { Arch::run(&native, &[]) },
        // SAFETY: as above.
        unsafe { reference.invoke(&[]) },
    ] {
        assert_eq!(got, Ok(Value::I(12)), "{}", Arch::listing(&native));
    }
    // Released to getreg, the name is handed out again.
    let mut f = Func::<Native>::with_backend();
    f.lambda("", Leaf::Yes).unwrap();
    let t0 = f.reserve(Reg::<I>::t(0)).unwrap();
    f.set(t0, 5);
    f.putreg(t0);
    assert_eq!(f.getreg::<I>(vcode::Class::Temp).unwrap(), t0);
}

/// `a + 2b + ... + 9i`: what [`Callees::nine_args`] computes (`extern "C"`
/// so that the x86-64 binary can give this very function).
#[allow(clippy::too_many_arguments)]
pub extern "C" fn nine_args_model(
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

/// A subroutine entered by `jal` to a label ran with rsp 8 bytes off the
/// ABI's alignment (calls from it crashed in callees that rely on it), and
/// the stack arguments of a call from it overwrote its return address.
#[test]
fn bug_calls_from_a_jal_subroutine() {
    let pair = pair!("jal subroutine calls", |B| {
        let mut f = Func::<B>::with_backend();
        let ctl0 = begin(&mut f, &[], Leaf::No);
        let ctl = f.getreg::<P>(vcode::Class::Persistent).unwrap();
        f.mov(ctl, ctl0);
        let s = f.getreg::<L>(vcode::Class::Persistent).unwrap();
        let sub = f.genlabel();
        f.jal(sub);
        f.retv();
        f.label(sub);
        f.call(s, vcode::Callee::Native(Arch::stack_misalignment()), &[]);
        f.st(s, ctl, 8 * OUT as i32);
        let args: Vec<vcode::Arg> = (1..=9).map(|k| vcode::Arg::Imm(Ty::L, k)).collect();
        f.call(s, vcode::Callee::Native(Arch::nine_args()), &args);
        f.st(s, ctl, 8 * (OUT + 1) as i32);
        // Calls from the body are aligned too.
        f.ret_link();
        f.end()
    });
    pair.check(
        &[],
        &[Ty::L, Ty::L],
        &[0, nine_args_model(1, 2, 3, 4, 5, 6, 7, 8, 9) as u64],
        &"jal",
    );
}

/// The arguments of [`Callees::floats_and_ints`] (eleven, the `i` among
/// ten floats: the last go on the stack) weighted by their positions
/// (`extern "C"` so that the x86-64 binary can give this very function).
#[allow(clippy::too_many_arguments)]
pub extern "C" fn floats_and_ints_model(
    a: f32,
    b: f64,
    c: i32,
    d: f64,
    e: f64,
    f: f64,
    g: f64,
    h: f64,
    i: f32,
    j: f64,
    k: f32,
) -> f64 {
    a as f64
        + 2.0 * b
        + 3.0 * c as f64
        + 4.0 * d
        + 5.0 * e
        + 6.0 * f
        + 7.0 * g
        + 8.0 * h
        + 9.0 * i as f64
        + 10.0 * j
        + 11.0 * k as f64
}

/// A float immediate argument (`Arg::Imm(Ty::F | Ty::D, bits)`) passed in
/// a register was written to the integer register of the xmm's number
/// (xmm0: rax, the callee address), so the call jumped to the float's bits.
#[test]
fn bug_float_immediate_call_arguments() {
    let fb = |x: f32| vcode::Arg::Imm(Ty::F, x.to_bits() as i64);
    let db = |x: f64| vcode::Arg::Imm(Ty::D, x.to_bits() as i64);
    let pair = pair!("float imm args", |B| {
        let mut f = Func::<B>::with_backend();
        let ctl0 = begin(&mut f, &[], Leaf::No);
        let ctl = f.getreg::<P>(vcode::Class::Persistent).unwrap();
        f.mov(ctl, ctl0);
        let d = f.getreg::<D>(vcode::Class::Temp).unwrap();
        // Nine float arguments before the int: the last floats go on the stack.
        let args = [
            fb(1.5),
            db(-2.25),
            vcode::Arg::Imm(Ty::I, -3),
            db(4.0),
            db(5.5),
            db(-6.0),
            db(7.0),
            db(8.25),
            fb(9.5),
            db(10.0),
            fb(-11.0),
        ];
        f.call(d, vcode::Callee::Native(Arch::floats_and_ints()), &args);
        f.st(d, ctl, 8 * OUT as i32);
        f.retv();
        f.end()
    });
    let want = floats_and_ints_model(1.5, -2.25, -3, 4.0, 5.5, -6.0, 7.0, 8.25, 9.5, 10.0, -11.0);
    pair.check(&[], &[Ty::D], &[want.to_bits()], &"float imm");
}

/// The paper's portable scheduling interface: `raw_load` is a load and
/// `schedule_delay` emits the delay-slot instruction before the branch
/// (it must not change the branch's operands), on both backends.
#[test]
fn scheduling_hooks() {
    use vcode::ext::Schedule;
    let pair = pair!("schedule", |B| {
        let mut f = Func::<B>::with_backend();
        let ctl = begin(&mut f, &[], Leaf::Yes);
        let (x, y) = (r::<L>(ALLOC[0]), r::<L>(ALLOC[1]));
        f.raw_load(x, ctl, 0, 3);
        f.set(y, 0);
        let skip = f.genlabel();
        f.schedule_delay(|f| f.beq(x, 0, skip), |f| f.add(y, y, 5));
        f.add(y, y, 100);
        f.label(skip);
        f.st(y, ctl, 8 * OUT as i32);
        f.retv();
        f.end()
    });
    pair.check(&[0], &[Ty::L], &[5], &"taken");
    pair.check(&[9], &[Ty::L], &[105], &"not taken");
}

/// A function of about 60,000 instructions: the code buffer grows many
/// times while it is written, and a forward branch and a loop's backward
/// branch span the whole of it.
#[test]
fn large_function_across_buffer_growth() {
    const N: i64 = 20_000;
    let pair = pair!("large", |B| {
        let mut f = Func::<B>::with_backend();
        let ctl = begin(&mut f, &[], Leaf::Yes);
        let (x, c) = (r::<L>(ALLOC[0]), r::<L>(ALLOC[1]));
        f.reserve(x).unwrap();
        f.reserve(c).unwrap();
        let (top, out) = (f.genlabel(), f.genlabel());
        f.ld(x, ctl, 0);
        f.blt(x, 0, out);
        f.set(c, 3);
        f.label(top);
        for i in 0..N {
            f.add(x, x, i);
            f.xor(x, x, i * 0x9e37_79b9);
            f.rsh(x.cast::<UL>(), x.cast::<UL>(), 1);
        }
        f.sub(c, c, 1);
        f.bgt(c, 0, top);
        f.label(out);
        f.st(x, ctl, 8 * OUT as i32);
        f.retv();
        f.end()
    });
    let bytes = Arch::bytes(&pair.native).len();
    assert!(bytes > 300_000, "{bytes} bytes");
    let model = |mut x: i64| {
        if x < 0 {
            return x;
        }
        for _ in 0..3 {
            for i in 0..N {
                x = x.wrapping_add(i);
                x ^= i * 0x9e37_79b9;
                x = ((x as u64) >> 1) as i64;
            }
        }
        x
    };
    for v in [5i64, -5, 0x1234_5678] {
        pair.check(&[v as u64], &[Ty::L], &[model(v) as u64], &v);
    }
}

/// A per-function register classification (paper §5.3): under
/// `RegConfig::all_callee_saved` a function restores every register it
/// touches, so a caller's temporary survives the call; under the default
/// it does not. (Native only: the reference backend treats temporaries as
/// clobbered by any call, which is the contract clients may rely on.)
#[test]
fn register_config_all_callee_saved() {
    let clobber = |cfg: Option<vcode::RegConfig>| {
        let mut f = Func::<Native>::with_backend();
        if let Some(cfg) = cfg {
            f.set_config(cfg);
        }
        f.lambda("", Leaf::Yes).unwrap();
        let mut regs = Vec::new();
        while let Ok(t) = f.getreg::<L>(vcode::Class::Temp) {
            f.set(t, 5);
            regs.push(t);
        }
        while let Ok(t) = f.getreg::<D>(vcode::Class::Temp) {
            f.set(t, 5.0);
        }
        f.retv();
        f.end()
    };
    let run_with = |g: &Code| {
        let mut f = Func::<Native>::with_backend();
        f.lambda("", Leaf::No).unwrap();
        let t = Reg::<L>::t(0);
        let x = Reg::<D>::t(0);
        f.set(t, 77);
        f.set(x, 0.5);
        f.callv(vcode::Callee::Code(g), &[]);
        let y = Reg::<D>::t(1);
        f.cv(y, t);
        f.add(y, y, x);
        f.ret(y);
        let code = f.end().unwrap();
        check_decodes(&code, "config caller");
        // SAFETY: calls `g`, which takes no arguments.
        unsafe { Arch::run(&code, &[]) }.unwrap()
    };
    // getreg's refusal at exhaustion is an answer, not an error of the
    // function: it still ends.
    assert!(clobber(None).is_ok());
    // The same with exactly the registers there are, by name.
    let clobber = |cfg: Option<vcode::RegConfig>| {
        let mut f = Func::<Native>::with_backend();
        if let Some(cfg) = cfg {
            f.set_config(cfg);
        }
        f.lambda("", Leaf::Yes).unwrap();
        for &n in &ALLOC {
            let x = f.reserve(r::<L>(n)).unwrap();
            f.set(x, 5);
        }
        for &n in &FALLOC {
            let x = f.reserve(r::<D>(n)).unwrap();
            f.set(x, 5.0);
        }
        f.retv();
        f.end().unwrap()
    };
    let saving = clobber(Some(vcode::RegConfig::all_callee_saved()));
    check_decodes(&saving, "all callee-saved");
    assert_eq!(run_with(&saving), Value::D(77.5));
    let plain = clobber(None);
    assert_eq!(run_with(&plain), Value::D(10.0));
}

/// Under a RegConfig that makes xmm0 callee-saved, a function returning a
/// float restored xmm0 in its epilogue after the return value was put
/// there, and so returned its caller's xmm0.
#[test]
fn bug_float_return_under_all_callee_saved() {
    let pair = pair!("ret d, all callee-saved", |B| {
        let mut f = Func::<B>::with_backend();
        f.set_config(vcode::RegConfig::all_callee_saved());
        let p = f.lambda("%d%f", Leaf::Yes).unwrap();
        let (x, y) = (p.get::<D>(0).unwrap(), p.get::<F>(1).unwrap());
        let t = f.getreg::<D>(vcode::Class::Temp).unwrap();
        f.cv(t, y);
        f.add(x, x, t); // xmm0 is written, so it is saved and restored
        f.ret(x);
        f.end()
    });
    for native in [true, false] {
        let args = [Value::D(1.25), Value::F(2.5)];
        // SAFETY: pure float arithmetic.
        let got = unsafe {
            if native {
                Arch::run(&pair.native, &args)
            } else {
                pair.reference.invoke(&args)
            }
        };
        assert_eq!(
            got,
            Ok(Value::D(3.75)),
            "native={native}\n{}",
            Arch::listing(&pair.native)
        );
    }
}

// ---------------------------------------------------------------------------
// Up to 32 parameters and arguments of mixed types
// ---------------------------------------------------------------------------

/// The type letters of the mixed signatures: the first `n` of them, cycled,
/// make the signature of `n` parameters (`c` `s` `uc` `us` arrive widened,
/// as `i` and `u`).
pub const MIXED: [&str; 14] = [
    "l", "i", "d", "p", "f", "ul", "u", "c", "s", "uc", "us", "d", "i", "f",
];

/// The signature of `n` mixed parameters.
pub fn mixed_sig(n: usize) -> String {
    (0..n)
        .map(|k| format!("%{}", MIXED[k % MIXED.len()]))
        .collect()
}

/// Argument `k` of type `ty`: distinct, of both signs where the type has
/// them, and integral for the float types (so that converting it to `l`
/// is exact).
pub fn arg_value(ty: Ty, k: usize) -> Value {
    let s = if k % 2 == 1 { -1 } else { 1 };
    match ty {
        Ty::I => Value::I(s * (k as i32 * 37 + 1)),
        Ty::U => Value::U(k as u32 * 101 + 3 + 0x8000_0000),
        Ty::L => Value::L(s as i64 * (k as i64 * 1_000_000_007 + 5)),
        Ty::UL => Value::UL(k as u64 * 0x1_0000_0001 + 9),
        Ty::P => Value::P(0x1000 + k),
        Ty::F => Value::F(k as f32 * 3.0 - 20.0),
        Ty::D => Value::D(k as f64 * -2.0 + 11.0),
        t => panic!("not a parameter type: {t}"),
    }
}

/// `sum (k + 1) * (long) a_k`, wrapping: what the generated callees return.
pub fn weighted(args: &[Value]) -> i64 {
    args.iter().enumerate().fold(0i64, |acc, (k, a)| {
        let v = match *a {
            Value::I(x) => x as i64,
            Value::U(x) => x as i64,
            Value::L(x) => x,
            Value::UL(x) => x as i64,
            Value::P(x) => x as i64,
            Value::F(x) => x as i64,
            Value::D(x) => x as i64,
            Value::V => 0,
        };
        acc.wrapping_add((k as i64 + 1).wrapping_mul(v))
    })
}

/// [`weighted`] of the 32 mixed parameters ([`mixed_sig`]`(32)`), in Rust
/// (`extern "C"` so that the x86-64 binary can call it from generated code;
/// emulated code cannot call it).
// One line per parameter, written alike (hence the identity `* 1` and `as i64` of an `i64`).
#[allow(
    clippy::too_many_arguments,
    clippy::identity_op,
    clippy::unnecessary_cast,
    dead_code
)]
pub extern "C" fn mixed32_model(
    a0: i64,
    a1: i32,
    a2: f64,
    a3: usize,
    a4: f32,
    a5: u64,
    a6: u32,
    a7: i32,
    a8: i32,
    a9: u32,
    a10: u32,
    a11: f64,
    a12: i32,
    a13: f32,
    a14: i64,
    a15: i32,
    a16: f64,
    a17: usize,
    a18: f32,
    a19: u64,
    a20: u32,
    a21: i32,
    a22: i32,
    a23: u32,
    a24: u32,
    a25: f64,
    a26: i32,
    a27: f32,
    a28: i64,
    a29: i32,
    a30: f64,
    a31: usize,
) -> i64 {
    let mut acc = 0i64;
    acc = acc.wrapping_add((0i64 + 1).wrapping_mul(a0 as i64));
    acc = acc.wrapping_add((1i64 + 1).wrapping_mul(a1 as i64));
    acc = acc.wrapping_add((2i64 + 1).wrapping_mul(a2 as i64));
    acc = acc.wrapping_add((3i64 + 1).wrapping_mul(a3 as i64));
    acc = acc.wrapping_add((4i64 + 1).wrapping_mul(a4 as i64));
    acc = acc.wrapping_add((5i64 + 1).wrapping_mul(a5 as i64));
    acc = acc.wrapping_add((6i64 + 1).wrapping_mul(a6 as i64));
    acc = acc.wrapping_add((7i64 + 1).wrapping_mul(a7 as i64));
    acc = acc.wrapping_add((8i64 + 1).wrapping_mul(a8 as i64));
    acc = acc.wrapping_add((9i64 + 1).wrapping_mul(a9 as i64));
    acc = acc.wrapping_add((10i64 + 1).wrapping_mul(a10 as i64));
    acc = acc.wrapping_add((11i64 + 1).wrapping_mul(a11 as i64));
    acc = acc.wrapping_add((12i64 + 1).wrapping_mul(a12 as i64));
    acc = acc.wrapping_add((13i64 + 1).wrapping_mul(a13 as i64));
    acc = acc.wrapping_add((14i64 + 1).wrapping_mul(a14 as i64));
    acc = acc.wrapping_add((15i64 + 1).wrapping_mul(a15 as i64));
    acc = acc.wrapping_add((16i64 + 1).wrapping_mul(a16 as i64));
    acc = acc.wrapping_add((17i64 + 1).wrapping_mul(a17 as i64));
    acc = acc.wrapping_add((18i64 + 1).wrapping_mul(a18 as i64));
    acc = acc.wrapping_add((19i64 + 1).wrapping_mul(a19 as i64));
    acc = acc.wrapping_add((20i64 + 1).wrapping_mul(a20 as i64));
    acc = acc.wrapping_add((21i64 + 1).wrapping_mul(a21 as i64));
    acc = acc.wrapping_add((22i64 + 1).wrapping_mul(a22 as i64));
    acc = acc.wrapping_add((23i64 + 1).wrapping_mul(a23 as i64));
    acc = acc.wrapping_add((24i64 + 1).wrapping_mul(a24 as i64));
    acc = acc.wrapping_add((25i64 + 1).wrapping_mul(a25 as i64));
    acc = acc.wrapping_add((26i64 + 1).wrapping_mul(a26 as i64));
    acc = acc.wrapping_add((27i64 + 1).wrapping_mul(a27 as i64));
    acc = acc.wrapping_add((28i64 + 1).wrapping_mul(a28 as i64));
    acc = acc.wrapping_add((29i64 + 1).wrapping_mul(a29 as i64));
    acc = acc.wrapping_add((30i64 + 1).wrapping_mul(a30 as i64));
    acc = acc.wrapping_add((31i64 + 1).wrapping_mul(a31 as i64));
    acc
}

/// `long f(sig)` returning [`weighted`] of its parameters: each parameter
/// is read from its register or, when `lambda` kept it in its stack slot,
/// loaded through [`Params::local`](vcode::Params::local) into a register
/// freed by an earlier parameter. With 32 integer parameters every integer
/// register holds one at entry, so integer parameters are widened in their
/// own registers (the first becomes the sum) and freed before the floats,
/// which are converted through a freed integer register.
fn weighted_callee<B: Backend>(sig: &str) -> vcode::Result<B::Code> {
    let mut f = Func::<B>::with_backend();
    let p = f.lambda(sig, Leaf::No)?;
    let all = p.all();
    let ints = (0..p.len()).filter(|&k| !all[k].ty.is_float());
    let floats = (0..p.len()).filter(|&k| all[k].ty.is_float());
    // The parameter's value, widened to `l`, times k + 1, in a register.
    let term = |f: &mut Func<B>, k: usize, t: Option<Reg<L>>| -> vcode::Result<Reg<L>> {
        let ty = all[k].ty;
        let out = any_ty!(ty, |T| {
            let r = if p.in_memory(k) {
                let r = f.getreg::<T>(vcode::Class::Temp)?;
                f.ld_local(r, p.local::<T>(k)?);
                r
            } else {
                p.get::<T>(k)?
            };
            // Integers in place; floats into `t`.
            let w = t.unwrap_or(Reg::<L>::phys(r.num()));
            if T::TY != Ty::L {
                f.cv(w, r);
            }
            if t.is_some() {
                f.putreg(r);
            }
            w
        });
        f.mul(out, out, k as i64 + 1);
        Ok(out)
    };
    let mut acc: Option<Reg<L>> = None;
    for k in ints {
        let w = term(&mut f, k, None)?;
        match acc {
            None => acc = Some(w),
            Some(a) => {
                f.add(a, a, w);
                f.putreg(w);
            }
        }
    }
    let acc = match acc {
        Some(a) => a,
        None => {
            let a = f.getreg::<L>(vcode::Class::Temp)?;
            f.set(a, 0);
            a
        }
    };
    let t = f.getreg::<L>(vcode::Class::Temp)?;
    for k in floats {
        term(&mut f, k, Some(t))?;
        f.add(acc, acc, t);
    }
    f.ret(acc);
    f.end()
}

/// Runs `native` and `reference` on `args` and checks that both return `want`.
fn check_both(native: &Code, reference: &RefCode, args: &[Value], want: i64, what: &str) {
    // SAFETY: the functions compute on their arguments, read only the
    // memory the arguments point to, and call only functions of the
    // signature they pass.
    let (n, r) = unsafe { (Arch::run(native, args), reference.invoke(args)) };
    assert_eq!(
        n,
        Ok(Value::L(want)),
        "{what}: native{}\n{}",
        Arch::stop_context(native),
        Arch::listing(native)
    );
    assert_eq!(
        r,
        Ok(Value::L(want)),
        "{what}: reference\n{}",
        reference.listing()
    );
}

/// The signatures the 32-parameter tests run: mixed ones of every length
/// from 1 to 32, and 32 parameters of each type.
fn many_param_sigs() -> Vec<String> {
    let mut sigs: Vec<String> = (1..=32).map(mixed_sig).collect();
    for t in ["i", "l", "p", "f", "d", "c", "us"] {
        sigs.push(format!("%{t}").repeat(32));
    }
    sigs
}

/// The arguments of a signature, by [`arg_value`].
fn args_of(sig: &str) -> Vec<Value> {
    let sig = vcode::Signature::parse(sig).expect("signature");
    sig.params()
        .iter()
        .enumerate()
        .map(|(k, &t)| arg_value(t, k))
        .collect()
}

/// A function of up to 32 parameters of any types: those beyond the
/// registers stay in their incoming stack slots, read through
/// `Params::local`, and every parameter reaches the result, on the target
/// and on the reference backend.
#[test]
fn callee_side_up_to_32_mixed_parameters() {
    for sig in many_param_sigs() {
        let native = weighted_callee::<Native>(&sig).unwrap_or_else(|e| panic!("{sig}: {e}"));
        let reference = weighted_callee::<Reference>(&sig).unwrap_or_else(|e| panic!("{sig}: {e}"));
        let args = args_of(&sig);
        check_both(&native, &reference, &args, weighted(&args), &sig);
    }
    // 32 integer or float parameters do not all fit in registers: some
    // really are read from memory.
    for sig in ["%i", "%d"] {
        let mut f = Func::<Native>::with_backend();
        let p = f.lambda(&sig.repeat(32), Leaf::No).unwrap();
        assert!(p.in_memory(31) && !p.in_memory(0), "{sig} x 32");
    }
}

/// A parameter kept in memory is a local like any other: it can be
/// overwritten, its address taken, and its handle is refused where it does
/// not belong (a register parameter's `local`, a memory parameter's `get`,
/// the handle in another function).
#[test]
fn parameters_in_memory_are_locals() {
    let sig = "%l".repeat(32);
    let pair = |b: bool| -> (Code, RefCode) {
        fn build<B: Backend>(sig: &str, b: bool) -> vcode::Result<B::Code> {
            let mut f = Func::<B>::with_backend();
            let p = f.lambda(sig, Leaf::Yes)?;
            let last = p.local::<L>(31)?;
            let r = p.get::<L>(0)?;
            // a31 = a0 * 3; return *&a31 + (b ? a31 : 0)
            f.mul(r, r, 3);
            f.st_local(r, last);
            let a = p.get::<L>(1)?.cast::<P>();
            f.addr_local(a, last);
            f.ld(r, a, 0);
            if b {
                let t = p.get::<L>(2)?;
                f.ld_local(t, last);
                f.add(r, r, t);
            }
            f.ret(r);
            f.end()
        }
        (
            build::<Native>(&sig, b).unwrap(),
            build::<Reference>(&sig, b).unwrap(),
        )
    };
    let args = args_of(&sig);
    let a0 = match args[0] {
        Value::L(x) => x,
        _ => unreachable!(),
    };
    let (n, r) = pair(false);
    check_both(&n, &r, &args, a0 * 3, "st_local, addr_local");
    let (n, r) = pair(true);
    check_both(&n, &r, &args, a0 * 6, "st_local, ld_local");

    let mut f = Func::<Native>::with_backend();
    let p = f.lambda(&sig, Leaf::Yes).unwrap();
    assert_eq!(
        p.get::<L>(31).unwrap_err().kind(),
        &ErrorKind::ParamInMemory { index: 31 }
    );
    assert_eq!(
        p.local::<L>(0).unwrap_err().kind(),
        &ErrorKind::ParamInRegister { index: 0 }
    );
    assert!(matches!(
        p.local::<I>(31).unwrap_err().kind(),
        &ErrorKind::TypeMismatch { .. }
    ));
    assert_eq!(p.any(31), None);
    let stale = p.local::<L>(31).unwrap();
    for backend_is_native in [true, false] {
        let e = if backend_is_native {
            let mut g = Func::<Native>::with_backend();
            let q = g.lambda("%l", Leaf::Yes).unwrap();
            let x = q.get::<L>(0).unwrap();
            g.ld_local(x, stale);
            g.ret(x);
            g.end().map(|_| ()).unwrap_err()
        } else {
            let mut g = Func::<Reference>::with_backend();
            let q = g.lambda("%l", Leaf::Yes).unwrap();
            let x = q.get::<L>(0).unwrap();
            g.ld_local(x, stale);
            g.ret(x);
            g.end().map(|_| ()).unwrap_err()
        };
        assert!(
            matches!(e.kind(), ErrorKind::UnknownLocal { .. }),
            "native={backend_is_native}: {e}"
        );
    }
}

/// `long f(void *buf)` calling `callee` with one argument per type of
/// `tys`, argument `k` taken (by `k % 3`) from a register loaded from
/// `buf[k]`, an immediate of the value, or memory at `buf[k]` (also when no
/// register is left for a register argument).
fn many_args_caller<B: Backend>(
    tys: &[Ty],
    vals: &[Value],
    callee: vcode::Callee<'_, B::Code>,
) -> vcode::Result<B::Code> {
    use vcode::Arg;
    let mut f = Func::<B>::with_backend();
    let p = f.lambda("%p", Leaf::No)?;
    let buf = p.get::<P>(0)?;
    let rd = f.getreg::<L>(vcode::Class::Temp)?;
    let mut args = Vec::new();
    for (k, (&ty, v)) in tys.iter().zip(vals).enumerate() {
        let off = 8 * k as i32;
        let a = match k % 3 {
            0 => any_ty!(ty, |T| {
                match f
                    .getreg::<T>(vcode::Class::Temp)
                    .or_else(|_| f.getreg::<T>(vcode::Class::Persistent))
                {
                    Ok(r) => {
                        f.ld(r, buf, off);
                        Arg::from(r)
                    }
                    Err(_) => Arg::mem::<T>(buf, off),
                }
            }),
            1 => Arg::Imm(ty, v.bits() as i64),
            _ => any_ty!(ty, |T| Arg::mem::<T>(buf, off)),
        };
        args.push(a);
    }
    f.call(rd, callee, &args);
    f.ret(rd);
    f.end()
}

/// Calls with 1 to 32 arguments of mixed types from registers, immediates
/// and memory reach a generated callee intact (on the target and on the
/// reference backend), needing no register per argument from memory.
#[test]
fn caller_side_up_to_32_mixed_arguments() {
    for sig in many_param_sigs() {
        let vals = args_of(&sig);
        let tys: Vec<Ty> = vals.iter().map(|v| v.ty()).collect();
        let buf: Vec<u64> = vals.iter().map(|v| v.bits()).collect();
        let arg = [Value::P(buf.as_ptr() as usize)];
        let nc = weighted_callee::<Native>(&sig).unwrap();
        let rc = weighted_callee::<Reference>(&sig).unwrap();
        let native = many_args_caller::<Native>(&tys, &vals, vcode::Callee::Code(&nc))
            .unwrap_or_else(|e| panic!("{sig}: {e}"));
        let reference = many_args_caller::<Reference>(&tys, &vals, vcode::Callee::Code(&rc))
            .unwrap_or_else(|e| panic!("{sig}: {e}"));
        check_both(&native, &reference, &arg, weighted(&vals), &sig);
        if let Some(addr) = Arch::mixed32().filter(|_| sig == mixed_sig(32)) {
            // The same call to the Rust function of these 32 parameters.
            let native =
                many_args_caller::<Native>(&tys, &vals, vcode::Callee::Native(addr)).unwrap();
            let reference =
                many_args_caller::<Reference>(&tys, &vals, vcode::Callee::Native(addr)).unwrap();
            check_both(&native, &reference, &arg, weighted(&vals), "Rust callee");
        }
    }
}

/// Memory arguments of a type a call cannot pass (`c`, `s`: callers
/// widen them) are a typed error on both backends.
#[test]
fn narrow_memory_arguments_are_refused() {
    fn build<B: Backend>() -> vcode::Result<B::Code> {
        let mut f = Func::<B>::with_backend();
        let p = f.lambda("%p", Leaf::No)?;
        let buf = p.get::<P>(0)?;
        f.callv(
            vcode::Callee::Native(0),
            &[vcode::Arg::Mem {
                ty: Ty::C,
                base: buf.num(),
                off: 0,
            }],
        );
        f.retv();
        f.end()
    }
    let want = ErrorKind::TypeMismatch {
        expected: Ty::I,
        found: Ty::C,
    };
    assert_eq!(build::<Native>().map(|_| ()).unwrap_err().kind(), &want);
    assert_eq!(build::<Reference>().map(|_| ()).unwrap_err().kind(), &want);
}
