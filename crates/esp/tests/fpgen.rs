//! Fast-path code generation and optimization, read as a specification:
//! a compiled graph does what the graph interpreter (`fp::run`) does, and
//! an optimized graph does what the graph did, on every external channel,
//! every host call, every `Leave` and every variable live where it leaves.
//!
//! Most graphs here are random (the generator below builds graphs of the
//! shape symbolic execution produces: assignments, branches, inline channel
//! operations, host calls, repetition counters on the back edges, leaves
//! at valid program counters), so every instruction, register-pressure case
//! and slow path of the code generator is exercised; the rest are the
//! graphs extracted from real programs.

use std::ffi::c_void;

use esp::abi::{Ctx, InPort, OutPort};
use esp::fp::{self, Block, Graph, Inst, Kind, Leave, Term};
use esp::fpgen;
use esp::ir::{BinOp, ChanKind, Expr, Layout, Operand, Program, UnOp};
use esp::opt::{self, Liveness};

// -- A small deterministic random generator -------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

// -- The program the random graphs run against ----------------------------------------------

/// Processes with loops and branches, so that liveness differs from pc to
/// pc; external channels of arity 1 and 2 each way; two host functions.
const PROGRAM: &str = r#"
channel inA(int) external in;
channel inB(int, int) external in;
channel outA(int) external out;
channel outB(int, int) external out;
channel link(int, int);
extern mix(int, int);
extern tick(int);

process P {
  var a, b, c, d, e;
  while (true) {
    in(inA, a);
    b = a + c;
    #1
    if (b > 3) {
      out(outA, b);
      e = e + 1;
    } else {
      in(inB, c, d);
    }
    d = d + e;
    out(link, d, a);
  }
}

process Q {
  var x, y, z, w;
  while (true) {
    in(link, x, y);
    #2
    z = z ^ x;
    if (x < y) { w = y; } else { w = mix(x, z); }
    out(outB, w, z);
  }
}

process R {
  var r0, r1, r2, r3, r4, r5, r6, r7;
  while (true) {
    in(inB, r0, r1);
    r2 = r0 * r1 + r2;
    r3 = r3 + r2;
    r4 = tick(r4);
    r5 = r5 - r0; r6 = r6 | r1; r7 = r7 + 1;
    out(outA, r2 + r3 + r4 + r5 + r6 + r7);
  }
}
"#;

fn program() -> Program {
    esp::compile(PROGRAM).expect("the test program compiles")
}

// -- Random graphs ------------------------------------------------------------------------------

const CONSTS: [i64; 14] = [
    0,
    1,
    -1,
    2,
    3,
    7,
    8,
    63,
    64,
    255,
    0xFFFF_FFFF,
    0xEDB8_8320,
    i64::MIN,
    i64::MAX,
];

struct GraphGen<'a> {
    r: Rng,
    program: &'a Program,
    slots: u32,
    locals: u32,
}

impl GraphGen<'_> {
    fn slot(&mut self) -> u32 {
        // Locals are read only where they were written (see `graph`).
        self.r.below(self.slots as u64) as u32
    }

    fn any_slot(&mut self) -> u32 {
        self.r.below((self.slots + self.locals) as u64) as u32
    }

    fn leaf(&mut self, locals_ok: bool) -> Expr {
        if self.r.chance(45) {
            Expr::Const(if self.r.chance(70) {
                *self.r.pick(&CONSTS)
            } else {
                self.r.next() as i64 >> self.r.below(64)
            })
        } else if locals_ok && self.locals > 0 && self.r.chance(30) {
            Expr::Var(self.slots + self.r.below(self.locals as u64) as u32)
        } else {
            Expr::Var(self.slot())
        }
    }

    fn expr(&mut self, depth: u32, locals_ok: bool) -> Expr {
        if depth == 0 || self.r.chance(25) {
            return self.leaf(locals_ok);
        }
        let sub = |g: &mut Self| Box::new(g.expr(depth - 1, locals_ok));
        match self.r.below(12) {
            0 => {
                let op = *self.r.pick(&[UnOp::Neg, UnOp::Not, UnOp::BitNot]);
                Expr::Unary(op, sub(self))
            }
            1 => Expr::And(sub(self), sub(self)),
            2 => Expr::Or(sub(self), sub(self)),
            3 if self.r.chance(30) => {
                let f = self.r.below(self.program.externs.len() as u64) as u32;
                let n = self.program.externs[f as usize].arity;
                Expr::Call(f, (0..n).map(|_| self.expr(depth - 1, locals_ok)).collect())
            }
            4 => {
                // A division that cannot divide by zero: a nonzero constant
                // or `x | 1`.
                let op = *self.r.pick(&[BinOp::Div, BinOp::Rem]);
                let d = if self.r.chance(50) {
                    Expr::Const(*self.r.pick(&[1, -1, 3, -7, 256, i64::MIN]))
                } else {
                    Expr::Binary(BinOp::BitOr, sub(self), Box::new(Expr::Const(1)))
                };
                Expr::Binary(op, sub(self), Box::new(d))
            }
            5 => {
                // The selection shape of opt::select.
                let c = self.expr(depth - 1, locals_ok);
                let c = Expr::Binary(BinOp::Ne, Box::new(c), Box::new(Expr::Const(0)));
                let a = self.pure_expr(depth - 1, locals_ok);
                let b = self.pure_expr(depth - 1, locals_ok);
                opt::select(c, a, b)
            }
            6 if self.r.chance(50) => {
                // The mask idiom `base op (k & -bit)`, with `bit` 0 or 1,
                // the operands of `op` and of `&` in either order.
                let op = *self.r.pick(&[BinOp::BitXor, BinOp::BitOr, BinOp::Add]);
                let bit = if self.r.chance(50) {
                    Expr::Binary(BinOp::BitAnd, sub(self), Box::new(Expr::Const(1)))
                } else {
                    Expr::Binary(BinOp::Lt, sub(self), sub(self))
                };
                let neg = Expr::Unary(UnOp::Neg, Box::new(bit));
                let k = self.pure_expr(0, locals_ok);
                let mask = if self.r.chance(50) {
                    Expr::Binary(BinOp::BitAnd, Box::new(k), Box::new(neg))
                } else {
                    Expr::Binary(BinOp::BitAnd, Box::new(neg), Box::new(k))
                };
                let base = self.pure_expr(depth - 1, locals_ok);
                if self.r.chance(50) {
                    Expr::Binary(op, Box::new(base), Box::new(mask))
                } else {
                    Expr::Binary(op, Box::new(mask), Box::new(base))
                }
            }
            _ => {
                let op = *self.r.pick(&[
                    BinOp::Add,
                    BinOp::Sub,
                    BinOp::Mul,
                    BinOp::Shl,
                    BinOp::Shr,
                    BinOp::BitAnd,
                    BinOp::BitOr,
                    BinOp::BitXor,
                    BinOp::Eq,
                    BinOp::Ne,
                    BinOp::Lt,
                    BinOp::Le,
                    BinOp::Gt,
                    BinOp::Ge,
                ]);
                Expr::Binary(op, sub(self), sub(self))
            }
        }
    }

    fn pure_expr(&mut self, depth: u32, locals_ok: bool) -> Expr {
        loop {
            let e = self.expr(depth, locals_ok);
            if opt::pure(&e) {
                return e;
            }
        }
    }

    fn leave(&mut self) -> Term {
        // Every leave stores every process's pc, so that the comparison
        // below knows which variables are live.
        let pcs = self
            .program
            .processes
            .iter()
            .enumerate()
            .map(|(p, pr)| (p as u32, self.r.below(pr.nodes.len() as u64) as u32))
            .collect();
        let why = match self.r.below(3) {
            0 => Leave::Exit,
            1 => Leave::Abort,
            _ => Leave::Suspend {
                resume: self.r.below(3) as u32,
            },
        };
        Term::Leave { pcs, why }
    }

    /// A graph of `n` blocks: every edge goes forward except the `next`
    /// edge of a `Count`, which may go anywhere, so every loop passes a
    /// counter and every run ends.
    fn graph(&mut self, n: usize) -> Graph {
        let ins: Vec<u32> = chans(self.program, ChanKind::ExternalIn);
        let outs: Vec<u32> = chans(self.program, ChanKind::ExternalOut);
        let ncounters = 1 + self.r.below(3) as usize;
        let counters: Vec<u64> = (0..ncounters).map(|_| self.r.below(6)).collect();
        let entries: Vec<u32> = {
            let mut e = vec![0];
            if n > 3 && self.r.chance(40) {
                e.push(1 + self.r.below(n as u64 / 2) as u32);
            }
            e
        };
        let mut blocks = Vec::with_capacity(n);
        for i in 0..n {
            let mut insts = Vec::new();
            // Locals are written at every entry before anything reads them.
            let entry = entries.contains(&(i as u32));
            if entry {
                for k in 0..self.locals {
                    let value = self.expr(2, false);
                    insts.push(Inst::Assign {
                        slot: self.slots + k,
                        value,
                    });
                }
            }
            let locals_ok = entry || i > 0;
            for _ in 0..self.r.below(5) {
                if self.r.chance(8) {
                    let f = self.r.below(self.program.externs.len() as u64) as u32;
                    let k = self.program.externs[f as usize].arity;
                    let args = (0..k).map(|_| self.expr(2, locals_ok)).collect();
                    insts.push(Inst::Eval(Expr::Call(f, args)));
                } else {
                    let slot = if locals_ok {
                        self.any_slot()
                    } else {
                        self.slot()
                    };
                    let value = self.expr(3, locals_ok);
                    insts.push(Inst::Assign { slot, value });
                }
            }
            let fwd = |g: &mut Self| (i + 1 + g.r.below((n - i - 1) as u64) as usize) as u32;
            let last = i + 1 == n;
            let term = if last || (i > 0 && self.r.chance(12)) {
                self.leave()
            } else {
                match self.r.below(6) {
                    0 => Term::Jump(fwd(self)),
                    1 | 2 => Term::Branch {
                        cond: self.expr(3, locals_ok),
                        then: fwd(self),
                        els: fwd(self),
                    },
                    3 => {
                        let chan = *self.r.pick(&ins);
                        let arity = self.program.channels[chan as usize].arity;
                        Term::Recv {
                            chan,
                            slots: (0..arity).map(|_| self.slot()).collect(),
                            got: fwd(self),
                            empty: fwd(self),
                        }
                    }
                    4 => {
                        let chan = *self.r.pick(&outs);
                        let arity = self.program.channels[chan as usize].arity;
                        Term::Send {
                            chan,
                            args: (0..arity)
                                .map(|_| {
                                    if self.r.chance(30) {
                                        Operand::Const(*self.r.pick(&CONSTS))
                                    } else {
                                        Operand::Var(self.slot())
                                    }
                                })
                                .collect(),
                            next: fwd(self),
                        }
                    }
                    _ => Term::Count {
                        counter: self.r.below(ncounters as u64) as u32,
                        // A back edge to a block that is not an entry (locals
                        // stay written) or forward.
                        next: if self.r.chance(60) {
                            1 + self.r.below(i as u64 + 1) as u32
                        } else {
                            fwd(self)
                        },
                        over: fwd(self),
                    },
                }
            };
            blocks.push(Block {
                insts,
                term,
                note: String::new(),
            });
        }
        Graph {
            name: "random".into(),
            kind: Kind::FastPath {
                nondeterministic: false,
            },
            procs: (0..self.program.processes.len() as u32).collect(),
            blocks,
            entries,
            counters,
            locals: self.locals,
            states: n,
        }
    }
}

fn chans(program: &Program, kind: ChanKind) -> Vec<u32> {
    program
        .channels
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind == kind)
        .map(|(i, _)| i as u32)
        .collect()
}

// -- The host: queues, a call log, and the native ports ------------------------------------------

/// What a run did that anyone could observe.
#[derive(Debug, Clone, PartialEq)]
struct Observed {
    leave: Leave,
    pcs: Vec<u32>,
    /// Per external-out channel, the flat fields sent.
    sent: Vec<Vec<i64>>,
    /// Per external-in channel, how many fields were taken.
    taken: Vec<usize>,
    calls: Vec<(u32, Vec<i64>)>,
    vars: Vec<i64>,
}

/// The host functions: deterministic in their arguments and the number of
/// earlier calls.
fn host_fn(f: u32, args: &[i64], n: usize) -> i64 {
    let mut h = 0x1234_5678_9ABC_DEF0u64 ^ f as u64 ^ (n as u64).wrapping_mul(31);
    for &a in args {
        h = (h ^ a as u64).wrapping_mul(0x100_0000_01B3);
    }
    h as i64 >> (n % 7)
}

struct Host<'a> {
    program: &'a Program,
    /// Per channel: the fields offered, and how many were taken.
    input: Vec<Vec<i64>>,
    taken: Vec<usize>,
    sent: Vec<Vec<i64>>,
    calls: Vec<(u32, Vec<i64>)>,
}

impl<'a> Host<'a> {
    fn new(program: &'a Program, input: Vec<Vec<i64>>) -> Self {
        let n = program.channels.len();
        Host {
            program,
            input,
            taken: vec![0; n],
            sent: vec![Vec::new(); n],
            calls: Vec::new(),
        }
    }
}

impl fp::Io for Host<'_> {
    fn recv(&mut self, chan: u32, dst: &mut [i64]) -> bool {
        let (q, at) = (&self.input[chan as usize], self.taken[chan as usize]);
        if at + dst.len() > q.len() {
            return false;
        }
        dst.copy_from_slice(&q[at..at + dst.len()]);
        self.taken[chan as usize] += dst.len();
        true
    }
    fn send(&mut self, chan: u32, src: &[i64]) {
        self.sent[chan as usize].extend_from_slice(src);
    }
    fn call(&mut self, f: u32, args: &[i64]) -> i64 {
        let v = host_fn(f, args, self.calls.len());
        self.calls.push((f, args.to_vec()));
        v
    }
}

/// How the native run's ports are set up.
#[derive(Copy, Clone, Debug)]
enum Ports {
    /// Always empty / full: every receive and send goes through the callbacks.
    Callbacks,
    /// A window of a few messages at a time, refilled by the callbacks.
    Windows,
}

/// The native side of [`Host`]: ports over windows of the queues.
struct NativeHost<'a> {
    host: Host<'a>,
    ports: Ports,
    ins: Vec<InPort>,
    outs: Vec<OutPort>,
    /// Per out channel, the buffer its port writes into.
    out_bufs: Vec<Vec<i64>>,
}

impl NativeHost<'_> {
    /// Refills in port `c` with up to three messages after what was taken.
    fn refill_in(&mut self, c: usize) {
        let arity = self.host.program.channels[c].arity as usize;
        let q = &self.host.input[c];
        let at = self.host.taken[c];
        let avail = (q.len() - at) / arity.max(1) * arity;
        let n = avail.min(3 * arity);
        // SAFETY: at + n <= q.len(): a range inside the queue's buffer.
        let next = unsafe { q.as_ptr().add(at) };
        self.ins[c] = InPort {
            next,
            // SAFETY: as above.
            end: unsafe { next.add(n) },
        };
    }

    /// Moves what the generated code wrote into out port `c`'s window to
    /// the log and opens a new window.
    fn flush_out(&mut self, c: usize) {
        let port = self.outs[c];
        let base = self.out_bufs[c].as_mut_ptr();
        let used = if port.next.is_null() {
            0
        } else {
            // SAFETY: generated code only advances `next` inside the window.
            unsafe { port.next.offset_from(base) as usize }
        };
        let fields: Vec<i64> = self.out_bufs[c][..used].to_vec();
        self.host.sent[c].extend_from_slice(&fields);
        let arity = self.host.program.channels[c].arity as usize;
        let room = match self.ports {
            Ports::Callbacks => 0,
            Ports::Windows => 2 * arity,
        };
        self.outs[c] = OutPort {
            next: base,
            // SAFETY: the buffer holds at least `room` fields.
            end: unsafe { base.add(room) },
        };
    }

    /// Accounts for the fields generated code took inline from in port `c`.
    fn sync_in(&mut self, c: usize) {
        let q = self.host.input[c].as_ptr();
        let port = self.ins[c];
        if port.next.is_null() {
            return;
        }
        // SAFETY: `next` points into the queue (refill_in set it there and
        // generated code only advances it up to `end`).
        self.host.taken[c] = unsafe { port.next.offset_from(q) } as usize;
    }
}

unsafe extern "C" fn cb_call(host: *mut c_void, f: u32, args: *const i64) -> i64 {
    // SAFETY: `host` is the NativeHost the test passed in the context.
    let h = unsafe { &mut *(host as *mut NativeHost<'_>) };
    let n = h.host.program.externs[f as usize].arity as usize;
    // SAFETY: generated code passes `arity` arguments.
    let args = unsafe { std::slice::from_raw_parts(args, n) };
    fp::Io::call(&mut h.host, f, args)
}

unsafe extern "C" fn cb_recv(host: *mut c_void, chan: u32, dst: *mut i64) -> u32 {
    // SAFETY: as in cb_call.
    let h = unsafe { &mut *(host as *mut NativeHost<'_>) };
    let c = chan as usize;
    h.sync_in(c);
    let n = h.host.program.channels[c].arity as usize;
    // SAFETY: generated code passes room for one message.
    let dst = unsafe { std::slice::from_raw_parts_mut(dst, n) };
    let ok = fp::Io::recv(&mut h.host, chan, dst);
    match h.ports {
        Ports::Callbacks => {
            h.ins[c] = InPort {
                next: std::ptr::null(),
                end: std::ptr::null(),
            }
        }
        Ports::Windows => h.refill_in(c),
    }
    ok as u32
}

unsafe extern "C" fn cb_send(host: *mut c_void, chan: u32, src: *const i64) {
    // SAFETY: as in cb_call.
    let h = unsafe { &mut *(host as *mut NativeHost<'_>) };
    let c = chan as usize;
    h.flush_out(c);
    let n = h.host.program.channels[c].arity as usize;
    // SAFETY: generated code passes one message.
    let src = unsafe { std::slice::from_raw_parts(src, n) };
    fp::Io::send(&mut h.host, chan, src);
}

fn random_input(r: &mut Rng, program: &Program) -> Vec<Vec<i64>> {
    program
        .channels
        .iter()
        .map(|c| {
            if c.kind != ChanKind::ExternalIn {
                return Vec::new();
            }
            let msgs = r.below(8) as usize;
            (0..msgs * c.arity as usize)
                .map(|_| {
                    if r.chance(50) {
                        *r.pick(&CONSTS)
                    } else {
                        r.below(300) as i64 - 20
                    }
                })
                .collect()
        })
        .collect()
}

fn interpret(
    g: &Graph,
    program: &Program,
    entry: u32,
    vars: &[i64],
    input: &[Vec<i64>],
) -> esp::Result<Observed> {
    let mut host = Host::new(program, input.to_vec());
    let mut v = vars.to_vec();
    let mut pcs = vec![u32::MAX; program.processes.len()];
    let leave = fp::run(g, entry, &mut v, &mut pcs, &mut host)?;
    v.truncate(vars.len());
    Ok(Observed {
        leave,
        pcs,
        sent: host.sent,
        taken: host.taken,
        calls: host.calls,
        vars: v,
    })
}

fn native(
    code: &fpgen::NativeGraph,
    program: &Program,
    entry: u32,
    vars: &[i64],
    input: &[Vec<i64>],
    ports: Ports,
) -> Observed {
    let n = program.channels.len();
    let mut input = input.to_vec();
    input.resize(n, Vec::new());
    let mut nh = NativeHost {
        host: Host::new(program, input),
        ports,
        ins: vec![
            InPort {
                next: std::ptr::null(),
                end: std::ptr::null(),
            };
            n
        ],
        outs: vec![
            OutPort {
                next: std::ptr::null_mut(),
                end: std::ptr::null_mut(),
            };
            n
        ],
        out_bufs: vec![vec![0i64; 16]; n],
    };
    for c in 0..n {
        if program.channels[c].kind == ChanKind::ExternalIn {
            match ports {
                Ports::Windows => nh.refill_in(c),
                Ports::Callbacks => {}
            }
        }
        if program.channels[c].kind == ChanKind::ExternalOut {
            nh.flush_out(c);
        }
    }
    let mut v = vars.to_vec();
    let mut pcs = vec![u32::MAX; program.processes.len()];
    let mut ctx = Ctx {
        vars: v.as_mut_ptr(),
        pcs: pcs.as_mut_ptr(),
        ins: nh.ins.as_mut_ptr(),
        outs: nh.outs.as_mut_ptr(),
        host: &mut nh as *mut NativeHost<'_> as *mut c_void,
        call: cb_call,
        recv: cb_recv,
        send: cb_send,
    };
    // SAFETY: the context points at live buffers of the right sizes: one
    // var per slot, one pc per process, one port per channel whose windows
    // lie inside the queues and output buffers; the callbacks do not unwind.
    let leave = unsafe { code.run(&mut ctx, entry) };
    for c in 0..n {
        if program.channels[c].kind == ChanKind::ExternalIn {
            nh.sync_in(c);
        }
        if program.channels[c].kind == ChanKind::ExternalOut {
            nh.flush_out(c);
        }
    }
    Observed {
        leave,
        pcs,
        sent: nh.host.sent,
        taken: nh.host.taken,
        calls: nh.host.calls,
        vars: v,
    }
}

/// Keeps only what must agree: for every process, the variables live at
/// the pc it was left at.
fn live_view(program: &Program, lv: &Liveness, o: &Observed) -> Observed {
    let layout = Layout::of(program);
    let mut o = o.clone();
    for (p, proc_) in program.processes.iter().enumerate() {
        let pc = o.pcs[p];
        for v in 0..proc_.vars.len() as u32 {
            if !lv.is_live(p as u32, pc, v) {
                o.vars[layout.slot(p as u32, v) as usize] = 0;
            }
        }
    }
    o
}

fn random_vars(r: &mut Rng, n: usize) -> Vec<i64> {
    (0..n)
        .map(|_| {
            if r.chance(50) {
                *r.pick(&CONSTS)
            } else {
                r.below(100) as i64 - 50
            }
        })
        .collect()
}

#[test]
fn compiled_random_graphs_agree_with_the_interpreter() {
    let program = program();
    let layout = Layout::of(&program);
    let lv = Liveness::of(&program);
    let mut runs = 0;
    for seed in 0..1500u64 {
        let mut gg = GraphGen {
            r: Rng(seed),
            program: &program,
            slots: layout.slots,
            locals: (seed % 3) as u32,
        };
        let n = 2 + gg.r.below(24) as usize;
        let g = gg.graph(n);
        let code = fpgen::compile(&g, &program).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for trial in 0..3 {
            let mut r = Rng(seed * 7 + trial);
            let vars = random_vars(&mut r, layout.slots as usize);
            let input = random_input(&mut r, &program);
            let entry = r.below(g.entries.len() as u64) as u32;
            let want = interpret(&g, &program, entry, &vars, &input)
                .unwrap_or_else(|e| panic!("seed {seed}: the interpreter failed: {e}"));
            for ports in [Ports::Windows, Ports::Callbacks] {
                let got = native(&code, &program, entry, &vars, &input, ports);
                let (w, gt) = (
                    live_view(&program, &lv, &want),
                    live_view(&program, &lv, &got),
                );
                assert_eq!(
                    w,
                    gt,
                    "seed {seed}, trial {trial}, {ports:?}\n{}\n{}",
                    g.display(&program),
                    code.listing()
                );
                runs += 1;
            }
        }
    }
    assert_eq!(runs, 1500 * 3 * 2);
}

#[test]
fn optimized_random_graphs_agree_with_the_originals() {
    let program = program();
    let layout = Layout::of(&program);
    let lv = Liveness::of(&program);
    let mut shrunk = 0;
    for seed in 0..1500u64 {
        let mut gg = GraphGen {
            r: Rng(seed ^ 0xABCDEF),
            program: &program,
            slots: layout.slots,
            locals: (seed % 3) as u32,
        };
        let n = 2 + gg.r.below(24) as usize;
        let g = gg.graph(n);
        let mut o = g.clone();
        opt::optimize(&program, &mut o);
        let size = |g: &Graph| g.blocks.iter().map(|b| b.insts.len() + 1).sum::<usize>();
        if size(&o) < size(&g) {
            shrunk += 1;
        }
        let code = fpgen::compile(&o, &program).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for trial in 0..3 {
            let mut r = Rng(seed * 13 + trial);
            let vars = random_vars(&mut r, layout.slots as usize);
            let input = random_input(&mut r, &program);
            let entry = r.below(g.entries.len() as u64) as u32;
            let want = interpret(&g, &program, entry, &vars, &input)
                .unwrap_or_else(|e| panic!("seed {seed}: the interpreter failed: {e}"));
            let got = interpret(&o, &program, entry, &vars, &input)
                .unwrap_or_else(|e| panic!("seed {seed}: the optimized graph failed: {e}"));
            let w = live_view(&program, &lv, &want);
            assert_eq!(
                w,
                live_view(&program, &lv, &got),
                "seed {seed}, trial {trial}\noriginal:\n{}\noptimized:\n{}",
                g.display(&program),
                o.display(&program)
            );
            let nat = native(&code, &program, entry, &vars, &input, Ports::Windows);
            assert_eq!(
                w,
                live_view(&program, &lv, &nat),
                "seed {seed}, trial {trial}: native"
            );
        }
    }
    assert!(
        shrunk > 500,
        "the optimizer shrank only {shrunk} of 1500 graphs"
    );
}

// -- Targeted cases ---------------------------------------------------------------------------

fn one_block_graph(program: &Program, insts: Vec<Inst>) -> Graph {
    let pcs = (0..program.processes.len() as u32)
        .map(|p| (p, 0))
        .collect();
    Graph {
        name: "t".into(),
        kind: Kind::FastPath {
            nondeterministic: false,
        },
        procs: (0..program.processes.len() as u32).collect(),
        blocks: vec![Block {
            insts,
            term: Term::Leave {
                pcs,
                why: Leave::Exit,
            },
            note: String::new(),
        }],
        entries: vec![0],
        counters: vec![],
        locals: 0,
        states: 1,
    }
}

#[test]
fn division_never_traps() {
    // i64::MIN / -1 wraps; x % -1 is 0; through registers and constants.
    let program = esp::compile(
        "channel o(int, int, int, int) external out;
         process P { var a, b, q, r, s, t;
           while (true) { out(o, q, r, s, t); q = a / b; r = a % b; s = a / -1; t = a % -1; } }",
    )
    .unwrap();
    let v = |n| Expr::Var(n);
    let bin = |op, a, b| Expr::Binary(op, Box::new(a), Box::new(b));
    let insts = vec![
        Inst::Assign {
            slot: 2,
            value: bin(BinOp::Div, v(0), v(1)),
        },
        Inst::Assign {
            slot: 3,
            value: bin(BinOp::Rem, v(0), v(1)),
        },
        Inst::Assign {
            slot: 4,
            value: bin(BinOp::Div, v(0), Expr::Const(-1)),
        },
        Inst::Assign {
            slot: 5,
            value: bin(BinOp::Rem, v(0), Expr::Const(-1)),
        },
    ];
    let mut g = one_block_graph(&program, insts);
    // Leave at the `out`, where every variable is live.
    let at = program.processes[0]
        .nodes
        .iter()
        .position(|n| matches!(n.kind, esp::ir::NodeKind::Comm { .. }))
        .unwrap() as u32;
    if let Term::Leave { pcs, .. } = &mut g.blocks[0].term {
        pcs[0].1 = at;
    }
    let code = fpgen::compile(&g, &program).unwrap();
    for (a, b) in [
        (i64::MIN, -1),
        (7, -1),
        (-7, 2),
        (i64::MIN, 3),
        (5, i64::MIN),
    ] {
        let vars = vec![a, b, 0, 0, 0, 0];
        let got = native(&code, &program, 0, &vars, &[], Ports::Windows);
        assert_eq!(
            &got.vars[2..],
            &[a.wrapping_div(b), a.wrapping_rem(b), a.wrapping_neg(), 0],
            "{a} / {b}"
        );
    }
}

/// A program of one process with six variables (`x k s t u w`, 0 to 5),
/// for graphs written by hand over them.
fn six_vars() -> Program {
    esp::compile(
        "channel o(int, int, int, int, int, int) external out;
         process P { var x, k, s, t, u, w;
           while (true) { out(o, x, k, s, t, u, w); x = 0; k = 0; s = 0; t = 0; u = 0; w = 0; } }",
    )
    .unwrap()
}

#[test]
fn mask_idiom_steps_compute_what_they_say() {
    // `base op (k & -bit)` with `bit` 0 or 1 compiles to a conditional move
    // (`bit ? base op k : base`); the bit may read the assigned variable,
    // `k` may be a constant beyond 32 bits, a variable, or the assigned
    // variable itself, and `op` is `^`, `|` or `+`.
    let program = six_vars();
    let v = |n| Expr::Var(n);
    let c = Expr::Const;
    let bin = |op, a, b| Expr::Binary(op, Box::new(a), Box::new(b));
    let neg = |e| Expr::Unary(UnOp::Neg, Box::new(e));
    let low = |e| bin(BinOp::BitAnd, e, c(1));
    const POLY: i64 = 0xEDB8_8320;
    let mut insts = Vec::new();
    // Eight CRC-32 steps on s: the bit and the base read s itself.
    for _ in 0..8 {
        insts.push(Inst::Assign {
            slot: 2,
            value: bin(
                BinOp::BitXor,
                bin(BinOp::Shr, v(2), c(1)),
                bin(BinOp::BitAnd, c(POLY), neg(low(v(2)))),
            ),
        });
    }
    // t = (-(x < t) & k) + t: mask first, a comparison as the bit.
    insts.push(Inst::Assign {
        slot: 3,
        value: bin(
            BinOp::Add,
            bin(BinOp::BitAnd, neg(bin(BinOp::Lt, v(0), v(3))), v(1)),
            v(3),
        ),
    });
    // u = (u >> 3) | (u & -(u & 1)): k is the assigned variable.
    insts.push(Inst::Assign {
        slot: 4,
        value: bin(
            BinOp::BitOr,
            bin(BinOp::Shr, v(4), c(3)),
            bin(BinOp::BitAnd, v(4), neg(low(v(4)))),
        ),
    });
    // w = x ^ (k & -(w & 1)): the base does not read w.
    insts.push(Inst::Assign {
        slot: 5,
        value: bin(
            BinOp::BitXor,
            v(0),
            bin(BinOp::BitAnd, v(1), neg(low(v(5)))),
        ),
    });
    let mut g = one_block_graph(&program, insts);
    let at = program.processes[0]
        .nodes
        .iter()
        .position(|n| matches!(n.kind, esp::ir::NodeKind::Comm { .. }))
        .unwrap() as u32;
    if let Term::Leave { pcs, .. } = &mut g.blocks[0].term {
        pcs[0].1 = at;
    }
    let code = fpgen::compile(&g, &program).unwrap();
    #[cfg(target_arch = "x86_64")]
    assert!(
        code.listing().contains("cmov"),
        "the mask idiom did not become a conditional move"
    );
    let want = |vars: &[i64]| {
        let (x, k, mut s, mut t, mut u, mut w) =
            (vars[0], vars[1], vars[2], vars[3], vars[4], vars[5]);
        for _ in 0..8 {
            s = (s >> 1) ^ (POLY & (s & 1).wrapping_neg());
        }
        t = ((x < t) as i64).wrapping_neg() & k;
        t = t.wrapping_add(vars[3]);
        u = (u >> 3) | (u & (u & 1).wrapping_neg());
        w = x ^ (k & (w & 1).wrapping_neg());
        vec![x, k, s, t, u, w]
    };
    let mut r = Rng(24);
    let edge = [0, 1, -1, 2, 3, i64::MIN, i64::MAX, POLY, 0xFFFF_FFFF];
    for trial in 0..400 {
        let vars: Vec<i64> = (0..6)
            .map(|_| {
                if trial < 100 {
                    *r.pick(&edge)
                } else {
                    r.next() as i64
                }
            })
            .collect();
        let got = native(&code, &program, 0, &vars, &[], Ports::Windows);
        assert_eq!(got.vars, want(&vars), "from {vars:?}");
    }
    // The CRC of one byte, from the register the reference computes it in.
    let crc = |mut s: i64| {
        for _ in 0..8 {
            s = if s & 1 != 0 { (s >> 1) ^ POLY } else { s >> 1 };
        }
        s
    };
    let vars = vec![0, 0, 0xFFFF_FFFF ^ 0x31, 0, 0, 0];
    let got = native(&code, &program, 0, &vars, &[], Ports::Windows);
    assert_eq!(got.vars[2], crc(0xFFFF_FFFF ^ 0x31));
}

#[test]
fn a_long_constant_read_in_a_loop_is_set_once_per_entry() {
    // A loop of CRC steps on `s` and an addition of a constant beyond 32
    // bits to `t`, repeated until its counter runs out. With registers to
    // spare, each long constant is set once at the entry, not once per
    // use, and the values are the graph interpreter's.
    let program = six_vars();
    let v = |n| Expr::Var(n);
    let c = Expr::Const;
    let bin = |op, a, b| Expr::Binary(op, Box::new(a), Box::new(b));
    const POLY: i64 = 0xEDB8_8320;
    const BIG: i64 = 0x1_2345_6789;
    let step = Inst::Assign {
        slot: 2,
        value: bin(
            BinOp::BitXor,
            bin(BinOp::Shr, v(2), c(1)),
            bin(
                BinOp::BitAnd,
                c(POLY),
                Expr::Unary(UnOp::Neg, Box::new(bin(BinOp::BitAnd, v(2), c(1)))),
            ),
        ),
    };
    let mut g = one_block_graph(&program, vec![]);
    let leave = g.blocks[0].clone();
    g.blocks[0] = Block {
        insts: vec![
            step.clone(),
            step.clone(),
            step.clone(),
            step,
            Inst::Assign {
                slot: 3,
                value: bin(BinOp::Add, v(3), c(BIG)),
            },
        ],
        term: Term::Count {
            counter: 0,
            next: 0,
            over: 1,
        },
        note: String::new(),
    };
    g.blocks.push(leave);
    g.counters = vec![100];
    let at = program.processes[0]
        .nodes
        .iter()
        .position(|n| matches!(n.kind, esp::ir::NodeKind::Comm { .. }))
        .unwrap() as u32;
    if let Term::Leave { pcs, .. } = &mut g.blocks[1].term {
        pcs[0].1 = at;
    }
    let code = fpgen::compile(&g, &program).unwrap();
    #[cfg(target_arch = "x86_64")]
    {
        let listing = code.listing().to_lowercase();
        for (name, hex) in [("the polynomial", "edb88320h"), ("BIG", "123456789h")] {
            assert_eq!(
                listing.matches(hex).count(),
                1,
                "{name} is set once, at the entry\n{listing}"
            );
        }
    }
    let mut r = Rng(25);
    for _ in 0..50 {
        let vars: Vec<i64> = (0..6).map(|_| r.next() as i64).collect();
        let want = interpret(&g, &program, 0, &vars, &[]).unwrap();
        let got = native(&code, &program, 0, &vars, &[], Ports::Windows);
        assert_eq!(got.vars, want.vars);
        assert_eq!(got.leave, want.leave);
    }
}

#[test]
fn a_byte_of_crc_steps_is_one_assignment_of_the_first_value() {
    // Eight bit-by-bit CRC steps (a byte) compose to one affine map over
    // GF(2): the optimizer writes it as one assignment whose terms all read
    // the CRC's first value (`crc >> 8` and one masked column per byte
    // bit), so the chain on the CRC is the terms' xors instead of eight
    // dependent steps. The values are the unoptimized graph's.
    let program = six_vars();
    let v = |n| Expr::Var(n);
    let c = Expr::Const;
    let bin = |op, a, b| Expr::Binary(op, Box::new(a), Box::new(b));
    let step = Inst::Assign {
        slot: 2,
        value: bin(
            BinOp::BitXor,
            bin(BinOp::Shr, v(2), c(1)),
            bin(
                BinOp::BitAnd,
                c(0xEDB8_8320),
                Expr::Unary(UnOp::Neg, Box::new(bin(BinOp::BitAnd, v(2), c(1)))),
            ),
        ),
    };
    let mut insts = vec![Inst::Assign {
        slot: 2,
        value: bin(BinOp::BitXor, v(2), v(0)),
    }];
    insts.extend(std::iter::repeat_n(step, 8));
    let original = one_block_graph(&program, insts);
    let mut g = original.clone();
    opt::optimize(&program, &mut g);
    let crc_writes = g.blocks[0]
        .insts
        .iter()
        .filter(|i| matches!(i, Inst::Assign { slot: 2, .. }))
        .count();
    assert_eq!(crc_writes, 2, "the xor with the byte, then one assignment");
    let code = fpgen::compile(&g, &program).unwrap();
    let mut r = Rng(31);
    for _ in 0..200 {
        let mut vars: Vec<i64> = (0..6).map(|_| r.next() as i64).collect();
        vars[0] &= 0xFF;
        if r.chance(50) {
            vars[2] &= 0xFFFF_FFFF;
        }
        let want = interpret(&original, &program, 0, &vars, &[]).unwrap();
        let got = native(&code, &program, 0, &vars, &[], Ports::Windows);
        assert_eq!(got.vars, want.vars);
        assert_eq!(got.leave, want.leave);
    }
}

#[test]
fn a_test_against_a_contiguous_range_is_one_comparison() {
    // `x == 126 || x == 125` (and `x != 3 && x != 4 && x != 5`) compiles to
    // one unsigned comparison of `x - lo` with the range's span: one branch
    // instead of one per constant. Values at and around both ranges, and at
    // the extremes where `x - lo` wraps, take the interpreter's way.
    let program = six_vars();
    let v = |n| Expr::Var(n);
    let c = Expr::Const;
    let bin = |op, a, b| Expr::Binary(op, Box::new(a), Box::new(b));
    let flag = |slot, k| Inst::Assign { slot, value: c(k) };
    let pes = Expr::Or(
        Box::new(bin(BinOp::Eq, v(0), c(126))),
        Box::new(bin(BinOp::Eq, c(125), v(0))),
    );
    let outside = Expr::And(
        Box::new(Expr::And(
            Box::new(bin(BinOp::Ne, v(1), c(5))),
            Box::new(bin(BinOp::Ne, v(1), c(3))),
        )),
        Box::new(bin(BinOp::Ne, v(1), c(4))),
    );
    let mut g = one_block_graph(&program, vec![]);
    let leave = g.blocks[0].term.clone();
    let block = |insts, term| Block {
        insts,
        term,
        note: String::new(),
    };
    g.blocks = vec![
        block(
            vec![],
            Term::Branch {
                cond: pes,
                then: 1,
                els: 2,
            },
        ),
        block(vec![flag(4, 1)], Term::Jump(2)),
        block(
            vec![],
            Term::Branch {
                cond: outside,
                then: 3,
                els: 4,
            },
        ),
        block(vec![flag(5, 1)], leave.clone()),
        block(vec![flag(5, 2)], leave),
    ];
    let code = fpgen::compile(&g, &program).unwrap();
    #[cfg(target_arch = "x86_64")]
    {
        // `x - 125` compared with 1, `y - 3` with 2; never 126, 4 or 5.
        let listing = code.listing().to_lowercase();
        for k in [",7eh", ",4", ",5"] {
            assert!(
                !listing.lines().any(|l| l.trim_end().ends_with(k)),
                "no comparison with each constant ({k})\n{listing}"
            );
        }
    }
    let mut xs: Vec<i64> = (-3..10).chain(120..132).collect();
    xs.extend([i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1, -125, -126]);
    for &x in &xs {
        for &y in &xs {
            let vars = vec![x, y, 0, 0, 0, 0];
            let want = interpret(&g, &program, 0, &vars, &[]).unwrap();
            let got = native(&code, &program, 0, &vars, &[], Ports::Windows);
            assert_eq!(got.vars, want.vars, "x = {x}, y = {y}");
        }
    }
}

#[test]
fn a_counter_whose_bound_leads_out_of_the_path_needs_no_reset() {
    // Past its bound a count-down is reset so that the next `Count` borrows
    // again; when the bound's target leaves the graph with no `Count` of
    // that counter on the way, the borrow branches there directly, with no
    // reset stub. Counted: the loop runs to its bound, then leaves with the
    // interpreter's values.
    let program = six_vars();
    let v = |n| Expr::Var(n);
    let c = Expr::Const;
    let bin = |op, a, b| Expr::Binary(op, Box::new(a), Box::new(b));
    let mut g = one_block_graph(&program, vec![]);
    let leave = g.blocks[0].clone();
    g.blocks[0] = Block {
        insts: vec![Inst::Assign {
            slot: 1,
            value: bin(BinOp::Add, v(1), c(1)),
        }],
        term: Term::Count {
            counter: 0,
            next: 0,
            over: 1,
        },
        note: String::new(),
    };
    g.blocks.push(leave);
    g.counters = vec![1000];
    let code = fpgen::compile(&g, &program).unwrap();
    #[cfg(target_arch = "x86_64")]
    {
        // One zeroing: the leave's row number (a reset of the count-down
        // would be a second).
        let listing = code.listing().to_lowercase();
        assert_eq!(
            listing.matches("xor").count(),
            1,
            "no reset stub\n{listing}"
        );
    }
    let vars = vec![0, 5, 0, 0, 0, 0];
    let want = interpret(&g, &program, 0, &vars, &[]).unwrap();
    let got = native(&code, &program, 0, &vars, &[], Ports::Windows);
    assert_eq!(got.vars, want.vars);
    assert_eq!(got.leave, want.leave);
    assert_eq!(got.vars[1], 5 + 1001);
}

#[test]
fn a_large_instruction_in_several_blocks_is_emitted_once() {
    // The same large step in three blocks (as symbolic execution copies a
    // process's step into each control state it runs in) is one
    // subroutine, entered from each; a small one stays inline. The values
    // are the interpreter's on every way through.
    let program = six_vars();
    let v = |n| Expr::Var(n);
    let c = Expr::Const;
    let bin = |op, a, b| Expr::Binary(op, Box::new(a), Box::new(b));
    // 25 nodes: ((((s ^ 0x1234567) + t) ...) six times.
    let mut big = v(2);
    for k in 0..6 {
        big = bin(
            BinOp::Add,
            bin(BinOp::BitXor, big, c(0x0123_4567 + k)),
            v(3),
        );
    }
    let big = Inst::Assign {
        slot: 2,
        value: big,
    };
    let small = Inst::Assign {
        slot: 4,
        value: bin(BinOp::Add, v(4), c(0x0765_4321)),
    };
    let mut g = one_block_graph(&program, vec![]);
    let leave = g.blocks[0].term.clone();
    let block = |insts, term| Block {
        insts,
        term,
        note: String::new(),
    };
    g.blocks = vec![
        block(
            vec![big.clone(), small.clone()],
            Term::Branch {
                cond: bin(BinOp::Lt, v(0), c(0)),
                then: 1,
                els: 2,
            },
        ),
        block(vec![big.clone(), small.clone()], leave.clone()),
        block(vec![small, big], leave),
    ];
    let code = fpgen::compile(&g, &program).unwrap();
    #[cfg(target_arch = "x86_64")]
    {
        let listing = code.listing().to_lowercase();
        assert_eq!(
            listing.matches("123456ch").count(),
            1,
            "one copy\n{listing}"
        );
        assert_eq!(listing.matches("7654321h").count(), 3, "inline\n{listing}");
    }
    let mut r = Rng(41);
    for _ in 0..100 {
        let vars: Vec<i64> = (0..6).map(|_| r.next() as i64).collect();
        let want = interpret(&g, &program, 0, &vars, &[]).unwrap();
        let got = native(&code, &program, 0, &vars, &[], Ports::Windows);
        assert_eq!(got.vars, want.vars);
        assert_eq!(got.leave, want.leave);
    }
}

#[test]
fn receives_and_sends_alike_share_one_slow_path() {
    // Two receives from `inA` into the same slot and two sends of it on
    // `outA`, in a loop (as symbolic execution repeats a process's channel
    // statement in each control state): one slow path per channel, entered
    // from each site, going back to the site's own successor. With ports of
    // a few messages and with no ports at all (every operation through the
    // slow path), the messages taken and sent, the leave and the live
    // variables are the interpreter's.
    let program = program();
    let chan = |name: &str| {
        program
            .channels
            .iter()
            .position(|c| c.name == name)
            .unwrap() as u32
    };
    let (in_a, out_a) = (chan("inA"), chan("outA"));
    let mut g = one_block_graph(&program, vec![]);
    let leave = g.blocks[0].term.clone();
    let block = |insts, term| Block {
        insts,
        term,
        note: String::new(),
    };
    let add = |slot: u32, k| Inst::Assign {
        slot,
        value: Expr::Binary(BinOp::Add, Box::new(Expr::Var(0)), Box::new(Expr::Const(k))),
    };
    let recv = |got, empty| Term::Recv {
        chan: in_a,
        slots: vec![0],
        got,
        empty,
    };
    let send = |next| Term::Send {
        chan: out_a,
        args: vec![Operand::Var(0)],
        next,
    };
    g.blocks = vec![
        block(vec![], recv(1, 5)),
        block(vec![add(0, 1)], send(2)),
        block(vec![], recv(3, 6)),
        block(vec![add(0, 2)], send(4)),
        block(
            vec![],
            Term::Count {
                counter: 0,
                next: 0,
                over: 5,
            },
        ),
        block(vec![], leave.clone()),
        block(vec![], leave),
    ];
    // The two empty sites leave differently: which one the shared slow
    // path went back to is seen in the leave.
    if let Term::Leave { why, .. } = &mut g.blocks[6].term {
        *why = Leave::Abort;
    }
    g.counters = vec![1000];
    let code = fpgen::compile(&g, &program).unwrap();
    let listing = code.listing();
    assert_eq!(listing.matches("recv slow path").count(), 1, "{listing}");
    assert_eq!(listing.matches("send slow path").count(), 1, "{listing}");
    let lv = Liveness::of(&program);
    let mut r = Rng(53);
    for n in 0..40 {
        let mut input = random_input(&mut r, &program);
        input[in_a as usize] = (0..n % 9).map(|_| r.below(100) as i64).collect();
        let vars: Vec<i64> = (0..Layout::of(&program).slots)
            .map(|_| r.below(50) as i64)
            .collect();
        let want = live_view(
            &program,
            &lv,
            &interpret(&g, &program, 0, &vars, &input).unwrap(),
        );
        assert_eq!(
            want.leave,
            if n % 9 % 2 == 0 {
                Leave::Exit
            } else {
                Leave::Abort
            }
        );
        for ports in [Ports::Windows, Ports::Callbacks] {
            let got = live_view(
                &program,
                &lv,
                &native(&code, &program, 0, &vars, &input, ports),
            );
            assert_eq!(got, want, "{n} messages, {ports:?}\n{listing}");
        }
    }
}

#[test]
fn a_bad_graph_is_an_error_not_a_panic() {
    let program = program();
    let mut g = one_block_graph(
        &program,
        vec![Inst::Assign {
            slot: 999,
            value: Expr::Const(1),
        }],
    );
    assert!(matches!(
        fpgen::compile(&g, &program),
        Err(esp::Error::Codegen(_))
    ));
    g.blocks[0].insts.clear();
    g.blocks[0].term = Term::Jump(7);
    assert!(matches!(
        fpgen::compile(&g, &program),
        Err(esp::Error::Codegen(_))
    ));
    // The optimizer leaves it alone.
    let before = g.clone();
    opt::optimize(&program, &mut g);
    assert_eq!(g, before);
    // A receive on an external-out channel.
    g.blocks[0].term = Term::Recv {
        chan: 2,
        slots: vec![0],
        got: 0,
        empty: 0,
    };
    assert!(fpgen::compile(&g, &program).is_err());
}

#[test]
fn an_entry_out_of_range_aborts_without_storing() {
    let program = program();
    let g = one_block_graph(&program, vec![]);
    let code = fpgen::compile(&g, &program).unwrap();
    let slots = Layout::of(&program).slots as usize;
    let got = native(&code, &program, 5, &vec![0; slots], &[], Ports::Windows);
    assert_eq!(got.leave, Leave::Abort);
    assert!(got.pcs.iter().all(|&p| p == u32::MAX));
}

// -- Graphs of real programs -------------------------------------------------------------

/// Runs graph `g`, its optimized form, and the optimized form compiled,
/// from random states and inputs: all three must agree.
fn check_real(program: &Program, g: &Graph, what: &str, trials: u64, seed: u64) {
    let layout = Layout::of(program);
    let lv = Liveness::of(program);
    let mut o = g.clone();
    opt::optimize(program, &mut o);
    let code = fpgen::compile(&o, program).unwrap_or_else(|e| panic!("{what}: {e}"));
    for trial in 0..trials {
        let mut r = Rng(seed.wrapping_mul(0x9E37) ^ trial);
        let vars: Vec<i64> = (0..layout.slots).map(|_| r.below(4) as i64 - 1).collect();
        let input: Vec<Vec<i64>> = program
            .channels
            .iter()
            .map(|c| {
                if c.kind != ChanKind::ExternalIn {
                    return Vec::new();
                }
                let msgs = r.below(40) as usize;
                (0..msgs * c.arity as usize)
                    .map(|_| match r.below(4) {
                        0 => 0,
                        1 => 1,
                        2 => r.below(256) as i64,
                        _ => r.below(8) as i64 - 2,
                    })
                    .collect()
            })
            .collect();
        let entry = r.below(g.entries.len() as u64) as u32;
        let Ok(want) = interpret(g, program, entry, &vars, &input) else {
            // A state the graph was not made for (a divisor its guards
            // assume nonzero): nothing to compare.
            continue;
        };
        let w = live_view(program, &lv, &want);
        let got = interpret(&o, program, entry, &vars, &input)
            .unwrap_or_else(|e| panic!("{what}, trial {trial}: the optimized graph failed: {e}"));
        assert_eq!(
            w,
            live_view(program, &lv, &got),
            "{what}, trial {trial}: optimized\n{}\n{}",
            g.display(program),
            o.display(program)
        );
        for ports in [Ports::Windows, Ports::Callbacks] {
            let nat = native(&code, program, entry, &vars, &input, ports);
            assert_eq!(
                w,
                live_view(program, &lv, &nat),
                "{what}, trial {trial}: native, {ports:?}"
            );
        }
    }
}

#[test]
fn filter_program_fast_paths_and_automata_agree_everywhere() {
    for (i, fpp) in esp::filters::PROGRAMS.iter().enumerate() {
        let program = esp::compile(fpp.source).unwrap();
        let spec = esp::spec::parse(fpp.spec, &program).unwrap();
        for f in &spec.fastpaths {
            let g = esp::explore::fast_path(&program, f, &Default::default()).unwrap();
            check_real(
                &program,
                &g,
                &format!("program {} fast path {}", i + 1, f.name),
                30,
                i as u64,
            );
        }
        if i < 2 {
            let g = esp::automata::automaton(&program, &Default::default()).unwrap();
            check_real(
                &program,
                &g,
                &format!("program {} automaton", i + 1),
                30,
                i as u64,
            );
        }
    }
    let program = esp::compile(esp::filters::FIGURE2).unwrap();
    let spec = esp::spec::parse(esp::filters::FIGURE5, &program).unwrap();
    for f in &spec.fastpaths {
        let g = esp::explore::fast_path(&program, f, &Default::default()).unwrap();
        check_real(&program, &g, "figure 2", 200, 7);
    }
}

#[test]
fn random_program_fast_paths_agree_everywhere() {
    use esp::random::{self, GenOptions};
    let explore = esp::explore::ExploreOptions {
        state_limit: 5_000,
        counter_bound: 3,
        ..Default::default()
    };
    let mut graphs = 0;
    for seed in 0..300u64 {
        let kind = if seed % 2 == 0 {
            random::Kind::Kahn
        } else {
            random::Kind::Alt
        };
        let src = random::program(
            seed,
            &GenOptions {
                kind,
                ..GenOptions::default()
            },
        );
        let program = esp::compile(&src).unwrap();
        let spec = esp::spec::parse(&random::spec(&program, seed), &program).unwrap();
        for f in &spec.fastpaths {
            if let Ok(g) = esp::explore::fast_path(&program, f, &explore) {
                check_real(
                    &program,
                    &g,
                    &format!("seed {seed} fast path {}\n{src}", f.name),
                    6,
                    seed,
                );
                graphs += 1;
            }
        }
        if kind == random::Kind::Kahn
            && let Ok(g) = esp::automata::automaton(&program, &explore)
        {
            check_real(
                &program,
                &g,
                &format!("seed {seed} automaton\n{src}"),
                6,
                seed,
            );
            graphs += 1;
        }
    }
    assert!(graphs > 200, "only {graphs} graphs extracted");
}

// -- Counted loops: the count charged at the loop's entry ------------------------------------------

/// Programs with loops that never yield of every shape the charge handles
/// or must refuse; each reads `(n, stop)` pairs and sends `(k, s)`.
/// `charged` is the number of loops whose count a graph of the program
/// charges at their entry.
const COUNTED: [(&str, &str, usize); 12] = [
    (
        "up to n",
        "k = 0; while (k < n) { s = s + k; k = k + 1; }",
        1,
    ),
    ("until equal (wraps)", "k = 0; while (k != n) { k = k + 1; }", 1),
    (
        "down to 0",
        "k = n; while (k > 0) { k = k - 1; s = s + k; }",
        1,
    ),
    (
        "up to a constant, `<=`",
        "k = n; while (k <= 30) { s = s + k; k = 1 + k; }",
        1,
    ),
    (
        "break, then a loop that is not counted",
        "k = 0; while (k < n) { if (k == stop) { break; } s = s + k; k = k + 1; }
         x = n; while (x > 0) { x = x - 2; }",
        1,
    ),
    (
        "increment, then break",
        "k = 0; while (k < n) { k = k + 1; if (k == stop) { break; } s = s + k; }
         x = n; while (x > 0) { x = x - 2; }",
        1,
    ),
    (
        "the bound changes in the body",
        "k = 0; while (k < n) { k = k + 1; n = n - 1; }",
        0,
    ),
    (
        "the induction variable changes twice",
        "k = 0; while (k < n) { k = k + 1; if (s & 1) { k = k + 1; } s = s + 1; }",
        0,
    ),
    (
        "nested: the inner loop",
        "k = 0; while (k < n) { x = 0; while (x < stop) { s = s + x; x = x + 1; } k = k + 1; }",
        1,
    ),
    (
        "a branch in the body: two counts an iteration",
        "k = 0; while (k < n) { if (k & 1) { s = s + 3; x = x ^ s; } else { s = s * 5; } k = k + 1; }",
        1,
    ),
    (
        "a branch in the body, break in one arm",
        "k = 0; while (k < n) { if (k & 1) { s = s + 3; if (s > stop) { break; } } else { s = s * 5; } k = k + 1; }
         x = stop; while (x > 0) { x = x - 3; }",
        1,
    ),
    (
        "more values than registers: the counter in memory",
        "k = 0; while (k < n) { if (a == stop) { break; } a = a * a + a + k; b = b * b + b + a;
           c = c * c + c + b; d = d * d + d + c; e = e * e + e + d; f = f * f + f + e;
           x = x * x + x + f; s = s * s + s + x; k = k + 1; }
         x = n; while (x > 0) { x = x - 2; }",
        1,
    ),
];

fn counted_program(body: &str) -> Program {
    let src = format!(
        "channel i(int, int) external in;
channel o(int, int) external out;
process P {{
  var s, k, n, stop, x, a, b, c, d, e, f;
  while (true) {{
    in(i, n, stop);
    {body}
    out(o, k, s);
  }}
}}"
    );
    esp::compile(&src).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

/// A counted loop's count charged once at its entry counts exactly what
/// counting every iteration counts: the automaton and a fast path of each
/// program, with a bound of 40 shared by every loop of an entry, on inputs
/// of several messages whose loops run from 0 to past the bound (and
/// `n = -1`, which for `!=` would take 2^64 iterations), with early exits
/// that must give back what they did not run: the same messages, the same
/// leave at the same pcs and the same variables as the graph interpreter
/// and as the code counting every iteration; and the graphs of the loops
/// it must refuse (the bound or the induction variable changing in the
/// body, an outer loop around another) are not charged.
#[test]
fn counted_loops_charged_at_entry_count_exactly() {
    let bound = 40;
    let explore = esp::explore::ExploreOptions {
        local_loop_bound: bound,
        ..Default::default()
    };
    let per_iteration = fpgen::Options {
        charge_counted_loops: false,
    };
    for (what, body, charged) in COUNTED {
        let program = counted_program(body);
        let lv = Liveness::of(&program);
        let spec = esp::spec::parse(
            "fastpath f { process P { statement i, o; start i; follows (o i)*; } }",
            &program,
        )
        .unwrap();
        let mut graphs = vec![(
            "automaton",
            esp::automata::automaton(&program, &explore).unwrap(),
        )];
        graphs.push((
            "fast path",
            esp::explore::fast_path(&program, &spec.fastpaths[0], &explore).unwrap(),
        ));
        let chan = program.channel("i").unwrap() as usize;
        let slots = Layout::of(&program).slots as usize;
        for (kind, mut g) in graphs {
            opt::optimize(&program, &mut g);
            let at = format!("{what}, {kind}");
            let code = fpgen::compile(&g, &program).unwrap();
            let plain = fpgen::compile_with(&g, &program, &per_iteration).unwrap();
            assert_eq!(
                code.charged_loops(),
                charged,
                "{at}\n{}",
                g.display(&program)
            );
            assert_eq!(plain.charged_loops(), 0, "{at}");
            if std::env::var_os("ESP_COUNTED_LISTING").is_some() {
                println!("== {at}\n{}\n{}", g.display(&program), code.listing());
            }
            let mut r = Rng(0x5EED ^ what.len() as u64);
            let mut leaves = std::collections::HashSet::new();
            for trial in 0..400 {
                let msgs = 1 + r.below(5) as usize;
                let mut fields = Vec::new();
                for _ in 0..msgs {
                    let n = match r.below(10) {
                        0 => -1,
                        1 => bound as i64,
                        2 => bound as i64 + 1,
                        3 => bound as i64 - 1,
                        _ => r.below(bound + 8) as i64,
                    };
                    let stop = r.below(bound + 4) as i64 - 2;
                    fields.extend([n, stop]);
                }
                // On the fast path, the first message is the start's.
                let mut input = vec![Vec::new(); program.channels.len()];
                input[chan] = fields;
                let vars = vec![0i64; slots];
                let want = interpret(&g, &program, 0, &vars, &input)
                    .unwrap_or_else(|e| panic!("{at}, trial {trial}: {e}"));
                let w = live_view(&program, &lv, &want);
                leaves.insert(format!("{:?} at {:?}", want.leave, want.pcs));
                for ports in [Ports::Windows, Ports::Callbacks] {
                    for (name, c) in [("charged", &code), ("per iteration", &plain)] {
                        let got = native(c, &program, 0, &vars, &input, ports);
                        assert_eq!(
                            w,
                            live_view(&program, &lv, &got),
                            "{at}, trial {trial}, {name}, {ports:?}, input {:?}\n{}",
                            input[chan],
                            g.display(&program)
                        );
                    }
                }
            }
            // Runs that stop for input and runs that abort past the bound.
            assert!(
                leaves.len() >= 2,
                "{at}: runs within and past the bound: {leaves:?}"
            );
        }
    }
    // The filter programs have no loop that never yields: their code is
    // what it was.
    for fpp in esp::filters::PROGRAMS.iter() {
        let program = esp::compile(fpp.source).unwrap();
        let spec = esp::spec::parse(fpp.spec, &program).unwrap();
        let mut graphs: Vec<Graph> = spec
            .fastpaths
            .iter()
            .map(|f| esp::explore::fast_path(&program, f, &Default::default()).unwrap())
            .collect();
        graphs.extend(esp::automata::automaton(&program, &Default::default()));
        for mut g in graphs {
            opt::optimize(&program, &mut g);
            let code = fpgen::compile(&g, &program).unwrap();
            let plain = fpgen::compile_with(&g, &program, &per_iteration).unwrap();
            assert_eq!(code.charged_loops(), 0, "{}", g.name);
            assert_eq!(
                (code.instructions(), code.code_bytes()),
                (plain.instructions(), plain.code_bytes()),
                "{}",
                g.name
            );
        }
    }
}
