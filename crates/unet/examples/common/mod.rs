//! The set-up the measuring examples share (`loop_rtt`, `loop_lines`,
//! `loop_split`, each including this file with `#[path]`): a pair of
//! U-Net endpoints on `loop` and their send and receive loops, and the
//! bare SPSC ring peer they are compared with.
//!
//! The ring peer is two receive queues in shared memory, laid out as an
//! endpoint's, one per direction, each with its buffer area: a side copies
//! the message into the area and pushes its length; the other learns of it
//! by the slot's seal and copies it out. It runs the ring's seal protocol
//! ([`unet::ring::Consumer::pop_sealed`], the producer's push sealing the
//! slot), the same code as an endpoint's receive queue, so it never reads
//! the producer index: one slot line crosses per direction, as for U-Net.
#![allow(dead_code)] // each example uses some of it

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use unet::layout::{Layout, RxDesc};
use unet::ring::{Consumer, Producer};
use unet::shm::{Segment, ShmQueue};
use unet::transport::LoopNet;
use unet::wait::Backoff;
use unet::{Config, Endpoint, Engine};

/// How a waiting loop waits between polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Spin, then yield, then sleep ([`Backoff`]): for timing.
    Backoff,
    /// Yield the core at every empty poll: under valgrind, which runs one
    /// thread at a time, so that it switches threads once per message.
    Yield,
}

/// One waiting loop's state.
struct Waiter {
    idle: Idle,
    backoff: Backoff,
}

impl Waiter {
    fn new(idle: Idle) -> Waiter {
        Waiter {
            idle,
            backoff: Backoff::default(),
        }
    }

    /// Waits once; whether it is time to look at a stop flag (now and
    /// then while backing off, every time while yielding).
    fn wait(&mut self) -> bool {
        match self.idle {
            Idle::Backoff => {
                self.backoff.snooze();
                self.backoff.now_and_then()
            }
            Idle::Yield => {
                std::thread::yield_now();
                true
            }
        }
    }
}

/// Two endpoints of one engine on `loop` with a channel each way: the
/// engine, `a`, `b`, the channel from `a` to `b` and the one back.
pub fn unet_pair(cfg: Config) -> (Engine, Endpoint, Endpoint, u16, u16) {
    let net = LoopNet::new();
    let e = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    let mut a = e.create_endpoint(cfg, None).unwrap();
    let mut b = e.create_endpoint(cfg, None).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    (e, a, b, ab, ba)
}

/// Waits for the next message and copies it into `buf`: its channel, or
/// `None` once `stop` is set (looked at now and then while waiting).
pub fn recv_into(
    ep: &mut Endpoint,
    buf: &mut Vec<u8>,
    idle: Idle,
    stop: Option<&AtomicBool>,
) -> Option<u16> {
    let mut wait = Waiter::new(idle);
    loop {
        if let Some(m) = ep.recv_ref() {
            buf.clear();
            m.read(|p| buf.extend_from_slice(p));
            return Some(m.chan());
        }
        if wait.wait() && stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            return None;
        }
    }
}

/// Sends `msg` on `chan`, driving the engine and waiting while the
/// transmit queue is full.
pub fn send_all(ep: &mut Endpoint, chan: u16, msg: &[u8], idle: Idle) {
    let mut wait = Waiter::new(idle);
    loop {
        match ep.send_with(chan, msg.len(), |b| b.copy_from_slice(msg)) {
            Err(unet::SendError::Full) => {
                ep.poll_engine();
                wait.wait();
            }
            r => return r.unwrap(),
        }
    }
}

/// One end of the ring peer: it sends through one segment's receive queue
/// and area (`tx`), and receives through the other's (`rx`); both areas at
/// `area`.
pub struct RingEnd {
    tx: (Arc<Segment>, Producer<RxDesc, ShmQueue>),
    rx: (Arc<Segment>, Consumer<RxDesc, ShmQueue>),
    area: usize,
}

/// The ring peer's two ends, over two new segments named after `tag`.
pub fn ring_pair(tag: &str) -> (RingEnd, RingEnd) {
    let layout = Layout::new(Config::default()).unwrap();
    let way = |dir: &str| {
        let seg = Arc::new(Segment::create(&format!("{tag}-{dir}"), layout.total).unwrap());
        let (_, q, _) = unet::shm::queues(&seg, &layout);
        (seg, Producer::new(q.clone()), Consumer::new(q))
    };
    let (there, tx_a, rx_b) = way("there");
    let (back, tx_b, rx_a) = way("back");
    let area = layout.area;
    (
        RingEnd {
            tx: (there.clone(), tx_a),
            rx: (back.clone(), rx_a),
            area,
        },
        RingEnd {
            tx: (back, tx_b),
            rx: (there, rx_b),
            area,
        },
    )
}

impl RingEnd {
    /// Copies `msg` into the area and pushes its length (the push seals
    /// the slot), waiting for a free slot.
    pub fn send(&mut self, msg: &[u8]) {
        self.tx.0.write_bytes(self.area, msg);
        let d = RxDesc {
            len: msg.len() as u32,
            ..RxDesc::default()
        };
        while !self.tx.1.push(d).unwrap_or(true) {
            std::hint::spin_loop();
        }
    }

    /// The next message's length if its slot is sealed, the message
    /// copied out of the area into `buf` (up to `buf`'s length).
    #[inline]
    pub fn try_recv(&mut self, buf: &mut [u8]) -> Option<usize> {
        let d = self.rx.1.pop_sealed()?;
        let n = (d.len as usize).min(buf.len());
        self.rx.0.read_bytes(self.area, &mut buf[..n]);
        Some(n)
    }

    /// Waits for the next message ([`RingEnd::try_recv`]): its length, or
    /// `None` once `stop` is set (looked at now and then while waiting).
    pub fn recv(&mut self, buf: &mut [u8], idle: Idle, stop: Option<&AtomicBool>) -> Option<usize> {
        let mut wait = Waiter::new(idle);
        loop {
            if let Some(n) = self.try_recv(buf) {
                return Some(n);
            }
            if wait.wait() && stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                return None;
            }
        }
    }
}
