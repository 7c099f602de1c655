//! A thread that ran an applet on the JIT and exits without parking
//! unregisters from the shared code cache as it exits: code retired
//! afterwards is freed without waiting for it. (Its own binary: the cache
//! is shared by the whole process.)

mod common;

use jive::{Applet, Engine, Limits, Natives};

fn load(bytes: &[u8]) -> Applet {
    let a = Applet::load_with_engine(bytes, &Natives::new(), Limits::default(), Engine::Jit)
        .unwrap_or_else(|e| panic!("the JIT cannot load the applet: {e}"));
    assert_eq!(a.engine(), Engine::Jit);
    a
}

#[test]
fn an_exited_thread_does_not_delay_the_freeing_of_retired_code() {
    let (Some(a), Some(b)) = (
        common::class_bytes("default", "adversarial/ReplaceA"),
        common::class_bytes("default", "adversarial/ReplaceB"),
    ) else {
        return;
    };
    for round in 0..10 {
        // Another thread runs an applet (registering, flagged in, its last
        // synchronization point before anything below is retired) and
        // exits without parking.
        let a = a.clone();
        std::thread::spawn(move || {
            let mut idle = load(&a);
            assert!(idle.invoke("work", &[3]).unwrap().value.is_some());
        })
        .join()
        .unwrap();
        let mut busy = load(&b);
        busy.invoke("work", &[round]).unwrap();
        drop(busy);
        // This thread parks; the other is gone, so nothing holds the
        // retired code.
        jive::jit::park();
        let s = jive::jit::cache_stats();
        assert_eq!(s.bytes_pending, 0, "round {round}: {s:?}");
    }
}
