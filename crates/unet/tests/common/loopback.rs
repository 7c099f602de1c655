//! Helpers shared by the tests that run one engine on the in-process
//! loopback with an applet on the receiving endpoint (`rx_lent.rs`,
//! `rxbuf.rs`): the engine, the messages, the jive engines to run the
//! applet on, and the ways a message goes from one endpoint to another.
#![allow(dead_code)]

use unet::layout::TxDesc;
use unet::transport::LoopNet;
use unet::{Config, Endpoint, Engine, EngineError};

/// An engine on a loopback network of its own, at 10.0.0.1:7000.
pub fn engine() -> Engine {
    let net = LoopNet::new();
    Engine::new(Box::new(
        net.attach("10.0.0.1:7000".parse().unwrap()).unwrap(),
    ))
}

/// A message of `len` bytes, different for each `seed` and with no zero
/// byte, so that a byte left from another message (or an array's initial
/// zeros) is told apart.
pub fn message(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

/// Every engine this machine has: the JIT where it is available, and the
/// interpreter.
pub fn engines() -> &'static [jive::Engine] {
    if jive::jit::available() {
        &[jive::Engine::Jit, jive::Engine::Interpreter]
    } else {
        &[jive::Engine::Interpreter]
    }
}

/// Two endpoints of `e`, `a` without an applet and `b` with `applet`, and
/// a channel each way: `a`, `b`, `a`'s channel to `b` and `b`'s to `a`.
pub fn connected(e: &Engine, applet: &'static [u8]) -> (Endpoint, Endpoint, u16, u16) {
    let mut a = e.create_endpoint(Config::default(), None).unwrap();
    let mut b = e.create_endpoint(Config::default(), Some(applet)).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ba = b.open_channel(e.local(), a.id()).unwrap();
    (a, b, ab, ba)
}

/// That installing `keeper` (an applet whose lent method keeps its lent
/// message) is refused, on a new endpoint of `e` and in place of `kept`
/// on another, with an error that says each of `says`; `kept` stays
/// installed there (its static `mode` still reads).
pub fn refused_at_install(e: &Engine, keeper: &'static [u8], kept: &'static [u8], says: &[&str]) {
    let Err(err) = e.create_endpoint(Config::default(), Some(keeper)) else {
        panic!("the keeper installed");
    };
    let text = err.to_string();
    assert!(
        matches!(err, EngineError::Applet(_) | EngineError::AppletShape(_)),
        "{text}"
    );
    for s in says {
        assert!(text.contains(s), "{text}\n  should say: {s}");
    }
    let mut b = e.create_endpoint(Config::default(), Some(kept)).unwrap();
    assert!(b.set_applet(Some(keeper)).is_err());
    let stays = e.with_applet(b.id(), |ap| ap.static_int("mode").is_ok());
    assert_eq!(stays, Some(true), "the old applet stays installed");
}

/// Runs `b`'s side of the engine on another thread, and waits for it: the
/// inbox tests' way, where the thread that drains `b`'s inbox is not the
/// one that sent to it.
fn poll_elsewhere(b: &mut Endpoint) {
    std::thread::scope(|s| {
        s.spawn(|| b.poll_engine());
    });
}

/// How a message goes from `a` to `b`.
#[derive(Debug, Clone, Copy)]
pub enum Way {
    /// `Endpoint::send`, `b`'s side run on this thread.
    Send,
    /// The same, `b`'s side run by another thread that claimed `b` first,
    /// so that the message waits in `b`'s inbox until that thread drains it.
    Inbox,
    /// Placed in `a`'s buffer area by the application and named by a
    /// transmit descriptor (`Endpoint::push_tx`).
    Area,
}

/// Sends `msg` from `a` to `b` the `way` given and runs `b`'s side.
pub fn deliver(a: &mut Endpoint, ab: u16, b: &mut Endpoint, msg: &[u8], way: Way) {
    match way {
        Way::Send => {
            a.send(ab, msg).unwrap();
            b.poll_engine();
        }
        Way::Inbox => {
            poll_elsewhere(b);
            a.send(ab, msg).unwrap();
            poll_elsewhere(b);
        }
        Way::Area => {
            let own = (a.layout().area_len - 8192) as u32;
            a.write_area(own, msg).unwrap();
            let n = a.tx_pushed();
            a.push_tx(TxDesc {
                len: msg.len() as u32,
                offset: own,
                chan: ab,
                ..TxDesc::default()
            })
            .unwrap();
            assert!(a.flush(10));
            assert_eq!(a.tx_status(n), unet::layout::TxStatus::Sent);
            b.poll_engine();
        }
    }
}
