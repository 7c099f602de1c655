//! What the native backends share, so that a target's file holds only
//! its encodings and its convention's tables (with the argument layout,
//! `ConvTables::layout` in `abi.rs`, the frame's save slots, `slots.rs`,
//! the register names, `host.rs`, and the generated function and how it
//! runs, `code.rs`):
//!
//! * the [`Backend`] methods every native target writes alike
//!   ([`native_backend_methods!`]: code offset, instruction index, errors
//!   between instructions, locals, entry, `end`);
//! * the order of a call ([`emit_call`], the target's encodings behind
//!   [`CallEmit`]), of its argument placement and of the entry's
//!   parameter moves ([`CallLayout`], [`place_args`], [`move_params`],
//!   behind [`ArgEmit`]), and parallel moves;
//! * the per-function state ([`FuncState`]: locals, constant pool,
//!   alignment, return type and its check, and the frame: whether there
//!   is one, the registers it saves, its size);
//! * the errors of labels at `end` ([`label_error`], [`check_tables`]);
//! * the agreement of every target's register roles with the shared
//!   allocator.

use crate::abi::{ArgLoc, ConvTables};
use crate::backend::{Arg, Backend, Callee, Target, check_call, param_local_ok, param_slot_off};
use crate::buf::Buf;
use crate::code::Code;
use crate::error::{Error, ErrorKind};
use crate::regs::RegAlloc;
use crate::sig::Signature;
use crate::slots::{SAVE_AREA, bit, xmm_call_slot};
use crate::ty::{AnyReg, MAX_PARAMS, Ty};

/// Orders `dst <- src` register moves so that none overwrites a source
/// another still reads, breaking cycles through the scratch register
/// `tmp`; `mov(dst, src)` writes one move.
pub(crate) fn parallel_move(moves: &mut Vec<(u8, u8)>, tmp: u8, mut mov: impl FnMut(u8, u8)) {
    moves.retain(|&(d, s)| d != s);
    while !moves.is_empty() {
        // A move whose destination no other pending move reads.
        if let Some(i) = (0..moves.len()).find(|&i| !moves.iter().any(|&(_, s)| s == moves[i].0)) {
            let (d, s) = moves.swap_remove(i);
            mov(d, s);
        } else {
            // Only cycles remain: park one source in the scratch register.
            let (_, s) = moves[0];
            mov(tmp, s);
            for mv in moves.iter_mut() {
                if mv.1 == s {
                    mv.1 = tmp;
                }
            }
        }
    }
}

/// The [`Backend`](crate::Backend) methods every native target writes
/// alike, for a backend with the fields `buf` ([`Buf`](crate::buf::Buf))
/// and `st` ([`FuncState`]) and the inherent methods `enter` (section 6:
/// the reset of the target's own per-function state, inline into
/// `lambda`) and `link` (`end`): the code offset and the next
/// instruction's index, an error between instructions, a new local, the
/// entry (resets, parameter moves) and `end`. A
/// target writes `native_backend_methods!();` in its `impl Backend` and
/// the instruction methods beside it.
macro_rules! native_backend_methods {
    () => {
        // Inline (into `lambda`): a dozen stores, not worth a call.
        #[inline]
        fn begin(
            &mut self,
            sig: &$crate::sig::Signature,
            params: &[$crate::ty::AnyReg],
            moves: bool,
        ) {
            self.buf.reset();
            self.st.reset();
            self.enter();
            if moves {
                let t = <Self::Conv as $crate::abi::CallConv>::get().tables();
                $crate::common::move_params(self, t, sig, params);
            }
        }

        fn code_offset(&self) -> usize {
            self.buf.pos()
        }

        fn next_index(&self) -> u32 {
            self.buf.next_index()
        }

        fn fail(&mut self, method: &'static str, kind: $crate::error::ErrorKind) {
            self.buf.fail_next(method, kind)
        }

        fn local(&mut self, ty: $crate::ty::Ty) -> (i32, u32) {
            self.st.local(ty)
        }

        #[inline]
        fn finish(
            &mut self,
            alloc: &$crate::regs::RegAlloc,
            sig: &'static $crate::sig::Signature,
            name: Option<String>,
            mem: Option<&dyn $crate::mem::ExecMemory>,
        ) -> Result<Self::Code, $crate::error::Error> {
            self.link(alloc, sig, name, mem)
        }
    };
}
pub(crate) use native_backend_methods;

/// The error `end` reports for a reference to `label` by instruction
/// `index` (client method `method`: a branch, a jump, a jump table's
/// entry): the label is not placed, or, if not `known`, is none of the
/// function's labels.
#[cold]
#[inline(never)]
pub(crate) fn label_error(index: u32, method: &'static str, label: u32, known: bool) -> Error {
    let kind = if known {
        ErrorKind::UnplacedLabel { label }
    } else {
        ErrorKind::UnknownLabel { label }
    };
    Error::new(index, method, kind)
}

/// Checks at `end` that every jump-table entry, `(label, instruction
/// index, method)`, names a placed label (`placed(label)`: `None` for a
/// label the function never made): the first that does not is the error.
#[cold]
#[inline(never)]
pub(crate) fn check_tables(
    entries: impl IntoIterator<Item = (u32, u32, &'static str)>,
    placed: impl Fn(u32) -> Option<bool>,
) -> Result<(), Error> {
    for (label, index, method) in entries {
        match placed(label) {
            Some(true) => {}
            found => return Err(label_error(index, method, label, found.is_some())),
        }
    }
    Ok(())
}

/// Records `ty` as the function's return type at its first `ret`, and
/// refuses a later `ret` of another type.
#[inline(always)]
pub(crate) fn note_ret(ret_ty: &mut Option<Ty>, ty: Ty) -> Result<(), ErrorKind> {
    match *ret_ty {
        None => *ret_ty = Some(ty),
        Some(t) if t != ty => {
            return Err(ErrorKind::TypeMismatch {
                expected: t,
                found: ty,
            });
        }
        _ => {}
    }
    Ok(())
}

// The register allocator, the fixed names and `lambda` are shared by
// every target: each target's register numbers must play the same roles.
const _: () = {
    use crate::aarch64::regfile as a;
    use crate::x86_64::regfile as x;
    assert!(a::RESERVED_GPR == x::RESERVED_GPR);
    assert!(a::RESERVED_XMM == x::RESERVED_XMM);
    assert!(a::CALLEE_SAVED_GPR == x::CALLEE_SAVED_GPR);
    assert!(a::NUM_T == x::NUM_T && a::NUM_S == x::NUM_S && a::NUM_FT == x::NUM_FT);
    let mut k = 0;
    while k < x::TEMP_ORDER.len() {
        assert!(a::TEMP_ORDER[k] == x::TEMP_ORDER[k]);
        k += 1;
    }
    k = 0;
    while k < x::NUM_T {
        assert!(a::FIXED_T[k] == x::FIXED_T[k]);
        k += 1;
    }
    k = 0;
    while k < x::NUM_S {
        assert!(a::FIXED_S[k] == x::FIXED_S[k]);
        k += 1;
    }
    k = 0;
    while k < x::PERSIST_ORDER.len() {
        assert!(a::PERSIST_ORDER[k] == x::PERSIST_ORDER[k]);
        k += 1;
    }
};

/// The encodings a target supplies for the target-neutral parts of a
/// call ([`place_args`]) and of a function's entry ([`move_params`]).
/// Register numbers are vcode's (the convention's tables'); a target
/// maps them to its own.
pub(crate) trait ArgEmit {
    /// The backend's code buffer.
    fn buf(&mut self) -> &mut Buf;
    /// The backend's per-function state.
    fn st(&mut self) -> &mut FuncState;
    /// Stores argument `a` into the 8-byte slot `disp` bytes above the
    /// stack pointer (a value from memory goes through a scratch
    /// register, zero-extended).
    fn store_arg(&mut self, a: Arg, disp: i32);
    /// Moves `dst <- src` register pairs of one file at once.
    fn move_args(&mut self, moves: &mut Vec<(u8, u8)>, float: bool);
    /// Sets register `d` to the bits `v` of an immediate of type `ty`.
    fn imm_arg(&mut self, m: &'static str, ty: Ty, d: u8, v: i64);
    /// Loads register `d` (of type `ty`'s file) from the 8-byte slot
    /// `disp` bytes above the frame pointer (`frame`) or the stack
    /// pointer.
    fn load_slot(&mut self, ty: Ty, d: u8, frame: bool, disp: i32);
    /// `d <- s` in type `ty`'s file, the whole register.
    fn move_reg(&mut self, ty: Ty, d: u8, s: u8);
}

/// What a call's shared sequence ([`emit_call`]) needs from a target
/// beyond [`ArgEmit`]: room, the callee's address in the target's call
/// register, a float register's save, the stack adjustment around the
/// call and the call itself, and the result's move.
pub(crate) trait CallEmit: ArgEmit + Backend<Code = Code<Self>> {
    /// Makes room for the code of a call with `nargs` arguments (and
    /// anything the target must place before it).
    fn call_reserve(&mut self, m: &'static str, nargs: usize);
    /// Ends the call's long sequence: the instruction budget resynchronised.
    fn call_resync(&mut self, m: &'static str);
    /// Puts the callee's address ([`Target::Addr`]) or the address in a
    /// `p` register ([`Target::Reg`]) into the register the call goes
    /// through, before the argument moves may clobber it.
    fn load_callee(&mut self, t: Target);
    /// Stores float register `n` (8 bytes) in the frame, `disp` bytes
    /// from the frame pointer (restored by [`ArgEmit::load_slot`]).
    fn save_float(&mut self, n: u8, disp: i32);
    /// Reserves `reserve` bytes below the stack pointer (none if 0) for
    /// the stack arguments, after saving what the target keeps across a
    /// call (aarch64: the link register).
    fn enter_call(&mut self, reserve: i32);
    /// Calls through the callee's register and undoes
    /// [`enter_call`](CallEmit::enter_call).
    fn make_call(&mut self, reserve: i32);
    /// Moves the call's result (of type `r.ty`, not `v`) into `r`.
    fn take_result(&mut self, r: AnyReg);
}

/// A call, in the order every target writes it: the checks, the
/// callee's address, the persistent float registers saved (the
/// conventions have no callee-saved float registers vcode uses), the
/// arguments placed by the convention `t` ([`place_args`]), the call,
/// the result, and the float registers restored (but the result's). The
/// target has started the instruction.
#[inline]
pub(crate) fn emit_call<E: CallEmit>(
    e: &mut E,
    m: &'static str,
    t: &'static ConvTables,
    callee: Callee<'_, Code<E>>,
    args: &[Arg],
    ret: Option<AnyReg>,
    alloc: &RegAlloc,
) {
    let sig = match &callee {
        Callee::Code(c) => Some(c.sig),
        Callee::Native(_) | Callee::Reg(_) => None,
    };
    if let Err(kind) = check_call(alloc.leaf, sig, args) {
        return e.buf().fail(m, kind);
    }
    e.call_reserve(m, args.len());
    e.st().frame = true;
    e.load_callee(match callee {
        Callee::Native(a) => Target::Addr(a),
        Callee::Code(c) => Target::Addr(c.addr()),
        Callee::Reg(r) => Target::Reg(r),
    });
    let persist = alloc.persist_xmm;
    for n in 0..16u8 {
        if persist & (1 << n) != 0 {
            e.save_float(n, xmm_call_slot(n));
        }
    }
    // The stack arguments go in an area reserved below the stack pointer
    // for this call (16-byte aligned) and released after it, so that a
    // call is right wherever the stack pointer is: in the body, or in a
    // subroutine entered by `jal`.
    let lay = CallLayout::new(t, args);
    let reserve = lay.reserve();
    e.enter_call(reserve);
    place_args(e, m, args, &lay);
    e.make_call(reserve);
    if let Some(r) = ret
        && r.ty != Ty::V
    {
        e.take_result(r);
    }
    for n in 0..16u8 {
        if persist & (1 << n) != 0 && ret.is_none_or(|r| !(r.ty.is_float() && r.n == n)) {
            e.load_slot(Ty::D, n, true, xmm_call_slot(n));
        }
    }
    e.call_resync(m);
}

/// Where a call's arguments go: their locations by the convention, the
/// stack slots they take, and the staging slots above those for the
/// arguments from memory bound for a register (reloaded after the
/// register moves, whose destinations may be their base registers).
pub(crate) struct CallLayout {
    locs: [ArgLoc; MAX_PARAMS],
    stack: usize,
    staged: usize,
}

impl CallLayout {
    /// The layout of `args` (at most [`MAX_PARAMS`], as `check_call`
    /// ensures) by the convention `t`.
    #[inline]
    pub(crate) fn new(t: &'static ConvTables, args: &[Arg]) -> CallLayout {
        let mut tys = [Ty::V; MAX_PARAMS];
        for (t, a) in tys.iter_mut().zip(args) {
            *t = a.ty();
        }
        let mut lay = CallLayout {
            locs: [ArgLoc::Stack(0); MAX_PARAMS],
            stack: 0,
            staged: 0,
        };
        let n = args.len().min(MAX_PARAMS);
        for ((o, loc), a) in lay.locs.iter_mut().zip(t.layout(&tys[..n])).zip(args) {
            *o = loc;
            match loc {
                ArgLoc::Stack(_) => lay.stack += 1,
                ArgLoc::Reg(_) if matches!(a, Arg::Mem { .. }) => lay.staged += 1,
                ArgLoc::Reg(_) => {}
            }
        }
        lay
    }

    /// Bytes the call reserves below the stack pointer for its stack and
    /// staging slots, 16-byte aligned.
    pub(crate) fn reserve(&self) -> i32 {
        (8 * (self.stack + self.staged) as i32 + 15) & !15
    }
}

/// Puts a call's arguments where `lay` says, once the target has
/// reserved [`CallLayout::reserve`] bytes below the stack pointer:
/// stack arguments and staged values first (destinations are memory, so
/// order does not matter), then a parallel move per register file,
/// immediates, and the staged values' reloads.
pub(crate) fn place_args<E: ArgEmit>(e: &mut E, m: &'static str, args: &[Arg], lay: &CallLayout) {
    let locs = &lay.locs[..args.len().min(MAX_PARAMS)];
    let mut stage = lay.stack;
    for (a, &loc) in args.iter().zip(locs) {
        let disp = match loc {
            ArgLoc::Stack(slot) => 8 * slot as i32,
            ArgLoc::Reg(_) if matches!(a, Arg::Mem { .. }) => {
                stage += 1;
                8 * (stage - 1) as i32
            }
            ArgLoc::Reg(_) => continue,
        };
        e.store_arg(*a, disp);
    }
    let mut gmoves: Vec<(u8, u8)> = Vec::new();
    let mut fmoves: Vec<(u8, u8)> = Vec::new();
    for (a, &loc) in args.iter().zip(locs) {
        if let (Arg::Reg(r), ArgLoc::Reg(d)) = (*a, loc) {
            if r.ty.is_float() {
                fmoves.push((d, r.n))
            } else {
                gmoves.push((d, r.n))
            }
        }
    }
    e.move_args(&mut gmoves, false);
    e.move_args(&mut fmoves, true);
    for (a, &loc) in args.iter().zip(locs) {
        if let (Arg::Imm(t, v), ArgLoc::Reg(d)) = (*a, loc) {
            e.imm_arg(m, t, d, v);
        }
    }
    let mut stage = lay.stack;
    for (a, &loc) in args.iter().zip(locs) {
        if let (Arg::Mem { ty, .. }, ArgLoc::Reg(d)) = (*a, loc) {
            e.load_slot(ty, d, false, 8 * stage as i32);
            stage += 1;
        }
    }
}

/// Copies the parameters that arrive elsewhere (on the stack, or in a
/// register the backend keeps) into the registers `params` gives them,
/// by the convention `t`, at the start of the body; notes in the
/// per-function state whether that needs a frame and the parameters kept
/// in their stack slots (a bit per index), read later through the frame
/// pointer. Out of line: a target's `enter` is inlined into `lambda`,
/// and most signatures need no moves.
#[inline(never)]
pub(crate) fn move_params<E: ArgEmit>(
    e: &mut E,
    t: &'static ConvTables,
    sig: &Signature,
    params: &[AnyReg],
) {
    e.buf().reserve("lambda", 16 * params.len());
    let (mut frame, mut param_mem) = (false, 0);
    for (i, (&r, loc)) in params.iter().zip(t.layout(sig.params())).enumerate() {
        match loc {
            ArgLoc::Stack(_) if r.n == crate::Params::IN_MEMORY => {
                frame = true;
                param_mem |= 1 << i;
            }
            ArgLoc::Reg(n) if n != r.n => e.move_reg(r.ty, r.n, n),
            ArgLoc::Reg(_) => {}
            ArgLoc::Stack(slot) => {
                frame = true;
                e.load_slot(r.ty, r.n, true, param_slot_off(slot));
            }
        }
    }
    let st = e.st();
    st.frame |= frame;
    st.param_mem = param_mem;
    e.buf().rebase();
}

/// The per-function state every native backend keeps beside its buffer
/// and labels: the constants and data placed after the code, the locals,
/// the parameters kept in memory, whether the function needs a frame,
/// its return type, the last label placed, the largest alignment asked
/// for, and the backend's run of executable memory. `lambda` resets it
/// ([`FuncState::reset`], inline).
pub(crate) struct FuncState {
    /// Constants and data in 8-byte slots (a target may number them from
    /// a base: aarch64 places them in islands as it goes).
    pub(crate) pool: Vec<u8>,
    /// Bytes of locals below the save area.
    pub(crate) locals: i32,
    pub(crate) nlocals: u32,
    /// The parameters (a bit per index) kept in their incoming stack
    /// slots, which [`PARAM_LOCAL`](crate::backend::PARAM_LOCAL) locals
    /// may name.
    pub(crate) param_mem: u32,
    /// True once the function needs a frame (a local, a call, a
    /// parameter read from its stack slot).
    pub(crate) frame: bool,
    /// The type of the function's first `ret`.
    pub(crate) ret_ty: Option<Ty>,
    /// The position of the label placed last (0 when none is).
    pub(crate) last_place: u32,
    /// The largest alignment a body position was padded to (`align`).
    pub(crate) align: usize,
    /// This backend's run of the thread's executable arena (batch
    /// allocation: no thread-local lookup per function).
    pub(crate) slab: crate::mem::Slab,
}

impl FuncState {
    pub(crate) fn new() -> FuncState {
        FuncState {
            pool: Vec::new(),
            locals: 0,
            nlocals: 0,
            param_mem: 0,
            frame: false,
            ret_ty: None,
            last_place: 0,
            align: 1,
            slab: crate::mem::Slab::default(),
        }
    }

    /// Forgets the previous function (the pool keeps its capacity).
    #[inline(always)]
    pub(crate) fn reset(&mut self) {
        self.pool.clear();
        self.locals = 0;
        self.nlocals = 0;
        self.param_mem = 0;
        self.frame = false;
        self.ret_ty = None;
        self.last_place = 0;
        self.align = 1;
    }

    /// A new local of type `ty` below the save area, aligned to its size:
    /// its frame offset and number.
    #[inline]
    pub(crate) fn local(&mut self, ty: Ty) -> (i32, u32) {
        let size = ty.size().max(1) as i32;
        self.locals = (self.locals + size + size - 1) & !(size - 1);
        self.nlocals += 1;
        (-SAVE_AREA - self.locals, self.nlocals - 1)
    }

    /// Checks a use of the local `(off, id)`: true, and the function
    /// noted as needing a frame, if it is one of the function's own or a
    /// parameter kept in its stack slot (checked out of line); false for
    /// any other handle (the caller's `UnknownLocal`). x86-64 calls it
    /// only out of line, after its own inline check of the function's
    /// locals: used inline on every local's load and store (returning a
    /// `Result` then), it cost the x86-64 template client 7%.
    #[inline(always)]
    pub(crate) fn use_local(&mut self, off: i32, id: u32) -> bool {
        if !self.local_ok(off, id) && !self.param_local_ok(off, id) {
            return false;
        }
        self.frame = true;
        true
    }

    /// True if `(off, id)` is one of this function's locals.
    #[inline(always)]
    pub(crate) fn local_ok(&self, off: i32, id: u32) -> bool {
        id < self.nlocals && off >= -SAVE_AREA - self.locals && off <= -SAVE_AREA
    }

    /// True if `(off, id)` is a parameter kept in its stack slot. Out of
    /// line: the common path of a local's use checks only the function's
    /// own locals.
    #[cold]
    #[inline(never)]
    pub(crate) fn param_local_ok(&self, off: i32, id: u32) -> bool {
        param_local_ok(self.param_mem, off, id)
    }

    /// Appends `bytes` to the pool in whole 8-byte slots: the first
    /// slot's number, counted from `base`.
    pub(crate) fn data(&mut self, base: u32, bytes: &[u8]) -> u32 {
        let slot = base + (self.pool.len() / 8) as u32;
        self.pool.extend_from_slice(bytes);
        self.pool.resize(self.pool.len().next_multiple_of(8), 0);
        slot
    }

    /// Records `ty` as the return type at the first `ret`, refuses a
    /// later `ret` of another type.
    #[inline(always)]
    pub(crate) fn note_ret(&mut self, ty: Ty) -> Result<(), ErrorKind> {
        note_ret(&mut self.ret_ty, ty)
    }

    /// The callee-saved registers the frame saves (integer, float): those
    /// the allocator says the function claimed or wrote, but the register
    /// that carries the result out (`ret_gpr`, the convention's integer
    /// result register by vcode number, or float 0), which a restore
    /// would overwrite when a [`RegConfig`](crate::RegConfig) makes it
    /// callee-saved.
    #[inline(always)]
    pub(crate) fn saves(&self, alloc: &RegAlloc, ret_gpr: u8) -> [u16; 2] {
        let mut saves = alloc.used_callee_saved();
        match self.ret_ty {
            Some(Ty::F | Ty::D) => saves[1] &= !1,
            Some(Ty::V) | None => {}
            Some(_) => saves[0] &= !bit(ret_gpr),
        }
        saves
    }

    /// True if the function needs a frame: it saves `saves`, has locals,
    /// or needs one for a call, a `jal` or a parameter in its stack slot.
    #[inline(always)]
    pub(crate) fn needs_frame(&self, saves: [u16; 2]) -> bool {
        self.frame || saves != [0, 0] || self.locals > 0
    }

    /// The bytes the prologue reserves below the frame pointer: the save
    /// area and the locals, to a multiple of 16.
    #[inline(always)]
    pub(crate) fn frame_size(&self) -> u32 {
        ((SAVE_AREA + self.locals + 15) & !15) as u32
    }

    /// Checks an `align` to `n` bytes (a power of two up to 64) and
    /// records it: the boundary to pad to, at least `insn` (the target's
    /// instruction size).
    pub(crate) fn align(&mut self, n: usize, insn: usize) -> Result<usize, ErrorKind> {
        if !n.is_power_of_two() || n > 64 {
            return Err(ErrorKind::Unsupported("align: a power of two up to 64"));
        }
        let n = n.max(insn);
        self.align = self.align.max(n);
        Ok(n)
    }
}
