//! jive: a verified, resource-limited JVM subset for network extension
//! applets, after JIVE in *U-Net/SLE: user-level network interface with safe
//! Java extension applets* (sections 2 and 3), with the Java Virtual Machine
//! Specification (Java SE 17) chapters 4 and 6 as the reference for
//! everything the paper leaves open.
//!
//! A user writes a packet-processing applet in Java (one class with a
//! constructor, `doTx` and `doRx`, calling `static native` methods the host
//! provides), compiles it with a standard `javac`, and hands the untrusted
//! `.class` file to the host. jive proves it safe and runs it:
//!
//! | phase | module | follows |
//! |---|---|---|
//! | read the class file | [`classfile`], [`bytecode`] | JVMS §4.1–§4.7, §4.9.1 |
//! | check the JIVE subset | [`subset`] | paper §3.1, `docs/jive.md` |
//! | check load-time limits | [`limits`] | paper §3.3 (future work there) |
//! | verify by type checking | [`verifier`] | JVMS §4.9.2, §4.10.1 |
//! | prove lent `byte[]` parameters only read (where the host lends one) | [`lent`] | `docs/jive.md` |
//! | decode once to an internal form | [`decode`] | paper §3.3 (call/field cost) |
//! | interpret, with traps and fuel | [`interpreter`] | JVMS chapter 6 |
//! | or compile to native code, with the same traps and fuel | [`jit`] | paper §3.3; vcode, codecache |
//! | arrays, budget, mark phase | [`heap`] | paper §3.1 (scope-based lifetimes) |
//! | bind natives to host closures | [`natives`] | paper §2 |
//!
//! The host API is [`Applet`]: [`Applet::load`] parses, checks, verifies,
//! binds the natives and instantiates (running `<clinit>` and the
//! constructor); [`Applet::invoke`] calls a method by name with int
//! arguments; [`Applet::set_static_array`] hands the applet a byte array such
//! as `RxBuf`. A host that invokes one method per packet resolves it once
//! ([`Applet::method`]) and calls it with [`Applet::call`], or with
//! [`Applet::call_value`], whose value or boxed error comes back in two
//! registers; or prepares it once for a fixed arity ([`Applet::prepare`])
//! and calls the handle with [`Applet::call_prepared`], which makes the
//! owner, arity, engine and entry checks once per change instead of once
//! per call ([`Prepared`]), or with [`Applet::run_prepared`], whose
//! outcome comes back in one register ([`Called`]) and whose error, on
//! failure, the applet keeps for [`Applet::take_error`]. [`check`] does everything short of binding and
//! instantiating, for tools that only verify.
//!
//! A method may also take a `byte[]` the host lends it for the invocation
//! instead of copying it into the heap ([`Applet::lend`],
//! [`Applet::prepare_lending`]; `lend.rs` says who guarantees what).
//!
//! Errors are typed ([`LoadError`], [`InvokeError`], [`Trap`]) and say where:
//! a byte offset in the file, or a method and bytecode index. jive's
//! `unsafe` code is in [`jit`] (calling the generated code, and the runtime
//! calls it makes back into the host) and in [`heap`] (its views of
//! elements, and the lent bytes).
//!
//! Dependencies: `thiserror` (error types), `vcode` (the JIT's code
//! generator) and `codecache` (where compiled applets live). Dev-dependencies: `proptest`
//! (the mutation property test of the reader, subset check and verifier) and
//! `criterion` (the benchmark suite under `benches/`).
//!
//! # Example
//!
//! The applet of the paper's Figure 2, with its natives bound to closures:
//!
//! ```no_run
//! use jive::{Applet, Limits, Natives};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let natives = Natives::new()
//!     .with("newAlignedArray", "(I)[B", |cx, a| cx.new_array(jive::subset::Prim::Byte, a[0]))
//!     .with("getFreeBufferLength", "()I", |_, _| Ok(4096))
//!     .with("getFreeBuffer", "()I", |_, _| Ok(0))
//!     .with("doHtoLDMA", "([BIII)V", |cx, a| cx.bytes(a[0]).map(|_| 0))
//!     .with("doLtoHDMA", "([BIII)V", |cx, a| cx.bytes_read(a[0]).map(|_| 0))
//!     .with("txPush", "([BIII)V", |_, _| Ok(0))
//!     .with("dmaRxd", "([III)V", |_, _| Ok(0))
//!     .with("dmaRxdPayload", "([BII)V", |_, _| Ok(0));
//! let bytes = std::fs::read("RawUnet.class")?;
//! let mut applet = Applet::load(&bytes, &natives, Limits::default())?;
//! applet.set_static_array("RxBuf", &[0u8; 1500])?;
//! let out = applet.invoke("doRx", &[64, 3])?;
//! assert_eq!(out.value, Some(0));
//! println!("doRx used {} fuel", out.fuel_used);
//! # Ok(())
//! # }
//! ```

pub mod bytecode;
pub mod classfile;
pub mod decode;
pub mod error;
pub mod heap;
pub mod interpreter;
pub mod jit;
pub mod lend;
pub mod lent;
pub mod limits;
pub mod natives;
pub mod subset;
pub mod verifier;

pub use crate::decode::Program;
pub use crate::error::JitError;
pub use crate::error::{
    ClassFormatError, InvokeError, LimitError, LoadError, SubsetError, Trap, TrapKind, VerifyError,
};
pub use crate::heap::{LENT, LendError, Object};
pub use crate::interpreter::Outcome;
pub use crate::lend::{ANY_PARAM, Lend, PreparedLending};
pub use crate::lent::LentParam;
pub use crate::limits::Limits;
pub use crate::natives::{
    AreaBytes, AreaWords, Arrays, COPY_INLINE_MAX, Context, FRAME_HEADER, FRAME_IP, FRAME_IP_CSUM,
    FRAME_IP_TOTAL_LEN, FRAME_UDP, FRAME_UDP_LEN, FastError, FastNative, FrameWords, HostWords,
    InlineForm, MarkError, NativeError, NativeFn, Natives, QueueSlots, QueueWords, RING_BYTES,
    RING_HEADER_ONE, RING_HEADER_SEALED, RING_SEAL_BYTE, RING_SEALED, RING_SLOT, RingSlots,
    RingWords, TAIL_SUFFIX, TailWords, tail_name,
};

use crate::classfile::ClassFile;
use crate::heap::Heap;
use crate::interpreter::{Machine, RunLimits, State};
use crate::subset::{FieldType, Prim};

/// Directory holding the class files compiled from `applets/` by the build
/// script (`<dir>/default` and `<dir>/release8`), if `javac` was found.
/// For jive's own tests, benchmarks and the `fastpath` CLI's benchmark.
#[doc(hidden)]
pub const APPLET_CLASSES: Option<&str> = option_env!("JIVE_APPLET_CLASSES");

/// Directory of the random programs the build script generates and compiles
/// for the JIT's differential test (`tests/jit.rs`), if `javac` was found.
#[doc(hidden)]
pub const RANDOM_CLASSES: Option<&str> = option_env!("JIVE_RANDOM_CLASSES");

/// Reads, subset-checks, limit-checks, verifies and decodes a class file.
///
/// Natives are not bound; see [`Applet::load`] for that.
pub fn check(bytes: &[u8], limits: &Limits) -> Result<Program, LoadError> {
    check_lending(bytes, limits, &[])
}

/// [`check`], with the `byte[]` parameters the host lends declared
/// ([`LentParam`]): each declaration must name a `[B` parameter of its
/// descriptor ([`LoadError::LentParam`] otherwise), and every method of the
/// class it names is proved to only read the lent array ([`lent`]; a
/// [`VerifyError`] otherwise). The native calls that receive it are
/// recorded in the [`Program`] and checked against the table's read-only
/// marks when the natives are bound ([`Applet::instantiate`]). With no
/// declarations this is [`check`] exactly.
pub fn check_lending(
    bytes: &[u8],
    limits: &Limits,
    lent: &[LentParam],
) -> Result<Program, LoadError> {
    for l in lent {
        l.check().map_err(|reason| LoadError::LentParam {
            method: l.method.to_owned(),
            descriptor: l.descriptor.to_owned(),
            param: l.param,
            reason,
        })?;
    }
    if bytes.len() > limits.max_class_bytes {
        return Err(LimitError {
            method: None,
            what: "class file size",
            actual: bytes.len() as u64,
            limit: limits.max_class_bytes as u64,
        }
        .into());
    }
    let cf = ClassFile::parse(bytes)?;
    // Split the code into instructions once; every later phase reuses them.
    let insns = subset::method_instructions(&cf);
    let info = subset::check_with(&cf, &insns)?;
    limits.check_class(&cf, &info)?;
    verifier::verify_with(&cf, &info, &insns)?;
    // Only for the methods declared lent: none, nothing to do.
    let proved = if lent.is_empty() {
        Vec::new()
    } else {
        lent::analyse(&cf, &info, &insns, lent)?
    };
    let name = cf.this_class.clone();
    decode::decode_lending(&cf, info, &insns, true, &proved).ok_or_else(|| {
        LoadError::Verify(VerifyError {
            method: name,
            bci: None,
            reason: "internal error: a verified class failed to decode".into(),
        })
    })
}

/// Checks that every native call the lent analysis recorded
/// ([`lent::NativeArg`]) passes the possibly lent array to a parameter the
/// table marks read-only ([`Natives::set_read_only`]), in the native's
/// ordinary form and, where the table binds one, in its tail form (which
/// the decoder may bind at the site): else the [`VerifyError`] that names
/// the method, the call and the parameter.
fn check_lent_natives(prog: &Program, natives: &Natives) -> Result<(), LoadError> {
    for l in prog.lent_methods() {
        for a in &l.native_args {
            let m = &prog.info.methods[usize::from(l.method)];
            let n = &prog.info.methods[usize::from(a.native)];
            let tail = tail_name(&n.name);
            let reads = natives.reads_only(&n.name, &n.descriptor, a.param)
                && (natives.get(&tail, &n.descriptor).is_none()
                    || natives.reads_only(&tail, &n.descriptor, a.param));
            if !reads {
                return Err(LoadError::Verify(VerifyError {
                    method: m.id(),
                    bci: Some(a.bci),
                    reason: format!(
                        "the lent byte[] is passed to native {}'s parameter {}, which writes it \
                         (the host's table does not mark it read-only)",
                        n.id(),
                        a.param
                    ),
                }));
            }
        }
    }
    Ok(())
}

/// An int argument narrowed to a parameter's type, as the JVM passes it
/// (and a native's result to its declared type).
#[inline]
fn narrow(p: Prim, a: i32) -> i32 {
    match p {
        Prim::Boolean => a & 1,
        Prim::Byte => i32::from(a as i8),
        Prim::Short => i32::from(a as i16),
        Prim::Int => a,
    }
}

/// [`narrow`] to `p` as `((a & mask) << shift) >> shift`.
pub(crate) const fn narrowing(p: Prim) -> (i32, u32) {
    match p {
        Prim::Boolean => (1, 0),
        Prim::Byte => (-1, 24),
        Prim::Short => (-1, 16),
        Prim::Int => (-1, 0),
    }
}

/// A JIT invocation's trap as the error [`Applet::call_value`] returns.
#[cold]
#[inline(never)]
fn trapped(t: Trap) -> Box<InvokeError> {
    Box::new(InvokeError::Trap(t))
}

/// A method of an [`Applet`], resolved once by [`Applet::method`], for
/// that applet's [`Applet::call`] (another applet refuses it).
#[derive(Debug, Clone, Copy)]
pub struct Method {
    /// The [`Applet::id`] of the applet that resolved it.
    applet: u64,
    idx: u16,
    /// Whether it is an instance method, whose first argument slot is
    /// `this` (kept as this rather than as `is_static`, so that
    /// [`Method::fill_args`] indexes the slots by it as it is: the
    /// negation cost the per-message invocation two instructions).
    has_this: bool,
    returns: bool,
    arity: usize,
    /// Each parameter's narrowing as a mask and a shift ([`narrowing`]).
    narrow: [(i32, u32); Method::MAX_ARGS],
    /// Whether every parameter is an `int` (nothing to narrow).
    ints: bool,
}

impl Method {
    /// The most int parameters a method resolved for [`Applet::call`] may
    /// have (`invoke` takes any number).
    pub const MAX_ARGS: usize = 8;

    /// Writes the invocation's argument slots (`this` first for an
    /// instance method, then `args` narrowed to the parameters' types) to
    /// `slots`; returns how many.
    #[inline]
    fn fill_args(&self, slots: &mut [i32; Method::MAX_ARGS + 1], this: i32, args: &[i32]) -> usize {
        let first = usize::from(self.has_this);
        slots[0] = this;
        if self.ints {
            // The common case (`doRx(int, int)`): the arguments as they are.
            for (s, &a) in slots[first..].iter_mut().zip(args) {
                *s = a;
            }
            return first + args.len();
        }
        for ((s, &(mask, shift)), &a) in slots[first..].iter_mut().zip(&self.narrow).zip(args) {
            // `narrow` without a branch: a boolean keeps bit 0, a byte or a
            // short is sign-extended from its width.
            *s = ((a & mask) << shift) >> shift;
        }
        first + args.len()
    }

    /// [`Method::fill_args`] for a prepared call of `N` arguments
    /// ([`Prepared`], whose arity was checked against `N` when it was
    /// made): `this` in the first slot whatever the method (a static one's
    /// first argument overwrites it), then, where every parameter is an
    /// `int`, the `N` arguments as they are, each stored by value; a method
    /// with a narrower parameter takes [`Method::fill_narrowed`].
    ///
    /// Not a copy of the array (`copy_from_slice`): that keeps the
    /// arguments in memory, written as 4-byte stores just before, and the
    /// copy reads them 8 bytes at a time, a read the store buffer does not
    /// forward from two stores, which waits for both to reach the cache
    /// (docs/benchmarks.md, "Store-forwarding stalls on the applet's
    /// path").
    #[inline(always)]
    fn fill_prepared<const N: usize>(
        &self,
        slots: &mut [i32; Method::MAX_ARGS + 1],
        this: i32,
        args: [i32; N],
    ) {
        const { assert!(N <= Method::MAX_ARGS) };
        slots[0] = this;
        if !self.ints {
            return self.fill_narrowed(slots, this, args);
        }
        let first = usize::from(self.has_this);
        // `first` is 0 or 1 and `N` at most `MAX_ARGS`, so the range is in
        // the slots and the bounds test folds away.
        for (s, a) in slots[first..first + N].iter_mut().zip(args) {
            *s = a;
        }
    }

    /// [`Method::fill_prepared`] of a method with a parameter narrower
    /// than `int`: [`Method::fill_args`], out of line. The arguments by
    /// value, so that the common call does not store them for it.
    #[cold]
    #[inline(never)]
    fn fill_narrowed<const N: usize>(
        &self,
        slots: &mut [i32; Method::MAX_ARGS + 1],
        this: i32,
        args: [i32; N],
    ) {
        self.fill_args(slots, this, &args);
    }

    /// The number of int parameters (not counting `this`).
    pub fn arity(&self) -> usize {
        self.arity
    }
}

/// A method of an [`Applet`] prepared once (e.g. when a host loads the
/// applet) for [`Applet::call_prepared`] with `N` int arguments: the
/// resolved [`Method`], its arity checked against `N` when it is made, and
/// the word that says the JIT's code may be entered at it without the
/// look-ups [`Applet::call`] repeats (the owner, the engine, the table of
/// enterable methods).
///
/// The word is made while those checks pass, and every change they depend
/// on (the applet's limits, its engine, its code compiled again) makes
/// the applet's compiled code draw a new stamp that no earlier word
/// matches; a call with a stale word (or on another applet) takes the
/// checked way, [`Applet::call_value`], and prepares the handle again
/// where that is allowed. So no check is skipped: each is made once per
/// change instead of once per call.
///
/// `K`: the host it is prepared for, `()` for an untyped host
/// ([`Applet::prepare`]) or the lender of words `W` of a typed host
/// ([`Applet::prepare_lent`], for [`Applet::run_prepared_lent`]): the
/// word of a lender's handle also says whether the program finds its
/// words through `W`, the check of the lender made with the others,
/// once per change.
pub struct Prepared<const N: usize, K = ()> {
    m: Method,
    /// [`jit::Compiled::ready_word_for`] when last prepared; 0 if the JIT
    /// did not run the applet then (no word is 0).
    word: u64,
    kind: core::marker::PhantomData<fn() -> K>,
}

impl<const N: usize, K> Clone for Prepared<N, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<const N: usize, K> Copy for Prepared<N, K> {}

impl<const N: usize, K> core::fmt::Debug for Prepared<N, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Prepared")
            .field("m", &self.m)
            .field("word", &self.word)
            .finish()
    }
}

impl<const N: usize, K> Prepared<N, K> {
    /// The resolved method.
    pub fn method(&self) -> &Method {
        &self.m
    }
}

/// Which engine runs an applet's methods.
///
/// Both engines have the same semantics: for every invocation they agree on
/// the result, the trap (kind, method, bci), the fuel used and the state the
/// applet is left in (the differential tests check this).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Engine {
    /// The interpreter over the decoded form ([`interpreter`]).
    Interpreter,
    /// Native code from the JIT ([`jit`]); loading fails if it cannot compile.
    Jit,
    /// The JIT when vcode has a native backend for this CPU
    /// ([`jit::available`]) and the applet compiles, the interpreter
    /// otherwise. The default.
    #[default]
    Tiered,
}

/// A static `byte[]` field of an [`Applet`], resolved once by
/// [`Applet::static_bytes_field`], with where its array's elements were
/// when [`Applet::static_bytes_mut`] last found them ([`heap::BytesView`]):
/// while the field holds the same handle and the heap has not freed an
/// object since, the next call finds them with two compares instead of
/// the heap's look-up. The view is checked against the heap's generation,
/// which no other heap (another applet's, or a copy) ever has, so a view
/// used on another applet only misses.
#[derive(Debug, Clone, Copy)]
pub struct StaticBytes {
    slot: usize,
    view: heap::BytesView,
}

/// A loaded, verified and instantiated applet.
pub struct Applet {
    /// Unique in the process: which [`Method`]s are this applet's.
    id: u64,
    prog: Program,
    natives: Vec<NativeFn>,
    heap: Heap,
    /// The static fields: made at load, `static_count` long, and never
    /// replaced (only its elements are written; a boxed slice cannot be
    /// resized), so that its buffer stays where it is while the applet
    /// lives, which the JIT's context keeps instead of writing it per
    /// invocation ([`jit::Compiled::keep`]).
    statics: Box<[i32]>,
    instance: i32,
    machine: Machine,
    limits: Limits,
    static_refs: Vec<u16>,
    instance_refs: Vec<u16>,
    /// The applet's compiled code, when the JIT runs it.
    jit: Option<jit::Compiled>,
    /// Why the last [`Applet::run_prepared`] that failed failed, until
    /// [`Applet::take_error`] takes it.
    error: Option<Box<InvokeError>>,
}

/// What [`Applet::run_prepared`] returns: the method's value, or that the
/// invocation failed ([`Applet::take_error`] says why). Eight bytes, so
/// that it comes back to the host in one register, with nothing written
/// to memory and read again for the common outcome. For a `void` method
/// the value word is whatever the JIT's code left in its result register
/// (0 on the interpreter), so two `Called`s of `void` methods may compare
/// unequal: compare [`Called::value`], which is `None` for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Called {
    value: i32,
    /// [`Called::VALUE`], [`Called::VOID`] or [`Called::FAILED`].
    kind: u32,
}

impl Called {
    /// The method returned (a `void` method).
    const VOID: u32 = 0;
    /// The method returned `value` (1: `Method::returns` as a number).
    const VALUE: u32 = 1;
    /// The invocation failed.
    const FAILED: u32 = 2;
    /// A failed invocation's outcome. Its value word is `i32::MIN`, so
    /// that [`Called::returned_non_negative`] screens a failure out with
    /// the same one test of the value that screens out a negative value.
    const FAILURE: Called = Called {
        value: i32::MIN,
        kind: Called::FAILED,
    };

    /// Whether the method returned (with or without a value).
    #[inline(always)]
    pub fn is_ok(self) -> bool {
        self.kind != Called::FAILED
    }

    /// The method's value: `None` for a `void` method and for a failed
    /// invocation.
    #[inline(always)]
    pub fn value(self) -> Option<i32> {
        (self.kind == Called::VALUE).then_some(self.value)
    }

    /// A one-test screen for a negative value: `false` says that
    /// [`Called::value`] is not negative (`None` or at least 0); `true`
    /// says only that it may be, and [`Called::value`] tells. The register
    /// the value comes back in is tested alone, without the kind: a `void`
    /// method's holds whatever its code left there, and a failed
    /// invocation's holds `i32::MIN`. For a host whose common outcome is a
    /// method that returned a non-negative value (or whose `void` methods
    /// leave one), so that the common case is one test and a branch not
    /// taken.
    #[inline(always)]
    pub fn may_be_negative(self) -> bool {
        self.value < 0
    }

    /// A one-test screen for the common outcome: `true` says that the
    /// method returned ([`Called::is_ok`]) and that [`Called::value`] is
    /// not negative (`None` or at least 0); `false` says only that one of
    /// the two may not hold, and [`Called::is_ok`] and [`Called::value`]
    /// tell. The value's register alone is tested, as
    /// [`Called::may_be_negative`] tests it: a failed invocation's holds
    /// `i32::MIN`. So a host tests the kind only on its rare way, and the
    /// common outcome costs one test and a branch not taken (the kind's
    /// test, on the way where the body is inlined, was a load after the
    /// code's call, a compare and a branch).
    #[inline(always)]
    pub fn returned_non_negative(self) -> bool {
        self.value >= 0
    }

    /// The outcome as [`Applet::call_prepared`] gives it, with `error`
    /// taken from the applet if the invocation failed.
    #[inline(always)]
    fn into_result(
        self,
        error: impl FnOnce() -> Box<InvokeError>,
    ) -> Result<Option<i32>, Box<InvokeError>> {
        if self.is_ok() {
            Ok(self.value())
        } else {
            Err(error())
        }
    }
}

/// The machine code a JIT-compiled applet runs ([`Applet::code`]): its key
/// in the process's code cache, under which applets whose classes compile
/// to the same code share one copy, and its size in bytes. A host that
/// budgets the cache per client counts each key once per client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CodeShare {
    /// The code's key in the cache.
    pub key: u64,
    /// Bytes of machine code.
    pub bytes: usize,
}

/// An applet verified, its natives bound and its code compiled, whose
/// initializers have not run ([`Applet::compile_lending`]).
pub struct Unconstructed(Applet);

impl Unconstructed {
    /// The checked program (e.g. its [`Program::ops_per_fuel_unit`]).
    pub fn program(&self) -> &Program {
        &self.0.prog
    }

    /// The machine code it will run ([`Applet::code`]).
    pub fn code(&self) -> Option<CodeShare> {
        self.0.code()
    }

    /// The most memory the applet holds, about ([`Applet::memory_bytes`]).
    pub fn memory_bytes(&self) -> usize {
        self.0.memory_bytes()
    }

    /// Lowers the fuel of every invocation, the initializers' included, to
    /// at most `fuel` (a host's bound on work, not only on loop
    /// iterations: see [`Program::ops_per_fuel_unit`]). Nothing changes
    /// when metering is off.
    pub fn limit_fuel(&mut self, fuel: u64) {
        if let Some(f) = self.0.limits.fuel.as_mut() {
            *f = (*f).min(fuel);
            self.0.keep_context();
        }
    }

    /// Runs `<clinit>` (if any), creates the applet object and runs its
    /// constructor, their natives given `host` ([`Context::host`]): the
    /// rest of [`Applet::load_lending`].
    pub fn construct(self, host: Option<&mut dyn core::any::Any>) -> Result<Applet, LoadError> {
        let mut applet = self.0;
        applet.initialize(host)?;
        Ok(applet)
    }
}

impl core::fmt::Debug for Unconstructed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Unconstructed")
            .field("class", &self.0.prog.info.name)
            .finish_non_exhaustive()
    }
}

impl core::fmt::Debug for Applet {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Applet")
            .field("class", &self.prog.info.name)
            .field("statics", &self.statics)
            .field("heap_bytes", &self.heap.bytes_in_use())
            .finish_non_exhaustive()
    }
}

impl Applet {
    /// Loads an applet: [`check`], bind every native declared by the class to
    /// `natives`, compile it ([`Engine::Tiered`]: with the JIT where vcode
    /// has a native backend), then instantiate: run `<clinit>` (if any),
    /// create the applet object and run its constructor.
    pub fn load(bytes: &[u8], natives: &Natives, limits: Limits) -> Result<Applet, LoadError> {
        Applet::load_with_host(bytes, natives, limits, None)
    }

    /// [`Applet::load`], giving the natives that `<clinit>` and the
    /// constructor call a host value ([`Context::host`]), as the U-Net/SLE
    /// constructor calls `getFreeBufferLength` of its endpoint.
    pub fn load_with_host(
        bytes: &[u8],
        natives: &Natives,
        limits: Limits,
        host: Option<&mut dyn core::any::Any>,
    ) -> Result<Applet, LoadError> {
        Applet::load_lending(bytes, natives, limits, &[], host)
    }

    /// [`Applet::load_with_host`], with the `byte[]` parameters the host
    /// lends declared ([`check_lending`]): each method declared lent is
    /// proved to only read its lent arrays, and every native it passes one
    /// to must be marked read-only for that parameter in `natives`
    /// ([`Natives::set_read_only`]).
    pub fn load_lending(
        bytes: &[u8],
        natives: &Natives,
        limits: Limits,
        lent: &[LentParam],
        host: Option<&mut dyn core::any::Any>,
    ) -> Result<Applet, LoadError> {
        Applet::compile_lending(bytes, natives, limits, lent)?.construct(host)
    }

    /// The first half of [`Applet::load_lending`], which needs no host:
    /// [`check_lending`], bind the natives and compile ([`Engine::Tiered`]).
    /// That is all of a load's cost but the initializers', which fuel
    /// bounds: a host that must hold its own locks while the initializers
    /// run (they call its natives) takes them only for
    /// [`Unconstructed::construct`].
    pub fn compile_lending(
        bytes: &[u8],
        natives: &Natives,
        limits: Limits,
        lent: &[LentParam],
    ) -> Result<Unconstructed, LoadError> {
        let prog = check_lending(bytes, &limits, lent)?;
        Applet::bind_on(prog, natives, limits, Engine::Tiered).map(Unconstructed)
    }

    /// Binds natives and instantiates a checked [`Program`].
    pub fn instantiate(
        prog: Program,
        natives: &Natives,
        limits: Limits,
    ) -> Result<Applet, LoadError> {
        Applet::instantiate_with_host(prog, natives, limits, None)
    }

    /// [`Applet::instantiate`] with a host value for the initializers'
    /// natives (see [`Applet::load_with_host`]).
    pub fn instantiate_with_host(
        prog: Program,
        natives: &Natives,
        limits: Limits,
        host: Option<&mut dyn core::any::Any>,
    ) -> Result<Applet, LoadError> {
        Applet::instantiate_on(prog, natives, limits, host, Engine::Tiered)
    }

    /// Instantiates on `engine`, which also runs the initializers.
    fn instantiate_on(
        prog: Program,
        natives: &Natives,
        limits: Limits,
        host: Option<&mut dyn core::any::Any>,
        engine: Engine,
    ) -> Result<Applet, LoadError> {
        Unconstructed(Applet::bind_on(prog, natives, limits, engine)?).construct(host)
    }

    /// Binds the natives and compiles on `engine`: an applet whose
    /// initializers have not run (no object yet).
    fn bind_on(
        mut prog: Program,
        natives: &Natives,
        limits: Limits,
        engine: Engine,
    ) -> Result<Applet, LoadError> {
        let mut bound = Vec::with_capacity(prog.natives.len());
        for n in &mut prog.natives {
            // A tail site's entry binds the native's tail form where the
            // table has one, else the native itself; a declared name never
            // reaches a tail form (`TAIL_SUFFIX`).
            if !n.tail && n.name.contains('#') {
                return Err(LoadError::UnknownNative {
                    name: n.name.clone(),
                    descriptor: n.descriptor.clone(),
                });
            }
            let tail = n
                .tail
                .then(|| tail_name(&n.name))
                .filter(|t| natives.get(t, &n.descriptor).is_some());
            let name = tail.as_deref().unwrap_or(&n.name);
            let fast = natives.fast(name, &n.descriptor);
            // The fast entry with the result's shape compiled in.
            let kind = match &n.ret {
                Some(FieldType::Prim(Prim::Int)) => crate::jit::FAST_INT,
                None => crate::jit::FAST_VOID,
                Some(_) => crate::jit::FAST_OTHER,
            };
            n.fast = fast.map_or(0, |f| f.entry[usize::from(kind)]);
            // The table's lender of words where it names one, so that a
            // host invoking with its value typed finds it
            // (`run_prepared_lent`).
            n.words = fast.map(|f| natives.words().unwrap_or(f.words));
            n.inline = natives.inline(name, &n.descriptor);
            match natives.get(name, &n.descriptor) {
                Some(f) => bound.push(f.clone()),
                None => {
                    return Err(LoadError::UnknownNative {
                        name: n.name.clone(),
                        descriptor: n.descriptor.clone(),
                    });
                }
            }
        }
        // After binding, so that a native the table lacks is reported as
        // unknown first.
        check_lent_natives(&prog, natives)?;
        let info = &prog.info;
        let refs = |stat: bool| -> Vec<u16> {
            info.fields
                .iter()
                .filter(|f| f.is_static == stat && f.ty.is_ref())
                .map(|f| f.slot)
                .collect()
        };
        let (static_refs, instance_refs) = (refs(true), refs(false));
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let mut applet = Applet {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            statics: vec![0; usize::from(info.static_count)].into_boxed_slice(),
            instance: 0,
            heap: Heap::new(limits.heap_bytes),
            machine: Machine::default(),
            natives: bound,
            limits,
            static_refs,
            instance_refs,
            prog,
            jit: None,
            error: None,
        };
        applet.prog.set_metering(applet.limits.fuel.is_some());
        applet.set_engine(engine)?;
        Ok(applet)
    }

    /// Runs `<clinit>` (if any), creates the applet object and runs its
    /// constructor. The two share one invocation's fuel: the constructor
    /// gets what `<clinit>` left, and runs out of the whole limit
    /// ([`TrapKind::FuelExhausted`] names it). A host that bounds an
    /// invocation's work by its fuel bounds the initializers' with it, as
    /// it bounds their time by the same budget (unet runs them under an
    /// endpoint's locks when an applet replaces another).
    fn initialize(&mut self, mut host: Option<&mut dyn core::any::Any>) -> Result<(), LoadError> {
        let mut limits = RunLimits::of(&self.limits);
        let whole = limits.fuel;
        if let Some((idx, _)) = self.prog.info.method("<clinit>") {
            let used = self.run_limited(idx, &[], host.as_deref_mut(), limits)?;
            limits.fuel = limits.fuel.saturating_sub(used.fuel_used);
        }
        let count = usize::from(self.prog.info.instance_count);
        self.instance = self
            .heap
            .alloc(heap::Object::Instance(vec![0; count]))
            .map_err(|e| Trap {
                kind: TrapKind::HeapLimitExceeded {
                    requested: e.requested,
                    in_use: e.in_use,
                    limit: e.limit,
                },
                method: "<new>".into(),
                bci: 0,
            })?;
        if let Some((idx, _)) = self.prog.info.method("<init>") {
            let this = self.instance;
            self.run_limited(idx, &[this], host, limits)
                .map_err(|mut trap| {
                    if let TrapKind::FuelExhausted(_) = trap.kind {
                        trap.kind = TrapKind::FuelExhausted(whole);
                    }
                    trap
                })?;
        }
        self.keep_context();
        Ok(())
    }

    /// Gives the compiled code the words of its context that stay from one
    /// invocation to the next ([`jit::Compiled::keep`]: the applet object's
    /// fields, the limits): called wherever one of them changes (the
    /// object made, the code compiled, the limits set), so that
    /// [`Applet::call`] writes none of them.
    fn keep_context(&mut self) {
        if let Some(jit) = self.jit.as_mut() {
            let fields = jit.fields(&mut self.heap, self.instance);
            jit.keep(
                &self.prog,
                &self.natives,
                self.statics.as_mut_ptr(),
                fields,
                RunLimits::of(&self.limits),
            );
        }
    }

    fn run(&mut self, idx: usize, args: &[i32]) -> Result<Outcome, Trap> {
        self.run_with(idx, args, None)
    }

    fn run_with(
        &mut self,
        idx: usize,
        args: &[i32],
        host: Option<&mut dyn core::any::Any>,
    ) -> Result<Outcome, Trap> {
        let limits = RunLimits::of(&self.limits);
        self.run_limited(idx, args, host, limits)
    }

    /// [`Applet::run_with`] under `limits` rather than the applet's own.
    fn run_limited(
        &mut self,
        idx: usize,
        args: &[i32],
        host: Option<&mut dyn core::any::Any>,
        limits: RunLimits,
    ) -> Result<Outcome, Trap> {
        let entry = u16::try_from(idx).unwrap_or(u16::MAX);
        let mut st = State {
            heap: &mut self.heap,
            statics: &mut self.statics,
            natives: &self.natives,
            host,
        };
        debug_assert_eq!(self.prog.metered(), self.limits.fuel.is_some());
        let r = match self.jit.as_mut() {
            Some(jit) => {
                let fields = jit.fields(st.heap, self.instance);
                jit.run(&self.prog, &mut st, fields, entry, args, limits)
            }
            None => self.machine.run(&self.prog, &mut st, entry, args, limits),
        };
        if self.heap.needs_collect() {
            self.collect();
        }
        r
    }

    fn collect(&mut self) {
        let roots: Vec<i32> = self
            .static_refs
            .iter()
            .filter_map(|&s| self.statics.get(usize::from(s)).copied())
            .chain(std::iter::once(self.instance))
            .collect();
        self.heap.collect(roots, &self.instance_refs);
    }

    /// Invokes the method `name` with int arguments (booleans, bytes and
    /// shorts are passed as ints and narrowed as the JVM would). Instance
    /// methods run on the applet object. Returns the result and the fuel used.
    ///
    /// A trap ends only this invocation: the applet stays loaded, its fields
    /// keep the values they had when the trap happened, and arrays allocated
    /// by the trapped invocation and not stored in a field are freed.
    pub fn invoke(&mut self, name: &str, args: &[i32]) -> Result<Outcome, InvokeError> {
        let (idx, m) = self.invocable(name)?;
        if m.sig.params.len() != args.len() {
            return Err(InvokeError::ArgumentCount {
                method: m.id(),
                expected: m.sig.params.len(),
                given: args.len(),
            });
        }
        let mut full = Vec::with_capacity(args.len() + 1);
        if !m.is_static {
            full.push(self.instance);
        }
        for (&p, &a) in m.sig.params.iter().zip(args) {
            full.push(match p {
                FieldType::Prim(p) => narrow(p, a),
                FieldType::Array(_) => return Err(InvokeError::NotIntArguments(m.id())),
            });
        }
        Ok(self.run(idx, &full)?)
    }

    /// The method `name`, if the host may invoke it (not native, not an
    /// initializer).
    fn invocable(&self, name: &str) -> Result<(usize, &subset::MethodInfo), InvokeError> {
        let Some((idx, m)) = self.prog.info.method(name) else {
            return Err(InvokeError::NoSuchMethod(name.to_owned()));
        };
        if m.is_native || m.name.starts_with('<') {
            return Err(InvokeError::NotInvocable(m.id()));
        }
        Ok((idx, m))
    }

    /// Resolves the method `name` once, for [`Applet::call`]: a host that
    /// invokes the same method on every packet skips the lookup by name
    /// and the argument checks that [`Applet::invoke`] repeats each time.
    pub fn method(&self, name: &str) -> Result<Method, InvokeError> {
        self.method_lending(name, None)
    }

    /// [`Applet::method`], with the parameter `lent` (a `byte[]` the
    /// caller checked, [`crate::lend`]) taking its handle as an int.
    fn method_lending(&self, name: &str, lent: Option<usize>) -> Result<Method, InvokeError> {
        let (idx, m) = self.invocable(name)?;
        let mut narrow = [narrowing(Prim::Int); Method::MAX_ARGS];
        if m.sig.params.len() > Method::MAX_ARGS {
            return Err(InvokeError::NotIntArguments(m.id()));
        }
        for (i, (n, &p)) in narrow.iter_mut().zip(&m.sig.params).enumerate() {
            *n = match p {
                FieldType::Prim(p) => narrowing(p),
                FieldType::Array(_) if lent == Some(i) => narrowing(Prim::Int),
                FieldType::Array(_) => return Err(InvokeError::NotIntArguments(m.id())),
            };
        }
        // What the JIT's entry takes on trust (`jit::Compiled::enter`): a
        // bytecode method whose argument slots are its parameters and `this`.
        let slots = m.sig.params.len() + usize::from(!m.is_static);
        let entry = u16::try_from(idx).ok().filter(|&e| {
            matches!(self.prog.funcs.get(usize::from(e)), Some(Some(f))
                if usize::from(f.arg_slots) == slots && f.max_locals >= f.arg_slots)
        });
        let Some(idx) = entry else {
            return Err(InvokeError::NotInvocable(m.id()));
        };
        Ok(Method {
            applet: self.id,
            idx,
            has_this: !m.is_static,
            returns: m.sig.ret.is_some(),
            arity: m.sig.params.len(),
            ints: narrow == [narrowing(Prim::Int); Method::MAX_ARGS],
            narrow,
        })
    }

    /// Invokes a resolved method with int arguments, giving its natives
    /// `host` ([`Context::host`]). Same semantics as [`Applet::invoke`]:
    /// a trap ends only this invocation.
    ///
    /// On the JIT the arguments go straight into the frame stack and the
    /// checks [`Applet::method`] made are not repeated. A host that needs
    /// only the value, once per message, calls [`Applet::call_value`].
    #[inline]
    pub fn call(
        &mut self,
        m: &Method,
        args: &[i32],
        host: Option<&mut dyn core::any::Any>,
    ) -> Result<Outcome, InvokeError> {
        self.check_call(m, args.len())?;
        match self.call_jit(m, args, host) {
            Ok(Ok(v)) => {
                let fuel_used = self.jit.as_ref().map_or(0, |j| j.fuel_used(&self.prog));
                Ok(Outcome {
                    value: m.returns.then_some(v),
                    fuel_used,
                })
            }
            Ok(Err(t)) => Err(InvokeError::Trap(*t)),
            Err(host) => Ok(self.call_interpreted(m, args, host)?),
        }
    }

    /// Prepares the method `name` for [`Applet::call_prepared`] with `N`
    /// int arguments: [`Applet::method`], and its arity checked against
    /// `N` once.
    pub fn prepare<const N: usize>(&self, name: &str) -> Result<Prepared<N>, InvokeError> {
        self.prepare_for(name)
    }

    /// [`Applet::prepare`] for [`Applet::run_prepared_lent`] with lender
    /// `W`: the handle's word also says whether the program finds its
    /// words through `W` (checked when the word is made, so that a call
    /// makes no compare of the lender).
    pub fn prepare_lent<W: FastNative, const N: usize>(
        &self,
        name: &str,
    ) -> Result<Prepared<N, W>, InvokeError> {
        self.prepare_for(name)
    }

    fn prepare_for<K: jit::HostKind, const N: usize>(
        &self,
        name: &str,
    ) -> Result<Prepared<N, K>, InvokeError> {
        let m = self.method(name)?;
        if m.arity != N {
            return Err(self.refuse(&m, N));
        }
        let mut p = Prepared {
            m,
            word: 0,
            kind: core::marker::PhantomData,
        };
        self.ready_again(&mut p);
        Ok(p)
    }

    /// Gives `p` the word of this applet's code as it is now, if `p` is
    /// this applet's and the JIT runs it (0 otherwise), with
    /// [`jit::LENT`] where `K` is the program's lender.
    fn ready_again<K: jit::HostKind, const N: usize>(&self, p: &mut Prepared<N, K>) {
        p.word = match &self.jit {
            Some(jit) if p.m.applet == self.id => jit.ready_word_for::<K>(p.m.idx),
            _ => 0,
        };
    }

    /// Invokes a prepared method: [`Applet::call_value`] with the checks
    /// it repeats on every call made once per change instead
    /// ([`Prepared`]). The same semantics: the value (`None` for `void`),
    /// the trap, the fuel and the effects of [`Applet::invoke`].
    ///
    /// [`Applet::run_prepared`] with the error in the result.
    #[inline]
    pub fn call_prepared<const N: usize>(
        &mut self,
        p: &mut Prepared<N>,
        args: [i32; N],
        host: Option<&mut dyn core::any::Any>,
    ) -> Result<Option<i32>, Box<InvokeError>> {
        let c = self.run_prepared(p, args, host);
        c.into_result(|| self.take_error_or_internal())
    }

    /// [`Applet::call_prepared`] with its outcome in one register
    /// ([`Called`]): the value, or that the invocation failed, its error
    /// kept in the applet for [`Applet::take_error`]. This is the host's
    /// per-message call: nothing of the outcome is written to memory and
    /// read back unless the invocation failed.
    ///
    /// Per call, on the JIT: one compare of the prepared word with the
    /// code's stamp, the arguments written to the frame stack, and the
    /// invocation (the code cache's check that the code is alive, the
    /// record's per-call words, fuel, traps and the collector as ever).
    #[inline(always)]
    pub fn run_prepared<const N: usize>(
        &mut self,
        p: &mut Prepared<N>,
        args: [i32; N],
        host: Option<&mut dyn core::any::Any>,
    ) -> Called {
        self.run_prepared_with(p, args, host, ())
    }

    /// [`Applet::run_prepared`] on a registration in the code cache that
    /// the host holds across invocations ([`jit::Runner`]), instead of
    /// the thread's, taken out of a thread-local and put back by every
    /// invocation. The same semantics and checks; the runner is borrowed
    /// for the invocation, so a native that invokes another applet
    /// cannot use it (that invocation uses the thread's registration).
    #[inline(always)]
    pub fn run_prepared_on<const N: usize>(
        &mut self,
        runner: &mut jit::Runner,
        p: &mut Prepared<N>,
        args: [i32; N],
        host: Option<&mut dyn core::any::Any>,
    ) -> Called {
        self.run_prepared_with(p, args, host, runner)
    }

    /// [`Applet::run_prepared`] with the host value typed, `W::Host`,
    /// where `W` is the lender of words the applet's natives table names
    /// ([`Natives::set_words`]): the words the inline natives use are
    /// `W::words` of the host, called directly, instead of found by
    /// checking the value's type and calling through the program's
    /// pointer. Checked when `p`'s word is made ([`Applet::prepare_lent`],
    /// and again with the others after every change): the program's
    /// lender is `W`. Where it is not (another table, or a program whose
    /// inline natives run only in constructors), the call runs as
    /// [`Applet::run_prepared`] runs an untyped handle, its words found
    /// from the value: the same outcome, at what the untyped call costs
    /// (a few instructions more: the handle's word is compared twice and
    /// the value's type checked), never the checked way's. The same
    /// semantics and checks otherwise.
    #[inline(always)]
    pub fn run_prepared_lent<W: FastNative, const N: usize>(
        &mut self,
        p: &mut Prepared<N, W>,
        args: [i32; N],
        host: &mut W::Host,
    ) -> Called {
        self.run_prepared_lent_called(p, args.map(i64::from), host)
    }

    /// [`Applet::run_prepared_lent`]'s body, out of line: a host calls it
    /// from functions that keep many values (the engine's direct delivery,
    /// where the body inlined made the path without applet longer), and
    /// [`Applet::run_prepared_lent_inlined`] where it is cheaper inlined.
    ///
    /// The arguments come widened to 8 bytes each. The array is passed in
    /// memory; as 4-byte `int`s, the caller wrote each in a store of 4
    /// bytes and this function read two at a time, a read the store buffer
    /// does not forward from two stores, which waits for both to reach the
    /// cache (docs/benchmarks.md, "Store-forwarding stalls on the applet's
    /// path"). One store and one read of 8 bytes each forward.
    #[inline(never)]
    fn run_prepared_lent_called<W: FastNative, const N: usize>(
        &mut self,
        p: &mut Prepared<N, W>,
        args: [i64; N],
        host: &mut W::Host,
    ) -> Called {
        // Each was an `i32`, widened by the caller.
        let args = args.map(|a| a as i32);
        self.run_prepared_body(p, args, jit::Lent::<W>(host), ())
    }

    /// [`Applet::run_prepared_lent`] with the invocation's body inlined
    /// into the caller, not called: the code's call clobbers `r12`–`r15`
    /// (`jit::exec::call_entry`), so the host function around it saves
    /// them; inlined, the caller's own frame (which saves them where it
    /// uses them) does, and the call, its arguments and the frame of its
    /// own are spared. For a caller whose function has the registers to
    /// spare: inlined into a function that keeps many values across the
    /// call, the body makes it spill them on its other paths too. The same
    /// semantics and checks.
    #[inline(always)]
    pub fn run_prepared_lent_inlined<W: FastNative, const N: usize>(
        &mut self,
        p: &mut Prepared<N, W>,
        args: [i32; N],
        host: &mut W::Host,
    ) -> Called {
        self.run_prepared_body(p, args, jit::Lent::<W>(host), ())
    }

    /// [`Applet::run_prepared`] on the registration `held` names
    /// ([`jit::Held`]: the host's runner, or the thread's), chosen at
    /// compile time, so that each form is the one body it was before the
    /// other shared it (with an `Option` decided per call, LLVM inlined
    /// the body into unet's receive path, and every row of its counts,
    /// path-40 included, rose).
    #[inline]
    fn run_prepared_with<'h, A: jit::HostArg<'h>, H: jit::Held, const N: usize>(
        &mut self,
        p: &mut Prepared<N, A::Kind>,
        args: [i32; N],
        host: A,
        held: H,
    ) -> Called {
        self.run_prepared_body(p, args, host, held)
    }

    /// [`Applet::run_prepared_with`]'s body, inlined into it and into
    /// [`Applet::run_prepared_lent_inlined`].
    #[inline(always)]
    fn run_prepared_body<'h, A: jit::HostArg<'h>, H: jit::Held, const N: usize>(
        &mut self,
        p: &mut Prepared<N, A::Kind>,
        args: [i32; N],
        mut host: A,
        mut held: H,
    ) -> Called {
        // A lender's handle is ready only with `jit::LENT` in its word:
        // the program's lender is the handle's, or the program reads no
        // words (no inline native), checked when the word was made.
        let lent = <A::Kind as jit::HostKind>::LENT;
        let ready = match self.jit.as_mut() {
            Some(jit) => jit.ready(p.m.idx, p.word, lent),
            None => None,
        };
        let Some(mut ready) = ready else {
            return self.run_unprepared(p, args, host, held);
        };
        p.m.fill_prepared(ready.args_mut(), self.instance, args);
        // The words a typed host lends, where the program's lender is its
        // (the word said so; `None`: found from the value,
        // `jit::host_words`).
        let words = if lent != 0 {
            debug_assert!(
                <A::Kind as jit::HostKind>::lends(ready.lender()) || ready.reads_no_words()
            );
            host.lent_words()
        } else {
            None
        };
        let mut st = State {
            heap: &mut self.heap,
            statics: &mut self.statics,
            natives: &self.natives,
            host: host.any(),
        };
        // The collector's trigger is tested on each outcome's own way, so
        // that the common one tests the outcome once.
        match ready.enter(&self.prog, &mut st, held.runner(), words) {
            Ok(v) => {
                if self.heap.needs_collect() {
                    self.collect();
                }
                Called {
                    value: v,
                    kind: u32::from(p.m.returns),
                }
            }
            // The failure is the constant here, not `not_returned`'s
            // result, so that a caller inlining this body sees its value
            // word (`i32::MIN`, [`Called::returned_non_negative`]).
            Err(status) => {
                self.not_returned(status);
                Called::FAILURE
            }
        }
    }

    /// A prepared invocation that did not return normally
    /// ([`Applet::run_prepared`]): its trap made from `status`
    /// ([`jit::Compiled::trap_of`]) and kept, the collector's trigger
    /// tested. Out of line, from `self` alone, so that the common
    /// invocation keeps nothing (the program's address) across the code's
    /// call for it. The caller returns the failure ([`Called::FAILED`]).
    #[cold]
    #[inline(never)]
    fn not_returned(&mut self, status: jit::NotReturned) {
        let t = match self.jit.as_mut() {
            Some(jit) => jit.trap_of(&self.prog, status),
            // Not reached: the status came from this applet's compiled code.
            None => Box::new(Trap {
                kind: crate::interpreter::internal("a JIT status without compiled code"),
                method: String::new(),
                bci: 0,
            }),
        };
        if self.heap.needs_collect() {
            self.collect();
        }
        self.error = Some(trapped(*t));
    }

    /// Why the last [`Applet::run_prepared`] that failed failed, taken
    /// (`None` if none has failed since the last taking).
    pub fn take_error(&mut self) -> Option<Box<InvokeError>> {
        self.error.take()
    }

    /// [`Applet::take_error`] after a failure: the error is there.
    #[cold]
    #[inline(never)]
    fn take_error_or_internal(&mut self) -> Box<InvokeError> {
        self.error.take().unwrap_or_else(|| {
            Box::new(InvokeError::Trap(Trap {
                kind: crate::interpreter::internal("a failed invocation left no error"),
                method: String::new(),
                bci: 0,
            }))
        })
    }

    /// A failed [`Applet::run_prepared`]: `e` kept for
    /// [`Applet::take_error`].
    #[cold]
    #[inline(never)]
    fn failed(&mut self, e: Box<InvokeError>) -> Called {
        self.error = Some(e);
        Called::FAILURE
    }

    /// [`Applet::run_prepared`] with a word that does not match: the
    /// checked call, then the word made again for the next.
    ///
    /// A lender's handle whose word is current but without [`jit::LENT`]
    /// (the program's lender is another, or it has none: an applet whose
    /// inline natives run only in its constructors) is not stale: it runs
    /// the prepared way as an untyped handle, its words found from the
    /// value ([`Applet::run_prepared`]), at what such a handle costs, and
    /// its word stays as it is.
    #[cold]
    #[inline(never)]
    fn run_unprepared<'h, A: jit::HostArg<'h>, H: jit::Held, const N: usize>(
        &mut self,
        p: &mut Prepared<N, A::Kind>,
        args: [i32; N],
        host: A,
        held: H,
    ) -> Called {
        if <A::Kind as jit::HostKind>::LENT != 0
            && self
                .jit
                .as_mut()
                .is_some_and(|jit| jit.ready(p.m.idx, p.word, 0).is_some())
        {
            let mut untyped = Prepared::<N> {
                m: p.m,
                word: p.word,
                kind: core::marker::PhantomData,
            };
            return self.run_prepared_with(&mut untyped, args, host.any(), held);
        }
        #[cfg(test)]
        tests::CHECKED.with(|c| c.set(c.get() + 1));
        let r = self.call_value(&p.m, &args, host.any());
        self.ready_again(p);
        match r {
            Ok(v) => Called {
                value: v.unwrap_or(0),
                kind: if v.is_some() {
                    Called::VALUE
                } else {
                    Called::VOID
                },
            },
            Err(e) => self.failed(e),
        }
    }

    /// [`Applet::call`] without the fuel count: the method's value (`None`
    /// for `void`), or why the invocation failed. This is the host's
    /// per-message call: both outcomes fit two registers, so the common
    /// one comes back without a `Result` written to memory and read again
    /// (the error, rare, is boxed).
    #[inline]
    pub fn call_value(
        &mut self,
        m: &Method,
        args: &[i32],
        host: Option<&mut dyn core::any::Any>,
    ) -> Result<Option<i32>, Box<InvokeError>> {
        if args.len() != m.arity || m.applet != self.id {
            return Err(Box::new(self.refuse(m, args.len())));
        }
        match self.call_jit(m, args, host) {
            Ok(Ok(v)) => Ok(m.returns.then_some(v)),
            Ok(Err(t)) => Err(trapped(*t)),
            Err(host) => match self.call_interpreted(m, args, host) {
                Ok(o) => Ok(o.value),
                Err(t) => Err(Box::new(t.into())),
            },
        }
    }

    /// [`Applet::call`] on the JIT, the arguments checked: the value the
    /// method returned (for a `void` method, whatever the code left there:
    /// the callers read it only where `m.returns`) or its trap;
    /// `Err(host)` if the interpreter runs this applet.
    #[inline(always)]
    fn call_jit<'h>(
        &mut self,
        m: &Method,
        args: &[i32],
        host: Option<&'h mut dyn core::any::Any>,
    ) -> Result<Result<i32, Box<Trap>>, Option<&'h mut dyn core::any::Any>> {
        let Some(jit) = self.jit.as_mut() else {
            return Err(host);
        };
        m.fill_args(jit.args_mut(), self.instance, args);
        let mut st = State {
            heap: &mut self.heap,
            statics: &mut self.statics,
            natives: &self.natives,
            host,
        };
        // The applet object's fields, the limits and the table of
        // enterable methods are in `jit` already (`Applet::keep_context`).
        let r = jit.enter(&self.prog, &mut st, m.idx);
        if self.heap.needs_collect() {
            self.collect();
        }
        Ok(r)
    }

    /// [`Applet::call`] on the interpreter, the arguments checked.
    fn call_interpreted(
        &mut self,
        m: &Method,
        args: &[i32],
        host: Option<&mut dyn core::any::Any>,
    ) -> Result<Outcome, Trap> {
        let mut full = [0i32; Method::MAX_ARGS + 1];
        let n = m.fill_args(&mut full, self.instance, args);
        self.run_with(usize::from(m.idx), &full[..n], host)
    }

    /// Whether [`Applet::call`] takes `m` with `given` arguments: the
    /// error it would return, for a host that checks before it does
    /// anything else (`fastpath applet run` refuses before any output).
    #[inline]
    pub fn check_call(&self, m: &Method, given: usize) -> Result<(), InvokeError> {
        if given != m.arity || m.applet != self.id {
            return Err(self.refuse(m, given));
        }
        Ok(())
    }

    /// Why [`Applet::call`] refuses `m` with `given` arguments.
    #[cold]
    #[inline(never)]
    fn refuse(&self, m: &Method, given: usize) -> InvokeError {
        if m.applet != self.id {
            return InvokeError::ForeignMethod;
        }
        InvokeError::ArgumentCount {
            method: self.prog.info.methods[usize::from(m.idx)].id(),
            expected: m.arity,
            given,
        }
    }

    /// Resolves a static `byte[]` field (e.g. `RxBuf`) once, for
    /// [`Applet::static_bytes_mut`].
    pub fn static_bytes_field(&self, name: &str) -> Result<StaticBytes, InvokeError> {
        self.static_slot(name, FieldType::Array(Prim::Byte), "byte[]")
            .map(|slot| StaticBytes {
                slot,
                view: heap::BytesView::default(),
            })
    }

    /// The `byte[]` a static field refers to, to fill in place (the
    /// U-Net/SLE host writes each arriving packet into `RxBuf` this way
    /// instead of allocating a new array). `None` if the field is null.
    ///
    /// Found through `field`'s view of the array ([`StaticBytes`]): the
    /// field's handle and the heap's generation compared with the view's,
    /// and looked up only when either changed (the applet stored another
    /// array or null, or a collection freed an object), which fills the
    /// view again.
    #[inline(always)]
    pub fn static_bytes_mut(&mut self, field: &mut StaticBytes) -> Option<&mut [i8]> {
        let h = *self.statics.get(field.slot)?;
        self.heap.bytes_viewed(&mut field.view, h)
    }

    /// [`Applet::static_bytes_mut`] where `field`'s view of the array is
    /// current, without the heap's look-up: `None` where it is not (the
    /// field holds another handle or null, or the heap freed an object
    /// since), for a host that then calls [`Applet::static_bytes_mut`]
    /// out of line. The common way is the two compares alone, with no
    /// test of a look-up's `Option` after them.
    #[inline(always)]
    pub fn static_bytes_if_viewed(&mut self, field: &StaticBytes) -> Option<&mut [i8]> {
        let h = *self.statics.get(field.slot)?;
        self.heap.bytes_if_viewed(&field.view, h)
    }

    fn static_slot(
        &self,
        name: &str,
        ty: FieldType,
        expected: &'static str,
    ) -> Result<usize, InvokeError> {
        match self.prog.info.field_named(name) {
            Some(f) if f.is_static && f.ty == ty => Ok(usize::from(f.slot)),
            _ => Err(InvokeError::NoSuchField {
                name: name.to_owned(),
                expected,
            }),
        }
    }

    /// Stores a new `byte[]` holding a copy of `data` into the static field
    /// `name` (of type `byte[]`), as the U-Net/SLE host does with `RxBuf`.
    /// The array counts against the heap budget; the previous array, if no
    /// longer referenced, is freed.
    pub fn set_static_array(&mut self, name: &str, data: &[u8]) -> Result<(), InvokeError> {
        let slot = self.static_slot(name, FieldType::Array(Prim::Byte), "byte[]")?;
        let h = self
            .heap
            .alloc(heap::Object::Bytes(data.iter().map(|&b| b as i8).collect()))
            .map_err(|e| Trap {
                kind: TrapKind::HeapLimitExceeded {
                    requested: e.requested,
                    in_use: e.in_use,
                    limit: e.limit,
                },
                method: format!("<host: set {name}>"),
                bci: 0,
            })?;
        self.statics[slot] = h;
        self.collect();
        Ok(())
    }

    /// Stores a new `int[]` holding a copy of `data` into the static field `name`.
    pub fn set_static_int_array(&mut self, name: &str, data: &[i32]) -> Result<(), InvokeError> {
        let slot = self.static_slot(name, FieldType::Array(Prim::Int), "int[]")?;
        let h = self
            .heap
            .alloc(heap::Object::Ints(data.to_vec()))
            .map_err(|e| Trap {
                kind: TrapKind::HeapLimitExceeded {
                    requested: e.requested,
                    in_use: e.in_use,
                    limit: e.limit,
                },
                method: format!("<host: set {name}>"),
                bci: 0,
            })?;
        self.statics[slot] = h;
        self.collect();
        Ok(())
    }

    /// The value of an `int`, `short`, `byte` or `boolean` static field.
    pub fn static_int(&self, name: &str) -> Result<i32, InvokeError> {
        match self.prog.info.field_named(name) {
            Some(f) if f.is_static && !f.ty.is_ref() => Ok(self.statics[usize::from(f.slot)]),
            _ => Err(InvokeError::NoSuchField {
                name: name.to_owned(),
                expected: "int",
            }),
        }
    }

    /// Sets an `int` static field.
    pub fn set_static_int(&mut self, name: &str, value: i32) -> Result<(), InvokeError> {
        let slot = self.static_slot(name, FieldType::Prim(Prim::Int), "int")?;
        self.statics[slot] = value;
        Ok(())
    }

    /// The array a static field refers to (`None` if null or not an array field).
    pub fn static_array(&self, name: &str) -> Option<&Object> {
        let f = self
            .prog
            .info
            .field_named(name)
            .filter(|f| f.is_static && f.ty.is_ref())?;
        self.heap.get(self.statics[usize::from(f.slot)])
    }

    /// The object behind a handle (e.g. an array an invocation returned).
    pub fn object(&self, handle: i32) -> Option<&Object> {
        self.heap.get(handle)
    }

    /// The decoded program.
    pub fn program(&self) -> &Program {
        &self.prog
    }

    /// Whether one of the program's natives has the inline form `form`
    /// ([`Natives::set_inline`]): known at load, so that a host lends the
    /// words a form uses (e.g. a ring's run, [`RingWords`]) only to
    /// applets that can use them.
    pub fn has_inline(&self, form: InlineForm) -> bool {
        self.prog.natives.iter().any(|n| n.inline == Some(form))
    }

    /// The applet's heap (for inspection: bytes in use, object count).
    pub fn heap(&self) -> &Heap {
        &self.heap
    }

    /// The limits the applet runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// [`Applet::load`] with a choice of engine. With [`Engine::Jit`], a class
    /// the JIT cannot compile is a [`LoadError::Jit`]; with
    /// [`Engine::Tiered`] (what `load` uses) it runs on the interpreter.
    pub fn load_with_engine(
        bytes: &[u8],
        natives: &Natives,
        limits: Limits,
        engine: Engine,
    ) -> Result<Applet, LoadError> {
        let prog = check(bytes, &limits)?;
        Applet::instantiate_on(prog, natives, limits, None, engine)
    }

    /// Switches the engine for later invocations. [`Engine::Jit`] fails if
    /// the JIT cannot compile this applet (the applet keeps its engine);
    /// [`Engine::Tiered`] never fails.
    pub fn set_engine(&mut self, engine: Engine) -> Result<(), JitError> {
        match engine {
            Engine::Interpreter => self.jit = None,
            Engine::Jit => self.jit = Some(self.compile()?),
            Engine::Tiered => self.jit = self.compile().ok(),
        }
        self.keep_context();
        Ok(())
    }

    fn compile(&self) -> Result<jit::Compiled, JitError> {
        if self.limits.max_call_depth > jit::MAX_CALL_DEPTH {
            return Err(JitError::CallDepth {
                class: self.prog.info.name.clone(),
                requested: self.limits.max_call_depth,
                limit: jit::MAX_CALL_DEPTH,
            });
        }
        jit::compile(&self.prog)
    }

    /// The most memory this applet holds, about: its decoded program
    /// ([`Program::memory_bytes`]), its heap's budget, its statics and its
    /// frame stacks (the interpreter's, and the JIT's if it runs there).
    /// Its machine code is not counted: applets of one class share it
    /// ([`Applet::code`]).
    pub fn memory_bytes(&self) -> usize {
        let slots = crate::interpreter::STACK_SLOTS * core::mem::size_of::<i32>();
        // An unlimited heap (`u64::MAX`) is counted as all there is.
        let heap = usize::try_from(self.limits.heap_bytes).unwrap_or(usize::MAX);
        (self.prog.memory_bytes()
            + self.statics.len() * core::mem::size_of::<i32>()
            + slots
            + if self.jit.is_some() { slots } else { 0 })
        .saturating_add(heap)
    }

    /// The machine code this applet runs, `None` on the interpreter.
    pub fn code(&self) -> Option<CodeShare> {
        self.jit.as_ref().map(jit::Compiled::code)
    }

    /// The engine that runs this applet's invocations:
    /// [`Engine::Interpreter`] or [`Engine::Jit`].
    pub fn engine(&self) -> Engine {
        if self.jit.is_some() {
            Engine::Jit
        } else {
            Engine::Interpreter
        }
    }

    /// The generated machine code with each bytecode's offset beside its
    /// instructions, if the JIT runs this applet.
    pub fn native_listing(&self) -> Option<String> {
        self.jit.as_ref()?.listing()
    }

    /// Changes the run-time limits (fuel, call depth) for later invocations.
    /// The heap budget stays as it was at load.
    ///
    /// On the JIT, a change of metering recompiles the applet (metered and
    /// unmetered code differ), and a call-depth limit above
    /// [`jit::MAX_CALL_DEPTH`] moves it to the interpreter.
    pub fn set_run_limits(&mut self, fuel: Option<u64>, max_call_depth: u32) {
        let remeter = self.prog.metered() != fuel.is_some();
        self.limits.fuel = fuel;
        self.prog.set_metering(fuel.is_some());
        self.limits.max_call_depth = max_call_depth;
        if self.jit.is_some() && (remeter || max_call_depth > jit::MAX_CALL_DEPTH) {
            self.jit = None;
            self.jit = self.compile().ok();
        }
        self.keep_context();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    std::thread_local! {
        /// The calls of a prepared handle that took the checked way
        /// (`Applet::run_unprepared`'s `call_value`) on this thread.
        pub(super) static CHECKED: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
    }

    /// A lender of no words, of a host type no program here uses.
    struct Unused;

    impl FastNative for Unused {
        type Host = u32;
        fn call(_: &mut u32, _: Arrays<'_>, _: &[i32]) -> Option<Result<i32, NativeError>> {
            None
        }
    }

    /// A lender's handle on a program with no lender (no inline natives)
    /// runs the typed prepared way: the program reads no words, so its
    /// word has `jit::LENT` whatever the lender (before, it ran as an
    /// untyped handle, through the cold detour of `run_unprepared`), and
    /// no call but the first after a change of the code takes the checked
    /// way.
    #[test]
    fn a_lenders_handle_on_a_program_of_no_lender_takes_the_prepared_way() {
        let (Some(dir), true) = (APPLET_CLASSES, jit::available()) else {
            return;
        };
        let path = std::path::Path::new(dir).join("default/Counter.class");
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // Counter's natives, none of them inline.
        let natives = Natives::new()
            .with("hostAdd", "(II)I", |_, a| Ok(a[0].wrapping_add(a[1])))
            .with("fill", "([BI)V", |_, _| Ok(0))
            .with("makeInts", "(I)[I", |_, _| Ok(0));
        let mut a =
            Applet::load_with_engine(&bytes, &natives, Limits::default(), Engine::Jit).unwrap();
        let mut bump = a.prepare_lent::<Unused, 1>("bump").unwrap();
        assert_ne!(bump.word, 0, "the JIT runs it");
        assert_ne!(
            bump.word & jit::LENT,
            0,
            "no inline native: any lender's handle is typed"
        );
        // The untyped handle's word stays without the bit.
        let untyped = a.prepare::<1>("bump").unwrap();
        assert_eq!(untyped.word & jit::LENT, 0, "the untyped handle");
        let mut host = 0u32;
        CHECKED.with(|c| c.set(0));
        for want in 6..=8 {
            let c = a.run_prepared_lent(&mut bump, [1], &mut host);
            assert_eq!(c.value(), Some(want));
        }
        assert_eq!(
            CHECKED.with(|c| c.get()),
            0,
            "a checked call before a change"
        );
        // A new stamp: one checked call makes the word again, and the
        // next calls are prepared again.
        a.set_run_limits(Some(1 << 20), 64);
        for want in 9..=11 {
            let c = a.run_prepared_lent(&mut bump, [1], &mut host);
            assert_eq!(c.value(), Some(want));
        }
        assert_eq!(CHECKED.with(|c| c.get()), 1, "checked calls after a change");
    }

    /// `may_be_negative` never says no where `value` is negative, for
    /// every kind and a spread of values (a `void` method's leftover
    /// among them).
    #[test]
    fn a_negative_value_is_never_screened_out() {
        for kind in [Called::VOID, Called::VALUE, Called::FAILED] {
            for value in [i32::MIN, -41, -1, 0, 1, i32::MAX] {
                let c = Called { value, kind };
                if c.value().is_some_and(|v| v < 0) {
                    assert!(c.may_be_negative(), "{c:?}");
                }
                if !c.may_be_negative() {
                    assert!(c.value().is_none_or(|v| v >= 0), "{c:?}");
                }
            }
        }
    }

    /// `returned_non_negative` says yes only where the method returned and
    /// its value is not negative, for both kinds of return and a spread of
    /// values; a failed invocation (`Called::FAILURE`, what every failing way
    /// returns) is screened out by its value word alone.
    #[test]
    fn only_a_returned_non_negative_outcome_passes_the_screen() {
        for kind in [Called::VOID, Called::VALUE] {
            for value in [i32::MIN, -41, -1, 0, 1, i32::MAX] {
                let c = Called { value, kind };
                if c.returned_non_negative() {
                    assert!(c.is_ok(), "{c:?}");
                    assert!(c.value().is_none_or(|v| v >= 0), "{c:?}");
                }
            }
        }
        assert!(!Called::FAILURE.is_ok());
        assert!(!Called::FAILURE.returned_non_negative());
        assert!(Called::FAILURE.may_be_negative());
    }

    #[test]
    fn the_branch_free_narrowing_agrees_with_the_jvms() {
        let values = [
            0,
            1,
            -1,
            2,
            127,
            128,
            255,
            256,
            300,
            -129,
            32_767,
            32_768,
            65_535,
            i32::MAX,
            i32::MIN,
            0x1234_5678,
        ];
        for p in [Prim::Boolean, Prim::Byte, Prim::Short, Prim::Int] {
            let (mask, shift) = narrowing(p);
            for a in values {
                assert_eq!(((a & mask) << shift) >> shift, narrow(p, a), "{p:?} {a}");
            }
        }
    }
}
