//! The ring's own tests: wrapping, a frame exactly the space left, the
//! budgets' refusals, the warm restart, several producers, and closing
//! while producers push (every frame consumed or refused exactly once).

use super::*;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A frame of `len` bytes whose contents name `tag`.
fn fill_with(tag: u8) -> impl FnOnce(&mut [u8]) {
    move |b: &mut [u8]| b.fill(tag)
}

/// Drains everything: (channel, length, first byte) of each frame, and
/// checks each frame is filled with its first byte.
fn take_all(i: &Locked) -> Vec<(u16, usize, u8)> {
    let mut v = Vec::new();
    i.drain(|chan, _, f| {
        let b = f.first().copied().unwrap_or(0);
        assert!(f.iter().all(|&x| x == b), "a frame's bytes came back whole");
        v.push((chan, f.len(), b));
        true
    });
    v
}

#[test]
fn frames_come_back_in_order_across_the_ring_end() {
    // 64 frames of 100 bytes through a ring of a few hundred: it wraps
    // many times, with padding before the end each time a frame does not
    // fit there.
    let i = Locked::new(3, 300);
    assert_eq!(i.size, ring_size(3, 300));
    let mut seen = 0;
    for k in 0..64u8 {
        i.push(u16::from(k), 100, fill_with(k)).unwrap();
        if k % 2 == 1 {
            let got = take_all(&i);
            assert_eq!(
                got,
                vec![(u16::from(k - 1), 100, k - 1), (u16::from(k), 100, k)]
            );
            seen += 2;
        }
        // Never more than the ring's size ahead of what was given back.
        let p = lock(&i.prod.0);
        assert!(p.tail - i.given.0.head.load(Ordering::Relaxed) <= i.size as u64);
    }
    assert_eq!(seen, 64);
    assert!(lock(&i.prod.0).tail > 4 * i.size as u64, "it went round");
    assert!(i.is_empty());
}

/// Pushes and drains frames until the tail is at `to` (a multiple of 8),
/// the consumer's mark of the empty ring ([`Inbox::idle`]) forgotten
/// after each drain: so that no push goes back to the ring's start on
/// the way, nor the next one from `to`.
fn advance(i: &Locked, to: u64) {
    loop {
        let left = to - lock(&i.prod.0).tail;
        if left == 0 {
            return;
        }
        let len = left.min(504) as usize - HDR;
        i.push(0, len, fill_with(0)).unwrap();
        take_all(i);
        i.idle.0.store(u64::MAX, Ordering::Relaxed);
    }
}

/// The ring starts on a cache line, for budgets of every size (a large
/// block comes from `mmap` 16 bytes past a page's start), so that a
/// 56-byte message and its header fill one line: each message's entry
/// at 56 bytes lies in one line, the second one's included. (Three are
/// pushed: the third, alone when its turn comes, is read from its copy
/// beside the tag, outside the ring.)
#[test]
fn the_ring_starts_on_a_cache_line_and_a_56_byte_message_fills_one() {
    for (frames, bytes) in [(4, 400), (64, 64 << 10), (1024, 4 << 20)] {
        let i = Locked::new(frames, bytes);
        for k in 0..3u8 {
            i.push_message(0, 56, fill_with(k)).unwrap();
        }
        let ring = i.ring.get().expect("made at the first push");
        assert_eq!(
            ring.ptr.as_ptr() as usize % LINE,
            0,
            "budgets {frames} / {bytes}"
        );
        let start = ring.ptr.as_ptr() as usize;
        let mut lines = Vec::new();
        let end = start + i.size;
        i.drain(|_, _, f| {
            let (first, last) = (f.as_ptr() as usize - HDR, f.as_ptr() as usize + f.len() - 1);
            if (start..end).contains(&first) {
                lines.push(((first - start) / LINE, (last - start) / LINE));
            }
            true
        });
        assert_eq!(lines, [(0, 0), (1, 1)], "budgets {frames} / {bytes}");
    }
}

#[test]
fn a_frame_exactly_the_space_left_fits_without_padding() {
    let i = Locked::new(16, 1000);
    let size = i.size as u64;
    advance(&i, size - 40);
    // A frame of exactly the 40 bytes left (header included): no padding,
    // and the tail lands on the ring's end.
    i.push(2, 40 - HDR, fill_with(2)).unwrap();
    assert_eq!(lock(&i.prod.0).tail, size);
    // The next one starts at the ring's start, with no padding either.
    i.push(3, 8, fill_with(3)).unwrap();
    assert_eq!(lock(&i.prod.0).tail, size + footprint(8));
    assert_eq!(take_all(&i), vec![(2, 40 - HDR, 2), (3, 8, 3)]);
    // One byte more than the space left pads to the end first.
    let i = Locked::new(16, 1000);
    advance(&i, size - 40);
    i.push(2, 41 - HDR, fill_with(2)).unwrap();
    assert_eq!(lock(&i.prod.0).tail, size + footprint(41 - HDR));
    assert_eq!(take_all(&i), vec![(2, 41 - HDR, 2)]);
    // A full ring of frames within the budget: the padding then the
    // frames right up to what was given back.
    let i = Locked::new(16, 1000);
    advance(&i, size - 40);
    i.push(1, 500, fill_with(1)).unwrap();
    i.push(2, 500, fill_with(2)).unwrap();
    assert_eq!(take_all(&i), vec![(1, 500, 1), (2, 500, 2)]);
}

#[test]
fn frames_past_either_budget_are_refused_until_given_back() {
    // Four frames, 1,000 bytes.
    let i = Locked::new(4, 1000);
    for k in 0..4 {
        i.push(k, 10, fill_with(k as u8)).unwrap();
    }
    assert_eq!(
        i.push(9, 10, fill_with(9)),
        Err(Refused::Full),
        "a fifth frame"
    );
    assert_eq!(take_all(&i).len(), 4);
    // The space and the count came back.
    for k in 0..4 {
        i.push(k, 10, fill_with(k as u8)).unwrap();
    }
    take_all(&i);
    // Bytes: 600 + 400 fit exactly; one byte more does not.
    i.push(1, 600, fill_with(1)).unwrap();
    assert_eq!(i.push(2, 401, fill_with(2)), Err(Refused::Full));
    i.push(2, 400, fill_with(2)).unwrap();
    assert_eq!(
        i.push(3, 0, fill_with(3)),
        Ok(()),
        "an empty frame costs no bytes"
    );
    assert_eq!(i.push(4, 1, fill_with(4)), Err(Refused::Full));
    assert_eq!(take_all(&i), vec![(1, 600, 1), (2, 400, 2), (3, 0, 0)]);
    // A frame over the whole budget never fits; a budget of no frames
    // takes none.
    assert_eq!(i.push(5, 1001, fill_with(5)), Err(Refused::Full));
    let none = Locked::new(0, 1000);
    assert_eq!(none.push(1, 1, fill_with(1)), Err(Refused::Full));
    assert!(none.ring.get().is_none(), "no ring for no frame");
}

#[test]
fn a_drain_stops_where_told_and_gives_back_what_it_ran() {
    let i = Locked::new(64, 1 << 20);
    for k in 0..40u8 {
        i.push(u16::from(k), 32, fill_with(k)).unwrap();
    }
    let mut n = 0;
    assert_eq!(
        i.drain(|_, _, _| {
            n += 1;
            n < 20
        }),
        20
    );
    assert_eq!(i.given.0.frames.load(Ordering::Relaxed), 20);
    assert!(!i.is_empty());
    let rest = take_all(&i);
    assert_eq!(rest.first(), Some(&(20, 32, 20)));
    assert_eq!(rest.len(), 20);
    assert!(i.is_empty());
}

/// Drains everything, and gives for each frame the last entry the drain
/// had added to `asked` (a test hook: [`AHEAD`], [`OWN_LINES`]) by the
/// time it ran it: `None` if it added none for that frame.
fn drain_recording<T: Clone>(
    i: &Locked,
    asked: &'static std::thread::LocalKey<std::cell::RefCell<Vec<T>>>,
) -> Vec<Option<T>> {
    asked.with(|a| a.borrow_mut().clear());
    let (mut seen, mut got) = (0, Vec::new());
    i.drain(|_, _, _| {
        let all = asked.with(|a| a.borrow().clone());
        got.push((all.len() > seen).then(|| all[all.len() - 1].clone()));
        seen = all.len();
        true
    });
    got
}

/// Drains everything, and gives for each frame the line of the next
/// frame's header that the drain had asked for when it ran it ([`AHEAD`]):
/// `None` if nothing.
fn drain_asking(i: &Locked) -> Vec<Option<usize>> {
    drain_recording(i, &AHEAD)
}

#[test]
fn a_drain_asks_for_the_next_published_frames_header_while_it_runs_one() {
    let i = Locked::new(64, 1 << 20);
    let line = |at: u64| (at - at % 64) as usize;
    // A 1,000-byte frame, then an 8-byte one: running the first, the drain
    // asks for the line of the second's header; running the second, the
    // last published, for nothing.
    i.push(1, 1000, fill_with(1)).unwrap();
    i.push(1, 8, fill_with(2)).unwrap();
    assert_eq!(drain_asking(&i), vec![Some(line(footprint(1000))), None]);
    // Bursts of three: each frame but the last asks for the next one's
    // header line.
    for len in [4000, 600] {
        let start = lock(&i.prod.0).at;
        for k in 0..3 {
            i.push(1, len, fill_with(k)).unwrap();
        }
        let fp = footprint(len);
        assert_eq!(
            drain_asking(&i),
            vec![Some(line(start + fp)), Some(line(start + 2 * fp)), None],
            "{len} B"
        );
    }
    // Frames of up to four lines ask for nothing: 248 bytes (a footprint
    // of 256), and 40.
    for len in [248, 40] {
        for k in 0..3 {
            i.push(1, len, fill_with(k)).unwrap();
        }
        assert_eq!(drain_asking(&i), vec![None; 3], "{len} B");
    }
}

/// Drains everything, and gives for each frame the lines of its own that
/// the drain asked for before it ran it ([`OWN_LINES`]): `None` if none.
fn drain_asking_own(i: &Locked) -> Vec<Option<(usize, usize)>> {
    drain_recording(i, &OWN_LINES)
}

#[test]
fn the_last_frame_published_asks_for_its_own_lines_before_it_runs() {
    let i = Locked::new(64, 1 << 20);
    // The lines from the one holding the frame's first byte (past its
    // header) to the one holding its last, at most 64.
    let own = |start: u64, len: usize| {
        let at = start as usize + HDR;
        let first = at - at % 64;
        (first, (at + len - first).div_ceil(64).min(64))
    };
    for len in [600, 1000, 4000, 8184, 20_000] {
        let start = lock(&i.prod.0).at;
        i.push(1, len, fill_with(1)).unwrap();
        assert_eq!(drain_asking_own(&i), vec![Some(own(start, len))], "{len} B");
    }
    // Frames with others behind them ask for nothing of their own (they
    // ask for the next one's header), the last of them for its lines.
    let start = lock(&i.prod.0).at;
    for k in 0..3 {
        i.push(1, 1000, fill_with(k)).unwrap();
    }
    let fp = footprint(1000);
    assert_eq!(
        drain_asking_own(&i),
        vec![None, None, Some(own(start + 2 * fp, 1000))]
    );
    // Frames of up to eight lines, which a waiting consumer asks for
    // (`PREFETCH_LINES`), ask for nothing: 496 bytes (a footprint of 504)
    // at the ring's start, 248, and 40.
    let i = Locked::new(64, 1 << 20);
    for len in [496, 248, 40] {
        i.push(1, len, fill_with(1)).unwrap();
        assert_eq!(drain_asking_own(&i), vec![None], "{len} B");
    }
    // The same footprint from 40 bytes into a line (after those three,
    // at 808: 504 + 256 + 48) lies on nine lines, which no waiting
    // consumer asks for: the drain asks.
    let start = lock(&i.prod.0).at;
    assert_eq!(start % 64, 40, "where the fourth frame goes");
    i.push(1, 496, fill_with(1)).unwrap();
    assert_eq!(drain_asking_own(&i), vec![Some(own(start, 496))]);
}

/// Drains everything: for each entry its channel, whether it is a frame,
/// its bytes, and whether they were read in the ring (else from the
/// entry's copy beside the tag).
fn drain_places(i: &Locked) -> Vec<(u16, bool, Vec<u8>, bool)> {
    let ring = i.inbox.ring.get().expect("an entry was pushed");
    let (start, end) = (
        ring.ptr.as_ptr() as usize,
        ring.ptr.as_ptr() as usize + ring.len,
    );
    let mut v = Vec::new();
    i.drain(|chan, frame, b| {
        let at = b.as_ptr() as usize;
        v.push((chan, frame, b.to_vec(), (start..end).contains(&at)));
        true
    });
    v
}

/// `len` bytes that differ by position and by `k`: a word out of place
/// or from another entry shows.
fn pattern(k: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| k.wrapping_mul(31).wrapping_add(j as u8 * 7) | 1)
        .collect()
}

#[test]
fn a_short_entry_waiting_alone_is_read_from_its_copy_beside_the_tail() {
    let i = Locked::new(64, 1 << 20);
    let push = |k: u8, len: usize, frame: bool| {
        let bytes = pattern(k, len);
        let fill = |b: &mut [u8]| b.copy_from_slice(&bytes);
        if frame {
            i.push(u16::from(k) << 4, len, fill).unwrap();
        } else {
            i.push_message(u16::from(k) << 4, len, fill).unwrap();
        }
    };
    // Alone, every length up to `COPY_MAX`, a frame or a message: read
    // from the copy, its bytes, channel and kind the entry's.
    for len in 0..=COPY_MAX {
        for frame in [true, false] {
            let k = len as u8;
            push(k, len, frame);
            let got = drain_places(&i);
            assert_eq!(
                got,
                vec![(u16::from(k) << 4, frame, pattern(k, len), false)],
                "{len} B"
            );
        }
    }
    // One byte longer: from the ring.
    push(1, COPY_MAX + 1, false);
    assert_eq!(
        drain_places(&i),
        vec![(16, false, pattern(1, COPY_MAX + 1), true)]
    );
    // Three short ones waiting: the first two from the ring, the last,
    // alone by then, from its copy.
    for k in 1..=3 {
        push(k, 24, false);
    }
    let got = drain_places(&i);
    let places: Vec<bool> = got.iter().map(|g| g.3).collect();
    assert_eq!(places, [true, true, false]);
    for (k, g) in (1..=3).zip(&got) {
        assert_eq!(g.2, pattern(k, 24));
    }
    // A short one, then a long one: the short one is not alone at the
    // drain, and the tag is the long push's, without a copy: both from the
    // ring.
    push(4, 8, true);
    push(5, 200, true);
    let got = drain_places(&i);
    assert_eq!(got.iter().map(|g| g.3).collect::<Vec<_>>(), [true, true]);
    assert_eq!(
        (got[0].2.clone(), got[1].2.clone()),
        (pattern(4, 8), pattern(5, 200))
    );
    // The copy is the last push's only: a short one pushed and run, then
    // another short one, is read from the second's copy, not the first's.
    push(6, 16, false);
    assert_eq!(drain_places(&i), vec![(96, false, pattern(6, 16), false)]);
    push(7, 16, false);
    assert_eq!(drain_places(&i), vec![(112, false, pattern(7, 16), false)]);
}

/// A short entry's copy is read whole from the ring, past the entry's
/// end (`Ring::copy_words`): at the ring's end, it runs into the block's
/// slack past the ring, and the entry still comes back from its copy with
/// its own bytes, whatever the ring's and the slack's bytes are.
#[test]
fn a_short_entry_at_the_rings_end_is_copied_whole_from_past_it() {
    for len in 0..=COPY_MAX {
        let i = Locked::new(16, 1000);
        let size = i.size as u64;
        advance(&i, size - footprint(len));
        let bytes = pattern(len as u8, len);
        i.push(3, len, |b| b.copy_from_slice(&bytes)).unwrap();
        assert_eq!(lock(&i.prod.0).tail, size, "{len} B ends the ring");
        assert_eq!(drain_places(&i), vec![(3, true, bytes, false)], "{len} B");
    }
}

#[test]
fn a_round_trip_keeps_to_the_rings_warm_start() {
    // The default budgets (1,024 frames, 4 MiB): a ring of over 8 MiB.
    // One frame at a time, each drained before the next and answered (a
    // round trip's messages): from the second frame's drain on (the first
    // after an answer to one frame), the consumer marks the ring empty
    // once past the warm start (`WARM`, whatever the frames' size), and
    // the next push goes back to its start. Three passes over the warm
    // start of each size, and more.
    for len in [1, 40, 56, 57, 200, 1000, 4000] {
        let i = Locked::new(1024, 4 << 20);
        let pass = WARM.div_ceil(footprint(len)).max(1);
        let n = 3 * (pass + 1) + 200;
        let mut back = 0;
        for k in 0..n as u32 {
            let (before, tail) = {
                let p = lock(&i.prod.0);
                (p.at, p.tail)
            };
            i.push(1, len, fill_with(k as u8)).unwrap();
            assert_eq!(take_all(&i), vec![(1, len, k as u8)]);
            i.answered();
            let at = lock(&i.prod.0).at;
            assert!(
                k < 2 || at <= WARM + footprint(len),
                "{len} B, frame {k} ended at {at}, past the warm start"
            );
            if k > 0 && at == footprint(len) {
                assert!(before >= WARM, "{len} B went back from {before}");
                back += 1;
                // Where the consumer skips to the start unread.
                assert_eq!(i.restart.0.load(Ordering::Relaxed), tail);
            }
        }
        // Once a pass over the warm start.
        assert!(back >= n / (pass + 1) - 1, "{len} B: back {back} times");
    }
}

#[test]
fn a_round_trips_producer_reads_a_new_mark_once_a_pass_over_the_warm_start() {
    // Each mark the consumer stores is a line the producer then reads from
    // the other core, before it writes its entry: on the round trip's way.
    // Whatever the frames' size, a pass over the warm start's `WARM` bytes
    // of frames makes at most one (with four lines for frames of one
    // line, a 40-byte round trip made one every six pushes; with 16, a
    // 1,000-byte one made one at every push).
    for len in [0, 1, 40, 56, 57, 200, 1000, 4000] {
        let i = Locked::new(1024, 4 << 20);
        let (mut marks, mut last, mut bytes) = (0u64, u64::MAX, 0u64);
        let n = 3 * WARM.div_ceil(footprint(len)) + 100;
        for k in 0..n as u32 {
            i.push(1, len, fill_with(k as u8)).unwrap();
            bytes += footprint(len);
            assert_eq!(take_all(&i).len(), 1, "{len} B");
            i.answered();
            let mark = i.idle.0.load(Ordering::Relaxed);
            if mark != last {
                marks += 1;
                last = mark;
            }
        }
        assert!(marks > 1, "{len} B: marked {marks} times");
        assert!(
            marks <= bytes / WARM + 1,
            "{len} B: {marks} marks over {bytes} bytes of frames"
        );
        // And at most one in 16 pushes, up to 4,000-byte frames (with a
        // 1 KiB warm start, one at every push of 1,000 bytes).
        assert!(
            marks <= u64::from(n as u32) / 16 + 1,
            "{len} B: {marks} marks over {n} pushes"
        );
    }
}

#[test]
fn a_restart_is_told_by_the_last_push_tag_or_else_by_its_own_line() {
    let reads = || RESTART_READS.with(std::cell::Cell::get);
    for len in [1, 40, 48, 49, 56, 57, 200, 1000] {
        let i = Locked::new(1024, 4 << 20);
        // Round trips: the entry waiting is always the last pushed, so its
        // tag tells the drain whether a restart lies before it, the
        // restart's own line never read, restart or not.
        let before = reads();
        let mut back = 0;
        let n = 3 * WARM.div_ceil(footprint(len)) + 100;
        for k in 0..n as u32 {
            i.push(1, len, fill_with(k as u8)).unwrap();
            assert_eq!(take_all(&i), vec![(1, len, k as u8)], "{len} B");
            i.answered();
            back += u32::from(k > 0 && lock(&i.prod.0).at == footprint(len));
        }
        assert!(back > 2, "{len} B: back {back} times");
        assert_eq!(reads(), before, "{len} B: the restart's line read");
        // Past the warm start with the ring marked empty: the next push
        // goes back to the start, and a second follows it before the
        // drain. The tag is the second's, which tells nothing of the
        // restart: the drain reads the restart's line, skips, and runs
        // both.
        while lock(&i.prod.0).at < WARM {
            i.push(1, len, fill_with(1)).unwrap();
            assert_eq!(take_all(&i).len(), 1);
            i.answered();
        }
        let tail = lock(&i.prod.0).tail;
        i.push(2, len, fill_with(2)).unwrap();
        i.push(3, len, fill_with(3)).unwrap();
        assert_eq!(i.restart.0.load(Ordering::Relaxed), tail, "{len} B");
        assert_eq!(lock(&i.prod.0).at, 2 * footprint(len), "{len} B");
        let before = reads();
        assert_eq!(take_all(&i), vec![(2, len, 2), (3, len, 3)], "{len} B");
        assert_eq!(reads(), before + 1, "{len} B");
    }
}

#[test]
fn a_drain_reads_the_tail_only_where_the_last_push_tag_does_not_tell() {
    let reads = || TAIL_READS.with(std::cell::Cell::get);
    for len in [0, 56, 57, 1000] {
        let i = Locked::new(64, 1 << 16);
        let byte = |k: u32| if len == 0 { 0 } else { k as u8 };
        // Round trips: the entry waiting is the last pushed, and its tag
        // names the drain's position; an idle drain finds the tag behind
        // it. Neither reads the tail.
        let before = reads();
        for k in 0..50u32 {
            i.push(1, len, fill_with(k as u8)).unwrap();
            assert_eq!(take_all(&i), vec![(1, len, byte(k))], "{len} B");
            assert_eq!(take_all(&i), vec![], "{len} B");
            i.answered();
        }
        assert_eq!(reads(), before, "{len} B: round trips");
        // Three waiting: the tag names the third, and the drain reads the
        // tail for the first two.
        for k in 0..3u32 {
            i.push(2, len, fill_with(k as u8)).unwrap();
        }
        let got: Vec<u8> = take_all(&i).iter().map(|g| g.2).collect();
        assert_eq!(got, [byte(0), byte(1), byte(2)], "{len} B");
        assert!(reads() > before, "{len} B: three waiting");
    }
}

#[test]
fn a_header_longer_than_its_tag_says_is_dropped_as_a_wrong_one() {
    // A 200-byte frame alone, not copied: the drain takes it on the last
    // push's tag (its place and footprint) without reading the tail. A
    // header that says more than that footprint (memory corruption only)
    // fails its check as it would against the tail: the frame is dropped
    // and counted, nothing of it run, and the inbox goes on.
    let i = Locked::new(64, 1 << 16);
    i.push(1, 200, fill_with(7)).unwrap();
    let ring = i.ring.get().expect("made at the first push");
    // SAFETY: the header of the entry at the ring's start, published;
    // no producer writes it and no drain reads it meanwhile (this thread
    // is the only one).
    unsafe { ring.bytes_mut(0, HDR) }.copy_from_slice(&header(400, 1, KIND_FRAME));
    assert_eq!(take_all(&i), vec![]);
    assert_eq!(i.dropped(), 1);
    i.push(2, 10, fill_with(3)).unwrap();
    assert_eq!(take_all(&i), vec![(2, 10, 3)]);
}

#[test]
fn a_stream_longer_than_the_warm_start_walks_the_ring() {
    // Bursts of 4,000-byte frames, drained after each, each burst past
    // `COLD`. The consumer marks nothing, and the producer goes on through
    // the ring (its stores then meet lines the consumer read a pass
    // before, not the ones it has just read), going back only past `HOT`
    // where it finds the ring empty by the consumer's give-back.
    let i = Locked::new(1024, 4 << 20);
    let len = 4000;
    let per = (COLD / footprint(len)) as u32 + 1;
    let (mut furthest, mut back) = (0, false);
    for burst in 0..200u32 {
        for k in 0..per {
            i.push(1, len, fill_with((burst * per + k) as u8)).unwrap();
        }
        let got = take_all(&i);
        assert_eq!(
            got,
            (0..per)
                .map(|k| (1, len, (burst * per + k) as u8))
                .collect::<Vec<_>>()
        );
        let at = lock(&i.prod.0).at;
        if at < furthest {
            back = true;
        }
        furthest = furthest.max(at);
    }
    assert!(furthest >= HOT, "the stream kept to {furthest} bytes");
    assert!(back, "the stream never went back to the ring's start");
    assert!(
        furthest < i.size as u64 / 2,
        "the stream went {furthest} bytes"
    );
    assert_eq!(i.idle.0.load(Ordering::Relaxed), u64::MAX);
}

/// Pushes `n` frames of `len` bytes one at a time, each drained before
/// the next (a stream the consumer keeps up with), the consumer answering
/// after every `every`-th (never if 0); returns how many pushes went back
/// to the ring's start within the warm window, and the furthest offset
/// reached.
fn stream(i: &Locked, n: u32, len: usize, every: u32) -> (u32, u64) {
    let (mut back, mut furthest) = (0, 0);
    for k in 1..=n {
        let before = lock(&i.prod.0).at;
        i.push(1, len, fill_with(k as u8)).unwrap();
        assert_eq!(take_all(i), vec![(1, len, k as u8)]);
        let at = lock(&i.prod.0).at;
        if at == footprint(len) && in_warm_window(before) {
            back += 1;
        }
        furthest = furthest.max(at);
        if every != 0 && k % every == 0 {
            i.answered();
        }
    }
    (back, furthest)
}

#[test]
fn a_stream_the_consumer_keeps_up_with_walks_the_ring() {
    // Frames of 200 bytes, each drained before the next: the ring is
    // found empty at every push, as in a round trip. A consumer that
    // never answers, or answers once every 25 frames (burst-25's
    // acknowledgements), marks nothing: the producer walks past `COLD`
    // rather than keeping to the lines the consumer has just read.
    let n = (COLD / footprint(200)) as u32 + 50;
    for every in [0, 25, 2] {
        let i = Locked::new(1024, 4 << 20);
        let (back, furthest) = stream(&i, n, 200, every);
        assert_eq!(back, 0, "answers every {every}");
        assert!(furthest >= COLD, "answers every {every}: {furthest}");
        assert_eq!(i.idle.0.load(Ordering::Relaxed), u64::MAX);
    }
    // One answer to a single frame past the warm start, then a stream
    // without answers: the frame after the answer is marked (its drain is
    // a round trip's), and nothing after it.
    let i = Locked::new(1024, 4 << 20);
    stream(&i, (WARM / footprint(200)) as u32, 200, 0);
    i.answered();
    stream(&i, 1, 200, 1);
    let (back, furthest) = stream(&i, n, 200, 0);
    assert_eq!(back, 1);
    assert!(furthest >= COLD, "{furthest}");
}

#[test]
fn a_mark_behind_the_tail_sends_no_producer_back() {
    // The consumer marks the ring empty at two frames' footprint, past
    // `WARM`, at the end of the drain of the frame after its answer to
    // the first; one push goes back to the start on it, and the next,
    // with that frame still waiting, finds the mark behind its tail and
    // writes on after it.
    let i = Locked::new(1024, 4 << 20);
    let len = WARM as usize + 76;
    assert!(footprint(len) >= WARM && 2 * footprint(len) < COLD);
    i.push(1, len, fill_with(1)).unwrap();
    assert_eq!(take_all(&i), vec![(1, len, 1)]);
    // No answer before it: nothing marked.
    assert_eq!(i.idle.0.load(Ordering::Relaxed), u64::MAX);
    i.answered();
    i.push(2, len, fill_with(2)).unwrap();
    assert_eq!(lock(&i.prod.0).at, 2 * footprint(len), "wrote on");
    assert_eq!(take_all(&i), vec![(2, len, 2)]);
    assert_eq!(i.idle.0.load(Ordering::Relaxed), 2 * footprint(len));
    i.push(3, len, fill_with(3)).unwrap();
    assert_eq!(lock(&i.prod.0).at, footprint(len), "went back");
    i.push(4, len, fill_with(4)).unwrap();
    assert_eq!(lock(&i.prod.0).at, 2 * footprint(len), "wrote on");
    assert_eq!(take_all(&i), vec![(3, len, 3), (4, len, 4)]);
    assert!(i.is_empty());
}

#[test]
fn a_second_answer_to_one_frame_keeps_its_mark() {
    // Sends with no frame consumed since the last change nothing: before
    // any frame, and a second answer to one frame, whose consumer still
    // answers each frame, so the next frame's drain marks.
    let i = Locked::new(1024, 4 << 20);
    let len = WARM as usize + 76;
    i.answered();
    i.push(1, len, fill_with(1)).unwrap();
    assert_eq!(take_all(&i), vec![(1, len, 1)]);
    i.answered();
    i.answered();
    i.push(2, len, fill_with(2)).unwrap();
    assert_eq!(take_all(&i), vec![(2, len, 2)]);
    assert_eq!(i.idle.0.load(Ordering::Relaxed), 2 * footprint(len));
}

#[test]
fn frames_within_the_budgets_fit_after_a_warm_start() {
    // The default budgets (1,024 frames, 4 MiB): an empty ring just past
    // `HOT`, then 25 frames of 64 KiB pushed before the consumer runs
    // (burst-25's 64 KiB messages, published one at a time). A padding
    // to the ring's end, as the going back once wrote, would hold its
    // bytes until the consumer read it, leaving the frames after it the
    // 320 KiB before it: the fifth was refused as full. The going back
    // now writes nothing in the ring and its bytes are free at once.
    let i = Locked::new(1024, 4 << 20);
    let len = 65_590;
    advance(&i, HOT - 8);
    i.push(1, len, fill_with(1)).unwrap();
    assert_eq!(take_all(&i), vec![(1, len, 1)]);
    for k in 0..25u8 {
        assert_eq!(i.push(2, len, fill_with(k)), Ok(()), "frame {k}");
        if k == 0 {
            // The first went back to the ring's start: the others were
            // written over the place it left, the consumer not yet there.
            assert_eq!(lock(&i.prod.0).at, footprint(len));
        }
    }
    let got = take_all(&i);
    assert_eq!(got, (0..25).map(|k| (2, len, k)).collect::<Vec<_>>());
    assert!(i.is_empty());
}

#[test]
fn an_empty_ring_past_its_warm_start_keeps_a_frame_longer_than_its_start() {
    // The warm restart pads to the ring's end only where the frame fits
    // before the position it leaves: a frame longer than that, pushed to
    // an empty ring, goes where the tail is, never refused as full.
    let i = Locked::new(16, 4 << 20);
    for k in 0..3u8 {
        i.push(1, 100 << 10, fill_with(k)).unwrap();
        assert_eq!(take_all(&i), vec![(1, 100 << 10, k)]);
    }
    let at = lock(&i.prod.0).tail;
    assert!(at >= HOT && at < i.size as u64 / 2);
    let len = 400 << 10;
    assert!(footprint(len) > at);
    i.push(5, len, fill_with(5)).unwrap();
    assert_eq!(take_all(&i), vec![(5, len, 5)]);
    assert!(i.is_empty());
}

#[test]
fn a_closed_inbox_refuses_and_counts_what_waited() {
    let i = Locked::new(8, 1000);
    i.push(1, 5, fill_with(1)).unwrap();
    i.push(2, 5, fill_with(2)).unwrap();
    assert_eq!(i.close(), 2);
    assert_eq!(i.push(3, 5, fill_with(3)), Err(Refused::Closed));
    assert!(i.is_empty());
    assert_eq!(i.clear(), 0);
}

/// Several producers, one consumer: every frame arrives once, whole, in
/// each producer's order, or is refused (and counted by its producer).
#[test]
fn several_producers_one_consumer() {
    const PRODUCERS: u16 = 4;
    const PER: u32 = 50_000;
    let i = Arc::new(Locked::new(32, 8 << 10));
    let done = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|chan| {
            let i = i.clone();
            std::thread::spawn(move || {
                let mut refused = 0u64;
                for seq in 0..PER {
                    // Lengths from 4 to 600 bytes, so that frames wrap at
                    // every offset.
                    let len = 4 + (seq as usize * 37 + usize::from(chan) * 11) % 597;
                    let r = i.push(chan, len, |b| {
                        b[..4].copy_from_slice(&seq.to_le_bytes());
                        b[4..].fill(seq as u8);
                    });
                    match r {
                        Ok(()) => {}
                        Err(Refused::Full) => refused += 1,
                        Err(Refused::Closed) => unreachable!(),
                    }
                }
                refused
            })
        })
        .collect();
    let consumer = {
        let (i, done) = (i.clone(), done.clone());
        std::thread::spawn(move || {
            let mut next = [0u32; PRODUCERS as usize];
            let mut got = 0u64;
            loop {
                let finished = done.load(Ordering::Acquire);
                got += i.drain(|chan, _, f| {
                    let seq = u32::from_le_bytes(f[..4].try_into().unwrap());
                    let want = 4 + (seq as usize * 37 + usize::from(chan) * 11) % 597;
                    assert_eq!(f.len(), want, "a frame's length");
                    assert!(f[4..].iter().all(|&b| b == seq as u8), "a frame's bytes");
                    let n = &mut next[usize::from(chan)];
                    assert!(seq >= *n, "in each producer's order");
                    *n = seq + 1;
                    true
                });
                if finished {
                    return got;
                }
                std::thread::yield_now();
            }
        })
    };
    let refused: u64 = producers.into_iter().map(|t| t.join().unwrap()).sum();
    done.store(true, Ordering::Release);
    let got = consumer.join().unwrap();
    assert_eq!(got + refused, u64::from(PRODUCERS) * u64::from(PER));
    assert!(got > 0 && i.is_empty());
}

/// Closing while producers push: each frame is consumed by the drains or
/// the closing, or refused as full or closed, exactly once.
#[test]
fn closing_races_producers_and_counts_every_frame_once() {
    for round in 0..50 {
        const PRODUCERS: u64 = 3;
        const PER: u64 = 2_000;
        let i = Arc::new(Locked::new(64, 16 << 10));
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|chan| {
                let i = i.clone();
                std::thread::spawn(move || {
                    let (mut full, mut closed) = (0u64, 0u64);
                    for k in 0..PER {
                        match i.push(chan as u16, 16 + (k as usize % 200), |b| b.fill(1)) {
                            Ok(()) => {}
                            Err(Refused::Full) => full += 1,
                            Err(Refused::Closed) => closed += 1,
                        }
                    }
                    (full, closed)
                })
            })
            .collect();
        // Drain a while, then close in the middle of the pushes.
        let mut ran = 0;
        for _ in 0..(round % 7) * 10 {
            ran += i.drain(|_, _, _| true);
            std::thread::yield_now();
        }
        let at_close = i.close();
        let (mut full, mut closed) = (0, 0);
        for t in producers {
            let (f, c) = t.join().unwrap();
            full += f;
            closed += c;
        }
        assert_eq!(i.clear(), 0, "nothing gets in after the closing");
        assert_eq!(
            ran + at_close + full + closed,
            PRODUCERS * PER,
            "round {round}: {ran} ran, {at_close} at the closing, {full} full, {closed} closed"
        );
    }
}

#[test]
fn a_budget_past_the_ring_is_bounded_by_the_ring() {
    // No byte budget to speak of: the ring (`RING_MAX`) bounds the bytes.
    let i = Locked::new(FRAMES_MAX, usize::MAX);
    assert_eq!(i.size, RING_MAX);
    assert_eq!(i.push(1, usize::MAX, fill_with(1)), Err(Refused::Full));
    assert_eq!(
        i.push(1, RING_MAX - HDR + 1, fill_with(1)),
        Err(Refused::Full)
    );
    let len = 4 << 20;
    let fit = (RING_MAX as u64 / footprint(len)) as usize;
    for k in 0..fit {
        i.push(1, len, fill_with(k as u8)).unwrap();
    }
    assert_eq!(
        i.push(1, len, fill_with(9)),
        Err(Refused::Full),
        "no room left"
    );
    let got = take_all(&i);
    assert_eq!(got.len(), fit);
    assert!(got.iter().enumerate().all(|(k, g)| *g == (1, len, k as u8)));
    // Given back: room again.
    i.push(1, len, fill_with(7)).unwrap();
    assert_eq!(take_all(&i), vec![(1, len, 7)]);
}

#[test]
fn a_header_past_the_ring_stops_the_drain_without_reading_past_it() {
    let i = Locked::new(16, 1000);
    i.push(1, 10, fill_with(1)).unwrap();
    i.push(2, 10, fill_with(2)).unwrap();
    // Corrupt the first header's length (the engine never writes one).
    let ring = i.ring.get().unwrap();
    // SAFETY: no producer or consumer runs meanwhile.
    unsafe { ring.bytes_mut(0, HDR) }.copy_from_slice(&header(1 << 30, 1, KIND_FRAME));
    assert_eq!(take_all(&i), vec![]);
    assert!(i.is_empty(), "the rest was dropped");
    i.push(3, 10, fill_with(3)).unwrap();
    assert_eq!(take_all(&i), vec![(3, 10, 3)]);
}

/// A header that fails its check (memory corruption: the engine writes
/// every header) ends the drain there: the frames from it on are dropped
/// unread and counted, and their budget of frames and bytes comes back,
/// so that frames within the budgets fit again (before, the drain only
/// skipped to the tail: the inbox, at its budget, refused every frame
/// after).
#[test]
fn a_bad_header_drops_the_rest_counted_and_gives_back_its_budget() {
    // Three frames, 100 bytes: one that runs, then two behind a header
    // corrupted (a message, counted as its 54-byte frame, and a frame).
    let i = Locked::new(3, 100);
    i.push(1, 10, fill_with(1)).unwrap();
    i.push_message(2, 10, fill_with(2)).unwrap();
    i.push(3, 20, fill_with(3)).unwrap();
    assert_eq!(
        i.push(4, 0, fill_with(4)),
        Err(Refused::Full),
        "the frame budget"
    );
    let second = footprint(10) as usize;
    let ring = i.ring.get().unwrap();
    // SAFETY: no producer or consumer runs meanwhile.
    unsafe { ring.bytes_mut(second, HDR) }.copy_from_slice(&header(1 << 30, 2, KIND_MESSAGE));
    assert_eq!(take_all(&i), vec![(1, 10, 1)], "the frame before it runs");
    assert!(i.is_empty(), "the rest was dropped");
    assert_eq!(i.dropped(), 2, "and counted");
    // Both budgets whole again: three frames, 100 bytes.
    i.push(5, 60, fill_with(5)).unwrap();
    i.push(6, 40, fill_with(6)).unwrap();
    i.push(7, 0, fill_with(7)).unwrap();
    assert_eq!(i.push(8, 0, fill_with(8)), Err(Refused::Full));
    assert_eq!(take_all(&i), vec![(5, 60, 5), (6, 40, 6), (7, 0, 0)]);
    assert_eq!(i.dropped(), 2, "nothing more dropped");
    // Again, after the recovery: a length past the ring on the first of
    // two frames; both are dropped, and the budget comes back again.
    i.push(9, 10, fill_with(9)).unwrap();
    let at = (lock(&i.prod.0).at as usize + i.size - footprint(10) as usize) % i.size;
    // SAFETY: as above.
    unsafe { ring.bytes_mut(at, HDR) }.copy_from_slice(&header(0xffff_fff0, 9, KIND_FRAME));
    i.push(10, 10, fill_with(10)).unwrap();
    assert_eq!(i.drain(|_, _, _| true), 0);
    assert_eq!(i.dropped(), 4);
    for k in 0..3 {
        i.push(k, 30, fill_with(k as u8)).unwrap();
    }
    assert_eq!(take_all(&i).len(), 3);
}

/// A bad header past the ring's end, behind frames that run: X before a
/// padding, Y after it at the ring's start, then Z (its header corrupted,
/// `Inbox::corrupt_after`) and W. The drain runs X and Y, returns 2, drops
/// Z and W counted, and the budget comes back whole (the loom model of the
/// same, `tests/loom_inbox.rs`, runs it against a producer).
#[test]
fn a_bad_header_past_the_ring_end_drops_the_rest_after_those_before_it() {
    let i = Locked::new(4, 80);
    assert_eq!(i.size, 256);
    // Footprints of 80, 56 and 40, one at a time: the consumer at 176.
    for (k, len) in [72, 48, 32].into_iter().enumerate() {
        i.push(k as u16, len, fill_with(k as u8)).unwrap();
        assert_eq!(take_all(&i).len(), 1);
    }
    let _c = lock(&i.cons);
    // SAFETY: `Locked`'s consumer lock is held: no consumer call runs.
    assert_eq!(unsafe { i.inbox.cons.0.with(|c| c.at) }, 176);
    drop(_c);
    // X's footprint is 32: Y's 56 do not fit in the 48 after it, so a
    // padding, then Y at the start.
    i.push(3, 24, fill_with(3)).unwrap();
    i.push(4, 48, fill_with(4)).unwrap();
    assert_eq!(lock(&i.prod.0).at, footprint(48), "Y at the ring's start");
    i.push(5, 0, fill_with(5)).unwrap();
    i.push(6, 2, fill_with(6)).unwrap();
    i.corrupt_after(2);
    let mut ran = Vec::new();
    let n = i.drain(|c, _, _| {
        ran.push(c);
        true
    });
    assert_eq!((n, ran), (2, vec![3, 4]), "X and Y");
    assert_eq!(i.dropped(), 2, "Z and W");
    assert!(i.is_empty());
    for k in 0..4 {
        i.push(k, 20, fill_with(k as u8)).unwrap();
    }
    assert_eq!(i.push(9, 0, fill_with(9)), Err(Refused::Full));
    assert_eq!(take_all(&i).len(), 4);
}

/// A frame counts against the budgets until it has run, and not after:
/// each frame's space goes back before the next runs (given back in
/// batches, frames that had run held the budget: the demo's 64 KiB token
/// flow lost frames as full and stalled).
#[test]
fn each_frame_is_given_back_once_it_has_run() {
    let i = Locked::new(2, 1000);
    i.push(1, 10, fill_with(1)).unwrap();
    i.push(2, 10, fill_with(2)).unwrap();
    let mut pushed = Vec::new();
    let mut chans = Vec::new();
    i.drain(|chan, _, _| {
        chans.push(chan);
        if chan < 4 {
            // While frame 1 runs the inbox is full (1 and 2: frame 3 is
            // refused); while 2 runs, 1 is given back and frame 4 fits.
            pushed.push(i.push(chan + 2, 10, fill_with(9)));
        }
        true
    });
    assert_eq!(pushed, vec![Err(Refused::Full), Ok(())]);
    // Frame 4 came after the call had run its budget's frames (two): it
    // waits for the next call.
    assert_eq!(chans, vec![1, 2]);
    i.drain(|chan, _, _| {
        chans.push(chan);
        true
    });
    assert_eq!(chans, vec![1, 2, 4]);
}

/// A message without a frame comes back as one (not framed, its bytes
/// alone), and counts against the byte budget as the frame it stands for
/// (its bytes and a frame's header), both when pushed and when given back.
#[test]
fn a_message_counts_as_the_frame_it_stands_for() {
    let hdr = crate::frame::HEADER_LEN;
    // Room in the byte budget for two frames of 10-byte messages.
    let i = Locked::new(8, 2 * (hdr + 10));
    i.push_message(1, 10, fill_with(7)).unwrap();
    i.push(2, hdr + 10, fill_with(8)).unwrap();
    assert_eq!(i.push_message(3, 1, fill_with(9)), Err(Refused::Full));
    let mut got = Vec::new();
    i.drain(|chan, framed, f| {
        got.push((chan, framed, f.to_vec()));
        true
    });
    assert_eq!(
        got,
        vec![(1, false, vec![7; 10]), (2, true, vec![8; hdr + 10])]
    );
    // Both given back as counted: room for two messages again, no more.
    i.push_message(3, 10, fill_with(3)).unwrap();
    i.push_message(4, 10, fill_with(4)).unwrap();
    assert_eq!(i.push_message(5, 1, fill_with(5)), Err(Refused::Full));
    assert_eq!(take_all(&i), vec![(3, 10, 3), (4, 10, 4)]);
}

/// One drain call runs fewer than twice the frame budget's frames, however
/// fast frames keep coming: here each frame run pushes another (as a
/// producer on another core keeping pace would), and the call still
/// returns, with the rest waiting for the next. Unbounded (before
/// 2026-12-01) it ran all 5,000 in one call.
#[test]
fn one_drain_runs_fewer_than_twice_the_frame_budget_under_a_flood() {
    // 15 waiting: a frame counts until it has run, so each run makes room
    // for the one it pushes.
    let i = Locked::new(16, 1 << 20);
    for k in 0..15u8 {
        i.push(1, 40, fill_with(k)).unwrap();
    }
    let mut pushed = 15;
    let mut calls = Vec::new();
    while !i.is_empty() {
        let n = i.drain(|_, _, f| {
            assert_eq!(f.len(), 40);
            if pushed < 5_000 {
                i.push(1, 40, fill_with(pushed as u8)).unwrap();
                pushed += 1;
            }
            true
        });
        assert!(n < 32, "one drain ran {n} frames, the budget is 16");
        calls.push(n);
    }
    assert_eq!(pushed, 5_000);
    assert_eq!(calls.iter().sum::<u64>(), 5_000, "every frame ran once");
    assert!(calls.len() > 5_000 / 32, "{} calls", calls.len());
}

/// A small generator for [`the_inbox_agrees_with_a_model_of_its_budgets`].
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        if n == 0 { 0 } else { self.0 % n }
    }
}

/// The inbox against a plain model (a queue and two sums) under random
/// budgets (1 to 300 frames, 1 byte to 600 KB, so that some budgets are
/// bounded by the ring), frames and messages mixed, drains stopped at
/// random, and a close at the end: each push is accepted exactly when the
/// model's budgets allow it (a message counted as the frame it stands
/// for), everything comes back in order and whole, and the close counts
/// what was left. In this crate's tests the ring's offset checks
/// (`at == tail % size`, `at == head % size`) and the blocks' bounds are
/// asserted on every frame. Written by the 2026-12-01 review.
#[test]
fn the_inbox_agrees_with_a_model_of_its_budgets() {
    let extra = MESSAGE_COUNTED_EXTRA;
    for seed in 1..1500u64 {
        let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let frames = 1 + r.below(if seed % 3 == 0 { 300 } else { 40 }) as usize;
        let bytes = match seed % 4 {
            0 => 60 + r.below(600),
            1 => 200 + r.below(20_000),
            2 => 200_000 + r.below(400_000),
            _ => 1 + r.below(5000),
        } as usize;
        let i = Locked::new(frames, bytes);
        let mut model: std::collections::VecDeque<(u16, bool, usize, u8)> = Default::default();
        let (mut waiting, mut counted) = (0u64, 0u64);
        let longest = if seed % 5 == 0 {
            bytes as u64
        } else {
            (bytes as u64).min(3000)
        };
        let steps = if seed % 4 == 2 { 2000 } else { 400 };
        for step in 0..steps {
            if r.below(10) < 6 {
                let framed = r.below(2) == 0;
                let len = r.below(longest + 1) as usize;
                let tag = (step % 251) as u8;
                let chan = r.below(1000) as u16;
                let res = if framed {
                    i.push(chan, len, fill_with(tag))
                } else {
                    i.push_message(chan, len, fill_with(tag))
                };
                let charged = len as u64 + if framed { 0 } else { extra };
                let fits =
                    waiting < frames.min(FRAMES_MAX) as u64 && counted + charged <= bytes as u64;
                assert_eq!(
                    res.is_ok(),
                    fits,
                    "seed {seed} step {step}: budgets {frames} frames, {bytes} bytes, \
                     {waiting} and {counted} waiting, a {} of {len}: {res:?}",
                    if framed { "frame" } else { "message" }
                );
                if res.is_ok() {
                    model.push_back((chan, framed, len, tag));
                    waiting += 1;
                    counted += charged;
                }
            } else {
                let stop = 1 + r.below(8);
                let mut n = 0;
                let ran = i.drain(|chan, framed, b| {
                    let (c, f, l, t) = model.pop_front().expect("a frame the model has");
                    assert_eq!((chan, framed, b.len()), (c, f, l), "seed {seed}");
                    assert!(b.iter().all(|&x| x == t), "seed {seed}: a torn frame");
                    waiting -= 1;
                    counted -= l as u64 + if f { 0 } else { extra };
                    n += 1;
                    n < stop
                });
                assert_eq!(ran, n);
            }
        }
        assert_eq!(i.close(), model.len() as u64, "seed {seed}");
    }
}

/// A header whose kind is wrong (memory corruption) ends the drain as a
/// wrong length does: a padding at the ring's start (skipping by it
/// would loop for ever), a padding past what is published, and a kind
/// that is neither a frame's, a message's nor a padding's. The frames
/// from it on are dropped and counted, none runs twice, and the budget
/// comes back: frames within it are taken and run again.
#[test]
fn a_wrong_kind_drops_the_rest_and_never_loops() {
    for (case, runs_first, kind) in [
        ("a padding at the ring's start", 0, KIND_PAD),
        ("a padding past the tail", 1, KIND_PAD),
        ("an unknown kind", 1, 7),
    ] {
        let i = Arc::new(Locked::new(4, 4096));
        for tag in 1..=3u8 {
            i.push(u16::from(tag), 24, fill_with(tag)).unwrap();
        }
        let mut ran = Vec::new();
        if runs_first > 0 {
            i.drain(|c, _, _| {
                ran.push(c);
                false
            });
        }
        i.corrupt_next_with(0, kind);
        let j = i.clone();
        let drained = std::thread::spawn(move || {
            let mut more = Vec::new();
            let n = j.drain(|c, _, _| {
                more.push(c);
                true
            });
            (n, more)
        });
        let start = std::time::Instant::now();
        while !drained.is_finished() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(5),
                "{case}: the drain does not return"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let (n, more) = drained.join().unwrap();
        assert_eq!((n, more.len()), (0, 0), "{case}");
        assert_eq!(ran.len() as u64 + i.dropped(), 3, "{case}: {ran:?}");
        assert!(i.is_empty(), "{case}");
        for tag in 4..=7u8 {
            i.push(u16::from(tag), 24, fill_with(tag))
                .unwrap_or_else(|e| panic!("{case}: frame {tag} within the budget: {e:?}"));
        }
        let after: Vec<u16> = take_all(&i).into_iter().map(|(c, _, _)| c).collect();
        assert_eq!(after, [4, 5, 6, 7], "{case}");
    }
}

#[test]
fn a_waiting_consumer_asks_for_the_lines_the_next_frame_is_expected_in() {
    // Budgets for frames past the warm start.
    let i = Locked::new(64, 1 << 18);
    let lines = |i: &Inbox| i.next_lines().map(|(_, at, n)| (at, n));
    // The line the next frame is expected to start in, asked for or not.
    let line_of_next = |i: &Inbox| {
        let at = (i.given.0.next.load(Ordering::Relaxed) & 0xffff_ffff) as usize;
        at - at % LINE
    };
    // No ring before the first frame: nothing asked for.
    assert_eq!(lines(&i), None);
    // (frame length, the line the next one starts in, and the lines a
    // frame of the last one's footprint spans from where the next starts,
    // if asked for.)
    let steps = [
        // 0 B: footprint 8, the next at 8, in line 0; nothing asked for
        // after an entry of at most `COPY_MAX` bytes, read from its copy
        // beside the tag (its line, asked for, would be taken from the
        // producer's cache just before it writes the next one there).
        (0, 0, None),
        // 56 B (`COPY_MAX`): footprint 64, the next at 72, in line 64;
        // read from its copy, nothing asked for.
        (56, 64, None),
        // 57 B: footprint 72, the next at 144: line 128, 16 + 72, two.
        (57, 128, Some(2)),
        // 192 B: footprint 200, the next at 344: line 320, 24 + 200
        // bytes, four.
        (192, 320, Some(4)),
        // 400 B: footprint 408, the next at 752: line 704, 48 + 408
        // bytes, eight (`PREFETCH_LINES`, the most asked for).
        (400, 704, Some(PREFETCH_LINES)),
    ];
    // The ring made by the first push, nothing run yet (no footprint to
    // go by): nothing asked for.
    let mut was = None;
    for (len, at, n) in steps {
        i.push(0, len, fill_with(1)).unwrap();
        // Published, not yet run: still where the last one left off.
        assert_eq!(lines(&i), was, "before a frame of {len} B is run");
        assert_eq!(take_all(&i).len(), 1);
        was = n.map(|n| (at, n));
        assert_eq!(lines(&i), was, "after a frame of {len} B");
        assert_eq!(line_of_next(&i), at, "after a frame of {len} B");
        // Each frame answered, as in a round trip.
        i.answered();
    }
    // After a frame longer than that (the warm start's length, past it
    // from 752 bytes), none: the producer writes them while the consumer
    // waits.
    let long = WARM as usize;
    i.push(0, long, fill_with(1)).unwrap();
    assert_eq!(take_all(&i).len(), 1);
    assert_eq!(lines(&i), None);
    i.answered();
    // A short one again: nothing asked for, and expected at the ring's
    // start: the ring was found empty past the warm start, `WARM` (at
    // 752 + 8 + `WARM` bytes), so the producer went back to its start.
    i.push(0, 0, fill_with(1)).unwrap();
    assert_eq!(take_all(&i).len(), 1);
    assert_eq!((line_of_next(&i), lines(&i)), (0, None));
    // Unanswered, the next frame ends past the warm start (8 + 80 +
    // `WARM` bytes) and nothing is marked.
    let mark = i.idle.0.load(Ordering::Relaxed);
    i.push(0, long + 72, fill_with(1)).unwrap();
    assert_eq!(take_all(&i).len(), 1);
    assert_eq!(lock(&i.prod.0).at, WARM + 88);
    assert_eq!(i.idle.0.load(Ordering::Relaxed), mark);
    // An answer to those two: the next frame's drain is no round trip's,
    // and the next frame is expected after it.
    i.answered();
    i.push(0, 0, fill_with(1)).unwrap();
    assert_eq!(take_all(&i).len(), 1);
    assert_eq!(i.idle.0.load(Ordering::Relaxed), mark);
    let line = WARM as usize + 64;
    assert_eq!((line_of_next(&i), lines(&i)), (line, None));
    // An answer to that one frame: the drain of the next, run alone and
    // finding the ring empty past `WARM`, marks it there, and the next
    // frame is expected in the ring's first line, where the producer's
    // next push goes back to.
    i.answered();
    i.push(0, 0, fill_with(1)).unwrap();
    assert_eq!(take_all(&i).len(), 1);
    let tail = lock(&i.prod.0).tail;
    assert_eq!(lock(&i.prod.0).at, WARM + 104);
    assert_eq!(i.idle.0.load(Ordering::Relaxed), tail);
    assert_eq!((line_of_next(&i), lines(&i)), (0, None));
    i.push(0, 0, fill_with(1)).unwrap();
    assert_eq!(lock(&i.prod.0).at, footprint(0));
}
