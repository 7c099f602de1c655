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
//! sub-microsecond round trip on an idle machine.) A thread that waits
//! again and again can let [`Spins`] learn how long spinning pays.

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
#[derive(Debug)]
pub struct Backoff {
    polls: u32,
    spins: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::with_spins(SPINS_BEFORE_YIELD)
    }
}

impl Backoff {
    /// A wait that spins through `spins` empty polls before it yields
    /// (see [`Spins`] for a budget that adapts).
    pub fn with_spins(spins: u32) -> Backoff {
        Backoff { polls: 0, spins }
    }

    /// One empty poll's wait: a spin hint, or past the first `spins`
    /// ([`SPINS_BEFORE_YIELD`] by default), a yield.
    pub fn snooze(&mut self) {
        self.polls = self.polls.saturating_add(1);
        if self.polls < self.spins {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }

    /// How many waits this one has made.
    pub fn polls(&self) -> u32 {
        self.polls
    }

    /// Whether it has begun to yield its core.
    pub fn yielding(&self) -> bool {
        self.polls >= self.spins
    }

    /// True on every 1024th wait: time to look at a stop flag or a clock.
    pub fn now_and_then(&self) -> bool {
        self.polls.is_multiple_of(1024)
    }
}

/// The spin budget of a thread that waits again and again, e.g. for each
/// reply of a stream of round trips: how many empty polls a wait spins
/// through before it yields, learnt from the waits before it.
///
/// Spinning pays when the peer has a core of its own: the message comes
/// while the waiter spins, and a yield would only add a system call. It
/// costs when the cores are shared: the waiter holds a core that the
/// peer, or the engine between them, needs, for as long as it spins (on
/// a 2-core machine with an engine thread, a server and a client all
/// polling, [`SPINS_BEFORE_YIELD`] spins per wait made round trips
/// 120 to 250 µs; 16 made them 4 to 16 µs). So a wait whose message came
/// while it spun doubles the budget (up to [`SPINS_BEFORE_YIELD`]), one
/// that had to yield halves it (down to [`Spins::FLOOR`]), and every
/// [`Spins::PROBE_EVERY`]th wait spins the whole
/// [`SPINS_BEFORE_YIELD`] to find out whether spinning pays again (if
/// its message came while it spun, the budget is whole again).
///
/// ```
/// use unet::wait::{Spins, SPINS_BEFORE_YIELD};
/// let mut spins = Spins::default();
/// for _ in 0..20 {
///     let mut wait = spins.backoff();
///     while !wait.yielding() {
///         wait.snooze(); // a message that keeps the waiter waiting
///     }
///     wait.snooze();
///     spins.learn(&wait);
/// }
/// assert_eq!(spins.limit(), Spins::FLOOR);
/// let quick = spins.backoff(); // a message there at the first poll
/// spins.learn(&quick);
/// assert_eq!(spins.limit(), 2 * Spins::FLOOR);
/// // A probe, within PROBE_EVERY waits, spins past the budget; its
/// // message coming while it spins makes the budget whole again.
/// let probe = loop {
///     let mut wait = spins.backoff();
///     for _ in 0..2 * Spins::FLOOR + 4 {
///         wait.snooze();
///     }
///     if !wait.yielding() {
///         break wait;
///     }
///     spins.learn(&wait);
/// };
/// spins.learn(&probe);
/// assert_eq!(spins.limit(), SPINS_BEFORE_YIELD);
/// ```
#[derive(Debug, Clone)]
pub struct Spins {
    limit: u32,
    waits: u32,
}

impl Default for Spins {
    fn default() -> Self {
        Spins {
            limit: SPINS_BEFORE_YIELD,
            waits: 0,
        }
    }
}

impl Spins {
    /// The fewest spins a wait makes before it yields.
    pub const FLOOR: u32 = 16;
    /// One wait in this many spins the whole [`SPINS_BEFORE_YIELD`].
    pub const PROBE_EVERY: u32 = 256;

    /// The budget now.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// The wait for the next message.
    pub fn backoff(&mut self) -> Backoff {
        self.waits = self.waits.wrapping_add(1);
        if self.waits.is_multiple_of(Spins::PROBE_EVERY) {
            Backoff::with_spins(SPINS_BEFORE_YIELD)
        } else {
            Backoff::with_spins(self.limit)
        }
    }

    /// Learns from a wait (from [`Spins::backoff`]) that ended with its
    /// message.
    pub fn learn(&mut self, wait: &Backoff) {
        self.limit = if wait.yielding() {
            (self.limit / 2).max(Spins::FLOOR)
        } else if wait.spins >= SPINS_BEFORE_YIELD {
            SPINS_BEFORE_YIELD
        } else {
            self.limit.saturating_mul(2).min(SPINS_BEFORE_YIELD)
        };
    }
}
