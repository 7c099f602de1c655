//! The atomics of the descriptor queues' protocol, from `loom` when the
//! crate is built with `--cfg loom` (so that `tests/loom.rs` explores every
//! interleaving of the real queue code, the slots' seals among it) and
//! from `std` otherwise.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU8, AtomicU32};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU8, AtomicU32};

pub use std::sync::atomic::Ordering;
