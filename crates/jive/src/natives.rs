//! Host binding of `static native` methods (U-Net/SLE §2: the applet reaches
//! the network interface only through native methods, which enforce
//! protection).
//!
//! The host registers each native by name and descriptor in a [`Natives`]
//! table before loading; an applet that declares a native the table lacks is
//! rejected at load ([`crate::LoadError::UnknownNative`]). At run time the
//! interpreter calls the closure with the arguments (ints, and arrays as heap
//! handles) and a [`Context`] through which the native reads and writes the
//! applet's arrays, every access bounds-checked. A native that fails returns a
//! [`NativeError`], which ends the invocation with a trap.
//!
//! # Fast forms
//!
//! A native that only reads or writes its host's state may also have a
//! **fast form** ([`FastNative`], [`Natives::set_fast`]): a function of the
//! host value, typed (no `dyn Any` downcast per call), the applet's arrays
//! and the arguments, which the JIT calls straight from generated code
//! through an entry of its own, without building a [`Context`] or calling
//! through the closure's `Arc<dyn Fn>`. The fast form does the whole call
//! or declines it having changed nothing (`None`), and then the ordinary
//! native runs: the fast form handles the common case (the budget's count
//! without a clock reading, a queue with room) and leaves every rare one
//! to the closure. The interpreter always calls the closure; both must give
//! the same results, effects and traps, which a host makes sure of by
//! sharing the checks' code between the two forms (`unet`'s natives do).
//!
//! # Inline forms
//!
//! A native with a fast form may also have an **inline form**
//! ([`InlineForm`], [`Natives::set_inline`]), which the JIT emits in place
//! of the call: a few loads, compares and a store over the words the host
//! lends for the invocation ([`HostWords`], [`FastNative::words`]), with
//! the call through the fast form (then the closure) as its rare path.
//! Generated code writes nothing but those words, which the host handed
//! out as `&mut` through a safe method.

use core::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use thiserror::Error;

use crate::heap::{Heap, Object, ObjectMut};
use crate::subset::Prim;

/// An error a native method reports; it becomes [`crate::TrapKind::Native`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct NativeError(pub String);

/// The signature of a native binding: the invocation context and the
/// arguments (one `i32` per parameter; arrays are handles). The return value
/// is ignored for `void` natives.
pub type NativeFn = Arc<dyn Fn(&mut Context<'_>, &[i32]) -> Result<i32, NativeError> + Send + Sync>;

/// The fast form of a native ([module docs](self#fast-forms)), for a host
/// value of type [`FastNative::Host`].
///
/// [`FastNative::call`] gets the arguments (one `i32` per parameter slot,
/// as the closure does) and returns `None` to decline the call, having
/// changed nothing (no state of the host or the arrays, no budget
/// charged), or `Some` of what the ordinary native returns for the same
/// call: the value, or the error that becomes its trap. It may allocate
/// in the applet's heap ([`Arrays::new_array`]) as the closure may: the
/// JIT's entry takes the heap's directory again after every call.
pub trait FastNative: 'static {
    /// The host value the fast form acts on; an invocation whose host value
    /// is of another type (or has none) calls the ordinary native.
    type Host: Any;
    /// The fast form of the call `args`.
    fn call(
        host: &mut Self::Host,
        arrays: Arrays<'_>,
        args: &[i32],
    ) -> Option<Result<i32, NativeError>>;
    /// The words the host lends the JIT's inline natives for the running
    /// invocation ([`HostWords`], [`Natives::set_inline`]), if it has them.
    /// The default lends none, and every inline form of the table then
    /// takes its rare path, the native out of line.
    #[inline(always)]
    fn words(host: &mut Self::Host) -> Option<&mut HostWords> {
        let _ = host;
        None
    }
}

/// The words of a host value that the JIT's **inline natives**
/// ([`Natives::set_inline`]) read and write in place: generated code
/// makes the whole call with a few loads, compares and stores, and
/// calls the native out of line only on the rare path.
///
/// The host lends them for each invocation ([`FastNative::words`]); the
/// JIT keeps their address for that invocation alone. The budget's count
/// is the host's own: its ordinary natives charge `work` too, so that an
/// inline call and an out-of-line one count alike. `#[repr(C)]`, so that
/// generated code reaches each field at a fixed offset. Not `Clone`: a
/// lent [`RingWords`] is its lender's alone.
#[repr(C)]
#[derive(Debug, Default)]
pub struct HostWords {
    /// The budget's count of native calls (the host's work units): one
    /// per call, and one more per 4 KiB a copy moves
    /// ([`InlineForm::CopyOut`], [`InlineForm::CopyIn`]).
    pub work: u64,
    /// The count an inline call must stay below: an inline call that would
    /// bring `work` to `bound` (a clock reading is due, or the budget is
    /// spent) takes the rare path, where the ordinary native charges.
    pub bound: u64,
    /// Values inline natives return ([`InlineForm::Int`]); a negative one
    /// sends the call to the rare path, where the ordinary native reports
    /// it (e.g. a buffer size an `int` cannot hold).
    pub ints: [i32; 2],
    /// A ring the inline push writes ([`InlineForm::PushBytes`]): its
    /// next slot and how many slots are free.
    pub ring: RingWords,
    /// A queue of `u32` entries the inline pop reads
    /// ([`InlineForm::PopU32`]): its next entry, how many are lent and the
    /// bounds every entry it returns is checked against.
    pub queue: QueueWords,
    /// A byte area the inline copies read and write
    /// ([`InlineForm::CopyOut`], [`InlineForm::CopyIn`]): its address and
    /// length.
    pub area: AreaWords,
    /// What the inline tail push ([`InlineForm::TailPush`]) checks, counts
    /// and records: the channel it may defer on, the push budgets, the
    /// largest message, and the message it deferred.
    pub tail: TailWords,
    /// Where the inline tail push writes its message as a frame instead
    /// of deferring it ([`FrameWords`]): lent for an invocation whose push
    /// on the lent channel is eager (none lent: it defers).
    pub frame: FrameWords,
}

impl HostWords {
    /// Words that lend nothing, which send every inline call to its rare
    /// path: `bound` 0 (no count is below it, so the budget check, which
    /// every form makes before its first store, fails), and for good
    /// measure no `int`, no ring slot, no queue entry and no area. What
    /// generated code reads where the host lends no words
    /// (`jit::runtime::NO_WORDS`), in place of a null pointer it would
    /// test at every inline call.
    pub(crate) const NONE: HostWords = HostWords {
        work: 0,
        bound: 0,
        ints: [-1; 2],
        ring: RingWords {
            next: 0,
            limit: 0,
            base: 0,
            room: 0,
            lent: 0,
            mask: 0,
            head: 0,
            keep: None,
        },
        queue: QueueWords {
            next: 0,
            limit: 0,
            base: 0,
            avail: 0,
            lent: 0,
            below: 0,
            align: 0,
            mask: 0,
            tail: 0,
            keep: None,
        },
        area: AreaWords {
            base: 0,
            len: 0,
            keep: None,
            full: 0,
        },
        tail: TailWords::NONE,
        frame: FrameWords::NONE,
    };
}

/// The most bytes an inline copy ([`InlineForm::CopyOut`],
/// [`InlineForm::CopyIn`]) moves with its own loop; a longer copy calls a
/// copy routine (a `memcpy`), which costs less than the loop there.
pub const COPY_INLINE_MAX: usize = 128;

/// Memory that holds a byte area the inline copies read and write
/// ([`AreaWords::new`]).
///
/// # Safety
///
/// [`AreaBytes::bytes`] returns the same address every time, valid for
/// reads and writes of [`AreaBytes::size`] bytes (the same every time) for
/// as long as the value lives. Generated code reads and writes that memory
/// through raw pointers while an invocation runs, so no Rust reference to
/// it may exist meanwhile (shared memory that is only ever reached through
/// raw pointers, volatile accesses and atomics, as unet's segment is), and
/// another party may write it meanwhile: the inline copies only move its
/// bytes, never check a value read from it.
pub unsafe trait AreaBytes: Send + Sync + 'static {
    /// The address of the area's first byte.
    fn bytes(&self) -> *mut u8;
    /// The area's length in bytes.
    fn size(&self) -> u32;
}

/// A byte area that the JIT's inline copies ([`InlineForm::CopyOut`],
/// [`InlineForm::CopyIn`]) move bytes from and to, part of
/// [`HostWords`]: lent for the host's life, not per invocation (the
/// copies move bytes and change no index the host keeps). The fields are
/// private: `base` is the address of the memory `keep` keeps alive, `len`
/// its length (0 without an area: then only a copy of no bytes at offset
/// 0 passes the bounds check, and it touches nothing).
#[repr(C)]
#[derive(Default)]
pub struct AreaWords {
    /// The area's first byte (0: no area).
    base: usize,
    /// The area's length, as a 64-bit word (generated code compares an
    /// offset plus a length, each below 2^31, against it in 64 bits).
    len: u64,
    /// The area's memory, kept alive while the words point into it.
    keep: Option<Arc<dyn AreaBytes>>,
    /// The area's whole length, which `len` is while the area is not
    /// withheld ([`AreaWords::withhold`]).
    full: u64,
}

impl core::fmt::Debug for AreaWords {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AreaWords")
            .field("area", &self.keep.is_some())
            .field("len", &self.len)
            .finish()
    }
}

impl AreaWords {
    /// Words for the area in `mem`. `None` if its address is null or it
    /// holds 2^31 bytes or more (so that an offset an `int` holds, taken
    /// as unsigned, is past it exactly when it is negative or past its
    /// end, and the inline copies make one compare for both).
    pub fn new(mem: Arc<dyn AreaBytes>) -> Option<AreaWords> {
        let base = mem.bytes() as usize;
        if base == 0 || mem.size() >= 1 << 31 {
            return None;
        }
        let len = u64::from(mem.size());
        Some(AreaWords {
            base,
            len,
            keep: Some(mem),
            full: len,
        })
    }

    /// Withholds the area from the inline copies until
    /// [`AreaWords::restore`]: their bounds check then passes no byte, so
    /// that every copy of a byte takes its rare path, the natives' own
    /// (which check what the host needs checked). For an invocation that
    /// is lent bytes of the area itself, which a copy into the area must
    /// not overwrite unchecked (unet's lent `doTx`).
    #[inline(always)]
    pub fn withhold(&mut self) {
        self.len = 0;
    }

    /// Lends the whole area again after [`AreaWords::withhold`].
    #[inline(always)]
    pub fn restore(&mut self) {
        self.len = self.full;
    }

    /// The area's length in bytes (0 without an area).
    #[inline]
    pub fn len(&self) -> u32 {
        self.len as u32
    }

    /// Whether no area is lent (or an empty one).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// [`AreaWords`]' fields that generated code reads, as offsets into
/// [`HostWords`].
pub(crate) const AREA_BASE: usize =
    core::mem::offset_of!(HostWords, area) + core::mem::offset_of!(AreaWords, base);
pub(crate) const AREA_LEN: usize =
    core::mem::offset_of!(HostWords, area) + core::mem::offset_of!(AreaWords, len);

/// The words of the inline tail push ([`InlineForm::TailPush`]), part of
/// [`HostWords`]: what it checks a message against, what it counts, and
/// where it records the message it defers.
///
/// The host lends a channel (`chan`) for an invocation whose tail push may
/// defer its message on it (the checks of the channel that the form does
/// not make, open and not closed, made when it is lent, and holding for
/// the invocation), and takes the recorded message (`array` not 0) when
/// the invocation has returned; or, with a frame's room
/// ([`HostWords::frame`], [`FrameWords`]), for an invocation whose push on
/// it writes a frame at once, and then takes the frame. `frames` and `bytes` are the push budgets'
/// use, which the host's own pushes count too, so that the two kinds of
/// push count alike; `max_*` are their limits and the largest message.
/// Holds no address: generated code writes only these words, and the
/// handle it records is the applet's own, which the host resolves with
/// the heap's checks. `#[repr(C)]`, so that generated code reaches each
/// field at a fixed offset.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailWords {
    /// The channel the inline tail push may defer on (at most `0xffff`),
    /// or [`TailWords::NO_CHANNEL`]: generated code compares the call's
    /// channel, zero-extended to 64 bits, with it, which no `int` equals
    /// where none is lent (a channel outside `0..=0xffff` never equals a
    /// lent one either), and sets its high half to all ones once it has
    /// deferred: any value of 2^32 or more lends none.
    pub chan: u64,
    /// Frames pushed in the running invocation.
    pub frames: u64,
    /// The most frames an invocation may push.
    pub max_frames: u64,
    /// Bytes pushed in the running invocation.
    pub bytes: u64,
    /// The most bytes an invocation may push.
    pub max_bytes: u64,
    /// The largest message the endpoint may send; below 2^31 (generated
    /// code compares a length zero-extended with it, so that a negative
    /// one fails too).
    pub max_message: u64,
    /// The deferred message's array (a heap handle; 0: none deferred).
    pub array: i32,
    /// The deferred message's offset in the array.
    pub off: u32,
    /// The deferred message's length.
    pub len: u32,
}

impl TailWords {
    /// [`TailWords::chan`] where no channel is lent.
    pub const NO_CHANNEL: u64 = u64::MAX;

    /// Words that lend no channel, count nothing and allow nothing.
    pub const NONE: TailWords = TailWords {
        chan: TailWords::NO_CHANNEL,
        frames: 0,
        max_frames: 0,
        bytes: 0,
        max_bytes: 0,
        max_message: 0,
        array: 0,
        off: 0,
        len: 0,
    };

    /// The message the inline tail push recorded since the last take, as
    /// `(array, off, len)`, and none recorded from now on; `None` if it
    /// recorded none.
    #[inline(always)]
    pub fn take(&mut self) -> Option<(i32, u32, u32)> {
        if self.array == 0 {
            return None;
        }
        let m = (self.array, self.off, self.len);
        self.array = 0;
        Some(m)
    }
}

impl Default for TailWords {
    fn default() -> TailWords {
        TailWords::NONE
    }
}

/// [`TailWords`]' fields that generated code reads and writes, as offsets
/// into [`HostWords`].
pub(crate) const TAIL_CHAN: usize =
    core::mem::offset_of!(HostWords, tail) + core::mem::offset_of!(TailWords, chan);
pub(crate) const TAIL_FRAMES: usize =
    core::mem::offset_of!(HostWords, tail) + core::mem::offset_of!(TailWords, frames);
pub(crate) const TAIL_MAX_FRAMES: usize =
    core::mem::offset_of!(HostWords, tail) + core::mem::offset_of!(TailWords, max_frames);
pub(crate) const TAIL_BYTES: usize =
    core::mem::offset_of!(HostWords, tail) + core::mem::offset_of!(TailWords, bytes);
pub(crate) const TAIL_MAX_BYTES: usize =
    core::mem::offset_of!(HostWords, tail) + core::mem::offset_of!(TailWords, max_bytes);
pub(crate) const TAIL_MAX_MESSAGE: usize =
    core::mem::offset_of!(HostWords, tail) + core::mem::offset_of!(TailWords, max_message);
pub(crate) const TAIL_ARRAY: usize =
    core::mem::offset_of!(HostWords, tail) + core::mem::offset_of!(TailWords, array);
pub(crate) const TAIL_OFF: usize =
    core::mem::offset_of!(HostWords, tail) + core::mem::offset_of!(TailWords, off);
pub(crate) const TAIL_LEN: usize =
    core::mem::offset_of!(HostWords, tail) + core::mem::offset_of!(TailWords, len);

/// The frame an eager inline tail push ([`InlineForm::TailPush`] with
/// [`FrameWords`] lent) writes: a header of [`FRAME_HEADER`] bytes (an
/// Ethernet, IPv4 and UDP header and unet's own, copied from the lent
/// template), then the message. Three 16-bit big-endian fields are
/// patched for the message's length `len`: the IPv4 total length at
/// [`FRAME_IP_TOTAL_LEN`] (`len + FRAME_HEADER - FRAME_IP`, its low 16
/// bits), the UDP length at [`FRAME_UDP_LEN`] (`len + FRAME_HEADER -
/// FRAME_UDP`, its low 16 bits) and the IPv4 header checksum at
/// [`FRAME_IP_CSUM`] (RFC 1624's eqn. 3 from the template's lent sum:
/// `!fold(sum + total)`, `fold` adding the high 16 bits to the low ones
/// twice). The one definition of the frame's shape for generated code:
/// unet asserts that its `frame` module's constants are these.
pub const FRAME_HEADER: usize = 54;
/// Where the IPv4 header begins in a frame ([`FRAME_HEADER`]).
pub const FRAME_IP: usize = 14;
/// Where the IPv4 total length is in a frame ([`FRAME_HEADER`]).
pub const FRAME_IP_TOTAL_LEN: usize = 16;
/// Where the IPv4 header checksum is in a frame ([`FRAME_HEADER`]).
pub const FRAME_IP_CSUM: usize = 24;
/// Where the UDP header begins in a frame ([`FRAME_HEADER`]).
pub const FRAME_UDP: usize = 34;
/// Where the UDP length is in a frame ([`FRAME_HEADER`]).
pub const FRAME_UDP_LEN: usize = 38;

/// Where an eager inline tail push ([`InlineForm::TailPush`]) writes its
/// message as a frame ([`FRAME_HEADER`]), part of [`HostWords`]: the
/// first free byte of the host's outbox and how many bytes follow it, the
/// channel's header template and its checksum sum, and the length of the
/// frame written.
///
/// The host lends them ([`FrameWords::lend`]) with the channel the push
/// may use ([`TailWords::chan`]) for an invocation whose push on it would
/// write a frame at once (not defer it), and takes the frame back
/// ([`FrameWords::take`]) when the invocation has returned: the push
/// writes the frame's bytes and records its length, and the host makes
/// it one of its outbox's frames. While none is lent (`at` 0) the form
/// defers on the lent channel instead. The fields are private: `at` and
/// `template` are addresses that only [`FrameWords::lend`], an `unsafe`
/// method, sets. `#[repr(C)]`, so that generated code reaches each field
/// at a fixed offset. Not `Clone`: lent addresses are their lender's
/// alone.
#[repr(C)]
#[derive(Debug)]
pub struct FrameWords {
    /// The first byte the frame may take (0: none lent, the form defers).
    at: usize,
    /// The bytes writable from `at`, less [`FRAME_HEADER`]: the longest
    /// message a frame there may carry.
    room: u64,
    /// The channel's header template, [`FRAME_HEADER`] bytes.
    template: usize,
    /// The template's checksum sum (`!csum + !total`, not folded, below
    /// 2^17).
    sum: u64,
    /// The bytes of the frame written since the last take (0: none).
    wrote: u64,
}

impl FrameWords {
    /// Words that lend no frame: the inline tail push defers.
    pub const NONE: FrameWords = FrameWords {
        at: 0,
        room: 0,
        template: 0,
        sum: 0,
        wrote: 0,
    };

    /// Lends the inline tail push `room` bytes at `at` for one frame, made
    /// from the header `template` whose checksum sum is `sum` (below
    /// 2^17, as any two 16-bit words make), until [`FrameWords::take`].
    /// A frame written since the last take is forgotten: take first.
    /// Lends nothing if `at` is null or `room` is below [`FRAME_HEADER`].
    ///
    /// # Safety
    ///
    /// Until the next [`FrameWords::take`] (or `lend`), `at` is valid for
    /// writes of `room` bytes and `template` for reads of
    /// [`FRAME_HEADER`] bytes, and no Rust reference to either range is
    /// used while generated code that these words are lent to runs
    /// (it writes the one and reads the other through raw pointers). A
    /// native the code calls may use its own references to them if it
    /// takes the words back ([`FrameWords::take`]) before it returns to
    /// the code, as unet's native push does.
    #[inline(always)]
    pub unsafe fn lend(
        &mut self,
        at: *mut u8,
        room: usize,
        template: *const [u8; FRAME_HEADER],
        sum: u32,
    ) {
        self.wrote = 0;
        if at.is_null() || room < FRAME_HEADER {
            self.at = 0;
            return;
        }
        self.at = at as usize;
        // Below 2^31 whatever `room` is: with `TailWords::max_message` (a
        // public field) set past it, this bound alone still keeps a
        // negative length, which the form compares unsigned, from passing.
        self.room = (room - FRAME_HEADER).min(i32::MAX as usize) as u64;
        self.template = template as usize;
        self.sum = u64::from(sum);
    }

    /// The length of the frame the inline tail push wrote since the last
    /// lend or take (0: none), and nothing lent from now on.
    #[inline(always)]
    pub fn take(&mut self) -> usize {
        self.at = 0;
        let n = self.wrote as usize;
        self.wrote = 0;
        n
    }

    /// Whether a frame's room is lent.
    #[inline(always)]
    pub fn is_lent(&self) -> bool {
        self.at != 0
    }
}

impl Default for FrameWords {
    fn default() -> FrameWords {
        FrameWords::NONE
    }
}

/// [`FrameWords`]' fields that generated code reads and writes, as
/// offsets into [`HostWords`].
pub(crate) const FRAME_AT: usize =
    core::mem::offset_of!(HostWords, frame) + core::mem::offset_of!(FrameWords, at);
pub(crate) const FRAME_ROOM: usize =
    core::mem::offset_of!(HostWords, frame) + core::mem::offset_of!(FrameWords, room);
pub(crate) const FRAME_TEMPLATE: usize =
    core::mem::offset_of!(HostWords, frame) + core::mem::offset_of!(FrameWords, template);
pub(crate) const FRAME_SUM: usize =
    core::mem::offset_of!(HostWords, frame) + core::mem::offset_of!(FrameWords, sum);
pub(crate) const FRAME_WROTE: usize =
    core::mem::offset_of!(HostWords, frame) + core::mem::offset_of!(FrameWords, wrote);

/// The size of a slot of a ring that [`InlineForm::PushBytes`] writes, in
/// bytes: an 8-byte header, then up to [`RING_BYTES`] bytes.
pub const RING_SLOT: usize = 64;

/// The most bytes [`InlineForm::PushBytes`] writes into a slot, after its
/// 8-byte header.
pub const RING_BYTES: usize = RING_SLOT - 8;

/// The value of a ring slot's seal byte once the slot is whole: the last
/// byte [`InlineForm::PushBytes`] stores (with release ordering) in the
/// slot's header word, at [`RING_SEAL_BYTE`]. The one definition: unet's
/// seal (`unet::ring::SEALED`, `unet::shm::RX_SEALED`) is this, and the
/// JIT's inline push builds its header from [`RING_HEADER_SEALED`].
pub const RING_SEALED: u8 = 1;

/// The byte of a ring slot's little-endian header word that holds its
/// seal ([`RING_SEALED`]).
pub const RING_SEAL_BYTE: usize = 7;

/// The header word's seal: [`RING_SEALED`] at byte [`RING_SEAL_BYTE`],
/// which the inline push ORs into `len | tag << 32` (byte 6, unet's
/// `nbufs`, left 0).
pub const RING_HEADER_SEALED: u64 = (RING_SEALED as u64) << (8 * RING_SEAL_BYTE);

/// The header word's byte 6 (unet's `nbufs`) set to 1: a slot that names
/// one entry after its header ([`InlineForm::PushEntry`]) where an inline
/// push's ([`InlineForm::PushBytes`]) holds bytes and leaves it 0.
pub const RING_HEADER_ONE: u64 = 1 << 48;

// The shape the JIT's encoding needs (`inline_push`): the seal is nonzero,
// lies wholly in the word's high half (built as a 32-bit value and shifted
// left by 32), and clears the length (bits 0-31), the tag (bits 32-47,
// added to the seal in a register, so no carry may reach it) and byte 6.
const _: () = assert!(RING_SEALED != 0);
const _: () = assert!(RING_HEADER_SEALED as u32 == 0);
const _: () = assert!((RING_HEADER_SEALED >> 32) & 0x00ff_ffff == 0);
// `inline_push_entry` adds byte 6's 1 to the seal's high half the same way.
const _: () = assert!(RING_HEADER_ONE as u32 == 0 && (RING_HEADER_ONE >> 32) & 0xff00_ffff == 0);

/// Memory that holds the slots of a ring an inline push writes
/// ([`RingWords::lend`]).
///
/// # Safety
///
/// [`RingSlots::slots`] returns the same address, aligned to 8, every
/// time, valid for reads and writes of `depth() * RING_SLOT` bytes for as
/// long as the value lives, and [`RingSlots::depth`] the same power of two
/// (at least 1, at most 2^24). Generated code writes that memory through
/// raw pointers while an invocation runs, so no Rust reference to it may
/// exist meanwhile (shared memory that is only ever reached through raw
/// pointers, volatile accesses and atomics, as unet's segment is).
pub unsafe trait RingSlots: Send + Sync + 'static {
    /// The address of slot 0.
    fn slots(&self) -> *mut u8;
    /// The number of slots.
    fn depth(&self) -> u32;
}

/// The producer's state of a ring that the JIT's inline push
/// ([`InlineForm::PushBytes`]) writes, part of [`HostWords`].
///
/// The host owns the ring's indices; it lends a run of free slots
/// ([`RingWords::lend`]: the slot its producer index names and how many are
/// free as it last saw the consumer's index) and takes back how many the
/// inline pushes filled ([`RingWords::take`]) before it pushes itself and
/// when the invocation ends. Generated code writes a slot only while the
/// run has one (`room > 0`), at `next`, then advances `next` (wrapping at
/// the ring's end) and decrements `room`. It publishes no index, but each
/// slot it writes ends with its seal (the header word's byte 7, stored
/// last with release ordering): a consumer that watches the slots may
/// take it at once, so the host must take back every slot filled, and
/// never lend it again, before that consumer frees it.
/// The fields are private: `next` always points at a slot of the memory
/// that `keep` keeps alive, which is what makes the writes sound.
#[repr(C)]
#[derive(Default)]
pub struct RingWords {
    /// The address of the slot the next push writes (0: no ring).
    next: usize,
    /// One past the ring's last slot.
    limit: usize,
    /// Slot 0.
    base: usize,
    /// Free slots left in the lent run; 0 sends every push to the rare
    /// path.
    room: u32,
    /// `room` when it was lent: `lent - room` pushes were made inline.
    lent: u32,
    /// The ring's depth less one.
    mask: u32,
    /// The producer index of the slot at `next` (as lent, and moved on
    /// by [`RingWords::take`]).
    head: u32,
    /// The ring's memory, kept alive while the words point into it.
    keep: Option<Arc<dyn RingSlots>>,
}

impl core::fmt::Debug for RingWords {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RingWords")
            .field("ring", &self.keep.is_some())
            .field("room", &self.room)
            .field("lent", &self.lent)
            .finish()
    }
}

impl RingWords {
    /// Words for the ring in `mem`, lending no slot yet. `None` if its
    /// address is null or unaligned or its depth not a power of two.
    pub fn new(mem: Arc<dyn RingSlots>) -> Option<RingWords> {
        let (base, depth) = (mem.slots() as usize, mem.depth());
        if base == 0 || base % 8 != 0 || !depth.is_power_of_two() || depth > 1 << 24 {
            return None;
        }
        Some(RingWords {
            next: base,
            limit: base + depth as usize * RING_SLOT,
            base,
            room: 0,
            lent: 0,
            mask: depth - 1,
            head: 0,
            keep: Some(mem),
        })
    }

    /// Lends the inline pushes the `room` free slots from the one that
    /// producer index `head` names (at most the ring's depth; fewer are
    /// lent if more are given). Whatever was lent before and not taken
    /// back ([`RingWords::take`]) is forgotten: take back first, since a
    /// slot filled is sealed and may be its consumer's already. Without a
    /// ring nothing is lent.
    #[inline]
    pub fn lend(&mut self, head: u32, room: u32) {
        if self.keep.is_none() {
            return;
        }
        self.next = self.base + (head & self.mask) as usize * RING_SLOT;
        self.room = room.min(self.mask + 1);
        self.lent = self.room;
        self.head = head;
    }

    /// The producer index of the slot the next inline push writes: the
    /// one lent, moved on by every [`RingWords::take`]. A host whose
    /// producer index still equals it, and whose view of the consumer's
    /// index has not moved since it lent the run, need not lend it again.
    #[inline]
    pub fn head(&self) -> u32 {
        self.head
    }

    /// How many slots the inline pushes filled since the last
    /// [`RingWords::lend`] or `take`, in order from the one lent first;
    /// the rest stays lent.
    #[inline]
    pub fn take(&mut self) -> u32 {
        let n = self.lent - self.room;
        // Nothing filled (an invocation that pushed nothing inline): the
        // words are as they were, so nothing is written.
        if n != 0 {
            self.lent = self.room;
            self.head = self.head.wrapping_add(n);
        }
        n
    }

    /// Free slots still lent.
    #[inline]
    pub fn room(&self) -> u32 {
        self.room
    }
}

/// Memory that holds the `u32` entries of a queue an inline pop reads
/// ([`QueueWords::lend`]).
///
/// # Safety
///
/// [`QueueSlots::slots`] returns the same address, aligned to 4, every
/// time, valid for reads of `depth() * 4` bytes for as long as the value
/// lives, and [`QueueSlots::depth`] the same power of two (at least 1, at
/// most 2^24). Generated code reads that memory through raw pointers while
/// an invocation runs (memory another party may write meanwhile, as a
/// shared segment is: every value read is checked before it is used).
pub unsafe trait QueueSlots: Send + Sync + 'static {
    /// The address of entry 0.
    fn slots(&self) -> *const u32;
    /// The number of entries.
    fn depth(&self) -> u32;
}

/// The consumer's state of a queue of `u32` entries that the JIT's inline
/// pop ([`InlineForm::PopU32`]) reads, part of [`HostWords`].
///
/// The host owns the queue's indices; it lends a run of entries
/// ([`QueueWords::lend`]: the entry its consumer index names and how many
/// it may take as it last saw the producer's index) and takes back how
/// many the inline pops took ([`QueueWords::take`]) before it reads the
/// queue itself and when the invocation ends. Generated code reads an
/// entry only while the run has one (`avail > 0`), at `next`; it takes it
/// (advances `next`, wrapping at the queue's end, and decrements `avail`)
/// only if the entry is below `below` and has none of the bits of `align`
/// set, and otherwise leaves it, and the whole call, to the rare path.
/// The fields are private: `next` always points at an entry of the memory
/// that `keep` keeps alive, which is what makes the reads sound.
#[repr(C)]
#[derive(Default)]
pub struct QueueWords {
    /// The address of the entry the next pop reads.
    next: usize,
    /// One past the queue's last entry.
    limit: usize,
    /// Entry 0.
    base: usize,
    /// Entries left in the lent run; 0 sends every pop to the rare path.
    avail: u32,
    /// `avail` when it was lent: `lent - avail` entries were taken inline.
    lent: u32,
    /// An entry is taken inline only if it is below this (at most 2^31,
    /// so that it is a non-negative `int`)...
    below: u32,
    /// ... and has none of these bits set.
    align: u32,
    /// The queue's depth less one.
    mask: u32,
    /// The consumer index of the entry at `next` (as lent, and moved on
    /// by [`QueueWords::take`]).
    tail: u32,
    /// The queue's memory, kept alive while the words point into it.
    keep: Option<Arc<dyn QueueSlots>>,
}

impl core::fmt::Debug for QueueWords {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QueueWords")
            .field("queue", &self.keep.is_some())
            .field("avail", &self.avail)
            .field("lent", &self.lent)
            .finish()
    }
}

impl QueueWords {
    /// Words for the queue in `mem`, lending no entry yet, whose inline
    /// pops take only entries below `below` (at most 2^31 is used: an
    /// entry must be a non-negative `int`) with none of the bits of
    /// `align` set. `None` if its address is null or unaligned or its
    /// depth not a power of two.
    pub fn new(mem: Arc<dyn QueueSlots>, below: u32, align: u32) -> Option<QueueWords> {
        let (base, depth) = (mem.slots() as usize, mem.depth());
        if base == 0 || base % 4 != 0 || !depth.is_power_of_two() || depth > 1 << 24 {
            return None;
        }
        Some(QueueWords {
            next: base,
            limit: base + depth as usize * 4,
            base,
            avail: 0,
            lent: 0,
            below: below.min(1 << 31),
            align,
            mask: depth - 1,
            tail: 0,
            keep: Some(mem),
        })
    }

    /// Lends the inline pops the `avail` entries from the one that
    /// consumer index `tail` names (at most the queue's depth). Whatever
    /// was lent before and not taken back ([`QueueWords::take`]) is
    /// forgotten. Without a queue nothing is lent.
    #[inline]
    pub fn lend(&mut self, tail: u32, avail: u32) {
        if self.keep.is_none() {
            return;
        }
        self.next = self.base + (tail & self.mask) as usize * 4;
        self.avail = avail.min(self.mask + 1);
        self.lent = self.avail;
        self.tail = tail;
    }

    /// How many entries the inline pops took since the last
    /// [`QueueWords::lend`] or `take`, in order from the one lent first;
    /// the rest stays lent.
    #[inline]
    pub fn take(&mut self) -> u32 {
        let n = self.lent - self.avail;
        // Nothing taken (an invocation that popped nothing inline): the
        // words are as they were, so nothing is written.
        if n != 0 {
            self.lent = self.avail;
            self.tail = self.tail.wrapping_add(n);
        }
        n
    }

    /// The consumer index of the entry the next inline pop reads.
    #[inline]
    pub fn tail(&self) -> u32 {
        self.tail
    }

    /// How many entries the inline pops took since the last
    /// [`QueueWords::lend`] or `take`, not yet taken back (what the next
    /// `take` returns).
    #[inline]
    pub fn taken(&self) -> u32 {
        self.lent - self.avail
    }

    /// Entries still lent.
    #[inline]
    pub fn avail(&self) -> u32 {
        self.avail
    }
}

/// [`QueueWords`]' fields that generated code reads and writes, as
/// offsets into [`HostWords`].
pub(crate) const QUEUE_NEXT: usize =
    core::mem::offset_of!(HostWords, queue) + core::mem::offset_of!(QueueWords, next);
pub(crate) const QUEUE_LIMIT: usize =
    core::mem::offset_of!(HostWords, queue) + core::mem::offset_of!(QueueWords, limit);
pub(crate) const QUEUE_BASE: usize =
    core::mem::offset_of!(HostWords, queue) + core::mem::offset_of!(QueueWords, base);
pub(crate) const QUEUE_AVAIL: usize =
    core::mem::offset_of!(HostWords, queue) + core::mem::offset_of!(QueueWords, avail);
pub(crate) const QUEUE_BELOW: usize =
    core::mem::offset_of!(HostWords, queue) + core::mem::offset_of!(QueueWords, below);
pub(crate) const QUEUE_ALIGN: usize =
    core::mem::offset_of!(HostWords, queue) + core::mem::offset_of!(QueueWords, align);

/// [`RingWords`]' fields that generated code reads and writes, as offsets
/// into [`HostWords`].
pub(crate) const RING_NEXT: usize =
    core::mem::offset_of!(HostWords, ring) + core::mem::offset_of!(RingWords, next);
pub(crate) const RING_LIMIT: usize =
    core::mem::offset_of!(HostWords, ring) + core::mem::offset_of!(RingWords, limit);
pub(crate) const RING_BASE: usize =
    core::mem::offset_of!(HostWords, ring) + core::mem::offset_of!(RingWords, base);
pub(crate) const RING_ROOM: usize =
    core::mem::offset_of!(HostWords, ring) + core::mem::offset_of!(RingWords, room);

/// What an inline native does ([`Natives::set_inline`]), over the
/// invocation's [`HostWords`] `w`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InlineForm {
    /// A native of no arguments returning `int` that charges one unit:
    /// if `w.ints[k] >= 0` and `w.work + 1 < w.bound`, it counts the unit
    /// (`w.work += 1`) and returns `w.ints[k]`; otherwise the native runs
    /// out of line (its fast form, then the ordinary form), which charges,
    /// checks and reports as always.
    Int(u8),
    /// A `([BII)V` native `(array, tag, len)` that charges one unit and
    /// pushes a slot onto the ring `w.ring` lends: if `w.work + 1 <
    /// w.bound`, `0 <= len <= `[`RING_BYTES`], `0 <= tag <= 0xffff`, the
    /// array is a `byte[]` or `boolean[]` (not null) of at least `len`
    /// elements and the lent run has a free slot, it writes the array's
    /// first `len` bytes after the slot's 8-byte header (the slot's other
    /// bytes keep what they held), then the header, the little-endian
    /// `u64` `len | tag << 32 | `[`RING_HEADER_SEALED`] (its byte 6 is 0 and
    /// its byte 7 is [`RING_SEALED`]: the slot's seal), with one release
    /// store, so that a reader
    /// that sees byte 7 set (with an acquire load) sees every byte; it
    /// takes the slot from the run and counts the unit; otherwise
    /// (nothing written) the native runs out of line.
    PushBytes,
    /// A `([III)V` native `(entries, tag, len)` that charges one unit and
    /// pushes onto the ring `w.ring` lends a slot naming one entry of the
    /// kind the queue `w.queue` holds (an offset of `w.queue.align + 1`
    /// bytes' room: unet's buffer): if `w.work + 1 < w.bound`, the lent
    /// run has a free slot, `1 <= len <= w.queue.align + 1` (the one
    /// entry's room holds the length), `0 <= tag <= 0xffff`, the array has
    /// exactly `n` elements (the form's parameter, at least 4; `null` has
    /// none) and its first element `e` is below `w.queue.below` (unsigned)
    /// with none of the `w.queue.align` bits set (an entry the inline pop
    /// would take), it writes `e` (little-endian) at the slot's byte 8,
    /// then the header, the little-endian `u64` `len | tag << 32 |
    /// `[`RING_HEADER_ONE`]` | `[`RING_HEADER_SEALED`], with one release
    /// store (the seal last, as [`InlineForm::PushBytes`] writes it),
    /// takes the slot from the run and counts the unit; otherwise (nothing
    /// written) the native runs out of line. The verifier has typed the
    /// array as the descriptor's `int[]` (or `null`). unet's `dmaRxd` for a
    /// message in one buffer (`n` its descriptor list's 14).
    PushEntry(u8),
    /// A `()I` native that charges one unit and pops an entry from the
    /// queue `w.queue` lends: if `w.work + 1 < w.bound`, the lent run has
    /// an entry, and that entry `e` is below `w.queue`'s bound and has
    /// none of its `align` bits set, it takes the entry, counts the unit
    /// and returns `e`; otherwise (nothing taken) the native runs out of
    /// line, which skips and counts what it must.
    PopU32,
    /// A `([BIII)V` native `(array, aoff, off, len)` that charges `1 +
    /// len / 4096` units and copies `len` bytes from the area `w.area`
    /// lends, at `off`, into the array at `aoff`: if `0 <= len`, `w.work +
    /// 1 + len / 4096 < w.bound`, `0 <= off` and `off + len <= w.area`'s
    /// length, the array is a `byte[]` or `boolean[]` (not null), `0 <=
    /// aoff` and `aoff + len <=` its length, it counts the units and
    /// copies the bytes (with its own loop up to [`COPY_INLINE_MAX`]
    /// bytes, with a `memcpy` past it); otherwise (nothing written) the
    /// native runs out of line, which makes its checks in its order and
    /// reports the first that fails. unet's `doHtoLDMA`.
    CopyOut,
    /// [`InlineForm::CopyOut`] the other way: the array's `len` bytes at
    /// `aoff` into the area at `off`, under the same checks. unet's
    /// `doLtoHDMA`.
    CopyIn,
    /// A `([BIII)V` native `(array, off, chan, len)` at a tail site
    /// ([`TAIL_SUFFIX`]) that charges `1 + len / 4096` units and defers
    /// the message `array[off..off + len)` on `chan` ([`TailWords`]): if
    /// `chan` is the channel `w.tail` lends (`w.tail.chan`, which also
    /// makes it one of `0..=0xffff`), `w.work + 1 + len / 4096 <
    /// w.bound`, the array is a `byte[]` or `boolean[]` (not null), `0 <=
    /// len`, `0 <= off`, `off + len <=` its length, `len <=
    /// w.tail.max_message`, `w.tail.frames < w.tail.max_frames` and
    /// `w.tail.bytes + len <= w.tail.max_bytes`, it counts the units, the
    /// frame and the bytes, records `(array, off, len)` in `w.tail` and
    /// lends no channel from then on (the high half of `w.tail.chan` set
    /// to all ones); otherwise (nothing written) the native
    /// runs out of line, which makes its checks in its order and reports
    /// the first that fails. unet's `txPush#tail`.
    ///
    /// Where the host lends a frame's room with the channel
    /// ([`FrameWords`]: a push that would not defer), the same checks,
    /// then `len <=` the room after a header, and instead of the record it
    /// writes the message as a frame ([`FRAME_HEADER`]: the lent header
    /// template with its lengths and IPv4 checksum patched, then the
    /// bytes) and records the frame's length in `w.frame`, which the host
    /// takes back when the invocation has returned.
    TailPush,
}

/// What [`Natives::set_fast`] recorded for the JIT: the runtime entry of a
/// native's fast form, and the host type it is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FastEntry {
    /// The addresses of the runtime functions generated code calls, for a
    /// native returning `int`, `void`, or anything else.
    pub(crate) entry: [usize; 3],
    /// The fast form's host type.
    pub(crate) host: core::any::TypeId,
    /// The function that finds the host's [`HostWords`]
    /// ([`FastNative::words`]), as the JIT's context keeps it.
    pub(crate) words: crate::jit::WordsFn,
}

/// Why [`Natives::set_fast`] refused a fast form.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FastError {
    /// No ordinary native is bound with that name and descriptor.
    #[error("no native {name}{descriptor} is bound to give a fast form")]
    Unbound {
        /// The name.
        name: String,
        /// The descriptor.
        descriptor: String,
    },
    /// An inline form was given to a native without a fast form
    /// ([`Natives::set_inline`] needs one, for its rare path).
    #[error("native {name}{descriptor} has no fast form to give an inline form")]
    NoFastForm {
        /// The name.
        name: String,
        /// The descriptor.
        descriptor: String,
    },
    /// The inline form does not fit the native's descriptor, names a
    /// word [`HostWords`] lacks, or is [`InlineForm::TailPush`] for a
    /// native that is not a tail form ([`TAIL_SUFFIX`]).
    #[error("the inline form {form:?} does not fit native {name}{descriptor}")]
    InlineShape {
        /// The name.
        name: String,
        /// The descriptor.
        descriptor: String,
        /// The form.
        form: InlineForm,
    },
    /// The table's fast forms are for another host type: one table's fast
    /// forms share one host type, which an invocation checks once.
    #[error("the table's fast forms are for host type {table}, not {given}")]
    HostType {
        /// The host type of the table's fast forms.
        table: &'static str,
        /// The host type of the refused one.
        given: &'static str,
    },
}

/// Why [`Natives::set_read_only`] refused a mark.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MarkError {
    /// No native is bound with that name and descriptor.
    #[error("no native {name}{descriptor} is bound to mark read-only")]
    Unbound {
        /// The name.
        name: String,
        /// The descriptor.
        descriptor: String,
    },
    /// The descriptor has no array parameter `param`.
    #[error("native {name}{descriptor} has no array parameter {param} to mark read-only")]
    NotAnArray {
        /// The name.
        name: String,
        /// The descriptor.
        descriptor: String,
        /// The parameter, counted from 0 as in the descriptor.
        param: u16,
    },
}

/// What a native's **tail form** is bound as: its name with this suffix
/// ([`tail_name`]), with the same descriptor.
///
/// A call site of a native is a **tail site** when nothing can run between
/// the call's return and the end of the invocation that writes memory: the
/// site is in a method that no call site of the class names (so that it
/// runs only as the method the host invoked), and the instructions after
/// it, in a straight line, are only constants, local loads, `pop`s and
/// `nop`s up to a return (no store, branch, call, switch or allocation,
/// nothing that can trap), and every array argument of the call is pushed
/// by `getstatic` (or `aload_0; getfield`) with only side-effect-free
/// single pushes after it up to the call and no jump target in between
/// (`decode::args_rooted`), so that a static or the instance
/// still holds the array at the invocation's end: the end-of-invocation
/// collection frees arrays held only by locals, and a `new byte[n]`
/// pushed from a local makes the site not a tail site. The one local
/// that may push an array argument is a lent parameter's
/// ([`crate::LentParam`], proved by the lent analysis), where no
/// instruction of the method writes that local: the argument is then the
/// array the host lent ([`crate::heap::LENT`]), which the host, not the
/// heap, holds. The decoder
/// proves it from the bytecode, once
/// per site, and calls the native there through an entry of its own
/// ([`crate::decode::NativeDecl::tail`]), so that the interpreter and the
/// JIT both run the tail form there, with its fast form where it has one.
/// A native whose table binds no tail form runs its ordinary forms (and
/// its inline form) at every site.
///
/// What a tail form may rely on: every array the call was given is still
/// allocated (held by a static or the instance, so not collected) and
/// holds, after the invocation has returned (its collection included),
/// exactly what it held at the call, at the same handle, until the host
/// runs the applet again: a host may read it then instead of copying it
/// now. The exception is the lent array (handle `LENT`): after the lend
/// its handle reads as an empty array, and a host that reads it later
/// reads the bytes it lent, where it lent them from (the applet only read
/// them; they change only as the host's contract for them lets them
/// change). A host should still treat a handle it cannot resolve as a
/// message it could not send, never as a reason to panic. `#` is in no name a class may
/// declare: a native declared with it is refused at load
/// ([`crate::LoadError::UnknownNative`]), so that no applet calls a tail
/// form at a site the decoder did not prove.
pub const TAIL_SUFFIX: &str = "#tail";

/// The failure a native that panicked reports, on the interpreter and the
/// JIT alike: a panic never unwinds out of an invocation.
pub(crate) const PANICKED: &str = "the native panicked";

/// The name a native's tail form is bound as ([`TAIL_SUFFIX`]).
pub fn tail_name(name: &str) -> String {
    format!("{name}{TAIL_SUFFIX}")
}

/// A table of native bindings, keyed by name and descriptor.
#[derive(Clone, Default)]
pub struct Natives {
    map: HashMap<(String, String), NativeFn>,
    /// The fast forms of some of them ([`Natives::set_fast`]).
    fast: HashMap<(String, String), FastEntry>,
    /// The inline forms of some of those ([`Natives::set_inline`]).
    inline: HashMap<(String, String), InlineForm>,
    /// The host type all fast forms share, and its name.
    fast_host: Option<(core::any::TypeId, &'static str)>,
    /// The table's lender of [`HostWords`] ([`Natives::set_words`]): the
    /// words every fast form's program finds at an invocation's entry.
    words: Option<crate::jit::WordsFn>,
    /// The array parameters each native only reads
    /// ([`Natives::set_read_only`]), ascending.
    read_only: HashMap<(String, String), Vec<u16>>,
}

impl core::fmt::Debug for Natives {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut keys: Vec<String> = self.map.keys().map(|(n, d)| format!("{n}{d}")).collect();
        keys.sort();
        f.debug_struct("Natives").field("bound", &keys).finish()
    }
}

impl Natives {
    /// An empty table.
    pub fn new() -> Natives {
        Natives::default()
    }

    /// The natives of the paper's Figure 2 applet (`RawUnet`) bound to
    /// stubs that move no data: `newAlignedArray` allocates, the free
    /// buffer is 4096 bytes at offset 0, and the DMA and queue calls return
    /// at once. For benchmarks and tools that run applets without an
    /// endpoint.
    pub fn figure2_stubs() -> Natives {
        Natives::new()
            .with("newAlignedArray", "(I)[B", |cx, a| {
                cx.new_array(Prim::Byte, a[0])
            })
            .with("getFreeBufferLength", "()I", |_, _| Ok(4096))
            .with("getFreeBuffer", "()I", |_, _| Ok(0))
            .with("doHtoLDMA", "([BIII)V", |_, _| Ok(0))
            .with("doLtoHDMA", "([BIII)V", |_, _| Ok(0))
            .with("txPush", "([BIII)V", |_, _| Ok(0))
            .with("dmaRxd", "([III)V", |_, _| Ok(0))
            .with("dmaRxdPayload", "([BII)V", |_, _| Ok(0))
    }

    /// Binds `name` with `descriptor` (e.g. `"txPush"`, `"([BIII)V"`) to `f`,
    /// replacing any earlier binding.
    pub fn register<F>(&mut self, name: &str, descriptor: &str, f: F) -> &mut Natives
    where
        F: Fn(&mut Context<'_>, &[i32]) -> Result<i32, NativeError> + Send + Sync + 'static,
    {
        let key = (name.to_owned(), descriptor.to_owned());
        self.fast.remove(&key);
        self.inline.remove(&key);
        // A new body: whatever the old one only read, this one may write.
        self.read_only.remove(&key);
        self.map.insert(key, Arc::new(f));
        self
    }

    /// Marks the array parameters `params` (counted from 0 as in the
    /// descriptor) of the native bound as `name` with `descriptor` as only
    /// read: a method with a lent `byte[]` ([`crate::LentParam`]) may pass
    /// it there, and nowhere else. Adds to the earlier marks; re-binding the
    /// native ([`Natives::register`]) drops them, so an unmarked native
    /// never receives a lent array.
    ///
    /// The mark is the host's promise, for every form of the native (its
    /// closure, its fast form and its inline form): during the call it only
    /// reads the array's elements and its length, and it neither writes
    /// them nor keeps the handle past the call, nor returns it (a native
    /// given a lent array is taken to return one, if it returns an array).
    /// A tail form ([`TAIL_SUFFIX`]) may read the array after the
    /// invocation, as the lend's owner allows. A wrong mark is a hole:
    /// read the body before marking it.
    pub fn set_read_only(
        &mut self,
        name: &str,
        descriptor: &str,
        params: &[u16],
    ) -> Result<&mut Natives, MarkError> {
        let key = (name.to_owned(), descriptor.to_owned());
        if !self.map.contains_key(&key) {
            return Err(MarkError::Unbound {
                name: key.0,
                descriptor: key.1,
            });
        }
        let sig = crate::subset::parse_method_descriptor(descriptor).ok();
        for &p in params {
            let is_array = sig
                .as_ref()
                .and_then(|s| s.params.get(usize::from(p)))
                .is_some_and(|t| t.is_ref());
            if !is_array {
                return Err(MarkError::NotAnArray {
                    name: key.0,
                    descriptor: key.1,
                    param: p,
                });
            }
        }
        let marks = self.read_only.entry(key).or_default();
        marks.extend_from_slice(params);
        marks.sort_unstable();
        marks.dedup();
        Ok(self)
    }

    /// Builder form of [`Natives::set_read_only`].
    pub fn with_read_only(
        mut self,
        name: &str,
        descriptor: &str,
        params: &[u16],
    ) -> Result<Natives, MarkError> {
        self.set_read_only(name, descriptor, params)?;
        Ok(self)
    }

    /// Whether parameter `param` of the native bound as `name` with
    /// `descriptor` is marked as only read ([`Natives::set_read_only`]),
    /// and no inline form the table gives it writes that parameter
    /// ([`InlineForm::CopyOut`] writes its array, parameter 0, from
    /// generated code that no accessor checks: a mark cannot say
    /// otherwise, whenever it was made; review26).
    pub fn reads_only(&self, name: &str, descriptor: &str, param: u16) -> bool {
        let key = (name.to_owned(), descriptor.to_owned());
        let writes_inline =
            param == 0 && matches!(self.inline.get(&key), Some(InlineForm::CopyOut));
        !writes_inline
            && self
                .read_only
                .get(&key)
                .is_some_and(|m| m.binary_search(&param).is_ok())
    }

    /// Builder form of [`Natives::register`].
    pub fn with<F>(mut self, name: &str, descriptor: &str, f: F) -> Natives
    where
        F: Fn(&mut Context<'_>, &[i32]) -> Result<i32, NativeError> + Send + Sync + 'static,
    {
        self.register(name, descriptor, f);
        self
    }

    /// The binding for `name` and `descriptor`, if any.
    pub fn get(&self, name: &str, descriptor: &str) -> Option<&NativeFn> {
        self.map.get(&(name.to_owned(), descriptor.to_owned()))
    }

    /// Gives the native bound as `name` with `descriptor` the fast form `F`
    /// (see [`FastNative`]), which the JIT calls in place of the closure;
    /// the closure stays bound, for the interpreter and for every call `F`
    /// declines. Re-binding the native ([`Natives::register`]) drops its
    /// fast form. All fast forms of one table are for one host type.
    pub fn set_fast<F: FastNative>(
        &mut self,
        name: &str,
        descriptor: &str,
    ) -> Result<&mut Natives, FastError> {
        let key = (name.to_owned(), descriptor.to_owned());
        if !self.map.contains_key(&key) {
            return Err(FastError::Unbound {
                name: key.0,
                descriptor: key.1,
            });
        }
        let host = self.claim_host::<F::Host>()?;
        let entry = crate::jit::fast_entry::<F>();
        let words = crate::jit::words_entry::<F>();
        self.inline.remove(&key);
        self.fast.insert(key, FastEntry { entry, host, words });
        Ok(self)
    }

    /// Names `W` the table's lender of [`HostWords`]: a program of this
    /// table finds the words its inline forms use at an invocation's
    /// entry through `W::words`, whichever of its natives comes first
    /// (without it, through the first inline native's own fast form). A
    /// host that invokes with its host value typed names the same `W`
    /// ([`crate::Applet::run_prepared_lent`]), and the invocation then
    /// calls `W::words` directly instead of checking the value's type and
    /// calling through a pointer: the one compare is that the program's
    /// lender is `W`. `W::Host` must be the host type of the table's fast
    /// forms ([`FastError::HostType`] otherwise), and its words are the
    /// ones every fast form lends ([`FastNative::words`], the host's to
    /// keep the same; all are `HostWords` of the live host value, so a
    /// difference can confuse a budget's count, never memory).
    pub fn set_words<W: FastNative>(&mut self) -> Result<&mut Natives, FastError> {
        self.claim_host::<W::Host>()?;
        self.words = Some(crate::jit::words_entry::<W>());
        Ok(self)
    }

    /// Makes `H` the host type of the table's fast forms if it has none
    /// yet: its `TypeId`, or [`FastError::HostType`] if the table's fast
    /// forms already take another (one table, one host type).
    fn claim_host<H: 'static>(&mut self) -> Result<core::any::TypeId, FastError> {
        let host = core::any::TypeId::of::<H>();
        let host_name = core::any::type_name::<H>();
        match self.fast_host {
            Some((t, _)) if t == host => {}
            Some((_, table)) => {
                return Err(FastError::HostType {
                    table,
                    given: host_name,
                });
            }
            None => self.fast_host = Some((host, host_name)),
        }
        Ok(host)
    }

    /// The table's lender of words ([`Natives::set_words`]), if named.
    pub(crate) fn words(&self) -> Option<crate::jit::WordsFn> {
        self.words
    }

    /// Gives the native bound as `name` with `descriptor`, which has a fast
    /// form ([`Natives::set_fast`]), the inline form `form`: the JIT emits
    /// it in place of the call, over the [`HostWords`] the fast form's host
    /// lends ([`FastNative::words`]), and calls the native out of line (the
    /// fast form, then the ordinary one) only where the form says so. The
    /// host makes sure the ordinary native gives the same value and
    /// charge where the inline form completes; the interpreter always calls
    /// the closure. Re-binding the native, or giving it another fast form,
    /// drops its inline form.
    pub fn set_inline(
        &mut self,
        name: &str,
        descriptor: &str,
        form: InlineForm,
    ) -> Result<&mut Natives, FastError> {
        let key = (name.to_owned(), descriptor.to_owned());
        if !self.fast.contains_key(&key) {
            return Err(FastError::NoFastForm {
                name: key.0,
                descriptor: key.1,
            });
        }
        let fits = match form {
            InlineForm::Int(k) => descriptor == "()I" && usize::from(k) < 2,
            InlineForm::PushBytes => descriptor == "([BII)V",
            // The form reads the array's first element, 4 bytes: with at
            // least 4 elements they lie inside any array of that length,
            // even one of another kind (which the verifier refuses).
            InlineForm::PushEntry(n) => descriptor == "([III)V" && n >= 4,
            InlineForm::PopU32 => descriptor == "()I",
            InlineForm::CopyOut | InlineForm::CopyIn => descriptor == "([BIII)V",
            // Only a tail form: the form records the message for the host
            // to send after the invocation, which is right only where the
            // verifier proved the call the method's last act (one per
            // invocation, the array not written after it).
            InlineForm::TailPush => descriptor == "([BIII)V" && name.ends_with(TAIL_SUFFIX),
        };
        if !fits {
            return Err(FastError::InlineShape {
                name: key.0,
                descriptor: key.1,
                form,
            });
        }
        self.inline.insert(key, form);
        Ok(self)
    }

    /// Builder form of [`Natives::set_fast`].
    pub fn with_fast<F: FastNative>(
        mut self,
        name: &str,
        descriptor: &str,
    ) -> Result<Natives, FastError> {
        self.set_fast::<F>(name, descriptor)?;
        Ok(self)
    }

    /// The fast form of `name` with `descriptor`, if it has one.
    pub(crate) fn fast(&self, name: &str, descriptor: &str) -> Option<FastEntry> {
        self.fast
            .get(&(name.to_owned(), descriptor.to_owned()))
            .copied()
    }

    /// The inline form of `name` with `descriptor`, if it has one.
    pub(crate) fn inline(&self, name: &str, descriptor: &str) -> Option<InlineForm> {
        self.inline
            .get(&(name.to_owned(), descriptor.to_owned()))
            .copied()
    }
}

/// What a native method sees of the applet while it runs: its arrays, and
/// the host value the invocation was given ([`crate::Applet::call`]).
pub struct Context<'a> {
    pub(crate) heap: &'a mut Heap,
    pub(crate) host: Option<&'a mut dyn Any>,
}

impl<'a> Context<'a> {
    /// The host value of this invocation, if it is a `T`: the state a
    /// native acts on for its host (U-Net/SLE: the endpoint), passed per
    /// invocation so that one bound table serves every applet instance.
    pub fn host<T: Any>(&mut self) -> Result<&mut T, NativeError> {
        self.host
            .as_deref_mut()
            .and_then(|h| h.downcast_mut::<T>())
            .ok_or_else(|| NativeError(host_missing::<T>()))
    }

    /// The host value and the applet's arrays at once, for natives that
    /// move data between the two.
    pub fn split<T: Any>(&mut self) -> Result<(&mut T, Arrays<'_>), NativeError> {
        let host = self
            .host
            .as_deref_mut()
            .and_then(|h| h.downcast_mut::<T>())
            .ok_or_else(|| NativeError(host_missing::<T>()))?;
        Ok((host, Arrays { heap: self.heap }))
    }

    fn arrays(&mut self) -> Arrays<'_> {
        Arrays { heap: self.heap }
    }

    /// The `byte[]` (or `boolean[]`) behind a handle, to change: refused
    /// for the lent array ([`crate::heap::LENT`]), which no native writes.
    /// A native that only reads its array takes [`Context::bytes_read`].
    pub fn bytes(&mut self, handle: i32) -> Result<&mut [i8], NativeError> {
        self.arrays().into_bytes(handle)
    }

    /// The `byte[]` (or `boolean[]`) behind a handle, to read: the heap's
    /// arrays and the lent one ([`crate::Applet::lend`]) alike.
    pub fn bytes_read(&self, handle: i32) -> Result<&[i8], NativeError> {
        read_bytes(self.heap, handle)
    }

    /// The `short[]` behind a handle.
    pub fn shorts(&mut self, handle: i32) -> Result<&mut [i16], NativeError> {
        self.arrays().into_shorts(handle)
    }

    /// The `int[]` behind a handle.
    pub fn ints(&mut self, handle: i32) -> Result<&mut [i32], NativeError> {
        self.arrays().into_ints(handle)
    }

    /// Allocates a zeroed array in the applet's heap, within its budget.
    pub fn new_array(&mut self, elem: Prim, len: i32) -> Result<i32, NativeError> {
        self.arrays().new_array(elem, len)
    }
}

/// [`Arrays::bytes_read`]: the heap's look-up first, so that an array of
/// the heap's costs what [`Arrays::bytes`] does; the lent array on its
/// miss ([`Heap::lent_bytes`], whose `unsafe` the lend's invariant argues:
/// readable for the lent length until the lend ends, empty after; the
/// slice borrows the heap for the native call, inside the lend).
#[inline]
fn read_bytes(heap: &Heap, handle: i32) -> Result<&[i8], NativeError> {
    match heap.get(handle) {
        Some(Object::Bytes(v) | Object::Booleans(v)) => Ok(v),
        Some(_) => Err(NativeError("expected a byte array".into())),
        None if handle == crate::heap::LENT => Ok(heap.lent_bytes()),
        None if handle == 0 => Err(NativeError("null array argument".into())),
        None => Err(NativeError(format!("invalid array handle {handle}"))),
    }
}

/// Why a handle has no elements to change: the lent array's are never
/// changed; any other is dangling.
#[cold]
fn not_mutable(handle: i32) -> NativeError {
    if handle == crate::heap::LENT {
        NativeError("the lent byte[] is read-only: this native writes its array".into())
    } else {
        NativeError(format!("invalid array handle {handle}"))
    }
}

#[cold]
fn host_missing<T>() -> String {
    format!(
        "this native needs a host value of type {}, and the invocation has none",
        core::any::type_name::<T>()
    )
}

/// The applet's arrays, as a native reaches them beside the host value
/// ([`Context::split`]). Every access is checked: a null, dangling or
/// wrongly typed handle is an error.
pub struct Arrays<'a> {
    pub(crate) heap: &'a mut Heap,
}

impl<'a> Arrays<'a> {
    #[inline]
    fn into_obj(self, handle: i32) -> Result<ObjectMut<'a>, NativeError> {
        if handle == 0 {
            return Err(NativeError("null array argument".into()));
        }
        self.heap.get_mut(handle).ok_or_else(|| not_mutable(handle))
    }

    /// The `byte[]` (or `boolean[]`) behind a handle, to change: refused
    /// for the lent array ([`crate::heap::LENT`]: the verifier lets no
    /// writing native have it where the host declared it lent; this is
    /// the defence beside that). A native that only reads takes
    /// [`Arrays::bytes_read`].
    pub fn bytes(&mut self, handle: i32) -> Result<&mut [i8], NativeError> {
        Arrays { heap: self.heap }.into_bytes(handle)
    }

    /// The `byte[]` (or `boolean[]`) behind a handle, to read: the heap's
    /// arrays and the lent one ([`crate::Applet::lend`]) alike.
    pub fn bytes_read(&self, handle: i32) -> Result<&[i8], NativeError> {
        read_bytes(self.heap, handle)
    }

    /// [`Arrays::bytes_read`], keeping the borrow of the arrays.
    #[inline]
    pub fn into_bytes_read(self, handle: i32) -> Result<&'a [i8], NativeError> {
        read_bytes(self.heap, handle)
    }

    /// [`Arrays::bytes`], keeping the borrow of the arrays.
    #[inline]
    pub fn into_bytes(self, handle: i32) -> Result<&'a mut [i8], NativeError> {
        match self.into_obj(handle)? {
            ObjectMut::Bytes(v) | ObjectMut::Booleans(v) => Ok(v),
            _ => Err(NativeError("expected a byte array".into())),
        }
    }

    /// The `short[]` behind a handle.
    pub fn shorts(&mut self, handle: i32) -> Result<&mut [i16], NativeError> {
        Arrays { heap: self.heap }.into_shorts(handle)
    }

    /// [`Arrays::shorts`], keeping the borrow of the arrays.
    #[inline]
    pub fn into_shorts(self, handle: i32) -> Result<&'a mut [i16], NativeError> {
        match self.into_obj(handle)? {
            ObjectMut::Shorts(v) => Ok(v),
            _ => Err(NativeError("expected a short array".into())),
        }
    }

    /// The `int[]` behind a handle.
    pub fn ints(&mut self, handle: i32) -> Result<&mut [i32], NativeError> {
        Arrays { heap: self.heap }.into_ints(handle)
    }

    /// [`Arrays::ints`], keeping the borrow of the arrays.
    #[inline]
    pub fn into_ints(self, handle: i32) -> Result<&'a mut [i32], NativeError> {
        match self.into_obj(handle)? {
            ObjectMut::Ints(v) => Ok(v),
            _ => Err(NativeError("expected an int array".into())),
        }
    }

    /// Allocates a zeroed array in the applet's heap, within its budget.
    pub fn new_array(&mut self, elem: Prim, len: i32) -> Result<i32, NativeError> {
        if len < 0 {
            return Err(NativeError(format!("negative array size {len}")));
        }
        self.heap.alloc_array(elem, len).map_err(|e| {
            NativeError(format!(
                "heap limit exceeded: {} more bytes requested, {} of {} in use",
                e.requested, e.in_use, e.limit
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    //! What `Natives::set_inline` accepts and refuses; the inline forms'
    //! behaviour against the ordinary natives is `unet`'s
    //! `tests/fast_natives.rs`.

    use super::*;

    /// A fast form that always declines.
    struct Declines;

    impl FastNative for Declines {
        type Host = u32;
        fn call(_: &mut u32, _: Arrays<'_>, _: &[i32]) -> Option<Result<i32, NativeError>> {
            None
        }
    }

    fn table() -> Natives {
        Natives::new()
            .with("size", "()I", |_, _| Ok(512))
            .with("fill", "(I)I", |_, _| Ok(0))
            .with("plain", "()I", |_, _| Ok(1))
            .with_fast::<Declines>("size", "()I")
            .unwrap()
            .with_fast::<Declines>("fill", "(I)I")
            .unwrap()
    }

    #[test]
    fn an_inline_form_needs_a_fast_form_and_a_fitting_descriptor() {
        let mut t = table();
        t.set_inline("size", "()I", InlineForm::Int(1)).unwrap();
        assert_eq!(t.inline("size", "()I"), Some(InlineForm::Int(1)));
        assert_eq!(
            t.set_inline("plain", "()I", InlineForm::Int(0)).err(),
            Some(FastError::NoFastForm {
                name: "plain".into(),
                descriptor: "()I".into()
            })
        );
        // An argument, and a word `HostWords` lacks.
        for (name, desc, form) in [
            ("fill", "(I)I", InlineForm::Int(0)),
            ("size", "()I", InlineForm::Int(2)),
        ] {
            assert!(
                matches!(
                    t.set_inline(name, desc, form),
                    Err(FastError::InlineShape { .. })
                ),
                "{name}{desc} {form:?}"
            );
        }
        assert_eq!(t.inline("fill", "(I)I"), None);
    }

    /// A read-only mark cannot make a native whose inline form writes its
    /// array (`CopyOut`, from generated code no accessor checks) take a
    /// lent array, whether the mark came before the inline form or after;
    /// `CopyIn` reads it, and its mark stands (review26).
    #[test]
    fn an_inline_copy_out_is_never_read_only() {
        let mut t = table()
            .with("out", "([BIII)V", |_, _| Ok(0))
            .with("in", "([BIII)V", |_, _| Ok(0))
            .with_fast::<Declines>("out", "([BIII)V")
            .unwrap()
            .with_fast::<Declines>("in", "([BIII)V")
            .unwrap();
        t.set_read_only("out", "([BIII)V", &[0]).unwrap();
        t.set_read_only("in", "([BIII)V", &[0]).unwrap();
        assert!(t.reads_only("out", "([BIII)V", 0));
        t.set_inline("out", "([BIII)V", InlineForm::CopyOut)
            .unwrap();
        t.set_inline("in", "([BIII)V", InlineForm::CopyIn).unwrap();
        assert!(!t.reads_only("out", "([BIII)V", 0));
        assert!(t.reads_only("in", "([BIII)V", 0));
        t.set_read_only("out", "([BIII)V", &[0]).unwrap();
        assert!(!t.reads_only("out", "([BIII)V", 0), "marked after the form");
    }

    #[test]
    fn the_inline_push_fits_a_byte_array_and_two_ints_returning_nothing() {
        let mut t = table()
            .with("push", "([BII)V", |_, _| Ok(0))
            .with("pushi", "([III)V", |_, _| Ok(0))
            .with_fast::<Declines>("push", "([BII)V")
            .unwrap()
            .with_fast::<Declines>("pushi", "([III)V")
            .unwrap();
        t.set_inline("push", "([BII)V", InlineForm::PushBytes)
            .unwrap();
        assert_eq!(t.inline("push", "([BII)V"), Some(InlineForm::PushBytes));
        for (name, desc) in [("pushi", "([III)V"), ("size", "()I")] {
            assert!(matches!(
                t.set_inline(name, desc, InlineForm::PushBytes),
                Err(FastError::InlineShape { .. })
            ));
        }
    }

    /// The inline entry push fits an `int[]` and two ints returning
    /// nothing, and only for a list of at least 4 elements (it reads the
    /// first element's 4 bytes).
    #[test]
    fn the_inline_entry_push_fits_an_int_array_of_four_or_more() {
        let mut t = table()
            .with("pushi", "([III)V", |_, _| Ok(0))
            .with("push", "([BII)V", |_, _| Ok(0))
            .with_fast::<Declines>("pushi", "([III)V")
            .unwrap()
            .with_fast::<Declines>("push", "([BII)V")
            .unwrap();
        for (name, desc, n) in [
            ("pushi", "([III)V", 0),
            ("pushi", "([III)V", 3),
            ("push", "([BII)V", 14),
        ] {
            assert!(
                matches!(
                    t.set_inline(name, desc, InlineForm::PushEntry(n)),
                    Err(FastError::InlineShape { .. })
                ),
                "{name}{desc} {n}"
            );
        }
        assert_eq!(t.inline("pushi", "([III)V"), None);
        t.set_inline("pushi", "([III)V", InlineForm::PushEntry(4))
            .unwrap();
        assert_eq!(t.inline("pushi", "([III)V"), Some(InlineForm::PushEntry(4)));
    }

    /// The inline tail push records a message the host sends after the
    /// invocation, so it is for a tail form alone: bound to the same
    /// native under its plain name (callable anywhere, any number of
    /// times) it is refused.
    #[test]
    fn the_inline_tail_push_fits_a_tail_form_alone() {
        let tail = tail_name("push");
        let mut t = table()
            .with("push", "([BIII)V", |_, _| Ok(0))
            .with(&tail, "([BIII)V", |_, _| Ok(0))
            .with_fast::<Declines>("push", "([BIII)V")
            .unwrap()
            .with_fast::<Declines>(&tail, "([BIII)V")
            .unwrap();
        assert!(matches!(
            t.set_inline("push", "([BIII)V", InlineForm::TailPush),
            Err(FastError::InlineShape { .. })
        ));
        assert_eq!(t.inline("push", "([BIII)V"), None);
        t.set_inline(&tail, "([BIII)V", InlineForm::TailPush)
            .unwrap();
        assert_eq!(t.inline(&tail, "([BIII)V"), Some(InlineForm::TailPush));
    }

    /// Ring memory of `depth` slots that lives in a `Vec` of words.
    struct Slots(Box<[core::cell::UnsafeCell<u64>]>, u32);

    // SAFETY: the memory is the boxed slice's, 8-aligned, `depth * 64`
    // bytes, fixed for the value's life; no reference to it is made.
    unsafe impl RingSlots for Slots {
        fn slots(&self) -> *mut u8 {
            self.0.as_ptr() as *mut u8
        }
        fn depth(&self) -> u32 {
            self.1
        }
    }

    // SAFETY: the cells are only reached through raw pointers.
    unsafe impl Sync for Slots {}

    fn slots(depth: u32) -> Arc<dyn RingSlots> {
        let words = (0..depth as usize * RING_SLOT / 8)
            .map(|_| core::cell::UnsafeCell::new(0))
            .collect();
        Arc::new(Slots(words, depth))
    }

    #[test]
    fn ring_words_lend_at_most_the_ring_and_take_back_what_was_filled() {
        // No ring: nothing is lent, whatever the host says.
        let mut none = RingWords::default();
        none.lend(3, 5);
        assert_eq!((none.room(), none.take()), (0, 0));
        // A depth that is not a power of two is refused.
        assert!(RingWords::new(slots(3)).is_none());
        let mut w = RingWords::new(slots(4)).unwrap();
        assert_eq!(w.room(), 0);
        w.lend(6, 9);
        assert_eq!(w.room(), 4, "at most the depth");
        assert_eq!(w.next, w.base + 2 * RING_SLOT, "slot 6 & 3");
        assert_eq!(w.head(), 6);
        // A take with nothing filled changes nothing.
        assert_eq!(w.take(), 0);
        assert_eq!((w.head(), w.room(), w.lent), (6, 4, 4));
        // Two pushes as generated code makes them.
        w.room -= 2;
        assert_eq!(w.take(), 2);
        assert_eq!((w.head(), w.lent), (8, 2), "moved past the two");
        assert_eq!(w.take(), 0, "taken once");
        assert_eq!((w.head(), w.room(), w.lent), (8, 2, 2));
        // A third push after the take: counted from where the take left.
        w.room -= 1;
        assert_eq!(w.take(), 1);
        assert_eq!((w.head(), w.lent), (9, 1));
    }

    #[test]
    fn the_inline_pop_fits_a_native_of_no_arguments_returning_int() {
        let mut t = table();
        t.set_inline("size", "()I", InlineForm::PopU32).unwrap();
        assert_eq!(t.inline("size", "()I"), Some(InlineForm::PopU32));
        assert!(matches!(
            t.set_inline("fill", "(I)I", InlineForm::PopU32),
            Err(FastError::InlineShape { .. })
        ));
        assert!(matches!(
            t.set_inline("plain", "()I", InlineForm::PopU32),
            Err(FastError::NoFastForm { .. })
        ));
    }

    /// Queue memory of `depth` entries that lives in a boxed slice.
    struct Entries(Box<[core::cell::UnsafeCell<u32>]>);

    // SAFETY: the memory is the boxed slice's, 4-aligned, `depth * 4`
    // bytes, fixed for the value's life; no reference to it is made.
    unsafe impl QueueSlots for Entries {
        fn slots(&self) -> *const u32 {
            self.0.as_ptr() as *const u32
        }
        fn depth(&self) -> u32 {
            self.0.len() as u32
        }
    }

    // SAFETY: the cells are only reached through raw pointers.
    unsafe impl Sync for Entries {}

    #[test]
    fn queue_words_lend_at_most_the_queue_and_take_back_what_was_taken() {
        let entries = |n: u32| -> Arc<dyn QueueSlots> {
            Arc::new(Entries((0..n).map(|_| 0.into()).collect()))
        };
        let mut none = QueueWords::default();
        none.lend(3, 5);
        assert_eq!((none.avail(), none.take()), (0, 0));
        assert!(QueueWords::new(entries(3), 4096, 511).is_none());
        let mut w = QueueWords::new(entries(4), u32::MAX, 511).unwrap();
        assert_eq!(w.below, 1 << 31, "an entry must be a non-negative int");
        w.lend(6, 9);
        assert_eq!(w.avail(), 4, "at most the depth");
        assert_eq!(w.next, w.base + 2 * 4, "entry 6 & 3");
        // Two pops as generated code makes them.
        w.avail -= 2;
        assert_eq!(w.take(), 2);
        assert_eq!(w.take(), 0, "taken once");
        assert_eq!((w.avail(), w.tail()), (2, 8));
        // One more: counted as taken until taken back, the rest still lent.
        w.avail -= 1;
        assert_eq!(w.taken(), 1);
        assert_eq!(w.take(), 1);
        assert_eq!((w.taken(), w.avail(), w.tail()), (0, 1, 9));
    }

    #[test]
    fn rebinding_a_native_or_its_fast_form_drops_its_inline_form() {
        let mut t = table();
        t.set_inline("size", "()I", InlineForm::Int(0)).unwrap();
        t.set_fast::<Declines>("size", "()I").unwrap();
        assert_eq!(t.inline("size", "()I"), None);
        t.set_inline("size", "()I", InlineForm::Int(0)).unwrap();
        t.register("size", "()I", |_, _| Ok(4));
        assert_eq!(t.inline("size", "()I"), None);
        assert!(t.fast("size", "()I").is_none());
    }
}
