//! Code retired while threads that run applets sit idle is freed without
//! waiting for them: a thread that parks (`jive::jit::park`) or exits does
//! not hold it up. (Its own binary: the cache is shared by the whole
//! process.)

mod common;

use std::sync::mpsc;

use jive::{Applet, Engine, Limits, Natives};

fn load(bytes: &[u8]) -> Applet {
    let a = Applet::load_with_engine(bytes, &Natives::new(), Limits::default(), Engine::Jit)
        .unwrap_or_else(|e| panic!("the JIT cannot load the applet: {e}"));
    assert_eq!(a.engine(), Engine::Jit);
    a
}

#[test]
fn a_parked_thread_does_not_delay_the_freeing_of_retired_code() {
    let (Some(a), Some(b)) = (
        common::class_bytes("default", "adversarial/ReplaceA"),
        common::class_bytes("default", "adversarial/ReplaceB"),
    ) else {
        return;
    };
    // A thread runs an applet once, parks, and waits; it is still registered.
    let (parked_tx, parked_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let idle = std::thread::spawn(move || {
        let mut idle = load(&a);
        idle.invoke("work", &[3]).unwrap();
        jive::jit::park();
        parked_tx.send(()).unwrap();
        done_rx.recv().unwrap();
        // Parking is only until the next invocation.
        assert!(idle.invoke("work", &[3]).unwrap().value.is_some());
    });
    parked_rx.recv().unwrap();
    let base = jive::jit::cache_stats();
    for round in 0..20 {
        let mut busy = load(&b);
        busy.invoke("work", &[round]).unwrap();
        assert!(jive::jit::cache_stats().bytes_live > base.bytes_live);
        drop(busy);
        // This thread parks too; nothing else is registered and flagged in.
        jive::jit::park();
        let s = jive::jit::cache_stats();
        assert_eq!(s.bytes_pending, 0, "round {round}: {s:?}");
        assert_eq!(s.bytes_live, base.bytes_live, "round {round}: {s:?}");
    }
    done_tx.send(()).unwrap();
    idle.join().unwrap();
}
