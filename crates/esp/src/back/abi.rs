//! The memory interface between the runtime and native code: the context
//! pointer every generated function (process bodies, fast paths, automata)
//! receives, and the external-channel ports that generated code reads and
//! writes inline.
//!
//! An external channel bound to a queue is read without a call: a port holds
//! the next field and the end of what is available, and a message of arity
//! `k` is `k` consecutive `i64`s. When a port is empty (or the channel is
//! bound to a callback, whose port is always empty), code calls `recv`; when
//! an out port is full (or bound to a callback), code calls `send`.

use std::ffi::c_void;

/// The context of a call into generated code. `#[repr(C)]`: generated code
/// reads its fields at the offsets of [`Ctx::OFFSETS`].
#[repr(C)]
#[derive(Debug)]
pub struct Ctx {
    /// The flat variable array ([`Layout`](crate::ir::Layout)).
    pub vars: *mut i64,
    /// One program counter per process.
    pub pcs: *mut u32,
    /// One in port per channel (only external-in channels' are used).
    pub ins: *mut InPort,
    /// One out port per channel (only external-out channels' are used).
    pub outs: *mut OutPort,
    /// The runtime, passed back to the three callbacks.
    pub host: *mut c_void,
    /// Calls host function `f` with `args` (its arity many) and returns its
    /// value.
    pub call: unsafe extern "C" fn(host: *mut c_void, f: u32, args: *const i64) -> i64,
    /// Receives one message of `chan` into `dst`: returns 1 if one was
    /// written, 0 if the host has none now.
    pub recv: unsafe extern "C" fn(host: *mut c_void, chan: u32, dst: *mut i64) -> u32,
    /// Sends one message of `chan` from `src`.
    pub send: unsafe extern "C" fn(host: *mut c_void, chan: u32, src: *const i64),
}

/// Field offsets of [`Ctx`], in bytes.
impl Ctx {
    /// `vars`, `pcs`, `ins`, `outs`, `host`, `call`, `recv`, `send`.
    pub const OFFSETS: [i32; 8] = [0, 8, 16, 24, 32, 40, 48, 56];
}

/// The inline part of an external-in channel: the messages available now.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct InPort {
    /// The first field of the next message.
    pub next: *const i64,
    /// One past the last available field (`next == end`: empty).
    pub end: *const i64,
}

/// The inline part of an external-out channel: room for messages.
#[repr(C)]
#[derive(Copy, Clone, Debug)]
pub struct OutPort {
    /// Where the next message's first field goes.
    pub next: *mut i64,
    /// One past the last field of room (`next == end`: full).
    pub end: *mut i64,
}

/// The size of a port, in bytes.
pub const PORT_SIZE: i32 = 16;

// The offsets above are what generated code uses; keep them true.
const _: () = {
    assert!(std::mem::size_of::<InPort>() == PORT_SIZE as usize);
    assert!(std::mem::size_of::<OutPort>() == PORT_SIZE as usize);
    assert!(std::mem::offset_of!(Ctx, vars) == 0);
    assert!(std::mem::offset_of!(Ctx, pcs) == 8);
    assert!(std::mem::offset_of!(Ctx, ins) == 16);
    assert!(std::mem::offset_of!(Ctx, outs) == 24);
    assert!(std::mem::offset_of!(Ctx, host) == 32);
    assert!(std::mem::offset_of!(Ctx, call) == 40);
    assert!(std::mem::offset_of!(Ctx, recv) == 48);
    assert!(std::mem::offset_of!(Ctx, send) == 56);
};
