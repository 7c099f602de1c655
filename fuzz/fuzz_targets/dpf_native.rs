//! dpf's native classifier against its reference interpreter: up to four
//! filters (the text before the first NUL, one a line, owners 1 to 4 at
//! two priorities) merged into one table, and a frame (the bytes after the
//! NUL, as given and behind an Ethernet/IPv4/TCP header), classified by
//! both, and by each filter's own program in rank order (priority, then
//! installation), libpcap's first match. Any difference is a miscompile
//! of the merged table, or a merge (or a filter's split into
//! alternatives) that changed a verdict.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// The headers put before the frame's bytes for the second classification.
const HEADERS: [u8; 34] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00, 0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10,
    0, 0, 1, 10, 0, 0, 2,
];

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let Ok(text) = std::str::from_utf8(&data[..split]) else {
        return;
    };
    let frame = data.get(split + 1..).unwrap_or(&[]);
    let mut table = dpf::Table::new();
    // (priority, owner, program) of each filter installed.
    let mut installed = Vec::new();
    for (i, src) in text.split('\n').take(4).enumerate() {
        let (owner, priority) = (i as u32 + 1, i as i32 % 2);
        if table.install(src, owner, priority).is_ok() {
            installed.push((priority, owner, dpf::compile(src).expect("it installed")));
        }
    }
    if installed.is_empty() {
        return;
    }
    // Rank order: priority descending, then installation order.
    installed.sort_by_key(|&(priority, owner, _)| (std::cmp::Reverse(priority), owner));
    let reference = table.classifier();
    let mut native = table.reader();
    let behind = [&HEADERS[..], frame].concat();
    for f in [frame, &behind[..]] {
        assert_eq!(
            native.classify(f),
            reference.classify_reference(f),
            "{text:?} on {f:?}"
        );
        let first = installed
            .iter()
            .find(|(_, _, p)| p.matches(f))
            .map(|&(_, owner, _)| owner);
        assert_eq!(
            reference.classify_reference(f),
            first,
            "the merged table against each filter alone: {text:?} on {f:?}"
        );
    }
});
