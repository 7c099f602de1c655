//! The frame slots every native target uses, from the frame pointer
//! down: the save slots of integer and float registers, the call-site
//! slots of persistent float registers, then the locals. Each target's
//! `regfile` re-exports them. It imports nothing.

/// A one-bit mask for register `n`.
pub const fn bit(n: u8) -> u16 {
    1 << n
}

/// Frame offset (from the frame pointer) of the slot where the
/// prologue saves integer register `n` when it is callee-saved and
/// used.
pub const fn gpr_save_slot(n: u8) -> i32 {
    -8 * (n as i32 + 1)
}
/// Frame offset of the 16-byte slot where the prologue saves float
/// register `n` when a [`RegConfig`](crate::RegConfig) makes it callee-saved.
pub const fn xmm_save_slot(n: u8) -> i32 {
    -128 - 16 * (n as i32 + 1)
}
/// Frame offset of the slot where a call site keeps persistent float
/// register `n` (the conventions have no callee-saved float registers
/// vcode uses, so the caller saves them around the call).
pub const fn xmm_call_slot(n: u8) -> i32 {
    -384 - 8 * (n as i32 + 1)
}
/// Bytes below the frame pointer taken by the save slots above;
/// locals start here.
pub const SAVE_AREA: i32 = 512;
