//! The lock of an endpoint's transmit side and of its receive side
//! ([`SideLock`]): one locked instruction to take it, a plain store to
//! release it.
//!
//! A message on the path without applet takes two of these locks (the
//! sender's transmit side, the receiver's receive side), and the round
//! trip between two threads is bound by that path's latency, not by its
//! instruction count: a locked read-modify-write on x86 waits for every
//! earlier store to leave the store buffer and holds back every later
//! load. `parking_lot`'s mutex, used before, needs one on each side (the
//! release is a compare-and-swap, so that it learns whether a thread is
//! parked and must be woken); with the four of a message taken out
//! altogether (an unsound experiment, for the measure only) the `loop`
//! round trip at 0 B fell from 0.150 to 0.106 µs, and the same path on
//! one thread from 0.068 to 0.034 µs (docs/benchmarks.md, "The small-message
//! round trip bound by locked instructions"). A waiter that never parks
//! needs no wake-up, so the release is a store with release ordering:
//! an ordinary `mov` on x86, no fence.
//!
//! The protocol:
//!
//! - `locked` is `true` while a guard exists. Taking it is a
//!   compare-and-swap from `false` to `true` with acquire ordering: it
//!   succeeds for one thread at a time, and that thread sees every write
//!   the previous holder made before its release.
//! - Releasing is a store of `false` with release ordering, by the guard's
//!   drop (also on unwinding: a panic inside leaves the lock free, and the
//!   value as it was, as `parking_lot`'s did: nothing is poisoned, and the
//!   engine keeps every structure behind these locks consistent between
//!   statements that can panic).
//! - A thread that finds it taken reads `locked` (without writing its
//!   line) until it looks free, then tries again: it spins with a pause
//!   hint, and after [`crate::wait::SPINS_BEFORE_YIELD`] polls yields its
//!   core at each further poll, so that a holder that was preempted, or
//!   runs an applet for as long as its budget allows, gets the core back.
//!   The holders are the engine's own paths, each bounded (a delivery, a
//!   pass over a transmit queue within its budget, an applet invocation
//!   within its time budget, a control operation). Which locks are taken
//!   together, and in which order, is unchanged: the exclusion is the
//!   same as the mutex's, so no wait can cycle that could not before.
//!
//! The guard and the protected value are `lock_api`'s (re-exported by
//! `parking_lot`), so the only `unsafe` here is the raw lock's contract.

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::lock_api::{GuardSend, RawMutex};

use crate::wait::Backoff;

/// The raw lock behind [`SideLock`] (see the module's protocol).
#[derive(Debug)]
pub(crate) struct RawSideLock {
    locked: AtomicBool,
}

impl RawSideLock {
    /// Waits until the lock looks free, then tries to take it, until it
    /// does. Out of line: the uncontended lock stays one instruction with
    /// its test in the caller.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut wait = Backoff::default();
        loop {
            while self.locked.load(Ordering::Relaxed) {
                wait.snooze();
            }
            if self.try_lock() {
                return;
            }
        }
    }
}

// SAFETY: `lock` and `try_lock` return (true) only after the
// compare-and-swap from `false` to `true` succeeded, which one thread at
// a time can do until `unlock` stores `false`: the lock is exclusive.
// Acquire on the successful swap and release on the store order the
// holders' accesses. `unlock` is called only by the holder (the guard's
// drop, `lock_api`'s contract), so no other thread's lock is released.
// The guard may move to another thread (`GuardSend`): the lock does not
// record its holder.
unsafe impl RawMutex for RawSideLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawSideLock = RawSideLock {
        locked: AtomicBool::new(false),
    };
    type GuardMarker = GuardSend;

    #[inline]
    fn lock(&self) {
        if !self.try_lock() {
            self.lock_contended();
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
}

/// The lock of an endpoint's transmit side and of its receive side (see
/// the module's documentation).
pub(crate) type SideLock<T> = parking_lot::lock_api::Mutex<RawSideLock, T>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn one_holder_at_a_time_and_free_again_after_the_guard() {
        let l = SideLock::new(5u32);
        let g = l.lock();
        assert!(l.try_lock().is_none(), "taken while a guard lives");
        drop(g);
        let mut g = l.try_lock().expect("free once the guard is dropped");
        *g += 1;
        drop(g);
        assert_eq!(*l.lock(), 6);
    }

    #[test]
    fn a_panic_inside_leaves_it_free_and_the_value_as_it_was() {
        let l = Arc::new(SideLock::new(vec![1u8]));
        let l2 = l.clone();
        let r = std::thread::spawn(move || {
            let mut g = l2.lock();
            g.push(2);
            panic!("holder panics");
        })
        .join();
        assert!(r.is_err());
        let g = l.try_lock().expect("released by the unwinding");
        assert_eq!(*g, [1, 2]);
    }

    /// Threads that each add to a plain (non-atomic) counter in two steps
    /// under the lock, some through `lock` and some through `try_lock`:
    /// without exclusion, updates are lost.
    #[test]
    fn no_update_is_lost_under_contention() {
        const THREADS: u64 = 4;
        const EACH: u64 = 20_000;
        let l = Arc::new(SideLock::new(0u64));
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || {
                    let mut done = 0;
                    while done < EACH {
                        let g = if t % 2 == 0 {
                            Some(l.lock())
                        } else {
                            l.try_lock()
                        };
                        if let Some(mut g) = g {
                            let v = *g;
                            for _ in 0..(done % 7) {
                                std::hint::spin_loop();
                            }
                            *g = std::hint::black_box(v) + 1;
                            done += 1;
                        }
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(*l.lock(), THREADS * EACH);
    }

    #[test]
    fn a_waiter_gets_it_once_the_holder_releases() {
        let l = Arc::new(SideLock::new(0u32));
        let g = l.lock();
        let l2 = l.clone();
        let h = std::thread::spawn(move || {
            *l2.lock() += 1;
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!h.is_finished(), "the waiter waits while the lock is held");
        drop(g);
        h.join().unwrap();
        assert_eq!(*l.lock(), 1);
    }
}
