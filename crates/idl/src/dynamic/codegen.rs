//! The generated code, through vcode: per operation a marshalling and an
//! unmarshalling function for the client, and per interface one dispatch
//! function for the server.
//!
//! Every generator is generic over the vcode [`Backend`], so the reference
//! backend runs exactly this client code as the oracle of the native one
//! (tests/dynamic.rs).
//!
//! Signatures of the generated functions:
//!
//! - `marshal(slots: *const u64, rec: *mut u8, ctx: *mut ClientCtx) -> i64`:
//!   stores every in and inout value at its field with its width, copies
//!   in strings and sequences into the string area (from offset 0 upward,
//!   each aligned to its element) and writes their descriptors; returns the
//!   request's length, or [`ERR_PUT`] / [`ERR_LONG`] / [`ERR_COUNT`].
//! - `unmarshal(slots: *mut u64, rec: *const u8, ctx: *mut ClientCtx) -> i64`:
//!   loads every inout and out value and the return value back into the
//!   slots (scalars extended to 64 bits; aggregates copied to the memory
//!   their slot points to; strings and sequences as (pointer into the
//!   string area, count), after checking the server's descriptor); returns
//!   0, or [`ERR_REPLY_STRING`] / [`ERR_REPLY_BOOL`].
//! - `shm_call(slots, ch) -> i64` and `shm_serve(ch, waited) -> i64`: the
//!   whole call, and the server's dispatch-and-reply loop with the
//!   dispatch in line, over an `rt::shm` channel (see [`shm_call`] and
//!   [`shm_serve`]).
//! - `dispatch(key: u64, rec: *mut u8, len: u64, area: *mut u8, area_len: u64, ctx: *mut DispatchCtx) -> u64`:
//!   bound check and jump table on the key, then for the operation the
//!   static server stubs' checks (short message, descriptors once, in
//!   range, aligned, in order, within the per-string limit; booleans;
//!   strings UTF-8), then one C call of the registered handler with the
//!   arguments in registers (past nine, on the stack, through the spill
//!   area of the private `ctx`) and out/inout values as pointers into the
//!   record in place; returns `status | reply_len << 16`.

use super::plan::{Kind, OpPlan, ValuePlan};
use crate::model::{Dir, Limits, Prim};
use crate::rt::Status;
use vcode::{
    AnyReg, Arg, Backend, Callee, Class, Func, I, L, Label, Leaf, Local, P, Reg, Ty, U, UL,
};

/// `marshal`: the transport's `put` refused a string (its error is kept
/// in the call's context).
pub const ERR_PUT: i64 = -1;
/// `marshal`: a string or sequence exceeds the per-string limit.
pub const ERR_LONG: i64 = -2;
/// `marshal`: a `size_is` sequence holds more elements than its length
/// parameter's type counts.
pub const ERR_COUNT: i64 = -5;
/// `unmarshal`: a reply descriptor is out of the string area or misaligned.
pub const ERR_REPLY_STRING: i64 = -3;
/// `unmarshal`: a reply `boolean` is neither 0 nor 1.
pub const ERR_REPLY_BOOL: i64 = -4;

/// Aggregates up to this many bytes are copied by straight-line loads and
/// stores; larger ones by a call to [`copy_bytes`](super::native::copy_bytes).
pub const INLINE_COPY: u32 = 256;

/// Register arguments a handler call gets besides the context (the
/// registers left once the record and string-area pointers are kept);
/// arguments past them are passed through the private spill area
/// as the C convention's further arguments.
pub const MAX_HANDLER_REGS: usize = 9;

/// Arguments a handler call can take besides the context: vcode's limit
/// on a call's arguments ([`vcode::MAX_PARAMS`]) less the context.
pub const MAX_HANDLER_ARGS: usize = vcode::MAX_PARAMS - 1;

/// 64-bit words of the spill area that follows the scratch pointer in the
/// dispatch's private context ([`DispatchCtx`](super::native::DispatchCtx)):
/// one per handler argument past the registers.
pub const SPILL_SLOTS: usize = MAX_HANDLER_ARGS;

/// A handler as the generated dispatch calls it: a C function and the
/// context pointer passed as its first argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HandlerRef {
    /// The function's address.
    pub addr: usize,
    /// Its first argument.
    pub ctx: usize,
}

/// Why the dispatch of an interface could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// vcode refused the code.
    #[error(transparent)]
    Vcode(#[from] vcode::Error),
    /// An operation whose handler call needs more arguments than a call
    /// can pass.
    #[error(
        "operation `{op}`: its handler takes {needed} arguments besides the context; a call passes at most {MAX_HANDLER_ARGS}"
    )]
    TooManyArgs {
        /// The operation.
        op: String,
        /// Arguments it needs besides the context.
        needed: usize,
    },
}

fn u32v(r: Reg<UL>) -> Reg<U> {
    Reg::phys(r.num())
}

fn i32v(r: Reg<UL>) -> Reg<I> {
    Reg::phys(r.num())
}

fn pv(r: Reg<UL>) -> Reg<P> {
    r.cast()
}

/// Stores the low `size` bytes of `v` at `base + off`.
fn store_w<B: Backend>(f: &mut Func<B>, size: u32, v: Reg<UL>, base: Reg<P>, off: i32) {
    match size {
        1 => f.stc(v, base, off),
        2 => f.sts(v, base, off),
        4 => f.st(u32v(v), base, off),
        _ => f.st(v, base, off),
    }
}

/// Loads a `p` at `base + off` into `v`, extended to 64 bits by its
/// signedness.
fn load_prim<B: Backend>(f: &mut Func<B>, p: Prim, v: Reg<UL>, base: Reg<P>, off: i32) {
    match p {
        Prim::I8 => f.ldc(v, base, off),
        Prim::U8 | Prim::Char | Prim::Bool => f.lduc(v, base, off),
        Prim::I16 => f.lds(v, base, off),
        Prim::U16 => f.ldus(v, base, off),
        Prim::I32 => {
            f.ld(i32v(v), base, off);
            f.cv::<I, L>(v.cast(), i32v(v));
        }
        Prim::U32 => f.ldu(v, base, off),
        Prim::I64 | Prim::U64 => f.ld(v, base, off),
    }
}

/// Copies `size` bytes from `src + soff` to `dst + doff` with straight-line
/// loads and stores through `t`.
#[allow(clippy::too_many_arguments)]
fn copy_fixed<B: Backend>(
    f: &mut Func<B>,
    t: Reg<UL>,
    dst: Reg<P>,
    doff: i32,
    src: Reg<P>,
    soff: i32,
    size: u32,
) {
    let mut i = 0i32;
    let size = size as i32;
    while i + 8 <= size {
        f.ld(t, src, soff + i);
        f.st(t, dst, doff + i);
        i += 8;
    }
    if i + 4 <= size {
        f.ld(u32v(t), src, soff + i);
        f.st(u32v(t), dst, doff + i);
        i += 4;
    }
    if i + 2 <= size {
        f.ldus(t, src, soff + i);
        f.sts(t, dst, doff + i);
        i += 2;
    }
    if i < size {
        f.lduc(t, src, soff + i);
        f.stc(t, dst, doff + i);
    }
}

/// `rd = a * k` for a constant `k`.
fn mul_const<B: Backend>(f: &mut Func<B>, rd: Reg<UL>, a: Reg<UL>, k: u32) {
    if k.is_power_of_two() {
        f.lsh(rd, a, i64::from(k.trailing_zeros()));
    } else {
        f.mul(rd, a, i64::from(k));
    }
}

/// `rd = a / k` for a constant `k > 0`.
fn div_const<B: Backend>(f: &mut Func<B>, rd: Reg<UL>, a: Reg<UL>, k: u32) {
    if k.is_power_of_two() {
        f.rsh(rd, a, i64::from(k.trailing_zeros()));
    } else {
        f.div(rd, a, i64::from(k));
    }
}

/// Moves a parameter register into a persistent one (for functions that
/// call), releasing the parameter register.
fn keep<B: Backend>(f: &mut Func<B>, r: Reg<P>) -> vcode::Result<Reg<P>> {
    let s = f.getreg::<P>(Class::Persistent)?;
    f.mov(s, r);
    f.putreg(r);
    Ok(s)
}

/// Loads an out or inout value of fixed size (`Kind::Prim` or
/// `Kind::Agg`) from its field at `rec.0 + rec.1` to the caller's `slots`:
/// a scalar into its slot (a boolean other than 0 or 1 branches to
/// `err_bool`), an aggregate copied to where its slot points (inline up to
/// `INLINE_COPY` bytes). `(t, pa, pb)` are scratch registers.
fn load_fixed_out<B: Backend>(
    f: &mut Func<B>,
    v: &ValuePlan,
    slots: Reg<P>,
    (rec, foff): (Reg<P>, i32),
    (t, pa, pb): (Reg<UL>, Reg<P>, Reg<P>),
    err_bool: Label,
) {
    let slot = 8 * v.slot as i32;
    match v.kind {
        Kind::Prim(pr) => {
            load_prim(f, pr, t, rec, foff);
            if pr == Prim::Bool {
                f.bgt(t, 1, err_bool);
            }
            f.st(t, slots, slot);
        }
        Kind::Agg { size, .. } => {
            f.ld(pa, slots, slot);
            if size <= INLINE_COPY {
                copy_fixed(f, t, pa, 0, rec, foff, size);
            } else {
                f.add(pb, rec, i64::from(foff));
                let copy = Callee::Native(super::native::copy_bytes as *const () as usize);
                f.callv(
                    copy,
                    &[pa.into(), pb.into(), Arg::Imm(Ty::UL, i64::from(size))],
                );
            }
        }
        // Strings and sequences: each caller reads their descriptors.
        Kind::Ind { .. } => {}
    }
}

/// Stores every in and inout value of `ins` from the caller's `slots` at
/// its field of the record at `rec.0 + rec.1`, with its width: a boolean
/// as 0 or 1, an aggregate copied (inline up to `INLINE_COPY` bytes), a
/// string or sequence as the descriptor `descs` keeps for its field.
/// `(t, pa, pb)` are scratch registers (a value, two pointers).
fn store_ins<B: Backend>(
    f: &mut Func<B>,
    ins: &[&ValuePlan],
    descs: &[(u32, Local<UL>)],
    slots: Reg<P>,
    (rec, base): (Reg<P>, i32),
    (t, pa, pb): (Reg<UL>, Reg<P>, Reg<P>),
) {
    for v in ins {
        let (slot, foff) = (8 * v.slot as i32, base + v.offset as i32);
        match v.kind {
            Kind::Prim(Prim::Bool) => {
                f.ld(t, slots, slot);
                f.not(t, t);
                f.xor(t, t, 1);
                f.stc(t, rec, foff);
            }
            Kind::Prim(pr) => match pr.size() {
                1 => {
                    f.lduc(t, slots, slot);
                    f.stc(t, rec, foff);
                }
                2 => {
                    f.ldus(t, slots, slot);
                    f.sts(t, rec, foff);
                }
                4 => {
                    f.ld(u32v(t), slots, slot);
                    f.st(u32v(t), rec, foff);
                }
                _ => {
                    f.ld(t, slots, slot);
                    f.st(t, rec, foff);
                }
            },
            Kind::Agg { size, .. } => {
                f.ld(pa, slots, slot);
                if size <= INLINE_COPY {
                    copy_fixed(f, t, rec, foff, pa, 0, size);
                } else {
                    f.add(pb, rec, i64::from(foff));
                    let copy = Callee::Native(super::native::copy_bytes as *const () as usize);
                    f.callv(
                        copy,
                        &[pb.into(), pa.into(), Arg::Imm(Ty::UL, i64::from(size))],
                    );
                }
            }
            Kind::Ind { .. } => {
                if let Some((_, d)) = descs.iter().find(|(o, _)| *o == v.offset) {
                    f.ld_local(t, *d);
                    f.st(t, rec, foff);
                }
            }
        }
    }
}

/// Generates `marshal` for `p` (see the module documentation).
pub fn marshal<B: Backend>(f: &mut Func<B>, p: &OpPlan, lim: &Limits) -> vcode::Result<B::Code> {
    let ins: Vec<&ValuePlan> = p.in_record_order().filter(|v| v.dir != Dir::Out).collect();
    let strings = ins.iter().any(|v| matches!(v.kind, Kind::Ind { .. }));
    let calls = strings
        || ins
            .iter()
            .any(|v| matches!(v.kind, Kind::Agg { size, .. } if size > INLINE_COPY));
    let a = f.lambda("%p%p%p", if calls { Leaf::No } else { Leaf::Yes })?;
    let (mut slots, mut rec, mut ctx) = (a.get::<P>(0)?, a.get::<P>(1)?, a.get::<P>(2)?);
    f.name(format!("idl_marshal_{}", p.op.name));
    if calls {
        slots = keep(f, slots)?;
        rec = keep(f, rec)?;
        ctx = keep(f, ctx)?;
    } else {
        f.putreg(ctx);
    }
    // Only the temporaries this operation uses: a leaf that needs no more
    // than the caller-saved registers has no register to save.
    let aggs = ins.iter().any(|v| matches!(v.kind, Kind::Agg { .. }));
    let t = f.getreg::<UL>(Class::Temp)?;
    let t2 = if strings {
        f.getreg::<UL>(Class::Temp)?
    } else {
        t
    };
    let pa = if strings || aggs {
        f.getreg::<P>(Class::Temp)?
    } else {
        pv(t)
    };
    let pb = if calls {
        f.getreg::<P>(Class::Temp)?
    } else {
        pa
    };
    let (err_put, err_long, err_count) = (f.genlabel(), f.genlabel(), f.genlabel());
    // Pass 1: the strings, through the transport's `put` (which may move
    // the message buffer: the record is fetched again after them).
    let mut descs = Vec::new();
    for v in &ins {
        let Kind::Ind { esize, ealign, .. } = v.kind else {
            continue;
        };
        let (slot, esize) = (8 * v.slot as i32, esize.max(1));
        f.ld(pa, slots, slot);
        f.ld(t, slots, slot + 8);
        if let Some(max) = v.count_max {
            f.bgt(t, i64::from(max), err_count);
        }
        f.bgt(t, i64::from(lim.max_string_bytes / esize), err_long);
        mul_const(f, t2, t, esize);
        let put = Callee::Native(super::native::put_thunk as *const () as usize);
        f.call(
            t.cast::<L>(),
            put,
            &[
                ctx.into(),
                pa.into(),
                t2.into(),
                Arg::Imm(Ty::UL, i64::from(ealign)),
            ],
        );
        f.blt(t.cast::<L>(), 0, err_put);
        // The descriptor: offset in the low word, count in the high.
        f.ld(t2, slots, slot + 8);
        f.lsh(t2, t2, 32);
        f.or(t2, t2, t);
        let d = f.local::<UL>();
        f.st_local(t2, d);
        descs.push((v.offset, d));
    }
    if strings {
        let buf = Callee::Native(super::native::buf_thunk as *const () as usize);
        f.call(rec, buf, &[ctx.into()]);
    }
    // Pass 2: every in and inout value at its field, with its width.
    store_ins(f, &ins, &descs, slots, (rec, 0), (t, pa, pb));
    let r = t.cast::<L>();
    f.set(r, i64::from(p.op.layout.request_size));
    f.ret(r);
    for (l, code) in [
        (err_put, ERR_PUT),
        (err_long, ERR_LONG),
        (err_count, ERR_COUNT),
    ] {
        f.label(l);
        f.set(r, code);
        f.ret(r);
    }
    f.end()
}

/// Generates `unmarshal` for `p` (see the module documentation).
pub fn unmarshal<B: Backend>(f: &mut Func<B>, p: &OpPlan) -> vcode::Result<B::Code> {
    let outs: Vec<&ValuePlan> = p.in_record_order().filter(|v| v.dir != Dir::In).collect();
    let calls = outs.iter().any(|v| match v.kind {
        Kind::Ind { .. } => true,
        Kind::Agg { size, .. } => size > INLINE_COPY,
        Kind::Prim(_) => false,
    });
    let a = f.lambda("%p%p%p", if calls { Leaf::No } else { Leaf::Yes })?;
    let (mut slots, mut rec, mut ctx) = (a.get::<P>(0)?, a.get::<P>(1)?, a.get::<P>(2)?);
    f.name(format!("idl_unmarshal_{}", p.op.name));
    if calls {
        slots = keep(f, slots)?;
        rec = keep(f, rec)?;
        ctx = keep(f, ctx)?;
    } else {
        f.putreg(ctx);
    }
    let strings = outs.iter().any(|v| matches!(v.kind, Kind::Ind { .. }));
    let aggs = outs.iter().any(|v| matches!(v.kind, Kind::Agg { .. }));
    let t = f.getreg::<UL>(Class::Temp)?;
    let t2 = if strings {
        f.getreg::<UL>(Class::Temp)?
    } else {
        t
    };
    let t3 = if strings {
        f.getreg::<UL>(Class::Temp)?
    } else {
        t
    };
    let pa = if strings || aggs {
        f.getreg::<P>(Class::Temp)?
    } else {
        pv(t)
    };
    let pb = if calls {
        f.getreg::<P>(Class::Temp)?
    } else {
        pa
    };
    let (err_str, err_bool) = (f.genlabel(), f.genlabel());
    for v in outs {
        let (slot, foff) = (8 * v.slot as i32, v.offset as i32);
        match v.kind {
            Kind::Prim(_) | Kind::Agg { .. } => {
                load_fixed_out(f, v, slots, (rec, foff), (t, pa, pb), err_bool);
            }
            Kind::Ind { esize, ealign, .. } => {
                // The descriptor is read once: the count goes to its slot
                // before the transport checks the bytes it covers.
                f.ldu(t, rec, foff);
                f.ldu(t2, rec, foff + 4);
                if ealign > 1 {
                    f.and(t3, t, i64::from(ealign - 1));
                    f.bne(t3, 0, err_str);
                }
                mul_const(f, t3, t2, esize.max(1));
                f.st(t2, slots, slot + 8);
                let reply = Callee::Native(super::native::reply_thunk as *const () as usize);
                f.call(pa, reply, &[ctx.into(), t.into(), t3.into()]);
                f.beq(pa, 0, err_str);
                f.st(pa, slots, slot);
            }
        }
    }
    let r = t.cast::<L>();
    f.set(r, 0);
    f.ret(r);
    for (l, code) in [(err_str, ERR_REPLY_STRING), (err_bool, ERR_REPLY_BOOL)] {
        f.label(l);
        f.set(r, code);
        f.ret(r);
    }
    f.end()
}

/// The register type a handler receives a scalar in (C's promotions).
fn arg_ty(p: Prim) -> Ty {
    match p {
        Prim::I8 | Prim::I16 | Prim::I32 => Ty::I,
        Prim::U8 | Prim::Char | Prim::Bool | Prim::U16 | Prim::U32 => Ty::U,
        Prim::I64 => Ty::L,
        Prim::U64 => Ty::UL,
    }
}

/// A string or sequence the server hands its handler to fill: where it
/// is told to write.
struct OutRegion<'a> {
    v: &'a ValuePlan,
    off: Local<UL>,
    cap: Local<UL>,
}

/// An in or inout string or sequence, as checked: its offset and count,
/// kept in the server's private stack so that the client cannot change
/// them after the check.
struct InRegion<'a> {
    v: &'a ValuePlan,
    off: Local<UL>,
    cnt: Local<UL>,
    /// A string's private copy's address (set when it is copied).
    ptr: Local<UL>,
}

/// The dispatch function's registers.
struct Regs {
    key: Reg<UL>,
    len: Reg<UL>,
    alen: Reg<UL>,
    rec: Reg<P>,
    area: Reg<P>,
    /// Where the dispatch's private context is
    /// ([`DispatchCtx`](super::native::DispatchCtx): the scratch pointer,
    /// then the spill area): it is needed only for strings and spilled
    /// arguments, so it is kept in memory.
    ctx: CtxAt,
    /// Every other integer register: scratch, then handler arguments.
    pool: Vec<Reg<UL>>,
}

/// Where the dispatch's private context pointer is kept.
#[derive(Clone, Copy)]
enum CtxAt {
    /// In a stack local (the standalone dispatch: its sixth parameter).
    Local(Local<P>),
    /// In a field of a structure whose address a persistent register
    /// holds (the server loop: its view of the channel).
    Field(Reg<P>, i32),
}

impl Regs {
    /// Loads the private context's address into `dst`.
    fn load_ctx<B: Backend>(&self, f: &mut Func<B>, dst: Reg<P>) {
        match self.ctx {
            CtxAt::Local(l) => f.ld_local(dst, l),
            CtxAt::Field(base, off) => f.ld(dst, base, off),
        }
    }
}

/// How the dispatch's code ends with its result (`status | reply_len <<
/// 16`) in `Regs::pool[0]`: it returns it (the standalone dispatch), or
/// jumps to the server loop's reply.
#[derive(Clone, Copy)]
enum Finish {
    Ret,
    Jump(Label),
}

impl Finish {
    /// Ends a path with `v` (in `r`, which is `Regs::pool[0]`).
    fn finish<B: Backend>(self, f: &mut Func<B>, r: Reg<UL>, v: u64) {
        f.set(r, v);
        match self {
            Finish::Ret => f.ret(r),
            Finish::Jump(l) => f.jmp(l),
        }
    }
}

/// The labels that answer a refused request with its status.
struct Exits {
    short: Label,
    bad_string: Label,
    bad_value: Label,
    overflow: Label,
    failed: Label,
}

/// Generates `dispatch` for the operations `plans` (indexed by key) with
/// `handlers[k]` serving key `k` (`None`: answered with
/// [`Status::ServerFailed`]). See the module documentation.
pub fn dispatch<B: Backend>(
    f: &mut Func<B>,
    plans: &[OpPlan],
    handlers: &[Option<HandlerRef>],
    lim: &Limits,
) -> Result<B::Code, GenError> {
    let a = f.lambda("%ul%p%ul%p%ul%p", Leaf::No)?;
    f.name("idl_dispatch");
    let (key, rec0, len, area0, alen) = (
        a.get::<UL>(0)?,
        a.get::<P>(1)?,
        a.get::<UL>(2)?,
        a.get::<P>(3)?,
        a.get::<UL>(4)?,
    );
    let ctx0 = a.get::<P>(5)?;
    let ctx = f.local::<P>();
    f.st_local(ctx0, ctx);
    f.putreg(ctx0);
    let rec = keep(f, rec0)?;
    let area = keep(f, area0)?;
    let r = Regs {
        key,
        len,
        alen,
        rec,
        area,
        ctx: CtxAt::Local(ctx),
        pool: dispatch_pool(f, plans, handlers)?,
    };
    dispatch_body(f, plans, handlers, lim, &r, Finish::Ret)?;
    Ok(f.end()?)
}

/// The dispatch's scratch and argument registers: as many as the largest
/// handler call needs beyond the three registers of the key, the length
/// and the area's length (free by then; the callee-saved ones among them
/// cost a save each), at least three.
fn dispatch_pool<B: Backend>(
    f: &mut Func<B>,
    plans: &[OpPlan],
    handlers: &[Option<HandlerRef>],
) -> Result<Vec<Reg<UL>>, GenError> {
    let want = plans
        .iter()
        .zip(handlers)
        .filter(|(_, h)| h.is_some())
        .map(|(p, _)| handler_regs(p).min(MAX_HANDLER_REGS))
        .max()
        .unwrap_or(0)
        .saturating_sub(3)
        .max(3);
    let mut pool = Vec::new();
    while pool.len() < want {
        match f.getreg::<UL>(Class::Temp) {
            Ok(r) => pool.push(r),
            Err(_) => break,
        }
    }
    if pool.len() < 3 {
        return Err(GenError::TooManyArgs {
            op: "(dispatch)".into(),
            needed: 3,
        });
    }
    Ok(pool)
}

/// The dispatch's code, from the key's bound check to every path's end
/// (`fin`): the jump table, each operation's checks and handler call, and
/// the refusals' statuses.
fn dispatch_body<B: Backend>(
    f: &mut Func<B>,
    plans: &[OpPlan],
    handlers: &[Option<HandlerRef>],
    lim: &Limits,
    r: &Regs,
    fin: Finish,
) -> Result<(), GenError> {
    let x = Exits {
        short: f.genlabel(),
        bad_string: f.genlabel(),
        bad_value: f.genlabel(),
        overflow: f.genlabel(),
        failed: f.genlabel(),
    };
    let bad_key = f.genlabel();
    let labels: Vec<Label> = plans.iter().map(|_| f.genlabel()).collect();
    f.bge(r.key, plans.len() as i64, bad_key);
    f.jump_table(r.key, &labels);
    for (k, p) in plans.iter().enumerate() {
        f.label(labels[k]);
        match handlers.get(k).copied().flatten() {
            Some(h) => op_body(f, p, h, lim, r, &x, fin)?,
            None => f.jmp(x.failed),
        }
    }
    let t = r.pool[0];
    for (l, s) in [
        (bad_key, Status::BadKey),
        (x.short, Status::ShortMessage),
        (x.bad_string, Status::BadString),
        (x.bad_value, Status::BadValue),
        (x.overflow, Status::Overflow),
        (x.failed, Status::ServerFailed),
    ] {
        f.label(l);
        fin.finish(f, t, s as u64);
    }
    Ok(())
}

/// Where one handler argument comes from.
enum ArgSrc {
    /// An in scalar, loaded from its field (a `boolean` normalised).
    Prim(Prim, i32),
    /// The address of a record field (inout and out values, and an out
    /// string's count word).
    RecAddr(i32),
    /// An in or inout string's or sequence's elements: a string in the
    /// private scratch copy, a sequence in the area, at the checked offset.
    InPtr { off: Local<UL>, string: bool },
    /// A checked count or capacity kept in the server's stack.
    Local(Local<UL>),
    /// An out string's or sequence's room in the area.
    AreaPtr(Local<UL>),
}

/// The handler's arguments besides the context, in order, with their C
/// types (see the module documentation and docs/idl.md).
fn handler_args(p: &OpPlan, ins: &[InRegion<'_>], regions: &[OutRegion<'_>]) -> Vec<(Ty, ArgSrc)> {
    let mut out = Vec::new();
    for v in &p.values {
        let foff = v.offset as i32;
        match (v.dir, v.kind) {
            (_, Kind::Prim(_)) if v.param.is_none() => {}
            (Dir::In, Kind::Prim(pr)) => out.push((arg_ty(pr), ArgSrc::Prim(pr, foff))),
            (_, Kind::Prim(_) | Kind::Agg { .. }) => out.push((Ty::P, ArgSrc::RecAddr(foff))),
            (Dir::In | Dir::InOut, Kind::Ind { string, .. }) => {
                if let Some(s) = ins.iter().find(|s| std::ptr::eq(s.v, v)) {
                    let off = if string { s.ptr } else { s.off };
                    out.push((Ty::P, ArgSrc::InPtr { off, string }));
                    out.push((Ty::UL, ArgSrc::Local(s.cnt)));
                }
            }
            (Dir::Out, Kind::Ind { .. }) => {
                if let Some(o) = regions.iter().find(|o| std::ptr::eq(o.v, v)) {
                    out.push((Ty::P, ArgSrc::AreaPtr(o.off)));
                    out.push((Ty::P, ArgSrc::RecAddr(foff + 4)));
                }
            }
        }
    }
    out
}

/// Computes the argument `src` into `a`.
fn arg_value<B: Backend>(f: &mut Func<B>, r: &Regs, src: &ArgSrc, a: Reg<UL>) {
    match *src {
        ArgSrc::Prim(pr, foff) => match pr {
            Prim::I32 => {
                f.ld(i32v(a), r.rec, foff);
                f.cv::<I, L>(a.cast(), i32v(a));
            }
            Prim::U32 => f.ldu(a, r.rec, foff),
            Prim::Bool => {
                // Checked before; taken again from the record, so
                // anything but 0 or 1 now is a client racing its own
                // request: keep the handler's bool valid.
                f.lduc(a, r.rec, foff);
                f.and(a, a, 1);
            }
            _ => load_prim(f, pr, a, r.rec, foff),
        },
        ArgSrc::RecAddr(foff) => f.add(pv(a), r.rec, i64::from(foff)),
        ArgSrc::InPtr { off, string: false } => {
            f.ld_local(a, off);
            f.add(pv(a), r.area, pv(a));
        }
        // The private copy's address, kept when the string was copied.
        ArgSrc::InPtr { off, string: true } => f.ld_local(a, off),
        ArgSrc::Local(l) => f.ld_local(a, l),
        ArgSrc::AreaPtr(off) => {
            f.ld_local(a, off);
            f.add(pv(a), r.area, pv(a));
        }
    }
}

/// Register arguments of `p`'s handler call besides the context.
fn handler_regs(p: &OpPlan) -> usize {
    p.values
        .iter()
        .map(|v| match (v.dir, v.kind) {
            (_, Kind::Ind { .. }) => 2,
            (_, Kind::Prim(_)) if v.param.is_none() => 0,
            _ => 1,
        })
        .sum()
}

/// The code of one operation in the dispatch.
fn op_body<B: Backend>(
    f: &mut Func<B>,
    p: &OpPlan,
    h: HandlerRef,
    lim: &Limits,
    r: &Regs,
    x: &Exits,
    fin: Finish,
) -> Result<(), GenError> {
    // Scratch: three pool registers and the key's (dead after the jump).
    let (t, t2, t3, prev) = (r.pool[0], r.pool[1], r.pool[2], r.key);
    let lay = &p.op.layout;
    if lay.request_size > 0 {
        f.blt(r.len, i64::from(lay.request_size), x.short);
    }
    // Descriptors of in and inout strings: once, into private locals.
    let mut ins = Vec::new();
    let mut saved: Option<(Local<UL>, Local<UL>)> = None;
    for v in p.in_record_order().filter(|v| v.dir != Dir::Out) {
        let Kind::Ind { esize, ealign, .. } = v.kind else {
            continue;
        };
        let (esize, foff) = (esize.max(1), v.offset as i32);
        if ins.is_empty() {
            f.set(prev, 0);
        }
        f.ldu(t, r.rec, foff);
        f.ldu(t2, r.rec, foff + 4);
        f.bgt(t2, i64::from(lim.max_string_bytes / esize), x.bad_string);
        if ealign > 1 {
            f.and(t3, t, i64::from(ealign - 1));
            f.bne(t3, 0, x.bad_string);
        }
        f.blt(t, prev, x.bad_string);
        mul_const(f, t3, t2, esize);
        f.add(prev, t, t3);
        f.bgt(prev, r.alen, x.bad_string);
        // The plan's order: the descriptor, then its count (a bad
        // descriptor is `BadString` whatever its count), as the generated
        // Rust and C servers check.
        if let Some(max) = v.count_max {
            f.bgt(t2, i64::from(max), x.bad_value);
        }
        let (off, cnt, ptr) = (f.local::<UL>(), f.local::<UL>(), f.local::<UL>());
        f.st_local(t, off);
        f.st_local(t2, cnt);
        if let Kind::Ind { string: true, .. } = v.kind {
            // The plan's order: a string's text is checked right after its
            // descriptor, before the next descriptor. Copied into the
            // server's private scratch memory (same offset) and checked to
            // be UTF-8 there, so that the handler's text cannot change
            // under it. A call: the running end and the area's length are
            // kept in the stack across it.
            let (saved_prev, saved_alen) = match saved {
                Some(x) => x,
                None => {
                    let x = (f.local::<UL>(), f.local::<UL>());
                    f.st_local(r.alen, x.1);
                    saved = Some(x);
                    x
                }
            };
            f.st_local(prev, saved_prev);
            // `t` holds the offset, `t2` the length; `prev` is free now.
            let (dst, src, ok) = (pv(prev), pv(t3), u32v(t));
            f.add(src, r.area, pv(t));
            r.load_ctx(f, dst);
            f.ld(dst, dst, 0);
            f.add(dst, dst, pv(t));
            f.st_local(prev, ptr);
            let copy = Callee::Native(super::native::str_in as *const () as usize);
            f.call(ok, copy, &[dst.into(), src.into(), t2.into()]);
            f.beq(ok, 0, x.bad_value);
            f.ld_local(prev, saved_prev);
            f.ld_local(r.alen, saved_alen);
        }
        ins.push(InRegion { v, off, cnt, ptr });
    }
    for v in p.in_record_order().filter(|v| v.dir != Dir::Out) {
        if v.kind == Kind::Prim(Prim::Bool) {
            f.lduc(t, r.rec, v.offset as i32);
            f.bgt(t, 1, x.bad_value);
        }
    }
    // Out strings and sequences: the free area after the in strings,
    // split evenly, each region 8-aligned; the handler is told its region
    // through the descriptor it fills ({offset, capacity} in, count out).
    let outs: Vec<&ValuePlan> = p
        .in_record_order()
        .filter(|v| v.dir == Dir::Out && matches!(v.kind, Kind::Ind { .. }))
        .collect();
    let mut regions = Vec::new();
    if !outs.is_empty() {
        if ins.is_empty() {
            f.set(t, 0);
        } else {
            f.add(t, prev, 7);
            f.and(t, t, !7);
        }
        let skip = f.genlabel();
        f.set(t2, 0);
        f.bgt(t, r.alen, skip);
        f.sub(t2, r.alen, t);
        f.label(skip);
        if outs.len() > 1 {
            div_const(f, t2, t2, outs.len() as u32);
        }
        f.and(t2, t2, !7);
        for (i, v) in outs.iter().enumerate() {
            let Kind::Ind { esize, .. } = v.kind else {
                continue;
            };
            let esize = esize.max(1);
            if i > 0 {
                f.add(t, t, t2);
            }
            div_const(f, t3, t2, esize);
            let max = i64::from(lim.max_string_bytes / esize);
            let ok = f.genlabel();
            f.ble(t3, max, ok);
            f.set(t3, max as u64);
            f.label(ok);
            let foff = v.offset as i32;
            f.st(u32v(t), r.rec, foff);
            f.st(u32v(t3), r.rec, foff + 4);
            let (off, cap) = (f.local::<UL>(), f.local::<UL>());
            f.st_local(t, off);
            f.st_local(t3, cap);
            regions.push(OutRegion { v, off, cap });
        }
    }
    // Out scalars and aggregates start zeroed: the client's bytes there
    // are not values of their types.
    for v in p
        .in_record_order()
        .filter(|v| v.dir == Dir::Out && v.param.is_some())
    {
        let foff = v.offset as i32;
        match v.kind {
            Kind::Prim(pr) => {
                f.set(t, 0);
                store_w(f, pr.size(), t, r.rec, foff);
            }
            Kind::Agg { size, .. } if size <= INLINE_COPY => {
                f.set(t, 0);
                let mut i = 0;
                while i < size as i32 {
                    let w = match size as i32 - i {
                        8.. => 8,
                        4..=7 => 4,
                        2..=3 => 2,
                        _ => 1,
                    };
                    store_w(f, w as u32, t, r.rec, foff + i);
                    i += w;
                }
            }
            Kind::Agg { size, .. } => {
                let pa = pv(t);
                f.add(pa, r.rec, i64::from(foff));
                let zero = Callee::Native(super::native::zero_bytes as *const () as usize);
                f.callv(zero, &[pa.into(), Arg::Imm(Ty::UL, i64::from(size))]);
            }
            Kind::Ind { .. } => {}
        }
    }
    // The handler's arguments: the context, then each value in
    // declaration order, then a non-scalar return value's place.
    let srcs = handler_args(p, &ins, &regions);
    if srcs.len() > MAX_HANDLER_ARGS {
        return Err(GenError::TooManyArgs {
            op: p.op.name.clone(),
            needed: srcs.len(),
        });
    }
    // Caller-saved registers first: a callee-saved one costs a save.
    let saved = |x: &Reg<UL>| vcode::host::CALLEE_SAVED_GPR & (1 << x.num()) != 0;
    let mut avail: Vec<Reg<UL>> = r
        .pool
        .iter()
        .copied()
        .filter(|x| !saved(x))
        .chain([r.key, r.len, r.alen])
        .chain(r.pool.iter().copied().filter(saved))
        .take(MAX_HANDLER_REGS)
        .collect();
    // Past the registers, the arguments go through the private spill area
    // (computed and stored first, while every register is free), passed
    // from memory: one register holds the area's address at the call.
    let spill_base = if srcs.len() > avail.len() {
        avail.pop().map(pv)
    } else {
        None
    };
    let in_regs = if spill_base.is_some() {
        avail.len()
    } else {
        srcs.len()
    };
    let mut args = vec![Arg::Imm(Ty::P, h.ctx as i64)];
    if let Some(sb) = spill_base {
        let v = avail.first().copied().unwrap_or(t);
        r.load_ctx(f, sb);
        for (k, (ty, src)) in srcs.iter().enumerate().skip(in_regs) {
            arg_value(f, r, src, v);
            let off = (8 + 8 * (k - in_regs)) as i32;
            f.st(v, sb, off);
            args.push(Arg::Mem {
                ty: *ty,
                base: sb.num(),
                off,
            });
        }
    }
    let mut reg_args = Vec::new();
    for ((ty, src), a) in srcs.iter().zip(avail.iter().copied()).take(in_regs) {
        arg_value(f, r, src, a);
        reg_args.push(Arg::Reg(AnyReg {
            ty: *ty,
            n: a.num(),
        }));
    }
    // Register arguments first, in order, then the spilled ones.
    args.splice(1..1, reg_args);
    let callee = Callee::Native(h.addr);
    match p.ret() {
        Some(ValuePlan {
            kind: Kind::Prim(pr),
            offset,
            ..
        }) => {
            let rv = r.pool[0];
            f.call(rv, callee, &args);
            if *pr == Prim::Bool {
                f.and(rv, rv, 0xff);
                f.not(rv, rv);
                f.xor(rv, rv, 1);
            }
            store_w(f, pr.size(), rv, r.rec, *offset as i32);
        }
        _ => f.callv(callee, &args),
    }
    // Inout strings: the handler's new text goes back in place.
    for s in &ins {
        if let (Dir::InOut, Kind::Ind { string: true, .. }) = (s.v.dir, s.v.kind) {
            let (dst, src) = (pv(t), pv(t3));
            f.ld_local(t2, s.off);
            f.ld_local(src.cast::<UL>(), s.ptr);
            f.add(dst, r.area, pv(t2));
            f.ld_local(t2, s.cnt);
            let copy = Callee::Native(super::native::copy_bytes as *const () as usize);
            f.callv(copy, &[dst.into(), src.into(), t2.into()]);
        }
    }
    for o in &regions {
        let foff = o.v.offset as i32;
        f.ldu(t, r.rec, foff + 4);
        f.ld_local(t2, o.cap);
        f.bgt(t, t2, x.overflow);
        f.ld_local(t2, o.off);
        f.st(u32v(t2), r.rec, foff);
    }
    fin.finish(f, t, Status::Ok as u64 | u64::from(lay.size) << 16);
    Ok(())
}

/// `shm_call`: the request's transport step refused a string (the
/// channel's per-string limit, its strings per message, or its area:
/// which one is worked out again by the caller, off the hot path).
pub const ERR_CHANNEL_PUT: i64 = -6;
/// `shm_call`: the channel is closed (by either side).
pub const ERR_CLOSED: i64 = -7;
/// `shm_call`: the out-of-line wait failed; its error is kept in the
/// client end.
pub const ERR_WAIT: i64 = -8;
/// `shm_call`: the reply is longer than the message buffer.
pub const ERR_REPLY_LONG: i64 = -9;
/// `shm_call`: the reply's status is not `Ok`; the code is
/// `ERR_STATUS - status`.
pub const ERR_STATUS: i64 = -0x1_0000;

/// Generates `shm_call(slots: *mut u64, ch: *mut GenClient) -> i64` for `p`:
/// one function that makes the whole call on an `rt::shm` channel, the
/// protocol of `rt/shm.rs` spelled out in vcode:
///
/// 1. **marshal**, as [`marshal`] does, but with in strings and sequences
///    copied into the channel's string area directly (the checks of
///    `ClientEnd::put`: the per-string limit, strings per message, room in
///    the area; any refusal is [`ERR_CHANNEL_PUT`]);
/// 2. **post**: the key and the length into the descriptor line, then the
///    state word exchanged for `REQUEST` (`swap32`, a full barrier: the
///    record is visible before the state). A closed channel is
///    [`ERR_CLOSED`] (checked before the exchange, and after it a close
///    that raced it is put back);
/// 3. **wait**: when the waiting rule is quiet ([`GenClient::quiet`]:
///    polling allowed, nothing to record) one inline poll of the state;
///    otherwise, or if the reply is not there yet, or if the post found
///    the server asleep (it is woken there), one call of the out-of-line
///    [`gen_wait`](crate::rt::shm::gen_wait), which follows the adaptive
///    rule, the timeout and the liveness watch of `rt::shm` exactly;
/// 4. **take**: the status and the reply's length (`ERR_STATUS - status`,
///    [`ERR_REPLY_LONG`]);
/// 5. **unmarshal**, as [`unmarshal`] does, with the reply's string
///    descriptors checked against the channel's area and per-string limit
///    inline (`ClientEnd::reply_bytes`'s checks; [`ERR_REPLY_STRING`]).
///
/// Returns 0 or a negative code; the codes of [`marshal`] and
/// [`unmarshal`] keep their meaning. Native x86-64 only (the atomic
/// exchange), which `Atomic::atomic_available` tells.
pub fn shm_call<B: Backend>(f: &mut Func<B>, p: &OpPlan, lim: &Limits) -> vcode::Result<B::Code> {
    use crate::rt::shm::{CLOSED, GenClient as G, REPLY, REQUEST};
    use vcode::ext::Atomic;
    const REC: i32 = 8;
    let ins: Vec<&ValuePlan> = p.in_record_order().filter(|v| v.dir != Dir::Out).collect();
    let outs: Vec<&ValuePlan> = p.in_record_order().filter(|v| v.dir != Dir::In).collect();
    let a = f.lambda("%p%p", Leaf::No)?;
    f.name(format!("idl_shm_call_{}", p.op.name));
    let slots = keep(f, a.get::<P>(0)?)?;
    let ch = keep(f, a.get::<P>(1)?)?;
    let line = f.getreg::<P>(Class::Persistent)?;
    f.ld(line, ch, G::LINE);
    let t = f.getreg::<UL>(Class::Temp)?;
    let t2 = f.getreg::<UL>(Class::Temp)?;
    let t3 = f.getreg::<UL>(Class::Temp)?;
    let pa = f.getreg::<P>(Class::Temp)?;
    let pb = f.getreg::<P>(Class::Temp)?;
    let (err_long, err_count, err_chan) = (f.genlabel(), f.genlabel(), f.genlabel());
    let (err_closed, err_wait, err_rlong, err_status) =
        (f.genlabel(), f.genlabel(), f.genlabel(), f.genlabel());
    let (err_str, err_bool) = (f.genlabel(), f.genlabel());
    // 1. The strings, straight into the area (`used` is its first free
    // byte; the request starts it empty).
    let mut descs = Vec::new();
    let used = f.local::<UL>();
    let nstr = ins
        .iter()
        .filter(|v| matches!(v.kind, Kind::Ind { .. }))
        .count();
    if nstr > 0 {
        f.set(t, 0);
        f.st_local(t, used);
        // Strings per message: the k-th string needs k < max_strings.
        f.ld(t, ch, G::MAX_STRINGS);
        f.blt(t, nstr as i64, err_chan);
    }
    for v in &ins {
        let Kind::Ind { esize, ealign, .. } = v.kind else {
            continue;
        };
        let (slot, esize) = (8 * v.slot as i32, esize.max(1));
        f.ld(t, slots, slot + 8);
        if let Some(max) = v.count_max {
            f.bgt(t, i64::from(max), err_count);
        }
        f.bgt(t, i64::from(lim.max_string_bytes / esize), err_long);
        mul_const(f, t2, t, esize);
        // The channel's per-string limit.
        f.ld(t3, ch, G::MAX_STRING_BYTES);
        f.bgt(t2, t3, err_chan);
        // at = used rounded up to the element's alignment.
        f.ld_local(t, used);
        if ealign > 1 {
            f.add(t, t, i64::from(ealign - 1));
            f.and(t, t, !i64::from(ealign - 1));
        }
        // Room: at <= area_len and bytes <= area_len - at.
        f.ld(t3, ch, G::AREA_LEN);
        f.bgt(t, t3, err_chan);
        f.sub(t3, t3, t);
        f.bgt(t2, t3, err_chan);
        let d = f.local::<UL>();
        f.st_local(t, d);
        f.add(t3, t, t2);
        f.st_local(t3, used);
        f.ld(pb, ch, G::AREA);
        f.add(pb, pb, pv(t));
        f.ld(pa, slots, slot);
        let copy = Callee::Native(super::native::copy_bytes as *const () as usize);
        f.callv(copy, &[pb.into(), pa.into(), t2.into()]);
        // The descriptor: offset in the low word, count in the high.
        f.ld_local(t, d);
        f.ld(t2, slots, slot + 8);
        f.lsh(t2, t2, 32);
        f.or(t2, t2, t);
        f.st_local(t2, d);
        descs.push((v.offset, d));
    }
    // Every in and inout value at its field, with its width.
    store_ins(f, &ins, &descs, slots, (line, REC), (t, pa, pb));
    // 2. Post: the key and the length (one 32-bit store of both words),
    // then the state.
    f.set(
        t,
        u64::from(p.op.key) | u64::from(p.op.layout.request_size as u16) << 16,
    );
    f.st(u32v(t), line, 4);
    // A channel closed, or closed after a reply this end has taken
    // (`REPLY_CLOSED`), takes no more requests: with the waiter bit off,
    // IDLE, REQUEST and REPLY are below CLOSED, and any value with
    // REPLY_CLOSED is above it (so is a value no side writes: the peer's
    // garbage is taken for a close). One unsigned compare.
    f.ldu(t, line, 0);
    f.and(t, t, i64::from(!WAITER_BIT));
    f.bge(t, i64::from(CLOSED), err_closed);
    f.set(t, u64::from(REQUEST));
    f.swap32(t, line, 0);
    let closed_race = f.genlabel();
    f.and(t2, t, i64::from(!WAITER_BIT));
    f.bge(t2, i64::from(CLOSED), closed_race);
    // 3. Wait.
    let (slow, take) = (f.genlabel(), f.genlabel());
    f.rsh(t, t, 31);
    f.bne(t, 0, slow);
    f.ld(t2, ch, G::QUIET);
    f.beq(t2, 0, slow);
    f.ldu(t2, line, 0);
    f.and(t2, t2, i64::from(!WAITER_BIT));
    f.beq(t2, i64::from(REPLY), take);
    f.label(slow);
    // `t` is 1 when the post found the server asleep, else 0.
    let wait = Callee::Native(crate::rt::shm::gen_wait as *const () as usize);
    f.call(t.cast::<L>(), wait, &[ch.into(), t.into()]);
    f.bne(t.cast::<L>(), 0, err_wait);
    // 4. Take: the status, then the length.
    f.label(take);
    f.ldus(t, line, 4);
    f.bne(t, Status::Ok as i64, err_status);
    f.ldus(t, line, 6);
    f.ld(t2, ch, G::CAPACITY);
    f.bgt(t, t2, err_rlong);
    // 5. Unmarshal.
    for v in outs {
        let (slot, foff) = (8 * v.slot as i32, REC + v.offset as i32);
        match v.kind {
            Kind::Prim(_) | Kind::Agg { .. } => {
                load_fixed_out(f, v, slots, (line, foff), (t, pa, pb), err_bool);
            }
            Kind::Ind { esize, ealign, .. } => {
                // The descriptor is read once: the count goes to its slot
                // before its bytes are checked against the area.
                f.ldu(t, line, foff);
                f.ldu(t2, line, foff + 4);
                if ealign > 1 {
                    f.and(t3, t, i64::from(ealign - 1));
                    f.bne(t3, 0, err_str);
                }
                f.st(t2, slots, slot + 8);
                mul_const(f, t3, t2, esize.max(1));
                f.ld(t2, ch, G::MAX_STRING_BYTES);
                f.bgt(t3, t2, err_str);
                f.ld(t2, ch, G::AREA_LEN);
                f.bgt(t, t2, err_str);
                f.sub(t2, t2, t);
                f.bgt(t3, t2, err_str);
                f.ld(pa, ch, G::AREA);
                f.add(pa, pa, pv(t));
                f.st(pa, slots, slot);
            }
        }
    }
    let r = t.cast::<L>();
    f.set(r, 0);
    f.ret(r);
    // A close that raced the exchange: closed is final, put it back.
    f.label(closed_race);
    f.set(t, u64::from(CLOSED));
    f.swap32(t, line, 0);
    f.jmp(err_closed);
    // `t` holds the status as read (not read again: the server may
    // change it meanwhile).
    f.label(err_status);
    f.neg(r, r);
    f.add(r, r, ERR_STATUS);
    f.ret(r);
    for (l, code) in [
        (err_long, ERR_LONG),
        (err_count, ERR_COUNT),
        (err_chan, ERR_CHANNEL_PUT),
        (err_closed, ERR_CLOSED),
        (err_wait, ERR_WAIT),
        (err_rlong, ERR_REPLY_LONG),
        (err_str, ERR_REPLY_STRING),
        (err_bool, ERR_REPLY_BOOL),
    ] {
        f.label(l);
        f.set(r, code);
        f.ret(r);
    }
    f.end()
}

/// `shm_serve`: no request is waiting (or the waiting rule wants its
/// wait recorded): the caller blocks out of line, then calls again with
/// `waited` set.
pub const SERVE_BLOCK: i64 = 1;
/// `shm_serve`: the channel is closed.
pub const SERVE_CLOSED: i64 = -1;

/// Generates `shm_serve(ch: *mut GenServer, waited: u64) -> i64`, the
/// server's dispatch-and-reply loop on an `rt::shm` channel, with the
/// dispatch of `plans` (as [`dispatch`] generates it, the handlers
/// `handlers`) inlined into it: one function, one frame.
///
/// 1. **take**: unless `waited` (the caller's out-of-line wait saw a
///    request), a request is taken only when the waiting rule is quiet
///    and the state says `REQUEST` at the first look; otherwise it returns
///    [`SERVE_BLOCK`]. A length over the message buffer is answered
///    `ShortMessage` (as `ServerEnd::wait` does);
/// 2. **dispatch**: the key's bound check and jump table, then the
///    operation's checks (every check of the plan) and its handler,
///    called directly, on the record in place, as [`dispatch`] does; each
///    path ends with `status | len << 16` and goes to the reply;
/// 3. **reply**: that value as the status and length words (one 32-bit
///    store), then the state exchanged for `REPLY`; a client found asleep
///    is woken, and a post the waiting rule must record is recorded, by
///    the out-of-line [`gen_posted`](crate::rt::shm::gen_posted); a
///    closed channel is [`SERVE_CLOSED`];
/// 4. back to 1 (the quiet flag just read needs no second look).
///
/// Native x86-64 only (the atomic exchange). The caller makes sure the
/// channel's buffer holds every record of the interface.
pub fn shm_serve<B: Backend>(
    f: &mut Func<B>,
    plans: &[OpPlan],
    handlers: &[Option<HandlerRef>],
    lim: &Limits,
) -> Result<B::Code, GenError> {
    use crate::rt::shm::{CLOSED, GenServer as G, REPLY, REQUEST};
    use vcode::ext::Atomic;
    // The descriptor line relative to the record, which starts 8 bytes
    // into it: the state word, the key or status, the length.
    const STATE: i32 = -8;
    const WORD: i32 = -4;
    const LEN: i32 = -2;
    let a = f.lambda("%p%ul", Leaf::No)?;
    f.name("idl_shm_serve");
    let ch = keep(f, a.get::<P>(0)?)?;
    let waited = a.get::<UL>(1)?;
    // Persistent: the view, the record and the string area (the handlers
    // are called with them live).
    let rec = f.getreg::<P>(Class::Persistent)?;
    f.ld(rec, ch, G::LINE);
    f.add(rec, rec, 8);
    let area = f.getreg::<P>(Class::Persistent)?;
    f.ld(area, ch, G::AREA);
    let (top, poll, take, block, short, reply, posted) = (
        f.genlabel(),
        f.genlabel(),
        f.genlabel(),
        f.genlabel(),
        f.genlabel(),
        f.genlabel(),
        f.genlabel(),
    );
    let (closed, closed_race) = (f.genlabel(), f.genlabel());
    f.bne(waited, 0, take);
    f.putreg(waited);
    let key = f.getreg::<UL>(Class::Temp)?;
    let len = f.getreg::<UL>(Class::Temp)?;
    let alen = f.getreg::<UL>(Class::Temp)?;
    let r = Regs {
        key,
        len,
        alen,
        rec,
        area,
        ctx: CtxAt::Field(ch, G::DCTX),
        pool: dispatch_pool(f, plans, handlers)?,
    };
    let res = r.pool[0];
    // 1. Take. The state word is a `u32` (zero-extended), so masking the
    // waiter bit off is an `and` with an immediate.
    f.label(top);
    f.ld(key, ch, G::QUIET);
    f.beq(key, 0, block);
    f.label(poll);
    f.ldu(key, rec, STATE);
    f.and(key, key, i64::from(!WAITER_BIT));
    f.bne(key, i64::from(REQUEST), block);
    f.label(take);
    f.ldus(len, rec, LEN);
    f.ld(alen, ch, G::CAPACITY);
    f.bgt(len, alen, short);
    f.ldus(key, rec, WORD);
    f.ld(alen, ch, G::AREA_LEN);
    // 2. Dispatch, in line.
    dispatch_body(f, plans, handlers, lim, &r, Finish::Jump(reply))?;
    f.label(short);
    f.set(res, Status::ShortMessage as u64);
    // 3. Reply: status and length, then the state.
    f.label(reply);
    let (t, t2) = (key, len);
    f.st(u32v(res), rec, WORD);
    f.ldu(t, rec, STATE);
    f.and(t, t, i64::from(!WAITER_BIT));
    f.beq(t, i64::from(CLOSED), closed);
    f.set(t, u64::from(REPLY));
    f.swap32(t, rec, STATE);
    f.and(t2, t, i64::from(!WAITER_BIT));
    f.beq(t2, i64::from(CLOSED), closed_race);
    f.rsh(t, t, 31);
    f.bne(t, 0, posted);
    f.ld(t2, ch, G::QUIET);
    f.bne(t2, 0, poll);
    f.label(posted);
    // `t` is 1 when the client slept, else 0.
    let post = Callee::Native(crate::rt::shm::gen_posted as *const () as usize);
    f.callv(post, &[ch.into(), t.into()]);
    f.jmp(top);
    f.label(block);
    let out = t.cast::<L>();
    f.set(out, SERVE_BLOCK);
    f.ret(out);
    f.label(closed_race);
    f.set(t, u64::from(CLOSED));
    f.swap32(t, rec, STATE);
    f.label(closed);
    f.set(out, SERVE_CLOSED);
    f.ret(out);
    Ok(f.end()?)
}

/// The state word's waiter bit as a `u32`: the generated code loads the
/// state zero-extended, so `!WAITER_BIT` (0x7fff_ffff) masks it off with
/// an immediate (the 64-bit `!WAITER` would need a register).
const WAITER_BIT: u32 = crate::rt::shm::WAITER;
