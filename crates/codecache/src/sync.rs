//! The synchronization primitives of the lock-free protocols, from `loom`
//! when the crate is built with `--cfg loom` (so that the loom models in
//! `tests/loom.rs` explore every interleaving of the real code) and from
//! `std` otherwise.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

pub(crate) use std::sync::atomic::Ordering;

/// Statistics counters: never part of a protocol (relaxed increments that
/// order nothing), so they stay `std` atomics under loom too, which keeps
/// them out of the models' state space.
pub(crate) use std::sync::atomic::{AtomicU64 as StatU64, AtomicUsize as StatUsize};

/// Locks `m`, counting the acquisition in `contended` when another thread
/// held it (the paper's "lock contention instances", Table 3). A poisoned
/// lock is taken anyway: every structure behind these locks is left
/// consistent between statements that can panic.
pub(crate) fn lock<'a, T>(m: &'a Mutex<T>, contended: &StatU64) -> MutexGuard<'a, T> {
    match m.try_lock() {
        Ok(g) => g,
        Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => {
            contended.fetch_add(1, Ordering::Relaxed);
            m.lock().unwrap_or_else(|p| p.into_inner())
        }
    }
}
