//! [`Func`]: one function under construction, and the client interface of
//! the paper's Table 2.
//!
//! Every instruction method writes its machine code (or, on the reference
//! backend, records its instruction) before it returns: there is no
//! instruction list and no later pass (paper §3.2, §5.2). Instruction
//! methods do not return `Result`: the first mistake is remembered with
//! its instruction index and method name, later instructions are still
//! accepted (and discarded), and [`Func::end`] reports it. That keeps the
//! per-instruction cost to a few host instructions and client code free
//! of `?` on every line.

use crate::abi::{ArgLoc, CallConv};
use crate::backend::{Arg, Backend, BinOp, Callee, Cond, LocalOp, Src, Target, UnOp};
use crate::error::{Error, ErrorKind, Result};
use crate::mem::ExecMemory;
use crate::regs::{Class, RegAlloc, RegConfig};
use crate::sig::Signature;
use crate::ty::{AnyReg, Data, Int, Label, Local, MAX_PARAMS, Operand, P, Reg, Ty, Type, UL};
use crate::x86_64::X64;

/// The leaf hint of `v_lambda`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Leaf {
    /// The function makes no calls: persistent registers may come from the
    /// caller-saved set, and a call is an error.
    Yes,
    /// The function may call.
    No,
}

/// The parameter registers `lambda` hands back: a reference to the
/// assignment `lambda` made for the signature, shared by every function
/// begun with the same one, so that beginning a function copies a pointer
/// rather than the registers.
#[derive(Copy, Clone)]
pub struct Params {
    shape: &'static Shape,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            shape: &Shape::EMPTY,
        }
    }
}

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.all()).finish()
    }
}

/// A signature and the registers its parameters were given, interned (see
/// [`Shape::intern`]): `lambda` hands it out as [`Params`] and the
/// generated code records its signature by reference, so neither is copied
/// per function.
pub(crate) struct Shape {
    sig: Signature,
    regs: [AnyReg; MAX_PARAMS],
    /// The incoming stack slot of each parameter kept in memory (whose
    /// register number is [`Params::IN_MEMORY`]).
    slots: [u8; MAX_PARAMS],
}

impl PartialEq for Shape {
    fn eq(&self, o: &Shape) -> bool {
        self.sig == o.sig && self.regs() == o.regs() && self.slots == o.slots
    }
}

impl Eq for Shape {}

impl std::hash::Hash for Shape {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.sig.params().hash(h);
        self.regs().hash(h);
        self.slots.hash(h);
    }
}

impl Shape {
    /// No parameters.
    const EMPTY: Shape = Shape {
        sig: Signature::EMPTY,
        regs: [AnyReg { ty: Ty::V, n: 0 }; MAX_PARAMS],
        slots: [0; MAX_PARAMS],
    };

    /// The parameters' registers, one per parameter of `sig`.
    #[inline(always)]
    fn regs(&self) -> &[AnyReg] {
        &self.regs[..self.sig.params().len()]
    }

    /// The one shared copy of `self`. Shapes are made when `lambda` meets a
    /// signature its cache does not hold, and live as long as the process
    /// (the code generated with them may be kept anywhere, on any thread):
    /// one per distinct signature and assignment, a few dozen bytes each,
    /// the way compilers intern type signatures.
    #[cold]
    fn intern(self) -> &'static Shape {
        use std::collections::HashSet;
        use std::sync::Mutex;
        static SHAPES: Mutex<Option<HashSet<&'static Shape>>> = Mutex::new(None);
        let mut shapes = SHAPES.lock().unwrap_or_else(|e| e.into_inner());
        let shapes = shapes.get_or_insert_with(HashSet::new);
        if let Some(&s) = shapes.get(&self) {
            return s;
        }
        let s: &'static Shape = Box::leak(Box::new(self));
        shapes.insert(s);
        s
    }
}

impl Params {
    /// The register number [`all`](Params::all) shows for a parameter kept
    /// in its incoming stack slot (see [`local`](Params::local)); it names
    /// no register.
    pub const IN_MEMORY: u8 = u8::MAX;

    /// Parameter `i`'s register and type, checked: an error if there is no
    /// parameter `i` or the signature gave it another type than `T`.
    fn typed_at<T: Type>(&self, i: usize, m: &'static str) -> Result<AnyReg> {
        let err = |kind| Error::new(0, m, kind);
        let r = *self.all().get(i).ok_or_else(|| {
            err(ErrorKind::NoSuchParam {
                index: i,
                count: self.len(),
            })
        })?;
        if r.ty != T::TY {
            return Err(err(ErrorKind::TypeMismatch {
                expected: r.ty,
                found: T::TY,
            }));
        }
        Ok(r)
    }

    /// Parameter `i` as a register of type `T`; an error if the signature
    /// gave it another type, or if it stays in memory
    /// ([`ErrorKind::ParamInMemory`]: see [`local`](Params::local)).
    #[inline]
    pub fn get<T: Type>(&self, i: usize) -> Result<Reg<T>> {
        if let Some(&r) = self.all().get(i)
            && r.n != Self::IN_MEMORY
            && let Some(x) = r.typed::<T>()
        {
            return Ok(x);
        }
        Err(self.get_failed::<T>(i))
    }

    /// Why [`get`](Params::get) refused parameter `i`.
    #[cold]
    #[inline(never)]
    fn get_failed<T: Type>(&self, i: usize) -> Error {
        match self.typed_at::<T>(i, "Params::get") {
            Err(e) => e,
            Ok(_) => Error::new(0, "Params::get", ErrorKind::ParamInMemory { index: i }),
        }
    }

    /// The fixed name parameter `i` arrives in: `Some(k)` when it is
    /// [`Reg::t(k)`](Reg::t) (for its type's register file), `None` when
    /// it has none (a parameter that arrived on the stack or in `rcx` and
    /// was given a register from `getreg` has one only by chance). Under
    /// System V, `"%p%i"` puts the parameters in `T5` and `T4` (`rdi`,
    /// `rsi`), and float parameters in `T14`, `T13`, ... (`xmm0`, `xmm1`).
    ///
    /// ```
    /// use vcode::{Func, I, Leaf, P, Reg};
    /// let mut f = Func::new();
    /// let p = f.lambda("%p%i%d", Leaf::Yes)?;
    /// assert_eq!((p.fixed(0), p.fixed(1), p.fixed(2)), (Some(5), Some(4), Some(14)));
    /// assert_eq!(p.get::<P>(0)?, Reg::<P>::t(5));
    /// # f.retv(); f.end()?;
    /// # Ok::<(), vcode::Error>(())
    /// ```
    pub fn fixed(&self, i: usize) -> Option<usize> {
        let r = self.any(i)?;
        let names: &[u8] = if r.ty.is_float() {
            &crate::host::FIXED_FT
        } else {
            &crate::host::FIXED_T
        };
        names.iter().position(|&n| n == r.n)
    }

    /// Parameter `i` untyped; `None` if there is no parameter `i` or it
    /// stays in memory (see [`local`](Params::local)).
    pub fn any(&self, i: usize) -> Option<AnyReg> {
        self.all()
            .get(i)
            .copied()
            .filter(|r| r.n != Self::IN_MEMORY)
    }

    /// True if parameter `i` stays in its incoming stack slot: `lambda`
    /// gives parameters registers in order, and a parameter that arrives
    /// on the stack when no temporary register of its file is left stays
    /// where it arrived. Read and write it through [`local`](Params::local).
    pub fn in_memory(&self, i: usize) -> bool {
        self.all().get(i).is_some_and(|r| r.n == Self::IN_MEMORY)
    }

    /// Parameter `i`, kept in memory, as a stack local of type `T`: read it
    /// with [`ld_local`](Func::ld_local), overwrite it with
    /// [`st_local`](Func::st_local), take its address with
    /// [`addr_local`](Func::addr_local). An error if it lives in a register
    /// ([`ErrorKind::ParamInRegister`]), does not exist, or has another
    /// type. The handle belongs to the function this `lambda` began.
    ///
    /// Integer parameters past the temporaries stay in memory: on x86-64,
    /// 32 `%l` parameters leave a few dozen in registers and the rest in
    /// their stack slots.
    ///
    /// ```
    /// use vcode::{Func, L, Leaf};
    /// // long last(long a0, ..., long a31) { return a31; }
    /// let mut f = Func::new();
    /// let p = f.lambda(&"%l".repeat(32), Leaf::Yes)?;
    /// assert!(p.in_memory(31) && !p.in_memory(0));
    /// let r = p.get::<L>(0)?;
    /// f.ld_local(r, p.local::<L>(31)?);
    /// f.ret(r);
    /// let code = f.end()?;
    /// let args: Vec<vcode::Value> = (0..32).map(|k| vcode::Value::L(k * 10)).collect();
    /// // SAFETY: the code reads its last argument.
    /// let out = unsafe { vcode::Invoke::invoke(&code, &args) }.unwrap();
    /// assert_eq!(out, vcode::Value::L(310));
    /// # Ok::<(), vcode::Error>(())
    /// ```
    pub fn local<T: Type>(&self, i: usize) -> Result<Local<T>> {
        let r = self.typed_at::<T>(i, "Params::local")?;
        if r.n != Self::IN_MEMORY {
            return Err(Error::new(
                0,
                "Params::local",
                ErrorKind::ParamInRegister { index: i },
            ));
        }
        let off = crate::backend::param_slot_off(self.shape.slots[i] as usize);
        Ok(Local::new(off, crate::backend::PARAM_LOCAL | i as u32))
    }

    /// All parameters, in order: their registers, and
    /// [`IN_MEMORY`](Params::IN_MEMORY) for those kept in memory.
    pub fn all(&self) -> &'static [AnyReg] {
        self.shape.regs()
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.shape.sig.params().len()
    }

    /// True for a function without parameters.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Assigns registers to parameters the way every backend does: claim the
/// argument registers the convention leaves a parameter in, then give
/// registers from `getreg` to parameters arriving on the stack or in a
/// register the backend keeps (`rcx` on x86-64), in order. A parameter
/// arriving on the stack when its register file has no temporary left
/// stays in its stack slot ([`Params::IN_MEMORY`], its slot in the second
/// array).
#[allow(clippy::type_complexity)]
fn assign_params(
    conv: &dyn CallConv,
    sig: &Signature,
    locs: &[ArgLoc],
    alloc: &mut RegAlloc,
) -> Result<([AnyReg; MAX_PARAMS], [u8; MAX_PARAMS])> {
    let err = |kind| Error::new(0, "lambda", kind);
    for (&ty, &loc) in sig.params().iter().zip(locs) {
        if let ArgLoc::Reg(n) = loc
            && conv.keeps_param(ty, loc)
        {
            alloc.claim(ty.is_float(), n).map_err(err)?;
        }
    }
    let mut out = Shape::EMPTY.regs;
    let mut slots = [0u8; MAX_PARAMS];
    for (index, ((&ty, &loc), o)) in sig.params().iter().zip(locs).zip(&mut out).enumerate() {
        let n = match loc {
            ArgLoc::Reg(n) if conv.keeps_param(ty, loc) => n,
            _ => match (alloc.getreg(Class::Temp, ty.is_float()), loc) {
                (Ok(n), _) => n,
                (Err(_), ArgLoc::Stack(slot)) => {
                    slots[index] = slot as u8;
                    Params::IN_MEMORY
                }
                (Err(_), ArgLoc::Reg(_)) => {
                    return Err(err(ErrorKind::NoRegisterForParam {
                        index,
                        ty,
                        what: if ty.is_float() { "float" } else { "integer" },
                    }));
                }
            },
        };
        *o = AnyReg { ty, n };
    }
    Ok((out, slots))
}

/// A function under construction (`v_lambda` ... `v_end`).
///
/// `Func<X64>` (the default) writes x86-64 machine code; `Func<Reference>`
/// records and executes the same instructions. Client code is written
/// once, generic over [`Backend`]. A `Func` is reused: after `end`, call
/// `lambda` again and its buffers are reused. Several `Func`s may be under
/// construction at once.
///
/// ```
/// use vcode::{Func, Leaf, I};
/// // int plus1(int x) { return x + 1; }  (the paper's Figure 1)
/// let mut f = Func::new();
/// let args = f.lambda("%i", Leaf::Yes)?;
/// let x = args.get::<I>(0)?;
/// f.add(x, x, 1);
/// f.ret(x);
/// let code = f.end()?;
/// // SAFETY: the code only computes on its argument.
/// let plus1 = unsafe { code.as_fn::<extern "C" fn(i32) -> i32>()? };
/// assert_eq!(plus1(41), 42);
/// # Ok::<(), vcode::Error>(())
/// ```
pub struct Func<B: Backend = X64> {
    b: B,
    alloc: RegAlloc,
    cfg: RegConfig,
    /// The signature of the function under construction (interned by
    /// `lambda`: `end` hands the code a reference).
    sig: &'static Signature,
    name: Option<String>,
    /// What `lambda` last derived from a signature string, reused when the
    /// next function has the same one (the common case of a client
    /// generating many functions of one shape).
    cache: Option<LambdaCache>,
    /// The vector width of the [`Wide`](crate::ext::Wide) instructions, in
    /// bits: 512, 256, or 0 for the widest the CPU has.
    pub(crate) wide_bits: u32,
}

/// A parsed signature and the register assignment of its parameters.
struct LambdaCache {
    text: String,
    leaf: bool,
    shape: &'static Shape,
    alloc: RegAlloc,
    /// Some parameter arrives somewhere else than the register it is given.
    moves: bool,
}

impl Default for Func<X64> {
    fn default() -> Self {
        Func::new()
    }
}

macro_rules! binops {
    ($($(#[$m:meta])* $name:ident $op:ident $bound:ident;)*) => {$(
        $(#[$m])*
        #[inline(always)]
        pub fn $name<T: $bound>(&mut self, rd: Reg<T>, a: Reg<T>, b: impl Into<Operand<T>>) {
            self.bin(stringify!($name), BinOp::$op, rd, a, b.into());
        }
    )*};
}

macro_rules! branches {
    ($($(#[$m:meta])* $name:ident $c:ident;)*) => {$(
        $(#[$m])*
        #[inline(always)]
        pub fn $name<T: Type>(&mut self, a: Reg<T>, b: impl Into<Operand<T>>, l: Label) {
            self.br(stringify!($name), Cond::$c, a, b.into(), l);
        }
    )*};
}

macro_rules! narrow {
    ($($(#[$m:meta])* $ld:ident $mem:ident;)*) => {$(
        $(#[$m])*
        #[inline(always)]
        pub fn $ld<T: Int>(&mut self, rd: Reg<T>, base: Reg<P>, off: impl Into<Operand<P>>) {
            let off = off.into();
            self.chk(stringify!($ld), &[(false, rd.num()), (false, base.num()), off_reg(off)]);
            self.b.load(stringify!($ld), Ty::$mem, T::TY, rd.num(), base.num(), src(off));
        }
    )*};
}

/// `a == b` for `lambda`'s cache: a signature string is a few bytes, and
/// comparing them in one or two words beats a `memcmp` call.
#[inline(always)]
fn same_text(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    let half = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes"));
    match n {
        // Both ends, overlapping in the middle: every byte is compared.
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=8 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        9..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        _ => a == b,
    }
}

#[inline(always)]
fn src<T>(o: Operand<T>) -> Src {
    match o {
        Operand::Reg(r) => Src::R(r.num()),
        Operand::Imm(v) => Src::I(v),
    }
}

/// The register an operand reads, for the reference backend's checks
/// (an immediate checks `rdi` twice, harmlessly: it is in the list already).
#[inline(always)]
fn off_reg<T>(o: Operand<T>) -> (bool, u8) {
    match o {
        Operand::Reg(r) => (false, r.num()),
        Operand::Imm(_) => (false, u8::MAX),
    }
}

impl Func<X64> {
    /// A function builder for the native x86-64 backend.
    pub fn new() -> Self {
        Func::with_backend()
    }

    /// Limits the machine code of the functions begun from now on to
    /// `bytes` (the default is [`x86_64::DEFAULT_LIMIT`](crate::x86_64::DEFAULT_LIMIT));
    /// past it, [`end`](Func::end) reports [`ErrorKind::CodeTooLarge`] at
    /// the instruction that crossed it. The limit is checked when the
    /// buffer must grow, which leaves room for a few instructions, so a
    /// function may be refused up to a few hundred bytes short of it. A
    /// limit above 2 GiB less 4 KiB (the reach of x86-64's rel32) counts
    /// as that limit.
    pub fn set_code_limit(&mut self, bytes: usize) {
        self.b.buf = crate::buf::Buf::new(bytes);
    }
}

impl<B: Backend> Func<B> {
    /// A function builder for backend `B`.
    pub fn with_backend() -> Self {
        let cfg = RegConfig::default();
        Func {
            b: B::new(),
            alloc: RegAlloc::new(cfg.clone(), true),
            cfg,
            sig: &Shape::EMPTY.sig,
            name: None,
            cache: None,
            wide_bits: 0,
        }
    }

    /// Sets the register classification for the functions begun from now
    /// on (paper §5.3).
    pub fn set_config(&mut self, cfg: RegConfig) {
        self.cfg = cfg;
        self.cache = None;
    }

    /// Frames the functions begun from now on from the stack pointer, with
    /// room for at most `locals` bytes of locals (`None`: the target's
    /// ordinary frame again). On x86-64 such a frame has no frame pointer:
    /// two instructions fewer a call than `push rbp; mov rbp, rsp` and
    /// `leave`, for a client whose code is entered often and briefly (the
    /// jive JIT). Its functions may not use `jal` (which moves the stack
    /// pointer the locals are addressed from; it fails), and one whose
    /// locals outgrow `locals` fails at `end`. Other targets keep their
    /// frame.
    pub fn frame_from_sp(&mut self, locals: Option<u32>) {
        use crate::ext::Targets;
        if let Some(x) = self.b.x86() {
            x.frame_from_sp(locals);
        }
    }

    /// Begins a function (`v_lambda`). `sig` lists the parameter types,
    /// e.g. `"%i%p%d"`; `leaf` is the leaf hint. Returns the registers
    /// holding the parameters. Parameters that arrive on the stack (or in
    /// a register the backend keeps) are copied into temporary registers
    /// while temporaries last; the rest of those arriving on the stack stay
    /// in their stack slots, read through [`Params::local`]. Up to 32
    /// parameters of any types.
    ///
    /// A function begun on this `Func` and not yet ended is abandoned.
    #[inline(always)]
    pub fn lambda(&mut self, sig: &str, leaf: Leaf) -> Result<Params> {
        let leaf = leaf == Leaf::Yes;
        // The cache is compared and read in place: moving it out and back
        // costs two copies of a few hundred bytes per function.
        let hit = matches!(&self.cache, Some(c) if c.leaf == leaf && same_text(&c.text, sig));
        if !hit {
            self.prepare(sig, leaf)?;
        }
        let Some(cache) = &self.cache else {
            unreachable!("filled above")
        };
        self.alloc.clone_from(&cache.alloc);
        let shape = cache.shape;
        self.sig = &shape.sig;
        self.name = None;
        self.b.begin(&shape.sig, shape.regs(), cache.moves);
        Ok(Params { shape })
    }

    /// Parses `text`, assigns the parameters their registers and caches
    /// the result (reusing the old entry's string buffer).
    #[cold]
    #[inline(never)]
    fn prepare(&mut self, text: &str, leaf: bool) -> Result<()> {
        let sig = Signature::parse(text).map_err(|kind| Error::new(0, "lambda", kind))?;
        let mut alloc = RegAlloc::new(self.cfg.clone(), leaf);
        let conv = self.b.conv();
        let mut locs = [ArgLoc::Stack(0); MAX_PARAMS];
        let locs = &mut locs[..sig.params().len()];
        conv.arg_locs(sig.params(), locs);
        let (regs, slots) = assign_params(conv, &sig, locs, &mut alloc)?;
        let moves = regs
            .iter()
            .zip(locs.iter())
            .any(|(r, &loc)| loc != ArgLoc::Reg(r.n));
        let mut s = self.cache.take().map(|c| c.text).unwrap_or_default();
        s.clear();
        s.push_str(text);
        self.cache = Some(LambdaCache {
            text: s,
            leaf,
            shape: Shape { sig, regs, slots }.intern(),
            alloc,
            moves,
        });
        Ok(())
    }

    /// Names the function for disassembly listings and the perf map.
    pub fn name(&mut self, name: impl Into<String>) {
        self.name = Some(name.into());
    }

    /// Ends the function (`v_end`): backpatches branches, builds the
    /// prologue and epilogue, places float constants after the code, and
    /// links it into executable memory. Returns the first error recorded
    /// since `lambda`, if any.
    pub fn end(&mut self) -> Result<B::Code> {
        self.b.finish(&self.alloc, self.sig, self.name.take(), None)
    }

    /// Like [`end`](Func::end), placing the code in `mem`.
    pub fn end_in(&mut self, mem: &dyn ExecMemory) -> Result<B::Code> {
        self.b
            .finish(&self.alloc, self.sig, self.name.take(), Some(mem))
    }

    // -- registers --------------------------------------------------------------

    /// A free register of `class` (`v_getreg`), in the documented priority
    /// order (see `docs/vcode.md`). A register an instruction of this
    /// function has already written while it was not allocated (a fixed name
    /// such as [`Reg::t`]) is skipped until it is released with
    /// [`reserve`](Func::reserve) and [`putreg`](Func::putreg), so `getreg`
    /// never aliases a fixed name in use. When the class is exhausted it returns
    /// `RegistersExhausted` (naming the next instruction) and nothing else
    /// happens: the client may spill to a [`local`](Func::local) and carry on.
    #[inline(always)]
    pub fn getreg<T: Type>(&mut self, class: Class) -> Result<Reg<T>> {
        match self.alloc.try_getreg(class, T::TY.is_float()) {
            Some(n) => Ok(Reg::phys(n)),
            None => Err(self.getreg_failed(class, T::TY.is_float())),
        }
    }

    #[cold]
    #[inline(never)]
    fn getreg_failed(&self, class: Class, float: bool) -> Error {
        Error::new(
            self.b.next_index(),
            "getreg",
            RegAlloc::exhausted(class, float),
        )
    }

    /// How many registers of `class` for type `T` `getreg` would hand out
    /// now: a spilling client asks this instead of mirroring the pool.
    /// Registers written by the function's instructions while free (fixed
    /// names) do not count, as `getreg` skips them.
    ///
    /// ```
    /// use vcode::{Class, Func, I, Leaf};
    /// let mut f = Func::new();
    /// f.lambda("%i", Leaf::Yes)?;
    /// let n = f.free_regs::<I>(Class::Temp);
    /// for _ in 0..n {
    ///     f.getreg::<I>(Class::Temp)?;
    /// }
    /// assert_eq!(f.free_regs::<I>(Class::Temp), 0);
    /// assert!(f.getreg::<I>(Class::Temp).is_err());
    /// # Ok::<(), vcode::Error>(())
    /// ```
    pub fn free_regs<T: Type>(&self, class: Class) -> usize {
        self.alloc.free_count(class, T::TY.is_float())
    }

    /// Returns a register to the pool (`v_putreg`). Releasing a register
    /// twice is recorded as an error.
    #[inline(always)]
    pub fn putreg<T: Type>(&mut self, r: Reg<T>) {
        if !self.alloc.try_putreg(T::TY.is_float(), r.num()) {
            self.putreg_failed(T::TY.is_float(), r.num());
        }
    }

    #[cold]
    #[inline(never)]
    fn putreg_failed(&mut self, float: bool, n: u8) {
        if let Err(kind) = self.alloc.putreg(float, n) {
            self.b.fail("putreg", kind);
        }
    }

    /// Claims a specific register, typically a fixed name such as
    /// [`Reg::s`], so that `getreg` will not hand it out and `end` saves
    /// it if it is callee-saved. A register that is not free is refused
    /// with `BadRegister`, and nothing else happens.
    #[inline(always)]
    pub fn reserve<T: Type>(&mut self, r: Reg<T>) -> Result<Reg<T>> {
        if self.alloc.try_claim(T::TY.is_float(), r.num()) {
            Ok(r)
        } else {
            Err(self.reserve_failed(T::TY.is_float(), r.num()))
        }
    }

    #[cold]
    #[inline(never)]
    fn reserve_failed(&self, float: bool, n: u8) -> Error {
        Error::new(self.b.next_index(), "reserve", RegAlloc::not_free(float, n))
    }

    /// Starts an instruction whose first register, `regs[0]`, is written:
    /// that register is marked for `getreg` (a fixed name the function has
    /// written is not handed out). One `or` (a constant one for a fixed
    /// name); the reference backend checks every register.
    #[inline(always)]
    fn chk(&mut self, m: &'static str, regs: &[(bool, u8)]) {
        self.alloc.note_used(&regs[..1]);
        self.b.check(m, &self.alloc, regs);
    }

    /// Starts an instruction that writes no register (stores, branches,
    /// returns, jumps): nothing is marked.
    #[inline(always)]
    fn chk_read(&mut self, m: &'static str, regs: &[(bool, u8)]) {
        self.b.check(m, &self.alloc, regs);
    }

    #[inline(always)]
    fn bin<T: Type>(&mut self, m: &'static str, op: BinOp, rd: Reg<T>, a: Reg<T>, b: Operand<T>) {
        let f = T::TY.is_float();
        let bb = match b {
            Operand::Reg(r) => (f, r.num()),
            Operand::Imm(_) => (f, u8::MAX),
        };
        self.chk(m, &[(f, rd.num()), (f, a.num()), bb]);
        self.b.binop(m, op, T::TY, rd.num(), a.num(), src(b));
    }

    #[inline(always)]
    fn un<T: Type>(&mut self, m: &'static str, op: UnOp, rd: Reg<T>, a: Reg<T>) {
        let f = T::TY.is_float();
        self.chk(m, &[(f, rd.num()), (f, a.num())]);
        self.b.unop(m, op, T::TY, rd.num(), a.num());
    }

    #[inline(always)]
    fn br<T: Type>(&mut self, m: &'static str, c: Cond, a: Reg<T>, b: Operand<T>, l: Label) {
        let f = T::TY.is_float();
        let bb = match b {
            Operand::Reg(r) => (f, r.num()),
            Operand::Imm(_) => (f, u8::MAX),
        };
        self.chk_read(m, &[(f, a.num()), bb]);
        self.b.branch(m, c, T::TY, a.num(), src(b), l);
    }

    // -- binary operations (Table 2) ---------------------------------------------

    binops! {
        /// `rd = a + b` (`v_add`).
        add Add Type;
        /// `rd = a - b` (`v_sub`).
        sub Sub Type;
        /// `rd = a * b` (`v_mul`).
        mul Mul Type;
        /// `rd = a / b` (`v_div`). See the crate docs for division by zero.
        div Div Type;
        /// `rd = a % b` (`v_mod`; `mod` is a Rust keyword).
        rem Mod Int;
        /// `rd = a & b` (`v_and`).
        and And Int;
        /// `rd = a | b` (`v_or`).
        or Or Int;
        /// `rd = a ^ b` (`v_xor`).
        xor Xor Int;
        /// `rd = a << b` (`v_lsh`), the count taken modulo the width.
        lsh Lsh Int;
        /// `rd = a >> b` (`v_rsh`): arithmetic for `i`/`l`, logical otherwise;
        /// the count taken modulo the width.
        rsh Rsh Int;
    }

    // -- unary operations ------------------------------------------------------------

    /// `rd = ~a` (`v_com`).
    #[inline(always)]
    pub fn com<T: Int>(&mut self, rd: Reg<T>, a: Reg<T>) {
        self.un("com", UnOp::Com, rd, a);
    }

    /// `rd = !a`: 1 if `a` is zero, else 0 (`v_not`).
    #[inline(always)]
    pub fn not<T: Int>(&mut self, rd: Reg<T>, a: Reg<T>) {
        self.un("not", UnOp::Not, rd, a);
    }

    /// `rd = a` (`v_mov`).
    #[inline(always)]
    pub fn mov<T: Type>(&mut self, rd: Reg<T>, a: Reg<T>) {
        self.un("mov", UnOp::Mov, rd, a);
    }

    /// `rd = -a` (`v_neg`).
    #[inline(always)]
    pub fn neg<T: Type>(&mut self, rd: Reg<T>, a: Reg<T>) {
        self.un("neg", UnOp::Neg, rd, a);
    }

    /// `rd = v` (`v_set`): any value of the type, including every 64-bit
    /// integer and every float.
    #[inline(always)]
    pub fn set<T: Type>(&mut self, rd: Reg<T>, v: T::Native) {
        self.chk("set", &[(T::TY.is_float(), rd.num())]);
        self.b.set("set", T::TY, rd.num(), T::to_bits(v));
    }

    /// `rd = (D) rs` (`v_cvi2l`, `v_cvd2f`, ...): every conversion between
    /// register types except between `p` and the float types.
    #[inline(always)]
    pub fn cv<S: Type, D: Type>(&mut self, rd: Reg<D>, rs: Reg<S>) {
        self.chk(
            "cv",
            &[(D::TY.is_float(), rd.num()), (S::TY.is_float(), rs.num())],
        );
        self.b.cvt("cv", S::TY, D::TY, rd.num(), rs.num());
    }

    /// Converts `r` to type `D` in its own register (`cv` with `rd` the
    /// same register as `rs`) and returns the register as a `Reg<D>`: an
    /// `i` subscript widened to `p` costs one instruction (`movsxd r, r32`)
    /// and no `getreg`/`putreg`. `r` is consumed: its register now holds
    /// the `D` value. Both types must live in the same register file
    /// (integer and integer, or float and float), which is checked at
    /// compile time; the conversions are those of [`cv`](Func::cv).
    ///
    /// ```
    /// use vcode::{Func, Leaf, I, P};
    /// // long at(long *a, int i) { return a[i]; }
    /// let mut f = Func::new();
    /// let p = f.lambda("%p%i", Leaf::Yes)?;
    /// let (a, i) = (p.get::<P>(0)?, p.get::<I>(1)?);
    /// let ix = f.cv_in_place::<P>(i); // sign-extends i into its register
    /// f.lsh(ix, ix, 3);
    /// f.add(a, a, ix);
    /// let x = ix.cast::<vcode::L>();
    /// f.ld(x, a, 0);
    /// f.ret(x);
    /// let code = f.end()?;
    /// let v = [10i64, 20, 30];
    /// // SAFETY: reads a[i] for an index in bounds.
    /// let at = unsafe { code.as_fn::<extern "C" fn(*const i64, i32) -> i64>()? };
    /// assert_eq!(at(v.as_ptr(), 2), 30);
    /// # Ok::<(), vcode::Error>(())
    /// ```
    ///
    /// An integer register cannot become a float one in place:
    ///
    /// ```compile_fail
    /// # use vcode::{Func, Leaf, I, D};
    /// let mut f = Func::new();
    /// let i = f.lambda("%i", Leaf::Yes).unwrap().get::<I>(0).unwrap();
    /// let d = f.cv_in_place::<D>(i);
    /// ```
    #[inline(always)]
    pub fn cv_in_place<D: Type>(&mut self, r: Reg<impl Type>) -> Reg<D> {
        self.cv_same(r)
    }

    #[inline(always)]
    fn cv_same<S: Type, D: Type>(&mut self, r: Reg<S>) -> Reg<D> {
        const {
            assert!(
                S::TY.is_float() == D::TY.is_float(),
                "cv_in_place between register files"
            )
        };
        let rd = Reg::<D>::phys(r.num());
        self.cv(rd, r);
        rd
    }

    // -- memory -----------------------------------------------------------------------

    /// `rd = *(T *)(base + off)` (`v_ld`).
    #[inline(always)]
    pub fn ld<T: Type>(&mut self, rd: Reg<T>, base: Reg<P>, off: impl Into<Operand<P>>) {
        let off = off.into();
        self.chk(
            "ld",
            &[
                (T::TY.is_float(), rd.num()),
                (false, base.num()),
                off_reg(off),
            ],
        );
        self.b
            .load("ld", T::TY, T::TY, rd.num(), base.num(), src(off));
    }

    /// `*(T *)(base + off) = rs` (`v_st`).
    #[inline(always)]
    pub fn st<T: Type>(&mut self, rs: Reg<T>, base: Reg<P>, off: impl Into<Operand<P>>) {
        let off = off.into();
        self.chk_read(
            "st",
            &[
                (T::TY.is_float(), rs.num()),
                (false, base.num()),
                off_reg(off),
            ],
        );
        self.b.store("st", T::TY, rs.num(), base.num(), src(off));
    }

    narrow! {
        /// Loads a `signed char` and sign-extends it to `rd`'s width (`v_ldc`).
        ldc C;
        /// Loads an `unsigned char` and zero-extends it (`v_lduc`).
        lduc UC;
        /// Loads a `short` and sign-extends it (`v_lds`).
        lds S;
        /// Loads an `unsigned short` and zero-extends it (`v_ldus`).
        ldus US;
        /// Loads an `unsigned int` and zero-extends it to `rd`'s width
        /// (`v_ldu` into an `l`/`ul` register).
        ldu U;
    }

    /// Stores the low byte of `rs` (`v_stc`, `v_stuc`).
    #[inline(always)]
    pub fn stc<T: Int>(&mut self, rs: Reg<T>, base: Reg<P>, off: impl Into<Operand<P>>) {
        let off = off.into();
        self.chk_read(
            "stc",
            &[(false, rs.num()), (false, base.num()), off_reg(off)],
        );
        self.b.store("stc", Ty::C, rs.num(), base.num(), src(off));
    }

    /// Stores the low 16 bits of `rs` (`v_sts`, `v_stus`).
    #[inline(always)]
    pub fn sts<T: Int>(&mut self, rs: Reg<T>, base: Reg<P>, off: impl Into<Operand<P>>) {
        let off = off.into();
        self.chk_read(
            "sts",
            &[(false, rs.num()), (false, base.num()), off_reg(off)],
        );
        self.b.store("sts", Ty::S, rs.num(), base.num(), src(off));
    }

    /// A new stack local of type `T` (`v_local`).
    pub fn local<T: Type>(&mut self) -> Local<T> {
        let (off, id) = self.b.local(T::TY);
        Local::new(off, id)
    }

    /// `rd = local`.
    #[inline(always)]
    pub fn ld_local<T: Type>(&mut self, rd: Reg<T>, l: Local<T>) {
        self.chk("ld_local", &[(T::TY.is_float(), rd.num())]);
        self.b
            .local_op("ld_local", LocalOp::Load, T::TY, rd.num(), l.off, l.id);
    }

    /// `local = rs`.
    #[inline(always)]
    pub fn st_local<T: Type>(&mut self, rs: Reg<T>, l: Local<T>) {
        self.chk_read("st_local", &[(T::TY.is_float(), rs.num())]);
        self.b
            .local_op("st_local", LocalOp::Store, T::TY, rs.num(), l.off, l.id);
    }

    /// `rd = &local`.
    #[inline(always)]
    pub fn addr_local<T: Type>(&mut self, rd: Reg<P>, l: Local<T>) {
        self.chk("addr_local", &[(false, rd.num())]);
        self.b
            .local_op("addr_local", LocalOp::Addr, T::TY, rd.num(), l.off, l.id);
    }

    // -- control --------------------------------------------------------------------------

    /// Returns `r` (`v_ret`). Every return of a function must have the same type.
    #[inline(always)]
    pub fn ret<T: Type>(&mut self, r: Reg<T>) {
        self.chk_read("ret", &[(T::TY.is_float(), r.num())]);
        self.b.ret("ret", T::TY, r.num());
    }

    /// Returns without a value (`v_retv`).
    #[inline(always)]
    pub fn retv(&mut self) {
        self.b.ret("retv", Ty::V, 0);
    }

    /// A new label (`v_genlabel`).
    #[inline(always)]
    pub fn genlabel(&mut self) -> Label {
        self.b.genlabel()
    }

    /// Places `l` at the current position (`v_label`).
    #[inline(always)]
    pub fn label(&mut self, l: Label) {
        self.b.place("label", l);
    }

    /// Jumps to a label, the address in a `p` register, or an absolute
    /// address (`v_jv`, `v_jp`, `v_j` with a label).
    #[inline(always)]
    pub fn jmp(&mut self, t: impl Into<Target>) {
        let t = t.into();
        if let Target::Reg(r) = t {
            self.chk_read("jmp", &[(false, r)]);
        }
        self.b.jump("jmp", false, t);
    }

    /// Jump-and-link (`v_jal`): a call with no argument set-up. The target
    /// returns with the native return instruction: a generated function,
    /// a native function, or a subroutine of this function that ends with
    /// [`ret_link`](Func::ret_link).
    #[inline(always)]
    pub fn jal(&mut self, t: impl Into<Target>) {
        let t = t.into();
        if let Target::Reg(r) = t {
            self.chk_read("jal", &[(false, r)]);
        }
        self.b.jump("jal", true, t);
    }

    /// Returns from a subroutine entered with [`jal`](Func::jal) to a label.
    #[inline(always)]
    pub fn ret_link(&mut self) {
        self.b.ret_link("ret_link");
    }

    branches! {
        /// Branch to `l` if `a < b` (`v_blt`).
        blt Lt;
        /// Branch to `l` if `a <= b` (`v_ble`).
        ble Le;
        /// Branch to `l` if `a > b` (`v_bgt`).
        bgt Gt;
        /// Branch to `l` if `a >= b` (`v_bge`).
        bge Ge;
        /// Branch to `l` if `a == b` (`v_beq`).
        beq Eq;
        /// Branch to `l` if `a != b` (`v_bne`).
        bne Ne;
    }

    /// Calls `callee` with an argument list built at run time and puts
    /// the result in `rd`. Temporary registers do not survive the call.
    pub fn call<T: Type>(&mut self, rd: Reg<T>, callee: Callee<'_, B::Code>, args: &[Arg]) {
        self.call_checks("call", callee, args, Some(rd.any()));
        self.b
            .call("call", callee, args, Some(rd.any()), &self.alloc);
    }

    /// Calls `callee` for its effect (or ignoring its result).
    pub fn callv(&mut self, callee: Callee<'_, B::Code>, args: &[Arg]) {
        self.call_checks("callv", callee, args, None);
        self.b.call("callv", callee, args, None, &self.alloc);
    }

    fn call_checks(
        &mut self,
        m: &'static str,
        callee: Callee<'_, B::Code>,
        args: &[Arg],
        rd: Option<AnyReg>,
    ) {
        let mut regs: Vec<(bool, u8)> = args
            .iter()
            .filter_map(|a| match *a {
                Arg::Reg(r) => Some((r.ty.is_float(), r.n)),
                Arg::Mem { base, .. } => Some((false, base)),
                Arg::Imm(..) => None,
            })
            .collect();
        if let Callee::Reg(r) = callee {
            regs.push((false, r));
        }
        if let Some(r) = rd {
            regs.push((r.ty.is_float(), r.n));
        }
        self.alloc.note_used(&regs);
        self.chk_read(m, &regs);
    }

    /// No operation (`v_nop`).
    #[inline(always)]
    pub fn nop(&mut self) {
        self.b.nop("nop");
    }

    /// Pads with no-ops so that the next instruction starts at a multiple
    /// of `n` bytes (a power of two up to 64): for loop heads, which run
    /// faster when they do not straddle a fetch block, and whose placement
    /// otherwise varies with every change of the code before them. The
    /// prologue is padded to a multiple of `n` too, so the alignment holds
    /// in memory wherever the function's block starts at a multiple of `n`
    /// (16 in vcode's own executable memory, 64 and more in a code cache's
    /// blocks); on x86-64 that padding comes before the entry, where no
    /// call runs it. A no-op on the reference backend.
    pub fn align(&mut self, n: usize) {
        self.b.align("align", n);
    }

    /// Jumps to `targets[idx]`: the dispatch of a dense `switch`. Not in
    /// the paper's Table 2; dpf's classifiers need it. The client checks
    /// the bound first: an index past the end is undefined natively (the
    /// table is followed by code) and a fault on the reference backend.
    /// `idx` is left unchanged.
    ///
    /// ```
    /// use vcode::{Func, Leaf, UL};
    /// let mut f = Func::new();
    /// let x = f.lambda("%ul", Leaf::Yes)?.get::<UL>(0)?;
    /// let (l0, l1, l2, out) = (f.genlabel(), f.genlabel(), f.genlabel(), f.genlabel());
    /// f.bge(x, 3, out);
    /// f.jump_table(x, &[l0, l1, l2]);
    /// for (l, v) in [(l0, 10), (l1, 11), (l2, 12)] {
    ///     f.label(l);
    ///     f.set(x, v);
    ///     f.ret(x);
    /// }
    /// f.label(out);
    /// f.ret(x);
    /// let code = f.end()?;
    /// // SAFETY: the function takes and returns a u64.
    /// let g = unsafe { code.as_fn::<extern "C" fn(u64) -> u64>()? };
    /// assert_eq!((g(0), g(2), g(7)), (10, 12, 7));
    /// # Ok::<(), vcode::Error>(())
    /// ```
    #[inline]
    pub fn jump_table(&mut self, idx: Reg<UL>, targets: &[Label]) {
        self.chk_read("jump_table", &[(false, idx.num())]);
        self.b.jump_table("jump_table", idx.num(), targets);
    }

    /// Places `bytes` with the function's constants (after its code, in
    /// the same read-only, executable memory) and returns a handle for
    /// [`addr_data`](Func::addr_data): a lookup table that lives exactly as
    /// long as the code. Not in the paper's Table 2; dpf's classifiers map
    /// a dense key to a result through one. The data is 8-byte aligned.
    ///
    /// ```
    /// use vcode::{Func, Leaf, P, UL};
    /// let mut f = Func::new();
    /// let x = f.lambda("%ul", Leaf::Yes)?.get::<UL>(0)?;
    /// let squares: Vec<u8> = (0..8u64).flat_map(|i| (i * i).to_le_bytes()).collect();
    /// let table = f.data(&squares);
    /// let t = f.getreg::<P>(vcode::Class::Temp)?;
    /// f.addr_data(t, table);
    /// f.lsh(x, x, 3);
    /// f.ld(x, t, x.cast::<P>());
    /// f.ret(x);
    /// let code = f.end()?;
    /// // SAFETY: the function reads table[x] for x < 8.
    /// let sq = unsafe { code.as_fn::<extern "C" fn(u64) -> u64>()? };
    /// assert_eq!((sq(3), sq(7)), (9, 49));
    /// # Ok::<(), vcode::Error>(())
    /// ```
    pub fn data(&mut self, bytes: &[u8]) -> Data {
        Data(self.b.data(bytes))
    }

    /// `rd` = the address of constant data placed by [`data`](Func::data).
    #[inline]
    pub fn addr_data(&mut self, rd: Reg<P>, d: Data) {
        self.chk("addr_data", &[(false, rd.num())]);
        self.b.addr_data("addr_data", rd.num(), d.0);
    }

    /// Where the next instruction goes: its byte offset in the function's
    /// body on a native backend (see [`Code::disassemble_marked`](crate::Code::disassemble_marked)),
    /// its instruction index on the reference backend. For clients that map
    /// their own source positions to machine code (the jive JIT's listing).
    pub fn code_offset(&mut self) -> usize {
        self.b.code_offset()
    }

    /// The backend, for extensions (see [`ext`](crate::ext)).
    #[inline(always)]
    pub fn backend(&mut self) -> &mut B {
        &mut self.b
    }

    /// Checks registers for an extension instruction (reference backend).
    #[inline(always)]
    pub fn check_regs(&mut self, m: &'static str, regs: &[(bool, u8)]) {
        self.alloc.note_used(regs);
        self.b.check(m, &self.alloc, regs);
    }

    /// The callee-saved registers this function uses so far (integer,
    /// float), which `end` saves.
    pub(crate) fn used_callee_saved(&self) -> [u16; 2] {
        self.alloc.used_callee_saved()
    }

    /// The register classes this function allocates by
    /// ([`Func::set_config`]).
    pub fn config(&self) -> &RegConfig {
        &self.cfg
    }

    /// Records an error for an extension instruction.
    pub fn fail(&mut self, m: &'static str, kind: ErrorKind) {
        self.b.fail(m, kind);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_texts_compare_as_strings() {
        let texts = [
            "",
            "%",
            "%i",
            "%p%",
            "%p%i",
            "%p%l",
            "%d%d%d%d%p",
            "%ul%ul%ul%ul%i",
            "%ul%ul%ul%ul%ul%ul%u",
        ];
        for a in texts {
            for b in texts {
                assert_eq!(same_text(a, b), a == b, "{a:?} {b:?}");
            }
            // Every byte position matters.
            for at in 0..a.len() {
                let mut c = a.as_bytes().to_vec();
                c[at] ^= 1;
                assert!(
                    !same_text(a, std::str::from_utf8(&c).unwrap()),
                    "{a:?} at {at}"
                );
            }
        }
    }

    #[test]
    fn functions_of_one_signature_share_its_parameters() {
        let mut f = Func::new();
        let p = f.lambda("%p%i%d", Leaf::Yes).unwrap();
        f.retv();
        let c1 = f.end().unwrap();
        // Another signature in between empties the cache.
        f.lambda("%i", Leaf::Yes).unwrap();
        f.retv();
        f.end().unwrap();
        let q = f.lambda("%p%i%d", Leaf::Yes).unwrap();
        f.retv();
        let c2 = f.end().unwrap();
        assert!(std::ptr::eq(p.shape, q.shape), "interned once");
        assert!(std::ptr::eq(c1.signature(), c2.signature()));
        assert_eq!(c1.signature().to_string(), "%p%i%d");
        assert_eq!(p.all(), q.all());
        // A different assignment of the same signature (a non-leaf
        // function may not keep parameters in the registers it does) is
        // its own shape, equal in signature.
        let mut g = Func::new();
        g.set_config(crate::RegConfig::default());
        let r = g.lambda("%p%i%d", Leaf::No).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(format!("{p:?}"), format!("{:?}", p.all()));
        // `end` hands back a small `Code`: a pointer, not a copy, of the signature.
        assert!(
            std::mem::size_of::<crate::Code>() <= 88,
            "{}",
            std::mem::size_of::<crate::Code>()
        );
    }
}
