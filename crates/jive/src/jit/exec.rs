//! Compiled applets in the shared code cache, and running them: the
//! registry of keys, compilation and publication, the per-thread
//! registration, and the entry from `Applet::call` into generated code.

use super::*;

/// What compiling an applet yields besides its code: the trap sites, and
/// the listing's headings (body offset, method or bytecode index).
#[derive(Debug)]
pub(super) struct Meta {
    pub(super) sites: Vec<Site>,
    pub(super) marks: Vec<(usize, Mark)>,
    pub(super) methods: Vec<String>,
    /// Which of the context's bases the code reads.
    pub(super) uses: Uses,
    /// Bytes of machine code published (set once it is).
    pub(super) code_bytes: usize,
}

/// A heading of the native listing, formatted only when it is printed.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mark {
    Method(u16),
    Bci(u32),
    Traps,
}

/// Applets using each key, and what their compilation yielded.
pub(super) struct Shared {
    pub(super) users: usize,
    pub(super) meta: Arc<Meta>,
}

/// The code cache every JIT-compiled applet lives in (64 MiB; see
/// `docs/codecache.md`).
pub(super) fn cache() -> &'static codecache::CodeCache {
    static CACHE: OnceLock<codecache::CodeCache> = OnceLock::new();
    CACHE.get_or_init(|| codecache::CodeCache::new(codecache::Config::default()))
}

pub(super) fn registry() -> std::sync::MutexGuard<'static, HashMap<u64, Shared>> {
    static REGISTRY: OnceLock<Mutex<HashMap<u64, Shared>>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The shared code cache's statistics (live, pending and freed bytes, ...).
pub fn cache_stats() -> codecache::Stats {
    cache().stats()
}

/// Evicts the oldest generation of compiled code from the shared cache, as
/// the cache does by itself under memory pressure; returns how many
/// entries. The applets whose code it was keep running: each compiles its
/// code again at its next invocation (within the rebuild budget,
/// [`set_rebuild_budget`]; past it the interpreter runs the invocation),
/// and a thread still running the old
/// code finishes safely (it is freed after every thread's next
/// synchronization point). For a host that gives memory back, and for
/// tests of that path.
pub fn evict_oldest() -> usize {
    cache().evict_oldest()
}

/// The cache key of a program: a hash of everything its code depends on,
/// so that applets loaded from the same class (with the same metering)
/// share one compiled copy.
pub(super) fn fingerprint(prog: &Program) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    prog.info.name.hash(&mut h);
    for m in &prog.info.methods {
        m.name.hash(&mut h);
        m.descriptor.hash(&mut h);
        m.is_static.hash(&mut h);
    }
    prog.funcs.hash(&mut h);
    prog.switches.hash(&mut h);
    prog.natives.hash(&mut h);
    prog.metered().hash(&mut h);
    h.finish()
}

/// An applet's compiled code: a key in the shared cache, the trap sites,
/// and this applet's frame stack. Invocations run in a scope of the calling
/// thread's registration in the cache (`THREAD`). Dropping the last
/// `Compiled` of a key retires the code; the cache frees it once every
/// registered thread has passed a synchronization point (or is parked).
pub struct Compiled {
    /// The code's key in the cache ([`Found::key`]), and its last look-up
    /// there, reused by the next invocation while nothing has been
    /// retired since.
    pub(super) found: Found,
    pub(super) meta: Arc<Meta>,
    /// The frame stack, of a fixed size, so that the argument slots are
    /// reached without a bounds check ([`Compiled::args_mut`]).
    pub(super) frames: Box<[i32; STACK_SLOTS]>,
    /// The invocation record (the context and the runtime calls' side of
    /// it, [`Record`]), kept from one invocation to the next in an
    /// allocation of its own: the frame stack's bounds are written once,
    /// here; the applet object's fields, the call-depth limit and the
    /// applet's natives when they change ([`Compiled::keep`]); an
    /// invocation writes only the words that differ from one to the next
    /// ([`Compiled::enter`]).
    pub(super) rec: Box<Record>,
    /// Whether the code reads the applet object's fields (`meta.uses`, kept
    /// here to spare invocations of code that does not the look-up).
    pub(super) reads_fields: bool,
    /// The limits [`Compiled::keep`] was last given: each invocation
    /// starts with `limits.fuel`, and the context's depth limit is
    /// `limits.max_depth`.
    pub(super) limits: RunLimits,
    /// Which methods an invocation may enter, by index: the bytecode
    /// methods, and none while the depth limit is above
    /// [`MAX_CALL_DEPTH`] (both made by [`Compiled::keep`]). Generated
    /// code's dispatch indexes its table by the entry unchecked, and each
    /// call level takes native stack: [`Compiled::enter`] checks the entry
    /// here, one load, instead of the program's methods and the limit.
    pub(super) enterable: Box<[bool]>,
    /// The stamp of the last [`Compiled::keep`]: a value drawn from a
    /// process-wide counter by every `keep`, so never 0 and never the
    /// same for two `keep`s of any two applets. A prepared invocation
    /// ([`crate::Prepared`]) holds the word [`Compiled::ready_word`] made
    /// of it and its entry while `enterable` admitted that entry; a word
    /// equal to the current one is the table's look-up done once
    /// ([`Compiled::ready`]). Drawn with its low 16 bits clear, so that
    /// the word is the stamp and the entry or'ed, with no shift per
    /// invocation.
    pub(super) stamp: u64,
    /// `stamp` with [`LENT`]: what a lender's word is compared with
    /// ([`Compiled::ready`]), kept beside it so that the call makes no
    /// `or` of the bit. Written with `stamp` by every `keep`.
    pub(super) stamp_lent: u64,
    /// The lender of `rec.ctx.words_of` ([`WordsFn::lender`]), or
    /// [`NoLender`]'s type where the program has none: fixed when the
    /// code is compiled, as `words_of` is, and kept here so that a typed
    /// lender's check ([`HostKind::lends`], made when a prepared word is
    /// made) is one compare, with no test of the `Option` first. No fast
    /// form is `NoLender` (a private type that is not a [`FastNative`]),
    /// so it matches no host.
    pub(super) lender: core::any::TypeId,
    /// Whether no native of the program has an inline form: its code then
    /// never reads the context's words (only an inline form loads them,
    /// `jit::inline`), so the words a typed host lends are as good as
    /// none, and a lender's handle of any host type runs it the typed way
    /// ([`Compiled::ready_word_for`]) instead of the untyped detour.
    /// Fixed when the code is compiled, as [`Compiled::lender`] is.
    pub(super) reads_no_words: bool,
}

/// [`Found::failed`]'s type: the trap of code that could not run,
/// boxed (see there why), made where it failed (`execute_scoped`, which
/// knows the entry), so that the host keeps nothing of the invocation
/// across the call for it.
pub(super) type Failed = Option<Box<Trap>>;

/// The [`Compiled::lender`] of a program without a lender of words.
pub(super) enum NoLender {}

/// The lender of `words_of` ([`Compiled::lender`]): its fast form's type,
/// or [`NoLender`]'s where there is none.
fn lender_of(words_of: Option<WordsFn>) -> core::any::TypeId {
    words_of.map_or(core::any::TypeId::of::<NoLender>(), |w| w.lender)
}

/// The step between two [`Compiled::stamp`]s: the low 17 bits, where a
/// word holds its entry and [`LENT`], stay clear.
const STAMP_STEP: u64 = 1 << 17;

/// Draws a [`Compiled::stamp`]: never 0, never the same twice (2^47 draws
/// at one per nanosecond take four years), its low 17 bits clear.
fn next_stamp() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(STAMP_STEP);
    NEXT.fetch_add(STAMP_STEP, std::sync::atomic::Ordering::Relaxed)
}

/// A compiled applet whose entry `entry` was found enterable by a
/// [`Compiled::keep`] that has not been superseded ([`Compiled::ready`]):
/// [`Ready::enter`] runs it without the table's look-up.
pub(crate) struct Ready<'a> {
    jit: &'a mut Compiled,
    entry: u16,
}

// SAFETY: the raw pointers of `rec` are dereferenced only by generated
// code and the runtime calls it makes, during `Compiled::enter`, which
// holds `&mut self` (and so the frame stack they point into) and rewrites
// the pointers that change from one invocation to the next (directory,
// heap, program, host: `Runtime::bind`) before it runs the code; the
// natives `keep` writes are the applet's, never changed, and so is the
// buffer of its statics (made at load, a boxed slice never replaced:
// `Applet::statics`), which moving the applet does not move. The one it keeps, `fields`,
// points into the instance object of the applet that owns this `Compiled`
// (`Applet::jit`, private; `keep` and `enter` are called only by that
// applet, with its own heap): a root of that heap, never freed or resized
// while the applet lives, and rewritten by `keep` whenever the applet's
// object or code changes. Between invocations they are plain numbers, so
// moving a `Compiled` to another thread (with its applet), or sharing
// `&Compiled` (which reaches only `listing`), touches nothing through them.
unsafe impl Send for Compiled {}
// SAFETY: as for `Send`: `&Compiled` never reads through `ctx`.
unsafe impl Sync for Compiled {}

impl core::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Compiled")
            .field("key", &format_args!("{:#x}", self.found.key))
            .field("sites", &self.meta.sites.len())
            .finish_non_exhaustive()
    }
}

/// Compiles a program (or shares the code of an identical one already
/// compiled) and publishes it in the shared code cache.
///
/// The calling thread is parked first ([`park`]; a no-op inside an
/// invocation): compiling runs no JIT code, so it is a synchronization
/// point, and the thread holds up no deletion while it builds or waits for
/// another thread's build. Without it a thread whose only use of the cache
/// is compiling held every retired set it was counted in: once the cache
/// was full of such sets, its compiles failed, it never ran JIT code again,
/// and the cache stayed full (jive's random programs, from one class on to
/// the end of the run).
pub fn compile(prog: &Program) -> Result<Compiled, JitError> {
    park();
    if !available() {
        return Err(JitError::NoBackend {
            class: prog.info.name.clone(),
            arch: std::env::consts::ARCH,
        });
    }
    if prog.max_frame > STACK_SLOTS {
        let slots = |f: &crate::decode::Func| usize::from(f.max_locals) + usize::from(f.max_stack);
        let widest = prog.funcs.iter().flatten().max_by_key(|f| slots(f));
        return Err(JitError::FrameTooLarge {
            method: widest.map(|f| f.id.clone()).unwrap_or_default(),
            slots: prog.max_frame,
            limit: STACK_SLOTS,
        });
    }
    let key = fingerprint(prog);
    let share = |reg: &mut HashMap<u64, Shared>| {
        reg.get_mut(&key).map(|s| {
            s.users += 1;
            s.meta.clone()
        })
    };
    // Built without the registry's lock, which every applet's drop takes
    // (a host drops one under its own locks: unet's engine under the
    // endpoint's, which the thread delivering to it waits for), so that a
    // build of up to 0.4 s holds up no other applet's load or drop. Two
    // threads building one key at once publish the first's code; the
    // second's is dropped unpublished.
    let shared = share(&mut registry());
    let meta = match shared {
        Some(meta) => meta,
        None => {
            let (f, mut meta) = build(prog)?;
            let mut reg = registry();
            match share(&mut reg) {
                Some(meta) => meta,
                None => {
                    meta.code_bytes = publish(key, f).map_err(|source| JitError::Cache {
                        class: prog.info.name.clone(),
                        key,
                        source,
                    })?;
                    let meta = Arc::new(meta);
                    reg.insert(
                        key,
                        Shared {
                            users: 1,
                            meta: meta.clone(),
                        },
                    );
                    meta
                }
            }
        }
    };
    let mut frames: Box<[i32; STACK_SLOTS]> = vec![0; STACK_SLOTS]
        .into_boxed_slice()
        .try_into()
        .expect("STACK_SLOTS slots");
    let words_of = words_at_entry(prog);
    let rec = Record::new(&mut frames[..], words_of);
    let lender = lender_of(words_of);
    let reads_no_words = prog.natives.iter().all(|n| n.inline.is_none());
    let stamp = next_stamp();
    Ok(Compiled {
        found: Found {
            key,
            ..Found::default()
        },
        reads_fields: meta.uses.fields,
        meta,
        frames,
        rec,
        // Nothing may be entered before the first `keep`.
        limits: RunLimits {
            fuel: 0,
            max_depth: 0,
        },
        enterable: Box::new([]),
        stamp,
        // Never 0, as `stamp` is not: no word of 0 (the JIT not running)
        // matches either.
        stamp_lent: stamp | LENT,
        lender,
        reads_no_words,
    })
}

/// How an invocation finds the words its inline natives use
/// ([`crate::HostWords`]), if a method other than a constructor calls one:
/// the `words` functions of the first native with an inline form (a
/// table's fast forms share one host type, and a host gives them one
/// `words`). Finding them costs an invocation a compare and a call, which
/// one inline call repays; code that calls its inline natives from
/// constructors only (StandardUnet's `getFreeBufferLength`) leaves them to
/// the first call's rare path.
fn words_at_entry(prog: &Program) -> Option<WordsFn> {
    let inline = |n: u16| {
        prog.natives
            .get(usize::from(n))
            .is_some_and(|d| d.inline.is_some())
    };
    let calls = prog.info.methods.iter().zip(&prog.funcs).any(|(m, f)| {
        m.name != "<init>"
            && m.name != "<clinit>"
            && f.as_ref().is_some_and(|f| {
                f.code.iter().any(
                    |op| matches!(*op, Op::CallNative(n) | Op::CallNativeUnmetered(n) if inline(n)),
                )
            })
    });
    if !calls {
        return None;
    }
    prog.natives
        .iter()
        .find(|n| n.inline.is_some())
        .and_then(|n| n.words)
}

/// Publishes `f` under `key`; the bytes of code published.
pub(super) fn publish(key: u64, mut f: Func) -> Result<usize, codecache::Error> {
    let mut bytes = 0;
    cache().publish(key, 1, |e| {
        f.end_in(e.mem()).inspect(|code| bytes = code.len())
    })?;
    Ok(bytes)
}

impl Drop for Compiled {
    fn drop(&mut self) {
        let mut reg = registry();
        if let Some(s) = reg.get_mut(&self.found.key) {
            s.users -= 1;
            if s.users == 0 {
                reg.remove(&self.found.key);
                cache().retire(self.found.key);
            }
        }
    }
}

/// The generated code's entry: the context and the method's index, which
/// the code's dispatch uses as the index of its jump table as it is (a
/// machine word, so that the code does not widen it first). Called through
/// [`call_entry`] only: on x86-64 that is an `asm!` call of a contract of
/// its own, which names this type only in its documentation.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(super) type Entry = extern "C" fn(*mut Ctx, usize) -> Pair;

/// What an [`Entry`] returns off x86-64, in the convention's two result
/// registers: the status, and the value a normal return (status 0) leaves
/// beside it ([`VALUE_OUT`], `Exit::ret_zero_with`; each is 32 bits,
/// zero-extended). A trap exit leaves the second register as it was: its
/// value means nothing then.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[repr(C)]
pub(super) struct Pair {
    status: u64,
    value: u64,
}

/// An invocation's status (0: it returned; else [`NotReturned`]'s) and,
/// after a normal return, the method's value: what [`call_entry`] gives
/// back, in two registers, so that the value is not stored by the code
/// and read back by the host.
#[derive(Clone, Copy)]
pub(super) struct Returned {
    pub(super) status: i32,
    pub(super) value: i32,
}

impl Returned {
    /// The outcome of code that could not run (its trap in
    /// [`Found::failed`]).
    const NOT_RUN: Returned = Returned {
        status: -1,
        value: 0,
    };
}

/// The callee-saved registers of the host's convention that generated
/// code does not save ([`compiler::entry_config`]): its caller,
/// [`call_entry`], declares them clobbered, so that the host saves what it
/// needs of them once, in its own frame, instead of both the host and the
/// code's entry saving them. Natives and runtime calls still keep them.
#[cfg(target_arch = "x86_64")]
pub(super) const CALLER_KEPT: [u8; 4] = {
    use vcode::host::gpr::{R12, R13, R14, R15};
    [R12, R13, R14, R15]
};
/// No host call of its own off x86-64: the code's entry saves every
/// callee-saved register it uses, as the C convention says.
#[cfg(not(target_arch = "x86_64"))]
pub(super) const CALLER_KEPT: [u8; 0] = [];

/// The register generated code returns the method's value in, beside
/// the status ([`Returned`], `Exit::ret_zero_with`): on x86-64 `r14`, one
/// of [`CALLER_KEPT`], which [`call_entry`] names as an output, so that
/// the host finds the value in a register the calls after it keep (from
/// `rdx`, the convention's second result register, the host moved it
/// there: an instruction per invocation).
#[cfg(target_arch = "x86_64")]
pub(super) const VALUE_OUT: u8 = vcode::host::gpr::R14;
/// The convention's second result register off x86-64 ([`Pair`]), as
/// the code's backend numbers it: the backend's own definition
/// (`vcode::ext::second_result`'s), so that the two cannot drift. The
/// compiler emits x86-64 code on every host (`vcode::Func`'s default
/// backend), so it is x86-64's `rdx`.
#[cfg(not(target_arch = "x86_64"))]
pub(super) const VALUE_OUT: u8 = vcode::ext::SECOND_RESULT_X86;

/// The register the host passes the context in, where it is not the
/// convention's first argument: on x86-64 `r13`, one of [`CALLER_KEPT`],
/// which the compiler takes as the code's context register
/// ([`compiler::Compiler::new`]), so that the entry moves nothing into it.
#[cfg(target_arch = "x86_64")]
pub(super) const CTX_IN: Option<u8> = Some(vcode::host::gpr::R13);
/// The convention's first argument off x86-64.
#[cfg(not(target_arch = "x86_64"))]
pub(super) const CTX_IN: Option<u8> = None;

/// Calls generated code at `addr` (an [`Entry`]) on `ctx` and `entry`: the
/// status and value it returns ([`Pair`]). The one way into generated
/// code.
///
/// On x86-64 this is the C convention's call but for [`CALLER_KEPT`]
/// (`r12` to `r15`), which the `asm!` block declares clobbered, and the
/// context, passed in [`CTX_IN`] (`r13`) instead of `rdi`: the entry
/// does not save them, and the compiler around the call keeps across it
/// only what it needs, in `rbx`, `rbp` or its frame (`rbx`, which an
/// `asm!` block cannot name, the entry still saves and restores).
///
/// # Safety
/// `addr` is the entry of code that `jit::build` generated with
/// [`compiler::entry_config`] and that stays alive for the call; `ctx` is
/// a context that code may use as `execute`'s callers arrange (the
/// argument of `Entry`).
#[inline(always)]
unsafe fn call_entry(addr: usize, ctx: *mut Ctx, entry: u16) -> Returned {
    #[cfg(target_arch = "x86_64")]
    {
        let (status, value): (i32, i32);
        // SAFETY: the caller's contract makes `addr` generated code of
        // signature `Entry` but for the context's register; the block
        // calls it as the C convention says (the context in `r13`, which
        // such code's entry reads it from (`CTX_IN`), the index in `rsi`,
        // the stack aligned to 16 bytes on
        // an `asm!` block's entry, so at the call, and the direction flag
        // clear), and declares clobbered everything the code may change:
        // the convention's caller-saved registers (`clobber_abi`), `r12`
        // to `r15` (which the code's entry, made with `entry_config`, does
        // not restore) and memory (no `nomem`). It restores `rbx`, `rbp`
        // and `rsp` (its prologue and epilogue) and does not unwind (the
        // natives it calls are `extern "C"`, which abort on a panic).
        unsafe {
            core::arch::asm!(
                "call {code}",
                code = in(reg) addr,
                in("rsi") usize::from(entry),
                lateout("eax") status,
                // `CALLER_KEPT`, which the entry does not restore; the
                // context goes in `r13` (`CTX_IN`), the value comes back
                // in `r14` (`VALUE_OUT`).
                out("r12") _,
                inout("r13") ctx => _,
                lateout("r14") value,
                out("r15") _,
                clobber_abi("C"),
            );
        }
        Returned { status, value }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: the caller's contract: `addr` is generated code of
        // signature `Entry`, made with the C convention's saves.
        let run: Entry = unsafe { core::mem::transmute::<usize, Entry>(addr) };
        let p = run(ctx, usize::from(entry));
        Returned {
            status: p.status as i32,
            value: p.value as i32,
        }
    }
}

impl Compiled {
    /// The code this applet runs: its key in the cache, which applets of
    /// the same class share, and its size.
    pub fn code(&self) -> crate::CodeShare {
        crate::CodeShare {
            key: self.found.key,
            bytes: self.meta.code_bytes,
        }
    }

    /// The machine code with each method's name and each bytecode's index
    /// beside its instructions.
    pub fn listing(&self) -> Option<String> {
        let mut t = cache().register();
        let scope = t.enter();
        let e = scope.lookup(self.found.key)?;
        let marks: Vec<(usize, String)> = self
            .meta
            .marks
            .iter()
            .map(|&(at, m)| {
                (
                    at,
                    match m {
                        Mark::Method(k) => self
                            .meta
                            .methods
                            .get(usize::from(k))
                            .cloned()
                            .unwrap_or_default(),
                        Mark::Bci(b) => format!("bci {b}"),
                        Mark::Traps => "trap exits".into(),
                    },
                )
            })
            .collect();
        Some(e.code().disassemble_marked(&marks))
    }

    /// Runs method `entry` with `args`, as [`crate::interpreter::Machine::run`]
    /// does: the same result, trap, fuel and effects.
    pub(crate) fn run(
        &mut self,
        prog: &Program,
        st: &mut State<'_>,
        fields: *mut i32,
        entry: u16,
        args: &[i32],
        limits: RunLimits,
    ) -> Result<Outcome, Trap> {
        let Some(Some(f)) = prog.funcs.get(usize::from(entry)) else {
            return Err(internal_trap(
                "entry is not a bytecode method",
                String::new(),
            ));
        };
        if args.len() != usize::from(f.arg_slots) || args.len() > usize::from(f.max_locals) {
            return Err(internal_trap("argument count", f.id.clone()));
        }
        if limits.max_depth > MAX_CALL_DEPTH {
            return Err(internal_trap(
                "call depth above the JIT's limit",
                f.id.clone(),
            ));
        }
        self.frames[..args.len()].copy_from_slice(args);
        let returns = prog.info.methods[usize::from(entry)].sig.ret.is_some();
        self.keep(prog, st.natives, st.statics.as_mut_ptr(), fields, limits);
        match self.enter(prog, st, entry) {
            Ok(v) => Ok(Outcome {
                value: returns.then_some(v),
                fuel_used: self.fuel_used(prog),
            }),
            Err(t) => Err(*t),
        }
    }

    /// The frame stack's first slots, where [`Compiled::enter`] finds the
    /// entry method's arguments (`this` first for an instance method).
    #[inline]
    pub(crate) fn args_mut(&mut self) -> &mut [i32; ARG_SLOTS] {
        const { assert!(ARG_SLOTS <= STACK_SLOTS) };
        let (args, _) = self
            .frames
            .split_first_chunk_mut::<ARG_SLOTS>()
            .expect("checked above");
        args
    }

    /// Writes the context's words that stay from one invocation to the
    /// next: the applet object's `fields` (a pointer into the applet's
    /// instance, which lives and stays in place as long as the applet: a
    /// root of its heap, never resized), its `statics` (the buffer of the
    /// applet's static fields, made at load as a boxed slice and never
    /// replaced, so that it stays where it is while the applet lives,
    /// wherever the applet moves) and the call-depth limit, and
    /// keeps `limits`, whose fuel every invocation starts with. The
    /// applet calls it whenever one of them changes (its object made, its
    /// limits set, its code compiled) and before every invocation through
    /// [`Compiled::run`]; [`Compiled::enter`] writes none of them.
    ///
    /// Also makes the table of the methods an invocation may enter: the
    /// bytecode methods, or none if `limits.max_depth` is above
    /// [`MAX_CALL_DEPTH`] (the two preconditions generated code relies on
    /// for memory safety, checked here once for every later invocation).
    pub(crate) fn keep(
        &mut self,
        prog: &Program,
        natives: &[NativeFn],
        statics: *mut i32,
        fields: *mut i32,
        limits: RunLimits,
    ) {
        let rec = &mut *self.rec;
        rec.ctx.statics = statics;
        rec.ctx.fields = fields;
        rec.ctx.max_depth = i64::from(limits.max_depth);
        rec.ctx.fuel_start = limits.fuel;
        rec.rt.natives = natives;
        rec.rt.decls = &prog.natives[..];
        self.limits = limits;
        let depth_ok = limits.max_depth <= MAX_CALL_DEPTH;
        if self.enterable.len() != prog.funcs.len() {
            self.enterable = vec![false; prog.funcs.len()].into_boxed_slice();
        }
        for (e, f) in self.enterable.iter_mut().zip(&prog.funcs) {
            *e = depth_ok && f.is_some();
        }
        // Every word made before this `keep` stops matching, whatever
        // changed (or did not).
        self.stamp = next_stamp();
        self.stamp_lent = self.stamp | LENT;
    }

    /// The word a prepared invocation of `entry` holds: the current
    /// [`Compiled::stamp`] with the entry, if `enterable` admits `entry`
    /// now; 0 (which no stamp matches) if not.
    pub(crate) fn ready_word(&self, entry: u16) -> u64 {
        if self.enterable.get(usize::from(entry)) == Some(&true) {
            self.stamp | u64::from(entry)
        } else {
            0
        }
    }

    /// [`Compiled::ready_word`] for a prepared invocation of kind `K`:
    /// with [`LENT`] where `K` is a lender of words and the program finds
    /// its words through that one ([`Compiled::lender`], fixed when the
    /// code was compiled, so for as long as the stamp is current), or
    /// reads none ([`Compiled::reads_no_words`]: a program without inline
    /// natives, whose code the lent words never reach; without this, its
    /// every typed invocation took the cold untyped detour, some 40
    /// instructions, `unet-count dorx-null`).
    pub(crate) fn ready_word_for<K: HostKind>(&self, entry: u16) -> u64 {
        let word = self.ready_word(entry);
        if word != 0 && (K::lends(self.lender) || (K::LENT != 0 && self.reads_no_words)) {
            word | LENT
        } else {
            word
        }
    }

    /// This code, ready to enter `entry` without the look-up of the
    /// enterable table, if `word` is the one [`Compiled::ready_word`]
    /// gives for `entry` now: it was made by the same `keep` as the
    /// current table (stamps are never reused, so no other `keep`, of this
    /// applet or another, made it) and only while that table admitted
    /// `entry`. `None` otherwise (the caller takes the checked way).
    ///
    /// `lent`: [`LENT`] to find only a word that has it, which says the
    /// program's lender is the one the word was made for
    /// ([`Compiled::ready_word_for`]: the check of the lender, made once
    /// per `keep`); 0 for a word without it.
    #[inline(always)]
    pub(crate) fn ready(&mut self, entry: u16, word: u64, lent: u64) -> Option<Ready<'_>> {
        let stamp = if lent != 0 {
            debug_assert_eq!(self.stamp_lent, self.stamp | lent);
            self.stamp_lent
        } else {
            self.stamp
        };
        if word != stamp | u64::from(entry) {
            return None;
        }
        Some(Ready { jit: self, entry })
    }

    /// The fuel the last invocation ([`Compiled::enter`]) used, as the
    /// interpreter counts it: 0 for unmetered code.
    #[inline]
    pub(crate) fn fuel_used(&self, prog: &Program) -> u64 {
        if prog.metered() {
            self.limits.fuel - self.rec.ctx.fuel
        } else {
            0
        }
    }

    /// Runs method `entry` on the arguments already in the frame stack
    /// ([`Compiled::args_mut`]): [`Compiled::run`] without its argument
    /// checks, for a caller that made them once ([`crate::Method`]: the
    /// arguments are `entry`'s). What memory safety rests on is checked
    /// again here: `entry` is a bytecode method and `limits.max_depth` at
    /// most [`MAX_CALL_DEPTH`] ([`compile`] checked every method's frame
    /// against the frame stack).
    ///
    /// Returns the value the method returned, or its trap. For a `void`
    /// method the value is whatever the code left in the result register
    /// (no store of 0 is spent on it): the caller knows the method's
    /// return type and ignores it ([`crate::Called`]'s kind). Both fit two
    /// registers, so that the common outcome travels back to
    /// the host without a `Result` written to memory; the fuel left stays
    /// in the context ([`Compiled::fuel_used`]).
    #[inline]
    pub(crate) fn enter(
        &mut self,
        prog: &Program,
        st: &mut State<'_>,
        entry: u16,
    ) -> Result<i32, Box<Trap>> {
        debug_assert!(prog.max_frame <= STACK_SLOTS);
        // The two preconditions generated code relies on for memory safety
        // (its dispatch indexes a table by `entry` unchecked, and each call
        // level takes native stack) are checked here too, whatever the
        // caller checked: one look-up in the table `keep` made of them.
        if self.enterable.get(usize::from(entry)) != Some(&true) {
            return Err(Box::new(internal_trap(
                "entry or call depth out of the JIT's range",
                String::new(),
            )));
        }
        match self.enter_admitted(prog, st, entry, None, None) {
            Ok(v) => Ok(v),
            Err(status) => Err(self.trap_of(prog, status)),
        }
    }

    /// [`Compiled::enter`] after its check: `enterable` admits `entry`
    /// (checked by `enter`, or by the word of [`Compiled::ready`]).
    ///
    /// `held`: the registration the host holds ([`Runner`]), or `None`
    /// for this thread's own ([`execute_on_thread`]).
    ///
    /// Returns the value, or the status of an invocation that did not
    /// return normally, for [`Compiled::trap_of`]: the trap is made by
    /// the caller, from the program it holds anyway, so that the program's
    /// address is not kept across the code's call for the rare path (it
    /// was spilled: a store and a computation per call).
    #[inline(always)]
    fn enter_admitted(
        &mut self,
        prog: &Program,
        st: &mut State<'_>,
        entry: u16,
        held: Option<&mut Runner>,
        lent: Option<*mut HostWords>,
    ) -> Result<i32, NotReturned> {
        debug_assert_eq!(self.enterable.get(usize::from(entry)), Some(&true));
        let rec = &mut *self.rec;
        // The words the host lends the inline natives for this invocation
        // (`NO_WORDS` if it lends none): the one word written here for them
        // (`Ctx::words`). `lent`: already taken from a typed host by the
        // program's own lender (`HostArg::lent_words`), from the borrow of
        // the host this invocation holds.
        let words = match lent {
            Some(w) => w,
            None => host_words(&mut rec.ctx, st.host.as_deref_mut()),
        };
        // The frame stack's bounds were written when the record was made
        // (`Record::new`); the statics (whose buffer never moves), the
        // fields, the depth limit, the fuel an invocation starts with
        // (`Ctx::fuel_start`, which the code loads at its entry) and the
        // natives by `keep`. The words that differ from one invocation to
        // the next are written here: the borrows of this one
        // (`Runtime::bind`), and of the context the heap's directory (which
        // moves when the heap grows or is collected, between invocations
        // too) and the host's words. `trap` and the fuel left are written by
        // the code before the host reads them (the method's value comes
        // back in a register, `VALUE_OUT`).
        debug_assert_eq!(rec.ctx.statics, st.statics.as_mut_ptr());
        rec.ctx.dir = st.heap.directory().cast();
        rec.ctx.words = words;
        debug_assert_eq!(rec.ctx.fuel_start, self.limits.fuel);
        rec.rt.bind(st.heap, st.host.as_deref_mut());
        // The context generated code is entered with: the record's
        // address, with the provenance of all of it, so that runtime calls
        // reach its Rust side through it (`runtime::record`).
        let ctx: *mut Ctx = (rec as *mut Record).cast();
        let ret = match held {
            // Borrowed for the invocation: a native that invokes another
            // applet cannot reach it, and takes this thread's own.
            Some(runner) => execute(
                &mut runner.thread,
                Code {
                    found: &mut self.found,
                },
                prog,
                ctx,
                entry,
            ),
            None => execute_on_thread(&mut self.found, prog, ctx, entry),
        };
        if ret.status == 0 {
            // A runtime call that records a trap makes the code take a
            // trap exit, so after a normal return nothing is pending.
            debug_assert!(self.rec.rt.pending.is_none());
            return Ok(ret.value);
        }
        Err(NotReturned(ret.status))
    }

    /// The trap of an invocation that returned `status`
    /// ([`Compiled::enter_admitted`]): the code could not run (its trap
    /// kept in [`Found::failed`]), or a trap site was taken (a runtime
    /// call's pending trap with it).
    #[cold]
    #[inline(never)]
    pub(crate) fn trap_of(&mut self, prog: &Program, status: NotReturned) -> Box<Trap> {
        let pending = self.rec.rt.pending.take();
        let failed = self.found.failed.take();
        self.failure(prog, status.0, failed, pending)
    }

    /// The trap of an invocation that did not return normally: the code
    /// could not run (`failed`: its trap), or trap site `status` was taken.
    #[cold]
    #[inline(never)]
    fn failure(
        &self,
        prog: &Program,
        status: i32,
        failed: Failed,
        pending: Option<TrapKind>,
    ) -> Box<Trap> {
        match failed {
            Some(trap) => trap,
            None => Box::new(self.trap(prog, status, self.rec.ctx.trap, pending, self.limits)),
        }
    }

    /// The trap that trap site `status` (counted from 1) reports, with the
    /// values generated code stored (`trap`) and a runtime call's `pending`
    /// trap.
    #[cold]
    #[inline(never)]
    pub(super) fn trap(
        &self,
        prog: &Program,
        status: i32,
        trap: [i64; 3],
        pending: Option<TrapKind>,
        limits: RunLimits,
    ) -> Trap {
        let Some(site) = self.meta.sites.get(status as usize - 1) else {
            return internal_trap("trap site", String::new());
        };
        let [a, b, c] = trap;
        let kind = match site.kind {
            SiteKind::Array if a == 0 => TrapKind::NullPointer,
            SiteKind::Array => TrapKind::ArrayIndexOutOfBounds {
                index: b as i32,
                length: c as i32,
            },
            SiteKind::Null => TrapKind::NullPointer,
            SiteKind::DivZero => TrapKind::DivisionByZero,
            SiteKind::NegSize => TrapKind::NegativeArraySize(a as i32),
            SiteKind::Fuel => TrapKind::FuelExhausted(limits.fuel),
            SiteKind::Depth => TrapKind::CallDepthExceeded(limits.max_depth),
            SiteKind::Runtime => pending.unwrap_or_else(|| {
                TrapKind::Native("internal error: a runtime call failed silently".into())
            }),
        };
        let method = prog
            .funcs
            .get(usize::from(site.method))
            .and_then(Option::as_ref)
            .map(|f| f.id.clone())
            .unwrap_or_default();
        Trap {
            kind,
            method,
            bci: site.bci,
        }
    }
}

impl Ready<'_> {
    /// The frame stack's argument slots ([`Compiled::args_mut`]).
    #[inline(always)]
    pub(crate) fn args_mut(&mut self) -> &mut [i32; ARG_SLOTS] {
        self.jit.args_mut()
    }

    /// Runs the entry on the arguments in the frame stack, as
    /// [`Compiled::enter`] does, without its look-up: [`Compiled::ready`]
    /// found the word of a `keep` whose table admits the entry, and
    /// nothing has called `keep` since (it takes `&mut Compiled`, which
    /// `self` holds). `held`: the registration the host holds
    /// ([`Runner`]), or `None` for this thread's own.
    ///
    /// An invocation that did not return normally gives back its status,
    /// whose trap [`Compiled::trap_of`] makes (the caller's rare path,
    /// from the applet it holds: nothing is kept across the code's call
    /// for it).
    #[inline(always)]
    pub(crate) fn enter(
        self,
        prog: &Program,
        st: &mut State<'_>,
        held: Option<&mut Runner>,
        lent: Option<*mut HostWords>,
    ) -> Result<i32, NotReturned> {
        self.jit.enter_admitted(prog, st, self.entry, held, lent)
    }

    /// The program's lender of words (`Ctx::words_of`'s, or
    /// [`NoLender`]'s type: [`Compiled::lender`]), for debug assertions:
    /// a call finds it in the prepared word ([`LENT`]).
    #[inline(always)]
    pub(crate) fn lender(&self) -> core::any::TypeId {
        debug_assert_eq!(self.jit.lender, lender_of(self.jit.rec.ctx.words_of));
        self.jit.lender
    }

    /// [`Compiled::reads_no_words`], for debug assertions as
    /// [`Ready::lender`].
    #[inline(always)]
    pub(crate) fn reads_no_words(&self) -> bool {
        self.jit.reads_no_words
    }
}

/// The trap of an invocation whose code could not run (`what`: why).
#[cold]
#[inline(never)]
fn not_run(prog: &Program, entry: u16, what: String) -> Trap {
    Trap {
        kind: TrapKind::Native(what),
        method: prog
            .funcs
            .get(usize::from(entry))
            .and_then(Option::as_ref)
            .map(|f| f.id.clone())
            .unwrap_or_default(),
        bci: 0,
    }
}

/// The interpreter's internal errors, for the same misuses.
#[cold]
pub(super) fn internal_trap(what: &str, method: String) -> Trap {
    Trap {
        kind: crate::interpreter::internal(what),
        method,
        bci: 0,
    }
}

/// The most argument slots an entry method has: [`crate::Method::MAX_ARGS`]
/// and `this`.
pub(crate) const ARG_SLOTS: usize = crate::Method::MAX_ARGS + 1;

/// A thread's registration in the shared code cache ([`THREAD`]), with
/// the flag that says an invocation on this thread uses it now. The flag
/// is first, so that [`busy`] reads it at the address itself, as it reads
/// a marker's.
///
/// On a pair of cache lines of its own (128 bytes, aligned: the line and
/// the one Intel's adjacent-line prefetcher fetches with it). Every
/// invocation on the thread reads and writes it, and the allocator would
/// otherwise put it beside whatever was allocated next to it: in
/// `examples/loop_lines`' lent ping-pong at 0 bytes, one thread's
/// registration shared a line with the other thread's applet record
/// ([`super::runtime::Record`]), which that thread writes at each of its
/// invocations, and the line crossed the cores twice a round trip, as
/// often as the messages' own (docs/benchmarks.md, "A thread's
/// registration beside another thread's applet record").
#[repr(C, align(128))]
struct Registration {
    /// Set by [`flagged`] while an invocation runs on `thread`: a
    /// nested invocation (a native of an applet invoking another applet)
    /// and [`park`] leave `thread` alone while it is set.
    busy: bool,
    thread: codecache::Thread,
}

/// What [`THREAD`] holds where it holds no registration: a byte that
/// reads as a busy [`Registration`]'s flag (`true`), so that the common
/// invocation's one test of the flag sends both markers to the rare path.
/// Read-only: nothing writes a marker.
#[repr(C)]
struct Marker {
    busy: bool,
    /// Unlike in the two markers, so that no merging of equal constants
    /// could give them one address (statics have their own anyway).
    /// Never read: the addresses tell the markers apart.
    #[allow(dead_code)]
    which: u8,
}

/// [`THREAD`]'s marker before the thread's registration is made.
static UNMADE: Marker = Marker {
    busy: true,
    which: 0,
};
/// [`THREAD`]'s marker once the thread's registration is freed.
static GONE: Marker = Marker {
    busy: true,
    which: 1,
};

/// A marker's address as [`THREAD`] holds it (only its first byte, the
/// flag, is ever read through it).
const fn marker(m: &'static Marker) -> *mut Registration {
    core::ptr::from_ref(m).cast_mut().cast()
}

thread_local! {
    /// This thread's registration in the shared code cache, made at its
    /// first invocation on the JIT ([`with_thread`]): a `Box` leaked here,
    /// freed (unregistered) by [`OWNER`] when the thread exits. Before
    /// that the cell holds [`UNMADE`]'s address, after it [`GONE`]'s. A
    /// `Cell` of a pointer has no destructor, so reaching it is one
    /// thread-pointer-relative load, and the registration's own flag
    /// ([`Registration::busy`], set and cleared through the address
    /// already in a register) is all the exclusion an invocation needs:
    /// no `RefCell` borrow flag, no lazy state check of a thread-local
    /// with a destructor, and the cell is not written per invocation.
    static THREAD: core::cell::Cell<*mut Registration> =
        const { core::cell::Cell::new(marker(&UNMADE)) };
    /// Frees this thread's registration when the thread exits.
    static OWNER: Owner = const { Owner };
}

/// Whether `p`, read from [`THREAD`], may not be used now: a marker, or a
/// registration an invocation on this thread uses.
///
/// # Safety
/// `p` was read from [`THREAD`].
#[inline(always)]
unsafe fn busy(p: *mut Registration) -> bool {
    // SAFETY: the cell holds a marker's address (a static, never freed,
    // whose first byte is its `busy`) or a registration's (from
    // `Box::into_raw` in `register_here`, freed only by `Owner` after the
    // cell holds `GONE`'s), whose first byte is its `busy` (`repr(C)`).
    // Read through the raw pointer alone: an invocation's `&mut` borrows
    // only the registration's `thread`, never its flag.
    unsafe { p.cast::<bool>().read() }
}

/// Whether `p`, read from [`THREAD`], is a registration (not a marker).
fn is_registration(p: *mut Registration) -> bool {
    !core::ptr::eq(p, marker(&UNMADE)) && !core::ptr::eq(p, marker(&GONE))
}

/// The owner of the registration [`THREAD`] points to, dropped at thread
/// exit.
struct Owner;

impl Drop for Owner {
    fn drop(&mut self) {
        let p = THREAD.replace(marker(&GONE));
        // SAFETY: read from the cell (`busy`'s contract).
        if is_registration(p) && !unsafe { busy(p) } {
            // SAFETY: `p` came from `Box::into_raw` in `register_here` and
            // was in the cell, so it is not freed yet; no invocation uses
            // it (its flag is clear, and an invocation clears it only when
            // it is done with it: `flagged`, even when unwinding, by
            // `Release`); the cell now holds `GONE`'s address, so nothing
            // takes it again.
            drop(unsafe { Box::from_raw(p) });
        }
        // A busy registration cannot be seen here (a thread's destructors
        // do not run inside one of its invocations); were it, it would be
        // leaked rather than freed under its user.
    }
}

/// Clears the flag [`flagged`] set on the registration, on return or
/// while unwinding.
struct Release(*mut Registration);

impl Drop for Release {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: `self.0` is a registration [`flagged`] flagged busy,
        // alive while this thread lives (`Owner`); the flag is written
        // through the raw pointer, beside the invocation's borrow of
        // `thread`, which has ended.
        unsafe { core::ptr::addr_of_mut!((*self.0).busy).write(false) };
    }
}

/// Runs `run` on this thread's registration, made at the thread's first
/// invocation; on `None` where it is in use (a native of an applet invokes
/// another applet) or gone (the thread is exiting).
#[inline(always)]
fn with_thread(run: impl FnOnce(Option<&mut codecache::Thread>) -> Returned) -> Returned {
    let mut p = THREAD.get();
    // SAFETY: read from the cell.
    if unsafe { busy(p) } {
        match first_registration(p) {
            Some(made) => p = made,
            None => return run(None),
        }
    }
    // SAFETY: `p` is a registration (markers are busy), alive while this
    // thread lives (`Owner`), and not busy: no invocation on this thread
    // uses it, and no other thread reaches it (the cell is this thread's).
    unsafe { flagged(p, |thread| run(Some(thread))) }
}

/// Runs `run` on registration `p`'s `thread` with `p`'s flag set: set
/// before, cleared after, and cleared while unwinding too ([`Release`]).
/// The busy-flag protocol in one place, for [`with_thread`] and
/// [`execute_on_thread`] (which calls it only around `call_entry`, which
/// does not unwind, so that no unwinding path is made there); [`park`]
/// and [`Owner`] read the flag ([`busy`]) and leave a flagged
/// registration alone.
///
/// # Safety
/// `p` was read from [`THREAD`], is a registration (not a marker), and is
/// not busy ([`busy`] said so, and nothing ran on this thread since), and
/// no reference to its `thread` is live.
#[inline(always)]
unsafe fn flagged<R>(p: *mut Registration, run: impl FnOnce(&mut codecache::Thread) -> R) -> R {
    // SAFETY: the contract: `p` is a registration, alive while this thread
    // lives (`Owner`), that no invocation on this thread uses and no other
    // thread reaches (the cell is this thread's). The flag is set through
    // the raw pointer before the borrow below, and cleared by `back` after
    // it ends.
    unsafe { core::ptr::addr_of_mut!((*p).busy).write(true) };
    let back = Release(p);
    // SAFETY: as above: the flag is set until `back` clears it, so this is
    // the one reference to the registration's `thread` (a nested
    // invocation or `park` on this thread sees the flag and leaves it
    // alone), and it lives while `back` does.
    let r = run(unsafe { &mut (*back.0).thread });
    drop(back);
    r
}

/// A registration for a thread whose [`THREAD`] held `p`, which is busy:
/// made here (and put in the cell) if the thread has none yet; `None` if
/// its registration is in use or the thread is exiting.
#[cold]
#[inline(never)]
fn first_registration(p: *mut Registration) -> Option<*mut Registration> {
    if core::ptr::eq(p, marker(&UNMADE)) {
        register_here()
    } else {
        None
    }
}

/// Makes this thread's registration, puts it in [`THREAD`] and arranges
/// for it to be freed at exit: its address, or `None` if the thread is
/// already exiting.
#[cold]
#[inline(never)]
fn register_here() -> Option<*mut Registration> {
    OWNER.try_with(|_| ()).ok()?;
    let p = Box::into_raw(Box::new(Registration {
        busy: false,
        thread: cache().register(),
    }));
    THREAD.set(p);
    Some(p)
}

/// Flags the calling thread out of the shared code cache until it next runs
/// JIT code (the paper's system-call flag). A host thread that is about to
/// block, or to stop running applets for a while, calls it so that code
/// retired meanwhile is freed without waiting for the thread's next
/// invocation. (A thread that exits leaves by itself.)
pub fn park() {
    let p = THREAD.get();
    // SAFETY: read from the cell.
    if !unsafe { busy(p) } {
        // SAFETY: as in `with_thread`: a registration no invocation on
        // this thread uses; `flag_out` runs no invocation, so nothing
        // reaches it meanwhile.
        unsafe { (*p).thread.flag_out() };
    }
}

/// A registration in the shared code cache that a host holds and passes
/// to every invocation it makes ([`crate::Applet::run_prepared_on`]),
/// instead of each invocation taking the thread's registration out of a
/// thread-local and putting it back (a host that invokes on every message
/// keeps it, e.g. in the loop of an engine thread).
///
/// It is a registration of its own ([`codecache::CodeCache::register`]),
/// with the same protocol as the thread's: each invocation on it is a
/// synchronization point only where something was retired since the last
/// (the pin's check, [`codecache::Thread::pinned`]), so code retired
/// meanwhile waits for the runner's next invocation, for [`Runner::park`]
/// (which a host calls before it sleeps or blocks, as it calls [`park`]
/// for the thread's), or for the runner to be dropped. An invocation
/// borrows it mutably for its whole run, so that a native of the applet
/// that invokes another applet cannot use it (that invocation takes the
/// thread's own registration, as it would without a runner). It may move
/// to another thread between invocations (it is `Send`, not `Sync`): the
/// move synchronizes, and only its holder uses it.
pub struct Runner {
    thread: codecache::Thread,
}

impl Runner {
    /// A new registration in the shared code cache, flagged in.
    pub fn new() -> Runner {
        Runner {
            thread: cache().register(),
        }
    }

    /// Flags the runner out of the shared code cache until its next
    /// invocation: code retired meanwhile is freed without waiting for
    /// it ([`park`] for a held registration).
    pub fn park(&mut self) {
        self.thread.flag_out();
    }
}

/// The registration an invocation runs on, as a type, so that a caller's
/// choice is made at compile time ([`crate::Applet::run_prepared_on`]):
/// `()` for the thread's own (`execute_on_thread`, and [`with_thread`] on
/// its cold way), `&mut Runner` for one the host holds.
pub(crate) trait Held {
    /// The runner, or `None` for the thread's registration.
    fn runner(&mut self) -> Option<&mut Runner>;
}

impl Held for () {
    #[inline(always)]
    fn runner(&mut self) -> Option<&mut Runner> {
        None
    }
}

impl Held for &mut Runner {
    #[inline(always)]
    fn runner(&mut self) -> Option<&mut Runner> {
        Some(&mut **self)
    }
}

impl Default for Runner {
    fn default() -> Runner {
        Runner::new()
    }
}

impl core::fmt::Debug for Runner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Runner").finish_non_exhaustive()
    }
}

/// Which code an invocation runs: its key in the cache and its last
/// look-up there ([`Found`]). Passed by value, in one register, so that
/// the common invocation does not store it on its frame for the rare
/// path, and computes nothing for it before its branch (the key, read
/// from [`Compiled`] beside the look-up, was one load per call).
pub(super) struct Code<'a> {
    found: &'a mut Found,
}

/// An applet's code in the cache: its key, made when it was compiled and
/// never changed, and its last look-up there
/// ([`codecache::Scope::lookup_pin`]): the memo a scope's look-up reuses,
/// the pin [`execute`] checks without a scope, and the trap of code that
/// could not run. One struct, so that [`Code`] is one register.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// The code's key in the cache (`fingerprint` of its program).
    pub(super) key: u64,
    memo: codecache::Memo,
    pin: codecache::Pin,
    /// The trap of the last invocation whose code could not run, set only
    /// then (by [`execute_scoped`], through the [`Code`] the call passes
    /// anyway, so that the common invocation computes no address of its
    /// own for it) and taken at once by [`Compiled::enter`].
    ///
    /// An `Option` of a box, whose one niche (the null pointer) is its
    /// own `None`: it offers `Option<Compiled>` (`Applet::jit`) none, so
    /// that one keeps its `None` in `reads_fields`, which the per-message
    /// invocation tests in two instructions. (An unboxed `Trap` would
    /// offer its string's capacity, a compare with a 64-bit constant:
    /// four.)
    pub(super) failed: Failed,
}

/// The status of an invocation that did not return normally (not 0): a
/// trap site's number, or -1 for code that could not run.
pub(crate) struct NotReturned(i32);

/// Runs `code` inside a brief scope of `thread` (entering it is the one
/// synchronization point: see `codecache::Thread::enter_brief`): the
/// status and value the code returns ([`Returned`]), or status -1 with
/// the trap of why it could not run in `code`'s [`Found::failed`].
#[inline]
pub(super) fn execute(
    thread: &mut codecache::Thread,
    code: Code<'_>,
    prog: &Program,
    ctx: *mut Ctx,
    entry: u16,
) -> Returned {
    // Nothing retired since the last invocation's look-up, and this thread
    // synchronized since: its scope's entry would find nothing to do and
    // the look-up would reuse the memo, so both are skipped.
    if let Some(pinned) = thread.pinned(&code.found.pin) {
        // SAFETY: as below: the pin was made of this key's code
        // (`execute_scoped`, the only writer of `Found::pin`, fills it
        // from the look-up of `code.key`), which stays alive while
        // `thread` is borrowed (`Thread::pinned`), and that outlasts the
        // call.
        return unsafe { call_entry(pinned.addr(), ctx, entry) };
    }
    execute_scoped(thread, code, prog, ctx, entry)
}

/// [`execute`] when the pinned code cannot be reused (something was
/// retired since the memo was filled, or this is the first invocation on
/// this thread): inside a brief scope. Out of line, so that the common
/// invocation keeps none of the scope's state in its frame.
#[cold]
#[inline(never)]
fn execute_scoped(
    thread: &mut codecache::Thread,
    code: Code<'_>,
    prog: &Program,
    ctx: *mut Ctx,
    entry: u16,
) -> Returned {
    let scope = thread.enter_brief();
    let code = match scope.lookup_pin(code.found.key, &mut code.found.memo, &mut code.found.pin) {
        Some(e) => e,
        None => match rebuild(&scope, code.found.key, prog) {
            Ok(e) => e,
            // SAFETY: `ctx` is the record of this invocation, bound to it
            // by the caller (`Compiled::enter_admitted`), which makes no
            // other reference to it, its heap, statics or host until this
            // returns: as for a runtime call of generated code.
            Err(Unbuilt::Deferred) => return unsafe { interpret_evicted(code, prog, ctx, entry) },
            Err(Unbuilt::Failed(what)) => {
                code.found.failed = Some(Box::new(not_run(prog, entry, what)));
                return Returned::NOT_RUN;
            }
        },
    };
    // SAFETY: the code was generated by `build` for this program with the
    // signature `Entry` and `entry_config` (as `call_entry` requires: the
    // one `Compiler::new` gives `lambda`), and runs inside the
    // scope that keeps it alive. It reads and writes only what `ctx`
    // points to: the frame stack (exclusively borrowed by the caller), the
    // statics and fields (borrowed from the applet), and heap elements
    // through the directory, whose entries it bounds-checks; see "Safety"
    // in docs/jive.md. Among them the lent bytes, through `LENT`'s entry
    // (`baload`, `arraylength`, an inline native's read), by the lend's
    // invariant (`Heap::lend`): while the lend lasts the entry holds
    // bytes its caller keeps readable for the entry's length (the `Lend`
    // guard ends it, and borrows the applet, so no invocation runs after);
    // after it the entry is an empty array, so every access is out of
    // bounds and the handle reaches no byte. The code never writes them
    // where the method's lent parameters were proved reads
    // (`Applet::prepare_lending`; `prepare_lending_unverified`'s caller
    // promises it).
    unsafe { call_entry(code.code().addr(), ctx, entry) }
}

/// [`execute`] on this thread's registration ([`THREAD`]), the common
/// invocation's way written out: the cell read once, the flag tested,
/// the pin checked, the flag set around the code's call. Everything else
/// (the registration made at the thread's first invocation, in use by an
/// outer invocation, gone; the pin not current) takes one cold call,
/// [`execute_thread`], so that the values only it needs (the code's key
/// and look-up, the program) are computed there, not before the branch,
/// and the cell's address is not kept for it.
#[inline(always)]
fn execute_on_thread(found: &mut Found, prog: &Program, ctx: *mut Ctx, entry: u16) -> Returned {
    // The pin read first, while the caller's pointer to the code is in a
    // register.
    let pin = found.pin;
    let p = THREAD.get();
    // SAFETY: read from the cell.
    if !unsafe { busy(p) } {
        // SAFETY: `p` is a registration (markers are busy), alive while
        // this thread lives (`Owner`), and not busy: no invocation on this
        // thread uses it, and no other thread reaches it (the cell is this
        // thread's). `pinned` runs no invocation, so this is the one
        // reference to its `thread` until the flag is set below.
        let thread = unsafe { &mut (*p).thread };
        if let Some(pinned) = thread.pinned(&pin) {
            let addr = pinned.addr();
            let call = |_: &mut codecache::Thread| {
                // SAFETY: as in `execute`: the pin was made of this key's
                // code (`execute_scoped`, the only writer of `Found::pin`,
                // fills it from the look-up of `key`), which stays alive
                // while the registration's `thread` is not used
                // (`Thread::pinned`), and that outlasts the call: this
                // thread passes no synchronization point in it (its
                // registration is flagged busy, so a nested invocation
                // registers for itself).
                unsafe { call_entry(addr, ctx, entry) }
            };
            // SAFETY: as above (`flagged`'s contract; the borrow of
            // `thread` has ended with `addr` taken); the flag is set
            // around the call, so that a nested invocation (a native
            // invoking another applet) or `park` on this thread leaves
            // the registration alone while the code runs. `call_entry`
            // does not unwind (its block calls generated code, whose
            // natives are `extern "C"` and abort on a panic).
            return unsafe { flagged(p, call) };
        }
    }
    execute_thread(Code { found }, prog, ctx, entry)
}

/// [`execute_on_thread`]'s rare ways: on this thread's registration
/// ([`with_thread`]: made here at the thread's first invocation) inside
/// a scope, or on one of its own where it is in use or gone.
#[cold]
#[inline(never)]
fn execute_thread(code: Code<'_>, prog: &Program, ctx: *mut Ctx, entry: u16) -> Returned {
    with_thread(|thread| match thread {
        Some(thread) => execute(thread, code, prog, ctx, entry),
        // A native of an applet running on this thread invokes another
        // applet (this thread's registration is in use), or the thread is
        // exiting: a registration of its own for this invocation.
        None => execute_registering(code, prog, ctx, entry),
    })
}

/// [`execute`] on a registration of its own: for a thread whose own is in
/// use (a native of an applet invokes another applet) or being destroyed.
#[cold]
#[inline(never)]
pub(super) fn execute_registering(
    code: Code<'_>,
    prog: &Program,
    ctx: *mut Ctx,
    entry: u16,
) -> Returned {
    execute(&mut cache().register(), code, prog, ctx, entry)
}

/// Why [`rebuild`] gave no code.
pub(super) enum Unbuilt {
    /// Not built now: the rebuild budget is spent, or the cache had no
    /// room for it. The interpreter runs the invocation
    /// ([`interpret_evicted`]); a later one tries again.
    Deferred,
    /// Compiling failed (an internal error: the program compiled before).
    Failed(String),
}

/// The CPU time building evicted code again may take, a second, over the
/// process (a token bucket holding a second's worth): the default of
/// [`set_rebuild_budget`].
pub const REBUILD_TIME_PER_SECOND: std::time::Duration = std::time::Duration::from_millis(100);

/// The rebuild budget: its rate (seconds a second) and bucket.
struct RebuildBudget {
    rate: f64,
    tokens: f64,
    at: Option<std::time::Instant>,
}

fn rebuild_budget() -> std::sync::MutexGuard<'static, RebuildBudget> {
    static BUDGET: Mutex<RebuildBudget> = Mutex::new(RebuildBudget {
        rate: REBUILD_TIME_PER_SECOND.as_secs_f64(),
        tokens: REBUILD_TIME_PER_SECOND.as_secs_f64(),
        at: None,
    });
    BUDGET.lock().unwrap_or_else(|e| e.into_inner())
}

impl RebuildBudget {
    /// The bucket refilled to `now`, at most a second's worth.
    fn refill(&mut self, now: std::time::Instant) -> &mut Self {
        let elapsed = self
            .at
            .map_or(1.0, |at| now.duration_since(at).as_secs_f64());
        self.tokens = (self.tokens + elapsed * self.rate).min(self.rate);
        self.at = Some(now);
        self
    }
}

/// Sets the CPU time building evicted code again may take a second, over
/// the process (default [`REBUILD_TIME_PER_SECOND`]), and fills the
/// budget to it.
///
/// An invocation whose code the cache evicted builds it again on the
/// invoking thread, which in a host such as unet's engine serves other
/// clients too: applets whose code together passes the cache's high-water
/// mark would keep every invocation rebuilding, and the threads doing
/// nothing else. A rebuild is taken while any of the budget is left and
/// charged its time after; past it, evicted code's invocations run on the
/// interpreter (the same outcome, traps and fuel) until the budget
/// refills. Zero: evicted code is never built again; `Duration::MAX`:
/// every rebuild is taken.
pub fn set_rebuild_budget(per_second: std::time::Duration) {
    let mut b = rebuild_budget();
    b.rate = per_second.as_secs_f64();
    b.tokens = b.rate;
    b.at = Some(std::time::Instant::now());
}

/// The code of `key` after the cache evicted it under memory pressure:
/// compiled again and published, within the rebuild budget
/// ([`set_rebuild_budget`]). The entry is alive for `scope` even if
/// another eviction retires it at once (`Scope::get_or_build`).
#[cold]
#[inline(never)]
pub(super) fn rebuild<'s>(
    scope: &'s codecache::Scope<'_>,
    key: u64,
    prog: &Program,
) -> Result<&'s codecache::Entry, Unbuilt> {
    let start = std::time::Instant::now();
    if rebuild_budget().refill(start).tokens <= 0.0 {
        return Err(Unbuilt::Deferred);
    }
    let built = build(prog).map_err(|e| Unbuilt::Failed(format!("internal error: {e}")));
    let published = built.and_then(|(mut func, ..)| {
        // The program compiled before, so publishing fails only for want
        // of room (`Error::Alloc`, or the arena's refusal inside
        // `end_in`).
        scope
            .get_or_build(key, 1, move |e| func.end_in(e.mem()))
            .map_err(|_| Unbuilt::Deferred)
    });
    let end = std::time::Instant::now();
    rebuild_budget().refill(end).tokens -= end.duration_since(start).as_secs_f64();
    published
}

/// Runs method `entry` of an invocation whose code was evicted and not
/// built again ([`Unbuilt::Deferred`]) on the interpreter, in the code's
/// place: its arguments from the frame stack, where the caller wrote
/// them; the heap, the statics, the natives and the host value from the
/// record, as a runtime call reaches them; the limits `keep` wrote there.
/// The outcome is the code's: the value with status 0, or the trap in
/// [`Found::failed`] with [`Returned::NOT_RUN`]; the fuel used where
/// [`Compiled::fuel_used`] reads it. The interpreter gives the same value,
/// trap, fuel and effects (`tests/differential.rs`); nothing of the
/// invocation's common way (the caller's `Applet::run_prepared` and the
/// rest) changes for it.
///
/// # Safety
///
/// `ctx` is the record of the running invocation of `prog`, bound by its
/// caller (`Runtime::bind`, `Compiled::keep`), which makes no other
/// reference to the record, the heap, the statics or the host until this
/// returns.
#[cold]
#[inline(never)]
unsafe fn interpret_evicted(code: Code<'_>, prog: &Program, ctx: *mut Ctx, entry: u16) -> Returned {
    // SAFETY: as the caller promises.
    let (ctx, rt) = unsafe { runtime::record(ctx) };
    let Some(Some(f)) = prog.funcs.get(usize::from(entry)) else {
        code.found.failed = Some(Box::new(internal_trap(
            "entry is not a bytecode method",
            String::new(),
        )));
        return Returned::NOT_RUN;
    };
    // SAFETY: the frame stack (`STACK_SLOTS` slots from `ctx.frames`,
    // owned by the `Compiled` whose record this is), where the caller
    // wrote the entry's `arg_slots` arguments (the interpreter copies
    // them into its own frames first, and nothing writes this frame stack
    // while it runs: the `Compiled` is its caller's alone); the statics, the
    // applet's `static_count` slots (`Compiled::keep`); the heap, the
    // natives and the host, the invocation's (`Runtime::bind`). The
    // caller makes no other reference to any of them until this returns.
    let (args, statics, heap, natives, host) = unsafe {
        (
            core::slice::from_raw_parts(ctx.frames, usize::from(f.arg_slots)),
            core::slice::from_raw_parts_mut(ctx.statics, usize::from(prog.info.static_count)),
            rt.heap(),
            rt.natives(),
            rt.host(),
        )
    };
    let limits = RunLimits {
        fuel: ctx.fuel_start,
        max_depth: u32::try_from(ctx.max_depth).unwrap_or(u32::MAX),
    };
    let mut st = State {
        heap,
        statics,
        natives,
        host,
    };
    // A machine kept by the thread (its frame stack is 68 KiB): taken, so
    // that an invocation a native makes meanwhile takes its own.
    std::thread_local! {
        static SPARE: core::cell::Cell<Option<Box<crate::interpreter::Machine>>> =
            const { core::cell::Cell::new(None) };
    }
    let mut machine = SPARE.take().unwrap_or_default();
    let outcome = machine.run(prog, &mut st, entry, args, limits);
    SPARE.set(Some(machine));
    match outcome {
        Ok(o) => {
            ctx.fuel = ctx.fuel_start.saturating_sub(o.fuel_used);
            Returned {
                status: 0,
                value: o.value.unwrap_or(0),
            }
        }
        Err(trap) => {
            code.found.failed = Some(Box::new(trap));
            Returned::NOT_RUN
        }
    }
}

impl Compiled {
    /// The applet object's fields, for generated code: null before the
    /// constructor has made the object, and for code that reads no field
    /// (which then never reads the pointer).
    #[inline]
    pub(crate) fn fields(&self, heap: &mut Heap, instance: i32) -> *mut i32 {
        if !self.reads_fields {
            return core::ptr::null_mut();
        }
        match heap.get_mut(instance) {
            Some(crate::heap::ObjectMut::Instance(v)) => v.as_mut_ptr(),
            _ => core::ptr::null_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registers `call_entry`'s `asm!` block declares clobbered are
    /// the ones `CALLER_KEPT` names, and the generated code's entry leaves
    /// exactly those to its caller (`compiler::entry_config`): a register
    /// kept by the caller but not declared would reach the host changed.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_caller_kept_registers_are_callee_saved_and_kept() {
        use vcode::host::gpr::{R12, R13, R14, R15};
        // The `out("r12")` to `out("r15")` of `call_entry`.
        assert_eq!(CALLER_KEPT, [R12, R13, R14, R15]);
        let cfg = super::super::compiler::entry_config();
        for n in 0..16u8 {
            assert_eq!(
                cfg.kept_in_caller(n),
                CALLER_KEPT.contains(&n),
                "register {n}"
            );
        }
    }

    /// A word stops admitting its entry when `keep` makes a table that
    /// refuses the entry (a depth limit above the JIT's), and a word made
    /// again then is 0; the applet API never keeps code in that state
    /// (it moves the applet to the interpreter), so this is checked here.
    #[test]
    fn a_word_made_before_a_keep_admits_nothing_after_it() {
        if !available() {
            return;
        }
        let Some(dir) = crate::APPLET_CLASSES else {
            return;
        };
        let bytes = std::fs::read(std::path::Path::new(dir).join("default/Counter.class"))
            .expect("Counter.class");
        let natives = crate::Natives::new()
            .with("hostAdd", "(II)I", |_, a| Ok(a[0].wrapping_add(a[1])))
            .with("fill", "([BI)V", |_, _| Ok(0))
            .with("makeInts", "(I)[I", |_, _| Ok(0));
        let a = crate::Applet::load_with_engine(
            &bytes,
            &natives,
            crate::Limits::default(),
            crate::Engine::Interpreter,
        )
        .expect("Counter loads");
        let prog = a.program();
        let mut c = compile(prog).expect("Counter compiles");
        // Counter has no inline natives, so no lender: `NoLender`'s type,
        // which no typed host's lender equals.
        assert!(c.rec.ctx.words_of.is_none());
        assert_eq!(c.lender, core::any::TypeId::of::<NoLender>());
        // Nor does its code read words: a lender's word is made with
        // `LENT` for any lender (`ready_word_for`).
        assert!(c.reads_no_words);
        let ok = RunLimits {
            fuel: 100,
            max_depth: 64,
        };
        let entry = prog
            .funcs
            .iter()
            .position(Option::is_some)
            .expect("a bytecode method") as u16;
        assert_eq!(c.ready_word(entry), 0, "nothing enterable before keep");
        // A word of 0 (the JIT was not running) is ready for no entry,
        // of either kind.
        for e in 0..=entry {
            assert!(c.ready(e, 0, 0).is_none());
            assert!(c.ready(e, 0, LENT).is_none(), "a lender's word of 0");
        }
        c.keep(prog, &[], core::ptr::null_mut(), core::ptr::null_mut(), ok);
        let word = c.ready_word(entry);
        assert_ne!(word, 0);
        // The entry is or'ed into the stamp's clear low bits: the words of
        // two entries of one `keep` differ, and neither admits the other.
        assert_eq!(c.stamp & (STAMP_STEP - 1), 0, "a stamp's low bits");
        assert_eq!(word & (STAMP_STEP - 1), u64::from(entry));
        assert!(c.ready(entry, word, 0).is_some());
        assert!(c.ready(entry + 1, word, 0).is_none(), "another entry");
        // A lender's word is ready only with `LENT`, and only for a lender.
        assert!(c.ready(entry, word | LENT, LENT).is_some());
        assert!(c.ready(entry, word, LENT).is_none(), "without the bit");
        assert!(c.ready(entry, word | LENT, 0).is_none(), "the untyped kind");
        c.keep(
            prog,
            &[],
            core::ptr::null_mut(),
            core::ptr::null_mut(),
            RunLimits {
                max_depth: MAX_CALL_DEPTH + 1,
                ..ok
            },
        );
        assert!(c.ready(entry, word, 0).is_none(), "a stale word");
        assert!(
            c.ready(entry, word | LENT, LENT).is_none(),
            "a stale lender's word"
        );
        assert_eq!(c.ready_word(entry), 0);
        c.keep(prog, &[], core::ptr::null_mut(), core::ptr::null_mut(), ok);
        assert!(
            c.ready(entry, word, 0).is_none(),
            "a stale word, the table as before"
        );
        assert!(c.ready(entry, c.ready_word(entry), 0).is_some());
    }
}
