//! `fastpath applet`: verify, run and list JIVE applet class files (the jive
//! crate; U-Net/SLE paper §3).
//!
//! Every command takes a class file, or the name of one of the example
//! applets built into `fastpath` (`StandardUnet`, `RawUnet`, ...: the
//! U-Net/SLE evaluation applets of `applets/unet`, compiled by unet's build
//! script with `javac --release 8 -g`) when no file of that name exists.
//!
//! - `examples [--out DIR] [--json]` lists the built-in applets (class,
//!   size, what each is for) and the test applets the build compiled from
//!   `applets/src` (their paths, when the build found `javac`); with
//!   `--out`, writes the built-in ones there as `<Name>.class`;
//! - `verify X.class [--json]` prints the verdict and, if rejected, the
//!   reason and location;
//! - `run X.class METHOD ARGS.. [--engine interp|jit]` loads the applet,
//!   invokes the method with int arguments and prints the engine that ran
//!   it, the result and the fuel used. Without `--engine` it runs tiered:
//!   the JIT where it can compile the applet, the interpreter otherwise.
//!   An endpoint applet (one whose natives are all U-Net/SLE's,
//!   `unet::natives::NATIVES`) runs against a scratch endpoint: the real
//!   natives, bounds checks included, over an in-memory buffer area of 16
//!   buffers of 4096 bytes, all on the free queue; `doRx(length, ..)` finds
//!   a test message of `length` bytes (0, 1, 2, ...) in `RxBuf`, as the
//!   engine puts each arriving message there; each receive descriptor it
//!   pushes and each message it transmits is printed. Other applets' natives
//!   are bound to stubs that print each call and return 0 (a native
//!   returning an array, such as `newAlignedArray(I)[B`, allocates one of the
//!   size of its first int argument). An invocation refused (a class that
//!   does not load, no such method, the wrong number of arguments) prints
//!   its error on stderr and nothing on stdout;
//! - `dump X.class [--native]` prints a `javap -c`-like listing of the
//!   methods and, with `--native`, the JIT's machine code with each
//!   bytecode's index beside its instructions.
//!
//! With `--json`, a command that fails before it has a result prints the
//! error object of the crate's doc on stdout (`{"error": {"command":
//! "applet verify", "message": ...}}`); a rejected class is a result
//! (`"verified": false`).
//!
//! To run an applet of one's own, compile it to a class file of version 52
//! (Java 8), which the JIVE subset reads: `javac --release 8 -g -d OUT
//! X.java`, then `fastpath applet verify OUT/X.class`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Subcommand, ValueEnum};
use jive::bytecode;
use jive::classfile::{self, ClassFile};
use jive::subset::{FieldType, Prim};
use jive::{Applet, Engine, Limits, LoadError, Natives};
use serde_json::json;
use unet::natives::{HostError, NativeHost, RxBody};

/// `println!` that ends quietly when stdout is closed (e.g. piped into `head`),
/// or holds the line back while a [`Held`] lives.
macro_rules! say {
    () => {
        say_line(String::new())
    };
    ($($arg:tt)*) => {
        say_line(format!($($arg)*))
    };
}

std::thread_local! {
    /// The lines `say!` holds back instead of printing, while a [`Held`]
    /// lives.
    static HELD: std::cell::RefCell<Option<Vec<String>>> =
        const { std::cell::RefCell::new(None) };
}

/// Prints `line` on stdout, or holds it back while a [`Held`] lives.
fn say_line(line: String) {
    let line = HELD.with_borrow_mut(|held| match held {
        Some(lines) => {
            lines.push(line);
            None
        }
        None => Some(line),
    });
    if let Some(line) = line {
        let _ = writeln!(std::io::stdout().lock(), "{line}");
    }
}

/// Output held back: while it lives, `say!` on this thread collects its
/// lines instead of printing them (what an applet's constructor makes its
/// natives print while `run` loads it); [`Held::release`] hands them over,
/// and dropping it unreleased (an error) discards them. So `run` refuses
/// an invocation before anything is on stdout.
struct Held(());

impl Held {
    fn start() -> Held {
        HELD.with_borrow_mut(|held| *held = Some(Vec::new()));
        Held(())
    }

    /// Stops holding; the lines held, in order.
    fn release(self) -> Vec<String> {
        HELD.with_borrow_mut(Option::take).unwrap_or_default()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.with_borrow_mut(|held| *held = None);
    }
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
    pub(crate) fn engine(self) -> Engine {
        match self {
            EngineArg::Interp => Engine::Interpreter,
            EngineArg::Jit => Engine::Jit,
            EngineArg::Tiered => Engine::Tiered,
        }
    }

    /// Its name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            EngineArg::Interp => "interp",
            EngineArg::Jit => "jit",
            EngineArg::Tiered => "tiered",
        }
    }
}

/// The `applet` subcommands.
#[derive(Subcommand)]
pub enum AppletCmd {
    /// List the example applets: those built into fastpath (usable by name
    /// wherever a class file is asked for) and the test applets the build
    /// compiled; with --out, write the built-in ones as class files.
    Examples {
        /// Write the built-in applets into this directory (created if
        /// missing) as `<Name>.class`.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Print the list as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a class file against the JIVE subset and verify it.
    Verify {
        /// The class file, or the name of a built-in example applet.
        file: PathBuf,
        /// Print the verdict as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Load an applet and invoke one of its methods with int arguments, on
    /// the JIT or the interpreter; prints the engine that ran it, the
    /// result and the fuel used.
    Run {
        /// The class file, or the name of a built-in example applet
        /// (`fastpath applet examples` lists them).
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
        /// The class file, or the name of a built-in example applet.
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

/// Runs an `applet` subcommand. Each returns the exit status once it has
/// printed its result (which may say it failed: a rejected class, a trap),
/// or the error before it printed anything, which goes to stderr and, with
/// `--json`, to stdout as the error object (see the crate's doc).
pub fn main(cmd: AppletCmd) -> ExitCode {
    let (command, json, result) = match cmd {
        AppletCmd::Examples { out, json } => {
            ("applet examples", json, examples(out.as_deref(), json))
        }
        AppletCmd::Verify { file, json } => ("applet verify", json, verify(&file, json)),
        AppletCmd::Run {
            file,
            method,
            args,
            fuel,
            no_fuel,
            engine,
        } => (
            "applet run",
            false,
            run(&file, &method, &args, (!no_fuel).then_some(fuel), engine),
        ),
        AppletCmd::Dump {
            file,
            native,
            no_fuel,
        } => (
            "applet dump",
            false,
            dump(&file, native.then_some(!no_fuel)),
        ),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fastpath applet: {e}");
            if json {
                crate::print_json_error(command, &e);
            }
            ExitCode::FAILURE
        }
    }
}

/// The class file `file`, or, if no such file exists and `file` is a bare
/// name, the built-in example applet of that name.
fn read(file: &Path) -> Result<Vec<u8>, String> {
    match std::fs::read(file) {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let name = file.to_str().filter(|n| !n.contains('/'));
            match name.and_then(|n| unet::applets::by_name(n.trim_end_matches(".class"))) {
                Some(bytes) if !file.to_string_lossy().ends_with(".class") => Ok(bytes.to_vec()),
                _ => Err(format!(
                    "{}: {e} (`fastpath applet examples` lists the applets built into fastpath, \
                     which every command takes by name, e.g. StandardUnet)",
                    file.display()
                )),
            }
        }
        Err(e) => Err(format!("{}: {e}", file.display())),
    }
}

/// What each built-in applet is for, in a line.
fn example_purpose(name: &str) -> &'static str {
    match name {
        "StandardUnet" => {
            "Figure 5's standard U-Net applet: doTx copies and sends; doRx delivers inline or in free buffers"
        }
        "RawUnet" => "Figure 2's applet as printed: one receive buffer per message",
        "PingPong" => "Figure 5's ping-pong between applets: doRx echoes each message",
        "Burst25" => {
            "Figure 6: token flow control, bursts of up to 25 messages, acknowledged by the receiving applet"
        }
        "Burst25PerTx" => "Figure 6: a burst of 25 messages per transmit request",
        "Generate" => "Figure 6: doTx sends data the applet made, reading no buffer",
        "Escape" => "the bounds-check tests' attacker: each mode calls a native with bad arguments",
        "Breakdown" => "Figure 7's probe: doRx calls one native 8 times (mode 1 to 3) or nothing",
        "Hostile" => "the attack tests' applet: each mode spends one of the engine's budgets",
        "VoidMethods" => {
            "the outcome tests' probe: void doTx and doRx that leave a negative number where a value would come back"
        }
        "TailPush" => {
            "the tail-site tests' probe: doTx pushes at a tail site of txPush, or at sites that are not"
        }
        "TailChecks" => {
            "the inline tail push's tests' probe: doTx's tail push with the array, offset, channel and length the host sets"
        }
        "RxBufProbe" => {
            "RxBuf's contract tests' probe: doRx records what it sees of RxBuf; doTx sends what the last doRx kept"
        }
        "StandardLent" => {
            "Figure 5's standard applet with the lent doRx and doTx: the message read where it is, not copied into TxBuf and RxBuf"
        }
        "LentTx" => {
            "the lent doTx's tests' probe: doTx pushes, copies into the area, or hashes the lent message"
        }
        "BreakdownLent" => "Figure 7's probe with the lent doRx: the cost of invoking a lent doRx",
        "NullRx" => "issue 28's probe: a doRx that returns at once, the message copied into RxBuf",
        "NullRxLent" => "issue 28's probe: a lent doRx that returns at once",
        "LentProbe" => {
            "the lent doRx's tests' probe: doRx hashes, reads past, echoes or delivers the lent message"
        }
        _ => "",
    }
}

/// `examples`: the built-in applets, the test applets the build compiled,
/// and with `out` the built-in ones written as class files.
fn examples(out: Option<&Path>, json: bool) -> Result<ExitCode, String> {
    if let Some(dir) = out {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("--out {}: cannot create it: {e}", dir.display()))?;
    }
    let mut builtin = Vec::new();
    for &(name, bytes) in unet::applets::ALL {
        let written = match out {
            Some(dir) => {
                let path = dir.join(format!("{name}.class"));
                std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
                Some(path.display().to_string())
            }
            None => None,
        };
        builtin.push((name, bytes.len(), example_purpose(name), written));
    }
    // The test applets of applets/src, compiled by jive's build script into
    // the build directory (present where fastpath was built).
    let mut compiled = Vec::new();
    if let Some(dir) = jive::APPLET_CLASSES {
        let dir = Path::new(dir).join("release8");
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.filter_map(Result::ok) {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "class") {
                    compiled.push(p.display().to_string());
                }
            }
        }
        compiled.sort();
    }
    if json {
        let doc = json!({
            "builtin": builtin.iter().map(|(name, size, purpose, written)| json!({
                "name": name, "bytes": size, "purpose": purpose, "written_to": written,
            })).collect::<Vec<_>>(),
            "compiled": compiled,
        });
        say!("{doc:#}");
        return Ok(ExitCode::SUCCESS);
    }
    say!("built into fastpath (give the name where a class file is asked for):");
    for (name, size, purpose, written) in &builtin {
        say!("  {name:<13} {size:>5} bytes  {purpose}");
        if let Some(path) = written {
            say!("  {:<13} written to {path}", "");
        }
    }
    if compiled.is_empty() {
        say!(
            "\nthe test applets of applets/src were not found: the build compiles them with \
             javac where it finds one"
        );
    } else {
        say!("\ncompiled from applets/src by the build (javac --release 8):");
        for p in &compiled {
            say!("  {p}");
        }
    }
    say!("\nyour own: javac --release 8 -g -d OUT X.java, then fastpath applet verify OUT/X.class");
    Ok(ExitCode::SUCCESS)
}

fn verify(file: &Path, json: bool) -> Result<ExitCode, String> {
    let bytes = read(file)?;
    let t = Instant::now();
    let result = jive::check(&bytes, &Limits::default());
    let elapsed = t.elapsed();
    if json {
        let doc = match &result {
            Ok(prog) => json!({
                "file": file.display().to_string(),
                "verified": true,
                "class": prog.info.name,
                "methods": prog.info.methods.len(),
                "static_fields": prog.info.static_count,
                "instance_fields": prog.info.instance_count,
                "bytecode_bytes": prog.code_bytes,
                "natives": prog.natives.iter().filter(|n| !n.tail).map(|n| format!("{}{}", n.name, n.descriptor)).collect::<Vec<_>>(),
                "check_seconds": elapsed.as_secs_f64(),
            }),
            Err(e) => json!({
                "file": file.display().to_string(),
                "verified": false,
                "reason": e.to_string(),
            }),
        };
        say!("{doc:#}");
        return Ok(if result.is_ok() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    match result {
        Ok(prog) => {
            // The declared natives: not the tail sites' second entries.
            let natives: Vec<String> = prog
                .natives
                .iter()
                .filter(|n| !n.tail)
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
    for n in prog.natives.iter().filter(|n| !n.tail) {
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
                let list: Vec<String> = args.iter().map(i32::to_string).collect();
                say!("  native {name}({}) -> {r}", list.join(", "));
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

/// A scratch endpoint for `run`: the U-Net/SLE natives act on it as on an
/// endpoint of the engine, and it prints what the applet made it do.
struct ScratchEndpoint {
    area: Vec<i8>,
    free: std::collections::VecDeque<u32>,
    rx_pushed: usize,
}

impl ScratchEndpoint {
    const BUFFERS: u32 = 16;
    const BUFFER_SIZE: u32 = 4096;
    const RX_DEPTH: usize = 16;
    const MAX_MESSAGE: u32 = 65536;

    fn new() -> ScratchEndpoint {
        ScratchEndpoint {
            area: vec![0; (Self::BUFFERS * Self::BUFFER_SIZE) as usize],
            free: (0..Self::BUFFERS).map(|k| k * Self::BUFFER_SIZE).collect(),
            rx_pushed: 0,
        }
    }
}

impl NativeHost for ScratchEndpoint {
    fn buffer_size(&self) -> u32 {
        Self::BUFFER_SIZE
    }
    fn area_len(&self) -> u32 {
        self.area.len() as u32
    }
    fn read_area(&self, off: u32, dst: &mut [i8]) {
        let off = off as usize;
        dst.copy_from_slice(&self.area[off..off + dst.len()]);
    }
    fn write_area(&mut self, off: u32, src: &[i8]) {
        let off = off as usize;
        self.area[off..off + src.len()].copy_from_slice(src);
    }
    fn pop_free(&mut self) -> Option<u32> {
        self.free.pop_front()
    }
    fn push_rx(&mut self, chan: u16, len: u32, body: RxBody<'_>) -> Result<(), HostError> {
        if self.rx_pushed == Self::RX_DEPTH {
            return Err(HostError::RxQueueFull);
        }
        self.rx_pushed += 1;
        match body {
            RxBody::Inline(bytes) => say!(
                "  receive descriptor: channel {chan}, {len} bytes inline: {}",
                hex_bytes(bytes)
            ),
            RxBody::Buffers(offs) => {
                let list: Vec<String> = offs.iter().map(u32::to_string).collect();
                say!(
                    "  receive descriptor: channel {chan}, {len} bytes in buffers at offsets {}",
                    list.join(", ")
                );
            }
        }
        Ok(())
    }
    fn transmit(&mut self, chan: u16, payload: &[i8]) -> Result<(), HostError> {
        if payload.len() as u64 > u64::from(Self::MAX_MESSAGE) {
            return Err(HostError::TooLong {
                len: payload.len() as u32,
                max: Self::MAX_MESSAGE,
            });
        }
        say!("  transmit: channel {chan}, {} bytes", payload.len());
        Ok(())
    }
    fn max_message(&self) -> u32 {
        Self::MAX_MESSAGE
    }
}

/// Up to 16 bytes in hex, and how many more.
fn hex_bytes(bytes: &[u8]) -> String {
    let mut s: Vec<String> = bytes.iter().take(16).map(|b| format!("{b:02x}")).collect();
    if bytes.len() > 16 {
        s.push(format!("... ({} more)", bytes.len() - 16));
    }
    s.join(" ")
}

/// Whether every native the applet declares is a U-Net/SLE native (and it
/// declares at least one): then it is an endpoint applet.
fn is_endpoint_applet(prog: &jive::Program) -> bool {
    !prog.natives.is_empty()
        && prog.natives.iter().all(|n| {
            unet::natives::NATIVES
                .iter()
                .any(|u| u.name == n.name && u.descriptor == n.descriptor)
        })
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
    let at = |e: String| format!("{}: {e}", file.display());
    let prog = jive::check(&bytes, &limits).map_err(|e| at(format!("rejected: {e}")))?;
    let endpoint = is_endpoint_applet(&prog);
    let mut host = ScratchEndpoint::new();
    // Everything that can refuse the invocation comes before any output:
    // what loading prints (the constructor's native calls) is held until
    // the method, its arguments and RxBuf have passed.
    let held = Held::start();
    let mut applet = if endpoint {
        load_endpoint_applet(&bytes, limits, engine, &mut host).map_err(at)?
    } else {
        load_on(&bytes, limits, engine, true).map_err(at)?
    };
    let ran = describe_engine(&mut applet, engine).map_err(at)?;
    let m = applet.method(method).map_err(|e| at(e.to_string()))?;
    applet
        .check_call(&m, args.len())
        .map_err(|e| at(e.to_string()))?;
    // The engine puts each arriving message into RxBuf before doRx.
    let rx_buf = if endpoint && method == "doRx" && applet.static_bytes_field("RxBuf").is_ok() {
        let len = args.first().copied().unwrap_or(0).clamp(0, 1 << 16) as usize;
        let msg: Vec<u8> = (0..len).map(|k| k as u8).collect();
        applet
            .set_static_array("RxBuf", &msg)
            .map_err(|e| at(e.to_string()))?;
        Some(len)
    } else {
        None
    };
    let loading = held.release();
    if endpoint {
        say!(
            "endpoint: a scratch one, {} buffers of {} bytes on the free queue",
            ScratchEndpoint::BUFFERS,
            ScratchEndpoint::BUFFER_SIZE
        );
    }
    for line in loading {
        say!("{line}");
    }
    say!("engine: {ran}");
    if let Some(len) = rx_buf {
        say!("RxBuf: a test message of {len} bytes (0, 1, 2, ...)");
    }
    let t = Instant::now();
    let result = if endpoint {
        applet.call(&m, args, Some(&mut host))
    } else {
        applet.call(&m, args, None)
    };
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

/// Loads an endpoint applet with unet's natives, its constructor running
/// against `host`, on `engine`.
fn load_endpoint_applet(
    bytes: &[u8],
    limits: Limits,
    engine: EngineArg,
    host: &mut ScratchEndpoint,
) -> Result<Applet, String> {
    let natives = unet::natives::bind::<ScratchEndpoint>();
    let mut applet =
        Applet::load_with_host(bytes, &natives, limits, Some(host)).map_err(|e| e.to_string())?;
    match engine {
        EngineArg::Tiered => {}
        EngineArg::Interp => applet
            .set_engine(Engine::Interpreter)
            .map_err(|e| e.to_string())?,
        EngineArg::Jit => applet
            .set_engine(Engine::Jit)
            .map_err(|e| format!("--engine {}: {e}", engine_name(engine)))?,
    }
    Ok(applet)
}

/// `[a, b, c]`.
fn list<T: std::fmt::Display>(v: &[T]) -> String {
    let items: Vec<String> = v.iter().map(T::to_string).collect();
    format!("[{}]", items.join(", "))
}

fn show_array(applet: &Applet, handle: i32, p: Prim) -> String {
    let body = match applet.object(handle) {
        None => return "null".into(),
        Some(jive::Object::Bytes(v) | jive::Object::Booleans(v)) => list(v),
        Some(jive::Object::Shorts(v)) => list(v),
        Some(jive::Object::Ints(v)) => list(v),
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
