//! The natives inlined into the generated code ([`InlineForm`]): the
//! endpoint's state read or written in place through the words the host
//! lends ([`crate::HostWords`]), each with the checks its out-of-line form
//! makes, in the same order, and a branch to that form where a check or
//! the lent state says the common way does not apply.

use super::*;
use vcode::backend::Cond as C;
use vcode::ext::MemCompare;

/// Where a run the host lends an inline native keeps its words, as
/// offsets in [`crate::HostWords`]: the next entry's address, one past the
/// last entry, the first entry, and how many entries are left in the run.
#[derive(Clone, Copy)]
struct LentRun {
    next: i64,
    limit: i64,
    base: i64,
    left: i64,
}

impl Compiler<'_> {
    /// The invocation's work count after an inline native moving `len`
    /// bytes (in `rl`) charges its units, one and one per 4 KiB (as
    /// `Io::try_charge` counts them), into `count`; to `rare` if that
    /// reaches the next clock reading (`words`' bound), where the native's
    /// ordinary form charges and reads the clock. `tmp` is clobbered;
    /// nothing is stored.
    ///
    /// The count so far is added from where it lies (vcode's
    /// `add_reg_mem`: `add count, [words + work]`), where its load and the
    /// add were two instructions: the same sum (the lent tail push, every
    /// `doTx` of the standard applets).
    fn units_after(&mut self, count: Reg<UL>, tmp: Reg<UL>, rl: R, words: Reg<P>, rare: Label) {
        self.f.rsh(count, ix(rl), 12);
        self.f.add(count, count, 1);
        self.f.add_reg_mem(count, words, W_WORK as i32, tmp);
        self.f
            .bcmp_mem(C::Ge, count, (words, W_BOUND as i32), tmp, rare);
    }

    /// The invocation's [`crate::HostWords`] (`Ctx::words`), loaded into
    /// `into`. Never null: where the host lends none they are `NO_WORDS`,
    /// whose `bound` of 0 fails every form's budget check, which comes
    /// before the form's first store; so no form tests for null.
    fn host_words(&mut self, into: u8) -> Reg<P> {
        let words = p(into);
        let c = self.ctx(into);
        self.f.ld(words, c, C_WORDS);
        words
    }

    /// An inline form's budget check for one unit: branches to `rare`
    /// unless `words.work + 1 < words.bound` (unsigned), and returns the
    /// count plus one in the first register of `(count, bound)`, not yet
    /// stored (the form stores it once nothing more can fail).
    ///
    /// The bound, as every lent word a form reads only to compare it, is
    /// compared where it lies (`MemCompare`: `cmp count, [words + bound];
    /// jae`, the second register only the portable form's scratch), one
    /// instruction fewer than its load and the compare: the same test on
    /// the same word. With the tail push's five and the lent runs' tests
    /// so, `xthr_count` LENT=1 40 B send 659.0 to 653.0 and receive 488.6
    /// to 485.6 per message, `unet-count` standard-lent-40 added 570.6 to
    /// 561.6.
    fn one_unit_or(&mut self, words: Reg<P>, (count, bound): (u8, u8), rare: Label) -> Reg<UL> {
        let count = Reg::<UL>::phys(count);
        self.f.ld(count, words, W_WORK);
        self.f.add(count, count, 1);
        let bound = Reg::<UL>::phys(bound);
        self.f
            .bcmp_mem(C::Ge, count, (words, W_BOUND as i32), bound, rare);
        count
    }

    /// The result's register of an inline form that leaves a value, and
    /// the register it loads the value into: after the sync before the
    /// form no entry is in `W`, so `dest` writes nothing. The value is
    /// loaded straight into the result's register unless that is a
    /// scratch register the forms use (X, Z or W; then Y, and the form
    /// moves it at its end): whatever it held is dead (a new stack entry's
    /// home, or a local the next op overwrites), and the rare path writes
    /// it again.
    fn inline_result(&mut self) -> (R, R) {
        let (x, y, z, w) = (self.regs.x, self.regs.y, self.regs.z, self.regs.w);
        let rd = self.dest();
        let v = if [x, z, w].contains(&rd.num()) {
            Reg::<I>::phys(y)
        } else {
            rd
        };
        (rd, v)
    }

    /// [`InlineForm::Int`]`(i)` in place: with `w` the invocation's
    /// [`crate::HostWords`] (`Ctx::words`), if
    /// `w.ints[i] >= 0` and `w.work + 1 < w.bound` (unsigned), counts the
    /// unit and leaves `w.ints[i]` in the result's register, then jumps to
    /// the returned label; otherwise it falls through to the out-of-line
    /// call the caller emits next (the rare path), which leaves its value
    /// in the same register just before that label. Nothing is written
    /// before the last check passes, so the rare path runs as if the
    /// inline form had not been tried.
    pub(super) fn inline_int(&mut self, i: u8) -> (R, Label) {
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, z, w) = (self.regs.x, self.regs.z, self.regs.w);
        // The result's register (`inline_result`).
        let (rd, v) = self.inline_result();
        let words = self.host_words(z);
        self.f.ld(v, words, W_INTS + 4 * i64::from(i));
        self.f.blt(v, 0, rare);
        let count = self.one_unit_or(words, (x, w), rare);
        self.f.st(count, words, W_WORK);
        if rd.num() != v.num() {
            self.f.mov(rd, v);
        }
        self.f.jmp(done);
        self.f.label(rare);
        (rd, done)
    }

    /// The end of an inline form that took the entry at `slot` of a run
    /// the host lent (`run`: where its words are in the invocation's
    /// [`crate::HostWords`] at `words`): the run's next entry `step` bytes
    /// on, wrapping at its limit to its base, one fewer left in it, and
    /// the unit counted. Uses the scratch registers `a` and `b`.
    fn take_from_run(
        &mut self,
        words: Reg<P>,
        slot: Reg<P>,
        step: i64,
        run: LentRun,
        (a, b): (u8, u8),
    ) {
        let next = p(a);
        self.f.add(next, slot, step);
        let limit = p(b);
        let kept = self.f.genlabel();
        self.f
            .bcmp_mem(C::Ne, next, (words, run.limit as i32), limit, kept);
        self.f.ld(next, words, run.base);
        self.f.label(kept);
        self.f.st(next, words, run.next);
        // One fewer left, one unit counted: each an add to the word in
        // memory (`MemAdd`), where a load, an add and a store were three.
        self.f.add_mem_imm(false, words, run.left as i32, -1);
        self.f.add_mem_imm(true, words, W_WORK as i32, 1);
    }

    /// The start of an inline push ([`InlineForm::PushBytes`],
    /// [`InlineForm::PushEntry`]): the invocation's words into Z (returned),
    /// the budget's check for one unit and a free slot in the ring's lent
    /// run, each to `rare` where it fails. Uses X and Y.
    fn push_start(&mut self, rare: Label) -> Reg<P> {
        let (x, y, z) = (self.regs.x, self.regs.y, self.regs.z);
        let words = self.host_words(z);
        self.one_unit_or(words, (x, y), rare);
        let room = Reg::<vcode::U>::phys(x);
        self.f
            .bcmp_mem_imm(C::Eq, (words, W_RING_ROOM as i32), 0, room, rare);
        words
    }

    /// The end of an inline push that wrote and sealed `slot`: the slot
    /// taken from the ring's lent run and the unit counted
    /// (`take_from_run`, with the scratch registers `ab`), a jump to
    /// `done`, and the rare path's label after it.
    fn push_end(
        &mut self,
        words: Reg<P>,
        slot: Reg<P>,
        ab: (u8, u8),
        (done, rare): (Label, Label),
    ) {
        let ring = LentRun {
            next: W_RING_NEXT,
            limit: W_RING_LIMIT,
            base: W_RING_BASE,
            left: W_RING_ROOM,
        };
        self.take_from_run(words, slot, RING_SLOT as i64, ring, ab);
        self.f.jmp(done);
        self.f.label(rare);
    }

    /// The check of a queue entry `e` (read once, in its register) that
    /// the inline pop takes and the inline entry push names: below
    /// `w.queue.below` (unsigned) and none of the `w.queue.align` bits
    /// set, or to `rare`. `t` is scratch.
    fn entry_or(&mut self, words: Reg<P>, e: Reg<vcode::U>, t: u8, rare: Label) {
        let t = Reg::<vcode::U>::phys(t);
        self.f
            .bcmp_mem(C::Ge, e, (words, W_QUEUE_BELOW as i32), t, rare);
        self.f.ld(t, words, W_QUEUE_ALIGN);
        self.f.and(t, t, e);
        self.f.bne(t, 0, rare);
    }

    /// [`InlineForm::PopU32`] in place: with `w` the invocation's
    /// [`crate::HostWords`], if `w.work + 1 < w.bound`
    /// (unsigned), the lent run has an entry (`w.queue.avail > 0`), and
    /// the entry `e` at `w.queue.next` (read once) is below
    /// `w.queue.below` (unsigned) and `e & w.queue.align == 0`, it moves
    /// `next` to the following entry (wrapping at the queue's limit),
    /// takes one from `avail`, counts the unit, leaves `e` in the result's
    /// register and jumps to the returned label. Otherwise it falls
    /// through to the call the caller emits next (the rare path), which
    /// leaves its value in the same register just before that label.
    /// Every check comes before the first store, so the rare path runs as
    /// if the form had not been tried (an invalid entry stays for the
    /// native to skip and count). Uses X, Z and W, and Y where the
    /// result's register is one of those.
    pub(super) fn inline_pop(&mut self) -> (R, Label) {
        use vcode::U;
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, z, w) = (self.regs.x, self.regs.z, self.regs.w);
        // The result's register (`inline_result`).
        let (rd, v) = self.inline_result();
        let words = self.host_words(z);
        self.one_unit_or(words, (x, w), rare);
        let avail = Reg::<U>::phys(x);
        self.f
            .bcmp_mem_imm(C::Eq, (words, W_QUEUE_AVAIL as i32), 0, avail, rare);
        // The entry, read once: every check is on this copy.
        let slot = p(w);
        self.f.ld(slot, words, W_QUEUE_NEXT);
        let e = Reg::<U>::phys(v.num());
        self.f.ld(e, slot, 0);
        self.entry_or(words, e, x, rare);
        // Every check passed: take it.
        let queue = LentRun {
            next: W_QUEUE_NEXT,
            limit: W_QUEUE_LIMIT,
            base: W_QUEUE_BASE,
            left: W_QUEUE_AVAIL,
        };
        self.take_from_run(words, slot, 4, queue, (w, x));
        if rd.num() != v.num() {
            self.f.mov(rd, v);
        }
        self.f.jmp(done);
        self.f.label(rare);
        (rd, done)
    }

    /// [`InlineForm::PushBytes`] in place, for the native call whose three
    /// arguments `(array, tag, len)` are the stack's entries from `first`
    /// (where they are: a constant, a local's home or their own;
    /// `len_const` the length where it is a
    /// constant of `0..=RING_BYTES`): with `w` the invocation's
    /// [`crate::HostWords`], if `w.work + 1 < w.bound`,
    /// the lent run has a free slot, `len <= RING_BYTES` and `tag <= 0xffff`
    /// (unsigned: a negative one is huge), and the array's directory entry
    /// says bytes and at least `len` of them (`null`'s says neither), it
    /// writes the slot at `w.ring.next` (`len` bytes after its 8-byte
    /// header, then the header word `len | tag << 32 |
    /// `[`crate::RING_HEADER_SEALED`] with one
    /// release store: the seal last), moves `next` to the following slot (wrapping at
    /// the ring's limit), takes it from `room`, counts the unit and jumps
    /// to the returned label. Otherwise it falls through to the call the
    /// caller emits next (the rare path). Every check comes before the
    /// first store, so the rare path runs as if the form had not been
    /// tried. Uses X, Y, Z and W; the arguments are only read.
    pub(super) fn inline_push(&mut self, first: usize, len_const: Option<i32>) -> Label {
        use vcode::U;
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, y, z, w) = (self.regs.x, self.regs.y, self.regs.z, self.regs.w);
        let (arr, tag, len) = (
            self.stack[first],
            self.stack[first + 1],
            self.stack[first + 2],
        );
        let words = self.push_start(rare);
        // The length (kept in its home or W until the copy) and the tag.
        // A length in a local that a branch above bounds by `RING_BYTES`
        // (`Compiler::le`: StandardUnet's `if (length <= 56)`) needs no
        // test of its own here: that bound is signed, and a negative
        // length is, unsigned, at least 2^31, past every array's length,
        // so the array's check below sends it to the rare path before any
        // store, as this test would have.
        let proven = matches!(len, Val::Slot(n) if self
            .le
            .get(usize::from(n))
            .copied()
            .flatten()
            .is_some_and(|b| b <= RING_BYTES as i32));
        let rl = match len_const {
            Some(_) => None,
            None if proven => Some(self.reg_of(len, w)),
            None => {
                let rl = self.reg_of(len, w);
                self.f.bgt(
                    Reg::<U>::phys(rl.num()),
                    Operand::Imm(RING_BYTES as i64),
                    rare,
                );
                Some(rl)
            }
        };
        let rt = self.reg_of(tag, y);
        self.f.bgt(Reg::<U>::phys(rt.num()), 0xffff, rare);
        // The array: its entry's second word holds its length (bits
        // 0-31) and whether its elements are bytes (bits 40-47).
        // The entry goes into X where the array is in a home of its own
        // (X is then free), so that Y keeps the directory for the data
        // address below.
        let ra = self.reg_of(arr, x);
        let dir = self.ld_base(y, Base::Dir);
        let e_in_x = ra.num() != x;
        let e = Reg::<UL>::phys(if e_in_x { x } else { y });
        self.f.ldx(e, Ty::UL, dir, ix(ra), 8, DIR_LEN);
        match (rl, len_const) {
            (Some(rl), _) => self
                .f
                .bgt(Reg::<U>::phys(rl.num()), Reg::<U>::phys(e.num()), rare),
            (None, Some(c)) if c > 0 => {
                self.f
                    .blt(Reg::<U>::phys(e.num()), Operand::Imm(i64::from(c)), rare)
            }
            _ => {}
        }
        self.f.rsh(e, e, i64::from(DIR_BYTES_SHIFT));
        self.f.bne(e, 1, rare);
        // Every check passed: the writes.
        let dir = if e_in_x {
            dir
        } else {
            self.ld_base(y, Base::Dir)
        };
        let data = p(y);
        self.f.ldx(data, Ty::P, dir, ix(ra), 8, DIR_DATA);
        let slot = p(z);
        self.f.ld(slot, words, W_RING_NEXT);
        let t = Reg::<UL>::phys(x);
        match (rl, len_const) {
            (Some(rl), _) => {
                // `copy_down`: 16 or 8 bytes at a time, overlapping at
                // the start; under 8, byte by byte. Every load stays
                // inside the array's first `len` bytes.
                let n = Reg::<UL>::phys(w);
                if rl.num() != w {
                    self.f.mov(n, Reg::<UL>::phys(rl.num()));
                }
                let copied = self.f.genlabel();
                self.copy_down(data, slot, 8, n, t, copied);
                self.f.label(copied);
            }
            (None, Some(c)) => {
                // Unrolled: whole words, then the last piece overlapping.
                let c = i64::from(c);
                let piece = |f: &mut Func, at: i64, size: i64| match size {
                    8 => {
                        f.ld(t, data, at);
                        f.st(t, slot, 8 + at);
                    }
                    4 => {
                        f.ldu(t, data, at);
                        f.st(Reg::<U>::phys(t.num()), slot, 8 + at);
                    }
                    2 => {
                        f.ldus(t, data, at);
                        f.sts(t, slot, 8 + at);
                    }
                    _ => {
                        f.lduc(t, data, at);
                        f.stc(t, slot, 8 + at);
                    }
                };
                let size = [8, 4, 2, 1].into_iter().find(|&s| c >= s).unwrap_or(0);
                let mut at = 0;
                while size > 0 && at + size <= c {
                    piece(&mut self.f, at, size);
                    at += size;
                }
                if size > 0 && at < c {
                    piece(&mut self.f, c - size, size);
                }
            }
            (None, None) => {}
        }
        // The header word last, sealed: `len | tag << 32 |
        // RING_HEADER_SEALED` (byte 6, the host's `nbufs`, 0; byte 7, its
        // `sealed`, `RING_SEALED`), built as the high half `tag | seal`
        // (`seal` the seal's high half) shifted left by 32, one release
        // store after the bytes, so that a reader that sees byte 7 set
        // (with an acquire load) sees the whole slot. The copy used X and
        // W, and Y held the array's data; the tag and the length are read
        // again from where they are (a constant, a local's home, or the
        // frame: `call_native` flushed W, so neither is in W).
        //
        // Why sealing here is sound (the seal was the host's, when it took
        // the run back, before): a slot written here is never withdrawn
        // or written again. Every check comes before the first store, so
        // a push that stores completes; what follows it (a trap, the fuel
        // or time budget, a failing method, the run taken back by the
        // native's own push or at the invocation's end) keeps every slot
        // the pushes filled, and the host takes each back exactly once
        // ([`crate::RingWords::take`]); a run is lent only from the
        // producer's index, which counts every slot taken back, so no
        // slot filled and sealed is lent again before its consumer frees
        // it.
        let seal = (crate::natives::RING_HEADER_SEALED >> 32) as u32;
        self.seal_slot(slot, t, seal, (tag, len, len_const), y);
        // The words again (Z now holds the slot): the run's next slot and
        // room, then the count.
        let words = self.host_words(x);
        self.push_end(words, slot, (y, w), (done, rare));
        done
    }

    /// [`InlineForm::PushEntry`]`(n)` in place, for the native call whose
    /// three arguments `(array, tag, len)` are the stack's entries from
    /// `first` (where they are: a constant, a local's home or their own;
    /// `len_const` the length where it is a constant, at least 1): with
    /// `w` the invocation's [`crate::HostWords`], if `w.work + 1 <
    /// w.bound`, the lent run has a free slot, `len - 1 <= w.queue.align`
    /// (in 32 bits, unsigned: a length of 0 or below wraps past every
    /// `align`), `tag <= 0xffff` (unsigned), the array's directory entry
    /// says `n` elements (`null`'s says none) and its first element `e` is
    /// below `w.queue.below` (unsigned) with no `w.queue.align` bit set, it
    /// writes `e` at the slot's byte 8, then the header word `len | tag <<
    /// 32 | `[`crate::RING_HEADER_ONE`]` | `[`crate::RING_HEADER_SEALED`]
    /// with one release store (the seal last, as `inline_push`), moves
    /// `next` to the following slot, takes it from `room`, counts the unit
    /// and jumps to the returned label. Otherwise it falls through to the
    /// call the caller emits next (the rare path). Every check comes
    /// before the first store, so the rare path runs as if the form had
    /// not been tried. Uses X, Y, Z and W; the arguments are only read.
    ///
    /// The array's type is not tested: the verifier typed the argument as
    /// the descriptor's `int[]`, so it is one or `null`. Were it another
    /// array of `n` elements, the 4 bytes read would still be inside it
    /// (`Natives::set_inline` takes this form only for `n >= 4`).
    pub(super) fn inline_push_entry(
        &mut self,
        first: usize,
        n: u8,
        len_const: Option<i32>,
    ) -> Label {
        use vcode::U;
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, y, w) = (self.regs.x, self.regs.y, self.regs.w);
        let (arr, tag, len) = (
            self.stack[first],
            self.stack[first + 1],
            self.stack[first + 2],
        );
        let words = self.push_start(rare);
        // The length: one entry's room holds it.
        let align = Reg::<U>::phys(y);
        self.f.ld(align, words, W_QUEUE_ALIGN);
        match len_const {
            Some(c) => self.f.blt(align, Operand::Imm(i64::from(c) - 1), rare),
            None => {
                let rl = self.reg_of(len, w);
                let less = Reg::<U>::phys(x);
                self.f.sub(less, Reg::<U>::phys(rl.num()), 1);
                self.f.bgt(less, align, rare);
            }
        }
        let rt = self.reg_of(tag, y);
        self.f.bgt(Reg::<U>::phys(rt.num()), 0xffff, rare);
        // The array: `n` elements, and its first one an entry the inline
        // pop would take, read once (every check is on this copy).
        let ra = self.reg_of(arr, x);
        let dir = self.ld_base(y, Base::Dir);
        let count = Reg::<U>::phys(w);
        self.f.ldx(count, Ty::U, dir, ix(ra), 8, DIR_LEN);
        self.f.bne(count, Operand::Imm(i64::from(n)), rare);
        let data = p(w);
        self.f.ldx(data, Ty::P, dir, ix(ra), 8, DIR_DATA);
        let e = Reg::<U>::phys(w);
        self.f.ld(e, data, 0);
        self.entry_or(words, e, x, rare);
        // Every check passed: the entry, then the header word last, sealed
        // (built as `inline_push` builds it, with byte 6's 1 in the high
        // half: the tag is at most 0xffff, so no carry reaches it).
        let slot = p(x);
        self.f.ld(slot, words, W_RING_NEXT);
        self.f.st(e, slot, 8);
        let high =
            ((crate::natives::RING_HEADER_SEALED | crate::natives::RING_HEADER_ONE) >> 32) as u32;
        self.seal_slot(slot, Reg::<UL>::phys(w), high, (tag, len, len_const), y);
        self.push_end(words, slot, (y, w), (done, rare));
        done
    }

    /// The last store of an inline push ([`InlineForm::PushBytes`],
    /// [`InlineForm::PushEntry`]): the slot's header word `len | tag << 32
    /// | high << 32` (`high` the seal's high half, with byte 6's count
    /// where the slot names entries), built in `head` as the 32-bit `tag +
    /// high` (no carry: the tag is at most 0xffff and `high` clears bits 0
    /// to 15) shifted left by 32, then stored at `slot` with one release
    /// store, after every other byte the push wrote. The tag and the length
    /// (`len_const` where it is a constant, at least 0) are read again from
    /// where they are: a constant, a local's home, or the frame (the
    /// caller flushed W); the tag into `head`'s own register and the length
    /// into `scratch` where they must be loaded.
    fn seal_slot(
        &mut self,
        slot: Reg<P>,
        head: Reg<UL>,
        high: u32,
        (tag, len, len_const): (Val, Val, Option<i32>),
        scratch: u8,
    ) {
        use vcode::U;
        match tag {
            Val::Const(c) => self.f.set(head, u64::from(c as u32 | high) << 32),
            _ => {
                let rt = self.reg_of(tag, head.num());
                self.f.add(
                    Reg::<U>::phys(head.num()),
                    Reg::<U>::phys(rt.num()),
                    Operand::Imm(i64::from(high)),
                );
                self.f.lsh(head, head, 32);
            }
        }
        match len_const {
            None => {
                let rl = self.reg_of(len, scratch);
                self.f.or(head, head, Reg::<UL>::phys(rl.num()));
            }
            Some(c) if c > 0 => self.f.or(head, head, i64::from(c)),
            Some(_) => {}
        }
        self.f.st_release(head, slot, 0);
    }

    /// Copies `n` bytes (`n` in its register, consumed) from `src` to
    /// `dst + disp`: from 16 bytes on, down from the end 16 bytes at a
    /// time (`Move16`), then the first 16 again (overlapping); from 8, the
    /// last 8 and the first 8 (overlapping); under 8, byte by byte. `t` is
    /// scratch. Every access stays inside the two ranges of `n` bytes,
    /// which the caller has checked; it jumps to `done` from the word
    /// paths and falls through from the byte loop (at `n == 0` too).
    ///
    /// Why 16 at a time: the standard applet's 40-byte messages take two
    /// rounds of 4 instructions and a last move of 2, where an 8-byte loop
    /// took five rounds of 5 and a last move of 2 (two copies per
    /// message). Why `n - 16` in the register
    /// during the rounds: the entry's test and each round's are then the
    /// `sub`'s borrow ([`vcode::ext::Countdown::sub_branch`]), 2 fewer per
    /// copy of 32 to 47 bytes; a copy under 16 bytes adds the 16 back (1).
    fn copy_down(
        &mut self,
        src: Reg<P>,
        dst: Reg<P>,
        disp: i32,
        n: Reg<UL>,
        t: Reg<UL>,
        done: Label,
    ) {
        let (restore, small, rounds, bytes_loop) = (
            self.f.genlabel(),
            self.f.genlabel(),
            self.f.genlabel(),
            self.f.genlabel(),
        );
        let end = self.f.genlabel();
        // `n - 16` is counted down, not `n`, so that the `sub`'s own borrow
        // is each test (`sub; jb`, `sub; jae`, no `cmp`): the rounds move
        // the 16 bytes at `n - 16`, which is the register now.
        self.f.sub_branch(n, 16, true, restore);
        self.f.label(rounds);
        self.f.move16(dst, disp, src, 0, Some(n));
        self.f.sub_branch(n, 16, false, rounds);
        self.f.move16(dst, disp, src, 0, None);
        self.f.jmp(done);
        self.f.label(restore);
        self.f.add(n, n, 16);
        self.f.blt(n, 8, small);
        self.f.ldx(t, Ty::UL, src, n, 1, -8);
        self.f.stx(t, Ty::UL, dst, n, 1, disp - 8);
        self.f.ld(t, src, 0);
        self.f.st(t, dst, disp);
        self.f.jmp(done);
        self.f.label(small);
        self.f.beq(n, 0, end);
        self.f.label(bytes_loop);
        self.f.sub(n, n, 1);
        self.f.ldx(t, Ty::UC, src, n, 1, 0);
        self.f.stx(t, Ty::UC, dst, n, 1, disp);
        self.f.bne(n, 0, bytes_loop);
        self.f.label(end);
    }

    /// [`InlineForm::CopyOut`] (`out`: area to array) or
    /// [`InlineForm::CopyIn`] in place, for the native call whose four
    /// arguments `(array, aoff, off, len)` are the stack's entries from
    /// `first` (where they are: a constant, a local's home or their own):
    /// with `w` the invocation's
    /// [`crate::HostWords`], if `w.work + 1 + len / 4096
    /// < w.bound` (unsigned), `off + len <= w.area.len` (in 64 bits, `off`
    /// and `len` zero-extended: a negative one is past every area, which is
    /// below 2^31), the array's directory entry says bytes (`null`'s
    /// does not), `aoff >= 0` and `aoff + len <=` the array's length (in 32
    /// bits, which cannot wrap: both are below 2^31), it counts the units,
    /// copies the `len` bytes (a loop up to `COPY_INLINE_MAX`, a call of
    /// [`rt_copy`] past it) and jumps to the returned label. Otherwise it
    /// falls through to the call the caller emits next (the rare path),
    /// whose native makes every check in its own order and reports the
    /// first that fails. Every check comes before the first store, so the
    /// rare path runs as if the form had not been tried. Uses X, Y, Z and
    /// W; the arguments are only read. A constant `aoff` (javac's `0`)
    /// is folded: no test of its sign, no add.
    pub(super) fn inline_copy(&mut self, first: usize, out: bool) -> Label {
        use vcode::U;
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, y, z, w) = (self.regs.x, self.regs.y, self.regs.z, self.regs.w);
        let (arr, aoff, off, len) = (
            self.stack[first],
            self.stack[first + 1],
            self.stack[first + 2],
            self.stack[first + 3],
        );
        // The length (kept in its home or W until the copy). A negative
        // one is, zero-extended, at least 2^31: past every area (below),
        // so it needs no test of its own; until that check its units are
        // only compared, never counted.
        let rl = self.reg_of(len, w);
        // The words and the budget: the units a native moving `len`
        // bytes charges, one and one per 4 KiB.
        let words = self.host_words(z);
        let count = Reg::<UL>::phys(x);
        self.units_after(count, Reg::<UL>::phys(y), rl, words, rare);
        // The area's range, in 64 bits: a negative `off` is, zero-extended,
        // at least 2^31, past any lent area (`AreaWords` lends less), and
        // the sum of two values below 2^32 cannot wrap.
        let ro = self.reg_of(off, x);
        let end = Reg::<UL>::phys(x);
        self.f.add(end, ix(ro), ix(rl));
        let area = Reg::<UL>::phys(y);
        self.f
            .bcmp_mem(C::Gt, end, (words, W_AREA_LEN as i32), area, rare);
        // The array: its entry's second word holds its length (bits
        // 0-31) and whether its elements are bytes (bits 40-47). The
        // entry goes into W where the length is in a home of its own (W
        // is then free until the copy), so that Y keeps the directory for
        // the data address below. Z keeps the words where `aoff` is the
        // constant 0 (javac's `doHtoLDMA(TxBuf, 0, ...)`), which needs no
        // register; otherwise it is free from here and the words are
        // loaded again below.
        let ra = self.reg_of(arr, x);
        let dir = self.ld_base(y, Base::Dir);
        let e_in_w = rl.num() != w;
        let e = Reg::<UL>::phys(if e_in_w { w } else { y });
        self.f.ldx(e, Ty::UL, dir, ix(ra), 8, DIR_LEN);
        let aend = Reg::<U>::phys(z);
        let aend = match aoff {
            Val::Const(0) => Reg::<U>::phys(rl.num()),
            Val::Const(c) if c > 0 => {
                self.f
                    .add(aend, Reg::<U>::phys(rl.num()), Operand::Imm(i64::from(c)));
                aend
            }
            aoff => {
                let rao = self.reg_of(aoff, z);
                self.f.blt(rao, 0, rare);
                self.f
                    .add(aend, Reg::<U>::phys(rao.num()), Reg::<U>::phys(rl.num()));
                aend
            }
        };
        self.f.bgt(aend, Reg::<U>::phys(e.num()), rare);
        self.f.rsh(e, e, i64::from(DIR_BYTES_SHIFT));
        self.f.bne(e, 1, rare);
        // Every check passed: the array's bytes at `aoff` (Y).
        let dir = if e_in_w {
            dir
        } else {
            self.ld_base(y, Base::Dir)
        };
        let at = Reg::<UL>::phys(y);
        self.bytes_at(at, dir, ra, aoff, z);
        // The units counted (nothing can fail from here on), then the
        // area's bytes at `off` (X).
        let (words, units) = if aoff == Val::Const(0) {
            (words, Reg::<UL>::phys(x))
        } else {
            (self.host_words(x), Reg::<UL>::phys(z))
        };
        self.f.rsh(units, ix(rl), 12);
        self.f.add(units, units, 1);
        self.f.add_mem_reg(true, words, W_WORK as i32, units);
        let base = Reg::<UL>::phys(x);
        self.f.ld(base, words, W_AREA_BASE);
        let ro = self.reg_of(off, z);
        self.f.add(base, base, ix(ro));
        let (src, dst) = if out { (p(x), p(y)) } else { (p(y), p(x)) };
        let rl = self.reg_of(len, w);
        let n = Reg::<UL>::phys(w);
        if rl.num() != w {
            self.f.mov(n, Reg::<UL>::phys(rl.num()));
        }
        // Up to `COPY_INLINE_MAX` bytes: `copy_down` (16 or 8 bytes at a
        // time from the end, overlapping at the start; under 8, byte by
        // byte). Every access stays inside the two checked ranges. Past
        // it, `rt_copy` (a `memcpy`), with the homes saved around it.
        let t = Reg::<UL>::phys(z);
        let long = self.f.genlabel();
        self.f.bgt(n, COPY_INLINE_MAX as i64, long);
        self.copy_down(src, dst, 0, n, t, done);
        self.f.jmp(done);
        self.f.label(long);
        let below = self.stack.len();
        self.runtime(
            rt_copy as *const () as usize,
            &[Arg::Reg(dst.any()), Arg::Reg(src.any()), Arg::Reg(n.any())],
            below,
        );
        self.f.jmp(done);
        self.f.label(rare);
        done
    }

    /// [`InlineForm::TailPush`] in place, for the tail-site native call
    /// whose four arguments `(array, off, chan, len)` are the stack's
    /// entries from `first` (where they are: a constant, a local's home or
    /// their own): with `w` the invocation's [`crate::HostWords`], if
    /// `chan`, zero-extended, is `w.tail.chan` (the channel lent: at most
    /// `0xffff`, so that this is also the native's range check),
    /// `w.work + 1 + len / 4096 < w.bound` (unsigned, `len` zero-extended),
    /// `off >= 0`, `off + len <=` the array's length (unsigned, in 32
    /// bits), the array's directory entry says bytes (`null`'s does not),
    /// `len <= w.tail.max_message` (in 64 bits, `len` zero-extended: a
    /// negative one is at least 2^31, past every `max_message`, so this
    /// is also the native's `len >= 0`; and a non-negative one with a
    /// non-negative `off` makes a sum below 2^32, so the range check
    /// above did not wrap), `w.tail.frames < w.tail.max_frames` and
    /// `w.tail.bytes + len <= w.tail.max_bytes` (64 bits), it counts the
    /// units, the frame and the bytes, records
    /// `(array, off, len)` in `w.tail`, lends no channel from then on (the
    /// high half of `w.tail.chan` set: no zero-extended `int` equals it)
    /// and jumps to the returned label. Otherwise it falls through to the
    /// call the caller emits next (the rare path), whose native makes
    /// every check in its own order and reports the first that fails.
    ///
    /// The checks are the native's (`txPush#tail`: the budget's count, the
    /// array, `len`, `off`, the range, the channel, `len` against the
    /// largest message, the frames, the bytes), in its order but for two:
    /// the channel first, so that while none is lent (a `doRx`, a message
    /// that goes as a frame) one load and compare send the call to the
    /// native; and the budget's count last, so that the count stays in a
    /// register for its store (3 instructions fewer). The order among them
    /// changes nothing: every one comes before the first store, and where
    /// one fails the native makes them all again in its order. Uses X, Y,
    /// Z and W; the arguments are only read.
    pub(super) fn inline_tail(&mut self, first: usize) -> Label {
        use vcode::U;
        use vcode::ext::Exit;
        let (rare, done) = (self.f.genlabel(), self.f.genlabel());
        let (x, y, z, w) = (self.regs.x, self.regs.y, self.regs.z, self.regs.w);
        let (arr, off, chan, len) = (
            self.stack[first],
            self.stack[first + 1],
            self.stack[first + 2],
            self.stack[first + 3],
        );
        let words = self.host_words(z);
        // The channel lent (`call_native` sends a constant outside
        // `0..=0xffff` to the call alone).
        let lent = Reg::<UL>::phys(y);
        let at = (words, W_TAIL_CHAN as i32);
        match chan {
            Val::Const(c) => self.f.bcmp_mem_imm(C::Ne, at, c, lent, rare),
            chan => {
                let rc = self.reg_of(chan, x);
                self.f.bcmp_mem(C::Ne, ix(rc), at, lent, rare);
            }
        }
        // The length (kept in its home or W until its last use).
        let rl = self.reg_of(len, w);
        // The array: its entry's second word holds its length (bits
        // 0-31) and whether its elements are bytes (bits 40-47); only the
        // entry is needed (the message is recorded by its handle), so it
        // goes into Y over the directory.
        let ra = self.reg_of(arr, x);
        let dir = self.ld_base(y, Base::Dir);
        let e = Reg::<UL>::phys(y);
        self.f.ldx(e, Ty::UL, dir, ix(ra), 8, DIR_LEN);
        // `off + len` against the array's length; Z (the words) holds it
        // where `off` is not the constant 0 (javac's `txPush(TxBuf, 0,
        // ...)`), and the words are loaded again after.
        let aend = Reg::<U>::phys(z);
        let (aend, reload) = match off {
            Val::Const(0) => (Reg::<U>::phys(rl.num()), false),
            Val::Const(c) if c > 0 => {
                self.f
                    .add(aend, Reg::<U>::phys(rl.num()), Operand::Imm(i64::from(c)));
                (aend, true)
            }
            off => {
                let ro = self.reg_of(off, z);
                self.f.blt(ro, 0, rare);
                self.f
                    .add(aend, Reg::<U>::phys(ro.num()), Reg::<U>::phys(rl.num()));
                (aend, true)
            }
        };
        self.f.bgt(aend, Reg::<U>::phys(e.num()), rare);
        self.f.rsh(e, e, i64::from(DIR_BYTES_SHIFT));
        self.f.bne(e, 1, rare);
        let words = if reload { self.host_words(z) } else { words };
        // The largest message, which is also the native's test of `len >=
        // 0`: a negative `len`, zero-extended, is at least 2^31, past
        // every `max_message` (`TailWords`). Then the push budgets (64
        // bits: `len` is below 2^31 here).
        let t = Reg::<UL>::phys(x);
        let u = Reg::<UL>::phys(y);
        self.f
            .bcmp_mem(C::Gt, ix(rl), (words, W_TAIL_MAX_MESSAGE as i32), u, rare);
        self.f.ld(t, words, W_TAIL_FRAMES);
        self.f
            .bcmp_mem(C::Ge, t, (words, W_TAIL_MAX_FRAMES as i32), u, rare);
        self.f.ld(t, words, W_TAIL_BYTES);
        self.f.add(t, t, ix(rl));
        self.f
            .bcmp_mem(C::Gt, t, (words, W_TAIL_MAX_BYTES as i32), u, rare);
        // A frame's room lent (`FrameWords`): the push is eager, and writes
        // its frame (`inline_frame`) instead of recording the message.
        let eager = self.f.genlabel();
        self.f
            .bcmp_mem_imm(C::Ne, (words, W_FRAME_AT as i32), 0, t, eager);
        // The budget last, so that its count stays in a register for its
        // store: the units a native moving `len` bytes charges, one and
        // one per 4 KiB.
        let count = Reg::<UL>::phys(y);
        self.units_after(count, Reg::<UL>::phys(x), rl, words, rare);
        // Every check passed: the counts, the record, and no channel lent
        // from here on.
        self.f.add_mem_reg(true, words, W_TAIL_BYTES as i32, ix(rl));
        self.f.add_mem_imm(true, words, W_TAIL_FRAMES as i32, 1);
        self.f.st(count, words, W_WORK);
        self.f.st(rl, words, W_TAIL_LEN);
        match (off, arr) {
            // javac's `txPush(msg, 0, ...)` with the array in a register
            // (a local's home, the frame's slot loaded, or W): the array
            // and the offset of 0 are one 8-byte store of the array's
            // register, zero-extended as every `int` register is (`ix`),
            // into `TailWords::array` and the `off` after it (little-
            // endian: the array's 32 bits first, then 32 zero bits), where
            // two stores were (1 instruction fewer per lent `doTx`,
            // `xthr_count` send 660.0 to 659.0). A constant array (only
            // `null`, which the directory check above sent to the rare
            // path) keeps the two stores.
            (Val::Const(0), arr)
                if cfg!(target_endian = "little") && !matches!(arr, Val::Const(_)) =>
            {
                const { assert!(W_TAIL_OFF == W_TAIL_ARRAY + 4) };
                let ra = self.reg_of(arr, x);
                self.f.st(ix(ra), words, W_TAIL_ARRAY);
            }
            (off, arr) => {
                match off {
                    Val::Const(c) => self.f.st_imm32(words, W_TAIL_OFF as i32, c),
                    off => {
                        let ro = self.reg_of(off, y);
                        self.f.st(ro, words, W_TAIL_OFF);
                    }
                }
                let ra = self.reg_of(arr, x);
                self.f.st(ra, words, W_TAIL_ARRAY);
            }
        }
        self.f.st_imm32(words, W_TAIL_CHAN as i32 + 4, -1);
        self.f.jmp(done);
        self.f.label(eager);
        self.inline_frame(first, words, rl, rare, done);
        self.f.label(rare);
        done
    }

    /// The address of a `byte[]`'s element `off` into `into`: the array's
    /// data (its directory entry, `ra` its handle, `dir` the directory)
    /// plus `off`, for an inline form whose checks have passed (`off >= 0`
    /// and in range). A constant offset is added as an immediate, another
    /// from its register (loaded into `scratch` if it has none).
    fn bytes_at(&mut self, into: Reg<UL>, dir: Reg<P>, ra: R, off: Val, scratch: u8) {
        self.f.ldx(into, Ty::P, dir, ix(ra), 8, DIR_DATA);
        match off {
            Val::Const(0) => {}
            Val::Const(c) if c > 0 => self.f.add(into, into, i64::from(c)),
            off => {
                let ro = self.reg_of(off, scratch);
                self.f.add(into, into, ix(ro));
            }
        }
    }

    /// The eager end of [`InlineForm::TailPush`] (`inline_tail`), reached
    /// with every check of the deferring form passed and nothing written,
    /// where the host lent a frame's room ([`crate::FrameWords`]): with
    /// `w` the words (in `words`) and `len` in `rl`, if `len <=
    /// w.frame.room` (the room after a header) and the budget's count
    /// stays below its bound, it counts the units, the frame and the bytes
    /// as the deferring form does, records the frame's length
    /// (`w.frame.wrote`), lends no channel from then on, and writes the
    /// frame at `w.frame.at`: the template's [`crate::FRAME_HEADER`]
    /// bytes, the three length fields patched as unet's
    /// `frame::patch_lengths_from` patches them (big-endian; the IPv4
    /// checksum by RFC 1624 from the template's sum), then the message
    /// (`copy_down` up to `COPY_INLINE_MAX` bytes, `rt_copy` past it).
    /// Then it jumps to `done`. If either check fails it goes to `rare`
    /// having written nothing. Uses X, Y, Z and W; the arguments are only
    /// read.
    fn inline_frame(&mut self, first: usize, words: Reg<P>, rl: R, rare: Label, done: Label) {
        use crate::natives::{
            FRAME_HEADER, FRAME_IP, FRAME_IP_CSUM, FRAME_IP_TOTAL_LEN, FRAME_UDP, FRAME_UDP_LEN,
        };
        use vcode::U;
        use vcode::ext::{Bswap, Exit};
        let (x, y, z, w) = (self.regs.x, self.regs.y, self.regs.z, self.regs.w);
        let (arr, off, len) = (
            self.stack[first],
            self.stack[first + 1],
            self.stack[first + 3],
        );
        // The room: `len` is below 2^31 here (the largest message's check).
        let room = Reg::<UL>::phys(y);
        self.f
            .bcmp_mem(C::Gt, ix(rl), (words, W_FRAME_ROOM as i32), room, rare);
        let count = Reg::<UL>::phys(y);
        self.units_after(count, Reg::<UL>::phys(x), rl, words, rare);
        // Every check passed: the counts, the frame's length, and no
        // channel lent from here on. The host reads them once the
        // invocation has returned, so their order with the frame's bytes
        // is free.
        self.f.add_mem_reg(true, words, W_TAIL_BYTES as i32, ix(rl));
        self.f.add_mem_imm(true, words, W_TAIL_FRAMES as i32, 1);
        self.f.st(count, words, W_WORK);
        let t = Reg::<UL>::phys(x);
        self.f.add(t, ix(rl), FRAME_HEADER as i64);
        self.f.st(t, words, W_FRAME_WROTE);
        self.f.st_imm32(words, W_TAIL_CHAN as i32 + 4, -1);
        // The header: the template's bytes (three moves of 16 and one of
        // 16 overlapping the third, 54 bytes), into the frame at Z (the
        // words are not needed after these loads).
        let sum = Reg::<UL>::phys(y);
        self.f.ld(sum, words, W_FRAME_SUM);
        let tpl = p(x);
        self.f.ld(tpl, words, W_FRAME_TEMPLATE);
        let dst = p(z);
        self.f.ld(dst, words, W_FRAME_AT);
        const _: () = assert!(FRAME_HEADER > 32 && FRAME_HEADER <= 64);
        for at in [0, 16, 32, FRAME_HEADER as i32 - 16] {
            self.f.move16(dst, at, tpl, at, None);
        }
        // The lengths, as `patch_lengths_from`: the IPv4 total length's
        // low 16 bits, the checksum `!fold(sum + total)` (the sum is below
        // 2^17, so 64 bits never carry out and two folds make 16 bits),
        // the UDP length's low 16 bits; each stored big-endian.
        let tot = Reg::<U>::phys(x);
        self.f.add(
            tot,
            Reg::<U>::phys(rl.num()),
            Operand::Imm((FRAME_HEADER - FRAME_IP) as i64),
        );
        self.f.and(tot, tot, Operand::Imm(0xffff));
        self.f.add(sum, sum, Reg::<UL>::phys(x));
        self.f.bswap16(tot, tot);
        self.f.sts(tot, dst, FRAME_IP_TOTAL_LEN as i64);
        let t = Reg::<UL>::phys(x);
        for _ in 0..2 {
            self.f.rsh(t, sum, 16);
            self.f.and(sum, sum, 0xffff);
            self.f.add(sum, sum, t);
        }
        self.f.com(sum, sum);
        self.f.bswap16(sum, sum);
        self.f.sts(sum, dst, FRAME_IP_CSUM as i64);
        let udp = Reg::<U>::phys(x);
        self.f.add(
            udp,
            Reg::<U>::phys(rl.num()),
            Operand::Imm((FRAME_HEADER - FRAME_UDP) as i64),
        );
        self.f.bswap16(udp, udp);
        self.f.sts(udp, dst, FRAME_UDP_LEN as i64);
        // The message: the array's bytes at `off` (X) after the header.
        let ra = self.reg_of(arr, x);
        let dir = self.ld_base(y, Base::Dir);
        let src = Reg::<UL>::phys(x);
        self.bytes_at(src, dir, ra, off, y);
        let rl = self.reg_of(len, w);
        let n = Reg::<UL>::phys(w);
        if rl.num() != w {
            self.f.mov(n, Reg::<UL>::phys(rl.num()));
        }
        let long = self.f.genlabel();
        self.f.bgt(n, COPY_INLINE_MAX as i64, long);
        self.copy_down(p(x), dst, FRAME_HEADER as i32, n, Reg::<UL>::phys(y), done);
        self.f.jmp(done);
        self.f.label(long);
        self.f.add(dst, dst, FRAME_HEADER as i64);
        let below = self.stack.len();
        self.runtime(
            rt_copy as *const () as usize,
            &[Arg::Reg(dst.any()), Arg::Reg(p(x).any()), Arg::Reg(n.any())],
            below,
        );
        self.f.jmp(done);
    }
}
