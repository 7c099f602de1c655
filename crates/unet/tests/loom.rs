//! loom models of the endpoint queues (`unet::ring`): every interleaving of
//! a producer and a consumer on the real queue code, with slots that loom
//! watches for data races. A missing release or acquire on either index
//! makes a model fail: the consumer would read a slot the producer is
//! still writing, or the producer overwrite one the consumer is reading.
//! The receive queue's seal protocol is the ring's too
//! (`unet::ring::write_sealed`, `Consumer::take_sealed`): the models below
//! run it, with only the slots' memory and their seal bytes supplied here.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p unet --release --test loom`.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use loom::thread;
use unet::ring::{Consumer, Producer, QueueMem, SealedMem, write_sealed};

/// A queue in loom-tracked memory.
struct Mem {
    head: AtomicU32,
    tail: AtomicU32,
    slots: Vec<UnsafeCell<u64>>,
    /// Each slot's seal, as a receive queue's (`unet::shm::RX_SEALED`):
    /// set by the ring's `write_sealed` after the slot.
    seals: Vec<AtomicU8>,
    /// The seal's ordering as `SealedMem::seal_ordering` gives it to the
    /// ring's `seal`: `Release`, as for every queue; `Relaxed` in the model
    /// that must fail.
    seal: Ordering,
}

#[derive(Clone)]
struct Q(Arc<Mem>);

impl Q {
    fn new(depth: usize, start: u32) -> Q {
        Q::sealing(depth, start, Ordering::Release)
    }

    fn sealing(depth: usize, start: u32, seal: Ordering) -> Q {
        Q(Arc::new(Mem {
            head: AtomicU32::new(start),
            tail: AtomicU32::new(start),
            slots: (0..depth).map(|_| UnsafeCell::new(0)).collect(),
            seals: (0..depth).map(|_| AtomicU8::new(0)).collect(),
            seal,
        }))
    }
}

impl QueueMem<u64> for Q {
    fn head(&self) -> &AtomicU32 {
        &self.0.head
    }
    fn tail(&self) -> &AtomicU32 {
        &self.0.tail
    }
    fn depth(&self) -> u32 {
        self.0.slots.len() as u32
    }
    fn read(&self, i: u32) -> u64 {
        // SAFETY: loom checks that no write to this slot races with the read.
        self.0.slots[i as usize].with(|p| unsafe { *p })
    }
    fn write(&self, n: u32, v: u64) {
        let i = n & (self.depth() - 1);
        // The slot, then its seal, by the ring's code (as a receive queue's
        // `ShmQueue` writes a slot).
        write_sealed(self, n, || {
            // SAFETY: loom checks that no access to this slot races with the write.
            self.0.slots[i as usize].with_mut(|p| unsafe { *p = v });
        });
    }
}

impl SealedMem for Q {
    type Slot<'a> = usize;
    fn slot(&self, n: u32) -> usize {
        (n & (self.depth() - 1)) as usize
    }
    fn seal_of(&self, slot: usize) -> &AtomicU8 {
        &self.0.seals[slot]
    }
    fn seal_ordering(&self) -> Ordering {
        self.0.seal
    }
}

/// The producer pushes `n` values through a queue of `depth` slots, waiting
/// when it is full; the consumer must see exactly 1..=n in order.
fn transfer(depth: usize, n: u64, start: u32) {
    loom::model(move || {
        let q = Q::new(depth, start);
        let mut p = Producer::new(q.clone());
        let mut c = Consumer::new(q);
        let t = thread::spawn(move || {
            for v in 1..=n {
                while !p.push(v).expect("a correct consumer") {
                    thread::yield_now();
                }
            }
        });
        let mut next = 1;
        while next <= n {
            match c.pop().expect("a correct producer") {
                Some(v) => {
                    assert_eq!(v, next);
                    next += 1;
                }
                None => thread::yield_now(),
            }
        }
        t.join().unwrap();
        assert_eq!(c.pop(), Ok(None));
    });
}

#[test]
fn transmit_queue_in_order_through_a_full_queue() {
    // Three values through two slots: the producer must wait for a slot
    // the consumer frees, and reuse it only after the consumer's read.
    transfer(2, 3, 0);
}

#[test]
fn in_order_across_the_index_wrap() {
    transfer(2, 3, u32::MAX - 1);
}

/// The free queue's pattern: the application gives buffers back while the
/// engine takes them, and the engine's completion status written into the
/// front slot (`write_front`) is seen by the producer only after the
/// consumer index moves past it.
#[test]
fn completion_status_is_published_with_the_consumer_index() {
    loom::model(|| {
        let q = Q::new(2, 0);
        let mut p = Producer::new(q.clone());
        let mut c = Consumer::new(q);
        p.push(10).unwrap();
        let t = thread::spawn(move || {
            loop {
                match c.peek().unwrap() {
                    Some(v) => {
                        c.write_front(v + 1);
                        c.advance();
                        break;
                    }
                    None => thread::yield_now(),
                }
            }
        });
        loop {
            if p.consumed().unwrap() == 1 {
                assert_eq!(p.slot_of(0), 11);
                break;
            }
            thread::yield_now();
        }
        t.join().unwrap();
    });
}

/// A batch written without publishing, then one release store of the
/// producer index (the engine's receive descriptors publish this way, for
/// a consumer that reads the index; the one that watches the seals is
/// modelled below). The consumer sees none or all of a batch's items, in
/// order, and never a slot still being written.
#[test]
fn a_batch_published_at_once_is_seen_whole_and_in_order() {
    loom::model(|| {
        let q = Q::new(4, u32::MAX - 1);
        let mut p = Producer::new(q.clone());
        let mut c = Consumer::new(q);
        let t = thread::spawn(move || {
            for batch in [[1, 2], [3, 4]] {
                for v in batch {
                    while !p.push_unpublished(v).expect("a correct consumer") {
                        thread::yield_now();
                    }
                }
                p.publish();
            }
        });
        let mut next = 1;
        while next <= 4 {
            match c.pop().expect("a correct producer") {
                Some(v) => {
                    assert_eq!(v, next);
                    if v % 2 == 1 {
                        // The first of a batch: its second was published
                        // with it (and the next batch may be too).
                        assert!(c.available().expect("consistent") >= 1);
                    }
                    next += 1;
                }
                None => thread::yield_now(),
            }
        }
        t.join().unwrap();
    });
}

/// The receive queue's consumer as `Endpoint::rx_front` runs it, on the
/// ring's seal protocol: it learns of the front item from its slot's seal
/// (`Consumer::take_sealed`: the seal loaded with acquire ordering, then
/// taken), not from the producer index, reads the slot and frees it
/// (`advance`: the consumer index, release). The producer writes each slot
/// and then seals it (`QueueMem::write` through the ring's `write_sealed`),
/// and publishes the index after each item, as the engine does. Three
/// items through two slots: a slot is reused only after the consumer took
/// its seal and freed it, so a seal the consumer sees is always the next
/// lap's, never a stale one.
fn sealed_transfer(depth: usize, n: u64, start: u32, seal: Ordering) {
    loom::model(move || {
        let q = Q::sealing(depth, start, seal);
        let mut p = Producer::new(q.clone());
        let mut c = Consumer::new(q.clone());
        let t = thread::spawn(move || {
            for v in 1..=n {
                while !p.push(v).expect("a correct consumer") {
                    thread::yield_now();
                }
            }
        });
        let mut next = 1;
        while next <= n {
            let Some(i) = c.take_sealed() else {
                thread::yield_now();
                continue;
            };
            assert_eq!(q.read(i & (depth as u32 - 1)), next);
            c.advance();
            next += 1;
        }
        t.join().unwrap();
        assert_eq!(c.take_sealed(), None);
        assert_eq!(c.pop(), Ok(None));
    });
}

#[test]
fn a_receiver_that_watches_the_seal_reads_each_slot_whole_and_in_order() {
    sealed_transfer(2, 3, 0, Ordering::Release);
}

#[test]
fn the_seal_across_the_index_wrap() {
    sealed_transfer(2, 3, u32::MAX - 1, Ordering::Release);
}

/// The same with the seal stored `Relaxed`: the consumer may read a slot
/// whose bytes it is not yet ordered after, which loom reports. This is
/// the model's own check that it can fail.
#[test]
#[should_panic(expected = "Causality violation")]
fn a_relaxed_seal_is_caught() {
    sealed_transfer(2, 1, 0, Ordering::Relaxed);
}

/// A run lent to a writer outside the producer (the JIT's inline push,
/// `Producer::lend`): it writes and seals each slot itself, so the
/// consumer, watching the seals, may take and free them, and move its
/// index past the producer's own count, before the producer counts them
/// (`Producer::filled_many`, the engine's take-back). The producer reads
/// the consumer's index only after that count, and then finds it
/// consistent (no `Corrupt`) and pushes on through the freed slots; the
/// consumer reads every item whole and in order.
#[test]
fn a_lent_run_is_taken_before_the_producer_counts_it() {
    loom::model(|| {
        let q = Q::new(2, u32::MAX);
        let mut p = Producer::new(q.clone());
        let mut c = Consumer::new(q.clone());
        let w = q.clone();
        let t = thread::spawn(move || {
            let (head, room) = p.lend();
            assert_eq!(room, 2);
            for k in 0..2u32 {
                // The slot and its seal, by a writer that is not `p`.
                w.write(head.wrapping_add(k), u64::from(k) + 1);
            }
            p.filled_many(2);
            p.publish();
            while !p.push(3).expect("the consumer's index is consistent") {
                thread::yield_now();
            }
            assert_eq!(p.pushed(), head.wrapping_add(3));
        });
        let mut next = 1;
        while next <= 3 {
            let Some(i) = c.take_sealed() else {
                thread::yield_now();
                continue;
            };
            assert_eq!(q.read(i & 1), next);
            c.advance();
            next += 1;
        }
        t.join().unwrap();
        assert_eq!(c.take_sealed(), None);
    });
}
