//! `fastpath idl`: compile IDL files into stubs and show the message
//! layouts they use (the *Stub-Code Performance is Becoming Important*
//! paper's IDL compiler; see docs/idl.md).
//!
//! - `compile FILE --lang rust|c [--out DIR]` writes the generated stubs:
//!   `DIR/<stem>.rs`, or `DIR/<stem>.h` and `DIR/<stem>.c` with the C run
//!   time of the channel beside them (`idl_rt.h`, `idl_rt.c`), creating
//!   `DIR` and its parents if need be; without `--out`, prints the stubs.
//!   The C header compiles as C11 and as C++ (`extern "C"`, and
//!   `static_assert` for C11's `_Static_assert`).
//! - `check FILE [--json]` checks the file and prints each operation's
//!   record: the offset, size and direction of every field, which values
//!   travel indirectly, and whether the record fits the inline descriptor;
//!   `--json` prints the same as one JSON object for scripts.
//!
//! What a file must be: UTF-8 text (an invalid byte is an error at its
//! line and column; a leading byte-order mark is skipped and counts for no
//! column) that declares something. A file with no declarations
//! at all (empty, or only comments) is an error, since it generates
//! nothing; one with types but no `interface` is checked and compiled, with
//! a warning on stderr that there are no stubs to generate. An error for a
//! configured limit names the flag that sets it (`--max-record`,
//! `--max-strings`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use idl::CompileError;
use idl::error::ErrorKind;
use idl::model::{Dir, Idl, LimitName, Limits, Op, Slot, Type};
use serde_json::{Value, json};

/// `println!` that ends quietly when stdout is closed (e.g. piped into `head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// The `idl` subcommands.
#[derive(Subcommand)]
pub enum IdlCmd {
    /// Generate client stubs, the server trait or table, server stubs and
    /// the server loop.
    Compile {
        /// The IDL source file.
        file: PathBuf,
        /// The language to generate.
        #[arg(long, value_enum, default_value_t = Lang::Rust)]
        lang: Lang,
        /// Write the files into this directory (created, with its parents,
        /// if missing) instead of printing them.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Check a file and print every operation's message layout.
    Check {
        /// The IDL source file.
        file: PathBuf,
        #[command(flatten)]
        limits: LimitArgs,
        /// Print the structs and the layouts as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// The limits a file is checked against (L4's by default).
#[derive(clap::Args)]
pub struct LimitArgs {
    /// Strings and sequences in one message, each direction.
    #[arg(long, default_value_t = Limits::default().max_strings)]
    max_strings: u32,
    /// Bytes of one string or sequence.
    #[arg(long, default_value_t = Limits::default().max_string_bytes)]
    max_string_bytes: u32,
    /// Bytes of one message record.
    #[arg(long, default_value_t = Limits::default().max_record)]
    max_record: u32,
}

impl LimitArgs {
    fn limits(&self) -> Limits {
        Limits {
            max_strings: self.max_strings,
            max_string_bytes: self.max_string_bytes,
            max_record: self.max_record,
        }
    }
}

/// A language `compile` generates.
#[derive(Clone, Copy, ValueEnum)]
pub enum Lang {
    /// A Rust module (what `idl::compile` writes from a `build.rs`).
    Rust,
    /// A C header and source file.
    C,
}

/// Runs an `idl` subcommand. With `check --json`, a failure also prints
/// the CLI's JSON error object on standard output
/// ([`crate::print_json_error`]).
pub fn main(cmd: IdlCmd) -> ExitCode {
    let json = matches!(cmd, IdlCmd::Check { json: true, .. });
    match run(cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("fastpath idl: {msg}");
            if json {
                crate::print_json_error("idl check", &msg);
            }
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: IdlCmd) -> Result<(), String> {
    match cmd {
        IdlCmd::Compile {
            file,
            lang,
            out,
            limits,
        } => {
            let idl = load(&file, &limits.limits())?;
            let stem = stem(&file)?;
            let files = match lang {
                Lang::Rust => vec![(format!("{stem}.rs"), idl::gen_rust::generate(&idl))],
                Lang::C => {
                    let (h, c) = idl::gen_c::generate(&idl, &stem);
                    let mut files = vec![(format!("{stem}.h"), h), (format!("{stem}.c"), c)];
                    // Into a directory, the channel's C run time too, so
                    // that the directory compiles on its own (and a file
                    // named like it would be overwritten by it).
                    if out.is_some() {
                        idl::gen_c::check_stem(&stem)
                            .map_err(|e| e.with_file(&file).to_string())?;
                        files.push(("idl_rt.h".to_owned(), idl::gen_c::RUNTIME_H.to_owned()));
                        files.push(("idl_rt.c".to_owned(), idl::gen_c::RUNTIME_C.to_owned()));
                    }
                    files
                }
            };
            if let Some(dir) = &out {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("--out {}: cannot create it: {e}", dir.display()))?;
            }
            for (name, text) in files {
                match &out {
                    Some(dir) => {
                        let path = dir.join(&name);
                        std::fs::write(&path, text)
                            .map_err(|e| format!("{}: {e}", path.display()))?;
                        say!("wrote {}", path.display());
                    }
                    None => say!("// ---- {name}\n{text}"),
                }
            }
            Ok(())
        }
        IdlCmd::Check { file, limits, json } => {
            let idl = load(&file, &limits.limits())?;
            if json {
                say!("{:#}", layouts_json(&idl));
            } else {
                print_layouts(&idl);
            }
            Ok(())
        }
    }
}

/// Reads and checks `file`; an error names the file, line and column and
/// shows the line with a caret under the column. A file that declares
/// nothing is an error; one without an interface gets a warning.
fn load(file: &Path, limits: &Limits) -> Result<Idl, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let src = utf8(file, &bytes)?;
    // As the lexer does: a leading byte-order mark is no text.
    let src = src.strip_prefix('\u{feff}').unwrap_or(src);
    let idl = idl::parse_with(src, limits).map_err(|e| {
        let e = name_the_flag(e).with_file(file);
        e.render(src).trim_end().to_owned()
    })?;
    if idl.interfaces.is_empty() {
        if idl.structs.is_empty() && idl.consts.is_empty() && !declares_a_type(src) {
            return Err(format!(
                "{}: declares nothing: an IDL file declares at least one `interface NAME {{ ... }};` \
                 (and the structs, typedefs and constants its operations use)",
                file.display()
            ));
        }
        eprintln!(
            "fastpath idl: {}: warning: no interface, so there are no stubs: only its types",
            file.display()
        );
    }
    Ok(idl)
}

/// Whether `src` declares a type the model keeps no trace of (a typedef
/// of a primitive): tokens other than comments.
fn declares_a_type(src: &str) -> bool {
    let mut rest = src;
    loop {
        rest = rest.trim_start();
        if let Some(r) = rest.strip_prefix("//") {
            rest = r.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, r)| r);
        } else {
            return !rest.is_empty();
        }
    }
}

/// `bytes` as text, or an error at the line and column of the first byte
/// that is not UTF-8 (a leading byte-order mark counts for no column).
fn utf8<'a>(file: &Path, bytes: &'a [u8]) -> Result<&'a str, String> {
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        // The prefix is valid UTF-8 by definition of `valid_up_to`.
        let before = std::str::from_utf8(&bytes[..at]).unwrap_or_default();
        let before = before.strip_prefix('\u{feff}').unwrap_or(before);
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        format!(
            "{}:{line}:{col}: byte 0x{:02x} (at byte offset {at}) is not UTF-8; IDL files are UTF-8 text",
            file.display(),
            bytes[at]
        )
    })
}

/// The error with a configured limit named by the command-line flag that
/// sets it rather than by the library's `Limits` field.
fn name_the_flag(e: CompileError) -> CompileError {
    match e.kind() {
        ErrorKind::Limit {
            message,
            limit: Some(limit),
        } => {
            let flag = match limit {
                LimitName::MaxStrings => "--max-strings",
                LimitName::MaxStringBytes => "--max-string-bytes",
                LimitName::MaxRecord => "--max-record",
            };
            CompileError::limit(e.pos(), format!("{message} (set by {flag})"))
        }
        _ => e,
    }
}

fn stem(file: &Path) -> Result<String, String> {
    file.file_stem()
        .and_then(|s| s.to_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: no file name to name the output after", file.display()))
}

/// One field of a record as `check` shows it: direction and what it holds.
struct FieldRow {
    offset: u32,
    size: u32,
    dir: &'static str,
    name: Option<String>,
    ty: String,
    /// For a descriptor: the parameter that gives its count, if any.
    desc: Option<Option<String>>,
}

fn field_rows(idl: &Idl, op: &Op, ret: &str) -> Vec<FieldRow> {
    op.layout
        .fields
        .iter()
        .map(|f| match f.slot {
            Slot::Ret => FieldRow {
                offset: f.offset,
                size: f.size,
                dir: "ret",
                name: None,
                ty: ret.to_owned(),
                desc: None,
            },
            Slot::Param(i) => {
                let p = &op.params[i];
                FieldRow {
                    offset: f.offset,
                    size: f.size,
                    dir: match p.dir {
                        Dir::In => "in",
                        Dir::InOut => "inout",
                        Dir::Out => "out",
                    },
                    name: Some(p.name.clone()),
                    ty: type_name(idl, &p.ty),
                    desc: f.desc.then(|| p.size_is.map(|n| op.params[n].name.clone())),
                }
            }
        })
        .collect()
}

fn ret_name(idl: &Idl, op: &Op) -> String {
    op.ret
        .as_ref()
        .map_or("void".to_owned(), |t| type_name(idl, t))
}

fn print_layouts(idl: &Idl) {
    for s in &idl.structs {
        say!("struct {} ({} bytes, align {})", s.name, s.size, s.align);
    }
    for iface in &idl.interfaces {
        say!("interface {} ({} operations)", iface.name, iface.ops.len());
        for op in &iface.ops {
            print_op(idl, op);
        }
    }
}

fn print_op(idl: &Idl, op: &Op) {
    let l = &op.layout;
    let ret = ret_name(idl, op);
    say!(
        "  key {:>3}  {ret} {}: request {} B, reply {} B, {}",
        op.key,
        op.name,
        l.request_size,
        l.size,
        if l.inline() {
            "inline"
        } else {
            "in the message buffer"
        }
    );
    say!("    offset  size  dir    field");
    for f in field_rows(idl, op, &ret) {
        let mut what = match &f.name {
            None => format!("return value: {}", f.ty),
            Some(n) => format!("{n}: {}", f.ty),
        };
        if let Some(count) = &f.desc {
            what.push_str("  (descriptor: offset, count");
            if let Some(n) = count {
                what.push_str(&format!(" = {n}"));
            }
            what.push(')');
        }
        say!("    {:>6}  {:>4}  {:<5}  {what}", f.offset, f.size, f.dir);
    }
}

/// What `check --json` prints: the structs and every operation's record.
fn layouts_json(idl: &Idl) -> Value {
    let structs: Vec<Value> = idl
        .structs
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "size": s.size,
                "align": s.align,
                "fields": s.fields.iter().map(|(n, t)| json!({"name": n, "type": type_name(idl, t)})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let interfaces: Vec<Value> = idl
        .interfaces
        .iter()
        .map(|iface| {
            let ops: Vec<Value> = iface
                .ops
                .iter()
                .map(|op| {
                    let ret = ret_name(idl, op);
                    let fields: Vec<Value> = field_rows(idl, op, &ret)
                        .into_iter()
                        .map(|f| {
                            json!({
                                "offset": f.offset,
                                "size": f.size,
                                "dir": f.dir,
                                "name": f.name,
                                "type": f.ty,
                                "descriptor": f.desc.is_some(),
                                "count_from": f.desc.flatten(),
                            })
                        })
                        .collect();
                    json!({
                        "key": op.key,
                        "name": op.name,
                        "returns": ret,
                        "request_bytes": op.layout.request_size,
                        "reply_bytes": op.layout.size,
                        "align": op.layout.align,
                        "inline": op.layout.inline(),
                        "fields": fields,
                    })
                })
                .collect();
            json!({"name": iface.name, "operations": ops})
        })
        .collect();
    json!({"structs": structs, "interfaces": interfaces})
}

fn type_name(idl: &Idl, t: &Type) -> String {
    match t {
        Type::Prim(p) => p.rust().to_owned(),
        Type::Struct(i) => idl.structs[*i].name.clone(),
        Type::Array(e, n) => format!("[{}; {n}]", type_name(idl, e)),
        Type::String => "string".to_owned(),
        Type::Sequence(e) => format!("sequence<{}>", type_name(idl, e)),
    }
}
