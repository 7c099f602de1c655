//! The static checks and the message layout: a syntax tree ([`Ast`]) to
//! the checked model ([`Idl`]).
//!
//! In order of declaration (a name is used after it is declared, as in C):
//! - names: every type and constant is declared once in its scope (a
//!   module's or interface's names are joined with `_`: `M::S` is `M_S`);
//!   operations, parameters and fields are unique where they live; no name
//!   is a keyword of Rust or C, which the generated code is written in;
//! - types: scoped names resolve through the enclosing scopes, innermost
//!   first; structs get C's size and alignment; a struct's fields, a
//!   sequence's elements and an array's elements are plain data (no
//!   `boolean`, no string or sequence), so any bytes a client writes are a
//!   valid value; `boolean` is a scalar parameter or return value only;
//! - directions: `[in] T x`; `[in, out] T *x` and `[out] T *x` (or, CORBA's
//!   way, without the `*`); `[in] T *x` without `size_is` is rejected (pass
//!   it by value, or give `size_is`);
//! - `size_is(n)`: `[in, size_is(n)] T *p` needs `n` an `[in]` integer,
//!   `[out, size_is(n)] T **p` an `[out]` integer (`T *n`), an inout
//!   sequence an `[in]` or `[in, out]` one; `n` is no sequence, and serves
//!   one sequence only. `n` then gets no field: its value is the
//!   descriptor's length;
//! - the layout of each operation's record by the rules of
//!   [`crate::model::Layout`] (docs/idl.md, "The message layout"), within
//!   the [`Limits`].

use std::collections::HashMap;

use crate::error::{CompileError, ErrorKind};
use crate::model::{
    Dir, Field, Idl, Interface, Layout, LimitName, Limits, Op, Param, Pos, Prim, Slot, StructDef,
    StructId, Type,
};
use crate::parser::{Ast, Declarator, Def, Expr, ExprKind, OpDecl, TypeKind, TypeSpec};

/// The deepest nesting of types accepted (arrays of arrays, through
/// typedefs).
const MAX_TYPE_DEPTH: u32 = 32;

/// Checks `ast` and lays out every operation within `limits`.
pub(crate) fn check(ast: &Ast, limits: &Limits) -> Result<Idl, CompileError> {
    let mut c = Checker {
        limits,
        names: HashMap::new(),
        folded: HashMap::new(),
        const_pos: Vec::new(),
        field_pos: Vec::new(),
        idl: Idl::default(),
    };
    c.defs(&ast.defs, &[])?;
    crate::clash::check(&c.idl, &c.const_pos, &c.field_pos)?;
    Ok(c.idl)
}

type Res<T> = Result<T, CompileError>;

/// What a declared name stands for.
#[derive(Clone, Debug)]
enum Decl {
    Module,
    Interface,
    Struct(StructId),
    Type(Type),
    Const(i128),
}

impl Decl {
    fn what(&self) -> &'static str {
        match self {
            Decl::Module => "a module",
            Decl::Interface => "an interface",
            Decl::Struct(_) => "a struct",
            Decl::Type(_) => "a typedef",
            Decl::Const(..) => "a constant",
        }
    }

    /// What it is, without the article ([`Decl::what`]'s noun).
    fn kind(&self) -> &'static str {
        let what = self.what();
        what.split_once(' ').map_or(what, |(_, noun)| noun)
    }
}

struct Checker<'a> {
    limits: &'a Limits,
    /// Every declared name, scoped names joined with `_`.
    names: HashMap<String, (Decl, Pos)>,
    /// The same names folded to lower case ([`crate::clash::fold`]): the
    /// name as declared, where, and what it names.
    folded: HashMap<String, (String, Pos, &'static str)>,
    /// Each constant's position, in `idl.consts` order.
    const_pos: Vec<Pos>,
    /// Each struct's fields' positions, in `idl.structs` order.
    field_pos: Vec<Vec<Pos>>,
    idl: Idl,
}

/// Keywords of C (beyond the IDL's own): names the generated C could not
/// use. Rust's are [`crate::gen_rust::RUST_KEYWORDS`].
#[rustfmt::skip]
const C_KEYWORDS: &[&str] = &[
    "auto", "bool", "break", "case", "char", "const", "continue", "default", "do", "double",
    "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "_Bool", "_Complex", "_Imaginary",
    "_Alignas", "_Alignof", "_Atomic", "_Generic", "_Noreturn", "_Static_assert",
    "_Thread_local",
];

fn round_up(x: u64, a: u32) -> u64 {
    x.div_ceil(u64::from(a)) * u64::from(a)
}

/// Why `t` is not plain data, if it is not: `"boolean"`, `"string"` or
/// `"sequence"`.
fn not_plain(t: &Type) -> Option<&'static str> {
    match t {
        Type::Prim(Prim::Bool) => Some("boolean"),
        Type::Prim(_) | Type::Struct(_) => None,
        Type::Array(e, _) => not_plain(e),
        Type::String => Some("string"),
        Type::Sequence(_) => Some("sequence"),
    }
}

fn type_depth(t: &Type) -> u32 {
    match t {
        Type::Array(e, _) | Type::Sequence(e) => 1 + type_depth(e),
        _ => 0,
    }
}

fn is_integer(t: &Type) -> bool {
    matches!(t, Type::Prim(p) if !matches!(p, Prim::Bool | Prim::Char))
}

/// The message for a type that is not plain data where plain data is
/// needed.
fn plain_msg(problem: &str) -> &'static str {
    if problem == "boolean" {
        "boolean is only allowed as a scalar parameter or return value; use octet"
    } else {
        "strings and sequences are only allowed as parameters of their own (nested indirect values are not supported)"
    }
}

impl Checker<'_> {
    fn structs_size_align(&self, t: &Type) -> (u64, u32) {
        match t {
            Type::Prim(p) => (u64::from(p.size()), p.size()),
            Type::Struct(id) => {
                let s = &self.idl.structs[*id];
                (u64::from(s.size), s.align)
            }
            Type::Array(e, n) => {
                let (s, a) = self.structs_size_align(e);
                (s.saturating_mul(u64::from(*n)), a)
            }
            Type::String | Type::Sequence(_) => (8, 4),
        }
    }

    /// Checks that `name` can be used in generated code.
    fn usable(&self, name: &str, pos: Pos) -> Res<()> {
        if name == "_" {
            return Err(CompileError::check(
                pos,
                "`_` cannot name anything in the generated code; choose another name",
            ));
        }
        if let Some(why) = crate::clash::reserved(name) {
            return Err(CompileError::new(
                pos,
                ErrorKind::Reserved {
                    name: name.to_string(),
                    why,
                },
            ));
        }
        if crate::gen_rust::RUST_KEYWORDS.contains(&name) || C_KEYWORDS.contains(&name) {
            return Err(CompileError::check(
                pos,
                format!(
                    "`{name}` is a keyword of Rust or C, which the generated code is written in; choose another name"
                ),
            ));
        }
        Ok(())
    }

    /// Declares `full` (a joined scoped name) as `decl`.
    fn declare(&mut self, full: String, pos: Pos, decl: Decl) -> Res<()> {
        if let Some((old, at)) = self.names.get(&full) {
            if matches!((old, &decl), (Decl::Module, Decl::Module)) {
                return Ok(()); // a module may be reopened
            }
            return Err(CompileError::check(
                pos,
                format!("`{full}` is already declared at {at} (as {})", old.what()),
            ));
        }
        let kind = decl.kind();
        let key = crate::clash::fold(&full);
        if let Some((other, at, what)) = self.folded.get(&key) {
            return Err(CompileError::clash(
                pos,
                format!("{kind} `{full}`"),
                format!("{what} `{other}`"),
                *at,
                crate::clash::CASE_ONLY,
            ));
        }
        self.folded.insert(key, (full.clone(), pos, kind));
        self.names.insert(full, (decl, pos));
        Ok(())
    }

    /// Resolves a scoped name from `scope`, innermost scope first.
    fn lookup(&self, parts: &[String], abs: bool, scope: &[String]) -> Option<&Decl> {
        let joined = parts.join("_");
        if abs {
            return self.names.get(&joined).map(|d| &d.0);
        }
        (0..=scope.len()).rev().find_map(|k| {
            let mut full = scope[..k].join("_");
            if !full.is_empty() {
                full.push('_');
            }
            full.push_str(&joined);
            self.names.get(&full).map(|d| &d.0)
        })
    }

    fn defs(&mut self, defs: &[Def], scope: &[String]) -> Res<()> {
        for d in defs {
            self.def(d, scope)?;
        }
        Ok(())
    }

    fn def(&mut self, d: &Def, scope: &[String]) -> Res<()> {
        match d {
            Def::Module { name, pos, defs } => {
                self.usable(name, *pos)?;
                self.declare(scoped(scope, name), *pos, Decl::Module)?;
                let inner = [scope, std::slice::from_ref(name)].concat();
                self.defs(defs, &inner)
            }
            Def::Interface { name, pos, defs } => self.interface(name, *pos, defs, scope),
            Def::Struct { name, pos, members } => self.struct_def(name, *pos, members, scope),
            Def::Typedef(ts, decls) => {
                let base = self.resolve(ts, scope)?;
                let Some(base) = base else {
                    return Err(CompileError::check(ts.pos, "a typedef cannot name `void`"));
                };
                for d in decls {
                    self.usable(&d.name, d.pos)?;
                    if d.stars > 0 {
                        return Err(CompileError::unsupported(
                            d.pos,
                            format!("a pointer typedef (`*{}`)", d.name),
                            "pointers are written in parameter declarations only",
                        ));
                    }
                    let t = self.array(base.clone(), d, scope)?;
                    self.declare(scoped(scope, &d.name), d.pos, Decl::Type(t))?;
                }
                Ok(())
            }
            Def::Const {
                ty,
                name,
                pos,
                value,
            } => {
                self.usable(name, *pos)?;
                let t = self.resolve(ty, scope)?;
                let prim = match t {
                    Some(Type::Prim(p)) if p != Prim::Bool => p,
                    _ => {
                        return Err(CompileError::check(
                            ty.pos,
                            format!("constant `{name}` must have an integer type"),
                        ));
                    }
                };
                let v = self.eval(value, scope)?;
                let (lo, hi) = prim_range(prim);
                if v < lo || v > hi {
                    return Err(CompileError::check(
                        value.pos,
                        format!(
                            "constant `{name}` = {v} does not fit its type {} ({lo} to {hi})",
                            prim.rust()
                        ),
                    ));
                }
                let full = scoped(scope, name);
                self.declare(full.clone(), *pos, Decl::Const(v))?;
                self.idl.consts.push((full, prim, v));
                self.const_pos.push(*pos);
                Ok(())
            }
            Def::Op(o) => Err(CompileError::syntax(
                o.pos,
                "an operation must be declared inside an interface",
            )),
        }
    }

    /// Resolves a type; `None` is `void`.
    fn resolve(&self, ts: &TypeSpec, scope: &[String]) -> Res<Option<Type>> {
        Ok(Some(match &ts.kind {
            TypeKind::Prim(p) => Type::Prim(*p),
            TypeKind::Void => return Ok(None),
            TypeKind::String => Type::String,
            TypeKind::Sequence(e) => {
                let Some(elem) = self.resolve(e, scope)? else {
                    return Err(CompileError::check(e.pos, "a sequence of `void`"));
                };
                if let Some(p) = not_plain(&elem) {
                    return Err(CompileError::check(
                        e.pos,
                        format!("a sequence's elements must be plain data: {}", plain_msg(p)),
                    ));
                }
                if type_depth(&elem) >= MAX_TYPE_DEPTH {
                    return Err(too_deep(ts.pos));
                }
                Type::Sequence(Box::new(elem))
            }
            TypeKind::Named(parts, abs) => {
                let shown = parts.join("::");
                match self.lookup(parts, *abs, scope) {
                    None => {
                        return Err(CompileError::check(
                            ts.pos,
                            format!("undeclared type `{shown}`"),
                        ));
                    }
                    Some(Decl::Struct(id)) => Type::Struct(*id),
                    Some(Decl::Type(t)) => t.clone(),
                    Some(Decl::Interface) => {
                        return Err(CompileError::unsupported(
                            ts.pos,
                            format!("interface `{shown}` as a type"),
                            "object references are outside the IDL4 subset",
                        ));
                    }
                    Some(d) => {
                        return Err(CompileError::check(
                            ts.pos,
                            format!("`{shown}` is {}, not a type", d.what()),
                        ));
                    }
                }
            }
        }))
    }

    /// `base` with the declarator's array dimensions.
    fn array(&self, base: Type, d: &Declarator, scope: &[String]) -> Res<Type> {
        let mut t = base;
        for e in d.dims.iter().rev() {
            let n = self.eval(e, scope)?;
            if !(1..=i128::from(u32::MAX)).contains(&n) {
                return Err(CompileError::check(
                    e.pos,
                    format!(
                        "array `{}` has size {n}: an array size is 1 to {}",
                        d.name,
                        u32::MAX
                    ),
                ));
            }
            t = Type::Array(Box::new(t), n as u32);
            if type_depth(&t) > MAX_TYPE_DEPTH {
                return Err(too_deep(d.pos));
            }
            if self.structs_size_align(&t).0 > u64::from(u32::MAX) {
                return Err(CompileError::check(
                    e.pos,
                    format!("array `{}` is larger than 4 GiB", d.name),
                ));
            }
        }
        Ok(t)
    }

    /// Evaluates a constant expression. Values stay within
    /// `-2^63 ..= 2^64 - 1` (what an `int64_t` or a `uint64_t` holds).
    fn eval(&self, e: &Expr, scope: &[String]) -> Res<i128> {
        let v = match &e.kind {
            ExprKind::Int(v) => i128::from(*v),
            ExprKind::Name(parts, abs) => match self.lookup(parts, *abs, scope) {
                Some(Decl::Const(v)) => *v,
                Some(d) => {
                    return Err(CompileError::check(
                        e.pos,
                        format!("`{}` is {}, not a constant", parts.join("::"), d.what()),
                    ));
                }
                None => {
                    return Err(CompileError::check(
                        e.pos,
                        format!("undeclared constant `{}`", parts.join("::")),
                    ));
                }
            },
            ExprKind::Unary(op, a) => {
                let a = self.eval(a, scope)?;
                match op {
                    '-' => -a,
                    '~' => !a,
                    _ => a,
                }
            }
            ExprKind::Chain(first, rest) => {
                let mut a = self.eval(first, scope)?;
                for (op, pos, b) in rest {
                    let b = self.eval(b, scope)?;
                    a = binop(op, a, b, *pos)?;
                    in_range(a, *pos)?;
                }
                a
            }
        };
        in_range(v, e.pos)?;
        Ok(v)
    }

    fn struct_def(
        &mut self,
        name: &str,
        pos: Pos,
        members: &[(TypeSpec, Declarator)],
        scope: &[String],
    ) -> Res<()> {
        self.usable(name, pos)?;
        let full = scoped(scope, name);
        if let Some((old, at)) = self.names.get(&full) {
            return Err(CompileError::check(
                pos,
                format!("`{full}` is already declared at {at} (as {})", old.what()),
            ));
        }
        if members.is_empty() {
            return Err(CompileError::check(
                pos,
                format!("struct `{name}` has no fields"),
            ));
        }
        let mut fields: Vec<(String, Type)> = Vec::new();
        let mut field_pos: Vec<Pos> = Vec::new();
        let mut field_index: HashMap<&str, usize> = HashMap::new();
        let (mut off, mut align) = (0u64, 1u32);
        for (ts, d) in members {
            self.usable(&d.name, d.pos)?;
            if let Some(&k) = field_index.get(d.name.as_str()) {
                return Err(CompileError::check(
                    d.pos,
                    format!(
                        "struct `{name}` already has a field `{}` (at {})",
                        d.name, field_pos[k]
                    ),
                ));
            }
            if let Some(k) = fields
                .iter()
                .position(|(f, _)| crate::clash::fold(f) == crate::clash::fold(&d.name))
            {
                return Err(CompileError::clash(
                    d.pos,
                    format!("field `{}` of struct `{name}`", d.name),
                    format!("field `{}`", fields[k].0),
                    field_pos[k],
                    crate::clash::CASE_ONLY,
                ));
            }
            if let TypeKind::Named(parts, false) = &ts.kind
                && parts.len() == 1
                && parts[0] == name
            {
                return Err(CompileError::check(
                    ts.pos,
                    format!("struct `{name}` cannot contain itself"),
                ));
            }
            let Some(base) = self.resolve(ts, scope)? else {
                return Err(CompileError::check(
                    ts.pos,
                    format!("field `{}` cannot be `void`", d.name),
                ));
            };
            if d.stars > 0 {
                return Err(CompileError::check(
                    d.pos,
                    format!(
                        "field `{}` of struct `{name}` is a pointer: a struct's fields are plain data",
                        d.name
                    ),
                ));
            }
            let t = self.array(base, d, scope)?;
            if let Some(p) = not_plain(&t) {
                return Err(CompileError::check(
                    d.pos,
                    format!(
                        "field `{}` of struct `{name}`: {} (a struct's fields are plain data)",
                        d.name,
                        plain_msg(p)
                    ),
                ));
            }
            let (s, a) = self.structs_size_align(&t);
            off = round_up(off, a).saturating_add(s);
            align = align.max(a);
            field_index.insert(&d.name, fields.len());
            fields.push((d.name.clone(), t));
            field_pos.push(d.pos);
        }
        let size = round_up(off, align);
        if size > u64::from(u32::MAX) {
            return Err(CompileError::check(
                pos,
                format!("struct `{name}` is larger than 4 GiB"),
            ));
        }
        let id = self.idl.structs.len();
        self.field_pos.push(field_pos);
        self.idl.structs.push(StructDef {
            name: full.clone(),
            fields,
            size: size as u32,
            align,
            pos,
        });
        self.declare(full, pos, Decl::Struct(id))
    }

    fn interface(&mut self, name: &str, pos: Pos, defs: &[Def], scope: &[String]) -> Res<()> {
        self.usable(name, pos)?;
        let full = scoped(scope, name);
        self.declare(full.clone(), pos, Decl::Interface)?;
        let inner = [scope, &[name.to_string()]].concat();
        let mut ops: Vec<Op> = Vec::new();
        let mut op_index: HashMap<&str, usize> = HashMap::new();
        for d in defs {
            let Def::Op(o) = d else {
                self.def(d, &inner)?;
                continue;
            };
            if let Some(old) = op_index.get(o.name.as_str()).map(|&k| &ops[k]) {
                return Err(CompileError::check(
                    o.pos,
                    format!(
                        "interface `{name}` already has an operation `{}` (at {})",
                        o.name, old.pos
                    ),
                ));
            }
            if let Some(old) = ops
                .iter()
                .find(|p| crate::clash::fold(&p.name) == crate::clash::fold(&o.name))
            {
                return Err(CompileError::clash(
                    o.pos,
                    format!("operation `{}` of interface `{name}`", o.name),
                    format!("operation `{}`", old.name),
                    old.pos,
                    crate::clash::CASE_ONLY,
                ));
            }
            let Ok(key) = u16::try_from(ops.len()) else {
                return Err(CompileError::limit(
                    o.pos,
                    format!("interface `{name}` has more than 65536 operations"),
                ));
            };
            op_index.insert(&o.name, ops.len());
            ops.push(self.op(o, key, &inner)?);
        }
        self.idl.interfaces.push(Interface {
            name: full,
            ops,
            pos,
        });
        Ok(())
    }

    fn op(&self, o: &OpDecl, key: u16, scope: &[String]) -> Res<Op> {
        let name = &o.name;
        self.usable(name, o.pos)?;
        let ret = self.resolve(&o.ret, scope)?;
        match &ret {
            Some(Type::Array(..)) => {
                return Err(CompileError::check(
                    o.ret.pos,
                    format!("`{name}` cannot return an array (C cannot): use an [out] parameter"),
                ));
            }
            Some(t @ (Type::String | Type::Sequence(_))) => {
                let what = if *t == Type::String {
                    "a string"
                } else {
                    "a sequence"
                };
                return Err(CompileError::check(
                    o.ret.pos,
                    format!("`{name}` cannot return {what}: use an [out] parameter"),
                ));
            }
            _ => {}
        }
        let mut params: Vec<Param> = Vec::new();
        // Each parameter's `*` count, for the size_is rules.
        let mut stars: Vec<u32> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for pd in &o.params {
            let d = &pd.decl;
            let pname = &d.name;
            self.usable(pname, d.pos)?;
            if let Some(old) = index.get(pname.as_str()).map(|&k| &params[k]) {
                return Err(CompileError::check(
                    d.pos,
                    format!(
                        "`{name}` already has a parameter `{pname}` (at {})",
                        old.pos
                    ),
                ));
            }
            if let Some(old) = params
                .iter()
                .find(|p| crate::clash::fold(&p.name) == crate::clash::fold(pname))
            {
                return Err(CompileError::clash(
                    d.pos,
                    format!("parameter `{pname}` of `{name}`"),
                    format!("parameter `{}`", old.name),
                    old.pos,
                    crate::clash::CASE_ONLY,
                ));
            }
            let Some((dir, _)) = pd.dir else {
                return Err(CompileError::check(
                    d.pos,
                    format!(
                        "parameter `{pname}` of `{name}` has no direction: write [in], [out] or [in, out] (or in, out, inout)"
                    ),
                ));
            };
            let Some(base) = self.resolve(&pd.ty, scope)? else {
                return Err(CompileError::check(
                    pd.ty.pos,
                    format!("parameter `{pname}` cannot be `void`"),
                ));
            };
            let mut ty = self.array(base, d, scope)?;
            let max_out_stars = if dir == Dir::Out { 2 } else { 1 };
            if let Some(spos) = pd.string {
                if pd.size_is.is_some() {
                    return Err(CompileError::check(
                        spos,
                        format!(
                            "parameter `{pname}`: [string] and size_is together: a string's length is its own"
                        ),
                    ));
                }
                if !matches!(ty, Type::Prim(Prim::Char | Prim::U8))
                    || d.stars == 0
                    || d.stars > max_out_stars
                {
                    return Err(CompileError::check(
                        spos,
                        format!("[string] parameter `{pname}` must be declared `char *{pname}`"),
                    ));
                }
                ty = Type::String;
            } else if let Some((_, npos)) = &pd.size_is {
                if let Some(p) = not_plain(&ty) {
                    return Err(CompileError::check(
                        pd.ty.pos,
                        format!(
                            "the elements of sequence `{pname}` must be plain data: {}",
                            plain_msg(p)
                        ),
                    ));
                }
                if d.stars == 0 || d.stars > max_out_stars {
                    let want = if dir == Dir::Out { "T **" } else { "T *" };
                    return Err(CompileError::check(
                        *npos,
                        format!("size_is on `{pname}` needs a pointer: declare it `{want}{pname}`"),
                    ));
                }
                ty = Type::Sequence(Box::new(ty));
            } else if dir == Dir::In && d.stars > 0 {
                return Err(CompileError::check(
                    d.pos,
                    format!(
                        "[in] parameter `{pname}` of `{name}` is a pointer without size_is: pass it by value, or give size_is(n) to send a sequence"
                    ),
                ));
            } else if d.stars > 1 {
                return Err(CompileError::check(
                    d.pos,
                    format!(
                        "parameter `{pname}` has too many `*`: an out or inout value is `T *{pname}`"
                    ),
                ));
            } else if dir != Dir::In
                && !pd.keyword
                && d.stars == 0
                && !matches!(ty, Type::String | Type::Sequence(_) | Type::Array(..))
            {
                // As MIDL: an [out] or [in, out] value the server gives back
                // is reached through a pointer; CORBA's `out T x` needs none,
                // and neither do strings, sequences and arrays (declared
                // with dimensions or through a typedef: C passes an array
                // by reference either way).
                let (attrs, kw) = if dir == Dir::Out {
                    ("[out]", "out")
                } else {
                    ("[in, out]", "inout")
                };
                return Err(CompileError::check(
                    d.pos,
                    format!(
                        "{attrs} parameter `{pname}` of `{name}` is passed by value, so nothing could come back through it: declare it `T *{pname}`, or write `{kw} T {pname}` (CORBA)"
                    ),
                ));
            }
            if matches!(not_plain(&ty), Some("boolean")) && ty != Type::Prim(Prim::Bool) {
                let t_pos = pd.ty.pos;
                return Err(CompileError::check(
                    t_pos,
                    format!("parameter `{pname}`: {}", plain_msg("boolean")),
                ));
            }
            index.insert(pname, params.len());
            params.push(Param {
                name: pname.clone(),
                dir,
                ty,
                size_is: None,
                length_of: None,
                pos: d.pos,
            });
            stars.push(d.stars);
        }
        // size_is: link each sequence to its length parameter.
        for (i, pd) in o.params.iter().enumerate() {
            let Some((n, npos)) = &pd.size_is else {
                continue;
            };
            let npos = *npos;
            let seq_dir = params[i].dir;
            let Some(&j) = index.get(n.as_str()) else {
                return Err(CompileError::check(
                    npos,
                    format!("size_is({n}): `{name}` has no parameter `{n}`"),
                ));
            };
            if j == i {
                return Err(CompileError::check(
                    npos,
                    format!("size_is({n}): a sequence cannot be its own length"),
                ));
            }
            let pj = &params[j];
            if pj.ty.is_indirect() {
                return Err(CompileError::check(
                    npos,
                    format!(
                        "size_is({n}): `{n}` is itself a string or sequence; a length is an integer parameter"
                    ),
                ));
            }
            let (ok, want) = match seq_dir {
                Dir::In => (pj.dir == Dir::In, "an [in]"),
                Dir::Out => (pj.dir == Dir::Out, "an [out]"),
                Dir::InOut => (pj.dir != Dir::Out, "an [in] or [in, out]"),
            };
            if !ok || !is_integer(&pj.ty) || (pj.dir == Dir::In && stars[j] > 0) {
                return Err(CompileError::check(
                    npos,
                    format!("size_is({n}): `{n}` is not {want} integer parameter of {name}"),
                ));
            }
            if let Some(k) = pj.length_of {
                return Err(CompileError::check(
                    npos,
                    format!(
                        "size_is({n}): `{n}` is already the length of `{}`",
                        params[k].name
                    ),
                ));
            }
            params[j].length_of = Some(i);
            params[i].size_is = Some(j);
        }
        let layout = self.layout(name, o.pos, &params, ret.as_ref())?;
        Ok(Op {
            name: name.clone(),
            key,
            ret,
            params,
            layout,
            pos: o.pos,
        })
    }

    /// The record of an operation (model::Layout's rules), within the
    /// limits.
    fn layout(&self, name: &str, pos: Pos, params: &[Param], ret: Option<&Type>) -> Res<Layout> {
        let mut fields = Vec::new();
        let (mut off, mut align) = (0u64, 4u32);
        let mut place = |slot: Slot, t: &Type, off: &mut u64| {
            let (s, a) = self.structs_size_align(t);
            let at = round_up(*off, a);
            // Offsets past u32 fail the max_record check below.
            let clip = |x: u64| x.min(u64::from(u32::MAX)) as u32;
            fields.push(Field {
                slot,
                offset: clip(at),
                size: clip(s),
                align: a,
                desc: t.is_indirect(),
            });
            *off = at.saturating_add(s);
            align = align.max(a);
        };
        let mut request_size = 0;
        for dir in [Dir::In, Dir::InOut, Dir::Out] {
            for (i, p) in params.iter().enumerate() {
                if p.dir == dir && p.length_of.is_none() {
                    place(Slot::Param(i), &p.ty, &mut off);
                }
            }
            if dir == Dir::InOut {
                request_size = off;
            }
        }
        if let Some(t) = ret {
            place(Slot::Ret, t, &mut off);
        }
        let size = round_up(off, align);
        if size > u64::from(self.limits.max_record) {
            return Err(CompileError::limit_of(
                pos,
                format!(
                    "the message record of `{name}` is {size} bytes, more than the limit of {}",
                    self.limits.max_record
                ),
                LimitName::MaxRecord,
            ));
        }
        let count = |f: fn(Dir) -> bool| {
            params
                .iter()
                .filter(|p| p.ty.is_indirect() && f(p.dir))
                .count() as u32
        };
        let in_strings = count(|d| d != Dir::Out);
        let out_strings = count(|d| d != Dir::In);
        for (n, what) in [(in_strings, "request"), (out_strings, "reply")] {
            if n > self.limits.max_strings {
                return Err(CompileError::limit_of(
                    pos,
                    format!(
                        "`{name}` has {n} strings and sequences in its {what}, more than the limit of {}",
                        self.limits.max_strings
                    ),
                    LimitName::MaxStrings,
                ));
            }
        }
        Ok(Layout {
            fields,
            request_size: request_size as u32,
            size: size as u32,
            align,
            in_strings,
            out_strings,
        })
    }
}

fn scoped(scope: &[String], name: &str) -> String {
    let mut s = scope.join("_");
    if !s.is_empty() {
        s.push('_');
    }
    s.push_str(name);
    s
}

fn too_deep(pos: Pos) -> CompileError {
    CompileError::check(
        pos,
        format!("type nested more than {MAX_TYPE_DEPTH} levels deep"),
    )
}

/// The values a constant of type `p` can hold.
fn prim_range(p: Prim) -> (i128, i128) {
    let bits = p.size() * 8;
    if p.signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// `v`, if an `int64_t` or a `uint64_t` holds it.
fn in_range(v: i128, pos: Pos) -> Res<()> {
    if v < -(1i128 << 63) || v > i128::from(u64::MAX) {
        return Err(CompileError::check(
            pos,
            "constant expression overflows 64 bits",
        ));
    }
    Ok(())
}

/// `a op b` of a constant expression, at `pos` (the operator's).
fn binop(op: &str, a: i128, b: i128, pos: Pos) -> Res<i128> {
    let zero = || CompileError::check(pos, format!("division by zero in `{op}`"));
    Ok(match op {
        "|" => a | b,
        "^" => a ^ b,
        "&" => a & b,
        "<<" | ">>" => {
            if !(0..64).contains(&b) {
                return Err(CompileError::check(
                    pos,
                    format!("shift by {b}: a shift count is 0 to 63"),
                ));
            }
            if op == "<<" { a << b } else { a >> b }
        }
        "+" => a + b,
        "-" => a - b,
        "*" => a.checked_mul(b).unwrap_or(i128::MAX),
        "/" if b == 0 => return Err(zero()),
        "/" => a / b,
        "%" if b == 0 => return Err(zero()),
        _ => a % b,
    })
}
