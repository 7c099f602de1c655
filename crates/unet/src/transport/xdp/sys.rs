//! The `unsafe` half of the `xdp` transport: an `AF_XDP` socket, its UMEM
//! (the frame memory shared with the kernel), the four rings mapped from
//! the socket, the interface queries (index, MAC, MTU, queue count), and
//! the wait for an XDP program's last runs (`membarrier`).
//! Everything here follows the kernel's `Documentation/networking/af_xdp.rst`
//! and `include/uapi/linux/if_xdp.h` (whose structs and constants `libc`
//! 0.2.191 carries: `sockaddr_xdp`, `xdp_umem_reg`, `xdp_mmap_offsets`,
//! `xdp_desc`, `xdp_statistics`).
//!
//! What the rest of the transport gets is safe: a [`Socket`] owns the
//! descriptor, the UMEM mapping and the ring mappings, unmaps them on drop
//! (rings first, then the UMEM, then the socket closes), and hands out
//! * the rings as [`Ring`]s, whose producer and consumer indices are read
//!   and written atomically with the orderings the kernel's side expects
//!   (an acquire load of the other side's index before the slots it
//!   covers are read; a release store of ours after the slots it covers
//!   are written), and whose slot accessors index modulo the ring's size,
//!   so no index the kernel writes can reach outside the mapping;
//! * UMEM frames as byte slices, only after checking that the address and
//!   length lie inside the UMEM ([`Umem::frame`]); the kernel writes a
//!   frame only while it owns it (between the fill ring and the receive
//!   ring, or the transmit ring and the completion ring), and the
//!   transport touches a frame only while it owns it.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// How long a bind waits for a queue that a closed socket still holds.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// One `mmap`ed region, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping is plain memory owned by one `Socket`; moving it to
// another thread moves that ownership (the `Socket` is used through
// `&mut` or by one thread at a time under the engine's transport lock).
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` at page offset `offset`, or anonymous
    /// memory when `fd` is `None`.
    fn new(len: usize, fd: Option<RawFd>, offset: libc::off_t) -> io::Result<Mapping> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            ),
        };
        // SAFETY: a fresh mapping at an address the kernel chooses, of a
        // descriptor we hold open for the call (or anonymous); nothing of
        // ours is overwritten. The result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mapping { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what `mmap` returned, unmapped
        // once; no reference into the mapping outlives its owner (slices
        // of frames live only during one `recv` or `send` call).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A ring's mapping, shared between its [`Ring`] and the [`RingWords`]
/// that a readiness test reads from other threads.
struct RingMap(Mapping);

// SAFETY: through a shared `RingMap` only the ring's index and flags words
// are reached, and only atomically (`Ring::word`, `RingWords::word`); its
// slots are read and written through the `Ring` alone (`read` and `write`,
// the latter under `&mut Ring`), which one thread at a time uses. The
// mapping itself stays valid while any `Arc` of it lives (and keeps the
// socket's file open: a mapping holds its file).
unsafe impl Sync for RingMap {}

/// The UMEM: `frames` frames of `frame_size` bytes, page aligned, which the
/// kernel reads and writes frames of as the rings say.
pub(super) struct Umem {
    map: Mapping,
    frame_size: usize,
}

impl Umem {
    /// Frame memory for `frames` frames of `frame_size` bytes.
    fn new(frames: usize, frame_size: usize) -> io::Result<Umem> {
        let len = frames
            .checked_mul(frame_size)
            .ok_or_else(|| io::Error::other("UMEM size overflows"))?;
        Ok(Umem {
            map: Mapping::new(len, None, 0)?,
            frame_size,
        })
    }

    /// Bytes per frame.
    pub(super) fn frame_size(&self) -> usize {
        self.frame_size
    }

    /// Bytes of the UMEM.
    pub(super) fn len(&self) -> usize {
        self.map.len
    }

    /// The `len` bytes at UMEM address `addr`, if they lie inside one frame
    /// (a descriptor the kernel wrote is checked here before it is
    /// followed).
    pub(super) fn frame(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let (at, end) = self.extent(addr, len)?;
        // SAFETY: [at, end) is inside the mapping (checked by `extent`);
        // the frame is ours (taken from the receive ring, not yet given
        // back to the fill ring) so the kernel does not write it while the
        // slice, tied to `&self`, lives.
        Some(unsafe { std::slice::from_raw_parts(self.map.ptr.as_ptr().add(at), end - at) })
    }

    /// The `len` bytes at UMEM address `addr` for writing, if inside one
    /// frame.
    pub(super) fn frame_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let (at, end) = self.extent(addr, len)?;
        // SAFETY: inside the mapping, as in `frame`; the frame is ours (a
        // transmit frame not on the transmit ring), and `&mut self`
        // excludes every other slice of the UMEM.
        Some(unsafe { std::slice::from_raw_parts_mut(self.map.ptr.as_ptr().add(at), end - at) })
    }

    fn extent(&self, addr: u64, len: usize) -> Option<(usize, usize)> {
        let at = usize::try_from(addr).ok()?;
        let end = at.checked_add(len)?;
        let frame_end = (at / self.frame_size + 1) * self.frame_size;
        (at < self.map.len && end <= frame_end && end <= self.map.len).then_some((at, end))
    }
}

/// One of the four rings: `size` slots of `T` and the producer, consumer
/// and flags words, in a mapping of the socket. The transport is the
/// producer of the fill and transmit rings and the consumer of the
/// receive and completion rings.
pub(super) struct Ring<T: Copy> {
    map: Arc<RingMap>,
    producer: usize,
    consumer: usize,
    flags: usize,
    descs: usize,
    mask: u32,
    _slot: std::marker::PhantomData<T>,
}

impl<T: Copy> Ring<T> {
    fn word(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` is one of the offsets the kernel gave for this ring
        // (checked against the mapping's length in `map_ring`), 4-byte
        // aligned in a page-aligned mapping; the kernel accesses these
        // words concurrently, so they are only accessed atomically.
        unsafe { AtomicU32::from_ptr(self.map.0.ptr.as_ptr().add(at).cast()) }
    }

    /// The ring's index and flags words, for a test on another thread
    /// that reads them without the ring ([`RingWords`]).
    pub(super) fn words(&self) -> RingWords {
        RingWords {
            producer: NonNull::from(self.word(self.producer)),
            consumer: NonNull::from(self.word(self.consumer)),
            flags: NonNull::from(self.word(self.flags)),
            _map: self.map.clone(),
        }
    }

    /// The kernel's producer index (acquire: the slots it covers are
    /// written).
    pub(super) fn producer(&self) -> u32 {
        self.word(self.producer).load(Ordering::Acquire)
    }

    /// The kernel's consumer index (acquire: the slots before it are read
    /// and free).
    pub(super) fn consumer(&self) -> u32 {
        self.word(self.consumer).load(Ordering::Acquire)
    }

    /// Publishes our producer index (release: the slots before it are
    /// written).
    pub(super) fn set_producer(&self, v: u32) {
        self.word(self.producer).store(v, Ordering::Release);
    }

    /// Publishes our consumer index (release: we are done with the slots
    /// before it).
    pub(super) fn set_consumer(&self, v: u32) {
        self.word(self.consumer).store(v, Ordering::Release);
    }

    /// Whether the kernel asks to be woken (`XDP_RING_NEED_WAKEUP`).
    pub(super) fn needs_wakeup(&self) -> bool {
        self.word(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Reads slot `i` (taken modulo the size).
    pub(super) fn read(&self, i: u32) -> T {
        let at = self.descs + (i & self.mask) as usize * size_of::<T>();
        // SAFETY: slot `i & mask` lies inside the mapping (`map_ring`
        // checked `descs + size * size_of::<T>() <= len`), aligned for `T`
        // (the kernel aligns the descriptor array); volatile, since the
        // kernel wrote it. `T` is plain data (u64 or `xdp_desc`), valid for
        // any bytes.
        unsafe { self.map.0.ptr.as_ptr().add(at).cast::<T>().read_volatile() }
    }

    /// Writes slot `i` (taken modulo the size).
    pub(super) fn write(&mut self, i: u32, v: T) {
        let at = self.descs + (i & self.mask) as usize * size_of::<T>();
        // SAFETY: inside the mapping and aligned, as in `read`; the slot is
        // ours (between the kernel's consumer index and ours plus the
        // size), and the kernel reads it only after our release store of
        // the producer index.
        unsafe {
            self.map
                .0
                .ptr
                .as_ptr()
                .add(at)
                .cast::<T>()
                .write_volatile(v)
        }
    }
}

/// A ring's producer, consumer and flags words, read from any thread
/// without the [`Ring`] (a lock-free readiness test): loads only, each
/// with the ordering of the `Ring`'s own. The words' addresses are taken
/// once, so a read is one load.
pub(super) struct RingWords {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    /// Keeps the words mapped.
    _map: Arc<RingMap>,
}

// SAFETY: the pointers are to atomic words of the mapping that `_map`
// keeps alive, and are only loaded from (atomically), from any thread.
unsafe impl Send for RingWords {}
// SAFETY: as for `Send`: shared use is atomic loads only.
unsafe impl Sync for RingWords {}

impl RingWords {
    fn word(&self, at: NonNull<AtomicU32>) -> &AtomicU32 {
        // SAFETY: `at` is one of this ring's words (`Ring::word`: the
        // kernel's offset, checked against the mapping in `map_ring`),
        // which lives while `self` holds `_map`.
        unsafe { at.as_ref() }
    }

    /// The producer index.
    pub(super) fn producer(&self) -> u32 {
        self.word(self.producer).load(Ordering::Acquire)
    }

    /// The consumer index.
    pub(super) fn consumer(&self) -> u32 {
        self.word(self.consumer).load(Ordering::Acquire)
    }

    /// Whether the kernel asks to be woken (`XDP_RING_NEED_WAKEUP`).
    pub(super) fn needs_wakeup(&self) -> bool {
        self.word(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// Ring and UMEM sizes of one socket.
#[derive(Copy, Clone, Debug)]
pub(super) struct Geometry {
    /// Bytes per UMEM frame (a power of two, 2048 or 4096).
    pub frame_size: usize,
    /// UMEM frames for reception (all on the fill ring when idle).
    pub rx_frames: u32,
    /// UMEM frames for transmission.
    pub tx_frames: u32,
    /// Slots of the fill and receive rings (at least `rx_frames`).
    pub rx_ring: u32,
    /// Slots of the transmit and completion rings (at least `tx_frames`).
    pub tx_ring: u32,
    /// Bind with `XDP_USE_SG`: a frame larger than a UMEM frame comes and
    /// goes as a chain of descriptors, all but the last marked
    /// `XDP_PKT_CONTD` (Linux 6.6 in copy mode).
    pub multi_buffer: bool,
}

/// How a socket was bound.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Copying {
    /// The driver writes frames straight into the UMEM (`XDP_ZEROCOPY`).
    Zero,
    /// The kernel copies each frame between its buffer and the UMEM
    /// (`XDP_COPY`: veth, and drivers without AF_XDP zero-copy support).
    Copy,
}

/// What failed while opening a socket: the step and the OS error.
#[derive(Debug)]
pub(super) struct OpenError {
    pub step: &'static str,
    pub source: io::Error,
}

fn step(step: &'static str) -> impl FnOnce(io::Error) -> OpenError {
    move |source| OpenError { step, source }
}

/// An `AF_XDP` socket bound to one queue of one interface, with its own
/// UMEM and rings.
pub(super) struct Socket {
    // Field order is drop order: rings are unmapped before the UMEM, and
    // both before the socket closes. A ring's `RingWords` still held
    // elsewhere (the transport's readiness test) keeps that ring mapped,
    // and so the socket's file open, until it is dropped too: the kernel
    // releases the socket, and unpins the UMEM's pages, at the last
    // mapping's unmap, so nothing it writes meanwhile reaches memory that
    // is no longer the socket's.
    pub rx: Ring<libc::xdp_desc>,
    pub tx: Ring<libc::xdp_desc>,
    pub fill: Ring<u64>,
    pub comp: Ring<u64>,
    pub umem: Umem,
    fd: OwnedFd,
    pub copying: Copying,
}

fn setsockopt<T>(fd: RawFd, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live `T` whose size is passed; the kernel reads
    // at most that many bytes.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Creates an `AF_XDP` socket (`socket(AF_XDP, SOCK_RAW, 0)`), the step
/// that fails first when the kernel has no AF_XDP or the caller no
/// privilege.
pub(super) fn xdp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call; the result is checked.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn map_ring<T: Copy>(
    fd: RawFd,
    off: &libc::xdp_ring_offset,
    size: u32,
    pgoff: u64,
) -> io::Result<Ring<T>> {
    let len = off.desc as usize + size as usize * size_of::<T>();
    let map = Mapping::new(len, Some(fd), pgoff as libc::off_t)?;
    let words = [off.producer, off.consumer, off.flags];
    if words.iter().any(|&w| w % 4 != 0 || w as usize + 4 > len)
        || !(off.desc as usize).is_multiple_of(std::mem::align_of::<T>())
    {
        return Err(io::Error::other(
            "the kernel's ring offsets lie outside the ring",
        ));
    }
    Ok(Ring {
        map: Arc::new(RingMap(map)),
        producer: off.producer as usize,
        consumer: off.consumer as usize,
        flags: off.flags as usize,
        descs: off.desc as usize,
        mask: size - 1,
        _slot: std::marker::PhantomData,
    })
}

impl Socket {
    /// Opens a socket on queue `queue` of interface `ifindex`: the UMEM is
    /// allocated and registered, the rings are sized and mapped, and the
    /// socket is bound with `XDP_USE_NEED_WAKEUP`, in zero-copy mode if
    /// the driver has it, else in copy mode. The fill ring is left empty
    /// (the caller fills it). `fd` is from [`xdp_socket`].
    pub(super) fn open(
        fd: OwnedFd,
        ifindex: u32,
        queue: u32,
        g: Geometry,
    ) -> Result<Socket, OpenError> {
        let raw = fd.as_raw_fd();
        let frames = (g.rx_frames + g.tx_frames) as usize;
        let umem = Umem::new(frames, g.frame_size).map_err(step("allocate the UMEM"))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.map.ptr.as_ptr() as u64,
            len: umem.len() as u64,
            chunk_size: g.frame_size as u32,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(raw, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
            .map_err(step("register the UMEM (XDP_UMEM_REG)"))?;
        for (opt, size, what) in [
            (libc::XDP_UMEM_FILL_RING, g.rx_ring, "size the fill ring"),
            (
                libc::XDP_UMEM_COMPLETION_RING,
                g.tx_ring,
                "size the completion ring",
            ),
            (libc::XDP_RX_RING, g.rx_ring, "size the receive ring"),
            (libc::XDP_TX_RING, g.tx_ring, "size the transmit ring"),
        ] {
            setsockopt(raw, libc::SOL_XDP, opt, &size).map_err(step(what))?;
        }
        // SAFETY: all-zero is a valid `xdp_mmap_offsets` (plain integers).
        let mut off: libc::xdp_mmap_offsets = unsafe { zeroed() };
        let mut len = size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: `off` has room for `len` bytes, which the kernel writes
        // and updates `len` to what it wrote.
        let r = unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                (&raw mut off).cast(),
                &mut len,
            )
        };
        if r != 0 || len as usize != size_of::<libc::xdp_mmap_offsets>() {
            return Err(OpenError {
                step: "read the ring offsets (XDP_MMAP_OFFSETS; a kernel before 5.4 lacks the flags word)",
                source: if r != 0 {
                    io::Error::last_os_error()
                } else {
                    io::Error::other(format!("{len} bytes"))
                },
            });
        }
        let fill = map_ring(raw, &off.fr, g.rx_ring, libc::XDP_UMEM_PGOFF_FILL_RING)
            .map_err(step("map the fill ring"))?;
        let comp = map_ring(
            raw,
            &off.cr,
            g.tx_ring,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        )
        .map_err(step("map the completion ring"))?;
        let rx = map_ring(raw, &off.rx, g.rx_ring, libc::XDP_PGOFF_RX_RING as u64)
            .map_err(step("map the receive ring"))?;
        let tx = map_ring(raw, &off.tx, g.tx_ring, libc::XDP_PGOFF_TX_RING as u64)
            .map_err(step("map the transmit ring"))?;
        let mut copying = Copying::Zero;
        // A socket that was bound to the queue and has just closed holds
        // it until the kernel's deferred release runs (an RCU grace
        // period): `EBUSY` for a moment. Wait that long, not longer.
        let busy_until = std::time::Instant::now() + BUSY_WAIT;
        let mut modes = [
            (Copying::Zero, libc::XDP_ZEROCOPY),
            (Copying::Copy, libc::XDP_COPY),
        ]
        .into_iter()
        .peekable();
        while let Some(&(mode, flag)) = modes.peek() {
            let sxdp = libc::sockaddr_xdp {
                sxdp_family: libc::AF_XDP as u16,
                sxdp_flags: libc::XDP_USE_NEED_WAKEUP
                    | flag
                    | if g.multi_buffer { libc::XDP_USE_SG } else { 0 },
                sxdp_ifindex: ifindex,
                sxdp_queue_id: queue,
                sxdp_shared_umem_fd: 0,
            };
            // SAFETY: `sxdp` is a valid `sockaddr_xdp` whose size is passed.
            let r = unsafe {
                libc::bind(
                    raw,
                    (&raw const sxdp).cast(),
                    size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if r == 0 {
                copying = mode;
                break;
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EBUSY) && std::time::Instant::now() < busy_until {
                std::thread::sleep(std::time::Duration::from_millis(2));
                continue;
            }
            // Zero-copy refused (no driver support): try copy mode.
            let unsupported = matches!(
                e.raw_os_error(),
                Some(libc::EOPNOTSUPP) | Some(libc::EPROTONOSUPPORT)
            );
            if mode == Copying::Copy || !unsupported {
                return Err(OpenError {
                    step: if e.raw_os_error() == Some(libc::EBUSY) {
                        "bind the socket to the interface's queue (another AF_XDP socket holds it)"
                    } else if g.multi_buffer {
                        "bind the socket to the interface's queue with multi-buffer frames \
                         (XDP_USE_SG, which needs Linux 6.6)"
                    } else {
                        "bind the socket to the interface's queue"
                    },
                    source: e,
                });
            }
            modes.next();
        }
        Ok(Socket {
            rx,
            tx,
            fill,
            comp,
            umem,
            fd,
            copying,
        })
    }

    /// Kicks the transmit ring (`sendto` with `MSG_DONTWAIT`): the kernel
    /// sends what the ring holds (in copy mode at most 32 frames per call,
    /// then `EAGAIN`).
    pub(super) fn kick_tx(&self) -> io::Result<()> {
        // SAFETY: a send with no data and no address; nothing of ours is
        // read or written.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r >= 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Wakes the receive side (`recvfrom` with `MSG_DONTWAIT`), when the
    /// fill ring's need-wakeup flag asks for it.
    pub(super) fn wake_rx(&self) {
        // SAFETY: a receive with no buffer and no address; nothing of ours
        // is written.
        unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// The kernel's counters of this socket (`XDP_STATISTICS`), if it
    /// gives them.
    pub(super) fn statistics(&self) -> Option<libc::xdp_statistics> {
        // SAFETY: all-zero is a valid `xdp_statistics` (plain integers).
        let mut st: libc::xdp_statistics = unsafe { zeroed() };
        let mut len = size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `st` has room for `len` bytes, which the kernel writes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&raw mut st).cast(),
                &mut len,
            )
        };
        (r == 0).then_some(st)
    }
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An epoll instance watching several sockets for input, level-triggered:
/// its own descriptor polls readable while any of theirs does, so that a
/// poller of the transport wakes for a frame on any queue. A socket that
/// closes leaves it by itself.
pub(super) struct Epoll(OwnedFd);

impl Epoll {
    /// Watches `fds` for `EPOLLIN`.
    pub(super) fn new(fds: &[RawFd]) -> io::Result<Epoll> {
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let ep = Epoll(unsafe { OwnedFd::from_raw_fd(raw) });
        for (i, &fd) in fds.iter().enumerate() {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: i as u64,
            };
            // SAFETY: `ev` is a valid event the kernel reads; both
            // descriptors are open.
            if unsafe { libc::epoll_ctl(raw, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(ep)
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// What the transport needs to know of an interface.
#[derive(Clone, Debug)]
pub(super) struct Link {
    pub index: u32,
    pub mac: [u8; 6],
    pub hw_type: u16,
    pub mtu: usize,
    /// Receive queues (`ETHTOOL_GCHANNELS`: combined plus receive-only
    /// channels), or 1 when the driver does not say.
    pub queues: u32,
    /// The driver's name (`ETHTOOL_GDRVINFO`, e.g. `veth`), or empty when
    /// the driver does not say.
    pub driver: String,
}

/// `struct ethtool_drvinfo` of `linux/ethtool.h`.
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// `ETHTOOL_GDRVINFO`.
const ETHTOOL_GDRVINFO: u32 = 0x3;

impl EthtoolDrvinfo {
    fn new() -> Self {
        EthtoolDrvinfo {
            cmd: ETHTOOL_GDRVINFO,
            driver: [0; 32],
            version: [0; 32],
            fw_version: [0; 32],
            bus_info: [0; 32],
            erom_version: [0; 32],
            reserved2: [0; 12],
            n_priv_flags: 0,
            n_stats: 0,
            testinfo_len: 0,
            eedump_len: 0,
            regdump_len: 0,
        }
    }

    /// The driver's name: the bytes before the first NUL.
    fn driver(&self) -> String {
        let end = self.driver.iter().position(|&b| b == 0).unwrap_or(32);
        String::from_utf8_lossy(&self.driver[..end]).into_owned()
    }
}

/// `struct ethtool_channels` of `linux/ethtool.h`.
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// `ETHTOOL_GCHANNELS`.
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// Reads interface `ifname`'s index, MAC, MTU, queue count and driver with
/// `ioctl`s on a throwaway socket of the calling thread's namespace. The
/// name must be 1 to 15 bytes without NUL (checked by the caller).
pub(super) fn link(ifname: &str) -> Result<Link, OpenError> {
    // SAFETY: plain system call; the result is checked.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(step("create a socket to query the interface")(
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let req = || {
        // SAFETY: all-zero is a valid `ifreq` (a name and a union of plain
        // data).
        let mut req: libc::ifreq = unsafe { zeroed() };
        for (d, s) in req.ifr_name.iter_mut().zip(ifname.as_bytes()) {
            *d = *s as libc::c_char;
        }
        req
    };
    let ioctl = |code: libc::c_ulong, r: &mut libc::ifreq| -> io::Result<()> {
        // SAFETY: the interface ioctls used here read the name and write
        // one member of the union (or, for SIOCETHTOOL, the buffer its
        // `ifru_data` points to, which the caller keeps alive), all inside
        // memory we own.
        if unsafe { libc::ioctl(sock.as_raw_fd(), code as _, r as *mut libc::ifreq) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    let mut r = req();
    ioctl(libc::SIOCGIFINDEX, &mut r).map_err(step("find the interface (SIOCGIFINDEX)"))?;
    // SAFETY: SIOCGIFINDEX wrote the `ifru_ifindex` member.
    let index = unsafe { r.ifr_ifru.ifru_ifindex } as u32;
    let mut r = req();
    ioctl(libc::SIOCGIFHWADDR, &mut r).map_err(step("read the MAC (SIOCGIFHWADDR)"))?;
    // SAFETY: SIOCGIFHWADDR wrote the `ifru_hwaddr` member.
    let hw = unsafe { r.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (m, b) in mac.iter_mut().zip(hw.sa_data) {
        *m = b as u8;
    }
    let mut r = req();
    ioctl(libc::SIOCGIFMTU, &mut r).map_err(step("read the MTU (SIOCGIFMTU)"))?;
    // SAFETY: SIOCGIFMTU wrote the `ifru_mtu` member.
    let mtu = usize::try_from(unsafe { r.ifr_ifru.ifru_mtu }).unwrap_or(0);
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    let mut r = req();
    r.ifr_ifru.ifru_data = (&raw mut ch).cast();
    let queues = match ioctl(libc::SIOCETHTOOL, &mut r) {
        Ok(()) => (ch.combined_count + ch.rx_count).max(1),
        Err(_) => 1,
    };
    let mut info = EthtoolDrvinfo::new();
    let mut r = req();
    r.ifr_ifru.ifru_data = (&raw mut info).cast();
    let driver = match ioctl(libc::SIOCETHTOOL, &mut r) {
        Ok(()) => info.driver(),
        Err(_) => String::new(),
    };
    Ok(Link {
        index,
        mac,
        hw_type: hw.sa_family,
        mtu,
        queues,
        driver,
    })
}

/// `MEMBARRIER_CMD_GLOBAL` (`linux/membarrier.h`).
const MEMBARRIER_CMD_GLOBAL: libc::c_int = 1;
/// How long to wait where the kernel will not wait for us: far longer
/// than one NAPI poll or one generic-XDP receive runs.
const PROGRAM_RUN_BOUND: std::time::Duration = std::time::Duration::from_millis(20);

/// Waits until every run of an XDP program that began before the call has
/// finished, and with it the redirects it made: XDP programs run inside
/// RCU read-side sections (softirq, and the redirect's flush at the end
/// of the same poll), and `membarrier(MEMBARRIER_CMD_GLOBAL)` waits for an
/// RCU grace period (`synchronize_rcu`). A kernel that refuses it
/// (`nohz_full`, or no `membarrier`) gets a sleep of 20 ms instead.
pub(super) fn wait_for_program_runs() {
    // SAFETY: membarrier(2) takes a command and two integer flags and
    // reads or writes no memory of this process.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) };
    if r != 0 {
        std::thread::sleep(PROGRAM_RUN_BOUND);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn umem_frames_are_checked_against_the_frame_and_the_umem() {
        let mut u = Umem::new(4, 2048).unwrap();
        assert_eq!(u.len(), 8192);
        assert_eq!(u.frame(0, 2048).map(<[u8]>::len), Some(2048));
        assert_eq!(u.frame(2048 + 100, 1948).map(<[u8]>::len), Some(1948));
        assert!(
            u.frame(2048 + 100, 1949).is_none(),
            "crosses into the next frame"
        );
        assert!(u.frame(3 * 2048, 2049).is_none(), "past the UMEM");
        assert!(u.frame(4 * 2048, 0).is_none(), "no frame 4");
        assert!(u.frame(u64::MAX, 1).is_none());
        u.frame_mut(2048, 4).unwrap().copy_from_slice(b"unet");
        assert_eq!(u.frame(2048, 4), Some(&b"unet"[..]));
    }

    #[test]
    fn ethtool_channels_has_the_kernels_layout() {
        assert_eq!(size_of::<EthtoolChannels>(), 36);
    }

    #[test]
    fn ethtool_drvinfo_has_the_kernels_layout_and_names_the_driver() {
        assert_eq!(size_of::<EthtoolDrvinfo>(), 196);
        let mut info = EthtoolDrvinfo::new();
        assert_eq!(info.driver(), "");
        info.driver[..4].copy_from_slice(b"veth");
        assert_eq!(info.driver(), "veth");
        info.driver = [b'x'; 32];
        assert_eq!(info.driver().len(), 32, "no NUL: all 32 bytes");
    }
}
