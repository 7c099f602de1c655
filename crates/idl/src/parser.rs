//! The parser: tokens to a syntax tree ([`Ast`]), by recursive descent
//! with one token of lookahead (two for `long long` and the like).
//!
//! The grammar (docs/idl.md, "The language"):
//!
//! ```text
//! file       = definition* ;
//! definition = module | interface | struct | typedef | const | ";" ;
//! module     = "module" IDENT "{" definition* "}" ";" ;
//! interface  = "interface" IDENT "{" (export)* "}" ";" ;
//! export     = operation | struct | typedef | const | ";" ;
//! operation  = type IDENT "(" [ "void" | param ("," param)* ] ")" ";" ;
//! param      = [ "[" attr ("," attr)* "]" ] [ "in" | "out" | "inout" ] type declarator ;
//! attr       = "in" | "out" | "string" | "size_is" "(" ["*"] IDENT ")" ;
//! struct     = "struct" IDENT "{" (type declarator ("," declarator)* ";")+ "}" ";" ;
//! typedef    = "typedef" type declarator ("," declarator)* ";" ;
//! const      = "const" type IDENT "=" expr ";" ;
//! declarator = "*"* IDENT ("[" expr "]")* ;
//! type       = integer | "boolean" | "void" | "string" | "sequence" "<" type ">" | scoped ;
//! scoped     = ["::"] IDENT ("::" IDENT)* ;
//! expr       = C's integer operators | ^ & << >> + - * / % and unary - + ~, on
//!              literals, constant names and parentheses ;
//! ```
//!
//! The parser only decides syntax; names, types, directions and `size_is`
//! are the static checks' ([`crate::sema`]). Constructs of CORBA IDL or
//! MIDL outside the subset are recognised here and rejected by name.
//! Nesting (modules, parentheses, sequences, expressions) is limited to
//! [`MAX_DEPTH`] levels, so that no input can exhaust the stack.

use crate::error::CompileError;
use crate::lexer::{Tok, Token, lex};
use crate::model::{Dir, Pos, Prim};

/// The deepest nesting of modules, parentheses, `sequence<...>` and
/// expression operators accepted.
pub(crate) const MAX_DEPTH: u32 = 64;

/// A parsed IDL file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ast {
    /// Top-level definitions in order.
    pub defs: Vec<Def>,
}

/// A definition (at top level, in a module or in an interface).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Def {
    /// `module M { ... };`
    Module {
        /// Its name.
        name: String,
        /// Where the name is.
        pos: Pos,
        /// Its definitions.
        defs: Vec<Def>,
    },
    /// `interface I { ... };`
    Interface {
        /// Its name.
        name: String,
        /// Where the name is.
        pos: Pos,
        /// Its operations and type declarations.
        defs: Vec<Def>,
    },
    /// `struct S { ... };`
    Struct {
        /// Its name.
        name: String,
        /// Where the name is.
        pos: Pos,
        /// Its fields: a type and the declarators sharing it.
        members: Vec<(TypeSpec, Declarator)>,
    },
    /// `typedef T a, b[4];`
    Typedef(TypeSpec, Vec<Declarator>),
    /// `const T K = expr;`
    Const {
        /// The declared type.
        ty: TypeSpec,
        /// Its name.
        name: String,
        /// Where the name is.
        pos: Pos,
        /// Its value.
        value: Expr,
    },
    /// An operation (only inside an interface).
    Op(OpDecl),
}

/// A type as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TypeSpec {
    /// What it names.
    pub kind: TypeKind,
    /// Where it begins.
    pub pos: Pos,
}

/// What a [`TypeSpec`] names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TypeKind {
    /// An integer, `char` or `boolean`.
    Prim(Prim),
    /// `void`.
    Void,
    /// `string`.
    String,
    /// `sequence<T>`.
    Sequence(Box<TypeSpec>),
    /// A declared name: its parts and whether it began with `::`.
    Named(Vec<String>, bool),
}

/// A declarator: pointers, a name, array dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Declarator {
    /// Number of `*`.
    pub stars: u32,
    /// The name.
    pub name: String,
    /// Where the name is.
    pub pos: Pos,
    /// Array dimensions, outermost first.
    pub dims: Vec<Expr>,
}

/// An operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OpDecl {
    /// Its name.
    pub name: String,
    /// Where the name is.
    pub pos: Pos,
    /// The return type (maybe `void`).
    pub ret: TypeSpec,
    /// Its parameters.
    pub params: Vec<ParamDecl>,
}

/// A parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParamDecl {
    /// Its direction, from attributes or a CORBA keyword, and where that
    /// was written; `None` if neither.
    pub dir: Option<(Dir, Pos)>,
    /// Whether the direction is a CORBA keyword (`out T x`), whose values
    /// need no pointer, rather than a MIDL attribute (`[out] T *x`).
    pub keyword: bool,
    /// `size_is(n)`: the name and where it is written.
    pub size_is: Option<(String, Pos)>,
    /// The `[string]` attribute and where it is written.
    pub string: Option<Pos>,
    /// The type.
    pub ty: TypeSpec,
    /// Pointers, name and dimensions.
    pub decl: Declarator,
}

/// A constant expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Expr {
    /// What it computes.
    pub kind: ExprKind,
    /// Where it begins (an operator's: where the operator is).
    pub pos: Pos,
}

/// What an [`Expr`] computes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ExprKind {
    /// A literal.
    Int(u64),
    /// A constant's name: parts and whether it began with `::`.
    Name(Vec<String>, bool),
    /// `-e`, `+e` or `~e`.
    Unary(char, Box<Expr>),
    /// `a op1 b op2 c ...`, evaluated left to right (`(a op1 b) op2 c`):
    /// a left-associative chain kept flat, so that a long chain is no
    /// nesting; each `op` (one of `| ^ & << >> + - * / %`) with its
    /// position.
    Chain(Box<Expr>, Vec<(&'static str, Pos, Expr)>),
}

/// Parses `src` into its syntax tree.
pub(crate) fn parse(src: &str) -> Result<Ast, CompileError> {
    let toks = lex(src)?;
    let mut p = Parser {
        toks,
        i: 0,
        depth: 0,
    };
    let defs = p.defs(Ctx::Top)?;
    Ok(Ast { defs })
}

/// Words that begin a construct outside the subset, with why it is
/// rejected.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("union", "unions are outside the IDL4 subset"),
    ("enum", "use an integer type and constants"),
    (
        "exception",
        "exceptions are outside the IDL4 subset: return a status",
    ),
    (
        "raises",
        "exceptions are outside the IDL4 subset: return a status",
    ),
    (
        "attribute",
        "attributes are outside the IDL4 subset: declare get and set operations",
    ),
    (
        "readonly",
        "attributes are outside the IDL4 subset: declare a get operation",
    ),
    ("oneway", "every call is synchronous and gets a reply"),
    ("context", "operation contexts are outside the IDL4 subset"),
    ("any", "every value's type is known statically"),
    ("float", "the IDL4 subset has integer types only"),
    ("double", "the IDL4 subset has integer types only"),
    ("fixed", "the IDL4 subset has integer types only"),
    ("wchar", "use `char` (bytes) or `string` (UTF-8)"),
    ("wstring", "use `string` (UTF-8)"),
    ("Object", "object references are outside the IDL4 subset"),
    ("ValueBase", "value types are outside the IDL4 subset"),
    ("valuetype", "value types are outside the IDL4 subset"),
    ("native", "native types are outside the IDL4 subset"),
    (
        "abstract",
        "abstract interfaces are outside the IDL4 subset",
    ),
    ("local", "local interfaces are outside the IDL4 subset"),
    ("custom", "value types are outside the IDL4 subset"),
    ("factory", "value types are outside the IDL4 subset"),
    ("component", "components are outside the IDL4 subset"),
    ("home", "components are outside the IDL4 subset"),
    ("eventtype", "components are outside the IDL4 subset"),
    ("import", "an IDL file here is self-contained"),
    ("typeid", "repository ids are outside the IDL4 subset"),
    ("typeprefix", "repository ids are outside the IDL4 subset"),
    ("switch", "unions are outside the IDL4 subset"),
];

/// Keywords of the language (not usable as names).
#[rustfmt::skip]
const KEYWORDS: &[&str] = &[
    "module", "interface", "struct", "typedef", "const", "in", "out", "inout", "void",
    "boolean", "char", "octet", "short", "int", "long", "hyper", "unsigned", "signed", "string",
    "sequence", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t",
    "uint64_t", "TRUE", "FALSE",
];

fn unsupported(word: &str) -> Option<&'static str> {
    UNSUPPORTED
        .iter()
        .find(|(w, _)| *w == word)
        .map(|(_, why)| *why)
}

fn is_keyword(word: &str) -> bool {
    KEYWORDS.contains(&word) || unsupported(word).is_some()
}

/// Where a list of definitions is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Top,
    Module,
    Interface,
}

struct Parser {
    toks: Vec<Token>,
    i: usize,
    depth: u32,
}

type Res<T> = Result<T, CompileError>;

impl Parser {
    fn tok(&self, k: usize) -> &Token {
        // The last token is always Eof; past it, Eof again.
        let last = self.toks.len() - 1;
        &self.toks[(self.i + k).min(last)]
    }

    fn peek(&self) -> &Tok {
        &self.tok(0).tok
    }

    fn pos(&self) -> Pos {
        self.tok(0).pos
    }

    fn bump(&mut self) -> Token {
        let t = self.tok(0).clone();
        if t.tok != Tok::Eof {
            self.i += 1;
        }
        t
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(x) if x == w)
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        let yes = self.is_sym(s);
        if yes {
            self.bump();
        }
        yes
    }

    fn eat_word(&mut self, w: &str) -> bool {
        let yes = self.is_word(w);
        if yes {
            self.bump();
        }
        yes
    }

    /// An error "expected `what` `context`, found ..." at the current token.
    fn expected(&self, what: &str) -> CompileError {
        let t = self.tok(0);
        if let Tok::Ident(w) = &t.tok
            && let Some(why) = unsupported(w)
        {
            return CompileError::unsupported(t.pos, format!("`{w}`"), why);
        }
        CompileError::syntax(t.pos, format!("expected {what}, found {}", t.tok))
    }

    fn expect_sym(&mut self, s: &str, context: &str) -> Res<Pos> {
        if self.is_sym(s) {
            Ok(self.bump().pos)
        } else {
            Err(self.expected(&format!("`{s}` {context}")))
        }
    }

    /// A name being declared (not a keyword).
    fn name(&mut self, what: &str) -> Res<(String, Pos)> {
        let t = self.tok(0).clone();
        match t.tok {
            Tok::Ident(w) if unsupported(&w).is_some() => Err(self.expected(what)),
            Tok::Ident(w) if is_keyword(&w) => Err(CompileError::syntax(
                t.pos,
                format!("expected {what}, found keyword `{w}`"),
            )),
            Tok::Ident(w) => {
                self.bump();
                Ok((w, t.pos))
            }
            _ => Err(self.expected(what)),
        }
    }

    fn enter(&mut self) -> Res<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(CompileError::syntax(
                self.pos(),
                format!("nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Definitions up to the end of input (`Top`) or the closing `}`.
    fn defs(&mut self, ctx: Ctx) -> Res<Vec<Def>> {
        let mut defs = Vec::new();
        loop {
            let t = self.tok(0).clone();
            match &t.tok {
                // At the end of input inside a body, the caller says which
                // `}` is missing.
                Tok::Eof => return Ok(defs),
                Tok::Sym("}") if ctx != Ctx::Top => return Ok(defs),
                Tok::Sym(";") => {
                    self.bump();
                }
                Tok::Ident(w) => match w.as_str() {
                    "module" if ctx == Ctx::Interface => {
                        return Err(CompileError::syntax(
                            t.pos,
                            "a module cannot be declared inside an interface",
                        ));
                    }
                    "module" => defs.push(self.module()?),
                    "interface" if ctx == Ctx::Interface => {
                        return Err(CompileError::syntax(
                            t.pos,
                            "an interface cannot be declared inside an interface",
                        ));
                    }
                    "interface" => defs.push(self.interface()?),
                    "struct" => defs.push(self.struct_def()?),
                    "typedef" => defs.push(self.typedef()?),
                    "const" => defs.push(self.const_def()?),
                    _ if ctx == Ctx::Interface => defs.push(Def::Op(self.op()?)),
                    w if unsupported(w).is_some() => return Err(self.expected("")),
                    _ if self.is_op_start() => {
                        return Err(CompileError::syntax(
                            self.tok(1).pos,
                            "an operation must be declared inside an interface",
                        ));
                    }
                    _ => return Err(self.expected_def(ctx)),
                },
                Tok::Sym("[") if ctx == Ctx::Interface => defs.push(Def::Op(self.op()?)),
                Tok::Sym("[") => {
                    return Err(CompileError::unsupported(
                        t.pos,
                        "an attribute list outside an interface",
                        "attributes belong to the parameters of operations",
                    ));
                }
                _ if ctx == Ctx::Interface => {
                    return Err(self.expected("an operation, `struct`, `typedef`, `const` or `}`"));
                }
                _ => return Err(self.expected_def(ctx)),
            }
        }
    }

    /// Whether an identifier here begins what looks like a function
    /// declaration (`T name (`).
    fn is_op_start(&self) -> bool {
        matches!(self.tok(1).tok, Tok::Ident(_)) && matches!(self.tok(2).tok, Tok::Sym("("))
    }

    fn expected_def(&self, ctx: Ctx) -> CompileError {
        let end = if ctx == Ctx::Top { "" } else { " or `}`" };
        self.expected(&format!(
            "a definition (`module`, `interface`, `struct`, `typedef` or `const`){end}"
        ))
    }

    /// `{ defs }` and the `;` after it, for `what`.
    fn body(&mut self, ctx: Ctx, what: &str) -> Res<Vec<Def>> {
        self.expect_sym("{", &format!("to open {what}"))?;
        self.enter()?;
        let defs = self.defs(ctx)?;
        self.leave();
        if !self.is_sym("}") {
            return Err(self.expected(&format!("`}}` to close {what}")));
        }
        self.bump();
        self.expect_sym(";", &format!("after the `}}` of {what}"))?;
        Ok(defs)
    }

    fn module(&mut self) -> Res<Def> {
        self.bump();
        let (name, pos) = self.name("a module name")?;
        let defs = self.body(Ctx::Module, &format!("module `{name}`"))?;
        Ok(Def::Module { name, pos, defs })
    }

    fn interface(&mut self) -> Res<Def> {
        self.bump();
        let (name, pos) = self.name("an interface name")?;
        if self.is_sym(":") {
            return Err(CompileError::unsupported(
                self.pos(),
                "interface inheritance",
                "declare every operation in the interface itself",
            ));
        }
        if self.is_sym(";") {
            return Err(CompileError::unsupported(
                self.pos(),
                "a forward declaration",
                "declare the interface with its body",
            ));
        }
        let defs = self.body(Ctx::Interface, &format!("interface `{name}`"))?;
        Ok(Def::Interface { name, pos, defs })
    }

    fn struct_def(&mut self) -> Res<Def> {
        self.bump();
        let (name, pos) = self.name("a struct name")?;
        if self.is_sym(";") {
            return Err(CompileError::unsupported(
                self.pos(),
                "a forward declaration",
                "declare the struct with its fields",
            ));
        }
        let what = format!("struct `{name}`");
        self.expect_sym("{", &format!("to open {what}"))?;
        let mut members = Vec::new();
        while !self.is_sym("}") {
            let ty = self.type_spec()?;
            loop {
                let d = self.declarator("a field name")?;
                members.push((ty.clone(), d));
                if !self.eat_sym(",") {
                    break;
                }
            }
            self.expect_sym(";", "after a field")?;
        }
        self.bump();
        self.expect_sym(";", &format!("after the `}}` of {what}"))?;
        Ok(Def::Struct { name, pos, members })
    }

    fn typedef(&mut self) -> Res<Def> {
        self.bump();
        let ty = self.type_spec()?;
        let mut decls = vec![self.declarator("a type name")?];
        while self.eat_sym(",") {
            decls.push(self.declarator("a type name")?);
        }
        self.expect_sym(";", "after a typedef")?;
        Ok(Def::Typedef(ty, decls))
    }

    fn const_def(&mut self) -> Res<Def> {
        self.bump();
        let ty = self.type_spec()?;
        let (name, pos) = self.name("a constant name")?;
        self.expect_sym("=", &format!("after constant `{name}`"))?;
        let value = self.expr()?;
        self.expect_sym(";", &format!("after the value of constant `{name}`"))?;
        Ok(Def::Const {
            ty,
            name,
            pos,
            value,
        })
    }

    fn op(&mut self) -> Res<OpDecl> {
        if self.is_sym("[") {
            return Err(CompileError::unsupported(
                self.pos(),
                "an attribute list on an operation",
                "attributes belong to parameters",
            ));
        }
        let ret = self.type_spec()?;
        if self.is_sym("*") {
            return Err(CompileError::unsupported(
                self.pos(),
                "a pointer return value",
                "return a value, or use an [out] parameter",
            ));
        }
        let (name, pos) = self.name("an operation name")?;
        self.expect_sym("(", &format!("after operation name `{name}`"))?;
        let mut params = Vec::new();
        if self.is_word("void") && matches!(self.tok(1).tok, Tok::Sym(")")) {
            self.bump();
        }
        if !self.is_sym(")") {
            loop {
                params.push(self.param()?);
                if !self.eat_sym(",") {
                    break;
                }
            }
        }
        if !self.is_sym(")") {
            return Err(self.expected(&format!("`,` or `)` in the parameters of `{name}`")));
        }
        self.bump();
        self.expect_sym(";", &format!("after operation `{name}`"))?;
        Ok(OpDecl {
            name,
            pos,
            ret,
            params,
        })
    }

    fn param(&mut self) -> Res<ParamDecl> {
        let mut dir: Option<(Dir, Pos)> = None;
        let mut seen_in: Option<Pos> = None;
        let mut seen_out: Option<Pos> = None;
        let mut size_is = None;
        let mut string = None;
        if self.eat_sym("[") {
            loop {
                let t = self.tok(0).clone();
                let Tok::Ident(w) = &t.tok else {
                    return Err(
                        self.expected("a parameter attribute (`in`, `out`, `size_is`, `string`)")
                    );
                };
                let twice = || CompileError::syntax(t.pos, format!("attribute `{w}` given twice"));
                match w.as_str() {
                    "in" if seen_in.is_some() => return Err(twice()),
                    "in" => seen_in = Some(t.pos),
                    "out" if seen_out.is_some() => return Err(twice()),
                    "out" => seen_out = Some(t.pos),
                    "string" if string.is_some() => return Err(twice()),
                    "string" => string = Some(t.pos),
                    "size_is" if size_is.is_some() => return Err(twice()),
                    "size_is" => {
                        self.bump();
                        self.expect_sym("(", "after size_is")?;
                        // MIDL writes the length of an out sequence as `*n`.
                        self.eat_sym("*");
                        let (n, npos) = self.name("a parameter name in size_is")?;
                        size_is = Some((n, npos));
                        if !self.is_sym(")") {
                            return Err(self.expected("`)` after size_is argument"));
                        }
                    }
                    "length_is" | "max_is" | "first_is" | "last_is" | "switch_is" | "iid_is"
                    | "range" => {
                        return Err(CompileError::unsupported(
                            t.pos,
                            format!("the `{w}` attribute"),
                            "a sequence's length is its size_is parameter",
                        ));
                    }
                    "ref" | "unique" | "ptr" => {
                        return Err(CompileError::unsupported(
                            t.pos,
                            format!("the `{w}` attribute"),
                            "pointers are always to the value itself",
                        ));
                    }
                    "inout" => {
                        return Err(CompileError::syntax(
                            t.pos,
                            "`inout` is CORBA syntax: write `[in, out]`, or `inout` before the type",
                        ));
                    }
                    _ => {
                        return Err(CompileError::unsupported(
                            t.pos,
                            format!("the attribute `{w}`"),
                            "parameter attributes are `in`, `out`, `size_is(n)` and `string`",
                        ));
                    }
                }
                self.bump();
                if self.eat_sym("]") {
                    break;
                }
                if !self.eat_sym(",") {
                    return Err(self.expected("`,` or `]` in a parameter's attributes"));
                }
            }
            dir = match (seen_in, seen_out) {
                (Some(p), None) => Some((Dir::In, p)),
                (None, Some(p)) => Some((Dir::Out, p)),
                (Some(p), Some(q)) => Some((Dir::InOut, p.min(q))),
                (None, None) => None,
            };
        }
        let t = self.tok(0).clone();
        let corba = match &t.tok {
            Tok::Ident(w) if w == "in" => Some(Dir::In),
            Tok::Ident(w) if w == "out" => Some(Dir::Out),
            Tok::Ident(w) if w == "inout" => Some(Dir::InOut),
            _ => None,
        };
        let keyword = corba.is_some();
        if let Some(d) = corba {
            if dir.is_some() {
                return Err(CompileError::syntax(
                    t.pos,
                    format!("direction given twice: in the attributes and as {}", t.tok),
                ));
            }
            self.bump();
            dir = Some((d, t.pos));
        }
        let ty = self.type_spec()?;
        let decl = self.declarator("a parameter name")?;
        Ok(ParamDecl {
            dir,
            keyword,
            size_is,
            string,
            ty,
            decl,
        })
    }

    fn declarator(&mut self, what: &str) -> Res<Declarator> {
        let mut stars = 0u32;
        while self.eat_sym("*") {
            stars = stars.saturating_add(1);
        }
        let (name, pos) = self.name(what)?;
        let mut dims = Vec::new();
        while self.eat_sym("[") {
            self.enter()?;
            dims.push(self.expr()?);
            self.expect_sym("]", "after an array size")?;
        }
        for _ in 0..dims.len() {
            self.leave();
        }
        Ok(Declarator {
            stars,
            name,
            pos,
            dims,
        })
    }

    fn type_spec(&mut self) -> Res<TypeSpec> {
        let t = self.tok(0).clone();
        let pos = t.pos;
        let w = match &t.tok {
            Tok::Ident(w) => w.clone(),
            Tok::Sym("::") => {
                let (parts, abs) = self.scoped()?;
                return Ok(TypeSpec {
                    kind: TypeKind::Named(parts, abs),
                    pos,
                });
            }
            _ => return Err(self.expected("a type")),
        };
        let prim = |p| {
            Ok(TypeSpec {
                kind: TypeKind::Prim(p),
                pos,
            })
        };
        let simple = match w.as_str() {
            "boolean" => Some(Prim::Bool),
            "char" => Some(Prim::Char),
            "octet" => Some(Prim::U8),
            "int" => Some(Prim::I32),
            "hyper" => Some(Prim::I64),
            "int8_t" => Some(Prim::I8),
            "uint8_t" => Some(Prim::U8),
            "int16_t" => Some(Prim::I16),
            "uint16_t" => Some(Prim::U16),
            "int32_t" => Some(Prim::I32),
            "uint32_t" => Some(Prim::U32),
            "int64_t" => Some(Prim::I64),
            "uint64_t" => Some(Prim::U64),
            _ => None,
        };
        if let Some(p) = simple {
            self.bump();
            return prim(p);
        }
        match w.as_str() {
            "short" | "long" => {
                let p = self.int_words(true)?;
                prim(p)
            }
            "unsigned" | "signed" => {
                self.bump();
                let unsigned = w == "unsigned";
                let p = if self.is_word("char") {
                    self.bump();
                    if unsigned { Prim::U8 } else { Prim::I8 }
                } else if self.is_word("int") {
                    self.bump();
                    if unsigned { Prim::U32 } else { Prim::I32 }
                } else if self.is_word("hyper") {
                    self.bump();
                    if unsigned { Prim::U64 } else { Prim::I64 }
                } else if self.is_word("short") || self.is_word("long") {
                    self.int_words(unsigned ^ true)?
                } else if unsigned {
                    Prim::U32
                } else {
                    Prim::I32
                };
                prim(p)
            }
            "void" => {
                self.bump();
                Ok(TypeSpec {
                    kind: TypeKind::Void,
                    pos,
                })
            }
            "string" => {
                self.bump();
                if self.is_sym("<") {
                    return Err(CompileError::unsupported(
                        self.pos(),
                        "a bounded string (`string<N>`)",
                        "strings are bounded by the channel's per-string limit",
                    ));
                }
                Ok(TypeSpec {
                    kind: TypeKind::String,
                    pos,
                })
            }
            "sequence" => {
                self.bump();
                self.expect_sym("<", "after `sequence`")?;
                self.enter()?;
                let elem = self.type_spec()?;
                self.leave();
                if self.is_sym(",") {
                    return Err(CompileError::unsupported(
                        self.pos(),
                        "a bounded sequence (`sequence<T, N>`)",
                        "sequences are bounded by the channel's per-string limit",
                    ));
                }
                self.expect_sym(">", "to close `sequence<`")?;
                Ok(TypeSpec {
                    kind: TypeKind::Sequence(Box::new(elem)),
                    pos,
                })
            }
            "struct" => Err(CompileError::unsupported(
                pos,
                "a struct defined or named inside another declaration",
                "declare `struct S { ... };` on its own and use its name `S`",
            )),
            w if unsupported(w).is_some() => Err(self.expected("")),
            w if is_keyword(w) => Err(CompileError::syntax(
                pos,
                format!("expected a type, found keyword `{w}`"),
            )),
            _ => {
                let (parts, abs) = self.scoped()?;
                Ok(TypeSpec {
                    kind: TypeKind::Named(parts, abs),
                    pos,
                })
            }
        }
    }

    /// `short`, `long` or `long long` (each optionally followed by `int`),
    /// signed or not.
    fn int_words(&mut self, signed: bool) -> Res<Prim> {
        let first = self.bump();
        let p = if first.tok == Tok::Ident("short".into()) {
            if signed { Prim::I16 } else { Prim::U16 }
        } else if self.eat_word("long") {
            if signed { Prim::I64 } else { Prim::U64 }
        } else if self.is_word("double") {
            return Err(CompileError::unsupported(
                first.pos,
                "`long double`",
                "the IDL4 subset has integer types only",
            ));
        } else if signed {
            Prim::I32
        } else {
            Prim::U32
        };
        self.eat_word("int");
        Ok(p)
    }

    /// `["::"] IDENT ("::" IDENT)*`.
    fn scoped(&mut self) -> Res<(Vec<String>, bool)> {
        let abs = self.eat_sym("::");
        let mut parts = vec![self.name("a name")?.0];
        while self.eat_sym("::") {
            parts.push(self.name("a name after `::`")?.0);
        }
        Ok((parts, abs))
    }

    /// A constant expression: C's precedence for `| ^ & << >> + - * / %`,
    /// left-associative, then unary `- + ~`.
    fn expr(&mut self) -> Res<Expr> {
        self.binary(0)
    }

    /// The binary operator at the cursor and its precedence level.
    fn binop(&self) -> Option<(&'static str, u8)> {
        let Tok::Sym(s) = self.peek() else {
            return None;
        };
        let adjacent = |a: &Token, b: &Token| {
            a.pos.line == b.pos.line && a.pos.col.saturating_add(1) == b.pos.col
        };
        Some(match *s {
            "|" => ("|", 0),
            "^" => ("^", 1),
            "&" => ("&", 2),
            "<" | ">"
                if matches!(self.tok(1).tok, Tok::Sym(t) if t == *s)
                    && adjacent(self.tok(0), self.tok(1)) =>
            {
                (if *s == "<" { "<<" } else { ">>" }, 3)
            }
            "+" => ("+", 4),
            "-" => ("-", 4),
            "*" => ("*", 5),
            "/" => ("/", 5),
            "%" => ("%", 5),
            _ => return None,
        })
    }

    /// Operators of precedence `min` and above, left-associative. A chain
    /// of operators is parsed in a loop into one flat [`ExprKind::Chain`],
    /// so only real nesting (parentheses, unary operators, a tighter
    /// operator's operand) counts towards [`MAX_DEPTH`].
    fn binary(&mut self, min: u8) -> Res<Expr> {
        self.enter()?;
        let first = self.unary()?;
        let mut rest = Vec::new();
        while let Some((op, prec)) = self.binop().filter(|(_, p)| *p >= min) {
            let pos = self.bump().pos;
            if op.len() == 2 {
                self.bump();
            }
            rest.push((op, pos, self.binary(prec + 1)?));
        }
        self.leave();
        Ok(if rest.is_empty() {
            first
        } else {
            let pos = first.pos;
            Expr {
                kind: ExprKind::Chain(Box::new(first), rest),
                pos,
            }
        })
    }

    fn unary(&mut self) -> Res<Expr> {
        let t = self.tok(0).clone();
        match t.tok {
            Tok::Sym(s @ ("-" | "+" | "~")) => {
                self.bump();
                self.enter()?;
                let e = self.unary()?;
                self.leave();
                let c = s.chars().next().unwrap_or('-');
                Ok(Expr {
                    kind: ExprKind::Unary(c, Box::new(e)),
                    pos: t.pos,
                })
            }
            Tok::Sym("(") => {
                self.bump();
                let e = self.expr()?;
                self.expect_sym(")", "to close `(`")?;
                Ok(e)
            }
            Tok::Int(v) => {
                self.bump();
                Ok(Expr {
                    kind: ExprKind::Int(v),
                    pos: t.pos,
                })
            }
            Tok::Ident(ref w) if w == "TRUE" || w == "FALSE" => Err(CompileError::unsupported(
                t.pos,
                format!("`{w}`"),
                "constants are integers",
            )),
            Tok::Ident(_) | Tok::Sym("::") => {
                let (parts, abs) = self.scoped()?;
                Ok(Expr {
                    kind: ExprKind::Name(parts, abs),
                    pos: t.pos,
                })
            }
            _ => Err(self.expected("an integer, a constant's name or `(`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(src: &str) -> String {
        parse(src).unwrap_err().to_string()
    }

    #[test]
    fn pfs_write_as_the_paper_prints_it() {
        let ast = parse(
            "interface pfs {\n int pfs_write([in] int handle,\n [in, out] int *pos,\n [in] int len,\n \
             [in] int data_size,\n [in, size_is(data_size)] int *data);\n};",
        )
        .unwrap();
        let Def::Interface { defs, .. } = &ast.defs[0] else {
            panic!("{ast:?}")
        };
        let Def::Op(op) = &defs[0] else { panic!() };
        assert_eq!(op.name, "pfs_write");
        assert_eq!(op.params.len(), 5);
        assert_eq!(op.params[1].dir.map(|d| d.0), Some(Dir::InOut));
        assert_eq!(op.params[1].decl.stars, 1);
        assert_eq!(
            op.params[4].size_is.as_ref().map(|s| s.0.as_str()),
            Some("data_size")
        );
    }

    #[test]
    fn shifts_and_nested_sequences() {
        let ast =
            parse("const long K = 1 << 3 >> 1; typedef sequence<sequence<long>> ss;").unwrap();
        let Def::Const { value, .. } = &ast.defs[0] else {
            panic!()
        };
        let ExprKind::Chain(_, rest) = &value.kind else {
            panic!("{value:?}")
        };
        assert_eq!(rest.iter().map(|r| r.0).collect::<Vec<_>>(), ["<<", ">>"]);
        assert!(matches!(
            ast.defs[1],
            Def::Typedef(
                TypeSpec {
                    kind: TypeKind::Sequence(_),
                    ..
                },
                _
            )
        ));
        assert_eq!(
            err("const long K = 1 < < 3;"),
            "1:18: expected `;` after the value of constant `K`, found `<`"
        );
    }

    #[test]
    fn depth_is_limited() {
        let deep = format!("const long K = {}1{};", "(".repeat(100), ")".repeat(100));
        assert!(err(&deep).contains("nested more than 64 levels deep"));
        let deep = format!("const long K = {}1;", "-".repeat(10_000));
        assert!(err(&deep).contains("nested more than 64 levels deep"));
        // A flat chain is no nesting, however long; nesting through it is.
        parse(&format!("const long K = 1{};", "+1".repeat(10_000))).unwrap();
        parse(&format!(
            "const long K = 1{};",
            " * 2 + 1 << 1 | 1".repeat(2_000)
        ))
        .unwrap();
        let deep = format!(
            "const long K = {}1{};",
            "1 + (".repeat(100),
            ")".repeat(100)
        );
        assert!(err(&deep).contains("nested more than 64 levels deep"));
        let deep = "module m { ".repeat(1000);
        assert!(err(&deep).contains("nested more than 64 levels deep"));
        let deep = format!(
            "typedef {}long{} t;",
            "sequence<".repeat(1000),
            ">".repeat(1000)
        );
        assert!(err(&deep).contains("nested more than 64 levels deep"));
        let deep = format!("typedef long t{};", "[1]".repeat(1000));
        assert!(err(&deep).contains("nested more than 64 levels deep"));
    }
}
