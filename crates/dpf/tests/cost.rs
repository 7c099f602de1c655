//! The cost of compiling one filter grows near-linearly in its size, as
//! work counted, not time: the peak of live heap memory while lowering
//! `k` and `2k` alternatives `udp dst port P` (a counting global
//! allocator; one test in this binary so nothing else allocates). The
//! optimizer's dominators were per-block sets, quadratic in memory
//! (3,000 alternatives: 930 MB), so doubling `k` quadrupled the peak;
//! as trees they are `O(n log n)`. The same for the merge's analysis of
//! a stack of `vlan` tags, whose per-test sets were quadratic too.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn alternatives(n: usize) -> String {
    (0..n)
        .map(|i| format!("udp dst port {}", 1000 + i))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The peak heap memory above what was live before, while `f` runs.
fn peak_while<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (PEAK.load(Ordering::Relaxed) - base, out)
}

/// The peak heap memory above what was live before, while lowering `src`.
fn peak_while_lowering(src: &str) -> usize {
    let e = dpf::parse(src).unwrap();
    let (peak, p) = peak_while(|| dpf::lower::lower(&e).unwrap());
    assert!(p.nodes.len() > 2);
    peak
}

/// The same while finding the tests every match of `src` passes
/// ([`dpf::merge::analyze`]).
fn peak_while_analyzing(src: &str) -> usize {
    let p = dpf::compile(src).unwrap();
    let (peak, a) = peak_while(|| dpf::merge::analyze(&p));
    assert!(!a.atoms.is_empty());
    peak
}

/// A stack of `n` VLAN tags, then TCP.
fn tags(n: usize) -> String {
    format!("{}tcp", "vlan 5 and ".repeat(n))
}

/// Measures `peak` at `n` and `2n` and asserts it grows near-linearly:
/// linear is 2x, n log n a little more, quadratic 4x; and in absolute
/// terms under 16 MiB (well under a kilobyte per test block).
fn assert_near_linear(what: &str, n: usize, peak: impl Fn(usize) -> usize) {
    let (k, two_k) = (peak(n), peak(2 * n));
    let ratio = two_k as f64 / k as f64;
    eprintln!(
        "peak heap, {what}: {n} {k} B, {} {two_k} B ({ratio:.2}x)",
        2 * n
    );
    assert!(
        ratio < 2.6,
        "{what}: doubling the filter multiplied the peak by {ratio:.2}"
    );
    assert!(two_k < 16 << 20, "{what}: {two_k} bytes for {}", 2 * n);
}

#[test]
fn lowering_and_analysis_memory_grow_near_linearly() {
    assert_near_linear("lowering alternatives", 500, |n| {
        peak_while_lowering(&alternatives(n))
    });
    // The analysis kept, for every test, the set of tests each match
    // below it passes: quadratic in a stack of tags, 860 MB for 4,095.
    // It now hands a set on to the one test above that needs it last.
    assert_near_linear("analyzing a stack of tags", 1000, |n| {
        peak_while_analyzing(&tags(n))
    });
}
