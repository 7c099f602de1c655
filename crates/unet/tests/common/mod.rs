//! Helpers shared by the tests that run two hosts in two network
//! namespaces (`netns.rs`, `multihost.rs`), each host on a thread of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// How long one phase of a two-host test may take before the other host
/// gives up on it.
pub const PHASE_LIMIT: Duration = Duration::from_secs(15);

/// Set when a host panics, so that the other stops waiting for it.
pub struct OnPanic<'a>(pub &'a AtomicBool);

impl Drop for OnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// One host's end of a rendezvous with the other: `swap` sends a value
/// and waits for the other host's, failing at once if that host is gone.
pub struct Meet<T> {
    tx: mpsc::Sender<T>,
    rx: mpsc::Receiver<T>,
}

/// The two ends of a rendezvous.
pub fn meeting<T>() -> (Meet<T>, Meet<T>) {
    let (t0, r1) = mpsc::channel();
    let (t1, r0) = mpsc::channel();
    (Meet { tx: t0, rx: r0 }, Meet { tx: t1, rx: r1 })
}

impl<T> Meet<T> {
    /// Gives `v` to the other host and takes its value.
    pub fn swap(&self, v: T) -> T {
        let _ = self.tx.send(v);
        self.rx
            .recv_timeout(PHASE_LIMIT)
            .expect("the other host failed or is stuck")
    }
}
