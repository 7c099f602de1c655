//! The negative corpus: class files derived from the valid `Victim.class` by
//! one targeted change of its bytes each, and the specific reason each must
//! be rejected for. Every patch first checks the bytes it replaces, so a
//! different `javac` cannot silently turn a case into a different one.

mod common;

use common::{RELEASES, class_bytes};
use jive::classfile::ClassFile;
use jive::{Applet, Limits, LoadError, Natives};

/// Where a patch goes.
enum At {
    /// Byte offset into a method's code.
    Code(&'static str, usize),
    /// `max_stack` (+0) or `max_locals` (+2) of a method: offset from the u2 `max_stack`.
    Header(&'static str, usize),
    /// Byte offset into a method's StackMapTable frame `i`.
    Frame(&'static str, usize, usize),
    /// The first occurrence of a byte pattern in the whole file (constant pool).
    Find(&'static [u8]),
    /// The name index of a method's `method_info`.
    MethodName(&'static str),
    /// An absolute file offset.
    File(usize),
}

struct Case {
    what: &'static str,
    at: At,
    old: &'static [u8],
    new: &'static [u8],
    /// `"verify"`, `"format"`, `"subset"` or `"native"`.
    kind: &'static str,
    method: Option<&'static str>,
    bci: Option<u32>,
    reason: &'static str,
}

const CASES: &[Case] = &[
    Case {
        what: "stack underflow",
        at: At::Code("add", 2),
        old: &[0x60],
        new: &[0x58],
        kind: "verify",
        method: Some("add(II)I"),
        bci: Some(3),
        reason: "operand stack underflow",
    },
    Case {
        what: "stack underflow by dup",
        at: At::Code("add", 0),
        old: &[0x1a],
        new: &[0x59],
        kind: "verify",
        method: Some("add(II)I"),
        bci: Some(0),
        reason: "operand stack underflow",
    },
    Case {
        what: "stack overflow",
        at: At::Header("add", 0),
        old: &[0, 2],
        new: &[0, 1],
        kind: "verify",
        method: Some("add(II)I"),
        bci: Some(1),
        reason: "operand stack overflow: max_stack is 1",
    },
    Case {
        what: "arguments exceed max_locals",
        at: At::Header("add", 2),
        old: &[0, 2],
        new: &[0, 1],
        kind: "verify",
        method: Some("add(II)I"),
        bci: None,
        reason: "the arguments need 2 locals, max_locals is 1",
    },
    Case {
        what: "local out of range",
        at: At::Code("add", 1),
        old: &[0x1b],
        new: &[0x1c],
        kind: "verify",
        method: Some("add(II)I"),
        bci: Some(1),
        reason: "local variable 2 is out of range",
    },
    Case {
        what: "int local read as a reference",
        at: At::Code("add", 0),
        old: &[0x1a],
        new: &[0x2a],
        kind: "verify",
        method: Some("add(II)I"),
        bci: Some(0),
        reason: "reads local 0, which holds int, not a reference",
    },
    Case {
        what: "int used as an array",
        at: At::Code("add", 2),
        old: &[0x60],
        new: &[0x2e],
        kind: "verify",
        method: Some("add(II)I"),
        bci: Some(2),
        reason: "iaload expects an int array, found int",
    },
    Case {
        what: "void return from an int method",
        at: At::Code("add", 3),
        old: &[0xac],
        new: &[0xb1],
        kind: "verify",
        method: Some("add(II)I"),
        bci: Some(3),
        reason: "return without a value in a method that returns I",
    },
    Case {
        what: "areturn from an int method",
        at: At::Code("add", 3),
        old: &[0xac],
        new: &[0xb0],
        kind: "verify",
        method: Some("add(II)I"),
        bci: Some(3),
        reason: "areturn in a method that returns I",
    },
    Case {
        what: "falls off the end of the code",
        at: At::Code("add", 3),
        old: &[0xac],
        new: &[0x00],
        kind: "verify",
        method: Some("add(II)I"),
        bci: Some(3),
        reason: "fall off the end of the code",
    },
    Case {
        what: "reserved opcode",
        at: At::Code("add", 2),
        old: &[0x60],
        new: &[0xcb],
        kind: "verify",
        method: Some("add(II)I"),
        bci: Some(2),
        reason: "reserved or unknown opcode 0xcb",
    },
    Case {
        what: "branch into the middle of an instruction",
        at: At::Code("loop", 17),
        old: &[0xff, 0xf4],
        new: &[0xff, 0xf7],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(16),
        reason: "branch target 7 is in the middle of an instruction",
    },
    Case {
        what: "conditional branch into the middle of goto",
        at: At::Code("loop", 7),
        old: &[0x00, 0x0d],
        new: &[0x00, 0x0c],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(6),
        reason: "branch target 18 is in the middle of an instruction",
    },
    Case {
        what: "branch target without a frame",
        at: At::Code("loop", 17),
        old: &[0xff, 0xf4],
        new: &[0xff, 0xf5],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(16),
        reason: "branch target 5 has no StackMapTable frame",
    },
    Case {
        what: "branch outside the code",
        at: At::Code("loop", 17),
        old: &[0xff, 0xf4],
        new: &[0x00, 0x64],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(16),
        reason: "branch target 116 is outside the code",
    },
    Case {
        what: "non-empty stack at a merge point",
        at: At::Code("loop", 12),
        old: &[0x3c],
        new: &[0x00],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(16),
        reason: "does not match its StackMapTable frame",
    },
    Case {
        what: "iinc of a local out of range",
        at: At::Code("loop", 14),
        old: &[0x02],
        new: &[0x03],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(13),
        reason: "local variable 3 is out of range",
    },
    Case {
        what: "frame marks a set local as unset",
        at: At::Frame("loop", 0, 4),
        old: &[0x01],
        new: &[0x00],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(4),
        reason: "iload_2 reads local 2, which holds an unset value",
    },
    Case {
        what: "frame holds a float",
        at: At::Frame("loop", 0, 4),
        old: &[0x01],
        new: &[0x02],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(4),
        reason: "holds a long, float or double",
    },
    Case {
        what: "frame placed before its local is set",
        at: At::Frame("loop", 0, 2),
        old: &[0x04, 1, 1, 0xfa, 0, 0x0e],
        new: &[0x03, 1, 1, 0xfa, 0, 0x0f],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(3),
        reason: "falls through into a StackMapTable frame it does not match",
    },
    Case {
        what: "frame beyond the end of the code",
        at: At::Frame("loop", 1, 2),
        old: &[0x0e],
        new: &[0x40],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(69),
        reason: "beyond the end of the code",
    },
    Case {
        what: "frame inside an instruction",
        at: At::Frame("loop", 1, 2),
        old: &[0x0e],
        new: &[0x0d],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(18),
        reason: "not at an instruction start",
    },
    Case {
        what: "chop frame drops live locals",
        at: At::Frame("loop", 1, 0),
        old: &[0xfa],
        new: &[0xf8],
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(19),
        reason: "iload_1 reads local 1, which holds an unset value",
    },
    Case {
        what: "reserved frame type",
        at: At::Frame("loop", 0, 0),
        old: &[0xfd],
        new: &[0xc8],
        kind: "format",
        method: None,
        bci: None,
        reason: "reserved stack map frame type 200",
    },
    Case {
        what: "missing StackMapTable",
        at: At::Find(b"StackMapTable"),
        old: b"StackMapTable",
        new: b"StackMapTablf",
        kind: "verify",
        method: Some("loop(I)I"),
        bci: Some(6),
        reason: "branch target 19 has no StackMapTable frame",
    },
    Case {
        what: "class file version without StackMapTable",
        at: At::File(6),
        old: &[0, 61],
        new: &[0, 49],
        kind: "verify",
        method: Some("Victim"),
        bci: None,
        reason: "predates StackMapTable",
    },
    Case {
        what: "byte array used as an int array",
        at: At::Code("first", 2),
        old: &[0x33],
        new: &[0x2e],
        kind: "verify",
        method: Some("first([B)I"),
        bci: Some(2),
        reason: "iaload expects an int array, found [B",
    },
    Case {
        what: "array used as an int",
        at: At::Code("first", 0),
        old: &[0x2a],
        new: &[0x1a],
        kind: "verify",
        method: Some("first([B)I"),
        bci: Some(0),
        reason: "iload_0 reads local 0, which holds [B, not int",
    },
    Case {
        what: "bad field type",
        at: At::Find(&[12, 0, 15, 0, 12]),
        old: &[12, 0, 15, 0, 12],
        new: &[12, 0, 15, 0, 25],
        kind: "verify",
        method: Some("get()I"),
        bci: Some(0),
        reason: "getstatic count:[B, but the field is declared with type I",
    },
    Case {
        what: "getstatic of an instance field",
        at: At::Code("get", 2),
        old: &[13],
        new: &[7],
        kind: "verify",
        method: Some("get()I"),
        bci: Some(0),
        reason: "getstatic of instance field inst",
    },
    Case {
        what: "getfield turned getstatic",
        at: At::Code("getInst", 1),
        old: &[0xb4],
        new: &[0xb2],
        kind: "verify",
        method: Some("getInst()I"),
        bci: Some(1),
        reason: "getstatic of instance field inst",
    },
    Case {
        what: "putstatic with nothing to store",
        at: At::Code("put", 0),
        old: &[0x1a],
        new: &[0x00],
        kind: "verify",
        method: Some("put(I)V"),
        bci: Some(1),
        reason: "operand stack underflow",
    },
    Case {
        what: "call to an unknown method",
        at: At::Find(&[12, 0, 18, 0, 19]),
        old: &[12, 0, 18, 0, 19],
        new: &[12, 0, 29, 0, 19],
        kind: "verify",
        method: Some("call(I)I"),
        bci: Some(2),
        reason: "call to unknown method this(II)I",
    },
    Case {
        what: "call with the wrong descriptor",
        at: At::Find(&[12, 0, 18, 0, 19]),
        old: &[12, 0, 18, 0, 19],
        new: &[12, 0, 18, 0, 23],
        kind: "verify",
        method: Some("call(I)I"),
        bci: Some(2),
        reason: "call to add(I)I, but the method is declared as add(II)I",
    },
    Case {
        what: "invokevirtual of a static method",
        at: At::Code("call", 2),
        old: &[0xb8],
        new: &[0xb6],
        kind: "verify",
        method: Some("call(I)I"),
        bci: Some(2),
        reason: "invokevirtual of static method add(II)I",
    },
    Case {
        what: "call to an unknown native",
        at: At::MethodName("host"),
        old: &[0, 22],
        new: &[0, 29],
        kind: "verify",
        method: Some("callHost(I)I"),
        bci: Some(1),
        reason: "call to unknown method host(I)I",
    },
    Case {
        what: "switch into the middle of an instruction",
        at: At::Code("sw", 16),
        old: &[0, 0, 0, 27],
        new: &[0, 0, 0, 28],
        kind: "verify",
        method: Some("sw(I)I"),
        bci: Some(1),
        reason: "branch target 29 is in the middle of an instruction",
    },
    Case {
        what: "switch default without a frame",
        at: At::Code("sw", 4),
        old: &[0, 0, 0, 33],
        new: &[0, 0, 0, 34],
        kind: "verify",
        method: Some("sw(I)I"),
        bci: Some(1),
        reason: "branch target 35 has no StackMapTable frame",
    },
    Case {
        what: "unsorted lookupswitch keys",
        at: At::Code("sw", 12),
        old: &[0, 0, 0, 1],
        new: &[0, 0, 0, 3],
        kind: "verify",
        method: Some("sw(I)I"),
        bci: Some(1),
        reason: "lookupswitch keys are not sorted",
    },
    Case {
        what: "wrong array type returned",
        at: At::Code("make", 2),
        old: &[8],
        new: &[10],
        kind: "verify",
        method: Some("make(I)[B"),
        bci: Some(3),
        reason: "areturn expects [B on the stack, found [I",
    },
    Case {
        what: "ireturn from an array method",
        at: At::Code("make", 3),
        old: &[0xb0],
        new: &[0xac],
        kind: "verify",
        method: Some("make(I)[B"),
        bci: Some(3),
        reason: "ireturn in a method that returns [B",
    },
    Case {
        what: "constructor that never initializes this",
        at: At::Code("<init>", 0),
        old: &[0x2a, 0xb7, 0, 1],
        new: &[0, 0, 0, 0],
        kind: "verify",
        method: Some("<init>()V"),
        bci: Some(9),
        reason: "returns before `this` is initialized",
    },
    Case {
        what: "newarray of char",
        at: At::Code("make", 2),
        old: &[8],
        new: &[5],
        kind: "subset",
        method: Some("make(I)[B"),
        bci: Some(1),
        reason: "newarray char",
    },
];

fn locate(cf: &ClassFile, bytes: &[u8], at: &At) -> usize {
    let method = |name: &str| {
        cf.methods
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no method {name}"))
    };
    let code = |name: &str| {
        method(name)
            .code
            .as_ref()
            .unwrap_or_else(|| panic!("{name} has no code"))
    };
    match *at {
        At::Code(m, off) => code(m).code_offset + off,
        At::Header(m, off) => code(m).code_offset - 8 + off,
        At::Frame(m, i, off) => {
            code(m).stack_map.as_ref().expect("a StackMapTable")[i].file_offset + off
        }
        At::Find(pat) => bytes
            .windows(pat.len())
            .position(|w| w == pat)
            .expect("pattern in the class file"),
        At::MethodName(m) => method(m).offset + 2,
        At::File(off) => off,
    }
}

fn mutant(pristine: &[u8], case: &Case) -> Vec<u8> {
    let cf = ClassFile::parse(pristine).unwrap();
    let at = locate(&cf, pristine, &case.at);
    assert_eq!(
        &pristine[at..at + case.old.len()],
        case.old,
        "{}: the bytes to replace differ",
        case.what
    );
    let mut b = pristine.to_vec();
    b[at..at + case.new.len()].copy_from_slice(case.new);
    b
}

#[test]
fn the_pristine_class_loads() {
    for r in RELEASES {
        let Some(bytes) = class_bytes(r, "Victim") else {
            return;
        };
        let natives = Natives::new().with("host", "(I)I", |_, a| Ok(a[0]));
        Applet::load(&bytes, &natives, Limits::default()).unwrap();
    }
}

#[test]
fn an_unbound_native_is_rejected_at_load() {
    let Some(bytes) = class_bytes("default", "Victim") else {
        return;
    };
    let e = Applet::load(&bytes, &Natives::new(), Limits::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "unknown native method host(I)I: the host registered no binding for it"
    );
}

#[test]
fn every_mutant_is_rejected_for_its_specific_reason() {
    assert!(CASES.len() >= 30);
    for r in RELEASES {
        let Some(pristine) = class_bytes(r, "Victim") else {
            return;
        };
        for case in CASES {
            if r == "release8" && matches!(case.at, At::File(6)) {
                continue; // the version bytes differ (52); covered by the default build
            }
            let b = mutant(&pristine, case);
            let err = jive::check(&b, &Limits::default()).expect_err(case.what);
            let (kind, method, bci, reason) = match &err {
                LoadError::Verify(e) => {
                    ("verify", Some(e.method.as_str()), e.bci, e.reason.as_str())
                }
                LoadError::ClassFormat(e) => ("format", None, None, e.what.as_str()),
                LoadError::Subset(e) => ("subset", e.method.as_deref(), e.bci, e.reason.as_str()),
                other => panic!("{}: unexpected {other}", case.what),
            };
            assert_eq!(kind, case.kind, "{r} {}: {err}", case.what);
            assert_eq!(method, case.method, "{r} {}: {err}", case.what);
            assert_eq!(bci, case.bci, "{r} {}: {err}", case.what);
            assert!(
                reason.contains(case.reason),
                "{r} {}: {err}\n  should say: {}",
                case.what,
                case.reason
            );
        }
    }
}

#[test]
fn a_java_5_class_is_rejected_with_a_clear_message() {
    let Some(pristine) = class_bytes("release8", "Victim") else {
        return;
    };
    let mut b = pristine.clone();
    assert_eq!(&b[6..8], &[0, 52]);
    b[7] = 49;
    let e = jive::check(&b, &Limits::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("class file version 49.0 predates StackMapTable (version 50)"),
        "{e}"
    );
    assert!(
        e.to_string().contains("recompile with javac --release 8"),
        "{e}"
    );
}
