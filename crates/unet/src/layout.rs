//! The layout of an endpoint's shared memory (U-Net/SLE §2, the endpoint of
//! U-Net's Figure 1): the sizes chosen at creation, the transmit and
//! receive descriptors, and where the three queues and the buffer area lie
//! in the segment.
//!
//! ```text
//!  0        header page: magic, version, the Config, the offsets below
//!  4096     transmit queue: producer index | consumer index | tx_depth  × TxDesc (16 B)
//!  ...      receive queue:  producer index | consumer index | rx_depth  × RxDesc (64 B)
//!  ...      free queue:     producer index | consumer index | free_depth × u32 offset
//!  (page)   buffer area:    buffers × buffer_size bytes
//! ```
//!
//! Each index lives on a cache line of its own, so that the producer and the
//! consumer of a queue never write the same index line. (The receive
//! queue's consumer writes one byte of a slot's line, its seal,
//! [`RxDesc::sealed`], when it takes the message: the line it reads anyway,
//! which the engine writes again only after the consumer index frees it.) Indices count pushes and
//! pops since creation and wrap at 2³²; a slot is `index & (depth - 1)`.
//!
//! The engine writes the header once, at creation, for the application to
//! read. It never reads it back: its own copy of the [`Layout`] is the
//! truth, so an application that overwrites the header harms only itself.

use core::fmt;
use core::marker::PhantomData;

use crate::error::ConfigError;

/// The largest message carried inline in a receive descriptor (the
/// paper's small-message optimization).
pub const INLINE_MAX: usize = 56;

/// The most buffer offsets a receive descriptor holds, so the largest
/// message an endpoint receives is `RX_BUFFERS_MAX * buffer_size` bytes.
pub const RX_BUFFERS_MAX: usize = 14;

/// `"fpunet\0\x01"`: the header's first eight bytes.
pub const MAGIC: u64 = u64::from_le_bytes(*b"fpunet\0\x01");

/// The layout version in the header. 2: a receive descriptor's `nbufs` is a
/// byte, and the byte after it is the slot's seal ([`RxDesc::sealed`]).
pub const VERSION: u32 = 2;

/// Sizes of an endpoint, fixed at creation.
///
/// The defaults give 512 buffers of 4 KiB (a 2 MiB buffer area), queues of
/// 256 transmit and receive descriptors and a free queue that holds every
/// buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Number of buffers in the buffer area. Default 512.
    pub buffers: u32,
    /// Size of one buffer in bytes: a power of two from 64 to 65,536.
    /// Default 4096.
    pub buffer_size: u32,
    /// Transmit queue depth: a power of two from 2 to 65,536. Default 256.
    pub tx_depth: u32,
    /// Receive queue depth: a power of two from 2 to 65,536. Default 256.
    pub rx_depth: u32,
    /// Free queue depth: a power of two from 2 to 65,536, at least
    /// `buffers` so that every buffer fits. Default 512.
    pub free_depth: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            buffers: 512,
            buffer_size: 4096,
            tx_depth: 256,
            rx_depth: 256,
            free_depth: 512,
        }
    }
}

/// The largest buffer area an endpoint may have (1 GiB).
pub const MAX_AREA: u64 = 1 << 30;

impl Config {
    /// Checks every size, saying which one is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let pow2 = |what: &'static str, v: u32, lo: u32, hi: u32| {
            if v.is_power_of_two() && (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(ConfigError::Size {
                    what,
                    value: u64::from(v),
                    rule: format!("a power of two from {lo} to {hi}"),
                })
            }
        };
        pow2("buffer_size", self.buffer_size, 64, 65536)?;
        pow2("tx_depth", self.tx_depth, 2, 65536)?;
        pow2("rx_depth", self.rx_depth, 2, 65536)?;
        pow2("free_depth", self.free_depth, 2, 65536)?;
        if self.buffers == 0 || self.area_len() > MAX_AREA {
            return Err(ConfigError::Size {
                what: "buffers",
                value: u64::from(self.buffers),
                rule: format!("from 1 to {MAX_AREA} bytes of buffer area in all"),
            });
        }
        if self.free_depth < self.buffers {
            return Err(ConfigError::Size {
                what: "free_depth",
                value: u64::from(self.free_depth),
                rule: format!("at least `buffers` ({})", self.buffers),
            });
        }
        Ok(())
    }

    /// Bytes in the buffer area.
    pub fn area_len(&self) -> u64 {
        u64::from(self.buffers) * u64::from(self.buffer_size)
    }

    /// The largest message the endpoint receives: 14 buffers.
    pub fn max_message(&self) -> u32 {
        (RX_BUFFERS_MAX as u64 * u64::from(self.buffer_size)).min(u64::from(u32::MAX)) as u32
    }
}

/// A transmit descriptor: where the message lies in the buffer area and
/// which channel it goes to. The engine sets `status` when it is done with
/// the descriptor (the paper's completion flag), before it advances the
/// queue's consumer index.
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxDesc {
    /// Message length in bytes.
    pub len: u32,
    /// Offset of the message in the buffer area (the message is contiguous).
    pub offset: u32,
    /// Channel tag, from [`crate::Endpoint::open_channel`].
    pub chan: u16,
    /// [`TxStatus`] as a `u16`: written by the engine.
    pub status: u16,
    /// Zero.
    pub reserved: u32,
}

/// What the engine did with a transmit descriptor.
#[repr(u16)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxStatus {
    /// Not yet taken by the engine.
    Pending = 0,
    /// Sent (or handed to the applet, which ran to completion).
    Sent = 1,
    /// Rejected: the descriptor was malformed (length, offset or channel).
    Rejected = 2,
    /// Dropped: the applet trapped, or the transport refused the frame.
    Dropped = 3,
    /// Not sent: the channel is closed, because its peer (an endpoint of
    /// the same engine) went away.
    Closed = 4,
}

impl TxStatus {
    /// The status a `u16` holds (anything unknown reads as `Pending`).
    pub fn from_u16(v: u16) -> TxStatus {
        match v {
            1 => TxStatus::Sent,
            2 => TxStatus::Rejected,
            3 => TxStatus::Dropped,
            4 => TxStatus::Closed,
            _ => TxStatus::Pending,
        }
    }
}

/// A receive descriptor: one cache line. `nbufs == 0` means the payload is
/// inline in `data` (at most [`INLINE_MAX`] bytes); otherwise `data` holds
/// `nbufs` little-endian `u32` buffer offsets and the message fills them in
/// order, each but the last completely.
///
/// The engine seals a slot last, after every other byte of it: `sealed`
/// set to [`crate::shm::RX_SEALED`] with release ordering. The application
/// takes the seal (sets it to 0) when it finds it, before it frees the
/// slot, so that the application learns of a message from the slot it
/// reads anyway, not from the producer index on a line of its own (one
/// cache line fewer crossing cores per message). The producer index is
/// still published, after the seals.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxDesc {
    /// Message length in bytes.
    pub len: u32,
    /// The channel tag it arrived on.
    pub chan: u16,
    /// Number of buffers; 0 for an inline message.
    pub nbufs: u8,
    /// The slot's seal ([`crate::shm::RX_SEALED`] once the engine has
    /// written it, 0 once the application has taken it); 0 in a descriptor
    /// built by hand. Not part of the message.
    pub sealed: u8,
    /// The inline payload, or the buffer offsets.
    pub data: [u8; INLINE_MAX],
}

impl Default for RxDesc {
    fn default() -> Self {
        RxDesc {
            len: 0,
            chan: 0,
            nbufs: 0,
            sealed: 0,
            data: [0; INLINE_MAX],
        }
    }
}

impl RxDesc {
    /// A descriptor carrying `payload` inline (`payload.len() <= 56`).
    pub fn inline(chan: u16, payload: &[u8]) -> RxDesc {
        let mut d = RxDesc {
            len: payload.len() as u32,
            chan,
            ..RxDesc::default()
        };
        d.data[..payload.len()].copy_from_slice(payload);
        d
    }

    /// A descriptor naming `offsets` (at most 14) for a `len`-byte message.
    pub fn buffers(chan: u16, len: u32, offsets: &[u32]) -> RxDesc {
        let mut d = RxDesc {
            len,
            chan,
            nbufs: offsets.len() as u8,
            ..RxDesc::default()
        };
        for (w, o) in d.data.chunks_exact_mut(4).zip(offsets) {
            w.copy_from_slice(&o.to_le_bytes());
        }
        d
    }

    /// The `i`-th buffer offset.
    #[inline]
    pub fn offset(&self, i: usize) -> u32 {
        let w = &self.data[4 * i..4 * i + 4];
        u32::from_le_bytes([w[0], w[1], w[2], w[3]])
    }
}

const _: () = assert!(size_of::<TxDesc>() == 16);
const _: () = assert!(size_of::<RxDesc>() == 64);

/// Where one queue of `T` items lies in the segment. The item type is the
/// queue's kind, as it is [`crate::shm::ShmQueue`]'s: a [`Layout`] gives
/// its transmit queue as a `QueueLayout<TxDesc>`, its receive queue as a
/// `QueueLayout<RxDesc>` and its free queue as a `QueueLayout<u32>`, and
/// [`crate::shm::ShmQueue::<T>::new`] takes only a `QueueLayout<T>`, so a
/// queue of 64-byte receive slots cannot be made over a queue laid out for
/// 4-byte ones (see the example there).
pub struct QueueLayout<T> {
    /// Offset of the producer index (a cache line; the consumer index is
    /// the next line, the slots follow).
    pub offset: usize,
    /// Number of slots (a power of two).
    pub depth: u32,
    _kind: PhantomData<fn() -> T>,
}

impl<T> QueueLayout<T> {
    /// The queue of `depth` slots of `T` whose producer index is at
    /// `offset`, for a queue laid out by hand (a test's); a [`Layout`]
    /// gives an endpoint's. Nothing is checked here:
    /// [`crate::shm::ShmQueue::new`] checks it against its segment.
    pub const fn new(offset: usize, depth: u32) -> QueueLayout<T> {
        QueueLayout {
            offset,
            depth,
            _kind: PhantomData,
        }
    }
    /// Offset of the producer index.
    pub fn head(&self) -> usize {
        self.offset
    }
    /// Offset of the consumer index.
    pub fn tail(&self) -> usize {
        self.offset + 64
    }
    /// Offset of slot 0.
    pub fn slots(&self) -> usize {
        self.offset + 128
    }
}

// By hand, not derived: a derive would ask the same of `T`, which is only
// the queue's kind (a `QueueLayout<RxDesc>` is `Copy` though `RxDesc` were
// not).
impl<T> Clone for QueueLayout<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for QueueLayout<T> {}
impl<T> PartialEq for QueueLayout<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.offset, self.depth) == (other.offset, other.depth)
    }
}
impl<T> Eq for QueueLayout<T> {}
impl<T> fmt::Debug for QueueLayout<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueLayout")
            .field("offset", &self.offset)
            .field("depth", &self.depth)
            .finish()
    }
}

/// Where everything lies in an endpoint's segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The sizes it was computed from.
    pub config: Config,
    /// The transmit queue of [`TxDesc`].
    pub tx: QueueLayout<TxDesc>,
    /// The receive queue of [`RxDesc`].
    pub rx: QueueLayout<RxDesc>,
    /// The free queue of `u32` buffer offsets.
    pub free: QueueLayout<u32>,
    /// Offset of the buffer area (page aligned).
    pub area: usize,
    /// Length of the buffer area.
    pub area_len: usize,
    /// Length of the whole segment.
    pub total: usize,
}

/// The header page's fields, in order, as the engine writes them (all
/// little-endian `u64`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`VERSION`].
    pub version: u64,
    /// The endpoint's id on its engine (`crate::frame::EndpointId`: slot
    /// and generation).
    pub endpoint: u64,
    /// Config: buffers, buffer_size, tx_depth, rx_depth, free_depth.
    pub config: [u64; 5],
    /// Offsets of the transmit, receive and free queues and the buffer area.
    pub offsets: [u64; 4],
    /// Length of the segment.
    pub total: u64,
}

const PAGE: usize = 4096;

/// Offset in the header page of the number of the endpoint's channels the
/// engine has closed (a `u32` the engine increments, with release order,
/// each time it closes one because the channel's peer went away). The
/// application compares it with the value it saw last and, when it moved,
/// asks the engine which channels are closed.
pub const CLOSED_CHANNELS_AT: usize = 2048;

fn round_up(v: usize, to: usize) -> usize {
    v.div_ceil(to) * to
}

impl Layout {
    /// The layout for a validated `config`.
    pub fn new(config: Config) -> Result<Layout, ConfigError> {
        config.validate()?;
        // A queue of `T` at `at` and where the next may start: its slots
        // are `T`'s size, the one the queue's type gives them.
        fn queue<T>(at: usize, depth: u32) -> (QueueLayout<T>, usize) {
            let end = at + 128 + depth as usize * size_of::<T>();
            (QueueLayout::new(at, depth), round_up(end, 64))
        }
        let (tx, at) = queue::<TxDesc>(PAGE, config.tx_depth);
        let (rx, at) = queue::<RxDesc>(at, config.rx_depth);
        let (free, at) = queue::<u32>(at, config.free_depth);
        let area = round_up(at, PAGE);
        let area_len = config.area_len() as usize;
        Ok(Layout {
            config,
            tx,
            rx,
            free,
            area,
            area_len,
            total: area + area_len,
        })
    }

    /// The header the engine writes for endpoint `id`.
    pub fn header(&self, id: u32) -> Header {
        let c = &self.config;
        Header {
            magic: MAGIC,
            version: u64::from(VERSION),
            endpoint: u64::from(id),
            config: [
                c.buffers,
                c.buffer_size,
                c.tx_depth,
                c.rx_depth,
                c.free_depth,
            ]
            .map(u64::from),
            offsets: [self.tx.offset, self.rx.offset, self.free.offset, self.area]
                .map(|o| o as u64),
            total: self.total as u64,
        }
    }

    /// Reads a layout back from a header (the application side of a
    /// daemon-run endpoint), checking that it is the one its config gives
    /// and fits in `segment_len` bytes.
    pub fn from_header(h: &Header, segment_len: usize) -> Result<(u32, Layout), ConfigError> {
        if h.magic != MAGIC || h.version != u64::from(VERSION) {
            return Err(ConfigError::Header("bad magic or version".into()));
        }
        let field =
            |v: u64| u32::try_from(v).map_err(|_| ConfigError::Header("field out of range".into()));
        let config = Config {
            buffers: field(h.config[0])?,
            buffer_size: field(h.config[1])?,
            tx_depth: field(h.config[2])?,
            rx_depth: field(h.config[3])?,
            free_depth: field(h.config[4])?,
        };
        let layout = Layout::new(config)?;
        let id =
            u32::try_from(h.endpoint).map_err(|_| ConfigError::Header("endpoint id".into()))?;
        if layout.header(id) != *h || layout.total > segment_len {
            return Err(ConfigError::Header(
                "the offsets do not match the configuration, or the segment is too short".into(),
            ));
        }
        Ok((id, layout))
    }

    /// Whether `off` is the start of a buffer.
    ///
    /// One comparison: `off` rotated right by the buffer size's bits is
    /// the buffer's index if `off` is a buffer's start, and otherwise has
    /// one of its low bits at the top, at least `2^(32 - shift)`, more than
    /// any count of buffers (the area is at most [`MAX_AREA`], `2^30`
    /// bytes, so `buffers <= 2^(30 - shift)`). Two of them on a message in
    /// a buffer (the engine's take, the receiver's check): 8 instructions
    /// a message fewer than a bound and a mask tested apart (`unet-count`
    /// path-57).
    #[inline]
    pub fn is_buffer(&self, off: u32) -> bool {
        off.rotate_right(self.config.buffer_size.trailing_zeros()) < self.config.buffers
    }

    /// Whether `[off, off + len)` lies inside the buffer area.
    #[inline]
    pub fn in_area(&self, off: u32, len: u32) -> bool {
        u64::from(off) + u64::from(len) <= self.area_len as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layout_is_aligned_and_disjoint() {
        let l = Layout::new(Config::default()).unwrap();
        assert_eq!(l.tx.offset, 4096);
        assert!(l.tx.slots() + 256 * 16 <= l.rx.offset);
        assert!(l.rx.slots() + 256 * 64 <= l.free.offset);
        assert!(l.free.slots() + 512 * 4 <= l.area);
        assert_eq!(l.area % 4096, 0);
        assert_eq!(l.rx.slots() % 64, 0, "receive descriptors are whole lines");
        assert_eq!(l.total, l.area + 512 * 4096);
    }

    /// `is_buffer`'s one comparison (the offset rotated by the buffer
    /// size's bits, against the count of buffers) says what a bound and a
    /// mask say: below the area's end and a multiple of the buffer size.
    /// At both ends of the sizes, at the largest area (1 GiB), with a count of
    /// buffers that is not a power of two, on the edges and on offsets
    /// spread over all 32 bits.
    #[test]
    fn is_buffer_is_below_the_area_and_on_a_buffer_start() {
        let configs = [
            (512, 4096),
            (3, 64),
            (1 << 16, 64),
            (1 << 16, 16384),
            (1 << 14, 65536),
            ((1 << 14) - 1, 65536),
            (1, 65536),
            (5000, 1024),
        ];
        for (buffers, buffer_size) in configs {
            let l = Layout::new(Config {
                buffers,
                buffer_size,
                free_depth: buffers.next_power_of_two().max(2),
                ..Config::default()
            })
            .unwrap();
            let area = l.area_len as u64;
            let bs = u64::from(buffer_size);
            let mut offs = vec![0, 1, u32::MAX, 1 << 31, 1 << 30, (1 << 30) - 1];
            for at in [bs, bs / 2, area - bs, area, area + bs] {
                for d in [-1i64, 0, 1] {
                    offs.push((at as i64 + d).clamp(0, i64::from(u32::MAX)) as u32);
                }
            }
            let mut x = 0x9e37_79b9u32;
            for _ in 0..10_000 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                offs.push(x);
                offs.push(x & !(buffer_size - 1));
                offs.push((x & !(buffer_size - 1)) % (area as u32 + buffer_size));
            }
            for off in offs {
                let want = u64::from(off) < area && u64::from(off) % bs == 0;
                assert_eq!(
                    l.is_buffer(off),
                    want,
                    "{buffers} x {buffer_size}, offset {off}"
                );
            }
        }
    }

    #[test]
    fn every_bad_size_is_named() {
        let bad = [
            (
                Config {
                    buffer_size: 100,
                    ..Config::default()
                },
                "buffer_size",
            ),
            (
                Config {
                    buffer_size: 32,
                    ..Config::default()
                },
                "buffer_size",
            ),
            (
                Config {
                    tx_depth: 3,
                    ..Config::default()
                },
                "tx_depth",
            ),
            (
                Config {
                    rx_depth: 1 << 17,
                    ..Config::default()
                },
                "rx_depth",
            ),
            (
                Config {
                    buffers: 0,
                    ..Config::default()
                },
                "buffers",
            ),
            (
                Config {
                    buffers: 1 << 16,
                    buffer_size: 1 << 16,
                    free_depth: 1 << 16,
                    ..Config::default()
                },
                "buffers",
            ),
            (
                Config {
                    buffers: 1024,
                    ..Config::default()
                },
                "free_depth",
            ),
        ];
        for (c, what) in bad {
            match c.validate() {
                Err(ConfigError::Size { what: w, .. }) => assert_eq!(w, what, "{c:?}"),
                other => panic!("{c:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn header_round_trips_and_rejects_tampering() {
        let l = Layout::new(Config::default()).unwrap();
        let h = l.header(7);
        assert_eq!(Layout::from_header(&h, l.total).unwrap(), (7, l));
        let mut t = h;
        t.offsets[3] += 64;
        assert!(Layout::from_header(&t, l.total).is_err());
        assert!(Layout::from_header(&h, l.total - 1).is_err());
    }

    #[test]
    fn rx_descriptor_offsets() {
        let d = RxDesc::buffers(3, 9000, &[0, 4096, 8192]);
        assert_eq!(
            (d.nbufs, d.offset(0), d.offset(1), d.offset(2)),
            (3, 0, 4096, 8192)
        );
        let i = RxDesc::inline(2, b"hello");
        assert_eq!((i.nbufs, i.len, &i.data[..5]), (0, 5, &b"hello"[..]));
    }
}
