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

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crossbeam_epoch::{self as epoch, Atomic, Owned};

use super::Port;

/// One table: a port per slot (`None`: free).
pub(super) type Table = Vec<Option<Arc<Port>>>;

/// The engine's endpoint table (see the module documentation).
pub(super) struct Ports {
    table: Atomic<Arc<Table>>,
}

impl Ports {
    /// An empty table.
    pub(super) fn new() -> Ports {
        Ports {
            table: Atomic::new(Arc::new(Vec::new())),
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
