//! The differential tests (`common/differential.rs`) on the aarch64
//! backend, run under emulation (`vcode::emu`, feature `emu`): random
//! programs against the reference backend parameterized by AAPCS64, and
//! the typed errors of both backends.
//!
//! **The generator is restricted here**: emulated A64 code cannot call
//! host (x86-64) functions, so there are no Rust callbacks
//! ([`Callbacks::natives`] is empty) and the programs' calls go only to
//! the generated callee, with its random signature (up to 8 integer and 11
//! float arguments, so the stack carries some). Everything else is the
//! same generator as on x86-64.
//!
//! Run: `cargo test -p vcode --features emu --test aarch64_differential`
//! (`VCODE_DIFF_CASES` programs, 10,000 by default).

#![cfg(feature = "emu")]

#[macro_use]
mod common;

use std::sync::OnceLock;

use common::target::{Aarch64, a64_kept};
use vcode::{I, Reg};

/// The target the shared suite runs on.
type Arch = Aarch64;

#[path = "common/differential.rs"]
mod differential;

use differential::{Callback, Callbacks};

impl Callbacks for Aarch64 {
    /// None: emulated code cannot call host functions.
    fn natives() -> Vec<Callback> {
        Vec::new()
    }

    /// A generated A64 function returning 7.
    fn count() -> usize {
        static STUB: OnceLock<usize> = OnceLock::new();
        *STUB.get_or_init(|| {
            a64_kept("", |f, _| {
                let x = Reg::<I>::t(0);
                f.set(x, 7);
                f.ret(x);
            })
        })
    }
}
