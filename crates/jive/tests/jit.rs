//! Differential test of the JIT against the interpreter: the same
//! class loaded on both engines must give, for every invocation, the same
//! `Result<Outcome, InvokeError>` (value, fuel used; trap kind, method and
//! bci), and leave the same state behind (static fields, static arrays'
//! contents, every object on the heap, bytes in use, object count).
//!
//! - `random_programs_agree_on_both_engines`: the random programs that the
//!   build script generates (`build/random_programs.rs`, at least 10,000
//!   `int mK(int a, int b)`, with helpers), each invoked with several argument
//!   pairs, edge values and pseudo-random ones.
//! - `applets_agree_on_both_engines`: every applet under `applets/src` (both
//!   builds) and `applets/unet`, every method with int arguments, natives
//!   bound to stubs, with the applets' static arrays and ints set by the host
//!   between rounds.
//! - `hotspot_cases_agree_on_both_engines`: the calls of the HotSpot
//!   differential test (`differential.rs`) of the `Arith` applet.
//! - `counted_loops_run_out_of_fuel_where_the_interpreter_does` and
//!   `random_programs_run_out_of_fuel_where_the_interpreter_does`: the loops
//!   of `applets/src/FuelLoops.java` and every random program, on every fuel
//!   budget around the point where each call runs out (the JIT charges a
//!   counted loop's trip count at its entry when the fuel covers it).
//!
//! Every class runs twice on each engine: metered (a small fuel budget, so
//! that loops that never end trap quickly) and unmetered. The unmetered twin
//! is kept in the metered one's state: a call that exhausted its fuel when
//! metered (and might never end without metering) runs metered in the twin
//! as well; every other call runs unmetered, and must give the metered
//! call's value or trap.
//!
//! `JIT_PROGRAMS=N` runs only the first N random programs (quick local runs).
//! `JIT_TEST_SELF_CHECK=1` puts the interpreter on both sides: a check of this
//! harness and of the generator only, never of the JIT. Without `javac` at
//! build time, the tests print why they are skipped.

mod common;

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{RELEASES, SKIP_JAVAC, arith_cases, class_bytes, classes};
use jive::subset::{FieldType, Prim};
use jive::{
    Applet, Engine, InvokeError, Limits, NativeError, Natives, Outcome, Program, Trap, TrapKind,
};

/// Fuel per invocation of a random program.
const FUEL: u64 = 20_000;
/// Fuel per invocation of an applet's method (its benchmark loops run to
/// `Integer.MAX_VALUE` on some arguments).
const APPLET_FUEL: u64 = 200_000;
/// Random programs that must run (unless `JIT_PROGRAMS` asks for fewer).
const MIN_PROGRAMS: usize = 10_000;
/// Mismatches shown in a failure message.
const SHOWN: usize = 12;

type Call = Result<Outcome, InvokeError>;

/// The engine compared with the interpreter.
fn engine_under_test() -> Engine {
    if std::env::var_os("JIT_TEST_SELF_CHECK").is_some_and(|v| v != "0") {
        Engine::Interpreter
    } else {
        Engine::Jit
    }
}

/// At most `n` characters of a value's debug form.
fn short(v: &impl Debug, n: usize) -> String {
    let s = format!("{v:?}");
    if s.len() <= n {
        s
    } else {
        let cut = (0..=n).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
        format!("{}... ({} chars)", &s[..cut], s.len())
    }
}

/// Where two applets' states differ, if they do.
fn state_diff(a: &Applet, b: &Applet) -> Option<String> {
    for f in a.program().info.fields.iter().filter(|f| f.is_static) {
        if f.ty.is_ref() {
            let (x, y) = (a.static_array(&f.name), b.static_array(&f.name));
            if x != y {
                return Some(format!(
                    "static {}: interpreter {}, JIT {}",
                    f.name,
                    short(&x, 200),
                    short(&y, 200)
                ));
            }
        } else {
            let (x, y) = (a.static_int(&f.name), b.static_int(&f.name));
            if x != y {
                return Some(format!("static {}: interpreter {x:?}, JIT {y:?}", f.name));
            }
        }
    }
    let (ha, hb) = (a.heap(), b.heap());
    if (ha.bytes_in_use(), ha.object_count()) != (hb.bytes_in_use(), hb.object_count()) {
        return Some(format!(
            "heap: interpreter {} bytes in {} objects, JIT {} bytes in {} objects",
            ha.bytes_in_use(),
            ha.object_count(),
            hb.bytes_in_use(),
            hb.object_count()
        ));
    }
    // Every object by handle: arrays and the applet object's fields.
    for h in 1..=ha.capacity().max(hb.capacity()) {
        let h = i32::try_from(h).expect("heap handles are i32");
        let (x, y) = (a.object(h), b.object(h));
        if x != y {
            return Some(format!(
                "object {h}: interpreter {}, JIT {}",
                short(&x, 200),
                short(&y, 200)
            ));
        }
    }
    None
}

/// One class loaded on the interpreter and on the engine under test.
struct Pair {
    name: String,
    interp: Applet,
    jit: Applet,
}

impl Pair {
    fn load(name: &str, bytes: &[u8], natives: &Natives, limits: Limits) -> Result<Pair, String> {
        let interp = Applet::load_with_engine(bytes, natives, limits, Engine::Interpreter)
            .map_err(|e| format!("{name} does not load on the interpreter: {e}"))?;
        let engine = engine_under_test();
        let jit = Applet::load_with_engine(bytes, natives, limits, engine).map_err(|e| {
            format!(
                "JIT failed to compile {name}: {e}{}",
                cache_state(&e.to_string())
            )
        })?;
        if jit.engine() != engine {
            return Err(format!(
                "JIT failed to compile {name}: it runs on the {:?} engine",
                jit.engine()
            ));
        }
        let pair = Pair {
            name: name.to_string(),
            interp,
            jit,
        };
        if let Some(d) = state_diff(&pair.interp, &pair.jit) {
            return Err(format!("{name}: after loading, the state differs: {d}"));
        }
        Ok(pair)
    }

    fn invoke(&mut self, method: &str, args: &[i32]) -> Result<Call, String> {
        let a = self.interp.invoke(method, args);
        let b = self.jit.invoke(method, args);
        if a != b {
            return Err(format!(
                "{}.{method}{args:?}: interpreter {a:?}, JIT {b:?}",
                self.name
            ));
        }
        if let Some(d) = state_diff(&self.interp, &self.jit) {
            return Err(format!(
                "{}.{method}{args:?} -> {a:?}, then the state differs: {d}",
                self.name
            ));
        }
        Ok(a)
    }

    /// Applies a host operation (setting a static field) to both.
    fn host(
        &mut self,
        what: &str,
        f: &dyn Fn(&mut Applet) -> Result<(), InvokeError>,
    ) -> Result<(), String> {
        let (a, b) = (f(&mut self.interp), f(&mut self.jit));
        if a != b {
            return Err(format!(
                "{}: {what}: interpreter {a:?}, JIT {b:?}",
                self.name
            ));
        }
        match state_diff(&self.interp, &self.jit) {
            Some(d) => Err(format!(
                "{}: after {what}, the state differs: {d}",
                self.name
            )),
            None => Ok(()),
        }
    }

    /// Turns metering on or off in both (the JIT recompiles).
    fn set_fuel(&mut self, fuel: Option<u64>) -> Result<(), String> {
        for a in [&mut self.interp, &mut self.jit] {
            let depth = a.limits().max_call_depth;
            a.set_run_limits(fuel, depth);
        }
        if self.jit.engine() != engine_under_test() {
            return Err(format!(
                "JIT failed to compile {} again for fuel {fuel:?}: it runs on the {:?} engine",
                self.name,
                self.jit.engine()
            ));
        }
        Ok(())
    }
}

/// Outcomes seen, for the report and the coverage checks.
#[derive(Default)]
struct Stats {
    programs: usize,
    calls: usize,
    unmetered: usize,
    ok: usize,
    kinds: BTreeMap<&'static str, usize>,
}

impl Stats {
    fn record(&mut self, r: &Call) {
        self.calls += 1;
        let k = match r {
            Ok(_) => {
                self.ok += 1;
                return;
            }
            Err(InvokeError::Trap(t)) => kind_name(&t.kind),
            Err(_) => "host error",
        };
        *self.kinds.entry(k).or_default() += 1;
    }

    fn merge(&mut self, o: Stats) {
        self.programs += o.programs;
        self.calls += o.calls;
        self.unmetered += o.unmetered;
        self.ok += o.ok;
        for (k, n) in o.kinds {
            *self.kinds.entry(k).or_default() += n;
        }
    }

    fn summary(&self) -> String {
        let kinds: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!(
            "{} metered calls ({} returned; traps: {}), {} more unmetered",
            self.calls,
            self.ok,
            kinds.join(", "),
            self.unmetered
        )
    }
}

fn kind_name(k: &TrapKind) -> &'static str {
    match k {
        TrapKind::ArrayIndexOutOfBounds { .. } => "ArrayIndexOutOfBounds",
        TrapKind::NullPointer => "NullPointer",
        TrapKind::DivisionByZero => "DivisionByZero",
        TrapKind::NegativeArraySize(_) => "NegativeArraySize",
        TrapKind::FuelExhausted(_) => "FuelExhausted",
        TrapKind::HeapLimitExceeded { .. } => "HeapLimitExceeded",
        TrapKind::CallDepthExceeded(_) => "CallDepthExceeded",
        TrapKind::Native(_) => "Native",
    }
}

/// A class's metered pair and its unmetered twin, kept in the same state.
struct Twin {
    fuel: u64,
    metered: Pair,
    free: Pair,
}

impl Twin {
    fn load(name: &str, bytes: &[u8], natives: &Natives, fuel: u64) -> Result<Twin, String> {
        let limits = |fuel| Limits {
            fuel,
            ..Limits::default()
        };
        Ok(Twin {
            fuel,
            metered: Pair::load(name, bytes, natives, limits(Some(fuel)))?,
            free: Pair::load(&format!("{name} (unmetered)"), bytes, natives, limits(None))?,
        })
    }

    fn invoke(&mut self, method: &str, args: &[i32], stats: &mut Stats) -> Result<(), String> {
        let r = self.metered.invoke(method, args)?;
        stats.record(&r);
        let exhausted = matches!(
            &r,
            Err(InvokeError::Trap(Trap {
                kind: TrapKind::FuelExhausted(_),
                ..
            }))
        );
        if exhausted {
            // Unmetered, it might never end: keep the twin in step by
            // running it metered too.
            self.free.set_fuel(Some(self.fuel))?;
            let r2 = self.free.invoke(method, args);
            self.free.set_fuel(None)?;
            let r2 = r2?;
            if r2 != r {
                return Err(format!(
                    "{}.{method}{args:?}: the metered call gave {r:?}, the same call in the unmetered twin {r2:?}",
                    self.metered.name
                ));
            }
        } else {
            let r2 = self.free.invoke(method, args)?;
            stats.unmetered += 1;
            // Metering changes nothing but the fuel count.
            let same = match (&r, &r2) {
                (Ok(x), Ok(y)) => x.value == y.value,
                (x, y) => x == y,
            };
            if !same {
                return Err(format!(
                    "{}.{method}{args:?}: metered {r:?}, unmetered {r2:?} (on both engines)",
                    self.metered.name
                ));
            }
        }
        Ok(())
    }

    fn host(
        &mut self,
        what: &str,
        f: &dyn Fn(&mut Applet) -> Result<(), InvokeError>,
    ) -> Result<(), String> {
        self.metered.host(what, f)?;
        self.free.host(what, f)
    }
}

/// A small deterministic generator for arguments (xorshift64).
struct Rng(u64);

impl Rng {
    fn new(seed: &str) -> Rng {
        // FNV-1a of the seed string, never zero.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in seed.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        Rng(h | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const ARG_EDGES: &[i32] = &[
    0,
    1,
    -1,
    2,
    3,
    7,
    8,
    15,
    16,
    31,
    32,
    33,
    127,
    128,
    -128,
    255,
    32767,
    -32768,
    65535,
    i32::MAX,
    i32::MIN,
    i32::MAX - 1,
    i32::MIN + 1,
];

/// `n` argument lists of `arity` ints: one fixed, then edge values, small
/// values and pseudo-random ones mixed.
fn arg_sets(rng: &mut Rng, arity: usize, n: usize) -> Vec<Vec<i32>> {
    let mut out = vec![(0..arity).map(|k| [5, -3, 12, 1, 0, 9][k % 6]).collect()];
    for _ in 1..n {
        out.push(
            (0..arity)
                .map(|_| {
                    let r = rng.next();
                    match r % 4 {
                        0 => ARG_EDGES[(r >> 8) as usize % ARG_EDGES.len()],
                        1 => (r >> 16) as i32,
                        2 => ((r >> 8) % 64) as i32,
                        _ => -(((r >> 8) % 64) as i32),
                    }
                })
                .collect(),
        );
    }
    out
}

/// The methods the host can invoke with ints: (name, arity).
fn int_methods(prog: &Program) -> Vec<(String, usize)> {
    prog.info
        .methods
        .iter()
        .filter(|m| {
            !m.is_native
                && !m.name.starts_with('<')
                && m.sig.params.iter().all(|p| matches!(p, FieldType::Prim(_)))
        })
        .map(|m| (m.name.clone(), m.sig.params.len()))
        .collect()
}

/// A generated program: `mK(II)I`.
fn is_program(prog: &Program, name: &str) -> bool {
    name.strip_prefix('m')
        .is_some_and(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
        && prog
            .info
            .method(name)
            .is_some_and(|(_, m)| m.descriptor == "(II)I")
}

/// The natives the random programs declare.
fn random_natives() -> Natives {
    Natives::new()
        .with("mix", "(II)I", |_, a| Ok(a[0].wrapping_mul(31) ^ a[1]))
        .with("peek", "([II)I", |cx, a| {
            let v = cx.ints(a[0])?;
            usize::try_from(a[1])
                .ok()
                .and_then(|i| v.get(i))
                .copied()
                .ok_or_else(|| {
                    NativeError(format!(
                        "peek: index {} out of bounds for length {}",
                        a[1],
                        v.len()
                    ))
                })
        })
        .with("grab", "(I)[B", |cx, a| cx.new_array(Prim::Byte, a[0]))
        .with("poke", "([BII)V", |cx, a| {
            let v = cx.bytes(a[0])?;
            let len = v.len();
            let e = usize::try_from(a[1])
                .ok()
                .and_then(|i| v.get_mut(i))
                .ok_or_else(|| {
                    NativeError(format!(
                        "poke: index {} out of bounds for length {len}",
                        a[1]
                    ))
                })?;
            *e = a[2] as i8;
            Ok(0)
        })
}

/// Argument pairs per random program.
const CALLS_PER_PROGRAM: usize = 6;
/// Disagreements reported per class at most.
const PER_CLASS: usize = 3;

/// Runs one random class's first `quota` programs (and all its helpers), in
/// declaration order. After a disagreement the two engines' states may have
/// parted, so the class is loaded afresh and goes on with the next method.
fn run_random_class(path: &Path, quota: usize, stats: &mut Stats) -> Vec<String> {
    let name = path.file_stem().unwrap().to_string_lossy().into_owned();
    let source = random_source(path);
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return vec![format!("{}: {e}", path.display())],
    };
    let load = || Twin::load(&name, &bytes, &random_natives(), FUEL);
    let mut twin = match load() {
        Ok(t) => t,
        Err(e) => return vec![e],
    };
    let prog = twin.metered.interp.program().clone();
    let mut rng = Rng::new(&name);
    let mut programs = 0;
    let mut errors = Vec::new();
    // The method the current load started with (`None`: the first).
    let mut fresh_from: Option<Option<String>> = Some(None);
    for (m, arity) in int_methods(&prog) {
        let n = if is_program(&prog, &m) {
            if programs == quota {
                continue;
            }
            programs += 1;
            CALLS_PER_PROGRAM
        } else {
            3
        };
        let from = fresh_from.get_or_insert_with(|| Some(m.clone())).clone();
        for args in arg_sets(&mut rng, arity, n) {
            let Err(e) = twin.invoke(&m, &args, stats) else {
                continue;
            };
            let history = match from {
                None => "the methods before it in declaration order".to_string(),
                Some(f) => format!("a fresh load and the methods from {f} on"),
            };
            errors.push(format!(
                "{e}\n  (after {history}; source: {})",
                source.display()
            ));
            if errors.len() == PER_CLASS {
                break;
            }
            match load() {
                Ok(t) => twin = t,
                Err(e) => errors.push(e),
            }
            fresh_from = None;
            break;
        }
        if errors.len() >= PER_CLASS {
            break;
        }
    }
    stats.programs += programs;
    errors
}

fn random_source(class: &Path) -> PathBuf {
    let stem = class.file_stem().unwrap().to_string_lossy().into_owned();
    class
        .parent()
        .and_then(Path::parent)
        .unwrap_or(Path::new("."))
        .join("src")
        .join(format!("{stem}.java"))
}

/// The class files in `dir` and, with `deep`, in its subdirectories
/// (packages), sorted.
fn sorted_class_files(dir: &Path, deep: bool) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for p in std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
    {
        if p.is_dir() {
            if deep {
                v.extend(sorted_class_files(&p, true));
            }
        } else if p.extension().is_some_and(|e| e == "class") {
            v.push(p);
        }
    }
    v.sort();
    v
}

/// The shared code cache's state when a compile failed because the cache
/// was full (`error` says so), for the failure's message: what was live,
/// waiting for deletion, free and mapped, and how many threads were
/// registered, so that the failure says why. Empty for other errors.
fn cache_state(error: &str) -> String {
    if !error.contains("the code cache is full") {
        return String::new();
    }
    let s = jive::jit::cache_stats();
    format!(
        "\n  (the code cache then: {} bytes live, {} pending in {} sets ({} retired, {} freed), \
         {} free of {} mapped, {} threads registered, {} evictions; deletion delays by power of two of µs: {:?})",
        s.bytes_live,
        s.bytes_pending,
        s.pending_sets,
        s.retired_sets,
        s.freed_sets,
        s.bytes_free,
        s.bytes_mapped,
        s.threads,
        s.evictions,
        s.deletion_delay.buckets,
    )
}

fn fail_on(errors: &[String], what: &str) {
    assert!(
        errors.is_empty(),
        "{} {what}:\n{}{}",
        errors.len(),
        errors
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n"),
        if errors.len() > SHOWN {
            format!("\n... and {} more", errors.len() - SHOWN)
        } else {
            String::new()
        }
    );
}

#[test]
fn random_programs_agree_on_both_engines() {
    let Some(dir) = jive::RANDOM_CLASSES else {
        eprintln!("{SKIP_JAVAC}");
        return;
    };
    let started = std::time::Instant::now();
    let limit: Option<usize> = std::env::var("JIT_PROGRAMS").ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("JIT_PROGRAMS={v:?} is not a count"))
    });
    let files = sorted_class_files(Path::new(dir), false);
    // Each class's share of the programs, in order; every class must pass
    // jive's checks (a class that does not is a bug in the generator).
    let mut errors = Vec::new();
    let mut work = Vec::new();
    let mut left = limit.unwrap_or(usize::MAX);
    for f in &files {
        if left == 0 {
            break;
        }
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        match jive::check(&bytes, &Limits::default()) {
            Ok(prog) => {
                let n = int_methods(&prog)
                    .iter()
                    .filter(|(m, _)| is_program(&prog, m))
                    .count();
                work.push((f.clone(), n.min(left)));
                left -= n.min(left);
            }
            Err(e) => errors.push(format!(
                "{} is rejected (a bug in the generator, crates/jive/build/random_programs.rs): {e}",
                random_source(f).display()
            )),
        }
    }
    fail_on(&errors, "generated classes fail jive's checks");

    let next = AtomicUsize::new(0);
    let results = Mutex::new((Stats::default(), Vec::new()));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut stats = Stats::default();
                let mut errs = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((f, quota)) = work.get(i) else { break };
                    errs.extend(run_random_class(f, *quota, &mut stats));
                }
                let mut r = results.lock().unwrap();
                r.0.merge(stats);
                r.1.extend(errs);
            });
        }
    });
    let (stats, mut errors) = results.into_inner().unwrap();
    errors.sort();
    eprintln!(
        "{} random programs in {} classes on {threads} threads, {:.1?}: {}",
        stats.programs,
        work.len(),
        started.elapsed(),
        stats.summary()
    );
    fail_on(&errors, "disagreements in the random programs");
    let want = limit.map_or(MIN_PROGRAMS, |l| l.min(MIN_PROGRAMS));
    assert!(
        stats.programs >= want,
        "only {} random programs ran, {want} wanted",
        stats.programs
    );
    if limit.is_none() {
        // The generator must reach every outcome, or the comparison misses
        // whole paths of the engines.
        for k in [
            "ArrayIndexOutOfBounds",
            "NullPointer",
            "DivisionByZero",
            "NegativeArraySize",
            "FuelExhausted",
            "HeapLimitExceeded",
            "CallDepthExceeded",
            "Native",
        ] {
            assert!(
                stats.kinds.get(k).is_some_and(|&n| n >= 10),
                "the random programs trap with {k} fewer than 10 times: {}",
                stats.summary()
            );
        }
        assert!(
            stats.ok * 4 >= stats.calls,
            "fewer than a quarter of the calls return normally: {}",
            stats.summary()
        );
    }
}

/// Stubs for an applet's natives: Figure 2's where they apply; others
/// return 0, or allocate an array of their first argument's size if they
/// return one (as `fastpath applet run` binds them).
fn stub_natives(prog: &Program) -> Natives {
    let mut natives = Natives::figure2_stubs();
    for n in &prog.natives {
        if natives.get(&n.name, &n.descriptor).is_some() {
            continue;
        }
        let alloc = match (n.ret, n.params.first()) {
            (Some(FieldType::Array(p)), Some(FieldType::Prim(_))) => Some(p),
            _ => None,
        };
        // Any other native returns a function of its arguments, every bit
        // of which depends on them: a result narrower than int (`byte`,
        // `short`, `boolean`) must then be narrowed alike on both engines.
        natives.register(&n.name, &n.descriptor, move |cx, args| match alloc {
            Some(p) => cx.new_array(p, args[0]),
            None => Ok(args.iter().fold(0x1357_9bdf, |h: i32, &a| {
                h.rotate_left(5) ^ a.wrapping_mul(0x0101_0101)
            })),
        });
    }
    natives
}

/// Every int method of an applet on both engines, then again after the host
/// fills its null static arrays, then with each static int field set to a
/// range of values (the unet applets select what they do by a static).
fn run_applet(name: &str, bytes: &[u8], prog: &Program, stats: &mut Stats) -> Result<(), String> {
    let mut twin = Twin::load(name, bytes, &stub_natives(prog), APPLET_FUEL)?;
    let methods = int_methods(prog);
    let mut rng = Rng::new(name);
    let mut round = |twin: &mut Twin, n: usize| -> Result<(), String> {
        for (m, arity) in &methods {
            let mut sets = arg_sets(&mut rng, *arity, n);
            sets.push(vec![64; *arity]);
            sets.push(vec![-1; *arity]);
            for args in sets {
                twin.invoke(m, &args, stats)?;
            }
        }
        Ok(())
    };
    round(&mut twin, 8)?;
    for f in prog.info.fields.iter().filter(|f| f.is_static) {
        if twin.metered.interp.static_array(&f.name).is_some() {
            continue;
        }
        let name = f.name.clone();
        match f.ty {
            FieldType::Array(Prim::Byte) => {
                let data: Vec<u8> = (0..200u8)
                    .map(|i| i.wrapping_mul(7).wrapping_add(1))
                    .collect();
                twin.host(&format!("set {name}"), &|a| {
                    a.set_static_array(&name, &data)
                })?;
            }
            FieldType::Array(Prim::Int) => {
                let data: Vec<i32> = (0..16).map(|i| i * 100 + 3).collect();
                twin.host(&format!("set {name}"), &|a| {
                    a.set_static_int_array(&name, &data)
                })?;
            }
            _ => {}
        }
    }
    round(&mut twin, 4)?;
    let ints: Vec<String> = prog
        .info
        .fields
        .iter()
        .filter(|f| f.is_static && f.ty == FieldType::Prim(Prim::Int))
        .map(|f| f.name.clone())
        .collect();
    if !ints.is_empty() {
        for v in (0..=12).chain([-1, 1500, i32::MAX]) {
            for f in &ints {
                twin.host(&format!("set {f} = {v}"), &|a| a.set_static_int(f, v))?;
            }
            round(&mut twin, 2)?;
        }
    }
    Ok(())
}

/// The stems of `applets/src/subset/*.java`: the classes jive must reject.
fn subset_examples() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../applets/src/subset");
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter_map(|e| {
            let p = e.path();
            (p.extension()? == "java")
                .then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect()
}

#[test]
fn applets_agree_on_both_engines() {
    let Some(root) = jive::APPLET_CLASSES else {
        eprintln!("{SKIP_JAVAC}");
        return;
    };
    let rejected = subset_examples();
    let mut stats = Stats::default();
    let mut errors = Vec::new();
    let mut ran = Vec::new();
    let builds = RELEASES.iter().copied().chain(["unet"]);
    for build in builds {
        for f in sorted_class_files(&PathBuf::from(root).join(build), true) {
            let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&f).unwrap();
            let prog = match jive::check(&bytes, &Limits::default()) {
                Ok(p) => p,
                Err(e) => {
                    let outer = stem.split('$').next().unwrap_or(&stem);
                    assert!(
                        rejected.iter().any(|r| r == outer),
                        "{}: an applet jive rejects: {e}",
                        f.display()
                    );
                    continue;
                }
            };
            let name = format!("{stem} ({build})");
            if let Err(e) = run_applet(&name, &bytes, &prog, &mut stats) {
                errors.push(e);
            }
            ran.push(name);
        }
    }
    eprintln!("{} applets: {}", ran.len(), stats.summary());
    fail_on(&errors, "applets where the engines disagree");
    // Arith, Bench, Counter, NarrowNatives, NativeHomes, RawUnet, Traps,
    // Victim in both builds; the 7 endpoint applets.
    assert!(ran.len() >= 23, "only these applets ran: {ran:?}");
}

#[test]
fn hotspot_cases_agree_on_both_engines() {
    if classes("release8").is_none() {
        return;
    }
    let mut stats = Stats::default();
    let mut errors = Vec::new();
    for r in RELEASES {
        let bytes = class_bytes(r, "Arith").unwrap();
        let fuel = Limits::default().fuel.unwrap();
        let name = format!("Arith ({r})");
        let mut twin = match Twin::load(&name, &bytes, &Natives::new(), fuel) {
            Ok(t) => t,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let cases = arith_cases(&twin.metered.interp);
        assert!(cases.len() > 5000, "{} cases", cases.len());
        for (m, args) in &cases {
            if let Err(e) = twin.invoke(m, args, &mut stats) {
                // The applets' states may have parted: stop this build here.
                errors.push(e);
                break;
            }
        }
    }
    eprintln!("Arith: {}", stats.summary());
    fail_on(&errors, "builds of Arith where the engines disagree");
}

/// Arguments for `FuelLoops`' methods: small loops (a few dozen trips,
/// some none, traps at a random trip or none), and loops whose counter
/// starts near `i32::MAX` or `i32::MIN` (counting to the edge without
/// wrapping, or a trip count beyond 32 bits, which no budget here covers).
fn fuel_loop_args(rng: &mut Rng) -> [i32; 3] {
    let mut small = |lo: i64, hi: i64| lo + (rng.next() % (hi - lo) as u64) as i64;
    match small(0, 8) {
        0 => [i32::MAX - small(0, 6) as i32, i32::MAX, small(-3, 3) as i32],
        1 => [
            i32::MIN + small(0, 6) as i32,
            i32::MIN,
            i32::MIN + small(0, 6) as i32,
        ],
        2 => [i32::MIN, i32::MAX, i32::MIN],
        3 => [
            small(5, 30) as i32,
            small(-10, 5) as i32,
            small(-5, 30) as i32,
        ],
        _ => [
            small(-12, 12) as i32,
            small(-12, 30) as i32,
            small(-12, 30) as i32,
        ],
    }
}

/// The metered listing of `FuelLoops.<method>` on the JIT: each
/// instruction's (bci, offset, bytes, mnemonic), from the listing's
/// `; bci N` marks and `offset  bytes  mnemonic ...` lines.
#[cfg(target_arch = "x86_64")]
fn metered_listing(method: &str) -> Vec<(u32, usize, Vec<u8>, String)> {
    listing_of(method, Limits::default())
}

/// [`metered_listing`] of `FuelLoops.<method>` loaded with `limits`.
#[cfg(target_arch = "x86_64")]
fn listing_of(method: &str, limits: Limits) -> Vec<(u32, usize, Vec<u8>, String)> {
    let bytes = class_bytes("release8", "FuelLoops").unwrap();
    let mut jit = Applet::load_with_engine(&bytes, &Natives::new(), limits, Engine::Jit)
        .unwrap_or_else(|e| panic!("FuelLoops: {e}"));
    if limits.fuel.is_some() {
        let depth = jit.limits().max_call_depth;
        jit.set_run_limits(Some(1 << 20), depth);
    }
    assert_eq!(jit.engine(), Engine::Jit, "FuelLoops on the JIT");
    let listing = jit.native_listing().expect("a listing");
    let head = format!("; {method}(III)I");
    let lines: Vec<&str> = listing
        .lines()
        .skip_while(|l| l.trim() != head)
        .skip(1)
        .take_while(|l| !l.trim().starts_with("; ") || l.trim().starts_with("; bci "))
        .collect();
    let mut insns = Vec::new();
    let mut bci = 0;
    for l in &lines {
        let t = l.trim();
        if let Some(b) = t.strip_prefix("; bci ") {
            bci = b.parse().unwrap();
            continue;
        }
        let mut f = t.split_whitespace();
        let (Some(at), Some(hex), Some(mn)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let at = usize::from_str_radix(at, 16).unwrap();
        let code: Vec<u8> = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        insns.push((bci, at, code, mn.to_string()));
    }
    assert!(!insns.is_empty(), "no {method} in:\n{listing}");
    insns
}

/// Where each op's code starts in a [`metered_listing`], by bci: one
/// offset per copy the JIT compiled of it.
#[cfg(target_arch = "x86_64")]
fn copies_of(insns: &[(u32, usize, Vec<u8>, String)]) -> BTreeMap<u32, Vec<usize>> {
    let mut starts: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut last = None;
    for &(b, at, _, _) in insns {
        if last != Some(b) {
            starts.entry(b).or_default().push(at);
        }
        last = Some(b);
    }
    starts
}

/// The targets of the conditional jumps before `head` that go to `head`
/// or past it: a rotated jump into the loop ([`metered_listing`]).
#[cfg(target_arch = "x86_64")]
fn jumps_into(insns: &[(u32, usize, Vec<u8>, String)], head: usize) -> Vec<usize> {
    let target = |at: usize, c: &[u8]| -> Option<usize> {
        let rel = match c {
            [0x0f, 0x80..=0x8f, r @ ..] if r.len() == 4 => {
                i32::from_le_bytes([r[0], r[1], r[2], r[3]]) as isize
            }
            [0x70..=0x7f, r] => *r as i8 as isize,
            _ => return None,
        };
        Some((at as isize + c.len() as isize + rel) as usize)
    };
    insns
        .iter()
        .filter(|(_, at, _, mn)| *at < head && mn.starts_with('j') && mn != "jmp")
        .filter_map(|(_, at, c, _)| target(*at, c))
        .filter(|&t| t >= head)
        .collect()
}

/// A jump to a straight loop's head from before it, which the JIT rotates
/// (a copy of the head's test, and a branch into the loop past it), enters
/// the loop's metered group of four passes, not the pass-by-pass copy that
/// follows them: in the metered listing of `FuelLoops.scanAfterBranch`
/// (the then-branch's `goto` to `while (i < n && ...)`), that branch goes
/// to the first of the five copies of the op after the head's test (pass
/// 0's), which is exact, since a pass charges nothing before its back edge
/// (`counted_loops_run_out_of_fuel_where_the_interpreter_does` runs it on
/// every budget). Until 2026-12-01 it went to the fifth.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_rotated_jump_into_a_straight_loop_enters_its_group() {
    if classes("release8").is_none() || engine_under_test() != Engine::Jit {
        return;
    }
    let insns = metered_listing("scanAfterBranch");
    // The loop's ops are compiled five times (four passes, then the
    // pass-by-pass copy): its head is the least bci of five copies' or
    // more, the op after its test the next.
    let starts = copies_of(&insns);
    let looped: Vec<(&u32, &Vec<usize>)> = starts.iter().filter(|(_, v)| v.len() >= 5).collect();
    assert!(looped.len() >= 2, "no straight loop in {insns:x?}");
    let head = looped[0].1[0];
    let pass0 = looped[1].1[0];
    let into: Vec<usize> = jumps_into(&insns, head)
        .into_iter()
        .filter(|&t| t > head)
        .collect();
    assert_eq!(
        format!("{into:x?}"),
        format!("[{pass0:x}]"),
        "the rotated branch into the loop (pass 0's op after the test is at {pass0:x}, \
         the copies at {:x?})",
        looped[1].1
    );
}

/// A jump to a counted loop's head from before it, which the JIT rotates
/// as it does a straight loop's, goes to the loop's entry, which charges
/// the trip count once and runs the copy without charges: in the metered
/// listing of `FuelLoops.upAfterBranch` (the then-branch's `goto` to
/// `while (i < to)`), that branch goes to the first code of the head's bci
/// (the entry; the two copies' tests follow it). Exact either way (the
/// entry tests again, which reads only locals), and
/// `counted_loops_run_out_of_fuel_where_the_interpreter_does` runs the
/// method on every budget. Until 2026-12-01 it went past the metered
/// copy's test and ran the whole loop metered (some 60% slower).
#[cfg(target_arch = "x86_64")]
#[test]
fn a_rotated_jump_into_a_counted_loop_enters_at_its_entry() {
    if classes("release8").is_none() || engine_under_test() != Engine::Jit {
        return;
    }
    let insns = metered_listing("upAfterBranch");
    // The loop's ops are compiled twice (the copy without charges, then
    // the metered one): its head is the least bci of two copies or more,
    // whose first code is the entry (with the first copy's test after it).
    let starts = copies_of(&insns);
    let Some((_, entry)) = starts.iter().find(|(_, v)| v.len() >= 2) else {
        panic!("no counted loop in {insns:x?}");
    };
    let into = jumps_into(&insns, entry[0]);
    assert_eq!(
        format!("{into:x?}"),
        format!("[{:x}]", entry[0]),
        "the rotated branch into the loop (the entry at {:x}, the metered test at {:x?})",
        entry[0],
        &entry[1..]
    );
}

/// A counted loop that charges nothing (the copy that runs once its trip
/// count is charged at its entry, or the loop itself without metering)
/// is compiled as four passes in a row, each with its own test, only the
/// last pass's back edge taken (`Compiler::passes`): in the listings of
/// `FuelLoops.up` (`for (i = from; i < to; i++) { s += 100 / (i - bad);
/// sum = s; }`), the body's first op has five copies metered (four
/// passes, then the metered copy) and four without metering. Until
/// 2026-12-02 each was compiled once (two copies metered, one without),
/// and every pass took a branch: on the Intel Xeon that session measured,
/// the exit of `Bench.fibonacci(40)`'s loop (40 taken back edges) was
/// mispredicted at every call, a third of the call's time.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_counted_loop_runs_four_passes_per_taken_back_edge() {
    if classes("release8").is_none() || engine_under_test() != Engine::Jit {
        return;
    }
    for (limits, copies) in [(Limits::default(), 5), (Limits::unmetered(), 4)] {
        let insns = listing_of("up", limits);
        let starts = copies_of(&insns);
        // The head's test (its bci also marks the entry's trip count) is
        // the first bci compiled more than once; the body's first op is
        // the next bci.
        let Some((&head, _)) = starts.iter().find(|(_, v)| v.len() >= 2) else {
            panic!("no loop in {insns:x?}");
        };
        let body = starts.range(head + 1..).next().map(|(_, v)| v.len());
        assert_eq!(
            body,
            Some(copies),
            "copies of the body's first op (metered: {})",
            limits.fuel.is_some()
        );
    }
}

/// Without metering, the counted loops of `FuelLoops` run as four passes
/// in a row ([`a_counted_loop_runs_four_passes_per_taken_back_edge`]):
/// every method but `forever` and `scanStride` (which never end without
/// fuel, the second when its step is 0; neither is a counted loop), on trip
/// counts from 0 to 40 (so that each of the four passes is the last, the
/// one that leaves, and the one that traps, for some call), gives the
/// interpreter's value or trap (kind, method, bci) and leaves its state.
#[test]
fn counted_loops_without_metering_run_as_the_interpreter_does() {
    if classes("release8").is_none() {
        return;
    }
    let mut errors = Vec::new();
    let mut calls = 0usize;
    for r in RELEASES {
        let bytes = class_bytes(r, "FuelLoops").unwrap();
        let name = format!("FuelLoops ({r}, unmetered)");
        let mut pair = Pair::load(&name, &bytes, &Natives::new(), Limits::unmetered())
            .unwrap_or_else(|e| panic!("{e}"));
        let methods: Vec<String> = int_methods(pair.interp.program())
            .into_iter()
            .filter(|(m, arity)| *arity == 3 && m != "forever" && m != "scanStride")
            .map(|(m, _)| m)
            .collect();
        assert_eq!(methods.len(), 23, "{name}: methods {methods:?}");
        'methods: for m in &methods {
            for from in [-5, 0, 1, 3] {
                for to in [-9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 40] {
                    for third in [-2, 0, 2, 3, 4, 5, 6, 7, 11, 20] {
                        if let Err(e) = pair.invoke(m, &[from, to, third]) {
                            errors.push(e);
                            continue 'methods;
                        }
                        calls += 1;
                    }
                }
            }
        }
    }
    eprintln!("FuelLoops unmetered: {calls} calls");
    fail_on(&errors, "calls without metering where the engines disagree");
}

/// The JIT charges a counted loop's trip count (times the units each pass
/// charges at its calls) once, at its entry, when the fuel left covers it,
/// and runs the loop charge by charge otherwise; the interpreter charges
/// every back edge and call. For every call, every budget from 0 fuel up to
/// two units past the first budget that does not run out (at most 400),
/// then 4,096 and 2^20, must give the same outcome on both engines (value
/// and fuel used, or trap kind, method and bci) and leave the same state
/// (how far the loop's stores got before the trap). The loops of
/// `FuelLoops` count up and down to locals and constants, trap in the
/// middle (in the body or in a callee: a division, an index, a null
/// receiver), nest, run zero times, start near the ends of the int range,
/// call methods that charge nothing (static and instance, one or two a
/// pass, one on each branch); some (an early exit, a moving bound, a bound
/// the counter never passes, a call on one branch only, callees that loop
/// or call) are not counted loops and keep their charge per iteration.
#[test]
fn counted_loops_run_out_of_fuel_where_the_interpreter_does() {
    if classes("release8").is_none() {
        return;
    }
    let mut errors = Vec::new();
    let (mut calls, mut exhausted, mut traps, mut returned) = (0usize, 0usize, 0usize, 0usize);
    for r in RELEASES {
        let bytes = class_bytes(r, "FuelLoops").unwrap();
        let name = format!("FuelLoops ({r})");
        let mut pair = match Pair::load(&name, &bytes, &Natives::new(), Limits::default()) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        let mut rng = Rng::new(&name);
        let methods: Vec<String> = int_methods(pair.interp.program())
            .into_iter()
            .filter(|(_, arity)| *arity == 3)
            .map(|(m, _)| m)
            .collect();
        assert_eq!(methods.len(), 25, "{name}: methods {methods:?}");
        'calls: for m in &methods {
            for _ in 0..24 {
                let args = fuel_loop_args(&mut rng);
                let mut past = None;
                // Then two budgets that cover every small loop's count, so
                // that a loop whose callee traps midway runs its uncharged
                // copy up to the trap.
                for fuel in (0..400u64).chain([4096, 1 << 20]) {
                    if fuel < 400 && past.is_some_and(|p| fuel > p + 2) {
                        continue;
                    }
                    if let Err(e) = pair.set_fuel(Some(fuel)) {
                        errors.push(e);
                        break 'calls;
                    }
                    let out = match pair.invoke(m, &args) {
                        Ok(out) => out,
                        Err(e) => {
                            errors.push(format!("with {fuel} fuel: {e}"));
                            break 'calls;
                        }
                    };
                    calls += 1;
                    match out {
                        Err(InvokeError::Trap(Trap {
                            kind: TrapKind::FuelExhausted(_),
                            ..
                        })) => exhausted += 1,
                        Err(_) => {
                            traps += 1;
                            past.get_or_insert(fuel);
                        }
                        Ok(_) => {
                            returned += 1;
                            past.get_or_insert(fuel);
                        }
                    }
                }
            }
        }
    }
    // At the call depth limit every call traps, at the first pass of a
    // loop charged at its entry as of any other.
    let mut deep = 0usize;
    for r in RELEASES {
        let bytes = class_bytes(r, "FuelLoops").unwrap();
        let name = format!("FuelLoops ({r}, depth 1)");
        let mut pair = Pair::load(&name, &bytes, &Natives::new(), Limits::default())
            .unwrap_or_else(|e| panic!("{e}"));
        for a in [&mut pair.interp, &mut pair.jit] {
            a.set_run_limits(Some(1 << 20), 1);
        }
        for m in [
            "calls",
            "twoCalls",
            "callTraps",
            "instanceCalls",
            "callEitherWay",
        ] {
            for args in [[0, 0, 0], [3, 9, 1], [-2, 7, 40]] {
                match pair.invoke(m, &args) {
                    Ok(Err(InvokeError::Trap(Trap {
                        kind: TrapKind::CallDepthExceeded(_),
                        ..
                    }))) => deep += 1,
                    Ok(Ok(_)) => returned += 1,
                    Ok(other) => errors.push(format!("{name}.{m}{args:?}: {other:?}")),
                    Err(e) => errors.push(e),
                }
            }
        }
    }
    eprintln!(
        "FuelLoops: {calls} calls ({exhausted} out of fuel, {traps} other traps, {returned} returned), {deep} at the depth limit"
    );
    fail_on(&errors, "fuel budgets where the engines disagree");
    assert!(exhausted > 1000 && traps > 30 && returned > 500 && deep >= 14);
}

/// The budgets tried for a call that uses `used` fuel: every budget up to
/// one past it when that is at most 64 (so that each of its loops is
/// entered with just enough fuel, and one unit less), else the last four
/// below it, it, one past, and eight pseudo-random ones below.
fn budgets_around(used: u64, rng: &mut Rng) -> Vec<u64> {
    if used <= 64 {
        return (0..=used + 1).collect();
    }
    let mut v: Vec<u64> = (used - 4..=used + 1).collect();
    v.extend((0..8).map(|_| rng.next() % used));
    v
}

/// The random programs of `random_programs_agree_on_both_engines` (nested
/// loops with constant, argument and array-length bounds, `break`,
/// `continue`, traps in the middle of loops, calls, natives), each call
/// run on the budgets of [`budgets_around`] the fuel it uses: the same
/// outcome and state on both engines on every budget, so the JIT runs out
/// of fuel at the interpreter's point whether or not a loop's count was
/// charged at its entry.
#[test]
fn random_programs_run_out_of_fuel_where_the_interpreter_does() {
    let Some(dir) = jive::RANDOM_CLASSES else {
        eprintln!("{SKIP_JAVAC}");
        return;
    };
    let mut errors = Vec::new();
    let (mut programs, mut calls, mut exhausted) = (0usize, 0usize, 0usize);
    'classes: for f in sorted_class_files(Path::new(dir), false) {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let limits = Limits {
            fuel: Some(FUEL),
            ..Limits::default()
        };
        let mut pair = match Pair::load(&name, &bytes, &random_natives(), limits) {
            Ok(p) => p,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let prog = pair.interp.program().clone();
        let mut rng = Rng::new(&format!("{name} fuel"));
        for (m, arity) in int_methods(&prog) {
            if !is_program(&prog, &m) {
                continue;
            }
            programs += 1;
            for args in arg_sets(&mut rng, arity, 2) {
                let step = |pair: &mut Pair, fuel: u64| -> Result<Call, String> {
                    pair.set_fuel(Some(fuel))?;
                    pair.invoke(&m, &args).map_err(|e| {
                        format!(
                            "with {fuel} fuel: {e} (source: {})",
                            random_source(&f).display()
                        )
                    })
                };
                let used = match step(&mut pair, FUEL) {
                    Ok(Ok(out)) => out.fuel_used,
                    Ok(Err(_)) => continue,
                    Err(e) => {
                        errors.push(e);
                        continue 'classes;
                    }
                };
                for fuel in budgets_around(used, &mut rng) {
                    match step(&mut pair, fuel) {
                        Ok(r) => {
                            calls += 1;
                            if matches!(
                                r,
                                Err(InvokeError::Trap(Trap {
                                    kind: TrapKind::FuelExhausted(_),
                                    ..
                                }))
                            ) {
                                exhausted += 1;
                            }
                        }
                        Err(e) => {
                            errors.push(e);
                            continue 'classes;
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "{programs} random programs, {calls} calls on budgets around their fuel ({exhausted} out of fuel)"
    );
    fail_on(
        &errors,
        "random programs where the engines disagree on a budget",
    );
    assert!(programs >= MIN_PROGRAMS && exhausted > 10_000);
}

/// `q = a / b; r = a % b` of the same operands in one straight run: the JIT
/// divides once (`irem` as `a - q * b`, after the `idiv`'s checks), by a
/// local (`Arith.divRem`) and by a static (`divRemStatic`); where the
/// quotient goes into the divisor (`divRemIntoDivisor`) or a static is
/// written between (`divRemStaticWritten`), it divides twice. The values
/// and traps are `hotspot_cases_agree_on_both_engines`'.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_remainder_after_the_same_division_divides_once() {
    let Some(listing) = class_listing("Arith") else {
        return;
    };
    let idivs = |method: &str| {
        let head = format!("; {method}(II)I");
        listing
            .lines()
            .skip_while(|l| l.trim() != head)
            .skip(1)
            .take_while(|l| !l.trim().starts_with("; ") || l.trim().starts_with("; bci "))
            .filter(|l| l.contains("idiv"))
            .count()
    };
    assert_eq!(idivs("divRem"), 1, "{listing}");
    assert_eq!(idivs("divRemStatic"), 1, "{listing}");
    assert_eq!(idivs("divRemIntoDivisor"), 2, "{listing}");
    assert_eq!(idivs("divRemStaticWritten"), 2, "{listing}");
}

/// The whole listing of class `name` (`release8`) on the JIT.
#[cfg(target_arch = "x86_64")]
fn class_listing(name: &str) -> Option<String> {
    let bytes = class_bytes("release8", name)?;
    let jit = Applet::load_with_engine(&bytes, &Natives::new(), Limits::default(), Engine::Jit)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(jit.engine(), Engine::Jit, "{name} on the JIT");
    Some(jit.native_listing().expect("a listing"))
}

/// Code in which no method calls another is framed from the stack
/// pointer (vcode's `frame_from_sp`: `sub rsp` and `add rsp` around the
/// saves, no `push rbp; mov rbp, rsp` and `leave`, two instructions fewer
/// an invocation); code with calls between methods (`jal`, which moves
/// `rsp` in the body) keeps the frame through `rbp`. Both run as the
/// interpreter does (`applets_agree_on_both_engines`,
/// `hotspot_cases_agree_on_both_engines`, the random programs).
#[cfg(target_arch = "x86_64")]
#[test]
fn code_without_method_calls_is_framed_from_the_stack_pointer() {
    if !jive::jit::available() {
        return;
    }
    // RxSwap: no method calls another.
    let Some(flat) = class_listing("RxSwap") else {
        return;
    };
    let first = flat
        .lines()
        .find(|l| !l.trim().starts_with(';'))
        .expect("an instruction");
    assert!(first.contains("sub     rsp,"), "{flat}");
    // The prologue's jump table is listed as data (`.quad`), so that none
    // of its addresses reads as an operand (`[rbp-42h]` in one run, when
    // the listing decoded them as instructions).
    assert!(flat.contains(".quad"), "{flat}");
    assert!(!flat.contains("rbp") && !flat.contains("leave"), "{flat}");
    // FuelLoops: `calls` calls `twice`.
    let calls = class_listing("FuelLoops").expect("FuelLoops");
    assert!(
        calls.contains("push    rbp") && calls.contains("leave"),
        "{calls}"
    );
}
