//! A `txPush` at a tail site (jive's tail rule, `jive::TAIL_SUFFIX`):
//! which call sites are tail sites, on the interpreter and the JIT alike;
//! a push that is not one sends TxBuf as it was at the push, however the
//! applet writes it after; and a deferred push delivers and counts as the
//! eager push of the same message does, where it goes straight into the
//! receiver's `RxBuf` and where it falls back to its frame (a channel to
//! another engine, a closed channel, a receiver without an applet, the
//! sender itself, a receiver at its inbox budget, the push budgets).
#![cfg(not(loom))]

mod message;
mod tail_setup;
use std::sync::{Arc, Mutex};

use jive::subset::Prim;
use jive::{Applet, Limits, Natives};
use message::message;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tail_setup::{Outcome, Streams, drain, engine_on, interpret, random_len, set_mode, streams};
use unet::transport::LoopNet;
use unet::{Budgets, Config};

/// A table for `TailPush` whose `txPush` and its tail form log which of
/// the two each call ran (`true`: the tail form).
fn logging_natives(log: &Arc<Mutex<Vec<bool>>>) -> Natives {
    let mut t = Natives::new();
    t.register("newAlignedArray", "(I)[B", |cx, a| {
        cx.new_array(Prim::Byte, a[0])
    });
    t.register("doHtoLDMA", "([BIII)V", |_, _| Ok(0));
    t.register("dmaRxdPayload", "([BII)V", |_, _| Ok(0));
    for tail in [false, true] {
        let log = log.clone();
        let name = if tail {
            jive::tail_name("txPush")
        } else {
            "txPush".to_owned()
        };
        t.register(&name, "([BIII)V", move |_, _| {
            log.lock().unwrap().push(tail);
            Ok(0)
        });
    }
    t
}

/// The tail rule's cases, each method invoked on its own: a push followed
/// by a return alone, or by a local load and a return, is a tail site; a
/// push followed by a store to TxBuf, by a second push, by a branch or by
/// a call is not, nor is one in a method some call site names; in `doTx`,
/// each mode's push as `TailPush.java` says. The same on the interpreter
/// and on the JIT.
#[test]
fn the_tail_sites_are_the_ones_the_rule_names_on_both_engines() {
    let cases: &[(&str, &[i32], &[bool])] = &[
        ("tail", &[0, 4], &[true]),
        ("tailValue", &[0, 4], &[true]),
        ("storeAfter", &[0, 4], &[false]),
        ("pushAfter", &[0, 4], &[false, true]),
        ("branchAfter", &[0, 4], &[false]),
        ("callAfter", &[0, 4], &[false]),
        ("callsCalled", &[0, 4], &[false]),
        ("field", &[0, 4], &[true]),
        ("local", &[0, 4], &[false]),
        ("computed", &[0, 4], &[false]),
        ("jumpInto", &[0, 4], &[false]),
    ];
    for engine in [jive::Engine::Interpreter, jive::Engine::Jit] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let natives = logging_natives(&log);
        let mut a = Applet::load(unet::applets::TAIL_PUSH, &natives, Limits::default()).unwrap();
        a.set_engine(engine).unwrap();
        let run = |a: &mut Applet, name: &str, args: &[i32]| {
            log.lock().unwrap().clear();
            let m = a.method(name).unwrap();
            a.call(&m, args, None).unwrap();
            log.lock().unwrap().clone()
        };
        for &(name, args, want) in cases {
            assert_eq!(run(&mut a, name, args), want, "{name} on {engine:?}");
        }
        for (mode, want) in [
            (0, &[true][..]),
            (1, &[false]),
            (2, &[false]),
            (3, &[false, true]),
            (4, &[false]),
        ] {
            a.set_static_int("mode", mode).unwrap();
            assert_eq!(
                run(&mut a, "doTx", &[4, 0, 0]),
                want,
                "doTx mode {mode} on {engine:?}"
            );
        }
    }
}

/// A tail entry is made for each native called at a tail site (here
/// `txPush` in `doTx` and the tail methods, `dmaRxdPayload` in `doRx`), and
/// where the table binds no tail form the native itself runs there.
#[test]
fn a_native_without_a_tail_form_runs_itself_at_its_tail_sites() {
    let prog = jive::check(unet::applets::TAIL_PUSH, &Limits::default()).unwrap();
    let mut tails: Vec<&str> = prog
        .natives
        .iter()
        .filter(|n| n.tail)
        .map(|n| n.name.as_str())
        .collect();
    tails.sort_unstable();
    assert_eq!(tails, ["dmaRxdPayload", "txPush"]);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut natives = Natives::new();
    natives.register("newAlignedArray", "(I)[B", |cx, a| {
        cx.new_array(Prim::Byte, a[0])
    });
    let l = log.clone();
    natives.register("txPush", "([BIII)V", move |_, _| {
        l.lock().unwrap().push(false);
        Ok(0)
    });
    natives.register("doHtoLDMA", "([BIII)V", |_, _| Ok(0));
    natives.register("dmaRxdPayload", "([BII)V", |_, _| Ok(0));
    for engine in [jive::Engine::Interpreter, jive::Engine::Jit] {
        let mut a = Applet::load(unet::applets::TAIL_PUSH, &natives, Limits::default()).unwrap();
        a.set_engine(engine).unwrap();
        log.lock().unwrap().clear();
        let m = a.method("tail").unwrap();
        a.call(&m, &[0, 4], None).unwrap();
        assert_eq!(*log.lock().unwrap(), [false], "{engine:?}");
    }
}

/// Mode 1 pushes at a site that is not a tail site and then inverts
/// TxBuf's first byte: every message arrives as it was at the push, to a
/// receiver with the standard applet (where mode 0's tail push goes
/// straight into its RxBuf) and to one without.
#[test]
fn a_push_followed_by_a_write_to_txbuf_sends_the_bytes_of_the_push() {
    let net = LoopNet::new();
    let e = engine_on(&net, "10.0.0.1:7000", Budgets::default());
    let mut a = e
        .create_endpoint(Config::default(), Some(unet::applets::TAIL_PUSH))
        .unwrap();
    let mut b = e
        .create_endpoint(Config::default(), Some(unet::applets::STANDARD))
        .unwrap();
    let mut c = e.create_endpoint(Config::default(), None).unwrap();
    let ab = a.open_channel(e.local(), b.id()).unwrap();
    let ac = a.open_channel(e.local(), c.id()).unwrap();
    b.open_channel(e.local(), a.id()).unwrap();
    c.open_channel(e.local(), a.id()).unwrap();
    for mode in [1, 0, 1] {
        set_mode(&e, &a, mode);
        for (seq, len) in [1usize, 8, 40, 56].into_iter().enumerate() {
            let m = message(seq as u64 + 1, len);
            for (ch, to) in [(ab, &mut b), (ac, &mut c)] {
                a.send(ch, &m).unwrap();
                let got = to.recv_ref().expect("delivered").to_vec();
                assert_eq!(got, m, "mode {mode}, {len} bytes");
            }
        }
    }
}

/// Mode 4 pushes an array held only by a local (`new byte[]`) and
/// returns: the invocation's end collects that array, so the site is not
/// a tail site (the push is eager) and every message arrives as sent, on
/// the JIT and on the interpreter, to a receiver with the standard applet
/// (where mode 0's tail push goes straight into its RxBuf) and to one
/// without, with every push counted and nothing dropped or trapped.
#[test]
fn a_push_of_an_array_only_a_local_holds_is_eager_and_arrives() {
    for on_interpreter in [false, true] {
        let net = LoopNet::new();
        let e = engine_on(&net, "10.0.0.1:7000", Budgets::default());
        let mut a = e
            .create_endpoint(Config::default(), Some(unet::applets::TAIL_PUSH))
            .unwrap();
        let mut b = e
            .create_endpoint(Config::default(), Some(unet::applets::STANDARD))
            .unwrap();
        let mut c = e.create_endpoint(Config::default(), None).unwrap();
        if on_interpreter {
            interpret(&e, &a);
        }
        let ab = a.open_channel(e.local(), b.id()).unwrap();
        let ac = a.open_channel(e.local(), c.id()).unwrap();
        b.open_channel(e.local(), a.id()).unwrap();
        c.open_channel(e.local(), a.id()).unwrap();
        let mut n = 0u64;
        for mode in [0, 4, 0, 4] {
            set_mode(&e, &a, mode);
            for (seq, len) in [0usize, 1, 8, 40, 56].into_iter().enumerate() {
                let m = message(seq as u64 + 1, len);
                for (ch, to) in [(ab, &mut b), (ac, &mut c)] {
                    a.send(ch, &m).unwrap();
                    let got = to.recv_ref().map(|r| r.to_vec());
                    assert_eq!(
                        got.as_deref(),
                        Some(&m[..]),
                        "mode {mode}, {len} bytes, interpret {on_interpreter}"
                    );
                    n += 1;
                }
            }
        }
        let counts = a.counts();
        assert_eq!(counts.applet_drops, 0, "interpret {on_interpreter}");
        assert_eq!(counts.applet_traps, 0, "interpret {on_interpreter}");
        assert_eq!(counts.tx_frames, n, "interpret {on_interpreter}");
    }
}

/// One random stream from `seed`, with the sender's `doTx` in `mode`
/// (0: the tail push; 2: the same push, eager), on jive's interpreter
/// if `on_interpreter`, else as the engine loads it (the JIT).
fn stream(seed: u64, mode: i32, on_interpreter: bool) -> Outcome {
    let mut rng = StdRng::seed_from_u64(seed);
    let budgets = Budgets {
        push_bytes: if rng.random_bool(0.3) { 300 } else { 4 << 20 },
        inbox_bytes: if rng.random_bool(0.3) { 0 } else { 4 << 20 },
        ..Budgets::default()
    };
    let Streams {
        net: _net,
        e,
        r,
        mut a,
        mut b,
        mut c,
        mut d,
        mut far,
        ab,
        ac,
        aa,
        ad,
        af,
        ..
    } = streams(budgets, mode, on_interpreter, false);
    let chans = [ab, ab, ab, ac, aa, ad, af, 77];
    let mut out = Outcome::new(5);
    let max = a.max_message();
    for seq in 0..rng.random_range(20..80u64) {
        if d.is_some() && rng.random_bool(0.05) {
            d = None;
        }
        let ch = chans[rng.random_range(0..chans.len())];
        let len = random_len(&mut rng, max);
        let m = message(seq + 1, len);
        out.sent.push(format!("{:?}", a.send(ch, &m)));
        if rng.random_bool(0.7) {
            drain(&mut b, &mut out.received[0]);
            drain(&mut c, &mut out.received[1]);
            drain(&mut a, &mut out.received[2]);
            if let Some(d) = d.as_mut() {
                drain(d, &mut out.received[3]);
            }
            r.poll();
            drain(&mut far, &mut out.received[4]);
        }
    }
    e.poll();
    r.poll();
    drain(&mut b, &mut out.received[0]);
    drain(&mut c, &mut out.received[1]);
    drain(&mut a, &mut out.received[2]);
    drain(&mut far, &mut out.received[4]);
    out.counts = vec![a.counts(), b.counts(), c.counts(), far.counts()];
    out.engines = vec![e.counts(), r.counts()];
    out
}

/// Random streams of messages from `TailPush` to a receiver with the
/// standard applet (where a tail push goes straight into its RxBuf), one
/// without an applet, itself, one removed mid-stream (its channel
/// closed), one on another engine and no channel at all, of every size
/// class up to the largest, under random push and inbox budgets: the
/// tail push (mode 0) and the eager push of the same message (mode 2),
/// and the tail push on the JIT and on the interpreter, give the same
/// results, deliveries and counters.
#[test]
fn a_deferred_push_delivers_and_counts_as_the_eager_push() {
    let mut direct = 0;
    for seed in 0..40 {
        let tail = stream(seed, 0, false);
        for (what, other) in [
            ("the eager push", stream(seed, 2, false)),
            ("the interpreter's tail push", stream(seed, 0, true)),
        ] {
            assert!(
                tail == other,
                "seed {seed}: the JIT's tail push and {what} differ: sent {:?} / {:?}, counts {:?} / {:?}, engines {:?} / {:?}, messages received {:?} / {:?}",
                tail.sent,
                other.sent,
                tail.counts,
                other.counts,
                tail.engines,
                other.engines,
                tail.received.iter().map(Vec::len).collect::<Vec<_>>(),
                other.received.iter().map(Vec::len).collect::<Vec<_>>(),
            );
        }
        direct += tail.received[0].len();
    }
    assert!(direct > 100, "the streams deliver to the standard applet");
}
