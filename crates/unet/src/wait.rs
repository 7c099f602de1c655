//! How an application thread waits for its endpoint between empty polls:
//! spin, then yield its core.
//!
//! A round trip between two endpoints takes well under a microsecond when
//! both threads have a core, so a waiting thread spins first. On a machine
//! whose cores are shared with other jobs, a thread that only spun while
//! its peer waited for a core would hold its own core for a whole time
//! slice (milliseconds) per message; after [`SPINS_BEFORE_YIELD`] empty
//! polls it yields at each further one. (crossbeam's `Backoff` yields
//! after about a hundred spins, which would put a system call into every
//! sub-microsecond round trip on an idle machine.)

/// Empty polls a waiting thread spins through before it yields its core
/// at each further poll.
pub const SPINS_BEFORE_YIELD: u32 = 1 << 12;

/// A waiting thread's wait: spin, then yield. Start a new one (its
/// `Default`) for each wait.
///
/// ```
/// let mut wait = unet::wait::Backoff::default();
/// for _ in 0..10 {
///     wait.snooze();
/// }
/// assert!(!wait.now_and_then());
/// ```
#[derive(Debug, Default)]
pub struct Backoff(u32);

impl Backoff {
    /// One empty poll's wait: a spin hint, or past the first
    /// [`SPINS_BEFORE_YIELD`], a yield.
    pub fn snooze(&mut self) {
        self.0 = self.0.saturating_add(1);
        if self.0 < SPINS_BEFORE_YIELD {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    /// How many waits this one has made.
    pub fn polls(&self) -> u32 {
        self.0
    }

    /// True on every 1024th wait: time to look at a stop flag or a clock.
    pub fn now_and_then(&self) -> bool {
        self.0 % 1024 == 0
    }
}
