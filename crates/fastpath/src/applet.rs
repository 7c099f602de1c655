//! `fastpath applet`: verify, run and list JIVE applet class files (the jive
//! crate; U-Net/SLE paper §3).
//!
//! - `verify X.class` prints the verdict and, if rejected, the reason and location;
//! - `run X.class METHOD ARGS.. [--engine interp|jit]` loads the applet,
//!   invokes the method with int arguments and prints the engine that ran
//!   it, the result and the fuel used. Without `--engine` it runs tiered:
//!   the JIT where it can compile the applet, the interpreter otherwise. The
//!   applet's natives are bound to stubs that print each call and return 0 (a
//!   native returning an array, such as `newAlignedArray(I)[B`, allocates one
//!   of the size of its first int argument);
//! - `dump X.class [--native]` prints a `javap -c`-like listing of the
//!   methods and, with `--native`, the JIT's machine code with each
//!   bytecode's index beside its instructions.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Subcommand, ValueEnum};
use jive::bytecode;
use jive::classfile::{self, ClassFile};
use jive::subset::{FieldType, Prim};
use jive::{Applet, Engine, Limits, LoadError, Natives};

/// `println!` that ends quietly when stdout is closed (e.g. piped into `head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// The engine named by `--engine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// The interpreter.
    #[value(alias = "interpreter")]
    Interp,
    /// The JIT (native code); fails if the JIT cannot compile the applet.
    Jit,
    /// The JIT where it can compile the applet, the interpreter otherwise
    /// (the default).
    Tiered,
}

impl EngineArg {
    fn engine(self) -> Engine {
        match self {
            EngineArg::Interp => Engine::Interpreter,
            EngineArg::Jit => Engine::Jit,
            EngineArg::Tiered => Engine::Tiered,
        }
    }
}

/// The `applet` subcommands.
#[derive(Subcommand)]
pub enum AppletCmd {
    /// Check a class file against the JIVE subset and verify it.
    Verify {
        /// The class file.
        file: PathBuf,
    },
    /// Load an applet and invoke one of its methods with int arguments, on
    /// the JIT or the interpreter; prints the engine that ran it, the
    /// result and the fuel used.
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
        /// The engine: interp (the interpreter) or jit (native code; an
        /// error if the JIT cannot compile the applet). Default: tiered, the
        /// JIT where it can compile the applet, else the interpreter.
        #[arg(long, value_enum, default_value_t = EngineArg::Tiered, hide_default_value = true)]
        engine: EngineArg,
    },
    /// List the methods of a class file, javap-style, and with --native the
    /// JIT's machine code beside each bytecode's index.
    Dump {
        /// The class file.
        file: PathBuf,
        /// Also print the JIT's machine code, each bytecode's index beside
        /// its instructions.
        #[arg(long)]
        native: bool,
        /// With --native: compile without fuel metering (the code that
        /// `run --no-fuel` runs).
        #[arg(long, requires = "native")]
        no_fuel: bool,
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
            engine,
        } => run(&file, &method, &args, (!no_fuel).then_some(fuel), engine),
        AppletCmd::Dump {
            file,
            native,
            no_fuel,
        } => dump(&file, native.then_some(!no_fuel)),
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

/// Stubs for the natives `prog` declares; with `verbose`, each prints its
/// calls.
fn stub_natives(prog: &jive::Program, verbose: bool) -> Natives {
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
            if verbose {
                say!("  native {name} {args:?} -> {r}");
            }
            Ok(r)
        });
    }
    natives
}

/// Loads `bytes` with stub natives on `engine` (the initializers run on it
/// too). A JIT that cannot compile the applet under `--engine jit` is an
/// error that names the option and gives the JIT's reason.
fn load_on(
    bytes: &[u8],
    limits: Limits,
    engine: EngineArg,
    verbose: bool,
) -> Result<Applet, String> {
    let prog = jive::check(bytes, &limits).map_err(|e| format!("rejected: {e}"))?;
    let natives = stub_natives(&prog, verbose);
    Applet::load_with_engine(bytes, &natives, limits, engine.engine()).map_err(|e| match e {
        LoadError::Jit(e) => format!("--engine {}: {e}", engine_name(engine)),
        e => e.to_string(),
    })
}

/// Says which engine runs the applet (and, when the tiered default fell
/// back to the interpreter, why).
fn describe_engine(applet: &mut Applet, engine: EngineArg) -> Result<String, String> {
    let ran = match applet.engine() {
        Engine::Jit => "jit",
        _ => "interp",
    };
    Ok(match engine {
        EngineArg::Tiered if applet.engine() == Engine::Jit => format!("{ran} (tiered default)"),
        EngineArg::Tiered => {
            if !jive::jit::available() {
                return Ok(format!(
                    "{ran} (tiered default; JIT unavailable: no native backend for this CPU)"
                ));
            }
            // Ask the JIT for its reason; on failure the applet keeps the
            // interpreter, and a JIT that compiles after all is set aside
            // so that the tiered choice stands.
            match applet.set_engine(Engine::Jit) {
                Err(e) => format!("{ran} (tiered default; JIT unavailable: {e})"),
                Ok(()) => {
                    applet
                        .set_engine(Engine::Interpreter)
                        .map_err(|e| e.to_string())?;
                    format!("{ran} (tiered default)")
                }
            }
        }
        _ => ran.to_string(),
    })
}

fn engine_name(engine: EngineArg) -> String {
    engine
        .to_possible_value()
        .map_or_else(|| format!("{engine:?}"), |v| v.get_name().to_string())
}

fn run(
    file: &Path,
    method: &str,
    args: &[i32],
    fuel: Option<u64>,
    engine: EngineArg,
) -> Result<ExitCode, String> {
    let bytes = read(file)?;
    let limits = Limits {
        fuel,
        ..Limits::default()
    };
    let mut applet =
        load_on(&bytes, limits, engine, true).map_err(|e| format!("{}: {e}", file.display()))?;
    let ran =
        describe_engine(&mut applet, engine).map_err(|e| format!("{}: {e}", file.display()))?;
    say!("engine: {ran}");
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

/// `dump`: the javap-like listing, the verdict and, if `native` is
/// `Some(metered)`, the JIT's code for the class loaded with fuel metering
/// on or off.
fn dump(file: &Path, native: Option<bool>) -> Result<ExitCode, String> {
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
    match native {
        None => Ok(ExitCode::SUCCESS),
        Some(metered) => native_listing(&bytes, metered)
            .map_err(|e| format!("{}: --native: {e}", file.display())),
    }
}

/// `dump --native`: loads the class on the JIT (natives bound to quiet
/// stubs) and prints its machine code.
fn native_listing(bytes: &[u8], metered: bool) -> Result<ExitCode, String> {
    let limits = if metered {
        Limits::default()
    } else {
        Limits::unmetered()
    };
    say!();
    say!(
        "native code (JIT, fuel metering {}):",
        if metered { "on" } else { "off" }
    );
    let applet = load_on(bytes, limits, EngineArg::Jit, false)?;
    let listing = applet
        .native_listing()
        .ok_or("the JIT compiled the applet but gave no listing")?;
    for line in listing.lines() {
        say!("  {line}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The `applet` subcommands as the command line parses them.
    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: AppletCmd,
    }

    fn parse(args: &[&str]) -> Result<AppletCmd, clap::Error> {
        Cli::try_parse_from(std::iter::once("applet").chain(args.iter().copied())).map(|c| c.cmd)
    }

    fn engine_of(args: &[&str]) -> EngineArg {
        match parse(args) {
            Ok(AppletCmd::Run { engine, .. }) => engine,
            Ok(_) => panic!("not a run command"),
            Err(e) => panic!("{args:?} refused: {e}"),
        }
    }

    #[test]
    fn run_takes_an_engine_and_defaults_to_tiered() {
        assert_eq!(engine_of(&["run", "X.class", "m", "1"]), EngineArg::Tiered);
        assert_eq!(
            engine_of(&["run", "X.class", "m", "--engine", "interp"]),
            EngineArg::Interp
        );
        assert_eq!(
            engine_of(&["run", "X.class", "m", "--engine", "interpreter", "-3"]),
            EngineArg::Interp
        );
        assert_eq!(
            engine_of(&["run", "X.class", "m", "--engine", "jit"]),
            EngineArg::Jit
        );
    }

    #[test]
    fn an_unknown_engine_is_an_error_naming_the_known_ones() {
        let e = match parse(&["run", "X.class", "m", "--engine", "c2"]) {
            Err(e) => e,
            Ok(_) => panic!("--engine c2 accepted"),
        };
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidValue);
        let text = e.to_string();
        for word in ["c2", "interp", "jit", "tiered"] {
            assert!(text.contains(word), "{word:?} missing from: {text}");
        }
    }

    #[test]
    fn dump_native_and_its_no_fuel() {
        match parse(&["dump", "X.class", "--native", "--no-fuel"]) {
            Ok(AppletCmd::Dump {
                native, no_fuel, ..
            }) => assert!(native && no_fuel),
            _ => panic!("dump --native --no-fuel refused"),
        }
        match parse(&["dump", "X.class"]) {
            Ok(AppletCmd::Dump {
                native, no_fuel, ..
            }) => assert!(!native && !no_fuel),
            _ => panic!("dump refused"),
        }
        assert!(
            parse(&["dump", "X.class", "--no-fuel"]).is_err(),
            "--no-fuel without --native accepted"
        );
    }

    /// The engine that `describe_engine` reports is the one the applet
    /// runs on, and every engine gives the same result.
    #[test]
    fn the_engine_reported_is_the_engine_that_runs() {
        let Some(dir) = jive::APPLET_CLASSES else {
            eprintln!(
                "skipped: javac not found (install a JDK, e.g. apt-get install openjdk-17-jdk-headless)"
            );
            return;
        };
        let bytes = std::fs::read(PathBuf::from(dir).join("default").join("Bench.class")).unwrap();
        let limits = Limits::default();
        let mut interp = load_on(&bytes, limits, EngineArg::Interp, false).unwrap();
        assert_eq!(interp.engine(), Engine::Interpreter);
        assert_eq!(
            describe_engine(&mut interp, EngineArg::Interp).unwrap(),
            "interp"
        );
        let expected = interp.invoke("fibonacci", &[20]).unwrap();

        let mut tiered = load_on(&bytes, limits, EngineArg::Tiered, false).unwrap();
        let said = describe_engine(&mut tiered, EngineArg::Tiered).unwrap();
        match tiered.engine() {
            Engine::Jit => assert_eq!(said, "jit (tiered default)"),
            _ => assert!(
                said.starts_with("interp (tiered default; JIT unavailable: "),
                "{said}"
            ),
        }
        assert_eq!(tiered.invoke("fibonacci", &[20]).unwrap(), expected);

        match load_on(&bytes, limits, EngineArg::Jit, false) {
            Ok(mut jit) => {
                assert_eq!(jit.engine(), Engine::Jit);
                assert_eq!(describe_engine(&mut jit, EngineArg::Jit).unwrap(), "jit");
                assert_eq!(jit.invoke("fibonacci", &[20]).unwrap(), expected);
            }
            Err(e) => assert!(e.starts_with("--engine jit: "), "{e}"),
        }
    }
}
