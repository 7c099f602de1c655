//! The engine's endpoint table: its ports by slot, read on every frame
//! without a lock and without touching a reference count, replaced whole
//! by the control operations.
//!
//! The table is an `Arc<Vec<Option<Arc<Port>>>>` behind a
//! `crossbeam_epoch::Atomic` (epoch-based reclamation, as in
//! crossbeam-epoch's own documentation):
//!
//! - A reader pins the calling thread ([`crossbeam_epoch::pin`]), loads the
//!   table with acquire ordering and uses it only while pinned
//!   ([`Ports::with`]): a pin and an unpin are a handful of thread-local
//!   operations, where an `ArcSwap` load (the table's former home) touched
//!   a debt slot list on every frame.
//! - A writer (the control operations, serialised by the engine's control
//!   lock) swaps in a new table with acq-rel ordering and hands the old one
//!   to the epoch's garbage ([`crossbeam_epoch::Guard::defer_destroy`]):
//!   it is dropped once every thread pinned when it was swapped out has
//!   unpinned, so no reader ever sees a table, or a port through it, that
//!   has been freed. The garbage is flushed at once, so that a removed
//!   endpoint's memory goes back as soon as the threads move on.
//! - [`Ports::load_full`] clones the table's `Arc` while pinned: a
//!   snapshot for a round over every endpoint, or for a control operation.
//!
//! **Threads asleep for want of endpoints.** An engine thread of an engine
//! without endpoints ([`super::Engine::start`]) sleeps in
//! [`Ports::sleep_while_empty`] instead of polling: on its own [`Bell`] (an
//! `eventfd`), the transport's poll descriptor if it has one, and a
//! timeout. Every [`Ports::store`] rings the bell of every sleeping thread,
//! and so does [`Ports::wake`] ([`super::Engine::stop`], after it set the
//! engine's stop flag). No ring is lost between a thread's last look and
//! its sleep:
//!
//! - A sleeper hangs up its bell (its descriptor in the sleepers' list)
//!   and silences it, both under the sleepers' lock, and only then looks
//!   at the table and at what its caller tests (the stop flag); it sleeps
//!   only if the table has no port and the test says so.
//! - A waker changes the table (or sets the flag) first and then rings
//!   every bell hung up, under the same lock.
//! - If the waker took the lock first, its change happened before the
//!   sleeper's look (the lock orders them), which sees it and does not
//!   sleep. If the sleeper took it first, the bell was silenced before it
//!   rang, so it is still ringing (readable) when the sleeper polls it,
//!   and `poll(2)` returns at once.
//! - A bell is rung only while it hangs in the list, under the lock, and a
//!   sleeper takes its bell down before it returns: no descriptor is
//!   written after its owner closed it.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_epoch::{self as epoch, Atomic, Owned};

use super::{Port, lock};

/// One table: a port per slot (`None`: free).
pub(super) type Table = Vec<Option<Arc<Port>>>;

/// The engine's endpoint table (see the module documentation).
pub(super) struct Ports {
    table: Atomic<Arc<Table>>,
    /// The bells of the threads asleep in [`Ports::sleep_while_empty`]
    /// now (see the module documentation).
    sleepers: Mutex<Vec<RawFd>>,
}

/// An engine thread's doorbell: an `eventfd` it sleeps on, rung when the
/// endpoint table changes or the engine stops (see the module
/// documentation).
pub(super) struct Bell(OwnedFd);

impl Bell {
    /// A new bell, or `None` if the system refuses an `eventfd` (the
    /// thread then polls instead of sleeping).
    pub(super) fn new() -> Option<Bell> {
        // SAFETY: a plain system call with no pointer; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Some(Bell(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Rings the bell whose descriptor is `fd`, which is open (the caller
    /// holds the sleepers' lock and found it in the list).
    fn ring(fd: RawFd) {
        let one = 1u64;
        // SAFETY: writes the 8 bytes of `one`, which lives across the call,
        // to `fd`, an eventfd its owner keeps open while it is in the list.
        // The result is not needed: the one failure of a non-blocking
        // eventfd write, `EAGAIN`, says the counter is full, so it rings.
        let _ = unsafe { libc::write(fd, (&raw const one).cast(), 8) };
    }

    /// Silences the bell (a non-blocking read of its counter).
    fn silence(&self) {
        let mut n = 0u64;
        // SAFETY: reads at most 8 bytes into `n`, which lives across the
        // call, from this bell's own open descriptor. `EAGAIN` (it was not
        // ringing) is the other outcome, and is what was wanted.
        let _ = unsafe { libc::read(self.0.as_raw_fd(), (&raw mut n).cast(), 8) };
    }
}

impl Ports {
    /// An empty table.
    pub(super) fn new() -> Ports {
        Ports {
            table: Atomic::new(Arc::new(Vec::new())),
            sleepers: Mutex::new(Vec::new()),
        }
    }

    /// Runs `f` on the table as it is now. Nothing is counted or cloned:
    /// the thread stays pinned while `f` runs, which keeps the table and
    /// its ports alive. `f` may block (a lock, a transport's system call):
    /// that only delays the freeing of tables replaced meanwhile.
    #[inline]
    pub(super) fn with<R>(&self, f: impl FnOnce(&[Option<Arc<Port>>]) -> R) -> R {
        let guard = epoch::pin();
        let t = self.table.load(Ordering::Acquire, &guard);
        // SAFETY: the pointer is never null (set by `new` and `store` from
        // an `Owned`), and the table it points to was stored with release
        // ordering before this acquire load found it. It is freed only
        // through `defer_destroy` after it was swapped out, which waits
        // until every thread pinned at that time, this one included, has
        // unpinned; `guard` keeps this thread pinned until `f` returns, and
        // the reference does not outlive `f`.
        let table = unsafe { t.deref() };
        f(table)
    }

    /// A snapshot of the table (one reference count taken).
    pub(super) fn load_full(&self) -> Arc<Table> {
        let guard = epoch::pin();
        let t = self.table.load(Ordering::Acquire, &guard);
        // SAFETY: as in `with`: non-null, and alive while `guard` pins.
        Arc::clone(unsafe { t.deref() })
    }

    /// Replaces the table (a control operation, under the engine's
    /// control lock).
    pub(super) fn store(&self, next: Arc<Table>) {
        let guard = epoch::pin();
        let old = self.table.swap(Owned::new(next), Ordering::AcqRel, &guard);
        // SAFETY: `old` is no longer reachable from `table`: readers that
        // start from now on load the new one. Readers that loaded `old` did
        // so while pinned, and `defer_destroy` drops it only after all of
        // them have unpinned. It is destroyed once: it left the table here,
        // in the one swap that took it out.
        unsafe { guard.defer_destroy(old) };
        guard.flush();
        drop(guard);
        // The threads asleep for want of endpoints look again (after the
        // swap: see the module documentation).
        self.wake();
    }

    /// Whether the table has no port (a look without a lock, which
    /// [`Ports::sleep_while_empty`] makes again where it counts).
    pub(super) fn is_empty(&self) -> bool {
        self.with(|t| t.iter().all(Option::is_none))
    }

    /// Rings the bell of every thread asleep in
    /// [`Ports::sleep_while_empty`]: called after a change they must see
    /// (the table's, in [`Ports::store`]; the engine's stop flag).
    pub(super) fn wake(&self) {
        for &fd in lock(&self.sleepers).iter() {
            Bell::ring(fd);
        }
    }

    /// Puts the calling thread to sleep on `bell` while the table has no
    /// port and `still` says so: until the bell rings ([`Ports::wake`]),
    /// `fd` (the transport's poll descriptor, if any) turns readable,
    /// `timeout` passes or a signal arrives. Returns at once if the table
    /// has a port or `still` is false when looked at, after the bell was
    /// hung up (see the module documentation: a change made before a
    /// [`Ports::wake`] is never missed).
    pub(super) fn sleep_while_empty(
        &self,
        bell: &Bell,
        fd: Option<RawFd>,
        timeout: Duration,
        still: impl FnOnce() -> bool,
    ) {
        let mine = bell.0.as_raw_fd();
        {
            let mut sleepers = lock(&self.sleepers);
            sleepers.push(mine);
            bell.silence();
        }
        // Not pinned while asleep: the look is over before the poll.
        if self.is_empty() && still() {
            let mut fds = [mine, fd.unwrap_or(-1)].map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: `fds` is an array of two initialized `pollfd`s that
            // lives across the call, and its length is passed. A negative
            // descriptor (no transport descriptor) is ignored by poll(2);
            // the transport's, if given, stays open while the engine lives,
            // which the calling thread holds. Every outcome (ready, timeout,
            // `EINTR`) is the same to the caller: it looks again.
            let _ = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        }
        let mut sleepers = lock(&self.sleepers);
        if let Some(i) = sleepers.iter().position(|&s| s == mine) {
            sleepers.swap_remove(i);
        }
    }
}

impl Drop for Ports {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader or writer can reach the table any
        // more (readers borrow the engine, which owns it), so it is taken
        // out and dropped here, once; tables swapped out earlier are the
        // epoch's to drop.
        unsafe {
            let t = std::mem::take(&mut self.table);
            drop(t.into_owned());
        }
    }
}
