//! Single-producer single-consumer descriptor queues (U-Net's transmit,
//! receive and free queues, Figure 1), for a producer and a consumer that
//! do not trust each other.
//!
//! A queue is two free-running `u32` indices, each on its own cache line,
//! and `depth` slots. The producer writes slot `head & (depth - 1)` and then
//! publishes it by storing `head + 1` with release ordering; the consumer
//! reads the slot after loading `head` with acquire ordering, and frees it
//! by storing `tail + 1` with release ordering. Each side keeps its own
//! index in private memory and only publishes it: the index it reads from
//! the shared line is the other side's, and it is checked before use. A
//! producer index more than `depth` ahead of the consumer's own, or a
//! consumer index that is ahead of the producer's own or more than `depth`
//! behind it, can only come from a broken or hostile peer, but for two
//! cases of a receive queue: its consumer may run ahead of the published
//! index on the slots' seals (see [`Consumer::found_front`]), and ahead of
//! the producer's own count while a run of slots is lent
//! ([`Producer::lend`]: a writer outside this type has sealed slots the
//! producer counts only at [`Producer::filled_many`]; the producer reads
//! the consumer's index only after that). Otherwise the queue
//! reports [`Corrupt`] and neither reads nor writes a slot. So the engine
//! never follows an index it has not checked, and a hostile application
//! cannot make it overwrite an undelivered descriptor.
//!
//! A queue whose slots each carry a seal ([`SealedMem`], an endpoint's
//! receive queue) also has the seal protocol here: the producer writes a
//! slot and then seals it ([`write_sealed`], [`seal`]); the consumer polls
//! the seal at its index, takes it and reads the slot
//! ([`Consumer::take_sealed`], [`Consumer::pop_sealed`]), then frees the
//! slot ([`Consumer::advance`]). Such a consumer never reads the producer
//! index: one cache line, the slot's, crosses cores per item.
//!
//! The memory behind a queue is a [`QueueMem`]: the endpoint's shared
//! segment ([`crate::shm`]), or, in the loom models, cells that loom can
//! watch.

use crate::sync::{AtomicU8, AtomicU32, Ordering};

/// The memory of one queue: its two indices and its slots.
pub trait QueueMem<T: Copy> {
    /// The producer index.
    fn head(&self) -> &AtomicU32;
    /// The consumer index.
    fn tail(&self) -> &AtomicU32;
    /// The number of slots, a power of two.
    fn depth(&self) -> u32;
    /// Reads slot `i` (`i < depth`). The value may be anything a hostile
    /// peer wrote: every `T` used here is plain data valid for any bytes.
    fn read(&self, i: u32) -> T;
    /// Writes item number `n` (the producer's count of items, wrapping)
    /// into its slot, `n & (depth - 1)`: the number, not only the slot,
    /// as the queue's own slots are laid out (a receive queue's writer
    /// also seals the slot, [`crate::shm::RX_SEALED`]).
    fn write(&self, n: u32, v: T);
    /// Writes `items` as items number `n`, `n + 1`, and so on, as
    /// [`QueueMem::write`] writes each (at most `depth` of them). A memory
    /// may do it with its slots' address worked out once
    /// ([`Producer::push_slice_unpublished`]).
    #[inline]
    fn write_run(&self, n: u32, items: &[T]) {
        for (k, &v) in items.iter().enumerate() {
            self.write(n.wrapping_add(k as u32), v);
        }
    }
}

/// The value of a slot's seal once its producer has written the whole
/// slot ([`seal`]): the slot holds an item the consumer has not taken. The
/// consumer stores 0 there when it takes the item
/// ([`Consumer::take_sealed`]), before it frees the slot, so a slot never
/// written, or taken, or written and not yet sealed, holds 0. It is
/// `jive::RING_SEALED`, the seal the JIT's inline push stores into a
/// receive slot, so that the two cannot differ.
#[cfg(not(loom))]
pub const SEALED: u8 = jive::RING_SEALED;
/// The loom build compiles the queues alone, without jive; the protocol
/// needs only a seal that is not 0.
#[cfg(loom)]
pub const SEALED: u8 = 1;

/// The memory of a queue whose slots each carry a seal, one byte the
/// producer sets last (an endpoint's receive queue: [`crate::layout::RxDesc`]'s
/// `sealed`). Its [`QueueMem::write`] writes the slot and then seals it
/// ([`write_sealed`]), so [`Producer::push`] and its kin seal what they
/// push.
pub trait SealedMem {
    /// A slot's address, worked out once ([`SealedMem::slot`]) for its
    /// seal and for the reads of its other bytes; it borrows the memory.
    type Slot<'a>: Copy
    where
        Self: 'a;

    /// Item number `n`'s slot, `n & (depth - 1)` (the number, wrapping,
    /// not the slot).
    fn slot(&self, n: u32) -> Self::Slot<'_>;

    /// The seal of a slot [`SealedMem::slot`] gave.
    fn seal_of<'a>(&'a self, slot: Self::Slot<'a>) -> &'a AtomicU8;

    /// The seal of item number `n`'s slot.
    #[inline(always)]
    fn seal(&self, n: u32) -> &AtomicU8 {
        self.seal_of(self.slot(n))
    }

    /// The ordering of the seal's store: `Release`, which the protocol
    /// needs. Only the loom build can change it, so that a model can check
    /// that a weaker one is caught (`tests/loom.rs`,
    /// `a_relaxed_seal_is_caught`).
    #[cfg(loom)]
    fn seal_ordering(&self) -> Ordering {
        Ordering::Release
    }
}

/// Seals item number `n`'s slot: [`SEALED`] stored with release ordering,
/// so that every byte of the slot written before is visible to a consumer
/// that loads the seal with acquire ordering ([`Consumer::take_sealed`]).
/// For a writer that wrote the slot by other means and knows only its
/// number; a writer that has the slot in hand uses [`write_sealed`] or
/// [`seal_slot`] (the engine's writers). The JIT's inline push seals no
/// slot through here: it stores the seal in the slot's header word, last,
/// with its own release store (`jive`'s `dmaRxdPayload`, docs/unet.md).
#[inline(always)]
pub fn seal<M: SealedMem>(mem: &M, n: u32) {
    seal_slot(mem, mem.seal(n));
}

/// [`seal`] of the seal `mem.seal(n)` gave, for a writer that took it in
/// hand before it wrote the slot: its address is then worked out with the
/// slot's, not again after the writes (the engine's receive descriptor
/// writers: again, it cost the 40-byte path 12 instructions).
#[inline(always)]
pub fn seal_slot<M: SealedMem>(mem: &M, seal: &AtomicU8) {
    #[cfg(loom)]
    let order = mem.seal_ordering();
    #[cfg(not(loom))]
    let (order, _) = (Ordering::Release, mem);
    seal.store(SEALED, order);
}

/// The producer's half of the seal protocol: `write` writes item number
/// `n`'s slot, every byte of it but its seal (which holds 0: the consumer
/// took it, or the slot was never written), then the slot is sealed
/// ([`seal`]). Only for the producer's next item (after
/// [`Producer::next_slot`], before [`Producer::filled`]), or from the
/// queue's own [`QueueMem::write`].
#[inline(always)]
pub fn write_sealed<M: SealedMem, R>(mem: &M, n: u32, write: impl FnOnce() -> R) -> R {
    let s = mem.seal(n);
    let r = write();
    seal_slot(mem, s);
    r
}

/// The peer published an index that no correct peer could have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("queue index {observed} is inconsistent with this side's index {own} (depth {depth})")]
pub struct Corrupt {
    /// The index read from shared memory.
    pub observed: u32,
    /// This side's own index.
    pub own: u32,
    /// The queue's depth.
    pub depth: u32,
}

/// The producing side of a queue.
#[derive(Debug)]
pub struct Producer<T: Copy, M: QueueMem<T>> {
    mem: M,
    head: u32,
    /// The consumer index last read (valid: within `depth` of `head`).
    tail: u32,
    _t: core::marker::PhantomData<T>,
}

impl<T: Copy, M: QueueMem<T>> Producer<T, M> {
    /// The producer of the queue in `mem`, continuing from the indices it
    /// holds now (both 0 for a new queue). A consumer index that is not
    /// within `depth` of the producer index is taken as the producer index:
    /// the queue then looks full until the consumer catches up.
    pub fn new(mem: M) -> Self {
        let head = mem.head().load(Ordering::Relaxed);
        let tail = mem.tail().load(Ordering::Acquire);
        let tail = if head.wrapping_sub(tail) <= mem.depth() {
            tail
        } else {
            head.wrapping_sub(mem.depth())
        };
        Producer {
            mem,
            head,
            tail,
            _t: core::marker::PhantomData,
        }
    }

    /// Reads the consumer's index and checks it.
    #[inline]
    fn refresh(&mut self) -> Result<(), Corrupt> {
        let t = self.mem.tail().load(Ordering::Acquire);
        let used = self.head.wrapping_sub(t);
        if used > self.mem.depth() {
            return Err(Corrupt {
                observed: t,
                own: self.head,
                depth: self.mem.depth(),
            });
        }
        self.tail = t;
        Ok(())
    }

    /// Free slots, reading the consumer's index.
    pub fn space(&mut self) -> Result<u32, Corrupt> {
        self.refresh()?;
        Ok(self.mem.depth() - self.head.wrapping_sub(self.tail))
    }

    /// Whether a slot is free for the next push. The consumer's index is
    /// read (and checked) only when the one read last says the queue is
    /// full, so a producer that keeps ahead of a full queue never touches
    /// the consumer's line.
    #[inline]
    pub fn has_space(&mut self) -> Result<bool, Corrupt> {
        if self.head.wrapping_sub(self.tail) == self.mem.depth() {
            self.refresh()?;
        }
        Ok(self.head.wrapping_sub(self.tail) < self.mem.depth())
    }

    /// Pushes `v`. `Ok(false)` if the queue is full.
    #[inline]
    pub fn push(&mut self, v: T) -> Result<bool, Corrupt> {
        let pushed = self.push_unpublished(v)?;
        if pushed {
            self.publish();
        }
        Ok(pushed)
    }

    /// Writes `v` into the next slot without publishing the index: a
    /// consumer that reads the index sees the item, and every one written
    /// before it, at the next [`Producer::publish`] or [`Producer::push`];
    /// on a queue whose slots carry seals ([`SealedMem`]) the slot's seal,
    /// stored by the write, gives it to a consumer that watches the seals
    /// at once. `Ok(false)` if the queue is full. The engine writes a
    /// batch of receive descriptors this way and publishes the index with
    /// one store.
    #[inline]
    pub fn push_unpublished(&mut self, v: T) -> Result<bool, Corrupt> {
        self.push_unpublished_with(|m, i| m.write(i, v))
    }

    /// [`Producer::push_unpublished`] of an item that `write` builds in
    /// place: it is called with the queue's memory and the next item's
    /// number (wrapping; its slot is the number `& (depth - 1)`), and
    /// writes that slot (e.g. a receive
    /// descriptor whose message is copied straight into the slot, not
    /// built in private memory and copied in whole). `Ok(false)`, and
    /// `write` is not called, if the queue is full. Always inlined: the
    /// engine's inline receive descriptor is written through it, and as a
    /// call (the compiler's choice in the engine's service) it cost a
    /// frame of six saved registers per message.
    #[inline(always)]
    pub fn push_unpublished_with(&mut self, write: impl FnOnce(&M, u32)) -> Result<bool, Corrupt> {
        if self.head.wrapping_sub(self.tail) == self.mem.depth() {
            self.refresh()?;
            if self.head.wrapping_sub(self.tail) == self.mem.depth() {
                return Ok(false);
            }
        }
        write(&self.mem, self.head);
        self.head = self.head.wrapping_add(1);
        Ok(true)
    }

    /// [`Producer::push_unpublished`] of each of `items` in order, for as
    /// many as there are free slots: the number written (the rest did not
    /// fit). The consumer's index is read (and checked) only when the one
    /// read last leaves too few slots for all of them; a corrupt index
    /// leaves the slots that one left, as a push that meets it after
    /// filling them would. One test of the room for the whole batch, not
    /// one per item: a receiver gives its gathered buffers back this way.
    #[inline]
    pub fn push_slice_unpublished(&mut self, items: &[T]) -> usize {
        let depth = self.mem.depth();
        let mut room = depth - self.head.wrapping_sub(self.tail);
        if (room as usize) < items.len() && self.refresh().is_ok() {
            room = depth - self.head.wrapping_sub(self.tail);
        }
        let n = items.len().min(room as usize);
        self.mem.write_run(self.head, &items[..n]);
        self.head = self.head.wrapping_add(n as u32);
        n
    }

    /// The number (wrapping) of the next item to write, whose slot is the
    /// number `& (depth - 1)`, or `None` if the queue is full: the first
    /// half of [`Producer::push_unpublished_with`]
    /// for a caller that writes the slot itself (through
    /// [`Producer::mem`]) and then calls [`Producer::filled`]. Unlike a
    /// closure passed to `push_unpublished_with`, which the compiler may
    /// leave a call with a frame of its own, the write stays in the
    /// caller's body.
    #[inline(always)]
    pub fn next_slot(&mut self) -> Result<Option<u32>, Corrupt> {
        if self.head.wrapping_sub(self.tail) == self.mem.depth() {
            self.refresh()?;
            if self.head.wrapping_sub(self.tail) == self.mem.depth() {
                return Ok(None);
            }
        }
        Ok(Some(self.head))
    }

    /// Counts the slot [`Producer::next_slot`] returned as written
    /// (unpublished until [`Producer::publish`]). Only after a `next_slot`
    /// that returned a slot.
    #[inline(always)]
    pub fn filled(&mut self) {
        debug_assert!(self.head.wrapping_sub(self.tail) < self.mem.depth());
        self.head = self.head.wrapping_add(1);
    }

    /// The producer index and how many slots are free as the consumer's
    /// index was last read (it is not read now): for a writer outside
    /// this type (the JIT's inline push, `jive::RingWords`) that writes up
    /// to that many slots in order from the one the index names, and then
    /// counts them with [`Producer::filled_many`]. The index is not
    /// published; but a writer that seals each slot it writes (the JIT's
    /// push does) gives it to a consumer that watches the seals at once, so
    /// that consumer may take and free lent slots, and move its index past
    /// this producer's count, before the count: every slot written must
    /// then be counted ([`Producer::filled_many`]) before the producer
    /// reads that index again, or it reads as [`Corrupt`].
    #[inline(always)]
    pub fn lend(&self) -> (u32, u32) {
        (
            self.head,
            self.mem.depth() - self.head.wrapping_sub(self.tail),
        )
    }

    /// Counts `n` slots written from the one [`Producer::lend`] named, as
    /// [`Producer::filled`] counts one (unpublished until
    /// [`Producer::publish`]); at most as many as are free, whatever `n`
    /// says, so that the producer never passes the consumer. The clamp is
    /// no safety net for slots a writer sealed: a count it drops leaves
    /// sealed slots uncounted, which the next push would overwrite while
    /// the consumer may read them; the caller counts exactly what was
    /// written (`Io::rx_taken` asserts it in debug builds).
    #[inline]
    pub fn filled_many(&mut self, n: u32) {
        let free = self.mem.depth() - self.head.wrapping_sub(self.tail);
        self.head = self.head.wrapping_add(n.min(free));
    }

    /// Publishes the producer index: every item written so far is the
    /// consumer's (one release store).
    #[inline]
    pub fn publish(&mut self) {
        self.mem.head().store(self.head, Ordering::Release);
    }

    /// How many pushed items the consumer has taken, in all (wrapping).
    pub fn consumed(&mut self) -> Result<u32, Corrupt> {
        self.refresh()?;
        Ok(self.tail)
    }

    /// How many items were pushed, in all (wrapping).
    pub fn pushed(&self) -> u32 {
        self.head
    }

    /// The slot that item number `n` (counting pushes, wrapping) went to:
    /// e.g. a transmit descriptor, for its completion status. Meaningful
    /// until the producer wraps around to it again.
    pub fn slot_of(&self, n: u32) -> T {
        self.mem.read(n & (self.mem.depth() - 1))
    }

    /// The queue's memory.
    #[inline]
    pub fn mem(&self) -> &M {
        &self.mem
    }
}

/// The consuming side of a queue.
#[derive(Debug)]
pub struct Consumer<T: Copy, M: QueueMem<T>> {
    mem: M,
    tail: u32,
    /// The producer index last read (valid: at most `depth` ahead of `tail`).
    head: u32,
    _t: core::marker::PhantomData<T>,
}

impl<T: Copy, M: QueueMem<T>> Consumer<T, M> {
    /// The consumer of the queue in `mem`, continuing from its consumer index.
    pub fn new(mem: M) -> Self {
        let tail = mem.tail().load(Ordering::Relaxed);
        Consumer {
            mem,
            tail,
            head: tail,
            _t: core::marker::PhantomData,
        }
    }

    /// Reads the producer's index and checks it.
    #[inline]
    fn refresh(&mut self) -> Result<(), Corrupt> {
        let h = self.mem.head().load(Ordering::Acquire);
        if h.wrapping_sub(self.tail) > self.mem.depth() {
            return Err(Corrupt {
                observed: h,
                own: self.tail,
                depth: self.mem.depth(),
            });
        }
        self.head = h;
        Ok(())
    }

    /// Items ready, reading the producer's index.
    pub fn available(&mut self) -> Result<u32, Corrupt> {
        self.refresh()?;
        Ok(self.head.wrapping_sub(self.tail))
    }

    /// Whether no item is ready, reading the producer's index: exactly
    /// where [`Consumer::available`] returns `Ok(0)` (an index equal to
    /// the consumer's is never corrupt), recording it as `available` does
    /// then. Any other index is `false`, corrupt or not, and not recorded
    /// (a later read checks it, as the pass that takes the queue does):
    /// one comparison, without `refresh`'s check against the depth. In the
    /// engine's test that nothing waits before a message a `doTx` takes
    /// directly (`Engine::send_applet_direct`) it freed registers across
    /// the whole send: xthr_count `LENT=1` send, 40 B, burst 1, 656.0 ->
    /// 643.0 a message (`unet-count` standard-lent-40 -14). Not in the
    /// no-applet `Engine::send_direct_locked`, where path-1000 counted 3
    /// more and path-57 1 more for it.
    #[inline]
    pub fn is_empty_now(&mut self) -> bool {
        let h = self.mem.head().load(Ordering::Acquire);
        if h != self.tail {
            return false;
        }
        self.head = h;
        true
    }

    /// A private copy of the item at the front, without taking it.
    /// Always inlined: as a call its `Result` came back through memory
    /// (the engine's take of a free buffer, some 8 instructions more).
    #[inline(always)]
    pub fn peek(&mut self) -> Result<Option<T>, Corrupt> {
        if self.head == self.tail {
            self.refresh()?;
            if self.head == self.tail {
                return Ok(None);
            }
        }
        Ok(Some(self.mem.read(self.tail & (self.mem.depth() - 1))))
    }

    /// [`Consumer::peek`] after reading the producer's index whatever the
    /// index read last says: the first item of a pass that takes the
    /// items pushed so far (then [`Consumer::peek_seen`]).
    #[inline]
    pub fn peek_fresh(&mut self) -> Result<Option<T>, Corrupt> {
        self.refresh()?;
        Ok(self.peek_seen())
    }

    /// [`Consumer::peek`] of the items already seen: `None` once they are
    /// all taken, without reading the producer's index again. For a
    /// consumer that takes a batch per pass ([`Consumer::peek_fresh`]
    /// first): what the producer pushed during the pass waits for the
    /// next one.
    #[inline]
    pub fn peek_seen(&mut self) -> Option<T> {
        if self.head == self.tail {
            return None;
        }
        Some(self.mem.read(self.tail & (self.mem.depth() - 1)))
    }

    /// The index (`< depth`) of the front item's slot, without taking it
    /// or copying it: for a consumer that reads the item in place (through
    /// [`Consumer::mem`]) and frees the slot with [`Consumer::advance`]
    /// once done. Until then the producer does not write that slot.
    #[inline]
    pub fn front(&mut self) -> Result<Option<u32>, Corrupt> {
        if self.head == self.tail {
            self.refresh()?;
            if self.head == self.tail {
                return Ok(None);
            }
        }
        Ok(Some(self.tail & (self.mem.depth() - 1)))
    }

    /// The number (wrapping) of the front item, taken next: the consumer
    /// index. Its slot is the number `& (depth - 1)`.
    #[inline(always)]
    pub fn next(&self) -> u32 {
        self.tail
    }

    /// Counts the front item as published, for a consumer that found it so
    /// in its slot rather than by the producer index (a receive queue's
    /// seal, [`crate::shm::RX_SEALED`]): [`Consumer::advance`] may then
    /// take it. The producer index is not read; a later
    /// [`Consumer::available`] or [`Consumer::front`] reads it again, and
    /// takes what it says, which may not count this item yet: a consumer
    /// that finds items this way (the endpoint's receive queue, whose
    /// `rx_front` and `pending` read the seals) does not mix in those
    /// reads of the index.
    #[inline(always)]
    pub fn found_front(&mut self) {
        self.head = self.tail.wrapping_add(1);
    }

    /// Whether the front item is known to be published, by the producer
    /// index as last read or by [`Consumer::found_front`]: nothing shared
    /// is read.
    #[inline(always)]
    pub fn seen_front(&self) -> bool {
        self.head != self.tail
    }

    /// Overwrites the front item before it is taken (the engine's
    /// completion status of a transmit descriptor). Only after a `peek`
    /// that returned an item.
    pub fn write_front(&mut self, v: T) {
        debug_assert_ne!(self.head, self.tail);
        self.mem.write(self.tail & (self.mem.depth() - 1), v);
    }

    /// Takes the front item (after a `peek` that returned one), freeing its
    /// slot for the producer.
    #[inline]
    pub fn advance(&mut self) {
        self.take();
        self.publish();
    }

    /// Takes the front item (after a `peek` that returned one) without
    /// telling the producer: the next `peek` sees the item after it, but
    /// the slot, and whatever the producer lent with it, stays the
    /// consumer's until [`Consumer::publish`]. The engine takes a batch of
    /// transmit descriptors this way and publishes them once it has read
    /// the last byte of their messages.
    #[inline]
    pub fn take(&mut self) {
        debug_assert_ne!(self.head, self.tail);
        self.tail = self.tail.wrapping_add(1);
    }

    /// The consumer index and how many items are ready as the producer's
    /// index was last read (it is not read now): for a reader outside this
    /// type (the JIT's inline pop, `jive::QueueWords`) that takes up to
    /// that many items in order from the one the index names, and then
    /// counts them with [`Consumer::taken_many`]. Nothing is published.
    #[inline(always)]
    pub fn lend(&self) -> (u32, u32) {
        (self.tail, self.head.wrapping_sub(self.tail))
    }

    /// Takes `n` items from the one [`Consumer::lend`] named, as
    /// [`Consumer::take`] takes one (unpublished until
    /// [`Consumer::publish`]); at most as many as were ready, whatever `n`
    /// says, so that the consumer never passes the producer.
    #[inline]
    pub fn taken_many(&mut self, n: u32) {
        let ready = self.head.wrapping_sub(self.tail);
        self.tail = self.tail.wrapping_add(n.min(ready));
    }

    /// Publishes the consumer index: every item taken so far is the
    /// producer's again (one release store).
    #[inline]
    pub fn publish(&mut self) {
        self.mem.tail().store(self.tail, Ordering::Release);
    }

    /// Takes the front item, if any.
    #[inline]
    pub fn pop(&mut self) -> Result<Option<T>, Corrupt> {
        let v = self.peek()?;
        if v.is_some() {
            self.advance();
        }
        Ok(v)
    }

    /// The queue's memory.
    pub fn mem(&self) -> &M {
        &self.mem
    }
}

/// The consumer's half of the seal protocol, for a queue whose slots carry
/// seals: it learns of an item from its slot's seal, never from the
/// producer index (which the producer may publish later, or not at all).
impl<T: Copy, M: QueueMem<T> + SealedMem> Consumer<T, M> {
    /// The front item's number (wrapping; its slot is the number `&
    /// (depth - 1)`) if its slot is sealed: the seal at the consumer index
    /// loaded with acquire ordering (every byte of the slot written before
    /// the seal is then visible), then taken (set to 0, relaxed: the
    /// producer sees it after the consumer index that frees the slot,
    /// stored with release ordering), and the item counted as published
    /// ([`Consumer::found_front`]). The slot is the consumer's to read in
    /// place (through [`Consumer::mem`]) until [`Consumer::advance`]
    /// frees it. A front already known (taken here and not yet freed) is
    /// given again, its seal cleared again. `None` if the slot is not
    /// sealed.
    #[inline(always)]
    pub fn take_sealed(&mut self) -> Option<u32> {
        self.take_sealed_with(|_, _| ()).map(|(n, ())| n)
    }

    /// [`Consumer::take_sealed`] that also reads the slot, by `read`
    /// (called with the queue's memory and the slot), once the seal says
    /// it is whole and before the seal is taken: the front item's number
    /// and what `read` returned. The slot's address is worked out once,
    /// before the seal's load, for the seal and the read (worked out again
    /// after the load, which the compiler may not read across, it cost
    /// `unet-count` path-40 9 instructions).
    #[inline(always)]
    pub fn take_sealed_with<R>(
        &mut self,
        read: impl for<'a> FnOnce(&'a M, M::Slot<'a>) -> R,
    ) -> Option<(u32, R)> {
        let n = self.tail;
        let slot = self.mem.slot(n);
        let seal = self.mem.seal_of(slot);
        let known = self.seen_front();
        if !known && seal.load(Ordering::Acquire) == 0 {
            return None;
        }
        let r = read(&self.mem, slot);
        seal.store(0, Ordering::Relaxed);
        if !known {
            self.found_front();
        }
        Some((n, r))
    }

    /// Takes the front item by its seal ([`Consumer::take_sealed`]): a
    /// private copy of its slot, which is then freed
    /// ([`Consumer::advance`]). `None` if the slot is not sealed.
    #[inline]
    pub fn pop_sealed(&mut self) -> Option<T> {
        let n = self.take_sealed()?;
        let v = self.mem.read(n & (self.mem.depth() - 1));
        self.advance();
        Some(v)
    }

    /// How many items are sealed from the front, in order (each seal
    /// loaded with acquire ordering), without taking any: the items
    /// [`Consumer::take_sealed`] would find one after the other (but for a
    /// front it already gave and that is not freed, whose seal is taken).
    pub fn sealed_count(&self) -> u32 {
        let depth = self.mem.depth();
        (0..depth)
            .take_while(|&k| {
                self.mem
                    .seal(self.tail.wrapping_add(k))
                    .load(Ordering::Acquire)
                    != 0
            })
            .count() as u32
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A queue in private memory, with the indices exposed so a test can
    /// play the hostile peer.
    struct Mem {
        head: AtomicU32,
        tail: AtomicU32,
        slots: Vec<Cell<u64>>,
        /// Each slot's seal, set by `write` through `write_sealed`.
        seals: Vec<AtomicU8>,
    }

    impl SealedMem for &Mem {
        type Slot<'a>
            = usize
        where
            Self: 'a;
        fn slot(&self, n: u32) -> usize {
            (n & (self.depth() - 1)) as usize
        }
        fn seal_of(&self, slot: usize) -> &AtomicU8 {
            &self.seals[slot]
        }
    }

    impl QueueMem<u64> for &Mem {
        fn head(&self) -> &AtomicU32 {
            &self.head
        }
        fn tail(&self) -> &AtomicU32 {
            &self.tail
        }
        fn depth(&self) -> u32 {
            self.slots.len() as u32
        }
        fn read(&self, i: u32) -> u64 {
            self.slots[i as usize].get()
        }
        fn write(&self, n: u32, v: u64) {
            write_sealed(self, n, || {
                self.slots[(n & (self.depth() - 1)) as usize].set(v)
            })
        }
    }

    impl Mem {
        fn read_slot(&self, i: u32) -> u64 {
            self.slots[i as usize].get()
        }
    }

    fn mem(depth: usize, start: u32) -> Mem {
        Mem {
            head: AtomicU32::new(start),
            tail: AtomicU32::new(start),
            slots: (0..depth).map(|_| Cell::new(0)).collect(),
            seals: (0..depth).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    /// The seal protocol's consumer: an item is found by its slot's seal
    /// alone (the producer index unpublished, or behind), taken once, in
    /// order across the index wrap; a slot written without its seal is not
    /// found until it is sealed; `sealed_count` counts the sealed run from
    /// the front.
    #[test]
    fn a_sealed_consumer_finds_items_by_their_seals_alone() {
        let m = mem(4, u32::MAX - 1);
        let (mut p, mut c) = (Producer::new(&m), Consumer::new(&m));
        assert_eq!(c.pop_sealed(), None);
        assert_eq!(p.push_unpublished(1), Ok(true));
        assert_eq!(p.push_unpublished(2), Ok(true));
        assert_eq!(c.sealed_count(), 2, "sealed, the index not published");
        assert_eq!(c.pop_sealed(), Some(1));
        // The front found by its seal, which is taken, and given again
        // until it is freed.
        assert_eq!(c.take_sealed(), Some(u32::MAX));
        assert_eq!(m.read_slot(3), 2, "slot u32::MAX & 3");
        assert_eq!(c.sealed_count(), 0, "its seal is taken");
        assert_eq!(c.take_sealed(), Some(u32::MAX));
        c.advance();
        assert_eq!(c.pop_sealed(), None);
        // Written first, sealed later by its number (`seal`).
        let n = p.next_slot().unwrap().expect("room");
        m.slots[(n & 3) as usize].set(3);
        p.filled();
        p.publish();
        assert_eq!(c.pop_sealed(), None, "published by the index, not sealed");
        seal(&&m, n);
        assert_eq!(c.pop_sealed(), Some(3));
        for v in 4..=7 {
            assert_eq!(p.push(v), Ok(true));
        }
        assert_eq!(p.push(8), Ok(false), "full");
        assert_eq!(c.sealed_count(), 4);
        for v in 4..=7 {
            assert_eq!(c.pop_sealed(), Some(v));
        }
        assert_eq!((c.pop_sealed(), c.sealed_count()), (None, 0));
    }

    #[test]
    fn fifo_across_index_wrap() {
        let m = mem(4, u32::MAX - 5);
        let (mut p, mut c) = (Producer::new(&m), Consumer::new(&m));
        let mut next = 0;
        for round in 0..20u64 {
            for k in 0..=(round % 4) {
                assert_eq!(p.push(round * 10 + k), Ok(true));
            }
            for k in 0..=(round % 4) {
                assert_eq!(c.pop(), Ok(Some(round * 10 + k)));
                next += 1;
            }
            assert_eq!(c.pop(), Ok(None));
        }
        assert_eq!(next, 50);
    }

    #[test]
    fn a_slice_is_pushed_as_far_as_there_is_room_and_no_further() {
        let m = mem(4, u32::MAX - 1);
        let (mut p, mut c) = (Producer::new(&m), Consumer::new(&m));
        assert_eq!(p.push_slice_unpublished(&[1, 2, 3]), 3);
        assert_eq!(c.pop(), Ok(None), "unpublished until publish");
        p.publish();
        // One slot left as the consumer's index was read; reading it again
        // finds no more: one of three written, the front not overwritten.
        assert_eq!(p.push_slice_unpublished(&[4, 5, 6]), 1);
        assert_eq!(p.push_slice_unpublished(&[7]), 0);
        p.publish();
        assert_eq!(c.pop(), Ok(Some(1)));
        assert_eq!(c.pop(), Ok(Some(2)));
        // Two slots freed since the producer last read the index.
        assert_eq!(p.push_slice_unpublished(&[8, 9, 10]), 2);
        p.publish();
        for v in [3, 4, 8, 9] {
            assert_eq!(c.pop(), Ok(Some(v)));
        }
        assert_eq!(c.pop(), Ok(None));
        assert_eq!(p.push_slice_unpublished(&[]), 0);
        // A corrupt consumer index: no slot is taken beyond those the last
        // good one left.
        assert_eq!(p.push_slice_unpublished(&[11, 12]), 2);
        m.tail.store(p.pushed().wrapping_add(9), Ordering::Relaxed);
        let before = p.pushed();
        assert_eq!(p.push_slice_unpublished(&[13, 14, 15]), 2);
        assert_eq!(p.pushed(), before.wrapping_add(2));
        assert_eq!(p.push_slice_unpublished(&[16]), 0);
        assert_eq!(p.pushed(), before.wrapping_add(2));
    }

    #[test]
    fn full_queue_refuses_without_overwriting() {
        let m = mem(4, 0);
        let (mut p, mut c) = (Producer::new(&m), Consumer::new(&m));
        for v in 1..=4 {
            assert_eq!(p.push(v), Ok(true));
        }
        assert_eq!(p.push(5), Ok(false));
        assert_eq!(c.pop(), Ok(Some(1)));
        assert_eq!(p.push(5), Ok(true));
        assert_eq!(
            (2..=5)
                .map(|_| c.pop().unwrap().unwrap())
                .collect::<Vec<_>>(),
            [2, 3, 4, 5]
        );
    }

    #[test]
    fn a_producer_index_too_far_ahead_is_corrupt_and_reads_nothing() {
        let m = mem(8, 100);
        let mut c = Consumer::new(&m);
        m.head.store(100 + 9, Ordering::Release);
        assert!(matches!(
            c.pop(),
            Err(Corrupt {
                observed: 109,
                own: 100,
                depth: 8
            })
        ));
        // Behind the consumer is just as impossible.
        m.head.store(99, Ordering::Release);
        assert!(c.pop().is_err());
        // Back to a consistent value: the queue works again.
        m.slots[100 % 8].set(42);
        m.head.store(101, Ordering::Release);
        assert_eq!(c.pop(), Ok(Some(42)));
    }

    #[test]
    fn is_empty_now_is_available_returning_ok_0_for_every_producer_index() {
        // Every index a hostile producer may write, around the consumer's
        // (wrapping too): `is_empty_now` says what `available` does, and
        // leaves the consumer where `available` leaves it when empty.
        for own in [0u32, 5, u32::MAX - 1] {
            let m = mem(8, own);
            for d in [0u32, 1, 7, 8, 9, u32::MAX, u32::MAX - 8] {
                let h = own.wrapping_add(d);
                m.head.store(h, Ordering::Release);
                let (mut a, mut b) = (Consumer::new(&m), Consumer::new(&m));
                let empty = matches!(a.available(), Ok(0));
                assert_eq!(b.is_empty_now(), empty, "own {own} head {h}");
                if empty {
                    assert_eq!((b.head, b.tail), (a.head, a.tail));
                }
            }
        }
    }

    #[test]
    fn a_consumer_index_ahead_of_the_producer_is_corrupt() {
        let m = mem(4, 0);
        let mut p = Producer::new(&m);
        for v in 0..4 {
            p.push(v).unwrap();
        }
        // A consumer claiming to have taken more than was pushed would let
        // the producer overwrite undelivered slots.
        m.tail.store(7, Ordering::Release);
        assert!(p.push(9).is_err());
        assert_eq!(
            m.slots.iter().map(Cell::get).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
    }

    #[test]
    fn has_space_reads_the_consumer_only_when_full() {
        let m = mem(2, 0);
        let (mut p, mut c) = (Producer::new(&m), Consumer::new(&m));
        assert_eq!(p.has_space(), Ok(true));
        p.push(1).unwrap();
        p.push(2).unwrap();
        // The consumer's index is read once the queue looks full: a freed
        // slot is then seen, a corrupt index caught.
        assert_eq!(c.pop(), Ok(Some(1)));
        assert_eq!(p.has_space(), Ok(true), "the freed slot is seen");
        p.push(3).unwrap();
        m.tail.store(9, Ordering::Release);
        assert!(p.has_space().is_err());
        m.tail.store(1, Ordering::Release);
        assert_eq!(p.has_space(), Ok(false));
    }

    #[test]
    fn unpublished_pushes_appear_together_at_publish() {
        let m = mem(4, 0);
        let (mut p, mut c) = (Producer::new(&m), Consumer::new(&m));
        assert_eq!(p.push_unpublished(1), Ok(true));
        assert_eq!(p.push_unpublished(2), Ok(true));
        assert_eq!(
            c.pop(),
            Ok(None),
            "nothing is the consumer's before publish"
        );
        p.publish();
        assert_eq!(
            (c.pop(), c.pop(), c.pop()),
            (Ok(Some(1)), Ok(Some(2)), Ok(None))
        );
        // The free slots count the unpublished ones as taken.
        for v in 3..=6 {
            assert_eq!(p.push_unpublished(v), Ok(true));
        }
        assert_eq!(p.push_unpublished(7), Ok(false));
    }

    #[test]
    fn in_place_writes_and_reads_keep_the_slot_until_advance() {
        let m = mem(2, u32::MAX);
        let (mut p, mut c) = (Producer::new(&m), Consumer::new(&m));
        assert_eq!(p.push_unpublished_with(|q, i| q.write(i, 10)), Ok(true));
        assert_eq!(
            c.front(),
            Ok(None),
            "nothing is the consumer's before publish"
        );
        p.publish();
        let i = c.front().unwrap().expect("published");
        // The index wraps: slot `u32::MAX mod 2`.
        assert_eq!((i, m.read_slot(i)), (1, 10));
        assert_eq!(p.push_unpublished_with(|q, i| q.write(i, 11)), Ok(true));
        // The front slot is still the consumer's: the queue is full and
        // the producer's writer is not called.
        let mut called = false;
        assert_eq!(p.push_unpublished_with(|_, _| called = true), Ok(false));
        assert!(!called);
        assert_eq!(m.read_slot(i), 10, "the slot read in place is untouched");
        c.advance();
        assert_eq!(p.push_unpublished_with(|q, i| q.write(i, 12)), Ok(true));
        p.publish();
        assert_eq!(
            (c.pop(), c.pop(), c.pop()),
            (Ok(Some(11)), Ok(Some(12)), Ok(None))
        );
    }

    #[test]
    fn a_pass_takes_what_was_pushed_before_it_and_reads_the_index_once() {
        let m = mem(4, 0);
        let (mut p, mut c) = (Producer::new(&m), Consumer::new(&m));
        p.push(1).unwrap();
        assert_eq!(c.peek(), Ok(Some(1)));
        c.take();
        // Pushed after the consumer last read the index: a pass that
        // starts now reads it again, whatever its cached copy says.
        p.push(2).unwrap();
        p.push(3).unwrap();
        assert_eq!(c.peek_fresh(), Ok(Some(2)));
        c.take();
        p.push(4).unwrap();
        // The rest of the pass goes only as far as the index it read.
        assert_eq!(c.peek_seen(), Some(3));
        c.take();
        assert_eq!(c.peek_seen(), None, "4 waits for the next pass");
        assert_eq!(c.peek_fresh(), Ok(Some(4)));
        c.take();
        assert_eq!(c.peek_fresh(), Ok(None));
        // A producer index beyond the queue's depth is corruption.
        (&m).head().store(100, Ordering::Release);
        assert!(c.peek_fresh().is_err());
    }

    #[test]
    fn peek_write_front_advance() {
        let m = mem(2, 0);
        let (mut p, mut c) = (Producer::new(&m), Consumer::new(&m));
        p.push(5).unwrap();
        assert_eq!(c.peek(), Ok(Some(5)));
        c.write_front(6);
        c.advance();
        assert_eq!(p.slot_of(0), 6, "the producer sees the completion status");
        assert_eq!(p.consumed(), Ok(1));
    }
}
