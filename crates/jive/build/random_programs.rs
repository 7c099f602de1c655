//! Random, verifiable Java programs for the differential test of the JIT
//! against the interpreter (`tests/jit.rs`).
//!
//! Each generated class `Rnnn` holds [`PROGRAMS`] programs, the static or
//! instance methods `int mK(int a, int b)`, beside helpers they call (with
//! `byte`/`short`/`boolean`/array parameters and results, recursion with and
//! without a guard, instance methods) and four natives the test binds
//! (`mix`, `peek`, `grab`, `poke`). Everything stays inside the JIVE subset
//! (`docs/jive.md`): `int`/`short`/`byte`/`boolean` and one-dimensional
//! arrays of them, static and instance fields, loops of every kind with
//! `break`/`continue` (labeled too), `if`/`else`, ternaries inside
//! expressions (values on the operand stack across branches), dense and
//! sparse `switch`es, narrowing casts and stores, compound assignments,
//! `++`/`--`, division and shifts with edge operands, array indices that are
//! often out of bounds, long right-nested expressions (deep operand stacks),
//! methods with many locals, and loops that run until the fuel is gone.
//!
//! The generator is deterministic: a fixed seed and an inline splitmix64, so
//! every build produces the same sources and a failure names a program that
//! anyone can look at (`$OUT_DIR/applets/random/src/Rnnn.java`).

use std::fmt::Write as _;

/// Number of generated classes.
pub const CLASSES: usize = 200;
/// Programs (`mK`) per class.
pub const PROGRAMS: usize = 52;
const SEED: u64 = 0x4a49_5645_2d4a_4954;

/// splitmix64 (Steele, Lea, Flood 2014): small, fast and good enough.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

const EDGES: &[i64] = &[
    127,
    128,
    -128,
    -129,
    255,
    256,
    32767,
    32768,
    -32768,
    -32769,
    65535,
    65536,
    31,
    32,
    33,
    63,
    64,
    -31,
    -32,
    -33,
    i32::MAX as i64,
    i32::MIN as i64,
    i32::MAX as i64 - 1,
    i32::MIN as i64 + 1,
    0x7f00_ff00,
    -0x5555_5556,
    1 << 30,
    -(1 << 30),
];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum P {
    Int,
    Short,
    Byte,
    Bool,
}

impl P {
    fn java(self) -> &'static str {
        match self {
            P::Int => "int",
            P::Short => "short",
            P::Byte => "byte",
            P::Bool => "boolean",
        }
    }
    fn numeric(self) -> bool {
        self != P::Bool
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ty {
    Prim(P),
    Arr(P),
}

impl Ty {
    fn java(self) -> String {
        match self {
            Ty::Prim(p) => p.java().to_string(),
            Ty::Arr(p) => format!("{}[]", p.java()),
        }
    }
}

#[derive(Clone, Debug)]
struct Var {
    name: String,
    ty: Ty,
    mutable: bool,
    /// A loop counter (preferred as an array index).
    counter: bool,
}

#[derive(Clone, Debug)]
struct Callee {
    name: String,
    params: Vec<Ty>,
    ret: Option<Ty>,
    is_static: bool,
    /// Recursive helpers take a depth first: callers usually mask it.
    recursive: bool,
}

/// An enclosing loop or switch, for `break` and `continue`.
struct Frame {
    label: Option<String>,
    is_loop: bool,
    /// `continue` would skip the loop's own step (a `while` whose counter
    /// moves at the end of the body): not generated, so that such loops end.
    no_continue: bool,
}

/// What a program leans towards, on top of the random statements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Plain,
    ManyLocals,
    Deep,
    SwitchLoop,
    Spin,
    Recursion,
    Arrays,
}

struct Gen<'r> {
    rng: &'r mut Rng,
    out: String,
    indent: usize,
    vars: Vec<Var>,
    callees: Vec<Callee>,
    is_static: bool,
    ret: Option<Ty>,
    frames: Vec<Frame>,
    budget: i32,
    names: usize,
    loop_depth: usize,
    nest: usize,
}

impl Gen<'_> {
    fn line(&mut self, s: &str) {
        for _ in 0..self.indent {
            self.out.push_str("    ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.names += 1;
        format!("{prefix}{}", self.names)
    }

    fn declare(&mut self, name: &str, ty: Ty, mutable: bool) {
        self.vars.push(Var {
            name: name.to_string(),
            ty,
            mutable,
            counter: false,
        });
    }

    fn vars_where(&self, f: impl Fn(&Var) -> bool) -> Vec<usize> {
        (0..self.vars.len()).filter(|&i| f(&self.vars[i])).collect()
    }

    fn pick_var(&mut self, f: impl Fn(&Var) -> bool) -> Option<Var> {
        let v = self.vars_where(f);
        if v.is_empty() {
            None
        } else {
            let i = self.rng.pick(&v);
            Some(self.vars[i].clone())
        }
    }

    // ---- expressions ----

    fn lit(&mut self) -> String {
        let v: i64 = match self.rng.below(100) {
            0..=39 => self.rng.range(0, 10),
            40..=54 => self.rng.range(-10, -1),
            55..=74 => self.rng.pick(EDGES),
            75..=89 => self.rng.range(-200, 300),
            _ => i64::from(self.rng.next() as i32),
        };
        lit(v)
    }

    fn int_leaf(&mut self) -> String {
        if self.rng.chance(30) {
            return self.lit();
        }
        match self.pick_var(|v| matches!(v.ty, Ty::Prim(p) if p.numeric())) {
            Some(v) => v.name,
            None => self.lit(),
        }
    }

    /// An `int`-valued expression (it may have type `byte` or `short`,
    /// which Java promotes).
    fn int_expr(&mut self, d: u32) -> String {
        if d == 0 || self.rng.chance(22) {
            return self.int_leaf();
        }
        let d1 = d - 1;
        match self.rng.below(100) {
            0..=33 => {
                let op = self.rng.pick(&[
                    "+", "+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", ">>>",
                ]);
                let l = self.int_expr(d1);
                let r = match op {
                    // Mostly nonzero divisors, so that programs go on.
                    "/" | "%" if self.rng.chance(65) => {
                        format!("({} | {})", self.int_expr(d1), self.rng.range(1, 9))
                    }
                    "/" | "%" if self.rng.chance(20) => lit(-1),
                    "<<" | ">>" | ">>>" if self.rng.chance(40) => {
                        lit(self.rng.pick(&[0, 1, 5, 16, 31, 32, 33, -1, -31, 63, 100]))
                    }
                    _ => self.int_expr(d1),
                };
                format!("({l} {op} {r})")
            }
            34..=38 => {
                let op = self.rng.pick(&["-", "~"]);
                format!("({op}{})", self.int_expr(d1))
            }
            39..=45 => {
                let t = self.rng.pick(&["byte", "short"]);
                format!("(({t}) {})", self.int_expr(d1))
            }
            46..=54 => {
                let c = self.bool_expr(d1);
                let a = self.int_expr(d1);
                let b = self.int_expr(d1);
                format!("({c} ? {a} : {b})")
            }
            55..=66 => {
                let p = self.rng.pick(&[P::Int, P::Int, P::Short, P::Byte, P::Bool]);
                let a = self.arr_expr(p, d1);
                let i = self.index(&a, d1);
                if p == P::Bool {
                    format!("({a}[{i}] ? {} : {})", self.int_leaf(), self.int_leaf())
                } else {
                    format!("{a}[{i}]")
                }
            }
            67..=69 => {
                let p = self.rng.pick(&[P::Int, P::Short, P::Byte, P::Bool]);
                format!("{}.length", self.arr_expr(p, d1))
            }
            70..=78 => self
                .call_expr(d1, |t| matches!(t, Some(Ty::Prim(p)) if p.numeric()))
                .unwrap_or_else(|| self.int_leaf()),
            79..=80 => {
                // An int[] result used at once.
                match self.call_expr(d1, |t| t == Some(Ty::Arr(P::Int))) {
                    Some(c) if self.rng.chance(50) => format!("{c}.length"),
                    Some(c) => format!("{c}[{}]", self.small_index(d1)),
                    None => self.int_leaf(),
                }
            }
            81..=89 => self.side_effect(d1).unwrap_or_else(|| self.int_leaf()),
            90..=92 => format!("mix({}, {})", self.int_expr(d1), self.int_expr(d1)),
            93..=94 => {
                let a = self.arr_expr(P::Int, d1);
                format!("peek({a}, {})", self.index(&a, d1))
            }
            _ => self.int_leaf(),
        }
    }

    /// `(v++)`, `(v += e)`, `(a[i] <<= e)`, `(v = e)`: an expression that
    /// also stores.
    fn side_effect(&mut self, d: u32) -> Option<String> {
        if self.rng.chance(70) {
            let v = self.pick_var(|v| v.mutable && matches!(v.ty, Ty::Prim(p) if p.numeric()))?;
            let Ty::Prim(p) = v.ty else { unreachable!() };
            Some(match self.rng.below(4) {
                0 => format!("({}{})", v.name, self.rng.pick(&["++", "--"])),
                1 => format!("({}{})", self.rng.pick(&["++", "--"]), v.name),
                2 => format!(
                    "({} {}= {})",
                    v.name,
                    self.rng.pick(COMPOUND),
                    self.int_expr(d)
                ),
                _ => format!("({} = {})", v.name, self.cast_to(p, d)),
            })
        } else {
            let p = self.rng.pick(&[P::Int, P::Short, P::Byte]);
            let a = self.arr_var(p)?;
            let i = self.index(&a, d);
            Some(match self.rng.below(3) {
                0 => format!("({a}[{i}]{})", self.rng.pick(&["++", "--"])),
                1 => format!("({}{a}[{i}])", self.rng.pick(&["++", "--"])),
                _ => format!(
                    "({a}[{i}] {}= {})",
                    self.rng.pick(COMPOUND),
                    self.int_expr(d)
                ),
            })
        }
    }

    /// An expression of type `p` (a cast where Java needs one).
    fn cast_to(&mut self, p: P, d: u32) -> String {
        match p {
            P::Int => self.int_expr(d),
            P::Short | P::Byte => format!("(({}) {})", p.java(), self.int_expr(d)),
            P::Bool => self.bool_expr(d),
        }
    }

    fn bool_expr(&mut self, d: u32) -> String {
        if d == 0 || self.rng.chance(15) {
            return self.bool_leaf();
        }
        let d1 = d - 1;
        match self.rng.below(100) {
            0..=44 => {
                let op = self.rng.pick(&["<", "<=", ">", ">=", "==", "!="]);
                format!("({} {op} {})", self.int_expr(d1), self.int_expr(d1))
            }
            45..=59 => {
                let op = self.rng.pick(&["&&", "||", "&", "|", "^", "==", "!="]);
                format!("({} {op} {})", self.bool_expr(d1), self.bool_expr(d1))
            }
            60..=64 => format!("(!{})", self.bool_expr(d1)),
            65..=69 => format!(
                "({} ? {} : {})",
                self.bool_expr(d1),
                self.bool_expr(d1),
                self.bool_expr(d1)
            ),
            70..=76 => self
                .call_expr(d1, |t| t == Some(Ty::Prim(P::Bool)))
                .unwrap_or_else(|| self.bool_leaf()),
            77..=80 => match self.pick_var(|v| v.mutable && v.ty == Ty::Prim(P::Bool)) {
                Some(v) => {
                    let op = self.rng.pick(&["", "&", "|", "^"]);
                    format!("({} {op}= {})", v.name, self.bool_expr(d1))
                }
                None => self.bool_leaf(),
            },
            81..=86 => format!("(({} & {}) == 0)", self.int_expr(d1), self.rng.range(1, 7)),
            _ => self.bool_leaf(),
        }
    }

    fn bool_leaf(&mut self) -> String {
        match self.rng.below(10) {
            0..=3 => match self.pick_var(|v| v.ty == Ty::Prim(P::Bool)) {
                Some(v) => v.name,
                None => format!("({} < {})", self.int_leaf(), self.int_leaf()),
            },
            4 => {
                let a = self.arr_expr(P::Bool, 0);
                let i = self.index(&a, 0);
                format!("{a}[{i}]")
            }
            5 => self.rng.pick(&["true", "false"]).to_string(),
            _ => {
                let op = self.rng.pick(&["<", ">", "==", "!=", ">=", "<="]);
                format!("({} {op} {})", self.int_leaf(), self.int_leaf())
            }
        }
    }

    /// A variable or field holding an array of `p`, usable as a store target.
    fn arr_var(&mut self, p: P) -> Option<String> {
        self.pick_var(|v| v.ty == Ty::Arr(p)).map(|v| v.name)
    }

    /// An array-valued expression with elements `p` (every class has a
    /// static array field of each type, so there is always one).
    fn arr_expr(&mut self, p: P, d: u32) -> String {
        let var = self
            .arr_var(p)
            .expect("every class has arrays of each type");
        match self.rng.below(100) {
            0..=79 => var,
            80..=89 => {
                let other = self.arr_var(p).unwrap();
                format!("({} ? {var} : {other})", self.bool_expr(d.min(1)))
            }
            90..=94 if p == P::Byte => format!("grab({})", self.array_size(d.min(1))),
            90..=94 if p == P::Int => self
                .call_expr(d.min(1), |t| t == Some(Ty::Arr(P::Int)))
                .unwrap_or(var),
            _ => format!(
                "(new {}[{}])",
                p.java(),
                self.rng.pick(&[0, 4, 8, 8, 9, 16])
            ),
        }
    }

    fn small_index(&mut self, d: u32) -> String {
        format!(
            "({} & {})",
            self.int_expr(d),
            self.rng.pick(&[0, 1, 3, 7, 7])
        )
    }

    /// An index into `arr`: usually in bounds, often not (negative, the
    /// length, the extremes).
    fn index(&mut self, arr: &str, d: u32) -> String {
        let simple = arr.chars().all(|c| c.is_ascii_alphanumeric());
        match self.rng.below(100) {
            0..=57 => self.small_index(d),
            58..=67 => match self.pick_var(|v| v.counter) {
                Some(v) => v.name,
                None => self.rng.range(0, 4).to_string(),
            },
            68..=71 => lit(self
                .rng
                .pick(&[-1, i64::from(i32::MIN), i64::from(i32::MAX), -2])),
            72..=73 if simple => format!("{arr}.length"),
            74..=77 if simple => format!("({arr}.length - {})", self.rng.range(1, 2)),
            78..=94 => self.rng.range(0, 5).to_string(),
            _ => self.int_expr(d),
        }
    }

    fn array_size(&mut self, d: u32) -> String {
        match self.rng.below(100) {
            // Mostly arrays that the small indices fit, some that they do not.
            0..=64 => self
                .rng
                .pick(&[0, 2, 5, 8, 8, 8, 10, 12, 16, 16, 16, 24, 32])
                .to_string(),
            65..=79 => format!("({} & 63)", self.int_expr(d)),
            80..=87 => format!("({} & 262143)", self.int_expr(d)),
            88..=93 => lit(self.rng.pick(&[-1, i64::from(i32::MIN), 300_000, 1 << 20])),
            _ => self.int_expr(d),
        }
    }

    /// A call to a callee whose return type satisfies `want`.
    fn call_expr(&mut self, d: u32, want: impl Fn(Option<Ty>) -> bool) -> Option<String> {
        let is_static = self.is_static;
        let cands: Vec<usize> = (0..self.callees.len())
            .filter(|&i| {
                let c = &self.callees[i];
                want(c.ret) && (c.is_static || !is_static)
            })
            .collect();
        if cands.is_empty() {
            return None;
        }
        let c = self.callees[self.rng.pick(&cands)].clone();
        Some(self.call(&c, d))
    }

    fn call(&mut self, c: &Callee, d: u32) -> String {
        let mut args = Vec::new();
        for (k, &t) in c.params.iter().enumerate() {
            args.push(match t {
                Ty::Prim(P::Int) if k == 0 && c.recursive => {
                    if self.rng.chance(85) {
                        format!(
                            "({} & {})",
                            self.int_expr(d),
                            self.rng.pick(&[3, 7, 15, 31])
                        )
                    } else {
                        self.int_expr(d)
                    }
                }
                Ty::Prim(p) => self.cast_to(p, d),
                Ty::Arr(p) => {
                    // A cast `(int[]) null` would be a checkcast; there is no
                    // overloading, so a bare null needs none.
                    if self.rng.chance(3) {
                        "null".to_string()
                    } else {
                        self.arr_expr(p, d)
                    }
                }
            });
        }
        let recv = if c.is_static || self.rng.chance(50) {
            ""
        } else {
            "this."
        };
        format!("{recv}{}({})", c.name, args.join(", "))
    }

    /// `(x0 op (x1 op (x2 op ...)))`: an operand stack as deep as the chain.
    fn chain(&mut self, n: usize) -> String {
        let mut s = String::new();
        let mut close = String::new();
        for k in 0..n {
            let leaf = if k % 5 == 4 {
                self.int_expr(1)
            } else {
                self.int_leaf()
            };
            if k + 1 == n {
                s.push_str(&leaf);
            } else {
                let op = self
                    .rng
                    .pick(&["+", "-", "*", "^", "&", "|", "+", "<<", ">>"]);
                let _ = write!(s, "({leaf} {op} ");
                close.push(')');
            }
        }
        s + &close
    }

    // ---- statements ----

    fn block(&mut self, max: usize) {
        let n = 1 + self.rng.below(max.max(1));
        let mark = self.vars.len();
        for _ in 0..n {
            if self.budget <= 0 {
                break;
            }
            self.stmt();
        }
        self.vars.truncate(mark);
    }

    fn braced(&mut self, head: &str, max: usize) {
        self.line(&format!("{head} {{"));
        self.indent += 1;
        self.nest += 1;
        self.block(max);
        self.nest -= 1;
        self.indent -= 1;
    }

    fn stmt(&mut self) {
        self.budget -= 1;
        let in_loop = self.frames.iter().any(|f| f.is_loop);
        let can_nest = self.nest < 5 && self.budget > 2;
        let can_loop = can_nest && self.loop_depth < 3;
        let r = self.rng.below(100);
        match r {
            0..=25 => self.assign(),
            26..=36 => self.decl(),
            37..=47 if can_nest => self.if_stmt(),
            48..=54 if can_loop => self.for_stmt(),
            55..=57 if can_loop => self.while_stmt(),
            58..=59 if can_loop => self.do_stmt(),
            60..=61 if can_loop => self.spin_stmt(),
            62..=68 if can_nest => self.switch_stmt(),
            69..=74 if in_loop => self.jump_stmt(),
            75..=77 => self.return_stmt(),
            78..=82 => self.array_assign(),
            83..=87 => self.call_stmt(),
            88..=89 if can_nest => {
                self.braced("", 3);
                self.line("}");
            }
            _ => self.assign(),
        }
    }

    fn assign(&mut self) {
        let d = self.rng.range(1, 3) as u32;
        if self.rng.chance(25) {
            // An array element.
            let p = self.rng.pick(&[P::Int, P::Int, P::Short, P::Byte, P::Bool]);
            let a = match self.arr_var(p) {
                Some(a) => a,
                None => return,
            };
            let i = self.index(&a, 1);
            let s = match (p, self.rng.below(4)) {
                (P::Bool, 0) => format!(
                    "{a}[{i}] {}= {};",
                    self.rng.pick(&["&", "|", "^"]),
                    self.bool_expr(d)
                ),
                (P::Bool, _) => format!("{a}[{i}] = {};", self.bool_expr(d)),
                (_, 0) => format!("{a}[{i}]{};", self.rng.pick(&["++", "--"])),
                (_, 1) => format!(
                    "{a}[{i}] {}= {};",
                    self.rng.pick(COMPOUND),
                    self.int_expr(d)
                ),
                _ => format!("{a}[{i}] = {};", self.cast_to(p, d)),
            };
            self.line(&s);
            return;
        }
        let Some(v) = self.pick_var(|v| v.mutable && matches!(v.ty, Ty::Prim(_))) else {
            return;
        };
        let Ty::Prim(p) = v.ty else { unreachable!() };
        let s = match (p, self.rng.below(5)) {
            (P::Bool, 0) => format!("{} = !{};", v.name, v.name),
            (P::Bool, 1) => format!(
                "{} {}= {};",
                v.name,
                self.rng.pick(&["&", "|", "^"]),
                self.bool_expr(d)
            ),
            (P::Bool, _) => format!("{} = {};", v.name, self.bool_expr(d)),
            (_, 0) => format!("{}{};", v.name, self.rng.pick(&["++", "--"])),
            (_, 1) => format!("{}{};", self.rng.pick(&["++", "--"]), v.name),
            (_, 2) => format!(
                "{} {}= {};",
                v.name,
                self.rng.pick(COMPOUND),
                self.int_expr(d)
            ),
            _ => format!("{} = {};", v.name, self.cast_to(p, d)),
        };
        self.line(&s);
    }

    fn decl(&mut self) {
        let d = self.rng.range(1, 3) as u32;
        let name = self.fresh("v");
        let (ty, init) = match self.rng.below(100) {
            0..=54 => (Ty::Prim(P::Int), self.int_expr(d)),
            55..=62 => (Ty::Prim(P::Short), self.cast_to(P::Short, d)),
            63..=70 => (Ty::Prim(P::Byte), self.cast_to(P::Byte, d)),
            71..=79 => (Ty::Prim(P::Bool), self.bool_expr(d)),
            _ => {
                let p = self.rng.pick(&[P::Int, P::Int, P::Short, P::Byte, P::Bool]);
                let init = if self.rng.chance(65) {
                    format!("new {}[{}]", p.java(), self.array_size(1))
                } else {
                    self.arr_expr(p, 1)
                };
                (Ty::Arr(p), init)
            }
        };
        self.line(&format!("{} {name} = {init};", ty.java()));
        self.declare(&name, ty, true);
    }

    fn if_stmt(&mut self) {
        let d = self.rng.range(1, 3) as u32;
        let c = self.bool_expr(d);
        self.braced(&format!("if ({c})"), 4);
        if self.rng.chance(45) {
            if self.rng.chance(30) && self.budget > 2 {
                let c2 = self.bool_expr(2);
                self.braced(&format!("}} else if ({c2})"), 3);
            }
            self.braced("} else", 3);
        }
        self.line("}");
    }

    fn loop_bound(&mut self) -> String {
        match self.rng.below(100) {
            0..=49 => self.rng.range(0, 12).to_string(),
            50..=69 => format!("({} & 15)", self.int_expr(1)),
            70..=77 => {
                let p = self.rng.pick(&[P::Int, P::Short, P::Byte, P::Bool]);
                let a = self.arr_var(p).unwrap();
                format!("{a}.length")
            }
            78..=89 => self.int_leaf(),
            _ => lit(self.rng.pick(&[100, 1000, 100_000, i64::from(i32::MAX)])),
        }
    }

    fn label(&mut self) -> Option<String> {
        if self.rng.chance(20) {
            Some(self.fresh("L"))
        } else {
            None
        }
    }

    fn loop_body(&mut self, head: &str, label: Option<String>, no_continue: bool, tail: &[String]) {
        let head = match &label {
            Some(l) => format!("{l}: {head}"),
            None => head.to_string(),
        };
        self.frames.push(Frame {
            label,
            is_loop: true,
            no_continue,
        });
        self.loop_depth += 1;
        self.line(&format!("{head} {{"));
        self.indent += 1;
        self.nest += 1;
        let mark = self.vars.len();
        self.block(5);
        self.vars.truncate(mark);
        for t in tail {
            self.line(t);
        }
        self.nest -= 1;
        self.indent -= 1;
        self.loop_depth -= 1;
        self.frames.pop();
    }

    fn counter(&mut self, name: &str) {
        let mutable = self.rng.chance(8);
        self.vars.push(Var {
            name: name.to_string(),
            ty: Ty::Prim(P::Int),
            mutable,
            counter: true,
        });
    }

    fn for_stmt(&mut self) {
        let i = self.fresh("i");
        let b = self.loop_bound();
        let mark = self.vars.len();
        let head = match self.rng.below(6) {
            0 | 1 => format!("for (int {i} = 0; {i} < {b}; {i}++)"),
            2 => format!("for (int {i} = {b}; {i} > 0; {i}--)"),
            3 => {
                let s = self.rng.range(2, 4);
                format!("for (int {i} = 0; {i} < {b}; {i} += {s})")
            }
            4 => format!("for (int {i} = 0; {i} != {b}; {i}++)"),
            _ => {
                let j = self.fresh("j");
                self.counter(&j);
                format!("for (int {i} = 0, {j} = {b}; {i} < {j}; {i}++, {j}--)")
            }
        };
        self.counter(&i);
        let label = self.label();
        self.loop_body(&head, label, false, &[]);
        self.vars.truncate(mark);
        self.line("}");
    }

    fn while_stmt(&mut self) {
        let w = self.fresh("w");
        let b = self.loop_bound();
        let label = self.label();
        match self.rng.below(3) {
            0 => {
                self.line(&format!("int {w} = 0;"));
                self.counter(&w);
                let step = format!("{w}++;");
                self.loop_body(&format!("while ({w} < {b})"), label, true, &[step]);
            }
            1 => {
                self.line(&format!("int {w} = {b};"));
                self.counter(&w);
                self.loop_body(&format!("while (--{w} >= 0)"), label, false, &[]);
            }
            _ => {
                self.line(&format!("int {w} = 0;"));
                self.counter(&w);
                self.loop_body(&format!("while ({w}++ < {b})"), label, false, &[]);
            }
        }
        self.line("}");
    }

    fn do_stmt(&mut self) {
        let w = self.fresh("d");
        let b = self.loop_bound();
        self.line(&format!("int {w} = 0;"));
        self.counter(&w);
        let label = self.label();
        self.loop_body("do", label, false, &[]);
        self.line(&format!("}} while (++{w} < {b});"));
    }

    /// `while (true)` or `for (;;)` that ends only at a `break`, which may
    /// never come: then the fuel runs out.
    fn spin_stmt(&mut self) {
        let c = self.fresh("c");
        self.line(&format!("int {c} = 0;"));
        self.counter(&c);
        let cond = if self.rng.chance(60) {
            let k = self.loop_bound();
            format!("(++{c} > {k})")
        } else {
            self.bool_expr(2)
        };
        let head = if self.rng.chance(50) {
            "while (true)"
        } else {
            "for (;;)"
        };
        let label = self.label();
        // The break is at the loop's own level (not inside a nested switch),
        // so the loop can complete and the code after it is reachable.
        self.loop_body(head, label, false, &[format!("if ({cond}) break;")]);
        self.line("}");
    }

    fn switch_stmt(&mut self) {
        let dense = self.rng.chance(55);
        let n = 1 + self.rng.below(8);
        let keys: Vec<i64> = if dense {
            let base = self.rng.pick(&[0, 0, 0, 1, -3, 10, 100, -50]);
            (0..n as i64).map(|k| base + k).collect()
        } else {
            let mut ks: Vec<i64> = Vec::new();
            while ks.len() < n {
                let k = match self.rng.below(3) {
                    0 => self.rng.range(-20, 20) * 7,
                    1 => self.rng.pick(EDGES),
                    _ => i64::from(self.rng.next() as i32),
                };
                if !ks.contains(&k) {
                    ks.push(k);
                }
            }
            ks
        };
        let sel = match self.rng.below(4) {
            0 if dense => format!("({} & 7)", self.int_expr(2)),
            1 if dense => format!("({} % 9)", self.int_expr(2)),
            // A byte or short selector would limit the case labels.
            _ => format!("((int) {})", self.int_expr(2)),
        };
        self.line(&format!("switch ({sel}) {{"));
        self.frames.push(Frame {
            label: None,
            is_loop: false,
            no_continue: false,
        });
        self.indent += 1;
        self.nest += 1;
        let mut k = 0;
        let default_at = if self.rng.chance(70) {
            Some(self.rng.below(n + 1))
        } else {
            None
        };
        while k <= n {
            let mut labels = Vec::new();
            if default_at == Some(k) {
                labels.push("default:".to_string());
            }
            if k < n {
                labels.push(format!("case {}:", lit(keys[k])));
                // Sometimes two labels share a body.
                if k + 1 < n && self.rng.chance(20) {
                    k += 1;
                    labels.push(format!("case {}:", lit(keys[k])));
                }
            }
            k += 1;
            if labels.is_empty() {
                continue;
            }
            self.braced(&labels.join(" "), 3);
            if self.rng.chance(75) {
                self.line("} break;");
            } else {
                self.line("}");
            }
        }
        self.nest -= 1;
        self.indent -= 1;
        self.frames.pop();
        self.line("}");
    }

    fn jump_stmt(&mut self) {
        let c = self.bool_expr(2);
        // Targets: the innermost loop (unlabeled continue), the innermost
        // breakable (unlabeled break), or any labeled enclosing loop.
        let mut options = Vec::new();
        if let Some(f) = self.frames.iter().rev().find(|f| f.is_loop)
            && !f.no_continue
        {
            options.push("continue;".to_string());
        }
        options.push("break;".to_string());
        for f in &self.frames {
            if let Some(l) = &f.label {
                options.push(format!("break {l};"));
                if !f.no_continue {
                    options.push(format!("continue {l};"));
                }
            }
        }
        let j = options[self.rng.below(options.len())].clone();
        self.line(&format!("if ({c}) {j}"));
    }

    fn ret_value(&mut self) -> Option<String> {
        let d = self.rng.range(1, 3) as u32;
        match self.ret {
            None => None,
            Some(Ty::Prim(p)) => Some(self.cast_to(p, d)),
            Some(Ty::Arr(p)) => Some(self.arr_expr(p, 1)),
        }
    }

    fn return_stmt(&mut self) {
        let c = self.bool_expr(2);
        match self.ret_value() {
            Some(v) => self.line(&format!("if ({c}) return {v};")),
            None => self.line(&format!("if ({c}) return;")),
        }
    }

    fn array_assign(&mut self) {
        let p = self.rng.pick(&[P::Int, P::Int, P::Short, P::Byte, P::Bool]);
        let Some(v) = self.pick_var(|v| v.mutable && v.ty == Ty::Arr(p)) else {
            return;
        };
        let rhs = match self.rng.below(100) {
            0..=49 => format!("new {}[{}]", p.java(), self.array_size(1)),
            50..=97 => self.arr_expr(p, 1),
            _ => "null".to_string(),
        };
        self.line(&format!("{} = {rhs};", v.name));
    }

    fn call_stmt(&mut self) {
        let d = self.rng.range(1, 2) as u32;
        let s = match self.rng.below(10) {
            0 => format!("mix({}, {})", self.int_expr(d), self.int_expr(d)),
            1 => {
                // A native that writes an array the method may be holding.
                let a = self.arr_expr(P::Byte, 1);
                let i = self.index(&a, 1);
                format!("poke({a}, {i}, {})", self.int_expr(d))
            }
            _ => match self.call_expr(d, |_| true) {
                Some(c) => c,
                None => return,
            },
        };
        self.line(&format!("{s};"));
    }
}

const COMPOUND: &[&str] = &["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", ">>>"];

fn lit(v: i64) -> String {
    if v < 0 {
        format!("({v})")
    } else {
        v.to_string()
    }
}

/// One class's fields, as variables of its methods.
fn fields(rng: &mut Rng, src: &mut String) -> (Vec<Var>, Vec<Var>) {
    let mut statics = Vec::new();
    let mut instance = Vec::new();
    let field = |list: &mut Vec<Var>, name: String, ty: Ty| {
        list.push(Var {
            name,
            ty,
            mutable: true,
            counter: false,
        });
    };
    for k in 0..4 {
        let init = lit(if rng.chance(50) {
            rng.range(-5, 50)
        } else {
            rng.pick(EDGES)
        });
        let _ = writeln!(src, "    static int s{k} = {init};");
        field(&mut statics, format!("s{k}"), Ty::Prim(P::Int));
    }
    let _ = writeln!(src, "    static short ss0 = {};", lit(rng.range(-300, 300)));
    let _ = writeln!(src, "    static byte sb0 = {};", lit(rng.range(-128, 127)));
    let _ = writeln!(src, "    static boolean sz0 = {};", rng.chance(50));
    field(&mut statics, "ss0".into(), Ty::Prim(P::Short));
    field(&mut statics, "sb0".into(), Ty::Prim(P::Byte));
    field(&mut statics, "sz0".into(), Ty::Prim(P::Bool));
    let arrays = [
        ("ia0", P::Int),
        ("ia1", P::Int),
        ("sa0", P::Short),
        ("ba0", P::Byte),
        ("za0", P::Bool),
    ];
    let mut filled = Vec::new();
    for (name, p) in arrays {
        if rng.chance(4) {
            // null until a program stores one: NullPointer traps.
            let _ = writeln!(src, "    static {}[] {name};", p.java());
        } else {
            let n = rng.pick(&[1, 3, 5, 8, 8, 8, 9, 12, 16, 16, 16, 16, 33, 64]);
            let _ = writeln!(
                src,
                "    static {}[] {name} = new {}[{n}];",
                p.java(),
                p.java()
            );
            filled.push((name, p));
        }
        field(&mut statics, name.into(), Ty::Arr(p));
    }
    // Instance fields, set by the constructor.
    let _ = writeln!(
        src,
        "    int f0;\n    int f1;\n    short fs0;\n    byte fb0;\n    boolean fz0;\n    int[] fia0;\n    byte[] fba0;"
    );
    for (name, ty) in [
        ("f0", Ty::Prim(P::Int)),
        ("f1", Ty::Prim(P::Int)),
        ("fs0", Ty::Prim(P::Short)),
        ("fb0", Ty::Prim(P::Byte)),
        ("fz0", Ty::Prim(P::Bool)),
        ("fia0", Ty::Arr(P::Int)),
        ("fba0", Ty::Arr(P::Byte)),
    ] {
        field(&mut instance, name.into(), ty);
    }
    // <clinit> fills the arrays.
    src.push_str("    static {\n");
    for (name, p) in filled {
        let k = rng.range(1, 99);
        let c = rng.range(-50, 50);
        let v = match p {
            P::Int => format!("i * {k} + {}", lit(c)),
            P::Short => format!("(short) (i * {k} * 311)"),
            P::Byte => format!("(byte) (i * {k} + {})", lit(c)),
            P::Bool => format!("(i & {}) == 0", rng.range(1, 3)),
        };
        let _ = writeln!(
            src,
            "        for (int i = 0; i < {name}.length; i++) {name}[i] = {v};"
        );
    }
    src.push_str("    }\n");
    let _ = writeln!(
        src,
        "    Rctor() {{\n        f0 = {};\n        f1 = s0 + {};\n        fs0 = (short) {};\n        fz0 = {};\n        fia0 = new int[{}];\n        fba0 = new byte[{}];\n    }}",
        lit(rng.range(-9, 99)),
        lit(rng.range(-9, 9)),
        lit(rng.range(-999, 999)),
        rng.chance(50),
        rng.range(0, 10),
        rng.range(1, 20),
    );
    (statics, instance)
}

/// Emits one method: signature, optional fixed prologue, random body, and a
/// final return that mixes the locals still in scope.
#[allow(clippy::too_many_arguments)]
fn method(
    rng: &mut Rng,
    src: &mut String,
    sig: &Callee,
    param_names: &[&str],
    statics: &[Var],
    instance: &[Var],
    callees: &[Callee],
    budget: i32,
    shape: Shape,
) {
    let mut g = Gen {
        rng,
        out: String::new(),
        indent: 2,
        vars: statics.to_vec(),
        callees: callees.to_vec(),
        is_static: sig.is_static,
        ret: sig.ret,
        frames: Vec::new(),
        budget,
        names: 0,
        loop_depth: 0,
        nest: 0,
    };
    if !sig.is_static {
        g.vars.extend(instance.iter().cloned());
    }
    for (n, &t) in param_names.iter().zip(&sig.params) {
        g.declare(n, t, true);
    }
    match shape {
        Shape::ManyLocals => {
            for _ in 0..g.rng.range(13, 30) {
                let name = g.fresh("v");
                let e = g.int_expr(1);
                g.line(&format!("int {name} = {e};"));
                g.declare(&name, Ty::Prim(P::Int), true);
            }
        }
        Shape::Deep => {
            for _ in 0..g.rng.range(1, 3) {
                let name = g.fresh("v");
                let n = g.rng.range(8, 40) as usize;
                let e = g.chain(n);
                g.line(&format!("int {name} = {e};"));
                g.declare(&name, Ty::Prim(P::Int), true);
            }
        }
        Shape::SwitchLoop => {
            g.budget -= 1;
            g.for_stmt_with_switch();
        }
        Shape::Spin => {
            g.budget -= 1;
            g.spin_stmt();
        }
        Shape::Recursion => {
            for _ in 0..2 {
                let name = g.fresh("v");
                let e = g
                    .call_expr(1, |t| t == Some(Ty::Prim(P::Int)))
                    .unwrap_or_else(|| "0".into());
                g.line(&format!("int {name} = {e};"));
                g.declare(&name, Ty::Prim(P::Int), true);
            }
        }
        Shape::Arrays => {
            for p in [P::Int, P::Byte, P::Short, P::Bool] {
                let name = g.fresh("v");
                let n = g.array_size(1);
                g.line(&format!("{}[] {name} = new {}[{n}];", p.java(), p.java()));
                g.declare(&name, Ty::Arr(p), true);
            }
        }
        Shape::Plain => {}
    }
    while g.budget > 0 {
        g.stmt();
    }
    match sig.ret {
        None => {}
        Some(Ty::Prim(P::Int)) => {
            // Mix what is in scope, so that every local's value shows.
            let locals: Vec<String> = g
                .vars
                .iter()
                .skip(statics.len())
                .filter(|v| matches!(v.ty, Ty::Prim(p) if p.numeric()))
                .map(|v| v.name.clone())
                .collect();
            let mut e = g.int_expr(2);
            for l in locals.iter().rev().take(8) {
                e = format!("({e} * 31 + {l})");
            }
            g.line(&format!("return {e};"));
        }
        Some(_) => {
            let v = g.ret_value().unwrap();
            g.line(&format!("return {v};"));
        }
    }
    let body = g.out;
    let stat = if sig.is_static { "static " } else { "" };
    let ret = sig.ret.map_or("void".to_string(), Ty::java);
    let params: Vec<String> = sig
        .params
        .iter()
        .zip(param_names)
        .map(|(t, n)| format!("{} {n}", t.java()))
        .collect();
    let _ = writeln!(
        src,
        "    {stat}{ret} {}({}) {{",
        sig.name,
        params.join(", ")
    );
    src.push_str(&body);
    src.push_str("    }\n");
}

impl Gen<'_> {
    /// A counted loop around a switch: a switch charges fuel on every
    /// iteration, and its cases jump out of and back into the loop.
    fn for_stmt_with_switch(&mut self) {
        let i = self.fresh("i");
        let b = self.loop_bound();
        let mark = self.vars.len();
        self.counter(&i);
        let label = self.label();
        let head = format!("for (int {i} = 0; {i} < {b}; {i}++)");
        let head = match &label {
            Some(l) => format!("{l}: {head}"),
            None => head,
        };
        self.frames.push(Frame {
            label,
            is_loop: true,
            no_continue: false,
        });
        self.loop_depth += 1;
        self.line(&format!("{head} {{"));
        self.indent += 1;
        self.nest += 1;
        self.switch_stmt();
        if self.rng.chance(50) {
            self.stmt();
        }
        self.nest -= 1;
        self.indent -= 1;
        self.loop_depth -= 1;
        self.frames.pop();
        self.vars.truncate(mark);
        self.line("}");
    }
}

fn sig(name: &str, params: &[Ty], ret: Option<Ty>, is_static: bool, recursive: bool) -> Callee {
    Callee {
        name: name.into(),
        params: params.to_vec(),
        ret,
        is_static,
        recursive,
    }
}

/// The source of class `Rnnn` (its name and text).
pub fn class(index: usize) -> (String, String) {
    let name = format!("R{index:03}");
    let mut rng = Rng(SEED ^ (index as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut src = String::new();
    let _ = writeln!(
        src,
        "// Generated by crates/jive/build/random_programs.rs (class {index}): do not edit.\npublic class {name} {{"
    );
    let (statics, instance) = fields(&mut rng, &mut src);
    let src_ctor = src.replace("Rctor()", &format!("{name}()"));
    src = src_ctor;
    src.push_str("    static native int mix(int x, int y);\n");
    src.push_str("    static native int peek(int[] a, int i);\n");
    src.push_str("    static native byte[] grab(int n);\n");
    src.push_str("    static native void poke(byte[] a, int i, int v);\n");
    src.push_str("    static int depth;\n");

    let int = Ty::Prim(P::Int);
    let mut callees = Vec::new();
    // Recursion: guarded by its first argument, unguarded (deep → call
    // depth trap), mutual, and guarded by a static depth counter that a trap
    // leaves raised (state that persists between invocations).
    let r = [
        sig("r0", &[int, int], Some(int), true, true),
        sig("r1", &[int], Some(int), true, true),
        sig("r2", &[int], Some(int), true, true),
        sig("r3", &[int], Some(int), true, true),
        sig("rd", &[int], Some(int), true, false),
    ];
    let k = rng.range(2, 9);
    let _ = writeln!(
        src,
        "    static int r0(int n, int x) {{\n        if (n <= 0) return x;\n        return {};\n    }}",
        if rng.chance(30) {
            format!("r0(n - 1, x + {k}) + r0(n - 2, x ^ n)")
        } else {
            format!("r0(n - 1, x * {k} + n) ^ n")
        }
    );
    src.push_str("    static int r1(int n) {\n        if (n == 0) return 1;\n        return r1(n - 1) + n;\n    }\n");
    src.push_str("    static int r2(int n) {\n        if (n <= 0) return 0;\n        return r3(n - 1) + 1;\n    }\n");
    src.push_str("    static int r3(int n) {\n        if (n <= 0) return 1;\n        return r2(n / 2) * 2 + r2(n - 2);\n    }\n");
    let _ = writeln!(
        src,
        "    static int rd(int x) {{\n        if (depth > {}) return x;\n        depth++;\n        int y = rd(x + 1) * 3 + ia0[x & 3];\n        depth--;\n        return y;\n    }}",
        rng.range(3, 40)
    );
    callees.extend(r);

    // Helpers with every parameter and result type; each may call the ones
    // before it.
    let byte = Ty::Prim(P::Byte);
    let short = Ty::Prim(P::Short);
    let boolean = Ty::Prim(P::Bool);
    let helpers: Vec<(Callee, Vec<&str>)> = vec![
        (sig("h0", &[int], Some(int), true, false), vec!["x"]),
        (
            sig("h1", &[int, int, int], Some(int), true, false),
            vec!["x", "y", "z"],
        ),
        (
            sig("h2", &[byte, short], Some(short), true, false),
            vec!["x", "y"],
        ),
        (
            sig("h3", &[int, boolean], Some(boolean), true, false),
            vec!["x", "z"],
        ),
        (sig("h4", &[int], None, true, false), vec!["x"]),
        (
            sig("h5", &[Ty::Arr(P::Int), int], Some(int), true, false),
            vec!["arr", "x"],
        ),
        (
            sig("h6", &[int], Some(Ty::Arr(P::Int)), true, false),
            vec!["x"],
        ),
        (
            sig(
                "h7",
                &[int, byte, int, short, int, boolean],
                Some(byte),
                true,
                false,
            ),
            vec!["x", "y", "z", "u", "w", "t"],
        ),
        (
            sig(
                "h8",
                &[Ty::Arr(P::Byte), Ty::Arr(P::Bool)],
                Some(int),
                true,
                false,
            ),
            vec!["bs", "zs"],
        ),
        // More arguments than a native calling convention passes in registers.
        (
            sig(
                "h9",
                &[int, int, int, byte, int, short, int, int, boolean, int],
                Some(int),
                true,
                false,
            ),
            vec!["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"],
        ),
        (sig("ih0", &[int], Some(int), false, false), vec!["x"]),
        (sig("ih1", &[int, int], None, false, false), vec!["x", "y"]),
        (
            sig(
                "ih2",
                &[int, short, int, int, byte, int, int],
                Some(short),
                false,
                false,
            ),
            vec!["x", "y", "z", "u", "w", "t", "v"],
        ),
    ];
    for (h, names) in &helpers {
        let budget = rng.range(2, 7) as i32;
        method(
            &mut rng,
            &mut src,
            h,
            names,
            &statics,
            &instance,
            &callees,
            budget,
            Shape::Plain,
        );
        callees.push(h.clone());
    }

    // The programs.
    let mut programs: Vec<Callee> = Vec::new();
    for k in 0..PROGRAMS {
        let is_static = !rng.chance(20);
        let s = sig(&format!("m{k}"), &[int, int], Some(int), is_static, false);
        let shape = match rng.below(100) {
            0..=54 => Shape::Plain,
            55..=63 => Shape::ManyLocals,
            64..=71 => Shape::Deep,
            72..=80 => Shape::SwitchLoop,
            81..=85 => Shape::Spin,
            86..=92 => Shape::Recursion,
            _ => Shape::Arrays,
        };
        let budget = rng.range(6, 26) as i32;
        // Earlier programs are callable too, rarely.
        let mut cs = callees.clone();
        if k > 0 && rng.chance(15) {
            cs.push(programs[rng.below(k)].clone());
        }
        method(
            &mut rng,
            &mut src,
            &s,
            &["a", "b"],
            &statics,
            &instance,
            &cs,
            budget,
            shape,
        );
        programs.push(s);
    }
    src.push_str("}\n");
    (name, src)
}
