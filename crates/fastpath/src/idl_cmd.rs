//! `fastpath idl`: compile IDL files into stubs and show the message
//! layouts they use (the *Stub-Code Performance is Becoming Important*
//! paper's IDL compiler; see docs/idl.md).
//!
//! - `compile FILE --lang rust|c [--out DIR]` writes the generated stubs:
//!   `DIR/<stem>.rs`, or `DIR/<stem>.h` and `DIR/<stem>.c` with the C run
//!   time of the channel beside them (`idl_rt.h`, `idl_rt.c`); without
//!   `--out`, prints the stubs.
//! - `check FILE` checks the file and prints each operation's record: the
//!   offset, size and direction of every field, which values travel
//!   indirectly, and whether the record fits the inline descriptor.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use idl::model::{Dir, Idl, Limits, Op, Slot, Type};

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
        /// Write the files into this directory instead of printing them.
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

/// Runs an `idl` subcommand.
pub fn main(cmd: IdlCmd) -> ExitCode {
    match run(cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("fastpath idl: {msg}");
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
                    // that the directory compiles on its own.
                    if out.is_some() {
                        files.push(("idl_rt.h".to_owned(), idl::gen_c::RUNTIME_H.to_owned()));
                        files.push(("idl_rt.c".to_owned(), idl::gen_c::RUNTIME_C.to_owned()));
                    }
                    files
                }
            };
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
        IdlCmd::Check { file, limits } => {
            let idl = load(&file, &limits.limits())?;
            print_layouts(&idl);
            Ok(())
        }
    }
}

/// Reads and checks `file`; an error names the file, line and column and
/// shows the line with a caret under the column.
fn load(file: &Path, limits: &Limits) -> Result<Idl, String> {
    let src = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    idl::parse_with(&src, limits).map_err(|e| {
        let e = e.with_file(file);
        e.render(&src).trim_end().to_owned()
    })
}

fn stem(file: &Path) -> Result<String, String> {
    file.file_stem()
        .and_then(|s| s.to_str())
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: no file name to name the output after", file.display()))
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
    let ret = op
        .ret
        .as_ref()
        .map_or("void".to_owned(), |t| type_name(idl, t));
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
    for f in &l.fields {
        let (dir, what) = match f.slot {
            Slot::Ret => ("ret", format!("return value: {ret}")),
            Slot::Param(i) => {
                let p = &op.params[i];
                let mut what = format!("{}: {}", p.name, type_name(idl, &p.ty));
                if f.desc {
                    what.push_str("  (descriptor: offset, count");
                    if let Some(n) = p.size_is {
                        what.push_str(&format!(" = {}", op.params[n].name));
                    }
                    what.push(')');
                }
                let dir = match p.dir {
                    Dir::In => "in",
                    Dir::InOut => "inout",
                    Dir::Out => "out",
                };
                (dir, what)
            }
        };
        say!("    {:>6}  {:>4}  {dir:<5}  {what}", f.offset, f.size);
    }
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
