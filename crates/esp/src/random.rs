//! Random ESP programs, inputs and fast-path specifications, for the
//! differential tests that run every backend against the interpreter and
//! the model checker ([`crate::mc`]).
//!
//! Programs come in two kinds ([`Kind`]):
//! - **Kahn** programs have no `alt`, and every channel has one reader
//!   process and one writer process, so the sequence of messages on each
//!   channel, and the state in which the program ends up idle, do not
//!   depend on the schedule: every backend must agree exactly.
//! - **Alt** programs add nondeterminism: processes that merge several
//!   inputs with an `alt` at the head of their loop, `alt`s choosing between
//!   outputs (several arms viable at once), and channels with two writers.
//!   Backends are judged by [`crate::mc::accepts`].
//!
//! ## Shape, and why every program ends up idle
//!
//! Processes are ranked `P0, P1, ...`. Each is a loop `while (true)` whose
//! every iteration begins by receiving from its *drivers*: an
//! `external in` channel, or a channel written by a lower-ranked process
//! (its parent), or several of those merged by an `alt`. The body computes
//! (assignments, `if`s on the received values, counted loops
//! `while (l0 < N)`, asserts that always hold, host calls, `#N` labels) and
//! sends: to its children's driver channels, to `external out` channels,
//! and requests to *servers* (`out(req, ..); in(rep, ..)`), higher-ranked
//! processes that answer each request with exactly one reply at the end of
//! their loop body. A root may `break` out of its loop and halt.
//!
//! So every loop iteration consumes a message that a lower rank (or the
//! finite input) produced, and every counted loop is bounded: each program
//! terminates on finite input. And since a child always comes back to its
//! drivers and a server always replies, sends never wait forever except on
//! a process that halted, so programs rarely deadlock and usually move much
//! data. Divisions are by `(e | 1)`, which is never zero; asserts are
//! identities (`(a | b) - (a & b) == (a ^ b)`), so they hold whatever the
//! values.
//!
//! Host functions: `h1(int)` and `h2(int, int)`, pure functions given by
//! [`host`], which the tests bind on every backend.

use std::fmt::Write as _;

use crate::ir::{ChanId, ChanKind, Comm, NodeKind, Pc, Program};

/// Which kind of program to generate.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// No `alt`; one reader and one writer per channel: deterministic.
    Kahn,
    /// With `alt`s and merged channels: nondeterministic.
    Alt,
}

/// The size and kind of generated programs.
#[derive(Clone, Debug)]
pub struct GenOptions {
    /// The kind.
    pub kind: Kind,
    /// At most this many processes (at least 2 are generated).
    pub max_procs: usize,
    /// At most this many filler statements per block.
    pub max_stmts: usize,
    /// How deeply `if`s and counted loops nest.
    pub max_depth: usize,
}

impl Default for GenOptions {
    fn default() -> Self {
        GenOptions {
            kind: Kind::Kahn,
            max_procs: 4,
            max_stmts: 3,
            max_depth: 2,
        }
    }
}

/// The host functions generated programs declare: name and arity.
pub const EXTERNS: &[(&str, u32)] = &[("h1", 1), ("h2", 2)];

/// The pure functions the generated programs' host functions stand for:
/// `h1(a) = 3a + 1`, `h2(a, b) = a ^ (b << 1)`; 0 for any other name or
/// arity.
pub fn host(name: &str, args: &[i64]) -> i64 {
    match (name, args) {
        ("h1", [a]) => a.wrapping_mul(3).wrapping_add(1),
        ("h2", [a, b]) => a ^ b.wrapping_shl(1),
        _ => 0,
    }
}

/// A small deterministic generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True with probability `percent`%.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent as usize
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }

    /// One element of a nonempty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

// ---------------------------------------------------------------------------
// Programs.

/// A channel a process reads at the head of its loop, or writes.
#[derive(Clone, Debug)]
struct Chan {
    name: String,
    arity: usize,
}

/// One thing a process's loop body must do.
#[derive(Clone, Debug)]
enum Duty {
    /// Send on a child's driver channel or an external out.
    Send(Chan),
    /// Ask a server: `out(req, ..)`, then `in(rep, ..)`.
    Ask(Chan, Chan),
}

#[derive(Clone, Debug, Default)]
struct Plan {
    /// Channels received at the head of each iteration (several: an `alt`).
    drivers: Vec<Chan>,
    /// What the body must do.
    duties: Vec<Duty>,
    /// As a server: the reply channel, written at the end of each iteration.
    reply: Option<Chan>,
    /// A root (driven by external input only) may break out and halt.
    root: bool,
}

struct Gen<'a> {
    rng: Rng,
    opts: &'a GenOptions,
    out: String,
    indent: usize,
    /// The process's data variables (loop counters are `l0`, `l1`, ...).
    data: Vec<&'static str>,
    consts: Vec<String>,
    label: u32,
    /// Counted-loop nesting (which `lN` is free).
    loops: usize,
}

const DATA: &[&str] = &["a", "b", "c", "d"];

impl Gen<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn var(&mut self) -> String {
        self.rng.pick(&self.data).to_string()
    }

    fn literal(&mut self) -> String {
        match self.rng.below(20) {
            0 => format!("0x{:x}", self.rng.range(0, 255)),
            1 => format!("'{}'", (b'a' + self.rng.below(26) as u8) as char),
            2 => "true".to_string(),
            3 => "false".to_string(),
            4 => self
                .rng
                .pick(&[
                    "9223372036854775807",
                    "(-9223372036854775807 - 1)",
                    "1000000007",
                    "0x7fffffff",
                ])
                .to_string(),
            5 if !self.consts.is_empty() => self.rng.pick(&self.consts).clone(),
            _ => self.rng.range(0, 9).to_string(),
        }
    }

    fn leaf(&mut self) -> String {
        match self.rng.below(10) {
            0..=5 => self.var(),
            6 if self.loops > 0 => format!("l{}", self.rng.below(self.loops)),
            _ => self.literal(),
        }
    }

    /// A random expression; `calls` allows host calls.
    fn expr(&mut self, depth: usize, calls: bool) -> String {
        if depth == 0 || self.rng.chance(30) {
            return self.leaf();
        }
        let a = self.expr(depth - 1, calls);
        let b = self.expr(depth - 1, calls);
        match self.rng.below(24) {
            0..=2 => format!("{a} + {b}"),
            3 | 4 => format!("{a} - {b}"),
            5 => format!("({a}) * ({b})"),
            6 => format!("({a}) / (({b}) | 1)"),
            7 => format!("({a}) % (({b}) | 1)"),
            8 => format!("({a}) & ({b})"),
            9 => format!("({a}) | ({b})"),
            10 => format!("({a}) ^ ({b})"),
            11 => format!("({a}) << (({b}) & 7)"),
            12 => format!("({a}) >> ({b})"),
            13 => format!("({a}) < ({b})"),
            14 => format!("({a}) == ({b})"),
            15 => format!("({a}) >= ({b})"),
            16 => format!("({a}) != ({b})"),
            17 => format!("({a}) && ({b})"),
            18 => format!("({a}) || ({b})"),
            19 => format!("-({a})"),
            20 => format!("!({a})"),
            21 => format!("~({a})"),
            22 if calls => format!("h1({a})"),
            23 if calls => format!("h2({a}, {b})"),
            _ => format!("({a}) <= ({b})"),
        }
    }

    /// A condition on the process's (usually just received) values.
    fn cond(&mut self) -> String {
        let v = self.var();
        let k = self.rng.range(0, 5);
        match self.rng.below(7) {
            0 => format!("{v} < {k}"),
            1 => format!("{v} == {k}"),
            2 => format!("({v} & 1) == 0"),
            3 => format!("{v} != {k} && {} > 0", self.var()),
            4 => format!("{v} >= {k} || {} == 2", self.var()),
            5 => format!("h1({v}) > {}", self.rng.range(0, 16)),
            _ => self.expr(2, false),
        }
    }

    /// An assertion that holds whatever the values.
    fn assertion(&mut self) -> String {
        let a = self.expr(1, false);
        let b = self.expr(1, false);
        match self.rng.below(6) {
            0 => format!("(({a}) | ({b})) - (({a}) & ({b})) == (({a}) ^ ({b}))"),
            1 => format!("(({a}) & 7) < 8"),
            2 => format!("(({a}) | 1) != 0"),
            3 => format!("({a}) + ({b}) - ({b}) == ({a})"),
            4 => format!("({a}) * 2 == ({a}) + ({a})"),
            _ => format!("!(({a}) < ({b})) || ({a}) <= ({b})"),
        }
    }

    fn maybe_label(&mut self, percent: u32) {
        if self.rng.chance(percent) {
            self.label += 1;
            let l = format!("#{}", self.label);
            self.line(&l);
        }
    }

    /// An `out` of `chan`: operands are variables, constants or expressions
    /// (which the lowering assigns to temporaries).
    fn send(&mut self, c: &Chan) -> String {
        let args: Vec<String> = (0..c.arity)
            .map(|_| match self.rng.below(3) {
                0 => self.var(),
                1 => self.expr(2, true),
                _ => self.leaf(),
            })
            .collect();
        format!("out({}, {})", c.name, args.join(", "))
    }

    fn recv(&mut self, c: &Chan) -> String {
        // Distinct variables when there are enough: each field is kept.
        let mut pool = self.data.clone();
        let vars: Vec<String> = (0..c.arity)
            .map(|_| {
                if pool.is_empty() {
                    self.var()
                } else {
                    pool.remove(self.rng.below(pool.len())).to_string()
                }
            })
            .collect();
        format!("in({}, {})", c.name, vars.join(", "))
    }

    /// One statement that does not communicate.
    fn filler(&mut self, depth: usize, breakable: bool) {
        match self.rng.below(12) {
            0..=4 => {
                let v = self.var();
                let e = self.expr(2, true);
                self.line(&format!("{v} = {e};"));
            }
            5 => {
                let e = self.expr(1, false);
                let f = if self.rng.chance(50) {
                    format!("h1({e})")
                } else {
                    format!("h2({e}, {})", self.var())
                };
                self.line(&format!("{f};"));
            }
            6 => {
                let a = self.assertion();
                self.line(&format!("assert({a});"));
            }
            7 | 8 if depth > 0 => {
                let c = self.cond();
                self.line(&format!("if ({c}) {{"));
                self.indent += 1;
                self.block(depth - 1, Vec::new(), breakable);
                self.indent -= 1;
                if self.rng.chance(50) {
                    self.line("} else {");
                    self.indent += 1;
                    self.block(depth - 1, Vec::new(), breakable);
                    self.indent -= 1;
                }
                self.line("}");
            }
            9 if depth > 0 => self.counted(depth, Vec::new()),
            10 if breakable => {
                let c = self.cond();
                self.line(&format!("if ({c}) break;"));
            }
            _ => {
                let v = self.var();
                let w = self.var();
                let k = self.rng.range(1, 3);
                self.line(&format!("{v} = {w} + {k};"));
            }
        }
    }

    /// A bounded loop `lN = 0; while (lN < K) { ... lN = lN + 1; }`.
    fn counted(&mut self, depth: usize, duties: Vec<Duty>) {
        let l = format!("l{}", self.loops);
        let k = self.rng.range(1, 3);
        self.line(&format!("{l} = 0;"));
        self.line(&format!("while ({l} < {k}) {{"));
        self.indent += 1;
        self.loops += 1;
        self.block(depth.saturating_sub(1), duties, true);
        self.loops -= 1;
        self.line(&format!("{l} = {l} + 1;"));
        self.indent -= 1;
        self.line("}");
    }

    fn duty(&mut self, d: &Duty) {
        self.maybe_label(25);
        match d {
            Duty::Send(c) => {
                let s = self.send(c);
                self.line(&format!("{s};"));
            }
            Duty::Ask(req, rep) => {
                let s = self.send(req);
                self.line(&format!("{s};"));
                if self.rng.chance(30) {
                    let v = self.var();
                    let e = self.expr(1, false);
                    self.line(&format!("{v} = {e};"));
                }
                let r = self.recv(rep);
                self.line(&format!("{r};"));
            }
        }
    }

    /// A block doing `duties` among random fillers; `breakable` when a
    /// `break` would leave a counted loop.
    fn block(&mut self, depth: usize, duties: Vec<Duty>, breakable: bool) {
        let fillers = self.rng.below(self.opts.max_stmts + 1);
        // Items: Some(duty) or None (a filler); duties keep their order.
        let mut items: Vec<Option<Duty>> = duties.into_iter().map(Some).collect();
        for _ in 0..fillers {
            let at = self.rng.below(items.len() + 1);
            items.insert(at, None);
        }
        let mut i = 0;
        while i < items.len() {
            match items[i].clone() {
                None => {
                    self.maybe_label(10);
                    self.filler(depth, breakable);
                }
                Some(d) => {
                    // Two sends side by side may become one `alt` with two
                    // viable arms.
                    if self.opts.kind == Kind::Alt
                        && let (Duty::Send(c1), Some(Some(Duty::Send(c2)))) = (&d, items.get(i + 1))
                        && c1.name != c2.name
                        && self.rng.chance(60)
                    {
                        let (c1, c2) = (c1.clone(), c2.clone());
                        self.maybe_label(30);
                        self.line("alt {");
                        self.indent += 1;
                        for c in [&c1, &c2] {
                            let s = self.send(c);
                            self.line(&format!("{s} {{"));
                            self.indent += 1;
                            self.block(depth.saturating_sub(1), Vec::new(), breakable);
                            self.indent -= 1;
                            self.line("}");
                        }
                        self.indent -= 1;
                        self.line("}");
                        // The arm not taken still owes its send: do it now.
                        if self.rng.chance(50) {
                            self.duty(&Duty::Send(c1));
                        } else {
                            self.duty(&Duty::Send(c2));
                        }
                        i += 2;
                        continue;
                    }
                    match self.rng.below(6) {
                        0 if depth > 0 => {
                            let c = self.cond();
                            self.line(&format!("if ({c}) {{"));
                            self.indent += 1;
                            self.block(depth - 1, vec![d], breakable);
                            self.indent -= 1;
                            self.line("}");
                        }
                        1 if depth > 0 => self.counted(depth, vec![d]),
                        _ => self.duty(&d),
                    }
                }
            }
            i += 1;
        }
        if self.rng.chance(10) {
            // A label at the end of a block names the join point.
            self.maybe_label(100);
        }
    }

    fn process(&mut self, name: &str, plan: &Plan) {
        self.data = DATA[..2 + self.rng.below(3)].to_vec();
        self.consts.clear();
        self.line(&format!("process {name} {{"));
        self.indent += 1;
        if self.rng.chance(40) {
            let k = format!("K{}", self.rng.below(10));
            let v = self.rng.range(1, 20);
            self.line(&format!("constant {k} = {v};"));
            self.consts.push(k);
        }
        let mut vars: Vec<String> = self.data.iter().map(|s| s.to_string()).collect();
        vars.extend((0..self.opts.max_depth + 1).map(|i| format!("l{i}")));
        self.line(&format!("var {};", vars.join(", ")));
        if self.rng.chance(30) {
            let v = self.var();
            let e = self.literal();
            self.line(&format!("{v} = {e};"));
        }
        self.maybe_label(20);
        self.line("while (true) {");
        self.indent += 1;
        // Spread the duties over the head's arms and the rest of the body.
        let mut duties = plan.duties.clone();
        if plan.drivers.len() == 1 {
            self.maybe_label(30);
            let r = self.recv(&plan.drivers[0]);
            self.line(&format!("{r};"));
        } else {
            self.maybe_label(30);
            self.line("alt {");
            self.indent += 1;
            for d in &plan.drivers {
                let r = self.recv(d);
                self.line(&format!("{r} {{"));
                self.indent += 1;
                let take = if duties.is_empty() {
                    0
                } else {
                    self.rng.below(duties.len() + 1)
                };
                let mine: Vec<Duty> = duties.drain(..take).collect();
                let depth = self.opts.max_depth.saturating_sub(1);
                self.block(depth, mine, false);
                self.indent -= 1;
                self.line("}");
            }
            self.indent -= 1;
            self.line("}");
        }
        let depth = self.opts.max_depth;
        self.block(depth, duties, false);
        if let Some(rep) = &plan.reply {
            self.maybe_label(20);
            let s = self.send(rep);
            self.line(&format!("{s};"));
        }
        if plan.root && self.rng.chance(15) {
            let v = self.var();
            let k = self.rng.range(0, 6);
            self.line(&format!("if ({v} == {k}) break;"));
        }
        self.indent -= 1;
        self.line("}");
        self.maybe_label(10);
        self.indent -= 1;
        self.line("}");
    }
}

/// A random program of `options.kind`, as ESP source text. The same seed
/// and options always give the same text.
pub fn program(seed: u64, options: &GenOptions) -> String {
    let mut rng = Rng::new(seed);
    let n = 2 + rng.below(options.max_procs.saturating_sub(1).max(1));
    let alt = options.kind == Kind::Alt;
    let mut plans: Vec<Plan> = vec![Plan::default(); n];
    let mut decls = String::new();
    let mut counts = [0usize; 3];
    let mut fresh = |kind: usize, arity: usize, decls: &mut String| -> Chan {
        let (prefix, suffix) = [("c", ""), ("src", " external in"), ("snk", " external out")][kind];
        let name = format!("{prefix}{}", counts[kind]);
        counts[kind] += 1;
        let fields = vec!["int"; arity].join(", ");
        let _ = writeln!(decls, "channel {name}({fields}){suffix};");
        Chan { name, arity }
    };
    let arity = |rng: &mut Rng| if rng.chance(60) { 1 } else { 2 + rng.below(2) };
    for k in 0..n {
        if k == 0 || rng.chance(25) {
            let a = arity(&mut rng);
            let c = fresh(1, a, &mut decls);
            plans[k].drivers.push(c);
            plans[k].root = true;
        } else {
            let parent = rng.below(k);
            if rng.chance(65) {
                // A child: the parent sends on its driver channel.
                let a = arity(&mut rng);
                let c = fresh(0, a, &mut decls);
                plans[parent].duties.push(Duty::Send(c.clone()));
                plans[k].drivers.push(c);
            } else {
                let (a1, a2) = (arity(&mut rng), arity(&mut rng));
                let req = fresh(0, a1, &mut decls);
                let rep = fresh(0, a2, &mut decls);
                plans[parent]
                    .duties
                    .push(Duty::Ask(req.clone(), rep.clone()));
                plans[k].drivers.push(req);
                plans[k].reply = Some(rep);
            }
        }
        // Alt programs: merge a second driver into some non-servers.
        if alt && plans[k].reply.is_none() && (k == 1 || rng.chance(40)) {
            if k > 0 && rng.chance(60) {
                let a = arity(&mut rng);
                let c = fresh(0, a, &mut decls);
                let parent = rng.below(k);
                plans[parent].duties.push(Duty::Send(c.clone()));
                // Sometimes a second writer on the same channel.
                if k > 1 && rng.chance(40) {
                    let other = rng.below(k);
                    plans[other].duties.push(Duty::Send(c.clone()));
                }
                plans[k].drivers.push(c);
            } else {
                let a = arity(&mut rng);
                let c = fresh(1, a, &mut decls);
                plans[k].drivers.push(c);
            }
            plans[k].root =
                plans[k].root && plans[k].drivers.iter().all(|d| d.name.starts_with("src"));
        }
    }
    // External outputs: every leaf has one, others sometimes.
    let mut sinks: Vec<Chan> = Vec::new();
    for plan in plans.iter_mut() {
        let leaf = plan.duties.is_empty();
        let count = if leaf { 1 + rng.below(2) } else { rng.below(2) };
        for _ in 0..count {
            let c = if alt && !sinks.is_empty() && rng.chance(25) {
                rng.pick(&sinks).clone()
            } else {
                let a = arity(&mut rng);
                let c = fresh(2, a, &mut decls);
                sinks.push(c.clone());
                c
            };
            let at = rng.below(plan.duties.len() + 1);
            plan.duties.insert(at, Duty::Send(c));
        }
    }
    let mut text = String::new();
    let _ = writeln!(
        text,
        "// random {} program, seed {seed}",
        if alt { "alt" } else { "Kahn" }
    );
    text.push_str(&decls);
    for (name, arity) in EXTERNS {
        let _ = writeln!(
            text,
            "extern {name}({});",
            vec!["int"; *arity as usize].join(", ")
        );
    }
    let mut g = Gen {
        rng,
        opts: options,
        out: String::new(),
        indent: 0,
        data: Vec::new(),
        consts: Vec::new(),
        label: 0,
        loops: 0,
    };
    for (k, plan) in plans.iter().enumerate() {
        g.process(&format!("P{k}"), plan);
    }
    text.push_str(&g.out);
    text
}

/// Random finite input for `program`'s `external in` channels: for each,
/// up to `max_messages` messages, mostly small values, now and then a
/// negative or a huge one. Flat fields per channel, as
/// [`crate::runtime::Machine::push`] takes them.
pub fn inputs(program: &Program, seed: u64, max_messages: usize) -> Vec<(ChanId, Vec<i64>)> {
    let mut rng = Rng::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x1234);
    let mut out = Vec::new();
    for (i, c) in program.channels.iter().enumerate() {
        if c.kind != ChanKind::ExternalIn {
            continue;
        }
        let n = rng.below(max_messages + 1);
        let mut fields = Vec::new();
        for _ in 0..n * c.arity as usize {
            fields.push(match rng.below(10) {
                0 => rng.range(-3, -1),
                1 => rng.next_u64() as i64,
                _ => rng.range(0, 7),
            });
        }
        out.push((i as ChanId, fields));
    }
    out
}

// ---------------------------------------------------------------------------
// Specifications.

/// A statement a specification can name in one process.
#[derive(Clone, Debug)]
struct Named {
    /// How the `statement` field names it: a channel name or `#N`.
    text: String,
    /// Its alias (channel statements only).
    alias: Option<String>,
    /// The channel and direction, for channel statements.
    chan: Option<(ChanId, bool)>,
}

impl Named {
    /// How elements refer to it.
    fn name(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.text)
    }
}

/// The statements of process `p` that a specification can name: channel
/// statements whose channel the process uses exactly once, and `#N`
/// labels; in the order a walk from the entry meets them.
fn nameable(program: &Program, p: usize) -> Vec<Named> {
    let proc = &program.processes[p];
    let mut uses = vec![0usize; program.channels.len()];
    for node in &proc.nodes {
        match &node.kind {
            NodeKind::Comm { op, .. } => uses[op.chan() as usize] += 1,
            NodeKind::Alt { arms } => arms.iter().for_each(|a| uses[a.op.chan() as usize] += 1),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut seen = vec![false; proc.nodes.len()];
    let mut stack: Vec<Pc> = vec![proc.entry];
    while let Some(pc) = stack.pop() {
        if pc as usize >= proc.nodes.len() || seen[pc as usize] {
            continue;
        }
        seen[pc as usize] = true;
        let node = &proc.nodes[pc as usize];
        let mut add = |op: &Comm| {
            if uses[op.chan() as usize] == 1 {
                out.push(Named {
                    text: program.channels[op.chan() as usize].name.clone(),
                    alias: Some(format!("S{p}_{}", out.len())),
                    chan: Some((op.chan(), op.is_in())),
                });
            }
        };
        let mut next: Vec<Pc> = Vec::new();
        match &node.kind {
            NodeKind::Comm { op, next: n } => {
                add(op);
                next.push(*n);
            }
            NodeKind::Alt { arms } => {
                for a in arms {
                    add(&a.op);
                    next.push(a.next);
                }
            }
            NodeKind::Assign { next: n, .. }
            | NodeKind::Eval { next: n, .. }
            | NodeKind::Assert { next: n, .. } => next.push(*n),
            NodeKind::Nop { next: n } => {
                if let Some(l) = node.label {
                    out.push(Named {
                        text: format!("#{l}"),
                        alias: None,
                        chan: None,
                    });
                }
                next.push(*n);
            }
            NodeKind::Branch { then, els, .. } => {
                next.push(*els);
                next.push(*then);
            }
            NodeKind::Halt => {}
        }
        // Depth first, in source order.
        stack.extend(next.into_iter().rev());
    }
    out
}

/// One process of a specification being built.
struct ProcDraft {
    p: usize,
    names: Vec<Named>,
    /// Indices into `names` of the statements to list.
    listed: Vec<usize>,
}

struct SpecGen<'a> {
    rng: Rng,
    program: &'a Program,
    procs: Vec<ProcDraft>,
}

impl SpecGen<'_> {
    fn pred(&mut self, p: usize) -> String {
        let vars: Vec<&str> = self.program.processes[p]
            .vars
            .iter()
            .filter(|v| !v.temp)
            .map(|v| v.name.as_str())
            .collect();
        if vars.is_empty() {
            return format!("{} < 10", self.rng.range(0, 3));
        }
        let v = *self.rng.pick(&vars);
        let k = self.rng.range(0, 6);
        match self.rng.below(5) {
            0 => format!("{v} < {k}"),
            1 => format!("{v} != {k}"),
            2 => format!("({v} & 1) == 0 || {} >= {k}", self.rng.pick(&vars)),
            3 => format!("{v} <= {}", self.rng.range(0, 1000)),
            _ => format!("{v} >= 0"),
        }
    }

    /// The text of an element naming statement `i` of draft `d`.
    fn element(&mut self, d: usize, i: usize) -> String {
        let p = self.procs[d].p;
        let named = self.procs[d].names[i].clone();
        if !self.procs[d].listed.contains(&i) {
            self.procs[d].listed.push(i);
        }
        let mut s = named.name().to_string();
        if self.rng.chance(20) {
            let _ = write!(s, " ? ({})", self.pred(p));
        }
        if let Some((chan, is_in)) = named.chan
            && self.rng.chance(35)
        {
            // A partner: a statement of another path process on the same
            // channel, the other way.
            let mut partners = Vec::new();
            for (e, other) in self.procs.iter().enumerate() {
                if e == d {
                    continue;
                }
                for (j, n) in other.names.iter().enumerate() {
                    if n.chan == Some((chan, !is_in)) {
                        partners.push((e, j));
                    }
                }
            }
            if !partners.is_empty() {
                let (e, j) = *self.rng.pick(&partners);
                if !self.procs[e].listed.contains(&j) {
                    self.procs[e].listed.push(j);
                }
                let _ = write!(s, " <=> {}", self.procs[e].names[j].name());
            }
        }
        if self.procs.len() > 1 && self.rng.chance(15) {
            let mut e = self.rng.below(self.procs.len() - 1);
            if e >= d {
                e += 1;
            }
            let _ = write!(s, " yield {}", self.program.processes[self.procs[e].p].name);
        }
        s
    }

    fn regex(&mut self, d: usize, depth: usize) -> String {
        let n = self.procs[d].names.len();
        if depth == 0 || self.rng.chance(30) {
            let i = self.rng.below(n);
            return self.element(d, i);
        }
        match self.rng.below(6) {
            0 | 1 => {
                let k = 2 + self.rng.below(2);
                (0..k)
                    .map(|_| self.regex(d, depth - 1))
                    .collect::<Vec<_>>()
                    .join(" ")
            }
            2 => format!(
                "({} | {})",
                self.regex(d, depth - 1),
                self.regex(d, depth - 1)
            ),
            3 => format!("({})*", self.regex(d, depth - 1)),
            4 => format!("({})+", self.regex(d, depth - 1)),
            _ => format!("({})?", self.regex(d, depth - 1)),
        }
    }

    /// The follows field: often the process's statements in the order it
    /// meets them, repeated; otherwise a random expression.
    fn follows(&mut self, d: usize, start: usize) -> String {
        let n = self.procs[d].names.len();
        if self.rng.chance(30) {
            // Only the start, again and again: with a start at the loop's
            // head, the path runs until the input runs out.
            let s = self.element(d, start);
            return format!("({s})*");
        }
        if self.rng.chance(55) {
            let k = 1 + self.rng.below(n.min(4));
            let items: Vec<String> = (0..k)
                .map(|j| (start + 1 + j) % n)
                .map(|i| self.element(d, i))
                .collect();
            let op = if self.rng.chance(70) { "*" } else { "+" };
            format!("({}){op}", items.join(" "))
        } else {
            self.regex(d, 2)
        }
    }
}

/// A random valid fast-path specification for `program`: one or two
/// `fastpath` blocks over one to three processes that share channels, with
/// statements named by channel (aliased with `as`) or by `#N`, `start`
/// usually at the statement a process waits at (the head of its loop),
/// `follows` expressions with `* + | ?` and parentheses, optional `exit`s,
/// predicates, `<=>` partners and `yield`s.
pub fn spec(program: &Program, seed: u64) -> String {
    let mut rng = Rng::new(seed ^ 0xA5A5_5A5A_0F0F_F0F0);
    let np = program.processes.len();
    let names: Vec<Vec<Named>> = (0..np).map(|p| nameable(program, p)).collect();
    let usable: Vec<usize> = (0..np).filter(|&p| !names[p].is_empty()).collect();
    let mut text = String::new();
    let _ = writeln!(text, "// random specification, seed {seed}");
    if usable.is_empty() {
        return text;
    }
    let blocks = if rng.chance(20) { 2 } else { 1 };
    for b in 0..blocks {
        // A connected set of processes: those sharing a channel.
        let first = *rng.pick(&usable);
        let mut chosen = vec![first];
        let want = 1 + rng.below(3);
        while chosen.len() < want {
            let linked: Vec<usize> = usable
                .iter()
                .copied()
                .filter(|q| !chosen.contains(q))
                .filter(|&q| {
                    chosen.iter().any(|&p| {
                        names[p].iter().any(|n| {
                            n.chan.is_some_and(|(c, _)| {
                                names[q]
                                    .iter()
                                    .any(|m| m.chan.is_some_and(|(c2, _)| c2 == c))
                            })
                        })
                    })
                })
                .collect();
            if linked.is_empty() {
                break;
            }
            chosen.push(*rng.pick(&linked));
        }
        let mut sg = SpecGen {
            rng: rng.clone(),
            program,
            procs: chosen
                .iter()
                .map(|&p| ProcDraft {
                    p,
                    names: names[p].clone(),
                    listed: Vec::new(),
                })
                .collect(),
        };
        let mut fields: Vec<(String, Option<String>, Option<String>)> = Vec::new();
        for d in 0..sg.procs.len() {
            // The start: usually the first statement met (the loop head).
            let n = sg.procs[d].names.len();
            let head = sg.procs[d]
                .names
                .iter()
                .position(|x| x.chan.is_some())
                .unwrap_or(0);
            let start = if sg.rng.chance(70) {
                head
            } else {
                sg.rng.below(n)
            };
            let start_text = sg.element(d, start);
            let follows = if sg.rng.chance(75) {
                Some(sg.follows(d, start))
            } else {
                None
            };
            let exit = if sg.rng.chance(40) {
                let i = sg.rng.below(n);
                Some(sg.element(d, i))
            } else {
                None
            };
            fields.push((start_text, follows, exit));
        }
        // Sometimes list a statement the path does not follow: reaching it
        // aborts.
        for d in 0..sg.procs.len() {
            if sg.rng.chance(30) {
                let i = sg.rng.below(sg.procs[d].names.len());
                if !sg.procs[d].listed.contains(&i) {
                    sg.procs[d].listed.push(i);
                }
            }
        }
        let _ = writeln!(text, "fastpath F{b} {{");
        for (d, (start, follows, exit)) in fields.iter().enumerate() {
            let draft = &sg.procs[d];
            let _ = writeln!(text, "  process {} {{", program.processes[draft.p].name);
            let mut listed = draft.listed.clone();
            listed.sort_unstable();
            let stmts: Vec<String> = listed
                .iter()
                .map(|&i| {
                    let n = &draft.names[i];
                    match &n.alias {
                        Some(a) => format!("{} as {a}", n.text),
                        None => n.text.clone(),
                    }
                })
                .collect();
            let _ = writeln!(text, "    statement {};", stmts.join(", "));
            let _ = writeln!(text, "    start {start};");
            if let Some(f) = follows {
                let _ = writeln!(text, "    follows {f};");
            }
            if let Some(e) = exit {
                let _ = writeln!(text, "    exit {e};");
            }
            let _ = writeln!(text, "  }}");
        }
        let _ = writeln!(text, "}}");
        rng = sg.rng;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Comm;

    fn make(seed: u64, kind: Kind) -> (String, Program) {
        let src = program(
            seed,
            &GenOptions {
                kind,
                ..GenOptions::default()
            },
        );
        let p = crate::compile(&src).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}"));
        (src, p)
    }

    /// Per channel: the processes that read it and those that write it.
    fn users(p: &Program) -> Vec<(Vec<usize>, Vec<usize>)> {
        let mut u = vec![(Vec::new(), Vec::new()); p.channels.len()];
        for (i, proc) in p.processes.iter().enumerate() {
            for n in &proc.nodes {
                let ops: Vec<&Comm> = match &n.kind {
                    NodeKind::Comm { op, .. } => vec![op],
                    NodeKind::Alt { arms } => arms.iter().map(|a| &a.op).collect(),
                    _ => vec![],
                };
                for op in ops {
                    let (r, w) = &mut u[op.chan() as usize];
                    let l = if op.is_in() { r } else { w };
                    if !l.contains(&i) {
                        l.push(i);
                    }
                }
            }
        }
        u
    }

    #[test]
    fn the_same_seed_gives_the_same_program_and_specification() {
        for kind in [Kind::Kahn, Kind::Alt] {
            let (a, p) = make(7, kind);
            let (b, _) = make(7, kind);
            assert_eq!(a, b);
            assert_eq!(spec(&p, 7), spec(&p, 7));
            assert_ne!(a, make(8, kind).0);
        }
    }

    #[test]
    fn kahn_programs_have_no_alt_and_one_reader_and_one_writer_per_channel() {
        for seed in 0..200 {
            let (src, p) = make(seed, Kind::Kahn);
            assert!(!src.contains("alt"), "seed {seed}");
            for (c, (r, w)) in p.channels.iter().zip(users(&p)) {
                match c.kind {
                    ChanKind::Internal => {
                        assert!(r.len() == 1 && w.len() == 1, "seed {seed}: {}", c.name)
                    }
                    ChanKind::ExternalIn => {
                        assert!(r.len() == 1 && w.is_empty(), "seed {seed}: {}", c.name)
                    }
                    ChanKind::ExternalOut => {
                        assert!(w.len() == 1 && r.is_empty(), "seed {seed}: {}", c.name)
                    }
                }
            }
        }
    }

    #[test]
    fn alt_programs_have_alts_with_several_arms_and_shared_channels() {
        let (mut with_alt, mut out_alt, mut shared) = (0, 0, 0);
        for seed in 0..200 {
            let (_, p) = make(seed, Kind::Alt);
            let alts: Vec<&Vec<crate::ir::Arm>> = p
                .processes
                .iter()
                .flat_map(|q| &q.nodes)
                .filter_map(|n| match &n.kind {
                    NodeKind::Alt { arms } => Some(arms),
                    _ => None,
                })
                .collect();
            with_alt += !alts.is_empty() as usize;
            out_alt += alts.iter().any(|a| a.iter().all(|arm| !arm.op.is_in())) as usize;
            assert!(alts.iter().all(|a| a.len() >= 2), "seed {seed}");
            shared += users(&p).iter().any(|(_, w)| w.len() > 1) as usize;
        }
        assert!(with_alt >= 180, "{with_alt} of 200 have an alt");
        assert!(out_alt >= 20, "{out_alt} of 200 have an alt of outs");
        assert!(
            shared >= 20,
            "{shared} of 200 have a channel with two writers"
        );
    }

    #[test]
    fn programs_use_every_feature_the_fast_paths_care_about() {
        let mut all = String::new();
        for seed in 0..100 {
            all.push_str(&make(seed, if seed % 2 == 0 { Kind::Kahn } else { Kind::Alt }).0);
        }
        for feature in [
            "while (l0 <",
            "if (",
            "else",
            "break;",
            "assert(",
            "h1(",
            "h2(",
            "#1",
            "constant",
            "external in",
            "external out",
            "0x",
            "'",
        ] {
            assert!(all.contains(feature), "no {feature}");
        }
    }

    #[test]
    fn specifications_parse_and_use_every_construct() {
        let mut all = String::new();
        for seed in 0..200 {
            let (src, p) = make(seed, if seed % 2 == 0 { Kind::Kahn } else { Kind::Alt });
            let s = spec(&p, seed);
            crate::spec::parse(&s, &p).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{src}\n{s}"));
            all.push_str(&s);
        }
        for construct in [
            " as ", "start ", "follows ", "exit ", ")*", ")+", ")?", " | ", " ? (", " <=> ",
            " yield ", "#",
        ] {
            assert!(all.contains(construct), "no {construct}");
        }
    }

    #[test]
    fn inputs_are_whole_messages_on_external_in_channels() {
        let (_, p) = make(3, Kind::Alt);
        for (c, fields) in inputs(&p, 3, 5) {
            let ch = &p.channels[c as usize];
            assert_eq!(ch.kind, ChanKind::ExternalIn);
            assert_eq!(fields.len() % ch.arity as usize, 0);
            assert!(fields.len() <= 5 * ch.arity as usize);
        }
    }
}
