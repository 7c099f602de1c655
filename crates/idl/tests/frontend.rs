//! The front end as a specification: what the IDL accepts, the model and
//! message layout it produces (docs/idl.md, "The language" and "The message
//! layout"), and every way it rejects a text, with the exact place and
//! message.
//!
//! The expected layouts below are worked out by hand from the rules, not
//! copied from the implementation.

use idl::model::{Field, Slot, StructDef};
use idl::{Dir, Idl, Limits, Pos, Prim, Type};

const PFS: &str = include_str!("../idl/pfs.idl");

/// A 4-byte, 4-aligned field (an `int`) or, with `desc`, an 8-byte
/// descriptor.
fn int(slot: Slot, offset: u32) -> Field {
    Field {
        slot,
        offset,
        size: 4,
        align: 4,
        desc: false,
    }
}

fn desc(slot: Slot, offset: u32) -> Field {
    Field {
        slot,
        offset,
        size: 8,
        align: 4,
        desc: true,
    }
}

fn p(i: usize) -> Slot {
    Slot::Param(i)
}

fn parse(src: &str) -> Idl {
    match idl::parse(src) {
        Ok(m) => m,
        Err(e) => panic!("{}", e.render(src)),
    }
}

/// The error of a source that must be rejected, as `line:col: message`.
fn reject(src: &str) -> String {
    match idl::parse(src) {
        Ok(m) => panic!("accepted:\n{src}\n{m:#?}"),
        Err(e) => e.to_string(),
    }
}

/// The model with every position zeroed, to compare two spellings.
fn without_pos(mut m: Idl) -> Idl {
    for s in &mut m.structs {
        s.pos = Pos::default();
    }
    for i in &mut m.interfaces {
        i.pos = Pos::default();
        for o in &mut i.ops {
            o.pos = Pos::default();
            for p in &mut o.params {
                p.pos = Pos::default();
            }
        }
    }
    m
}

// ---------------------------------------------------------------------
// The paper's pfs calls.

#[test]
fn pfs_open_layout() {
    let m = parse(PFS);
    assert_eq!(m.interfaces.len(), 1);
    let pfs = &m.interfaces[0];
    assert_eq!(pfs.name, "pfs");
    let names: Vec<_> = pfs.ops.iter().map(|o| (o.name.as_str(), o.key)).collect();
    assert_eq!(
        names,
        [("pfs_open", 0), ("pfs_write", 1), ("pfs_get_direntries", 2)]
    );

    // int pfs_open([in] int client, [in] int fobj, [in] int flags,
    //              [in] int mode, [out] int *handle);
    // in: client 0..4, fobj 4..8, flags 8..12, mode 12..16 (request: 16);
    // out: handle 16..20; return 20..24; size 24.
    let op = &pfs.ops[0];
    assert_eq!(op.ret, Some(Type::Prim(Prim::I32)));
    let dirs: Vec<_> = op.params.iter().map(|p| (p.name.as_str(), p.dir)).collect();
    assert_eq!(
        dirs,
        [
            ("client", Dir::In),
            ("fobj", Dir::In),
            ("flags", Dir::In),
            ("mode", Dir::In),
            ("handle", Dir::Out)
        ]
    );
    assert!(op.params.iter().all(|p| p.ty == Type::Prim(Prim::I32)));
    let l = &op.layout;
    assert_eq!(
        l.fields,
        [
            int(p(0), 0),
            int(p(1), 4),
            int(p(2), 8),
            int(p(3), 12),
            int(p(4), 16),
            int(Slot::Ret, 20)
        ]
    );
    assert_eq!((l.request_size, l.size, l.align), (16, 24, 4));
    assert_eq!((l.in_strings, l.out_strings), (0, 0));
    assert!(l.inline());
}

#[test]
fn pfs_write_layout() {
    // int pfs_write([in] int handle, [in, out] int *pos, [in] int len,
    //               [in] int data_size, [in, size_is(data_size)] int *data);
    // in: handle 0..4, len 4..8, data's descriptor 8..16 (data_size has no
    // field: it is the descriptor's length); inout: pos 16..20 (request:
    // 20); return 20..24; size 24.
    let m = parse(PFS);
    let op = &m.interfaces[0].ops[1];
    assert_eq!(op.name, "pfs_write");
    let ps = &op.params;
    assert_eq!(ps[1].dir, Dir::InOut);
    assert_eq!(ps[1].ty, Type::Prim(Prim::I32));
    assert_eq!(ps[4].ty, Type::Sequence(Box::new(Type::Prim(Prim::I32))));
    assert_eq!(
        (ps[4].dir, ps[4].size_is, ps[4].length_of),
        (Dir::In, Some(3), None)
    );
    assert_eq!(
        (ps[3].dir, ps[3].size_is, ps[3].length_of),
        (Dir::In, None, Some(4))
    );
    assert!(
        ps.iter()
            .take(3)
            .all(|p| p.size_is.is_none() && p.length_of.is_none())
    );
    let l = &op.layout;
    assert_eq!(
        l.fields,
        [
            int(p(0), 0),
            int(p(2), 4),
            desc(p(4), 8),
            int(p(1), 16),
            int(Slot::Ret, 20)
        ]
    );
    assert_eq!((l.request_size, l.size, l.align), (20, 24, 4));
    assert_eq!((l.in_strings, l.out_strings), (1, 0));
    assert_eq!(l.field(p(3)), None);
}

#[test]
fn pfs_get_direntries_layout() {
    // int pfs_get_direntries([in] int handle, [in, out] int *pos,
    //     [in] int count, [out] int *data_size,
    //     [out, size_is(data_size)] int **data);
    // in: handle 0..4, count 4..8; inout: pos 8..12 (request: 12); out:
    // data's descriptor 12..20 (data_size has no field); return 20..24.
    let m = parse(PFS);
    let op = &m.interfaces[0].ops[2];
    assert_eq!(op.name, "pfs_get_direntries");
    let ps = &op.params;
    assert_eq!(ps[3].dir, Dir::Out);
    assert_eq!(ps[3].ty, Type::Prim(Prim::I32));
    assert_eq!(ps[4].ty, Type::Sequence(Box::new(Type::Prim(Prim::I32))));
    assert_eq!((ps[4].dir, ps[4].size_is), (Dir::Out, Some(3)));
    assert_eq!(ps[3].length_of, Some(4));
    let l = &op.layout;
    assert_eq!(
        l.fields,
        [
            int(p(0), 0),
            int(p(2), 4),
            int(p(1), 8),
            desc(p(4), 12),
            int(Slot::Ret, 20)
        ]
    );
    assert_eq!((l.request_size, l.size, l.align), (12, 24, 4));
    assert_eq!((l.in_strings, l.out_strings), (0, 1));
}

#[test]
fn positions_point_at_names() {
    let m = parse(PFS);
    let op = &m.interfaces[0].ops[1];
    assert_eq!(m.interfaces[0].pos, Pos { line: 5, col: 11 });
    assert_eq!(op.pos, Pos { line: 9, col: 9 });
    assert_eq!(op.params[1].pos, Pos { line: 10, col: 34 });
}

// ---------------------------------------------------------------------
// Both syntaxes.

#[test]
fn corba_syntax_is_the_midl_syntax() {
    let midl = "interface pfs {
        int pfs_open([in] int client, [in] int fobj, [in] int flags, [in] int mode,
                     [out] int *handle);
        void put([in] sequence<octet> blob, [in, out] string *name, [out] sequence<int32_t> *ids);
        boolean flag([in] boolean on, [in, out] unsigned long long *big);
    };";
    let corba = "interface pfs {
        long pfs_open(in long client, in long fobj, in long flags, in long mode, out long handle);
        void put(in sequence<octet> blob, inout string name, out sequence<long> ids);
        boolean flag(in boolean on, inout unsigned long long big);
    };";
    let (a, b) = (parse(midl), parse(corba));
    assert_eq!(without_pos(a.clone()), without_pos(b));
    let put = &a.interfaces[0].ops[1].layout;
    // in: blob 0..8; inout: name 8..16 (request 16); out: ids 16..24.
    assert_eq!(put.fields, [desc(p(0), 0), desc(p(1), 8), desc(p(2), 16)]);
    assert_eq!(
        (put.request_size, put.size, put.in_strings, put.out_strings),
        (16, 24, 2, 2)
    );
    // in: on 0..1; inout: big 8..16 (request 16); return 16..17; size 24.
    let flag = &a.interfaces[0].ops[2].layout;
    assert_eq!(
        flag.fields,
        [
            Field {
                slot: p(0),
                offset: 0,
                size: 1,
                align: 1,
                desc: false
            },
            Field {
                slot: p(1),
                offset: 8,
                size: 8,
                align: 8,
                desc: false
            },
            Field {
                slot: Slot::Ret,
                offset: 16,
                size: 1,
                align: 1,
                desc: false
            },
        ]
    );
    assert_eq!((flag.request_size, flag.size, flag.align), (16, 24, 8));
}

#[test]
fn integer_type_names() {
    let src = "interface t { void f(
        in char a, in octet b, in short c, in unsigned short d, in int e, in long f,
        in unsigned long g, in long long h, in unsigned long long i, in hyper j,
        in unsigned hyper k, in int8_t l, in uint8_t m, in int16_t n, in uint16_t o,
        in int32_t q, in uint32_t r, in int64_t s, in uint64_t u, in unsigned char v,
        in signed char w, in unsigned int x, in unsigned y, in short int z, in boolean bb); };";
    let m = parse(src);
    let got: Vec<_> = m.interfaces[0].ops[0]
        .params
        .iter()
        .map(|p| match p.ty {
            Type::Prim(p) => p,
            _ => panic!(),
        })
        .collect();
    use Prim::*;
    assert_eq!(
        got,
        [
            Char, U8, I16, U16, I32, I32, U32, I64, U64, I64, U64, I8, U8, I16, U16, I32, U32, I64,
            U64, U8, I8, U32, U32, I16, Bool
        ]
    );
}

#[test]
fn void_parameter_lists_comments_and_empty_interfaces() {
    let m = parse(
        "/* block\n comment */ interface a { void f(void); // line\n long g(); };\ninterface b { };",
    );
    let a = &m.interfaces[0];
    assert_eq!((a.ops[0].ret.clone(), a.ops[0].params.len()), (None, 0));
    assert_eq!(a.ops[0].layout.fields, []);
    assert_eq!((a.ops[0].layout.size, a.ops[0].layout.request_size), (0, 0));
    assert_eq!(a.ops[1].layout.fields, [int(Slot::Ret, 0)]);
    assert_eq!(a.ops[1].layout.size, 4);
    assert_eq!(m.interfaces[1].ops, []);
}

#[test]
fn modules_scope_names_joined_with_underscores() {
    let m = parse(
        "module fs {
            const long N = 4;
            struct stat_t { long size; octet kind; };
            module v2 { typedef stat_t st2[N]; };
            interface files {
                typedef sequence<octet> bytes;
                long stat([in] string path, [out] stat_t *st, [out] v2::st2 *all, [in] bytes b);
            };
        };
        module fs { interface again { void g([in] ::fs::stat_t s, [in] fs::v2::st2 t); }; };",
    );
    assert_eq!(m.consts, [("fs_N".to_string(), Prim::I32, 4)]);
    assert_eq!(m.structs[0].name, "fs_stat_t");
    assert_eq!((m.structs[0].size, m.structs[0].align), (8, 4));
    let names: Vec<_> = m.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["fs_files", "fs_again"]);
    let stat = &m.interfaces[0].ops[0];
    assert_eq!(stat.params[0].ty, Type::String);
    assert_eq!(stat.params[1].ty, Type::Struct(0));
    assert_eq!(stat.params[2].ty, Type::Array(Box::new(Type::Struct(0)), 4));
    assert_eq!(
        stat.params[3].ty,
        Type::Sequence(Box::new(Type::Prim(Prim::U8)))
    );
    // in: path 0..8, b 8..16 (request 16); out: st 16..24, all 24..56;
    // return 56..60; size 60.
    let l = &stat.layout;
    let offsets: Vec<_> = l
        .fields
        .iter()
        .map(|f| (f.slot, f.offset, f.size))
        .collect();
    assert_eq!(
        offsets,
        [
            (p(0), 0, 8),
            (p(3), 8, 8),
            (p(1), 16, 8),
            (p(2), 24, 32),
            (Slot::Ret, 56, 4)
        ]
    );
    assert_eq!((l.request_size, l.size), (16, 60));
    assert!(!l.inline());
}

// ---------------------------------------------------------------------
// Structs, arrays, constants: C's sizes and alignments.

fn struct_of(src: &str, name: &str) -> StructDef {
    let m = parse(src);
    m.structs
        .into_iter()
        .find(|s| s.name == name)
        .expect("declared")
}

#[test]
fn struct_sizes_follow_c() {
    let src = "struct a { char c; int i; short s; };      // 0, 4, 8 -> 12, align 4
               struct b { octet x; int64_t y; };          // 0, 8 -> 16, align 8
               struct c { short h[3]; char k; };          // 0, 6 -> 8, align 2
               struct d { a inner; char k; };             // 0, 12 -> 16, align 4
               struct e { char p; char q[3]; };           // 0, 1 -> 4, align 1
               struct f { char p; b inner; short t; };    // 0, 8, 24 -> 32, align 8
               struct g { long m[2][3]; };                // 24, align 4";
    for (name, size, align) in [
        ("a", 12, 4),
        ("b", 16, 8),
        ("c", 8, 2),
        ("d", 16, 4),
        ("e", 4, 1),
        ("f", 32, 8),
        ("g", 24, 4),
    ] {
        let s = struct_of(src, name);
        assert_eq!((s.size, s.align), (size, align), "struct {name}");
    }
    let g = struct_of(src, "g");
    assert_eq!(
        g.fields[0].1,
        Type::Array(Box::new(Type::Array(Box::new(Type::Prim(Prim::I32)), 3)), 2)
    );
    let d = struct_of(src, "d");
    assert_eq!(
        d.fields,
        [
            ("inner".to_string(), Type::Struct(0)),
            ("k".to_string(), Type::Prim(Prim::Char))
        ]
    );
}

#[test]
fn constants_and_array_sizes() {
    let m = parse(
        "const long N = 2 * (3 + 1);
         const unsigned long long BIG = 0xFFFFFFFFFFFFFFFF;
         const short M = -N << 2 | 1;
         const octet O = 017 % 10 ^ ~0 & 3;
         typedef octet buf[N];
         struct s { buf b; short t[M / -3]; };",
    );
    assert_eq!(
        m.consts,
        [
            ("N".to_string(), Prim::I32, 8),
            ("BIG".to_string(), Prim::U64, u64::MAX as i128),
            ("M".to_string(), Prim::I16, -31),
            ("O".to_string(), Prim::U8, 5 ^ 3),
        ]
    );
    // b: 8 bytes at 0; t: 10 shorts at 8 -> 28, align 2.
    assert_eq!((m.structs[0].size, m.structs[0].align), (28, 2));
}

#[test]
fn structs_and_arrays_as_parameters() {
    // struct t { octet a; int64_t b; }: 16 bytes, align 8.
    // void f([in] t v, [in] char c, [in] short arr[3], [out] hyper *h):
    // in: v 0..16, c 16..17, arr 18..24 (request 24); out: h 24..32;
    // size 32, align 8.
    let m = parse(
        "struct t { octet a; int64_t b; };
         interface i { void f([in] t v, [in] char c, [in] short arr[3], [out] hyper *h); };",
    );
    let l = &m.interfaces[0].ops[0].layout;
    let got: Vec<_> = l
        .fields
        .iter()
        .map(|f| (f.slot, f.offset, f.size, f.align))
        .collect();
    assert_eq!(
        got,
        [
            (p(0), 0, 16, 8),
            (p(1), 16, 1, 1),
            (p(2), 18, 6, 2),
            (p(3), 24, 8, 8)
        ]
    );
    assert_eq!((l.request_size, l.size, l.align), (24, 32, 8));
    // boolean g([in] boolean b, [in] char c): b 0, c 1 (request 2),
    // return 2; size rounded up to 4.
    let m = parse("interface i { boolean g([in] boolean b, [in] char c); };");
    let l = &m.interfaces[0].ops[0].layout;
    let got: Vec<_> = l
        .fields
        .iter()
        .map(|f| (f.slot, f.offset, f.size))
        .collect();
    assert_eq!(got, [(p(0), 0, 1), (p(1), 1, 1), (Slot::Ret, 2, 1)]);
    assert_eq!((l.request_size, l.size, l.align), (2, 4, 4));
}

#[test]
fn size_is_forms() {
    // An inout sequence with an [in] length, an [out] string written the
    // MIDL way, `size_is(*n)` for an out length.
    let m = parse(
        "interface i {
            void f([in] long n, [in, out, size_is(n)] octet *buf, [in, string] char *name,
                   [out] long *k, [out, size_is(*k)] short **got);
        };",
    );
    let op = &m.interfaces[0].ops[0];
    let tys: Vec<_> = op
        .params
        .iter()
        .map(|p| (p.ty.clone(), p.size_is, p.length_of))
        .collect();
    assert_eq!(
        tys,
        [
            (Type::Prim(Prim::I32), None, Some(1)),
            (
                Type::Sequence(Box::new(Type::Prim(Prim::U8))),
                Some(0),
                None
            ),
            (Type::String, None, None),
            (Type::Prim(Prim::I32), None, Some(4)),
            (
                Type::Sequence(Box::new(Type::Prim(Prim::I16))),
                Some(3),
                None
            ),
        ]
    );
    // in: name 0..8; inout: buf 8..16 (request 16); out: got 16..24.
    let got: Vec<_> = op
        .layout
        .fields
        .iter()
        .map(|f| (f.slot, f.offset))
        .collect();
    assert_eq!(got, [(p(2), 0), (p(1), 8), (p(4), 16)]);
    assert_eq!((op.layout.in_strings, op.layout.out_strings), (2, 2));
}

// ---------------------------------------------------------------------
// Rejections: each with its place and what was wrong.

#[test]
fn syntax_errors() {
    for (src, want) in [
        (
            "interface i {\n  void f([in, size_is(n; int *x);\n};",
            "2:24: expected `)` after size_is argument, found `;`",
        ),
        (
            "interface i { void f([in] int x) };",
            "1:34: expected `;` after operation `f`, found `}`",
        ),
        (
            "interface i { void f([in] int x);",
            "1:34: expected `}` to close interface `i`, found end of input",
        ),
        (
            "interface i { void f([in] int x, ); };",
            "1:34: expected a type, found `)`",
        ),
        (
            "interface { };",
            "1:11: expected an interface name, found `{`",
        ),
        (
            "interface i { void f([in int x); };",
            "1:26: expected `,` or `]` in a parameter's attributes, found `int`",
        ),
        (
            "interface i { void f([in] int in); };",
            "1:31: expected a parameter name, found keyword `in`",
        ),
        (
            "interface i { void f([in] int x) };\n",
            "1:34: expected `;` after operation `f`, found `}`",
        ),
        (
            "struct s { long a; }",
            "1:21: expected `;` after the `}` of struct `s`, found end of input",
        ),
        (
            "long x;",
            "1:1: expected a definition (`module`, `interface`, `struct`, `typedef` or `const`), found `long`",
        ),
        (
            "int f(void);",
            "1:5: an operation must be declared inside an interface",
        ),
        (
            "interface i { void f([in] int x, [in, in] int y); };",
            "1:39: attribute `in` given twice",
        ),
        (
            "interface i { void f([in] in int x); };",
            "1:27: direction given twice: in the attributes and as `in`",
        ),
        (
            "interface i { void f([inout] int x); };",
            "1:23: `inout` is CORBA syntax: write `[in, out]`, or `inout` before the type",
        ),
        (
            "interface i { module m { }; };",
            "1:15: a module cannot be declared inside an interface",
        ),
        (
            "interface i { interface j { }; };",
            "1:15: an interface cannot be declared inside an interface",
        ),
        (
            "const long K = 1 +;",
            "1:19: expected an integer, a constant's name or `(`, found `;`",
        ),
        (
            "typedef sequence<long t;",
            "1:23: expected `>` to close `sequence<`, found `t`",
        ),
        ("const long K = 1 @ 2;", "1:18: unexpected character `@`"),
        ("/* open", "1:1: `/*` comment is not closed"),
        (
            "const long K = 99999999999999999999;",
            "1:16: integer literal `99999999999999999999` does not fit 64 bits",
        ),
    ] {
        assert_eq!(reject(src), want, "{src}");
    }
}

#[test]
fn unsupported_constructs_are_named() {
    for (src, want) in [
        (
            "interface i {\n    union u switch (long) { case 1: long a; };\n};",
            "2:5: `union` is not supported (unions are outside the IDL4 subset)",
        ),
        (
            "union u switch (long) { case 1: long a; };",
            "1:1: `union` is not supported (unions are outside the IDL4 subset)",
        ),
        (
            "interface i { void f([in] float x); };",
            "1:27: `float` is not supported (the IDL4 subset has integer types only)",
        ),
        (
            "interface i { double f(); };",
            "1:15: `double` is not supported (the IDL4 subset has integer types only)",
        ),
        (
            "interface i { void f([in] long double x); };",
            "1:27: `long double` is not supported (the IDL4 subset has integer types only)",
        ),
        (
            "interface i { void f([in] any x); };",
            "1:27: `any` is not supported (every value's type is known statically)",
        ),
        (
            "interface i { oneway void f(); };",
            "1:15: `oneway` is not supported (every call is synchronous and gets a reply)",
        ),
        (
            "interface i { attribute long x; };",
            "1:15: `attribute` is not supported (attributes are outside the IDL4 subset: declare get and set operations)",
        ),
        (
            "interface i { readonly attribute long x; };",
            "1:15: `readonly` is not supported (attributes are outside the IDL4 subset: declare a get operation)",
        ),
        (
            "exception e { long code; };",
            "1:1: `exception` is not supported (exceptions are outside the IDL4 subset: return a status)",
        ),
        (
            "interface i { void f() raises (e); };",
            "1:24: `raises` is not supported (exceptions are outside the IDL4 subset: return a status)",
        ),
        (
            "enum color { red, green };",
            "1:1: `enum` is not supported (use an integer type and constants)",
        ),
        (
            "interface a { }; interface b : a { };",
            "1:30: interface inheritance is not supported (declare every operation in the interface itself)",
        ),
        (
            "interface a;",
            "1:12: a forward declaration is not supported (declare the interface with its body)",
        ),
        (
            "struct s;",
            "1:9: a forward declaration is not supported (declare the struct with its fields)",
        ),
        (
            "interface i { void f([in] wstring s); };",
            "1:27: `wstring` is not supported (use `string` (UTF-8))",
        ),
        (
            "interface i { void f([in] string<8> s); };",
            "1:33: a bounded string (`string<N>`) is not supported (strings are bounded by the channel's per-string limit)",
        ),
        (
            "interface i { void f([in] sequence<long, 8> s); };",
            "1:40: a bounded sequence (`sequence<T, N>`) is not supported (sequences are bounded by the channel's per-string limit)",
        ),
        (
            "#include \"x.idl\"",
            "1:1: a preprocessor directive (`#`) is not supported (an IDL file here is self-contained: no #include, #define or #pragma)",
        ),
        (
            "[uuid(1)] interface i { };",
            "1:1: an attribute list outside an interface is not supported (attributes belong to the parameters of operations)",
        ),
        (
            "interface i { void f([in, length_is(n)] long *x); };",
            "1:27: the `length_is` attribute is not supported (a sequence's length is its size_is parameter)",
        ),
        (
            "interface i { void f([in, unique] long *x); };",
            "1:27: the `unique` attribute is not supported (pointers are always to the value itself)",
        ),
        (
            "interface i { void f([in] struct s x); };",
            "1:27: a struct defined or named inside another declaration is not supported (declare `struct S { ... };` on its own and use its name `S`)",
        ),
        (
            "interface i { long *f(); };",
            "1:20: a pointer return value is not supported (return a value, or use an [out] parameter)",
        ),
        (
            "interface j { }; interface i { void f([in] j x); };",
            "1:44: interface `j` as a type is not supported (object references are outside the IDL4 subset)",
        ),
        (
            "typedef long *p;",
            "1:15: a pointer typedef (`*p`) is not supported (pointers are written in parameter declarations only)",
        ),
        (
            "const long K = 1.5;",
            "1:16: a floating-point literal is not supported (the IDL's numbers are integers)",
        ),
        (
            "const long K = 'a';",
            "1:16: a character literal is not supported (constants are integers: write the character's code)",
        ),
    ] {
        assert_eq!(reject(src), want, "{src}");
    }
}

#[test]
fn name_errors() {
    for (src, want) in [
        (
            "interface i { void f([in] handle_t h); };",
            "1:27: undeclared type `handle_t`",
        ),
        (
            "interface i { void f([in] m::t h); };",
            "1:27: undeclared type `m::t`",
        ),
        (
            "struct s { long a; };\nstruct s { long b; };",
            "2:8: `s` is already declared at 1:8 (as a struct)",
        ),
        (
            "const long s = 1; typedef long s;",
            "1:32: `s` is already declared at 1:12 (as a constant)",
        ),
        (
            "interface i { void f(); long f(); };",
            "1:30: interface `i` already has an operation `f` (at 1:20)",
        ),
        (
            "interface i { void f([in] long a, [out] long *a); };",
            "1:47: `f` already has a parameter `a` (at 1:32)",
        ),
        (
            "struct s { long a; short a; };",
            "1:26: struct `s` already has a field `a` (at 1:17)",
        ),
        (
            "struct s { long a; s next; };",
            "1:20: struct `s` cannot contain itself",
        ),
        (
            "const long K = 1; interface i { void f([in] K x); };",
            "1:45: `K` is a constant, not a type",
        ),
        (
            "typedef long t; const long K = t;",
            "1:32: `t` is a typedef, not a constant",
        ),
        ("const long K = L;", "1:16: undeclared constant `L`"),
        (
            "interface i { void f([in] long type); };",
            "1:32: `type` is a keyword of Rust or C, which the generated code is written in; choose another name",
        ),
        (
            "interface i { void f([in] long _); };",
            "1:32: `_` cannot name anything in the generated code; choose another name",
        ),
        (
            "interface i { void match(); };",
            "1:20: `match` is a keyword of Rust or C, which the generated code is written in; choose another name",
        ),
    ] {
        assert_eq!(reject(src), want, "{src}");
    }
}

#[test]
fn type_errors() {
    for (src, want) in [
        (
            "struct s { boolean b; };",
            "1:20: field `b` of struct `s`: boolean is only allowed as a scalar parameter or return value; use octet (a struct's fields are plain data)",
        ),
        (
            "struct s { string name; };",
            "1:19: field `name` of struct `s`: strings and sequences are only allowed as parameters of their own (nested indirect values are not supported) (a struct's fields are plain data)",
        ),
        (
            "struct s { sequence<long> v; };",
            "1:27: field `v` of struct `s`: strings and sequences are only allowed as parameters of their own (nested indirect values are not supported) (a struct's fields are plain data)",
        ),
        (
            "struct s { long *p; };",
            "1:18: field `p` of struct `s` is a pointer: a struct's fields are plain data",
        ),
        ("struct s { };", "1:8: struct `s` has no fields"),
        (
            "typedef sequence<boolean> bs;",
            "1:18: a sequence's elements must be plain data: boolean is only allowed as a scalar parameter or return value; use octet",
        ),
        (
            "typedef sequence<string> ss;",
            "1:18: a sequence's elements must be plain data: strings and sequences are only allowed as parameters of their own (nested indirect values are not supported)",
        ),
        (
            "interface i { void f([in] boolean b[4]); };",
            "1:27: parameter `b`: boolean is only allowed as a scalar parameter or return value; use octet",
        ),
        (
            "interface i { void f([in, size_is(n)] boolean *b, [in] long n); };",
            "1:39: the elements of sequence `b` must be plain data: boolean is only allowed as a scalar parameter or return value; use octet",
        ),
        (
            "interface i { string f(); };",
            "1:15: `f` cannot return a string: use an [out] parameter",
        ),
        (
            "typedef long a4[4]; interface i { a4 f(); };",
            "1:35: `f` cannot return an array (C cannot): use an [out] parameter",
        ),
        (
            "interface i { void f([in] void x); };",
            "1:27: parameter `x` cannot be `void`",
        ),
        (
            "typedef long a[0];",
            "1:16: array `a` has size 0: an array size is 1 to 4294967295",
        ),
        (
            "typedef octet big[65536][65536];",
            "1:19: array `big` is larger than 4 GiB",
        ),
        (
            "const octet K = 256;",
            "1:17: constant `K` = 256 does not fit its type u8 (0 to 255)",
        ),
        (
            "const short K = -32769;",
            "1:17: constant `K` = -32769 does not fit its type i16 (-32768 to 32767)",
        ),
        (
            "const boolean K = 1;",
            "1:7: constant `K` must have an integer type",
        ),
        (
            "const long K = 1 / (2 - 2);",
            "1:18: division by zero in `/`",
        ),
        (
            "const long K = 1 << 64;",
            "1:18: shift by 64: a shift count is 0 to 63",
        ),
        (
            "const uint64_t K = 0xFFFFFFFFFFFFFFFF + 1;",
            "1:39: constant expression overflows 64 bits",
        ),
    ] {
        assert_eq!(reject(src), want, "{src}");
    }
}

#[test]
fn direction_and_size_is_errors() {
    for (src, want) in [
        (
            "interface i { void f(long x); };",
            "1:27: parameter `x` of `f` has no direction: write [in], [out] or [in, out] (or in, out, inout)",
        ),
        (
            "interface i { void f([in] long *p); };",
            "1:33: [in] parameter `p` of `f` is a pointer without size_is: pass it by value, or give size_is(n) to send a sequence",
        ),
        (
            "interface i { void f([out] long **p); };",
            "1:35: parameter `p` has too many `*`: an out or inout value is `T *p`",
        ),
        (
            "interface i { void f([out] long v); };",
            "1:33: [out] parameter `v` of `f` is passed by value, so nothing could come back through it: declare it `T *v`, or write `out T v` (CORBA)",
        ),
        (
            "interface i { void f([in, out] short v); };",
            "1:38: [in, out] parameter `v` of `f` is passed by value, so nothing could come back through it: declare it `T *v`, or write `inout T v` (CORBA)",
        ),
        (
            "interface i { void f([in, size_is(n)] long *d); };",
            "1:35: size_is(n): `f` has no parameter `n`",
        ),
        (
            "interface i { void f([in, size_is(d)] long *d); };",
            "1:35: size_is(d): a sequence cannot be its own length",
        ),
        (
            "interface i {\n  void pfs_write([out] long *n,\n    [in, size_is(n)] long *d);\n};",
            "3:18: size_is(n): `n` is not an [in] integer parameter of pfs_write",
        ),
        (
            "interface i { void f([in] boolean n, [in, size_is(n)] long *d); };",
            "1:51: size_is(n): `n` is not an [in] integer parameter of f",
        ),
        (
            "interface i { void f([in] char n, [in, size_is(n)] long *d); };",
            "1:48: size_is(n): `n` is not an [in] integer parameter of f",
        ),
        (
            "interface i { void f([in] long n, [out, size_is(n)] long **d); };",
            "1:49: size_is(n): `n` is not an [out] integer parameter of f",
        ),
        (
            "interface i { void f([out] long *n, [in, out, size_is(n)] long *d); };",
            "1:55: size_is(n): `n` is not an [in] or [in, out] integer parameter of f",
        ),
        (
            "interface i { void f([in] string n, [in, size_is(n)] long *d); };",
            "1:50: size_is(n): `n` is itself a string or sequence; a length is an integer parameter",
        ),
        (
            "interface i { void f([in] long n, [in, size_is(n)] long *a, [in, size_is(n)] long *b); };",
            "1:74: size_is(n): `n` is already the length of `a`",
        ),
        (
            "interface i { void f([in] long n, [in, size_is(n)] long d); };",
            "1:48: size_is on `d` needs a pointer: declare it `T *d`",
        ),
        (
            "interface i { void f([out] long *n, [out, size_is(n)] long ***d); };",
            "1:51: size_is on `d` needs a pointer: declare it `T **d`",
        ),
        (
            "interface i { void f([in, string] long *s); };",
            "1:27: [string] parameter `s` must be declared `char *s`",
        ),
        (
            "interface i { void f([in] long n, [in, string, size_is(n)] char *s); };",
            "1:40: parameter `s`: [string] and size_is together: a string's length is its own",
        ),
    ] {
        assert_eq!(reject(src), want, "{src}");
    }
}

#[test]
fn errors_render_the_line_and_a_caret() {
    let src = "interface i {\n\tvoid f([in] long *p);\n};\n";
    let e = idl::parse(src).unwrap_err();
    assert_eq!(e.pos(), Pos { line: 2, col: 20 });
    assert_eq!(
        e.render(src),
        "2:20: [in] parameter `p` of `f` is a pointer without size_is: pass it by value, or give size_is(n) to send a sequence\n\
         \tvoid f([in] long *p);\n\
         \t                  ^\n"
    );
    // A leading byte-order mark takes no column, and the caret agrees.
    let src = "\u{feff}interface i { void f(@); };\n";
    let e = idl::parse(src).unwrap_err();
    assert_eq!(e.pos(), Pos { line: 1, col: 22 });
    assert_eq!(
        e.render(src),
        "1:22: unexpected character `@`\ninterface i { void f(@); };\n                     ^\n"
    );
    assert_eq!(
        without_pos(parse("\u{feff}interface i { void f(); };")),
        without_pos(parse("interface i { void f(); };"))
    );
}

#[test]
fn nesting_is_limited_not_a_stack_overflow() {
    let deep = format!("module a {{ {} }};", "module b { ".repeat(100_000));
    assert!(reject(&deep).ends_with("nested more than 64 levels deep"));
    let deep = format!("const long K = {}1;", "~".repeat(100_000));
    assert!(reject(&deep).ends_with("nested more than 64 levels deep"));
    // A flat left-associative chain is no nesting, however long.
    let flat = parse(&format!("const long K = 1{};", " + 1".repeat(100_000)));
    assert_eq!(flat.consts[0].2, 100_001);
    let flat = parse(&format!("const long K = 1{};", " + 1".repeat(64)));
    assert_eq!(flat.consts[0].2, 65);
    let deep = format!(
        "const long K = {}1{};",
        "1 + (".repeat(100),
        ")".repeat(100)
    );
    assert!(reject(&deep).ends_with("nested more than 64 levels deep"));
    // Typedef chains deepen a type without nesting the text.
    let mut chain = "typedef octet t0[1];\n".to_string();
    for k in 1..100 {
        chain.push_str(&format!("typedef t{} t{k}[1];\n", k - 1));
    }
    assert_eq!(
        reject(&chain),
        "33:13: type nested more than 32 levels deep"
    );
}

// ---------------------------------------------------------------------
// Limits.

fn strings_op(n: usize) -> String {
    let ps: Vec<String> = (0..n).map(|k| format!("[in] string s{k}")).collect();
    format!("interface i {{\n  void many({});\n}};", ps.join(", "))
}

#[test]
fn string_limit() {
    assert!(idl::parse(&strings_op(31)).is_ok());
    let e = idl::parse(&strings_op(32)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "2:8: `many` has 32 strings and sequences in its request, more than the limit of 31 (Limits::max_strings)"
    );
    let raised = Limits {
        max_strings: 32,
        ..Limits::default()
    };
    let m = idl::parse_with(&strings_op(32), &raised).unwrap();
    let l = &m.interfaces[0].ops[0].layout;
    assert_eq!((l.in_strings, l.out_strings, l.size), (32, 0, 256));
    // Out strings count in the reply; inout ones in both.
    let src = format!(
        "interface i {{ void f({}); }};",
        (0..32)
            .map(|k| format!("[in, out] string *s{k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(reject(&src).ends_with("`f` has 32 strings and sequences in its request, more than the limit of 31 (Limits::max_strings)"));
    let src = format!(
        "interface i {{ void f({}); }};",
        (0..32)
            .map(|k| format!("out string s{k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert_eq!(
        reject(&src),
        "1:20: `f` has 32 strings and sequences in its reply, more than the limit of 31 (Limits::max_strings)"
    );
}

#[test]
fn record_limit() {
    let src = "interface i { void f([in] octet big[4093], [out] long *r); };";
    // big 0..4093, r 4096..4100: over 4096.
    assert_eq!(
        reject(src),
        "1:20: the message record of `f` is 4100 bytes, more than the limit of 4096 (Limits::max_record)"
    );
    let m = idl::parse_with(
        src,
        &Limits {
            max_record: 4100,
            ..Limits::default()
        },
    )
    .unwrap();
    assert_eq!(m.interfaces[0].ops[0].layout.size, 4100);
    assert!(idl::parse("interface i { void f([in] octet big[4092], [out] long *r); };").is_ok());
}

#[test]
fn large_interfaces() {
    // 1,000 operations of 40 parameters: names are checked with hash maps,
    // not by pairs.
    let params: Vec<String> = (0..40).map(|k| format!("[in] octet p{k}")).collect();
    let mut src = "interface big {\n".to_string();
    for o in 0..1000 {
        src.push_str(&format!("  void op{o}({});\n", params.join(", ")));
    }
    src.push_str("};\n");
    let m = parse(&src);
    assert_eq!(m.interfaces[0].ops.len(), 1000);
    assert_eq!(m.interfaces[0].ops[999].key, 999);
    assert_eq!(m.interfaces[0].ops[0].layout.request_size, 40);
}

/// An out value is reached through a pointer in MIDL's spelling, by the
/// keyword alone in CORBA's; strings, sequences and arrays need no pointer
/// in either.
#[test]
fn out_values_by_pointer_or_by_corba_keyword() {
    for src in [
        "interface i { void f([out] long *v, [in, out] short *w); };",
        "interface i { void f(out long v, inout short w); };",
        "interface i { void f([out] long a[4], [out] string u, [in, out] string t); };",
        "interface i { void f([in, out] sequence<long> s, [out] sequence<octet> o); };",
    ] {
        if let Err(e) = idl::parse(src) {
            panic!("{src}: {}", e.render(src));
        }
    }
}

// ---------------------------------------------------------------------
// Names that clash: a typed error naming both declarations and where.

/// The clash `src` is rejected with: (later, its position, earlier, its
/// position).
fn clash(src: &str) -> (String, Pos, String, Pos) {
    let e = idl::parse(src).expect_err(src);
    match e.kind() {
        idl::error::ErrorKind::Clash {
            first,
            first_pos,
            second,
            ..
        } => (second.clone(), e.pos(), first.clone(), *first_pos),
        k => panic!("{src}: not a clash: {k}"),
    }
}

fn at(line: u32, col: u32) -> Pos {
    Pos { line, col }
}

#[test]
fn names_differing_only_in_case_clash() {
    let (b, bp, a, ap) = clash("interface I {\n long a([in] long x);\n long A([in] long x);\n};");
    assert_eq!(
        (b.as_str(), bp),
        ("operation `A` of interface `I`", at(3, 7))
    );
    assert_eq!((a.as_str(), ap), ("operation `a`", at(2, 7)));
    let (b, bp, a, ap) = clash("struct s { long x; };\nstruct S { long x; };");
    assert_eq!((b.as_str(), bp), ("struct `S`", at(2, 8)));
    assert_eq!((a.as_str(), ap), ("struct `s`", at(1, 8)));
    let (b, _, a, _) = clash("interface Foo { };\ninterface foo { };");
    assert_eq!(
        (b.as_str(), a.as_str()),
        ("interface `foo`", "interface `Foo`")
    );
    let (b, _, a, _) = clash("interface I { void f([in] long x, [in] long X); };");
    assert_eq!(
        (b.as_str(), a.as_str()),
        ("parameter `X` of `f`", "parameter `x`")
    );
    let (b, _, a, _) = clash("struct P { long x; long X; };");
    assert_eq!(
        (b.as_str(), a.as_str()),
        ("field `X` of struct `P`", "field `x`")
    );
    let e = reject("module m { struct s { long x; }; };\nstruct M_S { long x; };");
    assert_eq!(
        e,
        "2:8: struct `M_S` clashes with struct `m_s` at 1:19: names that differ only in case are one name in IDL"
    );
}

#[test]
fn names_the_generated_code_would_merge_clash() {
    // Rust: FOO_BAR and FooBarMsg twice.
    let src = "interface I {\n long fooBar([in] long x);\n long foo_bar([in] long x);\n};";
    let (b, bp, a, ap) = clash(src);
    assert_eq!(
        (b.as_str(), bp),
        ("operation `foo_bar` of interface `I`", at(3, 7))
    );
    assert_eq!(
        (a.as_str(), ap),
        ("operation `fooBar` of interface `I`", at(2, 7))
    );
    assert!(reject(src).ends_with("the generated Rust names both `FOO_BAR`"));
    // Rust: a module and a struct.
    let (b, _, a, _) = clash("struct file_server { long x; };\ninterface FileServer { };");
    assert_eq!(
        (b.as_str(), a.as_str()),
        ("interface `FileServer`", "struct `file_server`")
    );
    // C: a struct and a client stub; an operation across interfaces.
    let (b, _, a, _) = clash("interface I { long f([in] long x); };\nstruct I_f { long x; };");
    assert_eq!(
        (b.as_str(), a.as_str()),
        ("struct `I_f`", "operation `f` of interface `I`")
    );
    let e =
        reject("interface I { long a_b([in] long x); };\ninterface I_a { long b([in] long x); };");
    assert!(e.ends_with("the generated C names both `I_a_b`"), "{e}");
    // C: a constant and a key macro; a parameter and a type or a macro.
    let e = reject("interface I { long f([in] long x); };\nconst long I_F_KEY = 1;");
    assert!(
        e.starts_with("2:12: constant `I_F_KEY` clashes with operation `f`"),
        "{e}"
    );
    let e = reject("interface I { long f([in] long I_F_KEY); };");
    assert!(e.contains("parameter `I_F_KEY` of `f`"), "{e}");
    let (b, _, a, _) = clash("struct T { long v; };\ninterface I { long f([in] T T); };");
    assert_eq!(
        (b.as_str(), a.as_str()),
        ("parameter `T` of `f`", "struct `T`")
    );
}

/// A C program names a struct's fields and the entries of an
/// `<iface>_impl` table; the header #defines key macros and constants. A
/// member named as one of them would be replaced by the preprocessor
/// (`p.I_F_KEY` is `p.0`; an entry `I_F_KEY` of a later interface's table
/// breaks the header itself), so it is a clash. A parameter may share a
/// constant's name (tests/c_interop.rs `accepted_names_compile_as_c`).
#[test]
fn members_named_as_macros_of_the_c_header_clash() {
    let why = "the generated C header #defines";
    for (src, second, sp, first, fp) in [
        (
            "interface I { long f([in] long x); };\nstruct P { long x; long I_F_KEY; };",
            "field `I_F_KEY` of struct `P`",
            at(2, 25),
            "operation `f` of interface `I`",
            at(1, 20),
        ),
        (
            "struct P { long I_F_SIZE; };\ninterface I { long f([in] P p); };",
            "operation `f` of interface `I`",
            at(2, 20),
            "field `I_F_SIZE` of struct `P`",
            at(1, 17),
        ),
        (
            "const long N = 3;\nstruct P { long x; long N; };",
            "field `N` of struct `P`",
            at(2, 25),
            "constant `N`",
            at(1, 12),
        ),
        (
            "interface I { long f([in] long x); };\ninterface J { long I_F_KEY([in] long x); };",
            "operation `I_F_KEY` of interface `J`",
            at(2, 20),
            "operation `f` of interface `I`",
            at(1, 20),
        ),
        (
            "interface I { long g([in] long x); };\nconst long g = 1;",
            "constant `g`",
            at(2, 12),
            "operation `g` of interface `I`",
            at(1, 20),
        ),
    ] {
        assert_eq!(clash(src), (second.into(), sp, first.into(), fp), "{src}");
        assert!(reject(src).contains(why), "{src}: {}", reject(src));
    }
    // Not members: a parameter named as a constant, a field named as a
    // client stub (a function, not a macro).
    parse("const long x = 5;\ninterface I { long f([in] long x); };");
    parse("interface I { long f([in] long x); };\nstruct P { long I_f; };");
}

/// The generated Rust writes a keyword that a case conversion made as a
/// raw identifier (an interface `Fn` is the module `r#fn`: tests/idl/
/// keywords.idl, compiled and called in tests/roundtrip.rs); a path
/// keyword cannot be raw (`r#self` is an error), so a name Rust would
/// spell as one is reserved, at its place, naming what it would be.
#[test]
fn names_rust_would_spell_as_path_keywords_are_reserved() {
    parse("interface Fn { };\ninterface Mod { };\ninterface Gen { };\nstruct Impl { long Type; };");
    for (src, name, pos, why) in [
        (
            "interface SELF { };",
            "SELF",
            at(1, 11),
            "interface `SELF` would be the Rust module `self`",
        ),
        (
            "struct A { long x; };\ninterface Super { };",
            "Super",
            at(2, 11),
            "interface `Super` would be the Rust module `super`",
        ),
        (
            "interface Crate { };",
            "Crate",
            at(1, 11),
            "interface `Crate` would be the Rust module `crate`",
        ),
        (
            "struct self_ { long x; };",
            "self_",
            at(1, 8),
            "struct `self_` would be the Rust type `Self`",
        ),
        (
            "struct _Self { long x; };",
            "_Self",
            at(1, 8),
            "struct `_Self` would be the Rust type `Self`",
        ),
    ] {
        let e = idl::parse(src).expect_err(src);
        assert_eq!(e.pos(), pos, "{src}: {e}");
        assert!(
            matches!(e.kind(), idl::error::ErrorKind::Reserved { name: n, why: w } if n == name && w.starts_with(why)),
            "{src}: {e}"
        );
    }
    assert_eq!(
        reject("interface SELF { };"),
        "1:11: `SELF` is reserved: interface `SELF` would be the Rust module `self`, a keyword that cannot be a raw identifier (`r#self` is an error); choose another name"
    );
}

#[test]
fn names_of_the_run_time_and_c_headers_are_reserved() {
    for (src, name) in [
        ("const long idl_client = 3;", "idl_client"),
        ("struct idl_channel { long x; };", "idl_channel"),
        ("const long IDL_OK = 1;", "IDL_OK"),
        ("interface I { void f([in] long INT32_MAX); };", "INT32_MAX"),
        ("struct size_t { long x; };", "size_t"),
        ("struct memset { long x; };", "memset"),
        ("interface I { void f([in] long SIZE_MAX); };", "SIZE_MAX"),
        ("interface idl { };", "idl"),
        // <stdatomic.h>, which idl_rt.h includes: each broke the
        // generated C (a redefined type, a field the preprocessor
        // replaces).
        ("struct atomic_int { long x; };", "atomic_int"),
        (
            "struct S { long ATOMIC_INT_LOCK_FREE; };",
            "ATOMIC_INT_LOCK_FREE",
        ),
        (
            "const long memory_order_relaxed = 0;",
            "memory_order_relaxed",
        ),
        (
            "interface I { void kill_dependency(); };",
            "kill_dependency",
        ),
    ] {
        let e = idl::parse(src).expect_err(src);
        assert!(
            matches!(e.kind(), idl::error::ErrorKind::Reserved { name: n, .. } if n == name),
            "{src}: {e}"
        );
    }
}

#[test]
fn typedef_arrays_are_arrays_as_out_parameters() {
    let m = parse("typedef long LA[4];\ninterface I { void b([out] LA la, [in, out] LA lb); };");
    assert_eq!(
        m.interfaces[0].ops[0].params[0].ty,
        Type::Array(Box::new(Type::Prim(Prim::I32)), 4)
    );
    // A scalar typedef still needs its pointer.
    let e = reject("typedef long L;\ninterface I { void b([out] L l); };");
    assert!(e.contains("passed by value"), "{e}");
}
