//! The code buffer native backends write machine code into, in place.
//!
//! Speed here is the point of the paper (§5.1): a generated instruction
//! should cost a handful of host instructions. The buffer therefore does
//! not check for room on every byte. Each vcode instruction instead
//! spends one unit of a *budget*: the number of instructions that are
//! certain to fit, since each writes at most [`MAX_INSN`] bytes. The
//! budget is a count-down, so the same decrement that guards the buffer
//! also counts instructions for error messages. When it runs out, a cold
//! path grows the buffer (or, past the limit, records an error and keeps
//! writing harmlessly over the start of the buffer, so no method ever
//! needs a `Result`). A backend with deadlines of its own (aarch64's
//! islands, placed before its code outgrows a branch's reach) folds them
//! into the same count-down: [`Buf::cap`] makes it run out early, and
//! [`Buf::tick`] leaves that cold path to the backend.
//!
//! This module owns the `unsafe` writes; everything above it is safe.

use crate::error::{Error, ErrorKind};

/// Upper bound of the bytes one vcode instruction may write, including
/// the up-to-8 bytes a wide store may write past its end. Sequences
/// longer than this (calls, the prologue) ask for room with
/// [`Buf::reserve`] first.
pub const MAX_INSN: usize = 128;

/// The largest code size of one function: positions then fit in 31
/// bits, which the x86-64 backend's label words rely on, and every
/// position is within reach of a rel32 from every other.
pub const MAX_LIMIT: usize = (1 << 31) - 4096;

const INITIAL: usize = 4096;

/// Instructions a refill should grant at least, growing the buffer if the
/// limit allows.
const MIN_GRANT: usize = 256;

/// A growable code buffer with a budget of instructions.
pub struct Buf {
    mem: Vec<u8>,
    at: *mut u8,
    budget: u32,
    /// Instructions begun before the current grant, plus the grant.
    issued: u32,
    limit: usize,
    /// The first error, kept until `end`.
    pub err: Option<Error>,
}

// SAFETY: `at` points into `mem`, which the Buf owns exclusively.
unsafe impl Send for Buf {}

impl Buf {
    /// An empty buffer that may grow to `limit` bytes, at most
    /// [`MAX_LIMIT`].
    pub fn new(limit: usize) -> Self {
        let limit = limit.min(MAX_LIMIT);
        let mut mem = vec![0u8; INITIAL.min(limit.max(2 * MAX_INSN))];
        let at = mem.as_mut_ptr();
        let mut b = Buf {
            mem,
            at,
            budget: 0,
            issued: 0,
            limit,
            err: None,
        };
        b.grant();
        b.issued = b.budget;
        b
    }

    /// Forgets the contents (keeping the memory) for the next function.
    #[inline]
    pub fn reset(&mut self) {
        self.at = self.mem.as_mut_ptr();
        self.err = None;
        self.grant();
        self.issued = self.budget;
    }

    fn room(&self) -> usize {
        self.mem.len() - self.pos()
    }

    /// Hands out budget for the room left. Every caller leaves at least
    /// `2 * MAX_INSN` bytes of room, so the grant is at least 1 and the
    /// instruction being started keeps its own `MAX_INSN`.
    #[inline]
    fn grant(&mut self) {
        self.budget =
            ((self.room() / MAX_INSN).saturating_sub(1)).clamp(1, u32::MAX as usize / 2) as u32;
    }

    /// Starts an instruction: spends one unit of budget.
    #[inline(always)]
    pub fn insn(&mut self, method: &'static str) {
        self.budget = self.budget.wrapping_sub(1);
        if self.budget == 0 {
            self.refill(method, 0);
        }
    }

    /// [`insn`](Buf::insn) for a backend with work of its own when the
    /// budget runs out (aarch64's islands): spends one unit and returns
    /// true when the budget ran out, leaving the caller to call
    /// [`refill`](Buf::refill).
    #[inline(always)]
    pub fn tick(&mut self) -> bool {
        self.budget = self.budget.wrapping_sub(1);
        self.budget == 0
    }

    /// The budget left: the instruction starts before the next refill.
    #[inline(always)]
    pub fn budget(&self) -> u32 {
        self.budget
    }

    /// Brings the next refill forward: the `n`th instruction begun from
    /// now (the next one if `n` is 0) runs out of budget, if it would not
    /// already. The instruction count is kept.
    pub fn cap(&mut self, n: u32) {
        let n = n.max(1);
        if n < self.budget {
            self.issued = self.issued.wrapping_sub(self.budget - n);
            self.budget = n;
        }
    }

    /// Starts an instruction that writes no code (a label): counted, but
    /// it spends no budget, so there is nothing to check.
    #[inline(always)]
    pub fn insn_no_code(&mut self) {
        self.issued = self.issued.wrapping_add(1);
    }

    /// Makes sure `bytes` more bytes fit, beyond the current instruction.
    #[inline]
    pub fn reserve(&mut self, method: &'static str, bytes: usize) {
        if self.room() < bytes + 2 * MAX_INSN {
            self.refill(method, bytes);
        }
    }

    /// After a sequence longer than [`MAX_INSN`] (a call, the parameter
    /// moves): recomputes the budget from the room actually left, keeping
    /// the instruction count.
    pub fn resync(&mut self, method: &'static str) {
        self.refill(method, 0);
    }

    /// Restarts the instruction count at 0 (after `lambda`'s own code).
    pub fn rebase(&mut self) {
        if self.pos() > 0 {
            self.refill("lambda", 0);
        }
        self.issued = self.budget;
    }

    /// Makes room for the next instructions (and `extra` bytes) and hands
    /// out a new budget, keeping the instruction count; past the limit,
    /// records [`ErrorKind::CodeTooLarge`].
    #[cold]
    #[inline(never)]
    pub fn refill(&mut self, method: &'static str, extra: usize) {
        let used = self.issued.wrapping_sub(self.budget);
        let mut need = self.pos() + extra + 3 * MAX_INSN;
        // A grant this small would bring the next refill back within a
        // few dozen instructions: grow instead (within the limit), so
        // that refills are rare and the buffer, kept across functions,
        // soon needs none at all.
        if self.mem.len() - self.pos() < MIN_GRANT * MAX_INSN && self.mem.len() * 2 <= self.limit {
            need = need.max(self.mem.len() * 2);
        }
        if need > self.mem.len() {
            if need > self.limit.max(3 * MAX_INSN) {
                self.fail_at(
                    used.saturating_sub(1),
                    method,
                    ErrorKind::CodeTooLarge { limit: self.limit },
                );
                // Keep going harmlessly over the start of the buffer.
                self.at = self.mem.as_mut_ptr();
            } else {
                let pos = self.pos();
                let new_len = (self.mem.len() * 2).max(need).min(self.limit.max(need));
                self.mem.resize(new_len, 0);
                // SAFETY: `pos <= mem.len()` (positions only grow within the
                // granted room); `resize` may have moved the memory.
                self.at = unsafe { self.mem.as_mut_ptr().add(pos) };
            }
        }
        self.grant();
        self.issued = used.wrapping_add(self.budget);
    }

    /// The index of the instruction being generated (0 = first after `lambda`).
    #[inline]
    pub fn index(&self) -> u32 {
        self.issued.wrapping_sub(self.budget).wrapping_sub(1)
    }

    /// The index the next instruction will have.
    #[inline(always)]
    pub fn next_index(&self) -> u32 {
        self.index().wrapping_add(1)
    }

    /// Records an error found between instructions (`getreg`, `putreg`,
    /// `reserve`, an extension's checks) at the next instruction, as the
    /// reference backend numbers it, unless one is recorded.
    #[cold]
    pub fn fail_next(&mut self, method: &'static str, kind: ErrorKind) {
        self.fail_at(self.next_index(), method, kind);
    }

    /// Records an error at the current instruction, unless one is recorded.
    #[cold]
    pub fn fail(&mut self, method: &'static str, kind: ErrorKind) {
        self.fail_at(self.index(), method, kind);
    }

    /// Records an error at instruction `index`, unless one is recorded.
    #[cold]
    pub fn fail_at(&mut self, index: u32, method: &'static str, kind: ErrorKind) {
        if self.err.is_none() {
            self.err = Some(Error::new(index, method, kind));
        }
    }

    /// Bytes written so far.
    #[inline(always)]
    pub fn pos(&self) -> usize {
        self.at as usize - self.mem.as_ptr() as usize
    }

    /// Writes the low `len` bytes of `word` (little-endian), `len <= 8`.
    #[inline(always)]
    pub fn put(&mut self, word: u64, len: usize) {
        debug_assert!(len <= 8);
        // SAFETY: the budget invariant guarantees MAX_INSN bytes of room at
        // the start of each instruction, and no instruction writes more
        // than MAX_INSN - 8 bytes before its last `put`; the unaligned
        // 8-byte store therefore stays inside `mem`.
        unsafe {
            (self.at as *mut u64).write_unaligned(word.to_le());
            self.at = self.at.add(len);
        }
    }

    /// Writes one byte.
    #[inline(always)]
    pub fn put1(&mut self, b: u8) {
        self.put(b as u64, 1)
    }

    /// Writes a little-endian `u32`.
    #[inline(always)]
    pub fn put4(&mut self, v: u32) {
        self.put(v as u64, 4)
    }

    /// Overwrites 4 bytes at `at` (a backpatch).
    #[inline]
    pub fn patch4(&mut self, at: usize, v: u32) {
        self.mem[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    /// Reads the 4 bytes at `at` (a link of a chain of forward references).
    #[inline]
    pub fn read4(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.mem[at..at + 4].try_into().expect("4 bytes"))
    }

    /// Overwrites the 4 bytes at `at` with `v` and returns what they held
    /// (a backpatch that reads the next link of a chain): one bounds check.
    #[inline]
    pub fn swap4(&mut self, at: usize, v: u32) -> u32 {
        let field: &mut [u8; 4] = (&mut self.mem[at..at + 4]).try_into().expect("4 bytes");
        u32::from_le_bytes(std::mem::replace(field, v.to_le_bytes()))
    }

    /// Overwrites 1 byte at `at` (a backpatch).
    #[inline]
    pub fn patch1(&mut self, at: usize, v: u8) {
        self.mem[at] = v;
    }

    /// Cuts the code back to `pos` bytes.
    pub fn truncate(&mut self, pos: usize) {
        debug_assert!(pos <= self.pos());
        // SAFETY: `pos` is within the written part of `mem`.
        self.at = unsafe { self.mem.as_mut_ptr().add(pos) };
    }

    /// The bytes written so far.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.mem[..self.pos()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_instructions_across_growth() {
        let mut b = Buf::new(1 << 20);
        for i in 0..10_000u32 {
            b.insn("nop");
            assert_eq!(b.index(), i);
            b.put(0x9090_9090_9090_9090, 7);
        }
        assert_eq!(b.pos(), 70_000);
        assert!(b.err.is_none());
        b.insn_no_code();
        assert_eq!(b.index(), 10_000);
        b.insn("nop");
        assert_eq!(b.index(), 10_001);
    }

    #[test]
    fn limits_stop_short_of_2_gib() {
        // Positions then fit in 31 bits (x86-64's label words).
        assert_eq!(Buf::new(usize::MAX).limit, MAX_LIMIT);
        assert_eq!(Buf::new(1 << 20).limit, 1 << 20);
        const { assert!(MAX_LIMIT < 1 << 31) };
    }

    #[test]
    fn a_cap_brings_the_refill_forward_and_keeps_the_count() {
        let mut b = Buf::new(1 << 20);
        b.insn("nop");
        b.cap(3);
        assert!(!b.tick());
        assert!(!b.tick());
        assert!(b.tick(), "the third instruction from the cap runs out");
        b.refill("nop", 0);
        assert_eq!(b.index(), 3);
        assert!(b.budget() > 3);
    }

    #[test]
    fn past_the_limit_is_an_error_with_the_instruction_index() {
        let mut b = Buf::new(4096);
        for _ in 0..10_000 {
            b.insn("nop");
            b.put(0x90, 1);
        }
        let e = b.err.clone().expect("limit error");
        assert_eq!(*e.kind(), ErrorKind::CodeTooLarge { limit: 4096 });
        assert_eq!(e.method(), "nop");
        assert!(e.index() > 1000 && e.index() < 4096, "{e}");
    }
}
