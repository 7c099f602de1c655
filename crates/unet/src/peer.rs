//! The bare ring U-Net's round trips are compared with: what two threads
//! sharing memory need at least to pass a message each way, with no
//! engine, frame, classification, budget or check.
//!
//! Each direction is an endpoint's receive queue in a segment of its own
//! (the same [`crate::ring`] code and layout as an endpoint's), and that
//! segment's buffer area. A message of at most [`INLINE_MAX`] bytes goes in
//! its slot, as U-Net's receive slot carries it; a longer one goes in the
//! area, at its start, and the slot carries its length. The slot is sealed
//! when pushed, and the receiver learns of it by the seal
//! ([`Consumer::pop_sealed`]), as an endpoint's receiver does, never from
//! the producer index: one line crosses per direction for a message that
//! fits in its slot, and the area's lines besides for a longer one.
//!
//! Since each direction has one area, a [`RingEnd`] carries one message in
//! flight per direction (a ping-pong): a sender that pushed a message into
//! the area must wait for the reply before it sends another. `fastpath
//! demo`'s "SPSC ring" column, `fastpath bench unet`'s ring echo and the
//! measuring examples (`loop_rtt`, `loop_split`, `loop_lines`) all use it.

use std::sync::Arc;

use crate::Config;
use crate::layout::{INLINE_MAX, Layout, RxDesc};
use crate::ring::{Consumer, Producer};
use crate::shm::{RxQueue, Segment};

/// One end of the ring peer: it sends through one segment's receive queue
/// and area, and receives through the other's.
pub struct RingEnd {
    tx: (Arc<Segment>, Producer<RxDesc, RxQueue>),
    rx: (Arc<Segment>, Consumer<RxDesc, RxQueue>),
    area: usize,
    area_len: usize,
}

impl std::fmt::Debug for RingEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingEnd")
            .field("area", &self.area)
            .field("area_len", &self.area_len)
            .finish_non_exhaustive()
    }
}

/// The ring peer's two ends, over two new segments named after `tag`
/// (each a default endpoint's layout).
///
/// # Errors
///
/// If a segment cannot be created.
pub fn ring_pair(tag: &str) -> std::io::Result<(RingEnd, RingEnd)> {
    let layout = Layout::new(Config::default()).map_err(std::io::Error::other)?;
    let way = |dir: &str| -> std::io::Result<_> {
        let seg = Arc::new(Segment::create(&format!("{tag}-{dir}"), layout.total)?);
        let (_, q, _) = crate::shm::queues(&seg, &layout);
        Ok((seg, Producer::new(q.clone()), Consumer::new(q)))
    };
    let (there, tx_a, rx_b) = way("there")?;
    let (back, tx_b, rx_a) = way("back")?;
    let (area, area_len) = (layout.area, layout.area_len);
    Ok((
        RingEnd {
            tx: (there.clone(), tx_a),
            rx: (back.clone(), rx_a),
            area,
            area_len,
        },
        RingEnd {
            tx: (back, tx_b),
            rx: (there, rx_b),
            area,
            area_len,
        },
    ))
}

impl RingEnd {
    /// The longest message it carries: the area's length.
    pub fn max_len(&self) -> usize {
        self.area_len
    }

    /// Sends `msg`, waiting (spinning) for a free slot: in its slot if it
    /// fits, else copied into the area first. The push seals the slot.
    ///
    /// # Panics
    ///
    /// If `msg` is longer than [`RingEnd::max_len`].
    #[inline]
    pub fn send(&mut self, msg: &[u8]) {
        let d = if msg.len() <= INLINE_MAX {
            RxDesc::inline(0, msg)
        } else {
            assert!(msg.len() <= self.area_len, "longer than the ring's area");
            self.tx.0.write_bytes(self.area, msg);
            RxDesc {
                len: msg.len() as u32,
                ..RxDesc::default()
            }
        };
        // `Err` is a corrupt queue, which two threads of this process
        // running this code cannot make: it would only spin.
        while !self.tx.1.push(d).unwrap_or(true) {
            std::hint::spin_loop();
        }
    }

    /// The next message's length if its slot is sealed, the message copied
    /// out (of its slot or the area) into `buf`, up to `buf`'s length.
    #[inline]
    pub fn try_recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        let d = self.rx.1.pop_sealed()?;
        let len = d.len as usize;
        let n = len.min(buf.len());
        if len <= INLINE_MAX {
            buf[..n].copy_from_slice(&d.data[..n]);
        } else {
            self.rx.0.read_bytes(self.area, &mut buf[..n]);
        }
        Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
