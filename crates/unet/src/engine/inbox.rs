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
//!   view (reading the consumer's line only when the view says no), writes
//!   the header and the bytes, and publishes the new tail with one
//!   `Release` store. The lock is held only by engine code, across a
//!   bounds check and a copy of at most one frame (the copy's source is
//!   a frame, the engine's own mapping of a segment, which a client
//!   cannot unmap or make block, an applet's array on the engine's heap,
//!   or an in-process sender's own message): no applet or client code
//!   runs under
//!   it, so a client cannot hold it; a preempted holder delays the other
//!   producers by one copy. Each frame's tail is published at once, not
//!   once per pass, so that the consumer runs the first frames of a burst
//!   while the rest are written (the two threads overlap).
//! - **The consumer** (the holder of the endpoint's receive lock, which
//!   drains, [`super::Engine::drain`]) reads the tail with `Acquire`, runs
//!   each frame in place, and gives its space back once it has run: one
//!   `Release` store of its position (after the frames' and bytes'
//!   counts) on a line only the consumer writes, which producers read
//!   only when their view says the inbox is full; never a counter both
//!   sides write. (Giving back every 16 frames instead, as first built,
//!   held up to 15 frames that had run against the budget: the demo's
//!   64 KiB token flow, which keeps the inbox near its byte budget, lost
//!   frames as full and stalled.)
//! - **A short entry beside the last push's tag.** A push of at most
//!   [`COPY_MAX`] bytes also copies the entry onto the line of its tag
//!   ([`LastPush`]), the one a waiting consumer reads,
//!   and a consumer whose only published entry it is reads it there
//!   ([`Inbox::copied`]), into its own memory, and runs it from that: a
//!   round trip's message then crosses to the consumer's core on the
//!   tag's line alone, its own line staying in the producer's cache. Two
//!   lines to cross, even with the waiting consumer asking for the
//!   entry's, cost some 30 to 55 ns a direction more than one on the
//!   Intel Xeon guest, whose line crosses in about 125 ns
//!   (`examples/handoff_lines`; docs/benchmarks.md). The copy is a
//!   sequence lock under the producers' lock: its tag ([`LastPush::tag`],
//!   the entry's place and footprint) without the copy, a `Release`
//!   fence, the words, the tag with the copy and the entry's header; the consumer
//!   reads the tag, the words, an `Acquire` fence and the tag again, and
//!   takes the copy only if both tags are the same and name the entry at
//!   its position, else reads the ring, which holds every entry as before.
//!   Every push stores its tag (`Release`), so it is only ever the last
//!   push's, and a drain reads it first ([`Inbox::last_alone`]): when it
//!   names the drain's position, the entry there is the last pushed and
//!   published, and the drain runs it without reading the tail, which
//!   lies on a line of its own; so the tag's line, with a copy of up to
//!   56 bytes, is the only one a round trip's message crosses on.
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
//!   producer goes back to the ring's start when it finds the ring empty
//!   in two places: between [`WARM`] and [`COLD`] bytes, where a
//!   consumer that answers each frame ([`Inbox::answered`]) marked it
//!   empty at the end of a drain ([`Inbox::idle`]), so that a round
//!   trip's messages keep to the ring's first 64 KiB, in both cores'
//!   caches, the producer reading the mark once a pass; and past
//!   [`HOT`] bytes, by the consumer's give-back, so that a steady stream
//!   of bursts keeps to the first quarter MiB, and only those pages are
//!   ever touched (the rest of the ring is there for the budgets' frames).
//!   The going back writes nothing in the ring: the producer stores
//!   where it left off ([`Inbox::restart`]), and marks its tag
//!   ([`TAG_RESTARTED`]), before the tail that
//!   publishes the frame at the start, and the consumer, reaching that
//!   position, skips to the start without reading there. So the bytes
//!   skipped are free at once: the frames after the going back have the
//!   whole ring, as any frames within the budgets need. (A padding
//!   entry, as a frame that does not fit before the ring's end still
//!   gets, holds its bytes until the consumer reads it; going back by
//!   one, the warm start had to be past the budgets' whole space, 4 MiB
//!   and more by default: a steady stream walked 4 MiB, past a core's
//!   L2, every inbox that had carried that much kept its pages, and a
//!   fresh one took a page fault every 4 KiB of them. The standard
//!   applet's round trip on `loop` at 4 KiB fell from 1.60-1.64x U-Net's
//!   to 1.32-1.36x with the nearer start, and at 1 KiB in a fresh
//!   process from 2.3-2.7 µs to 1.5-1.8 µs: docs/benchmarks.md.)
//! - **Closing.** [`Inbox::close`] marks the inbox closed under the
//!   producers' lock, then empties it, counting what it finds: a push
//!   that took the lock first is published and is counted there; one that
//!   takes it after is refused as [`Refused::Closed`]. Each frame is
//!   consumed once (by a drain or by the closing), so each is counted
//!   once; no fence is needed on the push path.
//! - **One consumer at a time, by the caller's lock.** The consumer's
//!   position (`Cons`) has no lock of its own: the consumer's calls
//!   ([`Inbox::drain`], [`Inbox::clear`], [`Inbox::close`]) are `unsafe`,
//!   their callers serialise them, and the engine makes every one under
//!   the endpoint's receive lock, which a drain holds anyway
//!   ([`super::Port::drain_inbox`], with the guard checked to be that
//!   lock's). A lock of the inbox's own, taken inside the receive lock, was
//!   some 21 instructions a drain, a drain a message in a ping-pong
//!   (`xthr_count` recv, lent, 40 B: 548.6 to 525.6 instructions a message
//!   at bursts of 1, 331.1 to 329.2 at bursts of 25).
//! - **The model.** `tests/loom_inbox.rs` runs this code under loom (built
//!   alone as `unet::inbox` with `--cfg loom`, hence its `pub` items; the
//!   producers' lock is then loom's mutex, and so is [`Locked`]'s, which
//!   serialises the consumer's calls there; loom checks that they are
//!   serialised, the consumer's position being in loom's `UnsafeCell`, and
//!   watches the ring's bytes a word at a time, `Ring::held_read`): each
//!   `Acquire` and `Release` of the push, the drain and the give-back
//!   weakened to `Relaxed` makes it fail (`is_empty`'s loads are a hint:
//!   `drain` loads the tail again), and so does the copy's sequence lock
//!   without its clearing, either fence or the second load of the tag.

use std::ptr::NonNull;
use std::sync::OnceLock;

#[cfg(loom)]
use loom::cell::UnsafeCell;
#[cfg(not(loom))]
use std::cell::UnsafeCell;

#[cfg(not(loom))]
use crate::biased::{BiasedGuard as Guard, BiasedLock as Lock};
#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering, fence};
#[cfg(loom)]
use loom::sync::{Mutex as Lock, MutexGuard as Guard};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering, fence};

/// The most frames an inbox holds, whatever its budget says.
pub const FRAMES_MAX: usize = 1 << 16;
/// The most bytes an inbox's ring has, whatever its byte budget says.
pub const RING_MAX: usize = 64 << 20;
/// Bytes of a frame's header in the ring: its length (`u32`), channel
/// (`u16`) and kind (`u16`, [`KIND_FRAME`], [`KIND_MESSAGE`] or
/// [`KIND_PAD`]), little-endian.
const HDR: usize = 8;
/// A frame's header.
const KIND_FRAME: u16 = 0;
/// A message without a frame: its payload alone (a delivery with a kept
/// verdict, [`Inbox::push_message`]).
const KIND_MESSAGE: u16 = 2;
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

/// Whether ring offset `at` lies between [`WARM`] and [`COLD`]: where a
/// consumer that answers each frame marks the ring found empty
/// ([`Inbox::idle`]), and where a producer looks for that mark and goes
/// back on it. One comparison (a stream's push past the window makes two
/// where it made one before the mark; with three, `QUEUED=1 LENT=1
/// xthr_count 4096 16400 25` counted 9 instructions a message more than
/// one).
#[inline(always)]
fn in_warm_window(at: u64) -> bool {
    at.wrapping_sub(WARM) < COLD - WARM
}

/// The rest of the ring up to its end is padding: the next frame is at
/// its start.
const KIND_PAD: u16 = 1;
// The drain tells a frame's or a message's kind from any other by
// `kind & !KIND_MESSAGE == 0`.
const _: () = assert!(KIND_FRAME == 0 && KIND_MESSAGE == 2 && KIND_PAD & !KIND_MESSAGE != 0);
/// A producer between this offset and [`COLD`] goes back to the ring's
/// start where the consumer marked the ring empty at the producer's tail
/// ([`Inbox::idle`]): the warm start a round trip keeps to, 64 KiB,
/// whatever its frames' size.
///
/// A producer reads the mark's line, which the consumer wrote, once a
/// pass over the warm start, before it writes its entry: a line from the
/// other core on the round trip's way, which the consumer's next mark
/// then takes back. So a push pays for it once in `WARM / footprint`
/// pushes: the longer the pass, the less. With 1 KiB, a round trip of
/// 1 KiB messages paid it at every push, one of 1,000 bytes at every
/// second and one of 56 bytes at one push in 16. On the Intel Xeon guest,
/// whose line crosses in some 125 ns, the lent standard applet's round
/// trip on `loop` went with 64 KiB from 1.51-1.61x U-Net's to 1.33-1.34x
/// at 1 KiB, 1.45-1.47x to 1.31x at 2 KiB, 1.54-1.58x to 1.44-1.47x at
/// 57 B and 1.29-1.32x to 1.23x at 56 B, 0 B level (`rtt-compare.py`,
/// two sets of twenty rounds); its sender's part of a 1 KiB direction
/// some 50 ns shorter (docs/benchmarks.md, "The warm start a pass of 64
/// KiB"). 16 KiB took most of that; 128 KiB more at 4 KiB only. What the
/// pass costs is room in the caches: a round trip's frames walk 64 KiB of
/// the ring (a stream's walk [`HOT`] bytes anyway), and an entry of up to
/// [`COPY_MAX`] bytes crosses on the tag's line, its ring line never read
/// by the consumer. On the AMD EPYC guest, whose lines cross faster and
/// whose L2 is a quarter of the Xeon's, a 4 KiB start for long frames
/// made the 1 KiB round trip slower than a 1 KiB start (1.82x against
/// 1.69x, "A round trip's inbox kept warm", before the copy beside the
/// tag and the copies that ask for their lines first); it has not been
/// measured there since. Until 2026-12-06 the warm start was 1 KiB (and
/// 256 bytes for frames of one line before that day's first change):
/// four lines had been chosen while short entries crossed in the ring,
/// whose lines were then best kept few and hot. Only a consumer that answers
/// each frame marks it ([`Inbox::answered`]): marked by every drain, a
/// stream of small frames that the consumer keeps up with went back so
/// too, and ran 1 to 15% slower at 256 and 512 B ("A round trip's inbox
/// kept warm").
#[cfg(not(loom))]
pub const WARM: u64 = 64 << 10;
/// Past this offset the consumer marks nothing and a producer walks on
/// (to [`HOT`]): a stream's bursts longer than this go through the ring.
/// The window from [`WARM`] is 128 KiB wide, so that a round trip's
/// frames of up to that footprint land in it and go back (and two frames
/// of just over `WARM` end within it, as the tests' do). Below [`HOT`]:
/// with the mark's going back at any offset up to `HOT`, burst-25 at 4
/// KiB fell from 44% of plain U-Net to 25% (with the mark read and no
/// going back, 41%): what costs a stream is its frames kept to lines the
/// consumer has just read, likely because the producer's stores then take
/// each line back from the consumer's cache. (Streams no longer mark:
/// [`Inbox::answered`].)
#[cfg(not(loom))]
pub const COLD: u64 = 192 << 10;
/// A producer that finds the ring empty past this offset by the
/// consumer's give-back goes back to its start (checked at most every
/// [`HOT_CHECK`] bytes): a stream's warm start, within a core's L2.
#[cfg(not(loom))]
pub const HOT: u64 = 256 << 10;
/// How far apart a producer past [`HOT`] reads the consumer's position.
#[cfg(not(loom))]
const HOT_CHECK: u64 = 64 << 10;
/// [`WARM`] and [`COLD`] in the loom model: its rings of a few hundred
/// bytes reach both ways of going back, and a drain that ends at 80 bytes
/// marks nothing (`loom_inbox`'s bad header past the ring's end, whose
/// frames lie where its set-up puts them).
#[cfg(loom)]
pub const WARM: u64 = 96;
/// See [`WARM`].
#[cfg(loom)]
pub const COLD: u64 = 128;
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
}

/// In the loom model, counts a padding ([`PADDED`]): `[0]` for a frame
/// that did not fit before the ring's end, `[1]` for a warm restart.
#[cfg(loom)]
fn padded(why: usize) {
    PADDED.with(|c| {
        let mut n = c.get();
        n[why] += 1;
        c.set(n);
    });
}

#[cfg(all(test, not(loom)))]
std::thread_local! {
    /// The lines [`Inbox::prefetch_next`] last asked for on this thread
    /// (offset in the ring, lines), for the tests.
    pub(crate) static PREFETCHED: std::cell::Cell<Option<(usize, usize)>> =
        const { std::cell::Cell::new(None) };
    /// The line of the next frame's header each drain on this thread
    /// asked for while it ran a frame (offset in the ring), in order, for
    /// the tests.
    pub(crate) static AHEAD: std::cell::RefCell<Vec<usize>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// How many times [`Inbox::ask_for_push_lines`] asked on this thread
    /// (each time for the tag's line), for the tests.
    pub(crate) static TAG_ASKED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// The ring's lines (offset, lines) [`Inbox::ask_for_push_lines`] last
    /// asked for on this thread, for the tests.
    pub(crate) static PUSH_ASKED: std::cell::Cell<Option<(usize, usize)>> =
        const { std::cell::Cell::new(None) };
    /// The lines of its own (offset in the ring, lines) each drain on this
    /// thread asked for before it ran the last frame published, in order,
    /// for the tests.
    pub(crate) static OWN_LINES: std::cell::RefCell<Vec<(usize, usize)>> =
        const { std::cell::RefCell::new(Vec::new()) };
    /// How many times a drain on this thread read [`Inbox::restart`]'s
    /// line, for the tests.
    pub(crate) static RESTART_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// How many times a drain on this thread read the tail
    /// ([`Inbox::pos`]), for the tests.
    pub(crate) static TAIL_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
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
    /// The frames and frame bytes pushed ever up to which the budgets hold
    /// by that give-back: the consumer's count of each, as last read, plus
    /// the budget ([`Inbox::within_budgets`]).
    frames_end: u64,
    bytes_end: u64,
    /// The tail when the consumer's position was last read past [`HOT`].
    checked: u64,
    /// Where the last going back to the ring's start ([`Inbox::restart`])
    /// resumed: the consumer skips the bytes before it unread, so they
    /// count as given back, whatever it has given back yet
    /// ([`Inbox::refresh`]).
    floor: u64,
}

/// The last push's tag and a copy of its entry if it is short, on one
/// line, the one a waiting consumer reads ("the tag's line"; it held the
/// tail itself until 2026-12-05, as `Tail`): written by
/// producers, read by the consumer. The tail, which a consumer reads only
/// when the tag does not tell it enough, is on a line of its own
/// ([`Inbox::pos`]).
#[derive(Debug)]
struct LastPush {
    /// The last push's tag ([`place_tag`]): its entry's place, whether a
    /// warm restart came just before it, and its footprint
    /// ([`sized_tag`]), or, once [`LastPush::copy`] holds the entry, its
    /// header ([`copied_tag`]). Every push stores it, first without the
    /// copy, so that it is only ever the last push's, and a consumer that
    /// reads it the same before and after the copy's words read no later
    /// push's (a sequence lock: [`Inbox::push_locked`]). Each store is
    /// `Release`, after the entry's writes: a consumer that reads, with
    /// `Acquire`, a tag naming its position has the entry published
    /// ([`Inbox::last_alone`]). [`TAG_NONE`] before any push.
    tag: AtomicU64,
    /// The last entry's bytes, if [`LastPush::tag`] says so: little-endian,
    /// read whole from the ring where the entry was written (past its
    /// length, whatever the ring held there, never handed out).
    copy: [AtomicU64; COPY_WORDS],
}

impl Default for LastPush {
    fn default() -> LastPush {
        LastPush {
            tag: AtomicU64::new(TAG_NONE),
            copy: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The words of [`LastPush::copy`]: what is left of the tag's line.
#[cfg(not(loom))]
const COPY_WORDS: usize = 7;
/// [`COPY_WORDS`] in the loom model: three (24 bytes), which its frames
/// of 0 to 20 bytes take. With five, `loom_inbox` ran 524 s in CI (417 s
/// before the copy), with three 42 s (85 s once every push stored its
/// tag and a drain read it for a restart, 188 s since a drain reads the
/// tag first), and it still fails with the copy's second tag load, the
/// tag's or the tail's `Release` or `Acquire`, or the give-back's
/// `Acquire` weakened.
#[cfg(loom)]
const COPY_WORDS: usize = 3;
/// The longest entry copied beside the tag (56 bytes, plain U-Net's
/// inline limit: a round trip's messages up to that size cross between
/// the cores on the tag's line alone).
pub const COPY_MAX: usize = COPY_WORDS * 8;
/// [`LastPush::tag`] before any push: its place, not a multiple of 8,
/// names no entry.
const TAG_NONE: u64 = u64::MAX;
/// In a tag: [`LastPush::copy`] holds the entry, and the tag its header.
const TAG_COPIED: u64 = 1 << 44;
/// In a tag: the push went back to the ring's start with a warm restart
/// ([`Inbox::restart`]) just before its entry.
const TAG_RESTARTED: u64 = 1 << 45;
#[cfg(not(loom))]
const _: () = assert!(std::mem::size_of::<LastPush>() == LINE);
// A copied entry's length and kind fit their fields of a tag.
const _: () = assert!(COPY_MAX < 256 && KIND_FRAME < 16 && KIND_MESSAGE < 16);
// A footprint fits a sized tag's 24 bits of eighths.
const _: () = assert!(((RING_MAX + HDR + 7) >> 3) < 1 << 24);

/// [`LastPush::tag`] for a push whose entry is at ring position `pos`
/// (bytes published ever before it), `restarted` if a warm restart came
/// just before it: the position's low 32 bits and [`TAG_RESTARTED`]. The
/// entries waiting lie within the ring's size of each other, at most
/// [`RING_MAX`] < 2^32, so the low bits tell the entry at the consumer's
/// position from every other that is or was there ([`names`]).
#[inline(always)]
fn place_tag(pos: u64, restarted: bool) -> u64 {
    (pos & 0xffff_ffff) | if restarted { TAG_RESTARTED } else { 0 }
}

/// A [`place_tag`] with its entry's footprint `fp` (its bytes in the ring,
/// a multiple of 8 below 2^27): `fp / 8` in the 24 bits a copy's header
/// would take (bits 32 to 39 and 48 to 63), for a drain that takes the
/// entry on its tag's word alone ([`Inbox::last_alone`]) to check the
/// entry's header against, as it checks it against the tail otherwise.
#[inline(always)]
fn sized_tag(place: u64, fp: u64) -> u64 {
    let q = fp >> 3;
    place | (q & 0xff) << 32 | (q >> 8) << 48
}

/// The footprint in a [`sized_tag`].
#[inline(always)]
fn tag_footprint(tag: u64) -> u64 {
    ((tag >> 32 & 0xff) | (tag >> 48) << 8) << 3
}

/// What a [`place_tag`] gains once [`LastPush::copy`] holds its entry of
/// `len` bytes (at most [`COPY_MAX`]) on `chan` of `kind` (a frame's or a
/// message's): [`TAG_COPIED`], the length, the kind, the channel.
#[inline(always)]
fn copied_tag(len: usize, chan: u16, kind: u16) -> u64 {
    TAG_COPIED | (len as u64) << 32 | u64::from(kind) << 40 | u64::from(chan) << 48
}

/// Whether `tag` is of a push that went back to the ring's start
/// ([`TAG_RESTARTED`]) from a consumer at ring position `head`, `rest`
/// bytes before the ring's end: its entry is at the start, the restart at
/// `head` (the ring was empty where the push went back, so the consumer
/// had given back up to there, and nothing lies between).
#[inline(always)]
fn restarted_to(tag: u64, head: u64, rest: u64) -> bool {
    tag & TAG_RESTARTED != 0 && names(tag, head + rest)
}

/// The length, channel and kind in a [`copied_tag`] (as [`read_header`]'s).
#[inline(always)]
fn read_copy_tag(tag: u64) -> (u32, u16, u16) {
    (
        u32::from((tag >> 32) as u8),
        (tag >> 48) as u16,
        ((tag >> 40) & 0xf) as u16,
    )
}

/// Whether `tag` is of the push whose entry is at ring position `pos`, for
/// a `pos` at or before that push's: see [`place_tag`].
#[inline(always)]
fn names(tag: u64, pos: u64) -> bool {
    tag & 0xffff_ffff == pos & 0xffff_ffff
}

/// Whether `tag` (not [`TAG_NONE`]) is of a push whose entry lies before
/// ring position `pos`, for a `pos` at most [`RING_MAX`] past it or
/// before it: the push's entry is behind a consumer at `pos`, so nothing
/// was pushed after it when the tag was read.
#[inline(always)]
fn behind(tag: u64, pos: u64) -> bool {
    u64::from((pos as u32).wrapping_sub(tag as u32)).wrapping_sub(1) < RING_MAX as u64
}

/// The entry at a drain's position, told by the last push's tag alone
/// ([`Inbox::last_alone`]): where it ends, and its length, channel and
/// kind if its bytes were read from the copy beside the tag.
struct Alone {
    end: u64,
    copy: Option<(u32, u16, u16)>,
}

/// The consumer's position (ahead of what it gave back), touched only by
/// the consumer's calls, which their callers serialise ([`ConsCell`]).
///
/// `frames` and `bytes` are not side by side (`repr(C)` keeps the order):
/// adjacent, the compiler added one to each with a vector load, add and
/// store, six instructions a frame where two suffice.
#[derive(Debug, Default)]
#[repr(C)]
struct Cons {
    head: u64,
    /// `head` modulo the ring's size (as [`Prod::at`]).
    at: u64,
    frames: u64,
    /// The footprint of the last frame run (at most the ring's size).
    last: u64,
    bytes: u64,
    /// `frames` when the consumer's endpoint last sent a message
    /// ([`Inbox::answered`]).
    sent: u64,
    /// `sent + 1` if that message answered exactly one frame, as a round
    /// trip's do, else 0: a drain that ends there (one frame run since),
    /// with the ring empty within the warm window, marks it so for
    /// producers ([`Inbox::idle`]). (0 is never `frames` at a drain's end
    /// within the window: a frame has run.)
    mark_at: u64,
}

/// The consumer's position's cell: no lock, the consumer's calls being
/// serialised by their callers (in the loom model, loom's cell, which
/// checks that they are).
struct ConsCell(UnsafeCell<Cons>);

impl ConsCell {
    /// Runs `f` on the consumer's position.
    ///
    /// # Safety
    /// The caller is the one consumer call running on this inbox (the
    /// contract of [`Inbox::drain`]): nothing else reads or writes the
    /// position until `f` returns.
    #[cfg(not(loom))]
    #[inline(always)]
    unsafe fn with<R>(&self, f: impl FnOnce(&mut Cons) -> R) -> R {
        // SAFETY: the caller's contract: no other reference to the
        // position lives while `f` runs.
        f(unsafe { &mut *self.0.get() })
    }

    /// [`ConsCell::with`] in the loom model, which checks the contract.
    #[cfg(loom)]
    unsafe fn with<R>(&self, f: impl FnOnce(&mut Cons) -> R) -> R {
        // SAFETY: as above; loom fails the model if another access to the
        // cell overlaps this one.
        self.0.with_mut(|c| f(unsafe { &mut *c }))
    }
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
    /// Where the next frame is expected and how long the last one was,
    /// `at | last << 32` of [`Cons`] (`Relaxed`: only a hint, for
    /// [`Inbox::prefetch_next`]).
    next: AtomicU64,
    /// Frames dropped with a header that failed its check, ever
    /// ([`Inbox::drop_rest`]; written by the consumer alone, read for the
    /// endpoint's counters).
    dropped: AtomicU64,
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
}

// SAFETY: `Ring` owns its block (freed once, in `drop`); the `Inbox`
// protocol (producers write only `[tail, head + len)`, under their lock;
// the consumer reads only `[head, tail)`, published with `Release` and
// read with `Acquire` both ways, and never writes; a producer reads past
// its entry only under the lock, `Ring::copy_words`) keeps every write
// disjoint from every other access, so sharing the pointer between
// threads is sound.
unsafe impl Send for Ring {}
// SAFETY: as for `Send`.
unsafe impl Sync for Ring {}

/// A cache line's bytes (the ring's start is on one).
const LINE: usize = 64;

/// The lines `fp` bytes from ring offset `at` lie on (an entry's
/// footprint, or a frame's bytes).
#[inline(always)]
fn lines_spanned(at: usize, fp: usize) -> usize {
    ((at % LINE) + fp).div_ceil(LINE)
}

/// The most ring lines [`Inbox::ask_for_push_lines`] asks for: about as
/// many as a core's line-fill buffers (a longer entry's other lines are
/// asked for by its copy, `shm::copy_message`, just before it writes
/// them). Asking for up to 64 read level at 1 to 4 KiB.
#[cfg(not(loom))]
pub(crate) const ASK_LINES_MAX: usize = 16;

/// The most lines [`Inbox::prefetch_next`] asks for at an empty poll, and
/// the longest last frame, in lines, for which it asks: a waiting
/// consumer that asks for the lines of a long frame takes them from the
/// producer while it writes them (`loop_rtt` with the standard applet at
/// 1 KiB: 1.53 to 1.69 µs without, 1.70 to 1.79 with the first four
/// lines asked for; as `Endpoint::poll_expected` found for a receive
/// buffer's). Eight since 2026-12-06 (four before): the lent applet's
/// round trip at 224 to 448 B went from 1.67-1.96x U-Net's to 1.51-1.66x;
/// with 12, 640 B lost, and with 16, 768 to 960 B (docs/benchmarks.md,
/// "The frames a waiting consumer does not ask for").
const PREFETCH_LINES: usize = 8;

/// A drain that runs a frame of more than this many bytes (its footprint)
/// with another published behind it asks for that one's header first:
/// a shorter frame's next header lies within a line of what the drain has
/// just read ([`Inbox::drain`]).
const HEADER_AHEAD_AFTER: u64 = 4 * LINE as u64;
// An entry on more than `PREFETCH_LINES` lines is longer than
// `HEADER_AHEAD_AFTER`, so the drain's one test of the footprint hides
// none of the frames that ask for their own lines.
const _: () = assert!((PREFETCH_LINES - 1) * LINE >= HEADER_AHEAD_AFTER as usize);

/// The most lines of its own [`Inbox::drain`] asks for, for the last frame
/// published, before it runs it (4 KiB). With 128 lines the lent applet's
/// 8 KiB round trip read 4.41 → 4.50 µs, with 64 4.44 → 4.35; 4 KiB gained
/// with either.
const FRAME_LINES_MAX: usize = 64;

impl Ring {
    fn new(len: usize) -> Ring {
        // Zeroed memory from the allocator: pages are mapped when first
        // touched, so a ring used near its start costs little more. A
        // line more than the ring, so that it can start on a line's
        // boundary (an allocation aligned to 64 would be zeroed by a
        // `memset` of the whole block, touching every page at once), and
        // `COPY_MAX` bytes more past its end, which are never written, for
        // a short entry's copy read whole (`Ring::copy_words`).
        let b: Box<[u8]> = vec![0u8; len + LINE + COPY_MAX].into_boxed_slice();
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
            words: (0..(len + COPY_MAX).div_ceil(8))
                .map(|_| loom::cell::UnsafeCell::new(()))
                .collect(),
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

    /// The [`COPY_MAX`] bytes from byte `at`, which may run past the
    /// ring's end into the block's slack (zeroed, never written): a short
    /// entry's copy, read whole whatever the entry's length
    /// ([`Inbox::push_locked`]).
    ///
    /// # Safety
    /// `at <= self.len`, and no other thread writes those bytes while the
    /// array lives (the inbox's protocol).
    #[inline(always)]
    unsafe fn copy_words(&self, at: usize) -> &[u8; COPY_MAX] {
        if cfg!(any(test, debug_assertions)) {
            assert!(at <= self.len);
            let block_end = self.block.cast::<u8>().as_ptr() as usize + self.block.len();
            assert!(self.ptr.as_ptr() as usize + at + COPY_MAX <= block_end);
        }
        // SAFETY: `at + COPY_MAX <= len + COPY_MAX`, within the block,
        // which holds `len + LINE + COPY_MAX` bytes from at most a line
        // before `ptr` (`Ring::new`) and lives as long as `self`; nothing
        // writes those bytes meanwhile (the caller's contract).
        unsafe { &*self.ptr.as_ptr().add(at).cast::<[u8; COPY_MAX]>() }
    }

    /// Whether the `lines` lines from byte `at` are some and all lie in
    /// the ring: every line starts at `ptr + at + 64 * i` with `i <
    /// lines`, below `ptr + at + 64 * lines <= ptr + len` (checked without
    /// overflow), inside the block. The test of the hints below.
    #[cfg(not(loom))]
    #[inline(always)]
    fn holds_lines(&self, at: usize, lines: usize) -> bool {
        lines > 0 && at <= self.len && lines <= (self.len - at) / LINE
    }

    /// Asks the CPU for the `lines` lines from byte `at`, if they all lie
    /// in the ring (a hint: nothing is read; `shm::fetch_lines`). Nothing
    /// in the loom model.
    #[inline(always)]
    fn prefetch_lines(&self, at: usize, lines: usize) {
        #[cfg(not(loom))]
        if self.holds_lines(at, lines) {
            // SAFETY: `lines > 0` and every line asked for is inside the
            // block (`holds_lines`).
            unsafe { crate::shm::fetch_lines(self.ptr.as_ptr().add(at), lines) }
        }
        #[cfg(loom)]
        let _ = (at, lines);
    }

    /// [`Ring::prefetch_lines`] for writing (`prefetchw`,
    /// `shm::fetch_lines_to_write`): a producer's hint. Not in the loom
    /// model.
    #[cfg(not(loom))]
    #[inline(always)]
    fn ask_lines_to_write(&self, at: usize, lines: usize) {
        #[cfg(target_arch = "x86_64")]
        if self.holds_lines(at, lines) {
            // SAFETY: as in `prefetch_lines` (`holds_lines`).
            unsafe { crate::shm::fetch_lines_to_write(self.ptr.as_ptr().add(at), lines) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (at, lines);
    }

    /// Asks for the line that holds byte `at` (the next frame's header,
    /// for [`Inbox::drain`] while it runs the one before it; a hint, as
    /// [`Ring::prefetch_lines`]).
    #[inline(always)]
    fn prefetch_header(&self, at: usize) {
        let line = at - at % LINE;
        #[cfg(all(test, not(loom)))]
        AHEAD.with(|a| a.borrow_mut().push(line));
        self.prefetch_lines(line, 1);
    }

    /// Asks for the lines of the frame whose bytes are `[at, at + len)`,
    /// from the line that holds `at`, at most [`FRAME_LINES_MAX`] of them
    /// (for [`Inbox::drain`], the last frame published, before it runs
    /// it; a hint, as [`Ring::prefetch_lines`]).
    #[inline(always)]
    fn prefetch_frame(&self, at: usize, len: usize) {
        let first = at - at % LINE;
        let lines = lines_spanned(at, len).min(FRAME_LINES_MAX);
        #[cfg(all(test, not(loom)))]
        OWN_LINES.with(|o| o.borrow_mut().push((first, lines)));
        self.prefetch_lines(first, lines);
    }

    /// What a drain asks for after taking a frame of `len` bytes whose
    /// entry `[at, at + fp)` is longer than [`HEADER_AHEAD_AFTER`]
    /// ([`Inbox::drain`]): with another frame `behind` it, that one's
    /// header, at `next`; else, if the entry lies on more lines than a
    /// waiting consumer asks for ([`PREFETCH_LINES`], counted as
    /// [`Inbox::next_lines`] counts them), the frame's own. Out of line:
    /// inline, the test of the lines cost every drain 5 to 6
    /// instructions, short frames' too (`ANSWER=1 LENT=1 xthr_count` at 0
    /// and 57 B, the registers' allocation); out of line, a long frame's
    /// drain pays some 24 for the call (1 and 4 KiB).
    #[inline(never)]
    fn ask_ahead(&self, behind: bool, next: usize, at: usize, fp: usize, len: usize) {
        if behind {
            self.prefetch_header(next);
        } else if lines_spanned(at, fp) > PREFETCH_LINES {
            self.prefetch_frame(at + HDR, len);
        }
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
/// Rounded with a mask: `next_multiple_of` made six instructions of it
/// (a test of the low bits and a conditional move), this two. `len` is a
/// frame's length, at most the ring's size or a header's `u32`: the sum
/// does not overflow.
#[inline]
pub(crate) fn footprint(len: usize) -> u64 {
    ((HDR + 7 + len) & !7) as u64
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

/// An applet's inbox (see the module documentation).
pub struct Inbox {
    /// The producers' lock and view (written only by producers).
    prod: Line<Lock<Prod>>,
    /// The last push's tag and copy (written by producers, read by the
    /// consumer).
    last: Line<LastPush>,
    /// Ring bytes published ever (`Release`, after the frames' writes and
    /// their tags): read by a drain only when the last push's tag does not
    /// name its position (several entries waiting), by [`Inbox::is_empty`]
    /// only before any push. On the tag's line, it took the copy's seventh
    /// word, and a round trip's message crossed on it and the tag's.
    pos: Line<AtomicU64>,
    /// Where a producer last went back to the ring's start with the ring
    /// empty (the tail it found; `u64::MAX` before any): the consumer,
    /// at this position, skips to the start of the next pass over the
    /// ring without reading anything. Stored before the `Release` store
    /// of the tail that publishes the frame at the start, and loaded after
    /// an `Acquire` load of the tail, so `Relaxed` both ways. On a line of
    /// its own, read only where [`LastPush::tag`] does not tell
    /// ([`Inbox::skip_restart`]): a round trip restarts every four or five
    /// messages, and on the tag's line (then the tail's) it took the
    /// copy's sixth word.
    restart: Line<AtomicU64>,
    /// What the consumer gave back (written by the consumer).
    given: Line<GivenBack>,
    /// Where the consumer, answering each frame ([`Inbox::answered`]),
    /// last found the ring empty at the end of a drain between
    /// [`WARM`] and [`COLD`] (ring bytes consumed ever, stored with
    /// `Release` after its give-backs; `u64::MAX` before any): the ring
    /// found empty at a producer's tail without reading `given`. The
    /// consumer writes `given` at every frame, so a producer that read it
    /// at every push paid a line from the other core each time (burst-25
    /// at 4 KiB fell from 42% of plain U-Net to 28%); this line is
    /// written at most once a pass over the warm start, in a round trip
    /// once a message, and read by producers only within it.
    idle: Line<AtomicU64>,
    /// The consumer's position, without a lock: the consumer's calls are
    /// serialised by their callers (see the module documentation).
    cons: Line<ConsCell>,
    ring: OnceLock<Ring>,
    size: usize,
    max_frames: u64,
    max_bytes: u64,
}

// SAFETY: every field but `cons` is shared between threads safely on its
// own (atomics, a lock, the `Ring` by its own argument, values written
// once); `cons` is read and written only by the consumer's calls, which
// are `unsafe` and which their callers serialise (their contract,
// [`Inbox::drain`]), so no two threads touch it at once. (`Send` holds
// without this: `Cons` is plain data.)
unsafe impl Sync for Inbox {}

/// Takes the producers' lock (or [`Locked`]'s). It is a biased lock
/// ([`crate::biased`]): the thread that keeps taking it (the sender's
/// thread) takes and releases it with plain stores and loads, where a
/// `Mutex` made a locked compare-and-swap and a locked exchange on every
/// message across threads; another producer revokes the bias (each
/// revocation costs a `membarrier`; a lock is granted a bias at most
/// [`crate::biased::GRANTS`] times in its life), and a lock shared for
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
        Inbox {
            prod: Line(Lock::new(Prod {
                frames_end: frames as u64,
                bytes_end: bytes as u64,
                ..Prod::default()
            })),
            last: Line::default(),
            pos: Line::default(),
            given: Line::default(),
            idle: Line(AtomicU64::new(u64::MAX)),
            restart: Line(AtomicU64::new(u64::MAX)),
            cons: Line(ConsCell(UnsafeCell::new(Cons::default()))),
            ring: OnceLock::new(),
            size: ring_size(frames, bytes),
            max_frames: frames as u64,
            max_bytes: bytes as u64,
        }
    }

    /// Whether no frame is waiting (published and not given back). Two
    /// loads (the last push's tag and the give-back; the tail instead of
    /// the tag only before any push), for the per-frame test of an
    /// endpoint without an applet; a `false` while a drain runs only sends
    /// the caller the longer way.
    #[inline]
    pub fn is_empty(&self) -> bool {
        let tag = self.last.0.tag.load(Ordering::Acquire);
        let head = self.given.0.head.load(Ordering::Acquire);
        if tag != TAG_NONE {
            return behind(tag, head);
        }
        self.pos.0.load(Ordering::Acquire) == head
    }

    /// Asks the CPU for the lines the next frame is expected in (where
    /// the consumer gave back up to, as many lines as the last frame's
    /// footprint spans from there), for a waiting consumer's empty poll:
    /// issued beside that poll's load of the tail, so that when a
    /// producer has published a frame, its lines cross to this core
    /// together with the tail's rather than after it (a frame of up to 56
    /// bytes and its header fill one line). Nothing when the last frame
    /// spanned more than [`PREFETCH_LINES`], nothing before the ring's
    /// first frame, and nothing after an entry of at most [`COPY_MAX`]
    /// bytes, which the consumer reads from its copy beside the tag: its
    /// line, asked for, came to this core just before the producer wrote
    /// the next entry there, which then took it back (`loop_rtt`, the lent
    /// standard applet at 40 B, eight runs: 2.45x U-Net's round trip with
    /// the asking, 1.40x without). Only a hint: nothing is read, nothing
    /// is asked for unless every line lies in the ring, and a producer
    /// that goes back to the ring's start puts the frame elsewhere (the
    /// hint is then wasted).
    #[inline(always)]
    pub fn prefetch_next(&self) {
        if let Some((r, at, lines)) = self.next_lines() {
            #[cfg(all(test, not(loom)))]
            PREFETCHED.with(|f| f.set(Some((at, lines))));
            r.prefetch_lines(at, lines);
        }
    }

    /// Asks the CPU, for writing (`prefetchw`), for the lines a push of a
    /// `len`-byte message is expected to write, for a producer that has
    /// work to do before it pushes: a sender's `doTx`, whose tail push the
    /// engine will put here (`Engine::may_defer`). The tag's line
    /// ([`LastPush`]), which a waiting consumer polls, so that the tag's
    /// store does not wait for it to be taken from the consumer's core;
    /// and for an entry longer than [`COPY_MAX`] (which the consumer reads
    /// in the ring), the first [`ASK_LINES_MAX`] of the ring's lines from
    /// the producers' position, where the entry goes unless a push comes
    /// first or the producer goes back to the ring's start (the hint is
    /// then wasted). Asked for some 280 instructions before the push, the
    /// lines' transfers overlap the invocation instead of holding back
    /// the stores that publish the message (`loop_rtt`, the lent standard
    /// applet, docs/benchmarks.md, "The push's lines asked for before
    /// `doTx`": 1.21x to 1.25x U-Net's round trip at 0 to 56 B before,
    /// 1.02x to 1.07x after; 1.46x to 1.64x at 57 to 512 B before, 1.32x
    /// to 1.47x after). The tag's line alone before a 57-byte push made
    /// its round trip slower (1.49x to 1.80x): its entry's lines are asked
    /// for with it. Inline: out of line, the sender ran fewer instructions
    /// but read no faster (the same section). Only a hint: nothing is read
    /// but the producers' position, and nothing is written. Nothing in the
    /// loom model.
    #[inline(always)]
    pub fn ask_for_push_lines(&self, len: usize) {
        #[cfg(all(test, not(loom)))]
        TAG_ASKED.with(|n| n.set(n.get() + 1));
        #[cfg(not(loom))]
        if len > COPY_MAX
            && let Some(r) = self.ring.get()
        {
            // `Relaxed`: a guess, which no write depends on.
            let at = (self.pos.0.load(Ordering::Relaxed) % self.size as u64) as usize;
            let (first, lines) = (
                at - at % LINE,
                lines_spanned(at, footprint(len) as usize).min(ASK_LINES_MAX),
            );
            #[cfg(test)]
            PUSH_ASKED.with(|f| f.set(Some((first, lines))));
            r.ask_lines_to_write(first, lines);
        }
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        // SAFETY: the line is this live inbox's `LastPush`; a prefetch
        // neither reads nor writes memory architecturally and never
        // faults.
        unsafe {
            crate::shm::fetch_lines_to_write((&raw const self.last).cast::<u8>(), 1)
        };
        #[cfg(loom)]
        let _ = len;
    }

    /// What [`Inbox::prefetch_next`] asks for: the ring, the offset of the
    /// line the next frame is expected to start in, and how many lines.
    #[inline(always)]
    fn next_lines(&self) -> Option<(&Ring, usize, usize)> {
        let r = self.ring.get()?;
        let next = self.given.0.next.load(Ordering::Relaxed);
        let (at, last) = ((next & 0xffff_ffff) as usize, (next >> 32) as usize);
        // After a short entry, nothing: the next is likely short too, and
        // read from its copy.
        if last <= footprint(COPY_MAX) as usize {
            return None;
        }
        let lines = lines_spanned(at, last).max(1);
        (lines <= PREFETCH_LINES).then_some((r, at - at % LINE, lines))
    }

    /// Where the producers' next push goes: its offset in the ring (the
    /// engine's tests of where a round trip's and a stream's frames go).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn producer_at(&self) -> u64 {
        lock(&self.prod.0).at
    }

    /// Reads what the consumer gave back into the producers' view.
    #[inline]
    fn refresh(&self, p: &mut Prod) {
        // `Acquire` pairs with the consumer's `Release` store: its reads
        // of the space given back happened before the writes that reuse it.
        // The bytes a warm restart skipped count as given back at once
        // (`Prod::floor`): the consumer never reads them.
        p.head = self.given.0.head.load(Ordering::Acquire).max(p.floor);
        p.frames_end = self.given.0.frames.load(Ordering::Relaxed) + self.max_frames;
        p.bytes_end = (self.given.0.bytes.load(Ordering::Relaxed)).saturating_add(self.max_bytes);
    }

    /// Whether one more frame, after which `bytes` frame bytes have been
    /// pushed ever, is within the budgets, by the view in `p`: the frames
    /// waiting would be fewer than `max_frames`, their bytes at most
    /// `max_bytes`. Against the ends
    /// [`Inbox::refresh`] keeps (the consumer's counts plus the budgets),
    /// one comparison each, where the frames and bytes waiting were each a
    /// subtraction first (5 instructions a message fewer). The same test:
    /// the counts of frames and bytes pushed ever, and what the consumer
    /// gave back of them, never wrap a `u64` (2^64 bytes are 58 years at
    /// 10 GB/s), nor does `frames_end` (`max_frames` is at most
    /// [`FRAMES_MAX`]), and `bytes_end` saturates where `max_bytes` is
    /// near `u64::MAX`, as the sum it stands for did.
    #[inline]
    fn within_budgets(&self, p: &Prod, bytes: u64) -> bool {
        p.frames < p.frames_end && bytes <= p.bytes_end
    }

    /// Whether a producer at `at` goes back to the ring's start, the ring
    /// being empty: between [`WARM`] and [`COLD`], where the consumer
    /// marked it empty at this producer's tail ([`Inbox::idle`]); past
    /// [`HOT`], every [`HOT_CHECK`] bytes,
    /// where its give-back says so (`given`, which it writes at every
    /// frame, read that seldom for it).
    /// A mark equal to the tail is the consumer's position after its
    /// reads of every frame before it (its `Release` store, this `Acquire`
    /// load); an older mark is below the tail, which only grows.
    #[inline(always)]
    fn empty_at_tail(&self, p: &mut Prod, at: u64) -> bool {
        if in_warm_window(at) {
            return self.idle.0.load(Ordering::Acquire) == p.tail;
        }
        if at >= HOT && p.tail - p.checked >= HOT_CHECK {
            p.checked = p.tail;
            self.refresh(p);
            return p.head == p.tail;
        }
        false
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

    /// [`Inbox::push_message`] by the thread whose token `me` holds, read
    /// already by a caller that takes other locks too: the token's
    /// thread-local is read once for all of them.
    #[cfg(not(loom))]
    #[inline(always)]
    pub(crate) fn push_message_as(
        &self,
        me: crate::biased::Me,
        chan: u16,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), Refused> {
        let mut g = self.prod.0.lock_as(me);
        self.push_locked(&mut g, KIND_MESSAGE, chan, len, fill)
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
        self.push_locked(&mut g, kind, chan, len, fill)
    }

    /// [`Inbox::push_kind`] with the producers' lock held (`p`, its
    /// state), which the caller takes and releases: [`Inbox::push_kind`]
    /// and [`Inbox::push_message_as`] differ only in how they take it.
    /// (The guard given by value instead, LLVM compiled the engine's
    /// other pushes differently, and the U-Net path without applet, which
    /// has two of them inlined and never runs them, counted up to 12
    /// instructions more a message for the registers it took.)
    #[inline(always)]
    fn push_locked(
        &self,
        p: &mut Prod,
        kind: u16,
        chan: u16,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<(), Refused> {
        if p.closed {
            return Err(Refused::Closed);
        }
        if len > self.size - HDR {
            return Err(Refused::Full);
        }
        // The frame bytes pushed ever, this entry's counted.
        let bytes = p.bytes + counted(kind, len as u64);
        if !self.within_budgets(p, bytes) {
            self.refresh(p);
            if !self.within_budgets(p, bytes) {
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
        // before it; or, if the ring is empty and this is past its warm
        // start ([`Inbox::empty_at_tail`]), back to its start without a
        // padding: the bytes skipped are given back at once
        // (`Prod::floor`), the consumer told by the restart's line and this
        // push's tag (`Inbox::restart`, `TAG_RESTARTED`). (`rest` is never 0, `at` being below the
        // ring's size: no padding is `rest >= need`.)
        let mut pad = 0;
        let mut restarted = false;
        if rest < need {
            pad = rest;
        } else if self.empty_at_tail(p, at) && need <= at {
            pad = rest;
            p.floor = p.tail + pad;
            p.head = p.floor;
            // Published by the tail's `Release` store below, which the
            // consumer's `Acquire` load of it reads before this. Stored
            // here, before the room's test, which this push passes: the
            // ring is empty from `floor`, and `need` is at most its size.
            // (After the test, a flag kept for it cost 3 instructions a
            // push.)
            self.restart.0.store(p.tail, Ordering::Relaxed);
            restarted = true;
            #[cfg(loom)]
            padded(1);
        }
        if p.tail + pad + need - p.head > size {
            self.refresh(p);
            if p.tail + pad + need - p.head > size {
                return Err(Refused::Full);
            }
        }
        let ring = self.ring.get_or_init(|| Ring::new(self.size));
        // The frame does not fit before the ring's end (a warm restart is
        // the other padding, `rest >= need`, and writes nothing there).
        if rest < need {
            #[cfg(loom)]
            padded(0);
            let _held = ring.held_write(at as usize, HDR);
            // SAFETY: `[at, at + pad)` ends at the ring's end, and lies in
            // `[tail, head + size)` (checked just above): the consumer has
            // given it back, or it lies where a restart sent the consumer
            // past unread (`Prod::floor`), and the consumer reads it only
            // once the tail is published past it; producers are serialised
            // by the lock held.
            let h = unsafe { ring.bytes_mut(at as usize, HDR) };
            h.copy_from_slice(&header(0, 0, KIND_PAD));
        }
        // A padding runs to the ring's end: the frame is at its start.
        let start = if pad > 0 { 0 } else { at as usize };
        {
            let _held = ring.held_write(start, HDR + len);
            // SAFETY: `[start, start + need)` is in the ring (`need` fits
            // before its end: it did at `at`, or `start` is 0 and `need <=
            // size`) and in `[tail, head + size)`, checked above: given back
            // by the consumer or skipped by it unread (`Prod::floor`), not
            // yet published, written only under the lock held.
            let place = unsafe { ring.bytes_mut(start, HDR + len) };
            let (h, body) = place.split_at_mut(HDR);
            h.copy_from_slice(&header(len as u32, chan, kind));
            fill(body);
        }
        // Every push stores its tag, `Release`, after its entry's writes:
        // the tag is only ever the last push's, and tells a consumer that
        // reads it with `Acquire` that the entry at its position is the
        // last push's, published ([`Inbox::last_alone`]), or that a
        // restart came just before it ([`Inbox::skip_restart`]).
        //
        // A short entry is then copied beside the tag too, where the
        // consumer reads it when it is the only one waiting
        // ([`Inbox::copied`]): its own line then stays in this core's
        // cache, and a round trip's message crosses to the consumer's core
        // on the tag's line alone (`examples/handoff_lines`). A sequence
        // lock's writer: the tag without the copy (so unlike any earlier
        // push's), a `Release` fence, the copy, then the tag with it, so
        // that a consumer that reads the tag the same before and after the
        // copy (an `Acquire` fence between) read no later push's words.
        let t = &self.last.0;
        let place = place_tag(p.tail + pad, restarted);
        t.tag.store(sized_tag(place, need), Ordering::Release);
        if len <= COPY_MAX {
            fence(Ordering::Release);
            // The copy's words read from the ring where the body was just
            // written, all of them whatever its length (no copy of its
            // bytes on the stack first, and no loop over its words: 22
            // instructions fewer a push of 0 to 56 bytes, `xthr_count`'s
            // sender, than the copy made on the stack, and 24 to 34 fewer
            // at 40 to 56 bytes than a loop over the footprint's words).
            // Past `len` they hold what the ring held there, which no drain
            // hands out (it runs `len` bytes).
            let body = start + HDR;
            let _held = ring.held_read(body, COPY_MAX);
            // SAFETY: `body` is within the ring (the entry fits before its
            // end), and no other thread writes `[body, body + COPY_MAX)`
            // meanwhile: producers write the ring only under the lock held
            // here, and the consumer never writes it (it may read the
            // entry, published by the tag just stored, at the same time).
            let words = unsafe { ring.copy_words(body) };
            for (w, b) in t.copy.iter().zip(words.chunks_exact(8)) {
                let b: [u8; 8] = b.try_into().expect("chunks of 8");
                w.store(u64::from_le_bytes(b), Ordering::Relaxed);
            }
            t.tag
                .store(place | copied_tag(len, chan, kind), Ordering::Release);
        }
        p.tail += pad + need;
        // `need` fits before the ring's end from `start` (above).
        p.at = start as u64 + need;
        if p.at == size {
            p.at = 0;
        }
        p.frames += 1;
        p.bytes = bytes;
        // Publishes the frame (and the padding or the restart before it):
        // the consumer reads the tail with `Acquire`.
        self.pos.0.store(p.tail, Ordering::Release);
        Ok(())
    }

    /// Runs the frames waiting, in order, through `f` (its channel, whether
    /// it is a frame, [`Inbox::push`], or a message's payload alone,
    /// [`Inbox::push_message`], and its bytes, read in place), until the
    /// inbox is empty or `f` returns `false` (after that one); returns how
    /// many. Each one's space goes back to the producers once `f` has run
    /// it.
    ///
    /// Frames published while it runs are run too (a burst's later frames,
    /// written while its first ones run), but the tail is read again only
    /// while fewer than the frame budget have run: one call runs fewer
    /// than twice the budget's frames (each stretch between two readings
    /// holds at most the budget), however fast producers push. Unbounded,
    /// a flood from other threads kept the owner's `recv_ref` in one drain
    /// for as long as it lasted (56 ms in the 2026-12-01 review's test),
    /// its receive queue full and nothing sent.
    ///
    /// A header that fails its check (never written so: only memory
    /// corruption makes one) ends the call: it and every frame after it
    /// are dropped unread, their budget given back, and counted
    /// ([`Inbox::drop_rest`], [`Inbox::dropped`]).
    ///
    /// # Safety
    ///
    /// No other consumer call ([`Inbox::drain`], [`Inbox::clear`],
    /// [`Inbox::close`], and the tests' `corrupt_*`) runs on this inbox
    /// while this one does: the caller serialises them, as the engine does
    /// by the endpoint's receive lock ([`super::Port::drain_inbox`]) and
    /// [`Locked`] by a lock of its own. (The consumer's position has no
    /// lock: see the module documentation.)
    ///
    /// Always inlined: in the engine's drain (`Engine::drain_locked`),
    /// where the inbox, the receive side and every field the frames' runs
    /// use lie at fixed offsets from the port, the loop then addresses
    /// them all from that one register. As a call of its own (the
    /// compiler's choice until then), it computed some 15 of those
    /// addresses at its entry from the closure's three references and
    /// kept most on its stack across the frames, 38 instructions a drain,
    /// a drain a message in a ping-pong (`xthr_count` recv, lent, 40 B:
    /// 609.6 to 548.6 instructions a message at bursts of 1, 341.3 to
    /// 331.1 at bursts of 25; 4096 B: 1343.4 to 1277.4, 1087.3 to
    /// 1072.1).
    #[inline(always)]
    pub unsafe fn drain(&self, f: impl FnMut(u16, bool, &[u8]) -> bool) -> u64 {
        // SAFETY: this is the one consumer call running (the contract).
        unsafe { self.cons.0.with(|c| self.drain_as(c, f)) }
    }

    /// [`Inbox::drain`] with the consumer's position (`c`) in hand.
    #[inline(always)]
    fn drain_as(&self, c: &mut Cons, mut f: impl FnMut(u16, bool, &[u8]) -> bool) -> u64 {
        // The last push's tag, then the tail, before the ring (the same
        // loads as the other way round): in the loom model these loads are
        // what make a drain depend on a push (the ring's `OnceLock` is not
        // loom's); with the ring's `get` first, a drain before the first
        // push touched nothing loom sees, and loom never ran it after one.
        //
        // The tag alone tells a drain that nothing is new (the last push
        // is behind it: the idle poll of a round trip reads one line), or
        // that the entry at its position is the last pushed, published by
        // that tag's `Release` store: the drain runs it, from its copy if
        // it has one, and returns (`alone`). Only otherwise does it read
        // the tail, on a line of its own, which producers store after the
        // tag: a round trip's message then crosses on the tag's line
        // alone, 56 bytes copied with it (`LastPush`).
        let size = self.size as u64;
        let mut copied = [0u8; COPY_MAX];
        let tag = self.last.0.tag.load(Ordering::Acquire);
        if tag != TAG_NONE && behind(tag, c.head) {
            return 0;
        }
        let (mut tail, mut first, alone) = match self.last_alone(c, size, tag, &mut copied) {
            Some(a) => (a.end, a.copy, true),
            None => (self.read_tail(), None, false),
        };
        let Some(ring) = self.ring.get() else {
            return 0;
        };
        // A producer goes back to the ring's start only where it found the
        // ring empty: where this consumer had given back everything, up to
        // a tail it had read. So a restart lies only where a drain starts
        // or where it reads the tail again (`fresh`), and is looked for
        // there alone (`skip_restart`), not at every frame; nor where the
        // entry there is read from its copy beside the tag, whose tag
        // names the consumer's position (after a restart, the entry is at
        // the ring's start, and the copy is looked for again there); nor
        // for the entry `last_alone` told, having skipped its restart.
        let mut fresh = !alone && c.head != tail;
        let mut n = 0;
        loop {
            if c.head == tail {
                if n >= self.max_frames || alone {
                    break;
                }
                tail = self.read_tail();
                if c.head == tail {
                    break;
                }
                fresh = true;
            }
            // The entry from its copy beside the tag where it is the only
            // one waiting and short (the tag's line is here already), else
            // from the ring. The entry `last_alone` told was read from the
            // copy there if it could be (`first`), and its restart skipped.
            let mut got = match first.take() {
                Some(g) => Some(g),
                None if alone => None,
                None => self.copied(c.head, tail, &mut copied),
            };
            if fresh {
                fresh = false;
                if got.is_none() && self.skip_restart(c, size) {
                    got = self.copied(c.head, tail, &mut copied);
                }
            }
            let at = c.at as usize;
            // Checked in the crate's tests too (its release build has no
            // debug assertions).
            if cfg!(any(test, debug_assertions)) {
                assert_eq!(c.at, c.head % size);
            }
            let (len, chan, kind, from_copy) = match got {
                Some((len, chan, kind)) => (len, chan, kind, true),
                None => {
                    let _held = ring.held_read(at, HDR);
                    // SAFETY: `[head, tail)` is published (read with
                    // `Acquire` after the producers' `Release` store of the
                    // tail) and every header in it lies whole before the
                    // ring's end (the ring's size and every footprint are
                    // multiples of 8); producers do not write it until it
                    // is given back, after this read.
                    let h = unsafe { ring.bytes(at, HDR) };
                    let (len, chan, kind) = read_header(h);
                    (len, chan, kind, false)
                }
            };
            // A frame's or a message's kind (`KIND_FRAME` 0, `KIND_MESSAGE`
            // 2) passes one test, behind which a padding's is told from a
            // wrong one (the test for a padding first made two a frame).
            if kind & !KIND_MESSAGE != 0 {
                // A padding never starts the ring (a frame always fits an
                // empty ring from its start) and lies within what is
                // published: else its header is wrong, and skipping by it
                // would loop or pass the tail. Any other kind is wrong.
                if kind != KIND_PAD || at == 0 || size - at as u64 > tail - c.head {
                    return self.drop_rest(c, n);
                }
                c.head += size - at as u64;
                c.at = 0;
                self.give_back(c);
                continue;
            }
            // In `u64`: a wrong length near `u32::MAX` would wrap a `usize`
            // sum on a 32-bit target and pass.
            let (len, hdr) = (u64::from(len), HDR as u64);
            if at as u64 + hdr + len > size || ((hdr + 7 + len) & !7) > tail - c.head {
                // Never: producers write whole frames within the ring. Were
                // a header wrong, nothing past it is read; the rest is
                // dropped, its budget given back and counted.
                return self.drop_rest(c, n);
            }
            // Within the ring's size (just checked), a `usize`.
            let len = len as usize;
            let frame = if from_copy {
                &copied[..len]
            } else {
                // SAFETY: as for the header: the frame's bytes are in the
                // ring (just checked) and published, and stay unwritten
                // until given back, after `f` returns.
                unsafe { ring.bytes(at + HDR, len) }
            };
            let fp = footprint(len);
            c.head += fp;
            c.last = fp;
            // The frame lies before the ring's end (checked above).
            c.at += fp;
            if c.at == size {
                c.at = 0;
            }
            c.frames += 1;
            c.bytes += counted(kind, len as u64);
            n += 1;
            // A stream's next frame, published already behind this one:
            // the line of its header asked for now, so that it crosses to
            // this core while this frame runs (a `doRx` copies it out),
            // not when the loop comes back to read it. Only after a frame
            // of more than four lines (`HEADER_AHEAD_AFTER`): a shorter
            // frame's next header lies within a line of what the drain has
            // just read, and streams of short frames pay nothing for this.
            // Burst-25 (`fastpath bench unet --only burst`, seven pairs of
            // runs with and without it, 2026-12-05): at 4 KiB the copied
            // standard applet 34.9% → 39.1% of plain U-Net's, the lent one
            // 42.9% → 47.1%; at 1 KiB level (nine pairs). Asking for up to
            // 32 lines of the next frame gained as much at 4 KiB and lost
            // 0.5 to 3 points at 1 KiB. docs/benchmarks.md, "The next
            // frame's header asked for while a drain runs a frame".
            //
            // The last frame published, a round trip's, asks for its own
            // lines instead, all of them (up to `FRAME_LINES_MAX`), before it
            // runs: the `doRx` that copies it out then finds them on their
            // way together. The lent applet's round trip at 384 to 512 B
            // 0.95 → 0.86 and 1.05 → 0.94 µs, 4 KiB 2.52 → 2.46; asked for
            // by every frame, burst-25 at 4 KiB lost 2 to 3 points, whose
            // frames have others behind them ("A frame's own lines asked
            // for by the last one published").
            //
            // Which frame asks: one on more lines than a waiting consumer
            // asks for (`Inbox::next_lines`), counted as it counts them,
            // from the line its entry starts in. Until 2026-12-06 a frame
            // asked by its footprint (more than 256 bytes) and a waiting
            // consumer asked for frames of up to 4 lines, so an entry of
            // 4 lines' footprint that straddled 5 was asked for by
            // neither: the lent applet at 224 to 247 B ran 0.06 to 0.12 µs
            // slower than at 216 or 248, whose entries stay on 4 lines
            // ("The frames a waiting consumer does not ask for",
            // docs/benchmarks.md).
            //
            // Both ask only past `HEADER_AHEAD_AFTER`: a frame on more
            // than `PREFETCH_LINES` lines is longer (asserted beside the
            // constants), and a short frame's drain makes one test, as
            // before.
            if fp > HEADER_AHEAD_AFTER {
                ring.ask_ahead(c.head != tail, c.at as usize, at, fp as usize, len);
            }
            let go_on = {
                let _held = (!from_copy).then(|| ring.held_read(at + HDR, len));
                f(chan, kind == KIND_FRAME, frame)
            };
            self.give_back(c);
            if !go_on {
                break;
            }
        }
        // Nothing to give back here: each frame's place is given back after
        // its run, and each padding's and restart's where it is skipped
        // (a give-back at the end too, for those, repeated the last
        // frame's three stores in every drain).
        //
        // Where the next frame is expected, for the consumer's waiting
        // polls ([`Inbox::prefetch_next`]): once a drain, not a frame.
        // `at` is below the ring's size, at most `RING_MAX` < 2^32.
        //
        // The ring found empty within the warm window (`in_warm_window`)
        // by a consumer that answers each frame, one
        // frame after its last answer (`Cons::mark_at`): marked for
        // producers (`Inbox::idle`, after every give-back above), whose next push
        // then goes back to the ring's start, where the next frame is
        // expected.
        let mut next = c.at;
        if c.frames == c.mark_at && c.head == tail && in_warm_window(c.at) {
            self.idle.0.store(c.head, Ordering::Release);
            next = 0;
        }
        self.given
            .0
            .next
            .store(next | c.last << 32, Ordering::Relaxed);
        n
    }

    /// Tells the inbox that its consumer's endpoint has sent a message
    /// (its `doTx` ran, or its `doRx` answered a frame). If exactly one
    /// frame was consumed since it last sent, it answers each frame, as
    /// either end of a round trip does: the drain that runs the next frame,
    /// if it ends with the ring empty within the warm window, marks it so
    /// ([`Inbox::idle`]), and the producer's next push goes back to the
    /// ring's start. A consumer that never sends, or sends once for many
    /// frames (a stream's receiver, burst-25's acknowledgements), marks
    /// nothing, and its producers walk the ring: a stream's frames kept to
    /// the ring's first lines cost it up to 15% (docs/benchmarks.md, "A
    /// round trip's inbox kept warm"). A send with no frame consumed since
    /// the last changes nothing (a second answer to one frame, or an
    /// endpoint whose inbox is never used, as on one thread): two loads
    /// and a test, where the rest is some 9 instructions a send.
    ///
    /// # Safety
    ///
    /// As for [`Inbox::drain`]: no other consumer call runs meanwhile.
    #[inline(always)]
    pub unsafe fn answered(&self) {
        // SAFETY: this is the one consumer call running (the contract).
        unsafe {
            self.cons.0.with(|c| {
                let since = c.frames.wrapping_sub(c.sent);
                if since != 0 {
                    c.sent = c.frames;
                    c.mark_at = if since == 1 { c.frames + 1 } else { 0 };
                }
            })
        }
    }

    /// The tail, for a drain (`Acquire`, after the producers' `Release`).
    #[inline(always)]
    fn read_tail(&self) -> u64 {
        #[cfg(all(test, not(loom)))]
        TAIL_READS.with(|r| r.set(r.get() + 1));
        self.pos.0.load(Ordering::Acquire)
    }

    /// The entry at the consumer's position, if `tag` (the last push's,
    /// read with `Acquire`) says it is the last pushed, or the first at the
    /// ring's start after a restart there (which it skips, as
    /// [`Inbox::skip_restart`] would, by the same argument): where it ends
    /// (by the tag's footprint, or its copy's length), and, if the tag
    /// says the copy beside the tag holds it, the entry read from there
    /// into `buf` (a sequence lock's reader, as [`Inbox::copied`]; `None`
    /// if a later push wrote the copy meanwhile: the ring holds the entry,
    /// published all the same). The tag's `Release` store published the
    /// entry, so the tail is not read. `None` if the tag tells neither.
    #[inline(always)]
    fn last_alone(
        &self,
        c: &mut Cons,
        size: u64,
        tag: u64,
        buf: &mut [u8; COPY_MAX],
    ) -> Option<Alone> {
        if tag == TAG_NONE {
            return None;
        }
        if !names(tag, c.head) {
            let rest = size - c.at;
            if !restarted_to(tag, c.head, rest) {
                return None;
            }
            self.skip_to_start(c, rest);
        }
        if tag & TAG_COPIED == 0 {
            return Some(Alone {
                end: c.head + tag_footprint(tag),
                copy: None,
            });
        }
        let got = read_copy_tag(tag);
        let end = c.head + footprint(got.0 as usize);
        let copy = self.read_copy(tag, buf).then_some(got);
        Some(Alone { end, copy })
    }

    /// The entry at the consumer's position `head` from its copy beside
    /// the tag (its length, channel and kind; its bytes into `buf`), if it
    /// is the only entry published (`tail`, read with `Acquire`) and short,
    /// and the copy is its and whole; else `None` and the ring is read. A
    /// sequence lock's reader ([`Inbox::push_locked`] writes it): the tag,
    /// the copy, then the tag again ([`Inbox::read_copy`]). The tag is
    /// only ever the last push's, and the entries waiting lie within
    /// [`RING_MAX`] < 2^32 bytes of each other, so a tag whose low bits are
    /// `head`'s is the entry's at `head`.
    #[inline(always)]
    fn copied(&self, head: u64, tail: u64, buf: &mut [u8; COPY_MAX]) -> Option<(u32, u16, u16)> {
        if tail - head > footprint(COPY_MAX) {
            return None;
        }
        // `Acquire`, with the tag's `Release` store: the words read next
        // are the entry's. A later push's tag and copy are what the
        // sequence lock's second load is for ([`Inbox::read_copy`]).
        let tag = self.last.0.tag.load(Ordering::Acquire);
        if tag & TAG_COPIED == 0 || !names(tag, head) {
            return None;
        }
        self.read_copy(tag, buf).then(|| read_copy_tag(tag))
    }

    /// The sequence lock's reader ([`Inbox::push_locked`] writes it), for
    /// a copied `tag` read with `Acquire`: the copy's words into `buf`, an
    /// `Acquire` fence, and the tag again; whether it is still `tag`, so
    /// that no push wrote the copy meanwhile (a push stores its own tag,
    /// without the copy, before it writes, and no later push's tag is
    /// `tag`: [`place_tag`]), and `buf` holds the entry's bytes.
    #[inline(always)]
    fn read_copy(&self, tag: u64, buf: &mut [u8; COPY_MAX]) -> bool {
        let t = &self.last.0;
        for (w, b) in t.copy.iter().zip(buf.chunks_exact_mut(8)) {
            b.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        fence(Ordering::Acquire);
        t.tag.load(Ordering::Relaxed) == tag
    }

    /// Skips to the ring's start if a producer went back to it at the
    /// consumer's position ([`Inbox::restart`]), reading nothing there (the
    /// bytes may be a new frame's), and gives the bytes skipped back (as
    /// the drain gives back a padding it skips). For a consumer that has
    /// just read, with `Acquire`, a tail past its position: that push's
    /// tag, or a later one's, and a restart before it were stored before
    /// that tail, so these `Relaxed` loads see them. Whether it skipped.
    ///
    /// The last push's tag tells it in a round trip,
    /// where the entry waiting is the last pushed: a tag that names the
    /// consumer's position is of an entry there, so no restart is; one of
    /// a push that restarted and names the ring's start after it is of
    /// that restart's entry, and the restart is at the consumer's position
    /// (the ring was empty where the push went back, so the consumer had
    /// given back up to there, and nothing lies between). Only otherwise
    /// (several entries waiting) is the restart's own line read. (The tag
    /// of a push later than the tail read names a place at or past that
    /// tail, so not the consumer's position; nor is it of a restart
    /// there, since a restarting push found the consumer at or past the
    /// place it went back from.)
    #[inline(always)]
    fn skip_restart(&self, c: &mut Cons, size: u64) -> bool {
        let tag = self.last.0.tag.load(Ordering::Relaxed);
        if names(tag, c.head) {
            return false;
        }
        let rest = size - c.at;
        if restarted_to(tag, c.head, rest) || {
            #[cfg(all(test, not(loom)))]
            RESTART_READS.with(|r| r.set(r.get() + 1));
            c.head == self.restart.0.load(Ordering::Relaxed)
        } {
            self.skip_to_start(c, rest);
            return true;
        }
        false
    }

    /// Skips the consumer from its position to the ring's start, `rest`
    /// bytes on (a restart's), and gives them back.
    #[inline(always)]
    fn skip_to_start(&self, c: &mut Cons, rest: u64) {
        c.head += rest;
        c.at = 0;
        self.give_back(c);
    }

    /// The recovery from a header that failed its check (memory
    /// corruption only: producers write headers under their lock, an
    /// applet only payloads): every frame published and not yet run is
    /// dropped, nothing of it read, and counted in [`Inbox::dropped`]; the
    /// consumer's position, frames and bytes become the producers' (read
    /// under their lock, where every push has published its frame), so
    /// that the caller's give-back returns the whole budget they held.
    /// Skipping to the tail alone, as before, kept the dropped frames'
    /// budget for ever: an inbox at its frame budget then refused every
    /// frame.
    ///
    /// The producers' lock is taken inside the consumer's call, under the
    /// lock that serialises those (the endpoint's receive lock): nothing
    /// takes them the other way round (a push holds only the producers'
    /// lock, [`Inbox::close`] lets it go before it drains). Out of line
    /// and cold; it returns the drain's count, `n`, so that the drain
    /// ends with it.
    #[cold]
    #[inline(never)]
    fn drop_rest(&self, c: &mut Cons, n: u64) -> u64 {
        let p = lock(&self.prod.0);
        let dropped = p.frames.wrapping_sub(c.frames);
        c.head = p.tail;
        c.at = p.at;
        c.frames = p.frames;
        c.bytes = p.bytes;
        drop(p);
        let d = &self.given.0.dropped;
        d.store(
            d.load(Ordering::Relaxed).wrapping_add(dropped),
            Ordering::Relaxed,
        );
        self.give_back(c);
        n
    }

    /// Frames dropped, ever, because a header before them failed its
    /// check (see [`Inbox::drain`]): counted in the endpoint's
    /// `queue_corrupt`.
    pub fn dropped(&self) -> u64 {
        self.given.0.dropped.load(Ordering::Relaxed)
    }

    /// Writes a header that fails the drain's check (a length past the
    /// ring) over the next entry to run: the memory corruption the
    /// engine's tests and the loom model recover from. The caller has
    /// pushed that entry (it is published, so no producer writes it until
    /// it is given back).
    ///
    /// # Safety
    ///
    /// As for [`Inbox::drain`]: no other consumer call runs meanwhile.
    #[cfg(any(test, loom))]
    pub unsafe fn corrupt_next(&self) {
        // SAFETY: the caller's contract, the same.
        unsafe { self.corrupt_next_with(u32::MAX - 7, KIND_FRAME) };
    }

    /// [`Inbox::corrupt_next`] with the header's length and kind given.
    ///
    /// # Safety
    ///
    /// As for [`Inbox::drain`].
    #[cfg(any(test, loom))]
    pub unsafe fn corrupt_next_with(&self, len: u32, kind: u16) {
        // SAFETY: the one consumer call running (the contract).
        let at = unsafe { self.cons.0.with(|c| c.at as usize) };
        let ring = self.ring.get().expect("a frame was pushed");
        let _held = ring.held_write(at, HDR);
        // SAFETY: `[at, at + HDR)` is in the ring (a header's place); no
        // producer writes it (the caller's word: the entry is published)
        // and no consumer call reads it meanwhile (the contract).
        unsafe { ring.bytes_mut(at, HDR) }.copy_from_slice(&header(len, 0, kind));
        // The corruption is the ring's: the drain reads it there, not the
        // entry's copy beside the tag.
        self.last.0.tag.store(TAG_NONE, Ordering::Relaxed);
    }

    /// [`Inbox::corrupt_next`] over the entry `skip` entries after the
    /// next to run (paddings followed, not counted): a bad header behind
    /// entries that run normally. The caller has pushed it, and the
    /// entries before it (published, so no producer writes them until they
    /// are given back).
    ///
    /// # Safety
    ///
    /// As for [`Inbox::drain`].
    #[cfg(any(test, loom))]
    pub unsafe fn corrupt_after(&self, skip: usize) {
        // SAFETY: the one consumer call running (the contract).
        let (at, head) = unsafe { self.cons.0.with(|c| (c.at as usize, c.head)) };
        let ring = self.ring.get().expect("a frame was pushed");
        let restart = self.restart.0.load(Ordering::Relaxed);
        let mut at = at;
        let mut pos = head;
        let mut left = skip;
        loop {
            if pos == restart {
                pos += (self.size - at) as u64;
                at = 0;
                continue;
            }
            let (len, _, kind) = {
                let _held = ring.held_read(at, HDR);
                // SAFETY: a header's place in the ring, published (the
                // caller's word), read by the one consumer call running.
                read_header(unsafe { ring.bytes(at, HDR) })
            };
            if kind == KIND_PAD {
                pos += (self.size - at) as u64;
                at = 0;
            } else if left == 0 {
                break;
            } else {
                left -= 1;
                pos += footprint(len as usize);
                at += footprint(len as usize) as usize;
                if at == self.size {
                    at = 0;
                }
            }
        }
        let _held = ring.held_write(at, HDR);
        // SAFETY: as in `corrupt_next_with`: a published header's place,
        // which no producer writes, and no other consumer call reads.
        unsafe { ring.bytes_mut(at, HDR) }.copy_from_slice(&header(u32::MAX - 7, 0, KIND_FRAME));
        // As in `corrupt_next_with`: the drain reads the corruption.
        self.last.0.tag.store(TAG_NONE, Ordering::Relaxed);
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
    ///
    /// # Safety
    ///
    /// As for [`Inbox::drain`]: no other consumer call runs meanwhile.
    pub unsafe fn clear(&self) -> u64 {
        // SAFETY: the caller's contract, the same.
        unsafe { self.drain(|_, _, _| true) }
    }

    /// Closes the inbox: frames pushed from now on are refused as
    /// [`Refused::Closed`]; those waiting are dropped. Returns how many.
    ///
    /// # Safety
    ///
    /// As for [`Inbox::drain`]: no other consumer call runs meanwhile.
    pub unsafe fn close(&self) -> u64 {
        lock(&self.prod.0).closed = true;
        // Every push that took the producers' lock before it was closed
        // published its frame before letting go of it: this sees them all.
        // SAFETY: the caller's contract, the same.
        unsafe { self.clear() }
    }
}

/// The engine's consumer calls: a port's inbox is consumed only here,
/// each call under the port's receive lock, the guard passed in as the
/// proof (checked to be that lock's: where the guard was just taken from
/// it, as in every caller, the compiler folds the test away).
#[cfg(not(loom))]
impl super::Port {
    /// Runs the frames waiting in the inbox through `f` ([`Inbox::drain`]),
    /// under the receive lock `rx`, whose side `f` is given with each.
    #[inline(always)]
    pub(super) fn drain_inbox(
        &self,
        rx: &mut crate::biased::BiasedGuard<'_, super::RxSide>,
        mut f: impl FnMut(&mut super::RxSide, u16, bool, &[u8]) -> bool,
    ) -> u64 {
        assert!(rx.is_of(&self.rx), "another port's receive lock");
        let side = &mut **rx;
        // SAFETY: every consumer call of a port's inbox is one of these
        // methods (the inbox's consumer calls are `unsafe` and made
        // nowhere else), and each holds the port's receive lock, checked
        // above: none runs while another does.
        unsafe {
            self.inbox
                .drain(|chan, framed, bytes| f(side, chan, framed, bytes))
        }
    }

    /// [`Inbox::answered`], under the receive lock `rx`: the endpoint
    /// sent a message.
    #[inline(always)]
    pub(super) fn inbox_answered(&self, rx: &crate::biased::BiasedGuard<'_, super::RxSide>) {
        assert!(rx.is_of(&self.rx), "another port's receive lock");
        // SAFETY: as in `drain_inbox`.
        unsafe { self.inbox.answered() }
    }

    /// Empties the inbox ([`Inbox::clear`]), under the receive lock `rx`.
    pub(super) fn clear_inbox(&self, rx: &crate::biased::BiasedGuard<'_, super::RxSide>) -> u64 {
        assert!(rx.is_of(&self.rx), "another port's receive lock");
        // SAFETY: as in `drain_inbox`.
        unsafe { self.inbox.clear() }
    }

    /// Closes the inbox ([`Inbox::close`]), under the receive lock `rx`.
    pub(super) fn close_inbox(&self, rx: &crate::biased::BiasedGuard<'_, super::RxSide>) -> u64 {
        assert!(rx.is_of(&self.rx), "another port's receive lock");
        // SAFETY: as in `drain_inbox`.
        unsafe { self.inbox.close() }
    }

    /// [`Inbox::corrupt_next`], under the receive lock `rx`.
    #[cfg(test)]
    pub(super) fn corrupt_inbox_next(&self, rx: &crate::biased::BiasedGuard<'_, super::RxSide>) {
        assert!(rx.is_of(&self.rx), "another port's receive lock");
        // SAFETY: as in `drain_inbox`.
        unsafe { self.inbox.corrupt_next() }
    }
}

/// An inbox whose consumer's calls take a lock of its own, so that they
/// are safe to make from any thread: for the loom model and the ring's
/// tests. (The engine's take the endpoint's receive lock instead,
/// [`super::Port::drain_inbox`].) The producers' side is the inbox's,
/// through `Deref`.
#[cfg(any(test, loom))]
pub struct Locked {
    inbox: Inbox,
    cons: Lock<()>,
}

#[cfg(any(test, loom))]
impl std::ops::Deref for Locked {
    type Target = Inbox;
    fn deref(&self) -> &Inbox {
        &self.inbox
    }
}

#[cfg(any(test, loom))]
impl Locked {
    /// [`Inbox::new`], with its consumer's lock.
    pub fn new(frames: usize, bytes: usize) -> Locked {
        Locked {
            inbox: Inbox::new(frames, bytes),
            cons: Lock::new(()),
        }
    }

    /// [`Inbox::drain`] under the consumer's lock.
    pub fn drain(&self, f: impl FnMut(u16, bool, &[u8]) -> bool) -> u64 {
        let _c = lock(&self.cons);
        // SAFETY: `Locked`'s consumer calls are each made under `cons`,
        // and the inbox is reached otherwise only through `Deref`, whose
        // consumer calls are `unsafe`: their callers answer for them.
        unsafe { self.inbox.drain(f) }
    }

    /// [`Inbox::answered`] under the consumer's lock.
    pub fn answered(&self) {
        let _c = lock(&self.cons);
        // SAFETY: as in `drain`.
        unsafe { self.inbox.answered() }
    }

    /// [`Inbox::clear`] under the consumer's lock.
    pub fn clear(&self) -> u64 {
        let _c = lock(&self.cons);
        // SAFETY: as in `drain`.
        unsafe { self.inbox.clear() }
    }

    /// [`Inbox::close`] under the consumer's lock.
    pub fn close(&self) -> u64 {
        let _c = lock(&self.cons);
        // SAFETY: as in `drain`.
        unsafe { self.inbox.close() }
    }

    /// [`Inbox::corrupt_next`] under the consumer's lock (the loom model's;
    /// the ring's tests give the header).
    #[cfg(loom)]
    pub fn corrupt_next(&self) {
        let _c = lock(&self.cons);
        // SAFETY: as in `drain`.
        unsafe { self.inbox.corrupt_next() }
    }

    /// [`Inbox::corrupt_next_with`] under the consumer's lock.
    pub fn corrupt_next_with(&self, len: u32, kind: u16) {
        let _c = lock(&self.cons);
        // SAFETY: as in `drain`.
        unsafe { self.inbox.corrupt_next_with(len, kind) }
    }

    /// [`Inbox::corrupt_after`] under the consumer's lock.
    pub fn corrupt_after(&self, skip: usize) {
        let _c = lock(&self.cons);
        // SAFETY: as in `drain`.
        unsafe { self.inbox.corrupt_after(skip) }
    }
}

/// A frame's header: its length, channel and kind.
#[inline]
fn header(len: u32, chan: u16, kind: u16) -> [u8; HDR] {
    let mut h = [0; HDR];
    h[..4].copy_from_slice(&len.to_le_bytes());
    h[4..6].copy_from_slice(&chan.to_le_bytes());
    h[6..].copy_from_slice(&kind.to_le_bytes());
    h
}

/// [`header`] read back.
#[inline]
fn read_header(h: &[u8]) -> (u32, u16, u16) {
    let b = |i: usize| h.get(i).copied().unwrap_or(0);
    (
        u32::from_le_bytes([b(0), b(1), b(2), b(3)]),
        u16::from_le_bytes([b(4), b(5)]),
        u16::from_le_bytes([b(6), b(7)]),
    )
}

#[cfg(all(test, not(loom)))]
mod tests;
