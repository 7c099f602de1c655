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
}

impl Default for RegConfig {
    fn default() -> Self {
        RegConfig {
            callee: [host::CALLEE_SAVED_GPR, 0],
            unavail: [host::RESERVED_GPR, host::RESERVED_XMM],
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
}

/// A priority order cut into runs whose register numbers rise or fall
/// monotonically: `(mask, falling)` per run, in order. Within a run the
/// first free register in priority order is the lowest (rising) or the
/// highest (falling) free one, so `getreg` is one bit-scan per run.
#[derive(Clone, Copy)]
struct Runs {
    runs: [(u16, bool); 16],
    len: usize,
}

const fn runs_of(order: &[u8]) -> Runs {
    let mut out = Runs {
        runs: [(0, false); 16],
        len: 0,
    };
    let mut i = 0;
    while i < order.len() {
        let mut mask = bit(order[i]);
        let falling = i + 1 < order.len() && order[i + 1] < order[i];
        let mut j = i + 1;
        while j < order.len() && ((order[j] < order[j - 1]) == falling) {
            mask |= bit(order[j]);
            j += 1;
        }
        out.runs[out.len] = (mask, falling);
        out.len += 1;
        i = j;
    }
    out
}

const TEMP_RUNS: Runs = runs_of(&host::TEMP_ORDER);
const PERSIST_RUNS: Runs = runs_of(&host::PERSIST_ORDER);
const FLOAT_RUNS: Runs = runs_of(&host::FLOAT_ORDER);

/// The first register of `runs` that `avail` has, in priority order.
#[inline(always)]
fn first_in(runs: &Runs, avail: u16) -> Option<u8> {
    let mut i = 0;
    while i < runs.len {
        let (mask, falling) = runs.runs[i];
        let m = avail & mask;
        if m != 0 {
            return Some(if falling {
                15 - m.leading_zeros() as u8
            } else {
                m.trailing_zeros() as u8
            });
        }
        i += 1;
    }
    None
}

/// The allocator state of one function under construction, as backends
/// see it.
#[derive(Clone, Debug)]
pub struct RegAlloc {
    pub(crate) cfg: RegConfig,
    /// Allocatable and currently free.
    free: [u16; 2],
    /// Callee-saved (by the config) registers touched so far; `end` saves them.
    pub(crate) used_callee: [u16; 2],
    /// Float registers allocated persistent; call sites save them.
    pub(crate) persist_xmm: u16,
    /// Released by `putreg` and not handed out since.
    released: [u16; 2],
    /// Registers written by an instruction of this function (bit `n` for
    /// integer register `n`, bit `32 + n` for float register `n`; bits 31
    /// and 63 are the harmless marks of immediates; calls and extension
    /// instructions mark every register they name). `getreg`
    /// never hands these out, so a fixed name the function has written
    /// ([`Reg::t`](crate::Reg::t)) cannot alias a register from `getreg`;
    /// `putreg` clears the mark.
    named: u64,
    pub(crate) leaf: bool,
}

impl RegAlloc {
    pub(crate) fn new(cfg: RegConfig, leaf: bool) -> Self {
        let free = [!cfg.unavail[0], !cfg.unavail[1]];
        RegAlloc {
            cfg,
            free,
            used_callee: [0; 2],
            persist_xmm: 0,
            released: [0; 2],
            named: 0,
            leaf,
        }
    }

    /// Notes the registers an instruction names (`(float, number)`, with
    /// `u8::MAX` for an immediate): `getreg` will not hand them out. With
    /// constant registers (the fixed names) this folds to one `or` of a
    /// constant.
    #[inline(always)]
    pub(crate) fn note_used(&mut self, regs: &[(bool, u8)]) {
        let mut m = 0u64;
        for &(f, n) in regs {
            // One `bts` per register: the shift is taken modulo 64, and an
            // immediate's u8::MAX lands on bit 63 or 31, outside both files.
            m |= 1u64.wrapping_shl(n as u32 + 32 * f as u32);
        }
        self.named |= m;
    }

    /// Registers of one file that `getreg` may hand out: allocatable,
    /// not allocated, and not named by an instruction since.
    #[inline]
    fn available(&self, float: bool) -> u16 {
        self.free[float as usize] & !((self.named >> (32 * float as u32)) as u16)
    }

    /// True if an instruction of this function named register `n` while
    /// `getreg` had not handed it out (a fixed name, or a parameter), so
    /// that `getreg` will not hand it out.
    pub fn is_named(&self, float: bool, n: u8) -> bool {
        n < 16 && (self.named >> (n as u32 + 32 * float as u32)) & 1 != 0
    }

    /// The function's register classification.
    pub fn config(&self) -> &RegConfig {
        &self.cfg
    }

    /// True if the function was declared a leaf.
    pub fn is_leaf(&self) -> bool {
        self.leaf
    }

    /// Callee-saved registers touched so far (integer, float masks).
    pub fn used_callee_saved(&self) -> [u16; 2] {
        self.used_callee
    }

    /// Float registers allocated as persistent, which call sites save.
    pub fn persistent_floats(&self) -> u16 {
        self.persist_xmm
    }

    #[inline]
    fn callee_mask(&self, float: bool) -> u16 {
        self.cfg.callee[float as usize]
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
        let f = float as usize;
        let b = bit(n & 15);
        if n >= 16 || self.free[f] & b == 0 {
            return false;
        }
        self.free[f] &= !b;
        self.released[f] &= !b;
        self.used_callee[f] |= b & self.callee_mask(float);
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

    /// True if `putreg` released `n` and nobody took it since.
    pub fn was_released(&self, float: bool, n: u8) -> bool {
        self.released[float as usize] & bit(n) != 0
    }

    /// True if `n` is allocatable and not allocated.
    pub fn is_free(&self, float: bool, n: u8) -> bool {
        self.free[float as usize] & bit(n) != 0
    }

    /// How many registers `getreg` would hand out for `class` now (the
    /// same pools as `getreg`).
    pub fn free_count(&self, class: Class, float: bool) -> usize {
        let of = |order: &[u8]| order.iter().fold(0u16, |m, &n| m | bit(n));
        let mask = if float {
            of(&host::FLOAT_ORDER) & self.available(true)
        } else if class == Class::Persistent && !self.leaf {
            of(&host::PERSIST_ORDER)
                & self.available(false)
                & host::CALLEE_SAVED_GPR
                & self.callee_mask(false)
        } else {
            of(&host::TEMP_ORDER) & self.available(false)
        };
        mask.count_ones() as usize
    }

    /// The register `getreg` would hand out for `class`, or `None` when
    /// the class is exhausted: a bit-scan per monotone run of the
    /// priority order (x86-64 temporaries: three runs), no loop over the
    /// registers.
    #[inline(always)]
    fn pick(&self, class: Class, float: bool) -> Option<u8> {
        if float {
            first_in(&FLOAT_RUNS, self.available(true))
        } else if class == Class::Persistent && !self.leaf {
            // Survives native calls only if the ABI preserves it.
            first_in(
                &PERSIST_RUNS,
                self.available(false) & host::CALLEE_SAVED_GPR & self.callee_mask(false),
            )
        } else {
            first_in(&TEMP_RUNS, self.available(false))
        }
    }

    /// `v_getreg`: a bit-scan on the free mask; `None` when the class is
    /// exhausted (the caller builds the error, out of line).
    #[inline(always)]
    pub(crate) fn try_getreg(&mut self, class: Class, float: bool) -> Option<u8> {
        let n = self.pick(class, float)?;
        let f = float as usize;
        self.free[f] &= !bit(n);
        self.released[f] &= !bit(n);
        self.used_callee[f] |= bit(n) & self.callee_mask(float);
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
        let f = float as usize;
        let b = bit(n & 15);
        if n >= 16 || (!self.cfg.unavail[f] & !self.free[f] & b) == 0 {
            return false;
        }
        self.free[f] |= b;
        self.released[f] |= b;
        self.named &= !(1u64 << ((n & 15) as u32 + 32 * float as u32));
        if float {
            self.persist_xmm &= !b;
        }
        true
    }

    pub(crate) fn putreg(&mut self, float: bool, n: u8) -> Result<(), ErrorKind> {
        let f = float as usize;
        let allocatable = !self.cfg.unavail[f];
        if n >= 16 || allocatable & bit(n) == 0 || self.free[f] & bit(n) != 0 {
            return Err(ErrorKind::BadRegister {
                reg: host::reg_name(float, n).to_string(),
                why: "not allocated (released twice, or never handed out)",
            });
        }
        self.free[f] |= bit(n);
        self.released[f] |= bit(n);
        self.named &= !(1u64 << (n as u32 + 32 * float as u32));
        if float {
            self.persist_xmm &= !bit(n);
        }
        Ok(())
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
        assert_eq!(a.used_callee[0], host::CALLEE_SAVED_GPR);
    }

    #[test]
    fn leaf_persistent_registers_use_caller_saved_first() {
        let mut a = RegAlloc::new(RegConfig::default(), true);
        assert_eq!(a.getreg(Class::Persistent, false).unwrap(), R10);
        assert_eq!(a.used_callee[0], 0);
    }

    #[test]
    fn bit_scan_runs_follow_every_order() {
        // The runs give the same register as a walk of the order, for
        // every availability mask.
        for (runs, order) in [
            (&TEMP_RUNS, &host::TEMP_ORDER[..]),
            (&PERSIST_RUNS, &host::PERSIST_ORDER[..]),
            (&FLOAT_RUNS, &host::FLOAT_ORDER[..]),
        ] {
            for avail in 0..=u16::MAX {
                let walk = order.iter().copied().find(|&n| avail & bit(n) != 0);
                assert_eq!(first_in(runs, avail), walk, "{avail:#x}");
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
        assert_eq!(a.used_callee[0], bit(r));
    }
}
