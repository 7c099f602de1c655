//! The reference backend: records vcode instructions and executes them.
//!
//! The same client code that generates x86-64 runs here unchanged (it is
//! generic over [`Backend`]), with the same register assignment, because
//! both backends allocate with one allocator (`Func`'s) from one
//! description of the host. The backend is target-neutral: it names no
//! target and no encoder, and takes the target's calling convention and
//! register file as a parameter `C:` [`CallConv`] (for register names, the
//! registers a native backend keeps, what a call clobbers, and calls to
//! native functions); [`crate::Reference`] binds it to the host's. What
//! the native backend leaves to the
//! hardware, this one checks and reports as a typed error with the
//! instruction index and the method:
//!
//! * at generation: use of a register the backend keeps, of a register
//!   released by `putreg`, or a read of a callee-saved register the
//!   function never wrote or claimed; a branch to a label never placed; a
//!   local of another function;
//! * at execution: a read of a register before any write (after a call,
//!   temporaries count as unwritten), division by zero and signed
//!   overflow of division, runaway loops (a step limit), runaway
//!   recursion.
//!
//! It is the symbolic debugger the paper misses (§6.2) and the oracle of
//! the differential tests. Its arithmetic is written from C's semantics
//! on x86-64 (see the [`x86_64`](crate::x86_64) module docs), not from the
//! machine code, so the two backends check each other.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::abi::ArgLoc;
use crate::abi::{CallConv, Invoke, InvokeError};
use crate::backend::{
    Arg, Backend, BinOp, Callee, Cond, LocalOp, PARAM_LOCAL, Src, Target, UnOp, param_slot_off,
};
use crate::error::{Error, ErrorKind};
use crate::mem::ExecMemory;
use crate::regs::RegAlloc;
use crate::sig::Signature;
use crate::ty::MAX_PARAMS;
use crate::ty::{AnyReg, Label, Ty, Value};

const UNPLACED: u32 = u32::MAX;

pub use crate::backend::Eval;

/// A one-bit mask for register `n`.
const fn bit(n: u8) -> u16 {
    1 << (n & 15)
}

#[derive(Clone, Debug)]
enum RefCallee {
    Native(usize),
    Reg(u8),
    Code(Arc<Program>),
}

#[derive(Clone, Debug)]
enum Insn {
    Bin {
        op: BinOp,
        ty: Ty,
        rd: u8,
        a: u8,
        b: Src,
    },
    Un {
        op: UnOp,
        ty: Ty,
        rd: u8,
        a: u8,
    },
    Set {
        ty: Ty,
        rd: u8,
        bits: u64,
    },
    Cvt {
        from: Ty,
        to: Ty,
        rd: u8,
        rs: u8,
    },
    Load {
        mem: Ty,
        ty: Ty,
        rd: u8,
        base: u8,
        off: Src,
    },
    Store {
        mem: Ty,
        rs: u8,
        base: u8,
        off: Src,
    },
    Local {
        op: LocalOp,
        ty: Ty,
        r: u8,
        id: u32,
    },
    Ret {
        ty: Ty,
        r: u8,
    },
    Branch {
        c: Cond,
        ty: Ty,
        a: u8,
        b: Src,
        l: u32,
    },
    Jump {
        link: bool,
        t: Target,
    },
    RetLink,
    JumpTable {
        idx: u8,
        labels: Vec<u32>,
    },
    AddrData {
        rd: u8,
        data: Arc<[u64]>,
    },
    Call {
        callee: RefCallee,
        args: Vec<Arg>,
        ret: Option<AnyReg>,
        persist: u16,
    },
    Label,
    Nop,
    Ext {
        ty: Ty,
        rd: (bool, u8),
        srcs: [(bool, u8); 3],
        n: u8,
        eval: Eval,
    },
}

/// The reference backend's per-function state, for a target whose calling
/// convention is `C` ([`crate::Reference`] is the host's).
pub struct Reference<C> {
    conv: PhantomData<fn() -> C>,
    insns: Vec<Insn>,
    methods: Vec<&'static str>,
    labels: Vec<u32>,
    uses: Vec<(u32, u32)>,
    locals: Vec<(Ty, u32)>,
    frame: u32,
    err: Option<Error>,
    ret_ty: Option<Ty>,
    params: Vec<AnyReg>,
    /// Where each parameter arrives by the target's convention.
    param_locs: [ArgLoc; MAX_PARAMS],
    datas: Vec<Arc<[u64]>>,
}

impl<C> Default for Reference<C> {
    fn default() -> Self {
        Reference {
            conv: PhantomData,
            insns: Vec::new(),
            methods: Vec::new(),
            labels: Vec::new(),
            uses: Vec::new(),
            locals: Vec::new(),
            frame: 0,
            err: None,
            ret_ty: None,
            params: Vec::new(),
            param_locs: [ArgLoc::Stack(0); MAX_PARAMS],
            datas: Vec::new(),
        }
    }
}

impl<C> Reference<C> {
    fn push(&mut self, m: &'static str, i: Insn) {
        self.insns.push(i);
        self.methods.push(m);
    }

    fn index(&self) -> u32 {
        self.insns.len() as u32
    }

    /// True if `(off, id)` is the handle [`Params::local`](crate::Params::local)
    /// gives parameter `id & !PARAM_LOCAL`, kept in memory, of type `ty`.
    fn param_local(&self, off: i32, id: u32, ty: Ty) -> bool {
        let i = (id & !PARAM_LOCAL) as usize;
        id & PARAM_LOCAL != 0
            && self.params.get(i).is_some_and(|p| {
                p.n == crate::Params::IN_MEMORY
                    && p.ty == ty
                    && matches!(self.param_locs[i], ArgLoc::Stack(k) if param_slot_off(k) == off)
            })
    }

    /// Records an extension instruction: `rd = eval(ty, srcs)`.
    pub fn ext(
        &mut self,
        m: &'static str,
        ty: Ty,
        rd: (bool, u8),
        srcs: &[(bool, u8)],
        eval: Eval,
    ) {
        let mut s = [(false, 0u8); 3];
        s[..srcs.len()].copy_from_slice(srcs);
        self.push(
            m,
            Insn::Ext {
                ty,
                rd,
                srcs: s,
                n: srcs.len() as u8,
                eval,
            },
        );
    }
}

impl<C: CallConv + 'static> Backend for Reference<C> {
    type Code = RefCode;
    type Conv = C;

    fn new() -> Self {
        Reference::default()
    }

    fn begin(&mut self, sig: &Signature, params: &[AnyReg], _moves: bool) {
        *self = Reference::default();
        self.params = params.to_vec();
        // Where each parameter arrives (a parameter kept in memory: its
        // stack slot, as the native targets see it), for `local_op` to
        // check the handles of parameters kept in memory against.
        C::get().arg_locs(sig.params(), &mut self.param_locs[..params.len()]);
    }

    fn finish(
        &mut self,
        alloc: &RegAlloc,
        sig: &'static Signature,
        name: Option<String>,
        _mem: Option<&dyn ExecMemory>,
    ) -> Result<RefCode, Error> {
        let _ = alloc;
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        for &(at, l) in &self.uses {
            match self.labels.get(l as usize) {
                Some(&p) if p != UNPLACED => {}
                Some(_) => {
                    return Err(Error::new(
                        at,
                        self.methods[at as usize],
                        ErrorKind::UnplacedLabel { label: l },
                    ));
                }
                None => {
                    return Err(Error::new(
                        at,
                        self.methods[at as usize],
                        ErrorKind::UnknownLabel { label: l },
                    ));
                }
            }
        }
        let prog = Program {
            insns: std::mem::take(&mut self.insns),
            methods: std::mem::take(&mut self.methods),
            labels: std::mem::take(&mut self.labels),
            frame: self.frame as usize,
            locals: std::mem::take(&mut self.locals),
            params: std::mem::take(&mut self.params),
            conv: C::get(),
            sig: *sig,
            ret: self.ret_ty.unwrap_or(Ty::V),
            name,
        };
        Ok(RefCode {
            prog: Arc::new(prog),
            step_limit: DEFAULT_STEP_LIMIT,
        })
    }

    fn next_index(&self) -> u32 {
        self.index()
    }

    fn fail(&mut self, method: &'static str, kind: ErrorKind) {
        if self.err.is_none() {
            self.err = Some(Error::new(self.index(), method, kind));
        }
    }

    fn check(&mut self, m: &'static str, alloc: &RegAlloc, regs: &[(bool, u8)]) {
        for &(float, n) in regs {
            if n == u8::MAX {
                continue; // an immediate operand
            }
            let conv = C::get();
            let name = || conv.reg_name(float, n).to_string();
            let reserved = conv.reserved(float);
            let why = if n >= 16 {
                Some("not a register")
            } else if reserved & bit(n) != 0 {
                Some("kept by the backend for its own sequences")
            } else if alloc.is_free(float, n) && alloc.was_released(float, n) {
                Some("used after putreg released it")
            } else if alloc.is_free(float, n)
                && !alloc.is_named(float, n)
                && !float
                && alloc.cfg.gpr(n) == crate::RegClass::CalleeSaved
            {
                // Written while free, it is saved like a claimed one; read
                // before that, it holds the caller's value.
                Some("callee-saved, read before this function wrote or claimed it")
            } else if alloc.cfg.gpr(n) == crate::RegClass::Unavailable && !float {
                Some("unavailable in this function's RegConfig")
            } else {
                None
            };
            if let Some(why) = why {
                return self.fail(m, ErrorKind::BadRegister { reg: name(), why });
            }
        }
    }

    fn binop(&mut self, m: &'static str, op: BinOp, ty: Ty, rd: u8, a: u8, b: Src) {
        if ty.is_float()
            && (matches!(b, Src::I(_))
                || !matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div))
        {
            return self.fail(
                m,
                ErrorKind::UnsupportedType {
                    insn: op.name(),
                    ty,
                },
            );
        }
        if matches!(op, BinOp::Div | BinOp::Mod)
            && !ty.is_float()
            && let Src::I(v) = b
            && ((ty.is_64() && v == 0) || (!ty.is_64() && v as i32 == 0))
        {
            return self.fail(m, ErrorKind::DivisionByZero);
        }
        self.push(m, Insn::Bin { op, ty, rd, a, b });
    }

    fn unop(&mut self, m: &'static str, op: UnOp, ty: Ty, rd: u8, a: u8) {
        self.push(m, Insn::Un { op, ty, rd, a });
    }

    fn set(&mut self, m: &'static str, ty: Ty, rd: u8, bits: u64) {
        self.push(m, Insn::Set { ty, rd, bits });
    }

    fn cvt(&mut self, m: &'static str, from: Ty, to: Ty, rd: u8, rs: u8) {
        if (from == Ty::P && to.is_float()) || (to == Ty::P && from.is_float()) {
            return self.fail(
                m,
                ErrorKind::UnsupportedType {
                    insn: "cv",
                    ty: if from == Ty::P { from } else { to },
                },
            );
        }
        self.push(m, Insn::Cvt { from, to, rd, rs });
    }

    fn load(&mut self, m: &'static str, mem: Ty, rd_ty: Ty, rd: u8, base: u8, off: Src) {
        self.push(
            m,
            Insn::Load {
                mem,
                ty: rd_ty,
                rd,
                base,
                off,
            },
        );
    }

    fn store(&mut self, m: &'static str, mem: Ty, rs: u8, base: u8, off: Src) {
        self.push(m, Insn::Store { mem, rs, base, off });
    }

    fn local(&mut self, ty: Ty) -> (i32, u32) {
        let size = ty.size().max(1) as u32;
        self.frame = (self.frame + size - 1) & !(size - 1);
        let off = self.frame;
        self.frame += size;
        self.locals.push((ty, off));
        (off as i32, self.locals.len() as u32 - 1)
    }

    fn local_op(&mut self, m: &'static str, op: LocalOp, ty: Ty, r: u8, off: i32, id: u32) {
        match self.locals.get(id as usize) {
            Some(&(t, o)) if o as i32 == off && t == ty => {
                self.push(m, Insn::Local { op, ty, r, id })
            }
            _ if self.param_local(off, id, ty) => self.push(m, Insn::Local { op, ty, r, id }),
            _ => self.fail(m, ErrorKind::UnknownLocal { id }),
        }
    }

    fn ret(&mut self, m: &'static str, ty: Ty, r: u8) {
        match self.ret_ty {
            None => self.ret_ty = Some(ty),
            Some(t) if t != ty => {
                return self.fail(
                    m,
                    ErrorKind::TypeMismatch {
                        expected: t,
                        found: ty,
                    },
                );
            }
            _ => {}
        }
        self.push(m, Insn::Ret { ty, r });
    }

    fn branch(&mut self, m: &'static str, c: Cond, ty: Ty, a: u8, b: Src, l: Label) {
        if ty.is_float() && matches!(b, Src::I(_)) {
            return self.fail(
                m,
                ErrorKind::UnsupportedType {
                    insn: "branch with an immediate",
                    ty,
                },
            );
        }
        self.uses.push((self.index(), l.0));
        self.push(
            m,
            Insn::Branch {
                c,
                ty,
                a,
                b,
                l: l.0,
            },
        );
    }

    fn jump(&mut self, m: &'static str, link: bool, t: Target) {
        if let Target::Label(l) = t {
            self.uses.push((self.index(), l.0));
        }
        self.push(m, Insn::Jump { link, t });
    }

    fn ret_link(&mut self, m: &'static str) {
        self.push(m, Insn::RetLink);
    }

    fn call(
        &mut self,
        m: &'static str,
        callee: Callee<'_, RefCode>,
        args: &[Arg],
        ret: Option<AnyReg>,
        alloc: &RegAlloc,
    ) {
        if alloc.leaf {
            return self.fail(m, ErrorKind::CallInLeaf);
        }
        if args.len() > crate::backend::MAX_CALL_ARGS {
            return self.fail(
                m,
                ErrorKind::TooManyArguments {
                    count: args.len(),
                    max: crate::backend::MAX_CALL_ARGS,
                },
            );
        }
        if let Err(kind) = crate::backend::check_mem_args(args) {
            return self.fail(m, kind);
        }
        let callee = match callee {
            Callee::Native(a) => RefCallee::Native(a),
            Callee::Reg(r) => RefCallee::Reg(r),
            Callee::Code(c) => {
                let want = c.prog.sig.params();
                if want.len() != args.len() {
                    return self.fail(
                        m,
                        ErrorKind::ArgumentCount {
                            expected: want.len(),
                            found: args.len(),
                        },
                    );
                }
                for (&w, a) in want.iter().zip(args) {
                    if w != a.ty() {
                        return self.fail(
                            m,
                            ErrorKind::TypeMismatch {
                                expected: w,
                                found: a.ty(),
                            },
                        );
                    }
                }
                RefCallee::Code(c.prog.clone())
            }
        };
        self.push(
            m,
            Insn::Call {
                callee,
                args: args.to_vec(),
                ret,
                persist: alloc.persist_xmm,
            },
        );
    }

    fn genlabel(&mut self) -> Label {
        self.labels.push(UNPLACED);
        Label(self.labels.len() as u32 - 1)
    }

    fn place(&mut self, m: &'static str, l: Label) {
        let at = self.index();
        match self.labels.get_mut(l.0 as usize) {
            Some(p) if *p == UNPLACED => {
                *p = at;
                self.push(m, Insn::Label);
            }
            Some(_) => self.fail(m, ErrorKind::LabelPlacedTwice { label: l.0 }),
            None => self.fail(m, ErrorKind::UnknownLabel { label: l.0 }),
        }
    }

    fn nop(&mut self, m: &'static str) {
        self.push(m, Insn::Nop);
    }

    fn data(&mut self, bytes: &[u8]) -> u32 {
        // Held as u64s so that the copy is 8-byte aligned, as natively.
        let words: Vec<u64> = bytes
            .chunks(8)
            .map(|c| {
                let mut w = [0u8; 8];
                w[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(w)
            })
            .collect();
        self.datas.push(words.into());
        (self.datas.len() - 1) as u32
    }

    fn addr_data(&mut self, m: &'static str, rd: u8, data: u32) {
        match self.datas.get(data as usize) {
            Some(d) => {
                let data = Arc::clone(d);
                self.push(m, Insn::AddrData { rd, data });
            }
            None => self.fail(m, ErrorKind::UnknownData { data }),
        }
    }

    fn jump_table(&mut self, m: &'static str, idx: u8, targets: &[Label]) {
        for l in targets {
            self.uses.push((self.index(), l.0));
        }
        let labels = targets.iter().map(|l| l.0).collect();
        self.push(m, Insn::JumpTable { idx, labels });
    }

    fn ext_eval(
        &mut self,
        m: &'static str,
        ty: Ty,
        rd: (bool, u8),
        srcs: &[(bool, u8)],
        eval: Eval,
    ) -> bool {
        self.ext(m, ty, rd, srcs, eval);
        true
    }
}

/// A recorded function.
#[derive(Debug)]
struct Program {
    insns: Vec<Insn>,
    methods: Vec<&'static str>,
    labels: Vec<u32>,
    frame: usize,
    locals: Vec<(Ty, u32)>,
    params: Vec<AnyReg>,
    /// The target's convention, for calls to native code.
    conv: &'static dyn CallConv,
    sig: Signature,
    ret: Ty,
    name: Option<String>,
}

/// Default number of instructions one invocation may execute.
pub const DEFAULT_STEP_LIMIT: u64 = 1 << 32;
pub use crate::error::{Fault, FaultKind, MAX_DEPTH};

/// A function recorded by the reference backend; run it with
/// [`Invoke::invoke`] or [`RefCode::run`].
#[derive(Clone, Debug)]
pub struct RefCode {
    prog: Arc<Program>,
    step_limit: u64,
}

impl RefCode {
    /// Sets the most instructions one invocation may execute.
    pub fn with_step_limit(mut self, limit: u64) -> Self {
        self.step_limit = limit;
        self
    }

    /// The name given with [`Func::name`](crate::Func::name).
    pub fn name(&self) -> Option<&str> {
        self.prog.name.as_deref()
    }

    /// Number of recorded instructions (labels included).
    pub fn len(&self) -> usize {
        self.prog.insns.len()
    }

    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.prog.insns.is_empty()
    }

    /// A listing of the recorded vcode instructions.
    pub fn listing(&self) -> String {
        let mut s = String::new();
        for (i, (insn, m)) in self.prog.insns.iter().zip(&self.prog.methods).enumerate() {
            let labels: Vec<String> = self
                .prog
                .labels
                .iter()
                .enumerate()
                .filter(|(_, p)| **p == i as u32)
                .map(|(l, _)| format!("L{l}:"))
                .collect();
            s.push_str(&format!("{i:5}  {:6} {m:10} {insn:?}\n", labels.join(" ")));
        }
        s
    }

    /// Runs the program with `args`.
    ///
    /// # Safety
    /// As [`Invoke::invoke`]: loads, stores and native calls are performed
    /// for real.
    pub unsafe fn run(&self, args: &[Value]) -> Result<Value, InvokeError> {
        crate::abi::check_args(self.prog.sig.params(), args)?;
        self.prog.conv.check_call(args)?;
        let mut steps = 0;
        // SAFETY: forwarded from the caller.
        Ok(unsafe { exec(&self.prog, args, &mut steps, self.step_limit, 0) }?)
    }
}

impl Invoke for RefCode {
    fn params(&self) -> &[Ty] {
        self.prog.sig.params()
    }

    fn ret_type(&self) -> Ty {
        self.prog.ret
    }

    unsafe fn invoke(&self, args: &[Value]) -> Result<Value, InvokeError> {
        // SAFETY: forwarded from the caller.
        unsafe { self.run(args) }
    }
}

/// Register file with written-ness.
struct Regs {
    v: [[u64; 16]; 2],
    def: [u16; 2],
}

/// Truncation of a float to a signed integer as `cvtt*2si` does it: out of
/// range and NaN give the "integer indefinite" value `MIN`.
fn cvtt_i32(x: f64) -> i32 {
    if x.is_nan() || x >= 2147483648.0 || x <= -2147483649.0 {
        i32::MIN
    } else {
        x as i32
    }
}
fn cvtt_i64(x: f64) -> i64 {
    if (-9223372036854775808.0..9223372036854775808.0).contains(&x) {
        x as i64
    } else {
        i64::MIN
    }
}
fn cvtt_f32_i64(x: f32) -> i64 {
    cvtt_i64(x as f64)
}

/// Sign- or zero-extends `v` of type `t` to register bits: 32-bit types are
/// kept zero-extended, as x86-64's 32-bit operations leave them.
fn norm(t: Ty, v: u64) -> u64 {
    match t {
        Ty::I | Ty::U | Ty::F => v & 0xffff_ffff,
        _ => v,
    }
}

/// C's integer arithmetic on x86-64 at one width: `$u`/`$s` are the
/// unsigned and signed types of that width.
macro_rules! int_arith {
    ($op:expr, $signed:expr, $a:expr, $b:expr, $u:ty, $s:ty) => {{
        let (a, b) = ($a as $u, $b as $u);
        let (sa, sb) = (a as $s, b as $s);
        let mask = <$u>::BITS as $u - 1;
        match $op {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::And => a & b,
            BinOp::Or => a | b,
            BinOp::Xor => a ^ b,
            BinOp::Lsh => a << (b & mask),
            BinOp::Rsh if $signed => (sa >> (b & mask)) as $u,
            BinOp::Rsh => a >> (b & mask),
            BinOp::Div | BinOp::Mod => {
                if b == 0 {
                    return Err(FaultKind::DivisionByZero);
                }
                if $signed {
                    if sa == <$s>::MIN && sb == -1 {
                        return Err(FaultKind::DivisionOverflow);
                    }
                    (if $op == BinOp::Div { sa / sb } else { sa % sb }) as $u
                } else if $op == BinOp::Div {
                    a / b
                } else {
                    a % b
                }
            }
        }
    }};
}

fn int_bin(op: BinOp, ty: Ty, a: u64, b: u64) -> Result<u64, FaultKind> {
    let signed = ty.is_signed();
    Ok(if ty.is_64() {
        int_arith!(op, signed, a, b, u64, i64)
    } else {
        int_arith!(op, signed, a, b, u32, i32) as u64
    })
}

fn float_bin(op: BinOp, ty: Ty, a: u64, b: u64) -> u64 {
    if ty == Ty::F {
        let (a, b) = (f32::from_bits(a as u32), f32::from_bits(b as u32));
        (match op {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            _ => a / b,
        })
        .to_bits() as u64
    } else {
        let (a, b) = (f64::from_bits(a), f64::from_bits(b));
        (match op {
            BinOp::Add => a + b,
            BinOp::Sub => a - b,
            BinOp::Mul => a * b,
            _ => a / b,
        })
        .to_bits()
    }
}

fn compare(c: Cond, ty: Ty, a: u64, b: u64) -> bool {
    use std::cmp::Ordering::*;
    let ord = match ty {
        Ty::F => f32::from_bits(a as u32).partial_cmp(&f32::from_bits(b as u32)),
        Ty::D => f64::from_bits(a).partial_cmp(&f64::from_bits(b)),
        Ty::I => Some((a as i32).cmp(&(b as i32))),
        Ty::U => Some((a as u32).cmp(&(b as u32))),
        Ty::L => Some((a as i64).cmp(&(b as i64))),
        _ => Some(a.cmp(&b)),
    };
    match (c, ord) {
        (Cond::Ne, None) => true,
        (_, None) => false,
        (Cond::Lt, Some(o)) => o == Less,
        (Cond::Le, Some(o)) => o != Greater,
        (Cond::Gt, Some(o)) => o == Greater,
        (Cond::Ge, Some(o)) => o != Less,
        (Cond::Eq, Some(o)) => o == Equal,
        (Cond::Ne, Some(o)) => o != Equal,
    }
}

fn convert(from: Ty, to: Ty, v: u64) -> u64 {
    let f = |x: f64| -> u64 {
        match to {
            Ty::F => (x as f32).to_bits() as u64,
            _ => x.to_bits(),
        }
    };
    match from {
        Ty::I => {
            let x = v as i32;
            match to {
                Ty::F => (x as f32).to_bits() as u64,
                Ty::D => (x as f64).to_bits(),
                t if t.is_64() => x as i64 as u64,
                _ => x as u32 as u64,
            }
        }
        Ty::U => {
            let x = v as u32;
            match to {
                Ty::F => (x as f32).to_bits() as u64,
                Ty::D => (x as f64).to_bits(),
                _ => x as u64,
            }
        }
        Ty::L => {
            let x = v as i64;
            match to {
                Ty::F => (x as f32).to_bits() as u64,
                Ty::D => (x as f64).to_bits(),
                t => norm(t, x as u64),
            }
        }
        Ty::UL | Ty::P => match to {
            Ty::F => (v as f32).to_bits() as u64,
            Ty::D => (v as f64).to_bits(),
            t => norm(t, v),
        },
        Ty::F | Ty::D => {
            let single = from == Ty::F;
            let x = if single {
                f32::from_bits(v as u32) as f64
            } else {
                f64::from_bits(v)
            };
            match to {
                Ty::F | Ty::D => f(x),
                Ty::I => cvtt_i32(x) as u32 as u64,
                Ty::L => cvtt_i64(x) as u64,
                Ty::U => cvtt_i64(x) as u32 as u64,
                _ => {
                    // UL: as the native sequence: subtract 2^63 in the
                    // source precision when the value is at least 2^63.
                    if x >= 9223372036854775808.0 {
                        let d = if single {
                            cvtt_f32_i64(f32::from_bits(v as u32) - 9223372036854775808.0f32)
                        } else {
                            cvtt_i64(x - 9223372036854775808.0)
                        };
                        (d as u64) ^ (1 << 63)
                    } else {
                        cvtt_i64(x) as u64
                    }
                }
            }
        }
        _ => v,
    }
}

/// Reads and writes client memory for the reference backend's loads and stores.
mod memory {
    use crate::ty::Ty;

    /// Loads `mem` at `addr`, extended to register bits of `ty`.
    ///
    /// # Safety
    /// `addr` must be valid for a read of `mem.size()` bytes: this is the
    /// client program's load, vouched for by the caller of `invoke`.
    pub unsafe fn load(mem: Ty, ty: Ty, addr: usize) -> u64 {
        // SAFETY: see the function's contract; reads are unaligned-safe.
        let raw: u64 = unsafe {
            match mem {
                Ty::C => (addr as *const i8).read_unaligned() as i64 as u64,
                Ty::UC => (addr as *const u8).read_unaligned() as u64,
                Ty::S => (addr as *const i16).read_unaligned() as i64 as u64,
                Ty::US => (addr as *const u16).read_unaligned() as u64,
                Ty::I | Ty::U | Ty::F => (addr as *const u32).read_unaligned() as u64,
                _ => (addr as *const u64).read_unaligned(),
            }
        };
        super::norm(ty, raw)
    }

    /// Stores the low `mem.size()` bytes of `v` at `addr`.
    ///
    /// # Safety
    /// `addr` must be valid for a write of `mem.size()` bytes, as above.
    pub unsafe fn store(mem: Ty, addr: usize, v: u64) {
        // SAFETY: see the function's contract.
        unsafe {
            match mem.size() {
                1 => (addr as *mut u8).write_unaligned(v as u8),
                2 => (addr as *mut u16).write_unaligned(v as u16),
                4 => (addr as *mut u32).write_unaligned(v as u32),
                _ => (addr as *mut u64).write_unaligned(v),
            }
        }
    }
}

/// Executes `prog`.
///
/// # Safety
/// As [`Invoke::invoke`].
unsafe fn exec(
    prog: &Program,
    args: &[Value],
    steps: &mut u64,
    limit: u64,
    depth: u32,
) -> Result<Value, Fault> {
    if depth > MAX_DEPTH {
        return Err(Fault {
            index: 0,
            method: "call",
            kind: FaultKind::CallDepth,
        });
    }
    let mut r = Regs {
        v: [[0; 16]; 2],
        def: [0; 2],
    };
    // Parameters kept in memory: their incoming stack slots, 8 bytes each.
    let mut slots = [0u64; MAX_PARAMS];
    for (i, (p, a)) in prog.params.iter().zip(args).enumerate() {
        if p.n == crate::Params::IN_MEMORY {
            slots[i] = a.bits();
            continue;
        }
        r.v[p.ty.is_float() as usize][p.n as usize] = norm(p.ty, a.bits());
        r.def[p.ty.is_float() as usize] |= bit(p.n);
    }
    // 16-byte aligned frame for locals.
    let mut frame = vec![0u128; prog.frame.div_ceil(16).max(1)];
    let frame_base = frame.as_mut_ptr() as usize;
    let mut link: Vec<usize> = Vec::new();
    let mut pc = 0usize;
    loop {
        let Some(insn) = prog.insns.get(pc) else {
            return Err(Fault {
                index: pc as u32,
                method: "end",
                kind: FaultKind::FellOffEnd,
            });
        };
        let at = pc;
        let fault = move |kind| Fault {
            index: at as u32,
            method: prog.methods[at],
            kind,
        };
        *steps += 1;
        if *steps > limit {
            return Err(fault(FaultKind::StepLimit(limit)));
        }
        macro_rules! get {
            ($f:expr, $n:expr) => {{
                let (f, n): (bool, u8) = ($f, $n);
                if r.def[f as usize] & bit(n) == 0 {
                    return Err(fault(FaultKind::ReadBeforeWrite {
                        reg: prog.conv.reg_name(f, n).to_string(),
                    }));
                }
                r.v[f as usize][n as usize]
            }};
        }
        macro_rules! put {
            ($f:expr, $n:expr, $v:expr) => {{
                let (f, n): (bool, u8) = ($f, $n);
                r.v[f as usize][n as usize] = $v;
                r.def[f as usize] |= bit(n);
            }};
        }
        let src = |r: &Regs, b: Src, f: bool| -> Result<u64, Fault> {
            match b {
                Src::I(v) => Ok(v as u64),
                Src::R(n) => {
                    if r.def[f as usize] & bit(n) == 0 {
                        return Err(fault(FaultKind::ReadBeforeWrite {
                            reg: prog.conv.reg_name(f, n).to_string(),
                        }));
                    }
                    Ok(r.v[f as usize][n as usize])
                }
            }
        };
        pc += 1;
        match insn {
            &Insn::Bin { op, ty, rd, a, b } => {
                let f = ty.is_float();
                let av = get!(f, a);
                let bv = src(&r, b, f)?;
                let v = if f {
                    float_bin(op, ty, av, bv)
                } else {
                    int_bin(op, ty, av, bv).map_err(fault)?
                };
                put!(f, rd, norm(ty, v));
            }
            &Insn::Un { op, ty, rd, a } => {
                let f = ty.is_float();
                let av = get!(f, a);
                let v = match (op, ty) {
                    (UnOp::Mov, _) => av,
                    (UnOp::Neg, Ty::F) => av ^ 0x8000_0000,
                    (UnOp::Neg, Ty::D) => av ^ (1 << 63),
                    (UnOp::Neg, _) => av.wrapping_neg(),
                    (UnOp::Com, _) => !av,
                    (UnOp::Not, t) => (norm(t, av) == 0) as u64,
                };
                put!(f, rd, norm(ty, v));
            }
            &Insn::Set { ty, rd, bits } => put!(ty.is_float(), rd, norm(ty, bits)),
            &Insn::Cvt { from, to, rd, rs } => {
                let v = get!(from.is_float(), rs);
                put!(to.is_float(), rd, convert(from, to, v));
            }
            &Insn::Load {
                mem,
                ty,
                rd,
                base,
                off,
            } => {
                let addr = (get!(false, base)).wrapping_add(src(&r, off, false)?) as usize;
                // SAFETY: the program's own load; the caller of `invoke` vouches for it.
                let v = unsafe { memory::load(mem, ty, addr) };
                put!(ty.is_float(), rd, v);
            }
            &Insn::Store { mem, rs, base, off } => {
                let v = get!(mem.is_float(), rs);
                let addr = (get!(false, base)).wrapping_add(src(&r, off, false)?) as usize;
                // SAFETY: the program's own store; the caller of `invoke` vouches for it.
                unsafe { memory::store(mem, addr, v) };
            }
            &Insn::Local { op, ty, r: reg, id } => {
                let addr = if id & PARAM_LOCAL != 0 {
                    // `local_op` checked the parameter's index.
                    &mut slots[(id & !PARAM_LOCAL) as usize] as *mut u64 as usize
                } else {
                    frame_base + prog.locals[id as usize].1 as usize
                };
                match op {
                    LocalOp::Load => {
                        // SAFETY: `addr` is inside `frame`, which is large
                        // enough for every local (offsets come from `local`).
                        let v = unsafe { memory::load(ty, ty, addr) };
                        put!(ty.is_float(), reg, v)
                    }
                    LocalOp::Store => {
                        let v = get!(ty.is_float(), reg);
                        // SAFETY: as for the load.
                        unsafe { memory::store(ty, addr, v) };
                    }
                    LocalOp::Addr => put!(false, reg, addr as u64),
                }
            }
            &Insn::Ret { ty, r: reg } => {
                return Ok(if ty == Ty::V {
                    Value::V
                } else {
                    Value::from_bits(ty, get!(ty.is_float(), reg))
                });
            }
            &Insn::Branch { c, ty, a, b, l } => {
                let f = ty.is_float();
                let av = get!(f, a);
                let bv = src(&r, b, f)?;
                let bv = if f { bv } else { norm(ty, bv) };
                if compare(c, ty, norm(ty, av), bv) {
                    pc = prog.labels[l as usize] as usize;
                }
            }
            &Insn::Jump { link: l, t } => match t {
                Target::Label(lab) => {
                    if l {
                        link.push(pc);
                    }
                    pc = prog.labels[lab.0 as usize] as usize;
                }
                Target::Reg(_) | Target::Addr(_) if !l => {
                    return Err(fault(FaultKind::Unsupported(
                        "the reference backend cannot jump to a native address",
                    )));
                }
                Target::Reg(n) => {
                    let a = get!(false, n) as usize;
                    // SAFETY: a jump-and-link to native code; vouched for by the caller.
                    unsafe { prog.conv.call(a, &[], Ty::V) };
                    clobber(&mut r, 0, prog.conv);
                }
                Target::Addr(a) => {
                    // SAFETY: as above.
                    unsafe { prog.conv.call(a, &[], Ty::V) };
                    clobber(&mut r, 0, prog.conv);
                }
            },
            Insn::AddrData { rd, data } => put!(false, *rd, data.as_ptr() as u64),
            Insn::JumpTable { idx, labels } => {
                let i = get!(false, *idx);
                match labels.get(i as usize) {
                    Some(&l) => pc = prog.labels[l as usize] as usize,
                    None => {
                        return Err(fault(FaultKind::JumpTableIndex {
                            index: i,
                            len: labels.len(),
                        }));
                    }
                }
            }
            Insn::RetLink => match link.pop() {
                Some(to) => pc = to,
                None => return Err(fault(FaultKind::Unsupported("ret_link without a jal"))),
            },
            Insn::Call {
                callee,
                args,
                ret,
                persist,
            } => {
                let mut vals = Vec::with_capacity(args.len());
                for a in args {
                    vals.push(match *a {
                        Arg::Reg(x) => Value::from_bits(x.ty, get!(x.ty.is_float(), x.n)),
                        Arg::Imm(t, v) => Value::from_bits(t, norm(t, v as u64)),
                        Arg::Mem { ty, base, off } => {
                            let addr = get!(false, base).wrapping_add(off as i64 as u64) as usize;
                            // SAFETY: the program's own load; the caller of
                            // `invoke` vouches for it.
                            let v = unsafe { memory::load(ty, ty, addr) };
                            Value::from_bits(ty, norm(ty, v))
                        }
                    });
                }
                let rty = ret.map_or(Ty::V, |x| x.ty);
                let out = match callee {
                    RefCallee::Code(p) => {
                        // SAFETY: forwarded from the caller of `invoke`.
                        let v = unsafe { exec(p, &vals, steps, limit, depth + 1) }?;
                        if rty != Ty::V && v.ty() != rty {
                            Value::from_bits(rty, v.bits())
                        } else {
                            v
                        }
                    }
                    RefCallee::Native(a) => {
                        // SAFETY: the client names a native function of these
                        // argument types; vouched for by the caller of `invoke`.
                        unsafe { prog.conv.call(*a, &vals, rty) }
                    }
                    RefCallee::Reg(n) => {
                        let a = get!(false, *n) as usize;
                        // SAFETY: as above.
                        unsafe { prog.conv.call(a, &vals, rty) }
                    }
                };
                clobber(&mut r, *persist, prog.conv);
                if let Some(x) = ret {
                    put!(x.ty.is_float(), x.n, norm(x.ty, out.bits()));
                }
            }
            Insn::Label | Insn::Nop => {}
            &Insn::Ext {
                ty,
                rd,
                srcs,
                n,
                eval,
            } => {
                let mut vals = [0u64; 3];
                for i in 0..n as usize {
                    vals[i] = get!(srcs[i].0, srcs[i].1);
                }
                let v = eval(ty, &vals[..n as usize]);
                put!(rd.0, rd.1, v);
            }
        }
    }
}

/// After a call: only the ABI's callee-saved integer registers and the
/// float registers the call site saved keep their values.
fn clobber(r: &mut Regs, persist_xmm: u16, conv: &dyn CallConv) {
    r.def[0] &= conv.callee_saved(false);
    r.def[1] &= persist_xmm;
}
