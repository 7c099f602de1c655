//! A mock endpoint for the natives (`unet::natives::NativeHost`): a buffer
//! area, a free queue, a bounded receive queue and the messages sent,
//! recorded so that a test sees what each native did (`natives.rs`), and a
//! host type to bind the natives table for (`lent_rx.rs`, which only loads).
#![allow(dead_code)]

use std::cell::Cell;
use std::collections::VecDeque;

use unet::natives::{HostError, NativeHost, RxBody};

/// Buffer size of the mock endpoint.
pub const BUF: u32 = 512;
/// Buffers in its area.
pub const BUFFERS: u32 = 8;
/// Its area length.
pub const AREA: u32 = BUF * BUFFERS;
/// The mock's maximum message size.
pub const MAX_MESSAGE: u32 = 9000;

/// A receive descriptor as the mock recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rx {
    Inline {
        chan: u16,
        bytes: Vec<u8>,
    },
    Buffers {
        chan: u16,
        len: u32,
        offsets: Vec<u32>,
    },
}

/// A mock endpoint: a buffer area of 8 x 512 bytes, a free queue, a bounded
/// receive queue, the messages transmitted, open channels 1 and 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mock {
    pub area: Vec<u8>,
    pub free: VecDeque<u32>,
    pub rx: Vec<Rx>,
    pub rx_capacity: usize,
    pub sent: Vec<(u16, Vec<u8>)>,
    pub open: Vec<u16>,
    pub max_message: u32,
    pub area_reads: Cell<usize>,
}

impl Mock {
    /// The area filled with a pattern (so that a copy out of it is visible),
    /// every buffer on the free queue in order.
    pub fn new() -> Mock {
        Mock {
            area: pattern(AREA as usize, 0xa5),
            free: (0..BUFFERS).map(|i| i * BUF).collect(),
            rx: Vec::new(),
            rx_capacity: 64,
            sent: Vec::new(),
            open: vec![1, 2],
            max_message: MAX_MESSAGE,
            area_reads: Cell::new(0),
        }
    }

    /// The bytes of a received message: inline, or gathered from its buffers.
    pub fn message(&self, rx: &Rx) -> Vec<u8> {
        match rx {
            Rx::Inline { bytes, .. } => bytes.clone(),
            Rx::Buffers { len, offsets, .. } => {
                let mut out = Vec::new();
                for &o in offsets {
                    let take = (*len as usize - out.len()).min(BUF as usize);
                    out.extend_from_slice(&self.area[o as usize..o as usize + take]);
                }
                out
            }
        }
    }
}

impl NativeHost for Mock {
    fn buffer_size(&self) -> u32 {
        BUF
    }
    fn area_len(&self) -> u32 {
        AREA
    }
    fn read_area(&self, off: u32, dst: &mut [i8]) {
        self.area_reads.set(self.area_reads.get() + 1);
        unet::natives::u8_to_i8(dst, &self.area[off as usize..off as usize + dst.len()]);
    }
    fn write_area(&mut self, off: u32, src: &[i8]) {
        unet::natives::i8_to_u8(&mut self.area[off as usize..off as usize + src.len()], src);
    }
    fn pop_free(&mut self) -> Option<u32> {
        self.free.pop_front()
    }
    fn push_rx(&mut self, chan: u16, len: u32, body: RxBody<'_>) -> Result<(), HostError> {
        if self.rx.len() >= self.rx_capacity {
            return Err(HostError::RxQueueFull);
        }
        self.rx.push(match body {
            RxBody::Inline(bytes) => {
                assert_eq!(bytes.len(), len as usize, "inline length");
                Rx::Inline {
                    chan,
                    bytes: bytes.to_vec(),
                }
            }
            RxBody::Buffers(offsets) => Rx::Buffers {
                chan,
                len,
                offsets: offsets.to_vec(),
            },
        });
        Ok(())
    }
    fn transmit(&mut self, chan: u16, payload: &[i8]) -> Result<(), HostError> {
        if !self.open.contains(&chan) {
            return Err(HostError::NoSuchChannel(chan));
        }
        if payload.len() as u32 > self.max_message {
            return Err(HostError::TooLong {
                len: payload.len() as u32,
                max: self.max_message,
            });
        }
        self.sent
            .push((chan, payload.iter().map(|&b| b as u8).collect()));
        Ok(())
    }
    fn max_message(&self) -> u32 {
        self.max_message
    }
}

/// `len` bytes that differ from position to position and with `seed`.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}
