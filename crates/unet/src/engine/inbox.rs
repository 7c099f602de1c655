//! An applet's inbox: the frames that wait for its `doRx` on the
//! endpoint's own thread, handed across threads as bytes in one ring.
//!
//! The inbox is a byte ring: each frame is written in place, after a
//! small header (its length, channel and kind), and read in place by the
//! consumer, which fills `RxBuf` straight from the ring. A sender that
//! holds the receiver's verdict already (a kept delivery) writes the
//! message's payload alone, without a frame's header, which nothing at the
//! drain would read ([`Inbox::push_message`]). Nothing is allocated per
//! frame, and the two sides share only what a hand-off
//! needs (measured with the burst-25 experiment, docs/benchmarks.md: the
//! crossbeam channel it replaces cost a fifth of the two-thread profile,
//! each push and pop moving its index, its slot's stamp, the shared byte
//! counter and the spare-buffer queue's between the cores):
//!
//! - **Producers** (any engine thread delivering a frame for the applet)
//!   are serialised by a lock on a line only producers write; it holds
//!   their position and what they last read of the consumer's. A push
//!   takes it, checks the budgets and the room against that private
//!   view (reading the consumer's line only when the view says no),
//!   writes the bytes, marks the word after the entry "empty", and then
//!   **seals** the entry: its 8-byte header (length, channel, kind, and
//!   the low bits of its position) in one atomic `Release` store. The
//!   lock is held only by engine code, across a
//!   bounds check and a copy of at most one frame (the copy's source is
//!   a frame, the engine's own mapping of a segment, which a client
//!   cannot unmap or make block, an applet's array on the engine's heap,
//!   or an in-process sender's own message): no applet or client code
//!   runs under
//!   it, so a client cannot hold it; a preempted holder delays the other
//!   producers by one copy. Each entry is sealed at once, not
//!   once per pass, so that the consumer runs the first frames of a burst
//!   while the rest are written (the two threads overlap).
//! - **The consumer** (the holder of the endpoint's receive lock, which
//!   drains, [`super::Engine::drain`]) loads the header at its position
//!   with `Acquire` and stops where it is "empty": it learns of an entry
//!   from the entry's own line, as the receive queue's consumer does from
//!   a slot's seal, not from a tail on a line of its own (one cache line
//!   fewer fetched, one after the other, per message between two threads:
//!   docs/benchmarks.md, wip-seal). It runs each entry in place, and gives
//!   its space back once it has run: one
//!   `Release` store of its position (after the frames' and bytes'
//!   counts) on a line only the consumer writes, which producers read
//!   only when their view says the inbox is full; never a counter both
//!   sides write. (Giving back every 16 frames instead, as first built,
//!   held up to 15 frames that had run against the budget: the demo's
//!   64 KiB token flow, which keeps the inbox near its byte budget, lost
//!   frames as full and stalled.)
//! - **Why a payload cannot forge a header.** A payload's bytes are an
//!   applet's (another endpoint's), and the ring's words are reused: a word
//!   that is a header in one lap may have held a payload in the one before. But every
//!   word the consumer can reach as a header was written after that
//!   payload, by a producer, before the seal the consumer acquired to get
//!   there: the "empty" a push stores over the word after its entry (room
//!   for it is part of the room check) before sealing its own, or the
//!   next entry's seal. At a padding to the ring's end, the frame at the
//!   ring's start is sealed first and the padding last, so a consumer that
//!   reads the padding finds the frame sealed. The position bits are a
//!   second check; the length is checked against the ring's end. A
//!   header that fails either stops the drain (nothing past it read) and
//!   drops what is published up to the tail. The consumer never reads
//!   outside the ring, twice, or past an entry not yet sealed, whatever
//!   the payloads hold.
//! - **The tail** (a `Release` store after each push's seals, on the
//!   producers' line) is for the producers' accounting and for threads
//!   other than the consumer: [`Inbox::is_empty`] (the tail against the
//!   given-back position: atomics only, never ring memory) for a deliverer
//!   keeping a frame behind those waiting and for the engine threads'
//!   poll of every endpoint; and the drain's recovery from a bad header.
//!   The endpoint's own thread, waiting for a message, tests the seal at
//!   the consumer's position instead, under the consumer's lock (biased to
//!   it: [`Inbox::idle_as`]), so that no other thread's drain can move the
//!   position and let a later lap's payload be written into the word it
//!   loads.
//! - **Budgets.** A frame is refused (the caller counts it) if the frames
//!   waiting would exceed [`super::Budgets::inbox_frames`] (at most
//!   [`FRAMES_MAX`]) or their bytes [`super::Budgets::inbox_bytes`], as
//!   before: frames and their lengths, not the ring's headers and
//!   padding (a message without a frame counts as the frame it stands
//!   for, [`MESSAGE_COUNTED_EXTRA`]); a frame counts until its `doRx`
//!   returns (before, until it was taken from the queue, just before its
//!   `doRx`). The ring has room for any frames within those budgets (see
//!   [`ring_size`]), up to [`RING_MAX`] bytes: a budget past half of that
//!   is bounded by the ring instead.
//! - **Memory.** The ring is allocated at the first frame, so an endpoint
//!   whose applet never gets a frame from another thread costs none. A
//!   producer that finds the ring empty past its warm start goes back to
//!   its start, so a steady stream of bursts keeps to the start of it,
//!   warm in both cores' caches: past [`HOT`] bytes, and past the space
//!   the budgets' frames take ([`warm_start`]), since the frames after
//!   the padding that goes back have only the space before it.
//! - **Closing.** [`Inbox::close`] marks the inbox closed under the
//!   producers' lock, then empties it, counting what it finds: a push
//!   that took the lock first is published and is counted there; one that
//!   takes it after is refused as [`Refused::Closed`]. Each frame is
//!   consumed once (by a drain or by the closing), so each is counted
//!   once; no fence is needed on the push path.
//! - **The model.** `tests/loom_inbox.rs` runs this code under loom (built
//!   alone as `unet::inbox` with `--cfg loom`, hence its `pub` items; its
//!   locks are then loom's mutex, the ring is made with the inbox, and
//!   loom watches the ring's bytes a word at a time, `Ring::held_read`,
//!   with each word's value as a loom atomic for the seals, into which a
//!   payload's words are stored too, `Ring::mirror`), its producers
//!   hostile (their payloads full of seals a lap ahead): the seal's
//!   `Release` and `Acquire`, the "empty" store, the room for it, the
//!   padding's order and the give-back's `Release` each make it fail when
//!   weakened (docs/benchmarks.md, wip-seal).

use std::ptr::NonNull;
use std::sync::OnceLock;

#[cfg(not(loom))]
use crate::biased::{BiasedGuard as Guard, BiasedLock as Lock};
#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
use loom::sync::{Mutex as Lock, MutexGuard as Guard};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

/// The most frames an inbox holds, whatever its budget says.
pub const FRAMES_MAX: usize = 1 << 16;
/// The most bytes an inbox's ring has, whatever its byte budget says.
pub const RING_MAX: usize = 64 << 20;
/// Bytes of an entry's header in the ring: one little-endian `u64`, its
/// seal ([`seal_word`]): the length (bits 0 to 31), channel (32 to 47),
/// kind (48 and 49: [`KIND_EMPTY`], [`KIND_PAD`], [`KIND_FRAME`] or
/// [`KIND_MESSAGE`]) and the low 14 bits of the entry's position over 8
/// (50 to 63), stored with one atomic `Release` store once the entry's
/// bytes are written.
const HDR: usize = 8;
/// No entry here yet: what a zeroed ring holds, and what a producer
/// stores over the header of the entry after its own before sealing it.
pub const KIND_EMPTY: u16 = 0;
/// A frame's header.
pub const KIND_FRAME: u16 = 2;
/// A message without a frame: its payload alone (a delivery with a kept
/// verdict, [`Inbox::push_message`]).
pub const KIND_MESSAGE: u16 = 3;
/// The bits of a seal that hold its position: `(pos / 8) % 2^14`.
const POS_SHIFT: u32 = 50;
/// What a [`KIND_MESSAGE`] entry counts against the byte budget beyond its
/// bytes: the header of the frame it stands for, so that a message counts
/// as the frame the same message makes through the outbox, and the budgets
/// hold the same messages whichever way they come.
#[cfg(not(loom))]
const MESSAGE_COUNTED_EXTRA: u64 = crate::frame::HEADER_LEN as u64;
/// [`MESSAGE_COUNTED_EXTRA`] in the loom model, which builds no `frame`
/// (the same value: checked below in the ordinary build).
#[cfg(loom)]
const MESSAGE_COUNTED_EXTRA: u64 = 54;
#[cfg(not(loom))]
const _: () = assert!(MESSAGE_COUNTED_EXTRA == 54);

/// The rest of the ring up to its end is padding: the next frame is at
/// its start.
pub const KIND_PAD: u16 = 1;
/// A producer that finds the ring empty past this offset goes back to its
/// start (checked at most every [`HOT_CHECK`] bytes).
#[cfg(not(loom))]
pub const HOT: u64 = 256 << 10;
/// How far apart a producer past [`HOT`] reads the consumer's position.
#[cfg(not(loom))]
const HOT_CHECK: u64 = 64 << 10;
/// [`HOT`] in the loom model: small, so that its rings of a few hundred
/// bytes reach the warm start's going back.
#[cfg(loom)]
pub const HOT: u64 = 64;
/// [`HOT_CHECK`] in the loom model: far enough apart that a push past
/// the warm start may also find no room before the ring's end.
#[cfg(loom)]
const HOT_CHECK: u64 = 96;

#[cfg(loom)]
std::thread_local! {
    /// In the loom model, how often a push padded to the ring's end
    /// because the frame did not fit before it (`[0]`), and because the
    /// ring was empty past the warm start (`[1]`): its tests check that
    /// they reach both. Per test (loom runs a model's threads on the
    /// test's own).
    pub static PADDED: std::cell::Cell<[u64; 2]> = const { std::cell::Cell::new([0; 2]) };
    /// In the loom model, the position (bytes ever) of the payload a
    /// push's `fill` writes, set just before it runs: the model's hostile
    /// producer writes there, at every 8-byte offset, the seal an entry at
    /// that offset would have a lap later.
    pub static FILL_AT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Why a frame was not put in the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The inbox holds its budget of frames or bytes, or its ring has no
    /// room (only for a budget past what the ring holds).
    Full,
    /// The inbox was closed ([`Inbox::close`]).
    Closed,
}

/// A value on a cache line of its own.
#[repr(align(64))]
#[derive(Debug, Default)]
struct Line<T>(T);

/// The producers' state, behind their lock.
#[derive(Debug, Default)]
struct Prod {
    closed: bool,
    /// Where the next frame goes (bytes written ever; the ring offset is
    /// this modulo its size). Equal to the published tail between pushes.
    tail: u64,
    /// `tail` modulo the ring's size, kept beside it: a push computes no
    /// remainder (a 64-bit division, some 20 to 40 cycles, twice a frame).
    at: u64,
    /// Frames and frame bytes pushed ever.
    frames: u64,
    bytes: u64,
    /// The consumer's give-back as last read ([`Inbox::refresh`]).
    head: u64,
    head_frames: u64,
    head_bytes: u64,
    /// The tail when the consumer's position was last read past [`HOT`].
    checked: u64,
}

/// The consumer's position, behind its lock (ahead of what it gave back).
#[derive(Debug, Default)]
struct Cons {
    head: u64,
    /// `head` modulo the ring's size (as [`Prod::at`]).
    at: u64,
    frames: u64,
    bytes: u64,
}

/// What the consumer gave back: producers read it when their view says
/// there is no room.
#[derive(Debug, Default)]
struct GivenBack {
    /// Ring bytes consumed ever (`Release`, after the frames' reads).
    head: AtomicU64,
    /// Frames and frame bytes consumed ever.
    frames: AtomicU64,
    bytes: AtomicU64,
}

/// The ring's bytes: a heap block only reached through its raw pointer,
/// so that producers write and the consumer reads disjoint parts of it
/// at once. Its start is on a cache line's: a 56-byte message and its
/// header (64 bytes) then fill one line, which is all that crosses to the
/// draining core for it; from the allocator's 16-byte alignment they
/// straddled two (`examples/loop_lines std 56`: 6.05 lines a round trip,
/// 2 of them the inboxes' tails, against 4.06 at 0 B).
struct Ring {
    /// The block's first cache line boundary: the ring's byte 0.
    ptr: NonNull<u8>,
    len: usize,
    /// The whole block, `len` bytes and up to a line more before `ptr`,
    /// for its release.
    block: NonNull<[u8]>,
    /// In the loom model, a cell per 8 bytes of the ring, which loom
    /// watches: each read or write of the ring's bytes holds those its
    /// bytes lie in while it lasts, so that loom reports a read and a
    /// write of the same bytes that the inbox's orderings leave unordered.
    #[cfg(loom)]
    words: Box<[loom::cell::UnsafeCell<()>]>,
    /// In the loom model, each 8-byte word's value as an atomic, for the
    /// seals' loads and stores: a payload's words are stored into it too
    /// (`Relaxed`, [`Ring::mirror`]), so that a header's load may see an
    /// earlier lap's payload where the protocol let it.
    #[cfg(loom)]
    seals: Box<[AtomicU64]>,
}

// SAFETY: `Ring` owns its block (freed once, in `drop`); the `Inbox`
// protocol (producers write only `[tail, head + len)`, under their lock;
// the consumer reads only the entries it found sealed, with `Release` and
// `Acquire` both ways, and headers only atomically) keeps every
// concurrent access to it disjoint, so sharing the pointer between
// threads is sound.
unsafe impl Send for Ring {}
// SAFETY: as for `Send`.
unsafe impl Sync for Ring {}

/// A cache line's bytes (the ring's start is on one).
const LINE: usize = 64;

impl Ring {
    fn new(len: usize) -> Ring {
        // Zeroed memory from the allocator: pages are mapped when first
        // touched, so a ring used near its start costs little more. A
        // line more than the ring, so that it can start on a line's
        // boundary (an allocation aligned to 64 would be zeroed by a
        // `memset` of the whole block, touching every page at once).
        let b: Box<[u8]> = vec![0u8; len + LINE].into_boxed_slice();
        let block = NonNull::from(Box::leak(b));
        let base = block.cast::<u8>();
        let skip = base.as_ptr().align_offset(LINE).min(LINE);
        // SAFETY: `skip <= LINE`, and the block is `len + LINE` bytes
        // long, so `base + skip` and the `len` bytes after it are inside it.
        let ptr = unsafe { base.add(skip) };
        Ring {
            ptr,
            len,
            block,
            #[cfg(loom)]
            words: (0..len.div_ceil(8))
                .map(|_| loom::cell::UnsafeCell::new(()))
                .collect(),
            #[cfg(loom)]
            seals: (0..len.div_ceil(8)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The header word at `at`, which the inbox only loads and stores
    /// atomically while it can be an entry's header (see [`Inbox`]'s
    /// protocol).
    ///
    /// # Safety
    /// `at` is a multiple of 8 and `at + 8 <= self.len`.
    #[cfg(not(loom))]
    #[inline(always)]
    unsafe fn seal(&self, at: usize) -> &AtomicU64 {
        if cfg!(any(test, debug_assertions)) {
            assert!(at % 8 == 0 && at + 8 <= self.len);
        }
        // SAFETY: `ptr + at` is in the block (the caller's contract) and
        // aligned to 8 (the ring starts on a cache line, `at` is a multiple
        // of 8); the word lives as long as `self`. Its other accesses, the
        // bytes of a payload an earlier or a later lap writes and reads
        // there, are ordered with the atomic ones by the inbox's protocol
        // (a word is written as a payload only once the consumer has given
        // it back, after its last load as a header, and loaded as a header
        // only after the seal or the "empty" a producer stored there after
        // that payload): none is concurrent with them.
        unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().add(at).cast::<u64>()) }
    }

    /// In the loom model, the header word at `at` (its atomic).
    ///
    /// # Safety
    /// As outside the model (here only bounds-checked).
    #[cfg(loom)]
    unsafe fn seal(&self, at: usize) -> &AtomicU64 {
        &self.seals[at / 8]
    }

    /// Loads the header word at `at` (`Acquire`: the entry's bytes, written
    /// before its seal, are then visible). In the loom model, a read of
    /// its word too, which loom checks against a payload's write there.
    ///
    /// # Safety
    /// As for [`Ring::seal`].
    #[inline(always)]
    unsafe fn load_seal(&self, at: usize) -> u64 {
        let _held = self.held_read(at, HDR);
        // SAFETY: the caller's contract.
        unsafe { self.seal(at) }.load(Ordering::Acquire)
    }

    /// Stores `word` into the header word at `at` with `order`.
    ///
    /// # Safety
    /// As for [`Ring::seal`].
    #[inline(always)]
    unsafe fn store_seal(&self, at: usize, word: u64, order: Ordering) {
        // SAFETY: the caller's contract.
        unsafe { self.seal(at) }.store(word, order);
    }

    /// Asks for the line at `at` (a hint: nothing is read or written).
    #[inline(always)]
    fn prefetch(&self, at: usize) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        // SAFETY: a prefetch neither reads nor writes memory
        // architecturally, never faults and changes no register or flag;
        // `ptr + at` stays in the block (`at` is a position in the ring,
        // below its size: `wrapping_add` would not overflow either way).
        unsafe {
            use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(self.ptr.as_ptr().wrapping_add(at).cast::<i8>());
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        let _ = at;
    }

    /// In the loom model, the words of `[at, at + n)` as written (a
    /// payload's), stored into their atomics (`Relaxed`): what a header's
    /// load there would read. Nothing outside the model.
    #[cfg(not(loom))]
    #[inline(always)]
    fn mirror(&self, _at: usize, _n: usize) {}

    /// In the loom model, the words of `[at, at + n)` as written.
    #[cfg(loom)]
    fn mirror(&self, at: usize, n: usize) {
        for w in at / 8..(at + n).div_ceil(8) {
            let mut b = [0u8; 8];
            // SAFETY: the word is in the ring, and the producer, which
            // calls this under its lock, owns it until it is sealed.
            b.copy_from_slice(unsafe { self.bytes(w * 8, 8) });
            self.seals[w].store(u64::from_le_bytes(b), Ordering::Relaxed);
        }
    }

    /// The bytes `[at, at + n)`, which only the caller accesses while the
    /// borrow lives.
    ///
    /// # Safety
    /// `at + n <= self.len`, and no other thread writes those bytes
    /// while the slice lives (the inbox's protocol).
    unsafe fn bytes(&self, at: usize, n: usize) -> &[u8] {
        if cfg!(any(test, debug_assertions)) {
            assert!(at + n <= self.len);
        }
        // SAFETY: in bounds of the block (the caller's contract), which
        // lives as long as `self`; nothing writes it meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(at), n) }
    }

    /// The bytes `[at, at + n)` to write.
    ///
    /// # Safety
    /// `at + n <= self.len`, and no other thread reads or writes those
    /// bytes while the slice lives (the inbox's protocol).
    #[allow(clippy::mut_from_ref)]
    unsafe fn bytes_mut(&self, at: usize, n: usize) -> &mut [u8] {
        if cfg!(any(test, debug_assertions)) {
            assert!(at + n <= self.len);
        }
        // SAFETY: in bounds of the block (the caller's contract), which
        // lives as long as `self`; no one else reads or writes it meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(at), n) }
    }

    /// Marks the bytes `[at, at + n)` read, for loom, while the value
    /// lives: the scope of a [`Ring::bytes`] slice's use. Nothing outside
    /// the model.
    #[cfg(not(loom))]
    #[inline(always)]
    fn held_read(&self, _at: usize, _n: usize) -> Held {
        Held
    }

    /// Marks the bytes `[at, at + n)` written, for loom, while the value
    /// lives (as [`Ring::held_read`]).
    #[cfg(not(loom))]
    #[inline(always)]
    fn held_write(&self, _at: usize, _n: usize) -> Held {
        Held
    }

    /// In the loom model, the words of `[at, at + n)`, read while the
    /// value lives.
    #[cfg(loom)]
    fn held_read(&self, at: usize, n: usize) -> Held {
        Held::Read(
            self.words[at / 8..(at + n).div_ceil(8)]
                .iter()
                .map(|w| w.get())
                .collect(),
        )
    }

    /// In the loom model, the words of `[at, at + n)`, written while the
    /// value lives.
    #[cfg(loom)]
    fn held_write(&self, at: usize, n: usize) -> Held {
        Held::Write(
            self.words[at / 8..(at + n).div_ceil(8)]
                .iter()
                .map(|w| w.get_mut())
                .collect(),
        )
    }
}

/// Bytes of the ring read or written while it lives: nothing outside the
/// loom model, where it holds loom's accesses to their words.
#[cfg(not(loom))]
struct Held;

/// Bytes of the ring read or written while it lives (loom's accesses).
#[cfg(loom)]
#[allow(dead_code)]
enum Held {
    Read(Vec<loom::cell::ConstPtr<()>>),
    Write(Vec<loom::cell::MutPtr<()>>),
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `block` is the boxed slice leaked in `Ring::new`,
        // released once, here; no slice of it outlives the ring.
        drop(unsafe { Box::from_raw(self.block.as_ptr()) });
    }
}

/// The bytes an entry of `kind` and `len` bytes counts against the budget.
#[inline(always)]
fn counted(kind: u16, len: u64) -> u64 {
    if kind == KIND_MESSAGE {
        len + MESSAGE_COUNTED_EXTRA
    } else {
        len
    }
}

/// A frame's place in the ring: its header and bytes, rounded up to 8.
#[inline]
fn footprint(len: usize) -> u64 {
    (HDR + len).next_multiple_of(8) as u64
}

/// The ring's size for budgets of `frames` frames and `bytes` bytes: room
/// for any frames within both. The frames waiting cross the ring's end at
/// most once, so at most one padding (shorter than the frame after it,
/// within the byte budget) lies among them: twice the byte budget, plus a
/// header and its rounding per frame (and two more), always suffices.
/// At most [`RING_MAX`].
pub fn ring_size(frames: usize, bytes: usize) -> usize {
    let per_frame = (HDR + 8).saturating_mul(frames.saturating_add(2));
    bytes
        .saturating_mul(2)
        .saturating_add(per_frame)
        .min(RING_MAX)
        .next_multiple_of(8)
}

/// [`Inbox::warm`] for budgets of `frames` frames and `bytes` bytes: the
/// space they take in the ring (each frame's bytes, and at most
/// `HDR + 7` more), or [`HOT`] if that is more.
pub fn warm_start(frames: usize, bytes: usize) -> u64 {
    let per_frame = (HDR as u64 + 7).saturating_mul(frames as u64);
    (bytes as u64).saturating_add(per_frame).max(HOT)
}

/// An applet's inbox (see the module documentation).
pub struct Inbox {
    /// The producers' lock and view (written only by producers).
    prod: Line<Lock<Prod>>,
    /// The published tail (written by producers; read by `is_empty` and
    /// the drain's recovery from a bad header, not by the drain itself).
    tail: Line<AtomicU64>,
    /// What the consumer gave back (written by the consumer).
    given: Line<GivenBack>,
    /// The consumer's lock and position.
    cons: Line<Lock<Cons>>,
    ring: OnceLock<Ring>,
    size: usize,
    max_frames: u64,
    max_bytes: u64,
    /// The warm start: a producer that finds the ring empty at or past
    /// this offset goes back to its start. At least [`HOT`], and at least
    /// the ring space that every frame the budgets allow takes (their
    /// bytes, and a header and rounding each): until the consumer has
    /// read the padding to the ring's end, the frames after it have only
    /// the space before it, so a warm start any nearer would refuse
    /// frames within the budgets as full (a 64 KiB message stream, with
    /// frames published one at a time, lost its fifth frame after a
    /// start at 256 KiB, and with it the demo's acknowledgement).
    warm: u64,
}

/// Takes one of the inbox's locks. They are biased locks
/// ([`crate::biased`]): the thread that keeps taking one (the sender's
/// thread for the producers' lock, the receiver's for the consumer's)
/// takes and releases it with plain stores and loads, where a `Mutex` made
/// a locked compare-and-swap and a locked exchange, four locked
/// instructions a message across threads; another producer revokes the
/// bias (each revocation costs a `membarrier`; a lock is granted a bias at
/// most [`crate::biased::GRANTS`] times in its life), and a lock shared for
/// good settles as an ordinary one. A
/// panic (in a fill or a consumer's callback) releases the lock with the
/// state consistent between its statements, so there is no poisoning.
#[cfg(not(loom))]
#[inline]
fn lock<T>(m: &Lock<T>) -> Guard<'_, T> {
    m.lock()
}

/// In the loom model, loom's mutex: the biased lock has a model of its own
/// (`tests/loom_biased.rs`), which shows it excludes and orders as a mutex
/// does; the inbox's model (`tests/loom_inbox.rs`) needs only that.
#[cfg(loom)]
fn lock<T>(m: &Lock<T>) -> Guard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inbox {
    /// An empty inbox for `frames` frames and `bytes` bytes (no memory
    /// for its ring until its first frame).
    pub fn new(frames: usize, bytes: usize) -> Inbox {
        let frames = frames.min(FRAMES_MAX);
        let size = ring_size(frames, bytes);
        let ring = OnceLock::new();
        // In the loom model, the ring at once (see `Inbox::drain`).
        #[cfg(loom)]
        let _ = ring.set(Ring::new(size));
        Inbox {
            prod: Line(Lock::new(Prod::default())),
            tail: Line::default(),
            given: Line::default(),
            cons: Line(Lock::new(Cons::default())),
            ring,
            size,
            max_frames: frames as u64,
            max_bytes: bytes as u64,
            warm: warm_start(frames, bytes),
        }
    }

    /// Whether no frame is waiting (published and not given back), by the
    /// tail and the given-back position: two loads and no ring memory, for
    /// any thread (a deliverer keeping a frame behind those waiting, an
    /// engine thread's poll of every endpoint). A `false` while a drain
    /// runs only sends the caller the longer way. The endpoint's own
    /// thread, waiting, tests the seal instead ([`Inbox::idle_as`]).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.tail.0.load(Ordering::Acquire) == self.given.0.head.load(Ordering::Acquire)
    }

    /// Reads what the consumer gave back into the producers' view.
    #[inline]
    fn refresh(&self, p: &mut Prod) {
        // `Acquire` pairs with the consumer's `Release` store: its reads
        // of the space given back happened before the writes that reuse it.
        p.head = self.given.0.head.load(Ordering::Acquire);
        p.head_frames = self.given.0.frames.load(Ordering::Relaxed);
        p.head_bytes = self.given.0.bytes.load(Ordering::Relaxed);
    }

    /// Whether one more frame of `len` bytes is within the budgets, by
    /// the view in `p`.
    #[inline]
    fn within_budgets(&self, p: &Prod, len: u64) -> bool {
        p.frames.wrapping_sub(p.head_frames) < self.max_frames
            && p.bytes.wrapping_sub(p.head_bytes).saturating_add(len) <= self.max_bytes
    }

    /// Puts a frame of `len` bytes, which `fill` writes (all of them), in
    /// the inbox.
    pub fn push(&self, chan: u16, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), Refused> {
        self.push_kind(KIND_FRAME, chan, len, fill)
    }

    /// Puts a message of `len` bytes without a frame (its payload alone,
    /// which `fill` writes) in the inbox: for a sender that has the
    /// receiver's verdict already, so that nothing of a frame's header is
    /// read at the drain (54 bytes fewer to write and to carry across to the
    /// draining core: a 40-byte message and its inbox header fit one cache
    /// line instead of two).
    pub fn push_message(
        &self,
        chan: u16,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), Refused> {
        self.push_kind(KIND_MESSAGE, chan, len, fill)
    }

    /// [`Inbox::push`] of an entry of `kind`, [`KIND_FRAME`] or
    /// [`KIND_MESSAGE`].
    #[inline(always)]
    fn push_kind(
        &self,
        kind: u16,
        chan: u16,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), Refused> {
        let mut g = lock(&self.prod.0);
        let p = &mut *g;
        if p.closed {
            return Err(Refused::Closed);
        }
        if len > self.size - HDR {
            return Err(Refused::Full);
        }
        let charged = counted(kind, len as u64);
        if !self.within_budgets(p, charged) {
            self.refresh(p);
            if !self.within_budgets(p, charged) {
                return Err(Refused::Full);
            }
        }
        let size = self.size as u64;
        let need = footprint(len);
        let at = p.at;
        if cfg!(any(test, debug_assertions)) {
            assert_eq!(at, p.tail % size);
        }
        let rest = size - at;
        // Padding to the ring's end first if the frame does not fit
        // before it, or if the ring is empty and this is past its warm
        // start (`warm`, at least as far as the frames the budgets allow
        // reach: see `Inbox::warm`), where the frame and the word after it
        // fit before the padding's header.
        let mut pad = if rest < need { rest } else { 0 };
        if pad == 0 && at >= self.warm && need + HDR as u64 <= at && p.tail - p.checked >= HOT_CHECK
        {
            p.checked = p.tail;
            self.refresh(p);
            if p.head == p.tail {
                pad = rest;
            }
        }
        // Room for the entry and for the word after it, which this push
        // marks empty: the next entry's header (given back, so that it is
        // not the oldest waiting entry's).
        let end = p.tail + pad + need;
        if end + HDR as u64 - p.head > size {
            self.refresh(p);
            if end + HDR as u64 - p.head > size {
                return Err(Refused::Full);
            }
        }
        let ring = self.ring.get_or_init(|| Ring::new(self.size));
        // A padding runs to the ring's end: the frame is at its start.
        let start = if pad > 0 { 0 } else { at as usize };
        {
            let _held = ring.held_write(start + HDR, len);
            // SAFETY: `[start, start + need)` is in the ring (`need` fits
            // before its end: it did at `at`, or `start` is 0 and `need <=
            // size`) and in `[tail, head + size)`, checked above: given back
            // by the consumer, not yet sealed, written only under the lock
            // held.
            let body = unsafe { ring.bytes_mut(start + HDR, len) };
            #[cfg(loom)]
            FILL_AT.with(|c| c.set(p.tail + pad + HDR as u64));
            fill(body);
        }
        ring.mirror(start + HDR, need as usize - HDR);
        // `need` fits before the ring's end from `start` (above).
        let mut next = start as u64 + need;
        if next == size {
            next = 0;
        }
        // The word after the entry marked empty, before the entry is
        // sealed (`Relaxed`: the seal's `Release` orders it): whatever an
        // earlier lap left there (a payload's bytes, an old seal) is never
        // read as a header. Then the seal, after the bytes.
        // SAFETY: `next` and `start` are multiples of 8 below the ring's
        // size; both words are in `[tail, head + size)` (the room checked
        // above), this producer's until sealed.
        unsafe {
            ring.store_seal(next as usize, 0, Ordering::Relaxed);
            ring.store_seal(
                start,
                seal_word(kind, len as u32, chan, p.tail + pad),
                Ordering::Release,
            );
        }
        if pad > 0 {
            #[cfg(loom)]
            PADDED.with(|c| {
                let mut n = c.get();
                n[usize::from(rest >= need)] += 1;
                c.set(n);
            });
            // The padding's seal last: a consumer that reads it goes to the
            // ring's start, whose frame is sealed by then (an earlier lap's
            // seal there, sealed first, would be read instead).
            // SAFETY: `at` is a multiple of 8 below the ring's size, in
            // `[tail, head + size)`.
            unsafe {
                ring.store_seal(
                    at as usize,
                    seal_word(KIND_PAD, 0, 0, p.tail),
                    Ordering::Release,
                )
            };
        }
        p.tail = end;
        p.at = next;
        p.frames += 1;
        p.bytes += charged;
        // The tail, for `is_empty` and the drain's recovery from a header
        // that fails its checks (the consumer reads the seals): `Release`
        // after the seals.
        self.tail.0.store(p.tail, Ordering::Release);
        Ok(())
    }

    /// Runs the entries waiting, in order, through `f` (its channel, whether
    /// it is a frame, [`Inbox::push`], or a message's payload alone,
    /// [`Inbox::push_message`], and its bytes, read in place), until the
    /// header at its position is not sealed, `f` returns `false` (after
    /// that one), or it has run the frame budget's count; returns how
    /// many. Each one's space goes back to the producers once `f` has run
    /// it.
    ///
    /// The owner learns of an entry from its seal, on the entry's own
    /// line, not from the tail on a line of its own: one cache line fewer
    /// fetched before the entry's bytes. Entries sealed while it runs are
    /// run too (a burst's later frames, written while its first ones run),
    /// up to the frame budget's count: unbounded, a flood from other
    /// threads kept the owner's `recv_ref` in one drain for as long as it
    /// lasted (56 ms in the 2026-12-01 review's test), its receive queue
    /// full and nothing sent. Every entry waiting when it starts is run
    /// (at most the budget's count wait).
    pub fn drain(&self, mut f: impl FnMut(u16, bool, &[u8]) -> bool) -> u64 {
        let mut c = lock(&self.cons.0);
        // In the loom model the ring is made with the inbox (loom has no
        // `OnceLock`), so that a drain's first seal load is what loom sees
        // it depend on a push by.
        let Some(ring) = self.ring.get() else {
            return 0;
        };
        let size = self.size as u64;
        let mut n = 0;
        while n < self.max_frames {
            let at = c.at as usize;
            // Checked in the crate's tests too (its release build has no
            // debug assertions).
            if cfg!(any(test, debug_assertions)) {
                assert_eq!(c.at, c.head % size);
            }
            // SAFETY: `at` is a multiple of 8 (every footprint is) below
            // the ring's size.
            let w = unsafe { ring.load_seal(at) };
            let kind = kind_of(w);
            if kind == KIND_EMPTY {
                break;
            }
            let len = w as u32 as usize;
            if !sealed_at(w, c.head) || at + HDR + len > self.size {
                // Never: every word at the consumer's position is the
                // seal of the entry there or the "empty" stored before the
                // previous entry's seal. Were one wrong, nothing past it is
                // read; the rest published is dropped.
                self.skip_to_tail(&mut c);
                break;
            }
            if kind == KIND_PAD {
                c.head += size - at as u64;
                c.at = 0;
                continue;
            }
            // SAFETY: the entry's bytes are in the ring (just checked) and
            // were written before its seal, loaded with `Acquire`; producers
            // do not write them until they are given back, after `f`
            // returns.
            let frame = unsafe { ring.bytes(at + HDR, len) };
            c.head += footprint(len);
            // The entry lies before the ring's end (checked above).
            c.at += footprint(len);
            if c.at == size {
                c.at = 0;
            }
            // The next header's line, while `f` runs: where it is not this
            // entry's, the drain's last load (the "empty" the producer
            // stored there) would be a miss after the entry has run, on the
            // way back to the application (a 56-byte message's entry fills
            // its line).
            ring.prefetch(c.at as usize);
            c.frames += 1;
            c.bytes += counted(kind, len as u64);
            n += 1;
            let go_on = {
                let _held = ring.held_read(at + HDR, len);
                f((w >> 32) as u16, kind == KIND_FRAME, frame)
            };
            self.give_back(&c);
            if !go_on {
                break;
            }
        }
        // Paddings skipped (or a bad header's rest dropped) since.
        self.give_back(&c);
        n
    }

    /// After a header that fails its checks: the consumer's position moved
    /// to the published tail, if that is ahead (the entries before it
    /// dropped unread).
    #[cold]
    fn skip_to_tail(&self, c: &mut Cons) {
        let tail = self.tail.0.load(Ordering::Acquire);
        if tail > c.head {
            c.head = tail;
            c.at = tail % self.size as u64;
        }
    }

    /// Whether nothing is sealed at the consumer's position, tested by
    /// the endpoint's own thread (`me`) as it waits: the seal's word, on
    /// the next entry's line, and none of the producers' lines (the tail's
    /// was one more miss in a row before the entry's). Under the
    /// consumer's lock (biased to that thread: a few plain loads and
    /// stores), so that no other drain moves the position meanwhile and
    /// the word is a header's while it is loaded; `false` if another
    /// thread holds it (a drain runs).
    #[cfg(not(loom))]
    #[inline(always)]
    pub fn idle_as(&self, me: crate::biased::Me) -> bool {
        match self.cons.0.try_lock_inline_as(me) {
            Some(c) => self.unsealed(&c),
            None => false,
        }
    }

    /// In the loom model, [`Inbox::idle_as`] (loom's mutex).
    #[cfg(loom)]
    pub fn idle(&self) -> bool {
        match self.cons.0.try_lock() {
            Ok(c) => self.unsealed(&c),
            Err(_) => false,
        }
    }

    /// Whether the header at `c`'s position is not sealed.
    #[inline(always)]
    fn unsealed(&self, c: &Cons) -> bool {
        match self.ring.get() {
            // SAFETY: the consumer's position is a multiple of 8 below the
            // ring's size.
            Some(ring) => kind_of(unsafe { ring.load_seal(c.at as usize) }) == KIND_EMPTY,
            None => true,
        }
    }

    /// Publishes the consumer's position: space and budget for producers.
    #[inline]
    fn give_back(&self, c: &Cons) {
        let g = &self.given.0;
        g.frames.store(c.frames, Ordering::Relaxed);
        g.bytes.store(c.bytes, Ordering::Relaxed);
        // `Release`: the reads of the frames given back happen before a
        // producer's `Acquire` load sees this, and so before it reuses them.
        g.head.store(c.head, Ordering::Release);
    }

    /// Empties the inbox; how many frames it held.
    pub fn clear(&self) -> u64 {
        self.drain(|_, _, _| true)
    }

    /// Closes the inbox: frames pushed from now on are refused as
    /// [`Refused::Closed`]; those waiting are dropped. Returns how many.
    pub fn close(&self) -> u64 {
        lock(&self.prod.0).closed = true;
        // Every push that took the producers' lock before it was closed
        // published its frame before letting go of it: this sees them all.
        self.clear()
    }
}

/// An entry's seal ([`HDR`]): its length, channel, kind and position
/// (bytes ever, a multiple of 8; its bits 3 to 16).
#[inline(always)]
pub fn seal_word(kind: u16, len: u32, chan: u16, pos: u64) -> u64 {
    u64::from(len) | u64::from(chan) << 32 | u64::from(kind) << 48 | pos << (POS_SHIFT - 3)
}

/// A header word's kind.
#[inline(always)]
fn kind_of(w: u64) -> u16 {
    (w >> 48) as u16 & 3
}

/// Whether a header word holds the position bits of an entry at `pos` (a
/// multiple of 8).
#[inline(always)]
fn sealed_at(w: u64, pos: u64) -> bool {
    (w ^ pos << (POS_SHIFT - 3)) >> POS_SHIFT == 0
}

#[cfg(all(test, not(loom)))]
mod tests;
