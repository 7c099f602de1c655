//! Parser fuzzing: no input makes the front end panic, and every error
//! points at a place inside the source.
//!
//! Three kinds of input: random bytes; random sequences of the language's
//! tokens (which reach far deeper into the parser and the checks than
//! bytes do); and valid sources with tokens deleted, inserted or swapped.
//! Each property runs 500 cases unless `PROPTEST_CASES` says otherwise.

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
    if let Err(e) = idl::parse(src) {
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
