//! Adversarial applets on both engines, which must agree on every result,
//! trap, fuel count and final state: `adversarial/Adversary`
//! (`applets/src/adversarial/Adversary.java`) indexes arrays at the ends of
//! the int range, wraps index arithmetic, uses arrays that natives give and
//! handles they forge, recurses past the call-depth and frame-stack limits,
//! runs out of fuel inside loops and switch loops, stores at every array
//! boundary, allocates at the ends of the size range, divides `MIN_VALUE` by
//! -1 and works many instance and static fields.
//!
//! Every invocation runs on the interpreter and on the JIT. Each test states
//! the result or trap Java semantics (and jive's documented limits) give,
//! with the trap's method and bytecode index, and checks that both engines
//! agree on it and leave the same state: static fields, static arrays,
//! heap bytes and object count. A stray write shows as a changed array.
//!
//! `scripts/test.sh` also runs this binary under valgrind memcheck, the
//! guard against reads and writes outside the applet's memory.
//!
//! These tests need [`Engine::Jit`]: where the JIT cannot load the applet
//! (`jit::compile` returns a `JitError`) they fail and say
//! so. On a CPU without a vcode backend they are skipped.

mod common;

use common::{RELEASES, class_bytes};
use jive::classfile::ClassFile;
use jive::interpreter::STACK_SLOTS;
use jive::subset::Prim;
use jive::{
    Applet, Engine, InvokeError, Limits, NativeError, Natives, Object, Outcome, Trap, TrapKind,
};

const CLASS: &str = "adversarial/Adversary";

/// The indices every array access is tried at (arrays have length 4).
const INDICES: [i32; 8] = [i32::MIN, -2, -1, 0, 3, 4, 5, i32::MAX];

const HEAP: u64 = 1 << 20;

fn natives() -> Natives {
    Natives::new()
        .with("give", "(I)[B", |cx, a| cx.new_array(Prim::Byte, a[0]))
        .with("giveInts", "(I)[I", |cx, a| cx.new_array(Prim::Int, a[0]))
        .with("forge", "(I)[B", |_, a| Ok(a[0]))
        .with("handleOf", "([B)I", |_, a| Ok(a[0]))
        .with("handleOfInts", "([I)I", |_, a| Ok(a[0]))
        .with("poke", "([BII)V", |cx, a| {
            let b = cx.bytes(a[0])?;
            let len = b.len();
            let slot = usize::try_from(a[1])
                .ok()
                .and_then(|i| b.get_mut(i))
                .ok_or_else(|| {
                    NativeError(format!("index {} out of bounds for length {len}", a[1]))
                })?;
            *slot = a[2] as i8;
            Ok(0)
        })
}

/// What the host can see of an applet after an invocation.
#[derive(Debug, PartialEq)]
struct State {
    statics: Vec<(String, i32)>,
    arrays: Vec<(String, Option<Object>)>,
    heap_bytes: u64,
    objects: usize,
}

fn state(a: &Applet) -> State {
    let mut statics = Vec::new();
    let mut arrays = Vec::new();
    for f in a.program().info.fields.iter().filter(|f| f.is_static) {
        if f.ty.is_ref() {
            arrays.push((f.name.clone(), a.static_array(&f.name).cloned()));
        } else {
            let v = a.static_int(&f.name).expect("a static int field");
            statics.push((f.name.clone(), v));
        }
    }
    State {
        statics,
        arrays,
        heap_bytes: a.heap().bytes_in_use(),
        objects: a.heap().object_count(),
    }
}

/// The applet loaded twice, on the interpreter and on the JIT.
struct Both {
    release: &'static str,
    interp: Applet,
    jit: Applet,
    class: ClassFile,
}

impl Both {
    fn load(release: &'static str) -> Option<Both> {
        Both::load_with(release, Limits::default())
    }

    fn load_with(release: &'static str, limits: Limits) -> Option<Both> {
        if !jive::jit::available() {
            eprintln!("skipped: vcode has no native backend for this CPU, so there is no JIT");
            return None;
        }
        let bytes = class_bytes(release, CLASS)?;
        let class = ClassFile::parse(&bytes).expect("Adversary.class parses");
        let interp = Applet::load_with_engine(&bytes, &natives(), limits, Engine::Interpreter)
            .unwrap_or_else(|e| panic!("{release} {CLASS} on the interpreter: {e}"));
        let jit =
            Applet::load_with_engine(&bytes, &natives(), limits, Engine::Jit).unwrap_or_else(|e| {
                panic!(
                    "{release} {CLASS}: Engine::Jit cannot load the applet: {e}\n\
                     These tests compare the JIT with the interpreter; they fail until the \
                     JIT compiles every method of the JIVE subset."
                )
            });
        assert_eq!(interp.engine(), Engine::Interpreter);
        assert_eq!(
            jit.engine(),
            Engine::Jit,
            "{release}: load_with_engine(Jit)"
        );
        assert!(
            jit.native_listing().is_some(),
            "{release}: the JIT's code has no listing"
        );
        let both = Both {
            release,
            interp,
            jit,
            class,
        };
        both.same_state("after loading");
        Some(both)
    }

    fn same_state(&self, what: &str) {
        assert_eq!(
            state(&self.interp),
            state(&self.jit),
            "{}: state {what}: interpreter (left) and JIT (right) differ",
            self.release
        );
    }

    /// Invokes `name` on both engines; they must agree on the result (value
    /// and fuel used, or the trap) and on the state they leave.
    fn run(&mut self, name: &str, args: &[i32]) -> Result<Outcome, InvokeError> {
        let a = self.interp.invoke(name, args);
        let b = self.jit.invoke(name, args);
        assert_eq!(
            a, b,
            "{}: {name}{args:?}: interpreter (left) and JIT (right) disagree",
            self.release
        );
        self.same_state(&format!("after {name}{args:?}"));
        a
    }

    /// The outcome of a call that must not trap.
    fn outcome(&mut self, name: &str, args: &[i32]) -> Outcome {
        match self.run(name, args) {
            Ok(o) => o,
            Err(e) => panic!("{}: {name}{args:?}: {e}", self.release),
        }
    }

    /// The value of a call that must return one.
    fn value(&mut self, name: &str, args: &[i32]) -> i32 {
        let o = self.outcome(name, args);
        o.value
            .unwrap_or_else(|| panic!("{}: {name}{args:?} returned no value", self.release))
    }

    /// The trap of a call that must trap.
    fn trap(&mut self, name: &str, args: &[i32]) -> Trap {
        match self.run(name, args) {
            Err(InvokeError::Trap(t)) => t,
            other => panic!(
                "{}: {name}{args:?}: expected a trap, got {other:?}",
                self.release
            ),
        }
    }

    /// Asserts that `name(args)` traps with `kind` at the `nth` instruction
    /// named `mnemonic` (from 0) of the method `at` (`name` itself, or the
    /// method the trap happens in).
    fn traps(
        &mut self,
        name: &str,
        args: &[i32],
        kind: TrapKind,
        at: &str,
        mnemonic: &str,
        nth: usize,
    ) {
        let t = self.trap(name, args);
        let expected = Trap {
            kind,
            method: self.method_id(at),
            bci: self.bci(at, &[mnemonic], nth),
        };
        assert_eq!(t, expected, "{}: {name}{args:?}", self.release);
    }

    fn set_run_limits(&mut self, fuel: Option<u64>, depth: u32) {
        self.interp.set_run_limits(fuel, depth);
        self.jit.set_run_limits(fuel, depth);
        // A limit the JIT cannot honour would move the applet to the
        // interpreter, and the comparison would prove nothing.
        assert_eq!(
            self.jit.engine(),
            Engine::Jit,
            "{}: still on the JIT after set_run_limits({fuel:?}, {depth})",
            self.release
        );
    }

    fn method(&self, name: &str) -> &jive::classfile::Method {
        self.class
            .methods
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no method {name} in {CLASS}"))
    }

    /// `name(descriptor)`, as traps name methods.
    fn method_id(&self, name: &str) -> String {
        self.method(name).id()
    }

    /// The bci of the `nth` instruction (from 0) of method `name` whose
    /// mnemonic is one of `mnemonics`.
    fn bci(&self, name: &str, mnemonics: &[&str], nth: usize) -> u32 {
        let code = self.method(name).code.as_ref().expect("a method with code");
        let insns = jive::bytecode::instructions(&code.code).expect("the code decodes");
        insns
            .iter()
            .filter(|i| mnemonics.contains(&jive::bytecode::mnemonic(i.opcode)))
            .nth(nth)
            .unwrap_or_else(|| panic!("{name} has no {mnemonics:?} number {nth}"))
            .bci
    }

    /// (max_locals, max_stack) of a method as decoded.
    fn frame(&self, name: &str) -> (usize, usize) {
        let (idx, _) = self.interp.program().info.method(name).expect("method");
        let f = self.interp.program().funcs[idx]
            .as_ref()
            .expect("bytecode method");
        (usize::from(f.max_locals), usize::from(f.max_stack))
    }

    fn array(&self, name: &str) -> Object {
        self.interp
            .static_array(name)
            .cloned()
            .unwrap_or_else(|| panic!("static array {name} is null"))
    }

    fn static_int(&self, name: &str) -> i32 {
        self.interp.static_int(name).expect("static int field")
    }

    fn heap_bytes(&self) -> u64 {
        self.interp.heap().bytes_in_use()
    }
}

fn oob(index: i32, length: i32) -> TrapKind {
    TrapKind::ArrayIndexOutOfBounds { index, length }
}

fn ints0() -> Object {
    Object::Ints(vec![10, 20, 30, 40])
}

fn bytes0() -> Object {
    Object::Bytes(vec![1, 2, 3, 4])
}

fn shorts0() -> Object {
    Object::Shorts(vec![100, 200, 300, 400])
}

fn bools0() -> Object {
    Object::Booleans(vec![0, 1, 0, 1])
}

fn in_bounds(i: i32) -> Option<usize> {
    usize::try_from(i).ok().filter(|&i| i < 4)
}

#[test]
fn reads_at_every_index_trap_or_read_the_element() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        for i in INDICES {
            let cases: [(&str, &str, Object); 4] = [
                ("readInt", "iaload", ints0()),
                ("readByte", "baload", bytes0()),
                ("readShort", "saload", shorts0()),
                ("readBool", "baload", bools0()),
            ];
            for (name, insn, content) in cases {
                match in_bounds(i) {
                    Some(k) => {
                        let expected = match &content {
                            Object::Ints(v) => v[k],
                            Object::Bytes(v) | Object::Booleans(v) => i32::from(v[k]),
                            Object::Shorts(v) => i32::from(v[k]),
                            Object::Instance(_) => unreachable!(),
                        };
                        assert_eq!(adv.value(name, &[i]), expected, "{r}: {name}({i})");
                    }
                    None => adv.traps(name, &[i], oob(i, 4), name, insn, 0),
                }
            }
            // Arrays in locals (the decoder's superinstructions).
            for (name, insn) in [("readIntLocal", "iaload"), ("readByteLocal", "baload")] {
                match in_bounds(i) {
                    Some(_) => assert_eq!(adv.value(name, &[4, i]), 0),
                    None => adv.traps(name, &[4, i], oob(i, 4), name, insn, 0),
                }
                // An empty array has no index at all.
                adv.traps(name, &[0, i], oob(i, 0), name, insn, 0);
            }
            // Null comes before the index check, whatever the index.
            adv.traps(
                "nullRead",
                &[i],
                TrapKind::NullPointer,
                "nullRead",
                "iaload",
                0,
            );
            adv.traps(
                "nullWrite",
                &[i],
                TrapKind::NullPointer,
                "nullWrite",
                "iastore",
                0,
            );
        }
        adv.traps(
            "nullLength",
            &[],
            TrapKind::NullPointer,
            "nullLength",
            "arraylength",
            0,
        );
        assert_eq!(adv.array("ints"), ints0());
    }
}

#[test]
fn constant_indices_are_checked_like_any_other() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        // constIndex(k): the k-th iaload reads a[0], a[3], a[4], a[-1],
        // a[32767], a[-32768], a[MAX], a[MIN], k + a[3], k + a[4].
        assert_eq!(adv.value("constIndex", &[0]), 10);
        assert_eq!(adv.value("constIndex", &[1]), 40);
        assert_eq!(adv.value("constIndex", &[8]), 48);
        let bad = [
            (2, 4),
            (3, -1),
            (4, 32767),
            (5, -32768),
            (6, i32::MAX),
            (7, i32::MIN),
            (9, 4),
        ];
        for (k, index) in bad {
            adv.traps(
                "constIndex",
                &[k],
                oob(index, 4),
                "constIndex",
                "iaload",
                k as usize,
            );
        }
        // constStore(k, v): a[0], a[3], a[4], a[-1], a[MAX], a[MIN] = v.
        for (k, index) in [(2, 4), (3, -1), (4, i32::MAX), (5, i32::MIN)] {
            let iastore = k as usize;
            adv.traps(
                "constStore",
                &[k, 77],
                oob(index, 4),
                "constStore",
                "iastore",
                iastore,
            );
            assert_eq!(adv.array("ints"), ints0());
        }
        assert_eq!(adv.value("constStore", &[0, -5]), -5 + 40);
        assert_eq!(
            adv.value("constStore", &[1, i32::MIN]),
            (-5i32).wrapping_add(i32::MIN)
        );
        assert_eq!(adv.array("ints"), Object::Ints(vec![-5, 20, 30, i32::MIN]));
    }
}

/// The initial contents of a static array (set by `<clinit>`).
fn initial(field: &str) -> Object {
    match field {
        "ints" => ints0(),
        "bytes" => bytes0(),
        "shorts" => shorts0(),
        _ => bools0(),
    }
}

/// `a[k] = v` with the store's narrowing.
fn store(a: &mut Object, k: usize, v: i32) {
    match a {
        Object::Ints(a) => a[k] = v,
        Object::Bytes(a) => a[k] = v as i8,
        Object::Shorts(a) => a[k] = v as i16,
        Object::Booleans(a) => a[k] = (v & 1) as i8,
        Object::Instance(_) => unreachable!(),
    }
}

#[test]
fn stores_at_every_boundary_narrow_and_touch_only_their_element() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        // (method, its store instruction, the field it stores into, the
        // method that restores the field element by element)
        let cases = [
            ("writeInt", "iastore", "ints", "writeInt"),
            ("writeIntLocal", "iastore", "ints", "writeInt"),
            ("writeByte", "bastore", "bytes", "writeByte"),
            ("writeByteLocal", "bastore", "bytes", "writeByte"),
            ("writeShort", "sastore", "shorts", "writeShort"),
            ("writeBool", "bastore", "bools", "writeBool"),
        ];
        for (name, insn, field, setter) in cases {
            for i in INDICES {
                for v in [0x1ff, 0x80, 0x18000, i32::MIN, -1, 3, 2] {
                    let mut expected = initial(field);
                    let fresh = match &expected {
                        Object::Ints(a) => a.clone(),
                        Object::Bytes(a) | Object::Booleans(a) => {
                            a.iter().map(|&x| i32::from(x)).collect()
                        }
                        Object::Shorts(a) => a.iter().map(|&x| i32::from(x)).collect(),
                        Object::Instance(_) => unreachable!(),
                    };
                    for (k, x) in fresh.into_iter().enumerate() {
                        adv.outcome(setter, &[k as i32, x]);
                    }
                    // The store changes element i, narrowed, or traps and
                    // changes nothing.
                    match in_bounds(i) {
                        Some(k) => {
                            adv.outcome(name, &[i, v]);
                            store(&mut expected, k, v);
                        }
                        None => adv.traps(name, &[i, v], oob(i, 4), name, insn, 0),
                    }
                    assert_eq!(adv.array(field), expected, "{r}: {name}({i}, {v:#x})");
                }
            }
        }
    }
}

#[test]
fn writes_past_an_array_never_reach_the_next_one() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        let sevens = Object::Bytes(vec![7; 4]);
        for i in [
            4, 5, 8, 15, 16, 17, 20, 24, 32, 64, -1, -2, -4, -8, -16, -17, -20, -32,
        ] {
            adv.traps("pokeLeft", &[i], oob(i, 4), "pokeLeft", "bastore", 0);
            assert_eq!(
                adv.array("left"),
                Object::Bytes(vec![0; 4]),
                "{r}: pokeLeft({i})"
            );
            assert_eq!(adv.array("right"), sevens, "{r}: pokeLeft({i})");
        }
        // A loop that fills `left` and runs on past its end: the first four
        // stores stay (as in Java), the fifth traps.
        adv.outcome("fillLeft", &[3, -1]);
        assert_eq!(adv.array("left"), Object::Bytes(vec![-1; 4]));
        for upto in [4, 5, 100, i32::MAX - 1] {
            adv.traps(
                "fillLeft",
                &[upto, 0x155],
                oob(4, 4),
                "fillLeft",
                "bastore",
                0,
            );
            assert_eq!(adv.array("left"), Object::Bytes(vec![0x55; 4]));
            assert_eq!(adv.array("right"), sevens);
        }
    }
}

#[test]
fn index_arithmetic_that_wraps_is_checked_after_wrapping() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        let (min, max) = (i32::MIN, i32::MAX);
        // (method, argument, the index Java computes)
        let cases: [(&str, i32, i32); 24] = [
            ("overflowAdd", 1, min),
            ("overflowAdd", 0, max),
            ("overflowAdd", -max, 0),
            ("overflowAdd", min + 3, 2),
            ("overflowAdd", min, -1),
            ("overflowSub", min, 0),
            ("overflowSub", min + 3, 3),
            ("overflowSub", min + 4, 4),
            ("overflowSub", 0, min),
            ("overflowSub", -1, max),
            ("overflowMul", 4, 0),
            ("overflowMul", -4, 0),
            ("overflowMul", 1, 1 << 30),
            ("overflowMul", 2, min),
            ("overflowMul", 3, -(1 << 30)),
            ("overflowShl", 32, 1),
            ("overflowShl", 33, 2),
            ("overflowShl", -31, 2),
            ("overflowShl", 31, min),
            ("overflowShl", -1, min),
            ("overflowShl", 34, 4),
            ("overflowNeg", min, min),
            ("overflowNeg", -3, 3),
            ("overflowNeg", 1, -1),
        ];
        for (name, arg, index) in cases {
            match in_bounds(index) {
                Some(k) => assert_eq!(
                    adv.value(name, &[arg]),
                    [10, 20, 30, 40][k],
                    "{name}({arg})"
                ),
                None => adv.traps(name, &[arg], oob(index, 4), name, "iaload", 0),
            }
        }
        // for (i = x; i < x + 4; i++) s += ints[i - x]: when x + 4 wraps the
        // loop runs zero times.
        assert_eq!(adv.value("rangeLoop", &[max - 1]), 0);
        assert_eq!(adv.value("rangeLoop", &[max - 3]), 0);
        assert_eq!(adv.value("rangeLoop", &[max - 4]), 100);
        assert_eq!(adv.value("rangeLoop", &[min]), 100);
        assert_eq!(adv.value("rangeLoop", &[-2]), 100);
        // for (i = 0; i < 4; i += step) s += ints[i].
        assert_eq!(adv.value("strideLoop", &[1]), 100);
        assert_eq!(adv.value("strideLoop", &[3]), 50);
        assert_eq!(adv.value("strideLoop", &[max]), 10);
        for (step, index) in [(-1, -1), (min + 1, min + 1), (min, min), (-4, -4)] {
            adv.traps(
                "strideLoop",
                &[step],
                oob(index, 4),
                "strideLoop",
                "iaload",
                0,
            );
        }
        // for (i = from; ; i--) s += ints[i].
        for (from, index) in [(3, -1), (0, -1), (4, 4), (min, min), (max, max)] {
            adv.traps("downLoop", &[from], oob(index, 4), "downLoop", "iaload", 0);
        }
        // A step of 0 never leaves the loop: fuel ends it, at the back edge.
        adv.set_run_limits(Some(500), 256);
        adv.traps(
            "strideLoop",
            &[0],
            TrapKind::FuelExhausted(500),
            "strideLoop",
            "goto",
            0,
        );
        assert_eq!(adv.array("ints"), ints0());
    }
}

#[test]
fn arrays_from_natives_are_checked_like_the_applets_own() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        let base = adv.heap_bytes();
        // give(n) allocates n bytes; the method stores 5 at b[n - 1] and
        // reads b[i].
        assert_eq!(adv.value("nativeArray", &[4, 3]), 5);
        assert_eq!(adv.value("nativeArray", &[1, 0]), 5);
        assert_eq!(adv.value("nativeArray", &[4, 0]), 0);
        for i in [i32::MIN, -1, 4, i32::MAX] {
            adv.traps(
                "nativeArray",
                &[4, i],
                oob(i, 4),
                "nativeArray",
                "baload",
                0,
            );
        }
        adv.traps(
            "nativeArray",
            &[0, 0],
            oob(-1, 0),
            "nativeArray",
            "bastore",
            0,
        );
        let give = TrapKind::Native("give(I)[B: negative array size -1".into());
        adv.traps(
            "nativeArray",
            &[-1, 0],
            give,
            "nativeArray",
            "invokestatic",
            0,
        );
        let huge = TrapKind::Native(format!(
            "give(I)[B: heap limit exceeded: {} more bytes requested, {base} of {HEAP} in use",
            16 + u64::from(i32::MAX.unsigned_abs())
        ));
        adv.traps(
            "nativeArray",
            &[i32::MAX, 0],
            huge,
            "nativeArray",
            "invokestatic",
            0,
        );
        assert_eq!(
            adv.heap_bytes(),
            base,
            "scratch arrays are freed after each invocation"
        );
        // giveInts(n); a[i] = 9; a.length + a[i].
        assert_eq!(adv.value("nativeInts", &[4, 3]), 13);
        assert_eq!(adv.value("nativeInts", &[100_000, 99_999]), 100_009);
        adv.traps("nativeInts", &[4, 4], oob(4, 4), "nativeInts", "iastore", 0);
        adv.traps("nativeInts", &[0, 0], oob(0, 0), "nativeInts", "iastore", 0);
        adv.traps(
            "nativeInts",
            &[4, i32::MIN],
            oob(i32::MIN, 4),
            "nativeInts",
            "iastore",
            0,
        );

        // Handles a native makes up: null is null, a byte[] handle is that
        // array, anything else traps at the native's call.
        adv.traps(
            "forged",
            &[0, 0],
            TrapKind::NullPointer,
            "forged",
            "baload",
            0,
        );
        let not_a_handle = |h: i32| {
            TrapKind::Native(format!(
                "forge(I)[B returned {h}, which is not a handle of the declared array type"
            ))
        };
        for h in [-1, i32::MIN, i32::MAX, 9999, 1 << 16] {
            adv.traps(
                "forged",
                &[h, 0],
                not_a_handle(h),
                "forged",
                "invokestatic",
                0,
            );
        }
        for i in 0..4 {
            assert_eq!(adv.value("roundTrip", &[i]), 99);
        }
        assert_eq!(adv.array("bytes"), Object::Bytes(vec![99; 4]));
        adv.traps("roundTrip", &[4], oob(4, 4), "roundTrip", "bastore", 0);
        adv.traps("roundTrip", &[-1], oob(-1, 4), "roundTrip", "bastore", 0);
        let t = adv.trap("wrongType", &[]);
        assert_eq!(t.method, adv.method_id("wrongType"));
        assert_eq!(
            t.bci,
            adv.bci("wrongType", &["invokestatic"], 1),
            "at forge"
        );
        assert!(
            matches!(&t.kind, TrapKind::Native(m) if m.starts_with("forge(I)[B returned ")
                && m.ends_with("which is not a handle of the declared array type")),
            "{r}: {t}"
        );
        // A handle of an array the mark phase freed, used again.
        assert_eq!(adv.value("makeStale", &[]), 8);
        let stale = adv.static_int("staleHandle");
        adv.traps(
            "useStale",
            &[0],
            not_a_handle(stale),
            "useStale",
            "invokestatic",
            0,
        );

        // An array a native gave, kept in a field across invocations.
        assert_eq!(adv.value("keep", &[12]), 12);
        assert_eq!(adv.value("useKept", &[11]), 12);
        assert_eq!(adv.value("useKept", &[0]), 0);
        adv.traps("useKept", &[12], oob(12, 12), "useKept", "baload", 0);
        adv.traps(
            "useKept",
            &[i32::MIN],
            oob(i32::MIN, 12),
            "useKept",
            "baload",
            0,
        );

        // The host writes the applet's array; the applet sees the write.
        assert_eq!(adv.value("pokeThenRead", &[2, 0x1fe]), -2);
        let oob_poke = TrapKind::Native("poke([BII)V: index 4 out of bounds for length 4".into());
        adv.traps(
            "pokeThenRead",
            &[4, 1],
            oob_poke,
            "pokeThenRead",
            "invokestatic",
            0,
        );
        assert_eq!(adv.array("bytes"), Object::Bytes(vec![99, 99, -2, 99]));
    }
}

/// How many frames of the recursive method `name` fit in the frame stack.
/// A frame is max_locals + the operand stack; a call's arguments become the
/// callee's first locals, so with only the argument on the stack at the
/// call, frame k starts at k * max_locals, and a call is refused when the
/// callee's locals and stack would pass the end of the frame stack.
fn frames_that_fit(adv: &Both, name: &str) -> usize {
    let (locals, stack) = adv.frame(name);
    (STACK_SLOTS - stack) / locals
}

#[test]
fn recursion_stops_at_the_call_depth_limit() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        let depth = TrapKind::CallDepthExceeded(256);
        // The invoked method is depth 1: 256 frames run, the 257th traps at
        // the call.
        let o = adv.outcome("depth", &[256]);
        assert_eq!(o.value, Some(256));
        assert_eq!(o.fuel_used, 255, "one unit per call");
        adv.traps("depth", &[257], depth.clone(), "depth", "invokestatic", 0);
        adv.traps(
            "depth",
            &[i32::MAX],
            depth.clone(),
            "depth",
            "invokestatic",
            0,
        );
        assert_eq!(adv.value("depthThis", &[256]), 256);
        adv.traps(
            "depthThis",
            &[257],
            depth.clone(),
            "depthThis",
            "invokevirtual",
            0,
        );
        // ping calls pong calls ping ...: frame 256 is pong's.
        assert_eq!(adv.value("ping", &[255]), 255 / 2 * 3 + 1);
        adv.traps("ping", &[300], depth.clone(), "pong", "invokestatic", 0);
        // A trap at the bottom of a deep stack unwinds all of it.
        assert_eq!(adv.value("trapDeep", &[255, 3]), 40 + 255);
        adv.traps("trapDeep", &[200, -1], oob(-1, 4), "trapDeep", "iaload", 0);
        adv.traps("trapDeep", &[255, 4], oob(4, 4), "trapDeep", "iaload", 0);
        adv.traps("trapDeep", &[256, 0], depth, "trapDeep", "invokestatic", 0);
        assert_eq!(
            adv.value("depth", &[3]),
            3,
            "the applet runs on after traps"
        );

        // Smaller limits, down to 0 (only calls are checked, so the invoked
        // method itself always runs).
        for limit in [10, 2, 1, 0] {
            adv.set_run_limits(Some(10_000), limit);
            let ok = limit.max(1) as i32;
            assert_eq!(adv.value("depth", &[ok]), ok, "limit {limit}");
            let k = TrapKind::CallDepthExceeded(limit);
            adv.traps("depth", &[ok + 1], k, "depth", "invokestatic", 0);
        }
    }
}

#[test]
fn recursion_stops_when_frames_fill_the_frame_stack() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        // bigFrame(n) = bigFrame(n - 1) + 3n + 24950, bigFrame(1) = 19902.
        let big = |n: i32| (2..=n).fold(19902i32, |s, k| s.wrapping_add(3 * k + 24950));
        let k = frames_that_fit(&adv, "bigFrame");
        assert!(
            k < 256,
            "{r}: bigFrame's frames ({:?}) fill the frame stack before depth 256",
            adv.frame("bigFrame")
        );
        let k = k as i32;
        assert_eq!(adv.value("bigFrame", &[k]), big(k));
        let depth = TrapKind::CallDepthExceeded(256);
        adv.traps("bigFrame", &[k + 1], depth, "bigFrame", "invokestatic", 0);

        // With the depth limit as high as the JIT takes, 16,384, small
        // frames go 16,382 deep before the frame stack ends them.
        let limit = jive::jit::MAX_CALL_DEPTH;
        adv.set_run_limits(Some(10_000_000), limit);
        let deep = frames_that_fit(&adv, "depth") as i32;
        assert!(deep > 10_000 && deep < limit as i32, "{r}: {deep}");
        let o = adv.outcome("depth", &[deep]);
        assert_eq!(o.value, Some(deep));
        assert_eq!(o.fuel_used, deep as u64 - 1);
        let stack = TrapKind::CallDepthExceeded(limit);
        adv.traps(
            "depth",
            &[deep + 1],
            stack.clone(),
            "depth",
            "invokestatic",
            0,
        );
        adv.traps("bigFrame", &[k + 1], stack, "bigFrame", "invokestatic", 0);
        assert_eq!(adv.value("bigFrame", &[k]), big(k));
    }
}

#[test]
fn fuel_runs_out_inside_loops_switches_and_recursion() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        let fuel = 1000;
        adv.set_run_limits(Some(fuel), 256);
        let out = TrapKind::FuelExhausted(fuel);
        // One unit per taken back edge.
        adv.traps("spin", &[], out.clone(), "spin", "goto", 0);
        let o = adv.outcome("sumTo", &[1000]);
        assert_eq!(
            o,
            Outcome {
                value: Some(499_500),
                fuel_used: 1000
            }
        );
        adv.traps("sumTo", &[1001], out.clone(), "sumTo", "goto", 0);
        // Every iteration goes through the switch, which pays; the back
        // edge of such a loop does not.
        adv.traps(
            "switchSpin",
            &[],
            out.clone(),
            "switchSpin",
            "tableswitch",
            0,
        );
        adv.traps(
            "lookupSpin",
            &[],
            out.clone(),
            "lookupSpin",
            "lookupswitch",
            0,
        );
        let expected = (0..1000).fold(0i32, |s, i| match i % 3 {
            0 => s + i,
            1 => s - 1,
            _ => s ^ i,
        });
        let o = adv.outcome("switchCount", &[1000]);
        assert_eq!(
            o,
            Outcome {
                value: Some(expected),
                fuel_used: 1000
            }
        );
        let switches = ["tableswitch", "lookupswitch"];
        let t = adv.trap("switchCount", &[1001]);
        assert_eq!(t.kind, out);
        assert_eq!(t.bci, adv.bci("switchCount", &switches, 0));
        // Calls pay: 1000 calls of bump run, the 1001st is refused.
        let before = adv.static_int("counter");
        adv.traps("callSpin", &[], out.clone(), "callSpin", "invokestatic", 0);
        assert_eq!(adv.static_int("counter"), before + 1000);
        // Recursion: depth(n) makes n - 1 calls.
        adv.set_run_limits(Some(fuel), jive::jit::MAX_CALL_DEPTH);
        assert_eq!(adv.outcome("depth", &[1001]).fuel_used, 1000);
        adv.traps("depth", &[1002], out.clone(), "depth", "invokestatic", 0);
        // Fuel running out deep in a recursion that would also pass the
        // depth limit: whichever comes first.
        adv.set_run_limits(Some(100), 256);
        adv.traps(
            "depth",
            &[300],
            TrapKind::FuelExhausted(100),
            "depth",
            "invokestatic",
            0,
        );
        adv.set_run_limits(Some(300), 256);
        let depth = TrapKind::CallDepthExceeded(256);
        adv.traps("depth", &[300], depth, "depth", "invokestatic", 0);

        // No fuel at all: straight-line code still runs.
        adv.set_run_limits(Some(0), 256);
        assert_eq!(
            adv.outcome("readInt", &[1]),
            Outcome {
                value: Some(20),
                fuel_used: 0
            }
        );
        assert_eq!(adv.outcome("sumTo", &[0]).value, Some(0));
        let zero = TrapKind::FuelExhausted(0);
        adv.traps("sumTo", &[1], zero.clone(), "sumTo", "goto", 0);
        adv.traps("switchSpin", &[], zero, "switchSpin", "tableswitch", 0);
        // Metering off: nothing is charged.
        adv.set_run_limits(None, 256);
        let o = adv.outcome("sumTo", &[100_000]);
        assert_eq!(
            o,
            Outcome {
                value: Some(704_982_704),
                fuel_used: 0
            }
        );
    }
}

#[test]
fn switches_at_the_ends_of_the_int_range() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        let (min, max) = (i32::MIN, i32::MAX);
        let low = [
            (min, 1),
            (min + 1, 2),
            (min + 2, 3),
            (min + 3, 0),
            (max, 0),
            (0, 0),
            (-1, 0),
        ];
        for (k, v) in low {
            assert_eq!(adv.value("tableLow", &[k]), v, "{r}: tableLow({k})");
        }
        let high = [
            (max - 2, 1),
            (max - 1, 2),
            (max, 3),
            (max - 3, 0),
            (min, 0),
            (0, 0),
            (-1, 0),
        ];
        for (k, v) in high {
            assert_eq!(adv.value("tableHigh", &[k]), v, "{r}: tableHigh({k})");
        }
        for k in [min, -1, 10, max] {
            adv.traps("constIndex", &[k], oob(4, 4), "constIndex", "iaload", 9);
        }
    }
}

#[test]
fn allocation_sizes_at_the_ends_of_the_range() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        let base = adv.heap_bytes();
        for kind in 0..4 {
            let size = [1u64, 1, 2, 4][kind as usize];
            assert_eq!(adv.value("alloc", &[kind, 0]), 0);
            assert_eq!(adv.value("alloc", &[kind, 1000]), 1000);
            for n in [-1, i32::MIN] {
                let k = TrapKind::NegativeArraySize(n);
                adv.traps("alloc", &[kind, n], k, "alloc", "newarray", kind as usize);
            }
            for n in [i32::MAX, 1 << 30, (HEAP / size) as i32] {
                let k = TrapKind::HeapLimitExceeded {
                    requested: 16 + size * n as u64,
                    in_use: base,
                    limit: HEAP,
                };
                adv.traps("alloc", &[kind, n], k, "alloc", "newarray", kind as usize);
            }
            // The largest array that fits, and one element more.
            let fits = ((HEAP - base - 16) / size) as i32;
            assert_eq!(adv.value("alloc", &[kind, fits]), fits);
            let k = TrapKind::HeapLimitExceeded {
                requested: 16 + size * (fits as u64 + 1),
                in_use: base,
                limit: HEAP,
            };
            adv.traps(
                "alloc",
                &[kind, fits + 1],
                k,
                "alloc",
                "newarray",
                kind as usize,
            );
            assert_eq!(adv.heap_bytes(), base);
        }
        // Nothing is collected during an invocation: allocating in a loop
        // runs the budget out, and the trap frees it all again.
        let cost = 16 + 4 * 1000;
        let count = (HEAP - base) / cost;
        let k = TrapKind::HeapLimitExceeded {
            requested: cost,
            in_use: base + count * cost,
            limit: HEAP,
        };
        adv.traps("allocForever", &[1000], k, "allocForever", "newarray", 0);
        assert_eq!(adv.heap_bytes(), base);
    }
}

#[test]
fn integer_arithmetic_follows_the_jvm() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        let (min, max) = (i32::MIN, i32::MAX);
        let divs = [
            (min, -1),
            (min, 1),
            (min, min),
            (max, -1),
            (-7, 2),
            (7, -2),
            (0, min),
            (1, max),
        ];
        for (a, b) in divs {
            assert_eq!(adv.value("div", &[a, b]), a.wrapping_div(b), "{a} / {b}");
            assert_eq!(adv.value("rem", &[a, b]), a.wrapping_rem(b), "{a} % {b}");
        }
        for a in [min, max, 0, -1, 1] {
            let zero = TrapKind::DivisionByZero;
            adv.traps("div", &[a, 0], zero.clone(), "div", "idiv", 0);
            adv.traps("rem", &[a, 0], zero.clone(), "rem", "irem", 0);
            adv.traps("divZero", &[a], zero, "divZero", "idiv", 0);
            assert_eq!(adv.value("divMinusOne", &[a]), a.wrapping_neg());
            assert_eq!(adv.value("remMinusOne", &[a]), 0);
        }
        for (a, b) in [
            (1, 31),
            (1, 32),
            (1, 33),
            (1, -1),
            (min, 31),
            (min, 63),
            (-1, min),
            (0x1234, 100),
        ] {
            let s = (b & 31) as u32;
            assert_eq!(adv.value("shl", &[a, b]), a << s, "{a} << {b}");
            assert_eq!(adv.value("shr", &[a, b]), a >> s, "{a} >> {b}");
            assert_eq!(
                adv.value("ushr", &[a, b]),
                ((a as u32) >> s) as i32,
                "{a} >>> {b}"
            );
        }
        // wide iinc: +1000, -32768, +32767.
        for i in [0, max, min, -999] {
            assert_eq!(adv.value("wideInc", &[i]), i.wrapping_add(999));
        }
    }
}

#[test]
fn many_instance_and_static_fields() {
    for r in RELEASES {
        let Some(mut adv) = Both::load(r) else { return };
        for v in [0, 1, -1, i32::MIN, i32::MAX, 0x12345, 0x8081] {
            // 32 int fields f<k> = v + k, then a byte, a short and a boolean.
            let ints = (0..32).fold(0i32, |s, k| s.wrapping_add(v.wrapping_add(k)));
            let narrow = i32::from(v as i8) + i32::from(v as i16) + (v & 1);
            let sum = ints.wrapping_add(narrow);
            assert_eq!(adv.value("setFields", &[v]), sum, "{r}: setFields({v})");
            assert_eq!(adv.value("fieldSum", &[]), sum);
            // f0 += d; f31 -= d; fb += d; fs += d; f1 = f2 = d.
            let d = 0x7f;
            let f0 = v.wrapping_add(d);
            let f31 = v.wrapping_add(31).wrapping_sub(d);
            let fb = i32::from((v as i8).wrapping_add(d as i8));
            let fs = i32::from((v as i16).wrapping_add(d as i16));
            let bumped = [d, f0, f31, fb, fs]
                .iter()
                .fold(0i32, |s, x| s.wrapping_add(*x));
            assert_eq!(
                adv.value("bumpFields", &[d]),
                bumped,
                "{r}: bumpFields after {v}"
            );

            // 16 static ints s<k> = v * (k + 1), xored; a byte, a short, a boolean.
            let mix = (0..16).fold(0i32, |s, k| s ^ v.wrapping_mul(k + 1));
            assert_eq!(adv.value("setStatics", &[v]), mix);
            assert_eq!(adv.value("staticMix", &[]), mix);
            assert_eq!(adv.value("narrowStatics", &[]), narrow);
            assert_eq!(adv.static_int("sbyte"), i32::from(v as i8));
            assert_eq!(adv.static_int("sshort"), i32::from(v as i16));
            assert_eq!(adv.static_int("sbool"), v & 1);
            assert_eq!(adv.static_int("s15"), v.wrapping_mul(16));
        }
        // An array in an instance field persists; its accesses are checked.
        for i in 0..4 {
            assert_eq!(adv.value("fieldArray", &[i]), 4);
        }
        adv.traps("fieldArray", &[4], oob(4, 4), "fieldArray", "iastore", 0);
        adv.traps(
            "fieldArray",
            &[i32::MIN],
            oob(i32::MIN, 4),
            "fieldArray",
            "iastore",
            0,
        );
        assert_eq!(adv.value("fieldArrayAt", &[3]), 4);
        adv.traps(
            "fieldArrayAt",
            &[-1],
            oob(-1, 4),
            "fieldArrayAt",
            "iaload",
            0,
        );
        // A trap keeps what was written before it.
        adv.traps("bumpThenTrap", &[4], oob(4, 4), "bumpThenTrap", "iaload", 0);
        adv.traps(
            "bumpThenTrap",
            &[-1],
            oob(-1, 4),
            "bumpThenTrap",
            "iaload",
            0,
        );
        assert_eq!(adv.static_int("counter"), 200);
        assert_eq!(adv.value("counter", &[]), 200);
        assert_eq!(adv.array("ints"), Object::Ints(vec![200, 20, 30, 40]));
    }
}
