//! A filter's text through dpf's parser, lowering and code generator, then
//! a few frames through the installed filter: any text gets a typed error
//! or a filter, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// An Ethernet/IPv4/TCP frame to port 80 from 8080.
const TCP: [u8; 54] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00, 0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10,
    0, 0, 1, 10, 0, 0, 2, 0x1f, 0x90, 0, 80, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x02, 0, 0, 0, 0, 0, 0,
];

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    if dpf::Table::prepare(src).is_err() {
        return;
    }
    let mut table = dpf::Table::new();
    if table.install(src, 1, 0).is_ok() {
        let mut reader = table.reader();
        for frame in [&[0u8; 64][..], &[0xff; 100][..], &TCP[..]] {
            let _ = reader.classify(frame);
        }
    }
});
