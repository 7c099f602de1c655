//! `fastpath applet`: verify, run and list JIVE applet class files (the jive
//! crate; U-Net/SLE paper §3).
//!
//! - `verify X.class` prints the verdict and, if rejected, the reason and location;
//! - `run X.class METHOD ARGS..` loads the applet, invokes the method with int
//!   arguments and prints the result and the fuel used. The applet's natives
//!   are bound to stubs that print each call and return 0 (a native returning
//!   an array, such as `newAlignedArray(I)[B`, allocates one of the size of its
//!   first int argument);
//! - `dump X.class` prints a `javap -c`-like listing of the methods.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Subcommand;
use jive::bytecode;
use jive::classfile::{self, ClassFile};
use jive::subset::{FieldType, Prim};
use jive::{Applet, Limits, Natives};

/// `println!` that ends quietly when stdout is closed (e.g. piped into `head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// The `applet` subcommands.
#[derive(Subcommand)]
pub enum AppletCmd {
    /// Check a class file against the JIVE subset and verify it.
    Verify {
        /// The class file.
        file: PathBuf,
    },
    /// Load an applet and invoke one of its methods with int arguments.
    Run {
        /// The class file.
        file: PathBuf,
        /// The method name (JIVE forbids overloading, so the name is enough).
        method: String,
        /// Int arguments.
        #[arg(allow_negative_numbers = true)]
        args: Vec<i32>,
        /// Fuel for the invocation (backward branches, switches and calls).
        #[arg(long, default_value_t = 10_000_000)]
        fuel: u64,
        /// Run without fuel metering.
        #[arg(long)]
        no_fuel: bool,
    },
    /// List the methods of a class file, javap-style.
    Dump {
        /// The class file.
        file: PathBuf,
    },
}

/// Runs an `applet` subcommand.
pub fn main(cmd: AppletCmd) -> ExitCode {
    let result = match cmd {
        AppletCmd::Verify { file } => verify(&file),
        AppletCmd::Run {
            file,
            method,
            args,
            fuel,
            no_fuel,
        } => run(&file, &method, &args, (!no_fuel).then_some(fuel)),
        AppletCmd::Dump { file } => dump(&file),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fastpath applet: {e}");
            ExitCode::FAILURE
        }
    }
}

fn read(file: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))
}

fn verify(file: &Path) -> Result<ExitCode, String> {
    let bytes = read(file)?;
    let t = Instant::now();
    let result = jive::check(&bytes, &Limits::default());
    let elapsed = t.elapsed();
    match result {
        Ok(prog) => {
            let natives: Vec<String> = prog
                .natives
                .iter()
                .map(|n| format!("{}{}", n.name, n.descriptor))
                .collect();
            say!("{}: verified: class {}", file.display(), prog.info.name);
            say!(
                "  {} methods, {} static and {} instance fields, {} bytes of bytecode; checked in {:.1?}",
                prog.info.methods.len(),
                prog.info.static_count,
                prog.info.instance_count,
                prog.code_bytes,
                elapsed
            );
            if !natives.is_empty() {
                say!("  natives the host must bind: {}", natives.join(", "));
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            say!("{}: rejected", file.display());
            say!("  {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn stub_natives(prog: &jive::Program) -> Natives {
    let mut natives = Natives::new();
    for n in &prog.natives {
        let name = format!("{}{}", n.name, n.descriptor);
        let alloc = match (n.ret, n.params.first()) {
            (Some(FieldType::Array(p)), Some(FieldType::Prim(_))) => Some(p),
            _ => None,
        };
        natives.register(&n.name, &n.descriptor, move |cx, args| {
            let r = match alloc {
                Some(p) => cx.new_array(p, args[0])?,
                None => 0,
            };
            say!("  native {name} {args:?} -> {r}");
            Ok(r)
        });
    }
    natives
}

fn run(file: &Path, method: &str, args: &[i32], fuel: Option<u64>) -> Result<ExitCode, String> {
    let bytes = read(file)?;
    let limits = Limits {
        fuel,
        ..Limits::default()
    };
    let prog =
        jive::check(&bytes, &limits).map_err(|e| format!("{}: rejected: {e}", file.display()))?;
    let natives = stub_natives(&prog);
    let mut applet = Applet::instantiate(prog, &natives, limits)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let t = Instant::now();
    let result = applet.invoke(method, args);
    let elapsed = t.elapsed();
    match result {
        Ok(out) => {
            match out.value {
                None => say!("result: void"),
                Some(v) => match applet
                    .program()
                    .info
                    .method(method)
                    .and_then(|(_, m)| m.sig.ret)
                {
                    Some(FieldType::Array(p)) => say!("result: {}", show_array(&applet, v, p)),
                    _ => say!("result: {v}"),
                },
            }
            match fuel {
                Some(_) => say!("fuel used: {}", out.fuel_used),
                None => say!("fuel used: (metering off)"),
            }
            say!("time: {elapsed:.1?}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            say!("{e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn show_array(applet: &Applet, handle: i32, p: Prim) -> String {
    let body = match applet.object(handle) {
        None => return "null".into(),
        Some(jive::Object::Bytes(v) | jive::Object::Booleans(v)) => format!("{v:?}"),
        Some(jive::Object::Shorts(v)) => format!("{v:?}"),
        Some(jive::Object::Ints(v)) => format!("{v:?}"),
        Some(jive::Object::Instance(_)) => "<the applet object>".into(),
    };
    format!(
        "{}[] {body}",
        match p {
            Prim::Boolean => "boolean",
            Prim::Byte => "byte",
            Prim::Short => "short",
            Prim::Int => "int",
        }
    )
}

fn flags(access: u16) -> String {
    let mut v = Vec::new();
    for (bit, name) in [
        (0x0001, "public"),
        (0x0002, "private"),
        (0x0004, "protected"),
        (classfile::ACC_STATIC, "static"),
        (classfile::ACC_FINAL, "final"),
        (classfile::ACC_SYNCHRONIZED, "synchronized"),
        (classfile::ACC_NATIVE, "native"),
        (classfile::ACC_ABSTRACT, "abstract"),
    ] {
        if access & bit != 0 {
            v.push(name);
        }
    }
    let mut s = v.join(" ");
    if !s.is_empty() {
        s.push(' ');
    }
    s
}

fn dump(file: &Path) -> Result<ExitCode, String> {
    let bytes = read(file)?;
    let cf = ClassFile::parse(&bytes).map_err(|e| format!("{}: {e}", file.display()))?;
    say!(
        "class {} (version {}.{})",
        cf.this_class,
        cf.major_version,
        cf.minor_version
    );
    if let Some(s) = &cf.source_file {
        say!("  compiled from \"{s}\"");
    }
    for f in &cf.fields {
        say!("  {}{}: {}", flags(f.access), f.name, f.descriptor);
    }
    for m in &cf.methods {
        say!();
        say!("  {}{}{}", flags(m.access), m.name, m.descriptor);
        let Some(code) = &m.code else { continue };
        say!(
            "    Code: stack={}, locals={}, {} bytes",
            code.max_stack,
            code.max_locals,
            code.code.len()
        );
        match bytecode::instructions(&code.code) {
            Ok(insns) => {
                for i in &insns {
                    say!("    {:>5}: {}", i.bci, bytecode::format_insn(&cf, i));
                }
            }
            Err(e) => say!("    <undecodable at bci {}: {}>", e.bci, e.reason),
        }
        if let Some(map) = &code.stack_map {
            say!("    StackMapTable: {} frames", map.len());
        }
    }
    say!();
    match jive::check(&bytes, &Limits::default()) {
        Ok(_) => say!("verdict: verified"),
        Err(e) => say!("verdict: rejected: {e}"),
    }
    Ok(ExitCode::SUCCESS)
}
