//! loom models of an applet's cross-thread inbox (`engine/inbox.rs`, built
//! alone under `--cfg loom` as `unet::inbox`): every interleaving of
//! producers pushing frames and messages of mixed sizes and the owner
//! draining them, on the real inbox code. The ring's bytes are watched by
//! loom a word at a time (`Ring::held_read`, `Ring::held_write`), so a missing
//! release or acquire on the tail or on the given-back position makes a
//! model fail: the owner would read bytes a producer is still writing, or
//! a producer overwrite bytes the owner is still reading in place. The
//! producers' lock is loom's mutex here, and so is the owner's, `Locked`'s
//! (in the engine, the endpoint's receive lock, which `Port::drain_inbox`
//! takes as its proof): loom's cell holds the owner's position and fails a
//! model whose consumer calls overlap. The biased lock they are in the
//! engine has its own model (`tests/loom_biased.rs`).
//!
//! Each model checks, besides loom's data races: every message accepted
//! is run once, in its producer's order (nothing lost, nothing twice),
//! with the bytes written (no torn message); the budgets hold at every
//! push (frames, and bytes as the inbox counts them, until a frame's run
//! returns); a drain runs fewer than twice the frame budget; the counts
//! (drains' returns, the closing's) are exact. A push refused as full is
//! retried once after a yield, then counted as refused: a producer that
//! spins until the owner frees room makes loom's exploration endless.
//!
//! loom explores interleavings with at most 3 preemptions (2 for the
//! longest model), its advice for models of this size: unbounded, one
//! model ran past 15 minutes. Each `Acquire` and `Release` of the inbox
//! weakened to `Relaxed` is still found (docs/benchmarks.md, the
//! 2026-12-01 wip-inboxloom section).
//!
//! The bookkeeping that checks budgets and order is in `std` atomics,
//! which loom does not see: they add no ordering between the threads (loom
//! runs one thread at a time, so they are exact).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p unet --release --test loom_inbox`.
#![cfg(loom)]

use std::sync::Arc as StdArc;
use std::sync::atomic::{AtomicU64 as Ghost, Ordering::SeqCst};

use loom::sync::Arc;
use loom::thread;
use unet::inbox::{Locked, Refused};

/// What a message without a frame counts beyond its bytes
/// (`MESSAGE_COUNTED_EXTRA`, a frame's header).
const EXTRA: u64 = 54;

/// One message: its length, and whether it goes as a frame (`push`) or
/// as a message alone (`push_message`).
#[derive(Clone, Copy, Debug)]
struct Msg(usize, bool);

/// A frame of `n` bytes.
const fn frame(n: usize) -> Msg {
    Msg(n, true)
}

/// A message of `n` bytes without a frame.
const fn message(n: usize) -> Msg {
    Msg(n, false)
}

/// Byte `i` of producer `who`'s message `k`: differs between messages,
/// producers and positions, so that a torn or misplaced message shows.
fn byte(who: u16, k: usize, i: usize) -> u8 {
    (who as u8)
        .wrapping_mul(101)
        .wrapping_add((k as u8).wrapping_mul(37))
        .wrapping_add((i as u8).wrapping_mul(7))
        .wrapping_add(1)
}

/// What a message counts against the byte budget.
fn counted(m: Msg) -> u64 {
    m.0 as u64 + if m.1 { 0 } else { EXTRA }
}

/// The model's bookkeeping, invisible to loom.
#[derive(Default)]
struct Book {
    /// Frames and counted bytes pushed whose run has not returned.
    frames: Ghost,
    bytes: Ghost,
    /// Each producer's messages accepted and run (bit `k` for message `k`).
    accepted: [Ghost; 2],
    run: [Ghost; 2],
    /// Each producer's next message in order: the one after the last run.
    next: [Ghost; 2],
    /// Pushes refused as full, and of them those whose retry succeeded.
    refused: Ghost,
    retried: Ghost,
}

/// The inbox and its budgets.
struct Model {
    inbox: Locked,
    frames: u64,
    bytes: u64,
    book: StdArc<Book>,
}

/// A message's channel: its producer and its number, so that the owner
/// knows which it runs.
fn chan(who: u16, k: usize) -> u16 {
    who << 8 | k as u16
}

impl Model {
    fn new(frames: usize, bytes: usize) -> Arc<Model> {
        Arc::new(Model {
            inbox: Locked::new(frames, bytes),
            frames: frames as u64,
            bytes: bytes as u64,
            book: StdArc::new(Book::default()),
        })
    }

    /// Producer `who` pushes `msgs` in order, each tried `tries` times
    /// while refused as full (yielding to the owner between, which frees
    /// room as it runs them), then given up and counted as refused. No
    /// push waits for the owner: a spinning producer makes loom's
    /// exploration endless.
    fn produce(&self, who: u16, msgs: &[Msg], tries: usize) {
        for (k, &m) in msgs.iter().enumerate() {
            for t in 0..tries {
                match self.push(who, k, m) {
                    Ok(()) => {
                        self.book.accepted[who as usize].fetch_or(1 << k, SeqCst);
                        if t > 0 {
                            self.book.retried.fetch_add(1, SeqCst);
                        }
                        break;
                    }
                    Err(Refused::Full) => {
                        self.book.refused.fetch_add(1, SeqCst);
                        thread::yield_now();
                    }
                    Err(Refused::Closed) => panic!("not closed in this model"),
                }
            }
        }
    }

    /// Producer `who` pushes `msgs` in order until the inbox is closed
    /// (each within the budgets); how many were accepted.
    fn produce_until_closed(&self, who: u16, msgs: &[Msg]) -> u64 {
        let mut accepted = 0;
        for (k, &msg) in msgs.iter().enumerate() {
            match self.push(who, k, msg) {
                Ok(()) => accepted += 1,
                Err(Refused::Closed) => break,
                Err(Refused::Full) => panic!("within the budgets"),
            }
        }
        accepted
    }

    /// One push of producer `who`'s message `k`.
    fn push(&self, who: u16, k: usize, m: Msg) -> Result<(), Refused> {
        let fill = |b: &mut [u8]| {
            assert_eq!(b.len(), m.0);
            for (i, x) in b.iter_mut().enumerate() {
                *x = byte(who, k, i);
            }
            // Counted from now (before its publication) until its run
            // returns: within the budgets at every moment.
            let f = self.book.frames.fetch_add(1, SeqCst) + 1;
            let b = self.book.bytes.fetch_add(counted(m), SeqCst) + counted(m);
            assert!(
                f <= self.frames,
                "{f} frames waiting, budget {}",
                self.frames
            );
            assert!(b <= self.bytes, "{b} bytes waiting, budget {}", self.bytes);
        };
        if m.1 {
            self.inbox.push(chan(who, k), m.0, fill)
        } else {
            self.inbox.push_message(chan(who, k), m.0, fill)
        }
    }

    /// One drain by the owner, checking each message against what its
    /// producer sent (`sent[who]`): after the last one it ran of that
    /// producer, not run before, its length, kind and bytes. `pause` yields
    /// inside each run, while the message is read in place. Returns how
    /// many it ran.
    fn drain(&self, sent: &[&[Msg]], pause: bool) -> u64 {
        let n = self.inbox.drain(|c, framed, bytes| {
            let (who, k) = ((c >> 8) as usize, (c & 0xff) as usize);
            let next = self.book.next[who].swap(k as u64 + 1, SeqCst);
            assert!(
                k as u64 >= next,
                "producer {who}'s message {k} after {next}"
            );
            let m = sent[who][k];
            assert_eq!(
                (bytes.len(), framed),
                (m.0, m.1),
                "producer {who}'s message {k}"
            );
            if pause {
                thread::yield_now();
            }
            for (i, &x) in bytes.iter().enumerate() {
                assert_eq!(
                    x,
                    byte(who as u16, k, i),
                    "producer {who}'s message {k}, byte {i}"
                );
            }
            let before = self.book.run[who].fetch_or(1 << k, SeqCst);
            assert_eq!(before & 1 << k, 0, "producer {who}'s message {k} run twice");
            self.book.frames.fetch_sub(1, SeqCst);
            self.book.bytes.fetch_sub(counted(m), SeqCst);
            true
        });
        // The bound: the tail is read again only while fewer than the
        // frame budget have run.
        assert!(
            n < 2 * self.frames,
            "one drain ran {n} frames, budget {}",
            self.frames
        );
        n
    }

    /// A round trip's first exchange, on the owner's thread before the
    /// producers start: an empty frame (8 bytes of the ring) pushed, run
    /// and answered, so that the drain of the next frame, run alone, may
    /// mark the ring empty within the warm window.
    fn answered_once(&self) {
        self.inbox.push(0, 0, |_| ()).unwrap();
        assert_eq!(self.inbox.drain(|_, _, bytes| bytes.is_empty()), 1);
        self.inbox.answered();
    }

    /// All the runs so far, counted.
    fn runs(&self) -> u64 {
        self.book
            .run
            .iter()
            .map(|r| u64::from(r.load(SeqCst).count_ones()))
            .sum()
    }

    /// The owner's side: `drains` drains while the producers run, then,
    /// once they are joined (`join`), drains until empty. The drains'
    /// returns add up to the runs exactly, and every message accepted is
    /// run (none refused is).
    fn consume(&self, sent: &[&[Msg]], drains: usize, pause: bool, join: impl FnOnce()) {
        let mut ran = 0;
        for _ in 0..drains {
            let n = self.drain(sent, pause);
            if n > 0 {
                // An owner that answers each drain (a round trip's does,
                // one frame a drain): its drains mark the ring empty for
                // producers within the warm window.
                self.inbox.answered();
            }
            ran += n;
            assert_eq!(ran, self.runs());
        }
        join();
        loop {
            let n = self.drain(sent, false);
            if n == 0 {
                break;
            }
            ran += n;
        }
        assert_eq!(ran, self.runs());
        assert!(self.inbox.is_empty());
        assert_eq!(self.book.frames.load(SeqCst), 0);
        assert_eq!(self.book.bytes.load(SeqCst), 0);
        for who in 0..sent.len() {
            let b = &self.book;
            assert_eq!(
                b.run[who].load(SeqCst),
                b.accepted[who].load(SeqCst),
                "producer {who}"
            );
        }
    }
}

/// Runs `f` in every interleaving loom explores: those with at most
/// `preemptions` preemptions (unless `LOOM_MAX_PREEMPTIONS` says
/// otherwise).
fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(preemptions);
    }
    b.check(f);
}

/// The models' preemption bound: loom's advice is that 2 or 3 find most
/// bugs, and each ordering weakened to `Relaxed` is found with it
/// (docs/benchmarks.md).
const PREEMPTIONS: usize = 3;

/// Paddings to the ring's end so far on this thread: because a frame did
/// not fit before it, and because the ring was empty past its warm start.
fn padded() -> [u64; 2] {
    unet::inbox::PADDED.with(|c| c.get())
}

/// One producer and the owner: `msgs` through an inbox of `frames` frames
/// and `bytes` bytes, each push tried twice at most, the owner draining
/// `drains` times while the producer runs (after a round trip's first
/// exchange if `answered`, [`Model::answered_once`]). Returns how many
/// pushes were refused and how many of those succeeded on their retry,
/// over every interleaving.
fn one_producer(
    frames: usize,
    bytes: usize,
    msgs: &'static [Msg],
    drains: usize,
    pause: bool,
    preemptions: usize,
    answered: bool,
) -> (u64, u64) {
    let seen = StdArc::new([Ghost::new(0), Ghost::new(0)]);
    let out = seen.clone();
    model(preemptions, move || {
        let m = Model::new(frames, bytes);
        if answered {
            m.answered_once();
        }
        let p = m.clone();
        let t = thread::spawn(move || p.produce(0, msgs, 2));
        let sent: [&[Msg]; 1] = [msgs];
        m.consume(&sent, drains, pause, || t.join().unwrap());
        seen[0].fetch_add(m.book.refused.load(SeqCst), SeqCst);
        seen[1].fetch_add(m.book.retried.load(SeqCst), SeqCst);
    });
    (out[0].load(SeqCst), out[1].load(SeqCst))
}

/// Mixed sizes, one frame at a time: a ring of 168 bytes (one frame, 60
/// bytes: `ring_size`), footprints of 48, 16, 48 and 8 bytes, so that the
/// fourth push, past the warm start (the model's `HOT`, 64 bytes) and 96
/// bytes on from where the producer last looked (`HOT_CHECK`), finds the
/// ring empty and goes back to its start. The frame budget of one refuses a push
/// made while the previous message waits: it is retried once. The owner
/// yields inside each run, while it reads the message in place and the
/// producer may write the next.
#[test]
fn mixed_sizes_one_frame_at_a_time_back_to_the_warm_start() {
    static MSGS: [Msg; 4] = [frame(40), message(3), frame(40), frame(0)];
    let before = padded();
    let (refused, retried) = one_producer(1, 60, &MSGS, 2, true, PREEMPTIONS, false);
    assert!(
        refused > 0 && retried > 0,
        "refused {refused}, retried {retried}"
    );
    let after = padded();
    assert!(after[1] > before[1], "{before:?} {after:?}");
}

/// Two frames waiting at once (the owner runs one in place while the
/// other is written), through the ring's end: 264 bytes (two frames, 100
/// bytes), the warm window the model's 96 to 128 bytes, after a round
/// trip's first exchange (8 bytes). Footprints of 104, 32, 32 and 104:
/// the second push, if the owner has run the first alone, finds the ring
/// marked empty at 112 bytes and goes back to its start (writing nothing
/// there: the fourth is then written over the place it left, which the
/// owner must skip unread); else the third and fourth write on, and the
/// fourth does not fit before the ring's end (a padding, then the start).
#[test]
fn two_waiting_through_the_ring_end() {
    static MSGS: [Msg; 4] = [frame(96), frame(20), message(20), frame(96)];
    let before = padded();
    one_producer(2, 100, &MSGS, 2, false, 2, true);
    let after = padded();
    assert!(
        after[0] > before[0] && after[1] > before[1],
        "{before:?} {after:?}"
    );
}

/// The byte budget before the frame budget: 60 bytes and four frames, so
/// that a message (its bytes and a frame's header) waits alone and two
/// frames of 30 fill the budget.
#[test]
fn the_byte_budget_refuses_and_the_retry_succeeds() {
    static MSGS: [Msg; 3] = [frame(30), frame(30), message(6)];
    let (refused, retried) = one_producer(4, 60, &MSGS, 1, false, PREEMPTIONS, false);
    assert!(
        refused > 0 && retried > 0,
        "refused {refused}, retried {retried}"
    );
}

/// Two producers and the owner (three threads): each producer's messages
/// run once each, in its order, whatever the interleaving of the other's.
#[test]
fn two_producers_and_the_owner() {
    static A: [Msg; 2] = [frame(12), message(4)];
    static B: [Msg; 1] = [frame(20)];
    model(PREEMPTIONS, || {
        let m = Model::new(2, 100);
        let (pa, pb) = (m.clone(), m.clone());
        let ta = thread::spawn(move || pa.produce(0, &A, 1));
        let tb = thread::spawn(move || pb.produce(1, &B, 1));
        let sent: [&[Msg]; 2] = [&A, &B];
        m.consume(&sent, 1, false, || {
            ta.join().unwrap();
            tb.join().unwrap();
        });
    });
}

/// The closing against a producer: each message is run by a drain,
/// counted by the closing, or refused as closed, exactly once, and the
/// pushes that took the lock before the closing are all found by it.
#[test]
fn the_closing_counts_each_message_once() {
    static MSGS: [Msg; 3] = [frame(8), message(2), frame(16)];
    model(PREEMPTIONS, || {
        let m = Model::new(3, 200);
        let p = m.clone();
        let t = thread::spawn(move || p.produce_until_closed(0, &MSGS));
        let sent: [&[Msg]; 1] = [&MSGS];
        let ran = m.drain(&sent, false);
        let closed = m.inbox.close();
        let accepted = t.join().unwrap();
        assert_eq!(ran + closed, accepted);
        assert_eq!(m.runs(), ran);
        assert!(m.inbox.is_empty());
        assert_eq!(m.inbox.push(0, 1, |_| ()), Err(Refused::Closed));
    });
}

/// A header that fails its check (memory corruption, written by
/// `corrupt_next` over the first message) against a producer and the
/// closing: the owner's drain and the closing's each may meet it, and
/// then drop the rest under the consumer's lock, taking the producers'
/// lock inside it (`Inbox::drop_rest`); loom reports a deadlock if any
/// path takes the two the other way round. Each message accepted is
/// dropped behind the header (`dropped`) or counted by the closing,
/// exactly once; none is run (every drain meets the header first).
#[test]
fn a_bad_header_drops_the_rest_against_a_producer_and_the_closing() {
    static FIRST: Msg = frame(8);
    static MSGS: [Msg; 2] = [frame(8), message(2)];
    model(PREEMPTIONS, || {
        let m = Model::new(3, 200);
        m.push(0, 0, FIRST).unwrap();
        m.inbox.corrupt_next();
        let p = m.clone();
        let producer = thread::spawn(move || p.produce_until_closed(1, &MSGS));
        let c = m.clone();
        let closer = thread::spawn(move || c.inbox.close());
        let sent: [&[Msg]; 2] = [&[FIRST], &MSGS];
        let ran = m.drain(&sent, false);
        let closed = closer.join().unwrap();
        let accepted = producer.join().unwrap();
        assert_eq!(ran, 0);
        assert_eq!(m.inbox.dropped() + closed, 1 + accepted);
        assert!(m.inbox.dropped() >= 1, "the bad header's own message");
        assert!(m.inbox.is_empty());
    });
}

/// The budget the dropped messages held comes back: an inbox of three
/// frames whose three messages wait behind a bad header, dropped by a
/// drain while a producer pushes, takes three frames again once the
/// producer's are run.
#[test]
fn the_budget_behind_a_bad_header_comes_back() {
    static FIRST: [Msg; 2] = [frame(8), frame(16)];
    static MSGS: [Msg; 1] = [message(2)];
    model(PREEMPTIONS, || {
        let m = Model::new(3, 200);
        for (k, &msg) in FIRST.iter().enumerate() {
            m.push(0, k, msg).unwrap();
        }
        m.inbox.corrupt_next();
        let p = m.clone();
        let producer = thread::spawn(move || p.push(1, 0, MSGS[0]));
        let sent: [&[Msg]; 2] = [&FIRST, &MSGS];
        let ran = m.drain(&sent, false);
        producer.join().unwrap().expect("within the budgets");
        // A message pushed after the drop waits; one before it was dropped.
        let after = m.drain(&sent, false);
        assert_eq!(ran, 0);
        assert_eq!(m.inbox.dropped() + after, 3);
        assert!(m.inbox.is_empty());
        for k in 0..3 {
            assert_eq!(m.inbox.push(9, 1, |_| ()), Ok(()), "frame {k} of 3");
        }
    });
}

/// A bad header past the ring's end, behind entries that run: an inbox of
/// four frames and 80 bytes (a ring of 256, the warm start at 64) whose
/// set-up drains leave the consumer at 176, then X (24 bytes, at 176), a
/// padding at 208 (Y does not fit before the end), Y (48 bytes, at the
/// ring's start), Z (its header corrupted, `corrupt_after`) and W. While a
/// producer pushes a frame (refused while the four wait, taken once X's
/// budget is back), the owner's drain runs X and Y, and only them, then
/// drops Z, W and the producer's frame if it was published by then,
/// counted; its return is the two it ran. Everything dropped gives its
/// budget back: four frames of 20 bytes are taken after. The drain runs
/// fewer than twice the frame budget (`Model::drain`): it never loops.
/// Over the interleavings, the producer's frame is dropped behind the
/// header in some, run by the next drain in others, and refused as full
/// at first in others (checked: each happens).
#[test]
fn a_bad_header_past_the_ring_end_drops_the_rest_after_those_before_it_run() {
    static SET_UP: [Msg; 7] = [
        frame(72),
        frame(56),
        frame(24),
        frame(24),
        frame(48),
        frame(0),
        frame(2),
    ];
    static LATE: [Msg; 1] = [frame(4)];
    let before = padded();
    // Interleavings in which the late frame was dropped behind the bad
    // header, run by the next drain, and refused as full at first.
    let seen = StdArc::new([Ghost::new(0), Ghost::new(0), Ghost::new(0)]);
    let out = seen.clone();
    model(PREEMPTIONS, move || {
        let m = Model::new(4, 80);
        let sent: [&[Msg]; 2] = [&SET_UP, &LATE];
        // S0 runs; S1 and S2 wait while S2 is pushed past the warm start
        // (no padding back: the ring is not empty), then run.
        m.push(0, 0, SET_UP[0]).unwrap();
        assert_eq!(m.drain(&sent, false), 1);
        m.push(0, 1, SET_UP[1]).unwrap();
        m.push(0, 2, SET_UP[2]).unwrap();
        assert_eq!(m.drain(&sent, false), 2);
        let padded_before = padded()[0];
        for (k, &msg) in SET_UP.iter().enumerate().skip(3) {
            m.push(0, k, msg).unwrap();
        }
        assert_eq!(padded()[0], padded_before + 1, "Y went past the ring's end");
        // X, Y run; Z's header is bad.
        m.inbox.corrupt_after(2);
        let p = m.clone();
        let producer = thread::spawn(move || p.produce(1, &LATE, 2));
        let ran = m.drain(&sent, false);
        producer.join().unwrap();
        assert_eq!(ran, 2, "X and Y, before the bad header");
        assert_eq!(
            m.book.run[0].load(SeqCst),
            0b1_1111,
            "S0 to Y ran, Z and W not"
        );
        let late = m.book.accepted[1].load(SeqCst);
        let after = m.drain(&sent, false);
        assert_eq!(m.inbox.dropped() + after, 2 + u64::from(late.count_ones()));
        assert!(m.inbox.dropped() >= 2, "Z and W dropped, counted");
        assert_eq!(m.runs(), 5 + after);
        assert!(m.inbox.is_empty());
        // The whole budget back: four frames, 80 bytes.
        for k in 0..4 {
            assert_eq!(m.inbox.push(9, 20, |_| ()), Ok(()), "frame {k} of 4");
        }
        assert_eq!(m.inbox.push(9, 0, |_| ()), Err(Refused::Full));
        seen[0].fetch_add(u64::from(m.inbox.dropped() == 3), SeqCst);
        seen[1].fetch_add(after, SeqCst);
        seen[2].fetch_add(m.book.refused.load(SeqCst), SeqCst);
    });
    assert!(padded()[0] > before[0]);
    let seen = out.each_ref().map(|g| g.load(SeqCst));
    assert!(
        seen.iter().all(|&n| n > 0),
        "dropped, run after, refused: {seen:?}"
    );
}
