//! The interpreter: a `match` loop over decoded [`Op`]s (JVMS chapter 6
//! semantics for the subset; U-Net/SLE §3.3 for what must be fast).
//!
//! All frames live in one block of `i32` slots: a frame is its locals followed by its
//! operand stack, and a call makes the caller's pushed arguments the callee's
//! first locals without copying, as the JVM's own frames do. References are
//! heap handles in the same `i32` slots. The loop keeps the program counter,
//! the frame pointer and the stack pointer in locals; a call saves them on a
//! small side stack of return records.
//!
//! Fuel is charged only where a loop or recursion can happen: at taken back
//! edges (marked at decode time, so the loop never compares a target with the
//! pc), at switches and at calls. Those ops come in a charging and a plain
//! form, and [`Program::set_metering`] picks one for the whole program, so
//! with metering off no charge runs, and on and off run the same loop. A
//! charge decrements a 32-bit counter kept in the frame block, at a fixed
//! distance from the frames (so that the store cannot 4 KiB-alias the
//! entry frame's loads, wherever the host keeps the machine); the rest of
//! a budget above 2^32 waits in a reserve that refills it.
//!
//! Every run-time error is a [`Trap`] with the method and bytecode index. The
//! loop relies on the verifier for stack discipline (no underflow, no
//! overflow of `max_stack`, locals in range, operand types); all indexing is
//! still bounds-checked, and heap accesses check the object kind, so even an
//! invariant broken by a jive bug cannot corrupt memory.

use crate::decode::{Func, NativeDecl, Op, Program, Switch};
use crate::error::{Trap, TrapKind};
use crate::heap::{Heap, LENT, Object, ObjectMut};
use crate::natives::{Context, NativeError, NativeFn, PANICKED};
use crate::subset::{FieldType, Prim};

/// A saved caller frame.
#[derive(Debug, Clone, Copy)]
struct Return {
    func: u16,
    pc: u32,
    fp: u32,
    sp: u32,
}

/// Slots in the frame stack: a power of two, so that an index masked with
/// `STACK_MASK` is in bounds by construction and the compiler drops the
/// bounds check of every local and operand access. 16,384 slots (64 KiB):
/// 256 calls deep at 64 slots per frame; deeper chains of bigger frames trap
/// with `CallDepthExceeded`.
pub const STACK_SLOTS: usize = 1 << 14;
const STACK_MASK: usize = STACK_SLOTS - 1;

/// Slots of the frame block: the frame stack, then the fuel counter of the
/// running invocation at [`FUEL_SLOT`].
const BLOCK_SLOTS: usize = STACK_SLOTS + 1024;

/// Where the hot fuel counter lives in the frame block: 2 KiB past a
/// multiple of 4 KiB from slot 0. x86 cores first match a load against
/// older, still-buffered stores by the low 12 address bits only, and a
/// false match (4 KiB aliasing) holds the load back. The loop stores to the
/// counter at every back edge and to the locals at nearly every op, while
/// each op's fetch waits for loads of the op array and the frame; a counter
/// whose low 12 bits happened to equal those of a hot op or local would
/// slow every iteration (the empty loop ran 1.5 to 1.8 times slower with
/// the counter on the low 12 bits of its back-edge op). In the frame block, at this fixed distance, it can
/// alias only slot 512 and every 1024th after it, never the entry frame,
/// wherever the host keeps the [`Machine`] (inside its `Applet`, often on a
/// stack whose low 12 bits the kernel randomizes per process); see
/// docs/jive.md, "Where the loop's data lives".
const FUEL_SLOT: usize = STACK_SLOTS + 512;
// Outside the masked frame stack, inside the block, half a page from slot 0.
const _: () =
    assert!(FUEL_SLOT >= STACK_SLOTS && FUEL_SLOT < BLOCK_SLOTS && (FUEL_SLOT * 4) % 4096 == 2048);

/// The fuel counter holds at most this many units (the low 32 bits of an
/// invocation's fuel); the rest waits in [`Machine::fuel_reserve`] and is
/// moved into the counter, `FUEL_CHUNK` at a time, when it runs out.
const FUEL_CHUNK: u64 = 1 << 32;

/// The frame stack, indexed modulo its size. Verified code never leaves its
/// frame, and calls check that the callee's frame fits, so masking never
/// changes an index; it only lets the bounds check go.
struct Stack<'a>(&'a mut [i32; BLOCK_SLOTS]);

impl Stack<'_> {
    /// The fuel counter (an unsigned count in an `i32` slot).
    #[inline(always)]
    fn fuel(&mut self) -> &mut i32 {
        &mut self.0[FUEL_SLOT]
    }
}

impl core::ops::Index<usize> for Stack<'_> {
    type Output = i32;
    #[inline(always)]
    fn index(&self, i: usize) -> &i32 {
        &self.0[i & STACK_MASK]
    }
}

impl core::ops::IndexMut<usize> for Stack<'_> {
    #[inline(always)]
    fn index_mut(&mut self, i: usize) -> &mut i32 {
        &mut self.0[i & STACK_MASK]
    }
}

/// The reusable execution stacks of one applet.
#[derive(Debug, Clone)]
pub struct Machine {
    /// The frame stack and the hot fuel counter ([`FUEL_SLOT`]), in one
    /// allocation. The counter is in memory rather than a local on purpose:
    /// the loop then keeps it there (one read-modify-write at a back edge)
    /// instead of tying up a register every op needs. Measured with
    /// callgrind, a local costs 6 to 36 more instructions per iteration on
    /// every benchmark loop, metered or not (LLVM spills other state).
    slots: Box<[i32; BLOCK_SLOTS]>,
    returns: Vec<Return>,
    /// Fuel of the running invocation not yet in the counter: a multiple of
    /// [`FUEL_CHUNK`].
    fuel_reserve: u64,
}

/// Moves the next [`FUEL_CHUNK`] of `reserve` into the counter, charging
/// one unit of it: the counter's new value, or `None` when no fuel is left.
/// Out of line: it runs once per 2^32 charges at most.
#[cold]
#[inline(never)]
fn refill(reserve: &mut u64) -> Option<i32> {
    if *reserve == 0 {
        return None;
    }
    let take = (*reserve).min(FUEL_CHUNK);
    *reserve -= take;
    Some((take - 1) as u32 as i32)
}

impl Default for Machine {
    fn default() -> Self {
        let slots: Box<[i32]> = vec![0; BLOCK_SLOTS].into_boxed_slice();
        Machine {
            slots: slots
                .try_into()
                .unwrap_or_else(|_| Box::new([0; BLOCK_SLOTS])),
            returns: Vec::new(),
            fuel_reserve: 0,
        }
    }
}

/// The mutable state an invocation works on.
pub struct State<'a> {
    /// The applet heap.
    pub heap: &'a mut Heap,
    /// Static field slots.
    pub statics: &'a mut [i32],
    /// Bound natives, by native index.
    pub natives: &'a [NativeFn],
    /// The host value the natives of this invocation may reach
    /// ([`Context::host`]), e.g. the endpoint an applet runs for.
    pub host: Option<&'a mut dyn core::any::Any>,
}

/// A completed invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The returned value (`None` for `void`); arrays are heap handles.
    pub value: Option<i32>,
    /// Fuel units used.
    pub fuel_used: u64,
}

/// Run-time limits of one invocation.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// Fuel units available (ignored unless metering).
    pub fuel: u64,
    /// Maximum call depth (the entry method is depth 1).
    pub max_depth: u32,
}

impl RunLimits {
    /// An applet's limits as one invocation applies them (no fuel limit:
    /// `u64::MAX`, which metering never reaches).
    pub(crate) fn of(limits: &crate::Limits) -> RunLimits {
        RunLimits {
            fuel: limits.fuel.unwrap_or(u64::MAX),
            max_depth: limits.max_call_depth,
        }
    }
}

/// Builds a trap for the op before `pc` (out of line: traps are rare).
#[cold]
#[inline(never)]
fn make_trap(kind: TrapKind, f: &Func, pc: usize) -> Trap {
    let bci = f.bcis.get(pc.wrapping_sub(1)).copied().unwrap_or(0);
    Trap {
        kind,
        method: f.id.clone(),
        bci,
    }
}

/// What a native's result means for the caller: the value to push
/// (narrowed to the declared type; `None` for `void`), or the trap. A
/// returned array handle must name an array of the declared type.
#[inline]
pub(crate) fn native_result(
    decl: &NativeDecl,
    heap: &Heap,
    result: Result<i32, NativeError>,
) -> Result<Option<i32>, TrapKind> {
    // The common case inline: an int-like or void result.
    match (&result, decl.ret) {
        (Ok(_), None) => Ok(None),
        (&Ok(v), Some(FieldType::Prim(p))) => Ok(Some(crate::narrow(p, v))),
        _ => native_result_checked(decl, heap, result),
    }
}

/// [`native_result`] for a failed native or an array result, whose handle
/// must name an array of the declared type.
#[cold]
#[inline(never)]
fn native_result_checked(
    decl: &NativeDecl,
    heap: &Heap,
    result: Result<i32, NativeError>,
) -> Result<Option<i32>, TrapKind> {
    let v = match result {
        Err(e) => {
            return Err(TrapKind::Native(format!(
                "{}{}: {}",
                decl.name, decl.descriptor, e.0
            )));
        }
        Ok(v) => v,
    };
    if let Some(FieldType::Array(p)) = decl.ret
        && v != 0
        && !matches!(
            (heap.get(v), p),
            (Some(Object::Booleans(_)), Prim::Boolean)
                | (Some(Object::Bytes(_)), Prim::Byte)
                | (Some(Object::Shorts(_)), Prim::Short)
                | (Some(Object::Ints(_)), Prim::Int)
        )
    {
        return Err(TrapKind::Native(format!(
            "{}{} returned {v}, which is not a handle of the declared array type",
            decl.name, decl.descriptor
        )));
    }
    Ok(decl.ret.map(|t| match t {
        FieldType::Prim(p) => crate::narrow(p, v),
        FieldType::Array(_) => v,
    }))
}

/// The op that found no object behind a handle (`array!`), for its trap.
#[derive(Clone, Copy)]
enum Access {
    IALoad,
    SALoad,
    IAStore,
    SAStore,
    BAStore,
    GetField,
    PutField,
}

impl Access {
    fn name(self) -> &'static str {
        match self {
            Access::IALoad => "iaload",
            Access::SALoad => "saload",
            Access::IAStore => "iastore",
            Access::SAStore => "sastore",
            Access::BAStore => "bastore",
            Access::GetField => "getfield",
            Access::PutField => "putfield",
        }
    }
}

/// Why `array!` found no object for a handle that is not `null`, the op
/// `op` (an element access at `index`, or a field's, whose `index` is
/// unused): a dangling handle, or the lent array
/// ([`crate::heap::LENT`]) in an op the verifier lets no code make on it
/// where the host declared it lent. An element access after the lend
/// traps as the JIT's code does on the empty array the handle then names:
/// the index is out of bounds of length 0. During the lend, a `bastore`
/// is a write of it, and any other op (`iaload`, `saload`, `iastore`,
/// `sastore`, a field's) takes the array for another type than it is,
/// which the type check excludes for every class: both are internal
/// errors that say so.
#[cold]
fn no_elements(heap: &Heap, handle: i32, op: Access, index: i32) -> TrapKind {
    if handle != LENT {
        return internal("dangling handle");
    }
    let field = matches!(op, Access::GetField | Access::PutField);
    if !field && !heap.is_lending() {
        TrapKind::ArrayIndexOutOfBounds { index, length: 0 }
    } else if let Access::BAStore = op {
        internal("a write of the lent byte[]")
    } else {
        TrapKind::Native(format!(
            "internal error (unverified program?): {} of the lent array, which is a byte[]",
            op.name()
        ))
    }
}

#[cold]
pub(crate) fn internal(what: &str) -> TrapKind {
    TrapKind::Native(format!("internal error (unverified program?): {what}"))
}

impl Machine {
    /// Runs method `entry` with `args` (one slot per argument including
    /// `this`). If `prog` is [metered](Program::metered), fuel is charged
    /// and enforced against `limits.fuel`.
    pub fn run(
        &mut self,
        prog: &Program,
        st: &mut State<'_>,
        entry: u16,
        args: &[i32],
        limits: RunLimits,
    ) -> Result<Outcome, Trap> {
        self.returns.clear();
        let mut func: u16 = entry;
        let mut f: &Func = match prog.funcs.get(usize::from(entry)).and_then(Option::as_ref) {
            Some(f) => f,
            None => {
                return Err(Trap {
                    kind: internal("entry is not a bytecode method"),
                    method: String::new(),
                    bci: 0,
                });
            }
        };
        let mut code: &[Op] = &f.code;
        if args.len() != usize::from(f.arg_slots)
            || args.len() > usize::from(f.max_locals)
            || usize::from(f.max_locals) + usize::from(f.max_stack) > STACK_SLOTS
        {
            return Err(Trap {
                kind: internal("argument count"),
                method: f.id.clone(),
                bci: 0,
            });
        }
        self.slots[..args.len()].copy_from_slice(args);
        let fuel = limits.fuel;
        self.fuel_reserve = fuel & !(FUEL_CHUNK - 1);
        let mut s = Stack(&mut self.slots);
        *s.fuel() = fuel as u32 as i32;
        let mut pc: usize = 0;
        let mut fp: usize = 0;
        let mut sp: usize = usize::from(f.max_locals);

        macro_rules! trap {
            ($kind:expr) => {{
                return Err(make_trap($kind, f, pc));
            }};
        }
        macro_rules! charge {
            () => {{
                // One `sub [mem], 1` and a jump on its borrow: the counter
                // is empty exactly when it was already 0; then the reserve
                // refills it, or the fuel is used up. The fence (no
                // instruction) keeps LLVM from forwarding the previous
                // charge's store to this load: it would do so by loading the
                // counter at the top of the dispatch loop (load PRE), one
                // more instruction on every op.
                core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
                let (left, out) = (*s.fuel() as u32).overflowing_sub(1);
                *s.fuel() = left as i32;
                if out {
                    match refill(&mut self.fuel_reserve) {
                        Some(left) => *s.fuel() = left,
                        None => trap!(TrapKind::FuelExhausted(limits.fuel)),
                    }
                }
            }};
        }
        // Taken branches. Decode marks back edges (`...Back` ops), so the
        // loop never compares a target with the pc: forward branches never
        // charge, back edges always do (an unmetered program has none).
        macro_rules! forward {
            ($t:expr) => {{
                pc = $t as usize;
            }};
        }
        macro_rules! back {
            ($t:expr) => {{
                charge!();
                pc = $t as usize;
            }};
        }
        // The bodies shared by the forward and back form of each branch op;
        // `$go` is `forward` or `back`.
        macro_rules! if_zero {
            ($cmp:tt, $t:expr, $go:ident) => {{
                sp -= 1;
                if s[sp] $cmp 0 {
                    $go!($t);
                    continue;
                }
            }};
        }
        macro_rules! if_cmp {
            ($cmp:tt, $t:expr, $go:ident) => {{
                sp -= 2;
                if s[sp] $cmp s[sp + 1] {
                    $go!($t);
                    continue;
                }
            }};
        }
        macro_rules! if_ll {
            ($a:expr, $cmp:tt, $b:expr, $t:expr, $go:ident) => {{
                if s[fp + usize::from($a)] $cmp s[fp + usize::from($b)] {
                    $go!($t);
                    continue;
                }
            }};
        }
        macro_rules! iinc_goto {
            ($n:expr, $d:expr, $t:expr, $go:ident) => {{
                let x = &mut s[fp + usize::from($n)];
                *x = x.wrapping_add(i32::from($d));
                $go!($t)
            }};
        }
        // The object behind handle `$h` for the op `$op` (an `Access`):
        // an element access at index `$i`, or (without one) a field's.
        macro_rules! array {
            ($h:expr, $op:ident) => {
                array!($h, 0, $op)
            };
            ($h:expr, $i:expr, $op:ident) => {
                match st.heap.get_mut($h) {
                    Some(o) => o,
                    None if $h == 0 => trap!(TrapKind::NullPointer),
                    None => trap!(no_elements(st.heap, $h, Access::$op, $i)),
                }
            };
        }
        // `array!` for a `bastore` at index `$i`.
        macro_rules! array_at {
            ($h:expr, $i:expr) => {
                array!($h, $i, BAStore)
            };
        }
        // A `baload`'s byte: an array of the heap's as `array!` finds it,
        // the lent one ([`crate::heap::LENT`]) on its miss, read only,
        // through `Heap::lent_bytes`, whose `unsafe` the lend's invariant
        // argues: the bytes readable for the lent length until the lend
        // ends, an empty array after (every index traps here, as on the
        // JIT).
        macro_rules! byte_at {
            ($h:expr, $i:expr) => {
                match st.heap.get_mut($h) {
                    Some(ObjectMut::Bytes(v) | ObjectMut::Booleans(v)) => i32::from(*index!(v, $i)),
                    Some(_) => trap!(internal("baload on a non-byte array")),
                    None if $h == LENT => {
                        let v = st.heap.lent_bytes();
                        match v.get($i as usize) {
                            Some(&x) => i32::from(x),
                            None => trap!(TrapKind::ArrayIndexOutOfBounds {
                                index: $i,
                                length: v.len() as i32
                            }),
                        }
                    }
                    None if $h == 0 => trap!(TrapKind::NullPointer),
                    None => trap!(internal("dangling handle")),
                }
            };
        }
        macro_rules! index {
            ($v:expr, $i:expr) => {{
                let len = $v.len();
                match $v.get_mut($i as usize) {
                    Some(x) => x,
                    None => trap!(TrapKind::ArrayIndexOutOfBounds {
                        index: $i,
                        length: len as i32
                    }),
                }
            }};
        }
        macro_rules! ret {
            ($value:expr) => {{
                let value: Option<i32> = $value;
                match self.returns.pop() {
                    None => {
                        return Ok(Outcome {
                            value,
                            fuel_used: fuel - (self.fuel_reserve + u64::from(*s.fuel() as u32)),
                        });
                    }
                    Some(r) => {
                        func = r.func;
                        f = match prog.funcs.get(usize::from(func)).and_then(Option::as_ref) {
                            Some(f) => f,
                            None => trap!(internal("return to a native")),
                        };
                        code = &f.code;
                        pc = r.pc as usize;
                        fp = r.fp as usize;
                        sp = r.sp as usize;
                        if let Some(v) = value {
                            s[sp] = v;
                            sp += 1;
                        }
                    }
                }
            }};
        }

        // The bodies of the ops that come in a metered and an unmetered
        // form ([`Program::set_metering`](crate::decode::Program::set_metering)).
        macro_rules! switch {
            ($k:expr) => {{
                let k = $k;
                sp -= 1;
                let key = s[sp];
                pc = match prog.switches.get(k as usize) {
                    Some(Switch::Table {
                        low,
                        targets,
                        default,
                    }) => {
                        let i = i64::from(key) - i64::from(*low);
                        usize::try_from(i)
                            .ok()
                            .and_then(|i| targets.get(i))
                            .copied()
                            .unwrap_or(*default) as usize
                    }
                    Some(Switch::Lookup {
                        keys,
                        targets,
                        default,
                    }) => match keys.binary_search(&key) {
                        Ok(i) => targets.get(i).copied().unwrap_or(*default) as usize,
                        Err(_) => *default as usize,
                    },
                    None => trap!(internal("switch table")),
                };
            }};
        }
        macro_rules! call {
            ($m:expr) => {{
                let m = $m;
                let callee = match prog.funcs.get(usize::from(m)).and_then(Option::as_ref) {
                    Some(c) => c,
                    None => trap!(internal("call of a native as bytecode")),
                };
                if self.returns.len() + 1 >= limits.max_depth as usize {
                    trap!(TrapKind::CallDepthExceeded(limits.max_depth));
                }
                let nfp = sp - usize::from(callee.arg_slots);
                if callee.has_receiver && s[nfp] == 0 {
                    trap!(TrapKind::NullPointer);
                }
                if nfp + usize::from(callee.max_locals) + usize::from(callee.max_stack)
                    > STACK_SLOTS
                {
                    // Deep recursion of big frames: the JVM's StackOverflowError.
                    trap!(TrapKind::CallDepthExceeded(limits.max_depth));
                }
                self.returns.push(Return {
                    func,
                    pc: pc as u32,
                    fp: fp as u32,
                    sp: nfp as u32,
                });
                func = m;
                f = callee;
                code = &f.code;
                pc = 0;
                fp = nfp;
                sp = fp + usize::from(f.max_locals);
            }};
        }
        macro_rules! call_native {
            ($n:expr) => {{
                let n = $n;
                let (Some(decl), Some(native)) = (
                    prog.natives.get(usize::from(n)),
                    st.natives.get(usize::from(n)),
                ) else {
                    trap!(internal("native index"))
                };
                let k = decl.params.len();
                sp -= k;
                // A panicking native is a trap, as on the JIT (which cannot
                // unwind through generated code): the invocation ends as
                // any failed native's does, and the host's code around it
                // (which may have lent words for the invocation) runs on.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut ctx = Context {
                        heap: &mut *st.heap,
                        host: st.host.as_deref_mut(),
                    };
                    native(&mut ctx, s.0.get(sp..sp + k).unwrap_or_default())
                }))
                .unwrap_or_else(|_| Err(NativeError(PANICKED.into())));
                match native_result(decl, st.heap, result) {
                    Err(kind) => trap!(kind),
                    Ok(Some(v)) => {
                        s[sp] = v;
                        sp += 1;
                    }
                    Ok(None) => {}
                }
            }};
        }

        loop {
            let Some(&op) = code.get(pc) else {
                trap!(internal("fell off the end of the code"))
            };
            pc += 1;
            match op {
                Op::Nop => {}
                Op::Const(v) => {
                    s[sp] = v;
                    sp += 1;
                }
                Op::Load(n) => {
                    s[sp] = s[fp + usize::from(n)];
                    sp += 1;
                }
                Op::Store(n) => {
                    sp -= 1;
                    s[fp + usize::from(n)] = s[sp];
                }
                Op::Iinc(n, d) => {
                    let x = &mut s[fp + usize::from(n)];
                    *x = x.wrapping_add(i32::from(d));
                }
                Op::IALoad => {
                    sp -= 1;
                    let (a, i) = (s[sp - 1], s[sp]);
                    s[sp - 1] = match array!(a, i, IALoad) {
                        ObjectMut::Ints(v) => *index!(v, i),
                        _ => trap!(internal("iaload on a non-int array")),
                    };
                }
                Op::BALoad => {
                    sp -= 1;
                    let (a, i) = (s[sp - 1], s[sp]);
                    s[sp - 1] = byte_at!(a, i);
                }
                Op::SALoad => {
                    sp -= 1;
                    let (a, i) = (s[sp - 1], s[sp]);
                    s[sp - 1] = match array!(a, i, SALoad) {
                        ObjectMut::Shorts(v) => i32::from(*index!(v, i)),
                        _ => trap!(internal("saload on a non-short array")),
                    };
                }
                Op::IAStore => {
                    sp -= 3;
                    let (a, i, x) = (s[sp], s[sp + 1], s[sp + 2]);
                    match array!(a, i, IAStore) {
                        ObjectMut::Ints(v) => *index!(v, i) = x,
                        _ => trap!(internal("iastore on a non-int array")),
                    }
                }
                Op::BAStore => {
                    sp -= 3;
                    let (a, i, x) = (s[sp], s[sp + 1], s[sp + 2]);
                    match array_at!(a, i) {
                        ObjectMut::Bytes(v) => *index!(v, i) = x as i8,
                        ObjectMut::Booleans(v) => *index!(v, i) = (x & 1) as i8,
                        _ => trap!(internal("bastore on a non-byte array")),
                    }
                }
                Op::SAStore => {
                    sp -= 3;
                    let (a, i, x) = (s[sp], s[sp + 1], s[sp + 2]);
                    match array!(a, i, SAStore) {
                        ObjectMut::Shorts(v) => *index!(v, i) = x as i16,
                        _ => trap!(internal("sastore on a non-short array")),
                    }
                }
                Op::Pop => sp -= 1,
                Op::Pop2 => sp -= 2,
                Op::Dup => {
                    s[sp] = s[sp - 1];
                    sp += 1;
                }
                Op::DupX1 => {
                    let (b, a) = (s[sp - 2], s[sp - 1]);
                    s[sp - 2] = a;
                    s[sp - 1] = b;
                    s[sp] = a;
                    sp += 1;
                }
                Op::DupX2 => {
                    let (c, b, a) = (s[sp - 3], s[sp - 2], s[sp - 1]);
                    s[sp - 3] = a;
                    s[sp - 2] = c;
                    s[sp - 1] = b;
                    s[sp] = a;
                    sp += 1;
                }
                Op::Dup2 => {
                    s[sp] = s[sp - 2];
                    s[sp + 1] = s[sp - 1];
                    sp += 2;
                }
                Op::Dup2X1 => {
                    let (c, b, a) = (s[sp - 3], s[sp - 2], s[sp - 1]);
                    s[sp - 3] = b;
                    s[sp - 2] = a;
                    s[sp - 1] = c;
                    s[sp] = b;
                    s[sp + 1] = a;
                    sp += 2;
                }
                Op::Dup2X2 => {
                    let (d, c, b, a) = (s[sp - 4], s[sp - 3], s[sp - 2], s[sp - 1]);
                    s[sp - 4] = b;
                    s[sp - 3] = a;
                    s[sp - 2] = d;
                    s[sp - 1] = c;
                    s[sp] = b;
                    s[sp + 1] = a;
                    sp += 2;
                }
                Op::Swap => {
                    let (a, b) = (s[sp - 1], s[sp - 2]);
                    s[sp - 1] = b;
                    s[sp - 2] = a;
                }
                Op::Add => {
                    sp -= 1;
                    s[sp - 1] = s[sp - 1].wrapping_add(s[sp]);
                }
                Op::Sub => {
                    sp -= 1;
                    s[sp - 1] = s[sp - 1].wrapping_sub(s[sp]);
                }
                Op::Mul => {
                    sp -= 1;
                    s[sp - 1] = s[sp - 1].wrapping_mul(s[sp]);
                }
                Op::Div => {
                    sp -= 1;
                    let d = s[sp];
                    if d == 0 {
                        trap!(TrapKind::DivisionByZero);
                    }
                    s[sp - 1] = s[sp - 1].wrapping_div(d);
                }
                Op::Rem => {
                    sp -= 1;
                    let d = s[sp];
                    if d == 0 {
                        trap!(TrapKind::DivisionByZero);
                    }
                    s[sp - 1] = s[sp - 1].wrapping_rem(d);
                }
                Op::Neg => s[sp - 1] = s[sp - 1].wrapping_neg(),
                Op::Shl => {
                    sp -= 1;
                    s[sp - 1] = s[sp - 1].wrapping_shl(s[sp] as u32);
                }
                Op::Shr => {
                    sp -= 1;
                    s[sp - 1] = s[sp - 1].wrapping_shr(s[sp] as u32);
                }
                Op::Ushr => {
                    sp -= 1;
                    s[sp - 1] = (s[sp - 1] as u32).wrapping_shr(s[sp] as u32) as i32;
                }
                Op::And => {
                    sp -= 1;
                    s[sp - 1] &= s[sp];
                }
                Op::Or => {
                    sp -= 1;
                    s[sp - 1] |= s[sp];
                }
                Op::Xor => {
                    sp -= 1;
                    s[sp - 1] ^= s[sp];
                }
                Op::I2B => s[sp - 1] = i32::from(s[sp - 1] as i8),
                Op::I2S => s[sp - 1] = i32::from(s[sp - 1] as i16),
                Op::I2Z => s[sp - 1] &= 1,
                Op::IfEq(t) => if_zero!(==, t, forward),
                Op::IfEqBack(t) => if_zero!(==, t, back),
                Op::IfNe(t) => if_zero!(!=, t, forward),
                Op::IfNeBack(t) => if_zero!(!=, t, back),
                Op::IfLt(t) => if_zero!(<, t, forward),
                Op::IfLtBack(t) => if_zero!(<, t, back),
                Op::IfGe(t) => if_zero!(>=, t, forward),
                Op::IfGeBack(t) => if_zero!(>=, t, back),
                Op::IfGt(t) => if_zero!(>, t, forward),
                Op::IfGtBack(t) => if_zero!(>, t, back),
                Op::IfLe(t) => if_zero!(<=, t, forward),
                Op::IfLeBack(t) => if_zero!(<=, t, back),
                Op::IfCmpEq(t) => if_cmp!(==, t, forward),
                Op::IfCmpEqBack(t) => if_cmp!(==, t, back),
                Op::IfCmpNe(t) => if_cmp!(!=, t, forward),
                Op::IfCmpNeBack(t) => if_cmp!(!=, t, back),
                Op::IfCmpLt(t) => if_cmp!(<, t, forward),
                Op::IfCmpLtBack(t) => if_cmp!(<, t, back),
                Op::IfCmpGe(t) => if_cmp!(>=, t, forward),
                Op::IfCmpGeBack(t) => if_cmp!(>=, t, back),
                Op::IfCmpGt(t) => if_cmp!(>, t, forward),
                Op::IfCmpGtBack(t) => if_cmp!(>, t, back),
                Op::IfCmpLe(t) => if_cmp!(<=, t, forward),
                Op::IfCmpLeBack(t) => if_cmp!(<=, t, back),
                Op::Goto(t) => forward!(t),
                Op::GotoBack(t) => back!(t),
                Op::TableSwitch(k) | Op::LookupSwitch(k) => {
                    charge!();
                    switch!(k)
                }
                Op::SwitchUnmetered(k) => switch!(k),
                Op::ReturnValue => {
                    let v = s[sp - 1];
                    ret!(Some(v))
                }
                Op::Return => ret!(None),
                Op::GetStatic(k) => {
                    s[sp] = match st.statics.get(usize::from(k)) {
                        Some(&v) => v,
                        None => trap!(internal("static slot")),
                    };
                    sp += 1;
                }
                Op::PutStatic(k) => {
                    sp -= 1;
                    match st.statics.get_mut(usize::from(k)) {
                        Some(x) => *x = s[sp],
                        None => trap!(internal("static slot")),
                    }
                }
                Op::GetField(k) => {
                    let o = s[sp - 1];
                    s[sp - 1] = match array!(o, GetField) {
                        ObjectMut::Instance(v) => match v.get(usize::from(k)) {
                            Some(&x) => x,
                            None => trap!(internal("instance slot")),
                        },
                        _ => trap!(internal("getfield on an array")),
                    };
                }
                Op::PutField(k) => {
                    sp -= 2;
                    let (o, x) = (s[sp], s[sp + 1]);
                    match array!(o, PutField) {
                        ObjectMut::Instance(v) => match v.get_mut(usize::from(k)) {
                            Some(slot) => *slot = x,
                            None => trap!(internal("instance slot")),
                        },
                        _ => trap!(internal("putfield on an array")),
                    }
                }
                Op::Call(m) => {
                    charge!();
                    call!(m)
                }
                Op::CallUnmetered(m) => call!(m),
                Op::CallNative(n) => {
                    charge!();
                    call_native!(n)
                }
                Op::CallNativeUnmetered(n) => call_native!(n),
                Op::ObjectInit => sp -= 1,
                Op::NewArray(p) => {
                    let n = s[sp - 1];
                    if n < 0 {
                        trap!(TrapKind::NegativeArraySize(n));
                    }
                    s[sp - 1] = match st.heap.alloc_array(p, n) {
                        Ok(h) => h,
                        Err(e) => trap!(TrapKind::HeapLimitExceeded {
                            requested: e.requested,
                            in_use: e.in_use,
                            limit: e.limit
                        }),
                    };
                }
                Op::IfLLEq(a, b, t) => if_ll!(a, ==, b, t, forward),
                Op::IfLLEqBack(a, b, t) => if_ll!(a, ==, b, t, back),
                Op::IfLLNe(a, b, t) => if_ll!(a, !=, b, t, forward),
                Op::IfLLNeBack(a, b, t) => if_ll!(a, !=, b, t, back),
                Op::IfLLLt(a, b, t) => if_ll!(a, <, b, t, forward),
                Op::IfLLLtBack(a, b, t) => if_ll!(a, <, b, t, back),
                Op::IfLLGe(a, b, t) => if_ll!(a, >=, b, t, forward),
                Op::IfLLGeBack(a, b, t) => if_ll!(a, >=, b, t, back),
                Op::IfLLGt(a, b, t) => if_ll!(a, >, b, t, forward),
                Op::IfLLGtBack(a, b, t) => if_ll!(a, >, b, t, back),
                Op::IfLLLe(a, b, t) => if_ll!(a, <=, b, t, forward),
                Op::IfLLLeBack(a, b, t) => if_ll!(a, <=, b, t, back),
                Op::IincGoto(n, d, t) => iinc_goto!(n, d, t, forward),
                Op::IincGotoBack(n, d, t) => iinc_goto!(n, d, t, back),
                Op::Load2(a, b) => {
                    s[sp] = s[fp + usize::from(a)];
                    s[sp + 1] = s[fp + usize::from(b)];
                    sp += 2;
                }
                Op::AddL(n) => s[sp - 1] = s[sp - 1].wrapping_add(s[fp + usize::from(n)]),
                Op::AddS(k) => {
                    let v = match st.statics.get(usize::from(k)) {
                        Some(&v) => v,
                        None => trap!(internal("static slot")),
                    };
                    s[sp - 1] = s[sp - 1].wrapping_add(v);
                }
                Op::IALoadLL(a, i) => {
                    let (a, i) = (s[fp + usize::from(a)], s[fp + usize::from(i)]);
                    s[sp] = match array!(a, i, IALoad) {
                        ObjectMut::Ints(v) => *index!(v, i),
                        _ => trap!(internal("iaload on a non-int array")),
                    };
                    sp += 1;
                }
                Op::IALoadLC(a, i) => {
                    let (a, i) = (s[fp + usize::from(a)], i32::from(i));
                    s[sp] = match array!(a, i, IALoad) {
                        ObjectMut::Ints(v) => *index!(v, i),
                        _ => trap!(internal("iaload on a non-int array")),
                    };
                    sp += 1;
                }
                Op::BALoadLL(a, i) => {
                    let (a, i) = (s[fp + usize::from(a)], s[fp + usize::from(i)]);
                    s[sp] = byte_at!(a, i);
                    sp += 1;
                }
                Op::AddIALoadLC(a, i) => {
                    let (a, i) = (s[fp + usize::from(a)], i32::from(i));
                    let x = match array!(a, i, IALoad) {
                        ObjectMut::Ints(v) => *index!(v, i),
                        _ => trap!(internal("iaload on a non-int array")),
                    };
                    s[sp - 1] = s[sp - 1].wrapping_add(x);
                }
                Op::AddLL(a, b) => {
                    s[sp] = s[fp + usize::from(a)].wrapping_add(s[fp + usize::from(b)]);
                    sp += 1;
                }
                Op::IAStoreLCL(a, i, v) => {
                    let (a, i, x) = (s[fp + usize::from(a)], i32::from(i), s[fp + usize::from(v)]);
                    match array!(a, i, IAStore) {
                        ObjectMut::Ints(v) => *index!(v, i) = x,
                        _ => trap!(internal("iastore on a non-int array")),
                    }
                }
                Op::IAStoreLLL(a, i, v) => {
                    let (a, i, x) = (
                        s[fp + usize::from(a)],
                        s[fp + usize::from(i)],
                        s[fp + usize::from(v)],
                    );
                    match array!(a, i, IAStore) {
                        ObjectMut::Ints(v) => *index!(v, i) = x,
                        _ => trap!(internal("iastore on a non-int array")),
                    }
                }
                Op::BAStoreLLL(a, i, v) => {
                    let (a, i, x) = (
                        s[fp + usize::from(a)],
                        s[fp + usize::from(i)],
                        s[fp + usize::from(v)],
                    );
                    match array_at!(a, i) {
                        ObjectMut::Bytes(v) => *index!(v, i) = x as i8,
                        ObjectMut::Booleans(v) => *index!(v, i) = (x & 1) as i8,
                        _ => trap!(internal("bastore on a non-byte array")),
                    }
                }
                Op::ArrayLength => {
                    let a = s[sp - 1];
                    s[sp - 1] = match st.heap.get_mut(a) {
                        Some(o) => match o.array_len() {
                            Some(n) => n as i32,
                            None => trap!(internal("arraylength of the instance")),
                        },
                        // The lent length while a lend lasts, 0 after
                        // (`Heap::lent_bytes`, as for `baload`).
                        None if a == LENT => st.heap.lent_bytes().len() as i32,
                        None if a == 0 => trap!(TrapKind::NullPointer),
                        None => trap!(internal("dangling handle")),
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fuel_counter_is_half_a_page_from_the_frame_stack_wherever_the_machine_is() {
        // The back edge's store to the counter and the loop's loads of the
        // entry frame's slots must not share their low 12 address bits
        // (4 KiB aliasing): the counter is in the frame block, past the
        // masked stack, 2 KiB (mod 4 KiB) from slot 0, so only slot 512 and
        // every 1024th after it can alias it.
        let machines = [Machine::default(), Machine::default()];
        for m in &machines {
            let slot = |i: usize| &m.slots[i] as *const i32 as usize;
            assert_eq!((slot(FUEL_SLOT) - slot(0)) % 4096, 2048);
            for i in 0..512 {
                assert_ne!((slot(FUEL_SLOT) - slot(i)) % 4096, 0, "slot {i}");
            }
        }
        // Moving the machine (as a host moves its applet) moves nothing the
        // loop touches: the counter lives with the frames.
        let m = Machine::default();
        let before = (
            m.slots.as_ptr() as usize,
            &m.slots[FUEL_SLOT] as *const i32 as usize,
        );
        let moved = Box::new(m);
        let after = (
            moved.slots.as_ptr() as usize,
            &moved.slots[FUEL_SLOT] as *const i32 as usize,
        );
        assert_eq!(before, after);
    }

    #[test]
    fn the_reserve_refills_the_counter_a_chunk_at_a_time_charging_one_unit() {
        let mut reserve = 0;
        assert_eq!(refill(&mut reserve), None, "no fuel left");
        let mut reserve = 3 * FUEL_CHUNK;
        assert_eq!(refill(&mut reserve), Some(u32::MAX as i32));
        assert_eq!(reserve, 2 * FUEL_CHUNK);
    }
}
