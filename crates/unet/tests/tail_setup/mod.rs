//! The set-up `tail.rs` and `tail_threads.rs` share: engines on one loop
//! network, a sender with `TailPush` in a mode, its receivers and the
//! channels between them, a random size class, and what a stream came to.
//! Each of the two uses a part of it.
#![allow(dead_code)]

use rand::Rng;
use rand::rngs::StdRng;
use unet::transport::LoopNet;
use unet::{Budgets, Config, Endpoint, Engine};

pub fn engine_on(net: &LoopNet, addr: &str, budgets: Budgets) -> Engine {
    Engine::with_budgets(
        Box::new(net.attach(addr.parse().unwrap()).unwrap()),
        budgets,
    )
}

pub fn set_mode(e: &Engine, ep: &Endpoint, mode: i32) {
    e.with_applet(ep.id(), |ap| ap.set_static_int("mode", mode))
        .unwrap()
        .unwrap();
}

/// Runs `ep`'s applet on jive's interpreter.
pub fn interpret(e: &Engine, ep: &Endpoint) {
    e.with_applet(ep.id(), |ap| ap.set_engine(jive::Engine::Interpreter))
        .unwrap()
        .unwrap();
}

/// Every message waiting for `ep`, received on this thread.
pub fn drain(ep: &mut Endpoint, into: &mut Vec<Vec<u8>>) {
    while let Some(m) = ep.recv_ref() {
        into.push(m.to_vec());
    }
}

/// What one stream came to: every send's result, every message each
/// endpoint received, and every counter.
#[derive(Debug, PartialEq)]
pub struct Outcome {
    pub sent: Vec<String>,
    pub received: Vec<Vec<Vec<u8>>>,
    pub counts: Vec<unet::PortCounts>,
    pub engines: Vec<unet::EngineCounts>,
}

impl Outcome {
    /// Nothing yet, with `receivers` lists of messages received.
    pub fn new(receivers: usize) -> Outcome {
        Outcome {
            sent: Vec::new(),
            received: vec![Vec::new(); receivers],
            counts: Vec::new(),
            engines: Vec::new(),
        }
    }
}

/// A message length of a random size class: empty, inline, one buffer,
/// several, or the largest (`max`).
pub fn random_len(rng: &mut StdRng, max: usize) -> usize {
    match rng.random_range(0..6) {
        0 => 0,
        1 | 2 => rng.random_range(1..=56),
        3 => rng.random_range(57..400),
        4 => rng.random_range(400..5000),
        _ => max,
    }
}

/// A stream's endpoints: `e` and `r` (another engine), the sender `a`
/// (`TailPush`), `b` (the standard applet), `c` (no applet), `g` (the
/// standard applet, if asked for), `d` (the standard applet, to be
/// removed mid-stream), `far` (the standard applet, on `r`), and `a`'s
/// channels to each and to itself (`aa`); each receiver has a channel
/// back to `a`.
pub struct Streams {
    pub net: LoopNet,
    pub e: Engine,
    pub r: Engine,
    pub a: Endpoint,
    pub b: Endpoint,
    pub c: Endpoint,
    pub g: Option<Endpoint>,
    pub d: Option<Endpoint>,
    pub far: Endpoint,
    pub ab: u16,
    pub ac: u16,
    pub ag: Option<u16>,
    pub aa: u16,
    pub ad: u16,
    pub af: u16,
}

/// [`Streams`] under `budgets`, with `a`'s `doTx` in `mode`, on jive's
/// interpreter if `on_interpreter`, with `g` if `with_g` (made and joined
/// after `c` and before `d`).
pub fn streams(budgets: Budgets, mode: i32, on_interpreter: bool, with_g: bool) -> Streams {
    let net = LoopNet::new();
    let e = engine_on(&net, "10.0.0.1:7000", budgets);
    let r = engine_on(&net, "10.0.0.2:7000", budgets);
    let cfg = Config::default();
    let std = Some(unet::applets::STANDARD);
    let a = e
        .create_endpoint(cfg, Some(unet::applets::TAIL_PUSH))
        .unwrap();
    let mut b = e.create_endpoint(cfg, std).unwrap();
    let mut c = e.create_endpoint(cfg, None).unwrap();
    let mut g = with_g.then(|| e.create_endpoint(cfg, std).unwrap());
    let mut d = e.create_endpoint(cfg, std).unwrap();
    let mut far = r.create_endpoint(cfg, std).unwrap();
    set_mode(&e, &a, mode);
    if on_interpreter {
        interpret(&e, &a);
    }
    let mut a = a;
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ac = a.open_channel(e.local(), c.id()).unwrap();
    let ag = g
        .as_ref()
        .map(|g| a.open_channel(e.local(), g.id()).unwrap());
    let aa = a.open_channel(e.local(), a.id()).unwrap();
    let ad = a.open_channel(e.local(), d.id()).unwrap();
    let af = a.open_channel(r.local(), far.id()).unwrap();
    b.open_channel(e.local(), a.id()).unwrap();
    c.open_channel(e.local(), a.id()).unwrap();
    if let Some(g) = g.as_mut() {
        g.open_channel(e.local(), a.id()).unwrap();
    }
    d.open_channel(e.local(), a.id()).unwrap();
    far.open_channel(e.local(), a.id()).unwrap();
    Streams {
        net,
        e,
        r,
        a,
        b,
        c,
        g,
        d: Some(d),
        far,
        ab,
        ac,
        ag,
        aa,
        ad,
        af,
    }
}
