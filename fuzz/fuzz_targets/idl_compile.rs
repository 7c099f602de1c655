//! An IDL source through the parser and, when it parses, both stub
//! generators: any text gets a typed error or stubs, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(idl) = idl::parse(src) {
        let _ = idl::gen_c::generate(&idl, "fuzzed");
        let _ = idl::gen_rust::generate(&idl);
    }
});
