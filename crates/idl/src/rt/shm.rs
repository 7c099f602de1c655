//! The shared-memory channel: one sealed `memfd` that a client and a server
//! process both map, a synchronous call through one cache line (the
//! descriptor line), spinning briefly and then sleeping on a futex (docs/idl.md,
//! "The transport", is the protocol; the C run time implements the same).
//!
//! ```text
//! offset      what
//! 0           header (written once by the creator, copied once by each side)
//! 4096        state: u32   the futex word: 0 idle, 1 request, 2 reply, 3 closed;
//!                          bit 31: a waiter sleeps on the futex;
//!                          bit 30 with 2: closed after that reply
//! 4100        word: u16    request: the key; reply: the status
//! 4102        len: u16     bytes of the record
//! 4104        the record: `capacity` bytes (the first 56 in the descriptor line)
//! area_off    the string area: `area_len` bytes (page aligned)
//! ```
//!
//! The segment is shared with a peer that may be hostile, so nothing here
//! trusts its contents (as unet's endpoint segments, crates/unet/src/shm.rs):
//! - its size cannot change: the creator seals the `memfd` against
//!   shrinking and growing before anyone else sees it, and a side that maps
//!   a received `memfd` checks the seals and the file's size against the
//!   header, so an access inside the mapping never faults;
//! - each side copies the header into private memory once, checks the copy
//!   and uses only the copy; the peer rewriting the header changes nothing;
//! - the state, key, status and length words are atomics, read once per
//!   message into locals; every other byte is plain data that the stubs
//!   read once and check ([`crate::rt::Request`]) or copy;
//! - a peer that stops answering leaves the other waiting: the client may
//!   set a timeout ([`ClientEnd::set_timeout`]); the server waits for
//!   requests as long as the channel is open, as any server does.
//!
//! ```
//! use idl::rt::shm;
//! let (mut client, mut server) = shm::pair(&shm::Config::default())?;
//! // A raw server (no stubs): adds the key to the first byte.
//! let t = std::thread::spawn(move || {
//!     server.serve_raw(|key, buf, len| {
//!         buf[0] += key as u8;
//!         len
//!     })
//! });
//! assert_eq!(client.call_raw(2, &[40, 7])?, &[42, 7]);
//! drop(client); // closes the channel: the server loop ends
//! t.join().expect("server thread")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cell::Cell;
use std::ffi::CString;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use unet::shm::Segment;

use super::wait::{Budget, PROBE_STRETCH, PROBE_TIME, WaitRule};
use super::{CallError, ClientTransport, ServerTransport, Status};
use crate::model::Limits;

/// The header's magic bytes.
pub const MAGIC: [u8; 8] = *b"fpidl\0\0\x01";
/// The protocol version.
pub const VERSION: u32 = 1;
/// Offset of the descriptor line (the state word).
pub const LINE: usize = 4096;
/// Offset of the message buffer (the record).
pub const MSG: usize = LINE + 8;

/// `state`: nothing posted yet.
pub const IDLE: u32 = 0;
/// `state`: the client posted a request.
pub const REQUEST: u32 = 1;
/// `state`: the server posted a reply.
pub const REPLY: u32 = 2;
/// `state`: a side closed the channel.
pub const CLOSED: u32 = 3;
/// `state` bit: a side closed the channel after the server posted a reply
/// the client may not have taken yet (`REPLY | REPLY_CLOSED`): the client
/// still takes that reply; every later post or wait finds the channel
/// closed.
pub const REPLY_CLOSED: u32 = 1 << 30;
/// `state` bit: a side sleeps on the futex and must be woken.
pub const WAITER: u32 = 1 << 31;

/// What a wait for `want` makes of the state word `s`: `Some(true)` the
/// wanted state, `Some(false)` closed, `None` keep waiting. A reply posted
/// before the close still counts (`REPLY_CLOSED`).
#[inline(always)]
fn settled(s: u32, want: u32) -> Option<bool> {
    let v = s & !(WAITER | REPLY_CLOSED);
    if v == want {
        Some(true)
    } else if v == CLOSED || s & REPLY_CLOSED != 0 {
        Some(false)
    } else {
        None
    }
}

const PAGE: usize = 4096;
const SPIN_MAX: u32 = 1 << 20;

/// The header at offset 0, in native byte order (both sides run on one
/// machine).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    magic: [u8; 8],
    version: u32,
    /// Bytes of the message buffer.
    capacity: u32,
    /// Offset and length of the string area.
    area_off: u32,
    area_len: u32,
    /// `Limits::max_strings` and `max_string_bytes`.
    max_strings: u32,
    max_string_bytes: u32,
    /// How many times a side polls the state before it sleeps (advisory).
    spin: u32,
    reserved: u32,
}

/// The sizes and limits of a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Bytes of the message buffer: the largest record (56 to 65535).
    pub capacity: usize,
    /// Bytes of the string area (rounded up to a page).
    pub area: usize,
    /// How many times a side polls before it sleeps on the futex.
    pub spin: u32,
    /// Strings per message and bytes per string (`max_record` is ignored:
    /// `capacity` is the record limit).
    pub limits: Limits,
}

impl Default for Config {
    fn default() -> Self {
        let limits = Limits::default();
        Config {
            capacity: limits.max_record as usize,
            area: 4 << 20,
            spin: 2000,
            limits,
        }
    }
}

/// Why a channel could not be created or mapped.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// An operating-system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration is out of range.
    #[error("bad channel configuration: {0}")]
    Config(&'static str),
    /// The `memfd` is not a channel of this version, or its header does not
    /// fit its size.
    #[error("not an idl channel: {0}")]
    BadHeader(&'static str),
    /// The `memfd` is not sealed against resizing.
    #[error("the channel's memfd is not sealed against resizing")]
    NotSealed,
    /// The environment variable naming an inherited descriptor is missing
    /// or not a descriptor number.
    #[error("environment variable {0} does not name an inherited descriptor")]
    NoFd(String),
}

fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> ShmError {
    move |source| ShmError::Io { what, source }
}

fn last(what: &'static str) -> ShmError {
    ShmError::Io {
        what,
        source: std::io::Error::last_os_error(),
    }
}

/// Creates a channel's sealed `memfd` with its header (the segment is
/// unet's [`Segment`]: created, sized and sealed there).
pub fn create(config: &Config) -> Result<OwnedFd, ShmError> {
    if !(56..=u16::MAX as usize).contains(&config.capacity) {
        return Err(ShmError::Config(
            "the message capacity must be 56 to 65535 bytes",
        ));
    }
    if config.limits.max_strings == 0 {
        return Err(ShmError::Config("max_strings must be at least 1"));
    }
    let area_off = (MSG + config.capacity).next_multiple_of(PAGE);
    let area_len = config.area.next_multiple_of(PAGE);
    let total = area_off
        .checked_add(area_len)
        .filter(|&t| t <= u32::MAX as usize)
        .ok_or(ShmError::Config("the string area must be below 4 GiB"))?;
    let seg = Segment::create("fastpath-idl", total).map_err(io("memfd segment"))?;
    let h = Header {
        magic: MAGIC,
        version: VERSION,
        capacity: config.capacity as u32,
        area_off: area_off as u32,
        area_len: area_len as u32,
        max_strings: config.limits.max_strings,
        max_string_bytes: config.limits.max_string_bytes,
        spin: config.spin.min(SPIN_MAX),
        reserved: 0,
    };
    // SAFETY: `Header` is `#[repr(C)]` plain data without padding (8 bytes
    // then eight `u32`), so its bytes are initialized.
    let bytes =
        unsafe { std::slice::from_raw_parts((&raw const h).cast::<u8>(), size_of::<Header>()) };
    // No one else has the segment yet: a plain write is the header.
    seg.write_bytes(0, bytes);
    seg.fd().try_clone().map_err(io("dup"))
}

/// A new channel's two ends, in this process (threads, tests).
pub fn pair(config: &Config) -> Result<(ClientEnd, ServerEnd), ShmError> {
    let fd = create(config)?;
    let client = ClientEnd::from_fd(fd.try_clone().map_err(io("dup"))?)?;
    Ok((client, ServerEnd::from_fd(fd)?))
}

/// A duplicate of `fd` that a child process inherits (`O_CLOEXEC`
/// cleared), to pass to it by number, e.g. in an environment variable
/// that [`fd_from_env`] reads. Keep it until the child is spawned, then
/// drop it.
pub fn inheritable(fd: &OwnedFd) -> Result<OwnedFd, ShmError> {
    // SAFETY: F_DUPFD on a valid fd returns a new descriptor (without
    // FD_CLOEXEC), or -1.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD, 3) };
    if n < 0 {
        return Err(last("fcntl(F_DUPFD)"));
    }
    // SAFETY: `n` is a descriptor just made and owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Takes the descriptor whose number the environment variable `var`
/// holds (a parent's [`inheritable`] duplicate), checking that it is open,
/// and marks it close-on-exec again.
///
/// # Safety
/// The number names a descriptor this process inherited for this purpose
/// and that nothing else in the process owns or closes; call it once.
pub unsafe fn fd_from_env(var: &str) -> Result<OwnedFd, ShmError> {
    let n: RawFd = std::env::var(var)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n: &RawFd| n >= 0)
        .ok_or_else(|| ShmError::NoFd(var.to_string()))?;
    // SAFETY: F_SETFD on any number is harmless: it fails with EBADF if
    // the descriptor is not open.
    if unsafe { libc::fcntl(n, libc::F_SETFD, libc::FD_CLOEXEC) } < 0 {
        return Err(ShmError::NoFd(var.to_string()));
    }
    // SAFETY: open (checked), and the caller's contract says no one else
    // owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Which end of a channel a mapping is: the index of its liveness word and
/// of its lock byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Client = 0,
    Server = 1,
}

impl Side {
    fn peer(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// One side's mapping of a channel, with the header's private copy, its
/// waiting policy and its watch on the peer.
#[derive(Debug)]
struct Map {
    /// The mapped `memfd` (unet's segment: sealed, mapped, unmapped on drop).
    seg: Segment,
    h: Header,
    wait: Waiting,
    live: Liveness,
}

impl Map {
    /// Maps a channel's `memfd` after checking its seals, its header and
    /// its size, as `side`, and announces the side to the peer.
    fn new(fd: OwnedFd, side: Side) -> Result<Map, ShmError> {
        if !Segment::is_sealed(&fd) {
            return Err(ShmError::NotSealed);
        }
        let seg = Segment::map(fd).map_err(io("mmap"))?;
        let mut raw = [0u8; size_of::<Header>()];
        if seg.len() < PAGE {
            return Err(ShmError::BadHeader("the file is shorter than a page"));
        }
        seg.read_bytes(0, &mut raw);
        // SAFETY: `raw` holds `size_of::<Header>()` bytes and `Header` is
        // plain data valid for any bits; an unaligned read copies it.
        let h: Header = unsafe { raw.as_ptr().cast::<Header>().read_unaligned() };
        if h.magic != MAGIC {
            return Err(ShmError::BadHeader("wrong magic"));
        }
        if h.version != VERSION {
            return Err(ShmError::BadHeader("unknown version"));
        }
        let (cap, off, alen) = (
            h.capacity as usize,
            h.area_off as usize,
            h.area_len as usize,
        );
        if !(56..=u16::MAX as usize).contains(&cap) {
            return Err(ShmError::BadHeader("message capacity out of range"));
        }
        if off % PAGE != 0 || off < MSG + cap {
            return Err(ShmError::BadHeader(
                "the string area overlaps the message buffer",
            ));
        }
        if off + alen > seg.len() {
            return Err(ShmError::BadHeader("the string area exceeds the file"));
        }
        if h.max_strings == 0 {
            return Err(ShmError::BadHeader("max_strings is 0"));
        }
        let spin = h.spin.min(SPIN_MAX);
        let live = Liveness::announce(&seg, side);
        Ok(Map {
            seg,
            h: Header { spin, ..h },
            wait: Waiting::new(spin),
            live,
        })
    }

    /// The atomic word at `off` of the header page or the descriptor line.
    #[inline(always)]
    fn word32(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off.is_multiple_of(4) && off + 4 <= MSG);
        // SAFETY: `off + 4 <= MSG < area_off <= len` (checked in `new`),
        // 4-aligned in a page-aligned mapping; `AtomicU32` has the layout
        // of a `u32` and is valid for any bits; it lives as long as `&self`
        // (the segment is unmapped only when the map drops).
        unsafe { &*self.seg.as_ptr().as_ptr().add(off).cast::<AtomicU32>() }
    }

    /// The state word.
    #[inline(always)]
    fn state(&self) -> &AtomicU32 {
        self.word32(LINE)
    }

    /// The key or status word.
    #[inline(always)]
    fn word(&self) -> &AtomicU16 {
        // SAFETY: as for `word32`, at offset 4100, 2-aligned.
        unsafe { &*self.seg.as_ptr().as_ptr().add(LINE + 4).cast::<AtomicU16>() }
    }

    /// The record length word.
    #[inline(always)]
    fn len_word(&self) -> &AtomicU16 {
        // SAFETY: as for `word32`, at offset 4102, 2-aligned.
        unsafe { &*self.seg.as_ptr().as_ptr().add(LINE + 6).cast::<AtomicU16>() }
    }

    #[inline(always)]
    fn msg(&self) -> NonNull<u8> {
        // SAFETY: offset 4104 plus `capacity` lies in the mapping (checked
        // in `new`), so the pointer is in bounds and not null.
        unsafe { NonNull::new_unchecked(self.seg.as_ptr().as_ptr().add(MSG)) }
    }

    #[inline(always)]
    fn area(&self) -> NonNull<u8> {
        // SAFETY: `area_off + area_len` lies in the mapping (checked).
        unsafe { NonNull::new_unchecked(self.seg.as_ptr().as_ptr().add(self.h.area_off as usize)) }
    }

    /// Publishes `to` (a request or a reply) unless the channel is closed;
    /// wakes the peer if it sleeps.
    #[inline(always)]
    fn post(&self, to: u32) -> Result<(), CallError> {
        let st = self.state();
        let mut s = st.load(Ordering::Relaxed);
        loop {
            if s & !WAITER == CLOSED || s & REPLY_CLOSED != 0 {
                return Err(CallError::Closed);
            }
            match st.compare_exchange_weak(s, to, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        let slept = s & WAITER != 0;
        if slept {
            futex_wake(st);
            self.wait.woke();
        }
        Ok(())
    }

    /// Waits until the state is `want`: polls while the waiting policy
    /// says it pays ([`Waiting`]), then sleeps on the futex with the waiter
    /// bit set. [`CallError::Closed`] if the channel closes first,
    /// [`CallError::PeerDied`] if the peer's process is found gone
    /// ([`Liveness`]), [`CallError::Timeout`] after `deadline`.
    #[inline(always)]
    fn wait_for(&self, want: u32, deadline: Option<Instant>) -> Result<(), CallError> {
        let st = self.state();
        let b = self.wait.budget();
        let woke = self.wait.woke.replace(false);
        if b.polls > 0 {
            let (polls, limit) = if b.long(woke) {
                (b.polls.saturating_mul(PROBE_STRETCH), PROBE_TIME)
            } else {
                (b.polls, SPIN_TIME)
            };
            let mut start: Option<Instant> = None;
            let mut n = 0u32;
            loop {
                match settled(st.load(Ordering::Acquire), want) {
                    Some(true) => {
                        self.wait.spun(b, true);
                        return Ok(());
                    }
                    Some(false) => return Err(CallError::Closed),
                    None => {}
                }
                n += 1;
                if n >= polls {
                    break;
                }
                // The clock is read only once a wait outlasts the polls a
                // quick answer takes, and then every 64 polls.
                if n.is_multiple_of(64) {
                    let now = Instant::now();
                    match start {
                        None => start = Some(now),
                        Some(t) if now.duration_since(t) >= limit => break,
                        Some(_) => {}
                    }
                }
                std::hint::spin_loop();
            }
            self.wait.spun(b, false);
            self.wait.count(|c| c.ran_out += 1);
        }
        self.wait.count(|c| c.sleeps += 1);
        let mut checked = Instant::now();
        loop {
            let s = st.load(Ordering::Acquire);
            match settled(s, want) {
                Some(true) => return Ok(()),
                Some(false) => return Err(CallError::Closed),
                None => {}
            }
            if s & WAITER == 0
                && st
                    .compare_exchange(s, s | WAITER, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            let mut sleep = self.live.watching(&self.seg).then_some(LIVENESS_CHECK);
            if let Some(d) = deadline {
                match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => {
                        sleep = Some(sleep.map_or(left, |s| s.min(left)));
                    }
                    _ => return Err(CallError::Timeout),
                }
            }
            futex_wait(st, s | WAITER, sleep)?;
            if sleep.is_some() && checked.elapsed() >= LIVENESS_CHECK {
                checked = Instant::now();
                if !self.live.peer_alive(&self.seg) {
                    // Re-read: a reply or a close posted just before the
                    // peer died still counts.
                    return match settled(st.load(Ordering::Acquire), want) {
                        Some(true) => Ok(()),
                        Some(false) => Err(CallError::Closed),
                        None => Err(CallError::PeerDied),
                    };
                }
            }
        }
    }

    /// Marks the channel closed and wakes the peer. A posted reply stays
    /// for the client to take (`REPLY | REPLY_CLOSED`): a server that
    /// answers and then goes away must not take its last answer with it.
    fn close(&self) {
        let st = self.state();
        let mut s = st.load(Ordering::Relaxed);
        loop {
            let closed = if s & !(WAITER | REPLY_CLOSED) == REPLY {
                REPLY | REPLY_CLOSED
            } else {
                CLOSED
            };
            match st.compare_exchange_weak(s, closed, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        if s & WAITER != 0 {
            futex_wake(st);
        }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        self.close();
        // The segment unmaps itself when it drops, after this; the lock
        // description closes with `live` (the lock goes with it).
    }
}

/// The longest a side polls before it sleeps, whatever `spin` says: a
/// little over the cost of sleeping and being woken on an idle machine
/// (a futex-only round trip is two of those), so that a poll that fails
/// costs at most about what sleeping at once would have.
pub const SPIN_TIME: Duration = Duration::from_micros(10);

/// How often a side that sleeps checks that its peer's process still
/// exists: a peer that dies is noticed within this time (plus the time to
/// finish the call in progress, on the server).
pub const LIVENESS_CHECK: Duration = Duration::from_millis(50);

/// A side's waiting rule and the record of what its waits did. The rule
/// ([`WaitRule`], documented in [`crate::rt::wait`]): the side polls on
/// every wait (at most `spin` polls and [`SPIN_TIME`]) until
/// [`WaitRule::MISSES`] waits in a row ran out unanswered; it then goes to
/// the futex at once except on a probe, one wait in `gap`, where `gap`
/// starts at [`WaitRule::PROBE_MIN`] and doubles after each probe that
/// runs out up to [`WaitRule::PROBE_MAX`]; any answered poll makes it poll
/// on every wait again. A probe, and a wait whose post woke the peer,
/// poll up to [`PROBE_TIME`] ([`Budget::long`]). On an idle machine a side
/// so polls again within `PROBE_MAX` waits of its peer running again; with
/// the cores busy it polls on one wait in `PROBE_MAX`. Interior
/// mutability: the map is shared by `&self` between posting and waiting.
#[derive(Debug)]
struct Waiting {
    rule: Cell<WaitRule>,
    /// Whether this side's last post woke the peer: its next wait then
    /// polls for the wake-up ([`Budget::long`]).
    woke: Cell<bool>,
    /// What the waits did (counted off the quick path only).
    counts: Cell<WaitCounts>,
}

/// What a side's waits did since its end was made: the waiting rule's
/// observable record ([`ClientEnd::wait_counts`],
/// [`ServerEnd::wait_counts`]). Counted only where a wait leaves the quick
/// path (a poll answered costs nothing here), so the waits answered while
/// polling are the calls made minus `sleeps`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitCounts {
    /// Waits that were not answered while polling and went to the futex
    /// (they set the waiter bit and slept, or found the answer on the way).
    pub sleeps: u64,
    /// Waits whose polling ran out unanswered (a subset of `sleeps`).
    pub ran_out: u64,
    /// Waits that polled as a sleeping side's probe.
    pub probes: u64,
    /// Posts that found the peer asleep and woke it.
    pub wakes: u64,
}

impl Waiting {
    fn new(spin: u32) -> Waiting {
        Waiting {
            rule: Cell::new(WaitRule::new(spin)),
            woke: Cell::new(false),
            counts: Cell::new(WaitCounts::default()),
        }
    }

    /// What this wait may do ([`WaitRule::budget`]). A side that polls
    /// without a probe leaves the rule unchanged, so only the other
    /// outcomes are stored back.
    #[inline(always)]
    fn budget(&self) -> Budget {
        let mut r = self.rule.get();
        let b = r.budget();
        if b.probe || b.polls == 0 {
            self.rule.set(r);
            if b.probe {
                self.count(|c| c.probes += 1);
            }
        }
        b
    }

    /// See [`WaitRule::quiet`].
    #[inline(always)]
    fn quiet(&self) -> bool {
        self.rule.get().quiet()
    }

    /// Sets the most polls per wait.
    fn set_spin(&self, spin: u32) {
        let mut r = self.rule.get();
        r.set_spin(spin);
        self.rule.set(r);
    }

    /// Records a post that woke the peer: counted, and the next wait
    /// polls for the wake-up.
    #[cold]
    fn woke(&self) {
        self.woke.set(true);
        self.count(|c| c.wakes += 1);
    }

    /// Counts a wait that went to the futex (after its polling ran out if
    /// it polled), a probe, or a post that woke the peer: the record of
    /// [`WaitCounts`], off the quick path.
    #[cold]
    fn count(&self, f: impl FnOnce(&mut WaitCounts)) {
        let mut c = self.counts.get();
        f(&mut c);
        self.counts.set(c);
    }

    /// Records how a wait's polling went ([`WaitRule::polled`]). A quiet
    /// rule's answered poll changes nothing and stores nothing.
    #[inline(always)]
    fn spun(&self, b: Budget, answered: bool) {
        let mut r = self.rule.get();
        if answered && !b.probe && r.quiet() {
            return;
        }
        r.polled(b, answered);
        self.rule.set(r);
    }
}

/// The watch on the peer's process: each side holds an open-file-description
/// lock (`F_OFD_SETLK`) on one byte of the `memfd` (byte 0 the client,
/// byte 1 the server), through a description of its own (the `memfd`
/// reopened through `/proc/self/fd`), and sets its word at [`ATTACHED`]
/// once it holds it. The kernel drops the lock when the last descriptor of
/// that description closes, which is when the process exits, however it
/// exits (`SIGKILL` included). A side whose peer has attached checks the
/// peer's lock (`F_OFD_GETLK`) every [`LIVENESS_CHECK`] while it sleeps; no
/// lock means the peer's process is gone without closing the channel.
///
/// No process id is involved, so neither pid reuse nor pid namespaces
/// matter. A side that cannot take its lock (no `/proc`, another end of the
/// same side already holds it) does not attach and is not watched; a peer
/// that writes the attached word without holding the lock only gets its
/// own channel declared dead.
#[derive(Debug)]
struct Liveness {
    side: Side,
    /// The description holding this side's lock (`None`: not attached).
    lock: Option<OwnedFd>,
}

/// Offset of the two attached words in the header page: the client's,
/// then the server's (`u32`, 1 once that side holds its lock).
pub const ATTACHED: usize = 64;

impl Liveness {
    /// Takes this side's lock and sets its attached word.
    fn announce(seg: &Segment, side: Side) -> Liveness {
        let lock = reopen(seg.fd()).filter(|fd| ofd_lock(fd, side as i64, libc::F_OFD_SETLK));
        if lock.is_some() {
            attached(seg, side).store(1, Ordering::Release);
        }
        Liveness { side, lock }
    }

    /// Whether the peer attached and so can be watched.
    fn watching(&self, seg: &Segment) -> bool {
        attached(seg, self.side.peer()).load(Ordering::Acquire) != 0
    }

    /// Whether the peer's process still holds its lock (true if it never
    /// attached, or if the check itself fails).
    fn peer_alive(&self, seg: &Segment) -> bool {
        if !self.watching(seg) {
            return true;
        }
        // Query through our own description: our lock (on the other byte)
        // cannot answer for the peer's. Without one, open a description
        // for the query.
        let probe;
        let fd = match &self.lock {
            Some(fd) => fd,
            None => match reopen(seg.fd()) {
                Some(fd) => {
                    probe = fd;
                    &probe
                }
                None => return true,
            },
        };
        ofd_lock(fd, self.side.peer() as i64, libc::F_OFD_GETLK)
    }
}

/// A side's attached word.
fn attached(seg: &Segment, side: Side) -> &AtomicU32 {
    // SAFETY: offsets 64 and 68 lie in the header page, inside the mapping
    // (`Map::new` checked it holds at least a page), 4-aligned in a
    // page-aligned mapping; `AtomicU32` is valid for any bits and lives as
    // long as the segment's borrow.
    unsafe {
        &*seg
            .as_ptr()
            .as_ptr()
            .add(ATTACHED + 4 * side as usize)
            .cast::<AtomicU32>()
    }
}

/// A new open file description of the `memfd` behind `fd` (a `dup` would
/// share the description, and with it the lock).
fn reopen(fd: &OwnedFd) -> Option<OwnedFd> {
    let path = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    // SAFETY: `path` is a valid NUL-terminated string; open returns a new
    // descriptor or -1.
    let n = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    // SAFETY: a descriptor just made, owned by no one else.
    (n >= 0).then(|| unsafe { OwnedFd::from_raw_fd(n) })
}

/// `F_OFD_SETLK`: takes a write lock on byte `at`, true if taken.
/// `F_OFD_GETLK`: true if another description holds a lock on byte `at`
/// (and if the query fails, so that a failing check never declares a
/// peer dead).
fn ofd_lock(fd: &OwnedFd, at: i64, cmd: libc::c_int) -> bool {
    // SAFETY: `flock` is plain data for which all zeroes is valid.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = at;
    fl.l_len = 1;
    // SAFETY: fcntl with a lock command on a valid descriptor and a valid
    // `flock` (l_pid 0, as OFD locks require), which GETLK overwrites.
    let r = unsafe { libc::fcntl(fd.as_raw_fd(), cmd, &mut fl) };
    match cmd {
        libc::F_OFD_GETLK => r < 0 || fl.l_type != libc::F_UNLCK as libc::c_short,
        _ => r == 0,
    }
}

/// Sleeps while the futex word is `val`, at most `timeout`. The word is
/// shared between processes, so the operation is not `FUTEX_PRIVATE`.
fn futex_wait(word: &AtomicU32, val: u32, timeout: Option<Duration>) -> Result<(), CallError> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a valid, aligned `u32` that lives as long as
    // `word`, with a valid or null timeout; it only reads the word.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            val,
            tsp,
            0usize,
            0u32,
        )
    };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ETIMEDOUT) => {}
            _ => return Err(CallError::Io(e)),
        }
    }
    Ok(())
}

/// Wakes every sleeper on the futex word (there is at most one: the peer).
fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a valid, aligned `u32`; it does not access
    // memory beyond the word's address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            0usize,
            0usize,
            0u32,
        )
    };
}

/// What the dynamic stubs' generated client code reads to make a whole
/// call on the channel itself (`crate::dynamic`'s `shm_call`): the
/// addresses and the limits of the private header copy, and whether the
/// waiting rule lets it take a reply found at its first poll without
/// telling [`Waiting`]. The generated code reads it at these offsets
/// ([`GenClient::LINE`] ...); it is the first field of [`ClientEnd`], so
/// that the out-of-line wait gets the end back from its address.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct GenClient {
    /// The descriptor line: the state word; the key or status at +4, the
    /// record length at +6, the record at +8.
    pub line: *mut u8,
    /// The string area.
    pub area: *mut u8,
    /// Its length.
    pub area_len: u64,
    /// The header's per-string limit and strings per message.
    pub max_string_bytes: u64,
    pub max_strings: u64,
    /// Bytes of the message buffer.
    pub capacity: u64,
    /// 1 when a wait answered at its first poll leaves the waiting rule as
    /// it is ([`WaitRule::quiet`]: polling allowed, no poll ran out since
    /// the last answered one): then the generated code polls once inline
    /// and calls [`gen_wait`] only if the reply is not there yet (or if its
    /// post found the server asleep: [`gen_wait`] wakes it).
    pub quiet: u64,
}

// SAFETY: the pointers address the mapping of the `ClientEnd` this view
// is the first field of, which owns the mapping and moves with it; the
// view is used only through `&mut` of that end (one thread at a time).
unsafe impl Send for GenClient {}

impl GenClient {
    /// Offsets of the fields, for the generated code.
    pub const LINE: i32 = 0;
    pub const AREA: i32 = 8;
    pub const AREA_LEN: i32 = 16;
    pub const MAX_STRING_BYTES: i32 = 24;
    pub const MAX_STRINGS: i32 = 32;
    pub const CAPACITY: i32 = 40;
    pub const QUIET: i32 = 48;

    fn new(map: &Map) -> GenClient {
        GenClient {
            // SAFETY: offset LINE lies in the mapping (checked in `Map::new`).
            line: unsafe { map.seg.as_ptr().as_ptr().add(LINE) },
            area: map.area().as_ptr(),
            area_len: u64::from(map.h.area_len),
            max_string_bytes: u64::from(map.h.max_string_bytes),
            max_strings: u64::from(map.h.max_strings),
            capacity: u64::from(map.h.capacity),
            quiet: u64::from(map.wait.quiet()),
        }
    }
}

/// The generated client code's out-of-line wait for the reply of the
/// request it posted: wakes the server first if the post found it asleep
/// (`woke`), then waits as
/// [`ClientTransport::call`] does (the adaptive rule, the timeout, the
/// peer's liveness). 0 when the reply is there; -1 with the error kept in
/// the end ([`ClientEnd::take_gen_error`]).
///
/// # Safety
/// `end` is the [`GenClient`] of a live [`ClientEnd`] (its first field)
/// that the running generated call borrows mutably.
pub(crate) unsafe extern "C" fn gen_wait(end: *mut GenClient, woke: u64) -> i64 {
    // SAFETY: the function's contract: `GenClient` is the first field of
    // the `#[repr(C)]` `ClientEnd`, so the addresses are the same.
    let end = unsafe { &mut *end.cast::<ClientEnd>() };
    if let Some(Loopback(serve, arg)) = end.loopback {
        // SAFETY: `set_loopback`'s contract.
        unsafe { serve(arg, 0) };
        let s = end.map.state().load(Ordering::Acquire) & !WAITER;
        if s == REPLY {
            return 0;
        }
        return gen_wait_failed(end, CallError::Malformed("the loopback answered nothing"));
    }
    gen_wait_reply(end, woke)
}

/// Keeps `e` as the generated call's error; -1.
#[cold]
#[inline(never)]
fn gen_wait_failed(end: &mut ClientEnd, e: CallError) -> i64 {
    end.gen_err = Some(e);
    -1
}

/// [`gen_wait`] on a channel with a peer: out of line, so that the
/// loopback's path (the benchmarks' counts) does not pay the frame of
/// the waiting rule's code.
#[inline(never)]
fn gen_wait_reply(end: &mut ClientEnd, woke: u64) -> i64 {
    let m = &end.map;
    if woke != 0 {
        futex_wake(m.state());
        m.wait.woke();
    }
    let deadline = end.timeout.map(|t| Instant::now() + t);
    let r = match m.wait_for(REPLY, deadline) {
        Ok(()) => 0,
        Err(e) => {
            if matches!(e, CallError::Timeout) {
                m.close();
            }
            end.gen_err = Some(e);
            -1
        }
    };
    end.view.quiet = u64::from(end.map.wait.quiet());
    r
}

/// A loopback's server step and its argument (see
/// [`ClientEnd::set_loopback`]).
#[derive(Clone, Copy, Debug)]
struct Loopback(LoopbackFn, *mut ());

/// A loopback's server step (see [`ClientEnd::set_loopback`]): called
/// with its argument and 0.
pub type LoopbackFn = unsafe extern "C" fn(*mut (), u64) -> i64;

// SAFETY: `set_loopback`'s contract: the step is sound to call on any
// thread the end moves to.
unsafe impl Send for Loopback {}

/// The client's end of a channel: a [`ClientTransport`] for the generated
/// client stubs. Dropping it closes the channel.
#[repr(C)]
#[derive(Debug)]
pub struct ClientEnd {
    /// First: the generated code's view (see [`GenClient`]).
    view: GenClient,
    /// The error of the last out-of-line wait that failed.
    gen_err: Option<CallError>,
    /// See [`ClientEnd::set_loopback`].
    loopback: Option<Loopback>,
    map: Map,
    /// The end of the last string put, in the string area.
    used: usize,
    /// Strings put since `begin`.
    count: u32,
    timeout: Option<Duration>,
}

impl ClientEnd {
    /// Maps a channel's `memfd`, checking its seals, header and size.
    pub fn from_fd(fd: OwnedFd) -> Result<ClientEnd, ShmError> {
        let map = Map::new(fd, Side::Client)?;
        Ok(ClientEnd {
            view: GenClient::new(&map),
            gen_err: None,
            loopback: None,
            map,
            used: 0,
            count: 0,
            timeout: None,
        })
    }

    /// Sets how long a call waits for its reply (`None`: for ever). A call
    /// that times out closes the channel: its reply could still arrive and
    /// would be taken for the next call's.
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
    }

    /// Sets how many times a call polls for the reply before it sleeps.
    pub fn set_spin(&mut self, spin: u32) {
        self.map.h.spin = spin.min(SPIN_MAX);
        self.map.wait.set_spin(self.map.h.spin);
        self.view.quiet = u64::from(self.map.wait.quiet());
    }

    /// The generated code's view of the channel (its address is what the
    /// dynamic stubs' `shm_call` takes).
    pub(crate) fn gen_view(&mut self) -> *mut GenClient {
        &mut self.view
    }

    /// Makes this end a loopback for a client and a server in one thread
    /// (the benchmarks' instruction counts): after a call on this end
    /// posts its request (the generated stubs' [`ClientTransport::call`],
    /// or the dynamic stubs' generated call where it would block for the
    /// reply), it calls `serve(arg)` (with 0 as its second argument),
    /// which answers the posted request on the channel's server end (the
    /// dynamic server's generated loop:
    /// [`crate::dynamic::DynServer::loopback`]; a generated Rust server's
    /// `serve` over [`ServerEnd::posted`]), and then waits as usual, which
    /// finds the reply at once. `None` restores plain waiting.
    ///
    /// # Safety
    /// `serve(arg)` is sound to call whenever a call on this end waits,
    /// for as long as the loopback is set, on whichever thread the end is
    /// moved to.
    pub unsafe fn set_loopback(&mut self, serve: Option<(LoopbackFn, *mut ())>) {
        self.loopback = serve.map(|(f, a)| Loopback(f, a));
    }

    /// The waiting rule's state and the generated code's flag, for tests.
    #[cfg(test)]
    pub(crate) fn waiting_state(&self) -> (WaitRule, u64) {
        (self.map.wait.rule.get(), self.view.quiet)
    }

    /// What this end's waits for a reply did so far (the waiting rule's
    /// record; see [`WaitCounts`]).
    pub fn wait_counts(&self) -> WaitCounts {
        self.map.wait.counts.get()
    }

    /// The error the last failed out-of-line wait kept.
    pub(crate) fn take_gen_error(&mut self) -> Option<CallError> {
        self.gen_err.take()
    }

    /// Whether the generated code runs calls on this end itself: the
    /// host's code generator has the atomic exchange the protocol needs.
    pub(crate) fn gen_supported() -> bool {
        cfg!(target_arch = "x86_64")
    }

    /// The channel's limits, as its header gives them.
    pub fn limits(&self) -> Limits {
        Limits {
            max_strings: self.map.h.max_strings,
            max_string_bytes: self.map.h.max_string_bytes,
            max_record: self.map.h.capacity,
        }
    }

    /// Bytes of the string area.
    pub fn area_len(&self) -> usize {
        self.map.h.area_len as usize
    }

    /// The raw transport with no stub, the benchmarks' baseline: copies
    /// `req` into the message buffer, calls with `key`, and returns the
    /// reply's record bytes in place (the server may still write them).
    pub fn call_raw(&mut self, key: u16, req: &[u8]) -> Result<&[u8], CallError> {
        if req.len() > self.capacity() {
            return Err(CallError::RecordTooLarge {
                size: req.len(),
                capacity: self.capacity(),
            });
        }
        // SAFETY: the buffer holds `capacity >= req.len()` bytes of the
        // mapping, private memory cannot overlap it.
        unsafe { std::ptr::copy_nonoverlapping(req.as_ptr(), self.map.msg().as_ptr(), req.len()) };
        let n = self.call(key, req.len())?;
        // SAFETY: `n <= capacity` (`call` checked), in the mapping, which
        // lives as long as the borrow of `self`; bytes are valid for any
        // value.
        Ok(unsafe { std::slice::from_raw_parts(self.map.msg().as_ptr(), n) })
    }

    /// Closes the channel now (as dropping the end does).
    pub fn close(&self) {
        self.map.close();
    }
}

// SAFETY: `buf` is the mapping's message buffer: `capacity` bytes at
// offset 4104 of a page-aligned mapping (8-aligned), kept for as long as
// the end; nothing else in this process uses the mapping. `reply_bytes`
// checks its range against the area, which starts page aligned.
unsafe impl ClientTransport for ClientEnd {
    #[inline(always)]
    fn buf(&mut self) -> NonNull<u8> {
        self.map.msg()
    }

    #[inline(always)]
    fn capacity(&self) -> usize {
        self.map.h.capacity as usize
    }

    #[inline(always)]
    fn begin(&mut self) {
        self.used = 0;
        self.count = 0;
    }

    #[inline]
    fn put(&mut self, bytes: &[u8], align: usize) -> Result<u32, CallError> {
        let h = &self.map.h;
        if bytes.len() > h.max_string_bytes as usize {
            return Err(CallError::StringTooLong {
                len: bytes.len(),
                max: h.max_string_bytes,
            });
        }
        if self.count >= h.max_strings {
            return Err(CallError::TooManyStrings { max: h.max_strings });
        }
        let at = self.used.next_multiple_of(align.max(1));
        let size = h.area_len as usize;
        if at > size || bytes.len() > size - at {
            return Err(CallError::AreaFull {
                len: bytes.len(),
                at,
                size,
            });
        }
        // SAFETY: `at .. at + len` lies in the string area (checked), which
        // lies in the mapping; `bytes` is the caller's private memory.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.map.area().as_ptr().add(at),
                bytes.len(),
            )
        };
        self.used = at + bytes.len();
        self.count += 1;
        Ok(at as u32)
    }

    #[inline]
    fn call(&mut self, key: u16, len: usize) -> Result<usize, CallError> {
        let cap = self.capacity();
        if len > cap {
            return Err(CallError::RecordTooLarge {
                size: len,
                capacity: cap,
            });
        }
        let m = &self.map;
        m.word().store(key, Ordering::Relaxed);
        m.len_word().store(len as u16, Ordering::Relaxed);
        m.post(REQUEST)?;
        if let Some(Loopback(serve, arg)) = self.loopback {
            // SAFETY: `set_loopback`'s contract.
            unsafe { serve(arg, 0) };
            // The wait below finds the reply at its first poll; a step
            // that answered nothing would leave it waiting for ever.
            if settled(m.state().load(Ordering::Acquire), REPLY).is_none() {
                return Err(CallError::Malformed("the loopback answered nothing"));
            }
        }
        let deadline = self.timeout.map(|t| Instant::now() + t);
        match m.wait_for(REPLY, deadline) {
            Ok(()) => {}
            Err(CallError::Timeout) => {
                m.close();
                return Err(CallError::Timeout);
            }
            Err(e) => return Err(e),
        }
        self.view.quiet = u64::from(m.wait.quiet());
        let status = m.word().load(Ordering::Relaxed);
        let n = m.len_word().load(Ordering::Relaxed) as usize;
        match Status::from_wire(status) {
            Some(Status::Ok) if n <= cap => Ok(n),
            Some(Status::Ok) => Err(CallError::Malformed(
                "the reply is longer than the message buffer",
            )),
            Some(s) => Err(CallError::Status(s)),
            None => Err(CallError::Malformed("unknown status word")),
        }
    }

    #[inline(always)]
    fn as_shm(&mut self) -> Option<&mut ClientEnd> {
        Some(self)
    }

    #[inline]
    fn reply_bytes(&self, off: u32, len: usize) -> Result<&[u8], CallError> {
        let (off, size) = (off as usize, self.map.h.area_len as usize);
        if len > self.map.h.max_string_bytes as usize || off > size || len > size - off {
            return Err(CallError::Malformed(
                "a reply's descriptor lies outside the string area",
            ));
        }
        // SAFETY: in the area (checked), which lies in the mapping and
        // lives as long as `&self`; bytes are valid for any value. The
        // server may write them concurrently: the callers copy them once.
        Ok(unsafe { std::slice::from_raw_parts(self.map.area().as_ptr().add(off), len) })
    }
}

/// What the dynamic server's generated loop (`crate::dynamic`'s
/// `shm_serve`) reads: as [`GenClient`], for the server's side, and the
/// dispatch's private context (set by the loop's caller).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct GenServer {
    /// The descriptor line (see [`GenClient::line`]).
    pub line: *mut u8,
    /// The string area and its length.
    pub area: *mut u8,
    pub area_len: u64,
    /// Bytes of the message buffer.
    pub capacity: u64,
    /// As [`GenClient::quiet`], for the wait for a request.
    pub quiet: u64,
    /// The dispatch's private context (scratch pointer and spill area),
    /// in the memory of the loop's caller; null when no loop runs.
    pub dctx: *mut u8,
}

// SAFETY: as for `GenClient`: the pointers address the mapping of the
// `ServerEnd` this view is the first field of (and, while a loop runs,
// that loop's own context); used only through `&mut` of that end.
unsafe impl Send for GenServer {}

impl GenServer {
    /// Offsets of the fields, for the generated code.
    pub const LINE: i32 = 0;
    pub const AREA: i32 = 8;
    pub const AREA_LEN: i32 = 16;
    pub const CAPACITY: i32 = 24;
    pub const QUIET: i32 = 32;
    pub const DCTX: i32 = 40;

    fn new(map: &Map) -> GenServer {
        GenServer {
            // SAFETY: offset LINE lies in the mapping (checked in `Map::new`).
            line: unsafe { map.seg.as_ptr().as_ptr().add(LINE) },
            area: map.area().as_ptr(),
            area_len: u64::from(map.h.area_len),
            capacity: u64::from(map.h.capacity),
            quiet: u64::from(map.wait.quiet()),
            dctx: std::ptr::null_mut(),
        }
    }
}

/// The generated server loop's out-of-line step after a reply it posted
/// found the client asleep (`woke`: wakes it) or the waiting rule not
/// quiet: wakes the client as [`ServerTransport::reply`] does, and
/// refreshes the quiet flag. Returns 0.
///
/// # Safety
/// `end` is the [`GenServer`] of a live [`ServerEnd`] (its first field)
/// that the running loop borrows mutably.
pub(crate) unsafe extern "C" fn gen_posted(end: *mut GenServer, woke: u64) -> i64 {
    // SAFETY: the function's contract: `GenServer` is the first field of
    // the `#[repr(C)]` `ServerEnd`.
    let end = unsafe { &mut *end.cast::<ServerEnd>() };
    if woke != 0 {
        futex_wake(end.map.state());
        end.map.wait.woke();
    }
    end.view.quiet = u64::from(end.map.wait.quiet());
    0
}

/// The server's end of a channel: a [`ServerTransport`] for the generated
/// server loop. Dropping it closes the channel.
#[repr(C)]
#[derive(Debug)]
pub struct ServerEnd {
    /// First: the generated loop's view (see [`GenServer`]).
    view: GenServer,
    map: Map,
    /// Private memory of the area's size for in strings (allocated zeroed:
    /// the system maps its pages when first written).
    scratch: Vec<u8>,
}

impl ServerEnd {
    /// Creates a channel and maps it as its server.
    pub fn create(config: &Config) -> Result<ServerEnd, ShmError> {
        ServerEnd::from_fd(create(config)?)
    }

    /// Maps a channel's `memfd`, checking its seals, header and size.
    pub fn from_fd(fd: OwnedFd) -> Result<ServerEnd, ShmError> {
        let map = Map::new(fd, Side::Server)?;
        let scratch = vec![0u8; map.h.area_len as usize];
        Ok(ServerEnd {
            view: GenServer::new(&map),
            map,
            scratch,
        })
    }

    /// Whether the dynamic server runs its loop on this end in generated
    /// code (see [`ClientEnd::gen_supported`]).
    pub(crate) fn gen_supported() -> bool {
        cfg!(target_arch = "x86_64")
    }

    /// The generated loop's view of the channel.
    pub(crate) fn gen_view(&mut self) -> *mut GenServer {
        &mut self.view
    }

    /// Waits for a request as [`ServerTransport::wait`] does (the waiting
    /// rule, the client's liveness) without taking it: the generated loop
    /// takes it.
    pub(crate) fn wait_request(&mut self) -> Result<(), CallError> {
        let r = self.map.wait_for(REQUEST, None);
        self.view.quiet = u64::from(self.map.wait.quiet());
        r
    }

    /// What this end's waits for a request did so far (see [`WaitCounts`]).
    pub fn wait_counts(&self) -> WaitCounts {
        self.map.wait.counts.get()
    }

    /// The channel's `memfd`, to hand to a client ([`inheritable`] for a
    /// child process, a `dup` for a thread).
    pub fn fd(&self) -> &OwnedFd {
        self.map.seg.fd()
    }

    /// A client end of this channel, in this process.
    pub fn client(&self) -> Result<ClientEnd, ShmError> {
        ClientEnd::from_fd(self.map.seg.fd().try_clone().map_err(io("dup"))?)
    }

    /// Sets how many times the server polls for a request before it sleeps.
    pub fn set_spin(&mut self, spin: u32) {
        self.map.h.spin = spin.min(SPIN_MAX);
        self.map.wait.set_spin(self.map.h.spin);
        self.view.quiet = u64::from(self.map.wait.quiet());
    }

    /// Serves raw calls with no stub (the benchmarks' baseline): `f` gets
    /// the key, the message buffer and the request's length, and returns
    /// the reply's length (at most the buffer's). Ends when the channel
    /// closes.
    pub fn serve_raw(
        &mut self,
        mut f: impl FnMut(u16, &mut [u8], usize) -> usize,
    ) -> Result<(), CallError> {
        loop {
            let (key, len) = match self.wait() {
                Ok(r) => r,
                Err(CallError::Closed) => return Ok(()),
                Err(e) => return Err(e),
            };
            let cap = self.capacity();
            // SAFETY: the message buffer: `capacity` bytes of the mapping,
            // ours until `reply`; any bytes are valid `u8`s (the client may
            // write them concurrently, see the module doc).
            let buf = unsafe { std::slice::from_raw_parts_mut(self.map.msg().as_ptr(), cap) };
            let n = f(key, buf, len).min(cap);
            self.reply(Status::Ok, n, 0..0)?;
        }
    }

    /// Closes the channel now (as dropping the end does).
    pub fn close(&self) {
        self.map.close();
    }

    /// A view of this end that serves only the requests already posted:
    /// its [`ServerTransport::wait`] takes a posted request as the end's
    /// does, and where the end would wait for one it returns
    /// [`CallError::Closed`] at once, so that a server loop (a generated
    /// Rust server's `serve`) answers what is there and returns. For a
    /// client and a server in one thread: the loopback step of
    /// [`ClientEnd::set_loopback`].
    pub fn posted(&mut self) -> Posted<'_> {
        Posted(self)
    }
}

/// A server end that serves only posted requests (see
/// [`ServerEnd::posted`]).
#[derive(Debug)]
pub struct Posted<'a>(&'a mut ServerEnd);

// SAFETY: every method is the end's own (whose contract holds), except
// `wait`, which returns what the end's `wait` returns or no request.
unsafe impl ServerTransport for Posted<'_> {
    #[inline]
    fn wait(&mut self) -> Result<(u16, usize), CallError> {
        // The look for a next request that a server loop makes after its
        // reply: nothing posted (or the channel closed) ends the loop.
        if settled(self.0.map.state().load(Ordering::Acquire), REQUEST) != Some(true) {
            return Err(CallError::Closed);
        }
        self.0.wait()
    }

    #[inline(always)]
    fn buf(&mut self) -> NonNull<u8> {
        self.0.buf()
    }

    #[inline(always)]
    fn capacity(&self) -> usize {
        self.0.capacity()
    }

    #[inline(always)]
    fn area(&mut self) -> (NonNull<u8>, usize) {
        self.0.area()
    }

    #[inline(always)]
    fn scratch(&mut self) -> NonNull<u8> {
        ServerTransport::scratch(self.0)
    }

    #[inline(always)]
    fn max_string_bytes(&self) -> u32 {
        self.0.max_string_bytes()
    }

    #[inline]
    fn reply(&mut self, status: Status, len: usize, strings: Range<u32>) -> Result<(), CallError> {
        self.0.reply(status, len, strings)
    }
}

// SAFETY: from `wait` to `reply`: the message buffer is `capacity` bytes
// at offset 4104 of a page-aligned mapping (8-aligned); the area is
// page aligned and disjoint from it (the header check); the scratch is
// this end's private `Vec` of the area's length; `wait` returns only
// lengths up to `capacity` (it answers longer ones itself). The mapping
// lives as long as the end.
unsafe impl ServerTransport for ServerEnd {
    fn wait(&mut self) -> Result<(u16, usize), CallError> {
        loop {
            let r = self.map.wait_for(REQUEST, None);
            self.view.quiet = u64::from(self.map.wait.quiet());
            r?;
            let key = self.map.word().load(Ordering::Relaxed);
            let len = self.map.len_word().load(Ordering::Relaxed) as usize;
            if len <= self.capacity() {
                return Ok((key, len));
            }
            self.reply(Status::ShortMessage, 0, 0..0)?;
        }
    }

    #[inline(always)]
    fn buf(&mut self) -> NonNull<u8> {
        self.map.msg()
    }

    #[inline(always)]
    fn capacity(&self) -> usize {
        self.map.h.capacity as usize
    }

    #[inline(always)]
    fn area(&mut self) -> (NonNull<u8>, usize) {
        (self.map.area(), self.map.h.area_len as usize)
    }

    #[inline(always)]
    fn scratch(&mut self) -> NonNull<u8> {
        // A `Vec`'s pointer is never null (dangling when empty, and then
        // the area is empty too).
        NonNull::new(self.scratch.as_mut_ptr()).unwrap_or(NonNull::dangling())
    }

    #[inline(always)]
    fn max_string_bytes(&self) -> u32 {
        self.map.h.max_string_bytes
    }

    #[inline]
    fn reply(&mut self, status: Status, len: usize, _strings: Range<u32>) -> Result<(), CallError> {
        let len = if status == Status::Ok {
            len.min(self.capacity())
        } else {
            0
        };
        self.map.word().store(status as u16, Ordering::Relaxed);
        self.map.len_word().store(len as u16, Ordering::Relaxed);
        let r = self.map.post(REPLY);
        self.view.quiet = u64::from(self.map.wait.quiet());
        r
    }

    #[inline(always)]
    fn as_shm(&mut self) -> Option<&mut ServerEnd> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    #[test]
    fn header_is_checked() {
        let fd = create(&Config::default()).expect("create");
        let file = File::from(fd.try_clone().expect("dup"));
        std::os::unix::fs::FileExt::write_all_at(&file, b"xxxxx", 0).expect("write");
        assert!(matches!(
            ClientEnd::from_fd(fd),
            Err(ShmError::BadHeader("wrong magic"))
        ));
    }

    /// The channel's `Waiting` stores back only what changed: it must make
    /// the same choices as the pure rule, and count each probe, whatever
    /// the outcomes.
    #[test]
    fn a_sides_waiting_follows_the_pure_rule_step_for_step() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(26);
        let w = Waiting::new(2000);
        let mut pure = WaitRule::new(2000);
        let mut probes = 0;
        for i in 0..20_000 {
            // Runs of answered and of unanswered polls, of random lengths.
            let answered = (i / 40) % 2 == 0 && rng.random_range(0..8) != 0
                || (i / 40) % 2 == 1 && rng.random_range(0..8) == 0;
            let (b, p) = (w.budget(), pure.budget());
            assert_eq!(b, p, "wait {i}");
            if b.polls > 0 {
                w.spun(b, answered);
                pure.polled(p, answered);
                probes += u64::from(b.probe);
            }
            assert_eq!(w.rule.get(), pure, "wait {i}");
            assert_eq!(w.quiet(), pure.quiet());
        }
        assert!(probes > 0);
        assert_eq!(w.counts.get().probes, probes);
    }

    #[test]
    fn raw_call_in_threads() {
        let (mut c, mut s) = pair(&Config {
            area: 4096,
            ..Config::default()
        })
        .expect("pair");
        let t = std::thread::spawn(move || {
            s.serve_raw(|key, buf, len| {
                buf[0] = buf[0].wrapping_add(key as u8);
                len
            })
        });
        for k in 0..100u16 {
            let r = c.call_raw(k, &[1, 2, 3]).expect("call");
            assert_eq!(r, &[1u8.wrapping_add(k as u8), 2, 3]);
        }
        drop(c);
        t.join().expect("join").expect("serve");
    }

    /// The loopback step of the test below: answers every posted request
    /// with its key added to the first byte (a server loop over
    /// [`ServerEnd::posted`]); counts the requests it answered.
    unsafe extern "C" fn step(arg: *mut (), _: u64) -> i64 {
        // SAFETY: the test passes its `(ServerEnd, u32)`, alive and used
        // by nothing else while the client calls.
        let (end, answered) = unsafe { &mut *arg.cast::<(ServerEnd, u32)>() };
        let mut t = end.posted();
        while let Ok((key, len)) = t.wait() {
            // SAFETY: the message buffer holds `capacity >= 1` bytes, ours
            // until the reply.
            unsafe { *t.buf().as_ptr() += key as u8 };
            *answered += 1;
            if t.reply(Status::Ok, len, 0..0).is_err() {
                break;
            }
        }
        0
    }

    #[test]
    fn a_loopback_answers_each_call_in_the_callers_thread() {
        let (mut c, s) = pair(&Config {
            area: 4096,
            ..Config::default()
        })
        .expect("pair");
        let mut server = (s, 0u32);
        // SAFETY: `server` outlives every call on `c` below (the loopback
        // is cleared before it drops) and is used only through the step.
        unsafe { c.set_loopback(Some((step, (&raw mut server).cast()))) };
        for k in 0..10u16 {
            assert_eq!(c.call_raw(k, &[1, 2]).expect("call"), &[1 + k as u8, 2]);
        }
        // Each call's step answered exactly its own request: the look
        // for a next one found none and returned.
        // SAFETY: no call runs now.
        unsafe { c.set_loopback(None) };
        assert_eq!(server.1, 10);
    }

    #[test]
    fn a_loopback_that_answers_nothing_is_an_error_not_a_hang() {
        unsafe extern "C" fn silent(_: *mut (), _: u64) -> i64 {
            0
        }
        let (mut c, _s) = pair(&Config::default()).expect("pair");
        // SAFETY: the step touches nothing.
        unsafe { c.set_loopback(Some((silent, std::ptr::null_mut()))) };
        assert!(matches!(
            c.call_raw(1, &[0]),
            Err(CallError::Malformed("the loopback answered nothing"))
        ));
    }
}
