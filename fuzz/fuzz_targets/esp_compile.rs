//! An ESP program through the front end and the lowering: any text gets a
//! typed error or a program, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(src) = std::str::from_utf8(data) {
        let _ = esp::compile(src);
    }
});
