//! The C back end: from a checked [`Idl`], a header `<stem>.h` and a source
//! `<stem>.c` whose records have byte for byte the layout of the Rust
//! stubs' (the model's [`Layout`](crate::model::Layout) decides every
//! offset, and the header asserts each one with `IDL_STATIC_ASSERT`: C11's
//! `_Static_assert`, or C++'s `static_assert` when a C++ program includes
//! the header), so that a C client calls a Rust server and the reverse over the channel of
//! `crates/idl/c/idl_rt.h` (IDL4 §4: client stubs, server stubs and a
//! server loop kept in plain C so that users can edit it). The copies and
//! checks of each call, and their order, are the operation's plan
//! ([`crate::model::plan`]), which the Rust generator and the dynamic stubs
//! follow too.
//!
//! The C convention (docs/idl.md, "Generated C"):
//! - every client stub returns an `int` status (`IDL_OK`, a wire status
//!   the server answered, or a local `IDL_E_*`); the IDL return value comes
//!   back through a last parameter `ret`;
//! - parameters keep their declaration order and their `size_is` length
//!   parameters; a `string` or `sequence<T>` without `size_is` is a pointer
//!   and a `uint32_t <name>_len`;
//! - out strings and sequences are pointers into the channel's string area
//!   (the client's receive buffer, IDL4 §3.3), valid until the next call on
//!   the channel, and so are inout strings (their new value); inout
//!   sequences are copied back into the caller's buffer;
//! - the server implements a table of function pointers (`<iface>_impl`)
//!   with the same parameters, except that a value it writes into the
//!   string area (an out string or sequence, an inout string's new value)
//!   is a room: a pointer, its count (0 on entry, or the old value's length
//!   for an inout string, whose room starts with the old value) and a
//!   capacity `uint32_t <name>_cap` (`rt::OutSeq`, `rt::OutStr`); nonzero
//!   from an implementation is `IDL_SERVER_FAILED`;
//! - `<iface>_dispatch` switches on the key, `<iface>_serve` is the loop.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use crate::model::plan::{OpPlan, plan};
use crate::model::{Dir, Field, Idl, Interface, Op, Prim, Slot, Type};

/// The C run time's header, `idl_rt.h`, which every generated header
/// includes: write it beside the generated files (the CLI and build
/// helpers need not find `crates/idl/c/`).
pub const RUNTIME_H: &str = include_str!("../c/idl_rt.h");

/// The C run time's source, `idl_rt.c`: compile it with the generated
/// `<stem>.c`.
pub const RUNTIME_C: &str = include_str!("../c/idl_rt.c");

/// Generates the header and the source of `idl`'s C stubs; `stem` names
/// the files (`<stem>.h`, `<stem>.c`): the source includes `"<stem>.h"`,
/// the header includes `"idl_rt.h"`.
///
/// ```
/// let idl = idl::parse("interface calc { int add([in] int a, [in] int b); };")?;
/// let (h, c) = idl::gen_c::generate(&idl, "calc");
/// assert!(h.contains("int calc_add(idl_client *c, int32_t a, int32_t b, int32_t *ret);"));
/// assert!(c.contains("int calc_serve(idl_server *s, const calc_impl *impl, void *self)"));
/// # Ok::<(), idl::CompileError>(())
/// ```
pub fn generate(idl: &Idl, stem: &str) -> (String, String) {
    let g = Gen {
        idl,
        names: names(idl),
    };
    (g.header(stem), g.source(stem))
}

/// Checks that `stem` can name generated C files beside the run time:
/// `<stem>.h` and `<stem>.c` must not be the run time's `idl_rt.h` and
/// `idl_rt.c` (a file `idl_rt.idl`), which a directory of generated code
/// also holds. Call it before writing [`generate`]'s files with
/// [`RUNTIME_H`] and [`RUNTIME_C`] beside them.
///
/// ```
/// assert!(idl::gen_c::check_stem("pfs").is_ok());
/// let e = idl::gen_c::check_stem("idl_rt").unwrap_err();
/// assert!(e.to_string().contains("idl_rt.h"));
/// ```
pub fn check_stem(stem: &str) -> Result<(), crate::CompileError> {
    if stem.eq_ignore_ascii_case("idl_rt") {
        return Err(crate::CompileError::new(
            crate::Pos::default(),
            crate::error::ErrorKind::Reserved {
                name: stem.to_string(),
                why: "the generated idl_rt.h and idl_rt.c would be the C run time's files of that name; rename the IDL file".to_string(),
            },
        ));
    }
    Ok(())
}

/// What every generated header says about its conventions.
const HEADER_DOC: &str = " *
 * Records have the layout of the Rust stubs' (asserted below), so that C and
 * Rust clients and servers call each other over idl_rt.h's shared-memory
 * channel.
 *
 * Client stubs return an int status: IDL_OK, the status the server answered
 * (IDL_BAD_KEY..IDL_SERVER_FAILED) or a local IDL_E_*; the IDL return value
 * comes back through the last parameter, `ret`. On an error the out values
 * are unspecified. Out strings and sequences, and inout strings, come back as
 * pointers into the channel's string area, valid until the next call on the
 * channel; inout sequences are copied back into the caller's buffer (same
 * length). A string or sequence without size_is is a pointer and a uint32_t
 * <name>_len; size_is length parameters stay where they are declared.
 *
 * A server fills an <iface>_impl table. Each function gets the parameters in
 * place: in values by value (structs and arrays by const pointer), inout and
 * out values as pointers into the received record, in strings and sequences
 * as const pointers into the string area. A value the server writes into the
 * string area (an out string or sequence, an inout string's new value) is a
 * room: a pointer, its count (0 on entry; an inout string's room starts with
 * the old value and its length) and a uint32_t <name>_cap, the room's size in
 * elements. A nonzero return makes the reply IDL_SERVER_FAILED; a count above
 * the capacity makes it IDL_OVERFLOW. <iface>_serve is the server loop.
";

/// Writes a line to a `String` (writing to a `String` cannot fail).
macro_rules! line {
    ($s:expr) => { $s.push('\n') };
    ($s:expr, $($t:tt)*) => {{ let _ = writeln!($s, $($t)*); }};
}

const C_KEYWORDS: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "_Bool",
    "_Alignas",
    "_Alignof",
    "_Atomic",
    "_Generic",
    "_Noreturn",
    "_Static_assert",
    "_Thread_local",
    "_Complex",
    "_Imaginary",
    "NULL",
    "offsetof",
    "memcpy",
];

/// An IDL name as a C identifier: C's keywords get a `_` appended.
pub(crate) fn ident(name: &str) -> String {
    if C_KEYWORDS.contains(&name) {
        format!("{name}_")
    } else {
        name.to_string()
    }
}

/// Identifiers of one function's scope: hands out names that do not
/// collide with the parameters' or with each other.
struct Names(HashSet<String>);

impl Names {
    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 2;
        while self.0.contains(&name) {
            name = format!("{base}{k}");
            k += 1;
        }
        self.0.insert(name.clone());
        name
    }
}

/// One value of an operation as C sees it: a parameter or the return
/// value.
struct Val<'a> {
    /// C identifier.
    name: String,
    ty: &'a Type,
    dir: Dir,
    /// For a sequence: the index (in the op's values) of its length.
    size_is: Option<usize>,
    /// For a length parameter: the index of its sequence.
    length_of: Option<usize>,
    /// For a string or sequence without `size_is`: the name of its
    /// `uint32_t` length parameter.
    len_name: Option<String>,
    /// For a value the server writes into the string area (an out string
    /// or sequence, an inout string's new value): the implementation's
    /// `uint32_t` capacity parameter (`<name>_cap`).
    cap_name: Option<String>,
}

fn vals(op: &Op) -> Vec<Val<'_>> {
    let mut names = Names(op.params.iter().map(|p| ident(&p.name)).collect());
    let mut vs: Vec<Val<'_>> = op
        .params
        .iter()
        .map(|p| Val {
            name: ident(&p.name),
            ty: &p.ty,
            dir: p.dir,
            size_is: p.size_is,
            length_of: p.length_of,
            len_name: None,
            cap_name: None,
        })
        .collect();
    if let Some(ty) = &op.ret {
        vs.push(Val {
            name: names.fresh("ret"),
            ty,
            dir: Dir::Out,
            size_is: None,
            length_of: None,
            len_name: None,
            cap_name: None,
        });
    }
    for v in &mut vs {
        if v.ty.is_indirect() && v.size_is.is_none() {
            v.len_name = Some(names.fresh(&format!("{}_len", v.name)));
        }
        if v.ty.is_indirect() && (v.dir == Dir::Out || *v.ty == Type::String && v.dir == Dir::InOut)
        {
            v.cap_name = Some(names.fresh(&format!("{}_cap", v.name)));
        }
    }
    vs
}

/// Every identifier an operation's values take in C (names, lengths,
/// buffers of inout strings).
fn taken(vs: &[Val<'_>]) -> Names {
    let mut names = Names(HashSet::new());
    for v in vs {
        names.0.insert(v.name.clone());
        names.0.extend(v.len_name.iter().cloned());
        names.0.extend(v.cap_name.iter().cloned());
    }
    names
}

/// The name of a client stub's channel parameter: `c`, unless a parameter
/// has that name.
fn chan_name(vs: &[Val<'_>]) -> String {
    taken(vs).fresh("c")
}

/// A plan's count bound ([`crate::model::plan::Check::Count`]) as C
/// spells it: the limit macro of the length's type it is.
fn c_max(max: u32) -> String {
    const MACROS: [(u32, &str); 5] = [
        (i8::MAX as u32, "INT8_MAX"),
        (u8::MAX as u32, "UINT8_MAX"),
        (i16::MAX as u32, "INT16_MAX"),
        (u16::MAX as u32, "UINT16_MAX"),
        (i32::MAX as u32, "INT32_MAX"),
    ];
    MACROS
        .iter()
        .find(|(v, _)| *v == max)
        .map_or_else(|| max.to_string(), |(_, m)| (*m).to_string())
}

struct Gen<'a> {
    idl: &'a Idl,
    /// Per interface (by name), the names of its generated functions and
    /// types ([`names`]).
    names: HashMap<String, IfaceNames>,
}

/// The C names of an interface's generated functions and types besides
/// its client stubs.
struct IfaceNames {
    /// `<iface>_impl`, the server's table.
    impl_t: String,
    /// `<iface>_dispatch`.
    dispatch: String,
    /// `<iface>_serve`, the server loop.
    serve: String,
    /// Per operation, by key.
    ops: Vec<OpNames>,
}

/// The C names of an operation's server stub and record.
#[derive(Clone)]
struct OpNames {
    /// `<op>_server`.
    server: String,
    /// `<op>_msg`.
    msg: String,
}

/// The C name of operation `op` of interface `iface` (both as the model
/// names them): its client stub's, and the base of its key macros
/// (`<OP>_KEY`): `<iface>_<op>`, or `op` if it already starts so. The
/// front end (`crate::clash`) checks that these clash with nothing.
pub(crate) fn op_c_name(iface: &str, op: &str) -> String {
    let prefix = format!("{iface}_");
    if op.starts_with(&prefix) {
        op.to_string()
    } else {
        format!("{prefix}{op}")
    }
}

/// Every identifier the generated C spells from a name of `idl`: structs
/// and their fields, constants, key macros, operations (client stubs and
/// `<iface>_impl` entries) and parameters.
fn idl_idents(idl: &Idl) -> HashSet<String> {
    let mut taken: HashSet<String> = HashSet::new();
    for s in &idl.structs {
        taken.insert(ident(&s.name));
        taken.extend(s.fields.iter().map(|(f, _)| ident(f)));
    }
    taken.extend(idl.consts.iter().map(|(n, _, _)| ident(n)));
    for iface in &idl.interfaces {
        for op in &iface.ops {
            let n = op_c_name(&iface.name, &op.name);
            let up = n.to_ascii_uppercase();
            taken.extend([
                format!("{up}_KEY"),
                format!("{up}_REQUEST_SIZE"),
                format!("{up}_SIZE"),
                ident(&op.name),
                n,
            ]);
            taken.extend(op.params.iter().map(|p| ident(&p.name)));
        }
    }
    taken
}

/// The names of what the generator adds to an interface
/// (`<iface>_impl`, `<iface>_dispatch`, `<iface>_serve`, `<op>_server`,
/// `<op>_msg`): the usual ones, with `_` appended until they clash with
/// no identifier the IDL names (an operation `serve`, or `a` beside
/// `a_server`) and with no other added name.
fn names(idl: &Idl) -> HashMap<String, IfaceNames> {
    let mut taken = idl_idents(idl);
    let mut fresh = |base: String| {
        let mut n = base;
        while taken.contains(&n) {
            n.push('_');
        }
        taken.insert(n.clone());
        n
    };
    idl.interfaces
        .iter()
        .map(|iface| {
            let iname = ident(&iface.name);
            let names = IfaceNames {
                impl_t: fresh(format!("{iname}_impl")),
                dispatch: fresh(format!("{iname}_dispatch")),
                serve: fresh(format!("{iname}_serve")),
                ops: iface
                    .ops
                    .iter()
                    .map(|op| {
                        let n = op_c_name(&iface.name, &op.name);
                        OpNames {
                            server: fresh(format!("{n}_server")),
                            msg: fresh(format!("{n}_msg")),
                        }
                    })
                    .collect(),
            };
            (iface.name.clone(), names)
        })
        .collect()
}

impl Gen<'_> {
    /// The operation's plan ([`crate::model::plan`]), which both stubs
    /// follow; for a model that did not pass the front end's checks, an
    /// `#error` naming the operation instead of its stub.
    fn plan(&self, c: &mut String, op: &Op) -> Option<OpPlan> {
        let p = plan(&self.idl.structs, op);
        if p.is_none() {
            line!(
                c,
                "#error \"operation {}: its layout lacks a field for a value\"",
                op.name
            );
        }
        p
    }

    /// A C declarator of `inner` with type `ty` (`int32_t (*p)[4]`).
    fn decl(&self, ty: &Type, inner: &str) -> String {
        match ty {
            Type::Prim(p) => format!("{} {inner}", p.c()),
            Type::Struct(id) => format!("{} {inner}", self.struct_name(*id)),
            Type::Array(t, n) => {
                let inner = if inner.starts_with('*') {
                    format!("({inner})")
                } else {
                    inner.to_string()
                };
                self.decl(t, &format!("{inner}[{n}]"))
            }
            Type::String => format!("char {inner}"),
            Type::Sequence(e) => self.decl(e, &format!("*{inner}")),
        }
    }

    /// The C type name of `ty`.
    fn type_name(&self, ty: &Type) -> String {
        self.decl(ty, "").replace(" [", "[").trim_end().to_string()
    }

    fn struct_name(&self, id: usize) -> String {
        self.idl
            .structs
            .get(id)
            .map_or_else(|| format!("idl_struct_{id}"), |s| ident(&s.name))
    }

    /// The element type of a string or sequence.
    fn elem(&self, ty: &Type) -> String {
        match ty {
            Type::Sequence(e) => self.type_name(e),
            _ => "char".to_string(),
        }
    }

    /// A record field's declaration.
    fn field_decl(&self, v: &Val<'_>, f: &Field) -> String {
        if f.desc {
            format!("idl_desc {}", v.name)
        } else if *v.ty == Type::Prim(Prim::Bool) {
            format!("uint8_t {}", v.name)
        } else {
            self.decl(v.ty, &v.name)
        }
    }

    // ---- names -----------------------------------------------------------

    fn op_name(iface: &Interface, op: &Op) -> String {
        op_c_name(&iface.name, &op.name)
    }

    /// The names of an operation's server stub and record.
    fn op_names(&self, iface: &Interface, op: &Op) -> OpNames {
        self.names
            .get(&iface.name)
            .and_then(|n| n.ops.get(usize::from(op.key)))
            .cloned()
            .unwrap_or_else(|| {
                let n = Self::op_name(iface, op);
                OpNames {
                    server: format!("{n}_server"),
                    msg: format!("{n}_msg"),
                }
            })
    }

    // ---- signatures ------------------------------------------------------

    /// The parameters of a client stub (`server` false) or of an
    /// implementation (`server` true), after the channel or `self`.
    fn params(&self, vs: &[Val<'_>], server: bool) -> Vec<String> {
        let mut out = Vec::new();
        for v in vs {
            let n = &v.name;
            match (v.ty, v.dir) {
                (Type::Prim(p), Dir::In) => out.push(format!("{} {n}", p.c())),
                (Type::Prim(p), _) => out.push(format!("{} *{n}", p.c())),
                (Type::Struct(id), Dir::In) => {
                    out.push(format!("const {} *{n}", self.struct_name(*id)))
                }
                (Type::Struct(id), _) => out.push(format!("{} *{n}", self.struct_name(*id))),
                (Type::Array(..), Dir::In) => out.push(format!("const {}", self.decl(v.ty, n))),
                (Type::Array(..), _) => out.push(self.decl(v.ty, n)),
                (ty, dir) => {
                    let e = match ty {
                        Type::Sequence(e) => (**e).clone(),
                        _ => Type::Prim(Prim::Char),
                    };
                    let l = v.len_name.as_deref();
                    let is_str = *ty == Type::String;
                    let (ptr, len) = match (dir, server) {
                        (Dir::In, _) => (
                            format!("const {}", self.decl(&e, &format!("*{n}"))),
                            "uint32_t ",
                        ),
                        (Dir::InOut, _) if !is_str => {
                            (self.decl(&e, &format!("*{n}")), "uint32_t ")
                        }
                        (_, true) => (self.decl(&e, &format!("*{n}")), "uint32_t *"),
                        (_, false) if is_str => (format!("const char **{n}"), "uint32_t *"),
                        (_, false) => (self.decl(&e, &format!("**{n}")), "uint32_t *"),
                    };
                    out.push(ptr);
                    if let Some(l) = l {
                        out.push(format!("{len}{l}"));
                    }
                    if let (Some(cap), true) = (&v.cap_name, server) {
                        out.push(format!("uint32_t {cap}"));
                    }
                }
            }
        }
        out
    }

    fn client_proto(&self, iface: &Interface, op: &Op, vs: &[Val<'_>]) -> String {
        let mut ps = vec![format!("idl_client *{}", chan_name(vs))];
        ps.extend(self.params(vs, false));
        format!("int {}({})", Self::op_name(iface, op), ps.join(", "))
    }

    // ---- the header ------------------------------------------------------

    fn header(&self, stem: &str) -> String {
        let guard: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        // An identifier cannot start with a digit (a file `19d5.idl`).
        let mut guard = if guard.starts_with(|c: char| c.is_ascii_digit()) {
            format!("IDL_FILE_{guard}_IDL_H")
        } else {
            format!("{guard}_IDL_H")
        };
        // Defined before everything else: a name of the file that is the
        // guard (a field `PFS_IDL_H` of pfs.idl) would be replaced by
        // nothing, so the guard yields, as the generator's other names do.
        let taken = idl_idents(self.idl);
        while taken.contains(&guard) {
            guard.push('_');
        }
        let mut h = String::new();
        line!(
            h,
            "/*\n * {stem}.h: generated by fastpath's IDL compiler (idl::gen_c); do not edit.\n{HEADER_DOC} */"
        );
        line!(h, "#ifndef {guard}");
        line!(h, "#define {guard}");
        line!(h);
        line!(h, "#include <stdbool.h>");
        line!(h, "#include <stddef.h>");
        line!(h, "#include <stdint.h>");
        line!(h);
        line!(h, "#include \"idl_rt.h\"");
        line!(h);
        line!(h, "#ifdef __cplusplus");
        line!(h, "extern \"C\" {{");
        line!(h, "#endif");
        for s in &self.idl.structs {
            let name = ident(&s.name);
            line!(h);
            line!(h, "typedef struct {name} {{");
            for (f, ty) in &s.fields {
                line!(h, "    {};", self.decl(ty, &ident(f)));
            }
            line!(h, "}} {name};");
            line!(
                h,
                "IDL_STATIC_ASSERT(sizeof({name}) == {}, \"{name}: size\");",
                s.size
            );
            line!(
                h,
                "IDL_STATIC_ASSERT(IDL_ALIGNOF({name}) == {}, \"{name}: alignment\");",
                s.align
            );
        }
        for iface in &self.idl.interfaces {
            self.header_iface(&mut h, iface);
        }
        if !self.idl.consts.is_empty() {
            // Last, so that no declaration above can meet them (the source
            // file #undefs them: they are for the program's code).
            line!(h);
            for (name, p, v) in &self.idl.consts {
                line!(h, "#define {} {}", ident(name), const_value(*p, *v));
            }
        }
        line!(h);
        line!(h, "#ifdef __cplusplus");
        line!(h, "}}");
        line!(h, "#endif");
        line!(h);
        line!(h, "#endif /* {guard} */");
        h
    }

    fn header_iface(&self, h: &mut String, iface: &Interface) {
        let IfaceNames {
            impl_t,
            dispatch: dispatch_f,
            serve: serve_f,
            ..
        } = &self.names[&iface.name];
        line!(h);
        line!(h, "/* ---- interface {} ---- */", iface.name);
        for op in &iface.ops {
            let name = Self::op_name(iface, op);
            let up = name.to_ascii_uppercase();
            let l = &op.layout;
            let vs = vals(op);
            line!(h);
            line!(h, "#define {up}_KEY {}", op.key);
            line!(h, "#define {up}_REQUEST_SIZE {}", l.request_size);
            line!(h, "#define {up}_SIZE {}", l.size);
            if !l.fields.is_empty() {
                self.record(h, &self.op_names(iface, op).msg, op, &vs);
            }
        }
        line!(h);
        line!(h, "/* Client stubs. */");
        for op in &iface.ops {
            let vs = vals(op);
            line!(h, "{};", self.client_proto(iface, op, &vs));
        }
        line!(h);
        line!(
            h,
            "/* What a server implements: one function per operation. */"
        );
        line!(h, "typedef struct {impl_t} {{");
        for op in &iface.ops {
            let vs = vals(op);
            let mut ps = vec!["void *self".to_string()];
            ps.extend(self.params(&vs, true));
            line!(h, "    int (*{})({});", ident(&op.name), ps.join(", "));
        }
        line!(h, "}} {impl_t};");
        line!(h);
        line!(
            h,
            "/* Server stubs: check the request, call the implementation in place. */"
        );
        for op in &iface.ops {
            line!(
                h,
                "int {}(idl_server *s, uint32_t len, const {impl_t} *impl, void *self);",
                self.op_names(iface, op).server
            );
        }
        line!(h);
        line!(
            h,
            "/* Calls the operation `key`; sets the reply's length; returns its status. */"
        );
        line!(
            h,
            "int {dispatch_f}(idl_server *s, uint16_t key, uint32_t len, const {impl_t} *impl, void *self, uint32_t *reply_len);"
        );
        line!(h);
        line!(
            h,
            "/* The server loop: serves requests until the client closes the channel"
        );
        line!(h, " * (then returns IDL_OK) or the channel fails. */");
        line!(
            h,
            "int {serve_f}(idl_server *s, const {impl_t} *impl, void *self);"
        );
    }

    /// An operation's record: its fields at the model's offsets, with
    /// explicit padding, every offset and the size asserted.
    fn record(&self, h: &mut String, rec: &str, op: &Op, vs: &[Val<'_>]) {
        let l = &op.layout;
        let by_slot = |f: &Field| match f.slot {
            Slot::Param(i) => &vs[i],
            Slot::Ret => vs.last().unwrap_or(&vs[0]),
        };
        let max_align = l.fields.iter().map(|f| f.align).max().unwrap_or(1);
        line!(h, "typedef struct {rec} {{");
        let mut pos = 0u32;
        let mut pad = 0;
        for (k, f) in l.fields.iter().enumerate() {
            if f.offset > pos.next_multiple_of(f.align) {
                line!(h, "    uint8_t _pad{pad}[{}];", f.offset - pos);
                pad += 1;
            }
            let v = by_slot(f);
            let dir = match f.slot {
                Slot::Ret => "return value",
                Slot::Param(_) => match v.dir {
                    Dir::In => "in",
                    Dir::InOut => "inout",
                    Dir::Out => "out",
                },
            };
            let align = if k == 0 && l.align > max_align {
                format!("IDL_ALIGNAS({}) ", l.align)
            } else {
                String::new()
            };
            line!(
                h,
                "    {align}{}; /* {dir}, offset {} */",
                self.field_decl(v, f),
                f.offset
            );
            pos = f.offset + f.size;
        }
        if l.size > pos.next_multiple_of(l.align) {
            line!(h, "    uint8_t _pad{pad}[{}];", l.size - pos);
        }
        line!(h, "}} {rec};");
        for f in &l.fields {
            let v = by_slot(f);
            line!(
                h,
                "IDL_STATIC_ASSERT(offsetof({rec}, {0}) == {1}, \"{rec}.{0} at {1}\");",
                v.name,
                f.offset
            );
        }
        line!(
            h,
            "IDL_STATIC_ASSERT(sizeof({rec}) == {}, \"{rec}: size\");",
            l.size
        );
        line!(
            h,
            "IDL_STATIC_ASSERT(IDL_ALIGNOF({rec}) == {}, \"{rec}: alignment\");",
            l.align
        );
    }

    // ---- the source ------------------------------------------------------

    fn source(&self, stem: &str) -> String {
        let mut c = String::new();
        line!(c, "/*");
        line!(
            c,
            " * {stem}.c: generated by fastpath's IDL compiler (idl::gen_c)."
        );
        line!(
            c,
            " * The client stubs, the server stubs, the dispatch and the server loop;"
        );
        line!(c, " * the loop (at the end) is plain C to copy and edit.");
        line!(c, " */");
        line!(c, "#include <string.h>");
        line!(c);
        line!(c, "#include \"{stem}.h\"");
        if !self.idl.consts.is_empty() {
            // The IDL's constants are the program's: none is used below, and
            // a macro could meet a local name.
            line!(c);
            for (name, _, _) in &self.idl.consts {
                line!(c, "#undef {}", ident(name));
            }
        }
        for iface in &self.idl.interfaces {
            for op in &iface.ops {
                line!(c);
                self.client_stub(&mut c, iface, op);
            }
            for op in &iface.ops {
                line!(c);
                self.server_stub(&mut c, iface, op);
            }
            line!(c);
            self.dispatch(&mut c, iface);
            line!(c);
            self.serve(&mut c, iface);
        }
        c
    }

    /// The value of a length parameter as the client passes it.
    fn len_expr(v: &Val<'_>) -> String {
        if v.dir == Dir::In {
            v.name.clone()
        } else {
            format!("*{}", v.name)
        }
    }

    fn client_stub(&self, c: &mut String, iface: &Interface, op: &Op) {
        let Some(pl) = self.plan(c, op) else { return };
        let vs = vals(op);
        let name = Self::op_name(iface, op);
        let up = name.to_ascii_uppercase();
        let msg_t = &self.op_names(iface, op).msg;
        let l = &op.layout;
        line!(c, "{}", self.client_proto(iface, op, &vs));
        line!(c, "{{");
        if l.fields.is_empty() {
            let ch = chan_name(&vs);
            line!(c, "    (void)idl_client_begin({ch}, 0);");
            line!(c, "    return idl_client_call({ch}, {up}_KEY, 0, 0);");
            line!(c, "}}");
            return;
        }
        let mut names = taken(&vs);
        let ch = names.fresh("c");
        let m = names.fresh("m");
        let st = names.fresh("st");
        let has_reply_desc = l
            .fields
            .iter()
            .any(|f| f.desc && !matches!(f.slot, Slot::Param(i) if vs[i].dir == Dir::In));
        let (d, p) = if has_reply_desc {
            (names.fresh("d"), names.fresh("p"))
        } else {
            (String::new(), String::new())
        };
        line!(c, "    {msg_t} *{m} = idl_client_begin({ch}, {up}_SIZE);");
        line!(c, "    int {st};");
        if has_reply_desc {
            line!(c, "    idl_desc {d};");
            line!(c, "    void *{p};");
        }
        // An inout sequence comes back from where the client put it: its
        // own descriptor, kept in a local (the reply's copy is ignored).
        let mut own: Vec<Option<String>> = vec![None; vs.len()];
        for (i, v) in vs.iter().enumerate() {
            if v.dir == Dir::InOut && matches!(v.ty, Type::Sequence(_)) {
                let o = names.fresh(&format!("{}_d", v.name));
                line!(c, "    idl_desc {o};");
                own[i] = Some(o);
            }
        }
        line!(c);
        line!(
            c,
            "    /* (1) in and inout values into the record, strings into the string area */"
        );
        line!(c, "    if ({m} == NULL)");
        line!(c, "        return IDL_E_LIMIT;");
        for f in &l.fields {
            let Slot::Param(i) = f.slot else { continue };
            let v = &vs[i];
            if v.dir == Dir::Out {
                continue;
            }
            let n = &v.name;
            let src = if v.dir == Dir::In {
                n.clone()
            } else {
                format!("*{n}")
            };
            match v.ty {
                Type::Prim(Prim::Bool) => line!(c, "    {m}->{n} = {src} ? 1 : 0;"),
                Type::Prim(_) => line!(c, "    {m}->{n} = {src};"),
                Type::Struct(_) => line!(c, "    {m}->{n} = *{n};"),
                Type::Array(..) => line!(c, "    memcpy({m}->{n}, {n}, sizeof {m}->{n});"),
                Type::String | Type::Sequence(_) => {
                    let count = self.client_count(c, &vs, v);
                    let e = self.elem(v.ty);
                    let src = if *v.ty == Type::String {
                        src
                    } else {
                        n.clone()
                    };
                    line!(
                        c,
                        "    {st} = idl_client_put({ch}, &{m}->{n}, {src}, {count}, sizeof({e}), _Alignof({e}));"
                    );
                    line!(c, "    if ({st} != IDL_OK)");
                    line!(c, "        return {st};");
                    if let Some(o) = &own[i] {
                        line!(c, "    {o} = {m}->{n};");
                    }
                }
            }
        }
        line!(c);
        line!(c, "    /* (2) the call */");
        line!(
            c,
            "    {st} = idl_client_call({ch}, {up}_KEY, {up}_REQUEST_SIZE, {up}_SIZE);"
        );
        line!(c, "    if ({st} != IDL_OK)");
        line!(c, "        return {st};");
        line!(c);
        line!(
            c,
            "    /* (3) inout, out and return values from the reply */"
        );
        for f in &l.fields {
            let v = match f.slot {
                Slot::Param(i) => &vs[i],
                Slot::Ret => &vs[vs.len() - 1],
            };
            if v.dir == Dir::In {
                continue;
            }
            let n = &v.name;
            match v.ty {
                Type::Prim(Prim::Bool) => {
                    line!(c, "    if ({m}->{n} > 1)");
                    line!(c, "        return IDL_BAD_VALUE;");
                    line!(c, "    *{n} = {m}->{n};");
                }
                Type::Prim(_) | Type::Struct(_) => line!(c, "    *{n} = {m}->{n};"),
                Type::Array(..) => line!(c, "    memcpy({n}, {m}->{n}, sizeof {m}->{n});"),
                Type::String | Type::Sequence(_) => {
                    let e = self.elem(v.ty);
                    let utf8 = *v.ty == Type::String;
                    let own = match f.slot {
                        Slot::Param(i) => own[i].as_ref(),
                        Slot::Ret => None,
                    };
                    line!(
                        c,
                        "    {d} = {};",
                        own.cloned().unwrap_or(format!("{m}->{n}"))
                    );
                    line!(
                        c,
                        "    {st} = idl_client_get({ch}, {d}, sizeof({e}), _Alignof({e}), {utf8}, &{p});"
                    );
                    line!(c, "    if ({st} != IDL_OK)");
                    line!(c, "        return {st};");
                    if own.is_some() {
                        line!(c, "    memcpy({n}, {p}, (size_t){d}.len * sizeof({e}));");
                    } else {
                        line!(c, "    *{n} = {p};");
                        if let Some(l) = &v.len_name {
                            line!(c, "    *{l} = {d}.len;");
                        } else if let Some(j) = v.size_is
                            && vs[j].dir != Dir::In
                            && let Type::Prim(lp) = vs[j].ty
                        {
                            if let Slot::Param(i) = f.slot
                                && let Some(max) = OpPlan::count(&pl.reply_checks, i)
                            {
                                let max = c_max(max);
                                line!(c, "    if ({d}.len > {max})");
                                line!(c, "        return IDL_E_PROTOCOL;");
                            }
                            line!(c, "    *{} = ({}){d}.len;", vs[j].name, lp.c());
                        }
                    }
                }
            }
        }
        line!(c, "    return IDL_OK;");
        line!(c, "}}");
    }

    /// Emits the checks of an in sequence's length and returns its count
    /// as a `uint32_t` expression.
    fn client_count(&self, c: &mut String, vs: &[Val<'_>], v: &Val<'_>) -> String {
        if let Some(l) = &v.len_name {
            return if *v.ty == Type::String && v.dir == Dir::InOut {
                format!("*{l}")
            } else {
                l.clone()
            };
        }
        let Some(j) = v.size_is else {
            return "0".into();
        };
        let lv = &vs[j];
        let e = Self::len_expr(lv);
        if let Type::Prim(p) = lv.ty {
            if p.signed() {
                line!(c, "    if ({e} < 0)");
                line!(c, "        return IDL_E_LIMIT;");
            }
            if p.size() == 8 {
                line!(c, "    if ((uint64_t)({e}) > UINT32_MAX)");
                line!(c, "        return IDL_E_LIMIT;");
            }
        }
        format!("(uint32_t)({e})")
    }

    fn server_stub(&self, c: &mut String, iface: &Interface, op: &Op) {
        let Some(pl) = self.plan(c, op) else { return };
        let vs = vals(op);
        let up = Self::op_name(iface, op).to_ascii_uppercase();
        let OpNames {
            server: server_f,
            msg: msg_t,
        } = self.op_names(iface, op);
        let impl_t = &self.names[&iface.name].impl_t;
        let l = &op.layout;
        let mut names = Names(
            ["s", "len", "impl", "self", "rq", "m", "st"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
        let fresh = |names: &mut Names, base: String| names.fresh(&base);
        // Each value's arguments to the implementation, in declaration order.
        let mut args: Vec<Vec<String>> = vec![Vec::new(); vs.len()];
        let mut decls: Vec<String> = Vec::new();
        // Checks in rt::Request's order: descriptors in record order, then
        // booleans in record order; then the room of the out values.
        let mut descs: Vec<String> = Vec::new();
        let mut bools: Vec<String> = Vec::new();
        let mut rooms: Vec<String> = Vec::new();
        let mut after: Vec<String> = Vec::new();
        // The length parameters' locals, by value index.
        let mut len_local: Vec<Option<String>> = vec![None; vs.len()];
        let fail = |st: &str| format!("if (st != IDL_OK)\n        return {st};");
        let parts = l
            .fields
            .iter()
            .filter(|f| match f.slot {
                Slot::Param(i) => vs[i].cap_name.is_some(),
                Slot::Ret => f.desc,
            })
            .count();
        let mut part = 0;
        for f in &l.fields {
            let vi = match f.slot {
                Slot::Param(i) => i,
                Slot::Ret => vs.len() - 1,
            };
            let v = &vs[vi];
            let n = &v.name;
            let off = format!("offsetof({msg_t}, {n})");
            match v.ty {
                Type::Prim(Prim::Bool) => {
                    let b = fresh(&mut names, format!("{n}_v"));
                    if v.dir == Dir::Out {
                        decls.push(format!("bool {b} = false;"));
                    } else {
                        decls.push(format!("bool {b};"));
                        bools.push(format!("st = idl_request_bool(&rq, {off}, &{b});"));
                        bools.push(fail("st"));
                    }
                    if v.dir == Dir::In {
                        args[vi].push(b);
                    } else {
                        args[vi].push(format!("&{b}"));
                        after.push(format!("m->{n} = {b};"));
                    }
                }
                Type::Prim(_) if v.dir == Dir::In => args[vi].push(format!("m->{n}")),
                Type::Prim(_) | Type::Struct(_) => args[vi].push(format!("&m->{n}")),
                Type::Array(..) => args[vi].push(format!("m->{n}")),
                Type::String | Type::Sequence(_) => {
                    let e = self.elem(v.ty);
                    let p = fresh(&mut names, format!("{n}_p"));
                    let cnt = fresh(&mut names, format!("{n}_n"));
                    if v.dir != Dir::Out {
                        decls.push(format!("void *{p};"));
                    }
                    decls.push(format!("uint32_t {cnt};"));
                    if v.dir != Dir::Out {
                        let utf8 = *v.ty == Type::String;
                        descs.push(format!(
                            "st = idl_request_in(&rq, {off}, sizeof({e}), _Alignof({e}), {utf8}, &{p}, &{cnt});"
                        ));
                        descs.push(fail("st"));
                    }
                    let Some(cap) = &v.cap_name else {
                        // In, or an inout sequence (rewritten in place).
                        args[vi].push(p.clone());
                        if v.len_name.is_some() {
                            args[vi].push(cnt.clone());
                        } else if let Some(j) = v.size_is
                            && let Type::Prim(lp) = vs[j].ty
                        {
                            let lname = fresh(&mut names, vs[j].name.clone());
                            if let Some(max) = OpPlan::count(&pl.server_checks, vi) {
                                let max = c_max(max);
                                descs.push(format!(
                                    "if ({cnt} > {max})\n        return IDL_BAD_VALUE;"
                                ));
                            }
                            decls.push(format!("{} {lname};", lp.c()));
                            descs.push(format!("{lname} = ({}){cnt};", lp.c()));
                            len_local[j] = Some(lname);
                        }
                        continue;
                    };
                    // Written into the string area: part `part` of `parts`.
                    let q = fresh(&mut names, format!("{n}_out"));
                    let qcap = fresh(&mut names, cap.clone());
                    decls.push(format!("void *{q};"));
                    decls.push(format!("uint32_t {qcap};"));
                    rooms.push(format!(
                        "{q} = idl_request_out(&rq, {part}, {parts}, sizeof({e}), _Alignof({e}), &{qcap});"
                    ));
                    part += 1;
                    if v.dir == Dir::InOut {
                        // An inout string: its room starts with the old value.
                        rooms.push(format!("if ({cnt} > {qcap})\n        return IDL_OVERFLOW;"));
                        rooms.push(format!("memcpy({q}, {p}, {cnt});"));
                    } else if v.len_name.is_some() {
                        rooms.push(format!("{cnt} = 0;"));
                    }
                    args[vi].push(q.clone());
                    if v.len_name.is_some() {
                        args[vi].push(format!("&{cnt}"));
                    } else if let Some(j) = v.size_is
                        && let Type::Prim(lp) = vs[j].ty
                    {
                        let lname = fresh(&mut names, vs[j].name.clone());
                        decls.push(format!("{} {lname} = 0;", lp.c()));
                        if lp.signed() {
                            after.push(format!(
                                "if ({lname} < 0)\n        return IDL_SERVER_FAILED;"
                            ));
                        }
                        if lp.size() == 8 {
                            after.push(format!(
                                "if ((uint64_t){lname} > UINT32_MAX)\n        return IDL_OVERFLOW;"
                            ));
                        }
                        after.push(format!("{cnt} = (uint32_t){lname};"));
                        len_local[j] = Some(lname);
                    }
                    args[vi].push(qcap.clone());
                    after.push(format!(
                        "st = idl_request_put(&rq, {off}, {q}, {cnt}, {qcap});"
                    ));
                    after.push(fail("st"));
                }
            }
        }
        // The length parameters of size_is: their locals, by value or by
        // pointer as declared.
        for (j, v) in vs.iter().enumerate() {
            if v.length_of.is_none() {
                continue;
            }
            let Type::Prim(lp) = v.ty else { continue };
            let lname = match &len_local[j] {
                Some(lname) => lname.clone(),
                None => {
                    // Its sequence has no field (not in a checked model).
                    let lname = fresh(&mut names, v.name.clone());
                    decls.push(format!("{} {lname} = 0;", lp.c()));
                    lname
                }
            };
            args[j].push(if v.dir == Dir::In {
                lname
            } else {
                format!("&{lname}")
            });
        }

        line!(
            c,
            "int {server_f}(idl_server *s, uint32_t len, const {impl_t} *impl, void *self)"
        );
        line!(c, "{{");
        line!(c, "    idl_request rq;");
        line!(
            c,
            "    int st = idl_request_begin(&rq, s, len, {up}_REQUEST_SIZE, {up}_SIZE);"
        );
        let uses_m = args
            .iter()
            .flatten()
            .chain(&bools)
            .chain(&after)
            .any(|a| a.contains("m->"));
        if uses_m {
            line!(c, "    {msg_t} *m = ({msg_t} *)rq.msg;");
        }
        for d in &decls {
            line!(c, "    {d}");
        }
        line!(c);
        line!(
            c,
            "    /* (1) check the request: its length, its descriptors, its booleans */"
        );
        line!(c, "    if (st != IDL_OK)");
        line!(c, "        return st;");
        for k in descs.iter().chain(&bools) {
            line!(c, "    {k}");
        }
        if !rooms.is_empty() {
            line!(
                c,
                "    /* the out values' room in the string area, after the in strings */"
            );
            for o in &rooms {
                line!(c, "    {o}");
            }
        }
        line!(c);
        line!(
            c,
            "    /* (2) call the implementation with pointers into the record */"
        );
        let fname = ident(&op.name);
        line!(c, "    if (impl->{fname} == NULL)");
        line!(c, "        return IDL_SERVER_FAILED;");
        let mut call = vec!["self".to_string()];
        call.extend(args.into_iter().flatten());
        line!(c, "    if (impl->{fname}({}) != 0)", call.join(", "));
        line!(c, "        return IDL_SERVER_FAILED;");
        if !after.is_empty() {
            line!(c);
            line!(
                c,
                "    /* (3) the results that are not in the record yet */"
            );
            for a in &after {
                line!(c, "    {a}");
            }
        }
        line!(c, "    return IDL_OK;");
        line!(c, "}}");
    }

    fn dispatch(&self, c: &mut String, iface: &Interface) {
        let IfaceNames {
            impl_t,
            dispatch: dispatch_f,
            ..
        } = &self.names[&iface.name];
        line!(
            c,
            "int {dispatch_f}(idl_server *s, uint16_t key, uint32_t len, const {impl_t} *impl, void *self, uint32_t *reply_len)"
        );
        line!(c, "{{");
        line!(c, "    switch (key) {{");
        for op in &iface.ops {
            let up = Self::op_name(iface, op).to_ascii_uppercase();
            let server_f = &self.op_names(iface, op).server;
            line!(c, "    case {up}_KEY:");
            line!(c, "        *reply_len = {up}_SIZE;");
            line!(c, "        return {server_f}(s, len, impl, self);");
        }
        line!(c, "    default:");
        line!(c, "        *reply_len = 0;");
        line!(c, "        return IDL_BAD_KEY;");
        line!(c, "    }}");
        line!(c, "}}");
    }

    fn serve(&self, c: &mut String, iface: &Interface) {
        let IfaceNames {
            impl_t,
            dispatch: dispatch_f,
            serve: serve_f,
            ..
        } = &self.names[&iface.name];
        line!(
            c,
            "/* The server loop (IDL4 §4): wait for a request, dispatch it, reply in"
        );
        line!(
            c,
            " * place. A refused request gets its status and an empty reply; the loop"
        );
        line!(
            c,
            " * goes on until the client closes the channel. Copy and edit freely. */"
        );
        line!(
            c,
            "int {serve_f}(idl_server *s, const {impl_t} *impl, void *self)"
        );
        line!(c, "{{");
        line!(c, "    uint16_t key;");
        line!(c, "    uint32_t len, reply_len;");
        line!(c, "    int st;");
        line!(c);
        line!(
            c,
            "    while ((st = idl_server_wait(s, &key, &len)) == IDL_OK) {{"
        );
        line!(
            c,
            "        st = {dispatch_f}(s, key, len, impl, self, &reply_len);"
        );
        line!(
            c,
            "        st = idl_server_reply(s, (uint16_t)st, reply_len);"
        );
        line!(c, "        if (st != IDL_OK)");
        line!(c, "            break;");
        line!(c, "    }}");
        line!(c, "    return st == IDL_E_CLOSED ? IDL_OK : st;");
        line!(c, "}}");
    }
}

/// A constant's value as a C expression of its type.
fn const_value(p: Prim, v: i128) -> String {
    let lit = if p == Prim::Bool {
        return if v != 0 {
            "true".into()
        } else {
            "false".into()
        };
    } else if v == i128::from(i64::MIN) {
        "(-INT64_C(9223372036854775807) - 1)".to_string()
    } else if v > i128::from(i64::MAX) {
        format!("UINT64_C({v})")
    } else if p.size() == 8 {
        if p.signed() {
            format!("INT64_C({v})")
        } else {
            format!("UINT64_C({v})")
        }
    } else if p == Prim::U32 {
        format!("{v}u")
    } else {
        v.to_string()
    };
    format!("(({}){lit})", p.c())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Layout, Param, Pos, StructDef};

    /// A count bound is spelled as the limit macro of its length's type.
    #[test]
    fn count_bounds_are_spelled_as_c_limits() {
        assert_eq!(c_max(i16::MAX as u32), "INT16_MAX");
        assert_eq!(c_max(u8::MAX as u32), "UINT8_MAX");
        assert_eq!(c_max(i32::MAX as u32), "INT32_MAX");
        assert_eq!(c_max(1), "1");
    }

    /// Lays out a record by docs/idl.md's rules (for hand-built models).
    fn layout(params: &[Param], ret: Option<&Type>, structs: &[StructDef]) -> Layout {
        fn size_align(t: &Type, structs: &[StructDef]) -> (u32, u32) {
            match t {
                Type::Prim(p) => (p.size(), p.size()),
                Type::Struct(id) => (structs[*id].size, structs[*id].align),
                Type::Array(e, n) => {
                    let (s, a) = size_align(e, structs);
                    (s * n, a)
                }
                Type::String | Type::Sequence(_) => (8, 4),
            }
        }
        let mut fields = Vec::new();
        let mut pos = 0u32;
        let mut align = 4;
        let mut request_size = 0;
        let (mut ins, mut outs) = (0, 0);
        let mut push = |slot: Slot, t: &Type, pos: &mut u32, align: &mut u32| {
            let (s, a) = size_align(t, structs);
            let off = pos.next_multiple_of(a);
            fields.push(Field {
                slot,
                offset: off,
                size: s,
                align: a,
                desc: t.is_indirect(),
            });
            *pos = off + s;
            *align = (*align).max(a);
        };
        for dir in [Dir::In, Dir::InOut, Dir::Out] {
            for (i, p) in params.iter().enumerate() {
                if p.dir == dir && p.length_of.is_none() {
                    push(Slot::Param(i), &p.ty, &mut pos, &mut align);
                    if p.ty.is_indirect() {
                        if dir != Dir::Out {
                            ins += 1;
                        }
                        if dir != Dir::In {
                            outs += 1;
                        }
                    }
                }
            }
            if dir == Dir::InOut {
                request_size = pos;
            }
        }
        if let Some(t) = ret {
            push(Slot::Ret, t, &mut pos, &mut align);
            if t.is_indirect() {
                outs += 1;
            }
        }
        Layout {
            fields,
            request_size,
            size: pos.next_multiple_of(align),
            align,
            in_strings: ins,
            out_strings: outs,
        }
    }

    fn param(name: &str, dir: Dir, ty: Type) -> Param {
        Param {
            name: name.into(),
            dir,
            ty,
            size_is: None,
            length_of: None,
            pos: Pos::default(),
        }
    }

    fn op(
        name: &str,
        key: u16,
        ret: Option<Type>,
        params: Vec<Param>,
        structs: &[StructDef],
    ) -> Op {
        let layout = layout(&params, ret.as_ref(), structs);
        Op {
            name: name.into(),
            key,
            ret,
            params,
            layout,
            pos: Pos::default(),
        }
    }

    fn i32t() -> Type {
        Type::Prim(Prim::I32)
    }

    /// The paper's pfs interface, built by hand.
    fn pfs() -> Idl {
        let mut write = vec![
            param("handle", Dir::In, i32t()),
            param("pos", Dir::InOut, i32t()),
            param("len", Dir::In, i32t()),
            param("data_size", Dir::In, i32t()),
            param("data", Dir::In, Type::Sequence(Box::new(i32t()))),
        ];
        write[3].length_of = Some(4);
        write[4].size_is = Some(3);
        let mut dir = vec![
            param("handle", Dir::In, i32t()),
            param("pos", Dir::InOut, i32t()),
            param("count", Dir::In, i32t()),
            param("data_size", Dir::Out, i32t()),
            param("data", Dir::Out, Type::Sequence(Box::new(i32t()))),
        ];
        dir[3].length_of = Some(4);
        dir[4].size_is = Some(3);
        let open = ["client", "fobj", "flags", "mode"]
            .iter()
            .map(|n| param(n, Dir::In, i32t()))
            .chain([param("handle", Dir::Out, i32t())])
            .collect();
        Idl {
            structs: vec![],
            interfaces: vec![Interface {
                name: "pfs".into(),
                ops: vec![
                    op("pfs_open", 0, Some(i32t()), open, &[]),
                    op("pfs_write", 1, Some(i32t()), write, &[]),
                    op("pfs_get_direntries", 2, Some(i32t()), dir, &[]),
                ],
                pos: Pos::default(),
            }],
            consts: vec![],
        }
    }

    /// An interface with every kind of parameter.
    fn kinds() -> Idl {
        let structs = vec![StructDef {
            name: "point".into(),
            fields: vec![
                ("x".into(), Type::Prim(Prim::I16)),
                ("y".into(), Type::Prim(Prim::I64)),
            ],
            size: 16,
            align: 8,
            pos: Pos::default(),
        }];
        let arr = Type::Array(Box::new(Type::Prim(Prim::U16)), 3);
        let seq = Type::Sequence(Box::new(Type::Prim(Prim::U64)));
        let mut all = vec![param("c", Dir::In, Type::Prim(Prim::Char))];
        for (d, tag) in [(Dir::In, "i"), (Dir::InOut, "io"), (Dir::Out, "o")] {
            for (t, n) in [
                (Type::Prim(Prim::U8), "u8"),
                (Type::Prim(Prim::Bool), "b"),
                (Type::Prim(Prim::I64), "i64"),
                (Type::Struct(0), "pt"),
                (arr.clone(), "arr"),
                (Type::String, "s"),
                (seq.clone(), "seq"),
            ] {
                all.push(param(&format!("{n}_{tag}"), d, t));
            }
        }
        let mut sized = vec![
            param("n", Dir::Out, Type::Prim(Prim::U16)),
            param("int", Dir::Out, Type::Sequence(Box::new(Type::Struct(0)))),
        ];
        sized[0].length_of = Some(1);
        sized[1].size_is = Some(0);
        Idl {
            interfaces: vec![Interface {
                name: "kinds".into(),
                ops: vec![
                    op("null", 0, None, vec![], &structs),
                    op("all", 1, Some(Type::Prim(Prim::Bool)), all, &structs),
                    op("sized", 2, Some(Type::Prim(Prim::U64)), sized, &structs),
                    op("get", 3, Some(Type::Struct(0)), vec![], &structs),
                ],
                pos: Pos::default(),
            }],
            structs,
            consts: vec![
                ("K".into(), Prim::I32, 4),
                ("BIG".into(), Prim::U64, u64::MAX.into()),
                ("MIN".into(), Prim::I64, i64::MIN.into()),
            ],
        }
    }

    #[test]
    fn pfs_write_record_matches_the_model() {
        let (h, c) = generate(&pfs(), "pfs");
        assert!(h.contains("#define PFS_WRITE_KEY 1"));
        assert!(h.contains(
            "int pfs_write(idl_client *c, int32_t handle, int32_t *pos, int32_t len, int32_t data_size, const int32_t *data, int32_t *ret);"
        ));
        assert!(h.contains("IDL_STATIC_ASSERT(offsetof(pfs_write_msg, pos) == 16"));
        assert!(h.contains(
            "int (*pfs_get_direntries)(void *self, int32_t handle, int32_t *pos, int32_t count, int32_t *data_size, int32_t *data, uint32_t data_cap, int32_t *ret);"
        ));
        assert!(c.contains("case PFS_GET_DIRENTRIES_KEY:"));
        assert!(c.contains("int pfs_serve(idl_server *s, const pfs_impl *impl, void *self)"));
    }

    #[test]
    fn names_collide_with_nothing() {
        let idl = kinds();
        let (h, _) = generate(&idl, "kinds");
        assert!(
            h.contains("int_"),
            "a C keyword as a name gets an underscore"
        );
        assert!(h.contains("#define MIN ((int64_t)(-INT64_C(9223372036854775807) - 1))"));
    }

    /// Compiles the generated files with gcc -Wall -Wextra -Werror, if gcc
    /// is installed (the interop tests require it).
    #[test]
    fn generated_c_compiles_cleanly() {
        if std::process::Command::new("gcc")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipped: gcc is not installed");
            return;
        }
        let dir = std::env::temp_dir().join(format!("idl-gen-c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let rt = concat!(env!("CARGO_MANIFEST_DIR"), "/c");
        for (stem, idl) in [("pfs", pfs()), ("kinds", kinds())] {
            let (h, c) = generate(&idl, stem);
            std::fs::write(dir.join(format!("{stem}.h")), h).expect("write header");
            std::fs::write(dir.join(format!("{stem}.c")), c).expect("write source");
            let out = std::process::Command::new("gcc")
                .args([
                    "-std=c11",
                    "-Wall",
                    "-Wextra",
                    "-Werror",
                    "-pedantic",
                    "-c",
                    "-o",
                ])
                .arg(dir.join(format!("{stem}.o")))
                .arg("-I")
                .arg(rt)
                .arg(dir.join(format!("{stem}.c")))
                .output()
                .expect("run gcc");
            assert!(
                out.status.success(),
                "gcc rejected {stem}.c:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if std::env::var_os("IDL_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            eprintln!("kept {}", dir.display());
        }
    }
}
