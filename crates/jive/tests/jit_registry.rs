//! Building an applet's code holds up no other applet's load or drop. The
//! JIT's registry of compiled code (which applets share each key) is taken
//! by every compile and by every drop of a compiled applet, and a compile
//! held it for the whole build: a drop, which a host makes under its own
//! locks (unet's engine drops a removed applet under its endpoint's locks,
//! which the thread delivering to that endpoint waits for), waited for any
//! other thread's build, up to 0.4 s for a class near the JIT's limits;
//! and the builds of all threads ran one at a time, so a load whose code
//! was already built waited too.
//! (Its own binary: the registry and the cache are the process's.)

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jive::{Applet, Engine, Limits, Natives};

#[test]
fn a_build_holds_up_no_other_applets_load_or_drop() {
    let (Some(dir), Some(small)) = (
        jive::RANDOM_CLASSES,
        common::class_bytes("default", "adversarial/ReplaceA"),
    ) else {
        return;
    };
    let bytes = std::fs::read(std::path::Path::new(dir).join("R150.class")).unwrap();
    let prog = jive::check(&bytes, &Limits::default()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Builds without pause, each of a key not seen before (the class
    // renamed), so that each is built whole.
    let builder = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut builds = Vec::new();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) || builds.len() < 20 {
                let mut p = prog.clone();
                p.info.name = format!("R150n{n}");
                n += 1;
                let t = Instant::now();
                let c = jive::jit::compile(&p).unwrap();
                builds.push(t.elapsed());
                drop(c);
            }
            builds
        })
    };
    // Loads and drops of a small applet meanwhile (its code shared after
    // the first), each timed; for 2 s.
    let (mut loads, mut drops) = (Vec::new(), Vec::new());
    let end = Instant::now() + Duration::from_secs(2);
    while Instant::now() < end {
        let t = Instant::now();
        let a = Applet::load_with_engine(&small, &Natives::new(), Limits::default(), Engine::Jit)
            .unwrap_or_else(|e| panic!("the JIT cannot load the applet: {e}"));
        loads.push(t.elapsed());
        let t = Instant::now();
        drop(a);
        drops.push(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let mut builds = builder.join().unwrap();
    builds.sort();
    loads.sort();
    drops.sort();
    let (nb, nd) = (builds.len(), drops.len());
    eprintln!(
        "{nb} builds (shortest {:?}, median {:?}); {nd} loads and drops of another applet \
         meanwhile: loads median {:?}, max {:?}; drops median {:?}, max {:?}",
        builds[0],
        builds[nb / 2],
        loads[nd / 2],
        loads[nd - 1],
        drops[nd / 2],
        drops[nd - 1]
    );
    // A load or drop that waited for a build took up to a build; a busy
    // machine may hold a thread as long now and then, so a few are
    // allowed: at most one for every eight builds.
    let bound = builds[0] / 2;
    let waited = loads.iter().chain(&drops).filter(|&&d| d >= bound).count();
    assert!(
        waited <= nb / 8,
        "{waited} of {nd} loads and drops took {bound:?} or more while {nb} builds ran \
         (longest load {:?}, drop {:?})",
        loads[nd - 1],
        drops[nd - 1]
    );
}

/// `Applet::code` names the code an applet runs: applets of one class share
/// its key, another class has its own, and an applet on the interpreter
/// runs none. (A host counts each key once per client: unet's daemon.)
#[test]
fn applets_of_one_class_share_their_code() {
    let (Some(small), Some(other)) = (
        common::class_bytes("default", "adversarial/ReplaceA"),
        common::class_bytes("default", "adversarial/ReplaceB"),
    ) else {
        return;
    };
    let load = |bytes: &[u8], engine| {
        Applet::load_with_engine(bytes, &Natives::new(), Limits::default(), engine)
            .unwrap_or_else(|e| panic!("loading: {e}"))
    };
    let (a, b) = (load(&small, Engine::Jit), load(&small, Engine::Jit));
    let code = a.code().expect("on the JIT");
    assert!(code.bytes > 0);
    assert_eq!(b.code(), Some(code), "one class, one code");
    let c = load(&other, Engine::Jit).code().expect("on the JIT");
    assert_ne!(c.key, code.key);
    assert_eq!(load(&small, Engine::Interpreter).code(), None);
}
