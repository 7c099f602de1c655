//! The Rust test harness of one random interface: a `Server` that records
//! what it receives and answers with random values, and a client driver
//! that calls random operations with random values and checks both ways.
//!
//! For an operation `R op(in a, inout b, out c)` it writes:
//!
//! - `call_op(t, rng, seen)`: draws `a` and `b` (and junk for `c`, which
//!   the call must overwrite), remembers the values it sends, calls the
//!   client stub, and compares what the server reports it received with
//!   what was sent, and what the server reports it answered with what the
//!   stub returned;
//! - `Recorder::op`: the server's method; it turns `a` and `b` into
//!   [`Value`]s, draws new values for `b`, `c` and the result, and sends
//!   both lists through the `seen` channel before it returns.
//! - `refusal_op(t, rng, lim, c, k)`: draws `a` and `b` with strings and
//!   sequences around the per-string limit `lim` and the counts of their
//!   `size_is` lengths' types, calls the C client stub through `c` (the
//!   stub's arguments as words: the values' addresses, copies of what it
//!   may change) and then the Rust client stub, and returns both results
//!   with the lengths and values sent (`crate::Refusal`), for the
//!   differential test to hold against the plan.
//!
//! Values are compared as `Value` trees (integers, booleans, strings and
//! lists), so nothing relies on the generated types deriving traits.

use crate::random_idl::{Dir, Iface, Int, Op, Param, Ty};
use std::fmt::Write as _;

/// The Rust path of the generated module of `f`'s interface, relative to
/// the module holding the harness (the stubs are included as `stubs`).
fn iface_path(f: &Iface) -> String {
    format!("stubs::{}", f.scoped(&f.name))
}

/// A struct's Rust path: its scoped name in `UpperCamelCase`, at the top
/// of the generated file.
fn struct_path(f: &Iface, s: usize) -> String {
    let camel: String = f
        .scoped(&f.structs[s].name)
        .split('_')
        .map(|part| {
            let mut c = part.chars();
            c.next().map_or(String::new(), |first| {
                first.to_uppercase().chain(c).collect()
            })
        })
        .collect();
    format!("stubs::{camel}")
}

/// The Rust type that holds a value of `ty` on the client's side.
fn rust_ty(f: &Iface, ty: &Ty) -> String {
    match f.resolve(ty) {
        Ty::Int(i) => i.rust().to_string(),
        Ty::Bool => "bool".into(),
        Ty::Struct(s) => struct_path(f, *s),
        Ty::Array(e, n) => format!("[{}; {n}]", rust_ty(f, e)),
        Ty::String => "String".into(),
        Ty::Seq(e) => format!("Vec<{}>", rust_ty(f, e)),
        Ty::Alias(_) => unreachable!("resolved"),
    }
}

/// The type of the server method's parameter (the generated `Server`
/// trait's shape): in values by value, in strings and sequences in place,
/// inout and out values `&mut` into the record, out sequences and (inout
/// and out) strings as writers into the string area.
fn server_param_ty(f: &Iface, p: &Param) -> String {
    let ty = f.resolve(&p.ty);
    match (p.dir, ty) {
        (Dir::In, Ty::String) => "&str".into(),
        (Dir::In, Ty::Seq(e)) => format!("&[{}]", rust_ty(f, e)),
        (Dir::In, _) => rust_ty(f, ty),
        (_, Ty::String) => "&mut idl::rt::OutStr<'_>".into(),
        (Dir::InOut, Ty::Seq(e)) => format!("&mut [{}]", rust_ty(f, e)),
        (Dir::Out, Ty::Seq(e)) => format!("&mut idl::rt::OutSeq<'_, {}>", rust_ty(f, e)),
        (_, _) => format!("&mut {}", rust_ty(f, ty)),
    }
}

/// For a `size_is` sequence whose length's type counts fewer elements than
/// the per-string limit holds: that many (a stub refuses more).
fn count_bound(op: &Op, p: &Param) -> Option<u32> {
    let len = op.params.get(p.size_is?)?;
    match len.ty {
        Ty::Int(Int::I8) => Some(i8::MAX as u32),
        Ty::Int(Int::U8 | Int::Char) => Some(u8::MAX as u32),
        Ty::Int(Int::I16) => Some(i16::MAX as u32),
        Ty::Int(Int::U16) => Some(u16::MAX as u32),
        _ => None,
    }
}

/// An expression that draws a random value of `ty` from `rng` (a
/// `&mut Rng`); `big` says whether a string or sequence should be long,
/// near `lim`, the per-string limit in bytes.
fn draw(f: &Iface, ty: &Ty, big: &str) -> String {
    match f.resolve(ty) {
        Ty::String => format!("crate::string(rng, {big}, lim)"),
        Ty::Seq(e) => format!(
            "crate::seq(rng, {big}, crate::elems::<{}>(lim))",
            rust_ty(f, e)
        ),
        _ => "crate::Arb::arb(rng)".into(),
    }
}

/// The parameters that carry a value of their own: every one but the
/// `size_is` lengths.
fn valued(op: &Op) -> impl Iterator<Item = (usize, &Param)> {
    op.params.iter().enumerate().filter(|(_, p)| !p.is_length)
}

fn is_indirect(f: &Iface, p: &Param) -> bool {
    matches!(f.resolve(&p.ty), Ty::String | Ty::Seq(_))
}

fn names(list: &[&Param]) -> String {
    let quoted: Vec<String> = list.iter().map(|p| format!("{:?}", p.name)).collect();
    format!("&[{}]", quoted.join(", "))
}

/// The harness of `f`, to be included beside its stubs (as `stubs`).
pub fn harness(f: &Iface) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// The harness of {}: generated by crates/idl-proptest/build/harness.rs.\n",
        f.name
    );
    let _ = writeln!(out, "use crate::{{Seen, ToValue as _}};");
    let _ = writeln!(out, "use std::sync::mpsc::{{Receiver, Sender}};\n");
    for (i, _) in f.structs.iter().enumerate() {
        struct_impls(&mut out, f, i);
    }
    recorder(&mut out, f);
    filler(&mut out, f);
    for op in &f.ops {
        client_call(&mut out, f, op);
    }
    driver(&mut out, f);
    for op in &f.ops {
        refusal_call(&mut out, f, op);
    }
    refusal(&mut out, f);
    out
}

/// `Arb` and `ToValue` for a generated struct, field by field.
fn struct_impls(out: &mut String, f: &Iface, s: usize) {
    let path = struct_path(f, s);
    let fields = &f.structs[s].fields;
    let _ = writeln!(out, "impl crate::Arb for {path} {{");
    let _ = writeln!(out, "    fn arb(rng: &mut crate::Rng) -> Self {{");
    let _ = writeln!(out, "        {path} {{");
    for (name, _) in fields {
        let _ = writeln!(out, "            {name}: crate::Arb::arb(rng),");
    }
    if f.has_padding(s) {
        // The generated struct spells C's padding out as `_padN` fields.
        let _ = writeln!(out, "            ..Default::default()");
    }
    let _ = writeln!(out, "        }}\n    }}\n}}\n");
    let _ = writeln!(out, "impl crate::Fill for {path} {{");
    let _ = writeln!(
        out,
        "    fn fill_out(a: &mut crate::Answers) -> Self {{\n        {path} {{"
    );
    for (name, _) in fields {
        let _ = writeln!(out, "            {name}: crate::Fill::fill_out(a),");
    }
    if f.has_padding(s) {
        let _ = writeln!(out, "            ..Default::default()");
    }
    let _ = writeln!(out, "        }}\n    }}");
    let _ = writeln!(
        out,
        "    fn fill_inout(&mut self, a: &mut crate::Answers) {{"
    );
    for (name, _) in fields {
        let _ = writeln!(out, "        crate::Fill::fill_inout(&mut self.{name}, a);");
    }
    let _ = writeln!(out, "    }}\n}}\n");
    let _ = writeln!(out, "impl crate::ToValue for {path} {{");
    let _ = writeln!(out, "    fn value(&self) -> crate::Value {{");
    let list: Vec<String> = fields
        .iter()
        .map(|(n, _)| format!("self.{n}.value()"))
        .collect();
    let _ = writeln!(out, "        crate::Value::List(vec![{}])", list.join(", "));
    let _ = writeln!(out, "    }}\n}}\n");
}

/// The server: records the in and inout values it receives and answers
/// with values from its own generator.
fn recorder(out: &mut String, f: &Iface) {
    let iface = iface_path(f);
    let _ = writeln!(
        out,
        "/// The server of `{}`: reports each call's values through `seen`.",
        f.name
    );
    let _ = writeln!(
        out,
        "pub struct Recorder {{\n    rng: crate::Rng,\n    seen: Sender<Seen>,\n}}\n"
    );
    let _ = writeln!(out, "impl Recorder {{");
    let _ = writeln!(out, "    /// A server that draws its answers from `seed`.");
    let _ = writeln!(
        out,
        "    pub fn new(seed: u64, seen: Sender<Seen>) -> Self {{"
    );
    let _ = writeln!(
        out,
        "        Recorder {{ rng: crate::Rng::new(seed), seen }}\n    }}\n}}\n"
    );
    let _ = writeln!(out, "impl {iface}::Server for Recorder {{");
    for op in &f.ops {
        recorder_method(out, f, op);
    }
    let _ = writeln!(out, "}}\n");
}

/// Writes the first line of `op`'s method in a generated `Server` impl:
/// its name, its parameters with their server-side types, its return type.
fn server_method_head(out: &mut String, f: &Iface, op: &Op) {
    let args: Vec<String> = valued(op)
        .map(|(_, p)| format!("{}: {}", arg(p), server_param_ty(f, p)))
        .collect();
    let ret = op
        .ret
        .as_ref()
        .map_or(String::new(), |t| format!(" -> {}", rust_ty(f, t)));
    let _ = writeln!(
        out,
        "    fn {}(&mut self, {}){ret} {{",
        op.name,
        args.join(", ")
    );
}

fn recorder_method(out: &mut String, f: &Iface, op: &Op) {
    server_method_head(out, f, op);
    let received: Vec<&Param> = valued(op)
        .map(|(_, p)| p)
        .filter(|p| p.dir != Dir::Out)
        .collect();
    let list: Vec<String> = received
        .iter()
        .map(|p| match (p.dir, f.resolve(&p.ty)) {
            // An inout string's writer starts with the client's value.
            (Dir::InOut, Ty::String) => format!("crate::written({})", arg(p)),
            _ => format!("{}.value()", arg(p)),
        })
        .collect();
    let _ = writeln!(out, "        let received = vec![{}];", list.join(", "));
    let answers = valued(op).any(|(_, p)| p.dir != Dir::In) || op.ret.is_some();
    if answers {
        let _ = writeln!(out, "        let rng = &mut self.rng;");
    }
    // The writers: out strings and sequences, inout strings.
    let outs: Vec<&Param> = valued(op)
        .map(|(_, p)| p)
        .filter(|p| match p.dir {
            Dir::In => false,
            Dir::InOut => f.resolve(&p.ty) == &Ty::String,
            Dir::Out => is_indirect(f, p),
        })
        .collect();
    if !outs.is_empty() {
        let _ = writeln!(
            out,
            "        let big = crate::big_slot(rng, {});",
            outs.len()
        );
    }
    let mut answered = Vec::new();
    for (_, p) in valued(op).filter(|(_, p)| p.dir != Dir::In) {
        let a = arg(p);
        let big = match outs.iter().position(|o| std::ptr::eq(*o, p)) {
            Some(k) => format!("big == Some({k})"),
            None => "false".into(),
        };
        match (p.dir, f.resolve(&p.ty)) {
            (Dir::InOut, Ty::Seq(_)) => {
                let _ = writeln!(
                    out,
                    "        for x in {a}.iter_mut() {{\n            *x = crate::Arb::arb(rng);\n        }}"
                );
                answered.push(format!("{a}.value()"));
            }
            (_, Ty::String) => {
                let _ = writeln!(
                    out,
                    "        let v_{a} = crate::string(rng, {big}, {a}.capacity());"
                );
                let _ = writeln!(out, "        crate::answer_out_str({a}, &v_{a});");
                answered.push(format!("v_{a}.value()"));
            }
            (Dir::Out, Ty::Seq(e)) => {
                let _ = writeln!(
                    out,
                    "        let v_{a}: Vec<{}> = crate::seq(rng, {big}, {a}.capacity(){});",
                    rust_ty(f, e),
                    count_bound(op, p).map_or(String::new(), |m| format!(".min({m})"))
                );
                let _ = writeln!(out, "        crate::answer_out_seq({a}, &v_{a});");
                answered.push(format!("v_{a}.value()"));
            }
            _ => {
                let _ = writeln!(out, "        *{a} = crate::Arb::arb(rng);");
                answered.push(format!("{a}.value()"));
            }
        }
    }
    if let Some(t) = &op.ret {
        let _ = writeln!(
            out,
            "        let ret: {} = crate::Arb::arb(rng);",
            rust_ty(f, t)
        );
        answered.push("ret.value()".into());
    }
    let _ = writeln!(out, "        let answered = vec![{}];", answered.join(", "));
    let _ = writeln!(
        out,
        "        let _ = self.seen.send(Seen {{ op: {:?}, received, answered }});",
        op.name
    );
    if op.ret.is_some() {
        let _ = writeln!(out, "        ret");
    }
    let _ = writeln!(out, "    }}\n");
}

/// The server of the differential test: answers every call by the
/// [`Answers`](crate) rule of the library, which the C and dynamic servers
/// of that test follow too.
fn filler(out: &mut String, f: &Iface) {
    let iface = iface_path(f);
    let _ = writeln!(
        out,
        "/// The server of `{}` that answers by `crate::Answers`.\npub struct Filler;\n",
        f.name
    );
    let _ = writeln!(
        out,
        "#[allow(unused_variables)]\nimpl {iface}::Server for Filler {{"
    );
    for op in &f.ops {
        server_method_head(out, f, op);
        let _ = writeln!(out, "        let a = &mut crate::Answers::current();");
        for (_, p) in valued(op).filter(|(_, p)| p.dir != Dir::In) {
            let x = arg(p);
            let line = match (p.dir, f.resolve(&p.ty)) {
                (Dir::InOut, Ty::String) => format!("crate::fill_inout_str({x}, a);"),
                (_, Ty::String) => format!("crate::fill_out_str({x}, a);"),
                (Dir::InOut, Ty::Seq(_)) => {
                    format!("for x in {x}.iter_mut() {{ crate::Fill::fill_inout(x, a); }}")
                }
                (_, Ty::Seq(_)) => format!("crate::fill_out_seq({x}, a);"),
                (Dir::InOut, _) => format!("crate::Fill::fill_inout({x}, a);"),
                (_, _) => format!("*{x} = crate::Fill::fill_out(a);"),
            };
            let _ = writeln!(out, "        {line}");
        }
        if op.ret.is_some() {
            let _ = writeln!(out, "        crate::Fill::fill_out(a)");
        }
        let _ = writeln!(out, "    }}\n");
    }
    let _ = writeln!(out, "}}\n");
    let _ = writeln!(
        out,
        "/// Serves `{}` on `t` by `crate::Answers` until the client hangs up.",
        f.name
    );
    let _ = writeln!(
        out,
        "pub fn serve_answers<T: idl::rt::ServerTransport + ?Sized>(t: &mut T) -> Result<(), idl::rt::CallError> {{\n    {iface}::serve(&mut Filler, t)\n}}\n"
    );
}

/// The name of a parameter in the harness (the IDL name may be a Rust
/// keyword or clash with the harness's own names such as `rng` or `t`, so
/// the harness prefixes it: `a_<name>`).
fn arg(p: &Param) -> String {
    format!("a_{}", p.name)
}

/// `call_<op>`: one call with random values, checked both ways.
fn client_call(out: &mut String, f: &Iface, op: &Op) {
    let rng = if valued(op).next().is_some() {
        "rng"
    } else {
        "_rng"
    };
    let sends_strings = valued(op).any(|(_, p)| p.dir != Dir::Out && is_indirect(f, p));
    let lim = if sends_strings { "lim" } else { "_lim" };
    let _ = writeln!(
        out,
        "fn call_{}<T: idl::rt::ClientTransport + ?Sized>(t: &mut T, {rng}: &mut crate::Rng, {lim}: usize, seen: &Receiver<Seen>) -> Result<(), String> {{",
        op.name
    );
    let ins: Vec<&Param> = valued(op)
        .map(|(_, p)| p)
        .filter(|p| p.dir != Dir::Out && is_indirect(f, p))
        .collect();
    if !ins.is_empty() {
        let _ = writeln!(out, "    let big = crate::big_slot(rng, {});", ins.len());
    }
    let mut call_args = Vec::new();
    for (_, p) in valued(op) {
        let a = arg(p);
        let ty = rust_ty(f, &p.ty);
        let indirect = is_indirect(f, p);
        let value = match p.dir {
            Dir::Out if indirect => "crate::junk(rng)".to_string(),
            Dir::Out => "crate::Arb::arb(rng)".to_string(),
            _ => {
                let big = match ins.iter().position(|o| std::ptr::eq(*o, p)) {
                    Some(k) => format!("big == Some({k})"),
                    None => "false".into(),
                };
                match (f.resolve(&p.ty), count_bound(op, p)) {
                    (Ty::Seq(e), Some(m)) => format!(
                        "crate::seq(rng, {big}, crate::elems::<{}>(lim).min({m}))",
                        rust_ty(f, e)
                    ),
                    _ => draw(f, &p.ty, &big),
                }
            }
        };
        let m = if p.dir == Dir::In { "" } else { "mut " };
        let _ = writeln!(out, "    let {m}{a}: {ty} = {value};");
        call_args.push(match (p.dir, indirect) {
            (Dir::In, false) => a,
            (Dir::In, true) => format!("&{a}"),
            (_, _) => format!("&mut {a}"),
        });
    }
    let sent_params: Vec<&Param> = valued(op)
        .map(|(_, p)| p)
        .filter(|p| p.dir != Dir::Out)
        .collect();
    let list: Vec<String> = sent_params
        .iter()
        .map(|p| format!("{}.value()", arg(p)))
        .collect();
    let _ = writeln!(out, "    let sent = vec![{}];", list.join(", "));
    let bind = if op.ret.is_some() { "let ret = " } else { "" };
    let _ = writeln!(
        out,
        "    {bind}{}::{}(t, {}).map_err(|e| format!(\"the call failed: {{e}} ({{e:?}})\"))?;",
        iface_path(f),
        op.name,
        call_args.join(", ")
    );
    let back_params: Vec<&Param> = valued(op)
        .map(|(_, p)| p)
        .filter(|p| p.dir != Dir::In)
        .collect();
    let mut got: Vec<String> = back_params
        .iter()
        .map(|p| format!("{}.value()", arg(p)))
        .collect();
    let mut back_names: Vec<String> = back_params
        .iter()
        .map(|p| format!("{:?}", p.name))
        .collect();
    if op.ret.is_some() {
        got.push("ret.value()".into());
        back_names.push("\"return value\"".into());
    }
    let _ = writeln!(out, "    let got = vec![{}];", got.join(", "));
    let _ = writeln!(
        out,
        "    crate::check({:?}, {}, &[{}], sent, got, seen)\n}}\n",
        op.name,
        names(&sent_params),
        back_names.join(", ")
    );
}

/// `drive`: `calls` calls of random operations; `serve`: the server loop
/// over a transport, with a [`Recorder`].
fn driver(out: &mut String, f: &Iface) {
    let _ = writeln!(
        out,
        "/// Makes `calls` calls of random operations of `{}` with values from `seed`,\n\
         /// strings and sequences of at most `lim` bytes.",
        f.name
    );
    let _ = writeln!(
        out,
        "pub fn drive<T: idl::rt::ClientTransport + ?Sized>(t: &mut T, seed: u64, calls: usize, lim: usize, seen: &Receiver<Seen>) -> Result<(), String> {{"
    );
    let _ = writeln!(out, "    let rng = &mut crate::Rng::new(seed);");
    let _ = writeln!(out, "    for call in 0..calls {{");
    let _ = writeln!(out, "        let r = match rng.below({}) {{", f.ops.len());
    for (k, op) in f.ops.iter().enumerate() {
        let _ = writeln!(
            out,
            "            {k} => call_{}(t, rng, lim, seen).map_err(|e| format!(\"{}: {{e}}\")),",
            op.name, op.name
        );
    }
    let _ = writeln!(out, "            _ => unreachable!(),\n        }};");
    let _ = writeln!(
        out,
        "        r.map_err(|e| format!(\"call {{call}}: {{e}}\"))?;"
    );
    let _ = writeln!(out, "    }}\n    Ok(())\n}}\n");
    let _ = writeln!(
        out,
        "/// Serves `{}` on `t` until the client hangs up.",
        f.name
    );
    let _ = writeln!(
        out,
        "pub fn serve<T: idl::rt::ServerTransport + ?Sized>(t: &mut T, seed: u64, seen: Sender<Seen>) -> Result<(), idl::rt::CallError> {{"
    );
    let _ = writeln!(
        out,
        "    {}::serve(&mut Recorder::new(seed, seen), t)\n}}",
        iface_path(f)
    );
}

/// The C element type's Rust twin of a sequence or string parameter.
fn elem_ty(f: &Iface, p: &Param) -> String {
    match f.resolve(&p.ty) {
        Ty::Seq(e) => rust_ty(f, e),
        _ => "u8".into(),
    }
}

/// `refusal_<op>`: one call of `op` with values around the per-string
/// limit, through the C client stub (`c`) and then the Rust one (`t`),
/// with the same values; the C stub gets copies of what it may change.
///
/// The C arguments follow the C stub's parameters (docs/idl.md,
/// "Generated C"): every declared parameter in order, `size_is` lengths
/// included; a string or sequence without `size_is` is a pointer and a
/// `uint32_t` length (by value when in, and for an inout sequence;
/// through a pointer otherwise); out strings and sequences come back as
/// a pointer into the area; the return value through a last pointer.
fn refusal_call(out: &mut String, f: &Iface, op: &Op) {
    let _ = writeln!(
        out,
        "#[allow(unused_mut, unused_variables, clippy::clone_on_copy)]\n\
         fn refusal_{}<T: idl::rt::ClientTransport + ?Sized>(t: &mut T, rng: &mut crate::Rng, lim: usize, c: &mut dyn FnMut(usize, &[u64]) -> i32, k: usize) -> crate::Refusal {{",
        op.name
    );
    let _ = writeln!(out, "    let mut lens: Vec<(usize, usize)> = Vec::new();");
    // The values, as the Rust stub takes them.
    let mut call_args = Vec::new();
    let mut expressible = Vec::new();
    for (i, p) in valued(op) {
        let a = arg(p);
        let ty = rust_ty(f, &p.ty);
        let indirect = is_indirect(f, p);
        let value = match (p.dir, f.resolve(&p.ty)) {
            (Dir::Out, Ty::String) => "String::new()".to_string(),
            (Dir::Out, Ty::Seq(_)) => "Vec::new()".to_string(),
            (Dir::Out, _) => "crate::Arb::arb(rng)".to_string(),
            (_, Ty::String) => "crate::hostile_string(rng, lim)".to_string(),
            (_, Ty::Seq(e)) => format!(
                "crate::hostile_seq::<{}>(rng, lim, {})",
                rust_ty(f, e),
                match count_bound(op, p) {
                    Some(m) => format!("Some({m})"),
                    None => "None".into(),
                }
            ),
            _ => "crate::Arb::arb(rng)".to_string(),
        };
        let _ = writeln!(out, "    let mut {a}: {ty} = {value};");
        if p.dir != Dir::Out && indirect {
            let _ = writeln!(out, "    lens.push(({i}, {a}.len()));");
        }
        if let (Some(m), Dir::In | Dir::InOut) = (count_bound(op, p), p.dir) {
            expressible.push(format!("{a}.len() <= {m}"));
        }
        call_args.push(match (p.dir, indirect) {
            (Dir::In, false) => a,
            (Dir::In, true) => format!("&{a}"),
            (_, _) => format!("&mut {a}"),
        });
    }
    // What the Rust stub gets, in comparable form (for the dynamic client).
    let sent: Vec<String> = valued(op)
        .filter(|(_, p)| p.dir != Dir::Out)
        .map(|(i, p)| format!("({i}, {}.value())", arg(p)))
        .collect();
    let _ = writeln!(
        out,
        "    let values: Vec<(usize, crate::Value)> = vec![{}];",
        sent.join(", ")
    );
    // The C side's copies and the words.
    let mut words = Vec::new();
    for (i, p) in op.params.iter().enumerate() {
        let a = arg(p);
        let (cn, nm) = (format!("c_{}", p.name), &p.name);
        if p.is_length {
            let seq = op
                .params
                .iter()
                .find(|q| q.size_is == Some(i))
                .expect("a length has its sequence");
            let count = if seq.dir == Dir::Out {
                "0".to_string()
            } else {
                format!("{}.len()", arg(seq))
            };
            let lt = rust_ty(f, &p.ty);
            if p.dir == Dir::In {
                words.push(format!("{count} as u64"));
            } else {
                let init = if count == "0" {
                    "0".to_string()
                } else {
                    format!("{count} as {lt}")
                };
                let _ = writeln!(out, "    let mut {cn}: {lt} = {init};");
                words.push(format!("crate::addr_mut(&mut {cn})"));
            }
            continue;
        }
        let no_len = p.size_is.is_none();
        match (p.dir, f.resolve(&p.ty)) {
            (Dir::In, Ty::String) => {
                let _ = writeln!(out, "    let {cn} = crate::c_string(rng, &{a});");
                words.push(format!("crate::addr({cn}.as_ptr())"));
                words.push(format!("{cn}.len() as u64"));
            }
            (Dir::InOut, Ty::String) => {
                let _ = writeln!(out, "    let {cn} = crate::c_string(rng, &{a});");
                let _ = writeln!(
                    out,
                    "    let mut cp_{nm}: u64 = crate::addr({cn}.as_ptr());"
                );
                let _ = writeln!(out, "    let mut cl_{nm}: u32 = {cn}.len() as u32;");
                words.push(format!("crate::addr_mut(&mut cp_{nm})"));
                words.push(format!("crate::addr_mut(&mut cl_{nm})"));
            }
            (Dir::Out, Ty::String | Ty::Seq(_)) => {
                let _ = writeln!(out, "    let mut cp_{nm}: u64 = 0;");
                words.push(format!("crate::addr_mut(&mut cp_{nm})"));
                if no_len {
                    let _ = writeln!(out, "    let mut cl_{nm}: u32 = 0;");
                    words.push(format!("crate::addr_mut(&mut cl_{nm})"));
                }
            }
            (Dir::In, Ty::Seq(_)) => {
                words.push(format!("crate::addr({a}.as_ptr())"));
                if no_len {
                    words.push(format!("{a}.len() as u64"));
                }
            }
            (Dir::InOut, Ty::Seq(_)) => {
                let _ = writeln!(
                    out,
                    "    let mut {cn}: Vec<{}> = {a}.clone();",
                    elem_ty(f, p)
                );
                words.push(format!("crate::addr_mut({cn}.as_mut_ptr())"));
                if no_len {
                    words.push(format!("{cn}.len() as u64"));
                }
            }
            (Dir::In, Ty::Int(Int::U64)) => words.push(a),
            (Dir::In, Ty::Int(_) | Ty::Bool) => words.push(format!("{a} as u64")),
            (Dir::In, _) => words.push(format!("crate::addr(&{a})")),
            (_, _) => {
                let _ = writeln!(
                    out,
                    "    let mut {cn}: {} = {a}.clone();",
                    rust_ty(f, &p.ty)
                );
                words.push(format!("crate::addr_mut(&mut {cn})"));
            }
        }
    }
    if let Some(rt) = &op.ret {
        let _ = writeln!(
            out,
            "    let mut c_return: {} = crate::Arb::arb(rng);",
            rust_ty(f, rt)
        );
        words.push("crate::addr_mut(&mut c_return)".into());
    }
    let cond = if expressible.is_empty() {
        "true".to_string()
    } else {
        expressible.join(" && ")
    };
    let _ = writeln!(
        out,
        "    let c_status = ({cond}).then(|| c(k, &[{}]));",
        words.join(", ")
    );
    let _ = writeln!(
        out,
        "    let rust = {}::{}(t, {}).map(|_| ());",
        iface_path(f),
        op.name,
        call_args.join(", ")
    );
    let _ = writeln!(
        out,
        "    crate::Refusal {{ rust, c: c_status, lens, values }}\n}}\n"
    );
}

/// `refusal`: [`refusal_call`] of operation `k`.
fn refusal(out: &mut String, f: &Iface) {
    let _ = writeln!(
        out,
        "/// One call of operation `k` of `{}` through the C client stub (`c`) and the\n\
         /// Rust one (`t`) with the same values, around the per-string limit `lim`.",
        f.name
    );
    let _ = writeln!(
        out,
        "pub fn refusal<T: idl::rt::ClientTransport + ?Sized>(t: &mut T, k: usize, rng: &mut crate::Rng, lim: usize, c: &mut dyn FnMut(usize, &[u64]) -> i32) -> crate::Refusal {{"
    );
    let _ = writeln!(out, "    match k {{");
    for (k, op) in f.ops.iter().enumerate() {
        let _ = writeln!(
            out,
            "        {k} => refusal_{}(t, rng, lim, c, {k}),",
            op.name
        );
    }
    let _ = writeln!(
        out,
        "        _ => panic!(\"{} has {} operations\"),\n    }}\n}}",
        f.name,
        f.ops.len()
    );
}
