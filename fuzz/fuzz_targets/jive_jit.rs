//! jive's JIT against its interpreter: a class that loads is loaded twice,
//! one copy set to the interpreter, and every method that is not an
//! initializer or a native is invoked on both, twice over, with the same
//! arguments. The results (value and fuel, or the trap's kind, method and
//! bytecode index) must be the same: any difference is a miscompile.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = jive::Limits {
        fuel: Some(20_000),
        ..jive::Limits::default()
    };
    let natives = jive::Natives::figure2_stubs();
    let Ok(mut jit) = jive::Applet::load(data, &natives, limits) else {
        return;
    };
    let mut interp = jive::Applet::load(data, &natives, limits).expect("a second load");
    if interp.set_engine(jive::Engine::Interpreter).is_err() {
        return;
    }
    let methods: Vec<(String, usize)> = jit
        .program()
        .info
        .methods
        .iter()
        .filter(|m| !m.name.starts_with('<') && !m.is_native)
        .map(|m| (m.name.clone(), m.sig.params.len()))
        .collect();
    let arguments = [[3, -1, 7, 0], [0; 4], [i32::MIN, 65_536, -7, 1]];
    for round in 0..2 {
        for (name, n) in &methods {
            for args in &arguments {
                let args = &args[..(*n).min(4)];
                assert_eq!(
                    format!("{:?}", jit.invoke(name, args)),
                    format!("{:?}", interp.invoke(name, args)),
                    "round {round}: {name}{args:?}, the JIT against the interpreter"
                );
            }
        }
    }
});
