//! An applet's inbox: the frames that wait for its `doRx` on the
//! endpoint's own thread, handed across threads without a lock.
//!
//! The inbox is a bounded multi-producer queue (crossbeam-channel's
//! array flavour: each push and pop one compare-and-swap on its index and
//! one store to its slot; no lock, no allocation once its frame buffers
//! are warm). Any thread that delivers a frame for the applet pushes it;
//! one thread at a time (the holder of the endpoint's receive lock) pops,
//! and runs every frame that is waiting per wake-up ([`super::Engine::drain`]).
//!
//! - **Budgets.** The queue's capacity is [`super::Budgets::inbox_frames`]
//!   (at most [`FRAMES_MAX`]); the bytes waiting are counted in an atomic
//!   against [`super::Budgets::inbox_bytes`], reserved before a push and
//!   given back after a pop. A frame over either budget is refused, and
//!   the caller counts it.
//! - **Frame buffers** come back through a second queue of spare buffers,
//!   so that a warm inbox allocates nothing per frame; only buffers of at
//!   most [`SPARE_BYTES`] are kept, at most [`SPARES`] of them, so an
//!   inbox holds little memory once a burst is over.
//! - **Closing.** The endpoint's removal sets its `closed` flag, then
//!   empties the inbox, counting what it finds. A producer pushes, then
//!   reads `closed` again, with a sequentially consistent fence on each
//!   side between the write and the read: either the remover's emptying
//!   sees the frame, or the producer sees `closed` and empties the inbox
//!   itself. Each frame is popped once, so each is counted once (the
//!   remover's and the producer's emptying may overlap).

use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::{Receiver, Sender, TrySendError};

/// The most frames an inbox holds, whatever its budget says (its slots are
/// allocated when the endpoint is made).
pub(super) const FRAMES_MAX: usize = 1 << 16;
/// Frame buffers up to this size are kept for reuse: a frame of the
/// largest message of a default endpoint (14 buffers of 4 KiB) with its
/// header, so that a burst does not allocate on the delivering thread and
/// free on the draining one per frame.
pub(super) const SPARE_BYTES: usize = (64 << 10) + 64;
/// How many spare frame buffers an inbox keeps (at most about 2 MiB, half
/// the default inbox byte budget).
pub(super) const SPARES: usize = 32;

/// A frame waiting for the applet, with the channel it arrived on.
pub(super) struct Waiting {
    pub(super) frame: Vec<u8>,
    pub(super) chan: u16,
}

/// Why a frame was not put in the inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// The inbox holds its budget of frames or bytes.
    Full,
}

/// An applet's inbox (see the module documentation).
pub(super) struct Inbox {
    push: Sender<Waiting>,
    pop: Receiver<Waiting>,
    spare_in: Sender<Vec<u8>>,
    spare_out: Receiver<Vec<u8>>,
    /// Bytes of the frames waiting (reserved before their push).
    bytes: AtomicUsize,
    max_bytes: usize,
}

impl Inbox {
    /// An empty inbox for `frames` frames and `bytes` bytes.
    pub(super) fn new(frames: usize, bytes: usize) -> Inbox {
        let (push, pop) = crossbeam_channel::bounded(frames.min(FRAMES_MAX));
        let (spare_in, spare_out) = crossbeam_channel::bounded(SPARES);
        Inbox {
            push,
            pop,
            spare_in,
            spare_out,
            bytes: AtomicUsize::new(0),
            max_bytes: bytes,
        }
    }

    /// Whether no frame is waiting (nor being pushed: a frame's bytes are
    /// reserved before its push, and every frame has a header). One load,
    /// for the per-frame test of an endpoint without an applet; a `false`
    /// while a refused push gives its bytes back only sends the caller
    /// the longer way.
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.bytes.load(Ordering::Acquire) == 0
    }

    /// Puts a frame of `len` bytes, which `fill` writes, in the inbox.
    pub(super) fn push(
        &self,
        chan: u16,
        len: usize,
        fill: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), Refused> {
        let before = self.bytes.fetch_add(len, Ordering::Relaxed);
        if before.saturating_add(len) > self.max_bytes {
            self.bytes.fetch_sub(len, Ordering::Relaxed);
            return Err(Refused::Full);
        }
        let mut frame = self.spare_out.try_recv().unwrap_or_default();
        frame.clear();
        fill(&mut frame);
        debug_assert_eq!(frame.len(), len);
        match self.push.try_send(Waiting { frame, chan }) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(w) | TrySendError::Disconnected(w)) => {
                self.bytes.fetch_sub(len, Ordering::Relaxed);
                self.recycle(w.frame);
                Err(Refused::Full)
            }
        }
    }

    /// The frame at the front, if any.
    #[inline]
    pub(super) fn pop(&self) -> Option<Waiting> {
        let w = self.pop.try_recv().ok()?;
        self.bytes.fetch_sub(w.frame.len(), Ordering::Relaxed);
        Some(w)
    }

    /// Gives a popped frame's buffer back for reuse.
    #[inline]
    pub(super) fn recycle(&self, frame: Vec<u8>) {
        if frame.capacity() <= SPARE_BYTES {
            let _ = self.spare_in.try_send(frame);
        }
    }

    /// Empties the inbox; how many frames it held.
    pub(super) fn clear(&self) -> u64 {
        let mut n = 0;
        while let Some(w) = self.pop() {
            self.recycle(w.frame);
            n += 1;
        }
        n
    }
}
