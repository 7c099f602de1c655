//! The lent-array analysis (`jive::lent`): a `byte[]` the host lends to one
//! invocation may be read, compared, dropped, moved and passed to a
//! native's read-only parameter; every other use is refused at load, with
//! the method, the bytecode index and what was done.
//!
//! - `Lend` (`applets/src/Lend.java`, compiled by `javac` in both builds):
//!   one method per way an applet writer would smuggle the array out (a
//!   static or instance field, `bastore`, `areturn`, an applet method, a
//!   local merged with another array, `dup` then `putstatic`, a ternary, a
//!   `tableswitch` whose arms join, a loop that moves it one local per trip,
//!   a native's writing parameter, the second argument of a native whose
//!   first is read-only, what a native returns) and the methods that only
//!   read it. Each test declares one method lent; the others stay ordinary.
//! - `LendHand`, written here byte by byte: what `javac` never emits (every
//!   stack shuffle with the lent array at every position, against the
//!   JVMS's permutations written out below; `pop`, `pop2`, `wide aload`),
//!   and what the subset refuses before the analysis runs (an exception
//!   handler, `athrow`, `monitorenter`, `aastore`, `checkcast`).

mod common;

use common::{RELEASES, class_bytes};
use jive::bytecode::{self, op};
use jive::classfile::ClassFile;
use jive::{Applet, LentParam, Limits, LoadError, Natives, VerifyError};

/// The natives `Lend` declares: `rd`, `rdwr`'s `src` and `same` marked
/// read-only, `wr` and `rdwr`'s `dst` not.
fn natives() -> Natives {
    Natives::new()
        .with("rd", "([BI)I", |cx, a| Ok(cx.bytes(a[0])?.len() as i32))
        .with("wr", "([BI)V", |cx, a| {
            cx.bytes(a[0])?[0] = a[1] as i8;
            Ok(0)
        })
        .with("rdwr", "([B[BI)V", |_, _| Ok(0))
        .with("same", "([B)[B", |_, a| Ok(a[0]))
        .with_read_only("rd", "([BI)I", &[0])
        .unwrap()
        .with_read_only("rdwr", "([B[BI)V", &[0])
        .unwrap()
        .with_read_only("same", "([B)[B", &[0])
        .unwrap()
}

/// The method `name` of `Lend`'s descriptor, found in the class file.
fn descriptor(bytes: &[u8], name: &str) -> &'static str {
    let cf = ClassFile::parse(bytes).unwrap();
    let m = cf.methods.iter().find(|m| m.name == name).unwrap();
    Box::leak(m.descriptor.clone().into_boxed_str())
}

/// The bci of the `nth` (from 0) instruction with opcode `o` in method `name`.
fn bci_of(bytes: &[u8], name: &str, o: u8, nth: usize) -> u32 {
    let cf = ClassFile::parse(bytes).unwrap();
    let m = cf.methods.iter().find(|m| m.name == name).unwrap();
    let code = &m.code.as_ref().unwrap().code;
    bytecode::instructions(code)
        .unwrap()
        .iter()
        .filter(|i| i.opcode == o)
        .nth(nth)
        .unwrap_or_else(|| panic!("{name} has no {} #{nth}", bytecode::mnemonic(o)))
        .bci
}

fn lent(bytes: &[u8], name: &'static str) -> [LentParam; 1] {
    [LentParam {
        method: name,
        descriptor: descriptor(bytes, name),
        param: 0,
    }]
}

/// Loads `bytes` with parameter 0 of `name` lent, binding `natives`.
fn load(bytes: &[u8], name: &'static str, natives: &Natives) -> Result<Applet, LoadError> {
    Applet::load_lending(bytes, natives, Limits::default(), &lent(bytes, name), None)
}

fn verify_error(r: Result<Applet, LoadError>, what: &str) -> VerifyError {
    match r {
        Err(LoadError::Verify(e)) => e,
        Err(e) => panic!("{what}: expected a verify error, got {e}"),
        Ok(_) => panic!("{what}: accepted"),
    }
}

#[test]
fn the_methods_that_only_read_the_lent_array_are_accepted() {
    for r in RELEASES {
        let Some(bytes) = class_bytes(r, "Lend") else {
            return;
        };
        for m in [
            "doRx",
            "readJoined",
            "readTernary",
            "readSwitch",
            "compares",
            "passReadOnly",
            "ownArrays",
            "tailLent",
            "tailLentWritten",
            "tailLentCopied",
        ] {
            let a = load(&bytes, m, &natives()).unwrap_or_else(|e| panic!("{r} {m}: {e}"));
            let (idx, _) = a.program().info.method(m).unwrap();
            assert_eq!(a.program().lent_params(idx), &[0], "{r} {m}");
        }
    }
}

/// Each smuggling method of `Lend`: the instruction that smuggles (its
/// opcode and which occurrence) and what the error says it did.
const REFUSED: &[(&str, u8, usize, &str)] = &[
    (
        "storeStatic",
        op::PUTSTATIC,
        0,
        "is stored in static field Kept",
    ),
    ("storeField", op::PUTFIELD, 0, "is stored in field kept"),
    ("write", op::BASTORE, 0, "is written by bastore"),
    ("returnIt", op::ARETURN, 0, "is returned"),
    (
        "passToMethod",
        op::INVOKESTATIC,
        0,
        "is passed to method helper([BI)I (argument 0)",
    ),
    (
        "mergeLocal",
        op::PUTSTATIC,
        0,
        "is stored in static field Kept",
    ),
    (
        "dupStore",
        op::PUTSTATIC,
        0,
        "is stored in static field Kept",
    ),
    (
        "ternaryStore",
        op::PUTSTATIC,
        0,
        "is stored in static field Kept",
    ),
    (
        "switchStore",
        op::PUTSTATIC,
        0,
        "is stored in static field Kept",
    ),
    (
        "loopStore",
        op::PUTSTATIC,
        0,
        "is stored in static field Kept",
    ),
    (
        "passSecond",
        op::INVOKESTATIC,
        0,
        "is passed to native rdwr([B[BI)V's parameter 1, which writes it",
    ),
    (
        "passWriting",
        op::INVOKESTATIC,
        0,
        "is passed to native wr([BI)V's parameter 0, which writes it",
    ),
    (
        "launder",
        op::PUTSTATIC,
        0,
        "is stored in static field Kept",
    ),
];

#[test]
fn every_way_out_is_refused_with_the_method_the_bci_and_the_use() {
    for r in RELEASES {
        let Some(bytes) = class_bytes(r, "Lend") else {
            return;
        };
        for &(m, o, nth, says) in REFUSED {
            let e = verify_error(load(&bytes, m, &natives()), m);
            let want = bci_of(&bytes, m, o, nth);
            assert_eq!(
                e.method,
                format!("{m}{}", descriptor(&bytes, m)),
                "{r}: {e}"
            );
            assert_eq!(e.bci, Some(want), "{r} {m}: {e}");
            assert!(
                e.reason.contains("the lent byte[]") && e.reason.contains(says),
                "{r} {m}: {e}\n  should say: {says}"
            );
        }
    }
}

/// Whether `name`'s call of `rd` is bound to its tail entry
/// ([`jive::TAIL_SUFFIX`]) in `prog`.
fn calls_rd_at_a_tail_site(prog: &jive::Program, name: &str) -> bool {
    use jive::decode::Op;
    let (idx, _) = prog.info.method(name).unwrap();
    let f = prog.funcs[idx].as_ref().unwrap();
    let calls: Vec<bool> = f
        .code
        .iter()
        .filter_map(|o| match o {
            Op::CallNative(n) => Some(&prog.natives[usize::from(*n)]),
            _ => None,
        })
        .filter(|n| n.name == "rd")
        .map(|n| n.tail)
        .collect();
    assert_eq!(calls.len(), 1, "{name}: one call of rd");
    calls[0]
}

#[test]
fn a_lent_parameter_no_instruction_writes_is_a_tail_sites_array() {
    for r in RELEASES {
        let Some(bytes) = class_bytes(r, "Lend") else {
            return;
        };
        // Declared lent and pushed from its own local, never written: the
        // tail entry (the host holds the array, not the heap).
        let lent = |m| jive::check_lending(&bytes, &Limits::default(), &lent(&bytes, m)).unwrap();
        assert!(
            calls_rd_at_a_tail_site(&lent("tailLent"), "tailLent"),
            "{r}"
        );
        // Its local written on one path, or the array copied into another
        // local: not provably the lent array, so the ordinary entry.
        for m in ["tailLentWritten", "tailLentCopied"] {
            assert!(!calls_rd_at_a_tail_site(&lent(m), m), "{r} {m}");
        }
        // Not declared lent, the parameter is an ordinary local, which the
        // end-of-invocation collection does not keep: the ordinary entry.
        let plain = jive::check(&bytes, &Limits::default()).unwrap();
        assert!(!calls_rd_at_a_tail_site(&plain, "tailLent"), "{r}");
        // Lent in another method only: the same.
        assert!(!calls_rd_at_a_tail_site(&lent("doRx"), "tailLent"), "{r}");
    }
}

#[test]
fn undeclared_the_same_methods_load() {
    for r in RELEASES {
        let Some(bytes) = class_bytes(r, "Lend") else {
            return;
        };
        let a = Applet::load(&bytes, &natives(), Limits::default()).unwrap();
        for (idx, _) in a.program().info.methods.iter().enumerate() {
            assert!(a.program().lent_params(idx).is_empty());
        }
        // Another method declared lent leaves them ordinary.
        load(&bytes, "doRx", &natives()).unwrap();
        // A table with no marks at all: nothing passes a lent array, and
        // nothing else is checked.
        let plain = Natives::new()
            .with("rd", "([BI)I", |_, _| Ok(0))
            .with("wr", "([BI)V", |_, _| Ok(0))
            .with("rdwr", "([B[BI)V", |_, _| Ok(0))
            .with("same", "([B)[B", |_, a| Ok(a[0]));
        Applet::load(&bytes, &plain, Limits::default()).unwrap();
        load(&bytes, "readJoined", &plain).unwrap();
    }
}

#[test]
fn the_native_calls_are_checked_against_the_table_that_binds_them() {
    for r in RELEASES {
        let Some(bytes) = class_bytes(r, "Lend") else {
            return;
        };
        // The analysis alone records the calls; binding decides.
        let prog =
            jive::check_lending(&bytes, &Limits::default(), &lent(&bytes, "passReadOnly")).unwrap();
        let calls = &prog.lent_methods()[0].native_args;
        assert_eq!(calls.len(), 2, "{r}: {calls:?}");
        assert_eq!(
            calls.iter().map(|c| c.param).collect::<Vec<_>>(),
            [0, 0],
            "{r}"
        );
        Applet::instantiate(prog.clone(), &natives(), Limits::default()).unwrap();
        // Unmarked, the same native refuses it, at the call.
        let unmarked = Natives::new()
            .with("rd", "([BI)I", |_, _| Ok(0))
            .with("wr", "([BI)V", |_, _| Ok(0))
            .with("rdwr", "([B[BI)V", |_, _| Ok(0))
            .with("same", "([B)[B", |_, a| Ok(a[0]))
            .with_read_only("rd", "([BI)I", &[0])
            .unwrap();
        let e = verify_error(
            Applet::instantiate(prog.clone(), &unmarked, Limits::default()),
            "rdwr unmarked",
        );
        assert_eq!(
            e.bci,
            Some(bci_of(&bytes, "passReadOnly", op::INVOKESTATIC, 0))
        );
        assert!(
            e.reason.contains("native rdwr([B[BI)V's parameter 0"),
            "{e}"
        );
        // Re-binding a marked native drops its mark.
        let mut rebound = natives();
        rebound.register("rd", "([BI)I", |_, _| Ok(0));
        let e = verify_error(
            Applet::instantiate(prog.clone(), &rebound, Limits::default()),
            "rd re-bound",
        );
        assert_eq!(
            e.bci,
            Some(bci_of(&bytes, "passReadOnly", op::INVOKESTATIC, 1))
        );
        // A tail form the table binds must be read-only too: the decoder
        // may bind it at the site.
        let tail = natives().with("rd#tail", "([BI)I", |_, _| Ok(0));
        let e = verify_error(
            Applet::instantiate(prog.clone(), &tail, Limits::default()),
            "rd#tail unmarked",
        );
        assert!(e.reason.contains("native rd([BI)I's parameter 0"), "{e}");
        let tail = tail.with_read_only("rd#tail", "([BI)I", &[0]).unwrap();
        Applet::instantiate(prog, &tail, Limits::default()).unwrap();
    }
}

#[test]
fn a_lent_declaration_must_name_a_byte_array_parameter() {
    let Some(bytes) = class_bytes("release8", "Lend") else {
        return;
    };
    let refused =
        |l: LentParam, says: &str| match jive::check_lending(&bytes, &Limits::default(), &[l]) {
            Err(LoadError::LentParam {
                method,
                descriptor,
                param,
                reason,
            }) => {
                assert_eq!(
                    (method.as_str(), descriptor.as_str(), param),
                    (l.method, l.descriptor, l.param)
                );
                assert!(reason.contains(says), "{reason}\n  should say: {says}");
            }
            other => panic!("{l:?}: {other:?}"),
        };
    let l = |method, descriptor, param| LentParam {
        method,
        descriptor,
        param,
    };
    refused(l("doRx", "([BII)I", 1), "the parameter is I, not [B");
    refused(l("doRx", "([BII)I", 3), "declares 3 parameters");
    refused(l("doRx", "([III)I", 0), "the parameter is [I, not [B");
    refused(
        l("doRx", "(Ljava/lang/String;)I", 0),
        "not one of the subset",
    );
    refused(l("doRx", "([BII", 0), "not one of the subset");
    // A method the class lacks, by name or by descriptor, is no error, and
    // is not lent.
    for m in [l("absent", "([B)V", 0), l("doRx", "([BI)I", 0)] {
        let p = jive::check_lending(&bytes, &Limits::default(), &[m]).unwrap();
        assert!(p.lent_methods().is_empty(), "{m:?}");
        let (idx, _) = p.info.method("doRx").unwrap();
        assert!(p.lent_params(idx).is_empty());
    }
    // A native cannot be proved to only read.
    let e = match jive::check_lending(&bytes, &Limits::default(), &[l("same", "([B)[B", 0)]) {
        Err(LoadError::Verify(e)) => e,
        other => panic!("{other:?}"),
    };
    assert!(
        e.reason
            .contains("a native method is declared with a lent parameter"),
        "{e}"
    );
}

#[test]
fn the_read_only_marks_name_bound_array_parameters() {
    let mut t = natives();
    assert!(matches!(
        t.set_read_only("absent", "([B)V", &[0]),
        Err(jive::MarkError::Unbound { .. })
    ));
    assert!(matches!(
        t.set_read_only("rd", "([BI)I", &[1]),
        Err(jive::MarkError::NotAnArray { param: 1, .. })
    ));
    assert!(matches!(
        t.set_read_only("rd", "([BI)I", &[2]),
        Err(jive::MarkError::NotAnArray { param: 2, .. })
    ));
    assert!(t.reads_only("rd", "([BI)I", 0));
    assert!(!t.reads_only("rd", "([BI)I", 1));
    assert!(!t.reads_only("wr", "([BI)V", 0));
    assert!(!t.reads_only("rdwr", "([B[BI)V", 1));
}

// ---------------------------------------------------------------------------
// Hand-made methods.

/// A minimal class-file writer: class `LendHand` (version 52) with the
/// static fields `Kept` and `Other` (`[B`) and one static method per
/// `(name, descriptor, max_stack, max_locals, code, handlers)`, straight-line
/// code without a `StackMapTable`.
struct Writer {
    pool: Vec<u8>,
    count: u16,
}

impl Writer {
    fn new() -> Writer {
        Writer {
            pool: Vec::new(),
            count: 1,
        }
    }
    fn entry(&mut self, bytes: &[u8]) -> u16 {
        self.pool.extend_from_slice(bytes);
        self.count += 1;
        self.count - 1
    }
    fn utf8(&mut self, s: &str) -> u16 {
        let mut b = vec![1];
        b.extend_from_slice(&(s.len() as u16).to_be_bytes());
        b.extend_from_slice(s.as_bytes());
        self.entry(&b)
    }
    fn class(&mut self, name: &str) -> u16 {
        let n = self.utf8(name);
        let mut b = vec![7];
        b.extend_from_slice(&n.to_be_bytes());
        self.entry(&b)
    }
}

/// A hand-made method.
struct Hand {
    name: String,
    descriptor: &'static str,
    max_stack: u16,
    max_locals: u16,
    code: Vec<u8>,
    /// An exception table entry `(start, end, handler)`, catching anything.
    handler: Option<(u16, u16, u16)>,
}

/// The constant-pool indices every hand-made method may use.
const KEPT: u16 = 1;
const OTHER: u16 = 2;
const BYTES: u16 = 3;

fn class_of(methods: &[Hand]) -> Vec<u8> {
    // Pool layout: 1 Fieldref Kept, 2 Fieldref Other, 3 Class [B (in
    // `head`), then their parts and the rest from 4 on (in `w`).
    let mut w = Writer::new();
    let mut head = Writer::new();
    w.count = 4;
    let cls = w.class("LendHand");
    let obj = w.class("java/lang/Object");
    let arr_name = w.utf8("[B");
    let (kn, on) = (w.utf8("Kept"), w.utf8("Other"));
    let mk_nt = |w: &mut Writer, n: u16| {
        let mut b = vec![12];
        b.extend_from_slice(&n.to_be_bytes());
        b.extend_from_slice(&arr_name.to_be_bytes());
        w.entry(&b)
    };
    let (knt, ont) = (mk_nt(&mut w, kn), mk_nt(&mut w, on));
    for nt in [knt, ont] {
        let mut b = vec![9];
        b.extend_from_slice(&cls.to_be_bytes());
        b.extend_from_slice(&nt.to_be_bytes());
        head.entry(&b);
    }
    let mut b = vec![7];
    b.extend_from_slice(&arr_name.to_be_bytes());
    head.entry(&b);
    let code_name = w.utf8("Code");
    let names: Vec<(u16, u16)> = methods
        .iter()
        .map(|m| (w.utf8(&m.name), w.utf8(m.descriptor)))
        .collect();

    let mut out = vec![0xCA, 0xFE, 0xBA, 0xBE, 0, 0, 0, 52];
    out.extend_from_slice(&w.count.to_be_bytes());
    out.extend_from_slice(&head.pool);
    out.extend_from_slice(&w.pool);
    out.extend_from_slice(&0x0021u16.to_be_bytes()); // public super
    out.extend_from_slice(&cls.to_be_bytes());
    out.extend_from_slice(&obj.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes()); // interfaces
    out.extend_from_slice(&2u16.to_be_bytes()); // fields
    for n in [kn, on] {
        out.extend_from_slice(&0x0008u16.to_be_bytes()); // static
        out.extend_from_slice(&n.to_be_bytes());
        out.extend_from_slice(&arr_name.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
    }
    out.extend_from_slice(&(methods.len() as u16).to_be_bytes());
    for (m, &(n, d)) in methods.iter().zip(&names) {
        out.extend_from_slice(&0x0008u16.to_be_bytes()); // static
        out.extend_from_slice(&n.to_be_bytes());
        out.extend_from_slice(&d.to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&code_name.to_be_bytes());
        let handlers = u32::from(m.handler.is_some());
        let len = 2 + 2 + 4 + m.code.len() as u32 + 2 + 8 * handlers + 2;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&m.max_stack.to_be_bytes());
        out.extend_from_slice(&m.max_locals.to_be_bytes());
        out.extend_from_slice(&(m.code.len() as u32).to_be_bytes());
        out.extend_from_slice(&m.code);
        out.extend_from_slice(&(handlers as u16).to_be_bytes());
        if let Some((s, e, h)) = m.handler {
            for v in [s, e, h, 0] {
                out.extend_from_slice(&v.to_be_bytes());
            }
        }
        out.extend_from_slice(&0u16.to_be_bytes()); // code attributes
    }
    out.extend_from_slice(&0u16.to_be_bytes()); // class attributes
    out
}

fn hand(name: &str, code: Vec<u8>, max_stack: u16) -> Hand {
    Hand {
        name: name.into(),
        descriptor: "([B)V",
        max_stack,
        max_locals: 1,
        code,
        handler: None,
    }
}

fn u16b(v: u16) -> [u8; 2] {
    v.to_be_bytes()
}

/// Checks `LendHand` with parameter 0 of `name` (`([B)V`) lent.
fn check_hand(bytes: &[u8], name: &'static str) -> Result<jive::Program, LoadError> {
    jive::check_lending(
        bytes,
        &Limits::default(),
        &[LentParam {
            method: name,
            descriptor: "([B)V",
            param: 0,
        }],
    )
}

/// The stack shuffles of JVMS §6.5 on one-slot values: the inputs and the
/// outputs, bottom first, the top of the inputs named `a`.
const SHUFFLES: &[(u8, &str, &str, &str)] = &[
    (op::DUP, "dup", "a", "aa"),
    (op::DUP_X1, "dup_x1", "ba", "aba"),
    (op::DUP_X2, "dup_x2", "cba", "acba"),
    (op::DUP2, "dup2", "ba", "baba"),
    (op::DUP2_X1, "dup2_x1", "cba", "bacba"),
    (op::DUP2_X2, "dup2_x2", "dcba", "badcba"),
    (op::SWAP, "swap", "ba", "ab"),
];

#[test]
fn every_stack_shuffle_carries_the_lent_array_to_where_the_jvms_puts_it() {
    // For each shuffle, each input the lent array is, and each output
    // slot: a method that pushes the inputs (the lent array or `Other`),
    // shuffles, pops down to that slot, stores it in `Kept` and pops the
    // rest. Refused exactly where that slot is the lent array.
    let mut methods = Vec::new();
    let mut expect = Vec::new();
    for &(o, mn, ins, outs) in SHUFFLES {
        for (p, lent_letter) in ins.chars().enumerate() {
            for j in 0..outs.len() {
                let mut code = Vec::new();
                for k in 0..ins.len() {
                    if k == p {
                        code.push(op::ALOAD_0);
                    } else {
                        code.push(op::GETSTATIC);
                        code.extend_from_slice(&u16b(OTHER));
                    }
                }
                code.push(o);
                code.extend(std::iter::repeat_n(op::POP, j));
                let store = code.len() as u32;
                code.push(op::PUTSTATIC);
                code.extend_from_slice(&u16b(KEPT));
                code.extend(std::iter::repeat_n(op::POP, outs.len() - j - 1));
                code.push(op::RETURN);
                let slot = outs.as_bytes()[outs.len() - 1 - j] as char;
                let name = format!("{mn}_{p}_{j}");
                expect.push((name.clone(), (slot == lent_letter).then_some(store)));
                methods.push(hand(&name, code, outs.len() as u16));
            }
        }
    }
    let bytes = class_of(&methods);
    let mut refused = 0;
    for (name, store) in expect {
        let name: &'static str = Box::leak(name.into_boxed_str());
        match (check_hand(&bytes, name), store) {
            (Ok(_), None) => {}
            (Err(LoadError::Verify(e)), Some(bci)) => {
                assert_eq!(e.bci, Some(bci), "{name}: {e}");
                assert!(
                    e.reason.contains("is stored in static field Kept"),
                    "{name}: {e}"
                );
                refused += 1;
            }
            (r, s) => panic!("{name}: expected {s:?} (the store's bci if refused), got {r:?}"),
        }
    }
    // One refusal per output slot of each shuffle: every slot is a copy
    // of one input, and each input is the lent array once.
    let slots: usize = SHUFFLES.iter().map(|s| s.3.len()).sum();
    assert_eq!(refused, slots, "refusals");
}

#[test]
fn pop_and_wide_aload_keep_and_drop_the_bit() {
    let methods = vec![
        // Dropping the lent array is allowed.
        hand(
            "pops",
            vec![
                op::ALOAD_0,
                op::POP,
                op::ALOAD_0,
                op::GETSTATIC,
                0,
                OTHER as u8,
                op::POP2,
                op::RETURN,
            ],
            2,
        ),
        // `wide aload 0` loads it as `aload_0` does.
        hand(
            "wideLoad",
            vec![
                op::WIDE,
                op::ALOAD,
                0,
                0,
                op::PUTSTATIC,
                0,
                KEPT as u8,
                op::RETURN,
            ],
            1,
        ),
        // A local overwritten with another array is no longer lent.
        hand(
            "overwritten",
            vec![
                op::GETSTATIC,
                0,
                OTHER as u8,
                op::ASTORE_0,
                op::ALOAD_0,
                op::PUTSTATIC,
                0,
                KEPT as u8,
                op::RETURN,
            ],
            1,
        ),
    ];
    let bytes = class_of(&methods);
    check_hand(&bytes, "pops").unwrap();
    check_hand(&bytes, "overwritten").unwrap();
    let e = match check_hand(&bytes, "wideLoad") {
        Err(LoadError::Verify(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(e.bci, Some(4), "{e}");
    assert!(e.reason.contains("is stored in static field Kept"), "{e}");
}

#[test]
fn what_the_subset_lacks_is_refused_before_the_analysis() {
    // Each would reach the lent array; the subset check refuses the class
    // whether or not a method is declared lent.
    type Case = (&'static str, Vec<u8>, Option<(u16, u16, u16)>, &'static str);
    let cases: Vec<Case> = vec![
        (
            "handler",
            vec![op::ALOAD_0, op::PUTSTATIC, 0, KEPT as u8, op::RETURN],
            Some((0, 4, 4)),
            "exception handlers",
        ),
        ("athrow", vec![op::ALOAD_0, op::ATHROW], None, "exceptions"),
        (
            "monitor",
            vec![op::ALOAD_0, 194 /* monitorenter */, op::RETURN],
            None,
            "monitors",
        ),
        (
            "aastore",
            vec![
                op::ALOAD_0,
                3, /* iconst_0 */
                op::ALOAD_0,
                83, /* aastore */
                op::RETURN,
            ],
            None,
            "",
        ),
        (
            "checkcast",
            vec![
                op::ALOAD_0,
                op::CHECKCAST,
                0,
                BYTES as u8,
                op::POP,
                op::RETURN,
            ],
            None,
            "",
        ),
    ];
    for (name, code, handler, says) in cases {
        let mut m = hand(name, code, 3);
        m.handler = handler;
        let bytes = class_of(&[m]);
        let name: &'static str = Box::leak(name.to_string().into_boxed_str());
        for r in [
            check_hand(&bytes, name),
            jive::check(&bytes, &Limits::default()),
        ] {
            match r {
                Err(LoadError::Subset(e)) => assert!(e.reason.contains(says), "{name}: {e}"),
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}

/// A method whose lent array needs one pass of a long loop per local it
/// crosses (`LentChain`: 240 locals, the taint moving one down the chain
/// per pass) is refused by the analysis's cap on work (steps times slots),
/// which the bound on steps alone would let through; the same class loads
/// with nothing declared (review26: a hostile class made the load take
/// seconds).
#[test]
fn a_method_whose_analysis_would_take_too_long_is_refused() {
    let Some(bytes) = class_bytes("release8", "LentChain") else {
        return;
    };
    jive::check(&bytes, &Limits::default()).unwrap();
    let decl = lent(&bytes, "doRx");
    let e = match jive::check_lending(&bytes, &Limits::default(), &decl) {
        Err(LoadError::Verify(e)) => e,
        r => panic!("not refused: {:?}", r.map(|_| ())),
    };
    assert!(e.method.starts_with("doRx"), "{e}");
    assert!(e.reason.contains("exceeds its bound"), "{e}");
}
