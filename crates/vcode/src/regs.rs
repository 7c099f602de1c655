//! Register allocation the paper's way (§3.2, §5.3): the client asks for a
//! register of a class (temporary, or persistent across calls) and vcode
//! hands them out in a fixed, documented priority order. There is no
//! spilling: when a class runs out, `getreg` says so.
//!
//! A [`RegConfig`] overrides, per function, which physical registers are
//! caller-saved, callee-saved or unavailable (paper §5.3), for code that
//! runs under conventions of its own, such as an interrupt handler that
//! must preserve every register it touches.

use crate::error::ErrorKind;
use crate::host::{self, bit};

/// The two register classes of `v_getreg`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// May be clobbered by a call the function makes.
    Temp,
    /// Keeps its value across calls the function makes.
    Persistent,
}

/// How a physical register is treated in one function.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RegClass {
    /// The function may clobber it without saving.
    CallerSaved,
    /// The function saves it in the prologue and restores it on return
    /// if it uses it.
    CalleeSaved,
    /// Never handed out.
    Unavailable,
}

/// Per-function register classification (paper §5.3).
///
/// The default is the host ABI. The registers the backend keeps for its
/// own sequences (`rax`, `rcx`, `r11`, `rsp`, `rbp`, `xmm15`) cannot be
/// reclassified.
///
/// ```
/// use vcode::{RegConfig, RegClass, host::gpr};
/// // Code called from a context where every register is live:
/// let cfg = RegConfig::all_callee_saved();
/// assert_eq!(cfg.gpr(gpr::RDI), RegClass::CalleeSaved);
/// let mut cfg = RegConfig::default();
/// cfg.set_gpr(gpr::R12, RegClass::Unavailable).unwrap();
/// assert!(cfg.set_gpr(gpr::RAX, RegClass::CallerSaved).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegConfig {
    /// Per register file (integer, float): callee-saved and unavailable masks.
    callee: [u16; 2],
    unavail: [u16; 2],
    /// The callee-saved registers the function's caller keeps itself
    /// ([`RegConfig::keep_in_caller`]): a subset of `callee`.
    kept: [u16; 2],
}

impl Default for RegConfig {
    fn default() -> Self {
        RegConfig {
            callee: [host::CALLEE_SAVED_GPR, 0],
            unavail: [host::RESERVED_GPR, host::RESERVED_XMM],
            kept: [0, 0],
        }
    }
}

impl RegConfig {
    /// Every allocatable register is callee-saved: whatever the function
    /// touches, it restores.
    pub fn all_callee_saved() -> Self {
        let d = RegConfig::default();
        RegConfig {
            callee: [!d.unavail[0], !d.unavail[1]],
            unavail: d.unavail,
            kept: [0, 0],
        }
    }

    fn class(&self, f: usize, n: u8) -> RegClass {
        let b = bit(n & 15);
        if self.unavail[f] & b != 0 {
            RegClass::Unavailable
        } else if self.callee[f] & b != 0 {
            RegClass::CalleeSaved
        } else {
            RegClass::CallerSaved
        }
    }

    /// The class of integer register `n`.
    pub fn gpr(&self, n: u8) -> RegClass {
        self.class(0, n)
    }

    /// The class of float register `n`.
    pub fn xmm(&self, n: u8) -> RegClass {
        self.class(1, n)
    }

    fn set(&mut self, f: usize, n: u8, class: RegClass) -> Result<(), ErrorKind> {
        let reserved = if f == 0 {
            host::RESERVED_GPR
        } else {
            host::RESERVED_XMM
        };
        if n >= 16 || reserved & bit(n) != 0 {
            return Err(ErrorKind::BadRegister {
                reg: host::reg_name(f == 1, n).to_string(),
                why: "kept by the backend and cannot be reclassified",
            });
        }
        self.callee[f] &= !bit(n);
        self.unavail[f] &= !bit(n);
        self.kept[f] &= !bit(n);
        match class {
            RegClass::CalleeSaved => self.callee[f] |= bit(n),
            RegClass::Unavailable => self.unavail[f] |= bit(n),
            RegClass::CallerSaved => {}
        }
        Ok(())
    }

    /// Reclassifies integer register `n`.
    pub fn set_gpr(&mut self, n: u8, class: RegClass) -> Result<(), ErrorKind> {
        self.set(0, n, class)
    }

    /// Reclassifies float register `n`.
    pub fn set_xmm(&mut self, n: u8, class: RegClass) -> Result<(), ErrorKind> {
        self.set(1, n, class)
    }

    /// Integer register `n`, callee-saved, stays callee-saved for the
    /// function's allocation (a [`Class::Persistent`] register, which the
    /// functions it calls keep), but the function's prologue does not save
    /// it nor its epilogue restore it: its caller keeps it itself. For a
    /// caller with a contract of its own, such as a host that enters the
    /// code through an `asm!` block declaring the register clobbered, so
    /// that the register is saved once (by the caller, where it needs it)
    /// rather than by both sides of the call. Refused for a register that
    /// is not callee-saved.
    pub fn keep_in_caller(&mut self, n: u8) -> Result<(), ErrorKind> {
        if n >= 16 {
            return Err(ErrorKind::BadRegister {
                reg: format!("r{n}"),
                why: "no such integer register",
            });
        }
        if self.gpr(n) != RegClass::CalleeSaved {
            return Err(ErrorKind::BadRegister {
                reg: host::reg_name(false, n).to_string(),
                why: "not callee-saved, so there is no save for the caller to keep",
            });
        }
        self.kept[0] |= bit(n);
        Ok(())
    }

    /// Whether the caller keeps integer register `n`
    /// ([`RegConfig::keep_in_caller`]).
    pub fn kept_in_caller(&self, n: u8) -> bool {
        n < 16 && self.kept[0] & bit(n) != 0
    }
}

/// The allocator's masks are in *priority space*: bit `i` (`i < 16`)
/// stands for the `i`-th integer register of [`host::TEMP_ORDER`], bit
/// `16 + i` for the `i`-th float register of [`host::FLOAT_ORDER`]. The
/// first free register in priority order is then the lowest set bit of
/// one word: `getreg` is an `and`, a bit-scan and a table read, whatever
/// the order, and every mask of the allocator fits in one `u32`.
///
/// The persistent order must be a subsequence of the temporary one, in
/// the same relative order, and the orders must cover every register the
/// backend does not keep: checked at compile time below.
const INT_ORDER: &[u8] = &host::TEMP_ORDER;
const FLT_ORDER: &[u8] = &host::FLOAT_ORDER;

/// The priority bit of register number `n` of file `f`, at index
/// `256 f + n`: 0 for numbers of no register (16 and up, an immediate's
/// `u8::MAX`) and for registers in no order. Indexed by any `u8`, so that
/// a run-time register costs one load and no range check. A `const` read
/// through a reference, so that it folds for constant registers (the
/// fixed names) in client crates.
const PBIT: &[u32; 512] = &{
    let mut t = [0u32; 512];
    let mut i = 0;
    while i < INT_ORDER.len() {
        t[INT_ORDER[i] as usize] = 1 << i;
        i += 1;
    }
    let mut i = 0;
    while i < FLT_ORDER.len() {
        t[256 + FLT_ORDER[i] as usize] = 1 << (16 + i);
        i += 1;
    }
    t
};

/// The register number of each priority bit.
const REG_OF: &[u8; 32] = &{
    let mut t = [0u8; 32];
    let mut i = 0;
    while i < INT_ORDER.len() {
        t[i] = INT_ORDER[i];
        i += 1;
    }
    let mut i = 0;
    while i < FLT_ORDER.len() {
        t[16 + i] = FLT_ORDER[i];
        i += 1;
    }
    t
};

/// A register-number mask of file `f` in priority space.
const fn to_prio(f: usize, m: u16) -> u32 {
    let mut out = 0;
    let mut n = 0;
    while n < 16 {
        if m & (1 << n) != 0 {
            out |= PBIT[256 * f + n];
        }
        n += 1;
    }
    out
}

/// The register-number mask of each value of the bytes of a priority
/// mask: bytes 0 and 1 (integer), 2 and 3 (float).
const BYTE_REGS: &[[u16; 256]; 4] = &{
    let mut t = [[0u16; 256]; 4];
    let mut k = 0;
    while k < 4 {
        let mut v = 0;
        while v < 256 {
            let mut b = 0;
            while b < 8 {
                let i = 8 * k + b;
                if v & (1 << b) != 0 && PBIT_OF_INDEX[i] {
                    t[k][v] |= bit(REG_OF[i]);
                }
                b += 1;
            }
            v += 1;
        }
        k += 1;
    }
    t
};

/// True for the priority bits that stand for a register.
const PBIT_OF_INDEX: [bool; 32] = {
    let mut t = [false; 32];
    let mut i = 0;
    while i < INT_ORDER.len() {
        t[i] = true;
        i += 1;
    }
    let mut i = 0;
    while i < FLT_ORDER.len() {
        t[16 + i] = true;
        i += 1;
    }
    t
};

/// A priority-space mask as register-number masks (integer, float): four
/// table reads, whatever the number of registers.
fn to_regs(m: u32) -> [u16; 2] {
    if m == 0 {
        return [0, 0];
    }
    let [b0, b1, b2, b3] = m.to_le_bytes().map(usize::from);
    let t = BYTE_REGS;
    [t[0][b0] | t[1][b1], t[2][b2] | t[3][b3]]
}

const TEMP_P: u32 = (1 << INT_ORDER.len()) - 1;
const FLOAT_P: u32 = ((1 << FLT_ORDER.len()) - 1) << 16;
/// The persistent order's registers; [`PERSIST_ABI_P`] those of them the
/// ABI preserves.
const PERSIST_P: u32 = to_prio(0, {
    let mut m = 0;
    let mut i = 0;
    while i < host::PERSIST_ORDER.len() {
        m |= bit(host::PERSIST_ORDER[i]);
        i += 1;
    }
    m
});
const PERSIST_ABI_P: u32 = PERSIST_P & to_prio(0, host::CALLEE_SAVED_GPR);

const _: () = {
    assert!(INT_ORDER.len() <= 16 && FLT_ORDER.len() <= 16);
    // Persistent order = the temporary order restricted to its registers.
    let mut last = 0;
    let mut i = 0;
    while i < host::PERSIST_ORDER.len() {
        let b = PBIT[host::PERSIST_ORDER[i] as usize];
        assert!(b != 0 && b > last, "PERSIST_ORDER follows TEMP_ORDER");
        last = b;
        i += 1;
    }
    // Every register the backend does not keep is in an order.
    assert!(to_prio(0, !host::RESERVED_GPR).count_ones() == (!host::RESERVED_GPR).count_ones());
    assert!(to_prio(1, !host::RESERVED_XMM).count_ones() == (!host::RESERVED_XMM).count_ones());
};

/// The allocator state of one function under construction, as backends
/// see it. Its masks are in priority space (bit `i` is the `i`-th register
/// of a `getreg` order), one `u32` each.
#[derive(Clone, Debug)]
pub struct RegAlloc {
    pub(crate) cfg: RegConfig,
    /// Allocatable (by the config).
    allocatable: u32,
    /// Callee-saved (by the config; allocatable ones only).
    callee: u32,
    /// The callee-saved ones the caller keeps (by the config): `end` does
    /// not save them.
    kept: u32,
    /// Allocated now (by `getreg` or a claim). The free registers are the
    /// allocatable ones not held.
    held: u32,
    /// Allocated at some time in this function: with `callee`, the
    /// registers `end` saves; with the free ones, those `putreg` released
    /// and nobody took since. One `or` when a register is taken, instead
    /// of a mask of each kept up to date on every `getreg` and `putreg`.
    taken: u32,
    /// Float registers allocated persistent (register numbers); call
    /// sites save them.
    pub(crate) persist_xmm: u16,
    /// Registers written by an instruction of this function (calls and
    /// extension instructions mark every register they name), and, from
    /// the start, every register that is not allocatable. `getreg` never
    /// hands these out, so a fixed name the function has written
    /// ([`Reg::t`](crate::Reg::t)) cannot alias a register from `getreg`;
    /// `putreg` clears the mark. Holding the unavailable registers here
    /// makes `getreg`'s pool `!(held | named)` of the class, and
    /// `putreg`'s check one test of `held`.
    named: u32,
    pub(crate) leaf: bool,
}

impl RegAlloc {
    pub(crate) fn new(cfg: RegConfig, leaf: bool) -> Self {
        let allocatable = to_prio(0, !cfg.unavail[0]) | to_prio(1, !cfg.unavail[1]);
        let callee = (to_prio(0, cfg.callee[0]) | to_prio(1, cfg.callee[1])) & allocatable;
        let kept = (to_prio(0, cfg.kept[0]) | to_prio(1, cfg.kept[1])) & callee;
        RegAlloc {
            allocatable,
            callee,
            kept,
            held: 0,
            taken: 0,
            persist_xmm: 0,
            named: !allocatable,
            leaf,
            cfg,
        }
    }

    /// The priority bit of register `n` of the integer (`float` false) or
    /// float file; 0 for `n >= 16` or a register in no order.
    #[inline(always)]
    fn pbit(float: bool, n: u8) -> u32 {
        PBIT[(float as usize) << 8 | n as usize]
    }

    /// Notes the registers an instruction names (`(float, number)`, with
    /// `u8::MAX` for an immediate): `getreg` will not hand them out. A
    /// table read and an `or` per register; with constant registers (the
    /// fixed names) one `or` of a constant.
    #[inline(always)]
    pub(crate) fn note_used(&mut self, regs: &[(bool, u8)]) {
        let mut m = 0u32;
        for &(f, n) in regs {
            // An immediate's u8::MAX has no bit.
            m |= Self::pbit(f, n);
        }
        self.named |= m;
    }

    /// True if an instruction of this function named register `n` while
    /// `getreg` had not handed it out (a fixed name, or a parameter), so
    /// that `getreg` will not hand it out. Registers `getreg` never hands
    /// out (the backend's own) are never marked.
    pub fn is_named(&self, float: bool, n: u8) -> bool {
        self.named & self.allocatable & Self::pbit(float, n) != 0
    }

    /// The function's register classification.
    pub fn config(&self) -> &RegConfig {
        &self.cfg
    }

    /// True if the function was declared a leaf.
    pub fn is_leaf(&self) -> bool {
        self.leaf
    }

    /// The callee-saved registers `end` saves, as priority bits: those
    /// `getreg` or `reserve` handed out, and those an instruction wrote
    /// while free (a fixed name such as [`Reg::s`](crate::Reg::s) used
    /// without `reserve`), so that no function overwrites its caller's;
    /// but those the caller keeps itself ([`RegConfig::keep_in_caller`]).
    #[inline(always)]
    fn saved(&self) -> u32 {
        (self.taken | self.named) & self.callee & !self.kept
    }

    /// Whether the function uses a callee-saved register (the cheap test
    /// of [`used_callee_saved`](RegAlloc::used_callee_saved) being empty).
    #[inline(always)]
    pub fn uses_callee_saved(&self) -> bool {
        self.saved() != 0
    }

    /// Callee-saved registers touched so far, which `end` saves (integer,
    /// float masks of register numbers): claimed with `getreg` or
    /// `reserve`, or written by an instruction while free.
    pub fn used_callee_saved(&self) -> [u16; 2] {
        to_regs(self.saved())
    }

    /// The callee-saved registers touched so far as the allocator keeps
    /// them (one bit per register, in a fixed order that no
    /// [`RegConfig`] changes): one word that determines
    /// [`used_callee_saved`](RegAlloc::used_callee_saved), for a backend
    /// to key what it derives from that.
    #[inline(always)]
    pub(crate) fn used_callee_raw(&self) -> u32 {
        self.saved()
    }

    /// Float registers allocated as persistent, which call sites save.
    pub fn persistent_floats(&self) -> u16 {
        self.persist_xmm
    }

    /// Takes register `n` (a parameter or a client reservation) out of the pool.
    pub(crate) fn claim(&mut self, float: bool, n: u8) -> Result<(), ErrorKind> {
        if self.try_claim(float, n) {
            Ok(())
        } else {
            Err(Self::not_free(float, n))
        }
    }

    /// [`claim`](RegAlloc::claim) without the error: true if `n` was free
    /// and is now taken. A few mask operations, inline, so that a client's
    /// `reserve` of a fixed name costs no call (the error is built out of
    /// line).
    #[inline(always)]
    pub(crate) fn try_claim(&mut self, float: bool, n: u8) -> bool {
        let b = Self::pbit(float, n);
        if self.allocatable & !self.held & b == 0 {
            return false;
        }
        self.take(b);
        true
    }

    /// The error of a claim of a register that is not free.
    #[cold]
    pub(crate) fn not_free(float: bool, n: u8) -> ErrorKind {
        ErrorKind::BadRegister {
            reg: host::reg_name(float, n).to_string(),
            why: "not free (already allocated, reserved by the backend, or unavailable)",
        }
    }

    /// Takes the register of priority bit `b` (free) out of the pool.
    #[inline(always)]
    fn take(&mut self, b: u32) {
        self.held |= b;
        self.taken |= b;
    }

    /// True if `putreg` released `n` and nobody took it since.
    pub fn was_released(&self, float: bool, n: u8) -> bool {
        self.taken & self.allocatable & !self.held & Self::pbit(float, n) != 0
    }

    /// True if `n` is allocatable and not allocated.
    pub fn is_free(&self, float: bool, n: u8) -> bool {
        self.allocatable & !self.held & Self::pbit(float, n) != 0
    }

    /// The pool `getreg` draws from for `class`: allocatable, not
    /// allocated, not named by an instruction since, and of the class.
    #[inline(always)]
    fn pool(&self, class: Class, float: bool) -> u32 {
        let mask = if float {
            FLOAT_P
        } else if class == Class::Persistent && !self.leaf {
            // Survives native calls only if the ABI preserves it.
            PERSIST_ABI_P & self.callee
        } else {
            TEMP_P
        };
        !(self.held | self.named) & mask
    }

    /// How many registers `getreg` would hand out for `class` now (the
    /// same pools as `getreg`).
    pub fn free_count(&self, class: Class, float: bool) -> usize {
        self.pool(class, float).count_ones() as usize
    }

    /// `v_getreg`: the lowest bit of the class's pool; `None` when the
    /// class is exhausted (the caller builds the error, out of line).
    #[inline(always)]
    pub(crate) fn try_getreg(&mut self, class: Class, float: bool) -> Option<u8> {
        let pool = self.pool(class, float);
        if pool == 0 {
            return None;
        }
        let i = pool.trailing_zeros() as usize;
        self.take(1 << i);
        let n = REG_OF[i & 31];
        if float && class == Class::Persistent && !self.leaf {
            self.persist_xmm |= bit(n);
        }
        Some(n)
    }

    /// The error of an exhausted class.
    #[cold]
    pub(crate) fn exhausted(class: Class, float: bool) -> ErrorKind {
        ErrorKind::RegistersExhausted {
            class: if class == Class::Temp {
                "temporary"
            } else {
                "persistent"
            },
            what: if float { "float" } else { "integer" },
        }
    }

    pub(crate) fn getreg(&mut self, class: Class, float: bool) -> Result<u8, ErrorKind> {
        self.try_getreg(class, float)
            .ok_or_else(|| Self::exhausted(class, float))
    }

    /// `v_putreg` when `n` is allocated: true, and `n` is free again;
    /// false (and nothing happens) otherwise, and [`putreg`](RegAlloc::putreg)
    /// says why. A few mask operations, inline.
    #[inline(always)]
    pub(crate) fn try_putreg(&mut self, float: bool, n: u8) -> bool {
        let b = Self::pbit(float, n);
        if self.held & b == 0 {
            return false;
        }
        self.held &= !b;
        self.named &= !b;
        if float {
            self.persist_xmm &= !bit(n);
        }
        true
    }

    pub(crate) fn putreg(&mut self, float: bool, n: u8) -> Result<(), ErrorKind> {
        if self.try_putreg(float, n) {
            Ok(())
        } else {
            Err(ErrorKind::BadRegister {
                reg: host::reg_name(float, n).to_string(),
                why: "not allocated (released twice, or never handed out)",
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::gpr::*;

    #[test]
    fn temporaries_come_in_documented_order() {
        let mut a = RegAlloc::new(RegConfig::default(), false);
        let got: Vec<u8> = (0..11)
            .map(|_| a.getreg(Class::Temp, false).unwrap())
            .collect();
        assert_eq!(got, host::TEMP_ORDER);
        assert!(matches!(
            a.getreg(Class::Temp, false),
            Err(ErrorKind::RegistersExhausted { .. })
        ));
    }

    #[test]
    fn persistent_registers_survive_calls() {
        let mut a = RegAlloc::new(RegConfig::default(), false);
        for want in host::PERSIST_ORDER {
            assert_eq!(a.getreg(Class::Persistent, false).unwrap(), want);
        }
        assert!(a.getreg(Class::Persistent, false).is_err());
        assert_eq!(a.used_callee_saved()[0], host::CALLEE_SAVED_GPR);
    }

    #[test]
    fn leaf_persistent_registers_use_caller_saved_first() {
        let mut a = RegAlloc::new(RegConfig::default(), true);
        assert_eq!(a.getreg(Class::Persistent, false).unwrap(), R10);
        assert_eq!(a.used_callee_saved()[0], 0);
    }

    #[test]
    fn priority_bits_follow_every_order() {
        // The lowest bit of a pool is the first free register of the
        // order, for every availability of the order's registers.
        for (mask, order, float) in [
            (TEMP_P, &host::TEMP_ORDER[..], false),
            (PERSIST_P, &host::PERSIST_ORDER[..], false),
            (FLOAT_P, &host::FLOAT_ORDER[..], true),
        ] {
            for avail in 0..=u16::MAX {
                let walk = order.iter().copied().find(|&n| avail & bit(n) != 0);
                let pool = to_prio(float as usize, avail) & mask;
                let got = (pool != 0).then(|| REG_OF[pool.trailing_zeros() as usize]);
                assert_eq!(got, walk, "{avail:#x}");
                assert_eq!(to_regs(pool)[float as usize], {
                    order.iter().fold(0, |m, &n| m | (avail & bit(n)))
                });
            }
        }
    }

    #[test]
    fn putreg_twice_is_an_error() {
        let mut a = RegAlloc::new(RegConfig::default(), false);
        let r = a.getreg(Class::Temp, false).unwrap();
        a.putreg(false, r).unwrap();
        assert!(a.putreg(false, r).is_err());
        assert!(a.putreg(false, RAX).is_err());
    }

    #[test]
    fn unavailable_registers_are_never_handed_out() {
        let mut cfg = RegConfig::default();
        cfg.set_gpr(R10, RegClass::Unavailable).unwrap();
        let mut a = RegAlloc::new(cfg, false);
        assert_eq!(a.getreg(Class::Temp, false).unwrap(), R9);
    }

    #[test]
    fn all_callee_saved_marks_temporaries_for_saving() {
        let mut a = RegAlloc::new(RegConfig::all_callee_saved(), true);
        let r = a.getreg(Class::Temp, false).unwrap();
        assert_eq!(a.used_callee_saved()[0], bit(r));
    }
}
