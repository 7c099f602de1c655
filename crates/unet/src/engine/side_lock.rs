//! The lock of an endpoint's transmit and receive sides: a futex lock
//! without poisoning, taken twice per message on the path without applet.
//!
//! `std::sync::Mutex` records a panic of the holder (poisoning): its guard
//! asks whether the thread is panicking when it is made and again when it
//! drops, about ten instructions per lock and unlock that callgrind
//! counted on the short message path (two locks per message). The engine
//! never used that record: every `lock` took a poisoned lock as is,
//! because every structure behind these locks (`TxSide`, `RxSide`) is
//! consistent between the statements that can panic: their queues publish
//! an index only after the descriptor is whole, a counter is one store, and
//! an applet's own state is the applet's (its traps are values, not
//! panics). So this lock keeps the semantics the engine had (a panic while
//! it is held leaves the value as the panic found it, and the next holder
//! takes it), without the cost of recording what nobody reads.
//!
//! The protocol is the standard mutex's on Linux: 0 unlocked, 1 locked,
//! 2 locked with (possibly) a sleeper; a waiter spins briefly, then sleeps
//! on the word with `FUTEX_WAIT` and is woken by the unlock that sees 2.
//! This module owns the `unsafe` of the lock (the value's cell and the
//! futex calls).

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// A value behind a lock without poisoning.
pub(crate) struct SideLock<T> {
    state: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and at most one guard
// exists at a time (the state word's acquire/release protocol), so sharing
// the lock between threads hands the value from one thread to another, as
// a `Mutex<T>` does: `T: Send` is what that needs.
unsafe impl<T: Send> Send for SideLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SideLock<T> {}

/// The lock, held; it is given back when this drops.
pub(crate) struct SideGuard<'a, T> {
    lock: &'a SideLock<T>,
    /// Send and Sync as `&mut T` is: a guard shared between threads shares
    /// the value.
    _value: PhantomData<&'a mut T>,
}

impl<T> SideLock<T> {
    /// `value`, unlocked.
    pub(crate) const fn new(value: T) -> SideLock<T> {
        SideLock {
            state: AtomicU32::new(UNLOCKED),
            value: UnsafeCell::new(value),
        }
    }

    /// The lock, if no one holds it.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<SideGuard<'_, T>> {
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| SideGuard {
                lock: self,
                _value: PhantomData,
            })
    }

    /// The lock, sleeping until it is free.
    #[inline]
    pub(crate) fn lock(&self) -> SideGuard<'_, T> {
        if self
            .state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SideGuard {
            lock: self,
            _value: PhantomData,
        }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        // A holder usually gives the lock back within a message: spin a
        // little before sleeping.
        for _ in 0..100 {
            if self.state.load(Ordering::Relaxed) == UNLOCKED
                && self
                    .state
                    .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return;
            }
            core::hint::spin_loop();
        }
        // From here on the word says "contended" whenever we take it, so
        // that our unlock wakes whoever slept meanwhile.
        while self.state.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            futex_wait(&self.state, CONTENDED);
        }
    }
}

impl<T: Default> Default for SideLock<T> {
    fn default() -> Self {
        SideLock::new(T::default())
    }
}

impl<T> core::fmt::Debug for SideLock<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SideLock")
            .field("locked", &(self.state.load(Ordering::Relaxed) != UNLOCKED))
            .finish_non_exhaustive()
    }
}

impl<T> Deref for SideGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock (it was made only by a
        // successful acquire and gives it back only when it drops), so no
        // other reference to the value exists while it lives.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SideGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference
        // through the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SideGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.lock.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            futex_wake_one(&self.lock.state);
        }
    }
}

/// Sleeps while `word` holds `expected` (or until a wake, or spuriously).
fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: FUTEX_WAIT reads the 32-bit word at a valid, aligned address
    // (a live `AtomicU32`) and has no other memory effect; a null timeout
    // sleeps without a limit. Errors (EAGAIN when the word changed, EINTR)
    // return to the caller's loop, which checks the word again.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            core::ptr::null::<libc::timespec>(),
        );
    }
}

#[cold]
#[inline(never)]
fn futex_wake_one(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE only wakes sleepers on the word's address (a live
    // `AtomicU32`); it reads and writes no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn one_holder_at_a_time() {
        let l = SideLock::new(0u64);
        let g = l.lock();
        assert!(l.try_lock().is_none(), "held");
        drop(g);
        assert!(l.try_lock().is_some(), "given back");
    }

    #[test]
    fn increments_from_four_threads_are_not_lost() {
        // Contended: the spin and the futex sleep and wake are all taken.
        let l = Arc::new(SideLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000 {
                        let mut g = l.lock();
                        *g += 1;
                        if i % 1000 == 0 {
                            // Held across a sleep: the others go to sleep
                            // on the futex and must be woken.
                            std::thread::sleep(std::time::Duration::from_micros(50));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 80_000);
    }

    #[test]
    fn a_panic_while_held_leaves_the_lock_usable() {
        let l = Arc::new(SideLock::new(7u64));
        let l2 = l.clone();
        let r = std::thread::spawn(move || {
            let mut g = l2.lock();
            *g = 8;
            panic!("while held");
        })
        .join();
        assert!(r.is_err());
        // Given back by the guard's drop during unwinding, the value as
        // the panic left it (no poisoning, as the engine's `lock` did).
        assert_eq!(*l.try_lock().expect("given back"), 8);
    }
}
