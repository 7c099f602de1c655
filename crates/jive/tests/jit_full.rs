//! A thread whose compiles fill the cache with code retired while it runs
//! none goes on compiling: the failure of `tests/jit.rs`'s random programs
//! ("the code cache is full" from one class to the end of the run), made
//! on purpose. (Its own binary: the cache is shared by the whole process,
//! and another test's thread would hold or free these sets.)

mod common;

use jive::{Applet, Engine, Limits, Natives};

/// The failure itself: sets counted on this thread fill the cache (each
/// compile of a random class, ~150 KB, retired at once), and the thread
/// keeps compiling. Before, the compile that found the cache full failed,
/// and so did every later one (nothing freed what waited for this
/// thread); now each compile frees what waited for it, and they all fit.
#[test]
fn compiles_go_on_fitting_when_their_own_retired_code_would_fill_the_cache() {
    let (Some(dir), Some(a)) = (
        jive::RANDOM_CLASSES,
        common::class_bytes("default", "adversarial/ReplaceA"),
    ) else {
        return;
    };
    let bytes = std::fs::read(std::path::Path::new(dir).join("R150.class")).unwrap();
    let prog = jive::check(&bytes, &Limits::default()).unwrap();
    let mut ran = Applet::load_with_engine(&a, &Natives::new(), Limits::default(), Engine::Jit)
        .unwrap_or_else(|e| panic!("the JIT cannot load the applet: {e}"));
    ran.invoke("work", &[1]).unwrap();
    // More than the capacity's worth of compiles, none of them run.
    let size = {
        let before = jive::jit::cache_stats().bytes_live;
        let c = jive::jit::compile(&prog).unwrap();
        let size = jive::jit::cache_stats().bytes_live - before;
        drop(c);
        size
    };
    let rounds = (64 << 20) / size + 20;
    let mut failed = Vec::new();
    for round in 0..rounds {
        match jive::jit::compile(&prog) {
            Ok(c) => drop(c),
            Err(e) => failed.push(format!("{round}: {e}")),
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {rounds} compiles of {size} bytes failed, the first {:?}; {:?}",
        failed.len(),
        failed.first(),
        jive::jit::cache_stats()
    );
    drop(ran);
}
