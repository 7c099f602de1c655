//! Random interfaces, valid by the language rules of docs/idl.md: the
//! model the harness generator reads ([`Iface`]) and its IDL text
//! ([`Iface::render`]).
//!
//! Every interface is one IDL file. It declares a few structs (nested
//! structs and fixed arrays inside them), typedefs, constants, and an
//! interface of 1 to 8 operations. Each operation draws its parameters from
//! every kind the language has (each integer width under each of its
//! spellings, `boolean`, `char`, structs, fixed arrays, `string`,
//! `sequence<T>`, `[size_is(n)] T *`) in every direction (in, inout, out),
//! written in one of the two syntaxes (MIDL attributes or CORBA keywords),
//! and returns `void` or a value. Some files wrap everything in a `module`,
//! and comments appear between declarations and parameters.
//!
//! Sizes stay inside the default limits (31 strings per message, records
//! of at most 4096 bytes), so every file must compile.

use crate::rng::Rng;
use std::fmt::Write as _;

/// Structs per interface file, at most.
const MAX_STRUCTS: usize = 4;
/// Operations per interface.
const OPS: (usize, usize) = (1, 8);
/// Declared parameters per operation (size_is lengths come on top).
const PARAMS: (usize, usize) = (0, 8);
/// A struct's size stays under this, so records stay far below 4096.
const MAX_STRUCT_BYTES: u32 = 192;
/// A record (the sum of an operation's fields) stays under this.
const MAX_RECORD_BYTES: u32 = 2048;

/// An integer type (or `char`), as the Rust stubs and the IDL name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Int {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    Char,
}

impl Int {
    pub const ALL: [Int; 9] = [
        Int::I8,
        Int::U8,
        Int::I16,
        Int::U16,
        Int::I32,
        Int::U32,
        Int::I64,
        Int::U64,
        Int::Char,
    ];

    /// Every IDL spelling of the type (docs/idl.md, "The language").
    pub fn spellings(self) -> &'static [&'static str] {
        match self {
            Int::I8 => &["int8_t"],
            Int::U8 => &["octet", "uint8_t", "unsigned char"],
            Int::I16 => &["short", "int16_t"],
            Int::U16 => &["unsigned short", "uint16_t"],
            Int::I32 => &["int", "long", "int32_t"],
            Int::U32 => &["unsigned int", "unsigned long", "uint32_t"],
            Int::I64 => &["long long", "hyper", "int64_t"],
            Int::U64 => &["unsigned long long", "uint64_t"],
            Int::Char => &["char"],
        }
    }

    /// The Rust type of its values.
    pub fn rust(self) -> &'static str {
        match self {
            Int::I8 => "i8",
            Int::U8 | Int::Char => "u8",
            Int::I16 => "i16",
            Int::U16 => "u16",
            Int::I32 => "i32",
            Int::U32 => "u32",
            Int::I64 => "i64",
            Int::U64 => "u64",
        }
    }

    /// Size in bytes (also the alignment).
    pub fn size(self) -> u32 {
        match self {
            Int::I8 | Int::U8 | Int::Char => 1,
            Int::I16 | Int::U16 => 2,
            Int::I32 | Int::U32 => 4,
            Int::I64 | Int::U64 => 8,
        }
    }
}

/// A type as a parameter, field, element or return value uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ty {
    Int(Int),
    /// Only as a scalar parameter or a return value.
    Bool,
    /// Index in [`Iface::structs`].
    Struct(usize),
    /// A fixed array `T name[N]`.
    Array(Box<Ty>, u32),
    /// A typedef's name: index in [`Iface::typedefs`].
    Alias(usize),
    String,
    /// `sequence<T>`, or `[size_is(n)] T *` (see [`Param::size_is`]).
    Seq(Box<Ty>),
}

/// A parameter's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    In,
    InOut,
    Out,
}

/// The two ways to write a parameter list, and both in one list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// `[in] int x`, `[in, out] int *x`, `[out, size_is(n)] int **p`.
    Midl,
    /// `in long x`, `inout long x`, `out sequence<long> v`.
    Corba,
    /// Each parameter in either (`size_is` sequences and their lengths in
    /// MIDL's).
    Mixed,
}

#[derive(Clone, Debug)]
pub struct StructDecl {
    /// As written in the IDL (scoped names are the generator's business).
    pub name: String,
    pub fields: Vec<(String, Ty)>,
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub dir: Dir,
    pub ty: Ty,
    /// For a sequence written `[size_is(n)] T *p`: the index of `n` in
    /// [`Op::params`]. `n` has no value of its own (the sequence's length
    /// is its value), so the harness leaves it out.
    pub size_is: Option<usize>,
    /// Whether this is some sequence's `size_is` length.
    pub is_length: bool,
}

#[derive(Clone, Debug)]
pub struct Op {
    pub name: String,
    pub syntax: Syntax,
    pub ret: Option<Ty>,
    pub params: Vec<Param>,
}

/// One random IDL file: its declarations and one interface.
#[derive(Clone, Debug)]
pub struct Iface {
    /// The file's stem and the interface's name, e.g. `iface_007`.
    pub name: String,
    /// `module NAME { ... };` around everything, if any.
    pub module: Option<String>,
    pub consts: Vec<(String, u32)>,
    pub typedefs: Vec<(String, Ty)>,
    pub structs: Vec<StructDecl>,
    pub ops: Vec<Op>,
    /// The seed of the rendering's choices (spellings, comments).
    seed: u64,
}

/// Parameter names: mostly plain, sometimes a name that means something
/// to the generated Rust (a keyword, the stubs' own argument names), which
/// the generator must cope with.
const ODD_NAMES: &[&str] = &[
    "t", "len", "data", "key", "msg", "server", "rec", "buf", "req", "ret", "result", "rng",
];

/// The random interfaces of one build: `count` files from `seed`.
pub fn interfaces(seed: u64, count: usize) -> Vec<Iface> {
    (0..count)
        .map(|i| {
            let mut rng = Rng::fork(seed, i as u64);
            Gen::new(&mut rng).iface(format!("iface_{i:03}"), seed ^ i as u64)
        })
        .collect()
}

/// The generator's state while it draws one file.
struct Gen<'r> {
    rng: &'r mut Rng,
    structs: Vec<StructDecl>,
    typedefs: Vec<(String, Ty)>,
    consts: Vec<(String, u32)>,
}

impl<'r> Gen<'r> {
    fn new(rng: &'r mut Rng) -> Self {
        Gen {
            rng,
            structs: Vec::new(),
            typedefs: Vec::new(),
            consts: Vec::new(),
        }
    }

    fn iface(mut self, name: String, seed: u64) -> Iface {
        for i in 0..self.rng.below(3) {
            let v = self.rng.range(1, 6) as u32;
            self.consts.push((format!("K{i}"), v));
        }
        for i in 0..self.rng.below(MAX_STRUCTS + 1) {
            let s = self.struct_decl(format!("Rec{i}"));
            self.structs.push(s);
        }
        for i in 0..self.rng.below(3) {
            let ty = if self.rng.chance(50) {
                Ty::Array(Box::new(Ty::Int(self.int())), self.rng.range(1, 4) as u32)
            } else {
                Ty::Int(self.int())
            };
            self.typedefs.push((format!("Alias{i}"), ty));
        }
        let ops = (0..self.rng.range(OPS.0, OPS.1))
            .map(|k| {
                let op_name = format!(
                    "op{k}_{}",
                    self.rng.pick(&["get", "put", "swap", "call", "x"])
                );
                self.op(op_name)
            })
            .collect();
        let module = self
            .rng
            .chance(20)
            .then(|| format!("m{}", self.rng.below(100)));
        Iface {
            name,
            module,
            consts: self.consts,
            typedefs: self.typedefs,
            structs: self.structs,
            ops,
            seed,
        }
    }

    fn int(&mut self) -> Int {
        self.rng.pick(&Int::ALL)
    }

    /// A struct of 1 to 5 fields: integers, earlier structs, fixed arrays
    /// of either (sometimes two-dimensional).
    fn struct_decl(&mut self, name: String) -> StructDecl {
        let mut fields = Vec::new();
        for i in 0..self.rng.range(1, 5) {
            loop {
                let ty = self.field_type();
                fields.push((format!("f{i}"), ty));
                if self.struct_size(&fields) <= MAX_STRUCT_BYTES {
                    break;
                }
                fields.pop();
            }
        }
        StructDecl { name, fields }
    }

    fn field_type(&mut self) -> Ty {
        let base = if !self.structs.is_empty() && self.rng.chance(20) {
            Ty::Struct(self.rng.below(self.structs.len()))
        } else {
            Ty::Int(self.int())
        };
        match self.rng.below(10) {
            0 | 1 => Ty::Array(Box::new(base), self.rng.range(1, 4) as u32),
            2 => Ty::Array(
                Box::new(Ty::Array(Box::new(base), self.rng.range(1, 3) as u32)),
                self.rng.range(1, 3) as u32,
            ),
            _ => base,
        }
    }

    fn struct_size(&self, fields: &[(String, Ty)]) -> u32 {
        fields_size_align(fields, &self.structs, &self.typedefs).0
    }

    /// One operation in one syntax: up to 8 parameters of random kinds and
    /// directions, each `size_is` sequence with its length parameter, and
    /// a `void` or value return.
    fn op(&mut self, name: String) -> Op {
        let syntax = match self.rng.below(10) {
            0..=3 => Syntax::Midl,
            4..=7 => Syntax::Corba,
            _ => Syntax::Mixed,
        };
        let ret = match self.rng.below(10) {
            0..=2 => None,
            3 => Some(Ty::Bool),
            4 | 5 if !self.structs.is_empty() => {
                Some(Ty::Struct(self.rng.below(self.structs.len())))
            }
            6 if !self.typedefs.is_empty() => self.scalar_alias(),
            _ => Some(Ty::Int(self.int())),
        };
        let mut params: Vec<Param> = Vec::new();
        let mut record = ret
            .as_ref()
            .map_or(0, |t| size_align(t, &self.structs, &self.typedefs).0);
        for _ in 0..self.rng.range(PARAMS.0, PARAMS.1) {
            let dir = self.rng.pick(&[Dir::In, Dir::InOut, Dir::Out]);
            let ty = self.param_type();
            let size = size_align(&ty, &self.structs, &self.typedefs).0;
            if record + size > MAX_RECORD_BYTES {
                continue;
            }
            record += size;
            let name = self.param_name(&params);
            let midl_sequence = syntax != Syntax::Corba && matches!(ty, Ty::Seq(_));
            if midl_sequence && self.rng.chance(70) {
                self.push_size_is(&mut params, name, dir, ty);
            } else {
                params.push(Param {
                    name,
                    dir,
                    ty,
                    size_is: None,
                    is_length: false,
                });
            }
        }
        Op {
            name,
            syntax,
            ret,
            params,
        }
    }

    /// A sequence written `[size_is(n)] T *p` and its length `n`, which
    /// travels with the sequence: `[in] int n` for an in sequence,
    /// `[out] int *n` for an out one, `[in, out] int *n` for an inout one.
    /// `n` comes before the sequence (as in pfs_write) or after it.
    fn push_size_is(&mut self, params: &mut Vec<Param>, name: String, dir: Dir, ty: Ty) {
        let len_ty = Ty::Int(self.rng.pick(&[
            Int::I32,
            Int::I32,
            Int::U32,
            Int::I64,
            Int::U64,
            // Narrow lengths bound the count below what the bytes do:
            // every stub must refuse a longer sequence alike.
            Int::I8,
            Int::U8,
            Int::I16,
            Int::U16,
        ]));
        let len_name = format!("{name}_n");
        // An inout sequence's length may be [in] or [in, out].
        let len_dir = if dir == Dir::InOut && self.rng.chance(50) {
            Dir::In
        } else {
            dir
        };
        let len = Param {
            name: len_name,
            dir: len_dir,
            ty: len_ty,
            size_is: None,
            is_length: true,
        };
        let seq = |len_index| Param {
            name,
            dir,
            ty,
            size_is: Some(len_index),
            is_length: false,
        };
        if self.rng.chance(75) {
            params.push(len);
            params.push(seq(params.len() - 1));
        } else {
            params.push(seq(params.len() + 1));
            params.push(len);
        }
    }

    fn param_name(&mut self, params: &[Param]) -> String {
        if self.rng.chance(10) {
            let odd = self.rng.pick(ODD_NAMES);
            if params
                .iter()
                .all(|p| p.name != odd && !p.name.starts_with(odd))
            {
                return odd.to_string();
            }
        }
        format!("p{}", params.len())
    }

    fn scalar_alias(&mut self) -> Option<Ty> {
        let scalars: Vec<usize> = (0..self.typedefs.len())
            .filter(|&i| matches!(self.typedefs[i].1, Ty::Int(_)))
            .collect();
        if scalars.is_empty() {
            None
        } else {
            Some(Ty::Alias(self.rng.pick(&scalars)))
        }
    }

    fn param_type(&mut self) -> Ty {
        match self.rng.below(20) {
            0..=5 => Ty::Int(self.int()),
            6 => self.scalar_alias().unwrap_or(Ty::Int(Int::Char)),
            7 => Ty::Bool,
            8 | 9 if !self.structs.is_empty() => Ty::Struct(self.rng.below(self.structs.len())),
            10 => Ty::Array(Box::new(self.element()), self.rng.range(1, 8) as u32),
            11..=13 => Ty::String,
            _ => Ty::Seq(Box::new(self.element())),
        }
    }

    /// An element of an array or sequence: plain data only.
    fn element(&mut self) -> Ty {
        let arrays: Vec<usize> = (0..self.typedefs.len())
            .filter(|&i| matches!(self.typedefs[i].1, Ty::Array(..)))
            .collect();
        match self.rng.below(10) {
            0..=1 if !self.structs.is_empty() => Ty::Struct(self.rng.below(self.structs.len())),
            2 if !arrays.is_empty() => Ty::Alias(self.rng.pick(&arrays)),
            _ => Ty::Int(self.int()),
        }
    }
}

/// C's size and alignment of a value of `ty` as a record field holds it:
/// a string or sequence is a descriptor (8 bytes, 4-aligned).
pub fn size_align(ty: &Ty, structs: &[StructDecl], typedefs: &[(String, Ty)]) -> (u32, u32) {
    match ty {
        Ty::Int(i) => (i.size(), i.size()),
        Ty::Bool => (1, 1),
        Ty::Struct(s) => fields_size_align(&structs[*s].fields, structs, typedefs),
        Ty::Array(e, n) => {
            let (s, a) = size_align(e, structs, typedefs);
            (s * n, a)
        }
        Ty::Alias(i) => size_align(&typedefs[*i].1, structs, typedefs),
        Ty::String | Ty::Seq(_) => (8, 4),
    }
}

/// A struct's size and alignment by C's rules.
fn fields_size_align(
    fields: &[(String, Ty)],
    structs: &[StructDecl],
    typedefs: &[(String, Ty)],
) -> (u32, u32) {
    let (mut size, mut align) = (0u32, 1u32);
    for (_, ty) in fields {
        let (s, a) = size_align(ty, structs, typedefs);
        size = size.next_multiple_of(a) + s;
        align = align.max(a);
    }
    (size.next_multiple_of(align), align)
}

impl Iface {
    /// The name a declaration gets in generated code: `module M`'s scope
    /// joins with `_` (docs/idl.md).
    pub fn scoped(&self, name: &str) -> String {
        match &self.module {
            Some(m) => format!("{m}_{name}"),
            None => name.to_string(),
        }
    }

    /// Whether C's layout of struct `s` has padding (between fields or at
    /// the end).
    pub fn has_padding(&self, s: usize) -> bool {
        let fields = &self.structs[s].fields;
        let sum: u32 = fields
            .iter()
            .map(|(_, t)| size_align(t, &self.structs, &self.typedefs).0)
            .sum();
        sum != fields_size_align(fields, &self.structs, &self.typedefs).0
    }

    /// The declaration's type with every typedef replaced by what it names.
    pub fn resolve<'a>(&'a self, ty: &'a Ty) -> &'a Ty {
        match ty {
            Ty::Alias(i) => self.resolve(&self.typedefs[*i].1),
            t => t,
        }
    }

    /// The IDL text. Spellings, comments and whitespace vary with a
    /// generator of their own, so they do not change the model.
    pub fn render(&self) -> String {
        let mut w = Writer {
            out: String::new(),
            rng: Rng::fork(self.seed, 0x1d1),
        };
        let ind = if self.module.is_some() { "    " } else { "" };
        w.line(&format!(
            "// Random interface {} of crates/idl-proptest/build.rs. Do not edit: rebuild.",
            self.name
        ));
        if let Some(m) = &self.module {
            w.line(&format!("module {m} {{"));
        }
        for (name, v) in &self.consts {
            let ty = w.rng.pick(&["long", "unsigned long", "short", "int"]);
            w.line(&format!("{ind}const {ty} {name} = {v};"));
        }
        for (name, ty) in &self.typedefs {
            let decl = w.declarator(self, ty, name);
            w.line(&format!("{ind}typedef {decl};"));
        }
        for s in &self.structs {
            w.comment(ind);
            w.line(&format!("{ind}struct {} {{", s.name));
            for (f, ty) in &s.fields {
                let decl = w.declarator(self, ty, f);
                w.line(&format!("{ind}    {decl};"));
            }
            w.line(&format!("{ind}}};"));
        }
        w.line(&format!("{ind}interface {} {{", self.name));
        for op in &self.ops {
            w.comment(&format!("{ind}    "));
            let ret = match &op.ret {
                None => "void".to_string(),
                Some(t) => w.type_name(self, t),
            };
            let params: Vec<String> = op.params.iter().map(|p| w.param(self, op, p)).collect();
            let sep = if params.len() > 3 {
                format!(",\n{ind}        ")
            } else {
                ", ".into()
            };
            w.line(&format!(
                "{ind}    {ret} {}({});",
                op.name,
                params.join(&sep)
            ));
        }
        w.line(&format!("{ind}}};"));
        if self.module.is_some() {
            w.line("};");
        }
        w.out
    }
}

/// Renders IDL text, drawing spellings and comments from its own generator.
struct Writer {
    out: String,
    rng: Rng,
}

impl Writer {
    fn line(&mut self, s: &str) {
        let _ = writeln!(self.out, "{s}");
    }

    fn comment(&mut self, ind: &str) {
        match self.rng.below(8) {
            0 => self.line(&format!("{ind}// a line comment")),
            1 => self.line(&format!("{ind}/* a block comment\n{ind}   on two lines */")),
            _ => {}
        }
    }

    /// The name of a type that is not an array: a spelling of an integer,
    /// `boolean`, a struct's or typedef's name, `string`, `sequence<T>`.
    fn type_name(&mut self, f: &Iface, ty: &Ty) -> String {
        match ty {
            Ty::Int(i) => self.rng.pick(i.spellings()).to_string(),
            Ty::Bool => "boolean".into(),
            Ty::Struct(s) => f.structs[*s].name.clone(),
            Ty::Alias(a) => f.typedefs[*a].0.clone(),
            Ty::String => "string".into(),
            Ty::Seq(e) => format!("sequence<{}>", self.type_name(f, e)),
            Ty::Array(..) => unreachable!("arrays are declarators"),
        }
    }

    /// `T name[N][M]`: a fixed array's lengths follow the name; a length
    /// is sometimes a constant of the same value.
    fn declarator(&mut self, f: &Iface, ty: &Ty, name: &str) -> String {
        let mut dims = String::new();
        let mut t = ty;
        while let Ty::Array(e, n) = t {
            let by_const = f
                .consts
                .iter()
                .find(|(_, v)| v == n)
                .filter(|_| self.rng.chance(50));
            match by_const {
                Some((k, _)) => {
                    let _ = write!(dims, "[{k}]");
                }
                None => {
                    let _ = write!(dims, "[{n}]");
                }
            }
            t = e;
        }
        format!("{} {name}{dims}", self.type_name(f, t))
    }

    fn param(&mut self, f: &Iface, op: &Op, p: &Param) -> String {
        let syntax = match op.syntax {
            Syntax::Mixed if p.size_is.is_some() || p.is_length => Syntax::Midl,
            Syntax::Mixed if self.rng.chance(50) => Syntax::Midl,
            Syntax::Mixed => Syntax::Corba,
            s => s,
        };
        let text = match syntax {
            Syntax::Mixed => unreachable!("chosen above"),
            Syntax::Corba => {
                let dir = match p.dir {
                    Dir::In => "in",
                    Dir::InOut => "inout",
                    Dir::Out => "out",
                };
                format!("{dir} {}", self.declarator(f, &p.ty, &p.name))
            }
            Syntax::Midl => self.midl_param(f, op, p),
        };
        if self.rng.chance(5) {
            format!("/* {} */ {text}", p.name)
        } else {
            text
        }
    }

    /// MIDL: the direction in attributes; an inout or out scalar or struct
    /// is a pointer (`[out] int *h`; CORBA's keywords need none, MIDL's
    /// attributes do), an inout or out string or sequence either; a `size_is`
    /// sequence is `T *p` in and inout, `T **p` out (pfs_get_direntries); a
    /// string is `string s` or `[string] char *s`; arrays are declarators
    /// as in C.
    fn midl_param(&mut self, f: &Iface, op: &Op, p: &Param) -> String {
        let mut attrs = vec![match p.dir {
            Dir::In => "in",
            Dir::InOut => "in, out",
            Dir::Out => "out",
        }];
        if let Some(n) = p.size_is {
            let Ty::Seq(e) = &p.ty else {
                unreachable!("size_is on a sequence")
            };
            let len = &op.params[n].name;
            let size_is = match p.dir {
                Dir::Out if self.rng.chance(30) => format!("size_is(*{len})"),
                _ => format!("size_is({len})"),
            };
            let stars = if p.dir == Dir::Out { "**" } else { "*" };
            let e = self.type_name(f, e);
            return format!("[{}, {size_is}] {e} {stars}{}", attrs.join(", "), p.name);
        }
        let by_pointer = match p.dir {
            Dir::In => false,
            _ => match f.resolve(&p.ty) {
                Ty::Array(..) => false,
                Ty::String | Ty::Seq(_) => self.rng.chance(80),
                _ => true,
            },
        };
        if p.ty == Ty::String && self.rng.chance(40) {
            attrs.push("string");
            let stars = if p.dir == Dir::Out && self.rng.chance(50) {
                "**"
            } else {
                "*"
            };
            let c = self.rng.pick(&["char", "char", "octet", "uint8_t"]);
            return format!("[{}] {c} {stars}{}", attrs.join(", "), p.name);
        }
        let decl = self.declarator(f, &p.ty, &p.name);
        let decl = if by_pointer {
            let (ty, name) = decl
                .rsplit_once(' ')
                .expect("a declarator has a type and a name");
            format!("{ty} *{name}")
        } else {
            decl
        };
        format!("[{}] {decl}", attrs.join(", "))
    }
}
