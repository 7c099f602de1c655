//! The compiler: decoded methods to one vcode function per applet.

use super::*;
use vcode::ext::MemCompare;

/// Where a slot lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Home {
    Reg(u8),
    /// Byte offset from `FP`.
    Mem(i32),
}

/// An operand-stack entry at compile time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Val {
    Const(i32),
    /// The value in a slot's home: a local's, or the entry's own position.
    Slot(u16),
    /// The value in `W` (an entry whose home is memory).
    W,
}

pub(super) type R = Reg<I>;

pub(super) fn r(n: u8) -> R {
    Reg::phys(n)
}

pub(super) fn p(n: u8) -> Reg<P> {
    Reg::phys(n)
}

/// An int register as a 64-bit index. Every operation on an `i` register
/// writes its 32 bits and clears the upper half (x86-64 zero-extends every
/// 32-bit result), so the register is already the zero-extended value. An
/// index is used for addressing only after the unsigned bounds check, and a
/// handle is never negative.
pub(super) fn ix(r: R) -> Reg<UL> {
    Reg::phys(r.num())
}

/// Whether integer register `h` is one the host's calling convention makes
/// callee-saved (a function called from generated code keeps it).
pub(super) fn callee_saved(h: u8) -> bool {
    h < 16 && vcode::host::CALLEE_SAVED_GPR & (1 << h) != 0
}

/// The register classes of the generated code: the host's, with the
/// callee-saved registers that the host's call (`exec::call_entry`)
/// declares clobbered kept by the caller, so that the entry saves none of
/// them ([`vcode::RegConfig::keep_in_caller`]).
pub(super) fn entry_config() -> vcode::RegConfig {
    let mut cfg = vcode::RegConfig::default();
    for n in super::exec::CALLER_KEPT {
        // Each is callee-saved in the host's convention
        // (`exec::tests::the_caller_kept_registers_are_callee_saved_and_kept`).
        cfg.keep_in_caller(n)
            .expect("a register of CALLER_KEPT is callee-saved");
    }
    cfg
}

pub(super) struct Regs {
    pub(super) fp: Reg<P>,
    pub(super) fuel: Reg<UL>,
    pub(super) x: u8,
    pub(super) y: u8,
    pub(super) z: u8,
    pub(super) w: u8,
    pub(super) homes: Vec<u8>,
    /// The context, kept in a callee-saved register for the whole
    /// invocation when the program calls natives ([`Uses::natives`]);
    /// `None` keeps it in the native frame (`Locals::ctx`).
    pub(super) ctx: Option<Reg<P>>,
}

/// vcode locals of the one native frame: per invocation, shared by all
/// methods (calls between methods do not move the native frame pointer).
pub(super) struct Locals {
    pub(super) ctx: Local<P>,
    pub(super) dir: Local<P>,
    pub(super) statics: Local<P>,
    pub(super) fields: Local<P>,
    pub(super) frames_end: Local<P>,
    pub(super) depth: Local<L>,
    pub(super) trap: [Local<I>; 3],
    pub(super) tmp: [Local<I>; 4],
}

/// A base pointer of the context that generated code reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Base {
    Dir,
    Statics,
    Fields,
    FramesEnd,
}

/// What Z holds across ops, when it is a base pointer (see [`Compiler::op`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ZHolds {
    Nothing,
    Statics,
    Fields,
    /// The data address of the array in a local with a [`Fact`].
    Data(u16),
}

/// What a block knows of the array a local refers to: its data address
/// (and, once an index was checked against it, its length) kept in tmp
/// locals, and the highest constant index proven in bounds. Arrays never
/// move or shrink during an invocation, so this holds until the local is
/// written, control merges, or a call reuses the tmp locals.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fact {
    pub(super) slot: usize,
    pub(super) checked: i32,
    pub(super) has_len: bool,
}

pub(super) struct Compiler<'p> {
    pub(super) f: Func,
    pub(super) prog: &'p Program,
    /// Each method's [`Analysis`], taken by [`Compiler::method`].
    pub(super) analyses: Vec<Option<Analysis>>,
    pub(super) regs: Regs,
    pub(super) locals: Locals,
    /// The bases the entry copied into `locals`.
    pub(super) uses: Uses,
    pub(super) entries: Vec<Label>,
    /// Each method's dispatch target.
    pub(super) calls: Vec<Label>,
    /// The methods compiled at their dispatch target ([`host_only`]).
    pub(super) direct: Vec<bool>,
    /// [`charge_free_methods`] of the program (empty when it is not metered).
    pub(super) charge_free: Vec<bool>,
    pub(super) sites: Vec<Site>,
    pub(super) stubs: Vec<Stub>,
    pub(super) exit: Label,
    pub(super) metered: bool,
    pub(super) marks: Vec<(usize, Mark)>,
    // Per method:
    pub(super) method: u16,
    pub(super) bci: u32,
    pub(super) max_locals: u16,
    pub(super) frame: u16,
    pub(super) homes: Vec<Home>,
    pub(super) stack: Vec<Val>,
    /// The method's ops and the stack depth before each.
    pub(super) code: Vec<Op>,
    pub(super) depth: Vec<Option<u16>>,
    /// The local the op being compiled should put its result in
    /// ([`Compiler::dest`]), and the entry its result becomes.
    pub(super) hint: Option<u16>,
    pub(super) dest_val: Val,
    pub(super) facts: Vec<Option<Fact>>,
    /// An upper bound (signed) of each local on the code being compiled,
    /// from the fall-through of a branch that tested it against a
    /// constant (`if (length <= 56)`), unless the branch's target is that
    /// fall-through itself: it holds from there to the next branch
    /// target, store to the local or `iinc` of it, where it is
    /// forgotten. An inline push whose length is such a local bounded by
    /// `RING_BYTES` leaves out its own test of the bound.
    pub(super) le: Vec<Option<i32>>,
    /// The op being compiled, and the end of its block (the next branch
    /// target, exclusive).
    pub(super) op_index: usize,
    pub(super) block_end: usize,
    pub(super) z_holds: ZHolds,
    /// The first op of the straight run that ends at the op being
    /// compiled: `emit` compiled the ops from it one after another, and
    /// control enters the run only at its first op (no branch target,
    /// nothing dead in between). `last_emitted` is the op `emit` compiled
    /// last.
    pub(super) straight_from: usize,
    pub(super) last_emitted: Option<usize>,
    pub(super) fact_ptr: Vec<Local<P>>,
    pub(super) fact_len: Vec<Local<I>>,
}

/// vcode's error while compiling `prog`, as a [`JitError`].
pub(super) fn codegen_error(prog: &Program) -> impl Fn(vcode::Error) -> JitError + Copy + '_ {
    move |source| JitError::Codegen {
        class: prog.info.name.clone(),
        source,
    }
}

/// The magic number and shift of signed division by `d >= 2` (Hacker's
/// Delight, 2nd ed., §10-4, figure 10-1): `n / d` is
/// `((mulhs(m, n) + (m < 0 ? n : 0)) >> s) + sign bit of that`.
pub(super) fn magic(d: i32) -> (i32, i32) {
    const TWO31: u32 = 0x8000_0000;
    let ad = d.unsigned_abs();
    let t = TWO31 + ((d as u32) >> 31);
    let anc = t - 1 - t % ad;
    let mut p = 31;
    let (mut q1, mut r1) = (TWO31 / anc, TWO31 - (TWO31 / anc) * anc);
    let (mut q2, mut r2) = (TWO31 / ad, TWO31 - (TWO31 / ad) * ad);
    loop {
        p += 1;
        q1 = q1.wrapping_mul(2);
        r1 = r1.wrapping_mul(2);
        if r1 >= anc {
            q1 = q1.wrapping_add(1);
            r1 = r1.wrapping_sub(anc);
        }
        q2 = q2.wrapping_mul(2);
        r2 = r2.wrapping_mul(2);
        if r2 >= ad {
            q2 = q2.wrapping_add(1);
            r2 = r2.wrapping_sub(ad);
        }
        let delta = ad - r2;
        if !(q1 < delta || (q1 == delta && r1 == 0)) {
            break;
        }
    }
    (q2.wrapping_add(1) as i32, p - 32)
}

impl<'p> Compiler<'p> {
    pub(super) fn new(prog: &'p Program) -> Result<Compiler<'p>, JitError> {
        let cg = codegen_error(prog);
        let mut f = Func::new();
        f.set_code_limit(4 << 20);
        // The entry's contract with the host (`exec::call_entry`): the
        // host's call declares `r12` to `r15` clobbered, so the entry does
        // not save them (the host saves what it needs of them once, in its
        // own frame, instead of both sides saving); natives and runtime
        // calls still keep them, so they stay persistent registers here.
        // `rbx`, which an `asm!` block cannot name, the entry still saves.
        f.set_config(entry_config());
        f.name(format!("jive:{}", prog.info.name));
        // A program whose methods call no method (no `jal`, the one
        // instruction that moves the stack pointer in the code's body) is
        // framed from the stack pointer (vcode's `frame_from_sp`: no
        // `push rbp; mov rbp, rsp` and `leave`, two instructions fewer an
        // invocation), with room for its locals: the fixed ones below,
        // and a pair for each array fact (`fact_slot`: at most one per
        // local of a method).
        let uses = Uses::of(prog);
        f.frame_from_sp((!uses.calls).then(|| frame_locals_bound(prog)));
        // The context, and the method's index as a machine word (the
        // jump table's index without a widening).
        let params = f.lambda("%p%ul", Leaf::No).map_err(cg)?;
        let ctx_arg = params.get::<P>(0).map_err(cg)?;
        let idx_in = params.get::<UL>(1).map_err(cg)?;
        // Where the host passes the context: in [`super::exec::CTX_IN`] (on
        // x86-64 `r13`, a register the host declares clobbered, so the
        // code's context register below is that one and the entry moves
        // nothing), or as the convention's first argument.
        let ctx_in = match super::exec::CTX_IN {
            Some(n) => {
                f.putreg(ctx_arg);
                f.reserve(Reg::<P>::phys(n)).map_err(cg)?
            }
            None => ctx_arg,
        };
        let fp = f.getreg::<P>(Class::Persistent).map_err(cg)?;
        let fuel = f.getreg::<UL>(Class::Persistent).map_err(cg)?;
        let locals = Locals {
            ctx: f.local(),
            dir: f.local(),
            statics: f.local(),
            fields: f.local(),
            frames_end: f.local(),
            depth: f.local(),
            trap: [f.local(), f.local(), f.local()],
            tmp: [f.local(), f.local(), f.local(), f.local()],
        };
        // The context: in a callee-saved register where the program calls
        // natives, which read it at every call (their argument, the host's
        // words, the directory after the call). The register costs a save
        // and a restore per invocation and the last register home of a
        // program that wants them all ([`Compiler::new`]'s homes below);
        // it saves the context's store and every reload, and the base
        // pointers' copies below (each base is read through the register,
        // at the cost the copy's reload had), so the directory need not be
        // taken again after a call either. A program without natives keeps
        // the context in the native frame.
        let in_place = super::exec::CTX_IN.is_some();
        let ctx_reg = if uses.natives {
            if in_place {
                Some(ctx_in)
            } else {
                f.getreg::<P>(Class::Persistent).ok()
            }
        } else {
            None
        };
        match ctx_reg {
            Some(c) if c == ctx_in => {}
            Some(c) => f.mov(c, ctx_in),
            None => f.st_local(ctx_in, locals.ctx),
        }
        f.ld(fp, ctx_in, C_FRAMES);
        // The fuel the invocation starts with, kept by `Compiled::keep`
        // (the code writes what is left to `C_FUEL` at every exit).
        f.ld(fuel, ctx_in, C_FUEL_START);
        let t = f.getreg::<P>(Class::Temp).map_err(cg)?;
        // Copy the context's base pointers that the code reads into the
        // native frame's locals (with the context in a register, the code
        // reads them through it instead).
        for (off, l, used) in [
            (C_DIR, locals.dir, uses.dir),
            (C_STATICS, locals.statics, uses.statics),
            (C_FIELDS, locals.fields, uses.fields),
            (C_FRAMES_END, locals.frames_end, uses.calls),
        ] {
            if used && ctx_reg.is_none() {
                f.ld(t, ctx_in, off);
                f.st_local(t, l);
            }
        }
        // Depth left: calls from depth d trap when d >= max_depth.
        if uses.calls {
            let tl = t.cast::<L>();
            f.ld(tl, ctx_in, C_MAX_DEPTH);
            f.sub(tl, tl, 1);
            f.st_local(tl, locals.depth);
        }
        // Dispatch on the method index.
        let entries: Vec<Label> = prog.funcs.iter().map(|_| f.genlabel()).collect();
        let calls: Vec<Label> = prog.funcs.iter().map(|_| f.genlabel()).collect();
        let exit = f.genlabel();
        f.jump_table(idx_in, &calls);
        f.putreg(t);
        if ctx_reg != Some(ctx_in) {
            f.putreg(ctx_in);
        }
        f.putreg(idx_in);
        // X, Y, Z, W and the homes: no more homes than a method can use
        // (and at least one), taken in vcode's order, caller-saved
        // registers first, so that a program with few live slots leaves
        // callee-saved registers unclaimed and the entry does not save them.
        let analyses = analyze(prog);
        let wanted = 4 + homes_wanted(&analyses).max(1);
        let mut temps = Vec::new();
        while temps.len() < wanted
            && let Ok(t) = f.getreg::<I>(Class::Temp)
        {
            temps.push(t.num());
        }
        if temps.len() < 5 {
            return Err(JitError::TooFewRegisters {
                class: prog.info.name.clone(),
                available: temps.len(),
                needed: 5,
            });
        }
        let regs = Regs {
            fp,
            fuel,
            x: temps[0],
            y: temps[1],
            z: temps[2],
            w: temps[3],
            homes: temps[4..].to_vec(),
            ctx: ctx_reg,
        };
        // One call stub per method: run it, store the result, return 0. A
        // method no other method calls has none: it is compiled at its
        // dispatch target instead, and its returns are the stub's end
        // (`Compiler::method`, `Compiler::ret`), which saves the call, its
        // stack adjustment and the return of every invocation.
        let direct = host_only(prog);
        for (i, &l) in calls.iter().enumerate() {
            if direct[i] {
                continue;
            }
            f.label(l);
            if prog.funcs[i].is_some() {
                f.jal(entries[i]);
                let x = r(regs.x);
                let c = match regs.ctx {
                    Some(c) => c,
                    None => {
                        let c = p(regs.z);
                        f.ld_local(c, locals.ctx);
                        c
                    }
                };
                f.st(regs.fuel, c, C_FUEL);
                f.ret_zero_with(Operand::Reg(x), Reg::phys(super::exec::VALUE_OUT));
            } else {
                f.jmp(exit);
            }
        }
        Ok(Compiler {
            f,
            prog,
            analyses,
            regs,
            locals,
            uses,
            entries,
            calls,
            direct,
            charge_free: if prog.metered() {
                charge_free_methods(prog)
            } else {
                Vec::new()
            },
            sites: Vec::new(),
            stubs: Vec::new(),
            exit,
            metered: prog.metered(),
            marks: Vec::new(),
            method: 0,
            bci: 0,
            max_locals: 0,
            frame: 0,
            homes: Vec::new(),
            stack: Vec::new(),
            code: Vec::new(),
            depth: Vec::new(),
            hint: None,
            dest_val: Val::Const(0),
            facts: Vec::new(),
            le: Vec::new(),
            op_index: 0,
            block_end: 0,
            z_holds: ZHolds::Nothing,
            straight_from: 0,
            last_emitted: None,
            fact_ptr: Vec::new(),
            fact_len: Vec::new(),
        })
    }

    pub(super) fn x(&self) -> R {
        r(self.regs.x)
    }
    pub(super) fn w(&self) -> R {
        r(self.regs.w)
    }

    pub(super) fn site(&mut self, kind: SiteKind) -> u32 {
        self.sites.push(Site {
            kind,
            method: self.method,
            bci: self.bci,
        });
        (self.sites.len() - 1) as u32
    }

    /// A new out-of-line trap stub for the current op.
    pub(super) fn stub(&mut self, kind: SiteKind, recs: [Option<Rec>; 3]) -> Label {
        let site = self.site(kind);
        let label = self.f.genlabel();
        self.stubs.push(Stub { label, site, recs });
        label
    }

    pub(super) fn home(&self, s: u16) -> Home {
        self.homes[usize::from(s)]
    }

    /// The slot of stack position `j`.
    pub(super) fn pos_slot(&self, j: usize) -> u16 {
        self.max_locals + j as u16
    }

    /// The value `v` in a register: its home register, or loaded into `scratch`.
    pub(super) fn reg_of(&mut self, v: Val, scratch: u8) -> R {
        match v {
            Val::Const(c) => {
                self.f.set(r(scratch), c);
                r(scratch)
            }
            Val::W => self.w(),
            Val::Slot(s) => match self.home(s) {
                Home::Reg(h) => r(h),
                Home::Mem(off) => {
                    self.f.ld(r(scratch), self.regs.fp, i64::from(off));
                    r(scratch)
                }
            },
        }
    }

    pub(super) fn opnd(&mut self, v: Val, scratch: u8) -> Operand<I> {
        match v {
            Val::Const(c) => Operand::Imm(i64::from(c)),
            v => Operand::Reg(self.reg_of(v, scratch)),
        }
    }

    /// Writes `v` into slot `s`'s home.
    pub(super) fn put(&mut self, s: u16, v: Val) {
        if v == Val::Slot(s) {
            return;
        }
        match self.home(s) {
            Home::Reg(h) => match v {
                Val::Const(c) => self.f.set(r(h), c),
                v => {
                    let src = self.reg_of(v, h);
                    if src.num() != h {
                        self.f.mov(r(h), src);
                    }
                }
            },
            Home::Mem(off) => {
                let x = self.regs.x;
                let src = self.reg_of(v, x);
                self.f.st(src, self.regs.fp, i64::from(off));
            }
        }
    }

    /// Stores `W` into the home of the entry that holds it, if any.
    pub(super) fn flush_w(&mut self) {
        if let Some(j) = self.stack.iter().position(|&v| v == Val::W) {
            let s = self.pos_slot(j);
            self.put(s, Val::W);
            self.stack[j] = Val::Slot(s);
        }
    }

    /// Every entry into its own home (branch targets, calls).
    pub(super) fn sync(&mut self) {
        self.sync_below(self.stack.len());
    }

    /// The entries below stack position `end` into their own homes.
    pub(super) fn sync_below(&mut self, end: usize) {
        for j in 0..end {
            let s = self.pos_slot(j);
            let v = self.stack[j];
            if v != Val::Slot(s) {
                self.put(s, v);
                self.stack[j] = Val::Slot(s);
            }
        }
    }

    pub(super) fn pop(&mut self) -> Val {
        self.stack.pop().unwrap_or(Val::Const(0))
    }

    /// Where to compute the result pushed next: the home register of its
    /// position, or `W` (flushing what `W` held, unless that is an operand
    /// already popped).
    ///
    /// When the next op stores the result into a local with a register home
    /// that no entry reads, the result goes straight there (`t = a + b` is
    /// one instruction, not an add and a move).
    pub(super) fn dest(&mut self) -> R {
        if let Some(n) = self.hint.take()
            && let Home::Reg(h) = self.home(n)
            && !self.stack.contains(&Val::Slot(n))
        {
            self.dest_val = Val::Slot(n);
            return r(h);
        }
        let s = self.pos_slot(self.stack.len());
        match self.home(s) {
            Home::Reg(h) => {
                self.dest_val = Val::Slot(s);
                r(h)
            }
            Home::Mem(_) => {
                self.flush_w();
                self.dest_val = Val::W;
                self.w()
            }
        }
    }

    /// Pushes the result computed into `dest()`'s register.
    pub(super) fn push_result(&mut self, _rd: R) {
        self.stack.push(self.dest_val);
    }

    /// Before writing local `n`: entries that read it get their own copy.
    pub(super) fn detach_local(&mut self, n: u16) {
        for j in 0..self.stack.len() {
            if self.stack[j] == Val::Slot(n) {
                let s = self.pos_slot(j);
                self.put(s, Val::Slot(n));
                self.stack[j] = Val::Slot(s);
            }
        }
    }

    pub(super) fn charge(&mut self) {
        if !self.metered {
            return;
        }
        let stub = self.stub(SiteKind::Fuel, [None; 3]);
        // One fused `sub; jb`: out of fuel exactly when the count was 0,
        // as in the interpreter.
        self.f.dec_branch_borrow(self.regs.fuel, stub);
    }

    /// Loads a base pointer of the context into register `into`: through
    /// the context's register where there is one ([`Regs::ctx`]), else
    /// from the native frame if the entry copied it there, else through
    /// the context loaded from the frame.
    pub(super) fn ld_base(&mut self, into: u8, b: Base) -> Reg<P> {
        let (l, off, copied) = match b {
            Base::Dir => (self.locals.dir, C_DIR, self.uses.dir),
            Base::Statics => (self.locals.statics, C_STATICS, self.uses.statics),
            Base::Fields => (self.locals.fields, C_FIELDS, self.uses.fields),
            Base::FramesEnd => (self.locals.frames_end, C_FRAMES_END, self.uses.calls),
        };
        if let Some(c) = self.regs.ctx {
            self.f.ld(p(into), c, off);
        } else if copied {
            self.f.ld_local(p(into), l);
        } else {
            self.f.ld_local(p(into), self.locals.ctx);
            self.f.ld(p(into), p(into), off);
        }
        p(into)
    }

    /// The context's address: its register ([`Regs::ctx`]), or loaded
    /// from the native frame into `into`.
    pub(super) fn ctx(&mut self, into: u8) -> Reg<P> {
        match self.regs.ctx {
            Some(c) => c,
            None => {
                self.f.ld_local(p(into), self.locals.ctx);
                p(into)
            }
        }
    }

    // -- Operations ---------------------------------------------------------------

    pub(super) fn binop(&mut self, op: Op) {
        let b = self.pop();
        let a = self.pop();
        if let (Val::Const(x), Val::Const(y)) = (a, b)
            && !matches!(op, Op::Div | Op::Rem)
        {
            let v = match op {
                Op::Add => x.wrapping_add(y),
                Op::Sub => x.wrapping_sub(y),
                Op::Mul => x.wrapping_mul(y),
                Op::Shl => x.wrapping_shl(y as u32),
                Op::Shr => x.wrapping_shr(y as u32),
                Op::Ushr => (x as u32).wrapping_shr(y as u32) as i32,
                Op::And => x & y,
                Op::Or => x | y,
                _ => x ^ y,
            };
            self.stack.push(Val::Const(v));
            return;
        }
        let commutes = matches!(op, Op::Add | Op::Mul | Op::And | Op::Or | Op::Xor);
        let (a, b) = if commutes && matches!(a, Val::Const(_)) {
            (b, a)
        } else {
            (a, b)
        };
        if matches!(op, Op::Div | Op::Rem) {
            return self.divide(op, a, b);
        }
        let (x, y) = (self.regs.x, self.regs.y);
        let ra = self.reg_of(a, x);
        let rb = self.opnd(b, y);
        let rd = self.dest();
        let f = &mut self.f;
        match op {
            Op::Add => f.add(rd, ra, rb),
            Op::Sub => f.sub(rd, ra, rb),
            Op::Mul => f.mul(rd, ra, rb),
            Op::Shl => f.lsh(rd, ra, rb),
            Op::Shr => f.rsh(rd, ra, rb),
            Op::Ushr => {
                let rb = match rb {
                    Operand::Reg(b) => Operand::Reg(b.cast()),
                    Operand::Imm(v) => Operand::Imm(v & 31),
                };
                f.rsh(rd.cast::<vcode::U>(), ra.cast(), rb)
            }
            Op::And => f.and(rd, ra, rb),
            Op::Or => f.or(rd, ra, rb),
            _ => f.xor(rd, ra, rb),
        }
        self.push_result(rd);
    }

    /// `idiv`/`irem`: a zero divisor traps, `MIN / -1` is `MIN` (and
    /// `MIN % -1` is 0), where x86's `idiv` would fault.
    pub(super) fn divide(&mut self, op: Op, a: Val, b: Val) {
        let (x, y) = (self.regs.x, self.regs.y);
        let rem = op == Op::Rem;
        if let Val::Const(d) = b
            && d >= 2
        {
            let ra = self.reg_of(a, x);
            self.div_by_const(ra, d);
            // It used Z.
            self.z_holds = ZHolds::Nothing;
            let rd = self.dest();
            let q = r(y);
            if rem {
                // n - q * d
                self.f.mul(q, q, d);
                self.f.sub(rd, ra, q);
            } else {
                self.f.mov(rd, q);
            }
            return self.push_result(rd);
        }
        if let Val::Const(d) = b
            && d != 0
            && d != -1
        {
            let ra = self.reg_of(a, x);
            let rd = self.dest();
            if rem {
                self.f.rem(rd, ra, d);
            } else {
                self.f.div(rd, ra, d);
            }
            return self.push_result(rd);
        }
        if rem && self.rem_after_div(a, b) {
            return;
        }
        let ra = self.reg_of(a, x);
        let rb = self.reg_of(b, y);
        let zero = self.stub(SiteKind::DivZero, [None; 3]);
        self.f.beq(rb, 0, zero);
        let (minus1, done) = (self.f.genlabel(), self.f.genlabel());
        let rd = self.dest();
        self.f.beq(rb, -1, minus1);
        if rem {
            self.f.rem(rd, ra, rb);
        } else {
            self.f.div(rd, ra, rb);
        }
        self.f.jmp(done);
        self.f.label(minus1);
        if rem {
            self.f.set(rd, 0);
        } else {
            self.f.neg(rd, ra);
        }
        self.f.label(done);
        self.push_result(rd);
    }

    /// `irem` right after an `idiv` of the same operands whose quotient
    /// went to a local: `q = a / b; r = a % b` (StandardLent's doRx,
    /// `length / freebufferlen` and `length % freebufferlen`), the
    /// straight run `load a; B; idiv; istore q; load a; B; irem` with `B`
    /// the same `iload b` or `getstatic k` both times. Then `a % b` is
    /// `a - q * b` in wrapping arithmetic: the run reaches the `irem` only
    /// through the `idiv`, which trapped if `b` is 0 (so the `irem`'s own
    /// zero check, at a later bytecode, can never fire), and for `MIN / -1`
    /// gave `q = MIN`, where `a - q * b` is `MIN - MIN = 0` as `irem`'s is.
    /// Nothing between writes `a`, `b`, `q` or a static (a store to `q`,
    /// which is neither `a` nor `b`, and two loads), so the operands are the
    /// ones the `idiv` divided. One multiply and a subtract where the
    /// generic `irem` took both checks and an `idiv` (~9 instructions a
    /// message fewer in doRx above 56 bytes). Returns whether it compiled
    /// the `irem`.
    pub(super) fn rem_after_div(&mut self, a: Val, b: Val) -> bool {
        use Op::*;
        let i = self.op_index;
        if self.code[i] != Rem {
            return false;
        }
        // The run's ops before the `irem` as their parts (`iload a; iload
        // b` is one fused op), the last six of them.
        let mut parts = Vec::with_capacity(24);
        for &o in &self.code[i.saturating_sub(6).max(self.straight_from)..i] {
            let (p, k) = expand(o);
            parts.extend_from_slice(&p[..k]);
        }
        let Some(c) = parts.get(parts.len().wrapping_sub(6)..) else {
            return false;
        };
        let (Load(la), Load(la2), Store(q)) = (c[0], c[4], c[3]) else {
            return false;
        };
        let same_b = c[1] == c[5]
            && match c[1] {
                Load(lb) => lb != q,
                GetStatic(_) => true,
                _ => false,
            };
        if la != la2 || la == q || c[2] != Div || !same_b || a != Val::Slot(la) {
            return false;
        }
        let (x, y) = (self.regs.x, self.regs.y);
        // The quotient in a register other than `b`'s: its home, or Y
        // when `b` is not there.
        let b_in_y = match b {
            Val::Slot(s) => !matches!(self.home(s), Home::Reg(_)),
            Val::W => false,
            Val::Const(_) => true,
        };
        let q_home = self.home(q);
        if b_in_y && !matches!(q_home, Home::Reg(_)) {
            return false;
        }
        let ra = self.reg_of(a, x);
        let rb = self.reg_of(b, y);
        let rq = self.reg_of(Val::Slot(q), y);
        let rd = self.dest();
        if rd == rb && rd != ra && rd != rq {
            // The result goes where `b` is (the home of `getstatic`'s
            // entry): `imul rd, q; neg rd; add rd, a`, one move fewer.
            self.f.mul(rd, rd, rq);
            self.f.sub(rd, ra, rd);
        } else {
            let t = r(y);
            self.f.mul(t, rq, rb);
            self.f.sub(rd, ra, t);
        }
        self.push_result(rd);
        true
    }

    /// `Y = n / d` for a constant `d >= 2`, without `idiv`: a shift for a
    /// power of two, else a multiply by a magic number and shifts (Hacker's
    /// Delight §10-4; `magic`). Uses Z.
    pub(super) fn div_by_const(&mut self, n: R, d: i32) {
        let (y, z) = (self.regs.y, self.regs.z);
        let q = r(y);
        if d & (d - 1) == 0 {
            // (n + (n < 0 ? d - 1 : 0)) >> k: rounds toward zero.
            let k = d.trailing_zeros() as i32;
            self.f.rsh(q, n, 31);
            self.f.rsh(q.cast::<vcode::U>(), q.cast(), (32 - k) as u32);
            self.f.add(q, q, n);
            self.f.rsh(q, q, k);
            return;
        }
        let (m, s) = magic(d);
        let wide = Reg::<L>::phys(z);
        self.f.cv::<I, L>(wide, n);
        self.f.mul(wide, wide, i64::from(m));
        self.f.rsh(wide, wide, 32);
        self.f.cv::<L, I>(q, wide);
        if m < 0 {
            self.f.add(q, q, n);
        }
        if s > 0 {
            self.f.rsh(q, q, s);
        }
        // Plus one when negative: truncation toward zero.
        let t = r(z);
        self.f.rsh(t.cast::<vcode::U>(), q.cast(), 31u32);
        self.f.add(q, q, t);
    }

    pub(super) fn unop(&mut self, op: Op) {
        let a = self.pop();
        if let Val::Const(c) = a {
            self.stack.push(Val::Const(match op {
                Op::Neg => c.wrapping_neg(),
                Op::I2B => i32::from(c as i8),
                Op::I2S => i32::from(c as i16),
                _ => c & 1,
            }));
            return;
        }
        let x = self.regs.x;
        let ra = self.reg_of(a, x);
        let rd = self.dest();
        match op {
            Op::Neg => self.f.neg(rd, ra),
            Op::I2B => {
                self.f.lsh(rd, ra, 24);
                self.f.rsh(rd, rd, 24);
            }
            Op::I2S => {
                self.f.lsh(rd, ra, 16);
                self.f.rsh(rd, rd, 16);
            }
            _ => self.f.and(rd, ra, 1),
        }
        self.push_result(rd);
    }

    /// The bounds check of `a[i]` (which also catches `null`); leaves the
    /// data address in `Z`. Returns the index register, or `None` for a
    /// constant index.
    pub(super) fn element(&mut self, a: Val, i: Val) -> (Option<R>, i32) {
        let (x, y, z) = (self.regs.x, self.regs.y, self.regs.z);
        let (ri, ci) = match i {
            Val::Const(c) => (None, c),
            v => (Some(self.reg_of(v, y)), 0),
        };
        // What this block already knows of an array in a local.
        let local = match a {
            Val::Slot(n) if n < self.max_locals => Some(usize::from(n)),
            _ => None,
        };
        let known = local.and_then(|n| self.facts[n]);
        if let Some(fact) = known
            && (ri.is_some() && fact.has_len || ri.is_none() && ci >= 0 && ci <= fact.checked)
        {
            let checked = match ri {
                None => true,
                Some(ri) => {
                    // The length, cached, against the index.
                    let ra = self.reg_of(a, x);
                    let stub = self.stub(
                        SiteKind::Array,
                        [
                            Some(Rec::Reg(ra.num())),
                            Some(Rec::Reg(ri.num())),
                            Some(Rec::Reg(z)),
                        ],
                    );
                    self.f.ld_local(r(z), self.fact_len[fact.slot]);
                    self.f
                        .bge(ri.cast::<vcode::U>(), r(z).cast::<vcode::U>(), stub);
                    true
                }
            };
            if checked {
                let n = local.unwrap_or(0) as u16;
                if ri.is_some() || self.z_holds != ZHolds::Data(n) {
                    self.f.ld_local(p(z), self.fact_ptr[fact.slot]);
                }
                self.z_holds = ZHolds::Data(n);
                return (ri, ci);
            }
        }
        self.z_holds = ZHolds::Nothing;
        let ra = self.reg_of(a, x);
        let rec_i = match ri {
            Some(ri) => Rec::Reg(ri.num()),
            None => Rec::Const(ci),
        };
        let stub = self.stub(
            SiteKind::Array,
            [Some(Rec::Reg(ra.num())), Some(rec_i), Some(Rec::Reg(z))],
        );
        // The directory's base in Y when the index does not need it.
        let base = if ri.is_some_and(|ri| ri.num() == y) {
            z
        } else {
            y
        };
        let dir = self.ld_base(base, Base::Dir);
        // Z = the length (entry of handle h at dir + 8h).
        self.f.ldx(r(z), Ty::I, dir, ix(ra), 8, DIR_LEN);
        let len = r(z).cast::<vcode::U>();
        match ri {
            Some(ri) => self.f.bge(ri.cast::<vcode::U>(), len, stub),
            None => self.f.ble(len, Operand::Imm(i64::from(ci as u32)), stub),
        }
        // Kept only if the block reads the local again.
        let local = local.filter(|&n| self.read_again(n as u16));
        let slot = local.map(|n| self.fact_slot(n));
        if let (Some(k), Some(_)) = (slot, ri) {
            self.f.st_local(r(z), self.fact_len[k]);
        }
        let dir = if base == z {
            self.ld_base(z, Base::Dir)
        } else {
            dir
        };
        self.f.ldx(p(z), Ty::P, dir, ix(ra), 8, DIR_DATA);
        if let (Some(n), Some(k)) = (local, slot) {
            self.f.st_local(p(z), self.fact_ptr[k]);
            let checked = match ri {
                None => ci.max(known.map_or(-1, |f| f.checked)),
                Some(_) => known.map_or(-1, |f| f.checked),
            };
            self.facts[n] = Some(Fact {
                slot: k,
                checked,
                has_len: ri.is_some() || known.is_some_and(|f| f.has_len),
            });
            self.z_holds = ZHolds::Data(n as u16);
        }
        (ri, ci)
    }

    /// Whether local `n` is read again later in the current block (within
    /// a few dozen ops), so that a fact about it can pay for its stores.
    pub(super) fn read_again(&self, n: u16) -> bool {
        let from = self.op_index + 1;
        let to = self.block_end.min(from + 48).min(self.code.len());
        self.code.get(from..to).is_some_and(|ops| {
            ops.iter().any(|&o| {
                let (parts, k) = expand(o);
                parts[..k].contains(&Op::Load(n))
            })
        })
    }

    /// The cache slot (tmp locals for the data address and length) of the
    /// array in local `n`.
    pub(super) fn fact_slot(&mut self, n: usize) -> usize {
        if let Some(f) = self.facts[n] {
            return f.slot;
        }
        let used: Vec<usize> = self.facts.iter().flatten().map(|f| f.slot).collect();
        let k = (0..).find(|k| !used.contains(k)).unwrap_or(0);
        while self.fact_ptr.len() <= k {
            let (pl, ll) = (self.f.local(), self.f.local());
            self.fact_ptr.push(pl);
            self.fact_len.push(ll);
        }
        k
    }

    /// Forgets what is known of arrays and the locals' range facts
    /// ([`Compiler::le`]), at a block start or a call (which may reuse the
    /// cache slots).
    pub(super) fn forget(&mut self) {
        self.z_holds = ZHolds::Nothing;
        self.facts.iter_mut().for_each(|f| *f = None);
        self.le.iter_mut().for_each(|b| *b = None);
    }

    pub(super) fn array_load(&mut self, mem: Ty, scale: u8) {
        let i = self.pop();
        let a = self.pop();
        let (ri, ci) = self.element(a, i);
        let data = p(self.regs.z);
        let rd = self.dest();
        match ri {
            Some(ri) => self.f.ldx(rd, mem, data, ix(ri), scale, 0),
            None => {
                let off = i64::from(ci) * i64::from(scale);
                match mem {
                    Ty::C => self.f.ldc(rd, data, off),
                    Ty::S => self.f.lds(rd, data, off),
                    _ => self.f.ld(rd, data, off),
                }
            }
        }
        self.push_result(rd);
    }

    pub(super) fn array_store(&mut self, mem: Ty, scale: u8, boolean_mask: bool) {
        let v = self.pop();
        let mut i = self.pop();
        let mut a = self.pop();
        let (x, z, w) = (self.regs.x, self.regs.z, self.regs.w);
        // A `bastore` keeps `v & mask` (the entry's store mask: 1 for a
        // boolean[], -1 otherwise), computed into W first; an array or index
        // held in W moves to its (now free) stack home before that.
        let masked = if boolean_mask {
            self.z_holds = ZHolds::Nothing;
            let at = self.stack.len();
            for (val, j) in [(&mut a, at), (&mut i, at + 1)] {
                if *val == Val::W {
                    let s = self.pos_slot(j);
                    self.put(s, Val::W);
                    *val = Val::Slot(s);
                }
            }
            self.flush_w_except(v);
            let ra = self.reg_of(a, x);
            let dir = self.ld_base(z, Base::Dir);
            self.f.ldx(r(z), Ty::C, dir, ix(ra), 8, DIR_MASK);
            let rv = self.reg_of(v, w);
            self.f.and(r(w), rv, r(z));
            true
        } else {
            false
        };
        let (ri, ci) = self.element(a, i);
        let data = p(z);
        let rv = if masked { r(w) } else { self.reg_of(v, x) };
        match ri {
            Some(ri) => self.f.stx(rv, mem, data, ix(ri), scale, 0),
            None => {
                let off = i64::from(ci) * i64::from(scale);
                match mem {
                    Ty::C => self.f.stc(rv, data, off),
                    Ty::S => self.f.sts(rv, data, off),
                    _ => self.f.st(rv, data, off),
                }
            }
        }
    }

    /// Flushes `W` unless it is the popped value `v`.
    pub(super) fn flush_w_except(&mut self, v: Val) {
        if v != Val::W {
            self.flush_w();
        }
    }

    pub(super) fn cond_branch(&mut self, c: Cond, two: bool, t: u32, back: bool, labels: &[Label]) {
        let (b, a) = if two {
            let b = self.pop();
            (b, self.pop())
        } else {
            (Val::Const(0), self.pop())
        };
        // The operands are above the rest of the stack, so syncing the rest
        // writes none of their homes (and never W); it may use X, so the
        // operands are loaded after it.
        let (x, y) = (self.regs.x, self.regs.y);
        let (c, a, b) = match (a, b) {
            (Val::Const(p), Val::Const(q)) => {
                self.sync();
                if c.eval(p, q) {
                    if back {
                        self.charge();
                    }
                    self.f.jmp(labels[t as usize]);
                }
                return;
            }
            (Val::Const(_), _) => (c.swap(), b, a),
            _ => (c, a, b),
        };
        self.sync();
        // What the fall-through knows of a local tested against a
        // constant (`Compiler::le`): nothing where the branch's target is
        // the next op itself (an empty `if`), which both ways reach, and
        // which `is_target` does not mark (a successor `i + 1` is the
        // fall-through), so `forget` does not run there.
        if let (Val::Slot(n), Val::Const(k)) = (a, b)
            && t as usize != self.op_index + 1
        {
            let bound = match c.not() {
                Cond::Le | Cond::Eq => Some(k),
                Cond::Lt => k.checked_sub(1),
                _ => None,
            };
            if let (Some(bound), Some(le)) = (bound, self.le.get_mut(usize::from(n))) {
                *le = Some(le.map_or(bound, |old| old.min(bound)));
            }
        }
        let target = labels[t as usize];
        // A local in the frame compared with a constant, or with a value
        // in a register, is compared where it lies (vcode's `MemCompare`:
        // `cmp dword [fp + off], k; jcc`), not loaded into X first: the
        // same signed 32-bit test, one instruction fewer (StandardLent's
        // `if (length <= 56)`, at the head of every `doRx`).
        if let Some((c, reg, off, k)) = self.mem_compare(c, a, b) {
            let at = (self.regs.fp, off);
            let branch = |f: &mut Func, c: Cond, l: Label| match reg {
                Some(rr) => f.bcmp_mem(vcond(c), rr, at, r(x), l),
                None => f.bcmp_mem_imm(vcond(c), at, k, r(x), l),
            };
            if back && self.metered {
                let skip = self.f.genlabel();
                branch(&mut self.f, c.not(), skip);
                self.charge();
                self.f.jmp(target);
                self.f.label(skip);
            } else {
                branch(&mut self.f, c, target);
            }
            return;
        }
        let ra = self.reg_of(a, x);
        let rb = self.opnd(b, y);
        if back && self.metered {
            let skip = self.f.genlabel();
            self.bcond(c.not(), ra, rb, skip);
            self.charge();
            self.f.jmp(target);
            self.f.label(skip);
        } else {
            self.bcond(c, ra, rb, target);
        }
    }

    /// The operands of [`Compiler::cond_branch`]'s `a c b` as a compare
    /// with a word in the frame, where one of them is a local whose home
    /// is there and the other a constant or a value in a register:
    /// the condition with the local on its left (or on the right of the
    /// register, `Some`), the register (`None` for a constant), the
    /// local's offset from the frame pointer and the constant. `None`
    /// where neither is so (two values in registers, two in the frame,
    /// `W`).
    fn mem_compare(&self, c: Cond, a: Val, b: Val) -> Option<(Cond, Option<R>, i32, i32)> {
        let mem = |v: Val| match v {
            Val::Slot(s) => match self.home(s) {
                Home::Mem(off) => Some(off),
                Home::Reg(_) => None,
            },
            _ => None,
        };
        let reg = |v: Val| match v {
            Val::Slot(s) => match self.home(s) {
                Home::Reg(h) => Some(r(h)),
                Home::Mem(_) => None,
            },
            _ => None,
        };
        match (a, b) {
            (a, Val::Const(k)) => Some((c, None, mem(a)?, k)),
            (a, b) => match (mem(a), reg(b), reg(a), mem(b)) {
                (Some(off), Some(rb), _, _) => Some((c.swap(), Some(rb), off, 0)),
                (_, _, Some(ra), Some(off)) => Some((c, Some(ra), off, 0)),
                _ => None,
            },
        }
    }

    pub(super) fn bcond(&mut self, c: Cond, a: R, b: Operand<I>, l: Label) {
        match c {
            Cond::Eq => self.f.beq(a, b, l),
            Cond::Ne => self.f.bne(a, b, l),
            Cond::Lt => self.f.blt(a, b, l),
            Cond::Ge => self.f.bge(a, b, l),
            Cond::Gt => self.f.bgt(a, b, l),
            Cond::Le => self.f.ble(a, b, l),
        }
    }

    pub(super) fn switch(&mut self, k: u32, labels: &[Label]) {
        let key = self.pop();
        self.sync();
        let x = self.regs.x;
        // The key in its home's register, or loaded into X: the sync above
        // wrote only homes of other positions.
        let rk = self.reg_of(key, x);
        let Some(sw) = self.prog.switches.get(k as usize) else {
            return;
        };
        match sw {
            Switch::Table {
                low,
                targets,
                default,
            } => {
                // The index `key - low` (wrapping) in Y, compared unsigned
                // with the table's length; a table from 0 compares the key
                // itself and zero-extends it into Y.
                let y = self.regs.y;
                let idx = if *low == 0 {
                    rk
                } else {
                    self.f.sub(r(y), rk, *low);
                    r(y)
                };
                self.f.bge(
                    idx.cast::<vcode::U>(),
                    Operand::Imm(targets.len() as i64),
                    labels[*default as usize],
                );
                let ul = Reg::<UL>::phys(y);
                self.f.cv::<vcode::U, UL>(ul, idx.cast());
                let ls: Vec<Label> = targets.iter().map(|&t| labels[t as usize]).collect();
                self.f.jump_table(ul, &ls);
            }
            Switch::Lookup {
                keys,
                targets,
                default,
            } => {
                self.lookup(rk, keys, targets, labels);
                self.f.jmp(labels[*default as usize]);
            }
        }
    }

    /// A binary search over sorted keys, linear below 8.
    pub(super) fn lookup(&mut self, rk: R, keys: &[i32], targets: &[u32], labels: &[Label]) {
        if keys.len() <= 8 {
            for (&k, &t) in keys.iter().zip(targets) {
                self.f.beq(rk, k, labels[t as usize]);
            }
            return;
        }
        let mid = keys.len() / 2;
        let high = self.f.genlabel();
        let next = self.f.genlabel();
        self.f.bge(rk, keys[mid], high);
        self.lookup(rk, &keys[..mid], &targets[..mid], labels);
        self.f.jmp(next);
        self.f.label(high);
        self.lookup(rk, &keys[mid..], &targets[mid..], labels);
        self.f.label(next);
    }

    /// Saves the register homes that must survive a call: locals, and the
    /// entries below the arguments (already in their own homes).
    pub(super) fn saved_homes(&self, below: usize) -> Vec<(u8, i32)> {
        let mut out = Vec::new();
        let n = usize::from(self.max_locals) + below;
        for s in 0..n {
            if let Home::Reg(h) = self.homes[s] {
                out.push((h, 4 * s as i32));
            }
        }
        out
    }

    /// Stores (`save`) or reloads the register homes `saved_homes` names.
    pub(super) fn move_homes(&mut self, homes: &[(u8, i32)], save: bool) {
        for &(h, o) in homes {
            if save {
                self.f.st(r(h), self.regs.fp, i64::from(o));
            } else {
                self.f.ld(r(h), self.regs.fp, i64::from(o));
            }
        }
    }

    /// The synced entries from stack position `first` up (a call's
    /// arguments) into their frame slots, where the callee reads them.
    pub(super) fn args_to_memory(&mut self, first: usize) {
        for j in first..self.stack.len() {
            let s = self.pos_slot(j);
            if let Home::Reg(h) = self.home(s) {
                self.f.st(r(h), self.regs.fp, 4 * i64::from(s));
            }
        }
    }

    pub(super) fn call(&mut self, m: u16) {
        let prog = self.prog;
        let Some(Some(callee)) = prog.funcs.get(usize::from(m)) else {
            return;
        };
        let info = &prog.info.methods[usize::from(m)];
        let nargs = info.arg_slots();
        self.flush_w();
        self.charge();
        let (x, y, z) = (self.regs.x, self.regs.y, self.regs.z);
        // Depth.
        let deep = self.stub(SiteKind::Depth, [None; 3]);
        if !self.uses.calls {
            // `Uses::of` saw every call, so this cannot happen; if it did,
            // the depth counter was never set up and the call must not run.
            debug_assert!(false, "a call Uses::of did not see");
            self.f.jmp(deep);
            return;
        }
        let d = Reg::<L>::phys(y);
        self.f.ld_local(d, self.locals.depth);
        self.f.ble(d, 0, deep);
        let first = self.stack.len() - nargs;
        let inline = match *callee.code {
            [Op::Return] => Some(None),
            [Op::Const(c), Op::ReturnValue] => Some(Some(Val::Const(c))),
            _ => None,
        };
        if inline.is_none() {
            self.f.sub(d, d, 1);
            self.f.st_local(d, self.locals.depth);
        }
        // A null receiver.
        if callee.has_receiver {
            let recv = self.stack[first];
            let npe = self.stub(SiteKind::Null, [None; 3]);
            match recv {
                Val::Const(0) => self.f.jmp(npe),
                Val::Const(_) => {}
                v => {
                    let rr = self.reg_of(v, x);
                    self.f.beq(rr, 0, npe);
                }
            }
        }
        // The frame stack: the callee's frame starts at the arguments.
        let off = i64::from(self.max_locals) + first as i64;
        let need = i64::from(callee.max_locals) + i64::from(callee.max_stack);
        if off + need > i64::from(self.frame) {
            let end = self.ld_base(z, Base::FramesEnd);
            let top = p(x);
            self.f.add(top, self.regs.fp, 4 * (off + need));
            self.f.bgt(top.cast::<UL>(), end.cast::<UL>(), deep);
        }
        // A method that only returns a constant (or nothing) runs in place:
        // the checks above are all that a call of it can do.
        if let Some(value) = inline {
            self.stack.truncate(first);
            if let Some(v) = value {
                self.stack.push(v);
            }
            return;
        }
        // Everything into its home; the arguments into memory.
        self.sync();
        let saves = self.saved_homes(first);
        self.move_homes(&saves, true);
        self.args_to_memory(first);
        let fp = self.regs.fp;
        self.f.add(fp, fp, 4 * off);
        self.f.jal(self.entries[usize::from(m)]);
        self.forget();
        self.f.sub(fp, fp, 4 * off);
        self.f.ld_local(d, self.locals.depth);
        self.f.add(d, d, 1);
        self.f.st_local(d, self.locals.depth);
        self.move_homes(&saves, false);
        self.stack.truncate(first);
        if info.sig.ret.is_some() {
            let rd = self.dest();
            if rd.num() != x {
                self.f.mov(rd, r(x));
            }
            self.push_result(rd);
        }
    }

    /// A return, with the value (if any) in `X`: to the calling method, or,
    /// in a method compiled at its dispatch target ([`host_only`]), to the
    /// host as the call stub does: the fuel left stored in the context,
    /// status 0 (a value-returning method at its dispatch target stores its
    /// value where it is, [`Compiler::ret_to_host`], before it gets here).
    pub(super) fn ret(&mut self) {
        if !self.direct[usize::from(self.method)] {
            self.f.ret_link();
            return;
        }
        self.ret_to_host(None);
    }

    /// A method compiled at its dispatch target ([`host_only`]) returns
    /// `v` (`None`: whatever X holds, a `void` method's) to the host: the
    /// fuel left stored, then status 0 in the result register and the
    /// value in [`super::exec::VALUE_OUT`] (`Exit::ret_zero_with`: a
    /// constant as the move's immediate, a home or X, where it is), so
    /// that no value passes through X first and none is stored in the
    /// context for the host to read back (`exec::call_entry` takes both
    /// registers).
    fn ret_to_host(&mut self, v: Option<Val>) {
        let c = self.ctx(self.regs.z);
        self.f.st(self.regs.fuel, c, C_FUEL);
        let value = match v {
            Some(Val::Const(k)) => Operand::Imm(i64::from(k)),
            Some(v) => Operand::Reg(self.reg_of(v, self.regs.x)),
            None => Operand::Reg(self.x()),
        };
        self.f
            .ret_zero_with(value, Reg::phys(super::exec::VALUE_OUT));
    }

    /// A runtime call: the caller-saved homes saved and restored around it,
    /// the directory's copy in the native frame taken again after it where
    /// the context is in the frame (an allocation may move the directory;
    /// with the context in a register the directory is read through it at
    /// each use, [`Regs::ctx`]).
    ///
    /// The callee-saved homes stay in their registers: the runtime function
    /// keeps them (the C calling convention), and nothing it does reads the
    /// frame stack's slots of this method (a native reads its arguments,
    /// which [`Compiler::args_to_memory`] stored; the heap is collected
    /// only between invocations, so no slot is a root the runtime scans).
    pub(super) fn runtime(&mut self, func: usize, args: &[Arg], below: usize) -> Reg<L> {
        self.runtime_then(func, args, below, true)
    }

    /// Whether no op from the one after the current to the method's next
    /// return can read the heap's directory: a straight run of ops that
    /// touch only locals, constants, the operand stack and statics, ending
    /// in a return. A runtime call there need not take the directory again
    /// (nothing on that path reads the native frame's copy; a path that
    /// joins it later did not come through the call).
    pub(super) fn dir_dead_after(&self) -> bool {
        use Op::*;
        for &op in self.code.iter().skip(self.op_index + 1) {
            match op {
                Return | ReturnValue => return true,
                Nop | Const(_) | Load(_) | Store(_) | Iinc(..) | Pop | Add | Sub | Mul | And
                | Or | Xor | Shl | Shr | Ushr | Neg | GetStatic(_) | PutStatic(_) => {}
                _ => return false,
            }
        }
        false
    }

    /// [`Compiler::runtime`], taking the heap's directory again after the
    /// call (where the context is in the frame) only if `dir_after` (the
    /// caller knows it dead otherwise).
    pub(super) fn runtime_then(
        &mut self,
        func: usize,
        args: &[Arg],
        below: usize,
        dir_after: bool,
    ) -> Reg<L> {
        let mut saves = self.saved_homes(below);
        saves.retain(|&(h, _)| !callee_saved(h));
        self.move_homes(&saves, true);
        let x = Reg::<L>::phys(self.regs.x);
        self.f.call(x, Callee::Native(func), args);
        self.move_homes(&saves, false);
        // With the context in a register the directory is read through it
        // at each use, never from a copy, so there is nothing to take again.
        if self.uses.dir && dir_after && self.regs.ctx.is_none() {
            let z = p(self.regs.z);
            self.f.ld_local(z, self.locals.ctx);
            self.f.ld(z, z, C_DIR);
            self.f.st_local(z, self.locals.dir);
        }
        x
    }

    pub(super) fn call_native(&mut self, n: u16) {
        let Some(decl) = self.prog.natives.get(usize::from(n)) else {
            return;
        };
        let k = decl.params.len();
        let has_ret = decl.ret.is_some();
        self.flush_w();
        self.charge();
        // A constant length of an inline push, known before `sync` moves
        // it into its home.
        let len_const = match self.stack.last() {
            Some(&Val::Const(c)) => Some(c),
            _ => None,
        };
        let first = self.stack.len() - k;
        // The entries below the arguments into their homes, the same on
        // both paths of an inline form. The arguments of a form that
        // takes any stay where they are (a constant, a local's home) for
        // the form to read, and go into their homes on the rare path
        // only, where the call reads them from the frame.
        let inline_args = k > 0 && decl.fast != 0 && decl.inline.is_some();
        self.sync_below(if inline_args { first } else { self.stack.len() });
        // A native with an inline form ([`crate::Natives::set_inline`]):
        // the form in place, over the host's words; the call below is its
        // rare path.
        let inline = match decl.inline {
            Some(InlineForm::Int(i)) if k == 0 && has_ret && decl.fast != 0 => {
                Some(self.inline_int(i))
            }
            Some(InlineForm::PopU32) if k == 0 && has_ret && decl.fast != 0 => {
                Some(self.inline_pop())
            }
            _ => None,
        };
        let pushed = match decl.inline {
            // A constant length or tag the form never takes: the call
            // alone (the form's tests would send every call to it).
            Some(InlineForm::PushBytes)
                if k == 3
                    && !has_ret
                    && decl.fast != 0
                    && len_const.is_none_or(|c| (0..=RING_BYTES as i32).contains(&c))
                    && !matches!(self.stack[first + 1], Val::Const(t) if !(0..=0xffff).contains(&t)) =>
            {
                Some(self.inline_push(first, len_const))
            }
            // As for `PushBytes`: a constant length below 1 or a constant
            // tag past 0xffff, the call alone.
            Some(InlineForm::PushEntry(n))
                if k == 3
                    && !has_ret
                    && decl.fast != 0
                    && len_const.is_none_or(|c| c >= 1)
                    && !matches!(self.stack[first + 1], Val::Const(t) if !(0..=0xffff).contains(&t)) =>
            {
                Some(self.inline_push_entry(first, n, len_const))
            }
            Some(form @ (InlineForm::CopyOut | InlineForm::CopyIn))
                if k == 4 && !has_ret && decl.fast != 0 && len_const.is_none_or(|c| c >= 0) =>
            {
                Some(self.inline_copy(first, form == InlineForm::CopyOut))
            }
            // A constant length or channel the form never takes: the call
            // alone.
            Some(InlineForm::TailPush)
                if k == 4
                    && !has_ret
                    && decl.fast != 0
                    && len_const.is_none_or(|c| c >= 0)
                    && !matches!(self.stack[first + 2], Val::Const(c) if !(0..=0xffff).contains(&c)) =>
            {
                Some(self.inline_tail(first))
            }
            _ => None,
        };
        self.sync();
        self.args_to_memory(first);
        // The arguments' address in W, free here (`flush_w` above, and every
        // entry synced): on x86-64 W is `rdx`, the call's third argument
        // register, so the address needs no move into it.
        let args_at = p(self.regs.w);
        self.f
            .add(args_at, self.regs.fp, 4 * i64::from(self.pos_slot(first)));
        let ctx = self.ctx(self.regs.z);
        let fail = self.stub(SiteKind::Runtime, [None; 3]);
        let shape = NativeShape::of(decl);
        // A native with a fast form ([`crate::FastNative`]) is called
        // through that form's entry, which takes the same arguments.
        let entry = if decl.fast != 0 {
            decl.fast
        } else {
            shape.entry()
        };
        let dir_after = !self.dir_dead_after();
        let res = self.runtime_then(
            entry,
            &[
                Arg::Reg(ctx.any()),
                Arg::Imm(Ty::L, i64::from(n)),
                Arg::Reg(args_at.any()),
                Arg::Imm(Ty::L, shape.bits()),
            ],
            first,
            dir_after,
        );
        self.f.beq_min(res, fail);
        self.stack.truncate(first);
        if let Some(done) = pushed {
            self.f.label(done);
        }
        if let Some((rd, done)) = inline {
            self.f.cv::<L, I>(rd, res);
            self.f.label(done);
            self.push_result(rd);
        } else if has_ret {
            let rd = self.dest();
            self.f.cv::<L, I>(rd, res);
            self.push_result(rd);
        }
    }

    pub(super) fn new_array(&mut self, prim: Prim) {
        let n = self.pop();
        self.flush_w_except(n);
        let y = self.regs.y;
        let rn = self.reg_of(n, y);
        let neg = self.stub(SiteKind::NegSize, [Some(Rec::Reg(rn.num())), None, None]);
        self.f.blt(rn, 0, neg);
        let len = Reg::<L>::phys(y);
        self.f.cv::<I, L>(len, rn);
        self.sync();
        let below = self.stack.len();
        let ctx = self.ctx(self.regs.z);
        let code = match prim {
            Prim::Boolean => 0,
            Prim::Byte => 1,
            Prim::Short => 2,
            Prim::Int => 3,
        };
        let fail = self.stub(SiteKind::Runtime, [None; 3]);
        let res = self.runtime(
            rt_newarray as *const () as usize,
            &[
                Arg::Reg(ctx.any()),
                Arg::Imm(Ty::L, code),
                Arg::Reg(len.any()),
            ],
            below,
        );
        self.f.blt(res, 0, fail);
        let rd = self.dest();
        self.f.cv::<L, I>(rd, res);
        self.push_result(rd);
    }

    pub(super) fn field(&mut self, k: u16, put: bool, instance: bool) {
        let (x, y, z) = (self.regs.x, self.regs.y, self.regs.z);
        let v = if put { Some(self.pop()) } else { None };
        if instance {
            let o = self.pop();
            let npe = self.stub(SiteKind::Null, [None; 3]);
            match o {
                Val::Const(0) => self.f.jmp(npe),
                Val::Const(_) => {}
                o => {
                    let ro = self.reg_of(o, x);
                    self.f.beq(ro, 0, npe);
                }
            }
        }
        // Z keeps the base between field accesses of one kind with only
        // arithmetic and locals between them (see `op`).
        let want = if instance {
            ZHolds::Fields
        } else {
            ZHolds::Statics
        };
        let base = if self.z_holds == want {
            p(z)
        } else {
            let b = if instance {
                Base::Fields
            } else {
                Base::Statics
            };
            self.ld_base(z, b)
        };
        self.z_holds = want;
        let off = 4 * i64::from(k);
        match v {
            Some(v) => {
                let rv = self.reg_of(v, y);
                self.f.st(rv, base, off);
            }
            None => {
                let rd = self.dest();
                self.f.ld(rd, base, off);
                self.push_result(rd);
            }
        }
    }

    /// Stack manipulation: the new entries from the old ones, with values
    /// that change position copied through the native frame's tmp locals.
    pub(super) fn shuffle(&mut self, pops: usize, order: &[usize]) {
        self.flush_w();
        let base = self.stack.len() - pops;
        let old: Vec<Val> = self.stack[base..].to_vec();
        let x = self.regs.x;
        let mut moved = [None; 4];
        for (i, &v) in old.iter().enumerate() {
            if let Val::Slot(s) = v
                && s >= self.max_locals
            {
                let rv = self.reg_of(v, x);
                self.f.st_local(rv, self.locals.tmp[i]);
                moved[i] = Some(i);
            }
        }
        self.stack.truncate(base);
        for &i in order {
            let j = self.stack.len();
            let s = self.pos_slot(j);
            match (old[i], moved[i]) {
                (_, Some(t)) => match self.home(s) {
                    Home::Reg(h) => self.f.ld_local(r(h), self.locals.tmp[t]),
                    Home::Mem(o) => {
                        self.f.ld_local(r(x), self.locals.tmp[t]);
                        self.f.st(r(x), self.regs.fp, i64::from(o));
                    }
                },
                (v, None) => {
                    self.stack.push(v);
                    continue;
                }
            }
            self.stack.push(Val::Slot(s));
        }
    }

    pub(super) fn op(&mut self, op: Op, labels: &[Label]) -> bool {
        use Op::*;
        // Which ops leave Z alone: field and array accesses (which set it),
        // and arithmetic and locals, which use only X, Y, W and homes.
        let z_holds = self.z_holds;
        self.z_holds = ZHolds::Nothing;
        if matches!(
            op,
            Load(_)
                | Const(_)
                | Store(_)
                | Iinc(..)
                | Add
                | Sub
                | Mul
                | And
                | Or
                | Xor
                | Shl
                | Shr
                | Ushr
                | Neg
                | Pop
                | IALoad
                | BALoad
                | SALoad
                | IAStore
                | BAStore
                | SAStore
                | GetStatic(_)
                | PutStatic(_)
                | GetField(_)
                | PutField(_)
                | Div
                | Rem
        ) || branch(op).is_some()
        {
            // A division leaves Z alone but for one by a constant, which
            // says so (`divide`); a conditional branch syncs and compares
            // with X and Y (`cond_branch`), and its fall-through, unless a
            // branch target, which forgets, is reached only from it.
            self.z_holds = z_holds;
        }
        match op {
            Nop => {}
            Const(c) => self.stack.push(Val::Const(c)),
            Load(n) => self.stack.push(Val::Slot(n)),
            Store(n) => {
                let v = self.pop();
                self.detach_local(n);
                self.put(n, v);
                if let Some(f) = self.facts.get_mut(usize::from(n)) {
                    *f = None;
                }
                if let Some(b) = self.le.get_mut(usize::from(n)) {
                    *b = None;
                }
                if self.z_holds == ZHolds::Data(n) {
                    self.z_holds = ZHolds::Nothing;
                }
            }
            Iinc(n, d) => {
                self.detach_local(n);
                if let Some(b) = self.le.get_mut(usize::from(n)) {
                    *b = None;
                }
                match self.home(n) {
                    Home::Reg(h) => self.f.add(r(h), r(h), i32::from(d)),
                    Home::Mem(o) => {
                        let x = self.x();
                        self.f.ld(x, self.regs.fp, i64::from(o));
                        self.f.add(x, x, i32::from(d));
                        self.f.st(x, self.regs.fp, i64::from(o));
                    }
                }
            }
            IALoad => self.array_load(Ty::I, 4),
            BALoad => self.array_load(Ty::C, 1),
            SALoad => self.array_load(Ty::S, 2),
            IAStore => self.array_store(Ty::I, 4, false),
            BAStore => self.array_store(Ty::C, 1, true),
            SAStore => self.array_store(Ty::S, 2, false),
            Pop => {
                self.pop();
            }
            Pop2 => {
                self.pop();
                self.pop();
            }
            Dup => {
                self.flush_w();
                let v = self.pop();
                self.stack.push(v);
                match v {
                    Val::Slot(s) if s >= self.max_locals => {
                        let t = self.pos_slot(self.stack.len());
                        self.put(t, v);
                        self.stack.push(Val::Slot(t));
                    }
                    v => self.stack.push(v),
                }
            }
            DupX1 => self.shuffle(2, &[1, 0, 1]),
            DupX2 => self.shuffle(3, &[2, 0, 1, 2]),
            Dup2 => self.shuffle(2, &[0, 1, 0, 1]),
            Dup2X1 => self.shuffle(3, &[1, 2, 0, 1, 2]),
            Dup2X2 => self.shuffle(4, &[2, 3, 0, 1, 2, 3]),
            Swap => self.shuffle(2, &[1, 0]),
            Add | Sub | Mul | Div | Rem | Shl | Shr | Ushr | And | Or | Xor => self.binop(op),
            Neg | I2B | I2S | I2Z => self.unop(op),
            Goto(t) => {
                self.sync();
                if !self.rotate(t, labels) {
                    self.f.jmp(labels[t as usize]);
                }
                return false;
            }
            GotoBack(t) => {
                self.sync();
                self.charge();
                if !self.rotate(t, labels) {
                    self.f.jmp(labels[t as usize]);
                }
                return false;
            }
            TableSwitch(k) | LookupSwitch(k) => {
                self.flush_w_except(*self.stack.last().unwrap_or(&Val::Const(0)));
                self.charge();
                self.switch(k, labels);
                return false;
            }
            SwitchUnmetered(k) => {
                self.switch(k, labels);
                return false;
            }
            ReturnValue => {
                let v = self.pop();
                if self.direct[usize::from(self.method)] {
                    self.ret_to_host(Some(v));
                    return false;
                }
                let x = self.regs.x;
                let rv = self.reg_of(v, x);
                if rv.num() != x {
                    self.f.mov(r(x), rv);
                }
                self.ret();
                return false;
            }
            Return => {
                self.ret();
                return false;
            }
            GetStatic(k) => self.field(k, false, false),
            PutStatic(k) => self.field(k, true, false),
            GetField(k) => self.field(k, false, true),
            PutField(k) => self.field(k, true, true),
            Call(m) | CallUnmetered(m) => self.call(m),
            CallNative(n) | CallNativeUnmetered(n) => self.call_native(n),
            ObjectInit => {
                self.pop();
            }
            NewArray(prim) => self.new_array(prim),
            ArrayLength => {
                let a = self.pop();
                let x = self.regs.x;
                let ra = self.reg_of(a, x);
                let npe = self.stub(SiteKind::Null, [None; 3]);
                self.f.beq(ra, 0, npe);
                let z = self.regs.z;
                let dir = self.ld_base(z, Base::Dir);
                let rd = self.dest();
                self.f.ldx(rd, Ty::I, dir, ix(ra), 8, DIR_LEN);
                self.push_result(rd);
            }
            op => {
                if let Some((c, two, t, back)) = branch(op) {
                    let back = back && self.metered;
                    self.cond_branch(c, two, t, back, labels);
                }
            }
        }
        true
    }

    /// Loop rotation: a jump to a loop's exit test (`javac`'s `for` and
    /// `while` put it at the top) becomes a copy of the test, so that each
    /// iteration takes one branch instead of a jump and a branch. Only for a
    /// test of locals and constants on an empty stack, which cannot trap.
    pub(super) fn rotate(&mut self, t: u32, labels: &[Label]) -> bool {
        let t = t as usize;
        if !self.rotatable(t) || !self.stack.is_empty() || t + 1 >= labels.len() {
            return false;
        }
        let (parts, k) = expand(self.code[t]);
        let Some((c, two, exit, _)) = branch(parts[k - 1]) else {
            return false;
        };
        for &o in &parts[..k - 1] {
            self.op(o, labels);
        }
        // Stay in the loop (the test's fall-through) unless it exits.
        self.cond_branch(c.not(), two, t as u32 + 1, false, labels);
        self.f.jmp(labels[exit as usize]);
        true
    }

    /// Whether a jump to op `t` can copy it ([`Compiler::rotate`]): a
    /// forward, uncharged branch on locals and constants, on an empty stack.
    pub(super) fn rotatable(&self, t: usize) -> bool {
        let Some(&op) = self.code.get(t) else {
            return false;
        };
        if self.depth.get(t) != Some(&Some(0)) {
            return false;
        }
        let (parts, k) = expand(op);
        matches!(branch(parts[k - 1]), Some((_, _, _, false)))
            && parts[..k - 1]
                .iter()
                .all(|o| matches!(o, Op::Load(_) | Op::Const(_)))
    }

    /// Picks register homes for a method's slots: the most used, weighted
    /// by loop nesting.
    pub(super) fn assign_homes(&mut self, code: &[Op], weight: &[u64], frame: usize) {
        let mut order: Vec<usize> = (0..frame).filter(|&s| weight[s] > 0).collect();
        order.sort_by_key(|&s| (core::cmp::Reverse(weight[s]), s));
        // A method that calls the runtime (natives, `newarray`) gives its
        // most used slots the callee-saved homes first: the runtime keeps
        // those, so a call spills and reloads only the caller-saved ones
        // ([`Compiler::runtime`]). Other methods take the caller-saved
        // homes first (the order of `regs.homes`).
        let calls_runtime = code.iter().any(|&o| {
            let (parts, k) = expand(o);
            parts[..k].iter().any(|p| {
                matches!(
                    p,
                    Op::CallNative(_) | Op::CallNativeUnmetered(_) | Op::NewArray(_)
                )
            })
        });
        let mut regs = self.regs.homes.clone();
        if calls_runtime {
            regs.sort_by_key(|&h| !callee_saved(h));
        }
        self.homes = (0..frame).map(|s| Home::Mem(4 * s as i32)).collect();
        for (&s, &h) in order.iter().zip(&regs) {
            self.homes[s] = Home::Reg(h);
        }
    }

    pub(super) fn method(&mut self, m: usize) -> Result<(), JitError> {
        let prog = self.prog;
        let Some(func) = prog.funcs[m].as_ref() else {
            return Ok(());
        };
        self.method = m as u16;
        self.max_locals = func.max_locals;
        let frame = usize::from(func.max_locals) + usize::from(func.max_stack);
        self.frame = frame as u16;
        let code = &func.code;
        // The analysis `new` made (made again if a method were compiled
        // twice).
        let Analysis { depth, weight } = match self.analyses.get_mut(m).and_then(Option::take) {
            Some(a) => a,
            None => {
                let depth = depths(prog, code);
                let weight = slot_weights(prog, func.max_locals, code, &depth, frame);
                Analysis { depth, weight }
            }
        };
        self.assign_homes(code, &weight, frame);
        self.code = code.to_vec();
        self.depth = depth;
        self.facts = vec![None; usize::from(func.max_locals)];
        self.le = vec![None; usize::from(func.max_locals)];
        self.block_end = 0;
        let mut labels: Vec<Label> = (0..=code.len()).map(|_| self.f.genlabel()).collect();
        let mut is_target = vec![false; code.len() + 1];
        for (i, &o) in code.iter().enumerate() {
            successors(o, i, &prog.switches, |t| {
                if t != i + 1
                    && let Some(x) = is_target.get_mut(t)
                {
                    *x = true;
                }
            });
        }
        // Loop heads, aligned to 32 bytes so that a loop's speed does not
        // depend on where the code before it happened to end: the test at
        // the top of a loop, or, when the back edge copies that test (see
        // `rotate`), the first op of the body.
        let mut align = vec![false; code.len() + 1];
        for (b, &o) in code.iter().enumerate() {
            successors(o, b, &prog.switches, |t| {
                if t <= b {
                    let head = if self.rotatable(t) { t + 1 } else { t };
                    if let Some(a) = align.get_mut(head) {
                        *a = true;
                    }
                }
            });
        }
        self.f.label(self.entries[m]);
        if self.direct[m] {
            self.f.label(self.calls[m]);
        }
        self.marks
            .push((self.f.code_offset(), Mark::Method(m as u16)));
        for k in 0..usize::from(func.arg_slots) {
            if let Home::Reg(h) = self.homes[k] {
                self.f.ld(r(h), self.regs.fp, 4 * k as i64);
            }
        }
        self.stack.clear();
        let mut live = true;
        // Without metering too: a counted loop charges nothing there, and
        // runs as `passes` (`charge_free` is empty then, so a loop that
        // calls is not counted).
        let loops = counted_loops(prog, &self.charge_free, code, &self.depth, self.metered);
        let straight = if self.metered {
            straight_loops(prog, code, &self.depth, &loops)
        } else {
            Vec::new()
        };
        // The loops are disjoint (each is innermost: no back edge inside)
        // and in order, so each head is met in turn.
        let (mut i, mut next_loop, mut next_straight) = (0, 0, 0);
        while i < code.len() {
            if let Some(lp) = loops.get(next_loop).filter(|l| l.head == i) {
                if self.metered {
                    self.versioned_loop(lp, &mut labels, &is_target, &align, &mut live);
                } else {
                    self.passes(lp.head, lp.back, &mut labels, &is_target, &align, &mut live);
                }
                i = lp.back + 1;
                next_loop += 1;
            } else if let Some(&(t, b)) = straight.get(next_straight).filter(|l| l.0 == i) {
                self.unrolled_loop(t, b, &mut labels, &is_target, &align, &mut live);
                i = b + 1;
                next_straight += 1;
            } else {
                self.emit(i, &labels, &is_target, &align, &mut live);
                i += 1;
            }
        }
        self.f.label(labels[code.len()]);
        Ok(())
    }

    /// A [`CountedLoop`] in two versions: on entry, the trip count `N` is
    /// computed from the counter and the bound; if the fuel left covers
    /// `N` × `per_trip` (a pass's back edge and calls), that is charged at
    /// once and a copy of the loop without charges runs; otherwise the loop
    /// as the interpreter runs it, charging each back edge and call, so
    /// that it traps at the same back edge or call with the same effects
    /// done. The loop leaves only through its test (or a trap, whose fuel
    /// left nothing reports), and takes its back edge exactly `N` times, so
    /// the fuel left after it is the interpreter's.
    pub(super) fn versioned_loop(
        &mut self,
        lp: &CountedLoop,
        labels: &mut [Label],
        is_target: &[bool],
        align: &[bool],
        live: &mut bool,
    ) {
        let (t, b) = (lp.head, lp.back);
        // The entry (from before the loop only: the back edges of both
        // versions go to their own copies of the test). A jump to the head
        // from before the loop that [`Compiler::rotate`] made a copy of the
        // test goes to `labels[t + 1]`, past the test: that label is bound
        // here too, so that such a jump also charges the trip count and
        // runs the copy without charges (it tests again there, which has no
        // effect: the test reads only locals and constants). Bound in the
        // metered copy, as it was until 2026-12-01, it ran the whole loop
        // metered, with the interpreter's fuel but some 60% slower.
        if *live {
            self.sync();
        }
        self.f.label(labels[t]);
        self.f.label(labels[t + 1]);
        self.reset_stack(0);
        self.forget();
        *live = true;
        self.bci = self.bci_of(t);
        self.marks.push((self.f.code_offset(), Mark::Bci(self.bci)));
        let metered = self.f.genlabel();
        let fast = self.f.genlabel();
        let (x, y) = (self.regs.x, self.regs.y);
        let (xl, yl) = (Reg::<L>::phys(x), Reg::<L>::phys(y));
        let rc = self.reg_of(Val::Slot(lp.counter), x);
        self.f.cv::<I, L>(xl, rc);
        match lp.bound {
            Bound::Local(s) => {
                let rb = self.reg_of(Val::Slot(s), y);
                self.f.cv::<I, L>(yl, rb);
            }
            Bound::Const(v) => self.f.set(yl, i64::from(v)),
        }
        // N = bound - counter counting up, counter - bound counting down
        // (64-bit: no overflow); no charge if the loop does not run.
        if lp.step > 0 {
            self.f.sub(yl, yl, xl);
        } else {
            self.f.sub(yl, xl, yl);
        }
        self.f.ble(yl, 0, fast);
        if lp.per_trip > 1 {
            // At most 2^32 passes of at most `MAX_VERSIONED_OPS` units:
            // no overflow in 64 bits.
            self.f.mul(yl, yl, i64::from(lp.per_trip));
        }
        let n = Reg::<UL>::phys(y);
        self.f.blt(self.regs.fuel, n, metered);
        self.f.sub(self.regs.fuel, self.regs.fuel, n);
        self.f.label(fast);
        // The copy without charges, with labels of its own for the loop's
        // ops (no branch from outside lands in the loop but at its test).
        let own: Vec<Label> = labels[t..=b].to_vec();
        for l in &mut labels[t..=b] {
            *l = self.f.genlabel();
        }
        self.metered = false;
        self.passes(t, b, labels, is_target, align, live);
        self.metered = true;
        // The metered loop, entered at its test from the entry only, with
        // a label of its own past the test (the loop's is the entry's).
        labels[t..=b].copy_from_slice(&own);
        labels[t] = metered;
        labels[t + 1] = self.f.genlabel();
        self.block_end = 0;
        for j in t..=b {
            self.emit(j, labels, is_target, align, live);
        }
        labels[t] = own[0];
        labels[t + 1] = own[1];
    }

    /// A [`CountedLoop`] that charges nothing (the copy of
    /// [`Compiler::versioned_loop`] that runs after the entry's charge, or
    /// the loop itself in code without metering), compiled as [`UNROLL`]
    /// passes in a row: each pass is the loop's code, its test included;
    /// the back edge of every pass but the last is only its increment,
    /// falling through to the next pass's test, and the last pass's goes
    /// back to the first's (to its body when the test is copied at the
    /// back edge, [`Compiler::rotate`]). Every pass tests before it runs,
    /// so the loop runs the same passes, with the same effects and the
    /// same traps at the same ops, as compiled once; what changes is that
    /// only every `UNROLL`th pass takes a branch. Taken branches are what a
    /// CPU's branch history records: on the Intel Xeon of 2026-12-02 the
    /// exit of a loop of one taken back edge per pass was mispredicted from
    /// about 32 passes on (`fibonacci(40)`: some 10 ns, 40% of the call),
    /// and the taken branch per pass kept a 5-instruction body from
    /// running in one cycle. A loop of no body (its test, then its back
    /// edge) or of more than [`MAX_UNROLLED_OPS`] ops is compiled once.
    /// `labels[t..=b]` are the first pass's labels, as given.
    pub(super) fn passes(
        &mut self,
        t: usize,
        b: usize,
        labels: &mut [Label],
        is_target: &[bool],
        align: &[bool],
        live: &mut bool,
    ) {
        let count = if b > t + 1 && b - t < MAX_UNROLLED_OPS && self.depth[b].is_some() {
            UNROLL
        } else {
            1
        };
        let first: Vec<Label> = labels[t..=b].to_vec();
        // Only the first pass's head is aligned: padding between passes
        // would run at every pass.
        let unaligned = vec![false; align.len()];
        for pass in 0..count {
            if pass > 0 {
                for l in &mut labels[t..=b] {
                    *l = self.f.genlabel();
                }
            }
            let align = if pass == 0 { align } else { &unaligned };
            self.block_end = 0;
            for j in t..b {
                self.emit(j, labels, is_target, align, live);
            }
            if pass + 1 == count {
                // The back edge, to the first pass (`b > t + 1`: neither
                // label is this pass's back edge's own).
                labels[t] = first[0];
                labels[t + 1] = first[1];
                self.emit(b, labels, is_target, align, live);
            } else {
                self.increment_only(b, labels, is_target, live);
            }
        }
        labels[t..=b].copy_from_slice(&first);
    }

    /// The back edge `b` of a pass of [`Compiler::passes`] but the last:
    /// its label bound as [`Compiler::emit`] binds it, its ops but the
    /// jump (the increment), then every entry into its home, since the
    /// next pass's test is a branch target.
    fn increment_only(&mut self, b: usize, labels: &[Label], is_target: &[bool], live: &mut bool) {
        let Some(d) = self.depth[b] else {
            return;
        };
        if is_target[b] || !*live {
            if *live {
                self.sync();
            }
            self.f.label(labels[b]);
            self.reset_stack(usize::from(d));
            self.forget();
            *live = true;
        } else {
            self.f.label(labels[b]);
        }
        self.bci = self.bci_of(b);
        self.op_index = b;
        self.marks.push((self.f.code_offset(), Mark::Bci(self.bci)));
        let (parts, k) = expand(self.code[b]);
        for &p in &parts[..k - 1] {
            if !self.op(p, labels) {
                *live = false;
            }
        }
        if *live {
            self.sync();
        }
    }

    /// A [`straight_loops`] loop, metered, in groups of [`UNROLL`] passes
    /// compiled in a row (no jump between them). The group's first back
    /// edge charges the whole group, `UNROLL` units, in one `sub; jb`; the
    /// other back edges of the group charge nothing, and the last goes to
    /// the top, the next group's first pass. An exit from pass `m > 0` of
    /// the group (from 0) gives back the `UNROLL - m` units charged for back
    /// edges not taken, on the way out (one `add` on a path taken once per
    /// entry); an exit from pass 0 owes nothing, so an entry that runs no
    /// pass costs no instruction. If the fuel left at the first back edge
    /// is below `UNROLL`, the `sub` is undone, the back edge charged as the
    /// interpreter charges it (out of fuel there if none is left), and the
    /// loop goes on metered pass by pass, running out at the same back edge
    /// as the interpreter. Within a group the interpreter cannot run out
    /// (at least `UNROLL` units were left at its first back edge, and it
    /// takes at most `UNROLL`), so the fuel left at every exit and at every
    /// group's first back edge is the interpreter's; a trap in a pass (an
    /// index, a null array, a division) happens at the same op with the
    /// same effects done, and reports no fuel.
    pub(super) fn unrolled_loop(
        &mut self,
        t: usize,
        b: usize,
        labels: &mut [Label],
        is_target: &[bool],
        align: &[bool],
        live: &mut bool,
    ) {
        // Every entry is pass 0's: a jump to the head (from before the loop,
        // or a back edge from after it) reaches the group's top, pass 0's
        // test at `labels[t]`, aligned as a loop head; a rotated jump (its
        // own copy of the test, [`Compiler::rotate`]) reaches pass 0 just
        // after it, at `labels[t + 1]`. Pass 0 keeps the loop's own labels
        // for that; entering it there is exact, since a pass charges
        // nothing before its back edge, and pass 0's charges the group.
        let top = labels[t];
        let metered = self.f.genlabel();
        let undo = self.f.genlabel();
        // The loop's exits: the targets of its forward branches out.
        let mut exits: Vec<usize> = Vec::new();
        for j in t..b {
            successors(self.code[j], j, &self.prog.switches, |s| {
                if s > b && !exits.contains(&s) {
                    exits.push(s);
                }
            });
        }
        let own: Vec<Label> = labels[t..=b].to_vec();
        let unaligned = vec![false; align.len()];
        let mut top_aligned = unaligned.clone();
        top_aligned[t] = true;
        // (label, units to give back, where the exit goes).
        let mut outs: Vec<(Label, u32, Label)> = Vec::new();
        for pass in 0..UNROLL {
            if pass > 0 {
                for l in &mut labels[t..=b] {
                    *l = self.f.genlabel();
                }
            } else {
                labels[t..=b].copy_from_slice(&own);
            }
            let saved: Vec<Label> = exits.iter().map(|&e| labels[e]).collect();
            if pass > 0 {
                for &e in &exits {
                    let l = self.f.genlabel();
                    outs.push((l, UNROLL - pass, labels[e]));
                    labels[e] = l;
                }
            }
            self.block_end = 0;
            let align = if pass == 0 { &top_aligned } else { &unaligned };
            for j in t..b {
                self.emit(j, labels, is_target, align, live);
            }
            for (&e, &l) in exits.iter().zip(&saved) {
                labels[e] = l;
            }
            // The back edge: its increment; the group's charge at its first.
            // (An empty `if` just before it branches to its label.)
            self.f.label(labels[b]);
            self.bci = self.bci_of(b);
            self.op_index = b;
            self.marks.push((self.f.code_offset(), Mark::Bci(self.bci)));
            let (parts, k) = expand(self.code[b]);
            for &p in &parts[..k - 1] {
                self.op(p, labels);
            }
            self.sync();
            if pass == 0 {
                self.f.sub_branch(self.regs.fuel, UNROLL as i32, true, undo);
            }
            if pass + 1 == UNROLL {
                self.f.jmp(top);
            }
        }
        for (l, units, to) in outs {
            self.f.label(l);
            self.f.add(self.regs.fuel, self.regs.fuel, units);
            self.f.jmp(to);
        }
        // Less than `UNROLL` left at the first back edge: the interpreter's
        // charge there, then the metered loop, entered at its test.
        self.f.label(undo);
        self.f.add(self.regs.fuel, self.regs.fuel, UNROLL);
        self.bci = self.bci_of(b);
        self.charge();
        self.f.jmp(metered);
        // The metered loop's labels are its own: no jump from outside
        // reaches it but this one, to its test.
        for l in &mut labels[t..=b] {
            *l = self.f.genlabel();
        }
        labels[t] = metered;
        self.block_end = 0;
        for j in t..=b {
            self.emit(j, labels, is_target, align, live);
        }
        labels[t..=b].copy_from_slice(&own);
    }

    /// The bytecode index of op `i` of the method being compiled.
    pub(super) fn bci_of(&self, i: usize) -> u32 {
        let func = self.prog.funcs[usize::from(self.method)].as_ref();
        func.and_then(|f| f.bcis.get(i).copied()).unwrap_or(0)
    }

    /// Compiles op `i` of the method, with branch targets in `labels`
    /// (a loop's two versions pass different labels for its ops).
    pub(super) fn emit(
        &mut self,
        i: usize,
        labels: &[Label],
        is_target: &[bool],
        align: &[bool],
        live: &mut bool,
    ) {
        let Some(d) = self.depth[i] else {
            *live = false;
            self.last_emitted = None;
            return;
        };
        let op = self.code[i];
        if is_target[i] || !*live || i == 0 || self.last_emitted != Some(i - 1) {
            self.straight_from = i;
        }
        self.last_emitted = Some(i);
        if is_target[i] {
            if *live {
                self.sync();
            }
            if align[i] {
                self.align_head(labels[i], *live);
            }
            self.f.label(labels[i]);
            self.reset_stack(usize::from(d));
            self.forget();
            *live = true;
        } else if !*live {
            self.f.label(labels[i]);
            self.reset_stack(usize::from(d));
            self.forget();
            *live = true;
        } else {
            if align[i] {
                self.align_head(labels[i], true);
            }
            self.f.label(labels[i]);
        }
        self.bci = self.bci_of(i);
        self.op_index = i;
        let n = self.code.len();
        if self.block_end <= i {
            self.block_end = (i + 1..n).find(|&j| is_target[j]).unwrap_or(n);
        }
        self.marks.push((self.f.code_offset(), Mark::Bci(self.bci)));
        let (parts, k) = expand(op);
        for j in 0..k {
            // The op after this part, if control always goes on to it.
            let next = if j + 1 < k {
                Some(parts[j + 1])
            } else if i + 1 < n && !is_target[i + 1] {
                Some(expand(self.code[i + 1]).0[0])
            } else {
                None
            };
            self.hint = match next {
                Some(Op::Store(n)) => Some(n),
                _ => None,
            };
            if !self.op(parts[j], labels) {
                *live = false;
            }
            self.hint = None;
        }
    }

    /// Aligns a loop's head (at `head`, placed next) to 32 bytes. Where
    /// the code before falls through into it (`falls`: javac's loops are
    /// entered so, after their rotated test), the padding runs once per
    /// entry: more than 8 bytes of it are two to four no-ops (vcode's
    /// longest is 8 bytes), so a jump over them, one instruction, comes
    /// first (StandardLent's doRx ran four no-ops a message above 56
    /// bytes, after a change elsewhere moved its loop by a few bytes).
    pub(super) fn align_head(&mut self, head: Label, falls: bool) {
        if falls && (32 - self.f.code_offset() % 32) % 32 > 8 {
            self.f.jmp(head);
        }
        self.f.align(32);
    }

    pub(super) fn reset_stack(&mut self, d: usize) {
        self.stack.clear();
        for j in 0..d {
            let s = self.pos_slot(j);
            self.stack.push(Val::Slot(s));
        }
    }

    /// The trap stubs and the shared exit.
    pub(super) fn finish(mut self) -> (Func, Meta) {
        let x = self.regs.x;
        let stubs = std::mem::take(&mut self.stubs);
        if !stubs.is_empty() {
            self.marks.push((self.f.code_offset(), Mark::Traps));
        }
        for s in &stubs {
            self.f.label(s.label);
            // Registers first: a constant goes through X, which a register
            // record may name.
            for (k, rec) in s.recs.iter().enumerate() {
                if let Some(Rec::Reg(n)) = *rec {
                    self.f.st_local(r(n), self.locals.trap[k]);
                }
            }
            for (k, rec) in s.recs.iter().enumerate() {
                if let Some(Rec::Const(c)) = *rec {
                    self.f.set(r(x), c);
                    self.f.st_local(r(x), self.locals.trap[k]);
                }
            }
            self.f.set(r(x), s.site as i32 + 1);
            self.f.jmp(self.exit);
        }
        self.f.label(self.exit);
        let c = self.ctx(self.regs.z);
        self.f.st(self.regs.fuel, c, C_FUEL);
        let t = Reg::<L>::phys(self.regs.y);
        for k in 0..3 {
            self.f.ld_local(r(self.regs.y), self.locals.trap[k]);
            self.f.cv::<I, L>(t, r(self.regs.y));
            self.f.st(t, c, C_TRAP + 8 * k as i64);
        }
        self.f.ret(r(x));
        let sites = std::mem::take(&mut self.sites);
        let marks = std::mem::take(&mut self.marks);
        let methods = self
            .prog
            .funcs
            .iter()
            .map(|f| f.as_ref().map(|f| f.id.clone()).unwrap_or_default())
            .collect();
        (
            self.f,
            Meta {
                sites,
                marks,
                methods,
                uses: self.uses,
                code_bytes: 0,
            },
        )
    }
}

/// The bytes of vcode locals the compiled `prog` may take, at most: the
/// fixed [`Locals`] (six words and seven `int`s, with their alignment at
/// most 96 bytes) and a fact's pair (a pointer and an `int`, 16 bytes with
/// alignment) for each local of the method with the most: a method has at
/// most one fact per local ([`Compiler::fact_slot`] takes the lowest slot
/// no live fact uses, and the facts are `max_locals` long).
fn frame_locals_bound(prog: &Program) -> u32 {
    let most = prog
        .funcs
        .iter()
        .flatten()
        .map(|f| u32::from(f.max_locals))
        .max()
        .unwrap_or(0);
    96 + 16 * (most + 1)
}

/// vcode's condition for the JIT's `c` (signed for `int` operands).
fn vcond(c: Cond) -> vcode::backend::Cond {
    use vcode::backend::Cond as V;
    match c {
        Cond::Eq => V::Eq,
        Cond::Ne => V::Ne,
        Cond::Lt => V::Lt,
        Cond::Ge => V::Ge,
        Cond::Gt => V::Gt,
        Cond::Le => V::Le,
    }
}

/// Compiles `prog` into a function not yet placed in memory.
pub(super) fn build(prog: &Program) -> Result<(Func, Meta), JitError> {
    let mut c = Compiler::new(prog)?;
    for m in 0..prog.funcs.len() {
        c.method(m)?;
    }
    Ok(c.finish())
}

/// Compiles `prog` into memory of its own, outside the cache: for
/// measuring the compiler alone (`jive-compile-count`, the benchmarks).
pub fn compile_standalone(prog: &Program) -> Result<vcode::Code, JitError> {
    let (mut f, _) = build(prog)?;
    f.end().map_err(codegen_error(prog))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sequence `div_by_const` emits, in Rust.
    fn model(n: i32, d: i32) -> i32 {
        if d & (d - 1) == 0 {
            let k = d.trailing_zeros();
            let bias = ((n >> 31) as u32 >> (32 - k)) as i32;
            return n.wrapping_add(bias) >> k;
        }
        let (m, s) = magic(d);
        let mut q = ((i64::from(n) * i64::from(m)) >> 32) as i32;
        if m < 0 {
            q = q.wrapping_add(n);
        }
        q >>= s;
        q.wrapping_add((q as u32 >> 31) as i32)
    }

    /// The compiler claims as many register homes as the busiest method of
    /// a program can use, caller-saved registers first, so that a program
    /// of small methods leaves callee-saved registers unclaimed (and its
    /// entry does not save them); a program with more live slots than
    /// registers takes every one.
    #[test]
    fn the_compiler_claims_only_the_homes_a_method_can_use() {
        if crate::APPLET_CLASSES.is_none() || !crate::jit::available() {
            return;
        }
        let homes = |class: (&str, &str)| {
            let dir = std::path::Path::new(crate::APPLET_CLASSES.unwrap()).join(class.0);
            let class = class.1;
            let bytes = std::fs::read(dir.join(format!("{class}.class"))).expect(class);
            let prog = crate::check(&bytes, &crate::Limits::default())
                .unwrap_or_else(|e| panic!("{class}: {e}"));
            let c = Compiler::new(&prog).unwrap_or_else(|e| panic!("{class}: {e}"));
            let callee = c.regs.homes.iter().filter(|&&h| callee_saved(h)).count();
            let ctx = c.regs.ctx.map(|r| callee_saved(r.num()));
            (
                homes_wanted(&analyze(&prog)),
                c.regs.homes.len(),
                callee,
                ctx,
            )
        };
        // The Figure 7 probe (`applets/unet/Breakdown.java`): `doRx` uses 4
        // slots, so 4 homes, two of them callee-saved (x86-64 has two
        // caller-saved registers left for homes after the four scratch
        // registers); it calls natives, so the context takes the fifth
        // callee-saved register.
        assert_eq!(
            homes(("unet", "Breakdown")),
            (4, 4, 2, Some(true)),
            "Breakdown"
        );
        // `NativeHomes.keep` has more live ints than there are registers,
        // and calls natives: the context's register is one home fewer.
        let (wanted, claimed, callee, ctx) = homes(("release8", "NativeHomes"));
        assert!(
            wanted > claimed,
            "NativeHomes wants {wanted}, claimed {claimed}"
        );
        assert_eq!((claimed, callee, ctx), (4, 2, Some(true)), "NativeHomes");
        // `Arith` calls no native: the context stays in the native frame.
        let (.., ctx) = homes(("release8", "Arith"));
        assert_eq!(ctx, None, "Arith");
    }

    #[test]
    fn division_by_a_constant_truncates_like_idiv() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut divisors: Vec<i32> = (2..=1100).collect();
        divisors.extend([
            1009,
            1000,
            55,
            641,
            65_537,
            1 << 20,
            (1 << 30) + 1,
            i32::MAX,
            i32::MAX - 1,
            1 << 30,
        ]);
        divisors.extend((0..200).map(|_| (next() as i32).unsigned_abs().max(2) as i32));
        let edges = [
            0,
            1,
            -1,
            2,
            -2,
            i32::MIN,
            i32::MIN + 1,
            i32::MAX,
            i32::MAX - 1,
        ];
        for &d in &divisors {
            if d < 2 {
                continue;
            }
            // Wrapping: the divisors reach `i32::MAX`, where `d + 1` and `2 * d`
            // overflow (a panic in a debug build's test run).
            let near = [
                d,
                d - 1,
                d.wrapping_add(1),
                -d,
                -d + 1,
                -d - 1,
                d.wrapping_mul(2),
                d.wrapping_mul(-2),
            ];
            for n in edges
                .into_iter()
                .chain(near)
                .chain((0..300).map(|_| next() as i32))
            {
                assert_eq!(model(n, d), n.wrapping_div(d), "{n} / {d}");
            }
        }
    }
}
