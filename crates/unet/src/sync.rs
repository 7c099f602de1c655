//! The atomics of the descriptor queues' protocol, from `loom` when the
//! crate is built with `--cfg loom` (so that `tests/loom.rs` explores every
//! interleaving of the real queue code) and from `std` otherwise.

#[cfg(loom)]
pub use loom::sync::atomic::AtomicU32;
#[cfg(not(loom))]
pub use std::sync::atomic::AtomicU32;

pub use std::sync::atomic::Ordering;
