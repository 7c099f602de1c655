//! Applets whose compiled code the JIT's cache evicted, with no budget to
//! build it again (`jive::jit::set_rebuild_budget(0)`): every invocation
//! of their `doTx` and `doRx`, lent arguments and inline natives included,
//! runs on the interpreter in the code's place, and every message arrives
//! whole, in order, on its channel, with no trap. (Its own binary: the
//! budget and the cache are the process's, and the test counts what the
//! cache holds.)
#![cfg(not(loom))]

use unet::transport::LoopNet;
use unet::{Config, Engine, applets};

/// A message of `len` bytes that says its sequence number `seq`.
fn message(seq: u32, len: usize) -> Vec<u8> {
    let mut m: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seq as u8) | 1)
        .collect();
    m[..4].copy_from_slice(&seq.to_le_bytes());
    m
}

#[test]
fn evicted_applets_run_on_the_interpreter_and_lose_nothing() {
    let net = LoopNet::new();
    let e = Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ));
    for applet in [applets::STANDARD_LENT, applets::STANDARD] {
        let mut a = e.create_endpoint(Config::default(), Some(applet)).unwrap();
        let mut b = e.create_endpoint(Config::default(), Some(applet)).unwrap();
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        let ba = b.open_channel(e.local(), a.id()).unwrap();
        // Compiled, then evicted for good.
        jive::jit::set_rebuild_budget(std::time::Duration::ZERO);
        while jive::jit::evict_oldest() > 0 {}
        for seq in 0..3_000u32 {
            // Short (inline) and long (in buffers) messages, both ways.
            let len = 4 + (seq as usize * 37) % 3000;
            let (from, to, chan, back) = if seq % 2 == 0 {
                (&mut a, &mut b, ab, ba)
            } else {
                (&mut b, &mut a, ba, ab)
            };
            from.send(chan, &message(seq, len)).unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let m = loop {
                if let Some(m) = to.recv() {
                    break m;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "message {seq} never arrived: {:?}",
                    e.port(to.id()).unwrap().counts()
                );
            };
            assert_eq!(m.chan(), back, "message {seq} on the wrong channel");
            assert_eq!(m.to_vec(), message(seq, len), "message {seq}");
        }
        // Nothing was built again: every invocation was interpreted.
        assert_eq!(jive::jit::cache_stats().entries, 0);
        for id in [a.id(), b.id()] {
            let c = e.port(id).unwrap().counts();
            assert_eq!(c.applet_traps, 0, "{c:?}");
        }
        jive::jit::set_rebuild_budget(jive::jit::REBUILD_TIME_PER_SECOND);
    }
}
