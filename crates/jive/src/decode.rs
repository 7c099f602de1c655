//! One-time decoding of verified bytecode into jive's internal form.
//!
//! The U-Net/SLE paper (§3.3) names calls and field accesses as JIVE's most
//! expensive operations, because each one looked up the constant pool and
//! the class's member tables at run time. jive pays that cost once, here:
//! every method becomes a flat vector of [`Op`]s of 8 bytes each, in which
//!
//! - field references are slot numbers in the static or instance field array,
//! - method references are indices into the method table (or the native table),
//! - branch targets are indices into the `Op` vector, not byte offsets,
//! - `ldc`, `bipush`, `sipush` and `iconst_*` are one `Const`,
//! - `iload`/`aload` (and `istore`/`astore`) share one op, since references
//!   are heap handles held in the same `i32` slots as ints,
//! - the narrowing that JVMS §6.5 requires when storing into `boolean`,
//!   `byte` and `short` fields and returning those types is explicit.
//!
//! A parallel vector maps each op back to its bytecode index, for traps.
//! The form is typed and has resolved targets, so a later JIT can translate
//! it directly.

use crate::bytecode::{Insn, Operand, op};
use crate::classfile::{ClassFile, Constant};
use crate::subset::{ClassInfo, FieldType, Prim};

/// An internal instruction. Operand-stack effects are those of the JVM
/// instruction it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Do nothing.
    Nop,
    /// Push a constant (`iconst`, `bipush`, `sipush`, `ldc`, `aconst_null` = 0).
    Const(i32),
    /// Push local `n` (`iload`, `aload`).
    Load(u16),
    /// Pop into local `n` (`istore`, `astore`).
    Store(u16),
    /// Add a constant to an int local (`iinc`).
    Iinc(u16, i16),
    /// `iaload`.
    IALoad,
    /// `baload` (byte and boolean arrays).
    BALoad,
    /// `saload`.
    SALoad,
    /// `iastore`.
    IAStore,
    /// `bastore` (a boolean array stores `value & 1`).
    BAStore,
    /// `sastore`.
    SAStore,
    /// `pop`.
    Pop,
    /// `pop2` (two category-1 values).
    Pop2,
    /// `dup`.
    Dup,
    /// `dup_x1`.
    DupX1,
    /// `dup_x2`.
    DupX2,
    /// `dup2`.
    Dup2,
    /// `dup2_x1`.
    Dup2X1,
    /// `dup2_x2`.
    Dup2X2,
    /// `swap`.
    Swap,
    /// `iadd`.
    Add,
    /// `isub`.
    Sub,
    /// `imul`.
    Mul,
    /// `idiv` (traps on zero; `MIN / -1 == MIN`).
    Div,
    /// `irem`.
    Rem,
    /// `ineg`.
    Neg,
    /// `ishl`.
    Shl,
    /// `ishr`.
    Shr,
    /// `iushr`.
    Ushr,
    /// `iand`.
    And,
    /// `ior`.
    Or,
    /// `ixor`.
    Xor,
    /// `i2b`.
    I2B,
    /// `i2s`.
    I2S,
    /// Narrow to boolean (`value & 1`), before stores and returns of `boolean`.
    I2Z,
    /// `ifeq`/`ifnull`: branch if zero.
    IfEq(u32),
    /// `ifne`/`ifnonnull`.
    IfNe(u32),
    /// `iflt`.
    IfLt(u32),
    /// `ifge`.
    IfGe(u32),
    /// `ifgt`.
    IfGt(u32),
    /// `ifle`.
    IfLe(u32),
    /// `if_icmpeq`/`if_acmpeq`.
    IfCmpEq(u32),
    /// `if_icmpne`/`if_acmpne`.
    IfCmpNe(u32),
    /// `if_icmplt`.
    IfCmpLt(u32),
    /// `if_icmpge`.
    IfCmpGe(u32),
    /// `if_icmpgt`.
    IfCmpGt(u32),
    /// `if_icmple`.
    IfCmpLe(u32),
    /// `goto`, `goto_w`.
    Goto(u32),
    /// `tableswitch`: index into [`Program::switches`].
    TableSwitch(u32),
    /// `lookupswitch`: index into [`Program::switches`].
    LookupSwitch(u32),
    /// `ireturn`, `areturn`.
    ReturnValue,
    /// `return`.
    Return,
    /// `getstatic` of a static slot.
    GetStatic(u16),
    /// `putstatic` into a static slot.
    PutStatic(u16),
    /// `getfield` of an instance slot.
    GetField(u16),
    /// `putfield` into an instance slot.
    PutField(u16),
    /// Call a bytecode method of the applet by method index.
    Call(u16),
    /// Call a native method by native index.
    CallNative(u16),
    /// `invokespecial java/lang/Object.<init>()V`: pops the receiver.
    ObjectInit,
    /// `newarray`.
    NewArray(Prim),
    /// `arraylength`.
    ArrayLength,

    // Superinstructions: common `javac` sequences fused into one op (see
    // [`fuse`]). None has a branch target inside it, and only one
    // component can trap or charge fuel (the last, except the `iaload` of
    // `AddIALoadLC`), so its bci is that component's.
    /// `Load(a) Load(b) IfCmpEq(t)`.
    IfLLEq(u8, u8, u32),
    /// `Load(a) Load(b) IfCmpNe(t)`.
    IfLLNe(u8, u8, u32),
    /// `Load(a) Load(b) IfCmpLt(t)`.
    IfLLLt(u8, u8, u32),
    /// `Load(a) Load(b) IfCmpGe(t)`.
    IfLLGe(u8, u8, u32),
    /// `Load(a) Load(b) IfCmpGt(t)`.
    IfLLGt(u8, u8, u32),
    /// `Load(a) Load(b) IfCmpLe(t)`.
    IfLLLe(u8, u8, u32),
    /// `Iinc(n, d) Goto(t)`: the step and back edge of a `for` loop.
    IincGoto(u8, i16, u32),
    /// `Load(a) Load(b)`.
    Load2(u16, u16),
    /// `Load(n) Add`.
    AddL(u16),
    /// `GetStatic(k) Add`.
    AddS(u16),
    /// `Load(a) Load(i) IALoad`: `a[i]` with both in locals.
    IALoadLL(u16, u16),
    /// `Load(a) Const(c) IALoad`: `a[c]`, `0 <= c < 65536`.
    IALoadLC(u16, u16),
    /// `Load(a) Load(i) BALoad`.
    BALoadLL(u16, u16),
    /// `Load(a) Const(c) IALoad Add`: add `a[c]` to the top of the stack.
    AddIALoadLC(u16, u16),
    /// `Load(a) Load(b) Add`.
    AddLL(u16, u16),
    /// `Load(a) Const(c) Load(v) IAStore`: `a[c] = v`.
    IAStoreLCL(u16, u16, u16),
    /// `Load(a) Load(i) Load(v) IAStore`: `a[i] = v`.
    IAStoreLLL(u16, u16, u16),
    /// `Load(a) Load(i) Load(v) BAStore`: `a[i] = (byte) v`.
    BAStoreLLL(u16, u16, u16),

    // Back edges: a branch op whose target is at or before the op itself
    // becomes its `...Back` form at decode time (see [`Op::metered`]), so
    // the interpreter knows without a compare which taken branches charge fuel.
    /// [`Op::IfEq`] with a target at or before this op: charges fuel when taken.
    IfEqBack(u32),
    /// [`Op::IfNe`] with a target at or before this op: charges fuel when taken.
    IfNeBack(u32),
    /// [`Op::IfLt`] with a target at or before this op: charges fuel when taken.
    IfLtBack(u32),
    /// [`Op::IfGe`] with a target at or before this op: charges fuel when taken.
    IfGeBack(u32),
    /// [`Op::IfGt`] with a target at or before this op: charges fuel when taken.
    IfGtBack(u32),
    /// [`Op::IfLe`] with a target at or before this op: charges fuel when taken.
    IfLeBack(u32),
    /// [`Op::IfCmpEq`] with a target at or before this op: charges fuel when taken.
    IfCmpEqBack(u32),
    /// [`Op::IfCmpNe`] with a target at or before this op: charges fuel when taken.
    IfCmpNeBack(u32),
    /// [`Op::IfCmpLt`] with a target at or before this op: charges fuel when taken.
    IfCmpLtBack(u32),
    /// [`Op::IfCmpGe`] with a target at or before this op: charges fuel when taken.
    IfCmpGeBack(u32),
    /// [`Op::IfCmpGt`] with a target at or before this op: charges fuel when taken.
    IfCmpGtBack(u32),
    /// [`Op::IfCmpLe`] with a target at or before this op: charges fuel when taken.
    IfCmpLeBack(u32),
    /// [`Op::Goto`] with a target at or before this op: charges fuel when taken.
    GotoBack(u32),
    /// [`Op::IfLLEq`] with a target at or before this op: charges fuel when taken.
    IfLLEqBack(u8, u8, u32),
    /// [`Op::IfLLNe`] with a target at or before this op: charges fuel when taken.
    IfLLNeBack(u8, u8, u32),
    /// [`Op::IfLLLt`] with a target at or before this op: charges fuel when taken.
    IfLLLtBack(u8, u8, u32),
    /// [`Op::IfLLGe`] with a target at or before this op: charges fuel when taken.
    IfLLGeBack(u8, u8, u32),
    /// [`Op::IfLLGt`] with a target at or before this op: charges fuel when taken.
    IfLLGtBack(u8, u8, u32),
    /// [`Op::IfLLLe`] with a target at or before this op: charges fuel when taken.
    IfLLLeBack(u8, u8, u32),
    /// [`Op::IincGoto`] with a target at or before this op: charges fuel when taken.
    IincGotoBack(u8, i16, u32),

    // Unmetered forms (see [`Program::set_metering`]): with fuel metering
    // off, back edges become their plain forward form and these replace the
    // other charging ops, so the one interpreter loop runs no charge at all.
    /// [`Op::Call`] without the fuel charge.
    CallUnmetered(u16),
    /// [`Op::CallNative`] without the fuel charge.
    CallNativeUnmetered(u16),
    /// [`Op::TableSwitch`] or [`Op::LookupSwitch`] without the fuel charge.
    SwitchUnmetered(u32),
}

impl Op {
    /// The branch target, for ops with one.
    fn target_mut(&mut self) -> Option<&mut u32> {
        match self {
            Op::IfEq(t)
            | Op::IfNe(t)
            | Op::IfLt(t)
            | Op::IfGe(t)
            | Op::IfGt(t)
            | Op::IfLe(t)
            | Op::IfCmpEq(t)
            | Op::IfCmpNe(t)
            | Op::IfCmpLt(t)
            | Op::IfCmpGe(t)
            | Op::IfCmpGt(t)
            | Op::IfCmpLe(t)
            | Op::Goto(t)
            | Op::IfLLEq(_, _, t)
            | Op::IfLLNe(_, _, t)
            | Op::IfLLLt(_, _, t)
            | Op::IfLLGe(_, _, t)
            | Op::IfLLGt(_, _, t)
            | Op::IfLLLe(_, _, t)
            | Op::IincGoto(_, _, t)
            | Op::IfEqBack(t)
            | Op::IfNeBack(t)
            | Op::IfLtBack(t)
            | Op::IfGeBack(t)
            | Op::IfGtBack(t)
            | Op::IfLeBack(t)
            | Op::IfCmpEqBack(t)
            | Op::IfCmpNeBack(t)
            | Op::IfCmpLtBack(t)
            | Op::IfCmpGeBack(t)
            | Op::IfCmpGtBack(t)
            | Op::IfCmpLeBack(t)
            | Op::GotoBack(t)
            | Op::IfLLEqBack(_, _, t)
            | Op::IfLLNeBack(_, _, t)
            | Op::IfLLLtBack(_, _, t)
            | Op::IfLLGeBack(_, _, t)
            | Op::IfLLGtBack(_, _, t)
            | Op::IfLLLeBack(_, _, t)
            | Op::IincGotoBack(_, _, t) => Some(t),
            _ => None,
        }
    }

    /// The back-edge form of a branch op; other ops unchanged.
    fn back(self) -> Op {
        match self {
            Op::IfEq(t) => Op::IfEqBack(t),
            Op::IfNe(t) => Op::IfNeBack(t),
            Op::IfLt(t) => Op::IfLtBack(t),
            Op::IfGe(t) => Op::IfGeBack(t),
            Op::IfGt(t) => Op::IfGtBack(t),
            Op::IfLe(t) => Op::IfLeBack(t),
            Op::IfCmpEq(t) => Op::IfCmpEqBack(t),
            Op::IfCmpNe(t) => Op::IfCmpNeBack(t),
            Op::IfCmpLt(t) => Op::IfCmpLtBack(t),
            Op::IfCmpGe(t) => Op::IfCmpGeBack(t),
            Op::IfCmpGt(t) => Op::IfCmpGtBack(t),
            Op::IfCmpLe(t) => Op::IfCmpLeBack(t),
            Op::Goto(t) => Op::GotoBack(t),
            Op::IfLLEq(a, b, t) => Op::IfLLEqBack(a, b, t),
            Op::IfLLNe(a, b, t) => Op::IfLLNeBack(a, b, t),
            Op::IfLLLt(a, b, t) => Op::IfLLLtBack(a, b, t),
            Op::IfLLGe(a, b, t) => Op::IfLLGeBack(a, b, t),
            Op::IfLLGt(a, b, t) => Op::IfLLGtBack(a, b, t),
            Op::IfLLLe(a, b, t) => Op::IfLLLeBack(a, b, t),
            Op::IincGoto(a, b, t) => Op::IincGotoBack(a, b, t),
            op => op,
        }
    }

    /// The form of this op (at index `at`) that charges fuel where a loop or
    /// recursion can happen: a back edge (a branch whose target is at or
    /// before the op itself) becomes its `...Back` form, a call or switch its
    /// charging form. Other ops are unchanged.
    fn metered(self, at: usize, switches: &[Switch]) -> Op {
        match self {
            Op::CallUnmetered(m) => Op::Call(m),
            Op::CallNativeUnmetered(n) => Op::CallNative(n),
            Op::SwitchUnmetered(k) => match switches.get(k as usize) {
                Some(Switch::Lookup { .. }) => Op::LookupSwitch(k),
                _ => Op::TableSwitch(k),
            },
            mut op => match op.target_mut() {
                Some(t) if *t as usize <= at => op.back(),
                _ => op,
            },
        }
    }

    /// The form of this op that never charges fuel: the inverse of
    /// [`Op::metered`].
    fn unmetered(self) -> Op {
        match self {
            Op::Call(m) => Op::CallUnmetered(m),
            Op::CallNative(n) => Op::CallNativeUnmetered(n),
            Op::TableSwitch(k) | Op::LookupSwitch(k) => Op::SwitchUnmetered(k),
            Op::IfEqBack(t) => Op::IfEq(t),
            Op::IfNeBack(t) => Op::IfNe(t),
            Op::IfLtBack(t) => Op::IfLt(t),
            Op::IfGeBack(t) => Op::IfGe(t),
            Op::IfGtBack(t) => Op::IfGt(t),
            Op::IfLeBack(t) => Op::IfLe(t),
            Op::IfCmpEqBack(t) => Op::IfCmpEq(t),
            Op::IfCmpNeBack(t) => Op::IfCmpNe(t),
            Op::IfCmpLtBack(t) => Op::IfCmpLt(t),
            Op::IfCmpGeBack(t) => Op::IfCmpGe(t),
            Op::IfCmpGtBack(t) => Op::IfCmpGt(t),
            Op::IfCmpLeBack(t) => Op::IfCmpLe(t),
            Op::GotoBack(t) => Op::Goto(t),
            Op::IfLLEqBack(a, b, t) => Op::IfLLEq(a, b, t),
            Op::IfLLNeBack(a, b, t) => Op::IfLLNe(a, b, t),
            Op::IfLLLtBack(a, b, t) => Op::IfLLLt(a, b, t),
            Op::IfLLGeBack(a, b, t) => Op::IfLLGe(a, b, t),
            Op::IfLLGtBack(a, b, t) => Op::IfLLGt(a, b, t),
            Op::IfLLLeBack(a, b, t) => Op::IfLLLe(a, b, t),
            Op::IincGotoBack(a, b, t) => Op::IincGoto(a, b, t),
            op => op,
        }
    }
}

/// Gives every charging op of one method its metered form ([`Op::metered`]),
/// once targets are final, except the back edges of loops whose every
/// iteration already charges ([`redundant_back_edges`]).
fn meter(ops: &mut [Op], switches: &[Switch]) {
    for (i, o) in ops.iter_mut().enumerate() {
        *o = o.metered(i, switches);
    }
    for b in redundant_back_edges(ops, switches) {
        ops[b] = ops[b].unmetered();
    }
}

/// Calls `next` with each op index control can go to after op `i`.
pub(crate) fn successors(op: Op, i: usize, switches: &[Switch], mut next: impl FnMut(usize)) {
    let mut plain = op.unmetered();
    if let Some(&mut t) = plain.target_mut() {
        next(t as usize);
    }
    match plain {
        Op::SwitchUnmetered(k) => {
            if let Some(
                Switch::Table {
                    targets, default, ..
                }
                | Switch::Lookup {
                    targets, default, ..
                },
            ) = switches.get(k as usize)
            {
                targets.iter().for_each(|&t| next(t as usize));
                next(*default as usize);
            }
        }
        Op::Goto(_) | Op::IincGoto(..) | Op::Return | Op::ReturnValue => {}
        _ => next(i + 1),
    }
}

/// The back edges (op indices) whose charge is redundant because every
/// iteration of their loop already pays at a call or a switch: for a back
/// edge from `b` to `t`, the loop `t..=b` is entered only at `t` (no jump
/// from outside lands in `t+1..=b`), and every path from `t` to `b` inside
/// it passes a call or a switch. Any run of the back edge is then preceded,
/// since the last entry at `t`, by a charge of its own iteration, so fuel
/// still bounds the work: at most one loop iteration per unit. A loop that
/// calls a method on each iteration (`for (...) f();`) is charged once per
/// iteration instead of twice.
///
/// The analysis visits each loop's ops once, within a budget proportional
/// to the method's size so that a hostile method with many overlapping
/// loops cannot make loading quadratic; back edges past the budget keep
/// their charge.
fn redundant_back_edges(ops: &[Op], switches: &[Switch]) -> Vec<usize> {
    let n = ops.len();
    // The lowest and highest index of an op that jumps to each op.
    let (mut lo, mut hi) = (vec![usize::MAX; n + 1], vec![0usize; n + 1]);
    for (i, &o) in ops.iter().enumerate() {
        successors(o, i, switches, |t| {
            if t != i + 1 && t <= n {
                lo[t] = lo[t].min(i);
                hi[t] = hi[t].max(i);
            }
        });
    }
    let charges = |o: Op| {
        matches!(
            o,
            Op::Call(_) | Op::CallNative(_) | Op::TableSwitch(_) | Op::LookupSwitch(_)
        )
    };
    let mut budget = 16 * n + 1024;
    let mut out = Vec::new();
    let (mut seen, mut stack) = (vec![false; n], Vec::new());
    for (b, &o) in ops.iter().enumerate() {
        let mut plain = o.unmetered();
        let Some(&mut t) = plain.target_mut() else {
            continue;
        };
        let t = t as usize;
        if t >= b || plain == o {
            continue; // not a charging back edge
        }
        if budget < 2 * (b - t + 1) {
            break;
        }
        budget -= 2 * (b - t + 1);
        if (t + 1..=b).any(|j| lo[j] < t || hi[j] > b) {
            continue; // a second entry
        }
        seen[t..=b].fill(false);
        stack.clear();
        stack.push(t);
        seen[t] = true;
        let mut uncharged_path = false;
        while let Some(i) = stack.pop() {
            if i == b {
                uncharged_path = true;
                break;
            }
            if charges(ops[i]) {
                continue;
            }
            successors(ops[i], i, switches, |j| {
                if (t..=b).contains(&j) && !seen[j] {
                    seen[j] = true;
                    stack.push(j);
                }
            });
        }
        if !uncharged_path {
            out.push(b);
        }
    }
    out
}

/// The superinstruction for the ops at the start of `w`, and how many it replaces.
fn fused(w: &[Op]) -> Option<(Op, usize)> {
    let u8_ = |n: u16| u8::try_from(n).ok();
    let small = |c: i32| u16::try_from(c).ok();
    match *w {
        [Op::Load(a), Op::Load(i), Op::Load(v), Op::IAStore, ..] => {
            return Some((Op::IAStoreLLL(a, i, v), 4));
        }
        [Op::Load(a), Op::Load(i), Op::Load(v), Op::BAStore, ..] => {
            return Some((Op::BAStoreLLL(a, i, v), 4));
        }
        [Op::Load(a), Op::Const(c), Op::Load(v), Op::IAStore, ..] if small(c).is_some() => {
            return Some((Op::IAStoreLCL(a, small(c)?, v), 4));
        }
        [Op::Load(a), Op::Const(c), Op::IALoad, Op::Add, ..] if small(c).is_some() => {
            return Some((Op::AddIALoadLC(a, small(c)?), 4));
        }
        _ => {}
    }
    match *w {
        [Op::Load(a), Op::Load(b), cmp, ..] => {
            if let (Some(a), Some(b)) = (u8_(a), u8_(b)) {
                let f = match cmp {
                    Op::IfCmpEq(t) => Some(Op::IfLLEq(a, b, t)),
                    Op::IfCmpNe(t) => Some(Op::IfLLNe(a, b, t)),
                    Op::IfCmpLt(t) => Some(Op::IfLLLt(a, b, t)),
                    Op::IfCmpGe(t) => Some(Op::IfLLGe(a, b, t)),
                    Op::IfCmpGt(t) => Some(Op::IfLLGt(a, b, t)),
                    Op::IfCmpLe(t) => Some(Op::IfLLLe(a, b, t)),
                    _ => None,
                };
                if let Some(f) = f {
                    return Some((f, 3));
                }
            }
            match cmp {
                Op::Add => Some((Op::AddLL(a, b), 3)),
                Op::IALoad => Some((Op::IALoadLL(a, b), 3)),
                Op::BALoad => Some((Op::BALoadLL(a, b), 3)),
                _ => Some((Op::Load2(a, b), 2)),
            }
        }
        [Op::Load(a), Op::Const(c), Op::IALoad, ..] if (0..65536).contains(&c) => {
            Some((Op::IALoadLC(a, c as u16), 3))
        }
        [Op::Load(n), Op::Add, ..] => Some((Op::AddL(n), 2)),
        [Op::GetStatic(k), Op::Add, ..] => Some((Op::AddS(k), 2)),
        [Op::Iinc(n, d), Op::Goto(t), ..] => Some((Op::IincGoto(u8_(n)?, d, t), 2)),
        _ => None,
    }
}

/// Peephole pass: replaces common sequences by superinstructions, never
/// across a branch target, and renumbers every target (including those of
/// `switches`, the tables this method's ops refer to).
fn fuse(ops: Vec<Op>, bcis: Vec<u32>, switches: &mut [Switch]) -> (Vec<Op>, Vec<u32>) {
    let mut is_target = vec![false; ops.len() + 1];
    let mut mark = |t: u32| {
        if let Some(x) = is_target.get_mut(t as usize) {
            *x = true;
        }
    };
    for o in &ops {
        let mut o = *o;
        if let Some(&mut t) = o.target_mut() {
            mark(t);
        }
    }
    for sw in switches.iter() {
        let (Switch::Table {
            targets, default, ..
        }
        | Switch::Lookup {
            targets, default, ..
        }) = sw;
        targets.iter().for_each(|&t| mark(t));
        mark(*default);
    }
    let mut new_index = vec![0u32; ops.len()];
    let (mut out, mut out_bcis) = (Vec::with_capacity(ops.len()), Vec::with_capacity(ops.len()));
    let mut i = 0;
    while i < ops.len() {
        let (op, n) = match fused(&ops[i..]) {
            Some((f, n)) if !is_target[i + 1..i + n].iter().any(|&t| t) => (f, n),
            _ => (ops[i], 1),
        };
        new_index[i..i + n].fill(out.len() as u32);
        out.push(op);
        // The bci of the component that can trap or charge fuel: the last,
        // except in `a[c] + top`, where it is the `iaload`.
        let k = if matches!(op, Op::AddIALoadLC(..)) {
            2
        } else {
            n - 1
        };
        out_bcis.push(bcis[i + k]);
        i += n;
    }
    let renumber = |t: &mut u32| *t = new_index.get(*t as usize).copied().unwrap_or(u32::MAX);
    for o in &mut out {
        if let Some(t) = o.target_mut() {
            renumber(t);
        }
    }
    for sw in switches.iter_mut() {
        let (Switch::Table {
            targets, default, ..
        }
        | Switch::Lookup {
            targets, default, ..
        }) = sw;
        targets.iter_mut().for_each(renumber);
        renumber(default);
    }
    (out, out_bcis)
}

/// A decoded switch table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Switch {
    /// `tableswitch`: keys `low..low+targets.len()`.
    Table {
        /// Lowest key.
        low: i32,
        /// Op index per key.
        targets: Box<[u32]>,
        /// Op index otherwise.
        default: u32,
    },
    /// `lookupswitch`: sorted keys.
    Lookup {
        /// Keys, increasing.
        keys: Box<[i32]>,
        /// Op index per key.
        targets: Box<[u32]>,
        /// Op index otherwise.
        default: u32,
    },
}

/// A decoded bytecode method.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Func {
    /// `name(descriptor)`.
    pub id: String,
    /// The ops.
    pub code: Box<[Op]>,
    /// Bytecode index of each op.
    pub bcis: Box<[u32]>,
    /// `max_locals`.
    pub max_locals: u16,
    /// `max_stack`.
    pub max_stack: u16,
    /// Argument slots, including `this`.
    pub arg_slots: u16,
    /// True for instance methods (the first argument must not be null).
    pub has_receiver: bool,
}

/// A native method the applet declares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NativeDecl {
    /// Name.
    pub name: String,
    /// Descriptor.
    pub descriptor: String,
    /// Parameter types.
    pub params: Vec<FieldType>,
    /// Return type.
    pub ret: Option<FieldType>,
    /// The runtime entry of the native's fast form, if the table it was
    /// bound from gives it one ([`crate::Natives::set_fast`]); 0 if not.
    /// The JIT calls it in place of the ordinary entry, and the code cache
    /// key covers it (the program's natives are hashed whole).
    pub(crate) fast: usize,
    /// The function that finds the fast form's [`crate::HostWords`] in a
    /// host value, with `fast`.
    pub(crate) words: Option<crate::jit::WordsFn>,
    /// The native's inline form ([`crate::Natives::set_inline`]), which the
    /// JIT emits in place of the call.
    pub(crate) inline: Option<crate::InlineForm>,
    /// Whether this is the entry of the native's **tail sites**
    /// ([`crate::natives::TAIL_SUFFIX`]): a second declaration of a
    /// declared native (same name and descriptor), after the declared
    /// ones, which the decoder calls at the sites it proved tail sites
    /// (`decode::tail_site`) and which binds the table's tail form of the
    /// native where it has one.
    pub tail: bool,
}

/// A decoded applet class, ready to instantiate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// The class summary from the subset check.
    pub info: ClassInfo,
    /// One entry per method of `info.methods`: the decoded code, or `None` for natives.
    pub funcs: Vec<Option<Func>>,
    /// For each method of `info.methods`, its index in `natives` if native.
    pub native_index: Vec<Option<u16>>,
    /// The native methods, in declaration order.
    pub natives: Vec<NativeDecl>,
    /// Switch tables referenced by `TableSwitch`/`LookupSwitch`.
    pub switches: Vec<Switch>,
    /// Bytes of bytecode in the class (for reporting).
    pub code_bytes: usize,
    /// The largest `max_locals + max_stack` of any method: the frame stack
    /// needs at most this many slots per call level.
    pub max_frame: usize,
    /// Whether the charging ops are in their metered forms.
    metered: bool,
    /// The methods the host declared with lent parameters and the lent
    /// analysis proved ([`crate::lent`]), in method order.
    lent: Vec<crate::lent::LentMethod>,
}

impl Program {
    /// The lent parameters of method `method` (an index into
    /// `info.methods`), counted from 0 as in its descriptor, ascending:
    /// empty unless the host declared them at load ([`crate::LentParam`])
    /// and the analysis proved that the method only reads them. A host that
    /// lends an array to an invocation checks here that the method was
    /// declared (and so proved) for it.
    pub fn lent_params(&self, method: usize) -> &[u16] {
        self.lent
            .iter()
            .find(|l| usize::from(l.method) == method)
            .map_or(&[], |l| &l.params)
    }

    /// What the lent analysis proved of every method declared lent.
    pub fn lent_methods(&self) -> &[crate::lent::LentMethod] {
        &self.lent
    }

    /// Whether the program charges fuel (see [`Program::set_metering`]).
    pub fn metered(&self) -> bool {
        self.metered
    }

    /// The bytes this program holds in memory, about (its decoded code,
    /// the byte code index of each op, its switch tables, the names and
    /// signatures of its methods, fields and natives), for a host that
    /// budgets the memory of the applets its clients load: a class of 1
    /// MiB decodes to several MiB, each load its own.
    pub fn memory_bytes(&self) -> usize {
        use core::mem::size_of;
        let funcs: usize = self
            .funcs
            .iter()
            .flatten()
            .map(|f| {
                size_of::<Func>() + f.code.len() * size_of::<Op>() + f.bcis.len() * 4 + f.id.len()
            })
            .sum();
        let switches: usize = self
            .switches
            .iter()
            .map(|sw| {
                size_of::<Switch>()
                    + match sw {
                        Switch::Table { targets, .. } => targets.len() * 4,
                        Switch::Lookup { keys, targets, .. } => (keys.len() + targets.len()) * 4,
                    }
            })
            .sum();
        let natives: usize = self
            .natives
            .iter()
            .map(|n| {
                size_of::<NativeDecl>()
                    + n.name.len()
                    + n.descriptor.len()
                    + n.params.len() * size_of::<FieldType>()
            })
            .sum();
        let info = &self.info;
        let methods: usize = info
            .methods
            .iter()
            .map(|m| size_of::<crate::subset::MethodInfo>() + m.name.len() + m.descriptor.len())
            .sum();
        let fields: usize = info
            .fields
            .iter()
            .map(|f| size_of::<crate::subset::FieldInfo>() + f.name.len())
            .sum();
        size_of::<Program>()
            + funcs
            + self.funcs.len() * size_of::<Option<Func>>()
            + switches
            + natives
            + methods
            + fields
            + info.name.len()
            + self.native_index.len() * size_of::<Option<u16>>()
    }

    /// The most ops one unit of fuel can pay for in this program: an
    /// invocation given `f` units runs at most `f` times this many ops,
    /// besides its entry method's first pass and its natives' own work.
    ///
    /// A unit is charged at a back edge, a call or a switch, and between
    /// two charges a frame only moves forward. An op runs again only after
    /// a back edge from at or past it to at or before it, so each run of a
    /// back edge re-runs at most its loop's ops (`b - t + 1` for an edge
    /// from `b` to `t`), and each call starts a frame whose forward pass
    /// runs at most the callee's ops. A back edge whose charge is elided
    /// (`redundant_back_edges`) is paid for by a call or switch of its
    /// iteration, so a unit pays for at most the longest loop plus the
    /// longest callee. A tight loop is 1 to 3 ops a unit; a loop around
    /// 16 KiB of straight-line bytecode thousands, each unit of which is
    /// that much work.
    pub fn ops_per_fuel_unit(&self) -> u64 {
        let (mut span, mut callee) = (1usize, 0usize);
        for f in self.funcs.iter().flatten() {
            for (i, &o) in f.code.iter().enumerate() {
                successors(o, i, &self.switches, |t| {
                    if t <= i {
                        span = span.max(i - t + 1);
                    }
                });
                if let Op::Call(m) | Op::CallUnmetered(m) = o {
                    let len = self
                        .funcs
                        .get(usize::from(m))
                        .and_then(Option::as_ref)
                        .map_or(0, |g| g.code.len());
                    callee = callee.max(len);
                }
            }
        }
        (span + callee) as u64
    }

    /// Turns fuel metering on or off by rewriting the charging ops in place:
    /// back edges, calls and switches take their charging forms
    /// ([`Op::IfEqBack`], [`Op::Call`], ...) or their plain ones
    /// ([`Op::IfEq`], [`Op::CallUnmetered`], ...). Decoding yields a metered
    /// program.
    ///
    /// Metering is chosen here rather than by compiling the interpreter loop
    /// twice: with one loop, metered and unmetered runs execute the same
    /// machine code except for the charges themselves, so the cost of
    /// metering is the cost of the charges, not of where the linker happened
    /// to place two different copies of the loop.
    pub fn set_metering(&mut self, on: bool) {
        if self.metered == on {
            return;
        }
        let switches = &self.switches;
        for f in self.funcs.iter_mut().flatten() {
            if on {
                meter(&mut f.code, switches);
            } else {
                f.code.iter_mut().for_each(|o| *o = o.unmetered());
            }
        }
        self.metered = on;
    }
}

fn narrow(t: FieldType) -> Option<Op> {
    match t {
        FieldType::Prim(Prim::Boolean) => Some(Op::I2Z),
        FieldType::Prim(Prim::Byte) => Some(Op::I2B),
        FieldType::Prim(Prim::Short) => Some(Op::I2S),
        _ => None,
    }
}

/// Decodes a class that passed [`crate::subset::check`] and
/// [`crate::verifier::verify`]. `all_insns` holds the instructions of each
/// method of `cf`, in [`ClassFile::methods`] order. Returns `None` only if the class was not
/// verified (a decoding step found something verification excludes).
pub fn decode(cf: &ClassFile, info: ClassInfo, all_insns: &[Vec<Insn>]) -> Option<Program> {
    decode_with(cf, info, all_insns, true)
}

/// [`decode`], optionally without superinstructions (for tests that compare
/// the two forms).
pub fn decode_with(
    cf: &ClassFile,
    info: ClassInfo,
    all_insns: &[Vec<Insn>],
    fuse_ops: bool,
) -> Option<Program> {
    decode_lending(cf, info, all_insns, fuse_ops, &[])
}

/// [`decode_with`] of a class whose methods' lent parameters the lent
/// analysis proved (`lent`, [`crate::lent`]): a tail site's array may then
/// be a lent parameter, pushed from its local ([`args_rooted`]), which the
/// program records ([`Program::lent_methods`]).
pub(crate) fn decode_lending(
    cf: &ClassFile,
    info: ClassInfo,
    all_insns: &[Vec<Insn>],
    fuse_ops: bool,
    lent: &[crate::lent::LentMethod],
) -> Option<Program> {
    let program_info = info;
    let info = &program_info;
    let mut natives = Vec::new();
    let mut native_index = Vec::new();
    for m in &info.methods {
        if m.is_native {
            native_index.push(Some(u16::try_from(natives.len()).ok()?));
            natives.push(NativeDecl {
                name: m.name.clone(),
                descriptor: m.descriptor.clone(),
                params: m.sig.params.clone(),
                ret: m.sig.ret,
                fast: 0,
                words: None,
                inline: None,
                tail: false,
            });
        } else {
            native_index.push(None);
        }
    }
    // The methods some call site of the class names: a native's tail site
    // is only in a method that runs as an invocation's own method
    // ([`tail_site`]).
    let mut called = vec![false; info.methods.len()];
    for m in &info.methods {
        for i in all_insns.get(m.index).map_or(&[][..], Vec::as_slice) {
            if let (op::INVOKEVIRTUAL..=op::INVOKESTATIC, &Operand::Cp(c)) = (i.opcode, &i.operand)
                && let Some((class, name, _)) = cf.member_ref(c)
                && class == info.name
                && let Some((idx, _)) = info.method(name)
            {
                called[idx] = true;
            }
        }
    }
    // Each declared native's tail entry, made at its first tail site.
    let mut tail_entry: Vec<Option<u16>> = vec![None; natives.len()];
    let mut switches = Vec::new();
    let mut funcs = Vec::new();
    let mut code_bytes = 0;
    for (mi, m) in info.methods.iter().enumerate() {
        if m.is_native {
            funcs.push(None);
            continue;
        }
        let entry_only = !called[mi];
        let code = cf.methods.get(m.index)?.code.as_ref()?;
        code_bytes += code.code.len();
        let insns = all_insns.get(m.index)?;
        // The locals that hold a lent parameter from entry to end
        // ([`lent_locals`]): a tail site's array may be pushed from one.
        let lent_locals = lent
            .iter()
            .find(|l| usize::from(l.method) == mi)
            .map_or_else(Vec::new, |l| lent_locals(&l.params, m.is_static, insns));
        // Every bci a branch or switch of the method may jump to
        // ([`args_rooted`]).
        let jumps = jump_targets(insns);
        // Pass 1: op index of every bci (some instructions expand to two ops).
        let mut index_of = vec![u32::MAX; code.code.len()];
        let mut n = 0u32;
        for i in insns {
            index_of[i.bci as usize] = n;
            n += 1 + u32::from(expands(cf, info, m.sig.ret, i));
        }
        let target = |t: i64| -> Option<u32> {
            let t = usize::try_from(t).ok()?;
            index_of.get(t).copied().filter(|&x| x != u32::MAX)
        };
        // Pass 2: emit.
        let first_switch = switches.len();
        let mut ops = Vec::with_capacity(n as usize);
        let mut bcis = Vec::with_capacity(n as usize);
        for (k, i) in insns.iter().enumerate() {
            let mut emit = |o: Op| {
                ops.push(o);
                bcis.push(i.bci);
            };
            let o = i.opcode;
            match (o, &i.operand) {
                (op::NOP, _) => emit(Op::Nop),
                (op::ACONST_NULL, _) => emit(Op::Const(0)),
                (op::ICONST_M1..=op::ICONST_5, _) => emit(Op::Const(i32::from(o) - 3)),
                (op::BIPUSH | op::SIPUSH, &Operand::Int(v)) => emit(Op::Const(v)),
                (op::LDC | op::LDC_W, &Operand::Cp(c)) => match cf.constant(c)? {
                    Constant::Integer(v) => emit(Op::Const(*v)),
                    _ => return None,
                },
                (op::ILOAD..=op::ALOAD_3, &Operand::Local(n)) => emit(Op::Load(n)),
                (op::ISTORE..=op::ASTORE_3, &Operand::Local(n)) => emit(Op::Store(n)),
                (op::IINC, &Operand::Iinc { index, delta }) => emit(Op::Iinc(index, delta)),
                (op::IALOAD, _) => emit(Op::IALoad),
                (op::BALOAD, _) => emit(Op::BALoad),
                (op::SALOAD, _) => emit(Op::SALoad),
                (op::IASTORE, _) => emit(Op::IAStore),
                (op::BASTORE, _) => emit(Op::BAStore),
                (op::SASTORE, _) => emit(Op::SAStore),
                (op::POP, _) => emit(Op::Pop),
                (op::POP2, _) => emit(Op::Pop2),
                (op::DUP, _) => emit(Op::Dup),
                (op::DUP_X1, _) => emit(Op::DupX1),
                (op::DUP_X2, _) => emit(Op::DupX2),
                (op::DUP2, _) => emit(Op::Dup2),
                (op::DUP2_X1, _) => emit(Op::Dup2X1),
                (op::DUP2_X2, _) => emit(Op::Dup2X2),
                (op::SWAP, _) => emit(Op::Swap),
                (op::IADD, _) => emit(Op::Add),
                (op::ISUB, _) => emit(Op::Sub),
                (op::IMUL, _) => emit(Op::Mul),
                (op::IDIV, _) => emit(Op::Div),
                (op::IREM, _) => emit(Op::Rem),
                (op::INEG, _) => emit(Op::Neg),
                (op::ISHL, _) => emit(Op::Shl),
                (op::ISHR, _) => emit(Op::Shr),
                (op::IUSHR, _) => emit(Op::Ushr),
                (op::IAND, _) => emit(Op::And),
                (op::IOR, _) => emit(Op::Or),
                (op::IXOR, _) => emit(Op::Xor),
                (op::I2B, _) => emit(Op::I2B),
                (op::I2S, _) => emit(Op::I2S),
                (
                    op::IFEQ..=op::IF_ACMPNE | op::GOTO | op::GOTO_W | op::IFNULL | op::IFNONNULL,
                    &Operand::Branch(t),
                ) => {
                    let t = target(t)?;
                    emit(match o {
                        153 | op::IFNULL => Op::IfEq(t),
                        154 | op::IFNONNULL => Op::IfNe(t),
                        155 => Op::IfLt(t),
                        156 => Op::IfGe(t),
                        157 => Op::IfGt(t),
                        158 => Op::IfLe(t),
                        159 | op::IF_ACMPEQ => Op::IfCmpEq(t),
                        160 | op::IF_ACMPNE => Op::IfCmpNe(t),
                        161 => Op::IfCmpLt(t),
                        162 => Op::IfCmpGe(t),
                        163 => Op::IfCmpGt(t),
                        164 => Op::IfCmpLe(t),
                        _ => Op::Goto(t),
                    })
                }
                (
                    op::TABLESWITCH,
                    Operand::Table {
                        default,
                        low,
                        targets,
                    },
                ) => {
                    let targets = targets
                        .iter()
                        .map(|&t| target(t))
                        .collect::<Option<Box<[u32]>>>()?;
                    switches.push(Switch::Table {
                        low: *low,
                        targets,
                        default: target(*default)?,
                    });
                    emit(Op::TableSwitch(u32::try_from(switches.len() - 1).ok()?));
                }
                (op::LOOKUPSWITCH, Operand::Lookup { default, pairs }) => {
                    let keys = pairs.iter().map(|p| p.0).collect();
                    let targets = pairs
                        .iter()
                        .map(|p| target(p.1))
                        .collect::<Option<Box<[u32]>>>()?;
                    switches.push(Switch::Lookup {
                        keys,
                        targets,
                        default: target(*default)?,
                    });
                    emit(Op::LookupSwitch(u32::try_from(switches.len() - 1).ok()?));
                }
                (op::IRETURN | op::ARETURN, _) => {
                    if let Some(n) = m.sig.ret.and_then(narrow) {
                        emit(n);
                    }
                    emit(Op::ReturnValue)
                }
                (op::RETURN, _) => emit(Op::Return),
                (op::GETSTATIC..=op::PUTFIELD, &Operand::Cp(c)) => {
                    let (_, name, _) = cf.member_ref(c)?;
                    let fi = info.field_named(name)?;
                    match o {
                        op::GETSTATIC => emit(Op::GetStatic(fi.slot)),
                        op::GETFIELD => emit(Op::GetField(fi.slot)),
                        _ => {
                            if let Some(n) = narrow(fi.ty) {
                                emit(n);
                            }
                            emit(if o == op::PUTSTATIC {
                                Op::PutStatic(fi.slot)
                            } else {
                                Op::PutField(fi.slot)
                            })
                        }
                    }
                }
                (op::INVOKEVIRTUAL..=op::INVOKESTATIC, &Operand::Cp(c)) => {
                    let (class, name, _) = cf.member_ref(c)?;
                    if class != info.name {
                        emit(Op::ObjectInit)
                    } else {
                        let (idx, _) = info.method(name)?;
                        match native_index[idx] {
                            Some(n)
                                if entry_only
                                    && tail_site(&insns[k + 1..])
                                    && args_rooted(
                                        &insns[..=k],
                                        &natives[usize::from(n)].params,
                                        &jumps,
                                        &lent_locals,
                                    ) =>
                            {
                                let e = match tail_entry[usize::from(n)] {
                                    Some(e) => e,
                                    None => {
                                        let e = u16::try_from(natives.len()).ok()?;
                                        let mut d = natives[usize::from(n)].clone();
                                        d.tail = true;
                                        natives.push(d);
                                        tail_entry[usize::from(n)] = Some(e);
                                        e
                                    }
                                };
                                emit(Op::CallNative(e))
                            }
                            Some(n) => emit(Op::CallNative(n)),
                            None => emit(Op::Call(u16::try_from(idx).ok()?)),
                        }
                    }
                }
                (op::NEWARRAY, &Operand::ArrayType(t)) => emit(Op::NewArray(match t {
                    4 => Prim::Boolean,
                    8 => Prim::Byte,
                    9 => Prim::Short,
                    10 => Prim::Int,
                    _ => return None,
                })),
                (op::ARRAYLENGTH, _) => emit(Op::ArrayLength),
                _ => return None,
            }
        }
        let (mut ops, bcis) = if fuse_ops {
            fuse(ops, bcis, &mut switches[first_switch..])
        } else {
            (ops, bcis)
        };
        meter(&mut ops, &switches);
        funcs.push(Some(Func {
            id: m.id(),
            code: ops.into_boxed_slice(),
            bcis: bcis.into_boxed_slice(),
            max_locals: code.max_locals,
            max_stack: code.max_stack,
            arg_slots: u16::try_from(m.arg_slots()).ok()?,
            has_receiver: !m.is_static,
        }));
    }
    let max_frame = funcs
        .iter()
        .flatten()
        .map(|f| usize::from(f.max_locals) + usize::from(f.max_stack))
        .max()
        .unwrap_or(0);
    Some(Program {
        info: program_info,
        funcs,
        native_index,
        natives,
        switches,
        code_bytes,
        max_frame,
        metered: true,
        lent: lent.to_vec(),
    })
}

/// Whether a call whose next instructions are `rest` (in bytecode order)
/// is a tail site ([`crate::natives::TAIL_SUFFIX`]), given that its method
/// runs only as an invocation's own: the straight line after it holds
/// only constants, local loads, `pop`s and `nop`s up to a return, so that
/// nothing can write memory, call, branch or trap between the call's
/// return and the invocation's end. Deliberately small: a branch out of
/// the line, or anything else, and the site is not one. A branch *into*
/// the line changes nothing, since every path from the call to the
/// return is this line.
pub(crate) fn tail_site(rest: &[Insn]) -> bool {
    for i in rest {
        match i.opcode {
            op::NOP | op::POP | op::POP2 => {}
            o if pure_push(o) => {}
            op::IRETURN | op::ARETURN | op::RETURN => return true,
            _ => return false,
        }
    }
    false
}

/// Whether `opcode` pushes one value and does nothing else (no store, no
/// call, no trap): a constant or a local's load ([`tail_site`],
/// [`args_rooted`]).
fn pure_push(opcode: u8) -> bool {
    matches!(
        opcode,
        op::ACONST_NULL
            | op::ICONST_M1..=op::ICONST_5
            | op::BIPUSH
            | op::SIPUSH
            | op::LDC
            | op::LDC_W
            | op::ILOAD..=op::ALOAD_3
    )
}

/// Whether every array argument of the call that ends `upto` (the call
/// last) stays held by a root of the heap until the invocation's end, so
/// that the end-of-invocation collection (roots: the reference statics
/// and the instance) cannot free it before a host reads it
/// ([`crate::natives::TAIL_SUFFIX`]). A local is not a root: an array
/// held only by one (`new byte[n]`, or a static's old array after the
/// static was overwritten) is freed at the invocation's end.
///
/// So each array argument must be pushed by `getstatic`, or by `aload_0;
/// getfield` (every instance object of an applet is the applet itself,
/// since the subset has no `new` of objects, so the field is one of the
/// instance's), or by `aload` of one of `lent_locals` (locals that hold a
/// lent parameter from the method's entry to its end, [`lent_locals`]: the
/// array the host lent, which the host holds, not the heap), and
/// everything pushed after it up to the call must be a
/// single push with no side effect: a constant, a local load, `getstatic`
/// or `aload_0; getfield`. The arguments before the first array may be
/// anything. Nothing in that window may be a jump target: another path
/// could arrive with another array on the stack. The static or field
/// is not written between the push and the invocation's end: nothing in
/// the window writes, the native is the host's, and after the call only
/// [`tail_site`]'s line runs.
pub(crate) fn args_rooted(
    upto: &[Insn],
    params: &[FieldType],
    jumps: &[i64],
    lent_locals: &[u16],
) -> bool {
    let Some(first) = params.iter().position(|p| p.is_ref()) else {
        return true;
    };
    let Some((call, before)) = upto.split_last() else {
        return false;
    };
    let mut j = before.len();
    for p in params[first..].iter().rev() {
        let Some(i) = j.checked_sub(1).and_then(|x| before.get(x)) else {
            return false;
        };
        let field = |i: &Insn| {
            i.opcode == op::GETFIELD
                && j >= 2
                && matches!(
                    (before[j - 2].opcode, &before[j - 2].operand),
                    (op::ALOAD_0, _) | (op::ALOAD, Operand::Local(0))
                )
        };
        let lent = |i: &Insn| {
            matches!((i.opcode, &i.operand),
                (op::ALOAD | op::ALOAD_0..=op::ALOAD_3, Operand::Local(l)) if lent_locals.contains(l))
        };
        match i.opcode {
            op::GETSTATIC => j -= 1,
            _ if field(i) => j -= 2,
            _ if p.is_ref() && lent(i) => j -= 1,
            o if pure_push(o) && !p.is_ref() => j -= 1,
            _ => return false,
        }
    }
    let start = i64::from(before[j].bci);
    let end = i64::from(call.bci);
    !jumps.iter().any(|&t| t > start && t <= end)
}

/// The locals of a method (static or not, `is_static`) whose lent
/// parameters are `params` (counted as in its descriptor: one local each,
/// after `this`, since the subset has no `long` or `double`) that hold
/// their parameter from the method's entry to its end: no instruction of
/// `insns` stores to them (`istore` to `astore_3`, `iinc`), so that an
/// `aload` of one anywhere pushes the lent array itself ([`args_rooted`]).
/// A local written anywhere is left out, whatever the paths: one test of
/// the whole method, not a flow.
pub(crate) fn lent_locals(params: &[u16], is_static: bool, insns: &[Insn]) -> Vec<u16> {
    params
        .iter()
        .filter_map(|&p| p.checked_add(u16::from(!is_static)))
        .filter(|&slot| {
            !insns.iter().any(|i| match (i.opcode, &i.operand) {
                (op::ISTORE..=op::ASTORE_3, Operand::Local(l)) => *l == slot,
                (op::IINC, Operand::Iinc { index, .. }) => *index == slot,
                _ => false,
            })
        })
        .collect()
}

/// The bcis the branches and switches of `insns` may jump to.
fn jump_targets(insns: &[Insn]) -> Vec<i64> {
    let mut out = Vec::new();
    for i in insns {
        match &i.operand {
            &Operand::Branch(t) => out.push(t),
            Operand::Table {
                default, targets, ..
            } => {
                out.push(*default);
                out.extend(targets.iter().copied());
            }
            Operand::Lookup { default, pairs } => {
                out.push(*default);
                out.extend(pairs.iter().map(|p| p.1));
            }
            _ => {}
        }
    }
    out
}

/// Whether an instruction decodes to two ops (a narrowing before it).
fn expands(cf: &ClassFile, info: &ClassInfo, ret: Option<FieldType>, i: &Insn) -> bool {
    match (i.opcode, &i.operand) {
        (op::IRETURN, _) => ret.and_then(narrow).is_some(),
        (op::PUTSTATIC | op::PUTFIELD, &Operand::Cp(c)) => cf
            .member_ref(c)
            .and_then(|(_, name, _)| info.field_named(name))
            .is_some_and(|f| narrow(f.ty).is_some()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_for_loop_fuses_into_two_ops_per_iteration() {
        // i = 0; while (i < n) i++;  as javac emits it, n in local 0, i in local 1.
        let ops = vec![
            Op::Const(0),
            Op::Store(1),
            Op::Load(1),
            Op::Load(0),
            Op::IfCmpGe(7),
            Op::Iinc(1, 1),
            Op::Goto(2),
            Op::Return,
        ];
        let (out, bcis) = fuse(ops, vec![0, 1, 2, 3, 4, 7, 10, 13], &mut []);
        assert_eq!(
            out,
            vec![
                Op::Const(0),
                Op::Store(1),
                Op::IfLLGe(1, 0, 4),
                Op::IincGoto(1, 1, 2),
                Op::Return
            ]
        );
        // A fused op reports the bci of its last component, the one that can trap or charge fuel.
        assert_eq!(bcis, vec![0, 1, 4, 10, 13]);
    }

    #[test]
    fn a_fused_array_load_and_add_reports_the_bci_of_the_load() {
        // x + a[3]: only the iaload can trap, so its bci is the op's.
        let ops = vec![
            Op::Load(0),
            Op::Const(3),
            Op::IALoad,
            Op::Add,
            Op::ReturnValue,
        ];
        let (out, bcis) = fuse(ops, vec![0, 1, 3, 4, 5], &mut []);
        assert_eq!(out, vec![Op::AddIALoadLC(0, 3), Op::ReturnValue]);
        assert_eq!(bcis, vec![3, 5]);
    }

    #[test]
    fn fusion_never_swallows_a_branch_target() {
        // The goto targets the second load, so `Load Load Add` must not become one op.
        let ops = vec![Op::Load(0), Op::Load(1), Op::Add, Op::Goto(1)];
        let (out, _) = fuse(ops, vec![0, 1, 2, 3], &mut []);
        assert_eq!(out, vec![Op::Load(0), Op::AddL(1), Op::Goto(1)]);
    }

    #[test]
    fn switch_targets_are_renumbered() {
        let mut sw = [Switch::Lookup {
            keys: Box::new([1]),
            targets: Box::new([2]),
            default: 5,
        }];
        let ops = vec![
            Op::Load(0),
            Op::LookupSwitch(0),
            Op::Load(0),
            Op::Load(1),
            Op::Add,
            Op::Return,
        ];
        let (out, _) = fuse(ops, vec![0; 6], &mut sw);
        assert_eq!(
            out,
            vec![
                Op::Load(0),
                Op::LookupSwitch(0),
                Op::AddLL(0, 1),
                Op::Return
            ]
        );
        assert_eq!(
            sw[0],
            Switch::Lookup {
                keys: Box::new([1]),
                targets: Box::new([2]),
                default: 3
            }
        );
        // A switch target inside a candidate sequence blocks the fusion.
        let mut sw = [Switch::Lookup {
            keys: Box::new([1]),
            targets: Box::new([4]),
            default: 5,
        }];
        let ops = vec![
            Op::Load(0),
            Op::LookupSwitch(0),
            Op::Load(0),
            Op::Load(1),
            Op::Add,
            Op::Return,
        ];
        let (out, _) = fuse(ops, vec![0; 6], &mut sw);
        assert_eq!(
            out,
            vec![
                Op::Load(0),
                Op::LookupSwitch(0),
                Op::Load(0),
                Op::Load(1),
                Op::Add,
                Op::Return
            ]
        );
    }

    #[test]
    fn back_edges_get_their_own_ops_and_forward_branches_do_not() {
        let mut ops = vec![
            Op::IfLLGe(1, 0, 3), // forward
            Op::IfNe(1),         // to itself: a back edge
            Op::IincGoto(1, 1, 0),
            Op::Return,
        ];
        meter(&mut ops, &[]);
        assert_eq!(
            ops,
            vec![
                Op::IfLLGe(1, 0, 3),
                Op::IfNeBack(1),
                Op::IincGotoBack(1, 1, 0),
                Op::Return
            ]
        );
    }

    #[test]
    fn a_loop_that_calls_on_every_iteration_charges_only_the_call() {
        // for (i = 0; i < n; i++) f();
        let mut ops = vec![
            Op::IfLLGe(1, 0, 3),
            Op::Call(1),
            Op::IincGoto(1, 1, 0),
            Op::Return,
        ];
        meter(&mut ops, &[]);
        assert_eq!(ops[2], Op::IincGoto(1, 1, 0));
        // The call on one path only: the back edge charges.
        let mut ops = vec![
            Op::IfLLGe(1, 0, 4),
            Op::IfEq(3),
            Op::Call(1),
            Op::IincGoto(1, 1, 0),
            Op::Return,
        ];
        meter(&mut ops, &[]);
        assert_eq!(ops[3], Op::IincGotoBack(1, 1, 0));
        // A second way into the loop (the goto at 4 lands after the call):
        // the back edge charges.
        let mut ops = vec![
            Op::IfLLGe(1, 0, 4),
            Op::Call(1),
            Op::IincGoto(1, 1, 0),
            Op::Return,
            Op::Goto(2),
        ];
        meter(&mut ops, &[]);
        assert_eq!(ops[2], Op::IincGotoBack(1, 1, 0));
        // A switch charges like a call; metering off and on again gives the
        // same program.
        let sw = [Switch::Table {
            low: 0,
            targets: Box::new([2]),
            default: 2,
        }];
        let mut ops = vec![
            Op::IfLLGe(1, 0, 4),
            Op::Load(1),
            Op::TableSwitch(0),
            Op::GotoBack(0),
            Op::Return,
        ];
        meter(&mut ops, &sw);
        assert_eq!(ops[3], Op::Goto(0));
        let metered = ops.clone();
        ops.iter_mut().for_each(|o| *o = o.unmetered());
        assert_eq!(ops[2], Op::SwitchUnmetered(0));
        meter(&mut ops, &sw);
        assert_eq!(ops, metered);
    }

    #[test]
    fn metering_off_leaves_no_charging_op_and_on_restores_every_one() {
        let switches = [
            Switch::Table {
                low: 0,
                targets: Box::new([0]),
                default: 0,
            },
            Switch::Lookup {
                keys: Box::new([1]),
                targets: Box::new([0]),
                default: 0,
            },
        ];
        let mut ops = vec![
            Op::Load(0),
            Op::TableSwitch(0),
            Op::LookupSwitch(1),
            Op::Call(2),
            Op::CallNative(0),
            Op::IfLLGe(1, 0, 9), // forward
            Op::IfLt(0),
            Op::IfCmpNe(7), // to itself
            Op::IincGoto(1, 1, 5),
            Op::Return,
        ];
        meter(&mut ops, &switches);
        let metered = ops.clone();
        let charges = |o: &Op| {
            matches!(
                o,
                Op::TableSwitch(_)
                    | Op::LookupSwitch(_)
                    | Op::Call(_)
                    | Op::CallNative(_)
                    | Op::IfLtBack(_)
                    | Op::IfCmpNeBack(_)
                    | Op::IincGotoBack(..)
            )
        };
        assert_eq!(metered.iter().filter(|o| charges(o)).count(), 7);
        let off: Vec<Op> = metered.iter().map(|o| o.unmetered()).collect();
        assert_eq!(
            off,
            vec![
                Op::Load(0),
                Op::SwitchUnmetered(0),
                Op::SwitchUnmetered(1),
                Op::CallUnmetered(2),
                Op::CallNativeUnmetered(0),
                Op::IfLLGe(1, 0, 9),
                Op::IfLt(0),
                Op::IfCmpNe(7),
                Op::IincGoto(1, 1, 5),
                Op::Return,
            ]
        );
        let on: Vec<Op> = off
            .iter()
            .enumerate()
            .map(|(i, o)| o.metered(i, &switches))
            .collect();
        assert_eq!(on, metered);
    }

    #[test]
    fn an_op_is_eight_bytes() {
        assert_eq!(core::mem::size_of::<Op>(), 8);
    }
}
