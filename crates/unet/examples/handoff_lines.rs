//! What the line patterns of a hand-off between two cores cost on this
//! machine, alone: a ping-pong of one 8-byte value each way between two
//! threads pinned to CPUs 0 and 1, with nothing else on the path, in five
//! patterns of the lines each message moves, measured in turn:
//!
//! - `seal`: the message's line carries its own seal, which the receiver
//!   polls: one line crosses a direction (plain U-Net's receive queue and
//!   the SPSC ring peer).
//! - `tail`: the receiver polls a tail on a line of its own, which the
//!   sender stores after the message's line, then reads the message: two
//!   lines (the applet's inbox, `engine/inbox.rs`, for an entry of more
//!   than 56 bytes, 40 before 2026-12-05's later changes, or one that
//!   does not wait alone).
//! - `tail+ask`: `tail`, the waiting receiver also asking for the
//!   message's line at every poll (the inbox's `prefetch_next`).
//! - `tail+mark`: `tail`, the sender also reading a line the receiver
//!   wrote after its last message before it writes its own (the inbox's
//!   warm mark, which a round trip's producer reads once a pass over
//!   the inbox's 64 KiB warm start: one push in 1,365 at 40 B, one in 66
//!   at 1,000 B; before 2026-12-06 one in six at 40 B, then that day
//!   with 1 KiB one in 22, and one in two at 1,000 B).
//! - `tail+copy`: `tail`, the sender also writing a copy of the message
//!   on the tail's line, which the receiver reads there: the message's
//!   line is written but never crosses (the inbox's entries of up to 56
//!   bytes since 2026-12-05, `inbox::COPY_MAX`, the tail itself no longer
//!   on that line: the receiver reads the last push's tag beside the copy).
//!
//! ```sh
//! cargo build --release -p unet --example handoff_lines
//! target/release/examples/handoff_lines 9      # rounds, each pattern once a round
//! SLOTS=1 target/release/examples/handoff_lines 9   # the messages on one line
//! ```
//!
//! Messages cycle through four lines (`SLOTS=n`, a power of two, for
//! another count), as a round trip's did through the
//! inbox's first four until 2026-12-06 (since, through 64 KiB). With one
//! line, a run's figure is that line's: how long a line takes to cross
//! depends on its address (the guest cannot see which L3 slice homes it),
//! so `seal`'s rounds (each on lines newly allocated) spread from 223 to
//! 313 ns with one line and from 260 to 306 with 1,024, about the same
//! median (docs/benchmarks.md, "A pair's round trip set by the line it
//! crosses on"). Each figure is
//! the median over the rounds of a round's median batch mean (batches of
//! 1,000 round trips), and the difference from `seal` is per direction.
//! The patterns take turns in every round, so that a change of the
//! guest's regime between rounds moves them all (docs/benchmarks.md,
//! "Burst-25's medians by the machine's regime").
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The patterns, in the order measured.
const PATTERNS: [&str; 5] = ["seal", "tail", "tail+ask", "tail+mark", "tail+copy"];

/// A cache line: a word the receiver polls or reads, the message (or its
/// copy on the tail's line), the rest padding.
#[repr(align(64))]
#[derive(Default)]
struct Line {
    word: AtomicU64,
    value: AtomicU64,
}

/// One direction's lines: the tail, the message lines, the mark.
struct Way {
    tail: Line,
    slots: Box<[Line]>,
    /// `slots.len() - 1` (a power of two).
    mask: u64,
    mark: Line,
}

impl Way {
    /// A direction's lines with `slots` message lines (a power of two).
    fn new(slots: usize) -> Way {
        assert!(slots.is_power_of_two(), "SLOTS: a power of two");
        Way {
            tail: Line::default(),
            slots: (0..slots).map(|_| Line::default()).collect(),
            mask: slots as u64 - 1,
            mark: Line::default(),
        }
    }

    /// Sends message `k` (from 0) by `pattern`.
    #[inline(always)]
    fn send(&self, k: u64, pattern: usize) {
        let slot = &self.slots[(k & self.mask) as usize];
        if pattern == 3 {
            std::hint::black_box(self.mark.word.load(Ordering::Acquire));
        }
        slot.value.store(k, Ordering::Relaxed);
        if pattern == 4 {
            self.tail.value.store(k, Ordering::Relaxed);
        }
        if pattern == 0 {
            slot.word.store(k + 1, Ordering::Release);
        } else {
            self.tail.word.store(k + 1, Ordering::Release);
        }
    }

    /// Waits for message `k` by `pattern` and reads it.
    #[inline(always)]
    fn recv(&self, k: u64, pattern: usize) -> u64 {
        let slot = &self.slots[(k & self.mask) as usize];
        let seen = if pattern == 0 {
            &slot.word
        } else {
            &self.tail.word
        };
        while seen.load(Ordering::Acquire) != k + 1 {
            #[cfg(target_arch = "x86_64")]
            if pattern == 2 {
                // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU
                // has (the target's baseline); the address is a live
                // line's, and a prefetch neither reads nor writes memory
                // architecturally and never faults.
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        (slot as *const Line).cast(),
                    );
                }
            }
            std::hint::spin_loop();
        }
        let v = if pattern == 4 {
            &self.tail.value
        } else {
            &slot.value
        }
        .load(Ordering::Relaxed);
        if pattern == 3 {
            self.mark.word.store(k, Ordering::Release);
        }
        v
    }
}

/// Round trips of a measurement, in batches of [`BATCH`].
const ROUND_TRIPS: u64 = 100_000;
const BATCH: u64 = 1_000;

/// The median batch mean of [`ROUND_TRIPS`] round trips by `pattern`
/// between this thread (on `cpus[0]`) and a partner on `cpus[1]`, with
/// `slots` message lines a direction, ns.
fn measure(pattern: usize, cpus: [usize; 2], slots: usize) -> f64 {
    let ways: &'static [Way; 2] = Box::leak(Box::new([Way::new(slots), Way::new(slots)]));
    let partner = std::thread::spawn(move || {
        unet::affinity::pin(cpus[1]);
        for k in 0..ROUND_TRIPS {
            let v = ways[0].recv(k, pattern);
            assert_eq!(v, k, "the partner read message {k} as {v}");
            ways[1].send(k, pattern);
        }
    });
    let mut means = Vec::new();
    for b in 0..ROUND_TRIPS / BATCH {
        let start = Instant::now();
        for k in b * BATCH..(b + 1) * BATCH {
            ways[0].send(k, pattern);
            let v = ways[1].recv(k, pattern);
            assert_eq!(v, k, "read message {k} as {v}");
        }
        means.push(start.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    partner.join().expect("the partner finishes");
    median(&mut means)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(9, |s| s.parse().expect("rounds: a count"));
    let slots: usize = std::env::var("SLOTS").map_or(4, |v| v.parse().expect("SLOTS: a count"));
    let Some(cpus) = unet::affinity::two_cpus() else {
        eprintln!("handoff_lines: needs two CPUs to pin the threads to");
        std::process::exit(1);
    };
    let old = unet::affinity::pin(cpus[0]);
    let mut figures = vec![Vec::new(); PATTERNS.len()];
    for _ in 0..rounds {
        for (p, f) in figures.iter_mut().enumerate() {
            f.push(measure(p, cpus, slots));
        }
    }
    if let Some(old) = old {
        unet::affinity::restore(&old);
    }
    let seal = median(&mut figures[0].clone());
    let lines = if slots == 1 { "line" } else { "lines" };
    println!(
        "round trip of 8 bytes between CPUs {} and {} over {slots} message {lines} a direction, \
         median of {rounds} rounds:",
        cpus[0], cpus[1]
    );
    for (name, f) in PATTERNS.iter().zip(&mut figures) {
        let (lo, hi) = (
            f.iter().copied().fold(f64::INFINITY, f64::min),
            f.iter().copied().fold(0.0, f64::max),
        );
        let m = median(f);
        let over = if *name == PATTERNS[0] {
            String::new()
        } else if m > seal {
            format!("{:.1} ns a direction over seal", (m - seal) / 2.0)
        } else {
            "no slower than seal".to_owned()
        };
        println!("{name:>10}  {m:6.1} ns  (rounds {lo:.1} to {hi:.1})  {over}");
    }
}
