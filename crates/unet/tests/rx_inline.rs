//! The standard applet's receive on the engine, on the JIT against jive's
//! interpreter. On the JIT its natives run inline over what the engine's
//! `Io` lends them (`getFreeBuffer` over the free queue's run, which stays
//! lent from one invocation to the next; `doLtoHDMA` over the buffer area;
//! `dmaRxd` and `dmaRxdPayload` over the receive queue's run); on the
//! interpreter every native runs out of line. One random stream per seed:
//! messages of every size class, from an endpoint without an applet, to a
//! receiver of a few small buffers and a short receive queue that it
//! drains only now and then, so that the free queue runs dry (the applet
//! drops the message and keeps the buffers it took for the next) and the
//! receive queue fills (the engine keeps a message's buffers aside and
//! gives them first). Both must deliver the same messages in the same
//! order, in the same buffers, and count the same, and the stream must
//! reach every one of those cases.
#![cfg(not(loom))]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use unet::transport::LoopNet;
use unet::{Budgets, Config, Engine, PortCounts};

/// The receiver's buffer size: a message of up to 56 bytes goes inline,
/// one of up to this many in one buffer, a longer one in several.
const BUF: u32 = 256;

/// A message as the receiver read it: its bytes and the buffers that held
/// them (none for one inline), so that the engines must also take the
/// same buffers in the same order (kept-aside ones first).
type Got = (Vec<u8>, Vec<u32>);

/// What one stream came to on the receiver: the messages it read, in
/// order, and its counts.
fn run(seed: u64, interpreted: bool) -> (Vec<Got>, PortCounts) {
    let mut rng = StdRng::seed_from_u64(seed);
    let net = LoopNet::new();
    let e = Engine::with_budgets(
        Box::new(net.attach("10.0.0.1:7000".parse().unwrap()).unwrap()),
        Budgets::default(),
    );
    // Few buffers run the free queue dry; more, with the receiver draining
    // often, leave entries waiting there, which the inline pops take. The
    // free queue has room for exactly every buffer, the least a layout
    // allows.
    let buffers = [2, 4, 8, 16][rng.random_range(0..4)];
    let drains = [0.2, 0.5, 0.9][rng.random_range(0..3)];
    let cfg = Config {
        buffers,
        buffer_size: BUF,
        rx_depth: 4,
        free_depth: buffers,
        ..Config::default()
    };
    let mut a = e.create_endpoint(Config::default(), None).unwrap();
    let mut b = e
        .create_endpoint(cfg, Some(unet::applets::STANDARD))
        .unwrap();
    if interpreted {
        e.with_applet(b.id(), |ap| ap.set_engine(jive::Engine::Interpreter))
            .unwrap()
            .unwrap();
    }
    let engine = if interpreted {
        jive::Engine::Interpreter
    } else {
        jive::Engine::Jit
    };
    assert_eq!(e.with_applet(b.id(), |ap| ap.engine()).unwrap(), engine);
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    b.open_channel(e.local(), a.id()).unwrap();
    let mut got = Vec::new();
    let drain = |b: &mut unet::Endpoint, got: &mut Vec<Got>| {
        while let Some(m) = b.recv() {
            got.push((m.to_vec(), m.buffers().collect()));
        }
    };
    for seq in 0..300usize {
        let len = match rng.random_range(0..7) {
            0 => 0,
            1 | 2 => rng.random_range(1..=56),
            3 => rng.random_range(57..BUF as usize),
            4 => BUF as usize,
            5 => BUF as usize + 1,
            _ => rng.random_range(BUF as usize + 2..4 * BUF as usize),
        };
        let m: Vec<u8> = (0..len).map(|i| (seq * 31 + i * 7) as u8).collect();
        a.send(ab, &m).unwrap();
        if rng.random_bool(drains) {
            drain(&mut b, &mut got);
        }
    }
    e.poll();
    drain(&mut b, &mut got);
    (got, b.counts())
}

#[test]
fn the_standard_applets_receive_is_the_same_on_the_jit_and_the_interpreter() {
    if !jive::jit::available() {
        eprintln!("skipped: no native backend for this CPU, so no JIT to compare");
        return;
    }
    let mut total = PortCounts::default();
    for seed in 0..24 {
        let (jit_got, jit) = run(seed, false);
        let (int_got, int) = run(seed, true);
        assert_eq!(jit, int, "seed {seed}: the counts differ");
        assert_eq!(jit_got, int_got, "seed {seed}: the messages differ");
        total.rx_delivered += jit.rx_delivered;
        total.rx_queue_full += jit.rx_queue_full;
        total.applet_drops += jit.applet_drops;
        assert_eq!(jit.applet_traps, 0, "seed {seed}");
    }
    // The streams reach deliveries of every kind, a full receive queue
    // and a dry free queue (the applet's drop).
    assert!(total.rx_delivered > 2000, "{total:?}");
    assert!(total.rx_queue_full > 100, "{total:?}");
    assert!(total.applet_drops > 100, "{total:?}");
}
