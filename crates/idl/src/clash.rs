//! Names that would clash: reserved names, names that differ only in
//! case, and names the generated C or Rust would make one identifier.
//!
//! CORBA IDL treats identifiers that differ only in case as one name, and
//! so does this front end (`a` beside `A`, `Foo` beside `foo`): the
//! generated code would otherwise spell both alike (`A_KEY`, `FooMsg`).
//! The same holds for names the generators' conventions join: `fooBar`
//! and `foo_bar` are both `FOO_BAR` and `FooBarMsg` in Rust; struct `I_f`
//! and operation `f` of interface `I` are both `I_f` in C. Each is a
//! [`crate::error::ErrorKind::Clash`] naming both declarations. What the
//! generators add of their own (`<iface>_serve`, `<op>_server`, `<op>_msg`
//! in C; `<op>_stub` and key constants in Rust; C's include guard) is
//! renamed by them instead, so an operation `serve` is fine.
//!
//! Reserved ([`crate::error::ErrorKind::Reserved`]): the run time's names,
//! what the C headers define, and a name whose Rust spelling is a path
//! keyword, which Rust cannot write even as a raw identifier (an interface
//! `SELF` would be the module `self`, a struct `self_` the type `Self`).
//! Other keywords made by a case conversion are raw identifiers in the
//! generated Rust (an interface `Fn` is the module `r#fn`).

use std::collections::HashMap;

use crate::error::{CompileError, ErrorKind};
use crate::gen_c::{ident, op_c_name};
use crate::gen_rust::{PATH_KEYWORDS, camel, snake};
use crate::model::{Idl, Pos};

type Res<T> = Result<T, CompileError>;

/// Names the C run time and the standard headers the generated C
/// includes (`<stdint.h>`, `<stddef.h>`, `<stdbool.h>`, `<string.h>`)
/// define, which an IDL name may not take (`<stdatomic.h>`'s, by prefix,
/// in [`reserved`]).
#[rustfmt::skip]
const C_RESERVED: &[&str] = &[
    // <stdint.h>
    "INT8_MIN", "INT16_MIN", "INT32_MIN", "INT64_MIN", "INT8_MAX", "INT16_MAX", "INT32_MAX",
    "INT64_MAX", "UINT8_MAX", "UINT16_MAX", "UINT32_MAX", "UINT64_MAX", "INT8_C", "INT16_C",
    "INT32_C", "INT64_C", "UINT8_C", "UINT16_C", "UINT32_C", "UINT64_C", "INTMAX_C", "UINTMAX_C",
    "INTPTR_MIN", "INTPTR_MAX", "UINTPTR_MAX", "INTMAX_MIN", "INTMAX_MAX", "UINTMAX_MAX",
    "PTRDIFF_MIN", "PTRDIFF_MAX", "SIZE_MAX", "SIG_ATOMIC_MIN", "SIG_ATOMIC_MAX", "WCHAR_MIN",
    "WCHAR_MAX", "WINT_MIN", "WINT_MAX", "intptr_t", "uintptr_t", "intmax_t", "uintmax_t",
    // <stddef.h>, <stdbool.h>
    "NULL", "offsetof", "size_t", "ptrdiff_t", "max_align_t", "wchar_t", "bool", "true", "false",
    "__bool_true_false_are_defined",
    // <string.h>, as the generated code uses it
    "memcpy", "memset", "memmove", "memcmp", "strlen",
];

/// Why `name` is reserved, if it is.
pub(crate) fn reserved(name: &str) -> Option<String> {
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("idl_") || lower == "idl" {
        return Some(
            "the prefix `idl_` (any case) belongs to the run time (idl_rt.h's `idl_client`, `IDL_OK`, ...; Rust's `::idl`)".into(),
        );
    }
    let fixed = |n: &str| {
        ["", "u"].iter().any(|u| {
            ["least", "fast"].iter().any(|k| {
                [8, 16, 32, 64].iter().any(|b| {
                    n == format!("{u}int_{k}{b}_t")
                        || n.eq_ignore_ascii_case(&format!("{u}int_{k}{b}_max"))
                        || n.eq_ignore_ascii_case(&format!("{u}int_{k}{b}_min"))
                })
            })
        })
    };
    if C_RESERVED.contains(&name) || fixed(name) {
        return Some(format!(
            "`{name}` is defined by the C standard headers the generated code includes"
        ));
    }
    // <stdatomic.h>, which idl_rt.h includes for C: its types and
    // functions (`atomic_int`, `atomic_load`), its macros (`ATOMIC_VAR_INIT`,
    // `ATOMIC_INT_LOCK_FREE`), `memory_order` and its constants, and
    // `kill_dependency`; with the prefixes C11 (7.31.8) keeps for it.
    if name.starts_with("atomic_")
        || name.starts_with("ATOMIC_")
        || name.starts_with("memory_order")
        || name == "kill_dependency"
    {
        return Some(format!(
            "`{name}` is <stdatomic.h>'s (the prefixes `atomic_`, `ATOMIC_` and `memory_order` are), which the C run time includes"
        ));
    }
    None
}

/// Why two names that differ only in case clash.
pub(crate) const CASE_ONLY: &str = "names that differ only in case are one name in IDL";

/// The case-insensitive key of a name (CORBA: one name).
pub(crate) fn fold(name: &str) -> String {
    name.to_lowercase()
}

/// One namespace of generated identifiers.
#[derive(Default)]
struct Space {
    /// Identifier -> (what declares it, where).
    seen: HashMap<String, (String, Pos)>,
    /// Entries in order of position, filled before checking.
    pending: Vec<(String, String, Pos)>,
}

impl Space {
    fn add(&mut self, ident: String, what: String, pos: Pos) {
        self.pending.push((ident, what, pos));
    }

    /// The first clash, by position of its later declaration.
    fn check(mut self, lang: &str) -> Res<()> {
        self.pending.sort_by_key(|e| (e.2.line, e.2.col));
        for (ident, what, pos) in self.pending {
            match self.seen.get(&ident) {
                Some((w, at)) if *w != what => {
                    return Err(CompileError::clash(
                        pos,
                        what,
                        w.clone(),
                        *at,
                        format!("the generated {lang} names both `{ident}`"),
                    ));
                }
                Some(_) => {}
                None => {
                    self.seen.insert(ident, (what, pos));
                }
            }
        }
        Ok(())
    }
}

/// Refuses a declaration whose Rust name (`generated`, what a case
/// conversion made of `name`) is a keyword that cannot be a raw
/// identifier.
fn rust_nameable(what: &str, name: &str, generated: &str, pos: Pos) -> Res<()> {
    if !PATH_KEYWORDS.contains(&generated) {
        return Ok(());
    }
    Err(CompileError::new(
        pos,
        ErrorKind::Reserved {
            name: name.to_string(),
            why: format!(
                "{what} `{name}` would be the Rust {} `{generated}`, a keyword that cannot be a raw identifier (`r#{generated}` is an error)",
                if what == "struct" { "type" } else { "module" }
            ),
        },
    ))
}

/// A clash of `a` and `b`, the later one (by position) second.
fn ordered(a: (String, Pos), b: (String, Pos), why: String) -> CompileError {
    let ((first, at), (second, pos)) = if (a.1.line, a.1.col) <= (b.1.line, b.1.col) {
        (a, b)
    } else {
        (b, a)
    };
    CompileError::clash(pos, second, first, at, why)
}

/// Checks that the generated C and Rust give every declaration of `idl`
/// identifiers of its own. `const_pos` holds each constant's position
/// (in `idl.consts` order), `field_pos` each struct's fields' (in
/// `idl.structs` order).
pub(crate) fn check(idl: &Idl, const_pos: &[Pos], field_pos: &[Vec<Pos>]) -> Res<()> {
    // Rust: a case conversion that makes a path keyword. (Other keywords
    // become raw identifiers: `gen_rust::raw`.)
    for s in &idl.structs {
        rust_nameable("struct", &s.name, &camel(&s.name), s.pos)?;
    }
    for iface in &idl.interfaces {
        rust_nameable("interface", &iface.name, &snake(&iface.name), iface.pos)?;
    }
    // C: one flat space for the file's types, functions and macros.
    let mut c = Space::default();
    // C identifiers a parameter may not take: types and macros.
    let mut c_types: HashMap<String, (String, Pos)> = HashMap::new();
    // The header's object-like macros: key macros and constants.
    let mut c_macros: HashMap<String, (String, Pos)> = HashMap::new();
    // Rust: the file's types and modules.
    let mut rust = Space::default();
    for s in &idl.structs {
        let what = format!("struct `{}`", s.name);
        c.add(ident(&s.name), what.clone(), s.pos);
        c_types.insert(ident(&s.name), (what.clone(), s.pos));
        rust.add(s.name.clone(), what, s.pos);
    }
    for ((name, _, _), &pos) in idl.consts.iter().zip(const_pos) {
        c.add(ident(name), format!("constant `{name}`"), pos);
        c_macros.insert(ident(name), (format!("constant `{name}`"), pos));
    }
    for iface in &idl.interfaces {
        let what = format!("interface `{}`", iface.name);
        rust.add(snake(&iface.name), what, iface.pos);
        // Rust: in the interface's module, keys and records.
        let mut keys = Space::default();
        let mut msgs = Space::default();
        for op in &iface.ops {
            let what = format!("operation `{}` of interface `{}`", op.name, iface.name);
            let n = op_c_name(&iface.name, &op.name);
            let up = n.to_ascii_uppercase();
            c.add(n, what.clone(), op.pos);
            for m in ["_KEY", "_REQUEST_SIZE", "_SIZE"] {
                c.add(format!("{up}{m}"), what.clone(), op.pos);
                c_types.insert(format!("{up}{m}"), (what.clone(), op.pos));
                c_macros.insert(format!("{up}{m}"), (what.clone(), op.pos));
            }
            keys.add(snake(&op.name).to_uppercase(), what.clone(), op.pos);
            msgs.add(format!("{}Msg", camel(&op.name)), what, op.pos);
        }
        keys.check("Rust")?;
        msgs.check("Rust")?;
    }
    c.check("C")?;
    rust.check("Rust")?;
    // A C parameter named as a type or a macro of the file.
    for iface in &idl.interfaces {
        for op in &iface.ops {
            for p in &op.params {
                if let Some((w, at)) = c_types.get(&ident(&p.name)) {
                    let what = format!("parameter `{}` of `{}`", p.name, op.name);
                    let why = format!("the generated C names both `{}`", ident(&p.name));
                    return Err(ordered((w.clone(), *at), (what, p.pos), why));
                }
            }
        }
    }
    // A member a C program names, a struct's field (`p.x`) or an entry of
    // `<iface>_impl` (`.f = do_f`, one per operation), named as a macro of
    // the header: the preprocessor would replace the member's name. A key
    // macro defined before an `<iface>_impl` breaks the generated header
    // itself (an operation `I_F_KEY` of an interface after `I`); struct
    // fields and constants come before and after all of the generated
    // declarations, so there it is the program's code that breaks (`p.N`
    // is `p.((int32_t)3)`). A parameter may share a constant's name: the
    // generated `.c` #undefs the constants, the header declares them last,
    // and a program names parameters only in the functions it writes.
    let member = |name: &str, what: String, pos: Pos| -> Res<()> {
        match c_macros.get(&ident(name)) {
            Some((w, at)) => Err(ordered(
                (w.clone(), *at),
                (what, pos),
                format!(
                    "the generated C header #defines `{}`, which would replace the member's name",
                    ident(name)
                ),
            )),
            None => Ok(()),
        }
    };
    for (s, pos) in idl.structs.iter().zip(field_pos) {
        for ((f, _), &fp) in s.fields.iter().zip(pos) {
            member(f, format!("field `{f}` of struct `{}`", s.name), fp)?;
        }
    }
    for iface in &idl.interfaces {
        for op in &iface.ops {
            let what = format!("operation `{}` of interface `{}`", op.name, iface.name);
            member(&op.name, what, op.pos)?;
        }
    }
    Ok(())
}
