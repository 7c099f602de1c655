//! Applet I/O: what an applet invocation sees of the engine and what it
//! may spend. [`Io`] is the natives' view of an endpoint's frames and
//! queues ([`NativeHost`]); an invocation runs under the per-invocation
//! budgets of [`Budgets`] (frames and bytes pushed, fuel, CPU time), and an
//! overrun throttles its endpoint. Loading an applet and resolving its
//! natives live here too.

use super::*;
use crate::ring::Corrupt;

/// The longest an endpoint is set aside after one overrun, whatever the
/// overrun's length.
pub(super) const THROTTLE_MAX: Duration = Duration::from_millis(50);

/// Work units (one per native call, one per 4 KiB it moves) an invocation
/// may spend before the natives first read the clock, and between two
/// readings after that. Reading the thread's CPU time is a system call
/// (not in the vDSO), so it must stay rare next to the copies it bounds:
/// 256 units is at most 1 MiB copied, some 100 µs, between two readings.
pub(super) const TIME_CHECK_EVERY: u64 = 256;

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`).
pub(crate) fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, the one given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The state of the applet invocation running on an [`Io`]: what it has
/// pushed and done, against its budgets.
#[derive(Debug)]
pub(super) struct Invocation {
    /// The work count (`words.work`), where the next clock reading is due
    /// (`words.bound`), the buffer size as an `int` (`words.ints[0]`), the
    /// receive queue's free run (`words.ring`), and the frames and bytes
    /// pushed against the push budgets with the channel a tail push may
    /// defer on (`words.tail`): lent to the JIT's inline natives
    /// ([`NativeHost::words`]).
    pub(super) words: jive::HostWords,
    /// The thread's CPU time when the natives first read it (`None`: not
    /// yet).
    pub(super) cpu_start: Option<Duration>,
    /// Whether it exceeded a budget (the natives set this before they trap).
    pub(super) overran: bool,
}

impl Invocation {
    /// The state of an endpoint whose receive queue's slots are `rx`
    /// (lent to the inline `dmaRxdPayload`) and whose free queue's entries
    /// are `free` (lent to the inline
    /// `getFreeBuffer`, which takes only entries that `layout` says are
    /// buffers: below the area's length, aligned to the buffer size),
    /// whose buffer area is `area` (lent to the inline `doHtoLDMA` and
    /// `doLtoHDMA`), pushing under `budgets` messages of at most
    /// `max_message` bytes.
    #[inline]
    pub(super) fn new(
        rx: crate::shm::RxSlots,
        free: crate::shm::FreeSlots,
        area: crate::shm::AreaBytes,
        layout: &Layout,
        budgets: &Budgets,
        max_message: u32,
    ) -> Invocation {
        let ring = jive::RingWords::new(Arc::new(rx)).unwrap_or_default();
        let below = u32::try_from(layout.area_len).unwrap_or(u32::MAX);
        let align = layout.config.buffer_size.wrapping_sub(1);
        let queue = jive::QueueWords::new(Arc::new(free), below, align).unwrap_or_default();
        let area = jive::AreaWords::new(Arc::new(area)).unwrap_or_default();
        Invocation {
            words: jive::HostWords {
                work: 0,
                bound: TIME_CHECK_EVERY,
                // What the inline getFreeBufferLength returns: the buffer
                // size, or a negative number where an `int` cannot hold
                // it, so that the ordinary native runs and reports it.
                // Written once: nothing else writes it, and the layout
                // is the endpoint's for its life.
                ints: [layout.config.buffer_size as i32, 0],
                ring,
                queue,
                area,
                // No channel lent ([`Io::lend_tail`]); the limits are the
                // endpoint's for its life.
                tail: jive::TailWords {
                    max_frames: budgets.push_frames as u64,
                    max_bytes: budgets.push_bytes as u64,
                    // Below 2^31, as the form needs (14 buffers of at
                    // most 64 KiB).
                    max_message: u64::from(max_message).min(i32::MAX as u64),
                    ..jive::TailWords::NONE
                },
                // No frame's room lent ([`Io::lend_frame`]).
                frame: jive::FrameWords::NONE,
            },
            cpu_start: None,
            overran: false,
        }
    }
}

/// The engine's receive side of an endpoint, reached by the natives during
/// an applet invocation ([`NativeHost`]) and by the standard delivery.
pub struct Io {
    pub(super) seg: Arc<Segment>,
    pub(super) layout: Layout,
    pub(super) rx: Producer<RxDesc, RxQueue>,
    pub(super) free: Consumer<u32, FreeQueue>,
    /// Valid buffers taken from the free queue and not used yet.
    pub(super) spare: Vec<u32>,
    pub(super) stats: Arc<PortStats>,
    pub(super) framer: Framer,
    /// The engine's budgets, `push_frames` cut to the transmit depth.
    pub(super) budgets: Budgets,
    /// The running (or last) applet invocation.
    pub(super) inv: Invocation,
    /// Whether receive descriptors were written and not yet published, or
    /// free-queue entries taken and not yet given back ([`Io::publish`]).
    pub(super) unpublished: bool,
    /// Whether the receive queue's free run is lent to the inline
    /// `dmaRxdPayload` and `dmaRxd` (`words.ring`): only while the applet
    /// declares one ([`load_applet`]), so that an applet that never pushes
    /// inline pays nothing for the lending (the compare at [`Io::begin`],
    /// the take at [`Io::end`] and around the native's own pushes). While it is
    /// `false` the run lent is empty (every inline push would take the
    /// rare path) and nothing is taken back.
    pub(super) ring_lent: bool,
    /// Whether the free queue's ready entries are lent to the inline
    /// `getFreeBuffer` (`words.queue`): only while the applet declares it
    /// ([`load_applet`]). While it is `false` the run lent is empty and
    /// nothing is taken back.
    ///
    /// While it is `true` the run stays lent from one invocation to the
    /// next, as the receive run does: what the inline pops took is taken
    /// back at each [`Io::end`] and the rest stays lent, so that the
    /// first `getFreeBuffer` of an invocation is inline too. The run is
    /// lent again only by the native's pop ([`Io::pop_free`], once the
    /// run is spent) and wherever the engine itself takes a buffer or
    /// keeps one aside while an applet runs ([`Io::push_rx`]); every other
    /// taking (the standard delivery's) happens with no applet installed,
    /// and an applet's install lends anew ([`Io::set_free_lent`]). So a
    /// lent run always starts at the consumer's count, and is empty while
    /// a spare buffer waits (the native gives those first).
    pub(super) free_lent: bool,
    /// Whether the running invocation's `txPush` at a tail site may defer
    /// its message ([`Io::transmit_tail`]): set by [`applet_tx`] for a
    /// `doTx` while no frame waits before its own (a channel's messages
    /// go in order), and cleared by the first deferral. At most one
    /// message is deferred per invocation anyway (the method returns right
    /// after a tail site); the clearing is belt and braces.
    pub(super) defer: bool,
    /// The message a `txPush` at a tail site deferred, checked and counted,
    /// which [`applet_tx`] sends once `doTx` has returned
    /// ([`Engine::resolve_deferred`]), before it lets go of the applet.
    pub(super) deferred: Option<Deferred>,
    /// The buffer area's bytes lent to the running invocation as its
    /// message (the lent `doTx`, [`run_tx_lent`]; empty otherwise), which
    /// no native may write meanwhile ([`NativeHost::area_held`]).
    pub(super) held: core::ops::Range<u32>,
    /// The buffer area's bytes lent to the last lent `doTx` as its message
    /// ([`run_tx_lent`]), where the message it deferred is read
    /// ([`Deferred::in_area`]). Unlike [`Io::held`], left as it was after
    /// the invocation.
    pub(super) tx_lent: core::ops::Range<u32>,
    /// Messages the inline tail push recorded and [`Io::take_tail`] took,
    /// for the unit tests (that the JIT's form runs at all: its outcomes
    /// are the native's by design, so no outcome tells the two apart).
    #[cfg(test)]
    pub(super) inline_tails: u64,
    /// Frames the eager inline tail push wrote and [`Io::take_frame`]
    /// took, for the unit tests, as [`Io::inline_tails`].
    #[cfg(test)]
    pub(super) inline_frames: u64,
}

/// A message `txPush` deferred at a tail site ([`Io::transmit_tail`]):
/// `array[off..off + len)` of the applet's `byte[]` `array` (a heap
/// handle), on `chan`. The tail site's proof ([`jive::TAIL_SUFFIX`]) says
/// a static or the instance still holds the array after the invocation
/// (so its end-of-invocation collection keeps it) and nothing writes it
/// between the call and the invocation's end; the applet stays locked
/// until the message is sent, so the bytes read then are the bytes of the
/// call.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deferred {
    pub(super) array: i32,
    pub(super) off: u32,
    pub(super) len: u32,
    pub(super) chan: u16,
}

/// The bytes of the deferred message `m` that `port`'s applet (`applet`)
/// deferred: `None` only if the handle names no byte array or a shorter
/// one, which the tail site's proof excludes (the native checked the
/// range, a root holds the array, and nothing wrote since); the caller
/// then counts the message dropped ([`Engine::resolve_deferred`]).
///
/// The lent array (`jive::LENT`: a lent `doTx` pushed its `msg`, a tail
/// site's array the decoder proved is the lent parameter) is the message
/// in `port`'s buffer area, where the engine lent it from
/// ([`run_tx_lent`]): [`applet_tx`] made `m.off` its offset in the area
/// ([`Deferred::in_area`]), read here through the port's view of its
/// area ([`crate::shm::AreaBytes::view`]) as the engine reads any message
/// it sends from an area (the application may
/// write the bytes meanwhile, as it may while the engine copies them
/// without an applet: they only travel). Any other handle is the
/// applet's heap's. `Heap::get`, not `Heap::bytes_read`, which reaches the
/// lent bytes too: standard-40 counted 12 instructions more a message
/// with it.
///
/// A lent `doTx`'s message in the sending application's own memory
/// ([`CallerMsg`]) is read there: `m.off` is its offset in those bytes,
/// which the caller checked.
///
/// `src`: where the message is ([`Src`]; the caller tested `m.array`
/// once, [`applet_tx_inlined`], and each way passes a constant), so that
/// the path of every other message is compiled as it was before the lent
/// forms, with no test of its own.
#[inline(always)]
pub(super) fn deferred_bytes<'a>(
    applet: Option<&'a Loaded>,
    port: &'a Port,
    m: &Deferred,
    src: Src<'a>,
) -> Option<&'a [i8]> {
    match src {
        Src::Area => return area_message(port, m),
        Src::Caller(bytes) => {
            let at = m.off as usize;
            return bytes.get(at..at + m.len as usize).map(bytemuck::cast_slice);
        }
        Src::Heap => {}
    }
    let l = applet?;
    let (jive::Object::Bytes(v) | jive::Object::Booleans(v)) = l.applet.heap().get(m.array)? else {
        return None;
    };
    v.get(m.off as usize..m.off as usize + m.len as usize)
}

/// Where a deferred message's bytes are ([`deferred_bytes`]): the
/// applet's heap (any array but the lent one), or, for the lent array
/// (`jive::LENT`), where the engine lent it from: the buffer area
/// ([`run_tx_lent`]; `m.off` rebased by [`Deferred::in_area`]) or the
/// sending application's own bytes ([`run_tx_caller`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Src<'a> {
    Heap,
    Area,
    Caller(&'a [u8]),
}

/// [`deferred_bytes`] of a lent `doTx`'s message: `m.len` bytes at
/// `m.off` in `port`'s buffer area, `None` past it (which
/// [`Deferred::in_area`]'s checks exclude): one comparison with the
/// area's end, which lies in the segment's mapping (checked when the port
/// was made), where the area's test and then the segment's were two.
#[inline(always)]
fn area_message<'a>(port: &'a Port, m: &Deferred) -> Option<&'a [i8]> {
    Some(bytemuck::cast_slice(port.area.view(m.off, m.len)?))
}

impl Deferred {
    /// The message a lent `doTx` deferred (`jive::LENT`, `off` into the
    /// lent `msg`), rebased onto the buffer area, where `msg` is the bytes
    /// `io.tx_lent` names ([`run_tx_lent`]): `off` becomes the message's
    /// offset in the area. The push checked `off + len` against `msg`'s
    /// length; `None` if it does not hold (never: then the message is
    /// dropped, counted, as one whose bytes are gone). Any other message
    /// is returned as it is. (The lent range is read from `io`, where the
    /// invocation left it, not kept by the caller across the invocation:
    /// kept live there, the copied form's `standard-40` counted 48
    /// instructions more a message.)
    ///
    /// By reference, and the new message made field by field: the message
    /// taken by value and changed in place was copied in 8-byte pieces
    /// that read `len` and `chan` as one, stored a moment before as 4 and
    /// 2 bytes, a read the store buffer does not forward (the lent form's
    /// short round trip was 30 ns slower for it and the stalls of
    /// `jive`'s arguments; docs/benchmarks.md, "Store-forwarding stalls on
    /// the applet's path").
    #[inline(always)]
    pub(super) fn in_area(&self, io: &Io) -> Option<Deferred> {
        let mut off = self.off;
        if self.array == jive::LENT {
            let lent = &io.tx_lent;
            if u64::from(off) + u64::from(self.len) > u64::from(lent.end - lent.start) {
                return None;
            }
            off += lent.start;
        }
        Some(Deferred {
            array: self.array,
            off,
            len: self.len,
            chan: self.chan,
        })
    }
}

/// That [`Io::begin`] started an invocation, for [`Io::end`]. What it
/// lent is read again by `end` from [`Io::ring_lent`], which nothing
/// changes during an invocation (only [`Io::set_ring_lent`], called
/// between invocations, writes it): one test of the field there is
/// cheaper than the flag kept across the applet's call (a spill and a
/// reload).
#[derive(Debug, Clone, Copy)]
pub(super) struct Lent(());

impl Io {
    /// Publishes the receive descriptors written and the free-queue
    /// entries taken since the last call: one store on each queue per
    /// batch of frames, not per descriptor or buffer. Every path that
    /// receives frames ends with it (a delivery, a drain, a `doTx`, an
    /// applet's constructor).
    #[inline]
    pub(super) fn publish(&mut self) {
        if self.unpublished {
            self.unpublished = false;
            self.rx.publish();
            self.free.publish();
        }
    }

    /// Starts an applet invocation's accounting, and lends the receive
    /// queue's free run to the inline `dmaRxdPayload` and `dmaRxd` if the
    /// applet has them ([`Io::ring_lent`], which [`Io::end`] reads again:
    /// it cannot change during the invocation).
    ///
    /// Nothing of the free queue is lent here: its run stays lent from
    /// the invocations before ([`Io::free_lent`]), and starts at the
    /// consumer's count.
    #[inline]
    pub(super) fn begin(&mut self) -> Lent {
        let inv = &mut self.inv;
        inv.words.tail.frames = 0;
        inv.words.tail.bytes = 0;
        inv.words.work = 0;
        inv.cpu_start = None;
        inv.overran = false;
        inv.words.bound = TIME_CHECK_EVERY;
        // The run lent before stays lent while nothing else pushed since
        // (the producer index is where the inline pushes left it): its
        // room is what the producer's view of the consumer's index says
        // now, or less if the producer read that index since (a push
        // that finds no room reads it again). A run is never relent while
        // it holds filled slots: the run's start moves only when it is
        // lent or taken back, and every take-back moves the producer's
        // count with it, so a run left filled (only an unwinding panic
        // past `end` could leave one) still starts at the producer's
        // count here and stays lent, and the next take-back counts it
        // (`end`, `push_rx` before the engine's own push, or
        // `set_ring_lent`). A relent run is therefore always empty.
        let lent = self.ring_lent;
        if lent && self.inv.words.ring.head() != self.rx.pushed() {
            self.lend_rx();
        }
        debug_assert_eq!(
            self.inv.words.queue.taken(),
            0,
            "free entries taken inline and not taken back"
        );
        debug_assert!(
            !self.free_lent
                || self.inv.words.queue.avail() == 0
                || self.inv.words.queue.tail() == self.free.lend().0,
            "a free run lent past the consumer's count"
        );
        debug_assert!(
            self.spare.is_empty() || self.inv.words.queue.avail() == 0,
            "a free run lent while a spare buffer waits"
        );
        Lent(())
    }

    /// Lends the inline `getFreeBuffer` the free queue's ready entries
    /// from the next invocation on (`lent`), or stops: takes back what was
    /// taken and lends none (the first pop's native lends them), so that
    /// the run starts at the consumer's count whatever took buffers
    /// before, and nothing stays lent that [`Io::end`] would not take
    /// back.
    pub(super) fn set_free_lent(&mut self, lent: bool) {
        self.take_free();
        let (tail, _) = self.free.lend();
        self.inv.words.queue.lend(tail, 0);
        self.free_lent = lent;
    }

    /// Lends the inline `getFreeBuffer` the free queue's entries ready as
    /// the producer's index was last read, or none while spare buffers
    /// wait (the native gives those first).
    #[inline]
    fn lend_free(&mut self) {
        let (tail, ready) = self.free.lend();
        let ready = if self.spare.is_empty() { ready } else { 0 };
        self.inv.words.queue.lend(tail, ready);
    }

    /// Takes back the entries the inline `getFreeBuffer` took since the
    /// run was lent: the consumer takes them (given back to the
    /// application at the next [`Io::publish`]), as [`Io::take_buffer`]
    /// takes the native's.
    #[inline]
    fn take_free(&mut self) {
        let n = self.inv.words.queue.take();
        if n != 0 {
            self.free.taken_many(n);
            self.unpublished = true;
        }
    }

    /// Lends the receive queue's free run to the inline `dmaRxdPayload`
    /// from the next invocation on (`lent`), or stops: takes back what
    /// was filled and lends an empty run, so that nothing stays lent that
    /// [`Io::end`] would not take back.
    pub(super) fn set_ring_lent(&mut self, lent: bool) {
        self.take_rx();
        if !lent {
            self.inv.words.ring.lend(self.rx.pushed(), 0);
        }
        self.ring_lent = lent;
    }

    /// Ends an applet invocation (normally or by a trap): the receive
    /// descriptors its inline pushes wrote become the queue's, as the
    /// native's own pushes are (unpublished until [`Io::publish`]).
    /// The free-queue entries its inline `getFreeBuffer` took become
    /// taken, as the native's are, and the rest stays lent for the next
    /// invocation ([`Io::free_lent`]). `_begun`: what [`Io::begin`]
    /// returned.
    #[inline(always)]
    pub(super) fn end(&mut self, _begun: Lent) {
        if self.ring_lent {
            self.take_rx();
        }
        // Without `free_lent`'s test: where it is `false` the run lent is
        // empty, so `take` finds nothing taken (its one test).
        self.take_free();
    }

    /// Lends the inline push the receive queue's free run: its producer
    /// index and the slots free as the consumer's index was last read.
    #[inline]
    fn lend_rx(&mut self) {
        let (head, room) = self.rx.lend();
        self.inv.words.ring.lend(head, room);
    }

    /// Takes back the slots the inline pushes filled since the run was
    /// lent: the producer counts them, and each is a delivered descriptor,
    /// as [`Io::rx_pushed`] counts the native's. Each is sealed already:
    /// the generated push writes its header word last, with the seal
    /// ([`jive::InlineForm::PushBytes`]), so a receiver that watches the
    /// slot may have taken it before this; nothing here reads the
    /// consumer's index, and nothing between the push and this take-back
    /// does (the natives' own pushes take back first), so the producer's
    /// count is never behind a consumer index it reads.
    #[inline]
    fn take_rx(&mut self) {
        let n = self.inv.words.ring.take();
        if n != 0 {
            self.rx_taken(n);
        }
    }

    #[inline]
    fn rx_taken(&mut self, n: u32) {
        let first = self.rx.pushed();
        self.rx.filled_many(n);
        // The clamp in `filled_many` never drops a count here: the slots
        // filled are sealed, so one left uncounted would be written over.
        debug_assert_eq!(
            self.rx.pushed().wrapping_sub(first),
            n,
            "a lent run over-filled"
        );
        let n = self.rx.pushed().wrapping_sub(first);
        self.unpublished = true;
        let c = &self.stats.rx_delivered;
        c.store(c.load(Ordering::Relaxed) + u64::from(n), Ordering::Relaxed);
    }

    /// Refuses the invocation's request for exceeding `what` (its `limit`).
    #[cold]
    pub(super) fn over(&mut self, what: &'static str, limit: u64) -> HostError {
        self.inv.overran = true;
        HostError::OverBudget { what, limit }
    }

    /// The time check of [`NativeHost::charge`], every `TIME_CHECK_EVERY`
    /// units of native work.
    #[cold]
    #[inline(never)]
    fn check_time(&mut self) -> Result<(), HostError> {
        let inv = &mut self.inv;
        inv.words.bound = inv.words.work + TIME_CHECK_EVERY;
        let limit = self.budgets.applet_time;
        // The thread's CPU time from the first check on, so that an
        // invocation preempted by the system is never charged for the time
        // it waited. What ran before the first check is bounded otherwise:
        // at most `TIME_CHECK_EVERY` units of native work (a native charges
        // before it moves its bytes) and the fuel.
        let cpu = thread_cpu_time();
        let start = *inv.cpu_start.get_or_insert(cpu);
        if cpu.saturating_sub(start) > limit {
            return Err(self.over("time per invocation (µs)", limit.as_micros() as u64));
        }
        Ok(())
    }

    /// The next valid buffer: a spare one, or one from the free queue
    /// (entries that are not buffer offsets are counted and skipped).
    #[inline]
    pub(super) fn take_buffer(&mut self) -> Option<u32> {
        self.take_buffer_now()
    }

    /// [`Io::take_buffer`], always inlined (for [`Io::deliver_one_buffer`]).
    ///
    /// No request follows for the next entry's buffer line, for writing,
    /// as [`Io::prefetch_next_free`] makes after a message in several
    /// buffers: in a ping-pong the receiver's empty polls ask for that
    /// line to read ([`crate::Endpoint::recv_ref`]), and the two requests
    /// took it from each other before the engine wrote it. Without it the
    /// `loop` round trip's ratio to the ring in the guest's middle regime
    /// went 1.43 to 1.24x at 256 B and 1.23 to 1.13x at 1 KiB (`loop_rtt`,
    /// 60 alternated pairs, 2026-12-03), as the ring peer's sender, which
    /// asks for nothing, had shown at 256 B.
    #[inline(always)]
    fn take_buffer_now(&mut self) -> Option<u32> {
        if let Some(b) = self.spare.pop() {
            return Some(b);
        }
        loop {
            let entry = self.free.peek();
            if let Ok(Some(_)) = entry {
                // Given back to the application at the next `publish`.
                self.free.take();
                self.unpublished = true;
            }
            match entry {
                Ok(Some(off)) if self.layout.is_buffer(off) => return Some(off),
                Ok(Some(_)) => bump(&self.stats.free_invalid),
                Ok(None) => return None,
                Err(_) => {
                    bump_shared(&self.stats.queue_corrupt);
                    return None;
                }
            }
        }
    }

    /// What a push onto the receive queue came to: counted as delivered,
    /// or refused as a full queue (counted as corrupt if the queue's
    /// indices were).
    #[inline]
    fn rx_pushed(&mut self, pushed: Result<bool, Corrupt>) -> Result<(), HostError> {
        match pushed {
            Ok(true) => {
                self.unpublished = true;
                bump(&self.stats.rx_delivered);
                Ok(())
            }
            Ok(false) => Err(HostError::RxQueueFull),
            Err(_) => {
                bump_shared(&self.stats.queue_corrupt);
                Err(HostError::RxQueueFull)
            }
        }
    }

    /// [`Io::push_rx_with`] of an inline descriptor for `payload` (at most
    /// [`INLINE_MAX`] bytes) on `chan`, written in place in its slot: the
    /// message is copied once, from the frame or the sender's buffer area
    /// straight into the receive queue, not into a descriptor built in
    /// private memory and then copied into the slot whole.
    #[inline(always)]
    pub(super) fn push_rx_inline(
        &mut self,
        chan: u16,
        payload: &Payload<'_>,
    ) -> Result<(), HostError> {
        let len = payload.len();
        // Written without a closure around the slot's write (as
        // `push_rx_with` would take): the compiler kept that closure a call
        // with a frame of its own, 54 instructions per message.
        let pushed = match self.rx.next_slot() {
            Ok(Some(i)) => {
                // A payload all in one piece (a message sent in this
                // process from the caller's memory, the short path) with
                // a closure of one copy. Both closures stay calls (the
                // one-piece copy 17 instructions with its frame at 40 B):
                // forced inline, the one-piece copy's second 32 bytes
                // became a `memcpy` call and path-40 went 360 to 368
                // (wip-upath's section of docs/benchmarks.md).
                let q = self.rx.mem();
                if payload.tail.is_none() {
                    q.write_rx_inline(i, chan, len, |dst| {
                        crate::shm::copy_small(dst, payload.head)
                    });
                } else {
                    q.write_rx_inline(i, chan, len, |dst| {
                        payload.copy_to(0, dst, crate::shm::copy_small)
                    });
                }
                self.rx.filled();
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(e),
        };
        self.rx_pushed(pushed)
    }

    /// Pushes onto the receive queue a descriptor that `write` writes in
    /// place in slot `i` of the queue `q` (unpublished until
    /// [`Io::publish`]), counting it as [`Io::rx_pushed`] says.
    #[inline]
    fn push_rx_with(&mut self, write: impl FnOnce(&RxQueue, u32)) -> Result<(), HostError> {
        let pushed = self.rx.push_unpublished_with(write);
        self.rx_pushed(pushed)
    }

    /// The standard U-Net receive of `payload` on `chan`.
    #[inline]
    pub(super) fn deliver_default(&mut self, chan: u16, payload: &Payload<'_>) {
        let len = payload.len();
        if len <= INLINE_MAX {
            if self.push_rx_inline(chan, payload).is_err() {
                bump(&self.stats.rx_queue_full);
            }
            return;
        }
        let bs = self.layout.config.buffer_size as usize;
        if len <= bs {
            return self.deliver_one_buffer(chan, payload, len);
        }
        let n = len.div_ceil(bs);
        if n > RX_BUFFERS_MAX {
            bump(&self.stats.rx_too_long);
            return;
        }
        let mut offs = [0u32; RX_BUFFERS_MAX];
        for i in 0..n {
            match self.take_buffer() {
                Some(b) => offs[i] = b,
                None => {
                    self.spare.extend_from_slice(&offs[..i]);
                    bump(&self.stats.rx_no_buffer);
                    return;
                }
            }
        }
        for (i, &off) in offs[..n].iter().enumerate() {
            let (start, end) = (i * bs, ((i + 1) * bs).min(len));
            let mut at = self.layout.area + off as usize;
            payload.pieces(start, end, |p| {
                self.seg.write_bytes(at, p);
                at += p.len();
            });
        }
        let offs = &offs[..n];
        if self
            .push_rx_with(|q, i| q.write_rx_buffers(i, chan, len as u32, offs))
            .is_err()
        {
            self.spare.extend_from_slice(offs);
            bump(&self.stats.rx_queue_full);
        }
        self.prefetch_next_free();
    }

    /// [`Io::deliver_default`] of a `len`-byte payload (`len` is
    /// `payload.len()`, and `INLINE_MAX < len <= buffer_size`: the
    /// caller's tests) in one buffer, the common case above `INLINE_MAX`:
    /// no array of offsets to fill and walk, one address, the payload's
    /// head and tail copied in turn. Always inlined, and so are the
    /// buffer's take and the descriptor's write (no closure): the
    /// engine's delivery of a message sent in this process takes it
    /// without a call, where the compiler had left these three calls in
    /// it (95 instructions per message with their frames).
    #[inline(always)]
    pub(super) fn deliver_one_buffer(&mut self, chan: u16, payload: &Payload<'_>, len: usize) {
        debug_assert!(len == payload.len() && len <= self.layout.config.buffer_size as usize);
        let Some(off) = self.take_buffer_now() else {
            bump(&self.stats.rx_no_buffer);
            return;
        };
        let at = self.layout.area + off as usize;
        self.seg.write_bytes(at, payload.head);
        if let Some(t) = payload.tail {
            let at = at + payload.head.len();
            t.seg
                .with_bytes(t.at, t.len, |b| self.seg.write_bytes(at, b));
        }
        let pushed = match self.rx.next_slot() {
            Ok(Some(i)) => {
                self.rx.mem().write_rx_one_buffer(i, chan, len as u32, off);
                self.rx.filled();
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(e),
        };
        if self.rx_pushed(pushed).is_err() {
            self.spare.push(off);
            bump(&self.stats.rx_queue_full);
        }
    }

    /// Takes the next message's buffer for writing now: its first store
    /// then does not wait for the receiver's old copy of the line to go,
    /// and the stores that publish it with it. Only an entry already seen
    /// (no read of the application's index for it). Not checked as a
    /// buffer: whatever the entry holds, the line asked for is inside the
    /// segment (`prefetch` asks for none otherwise) and only a hint, and
    /// an entry that is not a buffer is counted and skipped when taken.
    #[inline(always)]
    fn prefetch_next_free(&mut self) {
        if self.spare.is_empty()
            && let Some(next) = self.free.peek_seen()
        {
            #[cfg(test)]
            tests::NEXT_FREE_FETCHED.with(|f| f.set(Some(next)));
            self.seg.prefetch(self.layout.area + next as usize, true);
        }
    }

    /// The push budgets' checks of a `len`-byte message (frames, then
    /// bytes, each an overrun), and the message counted against them:
    /// the first steps of [`Io::transmit`] and [`Io::transmit_tail`] alike.
    /// The counts are the lent words' (`words.tail`), which the inline
    /// tail push counts too ([`jive::InlineForm::TailPush`]), against the
    /// budgets they were made with ([`Invocation::new`]).
    #[inline(always)]
    fn admit(&mut self, len: usize) -> Result<(), HostError> {
        let t = &self.inv.words.tail;
        if t.frames >= t.max_frames {
            return Err(self.over(
                "frames pushed per invocation",
                self.budgets.push_frames as u64,
            ));
        }
        if t.bytes + len as u64 > t.max_bytes {
            return Err(self.over(
                "bytes pushed per invocation",
                self.budgets.push_bytes as u64,
            ));
        }
        let t = &mut self.inv.words.tail;
        t.frames += 1;
        t.bytes += len as u64;
        Ok(())
    }

    /// Lends the inline tail push ([`jive::InlineForm::TailPush`]) channel
    /// `chan` for the invocation about to run, while [`Io::defer`] holds
    /// ([`applet_tx`]). `chan` is a checked descriptor's: an open channel
    /// of this endpoint and not closed, the checks of
    /// [`Framer::check_message`] the form does not make, found so on the
    /// transmit side's framer by [`applet_tx`]'s caller under the
    /// transmit side's lock, held since. This side's framer has the same
    /// channels in the same state ([`Framer::channels`]: both change
    /// together, under both sides' locks), so the checks hold here too,
    /// and until [`Io::take_tail`]: not looked up again (until
    /// 2026-12-02 they were: 8 instructions a message of `unet-count
    /// standard-40`).
    #[inline(always)]
    pub(super) fn lend_tail(&mut self, chan: u16) {
        debug_assert!(
            matches!(self.framer.channels.get(usize::from(chan)), Some(Some(c)) if !c.closed()),
            "a lent channel is open and not closed on both sides"
        );
        self.inv.words.tail.chan = u64::from(chan);
    }

    /// Lends the inline tail push ([`jive::InlineForm::TailPush`]) channel
    /// `chan` for the invocation about to run, with the receive side's
    /// outbox's free bytes for its frame ([`jive::FrameWords`]), where its
    /// push would write a frame at once ([`applet_tx`] outside the
    /// deferring window): only if `chan` is an open channel of this
    /// endpoint, not closed, and without a UDP checksum (the form writes
    /// none), the checks of [`Framer::push_message`] the form does not
    /// make. The channels change only under this side's lock, which the
    /// invocation holds, so the checks hold until [`Io::take_frame`]; a
    /// native push in the invocation ends the lending after its own frame
    /// ([`Io::transmit`]). Lends nothing, not even the channel,
    /// while the outbox has no room for a header (a cold one: the push's
    /// native grows it).
    #[inline(always)]
    pub(super) fn lend_frame(&mut self, chan: u16) {
        let Some(Some(c)) = self.framer.channels.get(usize::from(chan)) else {
            return;
        };
        if c.closed() || c.checksum() {
            return;
        }
        let (template, sum) = (&c.template as *const [u8; HEADER_LEN], c.length_sum);
        let (at, room) = self.framer.out.free_room();
        // SAFETY: `at` is the outbox's free bytes, `room` of them
        // (`Outbox::free_room`), valid until its vector grows, is dropped
        // or changes places, none of which happens before
        // [`Io::take_frame`] but in a native's push ([`Io::transmit`]),
        // which ends the lending after it (no other native writes the
        // outbox, and the invocation holds this side, so nothing else
        // reaches it); no reference to those bytes is used while they are
        // lent but the push's own, after which they are lent no more. `template` is
        // the channel's header, `HEADER_LEN` (`jive::FRAME_HEADER`) bytes,
        // valid and unchanged while the channels are (under this side's
        // lock, held), only ever read.
        unsafe { self.inv.words.frame.lend(at, room, template, sum) };
        // The channel only with a frame's room: a channel lent without one
        // is a deferring one, whose message only `take_tail` would send.
        let w = &mut self.inv.words;
        w.tail.chan = if w.frame.is_lent() {
            u64::from(chan)
        } else {
            jive::TailWords::NO_CHANNEL
        };
    }

    /// Ends the lending of [`Io::lend_frame`] (of channel `chan`): the
    /// frame the inline tail push wrote, if it did, checked and counted
    /// against the budgets at the call, becomes the outbox's next frame
    /// and is counted now in the port's `tx_frames` (in `tx_applet`, which
    /// only the receive lock's holder writes: this `Io`'s). As
    /// [`Framer::push_message`] counts it at the call: nothing is sent or
    /// delivered between the two, since the call is at a tail site and the
    /// engine holds the applet, so the count is never behind a delivery; a
    /// thread reading the counters during `doTx` may see it a moment
    /// later. No channel or room stays lent.
    #[inline(always)]
    pub(super) fn take_frame(&mut self, chan: u16) {
        let w = &mut self.inv.words;
        w.tail.chan = jive::TailWords::NO_CHANNEL;
        let n = w.frame.take();
        if n != 0 {
            #[cfg(test)]
            {
                self.inline_frames += 1;
            }
            self.framer.out.commit(n, sent_on(self.framer.id, chan));
            bump(&self.stats.tx_applet);
        }
    }

    /// Ends the lending of [`Io::lend_frame`] after a native's push wrote a
    /// frame where the lent room began ([`Io::transmit`]; the outbox may
    /// have grown, moving its bytes): no room and no channel lent for the
    /// rest of the invocation, so that its tail push, if any, is the
    /// native's. Lending the room again instead cost every native push on
    /// an eager channel about 40 instructions (review22b, `Burst25PerTx`),
    /// where this costs two stores once, and lends no address that a push
    /// has just moved.
    #[inline(always)]
    fn unlend_frame(&mut self) {
        let w = &mut self.inv.words;
        let wrote = w.frame.take();
        debug_assert_eq!(wrote, 0, "no frame written before the tail push");
        w.tail.chan = jive::TailWords::NO_CHANNEL;
    }

    /// Ends the lending of [`Io::lend_tail`] (of channel `chan`): the
    /// message the inline tail push deferred, if it did, checked and
    /// counted against the budgets at the call, counted now in the port's
    /// `tx_frames` (in `tx_applet`, as [`Io::transmit_tail`] counts it at
    /// the call: nothing is sent or delivered between the two, since the
    /// call is at a tail site and the engine holds the applet, so the count
    /// is never behind a delivery; a thread reading the counters during
    /// `doTx` may see it a moment later), and no channel lent.
    #[inline(always)]
    pub(super) fn take_tail(&mut self, chan: u16) -> Option<Deferred> {
        let t = &mut self.inv.words.tail;
        t.chan = jive::TailWords::NO_CHANNEL;
        let (array, off, len) = t.take()?;
        #[cfg(test)]
        {
            self.inline_tails += 1;
        }
        bump(&self.stats.tx_applet);
        Some(Deferred {
            array,
            off,
            len,
            chan,
        })
    }
}

impl NativeHost for Io {
    fn buffer_size(&self) -> u32 {
        self.layout.config.buffer_size
    }

    fn area_len(&self) -> u32 {
        self.layout.area_len as u32
    }

    fn read_area(&self, off: u32, dst: &mut [i8]) {
        let at = self.layout.area + off as usize;
        self.seg
            .with_bytes(at, dst.len(), |src| natives::u8_to_i8(dst, src));
    }

    fn write_area(&mut self, off: u32, src: &[i8]) {
        let at = self.layout.area + off as usize;
        self.seg
            .with_bytes_mut(at, src.len(), |dst| natives::i8_to_u8(dst, src));
    }

    fn area_held(&self) -> core::ops::Range<u32> {
        self.held.clone()
    }

    /// The inline `getFreeBuffer`'s entries are taken back first and the
    /// ready ones lent again after, so that the two kinds of pop read one
    /// queue in order (and an entry the inline form left, being invalid,
    /// is skipped and counted here). Reached where the lent run is spent
    /// (or an entry in it invalid): the native's own pop reads the
    /// producer's index again when the entries it saw are taken, and the
    /// run lent after it holds those it sees then.
    fn pop_free(&mut self) -> Option<u32> {
        let lent = self.free_lent;
        if lent {
            self.take_free();
        }
        let b = self.take_buffer();
        if lent {
            self.lend_free();
        }
        b
    }

    /// A full receive queue drops the message, as it does without an
    /// applet: counted, and its buffers kept for the next message (they are
    /// not lost to the application). The applet is not told (the natives
    /// are `void`, as in the paper).
    ///
    /// The descriptor is written in place in the queue's slot, as the
    /// standard delivery writes it (`Io::push_rx_inline`), not built in
    /// private memory and copied into the slot whole. Inlined into the
    /// natives that push (their fast forms' entries saved its call's 13
    /// instructions of register saves and restores).
    ///
    /// The inline pushes' slots are taken back first and the free run
    /// lent again after, so that the two kinds of push write one queue in
    /// order.
    #[inline(always)]
    fn push_rx(&mut self, chan: u16, len: u32, body: RxBody<'_>) -> Result<(), HostError> {
        let lent = self.ring_lent;
        if lent {
            self.take_rx();
        }
        let pushed = match body {
            // At most `INLINE_MAX` bytes: a few moves, not a `memcpy` call
            // (16 instructions for an empty payload).
            RxBody::Inline(p) => self.push_rx_with(|q, i| {
                q.write_rx_inline(i, chan, p.len(), |dst| crate::shm::copy_small(dst, p));
            }),
            RxBody::Buffers(o) => self.push_rx_with(|q, i| q.write_rx_buffers(i, chan, len, o)),
        };
        if pushed.is_err() {
            bump(&self.stats.rx_queue_full);
            if let RxBody::Buffers(o) = body {
                self.spare.extend_from_slice(o);
                // Spare buffers come before the free queue's: none lent.
                if self.free_lent {
                    self.take_free();
                    self.lend_free();
                }
            }
        }
        if lent {
            self.lend_rx();
        }
        Ok(())
    }

    /// Counts a native call moving `bytes` against the invocation's time
    /// budget, reading the clock only every `TIME_CHECK_EVERY` units. The
    /// count is inlined into every native; the reading is not.
    #[inline]
    fn charge(&mut self, bytes: usize) -> Result<(), HostError> {
        let w = &mut self.inv.words;
        w.work += work_units(bytes);
        if w.work < w.bound {
            return Ok(());
        }
        self.check_time()
    }

    /// [`Io::charge`] without the clock: counts the call unless the count
    /// reaches the next clock reading, where it counts nothing and the
    /// native's ordinary form charges (and reads the clock).
    #[inline]
    fn try_charge(&mut self, bytes: usize) -> bool {
        let w = &mut self.inv.words;
        let work = w.work + work_units(bytes);
        if work >= w.bound {
            return false;
        }
        w.work = work;
        true
    }

    /// The invocation's work count, its clock bound and the buffer size
    /// (`Invocation::words`), which the inline natives use as
    /// [`Io::charge`] and [`Io::try_charge`] do.
    #[inline]
    fn words(&mut self) -> Option<&mut jive::HostWords> {
        Some(&mut self.inv.words)
    }

    /// Always inlined, with the frame it writes
    /// (`Framer::push_message`), into `txPush`'s fast entry, so that the
    /// whole call saves its registers once and returns no result through
    /// memory.
    #[inline(always)]
    fn transmit(&mut self, chan: u16, payload: &[i8]) -> Result<(), HostError> {
        self.admit(payload.len())?;
        self.framer.push_message(chan, payload)?;
        // The frame went where a frame's room lent to the inline tail push
        // begins (and the outbox may have grown): lend it no more.
        if self.inv.words.frame.is_lent() {
            self.unlend_frame();
        }
        Ok(())
    }

    /// [`Io::transmit`] at a tail site: while `Io::defer` allows it,
    /// every check and count of [`Io::transmit`] in its order (the
    /// budgets, then the channel and the length, then `tx_frames`), and
    /// the message recorded instead of copied into a frame
    /// (`Io::deferred`); else [`Io::transmit`].
    #[inline(always)]
    fn transmit_tail(
        &mut self,
        chan: u16,
        payload: &[i8],
        at: impl FnOnce() -> (i32, u32),
    ) -> Result<(), HostError> {
        if !self.defer {
            return self.transmit(chan, payload);
        }
        self.admit(payload.len())?;
        self.framer.check_message(chan, payload.len())?;
        bump(&self.stats.tx_applet);
        self.defer = false;
        self.inv.words.tail.chan = jive::TailWords::NO_CHANNEL;
        let (array, off) = at();
        self.deferred = Some(Deferred {
            array,
            off,
            len: payload.len() as u32,
            chan,
        });
        Ok(())
    }

    fn max_message(&self) -> u32 {
        self.framer.max_message
    }
}

/// Copies `payload` into the applet's `RxBuf`, replacing the array with a
/// larger one if it is too short (or was set to null by the applet).
///
/// The payload is taken by reference and its two shapes are told apart
/// before the array's length is checked, so that the common one (all in
/// the frame) is checked once against the array and copied by
/// [`copy_payload`] (a call in the release build: forced inline, the
/// framed receive's register allocation made `dorx` 8 instructions longer),
/// with no copy of the `Payload` itself. Always inlined into the receive
/// path, as `invoke` is, so that the call saves no registers of its own.
///
/// The array is found through the field's view where it is current
/// ([`jive::Applet::static_bytes_if_viewed`]: its two compares), and
/// otherwise out of line ([`fill_rxbuf_looked_up`]), so that the common
/// way tests no `Option` of a look-up's result.
#[inline(always)]
pub(super) fn fill_rxbuf(
    applet: &mut jive::Applet,
    rxbuf: &mut jive::StaticBytes,
    payload: &Payload<'_>,
) -> bool {
    if let Some(buf) = applet.static_bytes_if_viewed(rxbuf) {
        if copy_payload(buf, payload) {
            return true;
        }
        return refill_rxbuf(applet, rxbuf, payload);
    }
    fill_rxbuf_looked_up(applet, rxbuf, payload)
}

/// [`fill_rxbuf`] where the field's view is not current (the applet
/// stored another array or null, or the heap freed an object since): the
/// array looked up, and the view filled again.
#[inline(never)]
fn fill_rxbuf_looked_up(
    applet: &mut jive::Applet,
    rxbuf: &mut jive::StaticBytes,
    payload: &Payload<'_>,
) -> bool {
    if let Some(buf) = applet.static_bytes_mut(rxbuf)
        && copy_payload(buf, payload)
    {
        return true;
    }
    refill_rxbuf(applet, rxbuf, payload)
}

/// [`fill_rxbuf`] when `RxBuf` is too short or null: a new array first.
#[cold]
#[inline(never)]
fn refill_rxbuf(
    applet: &mut jive::Applet,
    rxbuf: &mut jive::StaticBytes,
    payload: &Payload<'_>,
) -> bool {
    if applet
        .set_static_array("RxBuf", &vec![0; payload.len()])
        .is_err()
    {
        return false;
    }
    match applet.static_bytes_mut(rxbuf) {
        Some(buf) => copy_payload(buf, payload),
        None => false,
    }
}

/// The units of work a native call that moves `bytes` charges against the
/// invocation's budget: one, and one more per 4 KiB. [`Io::charge`] and
/// its clockless form [`Io::try_charge`] (a native's fast form) charge the
/// same.
#[inline(always)]
fn work_units(bytes: usize) -> u64 {
    1 + (bytes as u64 >> 12)
}

/// Copies `payload` to the start of `buf` if `buf` is at least as long
/// (`false` if not): the bytes reinterpreted as `i8` in place
/// (`bytemuck`, the same bits) and moved by [`crate::shm::copy_small`], so
/// that a message that fits a receive descriptor is a few vector moves
/// instead of a `memcpy` call. A payload all in the frame (the common
/// case) is copied here; one with a rest in a segment out of line.
#[inline]
fn copy_payload(buf: &mut [i8], payload: &Payload<'_>) -> bool {
    let buf: &mut [u8] = bytemuck::cast_slice_mut(buf);
    if payload.tail.is_none() {
        let Some(dst) = buf.get_mut(..payload.head.len()) else {
            return false;
        };
        crate::shm::copy_small(dst, payload.head);
        return true;
    }
    copy_pieces(buf, payload)
}

/// [`copy_payload`] of a payload with a rest outside the frame.
#[inline(never)]
fn copy_pieces(buf: &mut [u8], payload: &Payload<'_>) -> bool {
    if buf.len() < payload.len() {
        return false;
    }
    let mut k = 0;
    payload.pieces(0, payload.len(), |p| {
        crate::shm::copy_small(&mut buf[k..k + p.len()], p);
        k += p.len();
    });
    true
}

/// What an invocation came to, as the engine acts on it: the method
/// returned and its message goes on, it returned a negative value (the
/// applet refuses the message: counted as a drop), or it trapped (counted
/// by [`applet_trapped`]). An invocation that overran a budget but
/// returned is `Done` or `Refused` by its value, as any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Done,
    Refused,
    Trapped,
}

impl Outcome {
    /// The outcome of an invocation that returned `c`
    /// ([`jive::Called::is_ok`]), by its value.
    #[inline(always)]
    fn of_returned(c: jive::Called) -> Outcome {
        if c.value().is_some_and(|v| v < 0) {
            Outcome::Refused
        } else {
            Outcome::Done
        }
    }
}

/// Runs `doTx` of the applet in `rx` for the message of descriptor `d`,
/// in the form the applet declares ([`DoTx`]: the copied form with
/// `(length, channel, off)`, the lent one with the message lent where it
/// lies in the area, [`run_tx_lent`]), under the invocation budgets;
/// `None`: no applet. Returns the outcome and how long the invocation
/// took, measured only when `timed` (a thread shared by every endpoint,
/// which spends [`Budgets::round_time`] per endpoint; otherwise zero: the
/// application's own thread spends its own time, and two clock reads
/// would be a good part of a small applet's cost). An invocation that
/// overran a budget (out of fuel, out of time, or pushing past its frames
/// or bytes) is counted and sets the endpoint aside
/// ([`Budgets::throttle`]); the caller counts the trap. The outcome is
/// all the engine needs ([`Outcome`]), so that the trap's description is
/// dropped here, on the rare path, instead of travelling with every
/// invocation's result.
///
/// Always inlined into [`applet_tx_inlined`], so that the outcome and the
/// time travel in registers into its match instead of through a returned
/// tuple in memory.
#[inline(always)]
fn invoke_tx(
    rx: &mut RxSide,
    port: &Port,
    msg: impl TxMsg,
    timed: bool,
) -> Option<(Outcome, Duration)> {
    let l = rx.applet.as_mut()?;
    match msg.run(l, &mut rx.io, timed) {
        Some(ran) => Some(settle(rx, port, ran)),
        // Not lent (see `TxMsg::run`): not run, the message dropped as
        // one the applet refused.
        None => Some((Outcome::Refused, Duration::ZERO)),
    }
}

/// The message a `doTx` runs on ([`applet_tx_inlined`]): a descriptor's,
/// in the endpoint's buffer area ([`TxDesc`]: the transmit queue's, and
/// [`crate::Endpoint::send_with`]'s and `send`'s when the message was
/// copied there), or the sending application's own bytes
/// ([`CallerMsg`]: `send` to a lent `doTx`). Each compiles its own
/// instance of the path, with no test of which it is.
pub(super) trait TxMsg: Copy {
    /// Its channel.
    fn chan(self) -> u16;
    /// Its length (at most the largest message, which its callers check).
    fn len(self) -> u32;
    /// Whether [`Engine::send_applet_msg`] may hand it to `doTx` directly
    /// (beyond the channel's and the length's tests, made there): its
    /// bytes are where this form of `doTx` may read them.
    fn takes(self, port: &Port) -> bool;
    /// Sent as standard U-Net, the applet removed since its flag was read.
    fn transmit_plain(self, framer: &mut Framer, port: &Port) -> Result<(), HostError>;
    /// `doTx` of `l` on it, under `io`'s accounting; `None` where it did
    /// not run.
    fn run(self, l: &mut Loaded, io: &mut Io, timed: bool) -> Option<Ran>;
    /// Sends the message a lent `doTx` deferred (`m.array` is
    /// `jive::LENT`: a range of this message), as
    /// [`Engine::resolve_deferred`]; `false` where it is not in the
    /// message (never: the push checked it), as for bytes that are gone.
    fn resolve_lent(
        self,
        engine: &Engine,
        tx: &mut TxSide,
        rx: &mut RxSide,
        port: &Port,
        m: &Deferred,
        me: Me,
    ) -> bool;
}

impl TxMsg for TxDesc {
    #[inline(always)]
    fn chan(self) -> u16 {
        self.chan
    }

    #[inline(always)]
    fn len(self) -> u32 {
        self.len
    }

    #[inline(always)]
    fn takes(self, port: &Port) -> bool {
        port.layout.in_area(self.offset, self.len)
    }

    #[inline(always)]
    fn transmit_plain(self, framer: &mut Framer, port: &Port) -> Result<(), HostError> {
        framer.transmit_from(
            &port.seg,
            port.layout.area + self.offset as usize,
            self.chan,
            self.len,
        )
    }

    #[inline(always)]
    fn run(self, l: &mut Loaded, io: &mut Io, timed: bool) -> Option<Ran> {
        match &mut l.do_tx {
            DoTx::Copied(m) => {
                let args = [self.len as i32, i32::from(self.chan), self.offset as i32];
                Some(run_on::<3, true>(&mut l.applet, m, io, args, timed))
            }
            DoTx::Lent(m) => run_tx_lent(&mut l.applet, m, io, self, timed),
        }
    }

    /// Rebased onto `port`'s buffer area ([`Deferred::in_area`]) and sent
    /// from there ([`Src::Area`]). Its own instance of
    /// [`Engine::resolve_deferred`], so that the copied form's is compiled
    /// as it was; inlined into [`applet_tx_inlined`] (out of line, its
    /// call and saves cost the lent form 20 instructions a message, and
    /// inlined changed the copied form's count by 1). The rebase here
    /// rather than in `resolve_deferred` itself: folded into it, the copied
    /// form's `standard-40` counted 10 more a message.
    #[inline(always)]
    fn resolve_lent(
        self,
        engine: &Engine,
        tx: &mut TxSide,
        rx: &mut RxSide,
        port: &Port,
        m: &Deferred,
        me: Me,
    ) -> bool {
        match m.in_area(&rx.io) {
            Some(m) => engine.resolve_deferred(tx, rx, port, m, Src::Area, me),
            None => false,
        }
    }
}

/// A message in the sending application's own memory, for an applet
/// whose `doTx` is lent ([`crate::Endpoint::send`], through
/// [`Engine::send_applet_bytes`]): lent to `doTx` where it lies, not
/// first copied into the transmit region, and the message `doTx` defers
/// read from there too ([`Src::Caller`]). Never in the endpoint's own
/// segment, which its natives write ([`TxMsg::takes`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct CallerMsg<'m> {
    pub(super) chan: u16,
    pub(super) bytes: &'m [u8],
}

impl TxMsg for CallerMsg<'_> {
    #[inline(always)]
    fn chan(self) -> u16 {
        self.chan
    }

    #[inline(always)]
    fn len(self) -> u32 {
        // At most the largest message (the caller's test), below 2^32.
        self.bytes.len() as u32
    }

    #[inline(always)]
    fn takes(self, port: &Port) -> bool {
        // The form is read under the transmit lock, which the caller
        // holds and `Engine::set_applet` takes to change the applet: it
        // stays lent until the invocation, or the applet goes (closing).
        port.lends_tx.load(Ordering::Relaxed)
            && u32::try_from(self.bytes.len()).is_ok()
            && !in_segment(&port.seg, self.bytes)
    }

    #[inline(always)]
    fn transmit_plain(self, framer: &mut Framer, _port: &Port) -> Result<(), HostError> {
        framer.push_message(self.chan, bytemuck::cast_slice(self.bytes))
    }

    #[inline(always)]
    fn run(self, l: &mut Loaded, io: &mut Io, timed: bool) -> Option<Ran> {
        match &mut l.do_tx {
            DoTx::Lent(m) => run_tx_caller(&mut l.applet, m, io, self, timed),
            // Never: `takes` found the form lent under the transmit lock,
            // and only `Engine::set_applet`, which takes that lock, changes
            // it. Not run, dropped and counted as the applet's refusal.
            DoTx::Copied(_) => {
                debug_assert!(false, "a caller's message for a copied doTx");
                None
            }
        }
    }

    #[inline(always)]
    fn resolve_lent(
        self,
        engine: &Engine,
        tx: &mut TxSide,
        rx: &mut RxSide,
        port: &Port,
        m: &Deferred,
        me: Me,
    ) -> bool {
        // The push checked the range against the lent array, this message.
        u64::from(m.off) + u64::from(m.len) <= self.bytes.len() as u64
            && engine.resolve_deferred(tx, rx, port, *m, Src::Caller(self.bytes), me)
    }
}

/// Whether `bytes` start in `seg` (its buffer area and queues, which its
/// applet's natives write): a message there is copied before it is lent.
#[inline(always)]
pub(super) fn in_segment(seg: &Segment, bytes: &[u8]) -> bool {
    let base = seg.as_ptr().as_ptr() as usize;
    (bytes.as_ptr() as usize).wrapping_sub(base) < seg.len()
}

/// `doTx`'s lent form ([`DoTx::Lent`]) on the message of descriptor `d`:
/// its `d.len` bytes at `d.offset` in the buffer area lent to the
/// invocation as `doTx`'s `byte[] msg`, where they lie, with no copy.
///
/// The bytes are this endpoint's own segment, which its natives write, so
/// for the invocation they are held from every native that writes the
/// area: `doLtoHDMA` refuses a range over them with a trap
/// ([`Io::held`], [`NativeHost::area_held`]), and the inline copies are
/// withheld the area ([`jive::AreaWords::withhold`]), so that each copy
/// runs as its native (a `doTx` written to the lent form reads its message
/// where it is, and copies nothing; the natives' cost is paid only by one
/// that does). The other natives write the queues, not the area. The
/// application may write the bytes meanwhile (another process's memory):
/// the applet reads them as plain bytes, as the engine does a message it
/// sends without an applet.
///
/// `None` where the descriptor is not in the area (its callers checked
/// that it is) or jive refuses the lend ([`jive::LendError`]: one active
/// already, which the engine never leaves; more bytes than a `byte[]`
/// holds, which `max_message` excludes): nothing ran.
#[inline(always)]
pub(super) fn run_tx_lent(
    applet: &mut jive::Applet,
    m: &mut LentMethod,
    io: &mut Io,
    d: TxDesc,
    timed: bool,
) -> Option<Ran> {
    if !io.layout.in_area(d.offset, d.len) {
        return None;
    }
    // SAFETY: the offset stays in the segment's mapping, the allocation
    // `io.seg` maps (made `io.layout.total` bytes long, where the buffer
    // area ends), because `[d.offset, d.offset + d.len)` lies in the area
    // (checked above); so the address is in the mapping, and not null.
    let data = unsafe { io.seg.as_ptr().add(io.layout.area + d.offset as usize) };
    // SAFETY: `data` is `d.len` bytes of this endpoint's buffer area (the
    // descriptor lies in it, checked above), in its segment's mapping,
    // which `io.seg` keeps alive past the lend, which ends when `lend` is
    // dropped, at this function's end. No Rust reference writes them
    // meanwhile: the engine holds this endpoint's locks, nothing runs
    // before the invocation, and during it its natives write the area only
    // through `write_area`, which `doLtoHDMA` calls only for a range clear
    // of `io.held` (checked before), and the inline copies are withheld the
    // area; the other natives write the queues and the applet's heap.
    // Another process may write the bytes: the applet and its natives read
    // them as plain bytes.
    let mut lend = unsafe { applet.lend_nonnull(data, d.len as usize) }.ok()?;
    let start = timed.then(Instant::now);
    let lent = io.begin();
    io.held = d.offset..d.offset + d.len;
    io.tx_lent = io.held.clone();
    io.inv.words.area.withhold();
    // The first argument is the lend's (`Lend` puts the lent handle there).
    let args = [0, d.len as i32, i32::from(d.chan)];
    let c = lend.run_prepared_lent_inlined::<Lender, 3, LENT_MSG>(m, args, io);
    io.inv.words.area.restore();
    io.held = 0..0;
    io.end(lent);
    Some(Ran {
        c,
        took: start.map_or(Duration::ZERO, |s| s.elapsed()),
        timed: start.is_some(),
    })
}

/// `doTx`'s lent form on a message in the sending application's own
/// memory ([`CallerMsg`]), lent where it lies: as [`run_tx_lent`], but
/// with nothing of the buffer area held from the natives (the bytes are
/// not in the endpoint's segment, [`TxMsg::takes`]). `None` where jive
/// refuses the lend (one active already, which the engine never leaves;
/// more bytes than a `byte[]` holds, which `max_message` excludes).
#[inline(always)]
fn run_tx_caller(
    applet: &mut jive::Applet,
    m: &mut LentMethod,
    io: &mut Io,
    msg: CallerMsg<'_>,
    timed: bool,
) -> Option<Ran> {
    // SAFETY: `msg.bytes` is a shared borrow that outlives the lend, which
    // ends when `lend` is dropped, at this function's end: the bytes are
    // readable for their length until then, and the borrow keeps any Rust
    // reference from writing them. The invocation's natives write this
    // endpoint's segment (its buffer area and queues) and the applet's
    // heap, and the bytes are in neither (`TxMsg::takes` found them outside
    // the segment; the heap is the applet's own). They may lie in memory
    // another process writes (another segment): the applet and its natives
    // read them as plain bytes.
    let mut lend = unsafe { applet.lend_slice(msg.bytes) }.ok()?;
    let start = timed.then(Instant::now);
    let lent = io.begin();
    // The first argument is the lend's (`Lend` puts the lent handle there).
    let args = [0, msg.len() as i32, i32::from(msg.chan)];
    let c = lend.run_prepared_lent_inlined::<Lender, 3, LENT_MSG>(m, args, io);
    io.end(lent);
    Some(Ran {
        c,
        took: start.map_or(Duration::ZERO, |s| s.elapsed()),
        timed: start.is_some(),
    })
}

/// The lender of words an applet's `doTx` and `doRx` are prepared for
/// (`jive::Applet::prepare_lent`): the engine's natives lend `Io`'s.
pub(super) type Lender = crate::natives::Words<Io>;

/// The parameter of the lent `doRx` and `doTx` that is their message
/// (`applets::LENT_DO_RX`, `applets::LENT_DO_TX`: the first of both).
const LENT_MSG: usize = crate::applets::LENT_DO_RX.param as usize;
const _: () = assert!(crate::applets::LENT_DO_TX.param as usize == LENT_MSG);

/// The lent `doRx` and `doTx` ([`DoRx::Lent`], [`DoTx::Lent`]), prepared
/// with their message's parameter known here when compiled
/// ([`jive::Applet::prepare_lending_lent_at`]): the lent handle goes into
/// that argument with no choice of each argument by the index.
pub(super) type LentMethod = jive::PreparedLending<3, Lender, LENT_MSG>;

/// An invocation run by [`run_on`], for [`settle`].
pub(super) struct Ran {
    c: jive::Called,
    took: Duration,
    timed: bool,
}

/// [`invoke`]'s invocation of `m` of `applet` (the one `io` belongs
/// to), for a caller that holds the applet already (the receive path found
/// it to fill `RxBuf`), so that its presence is not tested again: the
/// invocation under `io`'s accounting ([`Io::begin`], [`Io::end`]) and
/// its time, measured only when `timed`. [`settle`] makes its outcome.
///
/// `INLINED`: the invocation's body inlined here
/// ([`jive::Applet::run_prepared_lent_inlined`]), which spares its call
/// and frame where the caller's function has the registers to spare;
/// `false` where it would make that function spill on its other paths
/// (the direct delivery's, which the path without applet runs).
#[inline(always)]
pub(super) fn run_on<const N: usize, const INLINED: bool>(
    applet: &mut jive::Applet,
    m: &mut jive::Prepared<N, Lender>,
    io: &mut Io,
    args: [i32; N],
    timed: bool,
) -> Ran {
    let start = timed.then(Instant::now);
    let lent = io.begin();
    // The outcome comes back in one register; a failure's error stays in
    // the applet, for `ended_badly`.
    let c = if INLINED {
        applet.run_prepared_lent_inlined::<Lender, N>(m, args, io)
    } else {
        applet.run_prepared_lent::<Lender, N>(m, args, io)
    };
    io.end(lent);
    Ran {
        c,
        took: start.map_or(Duration::ZERO, |s| s.elapsed()),
        timed: start.is_some(),
    }
}

/// `doRx`'s lent form ([`DoRx::Lent`]) on `payload` on channel `chan`,
/// as [`run_on`] runs the copied form: the message lent to the invocation
/// as `doRx`'s `byte[] msg` where it is in one piece (a frame in an outbox
/// or an inbox, the sending application's bytes, the `TxBuf` a sending
/// applet deferred), and otherwise (a rest in a segment: an endpoint's
/// buffer area, shared memory this applet's natives may write) copied
/// into `scratch` first and that lent. `None` where jive refuses the lend
/// ([`jive::LendError`]: one active already, which the engine never
/// leaves; or more bytes than a `byte[]` holds, which `max_message`
/// excludes): the message is dropped as if `doRx` trapped.
#[inline(always)]
pub(super) fn run_lent<const INLINED: bool>(
    applet: &mut jive::Applet,
    m: &mut LentMethod,
    scratch: &mut Vec<u8>,
    io: &mut Io,
    payload: &Payload<'_>,
    chan: u16,
    timed: bool,
) -> Option<Ran> {
    let bytes: &[u8] = if io.lends_in_place(payload) {
        payload.head
    } else {
        gather(scratch, *payload)
    };
    let start = timed.then(Instant::now);
    let lent = io.begin();
    // SAFETY: `bytes` is a shared borrow (of the payload or of `scratch`)
    // that outlives the lend, which ends when `lend` is dropped, inside
    // this `match`: the bytes are readable for their length until then,
    // and the borrow keeps any Rust reference from writing them. The
    // invocation's natives write this endpoint's segment (its buffer area
    // and queues) and the applet's heap, and a lent payload is in neither:
    // one that starts in the segment (an area's rest, or the application's
    // bytes taken from its own area, `Segment::with_bytes`) is copied into
    // `scratch` (a slice lies in one mapping, so its start says where it
    // is; a head that is not the application's, `Payload::app`, is the
    // engine's memory: a frame in an outbox, an inbox or a transport's
    // buffer, none of them a segment); a deferred `TxBuf` is another applet's heap
    // (`Engine::deliver_deferred` never delivers to the sender's own
    // applet). The bytes may change under the applet (another process's
    // memory): it and its natives read them as plain bytes.
    let c = match unsafe { applet.lend_slice(bytes) } {
        Ok(mut lend) => {
            // The first argument is the lend's (`Lend` puts the lent
            // handle there).
            let args = [0, bytes.len() as i32, i32::from(chan)];
            if INLINED {
                lend.run_prepared_lent_inlined::<Lender, 3, LENT_MSG>(m, args, io)
            } else {
                lend.run_prepared_lent::<Lender, 3, LENT_MSG>(m, args, io)
            }
        }
        Err(_) => {
            io.end(lent);
            return None;
        }
    };
    io.end(lent);
    Some(Ran {
        c,
        took: start.map_or(Duration::ZERO, |s| s.elapsed()),
        timed: start.is_some(),
    })
}

impl Io {
    /// Whether [`run_lent`] lends `payload`'s bytes where they are: they
    /// are in one piece (no rest in a segment) and do not start in this
    /// endpoint's own segment. Only the application's bytes can start
    /// there ([`Payload::app`]), so only they are looked for there: a
    /// frame or a deferred `TxBuf` is lent without the test (7
    /// instructions).
    #[inline(always)]
    fn lends_in_place(&self, payload: &Payload<'_>) -> bool {
        payload.tail.is_none() && !(payload.app && self.in_segment(payload.head))
    }

    /// Whether `bytes` start in this endpoint's segment (its buffer area
    /// and queues, which its applet's natives write): [`run_lent`] copies
    /// such a message instead of lending it.
    #[inline(always)]
    fn in_segment(&self, bytes: &[u8]) -> bool {
        in_segment(&self.seg, bytes)
    }
}

/// `payload`'s bytes in one piece in `scratch` (for [`run_lent`]), which
/// keeps its allocation from one message to the next. The payload by
/// value: its copy for the call is made on this way alone, and the lent
/// `doRx`'s way takes no address of the caller's payload (the copied
/// `doRx`'s and the standard receive's ways take their own, see
/// `run_payload`).
#[inline(never)]
fn gather<'a>(scratch: &'a mut Vec<u8>, payload: Payload<'_>) -> &'a [u8] {
    scratch.clear();
    payload.pieces(0, payload.len(), |p| scratch.extend_from_slice(p));
    scratch
}

/// The outcome of an invocation [`run_on`] ran on `rx`'s applet, as
/// [`invoke`] returns it: an invocation that trapped or overran is
/// counted and throttles its endpoint here ([`ended_badly`]).
///
/// The call's result ([`jive::Called`]) is tested as it came back, not
/// through an `Option` of its value: the common invocation returned, did
/// not overrun, and left no negative value, which are two tests and two
/// branches not taken (the value's register screens out a failure too).
/// The register a `void` method's value would be in holds whatever the
/// code left there, so a negative one is looked at again out of line
/// ([`settle_rest`], [`refused_or_done`]): rare for the methods that
/// return a value, and for `void` ones only a detour.
#[inline(always)]
pub(super) fn settle(rx: &mut RxSide, port: &Port, ran: Ran) -> (Outcome, Duration) {
    let c = ran.c;
    // One test of the value's register screens out both a failure and a
    // negative value ([`jive::Called::returned_non_negative`]), so the
    // kind is tested only on the rare way ([`settle_rest`]).
    let outcome = if c.returned_non_negative() && !rx.io.inv.overran {
        rx.overruns_in_row = 0;
        Outcome::Done
    } else {
        settle_rest(rx, port, c, ran.timed, ran.took)
    };
    (outcome, ran.took)
}

/// [`settle`]'s outcome where its screen did not pass: the invocation
/// failed, overran, or returned with its value's register negative.
#[cold]
#[inline(never)]
fn settle_rest(
    rx: &mut RxSide,
    port: &Port,
    c: jive::Called,
    timed: bool,
    took: Duration,
) -> Outcome {
    if c.is_ok() && !rx.io.inv.overran {
        rx.overruns_in_row = 0;
        refused_or_done(c)
    } else {
        ended_badly(rx, port, c, timed, took)
    }
}

/// [`settle`]'s outcome of an invocation that returned with its value's
/// register negative: `Refused` if the method returned that value, `Done`
/// if it is a `void` method's leftover.
#[cold]
#[inline(never)]
fn refused_or_done(c: jive::Called) -> Outcome {
    Outcome::of_returned(c)
}

/// After an invocation that trapped or overran: one that overran a budget
/// (out of fuel, or refused by a native) is counted and sets its endpoint aside
/// for [`Budgets::throttle`] times its time (doubling with each overrun in
/// a row, at most [`THROTTLE_MAX`]). Untimed, the time is the invocation's
/// CPU time since the natives' first time check, or the time budget if
/// none ran. Returns the outcome as [`invoke`] does.
#[cold]
#[inline(never)]
fn ended_badly(
    rx: &mut RxSide,
    port: &Port,
    c: jive::Called,
    timed: bool,
    took: Duration,
) -> Outcome {
    // The error of a failed invocation, kept by the applet (taken, so
    // that it is dropped here, on the rare path).
    let error = match (c.is_ok(), rx.applet.as_mut()) {
        (false, Some(l)) => l.applet.take_error(),
        _ => None,
    };
    let out_of_fuel = error.as_deref().is_some_and(|e| {
        matches!(e, jive::InvokeError::Trap(t)
            if matches!(t.kind, jive::TrapKind::FuelExhausted(_)))
    });
    let outcome = if c.is_ok() {
        Outcome::of_returned(c)
    } else {
        Outcome::Trapped
    };
    if !rx.io.inv.overran && !out_of_fuel {
        // An ordinary trap: counted by the caller, not an overrun.
        rx.overruns_in_row = 0;
        return outcome;
    }
    let end = Instant::now();
    let took = match (timed, rx.io.inv.cpu_start) {
        (true, _) => took,
        (false, Some(c)) => thread_cpu_time().saturating_sub(c),
        (false, None) => rx.io.budgets.applet_time,
    };
    bump_shared(&port.stats.applet_overruns);
    rx.overruns_in_row = rx.overruns_in_row.saturating_add(1);
    let factor = rx.io.budgets.throttle;
    if factor > 0 {
        let doubling = 1u32 << rx.overruns_in_row.min(11).saturating_sub(1);
        let pause = took
            .saturating_mul(factor)
            .saturating_mul(doubling)
            .min(THROTTLE_MAX);
        let until = clock_ns(end) + pause.as_nanos() as u64;
        port.throttle_until.store(until.max(1), Ordering::Relaxed);
        bump_shared(&port.stats.applet_throttled);
    }
    outcome
}

pub(super) fn applet_trapped(rx: &mut RxSide, port: &Port) {
    bump(&port.stats.applet_traps);
    rx.traps_since_install += 1;
    if let TrapPolicy::UninstallAfter(n) = rx.policy
        && rx.traps_since_install >= n
    {
        rx.applet = None;
        port.has_applet.store(false, Ordering::Release);
        port.throttle_until.store(0, Ordering::Relaxed);
    }
}

/// Runs the applet's `doTx` for a checked descriptor (its channel open
/// and not closed on `tx`'s framer, its length and range checked, under
/// `tx`'s lock, which the caller holds throughout: [`Io::lend_tail`]
/// relies on it); its frames join the transmit side's outbox. Returns
/// the status and the invocation's time.
/// Out of line, for the transmit queue's passes ([`Engine::service`]);
/// [`Engine::send_applet_direct`] has [`applet_tx_inlined`] in its body.
#[inline(never)]
pub(super) fn applet_tx(
    engine: &Engine,
    tx: &mut TxSide,
    port: &Port,
    d: TxDesc,
    timed: bool,
) -> (TxStatus, Duration) {
    applet_tx_inlined(engine, tx, port, d, timed, Me::current())
}

/// [`applet_tx`], always inlined: into [`Engine::send_applet_direct`],
/// whose own frame then holds the invocation's (one call, one set of
/// register saves a message fewer). `me` is the calling thread's token,
/// read once for the locks and owners of the whole path.
///
/// `msg`: a descriptor's message, in the buffer area ([`TxDesc`]), or the
/// sending application's bytes ([`CallerMsg`]), each its own instance.
#[inline(always)]
pub(super) fn applet_tx_inlined<M: TxMsg>(
    engine: &Engine,
    tx: &mut TxSide,
    port: &Port,
    msg: M,
    timed: bool,
    me: Me,
) -> (TxStatus, Duration) {
    let mut guard = port.rx.lock_as(me);
    let rx = &mut *guard;
    if rx.applet.is_none() {
        // Uninstalled since the flag was read: send as standard U-Net.
        drop(guard);
        let status = match msg.transmit_plain(&mut tx.framer, port) {
            Ok(()) => TxStatus::Sent,
            Err(_) => TxStatus::Dropped,
        };
        return (status, Duration::ZERO);
    }
    // The frames `doTx` pushes are written straight into the transmit
    // outbox, lent to the endpoint's framer for the invocation, instead of
    // copied there afterwards (for a 40-byte message, moving the two
    // outboxes' handles twice costs 51 instructions less than the copy, by
    // callgrind; for 25 frames of 4 KiB per `doTx` in the demo's
    // `per_tx_25`, 100 KiB less copied). Frames the framer held from
    // before (a constructor's) stay ahead of them, appended below as
    // always.
    //
    // While the transmit outbox is empty too (the common case: the last
    // `doTx`'s frames went before this one), nothing is lent: the frames
    // go into the receive side's empty outbox, and the one swap after the
    // invocation hands them over (the two outboxes change places; both are
    // the endpoint's).
    let lend = rx.io.framer.out.is_empty();
    if lend && !tx.framer.out.is_empty() {
        rx.io.framer.out.swap_frames(&mut tx.framer.out);
    }
    // A `txPush` at a tail site defers its message while no frame waits
    // before it (none of an earlier descriptor's, none of a constructor's),
    // and the message is sent here, before the applet is let go: straight
    // into a receiver's `RxBuf` where `doTx`'s frame would have gone there
    // at once, else as that frame ([`Engine::resolve_deferred`]).
    // Only where the message may go straight on ([`Engine::may_defer`]):
    // one deferred to become a frame after all costs more than the frame.
    // (The receive side's outbox is empty here only if it was lent and
    // the transmit outbox held nothing either.) `defer` is false outside
    // this window, so that a `doTx` that does not defer writes nothing
    // for it, and makes one test more after the invocation.
    //
    // The channel of the descriptor is lent to the inline tail push
    // (`Io::lend_tail`) for the same window, and its message taken
    // after (`Io::take_tail`): at most one of the two defers, since an
    // invocation runs at most one tail site and each lends nothing more
    // once it has deferred.
    //
    // Outside that window the push is eager, and the channel is lent with
    // the outbox's free bytes (`Io::lend_frame`): the inline tail push
    // writes its frame there, and the frame joins the outbox here
    // (`Io::take_frame`), before anything else reads it.
    let chan = msg.chan();
    let may = rx.io.framer.out.is_empty() && engine.may_defer(tx, chan, msg.len(), me);
    if may {
        rx.io.defer = true;
        rx.io.lend_tail(chan);
    } else {
        rx.io.lend_frame(chan);
    }
    let mut r = invoke_tx(rx, port, msg, timed);
    if !may {
        rx.io.take_frame(chan);
    }
    if may {
        rx.io.defer = false;
        // The inline form's first: on the JIT, the common one.
        let m = match rx.io.take_tail(chan) {
            Some(m) => {
                debug_assert!(
                    rx.io.deferred.is_none(),
                    "two tail pushes deferred in one invocation"
                );
                Some(m)
            }
            None => rx.io.deferred.take(),
        };
        // A lent `doTx`'s message is read where it was lent from (the
        // area or the sender's bytes, [`TxMsg::resolve_lent`]), on a way
        // of its own, so that the copied form's is as it was.
        if let Some(m) = m
            && !(if m.array == jive::LENT {
                msg.resolve_lent(engine, tx, rx, port, &m, me)
            } else {
                engine.resolve_deferred(tx, rx, port, m, Src::Heap, me)
            })
        {
            // The deferred bytes were gone (see `resolve_deferred`): the
            // message was not sent, so the descriptor completes as one
            // the applet dropped, counted in `applet_drops`.
            if let Some((o @ Outcome::Done, _)) = &mut r {
                *o = Outcome::Refused;
            }
        }
    }
    rx.io.publish();
    // Handed back only if there is anything to hand: with the receive
    // side's outbox empty after the invocation, the transmit one is empty
    // too (it was before, or its frames were lent and are still here), and
    // exchanging two empty outboxes would only move their memory (some 18
    // instructions of a message whose `doTx` deferred its one push, the
    // common case on the demo's two threads).
    //
    // Frames the receive side's outbox held from before (a constructor's),
    // with this `doTx`'s behind them, are appended to the transmit
    // outbox instead (rare, so that the common `doTx` makes no call
    // here). Where the outboxes were lent, the exchange leaves the
    // receive side's empty: it takes the transmit outbox's frames, and
    // that outbox was empty from the lend on (it held nothing, or gave its
    // frames in the first exchange; neither the invocation nor the
    // deferred message's delivery writes it, `tx` being locked here), so
    // nothing is left to append. Both under the one test of the outbox,
    // made before the outcome's match rather than once on each side of it
    // (the match changes no outbox: a trap's `applet_trapped` counts and
    // may drop the applet, not `io`): with the outcome's counter stored
    // between the two, LLVM loaded the outbox's length again for the
    // second (xthr_count `LENT=1` send, 40 B, burst 1: 662.0 -> 660.0 a
    // message, every send row -2).
    if !rx.io.framer.out.is_empty() {
        if lend {
            rx.io.framer.out.swap_frames(&mut tx.framer.out);
            debug_assert!(rx.io.framer.out.is_empty());
        } else {
            let made = &mut rx.io.framer.out;
            tx.framer.out.append(made);
            made.clear();
        }
    }
    let (r, took) = r.expect("the applet is installed");
    let status = match r {
        Outcome::Done => TxStatus::Sent,
        Outcome::Refused => {
            bump(&port.stats.applet_drops);
            TxStatus::Dropped
        }
        Outcome::Trapped => {
            applet_trapped(rx, port);
            TxStatus::Dropped
        }
    };
    // The endpoint sent: an answer to the one frame run since it last
    // sent, if that is what it is, keeps its inbox warm for a round trip.
    // Here, after the message is published, so that the peer's wait for
    // it does not include this (9 instructions a message, `xthr_count`
    // `LENT=1` send at 40 B): only this endpoint's next drain reads it,
    // under this lock, after this.
    port.inbox_answered(&guard);
    drop(guard);
    // The frames a receiver's `doRx` made when the deferred message went
    // straight to it, sent with the applet let go (one may be for it).
    // Without `may`'s test: only that delivery (`may`) fills `tx.next`
    // here, and every path that fills it empties it before letting the
    // transmit side go, so that the one test of the outbox says the same;
    // `may`, held across the invocation, was reloaded from the stack for
    // it (xthr_count `LENT=1` send, 40 B, burst 1: 660.0 -> 658.0 a
    // message, every send row and every `standard` row of `unet-count` -2).
    if !tx.next.is_empty() {
        engine.pump_next(tx);
    }
    (status, took)
}

/// Verifies an applet and compiles its code for an endpoint with
/// `budgets`: all of a load's cost but the constructor's, which fuel and
/// the time budget bound (`Budgets::applet_time`). It touches no
/// endpoint, so it runs before any of the engine's locks is taken (up to
/// about 0.4 s for a class within jive's limits; under the control lock or
/// an endpoint's side lock it held up every client or the engine thread
/// delivering to that endpoint).
pub(super) fn compile_applet(
    bytes: &[u8],
    budgets: &Budgets,
) -> Result<jive::Unconstructed, EngineError> {
    let limits = jive::Limits {
        fuel: Some(budgets.applet_fuel),
        ..jive::Limits::default()
    };
    let mut applet = jive::Applet::compile_lending(
        bytes,
        &natives_table(),
        limits,
        &[crate::applets::LENT_DO_RX, crate::applets::LENT_DO_TX],
    )?;
    // Fuel bounds what an invocation runs only as the work a unit pays for
    // (`Budgets::applet_ops`).
    let per_unit = applet.program().ops_per_fuel_unit().max(1);
    applet.limit_fuel((budgets.applet_ops / per_unit).max(1));
    Ok(applet)
}

/// Constructs an applet [`compile_applet`] made for the endpoint of `io`,
/// giving it an `RxBuf` of the endpoint's largest message. The receive
/// queue's run is lent to the constructor, and from then on only if the
/// applet declares the inline `dmaRxdPayload` ([`Io::ring_lent`]); if the
/// load fails, as the old applet (which stays) needed.
pub(super) fn load_applet(applet: jive::Unconstructed, io: &mut Io) -> Result<Loaded, EngineError> {
    let before = (io.ring_lent, io.free_lent);
    io.set_ring_lent(true);
    io.set_free_lent(true);
    let loaded = construct(applet, io);
    let (ring, free) = match &loaded {
        Ok(l) => (
            l.applet.has_inline(jive::InlineForm::PushBytes)
                || l.applet.has_inline(crate::natives::RX_ONE_BUFFER),
            l.applet.has_inline(jive::InlineForm::PopU32),
        ),
        Err(_) => before,
    };
    io.set_ring_lent(ring);
    io.set_free_lent(free);
    loaded
}

/// [`load_applet`] under a lent run.
fn construct(applet: jive::Unconstructed, io: &mut Io) -> Result<Loaded, EngineError> {
    let max_message = io.framer.max_message;
    // The initializers are bounded together as one invocation is: by its
    // fuel, which jive shares between them, and past their first
    // `TIME_CHECK_EVERY` units of native work by `applet_time`. Until
    // 2026-12-07 the natives never read the clock here (a constructor's
    // time once included the JIT's compilation, which now runs before, in
    // `compile_applet`), so a constructor copying 512 KiB a native call ran
    // its 100,000 units of fuel, 1.2 s, under the endpoint's side locks
    // (attack 7m).
    let lent = io.begin();
    let loaded = applet.construct(Some(&mut *io));
    io.end(lent);
    // What the constructor received is the application's now.
    io.publish();
    let mut applet = loaded?;
    let shape = |e: jive::InvokeError| EngineError::AppletShape(e.to_string());
    // The shapes are checked now rather than trap on the first packet:
    // `prepare` refuses a method of another.
    // `doTx` in the form its class declares: the message lent where it
    // lies in the area, if the verifier proved it (`applets::LENT_DO_TX`),
    // else the ints that say where it lies.
    let do_tx = match applet
        .prepare_lending_lent_at::<Lender, 3, LENT_MSG>(crate::applets::LENT_DO_TX.method)
    {
        Ok(m) => DoTx::Lent(m),
        Err(jive::InvokeError::NotLent { .. }) => DoTx::Copied(
            applet
                .prepare_lent::<Lender, 3>("doTx")
                .map_err(|e| match e {
                    jive::InvokeError::ArgumentCount { method, .. }
                    | jive::InvokeError::NotIntArguments(method) => {
                        EngineError::AppletShape(format!(
                            "{method}: doTx must be int doTx(int length, int channel, int \
                                 off) or int doTx(byte[] msg, int length, int channel)"
                        ))
                    }
                    e => shape(e),
                })?,
        ),
        Err(e) => return Err(shape(e)),
    };
    // `doRx` in the form its class declares: the message lent, if the
    // verifier proved it (`applets::LENT_DO_RX`), else copied into `RxBuf`.
    let largest = max_message.min(1 << 16) as usize;
    let do_rx = match applet
        .prepare_lending_lent_at::<Lender, 3, LENT_MSG>(crate::applets::LENT_DO_RX.method)
    {
        Ok(m) => DoRx::Lent {
            m,
            scratch: Vec::with_capacity(largest),
        },
        Err(jive::InvokeError::NotLent { .. }) => {
            let m = applet
                .prepare_lent::<Lender, 2>("doRx")
                .map_err(|e| match e {
                    jive::InvokeError::ArgumentCount { method, .. }
                    | jive::InvokeError::NotIntArguments(method) => {
                        EngineError::AppletShape(format!(
                            "{method}: doRx must be int doRx(int length, int channel) or int \
                             doRx(byte[] msg, int length, int channel)"
                        ))
                    }
                    e => shape(e),
                })?;
            let rxbuf = applet.static_bytes_field("RxBuf").map_err(shape)?;
            applet
                .set_static_array("RxBuf", &vec![0u8; largest])
                .map_err(shape)?;
            DoRx::Copied { m, rxbuf }
        }
        Err(e) => return Err(shape(e)),
    };
    Ok(Loaded {
        applet,
        do_tx,
        do_rx,
    })
}

pub(super) fn natives_table() -> jive::Natives {
    static TABLE: std::sync::OnceLock<jive::Natives> = std::sync::OnceLock::new();
    TABLE.get_or_init(natives::bind::<Io>).clone()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    thread_local! {
        /// The free-queue entry whose line [`Io::prefetch_next_free`] last
        /// asked for on this thread (the next message's buffer).
        pub(crate) static NEXT_FREE_FETCHED: std::cell::Cell<Option<u32>> =
            const { std::cell::Cell::new(None) };
    }

    /// [`Outbox::swap_frames`], as `applet_tx` uses it: the transmit
    /// outbox's frames (one with a tail) lent to the receive side's empty
    /// outbox, a frame pushed behind them there, and all handed back:
    /// every frame in order, with its bytes and its own tail, and the
    /// lent outbox empty again.
    #[test]
    fn frames_lent_and_handed_back_keep_their_tails() {
        let seg = Arc::new(crate::shm::Segment::create("unet-swap-frames-test", 4096).unwrap());
        seg.write_bytes(100, b"rest of it");
        let (mut tx, mut rx) = (Outbox::default(), Outbox::default());
        tx.push_frame(3, 7).copy_from_slice(b"one");
        tx.push_frame(4, 8).copy_from_slice(b"two-");
        tx.set_tail(Tail {
            seg: seg.clone(),
            at: 100,
            len: 10,
        });
        rx.swap_frames(&mut tx);
        assert!(tx.is_empty());
        rx.push_frame(5, 9).copy_from_slice(b"three");
        rx.swap_frames(&mut tx);
        assert!(rx.is_empty() && rx.used == 0);
        let got: Vec<(Vec<u8>, Option<usize>, u64)> = tx
            .tagged()
            .map(|(f, t, c)| (f.to_vec(), t.map(|t| t.at), c))
            .collect();
        assert_eq!(
            got,
            [
                (b"one".to_vec(), None, 7),
                (b"two-".to_vec(), Some(100), 8),
                (b"three".to_vec(), None, 9),
            ]
        );
        let mut whole = Outbox::default();
        whole.append(&tx);
        let frames: Vec<&[u8]> = whole.iter().map(|(f, _)| f).collect();
        assert_eq!(frames[1], b"two-rest of it");
    }

    /// The receive run is lent ([`Io::ring_lent`]) to exactly the applets
    /// that declare `dmaRxdPayload` or `dmaRxd` (whose inline forms write
    /// it), there are applets of both kinds, and replacing an applet by one
    /// of the other kind (or failing to) sets it as the installed applet
    /// needs.
    #[test]
    fn only_applets_that_declare_the_inline_push_are_lent_the_ring() {
        let engine = super::super::datapath::tests::engine();
        let declares = |bytes: &[u8]| {
            jive::check(bytes, &jive::Limits::default())
                .unwrap()
                .natives
                .iter()
                .any(|n| n.name == "dmaRxdPayload" || n.name == "dmaRxd")
        };
        let (mut with, mut without) = (None, None);
        for &(name, bytes) in crate::applets::ALL {
            let port = engine.create_port(Config::default(), Some(bytes)).unwrap();
            let lent = port.rx.lock().io.ring_lent;
            assert_eq!(lent, declares(bytes), "{name}");
            let pops = jive::check(bytes, &jive::Limits::default())
                .unwrap()
                .natives
                .iter()
                .any(|n| n.name == "getFreeBuffer");
            assert_eq!(port.rx.lock().io.free_lent, pops, "{name}: free queue");
            *(if lent { &mut with } else { &mut without }) = Some((port, bytes));
        }
        let ((a, a_bytes), (b, b_bytes)) = (with.unwrap(), without.unwrap());
        engine.set_applet(a.id, Some(b_bytes)).unwrap();
        assert!(!a.rx.lock().io.ring_lent);
        engine.set_applet(b.id, Some(a_bytes)).unwrap();
        assert!(b.rx.lock().io.ring_lent);
        assert!(engine.set_applet(b.id, Some(b"not a class")).is_err());
        assert!(b.rx.lock().io.ring_lent, "the old applet stays, lent");
        assert!(engine.set_applet(a.id, Some(b"not a class")).is_err());
        assert!(!a.rx.lock().io.ring_lent);
    }

    /// A message that starts in the receiving endpoint's own segment (its
    /// area, which its applet's natives write: the application's bytes
    /// taken from there, `Segment::with_bytes`) is told apart, so that
    /// [`run_lent`] copies it instead of lending it (review26); any other
    /// bytes are not, at the segment's first and last byte and just past.
    /// The application's bytes are made a payload that says so
    /// (`Payload::of_app`, as `Engine::send_direct` makes it), which is
    /// the only kind [`Io::lends_in_place`] looks for in the segment.
    #[test]
    fn a_message_in_the_endpoints_own_segment_is_not_lent() {
        let engine = super::super::datapath::tests::engine();
        let port = engine
            .create_port(Config::default(), Some(crate::applets::LENT_PROBE))
            .unwrap();
        let other = engine.create_port(Config::default(), None).unwrap();
        let rx = port.rx.lock();
        let (seg, len) = (rx.io.seg.clone(), rx.io.seg.len());
        for (off, n) in [(0, 1), (100, 40), (len - 1, 1), (len - 4096, 4096)] {
            seg.with_bytes(off, n, |b| {
                assert!(rx.io.in_segment(b), "{off}");
                // The application's bytes (as `send_direct` takes them)
                // are copied, not lent.
                assert!(!rx.io.lends_in_place(&Payload::of_app(b)), "{off}");
            });
        }
        other.seg.with_bytes(0, 40, |b| {
            assert!(!rx.io.in_segment(b));
            assert!(rx.io.lends_in_place(&Payload::of_app(b)));
        });
        assert!(!rx.io.in_segment(&[1u8; 40]));
        assert!(rx.io.lends_in_place(&Payload::of_app(&[1u8; 40])));
        // SAFETY: an empty slice just past the mapping: no byte read.
        let past = unsafe { core::slice::from_raw_parts(seg.as_ptr().as_ptr().add(len), 0) };
        assert!(!rx.io.in_segment(past));
    }

    /// The buffer size the inline `getFreeBufferLength` returns
    /// (`words.ints[0]`) is in the words from the endpoint's creation on,
    /// through its constructor and every invocation: [`Io::begin`] does
    /// not write it, so it must be there from the start and stay.
    #[test]
    fn the_words_lend_the_buffer_size_from_the_start() {
        let engine = super::super::datapath::tests::engine();
        for size in [64, 2048, 65536] {
            let cfg = Config {
                buffer_size: size,
                ..Config::default()
            };
            let port = engine
                .create_port(cfg, Some(crate::applets::BREAKDOWN))
                .unwrap();
            let mut rx = port.rx.lock();
            let io = &mut rx.io;
            assert_eq!(io.inv.words.ints[0], size as i32, "made, constructed");
            for _ in 0..3 {
                let lent = io.begin();
                assert_eq!(io.inv.words.ints[0], size as i32, "at begin");
                io.end(lent);
            }
        }
    }

    /// The free queue's entries stay lent to the inline `getFreeBuffer`
    /// from one invocation to the next, from the consumer's count; none
    /// is lent while a spare buffer waits (the native gives those first),
    /// and the queue's again once the native has given them.
    #[test]
    fn the_free_run_stays_lent_and_none_while_a_spare_buffer_waits() {
        let engine = super::super::datapath::tests::engine();
        let port = engine
            .create_port(Config::default(), Some(crate::applets::STANDARD))
            .unwrap();
        let mut rx = port.rx.lock();
        let io = &mut rx.io;
        assert!(io.free_lent, "the standard applet calls getFreeBuffer");
        let (_, _, freeq) = crate::shm::queues(&io.seg, &io.layout).unwrap();
        let mut app = Producer::new(freeq);
        let bs = io.layout.config.buffer_size;
        for i in 0..8 {
            assert_eq!(app.push(i * bs), Ok(true));
        }
        // The engine reads the producer's index and takes one buffer.
        assert_eq!(io.take_buffer(), Some(0));
        let avail = |io: &Io| io.inv.words.queue.avail();
        let at_count = |io: &Io| io.inv.words.queue.tail() == io.free.lend().0;
        // None lent at the install: the first pop is the native's, which
        // lends the entries it saw after its own, for this invocation and
        // the next.
        let lent = io.begin();
        assert_eq!(avail(io), 0, "none lent at the install");
        assert_eq!(io.pop_free(), Some(bs));
        assert_eq!(avail(io), 6, "the six seen are lent");
        io.end(lent);
        assert_eq!(avail(io), 6, "and stay lent");
        assert!(at_count(io), "from the consumer's count");
        // A message the receive queue has no room for: its two buffers
        // kept aside, and none lent while they wait.
        let lent = io.begin();
        let (c, d) = (io.pop_free().unwrap(), io.pop_free().unwrap());
        assert_eq!((c, d), (2 * bs, 3 * bs));
        assert_eq!(avail(io), 4);
        let full = io.stats.rx_queue_full.load(Ordering::Relaxed);
        for _ in 0..io.layout.config.rx_depth {
            io.push_rx(0, 0, RxBody::Inline(&[])).unwrap();
        }
        io.push_rx(0, 2 * bs, RxBody::Buffers(&[c, d])).unwrap();
        assert_eq!(io.stats.rx_queue_full.load(Ordering::Relaxed), full + 1);
        assert_eq!(io.spare, [c, d]);
        assert_eq!(avail(io), 0, "a spare buffer waits");
        io.end(lent);
        let lent = io.begin();
        assert_eq!(io.pop_free(), Some(d));
        assert_eq!(avail(io), 0, "a spare buffer waits");
        assert_eq!(io.pop_free(), Some(c));
        assert_eq!(avail(io), 4, "the four seen are lent");
        io.end(lent);
        assert!(at_count(io));
    }
}
