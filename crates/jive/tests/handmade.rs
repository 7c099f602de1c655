//! Hand-made class files for the JIT, which must run them as the interpreter
//! does: int bytecodes of the JIVE
//! subset that `javac` never emits (or emits only in a few fixed shapes), so
//! the random differential test (`jit.rs`, whose programs `javac` compiles)
//! cannot reach them: `swap`, `pop2`, `dup_x1` in unusual positions,
//! `dup_x2`, `dup2`, `dup2_x1`, `dup2_x2`, `goto_w` (forward and backward),
//! `wide iload/istore/aload/astore/iinc` with small indices and large
//! `iinc` deltas, `nop`, `ldc`/`ldc_w` of ints, values left on the stack
//! across branches and loops, and `ireturn` over a non-empty stack.
//!
//! The test writes the class files itself: a minimal class-file writer
//! (constant pool of Utf8, Class and Integer entries; a public class `Hand`
//! extending `java/lang/Object`, version 52; `public static int mK(int, int)`
//! methods with a `Code` attribute with exact `max_stack`/`max_locals` and,
//! where there are branches, a `StackMapTable` in the most compact form that
//! applies: same, same_locals_1_stack_item (and their extended forms), chop,
//! append, full). The generator tracks types and records the frame at each
//! label; every class must pass `jive::check`. About 660 methods go into
//! classes of at most 200 methods (jive's default limit is 256), all named
//! `Hand`. Methods come from three sources:
//!
//! - **fixed**: one small method per named shape (`dup2_x2` of four ints,
//!   `swap; isub`, `dup_x1; istore`, `pop2` of two ints, `wide` forms with
//!   small indices, large `wide iinc` deltas, `goto_w` over dead code and as
//!   a loop's back edge, a local changed while its old value is on the stack,
//!   a stack 40 deep, ...);
//! - **matrix**: every stack operation (and random chains of them) over
//!   operands that are constants, arguments, locals in registers or in memory
//!   (index > 8), arithmetic results and array elements, with values left
//!   deep below them, consumed by a position-sensitive hash, by stores into
//!   locals reloaded in another order, by different ops on a duplicated
//!   value, by array stores, or by `iinc` of a local whose value is on the
//!   stack;
//! - **random**: a type-directed generator mixing all of the above with
//!   arrays of the four element types (`newarray`, loads, stores,
//!   `arraylength`, `aconst_null`), division, and control flow:
//!   `goto`/`goto_w` over dead code, if/else diamonds that leave a value on
//!   the stack, and counted loops (do-while, while with a `goto_w` back edge,
//!   javac's bottom-tested shape) entered with values on the stack.
//!
//! The expected result of every call comes from a small evaluator of the
//! generated instruction list written here from the JVMS (chapter 6),
//! independent of jive: the value or the trap (kind, index, length, bci) and
//! the fuel (one unit per taken branch to a bci at or before the branch's).
//! Every method runs on a grid of arguments (`i32::MIN`, -1, 0, 1,
//! `i32::MAX`, ...) on both engines, metered and unmetered, and on small
//! fuel budgets; the interpreter must give the evaluator's result, the JIT
//! the interpreter's, and the heaps must agree afterwards.
//!
//! `hotspot_agrees_with_the_evaluator` checks the writer and the evaluator
//! themselves against HotSpot (its verifier and its results), when `java`
//! and the harness compiled by the build script are available.
//! `the_methods_cover_the_rare_bytecodes` counts what the methods contain
//! (each rare bytecode, shape, frame form and trap kind) and fails if any
//! becomes rare.
//!
//! `HANDMADE_RANDOM=N` (default 560) and `HANDMADE_SEED=S` (default 50,000)
//! choose the random methods, for longer runs. `HANDMADE_SELF_CHECK=1` puts
//! the interpreter on both sides (a check of this harness only, never of the
//! JIT).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::{Command, Stdio};

use jive::{Applet, Engine, InvokeError, Limits, Natives, Trap, TrapKind};

// ---------------------------------------------------------------------------
// The instruction list.

/// An array element type (`newarray` of the subset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Elem {
    Int,
    Byte,
    Short,
    Bool,
}

impl Elem {
    const ALL: [Elem; 4] = [Elem::Int, Elem::Byte, Elem::Short, Elem::Bool];

    fn atype(self) -> u8 {
        match self {
            Elem::Bool => 4,
            Elem::Byte => 8,
            Elem::Short => 9,
            Elem::Int => 10,
        }
    }

    fn descriptor(self) -> &'static str {
        match self {
            Elem::Int => "[I",
            Elem::Byte => "[B",
            Elem::Short => "[S",
            Elem::Bool => "[Z",
        }
    }

    /// The value an array of this type holds after storing `v` (JVMS
    /// `iastore`, `bastore`, `sastore`).
    fn narrow(self, v: i32) -> i32 {
        match self {
            Elem::Int => v,
            Elem::Byte => i32::from(v as i8),
            Elem::Short => i32::from(v as i16),
            Elem::Bool => v & 1,
        }
    }

    fn load_opcode(self) -> u8 {
        match self {
            Elem::Int => 0x2e,               // iaload
            Elem::Byte | Elem::Bool => 0x33, // baload
            Elem::Short => 0x35,             // saload
        }
    }

    fn store_opcode(self) -> u8 {
        match self {
            Elem::Int => 0x4f,               // iastore
            Elem::Byte | Elem::Bool => 0x54, // bastore
            Elem::Short => 0x56,             // sastore
        }
    }
}

/// How a local-variable instruction is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// As javac would: `iload_<n>` for n <= 3, else `iload n`.
    Auto,
    /// `iload n` even for n <= 3.
    Plain,
    /// `wide iload n`.
    Wide,
}

/// How an int constant is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CForm {
    /// As javac would: `iconst`, `bipush`, `sipush`, else `ldc`/`ldc_w`.
    Auto,
    Bipush,
    Sipush,
    /// `ldc` (the value is one of [`PALETTE`], whose pool indices are < 256).
    Ldc,
    LdcW,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Shl,
    Shr,
    Ushr,
    And,
    Or,
    Xor,
}

impl Bin {
    const SAFE: [Bin; 9] = [
        Bin::Add,
        Bin::Sub,
        Bin::Mul,
        Bin::Shl,
        Bin::Shr,
        Bin::Ushr,
        Bin::And,
        Bin::Or,
        Bin::Xor,
    ];

    fn opcode(self) -> u8 {
        match self {
            Bin::Add => 0x60,
            Bin::Sub => 0x64,
            Bin::Mul => 0x68,
            Bin::Div => 0x6c,
            Bin::Rem => 0x70,
            Bin::Shl => 0x78,
            Bin::Shr => 0x7a,
            Bin::Ushr => 0x7c,
            Bin::And => 0x7e,
            Bin::Or => 0x80,
            Bin::Xor => 0x82,
        }
    }

    /// JVMS `iadd` ... `ixor`; `None` for a division by zero.
    fn eval(self, x: i32, y: i32) -> Option<i32> {
        Some(match self {
            Bin::Add => x.wrapping_add(y),
            Bin::Sub => x.wrapping_sub(y),
            Bin::Mul => x.wrapping_mul(y),
            Bin::Div if y == 0 => return None,
            Bin::Div => x.wrapping_div(y),
            Bin::Rem if y == 0 => return None,
            Bin::Rem => x.wrapping_rem(y),
            Bin::Shl => x << (y & 31),
            Bin::Shr => x >> (y & 31),
            Bin::Ushr => ((x as u32) >> (y & 31)) as i32,
            Bin::And => x & y,
            Bin::Or => x | y,
            Bin::Xor => x ^ y,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cond {
    Eq,
    Ne,
    Lt,
    Ge,
    Gt,
    Le,
}

impl Cond {
    const ALL: [Cond; 6] = [Cond::Eq, Cond::Ne, Cond::Lt, Cond::Ge, Cond::Gt, Cond::Le];

    fn index(self) -> u8 {
        match self {
            Cond::Eq => 0,
            Cond::Ne => 1,
            Cond::Lt => 2,
            Cond::Ge => 3,
            Cond::Gt => 4,
            Cond::Le => 5,
        }
    }

    fn holds(self, x: i32, y: i32) -> bool {
        match self {
            Cond::Eq => x == y,
            Cond::Ne => x != y,
            Cond::Lt => x < y,
            Cond::Ge => x >= y,
            Cond::Gt => x > y,
            Cond::Le => x <= y,
        }
    }
}

/// One instruction of a generated method (labels are pseudo-instructions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ins {
    Nop,
    Const(i32, CForm),
    AconstNull,
    ILoad(u16, Form),
    IStore(u16, Form),
    ALoad(u16, Form),
    AStore(u16, Form),
    Iinc(u16, i16, Form),
    Bin(Bin),
    Neg,
    I2b,
    I2s,
    Pop,
    Pop2,
    Dup,
    DupX1,
    DupX2,
    Dup2,
    Dup2X1,
    Dup2X2,
    Swap,
    NewArray(Elem),
    ArrayLength,
    ALoadElem(Elem),
    AStoreElem(Elem),
    If(Cond, usize),
    IfCmp(Cond, usize),
    Goto(usize),
    GotoW(usize),
    Label(usize),
    IReturn,
}

/// The stack operations under test.
const SHUFFLES: [Ins; 9] = [
    Ins::Swap,
    Ins::Pop,
    Ins::Pop2,
    Ins::Dup,
    Ins::DupX1,
    Ins::DupX2,
    Ins::Dup2,
    Ins::Dup2X1,
    Ins::Dup2X2,
];

/// Values `ldc` loads (interned first, so their pool indices are < 256).
const PALETTE: [i32; 20] = [
    i32::MIN,
    i32::MAX,
    0,
    1,
    -1,
    5,
    100,
    255,
    -2,
    65_536,
    -65_537,
    99_999,
    1 << 30,
    0x0123_4567,
    -0x7654_3210,
    123_456_789,
    0x5555_5555,
    -0x5555_5556,
    32_768,
    -32_769,
];

/// Constants the generator likes (edges of every encoding and of shifts).
const INTERESTING: [i32; 34] = [
    0,
    1,
    -1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    15,
    16,
    31,
    32,
    33,
    63,
    100,
    127,
    128,
    -128,
    -129,
    255,
    256,
    1000,
    32_767,
    32_768,
    -32_768,
    -32_769,
    65_535,
    65_536,
    i32::MAX,
    i32::MIN,
    0x1234_5678,
    1_000_000_007,
];

/// The arguments every method runs with (all pairs).
const ARGS: [i32; 10] = [i32::MIN, -1, 0, 1, i32::MAX, 2, 7, -8, 100, 0x1234_5678];

// ---------------------------------------------------------------------------
// Types, for the generator (and the StackMapTable).

/// A verification type of the values the generator makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Int,
    Arr(Elem),
    Null,
}

/// The types of the operand stack and the locals (`None`: unset, `top`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct St {
    stack: Vec<Ty>,
    locals: Vec<Option<Ty>>,
}

impl St {
    fn pop(&mut self) -> Ty {
        self.stack
            .pop()
            .expect("generator: operand stack underflow")
    }

    fn pop_int(&mut self) {
        assert_eq!(self.pop(), Ty::Int, "generator: int expected");
    }

    fn pop_array(&mut self, e: Elem) {
        match self.pop() {
            Ty::Null => {}
            Ty::Arr(a) => assert_eq!(a.load_opcode(), e.load_opcode(), "generator: array type"),
            Ty::Int => panic!("generator: array expected"),
        }
    }

    /// The type effect of one (non-label) instruction.
    fn apply(&mut self, ins: Ins) {
        match ins {
            Ins::Nop | Ins::Label(_) | Ins::Goto(_) | Ins::GotoW(_) => {}
            Ins::Const(..) => self.stack.push(Ty::Int),
            Ins::AconstNull => self.stack.push(Ty::Null),
            Ins::ILoad(n, _) | Ins::Iinc(n, ..) => {
                assert_eq!(self.locals[usize::from(n)], Some(Ty::Int), "{ins:?}");
                if matches!(ins, Ins::ILoad(..)) {
                    self.stack.push(Ty::Int);
                }
            }
            Ins::ALoad(n, _) => {
                let t = self.locals[usize::from(n)].expect("generator: aload of an unset local");
                assert!(matches!(t, Ty::Arr(_)), "{ins:?}");
                self.stack.push(t);
            }
            Ins::IStore(n, _) => {
                self.pop_int();
                self.locals[usize::from(n)] = Some(Ty::Int);
            }
            Ins::AStore(n, _) => {
                let t = self.pop();
                assert!(matches!(t, Ty::Arr(_)), "{ins:?}");
                self.locals[usize::from(n)] = Some(t);
            }
            Ins::Bin(_) => {
                self.pop_int();
                self.pop_int();
                self.stack.push(Ty::Int);
            }
            Ins::Neg | Ins::I2b | Ins::I2s => {
                self.pop_int();
                self.stack.push(Ty::Int);
            }
            Ins::Pop => {
                self.pop();
            }
            Ins::Pop2 => {
                self.pop();
                self.pop();
            }
            Ins::Dup => {
                let a = self.pop();
                self.stack.extend([a, a]);
            }
            Ins::DupX1 => {
                let (a, b) = (self.pop(), self.pop());
                self.stack.extend([a, b, a]);
            }
            Ins::DupX2 => {
                let (a, b, c) = (self.pop(), self.pop(), self.pop());
                self.stack.extend([a, c, b, a]);
            }
            Ins::Dup2 => {
                let (a, b) = (self.pop(), self.pop());
                self.stack.extend([b, a, b, a]);
            }
            Ins::Dup2X1 => {
                let (a, b, c) = (self.pop(), self.pop(), self.pop());
                self.stack.extend([b, a, c, b, a]);
            }
            Ins::Dup2X2 => {
                let (a, b, c, d) = (self.pop(), self.pop(), self.pop(), self.pop());
                self.stack.extend([b, a, d, c, b, a]);
            }
            Ins::Swap => {
                let (a, b) = (self.pop(), self.pop());
                self.stack.extend([a, b]);
            }
            Ins::NewArray(e) => {
                self.pop_int();
                self.stack.push(Ty::Arr(e));
            }
            Ins::ArrayLength => {
                assert_ne!(self.pop(), Ty::Int, "generator: arraylength of an int");
                self.stack.push(Ty::Int);
            }
            Ins::ALoadElem(e) => {
                self.pop_int();
                self.pop_array(e);
                self.stack.push(Ty::Int);
            }
            Ins::AStoreElem(e) => {
                self.pop_int();
                self.pop_int();
                self.pop_array(e);
            }
            Ins::If(..) | Ins::IReturn => self.pop_int(),
            Ins::IfCmp(..) => {
                self.pop_int();
                self.pop_int();
            }
        }
    }

    /// The frame where two paths meet: locals that differ become unset.
    fn merge(&self, other: &St) -> St {
        assert_eq!(
            self.stack, other.stack,
            "generator: stacks differ at a merge"
        );
        St {
            stack: self.stack.clone(),
            locals: self
                .locals
                .iter()
                .zip(&other.locals)
                .map(|(a, b)| if a == b { *a } else { None })
                .collect(),
        }
    }

    /// Whether this state may jump to a label whose frame is `to`.
    fn assignable(&self, to: &St) -> bool {
        self.stack == to.stack
            && self
                .locals
                .iter()
                .zip(&to.locals)
                .all(|(a, b)| b.is_none() || a == b)
    }
}

/// A generated method: `public static int <name>(int, int)`.
#[derive(Clone, Debug)]
struct MethodIr {
    name: String,
    /// Where it came from (for failure messages).
    origin: String,
    code: Vec<Ins>,
    max_locals: u16,
    max_stack: u16,
    /// The frame at each label (by label number).
    frames: Vec<St>,
    /// Shapes of interest and how often they appear.
    notes: BTreeMap<&'static str, usize>,
}

impl MethodIr {
    fn id(&self) -> String {
        format!("{}(II)I", self.name)
    }

    fn has_back_edges(&self) -> bool {
        let mut seen = vec![false; self.frames.len()];
        self.code.iter().any(|&i| match i {
            Ins::Label(l) => {
                seen[l] = true;
                false
            }
            Ins::If(_, l) | Ins::IfCmp(_, l) | Ins::Goto(l) | Ins::GotoW(l) => seen[l],
            _ => false,
        })
    }
}

// ---------------------------------------------------------------------------
// A deterministic random source (splitmix64).

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x9e37_79b9_7f4a_7c15)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    fn value(&mut self) -> i32 {
        match self.below(10) {
            0..=5 => self.pick(&INTERESTING),
            6 | 7 => self.below(41) as i32 - 20,
            _ => self.next() as i32,
        }
    }
}

// ---------------------------------------------------------------------------
// The generator: emits instructions while tracking types, so that every
// method verifies, and records the frame at every label.

/// Random actions of [`Gen::step`], with weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Act {
    Push,
    Load,
    ALoad,
    Store,
    AStore,
    Iinc,
    Bin,
    Unop,
    Shuffle(Ins),
    Nop,
    NewArray,
    ArrElem,
    ArrPut,
    ArrLoad,
    ArrStore,
    ArrayLength,
    Null,
}

const ACTS: [(Act, u32); 25] = [
    (Act::Push, 12),
    (Act::Load, 14),
    (Act::ALoad, 3),
    (Act::Store, 8),
    (Act::AStore, 2),
    (Act::Iinc, 5),
    (Act::Bin, 12),
    (Act::Unop, 3),
    (Act::Shuffle(Ins::Pop), 3),
    (Act::Shuffle(Ins::Pop2), 4),
    (Act::Shuffle(Ins::Dup), 4),
    (Act::Shuffle(Ins::DupX1), 5),
    (Act::Shuffle(Ins::DupX2), 5),
    (Act::Shuffle(Ins::Dup2), 5),
    (Act::Shuffle(Ins::Dup2X1), 5),
    (Act::Shuffle(Ins::Dup2X2), 5),
    (Act::Shuffle(Ins::Swap), 6),
    (Act::Nop, 2),
    (Act::NewArray, 3),
    (Act::ArrElem, 4),
    (Act::ArrPut, 3),
    (Act::ArrLoad, 4),
    (Act::ArrStore, 3),
    (Act::ArrayLength, 1),
    (Act::Null, 3),
];

/// The most stack entries a generated method uses (jive's default limit is
/// 256).
const HARD_STACK: usize = 200;

struct Gen<'r> {
    rng: &'r mut Rng,
    code: Vec<Ins>,
    /// The types here, `None` where control cannot reach.
    st: Option<St>,
    placed: Vec<Option<St>>,
    pending: Vec<Option<St>>,
    max_stack: usize,
    max_locals: u16,
    /// Soft limit of the stack depth for random pushes.
    cap: usize,
    /// Frames of the enclosing loop headers (stores must keep their types).
    headers: Vec<St>,
    /// Loop counters (never written by random code).
    reserved: Vec<u16>,
    /// Percent of segment steps that open a control-flow construct.
    cf_rate: u64,
    /// Whether `aconst_null` may appear.
    nulls: bool,
    /// Percent of binary ops that divide.
    div: u64,
    /// Push more until the stack is near `cap`.
    deep: bool,
    /// How often each shape of interest was emitted (for the coverage test).
    notes: BTreeMap<&'static str, usize>,
}

impl<'r> Gen<'r> {
    fn new(rng: &'r mut Rng, max_locals: u16) -> Gen<'r> {
        let mut locals = vec![None; usize::from(max_locals)];
        locals[0] = Some(Ty::Int);
        locals[1] = Some(Ty::Int);
        Gen {
            rng,
            code: Vec::new(),
            st: Some(St {
                stack: Vec::new(),
                locals,
            }),
            placed: Vec::new(),
            pending: Vec::new(),
            max_stack: 0,
            max_locals,
            cap: 12,
            headers: Vec::new(),
            reserved: Vec::new(),
            cf_rate: 0,
            nulls: false,
            div: 0,
            deep: false,
            notes: BTreeMap::new(),
        }
    }

    fn st(&self) -> &St {
        self.st.as_ref().expect("generator: unreachable here")
    }

    fn len(&self) -> usize {
        self.st().stack.len()
    }

    /// The type `k` entries below the top.
    fn top(&self, k: usize) -> Option<Ty> {
        let s = &self.st().stack;
        s.len().checked_sub(k + 1).map(|i| s[i])
    }

    fn room(&self) -> usize {
        self.cap.min(HARD_STACK).saturating_sub(self.len())
    }

    fn new_label(&mut self) -> usize {
        self.placed.push(None);
        self.pending.push(None);
        self.placed.len() - 1
    }

    fn emit(&mut self, ins: Ins) {
        if let Ins::Label(l) = ins {
            self.place(l, None);
            return;
        }
        self.note_shapes(ins);
        let st = self
            .st
            .as_mut()
            .expect("generator: emitting unreachable code");
        st.apply(ins);
        self.max_stack = self.max_stack.max(st.stack.len());
        self.code.push(ins);
        match ins {
            Ins::If(_, l) | Ins::IfCmp(_, l) => self.branch(l),
            Ins::Goto(l) | Ins::GotoW(l) => {
                self.branch(l);
                self.st = None;
            }
            Ins::IReturn => self.st = None,
            _ => {}
        }
    }

    fn note(&mut self, what: &'static str) {
        *self.notes.entry(what).or_default() += 1;
    }

    /// Notes the shapes of `ins` (about to be emitted) that the test is for.
    fn note_shapes(&mut self, ins: Ins) {
        let Some(st) = &self.st else {
            return;
        };
        let len = st.stack.len();
        let ints = |k: usize| len >= k && st.stack[len - k..].iter().all(|&t| t == Ty::Int);
        let mut notes = Vec::new();
        match ins {
            Ins::Pop2 if ints(2) => notes.push("pop2 of two ints"),
            Ins::Dup2X2 if ints(4) => notes.push("dup2_x2 of four ints"),
            Ins::Dup2X1 if ints(3) => notes.push("dup2_x1 of three ints"),
            Ins::DupX2 if ints(3) => notes.push("dup_x2 of three ints"),
            _ => {}
        }
        if matches!(ins, Ins::Dup | Ins::Dup2 | Ins::Swap | Ins::DupX1) && !ints(2) && len >= 2
            || matches!(ins, Ins::DupX2 | Ins::Dup2X1 | Ins::Dup2X2) && !ints(3) && len >= 3
        {
            notes.push("stack op moving a reference");
        }
        let left = match ins {
            Ins::If(..) => len.checked_sub(1),
            Ins::IfCmp(..) => len.checked_sub(2),
            Ins::Goto(_) | Ins::GotoW(_) => Some(len),
            _ => None,
        };
        if left.is_some_and(|l| l > 0) {
            notes.push("branch with values on the stack");
        }
        for n in notes {
            self.note(n);
        }
    }

    fn emit_all(&mut self, code: &[Ins]) {
        for &i in code {
            self.emit(i);
        }
    }

    fn branch(&mut self, l: usize) {
        let st = self.st().clone();
        match &self.placed[l] {
            Some(frame) => assert!(
                st.assignable(frame),
                "generator: back edge to label {l} does not match its frame:\n{st:?}\n{frame:?}"
            ),
            None => {
                let merged = match self.pending[l].take() {
                    Some(p) => p.merge(&st),
                    None => st,
                };
                self.pending[l] = Some(merged);
            }
        }
    }

    /// Places label `l`: its frame is the merge of the fall-through and the
    /// branches to it so far, or `dead` (code only a jump skips over).
    fn place(&mut self, l: usize, dead: Option<St>) {
        assert!(
            self.placed[l].is_none(),
            "generator: label {l} placed twice"
        );
        // One frame per bci: two labels never share one.
        if matches!(self.code.last(), Some(Ins::Label(_))) {
            self.emit(Ins::Nop);
        }
        let here = match (self.st.take(), self.pending[l].take(), dead) {
            (None, None, Some(d)) => d,
            (Some(a), Some(b), None) => a.merge(&b),
            (Some(a), None, None) | (None, Some(a), None) => a,
            other => panic!("generator: bad placement of label {l}: {other:?}"),
        };
        self.placed[l] = Some(here.clone());
        self.st = Some(here);
        self.code.push(Ins::Label(l));
    }

    fn form(&mut self) -> Form {
        match self.below(20) {
            0..=10 => Form::Auto,
            11..=13 => Form::Plain,
            _ => Form::Wide,
        }
    }

    fn below(&mut self, n: usize) -> usize {
        self.rng.below(n)
    }

    fn chance(&mut self, p: u64) -> bool {
        self.rng.chance(p)
    }

    fn push_const(&mut self) {
        let v = self.rng.value();
        let c = match self.below(10) {
            0..=4 => Ins::Const(v, CForm::Auto),
            5 if i8::try_from(v).is_ok() => Ins::Const(v, CForm::Bipush),
            6 if i16::try_from(v).is_ok() => Ins::Const(v, CForm::Sipush),
            5 | 6 => Ins::Const(v, CForm::LdcW),
            7 | 8 => Ins::Const(self.rng.pick(&PALETTE), CForm::Ldc),
            _ => Ins::Const(v, CForm::LdcW),
        };
        self.emit(c);
    }

    fn locals_where(&self, f: impl Fn(Option<Ty>) -> bool) -> Vec<u16> {
        (0..self.max_locals)
            .filter(|&n| f(self.st().locals[usize::from(n)]))
            .collect()
    }

    fn pick_int_local(&mut self) -> Option<u16> {
        let c = self.locals_where(|t| t == Some(Ty::Int));
        (!c.is_empty()).then(|| self.rng.pick(&c))
    }

    fn pick_arr_local(&mut self) -> Option<(u16, Elem)> {
        let c = self.locals_where(|t| matches!(t, Some(Ty::Arr(_))));
        if c.is_empty() {
            return None;
        }
        let n = self.rng.pick(&c);
        match self.st().locals[usize::from(n)] {
            Some(Ty::Arr(e)) => Some((n, e)),
            _ => None,
        }
    }

    /// Whether random code may store a `t` into local `n`: an int if it is an
    /// argument, not a loop counter, and the type at every enclosing loop header stays valid.
    fn storable(&self, n: u16, t: Ty) -> bool {
        // The arguments stay ints (sources read them).
        (n >= 2 || t == Ty::Int)
            && !self.reserved.contains(&n)
            && self.headers.iter().all(|h| {
                let at = h.locals[usize::from(n)];
                at.is_none() || at == Some(t)
            })
    }

    /// A local to store a `t` into: the arguments, a low local (likely in a
    /// register) or any (likely in memory when there are many).
    fn pick_store_local(&mut self, t: Ty) -> Option<u16> {
        for _ in 0..12 {
            let m = usize::from(self.max_locals);
            let n = match self.below(10) {
                0 | 1 => self.below(2),
                2..=5 => self.below(m.min(9)),
                _ => self.below(m),
            } as u16;
            if self.storable(n, t) {
                return Some(n);
            }
        }
        None
    }

    fn pick_iinc_local(&mut self) -> Option<u16> {
        let c: Vec<u16> = self
            .locals_where(|t| t == Some(Ty::Int))
            .into_iter()
            .filter(|n| !self.reserved.contains(n))
            .collect();
        (!c.is_empty()).then(|| self.rng.pick(&c))
    }

    fn iinc(&mut self, n: u16) {
        let form = self.form();
        let d = match form {
            Form::Wide => self.rng.pick(&[
                1000, -1000, 32_767, -32_768, 128, -129, 256, 1, -1, 0, 12_345,
            ]),
            _ => i16::from(self.below(256) as u8 as i8),
        };
        self.emit(Ins::Iinc(n, d, form));
    }

    /// Pushes an index into an array of at least 8 elements (or, now and
    /// then, one that may be out of bounds).
    fn push_index(&mut self) {
        match self.below(12) {
            0..=6 => {
                let k = if self.chance(10) {
                    self.below(16)
                } else {
                    self.below(8)
                } as i32;
                self.emit(Ins::Const(k, CForm::Auto));
            }
            7..=10 => {
                self.push_source_simple();
                self.emit_all(&[Ins::Const(7, CForm::Auto), Ins::Bin(Bin::And)]);
            }
            _ => self.push_source_simple(),
        }
    }

    /// Pushes an int from a constant, an int local or `a op b`.
    fn push_source_simple(&mut self) {
        match self.below(3) {
            0 => self.push_const(),
            1 => match self.pick_int_local() {
                Some(n) => {
                    let f = self.form();
                    self.emit(Ins::ILoad(n, f));
                }
                None => self.push_const(),
            },
            _ => {
                let (a, b) = (self.below(2) as u16, self.below(2) as u16);
                let op = self.rng.pick(&Bin::SAFE);
                self.emit_all(&[
                    Ins::ILoad(a, Form::Auto),
                    Ins::ILoad(b, Form::Auto),
                    Ins::Bin(op),
                ]);
            }
        }
    }

    /// Pushes an int from a random source, including array elements.
    fn push_source(&mut self) {
        if self.chance(25)
            && let Some((n, e)) = self.pick_arr_local()
        {
            let f = self.form();
            self.emit(Ins::ALoad(n, f));
            self.push_index();
            self.emit(Ins::ALoadElem(e));
        } else {
            self.push_source_simple();
        }
    }

    fn pick_act(&mut self) -> Act {
        let total: u32 = ACTS.iter().map(|a| a.1).sum();
        let mut x = self.below(total as usize) as u32;
        for &(a, w) in &ACTS {
            if x < w {
                return a;
            }
            x -= w;
        }
        Act::Nop
    }

    /// One random action that does not touch the stack below `floor`.
    fn step(&mut self, floor: usize) {
        if self.deep && self.len() + 2 < self.cap && self.chance(60) {
            self.push_source();
            return;
        }
        for _ in 0..30 {
            let a = self.pick_act();
            if self.act(a, floor) {
                return;
            }
        }
        self.emit(Ins::Nop);
    }

    fn act(&mut self, a: Act, floor: usize) -> bool {
        let avail = self.len() - floor;
        let room = self.room();
        let int = |g: &Self, k: usize| k < avail && g.top(k) == Some(Ty::Int);
        match a {
            Act::Push if room >= 1 => self.push_const(),
            Act::Load if room >= 1 => {
                let Some(n) = self.pick_int_local() else {
                    return false;
                };
                let f = self.form();
                self.emit(Ins::ILoad(n, f));
            }
            Act::ALoad if room >= 1 => {
                let Some((n, _)) = self.pick_arr_local() else {
                    return false;
                };
                let f = self.form();
                self.emit(Ins::ALoad(n, f));
            }
            Act::Store if int(self, 0) => {
                let Some(n) = self.pick_store_local(Ty::Int) else {
                    return false;
                };
                let f = self.form();
                self.emit(Ins::IStore(n, f));
            }
            Act::AStore if avail >= 1 => {
                let Some(t @ Ty::Arr(_)) = self.top(0) else {
                    return false;
                };
                let Some(n) = self.pick_store_local(t) else {
                    return false;
                };
                let f = self.form();
                self.emit(Ins::AStore(n, f));
            }
            Act::Iinc => {
                let Some(n) = self.pick_iinc_local() else {
                    return false;
                };
                self.iinc(n);
            }
            Act::Bin if int(self, 0) && int(self, 1) => {
                let op = if self.chance(self.div) {
                    self.rng.pick(&[Bin::Div, Bin::Rem])
                } else {
                    self.rng.pick(&Bin::SAFE)
                };
                self.emit(Ins::Bin(op));
            }
            Act::Unop if int(self, 0) => {
                let op = self.rng.pick(&[Ins::Neg, Ins::I2b, Ins::I2s]);
                self.emit(op);
            }
            Act::Shuffle(s) => {
                let (pops, pushes) = shuffle_shape(s);
                if avail < pops || room + pops < pushes {
                    return false;
                }
                self.emit(s);
                self.after_shuffle(floor);
            }
            Act::Nop => self.emit(Ins::Nop),
            Act::NewArray if int(self, 0) && room >= 2 => {
                let e = self.rng.pick(&Elem::ALL);
                match self.below(8) {
                    0..=4 => self.emit_all(&[
                        Ins::Const(7, CForm::Auto),
                        Ins::Bin(Bin::And),
                        Ins::Const(8, CForm::Auto),
                        Ins::Bin(Bin::Or),
                    ]),
                    5 => self.emit_all(&[Ins::Const(7, CForm::Auto), Ins::Bin(Bin::And)]),
                    6 => self.emit_all(&[
                        Ins::Const(15, CForm::Bipush),
                        Ins::Bin(Bin::And),
                        Ins::Const(4, CForm::Auto),
                        Ins::Bin(Bin::Sub),
                    ]),
                    _ => {
                        let k = self.below(12) as i32;
                        self.emit_all(&[Ins::Pop, Ins::Const(k, CForm::Auto)]);
                    }
                }
                self.emit(Ins::NewArray(e));
                if self.chance(50)
                    && let Some(n) = self.pick_store_local(Ty::Arr(e))
                {
                    let f = self.form();
                    self.emit(Ins::AStore(n, f));
                }
            }
            // a[i] from an array in a local
            Act::ArrElem if room >= 2 => {
                let Some((n, e)) = self.pick_arr_local() else {
                    return false;
                };
                let f = self.form();
                self.emit(Ins::ALoad(n, f));
                self.push_index();
                self.emit(Ins::ALoadElem(e));
            }
            // a[i] = v into an array in a local
            Act::ArrPut if room >= 4 => {
                let Some((n, e)) = self.pick_arr_local() else {
                    return false;
                };
                let f = self.form();
                self.emit(Ins::ALoad(n, f));
                self.push_index();
                self.push_source_simple();
                self.emit(Ins::AStoreElem(e));
            }
            Act::ArrLoad => return self.arr_load(avail, room),
            Act::ArrStore => return self.arr_store(avail, room),
            Act::ArrayLength if avail >= 1 && matches!(self.top(0), Some(Ty::Arr(_))) => {
                self.emit(Ins::ArrayLength);
            }
            Act::ArrayLength if avail >= 1 && self.top(0) == Some(Ty::Null) && self.chance(30) => {
                self.emit(Ins::ArrayLength);
            }
            Act::Null if self.nulls && room >= 1 => self.emit(Ins::AconstNull),
            _ => return false,
        }
        true
    }

    /// After a stack operation, often consume its top at once (`dup_x1;
    /// istore`, `swap; isub`, ...).
    fn after_shuffle(&mut self, floor: usize) {
        if !self.chance(35) || self.len() <= floor || self.top(0) != Some(Ty::Int) {
            return;
        }
        let two = self.len() >= floor + 2 && self.top(1) == Some(Ty::Int);
        if two && self.chance(60) {
            let op = self
                .rng
                .pick(&[Bin::Sub, Bin::Shl, Bin::Ushr, Bin::Xor, Bin::Mul]);
            self.emit(Ins::Bin(op));
        } else if let Some(n) = self.pick_store_local(Ty::Int) {
            let f = self.form();
            self.emit(Ins::IStore(n, f));
        }
    }

    fn arr_load(&mut self, avail: usize, room: usize) -> bool {
        match (avail >= 1).then(|| self.top(0)).flatten() {
            Some(Ty::Arr(e)) if room >= 3 => {
                self.push_index();
                self.emit(Ins::ALoadElem(e));
            }
            Some(Ty::Null) if room >= 3 && self.chance(60) => {
                self.push_index();
                let e = self.rng.pick(&Elem::ALL);
                self.emit(Ins::ALoadElem(e));
            }
            Some(Ty::Int) if avail >= 2 && room >= 1 => {
                let Some(Ty::Arr(e)) = self.top(1) else {
                    return false;
                };
                if self.chance(70) {
                    self.emit_all(&[Ins::Const(7, CForm::Auto), Ins::Bin(Bin::And)]);
                }
                self.emit(Ins::ALoadElem(e));
            }
            _ => return false,
        }
        true
    }

    fn arr_store(&mut self, avail: usize, room: usize) -> bool {
        let top = (avail >= 1).then(|| self.top(0)).flatten();
        match top {
            // [v] -> aload a; swap; <index>; swap; xastore
            Some(Ty::Int) if room >= 3 && self.chance(50) => {
                let Some((n, e)) = self.pick_arr_local() else {
                    return false;
                };
                let f = self.form();
                self.emit_all(&[Ins::ALoad(n, f), Ins::Swap]);
                self.push_index();
                self.emit_all(&[Ins::Swap, Ins::AStoreElem(e)]);
            }
            // [a, i, v] as it is (the index is anything: it may trap)
            Some(Ty::Int) if avail >= 3 && self.top(1) == Some(Ty::Int) && self.chance(30) => {
                let Some(Ty::Arr(e)) = self.top(2) else {
                    return false;
                };
                self.emit(Ins::AStoreElem(e));
            }
            // [a] -> <index>; <value>; xastore
            Some(Ty::Arr(e)) if room >= 4 => {
                self.push_index();
                self.push_source_simple();
                self.emit(Ins::AStoreElem(e));
            }
            // [a, v] -> <index>; swap; xastore
            Some(Ty::Int) if avail >= 2 && room >= 1 => {
                let Some(Ty::Arr(e)) = self.top(1) else {
                    return false;
                };
                let k = self.below(8) as i32;
                self.emit_all(&[Ins::Const(k, CForm::Auto), Ins::Swap, Ins::AStoreElem(e)]);
            }
            _ => return false,
        }
        true
    }

    /// Random code (with control flow up to nesting depth 2) that leaves the
    /// stack below `floor` alone.
    fn segment(&mut self, floor: usize, steps: usize, depth: usize) {
        for _ in 0..steps {
            if depth < 2 && self.chance(self.cf_rate) && self.len() + 4 < HARD_STACK {
                match self.below(3) {
                    0 => self.skip(depth),
                    1 => self.diamond(floor, depth),
                    _ => self.counted_loop(depth),
                }
            } else {
                self.step(floor);
            }
        }
    }

    /// Reduces the stack to `floor + want` entries (`want` 0 or 1, and then
    /// an int on top), by a position-sensitive hash (`bipush 31; imul;
    /// iadd`: h = x + 31 h) or by random ops.
    fn fold(&mut self, floor: usize, want: usize, hash: bool) {
        loop {
            let len = self.len();
            if len < floor + want {
                self.push_source();
                continue;
            }
            let top = self.top(0);
            if len == floor + want {
                match top {
                    Some(Ty::Arr(_)) if want == 1 => self.emit(Ins::ArrayLength),
                    Some(Ty::Null) if want == 1 => self.emit(Ins::Pop),
                    _ => return,
                }
                continue;
            }
            match top {
                Some(Ty::Null) => self.emit(Ins::Pop),
                Some(Ty::Arr(_)) => {
                    let i = if self.chance(50) {
                        Ins::Pop
                    } else {
                        Ins::ArrayLength
                    };
                    self.emit(i);
                }
                _ if len - floor == 1 => {
                    // want == 0: one int left.
                    match self.pick_store_local(Ty::Int) {
                        Some(n) if self.chance(50) => {
                            let f = self.form();
                            self.emit(Ins::IStore(n, f));
                        }
                        _ => self.emit(Ins::Pop),
                    }
                }
                _ if self.top(1) != Some(Ty::Int) => self.emit(Ins::Swap),
                _ if hash => self.emit_all(&[
                    Ins::Const(31, CForm::Bipush),
                    Ins::Bin(Bin::Mul),
                    Ins::Bin(Bin::Add),
                ]),
                _ => match self.below(10) {
                    0..=3 => {
                        let op = self.rng.pick(&Bin::SAFE);
                        self.emit(Ins::Bin(op));
                    }
                    4 => self.emit_all(&[Ins::Swap, Ins::Bin(Bin::Sub)]),
                    5 if len >= floor + want + 2 => self.emit(Ins::Pop2),
                    6 => self.emit(Ins::Pop),
                    7 => match self.pick_store_local(Ty::Int) {
                        Some(n) => {
                            let f = self.form();
                            self.emit(Ins::IStore(n, f));
                        }
                        None => self.emit(Ins::Bin(Bin::Xor)),
                    },
                    _ => self.emit_all(&[
                        Ins::Const(31, CForm::Bipush),
                        Ins::Bin(Bin::Mul),
                        Ins::Bin(Bin::Add),
                    ]),
                },
            }
        }
    }

    /// `goto(_w) L; <dead code>; L:` (the dead code has its own frame).
    fn skip(&mut self, depth: usize) {
        let l = self.new_label();
        let before = self.st().clone();
        let wide = self.chance(70);
        self.emit(if wide { Ins::GotoW(l) } else { Ins::Goto(l) });
        let dead = self.new_label();
        self.place(dead, Some(before));
        let f = self.len();
        let steps = 1 + self.below(6);
        let rate = std::mem::replace(&mut self.cf_rate, 0);
        self.segment(f, steps, depth + 1);
        self.cf_rate = rate;
        if self.chance(20) {
            self.fold(f, 1, false);
            self.emit(Ins::IReturn);
        } else {
            self.fold(f, 0, false);
        }
        self.emit(Ins::Label(l));
    }

    /// `<cond> if L1; <then>; goto(_w) L2; L1: <else>; L2:`, each arm leaving
    /// the same number of ints (0 or 1) on the stack.
    fn diamond(&mut self, floor: usize, depth: usize) {
        let c = self.rng.pick(&Cond::ALL);
        let l_else = self.new_label();
        let l_end = self.new_label();
        let avail = self.len() - floor;
        let int = |g: &Self, k: usize| k < avail && g.top(k) == Some(Ty::Int);
        if self.chance(50) && int(self, 0) && int(self, 1) {
            self.emit(Ins::IfCmp(c, l_else));
        } else if self.chance(50) && int(self, 0) {
            self.emit(Ins::If(c, l_else));
        } else if self.chance(50) {
            self.push_source_simple();
            self.push_source_simple();
            self.emit(Ins::IfCmp(c, l_else));
        } else {
            self.push_source();
            self.emit(Ins::If(c, l_else));
        }
        let f = self.len();
        let want = self.below(2);
        let steps = self.below(8);
        self.segment(f, steps, depth + 1);
        let hash = self.chance(30);
        self.fold(f, want, hash);
        let wide = self.chance(60);
        self.emit(if wide {
            Ins::GotoW(l_end)
        } else {
            Ins::Goto(l_end)
        });
        self.emit(Ins::Label(l_else));
        let steps = self.below(8);
        self.segment(f, steps, depth + 1);
        let hash = self.chance(30);
        self.fold(f, want, hash);
        self.emit(Ins::Label(l_end));
    }

    /// A loop counted by a local, entered with whatever is on the stack.
    fn counted_loop(&mut self, depth: usize) {
        let Some(c) = self.pick_store_local(Ty::Int) else {
            return;
        };
        if c < 2 {
            // Keep the arguments for the code after the loop.
            return;
        }
        let form = self.form();
        if self.chance(50) {
            let n = self.below(5) as i32;
            self.emit(Ins::Const(n, CForm::Auto));
        } else {
            let a = self.below(2) as u16;
            self.emit_all(&[
                Ins::ILoad(a, Form::Auto),
                Ins::Const(3, CForm::Auto),
                Ins::Bin(Bin::And),
            ]);
        }
        self.emit(Ins::IStore(c, form));
        self.reserved.push(c);
        let f = self.len();
        if f > 0 {
            self.note("loop entered with values on the stack");
        }
        let steps = 1 + self.below(10);
        let dec = Ins::Iinc(
            c,
            -1,
            if self.chance(30) {
                Form::Wide
            } else {
                Form::Auto
            },
        );
        let load = Ins::ILoad(c, self.form());
        match self.below(3) {
            // do { body; c--; } while (c > 0);
            0 => {
                let top = self.new_label();
                self.emit(Ins::Label(top));
                self.headers.push(self.st().clone());
                self.segment(f, steps, depth + 1);
                self.fold(f, 0, false);
                self.emit_all(&[dec, load, Ins::If(Cond::Gt, top)]);
            }
            // top: if (c <= 0) goto exit; body; c--; goto(_w) top; exit:
            1 => {
                let top = self.new_label();
                let exit = self.new_label();
                self.emit(Ins::Label(top));
                self.headers.push(self.st().clone());
                self.emit_all(&[load, Ins::If(Cond::Le, exit)]);
                self.segment(f, steps, depth + 1);
                self.fold(f, 0, false);
                self.emit(dec);
                let wide = self.chance(70);
                self.emit(if wide {
                    Ins::GotoW(top)
                } else {
                    Ins::Goto(top)
                });
                self.emit(Ins::Label(exit));
            }
            // goto(_w) test; body: ...; c--; test: if (c > 0) goto body;
            _ => {
                let body = self.new_label();
                let test = self.new_label();
                let entry = self.st().clone();
                let wide = self.chance(50);
                self.emit(if wide {
                    Ins::GotoW(test)
                } else {
                    Ins::Goto(test)
                });
                self.place(body, Some(entry.clone()));
                self.headers.push(entry);
                self.segment(f, steps, depth + 1);
                self.fold(f, 0, false);
                self.emit(dec);
                self.emit(Ins::Label(test));
                self.emit_all(&[load, Ins::If(Cond::Gt, body)]);
            }
        }
        self.headers.pop();
        self.reserved.pop();
    }

    fn finish(self, name: String, origin: String) -> MethodIr {
        assert!(self.st.is_none(), "generator: {name} falls off its end");
        assert!(
            self.pending.iter().all(Option::is_none),
            "generator: {name} branches to a label never placed"
        );
        MethodIr {
            name,
            origin,
            code: self.code,
            max_locals: self.max_locals,
            max_stack: u16::try_from(self.max_stack).expect("max_stack fits"),
            frames: self
                .placed
                .into_iter()
                .map(|f| f.expect("generator: label never placed"))
                .collect(),
            notes: self.notes,
        }
    }
}

/// (entries popped, entries pushed) of a stack operation.
fn shuffle_shape(i: Ins) -> (usize, usize) {
    match i {
        Ins::Pop => (1, 0),
        Ins::Pop2 => (2, 0),
        Ins::Dup => (1, 2),
        Ins::DupX1 => (2, 3),
        Ins::DupX2 => (3, 4),
        Ins::Dup2 => (2, 4),
        Ins::Dup2X1 => (3, 5),
        Ins::Dup2X2 => (4, 6),
        Ins::Swap => (2, 2),
        other => panic!("not a stack operation: {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// The methods.

/// A random method (see the module documentation).
fn random_method(seed: u64, name: String) -> MethodIr {
    let mut rng = Rng::new(seed);
    let max_locals = rng.pick(&[2, 3, 4, 6, 9, 12, 17, 33, 100, 256]);
    let mut g = Gen::new(&mut rng, max_locals);
    g.cap = g.rng.pick(&[4, 6, 8, 12, 16, 24, 40]);
    g.cf_rate = g.rng.pick(&[0, 0, 4, 8, 15]);
    g.nulls = g.chance(25);
    g.div = g.rng.pick(&[0, 3, 10]);
    g.deep = g.chance(30);
    if max_locals >= 5 && g.chance(40) {
        prologue(&mut g);
    }
    // Now and then a long one (a few hundred bytes of code).
    let steps = if g.chance(5) {
        200 + g.below(400)
    } else {
        5 + g.below(80)
    };
    g.segment(0, steps, 0);
    let deep_return = g.chance(15) && g.top(0) == Some(Ty::Int);
    if !deep_return {
        let hash = g.chance(50);
        g.fold(0, 1, hash);
    }
    g.emit(Ins::IReturn);
    let origin = format!(
        "random seed {seed}: max_locals {max_locals}, cap {}, cf {}%",
        g.cap, g.cf_rate
    );
    g.finish(name, origin)
}

/// Locals the matrix methods read: `low` (index 2..7), `high` (index > 8,
/// in memory), and an int array of 8 elements.
struct Prepared {
    low: u16,
    high: u16,
    arr: u16,
}

/// Stores `a + b` in a low local, `b << 3` in a high one, and an int array
/// `{a*1+b ^ ..., ...}` of 8 elements in a third.
fn prologue(g: &mut Gen<'_>) -> Prepared {
    let m = g.max_locals;
    let pick = |g: &mut Gen<'_>, lo: u16, hi: u16, not: &[u16]| loop {
        let n = lo + g.below(usize::from(hi - lo)) as u16;
        if !not.contains(&n) {
            return n;
        }
    };
    let (low, high, arr) = if m >= 12 {
        let low = pick(g, 2, 8, &[]);
        let high = pick(g, 9, m, &[]);
        let arr = if g.chance(50) {
            pick(g, 2, 8, &[low])
        } else {
            pick(g, 9, m, &[high])
        };
        (low, high, arr)
    } else {
        // Few locals: all of them low.
        assert!(m >= 5, "the prologue needs 5 locals");
        let low = pick(g, 2, m, &[]);
        let high = pick(g, 2, m, &[low]);
        let arr = pick(g, 2, m, &[low, high]);
        (low, high, arr)
    };
    let (f1, f2, f3) = (g.form(), g.form(), g.form());
    g.emit_all(&[
        Ins::ILoad(0, Form::Auto),
        Ins::ILoad(1, Form::Auto),
        Ins::Bin(Bin::Add),
        Ins::IStore(low, f1),
        Ins::ILoad(1, Form::Auto),
        Ins::Const(3, CForm::Auto),
        Ins::Bin(Bin::Shl),
        Ins::IStore(high, f2),
        Ins::Const(8, CForm::Bipush),
        Ins::NewArray(Elem::Int),
        Ins::AStore(arr, f3),
    ]);
    for k in 0..8 {
        g.emit_all(&[
            Ins::ALoad(arr, Form::Auto),
            Ins::Const(k, CForm::Auto),
            Ins::ILoad(0, Form::Auto),
            Ins::Const(7 * k + 1, CForm::Auto),
            Ins::Bin(Bin::Mul),
            Ins::ILoad(1, Form::Auto),
            Ins::Bin(Bin::Xor),
            Ins::AStoreElem(Elem::Int),
        ]);
    }
    Prepared { low, high, arr }
}

/// Where a matrix operand comes from.
#[derive(Clone, Copy, Debug)]
enum Src {
    Const,
    Arg,
    Low,
    High,
    Arith,
    Array,
}

const SRCS: [Src; 6] = [
    Src::Const,
    Src::Arg,
    Src::Low,
    Src::High,
    Src::Arith,
    Src::Array,
];

fn push_src(g: &mut Gen<'_>, p: &Prepared, s: Src) {
    match s {
        Src::Const => g.push_const(),
        Src::Arg => {
            let (n, f) = (g.below(2) as u16, g.form());
            g.emit(Ins::ILoad(n, f));
        }
        Src::Low => {
            let f = g.form();
            g.emit(Ins::ILoad(p.low, f));
        }
        Src::High => {
            let f = g.form();
            g.emit(Ins::ILoad(p.high, f));
        }
        Src::Arith => {
            let op = g.rng.pick(&Bin::SAFE);
            let (x, y) = (g.rng.pick(&[0, 1, p.low, p.high]), g.below(2) as u16);
            g.emit_all(&[Ins::ILoad(x, Form::Auto), Ins::ILoad(y, Form::Auto)]);
            if g.chance(50) {
                g.emit(Ins::Swap);
            }
            g.emit(Ins::Bin(op));
        }
        Src::Array => {
            let (f, k) = (g.form(), g.below(8) as i32);
            g.emit_all(&[
                Ins::ALoad(p.arr, f),
                Ins::Const(k, CForm::Auto),
                Ins::ALoadElem(Elem::Int),
            ]);
        }
    }
}

/// A matrix method: `ops` (stack operations) over operands from the
/// sources, with values deep below them, then consumer `consumer`.
fn matrix_method(seed: u64, name: String, ops: &[Ins], consumer: usize) -> MethodIr {
    let mut rng = Rng::new(seed);
    let max_locals = rng.pick(&[12, 40, 256]);
    let mut g = Gen::new(&mut rng, max_locals);
    g.cap = 64;
    let p = prologue(&mut g);
    let deep = g.below(7);
    for _ in 0..deep {
        let s = g.rng.pick(&SRCS);
        push_src(&mut g, &p, s);
    }
    let floor = g.len();
    let srcs: Vec<Src> = (0..4).map(|_| g.rng.pick(&SRCS)).collect();
    for &s in &srcs {
        push_src(&mut g, &p, s);
    }
    for &op in ops {
        g.emit(op);
    }
    consume(&mut g, &p, floor, consumer);
    g.fold(0, 1, true);
    g.emit(Ins::IReturn);
    let origin = format!(
        "matrix seed {seed}: {ops:?} over {srcs:?} above {deep} deep values, consumer {consumer}"
    );
    g.finish(name, origin)
}

/// The consumers of a matrix method's results (everything above `floor`).
fn consume(g: &mut Gen<'_>, p: &Prepared, floor: usize, consumer: usize) {
    match consumer {
        // Store every result in its own local, reload in another order.
        1 => {
            let mut stored = Vec::new();
            while g.len() > floor {
                let n = loop {
                    let n = 2 + g.below(usize::from(g.max_locals) - 2) as u16;
                    if n != p.arr && !stored.contains(&n) {
                        break n;
                    }
                };
                let f = g.form();
                g.emit(Ins::IStore(n, f));
                stored.push(n);
            }
            for _ in 0..stored.len() {
                let i = g.below(stored.len());
                let f = g.form();
                g.emit(Ins::ILoad(stored[i], f));
            }
        }
        // The top duplicated and consumed by different ops.
        2 => g.emit_all(&[
            Ins::Dup,
            Ins::Const(5, CForm::Auto),
            Ins::Bin(Bin::Shl),
            Ins::Swap,
            Ins::Const(3, CForm::Auto),
            Ins::Bin(Bin::Ushr),
            Ins::DupX1,
            Ins::Bin(Bin::Xor),
            Ins::Bin(Bin::Sub),
        ]),
        // Random steps over the results.
        3 => {
            for _ in 0..6 {
                g.step(floor);
            }
        }
        // The top stored into the array, read back beside it.
        4 => {
            let k = g.below(8) as i32;
            let f = g.form();
            g.emit_all(&[
                Ins::ALoad(p.arr, f),
                Ins::Swap,
                Ins::Const(k, CForm::Auto),
                Ins::Swap,
                Ins::AStoreElem(Elem::Int),
                Ins::ALoad(p.arr, Form::Auto),
                Ins::Const(k, CForm::Auto),
                Ins::ALoadElem(Elem::Int),
            ]);
        }
        // A local changed while its old value is on the stack.
        5 => {
            let d = g.rng.pick(&[1000, -32_768, 32_767, 7]);
            let (f1, f2) = (g.form(), g.form());
            g.emit_all(&[
                Ins::IStore(p.high, f1),
                Ins::ILoad(p.high, f2),
                Ins::ILoad(p.low, Form::Auto),
                Ins::Iinc(p.high, d, Form::Wide),
                Ins::Iinc(p.low, -3, Form::Auto),
                Ins::ILoad(p.high, Form::Auto),
                Ins::ILoad(p.low, Form::Wide),
            ]);
        }
        _ => {}
    }
}

/// One method per named shape.
fn fixed_methods(next: &mut impl FnMut() -> String) -> Vec<MethodIr> {
    use Ins::*;
    let hash = [
        Const(31, CForm::Bipush),
        Bin(self::Bin::Mul),
        Bin(self::Bin::Add),
    ];
    let a = ILoad(0, Form::Auto);
    let b = ILoad(1, Form::Auto);
    let c = |v: i32| Const(v, CForm::Auto);
    let mut shapes: Vec<(&str, Vec<Ins>, u16)> = vec![
        ("dup2_x2 of four ints", vec![a, b, c(3), c(-7), Dup2X2], 2),
        ("swap; isub", vec![a, b, Swap, Bin(self::Bin::Sub)], 2),
        (
            "dup_x1; istore",
            vec![
                a,
                b,
                DupX1,
                IStore(5, Form::Auto),
                Bin(self::Bin::Sub),
                ILoad(5, Form::Auto),
            ],
            6,
        ),
        (
            "pop2 of two ints",
            vec![a, b, c(9), c(10), Pop2, Bin(self::Bin::Sub)],
            2,
        ),
        ("dup_x2", vec![a, b, c(1000), DupX2], 2),
        ("dup2", vec![a, b, Dup2, Bin(self::Bin::Shl)], 2),
        (
            "dup2_x1",
            vec![a, c(-1), b, Dup2X1, Bin(self::Bin::Ushr)],
            2,
        ),
        (
            "nop everywhere",
            vec![
                Nop,
                a,
                Nop,
                b,
                Nop,
                Swap,
                Nop,
                Bin(self::Bin::Sub),
                Nop,
                Nop,
            ],
            2,
        ),
        (
            "ldc and ldc_w",
            vec![
                Const(i32::MIN, CForm::Ldc),
                a,
                Bin(self::Bin::Xor),
                Const(0, CForm::Ldc),
                Const(1, CForm::LdcW),
                Const(-5, CForm::LdcW),
                Const(i32::MAX, CForm::LdcW),
                Const(7, CForm::Bipush),
                Const(-3, CForm::Sipush),
                Const(100, CForm::Ldc),
                b,
            ],
            2,
        ),
        (
            "wide with small indices",
            vec![
                ILoad(0, Form::Wide),
                IStore(2, Form::Wide),
                ILoad(1, Form::Wide),
                IStore(3, Form::Wide),
                Iinc(2, 1000, Form::Wide),
                Iinc(3, -1, Form::Wide),
                Iinc(0, 0, Form::Wide),
                ILoad(3, Form::Wide),
                ILoad(2, Form::Wide),
                ILoad(0, Form::Wide),
                ILoad(1, Form::Plain),
            ],
            4,
        ),
        (
            "wide iinc with large deltas",
            vec![
                Iinc(0, 32_767, Form::Wide),
                a,
                Iinc(0, -32_768, Form::Wide),
                a,
                Iinc(1, 12_345, Form::Wide),
                b,
                Iinc(1, -129, Form::Wide),
                Iinc(1, 128, Form::Wide),
                b,
            ],
            2,
        ),
        (
            "a local changed while its value is on the stack",
            vec![
                a,
                Iinc(0, 5, Form::Auto),
                a,
                b,
                a,
                IStore(1, Form::Auto),
                IStore(0, Form::Auto),
                a,
                b,
                b,
                Iinc(1, -1000, Form::Wide),
                b,
            ],
            2,
        ),
        (
            "locals swapped through the stack",
            vec![
                a,
                b,
                IStore(0, Form::Auto),
                IStore(1, Form::Auto),
                a,
                c(1),
                Bin(self::Bin::Shl),
                b,
                Swap,
                IStore(0, Form::Wide),
                IStore(1, Form::Wide),
                a,
                b,
            ],
            2,
        ),
        (
            "x + a[c] out of bounds (javac's shape of `a * b + a[8]`)",
            vec![
                Const(8, CForm::Bipush),
                NewArray(Elem::Int),
                AStore(2, Form::Auto),
                a,
                b,
                Bin(self::Bin::Mul),
                ALoad(2, Form::Auto),
                Const(8, CForm::Bipush),
                ALoadElem(Elem::Int),
                Bin(self::Bin::Add),
            ],
            3,
        ),
        (
            "ireturn over a deep stack",
            vec![a, b, a, Dup2X1, b, Dup2X2, IReturn],
            2,
        ),
    ];
    // A stack 40 deep.
    let mut deep = Vec::new();
    for k in 0..40 {
        deep.push(if k % 3 == 0 { a } else { c(k) });
        if k % 5 == 4 {
            deep.extend([b, Bin(self::Bin::Mul), Swap]);
        }
    }
    shapes.push(("a stack 40 deep", deep, 2));
    // Twelve locals, most in memory, shuffled through dup_x1/dup2_x2.
    let mut many = Vec::new();
    for n in 2..12u16 {
        many.extend([
            a,
            c(i32::from(n)),
            Bin(self::Bin::Mul),
            b,
            Bin(self::Bin::Xor),
        ]);
        many.push(IStore(n, Form::Auto));
    }
    for n in (2..12u16).step_by(2) {
        many.extend([
            ILoad(n, Form::Auto),
            ILoad(n + 1, Form::Wide),
            DupX1,
            IStore(n + 1, Form::Auto),
            Bin(self::Bin::Sub),
            IStore(n, Form::Plain),
        ]);
    }
    for n in 2..12u16 {
        many.push(ILoad(n, Form::Auto));
    }
    shapes.push(("twelve locals", many, 12));

    let mut out = Vec::new();
    for (what, code, max_locals) in shapes {
        let mut rng = Rng::new(0);
        let mut g = Gen::new(&mut rng, max_locals);
        g.cap = 64;
        g.emit_all(&code);
        if g.st.is_some() {
            while g.len() > 1 {
                g.emit_all(&hash);
            }
            g.emit(IReturn);
        }
        out.push(g.finish(next(), what.into()));
    }

    // goto_w forward over dead code, with values on the stack.
    let mut rng = Rng::new(1);
    let mut g = Gen::new(&mut rng, 4);
    let l = g.new_label();
    let dead = g.new_label();
    g.emit_all(&[a, b, c(3), GotoW(l)]);
    let st = St {
        stack: vec![Ty::Int; 3],
        locals: vec![Some(Ty::Int), Some(Ty::Int), None, None],
    };
    g.place(dead, Some(st));
    g.emit_all(&[Pop, c(99), IStore(3, Form::Auto), Dup2, Pop2, c(5), Nop]);
    g.emit(Label(l));
    g.emit_all(&[Bin(self::Bin::Sub), Bin(self::Bin::Mul), IReturn]);
    out.push(g.finish(next(), "goto_w forward over dead code".into()));

    // goto_w as the back edge of a loop entered with two values on the
    // stack; the counter is a wide local.
    let mut rng = Rng::new(2);
    let mut g = Gen::new(&mut rng, 9);
    let top = g.new_label();
    let exit = g.new_label();
    g.emit_all(&[a, b, a, c(3), Bin(self::Bin::And), IStore(8, Form::Wide)]);
    g.emit(Label(top));
    g.emit_all(&[ILoad(8, Form::Wide), If(Cond::Le, exit)]);
    g.emit_all(&[
        DupX1,
        Bin(self::Bin::Add),
        Swap,
        Const(1, CForm::Ldc),
        Bin(self::Bin::Shl),
        Iinc(8, -1, Form::Wide),
        GotoW(top),
    ]);
    g.emit(Label(exit));
    g.emit_all(&hash);
    g.emit(IReturn);
    out.push(g.finish(next(), "goto_w back edge".into()));

    // goto_w forward to a merge with a value on the stack (a ternary).
    let mut rng = Rng::new(3);
    let mut g = Gen::new(&mut rng, 2);
    let other = g.new_label();
    let end = g.new_label();
    g.emit_all(&[
        b,
        a,
        b,
        IfCmp(Cond::Lt, other),
        a,
        Dup,
        Bin(self::Bin::Mul),
        GotoW(end),
    ]);
    g.emit(Label(other));
    g.emit_all(&[b, Neg]);
    g.emit(Label(end));
    g.emit_all(&hash);
    g.emit(IReturn);
    out.push(g.finish(next(), "goto_w to a merge with values on the stack".into()));

    // Every compressed StackMapTable form: a branch over 70 nops
    // (same_frame_extended), three new locals (append), then locals that
    // stop being ints on one path (chop 1, chop 2).
    let mut rng = Rng::new(4);
    let mut g = Gen::new(&mut rng, 5);
    let l: Vec<usize> = (0..4).map(|_| g.new_label()).collect();
    g.emit_all(&[a, If(Cond::Eq, l[0])]);
    g.emit_all(&[Nop; 70]);
    g.emit(Label(l[0]));
    g.emit_all(&[
        a,
        IStore(2, Form::Auto),
        b,
        IStore(3, Form::Auto),
        a,
        b,
        Bin(self::Bin::Sub),
        IStore(4, Form::Auto),
        a,
        If(Cond::Ne, l[1]),
        Iinc(2, 1, Form::Auto),
        Label(l[1]),
        b,
        If(Cond::Eq, l[2]),
        c(3),
        NewArray(Elem::Int),
        AStore(4, Form::Auto),
        Label(l[2]),
        b,
        If(Cond::Lt, l[3]),
        c(2),
        NewArray(Elem::Byte),
        AStore(3, Form::Auto),
        c(1),
        NewArray(Elem::Short),
        AStore(2, Form::Auto),
        Label(l[3]),
        a,
        b,
        Bin(self::Bin::Sub),
    ]);
    g.emit(IReturn);
    out.push(g.finish(next(), "every StackMapTable frame form".into()));
    out
}

/// How many random methods, and the first seed: `HANDMADE_RANDOM=N` and
/// `HANDMADE_SEED=S` for longer runs (default 560 from 50,000).
fn random_count() -> (u64, u64) {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (var("HANDMADE_RANDOM", 560), var("HANDMADE_SEED", 50_000))
}

/// Every method of the test: fixed, matrix and random.
fn all_methods() -> Vec<MethodIr> {
    let mut k = 0;
    let mut next = || {
        k += 1;
        format!("m{}", k - 1)
    };
    let mut out = fixed_methods(&mut next);
    let mut seed = 1000;
    for (i, &op) in SHUFFLES.iter().enumerate() {
        for v in 0..14 {
            seed += 1;
            out.push(matrix_method(seed, next(), &[op], (i + v) % 6));
        }
    }
    let mut rng = Rng::new(77);
    for v in 0..60 {
        let n = 2 + rng.below(3);
        let ops: Vec<Ins> = (0..n).map(|_| rng.pick(&SHUFFLES)).collect();
        seed += 1;
        out.push(matrix_method(seed, next(), &ops, v % 6));
    }
    let (count, first) = random_count();
    for s in 0..count {
        out.push(random_method(first + s, next()));
    }
    out
}

// ---------------------------------------------------------------------------
// The class-file writer.

#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Utf8(String),
    Class(String),
    Int(i32),
}

#[derive(Default)]
struct Pool {
    bytes: Vec<u8>,
    count: u16,
    map: HashMap<Key, u16>,
}

impl Pool {
    fn add(&mut self, key: Key, bytes: &[u8]) -> u16 {
        if let Some(&i) = self.map.get(&key) {
            return i;
        }
        self.count += 1;
        self.bytes.extend_from_slice(bytes);
        self.map.insert(key, self.count);
        self.count
    }

    fn utf8(&mut self, s: &str) -> u16 {
        let mut b = vec![1];
        b.extend_from_slice(&u16::try_from(s.len()).unwrap().to_be_bytes());
        b.extend_from_slice(s.as_bytes());
        self.add(Key::Utf8(s.into()), &b)
    }

    fn class(&mut self, name: &str) -> u16 {
        if let Some(&i) = self.map.get(&Key::Class(name.into())) {
            return i;
        }
        let n = self.utf8(name);
        let mut b = vec![7];
        b.extend_from_slice(&n.to_be_bytes());
        self.add(Key::Class(name.into()), &b)
    }

    fn int(&mut self, v: i32) -> u16 {
        let mut b = vec![3];
        b.extend_from_slice(&v.to_be_bytes());
        self.add(Key::Int(v), &b)
    }

    fn get_int(&self, v: i32) -> u16 {
        self.map[&Key::Int(v)]
    }
}

fn fits_i8(v: i32) -> bool {
    i8::try_from(v).is_ok()
}

fn fits_i16(v: i32) -> bool {
    i16::try_from(v).is_ok()
}

/// Whether `Const(v, form)` takes a pool entry.
fn needs_pool(v: i32, form: CForm) -> bool {
    match form {
        CForm::Auto => !fits_i16(v),
        CForm::Ldc | CForm::LdcW => true,
        CForm::Bipush | CForm::Sipush => false,
    }
}

/// A method's code laid out: the bytes, the bci of every instruction (a
/// label gets the bci of what follows it) and the StackMapTable.
struct Layout {
    code: Vec<u8>,
    bci: Vec<u32>,
    stack_map: Option<Vec<u8>>,
    /// The kind of each StackMapTable entry.
    frame_kinds: Vec<&'static str>,
}

fn local_op(out: &mut Vec<u8>, n: u16, form: Form, short0: u8, plain: u8) {
    match form {
        Form::Auto if n <= 3 => out.push(short0 + n as u8),
        Form::Auto | Form::Plain if n <= 255 => out.extend([plain, n as u8]),
        Form::Plain => panic!("plain local instruction with index {n}"),
        _ => {
            out.extend([0xc4, plain]);
            out.extend(n.to_be_bytes());
        }
    }
}

fn encode(out: &mut Vec<u8>, ins: Ins, pool: &Pool, target: &dyn Fn(usize) -> i64, bci: i64) {
    match ins {
        Ins::Nop => out.push(0x00),
        Ins::AconstNull => out.push(0x01),
        Ins::Const(v, form) => match form {
            CForm::Auto if (-1..=5).contains(&v) => out.push((0x03 + v) as u8),
            CForm::Auto | CForm::Bipush if fits_i8(v) => out.extend([0x10, v as u8]),
            CForm::Auto | CForm::Sipush if fits_i16(v) => {
                out.push(0x11);
                out.extend((v as i16).to_be_bytes());
            }
            CForm::Bipush | CForm::Sipush => panic!("{ins:?} does not fit"),
            CForm::Ldc => {
                let i = pool.get_int(v);
                out.extend([0x12, u8::try_from(i).expect("ldc index < 256")]);
            }
            CForm::Auto | CForm::LdcW => {
                let i = pool.get_int(v);
                match u8::try_from(i) {
                    Ok(i) if form == CForm::Auto => out.extend([0x12, i]),
                    _ => {
                        out.push(0x13);
                        out.extend(i.to_be_bytes());
                    }
                }
            }
        },
        Ins::ILoad(n, f) => local_op(out, n, f, 0x1a, 0x15),
        Ins::ALoad(n, f) => local_op(out, n, f, 0x2a, 0x19),
        Ins::IStore(n, f) => local_op(out, n, f, 0x3b, 0x36),
        Ins::AStore(n, f) => local_op(out, n, f, 0x4b, 0x3a),
        Ins::Iinc(n, d, f) => match (f, u8::try_from(n), i8::try_from(d)) {
            (Form::Auto | Form::Plain, Ok(n), Ok(d)) => out.extend([0x84, n, d as u8]),
            (Form::Plain, ..) => panic!("{ins:?} needs wide"),
            _ => {
                out.extend([0xc4, 0x84]);
                out.extend(n.to_be_bytes());
                out.extend(d.to_be_bytes());
            }
        },
        Ins::Bin(op) => out.push(op.opcode()),
        Ins::Neg => out.push(0x74),
        Ins::I2b => out.push(0x91),
        Ins::I2s => out.push(0x93),
        Ins::Pop => out.push(0x57),
        Ins::Pop2 => out.push(0x58),
        Ins::Dup => out.push(0x59),
        Ins::DupX1 => out.push(0x5a),
        Ins::DupX2 => out.push(0x5b),
        Ins::Dup2 => out.push(0x5c),
        Ins::Dup2X1 => out.push(0x5d),
        Ins::Dup2X2 => out.push(0x5e),
        Ins::Swap => out.push(0x5f),
        Ins::NewArray(e) => out.extend([0xbc, e.atype()]),
        Ins::ArrayLength => out.push(0xbe),
        Ins::ALoadElem(e) => out.push(e.load_opcode()),
        Ins::AStoreElem(e) => out.push(e.store_opcode()),
        Ins::If(_, l) | Ins::IfCmp(_, l) | Ins::Goto(l) => {
            let op = match ins {
                Ins::If(c, _) => 0x99 + c.index(),
                Ins::IfCmp(c, _) => 0x9f + c.index(),
                _ => 0xa7,
            };
            let off = i16::try_from(target(l) - bci).expect("branch offset fits 16 bits");
            out.push(op);
            out.extend(off.to_be_bytes());
        }
        Ins::GotoW(l) => {
            out.push(0xc8);
            out.extend(((target(l) - bci) as i32).to_be_bytes());
        }
        Ins::Label(_) => {}
        Ins::IReturn => out.push(0xac),
    }
}

/// A frame's locals as written: unset ones are `top`, trailing ones dropped.
fn frame_locals(st: &St) -> Vec<Option<Ty>> {
    let mut l = st.locals.clone();
    while l.last() == Some(&None) {
        l.pop();
    }
    l
}

fn vtype(out: &mut Vec<u8>, t: Option<Ty>, pool: &Pool) {
    match t {
        None => out.push(0),
        Some(Ty::Int) => out.push(1),
        Some(Ty::Null) => out.push(5),
        Some(Ty::Arr(e)) => {
            out.push(7);
            out.extend(pool.map[&Key::Class(e.descriptor().into())].to_be_bytes());
        }
    }
}

/// The StackMapTable entries (JVMS §4.7.4), each in the most compact form
/// that applies: same, same_locals_1_stack_item (and their extended forms),
/// chop, append, else full.
fn stack_map(frames: &[(u32, &St)], pool: &Pool, kinds: &mut Vec<&'static str>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(u16::try_from(frames.len()).unwrap().to_be_bytes());
    let mut prev_locals = vec![Some(Ty::Int), Some(Ty::Int)];
    let mut prev_bci: i64 = -1;
    for &(bci, st) in frames {
        let delta = u16::try_from(i64::from(bci) - prev_bci - 1).expect("frames in bci order");
        prev_bci = i64::from(bci);
        let locals = frame_locals(st);
        let same = locals == prev_locals;
        let (n, p) = (locals.len(), prev_locals.len());
        if same && st.stack.is_empty() && delta < 64 {
            out.push(delta as u8);
            kinds.push("same_frame");
        } else if same && st.stack.len() == 1 && delta < 64 {
            out.push(64 + delta as u8);
            kinds.push("same_locals_1_stack_item_frame");
            vtype(&mut out, Some(st.stack[0]), pool);
        } else if same && st.stack.len() == 1 {
            out.push(247);
            kinds.push("same_locals_1_stack_item_frame_extended");
            out.extend(delta.to_be_bytes());
            vtype(&mut out, Some(st.stack[0]), pool);
        } else if same && st.stack.is_empty() {
            out.push(251);
            kinds.push("same_frame_extended");
            out.extend(delta.to_be_bytes());
        } else if st.stack.is_empty() && n < p && p - n <= 3 && locals[..] == prev_locals[..n] {
            out.push(251 - (p - n) as u8);
            kinds.push("chop_frame");
            out.extend(delta.to_be_bytes());
        } else if st.stack.is_empty() && n > p && n - p <= 3 && locals[..p] == prev_locals[..] {
            out.push(251 + (n - p) as u8);
            kinds.push("append_frame");
            out.extend(delta.to_be_bytes());
            for &t in &locals[p..] {
                vtype(&mut out, t, pool);
            }
        } else {
            out.push(255);
            kinds.push("full_frame");
            out.extend(delta.to_be_bytes());
            out.extend(u16::try_from(n).unwrap().to_be_bytes());
            for &t in &locals {
                vtype(&mut out, t, pool);
            }
            out.extend(u16::try_from(st.stack.len()).unwrap().to_be_bytes());
            for &t in &st.stack {
                vtype(&mut out, Some(t), pool);
            }
        }
        prev_locals = locals;
    }
    out
}

fn layout(m: &MethodIr, pool: &Pool) -> Layout {
    // Sizes do not depend on where labels are: one pass for the bcis...
    let mut bci = Vec::with_capacity(m.code.len());
    let mut at = 0usize;
    let mut label_bci = vec![0i64; m.frames.len()];
    let no_target = |_: usize| 0;
    for &ins in &m.code {
        bci.push(at as u32);
        if let Ins::Label(l) = ins {
            label_bci[l] = at as i64;
        }
        let mut tmp = Vec::new();
        encode(&mut tmp, ins, pool, &no_target, 0);
        at += tmp.len();
    }
    // ...one for the bytes.
    let mut code = Vec::with_capacity(at);
    let target = |l: usize| label_bci[l];
    for (i, &ins) in m.code.iter().enumerate() {
        assert_eq!(code.len() as u32, bci[i]);
        encode(&mut code, ins, pool, &target, i64::from(bci[i]));
    }
    let mut frames: Vec<(u32, &St)> = m
        .code
        .iter()
        .zip(&bci)
        .filter_map(|(&ins, &b)| match ins {
            Ins::Label(l) => Some((b, &m.frames[l])),
            _ => None,
        })
        .collect();
    frames.sort_by_key(|f| f.0);
    for w in frames.windows(2) {
        assert!(w[0].0 < w[1].0, "{}: two frames at bci {}", m.name, w[0].0);
    }
    let mut frame_kinds = Vec::new();
    let stack_map = (!frames.is_empty()).then(|| stack_map(&frames, pool, &mut frame_kinds));
    Layout {
        code,
        bci,
        stack_map,
        frame_kinds,
    }
}

/// One class `Hand` holding `methods`, and each method's layout.
fn write_class(methods: &[MethodIr]) -> (Vec<u8>, Vec<Layout>) {
    let mut pool = Pool::default();
    // ldc's constants first: their indices must be < 256.
    for v in PALETTE {
        pool.int(v);
    }
    for m in methods {
        for &i in &m.code {
            if let Ins::Const(v, form) = i
                && needs_pool(v, form)
            {
                let at = pool.int(v);
                assert!(
                    form != CForm::Ldc || at < 256,
                    "ldc of {v} outside the palette"
                );
            }
        }
    }
    let this = pool.class("Hand");
    let sup = pool.class("java/lang/Object");
    for e in Elem::ALL {
        pool.class(e.descriptor());
    }
    let code_name = pool.utf8("Code");
    let map_name = pool.utf8("StackMapTable");
    let desc = pool.utf8("(II)I");
    let names: Vec<u16> = methods.iter().map(|m| pool.utf8(&m.name)).collect();

    let layouts: Vec<Layout> = methods.iter().map(|m| layout(m, &pool)).collect();
    let mut out = Vec::new();
    out.extend(0xcafe_babe_u32.to_be_bytes());
    out.extend(0u16.to_be_bytes());
    out.extend(52u16.to_be_bytes());
    out.extend((pool.count + 1).to_be_bytes());
    out.extend(&pool.bytes);
    out.extend(0x0021u16.to_be_bytes()); // public super
    out.extend(this.to_be_bytes());
    out.extend(sup.to_be_bytes());
    out.extend(0u16.to_be_bytes()); // interfaces
    out.extend(0u16.to_be_bytes()); // fields
    out.extend(u16::try_from(methods.len()).unwrap().to_be_bytes());
    for ((m, lay), &name) in methods.iter().zip(&layouts).zip(&names) {
        out.extend(0x0009u16.to_be_bytes()); // public static
        out.extend(name.to_be_bytes());
        out.extend(desc.to_be_bytes());
        out.extend(1u16.to_be_bytes());
        let mut attr = Vec::new();
        attr.extend(m.max_stack.to_be_bytes());
        attr.extend(m.max_locals.to_be_bytes());
        attr.extend(u32::try_from(lay.code.len()).unwrap().to_be_bytes());
        attr.extend(&lay.code);
        attr.extend(0u16.to_be_bytes()); // exception table
        match &lay.stack_map {
            Some(map) => {
                attr.extend(1u16.to_be_bytes());
                attr.extend(map_name.to_be_bytes());
                attr.extend(u32::try_from(map.len()).unwrap().to_be_bytes());
                attr.extend(map);
            }
            None => attr.extend(0u16.to_be_bytes()),
        }
        out.extend(code_name.to_be_bytes());
        out.extend(u32::try_from(attr.len()).unwrap().to_be_bytes());
        out.extend(attr);
    }
    out.extend(0u16.to_be_bytes()); // attributes
    (out, layouts)
}

// ---------------------------------------------------------------------------
// The evaluator: JVMS chapter 6 over the instruction list.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum V {
    I(i32),
    Ref(usize),
    Null,
}

/// What an invocation must give: the value or the trap, and the fuel used.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    result: Result<i32, Trap>,
    fuel: u64,
}

fn eval(m: &MethodIr, bci: &[u32], args: [i32; 2], fuel: Option<u64>) -> Expected {
    let mut label_at = vec![0usize; m.frames.len()];
    for (i, &ins) in m.code.iter().enumerate() {
        if let Ins::Label(l) = ins {
            label_at[l] = i;
        }
    }
    let mut stack: Vec<V> = Vec::new();
    let mut locals: Vec<Option<V>> = vec![None; usize::from(m.max_locals)];
    locals[0] = Some(V::I(args[0]));
    locals[1] = Some(V::I(args[1]));
    let mut arrays: Vec<(Elem, Vec<i32>)> = Vec::new();
    let mut used = 0u64;
    let mut pc = 0usize;
    fn int(v: Option<V>) -> i32 {
        match v {
            Some(V::I(x)) => x,
            other => panic!("evaluator: int expected, found {other:?}"),
        }
    }
    for _ in 0..10_000_000 {
        let ins = m.code[pc];
        let here = bci[pc];
        pc += 1;
        let trap = |kind: TrapKind| Trap {
            kind,
            method: m.id(),
            bci: here,
        };
        let mut jump: Option<usize> = None;
        match ins {
            Ins::Nop | Ins::Label(_) => {}
            Ins::Const(v, _) => stack.push(V::I(v)),
            Ins::AconstNull => stack.push(V::Null),
            Ins::ILoad(n, _) => stack.push(V::I(int(locals[usize::from(n)]))),
            Ins::ALoad(n, _) => stack.push(locals[usize::from(n)].expect("evaluator: aload")),
            Ins::IStore(n, _) | Ins::AStore(n, _) => {
                locals[usize::from(n)] = Some(stack.pop().expect("evaluator: underflow"));
            }
            Ins::Iinc(n, d, _) => {
                let x = int(locals[usize::from(n)]);
                locals[usize::from(n)] = Some(V::I(x.wrapping_add(i32::from(d))));
            }
            Ins::Bin(op) => {
                let y = int(stack.pop());
                let x = int(stack.pop());
                match op.eval(x, y) {
                    Some(v) => stack.push(V::I(v)),
                    None => {
                        return Expected {
                            result: Err(trap(TrapKind::DivisionByZero)),
                            fuel: used,
                        };
                    }
                }
            }
            Ins::Neg => {
                let x = int(stack.pop());
                stack.push(V::I(x.wrapping_neg()));
            }
            Ins::I2b => {
                let x = int(stack.pop());
                stack.push(V::I(i32::from(x as i8)));
            }
            Ins::I2s => {
                let x = int(stack.pop());
                stack.push(V::I(i32::from(x as i16)));
            }
            // JVMS §6.5: value1 is the top of the stack.
            Ins::Pop => {
                stack.pop().expect("evaluator: underflow");
            }
            Ins::Pop2 => {
                stack.truncate(stack.len().checked_sub(2).expect("evaluator: underflow"));
            }
            Ins::Dup | Ins::DupX1 | Ins::DupX2 | Ins::Dup2 | Ins::Dup2X1 | Ins::Dup2X2 => {
                let k = match ins {
                    Ins::Dup => 1,
                    Ins::DupX1 | Ins::Dup2 => 2,
                    Ins::DupX2 | Ins::Dup2X1 => 3,
                    _ => 4,
                };
                let at = stack.len().checked_sub(k).expect("evaluator: underflow");
                let v: Vec<V> = stack.split_off(at); // v[k-1] is value1
                let new: Vec<V> = match (ins, &v[..]) {
                    (Ins::Dup, &[v1]) => vec![v1, v1],
                    (Ins::DupX1, &[v2, v1]) => vec![v1, v2, v1],
                    (Ins::DupX2, &[v3, v2, v1]) => vec![v1, v3, v2, v1],
                    (Ins::Dup2, &[v2, v1]) => vec![v2, v1, v2, v1],
                    (Ins::Dup2X1, &[v3, v2, v1]) => vec![v2, v1, v3, v2, v1],
                    (Ins::Dup2X2, &[v4, v3, v2, v1]) => vec![v2, v1, v4, v3, v2, v1],
                    _ => unreachable!(),
                };
                stack.extend(new);
            }
            Ins::Swap => {
                let v1 = stack.pop().expect("evaluator: underflow");
                let v2 = stack.pop().expect("evaluator: underflow");
                stack.extend([v1, v2]);
            }
            Ins::NewArray(e) => {
                let n = int(stack.pop());
                if n < 0 {
                    return Expected {
                        result: Err(trap(TrapKind::NegativeArraySize(n))),
                        fuel: used,
                    };
                }
                arrays.push((e, vec![0; n as usize]));
                stack.push(V::Ref(arrays.len() - 1));
            }
            Ins::ArrayLength => match stack.pop() {
                Some(V::Ref(r)) => stack.push(V::I(arrays[r].1.len() as i32)),
                Some(V::Null) => {
                    return Expected {
                        result: Err(trap(TrapKind::NullPointer)),
                        fuel: used,
                    };
                }
                other => panic!("evaluator: arraylength of {other:?}"),
            },
            Ins::ALoadElem(_) | Ins::AStoreElem(_) => {
                let value = matches!(ins, Ins::AStoreElem(_)).then(|| int(stack.pop()));
                let index = int(stack.pop());
                let r = match stack.pop() {
                    Some(V::Ref(r)) => r,
                    Some(V::Null) => {
                        return Expected {
                            result: Err(trap(TrapKind::NullPointer)),
                            fuel: used,
                        };
                    }
                    other => panic!("evaluator: array expected, found {other:?}"),
                };
                let (e, data) = &mut arrays[r];
                let length = data.len() as i32;
                if index < 0 || index >= length {
                    return Expected {
                        result: Err(trap(TrapKind::ArrayIndexOutOfBounds { index, length })),
                        fuel: used,
                    };
                }
                match value {
                    Some(v) => data[index as usize] = e.narrow(v),
                    None => stack.push(V::I(data[index as usize])),
                }
            }
            Ins::If(c, l) => {
                if c.holds(int(stack.pop()), 0) {
                    jump = Some(l);
                }
            }
            Ins::IfCmp(c, l) => {
                let y = int(stack.pop());
                let x = int(stack.pop());
                if c.holds(x, y) {
                    jump = Some(l);
                }
            }
            Ins::Goto(l) | Ins::GotoW(l) => jump = Some(l),
            Ins::IReturn => {
                return Expected {
                    result: Ok(int(stack.pop())),
                    fuel: used,
                };
            }
        }
        if let Some(l) = jump {
            let t = label_at[l];
            // A taken branch to a bci at or before its own charges one unit.
            if bci[t] <= here {
                if fuel == Some(used) {
                    return Expected {
                        result: Err(trap(TrapKind::FuelExhausted(used))),
                        fuel: used,
                    };
                }
                used += 1;
            }
            pc = t;
        }
    }
    panic!("evaluator: {} runs away", m.name);
}

// ---------------------------------------------------------------------------
// The classes.

/// Most methods per class (jive's default limit is 256).
const PER_CLASS: usize = 200;

struct Class {
    bytes: Vec<u8>,
    methods: Vec<MethodIr>,
    layouts: Vec<Layout>,
}

fn classes() -> Vec<Class> {
    all_methods()
        .chunks(PER_CLASS)
        .map(|ms| {
            let (bytes, layouts) = write_class(ms);
            Class {
                bytes,
                methods: ms.to_vec(),
                layouts,
            }
        })
        .collect()
}

fn listing(m: &MethodIr, lay: &Layout) -> String {
    let mut s = format!(
        "{} ({}), max_stack {}, max_locals {}:\n",
        m.id(),
        m.origin,
        m.max_stack,
        m.max_locals
    );
    for (ins, b) in m.code.iter().zip(&lay.bci) {
        let _ = writeln!(s, "  {b:5}: {ins:?}");
    }
    s
}

fn engine_under_test() -> Engine {
    if std::env::var_os("HANDMADE_SELF_CHECK").is_some_and(|v| v != "0") {
        Engine::Interpreter
    } else {
        Engine::Jit
    }
}

fn to_expected(r: Result<jive::Outcome, InvokeError>) -> Result<Expected, InvokeError> {
    match r {
        Ok(o) => Ok(Expected {
            result: Ok(o.value.expect("an int method returns a value")),
            fuel: o.fuel_used,
        }),
        Err(InvokeError::Trap(t)) => Ok(Expected {
            result: Err(t),
            fuel: 0,
        }),
        Err(e) => Err(e),
    }
}

/// Whether `got` is `want`'s trap (kind and fuel) at another bci.
fn bci_only(got: &Result<Expected, InvokeError>, want: &Expected) -> bool {
    match (got, &want.result) {
        (Ok(g), Err(w)) => match &g.result {
            Err(t) => t.kind == w.kind && t.bci != w.bci && g.fuel == want.fuel,
            Ok(_) => false,
        },
        _ => false,
    }
}

/// Whether `got` traps at the `iadd` right after the `iaload` where `want`
/// traps, the `iaload` loading a constant index of an array (the shape that
/// decode fuses into `AddIALoadLC`).
fn add_after_iaload(
    m: &MethodIr,
    lay: &Layout,
    got: &Result<Expected, InvokeError>,
    want: &Expected,
) -> bool {
    let (Ok(Expected { result: Err(g), .. }), Err(w)) = (got, &want.result) else {
        return false;
    };
    let Some(i) =
        (0..m.code.len()).find(|&i| lay.bci[i] == w.bci && !matches!(m.code[i], Ins::Label(_)))
    else {
        return false;
    };
    i >= 2
        && matches!(m.code[i - 2], Ins::ALoad(..))
        && matches!(m.code[i - 1], Ins::Const(..))
        && m.code[i] == Ins::ALoadElem(Elem::Int)
        && m.code.get(i + 1) == Some(&Ins::Bin(Bin::Add))
        && lay.bci.get(i + 1) == Some(&g.bci)
}

/// Failing calls: how many per kind of problem and method, and the first
/// few in full.
#[derive(Default)]
struct Failures {
    per_kind: BTreeMap<&'static str, BTreeMap<String, usize>>,
    first: Vec<String>,
}

impl Failures {
    fn note(&mut self, kind: &'static str, method: &str, message: impl FnOnce() -> String) {
        let n = self
            .per_kind
            .entry(kind)
            .or_default()
            .entry(method.into())
            .or_default();
        *n += 1;
        if *n == 1 && self.first.len() < 6 {
            self.first.push(format!("{kind}: {}", message()));
        }
    }

    fn check(&self, what: &str) {
        if self.per_kind.is_empty() {
            return;
        }
        let mut s = String::new();
        for (kind, methods) in &self.per_kind {
            let total: usize = methods.values().sum();
            let names: Vec<&str> = methods.keys().map(String::as_str).collect();
            let _ = writeln!(
                s,
                "{kind}: {total} calls in {} methods {names:?}",
                names.len()
            );
        }
        panic!(
            "calls {what}:\n{s}the first call of each of the first methods:\n{}",
            self.first.join("\n")
        );
    }
}

/// Runs every method of `class` on the grid on both engines under `fuel`,
/// noting disagreements in `bad`. Returns the number of calls.
fn run_grid(
    class: &Class,
    pair: &mut [Applet; 2],
    fuel: Option<u64>,
    only_loops: bool,
    bad: &mut Failures,
) -> usize {
    for a in pair.iter_mut() {
        a.set_run_limits(fuel, 256);
    }
    assert_eq!(pair[1].engine(), engine_under_test(), "the JIT compiles");
    let mut calls = 0;
    for (m, lay) in class.methods.iter().zip(&class.layouts) {
        if only_loops && !m.has_back_edges() {
            continue;
        }
        for &x in &ARGS {
            for &y in &ARGS {
                calls += 1;
                let mut want = eval(m, &lay.bci, [x, y], fuel);
                if fuel.is_none() {
                    want.fuel = 0;
                }
                if want.result.is_err() {
                    // A trap reports no fuel.
                    want.fuel = 0;
                }
                let interp = to_expected(pair[0].invoke(&m.name, &[x, y]));
                let jit = to_expected(pair[1].invoke(&m.name, &[x, y]));
                let heaps = |a: &Applet| (a.heap().bytes_in_use(), a.heap().object_count());
                let problems = [
                    (jit != interp, "JIT differs from the interpreter"),
                    (
                        heaps(&pair[0]) != heaps(&pair[1]),
                        "heaps differ after the call",
                    ),
                    (
                        interp.as_ref() != Ok(&want) && !bci_only(&interp, &want),
                        "interpreter differs from the evaluator",
                    ),
                    (
                        bci_only(&interp, &want) && !add_after_iaload(m, lay, &interp, &want),
                        "interpreter traps at another bci than the evaluator",
                    ),
                    (
                        bci_only(&interp, &want) && add_after_iaload(m, lay, &interp, &want),
                        "interpreter reports the bci of the iadd after a trapping \
                         `aload; const; iaload` (decode's AddIALoadLC), not the iaload's",
                    ),
                ];
                for (_, p) in problems.into_iter().filter(|p| p.0) {
                    bad.note(p, &m.name, || {
                        format!(
                            "{}({x}, {y}) with fuel {fuel:?}\n  evaluator:   {want:?}\n  interpreter: {interp:?}\n  JIT:         {jit:?}\n{}",
                            m.name,
                            listing(m, lay)
                        )
                    });
                }
            }
        }
    }
    calls
}

#[test]
fn handmade_methods_agree_with_the_evaluator_on_both_engines() {
    if !jive::jit::available() && engine_under_test() == Engine::Jit {
        eprintln!("skipped: the JIT has no backend for this CPU");
        return;
    }
    let classes = classes();
    let methods: usize = classes.iter().map(|c| c.methods.len()).sum();
    assert!(methods >= 600, "{methods} methods");
    let mut calls = 0;
    let mut bad = Failures::default();
    for (i, class) in classes.iter().enumerate() {
        if let Err(e) = jive::check(&class.bytes, &Limits::default()) {
            // Name the method's code when the error names one.
            let detail = class
                .methods
                .iter()
                .zip(&class.layouts)
                .find(|(m, _)| e.to_string().contains(&format!("{}(", m.name)))
                .map(|(m, l)| listing(m, l))
                .unwrap_or_default();
            panic!("class {i} does not pass jive::check: {e}\n{detail}");
        }
        let load = |engine| {
            Applet::load_with_engine(&class.bytes, &Natives::new(), Limits::default(), engine)
                .unwrap_or_else(|e| panic!("class {i} does not load on {engine:?}: {e}"))
        };
        let mut pair = [load(Engine::Interpreter), load(engine_under_test())];
        assert_eq!(pair[1].engine(), engine_under_test());
        calls += run_grid(class, &mut pair, Limits::default().fuel, false, &mut bad);
        calls += run_grid(class, &mut pair, None, false, &mut bad);
        // Small budgets: loops run out of fuel at exactly the evaluator's
        // back edge.
        for f in [0, 1, 2, 3, 5, 8] {
            calls += run_grid(class, &mut pair, Some(f), true, &mut bad);
        }
    }
    bad.check("that disagree");
    eprintln!(
        "{methods} hand-made methods in {} classes, {calls} calls agree on both engines",
        classes.len()
    );
}

/// Counts, over every method, the bytecodes and shapes the test is for, and
/// requires each to appear often.
#[test]
fn the_methods_cover_the_rare_bytecodes() {
    let mut n: HashMap<&str, usize> = HashMap::new();
    let mut outcomes: HashMap<String, usize> = HashMap::new();
    for class in classes() {
        for (m, lay) in class.methods.iter().zip(&class.layouts) {
            let code = &m.code;
            for (i, &ins) in code.iter().enumerate() {
                let next = code.get(i + 1).copied();
                let name = match ins {
                    Ins::Swap => "swap",
                    Ins::Pop2 => "pop2",
                    Ins::DupX1 => "dup_x1",
                    Ins::DupX2 => "dup_x2",
                    Ins::Dup2 => "dup2",
                    Ins::Dup2X1 => "dup2_x1",
                    Ins::Dup2X2 => "dup2_x2",
                    Ins::Nop => "nop",
                    Ins::GotoW(l)
                        if lay.bci[code.iter().position(|&x| x == Ins::Label(l)).unwrap()]
                            <= lay.bci[i] =>
                    {
                        "goto_w back"
                    }
                    Ins::GotoW(_) => "goto_w forward",
                    Ins::Const(_, CForm::Ldc) => "ldc",
                    Ins::Const(_, CForm::LdcW) => "ldc_w",
                    Ins::ILoad(k, Form::Wide) if k <= 3 => "wide iload 0-3",
                    Ins::IStore(k, Form::Wide) if k <= 3 => "wide istore 0-3",
                    Ins::Iinc(k, _, Form::Wide) if k <= 3 => "wide iinc 0-3",
                    Ins::Iinc(_, d, Form::Wide) if i8::try_from(d).is_err() => "wide iinc large",
                    Ins::ILoad(k, _) | Ins::IStore(k, _) if k > 8 => "local > 8",
                    _ => "",
                };
                *n.entry(name).or_default() += 1;
                let pair = match (ins, next) {
                    (Ins::Swap, Some(Ins::Bin(Bin::Sub))) => "swap; isub",
                    (Ins::DupX1, Some(Ins::IStore(..))) => "dup_x1; istore",
                    _ => "",
                };
                *n.entry(pair).or_default() += 1;
            }
            for (&what, &k) in &m.notes {
                *n.entry(what).or_default() += k;
            }
            for &kind in &lay.frame_kinds {
                *n.entry(kind).or_default() += 1;
            }
            if m.max_stack >= 10 {
                *n.entry("stack depth 10+").or_default() += 1;
            }
            if m.max_locals > 8 {
                *n.entry("more than 8 locals").or_default() += 1;
            }
            for &x in &ARGS {
                for &y in &ARGS {
                    let e = eval(m, &lay.bci, [x, y], None);
                    let k = match e.result {
                        Ok(_) => "value".to_string(),
                        Err(t) => {
                            let k = format!("{:?}", t.kind);
                            k.split([' ', '(', '{']).next().unwrap_or("").to_string()
                        }
                    };
                    *outcomes.entry(k).or_default() += 1;
                }
            }
        }
    }
    let mut missing = Vec::new();
    for what in [
        "swap",
        "pop2",
        "dup_x1",
        "dup_x2",
        "dup2",
        "dup2_x1",
        "dup2_x2",
        "nop",
        "goto_w back",
        "goto_w forward",
        "ldc",
        "ldc_w",
        "wide iload 0-3",
        "wide istore 0-3",
        "wide iinc 0-3",
        "wide iinc large",
        "local > 8",
        "swap; isub",
        "dup_x1; istore",
        "pop2 of two ints",
        "dup2_x2 of four ints",
        "dup2_x1 of three ints",
        "dup_x2 of three ints",
        "stack op moving a reference",
        "branch with values on the stack",
        "loop entered with values on the stack",
        "stack depth 10+",
        "more than 8 locals",
    ] {
        let c = n.get(what).copied().unwrap_or(0);
        if c < 20 {
            missing.push(format!("{what}: {c}"));
        }
    }
    for kind in [
        "same_frame",
        "same_frame_extended",
        "same_locals_1_stack_item_frame",
        "same_locals_1_stack_item_frame_extended",
        "chop_frame",
        "append_frame",
        "full_frame",
    ] {
        let c = n.get(kind).copied().unwrap_or(0);
        if c == 0 {
            missing.push(format!("StackMapTable {kind}: {c}"));
        }
    }
    for t in [
        "DivisionByZero",
        "ArrayIndexOutOfBounds",
        "NegativeArraySize",
        "NullPointer",
    ] {
        if outcomes.get(t).copied().unwrap_or(0) < 100 {
            missing.push(format!("trap {t}: {:?}", outcomes.get(t)));
        }
    }
    // Most calls run to their end.
    let calls: usize = outcomes.values().sum();
    let values = outcomes.get("value").copied().unwrap_or(0);
    if values * 10 < calls * 7 {
        missing.push(format!("calls returning a value: {values} of {calls}"));
    }
    let mut shown: Vec<_> = n.iter().filter(|(k, _)| !k.is_empty()).collect();
    shown.sort();
    eprintln!("coverage: {shown:?}\noutcomes: {outcomes:?}");
    assert!(missing.is_empty(), "too rare: {missing:?}");
}

/// The evaluator's stack operations on the JVMS's own examples.
#[test]
fn the_evaluator_follows_the_jvms() {
    // Each op over [1, 2, 3, 4] (4 on top), then read back through a hash
    // that keeps every position.
    let cases: [(Ins, &[i32]); 9] = [
        (Ins::Swap, &[1, 2, 4, 3]),
        (Ins::Pop, &[1, 2, 3]),
        (Ins::Pop2, &[1, 2]),
        (Ins::Dup, &[1, 2, 3, 4, 4]),
        (Ins::DupX1, &[1, 2, 4, 3, 4]),
        (Ins::DupX2, &[1, 4, 2, 3, 4]),
        (Ins::Dup2, &[1, 2, 3, 4, 3, 4]),
        (Ins::Dup2X1, &[1, 3, 4, 2, 3, 4]),
        (Ins::Dup2X2, &[3, 4, 1, 2, 3, 4]),
    ];
    for (op, want) in cases {
        let mut code: Vec<Ins> = (1..=4).map(|v| Ins::Const(v, CForm::Auto)).collect();
        code.push(op);
        for _ in 1..want.len() {
            code.extend([
                Ins::Const(10, CForm::Auto),
                Ins::Bin(Bin::Mul),
                Ins::Bin(Bin::Add),
            ]);
        }
        code.push(Ins::IReturn);
        let m = MethodIr {
            name: "t".into(),
            origin: String::new(),
            code,
            max_locals: 2,
            max_stack: 8,
            frames: Vec::new(),
            notes: BTreeMap::new(),
        };
        let bci: Vec<u32> = (0..m.code.len() as u32).collect();
        // h = x1 + 10 * (x2 + 10 * (...)): the top is the leading digit.
        let digits = want.iter().rev().fold(0, |h, d| h * 10 + d);
        assert_eq!(eval(&m, &bci, [0, 0], None).result, Ok(digits), "{op:?}");
    }
}

/// HotSpot's name of a trap's exception, as the harness prints it.
fn java_name(k: &TrapKind) -> String {
    match k {
        TrapKind::ArrayIndexOutOfBounds { .. } => "!ArrayIndexOutOfBoundsException".into(),
        TrapKind::NullPointer => "!NullPointerException".into(),
        TrapKind::DivisionByZero => "!ArithmeticException".into(),
        TrapKind::NegativeArraySize(_) => "!NegativeArraySizeException".into(),
        other => format!("!jive-only trap {other}"),
    }
}

/// The writer and the evaluator against HotSpot: its verifier accepts every
/// class (a version 52 class is verified by type checking, with no fallback),
/// and every call gives the evaluator's value or an exception of its trap's
/// kind. Needs `java` and the harness the build script compiles.
#[test]
fn hotspot_agrees_with_the_evaluator() {
    let Some(harness) = common::classes("harness") else {
        return;
    };
    let java = std::env::var("JAVA").unwrap_or_else(|_| "java".into());
    if Command::new(&java)
        .arg("-version")
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        eprintln!("skipped: `{java}` not found, so there is no HotSpot to compare with");
        return;
    }
    let classes = classes();
    let root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("handmade-{}", std::process::id()));
    // One JVM per class (they are all named Hand), all at once.
    let mut children = Vec::new();
    for (i, class) in classes.iter().enumerate() {
        let dir = root.join(format!("c{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Hand.class"), &class.bytes).unwrap();
        let mut input = String::new();
        for m in &class.methods {
            for x in ARGS {
                for y in ARGS {
                    let _ = writeln!(input, "Hand {} {x} {y}", m.name);
                }
            }
        }
        let cp = format!("{}:{}", dir.display(), harness.display());
        let mut child = Command::new(&java)
            .args([
                "-Xshare:auto",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                &cp,
                "Harness",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start java");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        children.push(child);
    }
    let mut bad = Failures::default();
    let mut calls = 0;
    for ((i, class), child) in classes.iter().enumerate().zip(children) {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "HotSpot rejects or fails on class {i}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = text.lines();
        for (m, lay) in class.methods.iter().zip(&class.layouts) {
            for x in ARGS {
                for y in ARGS {
                    calls += 1;
                    let got = lines.next().unwrap_or("<no output>");
                    let want = match eval(m, &lay.bci, [x, y], None).result {
                        Ok(v) => v.to_string(),
                        Err(t) => java_name(&t.kind),
                    };
                    if got != want {
                        bad.note("HotSpot differs from the evaluator", &m.name, || {
                            format!(
                                "{}({x}, {y}): HotSpot {got}, evaluator {want}\n{}",
                                m.name,
                                listing(m, lay)
                            )
                        });
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    bad.check("that disagree with HotSpot");
    eprintln!("{calls} calls agree with HotSpot");
}
