//! A thread that compiles passes a synchronization point: code retired
//! while it only compiles (no JIT code run since) is freed without waiting
//! for its next invocation. Before, such a thread held every set it was
//! counted in; when the cache filled with them its compiles failed, it ran
//! no JIT code again, and the cache stayed full for good (the random
//! programs of `tests/jit.rs` failed from one class to the end of a run).
//! (Its own binary: the cache is shared by the whole process.)

mod common;

use jive::{Applet, Engine, Limits, Natives};

#[test]
fn a_thread_that_only_compiles_does_not_hold_retired_code() {
    let (Some(a), Some(b)) = (
        common::class_bytes("default", "adversarial/ReplaceA"),
        common::class_bytes("default", "adversarial/ReplaceB"),
    ) else {
        return;
    };
    let load = |bytes: &[u8]| {
        let a = Applet::load_with_engine(bytes, &Natives::new(), Limits::default(), Engine::Jit)
            .unwrap_or_else(|e| panic!("the JIT cannot load the applet: {e}"));
        assert_eq!(a.engine(), Engine::Jit);
        a
    };
    let prog = jive::check(&b, &Limits::default()).unwrap();
    for round in 0..20 {
        // This thread runs JIT code (it is registered and flagged in), and
        // the code is retired: the set waits for this thread.
        let mut ran = load(&a);
        ran.invoke("work", &[round]).unwrap();
        drop(ran);
        let s = jive::jit::cache_stats();
        assert!(s.bytes_pending > 0, "round {round}: {s:?}");
        // Then it only compiles, as a thread whose compiles fail does.
        let c = jive::jit::compile(&prog).unwrap();
        let s = jive::jit::cache_stats();
        assert_eq!(s.bytes_pending, 0, "round {round}: {s:?}");
        drop(c);
        assert_eq!(jive::jit::cache_stats().bytes_pending, 0, "round {round}");
    }
}
