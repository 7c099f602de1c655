//! The lock of one endpoint handle's state: a `std::sync::Mutex` whose
//! poisoning is ignored.
//!
//! Every C API call on an endpoint takes its lock, so that calls from
//! several threads are serialized. A lock of our own that gives the lock
//! back with a plain store (one atomic read-modify-write a call instead of
//! the mutex's two) was tried: callgrind counted about as many
//! instructions a call and the round trip against the daemon on the idle machine moved
//! by less than its runs' spread (docs/benchmarks.md, "The C API's cost
//! per call, counted"), while a waiter had to spin and nap instead of
//! sleeping until it is woken; the standard mutex stays.
//!
//! No poisoning: a call that panics (caught at the C boundary) leaves the
//! state as the panic found it, as the C API's callers were served before
//! with the poison ignored.

use std::sync::{Mutex, MutexGuard, TryLockError};

/// A value behind a [`CallLock`].
pub struct CallLock<T>(Mutex<T>);

/// The lock, held; it is given back when this drops.
pub type CallGuard<'a, T> = MutexGuard<'a, T>;

impl<T> CallLock<T> {
    /// `value`, unlocked.
    pub const fn new(value: T) -> CallLock<T> {
        CallLock(Mutex::new(value))
    }

    /// The lock, if no one holds it.
    pub fn try_lock(&self) -> Option<CallGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The lock, sleeping until it is free.
    pub fn lock(&self) -> CallGuard<'_, T> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
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
