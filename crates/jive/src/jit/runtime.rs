//! The invocation context and the runtime calls generated code makes:
//! `Ctx` at fixed offsets, and the `extern "C"` functions for allocation
//! and natives, with the `unsafe` of reaching the Rust side from a context
//! pointer.

use super::*;

/// What generated code reads and writes of the invocation, at fixed offsets.
#[repr(C)]
pub(super) struct Ctx {
    /// Base of the frame stack (`STACK_SLOTS` slots).
    pub(super) frames: *mut i32,
    /// One past its end.
    pub(super) frames_end: *mut i32,
    /// Static fields.
    pub(super) statics: *mut i32,
    /// The applet object's fields.
    pub(super) fields: *mut i32,
    /// The heap directory; runtime calls refresh it.
    pub(super) dir: *const u8,
    /// The fuel left, written by the code at every exit (its returns to
    /// the host and its trap exit) for `Compiled::fuel_used`; the code
    /// starts from [`Ctx::fuel_start`], not from this.
    pub(super) fuel: u64,
    /// The call-depth limit.
    pub(super) max_depth: i64,
    /// Values a trap reports (see [`SiteKind`]).
    pub(super) trap: [i64; 3],
    /// The fuel every invocation starts with (`RunLimits::fuel`), which
    /// the code loads at its entry: written by `Compiled::keep` with the
    /// limits, so that an invocation writes no fuel word.
    pub(super) fuel_start: u64,
    /// The last host value a fast native found to be of its host type
    /// ([`rt_native_fast`]), kept from one invocation to the next: a host
    /// value with the same address and vtable is of that type too. Never
    /// dereferenced through this copy.
    pub(super) host_seen: *const dyn core::any::Any,
    /// The [`HostWords`] the invocation's host value lends the inline
    /// natives ([`crate::Natives::set_inline`]), or [`NO_WORDS`] (never
    /// null): the one word `Compiled::enter` writes for them, per
    /// invocation ([`host_words`]). Generated code reads it at each
    /// inline native without a null test: `NO_WORDS`' budget check fails,
    /// so every call takes the rare path before it writes anything. Every
    /// runtime call that reborrows the host writes it again: a fast entry
    /// with the words from its own borrow ([`rt_native_fast`]), an
    /// ordinary native with `NO_WORDS`, so that
    /// generated code only ever uses words taken from the latest borrow of
    /// the host, and only while it lives (this invocation).
    pub(super) words: *mut HostWords,
    /// How `Compiled::enter` finds those words in a host value, where the
    /// code calls an inline native from a method other than a constructor
    /// (fixed at compile time); `None` where it does not, and the first
    /// inline call of an invocation takes the rare path instead.
    pub(super) words_of: Option<WordsFn>,
}

impl Ctx {
    /// The context of an applet whose frame stack is `frames`
    /// (`STACK_SLOTS` slots, owned by the same `Compiled`, whose heap
    /// allocation never moves): its bounds set for good, the statics, the
    /// fields, the depth limit and the natives written by
    /// `Compiled::keep` (with the fuel each invocation starts with), the
    /// directory and the host's words by each invocation before it runs.
    pub(super) fn new(frames: &mut [i32], words_of: Option<WordsFn>) -> Ctx {
        debug_assert_eq!(frames.len(), STACK_SLOTS);
        let range = frames.as_mut_ptr_range();
        Ctx {
            frames: range.start,
            frames_end: range.end,
            statics: core::ptr::null_mut(),
            fields: core::ptr::null_mut(),
            dir: core::ptr::null(),
            fuel: 0,
            max_depth: 0,
            trap: [0; 3],
            fuel_start: 0,
            host_seen: core::ptr::null::<()>() as *const dyn core::any::Any,
            words: no_words(),
            words_of,
        }
    }
}

/// The words of an invocation whose host lends none ([`HostWords::NONE`]):
/// every inline native's budget check fails on them, so it takes its rare
/// path. Immutable (no interior mutability: the static is read-only
/// memory), and generated code never writes them: every form's stores
/// come after its budget check.
static NO_WORDS: HostWords = HostWords::NONE;

/// [`NO_WORDS`]' address, for [`Ctx::words`]: generated code only reads
/// through it (see there).
#[inline(always)]
pub(super) fn no_words() -> *mut HostWords {
    core::ptr::addr_of!(NO_WORDS).cast_mut()
}

/// The words `w` lends, or [`NO_WORDS`] where it lends none.
#[inline(always)]
fn lent(w: Option<&mut HostWords>) -> *mut HostWords {
    w.map_or(no_words(), |w| w as *mut HostWords)
}

pub(super) const C_FRAMES: i64 = 0;
pub(super) const C_FRAMES_END: i64 = 8;
pub(super) const C_STATICS: i64 = 16;
pub(super) const C_FIELDS: i64 = 24;
pub(super) const C_DIR: i64 = 32;
pub(super) const C_FUEL: i64 = 40;
pub(super) const C_MAX_DEPTH: i64 = 48;
pub(super) const C_TRAP: i64 = core::mem::offset_of!(Ctx, trap) as i64;
pub(super) const C_FUEL_START: i64 = core::mem::offset_of!(Ctx, fuel_start) as i64;
pub(super) const C_WORDS: i64 = core::mem::offset_of!(Ctx, words) as i64;
/// [`HostWords`]' fields, for inline natives.
pub(super) const W_WORK: i64 = core::mem::offset_of!(HostWords, work) as i64;
pub(super) const W_BOUND: i64 = core::mem::offset_of!(HostWords, bound) as i64;
pub(super) const W_INTS: i64 = core::mem::offset_of!(HostWords, ints) as i64;
/// [`crate::RingWords`]' fields, for the inline push.
pub(super) const W_RING_NEXT: i64 = crate::natives::RING_NEXT as i64;
pub(super) const W_RING_LIMIT: i64 = crate::natives::RING_LIMIT as i64;
pub(super) const W_RING_BASE: i64 = crate::natives::RING_BASE as i64;
pub(super) const W_RING_ROOM: i64 = crate::natives::RING_ROOM as i64;
/// [`crate::QueueWords`]' fields, for the inline pop.
pub(super) const W_QUEUE_NEXT: i64 = crate::natives::QUEUE_NEXT as i64;
pub(super) const W_QUEUE_LIMIT: i64 = crate::natives::QUEUE_LIMIT as i64;
pub(super) const W_QUEUE_BASE: i64 = crate::natives::QUEUE_BASE as i64;
pub(super) const W_QUEUE_AVAIL: i64 = crate::natives::QUEUE_AVAIL as i64;
pub(super) const W_QUEUE_BELOW: i64 = crate::natives::QUEUE_BELOW as i64;
pub(super) const W_QUEUE_ALIGN: i64 = crate::natives::QUEUE_ALIGN as i64;
/// [`crate::AreaWords`]' fields, for the inline copies.
pub(super) const W_AREA_BASE: i64 = crate::natives::AREA_BASE as i64;
pub(super) const W_AREA_LEN: i64 = crate::natives::AREA_LEN as i64;
/// [`crate::TailWords`]' fields, for the inline tail push.
pub(super) const W_TAIL_CHAN: i64 = crate::natives::TAIL_CHAN as i64;
pub(super) const W_TAIL_FRAMES: i64 = crate::natives::TAIL_FRAMES as i64;
pub(super) const W_TAIL_MAX_FRAMES: i64 = crate::natives::TAIL_MAX_FRAMES as i64;
pub(super) const W_TAIL_BYTES: i64 = crate::natives::TAIL_BYTES as i64;
pub(super) const W_TAIL_MAX_BYTES: i64 = crate::natives::TAIL_MAX_BYTES as i64;
pub(super) const W_TAIL_MAX_MESSAGE: i64 = crate::natives::TAIL_MAX_MESSAGE as i64;
pub(super) const W_TAIL_ARRAY: i64 = crate::natives::TAIL_ARRAY as i64;
pub(super) const W_TAIL_OFF: i64 = crate::natives::TAIL_OFF as i64;
pub(super) const W_TAIL_LEN: i64 = crate::natives::TAIL_LEN as i64;
/// [`crate::FrameWords`]' fields, for the eager inline tail push.
pub(super) const W_FRAME_AT: i64 = crate::natives::FRAME_AT as i64;
pub(super) const W_FRAME_ROOM: i64 = crate::natives::FRAME_ROOM as i64;
pub(super) const W_FRAME_TEMPLATE: i64 = crate::natives::FRAME_TEMPLATE as i64;
pub(super) const W_FRAME_SUM: i64 = crate::natives::FRAME_SUM as i64;
pub(super) const W_FRAME_WROTE: i64 = crate::natives::FRAME_WROTE as i64;

/// How to find a host value's [`HostWords`] for fast form `F`
/// ([`words_entry`]): `checked` tests the value's type first; `typed` is for
/// a value known to be an `F::Host`. Compared and hashed by address (as the
/// program's declarations, which hold it, are for the code cache's key).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WordsFn {
    checked: fn(&mut dyn core::any::Any) -> Option<*mut HostWords>,
    typed: unsafe fn(*mut ()) -> *mut HostWords,
    /// The fast form `F` they call `F::words` of: what a typed host's
    /// lender is compared with ([`Lent`]).
    pub(super) lender: core::any::TypeId,
}

impl PartialEq for WordsFn {
    fn eq(&self, other: &WordsFn) -> bool {
        self.checked as usize == other.checked as usize
            && self.typed as usize == other.typed as usize
            && self.lender == other.lender
    }
}

impl Eq for WordsFn {}

impl core::hash::Hash for WordsFn {
    fn hash<H: core::hash::Hasher>(&self, h: &mut H) {
        (self.checked as usize).hash(h);
        (self.typed as usize).hash(h);
        self.lender.hash(h);
    }
}

/// The words host value `host` lends the inline natives, for
/// [`Ctx::words`] at the start of an invocation: [`NO_WORDS`] where the context
/// has no `words_of` (the code calls its inline natives from constructors
/// only, or has none: their first call in an invocation takes the rare
/// path, whose fast entry takes the words), where the invocation has no
/// host value, or where the host lends none.
///
/// A host value equal to the last one found to be of the fast forms' host
/// type ([`Ctx::host_seen`]) costs a compare and a direct call of the
/// typed function; another is checked once ([`host_words_new`]).
#[inline]
pub(super) fn host_words(ctx: &mut Ctx, host: Option<&mut dyn core::any::Any>) -> *mut HostWords {
    let (Some(f), Some(host)) = (ctx.words_of, host) else {
        return no_words();
    };
    let host: *mut dyn core::any::Any = host;
    if !core::ptr::eq(host, ctx.host_seen) {
        return host_words_new(ctx, f, host);
    }
    // SAFETY: `host` has the address and vtable of `host_seen`, which is
    // stored only after its vtable's `type_id` was found to be the fast
    // forms' host type (`fast_host_new`, `host_words_new`), the type that
    // `f` (a `words_of` of one of this program's fast forms, all for one
    // host type: `Natives::set_fast`) casts to. `host` comes from the
    // invocation's `&mut dyn Any`, valid and unaliased for this call.
    unsafe { (f.typed)(host.cast()) }
}

/// [`host_words`] for a host value other than the last seen: its type is
/// checked, and a value of the fast forms' host type remembered.
#[cold]
#[inline(never)]
fn host_words_new(ctx: &mut Ctx, f: WordsFn, host: *mut dyn core::any::Any) -> *mut HostWords {
    // SAFETY: `host` was made from the invocation's `&mut dyn Any` just
    // before, and nothing else uses that borrow meanwhile.
    match (f.checked)(unsafe { &mut *host }) {
        Some(w) => {
            ctx.host_seen = host;
            w
        }
        None => no_words(),
    }
}

/// The [`HostWords`] of `host` if it is fast form `F`'s host type (`None`
/// if it is not; [`NO_WORDS`] if it is and lends none).
fn words_checked<F: FastNative>(host: &mut dyn core::any::Any) -> Option<*mut HostWords> {
    let h = host.downcast_mut::<F::Host>()?;
    Some(lent(F::words(h)))
}

/// The [`HostWords`] of `host`, an `F::Host`.
///
/// # Safety
///
/// `host` points to a live `F::Host`, borrowed by no one else for the
/// call.
unsafe fn words_typed<F: FastNative>(host: *mut ()) -> *mut HostWords {
    // SAFETY: as the caller promises.
    let h = unsafe { &mut *host.cast::<F::Host>() };
    lent(F::words(h))
}

/// The words functions of fast form `F`, which [`crate::Natives::set_fast`]
/// records beside its entry.
pub(crate) fn words_entry<F: FastNative>() -> WordsFn {
    WordsFn {
        checked: words_checked::<F>,
        typed: words_typed::<F>,
        lender: core::any::TypeId::of::<F>(),
    }
}

/// The host value of an invocation, as a type
/// ([`crate::Applet::run_prepared_lent`]): untyped
/// (`Option<&mut dyn Any>`, whose words [`host_words`] finds by checking
/// its type) or typed by a lender of words ([`Lent`]).
pub(crate) trait HostArg<'h> {
    /// What a [`crate::Prepared`] used with this host is prepared for
    /// (`()`: an untyped host; the lender `W`: `Lent<W>`).
    type Kind: HostKind;
    /// The words the host lends the inline natives: called only where
    /// the prepared word carries [`LENT`], which
    /// `Compiled::ready_word_for::<Self::Kind>` sets only where the
    /// program's lender is `Self::Kind` (`None`: found from the untyped
    /// value, [`host_words`]).
    fn lent_words(&mut self) -> Option<*mut HostWords>;
    /// The value, untyped, for the natives and the runtime calls.
    fn any(self) -> Option<&'h mut dyn core::any::Any>;
}

/// What a [`crate::Prepared`] is prepared for: an untyped host (`()`),
/// or the typed host of a lender of words (`W`, a [`FastNative`]). Its
/// word carries [`LENT`] only for a lender, and only while the program's
/// lender is that one: the check of the lender made once per change of
/// the code (when the word is made) instead of once per call.
pub(crate) trait HostKind {
    /// [`LENT`] for a lender, 0 for the untyped host: the bit a prepared
    /// word of this kind has where the lender matched.
    const LENT: u64;
    /// Whether the program whose lender is `lender` (`Compiled::lender`)
    /// finds its words through this kind's lender.
    fn lends(lender: core::any::TypeId) -> bool;
}

impl HostKind for () {
    const LENT: u64 = 0;
    #[inline]
    fn lends(_: core::any::TypeId) -> bool {
        false
    }
}

impl<W: FastNative> HostKind for W {
    const LENT: u64 = LENT;
    /// `lender` is the program's `words_of`'s (no program without one has
    /// a `FastNative` as its `lender`), so a match is the check that
    /// `words_of` is `W`'s.
    #[inline]
    fn lends(lender: core::any::TypeId) -> bool {
        lender == core::any::TypeId::of::<W>()
    }
}

/// The bit of a prepared word that says the program's lender of words is
/// the one the [`crate::Prepared`] was typed by ([`HostKind`]): bit 16,
/// above the entry and below the stamp (`Compiled::stamp`, whose low 17
/// bits are clear).
pub(crate) const LENT: u64 = 1 << 16;

impl<'h> HostArg<'h> for Option<&'h mut dyn core::any::Any> {
    type Kind = ();

    #[inline(always)]
    fn lent_words(&mut self) -> Option<*mut HostWords> {
        None
    }

    #[inline(always)]
    fn any(self) -> Option<&'h mut dyn core::any::Any> {
        self
    }
}

/// A host value typed by the fast form `W` that lends its words
/// ([`crate::Natives::set_words`]).
pub(crate) struct Lent<'h, W: FastNative>(pub(crate) &'h mut W::Host);

impl<'h, W: FastNative> HostArg<'h> for Lent<'h, W> {
    type Kind = W;

    /// `W::words` of the value, called directly: the caller found the
    /// prepared word with [`LENT`], so the program finds its words
    /// through `W` (checked when the word was made, `HostKind::lends`);
    /// no check of the value's type is needed, it is `W::Host` by its
    /// type.
    #[inline(always)]
    fn lent_words(&mut self) -> Option<*mut HostWords> {
        Some(lent(W::words(self.0)))
    }

    #[inline(always)]
    fn any(self) -> Option<&'h mut dyn core::any::Any> {
        Some(self.0)
    }
}

/// An applet's invocation record: the context generated code reads at
/// fixed offsets, first, and the Rust side of the runtime calls after it,
/// in one allocation (`Compiled::rec`, boxed, so that neither moves with
/// the applet). Generated code is entered with the record's address as
/// its context ([`Entry`]) and passes it to every runtime call, which
/// reaches the Rust side as a field of the same record ([`record`]): no
/// pointer from the context to the runtime is written, and nothing of it
/// is built on the host's stack per invocation.
///
/// On cache lines of its own (aligned to 128 bytes, as the thread's
/// registration in `exec.rs` is, and for the same reason): every
/// invocation writes it (the heap and host pointers, the words, the
/// fuel), from the thread that runs the applet, and no other thread's
/// data may share its lines.
#[repr(C, align(128))]
pub(super) struct Record {
    /// At offset 0: the record's address is the context's.
    pub(super) ctx: Ctx,
    pub(super) rt: Runtime,
}

impl Record {
    /// The record of an applet whose frame stack is `frames` (see
    /// [`Ctx::new`]), bound to nothing yet: `Compiled::keep` binds the
    /// natives and each invocation the rest.
    pub(super) fn new(frames: &mut [i32], words_of: Option<WordsFn>) -> Box<Record> {
        Box::new(Record {
            ctx: Ctx::new(frames, words_of),
            rt: Runtime {
                heap: core::ptr::null_mut(),
                natives: &[],
                decls: &[],
                host: None,
                pending: None,
            },
        })
    }
}

/// The Rust side of an invocation, for runtime calls: where the applet's
/// heap, natives (bound and declared) and the invocation's host value are. Plain
/// numbers between invocations; see [`Runtime::bind`] for when each is
/// written and why it is valid while generated code runs.
pub(super) struct Runtime {
    /// The applet's heap: written by every invocation from its own
    /// exclusive borrow ([`Runtime::bind`]).
    heap: *mut Heap,
    /// The applet's bound natives: written by `Compiled::keep` (the
    /// applet's `Vec` of them is made once, at load, and never changed,
    /// so its buffer neither moves nor is written while the applet lives).
    pub(super) natives: *const [NativeFn],
    /// The program's declarations of them, for the rare checks of a
    /// native's result: written by `Compiled::keep`, as `natives` (the
    /// program's `Vec` of them is made at load and never changed after,
    /// whatever else of the program changes).
    pub(super) decls: *const [crate::decode::NativeDecl],
    /// The invocation's host value: written by every invocation (`None`
    /// for none).
    host: Option<core::ptr::NonNull<dyn core::any::Any>>,
    /// The trap a runtime call ended with: `None` between invocations (an
    /// invocation that trapped takes it).
    pub(super) pending: Option<TrapKind>,
}

impl Runtime {
    /// Writes the pointers an invocation's runtime calls reach through:
    /// the heap from the invocation's own borrow, and its host value.
    /// Three stores, no more than telling whether they changed since the
    /// last invocation would cost (the applet may have moved, and each of
    /// its invocations reborrows it and its host): the pointers are always
    /// the current borrows', so a runtime call never reaches anything
    /// through a borrow that has ended.
    ///
    /// They are valid for the invocation that writes them: the caller
    /// holds `&mut` of the heap (and through it of everything the heap
    /// owns) and the host's `&mut` for as long as the
    /// generated code runs, and nothing else reaches them meanwhile
    /// (generated code and the runtime calls are the only users of the
    /// record, and the applet's `&mut self` excludes every other). After
    /// the invocation they are plain numbers, never read before the next
    /// invocation writes them again.
    #[inline(always)]
    pub(super) fn bind(&mut self, heap: &mut Heap, host: Option<&mut dyn core::any::Any>) {
        self.heap = heap;
        self.host = host.map(core::ptr::NonNull::from);
    }

    /// The heap, for a runtime call.
    ///
    /// # Safety
    ///
    /// Called by a runtime call of the invocation that last [`bind`]
    /// (`Runtime::bind`), while no other reference to the heap made here
    /// is live.
    #[inline(always)]
    pub(super) unsafe fn heap<'a>(&self) -> &'a mut Heap {
        // SAFETY: as the caller promises: the pointer is the running
        // invocation's exclusive borrow of the heap (`bind`).
        unsafe { &mut *self.heap }
    }

    /// The program's declarations of the natives, for a runtime call.
    ///
    /// # Safety
    ///
    /// As for [`Runtime::natives`].
    #[inline(always)]
    pub(super) unsafe fn decls<'a>(&self) -> &'a [crate::decode::NativeDecl] {
        // SAFETY: the program's declarations, made at load and never
        // changed (`Runtime::decls`); the applet lives while it is
        // invoked.
        unsafe { &*self.decls }
    }

    /// The bound natives, for a runtime call.
    ///
    /// # Safety
    ///
    /// Called during an invocation of the applet whose `keep` wrote them.
    #[inline(always)]
    pub(super) unsafe fn natives<'a>(&self) -> &'a [NativeFn] {
        // SAFETY: the applet's natives, made at load and never changed
        // (`Runtime::natives`); the applet lives while it is invoked.
        unsafe { &*self.natives }
    }

    /// The host value, for a runtime call (as [`Runtime::heap`]).
    ///
    /// # Safety
    ///
    /// As for [`Runtime::heap`], for the host value.
    #[inline(always)]
    pub(super) unsafe fn host<'a>(&self) -> Option<&'a mut dyn core::any::Any> {
        // SAFETY: the running invocation's exclusive borrow of its host
        // value (`bind`).
        self.host.map(|h| unsafe { &mut *h.as_ptr() })
    }
}

/// The Rust side of the record a runtime call was given the context of,
/// for a call that keeps `ctx` raw (it writes words of the context while
/// this borrow lives, and passes `ctx` on).
///
/// # Safety
///
/// As for [`record`]; the caller reaches the context only through `ctx`
/// meanwhile, never the `rt` field.
#[inline(always)]
pub(super) unsafe fn runtime<'a>(ctx: *mut Ctx) -> &'a mut Runtime {
    // SAFETY: as the caller promises (see `record`).
    unsafe { &mut (*ctx.cast::<Record>()).rt }
}

/// The record a runtime call was given the context of: its context and
/// its Rust side, as two disjoint borrows.
///
/// # Safety
///
/// `ctx` is the context generated code was entered with: a [`Record`]'s
/// address (`Compiled::enter` passes `&mut rec.ctx` of the record it
/// exclusively borrows, a `repr(C)` struct with the context at offset 0,
/// so the address is the record's with its provenance), exclusively
/// borrowed for the invocation; the caller makes no other reference to
/// the record while these live.
#[inline(always)]
pub(super) unsafe fn record<'a>(ctx: *mut Ctx) -> (&'a mut Ctx, &'a mut Runtime) {
    let rec = ctx.cast::<Record>();
    // SAFETY: as the caller promises; the two fields are disjoint.
    unsafe { (&mut (*rec).ctx, &mut (*rec).rt) }
}

/// The copy of an inline `doHtoLDMA`/`doLtoHDMA` longer than the form's
/// loop ([`crate::InlineForm::CopyOut`], [`crate::InlineForm::CopyIn`]),
/// and of the eager inline tail push's message into its frame
/// ([`crate::InlineForm::TailPush`] with [`crate::FrameWords`] lent):
/// `n` bytes from `src` to `dst`. Generated code calls it only after the
/// form's every check passed. Touches no state of the runtime, so the call
/// site takes nothing back after it but the homes it saved.
pub(super) extern "C" fn rt_copy(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: generated code passes `src` and `dst` only after checking
    // that `[src, src + n)` and `[dst, dst + n)` lie one in the lent area
    // (`AreaWords`: memory the host's `unsafe impl AreaBytes` promises
    // valid for reads and writes of its length, kept alive by the words,
    // reached by no Rust reference while the invocation runs) and the
    // other in a live `byte[]` or `boolean[]` of the applet's heap (its
    // directory entry's data and length, which nothing moves during a
    // native call), or for `CopyIn`'s source the lent bytes behind
    // `LENT`'s entry, by the lend's invariant (`Heap::lend`: readable for
    // the entry's length until the lend ends, which no invocation
    // outlives, the `Lend` guard borrowing the applet; an empty entry
    // after, which no copy of a byte passes). The two never overlap: the
    // area is the host's memory, an array the heap's; the lent bytes are
    // the host's, and its lend must not name bytes of an area it lends
    // (unet copies a message that starts in the receiver's own segment
    // before it lends it, `Io::in_segment`; `Applet::lend`'s Safety does
    // not say so yet, review26). For the tail push: `src` in a live `byte[]`
    // or `boolean[]` as above, `dst` past the frame's header in the lent
    // frame room (`FrameWords`: memory its lender promises valid for
    // writes of the room, reached by no Rust reference while the code
    // runs), which `n` fits (checked); the host's memory, not the heap's.
    unsafe { core::ptr::copy_nonoverlapping(src, dst, n) }
}

/// Allocation (`newarray`): returns the handle, or -1 with the trap pending.
pub(super) extern "C" fn rt_newarray(ctx: *mut Ctx, prim: i64, len: i64) -> i64 {
    // SAFETY: generated code passes the context it was entered with, the
    // record `Compiled::enter` keeps alive and exclusively borrowed for
    // the call (see `record`).
    let (ctx, rt) = unsafe { record(ctx) };
    // SAFETY: this invocation bound the heap (`Runtime::bind`); the only
    // reference made to it here.
    let heap = unsafe { rt.heap() };
    let p = match prim {
        0 => Prim::Boolean,
        1 => Prim::Byte,
        2 => Prim::Short,
        _ => Prim::Int,
    };
    let r = match heap.alloc_array(p, len as i32) {
        Ok(h) => i64::from(h),
        Err(e) => {
            rt.pending = Some(TrapKind::HeapLimitExceeded {
                requested: e.requested,
                in_use: e.in_use,
                limit: e.limit,
            });
            -1
        }
    };
    ctx.dir = heap.directory().cast();
    r
}

/// What generated code tells [`rt_native`] about the native it calls, as
/// one immediate: the number of argument slots, and how the result comes
/// back. The code is compiled from the program whose declarations these
/// are (the cache key covers them), so the runtime call reads neither the
/// declaration nor its type; see [`NativeShape::of`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NativeShape(i64);

impl NativeShape {
    /// Bits 0-7: the argument slots. Bits 8-15: the narrowing shift of an
    /// int-like result (24 for `byte`, 16 for `short`, 0 otherwise).
    const SHIFT: u32 = 8;
    /// A `boolean` result: bit 0 kept.
    const BOOLEAN: i64 = 1 << 16;
    /// A `void` native: the result is 0.
    const VOID: i64 = 1 << 17;
    /// An array result, or anything else the interpreter's
    /// `native_result` checks: out of line.
    const CHECKED: i64 = 1 << 18;

    /// The shape of native `decl`.
    pub(super) fn of(decl: &crate::decode::NativeDecl) -> NativeShape {
        use crate::subset::FieldType;
        let k = decl.params.len() as i64;
        debug_assert!(k < 256, "a native has at most 255 argument slots");
        NativeShape(
            k | match decl.ret {
                None => Self::VOID,
                Some(FieldType::Prim(p)) => {
                    let (mask, shift) = crate::narrowing(p);
                    (i64::from(shift) << Self::SHIFT) | if mask == 1 { Self::BOOLEAN } else { 0 }
                }
                Some(FieldType::Array(_)) => Self::CHECKED,
            },
        )
    }

    /// The immediate generated code passes.
    pub(super) fn bits(self) -> i64 {
        self.0
    }

    /// The runtime function generated code calls for a native of this
    /// shape: [`rt_native_int`] for an `int` result (no narrowing),
    /// [`rt_native_void`] for none, [`rt_native`] for the rest. Each gives
    /// the value [`rt_native`] would.
    pub(super) fn entry(self) -> usize {
        if self.0 >> Self::SHIFT == 0 {
            rt_native_int as *const () as usize
        } else if self.0 >> Self::SHIFT == Self::VOID >> Self::SHIFT {
            rt_native_void as *const () as usize
        } else {
            rt_native as *const () as usize
        }
    }
}

/// A native method: native `n` of the program, its `shape`
/// ([`NativeShape`]) compiled into the call, its arguments at `args`;
/// returns the value (narrowed as the interpreter does), or `i64::MIN`
/// with the trap pending.
///
/// The common outcome, an `int`-like or `void` native that succeeded, is
/// handled here without building the interpreter's `Option` result;
/// failures and array results go through [`crate::interpreter::native_result`]
/// out of line, so that they are checked and reported exactly as the
/// interpreter does. The two most common shapes have entry points of their
/// own, which generated code calls instead ([`NativeShape::entry`]):
/// [`rt_native_int`] and [`rt_native_void`].
pub(super) extern "C" fn rt_native(ctx: *mut Ctx, n: i64, args: *const i32, shape: i64) -> i64 {
    native_call(ctx, n, args, shape)
}

/// [`rt_native`] for a native declared to return `int`: the value needs no
/// narrowing, so the shape's tests are compiled out.
pub(super) extern "C" fn rt_native_int(ctx: *mut Ctx, n: i64, args: *const i32, shape: i64) -> i64 {
    debug_assert_eq!(shape >> NativeShape::SHIFT, 0, "an int native");
    native_call(ctx, n, args, shape & 0xff)
}

/// [`rt_native`] for a `void` native: its value is 0.
pub(super) extern "C" fn rt_native_void(
    ctx: *mut Ctx,
    n: i64,
    args: *const i32,
    shape: i64,
) -> i64 {
    debug_assert_eq!(
        shape >> NativeShape::SHIFT,
        NativeShape::VOID >> NativeShape::SHIFT
    );
    native_call(ctx, n, args, (shape & 0xff) | NativeShape::VOID)
}

/// The runtime entry of fast form `F` ([`crate::FastNative`]), which
/// generated code calls for the native in place of [`rt_native`], with the
/// same arguments and meaning of the result.
///
/// Where [`native_call`] builds a [`Context`] and calls the closure through
/// its `Arc<dyn Fn>`, and the closure finds its host through `dyn Any`'s
/// virtual `type_id`, this entry compares the host value with the last
/// one found to be of `F`'s host type ([`Ctx::host_seen`]) and calls `F`
/// directly, inlined here. If
/// `F` declines the call (it changed nothing), or the host value is not an
/// `F::Host`, the ordinary native runs as through [`rt_native`].
pub(super) extern "C" fn rt_native_fast<F: FastNative, const KIND: u8>(
    ctx: *mut Ctx,
    n: i64,
    args: *const i32,
    shape: i64,
) -> i64 {
    // SAFETY: as in `rt_newarray`; `rt` is not used after the calls below
    // that reach it again through `ctx`.
    let rt = unsafe { runtime(ctx) };
    // SAFETY: this invocation bound its host value (`Runtime::bind`); the
    // only reference made to it here.
    let Some(host) = (unsafe { rt.host() }) else {
        return native_slow(ctx, n, args, shape);
    };
    let host: *mut dyn core::any::Any = host;
    // SAFETY: as in `rt_newarray` (a plain read of a word of the context).
    let seen = unsafe { (*ctx).host_seen };
    if !core::ptr::eq(host, seen) {
        return fast_host_new::<F, KIND>(ctx, n, args, shape);
    }
    // SAFETY: `host` has the address and vtable of `host_seen`, which
    // `fast_host_new` stored only after `is::<F::Host>()` called that
    // vtable's `type_id` and found `F::Host`'s: a pointer with that vtable
    // points to an `F::Host` (every fast form compiled into this code is
    // for one host type, `Natives::set_fast` refuses another, and a
    // `Compiled` and its context belong to one applet and its table). The
    // cast drops the vtable of the invocation's host value
    // (`Runtime::host`), valid and exclusive for this call, which nothing
    // else uses meanwhile.
    let host = unsafe { &mut *host.cast::<F::Host>() };
    // SAFETY: as in `native_call`: `shape`'s low byte is the number of the
    // native's argument slots, which generated code stored at `args`.
    let slots = unsafe { core::slice::from_raw_parts(args, (shape & 0xff) as usize) };
    // SAFETY: as for the host: the invocation's heap, the only reference
    // made to it here (`native_checked` makes its own after this one's
    // last use).
    let heap = unsafe { rt.heap() };
    let arrays = crate::natives::Arrays { heap: &mut *heap };
    let fast = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        F::call(&mut *host, arrays, slots)
    }));
    // A fast form is safe code with the applet's arrays in hand: one that
    // allocates may move the heap's directory, which generated code reads
    // through the context, so the context takes it again, as after an
    // ordinary native (`native_call`). The host was reborrowed for the
    // call: the inline natives' words are taken again from this borrow,
    // the latest (see `Ctx::words`), where the code has any.
    // SAFETY: as in `rt_newarray` (plain writes of words of the context).
    unsafe {
        (*ctx).dir = heap.directory().cast();
        (*ctx).words = lent(F::words(host));
    }
    match fast {
        // The shape's tests fold away where `KIND` fixes it.
        Ok(Some(Ok(v))) if KIND == FAST_INT => i64::from(v),
        Ok(Some(Ok(_))) if KIND == FAST_VOID => 0,
        Ok(Some(Ok(v))) if shape & NativeShape::CHECKED == 0 => narrowed(v, shape),
        Ok(None) => native_slow(ctx, n, args, shape),
        Ok(Some(result)) => native_checked(rt, n as usize, Ok(result)),
        Err(panic) => native_checked(rt, n as usize, Err(panic)),
    }
}

/// [`rt_native_fast`] with a host value other than the last it saw (the
/// applet's first fast call, or another endpoint's): one virtual
/// `type_id` call; a value of the fast form's host type is remembered
/// ([`Ctx::host_seen`]) and the call made fast, any other goes to the
/// ordinary native.
#[cold]
#[inline(never)]
fn fast_host_new<F: FastNative, const KIND: u8>(
    ctx: *mut Ctx,
    n: i64,
    args: *const i32,
    shape: i64,
) -> i64 {
    // SAFETY: as in `rt_newarray`; not used after the calls below.
    let rt = unsafe { runtime(ctx) };
    // SAFETY: as in `rt_native_fast`.
    match unsafe { rt.host() }.as_deref() {
        Some(h) if h.is::<F::Host>() => {
            // SAFETY: as in `rt_newarray` (a plain write of a word of the
            // context); the pointer is kept as a number, never dereferenced.
            unsafe { (*ctx).host_seen = h as *const dyn core::any::Any };
            rt_native_fast::<F, KIND>(ctx, n, args, shape)
        }
        _ => native_slow(ctx, n, args, shape),
    }
}

/// The ordinary native, for a call its fast form declined: out of line,
/// so that the fast entry saves no registers for it.
#[inline(never)]
fn native_slow(ctx: *mut Ctx, n: i64, args: *const i32, shape: i64) -> i64 {
    native_call(ctx, n, args, shape)
}

/// The value of an int-like or `void` native that returned `v`, as its
/// `shape` says (see [`NativeShape`]).
#[inline(always)]
fn narrowed(v: i32, shape: i64) -> i64 {
    // The two common shapes first: an `int` (no narrowing) and a `void`.
    let kind = shape >> NativeShape::SHIFT;
    if kind == 0 {
        return i64::from(v);
    }
    if shape & NativeShape::VOID != 0 {
        return 0;
    }
    let v = if shape & NativeShape::BOOLEAN != 0 {
        v & 1
    } else {
        v
    };
    let shift = (shape >> NativeShape::SHIFT) as u32 & 31;
    i64::from((v << shift) >> shift)
}

/// The body of the native entry points; `shape` is a constant where an
/// entry point fixes it, so that the tests on it fold away.
#[inline(always)]
fn native_call(ctx: *mut Ctx, n: i64, args: *const i32, shape: i64) -> i64 {
    // SAFETY: as in `rt_newarray`.
    let (ctx, rt) = unsafe { record(ctx) };
    let n = n as usize;
    // SAFETY: the applet's natives (`Runtime::natives`), and this
    // invocation's heap and host value, the only references made to them
    // here (`native_checked` makes its own after these' last use).
    let (natives, heap, host) = unsafe { (rt.natives(), rt.heap(), rt.host()) };
    let Some(native) = natives.get(n) else {
        return native_failed(rt, TrapKind::Native("internal error: native index".into()));
    };
    // SAFETY: generated code passes the address of the native's arguments
    // in the current frame: as many slots as its declaration has
    // parameters (the low byte of `shape`, compiled in from that
    // declaration), inside the frame stack.
    let args = unsafe { core::slice::from_raw_parts(args, (shape & 0xff) as usize) };
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut cx = Context {
            heap: &mut *heap,
            host,
        };
        native(&mut cx, args)
    }));
    ctx.dir = heap.directory().cast();
    // The native reborrowed the host, and generated code must not use
    // words taken before: the next inline native takes its rare path,
    // whose fast entry takes them again (see `Ctx::words`).
    ctx.words = no_words();
    native_value(rt, n, shape, result)
}

/// What a native call that returned `result` gives generated code: the
/// value narrowed as its `shape` says, or [`rt_native`]'s mark of a trap.
#[inline(always)]
fn native_value(
    rt: &mut Runtime,
    n: usize,
    shape: i64,
    result: std::thread::Result<Result<i32, NativeError>>,
) -> i64 {
    match result {
        Ok(Ok(v)) if shape & NativeShape::CHECKED == 0 => narrowed(v, shape),
        result => native_checked(rt, n, result),
    }
}

/// [`rt_native`]'s failures and array results: checked as the interpreter
/// checks them.
#[cold]
#[inline(never)]
fn native_checked(
    rt: &mut Runtime,
    n: usize,
    result: std::thread::Result<Result<i32, NativeError>>,
) -> i64 {
    let result = result.unwrap_or_else(|_| Err(NativeError(crate::natives::PANICKED.into())));
    // SAFETY: a runtime call of the invocation that bound the heap, after
    // its caller's last use of its own reference to it; the declarations
    // of the applet whose `keep` wrote them.
    let (decls, heap) = unsafe { (rt.decls(), rt.heap()) };
    let Some(decl) = decls.get(n) else {
        return native_failed(rt, TrapKind::Native("internal error: native index".into()));
    };
    match crate::interpreter::native_result(decl, heap, result) {
        Ok(v) => i64::from(v.unwrap_or(0)),
        Err(k) => native_failed(rt, k),
    }
}

/// Records the trap a native call ends with; returns [`rt_native`]'s mark
/// of it.
#[cold]
#[inline(never)]
fn native_failed(rt: &mut Runtime, k: TrapKind) -> i64 {
    rt.pending = Some(k);
    i64::MIN
}

/// [`rt_native_fast`]'s `KIND` for a native declared to return `int`,
/// one declared `void`, and any other.
pub(crate) const FAST_INT: u8 = 0;
pub(crate) const FAST_VOID: u8 = 1;
pub(crate) const FAST_OTHER: u8 = 2;

/// The addresses of [`rt_native_fast`] for fast form `F`, by `KIND`
/// ([`FAST_INT`], [`FAST_VOID`], [`FAST_OTHER`]), which
/// [`crate::Natives::set_fast`] records for the JIT: the entry for an
/// `int` or `void` native has the result's shape compiled in.
pub(crate) fn fast_entry<F: FastNative>() -> [usize; 3] {
    [
        rt_native_fast::<F, FAST_INT> as *const () as usize,
        rt_native_fast::<F, FAST_VOID> as *const () as usize,
        rt_native_fast::<F, FAST_OTHER> as *const () as usize,
    ]
}
