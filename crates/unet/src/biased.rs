//! A lock biased to the thread that keeps taking it ([`RawBiased`]): that
//! thread takes and releases it with plain loads and stores, no locked
//! instruction; any other thread takes it from the biased one with
//! `membarrier(2)`, once, and the lock then works as an ordinary one.
//!
//! Why: a message on the path without applet takes two locks (the
//! sender's transmit side, the receiver's receive side), each taken and
//! released by the same thread message after message, and the `loop`
//! round trip between two threads is bound by that path's latency, most
//! of it those four locked instructions (a locked read-modify-write on x86
//! waits for every earlier store to leave the store buffer). With all four
//! taken out (unsound, measured only) the 0 B round trip fell from 0.150
//! to 0.106 µs; a cheaper release alone (a plain store, still a
//! compare-and-swap to take it) lost between two threads (docs/benchmarks.md,
//! "The small-message round trip bound by locked instructions"). So the
//! steady state must have none, which an ordinary lock cannot do: its
//! holder must announce itself and then check that nobody else came in,
//! a store followed by a load of another location, and only a full fence
//! (a locked instruction) keeps the load from passing the store. The
//! biased lock moves that fence to the rare side: the revoker asks the
//! kernel for a barrier on every thread of the process
//! (`MEMBARRIER_CMD_PRIVATE_EXPEDITED`), which acts as if the biased
//! thread had executed a full fence at some point between the revoker's
//! call and its return (an asymmetric Dekker protocol).
//!
//! # The protocol
//!
//! Fields: `word` (0: free; else the token of the thread holding it the
//! ordinary way), `bias` (0: none; else the biased thread's token and the
//! grant's index, see `pack`), `slots[g]` (1 while grant `g`'s thread
//! holds the lock by the fast path; written only by that thread),
//! `grants` (grants made so far), `pending` (a grant whose revocation has
//! begun and whose slot has not yet been seen 0), and the bias policy's
//! `last`, `streak`, `revoked` (read and written only by the holder of
//! `word`).
//!
//! - **Fast path** (thread `t`, `bias = pack(t, g)`): `slots[g] = 1`
//!   (relaxed); a compiler fence (the code stays in this order; the
//!   hardware's order is the revoker's barrier's job); load `bias`
//!   (acquire, a plain `mov` on x86): still `pack(t, g)`: `t` holds the
//!   lock. Otherwise `slots[g] = 0` (release) and the slow path. Release:
//!   `slots[g] = 0` (release). No locked instruction either way. A thread
//!   that holds the lock already by this path (its slot is 1, read with a
//!   plain read: only `t` ever stores to it, `own_slot`) does not
//!   take it again: a nested `try_lock` fails, as an ordinary lock's does;
//!   one that holds it by `word` never finds the bias its own (below).
//! - **Slow path**: compare-and-swap `word` from 0 to the thread's token
//!   (acquire), spinning then yielding while it is taken. Holding `word`,
//!   the thread revokes a bias that is another thread's: `bias = 0`, then
//!   `membarrier` (once per grant: `pending` remembers the grant), then
//!   waits until `slots[g]` reads 0 (acquire); a `try_lock` that finds it
//!   still 1 gives `word` back and fails, leaving the revocation
//!   `pending` for the next holder. Release: `word = 0` (release). Once
//!   every grant is made and none is in force or pending, the lock is
//!   settled: taking it is the compare-and-swap and three loads of its
//!   own line, as an ordinary lock's.
//! - **Bias**: the holder of `word` that took it the slow way
//!   [`BIAS_AFTER`]`<< revoked` times in a row (the count doubles with
//!   each revocation) gets the bias: a fresh grant `g`, `bias = pack(t, g)`,
//!   and moves to its slot: `slots[g] = 1`, then `word = 0` (release), so
//!   a thread never holds `word` while the bias is its own, and the next
//!   taker of `word` sees the bias and the slot and waits.
//!   At most [`GRANTS`] grants in the lock's life: a lock that two threads
//!   share loses its bias a few times and then stays unbiased, one
//!   compare-and-swap per taking and never a system call per message.
//!   Without `membarrier` (the query fails, or registering does) there is
//!   no bias: the first holder settles the lock, an ordinary lock.
//!
//! # Why it is exclusive (the memory-ordering argument)
//!
//! Two holders by `word` exclude each other by the compare-and-swap. A
//! fast-path holder `t` and a `word` holder `r`: `r` cleared `bias` before
//! its barrier, `t` stored `slots[g] = 1` before loading `bias`. The
//! barrier is, for `t`, a full fence at some point of its execution during
//! `r`'s call (the kernel interrupts each running thread of the process
//! and has it execute a full barrier; a thread not running passed through
//! the scheduler's). If that point is before `t`'s store, `t`'s load of
//! `bias` comes after it and sees `r`'s 0 (or a later value, never
//! `pack(t, g)` again: grant indices are never reused): `t` takes the
//! slow path. If it is after `t`'s store, the store is visible to `r`'s
//! load after its barrier: `r` sees `slots[g] = 1` and waits for `t`'s
//! release. (The store buffering outcome, both missing each other, is
//! what the barrier forbids; in the loom model it is a SeqCst fence on
//! each side, and C++20/Rust's SeqCst fences forbid it the same way.)
//! A `word` holder that finds the revocation `pending` (begun by an
//! earlier holder, whose `try_lock` saw the slot still 1) is ordered after
//! that holder's barrier through `word`, so the same argument holds.
//!
//! What each holder sees: `t` is the only thread that held the lock since
//! its grant (made while `t` held `word`, after the previous holders
//! released it: acquire on the compare-and-swap; `t` went from `word` to
//! its slot with `slots[g] = 1` before releasing `word`, so the next
//! holder by `word` reads that 1 or `t`'s later release of it). A `word` holder after
//! a fast-path holder read the release store `slots[g] = 0` (every store
//! to a slot is a release, so whichever it reads, it synchronises with
//! `t`'s last release). Holders by `word` order each other by its
//! acquire/release.
//!
//! How the release knows its path: the taking returns a [`Held`], the
//! location to clear (the grant's slot or `word`), that the guard keeps;
//! the release is that one store and reads no token and no field. The
//! guard stays on the thread that took it: a slot is written only by its
//! grant's thread.
//!
//! A thread that exits while it holds the bias (not the lock) leaves its
//! slot 0: the next revoker's barrier finds nothing to wait for. A thread
//! that exits while holding the lock, by either path, leaves it held, as
//! any mutex would.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
#[cfg(loom)]
use std::sync::atomic::compiler_fence;
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, compiler_fence};

/// Grants in a lock's life (slots). Each revocation costs one
/// `membarrier`; after this many, the lock stays unbiased. A power of two
/// (a slot's index is masked), below 256 (`pack`).
pub const GRANTS: usize = 4;
const _: () = assert!(GRANTS.is_power_of_two() && GRANTS <= 256);

/// Slow-path takings in a row by one thread before it gets the bias (the
/// first time; each revocation doubles it).
#[cfg(not(loom))]
pub const BIAS_AFTER: u32 = 16;
/// Slow-path takings in a row by one thread before it gets the bias (the
/// model's: small, so its few steps reach the fast path).
#[cfg(loom)]
pub const BIAS_AFTER: u32 = 1;

/// The low bits of a token, 0 in every token: a grant's index in `bias`.
pub const TOKEN_LOW: u64 = 0xff;

/// `bias`'s value for thread `token`'s grant `g`: the token with the
/// index in its low 8 bits, which are 0 in a token (tokens count threads
/// in steps of 256: 56 bits never run out).
#[inline]
fn pack(token: u64, g: u32) -> u64 {
    token | u64::from(g)
}

/// The grant whose slot thread `me` may take by the fast path: `bias`'s
/// index if `b` is `me`'s bias. One exclusive or and one comparison: the
/// bits above the index are `me`'s exactly when the result is below
/// `GRANTS`, which also keeps the slot's index in bounds (`b == 0` gives
/// `me`, at least 256).
#[inline(always)]
fn own_grant(b: u64, me: u64) -> Option<usize> {
    let x = b ^ me;
    if x < GRANTS as u64 {
        Some(x as usize)
    } else {
        None
    }
}

/// The value of a slot that only the calling thread stores to, read
/// without an atomic load: as a plain read, x86 compares it in memory
/// (`cmp $0, slot`), where LLVM made the relaxed load its own `mov`
/// before the test (it folds no atomic load into another instruction),
/// one instruction of every taking by the fast path: xthr_count `LENT=1`
/// send 625.0 -> 621.0 a message (40 B, burst 1: the transmit side, the
/// applet, the peer's inbox; every send row -4), `unet-count` path-40
/// 319.0 -> 317.0 (the two sides' locks), standard-lent-40 added -2.0.
///
/// # Safety
///
/// Every store to `slot` is the calling thread's (so none races with this
/// read, and each happened before it): the slot of a grant made to this
/// thread.
#[inline(always)]
unsafe fn own_slot(slot: &AtomicU64) -> u64 {
    // SAFETY: no other thread stores to `slot` (the caller's contract),
    // so this read races with no write; other threads' loads of it are
    // atomic reads, which do not race with a read.
    #[cfg(not(loom))]
    return unsafe { *slot.as_ptr() };
    // SAFETY: as above; loom checks that every store happened before.
    #[cfg(loom)]
    return unsafe { slot.unsync_load() };
}

/// How a holder took the lock, for its release: the location whose store
/// of 0 releases it, its grant's slot (the fast path) or `word`. Kept by
/// the guard, it makes the release one store, with no thread token and no
/// load to tell the paths apart.
#[derive(Clone, Copy, Debug)]
pub struct Held<'a>(&'a AtomicU64);

/// A raw lock biased to the thread that keeps taking it (see the module's
/// protocol). [`BiasedLock`] puts a guard over it.
#[derive(Debug)]
pub struct RawBiased {
    word: AtomicU64,
    bias: AtomicU64,
    slots: [AtomicU64; GRANTS],
    grants: AtomicU32,
    pending: AtomicU64,
    last: AtomicU64,
    streak: AtomicU32,
    revoked: AtomicU32,
}

impl RawBiased {
    /// A free lock, not biased, that may become biased.
    #[cfg(not(loom))]
    pub const fn new() -> RawBiased {
        RawBiased::with_grants(0)
    }

    /// A free lock that never becomes biased: an ordinary lock (what
    /// every lock is where `membarrier` is missing).
    #[cfg(not(loom))]
    pub const fn unbiased() -> RawBiased {
        RawBiased::with_grants(GRANTS as u32)
    }

    #[cfg(not(loom))]
    const fn with_grants(grants: u32) -> RawBiased {
        RawBiased {
            word: AtomicU64::new(0),
            bias: AtomicU64::new(0),
            slots: [const { AtomicU64::new(0) }; GRANTS],
            grants: AtomicU32::new(grants),
            pending: AtomicU64::new(0),
            last: AtomicU64::new(0),
            streak: AtomicU32::new(0),
            revoked: AtomicU32::new(0),
        }
    }

    /// A free lock (loom's atomics are not `const`).
    #[cfg(loom)]
    pub fn new() -> RawBiased {
        RawBiased {
            word: AtomicU64::new(0),
            bias: AtomicU64::new(0),
            slots: core::array::from_fn(|_| AtomicU64::new(0)),
            grants: AtomicU32::new(0),
            pending: AtomicU64::new(0),
            last: AtomicU64::new(0),
            streak: AtomicU32::new(0),
            revoked: AtomicU32::new(0),
        }
    }

    /// Whether some thread holds the bias now (a hint: it may change at
    /// once unless the caller holds the lock).
    pub fn is_biased(&self) -> bool {
        self.bias.load(Ordering::Relaxed) != 0
    }

    /// Whether some thread holds the lock now (a hint, as `is_biased`).
    pub fn is_locked(&self) -> bool {
        let b = self.bias.load(Ordering::Relaxed);
        self.word.load(Ordering::Relaxed) != 0
            || (b != 0 && self.slot(b).load(Ordering::Relaxed) != 0)
    }

    /// How many times a bias was revoked (each one `membarrier`).
    pub fn revocations(&self) -> u32 {
        self.revoked.load(Ordering::Relaxed)
    }

    /// The fast path: `Some` if thread `me` holds the bias and now the
    /// lock (by its grant's slot).
    #[inline]
    fn try_fast(&self, me: u64) -> Option<Held<'_>> {
        let b = self.bias.load(Ordering::Relaxed);
        let slot = &self.slots[own_grant(b, me)?];
        // This thread holds the lock already by this path (its slot is 1
        // only while it does): a nested taking is not this one, and
        // `try_lock` then fails, as an ordinary lock's does. (It never
        // holds it by `word` while the bias is its own: the grant moves
        // its holder to the slot, see `holding`.)
        //
        // SAFETY: `slot` is grant `own_grant`'s, which was made to this
        // thread (`b`'s token is `me`, the caller's own: `lock_as`'s
        // contract), and only a grant's thread ever stores to its slot
        // (the grant's `slots[g] = 1`, this path's stores, and the release
        // of a guard, which stays on the thread that took it); grant
        // indices are never reused. So no store to it races with this
        // read, and every store to it was this thread's, before it.
        if unsafe { own_slot(slot) } != 0 {
            return None;
        }
        slot.store(1, Ordering::Relaxed);
        owner_fence();
        // Acquire: a plain load on x86 that keeps the critical section's
        // accesses after it (the data itself was last written by this
        // thread, see the module's documentation).
        if self.bias.load(Ordering::Acquire) == b {
            return Some(Held(slot));
        }
        // Release, like every store to a slot: a revoker that reads this
        // 0 synchronises with this thread's last critical section.
        slot.store(0, Ordering::Release);
        None
    }

    /// Takes the lock as thread `me`, waiting while another thread holds
    /// it. The result says how it was taken, for [`RawBiased::unlock`].
    /// Always inlined: the engine's delivery of a message sent in this
    /// process (`Engine::send_direct_locked`, itself inlined into the
    /// sender's body) otherwise called it, a frame of its own for the
    /// receive lock on every message.
    ///
    /// # Safety
    ///
    /// `me` is the calling thread's own token ([`token`], or
    /// [`Me::token`]): never 0, its low 8 bits 0, and never another
    /// thread's. With another thread's, two threads could both hold the
    /// lock by the bias's fast path.
    #[inline(always)]
    pub unsafe fn lock_as(&self, me: u64) -> Held<'_> {
        if let Some(h) = self.try_fast(me) {
            return h;
        }
        if self
            .word
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            && let Some(h) = self.won_word(me, true)
        {
            return h;
        }
        self.lock_slow(me)
    }

    /// Takes the lock as thread `me` if no other thread holds it now.
    ///
    /// # Safety
    ///
    /// As for [`RawBiased::lock_as`]: `me` is the calling thread's token.
    #[inline]
    pub unsafe fn try_lock_as(&self, me: u64) -> Option<Held<'_>> {
        if let Some(h) = self.try_fast(me) {
            return Some(h);
        }
        self.word
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        self.won_word(me, false)
    }

    /// [`RawBiased::try_lock_as`], always inlined, with only the bias
    /// holder's path in line (a few loads and a store); the rest, by
    /// `word`, out of line (`RawBiased::try_word`). The same steps in
    /// the same order, so the same guarantees.
    ///
    /// # Safety
    ///
    /// As for [`RawBiased::lock_as`]: `me` is the calling thread's token.
    #[inline(always)]
    pub unsafe fn try_lock_inline_as(&self, me: u64) -> Option<Held<'_>> {
        if let Some(h) = self.try_fast(me) {
            return Some(h);
        }
        self.try_word(me)
    }

    /// [`RawBiased::try_lock_as`] past its fast path: by `word`, without
    /// waiting.
    #[inline(never)]
    fn try_word(&self, me: u64) -> Option<Held<'_>> {
        self.word
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        self.won_word(me, false)
    }

    /// With `word` just taken by `me`'s compare-and-swap: how `me` holds
    /// the lock (by `word` alone where the lock is settled, else as
    /// [`RawBiased::holding`] says, `None` with `word` given back).
    #[inline(always)]
    fn won_word(&self, me: u64, wait: bool) -> Option<Held<'_>> {
        if self.settled() {
            return Some(Held(&self.word));
        }
        self.holding(me, wait)
    }

    /// With `word` held: whether the bias is done with for good (every
    /// grant made, none in force or being revoked), so that a lock threads
    /// share costs what an ordinary one does: the compare-and-swap, these
    /// three loads of its own line, the release.
    #[inline]
    fn settled(&self) -> bool {
        self.grants.load(Ordering::Relaxed) as usize >= GRANTS
            && (self.bias.load(Ordering::Relaxed) | self.pending.load(Ordering::Relaxed)) == 0
    }

    /// Releases the lock taken as `held` says.
    ///
    /// # Safety
    ///
    /// This thread holds the lock, and `held` is what the
    /// [`RawBiased::lock_as`] or [`RawBiased::try_lock_as`] that took it
    /// returned (on this thread); it is released once.
    #[inline]
    pub unsafe fn unlock(&self, held: Held<'_>) {
        // Release, `word`'s or the slot's (every store to a slot is one).
        held.0.store(0, Ordering::Release);
    }

    /// Grant `b`'s slot (`b` a `pack`ed bias; the mask keeps the index in
    /// bounds without a check, `GRANTS` being a power of two).
    #[inline(always)]
    fn slot(&self, b: u64) -> &AtomicU64 {
        &self.slots[b as usize & (GRANTS - 1)]
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self, me: u64) -> Held<'_> {
        let mut wait = Wait::default();
        loop {
            while self.word.load(Ordering::Relaxed) != 0 {
                wait.snooze();
            }
            if self
                .word
                .compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
                && let Some(h) = self.won_word(me, true)
            {
                return h;
            }
        }
    }

    /// With `word` held by `me`: revokes another thread's bias (waiting
    /// for its release if `wait`, else giving `word` back and failing if it
    /// still holds), then applies the bias policy. `Some` if `me` holds the
    /// lock (by `word`, with the grant to publish at its release if the
    /// policy made one); `None` (with `word` given back) if `me` already
    /// held it by the fast path, or if it is a `try_lock` and the biased
    /// thread holds it.
    #[inline(never)]
    fn holding(&self, me: u64, wait: bool) -> Option<Held<'_>> {
        let b = self.bias.load(Ordering::Relaxed);
        if own_grant(b, me).is_some_and(|g| self.slots[g].load(Ordering::Relaxed) != 0) {
            // This thread holds it by the fast path: a nested `try_lock`
            // fails; a nested `lock` waits for ever, as an ordinary
            // lock's does.
            self.word.store(0, Ordering::Release);
            return None;
        }
        if b != 0 && b & !TOKEN_LOW != me {
            self.bias.store(0, Ordering::Relaxed);
            barrier_all();
            self.pending.store(b, Ordering::Relaxed);
            self.revoked.fetch_add(1, Ordering::Relaxed);
        }
        let p = self.pending.load(Ordering::Relaxed);
        if p != 0 {
            let slot = self.slot(p);
            let mut w = Wait::default();
            while slot.load(Ordering::Acquire) != 0 {
                if !wait {
                    // The biased thread holds it: this `try_lock` fails,
                    // and the revocation stays pending for the next holder.
                    self.word.store(0, Ordering::Release);
                    return None;
                }
                w.snooze();
            }
            self.pending.store(0, Ordering::Relaxed);
        }
        if self.last.load(Ordering::Relaxed) == me {
            let s = self.streak.load(Ordering::Relaxed).saturating_add(1);
            self.streak.store(s, Ordering::Relaxed);
        } else {
            self.last.store(me, Ordering::Relaxed);
            self.streak.store(1, Ordering::Relaxed);
        }
        let g = self.grants.load(Ordering::Relaxed);
        if !barrier_ready() {
            // No bias in this process: an ordinary lock from now on.
            self.grants.store(GRANTS as u32, Ordering::Relaxed);
            return Some(Held(&self.word));
        }
        let need = BIAS_AFTER << self.revoked.load(Ordering::Relaxed).min(16);
        if self.bias.load(Ordering::Relaxed) == 0
            && (g as usize) < GRANTS
            && self.streak.load(Ordering::Relaxed) >= need
        {
            // The grant moves this holder from `word` to its slot: the slot
            // and the bias stored before `word`'s release, a revoker that
            // takes `word` next sees both (its compare-and-swap reads that
            // release) and waits for the slot. So a thread never holds
            // `word` while the bias is its own, and its release is the
            // slot's, as the fast path's.
            self.grants.store(g + 1, Ordering::Relaxed);
            let b = pack(me, g);
            self.bias.store(b, Ordering::Relaxed);
            let slot = self.slot(b);
            slot.store(1, Ordering::Relaxed);
            self.word.store(0, Ordering::Release);
            return Some(Held(slot));
        }
        Some(Held(&self.word))
    }
}

impl Default for RawBiased {
    fn default() -> RawBiased {
        RawBiased::new()
    }
}

/// The biased thread's side of the barrier: only the compiler's order.
#[cfg(not(loom))]
#[inline(always)]
fn owner_fence() {
    compiler_fence(Ordering::SeqCst);
}

/// In the model, the barrier the revoker forces on this thread: a SeqCst
/// fence (with the compiler fence, what it stands for).
#[cfg(loom)]
#[inline(always)]
fn owner_fence() {
    compiler_fence(Ordering::SeqCst);
    fence(Ordering::SeqCst);
}

/// In the model, `membarrier`: a SeqCst fence on the revoker's side (the
/// biased thread's is in [`owner_fence`]).
#[cfg(loom)]
fn barrier_all() {
    fence(Ordering::SeqCst);
}

#[cfg(loom)]
fn barrier_ready() -> bool {
    true
}

/// In the model, a wait that yields to loom's other threads. Not a unit
/// struct: its users make it with `default()`, as the ordinary build's
/// `wait::Backoff`.
#[cfg(loom)]
#[derive(Default)]
struct Wait(());

#[cfg(loom)]
impl Wait {
    fn snooze(&mut self) {
        loom::thread::yield_now();
    }
}

#[cfg(not(loom))]
use crate::wait::Backoff as Wait;

#[cfg(not(loom))]
mod membarrier {
    use std::sync::atomic::{AtomicU8, Ordering};

    const CMD_QUERY: libc::c_long = 0;
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    /// 0: not asked yet, 1: registered, 2: unavailable.
    static STATE: AtomicU8 = AtomicU8::new(0);

    fn call(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier(cmd, flags = 0, cpu_id = 0) reads and writes
        // no memory of this process; an unknown command fails with EINVAL.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_int,
            )
        }
    }

    /// Whether the process is registered for the private expedited
    /// barrier (registering, the first time, if the kernel offers it).
    /// Every bias is granted after this returned true, so every revocation
    /// may issue the barrier.
    pub(super) fn ready() -> bool {
        match STATE.load(Ordering::Acquire) {
            1 => true,
            2 => false,
            _ => {
                let q = call(CMD_QUERY);
                let ok = q >= 0
                    && q & CMD_PRIVATE_EXPEDITED != 0
                    && call(CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
                STATE.store(if ok { 1 } else { 2 }, Ordering::Release);
                ok
            }
        }
    }

    /// A full barrier on every running thread of the process.
    pub(super) fn all() {
        // Registered before any bias was granted (`ready`), and a
        // registration lasts the process's life, so this cannot fail with
        // EPERM; a failure would mean the kernel broke its contract.
        let r = call(CMD_PRIVATE_EXPEDITED);
        assert_eq!(r, 0, "membarrier failed after registration");
    }
}

#[cfg(not(loom))]
use membarrier::{all as barrier_all, ready as barrier_ready};

#[cfg(not(loom))]
std::thread_local! {
    /// This thread's token, 0 until its first lock.
    static TOKEN: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The calling thread's token for the locks (never 0, never another
/// thread's, its low 8 bits 0: [`TOKEN_LOW`]). A thread-local with a
/// constant initialiser and no destructor, its first-time path out of
/// line: reading it is one load and a test.
#[cfg(not(loom))]
#[inline]
pub fn token() -> u64 {
    match TOKEN.with(std::cell::Cell::get) {
        0 => new_token(),
        me => me,
    }
}

/// The calling thread's token ([`token`]), read once, for a path that
/// takes several locks (or compares an owner with it) in a row: each
/// reading is a load and a test that the compiler cannot merge across the
/// locks' atomic operations. Neither `Send` nor `Sync`, so it cannot
/// leave the thread that read it: whoever holds one holds this thread's
/// token, and a lock taken with it ([`BiasedLock::lock_as`]) is taken as
/// by [`BiasedLock::lock`].
///
/// ```compile_fail,E0277
/// // A token cannot be sent to another thread (it would take locks there
/// // as this one): `Me` is not `Send`.
/// let me = unet::biased::Me::current();
/// std::thread::spawn(move || me.token());
/// ```
///
/// ```
/// let me = unet::biased::Me::current();
/// assert_eq!(me.token(), unet::biased::token());
/// ```
#[cfg(not(loom))]
#[derive(Debug, Clone, Copy)]
pub struct Me {
    token: u64,
    _this_thread: core::marker::PhantomData<*const ()>,
}

#[cfg(not(loom))]
impl Me {
    /// The calling thread's token.
    #[inline]
    pub fn current() -> Me {
        Me {
            token: token(),
            _this_thread: core::marker::PhantomData,
        }
    }

    /// The token itself ([`token`]'s value on this thread).
    #[inline(always)]
    pub fn token(self) -> u64 {
        self.token
    }
}

/// The calling thread's token, made at its first lock.
#[cfg(not(loom))]
#[cold]
#[inline(never)]
fn new_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let me = NEXT.fetch_add(1, Ordering::Relaxed) << 8;
    TOKEN.with(|t| t.set(me));
    me
}

/// A mutex over [`RawBiased`]. Its guard remembers how it took the lock
/// (the grant's slot or `word`), so the release is one store (two with a
/// grant to publish) and reads no thread token; it stays on the thread
/// that took it (neither `Send` nor `Sync`), since a slot is written only
/// by its grant's thread.
#[cfg(not(loom))]
pub struct BiasedLock<T: ?Sized> {
    raw: RawBiased,
    data: core::cell::UnsafeCell<T>,
}

// SAFETY: the lock hands `&mut T` to one thread at a time (the module's
// argument), which may move the value between threads: `T: Send` is what
// a mutex needs, for `Send` and `Sync` alike.
#[cfg(not(loom))]
unsafe impl<T: ?Sized + Send> Send for BiasedLock<T> {}
// SAFETY: as for `Send`: shared access to the lock gives `&mut T` only
// through a guard, to one thread at a time.
#[cfg(not(loom))]
unsafe impl<T: ?Sized + Send> Sync for BiasedLock<T> {}

#[cfg(not(loom))]
impl<T> BiasedLock<T> {
    /// A free lock over `value`, not biased, that may become biased.
    pub const fn new(value: T) -> BiasedLock<T> {
        BiasedLock::from_raw(RawBiased::new(), value)
    }

    /// A lock over `value` with the given raw lock (e.g.
    /// [`RawBiased::unbiased`]).
    pub const fn from_raw(raw: RawBiased, value: T) -> BiasedLock<T> {
        BiasedLock {
            raw,
            data: core::cell::UnsafeCell::new(value),
        }
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> BiasedLock<T> {
    /// Takes the lock, waiting while another thread holds it (a nested
    /// `lock` on the holding thread waits for ever, as an ordinary
    /// lock's does).
    #[inline]
    pub fn lock(&self) -> BiasedGuard<'_, T> {
        self.lock_as(Me::current())
    }

    /// [`BiasedLock::lock`] with the calling thread's token read already.
    #[inline]
    pub fn lock_as(&self, me: Me) -> BiasedGuard<'_, T> {
        // SAFETY: a `Me` holds the token of the thread it was read on,
        // which is this one (it is neither `Send` nor `Sync`).
        self.guard(unsafe { self.raw.lock_as(me.token()) })
    }

    /// Takes the lock if no other thread holds it now, and this one does
    /// not already.
    #[inline]
    pub fn try_lock(&self) -> Option<BiasedGuard<'_, T>> {
        self.try_lock_as(Me::current())
    }

    /// [`BiasedLock::try_lock`] with the calling thread's token read
    /// already.
    #[inline]
    pub fn try_lock_as(&self, me: Me) -> Option<BiasedGuard<'_, T>> {
        // SAFETY: as in `lock_as`: `me` is this thread's token.
        unsafe { self.raw.try_lock_as(me.token()) }.map(|h| self.guard(h))
    }

    /// [`BiasedLock::try_lock_as`] with its bias holder's path always
    /// inlined ([`RawBiased::try_lock_inline_as`]): for a caller that takes
    /// the lock once a message and is itself out of line (the engine's
    /// direct delivery of a deferred `txPush`), where the call cost more
    /// than the path (25 instructions a message). Not `try_lock_as`
    /// itself: other callers, inlined into the engine's hot paths, grew
    /// with it.
    #[inline(always)]
    pub fn try_lock_inline_as(&self, me: Me) -> Option<BiasedGuard<'_, T>> {
        // SAFETY: as in `lock_as`: `me` is this thread's token.
        unsafe { self.raw.try_lock_inline_as(me.token()) }.map(|h| self.guard(h))
    }

    /// The value, through `&mut self`: no lock needed.
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// The raw lock, to read its state ([`RawBiased::is_biased`], ...).
    pub fn raw(&self) -> &RawBiased {
        &self.raw
    }

    #[inline]
    fn guard<'a>(&'a self, held: Held<'a>) -> BiasedGuard<'a, T> {
        BiasedGuard {
            lock: self,
            held,
            _on_this_thread: core::marker::PhantomData,
        }
    }
}

#[cfg(not(loom))]
impl<T: ?Sized + core::fmt::Debug> core::fmt::Debug for BiasedLock<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.try_lock() {
            Some(g) => f.debug_struct("BiasedLock").field("data", &&*g).finish(),
            None => f.write_str("BiasedLock { <locked> }"),
        }
    }
}

/// The lock held, by [`BiasedLock::lock`] or [`BiasedLock::try_lock`];
/// released when dropped, on the thread that took it.
#[cfg(not(loom))]
pub struct BiasedGuard<'a, T: ?Sized> {
    lock: &'a BiasedLock<T>,
    held: Held<'a>,
    /// Neither `Send` nor `Sync`: the release writes this thread's slot.
    _on_this_thread: core::marker::PhantomData<*mut ()>,
}

#[cfg(not(loom))]
impl<T: ?Sized> BiasedGuard<'_, T> {
    /// Whether this guard holds `lock` (and not another lock): for a
    /// caller that takes a guard as the proof that a given lock is held.
    #[inline(always)]
    pub fn is_of(&self, lock: &BiasedLock<T>) -> bool {
        core::ptr::addr_eq(self.lock, lock)
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> core::ops::Deref for BiasedGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the guard holds the lock, which excludes every other
        // holder until it is dropped.
        unsafe { &*self.lock.data.get() }
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> core::ops::DerefMut for BiasedGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as `deref`, and `&mut self` makes this the only
        // reference through the guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> Drop for BiasedGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: this guard holds the lock, on this thread (it cannot
        // leave it), taken as `held` says; a guard is dropped once.
        unsafe { self.lock.raw.unlock(self.held) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    /// The raw lock, to read its state.
    fn raw(l: &BiasedLock<u64>) -> &RawBiased {
        l.raw()
    }

    /// Adds one to `*v` with a window between the read and the write, so
    /// that two holders at once lose increments.
    fn slow_increment(v: &mut u64) {
        let x = std::hint::black_box(*v);
        for _ in 0..20 {
            std::hint::spin_loop();
        }
        *v = x + 1;
    }

    /// Takes `lock` `n` times on this thread.
    fn take(lock: &BiasedLock<u64>, n: u64) {
        for _ in 0..n {
            slow_increment(&mut lock.lock());
        }
    }

    #[test]
    fn one_thread_that_keeps_taking_it_gets_the_bias() {
        let l = BiasedLock::new(0u64);
        take(&l, u64::from(BIAS_AFTER) - 1);
        assert!(!raw(&l).is_biased());
        take(&l, 1);
        assert!(raw(&l).is_biased(), "biased after {BIAS_AFTER}");
        // Taken and released by the fast path: held while the guard lives.
        let g = l.lock();
        assert!(raw(&l).is_locked());
        assert!(raw(&l).word.load(Ordering::Relaxed) == 0);
        drop(g);
        assert!(!raw(&l).is_locked());
        assert_eq!(*l.lock(), u64::from(BIAS_AFTER));
    }

    /// The engine's paths try a side's lock where the calling thread may
    /// hold it already, and count on the failure (an ordinary lock's): a
    /// nested `try_lock` fails however the lock is held, by the slow path,
    /// by the slow path that grants this thread the bias, by the fast path.
    #[test]
    fn a_nested_try_lock_on_the_holding_thread_fails() {
        let l = BiasedLock::new(0u64);
        let g = l.lock();
        assert!(l.try_lock().is_none(), "unbiased, held by the slow path");
        drop(g);
        take(&l, u64::from(BIAS_AFTER) - 2);
        let mut g = l.lock();
        // The grant moved the holding to its slot.
        assert!(raw(&l).is_biased() && raw(&l).word.load(Ordering::Relaxed) == 0);
        assert!(raw(&l).is_locked());
        assert!(
            l.try_lock().is_none(),
            "held by the slow path that granted the bias"
        );
        slow_increment(&mut g);
        drop(g);
        assert!(!raw(&l).is_locked());
        let mut g = l.lock();
        assert_eq!(raw(&l).word.load(Ordering::Relaxed), 0, "the fast path");
        assert!(l.try_lock().is_none(), "held by the fast path");
        assert!(raw(&l).is_locked(), "the failed try leaves it held");
        slow_increment(&mut g);
        drop(g);
        assert!(!raw(&l).is_locked());
        let mut g = l.try_lock().expect("free again");
        slow_increment(&mut g);
        drop(g);
        assert_eq!(*l.lock(), u64::from(BIAS_AFTER) + 1);
    }

    /// Threads take fresh locks in bursts (long enough for the bias, which
    /// then flips between them as they revoke it) and short runs, each
    /// adding one under the lock with a window between read and write: the
    /// counts come out exact only if no two held the lock at once.
    fn stress(threads: usize) {
        let rounds = 60;
        let mut revoked = 0;
        let mut biased = 0;
        for round in 0..rounds {
            let l = Arc::new(BiasedLock::new(0u64));
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    let l = l.clone();
                    std::thread::spawn(move || {
                        let mut n = 0;
                        let mut saw_bias = false;
                        for burst in 0..12 {
                            let len = if (burst + t + round) % 3 == 0 { 3 } else { 40 };
                            for _ in 0..len {
                                let mut g = l.lock();
                                slow_increment(&mut g);
                                saw_bias |=
                                    raw(&l).bias.load(Ordering::Relaxed) & !TOKEN_LOW == token();
                                drop(g);
                                n += 1;
                                if let Some(mut g) = l.try_lock() {
                                    slow_increment(&mut g);
                                    n += 1;
                                }
                            }
                            std::thread::yield_now();
                        }
                        (n, saw_bias)
                    })
                })
                .collect();
            let mut want = 0;
            for h in hs {
                let (n, b) = h.join().unwrap();
                want += n;
                biased += usize::from(b);
            }
            assert_eq!(*l.lock(), want, "round {round}: increments lost");
            revoked += raw(&l).revocations();
            assert!(raw(&l).revocations() as usize <= GRANTS);
        }
        // The bias was really taken and revoked, not just the slow path.
        assert!(
            biased > 0 && revoked > 0,
            "biased {biased}, revoked {revoked}"
        );
    }

    #[test]
    fn exclusive_under_two_threads_with_bias_flips() {
        stress(2);
    }

    #[test]
    fn exclusive_under_four_threads_with_bias_flips() {
        stress(4);
    }

    #[test]
    fn a_revoker_waits_for_the_biased_holder() {
        let l = Arc::new(BiasedLock::new(0u64));
        let held = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let (l2, held2, done2) = (l.clone(), held.clone(), done.clone());
        let owner = std::thread::spawn(move || {
            take(&l2, u64::from(BIAS_AFTER));
            assert!(raw(&l2).is_biased());
            let mut g = l2.lock();
            held2.store(true, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
            slow_increment(&mut g);
            done2.store(true, Ordering::SeqCst);
            drop(g);
        });
        while !held.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // `try_lock` fails while the biased thread holds it, and leaves
        // the revocation pending.
        assert!(l.try_lock().is_none(), "taken from a biased holder");
        assert!(!raw(&l).is_biased());
        let g = l.lock();
        assert!(
            done.load(Ordering::SeqCst),
            "entered before the holder left"
        );
        assert_eq!(*g, u64::from(BIAS_AFTER) + 1);
        drop(g);
        owner.join().unwrap();
        assert_eq!(raw(&l).revocations(), 1);
    }

    #[test]
    fn a_thread_that_exits_with_the_bias_leaves_it_to_take() {
        let l = Arc::new(BiasedLock::new(0u64));
        let l2 = l.clone();
        std::thread::spawn(move || take(&l2, u64::from(BIAS_AFTER) + 5))
            .join()
            .unwrap();
        assert!(raw(&l).is_biased(), "the exited thread's bias");
        let mut g = l.try_lock().expect("nobody holds it");
        slow_increment(&mut g);
        drop(g);
        assert_eq!(raw(&l).revocations(), 1);
        assert!(!raw(&l).is_biased());
        assert_eq!(*l.lock(), u64::from(BIAS_AFTER) + 6);
    }

    #[test]
    fn a_lock_that_threads_share_stays_unbiased_after_a_few_revocations() {
        let l = Arc::new(BiasedLock::new(0u64));
        for _ in 0..12 {
            let l2 = l.clone();
            std::thread::spawn(move || take(&l2, 2000)).join().unwrap();
        }
        let r = raw(&l);
        assert!(r.revocations() as usize <= GRANTS, "{}", r.revocations());
        assert_eq!(r.grants.load(Ordering::Relaxed) as usize, GRANTS);
        take(&l, 2000);
        assert!(!r.is_biased(), "a bias after {GRANTS} grants");
        assert_eq!(*l.lock(), 13 * 2000);
    }

    #[test]
    fn the_unbiased_lock_is_an_ordinary_exclusive_lock() {
        let l = Arc::new(BiasedLock::from_raw(RawBiased::unbiased(), 0u64));
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || take(&l, 3000))
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let r = raw(&l);
        assert!(!r.is_biased());
        assert_eq!(r.revocations(), 0);
        let g = l.lock();
        assert!(l.try_lock().is_none());
        assert_eq!(*g, 9000);
    }
}
