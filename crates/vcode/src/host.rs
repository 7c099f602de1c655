//! The host register file and calling convention, as data: register
//! names, argument order, which registers the backends keep for
//! themselves, the fixed names `T<k>`/`S<k>`, and the order in which
//! `getreg` hands registers out.
//!
//! Both backends use this one description, so a program that runs on the
//! reference backend allocates exactly the registers it gets natively. It
//! is the host target's section 1 ("registers and classes"), kept in the
//! target's file, and this module re-exports the one of the host's
//! architecture: on an aarch64 host,
//! [`aarch64::regfile`](crate::aarch64::regfile) (AAPCS64); on any other,
//! [`x86_64::regfile`](crate::x86_64::regfile) (System V). The targets'
//! register numbers play the same roles (`common.rs` checks it at
//! compile time), so only the names differ.

#[cfg(target_arch = "aarch64")]
pub use crate::aarch64::regfile::*;
#[cfg(not(target_arch = "aarch64"))]
pub use crate::x86_64::regfile::*;

/// The assembler name of the host's register `n` (integer or float), `?`
/// past the file: what errors and debug output print. Read from the
/// host's register file, so no target writes it.
pub fn reg_name(float: bool, n: u8) -> &'static str {
    NAMES[float as usize]
        .get(n as usize)
        .copied()
        .unwrap_or("?")
}
