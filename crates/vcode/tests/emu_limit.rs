//! The emulation harness (`vcode::emu`, feature `emu`) stops a call that
//! does not return by a count of instructions, not by time, so a loaded
//! machine cannot fail a correct test. Its own process: Unicorn maps a
//! writable and executable translation buffer, which `vcode`'s own tests
//! check no page of theirs is.
//!
//! Run: `cargo test -p vcode --features emu --test emu_limit`.

#![cfg(feature = "emu")]

use vcode::Ty;
use vcode::emu::{EmuError, call};

/// A loop that does not end is stopped by the instruction count, with an
/// error that says so, and the emulator works for the next call.
#[test]
fn a_loop_that_does_not_end_is_stopped_by_the_instruction_limit() {
    // `b .` then `ret`, in a host page the emulator maps on first fetch.
    let spin: Vec<u32> = vec![0x1400_0000, 0xd65f_03c0];
    // SAFETY: the code touches no memory.
    let r = unsafe { call(spin.as_ptr() as usize, &[], Ty::V) };
    assert_eq!(
        r.map(|_| ()),
        Err(EmuError(
            "emulation: instruction limit exceeded (a loop that does not end?)"
        ))
    );
    // `ret` alone returns.
    // SAFETY: as above.
    let r = unsafe { call(spin[1..].as_ptr() as usize, &[], Ty::V) };
    assert!(r.is_ok(), "{r:?}");
}
