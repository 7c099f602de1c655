//! An applet that sits idle on the JIT does not hold up the freeing of
//! other applets' retired code: its registration in the shared code cache is
//! flagged out between invocations. (Its own binary: the cache is shared by
//! the whole process.)

mod common;

use jive::{Applet, Engine, Limits, Natives};

fn load(bytes: &[u8]) -> Applet {
    let a = Applet::load_with_engine(bytes, &Natives::new(), Limits::default(), Engine::Jit)
        .unwrap_or_else(|e| panic!("the JIT cannot load the applet: {e}"));
    assert_eq!(a.engine(), Engine::Jit);
    a
}

#[test]
fn an_idle_applet_does_not_delay_the_freeing_of_retired_code() {
    let (Some(a), Some(b)) = (
        common::class_bytes("default", "adversarial/ReplaceA"),
        common::class_bytes("default", "adversarial/ReplaceB"),
    ) else {
        return;
    };
    // Loaded and run once, then left alone for the rest of the test.
    let mut idle = load(&a);
    idle.invoke("work", &[3]).unwrap();
    let base = jive::jit::cache_stats();
    for round in 0..20 {
        let mut busy = load(&b);
        busy.invoke("work", &[round]).unwrap();
        assert!(jive::jit::cache_stats().bytes_live > base.bytes_live);
        drop(busy);
        let s = jive::jit::cache_stats();
        assert_eq!(s.bytes_pending, 0, "round {round}: {s:?}");
        assert_eq!(s.bytes_live, base.bytes_live, "round {round}: {s:?}");
    }
    assert!(idle.invoke("work", &[3]).unwrap().value.is_some());
}
