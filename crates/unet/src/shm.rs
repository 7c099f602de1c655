//! An endpoint's shared memory: one sealed `memfd` mapped shared, and the
//! only module of the crate that dereferences pointers into it.
//!
//! The segment is shared with an application that may be hostile (another
//! process that maps the same `memfd`), so nothing here trusts its
//! contents:
//! - its size cannot change under the engine: the `memfd` is sealed
//!   against shrinking and growing before anyone else sees it, so an access
//!   inside the mapping never faults (a shrunk file would raise `SIGBUS`);
//! - every read is a copy into private memory (a volatile read of a
//!   descriptor, a `memcpy` of payload bytes), made once: the engine checks
//!   the copy, never the shared bytes, so a value that changes after the
//!   check changes nothing (no time-of-check to time-of-use gap);
//! - the types read from it ([`TxDesc`], [`RxDesc`], `u32`) are plain data
//!   for which every bit pattern is a valid value;
//! - the indices of the queues are atomics, which is the one thing both
//!   sides agree on; payload bytes that the application changes while the
//!   engine copies them arrive torn, which only the application can see.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Arc;

use crate::error::ConfigError;
use crate::layout::{Header, INLINE_MAX, Layout, QueueLayout, RX_BUFFERS_MAX, RxDesc, TxDesc};
use crate::ring::{QueueMem, SealedMem, seal_slot, write_sealed};
use crate::sync::{AtomicU8, AtomicU32};

/// The value of a receive descriptor's `sealed` byte once the engine has
/// written the whole slot: the ring's [`crate::ring::SEALED`]. The seal
/// protocol is the ring's ([`crate::ring::write_sealed`],
/// [`crate::ring::Consumer::take_sealed`]); the
/// [`RxQueue`] gives it the slots' `sealed` bytes
/// ([`crate::ring::SealedMem`]). A slot never written, or taken, holds 0.
/// The JIT's inline push writes it with its last store, the slot's header
/// word (`jive::InlineForm::PushBytes`).
pub const RX_SEALED: u8 = crate::ring::SEALED;

/// A mapped endpoint segment.
#[derive(Debug)]
pub struct Segment {
    fd: OwnedFd,
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is shared memory addressed only through the methods
// below, which access it with atomics, volatile reads and writes or
// byte copies, all of which are sound from any thread (see the module doc:
// concurrent writers change values, never validity).
unsafe impl Send for Segment {}
// SAFETY: as for `Send`: no method hands out a reference to the mapping
// except the atomic indices, which are `Sync`.
unsafe impl Sync for Segment {}

fn os_err(what: &str) -> std::io::Error {
    let e = std::io::Error::last_os_error();
    std::io::Error::new(e.kind(), format!("{what}: {e}"))
}

impl Segment {
    /// Creates a sealed `memfd` of `len` bytes named `name` and maps it.
    pub fn create(name: &str, len: usize) -> std::io::Result<Segment> {
        let cname = std::ffi::CString::new(name)
            .map_err(|_| std::io::Error::other("name has a NUL byte"))?;
        // SAFETY: `cname` is a valid NUL-terminated string; the flags are valid.
        let fd = unsafe {
            libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if fd < 0 {
            return Err(os_err("memfd_create"));
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        File::from(fd.try_clone()?).set_len(len as u64)?;
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: fcntl on a valid fd with an int argument.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
            return Err(os_err("fcntl(F_ADD_SEALS)"));
        }
        Segment::map_fd(fd, len)
    }

    /// Maps a segment received from an engine (`SCM_RIGHTS`), checking
    /// that it is sealed against resizing, so that it can never shrink
    /// under the mapping, and that it holds at least a header (so that
    /// [`Segment::read_header`], which asserts that, cannot panic on it).
    pub fn map(fd: OwnedFd) -> std::io::Result<Segment> {
        if !Segment::is_sealed(&fd) {
            return Err(std::io::Error::other(
                "endpoint memfd is not sealed against resizing",
            ));
        }
        let len = File::from(fd.try_clone()?).metadata()?.len();
        let len = usize::try_from(len).map_err(|_| std::io::Error::other("segment too large"))?;
        if len < size_of::<Header>() {
            return Err(std::io::Error::other(format!(
                "endpoint memfd of {len} bytes is shorter than its header ({} bytes)",
                size_of::<Header>()
            )));
        }
        Segment::map_fd(fd, len)
    }

    /// Whether `fd` is a `memfd` sealed against shrinking and growing (the
    /// condition [`Segment::map`] checks), for a caller that reports it
    /// with its own error.
    pub fn is_sealed(fd: &OwnedFd) -> bool {
        // SAFETY: fcntl F_GET_SEALS on a valid fd takes no argument.
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        let need = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
        seals >= 0 && seals & need == need
    }

    fn map_fd(fd: OwnedFd, len: usize) -> std::io::Result<Segment> {
        if len == 0 {
            return Err(std::io::Error::other("empty segment"));
        }
        // SAFETY: a fresh shared mapping of `len` bytes of a valid fd whose
        // size is at least `len` (set and sealed by `create`, or read by
        // `map`); the kernel chooses the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap"));
        }
        let base = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(Segment { fd, base, len })
    }

    /// The `memfd`, to hand to an application process.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The mapping's first byte (page aligned; `len` bytes follow), for a
    /// user that lays its own structure over the segment. Dereferencing it
    /// is the caller's `unsafe`, under the rules of the module doc; the
    /// pointer is valid as long as the segment.
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.base
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the segment is empty (never, once mapped).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes the header page.
    pub fn write_header(&self, h: &Header) {
        assert!(size_of::<Header>() <= self.len);
        // SAFETY: the header lies within the mapping (asserted) at offset 0,
        // which is page aligned; a volatile write of plain data.
        unsafe { self.base.cast::<Header>().as_ptr().write_volatile(*h) }
    }

    /// A private copy of the header page.
    pub fn read_header(&self) -> Header {
        assert!(size_of::<Header>() <= self.len);
        // SAFETY: as for `write_header`; `Header` is valid for any bits.
        unsafe { self.base.cast::<Header>().as_ptr().read_volatile() }
    }

    /// Copies `dst.len()` bytes at `off` out of the segment.
    #[inline]
    pub fn read_bytes(&self, off: usize, dst: &mut [u8]) {
        assert!(
            off <= self.len && dst.len() <= self.len - off,
            "segment read out of range"
        );
        // SAFETY: the range lies within the mapping (asserted) and cannot
        // overlap `dst`, which is private memory; bytes are valid for any
        // value.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        }
    }

    /// Copies `src` into the segment at `off`. `src` may be a view of
    /// this segment itself ([`Segment::with_bytes`]), overlapping the
    /// range written: an endpoint that sends to itself, whose free queue
    /// names a buffer inside its own transmit region (a hostile
    /// application can arrange it), has the engine copy a message from
    /// the area into the area. So the copy is a `memmove`, defined for
    /// overlapping ranges (the bytes then are garbage to that application
    /// alone, never undefined behaviour in the engine). Disjoint ranges of
    /// [`COPY_OWN_MIN`] bytes and more are copied as [`copy_message`]
    /// copies, its lines asked for first and each byte written once: the
    /// range written is most often a receive buffer, which another core
    /// reads next.
    #[inline]
    pub fn write_bytes(&self, off: usize, src: &[u8]) {
        assert!(
            off <= self.len && src.len() <= self.len - off,
            "segment write out of range"
        );
        let n = src.len();
        // SAFETY: `off` lies within the mapping (asserted).
        let dst = unsafe { self.base.as_ptr().add(off) };
        #[cfg(target_arch = "x86_64")]
        {
            let (d, s) = (dst as usize, src.as_ptr() as usize);
            if n >= COPY_OWN_MIN && (s + n <= d || d + n <= s) {
                // SAFETY: the `n` bytes at `dst` lie within the mapping
                // (asserted), which lives as long as `self`; `src` is a
                // slice of `n` bytes; the two ranges do not overlap
                // (tested).
                unsafe { copy_own(dst, src.as_ptr(), n) };
                return;
            }
        }
        // SAFETY: as above; `ptr::copy` allows `src` to overlap the range
        // written; bytes are valid for any value.
        unsafe { std::ptr::copy(src.as_ptr(), dst, n) }
    }

    /// Runs `f` on a view of `len` bytes at `off`, for a data-moving loop
    /// (ilp) that reads them once. The bytes may change while `f` runs if
    /// the application writes them; `f` must treat them as untrusted input
    /// read once (a copy, a checksum), never as a value it checks and then
    /// relies on.
    #[inline]
    pub fn with_bytes<R>(&self, off: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        // The panic out of line: with `assert!`, the compiler set up its
        // arguments before the test, on the passing path too (5
        // instructions of every message read from a buffer).
        if off > self.len || len > self.len - off {
            view_out_of_range();
        }
        // SAFETY: the range lies within the mapping, which lives as long as
        // `self`. Another process may write it concurrently: the view is
        // only copied from by `f` (see above), and any byte value is valid.
        f(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) })
    }

    /// A view of `len` bytes at `off`, `None` past the mapping: as
    /// [`Segment::with_bytes`]'s, for a caller that holds it only while it
    /// holds the endpoint's state locks (the engine's send of a message a
    /// lent `doTx` deferred, read once from the area to where it goes), with
    /// the same caveat: the bytes may change while it is held, and are only
    /// copied from (or lent to another endpoint's applet, which only reads
    /// them as plain bytes).
    #[inline]
    pub fn view(&self, off: usize, len: usize) -> Option<&[u8]> {
        if off > self.len || len > self.len - off {
            return None;
        }
        // SAFETY: the range lies within the mapping, which lives as long as
        // `self`, the view's lifetime. Another process may write it
        // concurrently: the view is only copied from (see above), and any
        // byte value is valid.
        Some(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) })
    }

    /// Runs `f` on a writable view of `len` bytes at `off` (the engine's
    /// copy into receive buffers). The same caveat as [`Segment::with_bytes`]:
    /// `f` only writes, and reads back nothing it relies on.
    #[inline]
    pub fn with_bytes_mut<R>(&self, off: usize, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        assert!(
            off <= self.len && len <= self.len - off,
            "segment view out of range"
        );
        // SAFETY: as for `with_bytes`; the engine hands out one writable view
        // at a time per endpoint (its state lock is held).
        f(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(off), len) })
    }

    /// Asks the CPU to bring the cache line holding byte `off` into this
    /// core's cache, for reading soon (`write` false) or for writing soon
    /// (`write` true: the line is taken exclusive, so that a store to it
    /// does not wait for the other cores' copies to go). A hint only:
    /// nothing is read or written, no value reaches the caller, and an
    /// offset outside the segment is ignored. A receiver that sees a
    /// message published asks for the buffer it expects the message in
    /// while the descriptor that names the buffer is still on its way; the
    /// engine asks for the next free buffer's line once it has filled one,
    /// so that the next message's store does not hold back, behind its
    /// miss, the stores that publish it.
    #[inline(always)]
    pub fn prefetch(&self, off: usize, write: bool) {
        if off >= self.len {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `off` lies within the mapping (checked above), so the one
        // line asked for holds bytes of it ([`fetch_lines`]' contract).
        unsafe {
            let p = self.base.as_ptr().add(off);
            if write {
                fetch_lines_to_write(p, 1);
            } else {
                fetch_lines(p, 1);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = write;
    }

    /// [`Segment::prefetch`] for reading of `lines` whole lines from
    /// `off`, for a caller that counted them once (a receiver, when it
    /// took the last message): nothing is asked for unless every one of
    /// them lies inside the segment (a buffer's lines always do; a stale
    /// guess at a buffer, which may not, is then only not fetched): two
    /// comparisons, no clipping. Every line is asked for (asking for one
    /// in two lost the 1 KiB round trip's gain: `loop_rtt`, six runs each,
    /// 0.328-0.342 µs against 0.268-0.280).
    #[inline(always)]
    pub fn prefetch_line_count(&self, off: usize, lines: usize) {
        // `lines - 1 >= len / 64` (wrapping): no line, or more than fit.
        if lines.wrapping_sub(1) >= self.len / 64 || off > self.len - lines * 64 {
            return;
        }
        // SAFETY: every address is `base + off + 64 * i` with `i < lines`,
        // so below `base + off + 64 * lines <= base + self.len` (checked
        // above, without overflow: `lines * 64 <= self.len`): within the
        // mapping, which `lines > 0` lines start in.
        unsafe { fetch_lines(self.base.as_ptr().add(off), lines) }
    }

    /// The count of closed channels in the header page
    /// ([`crate::layout::CLOSED_CHANNELS_AT`]).
    #[inline]
    pub fn closed_channels(&self) -> &AtomicU32 {
        self.atomic(crate::layout::CLOSED_CHANNELS_AT)
    }

    /// The atomic `u32` at `off` (a queue index).
    #[inline]
    fn atomic(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        // SAFETY: aligned, in range, and `AtomicU32` has the layout of a
        // `u32` and is valid for any bits; it lives as long as `&self`.
        unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU32>() }
    }
}

/// [`Segment::with_bytes`]'s panic: a view out of the segment's range is a
/// caller's bug (every caller checks its offsets against the layout first).
#[cold]
#[inline(never)]
#[track_caller]
fn view_out_of_range() -> ! {
    panic!("segment view out of range")
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map_fd`; no reference
        // into it outlives `self` (every accessor borrows `self`).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// One queue of a segment, of `T` items, as [`QueueMem<T>`] for
/// [`crate::ring`]: [`TxQueue`], [`RxQueue`] or [`FreeQueue`]. The item
/// type is the queue's kind, so that what only one kind has is not on the
/// others: a receive queue's seals ([`SealedMem`], hence
/// [`crate::ring::Consumer::take_sealed`]) and its descriptor writers
/// exist only on [`RxQueue`]. A call on another queue does not compile:
///
/// ```compile_fail,E0599
/// # use std::sync::Arc;
/// # use unet::layout::{Config, Layout};
/// # use unet::ring::Consumer;
/// # let layout = Layout::new(Config::default()).unwrap();
/// # let seg = Arc::new(unet::shm::Segment::create("doc", layout.total).unwrap());
/// let (_, _, free) = unet::shm::queues(&seg, &layout)?;
/// Consumer::new(free).take_sealed(); // the free queue has no seals
/// # Ok::<(), unet::ConfigError>(())
/// ```
///
/// Nor is a queue made over another kind's layout: [`ShmQueue::new`] takes
/// a [`QueueLayout<T>`] of its own `T`, so that the slots it lays over the
/// segment are the ones the layout made room for (receive slots of 64
/// bytes over the free queue's 4-byte entries would run over what follows
/// it):
///
/// ```compile_fail,E0308
/// # use std::sync::Arc;
/// # use unet::layout::{Config, Layout};
/// # let layout = Layout::new(Config::default()).unwrap();
/// # let seg = Arc::new(unet::shm::Segment::create("doc", layout.total).unwrap());
/// let rx = unet::shm::RxQueue::new(seg, layout.free); // a free queue's layout
/// ```
#[derive(Debug)]
pub struct ShmQueue<T> {
    seg: Arc<Segment>,
    q: QueueLayout<T>,
    /// The producer and consumer indices, checked once in `new`.
    head: NonNull<AtomicU32>,
    tail: NonNull<AtomicU32>,
    /// Slot 0, in the mapping (checked once in `new`): a slot's address is
    /// this and the index, not the mapping's base loaded through `seg`
    /// and the layout's offset added each time (3 instructions of every
    /// slot's address; a receiver works out its front slot's twice a
    /// message, `xthr_count` recv and `unet-count`'s paths).
    slots: NonNull<T>,
    _items: core::marker::PhantomData<fn() -> T>,
}

/// An endpoint's transmit queue.
pub type TxQueue = ShmQueue<TxDesc>;
/// An endpoint's receive queue, whose slots carry seals.
pub type RxQueue = ShmQueue<RxDesc>;
/// An endpoint's free queue, of buffer offsets.
pub type FreeQueue = ShmQueue<u32>;

impl<T> Clone for ShmQueue<T> {
    fn clone(&self) -> Self {
        ShmQueue {
            seg: self.seg.clone(),
            q: self.q,
            head: self.head,
            tail: self.tail,
            slots: self.slots,
            _items: core::marker::PhantomData,
        }
    }
}

// SAFETY: the pointers point into `seg`'s mapping, which the queue keeps
// alive; the indices' are only turned into shared references to atomics,
// and `slots` is only the base of the slots' addresses, whose accesses
// (volatile, or to atomics) are the queue's protocol's, as with the
// mapping's base it stands for. `T` is only a marker (no `T` is owned).
unsafe impl<T> Send for ShmQueue<T> {}
// SAFETY: as for `Send`.
unsafe impl<T> Sync for ShmQueue<T> {}

impl<T> ShmQueue<T> {
    /// The queue `q` of `seg`, of slots of `size_of::<T>()` bytes, whose
    /// bounds are checked against the segment.
    ///
    /// # Errors
    ///
    /// A depth that is not a power of two is a [`ConfigError::Size`]; an
    /// offset that does not start a cache line, or slots that end past the
    /// segment, a [`ConfigError::Layout`]. A [`Layout`]'s queues, with a
    /// segment of its `total` bytes, are neither.
    pub fn new(seg: Arc<Segment>, q: QueueLayout<T>) -> Result<ShmQueue<T>, ConfigError> {
        if !q.depth.is_power_of_two() {
            return Err(ConfigError::Size {
                what: "queue depth",
                value: u64::from(q.depth),
                rule: "a power of two".into(),
            });
        }
        // A cache line: the indices are atomics, and the slots, 128 bytes
        // further, are then aligned for every item type (`RxDesc`'s 64).
        if !q.offset.is_multiple_of(64) {
            return Err(ConfigError::Layout(format!(
                "a queue at offset {} does not start a cache line",
                q.offset
            )));
        }
        let slot = size_of::<T>();
        let end = (q.depth as usize)
            .checked_mul(slot)
            .and_then(|n| q.offset.checked_add(128)?.checked_add(n));
        if end.is_none_or(|end| end > seg.len) {
            return Err(ConfigError::Layout(format!(
                "a queue of {} slots of {slot} bytes at offset {} ends past the segment's {} bytes",
                q.depth, q.offset, seg.len
            )));
        }
        let head = NonNull::from(seg.atomic(q.head()));
        let tail = NonNull::from(seg.atomic(q.tail()));
        // SAFETY: the slots lie in the segment (`end <= seg.len`, checked
        // above), so their start is inside the mapping.
        let slots = unsafe { seg.base.add(q.slots()) }.cast::<T>();
        Ok(ShmQueue {
            seg,
            q,
            head,
            tail,
            slots,
            _items: core::marker::PhantomData,
        })
    }

    #[inline]
    fn slot_ptr(&self, i: u32) -> *mut T {
        debug_assert!(i < self.q.depth);
        // SAFETY: the pointer arithmetic stays in the mapping: `i < depth`
        // (callers mask the index) and `new` checked that every slot of
        // `size_of::<T>()` bytes lies in the segment, from `slots` on.
        unsafe { self.slots.as_ptr().add(i as usize) }
    }
}

#[cfg(test)]
std::thread_local! {
    /// The receive slot [`ShmQueue::ask_for_next_slot`] last asked for on
    /// this thread (the engine's tests of a sender's hint).
    pub(crate) static RX_SLOT_ASKED: std::cell::Cell<Option<u32>> =
        const { std::cell::Cell::new(None) };
}

impl ShmQueue<RxDesc> {
    /// The receive descriptor slot of item `i` (masked to the depth): in
    /// range, as `new` checked every slot.
    #[inline(always)]
    fn rx_slot(&self, i: u32) -> *mut RxDesc {
        self.slot_ptr(i & (self.q.depth - 1))
    }

    /// Asks the CPU, for writing (`prefetchw`), for the line of the slot
    /// the next push goes to, as the published producer index names it
    /// (read `Relaxed`: a guess, which no write depends on), for a sender
    /// that has work to do before it pushes (`Engine::send_direct`): the
    /// receiver polls that slot's seal, and the store that seals it then
    /// need not wait for the line to be taken from the receiver's core.
    /// Only a hint: whatever the index holds (the application can write
    /// it), the slot asked for is one of this queue's, inside the mapping
    /// (`rx_slot`), and nothing is written.
    #[inline(always)]
    pub fn ask_for_next_slot(&self) {
        #[cfg(not(loom))]
        {
            let n = self.head().load(crate::sync::Ordering::Relaxed);
            #[cfg(test)]
            RX_SLOT_ASKED.with(|f| f.set(Some(n & (self.q.depth - 1))));
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the slot is inside the mapping (`rx_slot`), on one
            // line (slots are a line each, line-aligned); a prefetch
            // neither reads nor writes memory architecturally and never
            // faults.
            unsafe {
                fetch_lines_to_write(self.rx_slot(n).cast::<u8>(), 1)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = n;
        }
    }

    /// Writes an inline receive descriptor for a `len`-byte message on
    /// `chan` as item `n` (wrapping) of this receive queue, in place in its
    /// slot: its fixed part (`len`, `chan`, no buffers), then `fill`
    /// writes the message into the slot's first `len` inline bytes (`len
    /// <= INLINE_MAX`), e.g. straight from the sender's buffer area, then
    /// the slot is sealed ([`crate::ring::seal_slot`]). The slot's inline bytes
    /// past `len` keep what they held (bytes of this endpoint's own earlier
    /// descriptors). The same caveat as [`Segment::with_bytes_mut`]: `fill`
    /// only writes.
    #[inline(always)]
    pub fn write_rx_inline(&self, n: u32, chan: u16, len: usize, fill: impl FnOnce(&mut [u8])) {
        assert!(len <= INLINE_MAX, "inline message too long");
        let slot = self.slot(n);
        let (p, s) = (slot.0, self.seal_of(slot));
        // SAFETY: `p` is an aligned receive descriptor slot inside the
        // mapping (`rx_slot`), whose fields are plain data valid for any
        // bits; the stores are volatile, like `write_once`'s, and the view
        // covers `len <= INLINE_MAX` bytes of its `data` field, which lives
        // as long as `self.seg`. The consumer reads the slot only once it
        // is sealed, after this view is gone (or the producer index,
        // published later still, says so).
        unsafe {
            (&raw mut (*p).len).write_volatile(len as u32);
            (&raw mut (*p).chan).write_volatile(chan);
            (&raw mut (*p).nbufs).write_volatile(0);
            fill(std::slice::from_raw_parts_mut(
                (&raw mut (*p).data).cast::<u8>(),
                len,
            ));
        }
        // The ring's seal after the writes, not `write_sealed` around them:
        // as a closure the writes were left a call (`unet-count` path-40
        // +24).
        seal_slot(self, s);
    }

    /// The fixed part of the receive descriptor in `slot`: its length,
    /// channel and number of buffers, each read once (volatile) into
    /// private memory, for the caller to check. For the consumer, in
    /// [`crate::ring::Consumer::take_sealed_with`].
    #[inline(always)]
    pub fn rx_fixed(&self, slot: RxSlot<'_>) -> (u32, u16, u8) {
        let p = slot.0;
        // SAFETY: `p` is `rx_slot`'s pointer (an `RxSlot` is made only
        // there), an aligned receive slot in the mapping of the queue the
        // slot borrows, so alive; fields valid for any bits, each read
        // once.
        unsafe {
            (
                (&raw const (*p).len).read_volatile(),
                (&raw const (*p).chan).read_volatile(),
                (&raw const (*p).nbufs).read_volatile(),
            )
        }
    }

    /// The first buffer offset of the receive descriptor in `slot`, read
    /// once (volatile) into private memory ([`ShmQueue::read_rx_first_offset`]
    /// for slot `i`), for a consumer that holds the slot from
    /// [`crate::ring::Consumer::take_sealed_with`] (its address not worked
    /// out again).
    #[inline(always)]
    pub fn rx_first_offset(&self, slot: RxSlot<'_>) -> u32 {
        let p = slot.0;
        // SAFETY: as for `rx_fixed`; the first 4 bytes of the slot's `data`
        // field, at byte 8 of a 64-byte aligned slot (so aligned for a
        // `u32`), valid for any bits. One load, not four bytes'.
        u32::from_le(unsafe { (&raw const (*p).data).cast::<u32>().read_volatile() })
    }

    /// Writes a receive descriptor naming `offsets` (at most
    /// `RX_BUFFERS_MAX`) for a `len`-byte message on `chan` as item `n`
    /// (wrapping) of this receive queue, in place in its slot: its fixed
    /// part and the offsets, each little-endian, then the seal
    /// ([`crate::ring::seal_slot`]); the slot's bytes past the offsets keep what
    /// they held.
    #[inline]
    pub fn write_rx_buffers(&self, n: u32, chan: u16, len: u32, offsets: &[u32]) {
        assert!(offsets.len() <= RX_BUFFERS_MAX, "too many buffers");
        let slot = self.slot(n);
        let (p, s) = (slot.0, self.seal_of(slot));
        // SAFETY: as for `write_rx_inline`; the offsets take `4 *
        // offsets.len() <= INLINE_MAX` bytes of the slot's `data` field.
        unsafe {
            (&raw mut (*p).len).write_volatile(len);
            (&raw mut (*p).chan).write_volatile(chan);
            (&raw mut (*p).nbufs).write_volatile(offsets.len() as u8);
            let data = (&raw mut (*p).data).cast::<[u8; 4]>();
            for (k, o) in offsets.iter().enumerate() {
                data.add(k).write_volatile(o.to_le_bytes());
            }
        }
        seal_slot(self, s);
    }

    /// [`ShmQueue::write_rx_buffers`] of the one buffer `off`, always
    /// inlined (the engine's delivery of a message in one buffer: as a
    /// call, with the offsets passed through memory, some 10 instructions
    /// more per message).
    #[inline(always)]
    pub fn write_rx_one_buffer(&self, n: u32, chan: u16, len: u32, off: u32) {
        let slot = self.slot(n);
        let (p, s) = (slot.0, self.seal_of(slot));
        // SAFETY: as for `write_rx_inline`; the offset takes the first 4
        // bytes of the slot's `data` field, at byte 8 of a 64-byte aligned
        // slot (so aligned for a `u32`).
        unsafe {
            (&raw mut (*p).len).write_volatile(len);
            (&raw mut (*p).chan).write_volatile(chan);
            (&raw mut (*p).nbufs).write_volatile(1);
            (&raw mut (*p).data)
                .cast::<u32>()
                .write_volatile(off.to_le());
        }
        seal_slot(self, s);
    }

    /// The first buffer offset of the receive descriptor in slot `i`, read
    /// once (volatile) into private memory: all a one-buffer message's
    /// descriptor holds past its fixed part, so that the receiver does not
    /// copy the whole 64-byte slot for it.
    #[inline]
    pub fn read_rx_first_offset(&self, i: u32) -> u32 {
        self.rx_first_offset(self.slot(i))
    }

    /// Runs `f` on a view of the first `len` inline bytes (`len <=
    /// INLINE_MAX`) of the receive descriptor in slot `i`, in place. The
    /// same caveat as [`Segment::with_bytes`]: the bytes are read once,
    /// never checked and then relied on.
    #[inline]
    pub fn with_rx_inline<R>(&self, i: u32, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        assert!(len <= INLINE_MAX, "inline message too long");
        let p = self.rx_slot(i);
        // SAFETY: the view covers `len <= INLINE_MAX` bytes of the slot's
        // `data` field, inside the mapping (`rx_slot`), which lives as long
        // as `self.seg`; any byte value is valid.
        f(unsafe { std::slice::from_raw_parts((&raw const (*p).data).cast::<u8>(), len) })
    }
}

/// A receive descriptor slot of an [`RxQueue`], for the ring's seal
/// protocol ([`SealedMem::slot`]): its address, checked to be a receive
/// slot inside the mapping when it was made, and a borrow of the queue,
/// which holds the mapping.
#[derive(Clone, Copy, Debug)]
pub struct RxSlot<'a>(*mut RxDesc, core::marker::PhantomData<&'a RxQueue>);

// A receive queue's seals, for the ring's seal protocol: the `sealed` byte
// of each slot (in the mapping: `rx_slot`). Only a receive queue has them.
impl SealedMem for RxQueue {
    type Slot<'a> = RxSlot<'a>;
    #[inline(always)]
    fn slot(&self, n: u32) -> RxSlot<'_> {
        RxSlot(self.rx_slot(n), core::marker::PhantomData)
    }
    #[inline(always)]
    fn seal_of<'a>(&'a self, slot: RxSlot<'a>) -> &'a AtomicU8 {
        // SAFETY: `slot.0` is `rx_slot`'s pointer (an `RxSlot` is made only
        // there): a receive slot inside the mapping of the queue it borrows
        // for `'a`, which holds the mapping; its `sealed` byte is valid for
        // any value. The mapping is only ever reached through raw
        // pointers, volatile accesses and atomics.
        unsafe { AtomicU8::from_ptr(&raw mut (*slot.0).sealed) }
    }
}

/// The slots of a receive queue, which the JIT's inline `dmaRxdPayload`
/// writes ([`jive::RingSlots`], lent per invocation through
/// [`jive::RingWords`]): kept alive by the queue's handle on the segment.
#[derive(Debug)]
pub struct RxSlots(RxQueue);

impl RxQueue {
    /// This receive queue's slots (of [`jive::RING_SLOT`] bytes) for the
    /// JIT's inline push.
    pub fn rx_slots(&self) -> RxSlots {
        RxSlots(self.clone())
    }
}

// The inline push writes a receive descriptor: the inline bytes, then the
// header word `len | chan << 32 | jive::RING_HEADER_SEALED` (`nbufs` 0,
// `sealed` set to `jive::RING_SEALED`, which `RX_SEALED` is) with one
// release store, as `ring::seal_slot` seals the engine's.
const _: () = assert!(size_of::<RxDesc>() == jive::RING_SLOT);
const _: () = assert!(core::mem::offset_of!(RxDesc, len) == 0);
const _: () = assert!(core::mem::offset_of!(RxDesc, chan) == 4);
const _: () = assert!(core::mem::offset_of!(RxDesc, nbufs) == 6);
const _: () = assert!(core::mem::offset_of!(RxDesc, sealed) == jive::RING_SEAL_BYTE);
const _: () = assert!(core::mem::offset_of!(RxDesc, data) == 8);
const _: () = assert!(INLINE_MAX == jive::RING_BYTES);
const _: () = assert!(RX_SEALED == jive::RING_SEALED);

// SAFETY: `slots` is slot 0 of a receive queue, inside the mapping
// (`ShmQueue::new` checked that all `depth` slots of `RING_SLOT` bytes lie
// in the segment), 64-byte aligned (slots start 128 bytes past a 64-byte
// aligned queue offset), the same address every time, and valid as long
// as `self`, whose `ShmQueue` holds the segment. `depth` is the queue's
// power of two, fixed. The mapping is only ever reached through raw
// pointers, volatile accesses and atomics (this module), never through a
// Rust reference that generated code's writes could alias.
unsafe impl jive::RingSlots for RxSlots {
    fn slots(&self) -> *mut u8 {
        self.0.slot_ptr(0).cast::<u8>()
    }
    fn depth(&self) -> u32 {
        self.0.q.depth
    }
}

/// An endpoint's buffer area, which the JIT's inline `doHtoLDMA` and
/// `doLtoHDMA` copy from and to ([`jive::AreaBytes`], lent for the
/// endpoint's life through [`jive::AreaWords`]), and where the engine reads
/// a message a lent `doTx` deferred ([`AreaBytes::view`]): kept alive by
/// its handle on the segment.
#[derive(Debug, Clone)]
pub struct AreaBytes {
    /// The segment, whose mapping this holds for as long as it lives (read
    /// through `start` alone).
    _seg: Arc<Segment>,
    /// The area's first byte, in the mapping.
    start: NonNull<u8>,
    /// The area's bytes from `start`, all in the mapping.
    len: u32,
}

// SAFETY: `start` is an address of the mapping, which the `Arc` in the same
// value keeps; the segment itself is `Send` and `Sync` (see `Segment`),
// and every access through `start` is one that `Segment` makes too
// (`AreaBytes::view`, `jive::AreaBytes::bytes`).
unsafe impl Send for AreaBytes {}
// SAFETY: as for `Send`.
unsafe impl Sync for AreaBytes {}

impl AreaBytes {
    /// A view of the `len` bytes at `off` in the area, `None` past its
    /// end: as [`Segment::view`]'s of the same bytes, with the same
    /// caveat (the bytes may change while it is held, and are only copied
    /// from or lent to another endpoint's applet, which reads them as
    /// plain bytes), for a caller that holds the endpoint's state locks.
    ///
    /// One comparison, with the area's end: the area lies in the mapping
    /// (checked once, by [`Segment::area_bytes`], and neither moves), so
    /// whatever lies in the area lies in the mapping. Testing the range
    /// against the area ([`crate::layout::Layout::in_area`]) and then the
    /// mapping ([`Segment::view`]) was two range tests a message that
    /// accept exactly what this one accepts (with the area's address
    /// found through the segment: 15 instructions in the inbox's way of a
    /// lent `doTx`'s message, `Engine::enqueue_deferred`, 7 now).
    #[inline(always)]
    pub fn view(&self, off: u32, len: u32) -> Option<&[u8]> {
        if u64::from(off) + u64::from(len) > u64::from(self.len) {
            return None;
        }
        // SAFETY: `[off, off + len)` lies in the area (just checked), which
        // lies in the mapping from `start` (`Segment::area_bytes`'s check);
        // the mapping lives as long as `self`'s `Arc` on the segment, so as
        // the view. Another process may write it concurrently: the view is
        // only copied from (see above), and any byte value is valid.
        Some(unsafe {
            NonNull::slice_from_raw_parts(self.start.add(off as usize), len as usize).as_ref()
        })
    }
}

impl Segment {
    /// The `len` bytes at `off` as a buffer area for the JIT's inline
    /// copies; `None` if they do not lie in the mapping.
    pub fn area_bytes(self: &Arc<Segment>, off: usize, len: u32) -> Option<AreaBytes> {
        let end = off.checked_add(len as usize)?;
        (end <= self.len).then(|| AreaBytes {
            _seg: self.clone(),
            // SAFETY: `off <= end <= self.len`: in the mapping, or one past
            // its end (then `len` is 0).
            start: unsafe { self.base.add(off) },
            len,
        })
    }
}

// SAFETY: `bytes` is `start`, in the mapping, and the `len` bytes from it
// lie within it (checked by `Segment::area_bytes`); the address and the length
// are fixed, and valid as long as `self`, whose `Arc` holds the segment.
// The mapping is only ever reached through raw pointers, volatile accesses,
// atomics and short-lived views that the engine makes while it holds the
// endpoint's state lock (`with_bytes`), never while an invocation runs;
// generated code only copies bytes in and out of it.
unsafe impl jive::AreaBytes for AreaBytes {
    fn bytes(&self) -> *mut u8 {
        self.start.as_ptr()
    }
    fn size(&self) -> u32 {
        self.len
    }
}

/// The entries of a free queue, which the JIT's inline `getFreeBuffer`
/// reads ([`jive::QueueSlots`], lent per invocation through
/// [`jive::QueueWords`]): kept alive by the queue's handle on the segment.
#[derive(Debug)]
pub struct FreeSlots(FreeQueue);

impl FreeQueue {
    /// This free queue's entries for the JIT's inline pop.
    pub fn free_slots(&self) -> FreeSlots {
        FreeSlots(self.clone())
    }
}

// SAFETY: `slots` is entry 0 of a queue of 4-byte slots, inside the
// mapping (`ShmQueue::new` checked that all `depth` slots lie in the
// segment), 4-byte aligned (slots start 128 bytes past a 64-byte aligned
// queue offset), the same address every time, and valid as long as
// `self`, whose `ShmQueue` holds the segment. `depth` is the queue's power
// of two, fixed. Generated code only reads the entries, each once, and
// checks the value it read; the application may write them meanwhile.
unsafe impl jive::QueueSlots for FreeSlots {
    fn slots(&self) -> *const u32 {
        self.0.slot_ptr(0)
    }
    fn depth(&self) -> u32 {
        self.0.q.depth
    }
}

/// Copies a `T` out of shared memory with volatile loads, eight bytes at a
/// time where `T`'s size allows (a volatile read of a 64-byte struct is
/// otherwise split into byte loads).
///
/// # Safety
/// `p` is valid for reads of a `T`, aligned to 8 bytes if `T`'s size is a
/// multiple of 8, and `T` is valid for any bits.
#[inline(always)]
unsafe fn read_once<T: Copy>(p: *const T) -> T {
    if size_of::<T>().is_multiple_of(8) && align_of::<T>() >= 8 {
        let mut v = core::mem::MaybeUninit::<T>::uninit();
        let (src, dst) = (p.cast::<u64>(), v.as_mut_ptr().cast::<u64>());
        for k in 0..size_of::<T>() / 8 {
            // SAFETY: word `k` lies inside `*p` and inside `v`, both aligned
            // to 8 (the caller's contract and the `if`).
            unsafe { dst.add(k).write(src.add(k).read_volatile()) };
        }
        // SAFETY: every byte of `v` was written, and `T` is valid for any bits.
        unsafe { v.assume_init() }
    } else {
        // SAFETY: the caller's contract.
        unsafe { p.read_volatile() }
    }
}

/// Writes a `T` into shared memory with volatile stores, eight bytes at a
/// time where `T`'s size allows.
///
/// # Safety
/// As for [`read_once`], for writes.
#[inline(always)]
unsafe fn write_once<T: Copy>(p: *mut T, v: T) {
    if size_of::<T>().is_multiple_of(8) && align_of::<T>() >= 8 {
        let src = (&raw const v).cast::<u64>();
        for k in 0..size_of::<T>() / 8 {
            // SAFETY: word `k` lies inside `v` and inside `*p`, both aligned to 8.
            unsafe { p.cast::<u64>().add(k).write_volatile(src.add(k).read()) };
        }
    } else {
        // SAFETY: the caller's contract.
        unsafe { p.write_volatile(v) }
    }
}

macro_rules! shm_queue_mem {
    ($t:ident) => {
        impl QueueMem<$t> for ShmQueue<$t> {
            #[inline]
            fn head(&self) -> &AtomicU32 {
                // SAFETY: checked by `Segment::atomic` in `new`; the mapping
                // lives as long as `self.seg`, hence as long as `&self`.
                unsafe { self.head.as_ref() }
            }
            #[inline]
            fn tail(&self) -> &AtomicU32 {
                // SAFETY: as for `head`.
                unsafe { self.tail.as_ref() }
            }
            #[inline]
            fn depth(&self) -> u32 {
                self.q.depth
            }
            #[inline]
            fn read(&self, i: u32) -> $t {
                // SAFETY: the slot is in range (`slot_ptr`), aligned (slots
                // start 128 bytes past a 64-byte aligned queue offset), and
                // the type is plain data valid for any bits; the volatile
                // loads make one private copy.
                unsafe { read_once(self.slot_ptr(i & (self.q.depth - 1))) }
            }
            #[inline]
            fn write(&self, n: u32, v: $t) {
                shm_queue_mem!(@write $t, self, n, v)
            }
            shm_queue_mem!(@write_run $t);
        }
    };
    // A receive slot is sealed slot by slot: `QueueMem::write_run`'s
    // default, `write` in turn.
    (@write_run RxDesc) => {};
    (@write_run $t:ident) => {
        /// The slots up to the queue's end, then from its start, each
        /// written once (volatile, as `write`), their address worked out
        /// once a piece: in a loop of `write`s the compiler loads the
        /// mapping's base again after each store (a receiver's batch of
        /// eight given buffers, 27 instructions fewer: 3.4 a message,
        /// `unet-count` path-57).
        #[inline]
        fn write_run(&self, n: u32, items: &[$t]) {
            let depth = self.q.depth as usize;
            debug_assert!(items.len() <= depth);
            let first = (n & (self.q.depth - 1)) as usize;
            let (to_end, from_start) = items.split_at(items.len().min(depth - first));
            for (at, piece) in [(first, to_end), (0, from_start)] {
                let base = self.slot_ptr(at as u32);
                for (k, &v) in piece.iter().enumerate() {
                    // SAFETY: slot `at + k` is a slot of the queue
                    // (`at + piece.len() <= depth` by the split), in the
                    // mapping as `slot_ptr` argues, aligned as for `read`.
                    unsafe { write_once(base.add(k), v) }
                }
            }
        }
    };
    (@write RxDesc, $q:ident, $n:ident, $v:ident) => {{
        // The whole slot with its `sealed` byte 0, then the seal
        // (`crate::ring::write_sealed`), as the engine's other writers of
        // a receive slot seal it; `v`'s own `sealed` is not used.
        let p = $q.rx_slot($n);
        let d = RxDesc { sealed: 0, ..$v };
        // SAFETY: as for `read`.
        write_sealed($q, $n, || unsafe { write_once(p, d) });
    }};
    (@write $t:ident, $q:ident, $n:ident, $v:ident) => {
        // SAFETY: as for `read`.
        unsafe { write_once($q.slot_ptr($n & ($q.q.depth - 1)), $v) }
    };
}

shm_queue_mem!(TxDesc);
shm_queue_mem!(RxDesc);
shm_queue_mem!(u32);

/// Copies `src` into `dst` (of the same length), without a call for a
/// message that fits a receive descriptor: up to 64 bytes move as two
/// overlapping fixed-size copies, which the compiler emits as a few vector
/// loads and stores, where `copy_from_slice` calls `memcpy` (some 15
/// instructions with the call for 40 bytes). Longer ones go to `memcpy`.
///
/// # Panics
///
/// If the lengths differ (as `copy_from_slice`).
#[inline(always)]
pub fn copy_small(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    assert_eq!(dst.len(), n, "copy_small: lengths differ");
    if n > 64 {
        dst.copy_from_slice(src);
    } else if n >= 32 {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 32..].copy_from_slice(&src[n - 32..]);
    } else if n >= 16 {
        dst[..16].copy_from_slice(&src[..16]);
        dst[n - 16..].copy_from_slice(&src[n - 16..]);
    } else if n >= 8 {
        dst[..8].copy_from_slice(&src[..8]);
        dst[n - 8..].copy_from_slice(&src[n - 8..]);
    } else {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s;
        }
    }
}

/// Copies `src` into `dst` (of the same length), a message into memory
/// that another core reads next (an applet's inbox): from
/// [`COPY_OWN_MIN`] bytes with `copy_own`, which first asks for the
/// destination's lines for writing, then writes each byte once, aligned
/// to `dst`; shorter ones by `copy_from_slice` (`memcpy`).
///
/// How the copy writes the lines the receiver waits for is what counts,
/// not its instructions. On the Intel Xeon guest, whose glibc `memcpy`
/// moves 33 bytes and more in vector moves over each other (the first
/// and the last 32 or 64 bytes, and so on), a round trip over `loop`
/// paid 0.1 to 0.19 µs for it: plain U-Net's read 0.53 µs at 129 to 255
/// bytes against 0.37 at 128, and the lent standard applet's 1.75x
/// U-Net's at 57 to 63 bytes against 1.45x at 56. With this copy U-Net's
/// read 0.40 to 0.46 µs there, the applet's 1.5x to 1.6x; asking for the
/// lines first took another 0.05 to 0.4 µs off the applet's at 64 bytes
/// to 8 KiB, and 0.1 to 0.4 µs off U-Net's from 512 bytes
/// (docs/benchmarks.md, "Copies that write each byte once, aligned" and
/// "A copy's lines asked for first").
///
/// # Panics
///
/// If the lengths differ (as `copy_from_slice`).
#[inline(always)]
pub fn copy_message(dst: &mut [u8], src: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if src.len() >= COPY_OWN_MIN {
        assert_eq!(dst.len(), src.len(), "copy_message: lengths differ");
        // SAFETY: `dst` and `src` are valid for `src.len()` bytes each
        // (their lengths, equal), and do not overlap (`dst` is a unique
        // borrow).
        unsafe { copy_own(dst.as_mut_ptr(), src.as_ptr(), src.len()) };
        return;
    }
    dst.copy_from_slice(src);
}

/// The shortest copy [`copy_message`] and [`Segment::write_bytes`] make
/// with their own moves. Messages up to [`INLINE_MAX`] cross between the
/// cores another way, in a receive descriptor or beside the inbox's tag
/// (`inbox::COPY_MAX`, the same 56 bytes), so the copy into a buffer or
/// the inbox's ring is not what the receiver waits for; with these moves
/// from 1 byte, the lent applet's round trip ran 78 instructions more at
/// 40 bytes (`xthr_count`), its time level.
pub const COPY_OWN_MIN: usize = INLINE_MAX + 1;
/// The longest copy `copy_own` makes with its own moves; longer ones
/// are `memcpy`'s, which on the Intel Xeon guest copies with `rep movsb`
/// from 2,112 bytes, faster into the inbox at 4 KiB than these moves.
pub const COPY_OWN_MAX: usize = 2048;
/// The longest copy whose lines `copy_own` asks for, for writing, before
/// it copies (128 lines: the copy's stores find them already taken, where
/// one line at a time waited for the other core to let go of it).
pub const COPY_FETCH_MAX: usize = 8192;
/// The fewest lines a copy spans for `copy_own` to ask for them first: a
/// copy over two lines paid for the requests (the lent applet at 57 B,
/// 0.617 µs against 0.587 without) and gained nothing.
#[cfg(target_arch = "x86_64")]
const COPY_FETCH_MIN_LINES: usize = 3;

/// Copies `n` bytes from `src` to `dst`, memory that another core reads
/// next: first, for a copy of [`COPY_FETCH_MIN_LINES`] lines to
/// [`COPY_FETCH_MAX`] bytes, asks for each line of `dst` for writing
/// (`prefetchw`), so that their transfers from the other core overlap;
/// then copies with [`copy_avx`] up to [`COPY_OWN_MAX`] bytes where the
/// CPU has AVX, else with `ptr::copy_nonoverlapping`. A call of its own,
/// so that its callers inlined stay a test and a call.
///
/// # Safety
///
/// `dst` is valid for `n` bytes of writes and `src` for `n` bytes of
/// reads, and the two ranges do not overlap.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe fn copy_own(dst: *mut u8, src: *const u8, n: usize) {
    let (first, end) = (dst as usize & !63, dst as usize + n);
    let lines = (end - first).div_ceil(64);
    if n <= COPY_FETCH_MAX && lines >= COPY_FETCH_MIN_LINES {
        // SAFETY: `lines > 0`; the lines hold bytes of `dst`'s range, which
        // the caller promises valid.
        unsafe { fetch_lines_to_write(first as *const u8, lines) };
    }
    if n <= COPY_OWN_MAX && std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU has AVX (just checked); the ranges as the
        // caller promises.
        unsafe { copy_avx(dst, src, n) };
    } else {
        // SAFETY: as the caller promises.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    }
}

/// [`copy_own`]'s copy: pieces of 1, 2, 4, 8 and 16 bytes until `dst` is
/// aligned to 32 (each only if that bit of the address is set), then
/// 32-byte moves, four a step, then one each of 64 and 32 bytes and 16,
/// 8, 4, 2 and 1 as the rest needs. No byte is written twice, and no
/// 32-byte move crosses a line. Every move is an intrinsic or an
/// unaligned read and write of a fixed size, which the compiler emits as
/// one move: a loop of one copy a step became a `memcpy` call (LLVM's loop
/// idiom). The 32-byte moves load four, then store four: stored each right
/// after its load, the round trip was slower (below).
///
/// Tried and not kept (docs/benchmarks.md, "Copies that write each byte
/// once, aligned"): the same in 64-byte moves with AVX-512, neither
/// faster nor slower over 57 bytes to 2 KiB in one run with this one
/// (57 B slower, 129 to 200 B and 2 KiB faster), and it needs Rust 1.89
/// where the workspace says 1.88; one masked 64-byte move for the first
/// line and one for the last in place of the pieces, which lost what the
/// copy gained at 57 to 128 bytes; each 32-byte move stored right after
/// its load, 0.07 to 0.12 µs slower at 100 to 255 bytes.
///
/// # Safety
///
/// The CPU has AVX; `dst` is valid for `n` bytes of writes and `src` for
/// `n` bytes of reads, and the two ranges do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn copy_avx(dst: *mut u8, src: *const u8, n: usize) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_storeu_si256};
    use std::ptr::{read_unaligned as get, write_unaligned as put};
    // SAFETY: every move below moves `k` bytes at `at`, where `at + k <=
    // n` (tested first), so within both ranges (the caller's promise); the
    // intrinsics need AVX (the caller's promise) and take unaligned
    // addresses, as `get` and `put` do.
    unsafe {
        let mut at = 0;
        macro_rules! piece {
            ($k:literal) => {
                if n - at >= $k {
                    put(
                        dst.add(at).cast::<[u8; $k]>(),
                        get(src.add(at).cast::<[u8; $k]>()),
                    );
                    at += $k;
                }
            };
        }
        if dst as usize & 31 != 0 {
            macro_rules! head {
                ($k:literal) => {
                    if (dst as usize + at) & $k != 0 {
                        piece!($k);
                    }
                };
            }
            head!(1);
            head!(2);
            head!(4);
            head!(8);
            head!(16);
        }
        let v = |at: usize| _mm256_loadu_si256(src.add(at).cast::<__m256i>());
        let w = |at: usize, x| _mm256_storeu_si256(dst.add(at).cast::<__m256i>(), x);
        while n - at >= 128 {
            let (a, b, c, d) = (v(at), v(at + 32), v(at + 64), v(at + 96));
            w(at, a);
            w(at + 32, b);
            w(at + 64, c);
            w(at + 96, d);
            at += 128;
        }
        if n - at >= 64 {
            let (a, b) = (v(at), v(at + 32));
            w(at, a);
            w(at + 32, b);
            at += 64;
        }
        if n - at >= 32 {
            w(at, v(at));
            at += 32;
        }
        piece!(16);
        piece!(8);
        piece!(4);
        piece!(2);
        piece!(1);
        debug_assert_eq!(at, n);
    }
}

/// The queues of a segment laid out by `layout`.
///
/// # Errors
///
/// As [`ShmQueue::new`]'s, for a queue that does not fit `seg` (never one
/// of a [`Layout::new`]'s layout, with a segment of its `total` bytes).
pub fn queues(
    seg: &Arc<Segment>,
    layout: &Layout,
) -> Result<(TxQueue, RxQueue, FreeQueue), ConfigError> {
    Ok((
        ShmQueue::new(seg.clone(), layout.tx)?,
        ShmQueue::new(seg.clone(), layout.rx)?,
        ShmQueue::new(seg.clone(), layout.free)?,
    ))
}

/// Defines a function that asks the CPU for `lines` cache lines from `p`
/// with the prefetch instruction `$insn`: one alone, or four to a turn of
/// the loop and the rest one by one. The addresses are computed as
/// integers, not by pointer arithmetic, so that `p` may be the start of
/// a line that begins before the allocation holding its bytes.
macro_rules! fetch_lines_with {
    ($(#[$doc:meta])* $name:ident, $insn:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub(crate) unsafe fn $name(p: *const u8, lines: usize) {
            #[cfg(target_arch = "x86_64")]
            {
                let p = p as usize;
                // SAFETY: a prefetch neither reads nor writes memory
                // architecturally, never faults (whatever the address) and
                // changes no register or flag; `prefetchw` is executed as
                // a no-op by x86 processors that do not implement it.
                unsafe {
                    // One line (a message of 57 to 64 bytes) without the
                    // loops' setup (`unet-count` path-57, 11 instructions).
                    if lines == 1 {
                        core::arch::asm!(concat!($insn, " [{p}]"), p = in(reg) p, options(nostack, preserves_flags, readonly));
                        return;
                    }
                    let mut i = 0;
                    while i + 4 <= lines {
                        let q = p + i * 64;
                        core::arch::asm!(
                            concat!($insn, " [{q}]"),
                            concat!($insn, " [{q} + 64]"),
                            concat!($insn, " [{q} + 128]"),
                            concat!($insn, " [{q} + 192]"),
                            q = in(reg) q,
                            options(nostack, preserves_flags, readonly),
                        );
                        i += 4;
                    }
                    while i < lines {
                        let q = p + i * 64;
                        core::arch::asm!(concat!($insn, " [{q}]"), q = in(reg) q, options(nostack, preserves_flags, readonly));
                        i += 1;
                    }
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (p, lines);
        }
    };
}

fetch_lines_with!(
    /// Asks the CPU for the `lines` cache lines from `p`, for reading
    /// (`prefetcht0`). A hint: nothing is read or written.
    /// [`Segment::prefetch_line_count`] and the applet inbox's ring
    /// (`engine::inbox`) ask through it.
    ///
    /// # Safety
    /// `lines > 0`, and the lines asked for hold bytes of one live
    /// allocation or mapping (a hint for anything else is harmless, but
    /// names no caller's intent).
    fetch_lines,
    "prefetcht0"
);

fetch_lines_with!(
    /// Asks the CPU for the `lines` cache lines from `p`, for writing
    /// (`prefetchw`: the lines taken exclusive, the other cores' copies
    /// dropped). A hint, as [`fetch_lines`]; `copy_own` asks through it.
    ///
    /// # Safety
    /// As [`fetch_lines`].
    #[cfg(target_arch = "x86_64")]
    fetch_lines_to_write,
    "prefetchw"
);

#[cfg(test)]
mod tests {
    use super::{COPY_FETCH_MAX, COPY_OWN_MAX, copy_message, copy_small};

    #[test]
    fn copy_small_copies_every_length_exactly() {
        let src: Vec<u8> = (0..200u8)
            .map(|b| b.wrapping_mul(7).wrapping_add(3))
            .collect();
        for n in 0..=130 {
            // A destination with guard bytes on both sides, none touched.
            let mut buf = vec![0xeeu8; n + 2];
            copy_small(&mut buf[1..=n], &src[5..5 + n]);
            assert_eq!(&buf[1..=n], &src[5..5 + n], "length {n}");
            assert_eq!((buf[0], buf[n + 1]), (0xee, 0xee), "length {n}");
        }
    }

    /// Every length, on either side of each of `copy_message`'s bounds and
    /// its pieces', comes out exactly, nothing written outside it.
    #[test]
    fn copy_message_copies_every_length_exactly() {
        let src: Vec<u8> = (0..COPY_FETCH_MAX as u32 + 2000)
            .map(|b| (b as u8).wrapping_mul(7).wrapping_add(3) ^ (b >> 8) as u8)
            .collect();
        for n in (0..=COPY_OWN_MAX + 70).chain([4096, 8191, 8192, 8193, 9000]) {
            // A destination with guard bytes on both sides, none touched.
            let mut buf = vec![0xeeu8; n + 2];
            copy_message(&mut buf[1..=n], &src[5..5 + n]);
            assert_eq!(&buf[1..=n], &src[5..5 + n], "length {n}");
            assert_eq!((buf[0], buf[n + 1]), (0xee, 0xee), "length {n}");
        }
    }

    /// `copy_own`'s copy (where the CPU has AVX; else it is
    /// `ptr::copy_nonoverlapping`), at every alignment of the destination
    /// within a line and five of the source, for every length to 300 bytes
    /// and some longer: exact, nothing written outside.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_aligned_copy_copies_every_length_at_every_alignment() {
        let src: Vec<u8> = (0..2300u32)
            .map(|b| (b as u8).wrapping_mul(13).wrapping_add(5) ^ (b >> 8) as u8)
            .collect();
        let mut buf = vec![0u8; 2048 + 3 * 64];
        let line = buf.as_ptr().align_offset(64);
        for n in (0..=300).chain([511, 512, 513, 1000, 2047, 2048]) {
            for d in line..line + 64 {
                for s in [0, 1, 7, 32, 63] {
                    buf.fill(0xee);
                    // SAFETY: `d + n` and `s + n` lie within `buf` and
                    // `src`, distinct vectors.
                    unsafe { super::copy_own(buf.as_mut_ptr().add(d), src.as_ptr().add(s), n) };
                    let what = format!("{n} bytes to +{} from +{s}", d - line);
                    assert_eq!(&buf[d..d + n], &src[s..s + n], "{what}");
                    assert!(buf[..d].iter().all(|&b| b == 0xee), "{what}: before");
                    assert!(buf[d + n..].iter().all(|&b| b == 0xee), "{what}: after");
                }
            }
        }
    }

    /// A segment written from a view of itself over the range written (an
    /// endpoint that sends to itself into its own transmit region) gets
    /// `memmove`'s bytes, either way over; a disjoint view the bytes copied.
    #[test]
    fn a_segment_written_from_itself_gets_memmoves_bytes() {
        let seg = super::Segment::create("unet-write-self", 4096).unwrap();
        let pattern: Vec<u8> = (0..1024u32).map(|b| (b * 7 + 1) as u8).collect();
        for (from, to, n) in [
            (100, 140, 300),
            (140, 100, 300),
            (0, 1, 63),
            (1, 0, 63),
            (0, 2048, 1024),
        ] {
            seg.write_bytes(0, &pattern);
            seg.write_bytes(2048, &[0u8; 1024]);
            let mut want = vec![0u8; 4096];
            seg.read_bytes(0, &mut want);
            want.copy_within(from..from + n, to);
            seg.with_bytes(from, n, |b| seg.write_bytes(to, b));
            let mut got = vec![0u8; 4096];
            seg.read_bytes(0, &mut got);
            assert!(got == want, "{n} bytes from {from} to {to}");
        }
    }

    /// An area's view (`AreaBytes::view`, one comparison and `unsafe`) is
    /// given up to the area's last byte and refused past it, whatever the
    /// offset and length (an applet's `doTx` names them), with the area
    /// itself refused where it does not lie in the segment.
    #[test]
    fn an_area_view_is_given_to_the_areas_last_byte_and_no_further() {
        let seg = std::sync::Arc::new(super::Segment::create("unet-area-view", 4096).unwrap());
        assert!(seg.area_bytes(1024, 3073).is_none(), "past the segment");
        assert!(seg.area_bytes(usize::MAX, 1).is_none(), "offset overflows");
        let area = seg.area_bytes(1024, 2048).unwrap();
        seg.write_bytes(1024 + 2042, &[1, 2, 3, 4, 5, 6]);
        assert_eq!(area.view(2042, 6), Some(&[1, 2, 3, 4, 5, 6][..]));
        assert_eq!(area.view(2048, 0).map(<[u8]>::len), Some(0));
        assert_eq!(area.view(0, 2048).map(<[u8]>::len), Some(2048));
        for (off, len) in [
            (2043, 6),
            (2049, 0),
            (0, 2049),
            (u32::MAX, 1),
            (1, u32::MAX),
        ] {
            assert!(area.view(off, len).is_none(), "{off}+{len}");
        }
    }

    #[test]
    fn a_view_is_given_to_its_last_byte_and_no_further() {
        let seg = super::Segment::create("unet-view-range", 4096).unwrap();
        seg.write_bytes(4090, &[1, 2, 3, 4, 5, 6]);
        assert_eq!(seg.with_bytes(4090, 6, |b| b.to_vec()), [1, 2, 3, 4, 5, 6]);
        assert_eq!(seg.with_bytes(4096, 0, |b| b.len()), 0);
        for (off, len) in [(4091, 6), (4097, 0), (0, 4097), (usize::MAX, 1)] {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                seg.with_bytes(off, len, |b| b.len())
            }));
            let msg = r.expect_err("out of range").downcast::<&str>().map(|m| *m);
            assert_eq!(msg.ok(), Some("segment view out of range"), "{off}+{len}");
        }
    }

    /// A segment from another process (`Segment::map`, the application's
    /// side of a daemon-run endpoint) too short to hold a header is an
    /// error, not a mapping whose `read_header` would panic; a header's
    /// length is enough.
    #[test]
    fn a_segment_shorter_than_its_header_is_refused() {
        use crate::layout::Header;
        let short = super::Segment::create("unet-short", size_of::<Header>() - 1).unwrap();
        let err = super::Segment::map(short.fd().try_clone().unwrap()).expect_err("too short");
        assert!(err.to_string().contains("shorter than its header"), "{err}");
        let just = super::Segment::create("unet-just", size_of::<Header>()).unwrap();
        let seg = super::Segment::map(just.fd().try_clone().unwrap()).expect("a header's length");
        assert_eq!(seg.read_header().magic, 0);
    }

    /// A queue that does not fit its segment is a typed error from
    /// `ShmQueue::new` (and `queues`), never a panic or a queue: a depth
    /// that is not a power of two, an offset off a cache line, slots that
    /// end past the segment, even by overflow. The slots are the queue's
    /// type's: a layout that fits 4-byte entries does not fit 64-byte
    /// receive slots.
    #[test]
    fn a_queue_that_does_not_fit_its_segment_is_a_typed_error() {
        use super::{FreeQueue, RxQueue, ShmQueue, TxQueue};
        use crate::error::ConfigError;
        use crate::layout::{Config, Layout, QueueLayout};
        use std::sync::Arc;
        let seg = Arc::new(super::Segment::create("unet-queue-fit", 4096).unwrap());
        let rx = |offset, depth| RxQueue::new(seg.clone(), QueueLayout::new(offset, depth));
        // The last 16 receive slots of the segment, to its last byte.
        assert!(rx(4096 - 128 - 16 * 64, 16).is_ok());
        let past = rx(4096 - 128 - 15 * 64, 16).expect_err("one slot past the end");
        assert!(
            matches!(&past, ConfigError::Layout(m) if m.contains("ends past")),
            "{past}"
        );
        let odd = rx(0, 12).expect_err("12 slots");
        assert!(
            matches!(
                odd,
                ConfigError::Size {
                    what: "queue depth",
                    value: 12,
                    ..
                }
            ),
            "{odd}"
        );
        let off = rx(32, 4).expect_err("off a cache line");
        assert!(
            matches!(&off, ConfigError::Layout(m) if m.contains("cache line")),
            "{off}"
        );
        // The index's offset + 128 overflows; then the slots' end does.
        for wild in [usize::MAX - 63, (usize::MAX - 128 - 4096) / 64 * 64] {
            let e = rx(wild, 1 << 16).expect_err("past the end by overflow");
            assert!(matches!(e, ConfigError::Layout(_)), "{e}");
        }
        // 32 entries at 2048 fit as the free queue's 4 bytes, not as
        // receive slots (2048 + 128 + 32 * 64 > 4096).
        assert!(FreeQueue::new(seg.clone(), QueueLayout::new(2048, 32)).is_ok());
        assert!(rx(2048, 32).is_err());
        // An endpoint's layout over a segment too short for its free queue.
        let layout = Layout::new(Config::default()).unwrap();
        let short =
            Arc::new(super::Segment::create("unet-queue-short", layout.free.offset).unwrap());
        let e = super::queues(&short, &layout).expect_err("no room for the free queue");
        assert!(matches!(e, ConfigError::Layout(_)), "{e}");
        assert!(TxQueue::new(short.clone(), layout.tx).is_ok());
        assert!(ShmQueue::new(short, layout.rx).is_ok());
    }

    /// A run of free-queue entries written at once (`write_run`, the slots'
    /// address worked out once a piece) lands in the slots `write` would
    /// have put each in: across the queue's end, from its start, a whole
    /// queue, one entry; the consumer reads them in order and nothing else.
    #[test]
    fn a_run_of_free_entries_lands_where_each_would_and_wraps_at_the_end() {
        use super::FreeQueue;
        use crate::layout::QueueLayout;
        use crate::ring::{Consumer, Producer, QueueMem};
        use std::sync::Arc;
        let seg = Arc::new(super::Segment::create("unet-free-run", 4096).unwrap());
        let q = FreeQueue::new(seg, QueueLayout::new(0, 8)).unwrap();
        let (mut p, mut c) = (Producer::new(q.clone()), Consumer::new(q.clone()));
        let mut next = 100u32;
        // Each round's run, after `skip` entries pushed and taken, starts
        // at slot `start`: 6 entries from 5 (over the end), the whole queue
        // from 3 (over the end), the whole queue from its start, one entry.
        for (skip, run, start) in [(5, 6, 5), (0, 8, 3), (5, 8, 0), (0, 1, 0)] {
            for _ in 0..skip {
                assert_eq!(p.push(0), Ok(true));
                p.publish();
                assert_eq!(c.pop(), Ok(Some(0)));
            }
            let first = p.pushed();
            assert_eq!(first & 7, start);
            let items: Vec<u32> = (next..next + run).collect();
            next += run;
            assert_eq!(p.push_slice_unpublished(&items), items.len());
            // Each in the slot `write` names for its number.
            for (k, &v) in items.iter().enumerate() {
                assert_eq!(q.read(first.wrapping_add(k as u32) & 7), v, "entry {k}");
            }
            p.publish();
            for &v in &items {
                assert_eq!(c.pop(), Ok(Some(v)));
            }
            assert_eq!(c.pop(), Ok(None));
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn copy_small_refuses_different_lengths() {
        copy_small(&mut [0u8; 3], &[1, 2]);
    }
}
