//! When a side of the shared-memory channel polls for its peer's message
//! and when it goes to the futex at once: the waiting rule, as a pure
//! state machine (docs/idl.md, "Waiting"). [`crate::rt::shm`] runs it on
//! every wait; the C run time (`crates/idl/c/idl_rt.c`,
//! `idl_wait_budget` and `idl_wait_polled`) is the same machine, step for
//! step.
//!
//! Polling pays only while the peer runs: its answer then comes within
//! about a hundred nanoseconds (or, if the post had to wake it, within one
//! wake-up, a few microseconds on an idle machine), and neither side makes
//! a system call. A peer that is not running (the machine's cores are busy,
//! or the peer waits for the very core our polling occupies) answers only
//! after our polling gives the core up, so that polling costs its whole
//! budget and delays the answer. Only a poll's outcome tells the two apart:
//! - a side **polls** on every wait (at most `spin` polls, and at most
//!   `SPIN_TIME`) until [`WaitRule::MISSES`] waits in a row ran out
//!   unanswered; one that runs out (a call that took long) does not count;
//! - it is then **sleeping**: a wait goes to the futex at once, except one
//!   wait in `gap`, a **probe**, which polls as before. The first probe
//!   comes [`WaitRule::PROBE_MIN`] waits after the side began sleeping; a
//!   probe that runs out doubles `gap`, up to [`WaitRule::PROBE_MAX`];
//! - any poll answered in time (a probe's included) makes the side poll
//!   again on every wait, with `gap` back at its least.
//!
//! How long a wait that polls may poll depends on what it waits for
//! ([`Budget::long`]): a plain wait polls at most `SPIN_TIME` (10 µs),
//! about what sleeping and being woken costs on an idle machine; a
//! **probe**, and a wait whose own post had to wake the peer, poll up to
//! [`PROBE_TIME`], long enough to cover the peer's wake-up. A woken peer
//! answers within a wake-up when a core is free, and on a virtual machine
//! an idle core's wake-up can take tens of microseconds, past `SPIN_TIME`:
//! a side that polled only that long after waking its peer would count a
//! miss on every such wait, and two sides that once slept would keep each
//! other sleeping, each one's probe answered but its next waits running
//! out before the other, just woken, answers (a side that went to the
//! futex at once *because* its post woke the peer is the same trap). On a
//! busy machine a sleeping side polls only on its probes, so the longer
//! bound costs at most `PROBE_TIME / PROBE_MAX` per wait there.
//!
//! So on an idle machine a side polls from at most `PROBE_MAX` waits after
//! its peer runs again; on a machine whose cores are busy it polls on at
//! most one wait in `PROBE_MAX` (plus the first few probes), each costing
//! at most [`PROBE_TIME`].
//!
//! ```
//! use idl::rt::wait::WaitRule;
//! let mut r = WaitRule::new(2000);
//! // Two waits in a row whose polling ran out: the side sleeps...
//! for _ in 0..WaitRule::MISSES {
//!     let b = r.budget();
//!     assert_eq!(b.polls, 2000);
//!     r.polled(b, false);
//! }
//! assert!(r.sleeping());
//! for _ in 1..WaitRule::PROBE_MIN {
//!     assert_eq!(r.budget().polls, 0);
//! }
//! // ...until a probe is answered.
//! let b = r.budget();
//! assert!(b.probe);
//! r.polled(b, true);
//! assert!(!r.sleeping());
//! ```

/// The longest a probe, or a wait whose post woke the peer, polls
/// ([`Budget::long`]): long enough to cover the peer's wake-up on a
/// virtual machine's idle core (see the module documentation).
pub const PROBE_TIME: std::time::Duration = std::time::Duration::from_micros(200);

/// A long wait's poll count over a plain wait's `spin`, so that its time
/// bound, [`PROBE_TIME`], is what ends it.
pub const PROBE_STRETCH: u32 = 32;

/// What one wait may do: poll up to `polls` times (0: sleep at once), and
/// whether this wait is a probe of a sleeping side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Polls this wait may make before it sleeps (also bounded by time).
    pub polls: u32,
    /// Whether it is a sleeping side's probe.
    pub probe: bool,
}

impl Budget {
    /// Whether this wait polls for a wake-up: up to [`PROBE_TIME`] and
    /// `polls * PROBE_STRETCH` polls, rather than `SPIN_TIME` and
    /// `polls`. True for a probe and for a wait whose own post found the
    /// peer asleep and woke it (`woke`).
    #[inline(always)]
    pub const fn long(&self, woke: bool) -> bool {
        self.probe || woke
    }
}

/// One side's waiting rule (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitRule {
    /// At most this many polls per wait (0: always sleep).
    spin: u32,
    /// Waits in a row whose polling ran out unanswered.
    misses: u32,
    /// While sleeping: waits between two probes.
    gap: u32,
    /// While sleeping: waits since the last probe (or since it began).
    since: u32,
}

impl WaitRule {
    /// Waits in a row whose polling ran out before a side sleeps.
    pub const MISSES: u32 = 2;
    /// The gap before a sleeping side's first probe, and after an answered
    /// one.
    pub const PROBE_MIN: u32 = 4;
    /// The largest gap between two probes: the most waits a sleeping side
    /// takes to poll again once its peer runs, and the share of waits it
    /// polls on (one in this many) while its polls keep running out.
    pub const PROBE_MAX: u32 = 32;

    /// A side that polls, at most `spin` times per wait.
    pub const fn new(spin: u32) -> WaitRule {
        WaitRule {
            spin,
            misses: 0,
            gap: Self::PROBE_MIN,
            since: 0,
        }
    }

    /// The most polls per wait.
    pub const fn spin(&self) -> u32 {
        self.spin
    }

    /// Sets the most polls per wait (0: always sleep).
    pub fn set_spin(&mut self, spin: u32) {
        self.spin = spin;
    }

    /// Whether the side is sleeping: its last [`WaitRule::MISSES`] polls
    /// ran out, and no probe was answered since.
    pub const fn sleeping(&self) -> bool {
        self.misses >= Self::MISSES
    }

    /// Whether a wait answered at its first poll would leave the rule as
    /// it is: the side polls (without a probe) and no poll ran out since
    /// the last answered one. The dynamic stubs' generated code polls once
    /// inline only then, and tells the rule nothing.
    pub const fn quiet(&self) -> bool {
        self.spin > 0 && self.misses == 0
    }

    /// What the next wait may do. Call [`WaitRule::polled`] with it if it
    /// polled.
    #[inline(always)]
    pub fn budget(&mut self) -> Budget {
        if self.spin == 0 || !self.sleeping() {
            return Budget {
                polls: self.spin,
                probe: false,
            };
        }
        self.since += 1;
        if self.since >= self.gap {
            self.since = 0;
            Budget {
                polls: self.spin,
                probe: true,
            }
        } else {
            Budget {
                polls: 0,
                probe: false,
            }
        }
    }

    /// Records how a wait that polled (`b.polls > 0`) went: `answered` if
    /// the peer's message came before its polls or its time ran out.
    #[inline(always)]
    pub fn polled(&mut self, b: Budget, answered: bool) {
        if answered {
            if self.misses != 0 {
                self.misses = 0;
                self.gap = Self::PROBE_MIN;
                self.since = 0;
            }
        } else {
            self.misses = self.misses.saturating_add(1);
            if b.probe {
                self.gap = (self.gap * 2).min(Self::PROBE_MAX);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one wait: its budget, and if it polls, `answered` as the
    /// poll's outcome. 'P' polled, 'B' probed, 'S' slept at once.
    fn wait(r: &mut WaitRule, answered: bool) -> char {
        let b = r.budget();
        if b.polls == 0 {
            return 'S';
        }
        r.polled(b, answered);
        if b.probe { 'B' } else { 'P' }
    }

    #[test]
    fn one_poll_that_runs_out_changes_nothing_two_in_a_row_make_the_side_sleep() {
        let mut r = WaitRule::new(2000);
        assert!(r.quiet());
        assert_eq!(wait(&mut r, false), 'P');
        assert!(!r.sleeping() && !r.quiet());
        // An answered poll between two that run out resets the count.
        assert_eq!(wait(&mut r, true), 'P');
        assert!(r.quiet());
        assert_eq!(wait(&mut r, false), 'P');
        assert_eq!(wait(&mut r, false), 'P');
        assert!(r.sleeping());
        let first: String = (0..WaitRule::PROBE_MIN)
            .map(|_| wait(&mut r, false))
            .collect();
        assert_eq!(first, "SSSB");
    }

    #[test]
    fn probes_that_run_out_double_the_gap_up_to_its_largest() {
        let mut r = WaitRule::new(2000);
        wait(&mut r, false);
        wait(&mut r, false);
        let mut gaps = Vec::new();
        let mut since = 0;
        for _ in 0..400 {
            since += 1;
            if wait(&mut r, false) == 'B' {
                gaps.push(since);
                since = 0;
            }
        }
        assert_eq!(gaps[..5], [4, 8, 16, 32, 32]);
        assert!(gaps.iter().all(|&g| g <= WaitRule::PROBE_MAX));
    }

    #[test]
    fn an_answered_probe_makes_the_side_poll_on_every_wait() {
        let mut r = WaitRule::new(2000);
        for _ in 0..100 {
            wait(&mut r, false);
        }
        let until: String = (0..WaitRule::PROBE_MAX + 8)
            .map(|_| wait(&mut r, true))
            .collect();
        let probe = until.find('B').expect("a probe within PROBE_MAX waits");
        assert!(probe < WaitRule::PROBE_MAX as usize, "{until}");
        assert!(until[probe + 1..].chars().all(|c| c == 'P'), "{until}");
        assert!(r.quiet());
        assert_eq!(r, WaitRule::new(2000));
    }

    /// Two sides of a channel, each running the rule, over `calls` null
    /// calls on a machine where a side that sleeps answers `wake` after
    /// it is woken (a side that polls answers at once), a plain wait polls
    /// `short` and a long one ([`Budget::long`]) `long`, both starting
    /// asleep (as after a loaded phase). Per call: whether any wait of
    /// that call slept.
    fn two_sides(calls: usize, wake: u32, short: u32, long: u32) -> Vec<bool> {
        let mut rule = [WaitRule::new(2000), WaitRule::new(2000)];
        for r in &mut rule {
            for _ in 0..200 {
                let b = r.budget();
                if b.polls > 0 {
                    r.polled(b, false);
                }
            }
            assert!(r.sleeping());
        }
        // Side 0 the client, 1 the server; `asleep[i]`: side i sleeps on
        // the futex; `pending`: the server's wait for the next request
        // (its budget and whether its post woke the client).
        let mut asleep = [true, true];
        let mut pending: Option<(Budget, bool)> = None;
        let mut slept = Vec::new();
        let limit = |b: Budget, woke: bool| if b.long(woke) { long } else { short };
        for _ in 0..calls {
            let mut any = false;
            // The client posts its request; the server's wait ends.
            let client_woke_server = match pending.take() {
                Some((b, woke)) if b.polls > 0 => {
                    let answered = (if asleep[0] { wake } else { 0 }) <= limit(b, woke);
                    rule[1].polled(b, answered);
                    asleep[1] = !answered;
                    !answered
                }
                _ => {
                    asleep[1] = true;
                    true
                }
            };
            any |= asleep[1];
            // The client waits for the reply.
            let b = rule[0].budget();
            asleep[0] = if b.polls > 0 {
                let answered =
                    (if client_woke_server { wake } else { 0 }) <= limit(b, client_woke_server);
                rule[0].polled(b, answered);
                !answered
            } else {
                true
            };
            any |= asleep[0];
            // The server posts its reply and waits for the next request.
            let server_woke_client = asleep[0];
            pending = Some((rule[1].budget(), server_woke_client));
            slept.push(any);
        }
        slept
    }

    /// After a loaded phase, on an idle machine whose wake-ups take longer
    /// than a plain wait polls (a virtual machine's idle core), both sides
    /// poll again within a few probes and then never sleep.
    #[test]
    fn two_sleeping_sides_poll_again_when_a_wake_up_outlasts_a_plain_poll() {
        for wake in [5, 20, 40, 150] {
            let slept = two_sides(1000, wake, 10, 200);
            let last = slept.iter().rposition(|&s| s).unwrap_or(0);
            assert!(
                last < 2 * WaitRule::PROBE_MAX as usize,
                "wake-up {wake}: the last call that slept is call {last}"
            );
        }
        // A wake-up longer than even a long poll: they keep sleeping, and
        // no rule of polling could help (the answer comes after a sleep).
        assert!(two_sides(1000, 400, 10, 200)[900..].iter().all(|&s| s));
    }

    #[test]
    fn a_spin_of_zero_always_sleeps() {
        let mut r = WaitRule::new(0);
        for answered in [true, false, false, false, true] {
            assert_eq!(wait(&mut r, answered), 'S');
        }
        assert!(!r.quiet());
    }
}
