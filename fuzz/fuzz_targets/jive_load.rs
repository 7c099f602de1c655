//! A class file through jive's parser, subset check, verifier, JIT and
//! constructor (Figure 2's natives, stubbed), then a few invocations: any
//! bytes get a typed error or an applet, never a panic or a fault.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = jive::Limits {
        fuel: Some(20_000),
        ..jive::Limits::default()
    };
    let natives = jive::Natives::figure2_stubs();
    if let Ok(mut applet) = jive::Applet::load(data, &natives, limits) {
        for method in ["doTx", "doRx", "run", "main", "f"] {
            let _ = applet.invoke(method, &[1, 2, 3]);
            let _ = applet.invoke(method, &[5]);
        }
    }
});
