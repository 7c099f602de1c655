//! loom models of the biased lock (`unet::biased`): every interleaving of
//! a thread that takes the lock, gets the bias and takes it again by the
//! fast path, against a thread that takes it from the biased one, with
//! the protected value in a cell that loom watches for data races.
//!
//! What they prove: under the C++20/Rust memory model, with `membarrier`
//! modelled as a SeqCst fence on the revoker's side and one where the
//! biased thread's compiler fence is, the fast path and the revocation
//! exclude each other and order the holders' accesses (loom reports any
//! two unordered accesses to the cell), for these two threads and these
//! few steps, including the `try_lock` that fails and leaves the
//! revocation pending. What they do not prove: that `membarrier` is such
//! a fence (the kernel's contract: every running thread of the process
//! executes a full barrier during the call, which is at least as strong
//! as a SeqCst fence placed in its code where its compiler fence is);
//! runs longer than the models' (loom bounds the threads and steps); the
//! bias policy's counts; the waiting's fairness.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p unet --release --test loom_biased`.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use unet::biased::RawBiased;

/// The two threads' tokens (a token's low 8 bits are 0).
const T1: u64 = 1 << 8;
const T2: u64 = 2 << 8;

struct Locked {
    lock: RawBiased,
    value: UnsafeCell<u64>,
}

impl Locked {
    fn add(&self, me: u64) {
        // SAFETY: each model thread passes its own token (T1 or T2).
        let h = unsafe { self.lock.lock_as(me) };
        // SAFETY: loom checks that no other access to the cell races.
        self.value.with_mut(|p| unsafe { *p += 1 });
        // SAFETY: `me` holds the lock, on this thread, taken as `h` says.
        unsafe { self.lock.unlock(h) };
    }

    fn try_add(&self, me: u64) -> bool {
        // SAFETY: each model thread passes its own token (T1 or T2).
        let Some(h) = (unsafe { self.lock.try_lock_as(me) }) else {
            return false;
        };
        // SAFETY: loom checks that no other access to the cell races.
        self.value.with_mut(|p| unsafe { *p += 1 });
        // SAFETY: `me` holds the lock, on this thread, taken as `h` says.
        unsafe { self.lock.unlock(h) };
        true
    }
}

fn new() -> Arc<Locked> {
    Arc::new(Locked {
        lock: RawBiased::new(),
        value: UnsafeCell::new(0),
    })
}

/// Thread 1 takes the lock twice (the bias after the first, the fast path
/// the second time); thread 2 takes it once, revoking the bias if it finds
/// one. Both increments of each survive.
#[test]
fn fast_path_against_revoker() {
    loom::model(|| {
        let l = new();
        let l1 = l.clone();
        let owner = thread::spawn(move || {
            l1.add(T1);
            l1.add(T1);
        });
        l.add(T2);
        owner.join().unwrap();
        // SAFETY: both threads are done.
        assert_eq!(l.value.with(|p| unsafe { *p }), 3);
    });
}

/// As [`fast_path_against_revoker`] with a `try_lock` that may fail
/// against the biased holder (leaving the revocation pending), and the
/// biased thread taking it again after that.
#[test]
fn try_lock_against_the_biased_holder() {
    loom::model(|| {
        let l = new();
        let l1 = l.clone();
        let owner = thread::spawn(move || {
            l1.add(T1);
            l1.add(T1);
            l1.add(T1);
        });
        let n = u64::from(l.try_add(T2));
        owner.join().unwrap();
        l.add(T2);
        // SAFETY: the other thread is done.
        assert_eq!(l.value.with(|p| unsafe { *p }), 4 + n);
    });
}
