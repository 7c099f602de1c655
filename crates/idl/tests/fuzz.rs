//! Parser fuzzing: no input makes the front end panic, and every error
//! points at a place inside the source.
//!
//! Three kinds of input: random bytes; random sequences of the language's
//! tokens (which reach far deeper into the parser and the checks than
//! bytes do); and valid sources with tokens deleted, inserted or swapped.
//! Each property runs 500 cases unless `PROPTEST_CASES` says otherwise.

use idl::model::Slot;
use idl::{Dir, Idl, Limits, Prim, Type};
use proptest::prelude::*;

/// Valid sources to mutate.
const VALID: &[&str] = &[
    include_str!("../idl/pfs.idl"),
    "module fs {
        const long N = 2 * (3 + 1) << 1;
        struct stat_t { long size; octet kind[N]; unsigned long long when; };
        typedef sequence<stat_t> stats;
        interface files {
            typedef string name_t;
            long stat(in name_t path, out stat_t st, inout hyper cookie);
            void list([in] long n, [in, size_is(n)] char *prefix, [out] stats *all);
            boolean ok([in] boolean flag, [in, string] char *why);
        };
    };",
    "module fs { struct stat_t { long a; }; };
    interface pfs {
        long pfs_open(in long client, in long fobj, in long flags, in long mode, out long handle);
        void put(in sequence<octet> blob, inout string name, out sequence<int32_t> ids);
        void get([out] uint16_t *k, [out, size_is(*k)] short **got, [in] ::fs::stat_t s);
    };",
];

/// The language's tokens, and some of what it rejects.
const TOKENS: &[&str] = &[
    "module",
    "interface",
    "struct",
    "typedef",
    "const",
    "in",
    "out",
    "inout",
    "void",
    "boolean",
    "char",
    "octet",
    "short",
    "int",
    "long",
    "hyper",
    "unsigned",
    "signed",
    "string",
    "sequence",
    "int8_t",
    "uint32_t",
    "uint64_t",
    "size_is",
    "union",
    "oneway",
    "attribute",
    "float",
    "any",
    "raises",
    "enum",
    "x",
    "n",
    "data",
    "pfs",
    "S",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "<",
    ">",
    ";",
    ",",
    ":",
    "::",
    "*",
    "**",
    "=",
    "+",
    "-",
    "/",
    "%",
    "~",
    "&",
    "|",
    "^",
    "0",
    "1",
    "4",
    "0x10",
    "017",
    "99999999999999999999",
    "//",
    "/*",
    "*/",
    "#",
    "\"",
    "'",
    "\n",
    "é",
    "1.5",
];

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500)
}

/// Parses `src`; on an error, checks that its position is inside the
/// source (a line that exists, a column at most one past its end).
fn check(src: &str) -> Result<(), TestCaseError> {
    let res = idl::parse(src);
    if let Ok(m) = &res {
        check_model(m, &Limits::default())?;
    }
    if let Err(e) = res {
        let pos = e.pos();
        let lines: Vec<&str> = src.split('\n').collect();
        prop_assert!(
            pos.line >= 1 && pos.line as usize <= lines.len(),
            "{e} outside {} lines",
            lines.len()
        );
        let width = lines[pos.line as usize - 1].chars().count() as u32;
        prop_assert!(
            pos.col >= 1 && pos.col <= width + 1,
            "{e}: line {} has {width} characters",
            pos.line
        );
        let head = format!("{pos}: ");
        prop_assert!(e.to_string().starts_with(&head), "{e}");
        let rendered = e.render(src);
        prop_assert!(rendered.ends_with("^\n"), "{rendered}");
    }
    Ok(())
}

/// Splits a valid source into tokens: words, numbers, `::` and single
/// punctuation marks (white space and comments dropped).
fn split(src: &str) -> Vec<String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if (c == ':' && next == Some(':')) || (c == '<' && next == Some('<')) {
            out.push(format!("{c}{c}"));
            i += 2;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

#[derive(Clone, Debug)]
enum Edit {
    Delete(usize),
    Insert(usize, usize),
    Swap(usize, usize),
    Duplicate(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(i, t)| Edit::Insert(i, t)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Edit::Swap(i, j)),
        (any::<usize>(), 1usize..20).prop_map(|(i, n)| Edit::Duplicate(i, n)),
    ]
}

fn apply(toks: &mut Vec<String>, e: &Edit) {
    if toks.is_empty() {
        return;
    }
    let n = toks.len();
    match *e {
        Edit::Delete(i) => {
            toks.remove(i % n);
        }
        Edit::Insert(i, t) => toks.insert(i % (n + 1), TOKENS[t].to_string()),
        Edit::Swap(i, j) => toks.swap(i % n, j % n),
        Edit::Duplicate(i, k) => {
            let i = i % n;
            let end = (i + k).min(n);
            let copy: Vec<String> = toks[i..end].to_vec();
            for (k, t) in copy.into_iter().enumerate() {
                toks.insert(end + k, t);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn random_printable_text(src in "[ -~\n\t]{0,300}") {
        check(&src)?;
    }

    #[test]
    fn token_soup(picks in proptest::collection::vec((0..TOKENS.len(), 0..3u8), 0..120)) {
        let mut src = String::new();
        for (t, sep) in picks {
            src.push_str(TOKENS[t]);
            src.push_str([" ", "\n", ""][usize::from(sep)]);
        }
        check(&src)?;
    }

    #[test]
    fn mutated_valid_sources(which in 0..VALID.len(), edits in proptest::collection::vec(edit(), 1..6), newline in any::<bool>()) {
        let mut toks = split(VALID[which]);
        for e in &edits {
            apply(&mut toks, e);
        }
        let src = toks.join(if newline { "\n" } else { " " });
        check(&src)?;
    }
}

#[test]
fn the_valid_sources_are_valid() {
    for src in VALID {
        if let Err(e) = idl::parse(src) {
            panic!("{}", e.render(src));
        }
        // Re-joined tokens are still the same program.
        let joined = split(src).join(" ");
        if let Err(e) = idl::parse(&joined) {
            panic!("{}", e.render(&joined));
        }
    }
}

fn round_up(x: u32, a: u32) -> u32 {
    x.div_ceil(a) * a
}

/// The layout rules (model::Layout, docs/idl.md) as invariants of any
/// accepted model.
fn check_model(m: &Idl, limits: &Limits) -> Result<(), TestCaseError> {
    for i in &m.interfaces {
        for (k, op) in i.ops.iter().enumerate() {
            prop_assert_eq!(usize::from(op.key), k);
            let l = &op.layout;
            // size_is and length_of point at each other.
            for (j, p) in op.params.iter().enumerate() {
                if let Some(n) = p.size_is {
                    prop_assert!(matches!(p.ty, Type::Sequence(_)));
                    prop_assert_eq!(op.params[n].length_of, Some(j));
                }
                if let Some(s) = p.length_of {
                    prop_assert_eq!(op.params[s].size_is, Some(j));
                    prop_assert!(matches!(op.params[j].ty, Type::Prim(_)));
                }
            }
            // Sorted in, inout, out, then the return value; length
            // parameters have no field.
            let mut want = Vec::new();
            for dir in [Dir::In, Dir::InOut, Dir::Out] {
                for (j, p) in op.params.iter().enumerate() {
                    if p.dir == dir && p.length_of.is_none() {
                        want.push(Slot::Param(j));
                    }
                }
            }
            if op.ret.is_some() {
                want.push(Slot::Ret);
            }
            let slots: Vec<Slot> = l.fields.iter().map(|f| f.slot).collect();
            prop_assert_eq!(slots, want);
            // Each field at its natural alignment, right after the one
            // before it.
            let (mut end, mut align, mut request) = (0u32, 4u32, 0u32);
            for f in &l.fields {
                prop_assert_eq!(f.offset, round_up(end, f.align));
                let ty = match f.slot {
                    Slot::Param(j) => &op.params[j].ty,
                    Slot::Ret => op.ret.as_ref().expect("a return field"),
                };
                prop_assert_eq!(f.desc, ty.is_indirect());
                if f.desc {
                    prop_assert_eq!((f.size, f.align), (8, 4));
                }
                if let Type::Prim(p) = ty {
                    prop_assert_eq!((f.size, f.align), (p.size(), p.size()));
                }
                end = f.offset + f.size;
                align = align.max(f.align);
                if matches!(f.slot, Slot::Param(j) if op.params[j].dir != Dir::Out) {
                    request = end;
                }
            }
            prop_assert_eq!(l.request_size, request);
            prop_assert_eq!(l.align, align);
            prop_assert_eq!(l.size, round_up(end, align));
            prop_assert!(l.size <= limits.max_record);
            let count = |f: &dyn Fn(Dir) -> bool| {
                op.params
                    .iter()
                    .filter(|p| p.ty.is_indirect() && f(p.dir))
                    .count() as u32
            };
            prop_assert_eq!(l.in_strings, count(&|d| d != Dir::Out));
            prop_assert_eq!(l.out_strings, count(&|d| d != Dir::In));
            prop_assert!(l.in_strings <= limits.max_strings && l.out_strings <= limits.max_strings);
        }
    }
    Ok(())
}

/// Integer spellings and what they mean.
const INTS: &[(&str, Prim)] = &[
    ("char", Prim::Char),
    ("octet", Prim::U8),
    ("int8_t", Prim::I8),
    ("short", Prim::I16),
    ("unsigned short", Prim::U16),
    ("int", Prim::I32),
    ("long", Prim::I32),
    ("uint32_t", Prim::U32),
    ("long long", Prim::I64),
    ("hyper", Prim::I64),
    ("unsigned long long", Prim::U64),
];

/// A struct every random interface may use: a 0, b 8, c 16..22; 24 bytes,
/// align 8.
const STRUCT: &str = "struct rec { octet a; int64_t b; short c[3]; };\n";

/// A parameter kind of a random interface.
#[derive(Clone, Debug)]
enum Kind {
    Int(usize),
    Bool,
    Str,
    Seq(usize),
    SizeIs(usize, bool),
    Array(usize, u32),
    Rec,
}

fn kind() -> impl Strategy<Value = Kind> {
    let i = 0..INTS.len();
    prop_oneof![
        3 => i.clone().prop_map(Kind::Int),
        1 => Just(Kind::Bool),
        1 => Just(Kind::Str),
        1 => i.clone().prop_map(Kind::Seq),
        2 => (i.clone(), any::<bool>()).prop_map(|(i, b)| Kind::SizeIs(i, b)),
        1 => (i, 1u32..5).prop_map(|(i, n)| Kind::Array(i, n)),
        1 => Just(Kind::Rec),
    ]
}

fn dir() -> impl Strategy<Value = Dir> {
    prop_oneof![Just(Dir::In), Just(Dir::InOut), Just(Dir::Out)]
}

/// Writes one parameter (and, for `size_is`, its length parameter first)
/// in MIDL or CORBA syntax; returns the expected (name, dir, type,
/// size_is name) of each.
fn write_param(
    k: usize,
    kind: &Kind,
    dir: Dir,
    corba: bool,
    out: &mut Vec<String>,
) -> Vec<(String, Dir, Type, Option<String>)> {
    let name = format!("p{k}");
    let attr = |d: Dir| match d {
        Dir::In => "[in] ",
        Dir::InOut => "[in, out] ",
        Dir::Out => "[out] ",
    };
    let word = |d: Dir| match d {
        Dir::In => "in ",
        Dir::InOut => "inout ",
        Dir::Out => "out ",
    };
    let star = if dir == Dir::In { "" } else { "*" };
    let simple = |t: &str, suffix: &str| {
        if corba {
            format!("{}{t} {name}{suffix}", word(dir))
        } else {
            format!("{}{t} {star}{name}{suffix}", attr(dir))
        }
    };
    let (spelling, ty) = match kind {
        Kind::Int(i) => (simple(INTS[*i].0, ""), Type::Prim(INTS[*i].1)),
        Kind::Bool => (simple("boolean", ""), Type::Prim(Prim::Bool)),
        Kind::Str => (simple("string", ""), Type::String),
        Kind::Seq(i) => (
            simple(&format!("sequence<{}>", INTS[*i].0), ""),
            Type::Sequence(Box::new(Type::Prim(INTS[*i].1))),
        ),
        Kind::Rec => (simple("rec", ""), Type::Struct(0)),
        Kind::Array(i, n) => {
            let s = if corba {
                format!("{}{} {name}[{n}]", word(dir), INTS[*i].0)
            } else {
                format!("{}{} {name}[{n}]", attr(dir), INTS[*i].0)
            };
            (s, Type::Array(Box::new(Type::Prim(INTS[*i].1)), *n))
        }
        Kind::SizeIs(i, inout_len) => {
            let n = format!("n{k}");
            let len_dir = match dir {
                Dir::In => Dir::In,
                Dir::InOut if *inout_len => Dir::InOut,
                Dir::InOut => Dir::In,
                Dir::Out => Dir::Out,
            };
            let len_star = if len_dir == Dir::In { "" } else { "*" };
            out.push(if corba {
                format!("{}unsigned long {n}", word(len_dir))
            } else {
                format!("{}unsigned long {len_star}{n}", attr(len_dir))
            });
            let stars = if dir == Dir::Out { "**" } else { "*" };
            let t = INTS[*i].0;
            let seq = if corba {
                format!("[size_is({n})] {}{t} {stars}{name}", word(dir))
            } else {
                let a = attr(dir).trim_end().trim_end_matches(']');
                format!("{a}, size_is({n})] {t} {stars}{name}")
            };
            out.push(seq);
            return vec![
                (n.clone(), len_dir, Type::Prim(Prim::U32), None),
                (
                    name,
                    dir,
                    Type::Sequence(Box::new(Type::Prim(INTS[*i].1))),
                    Some(n),
                ),
            ];
        }
    };
    out.push(spelling);
    vec![(name, dir, ty, None)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Random interfaces of every parameter kind and direction, in either
    /// syntax, parse into exactly the declared parameters, and their
    /// layouts keep the rules.
    #[test]
    fn random_interfaces(
        ops in proptest::collection::vec(
            (proptest::collection::vec((kind(), dir(), any::<bool>()), 0..10), 0..4usize),
            1..4,
        ),
    ) {
        let mut src = STRUCT.to_string();
        src.push_str("interface r {\n");
        let mut expected = Vec::new();
        for (o, (params, ret)) in ops.iter().enumerate() {
            let mut text = Vec::new();
            let mut want = Vec::new();
            for (k, (kind, dir, corba)) in params.iter().enumerate() {
                want.extend(write_param(k, kind, *dir, *corba, &mut text));
            }
            let (rt, rty) = [
                ("void", None),
                ("long", Some(Type::Prim(Prim::I32))),
                ("boolean", Some(Type::Prim(Prim::Bool))),
                ("rec", Some(Type::Struct(0))),
            ][*ret]
            .clone();
            src.push_str(&format!("  {rt} op{o}({});\n", text.join(", ")));
            expected.push((want, rty));
        }
        src.push_str("};\n");
        let m = match idl::parse(&src) {
            Ok(m) => m,
            Err(e) => return Err(TestCaseError::fail(e.render(&src))),
        };
        check_model(&m, &Limits::default())?;
        prop_assert_eq!((m.structs[0].size, m.structs[0].align), (24, 8));
        let ops = &m.interfaces[0].ops;
        prop_assert_eq!(ops.len(), expected.len());
        for (op, (want, rty)) in ops.iter().zip(&expected) {
            prop_assert_eq!(&op.ret, rty);
            prop_assert_eq!(op.params.len(), want.len());
            for (p, (name, dir, ty, size_is)) in op.params.iter().zip(want) {
                prop_assert_eq!(&p.name, name);
                prop_assert_eq!(p.dir, *dir);
                prop_assert_eq!(&p.ty, ty);
                let n = p.size_is.map(|j| op.params[j].name.clone());
                prop_assert_eq!(&n, size_is);
            }
        }
    }
}
