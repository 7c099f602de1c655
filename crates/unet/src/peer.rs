//! The bare ring U-Net's round trips are compared with: what two threads
//! sharing memory need at least to pass a message each way, with no
//! engine, frame, classification, budget or check.
//!
//! Each direction is an endpoint's receive queue in a segment of its own
//! (the same [`crate::ring`] code and layout as an endpoint's), and that
//! segment's buffer area. A message of at most [`INLINE_MAX`] bytes goes in
//! its slot, as U-Net's receive slot carries it; a longer one goes in the
//! area, at its start, and the slot names it as one buffer with its length.
//! The slot is sealed when written, and the receiver learns of it by the
//! seal ([`Consumer::take_sealed_with`]), as an endpoint's receiver does,
//! never from the producer index: one line crosses per direction for a
//! message that fits in its slot, and the area's lines besides for a
//! longer one.
//!
//! Both ends write and read the slot in place with the engine's and the
//! endpoint's own code ([`RxQueue::write_rx_inline`],
//! [`RxQueue::write_rx_one_buffer`], [`RxQueue::rx_fixed`],
//! [`RxQueue::with_rx_inline`]). Until 2026-12-01 the sender built a
//! whole 64-byte descriptor in private memory and copied it into the slot,
//! and the receiver copied the whole slot out and then the message out of
//! that copy: two more 64-byte copies per message, each written in pieces
//! and read back at once in others. Its round trip on one thread was 40 ns
//! at 56 B against 14 ns now, and across cores it was slower than the
//! older peer's that moved every message through the area
//! (docs/benchmarks.md, "The ring peer's own path").
//!
//! Where in its area a longer message goes is the [`Placement`]: at the
//! area's start every time ([`Placement::OnePlace`], what [`ring_pair`]
//! makes), or at the next 4 KiB place of the area in turn
//! ([`Placement::InTurn`]), as U-Net's receiver gets its free buffers
//! back in turn. Neither is the faster at every size on every machine: on
//! the Intel Xeon of 2026-12-02 one place was usually the faster at 57 B
//! (one line the other core has just read) and in turn at 1 and 4 KiB,
//! where the one place's lines are read by one core and written again by
//! the other for every message. `fastpath demo` measures both and takes the faster as
//! its floor. The receiver reads the message where its slot names it, as
//! an endpoint's receiver does.
//!
//! The receiver asks the CPU early for the lines of the place where it
//! expects the next longer message (where its sender would place one as
//! long as the last), as an endpoint's receiver asks for the buffer it
//! expects ([`crate::Endpoint::recv_ref`]): while it reads a sealed
//! slot, the last message's lines (up to 2 KiB of them), and at each
//! empty poll, when the last message filled at most four lines, those
//! lines, so that a short message's area line crosses cores beside its
//! slot rather than after it. Until 2026-12-03 it asked for nothing, and
//! was no floor from 57 B up: U-Net's round trip, which asks, read below
//! the ring's at 57 to 256 B in this guest's slow regime, and in its
//! middle regime the ring's 57 B round trip took 0.21 µs against U-Net's
//! 0.22 (0.17 with the requests; docs/benchmarks.md, "The ring peer asks
//! for its next message's lines as U-Net does").
//!
//! A [`RingEnd`] carries one message in flight per direction (a
//! ping-pong): a sender that pushed a message into the area must wait for
//! the reply before it sends another, since the next may take the same
//! place. `fastpath demo`'s "SPSC ring" column, `fastpath bench unet`'s
//! ring echo and the measuring examples (`loop_rtt`, `loop_split`,
//! `loop_lines`) all use it.

use std::sync::Arc;

use crate::Config;
use crate::endpoint::{lines_ahead, poll_asks};
use crate::layout::{INLINE_MAX, Layout, RxDesc};
use crate::ring::{Consumer, Producer};
use crate::shm::{RxQueue, Segment, copy_small};

/// Where a [`RingEnd`] puts a message longer than [`INLINE_MAX`] bytes in
/// its area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// At the area's start, every message.
    OnePlace,
    /// At the area's next [`PLACE`]-byte place, in turn: a message takes
    /// its length rounded up to whole places, and the next one starts
    /// after it, or at the area's start again when it would not fit
    /// before the area's end.
    InTurn,
}

impl Placement {
    /// Its name in a table: "one place", "in turn".
    pub fn name(self) -> &'static str {
        match self {
            Placement::OnePlace => "one place",
            Placement::InTurn => "in turn",
        }
    }
}

/// The size of a place of [`Placement::InTurn`]: a page, as a default
/// endpoint's buffers are 4 KiB and page-aligned.
pub const PLACE: usize = 4096;

/// One end of the ring peer: it sends through one segment's receive queue
/// and area, and receives through the other's.
pub struct RingEnd {
    tx: (Arc<Segment>, Producer<RxDesc, RxQueue>),
    rx: (Arc<Segment>, Consumer<RxDesc, RxQueue>),
    area: usize,
    area_len: usize,
    placement: Placement,
    /// Where in the area the next longer message goes, from the area's
    /// start (always 0 for [`Placement::OnePlace`]).
    next: usize,
    /// Where in its segment the receiver expects the next longer message:
    /// the place after the last one's, as its sender took it.
    expect: usize,
    /// The lines of the area the last message received filled, as an
    /// endpoint counts them ([`lines_ahead`]; 0 after a message in its
    /// slot): as many are asked for at `expect` while the next one's slot
    /// is read, and at each empty poll when an endpoint's would ask for
    /// them ([`poll_asks`]), as an endpoint's receiver asks for its
    /// expected buffer ([`crate::Endpoint::recv_ref`]).
    fetch_lines: u32,
}

impl std::fmt::Debug for RingEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingEnd")
            .field("area", &self.area)
            .field("area_len", &self.area_len)
            .field("placement", &self.placement)
            .finish_non_exhaustive()
    }
}

/// The ring peer's two ends, over two new segments named after `tag`
/// (each a default endpoint's layout), placing longer messages at one
/// place ([`Placement::OnePlace`]).
///
/// # Errors
///
/// If a segment cannot be created.
pub fn ring_pair(tag: &str) -> std::io::Result<(RingEnd, RingEnd)> {
    ring_pair_placed(tag, Placement::OnePlace)
}

/// [`ring_pair`] with the given [`Placement`] at both ends.
///
/// # Errors
///
/// If a segment cannot be created, or its area lies beyond what a slot's
/// 32-bit offset names.
pub fn ring_pair_placed(tag: &str, placement: Placement) -> std::io::Result<(RingEnd, RingEnd)> {
    let layout = Layout::new(Config::default()).map_err(std::io::Error::other)?;
    let way = |dir: &str| -> std::io::Result<_> {
        let seg = Arc::new(Segment::create(&format!("{tag}-{dir}"), layout.total)?);
        let (_, q, _) = crate::shm::queues(&seg, &layout).map_err(std::io::Error::other)?;
        Ok((seg, Producer::new(q.clone()), Consumer::new(q)))
    };
    let (there, tx_a, rx_b) = way("there")?;
    let (back, tx_b, rx_a) = way("back")?;
    let (area, area_len) = (layout.area, layout.area_len);
    // The slot names a message's place by its offset in the segment, a
    // `u32` as in an endpoint's receive descriptor.
    u32::try_from(area + area_len).map_err(std::io::Error::other)?;
    let end = |tx, rx| RingEnd {
        tx,
        rx,
        area,
        area_len,
        placement,
        next: 0,
        expect: area,
        fetch_lines: 0,
    };
    Ok((
        end((there.clone(), tx_a), (back.clone(), rx_a)),
        end((back, tx_b), (there, rx_b)),
    ))
}

impl RingEnd {
    /// The longest message it carries: the area's length.
    pub fn max_len(&self) -> usize {
        self.area_len
    }

    /// Its [`Placement`].
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Sends `msg`, waiting (spinning) for a free slot: written in place
    /// in its slot if it fits (as the engine writes an inline receive
    /// descriptor, [`RxQueue::write_rx_inline`]), else copied into the
    /// area first, at its [`Placement`], and the slot names it with its
    /// offset and length (as the engine names a message in one buffer,
    /// [`RxQueue::write_rx_one_buffer`]). The write seals the slot; the
    /// producer index is published after.
    ///
    /// # Panics
    ///
    /// If `msg` is longer than [`RingEnd::max_len`].
    // Always inlined: with `#[inline]` a caller in another crate was left a
    // call for longer messages (`ring_ab`, callgrind: 51 instructions more
    // per round trip at 57 B and 1 KiB).
    #[inline(always)]
    pub fn send(&mut self, msg: &[u8]) {
        // `Err` is a corrupt queue, which two threads of this process
        // running this code cannot make: the message is then dropped, not
        // spun on.
        let n = loop {
            match self.tx.1.next_slot() {
                Ok(Some(n)) => break n,
                Ok(None) => std::hint::spin_loop(),
                Err(_) => return,
            }
        };
        if msg.len() <= INLINE_MAX {
            let q = self.tx.1.mem();
            q.write_rx_inline(n, 0, msg.len(), |dst| copy_small(dst, msg));
        } else {
            assert!(msg.len() <= self.area_len, "longer than the ring's area");
            let at = self.take_place(msg.len());
            self.tx.0.write_bytes(at, msg);
            // `at + len` is within the area, whose end fits a `u32`
            // (`ring_pair_placed`).
            let q = self.tx.1.mem();
            q.write_rx_one_buffer(n, 0, msg.len() as u32, at as u32);
        }
        self.tx.1.filled();
        self.tx.1.publish();
    }

    /// The offset in the segment where a `len`-byte message goes, and the
    /// next message's place after it.
    #[inline(always)]
    fn take_place(&mut self, len: usize) -> usize {
        let (at, next) = place(self.placement, self.area_len, self.next, len);
        self.next = next;
        self.area + at
    }

    /// If the next message's slot is sealed, the message copied out (of
    /// its slot, in place, or the area, where the slot names it) into
    /// `buf`, up to `buf`'s length, and the number of bytes copied: the
    /// message's length when `buf` holds it. The slot's fixed part is read
    /// as an endpoint's receiver reads it ([`RxQueue::rx_fixed`]), not the
    /// whole slot.
    ///
    /// # Panics
    ///
    /// If the slot names bytes outside the area: a corrupt queue, which
    /// the two ends of this process running this code cannot make.
    #[inline(always)]
    pub fn try_recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        let Some((i, (len, _, _))) = self.rx.1.take_sealed_with(|q, s| q.rx_fixed(s)) else {
            // An empty poll: the last message's few lines at the place the
            // next is expected, so that they cross beside the slot's.
            let lines = self.fetch_lines;
            if poll_asks(lines) {
                #[cfg(test)]
                tests::ASKED.with(|a| a.set(Some((self.expect, lines as usize))));
                self.rx.0.prefetch_line_count(self.expect, lines as usize);
            }
            return None;
        };
        if self.fetch_lines != 0 {
            // The place the message probably names, asked for before the
            // slot names it.
            let lines = std::mem::take(&mut self.fetch_lines) as usize;
            #[cfg(test)]
            tests::ASKED.with(|a| a.set(Some((self.expect, lines))));
            self.rx.0.prefetch_line_count(self.expect, lines);
        }
        let len = len as usize;
        let n = len.min(buf.len());
        let q = self.rx.1.mem();
        if len <= INLINE_MAX {
            q.with_rx_inline(i, n, |src| copy_small(&mut buf[..n], src));
        } else {
            let at = q.read_rx_first_offset(i) as usize;
            assert!(
                at >= self.area && at - self.area + n <= self.area_len,
                "a ring slot names bytes outside its area"
            );
            self.rx.0.read_bytes(at, &mut buf[..n]);
            // The next message expected where its sender would place one
            // as long after this one (only a guess: the lines asked for
            // are checked to lie in the segment, and nothing is read).
            if self.placement == Placement::InTurn {
                let (_, after) = place(self.placement, self.area_len, at - self.area, len);
                self.expect = self.area + place(self.placement, self.area_len, after, len).0;
            }
            // `len` fits a `u32`: the slot's length field.
            self.fetch_lines = lines_ahead(len as u32);
        }
        self.rx.1.advance();
        Some(n)
    }
}

/// Where a `len`-byte message goes by `placement` in an area of
/// `area_len` bytes whose next free place is `next` (offsets from the
/// area's start), and the next free place after it.
#[inline(always)]
fn place(placement: Placement, area_len: usize, next: usize, len: usize) -> (usize, usize) {
    match placement {
        Placement::OnePlace => (0, 0),
        Placement::InTurn => {
            let at = if next + len > area_len { 0 } else { next };
            (at, at + len.div_ceil(PLACE) * PLACE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::SealedMem;

    thread_local! {
        /// The place and lines [`RingEnd::try_recv`] last asked for on
        /// this thread.
        pub(super) static ASKED: std::cell::Cell<Option<(usize, usize)>> =
            const { std::cell::Cell::new(None) };
    }

    /// What `try_recv` asked for since the last call, cleared.
    fn asked() -> Option<(usize, usize)> {
        ASKED.with(|a| a.take())
    }

    #[test]
    fn messages_in_the_slot_and_in_the_area_arrive_whole() {
        let (mut a, mut b) = ring_pair("unet-peer-test").unwrap();
        let mut buf = vec![0u8; a.max_len()];
        assert_eq!(b.try_recv(&mut buf), None);
        for size in [0, 1, 56, 57, 1024, a.max_len()] {
            let msg: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
            a.send(&msg);
            assert_eq!(b.try_recv(&mut buf), Some(size), "{size} B");
            assert_eq!(&buf[..size], &msg[..], "{size} B");
            assert_eq!(b.try_recv(&mut buf), None);
            // And back.
            b.send(&msg[..size / 2]);
            assert_eq!(a.try_recv(&mut buf), Some(size / 2));
            assert_eq!(&buf[..size / 2], &msg[..size / 2]);
        }
        // A short buffer takes what fits.
        a.send(&[9; 40]);
        let mut short = [0u8; 8];
        assert_eq!(b.try_recv(&mut short), Some(8));
        assert_eq!(short, [9; 8]);
    }

    #[test]
    fn every_length_around_the_slot_arrives_exactly_and_nothing_past_it() {
        let (mut a, mut b) = ring_pair("unet-peer-lengths").unwrap();
        for size in (0..=130).chain([1024, 4095, 4096, 4097]) {
            let msg: Vec<u8> = (0..size).map(|i| (i * 13 + size + 1) as u8).collect();
            // Guard bytes past the message must keep their value.
            let mut buf = vec![0xeeu8; size + 64];
            a.send(&msg);
            assert_eq!(b.try_recv(&mut buf), Some(size), "{size} B");
            assert_eq!(&buf[..size], &msg[..], "{size} B");
            assert!(buf[size..].iter().all(|&x| x == 0xee), "{size} B: past it");
            b.send(&msg);
            assert_eq!(a.try_recv(&mut buf), Some(size), "{size} B back");
            assert_eq!(&buf[..size], &msg[..], "{size} B back");
        }
    }

    /// The receiver asks for the lines of the place its sender would give
    /// a message as long as the last, whichever the placement, over the
    /// area's end too; after a message in its slot, for none.
    #[test]
    fn the_receiver_expects_the_next_message_where_its_sender_would_place_it() {
        for placement in [Placement::OnePlace, Placement::InTurn] {
            let (mut a, mut b) = ring_pair_placed("unet-peer-expect", placement).unwrap();
            let mut buf = vec![0u8; a.max_len()];
            let third = a.max_len() / 3 + 1;
            for (k, size) in [57, 57, 200, PLACE + 1, third, third, third, 1024, 4096]
                .into_iter()
                .enumerate()
            {
                a.send(&vec![k as u8; size]);
                assert_eq!(b.try_recv(&mut buf), Some(size));
                let (at, _) = place(placement, a.max_len(), a.next, size);
                assert_eq!(
                    b.expect,
                    b.area + at,
                    "{placement:?}, message {k}, {size} B"
                );
                // At most 2 KiB's lines, as an endpoint asks for.
                let lines = size.min(2048).div_ceil(64) as u32;
                assert_eq!(b.fetch_lines, lines, "{placement:?}, message {k}");
            }
            a.send(&[1; INLINE_MAX]);
            assert_eq!(b.try_recv(&mut buf), Some(INLINE_MAX));
            assert_eq!(
                b.fetch_lines, 0,
                "{placement:?}: after a message in its slot"
            );
        }
    }

    /// An empty poll asks for the expected place's lines after a message
    /// of at most four lines, for nothing after a longer one or one in its
    /// slot; a sealed slot's read asks for as many lines as the last
    /// message filled, up to 2 KiB's.
    #[test]
    fn the_receiver_asks_for_the_lines_an_endpoint_would() {
        let (mut a, mut b) = ring_pair_placed("unet-peer-asked", Placement::InTurn).unwrap();
        let mut buf = vec![0u8; a.max_len()];
        // (the message, what an empty poll after it asks for in lines)
        for (size, poll) in [(57, 1), (256, 4), (257, 0), (1024, 0), (40, 0), (4096, 0)] {
            let before = (b.expect, b.fetch_lines);
            a.send(&vec![7; size]);
            asked();
            assert_eq!(b.try_recv(&mut buf), Some(size));
            let at_read = (before.1 != 0).then_some((before.0, before.1 as usize));
            assert_eq!(asked(), at_read, "reading the {size} B message");
            assert_eq!(b.try_recv(&mut buf), None);
            let at_poll = (poll != 0).then_some((b.expect, poll));
            assert_eq!(asked(), at_poll, "an empty poll after {size} B");
        }
        assert_eq!(b.fetch_lines, 32, "2 KiB's lines after 4 KiB");
    }

    #[test]
    fn messages_in_turn_take_the_next_places_and_come_round_to_the_start() {
        let (mut a, mut b) = ring_pair_placed("unet-peer-turn", Placement::InTurn).unwrap();
        assert_eq!(
            (a.placement(), b.placement()),
            (Placement::InTurn, Placement::InTurn)
        );
        let places = a.max_len() / PLACE;
        assert!(places >= 4, "{places} places");
        let mut buf = vec![0u8; a.max_len()];
        // The model: where each message should go, from the area's start.
        let (mut next, mut rounds) = (0, 0);
        let sizes = [57, PLACE, PLACE + 1, 1024, 56, 3 * PLACE - 1];
        // Enough messages to go round the area twice.
        for k in 0..3 * places {
            let size = sizes[k % sizes.len()];
            let msg: Vec<u8> = (0..size).map(|i| (i * 11 + k) as u8).collect();
            a.send(&msg);
            if size > INLINE_MAX {
                if next + size > a.max_len() {
                    next = 0;
                    rounds += 1;
                }
                let at = b.rx.1.mem().read_rx_first_offset(k as u32) as usize;
                assert_eq!(at - b.area, next, "message {k}, {size} B");
                next += size.div_ceil(PLACE) * PLACE;
            }
            // Each message differs from the one before at every place it
            // shares, so a receiver reading anywhere but where the slot
            // names would see the wrong bytes.
            assert_eq!(b.try_recv(&mut buf), Some(size), "message {k}");
            assert_eq!(&buf[..size], &msg[..], "message {k}, {size} B");
        }
        assert!(rounds >= 2, "came round the area {rounds} times");
        // Back: the other end's places are its own.
        b.send(&[3; 100]);
        assert_eq!(a.rx.1.mem().read_rx_first_offset(0), a.area as u32);
        assert_eq!(a.try_recv(&mut buf), Some(100));
        assert_eq!(&buf[..100], &[3; 100]);
    }

    #[test]
    fn one_place_puts_every_longer_message_at_the_areas_start() {
        let (mut a, mut b) = ring_pair("unet-peer-one").unwrap();
        assert_eq!(a.placement(), Placement::OnePlace);
        let mut buf = vec![0u8; a.max_len()];
        for (k, size) in [57, PLACE, 1024, 2 * PLACE + 1].into_iter().enumerate() {
            a.send(&vec![k as u8; size]);
            let at = b.rx.1.mem().read_rx_first_offset(k as u32) as usize;
            assert_eq!(at, b.area, "{size} B");
            assert_eq!(b.try_recv(&mut buf), Some(size));
            assert!(buf[..size].iter().all(|&x| x == k as u8));
        }
    }

    #[test]
    #[should_panic(expected = "outside its area")]
    fn a_slot_naming_bytes_outside_the_area_is_refused() {
        let (mut a, mut b) = ring_pair("unet-peer-outside").unwrap();
        a.send(&[1; 100]);
        // The slot's offset rewritten to name the queue's own memory, in
        // front of the area.
        b.rx.1
            .mem()
            .write_rx_one_buffer(0, 0, 100, (b.area - 64) as u32);
        let mut buf = [0u8; 100];
        b.try_recv(&mut buf);
    }

    #[test]
    fn its_slots_read_as_an_endpoints_descriptors() {
        // The slots are written as the engine writes them, so an
        // endpoint's receiver code reads them: an inline message with no
        // buffers and its bytes in the slot, a longer one as one buffer,
        // the area, with its length.
        let (mut a, b) = ring_pair("unet-peer-slots").unwrap();
        let q = b.rx.1.mem();
        a.send(&[7; 56]);
        a.send(&[9; 57]);
        let s0 = q.slot(0);
        assert_eq!(q.seal_of(s0).load(std::sync::atomic::Ordering::Acquire), 1);
        assert_eq!(q.rx_fixed(s0), (56, 0, 0));
        assert_eq!(q.with_rx_inline(0, 56, |p| p.to_vec()), vec![7; 56]);
        assert_eq!(q.rx_fixed(q.slot(1)), (57, 0, 1));
        assert_eq!(q.read_rx_first_offset(1) as usize, b.area);
    }
}
