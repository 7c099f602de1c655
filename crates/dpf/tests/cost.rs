//! The cost of compiling one filter grows near-linearly in its size, as
//! work counted, not time: the peak of live heap memory while lowering
//! `k` and `2k` alternatives `udp dst port P` (a counting global
//! allocator; one test in this binary so nothing else allocates). The
//! optimizer's dominators were per-block sets, quadratic in memory
//! (3,000 alternatives: 930 MB), so doubling `k` quadrupled the peak;
//! as trees they are `O(n log n)`.

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

/// The peak heap memory above what was live before, while lowering `src`.
fn peak_while_lowering(src: &str) -> usize {
    let e = dpf::parse(src).unwrap();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let p = dpf::lower::lower(&e);
    let peak = PEAK.load(Ordering::Relaxed) - base;
    assert!(p.nodes.len() > 2);
    peak
}

#[test]
fn lowering_memory_grows_near_linearly_with_the_alternatives() {
    let (k, two_k) = (
        peak_while_lowering(&alternatives(500)),
        peak_while_lowering(&alternatives(1000)),
    );
    let ratio = two_k as f64 / k as f64;
    eprintln!("peak heap while lowering: 500 alternatives {k} B, 1,000 {two_k} B ({ratio:.2}x)");
    // Linear is 2x, n log n a little more; quadratic would be 4x.
    assert!(
        ratio < 2.6,
        "doubling the filter multiplied the peak by {ratio:.2}"
    );
    // And in absolute terms: well under a kilobyte per test block.
    assert!(two_k < 16 << 20, "{two_k} bytes for 1,000 alternatives");
}
