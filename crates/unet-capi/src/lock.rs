//! The lock of one endpoint handle's state: a flag taken with one atomic
//! compare-and-swap and given back with a plain release store.
//!
//! Every C API call on an endpoint takes its lock, so that calls from
//! several threads are serialized. `std::sync::Mutex` costs two atomic
//! read-modify-writes a call (a compare-and-swap to lock, a swap to
//! unlock, which must learn whether to wake a sleeper), and on this
//! machine's cores each costs more than the rest of the call's
//! bookkeeping. Here unlocking is a store: a thread that finds the lock
//! taken does not sleep on a futex to be woken but spins briefly, then
//! yields, then sleeps in short naps until the holder lets go. That wait
//! is rare (two threads calling on one endpoint at once) and bounded by
//! the holder's call, a receive's timeout included.
//!
//! No poisoning: a call that panics (caught at the C boundary) leaves the
//! state as the panic found it, as the C API's callers were served before
//! with the poison ignored.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A value behind a [`CallLock`].
pub struct CallLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `CallGuard`, and at most one
// exists at a time (`locked` is taken by a successful compare-and-swap and
// given back only when that guard drops), so sharing the lock between
// threads shares the value as a `Mutex` does: it needs `T: Send` only.
unsafe impl<T: Send> Sync for CallLock<T> {}

/// The lock, held; it is given back when this drops.
pub struct CallGuard<'a, T> {
    lock: &'a CallLock<T>,
}

impl<T> CallLock<T> {
    /// `value`, unlocked.
    pub const fn new(value: T) -> CallLock<T> {
        CallLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// The lock, if no one holds it.
    pub fn try_lock(&self) -> Option<CallGuard<'_, T>> {
        // Looked at before the compare-and-swap, so that a waiter does not
        // take the line from the holder for nothing.
        (!self.locked.load(Ordering::Relaxed)
            && self
                .locked
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok())
        // (`then`, not `then_some`: a guard made and dropped on failure
        // would give back a lock someone else holds.)
        .then(|| CallGuard { lock: self })
    }

    /// The lock, waiting for it: spins, then yields, then naps of 50 µs.
    pub fn lock(&self) -> CallGuard<'_, T> {
        let mut tries = 0u32;
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            tries = tries.saturating_add(1);
            if tries < 64 {
                std::hint::spin_loop();
            } else if tries < 1024 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

impl<T> Drop for CallGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

impl<T> std::ops::Deref for CallGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (see `Sync` above): no other
        // reference to the value exists while it lives.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> std::ops::DerefMut for CallGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes this the only use of
        // the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn one_holder_at_a_time() {
        let l = CallLock::new(0u64);
        let g = l.lock();
        assert!(l.try_lock().is_none(), "held");
        drop(g);
        assert!(l.try_lock().is_some(), "given back");
    }

    #[test]
    fn increments_from_four_threads_are_not_lost() {
        let l = Arc::new(CallLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 80_000);
    }
}
